#!/usr/bin/env bash
# The WebSocket bench's dependencies (bench/bench_ws.py): Node.js and npm
# from Debian, and the `ws` package in bench/node/node_modules (not
# committed). Does nothing when they are there. Called by `make bench`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "deps: installing nodejs npm" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >&2
fi
if [ ! -f "$ROOT/bench/node/node_modules/ws/package.json" ]; then
  echo "deps: npm install ws (bench/node)" >&2
  (cd "$ROOT/bench/node" && npm install --no-audit --no-fund --silent >&2)
fi

#!/usr/bin/env bash
# Installs the Debian 12 packages switchboard needs to build and test.
# Does nothing when all are present; runs apt-get update only when an
# install is needed; uses sudo when not root.
set -euo pipefail

PKGS=(
  build-essential pkg-config clang libclang-rt-14-dev
  libzmq3-dev libczmq-dev libmsgpack-dev libcurl4-openssl-dev libsodium-dev
  liblmdb-dev lmdb-utils libwebsockets-dev libjansson-dev libcriterion-dev
  python3-zmq python3-msgpack python3-websocket
  libedit-dev
  bubblewrap git procps
  chromium
)
# `make bench` adds the peers it measures us against in the same run.
if [ "${1:-}" = "--bench" ]; then
  PKGS+=(redis-server)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# Node.js and npm for the browser test (tests/browser): any node will do
if ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

# playwright-core for the browser test, at the version its package-lock.json pins
browser_deps() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
  if [ ! -f "$dir/node_modules/playwright-core/package.json" ] && command -v npm >/dev/null 2>&1; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2) \
      || echo "deps: npm ci in tests/browser failed; the browser test will skip" >&2
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  browser_deps
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
browser_deps

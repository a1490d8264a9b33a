#!/usr/bin/env bash
# Installs the Debian 12 packages switchboard needs to build and test.
# Does nothing when all are present; runs apt-get update only when an
# install is needed; uses sudo when not root.
#
# With --tests (make test, make asan) it also installs what the tests run
# that Debian does not package: the reference MCP server
# @modelcontextprotocol/server-everything, with npm, into tests/mcp
# (node_modules is git-ignored; the version is pinned in
# tests/mcp/package-lock.json).
set -euo pipefail

tests_step() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/mcp"
  if [ -f "$dir/node_modules/@modelcontextprotocol/server-everything/package.json" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "deps: npm is missing; installing Debian's npm" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >&2
  fi
  echo "deps: installing the reference MCP server into tests/mcp (npm ci)" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --silent) >&2 || \
    echo "deps: npm ci failed; test_mcp.py will skip what needs the reference server" >&2
}
if [ "${1:-}" = "--tests" ]; then
  trap tests_step EXIT
fi

PKGS=(
  build-essential pkg-config clang libclang-rt-14-dev
  libzmq3-dev libczmq-dev libmsgpack-dev libcurl4-openssl-dev libsodium-dev
  liblmdb-dev lmdb-utils libwebsockets-dev libjansson-dev libcriterion-dev
  python3-zmq python3-msgpack python3-websocket
  libedit-dev
  bubblewrap util-linux git procps nodejs
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

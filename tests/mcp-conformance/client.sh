#!/bin/sh
# The client under test of the MCP conformance suite: the suite starts a
# scenario's server, then runs this with the server's URL last, the
# scenario in MCP_CONFORMANCE_SCENARIO and, for some, what the client
# needs (credentials, a key) as JSON in MCP_CONFORMANCE_CONTEXT. It makes
# switchboard's MCP client (switchboard mcp probe, from $SB_BIN) do what
# the scenario needs. The suite's authorization servers redirect at once:
# --oauth-auto follows them (a probe feature; a person uses mcp login).
set -eu
url="$1"
sb="${SB_BIN:?SB_BIN: the switchboard binary}"
# One field of the context (node is the suite's own, on PATH).
ctx() { node -e 'const c=JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT||"{}");process.stdout.write(String(c[process.argv[1]]??""))' "$1"; }
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  tools_call) exec "$sb" mcp probe "$url" --call add_numbers --args '{"a":5,"b":3}' ;;
  sse-retry) exec "$sb" mcp probe "$url" --call test_reconnection ;;
  # No person here: --elicit-accept-defaults answers as one taking the defaults.
  elicitation-sep1034-client-defaults)
    exec "$sb" mcp probe "$url" --elicit-accept-defaults --call test_client_elicitation_defaults --timeout 10 ;;
  auth/scope-step-up) exec "$sb" mcp probe "$url" --oauth-auto --call test-tool --timeout 10 ;;
  auth/basic-cimd)
    exec "$sb" mcp probe "$url" --oauth-auto --timeout 10 \
      --client-metadata-url https://conformance-test.local/client-metadata.json ;;
  auth/pre-registration)
    exec "$sb" mcp probe "$url" --oauth-auto --timeout 10 --client-id "$(ctx client_id)" \
      --client-secret "$(ctx client_secret)" ;;
  auth/client-credentials-basic)
    exec "$sb" mcp probe "$url" --timeout 10 --client-credentials --client-id "$(ctx client_id)" \
      --client-secret "$(ctx client_secret)" ;;
  auth/client-credentials-jwt)
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    ctx private_key_pem > "$dir/key.pem"
    "$sb" mcp probe "$url" --timeout 10 --client-credentials --client-id "$(ctx client_id)" \
      --private-key "$dir/key.pem" ;;
  auth/cross-app-access-complete-flow)
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    ctx idp_id_token > "$dir/id_token"
    "$sb" mcp probe "$url" --timeout 10 --jwt-bearer --client-id "$(ctx client_id)" \
      --client-secret "$(ctx client_secret)" --idp-token-endpoint "$(ctx idp_token_endpoint)" \
      --idp-client-id "$(ctx idp_client_id)" --id-token-file "$dir/id_token" ;;
  auth/*) exec "$sb" mcp probe "$url" --oauth-auto --timeout 10 ;;
  *) exec "$sb" mcp probe "$url" --timeout 10 ;;
esac

/*  actors/session/mcp_servers.c — a session's choice of MCP servers (the
    record's mcp_servers, docs/mcp.md): names as mcpServers spells them,
    checked here, resolved by the executor (actors/exec/mcp.c). */
#include "actors/session/session_impl.h"

#include <string.h>

#define MCP_NAME_MAX 32

static bool
s_name_ok (const sb_val_t *v)
{
    if (v->type != SB_V_STR || v->len == 0 || v->len > MCP_NAME_MAX || strlen (v->v.s) != v->len)
        return false;
    if (v->len == 1 && v->v.s [0] == '*')
        return true;
    for (uint32_t i = 0; i < v->len; i++) {
        char c = v->v.s [i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    }
    return strstr (v->v.s, "__") == NULL;
}

bool
sb_session_mcp_servers_ok (req_t *req, const sb_val_t *names)
{
    for (uint32_t k = 0; names && k < names->len; k++)
        if (!s_name_ok (sb_array_at (names, k))) {
            sb_session_fail (req, SB_E_invalid, "mcp_servers: each name is 1 to %d letters, digits, - or _ "
                             "(no \"__\"), or \"*\" for all", MCP_NAME_MAX);
            return false;
        }
    return true;
}

const sb_val_t *
sb_session_mcp_servers (const sb_val_t *names)
{
    for (uint32_t k = 0; names && k < names->len; k++) {
        const sb_val_t *v = sb_array_at (names, k);
        if (v->type == SB_V_STR && v->len == 1 && v->v.s [0] == '*')
            return NULL;
    }
    return names;
}

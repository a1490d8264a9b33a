/*  actors/exec/mcp_elicit.c — MCP elicitation: the requested schema
    checked, the person's answer checked and completed with the schema's
    defaults, the JSON-RPC answer (actors/exec/mcp_elicit.h).
*/
#include "actors/exec/mcp_elicit.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTOR "exec"

static sb_mcp_elicitor_fn *s_elicitor;
static void *s_elicitor_arg;

void
sb_mcp_elicit_set_elicitor (sb_mcp_elicitor_fn *fn, void *arg)
{
    s_elicitor = fn;
    s_elicitor_arg = arg;
}

bool
sb_mcp_elicit_supported (void)
{
    return s_elicitor != NULL;
}


static json_t *
s_error (json_t *id, int code, const char *msg)
{
    return json_pack ("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", code, "message", msg);
}

json_t *
sb_mcp_elicit_answer (json_t *m, const char *server)
{
    json_t *id = json_object_get (m, "id");
    if (!s_elicitor)
        return s_error (id, -32601, "elicitation is not supported: no person can be asked here");
    json_t *params = json_object_get (m, "params");
    json_t *message = json_object_get (params, "message");
    json_t *schema = json_object_get (params, "requestedSchema");
    char err [256];
    if (!json_is_string (message) || json_string_length (message) > SB_ELICIT_MESSAGE_MAX)
        return s_error (id, -32602, "elicitation/create: the message is not a string of at most 4096 bytes");
    if (sb_elicit_schema_check (schema, err, sizeof err) != 0) {
        char msg [300];
        snprintf (msg, sizeof msg, "elicitation/create: %s", err);
        return s_error (id, -32602, msg);
    }
    //  in the server's order: the person sees the fields as it listed them
    char *text = json_dumps (schema, JSON_COMPACT);
    char *given = NULL;
    sb_mcp_elicit_action_t action = text ? s_elicitor (s_elicitor_arg, server, json_string_value (message), text,
                                                       &given) : SB_MCP_ELICIT_CANCEL;
    free (text);
    json_t *content = NULL;
    if (action == SB_MCP_ELICIT_ACCEPT) {
        json_t *g = given ? json_loads (given, JSON_REJECT_DUPLICATES, NULL) : NULL;
        bool parsed = g != NULL;
        content = g ? sb_elicit_content (schema, g, err, sizeof err) : NULL;
        json_decref (g);
        //  The elicitor checks the person's answer first: one that still
        //  fails here is ours, so the server is told the request ended.
        if (!content) {
            sb_warn (ACTOR, "MCP server %s: an elicitation answer did not fit its schema: %s", server,
                     parsed ? err : "not JSON");
            action = SB_MCP_ELICIT_CANCEL;
        }
    }
    free (given);
    const char *names [] = { "accept", "decline", "cancel" };
    json_t *result = json_pack ("{s:s}", "action", names [action]);
    if (content)
        json_object_set_new (result, "content", content);
    return json_pack ("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

sb_mcp_elicit_action_t
sb_mcp_elicit_accept_defaults (void *arg, const char *server, const char *message, const char *schema,
                               char **content)
{
    *content = strdup ("{}");
    return *content ? SB_MCP_ELICIT_ACCEPT : SB_MCP_ELICIT_CANCEL;
}

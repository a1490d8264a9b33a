/*  actors/exec/mcp_elicit.h — MCP elicitation (docs/mcp.md, "Elicitation"):
    a server's `elicitation/create` asks the person for a few values,
    described by a restricted JSON schema: a flat object whose properties
    are strings (optionally an enum of strings), numbers, integers or
    booleans, each with an optional default.

    What the server sends is checked before anything is shown or asked:
    the schema against that restriction and the bounds below, the answer
    (the person's content) against the schema, with the schema's defaults
    filling what the person left out.

    Who answers is the process's elicitor, installed once by the command
    that can ask (like the OAuth authorizer, actors/exec/mcp_oauth.h).
    Without one, the client does not declare the capability, and a
    server's elicitation/create is refused as not supported.
*/
#ifndef SB_EXEC_MCP_ELICIT_H
#define SB_EXEC_MCP_ELICIT_H

#include "schemas/elicit.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum { SB_MCP_ELICIT_ACCEPT, SB_MCP_ELICIT_DECLINE, SB_MCP_ELICIT_CANCEL } sb_mcp_elicit_action_t;

/*  The elicitor: asked the `message` of the server `server` with its
    checked `schema` (JSON text), returns the action; on accept, *content
    gets the person's values as a JSON object's text (malloc'd; "{}" takes
    every default), checked against the schema afterwards.                 */
typedef sb_mcp_elicit_action_t (sb_mcp_elicitor_fn) (void *arg, const char *server, const char *message,
                                                   const char *schema, char **content);
void sb_mcp_elicit_set_elicitor (sb_mcp_elicitor_fn *fn, void *arg);

//  Whether an elicitor is installed (the capability is declared).
bool sb_mcp_elicit_supported (void);

/*  The JSON-RPC result (or error) to the server's elicitation/create
    request `m`, through the elicitor. `server` names it to the person.   */
json_t *sb_mcp_elicit_answer (json_t *m, const char *server);

//  The elicitor of `mcp probe --elicit-accept-defaults` (a test feature):
//  accepts with every default.
sb_mcp_elicit_action_t sb_mcp_elicit_accept_defaults (void *arg, const char *server, const char *message,
                                                     const char *schema, char **content);

#endif

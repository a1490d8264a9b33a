/*  schemas/elicit.h — what an MCP elicitation may ask (docs/mcp.md,
    "Elicitation"): a flat object whose properties are strings (optionally
    an enum of strings), numbers, integers or booleans, each with an
    optional default, within the bounds below.

    Shared by the executor, which checks a server's requested schema
    before anything is shown, and the interact actor, which checks a
    person's content against the stored schema when they answer (and
    refuses it `invalid`, naming the field), so a wrong answer is told
    to the person and never reaches the server.
*/
#ifndef SB_SCHEMAS_ELICIT_H
#define SB_SCHEMAS_ELICIT_H

#include <jansson.h>
#include <stddef.h>

#define SB_ELICIT_MESSAGE_MAX   4096    //  bytes of the server's message
#define SB_ELICIT_FIELDS_MAX    32      //  properties of a schema
#define SB_ELICIT_NAME_MAX      64      //  bytes of a property's name
#define SB_ELICIT_TEXT_MAX      1024    //  bytes of a title, description, string value
#define SB_ELICIT_ENUM_MAX      64      //  members of an enum
#define SB_ELICIT_SCHEMA_MAX    (64 * 1024) //  bytes of a schema's JSON text
#define SB_ELICIT_CONTENT_MAX   (64 * 1024) //  bytes of a content's JSON text

//  0 when `schema` is a requested schema the client accepts, else -1
//  with why in err.
int sb_elicit_schema_check (json_t *schema, char *err, size_t errlen);

/*  The content to send for `given` (an object) under a checked `schema`:
    a new object with the defaults of the properties `given` lacks. NULL
    with why in err when a value is of the wrong type, outside its enum or
    bounds, names no property, or a required one is missing.              */
json_t *sb_elicit_content (json_t *schema, json_t *given, char *err, size_t errlen);

#endif

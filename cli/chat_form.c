/*  cli/chat_form.c — `chat` asks an MCP server's elicitation field by
    field (cli/chat.h, docs/approvals.md): the fields in the server's
    order, each line read in its field's type. interact checks the whole
    answer against the schema again and fills the defaults in. */
#include "cli/chat.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void
s_prompt (sb_chat_form_t *f)
{
    json_t *p = json_object_get (json_object_get (f->schema, "properties"), f->names [f->k]);
    json_t *def = json_object_get (p, "default");
    char *d = def ? json_dumps (def, JSON_ENCODE_ANY) : NULL;
    char *choices = json_object_get (p, "enum") ? json_dumps (json_object_get (p, "enum"), JSON_COMPACT) : NULL;
    const char *type = json_string_value (json_object_get (p, "type"));
    snprintf (f->prompt, sizeof f->prompt, "%s (%s%s%s%s%s) > ", f->names [f->k], type ? type : "?",
              choices ? " of " : "", choices ? choices : "", d ? ", Enter: " : "", d ? d : "");
    free (d);
    free (choices);
}

void
sb_chat_form_end (sb_chat_form_t *f)
{
    json_decref (f->schema);
    json_decref (f->content);
    free (f->names);
    memset (f, 0, sizeof *f);
}

int
sb_chat_form_begin (sb_chat_form_t *f, const char *schema)
{
    sb_chat_form_end (f);
    f->schema = schema ? json_loads (schema, 0, NULL) : NULL;
    f->content = json_object ();
    json_t *props = json_object_get (f->schema, "properties");
    f->names = calloc (json_object_size (props) + 1, sizeof *f->names);
    const char *name;
    json_t *p;
    json_object_foreach (props, name, p)
        if (f->names)
            f->names [f->n++] = name;
    if (!f->schema || !f->content || !f->names || f->n == 0) {
        sb_chat_form_end (f);
        return -1;
    }
    s_prompt (f);
    return 0;
}

bool
sb_chat_form_active (const sb_chat_form_t *f)
{
    return f->schema != NULL;
}

const char *
sb_chat_form_prompt (const sb_chat_form_t *f)
{
    return f->prompt;
}

//  `line` as a value of `type`, or NULL when it is not one.
static json_t *
s_value (const char *type, const char *line)
{
    char *end = NULL;
    if (strcmp (type, "integer") == 0) {
        long long n = strtoll (line, &end, 10);
        return *end ? NULL : json_integer (n);
    }
    if (strcmp (type, "number") == 0) {
        double d = strtod (line, &end);
        return *end ? NULL : json_real (d);
    }
    if (strcmp (type, "boolean") == 0) {
        bool yes = !strcasecmp (line, "y") || !strcasecmp (line, "yes") || !strcasecmp (line, "true");
        bool no = !strcasecmp (line, "n") || !strcasecmp (line, "no") || !strcasecmp (line, "false");
        return yes || no ? json_boolean (yes) : NULL;
    }
    return json_string (line);
}

sb_chat_form_step_t
sb_chat_form_take (sb_chat_form_t *f, const char *line, char *why, size_t whylen, char **content)
{
    while (*line == ' ' || *line == '\t')
        line++;
    if (strcmp (line, "/decline") == 0)
        return SB_CHAT_FORM_DECLINE;
    if (strcmp (line, "/cancel") == 0)
        return SB_CHAT_FORM_CANCEL;
    const char *name = f->names [f->k];
    json_t *p = json_object_get (json_object_get (f->schema, "properties"), name);
    const char *type = json_string_value (json_object_get (p, "type"));
    json_t *v = *line ? s_value (type ? type : "string", line) : NULL;
    if (*line && !v) {
        snprintf (why, whylen, "%s takes %s", name, strcmp (type, "boolean") == 0 ? "y or n"
                  : strcmp (type, "integer") == 0 ? "a whole number" : "a number");
        return SB_CHAT_FORM_BAD;
    }
    if (v)
        json_object_set_new (f->content, name, v);
    if (++f->k < f->n) {
        s_prompt (f);
        return SB_CHAT_FORM_NEXT;
    }
    *content = json_dumps (f->content, JSON_COMPACT);
    return SB_CHAT_FORM_DONE;
}

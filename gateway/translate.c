/*  gateway/translate.c — JSON in, msgpack out, for the types a browser
    may send; error frames; HTTP statuses; and the REST routes, which are
    only other spellings of a message type and its body (docs/gateway.md). */
#include "gateway/gateway_impl.h"
#include "schemas/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*  A field the table lacks, anywhere a table describes the map: the
    schema would let it through unread, and a client that misspells
    `session_id` deserves to hear so. Returns the dotted path, or NULL. */
static bool
s_unknown_field (const json_t *obj, const sb_field_t *fields, char *path, size_t n)
{
    if (!fields || !json_is_object (obj))
        return false;
    const char *key;
    json_t *val;
    json_object_foreach ((json_t *) obj, key, val) {
        const sb_field_t *f = NULL;
        for (const sb_field_t *k = fields; k->name; k++)
            if (strcmp (k->name, key) == 0) {
                f = k;
                break;
            }
        if (!f) {
            snprintf (path, n, "%s", key);
            return true;
        }
        char sub [200];
        if (f->type == SB_T_MAP && f->sub && s_unknown_field (val, f->sub, sub, sizeof sub)) {
            snprintf (path, n, "%s.%s", key, sub);
            return true;
        }
        if (f->type == SB_T_ARRAY && f->sub && f->sub->type == SB_T_MAP && f->sub->sub
        &&  json_is_array (val)) {
            size_t i;
            json_t *item;
            json_array_foreach (val, i, item)
                if (s_unknown_field (item, f->sub->sub, sub, sizeof sub)) {
                    snprintf (path, n, "%s[%zu].%s", key, i, sub);
                    return true;
                }
        }
    }
    return false;
}

int
gw_translate (const char *type_name, const json_t *body, uint8_t **msgpack, size_t *len,
              char *code, size_t code_len, char *message, size_t message_len)
{
    *msgpack = NULL;
    *len = 0;
    const sb_type_t *type = sb_schema_find (type_name, strlen (type_name));
    if (!type) {
        snprintf (code, code_len, "unknown_type");
        snprintf (message, message_len, "no message type '%.64s' (see docs/protocol.md)", type_name);
        return -1;
    }
    /* the scope column of the type's row is the whole policy: a browser
       can never append to a tape, claim a run or stream a model */
    if (!sb_type_in_scope (type, SB_SCOPE_PUBLIC) || (type->kind != SB_KIND_REQUEST && type->kind != SB_KIND_ONEWAY)) {
        snprintf (code, code_len, "forbidden");
        snprintf (message, message_len, "%s is internal: it does not pass the gateway", type->name);
        return -1;
    }
    json_t *empty = NULL;
    if (!body)
        body = empty = json_object ();
    if (!json_is_object (body)) {
        json_decref (empty);
        snprintf (code, code_len, "invalid");
        snprintf (message, message_len, "body: a JSON object is needed");
        return -1;
    }
    char path [200];
    if (s_unknown_field (body, type->fields, path, sizeof path)) {
        json_decref (empty);
        snprintf (code, code_len, "invalid");
        snprintf (message, message_len, "%s has no field '%s'", type->name, path);
        return -1;
    }
    sb_enc_t *enc = sb_enc_new ();
    sb_verr_t err = { 0 };
    int rc = enc ? sb_json_to_msgpack (body, type->fields, enc, &err) : -1;
    json_decref (empty);
    if (rc == 0) {
        size_t n;
        const uint8_t *data = sb_enc_data (enc, &n);
        sb_vstat_t stat;
        rc = sb_validate (data, n, type->fields, type->max_bytes, &stat, &err);
        if (rc == 0) {
            *msgpack = sb_enc_release (enc, len);
            rc = *msgpack ? 0 : -1;
            if (rc)
                err.code = SB_E_internal;
        }
    }
    else
    if (!enc)
        err.code = SB_E_internal;
    sb_enc_destroy (&enc);
    if (rc) {
        snprintf (code, code_len, "%s", sb_err_name (err.code ? err.code : SB_E_invalid));
        snprintf (message, message_len, "%s", err.message [0] ? err.message : "cannot translate the body");
    }
    return rc;
}

//  "{\"op\":\"<op>\"," followed by the JSON of `map` without its opening
//  brace: one copy, no re-parse.
static gw_buf_t *
s_frame_from_map (const char *prefix, const sb_val_t *map)
{
    char *text = sb_json_dump (map);
    if (!text || text [0] != '{') {
        free (text);
        return NULL;
    }
    size_t plen = strlen (prefix), tlen = strlen (text + 1);
    bool empty = strcmp (text, "{}") == 0;
    gw_buf_t *buf = gw_buf_alloc (plen + tlen);
    if (buf) {
        memcpy (gw_buf_text (buf), prefix, plen);
        memcpy (gw_buf_text (buf) + plen, text + 1, tlen);
        if (empty) {        /* "...,}" -> "...}" */
            gw_buf_text (buf) [plen - 1] = '}';
            buf->len = plen;
        }
    }
    free (text);
    return buf;
}

gw_buf_t *
gw_event_frame (const sb_val_t *event)
{
    return s_frame_from_map ("{\"op\":\"event\",", event);
}

gw_buf_t *
gw_reply_frame (const char *tx, const char *type, const sb_val_t *body)
{
    char *text = sb_json_dump (body);
    if (!text)
        return NULL;
    char head [200];
    int hl = snprintf (head, sizeof head, "{\"op\":\"reply\",\"tx\":%s,\"type\":\"%s\",\"body\":",
                       tx ? tx : "null", type);
    size_t tl = strlen (text);
    gw_buf_t *buf = hl > 0 && (size_t) hl < sizeof head ? gw_buf_alloc ((size_t) hl + tl + 1) : NULL;
    if (buf) {
        memcpy (gw_buf_text (buf), head, (size_t) hl);
        memcpy (gw_buf_text (buf) + hl, text, tl);
        gw_buf_text (buf) [hl + tl] = '}';
    }
    free (text);
    return buf;
}

//  An error reply as a WS frame (with retryable and detail when set) or
//  as REST's {error:{code,message}}.
gw_buf_t *
gw_error_json (const char *tx, bool http, const char *code, const char *message, bool retryable,
              const sb_val_t *detail)
{
    json_t *e = json_object ();
    json_object_set_new (e, "code", json_string (code));
    json_object_set_new (e, "message", json_string (message ? message : ""));
    if (retryable)
        json_object_set_new (e, "retryable", json_true ());
    if (detail) {
        json_t *d = sb_json_from_val (detail);
        if (d)
            json_object_set_new (e, "detail", d);
    }
    json_t *j;
    if (http)
        j = json_pack ("{s:o}", "error", e);
    else {
        j = e;
        json_t *txv = tx ? json_loads (tx, JSON_DECODE_ANY, NULL) : NULL;
        json_object_set_new (j, "tx", txv ? txv : json_null ());
        json_object_set_new (j, "op", json_string ("error"));
    }
    char *text = json_dumps (j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref (j);
    gw_buf_t *buf = text ? gw_buf_new (text, strlen (text)) : NULL;
    free (text);
    return buf;
}

gw_buf_t *
gw_error_frame (const char *tx, const char *code, const char *message)
{
    json_t *j = json_object ();
    json_object_set_new (j, "op", json_string ("error"));
    json_t *txv = tx ? json_loads (tx, JSON_DECODE_ANY, NULL) : NULL;
    json_object_set_new (j, "tx", txv ? txv : json_null ());
    json_object_set_new (j, "code", json_string (code));
    json_object_set_new (j, "message", json_string (message));
    char *text = json_dumps (j, JSON_COMPACT);
    json_decref (j);
    gw_buf_t *buf = text ? gw_buf_new (text, strlen (text)) : NULL;
    free (text);
    return buf;
}

int
gw_http_status (const char *code)
{
    static const struct { const char *code; int status; } map [] = {
        { "invalid", 400 }, { "version", 400 }, { "unauthorized", 401 }, { "forbidden", 403 },
        { "not_found", 404 }, { "unknown_type", 404 }, { "conflict", 409 }, { "fenced", 409 },
        { "too_large", 413 }, { "no_service", 503 }, { "unavailable", 503 }, { "overloaded", 503 },
        { "timeout", 504 }, { "cancelled", 409 }, { "disk_full", 507 },
    };
    for (size_t k = 0; k < sizeof map / sizeof map [0]; k++)
        if (strcmp (map [k].code, code) == 0)
            return map [k].status;
    return 500;
}

/* ------------------------------------------------------------------ */
/*  REST */

typedef enum { M_GET, M_POST } method_t;

//  A route: METHOD /api/<a>[/{id}[/<c>]] -> type, the id's field, and
//  which query arguments become which body fields (the rest pass as
//  they are named). A route names a type and nothing more: whether the
//  type may pass is its row's scope, which gw_translate reads for a
//  routed call as for any other.
typedef struct {
    method_t method;
    const char *a;              /* first segment */
    bool with_id;               /* /a/{id}... */
    const char *c;              /* third segment, or NULL */
    const char *type;
    const char *id_field;
    const char *renames;        /* "query=field,..." */
    bool known_only;            /* query arguments the type has no field for are dropped */
} route_t;

static const route_t s_routes [] = {
    { M_GET,  "sessions", false, NULL, "session.list", NULL, NULL },
    { M_POST, "sessions", false, NULL, "session.create", NULL, NULL },
    { M_GET,  "sessions", true, NULL, "session.get", "session_id", NULL },
    { M_GET,  "sessions", true, "events", "session.events", "session_id", "after=after_seq" },
    { M_POST, "sessions", true, "prompt", "session.prompt", "session_id", NULL },
    { M_POST, "sessions", true, "update", "session.update", "session_id", NULL },
    { M_POST, "sessions", true, "close", "session.close", "session_id", NULL },
    { M_POST, "sessions", true, "delete", "session.delete", "session_id", NULL },
    { M_POST, "sessions", true, "compact", "session.compact", "session_id", NULL },
    { M_POST, "sessions", true, "rewind", "session.rewind", "session_id", NULL },
    { M_POST, "sessions", true, "fork", "session.fork", "session_id", NULL },
    { M_GET,  "sessions", true, "queue", "session.queue.list", "session_id", NULL },
    { M_GET,  "sessions", true, "diff", "exec.diff", "session_id", NULL },
    { M_GET,  "sessions", true, "checkpoints", "exec.checkpoints", "session_id", "after=after_seq" },
    { M_GET,  "sessions", true, "checkpoint_diff", "exec.checkpoint_diff", "session_id", "from=from_seq,to=to_seq" },
    { M_GET,  "sessions", true, "usage", "session.usage", "session_id", NULL },
    { M_GET,  "usage", false, NULL, "session.usage", NULL, NULL },
    { M_GET,  "runs", false, NULL, "run.list", NULL, "session=session_id" },
    { M_GET,  "runs", true, NULL, "run.get", "run_id", NULL },
    { M_POST, "runs", true, "cancel", "run.cancel", "run_id", NULL },
    { M_POST, "runs", true, "resume", "run.resume", "run_id", NULL },
    { M_GET,  "interactions", false, NULL, "interact.list", NULL, "session=session_id,run=run_id" },
    { M_GET,  "interactions", true, NULL, "interact.get", "interaction_id", NULL },
    { M_POST, "interactions", true, "resolve", "interact.resolve", "interaction_id", NULL },
    { M_GET,  "workers", false, NULL, "worker.list", NULL, NULL },
    { M_GET,  "workers", true, NULL, "worker.get", "worker_id", NULL },
    { M_GET,  "models", false, NULL, "llm.models", NULL, NULL },
    { M_GET,  "mcp", false, NULL, "exec.mcp.list", NULL, NULL },
    { M_POST, "mcp", true, "login", "exec.mcp.login", "server", NULL },
    { M_POST, "mcp", true, "logout", "exec.mcp.logout", "server", NULL },
    /* the authorization server's redirect: /oauth/callback (gateway/http.c);
       it may add parameters of its own (session_state...) */
    { M_GET,  "oauth", false, NULL, "exec.mcp.oauth_callback", NULL, NULL, true },
};

//  The body field a query argument names under a route's renames.
static void
s_rename (const char *renames, const char *name, char *out, size_t n)
{
    size_t nl = strlen (name);
    for (const char *p = renames; p && *p; ) {
        const char *comma = strchr (p, ',');
        size_t len = comma ? (size_t) (comma - p) : strlen (p);
        const char *eq = memchr (p, '=', len);
        if (eq && (size_t) (eq - p) == nl && strncmp (p, name, nl) == 0) {
            snprintf (out, n, "%.*s", (int) (len - nl - 1), eq + 1);
            return;
        }
        p += len + (comma ? 1 : 0);
    }
    snprintf (out, n, "%s", name);
}

//  A query value for field `f`: numbers and booleans as JSON would carry
//  them, the rest as strings (the translation then checks them).
static json_t *
s_arg_value (const sb_field_t *f, const char *value)
{
    if (f && f->type == SB_T_BOOL) {
        if (strcmp (value, "true") == 0 || strcmp (value, "1") == 0)
            return json_true ();
        if (strcmp (value, "false") == 0 || strcmp (value, "0") == 0)
            return json_false ();
    }
    return json_string (value);
}

int
gw_rest_route (const char *method, const char *path, const gw_arg_t *args, size_t nargs,
               json_t *body, char *type, size_t type_len, json_t **out,
               char *code, size_t code_len, char *message, size_t message_len)
{
    *out = NULL;
    method_t m = strcmp (method, "POST") == 0 ? M_POST : M_GET;
    if (strncmp (path, "/api/", 5) != 0)
        goto not_found;
    const char *rest = path + 5;
    /* the generic translation: POST /api/call/<type> */
    if (strncmp (rest, "call/", 5) == 0) {
        if (m != M_POST) {
            snprintf (code, code_len, "invalid");
            snprintf (message, message_len, "POST a JSON body to /api/call/<type>");
            return 405;
        }
        snprintf (type, type_len, "%s", rest + 5);
        *out = body ? json_incref (body) : json_object ();
        return 0;
    }
    char seg [3][128] = { "", "", "" };
    int nseg = 0;
    for (const char *p = rest; *p && nseg < 4; ) {
        size_t len = strcspn (p, "/");
        if (len == 0 || len >= sizeof seg [0] || nseg == 3)
            goto not_found;
        memcpy (seg [nseg], p, len);
        seg [nseg][len] = 0;
        nseg++;
        p += len;
        if (*p == '/')
            p++;
    }
    bool path_known = false;
    for (size_t k = 0; k < sizeof s_routes / sizeof s_routes [0]; k++) {
        const route_t *r = &s_routes [k];
        int want = 1 + (r->with_id ? 1 : 0) + (r->c ? 1 : 0);
        if (nseg != want || strcmp (seg [0], r->a) != 0 || (r->c && strcmp (seg [2], r->c) != 0))
            continue;
        path_known = true;
        if (r->method != m)
            continue;
        if (m == M_POST && body && !json_is_object (body)) {
            snprintf (code, code_len, "invalid");
            snprintf (message, message_len, "the body must be a JSON object");
            return 400;
        }
        json_t *j = m == M_POST && body ? json_deep_copy (body) : json_object ();
        if (r->with_id)
            json_object_set_new (j, r->id_field, json_string (seg [1]));
        for (size_t i = 0; i < nargs; i++) {
            char field [64];
            s_rename (r->renames, args [i].name, field, sizeof field);
            if (r->known_only && !sb_schema_field (r->type, field))
                continue;
            json_object_set_new (j, field, s_arg_value (sb_schema_field (r->type, field), args [i].value));
        }
        snprintf (type, type_len, "%s", r->type);
        *out = j;
        return 0;
    }
    if (path_known) {
        snprintf (code, code_len, "invalid");
        snprintf (message, message_len, "%s is not allowed on %s", method, path);
        return 405;
    }
not_found:
    snprintf (code, code_len, "not_found");
    snprintf (message, message_len, "no such endpoint: %s %s (see docs/gateway.md)", method, path);
    return 404;
}

/*  tests/fuzz/fuzz_gateway.c — what a browser or a script sends the
    gateway (docs/gateway.md), through the gateway's own code.

    The first byte picks the door:
      0  a WebSocket call frame: parsed as the gateway parses one (1 MiB,
         32 deep), then its body translated with gw_translate for the type
         it names and for every public request type. Whatever gw_translate
         accepts must validate and decode against the type, and must not
         be an internal type;
      1  a REST request "METHOD PATH\nname=value\n...\nBODY": routed with
         gw_rest_route, then translated the same way;
      2  a Host header for the allowlist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gateway_impl.h"
#include "schemas/json.h"

static void
s_die (const char *what, const char *detail)
{
    fprintf (stderr, "fuzz_gateway: %s: %s\n", what, detail ? detail : "");
    abort ();
}

static void
s_translate (const char *type, const json_t *body)
{
    uint8_t *mp = NULL;
    size_t len = 0;
    char code [32], message [256];
    if (gw_translate (type, body, &mp, &len, code, sizeof code, message, sizeof message) != 0) {
        if (!code [0] || !message [0])
            s_die ("refused without a code and a message", type);
        if (mp)
            s_die ("refused but left bytes", type);
        return;
    }
    const sb_type_t *t = sb_schema_find (type, strlen (type));
    if (!t || !sb_type_in_scope (t, SB_SCOPE_PUBLIC) || t->kind != SB_KIND_REQUEST)
        s_die ("an internal or unknown type passed", type);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode_type (t, mp, len, &err);
    if (!doc)
        s_die ("accepted bytes do not decode", err.message);
    sb_doc_destroy (&doc);
    free (mp);
}

static void
s_ws_frame (const char *buf, size_t len)
{
    sb_verr_t err;
    json_t *j = sb_json_parse (buf, len, SB_GW_MAX_FRAME, SB_GW_MAX_DEPTH, &err);
    if (!j)
        return;
    json_t *body = json_object_get (j, "body");
    const char *type = json_string_value (json_object_get (j, "type"));
    if (type)
        s_translate (type, body);
    /* the same body against every public request type */
    size_t n;
    const sb_type_t *all = sb_schema_all (&n);
    for (size_t k = 0; k < n; k++)
        if (sb_type_in_scope (&all [k], SB_SCOPE_PUBLIC) && all [k].kind == SB_KIND_REQUEST)
            s_translate (all [k].name, body ? body : j);
    json_decref (j);
}

static void
s_rest (const char *buf, size_t len)
{
    char *copy = strndup (buf, len);
    if (!copy)
        return;
    char *line = strtok (copy, "\n");
    char method [8] = "GET", path [512] = "/";
    if (line && sscanf (line, "%7s %511s", method, path) < 1)
        line = NULL;
    gw_arg_t args [16];
    size_t nargs = 0;
    char *body_text = NULL;
    for (char *l = strtok (NULL, "\n"); l; l = strtok (NULL, "\n")) {
        char *eq = strchr (l, '=');
        if (eq && nargs < 16 && l [0] != '{') {
            *eq = 0;
            args [nargs++] = (gw_arg_t) { l, eq + 1 };
        }
        else {
            body_text = l;
            break;
        }
    }
    sb_verr_t err;
    json_t *body = body_text ? sb_json_parse (body_text, strlen (body_text), SB_GW_MAX_FRAME,
                                              SB_GW_MAX_DEPTH, &err) : NULL;
    char type [96], code [32], message [256];
    json_t *out = NULL;
    int status = gw_rest_route (method, path, args, nargs, body, type, sizeof type, &out,
                                code, sizeof code, message, sizeof message);
    if (status == 0) {
        if (!out)
            s_die ("a route without a body", path);
        s_translate (type, out);
    }
    else
    if (out || status < 400 || !code [0])
        s_die ("a refused route without its error", path);
    json_decref (out);
    json_decref (body);
    free (copy);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *buf = (const char *) data + 1;
    size_t len = size - 1;
    switch (data [0] % 3) {
        case 0: s_ws_frame (buf, len); break;
        case 1: s_rest (buf, len); break;
        case 2: {
            char *host = strndup (buf, len < 300 ? len : 300);
            if (host) {
                sb_gateway_host_ok (host, "127.0.0.1", NULL);
                sb_gateway_addr_loopback (host);
                free (host);
            }
            break;
        }
    }
    return 0;
}

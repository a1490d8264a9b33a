/*  bus/tap.c — see tap.h. */
#include "bus/tap.h"
#include "schemas/json.h"

#include <jansson.h>
#include <string.h>

int
sb_tap_parse (zmsg_t *msg, sb_tap_msg_t *t)
{
    if (zmsg_size (msg) != 4)
        return -1;
    zframe_t *plane = zmsg_first (msg);
    zframe_t *peer = zmsg_next (msg);
    t->header = zmsg_next (msg);
    t->body = zmsg_next (msg);
    sb_verr_t verr;
    if (sb_header_parse (zframe_data (t->header), zframe_size (t->header), &t->h, &verr))
        return -1;
    t->evt = zframe_size (plane) == 3 && memcmp (zframe_data (plane), "evt", 3) == 0;
    if (t->evt)
        snprintf (t->who, sizeof t->who, "%.*s", (int) (zframe_size (peer) > 200 ? 200 : zframe_size (peer)),
                  (const char *) zframe_data (peer));
    else
    if (zframe_size (peer) == 0)
        snprintf (t->who, sizeof t->who, "broker");
    else {
        static const char hex [] = "0123456789abcdef";
        size_t n = zframe_size (peer) > 64 ? 64 : zframe_size (peer);
        const uint8_t *p = zframe_data (peer);
        for (size_t k = 0; k < n; k++) {
            t->who [2 * k] = hex [p [k] >> 4];
            t->who [2 * k + 1] = hex [p [k] & 15];
        }
        t->who [2 * n] = 0;
    }
    return 0;
}

bool
sb_tap_is_heartbeat (const char *type)
{
    for (const char *p = strstr (type, "heartbeat"); p; p = strstr (p + 1, "heartbeat")) {
        char after = p [strlen ("heartbeat")];
        if ((p == type || p [-1] == '.') && (after == 0 || after == '.'))
            return true;
    }
    return false;
}

bool
sb_tap_matches (const sb_tap_msg_t *t, const char *prefix)
{
    size_t n = strlen (prefix);
    return strncmp (t->h.type, prefix, n) == 0 || (t->evt && strncmp (t->who, prefix, n) == 0);
}

static char *
s_decoded_json (zframe_t *frame, const sb_field_t *fields, uint32_t max_bytes)
{
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (zframe_data (frame), zframe_size (frame), fields, max_bytes, &verr);
    char *json = doc ? sb_json_dump (sb_doc_root (doc)) : NULL;
    sb_doc_destroy (&doc);
    return json;
}

char *
sb_tap_body_json (const sb_tap_msg_t *t)
{
    const sb_type_t *ty = sb_schema_find (t->h.type, strlen (t->h.type));
    return s_decoded_json (t->body, ty ? ty->fields : NULL, ty ? ty->max_bytes : 0);
}

char *
sb_tap_json (const sb_tap_msg_t *t, json_t *extra)
{
    json_t *o = extra ? json_deep_copy (extra) : json_object ();
    if (!o)
        return NULL;
    json_object_set_new (o, "plane", json_string (t->evt ? "evt" : "cmd"));
    json_object_set_new (o, t->evt ? "topic" : "peer", json_string (t->who));
    char *head = json_dumps (o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref (o);
    char *hj = s_decoded_json (t->header, sb_header_fields, 4096);
    char *bj = sb_tap_body_json (t);
    char *line = NULL;
    if (head) {
        //  the header and body are spliced in as the JSON sb_json_dump made
        head [strlen (head) - 1] = 0;
        size_t len = strlen (head) + (hj ? strlen (hj) : 4) + (bj ? strlen (bj) : 4) + 32;
        line = malloc (len);
        if (line)
            snprintf (line, len, "%s,\"header\":%s,\"body\":%s}", head, hj ? hj : "null", bj ? bj : "null");
    }
    free (head);
    free (hj);
    free (bj);
    return line;
}

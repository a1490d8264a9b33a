/*  tests/fuzz/fuzz_json.c — JSON parsing and JSON -> msgpack translation.

    Arbitrary bytes go the gateway's way: sb_json_parse, then
    sb_json_to_msgpack with the session.create fields (and with a table
    that has bin and integer fields, to reach base64 and decimal strings),
    then sb_validate. When a body is accepted, printing it as JSON and
    translating that back must settle: the second and third msgpack
    encodings are the same bytes. Top-level strings also exercise the
    base64 decoder directly, which must be canonical. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schemas/codec.h"
#include "schemas/json.h"

static const sb_field_t s_item_bin = { "item", SB_T_BIN, false, 64, NULL, "" };
static const sb_field_t s_sub [] = {
    { "b", SB_T_BIN, false, 0, NULL, "" },
    { "i", SB_T_INT, false, 0, NULL, "" },
    { NULL, 0, false, 0, NULL, NULL }
};
static const sb_field_t s_typed [] = {
    { "data", SB_T_BIN, false, 256, NULL, "" },
    { "n", SB_T_UINT, false, 0, NULL, "" },
    { "i", SB_T_INT, false, 0, NULL, "" },
    { "f", SB_T_FLOAT, false, 0, NULL, "" },
    { "s", SB_T_STR, false, 64, NULL, "" },
    { "m", SB_T_MAP, false, 8, s_sub, "" },
    { "arr", SB_T_ARRAY, false, 8, &s_item_bin, "" },
    { "free", SB_T_ANY, false, 0, NULL, "" },
    { NULL, 0, false, 0, NULL, NULL }
};

static void
s_die (const char *what, const sb_verr_t *err)
{
    fprintf (stderr, "fuzz_json: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
    abort ();
}

/*  JSON value -> msgpack bytes (validated) into `enc`. 0 when accepted. */
static int
s_to_msgpack (const json_t *j, const sb_field_t *fields, sb_enc_t *enc, sb_verr_t *err)
{
    sb_enc_reset (enc);
    if (sb_json_to_msgpack (j, fields, enc, err)) {
        if (err->code == SB_OK || !err->message [0])
            s_die ("translation failed without an error", err);
        return -1;
    }
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    return sb_validate (data, len, fields, 0, NULL, err);
}

/*  msgpack in `enc` -> JSON text -> msgpack in `out`. */
static void
s_through_json (sb_enc_t *enc, const sb_field_t *fields, sb_enc_t *out)
{
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, fields, 0, &err);
    if (!doc)
        s_die ("validated bytes failed to decode", &err);
    char *text = sb_json_dump (sb_doc_root (doc));
    if (!text)
        s_die ("an accepted body has no JSON form", NULL);
    json_t *j = sb_json_parse (text, strlen (text), 0, 0, &err);
    if (!j) {
        fprintf (stderr, "%s\n", text);
        s_die ("printed JSON does not parse", &err);
    }
    if (s_to_msgpack (j, fields, out, &err)) {
        fprintf (stderr, "%s\n", text);
        s_die ("printed JSON does not translate back", &err);
    }
    json_decref (j);
    free (text);
    sb_doc_destroy (&doc);
}

static void
s_check_settles (const json_t *j, const sb_field_t *fields)
{
    sb_enc_t *m1 = sb_enc_new (), *m2 = sb_enc_new (), *m3 = sb_enc_new ();
    sb_verr_t err;
    if (s_to_msgpack (j, fields, m1, &err) == 0) {
        /* the first trip may turn free-form big integers into strings;
           after that nothing may change */
        s_through_json (m1, fields, m2);
        s_through_json (m2, fields, m3);
        size_t l2, l3;
        const uint8_t *d2 = sb_enc_data (m2, &l2), *d3 = sb_enc_data (m3, &l3);
        if (l2 != l3 || memcmp (d2, d3, l2) != 0)
            s_die ("JSON round trips do not settle", NULL);
    }
    sb_enc_destroy (&m1);
    sb_enc_destroy (&m2);
    sb_enc_destroy (&m3);
}

static void
s_check_base64 (const json_t *j)
{
    const char *s = json_string_value (j);
    size_t n = json_string_length (j);
    uint8_t *bytes = malloc (sb_base64_decoded_max (n));
    ssize_t got = sb_base64_decode (s, n, bytes);
    if (got >= 0) {
        char *again = sb_base64_encode (bytes, (size_t) got);
        size_t a = strlen (again), b = n;
        while (a && again [a - 1] == '=')
            a--;
        while (b && s [b - 1] == '=')
            b--;
        /* one text, one meaning: the canonical form differs at most by
           padding */
        if (a != b || memcmp (again, s, a) != 0)
            s_die ("base64 accepted a non-canonical text", NULL);
        free (again);
    }
    free (bytes);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    sb_verr_t err;
    json_t *j = sb_json_parse ((const char *) data, size, 0, 0, &err);
    if (!j) {
        if (err.code == SB_OK || !err.message [0])
            s_die ("parse failed without an error", &err);
        return 0;
    }
    if (json_is_string (j))
        s_check_base64 (j);
    const sb_type_t *create = sb_schema_find ("session.create", 14);
    s_check_settles (j, create->fields);
    s_check_settles (j, s_typed);
    s_check_settles (j, NULL);
    json_decref (j);
    return 0;
}

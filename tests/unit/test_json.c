/*  tests/unit/test_json.c — JSON <-> msgpack translation.

    The round trips run the whole path the gateway will run: parse JSON,
    translate to msgpack with the field table, sb_validate, decode, and
    print back as JSON. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schemas/codec.h"
#include "schemas/json.h"

/*  Counts jansson's allocations, to prove that sb_json_parse refuses
    oversized and overdeep text before jansson allocates anything. */
static size_t s_json_allocs;

static void *
s_json_malloc (size_t n)
{
    s_json_allocs++;
    return malloc (n);
}

static void
s_json_free (void *p)
{
    free (p);
}

static void
s_count_json_allocs (void)
{
    json_set_alloc_funcs (s_json_malloc, s_json_free);
    s_json_allocs = 0;
}

static const sb_field_t s_item_bin = { "item", SB_T_BIN, false, 8, NULL, "" };
static const sb_field_t s_sub [] = {
    { "b", SB_T_BIN, false, 0, NULL, "" },
    { "u", SB_T_UINT, false, 0, NULL, "" },
    { NULL, 0, false, 0, NULL, NULL }
};
static const sb_field_t s_fields [] = {
    { "data", SB_T_BIN, true, 16, NULL, "" },
    { "n", SB_T_UINT, false, 0, NULL, "" },
    { "i", SB_T_INT, false, 0, NULL, "" },
    { "f", SB_T_FLOAT, false, 0, NULL, "" },
    { "s", SB_T_STR, false, 0, NULL, "" },
    { "ok", SB_T_BOOL, false, 0, NULL, "" },
    { "m", SB_T_MAP, false, 0, s_sub, "" },
    { "arr", SB_T_ARRAY, false, 0, &s_item_bin, "" },
    { "free", SB_T_ANY, false, 0, NULL, "" },
    { "fm", SB_T_MAP, false, 0, NULL, "" },
    { NULL, 0, false, 0, NULL, NULL }
};

/*  JSON text -> msgpack (validated) -> decoded doc. NULL with err on
    failure at any step. */
static sb_doc_t *
s_translate (const char *text, const sb_field_t *fields, sb_verr_t *err)
{
    json_t *j = sb_json_parse (text, strlen (text), 0, 0, err);
    if (!j)
        return NULL;
    sb_enc_t *enc = sb_enc_new ();
    sb_doc_t *doc = NULL;
    if (sb_json_to_msgpack (j, fields, enc, err) == 0) {
        size_t len;
        const uint8_t *data = sb_enc_data (enc, &len);
        doc = sb_decode (data, len, fields, 0, err);
    }
    sb_enc_destroy (&enc);
    json_decref (j);
    return doc;
}

/*  JSON -> msgpack -> JSON must give `want` (compact). */
static void
s_roundtrip (const char *text, const sb_field_t *fields, const char *want)
{
    sb_verr_t err;
    sb_doc_t *doc = s_translate (text, fields, &err);
    cr_assert_not_null (doc, "%s: %s", text, err.message);
    char *out = sb_json_dump (sb_doc_root (doc));
    cr_assert_not_null (out);
    cr_assert_str_eq (out, want, "in:   %s\nout:  %s\nwant: %s", text, out, want);
    free (out);
    sb_doc_destroy (&doc);
}

static void
s_translate_fails (const char *text, const sb_field_t *fields, sb_err_t code, const char *needle)
{
    sb_verr_t err;
    sb_doc_t *doc = s_translate (text, fields, &err);
    cr_assert_null (doc, "accepted: %s", text);
    cr_assert_eq (err.code, code, "%s: code %s (%s)", text, sb_err_name (err.code), err.message);
    cr_assert (strstr (err.message, needle), "%s: message '%s' lacks '%s'", text, err.message, needle);
}

/* ------------------------------------------------------------------ */

Test (json, bin_as_base64)
{
    sb_verr_t err;
    sb_doc_t *doc = s_translate ("{\"data\":\"AAEC/w==\",\"m\":{\"b\":\"aGk\"},\"arr\":[\"\",\"AA==\"]}",
                                 s_fields, &err);
    cr_assert_not_null (doc, "%s", err.message);
    const sb_val_t *root = sb_doc_root (doc);
    cr_assert_eq (sb_get (root, "data")->type, SB_V_BIN);
    size_t len;
    const char *bytes = sb_get_bin (root, "data", &len);
    cr_assert (len == 4 && memcmp (bytes, "\x00\x01\x02\xff", 4) == 0);
    cr_assert_eq (sb_get (sb_get_map (root, "m"), "b")->type, SB_V_BIN, "unpadded base64 works");
    cr_assert_str_eq (sb_get_bin (sb_get_map (root, "m"), "b", NULL), "hi");
    const sb_val_t *arr = sb_get_array (root, "arr");
    cr_assert (arr->len == 2 && sb_array_at (arr, 0)->type == SB_V_BIN && sb_array_at (arr, 0)->len == 0);
    cr_assert (sb_array_at (arr, 1)->len == 1 && sb_array_at (arr, 1)->v.s [0] == 0);
    sb_doc_destroy (&doc);

    /* and back: bin travels as padded base64 */
    s_roundtrip ("{\"data\":\"AAEC/w\",\"arr\":[\"AAE\"]}", s_fields,
                 "{\"data\":\"AAEC/w==\",\"arr\":[\"AAE=\"]}");

    /* a string in a free-form place stays a string */
    s_roundtrip ("{\"data\":\"\",\"free\":\"AAEC\",\"fm\":{\"x\":\"AAEC\"}}", s_fields,
                 "{\"data\":\"\",\"free\":\"AAEC\",\"fm\":{\"x\":\"AAEC\"}}");
}

Test (json, bad_base64)
{
    const char *bad [] = { "A", "AB=C", "====", "AB$=", "AB==", "AQ=", "AQ===", "A===",
                           "AAEC/w=", " AAA", "AA\\nAA", "AAE=AAE=" };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        char text [64];
        snprintf (text, sizeof text, "{\"data\":\"%s\"}", bad [k]);
        s_translate_fails (text, s_fields, SB_E_invalid, "data: expected bin as a base64 string");
    }
    s_translate_fails ("{\"data\":\"\",\"m\":{\"b\":\"!\"}}", s_fields, SB_E_invalid,
                       "m.b: expected bin");
    s_translate_fails ("{\"data\":\"\",\"arr\":[\"AA==\",\"*\"]}", s_fields, SB_E_invalid,
                       "arr[1]: expected bin");
    /* a decoded size over the field's limit is the validator's call */
    s_translate_fails ("{\"data\":\"AAAAAAAAAAAAAAAAAAAAAAAA\"}", s_fields, SB_E_too_large,
                       "data: length 18 is over the limit of 16");
    /* a number where bytes belong: translated, then refused by type */
    s_translate_fails ("{\"data\":5}", s_fields, SB_E_invalid, "data: expected bin");
}

Test (json, base64_all_lengths)
{
    uint8_t src [64], out [64 + 3];
    for (size_t k = 0; k < sizeof src; k++)
        src [k] = (uint8_t) (k * 37 + 11);
    for (size_t n = 0; n <= sizeof src; n++) {
        char *text = sb_base64_encode (src, n);
        cr_assert_not_null (text);
        size_t tlen = strlen (text);
        cr_assert_eq (tlen, (n + 2) / 3 * 4);
        cr_assert_leq (n, sb_base64_decoded_max (tlen));
        cr_assert_eq (sb_base64_decode (text, tlen, out), (ssize_t) n);
        cr_assert (memcmp (src, out, n) == 0);
        /* without its padding too */
        while (tlen && text [tlen - 1] == '=')
            tlen--;
        cr_assert_eq (sb_base64_decode (text, tlen, out), (ssize_t) n, "unpadded, %zu bytes", n);
        cr_assert (memcmp (src, out, n) == 0);
        free (text);
    }
    char *all = sb_base64_encode ("\xfb\xff\xbf", 3);
    cr_assert_str_eq (all, "+/+/");
    free (all);
}

Test (json, big_integers_as_strings)
{
    /* typed fields take decimal strings at the full 64-bit range */
    sb_verr_t err;
    sb_doc_t *doc = s_translate ("{\"data\":\"\",\"n\":\"18446744073709551615\","
                                 "\"i\":\"-9223372036854775808\",\"m\":{\"u\":\"0\"}}", s_fields, &err);
    cr_assert_not_null (doc, "%s", err.message);
    const sb_val_t *root = sb_doc_root (doc);
    cr_assert_eq (sb_get_uint (root, "n", 0), UINT64_MAX);
    cr_assert_eq (sb_get_int (root, "i", 0), INT64_MIN);
    cr_assert_eq (sb_get (sb_get_map (root, "m"), "u")->type, SB_V_UINT);
    char *out = sb_json_dump (root);
    cr_assert_str_eq (out, "{\"data\":\"\",\"n\":\"18446744073709551615\","
                           "\"i\":\"-9223372036854775808\",\"m\":{\"u\":0}}");
    free (out);
    sb_doc_destroy (&doc);

    /* the line is JavaScript's safe range: |x| <= 2^53 - 1 stays a number */
    s_roundtrip ("{\"data\":\"\",\"n\":9007199254740991,\"i\":-9007199254740991}", s_fields,
                 "{\"data\":\"\",\"n\":9007199254740991,\"i\":-9007199254740991}");
    s_roundtrip ("{\"data\":\"\",\"n\":9007199254740992,\"i\":-9007199254740992}", s_fields,
                 "{\"data\":\"\",\"n\":\"9007199254740992\",\"i\":\"-9007199254740992\"}");
    /* small integers as strings come back as numbers */
    s_roundtrip ("{\"data\":\"\",\"n\":\"42\",\"i\":\"-7\",\"f\":3}", s_fields,
                 "{\"data\":\"\",\"n\":42,\"i\":-7,\"f\":3}");
    /* free-form big integers print as strings too */
    s_roundtrip ("{\"data\":\"\",\"free\":[9223372036854775807,-9223372036854775808]}", s_fields,
                 "{\"data\":\"\",\"free\":[\"9223372036854775807\",\"-9223372036854775808\"]}");

    /* not decimal integers */
    const char *bad [] = { "", "-", "+1", " 1", "1 ", "1.5", "1e3", "0x10", "abc",
                           "18446744073709551616", "-9223372036854775809" };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        char text [96];
        snprintf (text, sizeof text, "{\"data\":\"\",\"n\":\"%s\"}", bad [k]);
        s_translate_fails (text, s_fields, SB_E_invalid, "n: expected uint");
        snprintf (text, sizeof text, "{\"data\":\"\",\"i\":\"%s\"}", bad [k]);
        s_translate_fails (text, s_fields, SB_E_invalid, "i: ");
    }
    /* well-formed but out of the field's range: the validator says so */
    s_translate_fails ("{\"data\":\"\",\"n\":\"-1\"}", s_fields, SB_E_invalid, "n: expected uint");
    s_translate_fails ("{\"data\":\"\",\"n\":-1}", s_fields, SB_E_invalid, "n: expected uint");
    s_translate_fails ("{\"data\":\"\",\"i\":\"9223372036854775808\"}", s_fields, SB_E_invalid,
                       "i: expected int");
    s_translate_fails ("{\"data\":\"\",\"n\":1.5}", s_fields, SB_E_invalid, "n: expected uint");
}

Test (json, floats_and_free_form)
{
    /* a float field takes integers and reals */
    s_roundtrip ("{\"data\":\"\",\"f\":-2}", s_fields, "{\"data\":\"\",\"f\":-2}");
    s_roundtrip ("{\"data\":\"\",\"f\":0.1}", s_fields, "{\"data\":\"\",\"f\":0.10000000000000001}");
    s_roundtrip ("{\"data\":\"\",\"f\":1e300}", s_fields, "{\"data\":\"\",\"f\":1.0000000000000001e300}");
    s_translate_fails ("{\"data\":\"\",\"f\":\"1.5\"}", s_fields, SB_E_invalid, "f: expected float");
    /* an integer past 2^53 in a float field prints as a string and must
       come back */
    s_roundtrip ("{\"data\":\"\",\"f\":\"1152921504606846976\"}", s_fields,
                 "{\"data\":\"\",\"f\":\"1152921504606846976\"}");
    s_roundtrip ("{\"data\":\"\",\"f\":\"-12\"}", s_fields, "{\"data\":\"\",\"f\":-12}");

    /* free-form values map naturally */
    sb_verr_t err;
    sb_doc_t *doc = s_translate ("{\"data\":\"\",\"free\":{\"i\":-1,\"u\":1,\"r\":1.5,\"s\":\"x\","
                                 "\"t\":true,\"f\":false,\"z\":null,\"a\":[[],{}]}}", s_fields, &err);
    cr_assert_not_null (doc, "%s", err.message);
    const sb_val_t *free_ = sb_get_map (sb_doc_root (doc), "free");
    cr_assert_not_null (free_);
    cr_assert_eq (free_->len, 8);
    const sb_vtype_t want [] = { SB_V_INT, SB_V_UINT, SB_V_FLOAT, SB_V_STR, SB_V_BOOL, SB_V_BOOL,
                                 SB_V_NIL, SB_V_ARRAY };
    for (uint32_t k = 0; k < 8; k++)
        cr_assert_eq (sb_map_val (free_, k)->type, want [k], "free value %u", k);
    const sb_val_t *a = sb_get_array (free_, "a");
    cr_assert (sb_array_at (a, 0)->type == SB_V_ARRAY && sb_array_at (a, 1)->type == SB_V_MAP);
    char *out = sb_json_dump (sb_doc_root (doc));
    cr_assert_str_eq (out, "{\"data\":\"\",\"free\":{\"i\":-1,\"u\":1,\"r\":1.5,\"s\":\"x\","
                           "\"t\":true,\"f\":false,\"z\":null,\"a\":[[],{}]}}");
    free (out);
    sb_doc_destroy (&doc);

    /* types the schema refuses are translated, then named by the validator */
    s_translate_fails ("{\"data\":\"\",\"s\":1}", s_fields, SB_E_invalid, "s: expected str");
    s_translate_fails ("{\"data\":\"\",\"ok\":\"yes\"}", s_fields, SB_E_invalid, "ok: expected bool");
    s_translate_fails ("{\"data\":\"\",\"m\":[]}", s_fields, SB_E_invalid, "m: expected map");
    s_translate_fails ("{\"data\":\"\",\"arr\":{}}", s_fields, SB_E_invalid, "arr: expected array");
    s_translate_fails ("{}", s_fields, SB_E_invalid, "missing required field 'data'");
    s_translate_fails ("{\"data\":null}", s_fields, SB_E_invalid, "data: expected bin");
}

Test (json, real_schema_session_create)
{
    const sb_type_t *t = sb_schema_find ("session.create", 14);
    cr_assert_not_null (t);
    const char *in = "{\"workspace\":\"/tmp/w\",\"title\":\"caf\xc3\xa9 \\\"quoted\\\"\",\"max_steps\":\"25\","
                     "\"labels\":{\"team\":\"core\",\"n\":3},\"command_id\":\"c1\"}";
    s_roundtrip (in, t->fields, "{\"workspace\":\"/tmp/w\",\"title\":\"caf\xc3\xa9 \\\"quoted\\\"\","
                 "\"max_steps\":25,\"labels\":{\"team\":\"core\",\"n\":3},\"command_id\":\"c1\"}");
    s_translate_fails ("{\"workspace\":5}", t->fields, SB_E_invalid, "workspace: expected str");
    s_translate_fails ("{\"title\":\"x\"}", t->fields, SB_E_invalid, "missing required field 'workspace'");
    s_translate_fails ("[1]", t->fields, SB_E_invalid, "expected a JSON object");
    s_translate_fails ("\"s\"", t->fields, SB_E_invalid, "expected a JSON object");
}

Test (json, nesting_limit)
{
    char buf [200];
    for (int depth = 31; depth <= 34; depth++) {
        int n = 0;
        for (int k = 0; k < depth; k++)
            buf [n++] = '[';
        for (int k = 0; k < depth; k++)
            buf [n++] = ']';
        s_count_json_allocs ();
        sb_verr_t err;
        json_t *j = sb_json_parse (buf, (size_t) n, 0, 0, &err);
        if (depth <= 32) {
            cr_assert_not_null (j, "depth %d: %s", depth, err.message);
            cr_assert_eq (err.code, SB_OK);
        }
        else {
            cr_assert_null (j, "depth %d accepted", depth);
            cr_assert_eq (err.code, SB_E_invalid);
            cr_assert (strstr (err.message, "nesting deeper than 32 at byte 32"), "%s", err.message);
            cr_assert_eq (s_json_allocs, 0, "jansson allocated before the depth check");
        }
        json_decref (j);
    }
    /* objects count as levels too, and a caller's lower cap applies */
    const char *objs = "{\"a\":{\"b\":{\"c\":1}}}";
    sb_verr_t err;
    json_t *j = sb_json_parse (objs, strlen (objs), 0, 3, &err);
    cr_assert_not_null (j, "%s", err.message);
    json_decref (j);
    cr_assert_null (sb_json_parse (objs, strlen (objs), 0, 2, &err));
    cr_assert (strstr (err.message, "nesting deeper than 2"));

    /* brackets inside strings are text, escaped quotes included */
    char text [256];
    int n = snprintf (text, sizeof text, "{\"s\":\"%s\",\"t\":\"\\\"[[[[\\\\\",\"u\":[1]}",
                      "[[[[[[[[[[[[[[[[[[[[{{{{{{{{{{{{{{{{{{{{[[[[[[[[");
    j = sb_json_parse (text, (size_t) n, 0, 2, &err);
    cr_assert_not_null (j, "%s", err.message);
    cr_assert_str_eq (json_string_value (json_object_get (j, "t")), "\"[[[[\\");
    json_decref (j);

    /* the translation has its own guard for documents built in memory:
       a chain of objects 33 deep */
    json_t *deep = json_object ();
    json_t *cur = deep;
    for (int k = 1; k < 33; k++) {
        json_t *next = json_object ();
        json_object_set_new (cur, "x", next);
        cur = next;
    }
    sb_enc_t *enc = sb_enc_new ();
    cr_assert_eq (sb_json_to_msgpack (deep, NULL, enc, &err), -1);
    cr_assert (strstr (err.message, "nesting deeper than 32"), "%s", err.message);
    json_decref (deep);
    /* 32 deep translates; the msgpack validator then enforces its 16 */
    deep = json_object ();
    cur = deep;
    for (int k = 1; k < 32; k++) {
        json_t *next = json_object ();
        json_object_set_new (cur, "x", next);
        cur = next;
    }
    sb_enc_reset (enc);
    cr_assert_eq (sb_json_to_msgpack (deep, NULL, enc, &err), 0, "%s", err.message);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    cr_assert_eq (sb_validate (data, len, NULL, 0, NULL, &err), -1);
    cr_assert (strstr (err.message, "nesting deeper than 16"));
    json_decref (deep);
    sb_enc_destroy (&enc);
}

Test (json, size_cap)
{
    size_t big = SB_JSON_MAX_BYTES + 1;
    char *text = malloc (big);
    memset (text, ' ', big);
    text [0] = '[';
    text [big - 1] = ']';
    s_count_json_allocs ();
    sb_verr_t err;
    cr_assert_null (sb_json_parse (text, big, 0, 0, &err));
    cr_assert_eq (err.code, SB_E_too_large);
    cr_assert (strstr (err.message, "over the limit of 1048576"), "%s", err.message);
    cr_assert_eq (s_json_allocs, 0);
    /* at the cap it parses */
    json_t *j = sb_json_parse (text + 1, big - 1, 0, 0, &err);
    cr_assert_null (j, "starts with spaces then ]: malformed, but not too large");
    cr_assert_eq (err.code, SB_E_invalid);
    text [1] = '[';
    j = sb_json_parse (text + 1, big - 1, 0, 0, &err);
    cr_assert_not_null (j, "%s", err.message);
    json_decref (j);
    /* a caller's own cap */
    cr_assert_null (sb_json_parse ("[1,2]", 5, 4, 0, &err));
    cr_assert_eq (err.code, SB_E_too_large);
    free (text);

    /* empty input */
    cr_assert_null (sb_json_parse ("", 0, 0, 0, &err));
    cr_assert_eq (err.code, SB_E_invalid);
    cr_assert_str_eq (err.message, "empty JSON");
    cr_assert_null (sb_json_parse (NULL, 0, 0, 0, NULL), "a NULL err is tolerated");
}

Test (json, duplicates_and_malformed)
{
    sb_verr_t err;
    const char *dup = "{\"a\":1,\"b\":{\"c\":1,\"c\":2}}";
    cr_assert_null (sb_json_parse (dup, strlen (dup), 0, 0, &err));
    cr_assert_eq (err.code, SB_E_invalid);
    cr_assert (strstr (err.message, "duplicate object key"), "%s", err.message);

    const char *cut = "{\"a\":1,";
    cr_assert_null (sb_json_parse (cut, strlen (cut), 0, 0, &err));
    cr_assert_eq (err.code, SB_E_invalid);
    cr_assert (strstr (err.message, "invalid JSON at line 1, column "), "%s", err.message);
    cr_assert (strstr (err.message, "(byte 7)"), "%s", err.message);

    const char *lines = "{\n  \"a\": 1,\n  \"b\": tru\n}";
    cr_assert_null (sb_json_parse (lines, strlen (lines), 0, 0, &err));
    cr_assert (strstr (err.message, "invalid JSON at line 3, column "), "%s", err.message);

    const char *trailing = "{} {}";
    cr_assert_null (sb_json_parse (trailing, strlen (trailing), 0, 0, &err));
    cr_assert (strstr (err.message, "end of file expected"), "%s", err.message);

    /* \u0000 is refused: C readers downstream would cut the string there */
    const char *nul = "{\"a\":\"x\\u0000y\"}";
    cr_assert_null (sb_json_parse (nul, strlen (nul), 0, 0, &err));
    cr_assert_eq (err.code, SB_E_invalid);

    /* bytes that are not UTF-8 */
    const char *latin1 = "{\"a\":\"caf\xe9\"}";
    cr_assert_null (sb_json_parse (latin1, strlen (latin1), 0, 0, &err));
    cr_assert_eq (err.code, SB_E_invalid);

    /* a length that stops short of a NUL-free buffer's end is honoured */
    const char *two = "[1][2]";
    json_t *j = sb_json_parse (two, 3, 0, 0, &err);
    cr_assert_not_null (j, "%s", err.message);
    json_decref (j);

    /* top-level scalars parse; the translator wants an object */
    j = sb_json_parse ("42", 2, 0, 0, &err);
    cr_assert (j && json_integer_value (j) == 42);
    sb_enc_t *enc = sb_enc_new ();
    cr_assert_eq (sb_json_to_msgpack (j, NULL, enc, &err), -1);
    cr_assert_str_eq (err.message, "expected a JSON object");
    cr_assert_eq (sb_json_to_msgpack (NULL, NULL, enc, &err), -1);
    json_decref (j);

    /* a key with a NUL, possible only in a document built in memory */
    j = json_object ();
    json_object_setn_new (j, "a\0b", 3, json_true ());
    cr_assert_eq (sb_json_to_msgpack (j, NULL, enc, &err), -1);
    cr_assert (strstr (err.message, "NUL"), "%s", err.message);
    json_decref (j);
    sb_enc_destroy (&enc);
}

/* ------------------------------------------------------------------ */
/*  msgpack -> JSON for what JSON cannot say directly */

static sb_doc_t *
s_decode_raw (const uint8_t *buf, size_t len)
{
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (buf, len, NULL, 0, &err);
    cr_assert_not_null (doc, "%s", err.message);
    return doc;
}

Test (json, from_val_keys_and_odd_values)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_key (enc, "nan");
    sb_enc_float (enc, NAN);
    sb_enc_key (enc, "inf");
    sb_enc_float (enc, -INFINITY);
    sb_enc_key (enc, "bad");
    sb_enc_strn (enc, "a\xff" "b\xc0\x80" "c\xed\xa0\x80", 9);
    sb_enc_key (enc, "nul");
    sb_enc_strn (enc, "x\0y", 3);
    sb_enc_key (enc, "bin");
    sb_enc_bin (enc, "\x00\xfb\xff", 3);
    sb_enc_key (enc, "neg");
    sb_enc_float (enc, -0.0);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_doc_t *doc = s_decode_raw (data, len);
    char *out = sb_json_dump (sb_doc_root (doc));
    cr_assert_str_eq (out, "{\"nan\":null,\"inf\":null,"
                           "\"bad\":\"a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\","
                           "\"nul\":\"x\\u0000y\",\"bin\":\"APv/\",\"neg\":-0.0}");
    free (out);
    sb_doc_destroy (&doc);
    sb_enc_destroy (&enc);

    /* map keys that are not strings: {1:..., -2:..., true:..., nil:..., 1.5:..., bin:..., "\xff":...} */
    const uint8_t keys [] = { 0x87,
        0x01, 0xa1, 'a',
        0xfe, 0xa1, 'b',
        0xc3, 0xa1, 'c',
        0xc0, 0xa1, 'd',
        0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0xa1, 'e',
        0xc4, 0x02, 0x00, 0x01, 0xa1, 'f',
        0xa1, 0xff, 0xa1, 'g' };
    doc = s_decode_raw (keys, sizeof keys);
    out = sb_json_dump (sb_doc_root (doc));
    cr_assert_str_eq (out, "{\"1\":\"a\",\"-2\":\"b\",\"true\":\"c\",\"null\":\"d\",\"1.5\":\"e\","
                           "\"AAE=\":\"f\",\"\xef\xbf\xbd\":\"g\"}");
    free (out);
    sb_doc_destroy (&doc);

    /* a repeated key: the first one wins, as for sb_get */
    const uint8_t rep [] = { 0x82, 0xa1, 'k', 0x01, 0xa1, 'k', 0x02 };
    doc = s_decode_raw (rep, sizeof rep);
    out = sb_json_dump (sb_doc_root (doc));
    cr_assert_str_eq (out, "{\"k\":1}");
    free (out);

    /* sb_json_print writes one line */
    char *mem = NULL;
    size_t mlen = 0;
    FILE *f = open_memstream (&mem, &mlen);
    cr_assert_eq (sb_json_print (f, sb_doc_root (doc)), 0);
    cr_assert_eq (sb_json_print (f, sb_get (sb_doc_root (doc), "k")), 0, "scalars print too");
    fclose (f);
    cr_assert_str_eq (mem, "{\"k\":1}\n1\n");
    free (mem);
    sb_doc_destroy (&doc);

    cr_assert_null (sb_json_from_val (NULL));
    cr_assert_null (sb_json_dump (NULL));
}

/*  Every schema type's generated-like body survives msgpack -> JSON ->
    msgpack with its typed values intact. */
/*  Integers past 2^53 travel as decimal strings. The bus's own fields
    are ranged below 2^53 (docs/protocol.md), so an unranged table
    carries them here. */
static const sb_field_t s_big_inner [] = {
    { "session_id", SB_T_STR, true, 32, NULL, "" },
    { "created_at", SB_T_UINT, true, 0, NULL, "" },
    { "updated_at", SB_T_UINT, true, 0, NULL, "" },
    { "status", SB_T_STR, true, 16, NULL, "" },
    { "workspace", SB_T_STR, true, 4096, NULL, "" },
    { "last_seq", SB_T_UINT, true, 0, NULL, "" },
    { "turn_status", SB_T_STR, true, 16, NULL, "" },
    { NULL, 0, false, 0, NULL, NULL }
};
static const sb_field_t s_big [] = {
    { "session", SB_T_MAP, true, 0, s_big_inner, "" },
    { NULL, 0, false, 0, NULL, NULL }
};
static const sb_type_t s_big_type = { "big.ok", SB_KIND_REPLY, true, s_big, 0, "" };

Test (json, typed_values_survive_both_ways)
{
    const sb_type_t *t = &s_big_type;
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_key (enc, "session");
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", "01HZX");
    sb_enc_kuint (enc, "created_at", UINT64_MAX);
    sb_enc_kuint (enc, "updated_at", 1700000000000ull);
    sb_enc_kstr (enc, "status", "active");
    sb_enc_kstr (enc, "workspace", "/w");
    sb_enc_kuint (enc, "last_seq", (1ull << 53));
    sb_enc_kstr (enc, "turn_status", "idle");
    sb_enc_map_close (enc);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode_type (t, data, len, &err);
    cr_assert_not_null (doc, "%s", err.message);
    char *text = sb_json_dump (sb_doc_root (doc));
    cr_assert (strstr (text, "\"created_at\":\"18446744073709551615\""), "%s", text);
    cr_assert (strstr (text, "\"last_seq\":\"9007199254740992\""), "%s", text);
    cr_assert (strstr (text, "\"updated_at\":1700000000000"), "%s", text);

    sb_doc_t *back = s_translate (text, t->fields, &err);
    cr_assert_not_null (back, "%s", err.message);
    sb_enc_t *enc2 = sb_enc_new ();
    sb_enc_val (enc2, sb_doc_root (back));
    size_t len2;
    const uint8_t *data2 = sb_enc_data (enc2, &len2);
    cr_assert_eq (len2, len);
    cr_assert (memcmp (data, data2, len) == 0, "msgpack -> JSON -> msgpack changed the bytes");
    free (text);
    sb_doc_destroy (&doc);
    sb_doc_destroy (&back);
    sb_enc_destroy (&enc);
    sb_enc_destroy (&enc2);
}

/*  The gateway's way in (issue 9, items 9 and 10): a JSON body cannot
    carry what the msgpack side refuses either. Huge integers reach the
    declared ranges whether written as numbers or decimal strings; text
    that is not text, and numbers JSON cannot hold, stop at the parser. */
Test (json, huge_integers_and_bad_text_refused_on_the_way_in)
{
    const sb_type_t *req = sb_schema_find ("run.request", 11);
    cr_assert_not_null (req);
    s_translate_fails ("{\"session_id\":\"01JABCDEFGHJKMNPQRSTVWXYZ0\",\"limits\":{\"timeout_s\":4611686018427387904}}",
                       req->fields, SB_E_invalid, "limits.timeout_s: 4611686018427387904 is out of range");
    s_translate_fails ("{\"session_id\":\"01JABCDEFGHJKMNPQRSTVWXYZ0\",\"limits\":{\"timeout_s\":\"18446744073709551615\"}}",
                       req->fields, SB_E_invalid, "limits.timeout_s: 18446744073709551615 is out of range");
    s_translate_fails ("{\"session_id\":\"01JABCDEFGHJKMNPQRSTVWXYZ0\",\"limits\":{\"max_steps\":-1}}",
                       req->fields, SB_E_invalid, "limits.max_steps");
    s_roundtrip ("{\"session_id\":\"01JABCDEFGHJKMNPQRSTVWXYZ0\",\"limits\":{\"timeout_s\":2592000}}", req->fields,
                 "{\"session_id\":\"01JABCDEFGHJKMNPQRSTVWXYZ0\",\"limits\":{\"timeout_s\":2592000}}");

    const sb_field_t *note = sb_schema_tape_kind ("note")->fields;
    const char *bad [] = {
        "{\"text\":\"a\\u0000b\"}",
        "{\"text\":\"\\ud800\"}",
        "{\"text\":\"\xed\xa0\x80\"}",
        "{\"text\":\"\xff\xfe\"}",
        "{\"x\":1e400}",
        "{\"x\":NaN}",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        sb_verr_t err;
        sb_doc_t *doc = s_translate (bad [k], note, &err);
        cr_assert_null (doc, "accepted: %s", bad [k]);
        cr_assert_eq (err.code, SB_E_invalid, "%s: %s", bad [k], err.message);
    }
    s_roundtrip ("{\"text\":\"gr\xc3\xbc\xc3\x9f" "e\",\"x\":-0.5,\"l\":[null,true,{\"k\":\"v\"}]}", note,
                 "{\"text\":\"gr\xc3\xbc\xc3\x9f" "e\",\"x\":-0.5,\"l\":[null,true,{\"k\":\"v\"}]}");
}

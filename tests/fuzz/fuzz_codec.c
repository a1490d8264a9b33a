/*  tests/fuzz/fuzz_codec.c — the validating msgpack decoder.

    Input: one selector byte choosing a schema, then the message bytes.
    Whatever the validator accepts must decode, re-encode, validate again,
    and decode to an equal tree: a gap between what sb_validate measures
    and what sb_doc_decode writes would show up here as an ASan report or
    an abort. The decoded tree also goes through the JSON printer, which
    must never fail on a validated value. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schemas/codec.h"
#include "schemas/json.h"
#include "tests/common/val_eq.h"

static void
s_die (const char *what, const sb_verr_t *err)
{
    fprintf (stderr, "fuzz_codec: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
    abort ();
}

/*  The schema for this input, by its first byte. */
static const sb_field_t *
s_pick (uint8_t sel, uint32_t *max_bytes)
{
    static const char *names [] = {
        NULL, "session.create", "session.list.ok", "session.append",
        "error", "session.events.ok", "bus.ready", NULL
    };
    *max_bytes = 0;
    uint8_t k = sel % 8;
    /* bit 8 picks the request whose limits overflowed (run.request) and
       the free-form tape kind (note) in place of two of the others */
    if (k == 0 && (sel & 8))
        return sb_schema_find ("run.request", 11)->fields;
    if (k == 6 && (sel & 8))
        return sb_schema_tape_kind ("note")->fields;
    if (k == 0)
        return NULL;
    if (k == 7) {
        /* the header table, or a tape kind for odd selectors above 8 */
        if (sel & 8)
            return sb_schema_tape_kind ("tool.result")->fields;
        return sb_header_fields;
    }
    const sb_type_t *t = sb_schema_find (names [k], strlen (names [k]));
    if (!t)
        s_die ("unknown type in the fuzzer's table", NULL);
    *max_bytes = t->max_bytes;
    return t->fields;
}

/*  What a schema lets through is what any strict client decodes
    (docs/protocol.md): free-form values hold UTF-8 text without NUL,
    string keys and no bin; no float anywhere is NaN or infinite; every
    ranged integer is inside its range, and every enum string one of its
    field's names. */
static void
s_check_strict (const sb_val_t *v, const sb_field_t *f)
{
    bool free = !f || f->type == SB_T_ANY;
    switch (v->type) {
        case SB_V_FLOAT:
            if (!isfinite (v->v.f))
                s_die ("a non-finite float passed a schema", NULL);
            break;
        case SB_V_BIN:
            if (free)
                s_die ("a bin value passed where the schema declares none", NULL);
            break;
        case SB_V_STR:
            if ((free || f->type == SB_T_STR || f->type == SB_T_ENUM)
            &&  (memchr (v->v.s, 0, v->len) || !sb_utf8_valid (v->v.s, v->len)))
                s_die ("a string that is not text passed a schema", NULL);
            if (f && f->type == SB_T_ENUM && !(f->empty_ok && v->len == 0)
            &&  sb_enum_index (f->values, v->v.s, v->len) < 0)
                s_die ("a string outside its enum's names passed a schema", NULL);
            break;
        case SB_V_INT:
        case SB_V_UINT:
            if (f && sb_field_ranged (f)) {
                bool in = v->type == SB_V_INT
                        ? v->v.i >= f->min_value && v->v.i <= f->max_value
                        : f->max_value >= 0 && v->v.u <= (uint64_t) f->max_value
                          && (f->min_value <= 0 || v->v.u >= (uint64_t) f->min_value);
                if (!in)
                    s_die ("an integer outside its declared range passed", NULL);
            }
            break;
        case SB_V_ARRAY:
            for (uint32_t k = 0; k < v->len; k++)
                s_check_strict (&v->v.a [k], f && f->type == SB_T_ARRAY ? f->sub : NULL);
            break;
        case SB_V_MAP: {
            const sb_field_t *sub = f ? (f->type == SB_T_MAP ? f->sub : NULL) : NULL;
            if (sub == sb_stored_body)
                break;          /* a replayed body is judged as it was stored */
            for (uint32_t k = 0; k < v->len; k++) {
                const sb_val_t *key = &v->v.a [2 * k];
                if (key->type != SB_V_STR)
                    s_die ("a non-string key passed a schema", NULL);
                s_check_strict (key, NULL);
                const sb_field_t *kf = NULL;
                for (int j = 0; sub && sub [j].name; j++)
                    if (strlen (sub [j].name) == key->len && memcmp (sub [j].name, key->v.s, key->len) == 0)
                        kf = &sub [j];
                s_check_strict (&v->v.a [2 * k + 1], kf);
            }
            break;
        }
        default:
            break;
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t max_bytes;
    const sb_field_t *fields = s_pick (data [0], &max_bytes);
    const uint8_t *buf = data + 1;
    size_t len = size - 1;

    sb_vstat_t stat;
    sb_verr_t err;
    if (sb_validate (buf, len, fields, max_bytes, &stat, &err)) {
        if (err.code == SB_OK || !err.message [0])
            s_die ("rejected without an error", &err);
        return 0;
    }
    /* an accepted message is exactly one complete value */
    if (sb_msgpack_span (buf, len) != len)
        s_die ("span disagrees with the validator", NULL);

    sb_doc_t *doc = sb_doc_decode (buf, len, &stat);
    if (!doc)
        s_die ("validated bytes failed to decode", NULL);
    const sb_val_t *root = sb_doc_root (doc);
    if (fields) {
        const sb_field_t top = { "", SB_T_MAP, true, 0, fields, "" };
        s_check_strict (root, &top);
    }

    sb_enc_t *enc = sb_enc_new ();
    sb_enc_val (enc, root);
    size_t len2;
    const uint8_t *buf2 = sb_enc_data (enc, &len2);
    /* re-encoding widens headers (map32, float64), so only the size cap
       is lifted; every other limit must hold as before */
    sb_vstat_t stat2;
    if (sb_validate (buf2, len2, fields, UINT32_MAX, &stat2, &err))
        s_die ("re-encoded value rejected", &err);
    if (stat2.nodes != stat.nodes || stat2.bytes != stat.bytes)
        s_die ("re-encoded value measures differently", NULL);
    sb_doc_t *doc2 = sb_doc_decode (buf2, len2, &stat2);
    if (!doc2 || !sb_test_val_eq (root, sb_doc_root (doc2)))
        s_die ("re-encoded value decodes to a different tree", NULL);

    /* encoding the decoded tree again is byte-for-byte stable */
    sb_enc_t *enc3 = sb_enc_new ();
    sb_enc_val (enc3, sb_doc_root (doc2));
    size_t len3;
    const uint8_t *buf3 = sb_enc_data (enc3, &len3);
    if (len3 != len2 || memcmp (buf2, buf3, len2) != 0)
        s_die ("re-encoding is not stable", NULL);

    char *text = sb_json_dump (root);
    if (!text)
        s_die ("a validated value has no JSON form", NULL);
    /* msgpack strings may hold NUL, printed as \u0000, which
       sb_json_parse refuses on purpose; jansson alone judges the syntax.
       A NUL in a key is valid JSON that jansson cannot read back. */
    json_error_t jerr;
    json_t *j = json_loadb (text, strlen (text),
                            JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
    if (!j && json_error_code (&jerr) == json_error_null_byte_in_key) {
        free (text);
        text = NULL;
    }
    else
    if (!j) {
        fprintf (stderr, "%s\n%s\n", jerr.text, text);
        s_die ("the JSON printer wrote unparseable JSON", NULL);
    }
    /* back to msgpack: may be refused (repaired UTF-8 grows strings, a
       key may hold a NUL) but must not crash */
    sb_enc_reset (enc3);
    if (j && sb_json_to_msgpack (j, fields, enc3, &err) == 0) {
        buf3 = sb_enc_data (enc3, &len3);
        sb_validate (buf3, len3, fields, UINT32_MAX, NULL, &err);
    }
    json_decref (j);
    free (text);

    sb_enc_destroy (&enc);
    sb_enc_destroy (&enc3);
    sb_doc_destroy (&doc);
    sb_doc_destroy (&doc2);
    return 0;
}

/*  tests/unit/test_header.c — sb_header_parse against a reference.

    sb_header_parse reads the headers our peers write in one pass and
    leaves everything else to the full path (validate, decode, look up).
    The reference here is that full path alone, written out from the
    schema as the parser was before the fast path: for every header, valid
    or not, hand-made or mutated at random, both must give the same
    result, the same sb_header_t byte for byte, and the same error. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/envelope.h"
#include "schemas/codec.h"
#include "schemas/schema.h"

static void
s_copy (char *dst, size_t n, const sb_val_t *root, const char *key)
{
    const sb_val_t *v = sb_get (root, key);
    if (v && v->type == SB_V_STR) {
        size_t len = v->len < n - 1 ? v->len : n - 1;
        memcpy (dst, v->v.s, len);
        dst [len] = 0;
    }
}

//  The reference: the schema's validator and decoder, then each field by
//  name (without the id recovery of a refused header, compared apart).
static int
s_reference (const uint8_t *buf, size_t len, sb_header_t *h, sb_verr_t *err)
{
    sb_vstat_t stat;
    memset (h, 0, sizeof *h);
    if (sb_validate (buf, len, sb_header_fields, 4096, &stat, err))
        return -1;
    _Alignas (16) uint8_t mem [8192];
    const sb_val_t *root = sb_doc_decode_into (buf, len, &stat, mem, sizeof mem);
    cr_assert (root);
    s_copy (h->type, sizeof h->type, root, "type");
    s_copy (h->id, sizeof h->id, root, "id");
    s_copy (h->corr, sizeof h->corr, root, "corr");
    s_copy (h->from, sizeof h->from, root, "from");
    s_copy (h->key, sizeof h->key, root, "key");
    s_copy (h->trace, sizeof h->trace, root, "trace");
    s_copy (h->to, sizeof h->to, root, "to");
    h->ts = sb_get_uint (root, "ts", 0);
    h->deadline = sb_get_uint (root, "deadline", 0);
    h->seq = sb_get_uint (root, "seq", 0);
    if (!h->type [0] || !h->id [0])
        return -1;
    return 0;
}

static long s_accepted, s_refused;

static void
s_same (const uint8_t *buf, size_t len, const char *what)
{
    sb_header_t a, b;
    sb_verr_t ea, eb;
    int ra = sb_header_parse (buf, len, &a, &ea);
    int rb = s_reference (buf, len, &b, &eb);
    cr_assert_eq (ra, rb, "%s: parse %d, reference %d (%s)", what, ra, rb, ra? ea.message: eb.message);
    if (ra == 0) {
        cr_assert (memcmp (&a, &b, sizeof a) == 0, "%s: the headers differ (type %s/%s id %s/%s)",
                   what, a.type, b.type, a.id, b.id);
        cr_assert_eq (ea.code, SB_OK, "%s", what);
        s_accepted++;
    }
    else {
        //  A refused header keeps at most its type and id (to answer it).
        cr_assert_eq (a.ts, 0, "%s", what);
        cr_assert_eq (a.corr [0], 0, "%s", what);
        s_refused++;
    }
}

//  A packer writing into a buffer.
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} s_pk_t;

static void
s_pk_init (s_pk_t *p)
{
    msgpack_sbuffer_init (&p->sb);
    msgpack_packer_init (&p->pk, &p->sb, msgpack_sbuffer_write);
}

static void
s_str (s_pk_t *p, const char *s)
{
    size_t n = strlen (s);
    msgpack_pack_str (&p->pk, n);
    msgpack_pack_str_body (&p->pk, s, n);
}

//  A str in the encoding given: 0 the shortest, 8 str8, 16 str16.
static void
s_str_as (s_pk_t *p, const char *s, int width)
{
    size_t n = strlen (s);
    if (width == 8) {
        uint8_t h [2] = { 0xd9, (uint8_t) n };
        msgpack_sbuffer_write (&p->sb, (const char *) h, 2);
    }
    else
    if (width == 16) {
        uint8_t h [3] = { 0xda, (uint8_t) (n >> 8), (uint8_t) n };
        msgpack_sbuffer_write (&p->sb, (const char *) h, 3);
    }
    else
        msgpack_pack_str (&p->pk, n);
    msgpack_sbuffer_write (&p->sb, s, n);
}

Test (header, the_headers_we_write)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_header_t h;
    sb_header_init (&h, "session.append", "bench");
    snprintf (h.corr, sizeof h.corr, "%s", "01JB0000000000000000000000");
    snprintf (h.key, sizeof h.key, "%s", "grüße");
    h.deadline = 253402300799999ull;
    h.seq = 7;
    snprintf (h.to, sizeof h.to, "%s", "exec-1");
    snprintf (h.trace, sizeof h.trace, "%s", "t-1");
    sb_header_encode (&h, enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    s_same (data, len, "a full header");
    sb_header_t out;
    cr_assert_eq (sb_header_parse (data, len, &out, NULL), 0);
    cr_assert (memcmp (&out, &h, sizeof h) == 0, "the parse does not give back what was encoded");

    sb_header_init (&h, "echo.ping", NULL);
    sb_header_encode (&h, enc);
    data = sb_enc_data (enc, &len);
    s_same (data, len, "a minimal header");
    sb_enc_destroy (&enc);
}

Test (header, encodings_and_refusals)
{
    static const struct { const char *key, *val; int width; } strs [] = {
        { "type", "echo.ping", 8 }, { "id", "01JB0000000000000000000000", 16 },
        { "from", "", 0 }, { "to", "x", 8 },
    };
    for (size_t k = 0; k < sizeof strs / sizeof strs [0]; k++) {
        s_pk_t p;
        s_pk_init (&p);
        msgpack_pack_map (&p.pk, 3);
        s_str (&p, "type"); s_str_as (&p, strcmp (strs [k].key, "type")? "echo.ping": strs [k].val,
                                      strcmp (strs [k].key, "type")? 0: strs [k].width);
        s_str (&p, "id"); s_str_as (&p, strcmp (strs [k].key, "id")? "abc": strs [k].val,
                                    strcmp (strs [k].key, "id")? 0: strs [k].width);
        s_str (&p, strs [k].key [0] == 't' && strs [k].key [1] == 'y'? "from": strs [k].key);
        s_str_as (&p, strs [k].val, strs [k].width);
        s_same ((const uint8_t *) p.sb.data, p.sb.size, strs [k].key);
        msgpack_sbuffer_destroy (&p.sb);
    }
    //  Each of these is refused, or read, by the full path.
    const char *cases [] = {
        "nil", "unknown", "dup", "long_type", "nul", "utf8", "deadline_big", "neg_ts",
        "signed_ts", "float_ts", "empty_type", "no_id", "map16", "trailing", "bin_type",
        "int_key", "seq_max",
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases [0]; c++) {
        const char *w = cases [c];
        s_pk_t p;
        s_pk_init (&p);
        bool trailing = strcmp (w, "trailing") == 0;
        int n = 2 + (strcmp (w, "no_id") == 0? -1: 0) + (strcmp (w, "empty_type") == 0? 0: 1);
        if (strcmp (w, "map16") == 0) {
            uint8_t hd [3] = { 0xde, 0, (uint8_t) n };
            msgpack_sbuffer_write (&p.sb, (const char *) hd, 3);
        }
        else
            msgpack_pack_map (&p.pk, n);
        s_str (&p, "type");
        if (strcmp (w, "long_type") == 0)
            s_str (&p, "a.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        else
        if (strcmp (w, "empty_type") == 0)
            s_str (&p, "");
        else
        if (strcmp (w, "nul") == 0) {
            msgpack_pack_str (&p.pk, 3);
            msgpack_pack_str_body (&p.pk, "a\0b", 3);
        }
        else
        if (strcmp (w, "utf8") == 0) {
            msgpack_pack_str (&p.pk, 2);
            msgpack_pack_str_body (&p.pk, "\xc3\x28", 2);
        }
        else
        if (strcmp (w, "bin_type") == 0) {
            msgpack_pack_bin (&p.pk, 4);
            msgpack_pack_bin_body (&p.pk, "a.bc", 4);
        }
        else
            s_str (&p, "echo.ping");
        if (strcmp (w, "no_id") != 0) {
            s_str (&p, "id");
            s_str (&p, "01JB0000000000000000000000");
        }
        if (strcmp (w, "empty_type") != 0) {
            if (strcmp (w, "nil") == 0) { s_str (&p, "corr"); msgpack_pack_nil (&p.pk); }
            else if (strcmp (w, "unknown") == 0) { s_str (&p, "extra"); s_str (&p, "x"); }
            else if (strcmp (w, "dup") == 0) { s_str (&p, "id"); s_str (&p, "again"); }
            else if (strcmp (w, "deadline_big") == 0) { s_str (&p, "deadline"); msgpack_pack_uint64 (&p.pk, 1ull << 63); }
            else if (strcmp (w, "neg_ts") == 0) { s_str (&p, "ts"); msgpack_pack_int64 (&p.pk, -5); }
            else if (strcmp (w, "signed_ts") == 0) {
                uint8_t v [5] = { 0xd2, 0, 1, 0, 0 };
                s_str (&p, "ts");
                msgpack_sbuffer_write (&p.sb, (const char *) v, 5);
            }
            else if (strcmp (w, "float_ts") == 0) { s_str (&p, "ts"); msgpack_pack_double (&p.pk, 1.0); }
            else if (strcmp (w, "int_key") == 0) { msgpack_pack_uint8 (&p.pk, 1); s_str (&p, "x"); }
            else if (strcmp (w, "seq_max") == 0) { s_str (&p, "seq"); msgpack_pack_uint64 (&p.pk, 9007199254740991ull); }
            else { s_str (&p, "ts"); msgpack_pack_uint64 (&p.pk, 1700000000000ull); }
        }
        if (trailing)
            msgpack_pack_nil (&p.pk);
        s_same ((const uint8_t *) p.sb.data, p.sb.size, w);
        msgpack_sbuffer_destroy (&p.sb);
    }
    cr_assert (s_accepted > 0 && s_refused > 0);
}

//  Random mutations of real headers: flipped bytes, cuts, and bytes from
//  the msgpack type space, so that every branch of both paths is walked.
Test (header, mutations_agree_with_the_reference)
{
    srandom (13);
    sb_enc_t *enc = sb_enc_new ();
    uint8_t buf [1024];
    s_accepted = s_refused = 0;
    for (int round = 0; round < 200000; round++) {
        sb_header_t h;
        sb_header_init (&h, round % 3? "session.append": "session.event", round % 2? "appender": NULL);
        if (round % 5 == 0)
            snprintf (h.corr, sizeof h.corr, "%s", h.id);
        if (round % 7 == 0)
            h.deadline = h.ts + (uint64_t) (random () % 100000);
        if (round % 11 == 0)
            h.seq = (uint64_t) random ();
        if (round % 13 == 0)
            snprintf (h.key, sizeof h.key, "k%ld", random ());
        sb_header_encode (&h, enc);
        size_t len;
        const uint8_t *data = sb_enc_data (enc, &len);
        cr_assert (len <= sizeof buf);
        memcpy (buf, data, len);
        int edits = (int) (random () % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t) random () % len;
            switch (random () % 4) {
                case 0: buf [at] ^= (uint8_t) (1u << (random () % 8)); break;
                case 1: buf [at] = (uint8_t) random (); break;
                case 2: len = at + 1; break;
                default: buf [at] = (uint8_t) (0xc0 + random () % 0x20); break;
            }
        }
        s_same (buf, len, "a mutated header");
    }
    printf ("mutations: %ld accepted, %ld refused\n", s_accepted, s_refused);
    cr_assert (s_accepted > 1000 && s_refused > 1000);
    sb_enc_destroy (&enc);
}

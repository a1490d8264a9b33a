/*  tests/unit/test_codec.c — the validating msgpack codec.

    The round trips are generated from the schema tables themselves, so a
    new type or field is covered without touching this file. Rejections are
    checked for their error code, their message, and for allocating
    nothing: docs/protocol.md promises that untrusted bytes are judged before
    any allocation. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schemas/codec.h"
#include "schemas/schema.h"
#include "tests/common/val_eq.h"

/* ------------------------------------------------------------------ */
/*  Allocation counting.

    The test binary defines malloc, calloc, realloc and free itself and
    forwards them to glibc's __libc_* entry points; glibc supports this
    interposition, so calls from libswitchboard and msgpack-c land here
    too. A thread-local flag limits counting to the code under test, so
    Criterion's own threads and bookkeeping are never counted. ASan
    replaces the allocator with its own, so the ASan build keeps glibc's
    symbols and only the counting is skipped; every rejection check still
    runs there. (memalign and friends are not wrapped: glibc serves them
    from the same heap, and nothing under test uses them.) */

#if defined(__SANITIZE_ADDRESS__)
#   define S_ASAN 1
#elif defined(__has_feature)
#   if __has_feature(address_sanitizer)
#       define S_ASAN 1
#   endif
#endif
#ifndef S_ASAN
#   define S_ASAN 0
#endif

static __thread int s_counting;
static __thread size_t s_allocs;

#if !S_ASAN
extern void *__libc_malloc (size_t size);
extern void *__libc_calloc (size_t n, size_t size);
extern void *__libc_realloc (void *p, size_t size);
extern void __libc_free (void *p);

void *
malloc (size_t size)
{
    if (s_counting)
        s_allocs++;
    return __libc_malloc (size);
}

void *
calloc (size_t n, size_t size)
{
    if (s_counting)
        s_allocs++;
    return __libc_calloc (n, size);
}

void *
realloc (void *p, size_t size)
{
    if (s_counting)
        s_allocs++;
    return __libc_realloc (p, size);
}

void
free (void *p)
{
    __libc_free (p);
}
#endif

/*  Runs the statements with counting on; asserts nothing was allocated
    (in builds where counting works). */
#define NO_ALLOC(...) do { \
        s_allocs = 0; s_counting = 1; \
        __VA_ARGS__; \
        s_counting = 0; \
        if (!S_ASAN) \
            cr_assert_eq (s_allocs, 0, "%zu allocation(s) during: %s", s_allocs, #__VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------ */
/*  Helpers */

/*  Expects `buf` to be rejected with `code` and a message containing
    `needle`, by sb_validate and by sb_decode alike, without allocating. */
static void
s_reject (const uint8_t *buf, size_t len, const sb_field_t *fields, uint32_t max_bytes,
          sb_err_t code, const char *needle)
{
    sb_verr_t err;
    sb_vstat_t stat;
    int rc;
    NO_ALLOC (rc = sb_validate (buf, len, fields, max_bytes, &stat, &err));
    cr_assert_eq (rc, -1, "accepted, expected %s (%s)", sb_err_name (code), needle);
    cr_assert_eq (err.code, code, "code %s, expected %s; message: %s",
                  sb_err_name (err.code), sb_err_name (code), err.message);
    cr_assert (strstr (err.message, needle), "message '%s' lacks '%s'", err.message, needle);

    sb_doc_t *doc;
    sb_verr_t err2;
    NO_ALLOC (doc = sb_decode (buf, len, fields, max_bytes, &err2));
    cr_assert_null (doc);
    cr_assert_eq (err2.code, code);
    /* a NULL err must be tolerated */
    NO_ALLOC (rc = sb_validate (buf, len, fields, max_bytes, NULL, NULL));
    cr_assert_eq (rc, -1);
}

static void
s_accept (const uint8_t *buf, size_t len, const sb_field_t *fields, uint32_t max_bytes)
{
    sb_verr_t err;
    sb_vstat_t stat;
    int rc;
    NO_ALLOC (rc = sb_validate (buf, len, fields, max_bytes, &stat, &err));
    cr_assert_eq (rc, 0, "rejected: %s", err.message);
}

/*  An independent encoder (msgpack-c's packer, compact headers) builds the
    raw cases, so the validator is not only ever fed its own encoder. */
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} s_raw_t;

static void
s_raw_init (s_raw_t *r)
{
    msgpack_sbuffer_init (&r->sb);
    msgpack_packer_init (&r->pk, &r->sb, msgpack_sbuffer_write);
}

static void
s_raw_str (s_raw_t *r, const char *s)
{
    msgpack_pack_str (&r->pk, strlen (s));
    msgpack_pack_str_body (&r->pk, s, strlen (s));
}

static void
s_raw_bytes (s_raw_t *r, const void *p, size_t n)
{
    msgpack_sbuffer_write (&r->sb, p, n);
}

#define RAW(r) (const uint8_t *) (r).sb.data, (r).sb.size

/* ------------------------------------------------------------------ */
/*  A value arena for expected trees */

#define S_NODES 16384
#define S_BYTES (256 * 1024)

static struct {
    sb_val_t nodes [S_NODES];
    size_t n;
    char bytes [S_BYTES];
    size_t nb;
} s_ar;

static void
s_ar_reset (void)
{
    s_ar.n = 0;
    s_ar.nb = 0;
}

static sb_val_t *
s_ar_nodes (size_t n)
{
    cr_assert (s_ar.n + n <= S_NODES, "test arena out of nodes");
    sb_val_t *p = &s_ar.nodes [s_ar.n];
    memset (p, 0, n * sizeof *p);
    s_ar.n += n;
    return p;
}

static const char *
s_ar_bytes (const void *src, size_t n)
{
    cr_assert (s_ar.nb + n + 1 <= S_BYTES, "test arena out of bytes");
    char *p = &s_ar.bytes [s_ar.nb];
    memcpy (p, src, n);
    p [n] = 0;
    s_ar.nb += n + 1;
    return p;
}

static void
s_v_str (sb_val_t *v, sb_vtype_t type, const void *p, size_t n)
{
    memset (v, 0, sizeof *v);
    v->type = type;
    v->len = (uint32_t) n;
    v->v.s = s_ar_bytes (p, n);
}

static void s_v_uint (sb_val_t *v, uint64_t u) { memset (v, 0, sizeof *v); v->type = SB_V_UINT; v->v.u = u; }
static void s_v_int (sb_val_t *v, int64_t i) { memset (v, 0, sizeof *v); v->type = SB_V_INT; v->v.i = i; }
static void s_v_nil (sb_val_t *v) { memset (v, 0, sizeof *v); v->type = SB_V_NIL; }

static void
s_v_bool (sb_val_t *v, bool b)
{
    memset (v, 0, sizeof *v);
    v->type = SB_V_BOOL;
    v->v.b = b;
}

static void
s_v_float (sb_val_t *v, double f)
{
    memset (v, 0, sizeof *v);
    v->type = SB_V_FLOAT;
    v->v.f = f;
}

static sb_val_t *
s_v_container (sb_val_t *v, sb_vtype_t type, uint32_t len)
{
    memset (v, 0, sizeof *v);
    v->type = type;
    v->len = len;
    sb_val_t *items = s_ar_nodes (type == SB_V_MAP ? 2 * (size_t) len : len);
    v->v.a = items;
    return items;
}

static void
s_measure (const sb_val_t *v, sb_vstat_t *st)
{
    st->nodes++;
    if (v->type == SB_V_STR || v->type == SB_V_BIN)
        st->bytes += v->len + 1;
    if (v->type == SB_V_ARRAY || v->type == SB_V_MAP) {
        size_t n = v->type == SB_V_MAP ? 2 * (size_t) v->len : v->len;
        for (size_t k = 0; k < n; k++)
            s_measure (&v->v.a [k], st);
    }
}

/* ------------------------------------------------------------------ */
/*  Body generation from the field tables */

static void s_gen (const sb_field_t *f, sb_val_t *out, unsigned seed);

/*  A free-form value with every scalar type a schema allows there
    (strings are UTF-8 text, no bin, finite floats) and some nesting. */
static void
s_gen_any (sb_val_t *out, unsigned seed)
{
    sb_val_t *top = s_v_container (out, SB_V_MAP, 2);
    s_v_str (&top [0], SB_V_STR, "a", 1);
    sb_val_t *arr = s_v_container (&top [1], SB_V_ARRAY, 7);
    s_v_uint (&arr [0], 1 + seed);
    s_v_int (&arr [1], -2 - (int64_t) seed);
    s_v_float (&arr [2], 2.5);
    s_v_str (&arr [3], SB_V_STR, "x", 1);
    s_v_nil (&arr [4]);
    s_v_bool (&arr [5], true);
    sb_val_t *inner = s_v_container (&arr [6], SB_V_MAP, 1);
    s_v_str (&inner [0], SB_V_STR, "b", 1);
    s_v_str (&inner [1], SB_V_STR, "\xc3\xa9\xf0\x9f\x98\x80", 6);
    s_v_str (&top [2], SB_V_STR, "big", 3);
    s_v_uint (&top [3], (1ull << 63) + seed);
}

/*  A free-form map: string keys (a strict client refuses others), any
    scalar value. */
static void
s_gen_free_map (sb_val_t *out, unsigned seed, uint32_t max)
{
    uint32_t n = max && max < 5 ? max : 5;
    sb_val_t *kv = s_v_container (out, SB_V_MAP, n);
    for (uint32_t k = 0; k < n; k++) {
        sb_val_t *key = &kv [2 * k], *val = &kv [2 * k + 1];
        switch (k) {
            case 0: s_v_str (key, SB_V_STR, "k", 1); s_v_str (val, SB_V_STR, "v", 1); break;
            case 1: s_v_str (key, SB_V_STR, "7", 1); s_v_uint (val, UINT64_MAX - seed); break;
            case 2: s_v_str (key, SB_V_STR, "-3", 2); s_v_bool (val, false); break;
            case 3: s_v_str (key, SB_V_STR, "nil", 3); s_v_nil (val); break;
            default: s_v_str (key, SB_V_STR, "f", 1); s_v_float (val, -0.125); break;
        }
    }
}

static uint32_t
s_nfields (const sb_field_t *fields)
{
    uint32_t n = 0;
    while (fields && fields [n].name)
        n++;
    return n;
}

/*  A map holding every field of `fields`; `skip` (or -1) leaves one out,
    `only_required` leaves the optional ones out. */
static void
s_gen_map (const sb_field_t *fields, sb_val_t *out, unsigned seed, int skip, bool only_required)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < s_nfields (fields); k++)
        if ((int) k != skip && (!only_required || fields [k].required))
            n++;
    sb_val_t *kv = s_v_container (out, SB_V_MAP, n);
    uint32_t i = 0;
    for (uint32_t k = 0; k < s_nfields (fields); k++) {
        if ((int) k == skip || (only_required && !fields [k].required))
            continue;
        s_v_str (&kv [2 * i], SB_V_STR, fields [k].name, strlen (fields [k].name));
        s_gen (&fields [k], &kv [2 * i + 1], seed + k);
        i++;
    }
}

static void
s_gen (const sb_field_t *f, sb_val_t *out, unsigned seed)
{
    switch (f->type) {
        case SB_T_STR: {
            uint32_t max = f->max ? f->max : SB_DEFAULT_STR_MAX;
            char tmp [16];
            size_t n = 1 + seed % 9;
            if (n > max)
                n = max;
            for (size_t k = 0; k < n; k++)
                tmp [k] = (char) ('a' + (seed + k) % 26);
            s_v_str (out, SB_V_STR, tmp, n);
            break;
        }
        case SB_T_ENUM: {
            /* one of its names, a different one per seed */
            size_t n = 0;
            while (f->values [n])
                n++;
            const char *name = f->values [seed % n];
            s_v_str (out, SB_V_STR, name, strlen (name));
            break;
        }
        case SB_T_BIN: {
            uint8_t tmp [6] = { 0x00, 0xff, 0x80, 0x7f, (uint8_t) seed, 0xc1 };
            uint32_t max = f->max ? f->max : SB_DEFAULT_STR_MAX;
            s_v_str (out, SB_V_BIN, tmp, max < 6 ? max : 6);
            break;
        }
        case SB_T_INT:
            if (sb_field_ranged (f))
                s_v_int (out, f->min_value);
            else
                s_v_int (out, -(int64_t) (1ull << 40) - seed);
            break;
        case SB_T_UINT:
            /* a ranged field gets a value inside its range */
            if (sb_field_ranged (f))
                s_v_uint (out, (uint64_t) f->min_value + seed % (uint64_t) (f->max_value - f->min_value + 1));
            else
                s_v_uint (out, (1ull << 63) + seed);
            break;
        case SB_T_FLOAT: s_v_float (out, 1.5 + seed); break;
        case SB_T_BOOL:  s_v_bool (out, seed & 1); break;
        case SB_T_ANY:   s_gen_any (out, seed); break;
        case SB_T_MAP:
            if (f->sub)
                s_gen_map (f->sub, out, seed, -1, false);
            else
                s_gen_free_map (out, seed, f->max);
            break;
        case SB_T_ARRAY: {
            uint32_t n = f->max && f->max < 2 ? f->max : 2;
            sb_val_t *items = s_v_container (out, SB_V_ARRAY, n);
            for (uint32_t k = 0; k < n; k++)
                if (f->sub)
                    s_gen (f->sub, &items [k], seed + 100 * (k + 1));
                else
                    s_gen_any (&items [k], seed + k);
            break;
        }
    }
}

/*  Encodes a tree with the primitive encoder calls. Maps with non-string
    keys go through sb_enc_val: the primitive API has no call that counts
    a non-string key as a map pair. */
static void
s_enc_tree (sb_enc_t *enc, const sb_val_t *v)
{
    switch (v->type) {
        case SB_V_NIL: sb_enc_nil (enc); break;
        case SB_V_BOOL: sb_enc_bool (enc, v->v.b); break;
        case SB_V_INT: sb_enc_int (enc, v->v.i); break;
        case SB_V_UINT: sb_enc_uint (enc, v->v.u); break;
        case SB_V_FLOAT: sb_enc_float (enc, v->v.f); break;
        case SB_V_STR: sb_enc_strn (enc, v->v.s, v->len); break;
        case SB_V_BIN: sb_enc_bin (enc, v->v.s, v->len); break;
        case SB_V_ARRAY:
            sb_enc_array_open (enc);
            for (uint32_t k = 0; k < v->len; k++)
                s_enc_tree (enc, &v->v.a [k]);
            sb_enc_array_close (enc);
            break;
        case SB_V_MAP: {
            for (uint32_t k = 0; k < v->len; k++)
                if (sb_map_key (v, k)->type != SB_V_STR) {
                    sb_enc_val (enc, v);
                    return;
                }
            sb_enc_map_open (enc);
            for (uint32_t k = 0; k < v->len; k++) {
                sb_enc_key (enc, sb_map_key (v, k)->v.s);
                s_enc_tree (enc, sb_map_val (v, k));
            }
            sb_enc_map_close (enc);
            break;
        }
    }
}

/*  Checks one decoded field against the generated one, through the typed
    accessor an actor would use. */
static void
s_check_field (const char *type, const sb_field_t *f, const sb_val_t *want, const sb_val_t *root)
{
    const sb_val_t *got = sb_get (root, f->name);
    cr_assert_not_null (got, "%s.%s: absent after decode", type, f->name);
    cr_assert (sb_test_val_eq (want, got), "%s.%s: value differs after decode", type, f->name);
    switch (f->type) {
        case SB_T_STR:
        case SB_T_ENUM:
            cr_assert_str_eq (sb_get_str (root, f->name), want->v.s, "%s.%s", type, f->name);
            break;
        case SB_T_BIN: {
            size_t len = 0;
            const char *p = sb_get_bin (root, f->name, &len);
            cr_assert (p && len == want->len && memcmp (p, want->v.s, len) == 0, "%s.%s", type, f->name);
            break;
        }
        case SB_T_INT:
            cr_assert_eq (sb_get_int (root, f->name, 0), want->v.i, "%s.%s", type, f->name);
            break;
        case SB_T_UINT:
            cr_assert_eq (sb_get_uint (root, f->name, 0), want->v.u, "%s.%s", type, f->name);
            break;
        case SB_T_FLOAT:
            cr_assert_eq (sb_get_float (root, f->name, 0), want->v.f, "%s.%s", type, f->name);
            break;
        case SB_T_BOOL:
            cr_assert_eq (sb_get_bool (root, f->name, !want->v.b), want->v.b, "%s.%s", type, f->name);
            break;
        case SB_T_MAP:
            cr_assert_not_null (sb_get_map (root, f->name), "%s.%s", type, f->name);
            cr_assert_eq (sb_get_map (root, f->name)->len, want->len, "%s.%s", type, f->name);
            break;
        case SB_T_ARRAY:
            cr_assert_not_null (sb_get_array (root, f->name), "%s.%s", type, f->name);
            cr_assert_eq (sb_get_array (root, f->name)->len, want->len, "%s.%s", type, f->name);
            break;
        case SB_T_ANY:
            break;
    }
}

/*  Generates a full body for `t`, encodes, validates (allocation-free),
    decodes, compares field by field, re-encodes the decoded root and
    compares bytes. */
static void
s_roundtrip (const sb_type_t *t, bool only_required)
{
    s_ar_reset ();
    sb_val_t want;
    s_gen_map (t->fields, &want, 3, -1, only_required);

    sb_enc_t *enc = sb_enc_new ();
    cr_assert_not_null (enc);
    s_enc_tree (enc, &want);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);

    sb_verr_t err;
    sb_vstat_t stat;
    int rc;
    NO_ALLOC (rc = sb_validate (data, len, t->fields, t->max_bytes, &stat, &err));
    cr_assert_eq (rc, 0, "%s: generated body rejected: %s", t->name, err.message);
    sb_vstat_t expect = { 0, 0 };
    s_measure (&want, &expect);
    cr_assert_eq (stat.nodes, expect.nodes, "%s: nodes %u, expected %u", t->name, stat.nodes, expect.nodes);
    cr_assert_eq (stat.bytes, expect.bytes, "%s: bytes %zu, expected %zu", t->name, stat.bytes, expect.bytes);
    cr_assert_eq (sb_msgpack_span (data, len), len, "%s: span", t->name);

    sb_doc_t *doc = sb_decode_type (t, data, len, &err);
    cr_assert_not_null (doc, "%s: %s", t->name, err.message);
    const sb_val_t *root = sb_doc_root (doc);
    cr_assert (sb_test_val_eq (&want, root), "%s: decoded tree differs", t->name);
    for (uint32_t k = 0; t->fields [k].name; k++) {
        const sb_field_t *f = &t->fields [k];
        const sb_val_t *w = sb_get (&want, f->name);
        if (w)
            s_check_field (t->name, f, w, root);
        else
            cr_assert_null (sb_get (root, f->name), "%s.%s: present but not sent", t->name, f->name);
    }

    sb_enc_t *enc2 = sb_enc_new ();
    sb_enc_val (enc2, root);
    size_t len2;
    const uint8_t *data2 = sb_enc_data (enc2, &len2);
    cr_assert_eq (len2, len, "%s: re-encoded %zu bytes, first %zu", t->name, len2, len);
    cr_assert (memcmp (data, data2, len) == 0, "%s: re-encoded bytes differ", t->name);

    sb_doc_destroy (&doc);
    cr_assert_null (doc);
    sb_enc_destroy (&enc);
    sb_enc_destroy (&enc2);
    cr_assert_null (enc);
}

/* ------------------------------------------------------------------ */
/*  Round trips */

Test (alloc, counter_is_live)
{
    if (S_ASAN)
        cr_skip_test ("ASan replaces malloc, so allocation counting is off in this build; "
                      "the rejection checks still run");
    /* the counter must see the one allocation a decode makes, or every
       NO_ALLOC check in this file would pass vacuously */
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "a", "b");
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_doc_t *doc;
    s_allocs = 0;
    s_counting = 1;
    doc = sb_decode (data, len, NULL, 0, NULL);
    s_counting = 0;
    cr_assert_not_null (doc);
    cr_assert_eq (s_allocs, 1, "a decode makes exactly one allocation, saw %zu", s_allocs);
    sb_doc_destroy (&doc);
    sb_enc_destroy (&enc);
}

Test (roundtrip, every_type_every_field)
{
    size_t n;
    const sb_type_t *types = sb_schema_all (&n);
    cr_assert_gt (n, 10);
    for (size_t k = 0; k < n; k++) {
        cr_assert_not_null (types [k].fields, "%s has no field table", types [k].name);
        s_roundtrip (&types [k], false);
        s_roundtrip (&types [k], true);
        cr_assert_eq (sb_schema_find (types [k].name, strlen (types [k].name)), &types [k]);
    }
}

Test (roundtrip, every_tape_kind)
{
    size_t n;
    const sb_type_t *kinds = sb_schema_tape_all (&n);
    cr_assert_gt (n, 10);
    for (size_t k = 0; k < n; k++) {
        s_roundtrip (&kinds [k], false);
        s_roundtrip (&kinds [k], true);
        cr_assert_eq (sb_schema_tape_kind (kinds [k].name), &kinds [k]);
    }
}

Test (roundtrip, header)
{
    sb_type_t header = { "header", SB_KIND_REQUEST, false, sb_header_fields, 0, "" };
    s_roundtrip (&header, false);
    s_roundtrip (&header, true);
}

/*  A nil in an optional field means absent: accepted, and the accessors
    report it as missing. */
Test (roundtrip, nil_optional_fields)
{
    size_t n;
    const sb_type_t *types = sb_schema_all (&n);
    for (size_t t = 0; t < n; t++) {
        s_ar_reset ();
        sb_val_t body;
        s_gen_map (types [t].fields, &body, 1, -1, false);
        for (uint32_t k = 0; k < body.len; k++) {
            const sb_field_t *f = &types [t].fields [k];
            if (!f->required)
                s_v_nil ((sb_val_t *) sb_map_val (&body, k));
        }
        sb_enc_t *enc = sb_enc_new ();
        s_enc_tree (enc, &body);
        size_t len;
        const uint8_t *data = sb_enc_data (enc, &len);
        sb_verr_t err;
        sb_doc_t *doc = sb_decode_type (&types [t], data, len, &err);
        cr_assert_not_null (doc, "%s: %s", types [t].name, err.message);
        for (uint32_t k = 0; types [t].fields [k].name; k++)
            if (!types [t].fields [k].required)
                cr_assert_null (sb_get (sb_doc_root (doc), types [t].fields [k].name));
        sb_doc_destroy (&doc);
        sb_enc_destroy (&enc);
    }
}

/* ------------------------------------------------------------------ */
/*  Rejections generated from the tables */

static void
s_reject_tree (const sb_type_t *t, const sb_val_t *body, sb_err_t code, const char *needle)
{
    sb_enc_t *enc = sb_enc_new ();
    s_enc_tree (enc, body);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    s_reject (data, len, t->fields, t->max_bytes, code, needle);
    sb_enc_destroy (&enc);
}

static void
s_types_and_kinds (void (*check) (const sb_type_t *))
{
    size_t n;
    const sb_type_t *all = sb_schema_all (&n);
    for (size_t k = 0; k < n; k++)
        check (&all [k]);
    all = sb_schema_tape_all (&n);
    for (size_t k = 0; k < n; k++)
        check (&all [k]);
}

static void
s_check_missing (const sb_type_t *t)
{
    for (int k = 0; t->fields [k].name; k++) {
        if (!t->fields [k].required)
            continue;
        s_ar_reset ();
        sb_val_t body;
        s_gen_map (t->fields, &body, 5, k, false);
        char needle [96];
        snprintf (needle, sizeof needle, "missing required field '%s'", t->fields [k].name);
        s_reject_tree (t, &body, SB_E_invalid, needle);
    }
}

Test (reject, missing_required_field)
{
    s_types_and_kinds (s_check_missing);
}

/*  A value of a type the field does not take. */
static bool
s_wrong_value (const sb_field_t *f, sb_val_t *v)
{
    switch (f->type) {
        case SB_T_STR:   s_v_uint (v, 1); return true;
        case SB_T_ENUM:  s_v_uint (v, 1); return true;
        case SB_T_BIN:   s_v_bool (v, true); return true;
        case SB_T_INT:   s_v_uint (v, (uint64_t) INT64_MAX + 1); return true;
        case SB_T_UINT:  s_v_int (v, -1); return true;
        case SB_T_FLOAT: s_v_str (v, SB_V_STR, "1.5", 3); return true;
        case SB_T_BOOL:  s_v_str (v, SB_V_STR, "true", 4); return true;
        case SB_T_MAP:   s_v_container (v, SB_V_ARRAY, 0); return true;
        case SB_T_ARRAY: s_v_container (v, SB_V_MAP, 0); return true;
        case SB_T_ANY:   return false;
    }
    return false;
}

static void
s_check_wrong_type (const sb_type_t *t)
{
    for (uint32_t k = 0; t->fields [k].name; k++) {
        s_ar_reset ();
        sb_val_t body;
        s_gen_map (t->fields, &body, 7, -1, false);
        if (!s_wrong_value (&t->fields [k], (sb_val_t *) sb_map_val (&body, k)))
            continue;
        char needle [96];
        snprintf (needle, sizeof needle, "%s: expected %s", t->fields [k].name,
                  sb_ftype_name (t->fields [k].type));
        s_reject_tree (t, &body, SB_E_invalid, needle);
    }
}

Test (reject, wrong_field_type)
{
    s_types_and_kinds (s_check_wrong_type);
}

/*  Every str/bin field at its limit passes (when the message can hold it)
    and one byte over fails with too_large. */
static void
s_check_str_limits (const sb_type_t *t)
{
    uint32_t cap = t->max_bytes ? t->max_bytes : SB_MAX_MSG_BYTES;
    for (uint32_t k = 0; t->fields [k].name; k++) {
        const sb_field_t *f = &t->fields [k];
        if (f->type != SB_T_STR && f->type != SB_T_BIN)
            continue;
        uint32_t max = f->max ? f->max : SB_DEFAULT_STR_MAX;
        char *big = malloc (max + 1);
        memset (big, 'x', max + 1);
        for (uint32_t extra = 0; extra <= 1; extra++) {
            s_ar_reset ();
            sb_val_t body;
            s_gen_map (t->fields, &body, 1, -1, true);
            /* the field goes last, as a raw key/value after the map */
            sb_enc_t *enc = sb_enc_new ();
            sb_enc_map_open (enc);
            for (uint32_t i = 0; i < body.len; i++)
                if (strcmp (sb_map_key (&body, i)->v.s, f->name) != 0) {
                    sb_enc_key (enc, sb_map_key (&body, i)->v.s);
                    s_enc_tree (enc, sb_map_val (&body, i));
                }
            sb_enc_key (enc, f->name);
            if (f->type == SB_T_STR)
                sb_enc_strn (enc, big, max + extra);
            else
                sb_enc_bin (enc, big, max + extra);
            sb_enc_map_close (enc);
            size_t len;
            const uint8_t *data = sb_enc_data (enc, &len);
            if (len > cap)
                s_reject (data, len, t->fields, t->max_bytes, SB_E_too_large, "over the limit");
            else
            if (extra) {
                char needle [96];
                snprintf (needle, sizeof needle, "%s: length %u is over the limit of %u",
                          f->name, max + 1, max);
                s_reject (data, len, t->fields, t->max_bytes, SB_E_too_large, needle);
            }
            else
                s_accept (data, len, t->fields, t->max_bytes);
            sb_enc_destroy (&enc);
        }
        free (big);
    }
}

Test (reject, string_over_field_limit)
{
    s_types_and_kinds (s_check_str_limits);
    /* the plain case by hand: workspace is capped at 4 KiB */
    const sb_type_t *t = sb_schema_find ("session.create", 14);
    cr_assert_not_null (t);
    char ws [4098];
    memset (ws, 'w', sizeof ws);
    ws [4097] = 0;
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "workspace", ws);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    s_reject (data, len, t->fields, t->max_bytes, SB_E_too_large, "workspace: length 4097");
    sb_enc_destroy (&enc);
}

/*  Every map/array field: one item over its count fails with too_large
    before a single item is read; at the limit a free-form container
    passes. */
static void
s_check_count_limits (const sb_type_t *t)
{
    for (uint32_t k = 0; t->fields [k].name; k++) {
        const sb_field_t *f = &t->fields [k];
        if (f->type != SB_T_MAP && f->type != SB_T_ARRAY)
            continue;
        uint32_t max = f->max ? f->max : SB_DEFAULT_COUNT_MAX;
        bool can_fill = f->type == SB_T_ARRAY ? !f->sub || !f->sub->required : !f->sub;
        for (uint32_t extra = 0; extra <= 1; extra++) {
            if (!extra && !can_fill)
                continue;
            s_ar_reset ();
            sb_val_t body;
            s_gen_map (t->fields, &body, 1, -1, true);
            sb_enc_t *enc = sb_enc_new ();
            sb_enc_map_open (enc);
            for (uint32_t i = 0; i < body.len; i++)
                if (strcmp (sb_map_key (&body, i)->v.s, f->name) != 0) {
                    sb_enc_key (enc, sb_map_key (&body, i)->v.s);
                    s_enc_tree (enc, sb_map_val (&body, i));
                }
            sb_enc_key (enc, f->name);
            if (f->type == SB_T_ARRAY) {
                sb_enc_array_open (enc);
                for (uint32_t i = 0; i < max + extra; i++)
                    sb_enc_nil (enc);
                sb_enc_array_close (enc);
            }
            else {
                sb_enc_map_open (enc);
                for (uint32_t i = 0; i < max + extra; i++) {
                    char key [16];
                    snprintf (key, sizeof key, "k%u", i);
                    sb_enc_key (enc, key);
                    sb_enc_nil (enc);
                }
                sb_enc_map_close (enc);
            }
            sb_enc_map_close (enc);
            size_t len;
            const uint8_t *data = sb_enc_data (enc, &len);
            if (extra) {
                char needle [96];
                snprintf (needle, sizeof needle, "%s: count %u is over the limit of %u",
                          f->name, max + 1, max);
                s_reject (data, len, t->fields, t->max_bytes, SB_E_too_large, needle);
            }
            else
                s_accept (data, len, t->fields, t->max_bytes);
            sb_enc_destroy (&enc);
        }
    }
}

Test (reject, count_over_field_limit)
{
    s_types_and_kinds (s_check_count_limits);
}

/* ------------------------------------------------------------------ */
/*  Rejections by hand */

static const sb_type_t *
s_type (const char *name)
{
    const sb_type_t *t = sb_schema_find (name, strlen (name));
    cr_assert_not_null (t, "no type %s", name);
    return t;
}

/*  {code:"x", message:"y", detail: <levels nested arrays around 1>}: the
    root map is level 1, so `levels` arrays make levels + 1 in all. */
static void
s_error_with_depth (s_raw_t *r, int levels)
{
    s_raw_init (r);
    msgpack_pack_map (&r->pk, 3);
    s_raw_str (r, "code"); s_raw_str (r, "x");
    s_raw_str (r, "message"); s_raw_str (r, "y");
    s_raw_str (r, "detail");
    for (int k = 0; k < levels; k++)
        msgpack_pack_array (&r->pk, 1);
    msgpack_pack_uint8 (&r->pk, 1);
}

Test (reject, nesting_deeper_than_16)
{
    const sb_type_t *t = s_type ("error");
    s_raw_t r;
    s_error_with_depth (&r, 15);            /* 16 levels: the limit */
    s_accept (RAW (r), t->fields, 0);
    msgpack_sbuffer_destroy (&r.sb);

    s_error_with_depth (&r, 16);            /* 17 levels */
    s_reject (RAW (r), t->fields, 0, SB_E_invalid, "nesting deeper than 16");
    msgpack_sbuffer_destroy (&r.sb);

    /* maps in a schema-less body: {"a":{"a":...{"a":1}}} */
    for (int levels = 16; levels <= 17; levels++) {
        s_raw_init (&r);
        for (int k = 0; k < levels; k++) {
            msgpack_pack_map (&r.pk, 1);
            s_raw_str (&r, "a");
        }
        msgpack_pack_uint8 (&r.pk, 1);
        if (levels == 16)
            s_accept (RAW (r), NULL, 0);
        else
            s_reject (RAW (r), NULL, 0, SB_E_invalid, "nesting deeper than 16");
        msgpack_sbuffer_destroy (&r.sb);
    }

    /* through typed maps: session.get.ok -> session -> labels -> ... */
    t = s_type ("session.get.ok");
    for (int levels = 13; levels <= 14; levels++) {
        s_ar_reset ();
        sb_val_t body;
        s_gen_map (t->fields, &body, 1, -1, false);
        sb_val_t *session = (sb_val_t *) sb_get (&body, "session");
        sb_val_t *labels = (sb_val_t *) sb_get (session, "labels");
        cr_assert_not_null (labels);
        /* body(1) session(2) labels(3) + levels arrays */
        sb_val_t *v = s_v_container (labels, SB_V_MAP, 1);
        s_v_str (&v [0], SB_V_STR, "deep", 4);
        v = &v [1];
        for (int k = 0; k < levels; k++)
            v = s_v_container (v, SB_V_ARRAY, 1);
        s_v_nil (v);
        if (levels == 13) {
            sb_enc_t *enc = sb_enc_new ();
            s_enc_tree (enc, &body);
            size_t len;
            const uint8_t *data = sb_enc_data (enc, &len);
            s_accept (data, len, t->fields, 0);
            sb_enc_destroy (&enc);
        }
        else
            s_reject_tree (t, &body, SB_E_invalid, "session.labels.deep[0][0]");
    }
}

Test (reject, declared_count_beyond_the_bytes)
{
    /* a 5-byte buffer that declares four billion elements */
    const uint8_t arr32 [] = { 0xdd, 0xff, 0xff, 0xff, 0xff };
    const uint8_t map32 [] = { 0xdf, 0xff, 0xff, 0xff, 0xff };
    const uint8_t str32 [] = { 0xdb, 0xff, 0xff, 0xff, 0xff };
    const uint8_t bin32 [] = { 0xc6, 0xff, 0xff, 0xff, 0xff };
    s_reject (arr32, sizeof arr32, NULL, 0, SB_E_invalid, "declared count 4294967295 exceeds the 0 bytes left");
    s_reject (map32, sizeof map32, NULL, 0, SB_E_invalid, "declared count 4294967295 exceeds");
    s_reject (str32, sizeof str32, NULL, 0, SB_E_invalid, "declared length 4294967295 exceeds");
    s_reject (bin32, sizeof bin32, NULL, 0, SB_E_invalid, "declared length 4294967295 exceeds");
    cr_assert_eq (sb_msgpack_span (arr32, sizeof arr32), 0);
    cr_assert_eq (sb_msgpack_span (map32, sizeof map32), 0);

    /* the same inside a field, typed and free-form */
    const struct { const char *type, *field; const uint8_t *lie; } cases [] = {
        { "error", "detail", arr32 },
        { "error", "detail", map32 },
        { "error", "message", str32 },
        { "session.list.ok", "sessions", arr32 },
        { "session.append", "body", map32 },
        { "session.append", "entries", arr32 },
        { "echo.ping", "extra", arr32 },         /* a field the schema doesn't know */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases [0]; k++) {
        s_raw_t r;
        s_raw_init (&r);
        msgpack_pack_map (&r.pk, 1);
        s_raw_str (&r, cases [k].field);
        s_raw_bytes (&r, cases [k].lie, 5);
        char needle [64];
        snprintf (needle, sizeof needle, "%s: declared", cases [k].field);
        s_reject (RAW (r), s_type (cases [k].type)->fields, 0, SB_E_invalid, needle);
        msgpack_sbuffer_destroy (&r.sb);
    }

    /* a map needs two bytes per pair: 2 pairs in 3 bytes is a lie too */
    const uint8_t short_map [] = { 0x81, 0xa1, 'a', 0x82, 0x01, 0x02, 0x03 };
    s_reject (short_map, sizeof short_map, NULL, 0, SB_E_invalid, "a: declared count 2 exceeds the 3 bytes left");
    /* a fixarray declaring exactly the bytes left is fine */
    const uint8_t exact [] = { 0x81, 0xa1, 'a', 0x93, 0x01, 0x02, 0x03 };
    s_accept (exact, sizeof exact, NULL, 0);
}

Test (reject, framing)
{
    const uint8_t ok [] = { 0x81, 0xa1, 'a', 0x01 };
    s_accept (ok, sizeof ok, NULL, 0);

    /* empty */
    s_reject (ok, 0, NULL, 0, SB_E_invalid, "empty message");
    s_reject (NULL, 0, NULL, 0, SB_E_invalid, "empty message");
    /* trailing garbage */
    const uint8_t trailing [] = { 0x81, 0xa1, 'a', 0x01, 0xc0, 0xc0 };
    s_reject (trailing, sizeof trailing, NULL, 0, SB_E_invalid, "2 bytes of trailing garbage");
    /* not a map */
    const uint8_t arr [] = { 0x91, 0x01 };
    s_reject (arr, sizeof arr, NULL, 0, SB_E_invalid, "message is not a map");
    const uint8_t scalar [] = { 0x01 };
    s_reject (scalar, sizeof scalar, NULL, 0, SB_E_invalid, "message is not a map");
    /* every truncation of a valid message */
    const uint8_t full [] = { 0x82, 0xa1, 'a', 0xcd, 0x01, 0x00, 0xa1, 'b', 0x92, 0xcb,
                              0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xa2, 'h', 'i' };
    s_accept (full, sizeof full, NULL, 0);
    for (size_t n = 1; n < sizeof full; n++) {
        sb_verr_t err;
        int rc;
        NO_ALLOC (rc = sb_validate (full, n, NULL, 0, NULL, &err));
        cr_assert_eq (rc, -1, "prefix of %zu bytes accepted", n);
        cr_assert_eq (err.code, SB_E_invalid);
        cr_assert_eq (sb_msgpack_span (full, n), 0);
    }
    /* 0xc1 is never used; ext types are refused */
    const uint8_t never [] = { 0x81, 0xa1, 'a', 0xc1 };
    s_reject (never, sizeof never, NULL, 0, SB_E_invalid, "a: unsupported msgpack type 0xc1");
    const uint8_t ext [] = { 0x81, 0xa1, 'a', 0xd4, 0x01, 0x02 };
    s_reject (ext, sizeof ext, NULL, 0, SB_E_invalid, "unsupported msgpack type 0xd4");
    /* a container as a map key */
    const uint8_t ckey [] = { 0x81, 0x90, 0x01 };
    s_reject (ckey, sizeof ckey, NULL, 0, SB_E_invalid, "map key is a container");
    /* a non-string key where the schema names the keys */
    const uint8_t ikey [] = { 0x81, 0x01, 0x01 };
    s_reject (ikey, sizeof ikey, s_type ("echo.ping")->fields, 0, SB_E_invalid, "map key is not a string");
}

Test (reject, duplicate_field)
{
    const sb_type_t *t = s_type ("session.create");
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "workspace", "/a");
    sb_enc_kstr (enc, "workspace", "/b");
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    s_reject (data, len, t->fields, 0, SB_E_invalid, "duplicate field 'workspace'");
    sb_enc_destroy (&enc);
}

Test (reject, message_over_max_bytes)
{
    /* an explicit cap */
    const uint8_t ok [] = { 0x81, 0xa1, 'a', 0xa3, 'x', 'y', 'z' };
    s_accept (ok, sizeof ok, NULL, 7);
    s_reject (ok, sizeof ok, NULL, 6, SB_E_too_large, "message of 7 bytes is over the limit of 6");

    /* the default cap, 1 MiB, and a type that allows more */
    sb_enc_t *enc = sb_enc_new ();
    char *big = malloc (SB_MAX_MSG_BYTES);
    memset (big, 'b', SB_MAX_MSG_BYTES);
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", "s1");
    sb_enc_key (enc, "body");
    sb_enc_map_open (enc);
    sb_enc_key (enc, "text");
    sb_enc_strn (enc, big, SB_MAX_MSG_BYTES - 40);
    sb_enc_map_close (enc);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    cr_assert_lt (len, SB_MAX_MSG_BYTES);
    s_accept (data, len, NULL, 0);
    sb_enc_reset (enc);

    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", "s1");
    sb_enc_key (enc, "body");
    sb_enc_map_open (enc);
    sb_enc_key (enc, "text");
    sb_enc_strn (enc, big, SB_MAX_MSG_BYTES);
    sb_enc_map_close (enc);
    sb_enc_map_close (enc);
    data = sb_enc_data (enc, &len);
    cr_assert_gt (len, SB_MAX_MSG_BYTES);
    s_reject (data, len, NULL, 0, SB_E_too_large, "over the limit of 1048576");
    /* session.append allows 8 MiB */
    const sb_type_t *append = s_type ("session.append");
    cr_assert_gt (append->max_bytes, SB_MAX_MSG_BYTES);
    s_accept (data, len, append->fields, append->max_bytes);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode_type (append, data, len, &err);
    cr_assert_not_null (doc, "%s", err.message);
    cr_assert_eq (sb_get_map (sb_doc_root (doc), "body")->v.a [1].len, SB_MAX_MSG_BYTES);
    sb_doc_destroy (&doc);
    free (big);
    sb_enc_destroy (&enc);
}

/* ------------------------------------------------------------------ */
/*  Span, accessors, encoder */

Test (span, values)
{
    s_raw_t r;
    s_raw_init (&r);
    msgpack_pack_uint8 (&r.pk, 5);                          /* 1 byte */
    s_raw_str (&r, "hello");                                /* 6 bytes */
    msgpack_pack_map (&r.pk, 1);                            /* 1 + 2 + 1 + 9 + 1 */
    s_raw_str (&r, "a");
    msgpack_pack_array (&r.pk, 2);
    msgpack_pack_double (&r.pk, 1.0);
    msgpack_pack_nil (&r.pk);
    msgpack_pack_int64 (&r.pk, -100000);                    /* 5 bytes */
    const uint8_t *p = (const uint8_t *) r.sb.data;
    size_t len = r.sb.size;
    cr_assert_eq (sb_msgpack_span (p, len), 1);
    cr_assert_eq (sb_msgpack_span (p + 1, len - 1), 6);
    cr_assert_eq (sb_msgpack_span (p + 7, len - 7), 1 + 2 + 1 + 9 + 1);
    cr_assert_eq (sb_msgpack_span (p + 21, len - 21), 5);
    cr_assert_eq (len, 26);
    /* truncated anywhere: 0 */
    for (size_t n = 0; n < 14; n++)
        cr_assert_eq (sb_msgpack_span (p + 7, n), 0, "prefix %zu", n);
    cr_assert_eq (sb_msgpack_span (p, 0), 0);
    const uint8_t never [] = { 0xc1 };
    cr_assert_eq (sb_msgpack_span (never, 1), 0);
    msgpack_sbuffer_destroy (&r.sb);

    /* depth: 16 nested arrays span, 17 don't */
    uint8_t deep [18];
    memset (deep, 0x91, sizeof deep);
    deep [16] = 0x01;
    cr_assert_eq (sb_msgpack_span (deep, 17), 17);
    deep [16] = 0x91;
    deep [17] = 0x01;
    cr_assert_eq (sb_msgpack_span (deep, 18), 0);
}

Test (accessors, absent_nil_mistyped)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "s", "str");
    sb_enc_key (enc, "n"); sb_enc_nil (enc);
    sb_enc_kuint (enc, "u", 5);
    sb_enc_kuint (enc, "big", UINT64_MAX);
    sb_enc_kint (enc, "i", -5);
    sb_enc_key (enc, "f"); sb_enc_float (enc, 2.5);
    sb_enc_kbool (enc, "b", true);
    sb_enc_key (enc, "bin"); sb_enc_bin (enc, "\x00\x01\x02", 3);
    sb_enc_key (enc, "m"); sb_enc_map_open (enc); sb_enc_map_close (enc);
    sb_enc_key (enc, "a"); sb_enc_array_open (enc); sb_enc_uint (enc, 9); sb_enc_array_close (enc);
    sb_enc_kstr_opt (enc, "skipped", NULL);
    sb_enc_kstr_opt (enc, "kept", "k");
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, NULL, 0, &err);
    cr_assert_not_null (doc, "%s", err.message);
    const sb_val_t *m = sb_doc_root (doc);
    cr_assert_eq (m->len, 11);

    cr_assert_null (sb_get (m, "absent"));
    cr_assert_null (sb_get (m, "n"), "nil reads as absent");
    cr_assert_null (sb_get (m, "skipped"));
    cr_assert_str_eq (sb_get_str (m, "kept"), "k");
    cr_assert_null (sb_get (NULL, "s"));
    cr_assert_null (sb_get (sb_get (m, "a"), "s"), "an array is not a map");
    cr_assert_null (sb_get (m, "S"), "keys are case-sensitive");

    cr_assert_str_eq (sb_get_str (m, "s"), "str");
    cr_assert_null (sb_get_str (m, "u"));
    cr_assert_null (sb_get_str (m, "n"));
    cr_assert_null (sb_get_str (m, "absent"));

    cr_assert_eq (sb_get_uint (m, "u", 9), 5);
    cr_assert_eq (sb_get_uint (m, "big", 9), UINT64_MAX);
    cr_assert_eq (sb_get_uint (m, "i", 9), 9);
    cr_assert_eq (sb_get_uint (m, "n", 9), 9);
    cr_assert_eq (sb_get_uint (m, "s", 9), 9);
    cr_assert_eq (sb_get_uint (m, "absent", 9), 9);

    cr_assert_eq (sb_get_int (m, "i", 0), -5);
    cr_assert_eq (sb_get_int (m, "u", 0), 5);
    cr_assert_eq (sb_get_int (m, "big", 7), 7, "beyond int64: the default");
    cr_assert_eq (sb_get_int (m, "f", 7), 7);
    cr_assert_eq (sb_get_int (m, "n", 7), 7);

    cr_assert_eq (sb_get_float (m, "f", 0), 2.5);
    cr_assert_eq (sb_get_float (m, "u", 0), 5.0);
    cr_assert_eq (sb_get_float (m, "i", 0), -5.0);
    cr_assert_eq (sb_get_float (m, "s", 1.25), 1.25);
    cr_assert_eq (sb_get_float (m, "n", 1.25), 1.25);

    cr_assert_eq (sb_get_bool (m, "b", false), true);
    cr_assert_eq (sb_get_bool (m, "u", true), true);
    cr_assert_eq (sb_get_bool (m, "u", false), false);
    cr_assert_eq (sb_get_bool (m, "n", false), false);

    size_t blen = 99;
    const char *bin = sb_get_bin (m, "bin", &blen);
    cr_assert (bin && blen == 3 && memcmp (bin, "\x00\x01\x02", 3) == 0);
    cr_assert_eq (bin [3], 0, "bin payloads are NUL-terminated too");
    blen = 99;
    cr_assert_str_eq (sb_get_bin (m, "s", &blen), "str", "a str reads as bytes");
    cr_assert_eq (blen, 3);
    cr_assert_null (sb_get_bin (m, "u", &blen));
    cr_assert_null (sb_get_bin (m, "n", NULL));

    cr_assert_not_null (sb_get_map (m, "m"));
    cr_assert_eq (sb_get_map (m, "m")->len, 0);
    cr_assert_null (sb_get_map (m, "a"));
    cr_assert_null (sb_get_map (m, "n"));
    const sb_val_t *a = sb_get_array (m, "a");
    cr_assert (a && a->len == 1 && sb_array_at (a, 0)->v.u == 9);
    cr_assert_null (sb_get_array (m, "m"));

    cr_assert_str_eq (sb_map_key (m, 0)->v.s, "s");
    cr_assert_str_eq (sb_map_val (m, 0)->v.s, "str");
    sb_doc_destroy (&doc);
    sb_doc_destroy (&doc);      /* tolerates NULL */
    sb_doc_destroy (NULL);
    cr_assert_null (sb_doc_root (NULL));
    sb_enc_destroy (&enc);
    sb_enc_destroy (&enc);
    sb_enc_destroy (NULL);
}

static uint32_t
s_be32 (const uint8_t *p)
{
    return (uint32_t) p [0] << 24 | (uint32_t) p [1] << 16 | (uint32_t) p [2] << 8 | p [3];
}

Test (encoder, nested_counts)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_key (enc, "a");
    sb_enc_array_open (enc);
    sb_enc_uint (enc, 1);
    sb_enc_str (enc, "two");
    sb_enc_map_open (enc);                  /* a map as an array item */
    sb_enc_kuint (enc, "x", 1);
    sb_enc_key (enc, "y");
    sb_enc_array_open (enc);
    sb_enc_array_close (enc);
    sb_enc_map_close (enc);
    sb_enc_array_open (enc);                /* an array as an array item */
    sb_enc_array_open (enc);
    sb_enc_nil (enc);
    sb_enc_array_close (enc);
    sb_enc_array_close (enc);
    const uint8_t raw [] = { 0x92, 0x01, 0x02 };
    sb_enc_raw (enc, raw, sizeof raw);      /* counts as one item */
    sb_enc_array_close (enc);
    sb_enc_key (enc, "b");
    sb_enc_map_open (enc);
    sb_enc_map_close (enc);
    sb_enc_key (enc, "c");
    sb_enc_raw (enc, raw, sizeof raw);
    sb_enc_map_close (enc);

    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    cr_assert_eq (data [0], 0xdf);
    cr_assert_eq (s_be32 (data + 1), 3, "outer map: 3 pairs");
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, NULL, 0, &err);
    cr_assert_not_null (doc, "%s", err.message);
    const sb_val_t *root = sb_doc_root (doc);
    const sb_val_t *a = sb_get_array (root, "a");
    cr_assert_eq (a->len, 5);
    cr_assert_eq (sb_array_at (a, 2)->type, SB_V_MAP);
    cr_assert_eq (sb_array_at (a, 2)->len, 2);
    cr_assert_eq (sb_get_array (sb_array_at (a, 2), "y")->len, 0);
    cr_assert_eq (sb_array_at (a, 3)->len, 1);
    cr_assert_eq (sb_array_at (sb_array_at (a, 3), 0)->len, 1);
    cr_assert_eq (sb_array_at (a, 4)->len, 2);
    cr_assert_eq (sb_get_map (root, "b")->len, 0);
    cr_assert_eq (sb_get_array (root, "c")->len, 2);
    sb_doc_destroy (&doc);

    /* release hands the buffer over and leaves a usable encoder */
    uint8_t *owned = sb_enc_release (enc, &len);
    cr_assert_not_null (owned);
    cr_assert_eq (owned [0], 0xdf);
    free (owned);
    sb_enc_data (enc, &len);
    cr_assert_eq (len, 0);
    sb_enc_map_open (enc);
    sb_enc_kbool (enc, "z", false);
    sb_enc_map_close (enc);
    data = sb_enc_data (enc, &len);
    cr_assert_eq (len, 5 + 2 + 1);
    cr_assert_eq (s_be32 (data + 1), 1);
    sb_enc_reset (enc);
    sb_enc_data (enc, &len);
    cr_assert_eq (len, 0);
    sb_enc_destroy (&enc);
}

Test (encoder, more_than_65535_items)
{
    const uint32_t n_arr = 70001, n_map = 66000;
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_key (enc, "big");
    sb_enc_array_open (enc);
    for (uint32_t k = 0; k < n_arr; k++)
        sb_enc_uint (enc, k);
    sb_enc_array_close (enc);
    sb_enc_key (enc, "wide");
    sb_enc_map_open (enc);
    for (uint32_t k = 0; k < n_map; k++) {
        char key [16];
        snprintf (key, sizeof key, "k%u", k);
        sb_enc_kuint (enc, key, k);
    }
    sb_enc_map_close (enc);
    sb_enc_kstr (enc, "after", "yes");
    sb_enc_map_close (enc);

    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    cr_assert_eq (s_be32 (data + 1), 3);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, NULL, 0, &err);
    cr_assert_not_null (doc, "%s", err.message);
    const sb_val_t *root = sb_doc_root (doc);
    const sb_val_t *big = sb_get_array (root, "big");
    cr_assert_eq (big->len, n_arr);
    cr_assert_eq (sb_array_at (big, n_arr - 1)->v.u, n_arr - 1);
    const sb_val_t *wide = sb_get_map (root, "wide");
    cr_assert_eq (wide->len, n_map);
    cr_assert_eq (sb_get_uint (wide, "k65999", 0), 65999);
    cr_assert_str_eq (sb_get_str (root, "after"), "yes");

    /* and sb_enc_val writes the same bytes back */
    sb_enc_t *enc2 = sb_enc_new ();
    sb_enc_val (enc2, root);
    size_t len2;
    const uint8_t *data2 = sb_enc_data (enc2, &len2);
    cr_assert_eq (len2, len);
    cr_assert (memcmp (data, data2, len) == 0);
    sb_doc_destroy (&doc);
    sb_enc_destroy (&enc);
    sb_enc_destroy (&enc2);
}

/*  Without a schema (records an actor stores for itself) any msgpack map
    decodes, whatever its keys; under a schema a free-form map's keys are
    strings, as every strict client needs (docs/protocol.md). */
Test (encoder, free_form_integer_keys)
{
    s_raw_t r;
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 7);
    msgpack_pack_uint8 (&r.pk, 1); s_raw_str (&r, "one");
    msgpack_pack_int8 (&r.pk, -2); s_raw_str (&r, "minus two");
    msgpack_pack_uint64 (&r.pk, UINT64_MAX); msgpack_pack_true (&r.pk);
    msgpack_pack_true (&r.pk); msgpack_pack_uint8 (&r.pk, 4);
    msgpack_pack_nil (&r.pk); msgpack_pack_uint8 (&r.pk, 5);
    msgpack_pack_double (&r.pk, 1.5); msgpack_pack_uint8 (&r.pk, 6);
    msgpack_pack_bin (&r.pk, 2); msgpack_pack_bin_body (&r.pk, "\x00\x01", 2); msgpack_pack_uint8 (&r.pk, 7);

    sb_verr_t err;
    sb_doc_t *doc = sb_decode (RAW (r), NULL, 0, &err);
    cr_assert_not_null (doc, "%s", err.message);
    const sb_val_t *body = sb_doc_root (doc);
    cr_assert_eq (body->len, 7);
    cr_assert (sb_map_key (body, 0)->type == SB_V_UINT && sb_map_key (body, 0)->v.u == 1);
    cr_assert_str_eq (sb_map_val (body, 0)->v.s, "one");
    cr_assert (sb_map_key (body, 1)->type == SB_V_INT && sb_map_key (body, 1)->v.i == -2);
    cr_assert (sb_map_key (body, 2)->type == SB_V_UINT && sb_map_key (body, 2)->v.u == UINT64_MAX);
    cr_assert_eq (sb_map_key (body, 3)->type, SB_V_BOOL);
    cr_assert_eq (sb_map_key (body, 4)->type, SB_V_NIL);
    cr_assert_eq (sb_map_key (body, 5)->type, SB_V_FLOAT);
    cr_assert_eq (sb_map_key (body, 6)->type, SB_V_BIN);
    cr_assert_null (sb_get (body, "1"), "an integer key is not the string \"1\"");

    /* sb_enc_val counts non-string keys as pairs too */
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_val (enc, body);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_doc_t *doc2 = sb_decode (data, len, NULL, 0, &err);
    cr_assert_not_null (doc2, "%s", err.message);
    cr_assert (sb_test_val_eq (body, sb_doc_root (doc2)));

    /* the same map as a session.append body is refused */
    s_raw_t a;
    s_raw_init (&a);
    msgpack_pack_map (&a.pk, 2);
    s_raw_str (&a, "session_id");
    s_raw_str (&a, "s1");
    s_raw_str (&a, "body");
    s_raw_bytes (&a, r.sb.data, r.sb.size);
    s_reject (RAW (a), s_type ("session.append")->fields, 0, SB_E_invalid, "body: map key is not a string");

    sb_doc_destroy (&doc);
    sb_doc_destroy (&doc2);
    sb_enc_destroy (&enc);
    msgpack_sbuffer_destroy (&r.sb);
    msgpack_sbuffer_destroy (&a.sb);
}

Test (fields, float_accepts_integers)
{
    static const sb_field_t fields [] = {
        { "x", SB_T_FLOAT, true, 0, NULL, "" },
        { "i", SB_T_INT, false, 0, NULL, "" },
        { "b", SB_T_BIN, false, 4, NULL, "" },
        { NULL, 0, false, 0, NULL, NULL }
    };
    s_raw_t r;

    /* each accepted form of x, and what sb_get_float reads */
    for (int form = 0; form < 6; form++) {
        s_raw_init (&r);
        msgpack_pack_map (&r.pk, 1);
        s_raw_str (&r, "x");
        double want = 0;
        switch (form) {
            case 0: msgpack_pack_uint8 (&r.pk, 3); want = 3; break;
            case 1: msgpack_pack_int8 (&r.pk, -3); want = -3; break;
            case 2: msgpack_pack_uint64 (&r.pk, UINT64_MAX); want = (double) UINT64_MAX; break;
            case 3: msgpack_pack_double (&r.pk, 1.5); want = 1.5; break;
            case 4: msgpack_pack_float (&r.pk, 0.25f); want = 0.25; break;
            case 5: msgpack_pack_int64 (&r.pk, INT64_MIN); want = (double) INT64_MIN; break;
        }
        sb_verr_t err;
        sb_doc_t *doc = sb_decode (RAW (r), fields, 0, &err);
        cr_assert_not_null (doc, "form %d: %s", form, err.message);
        cr_assert_eq (sb_get_float (sb_doc_root (doc), "x", 99), want, "form %d", form);
        sb_doc_destroy (&doc);
        msgpack_sbuffer_destroy (&r.sb);
    }
    /* not numbers */
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 1);
    s_raw_str (&r, "x");
    s_raw_str (&r, "1.5");
    s_reject (RAW (r), fields, 0, SB_E_invalid, "x: expected float");
    msgpack_sbuffer_destroy (&r.sb);
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 1);
    s_raw_str (&r, "x");
    msgpack_pack_true (&r.pk);
    s_reject (RAW (r), fields, 0, SB_E_invalid, "x: expected float");
    msgpack_sbuffer_destroy (&r.sb);

    /* int takes a uint up to INT64_MAX, not one past it */
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 2);
    s_raw_str (&r, "x"); msgpack_pack_uint8 (&r.pk, 0);
    s_raw_str (&r, "i"); msgpack_pack_uint64 (&r.pk, INT64_MAX);
    s_accept (RAW (r), fields, 0);
    msgpack_sbuffer_destroy (&r.sb);
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 2);
    s_raw_str (&r, "x"); msgpack_pack_uint8 (&r.pk, 0);
    s_raw_str (&r, "i"); msgpack_pack_uint64 (&r.pk, (uint64_t) INT64_MAX + 1);
    s_reject (RAW (r), fields, 0, SB_E_invalid, "i: expected int");
    msgpack_sbuffer_destroy (&r.sb);

    /* bin takes bin or str, within its limit */
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 2);
    s_raw_str (&r, "x"); msgpack_pack_uint8 (&r.pk, 0);
    s_raw_str (&r, "b"); s_raw_str (&r, "abcd");
    s_accept (RAW (r), fields, 0);
    msgpack_sbuffer_destroy (&r.sb);
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 2);
    s_raw_str (&r, "x"); msgpack_pack_uint8 (&r.pk, 0);
    s_raw_str (&r, "b"); msgpack_pack_bin (&r.pk, 5); msgpack_pack_bin_body (&r.pk, "abcde", 5);
    s_reject (RAW (r), fields, 0, SB_E_too_large, "b: length 5 is over the limit of 4");
    msgpack_sbuffer_destroy (&r.sb);
}

/*  Compact encodings from another encoder (fixmap, float32, int8 for a
    positive number) decode to the same values; re-encoding may change the
    bytes but never the tree. */
Test (roundtrip, foreign_encoding)
{
    s_raw_t r;
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 4);
    s_raw_str (&r, "f32"); msgpack_pack_float (&r.pk, 0.5f);
    s_raw_str (&r, "pos8");
    s_raw_bytes (&r, "\xd0\x05", 2);            /* int8 holding +5 */
    s_raw_str (&r, "str8");
    s_raw_bytes (&r, "\xd9\x02hi", 4);          /* str8 for a short string */
    s_raw_str (&r, "u16");
    s_raw_bytes (&r, "\xcd\x00\x01", 3);        /* uint16 holding 1 */
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (RAW (r), NULL, 0, &err);
    cr_assert_not_null (doc, "%s", err.message);
    const sb_val_t *root = sb_doc_root (doc);
    cr_assert_eq (sb_get (root, "f32")->type, SB_V_FLOAT);
    cr_assert_eq (sb_get_float (root, "f32", 0), 0.5);
    cr_assert_eq (sb_get (root, "pos8")->type, SB_V_UINT, "non-negative reads as uint");
    cr_assert_eq (sb_get_uint (root, "pos8", 0), 5);
    cr_assert_str_eq (sb_get_str (root, "str8"), "hi");
    cr_assert_eq (sb_get_uint (root, "u16", 0), 1);

    sb_enc_t *enc = sb_enc_new ();
    sb_enc_val (enc, root);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_doc_t *doc2 = sb_decode (data, len, NULL, 0, &err);
    cr_assert_not_null (doc2);
    cr_assert (sb_test_val_eq (root, sb_doc_root (doc2)));
    sb_doc_destroy (&doc);
    sb_doc_destroy (&doc2);
    sb_enc_destroy (&enc);
    msgpack_sbuffer_destroy (&r.sb);
}

/* ------------------------------------------------------------------ */
/*  Integer ranges (sb_field_t min_value..max_value): declared in the
    tables, enforced by the validator for every type alike. */

/*  A body of `t` whose field k holds the integer `v` (negative: as INT). */
static void
s_body_with (const sb_type_t *t, uint32_t k, int64_t v, bool as_int, sb_val_t *body)
{
    s_ar_reset ();
    s_gen_map (t->fields, body, 11, -1, false);
    sb_val_t *slot = (sb_val_t *) sb_map_val (body, k);
    if (as_int)
        s_v_int (slot, v);
    else
        s_v_uint (slot, (uint64_t) v);
}

static void
s_check_ranges (const sb_type_t *t)
{
    for (uint32_t k = 0; t->fields [k].name; k++) {
        const sb_field_t *f = &t->fields [k];
        if (!sb_field_ranged (f))
            continue;
        cr_assert (f->min_value <= f->default_value && f->default_value <= f->max_value,
                   "%s.%s: default %lld outside %lld..%lld", t->name, f->name, (long long) f->default_value,
                   (long long) f->min_value, (long long) f->max_value);
        bool as_int = f->type == SB_T_INT;
        char needle [96];
        snprintf (needle, sizeof needle, "%s: %lld is out of range (%lld..%lld)", f->name,
                  (long long) f->max_value + 1, (long long) f->min_value, (long long) f->max_value);
        sb_val_t body;
        s_body_with (t, k, f->max_value + 1, as_int, &body);
        s_reject_tree (t, &body, SB_E_invalid, needle);
        if (f->min_value > 0 || as_int) {
            snprintf (needle, sizeof needle, "%s: %lld is out of range", f->name, (long long) f->min_value - 1);
            s_body_with (t, k, f->min_value - 1, as_int, &body);
            s_reject_tree (t, &body, SB_E_invalid, needle);
        }
        /* the edges and the default pass */
        int64_t ok [] = { f->min_value, f->max_value, f->default_value };
        for (size_t j = 0; j < sizeof ok / sizeof ok [0]; j++) {
            s_body_with (t, k, ok [j], as_int, &body);
            sb_enc_t *enc = sb_enc_new ();
            s_enc_tree (enc, &body);
            size_t len;
            const uint8_t *data = sb_enc_data (enc, &len);
            s_accept (data, len, t->fields, t->max_bytes);
            sb_enc_destroy (&enc);
        }
    }
}

Test (range, out_of_range_refused_without_allocating_in_range_passes)
{
    s_types_and_kinds (s_check_ranges);
}

/*  Every list request declares the range and default of its page size,
    so that they all treat a bad limit the same way. */
Test (range, every_list_limit_is_declared)
{
    size_t n;
    const sb_type_t *all = sb_schema_all (&n);
    int lists = 0;
    for (size_t t = 0; t < n; t++) {
        if (all [t].kind != SB_KIND_REQUEST)
            continue;
        for (uint32_t k = 0; all [t].fields [k].name; k++) {
            const sb_field_t *f = &all [t].fields [k];
            if (strcmp (f->name, "limit") != 0)
                continue;
            cr_assert (sb_field_ranged (f), "%s.limit declares no range", all [t].name);
            cr_assert (f->min_value >= 1 && f->default_value >= 1, "%s.limit", all [t].name);
            cr_assert_eq (sb_schema_default (all [t].name, "limit"), f->default_value, "%s", all [t].name);
            lists++;
        }
    }
    cr_assert_geq (lists, 3, "session.list, session.events and run.list have a limit");
    cr_assert_eq (sb_schema_default ("run.list", "limit"), 100);
    cr_assert_eq (sb_schema_default ("session.list", "limit"), 100);
    cr_assert_eq (sb_schema_default ("session.events", "limit"), 500);
    cr_assert_eq (sb_schema_default ("run.list", "status"), 0, "no range, no default");
    cr_assert_eq (sb_schema_default ("run.list", "bogus"), 0);
    cr_assert_eq (sb_schema_default ("bogus.type", "limit"), 0);
    const sb_field_t *f = sb_schema_field ("session.events", "limit");
    cr_assert (f && f->min_value == 1 && f->max_value == 5000);
    cr_assert_null (sb_schema_field ("session.events", "bogus"));
    cr_assert_null (sb_schema_field (NULL, "limit"));
}

/*  A hand-made table: INT ranges below zero, and a far-off uint64. */
Test (range, signed_and_huge_values)
{
    static const sb_field_t fields [] = {
        { "n", SB_T_INT, false, 0, NULL, "", -5, 5, 0 },
        { "u", SB_T_UINT, false, 0, NULL, "", 1, 10, 1 },
        { NULL, 0, false, 0, NULL, NULL },
    };
    s_raw_t r;
    struct { const char *key; int64_t i; uint64_t u; bool use_u; bool ok; } cases [] = {
        { "n", -5, 0, false, true }, { "n", 5, 0, false, true }, { "n", -6, 0, false, false },
        { "n", 0, 6, true, false }, { "u", 0, 10, true, true }, { "u", 0, 0, true, false },
        { "u", 0, UINT64_MAX, true, false }, { "n", 0, (uint64_t) INT64_MAX, true, false },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases [0]; c++) {
        s_raw_init (&r);
        msgpack_pack_map (&r.pk, 1);
        msgpack_pack_str (&r.pk, 1);
        msgpack_pack_str_body (&r.pk, cases [c].key, 1);
        if (cases [c].use_u)
            msgpack_pack_uint64 (&r.pk, cases [c].u);
        else
            msgpack_pack_int64 (&r.pk, cases [c].i);
        if (cases [c].ok)
            s_accept ((const uint8_t *) r.sb.data, r.sb.size, fields, 0);
        else {
            char needle [8];
            snprintf (needle, sizeof needle, "%s: ", cases [c].key);
            s_reject ((const uint8_t *) r.sb.data, r.sb.size, fields, 0, SB_E_invalid, needle);
        }
        msgpack_sbuffer_destroy (&r.sb);
    }
}

/* ------------------------------------------------------------------ */
/*  Free-form values under a schema (issue 9, item 10): what is stored
    must decode in any strict client. */

typedef enum { S_STR, S_BIN, S_F64, S_F32, S_KEY } s_bad_kind_t;

/*  {"text": <bad>} as a note body, or {"nested": [{<bad key>: 1}]}. */
static void
s_note_body (s_raw_t *r, s_bad_kind_t kind, const void *p, size_t n, double f)
{
    s_raw_init (r);
    msgpack_pack_map (&r->pk, 1);
    if (kind == S_KEY) {
        s_raw_str (r, "nested");
        msgpack_pack_array (&r->pk, 1);
        msgpack_pack_map (&r->pk, 1);
        msgpack_pack_str (&r->pk, n);
        msgpack_pack_str_body (&r->pk, p, n);
        msgpack_pack_uint8 (&r->pk, 1);
        return;
    }
    s_raw_str (r, "text");
    switch (kind) {
        case S_STR: msgpack_pack_str (&r->pk, n); msgpack_pack_str_body (&r->pk, p, n); break;
        case S_BIN: msgpack_pack_bin (&r->pk, n); msgpack_pack_bin_body (&r->pk, p, n); break;
        case S_F64: msgpack_pack_double (&r->pk, f); break;
        case S_F32: msgpack_pack_float (&r->pk, (float) f); break;
        case S_KEY: break;
    }
}

Test (freeform, bad_text_binary_and_nan_refused_without_allocating)
{
    const sb_field_t *note = sb_schema_tape_kind ("note")->fields;
    const sb_field_t *append = s_type ("session.append")->fields;
    struct { s_bad_kind_t kind; const char *p; size_t n; double f; const char *needle; } cases [] = {
        { S_STR, "\xed\xa0\x80", 3, 0, "text: string is not valid UTF-8" },
        { S_STR, "\xff\xfe", 2, 0, "text: string is not valid UTF-8" },
        { S_STR, "a\0b", 3, 0, "text: string contains a NUL byte" },
        { S_STR, "\xc0\xaf", 2, 0, "not valid UTF-8" },
        { S_STR, "ok \xf4\x90\x80\x80", 7, 0, "not valid UTF-8" },
        { S_BIN, "\x00\x01", 2, 0, "text: binary value where the schema declares no bin field" },
        { S_F64, NULL, 0, NAN, "text: float is not finite" },
        { S_F64, NULL, 0, INFINITY, "float is not finite" },
        { S_F64, NULL, 0, -INFINITY, "float is not finite" },
        { S_F32, NULL, 0, NAN, "float is not finite" },
        { S_KEY, "\xff", 1, 0, "nested[0]: string is not valid UTF-8" },
        { S_KEY, "k\0", 2, 0, "nested[0]: string contains a NUL byte" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases [0]; c++) {
        s_raw_t r;
        s_note_body (&r, cases [c].kind, cases [c].p, cases [c].n, cases [c].f);
        s_reject (RAW (r), note, 0, SB_E_invalid, cases [c].needle);

        /* the same body inside session.append, and inside a batch entry */
        s_raw_t a;
        s_raw_init (&a);
        msgpack_pack_map (&a.pk, 3);
        s_raw_str (&a, "session_id"); s_raw_str (&a, "s1");
        s_raw_str (&a, "kind"); s_raw_str (&a, "note");
        s_raw_str (&a, "body");
        s_raw_bytes (&a, r.sb.data, r.sb.size);
        s_reject (RAW (a), append, 0, SB_E_invalid, "body.");
        msgpack_sbuffer_destroy (&a.sb);

        s_raw_init (&a);
        msgpack_pack_map (&a.pk, 2);
        s_raw_str (&a, "session_id"); s_raw_str (&a, "s1");
        s_raw_str (&a, "entries");
        msgpack_pack_array (&a.pk, 1);
        msgpack_pack_map (&a.pk, 2);
        s_raw_str (&a, "kind"); s_raw_str (&a, "note");
        s_raw_str (&a, "body");
        s_raw_bytes (&a, r.sb.data, r.sb.size);
        s_reject (RAW (a), append, 0, SB_E_invalid, "entries[0].body.");
        msgpack_sbuffer_destroy (&a.sb);
        msgpack_sbuffer_destroy (&r.sb);
    }
}

Test (freeform, good_text_and_typed_fields_pass)
{
    const sb_field_t *note = sb_schema_tape_kind ("note")->fields;
    const char *good [] = { "", "plain", "\xc3\xa9t\xc3\xa9", "\xf0\x9f\x98\x80", "\xef\xbf\xbd" };
    for (size_t c = 0; c < sizeof good / sizeof good [0]; c++) {
        s_raw_t r;
        s_note_body (&r, S_STR, good [c], strlen (good [c]), 0);
        s_accept (RAW (r), note, 0);
        msgpack_sbuffer_destroy (&r.sb);
    }
    s_raw_t r;
    s_note_body (&r, S_F64, NULL, 0, -0.0);
    s_accept (RAW (r), note, 0);
    msgpack_sbuffer_destroy (&r.sb);
    s_note_body (&r, S_F64, NULL, 0, 1e308);
    s_accept (RAW (r), note, 0);
    msgpack_sbuffer_destroy (&r.sb);

    /* bytes pass where the schema says bin */
    static const sb_field_t with_bin [] = {
        { "data", SB_T_BIN, false, 16, NULL, "" },
        { "t", SB_T_FLOAT, false, 0, NULL, "" },
        { NULL, 0, false, 0, NULL, NULL },
    };
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 1);
    s_raw_str (&r, "data");
    msgpack_pack_bin (&r.pk, 3);
    msgpack_pack_bin_body (&r.pk, "\xff\x00\xfe", 3);
    s_accept (RAW (r), with_bin, 0);
    msgpack_sbuffer_destroy (&r.sb);
    /* a typed float is held to the same rule */
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 1);
    s_raw_str (&r, "t");
    msgpack_pack_double (&r.pk, NAN);
    s_reject (RAW (r), with_bin, 0, SB_E_invalid, "t: float is not finite");
    msgpack_sbuffer_destroy (&r.sb);

    /* without a schema (an actor's own records) nothing changes */
    s_note_body (&r, S_STR, "\xff\xfe", 2, 0);
    s_accept (RAW (r), NULL, 0);
    cr_assert_eq (sb_msgpack_span (RAW (r)), r.sb.size);
    msgpack_sbuffer_destroy (&r.sb);
}

/* ------------------------------------------------------------------ */
/*  Every integer from outside has a declared range (issue 9, item 9). */

/*  Appends to `out` each INT/UINT field under `fields` (through sub-maps
    and array items) that declares no range, or a range wide enough that
    a sum of two values could overflow an int64. */
static void
s_walk_ranges (const char *where, const sb_field_t *fields, int depth, char *out, size_t n)
{
    cr_assert_lt (depth, 8, "%s: schema nesting too deep to walk", where);
    for (uint32_t k = 0; fields && fields [k].name; k++) {
        const sb_field_t *f = &fields [k];
        char path [192];
        snprintf (path, sizeof path, "%s.%s", where, f->name);
        if (f->type == SB_T_INT || f->type == SB_T_UINT) {
            bool ok = sb_field_ranged (f) && f->min_value >= -SB_COUNT_MAX && f->max_value <= SB_COUNT_MAX
                   && f->min_value <= f->default_value && f->default_value <= f->max_value;
            if (!ok && strlen (out) + strlen (path) + 2 < n) {
                strcat (out, " ");
                strcat (out, path);
            }
        }
        if (f->type == SB_T_MAP && f->sub)
            s_walk_ranges (path, f->sub, depth + 1, out, n);
        if (f->type == SB_T_ARRAY && f->sub && (f->sub->type == SB_T_MAP || f->sub->type == SB_T_ARRAY))
            s_walk_ranges (path, f->sub->sub, depth + 1, out, n);
    }
}

Test (range, every_outside_integer_is_ranged)
{
    char missing [4096] = "";
    size_t n;
    const sb_type_t *all = sb_schema_all (&n);
    int walked = 0;
    for (size_t t = 0; t < n; t++)
        if (all [t].kind == SB_KIND_REQUEST || all [t].kind == SB_KIND_ONEWAY) {
            s_walk_ranges (all [t].name, all [t].fields, 0, missing, sizeof missing);
            walked++;
        }
    s_walk_ranges ("header", sb_header_fields, 0, missing, sizeof missing);
    /* tape entries are bodies of session.append */
    const sb_type_t *kinds = sb_schema_tape_all (&n);
    for (size_t t = 0; t < n; t++)
        s_walk_ranges (kinds [t].name, kinds [t].fields, 0, missing, sizeof missing);
    cr_assert_gt (walked, 20);
    cr_assert_str_eq (missing, "", "integers from outside without a range:%s", missing);

    /* the two that overflowed: a header deadline of 2^63 and a run's
       timeout_s of 2^62 are refused before any arithmetic */
    const sb_field_t *dl = NULL;
    for (int k = 0; sb_header_fields [k].name; k++)
        if (strcmp (sb_header_fields [k].name, "deadline") == 0)
            dl = &sb_header_fields [k];
    cr_assert_not_null (dl);
    s_raw_t r;
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 3);
    s_raw_str (&r, "type"); s_raw_str (&r, "echo.ping");
    s_raw_str (&r, "id"); s_raw_str (&r, "01JABCDEFGHJKMNPQRSTVWXYZ0");
    s_raw_str (&r, "deadline"); msgpack_pack_uint64 (&r.pk, 1ull << 63);
    s_reject (RAW (r), sb_header_fields, 4096, SB_E_invalid, "deadline: 9223372036854775808 is out of range");
    msgpack_sbuffer_destroy (&r.sb);

    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 2);
    s_raw_str (&r, "session_id"); s_raw_str (&r, "01JABCDEFGHJKMNPQRSTVWXYZ0");
    s_raw_str (&r, "limits");
    msgpack_pack_map (&r.pk, 1);
    s_raw_str (&r, "timeout_s"); msgpack_pack_uint64 (&r.pk, 1ull << 62);
    s_reject (RAW (r), s_type ("run.request")->fields, 0, SB_E_invalid,
              "limits.timeout_s: 4611686018427387904 is out of range");
    msgpack_sbuffer_destroy (&r.sb);
}

/*  A tape body is judged strictly where it is written and replayed as it
    was stored: a tape written before the strict rules still pages. */
Test (freeform, stored_bodies_replay_as_stored)
{
    s_raw_t body;
    s_note_body (&body, S_STR, "\xff\xfe", 2, 0);
    s_raw_t r;
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 4);
    s_raw_str (&r, "events");
    msgpack_pack_array (&r.pk, 1);
    msgpack_pack_map (&r.pk, 5);
    s_raw_str (&r, "session_id"); s_raw_str (&r, "s1");
    s_raw_str (&r, "seq"); msgpack_pack_uint8 (&r.pk, 1);
    s_raw_str (&r, "ts"); msgpack_pack_uint64 (&r.pk, 1700000000000ull);
    s_raw_str (&r, "kind"); s_raw_str (&r, "note");
    s_raw_str (&r, "body"); s_raw_bytes (&r, body.sb.data, body.sb.size);
    s_raw_str (&r, "next_after"); msgpack_pack_uint8 (&r.pk, 1);
    s_raw_str (&r, "last_seq"); msgpack_pack_uint8 (&r.pk, 1);
    s_raw_str (&r, "more"); msgpack_pack_false (&r.pk);
    const sb_type_t *ok = s_type ("session.events.ok");
    s_accept (RAW (r), ok->fields, ok->max_bytes);
    msgpack_sbuffer_destroy (&r.sb);

    /* the record's own fields stay strict */
    s_raw_init (&r);
    msgpack_pack_map (&r.pk, 5);
    s_raw_str (&r, "session_id"); s_raw_str (&r, "s1");
    s_raw_str (&r, "seq"); msgpack_pack_uint8 (&r.pk, 1);
    s_raw_str (&r, "ts"); msgpack_pack_uint8 (&r.pk, 1);
    s_raw_str (&r, "kind"); s_raw_str (&r, "note");
    s_raw_str (&r, "extra"); msgpack_pack_double (&r.pk, NAN);
    s_reject (RAW (r), s_type ("session.event")->fields, 0, SB_E_invalid, "extra: float is not finite");
    msgpack_sbuffer_destroy (&r.sb);

    /* and the same body is refused on the way in */
    s_reject (RAW (body), sb_schema_tape_kind ("note")->fields, 0, SB_E_invalid, "not valid UTF-8");
    msgpack_sbuffer_destroy (&body.sb);
}

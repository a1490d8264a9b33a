/*  bus/envelope.c — headers and ULIDs. */
#include "bus/envelope.h"
#include "common/log.h"
#include "schemas/schema.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static const char s_crockford [] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/*  Per-thread state keeps ids monotonic within one millisecond without a
    lock: the random part is incremented instead of redrawn. */
static __thread uint64_t s_last_ms;
static __thread uint8_t s_rand [10];

void
sb_ulid_new (char out [SB_ULID_LEN + 1])
{
    uint64_t ms = sb_now_ms ();
    if (ms <= s_last_ms) {
        ms = s_last_ms;
        for (int k = 9; k >= 0; k--)
            if (++s_rand [k] != 0)
                break;
    }
    else {
        if (getrandom (s_rand, sizeof s_rand, 0) != (ssize_t) sizeof s_rand) {
            /* getrandom cannot fail for 10 bytes once the pool is ready;
               fall back to mixing the clock rather than repeat ids */
            for (int k = 0; k < 10; k++)
                s_rand [k] ^= (uint8_t) (ms >> (k * 5)) ^ (uint8_t) k;
        }
        s_rand [0] &= 0x7f;     /* leave room to increment within the ms */
        s_last_ms = ms;
    }
    /* 48 bits of time then 80 random bits, written as 26 base32 digits
       from the least significant end (the first digit holds 3 bits) */
    unsigned __int128 v = (unsigned __int128) (ms & 0xffffffffffffull) << 80;
    for (int k = 0; k < 10; k++)
        v |= (unsigned __int128) s_rand [k] << (72 - 8 * k);
    for (int c = SB_ULID_LEN - 1; c >= 0; c--) {
        out [c] = s_crockford [(unsigned) (v & 31)];
        v >>= 5;
    }
    out [SB_ULID_LEN] = 0;
}

bool
sb_ulid_valid (const char *s)
{
    if (!s || strlen (s) != SB_ULID_LEN)
        return false;
    for (int k = 0; k < SB_ULID_LEN; k++)
        if (!strchr (s_crockford, s [k]) || !s [k])
            return false;
    return s [0] <= '7';
}

bool
sb_ulid_prefix_valid (const char *s)
{
    size_t n = s ? strlen (s) : 0;
    if (n == 0 || n > SB_ULID_LEN)
        return false;
    for (size_t k = 0; k < n; k++)
        if (!strchr (s_crockford, s [k]))
            return false;
    return s [0] <= '7';
}

void
sb_header_init (sb_header_t *h, const char *type, const char *from)
{
    memset (h, 0, sizeof *h);
    size_t n = strlen (type);
    memcpy (h->type, type, n < sizeof h->type ? n : sizeof h->type - 1);
    sb_ulid_new (h->id);
    if (from) {
        n = strlen (from);
        memcpy (h->from, from, n < sizeof h->from ? n : sizeof h->from - 1);
    }
    h->ts = sb_now_ms ();
}

void
sb_header_encode (const sb_header_t *h, sb_enc_t *enc)
{
    sb_enc_reset (enc);
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "type", h->type);
    sb_enc_kstr (enc, "id", h->id);
    if (h->corr [0]) sb_enc_kstr (enc, "corr", h->corr);
    if (h->from [0]) sb_enc_kstr (enc, "from", h->from);
    sb_enc_kuint (enc, "ts", h->ts);
    if (h->key [0]) sb_enc_kstr (enc, "key", h->key);
    if (h->deadline) sb_enc_kuint (enc, "deadline", h->deadline);
    if (h->trace [0]) sb_enc_kstr (enc, "trace", h->trace);
    if (h->seq) sb_enc_kuint (enc, "seq", h->seq);
    if (h->to [0]) sb_enc_kstr (enc, "to", h->to);
    sb_enc_map_close (enc);
}

/*  Copies a header string (the schema bounds its length). Hot: every
    message on the bus goes through here, so no printf. */
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

/*  A header refused for one of its values (a deadline past year 9999,
    say) still names its request: its id is kept when it is a plain
    token and its type is valid text, so the sender gets an `invalid`
    reply, not silence. A header whose type or id is itself bad stays
    unanswered. */
static void
s_recover_id (const uint8_t *buf, size_t len, sb_header_t *h)
{
    sb_vstat_t stat;
    if (sb_validate (buf, len, NULL, 4096, &stat, NULL))
        return;
    _Alignas (16) uint8_t mem [8192];
    const sb_val_t *root = sb_doc_decode_into (buf, len, &stat, mem, sizeof mem);
    const sb_val_t *type = sb_get (root, "type");
    if (!type || type->type != SB_V_STR || type->len == 0 || type->len >= sizeof h->type
    ||  memchr (type->v.s, 0, type->len) || !sb_utf8_valid (type->v.s, type->len))
        return;
    const sb_val_t *id = sb_get (root, "id");
    if (!id || id->type != SB_V_STR || id->len == 0 || id->len >= sizeof h->id)
        return;
    for (uint32_t k = 0; k < id->len; k++)
        if (!isalnum ((unsigned char) id->v.s [k]) && id->v.s [k] != '-' && id->v.s [k] != '_')
            return;
    memcpy (h->id, id->v.s, id->len + 1);
}

/*  The fast path of sb_header_parse, for the headers every peer of ours
    writes: a map of known fields holding strings and unsigned integers.
    Every message crosses two to four header parses (broker in, actor in,
    broker out, the event plane), and the full path below (validate, decode
    into a tree, look each field up by name) costs about 5,600 instructions
    a header, a third of what the broker and the session actor spend on one
    append (docs/bench.md). This one reads the bytes once into h.

    It accepts a subset of what the full path accepts, and fills h exactly
    as the full path would: it reads the limits and ranges from
    sb_header_fields itself. Anything else (an unknown or repeated field,
    a nil, a value the schema refuses, trailing bytes) makes it return
    false, and the full path judges the header, its error message and id
    recovery included. tests/unit/test_header.c checks both paths agree. */

//  Where each header field goes in sb_header_t, by its index in
//  sb_header_fields.
static const size_t s_str_off [] = {
    offsetof (sb_header_t, type), offsetof (sb_header_t, id), offsetof (sb_header_t, corr),
    offsetof (sb_header_t, from), 0, offsetof (sb_header_t, key), 0,
    offsetof (sb_header_t, trace), 0, offsetof (sb_header_t, to)
};
static const size_t s_str_size [] = {
    sizeof ((sb_header_t *) 0)->type, sizeof ((sb_header_t *) 0)->id, sizeof ((sb_header_t *) 0)->corr,
    sizeof ((sb_header_t *) 0)->from, 0, sizeof ((sb_header_t *) 0)->key, 0,
    sizeof ((sb_header_t *) 0)->trace, 0, sizeof ((sb_header_t *) 0)->to
};
static const size_t s_uint_off [] = {
    0, 0, 0, 0, offsetof (sb_header_t, ts), 0, offsetof (sb_header_t, deadline), 0,
    offsetof (sb_header_t, seq), 0
};

//  The index of a header field in sb_header_fields, or -1.
static int
s_field_index (const uint8_t *k, size_t n)
{
    switch (n) {
        case 2:
            if (memcmp (k, "id", 2) == 0) return 1;
            if (memcmp (k, "ts", 2) == 0) return 4;
            if (memcmp (k, "to", 2) == 0) return 9;
            return -1;
        case 3:
            if (memcmp (k, "key", 3) == 0) return 5;
            if (memcmp (k, "seq", 3) == 0) return 8;
            return -1;
        case 4:
            if (memcmp (k, "type", 4) == 0) return 0;
            if (memcmp (k, "corr", 4) == 0) return 2;
            if (memcmp (k, "from", 4) == 0) return 3;
            return -1;
        case 5:
            return memcmp (k, "trace", 5) == 0? 7: -1;
        case 8:
            return memcmp (k, "deadline", 8) == 0? 6: -1;
        default:
            return -1;
    }
}

//  Reads a msgpack str header at *p: its length and payload. False when
//  it is not a str or overruns the buffer.
static bool
s_fast_str (const uint8_t **p, const uint8_t *end, const uint8_t **data, size_t *len)
{
    const uint8_t *q = *p;
    uint8_t t = *q++;
    size_t n;
    if ((t & 0xe0) == 0xa0)
        n = t & 0x1f;
    else
    if (t == 0xd9 && end - q >= 1)
        n = *q++;
    else
    if (t == 0xda && end - q >= 2) {
        n = (size_t) q [0] << 8 | q [1];
        q += 2;
    }
    else
        return false;
    if ((size_t) (end - q) < n)
        return false;
    *data = q;
    *len = n;
    *p = q + n;
    return true;
}

static bool
s_fast_uint (const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *q = *p;
    uint8_t t = *q++;
    if (t <= 0x7f) {
        *v = t;
        *p = q;
        return true;
    }
    int n = t >= 0xcc && t <= 0xcf? 1 << (t - 0xcc): t >= 0xd0 && t <= 0xd3? 1 << (t - 0xd0): 0;
    if (!n || end - q < n)
        return false;
    uint64_t u = 0;
    for (int k = 0; k < n; k++)
        u = (u << 8) | q [k];
    if (t >= 0xd0) {            //  signed: only a non-negative value is a uint
        int64_t s = n == 1? (int8_t) u: n == 2? (int16_t) u: n == 4? (int32_t) u: (int64_t) u;
        if (s < 0)
            return false;
        u = (uint64_t) s;
    }
    *v = u;
    *p = q + n;
    return true;
}

static bool
s_header_fast (const uint8_t *buf, size_t len, sb_header_t *h)
{
    if (!buf || len < 1 || len > 4096)
        return false;
    const uint8_t *p = buf, *end = buf + len;
    size_t pairs;
    if ((*p & 0xf0) == 0x80)
        pairs = *p++ & 0x0f;
    else
    if (*p == 0xde && len >= 3) {
        pairs = (size_t) p [1] << 8 | p [2];
        p += 3;
    }
    else
    if (*p == 0xdf && len >= 5) {   //  sb_enc writes every map as a map32
        pairs = (size_t) p [1] << 24 | (size_t) p [2] << 16 | (size_t) p [3] << 8 | p [4];
        p += 5;
    }
    else
        return false;
    if (pairs > 10)             //  the header has ten fields
        return false;
    unsigned seen = 0;
    for (size_t k = 0; k < pairs; k++) {
        const uint8_t *name, *data;
        size_t nlen, dlen;
        if (p >= end || !s_fast_str (&p, end, &name, &nlen))
            return false;
        int f = s_field_index (name, nlen);
        if (f < 0 || (seen & (1u << f)) || p >= end)
            return false;
        seen |= 1u << f;
        const sb_field_t *field = &sb_header_fields [f];
        if (field->type == SB_T_STR) {
            if (!s_fast_str (&p, end, &data, &dlen) || dlen > field->max || dlen >= s_str_size [f]
            ||  memchr (data, 0, dlen) || !sb_utf8_valid ((const char *) data, dlen))
                return false;
            char *dst = (char *) h + s_str_off [f];
            memcpy (dst, data, dlen);
            dst [dlen] = 0;
        }
        else {
            uint64_t v;
            if (!s_fast_uint (&p, end, &v))
                return false;
            if (sb_field_ranged (field)
            &&  ((field->min_value > 0 && v < (uint64_t) field->min_value)
              || field->max_value < 0 || v > (uint64_t) field->max_value))
                return false;
            memcpy ((char *) h + s_uint_off [f], &v, sizeof v);
        }
    }
    return p == end && h->type [0] && h->id [0];
}

int
sb_header_parse (const uint8_t *buf, size_t len, sb_header_t *h, sb_verr_t *err)
{
    sb_vstat_t stat;
    memset (h, 0, sizeof *h);
    if (s_header_fast (buf, len, h)) {
        if (err) {
            err->code = SB_OK;
            err->message [0] = 0;
        }
        return 0;
    }
    memset (h, 0, sizeof *h);
    if (sb_validate (buf, len, sb_header_fields, 4096, &stat, err)) {
        s_recover_id (buf, len, h);
        return -1;
    }
    /* headers are small; the stack holds the decoded tree */
    _Alignas (16) uint8_t mem [8192];
    const sb_val_t *root = sb_doc_decode_into (buf, len, &stat, mem, sizeof mem);
    if (!root) {
        if (err) {
            err->code = SB_E_too_large;
            snprintf (err->message, sizeof err->message, "header too large");
        }
        return -1;
    }
    memset (h, 0, sizeof *h);
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
    if (!h->type [0] || !h->id [0]) {
        if (err) {
            err->code = SB_E_invalid;
            snprintf (err->message, sizeof err->message, "header: empty type or id");
        }
        return -1;
    }
    return 0;
}

size_t
sb_type_service (const char *type, const char **service)
{
    const char *dot = strchr (type, '.');
    *service = type;
    return dot ? (size_t) (dot - type) : 0;
}

bool
sb_type_has_suffix (const char *type, const char *suffix)
{
    size_t n = strlen (type), m = strlen (suffix);
    return n > m && strcmp (type + n - m, suffix) == 0;
}

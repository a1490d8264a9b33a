/*  bus/envelope.c — headers and ULIDs. */
#include "bus/envelope.h"
#include "common/log.h"

#include <ctype.h>
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

int
sb_header_parse (const uint8_t *buf, size_t len, sb_header_t *h, sb_verr_t *err)
{
    sb_vstat_t stat;
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

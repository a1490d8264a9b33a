/*  schemas/json.c — JSON <-> msgpack translation, driven by the schema.

    Both directions are recursive walks. msgpack -> JSON needs no schema
    because a decoded tree already says what each value is; JSON -> msgpack
    reads the field table to know which strings are base64 bytes and which
    are big integers. Neither direction judges types: sb_validate does that
    once, on the msgpack, with one set of error messages. */
#include "schemas/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*  A decoded tree is at most SB_MAX_DEPTH deep; a hand-built one could be
    anything, and the recursion must stop somewhere. */
#define S_FROM_MAX_DEPTH 64

/*  JavaScript's Number.MAX_SAFE_INTEGER: past it a double cannot tell
    neighbouring integers apart, so such integers travel as strings. */
#define S_SAFE_INT ((1ull << 53) - 1)

/* ------------------------------------------------------------------ */
/*  Base64 (RFC 4648, standard alphabet) */

static const char s_b64 [] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
sb_base64_encode (const void *data, size_t len)
{
    const uint8_t *p = data;
    size_t out_len = (len + 2) / 3 * 4;
    char *out = malloc (out_len + 1);
    if (!out)
        return NULL;
    char *o = out;
    size_t k = 0;
    for (; k + 3 <= len; k += 3) {
        uint32_t w = (uint32_t) p [k] << 16 | (uint32_t) p [k + 1] << 8 | p [k + 2];
        *o++ = s_b64 [w >> 18];
        *o++ = s_b64 [(w >> 12) & 63];
        *o++ = s_b64 [(w >> 6) & 63];
        *o++ = s_b64 [w & 63];
    }
    if (len - k == 1) {
        uint32_t w = (uint32_t) p [k] << 16;
        *o++ = s_b64 [w >> 18];
        *o++ = s_b64 [(w >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    }
    else
    if (len - k == 2) {
        uint32_t w = (uint32_t) p [k] << 16 | (uint32_t) p [k + 1] << 8;
        *o++ = s_b64 [w >> 18];
        *o++ = s_b64 [(w >> 12) & 63];
        *o++ = s_b64 [(w >> 6) & 63];
        *o++ = '=';
    }
    *o = 0;
    return out;
}

size_t
sb_base64_decoded_max (size_t len)
{
    return len / 4 * 3 + 3;
}

static int
s_b64_digit (uint8_t c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/*  Strict on purpose: one text has one meaning. Padding is optional (some
    clients strip it), but when present it must complete the last quantum,
    and the unused low bits of the last digit must be zero. */
ssize_t
sb_base64_decode (const char *text, size_t len, uint8_t *out)
{
    const uint8_t *t = (const uint8_t *) text;
    size_t pad = 0;
    while (pad < 2 && len > pad && t [len - 1 - pad] == '=')
        pad++;
    if (pad && len % 4 != 0)
        return -1;
    size_t n = len - pad;
    if (n % 4 == 1 || (pad && n % 4 != 4 - pad))
        return -1;
    size_t o = 0;
    uint32_t w = 0;
    for (size_t k = 0; k < n; k++) {
        int d = s_b64_digit (t [k]);
        if (d < 0)
            return -1;
        w = (w << 6) | (uint32_t) d;
        if (k % 4 == 3) {
            out [o++] = (uint8_t) (w >> 16);
            out [o++] = (uint8_t) (w >> 8);
            out [o++] = (uint8_t) w;
            w = 0;
        }
    }
    if (n % 4 == 2) {
        if (w & 0x0f)
            return -1;
        out [o++] = (uint8_t) (w >> 4);
    }
    else
    if (n % 4 == 3) {
        if (w & 0x03)
            return -1;
        out [o++] = (uint8_t) (w >> 10);
        out [o++] = (uint8_t) (w >> 2);
    }
    return (ssize_t) o;
}

/* ------------------------------------------------------------------ */
/*  msgpack -> JSON */

/*  Length of the well-formed UTF-8 sequence at p, or 0. Same rules as
    jansson's checker: no overlong forms, no surrogates, nothing past
    U+10FFFF. */
static size_t
s_utf8_seq (const uint8_t *p, size_t n)
{
    uint8_t c = p [0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else
    if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    }
    else
    if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    }
    else
        return 0;
    if (n < len || p [1] < lo || p [1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if ((p [k] & 0xc0) != 0x80)
            return 0;
    return len;
}

/*  A JSON string of bytes that msgpack calls a string but that need not
    be UTF-8: each byte that starts no valid sequence becomes U+FFFD. */
static json_t *
s_json_str (const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *) s;
    size_t k = 0, seq;
    while (k < len && (seq = s_utf8_seq (p + k, len - k)) > 0)
        k += seq;
    if (k == len)
        return json_stringn (s, len);

    char *fixed = malloc (3 * len);
    if (!fixed)
        return NULL;
    size_t o = 0;
    for (k = 0; k < len; ) {
        seq = s_utf8_seq (p + k, len - k);
        if (seq) {
            memcpy (fixed + o, p + k, seq);
            o += seq;
            k += seq;
        }
        else {
            memcpy (fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            k++;
        }
    }
    json_t *j = json_stringn (fixed, o);
    free (fixed);
    return j;
}

static json_t *s_from (const sb_val_t *v, int depth);

/*  The text of a map key. JSON keys are strings; msgpack keys need not
    be, so a key is written as the JSON text of its value, minus quotes
    for strings. Returns a malloc'd string and its length, or NULL. */
static char *
s_key_text (const sb_val_t *key, size_t *len, int depth)
{
    char buf [64];
    const char *text = buf;
    switch (key->type) {
        case SB_V_STR: {
            json_t *j = s_json_str (key->v.s, key->len);
            if (!j)
                return NULL;
            *len = json_string_length (j);
            char *copy = malloc (*len + 1);
            if (copy) {
                memcpy (copy, json_string_value (j), *len);
                copy [*len] = 0;
            }
            json_decref (j);
            return copy;
        }
        case SB_V_BIN: {
            char *b64 = sb_base64_encode (key->v.s, key->len);
            if (b64)
                *len = strlen (b64);
            return b64;
        }
        case SB_V_NIL:   text = "null"; break;
        case SB_V_BOOL:  text = key->v.b ? "true" : "false"; break;
        case SB_V_INT:   snprintf (buf, sizeof buf, "%" PRId64, key->v.i); break;
        case SB_V_UINT:  snprintf (buf, sizeof buf, "%" PRIu64, key->v.u); break;
        case SB_V_FLOAT:
            if (isfinite (key->v.f))
                snprintf (buf, sizeof buf, "%.17g", key->v.f);
            else
                text = "null";
            break;
        case SB_V_ARRAY:
        case SB_V_MAP: {
            /* the validator refuses container keys; a hand-built tree
               still gets a faithful text */
            json_t *j = s_from (key, depth + 1);
            char *dump = j ? json_dumps (j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
            json_decref (j);
            if (!dump)
                return NULL;
            char *copy = strdup (dump);
            free (dump);
            if (copy)
                *len = strlen (copy);
            return copy;
        }
    }
    *len = strlen (text);
    return strdup (text);
}

static json_t *
s_from (const sb_val_t *v, int depth)
{
    if (!v || depth > S_FROM_MAX_DEPTH)
        return NULL;
    char num [32];
    switch (v->type) {
        case SB_V_NIL:
            return json_null ();
        case SB_V_BOOL:
            return json_boolean (v->v.b);
        case SB_V_INT:
            if (v->v.i >= -(int64_t) S_SAFE_INT && v->v.i <= (int64_t) S_SAFE_INT)
                return json_integer ((json_int_t) v->v.i);
            snprintf (num, sizeof num, "%" PRId64, v->v.i);
            return json_string (num);
        case SB_V_UINT:
            if (v->v.u <= S_SAFE_INT)
                return json_integer ((json_int_t) v->v.u);
            snprintf (num, sizeof num, "%" PRIu64, v->v.u);
            return json_string (num);
        case SB_V_FLOAT:
            /* JSON has no NaN or Infinity; jansson refuses them */
            return isfinite (v->v.f) ? json_real (v->v.f) : json_null ();
        case SB_V_STR:
            return s_json_str (v->v.s, v->len);
        case SB_V_BIN: {
            char *b64 = sb_base64_encode (v->v.s, v->len);
            if (!b64)
                return NULL;
            json_t *j = json_string (b64);
            free (b64);
            return j;
        }
        case SB_V_ARRAY: {
            json_t *arr = json_array ();
            for (uint32_t k = 0; arr && k < v->len; k++) {
                json_t *item = s_from (&v->v.a [k], depth + 1);
                if (!item || json_array_append_new (arr, item)) {
                    json_decref (arr);
                    arr = NULL;
                }
            }
            return arr;
        }
        case SB_V_MAP: {
            json_t *obj = json_object ();
            for (uint32_t k = 0; obj && k < v->len; k++) {
                size_t klen = 0;
                char *key = s_key_text (&v->v.a [2 * k], &klen, depth);
                /* sb_get finds the first of repeated keys; show what
                   the actors see */
                if (key && json_object_getn (obj, key, klen)) {
                    free (key);
                    continue;
                }
                json_t *item = key ? s_from (&v->v.a [2 * k + 1], depth + 1) : NULL;
                if (!item || json_object_setn_new (obj, key, klen, item)) {
                    json_decref (obj);
                    obj = NULL;
                }
                free (key);
            }
            return obj;
        }
    }
    return NULL;
}

json_t *
sb_json_from_val (const sb_val_t *v)
{
    return s_from (v, 0);
}

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} s_buf_t;

static int
s_buf_write (const char *chunk, size_t n, void *arg)
{
    s_buf_t *b = arg;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *data = realloc (b->data, cap);
        if (!data)
            return -1;
        b->data = data;
        b->cap = cap;
    }
    memcpy (b->data + b->len, chunk, n);
    b->len += n;
    b->data [b->len] = 0;
    return 0;
}

char *
sb_json_dump (const sb_val_t *v)
{
    json_t *j = sb_json_from_val (v);
    if (!j)
        return NULL;
    /* dumped through a callback so the caller frees with plain free(),
       whatever allocator jansson was given */
    s_buf_t b = { NULL, 0, 0 };
    int rc = json_dump_callback (j, s_buf_write, &b, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref (j);
    if (rc || !b.data) {
        free (b.data);
        return NULL;
    }
    return b.data;
}

int
sb_json_print (FILE *out, const sb_val_t *v)
{
    json_t *j = sb_json_from_val (v);
    if (!j)
        return -1;
    int rc = json_dumpf (j, out, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref (j);
    if (rc || fputc ('\n', out) == EOF)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ */
/*  JSON -> msgpack */

typedef struct {
    sb_enc_t *enc;
    sb_verr_t *err;
    char path [96];
} s_tr_t;

static int
s_tr_fail (s_tr_t *t, const char *fmt, ...)
{
    if (t->err && t->err->code == SB_OK) {
        char msg [160];
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (msg, sizeof msg, fmt, ap);
        va_end (ap);
        t->err->code = SB_E_invalid;
        if (t->path [0])
            snprintf (t->err->message, sizeof t->err->message, "%s: %s", t->path, msg);
        else
            snprintf (t->err->message, sizeof t->err->message, "%s", msg);
    }
    return -1;
}

static size_t
s_path_push (s_tr_t *t, const char *name, size_t nlen, long index)
{
    size_t mark = strlen (t->path);
    size_t room = sizeof t->path - mark;
    if (index >= 0)
        snprintf (t->path + mark, room, "[%ld]", index);
    else
        snprintf (t->path + mark, room, "%s%.*s", mark ? "." : "",
                  (int) (nlen > 40 ? 40 : nlen), name);
    return mark;
}

/*  Parses an optionally negative decimal integer: an optional '-', then
    digits only (no '+', no spaces), magnitude up to 2^64 - 1. */
static bool
s_parse_dec (const char *s, size_t n, bool *neg, uint64_t *mag)
{
    *neg = n > 0 && s [0] == '-';
    size_t k = *neg ? 1 : 0;
    if (k == n)
        return false;
    uint64_t v = 0;
    for (; k < n; k++) {
        if (s [k] < '0' || s [k] > '9')
            return false;
        unsigned d = (unsigned) (s [k] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *mag = v;
    return true;
}

static int s_tr_value (s_tr_t *t, const json_t *j, const sb_field_t *field, int depth);

static int
s_tr_object (s_tr_t *t, const json_t *obj, const sb_field_t *fields, int depth)
{
    if (depth > SB_JSON_MAX_DEPTH)
        return s_tr_fail (t, "nesting deeper than %d", SB_JSON_MAX_DEPTH);
    sb_enc_map_open (t->enc);
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach ((json_t *) obj, key, klen, val) {
        /* the encoder takes C-string keys, and a NUL in a key is a trap
           for every C reader downstream */
        if (memchr (key, 0, klen))
            return s_tr_fail (t, "object key contains a NUL character");
        const sb_field_t *f = NULL;
        for (int k = 0; fields && fields [k].name; k++)
            if (strlen (fields [k].name) == klen && memcmp (fields [k].name, key, klen) == 0) {
                f = &fields [k];
                break;
            }
        sb_enc_key (t->enc, key);
        size_t mark = s_path_push (t, key, klen, -1);
        if (s_tr_value (t, val, f, depth))
            return -1;
        t->path [mark] = 0;
    }
    sb_enc_map_close (t->enc);
    return 0;
}

static int
s_tr_array (s_tr_t *t, const json_t *arr, const sb_field_t *item, int depth)
{
    if (depth > SB_JSON_MAX_DEPTH)
        return s_tr_fail (t, "nesting deeper than %d", SB_JSON_MAX_DEPTH);
    sb_enc_array_open (t->enc);
    size_t k;
    json_t *val;
    json_array_foreach ((json_t *) arr, k, val) {
        size_t mark = s_path_push (t, NULL, 0, (long) k);
        if (s_tr_value (t, val, item, depth))
            return -1;
        t->path [mark] = 0;
    }
    sb_enc_array_close (t->enc);
    return 0;
}

static int
s_tr_string (s_tr_t *t, const json_t *j, sb_ftype_t want)
{
    const char *s = json_string_value (j);
    size_t n = json_string_length (j);
    if (want == SB_T_BIN) {
        uint8_t *bytes = malloc (sb_base64_decoded_max (n));
        if (!bytes)
            return s_tr_fail (t, "out of memory");
        ssize_t got = sb_base64_decode (s, n, bytes);
        if (got >= 0)
            sb_enc_bin (t->enc, bytes, (size_t) got);
        free (bytes);
        return got < 0 ? s_tr_fail (t, "expected bin as a base64 string") : 0;
    }
    if (want == SB_T_INT || want == SB_T_UINT || want == SB_T_FLOAT) {
        bool neg;
        uint64_t mag;
        bool dec = s_parse_dec (s, n, &neg, &mag);
        /* a float field holds any integer, and one past 2^53 printed
           as a decimal string must come back; other strings there are
           the validator's to refuse */
        if (!dec && want == SB_T_FLOAT) {
            sb_enc_strn (t->enc, s, n);
            return 0;
        }
        if (!dec)
            return s_tr_fail (t, "expected %s (a JSON integer or a decimal string)",
                              sb_ftype_name (want));
        if (neg && mag > (uint64_t) INT64_MAX + 1)
            return s_tr_fail (t, "expected %s: %.*s is out of the 64-bit range",
                              sb_ftype_name (want), (int) (n > 40 ? 40 : n), s);
        if (neg && mag > 0)
            sb_enc_int (t->enc, mag == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) mag);
        else
            sb_enc_uint (t->enc, mag);
        return 0;
    }
    sb_enc_strn (t->enc, s, n);
    return 0;
}

/*  Translates one value. `field` says what the schema expects here (NULL:
    free-form); only bin and integer fields change how a value is read. */
static int
s_tr_value (s_tr_t *t, const json_t *j, const sb_field_t *field, int depth)
{
    sb_ftype_t want = field ? field->type : SB_T_ANY;
    switch (json_typeof (j)) {
        case JSON_OBJECT:
            return s_tr_object (t, j, want == SB_T_MAP ? field->sub : NULL, depth + 1);
        case JSON_ARRAY:
            return s_tr_array (t, j, want == SB_T_ARRAY ? field->sub : NULL, depth + 1);
        case JSON_STRING:
            return s_tr_string (t, j, want);
        case JSON_INTEGER: {
            json_int_t v = json_integer_value (j);
            if (v < 0)
                sb_enc_int (t->enc, (int64_t) v);
            else
                sb_enc_uint (t->enc, (uint64_t) v);
            return 0;
        }
        case JSON_REAL:
            sb_enc_float (t->enc, json_real_value (j));
            return 0;
        case JSON_TRUE:
            sb_enc_bool (t->enc, true);
            return 0;
        case JSON_FALSE:
            sb_enc_bool (t->enc, false);
            return 0;
        case JSON_NULL:
            sb_enc_nil (t->enc);
            return 0;
    }
    return s_tr_fail (t, "unknown JSON value");
}

int
sb_json_to_msgpack (const json_t *j, const sb_field_t *fields, sb_enc_t *enc,
                    sb_verr_t *err)
{
    s_tr_t t = { .enc = enc, .err = err };
    if (err) {
        err->code = SB_OK;
        err->message [0] = 0;
    }
    if (!j || !json_is_object (j))
        return s_tr_fail (&t, "expected a JSON object");
    if (!enc)
        return s_tr_fail (&t, "no encoder");
    return s_tr_object (&t, j, fields, 1);
}

/* ------------------------------------------------------------------ */
/*  Parsing untrusted text */

json_t *
sb_json_parse (const char *buf, size_t len, size_t max_bytes, int max_depth,
               sb_verr_t *err)
{
    sb_verr_t dummy;
    if (!err)
        err = &dummy;
    err->code = SB_OK;
    err->message [0] = 0;
    if (max_bytes == 0)
        max_bytes = SB_JSON_MAX_BYTES;
    if (max_depth <= 0)
        max_depth = SB_JSON_MAX_DEPTH;

    if (len > max_bytes) {
        err->code = SB_E_too_large;
        snprintf (err->message, sizeof err->message,
                  "JSON of %zu bytes is over the limit of %zu", len, max_bytes);
        return NULL;
    }
    if (!buf || len == 0) {
        err->code = SB_E_invalid;
        snprintf (err->message, sizeof err->message, "empty JSON");
        return NULL;
    }
    /* jansson recurses and allocates per level: count brackets first,
       skipping string contents (and what a backslash escapes), so a deep
       document costs one pass and nothing else. Unbalanced brackets are
       jansson's to report. */
    int depth = 0;
    bool in_str = false;
    for (size_t k = 0; k < len; k++) {
        char c = buf [k];
        if (in_str) {
            if (c == '\\')
                k++;
            else
            if (c == '"')
                in_str = false;
        }
        else
        if (c == '"')
            in_str = true;
        else
        if (c == '[' || c == '{') {
            if (++depth > max_depth) {
                err->code = SB_E_invalid;
                snprintf (err->message, sizeof err->message,
                          "JSON nesting deeper than %d at byte %zu", max_depth, k);
                return NULL;
            }
        }
        else
        if ((c == ']' || c == '}') && depth > 0)
            depth--;
    }
    json_error_t jerr;
    json_t *j = json_loadb (buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!j) {
        err->code = SB_E_invalid;
        snprintf (err->message, sizeof err->message,
                  "invalid JSON at line %d, column %d (byte %d): %s",
                  jerr.line, jerr.column, jerr.position, jerr.text);
    }
    return j;
}

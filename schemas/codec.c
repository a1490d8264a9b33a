/*  schemas/codec.c — the validating msgpack decoder and the encoder.

    The validator never allocates and never trusts a declared size: every
    count is checked against the bytes that remain before it is used, so a
    5-byte buffer that claims four billion elements fails at once. */
#include "schemas/codec.h"

#include <math.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sb_doc {
    sb_val_t *root;
    /* nodes, then string bytes, follow in the same allocation */
};

/* ------------------------------------------------------------------ */
/*  Raw reader */

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
    sb_vstat_t stat;
    sb_verr_t *err;
    /* Checked against a schema: free-form values are held to what any
       strict client can decode too (see s_free_ok). */
    bool strict;
    /* The path to the value being checked, kept as pointers into the
       buffer and formatted only when something fails. */
    struct { const uint8_t *name; uint32_t len; long index; } seg [SB_MAX_DEPTH + 2];
    int nseg;
} s_rd_t;

/*  Writes the path as a.b[3].c, with any byte outside printable ASCII
    written as \xNN, so a peer's bytes never reach a log or a reply raw. */
static void
s_path_format (const s_rd_t *rd, char *out, size_t n)
{
    size_t w = 0;
    out [0] = 0;
    for (int k = 0; k < rd->nseg && w + 8 < n; k++) {
        if (rd->seg [k].name == NULL) {
            w += (size_t) snprintf (out + w, n - w, "[%ld]", rd->seg [k].index);
            continue;
        }
        if (w)
            out [w++] = '.';
        uint32_t len = rd->seg [k].len > 40 ? 40 : rd->seg [k].len;
        for (uint32_t j = 0; j < len && w + 5 < n; j++) {
            uint8_t c = rd->seg [k].name [j];
            if (c >= 0x20 && c < 0x7f)
                out [w++] = (char) c;
            else
                w += (size_t) snprintf (out + w, n - w, "\\x%02x", c);
        }
        out [w] = 0;
    }
    if (w >= n)
        out [n - 1] = 0;
}

typedef struct {
    sb_vtype_t type;
    uint32_t len;
    uint64_t u;
    int64_t i;
    double f;
    bool b;
    const uint8_t *data;        /* STR/BIN payload */
} s_head_t;

bool
sb_utf8_valid (const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *) s, *end = p + n;
    while (p < end) {
        /* ASCII runs, eight bytes at a time: every header field is ASCII */
        while (end - p >= 8) {
            uint64_t w;
            memcpy (&w, p, 8);
            if (w & 0x8080808080808080ull)
                break;
            p += 8;
        }
        if (p == end)
            break;
        uint8_t c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!len || (size_t) (end - p) < len)
            return false;
        uint32_t cp = c & (0x7f >> len);
        for (size_t k = 1; k < len; k++) {
            if ((p [k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p [k] & 0x3f);
        }
        /* overlong forms, surrogates and code points past U+10FFFF */
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)
        ||  cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        p += len;
    }
    return true;
}

/*  Error messages quote peer bytes (paths, names): they are made valid
    UTF-8 and printable here, so a reply or a log line never carries
    what the peer could not send itself. */
static void
s_clean_text (char *s)
{
    size_t n = strlen (s);
    for (size_t k = 0; k < n; ) {
        uint8_t c = (uint8_t) s [k];
        if (c < 0x20 || c == 0x7f) {
            s [k++] = '?';
            continue;
        }
        if (c < 0x80) {
            k++;
            continue;
        }
        size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len && k + len <= n && sb_utf8_valid (s + k, len))
            k += len;
        else
            s [k++] = '?';
    }
}

static int
s_fail (s_rd_t *rd, sb_err_t code, const char *fmt, ...)
{
    if (rd->err && rd->err->code == SB_OK) {
        char msg [160];
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (msg, sizeof msg, fmt, ap);
        va_end (ap);
        rd->err->code = code;
        char path [128];
        s_path_format (rd, path, sizeof path);
        if (path [0])
            snprintf (rd->err->message, sizeof rd->err->message, "%s: %s", path, msg);
        else
            snprintf (rd->err->message, sizeof rd->err->message, "%s", msg);
        s_clean_text (rd->err->message);
    }
    return -1;
}

static inline size_t
s_left (const s_rd_t *rd)
{
    return (size_t) (rd->end - rd->p);
}

static inline uint64_t
s_be (const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v = (v << 8) | p [k];
    return v;
}

/*  Reads one value's header. For STR/BIN the payload is consumed too. */
static int
s_head (s_rd_t *rd, s_head_t *h)
{
    if (s_left (rd) < 1)
        return s_fail (rd, SB_E_invalid, "truncated message");
    uint8_t t = *rd->p++;
    int n = 0;                  /* size bytes to read */
    memset (h, 0, sizeof *h);

    if (t <= 0x7f) { h->type = SB_V_UINT; h->u = t; return 0; }
    if (t >= 0xe0) { h->type = SB_V_INT; h->i = (int8_t) t; return 0; }
    if ((t & 0xf0) == 0x80) { h->type = SB_V_MAP; h->len = t & 0x0f; goto check_count; }
    if ((t & 0xf0) == 0x90) { h->type = SB_V_ARRAY; h->len = t & 0x0f; goto check_count; }
    if ((t & 0xe0) == 0xa0) { h->type = SB_V_STR; h->len = t & 0x1f; goto payload; }

    switch (t) {
        case 0xc0: h->type = SB_V_NIL; return 0;
        case 0xc2: h->type = SB_V_BOOL; h->b = false; return 0;
        case 0xc3: h->type = SB_V_BOOL; h->b = true; return 0;
        case 0xc4: case 0xc5: case 0xc6:
            h->type = SB_V_BIN; n = 1 << (t - 0xc4); break;
        case 0xd9: case 0xda: case 0xdb:
            h->type = SB_V_STR; n = 1 << (t - 0xd9); break;
        case 0xdc: case 0xdd:
            h->type = SB_V_ARRAY; n = t == 0xdc ? 2 : 4; break;
        case 0xde: case 0xdf:
            h->type = SB_V_MAP; n = t == 0xde ? 2 : 4; break;
        case 0xca: case 0xcb: {
            int sz = t == 0xca ? 4 : 8;
            if (s_left (rd) < (size_t) sz)
                return s_fail (rd, SB_E_invalid, "truncated float");
            uint64_t bits = s_be (rd->p, sz);
            rd->p += sz;
            h->type = SB_V_FLOAT;
            if (sz == 4) { uint32_t b32 = (uint32_t) bits; float fv; memcpy (&fv, &b32, 4); h->f = fv; }
            else memcpy (&h->f, &bits, 8);
            return 0;
        }
        case 0xcc: case 0xcd: case 0xce: case 0xcf: {
            int sz = 1 << (t - 0xcc);
            if (s_left (rd) < (size_t) sz)
                return s_fail (rd, SB_E_invalid, "truncated integer");
            h->type = SB_V_UINT;
            h->u = s_be (rd->p, sz);
            rd->p += sz;
            return 0;
        }
        case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
            int sz = 1 << (t - 0xd0);
            if (s_left (rd) < (size_t) sz)
                return s_fail (rd, SB_E_invalid, "truncated integer");
            uint64_t raw = s_be (rd->p, sz);
            rd->p += sz;
            int64_t v;
            if (sz == 1) v = (int8_t) raw;
            else if (sz == 2) v = (int16_t) raw;
            else if (sz == 4) v = (int32_t) raw;
            else v = (int64_t) raw;
            if (v >= 0) { h->type = SB_V_UINT; h->u = (uint64_t) v; }
            else { h->type = SB_V_INT; h->i = v; }
            return 0;
        }
        default:
            /* 0xc1 is never used; ext types carry nothing we accept */
            return s_fail (rd, SB_E_invalid, "unsupported msgpack type 0x%02x", t);
    }
    if (s_left (rd) < (size_t) n)
        return s_fail (rd, SB_E_invalid, "truncated length");
    h->len = (uint32_t) s_be (rd->p, n);
    rd->p += n;
    if (h->type == SB_V_ARRAY || h->type == SB_V_MAP)
        goto check_count;

payload:
    if (s_left (rd) < h->len)
        return s_fail (rd, SB_E_invalid, "declared length %u exceeds the %zu bytes left",
                       h->len, s_left (rd));
    h->data = rd->p;
    rd->p += h->len;
    return 0;

check_count:
    /* Every element takes at least one byte: a count the remaining bytes
       cannot hold is a lie, refused before anything trusts it. */
    {
        uint64_t need = h->type == SB_V_MAP ? 2ull * h->len : h->len;
        if (need > s_left (rd))
            return s_fail (rd, SB_E_invalid, "declared count %u exceeds the %zu bytes left",
                           h->len, s_left (rd));
    }
    return 0;
}

static int s_value (s_rd_t *rd, const sb_field_t *field, int depth);

static void
s_path_push (s_rd_t *rd, size_t *mark, const char *name, size_t nlen, long index)
{
    *mark = (size_t) rd->nseg;
    if (rd->nseg < (int) (sizeof rd->seg / sizeof rd->seg [0])) {
        rd->seg [rd->nseg].name = (const uint8_t *) name;
        rd->seg [rd->nseg].len = (uint32_t) nlen;
        rd->seg [rd->nseg].index = index;
        rd->nseg++;
    }
}

static void
s_path_pop (s_rd_t *rd, size_t mark)
{
    rd->nseg = (int) mark;
}

static const sb_field_t *
s_field_find (const sb_field_t *fields, const uint8_t *name, size_t len, int *index)
{
    for (int k = 0; fields [k].name; k++)
        if (strlen (fields [k].name) == len && memcmp (fields [k].name, name, len) == 0) {
            *index = k;
            return &fields [k];
        }
    return NULL;
}

/*  A string's bytes as actors and outside clients read them: C strings
    and strict decoders (JSON, Python's msgpack) alike stop at a NUL or
    fail on bad UTF-8, so a string that holds either is refused. */
static int
s_text_check (s_rd_t *rd, const s_head_t *h)
{
    if (h->type != SB_V_STR)
        return 0;
    if (memchr (h->data, 0, h->len))
        return s_fail (rd, SB_E_invalid, "string contains a NUL byte");
    if (!sb_utf8_valid ((const char *) h->data, h->len))
        return s_fail (rd, SB_E_invalid, "string is not valid UTF-8");
    return 0;
}

/*  A free-form value (SB_T_ANY, or inside a map without a sub-schema)
    checked against a schema is stored and replayed to every client
    (docs/protocol.md): it carries nothing a strict client cannot decode.
    Strings are text, bytes travel only in fields declared bin, and
    floats are finite, since JSON has no NaN or Infinity. */
static int
s_free_ok (s_rd_t *rd, const s_head_t *h)
{
    if (h->type == SB_V_BIN)
        return s_fail (rd, SB_E_invalid, "binary value where the schema declares no bin field");
    return s_text_check (rd, h);
}

/*  Validates the pairs of a map whose header was read, against `fields`
    (NULL: free-form). */
static int
s_map_body (s_rd_t *rd, uint32_t pairs, const sb_field_t *fields, int depth)
{
    uint64_t seen = 0;          /* schemas keep maps under 64 fields */
    for (uint32_t k = 0; k < pairs; k++) {
        s_head_t key;
        if (s_head (rd, &key))
            return -1;
        rd->stat.nodes++;
        if (key.type == SB_V_STR || key.type == SB_V_BIN)
            rd->stat.bytes += key.len + 1;
        const sb_field_t *f = NULL;
        int index = -1;
        if (fields) {
            if (key.type != SB_V_STR)
                return s_fail (rd, SB_E_invalid, "map key is not a string");
            f = s_field_find (fields, key.data, key.len, &index);
            if (f && index < 64) {
                if (seen & (1ull << index))
                    return s_fail (rd, SB_E_invalid, "duplicate field '%s'", f->name);
                seen |= 1ull << index;
            }
        }
        else
        if (key.type == SB_V_ARRAY || key.type == SB_V_MAP)
            return s_fail (rd, SB_E_invalid, "map key is a container");
        else
        if (rd->strict && key.type != SB_V_STR)
            return s_fail (rd, SB_E_invalid, "map key is not a string");
        if (rd->strict && s_text_check (rd, &key))
            return -1;
        size_t mark;
        s_path_push (rd, &mark, key.type == SB_V_STR ? (const char *) key.data : "?",
                     key.type == SB_V_STR ? key.len : 1, -1);
        if (s_value (rd, f, depth))
            return -1;
        s_path_pop (rd, mark);
    }
    if (fields)
        for (int k = 0; fields [k].name; k++)
            if (fields [k].required && !(k < 64 && (seen & (1ull << k))))
                return s_fail (rd, SB_E_invalid, "missing required field '%s'", fields [k].name);
    return 0;
}

static bool
s_type_ok (sb_ftype_t want, const s_head_t *h)
{
    switch (want) {
        case SB_T_ANY:   return true;
        case SB_T_STR:   return h->type == SB_V_STR;
        case SB_T_ENUM:  return h->type == SB_V_STR;
        case SB_T_BIN:   return h->type == SB_V_BIN || h->type == SB_V_STR;
        case SB_T_INT:   return h->type == SB_V_INT || (h->type == SB_V_UINT && h->u <= INT64_MAX);
        case SB_T_UINT:  return h->type == SB_V_UINT;
        case SB_T_BOOL:  return h->type == SB_V_BOOL;
        case SB_T_MAP:   return h->type == SB_V_MAP;
        case SB_T_ARRAY: return h->type == SB_V_ARRAY;
        case SB_T_FLOAT: return h->type == SB_V_FLOAT || h->type == SB_V_INT || h->type == SB_V_UINT;
    }
    return false;
}

/*  An ENUM field's string is one of its names (or "" where the field
    takes it): refused like an integer out of range, naming the field and
    what it accepts, so no handler sees a name outside the vocabulary. */
static int
s_enum_check (s_rd_t *rd, const sb_field_t *field, const s_head_t *h)
{
    if ((h->len == 0 && field->empty_ok)
    ||  sb_enum_index (field->values, (const char *) h->data, h->len) >= 0)
        return 0;
    char names [112];
    sb_enum_join (field->values, names, sizeof names);
    return s_fail (rd, SB_E_invalid, "'%.*s' is not one of %s%s", (int) (h->len > 24 ? 24 : h->len),
                   (const char *) h->data, field->empty_ok ? "\"\" | " : "", names);
}

/*  Validates one value, against `field` when given. */
static int
s_value (s_rd_t *rd, const sb_field_t *field, int depth)
{
    s_head_t h;
    if (s_head (rd, &h))
        return -1;
    rd->stat.nodes++;
    if (field && h.type == SB_V_NIL && !field->required)
        return 0;               /* nil means absent for optional fields */
    if (field && !s_type_ok (field->type, &h))
        return s_fail (rd, SB_E_invalid, "expected %s", sb_ftype_name (field->type));
    if (rd->strict && h.type == SB_V_FLOAT && !isfinite (h.f))
        return s_fail (rd, SB_E_invalid, "float is not finite (NaN or infinity)");
    if (rd->strict && (!field || field->type == SB_T_ANY) && s_free_ok (rd, &h))
        return -1;

    switch (h.type) {
        case SB_V_STR:
        case SB_V_BIN: {
            uint32_t max = field && field->max ? field->max
                         : field ? SB_DEFAULT_STR_MAX : UINT32_MAX;
            if (field && field->type == SB_T_ANY)
                max = UINT32_MAX;
            if (h.len > max)
                return s_fail (rd, SB_E_too_large, "length %u is over the limit of %u", h.len, max);
            /* actors read typed strings as C strings: an embedded NUL
               would make them act on a different value than was checked */
            if (field && (field->type == SB_T_STR || field->type == SB_T_ENUM) && s_text_check (rd, &h))
                return -1;
            if (field && field->type == SB_T_ENUM && s_enum_check (rd, field, &h))
                return -1;
            rd->stat.bytes += (size_t) h.len + 1;
            return 0;
        }
        case SB_V_ARRAY:
        case SB_V_MAP: {
            if (depth + 1 > SB_MAX_DEPTH)
                return s_fail (rd, SB_E_invalid, "nesting deeper than %d", SB_MAX_DEPTH);
            uint32_t max = field && field->max ? field->max
                         : field && field->type != SB_T_ANY ? SB_DEFAULT_COUNT_MAX : UINT32_MAX;
            if (h.len > max)
                return s_fail (rd, SB_E_too_large, "count %u is over the limit of %u", h.len, max);
            if (h.type == SB_V_MAP) {
                const sb_field_t *sub = field && field->type == SB_T_MAP ? field->sub : NULL;
                if (sub == sb_stored_body && rd->strict) {
                    rd->strict = false;
                    int rc = s_map_body (rd, h.len, NULL, depth + 1);
                    rd->strict = true;
                    return rc;
                }
                return s_map_body (rd, h.len, sub, depth + 1);
            }
            const sb_field_t *item = field && field->type == SB_T_ARRAY ? field->sub : NULL;
            for (uint32_t k = 0; k < h.len; k++) {
                size_t mark;
                s_path_push (rd, &mark, NULL, 0, (long) k);
                if (s_value (rd, item, depth + 1))
                    return -1;
                s_path_pop (rd, mark);
            }
            return 0;
        }
        case SB_V_UINT:
        case SB_V_INT:
            if (field && sb_field_ranged (field)) {
                bool below = h.type == SB_V_INT ? h.i < field->min_value
                           : field->min_value > 0 && h.u < (uint64_t) field->min_value;
                bool above = h.type == SB_V_INT ? h.i > field->max_value
                           : field->max_value < 0 || h.u > (uint64_t) field->max_value;
                if (below || above) {
                    char v [24];
                    if (h.type == SB_V_INT)
                        snprintf (v, sizeof v, "%lld", (long long) h.i);
                    else
                        snprintf (v, sizeof v, "%llu", (unsigned long long) h.u);
                    return s_fail (rd, SB_E_invalid, "%s is out of range (%lld..%lld)", v,
                                   (long long) field->min_value, (long long) field->max_value);
                }
            }
            return 0;
        default:
            return 0;
    }
}

int
sb_validate (const uint8_t *buf, size_t len, const sb_field_t *fields,
             uint32_t max_bytes, sb_vstat_t *stat, sb_verr_t *err)
{
    s_rd_t rd = { .p = buf, .end = buf + len, .err = err, .strict = fields != NULL };
    if (err) {
        err->code = SB_OK;
        err->message [0] = 0;
    }
    if (!buf || len == 0)
        return s_fail (&rd, SB_E_invalid, "empty message");
    if (len > (max_bytes ? max_bytes : SB_MAX_MSG_BYTES))
        return s_fail (&rd, SB_E_too_large, "message of %zu bytes is over the limit of %u",
                       len, max_bytes ? max_bytes : SB_MAX_MSG_BYTES);
    s_head_t h;
    if (s_head (&rd, &h))
        return -1;
    if (h.type != SB_V_MAP)
        return s_fail (&rd, SB_E_invalid, "message is not a map");
    rd.stat.nodes = 1;
    if (s_map_body (&rd, h.len, fields, 1))
        return -1;
    if (rd.p != rd.end)
        return s_fail (&rd, SB_E_invalid, "%zu bytes of trailing garbage", s_left (&rd));
    if (stat)
        *stat = rd.stat;
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Decoder: runs only over validated bytes. */

typedef struct {
    s_rd_t rd;
    sb_val_t *next_node;
    sb_val_t *nodes_end;
    char *next_byte;
} s_dec_t;

static int
s_dec_value (s_dec_t *d, sb_val_t *out)
{
    s_head_t h;
    if (s_head (&d->rd, &h))
        return -1;
    out->type = h.type;
    out->len = h.len;
    switch (h.type) {
        case SB_V_NIL: break;
        case SB_V_BOOL: out->v.b = h.b; break;
        case SB_V_INT: out->v.i = h.i; break;
        case SB_V_UINT: out->v.u = h.u; break;
        case SB_V_FLOAT: out->v.f = h.f; break;
        case SB_V_STR:
        case SB_V_BIN:
            memcpy (d->next_byte, h.data, h.len);
            d->next_byte [h.len] = 0;
            out->v.s = d->next_byte;
            d->next_byte += h.len + 1;
            break;
        case SB_V_ARRAY:
        case SB_V_MAP: {
            size_t n = h.type == SB_V_MAP ? 2 * (size_t) h.len : h.len;
            if ((size_t) (d->nodes_end - d->next_node) < n)
                return -1;
            sb_val_t *items = d->next_node;
            d->next_node += n;
            out->v.a = items;
            for (size_t k = 0; k < n; k++)
                if (s_dec_value (d, &items [k]))
                    return -1;
            break;
        }
    }
    return 0;
}

sb_doc_t *
sb_doc_decode (const uint8_t *buf, size_t len, const sb_vstat_t *stat)
{
    size_t nodes_sz = (size_t) stat->nodes * sizeof (sb_val_t);
    sb_doc_t *doc = malloc (sizeof (sb_doc_t) + nodes_sz + stat->bytes + 1);
    if (!doc)
        return NULL;
    s_dec_t d = {
        .rd = { .p = buf, .end = buf + len },
        .next_node = (sb_val_t *) (doc + 1),
    };
    d.nodes_end = d.next_node + stat->nodes;
    d.next_byte = (char *) d.nodes_end;
    doc->root = d.next_node++;
    if (s_dec_value (&d, doc->root)) {
        free (doc);
        return NULL;
    }
    return doc;
}

const sb_val_t *
sb_doc_decode_into (const uint8_t *buf, size_t len, const sb_vstat_t *stat,
                    void *mem, size_t memlen)
{
    size_t nodes_sz = (size_t) stat->nodes * sizeof (sb_val_t);
    if (nodes_sz + stat->bytes + 1 > memlen || ((uintptr_t) mem % _Alignof (sb_val_t)))
        return NULL;
    s_dec_t d = {
        .rd = { .p = buf, .end = buf + len },
        .next_node = (sb_val_t *) mem,
    };
    d.nodes_end = d.next_node + stat->nodes;
    d.next_byte = (char *) d.nodes_end;
    sb_val_t *root = d.next_node++;
    if (s_dec_value (&d, root))
        return NULL;
    return root;
}

sb_doc_t *
sb_decode (const uint8_t *buf, size_t len, const sb_field_t *fields,
           uint32_t max_bytes, sb_verr_t *err)
{
    sb_vstat_t stat;
    if (sb_validate (buf, len, fields, max_bytes, &stat, err))
        return NULL;
    sb_doc_t *doc = sb_doc_decode (buf, len, &stat);
    if (!doc && err) {
        err->code = SB_E_internal;
        snprintf (err->message, sizeof err->message, "out of memory");
    }
    return doc;
}

sb_doc_t *
sb_decode_type (const sb_type_t *type, const uint8_t *buf, size_t len, sb_verr_t *err)
{
    return sb_decode (buf, len, type ? type->fields : NULL, type ? type->max_bytes : 0, err);
}

const sb_val_t *
sb_doc_root (const sb_doc_t *doc)
{
    return doc ? doc->root : NULL;
}

void
sb_doc_destroy (sb_doc_t **doc_p)
{
    if (doc_p && *doc_p) {
        free (*doc_p);
        *doc_p = NULL;
    }
}

size_t
sb_msgpack_span (const uint8_t *p, size_t len)
{
    /* Reuse the validator's walk on a single value of any shape. */
    s_rd_t rd = { .p = p, .end = p + len };
    if (s_value (&rd, NULL, 0))
        return 0;
    return (size_t) (rd.p - p);
}

/* ------------------------------------------------------------------ */
/*  Accessors */

const sb_val_t *
sb_get (const sb_val_t *map, const char *key)
{
    if (!map || map->type != SB_V_MAP)
        return NULL;
    size_t klen = strlen (key);
    for (uint32_t k = 0; k < map->len; k++) {
        const sb_val_t *kv = &map->v.a [2 * k];
        if (kv->type == SB_V_STR && kv->len == klen && memcmp (kv->v.s, key, klen) == 0) {
            const sb_val_t *v = &map->v.a [2 * k + 1];
            return v->type == SB_V_NIL ? NULL : v;
        }
    }
    return NULL;
}

const char *
sb_get_str (const sb_val_t *map, const char *key)
{
    const sb_val_t *v = sb_get (map, key);
    return v && v->type == SB_V_STR ? v->v.s : NULL;
}

const char *
sb_get_bin (const sb_val_t *map, const char *key, size_t *len)
{
    const sb_val_t *v = sb_get (map, key);
    if (!v || (v->type != SB_V_BIN && v->type != SB_V_STR))
        return NULL;
    if (len)
        *len = v->len;
    return v->v.s;
}

uint64_t
sb_get_uint (const sb_val_t *map, const char *key, uint64_t dflt)
{
    const sb_val_t *v = sb_get (map, key);
    return v && v->type == SB_V_UINT ? v->v.u : dflt;
}

int64_t
sb_get_int (const sb_val_t *map, const char *key, int64_t dflt)
{
    const sb_val_t *v = sb_get (map, key);
    if (!v)
        return dflt;
    if (v->type == SB_V_INT)
        return v->v.i;
    if (v->type == SB_V_UINT && v->v.u <= INT64_MAX)
        return (int64_t) v->v.u;
    return dflt;
}

double
sb_get_float (const sb_val_t *map, const char *key, double dflt)
{
    const sb_val_t *v = sb_get (map, key);
    if (!v)
        return dflt;
    if (v->type == SB_V_FLOAT) return v->v.f;
    if (v->type == SB_V_INT) return (double) v->v.i;
    if (v->type == SB_V_UINT) return (double) v->v.u;
    return dflt;
}

bool
sb_get_bool (const sb_val_t *map, const char *key, bool dflt)
{
    const sb_val_t *v = sb_get (map, key);
    return v && v->type == SB_V_BOOL ? v->v.b : dflt;
}

const sb_val_t *
sb_get_map (const sb_val_t *map, const char *key)
{
    const sb_val_t *v = sb_get (map, key);
    return v && v->type == SB_V_MAP ? v : NULL;
}

const sb_val_t *
sb_get_array (const sb_val_t *map, const char *key)
{
    const sb_val_t *v = sb_get (map, key);
    return v && v->type == SB_V_ARRAY ? v : NULL;
}

/* ------------------------------------------------------------------ */
/*  Encoder */

#define SB_ENC_STACK 32

struct sb_enc {
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    int depth;
    bool overflow;              /* nested deeper than SB_ENC_STACK: output is invalid */
    struct { size_t offset; uint32_t count; bool is_map; } stack [SB_ENC_STACK];
};

sb_enc_t *
sb_enc_new (void)
{
    sb_enc_t *enc = calloc (1, sizeof *enc);
    if (!enc)
        return NULL;
    msgpack_sbuffer_init (&enc->sbuf);
    msgpack_packer_init (&enc->pk, &enc->sbuf, msgpack_sbuffer_write);
    return enc;
}

void
sb_enc_destroy (sb_enc_t **enc_p)
{
    if (enc_p && *enc_p) {
        msgpack_sbuffer_destroy (&(*enc_p)->sbuf);
        free (*enc_p);
        *enc_p = NULL;
    }
}

void
sb_enc_reset (sb_enc_t *enc)
{
    msgpack_sbuffer_clear (&enc->sbuf);
    enc->depth = 0;
    enc->overflow = false;
}

const uint8_t *
sb_enc_data (const sb_enc_t *enc, size_t *len)
{
    if (enc->overflow) {
        *len = 0;
        return NULL;
    }
    *len = enc->sbuf.size;
    return (const uint8_t *) enc->sbuf.data;
}

uint8_t *
sb_enc_release (sb_enc_t *enc, size_t *len)
{
    *len = enc->sbuf.size;
    uint8_t *data = (uint8_t *) msgpack_sbuffer_release (&enc->sbuf);
    enc->depth = 0;
    return data;
}

/*  Counts one element into the innermost open array. Map pairs are
    counted by sb_enc_key. */
static inline void
s_count_item (sb_enc_t *enc)
{
    if (enc->depth > 0 && enc->depth <= SB_ENC_STACK && !enc->stack [enc->depth - 1].is_map)
        enc->stack [enc->depth - 1].count++;
}

static void
s_open (sb_enc_t *enc, bool is_map)
{
    s_count_item (enc);
    /* map32 / array32 header now, count patched at close */
    uint8_t hdr [5] = { is_map ? 0xdf : 0xdd, 0, 0, 0, 0 };
    if (enc->depth < SB_ENC_STACK) {
        enc->stack [enc->depth].offset = enc->sbuf.size;
        enc->stack [enc->depth].count = 0;
        enc->stack [enc->depth].is_map = is_map;
    }
    else
        enc->overflow = true;
    enc->depth++;
    msgpack_sbuffer_write (&enc->sbuf, (const char *) hdr, 5);
}

static void
s_close (sb_enc_t *enc)
{
    if (enc->depth <= 0)
        return;
    enc->depth--;
    if (enc->depth >= SB_ENC_STACK)
        return;
    uint32_t c = enc->stack [enc->depth].count;
    uint8_t *p = (uint8_t *) enc->sbuf.data + enc->stack [enc->depth].offset + 1;
    p [0] = (uint8_t) (c >> 24);
    p [1] = (uint8_t) (c >> 16);
    p [2] = (uint8_t) (c >> 8);
    p [3] = (uint8_t) c;
}

void sb_enc_map_open (sb_enc_t *enc) { s_open (enc, true); }
void sb_enc_map_close (sb_enc_t *enc) { s_close (enc); }
void sb_enc_array_open (sb_enc_t *enc) { s_open (enc, false); }
void sb_enc_array_close (sb_enc_t *enc) { s_close (enc); }

void
sb_enc_key (sb_enc_t *enc, const char *key)
{
    if (enc->depth > 0 && enc->depth <= SB_ENC_STACK)
        enc->stack [enc->depth - 1].count++;
    size_t n = strlen (key);
    msgpack_pack_str (&enc->pk, n);
    msgpack_pack_str_body (&enc->pk, key, n);
}

void
sb_enc_strn (sb_enc_t *enc, const char *s, size_t n)
{
    s_count_item (enc);
    msgpack_pack_str (&enc->pk, n);
    msgpack_pack_str_body (&enc->pk, s, n);
}

void
sb_enc_str (sb_enc_t *enc, const char *s)
{
    sb_enc_strn (enc, s ? s : "", s ? strlen (s) : 0);
}

void
sb_enc_bin (sb_enc_t *enc, const void *p, size_t n)
{
    s_count_item (enc);
    msgpack_pack_bin (&enc->pk, n);
    msgpack_pack_bin_body (&enc->pk, p, n);
}

void sb_enc_uint (sb_enc_t *enc, uint64_t v) { s_count_item (enc); msgpack_pack_uint64 (&enc->pk, v); }
void sb_enc_int (sb_enc_t *enc, int64_t v) { s_count_item (enc); msgpack_pack_int64 (&enc->pk, v); }
void sb_enc_float (sb_enc_t *enc, double v) { s_count_item (enc); msgpack_pack_double (&enc->pk, v); }
void sb_enc_nil (sb_enc_t *enc) { s_count_item (enc); msgpack_pack_nil (&enc->pk); }

void
sb_enc_bool (sb_enc_t *enc, bool v)
{
    s_count_item (enc);
    if (v)
        msgpack_pack_true (&enc->pk);
    else
        msgpack_pack_false (&enc->pk);
}

void
sb_enc_raw (sb_enc_t *enc, const uint8_t *p, size_t n)
{
    s_count_item (enc);
    msgpack_sbuffer_write (&enc->sbuf, (const char *) p, n);
}

void
sb_enc_val (sb_enc_t *enc, const sb_val_t *val)
{
    switch (val->type) {
        case SB_V_NIL: sb_enc_nil (enc); break;
        case SB_V_BOOL: sb_enc_bool (enc, val->v.b); break;
        case SB_V_INT: sb_enc_int (enc, val->v.i); break;
        case SB_V_UINT: sb_enc_uint (enc, val->v.u); break;
        case SB_V_FLOAT: sb_enc_float (enc, val->v.f); break;
        case SB_V_STR: sb_enc_strn (enc, val->v.s, val->len); break;
        case SB_V_BIN: sb_enc_bin (enc, val->v.s, val->len); break;
        case SB_V_ARRAY:
            sb_enc_array_open (enc);
            for (uint32_t k = 0; k < val->len; k++)
                sb_enc_val (enc, &val->v.a [k]);
            sb_enc_array_close (enc);
            break;
        case SB_V_MAP:
            sb_enc_map_open (enc);
            for (uint32_t k = 0; k < val->len; k++) {
                const sb_val_t *key = &val->v.a [2 * k];
                /* keys are counted as pairs, then encoded as plain values */
                if (enc->depth > 0 && enc->depth <= SB_ENC_STACK)
                    enc->stack [enc->depth - 1].count++;
                if (key->type == SB_V_STR) {
                    msgpack_pack_str (&enc->pk, key->len);
                    msgpack_pack_str_body (&enc->pk, key->v.s, key->len);
                }
                else
                if (key->type != SB_V_ARRAY && key->type != SB_V_MAP) {
                    /* a scalar key: encode it without counting it as an item */
                    int saved = enc->depth;
                    enc->depth = 0;
                    sb_enc_val (enc, key);
                    enc->depth = saved;
                }
                else
                    sb_enc_nil (enc);   /* container keys never pass validation */
                sb_enc_val (enc, &val->v.a [2 * k + 1]);
            }
            sb_enc_map_close (enc);
            break;
    }
}

void sb_enc_kstr (sb_enc_t *enc, const char *key, const char *s) { sb_enc_key (enc, key); sb_enc_str (enc, s); }
void sb_enc_kuint (sb_enc_t *enc, const char *key, uint64_t v) { sb_enc_key (enc, key); sb_enc_uint (enc, v); }
void sb_enc_kint (sb_enc_t *enc, const char *key, int64_t v) { sb_enc_key (enc, key); sb_enc_int (enc, v); }
void sb_enc_kbool (sb_enc_t *enc, const char *key, bool v) { sb_enc_key (enc, key); sb_enc_bool (enc, v); }

void
sb_enc_error_open (sb_enc_t *enc, sb_err_t code, const char *message, bool retryable)
{
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "code", sb_err_name (code));
    sb_enc_kstr (enc, "message", message);
    sb_enc_kbool (enc, "retryable", retryable);
}
void sb_enc_kval (sb_enc_t *enc, const char *key, const sb_val_t *val) { sb_enc_key (enc, key); sb_enc_val (enc, val); }

void
sb_enc_kstr_opt (sb_enc_t *enc, const char *key, const char *s)
{
    if (s)
        sb_enc_kstr (enc, key, s);
}

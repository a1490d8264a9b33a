/*  schemas/codec.h — msgpack codec.

    Untrusted bytes go through two passes:
      1. sb_validate walks the raw bytes against a schema and allocates
         nothing: it checks nesting, declared counts against the bytes that
         remain, string limits, field types, required fields and trailing
         bytes, and measures what a decode will need;
      2. sb_doc_decode then makes one allocation of exactly that size and
         builds a tree of sb_val_t (strings NUL-terminated) inside it.
    Actors read the tree through the typed accessors (sb_get_*), never a
    raw msgpack_object. Encoding uses msgpack-c's packer. */
#ifndef SB_CODEC_H
#define SB_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "schemas/schema.h"
#include "schemas/errors.h"

typedef enum {
    SB_V_NIL, SB_V_BOOL, SB_V_INT, SB_V_UINT, SB_V_FLOAT,
    SB_V_STR, SB_V_BIN, SB_V_ARRAY, SB_V_MAP
} sb_vtype_t;

typedef struct sb_val {
    sb_vtype_t type;
    uint32_t len;                   /* STR/BIN bytes, ARRAY items, MAP pairs */
    union {
        bool b;
        int64_t i;                  /* SB_V_INT: negative integers */
        uint64_t u;                 /* SB_V_UINT: non-negative integers */
        double f;
        const char *s;              /* STR/BIN: NUL-terminated copy */
        const struct sb_val *a;     /* ARRAY: len items; MAP: 2*len (key, value) */
    } v;
} sb_val_t;

typedef struct {
    sb_err_t code;
    char message [200];
} sb_verr_t;

typedef struct {
    uint32_t nodes;                 /* values in the tree */
    size_t bytes;                   /* str/bin payload bytes incl. NULs */
} sb_vstat_t;

typedef struct sb_doc sb_doc_t;

/*  Validates `buf` as a msgpack map against `fields` (NULL: any map).
    Allocates nothing. Returns 0, or -1 with err filled. `max_bytes` 0 means
    SB_MAX_MSG_BYTES. */
int sb_validate (const uint8_t *buf, size_t len, const sb_field_t *fields,
                 uint32_t max_bytes, sb_vstat_t *stat, sb_verr_t *err);

/*  Decodes bytes that sb_validate accepted (with the stat it returned).
    Returns a new doc owned by the caller, or NULL on allocation failure. */
sb_doc_t *sb_doc_decode (const uint8_t *buf, size_t len, const sb_vstat_t *stat);

/*  Decodes into caller memory (e.g. a stack buffer) instead of the heap:
    returns the root, or NULL when `memlen` is too small. The tree lives in
    `mem`. Used for headers, so parsing them allocates nothing. */
const sb_val_t *sb_doc_decode_into (const uint8_t *buf, size_t len, const sb_vstat_t *stat,
                                    void *mem, size_t memlen);

/*  Validate then decode: NULL with err filled on bad input. */
sb_doc_t *sb_decode (const uint8_t *buf, size_t len, const sb_field_t *fields,
                     uint32_t max_bytes, sb_verr_t *err);

/*  Validates against the type's schema, then decodes. */
sb_doc_t *sb_decode_type (const sb_type_t *type, const uint8_t *buf, size_t len,
                          sb_verr_t *err);

const sb_val_t *sb_doc_root (const sb_doc_t *doc);
void sb_doc_destroy (sb_doc_t **doc_p);

/*  Typed accessors over a map value. Absent or nil fields give NULL / dflt.
    Returned pointers live as long as the doc. */
const sb_val_t *sb_get (const sb_val_t *map, const char *key);
const char *sb_get_str (const sb_val_t *map, const char *key);
const char *sb_get_bin (const sb_val_t *map, const char *key, size_t *len);
uint64_t sb_get_uint (const sb_val_t *map, const char *key, uint64_t dflt);
int64_t sb_get_int (const sb_val_t *map, const char *key, int64_t dflt);
double sb_get_float (const sb_val_t *map, const char *key, double dflt);
bool sb_get_bool (const sb_val_t *map, const char *key, bool dflt);
const sb_val_t *sb_get_map (const sb_val_t *map, const char *key);
const sb_val_t *sb_get_array (const sb_val_t *map, const char *key);
/*  Map iteration helpers. */
static inline const sb_val_t *sb_map_key (const sb_val_t *map, uint32_t i) { return &map->v.a [2 * i]; }
static inline const sb_val_t *sb_map_val (const sb_val_t *map, uint32_t i) { return &map->v.a [2 * i + 1]; }
static inline const sb_val_t *sb_array_at (const sb_val_t *arr, uint32_t i) { return &arr->v.a [i]; }

/* ------------------------------------------------------------------ */
/*  Encoder. Maps and arrays are opened and closed; their counts are
    patched at close, so callers need not count optional fields. */

typedef struct sb_enc sb_enc_t;

sb_enc_t *sb_enc_new (void);
void sb_enc_destroy (sb_enc_t **enc_p);
void sb_enc_reset (sb_enc_t *enc);
/*  The encoded bytes; NULL (len 0) when containers were nested deeper
    than the encoder supports (32), which no schema allows. */
const uint8_t *sb_enc_data (const sb_enc_t *enc, size_t *len);
/*  Takes the buffer (malloc'd) away from the encoder; caller frees it. */
uint8_t *sb_enc_release (sb_enc_t *enc, size_t *len);

void sb_enc_map_open (sb_enc_t *enc);
void sb_enc_map_close (sb_enc_t *enc);
void sb_enc_array_open (sb_enc_t *enc);
void sb_enc_array_close (sb_enc_t *enc);
void sb_enc_key (sb_enc_t *enc, const char *key);
void sb_enc_str (sb_enc_t *enc, const char *s);
void sb_enc_strn (sb_enc_t *enc, const char *s, size_t n);
void sb_enc_bin (sb_enc_t *enc, const void *p, size_t n);
void sb_enc_uint (sb_enc_t *enc, uint64_t v);
void sb_enc_int (sb_enc_t *enc, int64_t v);
void sb_enc_float (sb_enc_t *enc, double v);
void sb_enc_bool (sb_enc_t *enc, bool v);
void sb_enc_nil (sb_enc_t *enc);
/*  Appends one complete, already-encoded msgpack value. */
void sb_enc_raw (sb_enc_t *enc, const uint8_t *p, size_t n);
/*  Re-encodes a decoded value. */
void sb_enc_val (sb_enc_t *enc, const sb_val_t *val);

/*  key + value in one call; the _opt forms skip a NULL string. */
void sb_enc_kstr (sb_enc_t *enc, const char *key, const char *s);
void sb_enc_kstr_opt (sb_enc_t *enc, const char *key, const char *s);
void sb_enc_kuint (sb_enc_t *enc, const char *key, uint64_t v);
void sb_enc_kint (sb_enc_t *enc, const char *key, int64_t v);
void sb_enc_kbool (sb_enc_t *enc, const char *key, bool v);
/*  Opens the body of an `error` reply: {code, message, retryable, ...};
    the caller adds what else it says (detail, retry_after_ms) and closes
    the map. */
void sb_enc_error_open (sb_enc_t *enc, sb_err_t code, const char *message, bool retryable);
void sb_enc_kval (sb_enc_t *enc, const char *key, const sb_val_t *val);

/*  True when the n bytes at s are well-formed UTF-8 (no overlong forms,
    no surrogates). Typed `str` fields must be. */
bool sb_utf8_valid (const char *s, size_t n);

/*  Byte length of the first complete msgpack value at p (structurally
    checked, no schema); 0 when malformed or truncated. */
size_t sb_msgpack_span (const uint8_t *p, size_t len);

#endif

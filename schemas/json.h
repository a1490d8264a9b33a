/*  schemas/json.h — JSON <-> msgpack translation, driven by the schema.

    The browser, the CLI and the tap speak JSON; the bus speaks msgpack.
    JSON cannot carry raw bytes or integers past 2^53 (JavaScript numbers
    are doubles), so the translation follows docs/protocol.md:
      - `bin` values travel as base64 strings (RFC 4648, standard alphabet);
      - integers beyond 2^53 in magnitude travel as decimal strings.

    msgpack -> JSON needs no schema: a decoded tree says what each value
    is. JSON -> msgpack uses the field table where there is one, because
    only the table says that a string is really bytes or a big integer.
    In free-form (`any`, schema-less map) values, strings stay strings.

    Untrusted JSON goes through sb_json_parse, which checks size and
    nesting before jansson allocates anything, then through
    sb_json_to_msgpack, and the result through sb_validate. */
#ifndef SB_JSON_H
#define SB_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include "schemas/codec.h"

#define SB_JSON_MAX_BYTES  (1u << 20)   /* default cap on one JSON document */
#define SB_JSON_MAX_DEPTH  32           /* default cap on JSON nesting */

/*  Converts a decoded value to JSON. Returns a new reference owned by the
    caller, or NULL on allocation failure or a tree nested absurdly deep.
    bin -> base64 string; integers beyond 2^53 in magnitude -> decimal
    strings; non-finite floats -> null (as JSON.stringify does); map keys
    that are not strings -> their text form (42, true, null, 1.5, base64);
    strings that are not valid UTF-8 get U+FFFD for each bad byte, because
    JSON text must be UTF-8. When a map repeats a key, the first one wins,
    as it does for sb_get. */
json_t *sb_json_from_val (const sb_val_t *v);

/*  Compact JSON text of a decoded value. Returns a NUL-terminated string
    the caller frees with free(), or NULL on failure. */
char *sb_json_dump (const sb_val_t *v);

/*  Writes the compact JSON of a decoded value and a newline to `out`:
    one JSON line. Returns 0, or -1 on failure. */
int sb_json_print (FILE *out, const sb_val_t *v);

/*  Appends the JSON object `j` to `enc` as one msgpack map, guided by
    `fields` (NULL: free-form). A `bin` field takes a base64 string; an
    `int`/`uint` field takes a JSON integer or a decimal string; a `float`
    field takes any number or a decimal integer string; free-form values map naturally (integer ->
    int/uint, real -> float, string, bool, null -> nil, array, object).
    Other type mismatches are translated as they come, for sb_validate to
    reject with the field's name. Returns 0, or -1 with err filled (code
    `invalid`, message naming the field) when the translation itself
    cannot proceed: `j` is not an object, bad base64, a string that is not
    a decimal integer in an integer field, or nesting deeper than
    SB_JSON_MAX_DEPTH. On failure the encoder holds a partial value:
    reset it before reuse. Pass an encoder with no container open: it
    tracks at most 32 levels, and a 32-deep document uses them all. */
int sb_json_to_msgpack (const json_t *j, const sb_field_t *fields, sb_enc_t *enc,
                        sb_verr_t *err);

/*  Parses untrusted JSON text. Before jansson allocates anything it checks
    the size against `max_bytes` (0: SB_JSON_MAX_BYTES; over it:
    `too_large`) and pre-scans the nesting depth against `max_depth` (0:
    SB_JSON_MAX_DEPTH). Duplicate object keys and \u0000 in strings are
    refused. Any JSON value is accepted at the top; callers check its type.
    Returns a new reference owned by the caller, or NULL with err filled
    (`invalid` with the line, column and byte offset of the fault). */
json_t *sb_json_parse (const char *buf, size_t len, size_t max_bytes, int max_depth,
                       sb_verr_t *err);

/*  Base64 helpers, exposed for the gateway and the tests.
    sb_base64_encode returns a NUL-terminated string the caller frees, or
    NULL on allocation failure. sb_base64_decode decodes `len` characters
    of standard-alphabet base64 (padding optional, no whitespace) into
    `out`, which must hold sb_base64_decoded_max (len) bytes; returns the
    number of bytes written, or -1 when the text is not base64. */
char *sb_base64_encode (const void *data, size_t len);
size_t sb_base64_decoded_max (size_t len);
ssize_t sb_base64_decode (const char *text, size_t len, uint8_t *out);

#endif

/*  schemas/schema.h — the message tables: the single source of truth for
    every bus message type. The codec, the broker's validation, the tap's
    printer and `switchboard schemas` all read these tables. */
#ifndef SB_SCHEMA_H
#define SB_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "schemas/run_status.h"

#define SB_PROTOCOL_VERSION  1
#define SB_MAX_MSG_BYTES     (1u << 20)   /* default cap on one body */
#define SB_MAX_DEPTH         16           /* msgpack nesting cap */
#define SB_DEFAULT_STR_MAX   4096         /* str/bin cap when a field says 0 */
#define SB_DEFAULT_COUNT_MAX 4096         /* array/map cap when a field says 0 */

/*  Ranges of the integers that come from outside (docs/protocol.md).
    Times in ms since the epoch end with year 9999; seqs, fences, tokens
    and durations stay below 2^53, so a JSON client reads them exactly,
    and no sum or product of two of them overflows an int64. */
#define SB_TIME_MS_MAX       253402300799999ll   /* 9999-12-31T23:59:59.999Z */
#define SB_COUNT_MAX         9007199254740991ll  /* 2^53 - 1 */
#define SB_MAX_STEPS_MAX     10000               /* model calls per run */
#define SB_RUN_TIMEOUT_MAX_S (30 * 24 * 3600)    /* a run's timeout_s: 30 days */

typedef enum {
    SB_T_ANY = 0,   /* any msgpack value (still structurally validated) */
    SB_T_STR,
    SB_T_INT,       /* signed or unsigned integer that fits int64 */
    SB_T_UINT,      /* non-negative integer */
    SB_T_BOOL,
    SB_T_BIN,
    SB_T_MAP,
    SB_T_ARRAY,
    SB_T_FLOAT,     /* a float or any integer */
    SB_T_ENUM       /* a string on the wire, one of the field's `values` */
} sb_ftype_t;

typedef struct sb_field {
    const char *name;
    sb_ftype_t type;
    bool required;
    uint32_t max;                   /* bytes for str/bin, count for map/array; 0 = default */
    const struct sb_field *sub;     /* MAP: its fields (NULL-name terminated) or NULL = free-form.
                                       ARRAY: one field describing each item, or NULL = any. */
    const char *doc;
    /* INT and UINT fields: the accepted values (inclusive) and the value
       an absent field means. 0..0 declares no range. The validator
       refuses a value outside the range with `invalid`, naming the field
       and the range, before any handler runs; rows that leave these
       members out declare nothing. */
    int64_t min_value;
    int64_t max_value;
    int64_t default_value;
    /* ENUM fields: the accepted names, NULL-terminated (one table per
       vocabulary, kept beside its C enum in schemas/), and whether ""
       is accepted too (a field where "" clears a setting). The validator
       refuses any other string with `invalid`, naming the field and the
       names, before any handler runs; so a handler compares enums, not
       strings, and checks nothing again. Rows write ENUM (names) or
       ENUM_OR_EMPTY (names) (schemas/types.h). */
    const char *const *values;
    bool empty_ok;
} sb_field_t;

typedef enum {
    SB_KIND_REQUEST,
    SB_KIND_REPLY,
    SB_KIND_CHUNK,
    SB_KIND_EVENT,      /* published on the event plane */
    SB_KIND_ONEWAY,     /* a command that expects no reply */
    SB_KIND_TAPE        /* a tape entry kind (the body of session.append) */
} sb_kind_t;

/*  Who may send a message of a type, besides the actors: flags, since a
    type can be both public and worker (session.get). The broker asks it
    of every message a CURVE key sends (bus/curve.c), the gateway of
    every message a browser sends (gateway/translate.c). On a tape kind,
    SB_SCOPE_WORKER says that a worker key may append entries of that
    kind. */
typedef enum {
    SB_SCOPE_INTERNAL = 0,        /* the actors only */
    SB_SCOPE_PUBLIC = 1 << 0,     /* may pass the gateway; a client key may send it */
    SB_SCOPE_WORKER = 1 << 1      /* a worker key may send it (docs/workers.md) */
} sb_scope_t;

typedef struct sb_type {
    const char *name;
    sb_kind_t kind;
    unsigned scope;               /* sb_scope_t flags */
    const sb_field_t *fields;     /* NULL-name terminated */
    uint32_t max_bytes;           /* 0 = SB_MAX_MSG_BYTES */
    const char *doc;
} sb_type_t;

/*  Looks a type up by name (exact, length-delimited). NULL when unknown. */
const sb_type_t *sb_schema_find (const char *name, size_t len);

/*  The whole table, for printing and tests. */
const sb_type_t *sb_schema_all (size_t *count);

/*  True when `f` declares a range (an INT or UINT field with min_value or
    max_value set). */
bool sb_field_ranged (const sb_field_t *f);

/*  The index of `name` (of `len` bytes) in the NULL-terminated `values`,
    or -1. For the vocabularies' name <-> enum functions and the codec. */
int sb_enum_index (const char *const *values, const char *name, size_t len);

/*  Writes the names of `values` joined by " | " into out (n bytes, cut to
    fit): for error messages, `switchboard schemas` and the docs. */
void sb_enum_join (const char *const *values, char *out, size_t n);

/*  A vocabulary's two functions, over its table of `count` names:
    NAME_FROM (const char *) gives the value of a name, or `count` for
    NULL and any other string; NAME_OF (value) gives the name, or
    `unknown` out of range. One line per function in the vocabulary's .c. */
int sb_enum_lookup (const char *const *values, int count, const char *name);
const char *sb_enum_name (const char *const *values, int count, int value, const char *unknown);
#define SB_ENUM_FROM(fn, type, values, count) \
    type fn (const char *name) { return (type) sb_enum_lookup (values, count, name); }
#define SB_ENUM_NAME(fn, type, values, count, unknown) \
    const char *fn (type value) { return sb_enum_name (values, count, (int) value, unknown); }

/*  Field `field` of message type `type` (e.g. "run.list", "limit"), for
    readers of its declared range such as the CLI; NULL when unknown. */
const sb_field_t *sb_schema_field (const char *type, const char *field);

/*  The declared default of field `field` of message type `type` (e.g.
    "run.list", "limit"): what a handler uses when the field is absent.
    0 when the type, the field or its range is not declared. */
int64_t sb_schema_default (const char *type, const char *field);

/*  The sub-table of a MAP field that replays a tape body as it was
    stored (session.event, session.events.ok): free-form, and judged as
    before the strict rules on free-form values, so entries a tape took
    before those rules still replay. Everything that writes a body is
    strict, so nothing new reaches a tape that a strict client cannot
    decode. */
extern const sb_field_t sb_stored_body [];

/*  Fields of the message header (docs/protocol.md). */
extern const sb_field_t sb_header_fields [];

/*  Looks up the tape-entry kind `kind` (e.g. "text.delta"); NULL if unknown. */
const sb_type_t *sb_schema_tape_kind (const char *kind);
const sb_type_t *sb_schema_tape_all (size_t *count);

const char *sb_ftype_name (sb_ftype_t type);
const char *sb_kind_name (sb_kind_t kind);

/*  Whether type `t` holds all of the scope flags `scope`. */
static inline bool
sb_type_in_scope (const sb_type_t *t, unsigned scope)
{
    return t && (t->scope & scope) == scope;
}

/*  Prints the tables as text or Markdown (docs/protocol.md). */
#include <stdio.h>
void sb_schema_print (FILE *out, bool markdown);

#endif

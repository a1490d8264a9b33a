/*  schemas/types.h — shared by the per-service type tables.

    To add a service's types: create schemas/types_<svc>.c defining
    `const sb_type_t sb_types_<svc> []` and `sb_types_<svc>_count`, and add
    X(<svc>) to SB_TYPE_FILES below. */
#ifndef SB_TYPES_H
#define SB_TYPES_H

#include "schemas/schema.h"
#include "schemas/approval_policy.h"
#include "schemas/interaction.h"
#include "schemas/vocab.h"

#define END { NULL, 0, false, 0, NULL, NULL }
#define ID_MAX 32               /* ULIDs are 26 characters */
#define KB * 1024u
#define MB * 1024u * 1024u
/*  The trailing members of an INT/UINT row: its range and default. */
#define RANGE(min, max, dflt)         min, max, dflt
/*  The common ranges (schema.h): a time, a count, a step limit. */
#define RANGE_TIME                    RANGE (0, SB_TIME_MS_MAX, 0)
#define RANGE_COUNT                   RANGE (0, SB_COUNT_MAX, 0)
/*  The rate-limit headers a usage entry records (actors/llm/usage.h: a
    fixed set, each an integer the header carried). */
#define RANGE_RATELIMIT               RANGE (0, 1000000000000ll, 0)
#define RATELIMIT_FIELDS(pre) \
    { "ratelimit_requests_limit", SB_T_UINT, false, 0, NULL, pre "x-ratelimit-limit-requests", RANGE_RATELIMIT }, \
    { "ratelimit_requests_remaining", SB_T_UINT, false, 0, NULL, pre "x-ratelimit-remaining-requests", \
      RANGE_RATELIMIT }, \
    { "ratelimit_tokens_limit", SB_T_UINT, false, 0, NULL, pre "x-ratelimit-limit-tokens", RANGE_RATELIMIT }, \
    { "ratelimit_tokens_remaining", SB_T_UINT, false, 0, NULL, pre "x-ratelimit-remaining-tokens", \
      RANGE_RATELIMIT }, \
    { "retry_after_s", SB_T_UINT, false, 0, NULL, pre "retry-after, whole seconds", RANGE_RATELIMIT }
#define SB_RATELIMIT_NKEYS 5
#define SB_RATELIMIT_KEYS "ratelimit_requests_limit", "ratelimit_requests_remaining", \
    "ratelimit_tokens_limit", "ratelimit_tokens_remaining", "retry_after_s"
#define RANGE_STEPS                   RANGE (1, SB_MAX_STEPS_MAX, 50)
/*  The trailing member of an ENUM row: the names it accepts (a table of
    schemas/, e.g. sb_policy_mode_names), with "" too for ENUM_OR_EMPTY. */
#define ENUM(names)                   .values = names
#define ENUM_OR_EMPTY(names)          .values = names, .empty_ok = true
/*  A request row names its scope (schema.h: SB_SCOPE_*). REP replies are
    public: the gateway still sends only requests and one-way commands,
    and a worker key none but its own requests. */
#define REQ(name, fields, scope, doc) { name, SB_KIND_REQUEST, scope, fields, 0, doc }
#define REP(name, fields, doc)        { name, SB_KIND_REPLY, SB_SCOPE_PUBLIC, fields, 0, doc }

#define SB_TYPE_FILES(X) \
    X (session) \
    X (queue) \
    X (llm) \
    X (run) \
    X (exec) \
    X (hooks) \
    X (worker) \
    X (interact) \
    X (blob)

#define SB_DECLARE(svc) \
    extern const sb_type_t sb_types_##svc []; \
    extern const size_t sb_types_##svc##_count;
SB_TYPE_FILES (SB_DECLARE)
#undef SB_DECLARE

extern const sb_field_t sb_session_record_fields [];
extern const sb_field_t sb_forked_from_fields [];
/*  A blob on the tape, in run.request and llm.stream: {sha256, mime,
    bytes, name, width, height, sent} (schemas/types_blob.c). */
extern const sb_field_t sb_blob_ref_fields [];
/*  The largest blob a message carries (blob.put, blob.get). */
#define SB_BLOB_BYTES_MAX (32u << 20)

#endif

/*  schemas/errors.h — the one table of error codes carried in `error` replies. */
#ifndef SB_ERRORS_H
#define SB_ERRORS_H

#include <stdbool.h>

/*  X(name, retryable, doc) */
#define SB_ERROR_TABLE(X) \
    X (invalid,        false, "a field is missing, mistyped or out of range; message names it") \
    X (not_found,      false, "the addressed object does not exist") \
    X (conflict,       false, "the request conflicts with the current state") \
    X (forbidden,      false, "the caller may not use this type") \
    X (no_service,     true,  "no live instance serves the type's service") \
    X (unavailable,    true,  "the instance handling the request went away; retry with the same command_id") \
    X (timeout,        true,  "the deadline passed before a reply") \
    X (too_large,      false, "the message exceeds its size limit") \
    X (unknown_type,   false, "the message type is not in the schema tables") \
    X (version,        false, "protocol version mismatch") \
    X (not_registered, true,  "the broker does not know this instance; send bus.ready again") \
    X (overloaded,     true,  "a queue bound was reached") \
    X (disk_full,      false, "the disk is full; nothing was written") \
    X (internal,       true,  "an unexpected failure inside the server") \
    X (cancelled,      false, "the operation was cancelled") \
    X (provider,       false, "the LLM provider returned an error") \
    X (auth,           false, "authentication with the provider failed") \
    X (incomplete_stream, true, "a stream ended before its terminal event") \
    X (fenced,         false, "the writer's fencing token is stale") \
    X (context_overflow, false, "the request does not fit the model's context window (the provider said so)") \
    X (not_owner,      true,  "another node of the cluster owns the session's shard; the message names it")

typedef enum {
    SB_OK = 0,
#define SB_ERR_ENUM(name, retry, doc) SB_E_##name,
    SB_ERROR_TABLE (SB_ERR_ENUM)
#undef SB_ERR_ENUM
    SB_E__COUNT
} sb_err_t;

const char *sb_err_name (sb_err_t code);
bool        sb_err_retryable (sb_err_t code);
const char *sb_err_doc (sb_err_t code);
/*  Maps a name back to its code; SB_E_internal when unknown. */
sb_err_t    sb_err_from_name (const char *name);

#endif

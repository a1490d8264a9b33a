/*  common/log.h — one line per event: `ts level actor message key=value…`.
    Safe from any thread: each line is one fprintf to stderr. */
#ifndef SB_LOG_H
#define SB_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum { SB_LOG_DEBUG, SB_LOG_INFO, SB_LOG_WARN, SB_LOG_ERROR } sb_log_level_t;

/*  Reads SWITCHBOARD_LOG (debug|info|warn|error); info by default. */
void sb_log_init (void);
void sb_log_set_level (sb_log_level_t level);
void sb_log (sb_log_level_t level, const char *actor, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

#define sb_debug(actor, ...) sb_log (SB_LOG_DEBUG, actor, __VA_ARGS__)
#define sb_info(actor, ...)  sb_log (SB_LOG_INFO, actor, __VA_ARGS__)
#define sb_warn(actor, ...)  sb_log (SB_LOG_WARN, actor, __VA_ARGS__)
#define sb_error(actor, ...) sb_log (SB_LOG_ERROR, actor, __VA_ARGS__)

/*  Copies `url` into `out` (NUL-terminated, cut to `size`) without its
    credentials, for a log line or a message: the userinfo (user:password@)
    is left out, and the value of each query or fragment parameter whose
    name looks like a secret (key, token, sig, secret, pass, auth,
    credential in any case and within a longer name: api_key,
    access_token, X-Amz-Signature) reads "***". Every URL that is logged,
    printed or put in a message goes through it (docs/llm.md). Returns out. */
const char *sb_log_redact_url (const char *url, char *out, size_t size);

/*  A token bucket for lines about bad input: at most `burst` lines, then
    one per second; `suppressed` counts what was held back. */
typedef struct {
    int64_t window_ms;
    uint32_t used;
    uint32_t suppressed;
} sb_ratelimit_t;

/*  True when a line may be printed now. */
int sb_ratelimit_ok (sb_ratelimit_t *rl, uint32_t burst);

//  Formats an error for the caller into err (errlen bytes, either may be
//  0) and returns -1: the one line of every `return sb_fail (err, ...)`.
int sb_fail (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/*  Milliseconds: wall clock since the epoch, and monotonic. */
/*  An integer setting from the environment: variable `name` when it is a
    whole number from min to max, else dflt (a value that is not one is
    logged by `actor`, naming the range, and not guessed at). */
int64_t sb_env_int (const char *actor, const char *name, int64_t min, int64_t max, int64_t dflt);

uint64_t sb_now_ms (void);
int64_t sb_mono_ms (void);
int64_t sb_mono_us (void);

#endif

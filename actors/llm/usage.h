/*  actors/llm/usage.h — what one model call costs, and the rate-limit
    headers its answer carried (docs/usage.md).

    Prices are integers: micro-dollars per million tokens, so that a price
    of $0.075 per million is exact. A call's cost is summed in units of
    1e-12 dollars (tokens x micro-dollars per million) and rounded once, to
    the micro-dollar: no float ever accumulates. */
#ifndef SB_LLM_USAGE_H
#define SB_LLM_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*  Bounds of a price read from a providers file, in dollars per million
    tokens: 0 (free, e.g. a local model) to 10,000. */
#define SB_PRICE_MAX_USD 10000
#define SB_PRICE_MAX_MICRO (SB_PRICE_MAX_USD * 1000000ull)

typedef struct {
    bool set;                   /* false: no price known (cost unknown) */
    uint64_t input;             /* micro-dollars per million input tokens */
    uint64_t cached_input;      /* same, input read from the provider's cache */
    uint64_t output;            /* same, output tokens (reasoning included) */
} sb_price_t;

/*  The list price of a well-known model (see the table's date in
    usage.c), by exact name or by a dated variant of it ("gpt-4o-2024-08-06"
    is "gpt-4o"); false when the model is not in the table. */
bool sb_price_default (const char *model, sb_price_t *out);

#define SB_COST_MAX 9007199254740991ll     /* 2^53 - 1 micro-dollars */

/*  The cost in micro-dollars of a call with these tokens (input counts the
    cached input inside it, as OpenAI does; a negative count is unknown).
    -1 when the cost is unknown: no price, input or output unknown, or a
    cost past SB_COST_MAX (counts no provider sends). An
    unknown cached count is priced as uncached input. */
int64_t sb_price_cost (const sb_price_t *price, int64_t input, int64_t cached, int64_t output);

/*  Reads {"input": USD, "cached_input": USD?, "output": USD} (dollars per
    million tokens, each 0 to SB_PRICE_MAX_USD; cached_input defaults to
    input). Returns 0, or -1 with the rule broken in err. The object is a
    jansson json_t, passed as void * to keep jansson out of this header. */
int sb_price_from_json (const void *object, sb_price_t *out, char *err, size_t errlen);

/*  The rate-limit headers kept, a fixed set: OpenAI's x-ratelimit-* and
    Anthropic's anthropic-ratelimit-* mapped to the same four, and
    retry-after in whole seconds. */
typedef enum {
    SB_RL_REQUESTS_LIMIT,
    SB_RL_REQUESTS_REMAINING,
    SB_RL_TOKENS_LIMIT,
    SB_RL_TOKENS_REMAINING,
    SB_RL_RETRY_AFTER_S,
    SB_RL_COUNT
} sb_limits_field_t;

/*  Each value is an integer from 0 to SB_RL_MAX, or -1: not sent, or
    sent and not a plain integer in range (a bad value is dropped, never
    guessed). */
#define SB_RL_MAX 1000000000000ll
typedef struct {
    int64_t v [SB_RL_COUNT];
} sb_limits_seen_t;

/*  All fields unknown. */
void sb_limits_seen_clear (sb_limits_seen_t *rl);

/*  One header line as libcurl gives it ("Name: value\r\n", len bytes, not
    NUL-terminated). Returns true when the line was one of the fields. */
bool sb_limits_seen_header (sb_limits_seen_t *rl, const char *line, size_t len);

/*  The field's key on the bus and the tape ("ratelimit_requests_remaining"). */
const char *sb_limits_seen_key (sb_limits_field_t f);

/*  Whether any field is known. */
bool sb_limits_seen_any (const sb_limits_seen_t *rl);

#endif

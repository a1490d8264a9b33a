/*  actors/llm/usage.c — prices, a call's cost, and rate-limit headers. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "actors/llm/usage.h"

#define USD(x) ((uint64_t) ((x) * 1000000.0 + 0.5))

/*  List prices in dollars per million tokens as of 2025-08-15: input,
    cached input (a cache read; Anthropic's cache writes are priced as
    input here), output. They age and were not checked against the
    providers' pages when this table was written down: a providers file's
    "prices" wins over it, and a model in neither has no cost
    (docs/usage.md). */
static const struct {
    const char *model;
    double input, cached, output;
} s_prices [] = {
    { "gpt-5",               1.25,   0.125,  10.00 },
    { "gpt-5-mini",          0.25,   0.025,   2.00 },
    { "gpt-5-nano",          0.05,   0.005,   0.40 },
    { "gpt-4.1",             2.00,   0.50,    8.00 },
    { "gpt-4.1-mini",        0.40,   0.10,    1.60 },
    { "gpt-4.1-nano",        0.10,   0.025,   0.40 },
    { "gpt-4o",              2.50,   1.25,   10.00 },
    { "gpt-4o-mini",         0.15,   0.075,   0.60 },
    { "o3",                  2.00,   0.50,    8.00 },
    { "o4-mini",             1.10,   0.275,   4.40 },
    { "claude-opus-4-1",    15.00,   1.50,   75.00 },
    { "claude-opus-4",      15.00,   1.50,   75.00 },
    { "claude-sonnet-4",     3.00,   0.30,   15.00 },
    { "claude-3-7-sonnet",   3.00,   0.30,   15.00 },
    { "claude-3-5-sonnet",   3.00,   0.30,   15.00 },
    { "claude-3-5-haiku",    0.80,   0.08,    4.00 },
};
#define NPRICES (sizeof s_prices / sizeof s_prices [0])

/*  "name" itself, or "name-<digit>...": a dated snapshot of it. */
static size_t
s_matches (const char *model, const char *name)
{
    size_t n = strlen (name);
    if (strncmp (model, name, n) != 0)
        return 0;
    if (model [n] == 0 || (model [n] == '-' && isdigit ((unsigned char) model [n + 1])))
        return n;
    return 0;
}

bool
sb_price_default (const char *model, sb_price_t *out)
{
    memset (out, 0, sizeof *out);
    if (!model)
        return false;
    size_t best = 0, at = 0;
    for (size_t k = 0; k < NPRICES; k++) {
        size_t n = s_matches (model, s_prices [k].model);
        if (n > best) {
            best = n;
            at = k;
        }
    }
    if (!best)
        return false;
    out->set = true;
    out->input = USD (s_prices [at].input);
    out->cached_input = USD (s_prices [at].cached);
    out->output = USD (s_prices [at].output);
    return true;
}

int64_t
sb_price_cost (const sb_price_t *price, int64_t input, int64_t cached, int64_t output)
{
    if (!price || !price->set || input < 0 || output < 0)
        return -1;
    if (cached < 0 || cached > input)
        cached = cached < 0 ? 0 : input;
    /* tokens (< 2^63) times micro-dollars per million (< 2^34): 128 bits */
    unsigned __int128 pico = (unsigned __int128) (uint64_t) (input - cached) * price->input
                           + (unsigned __int128) (uint64_t) cached * price->cached_input
                           + (unsigned __int128) (uint64_t) output * price->output;
    unsigned __int128 micro = (pico + 500000) / 1000000;
    /* past 2^53 - 1 (the bus's bound on a count) it is no real call's cost */
    return micro > (unsigned __int128) SB_COST_MAX ? -1 : (int64_t) micro;
}

static int
s_price_field (json_t *o, const char *key, bool required, uint64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get (o, key);
    if (!v) {
        if (required)
            snprintf (err, errlen, "prices needs \"%s\" (dollars per million tokens)", key);
        return required ? -1 : 1;
    }
    double d = json_is_integer (v) ? (double) json_integer_value (v) : json_is_real (v) ? json_real_value (v) : -1;
    if (!json_is_number (v) || !isfinite (d) || d < 0 || d > SB_PRICE_MAX_USD) {
        snprintf (err, errlen, "prices.%s must be a number of dollars per million tokens from 0 to %d",
                  key, SB_PRICE_MAX_USD);
        return -1;
    }
    *out = (uint64_t) llround (d * 1000000.0);
    return 0;
}

int
sb_price_from_json (const void *object, sb_price_t *out, char *err, size_t errlen)
{
    json_t *o = (json_t *) object;
    memset (out, 0, sizeof *out);
    if (!json_is_object (o)) {
        snprintf (err, errlen, "prices must be {\"input\", \"cached_input\"?, \"output\"} in dollars per million tokens");
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach (o, key, v)
        if (strcmp (key, "input") && strcmp (key, "cached_input") && strcmp (key, "output")) {
            snprintf (err, errlen, "prices has an unknown field '%.32s' (input, cached_input, output)", key);
            return -1;
        }
    if (s_price_field (o, "input", true, &out->input, err, errlen) < 0
    ||  s_price_field (o, "output", true, &out->output, err, errlen) < 0)
        return -1;
    int rc = s_price_field (o, "cached_input", false, &out->cached_input, err, errlen);
    if (rc < 0)
        return -1;
    if (rc > 0)
        out->cached_input = out->input;
    out->set = true;
    return 0;
}

//  ---------------------------------------------------------------------------
//  Rate-limit headers

static const struct {
    const char *header;
    sb_limits_field_t field;
} s_headers [] = {
    { "x-ratelimit-limit-requests", SB_RL_REQUESTS_LIMIT },
    { "x-ratelimit-remaining-requests", SB_RL_REQUESTS_REMAINING },
    { "x-ratelimit-limit-tokens", SB_RL_TOKENS_LIMIT },
    { "x-ratelimit-remaining-tokens", SB_RL_TOKENS_REMAINING },
    { "anthropic-ratelimit-requests-limit", SB_RL_REQUESTS_LIMIT },
    { "anthropic-ratelimit-requests-remaining", SB_RL_REQUESTS_REMAINING },
    { "anthropic-ratelimit-tokens-limit", SB_RL_TOKENS_LIMIT },
    { "anthropic-ratelimit-tokens-remaining", SB_RL_TOKENS_REMAINING },
    { "retry-after", SB_RL_RETRY_AFTER_S },
};
#define NHEADERS (sizeof s_headers / sizeof s_headers [0])

static const char *s_keys [SB_RL_COUNT] = {
    [SB_RL_REQUESTS_LIMIT] = "ratelimit_requests_limit",
    [SB_RL_REQUESTS_REMAINING] = "ratelimit_requests_remaining",
    [SB_RL_TOKENS_LIMIT] = "ratelimit_tokens_limit",
    [SB_RL_TOKENS_REMAINING] = "ratelimit_tokens_remaining",
    [SB_RL_RETRY_AFTER_S] = "retry_after_s",
};

const char *
sb_limits_seen_key (sb_limits_field_t f)
{
    return f < SB_RL_COUNT ? s_keys [f] : "?";
}

void
sb_limits_seen_clear (sb_limits_seen_t *rl)
{
    for (int k = 0; k < SB_RL_COUNT; k++)
        rl->v [k] = -1;
}

bool
sb_limits_seen_any (const sb_limits_seen_t *rl)
{
    for (int k = 0; k < SB_RL_COUNT; k++)
        if (rl->v [k] >= 0)
            return true;
    return false;
}

/*  Digits only, at most 13 of them, and no more than SB_RL_MAX: anything
    else (a date in retry-after, "1.5", "12abc") is -1. */
static int64_t
s_integer (const char *p, size_t n)
{
    while (n && (*p == ' ' || *p == '\t'))
        p++, n--;
    while (n && (p [n - 1] == ' ' || p [n - 1] == '\t' || p [n - 1] == '\r' || p [n - 1] == '\n'))
        n--;
    if (n == 0 || n > 13)
        return -1;
    int64_t v = 0;
    for (size_t k = 0; k < n; k++) {
        if (!isdigit ((unsigned char) p [k]))
            return -1;
        v = v * 10 + (p [k] - '0');
    }
    return v <= SB_RL_MAX ? v : -1;
}

bool
sb_limits_seen_header (sb_limits_seen_t *rl, const char *line, size_t len)
{
    const char *colon = memchr (line, ':', len);
    if (!colon)
        return false;
    size_t name = (size_t) (colon - line);
    for (size_t k = 0; k < NHEADERS; k++)
        if (strlen (s_headers [k].header) == name && strncasecmp (line, s_headers [k].header, name) == 0) {
            rl->v [s_headers [k].field] = s_integer (colon + 1, len - name - 1);
            return true;
        }
    return false;
}

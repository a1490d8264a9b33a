/*  tests/unit/test_llm_usage.c — prices, a call's cost in micro-dollars,
    and the rate-limit headers kept (actors/llm/usage.c). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "actors/llm/usage.h"

static sb_price_t
s_price (uint64_t in, uint64_t cached, uint64_t out)
{
    return (sb_price_t) { .set = true, .input = in, .cached_input = cached, .output = out };
}

Test (llm_usage, cost_is_exact_and_rounded_once_half_up)
{
    //  $2.50 / $1.25 / $10 per million
    sb_price_t p = s_price (2500000, 1250000, 10000000);
    //  1123 x 2.5 + 111 x 1.25 + 77 x 10 = 3716.25 micro-dollars
    cr_assert_eq (sb_price_cost (&p, 1234, 111, 77), 3716);
    //  17 x 2.5 + 3 x 10 = 72.5: half rounds up
    cr_assert_eq (sb_price_cost (&p, 17, 0, 3), 73);
    cr_assert_eq (sb_price_cost (&p, 0, 0, 0), 0);
    //  a million of each at a million dollars' worth stays exact in 128 bits
    sb_price_t big = s_price (SB_PRICE_MAX_MICRO, SB_PRICE_MAX_MICRO, SB_PRICE_MAX_MICRO);
    cr_assert_eq (sb_price_cost (&big, 100000000000ll, 0, 100000000000ll), 2 * 1000000000000000ll);
    //  past 2^53 micro-dollars: no real call, so unknown rather than a wrapped number
    cr_assert_eq (sb_price_cost (&big, INT64_MAX, 0, INT64_MAX), -1);
}

Test (llm_usage, cost_is_unknown_without_price_or_counts)
{
    sb_price_t p = s_price (1000000, 500000, 2000000);
    sb_price_t none = { 0 };
    cr_assert_eq (sb_price_cost (&none, 10, 0, 10), -1);
    cr_assert_eq (sb_price_cost (NULL, 10, 0, 10), -1);
    cr_assert_eq (sb_price_cost (&p, -1, 0, 10), -1);
    cr_assert_eq (sb_price_cost (&p, 10, 0, -1), -1);
    //  an unknown cached count is priced as uncached input
    cr_assert_eq (sb_price_cost (&p, 1000000, -1, 0), 1000000);
    //  more cached than input (a provider's slip) is capped at the input
    cr_assert_eq (sb_price_cost (&p, 1000000, 2000000, 0), 500000);
}

Test (llm_usage, a_summed_cost_does_not_drift)
{
    //  a thousand calls of 1 token at $0.075 per million: 0.075 micro-dollars
    //  each, rounded per call to 0; a float sum would drift, integers don't
    sb_price_t p = s_price (75000, 75000, 75000);
    int64_t sum = 0;
    for (int k = 0; k < 1000; k++)
        sum += sb_price_cost (&p, 13333, 0, 0);
    //  13333 x 0.075 = 999.975 -> 1000 each
    cr_assert_eq (sum, 1000000);
}

Test (llm_usage, default_table_matches_names_and_dated_snapshots)
{
    sb_price_t p;
    cr_assert (sb_price_default ("gpt-4o-mini", &p));
    cr_assert_eq (p.input, 150000);
    cr_assert_eq (p.cached_input, 75000);
    cr_assert_eq (p.output, 600000);
    cr_assert (sb_price_default ("gpt-4o-2024-08-06", &p));
    cr_assert_eq (p.input, 2500000);
    cr_assert (sb_price_default ("claude-sonnet-4-20250514", &p));
    cr_assert_eq (p.output, 15000000);
    cr_assert_not (sb_price_default ("gpt-4o-mini-tts", &p));
    cr_assert_not (sb_price_default ("my-local-model", &p));
    cr_assert_not (p.set);
    cr_assert_not (sb_price_default (NULL, &p));
}

static int
s_parse (const char *text, sb_price_t *p, char *err)
{
    json_t *o = json_loads (text, 0, NULL);
    int rc = sb_price_from_json (o, p, err, 200);
    json_decref (o);
    return rc;
}

Test (llm_usage, prices_from_json_are_checked)
{
    sb_price_t p;
    char err [200];
    cr_assert_eq (s_parse ("{\"input\": 0.075, \"output\": 0.3}", &p, err), 0);
    cr_assert (p.set);
    cr_assert_eq (p.input, 75000);
    cr_assert_eq (p.cached_input, 75000);
    cr_assert_eq (p.output, 300000);
    cr_assert_eq (s_parse ("{\"input\": 3, \"cached_input\": 0.3, \"output\": 15}", &p, err), 0);
    cr_assert_eq (p.cached_input, 300000);
    cr_assert_eq (s_parse ("{\"input\": 0, \"output\": 0}", &p, err), 0);
    cr_assert_eq (s_parse ("{\"input\": -1, \"output\": 1}", &p, err), -1);
    cr_assert (strstr (err, "prices.input"));
    cr_assert_eq (s_parse ("{\"input\": 1, \"output\": 10001}", &p, err), -1);
    cr_assert (strstr (err, "prices.output"));
    cr_assert_eq (s_parse ("{\"input\": \"1\", \"output\": 1}", &p, err), -1);
    cr_assert_eq (s_parse ("{\"output\": 1}", &p, err), -1);
    cr_assert (strstr (err, "\"input\""));
    cr_assert_eq (s_parse ("{\"input\": 1, \"output\": 1, \"cache\": 1}", &p, err), -1);
    cr_assert (strstr (err, "unknown field"));
    cr_assert_eq (s_parse ("[1, 2]", &p, err), -1);
}

static bool
s_header (sb_limits_seen_t *rl, const char *line)
{
    return sb_limits_seen_header (rl, line, strlen (line));
}

Test (llm_usage, rate_limit_headers_are_a_fixed_set_of_checked_integers)
{
    sb_limits_seen_t rl;
    sb_limits_seen_clear (&rl);
    cr_assert_not (sb_limits_seen_any (&rl));
    cr_assert (s_header (&rl, "x-ratelimit-remaining-requests: 42\r\n"));
    cr_assert_eq (rl.v [SB_RL_REQUESTS_REMAINING], 42);
    cr_assert (s_header (&rl, "Anthropic-RateLimit-Tokens-Limit:  80000"));
    cr_assert_eq (rl.v [SB_RL_TOKENS_LIMIT], 80000);
    cr_assert (s_header (&rl, "retry-after: 7"));
    cr_assert_eq (rl.v [SB_RL_RETRY_AFTER_S], 7);
    //  a date, a fraction, a sign, junk or too many digits: dropped
    cr_assert (s_header (&rl, "retry-after: Wed, 21 Oct 2015 07:28:00 GMT"));
    cr_assert_eq (rl.v [SB_RL_RETRY_AFTER_S], -1);
    cr_assert (s_header (&rl, "x-ratelimit-limit-tokens: 1.5"));
    cr_assert_eq (rl.v [SB_RL_TOKENS_LIMIT], -1);
    cr_assert (s_header (&rl, "x-ratelimit-limit-requests: -3"));
    cr_assert_eq (rl.v [SB_RL_REQUESTS_LIMIT], -1);
    cr_assert (s_header (&rl, "x-ratelimit-remaining-tokens: 99999999999999999999"));
    cr_assert_eq (rl.v [SB_RL_TOKENS_REMAINING], -1);
    cr_assert (s_header (&rl, "x-ratelimit-remaining-tokens: 1000000000000"));
    cr_assert_eq (rl.v [SB_RL_TOKENS_REMAINING], 1000000000000ll);
    cr_assert (s_header (&rl, "x-ratelimit-remaining-tokens: 1000000000001"));
    cr_assert_eq (rl.v [SB_RL_TOKENS_REMAINING], -1);
    cr_assert (s_header (&rl, "x-ratelimit-remaining-requests:"));
    cr_assert_eq (rl.v [SB_RL_REQUESTS_REMAINING], -1);
    //  other headers, and a reset time OpenAI sends as "6m0s", are not kept
    cr_assert_not (s_header (&rl, "x-ratelimit-reset-requests: 6m0s"));
    cr_assert_not (s_header (&rl, "content-type: text/event-stream"));
    cr_assert_not (s_header (&rl, "no colon here"));
    cr_assert_not (s_header (&rl, "x-ratelimit-remaining-requestsX: 1"));
    cr_assert_str_eq (sb_limits_seen_key (SB_RL_REQUESTS_REMAINING), "ratelimit_requests_remaining");
}

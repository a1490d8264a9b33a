/*  bench/bench_usage.c — what accounting adds to one model call
    (docs/usage.md).

    Per call, the llm actor finds the model's price, computes the cost and
    reads the rate-limit headers of the response; the session actor adds
    the usage entry to its totals (run, session, day twice) in the append's
    transaction. Both are timed per call over 1,000 calls, in one write
    transaction as in the drain (its commit is the append's, paid anyway),
    in a fresh store under $TMPDIR (default /tmp). The budgets add, per
    call, the executor's note of the call's usage and its check of four
    budgets before the next call (none reached: the check that asks is a
    person's time), and the session actor's look at whether a budget can
    be enforced. Figure, one JSON line:
      usage.accounting   median ns per call (p99 beside), llm, session and
                         budget parts apart; baseline: one 150-byte
                         tape-shaped put timed alike, the write every call
                         makes anyway
*/
#include "actors/exec/agent.h"
#include "actors/llm/usage.h"
#include "actors/session/session_impl.h"
#include "schemas/codec.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CALLS 1000

static int64_t
s_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
s_cmp (const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return x < y ? -1 : x > y;
}

static int64_t
s_pct (int64_t *v, int n, int pct)
{
    qsort (v, (size_t) n, sizeof v [0], s_cmp);
    return v [(n - 1) * pct / 100];
}

static const char *s_headers [] = {
    "x-ratelimit-limit-requests: 10000\r\n", "x-ratelimit-remaining-requests: 9999\r\n",
    "x-ratelimit-limit-tokens: 30000000\r\n", "x-ratelimit-remaining-tokens: 29999000\r\n",
    "x-ratelimit-reset-requests: 6ms\r\n", "content-type: text/event-stream\r\n",
};

int
main (void)
{
    const char *tmp = getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
    char dir [300];
    snprintf (dir, sizeof dir, "%s/bench_usage_XXXXXX", tmp);
    if (!mkdtemp (dir)) {
        perror ("bench_usage: mkdtemp");
        return 1;
    }
    static const char *const names [] = {
        "sessions", "tape", "status", "commands", "expiry", "purge", "queue", "usage", NULL
    };
    char err [256];
    sb_store_t *store = sb_store_open (dir, names, 1, 0, err, sizeof err);
    if (!store) {
        fprintf (stderr, "bench_usage: %s\n", err);
        return 1;
    }
    //  one usage entry's body, as the executor writes it
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kuint (e, "input_tokens", 12345);
    sb_enc_kuint (e, "output_tokens", 678);
    sb_enc_kuint (e, "cached_tokens", 9000);
    sb_enc_kuint (e, "reasoning_tokens", 64);
    sb_enc_kstr (e, "provider", "openai");
    sb_enc_kstr (e, "model", "gpt-4.1-mini");
    sb_enc_kuint (e, "cost_microusd", 2345);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (data, len, NULL, 1 << 20, &verr);
    const sb_val_t *body = doc ? sb_doc_root (doc) : NULL;
    if (!body) {
        fprintf (stderr, "bench_usage: cannot decode the entry\n");
        return 1;
    }
    static self_t self;
    static int64_t llm [CALLS], session [CALLS], budget [CALLS], total [CALLS], base [CALLS];
    //  a run with all four budgets, far from reached, and its session
    static sb_exec_run_t run;
    static record_t rec = { .session_id = "01M8VDQ43QCF4KQ50SGEHCZN7X",
                            .budget = { 1000000000000ull, 1000000000000ull, 10000, 10080 } };
    for (int b = 0; b < 4; b++)
        run.budget.original [b] = run.budget.limit [b] = rec.budget [b];
    run.budget.minute_ms = 60000;
    run.budget.started_ms = sb_now_ms ();
    sb_exec_usage_t u = { .count = { 12345, 678, 9000, 64 }, .known = 15, .cost_microusd = 2345 };
    uint8_t value [150];
    memset (value, 'v', sizeof value);
    sb_txn_t txn;
    sb_txn_begin (store, &txn, true);
    int64_t cost_sum = 0;
    for (int k = 0; k < CALLS; k++) {
        self.now = 1796216688768ull + (uint64_t) k * 60000;
        char run_id [27];
        snprintf (run_id, sizeof run_id, "01M8VDQ4400V0894%010d", k / 10);
        int64_t t0 = s_ns ();
        sb_price_t price;
        sb_limits_seen_t rl;
        sb_limits_seen_clear (&rl);
        for (size_t h = 0; h < sizeof s_headers / sizeof s_headers [0]; h++)
            sb_limits_seen_header (&rl, s_headers [h], strlen (s_headers [h]));
        if (sb_price_default ("gpt-4.1-mini-2025-04-14", &price))
            cost_sum += sb_price_cost (&price, 12345, 9000, 678 + k);
        int64_t t1 = s_ns ();
        sb_session_usage_note (&self, &txn, "01M8VDQ43QCF4KQ50SGEHCZN7X", run_id, body);
        int64_t t2 = s_ns ();
        atomic_fetch_add (&run.steps, 1);
        atomic_fetch_add (&run.input_tokens, 12345);
        atomic_fetch_add (&run.output_tokens, 678);
        sb_exec_budget_note (&run, &u, true);
        sb_session_usage_budget_check (&self, &rec, body);
        if (sb_exec_budget_check (&run) != 0 || rec.budget_notice) {
            fprintf (stderr, "bench_usage: a budget far from reached stopped the run\n");
            return 1;
        }
        int64_t t2b = s_ns ();
        sb_key_t key;
        sb_key_init (&key, 'T');
        sb_key_str (&key, "01M8VDQ43QCF4KQ50SGEHCZN7X");
        sb_key_u64 (&key, (uint64_t) k + 1);
        sb_txn_put (&txn, 1, key.buf, key.len, value, sizeof value);
        int64_t t3 = s_ns ();
        llm [k] = t1 - t0;
        session [k] = t2 - t1;
        budget [k] = t2b - t2;
        total [k] = t2b - t0;
        base [k] = t3 - t2b;
    }
    int rc = sb_txn_commit (&txn);
    if (rc || cost_sum <= 0) {
        fprintf (stderr, "bench_usage: commit %d, cost %lld\n", rc, (long long) cost_sum);
        return 1;
    }
    int64_t med_llm = s_pct (llm, CALLS, 50), med_session = s_pct (session, CALLS, 50);
    int64_t med_budget = s_pct (budget, CALLS, 50);
    int64_t med_base = s_pct (base, CALLS, 50);
    int64_t med = s_pct (total, CALLS, 50), p99 = s_pct (total, CALLS, 99);
    printf ("{\"bench\":\"usage.accounting\",\"value\":%lld,\"unit\":\"ns/call\",\"p99\":%lld,"
            "\"llm_ns\":%lld,\"session_ns\":%lld,\"budget_ns\":%lld,\"baseline\":%lld,\"ratio\":%.2f,"
            "\"calls\":%d}\n",
            (long long) med, (long long) p99, (long long) med_llm, (long long) med_session, (long long) med_budget,
            (long long) med_base, med_base ? (double) med / (double) med_base : 0.0, CALLS);
    sb_doc_destroy (&doc);
    sb_enc_destroy (&e);
    sb_store_destroy (&store);
    char cmd [400];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system (cmd) == 0 ? 0 : 1;
}

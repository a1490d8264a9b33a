/*  actors/exec/compact.c — keeping a run's context within the model's
    window (docs/compaction.md).

    Before each model call the executor estimates the context's size: the
    tokens the provider reported for the previous call, plus about one
    token per four bytes of what the context gained since. Past the
    threshold (80 % of the window less the output reserve) it compacts:

      1. elide: the tool outputs older than the newest steps are cut to
         their head and tail, which costs nothing;
      2. summary: when that is not enough, the same model is asked, with
         no tools and in a request that fits the window itself, for a
         summary of the older turns.

    Either is one context.compacted entry on the tape: the context builder
    (actors/exec/context.c) applies it on every replay, so the next run,
    another executor or a restarted server sees the same context, and the
    tape itself keeps every entry. The newest steps are always kept as
    they are, and a cut never parts a tool call from its output.

    Runs on the run's thread only.
*/
#include "actors/exec/agent.h"
#include "actors/exec/context.h"
#include "actors/exec/stream.h"
#include "actors/exec/tools.h"
#include "common/log.h"
#include "schemas/vocab.h"

#include <stdlib.h>
#include <string.h>

#define ACTOR "exec"

//  The shares of the budget (the window less the output reserve), in %.
#define S_THRESHOLD_PCT  80     //  compact past this (SWITCHBOARD_COMPACT_THRESHOLD)
#define S_TARGET_PCT     50     //  an elision must bring the context below this
#define S_KEEP_PCT       25     //  the newest steps kept whole, within this
#define S_BYTES_PER_TOKEN 4
//  The summary's own output, at most.
#define S_SUMMARY_TOKENS 4096
//  The person's latest request is copied into the summary up to this.
#define S_PROMPT_COPY    (8 * 1024)

static const char s_summary_system [] =
    "You summarize the conversation of a coding agent, so that it can go on with its work "
    "after the older messages are removed from its context. Write notes for the agent, not "
    "a reply to the person.";

static const char s_summary_ask [] =
    "Summarize the conversation above so that you can continue the work from the summary "
    "alone. Keep: what the person asked for and every constraint they gave (verbatim when "
    "short); decisions taken and why; the files read, created or changed and what changed "
    "in them; commands run and the results that matter; errors met and how they were "
    "handled; and what remains to be done. Be concise and factual. Do not call tools.";

/* ------------------------------------------------------------------ */
/*  Rebuilding from the newest summary */

void
sb_exec_compact_seed (sb_exec_run_t *run, uint64_t compacted_seq)
{
    sb_context_t *ctx = run->runtime->context;
    if (!compacted_seq || sb_context_last_seq (ctx))
        return;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_kuint (e, "after_seq", compacted_seq - 1);
    sb_enc_kuint (e, "limit", 1);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "session.events", run->session_id, b, len, SB_EXEC_CALL_MS);
    sb_enc_destroy (&e);
    const sb_val_t *events = reply && !sb_msg_is_error (reply) ? sb_get_array (reply->body, "events") : NULL;
    const sb_val_t *ev = events && events->len ? sb_array_at (events, 0) : NULL;
    const sb_val_t *body = sb_get_map (ev, "body");
    const char *kind = sb_get_str (ev, "kind");
    const char *method = sb_get_str (body, "method");
    const sb_val_t *summary = sb_get (body, "summary");
    //  Anything else than the summary the record names, or one that
    //  claims to stand for entries after itself: read the tape from seq 1.
    uint64_t through = sb_get_uint (body, "through_seq", 0);
    if (kind && strcmp (kind, "context.compacted") == 0 && sb_compact_method_from_name (method) == SB_COMPACT_SUMMARY
    &&  sb_get_uint (ev, "seq", 0) == compacted_seq && summary && summary->type == SB_V_STR
    &&  through < compacted_seq
    &&  sb_context_seed (ctx, through, summary->v.s, summary->len) == 0)
        sb_info (ACTOR, "context starts from the summary at seq %llu run=%s", (unsigned long long) compacted_seq,
                 run->run_id);
    sb_msg_destroy (&reply);
}

/* ------------------------------------------------------------------ */
/*  Limits and the estimate */

void
sb_exec_compact_limits (sb_exec_run_t *run)
{
    sb_runtime_t *rt = run->runtime;
    if (rt->limits_known)
        return;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    if (rt->provider) sb_enc_kstr (e, "provider", rt->provider);
    if (rt->model) sb_enc_kstr (e, "model", rt->model);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "llm.info", run->session_id, b, len, SB_EXEC_CALL_MS);
    sb_enc_destroy (&e);
    if (reply && !sb_msg_is_error (reply)) {
        rt->context_window = sb_get_uint (reply->body, "context_window", 0);
        rt->max_output_tokens = sb_get_uint (reply->body, "max_output_tokens", 0);
    }
    else
        sb_warn (ACTOR, "llm.info failed run=%s: %s; the context window is taken as %d tokens",
                 run->run_id, reply ? sb_msg_error_message (reply) : "no reply", 128000);
    if (!rt->context_window)
        rt->context_window = 128000;
    if (!rt->max_output_tokens || rt->max_output_tokens > rt->context_window)
        rt->max_output_tokens = rt->context_window / 8;
    rt->limits_known = true;
    sb_msg_destroy (&reply);
}

//  What a request carries beyond the messages: the instructions and the
//  tool definitions, in bytes.
static size_t
s_overhead (const sb_exec_run_t *run)
{
    size_t n, bytes = 512 + (run->runtime->workspace ? strlen (run->runtime->workspace) : 0);
    const sb_tool_def_t *defs = sb_tools_list (&n);
    for (size_t k = 0; k < n; k++)
        bytes += 64 + strlen (defs [k].name) + strlen (defs [k].description) + strlen (defs [k].parameters);
    return bytes;
}

//  The tokens that `bytes` of context stand for. Calibrated by the
//  provider's count for the previous call when there is one: above the
//  bytes it counted, a token per S_BYTES_PER_TOKEN more; below, its count
//  in proportion. A provider may count far fewer tokens than bytes / 4
//  (Anthropic leaves cached tokens out of input_tokens), so the figure
//  for a smaller context is never that count less the bytes saved, which
//  would wrap below zero.
static uint64_t
s_tokens_for (const sb_exec_run_t *run, size_t bytes)
{
    const sb_runtime_t *rt = run->runtime;
    if (rt->last_input_tokens && rt->last_bytes) {
        if (bytes >= rt->last_bytes)
            return rt->last_input_tokens + (bytes - rt->last_bytes) / S_BYTES_PER_TOKEN;
        return (uint64_t) ((double) rt->last_input_tokens * (double) bytes / (double) rt->last_bytes);
    }
    return (bytes + s_overhead (run)) / S_BYTES_PER_TOKEN;
}

//  The context's estimated size in tokens.
static uint64_t
s_estimate (const sb_exec_run_t *run)
{
    return s_tokens_for (run, sb_context_bytes (run->runtime->context));
}

//  The context bytes that an estimate of `tokens` stands for: the inverse
//  of s_tokens_for.
static size_t
s_bytes_for (const sb_exec_run_t *run, uint64_t tokens)
{
    const sb_runtime_t *rt = run->runtime;
    if (rt->last_input_tokens && rt->last_bytes) {
        if (tokens <= rt->last_input_tokens)
            return (size_t) ((double) rt->last_bytes * (double) tokens / (double) rt->last_input_tokens);
        return rt->last_bytes + (size_t) ((tokens - rt->last_input_tokens) * S_BYTES_PER_TOKEN);
    }
    size_t want = (size_t) tokens * S_BYTES_PER_TOKEN, over = s_overhead (run);
    return want > over ? want - over : 0;
}

//  The tokens a call may send: the window less the output reserve. The
//  reserve is the model's output limit, but at most a quarter of the
//  window, so that a model that may write as much as it reads still gets
//  most of its window for context.
static uint64_t
s_budget (const sb_runtime_t *rt)
{
    uint64_t reserve = rt->max_output_tokens;
    if (reserve > rt->context_window / 4)
        reserve = rt->context_window / 4;
    return rt->context_window - reserve;
}

static unsigned
s_threshold_pct (void)
{
    const char *v = getenv ("SWITCHBOARD_COMPACT_THRESHOLD");
    long pct = v ? atol (v) : 0;
    return pct >= 10 && pct <= 95 ? (unsigned) pct : S_THRESHOLD_PCT;
}

/* ------------------------------------------------------------------ */
/*  The summary call */

//  Streams one llm.stream request (no tools) and gathers its text into
//  *out (malloc'd), and what it reports of its usage into *usage.
//  Returns 0; -1 with the run's status set (failed or cancelled); -2 when
//  the provider said the request overflows.
static int
s_stream_text (sb_exec_run_t *run, const uint8_t *body, size_t blen, char **out, size_t *outlen,
               sb_exec_text_usage_t *usage)
{
    sb_exec_stream_t s = { .what = "summary", .fail = "the summary call failed", .grace_ms = 0 };
    int rc = sb_exec_stream_text (run, body, blen, &s, out, outlen, usage);
    if (rc == SB_EXEC_STREAM_CANCELLED) {
        if (s.timed_out)
            sb_exec_finish_with (run, "failed", "timeout_s (%llu) exceeded while compacting",
                                 (unsigned long long) run->timeout_s);
        else
            sb_exec_finish_with (run, "cancelled", "cancelled while compacting");
        rc = -1;
    }
    return rc;
}

//  The summary request for the messages before plan->cut, cut down until
//  it fits `max_bytes`: whole first, then with every text clipped, then
//  without the oldest messages (an earlier summary is always kept).
static sb_enc_t *
s_summary_request (sb_exec_run_t *run, const sb_context_plan_t *plan, size_t max_bytes)
{
    sb_runtime_t *rt = run->runtime;
    static const size_t clips [] = { 0, 16384, 4096, 1024, 256 };
    size_t from = 0;
    for (int round = 0; round < 40; round++) {
        size_t clip = clips [round < 5 ? round : 4];
        if (round >= 5)
            from += (plan->cut - from + 1) / 2;
        if (from >= plan->cut)
            break;
        sb_enc_t *e = sb_enc_new ();
        sb_enc_map_open (e);
        if (rt->provider) sb_enc_kstr (e, "provider", rt->provider);
        if (rt->model) sb_enc_kstr (e, "model", rt->model);
        sb_enc_kstr (e, "instructions", s_summary_system);
        sb_enc_key (e, "messages");
        sb_context_encode_head (rt->context, from, plan->cut, clip, s_summary_ask, e);
        sb_enc_key (e, "options");
        sb_enc_map_open (e);
        uint64_t out = rt->max_output_tokens < S_SUMMARY_TOKENS ? rt->max_output_tokens : S_SUMMARY_TOKENS;
        sb_enc_kuint (e, "max_output_tokens", out ? out : S_SUMMARY_TOKENS);
        sb_enc_map_close (e);
        sb_enc_map_close (e);
        size_t len;
        sb_enc_data (e, &len);
        if (len <= max_bytes)
            return e;
        sb_enc_destroy (&e);
    }
    return NULL;
}

//  Asks the model for the summary of what precedes plan->cut. Returns the
//  text to store (malloc'd), or NULL with the run's status set, or NULL
//  with *overflow when even the smallest request overflowed.
static char *
s_summarize (sb_exec_run_t *run, const sb_context_plan_t *plan, uint64_t budget_tokens, bool *overflow,
             sb_exec_text_usage_t *usage)
{
    *overflow = false;
    //  The request's own size is estimated at the uncalibrated rate, and
    //  its output is reserved from the window by the budget already.
    size_t max_bytes = (size_t) budget_tokens * S_BYTES_PER_TOKEN * 9 / 10;
    for (int attempt = 0; attempt < 2; attempt++) {
        sb_enc_t *e = s_summary_request (run, plan, max_bytes);
        if (!e) {
            sb_exec_finish_with (run, "failed", "the older turns cannot be summarized within the model's "
                                 "context window (%llu tokens)", (unsigned long long) run->runtime->context_window);
            return NULL;
        }
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        char *text = NULL;
        size_t tlen = 0;
        sb_info (ACTOR, "summarizing run=%s messages_before=%zu request_bytes=%zu", run->run_id, plan->cut, len);
        usage->context = len / S_BYTES_PER_TOKEN;
        int rc = s_stream_text (run, b, len, &text, &tlen, usage);
        sb_enc_destroy (&e);
        //  A model call like any other: the run counts it (and its tokens)
        atomic_fetch_add (&run->steps, 1);
        if (usage->known)
            atomic_store (&run->usage_known, true);
        if (rc == 0 && tlen == 0) {
            sb_exec_finish_with (run, "failed", "the model answered the summary request with no text");
            return NULL;
        }
        if (rc == 0)
            return text;
        if (rc == -1)
            return NULL;
        //  The provider counts more tightly than we do: half the size, once.
        max_bytes /= 2;
    }
    *overflow = true;
    return NULL;
}

/* ------------------------------------------------------------------ */
/*  Compaction */

//  Appends the compaction, after the usage entry of its summary call when
//  it made one (`usage` NULL: an elision, no call).
static int
s_append_compacted (sb_exec_run_t *run, uint64_t through_seq, const char *method, const char *summary,
                    uint64_t before, uint64_t after_estimate, const sb_exec_text_usage_t *usage)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    if (usage) {
        sb_exec_entry_open (e, "usage");
        if (usage->known)
            sb_exec_usage_encode (&usage->call, e);
        sb_enc_kuint (e, "context_tokens", usage->context);
        sb_enc_kuint (e, "context_window", run->runtime->context_window);
        sb_exec_entry_close (e);
    }
    sb_exec_entry_open (e, "context.compacted");
    sb_enc_kuint (e, "through_seq", through_seq);
    sb_enc_kstr (e, "summary", summary ? summary : "");
    sb_enc_kuint (e, "tokens_before", before);
    sb_enc_kuint (e, "tokens_after", after_estimate);
    sb_enc_kstr (e, "method", method);
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
    int rc = sb_exec_append (run, e);
    sb_enc_destroy (&e);
    if (rc)
        return -1;
    if (usage) {
        atomic_fetch_add (&run->input_tokens, usage->in);
        atomic_fetch_add (&run->output_tokens, usage->out);
        sb_exec_budget_note (run, &usage->call, usage->known);
    }
    run->compacted_after = after_estimate;
    //  The provider's count was for the context before: no longer a base.
    run->runtime->last_input_tokens = 0;
    return sb_exec_catch_up (run);
}

//  The summary to store: the model's, and the person's newest request
//  before the cut word for word (cut to S_PROMPT_COPY), so that the goal
//  survives even a summary that lost it.
static char *
s_summary_text (sb_exec_run_t *run, const sb_context_plan_t *plan, const char *model_text)
{
    size_t plen = 0;
    const char *prompt = sb_context_last_prompt (run->runtime->context, plan->cut, &plen);
    size_t mlen = strlen (model_text);
    if (plen > S_PROMPT_COPY)
        plen = S_PROMPT_COPY;
    while (plen > 0 && prompt && ((unsigned char) prompt [plen] & 0xC0) == 0x80)
        plen--;
    static const char lead [] = "\n\nThe person's latest request before this point, verbatim:\n";
    size_t cap = mlen + (prompt ? sizeof lead + plen : 0) + 1;
    if (cap > 1000 * 1000)
        return strndup (model_text, 1000 * 1000 - 1);
    char *out = malloc (cap);
    if (!out)
        return NULL;
    memcpy (out, model_text, mlen);
    size_t at = mlen;
    if (prompt) {
        memcpy (out + at, lead, sizeof lead - 1);
        at += sizeof lead - 1;
        memcpy (out + at, prompt, plen);
        at += plen;
    }
    out [at] = 0;
    return out;
}

int
sb_exec_compact (sb_exec_run_t *run, sb_compact_mode_t mode, bool *did)
{
    *did = false;
    sb_runtime_t *rt = run->runtime;
    sb_exec_compact_limits (run);
    uint64_t budget = s_budget (rt);
    uint64_t threshold = budget * s_threshold_pct () / 100;
    uint64_t est = s_estimate (run);
    run->ctx_estimate = est;
    if (mode == SB_COMPACT_AUTO && est <= threshold)
        return 0;
    //  After an overflow the estimate was too low: aim below it.
    uint64_t target = budget * S_TARGET_PCT / 100;
    if (mode == SB_COMPACT_HARD && target > est / 2)
        target = est / 2;
    size_t keep = (size_t) (budget * S_KEEP_PCT / 100) * S_BYTES_PER_TOKEN;
    if (mode == SB_COMPACT_HARD && keep > (size_t) target * S_BYTES_PER_TOKEN / 2)
        keep = (size_t) target * S_BYTES_PER_TOKEN / 2;
    sb_context_plan_t plan;
    int prc = sb_context_plan (rt->context, keep, &plan);
    uint64_t kept_tokens = (plan.kept_bytes + s_overhead (run)) / S_BYTES_PER_TOKEN;
    //  Nothing older to compact, or the newest step alone is too big:
    //  only a turn that cannot fit fails the run.
    if (kept_tokens > budget || (prc != 0 && mode != SB_COMPACT_MANUAL && est > budget)) {
        if (prc != 0 && est > kept_tokens)
            kept_tokens = est;  //  the newest turn is the whole context: the provider's count
        sb_exec_finish_with (run, "failed",
                             "the newest turn alone (about %llu tokens) does not fit the model's context window "
                             "(%llu tokens, %llu of them for the context); shorten the prompt or the tool output, "
                             "or use a model with a larger window",
                             (unsigned long long) kept_tokens, (unsigned long long) rt->context_window,
                             (unsigned long long) budget);
        return -1;
    }
    if (prc != 0)
        return 0;               //  nothing to compact (after an overflow the caller says why)
    size_t target_bytes = s_bytes_for (run, target);
    bool elide = plan.elidable > 0
              && (mode != SB_COMPACT_MANUAL || !plan.summarizable)
              && (plan.elided_bytes <= target_bytes || !plan.summarizable);
    if (elide) {
        uint64_t after = s_tokens_for (run, plan.elided_bytes);
        sb_info (ACTOR, "compacting run=%s method=elide tokens=%llu->%llu through_seq=%llu", run->run_id,
                 (unsigned long long) est, (unsigned long long) after, (unsigned long long) plan.through_seq);
        if (s_append_compacted (run, plan.through_seq, "elide", NULL, est, after, NULL))
            return -1;
        *did = true;
        run->ctx_estimate = s_estimate (run);
        //  Enough, or the summary is next.
        bool enough = mode == SB_COMPACT_HARD ? run->ctx_estimate <= target : run->ctx_estimate <= threshold;
        if (enough || mode == SB_COMPACT_MANUAL)
            return 0;
        if (sb_context_plan (rt->context, keep, &plan) != 0 || !plan.summarizable)
            return 0;
        est = run->ctx_estimate;
    }
    if (!plan.summarizable)
        return 0;
    bool overflow;
    sb_exec_text_usage_t usage = { 0 };
    char *text = s_summarize (run, &plan, budget, &overflow, &usage);
    if (!text) {
        if (overflow)
            sb_exec_finish_with (run, "failed", "the summary request overflowed the model's context window twice: %s",
                                 run->overflow_msg);
        return -1;
    }
    char *summary = s_summary_text (run, &plan, text);
    free (text);
    if (!summary) {
        sb_exec_finish_with (run, "failed", "out of memory");
        return -1;
    }
    //  The same count as the estimate's, so that before and after compare
    uint64_t after = s_tokens_for (run, plan.kept_bytes + strlen (summary));
    sb_info (ACTOR, "compacting run=%s method=summary tokens=%llu->%llu through_seq=%llu", run->run_id,
             (unsigned long long) est, (unsigned long long) after, (unsigned long long) plan.through_seq);
    int rc = s_append_compacted (run, plan.through_seq, "summary", summary, est, after, &usage);
    free (summary);
    if (rc)
        return -1;
    *did = true;
    run->ctx_estimate = s_estimate (run);
    return 0;
}

int
sb_exec_compact_overflow (sb_exec_run_t *run)
{
    if (run->overflow) {
        sb_exec_finish_with (run, "failed", "the conversation does not fit the model's context window even "
                             "after compaction; the window is taken as %llu tokens: if the model's is smaller, "
                             "give it with --context-window or the providers file (the provider said: %s)",
                             (unsigned long long) run->runtime->context_window, run->overflow_msg);
        return -1;
    }
    run->overflow = true;
    sb_info (ACTOR, "context overflow run=%s: compacting harder and retrying once", run->run_id);
    bool did;
    if (sb_exec_compact (run, SB_COMPACT_HARD, &did))
        return -1;
    if (!did) {
        sb_exec_finish_with (run, "failed", "the provider says the request is longer than the model's context "
                             "window, and nothing older can be compacted: %s", run->overflow_msg);
        return -1;
    }
    return 0;
}

void
sb_exec_compact_run (sb_exec_run_t *run)
{
    bool did;
    sb_exec_compact_limits (run);
    if (sb_exec_compact (run, SB_COMPACT_MANUAL, &did))
        return;
    uint64_t window = run->runtime->context_window;
    //  One figure after, the one the context.compacted entry says
    if (did) {
        sb_exec_finish_with (run, "completed", "compacted: about %llu tokens now, of a %llu-token window",
                             (unsigned long long) run->compacted_after, (unsigned long long) window);
        return;
    }
    //  Nothing went: say which of the two reasons is true
    sb_context_plan_t plan;
    uint64_t now = run->ctx_estimate, keep = s_budget (run->runtime) * S_KEEP_PCT / 100;
    if (sb_context_plan (run->runtime->context, (size_t) keep * S_BYTES_PER_TOKEN, &plan) == 0)
        sb_exec_finish_with (run, "completed", "nothing to compact: what precedes the recent turns is a summary "
                             "already (the context is about %llu tokens)", (unsigned long long) now);
    else
    if (sb_context_plan (run->runtime->context, 0, &plan) != 0)
        sb_exec_finish_with (run, "completed", "nothing to compact: the context holds only the newest turn "
                             "(about %llu tokens)", (unsigned long long) now);
    else
        sb_exec_finish_with (run, "completed", "nothing to compact: the whole context (about %llu tokens) fits "
                             "in the recent turns that are always kept as they are (up to about %llu tokens of a "
                             "%llu-token window)", (unsigned long long) now,
                             (unsigned long long) keep, (unsigned long long) window);
}

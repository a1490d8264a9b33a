/*  actors/exec/model.c — one model call of a run: the llm.stream request
    built from the context, the streamed chunks gathered into a step, and
    the step recorded on the tape.
*/
#include "actors/exec/agent.h"
#include "actors/exec/context.h"
#include "actors/exec/tools.h"
#include "actors/exec/mcp.h"
#include "actors/exec/stream.h"
#include "actors/exec/blobs.h"

/* llm.stream takes at most this many tools (schemas/types_llm.c) */
#define SB_EXEC_MODEL_TOOLS_MAX 256
#include "common/log.h"
#include "schemas/types.h"
#include "schemas/vocab.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/*  One model call */

void
sb_exec_step_clear (sb_exec_step_t *s)
{
    for (int k = 0; k < s->ncalls; k++)
        free (s->calls [k].arguments);
    for (int k = 0; k < s->nstates; k++)
        free (s->states [k]);
    free (s->text);
    memset (s, 0, sizeof *s);
}

static void
s_encode_tools (sb_exec_run_t *run, sb_enc_t *e)
{
    size_t n;
    const sb_tool_def_t *defs = sb_tools_list (&n);
    sb_enc_key (e, "tools");
    sb_enc_array_open (e);
    for (size_t k = 0; k < n; k++) {
        sb_enc_map_open (e);
        sb_enc_kstr (e, "name", defs [k].name);
        sb_enc_kstr (e, "description", defs [k].description);
        sb_enc_kstr (e, "parameters", defs [k].parameters);
        sb_enc_map_close (e);
    }
    /* then the session's MCP servers' tools (actors/exec/mcp.c) */
    const sb_mcp_set_t *mcp = run->runtime->mcp;
    size_t nm = sb_mcp_set_tool_count (mcp);
    for (size_t k = 0; k < nm && n + k < SB_EXEC_MODEL_TOOLS_MAX; k++) {
        const char *name, *desc, *params;
        sb_mcp_set_tool (mcp, k, &name, &desc, &params);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "name", name);
        sb_enc_kstr (e, "description", desc);
        sb_enc_kstr (e, "parameters", params);
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
}

/*  Whether another call of the session, or an earlier one of this step,
    holds the id `call` now has. */
static bool
s_id_taken (sb_exec_run_t *run, const sb_exec_step_t *step, const sb_exec_call_t *call)
{
    if (sb_context_has_call_id (run->runtime->context, call->call_id))
        return true;
    for (const sb_exec_call_t *c = step->calls; c < call; c++)
        if (strcmp (c->call_id, call->call_id) == 0)
            return true;
    return false;
}

/*  The usage chunk of a model call: the counts the provider reported (an
    absent one stays unknown), who answered, the cost, the rate limits. */
static const char *s_counts [4] = { "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens" };
static const char *s_ratelimit_keys [] = { SB_RATELIMIT_KEYS };

void
sb_exec_usage_take (sb_exec_usage_t *u, const sb_val_t *c)
{
    for (int k = 0; k < 4; k++)
        if (sb_get (c, s_counts [k])) {
            u->count [k] += sb_get_uint (c, s_counts [k], 0);
            u->known |= 1u << k;
        }
    const char *p = sb_get_str (c, "provider"), *m = sb_get_str (c, "model");
    if (p)
        snprintf (u->provider, sizeof u->provider, "%s", p);
    if (m)
        snprintf (u->model, sizeof u->model, "%s", m);
    u->cost_microusd = sb_get (c, "cost_microusd") ? (int64_t) sb_get_uint (c, "cost_microusd", 0) : -1;
    for (int k = 0; k < SB_RATELIMIT_NKEYS; k++)
        u->ratelimit [k] = sb_get (c, s_ratelimit_keys [k]) ? (int64_t) sb_get_uint (c, s_ratelimit_keys [k], 0) : -1;
}

void
sb_exec_usage_encode (const sb_exec_usage_t *u, sb_enc_t *e)
{
    for (int k = 0; k < 4; k++)
        if (u->known & (1u << k))
            sb_enc_kuint (e, s_counts [k], u->count [k]);
    sb_enc_kstr_opt (e, "provider", u->provider [0] ? u->provider : NULL);
    sb_enc_kstr_opt (e, "model", u->model [0] ? u->model : NULL);
    if (u->cost_microusd >= 0)
        sb_enc_kuint (e, "cost_microusd", (uint64_t) u->cost_microusd);
    for (int k = 0; k < SB_RATELIMIT_NKEYS; k++)
        if (u->ratelimit [k] >= 0)
            sb_enc_kuint (e, s_ratelimit_keys [k], (uint64_t) u->ratelimit [k]);
}

static void
s_call_usage (sb_exec_step_t *step, const sb_val_t *c)
{
    step->usage = true;
    sb_exec_usage_take (&step->call_usage, c);
    step->in_tokens = step->call_usage.count [0];
    step->out_tokens = step->call_usage.count [1];
    step->cached_tokens = step->call_usage.count [2];
    step->reasoning_tokens = step->call_usage.count [3];
}

/*  Gives a call an id unique in the session: the provider's own when no
    other call holds it, else that id with _2, _3... (the scheme the
    context's repairs use, actors/exec/context.h). Some local servers send
    call_0 at every turn, and every provider refuses a conversation that
    repeats an id, so a repeat on the tape would fail every later request
    of the session. The tape keeps the unique id, and the provider's
    beside it when they differ; the model is shown the unique one, in the
    call and in its output alike. */
static void
s_unique_call_id (sb_exec_run_t *run, sb_exec_step_t *step, sb_exec_call_t *call, const char *given)
{
    snprintf (call->provider_id, sizeof call->provider_id, "%s", given ? given : "");
    size_t glen = strlen (call->provider_id);
    if (glen && glen <= SB_EXEC_CALL_ID_MAX) {
        snprintf (call->call_id, sizeof call->call_id, "%s", call->provider_id);
        if (!s_id_taken (run, step, call))
            return;
    }
    const char *base = glen ? call->provider_id : "call";
    for (unsigned n = 2; ; n++) {
        snprintf (call->call_id, sizeof call->call_id, "%.100s_%u", base, n);
        if (!s_id_taken (run, step, call))
            return;
    }
}

static void
s_on_chunk (sb_exec_run_t *run, sb_exec_step_t *step, const sb_val_t *c)
{
    const char *kind = sb_get_str (c, "kind");
    if (!kind)
        return;
    if (strcmp (kind, "text") == 0 || strcmp (kind, "thinking") == 0) {
        const char *t = sb_get_str (c, "text");
        size_t n = t ? strlen (t) : 0;
        if (!n)
            return;
        bool text = kind [1] == 'e';
        /* keep the order of the two kinds on the tape */
        if (text && run->thinking.len)
            sb_exec_flush_deltas (run, true);
        if (!text && run->text.len)
            sb_exec_flush_deltas (run, true);
        sb_exec_co_add (text ? &run->text : &run->thinking, t, n);
        if (text) {
            if (step->text_len + n + 1 > step->text_cap) {
                size_t cap = step->text_cap ? step->text_cap * 2 : 1024;
                while (cap < step->text_len + n + 1)
                    cap *= 2;
                char *nb = realloc (step->text, cap);
                if (!nb)
                    return;
                step->text = nb;
                step->text_cap = cap;
            }
            memcpy (step->text + step->text_len, t, n);
            step->text_len += n;
            step->text [step->text_len] = 0;
        }
    }
    else
    if (strcmp (kind, "tool_call") == 0 && step->ncalls < 64) {
        sb_exec_call_t *call = &step->calls [step->ncalls++];
        s_unique_call_id (run, step, call, sb_get_str (c, "call_id"));
        const char *name = sb_get_str (c, "name");
        snprintf (call->name, sizeof call->name, "%s", name && *name ? name : "unknown_tool");
        const char *a = sb_get_str (c, "arguments");
        call->arguments = strdup (a ? a : "{}");
    }
    else
    if (strcmp (kind, "error") == 0 && step->ncalls < 64) {
        /* an unusable call still gets a result, so the model sees why */
        sb_exec_call_t *call = &step->calls [step->ncalls++];
        s_unique_call_id (run, step, call, sb_get_str (c, "call_id"));
        const char *name = sb_get_str (c, "name");
        snprintf (call->name, sizeof call->name, "%s", name && *name ? name : "?");
        call->arguments = NULL;
    }
    else
    if (strcmp (kind, "usage") == 0)
        s_call_usage (step, c);
    else
    if (strcmp (kind, "reasoning_state") == 0 && step->nstates < 16) {
        const char *d = sb_get_str (c, "data");
        if (d)
            step->states [step->nstates++] = strdup (d);
    }
}

/*  The instructions: ours, then the project's own (actors/exec/agents_md.h). */
static void
s_encode_instructions (sb_exec_run_t *run, sb_enc_t *e)
{
    char base [8192];
    snprintf (base, sizeof base,
              "You are a coding agent working in the folder %s. Use the tools to look at and change "
              "files there; every path is relative to that folder. Work step by step, and end with a "
              "short answer that says what you did.", run->runtime->workspace);
    if (run->agents_md) {
        size_t n = strlen (base) + 2 + strlen (run->agents_md) + 1;
        char *all = malloc (n);
        if (all) {
            snprintf (all, n, "%s\n\n%s", base, run->agents_md);
            sb_enc_kstr (e, "instructions", all);
            free (all);
        }
        else
            sb_enc_kstr (e, "instructions", base);
    }
    else
        sb_enc_kstr (e, "instructions", base);
}

/*  The llm.stream request of one model call: the instructions, the
    context's messages, the tools, and what remains of the run's output
    budget. */
static sb_enc_t *
s_request (sb_exec_run_t *run)
{
    sb_runtime_t *rt = run->runtime;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    if (rt->provider) sb_enc_kstr (e, "provider", rt->provider);
    if (rt->model) sb_enc_kstr (e, "model", rt->model);
    s_encode_instructions (run, e);
    sb_enc_key (e, "messages");
    sb_context_set_blob_loader (rt->context, sb_exec_blob_load, run);
    sb_context_encode (rt->context, e);
    sb_mcp_set_refresh (rt->mcp, run->cancel_fd);
    s_encode_tools (run, e);
    if (run->max_output_tokens) {
        uint64_t used = atomic_load (&run->output_tokens);
        sb_enc_key (e, "options");
        sb_enc_map_open (e);
        sb_enc_kuint (e, "max_output_tokens", run->max_output_tokens > used ? run->max_output_tokens - used : 1);
        sb_enc_map_close (e);
    }
    sb_enc_map_close (e);
    return e;
}

/*  A chunk of the model's stream into the step (sb_exec_stream's hook). */
typedef struct {
    sb_exec_run_t *run;
    sb_exec_step_t *step;
} s_call_t;

static int
s_call_chunk (void *arg, const sb_val_t *chunk)
{
    s_call_t *call = arg;
    s_on_chunk (call->run, call->step, chunk);
    return 0;
}

/*  Streams one model call into `step`. Returns 0 when the stream ended
    (step->stop set; "cancelled" when the run was cancelled or out of
    time), -1 on failure (run status set), -2 when the provider said the
    context overflows its window (run->overflow_msg set). */
int
sb_exec_model_call (sb_exec_run_t *run, sb_exec_step_t *step)
{
    sb_runtime_t *rt = run->runtime;
    /* what this call sends, for the next call's estimate (compact.c) */
    size_t sent_bytes = sb_context_bytes (rt->context);
    sb_enc_t *e = s_request (run);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    s_call_t call = { run, step };
    /* a cancelled stream may still end within a second, with what it had */
    sb_exec_stream_t s = { .what = "model", .fail = "model call failed", .grace_ms = 1000,
                           .on_chunk = s_call_chunk, .arg = &call };
    int rc = sb_exec_stream (run, b, len, &s);
    sb_enc_destroy (&e);
    if (rc == SB_EXEC_STREAM_FAILED || rc == SB_EXEC_STREAM_OVERFLOW)
        return rc;
    snprintf (step->stop, sizeof step->stop, "%s", rc == SB_EXEC_STREAM_CANCELLED ? "cancelled" : s.stop);
    run->overflow = false;
    if (step->in_tokens) {
        rt->last_input_tokens = step->in_tokens;
        rt->last_bytes = sent_bytes;
    }
    return 0;
}

/*  Records what the model produced in this step: text.done, reasoning
    state, usage and the tool calls, in one batch. */
int
sb_exec_record_step (sb_exec_run_t *run, sb_exec_step_t *step)
{
    /* a stream cancelled before it produced anything leaves nothing to
       record, and the session refuses an empty batch */
    if (!step->text_len && !step->nstates && !step->usage && !step->ncalls && sb_stop_reason_from_name (step->stop) == SB_STOP_CANCELLED)
        return 0;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    if (step->text_len) {
        sb_exec_entry_open (e, "text.done");
        sb_enc_kstr (e, "text", step->text);
        sb_exec_entry_close (e);
    }
    for (int k = 0; k < step->nstates; k++) {
        sb_exec_entry_open (e, "reasoning.state");
        sb_enc_kstr (e, "provider", run->runtime->provider ? run->runtime->provider : "default");
        sb_enc_kstr (e, "data", step->states [k]);
        sb_exec_entry_close (e);
    }
    {
        /* one per model call, so that a transcript counts the calls; the
           tokens only when the provider reported them (else unknown) */
        sb_exec_entry_open (e, "usage");
        if (step->usage) {
            sb_exec_usage_encode (&step->call_usage, e);
            atomic_store (&run->usage_known, true);
        }
        if (run->runtime->context_window) {
            sb_enc_kuint (e, "context_tokens", run->ctx_estimate);
            sb_enc_kuint (e, "context_window", run->runtime->context_window);
        }
        sb_exec_entry_close (e);
    }
    for (int k = 0; k < step->ncalls; k++) {
        sb_exec_entry_open (e, "tool.call");
        sb_enc_kstr (e, "call_id", step->calls [k].call_id);
        if (strcmp (step->calls [k].provider_id, step->calls [k].call_id) != 0)
            sb_enc_kstr (e, "provider_call_id", step->calls [k].provider_id);
        sb_enc_kstr (e, "name", step->calls [k].name);
        sb_enc_kstr (e, "arguments", step->calls [k].arguments ? step->calls [k].arguments : "{}");
        sb_exec_entry_close (e);
    }
    sb_enc_array_close (e);
    int rc = sb_exec_append (run, e);
    sb_enc_destroy (&e);
    atomic_fetch_add (&run->input_tokens, step->in_tokens);
    atomic_fetch_add (&run->output_tokens, step->out_tokens);
    sb_exec_budget_note (run, &step->call_usage, step->usage);
    return rc;
}

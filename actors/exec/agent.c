/*  actors/exec/agent.c — the thread of one run: heartbeats that keep the
    lease alive even while a tool blocks, the runtime and context brought
    up to date from the tape, the agent loop, its tools, and the report.

    Cancel reaches a run through an eventfd: the actor writes it on
    exec.cancel, the heartbeat thread writes it when a heartbeat reply says
    cancel_requested, and the tool runner and the model stream both poll
    it.
*/
#include "actors/exec/agent.h"
#include "actors/exec/blobs.h"
#include "actors/exec/changes.h"
#include "actors/exec/approval.h"
#include "actors/exec/context.h"
#include "actors/exec/mcp.h"
#include "actors/exec/policy.h"
#include "actors/exec/tools.h"
#include "common/log.h"
#include "schemas/vocab.h"

#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>

#define ACTOR "exec"

/* ------------------------------------------------------------------ */
/*  Heartbeats */

/*  One heartbeat on `bus`, answered before it returns. A reply that says
    the run is no longer ours, or that a cancel is pending, trips the
    cancel eventfd. */
static void
s_heartbeat (sb_exec_run_t *run, sb_bus_t *bus, sb_enc_t *e)
{
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kuint (e, "fence", run->fence);
    sb_enc_kstr (e, "phase", sb_run_phase_name ((sb_run_phase_t) atomic_load (&run->phase)));
    sb_enc_kuint (e, "steps", atomic_load (&run->steps));
    if (atomic_load (&run->usage_known)) {
        sb_enc_kuint (e, "input_tokens", atomic_load (&run->input_tokens));
        sb_enc_kuint (e, "output_tokens", atomic_load (&run->output_tokens));
    }
    if (run->worker_id)
        sb_enc_kstr (e, "worker_id", run->worker_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (bus, "run.heartbeat", run->session_id, b, len, SB_EXEC_HEARTBEAT_MS);
    if (reply && sb_msg_is_error (reply)) {
        if (sb_exec_err_lost (sb_err_from_name (sb_msg_error_code (reply)))) {
            /* the run is no longer ours: stop without writing */
            atomic_store (&run->lost, true);
            eventfd_write (run->cancel_fd, 1);
        }
    }
    else
    if (reply && sb_get_bool (reply->body, "cancel_requested", false))
        eventfd_write (run->cancel_fd, 1);
    sb_msg_destroy (&reply);
}

/*  A worker's run bus gone on through another node (its node died): a
    heartbeat there first, before what the run sends next, since that
    node's broker learns the worker's claim from its reply (bus/curve.h). */
static void
s_heartbeat_on_failover (sb_bus_t *bus, void *arg)
{
    sb_exec_run_t *run = arg;
    sb_enc_t *e = sb_enc_new ();
    if (e)
        s_heartbeat (run, bus, e);
    sb_enc_destroy (&e);
}

static void *
s_heartbeat_thread (void *arg)
{
    sb_exec_run_t *run = arg;
    char name [200];
    snprintf (name, sizeof name, "%s-hb", run->instance);
    sb_bus_t *bus = sb_bus_new (run->endpoint, name);
    sb_enc_t *e = sb_enc_new ();
    while (bus && e) {
        struct pollfd p = { run->hb_stop_fd, POLLIN, 0 };
        if (poll (&p, 1, run->hb_ms > 0 ? run->hb_ms : SB_EXEC_HEARTBEAT_MS) > 0)
            break;
        s_heartbeat (run, bus, e);
    }
    sb_enc_destroy (&e);
    sb_bus_destroy (&bus);
    return NULL;
}

/* ------------------------------------------------------------------ */
/*  The runtime: workspace, config and the model context from the tape */

/*  Counts a model call of this run that the tape holds (its usage entry):
    a run that waited for an approval across a restart made them under
    the executor before this one. */
static void
s_count_call (sb_exec_run_t *run, const sb_val_t *ev)
{
    const char *kind = sb_get_str (ev, "kind");
    const char *rid = sb_get_str (ev, "run_id");
    if (!kind || strcmp (kind, "usage") != 0 || !rid || strcmp (rid, run->run_id) != 0)
        return;
    const sb_val_t *body = sb_get_map (ev, "body");
    run->tape_steps++;
    run->tape_in += sb_get_uint (body, "input_tokens", 0);
    run->tape_out += sb_get_uint (body, "output_tokens", 0);
    if (sb_get (body, "input_tokens"))
        atomic_store (&run->usage_known, true);
    //  its cost, for the budgets (actors/exec/budget.c)
    sb_exec_usage_t u;
    memset (&u, 0, sizeof u);
    sb_exec_usage_take (&u, body);
    sb_exec_budget_note (run, &u, u.known != 0);
}

/*  Takes what the tape says the run made before, when that is more than
    the run's record said (whose figures may predate a crash). */
static void
s_count_done (sb_exec_run_t *run)
{
    run->counting = false;
    if (run->tape_steps > atomic_load (&run->steps))
        atomic_store (&run->steps, run->tape_steps);
    if (run->tape_in > atomic_load (&run->input_tokens))
        atomic_store (&run->input_tokens, run->tape_in);
    if (run->tape_out > atomic_load (&run->output_tokens))
        atomic_store (&run->output_tokens, run->tape_out);
}

/*  A digest of the session record's context_cuts (0: none): a cached
    context built under other cuts is built again, since a cut (or its
    undo) changes entries it has taken in already. */
static uint64_t
s_cuts_sig (const sb_val_t *cuts, uint64_t *after, uint64_t *before, size_t *n)
{
    uint64_t h = 0;
    *n = 0;
    for (uint32_t k = 0; cuts && k < cuts->len && *n < SB_CONTEXT_CUTS_MAX; k++) {
        const sb_val_t *c = sb_array_at (cuts, k);
        after [*n] = sb_get_uint (c, "after", 0);
        before [*n] = sb_get_uint (c, "before", 0);
        h = (h ^ after [*n]) * 1099511628211ull;
        h = (h ^ before [*n]) * 1099511628211ull;
        (*n)++;
    }
    return *n ? h | 1 : 0;
}

/*  Reads the tape after what the context has seen. */
static int
s_catch_up (sb_exec_run_t *run)
{
    sb_context_t *ctx = run->runtime->context;
    while (true) {
        sb_enc_t *e = sb_enc_new ();
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", run->session_id);
        sb_enc_kuint (e, "after_seq", sb_context_last_seq (ctx));
        sb_enc_kuint (e, "limit", 5000);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *reply = sb_bus_call (run->bus, "session.events", run->session_id, b, len, SB_EXEC_CALL_MS);
        sb_enc_destroy (&e);
        if (!reply || sb_msg_is_error (reply)) {
            sb_exec_finish_with (run, "failed", "cannot read the tape: %s", reply ? sb_msg_error_message (reply) : "no reply");
            sb_msg_destroy (&reply);
            return -1;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        for (uint32_t k = 0; events && k < events->len; k++) {
            if (run->counting)
                s_count_call (run, sb_array_at (events, k));
            /* the run's budget warnings, raises and questions (budget.c) */
            sb_exec_budget_feed (run, sb_array_at (events, k));
            /* approvals and unanswered calls, as the tape says (actors/exec/policy.h);
               not those a rewind cut from the conversation */
            if (!sb_context_is_cut (ctx, sb_get_uint (sb_array_at (events, k), "seq", 0)))
                sb_policy_feed (run->runtime->policy, sb_array_at (events, k), run->runtime->workspace);
            if (sb_context_add (ctx, sb_array_at (events, k)) != 0) {
                sb_exec_finish_with (run, "failed", "the conversation is too large for the model context");
                sb_msg_destroy (&reply);
                return -1;
            }
        }
        bool more = sb_get_bool (reply->body, "more", false);
        sb_msg_destroy (&reply);
        if (!more)
            return 0;
    }
}

int
sb_exec_catch_up (sb_exec_run_t *run)
{
    return s_catch_up (run);
}

static int
s_prepare (sb_exec_run_t *run)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "session.get", run->session_id, b, len, SB_EXEC_CALL_MS);
    sb_enc_destroy (&e);
    if (!reply || sb_msg_is_error (reply)) {
        sb_exec_finish_with (run, "failed", "cannot read the session: %s", reply ? sb_msg_error_message (reply) : "no reply");
        sb_msg_destroy (&reply);
        return -1;
    }
    const sb_val_t *rec = sb_get_map (reply->body, "session");
    const char *ws = run->workspace ? run->workspace : sb_get_str (rec, "workspace");
    uint64_t version = sb_get_uint (rec, "config_version", 0);
    uint64_t cut_after [SB_CONTEXT_CUTS_MAX], cut_before [SB_CONTEXT_CUTS_MAX];
    size_t ncuts;
    uint64_t cuts = s_cuts_sig (sb_get_array (rec, "context_cuts"), cut_after, cut_before, &ncuts);
    if (run->runtime && (!sb_runtime_matches (run->runtime, ws, version) || run->runtime->cuts_sig != cuts))
        sb_runtime_destroy (&run->runtime);     /* the workspace, config or conversation's cuts changed */
    if (!run->runtime) {
        run->runtime = sb_runtime_new (run->session_id);
        if (!run->runtime) {
            sb_msg_destroy (&reply);
            sb_exec_finish_with (run, "failed", "out of memory");
            return -1;
        }
    }
    sb_runtime_t *rt = run->runtime;
    if (!sb_context_last_seq (rt->context) && sb_context_set_cuts (rt->context, cut_after, cut_before, ncuts) == 0)
        rt->cuts_sig = cuts;
    if (!rt->workspace && sb_runtime_set_workspace (rt, ws) != 0) {
        sb_exec_finish_with (run, "failed", "the workspace %s is not usable", ws ? ws : "(none)");
        sb_msg_destroy (&reply);
        return -1;
    }
    /* what the changes panel compares with: the work tree as the
       session's first run found it (actors/exec/changes.h) */
    if (!rt->baseline_checked) {
        sb_exec_diff_baseline (ws, run->data_dir, run->session_id);
        rt->baseline_checked = true;        /* once per session, not per run */
    }
    sb_runtime_set_config (rt, version, sb_get_str (rec, "provider"), sb_get_str (rec, "model"),
                           sb_get_str (rec, "approval_policy"), (uint32_t) sb_get_uint (rec, "max_steps", 0));
    run->network = sb_get_bool (rec, "network", false);
    run->mcp_sampling = sb_get_bool (rec, "mcp_sampling", false);
    sb_exec_compact_seed (run, sb_get_uint (rec, "compacted_seq", 0));
    if (sb_exec_approval_configure (run, rec) != 0) {
        sb_msg_destroy (&reply);
        sb_exec_finish_with (run, "failed", "out of memory");
        return -1;
    }
    sb_exec_mcp_attach (run, rec);
    sb_exec_budget_configure (run, rec);
    sb_msg_destroy (&reply);
    return s_catch_up (run);
}

/* ------------------------------------------------------------------ */
/*  Tools */

/*  Whether a tool writes files or runs commands: anything the table does
    not mark read-only. An unknown tool runs nothing. */
static bool
s_mutating (const char *name)
{
    const sb_tool_def_t *def = sb_tools_find (name);
    return def && !def->read_only;
}

/*  Whether the session offers the tool `name` to the model: a built-in
    one, or a tool of one of its MCP servers as they stand now. */
static bool
s_offered (const sb_exec_run_t *run, const char *name)
{
    if (sb_tools_find (name))
        return true;
    if (!sb_exec_mcp_is_tool (name))
        return false;
    const sb_mcp_set_t *mcp = run->runtime->mcp;
    size_t n = sb_mcp_set_tool_count (mcp);
    for (size_t k = 0; k < n; k++) {
        const char *tool, *desc, *params;
        sb_mcp_set_tool (mcp, k, &tool, &desc, &params);
        if (strcmp (tool, name) == 0)
            return true;
    }
    return false;
}

/*  What the model reads for a call to a tool the session does not offer
    (a hallucinated name, or a server of another session): the name and
    every tool it has, into out. Nothing is run, and no person is asked. */
static void
s_unknown_tool (const sb_exec_run_t *run, const char *name, char *out, size_t size)
{
    size_t n, at = 0;
    const sb_tool_def_t *defs = sb_tools_list (&n);
    int w = snprintf (out, size, "unknown tool %.64s: this session offers no tool of that name. The tools you have: ",
                      name);
    at = w > 0 && (size_t) w < size ? (size_t) w : size - 1;
    for (size_t k = 0; k < n && at < size - 1; k++) {
        w = snprintf (out + at, size - at, "%s%s", k ? ", " : "", defs [k].name);
        at = w > 0 && at + (size_t) w < size ? at + (size_t) w : size - 1;
    }
    const sb_mcp_set_t *mcp = run->runtime->mcp;
    size_t nm = sb_mcp_set_tool_count (mcp);
    for (size_t k = 0; k < nm && at < size - 1; k++) {
        const char *tool, *desc, *params;
        sb_mcp_set_tool (mcp, k, &tool, &desc, &params);
        w = snprintf (out + at, size - at, ", %s", tool);
        at = w > 0 && at + (size_t) w < size ? at + (size_t) w : size - 1;
    }
    char why [1024];
    if (at < size - 1 && sb_mcp_set_why_missing (run->runtime->mcp, name, why, sizeof why) == 0)
        snprintf (out + at, size - at, ". (%s)", why);
    else
    if (at < size - 1)
        snprintf (out + at, size - at, ".");
}

static int
s_run_tool (sb_exec_run_t *run, const sb_exec_call_t *call)
{
    bool offered = s_offered (run, call->name);
    /* an MCP tool is never read-only, whatever its server says; a tool
       that does not exist changes nothing */
    bool mutating = offered && (s_mutating (call->name) || sb_exec_mcp_is_tool (call->name));
    sb_tool_result_t res;
    memset (&res, 0, sizeof res);
    res.exit_code = -1;
    const char *refusal = NULL;
    char unknown [8192];
    /* the policy decides, and may ask a person (actors/exec/approval.c),
       but only about a tool that exists */
    sb_gate_verdict_t v = { .gate = SB_GATE_RUN };
    if (!offered) {
        s_unknown_tool (run, call->name, unknown, sizeof unknown);
        refusal = unknown;
    }
    else
    if (!call->arguments)
        refusal = "not run: the model sent arguments that are not valid JSON";
    else
        sb_exec_approval_gate (run, call, &v);
    if (v.gate == SB_GATE_GONE) {
        sb_exec_verdict_clear (&v);
        return -1;
    }
    bool refused = v.gate != SB_GATE_RUN;
    if (refused)
        refusal = v.output;
    if (refusal) {
        res.ok = false;
        res.output = strdup (refusal);
    }
    else {
        atomic_store (&run->phase, SB_PHASE_TOOL);
        int64_t left_s = (run->deadline - sb_mono_ms ()) / 1000;
        sb_tool_ctx_t ctx = {
            .workspace = run->runtime->workspace,
            .cancel_fd = run->cancel_fd,
            .on_output = sb_exec_tool_output,
            .output_arg = run,
            .shell_timeout_s = left_s < SB_TOOLS_SHELL_TIMEOUT_S ? (int) (left_s > 0 ? left_s : 1) : 0,
            .sandbox = run->sandbox,
            .read_denied = sb_exec_approval_read_denied,
            .read_denied_arg = run,
            .network = run->network,
        };
        sb_exec_tool_output_begin (run, call->call_id);
        if (sb_exec_mcp_is_tool (call->name))
            sb_exec_mcp_call (run, call, &res);
        else
            sb_tool_run (&ctx, call->name, call->arguments, &res);
        sb_exec_tool_output_end (run);
        atomic_store (&run->phase, SB_PHASE_IDLE);
        if (mutating)
            run->touched = true;        /* the step ends with a checkpoint */
        /* the changes panel lists every file the agent wrote (changes.h) */
        if (res.ok)
            sb_exec_diff_note_write (run->runtime->workspace, run->session_id, call->name, call->arguments);
    }
    /* an MCP call the server's stop cut short leaves no result, as a
       crash would: a question it waited on is asked again after the
       start (actors/run/recover.c), and any other such call is closed as
       interrupted by the run that resumes it */
    if (atomic_load (&run->shutdown) && res.cancelled && sb_exec_mcp_is_tool (call->name)) {
        sb_tool_result_clear (&res);
        sb_exec_verdict_clear (&v);
        return -1;
    }
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    sb_exec_entry_open (e, "tool.result");
    sb_enc_kstr (e, "call_id", call->call_id);
    sb_enc_kbool (e, "ok", res.ok);
    sb_enc_kstr (e, "output", res.output ? res.output : "");
    if (res.exit_code >= 0 || res.exit_code < -1)
        sb_enc_kint (e, "exit_code", res.exit_code);
    sb_enc_kuint (e, "duration_ms", (uint64_t) (res.duration_ms > 0 ? res.duration_ms : 0));
    sb_enc_kbool (e, "mutating", mutating);
    if (refused) {
        sb_enc_kbool (e, "refused", true);
        sb_enc_kstr (e, "policy", run->policy);
        if (v.fix [0])
            sb_enc_kstr (e, "fix", v.fix);
    }
    if (v.interaction_id [0])
        sb_enc_kstr (e, "interaction_id", v.interaction_id);
    //  view_image's image (referenced for the context) or attach_file's
    //  artifact: stored, and referenced by the entry
    if (res.image)
        sb_exec_blob_attach (run, res.image, res.image_len, res.image_name,
                             res.artifact ? res.artifact_description : NULL, e);
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
    int rc = sb_exec_append (run, e);
    sb_enc_destroy (&e);
    bool cancelled = res.cancelled || v.gate == SB_GATE_CANCELLED;
    sb_tool_result_clear (&res);
    sb_exec_verdict_clear (&v);
    if (cancelled)
        sb_exec_finish_with (run, "cancelled", "cancelled during %s", call->name);
    return rc;
}

/*  A resumed run first answers the calls its predecessor left without a
    result: they are recorded as interrupted and never re-run. */
static int
s_close_unanswered (sb_exec_run_t *run)
{
    const char *ids [64], *names [64];
    size_t n = sb_context_unanswered (run->runtime->context, ids, names, 64);
    if (!n)
        return 0;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    for (size_t k = 0; k < n; k++) {
        sb_exec_entry_open (e, "tool.result");
        sb_enc_kstr (e, "call_id", ids [k]);
        sb_enc_kbool (e, "ok", false);
        sb_enc_kbool (e, "mutating", s_mutating (names [k]) || sb_exec_mcp_is_tool (names [k]));
        sb_enc_kstr (e, "output", "interrupted: the server stopped while this tool ran; it was not run again");
        sb_exec_entry_close (e);
    }
    sb_enc_array_close (e);
    int rc = sb_exec_append (run, e);
    sb_enc_destroy (&e);
    return rc ? rc : s_catch_up (run);
}

/*  A run re-queued at startup while it waited for an approval
    (actors/run/recover.c) comes back with its step's calls still without
    results: it answers them first, in order, asking again (the same
    interaction: interact.request is idempotent by run and call) and
    running each tool at most once. */
static int
s_answer_waiting (sb_exec_run_t *run)
{
    sb_policy_call_t found [64];
    size_t n = sb_policy_unanswered (run->runtime->policy, run->run_id, found, 64);
    sb_exec_call_t *calls = calloc (n ? n : 1, sizeof *calls);
    if (!calls)
        return -1;
    for (size_t k = 0; k < n && k < 64; k++) {
        snprintf (calls [k].call_id, sizeof calls [k].call_id, "%s", found [k].call_id);
        snprintf (calls [k].name, sizeof calls [k].name, "%s", found [k].name);
        calls [k].arguments = strdup (found [k].arguments);
    }
    sb_info (ACTOR, "run came back waiting for approval run=%s calls=%zu", run->run_id, n);
    for (size_t k = 0; k < n && k < 64 && !run->status [0] && !atomic_load (&run->lost); k++) {
        if (sb_exec_cancelled (run)) {
            sb_exec_finish_with (run, "cancelled", "cancelled");
            break;
        }
        s_run_tool (run, &calls [k]);
    }
    for (size_t k = 0; k < n && k < 64; k++)
        free (calls [k].arguments);
    free (calls);
    return run->status [0] || atomic_load (&run->lost) ? -1 : s_catch_up (run);
}

/* ------------------------------------------------------------------ */
/*  The agent loop */

static void
s_agent_loop (sb_exec_run_t *run)
{
    run->counting = true;
    int prc = s_prepare (run);
    s_count_done (run);
    if (prc)
        return;
    /* a rewind runs no model and no tool: it only puts the work tree back */
    if (sb_run_kind_from_name (run->kind) == SB_RUN_KIND_REWIND) {
        sb_exec_rewind_run (run);
        return;
    }
    /* calls of this very run without results: it waited for an approval;
       or its last word is a budget question (actors/exec/budget.c) */
    bool waiting = sb_policy_unanswered (run->runtime->policy, run->run_id, NULL, 0) > 0;
    bool at_budget = run->budget.asked;
    if ((!waiting && !at_budget && sb_exec_append_one (run, "turn.begin", NULL, NULL))
    ||  sb_exec_load_instructions (run) || sb_exec_mcp_start (run) || s_catch_up (run))
        return;
    if (run->resume_from [0] && s_close_unanswered (run))
        return;
    /* the work tree as the run found it, the person's edits since the
       last run included (actors/exec/checkpoint.c) */
    bool compact = sb_run_kind_from_name (run->kind) == SB_RUN_KIND_COMPACT;
    if (!compact)
        sb_exec_checkpoint (run);
    if (waiting && s_answer_waiting (run))
        return;
    if (run->touched)
        sb_exec_checkpoint (run);
    if (compact)
        sb_exec_compact_run (run);
    while (!run->status [0] && !atomic_load (&run->lost)) {
        if (sb_exec_cancelled (run)) {
            sb_exec_finish_with (run, "cancelled", "cancelled");
            break;
        }
        if (atomic_load (&run->steps) >= run->max_steps) {
            sb_exec_finish_with (run, "failed", "max_steps (%llu) reached", (unsigned long long) run->max_steps);
            break;
        }
        if (sb_mono_ms () > run->deadline) {
            sb_exec_finish_with (run, "failed", "timeout_s (%llu) exceeded", (unsigned long long) run->timeout_s);
            break;
        }
        /* the budgets, before the next model call: may ask a person */
        if (sb_exec_budget_check (run))
            break;
        /* a step boundary: steers join here (actors/exec/steer.c); then the
           context is kept within the model's window (actors/exec/compact.c) */
        bool compacted;
        if (s_catch_up (run) || (sb_exec_steer_take (run) && s_catch_up (run))
        ||  sb_exec_compact (run, SB_COMPACT_AUTO, &compacted))
            break;
        sb_exec_step_t step;
        memset (&step, 0, sizeof step);
        int rc = sb_exec_model_call (run, &step);
        atomic_fetch_add (&run->steps, 1);
        if (rc == -2) {
            /* the context overflowed the window: compact harder, retry once */
            sb_exec_step_clear (&step);
            if (sb_exec_compact_overflow (run) == 0)
                continue;
            break;
        }
        sb_stop_reason_t stop = sb_stop_reason_from_name (step.stop);
        if (rc == 0 && stop != SB_STOP_CANCELLED)
            rc = sb_exec_record_step (run, &step);
        else
        if (rc == 0)
            sb_exec_record_step (run, &step);
        if (rc != 0) {
            sb_exec_step_clear (&step);
            break;
        }
        if (stop == SB_STOP_CANCELLED || sb_exec_cancelled (run)) {
            sb_exec_finish_with (run, "cancelled", "cancelled");
            sb_exec_step_clear (&step);
            break;
        }
        if (run->max_output_tokens && atomic_load (&run->output_tokens) > run->max_output_tokens) {
            sb_exec_finish_with (run, "failed", "max_output_tokens (%llu) exceeded", (unsigned long long) run->max_output_tokens);
            sb_exec_step_clear (&step);
            break;
        }
        if (step.ncalls == 0) {
            if (stop == SB_STOP_LENGTH)
                sb_exec_finish_with (run, "failed", "the model hit its output limit (stop_reason length)");
            else
                sb_exec_finish_with (run, "completed", "%s", step.stop [0] ? step.stop : "end");
            sb_exec_step_clear (&step);
            break;
        }
        for (int k = 0; k < step.ncalls && !run->status [0] && !atomic_load (&run->lost); k++) {
            if (sb_exec_cancelled (run)) {
                sb_exec_finish_with (run, "cancelled", "cancelled");
                break;
            }
            s_run_tool (run, &step.calls [k]);
        }
        if (run->touched)
            sb_exec_checkpoint (run);
        sb_exec_step_clear (&step);
    }
    atomic_store (&run->phase, SB_PHASE_IDLE);
    if (!atomic_load (&run->lost) && !atomic_load (&run->shutdown)) {
        sb_exec_flush_deltas (run, true);
        sb_exec_append_one (run, "turn.end", NULL, NULL);
    }
}

static void
s_report (sb_exec_run_t *run)
{
    if (atomic_load (&run->lost) || atomic_load (&run->shutdown))
        return;                 /* not ours to report: recovery or the new owner decides */
    if (!run->status [0])
        sb_exec_finish_with (run, "failed", "the run stopped unexpectedly");
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kuint (e, "fence", run->fence);
    sb_enc_kstr (e, "status", run->status);
    sb_enc_kstr (e, "reason", run->reason);
    sb_enc_kuint (e, "steps", atomic_load (&run->steps));
    if (atomic_load (&run->usage_known)) {
        sb_enc_key (e, "usage");
        sb_enc_map_open (e);
        sb_enc_kuint (e, "input_tokens", atomic_load (&run->input_tokens));
        sb_enc_kuint (e, "output_tokens", atomic_load (&run->output_tokens));
        sb_enc_map_close (e);
    }
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    for (int attempt = 0; attempt < 3; attempt++) {
        sb_msg_t *reply = sb_bus_call (run->bus, run->finish_type ? run->finish_type : "run.finish",
                                       run->session_id, b, len, SB_EXEC_CALL_MS);
        bool retry = !reply || (sb_msg_is_error (reply) && sb_err_retryable (sb_err_from_name (sb_msg_error_code (reply))));
        if (reply && sb_msg_is_error (reply))
            sb_warn (ACTOR, "run.finish refused run=%s code=%s", run->run_id, sb_msg_error_code (reply));
        sb_msg_destroy (&reply);
        if (!retry)
            break;
    }
    sb_enc_destroy (&e);
}

void
sb_exec_run_free (sb_exec_run_t **run_p)
{
    sb_exec_run_t *run = *run_p;
    if (!run)
        return;
    if (run->cancel_fd >= 0)
        close (run->cancel_fd);
    if (run->hb_stop_fd >= 0)
        close (run->hb_stop_fd);
    sb_runtime_destroy (&run->runtime);
    free (run->text.buf);
    free (run->thinking.buf);
    free (run->tool_out.buf);
    free (run->agents_md);
    sb_exec_tool_output_free (run);
    sb_exec_approval_free (run);
    free (run);
    *run_p = NULL;
}

void *
sb_exec_run_thread (void *arg)
{
    sb_exec_run_t *run = arg;
    run->bus = sb_bus_new (run->endpoint, run->instance);
    sb_enc_t *e = sb_enc_new ();
    if (run->bus && run->worker_id)
        sb_bus_on_failover (run->bus, s_heartbeat_on_failover, run);
    if (run->bus && e) {
        /* The first heartbeat is answered only after the run actor has
           committed `claimed` (and this heartbeat's `running`) and put them
           on the tape, so the run's own entries, from turn.begin on, come
           after its status changes. */
        s_heartbeat (run, run->bus, e);
        if (pthread_create (&run->hb_thread, NULL, s_heartbeat_thread, run) == 0)
            run->hb_started = true;
        s_agent_loop (run);
        s_report (run);
    }
    sb_enc_destroy (&e);
    eventfd_write (run->hb_stop_fd, 1);
    if (run->hb_started)
        pthread_join (run->hb_thread, NULL);
    sb_bus_destroy (&run->bus);
    sb_info (ACTOR, "run ended run=%s status=%s reason=\"%s\" steps=%llu", run->run_id,
             run->status [0] ? run->status : "-", run->reason, (unsigned long long) atomic_load (&run->steps));
    run->on_end (run);
    return NULL;
}

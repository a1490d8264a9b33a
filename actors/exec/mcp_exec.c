/*  actors/exec/mcp_exec.c — a run's side of the MCP client: the session's
    set of servers kept in its runtime, started at the run's start (a note
    on the tape for each server that cannot start), and one tool call.
    See actors/exec/mcp.h and docs/mcp.md.
*/
#include "actors/exec/agent.h"
#include "actors/exec/approval.h"
#include "actors/exec/mcp.h"
#include "actors/exec/mcp_elicit.h"
#include "common/log.h"
#include "schemas/interaction.h"
#include "schemas/vocab.h"

#include <string.h>

#define ACTOR "exec"

/*  The run and the call of this thread's MCP tool call, for the elicitor:
    a server's elicitation/create comes in the middle of it, on this
    thread (each run has its own). */
static __thread sb_exec_run_t *s_run;
static __thread const sb_exec_call_t *s_call;
static __thread unsigned s_asked;       /* questions the current call asked so far */
static __thread bool s_gone;            /* a question of it was left unanswered by the server's stop */

void
sb_exec_mcp_attach (sb_exec_run_t *run, const sb_val_t *rec)
{
    sb_runtime_t *rt = run->runtime;
    const sb_mcp_config_t *cfg = run->mcp_config;
    if (rt->mcp || !cfg || cfg->n == 0)
        return;
    rt->mcp = sb_mcp_set_new (cfg, run->session_id, sb_get_array (rec, "mcp_servers"));
}

int
sb_exec_mcp_start (sb_exec_run_t *run)
{
    sb_runtime_t *rt = run->runtime;
    if (!rt->mcp || sb_run_kind_from_name (run->kind) == SB_RUN_KIND_COMPACT)
        return 0;               /* a compaction-only run calls no tool */
    //  Before prepare: a server started for it declares sampling or not.
    sb_mcp_set_sampler (rt->mcp, run->mcp_sampling ? sb_exec_mcp_sample : NULL, run);
    char notes [4096];
    sb_mcp_set_prepare (rt->mcp, rt->workspace, run->cancel_fd, notes, sizeof notes);
    if (!notes [0])
        return 0;
    return sb_exec_append_one (run, "note", "text", notes);
}

bool
sb_exec_mcp_is_tool (const char *name)
{
    return sb_mcp_is_tool (name);
}

void
sb_exec_mcp_call (sb_exec_run_t *run, const sb_exec_call_t *call, sb_tool_result_t *res)
{
    int64_t left = run->deadline - sb_mono_ms ();
    /* the server's progress notifications are the call's live output
       (tool.output, which follow and the UI show as it comes); the
       result arrives whole, and tool.result holds it */
    s_run = run;
    s_call = call;
    s_asked = 0;
    s_gone = false;
    sb_mcp_set_call (run->runtime->mcp, call->name, call->arguments, run->cancel_fd,
                     left > 0 ? (int) (left > 3600000 ? 3600000 : left) : 1, sb_exec_tool_output, run, res);
    /* what the server made of the cancel it heard for a question the stop
       left open is not its answer: the call is asked again after the
       start (actors/exec/agent.c leaves no result for it) */
    if (s_gone)
        res->cancelled = true;
    s_run = NULL;
    s_call = NULL;
}

/*  FNV-1a of a string, going on from h. */
static uint64_t
s_fnv (uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *) s; p && *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h * 1099511628211ull;        /* and a separator */
}

/*  The elicitor: the server's question becomes an interaction of kind
    elicitation of the run that called the tool (its message as summary,
    its checked schema), and the answer comes back as MCP's action. The
    interaction's call_id is stable: the tool call's, the question's
    number within that call, and a digest of its message and schema. A
    run re-queued at a restart while a question waited (actors/run/
    recover.c) calls the tool again, and the same question asked again
    finds the same interaction (interact.request is idempotent by run and
    call): the person's answer, given before or after the restart, is the
    one the server gets. A question that differs is a new interaction. */
static sb_mcp_elicit_action_t
s_elicitor (void *arg, const char *server, const char *message, const char *schema, char **content)
{
    sb_exec_run_t *run = s_run;
    const sb_exec_call_t *call = s_call;
    if (!run || !call) {
        sb_warn (ACTOR, "MCP server %s asked for values outside a tool call: cancelled", server);
        return SB_MCP_ELICIT_CANCEL;
    }
    char call_id [129];
    uint64_t digest = s_fnv (s_fnv (14695981039346656037ull, message), schema);
    snprintf (call_id, sizeof call_id, "elicit:%.80s:%u:%016llx", call->call_id, ++s_asked,
              (unsigned long long) digest);
    sb_sub_t *sub = sb_exec_ask_subscribe (run);
    //  default_outcome reject: nobody answered, the server hears cancel
    sb_enc_t *e = sb_exec_ask_open (run, sb_ia_kind_name (IA_KIND_ELICITATION), call_id, call->name,
                                    call->arguments ? call->arguments : "{}", message);
    sb_enc_kstr (e, "schema", schema);
    sb_enc_kstr (e, "risk", "low");
    sb_enc_map_close (e);
    sb_exec_answer_t o = { { 0 } };
    sb_ask_t asked = sb_exec_ask (run, e, sub, SB_PHASE_WAITING_APPROVAL, &o);
    sb_enc_destroy (&e);
    sb_sub_destroy (&sub);
    sb_mcp_elicit_action_t action = SB_MCP_ELICIT_CANCEL;
    if (asked == SB_ASK_RESOLVED) {
        ia_action_t a = sb_ia_action_from_name (o.action);
        action = a == IA_ACTION_ACCEPT ? SB_MCP_ELICIT_ACCEPT : a == IA_ACTION_DECLINE ? SB_MCP_ELICIT_DECLINE
               : SB_MCP_ELICIT_CANCEL;
        if (action == SB_MCP_ELICIT_ACCEPT && !(*content = strdup (o.content ? o.content : "{}")))
            action = SB_MCP_ELICIT_CANCEL;
    }
    else
    if (asked == SB_ASK_FAILED)
        sb_warn (ACTOR, "MCP server %s: cannot ask for its values run=%s code=%s message=\"%s\"", server,
                 run->run_id, sb_err_name (o.code), o.error);
    else
    if (asked == SB_ASK_GONE && atomic_load (&run->shutdown))
        s_gone = true;
    sb_info (ACTOR, "elicitation answered run=%s interaction=%s action=%s", run->run_id, o.interaction_id,
             action == SB_MCP_ELICIT_ACCEPT ? "accept" : action == SB_MCP_ELICIT_DECLINE ? "decline" : "cancel");
    sb_exec_answer_clear (&o);
    return action;
}

void
sb_exec_mcp_elicit_install (void)
{
    sb_mcp_elicit_set_elicitor (s_elicitor, NULL);
}

/*  actors/exec/mcp_exec.c — a run's side of the MCP client: the session's
    set of servers kept in its runtime, started at the run's start (a note
    on the tape for each server that cannot start), and one tool call.
    See actors/exec/mcp.h and docs/mcp.md.
*/
#include "actors/exec/agent.h"
#include "actors/exec/mcp.h"
#include "common/log.h"
#include "schemas/vocab.h"

#include <string.h>

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
    sb_mcp_set_call (run->runtime->mcp, call->name, call->arguments, run->cancel_fd,
                     left > 0 ? (int) (left > 3600000 ? 3600000 : left) : 1, sb_exec_tool_output, run, res);
}

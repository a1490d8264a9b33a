/*  schemas/types_run.c — run.* (actors/run.c) and exec.* (actors/exec.c). */
#include "schemas/types.h"

static const sb_field_t s_target [] = {
    { "executor", SB_T_ENUM, true, 16, NULL, "where it runs", ENUM (sb_executors) },
    { "pool", SB_T_STR, false, 64, NULL, "worker pool (executor worker)" },
    END
};
static const sb_field_t s_limits [] = {
    { "max_steps", SB_T_UINT, false, 0, NULL, "model calls per run (default: the session's, else 50)",
      RANGE_STEPS },
    { "timeout_s", SB_T_UINT, false, 0, NULL, "wall-clock limit of the run",
      RANGE (1, SB_RUN_TIMEOUT_MAX_S, 3600) },
    { "max_output_tokens", SB_T_UINT, false, 0, NULL, "output tokens over the whole run (0: none)",
      RANGE_COUNT },
    END
};
static const sb_field_t s_run_record [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run id" },
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "status", SB_T_STR, true, 16, NULL, "queued | claimed | running | cancelling | completed | failed | cancelled | expired | interrupted" },
    { "phase", SB_T_STR, false, 32, NULL, "what the run is doing: model | tool | waiting_approval | waiting_budget | idle" },
    { "reason", SB_T_STR, false, 1 KB, NULL, "why it reached its status" },
    { "input", SB_T_STR, false, 1 MB, NULL, "the prompt text" },
    { "target", SB_T_MAP, false, 0, s_target, "where it runs" },
    { "resume_from", SB_T_STR, false, ID_MAX, NULL, "the run this one continues" },
    { "kind", SB_T_STR, false, 16, NULL,
      "prompt (absent) | compact: compaction only (session.compact) | rewind: the work tree put back (session.rewind)" },
    { "rewind_to", SB_T_UINT, false, 0, NULL, "rewind: the seq to go back to", RANGE_COUNT },
    { "undo", SB_T_BOOL, false, 0, NULL, "rewind: undo the session's last rewind" },
    { "code", SB_T_BOOL, false, 0, NULL, "rewind: false leaves the work tree alone (absent: true)" },
    { "conversation", SB_T_BOOL, false, 0, NULL, "rewind: false leaves the model's context alone (absent: true)" },
    { "fence", SB_T_UINT, true, 0, NULL, "fencing token of the current claim (0 = none)" },
    { "owner", SB_T_STR, false, 128, NULL, "executor instance holding the lease" },
    { "approval_policy", SB_T_STR, false, 16, NULL, "yolo | auto | interactive" },
    { "limits", SB_T_MAP, false, 0, s_limits, "limits" },
    { "created_at", SB_T_UINT, true, 0, NULL, "ms since epoch" },
    { "updated_at", SB_T_UINT, true, 0, NULL, "ms since epoch" },
    { "started_at", SB_T_UINT, false, 0, NULL, "claimed at" },
    { "ended_at", SB_T_UINT, false, 0, NULL, "reached a final status at" },
    { "lease_expires_at", SB_T_UINT, false, 0, NULL, "ms since epoch" },
    { "steps", SB_T_UINT, false, 0, NULL, "model calls made" },
    { "input_tokens", SB_T_UINT, false, 0, NULL, "tokens in" },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "tokens out" },
    { "cancel_requested", SB_T_BOOL, false, 0, NULL, "a cancel is pending" },
    { "waiting_for", SB_T_STR, false, 256, NULL, "what a queued run waits for" },
    { "worker_id", SB_T_STR, false, 64, NULL, "the worker that claimed it (worker runs)" },
    { "instance_id", SB_T_STR, false, 64, NULL, "that worker's process instance" },
    END
};
static const sb_field_t s_run_one [] = {
    { "run", SB_T_MAP, true, 0, s_run_record, "the run" },
    END
};
static const sb_field_t s_run_image [] = { { "image", SB_T_MAP, false, 0, sb_blob_ref_fields, "an image" } };
static const sb_field_t s_run_request [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "input", SB_T_STR, false, 1 MB, NULL, "the prompt (appended to the tape as `prompt`)" },
    { "images", SB_T_ARRAY, false, 16, s_run_image, "the prompt's images, checked by the session service" },
    { "target", SB_T_MAP, false, 0, s_target, "default {executor: local}" },
    { "resume_from", SB_T_STR, false, ID_MAX, NULL, "continue this run (use run.resume)" },
    { "kind", SB_T_ENUM, false, 16, NULL,
      "absent: a prompt's run; compact: a run that only compacts the session's context (needs no input); "
      "rewind: a run that puts the work tree back to a checkpoint", ENUM (sb_run_kinds) },
    { "rewind_to", SB_T_UINT, false, 0, NULL, "rewind: the seq to go back to", RANGE_COUNT },
    { "undo", SB_T_BOOL, false, 0, NULL, "rewind: undo the session's last rewind instead" },
    { "code", SB_T_BOOL, false, 0, NULL, "rewind: false leaves the work tree alone (absent: true)" },
    { "conversation", SB_T_BOOL, false, 0, NULL, "rewind: false leaves the model's context alone (absent: true)" },
    { "approval_policy", SB_T_ENUM, false, 16, NULL, "override the session's policy for this run",
      ENUM (sb_policy_modes) },
    { "limits", SB_T_MAP, false, 0, s_limits, "limits" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_run_id [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run id" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_run_list [] = {
    { "session_id", SB_T_STR, false, ID_MAX, NULL, "only this session's runs" },
    { "id_prefix", SB_T_STR, false, ID_MAX, NULL, "only runs whose id starts with this" },
    { "status", SB_T_ENUM, false, 16, NULL, "only runs in this status", ENUM (sb_run_statuses) },
    { "limit", SB_T_UINT, false, 0, NULL, "at most this many runs", RANGE (1, 1000, 100) },
    END
};
static const sb_field_t s_run_item [] = { { "run", SB_T_MAP, false, 0, s_run_record, "a run" } };
static const sb_field_t s_run_list_ok [] = {
    { "runs", SB_T_ARRAY, true, 1000, s_run_item, "runs, newest first" },
    END
};
static const sb_field_t s_run_heartbeat [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run id" },
    { "fence", SB_T_UINT, true, 0, NULL, "the executor's fencing token", RANGE_COUNT },
    { "phase", SB_T_ENUM, false, 32, NULL, "what the run is doing", ENUM (sb_run_phases) },
    { "steps", SB_T_UINT, false, 0, NULL, "model calls so far", RANGE_COUNT },
    { "input_tokens", SB_T_UINT, false, 0, NULL, "tokens in so far", RANGE_COUNT },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "tokens out so far", RANGE_COUNT },
    { "worker_id", SB_T_STR, false, 64, NULL,
      "a worker's executor: the worker that holds the claim (a node that never saw the claim grants it by this)" },
    END
};
/*  The worker protocol (docs/workers.md). */
static const sb_field_t s_run_claim [] = {
    { "worker_id", SB_T_STR, true, 64, NULL, "a registered worker (worker.register)" },
    { "pool", SB_T_STR, true, 64, NULL, "claim runs targeted at this pool" },
    { "lease_s", SB_T_UINT, false, 0, NULL, "lease length", RANGE (1, 3600, 30) },
    { "wait_ms", SB_T_UINT, false, 0, NULL, "long-poll: wait up to this long for a run", RANGE (0, 60000, 0) },
    END
};
static const sb_field_t s_run_claim_ok [] = {
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "the claimed run (absent: nothing to do)" },
    { "session_id", SB_T_STR, false, ID_MAX, NULL, "its session" },
    { "fence", SB_T_UINT, false, 0, NULL, "the fencing token for every append, heartbeat and completion" },
    { "lease_expires_at", SB_T_UINT, false, 0, NULL, "ms since epoch" },
    { "lease_ms", SB_T_UINT, false, 0, NULL, "lease length" },
    { "config", SB_T_MAP, false, 0, NULL, "what exec.start carries: approval_policy, limits, resume_from" },
    END
};
static const sb_field_t s_run_heartbeat_ok [] = {
    { "cancel_requested", SB_T_BOOL, true, 0, NULL, "stop now" },
    { "lease_ms", SB_T_UINT, true, 0, NULL, "lease length" },
    { "session_id", SB_T_STR, false, ID_MAX, NULL, "the run's session" },
    END
};
static const sb_field_t s_usage [] = {
    { "input_tokens", SB_T_UINT, false, 0, NULL, "", RANGE_COUNT },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "", RANGE_COUNT },
    END
};
static const sb_field_t s_run_finish [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run id" },
    { "fence", SB_T_UINT, true, 0, NULL, "the executor's fencing token", RANGE_COUNT },
    { "status", SB_T_STR, true, 16, NULL, "completed | failed | cancelled" },
    { "reason", SB_T_STR, false, 1 KB, NULL, "why; names the limit for limit failures" },
    { "steps", SB_T_UINT, false, 0, NULL, "model calls made", RANGE_COUNT },
    { "usage", SB_T_MAP, false, 0, s_usage, "tokens" },
    END
};
static const sb_field_t s_run_complete [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run id" },
    { "fence", SB_T_UINT, true, 0, NULL, "the claim's fencing token", RANGE_COUNT },
    { "status", SB_T_STR, true, 16, NULL, "completed | failed | cancelled" },
    { "error", SB_T_STR, false, 1 KB, NULL, "why it failed" },
    { "reason", SB_T_STR, false, 1 KB, NULL, "the same as error (what run.finish calls it)" },
    { "steps", SB_T_UINT, false, 0, NULL, "model calls made", RANGE_COUNT },
    { "usage", SB_T_MAP, false, 0, s_usage, "tokens" },
    END
};
static const sb_field_t s_exec_start [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run id" },
    { "kind", SB_T_STR, false, 16, NULL,
      "prompt (default): the agent loop | compact: compaction only | rewind: the work tree put back" },
    { "rewind_to", SB_T_UINT, false, 0, NULL, "rewind: the seq to go back to", RANGE_COUNT },
    { "undo", SB_T_BOOL, false, 0, NULL, "rewind: undo the session's last rewind" },
    { "code", SB_T_BOOL, false, 0, NULL, "rewind: false leaves the work tree alone (absent: true)" },
    { "conversation", SB_T_BOOL, false, 0, NULL, "rewind: false leaves the model's context alone (absent: true)" },
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "fence", SB_T_UINT, true, 0, NULL, "fencing token for every append", RANGE_COUNT },
    { "resume_from", SB_T_STR, false, ID_MAX, NULL, "the run this one continues" },
    { "approval_policy", SB_T_STR, false, 16, NULL, "policy for this run" },
    { "limits", SB_T_MAP, false, 0, s_limits, "limits" },
    { "steps", SB_T_UINT, false, 0, NULL, "model calls the run made before this start", RANGE_COUNT },
    { "usage", SB_T_MAP, false, 0, s_usage, "tokens the run used before this start (absent: unknown)" },
    END
};
static const sb_field_t s_exec_start_ok [] = {
    { "instance", SB_T_STR, true, 128, NULL, "the executor instance that owns the run" },
    END
};
static const sb_field_t s_exec_cancel [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run id" },
    END
};
static const sb_field_t s_exec_cancel_ok [] = {
    { "found", SB_T_BOOL, true, 0, NULL, "the run was running here" },
    END
};
/* exec.mcp.list: the MCP servers (actors/exec/mcp.c, docs/mcp.md) */
static const sb_field_t s_mcp_tool [] = {
    { "name", SB_T_STR, true, 128, NULL, "mcp__<server>__<tool>, as the model sees it" },
    { "description", SB_T_STR, false, 1 KB, NULL, "what the server says it does (cut)" },
    { "read_only_hint", SB_T_BOOL, false, 0, NULL,
      "the server says it is read-only (annotations.readOnlyHint): shown, never trusted by the policies" },
    END
};
static const sb_field_t s_mcp_tool_item [] = { { "tool", SB_T_MAP, false, 0, s_mcp_tool, "a tool" } };
static const sb_field_t s_mcp_server [] = {
    { "name", SB_T_STR, true, 64, NULL, "the server's name in mcpServers" },
    { "transport", SB_T_STR, true, 16, NULL, "stdio | http" },
    { "command", SB_T_STR, false, 4 KB, NULL, "stdio: the program (its args and env are not shown)" },
    { "url", SB_T_STR, false, 4 KB, NULL, "http: the endpoint, without its query (headers are not shown)" },
    { "state", SB_T_STR, true, 16, NULL, "not started | running | failed" },
    { "sessions", SB_T_UINT, false, 0, NULL, "sessions whose copy of it runs now" },
    { "error", SB_T_STR, false, 1 KB, NULL, "failed: why (secrets redacted)" },
    { "updated_at", SB_T_UINT, false, 0, NULL, "ms since epoch of the last change" },
    { "tools", SB_T_ARRAY, false, 256, s_mcp_tool_item, "its tools, as last listed" },
    { "authorized", SB_T_BOOL, false, 0, NULL, "http: OAuth tokens are stored for it (mcp login)" },
    { "authorized_at", SB_T_UINT, false, 0, NULL, "ms since epoch the stored tokens were last saved" },
    END
};
static const sb_field_t s_mcp_server_item [] = { { "server", SB_T_MAP, false, 0, s_mcp_server, "a server" } };
static const sb_field_t s_exec_mcp_list_ok [] = {
    { "config", SB_T_STR, false, 4 KB, NULL, "the file the servers come from (empty: none)" },
    { "servers", SB_T_ARRAY, true, 64, s_mcp_server_item, "configured servers" },
    END
};
/* exec.mcp.login, exec.mcp.oauth_callback: a person connects an OAuth
   MCP server (actors/exec/mcp_login.c, docs/mcp.md) */
static const sb_field_t s_exec_mcp_login [] = {
    { "server", SB_T_STR, true, 64, NULL, "the server's name in mcpServers" },
    { "redirect_uri", SB_T_STR, true, 4 KB, NULL, "the gateway's /oauth/callback URL the browser comes back to" },
    END
};
static const sb_field_t s_exec_mcp_login_ok [] = {
    { "server", SB_T_STR, true, 64, NULL, "the server" },
    { "url", SB_T_STR, false, 16 KB, NULL, "the authorization URL the person opens (absent: authorized already, "
      "client credentials)" },
    { "expires_in_s", SB_T_UINT, false, 0, NULL, "how long the login waits for the callback" },
    END
};
static const sb_field_t s_exec_mcp_oauth_callback [] = {
    { "state", SB_T_STR, true, 64, NULL, "the state of the pending login" },
    { "code", SB_T_STR, false, 4 KB, NULL, "the authorization code" },
    { "error", SB_T_STR, false, 256, NULL, "the authorization server's refusal" },
    { "error_description", SB_T_STR, false, 1 KB, NULL, "its description (not kept)" },
    { "iss", SB_T_STR, false, 4 KB, NULL, "the issuer (RFC 9207; not used)" },
    END
};
static const sb_field_t s_exec_mcp_oauth_callback_ok [] = {
    { "server", SB_T_STR, true, 64, NULL, "the server now authorized" },
    { "authorized", SB_T_BOOL, true, 0, NULL, "true" },
    END
};
/* exec.mcp.logout: a person forgets an OAuth MCP server's tokens
   (actors/exec/mcp_oauth_revoke.c, docs/mcp.md) */
static const sb_field_t s_exec_mcp_logout [] = {
    { "server", SB_T_STR, true, 64, NULL, "the server's name in mcpServers" },
    END
};
static const sb_field_t s_exec_mcp_logout_ok [] = {
    { "server", SB_T_STR, true, 64, NULL, "the server, now logged out" },
    { "revoked", SB_T_BOOL, true, 0, NULL, "the authorization server accepted the revocation (RFC 7009)" },
    { "revocation", SB_T_STR, true, 512, NULL, "what the revocation did, or why it did not happen" },
    END
};
static const sb_field_t s_none [] = { END };
static const sb_field_t s_exec_info_ok [] = {
    { "sandbox", SB_T_STR, true, 16, NULL,
      "where tools, MCP servers and hooks run: bwrap | landlock | none (serve --sandbox; docs/sandbox.md)" },
    END
};
static const sb_field_t s_exec_diff [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "base", SB_T_STR, false, 16, NULL,
      "compare with: session (as the session's first run found the work tree) or head (git HEAD); "
      "default: session when it has one, else head" },
    END
};
static const sb_field_t s_diff_file [] = {
    { "path", SB_T_STR, true, 4 KB, NULL, "path relative to the workspace" },
    { "status", SB_T_STR, true, 16, NULL, "added | modified | deleted | renamed | changed" },
    { "old_path", SB_T_STR, false, 4 KB, NULL, "renamed: the path before" },
    { "additions", SB_T_UINT, true, 0, NULL, "lines added" },
    { "deletions", SB_T_UINT, true, 0, NULL, "lines removed" },
    { "binary", SB_T_BOOL, false, 0, NULL, "a binary file: no text diff" },
    { "diff", SB_T_STR, true, 512 KB, NULL, "the file's unified diff (git diff), cut when truncated" },
    { "truncated", SB_T_BOOL, false, 0, NULL, "the diff was cut at the per-file limit" },
    END
};
static const sb_field_t s_diff_item [] = { { "file", SB_T_MAP, false, 0, s_diff_file, "a changed file" } };
static const sb_field_t s_written_item [] = { { "", SB_T_STR, false, 4 KB, NULL, "a path relative to the workspace" } };
static const sb_field_t s_exec_diff_ok [] = {
    { "files", SB_T_ARRAY, true, 1000, s_diff_item, "changed files, by path" },
    { "truncated", SB_T_BOOL, true, 0, NULL, "files or bytes were left out (past 1000 files or 4 MiB of diff)" },
    { "git", SB_T_BOOL, true, 0, NULL, "false: the workspace is not a git work tree (or too big to stage), so no diff" },
    { "workspace", SB_T_STR, false, 4 KB, NULL, "the workspace compared" },
    { "base", SB_T_STR, false, 16, NULL,
      "what the work tree is compared with: session (as the session's first run found it) or head (git HEAD)" },
    { "session_base", SB_T_BOOL, false, 0, NULL, "the session has a baseline (its first run saved it): base session is possible" },
    { "written", SB_T_ARRAY, false, 1000, s_written_item,
      "files the session's agent wrote that show no change against the base (never hidden)" },
    END
};
static const sb_field_t s_exec_checkpoints [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "after_seq", SB_T_UINT, false, 0, NULL, "checkpoint entries with seq > after_seq", RANGE_COUNT },
    { "limit", SB_T_UINT, false, 0, NULL, "checkpoints in the page", RANGE (1, 1000, 1000) },
    END
};
static const sb_field_t s_ckpt_listed [] = {
    { "seq", SB_T_UINT, true, 0, NULL, "the checkpoint entry's seq" },
    { "ts", SB_T_UINT, true, 0, NULL, "ms since epoch" },
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "the run that took it" },
    { "checkpoint", SB_T_MAP, true, 0, NULL, "the entry's body: seq_of, tree, changed, skipped... (docs/checkpoints.md)" },
    END
};
static const sb_field_t s_ckpt_listed_item [] = { { "entry", SB_T_MAP, false, 0, s_ckpt_listed, "a checkpoint" } };
static const sb_field_t s_exec_checkpoints_ok [] = {
    { "checkpoints", SB_T_ARRAY, true, 1000, s_ckpt_listed_item, "the session's checkpoints after after_seq, in seq order" },
    { "more", SB_T_BOOL, true, 0, NULL, "the page ended at the limit or at 4 MiB: ask again after next_after" },
    { "next_after", SB_T_UINT, false, 0, NULL, "the after_seq of the next page (when more)" },
    END
};
static const sb_field_t s_exec_checkpoint_diff [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "from_seq", SB_T_UINT, true, 0, NULL,
      "the older side: the latest checkpoint at or before this seq (switchboard checkpoints lists them)", RANGE_COUNT },
    { "to_seq", SB_T_UINT, true, 0, NULL, "the newer side: the latest checkpoint at or before this seq", RANGE_COUNT },
    END
};
static const sb_field_t s_ckpt_side [] = {
    { "seq_of", SB_T_UINT, true, 0, NULL, "the checkpoint's seq_of" },
    { "tree", SB_T_STR, true, 64, NULL, "its git tree" },
    END
};
static const sb_field_t s_exec_checkpoint_diff_ok [] = {
    { "from", SB_T_MAP, true, 0, s_ckpt_side, "the checkpoint compared from" },
    { "to", SB_T_MAP, true, 0, s_ckpt_side, "the checkpoint compared to" },
    { "store", SB_T_STR, true, 16, NULL, "repository | shadow: where the trees are (docs/checkpoints.md)" },
    { "files", SB_T_ARRAY, true, 1000, s_diff_item,
      "files that differ between the two trees, paths relative to the repository's top" },
    { "truncated", SB_T_BOOL, true, 0, NULL, "files or bytes were left out (past 1000 files or 4 MiB of diff)" },
    END
};

const sb_type_t sb_types_run [] = {
    REQ ("run.request", s_run_request, SB_SCOPE_INTERNAL,
         "create a run (queued) and dispatch it (internal: clients prompt a session)"),
    REP ("run.request.ok", s_run_one, "the new run"),
    REQ ("run.get", s_run_id, SB_SCOPE_PUBLIC, "one run"),
    REP ("run.get.ok", s_run_one, "the run"),
    REQ ("run.list", s_run_list, SB_SCOPE_PUBLIC, "runs, filtered"),
    REP ("run.list.ok", s_run_list_ok, "runs"),
    REQ ("run.cancel", s_run_id, SB_SCOPE_PUBLIC,
         "cancel a run: cancelling, then cancelled once the executor confirms"),
    REP ("run.cancel.ok", s_run_one, "the run"),
    REQ ("run.resume", s_run_id, SB_SCOPE_PUBLIC,
         "a new run that continues a failed, cancelled, interrupted or expired one"),
    REP ("run.resume.ok", s_run_one, "the new run"),
    REQ ("run.heartbeat", s_run_heartbeat, SB_SCOPE_WORKER, "executor: extend the lease (internal)"),
    REP ("run.heartbeat.ok", s_run_heartbeat_ok, "lease extended"),
    REQ ("run.finish", s_run_finish, SB_SCOPE_INTERNAL, "executor: the run ended (internal)"),
    REP ("run.finish.ok", s_run_one, "the final run"),
    REQ ("run.claim", s_run_claim, SB_SCOPE_WORKER, "worker: claim the oldest queued run of a pool (long-poll)"),
    REP ("run.claim.ok", s_run_claim_ok, "a run and its lease, or {} when there is nothing to do"),
    REQ ("run.complete", s_run_complete, SB_SCOPE_WORKER, "worker: the claimed run ended"),
    REP ("run.complete.ok", s_run_one, "the final run"),
};
const size_t sb_types_run_count = sizeof sb_types_run / sizeof sb_types_run [0];

const sb_type_t sb_types_exec [] = {
    REQ ("exec.start", s_exec_start, SB_SCOPE_INTERNAL, "run actor -> executor: run the agent loop (internal)"),
    REP ("exec.start.ok", s_exec_start_ok, "accepted"),
    REQ ("exec.cancel", s_exec_cancel, SB_SCOPE_INTERNAL, "run actor -> owning executor: stop now (internal)"),
    REP ("exec.cancel.ok", s_exec_cancel_ok, "result"),
    REQ ("exec.mcp.list", s_none, SB_SCOPE_PUBLIC, "the MCP servers of the executor: state and tools (docs/mcp.md)"),
    REP ("exec.mcp.list.ok", s_exec_mcp_list_ok, "servers"),
    REQ ("exec.mcp.login", s_exec_mcp_login, SB_SCOPE_PUBLIC,
         "start connecting an OAuth MCP server: the URL for the person's browser (docs/mcp.md)"),
    REP ("exec.mcp.login.ok", s_exec_mcp_login_ok, "the URL to open"),
    REQ ("exec.mcp.oauth_callback", s_exec_mcp_oauth_callback, SB_SCOPE_PUBLIC,
         "the authorization server's redirect, from the gateway's /oauth/callback: ends a login"),
    REP ("exec.mcp.oauth_callback.ok", s_exec_mcp_oauth_callback_ok, "authorized"),
    REQ ("exec.mcp.logout", s_exec_mcp_logout, SB_SCOPE_PUBLIC,
         "forget an OAuth MCP server's tokens and its registered client, revoking the tokens first where the "
         "authorization server can (docs/mcp.md)"),
    REP ("exec.mcp.logout.ok", s_exec_mcp_logout_ok, "logged out, and whether the tokens were revoked"),
    REQ ("exec.info", s_none, SB_SCOPE_PUBLIC, "the executor's sandbox (the UI warns when it is none)"),
    REP ("exec.info.ok", s_exec_info_ok, "its sandbox"),
    REQ ("exec.diff", s_exec_diff, SB_SCOPE_PUBLIC,
         "the changes in a session's workspace since its first run (else against git HEAD), untracked files included (the UI's changes panel)"),
    { "exec.diff.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_exec_diff_ok, 8 MB, "each changed file with its diff" },
    REQ ("exec.checkpoints", s_exec_checkpoints, SB_SCOPE_PUBLIC,
         "a session's checkpoints, read from its tape (switchboard checkpoints, GET /api/sessions/{id}/checkpoints)"),
    { "exec.checkpoints.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_exec_checkpoints_ok, 8 MB, "a page of checkpoints" },
    REQ ("exec.checkpoint_diff", s_exec_checkpoint_diff, SB_SCOPE_PUBLIC,
         "the diff between two checkpoints of a session's work tree (the UI's changes panel, "
         "switchboard checkpoints --diff)"),
    { "exec.checkpoint_diff.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_exec_checkpoint_diff_ok, 8 MB,
      "each file that differs, with its diff" },
};
const size_t sb_types_exec_count = sizeof sb_types_exec / sizeof sb_types_exec [0];

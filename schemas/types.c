/*  schemas/types.c — the table of every bus message type and tape kind.

    A service's types live in schemas/types_<service>.c (see types.h); this
    file holds the header, bus and echo types, and the tape kinds. Everything
    else (validation, the broker, the tap, `switchboard schemas`,
    docs/protocol.md) derives from the row. */
#include "schemas/elicit.h"
#include "schemas/schema.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "schemas/types.h"


const sb_field_t sb_header_fields [] = {
    { "type", SB_T_STR, true, 64, NULL, "message type, e.g. session.append" },
    { "id", SB_T_STR, true, ID_MAX, NULL, "unique id (26-character ULID)" },
    { "corr", SB_T_STR, false, ID_MAX, NULL, "id of the request this answers (replies and chunks)" },
    { "from", SB_T_STR, false, 128, NULL, "sending instance" },
    { "ts", SB_T_UINT, false, 0, NULL, "ms since the epoch", RANGE_TIME },
    { "key", SB_T_STR, false, 128, NULL, "shard key, usually the session id" },
    { "deadline", SB_T_UINT, false, 0, NULL, "ms since the epoch after which the caller stops waiting",
      RANGE_TIME },
    { "trace", SB_T_STR, false, 128, NULL, "trace id, propagated" },
    { "seq", SB_T_UINT, false, 0, NULL, "chunk sequence number of a streaming reply, from 1",
      RANGE_COUNT },
    { "to", SB_T_STR, false, 128, NULL, "deliver to this instance only (pushes such as exec.cancel)" },
    END
};

const sb_field_t sb_stored_body [] = { END };

/* ---- error ---- */
static const sb_field_t s_error [] = {
    { "code", SB_T_STR, true, 32, NULL, "snake_case code from the error table" },
    { "message", SB_T_STR, true, 4 KB, NULL, "one clear line for a human" },
    { "retryable", SB_T_BOOL, false, 0, NULL, "retry with the same command_id may succeed" },
    { "retry_after_ms", SB_T_UINT, false, 0, NULL, "suggested delay before a retry" },
    { "detail", SB_T_ANY, false, 0, NULL, "structured detail" },
    END
};

/* ---- bus ---- */
static const sb_field_t s_bus_ready [] = {
    { "service", SB_T_STR, true, 32, NULL, "service name: the type prefix it serves" },
    { "instance", SB_T_STR, true, 128, NULL, "unique instance name" },
    { "protocol", SB_T_UINT, true, 0, NULL, "bus protocol version", RANGE (1, 255, SB_PROTOCOL_VERSION) },
    { "capabilities", SB_T_MAP, false, 64, NULL, "free-form capabilities, e.g. workspace_sync" },
    END
};
static const sb_field_t s_bus_ready_ok [] = {
    { "heartbeat_ms", SB_T_UINT, true, 0, NULL, "heartbeat interval both ways" },
    { "broker", SB_T_STR, false, 128, NULL, "broker instance name" },
    END
};
static const sb_field_t s_empty [] = { END };
static const sb_field_t s_bus_stats_ok [] = {
    { "uptime_ms", SB_T_UINT, true, 0, NULL, "broker uptime" },
    { "planes", SB_T_MAP, true, 0, NULL, "messages per plane" },
    { "types", SB_T_MAP, true, 0, NULL, "messages per type" },
    { "services", SB_T_MAP, true, 0, NULL, "live instances per service" },
    { "malformed", SB_T_MAP, true, 0, NULL, "malformed frames by kind" },
    { "queues", SB_T_MAP, true, 0, NULL, "queue depths and drops" },
    { "dropped", SB_T_MAP, false, 0, NULL, "messages and bytes dropped past the byte bounds, per plane" },
    { "store", SB_T_MAP, false, 0, NULL, "serve's stores: backend, writes, write p50/p99 (docs/scale-out.md)" },
    { "node", SB_T_MAP, false, 0, NULL, "serve's role: standalone, or member of a cluster with the shards "
      "it holds and its heartbeat (docs/scale-out.md)" },
    { "blobs", SB_T_MAP, false, 0, NULL, "serve's blob store: stored, bytes, refused, swept (docs/images.md)" },
    END
};

/* ---- echo: the test service ---- */
static const sb_field_t s_echo_ping [] = {
    { "text", SB_T_STR, false, 64 KB, NULL, "text to echo" },
    { "sleep_ms", SB_T_UINT, false, 0, NULL, "delay before the reply", RANGE (0, 10000, 0) },
    END
};
static const sb_field_t s_echo_ping_ok [] = {
    { "text", SB_T_STR, false, 64 KB, NULL, "the echoed text" },
    { "instance", SB_T_STR, true, 128, NULL, "instance that answered" },
    END
};
static const sb_field_t s_echo_stream [] = {
    { "count", SB_T_UINT, true, 0, NULL, "number of chunks", RANGE (0, 100000, 0) },
    { "text", SB_T_STR, false, 64 KB, NULL, "text of each chunk" },
    END
};
static const sb_field_t s_echo_stream_chunk [] = {
    { "index", SB_T_UINT, true, 0, NULL, "chunk index from 0" },
    { "text", SB_T_STR, false, 64 KB, NULL, "text" },
    END
};
static const sb_field_t s_echo_stream_ok [] = {
    { "count", SB_T_UINT, true, 0, NULL, "chunks sent" },
    END
};
static const sb_field_t s_echo_note [] = {
    { "text", SB_T_STR, false, 64 KB, NULL, "payload" },
    END
};


static const sb_type_t s_types_bus [] = {
    { "error", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_error, 0, "the failure reply to any request" },

    { "bus.ready", SB_KIND_REQUEST, SB_SCOPE_INTERNAL, s_bus_ready, 0, "an instance registers for a service" },
    REP ("bus.ready.ok", s_bus_ready_ok, "registration accepted"),
    { "bus.heartbeat", SB_KIND_ONEWAY, SB_SCOPE_WORKER, s_empty, 0, "liveness, both ways, every second" },
    { "bus.bye", SB_KIND_ONEWAY, SB_SCOPE_INTERNAL, s_empty, 0, "an instance leaves cleanly" },
    REQ ("bus.stats", s_empty, SB_SCOPE_INTERNAL, "the broker's counters"),
    REP ("bus.stats.ok", s_bus_stats_ok, "counters"),

    REQ ("echo.ping", s_echo_ping, SB_SCOPE_INTERNAL, "test service: echo text back"),
    REP ("echo.ping.ok", s_echo_ping_ok, "the echo"),
    REQ ("echo.stream", s_echo_stream, SB_SCOPE_INTERNAL, "test service: stream count chunks"),
    { "echo.stream.chunk", SB_KIND_CHUNK, SB_SCOPE_INTERNAL, s_echo_stream_chunk, 0, "one chunk" },
    REP ("echo.stream.ok", s_echo_stream_ok, "end of stream"),
    { "echo.note", SB_KIND_ONEWAY, SB_SCOPE_INTERNAL, s_echo_note, 0, "test service: one-way command" },

};

/* ---- tape entry kinds (docs/architecture.md) ---- */
static const sb_field_t s_tape_text [] = {
    { "text", SB_T_STR, true, 1 MB, NULL, "text" }, END };
static const sb_field_t s_tape_any [] = { END };
static const sb_field_t s_image_item [] = { { "image", SB_T_MAP, false, 0, sb_blob_ref_fields, "an image" } };
static const sb_field_t s_tape_prompt [] = {
    { "text", SB_T_STR, true, 1 MB, NULL, "text" },
    { "images", SB_T_ARRAY, false, 16, s_image_item, "images given with it, by reference (docs/images.md)" },
    END
};
static const sb_field_t s_tape_session [] = {
    { "session", SB_T_MAP, false, 0, sb_session_record_fields, "the session record" }, END };
static const sb_field_t s_tape_forked [] = {
    { "session", SB_T_MAP, false, 0, sb_session_record_fields, "the fork's record as made" },
    { "forked_from", SB_T_MAP, true, 0, sb_forked_from_fields,
      "the source: the entries after this one are its entries 2..seq, at the same seqs" },
    END };
static const sb_field_t s_tape_run_status [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run" },
    { "status", SB_T_ENUM, true, 16, NULL, "new status", ENUM (sb_run_statuses) },
    { "reason", SB_T_STR, false, 1 KB, NULL, "why" },
    { "steps", SB_T_UINT, false, 0, NULL, "a final status: the model calls the run made", RANGE_COUNT },
    { "input_tokens", SB_T_UINT, false, 0, NULL, "a final status: tokens in (absent: unknown)", RANGE_COUNT },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "a final status: tokens out (absent: unknown)", RANGE_COUNT },
    END };
static const sb_field_t s_tape_tool_call [] = {
    { "call_id", SB_T_STR, true, 128, NULL, "call id, unique in the session (the provider's when it is)" },
    { "provider_call_id", SB_T_STR, false, 256, NULL, "the provider's own id, when call_id differs from it" },
    { "name", SB_T_STR, true, 64, NULL, "tool name" },
    { "arguments", SB_T_STR, true, 1 MB, NULL, "JSON arguments" },
    END };
static const sb_field_t s_tape_tool_output [] = {
    { "call_id", SB_T_STR, true, 128, NULL, "the call (tool.call call_id)" },
    { "text", SB_T_STR, true, 1 MB, NULL, "output bytes so far" },
    { "elided", SB_T_UINT, false, 0, NULL,
      "set on the one entry that stands for the bytes the tape did not keep (past its share of a call)",
      RANGE_COUNT },
    END };
static const sb_field_t s_tape_quota [] = {
    { "quota", SB_T_UINT, true, 0, NULL, "the session's tape quota in bytes", RANGE_COUNT },
    { "used", SB_T_UINT, true, 0, NULL, "the bytes its tape holds", RANGE_COUNT },
    { "refused", SB_T_UINT, true, 0, NULL, "the bytes of the append that was refused", RANGE_COUNT },
    { "message", SB_T_STR, true, 1 KB, NULL, "what happened and how to raise the quota" },
    END };
static const sb_field_t s_tape_tool_result [] = {
    { "call_id", SB_T_STR, true, 128, NULL, "the call (tool.call call_id)" },
    { "ok", SB_T_BOOL, true, 0, NULL, "success" },
    { "output", SB_T_STR, true, 1 MB, NULL, "output for the model" },
    { "exit_code", SB_T_INT, false, 0, NULL, "process exit code", RANGE (INT32_MIN, INT32_MAX, 0) },
    { "duration_ms", SB_T_UINT, false, 0, NULL, "duration", RANGE_COUNT },
    { "mutating", SB_T_BOOL, false, 0, NULL, "the tool writes files or runs commands (not read-only)" },
    { "refused", SB_T_BOOL, false, 0, NULL, "true when the approval policy refused the call" },
    { "policy", SB_T_STR, false, 16, NULL, "refused: the policy that refused it" },
    { "images", SB_T_ARRAY, false, 1, s_image_item, "view_image: the image shown to the model (docs/images.md)" },
    { "artifact", SB_T_MAP, false, 0, sb_blob_ref_fields, "attach_file: the file attached to the session" },
    { "description", SB_T_STR, false, 1 KB, NULL, "attach_file: what the model said the artifact is" },
    { "fix", SB_T_STR, false, 256, NULL, "refused: the command a person runs to allow it" },
    { "interaction_id", SB_T_STR, false, ID_MAX, NULL, "the approval a person was asked for this call" },
    END };
static const sb_field_t s_tape_usage [] = {
    { "input_tokens", SB_T_UINT, false, 0, NULL, "as the provider reported (absent: unknown)", RANGE_COUNT },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "same, reasoning included", RANGE_COUNT },
    { "cached_tokens", SB_T_UINT, false, 0, NULL, "input read from the provider's cache (part of input_tokens)",
      RANGE_COUNT },
    { "reasoning_tokens", SB_T_UINT, false, 0, NULL, "output spent reasoning (part of output_tokens)", RANGE_COUNT },
    { "context_tokens", SB_T_UINT, false, 0, NULL, "the executor's estimate of the context sent with this call",
      RANGE_COUNT },
    { "context_window", SB_T_UINT, false, 0, NULL, "the model's context window in tokens", RANGE_COUNT },
    { "mcp_server", SB_T_STR, false, 32, NULL,
      "a call that answered this MCP server's sampling request (docs/mcp.md), not a step of the agent" },
    { "provider", SB_T_STR, false, 64, NULL, "the provider that answered" },
    { "model", SB_T_STR, false, 128, NULL, "the model that answered" },
    { "cost_microusd", SB_T_UINT, false, 0, NULL,
      "the call's cost in micro-dollars from the model's price (absent: no price, unknown)", RANGE_COUNT },
    RATELIMIT_FIELDS (""),
    END };
static const sb_field_t s_tape_approval_requested [] = {
    { "interaction_id", SB_T_STR, true, ID_MAX, NULL, "the interaction (ia_<ulid>)" },
    { "call_id", SB_T_STR, true, 128, NULL, "the tool call waiting (tool.call call_id)" },
    { "tool", SB_T_STR, true, 64, NULL, "tool name" },
    { "arguments", SB_T_STR, true, 1 MB, NULL, "the call's JSON arguments" },
    { "summary", SB_T_STR, false, 4 KB, NULL, "one line for a person: the command, or the path" },
    { "diff", SB_T_STR, false, 1 MB, NULL, "write_file / edit_file: the unified diff the call would make" },
    { "risk", SB_T_ENUM, false, 16, NULL, "how much the call may harm", ENUM (sb_ia_risks) },
    { "deadline_at", SB_T_UINT, false, 0, NULL, "ms since epoch when it resolves by itself; absent: never",
      RANGE_TIME },
    { "default_outcome", SB_T_ENUM, false, 16, NULL, "the decision at the deadline", ENUM (sb_ia_decisions) },
    { "kind", SB_T_ENUM, false, 16, NULL, "approval (absent) | budget | elicitation", ENUM (sb_ia_kinds) },
    { "budget", SB_T_ENUM, false, 16, NULL, "kind budget: the budget reached", ENUM (sb_ia_budgets) },
    { "spent", SB_T_UINT, false, 0, NULL, "kind budget: what the run used", RANGE_COUNT },
    { "limit", SB_T_UINT, false, 0, NULL, "kind budget: its limit", RANGE_COUNT },
    { "schema", SB_T_STR, false, SB_ELICIT_SCHEMA_MAX, NULL, "kind elicitation: the requested schema (JSON; "
      "summary is the server's message)" },
    END };
static const sb_field_t s_tape_approval_resolved [] = {
    { "interaction_id", SB_T_STR, true, ID_MAX, NULL, "the interaction" },
    { "call_id", SB_T_STR, false, 128, NULL, "the tool call it answers" },
    { "status", SB_T_ENUM, true, 16, NULL, "approved, rejected or expired", ENUM (sb_ia_statuses) },
    { "decision", SB_T_ENUM, true, 16, NULL, "the answer", ENUM (sb_ia_decisions) },
    { "scope", SB_T_ENUM, false, 16, NULL, "how far the answer reaches", ENUM (sb_ia_scopes) },
    { "resolved_by", SB_T_STR, true, 128, NULL, "who answered (a terminal, the CLI, a browser, \"deadline\")" },
    { "feedback", SB_T_STR, false, 16 KB, NULL, "the person's words to the model" },
    { "kind", SB_T_ENUM, false, 16, NULL, "approval (absent) | budget | elicitation", ENUM (sb_ia_kinds) },
    { "raise", SB_T_UINT, false, 0, NULL, "kind budget: the raise the person asked for", RANGE_COUNT },
    { "action", SB_T_ENUM, false, 16, NULL, "kind elicitation: accept, decline or cancel", ENUM (sb_ia_actions) },
    { "content", SB_T_STR, false, SB_ELICIT_CONTENT_MAX, NULL, "kind elicitation, accepted: the values sent "
      "(JSON)" },
    END };
/*  A run's budgets (docs/usage.md): spent and limit in the budget's unit
    (tokens, micro-dollars, steps, minutes). */
static const sb_field_t s_tape_budget_warning [] = {
    { "budget", SB_T_ENUM, true, 16, NULL, "the budget", ENUM (sb_ia_budgets) },
    { "percent", SB_T_UINT, true, 0, NULL, "50 or 80: the share of the budget spent", RANGE (50, 80, 50) },
    { "spent", SB_T_UINT, true, 0, NULL, "what the run used", RANGE_COUNT },
    { "limit", SB_T_UINT, true, 0, NULL, "the budget", RANGE_COUNT },
    END };
static const sb_field_t s_tape_budget_raised [] = {
    { "budget", SB_T_ENUM, true, 16, NULL, "the budget", ENUM (sb_ia_budgets) },
    { "limit", SB_T_UINT, true, 0, NULL, "its new limit for the rest of the run", RANGE_COUNT },
    { "spent", SB_T_UINT, true, 0, NULL, "what the run had used", RANGE_COUNT },
    { "interaction_id", SB_T_STR, true, ID_MAX, NULL, "the budget question a person approved" },
    END };
static const sb_field_t s_tape_prompt_queued [] = {
    { "prompt_id", SB_T_STR, true, ID_MAX, NULL, "the queued prompt" },
    { "text", SB_T_STR, true, 1 MB, NULL, "the prompt" },
    { "mode", SB_T_ENUM, true, 16, NULL, "how it waits", ENUM (sb_prompt_modes) },
    { "position", SB_T_UINT, false, 0, NULL, "queue: its place in the queue, from 1", RANGE_COUNT },
    { "reason", SB_T_STR, false, 1 KB, NULL, "a steer put back in the queue: why (the run ended without taking it)" },
    { "images", SB_T_ARRAY, false, 16, s_image_item, "images given with it, by reference (docs/images.md)" },
    END };
static const sb_field_t s_tape_prompt_ref [] = {
    { "prompt_id", SB_T_STR, true, ID_MAX, NULL, "the prompt" },
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "prompt.dequeued: the run it started" },
    { "reason", SB_T_STR, false, 1 KB, NULL, "why (removed by a person, or a steer put back in the queue)" },
    END };
static const sb_field_t s_tape_prompt_steered [] = {
    { "prompt_id", SB_T_STR, true, ID_MAX, NULL, "the steer" },
    { "text", SB_T_STR, true, 1 MB, NULL, "what the model receives as a user message" },
    { "step", SB_T_UINT, true, 0, NULL, "the step boundary it joined the run at", RANGE_COUNT },
    { "images", SB_T_ARRAY, false, 16, s_image_item, "images given with it, shown with its text (docs/images.md)" },
    END };
static const sb_field_t s_tape_queue_state [] = {
    { "reason", SB_T_STR, false, 1 KB, NULL, "why the queue paused (cancelled, failed, server_restart, ...)" },
    { "queued", SB_T_UINT, false, 0, NULL, "prompts waiting in the queue", RANGE_COUNT },
    END };
static const sb_field_t s_tape_compacted [] = {
    { "through_seq", SB_T_UINT, true, 0, NULL, "the summary stands for the context up to this seq", RANGE_COUNT },
    { "summary", SB_T_STR, true, 1 MB, NULL, "what the model keeps of the older turns" },
    { "tokens_before", SB_T_UINT, true, 0, NULL, "estimated context tokens before", RANGE_COUNT },
    { "tokens_after", SB_T_UINT, true, 0, NULL, "estimated context tokens after", RANGE_COUNT },
    { "method", SB_T_ENUM, true, 16, NULL, "how the older turns were shortened", ENUM (sb_compact_methods) },
    END };
static const sb_field_t s_tape_paths [] = { { "", SB_T_STR, false, 4 KB, NULL, "path" } };
static const sb_field_t s_tape_instructions [] = {
    { "paths", SB_T_ARRAY, true, 64, s_tape_paths, "the AGENTS.md files read, outermost first" },
    { "bytes", SB_T_UINT, true, 0, NULL, "bytes added to the instructions", RANGE_COUNT },
    { "truncated", SB_T_BOOL, false, 0, NULL, "true when the cap cut them" },
    END };
/*  The bounds match common/git_checkpoint.h: SB_CKPT_CHANGED_MAX paths,
    SB_CKPT_SKIPPED_MAX skipped files, SB_CKPT_PATH_MAX bytes a path. */
static const sb_field_t s_tape_skip_fields [] = {
    { "path", SB_T_STR, true, 4 KB, NULL, "the file, relative to the repository's top (or the workspace)" },
    { "size", SB_T_UINT, true, 0, NULL, "its size in bytes", RANGE_COUNT },
    { "blake2b", SB_T_STR, false, 64, NULL, "BLAKE2b-256 of its content, hex; absent when it could not be read" },
    END };
static const sb_field_t s_tape_skip [] = { { "file", SB_T_MAP, false, 0, s_tape_skip_fields, "a skipped file" } };
static const sb_field_t s_tape_checkpoint [] = {
    { "seq_of", SB_T_UINT, true, 0, NULL, "the seq of the last entry of the step it follows", RANGE_COUNT },
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "the run" },
    { "tree", SB_T_STR, true, 64, NULL, "the git tree object of the work tree" },
    { "commit", SB_T_STR, false, 64, NULL, "its commit on refs/switchboard/checkpoints/<session>" },
    { "store", SB_T_ENUM, false, 16, NULL, "where the objects are", ENUM (sb_ckpt_stores) },
    { "first", SB_T_BOOL, false, 0, NULL, "the session's first checkpoint: nothing to compare with" },
    { "changed", SB_T_ARRAY, true, 256, s_tape_paths, "paths changed since the previous checkpoint" },
    { "files", SB_T_UINT, false, 0, NULL, "how many paths changed in all", RANGE_COUNT },
    { "truncated", SB_T_BOOL, false, 0, NULL, "true when changed lists only the first 256" },
    { "skipped", SB_T_ARRAY, false, 64, s_tape_skip, "files over max_file: in no tree, recorded by size and hash" },
    { "skipped_truncated", SB_T_BOOL, false, 0, NULL, "true when more files were skipped than listed" },
    { "max_file", SB_T_UINT, false, 0, NULL, "SWITCHBOARD_CHECKPOINT_MAX_FILE: bytes a recorded file may have",
      RANGE (1024, 1ll << 40, 16 << 20) },
    { "duration_ms", SB_T_UINT, false, 0, NULL, "what recording it cost", RANGE_COUNT },
    END };
/*  The bounds match common/git_checkpoint.h (SB_CKPT_RESTORE_MAX paths)
    and actors/exec/rewind.c (SB_EXEC_REWIND_EFFECTS_MAX calls). */
static const sb_field_t s_tape_not_restored_fields [] = {
    { "path", SB_T_STR, true, 4 KB, NULL, "the file" },
    { "why", SB_T_STR, true, 256, NULL, "why it was left as it is" },
    END };
static const sb_field_t s_tape_not_restored [] = {
    { "file", SB_T_MAP, false, 0, s_tape_not_restored_fields, "a file left alone" } };
static const sb_field_t s_tape_effect_fields [] = {
    { "call_id", SB_T_STR, true, 256, NULL, "the tool call" },
    { "tool", SB_T_STR, true, 128, NULL, "its tool" },
    { "seq", SB_T_UINT, false, 0, NULL, "the seq of its tool.call entry", RANGE_COUNT },
    END };
static const sb_field_t s_tape_effect [] = { { "call", SB_T_MAP, false, 0, s_tape_effect_fields, "a call" } };
static const sb_field_t s_tape_rewound [] = {
    { "to_seq", SB_T_UINT, true, 0, NULL, "the seq asked for", RANGE_COUNT },
    { "checkpoint_seq", SB_T_UINT, false, 0, NULL, "code: seq_of of the checkpoint put back (the latest at or before to_seq)",
      RANGE_COUNT },
    { "undo", SB_T_BOOL, false, 0, NULL, "true: this undid the session's previous rewind" },
    { "code", SB_T_BOOL, false, 0, NULL, "false: the work tree was left alone (absent: true)" },
    { "conversation", SB_T_BOOL, false, 0, NULL,
      "true: the model's context skips the entries after to_seq and before this one (an undo: the cut "
      "of the rewind it undid is lifted)" },
    { "tree_before", SB_T_STR, false, 64, NULL,
      "code: the work tree before the rewind (a checkpoint of it, so it can be undone)" },
    { "tree_after", SB_T_STR, false, 64, NULL, "code: the work tree after it" },
    { "restored", SB_T_ARRAY, true, 256, s_tape_paths, "paths written back (changed or deleted since the checkpoint)" },
    { "restored_total", SB_T_UINT, false, 0, NULL, "how many in all", RANGE_COUNT },
    { "removed", SB_T_ARRAY, true, 256, s_tape_paths, "paths made after the checkpoint, removed" },
    { "removed_total", SB_T_UINT, false, 0, NULL, "how many in all", RANGE_COUNT },
    { "truncated", SB_T_BOOL, false, 0, NULL, "true when restored or removed lists only the first 256" },
    { "not_restored", SB_T_ARRAY, true, 64, s_tape_not_restored,
      "files left as they are: the checkpoint skipped them (too large), or removing them was refused" },
    { "effects", SB_T_ARRAY, true, 256, s_tape_effect,
      "calls of tools that are not read-only after to_seq: what they did outside the workspace was not undone" },
    { "effects_truncated", SB_T_BOOL, false, 0, NULL, "true when more calls than listed" },
    END };
static const sb_field_t s_tape_reasoning [] = {
    { "provider", SB_T_STR, true, 32, NULL, "provider kind that emitted it (responses, anthropic, ...)" },
    { "data", SB_T_STR, true, 4 MB, NULL, "opaque JSON to give back to the same provider" },
    END };
static const sb_field_t s_tape_artifact [] = {
    { "artifact", SB_T_MAP, true, 0, sb_blob_ref_fields, "the blob's reference" },
    { "by", SB_T_STR, true, 16, NULL, "who attached it: person" },
    END };
static const sb_field_t s_tape_error [] = {
    { "code", SB_T_STR, true, 32, NULL, "error code" },
    { "message", SB_T_STR, true, 4 KB, NULL, "message" },
    END };

/*  A tape kind's scope says who may append it: SB_SCOPE_WORKER for what
    an executor writes (actors/exec/tape.c and its callers), which a
    worker key may append too (bus/curve.c); SB_SCOPE_INTERNAL for the
    control plane's own entries (a prompt, a run's status, an approval
    and its answer, the queue's entries), which a worker that wrote them
    could use to forge what a person said or allowed. */
#define TAPE(name, fields, scope, doc) { name, SB_KIND_TAPE, scope, fields, 0, doc }
static const sb_type_t s_tape_kinds [] = {
    TAPE ("session.created", s_tape_session, SB_SCOPE_INTERNAL, "the session was created"),
    TAPE ("session.updated", s_tape_session, SB_SCOPE_INTERNAL, "the session's config changed"),
    TAPE ("session.forked", s_tape_forked, SB_SCOPE_INTERNAL,
          "the first entry of a fork, in place of session.created (session.fork, docs/checkpoints.md)"),
    TAPE ("prompt", s_tape_prompt, SB_SCOPE_INTERNAL, "the person's prompt"),
    TAPE ("run.status", s_tape_run_status, SB_SCOPE_INTERNAL, "a run changed status"),
    TAPE ("turn.begin", s_tape_any, SB_SCOPE_WORKER, "a run's turn begins"),
    TAPE ("turn.end", s_tape_any, SB_SCOPE_WORKER, "a run's turn ends"),
    TAPE ("text.delta", s_tape_text, SB_SCOPE_WORKER, "model text, coalesced"),
    TAPE ("text.done", s_tape_text, SB_SCOPE_WORKER, "the model's full text for one step"),
    TAPE ("thinking.delta", s_tape_text, SB_SCOPE_WORKER, "model reasoning, coalesced"),
    TAPE ("reasoning.state", s_tape_reasoning, SB_SCOPE_WORKER, "opaque provider state replayed to the same provider"),
    TAPE ("tool.call", s_tape_tool_call, SB_SCOPE_WORKER, "the model called a tool"),
    TAPE ("tool.output", s_tape_tool_output, SB_SCOPE_WORKER, "streamed tool output"),
    TAPE ("tool.result", s_tape_tool_result, SB_SCOPE_WORKER, "a tool finished"),
    TAPE ("approval.requested", s_tape_approval_requested, SB_SCOPE_INTERNAL, "a tool call waits for approval"),
    TAPE ("approval.resolved", s_tape_approval_resolved, SB_SCOPE_INTERNAL, "an approval was answered or expired"),
    TAPE ("budget.warning", s_tape_budget_warning, SB_SCOPE_WORKER,
          "a run spent 50 % or 80 % of one of its budgets (docs/usage.md)"),
    TAPE ("budget.raised", s_tape_budget_raised, SB_SCOPE_WORKER,
          "a person approved going on past a budget: the run's new limit"),
    TAPE ("prompt.queued", s_tape_prompt_queued, SB_SCOPE_INTERNAL,
          "a prompt waits for the running run: queued, or a steer"),
    TAPE ("prompt.dequeued", s_tape_prompt_ref, SB_SCOPE_INTERNAL,
          "a queued prompt left the queue and started its run"),
    TAPE ("prompt.removed", s_tape_prompt_ref, SB_SCOPE_INTERNAL, "a queued prompt was removed"),
    TAPE ("prompt.steered", s_tape_prompt_steered, SB_SCOPE_INTERNAL,
          "a steer joined the running run at a step boundary"),
    TAPE ("queue.paused", s_tape_queue_state, SB_SCOPE_INTERNAL, "the queue stopped starting runs until resumed"),
    TAPE ("queue.resumed", s_tape_queue_state, SB_SCOPE_INTERNAL, "the queue starts runs again"),
    TAPE ("context.compacted", s_tape_compacted, SB_SCOPE_WORKER,
          "older turns were elided or summarized for the model"),
    TAPE ("instructions.loaded", s_tape_instructions, SB_SCOPE_WORKER,
          "AGENTS.md files added to the model's instructions"),
    TAPE ("usage", s_tape_usage, SB_SCOPE_WORKER, "tokens used by one model call"),
    TAPE ("checkpoint", s_tape_checkpoint, SB_SCOPE_WORKER,
          "the work tree recorded as a git tree after a step (docs/checkpoints.md)"),
    TAPE ("session.rewound", s_tape_rewound, SB_SCOPE_WORKER,
          "the work tree was put back to a checkpoint by a rewind run (docs/checkpoints.md)"),
    TAPE ("artifact", s_tape_artifact, SB_SCOPE_INTERNAL,
          "a file the person attached (session.attach, docs/images.md)"),
    TAPE ("error", s_tape_error, SB_SCOPE_INTERNAL, "an error the person should see"),
    TAPE ("note", s_tape_any, SB_SCOPE_WORKER, "free-form note"),
    TAPE ("tape.quota", s_tape_quota, SB_SCOPE_INTERNAL,
          "the session reached its tape quota; further appends are refused"),
};

#define NKINDS (sizeof s_tape_kinds / sizeof s_tape_kinds [0])
#define HSIZE 512

/*  The broker looks a type up for every message: an open-addressing hash
    built once keeps that to one probe or two. */
#define MAX_TYPES 400
static sb_type_t s_types [MAX_TYPES];
static size_t s_ntypes;
static const sb_type_t *s_hash [HSIZE];
static pthread_once_t s_hash_once = PTHREAD_ONCE_INIT;

static uint32_t
s_fnv (const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t k = 0; k < n; k++)
        h = (h ^ (uint8_t) s [k]) * 16777619u;
    return h;
}

/*  Each service's rows live in its own file (types_<service>.c); they are
    gathered here once, in a fixed order, so indexes are stable. */
static void
s_gather (const sb_type_t *rows, size_t n)
{
    for (size_t k = 0; k < n && s_ntypes < MAX_TYPES; k++)
        s_types [s_ntypes++] = rows [k];
}

static void
s_hash_build (void)
{
    s_gather (s_types_bus, sizeof s_types_bus / sizeof s_types_bus [0]);
#define SB_GATHER(svc) s_gather (sb_types_##svc, sb_types_##svc##_count);
    SB_TYPE_FILES (SB_GATHER)
#undef SB_GATHER
    for (size_t k = 0; k < s_ntypes; k++) {
        uint32_t h = s_fnv (s_types [k].name, strlen (s_types [k].name)) % HSIZE;
        while (s_hash [h])
            h = (h + 1) % HSIZE;
        s_hash [h] = &s_types [k];
    }
}

const sb_type_t *
sb_schema_find (const char *name, size_t len)
{
    pthread_once (&s_hash_once, s_hash_build);
    uint32_t h = s_fnv (name, len) % HSIZE;
    while (s_hash [h]) {
        const sb_type_t *t = s_hash [h];
        if (strncmp (t->name, name, len) == 0 && t->name [len] == 0)
            return t;
        h = (h + 1) % HSIZE;
    }
    return NULL;
}

bool
sb_field_ranged (const sb_field_t *f)
{
    return f && (f->type == SB_T_INT || f->type == SB_T_UINT) && (f->min_value || f->max_value);
}

int
sb_enum_index (const char *const *values, const char *name, size_t len)
{
    for (int k = 0; values && name && values [k]; k++)
        if (strlen (values [k]) == len && memcmp (values [k], name, len) == 0)
            return k;
    return -1;
}

int
sb_enum_lookup (const char *const *values, int count, const char *name)
{
    int k = name ? sb_enum_index (values, name, strlen (name)) : -1;
    return k < 0 || k >= count ? count : k;
}

const char *
sb_enum_name (const char *const *values, int count, int value, const char *unknown)
{
    return value >= 0 && value < count ? values [value] : unknown;
}

void
sb_enum_join (const char *const *values, char *out, size_t n)
{
    size_t w = 0;
    out [0] = 0;
    for (int k = 0; values && values [k] && w < n; k++)
        w += (size_t) snprintf (out + w, n - w, "%s%s", k ? " | " : "", values [k]);
}

const sb_field_t *
sb_schema_field (const char *type, const char *field)
{
    const sb_type_t *t = type ? sb_schema_find (type, strlen (type)) : NULL;
    for (int k = 0; t && field && t->fields [k].name; k++)
        if (strcmp (t->fields [k].name, field) == 0)
            return &t->fields [k];
    return NULL;
}

int64_t
sb_schema_default (const char *type, const char *field)
{
    const sb_field_t *f = sb_schema_field (type, field);
    return sb_field_ranged (f) ? f->default_value : 0;
}

const sb_type_t *
sb_schema_all (size_t *count)
{
    pthread_once (&s_hash_once, s_hash_build);
    *count = s_ntypes;
    return s_types;
}

const sb_type_t *
sb_schema_tape_kind (const char *kind)
{
    for (size_t k = 0; kind && k < NKINDS; k++)
        if (strcmp (s_tape_kinds [k].name, kind) == 0)
            return &s_tape_kinds [k];
    return NULL;
}

const sb_type_t *
sb_schema_tape_all (size_t *count)
{
    *count = NKINDS;
    return s_tape_kinds;
}

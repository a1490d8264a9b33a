/*  schemas/types_session.c — session.* types (actors/session.c). */
#include "schemas/types.h"

/*  An approval rule (docs/approvals.md): globs over the tool name and the
    call's match key; the last matching rule of the list wins. */
static const sb_field_t s_rule [] = {
    { "tool", SB_T_STR, true, 128, NULL, "glob over tool names: shell, write_file, mcp__srv__*" },
    { "pattern", SB_T_STR, true, 1 KB, NULL, "glob over the shell command, or the path for file tools" },
    { "action", SB_T_ENUM, true, 16, NULL, "what the matching call gets", ENUM (sb_policy_actions) },
    END
};
static const sb_field_t s_rule_item [] = { { "rule", SB_T_MAP, false, 0, s_rule, "a rule" } };
#define SB_APPROVAL_DEADLINE_MAX_S (7 * 24 * 3600)
/*  mcp_servers: names from mcpServers (actors/exec/mcp.h, docs/mcp.md). */
static const sb_field_t s_mcp_name [] = { { "", SB_T_STR, false, 32, NULL, "an MCP server's name" } };
#define MCP_SAMPLING_DOC "whether its MCP servers may ask for a model call (sampling/createMessage), each asked to a " \
    "person first (absent: false, refused as not supported; docs/mcp.md)"
#define NETWORK_DOC "whether its tools may reach the network from the sandbox (absent: false, loopback only; docs/sandbox.md)"
#define MCP_SERVERS_DOC "the MCP servers the session uses, by name (absent: all; [] none; [\"*\"] in an update: all again)"

/*  Budgets (docs/usage.md): each one is per run; 0 in an update removes
    it. The names are sb_ia_budgets', cost in micro-dollars. */
static const sb_field_t s_budget [] = {
    { "tokens", SB_T_UINT, false, 0, NULL, "input + output tokens of the run's model calls, compaction's included",
      RANGE (0, SB_BUDGET_TOKENS_MAX, 0) },
    { "cost_microusd", SB_T_UINT, false, 0, NULL, "the run's cost in micro-dollars (1000000 = $1)",
      RANGE (0, SB_BUDGET_COST_MAX, 0) },
    { "steps", SB_T_UINT, false, 0, NULL, "model calls of the run, compaction's included",
      RANGE (0, SB_BUDGET_STEPS_MAX, 0) },
    { "minutes", SB_T_UINT, false, 0, NULL, "the run's wall time, from its turn.begin",
      RANGE (0, SB_BUDGET_MINUTES_MAX, 0) },
    END
};
#define BUDGET_DOC "budgets per run: reaching one pauses the run and asks a person (docs/usage.md)"

const sb_field_t sb_forked_from_fields [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "the source session" },
    { "seq", SB_T_UINT, true, 0, NULL, "the source's last entry the fork holds", RANGE_COUNT },
    END
};
static const sb_field_t s_cut [] = {
    { "after", SB_T_UINT, true, 0, NULL, "the seq the conversation was rewound to", RANGE_COUNT },
    { "before", SB_T_UINT, true, 0, NULL, "the session.rewound entry that cut it", RANGE_COUNT },
    END
};
static const sb_field_t s_cut_item [] = { { "cut", SB_T_MAP, false, 0, s_cut, "a cut" } };
const sb_field_t sb_session_record_fields [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "created_at", SB_T_UINT, true, 0, NULL, "ms since epoch", RANGE_TIME },
    { "updated_at", SB_T_UINT, true, 0, NULL, "ms since epoch", RANGE_TIME },
    { "status", SB_T_STR, true, 16, NULL, "active | closed" },
    { "title", SB_T_STR, false, 256, NULL, "title" },
    { "workspace", SB_T_STR, true, 4 KB, NULL, "workspace realpath" },
    { "provider", SB_T_STR, false, 64, NULL, "named LLM provider" },
    { "model", SB_T_STR, false, 128, NULL, "model name" },
    { "approval_policy", SB_T_STR, false, 16, NULL, "yolo | auto | interactive" },
    { "target", SB_T_STR, false, 72, NULL, "where its runs go: local | worker:POOL (default local)" },
    { "max_steps", SB_T_UINT, false, 0, NULL, "step limit per run", RANGE_STEPS },
    { "labels", SB_T_MAP, false, 32, NULL, "free-form string labels" },
    { "rules", SB_T_ARRAY, false, 256, s_rule_item, "approval rules, the last match wins" },
    { "approval_deadline_s", SB_T_UINT, false, 0, NULL,
      "seconds a tool call waits for approval before its default outcome (0: no deadline; "
      "absent: the server's, serve --approval-deadline)", RANGE (0, SB_APPROVAL_DEADLINE_MAX_S, 900) },
    { "mcp_servers", SB_T_ARRAY, false, 64, s_mcp_name, MCP_SERVERS_DOC },
    { "network", SB_T_BOOL, false, 0, NULL, NETWORK_DOC },
    { "mcp_sampling", SB_T_BOOL, false, 0, NULL, MCP_SAMPLING_DOC },
    { "budget", SB_T_MAP, false, 0, s_budget, BUDGET_DOC },
    { "budget_notice", SB_T_STR, false, 512, NULL,
      "a budget that cannot be enforced, and why (a provider that reports no usage)" },
    { "last_seq", SB_T_UINT, true, 0, NULL, "tape head", RANGE_COUNT },
    { "last_run_id", SB_T_STR, false, ID_MAX, NULL, "most recent run" },
    { "turn_status", SB_T_STR, true, 16, NULL, "idle | running | cancelling" },
    { "config_version", SB_T_UINT, false, 0, NULL, "bumped by every config change", RANGE_COUNT },
    { "fence", SB_T_UINT, false, 0, NULL, "current fencing token for appends", RANGE_COUNT },
    { "last_activity_at", SB_T_UINT, false, 0, NULL,
      "ms since epoch: creation, then the latest accepted prompt or run status", RANGE_TIME },
    { "last_prompt", SB_T_STR, false, 200, NULL,
      "first line of the latest prompt, at most 200 bytes (cut on a UTF-8 boundary)" },
    { "tape_bytes", SB_T_UINT, false, 0, NULL, "bytes of the entry bodies appended to the tape, held against the session quota",
      RANGE_COUNT },
    { "quota_noted", SB_T_UINT, false, 0, NULL, "the quota a tape.quota entry was written for", RANGE_COUNT },
    { "compacted_seq", SB_T_UINT, false, 0, NULL,
      "the newest context.compacted entry that summarized: the model's context starts from it "
      "(docs/compaction.md)", RANGE_COUNT },
    { "context_cuts", SB_T_ARRAY, false, 64, s_cut_item,
      "the conversation's cuts in force (session.rewind): the model's context skips the entries after `after` "
      "and before `before`, oldest first" },
    { "forked_from", SB_T_MAP, false, 0, sb_forked_from_fields,
      "a fork: the session and seq its history was copied from (session.fork, docs/checkpoints.md)" },
    END
};
static const sb_field_t s_session_create [] = {
    { "workspace", SB_T_STR, true, 4 KB, NULL, "existing directory; stored as its realpath" },
    { "title", SB_T_STR, false, 256, NULL, "title" },
    { "provider", SB_T_STR, false, 64, NULL, "named LLM provider" },
    { "model", SB_T_STR, false, 128, NULL, "model name" },
    { "approval_policy", SB_T_ENUM, false, 16, NULL, "the approval mode of its runs (\"\": the default, auto)",
      ENUM_OR_EMPTY (sb_policy_modes) },
    { "target", SB_T_STR, false, 72, NULL, "where its runs go: local | worker:POOL (default local)" },
    { "max_steps", SB_T_UINT, false, 0, NULL, "step limit per run", RANGE_STEPS },
    { "labels", SB_T_MAP, false, 32, NULL, "free-form string labels" },
    { "rules", SB_T_ARRAY, false, 256, s_rule_item, "approval rules, the last match wins" },
    { "approval_deadline_s", SB_T_UINT, false, 0, NULL,
      "seconds a tool call waits for approval before its default outcome (0: no deadline; "
      "absent: the server's, serve --approval-deadline)", RANGE (0, SB_APPROVAL_DEADLINE_MAX_S, 900) },
    { "mcp_servers", SB_T_ARRAY, false, 64, s_mcp_name, MCP_SERVERS_DOC },
    { "network", SB_T_BOOL, false, 0, NULL, NETWORK_DOC },
    { "mcp_sampling", SB_T_BOOL, false, 0, NULL, MCP_SAMPLING_DOC },
    { "budget", SB_T_MAP, false, 0, s_budget, BUDGET_DOC " (an update changes only the budgets it names)" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_session_one [] = {
    { "session", SB_T_MAP, true, 0, sb_session_record_fields, "the session record" },
    END
};
static const sb_field_t s_session_id_only [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_session_list [] = {
    { "status", SB_T_ENUM, false, 16, NULL, "only sessions in this status", ENUM (sb_session_statuses) },
    { "limit", SB_T_UINT, false, 0, NULL, "page size", RANGE (1, 1000, 100) },
    { "cursor", SB_T_STR, false, ID_MAX, NULL, "next_cursor of the previous page" },
    { "id_prefix", SB_T_STR, false, ID_MAX, NULL, "only sessions whose id starts with this" },
    END
};
static const sb_field_t s_session_item [] = { { "session", SB_T_MAP, false, 0, sb_session_record_fields, "a session" } };
static const sb_field_t s_session_list_ok [] = {
    { "sessions", SB_T_ARRAY, true, 1000, s_session_item, "sessions, newest first" },
    { "next_cursor", SB_T_STR, false, ID_MAX, NULL, "cursor for the next (older) page; absent at the end" },
    END
};
static const sb_field_t s_usage_totals [] = {
    { "calls", SB_T_UINT, true, 0, NULL, "usage entries (model calls) counted", RANGE_COUNT },
    { "input_tokens", SB_T_UINT, false, 0, NULL, "absent: some call did not report it (unknown)", RANGE_COUNT },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "same", RANGE_COUNT },
    { "cached_input_tokens", SB_T_UINT, false, 0, NULL, "same", RANGE_COUNT },
    { "reasoning_tokens", SB_T_UINT, false, 0, NULL, "same", RANGE_COUNT },
    { "cost_microusd", SB_T_UINT, false, 0, NULL, "micro-dollars; absent: some call had no price", RANGE_COUNT },
    END
};
static const sb_field_t s_usage_run [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "the run" },
    { "totals", SB_T_MAP, true, 0, s_usage_totals, "its totals" },
    END
};
static const sb_field_t s_usage_run_item [] = { { "runs", SB_T_MAP, false, 0, s_usage_run, "a run" } };
static const sb_field_t s_usage_day [] = {
    { "day", SB_T_STR, true, 10, NULL, "YYYY-MM-DD (UTC)" },
    { "totals", SB_T_MAP, true, 0, s_usage_totals, "that day's totals" },
    END
};
static const sb_field_t s_usage_day_item [] = { { "days", SB_T_MAP, false, 0, s_usage_day, "a day" } };
static const sb_field_t s_session_attach [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "the session" },
    { "sha256", SB_T_STR, true, 64, NULL, "a blob the session holds (stored by blob.put)" },
    { "name", SB_T_STR, false, 256, NULL, "the file's name as the person gave it" },
    END
};
static const sb_field_t s_session_attach_ok [] = {
    { "seq", SB_T_UINT, true, 0, NULL, "the artifact entry's seq", RANGE_COUNT },
    { "artifact", SB_T_MAP, true, 0, sb_blob_ref_fields, "the reference on the tape" },
    END
};
static const sb_field_t s_session_usage [] = {
    { "session_id", SB_T_STR, false, ID_MAX, NULL, "one session (absent: all)" },
    { "since", SB_T_STR, false, 10, NULL, "only from this UTC day on, YYYY-MM-DD" },
    END
};
static const sb_field_t s_session_usage_ok [] = {
    { "session_id", SB_T_STR, false, ID_MAX, NULL, "the session asked" },
    { "since", SB_T_STR, false, 10, NULL, "the day asked" },
    { "totals", SB_T_MAP, true, 0, s_usage_totals, "the totals" },
    { "runs", SB_T_ARRAY, false, 1000, s_usage_run_item, "the session's runs, oldest first (with session_id)" },
    { "days", SB_T_ARRAY, false, 1000, s_usage_day_item, "by day, oldest first" },
    { "budget_notice", SB_T_STR, false, 512, NULL, "with session_id: a budget of it that cannot be enforced" },
    END
};
static const sb_field_t s_session_update [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "title", SB_T_STR, false, 256, NULL, "title" },
    { "workspace", SB_T_STR, false, 4 KB, NULL, "existing directory" },
    { "provider", SB_T_STR, false, 64, NULL, "named LLM provider" },
    { "model", SB_T_STR, false, 128, NULL, "model name" },
    { "approval_policy", SB_T_ENUM, false, 16, NULL, "the approval mode of its runs (\"\": the default, auto)",
      ENUM_OR_EMPTY (sb_policy_modes) },
    { "target", SB_T_STR, false, 72, NULL, "where its runs go: local | worker:POOL (default local)" },
    { "max_steps", SB_T_UINT, false, 0, NULL, "step limit per run", RANGE_STEPS },
    { "labels", SB_T_MAP, false, 32, NULL, "free-form string labels" },
    { "rules", SB_T_ARRAY, false, 256, s_rule_item, "replaces the approval rules ([] clears them)" },
    { "add_rules", SB_T_ARRAY, false, 256, s_rule_item,
      "appended to the rules, after `rules`; an identical rule already there moves to the end" },
    { "approval_deadline_s", SB_T_UINT, false, 0, NULL, "seconds a tool call waits for approval (0: no deadline)",
      RANGE (0, SB_APPROVAL_DEADLINE_MAX_S, 900) },
    { "mcp_servers", SB_T_ARRAY, false, 64, s_mcp_name, MCP_SERVERS_DOC },
    { "network", SB_T_BOOL, false, 0, NULL, NETWORK_DOC },
    { "mcp_sampling", SB_T_BOOL, false, 0, NULL, MCP_SAMPLING_DOC },
    { "budget", SB_T_MAP, false, 0, s_budget, BUDGET_DOC " (an update changes only the budgets it names)" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_prompt_image [] = {
    { "sha256", SB_T_STR, true, 64, NULL, "a blob the session holds (blob.put)" },
    { "name", SB_T_STR, false, 256, NULL, "its file name" },
    END
};
static const sb_field_t s_prompt_image_item [] = { { "image", SB_T_MAP, false, 0, s_prompt_image, "an image" } };
static const sb_field_t s_session_prompt [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "text", SB_T_STR, true, 1 MB, NULL, "the prompt" },
    { "images", SB_T_ARRAY, false, 16, s_prompt_image_item,
      "images for the model, put first with blob.put (only a prompt that starts a run takes them)" },
    { "mode", SB_T_ENUM, false, 16, NULL,
      "while a run is active: queue (default: the next run) or steer (joins the running run at its "
      "next step); with none active both start a run (docs/queue.md)", ENUM (sb_prompt_modes) },
    { "approval_policy", SB_T_ENUM, false, 16, NULL, "override the session's policy for this run",
      ENUM (sb_policy_modes) },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_session_prompt_ok [] = {
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "the run started for the prompt (none when it waits)" },
    { "run", SB_T_MAP, false, 0, NULL, "the run record (see run.get)" },
    { "prompt_id", SB_T_STR, false, ID_MAX, NULL, "queued or steered: the prompt's id" },
    { "queued", SB_T_UINT, false, 0, NULL, "queued: its position in the queue, from 1" },
    { "steered", SB_T_BOOL, false, 0, NULL, "true: handed to the running run, joins it at its next step" },
    { "seq", SB_T_UINT, false, 0, NULL, "queued or steered: the seq of its prompt.queued entry (follow the tape from there)" },
    END
};
static const sb_field_t s_session_compact_ok [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "the compaction's run (kind compact)" },
    { "run", SB_T_MAP, true, 0, NULL, "the run record (see run.get)" },
    END
};
static const sb_field_t s_session_rewind [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "to_seq", SB_T_UINT, false, 0, NULL,
      "put the work tree back to the latest checkpoint at or before this seq (required unless undo)", RANGE_COUNT },
    { "undo", SB_T_BOOL, false, 0, NULL, "put back the work tree as the session's last rewind found it" },
    { "code", SB_T_BOOL, false, 0, NULL, "put the work tree back (default true)" },
    { "conversation", SB_T_BOOL, false, 0, NULL,
      "cut the model's context at to_seq: the next run does not see the entries after it (default true)" },
    { "command_id", SB_T_STR, false, ID_MAX, NULL, "idempotency key" },
    END
};
static const sb_field_t s_session_rewind_ok [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "the rewind's run (kind rewind); its session.rewound entry says what it did" },
    { "run", SB_T_MAP, true, 0, NULL, "the run record (see run.get)" },
    END
};
static const sb_field_t s_session_fork [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "the source session" },
    { "at", SB_T_UINT, true, 0, NULL,
      "the source's last entry the fork keeps: a step boundary (not inside a tool call, no approval pending)",
      RANGE (1, SB_COUNT_MAX, 1) },
    { "workspace", SB_T_STR, false, 4 KB, NULL,
      "a new folder (absent, or empty) for the fork's own work tree at the checkpoint of `at`: a git worktree "
      "inside git, a copy outside it; absent: the fork shares the source's workspace" },
    { "command_id", SB_T_STR, false, ID_MAX, NULL, "idempotency key" },
    END
};
static const sb_field_t s_session_fork_ok [] = {
    { "session", SB_T_MAP, true, 0, sb_session_record_fields, "the new session (idle, queue empty, counters zero)" },
    { "forked_from", SB_T_MAP, true, 0, sb_forked_from_fields, "where its history comes from" },
    END
};
static const sb_field_t s_session_fence [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "fence", SB_T_UINT, true, 0, NULL, "the new fence; a lower one than the session's changes nothing",
      RANGE_COUNT },
    END
};
static const sb_field_t s_session_fence_ok [] = {
    { "fence", SB_T_UINT, true, 0, NULL, "the session's fence after the call" },
    END
};
static const sb_field_t s_session_delete_ok [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "deleted session" },
    { "deleted_events", SB_T_UINT, true, 0, NULL, "tape entries removed" },
    END
};
static const sb_field_t s_entry [] = {
    { "kind", SB_T_STR, true, 32, NULL, "tape entry kind" },
    { "body", SB_T_MAP, false, 0, NULL, "entry body; its shape is fixed by the kind" },
    END
};
static const sb_field_t s_entry_item [] = { { "entry", SB_T_MAP, false, 0, s_entry, "an entry" } };
static const sb_field_t s_session_append [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "run the entry belongs to" },
    { "kind", SB_T_STR, false, 32, NULL, "entry kind (single form)" },
    { "body", SB_T_MAP, false, 0, NULL, "entry body (single form)" },
    { "entries", SB_T_ARRAY, false, 1024, s_entry_item, "batch form: committed atomically" },
    { "fence", SB_T_UINT, false, 0, NULL, "writer's fencing token", RANGE_COUNT },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_session_append_ok [] = {
    { "seq", SB_T_UINT, false, 0, NULL, "seq of the entry (single form)" },
    { "first_seq", SB_T_UINT, false, 0, NULL, "first seq (batch form)" },
    { "last_seq", SB_T_UINT, false, 0, NULL, "last seq (batch form)" },
    END
};
static const sb_field_t s_session_events [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "after_seq", SB_T_UINT, false, 0, NULL, "return entries with seq > after_seq", RANGE_COUNT },
    { "limit", SB_T_UINT, false, 0, NULL, "page size", RANGE (1, 5000, 500) },
    END
};
static const sb_field_t s_event_record [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "seq", SB_T_UINT, true, 0, NULL, "position on the tape, from 1, no gaps" },
    { "ts", SB_T_UINT, true, 0, NULL, "ms since epoch" },
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "run" },
    { "kind", SB_T_STR, true, 32, NULL, "entry kind" },
    { "body", SB_T_MAP, false, 0, sb_stored_body, "entry body, as stored" },
    END
};
static const sb_field_t s_event_item [] = { { "event", SB_T_MAP, false, 0, s_event_record, "a tape entry" } };
static const sb_field_t s_session_events_ok [] = {
    { "events", SB_T_ARRAY, true, 5000, s_event_item, "entries in seq order" },
    { "next_after", SB_T_UINT, true, 0, NULL, "cursor for the next page" },
    { "last_seq", SB_T_UINT, true, 0, NULL, "the session's head" },
    { "more", SB_T_BOOL, true, 0, NULL, "more entries after this page" },
    END
};

const sb_type_t sb_types_session [] = {
    REQ ("session.create", s_session_create, SB_SCOPE_PUBLIC, "create a session on a workspace"),
    REP ("session.create.ok", s_session_one, "the new session"),
    REQ ("session.get", s_session_id_only, SB_SCOPE_PUBLIC | SB_SCOPE_WORKER, "get one session"),
    REP ("session.get.ok", s_session_one, "the session"),
    REQ ("session.usage", s_session_usage, SB_SCOPE_PUBLIC,
         "tokens and cost of a session (and its runs) or of all, by day (docs/usage.md)"),
    REP ("session.usage.ok", s_session_usage_ok, "the totals"),
    REQ ("session.attach", s_session_attach, SB_SCOPE_PUBLIC,
         "a file the person attaches, stored first by blob.put, becomes an artifact entry (docs/images.md)"),
    REP ("session.attach.ok", s_session_attach_ok, "the entry appended"),
    REQ ("session.list", s_session_list, SB_SCOPE_PUBLIC, "list sessions, paged"),
    REP ("session.list.ok", s_session_list_ok, "a page of sessions"),
    REQ ("session.update", s_session_update, SB_SCOPE_PUBLIC, "change a session's config"),
    REP ("session.update.ok", s_session_one, "the updated session"),
    REQ ("session.close", s_session_id_only, SB_SCOPE_PUBLIC, "close a session: no more appends"),
    REP ("session.close.ok", s_session_one, "the closed session"),
    REQ ("session.delete", s_session_id_only, SB_SCOPE_PUBLIC, "delete a session, its tape and index entries"),
    REP ("session.delete.ok", s_session_delete_ok, "what was deleted"),
    REQ ("session.prompt", s_session_prompt, SB_SCOPE_PUBLIC,
         "give a session a prompt: with no run active it starts one (the run coordinator appends the "
         "prompt with it); while one is active it is queued, or steers the running run"),
    REP ("session.prompt.ok", s_session_prompt_ok, "the run started, or where the prompt waits"),
    REQ ("session.compact", s_session_id_only, SB_SCOPE_PUBLIC,
         "compact the session's model context now (docs/compaction.md): a run of kind compact; "
         "conflict while a run is active, cancellable as any run"),
    REP ("session.compact.ok", s_session_compact_ok, "the compaction's run"),
    REQ ("session.rewind", s_session_rewind, SB_SCOPE_PUBLIC,
         "put the session's work tree back to a checkpoint and cut its model context there "
         "(docs/checkpoints.md): a run of kind rewind; conflict while a run is active"),
    REP ("session.rewind.ok", s_session_rewind_ok, "the rewind's run"),
    REQ ("session.fork", s_session_fork, SB_SCOPE_PUBLIC,
         "a new session whose history is the source's up to a seq (docs/checkpoints.md); invalid, with "
         "detail {valid_before, valid_after}, for a cut that is not a step boundary"),
    REP ("session.fork.ok", s_session_fork_ok, "the fork"),
    REQ ("session.fence", s_session_fence, SB_SCOPE_INTERNAL,
         "run actor: raise the session's fencing token; appends with an older fence are refused (internal)"),
    REP ("session.fence.ok", s_session_fence_ok, "the session's fence now"),
    { "session.append", SB_KIND_REQUEST, SB_SCOPE_WORKER, s_session_append, 8 MB,
      "append one entry or a batch to the tape (internal)" },
    REP ("session.append.ok", s_session_append_ok, "the assigned seqs"),
    REQ ("session.events", s_session_events, SB_SCOPE_PUBLIC | SB_SCOPE_WORKER, "replay the tape after a cursor"),
    { "session.events.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_session_events_ok, 16 MB, "a page of the tape" },
    { "session.event", SB_KIND_EVENT, SB_SCOPE_PUBLIC, s_event_record, 8 MB,
      "a committed tape entry, published on session/<id>" },
};
const size_t sb_types_session_count = sizeof sb_types_session / sizeof sb_types_session [0];

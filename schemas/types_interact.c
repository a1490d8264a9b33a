/*  schemas/types_interact.c — interact.* types (actors/interact.c):
    durable interactions (approvals), docs/approvals.md. */
#include "schemas/elicit.h"
#include "schemas/types.h"

/*  The longest deadline an interaction may have: a week. */
#define DEADLINE_S_MAX (7 * 24 * 3600)

/*  Ids that name an interaction in a request may be longer than a real
    one ("ia_" and a ULID, 29 bytes): a malformed id must reach the actor,
    which answers not_found, instead of being refused as invalid. */
#define IA_ARG_MAX (4 KB)

static const sb_field_t s_record [] = {
    { "interaction_id", SB_T_STR, true, ID_MAX, NULL, "ia_<ulid>" },
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run that waits" },
    { "call_id", SB_T_STR, true, 128, NULL, "the tool call waiting (tool.call call_id)" },
    { "tool", SB_T_STR, true, 64, NULL, "tool name" },
    { "arguments", SB_T_STR, true, 1 MB, NULL, "the call's JSON arguments" },
    { "summary", SB_T_STR, false, 4 KB, NULL, "one line for a person: the command, or the path" },
    { "diff", SB_T_STR, false, 1 MB, NULL, "write_file / edit_file: the unified diff the call would make" },
    { "risk", SB_T_STR, false, 16, NULL, "low | medium | high" },
    { "status", SB_T_STR, true, 16, NULL, "pending | approved | rejected | expired" },
    { "decision", SB_T_STR, false, 16, NULL, "approve | reject (once resolved)" },
    { "scope", SB_T_STR, false, 16, NULL, "once | session | always (once resolved)" },
    { "feedback", SB_T_STR, false, 16 KB, NULL, "the person's words to the model" },
    { "resolved_by", SB_T_STR, false, 128, NULL, "who answered: a terminal, the CLI, a browser, \"deadline\"" },
    { "created_at", SB_T_UINT, true, 0, NULL, "ms since epoch", RANGE_TIME },
    { "resolved_at", SB_T_UINT, false, 0, NULL, "ms since epoch", RANGE_TIME },
    { "deadline_at", SB_T_UINT, false, 0, NULL, "ms since epoch when it resolves by itself; absent: never",
      RANGE_TIME },
    { "default_outcome", SB_T_STR, true, 16, NULL, "approve | reject: the decision at the deadline" },
    { "kind", SB_T_STR, false, 16, NULL, "approval (a tool call, the default) | budget (a run reached a budget) | elicitation (an MCP "
      "server asks for values)" },
    { "budget", SB_T_STR, false, 16, NULL, "kind budget: tokens | cost | steps | minutes" },
    { "spent", SB_T_UINT, false, 0, NULL, "kind budget: what the run used (cost in micro-dollars)", RANGE_COUNT },
    { "limit", SB_T_UINT, false, 0, NULL, "kind budget: the limit it reached", RANGE_COUNT },
    { "raise", SB_T_UINT, false, 0, NULL, "kind budget, approved: the amount the answer raised it by "
      "(absent: the session's budget, its original amount)", RANGE_COUNT },
    { "schema", SB_T_STR, false, SB_ELICIT_SCHEMA_MAX, NULL, "kind elicitation: the requested schema (JSON "
      "text, checked; summary holds the server's message)" },
    { "action", SB_T_STR, false, 16, NULL, "kind elicitation, resolved: accept | decline | cancel" },
    { "content", SB_T_STR, false, SB_ELICIT_CONTENT_MAX, NULL, "kind elicitation, accepted: the values sent to "
      "the server (a JSON object, the schema's defaults filled in)" },
    END
};
static const sb_field_t s_one [] = {
    { "interaction", SB_T_MAP, true, 0, s_record, "the interaction" },
    END
};
static const sb_field_t s_request [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session" },
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run that waits" },
    { "call_id", SB_T_STR, true, 128, NULL, "the tool call waiting; (run_id, call_id) names the interaction" },
    { "tool", SB_T_STR, true, 64, NULL, "tool name" },
    { "arguments", SB_T_STR, true, 1 MB, NULL, "the call's JSON arguments" },
    { "summary", SB_T_STR, false, 4 KB, NULL, "one line for a person: the command, or the path" },
    { "diff", SB_T_STR, false, 1 MB, NULL, "write_file / edit_file: the unified diff the call would make" },
    { "risk", SB_T_ENUM, false, 16, NULL, "how much the call may harm", ENUM (sb_ia_risks) },
    { "deadline_s", SB_T_UINT, false, 0, NULL,
      "seconds until it resolves to default_outcome; 0: never; absent: the server's (serve --approval-deadline)",
      RANGE (0, DEADLINE_S_MAX, 900) },
    { "default_outcome", SB_T_ENUM, false, 16, NULL, "the decision at the deadline (default reject)",
      ENUM (sb_ia_decisions) },
    { "kind", SB_T_ENUM, false, 16, NULL, "what is asked (default approval; budget: call_id names the budget "
      "and its limit, tool is \"budget\")", ENUM (sb_ia_kinds) },
    { "budget", SB_T_ENUM, false, 16, NULL, "kind budget: the budget reached", ENUM (sb_ia_budgets) },
    { "spent", SB_T_UINT, false, 0, NULL, "kind budget: what the run used", RANGE_COUNT },
    { "budget_limit", SB_T_UINT, false, 0, NULL, "kind budget: its limit (the record's `limit`; a request's "
      "`limit` is a page size)", RANGE_COUNT },
    { "schema", SB_T_STR, false, SB_ELICIT_SCHEMA_MAX, NULL, "kind elicitation: the server's requested schema "
      "(JSON text; checked as docs/mcp.md says); summary holds its message" },
    END
};
static const sb_field_t s_request_ok [] = {
    { "interaction_id", SB_T_STR, true, ID_MAX, NULL, "ia_<ulid>" },
    { "interaction", SB_T_MAP, true, 0, s_record, "the interaction, new or the one asked for before" },
    END
};
static const sb_field_t s_get [] = {
    { "interaction_id", SB_T_STR, true, IA_ARG_MAX, NULL, "ia_<ulid>" },
    END
};
static const sb_field_t s_list [] = {
    { "session_id", SB_T_STR, false, ID_MAX, NULL, "only this session's" },
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "only this run's" },
    { "status", SB_T_ENUM, false, 16, NULL, "only those in this status", ENUM (sb_ia_statuses) },
    { "id_prefix", SB_T_STR, false, 64, NULL, "only those whose id starts with this" },
    { "limit", SB_T_UINT, false, 0, NULL, "page size", RANGE (1, 1000, 100) },
    { "cursor", SB_T_STR, false, 64, NULL, "next_cursor of the previous page" },
    END
};
static const sb_field_t s_item [] = { { "interaction", SB_T_MAP, false, 0, s_record, "an interaction" } };
static const sb_field_t s_list_ok [] = {
    { "interactions", SB_T_ARRAY, true, 1000, s_item, "interactions, newest first" },
    { "next_cursor", SB_T_STR, false, ID_MAX, NULL, "cursor for the next (older) page; absent at the end" },
    END
};
static const sb_field_t s_resolve [] = {
    { "interaction_id", SB_T_STR, true, IA_ARG_MAX, NULL, "ia_<ulid>" },
    { "decision", SB_T_ENUM, true, 16, NULL, "the person's answer", ENUM (sb_ia_decisions) },
    { "feedback", SB_T_STR, false, 16 KB, NULL, "words for the model (a rejection's reason, say)" },
    { "scope", SB_T_ENUM, false, 16, NULL, "how far the answer reaches (default once)", ENUM (sb_ia_scopes) },
    { "resolved_by", SB_T_STR, false, 128, NULL, "who answers (default \"api\")" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key: a retry of the winning resolve gets its reply" },
    { "raise", SB_T_UINT, false, 0, NULL, "a budget question approved: raise the budget by this much (tokens, "
      "micro-dollars, steps or minutes; default its original amount)", RANGE (1, SB_BUDGET_TOKENS_MAX, 1) },
    { "action", SB_T_ENUM, false, 16, NULL, "an elicitation's answer: accept (decision approve), decline or cancel "
      "(decision reject); absent: approve accepts, reject declines", ENUM (sb_ia_actions) },
    { "content", SB_T_STR, false, SB_ELICIT_CONTENT_MAX, NULL, "an elicitation accepted: the values, a JSON "
      "object checked against its schema (absent: {}, every default)" },
    END
};

const sb_type_t sb_types_interact [] = {
    { "interact.request", SB_KIND_REQUEST, SB_SCOPE_WORKER, s_request, 4 MB,
      "executor: ask a person about a tool call; the same (run_id, call_id) gets the same interaction "
      "(internal)" },
    { "interact.request.ok", SB_KIND_REPLY, SB_SCOPE_INTERNAL, s_request_ok, 4 MB, "the interaction" },
    REQ ("interact.get", s_get, SB_SCOPE_PUBLIC | SB_SCOPE_WORKER, "one interaction"),
    { "interact.get.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_one, 4 MB, "the interaction" },
    REQ ("interact.list", s_list, SB_SCOPE_PUBLIC, "interactions, newest first, filtered and paged"),
    { "interact.list.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_list_ok, 16 MB, "a page of interactions" },
    REQ ("interact.resolve", s_resolve, SB_SCOPE_PUBLIC,
         "answer a pending interaction; the first answer wins, a later one gets conflict naming it"),
    { "interact.resolve.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_one, 4 MB, "the resolved interaction" },
};
const size_t sb_types_interact_count = sizeof sb_types_interact / sizeof sb_types_interact [0];

/*  schemas/types.c — the table of every bus message type and tape kind.

    To add a type: add its field table and one row in s_types. Everything
    else (validation, the broker, the tap, `switchboard schemas`,
    docs/protocol.md) derives from the row. */
#include "schemas/schema.h"

#include <pthread.h>
#include <string.h>

#define END { NULL, 0, false, 0, NULL, NULL }
#define ID_MAX 32               /* ULIDs are 26 characters */
#define KB * 1024u
#define MB * 1024u * 1024u

const sb_field_t sb_header_fields [] = {
    { "type", SB_T_STR, true, 64, NULL, "message type, e.g. session.append" },
    { "id", SB_T_STR, true, ID_MAX, NULL, "unique id (26-character ULID)" },
    { "corr", SB_T_STR, false, ID_MAX, NULL, "id of the request this answers (replies and chunks)" },
    { "from", SB_T_STR, false, 128, NULL, "sending instance" },
    { "ts", SB_T_UINT, false, 0, NULL, "ms since the epoch" },
    { "key", SB_T_STR, false, 128, NULL, "shard key, usually the session id" },
    { "deadline", SB_T_UINT, false, 0, NULL, "ms since the epoch after which the caller stops waiting" },
    { "trace", SB_T_STR, false, 128, NULL, "trace id, propagated" },
    { "seq", SB_T_UINT, false, 0, NULL, "chunk sequence number of a streaming reply, from 1" },
    { "to", SB_T_STR, false, 128, NULL, "deliver to this instance only (pushes such as exec.cancel)" },
    END
};

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
    { "protocol", SB_T_UINT, true, 0, NULL, "bus protocol version" },
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
    END
};

/* ---- echo: the test service ---- */
static const sb_field_t s_echo_ping [] = {
    { "text", SB_T_STR, false, 64 KB, NULL, "text to echo" },
    { "sleep_ms", SB_T_UINT, false, 0, NULL, "delay before the reply" },
    END
};
static const sb_field_t s_echo_ping_ok [] = {
    { "text", SB_T_STR, false, 64 KB, NULL, "the echoed text" },
    { "instance", SB_T_STR, true, 128, NULL, "instance that answered" },
    END
};
static const sb_field_t s_echo_stream [] = {
    { "count", SB_T_UINT, true, 0, NULL, "number of chunks" },
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

/* ---- session ---- */
static const sb_field_t s_session_record [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "created_at", SB_T_UINT, true, 0, NULL, "ms since epoch" },
    { "updated_at", SB_T_UINT, true, 0, NULL, "ms since epoch" },
    { "status", SB_T_STR, true, 16, NULL, "active | closed" },
    { "title", SB_T_STR, false, 256, NULL, "title" },
    { "workspace", SB_T_STR, true, 4 KB, NULL, "workspace realpath" },
    { "provider", SB_T_STR, false, 64, NULL, "named LLM provider" },
    { "model", SB_T_STR, false, 128, NULL, "model name" },
    { "approval_policy", SB_T_STR, false, 16, NULL, "yolo | auto | interactive" },
    { "max_steps", SB_T_UINT, false, 0, NULL, "step limit per run" },
    { "labels", SB_T_MAP, false, 32, NULL, "free-form string labels" },
    { "last_seq", SB_T_UINT, true, 0, NULL, "tape head" },
    { "last_run_id", SB_T_STR, false, ID_MAX, NULL, "most recent run" },
    { "turn_status", SB_T_STR, true, 16, NULL, "idle | running | cancelling" },
    { "config_version", SB_T_UINT, false, 0, NULL, "bumped by every config change" },
    { "fence", SB_T_UINT, false, 0, NULL, "current fencing token for appends" },
    END
};
static const sb_field_t s_session_create [] = {
    { "workspace", SB_T_STR, true, 4 KB, NULL, "existing directory; stored as its realpath" },
    { "title", SB_T_STR, false, 256, NULL, "title" },
    { "provider", SB_T_STR, false, 64, NULL, "named LLM provider" },
    { "model", SB_T_STR, false, 128, NULL, "model name" },
    { "approval_policy", SB_T_STR, false, 16, NULL, "yolo | auto | interactive" },
    { "max_steps", SB_T_UINT, false, 0, NULL, "step limit per run (1..10000)" },
    { "labels", SB_T_MAP, false, 32, NULL, "free-form string labels" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_session_one [] = {
    { "session", SB_T_MAP, true, 0, s_session_record, "the session record" },
    END
};
static const sb_field_t s_session_id_only [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_session_list [] = {
    { "status", SB_T_STR, false, 16, NULL, "active | closed" },
    { "limit", SB_T_UINT, false, 0, NULL, "page size (default 100, max 1000)" },
    { "cursor", SB_T_STR, false, ID_MAX, NULL, "next_cursor of the previous page" },
    END
};
static const sb_field_t s_session_item [] = { { "session", SB_T_MAP, false, 0, s_session_record, "a session" } };
static const sb_field_t s_session_list_ok [] = {
    { "sessions", SB_T_ARRAY, true, 1000, s_session_item, "sessions, oldest first" },
    { "next_cursor", SB_T_STR, false, ID_MAX, NULL, "cursor for the next page; absent at the end" },
    END
};
static const sb_field_t s_session_update [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "title", SB_T_STR, false, 256, NULL, "title" },
    { "workspace", SB_T_STR, false, 4 KB, NULL, "existing directory" },
    { "provider", SB_T_STR, false, 64, NULL, "named LLM provider" },
    { "model", SB_T_STR, false, 128, NULL, "model name" },
    { "approval_policy", SB_T_STR, false, 16, NULL, "yolo | auto | interactive" },
    { "max_steps", SB_T_UINT, false, 0, NULL, "step limit per run" },
    { "labels", SB_T_MAP, false, 32, NULL, "free-form string labels" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
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
    { "fence", SB_T_UINT, false, 0, NULL, "writer's fencing token" },
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
    { "after_seq", SB_T_UINT, false, 0, NULL, "return entries with seq > after_seq" },
    { "limit", SB_T_UINT, false, 0, NULL, "page size (default 500, max 5000)" },
    END
};
static const sb_field_t s_event_record [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "seq", SB_T_UINT, true, 0, NULL, "position on the tape, from 1, no gaps" },
    { "ts", SB_T_UINT, true, 0, NULL, "ms since epoch" },
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "run" },
    { "kind", SB_T_STR, true, 32, NULL, "entry kind" },
    { "body", SB_T_MAP, false, 0, NULL, "entry body" },
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

#define REQ(name, fields, pub, doc)   { name, SB_KIND_REQUEST, pub, fields, 0, doc }
#define REP(name, fields, doc)        { name, SB_KIND_REPLY, true, fields, 0, doc }

static const sb_type_t s_types [] = {
    { "error", SB_KIND_REPLY, true, s_error, 0, "the failure reply to any request" },

    { "bus.ready", SB_KIND_REQUEST, false, s_bus_ready, 0, "an instance registers for a service" },
    REP ("bus.ready.ok", s_bus_ready_ok, "registration accepted"),
    { "bus.heartbeat", SB_KIND_ONEWAY, false, s_empty, 0, "liveness, both ways, every second" },
    { "bus.bye", SB_KIND_ONEWAY, false, s_empty, 0, "an instance leaves cleanly" },
    REQ ("bus.stats", s_empty, false, "the broker's counters"),
    REP ("bus.stats.ok", s_bus_stats_ok, "counters"),

    REQ ("echo.ping", s_echo_ping, false, "test service: echo text back"),
    REP ("echo.ping.ok", s_echo_ping_ok, "the echo"),
    REQ ("echo.stream", s_echo_stream, false, "test service: stream count chunks"),
    { "echo.stream.chunk", SB_KIND_CHUNK, false, s_echo_stream_chunk, 0, "one chunk" },
    REP ("echo.stream.ok", s_echo_stream_ok, "end of stream"),
    { "echo.note", SB_KIND_ONEWAY, false, s_echo_note, 0, "test service: one-way command" },

    REQ ("session.create", s_session_create, true, "create a session on a workspace"),
    REP ("session.create.ok", s_session_one, "the new session"),
    REQ ("session.get", s_session_id_only, true, "get one session"),
    REP ("session.get.ok", s_session_one, "the session"),
    REQ ("session.list", s_session_list, true, "list sessions, paged"),
    REP ("session.list.ok", s_session_list_ok, "a page of sessions"),
    REQ ("session.update", s_session_update, true, "change a session's config"),
    REP ("session.update.ok", s_session_one, "the updated session"),
    REQ ("session.close", s_session_id_only, true, "close a session: no more appends"),
    REP ("session.close.ok", s_session_one, "the closed session"),
    REQ ("session.delete", s_session_id_only, true, "delete a session, its tape and index entries"),
    REP ("session.delete.ok", s_session_delete_ok, "what was deleted"),
    { "session.append", SB_KIND_REQUEST, false, s_session_append, 8 MB,
      "append one entry or a batch to the tape (internal)" },
    REP ("session.append.ok", s_session_append_ok, "the assigned seqs"),
    REQ ("session.events", s_session_events, true, "replay the tape after a cursor"),
    { "session.events.ok", SB_KIND_REPLY, true, s_session_events_ok, 16 MB, "a page of the tape" },
    { "session.event", SB_KIND_EVENT, true, s_event_record, 8 MB,
      "a committed tape entry, published on session/<id>" },
};

/* ---- tape entry kinds (DESIGN.md 3) ---- */
static const sb_field_t s_tape_text [] = {
    { "text", SB_T_STR, true, 1 MB, NULL, "text" }, END };
static const sb_field_t s_tape_any [] = { END };
static const sb_field_t s_tape_session [] = {
    { "session", SB_T_MAP, false, 0, s_session_record, "the session record" }, END };
static const sb_field_t s_tape_run_status [] = {
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "run" },
    { "status", SB_T_STR, true, 16, NULL, "new status" },
    { "reason", SB_T_STR, false, 1 KB, NULL, "why" },
    END };
static const sb_field_t s_tape_tool_call [] = {
    { "call_id", SB_T_STR, true, 128, NULL, "provider call id" },
    { "name", SB_T_STR, true, 64, NULL, "tool name" },
    { "arguments", SB_T_STR, true, 1 MB, NULL, "JSON arguments" },
    END };
static const sb_field_t s_tape_tool_output [] = {
    { "call_id", SB_T_STR, true, 128, NULL, "provider call id" },
    { "text", SB_T_STR, true, 1 MB, NULL, "output bytes so far" },
    END };
static const sb_field_t s_tape_tool_result [] = {
    { "call_id", SB_T_STR, true, 128, NULL, "provider call id" },
    { "ok", SB_T_BOOL, true, 0, NULL, "success" },
    { "output", SB_T_STR, true, 1 MB, NULL, "output for the model" },
    { "exit_code", SB_T_INT, false, 0, NULL, "process exit code" },
    { "duration_ms", SB_T_UINT, false, 0, NULL, "duration" },
    END };
static const sb_field_t s_tape_usage [] = {
    { "input_tokens", SB_T_UINT, false, 0, NULL, "" },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "" },
    { "cached_tokens", SB_T_UINT, false, 0, NULL, "" },
    { "reasoning_tokens", SB_T_UINT, false, 0, NULL, "" },
    END };
static const sb_field_t s_tape_error [] = {
    { "code", SB_T_STR, true, 32, NULL, "error code" },
    { "message", SB_T_STR, true, 4 KB, NULL, "message" },
    END };

#define TAPE(name, fields, doc) { name, SB_KIND_TAPE, true, fields, 0, doc }
static const sb_type_t s_tape_kinds [] = {
    TAPE ("session.created", s_tape_session, "the session was created"),
    TAPE ("session.updated", s_tape_session, "the session's config changed"),
    TAPE ("prompt", s_tape_text, "the person's prompt"),
    TAPE ("run.status", s_tape_run_status, "a run changed status"),
    TAPE ("turn.begin", s_tape_any, "a run's turn begins"),
    TAPE ("turn.end", s_tape_any, "a run's turn ends"),
    TAPE ("text.delta", s_tape_text, "model text, coalesced"),
    TAPE ("text.done", s_tape_text, "the model's full text for one step"),
    TAPE ("thinking.delta", s_tape_text, "model reasoning, coalesced"),
    TAPE ("reasoning.state", s_tape_any, "opaque provider state replayed to the same provider"),
    TAPE ("tool.call", s_tape_tool_call, "the model called a tool"),
    TAPE ("tool.output", s_tape_tool_output, "streamed tool output"),
    TAPE ("tool.result", s_tape_tool_result, "a tool finished"),
    TAPE ("approval.requested", s_tape_any, "a tool call waits for approval"),
    TAPE ("approval.resolved", s_tape_any, "an approval was answered or expired"),
    TAPE ("usage", s_tape_usage, "tokens used by one model call"),
    TAPE ("error", s_tape_error, "an error the person should see"),
    TAPE ("note", s_tape_any, "free-form note"),
};

#define NTYPES (sizeof s_types / sizeof s_types [0])
#define NKINDS (sizeof s_tape_kinds / sizeof s_tape_kinds [0])
#define HSIZE 512

/*  The broker looks a type up for every message: an open-addressing hash
    built once keeps that to one probe or two. */
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

static void
s_hash_build (void)
{
    for (size_t k = 0; k < NTYPES; k++) {
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

const sb_type_t *
sb_schema_all (size_t *count)
{
    *count = NTYPES;
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

/*  schemas/types_queue.c — session.queue.* and session.steer.take: the
    queue of prompts waiting for a session's run, and the steers handed to
    the running one (actors/session/queue.c, docs/queue.md). They are
    session types, served by the session actor, kept in their own file. */
#include "schemas/types.h"

static const sb_field_t s_queue_id [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_queue_list [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "after", SB_T_UINT, false, 0, NULL, "the next_after of the page before: the items past it", RANGE_COUNT },
    { "limit", SB_T_UINT, false, 0, NULL, "at most this many items (steers and prompts together)",
      RANGE (1, 1000, 1000) },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_queue_image [] = { { "image", SB_T_MAP, false, 0, sb_blob_ref_fields, "an image" } };
static const sb_field_t s_queue_item [] = {
    { "prompt_id", SB_T_STR, true, ID_MAX, NULL, "the prompt" },
    { "text", SB_T_STR, true, 1 MB, NULL, "the prompt's text" },
    { "mode", SB_T_STR, true, 16, NULL, "queue | steer: how it was given (a steer put back in the queue says steer)" },
    { "created_at", SB_T_UINT, true, 0, NULL, "ms since epoch: when it was given" },
    { "approval_policy", SB_T_STR, false, 16, NULL, "the policy its run will take" },
    { "run_id", SB_T_STR, false, ID_MAX, NULL, "steers: the run it waits to join" },
    { "images", SB_T_ARRAY, false, 16, s_queue_image, "the images it carries, by reference (docs/images.md)" },
    END
};
static const sb_field_t s_queue_items [] = { { "prompt", SB_T_MAP, false, 0, s_queue_item, "a prompt" } };
static const sb_field_t s_queue_list_ok [] = {
    { "prompts", SB_T_ARRAY, true, 1000, s_queue_items, "the queue, next first" },
    { "steers", SB_T_ARRAY, false, 1000, s_queue_items, "steers waiting for the running run's next step" },
    { "paused", SB_T_BOOL, true, 0, NULL, "true: the queue starts nothing until session.queue.resume" },
    { "reason", SB_T_STR, false, 1 KB, NULL, "paused: why" },
    { "more", SB_T_BOOL, false, 0, NULL,
      "true: the page was cut (at limit, or at 768 KiB of items); ask again with after = next_after. "
      "Absent: this is the last page" },
    { "next_after", SB_T_UINT, false, 0, NULL, "more: the cursor of the next page", RANGE_COUNT },
    END
};
static const sb_field_t s_queue_remove [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "prompt_id", SB_T_STR, true, ID_MAX, NULL, "a queued prompt, or a steer not yet taken" },
    { "command_id", SB_T_STR, false, 64, NULL, "idempotency key" },
    END
};
static const sb_field_t s_queue_state_ok [] = {
    { "queued", SB_T_UINT, true, 0, NULL, "prompts left in the queue" },
    { "paused", SB_T_BOOL, true, 0, NULL, "whether the queue is paused" },
    { "prompt_id", SB_T_STR, false, ID_MAX, NULL, "remove: the prompt removed" },
    END
};
static const sb_field_t s_steer_take [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "session id" },
    { "run_id", SB_T_STR, true, ID_MAX, NULL, "the executor's run" },
    { "fence", SB_T_UINT, false, 0, NULL, "the executor's fencing token; an older one than the session's is fenced",
      RANGE_COUNT },
    { "step", SB_T_UINT, true, 0, NULL, "the model call the steers join (from 1)", RANGE (1, SB_COUNT_MAX, 1) },
    END
};
static const sb_field_t s_steer_take_ok [] = {
    { "taken", SB_T_UINT, true, 0, NULL, "prompt.steered entries appended (0: none was pending)" },
    END
};

const sb_type_t sb_types_queue [] = {
    REQ ("session.queue.list", s_queue_list, SB_SCOPE_PUBLIC,
         "the prompts waiting in a session's queue, and its pending steers, a page at a time"),
    { "session.queue.list.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_queue_list_ok, 2 MB,
      "a page of the queue: steers, then prompts" },
    REQ ("session.queue.remove", s_queue_remove, SB_SCOPE_PUBLIC, "remove a queued prompt or a steer not yet taken"),
    REP ("session.queue.remove.ok", s_queue_state_ok, "the queue after the removal"),
    REQ ("session.queue.resume", s_queue_id, SB_SCOPE_PUBLIC,
         "let a paused queue start its next prompt again (a cancel, a failure or a restart paused it)"),
    REP ("session.queue.resume.ok", s_queue_state_ok, "the queue after the call"),
    REQ ("session.steer.take", s_steer_take, SB_SCOPE_WORKER,
         "executor, at a step boundary: append one prompt.steered per pending steer of the run (internal)"),
    REP ("session.steer.take.ok", s_steer_take_ok, "how many were taken"),
};
const size_t sb_types_queue_count = sizeof sb_types_queue / sizeof sb_types_queue [0];

/*  schemas/vocab.c — the tables of schemas/vocab.h. */
#include "schemas/vocab.h"
#include "schemas/schema.h"

#include <string.h>

const char *const sb_executors [SB_EXECUTOR__COUNT + 1] = { "local", "worker", NULL };
const char *const sb_run_kinds [SB_RUN_KIND__COUNT + 1] = { "prompt", "compact", "rewind", NULL };
const char *const sb_session_statuses [SB_SESSION__COUNT + 1] = { "active", "closed", NULL };
const char *const sb_turn_statuses [SB_TURN__COUNT + 1] = { "idle", "running", "cancelling", NULL };
const char *const sb_prompt_modes [SB_PROMPT__MODES + 1] = { "queue", "steer", NULL };
const char *const sb_compact_methods [SB_COMPACT__METHODS + 1] = { "elide", "summary", NULL };
const char *const sb_ckpt_stores [SB_CKPT__STORES + 1] = { "repository", "shadow", NULL };
const char *const sb_workspace_syncs [SB_SYNC__COUNT + 1] = { "same_path", "none", NULL };
const char *const sb_worker_statuses [SB_WORKER__COUNT + 1] = { "idle", "running", "stale", "offline", NULL };
const char *const sb_run_phases [SB_PHASE__COUNT + 1] = { "idle", "model", "tool", "waiting_approval", NULL };
const char *const sb_llm_roles [SB_LLM_ROLE__COUNT + 1] = { "user", "assistant", "tool", NULL };
const char *const sb_stop_reasons [SB_STOP__COUNT + 1] = {
    "end", "tool_calls", "length", "content_filter", "cancelled", NULL
};

SB_ENUM_FROM (sb_executor_from_name, sb_executor_t, sb_executors, SB_EXECUTOR__COUNT)

sb_run_kind_t
sb_run_kind_from_name (const char *name)
{
    if (!name || !*name)
        return SB_RUN_KIND_PROMPT;
    return (sb_run_kind_t) sb_enum_lookup (sb_run_kinds, SB_RUN_KIND__COUNT, name);
}

SB_ENUM_FROM (sb_session_status_from_name, sb_session_status_t, sb_session_statuses, SB_SESSION__COUNT)
SB_ENUM_FROM (sb_turn_status_from_name, sb_turn_status_t, sb_turn_statuses, SB_TURN__COUNT)
SB_ENUM_NAME (sb_turn_status_name, sb_turn_status_t, sb_turn_statuses, SB_TURN__COUNT, "?")
SB_ENUM_FROM (sb_prompt_mode_from_name, sb_prompt_mode_t, sb_prompt_modes, SB_PROMPT__MODES)
SB_ENUM_NAME (sb_prompt_mode_name, sb_prompt_mode_t, sb_prompt_modes, SB_PROMPT__MODES, "?")
SB_ENUM_FROM (sb_compact_method_from_name, sb_compact_method_t, sb_compact_methods, SB_COMPACT__METHODS)
SB_ENUM_FROM (sb_workspace_sync_from_name, sb_workspace_sync_t, sb_workspace_syncs, SB_SYNC__COUNT)
SB_ENUM_FROM (sb_worker_status_from_name, sb_worker_status_t, sb_worker_statuses, SB_WORKER__COUNT)
SB_ENUM_FROM (sb_llm_role_from_name, sb_llm_role_t, sb_llm_roles, SB_LLM_ROLE__COUNT)
SB_ENUM_FROM (sb_stop_reason_from_name, sb_stop_reason_t, sb_stop_reasons, SB_STOP__COUNT)
SB_ENUM_FROM (sb_run_phase_from_name, sb_run_phase_t, sb_run_phases, SB_PHASE__COUNT)
SB_ENUM_NAME (sb_run_phase_name, sb_run_phase_t, sb_run_phases, SB_PHASE__COUNT, "?")
SB_ENUM_NAME (sb_ckpt_store_name, sb_ckpt_store_t, sb_ckpt_stores, SB_CKPT__STORES, "unknown")
SB_ENUM_FROM (sb_ckpt_store_from_name, sb_ckpt_store_t, sb_ckpt_stores, SB_CKPT__STORES)

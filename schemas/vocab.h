/*  schemas/vocab.h — the small closed vocabularies of the protocol that
    have no state machine of their own: where a run executes, what kind of
    run it is, a session's status and turn, how a prompt was given, how a
    context was compacted, a worker's workspace sync and status, the role
    of a message to a model and why a model stopped, a run's phase.

    Each is one table of names, in the order of its C enum, NULL-terminated
    so that a schema row can name it (ENUM (sb_executors)); the validator
    then refuses any other name before a handler runs, and the actors
    compare the enums these functions give. A name that is not in the
    table maps to the enum's __COUNT. Run statuses live in run_status.h,
    approval modes and rule actions in approval_policy.h, an interaction's
    statuses, decisions, scopes and risks in interaction.h. */
#ifndef SB_SCHEMAS_VOCAB_H
#define SB_SCHEMAS_VOCAB_H

/*  run.request target.executor: local | worker */
typedef enum { SB_EXECUTOR_LOCAL, SB_EXECUTOR_WORKER, SB_EXECUTOR__COUNT } sb_executor_t;
extern const char *const sb_executors [];
sb_executor_t sb_executor_from_name (const char *name);

/*  run.request kind: prompt (the agent loop; also absent or "") | compact | rewind */
typedef enum { SB_RUN_KIND_PROMPT, SB_RUN_KIND_COMPACT, SB_RUN_KIND_REWIND, SB_RUN_KIND__COUNT } sb_run_kind_t;
extern const char *const sb_run_kinds [];
/*  NULL and "" are a prompt run, as an absent kind is. */
sb_run_kind_t sb_run_kind_from_name (const char *name);

/*  A session's status: active | closed */
typedef enum { SB_SESSION_ACTIVE, SB_SESSION_CLOSED, SB_SESSION__COUNT } sb_session_status_t;
extern const char *const sb_session_statuses [];
sb_session_status_t sb_session_status_from_name (const char *name);

/*  A session's turn_status: idle | running | cancelling */
typedef enum { SB_TURN_IDLE, SB_TURN_RUNNING, SB_TURN_CANCELLING, SB_TURN__COUNT } sb_turn_status_t;
extern const char *const sb_turn_statuses [];
sb_turn_status_t sb_turn_status_from_name (const char *name);
const char *sb_turn_status_name (sb_turn_status_t turn);

/*  How a prompt was given (session.prompt mode, prompt.queued): queue | steer */
typedef enum { SB_PROMPT_QUEUE, SB_PROMPT_STEER, SB_PROMPT__MODES } sb_prompt_mode_t;
extern const char *const sb_prompt_modes [];
sb_prompt_mode_t sb_prompt_mode_from_name (const char *name);
const char *sb_prompt_mode_name (sb_prompt_mode_t mode);

/*  context.compacted method: elide | summary */
typedef enum { SB_COMPACT_ELIDE, SB_COMPACT_SUMMARY, SB_COMPACT__METHODS } sb_compact_method_t;
extern const char *const sb_compact_methods [];
sb_compact_method_t sb_compact_method_from_name (const char *name);

/*  Where a checkpoint's objects are (checkpoint store): the workspace's
    own repository, or the shadow repository of a workspace outside git */
typedef enum { SB_CKPT_REPOSITORY, SB_CKPT_SHADOW, SB_CKPT__STORES } sb_ckpt_store_t;
extern const char *const sb_ckpt_stores [];
const char *sb_ckpt_store_name (sb_ckpt_store_t store);
sb_ckpt_store_t sb_ckpt_store_from_name (const char *name);

/*  A worker's workspace_sync: same_path | none */
typedef enum { SB_SYNC_SAME_PATH, SB_SYNC_NONE, SB_SYNC__COUNT } sb_workspace_sync_t;
extern const char *const sb_workspace_syncs [];
sb_workspace_sync_t sb_workspace_sync_from_name (const char *name);

/*  A worker's status: idle | running | stale | offline */
typedef enum { SB_WORKER_IDLE, SB_WORKER_RUNNING, SB_WORKER_STALE, SB_WORKER_OFFLINE, SB_WORKER__COUNT } sb_worker_status_t;
extern const char *const sb_worker_statuses [];
sb_worker_status_t sb_worker_status_from_name (const char *name);

/*  What a run is doing (run.heartbeat phase, the run record's): idle |
    model | tool | waiting_approval. The executor holds it as this enum. */
typedef enum {
    SB_PHASE_IDLE, SB_PHASE_MODEL, SB_PHASE_TOOL, SB_PHASE_WAITING_APPROVAL, SB_PHASE__COUNT
} sb_run_phase_t;
extern const char *const sb_run_phases [];
sb_run_phase_t sb_run_phase_from_name (const char *name);
const char *sb_run_phase_name (sb_run_phase_t phase);

/*  llm.stream messages[].role: user | assistant | tool (the llm actor's
    normalized request, actors/llm/provider.h, holds this enum) */
typedef enum { SB_LLM_ROLE_USER, SB_LLM_ROLE_ASSISTANT, SB_LLM_ROLE_TOOL } sb_llm_role_t;
/*  Not a role, kept out of the enum: the providers switch over every role. */
#define SB_LLM_ROLE__COUNT ((sb_llm_role_t) 3)
extern const char *const sb_llm_roles [];
sb_llm_role_t sb_llm_role_from_name (const char *name);

/*  llm.stream.ok stop_reason: end | tool_calls | length | content_filter | cancelled */
typedef enum {
    SB_STOP_END, SB_STOP_TOOL_CALLS, SB_STOP_LENGTH, SB_STOP_CONTENT_FILTER, SB_STOP_CANCELLED, SB_STOP__COUNT
} sb_stop_reason_t;
extern const char *const sb_stop_reasons [];
sb_stop_reason_t sb_stop_reason_from_name (const char *name);

#endif

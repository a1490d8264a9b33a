/*  schemas/types_worker.c — worker.* : the worker registry, served by the
    run actor (actors/run/workers.c; docs/workers.md). */
#include "schemas/types.h"

static const sb_field_t s_worker_record [] = {
    { "worker_id", SB_T_STR, true, 64, NULL, "the worker's name (stable across restarts)" },
    { "instance_id", SB_T_STR, true, 64, NULL, "new per worker process" },
    { "pid", SB_T_UINT, false, 0, NULL, "process id on its host" },
    { "hostname", SB_T_STR, false, 255, NULL, "its host" },
    { "pool", SB_T_STR, true, 64, NULL, "the pool it claims from" },
    { "capabilities", SB_T_MAP, false, 32, NULL, "free-form K=V strings" },
    { "workspace_sync", SB_T_STR, true, 16, NULL, "same_path | none" },
    { "status", SB_T_STR, true, 16, NULL, "idle | running | stale | offline" },
    { "current_run_id", SB_T_STR, false, ID_MAX, NULL, "the run it holds" },
    { "claiming", SB_T_BOOL, false, 0, NULL, "a run.claim of it is waiting for a run (long-poll)" },
    { "registered_at", SB_T_UINT, true, 0, NULL, "ms since epoch" },
    { "last_seen_at", SB_T_UINT, true, 0, NULL, "ms since epoch: its last claim, heartbeat or completion" },
    { "lease_expires_at", SB_T_UINT, false, 0, NULL, "its run's lease, ms since epoch" },
    END
};
static const sb_field_t s_worker_one [] = {
    { "worker", SB_T_MAP, true, 0, s_worker_record, "the worker" },
    END
};
static const sb_field_t s_worker_register [] = {
    { "worker_id", SB_T_STR, true, 64, NULL, "the worker's name" },
    { "instance_id", SB_T_STR, true, 64, NULL, "new per process" },
    { "pid", SB_T_UINT, false, 0, NULL, "process id", RANGE (0, 4194304, 0) },
    { "hostname", SB_T_STR, false, 255, NULL, "host name" },
    { "pool", SB_T_STR, false, 64, NULL, "pool (default: default)" },
    { "capabilities", SB_T_MAP, false, 32, NULL, "free-form K=V strings" },
    { "workspace_sync", SB_T_ENUM, false, 16, NULL, "same_path: a shared filesystem; none: its own checkout (the default)",
      ENUM (sb_workspace_syncs) },
    END
};
static const sb_field_t s_worker_id [] = {
    { "worker_id", SB_T_STR, true, 64, NULL, "the worker's name" },
    END
};
static const sb_field_t s_worker_list [] = {
    { "pool", SB_T_STR, false, 64, NULL, "only this pool's workers" },
    END
};
static const sb_field_t s_worker_item [] = { { "worker", SB_T_MAP, false, 0, s_worker_record, "a worker" } };
static const sb_field_t s_worker_list_ok [] = {
    { "workers", SB_T_ARRAY, true, 1000, s_worker_item, "workers, by id" },
    END
};

const sb_type_t sb_types_worker [] = {
    REQ ("worker.register", s_worker_register, SB_SCOPE_WORKER, "worker: announce itself (internal to workers)"),
    REP ("worker.register.ok", s_worker_one, "registered"),
    REQ ("worker.get", s_worker_id, SB_SCOPE_PUBLIC, "one worker and its status"),
    REP ("worker.get.ok", s_worker_one, "the worker"),
    REQ ("worker.list", s_worker_list, SB_SCOPE_PUBLIC, "the workers and their status"),
    REP ("worker.list.ok", s_worker_list_ok, "workers"),
};
const size_t sb_types_worker_count = sizeof sb_types_worker / sizeof sb_types_worker [0];

/*  schemas/types_hooks.c — hooks.* types (actors/hooks.c, docs/hooks.md). */
#include "schemas/types.h"

static const sb_field_t s_hooks_stats [] = { END };
static const sb_field_t s_hooks_stats_ok [] = {
    { "config", SB_T_STR, false, 4 KB, NULL, "the file the hooks come from (empty: none)" },
    { "hooks", SB_T_UINT, true, 0, NULL, "hooks configured, over every event" },
    { "fired", SB_T_UINT, true, 0, NULL, "hook runs asked for by events" },
    { "ok", SB_T_UINT, true, 0, NULL, "runs that exited 0" },
    { "failed", SB_T_UINT, true, 0, NULL, "runs that did not start, exited non-zero or were killed" },
    { "timed_out", SB_T_UINT, true, 0, NULL, "of the failed: killed at their timeout" },
    { "dropped", SB_T_UINT, true, 0, NULL, "runs not made: the queue was full" },
    { "running", SB_T_UINT, true, 0, NULL, "running now" },
    { "queued", SB_T_UINT, true, 0, NULL, "waiting for a worker" },
    END
};

const sb_type_t sb_types_hooks [] = {
    REQ ("hooks.stats", s_hooks_stats, SB_SCOPE_PUBLIC, "the hooks' counters: fired, ok, failed, timed out, dropped"),
    REP ("hooks.stats.ok", s_hooks_stats_ok, "counters"),
};
const size_t sb_types_hooks_count = sizeof sb_types_hooks / sizeof sb_types_hooks [0];

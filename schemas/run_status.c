/*  schemas/run_status.c — the run's statuses and its transition table. */
#include "schemas/run_status.h"

#include <stddef.h>
#include <string.h>

static const struct {
    const char *name;
    bool final;
} s_statuses [] = {
#define SB_RUN_STATUS_ROW(name, final, doc) { #name, final },
    SB_RUN_STATUS_TABLE (SB_RUN_STATUS_ROW)
#undef SB_RUN_STATUS_ROW
};

const char *const sb_run_statuses [SB_RUN__COUNT + 1] = {
#define SB_RUN_STATUS_NAME(name, final, doc) #name,
    SB_RUN_STATUS_TABLE (SB_RUN_STATUS_NAME)
#undef SB_RUN_STATUS_NAME
    NULL
};

/*  Every transition the run actor may write, and what causes it. A row
    that is not here is refused: the actor logs it and writes nothing.
    Final statuses have no rows; run.resume makes a new run instead. */
static const struct {
    sb_run_status_t from, to;
} s_transitions [] = {
    { SB_RUN_queued,     SB_RUN_claimed },      /* exec.start accepted it */
    { SB_RUN_queued,     SB_RUN_cancelled },    /* run.cancel before it started */
    { SB_RUN_claimed,    SB_RUN_running },      /* the first heartbeat */
    { SB_RUN_claimed,    SB_RUN_cancelling },   /* run.cancel */
    { SB_RUN_claimed,    SB_RUN_completed },    /* run.finish before any heartbeat */
    { SB_RUN_claimed,    SB_RUN_failed },
    { SB_RUN_claimed,    SB_RUN_cancelled },
    { SB_RUN_claimed,    SB_RUN_expired },      /* the lease lapsed */
    { SB_RUN_claimed,    SB_RUN_interrupted },  /* recovery at startup */
    { SB_RUN_claimed,    SB_RUN_queued },       /* recovery: it waited for an approval */
    { SB_RUN_running,    SB_RUN_cancelling },   /* run.cancel */
    { SB_RUN_running,    SB_RUN_completed },    /* run.finish */
    { SB_RUN_running,    SB_RUN_failed },
    { SB_RUN_running,    SB_RUN_cancelled },
    { SB_RUN_running,    SB_RUN_expired },      /* the lease lapsed */
    { SB_RUN_running,    SB_RUN_interrupted },  /* recovery at startup */
    { SB_RUN_running,    SB_RUN_queued },       /* recovery: it waited for an approval */
    { SB_RUN_cancelling, SB_RUN_cancelled },    /* the executor confirmed, or recovery */
    { SB_RUN_cancelling, SB_RUN_completed },    /* the run ended before the cancel landed */
    { SB_RUN_cancelling, SB_RUN_failed },
    { SB_RUN_cancelling, SB_RUN_expired },      /* the lease lapsed */
};

const char *
sb_run_status_name (sb_run_status_t status)
{
    return (unsigned) status < SB_RUN__COUNT ? s_statuses [status].name : "?";
}

sb_run_status_t
sb_run_status_from_name (const char *name)
{
    for (int k = 0; name && k < SB_RUN__COUNT; k++)
        if (strcmp (name, s_statuses [k].name) == 0)
            return (sb_run_status_t) k;
    return SB_RUN__COUNT;
}

bool
sb_run_status_is_final (sb_run_status_t status)
{
    return (unsigned) status < SB_RUN__COUNT && s_statuses [status].final;
}

bool
sb_run_status_final (const char *name)
{
    return sb_run_status_is_final (sb_run_status_from_name (name));
}

bool
sb_run_transition_ok (sb_run_status_t from, sb_run_status_t to)
{
    for (size_t k = 0; k < sizeof s_transitions / sizeof s_transitions [0]; k++)
        if (s_transitions [k].from == from && s_transitions [k].to == to)
            return true;
    return false;
}

const char *
sb_run_status_names (void)
{
    /* one literal from the table, past the first separator */
#define SB_RUN_STATUS_JOIN(name, final, doc) " | " #name
    return &SB_RUN_STATUS_TABLE (SB_RUN_STATUS_JOIN) [3];
#undef SB_RUN_STATUS_JOIN
}

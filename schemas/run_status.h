/*  schemas/run_status.h — the run's state machine: its statuses and the
    transitions between them (docs/architecture.md).

    The run actor holds a status as an sb_run_status_t and writes only the
    transitions sb_run_transition_ok allows; the wire and the store carry
    the names. A final status has no exit: run.resume does not reopen a
    run, it creates a new one whose resume_from names the old. */
#ifndef SB_RUN_STATUS_H
#define SB_RUN_STATUS_H

#include <stdbool.h>

/*  X(name, final, doc) */
#define SB_RUN_STATUS_TABLE(X) \
    X (queued,      false, "created, waiting for an executor") \
    X (claimed,     false, "an executor accepted it; no heartbeat yet") \
    X (running,     false, "the executor heartbeats") \
    X (cancelling,  false, "a cancel was sent to the executor") \
    X (completed,   true,  "the model ended its turn") \
    X (failed,      true,  "an error or a limit ended it") \
    X (cancelled,   true,  "cancelled, before or while it ran") \
    X (expired,     true,  "its lease lapsed: the executor stopped heartbeating") \
    X (interrupted, true,  "the server stopped while it ran")

typedef enum {
#define SB_RUN_STATUS_ENUM(name, final, doc) SB_RUN_##name,
    SB_RUN_STATUS_TABLE (SB_RUN_STATUS_ENUM)
#undef SB_RUN_STATUS_ENUM
    SB_RUN__COUNT               /* also: not a status */
} sb_run_status_t;

/*  The wire names, in the enum's order, NULL-terminated (for ENUM rows). */
extern const char *const sb_run_statuses [];
/*  The status's wire name; "?" for SB_RUN__COUNT or out of range. */
const char *sb_run_status_name (sb_run_status_t status);
/*  Maps a wire name to its status; SB_RUN__COUNT when unknown or NULL. */
sb_run_status_t sb_run_status_from_name (const char *name);
/*  True for a status that never changes again. */
bool sb_run_status_is_final (sb_run_status_t status);
/*  The same by wire name (false for an unknown name), for readers of
    records such as the CLI. */
bool sb_run_status_final (const char *name);
/*  True when the table has the transition from -> to. */
bool sb_run_transition_ok (sb_run_status_t from, sb_run_status_t to);
/*  The statuses' names joined by " | ", for docs and error messages. */
const char *sb_run_status_names (void);

#endif

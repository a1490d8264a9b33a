/*  cli/follow.h — follow a session's tape: replay from a cursor, then live,
    with no gap and no duplicate.

    The subscription comes first, then the replay, so nothing published in
    between is missed; what pub/sub already delivered is dropped by seq,
    and a gap in the live stream (pub/sub can drop) is filled from the
    tape with session.events. A second of silence also triggers a check of
    the tape, so a dropped last event is not waited for forever. */
#ifndef SB_CLI_FOLLOW_H
#define SB_CLI_FOLLOW_H

#include <signal.h>
#include "bus/client.h"

/*  Called once per tape entry, in seq order. Return non-zero to stop. */
typedef int (sb_follow_fn) (const sb_val_t *event, void *arg);
/*  Called about every 200 ms while waiting; non-zero stops. May be NULL. */
typedef int (sb_follow_idle_fn) (void *arg);

/*  Delivers entries with seq > after. live=false stops at the current head.
    sub_endpoint: the broker's XPUB side. Returns 0 when fn or idle asked to
    stop (or the replay ended), -1 on error (printed on stderr). */
int sb_follow (sb_bus_t *bus, const char *sub_endpoint, const char *session_id, uint64_t after,
               bool live, sb_follow_fn *fn, sb_follow_idle_fn *idle, void *arg);

/*  What a command that lists entries of one session's tape keeps: whether
    --json was given, and how many entries fn printed. */
typedef struct {
    bool json;
    size_t count;
} sb_tape_list_t;

/*  Such a command (checkpoints, artifacts): parses `SESSION [--json]
    [--connect EP] [--data DIR] [--help]` (--help prints usage), pages
    through the session's tape calling fn with `list` on each entry, and
    prints `none` when nothing was listed as text. Returns the exit status. */
int sb_tape_list_cmd (const char *cmd, int argc, char **argv, const char *usage, sb_follow_fn *fn,
                      sb_tape_list_t *list, const char *none);

#endif

/* ------------------------------------------------------------------ */
/*  Watching one run as a person does: `run`, `prompt --follow` and
    `resume --follow` (cli/transcript.h renders the entries). */

typedef struct {
    sb_bus_t *bus;
    const char *sub_endpoint;
    const char *session_id;
    const char *run_id;
    bool json;                  /* the run's entries as JSON lines instead */
    /*  Ctrl-C (or SIGTERM): true, the first one cancels the run and waits
        for it to end, a second one stops waiting (the one-shot); false,
        the first one detaches and says how to re-attach. */
    bool cancel_on_interrupt;
    /*  Called after the stream, before the summary line (may be NULL). */
    void (*before_summary) (void *arg);
    void *arg;
} sb_watch_t;

/*  Streams the run until it ends or Ctrl-C, then prints the summary; the
    last line says what Ctrl-C did when it was pressed. Returns the exit
    code: 0 completed, 1 another final status, 130 interrupted. */
int sb_follow_run (const sb_watch_t *watch);

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

#endif

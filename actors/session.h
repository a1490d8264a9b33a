/*  actors/session.h — the session actor: sessions and their durable tape.

    Serves session.create/get/list/update/close/delete/append/events/fence
    and session.prompt (schemas/types_session.c) from one LMDB environment, DATA/session, of
    which it is the only writer. Every change is committed durably before
    it is acknowledged, and every tape entry is published on
    `session/<id>` (type session.event) only after its commit.

    Tunables read from the environment at start:
      SWITCHBOARD_COMMAND_TTL_S  how long a command_id is remembered for
                                 idempotent retries (default 86400 s)
      SWITCHBOARD_SESSION_MAPSIZE  the LMDB map's first size in bytes
                                 (default 64 MiB); it grows on demand

    docs/sessions.md describes the layout of the environment. */
#ifndef SB_SESSION_H
#define SB_SESSION_H

#include <czmq.h>

/*  The LMDB schema version of DATA/session. */
#define SB_SESSION_SCHEMA_VERSION 1

/*  The bytes of tape one session may hold (serve --session-quota,
    SWITCHBOARD_SESSION_QUOTA): its default and bounds. Entry bodies are
    counted; past the quota, appends are refused with too_large. */
#define SB_SESSION_QUOTA_DEFAULT    ((uint64_t) 1 << 30)
#define SB_SESSION_QUOTA_MIN        4096
#define SB_SESSION_QUOTA_MAX        ((uint64_t) 1 << 50)

/*  Page limits of session.events and session.list. */
#define SB_SESSION_EVENTS_LIMIT     500
#define SB_SESSION_EVENTS_LIMIT_MAX 5000
#define SB_SESSION_EVENTS_BYTES_MAX (8u << 20)
#define SB_SESSION_LIST_LIMIT       100
#define SB_SESSION_LIST_LIMIT_MAX   1000

/*  zactor body; args is a sb_actor_args_t * (actors/actor.h) whose
    data_dir, cmd_endpoint, pub_endpoint and instance are used. Signals 0
    once registered as service "session", 1 when it cannot start (the
    store cannot be opened, say), having logged why. */
void sb_session_actor (zsock_t *pipe, void *args);

/*  The type column of the actor's dispatch table: the index-th type it
    serves, or NULL past the end (actors/actor.h). */
const char *sb_session_dispatch_type (size_t index);

#endif

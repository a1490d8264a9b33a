/*  store/committer.h — the group committer: a thread that runs one
    write transaction at a time, and its fsync, for an actor.

    A durable LMDB commit is two syncs to disk, milliseconds each on a
    shared disk; an actor that committed inline would make every message
    that comes meanwhile wait. So an actor gathers its writes into a batch,
    hands the batch's write function to the committer and, while the
    transaction and its fsync run, goes on with the next messages, whose
    writes form the next batch (group commit). The session actor's drain
    and the run actor's pending writes (actors/run/commit.c) both commit
    through it. One commit at a time: LMDB allows one write transaction per
    environment, and a batch's transaction reads what the previous one
    wrote, so batch N+1's transaction begins only after batch N's commit
    has returned. The actor acknowledges what a batch holds only after
    sb_committer_finish has returned 0 for it: no ack before the fsync
    (docs/sessions.md, "Group commit").

    An actor that writes seldom (the interaction actor: one transaction per
    approval) calls sb_store_write inline instead: that is this committer
    with a batch of one, run on the actor's own thread.

    Between sb_committer_start and sb_committer_finish, `ctx` belongs to
    the committer's thread: the caller must not touch it, nor begin a write
    transaction on the store (a map grow needs every transaction closed). */
#ifndef SB_STORE_COMMITTER_H
#define SB_STORE_COMMITTER_H

#include "store/store.h"

#include <stdbool.h>

typedef struct _sb_committer_t sb_committer_t;

//  Starts the thread. NULL when it cannot be started.
sb_committer_t *sb_committer_new (sb_store_t *store);

//  Waits for the commit in flight, if any, then stops the thread.
void sb_committer_destroy (sb_committer_t **self_p);

//  Readable (POLLIN) once the commit in flight has returned; poll it with
//  the actor's sockets (zmq_pollitem_t.fd).
int sb_committer_fd (sb_committer_t *self);

//  Whether a commit is in flight (started and not yet finished).
bool sb_committer_busy (sb_committer_t *self);

//  Runs sb_store_write (store, fn, ctx) on the committer's thread. Only
//  when not busy.
void sb_committer_start (sb_committer_t *self, sb_store_write_fn *fn, void *ctx);

//  True when the commit in flight has returned (the fd is readable), so
//  that sb_committer_finish returns at once. Never waits.
bool sb_committer_done (sb_committer_t *self);

//  Waits until the commit in flight has returned (at once when the fd is
//  readable) and returns what sb_store_write returned; then the committer
//  is idle and ctx is the caller's again.
int sb_committer_finish (sb_committer_t *self);

#endif

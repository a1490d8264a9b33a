/*  store/outbox.h — records committed with a state change, delivered
    to the session tape after the commit.

    A stateful actor that tells the session tape of a change (the run
    actor's run.status entries, the interaction actor's approval.* ones)
    writes the change and the session.append body that announces it in
    one transaction: an outbox entry, 'O' n in the actor's outbox dbi, n
    counting up from 1 ('o' NODE_ID n on a node of a cluster:
    sb_outbox_scope). Only committed entries are sent, and each body
    carries a command_id stored with it, so a crash between the commit and
    the append neither loses nor doubles an entry: after a restart the
    outbox is sent again, and the session actor answers a resend with the
    first reply (store/cmdid.h).

    This module keeps the delivery's book: which entries are in flight
    (at most `inflight_max`, at most one per session, so that each
    session's entries land in the order they were committed), which
    landed, and `acked`, the entry up to which every one landed (what an
    actor waits for before it answers a request that depends on the tape).
    The actor sends (its bus, its timeouts) and deletes the entries that
    are done (inline, sb_outbox_delete, or in its next batch); it numbers
    new entries itself (sb_outbox_last_stored at startup, then counting),
    and tells the book when entries are durable (sb_outbox_durable).

    One thread: the actor's. */
#ifndef SB_STORE_OUTBOX_H
#define SB_STORE_OUTBOX_H

#include "store/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _sb_outbox_t sb_outbox_t;

//  An entry to send: its number, its session (the body's session_id, ""
//  when none) and a copy of its body, which the caller frees.
typedef struct {
    uint64_t n;
    char session [40];
    uint8_t *body;
    size_t len;
} sb_outbox_entry_t;

//  What became of an entry that was answered.
typedef enum {
    SB_OUTBOX_RETRY,        //  no answer, or a refusal a retry may change: sent again
    SB_OUTBOX_LANDED,       //  on the tape: delete it
    SB_OUTBOX_DROPPED,      //  refused for good: delete it (the caller logs it)
} sb_outbox_fate_t;

//  A book for the entries of dbi `dbi` of `store`. `fenced_final`: a
//  `fenced` refusal is final (the entry is dropped) rather than retried.
//  NULL when out of memory.
sb_outbox_t *sb_outbox_new (sb_store_t *store, unsigned dbi, size_t inflight_max, bool fenced_final);

//  Tolerates NULL, and nulls the caller's pointer.
void sb_outbox_destroy (sb_outbox_t **self_p);

//  The key of entry n: 'O' n; on a node of a cluster, 'o' NODE_ID n.
void sb_outbox_key (sb_key_t *k, uint64_t n);

//  Several nodes share one database, so each numbers and sends its own
//  entries: serve, as a node of a cluster, scopes every outbox of the
//  process by its node id before any actor starts (NULL or "": one host,
//  'O' n as always). An entry a node left behind when it died is sent by
//  the node that takes its session's shard (sb_outbox_foreign), or by
//  that node itself when it comes back under its id first: the session
//  actor does one append per command_id, so either way it lands once.
void sb_outbox_scope (const char *node_id);

//  True when key is another node's entry ('o' NODE_ID n, NODE_ID not
//  this process's scope); false on one host and for this node's own.
//  Walk the prefix "o" and keep these to find what other nodes left.
bool sb_outbox_foreign (const void *key, size_t klen);

//  True when an answer with error code `code` (SB_OK included) is the
//  entry's last: it landed, or a retry cannot change the refusal.
bool sb_outbox_final (int code, bool fenced_final);

//  The number of the last entry committed in dbi `dbi`, 0 when empty.
uint64_t sb_outbox_last_stored (sb_store_t *store, unsigned dbi);

//  Every entry up to n is on disk (and may be sent).
void sb_outbox_durable (sb_outbox_t *self, uint64_t n);

//  Every entry up to this one has landed, or was dropped.
uint64_t sb_outbox_acked (sb_outbox_t *self);

//  Entries in flight.
size_t sb_outbox_inflight (sb_outbox_t *self);

//  True when the outbox is known to be empty: the last walk found no entry
//  and none became durable since.
bool sb_outbox_idle (sb_outbox_t *self);

//  Walks the committed entries after `acked`: moves `acked` past those that
//  landed (their deletes may still be pending), and collects up to `max`
//  entries to send (fewer when inflight_max is reached): not in flight, of
//  a session with nothing in flight, in commit order. Each is marked in
//  flight. Returns how many it collected into `out`.
size_t sb_outbox_take (sb_outbox_t *self, sb_outbox_entry_t *out, size_t max);

//  Entry n, taken, was answered: `replied` false when no answer came (it
//  is sent again), else `code` is the reply's (0 for success). Ends its
//  flight. On LANDED and DROPPED the caller deletes the entry.
sb_outbox_fate_t sb_outbox_answered (sb_outbox_t *self, uint64_t n, bool replied, int code);

//  Deletes entry n in a write transaction of its own: for an actor that
//  writes inline. 0, or a store error (the entry is then sent again after
//  a restart, and recognised by its command_id).
int sb_outbox_delete (sb_outbox_t *self, uint64_t n);

#endif

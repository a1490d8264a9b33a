/*  actors/interact/interact_impl.h — what the interact actor's files share.

    Not a public header: only actors/interact.c and the files of
    actors/interact/ include it. The actor is split along its seams:
      interact.c           the actor: its loop, its dispatch table, the requests
      interact/record.c    the interaction record (its vocabulary and
                           transitions: schemas/interaction.h): encoding, decoding, reads of DATA/interact, and the
                           one write function that keeps the indexes in step
      interact/outbox.c    the tape announcements: pending session.append
                           bodies, sent one at a time without blocking the loop
                           (the book is store/outbox.h)
    Every function here runs on the actor's thread.

    The layout of DATA/interact (docs/approvals.md):
      interactions  'I' id                      -> the record (msgpack)
      bycall        'K' run_id call_id          -> id: interact.request is
                                                   idempotent by (run, call)
      index         'A' ~ulid                   -> "" every interaction
                    'S' session_id ~ulid        -> "" by session
                    'R' run_id ~ulid            -> "" by run
                    'T' status ~ulid            -> "" by status
      deadlines     'D' deadline_at id          -> "" pending ones with a deadline
      outbox        'O' n                       -> a session.append body
      commands      'C' id command_id           -> the resolve it named, and
                                                   its reply; 'E' expires id
                                                   command_id -> "" to sweep
                                                   (store/cmdid.h)
    ~ulid is the id's ULID with every byte inverted (255 - b): ULIDs sort by
    time, so the inverted ones sort newest first and a list is a forward
    walk from a prefix, and the inverted bytes of an id prefix are a prefix
    of the inverted id (id_prefix filters are a key range too). */
#ifndef SB_INTERACT_IMPL_H
#define SB_INTERACT_IMPL_H

#include "actors/actor.h"
#include "store/store.h"
#include "cluster/cluster.h"
#include "cluster/forward.h"
#include "store/outbox.h"
#include "bus/client.h"
#include "common/log.h"
#include "schemas/errors.h"
#include "schemas/interaction.h"   /* states, their transitions, decisions, scopes */

#include <string.h>

#define ACTOR "interact"
#define IA_SCHEMA_VERSION 1
#define IA_PREFIX "ia_"
#define IA_PREFIX_LEN 3
#define IA_ID_LEN (IA_PREFIX_LEN + SB_ULID_LEN)

/*  The deadline of an interaction that asks for none (serve
    --approval-deadline S, SWITCHBOARD_APPROVAL_DEADLINE), and the longest
    one (the schema's range of deadline_s). */
#define IA_DEADLINE_DEFAULT_S 900
#define IA_DEADLINE_MAX_S SB_APPROVAL_DEADLINE_MAX_S
/*  How late the deadline timer may fire, at most. */
#define IA_TIMER_MS 250
/*  A tape append that got no answer is sent again after this long (it is
    idempotent by its command_id); one refused as retryable waits the
    retry time, doubled after each refusal up to the timeout. */
#define IA_OUTBOX_TIMEOUT_MS 5000
#define IA_OUTBOX_RETRY_MS 500
/*  A page of interact.list stops before its encoded items pass this many
    bytes (one item can hold 2 MiB of arguments and diff); next_cursor
    continues it. */
#define IA_LIST_BYTES_MAX (6u << 20)

/*  The dbis of DATA/interact, in the order given to sb_store_open. */
enum { DBI_INTERACTIONS, DBI_BYCALL, DBI_INDEX, DBI_DEADLINES, DBI_OUTBOX, DBI_COMMANDS };


typedef struct {
    char interaction_id [IA_ID_LEN + 1];
    char session_id [33];
    char run_id [33];
    char call_id [129];
    char tool [65];
    char risk [17];
    char resolved_by [129];
    char command_id [65];       /* the winning resolve's, for the record; never
                                   in a reply (its replay: DBI_COMMANDS) */
    char *arguments;            /* heap, owned */
    char *summary;              /* heap or NULL */
    char *diff;                 /* heap or NULL */
    char *feedback;             /* heap or NULL */
    ia_status_t status;
    ia_decision_t decision;     /* once resolved */
    ia_scope_t scope;           /* once resolved */
    ia_decision_t default_outcome;
    uint64_t created_at, resolved_at, deadline_at;  /* ms since epoch; 0: none */
    ia_kind_t kind;             /* approval, or budget (docs/usage.md) */
    ia_budget_t budget;         /* kind budget: which one, what was spent, */
    uint64_t spent, limit;      /* and the limit reached */
    uint64_t raise;             /* kind budget, approved: the raise asked; 0: its original amount */
    char *schema;               /* kind elicitation: the requested schema (JSON), heap */
    char *content;              /* kind elicitation, accepted: the values sent (JSON), heap or NULL */
    ia_action_t action;         /* kind elicitation, resolved: accept, decline or cancel */
} ia_t;

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_store_t *store;
    sb_cluster_t *cluster;      /* the node's leases (NULL: every session is ours) */
    sb_forward_t *fwd;          /* requests forwarded to the owners of other shards (cluster/forward.c) */
    sb_enc_t *enc;
    char instance [129];
    uint64_t deadline_s;        /* the server's default deadline */
    uint64_t outbox_next;       /* the next outbox entry's number */
    /* the one tape append in flight (outbox.c) */
    char outbox_corr [33];      /* its request id; "" when none */
    uint64_t outbox_n;          /* its entry */
    int64_t outbox_sent;        /* mono ms when sent */
    int64_t outbox_wait_until;  /* mono ms: no send before (after a refusal) */
    int64_t outbox_backoff;     /* ms: the wait after the last retryable refusal */
    sb_outbox_t *outbox;        /* the book of the appends (store/outbox.h) */
    uint64_t next_deadline;     /* ms since epoch of the earliest deadline; 0: none */
    uint64_t command_ttl_ms;    /* how long a resolve's command_id is remembered */
    uint64_t appended, expired, resolved, requested;
    bool terminated;
} self_t;

static inline void
s_copy (char *dst, size_t n, const char *src)
{
    snprintf (dst, n, "%s", src ? src : "");
}

/*  interact/record.c */
/*  True when `id` has the shape of an interaction id: "ia_" and a ULID. */
bool sb_ia_id_valid (const char *id);
void sb_ia_free (ia_t *ia);
/*  Encodes the record as replies show it (internal fields left out). */
void sb_ia_encode (const ia_t *ia, sb_enc_t *e);
/*  Reads interaction `id` into *ia inside `txn`; 0, or -1 when absent or
    unreadable. The caller frees ia with sb_ia_free. */
int sb_ia_load_txn (sb_txn_t *txn, const char *id, ia_t *ia);
/*  The same in a read transaction of its own. */
int sb_ia_load (self_t *self, const char *id, ia_t *ia);
/*  Writes `ia` (new, or changed from `old_status`) with every index and
    its tape announcement in the outbox, in one durable transaction. 0, or
    a store error. */
int sb_ia_save (self_t *self, ia_t *ia, bool is_new, ia_status_t old_status);
/*  A resolve that names a command_id: remembered with its reply in the
    transaction that saves its answer (store/cmdid.h). */
typedef struct {
    const char *type;           /* the request's type */
    const char *cmd;            /* its command_id */
    const uint8_t *digest;      /* of its body, SB_DIGEST_LEN bytes */
    const uint8_t *reply;       /* the reply it gets */
    size_t reply_len;
} ia_command_t;
/*  sb_ia_save for a change (not a new record) made by a request with a
    command_id; cmd NULL is sb_ia_save. Expired command_ids are swept, a
    few, in the same transaction. */
int sb_ia_save_command (self_t *self, ia_t *ia, ia_status_t old_status, const ia_command_t *cmd);
/*  The key a resolve's command_id is remembered under: scoped to the
    interaction. */
void sb_ia_command_key (sb_key_t *k, const char *id, const char *cmd);
/*  Appends an id's ULID, inverted, to k (newest-first order). */
void sb_ia_key_inverted (sb_key_t *k, const char *ulid, size_t n);

/*  interact.c */
/*  An id prefix as people give it ("ia_" and the start of a ULID, or the
    start alone, in either case): its ULID part, upper case, into out;
    false when it cannot begin an interaction id. */
bool sb_ia_id_prefix (const char *p, char out [SB_ULID_LEN + 1]);

/*  interact/outbox.c */
/*  Sends the oldest pending tape append when none is in flight. */
void sb_ia_outbox_pump (self_t *self);
/*  A reply to one of our requests: true when it was the append in flight. */
bool sb_ia_outbox_reply (self_t *self, const sb_msg_t *reply);
/*  Ms until the outbox wants to run again (-1: nothing pending). */
int64_t sb_ia_outbox_wait (self_t *self);
/*  The number of the last entry in the outbox, 0 when empty. */
uint64_t sb_ia_outbox_last (self_t *self);
/*  Opens the outbox's book once outbox_next is known; 0, or -1 when out
    of memory. */
int sb_ia_outbox_open (self_t *self);

#endif

/*  actors/run/run_impl.h — what the run actor's files share.

    Not a public header: only actors/run.c and the files of actors/run/ include it.
    The actor is split along its seams:
      run.c          the actor: its loop, its dispatch table, the requests
      run/record.c   the run record: encoding, decoding, reads of DATA/run
      run/outbox.c   writes: each change with its outbox entry, the
                     outbox flush, and the session's fence
      run/commit.c   the pending writes and the committer thread
                     (store/committer.h): one durable commit per
                     batch, off the actor thread
      run/lease.c    claims, leases, expiry and recovery at startup
    Every function here runs on the actor's thread (s_apply in
    run/commit.c, which the committer's thread runs, excepted). */
#ifndef SB_RUN_IMPL_H
#define SB_RUN_IMPL_H

#include "actors/actor.h"
#include "store/store.h"
#include "cluster/cluster.h"
#include "cluster/forward.h"
#include "store/committer.h"
#include "store/outbox.h"
#include "bus/client.h"
#include "common/log.h"
#include "schemas/errors.h"
#include "schemas/run_status.h"

#include <string.h>

#define ACTOR "run"
/*  The lease of a local run (exec heartbeats every 2 s); a worker asks
    for its own in run.claim. SWITCHBOARD_LEASE_S sets it, 6 to 3600. */
#define LEASE_MS 30000
#define CALL_MS 5000
#define TICK_MS 250
#define DEFAULT_MAX_STEPS 50
#define DEFAULT_TIMEOUT_S 3600

/*  The dbis of DATA/run, in the order given to sb_store_open. */
enum { DBI_RUNS, DBI_ACTIVE, DBI_BYSESSION, DBI_OUTBOX, DBI_FENCES, DBI_COMMANDS };

typedef struct {
    char run_id [33];
    char session_id [33];
    sb_run_status_t status;
    char phase [32];
    char reason [1024];
    char resume_from [33];
    char owner [129];
    char approval_policy [16];
    char executor [16];
    char pool [64];
    char waiting_for [256];
    char worker_id [65];
    char instance_id [65];
    char kind [16];             /* "": a prompt's run; "compact": compaction only; "rewind" */
    uint64_t rewind_to;         /* rewind: the seq to go back to */
    bool undo;                  /* rewind: undo the session's last rewind */
    bool no_code;               /* rewind: leave the work tree (code: false) */
    bool no_conversation;       /* rewind: leave the model's context (conversation: false) */
    char *input;
    uint64_t fence, created_at, updated_at, started_at, ended_at;
    uint64_t steps, input_tokens, output_tokens;
    bool tokens_known;          /* a model call reported usage: else the tokens are unknown, not 0 */
    uint64_t max_steps, timeout_s, max_output_tokens;
    bool cancel_requested;
} run_t;

typedef struct {
    int64_t expires;            /* mono ms */
    uint64_t lease_ms;          /* its length (0: LEASE_MS) */
    int64_t cancel_by;          /* mono ms: a cancelled worker run's lease ends here, heartbeats or not (0: none) */
    char phase [32];
    uint64_t steps, input_tokens, output_tokens;
    bool tokens_known;
} lease_t;

/*  A request the actor sent and whose reply continues some work: a row of
    self->calls, keyed by the request's id (the reply's corr). fn runs once,
    with the reply, or with NULL when none came within CALL_MS; the table
    then frees arg with arg_free. No handler waits on the bus
    (docs/workers.md, "The run actor never waits"). */
typedef struct self_t self_t;
typedef struct call_s call_t;
typedef void (call_fn) (self_t *self, call_t *call, const sb_msg_t *reply);
struct call_s {
    call_fn *fn;
    char run_id [33];
    uint64_t n;                 /* an outbox entry's number */
    void *arg;
    void (*arg_free) (void *arg);
    int64_t expires;            /* mono ms */
};

/*  The step a run is at while a request of its own is in flight; a run
    has at most one job, so the tick never starts or expires it twice. */
typedef enum {
    JOB_WAIT_OUTBOX,            /* start: its tape entries must land first */
    JOB_FENCE_START,            /* start: session.fence sent */
    JOB_EXEC_START,             /* start: exec.start sent */
    JOB_FENCE_EXPIRE,           /* expiry: session.fence sent */
} job_stage_t;

/*  A worker's run.claim, answered when a run is granted to it, or with
    {} when none comes within its wait_ms. */
typedef struct {
    sb_msg_t *msg;              /* the request, kept to be answered */
    char worker_id [65];
    char pool [65];
    uint64_t lease_ms;
    int64_t expires;            /* mono ms: answer {} then */
} claim_t;

typedef struct {
    job_stage_t stage;
    uint64_t barrier;           /* JOB_WAIT_OUTBOX: the outbox entry to wait for */
    claim_t *claim;             /* a worker run: the claim it is granted to */
} job_t;

/*  A registered worker (memory only: a worker registers again whenever it
    connects, and its runs' leases say the rest). */
typedef struct {
    char worker_id [65];
    char instance_id [65];
    char hostname [256];
    char pool [65];
    char workspace_sync [16];
    char current_run_id [33];
    uint64_t pid, registered_at, last_seen_at;
    uint8_t *caps;              /* the capabilities map, encoded */
    size_t caps_len;
} worker_t;

struct self_t {
    uint64_t born_at;           /* wall ms the actor started: what the tape holds after it, no executor of before saw */
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_store_t *store;
    sb_cluster_t *cluster;      /* the node's leases (NULL: every session is ours) */
    sb_forward_t *fwd;          /* requests forwarded to the owners of other shards (cluster/forward.c) */
    uint64_t kv_shards;         /* the shard of the session being written (sb_run_kv_put) */
    uint64_t shards_seen;       /* the shards held at the last tick (sb_run_shards_changed) */
    uint64_t foreign_due;       /* shards taken whose other nodes' outbox entries are not all sent */
    int64_t foreign_at;         /* mono ms: try them again then */
    uint64_t foreign_sent;      /* other nodes' outbox entries sent (or dropped) since start */
    sb_enc_t *enc;
    char instance [129];
    zhashx_t *leases;           /* run_id -> lease_t */
    uint64_t outbox_next;
    sb_outbox_t *outbox;        /* the book of the appends: in flight, landed, acked */
    bool call_now;              /* the request being sent depends on no pending write */
    bool recovering;            /* startup: writes flush synchronously */
    zhashx_t *calls;            /* request id -> call_t */
    zhashx_t *jobs;             /* run_id -> job_t */
    zlistx_t *held;             /* replies waiting for the outbox (calls.c) */
    sb_bus_t *wbus;             /* the same actor as the `worker` service */
    zhashx_t *workers;          /* worker_id -> worker_t */
    zlistx_t *claims;           /* claim_t waiting for a run, oldest first */
    uint64_t stale_ms, offline_ms;
    uint64_t cancel_grace_ms;   /* how long a worker has to stop a cancelled run (SWITCHBOARD_WORKER_CANCEL_S) */
    uint64_t lease_ms;          /* a local run's lease (LEASE_MS, SWITCHBOARD_LEASE_S) */
    uint64_t command_ttl_ms;    /* how long a command_id is remembered (run/commands.c) */
    int64_t next_sweep;         /* mono ms of the next sweep of expired ones */
    bool legacy_swept;          /* no command row without an expiry row is left */
    int64_t next_tick;
    bool terminated;
    /* run/commit.c: writes pending in memory, and the committer */
    zhashx_t *pending;          /* dbi+key -> the latest pending write */
    zlistx_t *deferred;         /* requests waiting for a batch to be durable */
    sb_committer_t *committer;
    void *batch_inflight;       /* the batch the committer holds */
    uint64_t batch_open;        /* writes made now join this batch */
    uint64_t batch_durable;     /* every batch up to this one is on disk */
    uint64_t kv_need;           /* the batch of the last urgent write */
    bool kv_open_ops, kv_open_urgent;
    uint64_t open_outbox_max, inflight_outbox_max;  /* the last outbox entry of a batch */
    uint64_t commits, commit_failures;
    int64_t commit_retry_at;    /* mono ms: after a failed commit, not before */
};

static inline void
s_copy (char *dst, size_t n, const char *src)
{
    snprintf (dst, n, "%s", src ? src : "");
}

/*  run/commands.c: the remembered command_ids of run.request and
    run.resume, which expire (SWITCHBOARD_COMMAND_TTL_S, 24 h). */
void sb_run_commands_init (self_t *self);
/*  msg's command_id, in the session's scope: 0 none (carry it out), 1 the
    same request made the run *r (loaded; the caller answers and frees),
    -1 answered here (conflict, or an internal error). */
int sb_run_command_find (self_t *self, const sb_msg_t *msg, const char *session_id, run_t *r);
/*  Remembers msg's command_id with the run it made. */
void sb_run_command_remember (self_t *self, const sb_msg_t *msg, const run_t *r);
/*  Deletes expired command_ids, at most once a minute (the actor's tick). */
void sb_run_commands_sweep (self_t *self);

/*  run/commit.c: group commit on a committer thread (see there). The
    actor's reads go through sb_run_kv_get/scan, which see its pending
    writes; its writes through sb_run_kv_put/del. */
int sb_run_kv_open (self_t *self);
/*  Commits what is pending (waits), then stops the committer. */
void sb_run_kv_close (self_t *self);
int sb_run_kv_put (self_t *self, unsigned dbi, const void *key, size_t klen, const void *val, size_t vlen);
/*  A delete; urgent false: it may ride with a later batch (nothing
    acknowledged waits for it). */
int sb_run_kv_del (self_t *self, unsigned dbi, const void *key, size_t klen, bool urgent);
/*  A copy of the value (the caller frees it); 0, or -1 when absent. */
int sb_run_kv_get (self_t *self, unsigned dbi, const void *key, size_t klen, uint8_t **val_p, size_t *len_p);
typedef void (sb_run_kv_fn) (const void *key, size_t klen, const void *val, size_t vlen, void *arg);
/*  Every key under prefix as the actor sees it: committed rows in key
    order, then pending puts in no order. */
int sb_run_kv_scan (self_t *self, unsigned dbi, const void *prefix, size_t plen, sb_run_kv_fn *fn, void *arg);
/*  Hands the open batch to the committer when it is idle and the batch
    holds an urgent write (or anything, with force). */
void sb_run_commit_submit (self_t *self, bool force);
/*  The committer's fd, readable once a commit returned: for the
    actor's poll. */
int sb_run_commit_fd (self_t *self);
/*  Reads the committer's answers; what waited for them goes out. */
void sb_run_commit_ready (self_t *self);
/*  Startup and shutdown: commits everything pending and waits. */
void sb_run_commit_wait (self_t *self);
/*  True while the committer holds a batch (and LMDB's write lock). */
bool sb_run_commit_busy (self_t *self);
/*  True when every urgent write made so far is durable. */
bool sb_run_commit_durable (self_t *self);
/*  Keeps a request (and its call row; NULL: a push, no reply awaited) to
    send once the writes made so far are durable; false when nothing
    waits (send it now). */
bool sb_run_call_defer (self_t *self, const char *type, const char *key, const char *to, const uint8_t *body,
                        size_t len, call_t *call);

/*  Shortens a cancelled worker run's lease to the cancel's grace: a
    worker that does not stop is fenced and the run cancelled when it
    lapses (run/workers.c). */
void sb_run_worker_cancel_lease (self_t *self, const run_t *r);

/*  run/record.c */
void sb_run_record_free (run_t *r);
/*  Encodes `limits` and the run's limits map (in the record and in
    exec.start alike). */
void sb_run_limits_encode (const run_t *r, sb_enc_t *e);
//  A rewind's fields (rewind_to, undo, code, conversation), for the run
//  record, exec.start and a worker's claim.
void sb_run_rewind_encode (const run_t *r, sb_enc_t *e);
/*  Encodes the record as the wire shows it; a live lease gives the phase,
    the counters and lease_expires_at. */
void sb_run_record_encode (const run_t *r, const lease_t *lease, sb_enc_t *e);
/*  Reads run `run_id` into *r; 0, or -1 when absent or unreadable. The
    caller frees r with sb_run_record_free. */
int sb_run_record_load (self_t *self, const char *run_id, run_t *r);
/*  The ids of every unfinished run (one per session at most). The caller
    destroys the list. */
zlistx_t *sb_run_active_ids (self_t *self);
/*  On a node of a cluster, at each tick: ends as a restart does the runs
    of the shards gained since the last tick, and stops the local runs
    of the shards lost (run/lease.c). */
void sb_run_shards_changed (self_t *self);
/*  The session's unfinished run into out [33]; 0, or -1 when it has none. */
int sb_run_active_run (self_t *self, const char *session_id, char *out);

/*  run/outbox.c */
/*  Persists a run change (and its tape entry when the status changed),
    then flushes the outbox. Returns 0 or a store error. */
int sb_run_save (self_t *self, run_t *r, bool is_new, bool status_changed, const char *prompt);
int sb_run_save_prompt (self_t *self, run_t *r, const char *prompt, const sb_val_t *images);
/*  Gives the run its session's next fence, persisted with it. */
int sb_run_save_new_fence (self_t *self, run_t *r);
/*  Moves the run to `status` in memory when the transition table
    (schemas/run_status.h) has the move; otherwise logs it, changes
    nothing and returns SB_E_conflict, so the caller writes nothing. */
sb_err_t sb_run_set_status (run_t *r, sb_run_status_t status, const char *reason);
/*  Sends the pending tape appends that may go (one per session at a
    time); each reply sends more. Never waits. */
void sb_run_outbox_flush (self_t *self);
/*  Opens the outbox's book once outbox_next is known; 0 or -1. */
int sb_run_outbox_open (self_t *self);
void sb_run_outbox_close (self_t *self);
/*  Startup only (before the actor serves): sends every pending append and
    waits for each. */
void sb_run_outbox_drain (self_t *self);
/*  A takeover: sends what other nodes' outboxes hold for the sessions of
    `shards` (waits for each answer); true when nothing is left. */
bool sb_run_outbox_foreign (self_t *self, uint64_t shards);
/*  Startup only: tells the session actor the run's fence and waits; 0
    once it has it. */
int sb_run_fence_session (self_t *self, run_t *r);
/*  Sends session.fence for the run; fn continues with the reply. */
int sb_run_fence_session_async (self_t *self, const run_t *r, call_fn *fn);

/*  run/calls.c */
zhashx_t *sb_run_calls_new (void);
void sb_run_calls_destroy (zhashx_t **table_p);
/*  Sends a request whose reply continues in fn (body: the encoded map in
    e). Takes arg. On a send failure fn runs at once with NULL and -1 is
    returned. */
int sb_run_call (self_t *self, const char *type, const char *key, const char *to, sb_enc_t *e,
                 call_fn *fn, const char *run_id, uint64_t n, void *arg, void (*arg_free) (void *));
/*  A reply to one of our calls: runs its continuation. False when the
    reply answers nothing we wait for (a late one, or a push's). */
bool sb_run_call_reply (self_t *self, const sb_msg_t *reply);
/*  Runs the continuation of every call past its deadline with NULL. */
void sb_run_calls_expire (self_t *self);
/*  The job of a run, or NULL; sb_run_job_set makes or updates it. */
job_t *sb_run_job (self_t *self, const char *run_id);
void sb_run_job_set (self_t *self, const char *run_id, job_stage_t stage, uint64_t barrier);
void sb_run_job_end (self_t *self, const char *run_id);
/*  Answers msg on bus once every outbox entry written so far has landed
    (at once when none is pending). */
void sb_run_reply_landed (self_t *self, sb_bus_t *bus, sb_msg_t *msg, const uint8_t *body, size_t len);
/*  Sends the held replies whose entries landed (or that waited too long). */
void sb_run_held_flush (self_t *self);
void sb_run_held_destroy (self_t *self);
/*  Takes over a received message (its route, header and body) so that a
    continuation can answer it later; the original is left empty. */
sb_msg_t *sb_run_msg_keep (sb_msg_t *msg);

/*  run/workers.c */
/*  The worker registry and the claims (docs/workers.md). */
int sb_run_workers_open (self_t *self, const sb_actor_args_t *args);
void sb_run_workers_close (self_t *self);
void sb_run_handle_claim (self_t *self, sb_msg_t *msg);
/*  A message on the worker bus (worker.*). */
void sb_run_handle_worker_bus (self_t *self);
/*  Answers the claims whose wait is over with {}. */
void sb_run_claims_expire (self_t *self);
/*  A queued worker run: hands it to a waiting claim, or says why it waits.
    True when a claim took it. */
bool sb_run_offer (self_t *self, run_t *r);
/*  The fence of a claimed run reached the session: answers the claim. */
void sb_run_grant (self_t *self, run_t *r, claim_t *claim);
/*  Answers a claim with {} and frees it. */
void sb_run_claim_drop (self_t *self, claim_t **claim_p);
/*  A worker was heard from (claim, heartbeat, completion). */
worker_t *sb_run_worker_seen (self_t *self, const char *worker_id);
/*  The run left the worker (completed, expired). */
void sb_run_worker_release (self_t *self, const run_t *r);

/*  run/lease.c */
/*  The fence step of a start (also after a claim): see lease.c. */
void sb_run_start_fence (self_t *self, const char *run_id);
/*  Hands a queued run to an executor (exec.start), or notes what it
    waits for. The start goes on in steps, each continued by a reply. */
void sb_run_start (self_t *self, run_t *r);
/*  Continues the starts that waited for the outbox. */
void sb_run_jobs_advance (self_t *self);
/*  The same for every queued run. */
void sb_run_start_queued (self_t *self);
/*  Pushes exec.cancel to the instance that owns the run. */
void sb_run_push_cancel (self_t *self, const run_t *r);
void sb_run_expire_leases (self_t *self);
void sb_run_recover (self_t *self);

/*  run/recover.c */
/*  Whether the unfinished run `r` was waiting for an approval, by its
    tape: its first call without a result has a pending (or rejected)
    approval. The interaction's id into interaction_id. */
bool sb_run_recover_waiting (self_t *self, const run_t *r, uint64_t after_ms, char *interaction_id, size_t size);

#endif

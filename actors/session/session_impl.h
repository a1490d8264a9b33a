/*  actors/session/session_impl.h — what the session actor's files share.

    Not a public header: only actors/session.c and the files in
    actors/session/ include it. The actor is split along its seams:
      session.c           the actor: its loop, the drain (group commit),
                          the answers
      session/requests.c  each request type: the checks made before the
                          transaction, the writes inside it
      session/reads.c     the reads (get, list, events), after the commit
      session/store.c     the layout of DATA/session: records, the tape,
                          remembered commands, sweeping and purging
    Every function here runs on the actor's thread. */
#ifndef SB_SESSION_IMPL_H
#define SB_SESSION_IMPL_H

#include "actors/session.h"
#include "store/committer.h"
#include "store/store.h"
#include "cluster/cluster.h"
#include "cluster/forward.h"
#include "store/cmdid.h"
#include "bus/client.h"
#include "common/digest.h"
#include "common/log.h"

#include <czmq.h>

#define ACTOR "session"

//  The longest last_prompt kept in a record, in bytes.
#define LAST_PROMPT_MAX     200
//  Caps on one drain. The entry cap also keeps a transaction far below
//  LMDB's dirty-page limit (SB_STORE_TXN_FULL).
#define BATCH_MAX_MSGS      4096
#define BATCH_MAX_ENTRIES   16384
#define BATCH_MAX_BYTES     ((size_t) 64 << 20)
//  Tape entries removed per transaction when a session is deleted.
#define PURGE_CHUNK         10000
//  Expired command ids removed per transaction.
#define SWEEP_CHUNK         256
#define MAX_STEPS_MAX       10000
#define LABEL_KEY_MAX       64
#define LABEL_VALUE_MAX     1024
//  The bytes of records one session.list page holds at most (its reply
//  is bounded at 1 MiB; a record with 256 rules takes about 300 KiB).
#define LIST_BYTES_MAX      (768 * 1024)
//  Past the tape quota, a run may still record how it ended: run.status
//  and turn.end entries take up to this many bytes more.
#define QUOTA_RESERVE       (64 * 1024)
//  A body's size limit when its kind declares none: session.append's.
#define ENTRY_BYTES_MAX     (8u << 20)
#define ARENA_CHUNK         (64 * 1024)
//  The longest a drain waits for more writes to share its commit.
#define GATHER_MAX_US       2000
//  Conversation cuts one session keeps (rewinds of its conversation that
//  are in force); a rewind past them is refused: fork the session instead.
#define SB_SESSION_CUTS_MAX 64
//  Entries and bytes a fork copies in its one transaction, at most.
#define FORK_ENTRIES_MAX    BATCH_MAX_ENTRIES
#define FORK_BYTES_MAX      BATCH_MAX_BYTES

//  The dbis of DATA/session, in the order given to sb_store_open.
enum { DBI_SESSIONS, DBI_TAPE, DBI_STATUS, DBI_COMMANDS, DBI_EXPIRY, DBI_PURGE, DBI_QUEUE, DBI_USAGE };

//  What a request asks of the session actor: the index of its row in
//  sb_session_ops (actors/session.c). From OP_PROMPT to OP_STEER_TAKE the
//  ops are the queue's (actors/session/queue.c); from OP_Q_REMEMBER on,
//  internal ones the actor gives itself, which no bus type names.
typedef enum {
    OP_CREATE, OP_GET, OP_LIST, OP_UPDATE, OP_CLOSE, OP_DELETE, OP_APPEND, OP_EVENTS, OP_FENCE,
    OP_PROMPT, OP_Q_LIST, OP_Q_REMOVE, OP_Q_RESUME, OP_STEER_TAKE, OP_COMPACT, OP_REWIND, OP_FORK, OP_USAGE,
    OP_ATTACH,
    OP_Q_REMEMBER, OP_Q_DEQUEUE, OP_Q_START_FAILED, OP_Q_RESTART,
    OP__COUNT
} op_t;

//  A bump allocator whose pointers stay put until it is reset: strings
//  and records that must live until the drain's replies are sent.
typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas (16) uint8_t data [];
} chunk_t;

//  A session record being worked on. Strings point into `doc` (read from
//  the store), into a request's body, or into the arena.
typedef struct {
    sb_doc_t *doc;
    const char *session_id, *status, *title, *workspace, *provider, *model;
    const char *approval_policy, *last_run_id, *turn_status;
    const char *target;         /* local | worker:POOL (docs/workers.md) */
    const char *last_prompt;    //  the first line of the latest prompt, cut
    const sb_val_t *labels;
    const sb_val_t *rules;      //  approval rules (docs/approvals.md); NULL: none
    uint64_t approval_deadline_s;   //  with has_deadline; else the server's default
    bool has_deadline;
    const sb_val_t *mcp_servers;    //  NULL: all the executor's MCP servers
    bool network;               //  its tools may reach the network (docs/sandbox.md)
    bool mcp_sampling;          //  its MCP servers may ask for a model call (docs/mcp.md)
    uint64_t created_at, updated_at, max_steps, last_seq, config_version, fence;
    uint64_t last_activity_at;  //  the latest prompt or run status, ms
    uint64_t tape_bytes;        //  bytes of appended entry bodies (the quota's measure)
    uint64_t quota_noted;       //  the quota a tape.quota entry was written for; 0: none
    uint64_t compacted_seq;     //  the newest summarizing context.compacted; 0: none
    uint64_t budget [4];        //  per run, in ia_budget_t order (schemas/interaction.h); 0: none
    const char *budget_notice;  //  a budget that cannot be enforced, and why; NULL: none
    const char *forked_sid;     //  a fork: its source, and the source's seq it was cut at
    uint64_t forked_seq;
    //  The conversation's cuts (docs/checkpoints.md): the model's context
    //  skips the entries after cut_after [k] and before cut_before [k], the
    //  session.rewound entry that made the cut. Oldest first.
    uint64_t cut_after [SB_SESSION_CUTS_MAX], cut_before [SB_SESSION_CUTS_MAX];
    uint32_t ncuts;
    bool dirty, deleted;
    bool q_forward;             //  a prompt of this drain starts a run (queue.c)
} record_t;

//  One prepared tape entry of an append: its kind and its encoded body.
typedef struct {
    const char *kind;
    const sb_val_t *body;
    size_t off, len;            //  in self->prep
} span_t;

//  One committed entry to publish: its bytes in self->tape.
typedef struct {
    const char *sid;
    size_t off, len;
} pub_t;

typedef struct {
    sb_msg_t *msg;
    op_t op;
    bool write;
    bool addressed;             //  takes a session_id
    const char *sid;            //  the session addressed (create: the new id)
    const char *cmd;            //  command_id, or NULL
    //  With cmd: what the command is remembered under (store.c, s_command_key)
    //  and the digest of the request's body, which a retry must match.
    const char *cmd_sid, *cmd_from;
    uint8_t cmd_digest [SB_DIGEST_LEN];
    const char *workspace;      //  create/update: the realpath
    const char *run_id;
    uint64_t fence;
    bool has_fence;
    bool batch_form;
    size_t span0, nspans;
    //  Found before the transaction; the write function skips the request.
    sb_err_t prep_err;
    //  The outcome, recomputed by every run of the write function.
    sb_err_t err;
    char errmsg [256];
    size_t reply_off, reply_len;    //  in self->replies
    size_t pub0, npubs;
    uint64_t first_seq, last_seq;
    bool replayed;
    bool changed;
    bool internal;              //  given by the actor itself: no reply
    bool q_forward;             //  session.prompt: forwarded as run.request after the commit
    bool q_force_busy;          //  session.prompt the run coordinator refused: queue it
    //  session.fork: the new session's id; a refused cut's nearest valid
    //  seqs (0: none), sent as the error's detail
    const char *fork_sid;
    uint64_t valid_before, valid_after;
    bool cut_refused;
} req_t;

typedef struct self {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_pub_t *pub;
    sb_store_t *store;
    struct _sb_cluster_t *cluster;  //  the node's leases (NULL: every session is ours)
    sb_forward_t *fwd;          //  requests forwarded to other nodes (cluster/forward.c); NULL: none yet
    struct sb_session_relay *relay; //  other nodes' events published here (relay.c)
    char instance [129];
    bool terminated;
    uint64_t command_ttl_ms;
    uint64_t tape_quota;        //  bytes of tape one session may hold
    char data_dir [4096];       //  DATA: its checkpoints/ folder is a fork's and a delete's to use
    char blob_dir [4200];       //  DATA/blobs: the images a prompt names (common/blob_ref.h)

    //  The current drain
    uint64_t now;               //  its timestamp: every entry's ts
    req_t *reqs;
    size_t nreqs, reqs_cap;
    span_t *spans;
    size_t nspans, spans_cap;
    pub_t *pubs;
    size_t npubs, pubs_cap;
    record_t **recs;            //  the drain's record cache
    size_t nrecs, recs_cap;
    zhashx_t *rec_index;        //  session id -> record_t *
    zhashx_t *forwards;         //  run.request id -> what it starts (prompt.c)
    zhashx_t *starting;         //  session id -> its forward in flight (no destructor)
    zlistx_t *q_pump;           //  session ids whose queue may start a run
    uint64_t queue_max;         //  prompts one session's queue may hold
    uint64_t steers_max;        //  steers one session may have pending
    uint64_t queue_bytes;       //  bytes of text its queue and steers may hold
    zhashx_t *compacts;         //  run.request id -> a session.compact to answer
    chunk_t *arena;
    sb_enc_t *enc;              //  replies sent at once (reads)
    sb_enc_t *prep;             //  prepared entry bodies
    sb_enc_t *tape;             //  entries written by the drain, as stored
    sb_enc_t *replies;          //  reply bodies of the drain's writes
    sb_enc_t *scratch;          //  records and bodies on their way in
    size_t drain_writes;        //  write requests taken
    size_t drain_entries;       //  tape entries (or requests) taken
    size_t drain_bytes;         //  estimated bytes of the appends taken
    size_t writers;             //  how many write requests a drain may expect
    int64_t gather_us;          //  how long this drain waited for them
    int64_t last_commit_us;     //  how long the last commit took
    int64_t drain_fn_us;        //  of which the write function's own work
    uint64_t drain_min_expiry;  //  earliest expiry remembered by the drain
    bool drain_purge;           //  the drain left a tape to purge
    size_t nprepared;           //  requests of the drain checked already

    //  The committer (store/committer.c): while it commits one
    //  drain, `shadow` holds that drain (its fields above, and a copy of
    //  the rest that the write function only reads) and self takes the
    //  next one into the buffers the shadow held before.
    sb_committer_t *committer;
    struct self *shadow;
    sb_msg_t *held;             //  taken during a commit, waits for its end
    int64_t commit_t0;          //  when the commit in flight started

    //  Housekeeping
    uint64_t next_expiry;       //  earliest remembered command expiry; 0: none
    bool purge_pending;
    sb_ratelimit_t rl;
    uint64_t appended;          //  entries since start
    uint64_t commits;
} self_t;

//  Keys: a tag byte, then NUL-terminated strings and big-endian integers
//  (sb_key_*), so that byte order is the order we list in.

static inline void
s_key_session (sb_key_t *k, const char *sid)
{
    sb_key_init (k, 'S');
    sb_key_str (k, sid);
}

static inline void
s_key_tape (sb_key_t *k, const char *sid, uint64_t seq, bool with_seq)
{
    sb_key_init (k, 'T');
    sb_key_str (k, sid);
    if (with_seq)
        sb_key_u64 (k, seq);
}

static inline void
s_key_status (sb_key_t *k, const char *status, const char *sid)
{
    sb_key_init (k, 'I');
    sb_key_str (k, status);
    if (sid)
        sb_key_str (k, sid);
}

//  A remembered command (store/cmdid.h) is scoped by two strings:
//  session_id, then from. A command_id names a request within its scope,
//  never across scopes: a request that addresses a session is scoped to
//  that session (and `from` is empty, so that a writer that comes back
//  under another name, such as the run actor after a restart, still finds
//  its own commands); session.create, which has no session yet, is scoped
//  to its requester's name (the header's `from`, with session_id empty).
//  Keys of the older global layout ('C' command_id) hold one string,
//  never three, so they are never found, only swept.

static inline void
s_key_purge (sb_key_t *k, const char *sid)
{
    sb_key_init (k, 'P');
    sb_key_str (k, sid);
}

//  One row of the session actor's table, sb_session_ops (actors/session.c),
//  indexed by op: everything about a request type in one place. A request
//  the drain takes is checked by the common checks and then `prepare`
//  before the transaction (NULL: nothing more to check); then either
//  `write` runs it inside the drain's one transaction, on the committer's
//  thread when it has one, or `read` answers it from a read transaction
//  after the commit. A row with `take` is not taken into the drain as it
//  comes: `take` decides (it may answer at once, or forward it), and it
//  waits for a commit in flight to end.
typedef void (op_take_fn) (self_t *self, sb_msg_t **msg_p);
typedef void (op_prepare_fn) (self_t *self, req_t *req);
typedef void (op_run_fn) (self_t *self, sb_txn_t *txn, req_t *req);
typedef struct {
    const char *type;           //  first (sb_dispatch_index); NULL: an internal op
    bool addressed;             //  takes a session_id
    op_take_fn *take;
    op_prepare_fn *prepare;
    op_run_fn *write;
    op_run_fn *read;
} op_row_t;
extern const op_row_t sb_session_ops [OP__COUNT + 1];

//  session.c: the drain's memory

//  From the drain's arena: valid until the drain ends. NULL when out of
//  memory.
void *sb_session_alloc (self_t *self, size_t n);
char *sb_session_strdup (self_t *self, const char *s);
//  Room for one more element in a growable array; false when out of memory.
bool sb_session_reserve (void **array, size_t *cap, size_t count, size_t elem);
//  Fails the request with `code` and a message naming what is wrong.
void sb_session_fail (req_t *req, sb_err_t code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

//  session/requests.c

//  Everything about a request that does not depend on the store: the
//  checks every request has, then its row's prepare. What fails here is
//  final (req->prep_err).
void sb_session_prepare (self_t *self, req_t *req);
//  The rows' prepare and write functions for the session's own requests.
void sb_session_prepare_create (self_t *self, req_t *req);
void sb_session_prepare_update (self_t *self, req_t *req);
void sb_session_prepare_append (self_t *self, req_t *req);
void sb_session_write_create (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_write_update (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_write_close (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_write_delete (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_write_append (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_write_fence (self_t *self, sb_txn_t *txn, req_t *req);
//  actors/session/attach.c: session.attach, a person's file as an artifact
void sb_session_prepare_attach (self_t *self, req_t *req);
void sb_session_write_attach (self_t *self, sb_txn_t *txn, req_t *req);

//  actors/session/mcp_servers.c: the mcp_servers field of create and
//  update. _ok fails req (invalid) on a name that no server could have;
//  sb_session_mcp_servers gives what the record keeps: NULL (all) for
//  ["*"] or no field, else the array itself.
bool sb_session_mcp_servers_ok (req_t *req, const sb_val_t *names);
const sb_val_t *sb_session_mcp_servers (const sb_val_t *names);
//  The drain's write function for sb_store_write: every write of the
//  drain, re-runnable from scratch.
int sb_session_drain_fn (sb_txn_t *txn, void *arg);

//  session/reads.c: the rows' read functions. Each answers a read from
//  `txn`; a failure is left in req->err for the caller to send.
void sb_session_read_get (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_read_list (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_read_events (self_t *self, sb_txn_t *txn, req_t *req);

//  actors/session/usage.c: a usage entry of session sid (run run_id, or
//  NULL) added to the totals, in the append's transaction; session.usage.
void sb_session_usage_note (self_t *self, sb_txn_t *txn, const char *sid, const char *run_id,
                            const sb_val_t *body);
//  A usage entry that leaves a budget of r unenforceable (no token counts,
//  no price) sets r's budget_notice, once.
void sb_session_usage_budget_check (self_t *self, record_t *r, const sb_val_t *body);
//  session.create / session.update's budget map into r (only the budgets
//  it names; 0 removes one). True when one changed.
bool sb_session_budget_take (record_t *r, const sb_val_t *budget);
void sb_session_budget_encode (sb_enc_t *enc, const record_t *r);
void sb_session_read_usage (self_t *self, sb_txn_t *txn, req_t *req);
int64_t sb_session_usage_day (const char *date);

//  session/forward.c: on a node of a cluster, a request that changes a
//  session of another node's shard is forwarded to that node and its
//  answer relayed (cluster/forward.h). True when it took *msg_p
//  (forwarded, or answered); false to take it as usual (the drain refuses
//  it not_owner when no owner can be reached).
bool sb_session_forward (self_t *self, sb_msg_t **msg_p, op_t op);

//  session/relay.c: on a node of a cluster, the session.events other
//  nodes publish for the sessions they own are published here too, for
//  this node's followers. items: the sockets to poll (at most max);
//  recv: relays what came; wait: the longest the loop may sleep.
#define SB_SESSION_RELAY_MAX 16
typedef struct sb_session_relay sb_session_relay_t;
size_t sb_session_relay_items (self_t *self, zmq_pollitem_t *items, size_t max);
void sb_session_relay_recv (self_t *self);
int64_t sb_session_relay_wait (self_t *self);
void sb_session_relay_destroy (self_t *self);

//  session/store.c: records (through the drain's cache)

void sb_session_record_encode (sb_enc_t *enc, const record_t *r);
//  Session `sid`'s stored record into *v (valid until the txn ends).
//  False with req failed (not_found) or with the txn's error set.
bool sb_session_record_load (sb_txn_t *txn, req_t *req, const char *sid, sb_datum_t *v);
//  The drain's copy of session `sid`, from the cache or the store. NULL
//  with req failed (not_found, internal) or with the txn's error set.
record_t *sb_session_record_get (self_t *self, sb_txn_t *txn, req_t *req, const char *sid);
record_t *sb_session_record_new (self_t *self, const char *sid);
void sb_session_cache_reset (self_t *self);
//  Writes every record the drain changed, once each.
void sb_session_cache_flush (self_t *self, sb_txn_t *txn);

//  session/store.c: the tape

//  Writes entry `seq` of r's tape and queues it for publishing.
void sb_session_tape_put (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, uint64_t seq,
                          const char *kind, const uint8_t *body, size_t body_len);
//  Writes the entry encoded in self->tape from `off` to its end as entry
//  `seq` of r's tape, and queues it: 0, or -1 with the txn's error set.
int sb_session_tape_put_raw (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, uint64_t seq, size_t off);
//  Appends a session.created / session.updated entry holding the record.
void sb_session_tape_put_record (self_t *self, sb_txn_t *txn, req_t *req, record_t *r,
                                 const char *kind, const char *const *changed, size_t nchanged);
//  Removes up to `max` entries of sid's tape; *done when none remain.
size_t sb_session_tape_purge (sb_txn_t *txn, const char *sid, size_t max, bool *done);

//  session/store.c: idempotency and housekeeping

//  True when req is answered by a remembered command_id.
bool sb_session_command_replay (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_command_remember (self_t *self, sb_txn_t *txn, req_t *req);
//  One small transaction of each; they update self's schedule.
void sb_session_sweep (self_t *self);
void sb_session_purge (self_t *self);
//  What startup must know without scanning the tape.
void sb_session_recover (self_t *self);

//  session.c: takes a request into the drain as `op` (it owns the
//  message from then on); NULL when out of memory (the message is then
//  answered and freed). A message without a route is the actor's own
//  (internal).
req_t *sb_session_take (self_t *self, sb_msg_t **msg_p, op_t op);

//  session/prompt.c: run.request sent for a session.prompt or for the
//  queue's next prompt, and their answers.
zhashx_t *sb_session_forwards_new (void);
//  After the commit: sends run.request for a prompt the drain decided to
//  start; takes req->msg.
void sb_session_prompt_forward (self_t *self, req_t *req);
void sb_session_prompt_check_images (self_t *self, req_t *req);
//  Sends run.request for the queue's next prompt (command_id derived from
//  prompt_id), with the image references it kept (or NULL). False when it
//  could not be sent; an image the session no longer holds pauses the
//  queue instead, saying which.
bool sb_session_prompt_start (self_t *self, const char *sid, const char *prompt_id, const char *text,
                              const sb_val_t *images, const char *policy);
bool sb_session_prompt_reply (self_t *self, sb_msg_t **reply_p);
//  Whether a forwarded session.prompt with command_id `cmd` is in flight
//  for the session (a retry then goes the same way).
bool sb_session_prompt_in_flight (self_t *self, const char *sid, const char *cmd);
//  Whether the queue's prompt `prompt_id` is being started.
bool sb_session_prompt_starting (self_t *self, const char *sid, const char *prompt_id);
void sb_session_prompt_expire (self_t *self);
//  Whether a request of ours waited past its time (the loop then runs the
//  bus handler, which answers for it, even when nothing arrives).
bool sb_session_prompt_due (self_t *self);

//  session/queue.c: the queue of prompts and the pending steers
//  (docs/queue.md).
#define SB_QUEUE_MAX_DEFAULT        100
#define SB_QUEUE_STEERS_DEFAULT     16
#define SB_QUEUE_BYTES_DEFAULT      ((uint64_t) 16 << 20)
//  A message of the actor to itself, with `body` (an encoded map).
sb_msg_t *sb_session_queue_msg (const char *type, const uint8_t *body, size_t len);
//  The rows' prepare functions of the queue's requests: the checks made
//  before the transaction.
void sb_session_queue_prepare_prompt (self_t *self, req_t *req);
void sb_session_queue_prepare_remove (self_t *self, req_t *req);
void sb_session_queue_prepare_steer_take (self_t *self, req_t *req);
void sb_session_queue_prepare_remember (self_t *self, req_t *req);
//  The rows' write functions of the queue's requests, inside the drain.
void sb_session_queue_write_prompt (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_queue_write_remove (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_queue_write_resume (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_queue_write_steer_take (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_queue_write_remember (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_queue_write_dequeue (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_queue_write_start_failed (self_t *self, sb_txn_t *txn, req_t *req);
void sb_session_queue_write_restart (self_t *self, sb_txn_t *txn, req_t *req);
//  After an append: what its run.status entries mean for the queue.
void sb_session_queue_on_append (self_t *self, sb_txn_t *txn, req_t *req, record_t *r);
//  session.delete: forgets the queue with the session.
void sb_session_queue_drop (sb_txn_t *txn, const char *sid);
void sb_session_queue_read (self_t *self, sb_txn_t *txn, req_t *req);
//  session.steer.take with nothing pending: answered at once (true).
bool sb_session_queue_take_none (self_t *self, const sb_msg_t *msg);
//  Marks a session whose queue may now start a run.
void sb_session_queue_check (self_t *self, const char *sid);
//  Starts the next prompt of every marked session that is idle.
void sb_session_queue_pump (self_t *self);
//  At startup: takes one internal request per session whose queue holds
//  something (pause it, steers back to the front). Returns how many.
size_t sb_session_queue_recover (self_t *self);

//  session/requests.c: what one entry appended (or copied by a fork)
//  changes in its session's record; r->last_seq is the entry's seq.
bool sb_session_new_id (self_t *self, req_t *req, char id [SB_ULID_LEN + 1]);
void sb_session_note_entry (self_t *self, record_t *r, const char *kind, const sb_val_t *body);

//  session/fork.c: session.fork (docs/checkpoints.md).
void sb_session_fork_take (self_t *self, sb_msg_t **msg_p);
void sb_session_prepare_fork (self_t *self, req_t *req);
void sb_session_write_fork (self_t *self, sb_txn_t *txn, req_t *req);
//  An error reply for a cut that is not a step boundary, with the nearest
//  valid seqs in its detail.
void sb_session_fork_refuse (self_t *self, const sb_msg_t *msg, const char *message, uint64_t before,
                             uint64_t after);
//  What a tape says about seq `at` (fork.c): whether it is a step
//  boundary, the nearest ones, and the checkpoint of the work tree there.
typedef struct {
    bool valid;
    const char *inside;         //  !valid: what the cut is inside
    uint64_t valid_before, valid_after;     //  0: none
    uint64_t ckpt_seq;          //  seq_of of the checkpoint at or before at; 0: none
    uint64_t first_ckpt;        //  seq_of of the session's first checkpoint; 0: none
    char commit [80], tree [80];
    bool shadow;
} sb_session_cut_t;
//  Reads sid's tape in txn from seq 1 to what it needs past `at`.
void sb_session_cut_scan (sb_txn_t *txn, const char *sid, uint64_t at, sb_session_cut_t *cut);
//  session/compact.c: session.compact forwarded as a compact run.
zhashx_t *sb_session_compacts_new (void);
void sb_session_compact (self_t *self, sb_msg_t **msg_p);
bool sb_session_compact_reply (self_t *self, const sb_msg_t *reply);
void sb_session_compact_expire (self_t *self);

#endif

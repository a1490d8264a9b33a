/*  actors/session.c — sessions and their tape, on LMDB (docs/architecture.md).

    The tape is the ordered, durable log of a session. This actor is its
    only writer: it assigns each entry the next seq, commits it, and only
    then acknowledges it and publishes it on `session/<id>`.

    Group commit. One poll wake-up drains every request waiting on the bus
    (within caps on messages, entries and bytes), checks what can be
    checked without the store, runs every write of the drain in ONE write
    transaction (sb_store_write), commits it durably, and only then sends
    the replies and publishes the events. Reads are answered afterwards
    from a read transaction, so they see the drain's writes. The write
    function may run more than once (the map grows and it starts over), so
    it sends nothing and consumes nothing: everything it produces lives in
    buffers that each run resets.

    The files: this one is the actor (its loop, its table of request
    types, sb_session_ops, whose row names each type's prepare, write and
    read functions, the drain, the answers); actors/session/requests.c
    handles each request type of the drain, actors/session/reads.c
    answers the reads after the commit, actors/session/queue.c and
    queue_store.c the queue's requests, actors/session/store.c keeps the layout of
    DATA/session (docs/sessions.md), and actors/session/prompt.c forwards
    session.prompt to the run coordinator.

    Memory. No session is kept in RAM between drains: LMDB's pages are the
    cache, and they are file-backed. The per-drain record cache is freed
    at the end of each drain. */
#include "actors/session/session_impl.h"
#include "common/blob.h"
#include "actors/actor.h"
#include "common/git_checkpoint.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

//  The dbis, in DBI_* order.
static const char *const s_dbi_names [] = {
    "sessions", "tape", "status", "commands", "expiry", "purge", "queue", "usage", NULL
};

//  --------------------------------------------------------------------------
//  The drain's memory

void *
sb_session_alloc (self_t *self, size_t n)
{
    n = (n + 15) & ~(size_t) 15;
    chunk_t *c = self->arena;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK? n: ARENA_CHUNK;
        c = malloc (sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = self->arena;
        c->used = 0;
        c->cap = cap;
        self->arena = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

char *
sb_session_strdup (self_t *self, const char *s)
{
    size_t n = strlen (s) + 1;
    char *p = sb_session_alloc (self, n);
    if (p)
        memcpy (p, s, n);
    return p;
}

static void
s_arena_reset (self_t *self)
{
    //  Keep one ordinary chunk: most drains fit in it.
    while (self->arena && (self->arena->next || self->arena->cap != ARENA_CHUNK)) {
        chunk_t *next = self->arena->next;
        free (self->arena);
        self->arena = next;
    }
    if (self->arena)
        self->arena->used = 0;
}

//  Makes room for one more element in a growable array; false when out of
//  memory.
bool
sb_session_reserve (void **array, size_t *cap, size_t count, size_t elem)
{
    if (count < *cap)
        return true;
    size_t ncap = *cap? *cap * 2: 64;
    void *p = realloc (*array, ncap * elem);
    if (!p)
        return false;
    *array = p;
    *cap = ncap;
    return true;
}

void
sb_session_fail (req_t *req, sb_err_t code, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (req->errmsg, sizeof req->errmsg, fmt, ap);
    va_end (ap);
    req->err = code;
}

//  A body's encoded bytes: the sum of its strings and a little per value,
//  to bound what one drain holds.
static size_t
s_val_bytes (const sb_val_t *v)
{
    size_t n = 8;
    if (v->type == SB_V_STR || v->type == SB_V_BIN)
        n += v->len;
    else
    if (v->type == SB_V_ARRAY || v->type == SB_V_MAP) {
        size_t items = v->type == SB_V_MAP? 2 * (size_t) v->len: v->len;
        for (size_t k = 0; k < items; k++)
            n += s_val_bytes (&v->v.a [k]);
    }
    return n;
}

//  --------------------------------------------------------------------------
//  The drain

static void
s_answer_error (self_t *self, req_t *req)
{
    if (req->internal) {
        if (sb_ratelimit_ok (&self->rl, 10))
            sb_warn (ACTOR, "internal %s failed session=%s code=%s error=\"%s\"", req->msg->h.type,
                     req->sid? req->sid: "-", sb_err_name (req->err), req->errmsg);
        return;
    }
    if (req->err == SB_E_invalid && sb_ratelimit_ok (&self->rl, 10))
        sb_info (ACTOR, "refused %s code=%s error=\"%s\"", req->msg->h.type,
                 sb_err_name (req->err), req->errmsg);
    if (req->cut_refused)
        sb_session_fork_refuse (self, req->msg, req->errmsg, req->valid_before, req->valid_after);
    else
        sb_bus_error (self->bus, req->msg, req->err, "%s", req->errmsg);
}

//  After a session is deleted: its checkpoint ref, private index and
//  shadow repository go too (docs/checkpoints.md). The tape named every
//  tree; nothing names them now. git runs here, after the commit, as a
//  fork's does before it.
static void
s_forget_checkpoints (self_t *self, const req_t *req)
{
    char dir [4200] = "";
    if (self->data_dir [0])
        snprintf (dir, sizeof dir, "%s/checkpoints", self->data_dir);
    if (sb_ckpt_forget (req->workspace, dir [0]? dir: NULL, req->sid) != 0)
        sb_warn (ACTOR, "deleted session=%s: some of its checkpoints could not be removed (workspace=%s)",
                 req->sid, req->workspace? req->workspace: "-");
}

//  After the commit: acknowledges a write, or refuses it.
static void
s_answer_write (self_t *self, req_t *req)
{
    if (req->err) {
        s_answer_error (self, req);
        return;
    }
    self->appended += req->npubs;
    //  A prompt that starts a run is answered when the run coordinator
    //  answers (actors/session/prompt.c).
    if (req->q_forward) {
        sb_session_prompt_forward (self, req);
        return;
    }
    if (req->internal)
        return;
    //  Gone before the reply says so.
    if (req->op == OP_DELETE && !req->replayed)
        s_forget_checkpoints (self, req);
    size_t len;
    const uint8_t *replies = sb_enc_data (self->replies, &len);
    sb_bus_reply (self->bus, req->msg, replies + req->reply_off, req->reply_len);
    if (req->replayed || req->op == OP_APPEND)
        return;
    if (req->op == OP_CREATE)
        sb_info (ACTOR, "created session=%s workspace=%s", req->sid, req->workspace);
    else
    if (req->op == OP_FORK)
        sb_info (ACTOR, "forked session=%s from=%s at=%llu", req->fork_sid, req->sid,
                 (unsigned long long) sb_get_uint (req->msg->body, "at", 0));
    else
    if (req->op == OP_DELETE) {
        sb_info (ACTOR, "deleted session=%s entries=%llu", req->sid,
                 (unsigned long long) req->last_seq);
        //  Its blobs are no longer held by it: the blob service sweeps
        //  those no other session holds (common/blob.h).
        sb_blob_unhold (self->blob_dir, req->sid);
    }
    else
    if (req->op == OP_FENCE)
        sb_debug (ACTOR, "fence session=%s", req->sid);
    else
    if (req->changed)
        sb_info (ACTOR, "%s session=%s seq=%llu", req->op == OP_CLOSE? "closed": "updated",
                 req->sid, (unsigned long long) req->last_seq);
}

//  After the commit and the acknowledgements: publishes every entry the
//  drain wrote, in tape order. The acks go first because writers wait on
//  them, while subscribers are never owed an event before its ack.
static void
s_publish (self_t *self)
{
    size_t len;
    const uint8_t *tape = sb_enc_data (self->tape, &len);
    char topic [SB_ULID_LEN + 16] = "session/";
    for (size_t k = 0; k < self->npubs; k++) {
        const pub_t *p = &self->pubs [k];
        //  A session id is a checked ULID (26 characters): no printf in
        //  the loop that publishes every entry.
        size_t n = strnlen (p->sid, SB_ULID_LEN + 7);
        memcpy (topic + 8, p->sid, n);
        topic [8 + n] = 0;
        if (sb_pub_send (self->pub, topic, "session.event", p->sid, tape + p->off, p->len) != 0
        &&  sb_ratelimit_ok (&self->rl, 10))
            //  Subscribers fill the gap from the tape: the entry is safe.
            sb_warn (ACTOR, "cannot publish session=%s error=\"%s\"", p->sid, zmq_strerror (errno));
    }
}

static void
s_drain_end (self_t *self)
{
    bool big = self->nreqs > 256;
    for (size_t k = 0; k < self->nreqs; k++)
        sb_msg_destroy (&self->reqs [k].msg);
    self->nreqs = self->nspans = self->npubs = self->nprepared = 0;
    self->drain_writes = self->drain_entries = self->drain_bytes = 0;
    sb_session_cache_reset (self);
    s_arena_reset (self);
    sb_enc_t **encs [] = { &self->prep, &self->tape, &self->replies, &self->scratch, &self->enc };
    for (size_t k = 0; k < sizeof encs / sizeof encs [0]; k++) {
        size_t len;
        sb_enc_data (*encs [k], &len);
        //  Give a burst's buffers back rather than keep them for good.
        if (len > (1u << 20)) {
            sb_enc_destroy (encs [k]);
            *encs [k] = sb_enc_new ();
            big = true;
        }
        else
            sb_enc_reset (*encs [k]);
    }
    if (big) {
        free (self->reqs);
        free (self->spans);
        free (self->pubs);
        free (self->recs);
        self->reqs = NULL;
        self->spans = NULL;
        self->pubs = NULL;
        self->recs = NULL;
        self->reqs_cap = self->spans_cap = self->pubs_cap = self->recs_cap = 0;
        malloc_trim (0);
    }
}

//  The drain's fields: what one drain fills and the write function uses.
//  Swapped whole between self and its shadow, never copied.
static void
s_drain_swap (self_t *a, self_t *b)
{
#define SWAP(f) do { __typeof__ (a->f) t_ = a->f; a->f = b->f; b->f = t_; } while (0)
    SWAP (now); SWAP (reqs); SWAP (nreqs); SWAP (reqs_cap); SWAP (spans); SWAP (nspans);
    SWAP (spans_cap); SWAP (pubs); SWAP (npubs); SWAP (pubs_cap); SWAP (recs); SWAP (nrecs);
    SWAP (recs_cap); SWAP (rec_index); SWAP (arena); SWAP (enc); SWAP (prep); SWAP (tape);
    SWAP (replies); SWAP (scratch); SWAP (drain_writes); SWAP (drain_entries); SWAP (drain_bytes);
    SWAP (gather_us); SWAP (drain_fn_us); SWAP (drain_min_expiry); SWAP (drain_purge);
    SWAP (nprepared);
#undef SWAP
}

//  Checks every request of the drain not checked yet. A request's checks
//  do not depend on the store (sb_session_prepare), so those of the next
//  drain run while the committer commits this one.
static void
s_drain_prepare (self_t *self)
{
    for (; self->nprepared < self->nreqs; self->nprepared++)
        sb_session_prepare (self, &self->reqs [self->nprepared]);
}

static void s_drain_finish (self_t *self, bool writes, bool reads, int rc, int64_t t_start, int64_t t_prep);

//  Runs the drain: its checks, then its writes in one transaction, then
//  the answers. With a committer, the transaction runs on the committer's
//  thread and the answers follow when it is done (s_commit_done); `sync`
//  runs it here (at startup, before the loop).
static void
s_drain_run (self_t *self, bool sync)
{
    self->now = sb_now_ms ();
    int64_t t_start = sb_mono_us ();
    bool writes = false, reads = false;
    s_drain_prepare (self);
    for (size_t k = 0; k < self->nreqs; k++) {
        req_t *req = &self->reqs [k];
        if (req->write && !req->prep_err)
            writes = true;
        if (!req->write && !req->prep_err)
            reads = true;
    }
    int rc = 0;
    int64_t t_prep = sb_mono_us ();
    //  The committer takes the drain when more requests already wait on
    //  the bus: then there is a next drain to take and check while this
    //  one commits. A lone writer (one append at a time, as tape.e2e)
    //  has nothing to overlap, and committing here saves it two thread
    //  wake-ups per commit.
    bool overlap = false;
    if (writes && self->committer && !sync) {
        zmq_pollitem_t item = { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 };
        overlap = sb_bus_has_queued (self->bus) || zmq_poll (&item, 1, 0) > 0;
    }
    if (overlap) {
        //  The shadow takes this drain and a copy of the rest of self;
        //  self takes the buffers the shadow held, for the next drain.
        self_t *sh = self->shadow;
        s_drain_swap (self, sh);
        self_t drain = *sh;
        *sh = *self;
        s_drain_swap (sh, &drain);
        sh->shadow = NULL;
        self->commit_t0 = t_prep;
        sb_committer_start (self->committer, sb_session_drain_fn, sh);
        return;
    }
    if (writes)
        rc = sb_store_write (self->store, sb_session_drain_fn, self);
    s_drain_finish (self, writes, reads, rc, t_start, t_prep);
}

//  After the commit (or with no writes): acknowledges or refuses every
//  write, publishes, answers the reads, and ends the drain.
static void
s_drain_finish (self_t *self, bool writes, bool reads, int rc, int64_t t_start, int64_t t_prep)
{
    if (writes) {
        self->last_commit_us = sb_mono_us () - t_prep;
        if (rc == 0) {
            self->commits++;
            if (self->drain_min_expiry
            && (!self->next_expiry || self->drain_min_expiry < self->next_expiry))
                self->next_expiry = self->drain_min_expiry;
            self->purge_pending |= self->drain_purge;
        }
        else
            sb_error (ACTOR, "commit failed requests=%zu error=\"%s\"", self->nreqs,
                      sb_store_strerror (rc));
    }
    for (size_t k = 0; k < self->nreqs; k++) {
        req_t *req = &self->reqs [k];
        if (!req->write)
            continue;
        if (rc != 0 && !req->prep_err) {
            //  Nothing of the drain was written: say so, and let the
            //  client retry with the same command_id.
            if (rc == SB_STORE_DISK_FULL)
                sb_session_fail (req, SB_E_disk_full, "the disk is full; nothing was written");
            else
            if (rc == SB_STORE_FENCED)
                sb_session_fail (req, SB_E_not_owner, "this node lost the lease of a shard this "
                                 "write touches; nothing was written, retry");
            else
                sb_session_fail (req, SB_E_internal, "the store failed: %s; nothing was written",
                                 sb_store_strerror (rc));
        }
        s_answer_write (self, req);
    }
    int64_t t_acked = sb_mono_us ();
    if (writes && rc == 0) {
        s_publish (self);
        sb_debug (ACTOR, "committed requests=%zu entries=%zu gather_us=%lld prepare_us=%lld "
                  "write_us=%lld commit_us=%lld ack_us=%lld publish_us=%lld", self->nreqs, self->npubs,
                  (long long) self->gather_us, (long long) (t_prep - t_start),
                  (long long) self->drain_fn_us, (long long) (self->last_commit_us - self->drain_fn_us),
                  (long long) (t_acked - t_prep - self->last_commit_us),
                  (long long) (sb_mono_us () - t_acked));
    }
    if (reads) {
        sb_txn_t txn;
        sb_txn_begin (self->store, &txn, false);
        for (size_t k = 0; k < self->nreqs; k++) {
            req_t *req = &self->reqs [k];
            if (req->write || req->prep_err)
                continue;
            //  !req->write: its row names a read function (sb_session_ops).
            sb_session_ops [req->op].read (self, &txn, req);
            if (!req->err && txn.ret)
                sb_session_fail (req, SB_E_internal, "the store failed: %s", sb_store_strerror (txn.ret));
            if (req->err)
                s_answer_error (self, req);
        }
        sb_txn_commit (&txn);
    }
    for (size_t k = 0; k < self->nreqs; k++) {
        req_t *req = &self->reqs [k];
        if (!req->write && req->prep_err)
            s_answer_error (self, req);
    }
    //  Queues the drain left ready start their next prompt.
    sb_session_queue_pump (self);
    s_drain_end (self);
}

static bool
s_drain_full (self_t *self)
{
    return self->nreqs >= BATCH_MAX_MSGS || self->drain_entries >= BATCH_MAX_ENTRIES
        || self->drain_bytes >= BATCH_MAX_BYTES;
}

//  --------------------------------------------------------------------------
//  Dispatch

//  Takes a request into the drain as `op`. The drain checks it, then runs
//  it with the drain's other writes in one transaction, or answers it from
//  a read transaction after the commit: its row in sb_session_ops says
//  which, and names the functions.
req_t *
sb_session_take (self_t *self, sb_msg_t **msg_p, op_t op)
{
    sb_msg_t *msg = *msg_p;
    if (!sb_session_reserve ((void **) &self->reqs, &self->reqs_cap, self->nreqs, sizeof (req_t))) {
        if (msg->route)
            sb_bus_error (self->bus, msg, SB_E_overloaded, "the session service is out of memory");
        sb_msg_destroy (msg_p);
        return NULL;
    }
    bool write = sb_session_ops [op].write != NULL;
    req_t *req = &self->reqs [self->nreqs++];
    memset (req, 0, sizeof *req);
    req->msg = msg;
    req->op = op;
    req->write = write;
    req->addressed = sb_session_ops [op].addressed;
    req->internal = msg->route == NULL;
    self->drain_writes += write;
    if (op == OP_APPEND) {
        const sb_val_t *e = sb_get_array (msg->body, "entries");
        self->drain_entries += e? e->len: 1;
        self->drain_bytes += s_val_bytes (msg->body);
    }
    else
    if (op == OP_FORK)
        //  It copies up to `at` entries (bounded by FORK_ENTRIES_MAX).
        self->drain_entries += sb_get_uint (msg->body, "at", 1);
    else
        self->drain_entries++;
    *msg_p = NULL;              //  the drain owns it now
    return req;
}

//  session.steer.take with nothing pending is answered at once, without
//  a transaction; the rest goes into the drain.
static void
s_take_steer (self_t *self, sb_msg_t **msg_p)
{
    if (!sb_session_queue_take_none (self, *msg_p))
        sb_session_take (self, msg_p, OP_STEER_TAKE);
}

//  Every type the session service serves, one row each, indexed by op
//  (session_impl.h, op_row_t): whether it names a session, and the
//  functions that run it. The actor's own ops come last, without a type,
//  so the lookup of a bus type ends at the first of them.
//
//  session.prompt decides in the drain whether the prompt starts a run
//  (then it is forwarded to the run coordinator after the commit, which
//  appends the prompt with its run: actors/session/prompt.c) or waits in
//  the queue or as a steer (actors/session/queue.c).
#define P(fn) sb_session_prepare_##fn
#define W(fn) sb_session_write_##fn
#define R(fn) sb_session_read_##fn
#define QP(fn) sb_session_queue_prepare_##fn
#define QW(fn) sb_session_queue_write_##fn
const op_row_t sb_session_ops [OP__COUNT + 1] = {
    //                 type                    addressed take          prepare          write             read
    [OP_CREATE]     = { "session.create",       false, NULL,          P (create),      W (create),       NULL },
    [OP_GET]        = { "session.get",          true,  NULL,          NULL,            NULL,             R (get) },
    [OP_LIST]       = { "session.list",         false, NULL,          NULL,            NULL,             R (list) },
    [OP_UPDATE]     = { "session.update",       true,  NULL,          P (update),      W (update),       NULL },
    [OP_CLOSE]      = { "session.close",        true,  NULL,          NULL,            W (close),        NULL },
    [OP_DELETE]     = { "session.delete",       true,  NULL,          NULL,            W (delete),       NULL },
    [OP_APPEND]     = { "session.append",       true,  NULL,          P (append),      W (append),       NULL },
    [OP_EVENTS]     = { "session.events",       true,  NULL,          NULL,            NULL,             R (events) },
    [OP_FENCE]      = { "session.fence",        true,  NULL,          NULL,            W (fence),        NULL },
    [OP_PROMPT]     = { "session.prompt",       true,  NULL,          QP (prompt),     QW (prompt),      NULL },
    [OP_Q_LIST]     = { "session.queue.list",   true,  NULL,          NULL,            NULL,             sb_session_queue_read },
    [OP_Q_REMOVE]   = { "session.queue.remove", true,  NULL,          QP (remove),     QW (remove),      NULL },
    [OP_Q_RESUME]   = { "session.queue.resume", true,  NULL,          NULL,            QW (resume),      NULL },
    [OP_STEER_TAKE] = { "session.steer.take",   true,  s_take_steer,  QP (steer_take), QW (steer_take),  NULL },
    //  forwarded to the run coordinator as a compact run (actors/session/compact.c)
    [OP_COMPACT]    = { "session.compact",      true,  sb_session_compact, NULL,       NULL,             NULL },
    //  forwarded the same way as a rewind run (actors/exec/rewind.c)
    [OP_REWIND]     = { "session.rewind",       true,  sb_session_compact, NULL,       NULL,             NULL },
    //  a new session with a copy of the source's tape up to a seq
    //  (actors/session/fork.c); its take makes the work tree first
    [OP_FORK]       = { "session.fork",         true,  sb_session_fork_take, P (fork), W (fork),         NULL },
    //  totals kept as usage entries are appended (actors/session/usage.c)
    [OP_USAGE]      = { "session.usage",        false, NULL,          NULL,            NULL,             R (usage) },
    //  a person's file, stored by blob.put, as an artifact entry
    //  (actors/session/attach.c)
    [OP_ATTACH]     = { "session.attach",       true,  NULL,          P (attach),      W (attach),       NULL },
    //  the actor's own: a prompt's answer to remember, the queue's head
    //  started or not, a queue held at restart (actors/session/prompt.c,
    //  queue_store.c)
    [OP_Q_REMEMBER]     = { NULL, true, NULL, QP (remember), QW (remember),     NULL },
    [OP_Q_DEQUEUE]      = { NULL, true, NULL, NULL,          QW (dequeue),      NULL },
    [OP_Q_START_FAILED] = { NULL, true, NULL, NULL,          QW (start_failed), NULL },
    [OP_Q_RESTART]      = { NULL, true, NULL, NULL,          QW (restart),      NULL },
    [OP__COUNT]         = { NULL },
};
#undef P
#undef W
#undef R
#undef QP
#undef QW

//  The row of a bus type: sb_session_ops up to the first internal op.
static size_t
s_dispatch_row (const sb_msg_t *msg)
{
    return sb_dispatch_index (sb_session_ops, sizeof sb_session_ops [0], msg->h.type);
}

const char *
sb_session_dispatch_type (size_t index)
{
    for (size_t k = 0; k < index; k++)
        if (!sb_session_ops [k].type)
            return NULL;
    return index < OP__COUNT? sb_session_ops [index].type: NULL;
}

//  Whether a message may be taken while a commit is in flight: a request
//  the drain takes as it comes. The replies to our own requests and the
//  rows that take a request themselves, which read the store or the
//  forwards the write function reads (steer.take, compact), wait for the
//  commit's end.
static bool
s_takes_during_commit (const sb_msg_t *msg, size_t row)
{
    return msg->route && sb_session_ops [row].type && !sb_session_ops [row].take;
}

static void
s_dispatch_msg (self_t *self, sb_msg_t **msg_p, size_t row)
{
    sb_msg_t *msg = *msg_p;
    //  No route: a reply to a request of ours.
    if (!msg->route) {
        if (!sb_session_compact_reply (self, msg))
            sb_session_prompt_reply (self, msg_p);
        sb_msg_destroy (msg_p);
        return;
    }
    const op_row_t *r = &sb_session_ops [row];
    if (!r->type) {
        sb_bus_error (self->bus, msg, SB_E_unknown_type, "the session service does not serve %s",
                      msg->h.type);
        sb_msg_destroy (msg_p);
        return;
    }
    if (sb_session_forward (self, msg_p, (op_t) row))
        return;
    if (r->take)
        r->take (self, msg_p);
    else
        sb_session_take (self, msg_p, (op_t) row);
    sb_msg_destroy (msg_p);
}

//  Whether the loop should read the bus now: not while a message taken
//  during the commit waits for its end, nor with the next drain full.
static bool
s_bus_open (self_t *self)
{
    return !self->held && !(self->committer && sb_committer_busy (self->committer) && s_drain_full (self));
}

//  Takes the requests waiting on the bus into the drain, within its caps.
//  During a commit, the first message that must wait for its end is held,
//  and nothing after it is taken (the bus's order is kept).
static void
s_drain_take (self_t *self)
{
    bool committing = self->committer && sb_committer_busy (self->committer);
    while (!self->held && !s_drain_full (self)) {
        sb_msg_t *msg = sb_bus_recv (self->bus, 0);
        if (!msg)
            break;
        size_t row = msg->route? s_dispatch_row (msg): OP__COUNT;
        if (committing && !s_takes_during_commit (msg, row)) {
            self->held = msg;
            break;
        }
        s_dispatch_msg (self, &msg, row);
    }
}

//  The committer is done with the shadow's drain: answer it, then take up
//  the drain gathered meanwhile (and the message held for the commit's
//  end, if any).
static void
s_commit_done (self_t *self)
{
    int rc = sb_committer_finish (self->committer);
    s_drain_swap (self, self->shadow);          //  self: the committed drain
    bool reads = false;
    for (size_t k = 0; k < self->nreqs; k++)
        if (!self->reqs [k].write && !self->reqs [k].prep_err)
            reads = true;
    s_drain_finish (self, true, reads, rc, self->commit_t0, self->commit_t0);
    s_drain_swap (self, self->shadow);          //  self: the next drain
    if (self->held) {
        sb_msg_t *msg = self->held;
        self->held = NULL;
        s_dispatch_msg (self, &msg, msg->route? s_dispatch_row (msg): OP__COUNT);
    }
}

//  Reads every request waiting on the bus, within the drain's caps, and
//  runs them as one drain.
static void
s_handle_bus (self_t *self)
{
    if (self->committer && sb_committer_busy (self->committer)) {
        //  A commit is in flight: take and check the next drain meanwhile;
        //  it runs when the commit is done.
        s_drain_take (self);
        s_drain_prepare (self);
        return;
    }
    sb_session_prompt_expire (self);
    sb_session_compact_expire (self);
    s_drain_take (self);
    //  Each drain with writes costs one fsync. When this one holds fewer
    //  writes than the last, the clients that the last commit answered are
    //  most likely sending their next requests right now: wait for them a
    //  little, which turns many small commits into one. The wait ends as
    //  soon as they are in, and never outlasts a commit.
    int64_t t0 = sb_mono_us ();
    if (self->drain_writes && self->drain_writes < self->writers) {
        int64_t until = t0 + (self->last_commit_us < GATHER_MAX_US?
                              self->last_commit_us: GATHER_MAX_US);
        while (!s_drain_full (self) && self->drain_writes < self->writers) {
            int64_t left = until - sb_mono_us ();
            if (left <= 0)
                break;
            zmq_pollitem_t item = { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 };
            if (zmq_poll (&item, 1, (long) ((left + 999) / 1000)) <= 0)
                break;
            s_drain_take (self);
        }
    }
    self->gather_us = sb_mono_us () - t0;
    //  How many writers there are, from what recent drains held: the
    //  largest recent drain, forgotten slowly as the writers go away.
    self->writers = self->writers - self->writers / 8;
    if (self->drain_writes > self->writers)
        self->writers = self->drain_writes;
    if (self->nreqs)
        s_drain_run (self, false);
}

//  --------------------------------------------------------------------------
//  Actor

//  Frees a drain's fields (s_drain_swap's), its requests included.
static void
s_drain_free (self_t *self)
{
    for (size_t k = 0; k < self->nreqs; k++)
        sb_msg_destroy (&self->reqs [k].msg);
    self->nreqs = 0;
    sb_session_cache_reset (self);
    while (self->arena) {
        chunk_t *next = self->arena->next;
        free (self->arena);
        self->arena = next;
    }
    zhashx_destroy (&self->rec_index);
    free (self->reqs);
    free (self->spans);
    free (self->pubs);
    free (self->recs);
    sb_enc_destroy (&self->enc);
    sb_enc_destroy (&self->prep);
    sb_enc_destroy (&self->tape);
    sb_enc_destroy (&self->replies);
    sb_enc_destroy (&self->scratch);
}

//  A drain's fields, empty; false when out of memory.
static bool
s_drain_new (self_t *self)
{
    self->rec_index = zhashx_new ();
    self->enc = sb_enc_new ();
    self->prep = sb_enc_new ();
    self->tape = sb_enc_new ();
    self->replies = sb_enc_new ();
    self->scratch = sb_enc_new ();
    return self->rec_index && self->enc && self->prep && self->tape && self->replies && self->scratch;
}

static void
s_self_destroy (self_t **self_p)
{
    if (!*self_p)
        return;
    self_t *self = *self_p;
    //  Joins the thread; a commit in flight ends first (its requests then
    //  go unanswered, as on any stop: their writers retry).
    sb_committer_destroy (&self->committer);
    if (self->shadow) {
        s_drain_free (self->shadow);
        free (self->shadow);
    }
    sb_msg_destroy (&self->held);
    sb_forward_destroy (&self->fwd);
    sb_session_relay_destroy (self);
    s_drain_free (self);
    zhashx_destroy (&self->starting);
    zhashx_destroy (&self->forwards);
    zhashx_destroy (&self->compacts);
    zlistx_destroy (&self->q_pump);
    sb_pub_destroy (&self->pub);
    sb_bus_destroy (&self->bus);
    sb_store_destroy (&self->store);
    free (self);
    *self_p = NULL;
}

static self_t *
s_self_new (zsock_t *pipe, const sb_actor_args_t *args)
{
    self_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    snprintf (self->instance, sizeof self->instance, "%s", args->instance? args->instance: ACTOR);
    self->command_ttl_ms = sb_cmdid_ttl_ms (ACTOR);
    snprintf (self->data_dir, sizeof self->data_dir, "%s", args->data_dir? args->data_dir: "");
    //  One session must not fill the disk: its tape has a quota
    //  (docs/operations.md).
    self->tape_quota = sb_actor_limit (ACTOR, args->config? args->config->session_quota: 0,
                                       "SWITCHBOARD_SESSION_QUOTA", SB_SESSION_QUOTA_DEFAULT,
                                       SB_SESSION_QUOTA_MIN, SB_SESSION_QUOTA_MAX);
    //  What one session's queue may hold (docs/queue.md).
    self->queue_max = sb_actor_limit (ACTOR, 0, "SWITCHBOARD_QUEUE_MAX", SB_QUEUE_MAX_DEFAULT, 1, 1000);
    self->steers_max = sb_actor_limit (ACTOR, 0, "SWITCHBOARD_QUEUE_STEERS", SB_QUEUE_STEERS_DEFAULT, 1, 1000);
    self->queue_bytes = sb_actor_limit (ACTOR, 0, "SWITCHBOARD_QUEUE_BYTES", SB_QUEUE_BYTES_DEFAULT,
                                        1u << 20, (uint64_t) 1 << 32);

    //  The map grows on demand; a small first map is how the tests make
    //  every drain's transaction run again after a grow.
    const char *map = getenv ("SWITCHBOARD_SESSION_MAPSIZE");
    size_t mapsize = map && *map? (size_t) strtoull (map, NULL, 10): 0;

    char dir [4200], err [512];
    snprintf (self->blob_dir, sizeof self->blob_dir, "%s/blobs", args->data_dir ? args->data_dir : ".");
    const char *url = args->config ? args->config->store : NULL;
    if (sb_store_locate (url, args->data_dir, "session", dir, sizeof dir, err, sizeof err) == 0)
        self->store = sb_store_open (dir, s_dbi_names, SB_SESSION_SCHEMA_VERSION, mapsize, err, sizeof err);
    else
        self->store = NULL;
    if (!self->store) {
        sb_error (ACTOR, "cannot open the store error=\"%s\"", err);
        s_self_destroy (&self);
        return NULL;
    }
    self->cluster = args->config ? args->config->cluster : NULL;
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->pub = args->pub_endpoint? sb_pub_new (args->pub_endpoint, self->instance): NULL;
    self->forwards = sb_session_forwards_new ();
    self->compacts = sb_session_compacts_new ();
    self->starting = zhashx_new ();
    self->q_pump = zlistx_new ();
    if (self->q_pump) {
        zlistx_set_destructor (self->q_pump, (czmq_destructor *) zstr_free);
        zlistx_set_duplicator (self->q_pump, (czmq_duplicator *) strdup);
    }
    bool drain_ok = s_drain_new (self);
    if (!self->bus || !self->pub || !drain_ok || !self->forwards || !self->starting || !self->q_pump
    ||  !self->compacts) {
        sb_error (ACTOR, "cannot connect to the bus cmd=%s pub=%s", args->cmd_endpoint,
                  args->pub_endpoint? args->pub_endpoint: "(none)");
        s_self_destroy (&self);
        return NULL;
    }
    sb_session_recover (self);
    //  A restart pauses every queue that holds something, before any
    //  client is served (docs/queue.md).
    if (sb_session_queue_recover (self))
        s_drain_run (self, true);
    //  The committer thread, unless SWITCHBOARD_SESSION_COMMITTER=0 (then
    //  each drain commits on this thread, as one step: docs/sessions.md).
    const char *cm = getenv ("SWITCHBOARD_SESSION_COMMITTER");
    if (!(cm && strcmp (cm, "0") == 0)) {
        self->shadow = calloc (1, sizeof *self->shadow);
        self->committer = self->shadow && s_drain_new (self->shadow)? sb_committer_new (self->store): NULL;
        if (!self->committer) {
            sb_error (ACTOR, "cannot start the committer thread");
            s_self_destroy (&self);
            return NULL;
        }
    }
    sb_store_info_t info;
    char shown [sizeof dir];
    sb_log_redact_url (dir, shown, sizeof shown);
    if (sb_store_info (self->store, &info) == 0)
        sb_info (ACTOR, "opened store=%s sessions=%llu entries=%llu commands=%llu map_bytes=%zu "
                 "command_ttl_s=%lld session_quota=%llu", shown, (unsigned long long) info.entries [DBI_SESSIONS],
                 (unsigned long long) info.entries [DBI_TAPE],
                 (unsigned long long) info.entries [DBI_COMMANDS], info.mapsize,
                 (long long) (self->command_ttl_ms / 1000), (unsigned long long) self->tape_quota);
    return self;
}

static void
s_handle_pipe (self_t *self)
{
    char *cmd = zstr_recv (self->pipe);
    if (!cmd || streq (cmd, "$TERM"))
        self->terminated = true;
    zstr_free (&cmd);
}

void
sb_session_actor (zsock_t *pipe, void *args)
{
    self_t *self = s_self_new (pipe, (const sb_actor_args_t *) args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    if (sb_actor_register (pipe, self->bus, ACTOR, self->instance, NULL, 0)) {
        s_self_destroy (&self);
        return;
    }
    while (!self->terminated) {
        bool committing = self->committer && sb_committer_busy (self->committer);
        bool bus_open = s_bus_open (self);
        int64_t wait = sb_bus_tick (self->bus);
        if ((bus_open && sb_bus_has_queued (self->bus)) || (self->purge_pending && !committing))
            wait = 0;
        if (self->next_expiry && !committing) {
            uint64_t now = sb_now_ms ();
            int64_t due = self->next_expiry > now? (int64_t) (self->next_expiry - now): 0;
            if (due < wait)
                wait = due;
        }
        if (sb_forward_wait (self->fwd) < wait)
            wait = sb_forward_wait (self->fwd);
        //  While a commit is in flight the bus is read only as long as
        //  the next drain can take what comes (s_bus_open), and the
        //  committer's fd says when the commit is done.
        zmq_pollitem_t items [3 + SB_SESSION_RELAY_MAX] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, bus_open? ZMQ_POLLIN: 0, 0 },
            { NULL, committing? sb_committer_fd (self->committer): -1, ZMQ_POLLIN, 0 },
        };
        //  other nodes' event planes (relay.c), after the committer's fd
        size_t nrelay = sb_session_relay_items (self, items + 3, SB_SESSION_RELAY_MAX);
        if (nrelay && !committing)
            items [2] = (zmq_pollitem_t) { NULL, -1, 0, 0 };
        if (sb_session_relay_wait (self) < wait)
            wait = sb_session_relay_wait (self);
        if (zmq_poll (items, nrelay? 3 + (int) nrelay: committing? 3: 2, (long) wait) < 0 && errno != EINTR)
            break;
        if (items [0].revents & ZMQ_POLLIN)
            s_handle_pipe (self);
        if (self->terminated)
            break;
        if (committing && (items [2].revents & ZMQ_POLLIN)) {
            s_commit_done (self);
            committing = false;
        }
        if ((items [1].revents & ZMQ_POLLIN) || (s_bus_open (self) && sb_bus_has_queued (self->bus))
        ||  (!committing && (self->nreqs || sb_session_prompt_due (self))))
            s_handle_bus (self);
        sb_forward_poll (self->fwd, self->bus);
        sb_session_relay_recv (self);
        committing = self->committer && sb_committer_busy (self->committer);
        //  Housekeeping writes wait for the committer: one write
        //  transaction at a time.
        if (!committing && self->next_expiry && self->next_expiry <= sb_now_ms ())
            sb_session_sweep (self);
        if (!committing && self->purge_pending)
            sb_session_purge (self);
    }
    //  A commit in flight is answered before the actor stops: what it
    //  wrote is on disk, and its writers are owed their acks.
    if (self->committer && sb_committer_busy (self->committer))
        s_commit_done (self);
    sb_info (ACTOR, "stopping entries_appended=%llu commits=%llu",
             (unsigned long long) self->appended, (unsigned long long) self->commits);
    s_self_destroy (&self);
}

/*  actors/run/commit.c — the run actor's writes: group commit on the
    committer thread (store/committer.h), and the pending writes the
    actor reads meanwhile.

    Why. A durable LMDB commit is two syncs to disk (the pages, then the
    meta page), 3 to 10 ms each on a shared disk. The run actor used to
    commit inline, about five times per starting run, so a heartbeat that
    came during a commit waited for it: 200 runs starting made a lease's
    heartbeat wait tens of ms (docs/runs.md). Now the actor thread never
    syncs:

      - every write (a put or a delete in one of DATA/run's dbis) goes to
        the pending table below, labelled with the open batch, and is seen
        by the actor's own reads at once (sb_run_kv_get, sb_run_kv_scan);
      - at the end of each turn of the loop, when the committer is idle,
        the open batch is handed to the committer thread, which writes it
        in ONE transaction with one durable commit; what arrives while it
        syncs joins the next batch (group commit);
      - when the committer says batch N is durable, its pending rows are
        dropped (reads find them in LMDB now) and what waited for them
        goes out: requests (sb_run_call), held replies, outbox appends
        (the outbox reads committed entries only).

    Nothing leaves the actor that depends on a write before that write is
    durable: a request it sends (unless the sender says it depends on
    none, self->call_now) or a reply that announces a change waits for
    the batch of the last urgent write (self->kv_need). Heartbeats that
    change nothing durable are answered at once, from memory.

    Outbox deletes are not urgent: an entry that landed is marked done in
    memory (the outbox's acked, store/outbox.h) and its delete rides in the next batch, or the
    next tick's. A crash before that replays the append, which the session
    actor recognises by its command_id.

    The actor thread is the only writer of the pending table; the
    committer thread only reads the copies it is handed (a batch_t, the
    committer's from sb_committer_start until sb_committer_finish). */
#include "actors/run/run_impl.h"

/*  A pending write: the latest value (or delete) of one key. */
typedef struct {
    unsigned dbi;
    bool del;
    bool urgent;                /* acknowledged changes wait for it */
    uint8_t *key;
    size_t klen;
    uint8_t *val;
    size_t vlen;
    uint64_t batch;             /* the batch it was last written in */
    uint64_t shards;            /* the sessions' shards it was written for (0: none) */
} pend_t;

/*  One batch, as handed to the committer: copies, so the actor may
    write the same keys again meanwhile. */
typedef struct {
    unsigned dbi;
    bool del;
    uint8_t *key;
    size_t klen;
    uint8_t *val;
    size_t vlen;
} op_t;

typedef struct {
    uint64_t n;
    size_t count;
    op_t *ops;
    sb_cluster_t *cluster;      /* the fence: every shard of `shards` must be held */
    uint64_t shards;
} batch_t;

/*  A request waiting for a batch to be durable before it is sent. */
typedef struct {
    char type [64];
    char key [129];
    char to [129];
    bool has_key, has_to;
    uint8_t *body;
    size_t len;
    call_t *call;
    uint64_t need;
} deferred_t;

static void
s_pend_free (void **item)
{
    pend_t *p = *item;
    if (p) {
        free (p->key);
        free (p->val);
        free (p);
        *item = NULL;
    }
}

static void
s_batch_free (batch_t **b_p)
{
    batch_t *b = *b_p;
    if (!b)
        return;
    for (size_t k = 0; k < b->count; k++) {
        free (b->ops [k].key);
        free (b->ops [k].val);
    }
    free (b->ops);
    free (b);
    *b_p = NULL;
}

/*  The table's key: the dbi and the key bytes, in hex. */
static void
s_hkey (unsigned dbi, const void *key, size_t klen, char *out)
{
    static const char hex [] = "0123456789abcdef";
    const uint8_t *k = key;
    size_t o = 0;
    out [o++] = (char) ('a' + dbi);
    for (size_t i = 0; i < klen && i < SB_STORE_KEY_MAX; i++) {
        out [o++] = hex [k [i] >> 4];
        out [o++] = hex [k [i] & 15];
    }
    out [o] = 0;
}

#define S_HKEY_MAX (2 + 2 * SB_STORE_KEY_MAX)

/* ------------------------------------------------------------------ */
/*  On the committer's thread (store/committer.h) */

static int
s_apply (sb_txn_t *txn, void *arg)
{
    const batch_t *b = arg;
    if (sb_cluster_fence (b->cluster, txn, b->shards) != 0)
        return txn->ret;
    for (size_t k = 0; k < b->count && txn->ret == 0; k++) {
        const op_t *o = &b->ops [k];
        if (o->del)
            sb_txn_del (txn, o->dbi, o->key, o->klen);
        else
            sb_txn_put (txn, o->dbi, o->key, o->klen, o->val, o->vlen);
    }
    return txn->ret;
}

/* ------------------------------------------------------------------ */
/*  The pending table */

int
sb_run_kv_open (self_t *self)
{
    self->pending = zhashx_new ();
    self->deferred = zlistx_new ();
    if (!self->pending || !self->deferred)
        return -1;
    zhashx_set_destructor (self->pending, s_pend_free);
    self->batch_open = 1;
    self->committer = sb_committer_new (self->store);
    return self->committer ? 0 : -1;
}

static void
s_deferred_free (self_t *self, deferred_t **d_p, bool run_fn)
{
    deferred_t *d = *d_p;
    if (!d)
        return;
    if (d->call) {
        if (run_fn)
            d->call->fn (self, d->call, NULL);
        if (d->call->arg_free)
            d->call->arg_free (d->call->arg);
        free (d->call);
    }
    free (d->body);
    free (d);
    *d_p = NULL;
}

void
sb_run_kv_close (self_t *self)
{
    if (self->committer) {
        sb_run_commit_wait (self);
        sb_committer_destroy (&self->committer);
    }
    if (self->deferred) {
        deferred_t *d;
        while ((d = zlistx_detach (self->deferred, NULL)))
            s_deferred_free (self, &d, false);
        zlistx_destroy (&self->deferred);
    }
    zhashx_destroy (&self->pending);
    if (self->commits)
        sb_info (ACTOR, "store commits=%llu batches_failed=%llu", (unsigned long long) self->commits,
                 (unsigned long long) self->commit_failures);
}

static int
s_write (self_t *self, unsigned dbi, const void *key, size_t klen, const void *val, size_t vlen,
         bool del, bool urgent)
{
    if (klen == 0 || klen > SB_STORE_KEY_MAX)
        return SB_STORE_INVALID;
    char hk [S_HKEY_MAX + 1];
    s_hkey (dbi, key, klen, hk);
    pend_t *p = zhashx_lookup (self->pending, hk);
    if (!p) {
        p = calloc (1, sizeof *p);
        if (!p || !(p->key = malloc (klen))) {
            free (p);
            return -ENOMEM;
        }
        memcpy (p->key, key, klen);
        p->klen = klen;
        p->dbi = dbi;
        zhashx_insert (self->pending, hk, p);
    }
    uint8_t *copy = NULL;
    if (!del) {
        copy = malloc (vlen ? vlen : 1);
        if (!copy)
            return -ENOMEM;
        if (vlen)
            memcpy (copy, val, vlen);
    }
    free (p->val);
    p->val = copy;
    p->vlen = del ? 0 : vlen;
    p->del = del;
    /* a row rewritten in a later batch keeps the later batch's urgency
       only: an outbox delete after a put is still the put's business */
    p->urgent = urgent || (p->batch == self->batch_open && p->urgent);
    p->batch = self->batch_open;
    p->shards |= self->kv_shards;
    self->kv_open_ops = true;
    if (urgent) {
        self->kv_open_urgent = true;
        self->kv_need = self->batch_open;
    }
    return 0;
}

int
sb_run_kv_put (self_t *self, unsigned dbi, const void *key, size_t klen, const void *val, size_t vlen)
{
    return s_write (self, dbi, key, klen, val, vlen, false, true);
}

int
sb_run_kv_del (self_t *self, unsigned dbi, const void *key, size_t klen, bool urgent)
{
    return s_write (self, dbi, key, klen, NULL, 0, true, urgent);
}

int
sb_run_kv_get (self_t *self, unsigned dbi, const void *key, size_t klen, uint8_t **val_p, size_t *len_p)
{
    *val_p = NULL;
    *len_p = 0;
    if (klen == 0 || klen > SB_STORE_KEY_MAX)
        return -1;
    if (zhashx_size (self->pending)) {
        char hk [S_HKEY_MAX + 1];
        s_hkey (dbi, key, klen, hk);
        pend_t *p = zhashx_lookup (self->pending, hk);
        if (p) {
            if (p->del)
                return -1;
            *val_p = malloc (p->vlen ? p->vlen : 1);
            if (!*val_p)
                return -1;
            memcpy (*val_p, p->val, p->vlen);
            *len_p = p->vlen;
            return 0;
        }
    }
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false))
        return -1;
    sb_datum_t v;
    int rc = -1;
    if (sb_txn_get (&txn, dbi, key, klen, &v) == 0 && (*val_p = malloc (v.size ? v.size : 1))) {
        memcpy (*val_p, v.data, v.size);
        *len_p = v.size;
        rc = 0;
    }
    sb_txn_abort (&txn);
    return rc;
}

int
sb_run_kv_scan (self_t *self, unsigned dbi, const void *prefix, size_t plen, sb_run_kv_fn *fn, void *arg)
{
    bool overlay = zhashx_size (self->pending) > 0;
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false))
        return -1;
    sb_txn_iter_t it;
    sb_datum_t k, v;
    char hk [S_HKEY_MAX + 1];
    sb_txn_iter_begin (&txn, &it, dbi, prefix, plen, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v)) {
        if (overlay) {
            /* a pending row shadows the committed one; its puts come below */
            s_hkey (dbi, k.data, k.size, hk);
            if (zhashx_lookup (self->pending, hk))
                continue;
        }
        fn (k.data, k.size, v.data, v.size, arg);
    }
    sb_txn_iter_end (&it);
    int rc = txn.ret;
    sb_txn_abort (&txn);
    if (overlay)
        for (pend_t *p = zhashx_first (self->pending); p; p = zhashx_next (self->pending))
            if (p->dbi == dbi && !p->del && p->klen >= plen && memcmp (p->key, prefix, plen) == 0)
                fn (p->key, p->klen, p->val, p->vlen, arg);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Batches */

/*  Hands the open batch to the committer. */
static void
s_submit (self_t *self)
{
    batch_t *b = calloc (1, sizeof *b);
    size_t n = zhashx_size (self->pending);
    if (!b || !(b->ops = calloc (n ? n : 1, sizeof *b->ops))) {
        free (b);
        return;                 /* out of memory: the next turn tries again */
    }
    b->n = self->batch_open;
    b->cluster = self->cluster;
    for (pend_t *p = zhashx_first (self->pending); p; p = zhashx_next (self->pending)) {
        if (p->batch != b->n)
            continue;
        op_t *o = &b->ops [b->count];
        o->dbi = p->dbi;
        o->del = p->del;
        o->key = malloc (p->klen);
        o->val = p->del ? NULL : malloc (p->vlen ? p->vlen : 1);
        if (!o->key || (!p->del && !o->val)) {
            free (o->key);
            free (o->val);
            s_batch_free (&b);
            return;
        }
        memcpy (o->key, p->key, p->klen);
        o->klen = p->klen;
        if (!p->del)
            memcpy (o->val, p->val, p->vlen);
        o->vlen = p->vlen;
        b->shards |= p->shards;
        b->count++;
    }
    sb_committer_start (self->committer, s_apply, b);
    self->batch_inflight = b;
    self->inflight_outbox_max = self->open_outbox_max;
    self->open_outbox_max = 0;
    self->batch_open++;
    self->kv_open_ops = false;
    self->kv_open_urgent = false;
}

void
sb_run_commit_submit (self_t *self, bool force)
{
    if (self->batch_inflight || !self->kv_open_ops)
        return;
    /* after a failure (a full disk), one try per tick, not a hot loop */
    if (self->commit_retry_at && sb_mono_ms () < self->commit_retry_at)
        return;
    /* deletes alone (landed outbox entries) wait for the tick, or for an
       urgent write to ride with */
    if (!self->kv_open_urgent && !force)
        return;
    s_submit (self);
}

/*  After a fenced batch: the rows written for shards this node no longer
    holds are not its to write (their new owner reads the database), so
    they go, or every later batch would be fenced with them. */
static void
s_drop_fenced (self_t *self)
{
    uint64_t held = sb_cluster_held (self->cluster);
    size_t dropped = 0;
    zlistx_t *keys = zhashx_keys (self->pending);
    for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
        pend_t *p = zhashx_lookup (self->pending, k);
        if (p && (p->shards & ~held)) {
            zhashx_delete (self->pending, k);
            dropped++;
        }
    }
    zlistx_destroy (&keys);
    /* and the requests that waited for them: told their call failed */
    /* (set apart first: a call's failure may defer another request) */
    zlistx_t *kept = zlistx_new (), *doomed = zlistx_new ();
    deferred_t *d;
    while (kept && doomed && (d = zlistx_detach (self->deferred, NULL)))
        zlistx_add_end (d->has_key && !sb_cluster_holds (self->cluster, d->key) ? doomed : kept, d);
    if (kept && doomed) {
        zlistx_destroy (&self->deferred);
        self->deferred = kept;
        kept = NULL;
        while ((d = zlistx_detach (doomed, NULL)))
            s_deferred_free (self, &d, true);
    }
    zlistx_destroy (&kept);
    zlistx_destroy (&doomed);
    /* what waited for the batch is released by the next one, even empty */
    self->kv_open_ops = self->kv_open_urgent = true;
    self->kv_need = self->batch_open;
    sb_warn (ACTOR, "dropped %zu writes of shards this node lost", dropped);
}

/*  The committer's answer: batch n is durable (rc 0) or failed. */
static void
s_done (self_t *self, uint64_t n, int rc)
{
    batch_t *b = self->batch_inflight;
    self->batch_inflight = NULL;
    if (!b || b->n != n) {
        sb_error (ACTOR, "committer answered batch %llu, not the one in flight", (unsigned long long) n);
        s_batch_free (&b);
        return;
    }
    if (rc == 0) {
        self->commits++;
        self->commit_retry_at = 0;
        self->batch_durable = n;
        if (self->inflight_outbox_max)
            sb_outbox_durable (self->outbox, self->inflight_outbox_max);
        zlistx_t *keys = zhashx_keys (self->pending);
        for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
            pend_t *p = zhashx_lookup (self->pending, k);
            if (p && p->batch == n)
                zhashx_delete (self->pending, k);
        }
        zlistx_destroy (&keys);
    }
    else {
        /* the rows stay visible and go with the next batch; whatever
           waits for them keeps waiting (never acknowledged early) */
        self->commit_failures++;
        self->commit_retry_at = sb_mono_ms () + TICK_MS;
        sb_error (ACTOR, "cannot commit %zu writes (batch %llu): %s; retried with the next batch",
                  b->count, (unsigned long long) n, sb_store_strerror (rc));
        if (rc == SB_STORE_FENCED)
            s_drop_fenced (self);
        for (pend_t *p = zhashx_first (self->pending); p; p = zhashx_next (self->pending))
            if (p->batch == n) {
                p->batch = self->batch_open;
                self->kv_open_ops = true;
                if (p->urgent) {
                    self->kv_open_urgent = true;
                    self->kv_need = self->batch_open;
                }
            }
        if (self->inflight_outbox_max > self->open_outbox_max)
            self->open_outbox_max = self->inflight_outbox_max;
    }
    self->inflight_outbox_max = 0;
    s_batch_free (&b);
}

static bool
s_recv_done (self_t *self, bool block)
{
    if (!sb_committer_busy (self->committer) || (!block && !sb_committer_done (self->committer)))
        return false;
    int rc = sb_committer_finish (self->committer);
    s_done (self, ((batch_t *) self->batch_inflight)->n, rc);
    return true;
}

int
sb_run_commit_fd (self_t *self)
{
    return sb_committer_fd (self->committer);
}

bool
sb_run_commit_busy (self_t *self)
{
    return self->batch_inflight != NULL;
}

bool
sb_run_commit_durable (self_t *self)
{
    return self->batch_durable >= self->kv_need;
}

/*  What waited for a batch goes out: the outbox first, so a status's
    tape entry is sent before the request that follows from it (the
    exec.cancel after `cancelling`), then the requests, in order. */
static void
s_after_commit (self_t *self)
{
    sb_run_outbox_flush (self);
    deferred_t *d = zlistx_first (self->deferred);
    while (d && d->need <= self->batch_durable) {
        zlistx_detach (self->deferred, zlistx_cursor (self->deferred));
        call_t *c = d->call;
        d->call = NULL;
        char id [SB_ULID_LEN + 1];
        int rc = sb_bus_send (self->bus, d->type, d->has_key ? d->key : NULL, d->has_to ? d->to : NULL,
                              d->body, d->len, sb_now_ms () + CALL_MS, id);
        if (c && rc != 0) {
            c->fn (self, c, NULL);
            if (c->arg_free)
                c->arg_free (c->arg);
            free (c);
        }
        else
        if (c) {
            c->expires = sb_mono_ms () + CALL_MS;
            zhashx_insert (self->calls, id, c);
        }
        s_deferred_free (self, &d, false);
        d = zlistx_first (self->deferred);
    }
    sb_run_held_flush (self);
    sb_run_jobs_advance (self);
}

void
sb_run_commit_ready (self_t *self)
{
    bool any = false;
    while (self->batch_inflight && s_recv_done (self, false))
        any = true;
    if (any && !self->recovering)
        s_after_commit (self);
}

void
sb_run_commit_wait (self_t *self)
{
    /* a batch that fails is retried with the next: three tries */
    for (int tries = 0; tries < 4; tries++) {
        while (self->batch_inflight)
            if (!s_recv_done (self, true))
                return;         /* interrupted */
        if (!self->kv_open_ops || tries == 3)
            return;
        s_submit (self);
    }
}

bool
sb_run_call_defer (self_t *self, const char *type, const char *key, const char *to, const uint8_t *body,
                   size_t len, call_t *call)
{
    if (self->recovering || self->call_now || sb_run_commit_durable (self))
        return false;
    deferred_t *d = calloc (1, sizeof *d);
    if (!d || !(d->body = malloc (len ? len : 1))) {
        free (d);
        return false;           /* sent at once rather than lost */
    }
    memcpy (d->body, body, len);
    d->len = len;
    s_copy (d->type, sizeof d->type, type);
    d->has_key = key != NULL;
    s_copy (d->key, sizeof d->key, key);
    d->has_to = to != NULL;
    s_copy (d->to, sizeof d->to, to);
    d->call = call;
    d->need = self->kv_need;
    zlistx_add_end (self->deferred, d);
    return true;
}

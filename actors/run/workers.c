/*  actors/run/workers.c — the worker registry and claims (docs/workers.md).

    External workers register (worker.register), claim queued runs of
    their pool (run.claim, a long-poll), heartbeat the lease (run.heartbeat,
    whose reply carries cancel_requested) and complete (run.complete).
    The run actor serves `worker.*` as a second bus instance of its own,
    on the same thread, so the registry and the runs have one owner.

    A claim takes the oldest queued run of its pool. It is granted in the
    same steps as a local start (actors/run/lease.c): the outbox lands
    first, then the run gets the session's next fence and the session
    actor acknowledges it, and only then does the worker hear of the run:
    every append it makes carries that fence, and a later fence (an
    expiry, a new claim) shuts it out.

    The registry is kept in the run store too (the 'W' table of the runs
    dbi), so `switchboard workers` still knows every worker after a
    restart, with its status by the clock. A registration is written at
    once; last_seen_at, which every heartbeat moves, is written by the
    tick at most every SEEN_SAVE_MS per worker, so a heartbeat costs no
    write of its own. A worker's current run is not kept: recovery
    interrupts (or re-queues) every run that was claimed or running. */
#include "actors/run/run_impl.h"
#include "schemas/vocab.h"

#include <unistd.h>

#define STALE_S_DEFAULT 60
#define OFFLINE_S_DEFAULT 300
#define CLAIMS_MAX 1024          /* waiting claims; more are answered {} at once */
#define WORKERS_MAX 1000
#define SEEN_SAVE_MS 5000        /* last_seen_at reaches the store at most this often per worker */
#define WORKER_RECORD_MAX (64 * 1024)
#define CANCEL_S_DEFAULT 10      /* two heartbeats at their longest interval (5 s) */

/*  What the registry holds per worker: the shared worker_t first (the
    rest of the actor sees only that), then when it was last written. */
typedef struct {
    worker_t w;
    uint64_t saved_seen_at;     /* the last_seen_at the store holds */
    bool dirty;                 /* last_seen_at moved since */
} s_worker_t;

/* ------------------------------------------------------------------ */
/*  The registry */

static void
s_worker_free (void **item)
{
    worker_t *w = *item;
    if (w) {
        free (w->caps);
        free (w);
        *item = NULL;
    }
}

static void
s_claim_free (claim_t **claim_p)
{
    claim_t *c = *claim_p;
    if (c) {
        sb_msg_destroy (&c->msg);
        free (c);
        *claim_p = NULL;
    }
}

static const char *
s_worker_status (self_t *self, const worker_t *w)
{
    uint64_t now = sb_now_ms ();
    uint64_t age = now > w->last_seen_at ? now - w->last_seen_at : 0;
    if (age > self->offline_ms)
        return "offline";
    if (age > self->stale_ms)
        return "stale";
    return w->current_run_id [0] ? "running" : "idle";
}

static void
s_worker_encode (self_t *self, const worker_t *w, sb_enc_t *e)
{
    sb_enc_map_open (e);
    sb_enc_kstr (e, "worker_id", w->worker_id);
    sb_enc_kstr (e, "instance_id", w->instance_id);
    if (w->pid)
        sb_enc_kuint (e, "pid", w->pid);
    if (w->hostname [0])
        sb_enc_kstr (e, "hostname", w->hostname);
    sb_enc_kstr (e, "pool", w->pool);
    if (w->caps) {
        sb_enc_key (e, "capabilities");
        sb_enc_raw (e, w->caps, w->caps_len);
    }
    sb_enc_kstr (e, "workspace_sync", w->workspace_sync);
    sb_enc_kstr (e, "status", s_worker_status (self, w));
    bool claiming = false;
    for (claim_t *c = zlistx_first (self->claims); c && !claiming; c = zlistx_next (self->claims))
        claiming = strcmp (c->worker_id, w->worker_id) == 0;
    sb_enc_kbool (e, "claiming", claiming);
    if (w->current_run_id [0]) {
        sb_enc_kstr (e, "current_run_id", w->current_run_id);
        lease_t *lease = zhashx_lookup (self->leases, w->current_run_id);
        if (lease)
            sb_enc_kuint (e, "lease_expires_at", sb_now_ms () + (uint64_t) (lease->expires - sb_mono_ms ()));
    }
    sb_enc_kuint (e, "registered_at", w->registered_at);
    sb_enc_kuint (e, "last_seen_at", w->last_seen_at);
    sb_enc_map_close (e);
}

static void
s_reply_worker (self_t *self, const sb_msg_t *msg, const worker_t *w)
{
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "worker");
    s_worker_encode (self, w, e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->wbus, msg, b, len);
}

/* ------------------------------------------------------------------ */
/*  The registry in the store */

static void
s_worker_record (const worker_t *w, sb_enc_t *e)
{
    sb_enc_map_open (e);
    sb_enc_kstr (e, "worker_id", w->worker_id);
    sb_enc_kstr (e, "instance_id", w->instance_id);
    sb_enc_kstr (e, "hostname", w->hostname);
    sb_enc_kstr (e, "pool", w->pool);
    sb_enc_kstr (e, "workspace_sync", w->workspace_sync);
    sb_enc_kuint (e, "pid", w->pid);
    sb_enc_kuint (e, "registered_at", w->registered_at);
    sb_enc_kuint (e, "last_seen_at", w->last_seen_at);
    if (w->caps) {
        sb_enc_key (e, "capabilities");
        sb_enc_raw (e, w->caps, w->caps_len);
    }
    sb_enc_map_close (e);
}

typedef struct {
    self_t *self;
    bool all;                   /* every dirty worker, not only the due ones */
    s_worker_t *one;            /* just this one (a registration) */
} s_save_ctx_t;

static bool
s_due (const s_worker_t *sw, bool all)
{
    return sw->dirty && (all || sw->w.last_seen_at >= sw->saved_seen_at + SEEN_SAVE_MS);
}

static int
s_put (sb_txn_t *txn, s_worker_t *sw)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return -1;
    s_worker_record (&sw->w, e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_key_t k;
    sb_key_init (&k, 'W');
    sb_key_str (&k, sw->w.worker_id);
    sb_txn_put (txn, DBI_RUNS, k.buf, k.len, b, len);
    sb_enc_destroy (&e);
    return 0;
}

/*  Re-runnable (sb_store_write): it only reads the workers. */
static int
s_save_fn (sb_txn_t *txn, void *arg)
{
    s_save_ctx_t *c = arg;
    if (c->one)
        return s_put (txn, c->one);
    for (s_worker_t *sw = zhashx_first (c->self->workers); sw; sw = zhashx_next (c->self->workers))
        if (s_due (sw, c->all) && s_put (txn, sw))
            return -1;
    return 0;
}

/*  Writes one worker (one), or every dirty worker whose last_seen_at is
    due (all: every dirty one, at shutdown), in one transaction. */
static void
s_workers_save (self_t *self, s_worker_t *one, bool all)
{
    bool any = one != NULL;
    for (s_worker_t *sw = zhashx_first (self->workers); sw && !any; sw = zhashx_next (self->workers))
        any = s_due (sw, all);
    if (!any)
        return;
    s_save_ctx_t c = { self, all, one };
    int rc = sb_store_write (self->store, s_save_fn, &c);
    if (rc) {
        sb_warn (ACTOR, "cannot save the worker registry: %s", sb_store_strerror (rc));
        return;
    }
    for (s_worker_t *sw = zhashx_first (self->workers); sw; sw = zhashx_next (self->workers))
        if (one ? sw == one : s_due (sw, all)) {
            sw->saved_seen_at = sw->w.last_seen_at;
            sw->dirty = false;
        }
}

/*  Reads the registry back at startup. A record that does not decode is
    skipped (and rewritten by the worker's next registration). */
static void
s_workers_load (self_t *self)
{
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false))
        return;
    sb_txn_iter_t it;
    sb_txn_iter_begin (&txn, &it, DBI_RUNS, "W", 1, NULL, 0);
    sb_datum_t k, v;
    size_t n = 0;
    while (sb_txn_iter_next (&it, &k, &v)) {
        if (zhashx_size (self->workers) >= WORKERS_MAX) {
            sb_txn_iter_end (&it);
            break;
        }
        sb_verr_t err;
        sb_doc_t *doc = v.size <= WORKER_RECORD_MAX ? sb_decode (v.data, v.size, NULL, 0, &err) : NULL;
        const sb_val_t *r = doc ? sb_doc_root (doc) : NULL;
        const char *id = sb_get_str (r, "worker_id");
        s_worker_t *sw = id && strlen (id) < sizeof sw->w.worker_id ? calloc (1, sizeof *sw) : NULL;
        if (sw) {
            worker_t *w = &sw->w;
            s_copy (w->worker_id, sizeof w->worker_id, id);
            s_copy (w->instance_id, sizeof w->instance_id, sb_get_str (r, "instance_id"));
            s_copy (w->hostname, sizeof w->hostname, sb_get_str (r, "hostname"));
            s_copy (w->pool, sizeof w->pool, sb_get_str (r, "pool"));
            s_copy (w->workspace_sync, sizeof w->workspace_sync, sb_get_str (r, "workspace_sync"));
            w->pid = sb_get_uint (r, "pid", 0);
            w->registered_at = sb_get_uint (r, "registered_at", 0);
            w->last_seen_at = sw->saved_seen_at = sb_get_uint (r, "last_seen_at", 0);
            const sb_val_t *caps = sb_get_map (r, "capabilities");
            if (caps) {
                sb_enc_t *e = sb_enc_new ();
                size_t len;
                if (e) {
                    sb_enc_val (e, caps);
                    const uint8_t *b = sb_enc_data (e, &len);
                    if ((w->caps = malloc (len)) != NULL) {
                        memcpy (w->caps, b, len);
                        w->caps_len = len;
                    }
                    sb_enc_destroy (&e);
                }
            }
            zhashx_update (self->workers, w->worker_id, sw);
            n++;
        }
        sb_doc_destroy (&doc);
    }
    sb_txn_abort (&txn);
    if (n)
        sb_info (ACTOR, "worker registry loaded workers=%zu", n);
}

worker_t *
sb_run_worker_seen (self_t *self, const char *worker_id)
{
    s_worker_t *sw = zhashx_lookup (self->workers, worker_id);
    if (!sw)
        return NULL;
    sw->w.last_seen_at = sb_now_ms ();
    sw->dirty = true;           /* the tick writes it, when due */
    return &sw->w;
}

void
sb_run_worker_release (self_t *self, const run_t *r)
{
    if (!r->worker_id [0])
        return;
    worker_t *w = zhashx_lookup (self->workers, r->worker_id);
    if (w && strcmp (w->current_run_id, r->run_id) == 0)
        w->current_run_id [0] = 0;
}

static bool
s_name_ok (const char *s, size_t max)
{
    size_t n = s ? strlen (s) : 0;
    if (n < 1 || n > max)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')
              || *s == '.' || *s == '_' || *s == '-'))
            return false;
    return true;
}

static void
s_handle_register (self_t *self, sb_msg_t *msg)
{
    const char *id = sb_get_str (msg->body, "worker_id");
    const char *instance = sb_get_str (msg->body, "instance_id");
    const char *pool = sb_get_str (msg->body, "pool");
    const char *sync = sb_get_str (msg->body, "workspace_sync");
    if (!pool)
        pool = "default";
    if (!sync)
        sync = "none";          //  else same_path or none: the schema's ENUM row checked it
    if (!s_name_ok (id, 64) || !s_name_ok (instance, 64) || !s_name_ok (pool, 64)) {
        sb_bus_error (self->wbus, msg, SB_E_invalid,
                      "worker_id, instance_id and pool are 1 to 64 bytes of [A-Za-z0-9._-]");
        return;
    }
    const sb_val_t *caps = sb_get_map (msg->body, "capabilities");
    for (uint32_t k = 0; caps && k < caps->len; k++)
        if (sb_map_key (caps, k)->type != SB_V_STR || sb_map_val (caps, k)->type != SB_V_STR) {
            sb_bus_error (self->wbus, msg, SB_E_invalid, "capabilities: keys and values are strings");
            return;
        }
    s_worker_t *sw = zhashx_lookup (self->workers, id);
    if (!sw) {
        if (zhashx_size (self->workers) >= WORKERS_MAX) {
            sb_bus_error (self->wbus, msg, SB_E_too_large, "%d workers are registered already", WORKERS_MAX);
            return;
        }
        sw = calloc (1, sizeof *sw);
        if (!sw) {
            sb_bus_error (self->wbus, msg, SB_E_internal, "out of memory");
            return;
        }
        s_copy (sw->w.worker_id, sizeof sw->w.worker_id, id);
        zhashx_insert (self->workers, id, sw);
    }
    worker_t *w = &sw->w;
    /* a new process of the same worker: what the old one held is its
       lease's business (it expires), not the new one's */
    if (strcmp (w->instance_id, instance) != 0) {
        w->current_run_id [0] = 0;
        w->registered_at = sb_now_ms ();
    }
    s_copy (w->instance_id, sizeof w->instance_id, instance);
    s_copy (w->pool, sizeof w->pool, pool);
    s_copy (w->workspace_sync, sizeof w->workspace_sync, sync);
    s_copy (w->hostname, sizeof w->hostname, sb_get_str (msg->body, "hostname"));
    w->pid = sb_get_uint (msg->body, "pid", 0);
    free (w->caps);
    w->caps = NULL;
    w->caps_len = 0;
    if (caps) {
        sb_enc_t *e = sb_enc_new ();
        if (e) {
            sb_enc_val (e, caps);
            size_t len;
            const uint8_t *b = sb_enc_data (e, &len);
            if ((w->caps = malloc (len)) != NULL) {
                memcpy (w->caps, b, len);
                w->caps_len = len;
            }
            sb_enc_destroy (&e);
        }
    }
    w->last_seen_at = sb_now_ms ();
    s_workers_save (self, sw, false);
    sb_info (ACTOR, "worker registered worker=%s instance=%s pool=%s host=%s sync=%s", w->worker_id,
             w->instance_id, w->pool, w->hostname [0] ? w->hostname : "-", w->workspace_sync);
    s_reply_worker (self, msg, w);
    /* queued runs of its pool now say they wait for a free worker */
    sb_run_start_queued (self);
}

static void
s_handle_get (self_t *self, sb_msg_t *msg)
{
    const char *id = sb_get_str (msg->body, "worker_id");
    worker_t *w = zhashx_lookup (self->workers, id);
    if (!w) {
        sb_bus_error (self->wbus, msg, SB_E_not_found, "no worker %s", id);
        return;
    }
    s_reply_worker (self, msg, w);
}

static int
s_cmp_id (const void *a, const void *b)
{
    return strcmp (*(const char * const *) a, *(const char * const *) b);
}

static void
s_handle_list (self_t *self, sb_msg_t *msg)
{
    const char *pool = sb_get_str (msg->body, "pool");
    size_t n = zhashx_size (self->workers), k = 0;
    const char **ids = calloc (n ? n : 1, sizeof *ids);
    if (!ids) {
        sb_bus_error (self->wbus, msg, SB_E_internal, "out of memory");
        return;
    }
    for (worker_t *w = zhashx_first (self->workers); w; w = zhashx_next (self->workers))
        if (!pool || strcmp (pool, w->pool) == 0)
            ids [k++] = w->worker_id;
    qsort (ids, k, sizeof *ids, s_cmp_id);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "workers");
    sb_enc_array_open (e);
    for (size_t i = 0; i < k; i++)
        s_worker_encode (self, zhashx_lookup (self->workers, ids [i]), e);
    sb_enc_array_close (e);
    sb_enc_map_close (e);
    free (ids);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->wbus, msg, b, len);
}

typedef void (s_handler_fn) (self_t *self, sb_msg_t *msg);

const sb_dispatch_t sb_worker_dispatch [] = {
    SB_DISPATCH ("worker.register", s_handle_register),
    SB_DISPATCH ("worker.get",      s_handle_get),
    SB_DISPATCH ("worker.list",     s_handle_list),
    SB_DISPATCH_END
};

void
sb_run_handle_worker_bus (self_t *self)
{
    sb_msg_t *msg;
    while ((msg = sb_bus_recv (self->wbus, 0))) {
        if (msg->route) {
            const sb_dispatch_t *row = sb_dispatch_find (sb_worker_dispatch, msg->h.type);
            if (row)
                ((s_handler_fn *) row->fn) (self, msg);
            else
                sb_bus_error (self->wbus, msg, SB_E_unknown_type, "worker does not serve %s", msg->h.type);
        }
        sb_msg_destroy (&msg);
    }
}

/* ------------------------------------------------------------------ */
/*  Claims */

static void
s_reply_empty (self_t *self, const sb_msg_t *msg)
{
    sb_bus_reply (self->bus, msg, (const uint8_t *) "\x80", 1);
}

void
sb_run_claim_drop (self_t *self, claim_t **claim_p)
{
    if (*claim_p)
        s_reply_empty (self, (*claim_p)->msg);
    s_claim_free (claim_p);
}

/*  The oldest queued worker run of `pool` that no job holds, into out. */
static bool
s_oldest_queued (self_t *self, const char *pool, char *out)
{
    zlistx_t *ids = sb_run_active_ids (self);
    if (!ids)
        return false;
    out [0] = 0;
    for (char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        if (sb_run_job (self, id))
            continue;
        /* run ids are ULIDs: the smaller id is the older run */
        if (out [0] && strcmp (id, out) > 0)
            continue;
        run_t r;
        if (sb_run_record_load (self, id, &r) == 0) {
            if (r.status == SB_RUN_queued && sb_executor_from_name (r.executor) == SB_EXECUTOR_WORKER
            &&  strcmp (r.pool, pool) == 0)
                s_copy (out, 33, id);
            sb_run_record_free (&r);
        }
    }
    zlistx_destroy (&ids);
    return out [0] != 0;
}

/*  Starts granting run_id to the claim (the outbox, then the fence). */
static void
s_assign (self_t *self, const char *run_id, claim_t *claim)
{
    uint64_t barrier = self->outbox_next - 1;
    sb_run_job_set (self, run_id, JOB_WAIT_OUTBOX, barrier);
    job_t *j = sb_run_job (self, run_id);
    if (!j) {
        sb_run_claim_drop (self, &claim);
        return;
    }
    j->claim = claim;
    if (sb_outbox_acked (self->outbox) >= barrier)
        sb_run_start_fence (self, run_id);
    else
        sb_run_outbox_flush (self);
}

void
sb_run_handle_claim (self_t *self, sb_msg_t *msg)
{
    const char *id = sb_get_str (msg->body, "worker_id");
    const char *pool = sb_get_str (msg->body, "pool");
    worker_t *w = sb_run_worker_seen (self, id);
    if (!w) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "worker %s is not registered; send worker.register first", id);
        return;
    }
    if (strcmp (w->pool, pool) != 0) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "worker %s registered for pool %s, not %s", id, w->pool, pool);
        return;
    }
    claim_t *c = calloc (1, sizeof *c);
    if (!c || !(c->msg = sb_run_msg_keep (msg))) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        free (c);
        return;
    }
    s_copy (c->worker_id, sizeof c->worker_id, id);
    s_copy (c->pool, sizeof c->pool, pool);
    c->lease_ms = sb_get_uint (c->msg->body, "lease_s", 30) * 1000;
    c->expires = sb_mono_ms () + (int64_t) sb_get_uint (c->msg->body, "wait_ms", 0);
    /* a worker's new claim replaces the one it left waiting (it timed out
       on its side, or the process was restarted) */
    for (claim_t *o = zlistx_first (self->claims); o; o = zlistx_next (self->claims))
        if (strcmp (o->worker_id, id) == 0) {
            zlistx_detach (self->claims, zlistx_cursor (self->claims));
            sb_run_claim_drop (self, &o);
            break;
        }
    char run_id [33];
    if (s_oldest_queued (self, pool, run_id))
        s_assign (self, run_id, c);
    else
    if (sb_get_uint (c->msg->body, "wait_ms", 0) > 0 && zlistx_size (self->claims) < CLAIMS_MAX)
        zlistx_add_end (self->claims, c);
    else
        sb_run_claim_drop (self, &c);
}

void
sb_run_claims_expire (self_t *self)
{
    /* the tick also writes the last_seen_at that are due */
    s_workers_save (self, NULL, false);
    int64_t now = sb_mono_ms ();
    claim_t *c = zlistx_first (self->claims);
    while (c) {
        if (c->expires <= now) {
            zlistx_detach (self->claims, zlistx_cursor (self->claims));
            sb_run_claim_drop (self, &c);
            c = zlistx_first (self->claims);
        }
        else
            c = zlistx_next (self->claims);
    }
}

bool
sb_run_offer (self_t *self, run_t *r)
{
    int64_t now = sb_mono_ms ();
    for (claim_t *c = zlistx_first (self->claims); c; c = zlistx_next (self->claims)) {
        if (strcmp (c->pool, r->pool) != 0 || c->expires <= now)
            continue;
        zlistx_detach (self->claims, zlistx_cursor (self->claims));
        s_assign (self, r->run_id, c);
        return true;
    }
    /* nobody to take it: run-info says why it waits */
    size_t n = 0, live = 0;
    for (worker_t *w = zhashx_first (self->workers); w; w = zhashx_next (self->workers))
        if (strcmp (w->pool, r->pool) == 0) {
            n++;
            sb_worker_status_t st = sb_worker_status_from_name (s_worker_status (self, w));
            if (st == SB_WORKER_IDLE || st == SB_WORKER_RUNNING)
                live++;
        }
    char why [256];
    if (n == 0)
        snprintf (why, sizeof why, "a worker in pool %s to claim it (no worker of pool %s has registered)",
                  r->pool, r->pool);
    else
    if (live == 0)
        snprintf (why, sizeof why, "a worker in pool %s to claim it (its %zu worker%s stale or offline)",
                  r->pool, n, n == 1 ? " is" : "s are");
    else
        snprintf (why, sizeof why, "a worker in pool %s to claim it (%zu registered, none has claimed yet)",
                  r->pool, live);
    if (strcmp (why, r->waiting_for) != 0) {
        s_copy (r->waiting_for, sizeof r->waiting_for, why);
        sb_run_save (self, r, false, false, NULL);
    }
    return false;
}

void
sb_run_grant (self_t *self, run_t *r, claim_t *claim)
{
    if (!claim)
        return;
    worker_t *w = zhashx_lookup (self->workers, claim->worker_id);
    if (!w || claim->expires + CALL_MS < sb_mono_ms ()
    ||  sb_run_set_status (r, SB_RUN_claimed, NULL) != SB_OK) {
        /* the worker left, or gave up on its claim: the run stays queued
           (under its new fence) for the next claim */
        sb_run_claim_drop (self, &claim);
        return;
    }
    s_copy (r->owner, sizeof r->owner, w->worker_id);
    s_copy (r->worker_id, sizeof r->worker_id, w->worker_id);
    s_copy (r->instance_id, sizeof r->instance_id, w->instance_id);
    r->started_at = sb_now_ms ();
    r->waiting_for [0] = 0;
    lease_t *lease = calloc (1, sizeof *lease);
    if (lease) {
        lease->lease_ms = claim->lease_ms;
        lease->expires = sb_mono_ms () + (int64_t) claim->lease_ms;
        zhashx_update (self->leases, r->run_id, lease);
    }
    s_copy (w->current_run_id, sizeof w->current_run_id, r->run_id);
    w->last_seen_at = sb_now_ms ();
    sb_run_save (self, r, false, true, NULL);
    sb_info (ACTOR, "run claimed run=%s worker=%s instance=%s fence=%llu", r->run_id, w->worker_id,
             w->instance_id, (unsigned long long) r->fence);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_kstr (e, "session_id", r->session_id);
    sb_enc_kuint (e, "fence", r->fence);
    sb_enc_kuint (e, "lease_expires_at", sb_now_ms () + claim->lease_ms);
    sb_enc_kuint (e, "lease_ms", claim->lease_ms);
    sb_enc_key (e, "config");
    sb_enc_map_open (e);
    if (r->resume_from [0]) sb_enc_kstr (e, "resume_from", r->resume_from);
    if (r->kind [0]) sb_enc_kstr (e, "kind", r->kind);
    /* a rewind runs where the workspace is: on the worker */
    sb_run_rewind_encode (r, e);
    if (r->approval_policy [0]) sb_enc_kstr (e, "approval_policy", r->approval_policy);
    sb_run_limits_encode (r, e);
    sb_enc_map_close (e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    /* the worker's entries come after `claimed` on the tape */
    sb_run_reply_landed (self, self->bus, claim->msg, b, len);
    s_claim_free (&claim);
}

/*  A worker learns of a cancel only from its next heartbeat's reply, and
    one that ignores it would keep the run `cancelling` (and its session
    busy) for as long as its lease, which it chose (up to an hour). So the
    cancel caps the lease at the grace from now, and heartbeats no longer
    extend it past that: when it lapses, the expiry fences the worker and
    the run becomes `cancelled` (run/lease.c). */
void
sb_run_worker_cancel_lease (self_t *self, const run_t *r)
{
    if (sb_executor_from_name (r->executor) != SB_EXECUTOR_WORKER)
        return;
    lease_t *lease = zhashx_lookup (self->leases, r->run_id);
    if (!lease || lease->cancel_by)
        return;
    lease->cancel_by = sb_mono_ms () + (int64_t) self->cancel_grace_ms;
    if (lease->expires > lease->cancel_by)
        lease->expires = lease->cancel_by;
}

/* ------------------------------------------------------------------ */

int
sb_run_workers_open (self_t *self, const sb_actor_args_t *args)
{
    self->workers = zhashx_new ();
    self->claims = zlistx_new ();
    char name [160];
    snprintf (name, sizeof name, "%s-workers", self->instance);
    self->wbus = sb_bus_new (args->cmd_endpoint, name);
    if (!self->workers || !self->claims || !self->wbus)
        return -1;
    zhashx_set_destructor (self->workers, s_worker_free);
    self->stale_ms = sb_actor_limit (ACTOR, 0, "SWITCHBOARD_WORKER_STALE_S", STALE_S_DEFAULT, 1, 86400) * 1000;
    self->offline_ms = sb_actor_limit (ACTOR, 0, "SWITCHBOARD_WORKER_OFFLINE_S", OFFLINE_S_DEFAULT, 1, 86400 * 7) * 1000;
    self->cancel_grace_ms = sb_actor_limit (ACTOR, 0, "SWITCHBOARD_WORKER_CANCEL_S", CANCEL_S_DEFAULT, 1, 3600) * 1000;
    s_workers_load (self);
    sb_verr_t err;
    if (sb_bus_register (self->wbus, "worker", name, NULL, 0, 5000, &err)) {
        sb_error (ACTOR, "cannot register the worker service: %s", err.message);
        return -1;
    }
    return 0;
}

void
sb_run_workers_close (self_t *self)
{
    if (self->claims) {
        claim_t *c;
        while ((c = zlistx_detach (self->claims, NULL)))
            s_claim_free (&c);
        zlistx_destroy (&self->claims);
    }
    if (self->workers && self->store)
        s_workers_save (self, NULL, true);
    zhashx_destroy (&self->workers);
    sb_bus_destroy (&self->wbus);
}

/*  actors/run.c — the run coordinator (docs/architecture.md): runs, their
    state machine, leases, fencing, cancel and resume, and recovery at
    startup. LMDB at DATA/run.

    Every status change is committed here first and reaches the session
    tape through an outbox: the change and its pending `run.status` append
    are written in one transaction, and the append carries a deterministic
    command_id ("run:<run_id>:<n>"), so a crash between the commit and the
    append neither loses nor doubles an entry — the outbox is replayed at
    startup and the session actor drops the duplicate.

    Leases live in memory only: after a restart every claimed run is stale
    anyway (recovery marks it interrupted), so persisting each heartbeat
    would buy nothing but fsyncs. */
#include "actors/actor.h"
#include "actors/store.h"
#include "bus/client.h"
#include "common/log.h"

#include <string.h>

#define ACTOR "run"
#define LEASE_MS 30000
#define CALL_MS 5000
#define DEFAULT_MAX_STEPS 50
#define DEFAULT_TIMEOUT_S 3600

enum { DBI_RUNS, DBI_ACTIVE, DBI_BYSESSION, DBI_OUTBOX, DBI_FENCES, DBI_COMMANDS };
static const char *s_dbis [] = { "runs", "active", "bysession", "outbox", "fences", "commands", NULL };

typedef struct {
    char run_id [33];
    char session_id [33];
    char status [16];
    char phase [32];
    char reason [1024];
    char resume_from [33];
    char owner [129];
    char approval_policy [16];
    char executor [16];
    char pool [64];
    char waiting_for [256];
    char *input;
    uint64_t fence, created_at, updated_at, started_at, ended_at;
    uint64_t steps, input_tokens, output_tokens;
    uint64_t max_steps, timeout_s, max_output_tokens;
    bool cancel_requested;
} run_t;

typedef struct {
    int64_t expires;            /* mono ms */
    char phase [32];
    uint64_t steps, input_tokens, output_tokens;
} lease_t;

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_store_t *store;
    sb_enc_t *enc;
    char instance [129];
    zhashx_t *leases;           /* run_id -> lease_t */
    uint64_t outbox_next;
    int64_t next_tick;
    bool terminated;
} self_t;

/* ------------------------------------------------------------------ */
/*  Run records */

static void
s_run_free (run_t *r)
{
    free (r->input);
    r->input = NULL;
}

static void
s_copy (char *dst, size_t n, const char *src)
{
    snprintf (dst, n, "%s", src ? src : "");
}

static void
s_run_encode (const run_t *r, const lease_t *lease, sb_enc_t *e)
{
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_kstr (e, "session_id", r->session_id);
    sb_enc_kstr (e, "status", r->status);
    const char *phase = lease && lease->phase [0] ? lease->phase : r->phase;
    if (phase [0]) sb_enc_kstr (e, "phase", phase);
    if (r->reason [0]) sb_enc_kstr (e, "reason", r->reason);
    if (r->input) sb_enc_kstr (e, "input", r->input);
    sb_enc_key (e, "target");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "executor", r->executor [0] ? r->executor : "local");
    if (r->pool [0]) sb_enc_kstr (e, "pool", r->pool);
    sb_enc_map_close (e);
    if (r->resume_from [0]) sb_enc_kstr (e, "resume_from", r->resume_from);
    sb_enc_kuint (e, "fence", r->fence);
    if (r->owner [0]) sb_enc_kstr (e, "owner", r->owner);
    if (r->approval_policy [0]) sb_enc_kstr (e, "approval_policy", r->approval_policy);
    sb_enc_key (e, "limits");
    sb_enc_map_open (e);
    sb_enc_kuint (e, "max_steps", r->max_steps);
    sb_enc_kuint (e, "timeout_s", r->timeout_s);
    if (r->max_output_tokens) sb_enc_kuint (e, "max_output_tokens", r->max_output_tokens);
    sb_enc_map_close (e);
    sb_enc_kuint (e, "created_at", r->created_at);
    sb_enc_kuint (e, "updated_at", r->updated_at);
    if (r->started_at) sb_enc_kuint (e, "started_at", r->started_at);
    if (r->ended_at) sb_enc_kuint (e, "ended_at", r->ended_at);
    if (lease) sb_enc_kuint (e, "lease_expires_at", sb_now_ms () + (uint64_t) (lease->expires - sb_mono_ms ()));
    sb_enc_kuint (e, "steps", lease && lease->steps > r->steps ? lease->steps : r->steps);
    sb_enc_kuint (e, "input_tokens", lease && lease->input_tokens > r->input_tokens ? lease->input_tokens : r->input_tokens);
    sb_enc_kuint (e, "output_tokens", lease && lease->output_tokens > r->output_tokens ? lease->output_tokens : r->output_tokens);
    if (r->cancel_requested) sb_enc_kbool (e, "cancel_requested", true);
    if (r->waiting_for [0] && strcmp (r->status, "queued") == 0) sb_enc_kstr (e, "waiting_for", r->waiting_for);
    sb_enc_map_close (e);
}

static int
s_run_decode (const void *data, size_t len, run_t *r)
{
    memset (r, 0, sizeof *r);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, NULL, 0, &err);
    if (!doc)
        return -1;
    const sb_val_t *v = sb_doc_root (doc);
    s_copy (r->run_id, sizeof r->run_id, sb_get_str (v, "run_id"));
    s_copy (r->session_id, sizeof r->session_id, sb_get_str (v, "session_id"));
    s_copy (r->status, sizeof r->status, sb_get_str (v, "status"));
    s_copy (r->phase, sizeof r->phase, sb_get_str (v, "phase"));
    s_copy (r->reason, sizeof r->reason, sb_get_str (v, "reason"));
    s_copy (r->resume_from, sizeof r->resume_from, sb_get_str (v, "resume_from"));
    s_copy (r->owner, sizeof r->owner, sb_get_str (v, "owner"));
    s_copy (r->approval_policy, sizeof r->approval_policy, sb_get_str (v, "approval_policy"));
    const sb_val_t *t = sb_get_map (v, "target");
    s_copy (r->executor, sizeof r->executor, sb_get_str (t, "executor"));
    s_copy (r->pool, sizeof r->pool, sb_get_str (t, "pool"));
    s_copy (r->waiting_for, sizeof r->waiting_for, sb_get_str (v, "waiting_for"));
    const char *input = sb_get_str (v, "input");
    r->input = input ? strdup (input) : NULL;
    r->fence = sb_get_uint (v, "fence", 0);
    r->created_at = sb_get_uint (v, "created_at", 0);
    r->updated_at = sb_get_uint (v, "updated_at", 0);
    r->started_at = sb_get_uint (v, "started_at", 0);
    r->ended_at = sb_get_uint (v, "ended_at", 0);
    r->steps = sb_get_uint (v, "steps", 0);
    r->input_tokens = sb_get_uint (v, "input_tokens", 0);
    r->output_tokens = sb_get_uint (v, "output_tokens", 0);
    const sb_val_t *l = sb_get_map (v, "limits");
    r->max_steps = sb_get_uint (l, "max_steps", DEFAULT_MAX_STEPS);
    r->timeout_s = sb_get_uint (l, "timeout_s", DEFAULT_TIMEOUT_S);
    r->max_output_tokens = sb_get_uint (l, "max_output_tokens", 0);
    r->cancel_requested = sb_get_bool (v, "cancel_requested", false);
    sb_doc_destroy (&doc);
    return 0;
}

static int
s_run_load (self_t *self, const char *run_id, run_t *r)
{
    if (!run_id || strlen (run_id) > 32)
        return -1;
    sb_txn_t txn;
    sb_key_t k;
    sb_key_init (&k, 'R');
    sb_key_str (&k, run_id);
    MDB_val v;
    int rc = -1;
    if (sb_txn_begin (self->store, &txn, false) == 0) {
        if (sb_txn_get (&txn, DBI_RUNS, k.buf, k.len, &v) == 0)
            rc = s_run_decode (v.mv_data, v.mv_size, r);
        sb_txn_abort (&txn);
    }
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Writes: one transaction per change, with its outbox entry */

typedef struct {
    self_t *self;
    run_t *run;
    bool is_new;
    const char *prompt;         /* also append a `prompt` entry first */
    bool status_changed;
    bool new_fence;             /* give the run the session's next fence */
    const char *command_id;     /* remember the reply under it */
    const uint8_t *reply;
    size_t reply_len;
    uint64_t outbox_n;
} write_ctx_t;

static void
s_enc_status_entry (sb_enc_t *e, const run_t *r)
{
    sb_enc_map_open (e);
    sb_enc_kstr (e, "kind", "run.status");
    sb_enc_key (e, "body");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_kstr (e, "status", r->status);
    if (r->reason [0])
        sb_enc_kstr (e, "reason", r->reason);
    sb_enc_map_close (e);
    sb_enc_map_close (e);
}

static int
s_write_fn (sb_txn_t *txn, void *arg)
{
    write_ctx_t *w = arg;
    self_t *self = w->self;
    run_t *r = w->run;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return -1;
    sb_key_t k;
    if (w->new_fence) {
        /* fences are per session, monotonic, and persisted with the run
           that holds them (re-read on a re-run, so a grow cannot skip one) */
        sb_key_init (&k, 'F');
        sb_key_str (&k, r->session_id);
        MDB_val fv;
        uint64_t fence = 0;
        if (sb_txn_get (txn, DBI_FENCES, k.buf, k.len, &fv) == 0 && fv.mv_size == 8)
            fence = sb_key_read_u64 (&fv, 0);
        fence++;
        uint8_t be [8];
        for (int i = 0; i < 8; i++)
            be [i] = (uint8_t) (fence >> (56 - 8 * i));
        sb_txn_put (txn, DBI_FENCES, k.buf, k.len, be, 8);
        r->fence = fence;
    }
    s_run_encode (r, NULL, e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_key_init (&k, 'R');
    sb_key_str (&k, r->run_id);
    sb_txn_put (txn, DBI_RUNS, k.buf, k.len, data, len);
    if (w->is_new) {
        sb_key_init (&k, 'B');
        sb_key_str (&k, r->session_id);
        sb_key_str (&k, r->run_id);
        sb_txn_put (txn, DBI_BYSESSION, k.buf, k.len, "", 0);
    }
    sb_key_init (&k, 'A');
    sb_key_str (&k, r->session_id);
    if (sb_run_status_final (r->status)) {
        MDB_val cur;
        if (sb_txn_get (txn, DBI_ACTIVE, k.buf, k.len, &cur) == 0
        &&  cur.mv_size == strlen (r->run_id) && memcmp (cur.mv_data, r->run_id, cur.mv_size) == 0)
            sb_txn_del (txn, DBI_ACTIVE, k.buf, k.len);
    }
    else
        sb_txn_put (txn, DBI_ACTIVE, k.buf, k.len, r->run_id, strlen (r->run_id));
    if (w->status_changed) {
        /* the outbox entry: appended to the tape after the commit */
        w->outbox_n = self->outbox_next;
        char cmd [96];
        snprintf (cmd, sizeof cmd, "run:%s:%s:%llu", r->run_id, r->status, (unsigned long long) r->fence);
        sb_enc_reset (e);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", r->session_id);
        sb_enc_kstr (e, "run_id", r->run_id);
        sb_enc_kstr (e, "command_id", cmd);
        sb_enc_key (e, "entries");
        sb_enc_array_open (e);
        if (w->prompt) {
            sb_enc_map_open (e);
            sb_enc_kstr (e, "kind", "prompt");
            sb_enc_key (e, "body");
            sb_enc_map_open (e);
            sb_enc_kstr (e, "text", w->prompt);
            sb_enc_map_close (e);
            sb_enc_map_close (e);
        }
        s_enc_status_entry (e, r);
        sb_enc_array_close (e);
        sb_enc_map_close (e);
        data = sb_enc_data (e, &len);
        sb_key_init (&k, 'O');
        sb_key_u64 (&k, w->outbox_n);
        sb_txn_put (txn, DBI_OUTBOX, k.buf, k.len, data, len);
    }
    if (w->command_id && w->reply) {
        sb_key_init (&k, 'C');
        sb_key_str (&k, w->command_id);
        sb_txn_put (txn, DBI_COMMANDS, k.buf, k.len, w->reply, w->reply_len);
    }
    sb_enc_destroy (&e);
    return txn->ret;
}

/*  Sends pending tape appends in order; each is idempotent by its
    command_id, so a resend after a crash cannot double an entry. */
static void
s_outbox_flush (self_t *self)
{
    while (true) {
        sb_txn_t txn;
        if (sb_txn_begin (self->store, &txn, false))
            return;
        sb_txn_iter_t it;
        MDB_val k, v;
        uint8_t *copy = NULL;
        size_t clen = 0;
        uint8_t kbuf [16];
        size_t klen = 0;
        sb_txn_iter_begin (&txn, &it, DBI_OUTBOX, "O", 1, NULL, 0);
        if (sb_txn_iter_next (&it, &k, &v)) {
            copy = malloc (v.mv_size);
            if (copy) {
                memcpy (copy, v.mv_data, v.mv_size);
                clen = v.mv_size;
            }
            klen = k.mv_size < sizeof kbuf ? k.mv_size : sizeof kbuf;
            memcpy (kbuf, k.mv_data, klen);
        }
        sb_txn_iter_end (&it);
        sb_txn_abort (&txn);
        if (!copy)
            return;
        sb_msg_t *reply = sb_bus_call (self->bus, "session.append", NULL, copy, clen, CALL_MS);
        free (copy);
        if (!reply)
            return;             /* the session actor is busy or away: retry on the next tick */
        bool done = !sb_msg_is_error (reply)
                 || strcmp (sb_msg_error_code (reply), "not_found") == 0
                 || strcmp (sb_msg_error_code (reply), "invalid") == 0
                 || strcmp (sb_msg_error_code (reply), "conflict") == 0;
        if (sb_msg_is_error (reply))
            sb_warn (ACTOR, "tape append from the outbox failed code=%s message=\"%s\"%s",
                     sb_msg_error_code (reply), sb_msg_error_message (reply), done ? " (dropped)" : "");
        sb_msg_destroy (&reply);
        if (!done)
            return;
        if (sb_txn_begin (self->store, &txn, true) == 0) {
            sb_txn_del (&txn, DBI_OUTBOX, kbuf, klen);
            sb_txn_commit (&txn);
        }
    }
}

/*  Persists a run change (and its tape entry when the status changed),
    then flushes the outbox. Returns 0 or a store error. */
static int
s_save_with (self_t *self, run_t *r, bool is_new, bool status_changed, const char *prompt,
             bool new_fence)
{
    r->updated_at = sb_now_ms ();
    write_ctx_t w = { .self = self, .run = r, .is_new = is_new, .status_changed = status_changed,
                      .prompt = prompt, .new_fence = new_fence };
    int rc = sb_store_write (self->store, s_write_fn, &w);
    if (rc) {
        sb_error (ACTOR, "cannot save run %s: %s", r->run_id, sb_store_strerror (rc));
        return rc;
    }
    if (status_changed) {
        self->outbox_next = w.outbox_n + 1;
        sb_info (ACTOR, "run status run=%s session=%s status=%s%s%s", r->run_id, r->session_id, r->status,
                 r->reason [0] ? " reason=" : "", r->reason);
        s_outbox_flush (self);
    }
    return 0;
}

static int
s_save (self_t *self, run_t *r, bool is_new, bool status_changed, const char *prompt)
{
    return s_save_with (self, r, is_new, status_changed, prompt, false);
}

/*  Gives the run its session's next fence, persisted with it. */
static int
s_save_new_fence (self_t *self, run_t *r)
{
    return s_save_with (self, r, false, false, NULL, true);
}

static void
s_set_status (run_t *r, const char *status, const char *reason)
{
    s_copy (r->status, sizeof r->status, status);
    s_copy (r->reason, sizeof r->reason, reason);
    if (sb_run_status_final (status))
        r->ended_at = sb_now_ms ();
}

/* ------------------------------------------------------------------ */
/*  Replies */

static void
s_reply_run (self_t *self, const sb_msg_t *msg, const run_t *r)
{
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "run");
    s_run_encode (r, zhashx_lookup (self->leases, r->run_id), e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

/*  Tells the session actor the session's new fence and waits for it:
    from then on, appends with an older fence are refused. */
static int
s_fence_session (self_t *self, run_t *r)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", r->session_id);
    sb_enc_kuint (e, "fence", r->fence);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (self->bus, "session.fence", r->session_id, b, len, CALL_MS);
    sb_enc_destroy (&e);
    int rc = reply && !sb_msg_is_error (reply) ? 0 : -1;
    if (rc)
        sb_warn (ACTOR, "session.fence failed session=%s fence=%llu error=%s", r->session_id,
                 (unsigned long long) r->fence, reply ? sb_msg_error_message (reply) : "no reply");
    sb_msg_destroy (&reply);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Dispatch */

static void
s_dispatch (self_t *self, run_t *r)
{
    if (strcmp (r->executor, "worker") == 0) {
        char w [256];
        snprintf (w, sizeof w, "a worker in pool %s to claim it (workers are not built yet)", r->pool);
        if (strcmp (w, r->waiting_for) != 0) {
            s_copy (r->waiting_for, sizeof r->waiting_for, w);
            s_save (self, r, false, false, NULL);
        }
        return;
    }
    if (s_save_new_fence (self, r) || s_fence_session (self, r))
        return;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_kstr (e, "session_id", r->session_id);
    sb_enc_kuint (e, "fence", r->fence);
    if (r->resume_from [0]) sb_enc_kstr (e, "resume_from", r->resume_from);
    if (r->approval_policy [0]) sb_enc_kstr (e, "approval_policy", r->approval_policy);
    sb_enc_key (e, "limits");
    sb_enc_map_open (e);
    sb_enc_kuint (e, "max_steps", r->max_steps);
    sb_enc_kuint (e, "timeout_s", r->timeout_s);
    if (r->max_output_tokens) sb_enc_kuint (e, "max_output_tokens", r->max_output_tokens);
    sb_enc_map_close (e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (self->bus, "exec.start", r->session_id, b, len, CALL_MS);
    sb_enc_destroy (&e);
    if (!reply || sb_msg_is_error (reply)) {
        const char *code = reply ? sb_msg_error_code (reply) : "timeout";
        char w [256];
        snprintf (w, sizeof w, "an exec instance (%s)", strcmp (code, "no_service") == 0 ? "none is live" : code);
        if (strcmp (w, r->waiting_for) != 0) {
            s_copy (r->waiting_for, sizeof r->waiting_for, w);
            s_save (self, r, false, false, NULL);
        }
        sb_msg_destroy (&reply);
        return;
    }
    s_copy (r->owner, sizeof r->owner, sb_get_str (reply->body, "instance"));
    sb_msg_destroy (&reply);
    r->started_at = sb_now_ms ();
    r->waiting_for [0] = 0;
    s_set_status (r, "claimed", NULL);
    lease_t *lease = calloc (1, sizeof *lease);
    if (lease) {
        lease->expires = sb_mono_ms () + LEASE_MS;
        zhashx_update (self->leases, r->run_id, lease);
    }
    s_save (self, r, false, true, NULL);
}

/*  The ids of every unfinished run (one per session at most). The caller
    destroys the list. Read in one transaction, so later writes are free to
    change the table while the caller walks the list. */
static zlistx_t *
s_active_ids (self_t *self)
{
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false))
        return NULL;
    zlistx_t *ids = zlistx_new ();
    zlistx_set_destructor (ids, (czmq_destructor *) zstr_free);
    sb_txn_iter_t it;
    MDB_val k, v;
    sb_txn_iter_begin (&txn, &it, DBI_ACTIVE, "A", 1, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v))
        zlistx_add_end (ids, strndup (v.mv_data, v.mv_size));
    sb_txn_iter_end (&it);
    sb_txn_abort (&txn);
    return ids;
}

/*  Dispatches every queued run (the outbox is flushed first, so a run's
    prompt is on the tape before an executor reads it). */
static void
s_dispatch_queued (self_t *self)
{
    s_outbox_flush (self);
    zlistx_t *ids = s_active_ids (self);
    if (!ids)
        return;
    for (char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        run_t r;
        if (s_run_load (self, id, &r) == 0) {
            if (strcmp (r.status, "queued") == 0)
                s_dispatch (self, &r);
            s_run_free (&r);
        }
    }
    zlistx_destroy (&ids);
}

/* ------------------------------------------------------------------ */
/*  Requests */

static bool
s_remembered (self_t *self, const sb_msg_t *msg)
{
    const char *cmd = sb_get_str (msg->body, "command_id");
    if (!cmd)
        return false;
    sb_txn_t txn;
    sb_key_t k;
    sb_key_init (&k, 'C');
    sb_key_str (&k, cmd);
    bool found = false;
    if (sb_txn_begin (self->store, &txn, false) == 0) {
        MDB_val v;
        if (sb_key_valid (&k) && sb_txn_get (&txn, DBI_COMMANDS, k.buf, k.len, &v) == 0) {
            run_t r;
            if (s_run_load (self, (const char *) v.mv_data, &r) == 0) {
                found = true;
                sb_txn_abort (&txn);
                s_reply_run (self, msg, &r);
                s_run_free (&r);
                return true;
            }
        }
        sb_txn_abort (&txn);
    }
    return found;
}

static void
s_remember (self_t *self, const sb_msg_t *msg, const run_t *r)
{
    const char *cmd = sb_get_str (msg->body, "command_id");
    if (!cmd)
        return;
    sb_txn_t txn;
    sb_key_t k;
    sb_key_init (&k, 'C');
    sb_key_str (&k, cmd);
    if (sb_key_valid (&k) && sb_txn_begin (self->store, &txn, true) == 0) {
        sb_txn_put (&txn, DBI_COMMANDS, k.buf, k.len, r->run_id, strlen (r->run_id) + 1);
        sb_txn_commit (&txn);
    }
}

static int
s_active_run (self_t *self, const char *session_id, char *out)
{
    sb_txn_t txn;
    sb_key_t k;
    sb_key_init (&k, 'A');
    sb_key_str (&k, session_id);
    int rc = -1;
    if (sb_txn_begin (self->store, &txn, false) == 0) {
        MDB_val v;
        if (sb_txn_get (&txn, DBI_ACTIVE, k.buf, k.len, &v) == 0 && v.mv_size < 33) {
            memcpy (out, v.mv_data, v.mv_size);
            out [v.mv_size] = 0;
            rc = 0;
        }
        sb_txn_abort (&txn);
    }
    return rc;
}

static bool
s_policy_ok (const char *p)
{
    return !p || strcmp (p, "yolo") == 0 || strcmp (p, "auto") == 0 || strcmp (p, "interactive") == 0;
}

/*  Creates a queued run of `session_id` (shared by run.request and
    run.resume). Replies on success or error. */
static void
s_create (self_t *self, const sb_msg_t *msg, const char *session_id, const char *input,
          const char *resume_from, const sb_val_t *target, const sb_val_t *limits, const char *policy)
{
    if (!s_policy_ok (policy)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "approval_policy must be yolo, auto or interactive");
        return;
    }
    const char *executor = target ? sb_get_str (target, "executor") : "local";
    const char *pool = target ? sb_get_str (target, "pool") : NULL;
    if (strcmp (executor, "local") != 0 && strcmp (executor, "worker") != 0) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "target.executor must be local or worker, not '%s'", executor);
        return;
    }
    if (strcmp (executor, "worker") == 0 && (!pool || !*pool)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "target {executor: worker} needs a pool");
        return;
    }
    /* the session must exist and be open; its config gives the defaults */
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", session_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *sess = sb_bus_call (self->bus, "session.get", session_id, b, len, CALL_MS);
    sb_enc_destroy (&e);
    if (!sess) {
        sb_bus_error (self->bus, msg, SB_E_unavailable, "the session actor did not answer");
        return;
    }
    if (sb_msg_is_error (sess)) {
        sb_bus_error (self->bus, msg, sb_err_from_name (sb_msg_error_code (sess)), "%s", sb_msg_error_message (sess));
        sb_msg_destroy (&sess);
        return;
    }
    const sb_val_t *rec = sb_get_map (sess->body, "session");
    const char *status = sb_get_str (rec, "status");
    if (status && strcmp (status, "active") != 0) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "session %s is %s", session_id, status);
        sb_msg_destroy (&sess);
        return;
    }
    char active [33];
    if (s_active_run (self, session_id, active) == 0) {
        sb_bus_error (self->bus, msg, SB_E_conflict,
                      "session %s already has an active run %s; wait for it or cancel it "
                      "(one run at a time per session)", session_id, active);
        sb_msg_destroy (&sess);
        return;
    }
    run_t r;
    memset (&r, 0, sizeof r);
    sb_ulid_new (r.run_id);
    s_copy (r.session_id, sizeof r.session_id, session_id);
    s_copy (r.status, sizeof r.status, "queued");
    s_copy (r.executor, sizeof r.executor, executor);
    s_copy (r.pool, sizeof r.pool, pool);
    s_copy (r.resume_from, sizeof r.resume_from, resume_from);
    s_copy (r.approval_policy, sizeof r.approval_policy,
            policy ? policy : sb_get_str (rec, "approval_policy") ? sb_get_str (rec, "approval_policy") : "auto");
    r.input = input ? strdup (input) : NULL;
    r.max_steps = sb_get_uint (limits, "max_steps", sb_get_uint (rec, "max_steps", DEFAULT_MAX_STEPS));
    if (r.max_steps == 0)
        r.max_steps = DEFAULT_MAX_STEPS;
    r.timeout_s = sb_get_uint (limits, "timeout_s", DEFAULT_TIMEOUT_S);
    r.max_output_tokens = sb_get_uint (limits, "max_output_tokens", 0);
    r.created_at = sb_now_ms ();
    sb_msg_destroy (&sess);
    if (s_save (self, &r, true, true, input)) {
        sb_bus_error (self->bus, msg, SB_E_internal, "cannot store the run");
        s_run_free (&r);
        return;
    }
    s_remember (self, msg, &r);
    s_reply_run (self, msg, &r);
    s_dispatch (self, &r);
    s_run_free (&r);
}

static void
s_handle_request (self_t *self, sb_msg_t *msg)
{
    const char *sid = sb_get_str (msg->body, "session_id");
    if (!sid || !*sid) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "session_id is required");
        return;
    }
    if (s_remembered (self, msg))
        return;
    const char *input = sb_get_str (msg->body, "input");
    const char *resume = sb_get_str (msg->body, "resume_from");
    if ((!input || !*input) && !resume) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "input is required (the prompt text)");
        return;
    }
    s_create (self, msg, sid, input, resume, sb_get_map (msg->body, "target"),
              sb_get_map (msg->body, "limits"), sb_get_str (msg->body, "approval_policy"));
}

static void
s_handle_get (self_t *self, sb_msg_t *msg)
{
    run_t r;
    const char *id = sb_get_str (msg->body, "run_id");
    if (s_run_load (self, id, &r)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no run %s", id);
        return;
    }
    s_reply_run (self, msg, &r);
    s_run_free (&r);
}

static void
s_handle_list (self_t *self, sb_msg_t *msg)
{
    const char *sid = sb_get_str (msg->body, "session_id");
    const char *status = sb_get_str (msg->body, "status");
    const char *id_prefix = sb_get_str (msg->body, "id_prefix");
    if (id_prefix && !sb_ulid_prefix_valid (id_prefix)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "id_prefix must be the start of a run id");
        return;
    }
    uint64_t limit = sb_get_uint (msg->body, "limit", 100);
    if (limit == 0 || limit > 1000)
        limit = 1000;
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false)) {
        sb_bus_error (self->bus, msg, SB_E_internal, "store unavailable");
        return;
    }
    /* collect ids (oldest first), then emit newest first */
    zlistx_t *ids = zlistx_new ();
    zlistx_set_destructor (ids, (czmq_destructor *) zstr_free);
    sb_txn_iter_t it;
    MDB_val k, v;
    sb_key_t p;
    if (sid) {
        sb_key_init (&p, 'B');
        sb_key_str (&p, sid);
    }
    else
        sb_key_init (&p, 'R');
    /* the run id is the key's last field: an id prefix extends the key
       prefix, so only the matching range is read */
    size_t id_at = p.len;
    if (id_prefix)
        sb_key_bytes (&p, id_prefix, strlen (id_prefix));
    sb_txn_iter_begin (&txn, &it, sid ? DBI_BYSESSION : DBI_RUNS, p.buf, p.len, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v))
        if (k.mv_size > id_at + 1)
            zlistx_add_end (ids, strndup ((char *) k.mv_data + id_at, k.mv_size - id_at - 1));
    sb_txn_iter_end (&it);
    sb_txn_abort (&txn);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "runs");
    sb_enc_array_open (e);
    uint64_t n = 0;
    for (char *id = zlistx_last (ids); id && n < limit; id = zlistx_prev (ids)) {
        run_t r;
        if (s_run_load (self, id, &r) == 0) {
            if (!status || strcmp (status, r.status) == 0) {
                s_run_encode (&r, zhashx_lookup (self->leases, r.run_id), e);
                n++;
            }
            s_run_free (&r);
        }
    }
    sb_enc_array_close (e);
    sb_enc_map_close (e);
    zlistx_destroy (&ids);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

static void
s_push_cancel (self_t *self, const run_t *r)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    /* to the instance that owns the run, at once; its reply is not needed */
    sb_bus_send (self->bus, "exec.cancel", r->session_id, r->owner [0] ? r->owner : NULL, b, len,
                 sb_now_ms () + CALL_MS, NULL);
    sb_enc_destroy (&e);
}

static void
s_handle_cancel (self_t *self, sb_msg_t *msg)
{
    run_t r;
    const char *id = sb_get_str (msg->body, "run_id");
    if (s_run_load (self, id, &r)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no run %s", id);
        return;
    }
    if (sb_run_status_final (r.status)) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "run %s is already %s", id, r.status);
        s_run_free (&r);
        return;
    }
    if (strcmp (r.status, "queued") == 0) {
        s_set_status (&r, "cancelled", "cancelled before it started");
        s_save (self, &r, false, true, NULL);
    }
    else
    if (strcmp (r.status, "cancelling") != 0) {
        r.cancel_requested = true;
        s_set_status (&r, "cancelling", "cancel requested");
        s_save (self, &r, false, true, NULL);
        s_push_cancel (self, &r);
    }
    else
        s_push_cancel (self, &r);
    s_reply_run (self, msg, &r);
    s_run_free (&r);
}

static void
s_handle_resume (self_t *self, sb_msg_t *msg)
{
    run_t r;
    const char *id = sb_get_str (msg->body, "run_id");
    if (s_remembered (self, msg))
        return;
    if (s_run_load (self, id, &r)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no run %s", id);
        return;
    }
    if (!sb_run_status_final (r.status) || strcmp (r.status, "completed") == 0) {
        sb_bus_error (self->bus, msg, SB_E_conflict,
                      "run %s is %s; only failed, cancelled, interrupted or expired runs can be resumed",
                      id, r.status);
        s_run_free (&r);
        return;
    }
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "executor", r.executor [0] ? r.executor : "local");
    if (r.pool [0])
        sb_enc_kstr (e, "pool", r.pool);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_verr_t err;
    sb_doc_t *tdoc = sb_decode (b, len, NULL, 0, &err);
    s_create (self, msg, r.session_id, NULL, r.run_id, sb_doc_root (tdoc), NULL, r.approval_policy);
    sb_doc_destroy (&tdoc);
    sb_enc_destroy (&e);
    s_run_free (&r);
}

static int
s_check_fence (self_t *self, sb_msg_t *msg, run_t *r)
{
    const char *id = sb_get_str (msg->body, "run_id");
    if (s_run_load (self, id, r)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no run %s", id);
        return -1;
    }
    uint64_t fence = sb_get_uint (msg->body, "fence", 0);
    if (fence != r->fence) {
        sb_bus_error (self->bus, msg, SB_E_fenced, "run %s: fence %llu is stale (current %llu)", id,
                      (unsigned long long) fence, (unsigned long long) r->fence);
        s_run_free (r);
        return -1;
    }
    if (sb_run_status_final (r->status)) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "run %s is already %s", id, r->status);
        s_run_free (r);
        return -1;
    }
    return 0;
}

static void
s_handle_heartbeat (self_t *self, sb_msg_t *msg)
{
    run_t r;
    if (s_check_fence (self, msg, &r))
        return;
    lease_t *lease = zhashx_lookup (self->leases, r.run_id);
    if (!lease) {
        lease = calloc (1, sizeof *lease);
        if (lease)
            zhashx_update (self->leases, r.run_id, lease);
    }
    if (lease) {
        lease->expires = sb_mono_ms () + LEASE_MS;
        s_copy (lease->phase, sizeof lease->phase, sb_get_str (msg->body, "phase"));
        lease->steps = sb_get_uint (msg->body, "steps", lease->steps);
        lease->input_tokens = sb_get_uint (msg->body, "input_tokens", lease->input_tokens);
        lease->output_tokens = sb_get_uint (msg->body, "output_tokens", lease->output_tokens);
    }
    if (strcmp (r.status, "claimed") == 0) {
        s_set_status (&r, "running", NULL);
        s_save (self, &r, false, true, NULL);
    }
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kbool (e, "cancel_requested", r.cancel_requested);
    sb_enc_kuint (e, "lease_ms", LEASE_MS);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
    s_run_free (&r);
}

static void
s_handle_finish (self_t *self, sb_msg_t *msg)
{
    run_t r;
    if (s_check_fence (self, msg, &r))
        return;
    const char *status = sb_get_str (msg->body, "status");
    if (strcmp (status, "completed") != 0 && strcmp (status, "failed") != 0 && strcmp (status, "cancelled") != 0) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "status must be completed, failed or cancelled");
        s_run_free (&r);
        return;
    }
    s_set_status (&r, status, sb_get_str (msg->body, "reason"));
    r.steps = sb_get_uint (msg->body, "steps", r.steps);
    const sb_val_t *u = sb_get_map (msg->body, "usage");
    r.input_tokens = sb_get_uint (u, "input_tokens", r.input_tokens);
    r.output_tokens = sb_get_uint (u, "output_tokens", r.output_tokens);
    r.phase [0] = 0;
    zhashx_delete (self->leases, r.run_id);
    s_save (self, &r, false, true, NULL);
    s_reply_run (self, msg, &r);
    s_run_free (&r);
}

static void
s_handle_bus (self_t *self)
{
    sb_msg_t *msg;
    while ((msg = sb_bus_recv (self->bus, 0))) {
        if (msg->route) {
            const char *t = msg->h.type;
            if (strcmp (t, "run.request") == 0) s_handle_request (self, msg);
            else if (strcmp (t, "run.get") == 0) s_handle_get (self, msg);
            else if (strcmp (t, "run.list") == 0) s_handle_list (self, msg);
            else if (strcmp (t, "run.cancel") == 0) s_handle_cancel (self, msg);
            else if (strcmp (t, "run.resume") == 0) s_handle_resume (self, msg);
            else if (strcmp (t, "run.heartbeat") == 0) s_handle_heartbeat (self, msg);
            else if (strcmp (t, "run.finish") == 0) s_handle_finish (self, msg);
            else sb_bus_error (self->bus, msg, SB_E_unknown_type, "run does not serve %s", t);
        }
        /* replies to pushes (exec.cancel) need no action */
        sb_msg_destroy (&msg);
    }
}

/* ------------------------------------------------------------------ */
/*  Leases and recovery */

static void
s_expire_leases (self_t *self)
{
    int64_t now = sb_mono_ms ();
    zlistx_t *keys = zhashx_keys (self->leases);
    for (const char *id = zlistx_first (keys); id; id = zlistx_next (keys)) {
        lease_t *lease = zhashx_lookup (self->leases, id);
        if (!lease || lease->expires > now)
            continue;
        run_t r;
        if (s_run_load (self, id, &r) == 0) {
            if (!sb_run_status_final (r.status)) {
                /* fence first: once the session knows the new fence, the
                   lapsed executor can no longer write */
                if (s_save_new_fence (self, &r) == 0 && s_fence_session (self, &r) == 0) {
                    s_set_status (&r, "expired", "lease lapsed: the executor stopped heartbeating");
                    s_save (self, &r, false, true, NULL);
                    zhashx_delete (self->leases, id);
                }
            }
            else
                zhashx_delete (self->leases, id);
            s_run_free (&r);
        }
        else
            zhashx_delete (self->leases, id);
    }
    zlistx_destroy (&keys);
}

/*  Every run that was claimed or running when the server stopped is
    stale: no executor of this process survived. It becomes interrupted;
    nothing it was doing is re-run, and run.resume continues it from the
    tape. A run that was cancelling is cancelled. Queued runs stay queued
    and are dispatched. */
static void
s_recover (self_t *self)
{
    s_outbox_flush (self);
    zlistx_t *ids = s_active_ids (self);
    if (!ids)
        return;
    int n = 0;
    for (char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        run_t r;
        if (s_run_load (self, id, &r))
            continue;
        if (strcmp (r.status, "queued") != 0 && !sb_run_status_final (r.status)) {
            if (s_save_new_fence (self, &r) == 0)
                s_fence_session (self, &r);
            if (strcmp (r.status, "cancelling") == 0)
                s_set_status (&r, "cancelled", "server_restart");
            else
                s_set_status (&r, "interrupted", "server_restart");
            r.phase [0] = 0;
            s_save (self, &r, false, true, NULL);
            n++;
        }
        s_run_free (&r);
    }
    zlistx_destroy (&ids);
    if (n)
        sb_info (ACTOR, "recovery interrupted=%d", n);
}

/* ------------------------------------------------------------------ */

static void
s_self_destroy (self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    zhashx_destroy (&self->leases);
    sb_bus_destroy (&self->bus);
    sb_store_destroy (&self->store);
    sb_enc_destroy (&self->enc);
    free (self);
    *self_p = NULL;
}

static void
s_free_lease (void **item)
{
    free (*item);
    *item = NULL;
}

static self_t *
s_self_new (zsock_t *pipe, const sb_actor_args_t *args)
{
    self_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "run");
    char dir [4200], err [512];
    snprintf (dir, sizeof dir, "%s/run", args->data_dir ? args->data_dir : ".");
    self->store = sb_store_open (dir, s_dbis, 1, 0, err, sizeof err);
    if (!self->store) {
        sb_error (ACTOR, "cannot open the run store: %s", err);
        s_self_destroy (&self);
        return NULL;
    }
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    self->leases = zhashx_new ();
    if (!self->bus || !self->enc || !self->leases) {
        s_self_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->leases, s_free_lease);
    /* the outbox numbering continues after the last entry */
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) == 0) {
        MDB_val k, v;
        if (sb_txn_last (&txn, DBI_OUTBOX, "O", 1, &k, &v) == 0 && k.mv_size == 9)
            self->outbox_next = sb_key_read_u64 (&k, 1) + 1;
        sb_txn_abort (&txn);
    }
    if (!self->outbox_next)
        self->outbox_next = 1;
    return self;
}

void
sb_run_actor (zsock_t *pipe, void *args)
{
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    sb_verr_t err;
    if (sb_bus_register (self->bus, "run", self->instance, NULL, 0, 5000, &err)) {
        sb_error (ACTOR, "cannot register: %s", err.message);
        s_self_destroy (&self);
        sb_actor_signal (pipe, 1);
        return;
    }
    /* recovery before the server opens to clients (docs/architecture.md) */
    s_recover (self);
    sb_actor_signal (pipe, 0);
    self->next_tick = sb_mono_ms () + 1000;
    while (!self->terminated) {
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
        };
        int64_t wait = sb_bus_tick (self->bus);
        int64_t tick = self->next_tick - sb_mono_ms ();
        if (tick < wait)
            wait = tick;
        if (sb_bus_has_queued (self->bus) || wait < 0)
            wait = 0;
        if (zmq_poll (items, 2, (long) wait) < 0 && errno != EINTR)
            break;
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        s_handle_bus (self);
        if (sb_mono_ms () >= self->next_tick) {
            s_expire_leases (self);
            s_dispatch_queued (self);
            self->next_tick = sb_mono_ms () + 1000;
        }
    }
    s_self_destroy (&self);
}

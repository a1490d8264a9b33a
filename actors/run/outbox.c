/*  actors/run/outbox.c — writes: each change with its outbox entry; the
    outbox flush; the session's fence.

    Every status change is committed here first and reaches the session
    tape through an outbox: the change and its pending `run.status` append
    are written in one batch (one transaction, actors/run/commit.c), only
    committed entries are sent, and the append carries a command_id
    stored with it, so a crash between the commit and the append neither
    loses nor doubles an entry: the outbox is replayed at startup and the
    session actor drops the duplicate. The delivery's book is the
    store's outbox (store/outbox.h). */
#include "common/digest.h"
#include "actors/run/run_impl.h"

#include <errno.h>

/*  The command_id of an outbox entry: "run:<run_id>:" and 128 random
    bits, drawn when the entry is written and stored in it. Anyone who can
    reach the bus may append to a session, and the session actor answers
    the second append under a command_id with the first one's reply. An
    id others can predict (it used to be the run id, the status and the
    fence) lets a client append first under it: the run's real status is
    then taken for a duplicate and never written, and the session's
    turn_status never settles. An id nobody can guess cannot be taken
    first, whatever a client puts in its header (the broker does not stamp
    `from`, so no "internal only" namespace could be enforced on it); a
    resend after a crash sends the stored entry, id and all, and is still
    recognised. A run id is a ULID, so the id is 4 + 26 + 1 + 32 = 63
    bytes, within the schema's 64. (docs/sessions.md, "Idempotency") */
static void
s_outbox_command_id (const run_t *r, char *out, size_t n)
{
    char hex [SB_NONCE_HEX + 1];
    sb_nonce_hex (hex);
    snprintf (out, n, "run:%s:%s", r->run_id, hex);
}

typedef struct {
    self_t *self;
    run_t *run;
    bool is_new;
    const char *prompt;         /* also append a `prompt` entry first */
    const sb_val_t *images;     /* with these images (run.request's, checked by the session service) */
    bool status_changed;
    bool new_fence;             /* give the run the session's next fence */
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
    sb_enc_kstr (e, "status", sb_run_status_name (r->status));
    if (r->reason [0])
        sb_enc_kstr (e, "reason", r->reason);
    /* the run's own account, once it is final: what a transcript shows
       (the tape's usage entries miss a call the provider refused) */
    if (sb_run_status_is_final (r->status) && r->steps)
        sb_enc_kuint (e, "steps", r->steps);
    if (sb_run_status_is_final (r->status) && r->tokens_known) {
        sb_enc_kuint (e, "input_tokens", r->input_tokens);
        sb_enc_kuint (e, "output_tokens", r->output_tokens);
    }
    sb_enc_map_close (e);
    sb_enc_map_close (e);
}

/*  Writes the change into the open batch (actors/run/commit.c): durable
    with the batch, and seen by the actor's reads at once. */
static int
s_write (write_ctx_t *w)
{
    self_t *self = w->self;
    run_t *r = w->run;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return -ENOMEM;
    sb_key_t k;
    int rc = 0;
    /* every row below is the session's: fenced by its shard's lease */
    self->kv_shards = sb_cluster_shard_bit (r->session_id);
    if (w->new_fence) {
        /* fences are per session, monotonic, and persisted with the run
           that holds them (re-read on a re-run, so a grow cannot skip one) */
        sb_key_init (&k, 'F');
        sb_key_str (&k, r->session_id);
        uint8_t *fv;
        size_t flen;
        uint64_t fence = 0;
        if (sb_run_kv_get (self, DBI_FENCES, k.buf, k.len, &fv, &flen) == 0) {
            sb_datum_t mv = { flen, fv };
            if (flen == 8)
                fence = sb_key_read_u64 (&mv, 0);
            free (fv);
        }
        fence++;
        uint8_t be [8];
        for (int i = 0; i < 8; i++)
            be [i] = (uint8_t) (fence >> (56 - 8 * i));
        rc = sb_run_kv_put (self, DBI_FENCES, k.buf, k.len, be, 8);
        r->fence = fence;
    }
    sb_run_record_encode (r, NULL, e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_key_init (&k, 'R');
    sb_key_str (&k, r->run_id);
    if (!rc)
        rc = sb_run_kv_put (self, DBI_RUNS, k.buf, k.len, data, len);
    if (w->is_new && !rc) {
        sb_key_init (&k, 'B');
        sb_key_str (&k, r->session_id);
        sb_key_str (&k, r->run_id);
        rc = sb_run_kv_put (self, DBI_BYSESSION, k.buf, k.len, "", 0);
    }
    sb_key_init (&k, 'A');
    sb_key_str (&k, r->session_id);
    if (rc)
        ;
    else
    if (sb_run_status_is_final (r->status)) {
        char cur [33];
        if (sb_run_active_run (self, r->session_id, cur) == 0 && strcmp (cur, r->run_id) == 0)
            rc = sb_run_kv_del (self, DBI_ACTIVE, k.buf, k.len, true);
    }
    else
        rc = sb_run_kv_put (self, DBI_ACTIVE, k.buf, k.len, r->run_id, strlen (r->run_id));
    if (w->status_changed && !rc) {
        /* the outbox entry: appended to the tape once its batch is durable */
        w->outbox_n = self->outbox_next;
        char cmd [96];
        s_outbox_command_id (r, cmd, sizeof cmd);
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
            if (w->images && w->images->len) {
                sb_enc_key (e, "images");
                sb_enc_val (e, w->images);
            }
            sb_enc_map_close (e);
            sb_enc_map_close (e);
        }
        s_enc_status_entry (e, r);
        sb_enc_array_close (e);
        sb_enc_map_close (e);
        data = sb_enc_data (e, &len);
        sb_outbox_key (&k, w->outbox_n);
        rc = sb_run_kv_put (self, DBI_OUTBOX, k.buf, k.len, data, len);
        if (!rc)
            self->open_outbox_max = w->outbox_n;
    }
    self->kv_shards = 0;
    sb_enc_destroy (&e);
    return rc;
}

/*  The outbox sends up to OUTBOX_INFLIGHT_MAX appends at once, at most
    one per session: each session's entries still land in the order they
    were committed, and the sessions of 200 starting runs do not wait for
    each other's appends one by one. The book of what is in flight and
    what landed is the store's outbox (store/outbox.h). */
#define OUTBOX_INFLIGHT_MAX 32

int
sb_run_outbox_open (self_t *self)
{
    self->outbox = sb_outbox_new (self->store, DBI_OUTBOX, OUTBOX_INFLIGHT_MAX, false);
    if (!self->outbox)
        return -1;
    sb_outbox_durable (self->outbox, self->outbox_next - 1);
    return 0;
}

void
sb_run_outbox_close (self_t *self)
{
    sb_outbox_destroy (&self->outbox);
}

/*  Deals with the answer to outbox entry n; true when the entry is done
    with (landed, or refused for good: retrying cannot help), and then
    deleted. */
static bool
s_outbox_answered (self_t *self, uint64_t n, const sb_msg_t *reply)
{
    sb_err_t code = reply && sb_msg_is_error (reply) ? sb_err_from_name (sb_msg_error_code (reply)) : SB_OK;
    /* no reply: the session actor is busy or away; retry on the next tick */
    sb_outbox_fate_t fate = sb_outbox_answered (self->outbox, n, reply != NULL, code);
    if (reply && sb_msg_is_error (reply))
        sb_warn (ACTOR, "tape append from the outbox failed code=%s message=\"%s\"%s",
                 sb_msg_error_code (reply), sb_msg_error_message (reply),
                 fate != SB_OUTBOX_RETRY ? " (dropped)" : "");
    if (fate == SB_OUTBOX_RETRY)
        return false;
    /* the delete rides with a later batch: a replay after a crash is
       recognised by the entry's command_id */
    sb_key_t k;
    sb_outbox_key (&k, n);
    sb_run_kv_del (self, DBI_OUTBOX, k.buf, k.len, false);
    return true;
}

static void
s_outbox_reply (self_t *self, call_t *call, const sb_msg_t *reply)
{
    if (s_outbox_answered (self, call->n, reply)) {
        sb_run_outbox_flush (self);
        sb_run_held_flush (self);
        sb_run_jobs_advance (self);
    }
}

/*  Sends the pending appends that may go (sb_outbox_take: committed ones
    only, so an entry of a batch still pending is not sent before it is on
    disk); each append is idempotent by its command_id, so a resend after
    a crash or a lost reply cannot double an entry, and one at a time per
    session keeps each session's entries in the order they were
    committed. */
void
sb_run_outbox_flush (self_t *self)
{
    if (self->recovering || !self->outbox)
        return;
    sb_outbox_entry_t out [OUTBOX_INFLIGHT_MAX];
    size_t n = sb_outbox_take (self->outbox, out, OUTBOX_INFLIGHT_MAX);
    for (size_t i = 0; i < n; i++) {
        sb_enc_t *e = sb_enc_new ();
        if (e) {
            sb_enc_raw (e, out [i].body, out [i].len);
            /* the entry is committed: nothing to wait for */
            self->call_now = true;
            sb_run_call (self, "session.append", NULL, NULL, e, s_outbox_reply, NULL, out [i].n, NULL, NULL);
            self->call_now = false;
            sb_enc_destroy (&e);
        }
        else
            s_outbox_answered (self, out [i].n, NULL);
        free (out [i].body);
    }
}

void
sb_run_outbox_drain (self_t *self)
{
    while (true) {
        sb_outbox_entry_t one;
        if (sb_outbox_take (self->outbox, &one, 1) == 0)
            return;
        sb_msg_t *reply = sb_bus_call (self->bus, "session.append", NULL, one.body, one.len, CALL_MS);
        free (one.body);
        bool done = s_outbox_answered (self, one.n, reply);
        sb_msg_destroy (&reply);
        if (!done)
            return;
    }
}

/*  Another node's entries: when a node dies, what its outbox had not
    delivered ('o' ITS_ID n) is the new owner's to send, for the
    sessions of the shards it took. Each body carries the command_id
    stored with it, so an entry that also reaches the tape from its own
    node (it comes back under its id, or it is alive and lost the shard
    while its append was in flight) lands once. */
#define FOREIGN_MAX 256         /* entries read per walk; the rest wait for the next */

typedef struct {
    uint8_t *key, *body;
    size_t klen, len;
} foreign_t;

typedef struct {
    uint64_t shards;
    foreign_t e [FOREIGN_MAX];
    size_t n;
    bool more;
} foreign_walk_t;

static void
s_foreign_add (const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    foreign_walk_t *f = arg;
    /* one larger than a bus frame could never be sent: it stays */
    if (!sb_outbox_foreign (key, klen) || (int64_t) vlen > sb_bus_max_frame ())
        return;
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (val, vlen, NULL, 0, &err);
    const char *sid = doc ? sb_get_str (sb_doc_root (doc), "session_id") : NULL;
    bool ours = sid && (sb_cluster_shard_bit (sid) & f->shards);
    sb_doc_destroy (&doc);
    if (!ours)
        return;
    if (f->n == FOREIGN_MAX) {
        f->more = true;
        return;
    }
    foreign_t *e = &f->e [f->n];
    e->key = malloc (klen);
    e->body = malloc (vlen ? vlen : 1);
    if (!e->key || !e->body) {
        free (e->key);
        free (e->body);
        f->more = true;
        return;
    }
    memcpy (e->key, key, klen);
    memcpy (e->body, val, vlen);
    e->klen = klen;
    e->len = vlen;
    f->n++;
}

/*  Sends, in their order, the entries other nodes left for the sessions
    of `shards`, and deletes each one that is done with; waits for each
    answer (CALL_MS), as the startup's drain does. True when none is
    left; false when one must be tried again (no answer, or a refusal a
    retry may change), and the walk stopped there. */
bool
sb_run_outbox_foreign (self_t *self, uint64_t shards)
{
    foreign_walk_t *f = calloc (1, sizeof *f);
    if (!f)
        return false;
    f->shards = shards;
    bool all = true;
    uint64_t before = self->foreign_sent;
    while (all) {
        f->n = 0;
        f->more = false;
        if (sb_run_kv_scan (self, DBI_OUTBOX, "o", 1, s_foreign_add, f)) {
            all = false;
            break;
        }
        size_t i = 0;
        for (; i < f->n && all; i++) {
            sb_msg_t *reply = sb_bus_call (self->bus, "session.append", NULL, f->e [i].body, f->e [i].len, CALL_MS);
            sb_err_t code = reply && sb_msg_is_error (reply) ? sb_err_from_name (sb_msg_error_code (reply)) : SB_OK;
            if (reply && sb_outbox_final (code, false)) {
                if (code != SB_OK)
                    sb_warn (ACTOR, "another node's outbox entry refused code=%s message=\"%s\" (dropped)",
                             sb_msg_error_code (reply), sb_msg_error_message (reply));
                sb_run_kv_del (self, DBI_OUTBOX, f->e [i].key, f->e [i].klen, false);
                self->foreign_sent++;
            }
            else
                all = false;
            sb_msg_destroy (&reply);
        }
        for (size_t j = 0; j < f->n; j++) {
            free (f->e [j].key);
            free (f->e [j].body);
        }
        if (!f->more)
            break;
    }
    free (f);
    if (self->foreign_sent > before || !all)
        sb_info (ACTOR, "other nodes' outbox entries sent=%llu%s", (unsigned long long) (self->foreign_sent - before),
                 all ? "" : " (some wait for the next try)");
    return all;
}

/*  Persists a run change (and its tape entry when the status changed),
    then flushes the outbox. Returns 0 or a store error. */
static int
s_save_with (self_t *self, run_t *r, bool is_new, bool status_changed, const char *prompt, const sb_val_t *images,
             bool new_fence)
{
    r->updated_at = sb_now_ms ();
    write_ctx_t w = { .self = self, .run = r, .is_new = is_new, .status_changed = status_changed,
                      .prompt = prompt, .images = images, .new_fence = new_fence };
    int rc = s_write (&w);
    if (rc) {
        sb_error (ACTOR, "cannot save run %s: %s", r->run_id, sb_store_strerror (rc));
        return rc;
    }
    if (status_changed) {
        self->outbox_next = w.outbox_n + 1;
        sb_info (ACTOR, "run status run=%s session=%s status=%s%s%s", r->run_id, r->session_id,
                 sb_run_status_name (r->status),
                 r->reason [0] ? " reason=" : "", r->reason);
        sb_run_outbox_flush (self);
    }
    return 0;
}

int
sb_run_save (self_t *self, run_t *r, bool is_new, bool status_changed, const char *prompt)
{
    return s_save_with (self, r, is_new, status_changed, prompt, NULL, false);
}

/*  A new run with its prompt entry, which references the prompt's images
    (docs/images.md). */
int
sb_run_save_prompt (self_t *self, run_t *r, const char *prompt, const sb_val_t *images)
{
    return s_save_with (self, r, true, true, prompt, images, false);
}

/*  Gives the run its session's next fence, persisted with it. */
int
sb_run_save_new_fence (self_t *self, run_t *r)
{
    return s_save_with (self, r, false, false, NULL, NULL, true);
}

sb_err_t
sb_run_set_status (run_t *r, sb_run_status_t status, const char *reason)
{
    if (!sb_run_transition_ok (r->status, status)) {
        sb_warn (ACTOR, "refused transition run=%s from=%s to=%s", r->run_id,
                 sb_run_status_name (r->status), sb_run_status_name (status));
        return SB_E_conflict;
    }
    r->status = status;
    s_copy (r->reason, sizeof r->reason, reason);
    if (sb_run_status_is_final (status))
        r->ended_at = sb_now_ms ();
    return SB_OK;
}

/*  Tells the session actor the session's new fence and waits for it:
    from then on, appends with an older fence are refused. */
int
sb_run_fence_session (self_t *self, run_t *r)
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

int
sb_run_fence_session_async (self_t *self, const run_t *r, call_fn *fn)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return -1;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", r->session_id);
    sb_enc_kuint (e, "fence", r->fence);
    sb_enc_map_close (e);
    int rc = sb_run_call (self, "session.fence", r->session_id, NULL, e, fn, r->run_id, r->fence, NULL, NULL);
    sb_enc_destroy (&e);
    return rc;
}

/*  actors/run/calls.c — the run actor's requests in flight, and the jobs
    of the runs they belong to.

    The run actor serves claims and heartbeats from every executor and
    worker, so it must never sit in a blocking call: while it waited on
    session.get or exec.start (up to 5 s each), every heartbeat waited
    too, and leases lapsed under load. Each request it sends is a row of
    self->calls keyed by the request's id; the reply (its corr) finds the
    row and runs the continuation. A row that gets no reply within CALL_MS
    (the broker forgets requests past their deadline without answering)
    is continued with NULL, which every continuation treats as "no answer"
    and leaves for the tick to retry. (docs/workers.md) */
#include "actors/run/run_impl.h"

static void
s_call_free (void **item)
{
    call_t *c = *item;
    if (c) {
        if (c->arg_free)
            c->arg_free (c->arg);
        free (c);
        *item = NULL;
    }
}

/*  The table has no destructor: a row leaves it before its continuation
    runs, and the continuation may add rows. */
zhashx_t *
sb_run_calls_new (void)
{
    return zhashx_new ();
}

void
sb_run_calls_destroy (zhashx_t **table_p)
{
    if (!*table_p)
        return;
    for (call_t *c = zhashx_first (*table_p); c; c = zhashx_next (*table_p))
        s_call_free ((void **) &c);
    zhashx_destroy (table_p);
}

int
sb_run_call (self_t *self, const char *type, const char *key, const char *to, sb_enc_t *e,
             call_fn *fn, const char *run_id, uint64_t n, void *arg, void (*arg_free) (void *))
{
    call_t *c = calloc (1, sizeof *c);
    if (!c) {
        if (arg_free)
            arg_free (arg);
        call_t tmp = { .fn = fn, .n = n };
        s_copy (tmp.run_id, sizeof tmp.run_id, run_id);
        fn (self, &tmp, NULL);
        return -1;
    }
    c->fn = fn;
    c->n = n;
    c->arg = arg;
    c->arg_free = arg_free;
    s_copy (c->run_id, sizeof c->run_id, run_id);
    c->expires = sb_mono_ms () + CALL_MS;
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    /* nothing the actor sends may depend on a write that is not durable
       yet: it goes once the batch is (actors/run/commit.c) */
    if (sb_run_call_defer (self, type, key, to, b, len, c))
        return 0;
    char id [SB_ULID_LEN + 1];
    if (sb_bus_send (self->bus, type, key, to, b, len, sb_now_ms () + CALL_MS, id) != 0) {
        c->fn (self, c, NULL);
        s_call_free ((void **) &c);
        return -1;
    }
    zhashx_insert (self->calls, id, c);
    return 0;
}

bool
sb_run_call_reply (self_t *self, const sb_msg_t *reply)
{
    call_t *c = zhashx_lookup (self->calls, reply->h.corr);
    if (!c)
        return false;
    /* out of the table before it runs: the continuation may send more */
    zhashx_delete (self->calls, reply->h.corr);
    c->fn (self, c, reply);
    s_call_free ((void **) &c);
    return true;
}

void
sb_run_calls_expire (self_t *self)
{
    if (!zhashx_size (self->calls))
        return;
    int64_t now = sb_mono_ms ();
    zlistx_t *keys = zhashx_keys (self->calls);
    for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
        call_t *c = zhashx_lookup (self->calls, k);
        if (c && c->expires < now) {
            zhashx_delete (self->calls, k);
            c->fn (self, c, NULL);
            s_call_free ((void **) &c);
        }
    }
    zlistx_destroy (&keys);
}

job_t *
sb_run_job (self_t *self, const char *run_id)
{
    return zhashx_lookup (self->jobs, run_id);
}

void
sb_run_job_set (self_t *self, const char *run_id, job_stage_t stage, uint64_t barrier)
{
    job_t *j = zhashx_lookup (self->jobs, run_id);
    if (!j) {
        j = calloc (1, sizeof *j);
        if (!j)
            return;
        zhashx_insert (self->jobs, run_id, j);
    }
    j->stage = stage;
    j->barrier = barrier;
}

/*  A job that ends with a claim still attached did not grant it: the
    worker hears {} and claims again. */
void
sb_run_job_end (self_t *self, const char *run_id)
{
    job_t *j = zhashx_lookup (self->jobs, run_id);
    if (j && j->claim)
        sb_run_claim_drop (self, &j->claim);
    zhashx_delete (self->jobs, run_id);
}

sb_msg_t *
sb_run_msg_keep (sb_msg_t *msg)
{
    sb_msg_t *kept = malloc (sizeof *kept);
    if (!kept)
        return NULL;
    *kept = *msg;
    msg->doc = NULL;
    msg->body = NULL;
    msg->route = NULL;
    msg->route_len = 0;
    return kept;
}

/* ------------------------------------------------------------------ */
/*  Replies held until the tape has what they announce

    A reply that follows a status change is sent once the outbox has
    landed every entry written before it: an executor answered on its
    first heartbeat writes turn.begin only after `claimed` and `running`
    are on the tape, and a client answered on run.request finds the prompt
    there. A reply held longer than CALL_MS (the session actor is away) is
    sent anyway: the outbox still lands the entries later. Never before
    the writes it announces are durable (actors/run/commit.c). */

typedef struct {
    sb_msg_t *msg;
    sb_bus_t *bus;
    uint8_t *body;
    size_t len;
    uint64_t barrier;
    uint64_t batch;             /* the writes it announces are durable with this batch */
    int64_t expires;
} held_t;

static void
s_held_free (held_t **h_p)
{
    held_t *h = *h_p;
    if (h) {
        sb_msg_destroy (&h->msg);
        free (h->body);
        free (h);
        *h_p = NULL;
    }
}

void
sb_run_reply_landed (self_t *self, sb_bus_t *bus, sb_msg_t *msg, const uint8_t *body, size_t len)
{
    uint64_t barrier = self->outbox_next - 1;
    if ((sb_outbox_acked (self->outbox) >= barrier && sb_run_commit_durable (self)) || self->recovering) {
        sb_bus_reply (bus, msg, body, len);
        return;
    }
    held_t *h = calloc (1, sizeof *h);
    if (!h || !(h->body = malloc (len ? len : 1)) || !(h->msg = sb_run_msg_keep (msg))) {
        if (h)
            free (h->body);
        free (h);
        sb_bus_reply (bus, msg, body, len);
        return;
    }
    memcpy (h->body, body, len);
    h->len = len;
    h->bus = bus;
    h->barrier = barrier;
    h->batch = self->kv_need;
    h->expires = sb_mono_ms () + CALL_MS;
    zlistx_add_end (self->held, h);
}

void
sb_run_held_flush (self_t *self)
{
    int64_t now = sb_mono_ms ();
    held_t *h = zlistx_first (self->held);
    while (h) {
        /* never before its writes are durable, even when held long */
        if (h->batch <= self->batch_durable && (h->barrier <= sb_outbox_acked (self->outbox) || h->expires < now)) {
            zlistx_detach (self->held, zlistx_cursor (self->held));
            sb_bus_reply (h->bus, h->msg, h->body, h->len);
            s_held_free (&h);
            h = zlistx_first (self->held);
        }
        else
            h = zlistx_next (self->held);
    }
}

void
sb_run_held_destroy (self_t *self)
{
    if (!self->held)
        return;
    held_t *h;
    while ((h = zlistx_detach (self->held, NULL)))
        s_held_free (&h);
    zlistx_destroy (&self->held);
}

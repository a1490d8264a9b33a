/*  actors/interact/outbox.c — the tape announcements.

    Every change of an interaction is committed with its announcement (the
    session.append body of approval.requested or approval.resolved) in one
    transaction (record.c); this file sends those bodies to the session
    actor, oldest first, one at a time, and deletes each once the session
    actor has answered it for good. A crash between the commit and the
    append loses nothing: the outbox is sent again after the restart, and
    each body carries the command_id it was stored with, so the session
    actor answers a resend with the first reply instead of appending twice.

    The loop never waits for the session actor: the append is a request in
    flight, remembered by its id, and its reply (or its absence past
    IA_OUTBOX_TIMEOUT_MS) moves the outbox on. One at a time keeps the
    order: approval.requested is on the tape before its approval.resolved. */
#include "actors/interact/interact_impl.h"

uint64_t
sb_ia_outbox_last (self_t *self)
{
    uint64_t last = 0;
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) == 0) {
        sb_datum_t k;
        if (sb_txn_last (&txn, DBI_OUTBOX, "O", 1, &k, NULL) == 0 && k.size == 9)
            last = sb_key_read_u64 (&k, 1);
        sb_txn_abort (&txn);
    }
    return last;
}

/*  Reads the oldest entry: its number and a copy of its body (the caller
    frees it). NULL when the outbox is empty. */
static uint8_t *
s_oldest (self_t *self, uint64_t *n, size_t *len)
{
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0)
        return NULL;
    uint8_t *copy = NULL;
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_txn_iter_begin (&txn, &it, DBI_OUTBOX, "O", 1, NULL, 0);
    if (sb_txn_iter_next (&it, &k, &v) && k.size == 9) {
        *n = sb_key_read_u64 (&k, 1);
        copy = malloc (v.size ? v.size : 1);
        if (copy) {
            memcpy (copy, v.data, v.size);
            *len = v.size;
        }
    }
    sb_txn_iter_end (&it);
    sb_txn_abort (&txn);
    return copy;
}

static void
s_delete (self_t *self, uint64_t n)
{
    sb_key_t k;
    sb_key_init (&k, 'O');
    sb_key_u64 (&k, n);
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, true) == 0) {
        sb_txn_del (&txn, DBI_OUTBOX, k.buf, k.len);
        if (sb_txn_commit (&txn) != 0)
            sb_warn (ACTOR, "cannot delete outbox entry %llu (it will be sent again)", (unsigned long long) n);
    }
}

void
sb_ia_outbox_pump (self_t *self)
{
    int64_t now = sb_mono_ms ();
    if (self->outbox_corr [0]) {
        if (now - self->outbox_sent < IA_OUTBOX_TIMEOUT_MS)
            return;
        /* no answer: send the same entry again, under the same command_id */
        sb_warn (ACTOR, "tape append got no answer in %d ms; sending it again entry=%llu",
                 IA_OUTBOX_TIMEOUT_MS, (unsigned long long) self->outbox_n);
        self->outbox_corr [0] = 0;
    }
    if (self->outbox_idle || now < self->outbox_wait_until)
        return;
    self->outbox_wait_until = 0;
    uint64_t n = 0;
    size_t len = 0;
    uint8_t *body = s_oldest (self, &n, &len);
    if (!body) {
        self->outbox_idle = true;
        return;
    }
    /* the session is the request's shard key (docs/architecture.md) */
    char key [40] = "";
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (body, len, NULL, 16u << 20, &err);
    const char *sid = sb_get_str (sb_doc_root (doc), "session_id");
    snprintf (key, sizeof key, "%s", sid ? sid : "");
    sb_doc_destroy (&doc);
    char id [33];
    if (sb_bus_send (self->bus, "session.append", key [0] ? key : NULL, NULL, body, len, 0, id) == 0) {
        s_copy (self->outbox_corr, sizeof self->outbox_corr, id);
        self->outbox_n = n;
        self->outbox_sent = now;
    }
    else
        self->outbox_wait_until = now + IA_OUTBOX_RETRY_MS;
    free (body);
}

bool
sb_ia_outbox_reply (self_t *self, const sb_msg_t *reply)
{
    if (!self->outbox_corr [0] || strcmp (reply->h.corr, self->outbox_corr) != 0)
        return false;
    self->outbox_corr [0] = 0;
    /* a refusal that a retry cannot change is final: the entry goes (and
       the log says so); anything else is sent again a little later */
    sb_err_t code = sb_msg_is_error (reply) ? sb_err_from_name (sb_msg_error_code (reply)) : SB_OK;
    bool done = code == SB_OK || code == SB_E_not_found || code == SB_E_invalid || code == SB_E_conflict
             || code == SB_E_too_large || code == SB_E_fenced;
    if (code != SB_OK)
        sb_warn (ACTOR, "tape append from the outbox failed entry=%llu code=%s message=\"%s\"%s",
                 (unsigned long long) self->outbox_n, sb_msg_error_code (reply),
                 sb_msg_error_message (reply), done ? " (dropped)" : " (will retry)");
    if (done) {
        self->outbox_backoff = 0;
        s_delete (self, self->outbox_n);
        if (code == SB_OK)
            self->appended++;
        sb_ia_outbox_pump (self);
    }
    else {
        /* the session actor is away or busy: back off, up to a few
           seconds, so that a long absence costs a log line now and then */
        self->outbox_backoff = self->outbox_backoff ? self->outbox_backoff * 2 : IA_OUTBOX_RETRY_MS;
        if (self->outbox_backoff > IA_OUTBOX_TIMEOUT_MS)
            self->outbox_backoff = IA_OUTBOX_TIMEOUT_MS;
        self->outbox_wait_until = sb_mono_ms () + self->outbox_backoff;
    }
    return true;
}

int64_t
sb_ia_outbox_wait (self_t *self)
{
    int64_t now = sb_mono_ms ();
    if (!self->outbox_corr [0] && self->outbox_idle)
        return -1;
    int64_t until = self->outbox_corr [0] ? self->outbox_sent + IA_OUTBOX_TIMEOUT_MS
                                          : self->outbox_wait_until;
    return until > now ? until - now : 0;
}

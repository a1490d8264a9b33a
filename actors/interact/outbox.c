/*  actors/interact/outbox.c — the tape announcements.

    Every change of an interaction is committed with its announcement (the
    session.append body of approval.requested or approval.resolved) in one
    transaction (record.c); this file sends those bodies to the session
    actor, oldest first, one at a time, and deletes each once the session
    actor has answered it for good. The book of what is in flight and what
    landed is the store's outbox (store/outbox.h), with one entry in
    flight at most. A crash between the commit and the append loses
    nothing: the outbox is sent again after the restart, and each body
    carries the command_id it was stored with, so the session actor answers
    a resend with the first reply instead of appending twice.

    The loop never waits for the session actor: the append is a request in
    flight, remembered by its id, and its reply (or its absence past
    IA_OUTBOX_TIMEOUT_MS) moves the outbox on. One at a time keeps the
    order: approval.requested is on the tape before its approval.resolved. */
#include "actors/interact/interact_impl.h"

uint64_t
sb_ia_outbox_last (self_t *self)
{
    return sb_outbox_last_stored (self->store, DBI_OUTBOX);
}

int
sb_ia_outbox_open (self_t *self)
{
    self->outbox = sb_outbox_new (self->store, DBI_OUTBOX, 1, true);
    if (!self->outbox)
        return -1;
    sb_outbox_durable (self->outbox, self->outbox_next - 1);
    return 0;
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
        sb_outbox_answered (self->outbox, self->outbox_n, false, 0);
        self->outbox_corr [0] = 0;
    }
    if (sb_outbox_idle (self->outbox) || now < self->outbox_wait_until)
        return;
    self->outbox_wait_until = 0;
    sb_outbox_entry_t e;
    if (sb_outbox_take (self->outbox, &e, 1) == 0)
        return;
    /* the session is the request's shard key (docs/architecture.md) */
    char id [33];
    if (sb_bus_send (self->bus, "session.append", e.session [0] ? e.session : NULL, NULL, e.body, e.len, 0,
                     id) == 0) {
        s_copy (self->outbox_corr, sizeof self->outbox_corr, id);
        self->outbox_n = e.n;
        self->outbox_sent = now;
    }
    else {
        sb_outbox_answered (self->outbox, e.n, false, 0);
        self->outbox_wait_until = now + IA_OUTBOX_RETRY_MS;
    }
    free (e.body);
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
    sb_outbox_fate_t fate = sb_outbox_answered (self->outbox, self->outbox_n, true, code);
    if (code != SB_OK)
        sb_warn (ACTOR, "tape append from the outbox failed entry=%llu code=%s message=\"%s\"%s",
                 (unsigned long long) self->outbox_n, sb_msg_error_code (reply),
                 sb_msg_error_message (reply), fate != SB_OUTBOX_RETRY ? " (dropped)" : " (will retry)");
    if (fate != SB_OUTBOX_RETRY) {
        self->outbox_backoff = 0;
        if (sb_outbox_delete (self->outbox, self->outbox_n) != 0)
            sb_warn (ACTOR, "cannot delete outbox entry %llu (it will be sent again)",
                     (unsigned long long) self->outbox_n);
        if (fate == SB_OUTBOX_LANDED)
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
    if (!self->outbox_corr [0] && sb_outbox_idle (self->outbox))
        return -1;
    int64_t until = self->outbox_corr [0] ? self->outbox_sent + IA_OUTBOX_TIMEOUT_MS
                                          : self->outbox_wait_until;
    return until > now ? until - now : 0;
}

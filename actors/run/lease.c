/*  actors/run/lease.c — claims, leases, expiry and recovery.

    Leases live in memory only: after a restart every claimed run is stale
    anyway (recovery marks it interrupted), so persisting each heartbeat
    would buy nothing but fsyncs. */
#include "actors/run/run_impl.h"

void
sb_run_start (self_t *self, run_t *r)
{
    if (strcmp (r->executor, "worker") == 0) {
        char w [256];
        snprintf (w, sizeof w, "a worker in pool %s to claim it (workers are not built yet)", r->pool);
        if (strcmp (w, r->waiting_for) != 0) {
            s_copy (r->waiting_for, sizeof r->waiting_for, w);
            sb_run_save (self, r, false, false, NULL);
        }
        return;
    }
    if (sb_run_save_new_fence (self, r) || sb_run_fence_session (self, r))
        return;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_kstr (e, "session_id", r->session_id);
    sb_enc_kuint (e, "fence", r->fence);
    if (r->resume_from [0]) sb_enc_kstr (e, "resume_from", r->resume_from);
    if (r->kind [0]) sb_enc_kstr (e, "kind", r->kind);
    if (r->approval_policy [0]) sb_enc_kstr (e, "approval_policy", r->approval_policy);
    sb_run_limits_encode (r, e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (self->bus, "exec.start", r->session_id, b, len, CALL_MS);
    sb_enc_destroy (&e);
    if (!reply || sb_msg_is_error (reply)) {
        sb_err_t code = reply ? sb_err_from_name (sb_msg_error_code (reply)) : SB_E_timeout;
        char w [256];
        snprintf (w, sizeof w, "an exec instance (%s)",
                  code == SB_E_no_service ? "none is live" : sb_err_name (code));
        if (strcmp (w, r->waiting_for) != 0) {
            s_copy (r->waiting_for, sizeof r->waiting_for, w);
            sb_run_save (self, r, false, false, NULL);
        }
        sb_msg_destroy (&reply);
        return;
    }
    s_copy (r->owner, sizeof r->owner, sb_get_str (reply->body, "instance"));
    sb_msg_destroy (&reply);
    if (sb_run_set_status (r, SB_RUN_claimed, NULL) != SB_OK)
        return;
    r->started_at = sb_now_ms ();
    r->waiting_for [0] = 0;
    lease_t *lease = calloc (1, sizeof *lease);
    if (lease) {
        lease->expires = sb_mono_ms () + LEASE_MS;
        zhashx_update (self->leases, r->run_id, lease);
    }
    sb_run_save (self, r, false, true, NULL);
}

/*  Starts every queued run (the outbox is flushed first, so a run's
    prompt is on the tape before an executor reads it). */
void
sb_run_start_queued (self_t *self)
{
    sb_run_outbox_flush (self);
    zlistx_t *ids = sb_run_active_ids (self);
    if (!ids)
        return;
    for (char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        run_t r;
        if (sb_run_record_load (self, id, &r) == 0) {
            if (r.status == SB_RUN_queued)
                sb_run_start (self, &r);
            sb_run_record_free (&r);
        }
    }
    zlistx_destroy (&ids);
}

void
sb_run_push_cancel (self_t *self, const run_t *r)
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

void
sb_run_expire_leases (self_t *self)
{
    int64_t now = sb_mono_ms ();
    zlistx_t *keys = zhashx_keys (self->leases);
    for (const char *id = zlistx_first (keys); id; id = zlistx_next (keys)) {
        lease_t *lease = zhashx_lookup (self->leases, id);
        if (!lease || lease->expires > now)
            continue;
        run_t r;
        if (sb_run_record_load (self, id, &r) == 0) {
            /* a run that cannot expire (final, or never claimed) only
               drops its lease */
            if (sb_run_transition_ok (r.status, SB_RUN_expired)) {
                /* fence first: once the session knows the new fence, the
                   lapsed executor can no longer write */
                if (sb_run_save_new_fence (self, &r) == 0 && sb_run_fence_session (self, &r) == 0) {
                    if (sb_run_set_status (&r, SB_RUN_expired,
                                           "lease lapsed: the executor stopped heartbeating") == SB_OK)
                        sb_run_save (self, &r, false, true, NULL);
                    zhashx_delete (self->leases, id);
                }
            }
            else
                zhashx_delete (self->leases, id);
            sb_run_record_free (&r);
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
void
sb_run_recover (self_t *self)
{
    sb_run_outbox_flush (self);
    zlistx_t *ids = sb_run_active_ids (self);
    if (!ids)
        return;
    int n = 0;
    for (char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        run_t r;
        if (sb_run_record_load (self, id, &r))
            continue;
        sb_run_status_t to = r.status == SB_RUN_cancelling ? SB_RUN_cancelled : SB_RUN_interrupted;
        if (r.status != SB_RUN_queued && sb_run_transition_ok (r.status, to)) {
            if (sb_run_save_new_fence (self, &r) == 0)
                sb_run_fence_session (self, &r);
            sb_run_set_status (&r, to, "server_restart");
            r.phase [0] = 0;
            sb_run_save (self, &r, false, true, NULL);
            n++;
        }
        sb_run_record_free (&r);
    }
    zlistx_destroy (&ids);
    if (n)
        sb_info (ACTOR, "recovery interrupted=%d", n);
}

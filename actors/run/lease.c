/*  actors/run/lease.c — claims, leases, expiry and recovery.

    Leases live in memory only: after a restart every claimed run is stale
    anyway (recovery gives it a new fence and marks it interrupted), so
    persisting each heartbeat would buy nothing but fsyncs
    (docs/runs.md, "Leases are not persisted"). */
#include "actors/run/run_impl.h"
#include "schemas/vocab.h"

/*  Notes what a queued run waits for (run-info shows it), writing only
    when it changed. */
static void
s_waiting_for (self_t *self, run_t *r, const char *what)
{
    if (strcmp (what, r->waiting_for) != 0) {
        s_copy (r->waiting_for, sizeof r->waiting_for, what);
        sb_run_save (self, r, false, false, NULL);
    }
}

/*  The start of a local run is a chain of steps, each continued by a
    reply (docs/workers.md):
      1. wait until the outbox has sent every entry written so far, so the
         run's prompt is on the tape before an executor reads it;
      2. give the run the session's next fence and tell the session actor
         (session.fence), so a former holder can no longer append;
      3. exec.start to an instance, whose reply makes the run claimed.
    Each continuation reloads the run: a cancel may have come meanwhile. */

static void
s_start_failed (self_t *self, const char *run_id, const char *what)
{
    sb_run_job_end (self, run_id);
    run_t r;
    if (sb_run_record_load (self, run_id, &r) == 0) {
        if (r.status == SB_RUN_queued)
            s_waiting_for (self, &r, what);
        sb_run_record_free (&r);
    }
}

/*  A lease of this actor's length for run_id, unless it has one. */
static void
s_lease_give (self_t *self, const char *run_id)
{
    if (zhashx_lookup (self->leases, run_id))
        return;
    lease_t *lease = calloc (1, sizeof *lease);
    if (lease) {
        lease->expires = sb_mono_ms () + (int64_t) self->lease_ms;
        lease->lease_ms = self->lease_ms;
        zhashx_update (self->leases, run_id, lease);
    }
}

static void
s_on_exec_start (self_t *self, call_t *call, const sb_msg_t *reply)
{
    sb_run_job_end (self, call->run_id);
    run_t r;
    if (sb_run_record_load (self, call->run_id, &r))
        return;
    if (!reply || sb_msg_is_error (reply)) {
        sb_err_t code = reply ? sb_err_from_name (sb_msg_error_code (reply)) : SB_E_timeout;
        char w [256];
        snprintf (w, sizeof w, "an exec instance (%s)",
                  code == SB_E_no_service ? "none is live" : sb_err_name (code));
        if (r.status == SB_RUN_queued)
            s_waiting_for (self, &r, w);
        sb_run_record_free (&r);
        return;
    }
    const char *instance = sb_get_str (reply->body, "instance");
    if (r.fence != call->n || (r.status != SB_RUN_queued && r.status != SB_RUN_claimed
                               && r.status != SB_RUN_running)) {
        /* cancelled (or re-fenced) while exec.start was on its way: the
           executor that took it stops */
        s_copy (r.owner, sizeof r.owner, instance);
        sb_run_push_cancel (self, &r);
        sb_run_record_free (&r);
        return;
    }
    s_copy (r.owner, sizeof r.owner, instance);
    if (r.status == SB_RUN_queued) {
        if (sb_run_set_status (&r, SB_RUN_claimed, NULL) != SB_OK) {
            sb_run_record_free (&r);
            return;
        }
        r.started_at = sb_now_ms ();
        r.waiting_for [0] = 0;
        sb_run_save (self, &r, false, true, NULL);
    }
    else
        sb_run_save (self, &r, false, false, NULL);
    s_lease_give (self, r.run_id);
    sb_run_record_free (&r);
}

static void
s_on_start_fence (self_t *self, call_t *call, const sb_msg_t *reply)
{
    if (!reply || sb_msg_is_error (reply)) {
        sb_warn (ACTOR, "session.fence failed run=%s fence=%llu error=%s", call->run_id,
                 (unsigned long long) call->n, reply ? sb_msg_error_message (reply) : "no reply");
        s_start_failed (self, call->run_id, "the session actor to take the run's fence");
        return;
    }
    run_t r;
    if (sb_run_record_load (self, call->run_id, &r)) {
        sb_run_job_end (self, call->run_id);
        return;
    }
    if (r.status != SB_RUN_queued || r.fence != call->n) {
        sb_run_job_end (self, call->run_id);
        sb_run_record_free (&r);
        return;
    }
    if (sb_executor_from_name (r.executor) == SB_EXECUTOR_WORKER) {
        /* a worker's claim: the session has the fence, the worker gets it */
        job_t *j = sb_run_job (self, r.run_id);
        claim_t *claim = j ? j->claim : NULL;
        if (j)
            j->claim = NULL;
        sb_run_job_end (self, r.run_id);
        sb_run_grant (self, &r, claim);
        sb_run_record_free (&r);
        return;
    }
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        sb_run_job_end (self, call->run_id);
        sb_run_record_free (&r);
        return;
    }
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r.run_id);
    sb_enc_kstr (e, "session_id", r.session_id);
    sb_enc_kuint (e, "fence", r.fence);
    if (r.resume_from [0]) sb_enc_kstr (e, "resume_from", r.resume_from);
    if (r.kind [0]) sb_enc_kstr (e, "kind", r.kind);
    sb_run_rewind_encode (&r, e);
    if (r.approval_policy [0]) sb_enc_kstr (e, "approval_policy", r.approval_policy);
    sb_run_limits_encode (&r, e);
    /* what the run made before (it waited for an approval across a
       restart): the executor counts on from there */
    if (r.steps) sb_enc_kuint (e, "steps", r.steps);
    if (r.tokens_known) {
        sb_enc_key (e, "usage");
        sb_enc_map_open (e);
        sb_enc_kuint (e, "input_tokens", r.input_tokens);
        sb_enc_kuint (e, "output_tokens", r.output_tokens);
        sb_enc_map_close (e);
    }
    sb_enc_map_close (e);
    sb_run_job_set (self, r.run_id, JOB_EXEC_START, 0);
    /* the run's fence is durable already (session.fence waited for it),
       and nothing else of this run need be */
    self->call_now = true;
    sb_run_call (self, "exec.start", r.session_id, NULL, e, s_on_exec_start, r.run_id, r.fence, NULL, NULL);
    self->call_now = false;
    sb_enc_destroy (&e);
    sb_run_record_free (&r);
}

void
sb_run_start_fence (self_t *self, const char *run_id)
{
    run_t r;
    if (sb_run_record_load (self, run_id, &r)) {
        sb_run_job_end (self, run_id);
        return;
    }
    if (r.status != SB_RUN_queued || sb_run_save_new_fence (self, &r)) {
        sb_run_job_end (self, run_id);
        sb_run_record_free (&r);
        return;
    }
    sb_run_job_set (self, run_id, JOB_FENCE_START, 0);
    sb_run_fence_session_async (self, &r, s_on_start_fence);
    sb_run_record_free (&r);
}

void
sb_run_start (self_t *self, run_t *r)
{
    if (sb_run_job (self, r->run_id))
        return;                 /* its start is under way */
    if (sb_executor_from_name (r->executor) == SB_EXECUTOR_WORKER) {
        sb_run_offer (self, r);
        return;
    }
    uint64_t barrier = self->outbox_next - 1;
    sb_run_job_set (self, r->run_id, JOB_WAIT_OUTBOX, barrier);
    if (sb_outbox_acked (self->outbox) >= barrier)
        sb_run_start_fence (self, r->run_id);
    else
        sb_run_outbox_flush (self);
}

void
sb_run_jobs_advance (self_t *self)
{
    if (!zhashx_size (self->jobs))
        return;
    zlistx_t *ready = zlistx_new ();
    if (!ready)
        return;
    zlistx_set_destructor (ready, (czmq_destructor *) zstr_free);
    for (job_t *j = zhashx_first (self->jobs); j; j = zhashx_next (self->jobs))
        if (j->stage == JOB_WAIT_OUTBOX && j->barrier <= sb_outbox_acked (self->outbox))
            zlistx_add_end (ready, strdup ((const char *) zhashx_cursor (self->jobs)));
    for (char *id = zlistx_first (ready); id; id = zlistx_next (ready))
        sb_run_start_fence (self, id);
    zlistx_destroy (&ready);
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
        if (sb_run_job (self, id))
            continue;
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
    /* a worker learns of it from its next heartbeat's reply */
    if (sb_executor_from_name (r->executor) == SB_EXECUTOR_WORKER)
        return;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    /* to the instance that owns the run, once `cancelling` is durable (and
       its tape entry sent first); its reply is not needed */
    const char *to = r->owner [0] ? r->owner : NULL;
    if (!sb_run_call_defer (self, "exec.cancel", r->session_id, to, b, len, NULL))
        sb_bus_send (self->bus, "exec.cancel", r->session_id, to, b, len, sb_now_ms () + CALL_MS, NULL);
    sb_enc_destroy (&e);
}

/*  Expiry: the new fence reaches the session actor, acknowledged, before
    the run is announced expired (docs/workers.md, "Fencing"). */
static void
s_on_expire_fence (self_t *self, call_t *call, const sb_msg_t *reply)
{
    sb_run_job_end (self, call->run_id);
    if (!reply || sb_msg_is_error (reply)) {
        sb_warn (ACTOR, "session.fence failed run=%s fence=%llu error=%s (expiry retried)", call->run_id,
                 (unsigned long long) call->n, reply ? sb_msg_error_message (reply) : "no reply");
        return;                 /* the lease is still lapsed: the next tick tries again */
    }
    run_t r;
    if (sb_run_record_load (self, call->run_id, &r)) {
        zhashx_delete (self->leases, call->run_id);
        return;
    }
    /* a cancelled run whose executor did not stop in time is cancelled
       all the same: it is fenced now, and nothing of it lands any more */
    bool cancel = r.status == SB_RUN_cancelling;
    sb_run_status_t to = cancel ? SB_RUN_cancelled : SB_RUN_expired;
    if (r.fence == call->n && sb_run_transition_ok (r.status, to)
    &&  sb_run_set_status (&r, to, cancel ? "cancel_timeout: the executor did not stop in time; fenced"
                                          : "lease_expired") == SB_OK) {
        r.phase [0] = 0;
        sb_run_save (self, &r, false, true, NULL);
    }
    sb_run_worker_release (self, &r);
    zhashx_delete (self->leases, call->run_id);
    sb_run_record_free (&r);
}

void
sb_run_expire_leases (self_t *self)
{
    int64_t now = sb_mono_ms ();
    zlistx_t *keys = zhashx_keys (self->leases);
    for (const char *id = zlistx_first (keys); id; id = zlistx_next (keys)) {
        lease_t *lease = zhashx_lookup (self->leases, id);
        if (!lease || lease->expires > now || sb_run_job (self, id))
            continue;
        run_t r;
        if (sb_run_record_load (self, id, &r) == 0) {
            /* a run that cannot expire (final, or never claimed) only
               drops its lease */
            if (sb_run_transition_ok (r.status, SB_RUN_expired)) {
                /* fence first: once the session knows the new fence, the
                   lapsed executor can no longer write; its heartbeats are
                   refused from this commit on */
                if (sb_run_save_new_fence (self, &r) == 0) {
                    sb_run_job_set (self, id, JOB_FENCE_EXPIRE, 0);
                    sb_run_fence_session_async (self, &r, s_on_expire_fence);
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

/*  A run that was waiting for an approval (actors/run/recover.c) goes
    back to the queue, to wait again for the same interaction; `reason`
    says so. */
static bool
s_recover_waiting (self_t *self, const run_t *r, bool takeover, char *reason, size_t size)
{
    char ia [64] = "";
    if (!sb_run_recover_waiting (self, r, takeover ? sb_now_ms () : self->born_at, ia, sizeof ia))
        return false;
    snprintf (reason, size, "server_restart: waiting for approval %s", ia);
    return true;
}

/*  Every run that was claimed or running when the server stopped is
    stale: no executor of this process survived. One that was waiting for
    an approval is queued again with a new fence, and so is a rewind
    (putting a tree back is done again whole). Any other becomes interrupted;
    nothing it was doing is re-run, and run.resume continues it from the
    tape. A run that was cancelling is cancelled. Queued runs stay queued
    and are dispatched. */
/*  Ends, as a restart does, the unfinished runs of the sessions of
    `shards`; returns how many. On a takeover (a shard gained from another
    node) a run leased to a worker is not ended: the worker goes on, its
    bus failing over to this node or another (bus/client.c), and its
    heartbeats keep the lease this gives it, which expires as any
    worker's lease does when they stop. */
#define FOREIGN_RETRY_MS 2000   /* another node's entry that did not land is tried again this much later */

static int
s_recover_shards (self_t *self, uint64_t shards, bool takeover)
{
    self->recovering = true;
    sb_run_outbox_drain (self);
    /* what the old owner had committed and not yet put on the tape lands
       before anything this node writes of its runs */
    if (takeover && self->cluster && !sb_run_outbox_foreign (self, shards)) {
        self->foreign_due |= shards;
        self->foreign_at = sb_mono_ms () + FOREIGN_RETRY_MS;
    }
    zlistx_t *ids = sb_run_active_ids (self);
    self->recovering = ids != NULL;
    if (!ids)
        return 0;
    int n = 0;
    for (char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        run_t r;
        if (sb_run_record_load (self, id, &r))
            continue;
        if (!(sb_cluster_shard_bit (r.session_id) & shards)) {
            sb_run_record_free (&r);
            continue;
        }
        if (takeover && r.worker_id [0] && (r.status == SB_RUN_claimed || r.status == SB_RUN_running)) {
            s_lease_give (self, r.run_id);
            sb_run_record_free (&r);
            continue;
        }
        sb_run_status_t to = r.status == SB_RUN_cancelling ? SB_RUN_cancelled : SB_RUN_interrupted;
        char reason [128] = "server_restart";
        if ((r.status == SB_RUN_claimed || r.status == SB_RUN_running)
        &&  s_recover_waiting (self, &r, takeover, reason, sizeof reason))
            to = SB_RUN_queued;
        else
        //  A rewind half done would leave the work tree as no checkpoint
        //  and no entry says; putting the same tree back again is
        //  harmless, so it is run again, to its end (actors/exec/rewind.c
        //  finds the tree its first attempt found).
        if ((r.status == SB_RUN_claimed || r.status == SB_RUN_running)
        &&  sb_run_kind_from_name (r.kind) == SB_RUN_KIND_REWIND) {
            to = SB_RUN_queued;
            snprintf (reason, sizeof reason, "server_restart: a rewind is run again to its end");
        }
        if (r.status != SB_RUN_queued && sb_run_transition_ok (r.status, to)) {
            /* the session hears of a fence only once it is durable */
            if (sb_run_save_new_fence (self, &r) == 0) {
                sb_run_commit_wait (self);
                sb_run_fence_session (self, &r);
            }
            sb_run_set_status (&r, to, reason);
            r.phase [0] = 0;
            sb_run_save (self, &r, false, true, NULL);
            n++;
        }
        sb_run_record_free (&r);
    }
    zlistx_destroy (&ids);
    /* the outbox sends durable entries only */
    sb_run_commit_wait (self);
    self->recovering = false;
    sb_run_outbox_drain (self);
    return n;
}

void
sb_run_recover (self_t *self)
{
    self->shards_seen = self->cluster ? sb_cluster_held (self->cluster) : ~0ull;
    int n = s_recover_shards (self, ~0ull, false);
    if (n)
        sb_info (ACTOR, "recovery interrupted=%d", n);
}

void
sb_run_shards_changed (self_t *self)
{
    if (!self->cluster)
        return;
    uint64_t now = sb_cluster_held (self->cluster);
    uint64_t gained = now & ~self->shards_seen, lost = self->shards_seen & ~now;
    self->shards_seen = now;
    self->foreign_due &= now;
    if (self->foreign_due && !gained && sb_mono_ms () >= self->foreign_at) {
        /* another node's entries that did not land at the takeover */
        if (sb_run_outbox_foreign (self, self->foreign_due))
            self->foreign_due = 0;
        else
            self->foreign_at = sb_mono_ms () + FOREIGN_RETRY_MS;
    }
    /* lost: the local executions of its runs stop, their leases go (the
       new owner's recovery ends the runs; their writes here are fenced) */
    zlistx_t *keys = lost ? zhashx_keys (self->leases) : NULL;
    int dropped = 0;
    for (const char *id = keys ? zlistx_first (keys) : NULL; id; id = zlistx_next (keys)) {
        run_t r;
        if (sb_run_record_load (self, id, &r) != 0)
            continue;
        if (sb_cluster_shard_bit (r.session_id) & lost) {
            sb_run_push_cancel (self, &r);
            zhashx_delete (self->leases, id);
            dropped++;
        }
        sb_run_record_free (&r);
    }
    zlistx_destroy (&keys);
    /* gained: what the old owner left unfinished ends as after a restart */
    int n = gained ? s_recover_shards (self, gained, true) : 0;
    if (gained || lost)
        sb_info (ACTOR, "shards changed gained=%d lost=%d runs_recovered=%d leases_dropped=%d",
                 __builtin_popcountll (gained), __builtin_popcountll (lost), n, dropped);
}

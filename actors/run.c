/*  actors/run.c — the run coordinator (docs/architecture.md): runs, their
    state machine, leases, fencing, cancel and resume, and recovery at
    startup. LMDB at DATA/run.

    This file is the actor and its requests; actors/run/run_impl.h says
    which seam each of the other files holds. Every status change is
    committed first and reaches the session tape through an outbox
    (actors/run/outbox.c); commits are batched on a committer thread, and
    nothing is acknowledged before its batch is durable
    (actors/run/commit.c, docs/runs.md); leases live in memory only
    (actors/run/lease.c). */
#include "actors/run/run_impl.h"
#include "schemas/vocab.h"

static const char *s_dbis [] = { "runs", "active", "bysession", "outbox", "fences", "commands", NULL };

/* ------------------------------------------------------------------ */
/*  Replies */

static void
s_reply_run_with (self_t *self, const sb_msg_t *msg, const run_t *r, bool landed)
{
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "run");
    sb_run_record_encode (r, zhashx_lookup (self->leases, r->run_id), e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    if (landed)
        sb_run_reply_landed (self, self->bus, (sb_msg_t *) msg, b, len);
    else
        sb_bus_reply (self->bus, msg, b, len);
}

/*  Reads (run.get, run.list) are answered once the tape holds what the
    records they show wrote: whoever sees a run `cancelled` finds it so
    on the tape (the record is committed before its outbox entry lands). */

/*  Answers a change once the tape has what it wrote (sb_run_reply_landed):
    the caller that reads the tape next finds it there. */
static void
s_reply_changed (self_t *self, const sb_msg_t *msg, const run_t *r)
{
    s_reply_run_with (self, msg, r, true);
}




/* ------------------------------------------------------------------ */
/*  Requests */

/*  Idempotency (actors/run/commands.c): true when msg is answered from
    its command_id, with the run the same request made before (or with
    `conflict`, sent there). */
static bool
s_remembered (self_t *self, const sb_msg_t *msg, const char *session_id)
{
    run_t r;
    int rc = sb_run_command_find (self, msg, session_id, &r);
    if (rc == 1) {
        /* the first request's run may not be durable yet: answered as the
           first one was */
        s_reply_changed (self, msg, &r);
        sb_run_record_free (&r);
    }
    return rc != 0;
}

static void
s_remember (self_t *self, const sb_msg_t *msg, const run_t *r)
{
    sb_run_command_remember (self, msg, r);
}

/*  What a run.request or run.resume asks for, kept while session.get is
    on its way; the request itself is kept to be answered. */
typedef struct {
    sb_msg_t *msg;
    char session_id [33];
    char *input;
    char resume_from [33];
    char executor [16];
    char pool [64];
    char policy [16];
    bool has_max_steps, has_timeout, has_max_output;
    uint64_t max_steps, timeout_s, max_output_tokens;
} create_t;

static void
s_create_free (void *arg)
{
    create_t *c = arg;
    if (c) {
        sb_msg_destroy (&c->msg);
        free (c->input);
        free (c);
    }
}

/*  session.get answered: the session must exist and be open, and its
    config gives the defaults. Everything decided here is decided without
    waiting, so two requests for one session cannot both pass the check
    for an active run. */
static void
s_on_create_session (self_t *self, call_t *call, const sb_msg_t *sess)
{
    create_t *c = call->arg;
    const sb_msg_t *msg = c->msg;
    if (!sess) {
        sb_bus_error (self->bus, msg, SB_E_unavailable, "the session actor did not answer");
        return;
    }
    if (sb_msg_is_error (sess)) {
        sb_bus_error (self->bus, msg, sb_err_from_name (sb_msg_error_code (sess)), "%s", sb_msg_error_message (sess));
        return;
    }
    /* a retry that came while the first was waiting here */
    if (s_remembered (self, msg, c->session_id))
        return;
    const sb_val_t *rec = sb_get_map (sess->body, "session");
    const char *status = sb_get_str (rec, "status");
    if (status && sb_session_status_from_name (status) != SB_SESSION_ACTIVE) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "session %s is %s", c->session_id, status);
        return;
    }
    char active [33];
    if (sb_run_active_run (self, c->session_id, active) == 0) {
        sb_bus_error (self->bus, msg, SB_E_conflict,
                      "session %s already has an active run %s; wait for it or cancel it "
                      "(one run at a time per session)", c->session_id, active);
        return;
    }
    run_t r;
    memset (&r, 0, sizeof r);
    sb_ulid_new (r.run_id);
    s_copy (r.session_id, sizeof r.session_id, c->session_id);
    r.status = SB_RUN_queued;
    s_copy (r.executor, sizeof r.executor, c->executor);
    s_copy (r.pool, sizeof r.pool, c->pool);
    if (!r.executor [0]) {
        const char *t = sb_get_str (rec, "target");
        if (t && strncmp (t, "worker:", 7) == 0 && t [7]) {
            s_copy (r.executor, sizeof r.executor, "worker");
            s_copy (r.pool, sizeof r.pool, t + 7);
        }
        else
            s_copy (r.executor, sizeof r.executor, "local");
    }
    s_copy (r.resume_from, sizeof r.resume_from, c->resume_from);
    /* a compaction-only run (session.compact, docs/compaction.md) */
    s_copy (r.kind, sizeof r.kind, sb_get_str (msg->body, "kind"));
    r.rewind_to = sb_get_uint (msg->body, "rewind_to", 0);
    r.undo = sb_get_bool (msg->body, "undo", false);
    r.no_code = !sb_get_bool (msg->body, "code", true);
    r.no_conversation = !sb_get_bool (msg->body, "conversation", true);
    const char *spolicy = sb_get_str (rec, "approval_policy");
    s_copy (r.approval_policy, sizeof r.approval_policy,
            c->policy [0] ? c->policy : spolicy ? spolicy : "auto");
    r.input = c->input;
    c->input = NULL;
    r.max_steps = c->has_max_steps ? c->max_steps : sb_get_uint (rec, "max_steps", DEFAULT_MAX_STEPS);
    if (r.max_steps == 0)
        r.max_steps = DEFAULT_MAX_STEPS;
    r.timeout_s = c->has_timeout ? c->timeout_s : DEFAULT_TIMEOUT_S;
    r.max_output_tokens = c->has_max_output ? c->max_output_tokens : 0;
    r.created_at = sb_now_ms ();
    /* remembered before the run is stored: a crash in between leaves an id
       that names no run, which s_remembered treats as new; the other order
       would leave a run its retry cannot find, and make a second one (the
       session's queue relies on this: docs/queue.md) */
    s_remember (self, msg, &r);
    if (sb_run_save_prompt (self, &r, r.input, sb_get (msg->body, "images"))) {
        sb_bus_error (self->bus, msg, SB_E_internal, "cannot store the run");
        sb_run_record_free (&r);
        return;
    }
    s_reply_changed (self, msg, &r);
    sb_run_start (self, &r);
    sb_run_record_free (&r);
}

/*  Creates a queued run of `session_id` (shared by run.request and
    run.resume) once session.get answers. Takes over msg; replies on
    success or error. */
static void
s_create (self_t *self, sb_msg_t *msg, const char *session_id, const char *input,
          const char *resume_from, const sb_val_t *target, const sb_val_t *limits, const char *policy)
{
    /* approval_policy and target.executor are names of their tables: the
       schema's ENUM rows checked run.request's, and run.resume passes the
       stored run's, which were. No target: the session's (session.target),
       read with the session. */
    const char *executor = target ? sb_get_str (target, "executor") : "";
    const char *pool = target ? sb_get_str (target, "pool") : NULL;
    if (sb_executor_from_name (executor) == SB_EXECUTOR_WORKER && (!pool || !*pool)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "target {executor: worker} needs a pool");
        return;
    }
    create_t *c = calloc (1, sizeof *c);
    sb_enc_t *e = sb_enc_new ();
    if (!c || !e || (input && !(c->input = strdup (input)))) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        s_create_free (c);
        sb_enc_destroy (&e);
        return;
    }
    s_copy (c->session_id, sizeof c->session_id, session_id);
    s_copy (c->resume_from, sizeof c->resume_from, resume_from);
    s_copy (c->executor, sizeof c->executor, executor);
    s_copy (c->pool, sizeof c->pool, pool);
    s_copy (c->policy, sizeof c->policy, policy);
    c->has_max_steps = sb_get (limits, "max_steps") != NULL;
    c->max_steps = sb_get_uint (limits, "max_steps", 0);
    c->has_timeout = sb_get (limits, "timeout_s") != NULL;
    c->timeout_s = sb_get_uint (limits, "timeout_s", 0);
    c->has_max_output = sb_get (limits, "max_output_tokens") != NULL;
    c->max_output_tokens = sb_get_uint (limits, "max_output_tokens", 0);
    c->msg = sb_run_msg_keep (msg);
    if (!c->msg) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        s_create_free (c);
        sb_enc_destroy (&e);
        return;
    }
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", session_id);
    sb_enc_map_close (e);
    /* a read: it depends on no pending write */
    self->call_now = true;
    sb_run_call (self, "session.get", session_id, NULL, e, s_on_create_session, NULL, 0, c, s_create_free);
    self->call_now = false;
    sb_enc_destroy (&e);
}

static void
s_handle_request (self_t *self, sb_msg_t *msg)
{
    const char *sid = sb_get_str (msg->body, "session_id");
    if (!sid || !*sid) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "session_id is required");
        return;
    }
    if (s_remembered (self, msg, sid))
        return;
    const char *input = sb_get_str (msg->body, "input");
    const char *resume = sb_get_str (msg->body, "resume_from");
    const char *kind = sb_get_str (msg->body, "kind");
    sb_run_kind_t k = kind ? sb_run_kind_from_name (kind) : SB_RUN_KIND_PROMPT;
    if (kind && k != SB_RUN_KIND_COMPACT && k != SB_RUN_KIND_REWIND) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "kind must be compact or rewind (or absent for a prompt's run)");
        return;
    }
    if (kind && ((input && *input) || resume)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "a %s run takes no input and resumes nothing", kind);
        return;
    }
    if ((!input || !*input) && !resume && !kind) {
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
    if (sb_run_record_load (self, id, &r)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no run %s", id);
        return;
    }
    s_reply_changed (self, msg, &r);
    sb_run_record_free (&r);
}

typedef struct {
    zlistx_t *ids;
    size_t id_at;
} s_list_scan_t;

static void
s_list_add (const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    (void) val;
    (void) vlen;
    s_list_scan_t *scan = arg;
    if (klen > scan->id_at + 1)
        zlistx_add_end (scan->ids, strndup ((const char *) key + scan->id_at, klen - scan->id_at - 1));
}

static void
s_handle_list (self_t *self, sb_msg_t *msg)
{
    const char *sid = sb_get_str (msg->body, "session_id");
    /* a status's name (the schema's ENUM row), or none: SB_RUN__COUNT */
    sb_run_status_t status = sb_run_status_from_name (sb_get_str (msg->body, "status"));
    const char *id_prefix = sb_get_str (msg->body, "id_prefix");
    if (id_prefix && !sb_ulid_prefix_valid (id_prefix)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "id_prefix must be the start of a run id");
        return;
    }
    /* the codec refused a limit outside the schema's range already */
    uint64_t limit = sb_get_uint (msg->body, "limit", (uint64_t) sb_schema_default ("run.list", "limit"));
    /* collect ids, sorted oldest first (ULIDs), then emit newest first */
    zlistx_t *ids = zlistx_new ();
    if (!ids) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return;
    }
    zlistx_set_destructor (ids, (czmq_destructor *) zstr_free);
    zlistx_set_comparator (ids, (czmq_comparator *) strcmp);
    sb_key_t p;
    if (sid) {
        sb_key_init (&p, 'B');
        sb_key_str (&p, sid);
    }
    else
        sb_key_init (&p, 'R');
    /* the run id is the key's last field: an id prefix extends the key
       prefix, so only the matching range is read */
    s_list_scan_t scan = { ids, p.len };
    if (id_prefix)
        sb_key_bytes (&p, id_prefix, strlen (id_prefix));
    if (sb_run_kv_scan (self, sid ? DBI_BYSESSION : DBI_RUNS, p.buf, p.len, s_list_add, &scan)) {
        zlistx_destroy (&ids);
        sb_bus_error (self->bus, msg, SB_E_internal, "store unavailable");
        return;
    }
    /* pending runs come after the committed ones, unordered */
    if (zhashx_size (self->pending))
        zlistx_sort (ids);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "runs");
    sb_enc_array_open (e);
    uint64_t n = 0;
    for (char *id = zlistx_last (ids); id && n < limit; id = zlistx_prev (ids)) {
        run_t r;
        if (sb_run_record_load (self, id, &r) == 0) {
            if (status == SB_RUN__COUNT || r.status == status) {
                sb_run_record_encode (&r, zhashx_lookup (self->leases, r.run_id), e);
                n++;
            }
            sb_run_record_free (&r);
        }
    }
    sb_enc_array_close (e);
    sb_enc_map_close (e);
    zlistx_destroy (&ids);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_run_reply_landed (self, self->bus, msg, b, len);
}

static void
s_handle_cancel (self_t *self, sb_msg_t *msg)
{
    run_t r;
    const char *id = sb_get_str (msg->body, "run_id");
    if (sb_run_record_load (self, id, &r)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no run %s", id);
        return;
    }
    if (sb_run_status_is_final (r.status)) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "run %s is already %s", id, sb_run_status_name (r.status));
        sb_run_record_free (&r);
        return;
    }
    /* a queued run has no executor to stop; a cancelling one was told
       already, and is told again */
    if (r.status == SB_RUN_queued) {
        if (sb_run_set_status (&r, SB_RUN_cancelled, "cancelled before it started") == SB_OK)
            sb_run_save (self, &r, false, true, NULL);
    }
    else
    if (r.status != SB_RUN_cancelling) {
        r.cancel_requested = true;
        if (sb_run_set_status (&r, SB_RUN_cancelling, "cancel requested") == SB_OK)
            sb_run_save (self, &r, false, true, NULL);
        sb_run_push_cancel (self, &r);
        sb_run_worker_cancel_lease (self, &r);
    }
    else
        sb_run_push_cancel (self, &r);
    s_reply_changed (self, msg, &r);
    sb_run_record_free (&r);
}

static void
s_handle_resume (self_t *self, sb_msg_t *msg)
{
    run_t r;
    const char *id = sb_get_str (msg->body, "run_id");
    if (sb_run_record_load (self, id, &r)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no run %s", id);
        return;
    }
    /* a resume's command is scoped to the session of the run it resumes */
    if (s_remembered (self, msg, r.session_id)) {
        sb_run_record_free (&r);
        return;
    }
    /* a compaction that did not finish changed nothing: it is run again
       (session.compact), not continued */
    if (r.kind [0]) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "run %s is a %s run; run 'switchboard compact %s' again "
                      "instead of resuming it", id, r.kind, r.session_id);
        sb_run_record_free (&r);
        return;
    }
    /* resume reopens nothing: it creates a new run that continues this one */
    if (!sb_run_status_is_final (r.status) || r.status == SB_RUN_completed) {
        sb_bus_error (self->bus, msg, SB_E_conflict,
                      "run %s is %s; only failed, cancelled, interrupted or expired runs can be resumed",
                      id, sb_run_status_name (r.status));
        sb_run_record_free (&r);
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
    sb_run_record_free (&r);
}

static int
s_check_fence (self_t *self, sb_msg_t *msg, run_t *r)
{
    const char *id = sb_get_str (msg->body, "run_id");
    if (sb_run_record_load (self, id, r)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no run %s", id);
        return -1;
    }
    uint64_t fence = sb_get_uint (msg->body, "fence", 0);
    if (fence != r->fence) {
        sb_bus_error (self->bus, msg, SB_E_fenced, "run %s: fence %llu is stale (current %llu)", id,
                      (unsigned long long) fence, (unsigned long long) r->fence);
        sb_run_record_free (r);
        return -1;
    }
    if (sb_run_status_is_final (r->status)) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "run %s is already %s", id, sb_run_status_name (r->status));
        sb_run_record_free (r);
        return -1;
    }
    return 0;
}

/*  An executor's run thread has its own connection, so its first
    heartbeat or its finish can overtake exec.start.ok: a queued run whose
    exec.start is in flight, heard from with its fence, is claimed by the
    instance that spoke. */
static void
s_claim_if_starting (self_t *self, run_t *r, const sb_msg_t *msg)
{
    job_t *j = sb_run_job (self, r->run_id);
    if (r->status != SB_RUN_queued || !j || j->stage != JOB_EXEC_START)
        return;
    if (sb_run_set_status (r, SB_RUN_claimed, NULL) != SB_OK)
        return;
    s_copy (r->owner, sizeof r->owner, msg->h.from);
    r->started_at = sb_now_ms ();
    r->waiting_for [0] = 0;
    sb_run_save (self, r, false, true, NULL);
}

static void
s_handle_heartbeat (self_t *self, sb_msg_t *msg)
{
    run_t r;
    if (s_check_fence (self, msg, &r))
        return;
    /* a worker's executor names its worker: the claim is that worker's,
       or a node whose broker never saw the claim (the worker's first node
       died) would grant the run to whoever knows its fence */
    const char *wid = sb_get_str (msg->body, "worker_id");
    if (wid && strcmp (wid, r.worker_id) != 0) {
        sb_bus_error (self->bus, msg, SB_E_forbidden, "run %s is not claimed by worker %s", r.run_id, wid);
        sb_run_record_free (&r);
        return;
    }
    sb_run_status_t status_before = r.status;
    s_claim_if_starting (self, &r, msg);
    lease_t *lease = zhashx_lookup (self->leases, r.run_id);
    if (!lease) {
        lease = calloc (1, sizeof *lease);
        if (lease)
            zhashx_update (self->leases, r.run_id, lease);
    }
    if (lease) {
        if (!lease->lease_ms)
            lease->lease_ms = self->lease_ms;
        lease->expires = sb_mono_ms () + (int64_t) lease->lease_ms;
        /* a cancelled run's lease ends at the cancel's grace, heartbeats or not */
        if (lease->cancel_by && lease->expires > lease->cancel_by)
            lease->expires = lease->cancel_by;
        s_copy (lease->phase, sizeof lease->phase, sb_get_str (msg->body, "phase"));
        lease->steps = sb_get_uint (msg->body, "steps", lease->steps);
        lease->input_tokens = sb_get_uint (msg->body, "input_tokens", lease->input_tokens);
        lease->tokens_known = lease->tokens_known || sb_get (msg->body, "input_tokens");
        lease->output_tokens = sb_get_uint (msg->body, "output_tokens", lease->output_tokens);
    }
    bool changed = r.status != status_before;
    /* a model call since the record was written: its figures are kept, so
       that a run interrupted by a crash still says what it made */
    bool counted = lease && lease->steps > r.steps;
    if (counted) {
        r.steps = lease->steps;
        r.input_tokens = lease->input_tokens;
        r.output_tokens = lease->output_tokens;
        r.tokens_known = r.tokens_known || lease->tokens_known;
    }
    if (r.status == SB_RUN_claimed && sb_run_set_status (&r, SB_RUN_running, NULL) == SB_OK) {
        sb_run_save (self, &r, false, true, NULL);
        changed = true;
    }
    else
    if (counted)
        sb_run_save (self, &r, false, false, NULL);     /* rides with the next batch; nothing waits */
    if (r.worker_id [0])
        sb_run_worker_seen (self, r.worker_id);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kbool (e, "cancel_requested", r.cancel_requested);
    /* after a cancel the lease ends at the grace, and the reply says what
       is left of it (the broker ends a worker key's grant by it too) */
    uint64_t left = lease && lease->lease_ms ? lease->lease_ms : self->lease_ms;
    if (lease && lease->cancel_by)
        left = lease->expires > sb_mono_ms () ? (uint64_t) (lease->expires - sb_mono_ms ()) : 0;
    sb_enc_kuint (e, "lease_ms", left);
    sb_enc_kstr (e, "session_id", r.session_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    /* the executor's entries come after `running` on the tape */
    if (changed)
        sb_run_reply_landed (self, self->bus, msg, b, len);
    else
        sb_bus_reply (self->bus, msg, b, len);
    sb_run_record_free (&r);
}

static void
s_handle_finish (self_t *self, sb_msg_t *msg)
{
    run_t r;
    if (s_check_fence (self, msg, &r))
        return;
    s_claim_if_starting (self, &r, msg);
    sb_run_status_t status = sb_run_status_from_name (sb_get_str (msg->body, "status"));
    if (status != SB_RUN_completed && status != SB_RUN_failed && status != SB_RUN_cancelled) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "status must be completed, failed or cancelled");
        sb_run_record_free (&r);
        return;
    }
    /* run.finish says `reason`, a worker's run.complete `error` */
    const char *reason = sb_get_str (msg->body, "reason");
    if (!reason)
        reason = sb_get_str (msg->body, "error");
    /* e.g. a run that no executor ever claimed cannot finish */
    if (sb_run_set_status (&r, status, reason) != SB_OK) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "run %s is %s; it cannot become %s", r.run_id,
                      sb_run_status_name (r.status), sb_run_status_name (status));
        sb_run_record_free (&r);
        return;
    }
    r.steps = sb_get_uint (msg->body, "steps", r.steps);
    const sb_val_t *u = sb_get_map (msg->body, "usage");
    r.input_tokens = sb_get_uint (u, "input_tokens", r.input_tokens);
    r.output_tokens = sb_get_uint (u, "output_tokens", r.output_tokens);
    r.tokens_known = r.tokens_known || sb_get (u, "input_tokens");
    r.phase [0] = 0;
    zhashx_delete (self->leases, r.run_id);
    sb_run_save (self, &r, false, true, NULL);
    if (r.worker_id [0]) {
        sb_run_worker_seen (self, r.worker_id);
        sb_run_worker_release (self, &r);
    }
    s_reply_changed (self, msg, &r);
    sb_run_record_free (&r);
}

/* ------------------------------------------------------------------ */
/*  Dispatch: every request type the actor serves, and its handler
    (actors/actor.h; tests/unit/test_dispatch.c holds the type column
    against the schemas). */

typedef void (s_handler_fn) (self_t *self, sb_msg_t *msg);

const sb_dispatch_t sb_run_dispatch [] = {
    SB_DISPATCH ("run.request",   s_handle_request),
    SB_DISPATCH ("run.get",       s_handle_get),
    SB_DISPATCH ("run.list",      s_handle_list),
    SB_DISPATCH ("run.cancel",    s_handle_cancel),
    SB_DISPATCH ("run.resume",    s_handle_resume),
    SB_DISPATCH ("run.heartbeat", s_handle_heartbeat),
    SB_DISPATCH ("run.finish",    s_handle_finish),
    SB_DISPATCH ("run.claim",     sb_run_handle_claim),
    SB_DISPATCH ("run.complete",  s_handle_finish),
    SB_DISPATCH_END
};

/*  On a node of a cluster, a request that changes a run (everything but
    run.get, run.list and run.claim, whose scan sees only this node's
    sessions) is served only for a session of a shard this node holds;
    else it is forwarded to the owner (cluster/forward.c), or refused
    not_owner, naming the owner, when no bus to it can be made. The
    session is the body's session_id, else the one of the run its run_id
    names. False when it took *msg_p. */
static bool
s_owned (self_t *self, sb_msg_t **msg_p, size_t row)
{
    sb_msg_t *msg = *msg_p;
    const char *t = msg->h.type;
    if (!self->cluster || !strcmp (t, "run.get") || !strcmp (t, "run.list") || !strcmp (t, "run.claim"))
        return true;
    char sid [64] = "";
    const char *s = sb_get_str (msg->body, "session_id");
    const char *run_id = sb_get_str (msg->body, "run_id");
    run_t r;
    if (s)
        s_copy (sid, sizeof sid, s);
    else
    if (run_id && sb_run_record_load (self, run_id, &r) == 0) {
        s_copy (sid, sizeof sid, r.session_id);
        sb_run_record_free (&r);
    }
    if (sb_forward (self->fwd, self->bus, msg_p, sid, (int) row))
        return false;
    return sb_actor_owns (self->bus, msg, self->cluster, sid);
}

/*  A forward taken here after all (its shard came to this node). */
static void
s_take_forwarded (void *arg, sb_msg_t **msg_p, int row)
{
    ((s_handler_fn *) sb_run_dispatch [row].fn) ((self_t *) arg, *msg_p);
}

static void
s_dispatch (self_t *self, sb_msg_t **msg_p)
{
    sb_msg_t *msg = *msg_p;
    if (!msg->route)
        /* a reply continues the work that sent its request; replies to
           pushes (exec.cancel) need no action */
        sb_run_call_reply (self, msg);
    else {
        size_t k = sb_dispatch_index (sb_run_dispatch, sizeof sb_run_dispatch [0], msg->h.type);
        const sb_dispatch_t *row = sb_run_dispatch [k].type ? &sb_run_dispatch [k] : NULL;
        if (row && !s_owned (self, msg_p, k))
            ;
        else
        if (row)
            ((s_handler_fn *) row->fn) (self, msg);
        else
            sb_bus_error (self->bus, msg, SB_E_unknown_type, "run does not serve %s", msg->h.type);
    }
}

/*  Heartbeats go first. A burst of replies (200 runs starting) costs
    work for each (records decoded, writes gathered; the commit itself is
    on the committer thread, actors/run/commit.c); a heartbeat queued
    behind them would wait for all of it, and a lease could lapse under
    load. So between two messages
    the socket is read again: a heartbeat is answered at once, anything
    else joins the batch. A heartbeat only extends a lease and reads the
    run, so answering it before messages that came earlier changes
    nothing it answers but cancel_requested, which the next heartbeat
    carries. At most BATCH_MAX messages wait at a time, so the pipe and
    the tick keep their turn. */
#define BATCH_MAX 256

/*  Reads what arrived: heartbeats are handled, the rest appended. */
static void
s_pull (self_t *self, sb_msg_t **batch, size_t *n)
{
    sb_msg_t *msg;
    while (*n < BATCH_MAX && (msg = sb_bus_recv (self->bus, 0))) {
        if (msg->route && strcmp (msg->h.type, "run.heartbeat") == 0) {
            s_dispatch (self, &msg);
            sb_msg_destroy (&msg);
        }
        else
            batch [(*n)++] = msg;
    }
}

static void
s_handle_bus (self_t *self)
{
    sb_msg_t *batch [BATCH_MAX];
    size_t n = 0;
    s_pull (self, batch, &n);
    for (size_t k = 0; k < n; k++) {
        s_dispatch (self, &batch [k]);
        sb_msg_destroy (&batch [k]);
        s_pull (self, batch, &n);
    }
}

/* ------------------------------------------------------------------ */

static void
s_self_destroy (self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    /* what is pending is committed, and the committer idle, before the
       registry writes its last word and the store closes */
    if (self->committer)
        sb_run_commit_wait (self);
    sb_run_workers_close (self);
    sb_run_kv_close (self);
    zhashx_destroy (&self->leases);
    sb_run_calls_destroy (&self->calls);
    sb_run_held_destroy (self);
    sb_forward_destroy (&self->fwd);
    sb_run_outbox_close (self);
    zhashx_destroy (&self->jobs);
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
    self->born_at = sb_now_ms ();
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "run");
    char dir [4200], err [512];
    const char *url = args->config ? args->config->store : NULL;
    if (sb_store_locate (url, args->data_dir, "run", dir, sizeof dir, err, sizeof err) == 0)
        self->store = sb_store_open (dir, s_dbis, 1, 0, err, sizeof err);
    else
        self->store = NULL;
    if (!self->store) {
        sb_error (ACTOR, "cannot open the run store: %s", err);
        s_self_destroy (&self);
        return NULL;
    }
    self->cluster = args->config ? args->config->cluster : NULL;
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    if (self->cluster)
        self->fwd = sb_forward_new (self->cluster, ACTOR, args->data_dir, self->instance, s_take_forwarded, self);
    self->enc = sb_enc_new ();
    self->leases = zhashx_new ();
    self->calls = sb_run_calls_new ();
    self->jobs = zhashx_new ();
    self->held = zlistx_new ();
    self->lease_ms = sb_actor_limit (ACTOR, 0, "SWITCHBOARD_LEASE_S", LEASE_MS / 1000, 6, 3600) * 1000;
    sb_run_commands_init (self);
    if (!self->bus || !self->enc || !self->leases || !self->calls || !self->jobs || !self->held) {
        s_self_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->leases, s_free_lease);
    zhashx_set_destructor (self->jobs, s_free_lease);
    /* the outbox numbering continues after the last entry */
    self->outbox_next = sb_outbox_last_stored (self->store, DBI_OUTBOX) + 1;
    /* acked starts at 0, refined by the drain at startup (sb_run_recover) */
    if (sb_run_outbox_open (self) || sb_run_kv_open (self)) {
        sb_error (ACTOR, "cannot start the run store's committer");
        s_self_destroy (&self);
        return NULL;
    }
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
    if (sb_run_workers_open (self, args)) {
        s_self_destroy (&self);
        sb_actor_signal (pipe, 1);
        return;
    }
    /* recovery before the server opens to clients (docs/architecture.md) */
    sb_run_recover (self);
    sb_actor_signal (pipe, 0);
    /* Leases and claims are checked every TICK_MS, so a lapsed lease is
       expired within lease + TICK_MS + one session.fence round trip
       (docs/workers.md); queued runs are retried every 4th tick. */
    self->next_tick = sb_mono_ms () + TICK_MS;
    unsigned ticks = 0;
    bool claims_due = false;
    while (!self->terminated) {
        /* The worker registry writes the store itself (actors/run/
           workers.c, inline), which it can only do while the committer
           holds no write transaction: the worker bus and the registry's
           tick wait for a turn in which no batch is in flight. */
        bool busy = sb_run_commit_busy (self);
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->wbus), 0, busy ? 0 : ZMQ_POLLIN, 0 },
            { NULL, sb_run_commit_fd (self), ZMQ_POLLIN, 0 },
        };
        int64_t wait = sb_bus_tick (self->bus);
        int64_t wwait = sb_bus_tick (self->wbus);
        if (wwait < wait)
            wait = wwait;
        int64_t tick = self->next_tick - sb_mono_ms ();
        if (tick < wait)
            wait = tick;
        if (sb_forward_wait (self->fwd) < wait)
            wait = sb_forward_wait (self->fwd);
        if (sb_bus_has_queued (self->bus) || (!busy && sb_bus_has_queued (self->wbus)) || wait < 0)
            wait = 0;
        if (zmq_poll (items, 4, (long) wait) < 0 && errno != EINTR)
            break;
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        /* a durable batch first: what waited for it goes out */
        sb_run_commit_ready (self);
        busy = sb_run_commit_busy (self);
        s_handle_bus (self);
        sb_forward_poll (self->fwd, self->bus);
        if (!busy)
            sb_run_handle_worker_bus (self);
        sb_run_calls_expire (self);
        bool ticked = sb_mono_ms () >= self->next_tick;
        if (ticked) {
            sb_run_shards_changed (self);
            sb_run_expire_leases (self);
            claims_due = true;
            sb_run_held_flush (self);
            if (++ticks % 4 == 0)
                sb_run_start_queued (self);
            sb_run_commands_sweep (self);
            self->next_tick = sb_mono_ms () + TICK_MS;
        }
        if (claims_due && !busy) {
            sb_run_claims_expire (self);
            claims_due = false;
        }
        /* everything this turn wrote goes to disk in one commit, off this
           thread; the next turn's writes gather meanwhile (group commit,
           actors/run/commit.c). Landed outbox deletes alone wait for a
           tick. */
        sb_run_commit_submit (self, ticked);
    }
    s_self_destroy (&self);
}

/*  actors/run/record.c — the run record: its encoding, its decoding, and
    the reads of DATA/run (records, the active index). */
#include "actors/run/run_impl.h"

void
sb_run_record_free (run_t *r)
{
    free (r->input);
    r->input = NULL;
}

void
sb_run_rewind_encode (const run_t *r, sb_enc_t *e)
{
    if (r->rewind_to) sb_enc_kuint (e, "rewind_to", r->rewind_to);
    if (r->undo) sb_enc_kbool (e, "undo", true);
    if (r->no_code) sb_enc_kbool (e, "code", false);
    if (r->no_conversation) sb_enc_kbool (e, "conversation", false);
}

void
sb_run_limits_encode (const run_t *r, sb_enc_t *e)
{
    sb_enc_key (e, "limits");
    sb_enc_map_open (e);
    sb_enc_kuint (e, "max_steps", r->max_steps);
    sb_enc_kuint (e, "timeout_s", r->timeout_s);
    if (r->max_output_tokens)
        sb_enc_kuint (e, "max_output_tokens", r->max_output_tokens);
    sb_enc_map_close (e);
}

void
sb_run_record_encode (const run_t *r, const lease_t *lease, sb_enc_t *e)
{
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_kstr (e, "session_id", r->session_id);
    sb_enc_kstr (e, "status", sb_run_status_name (r->status));
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
    if (r->kind [0]) sb_enc_kstr (e, "kind", r->kind);
    sb_run_rewind_encode (r, e);
    sb_enc_kuint (e, "fence", r->fence);
    if (r->owner [0]) sb_enc_kstr (e, "owner", r->owner);
    if (r->approval_policy [0]) sb_enc_kstr (e, "approval_policy", r->approval_policy);
    sb_run_limits_encode (r, e);
    sb_enc_kuint (e, "created_at", r->created_at);
    sb_enc_kuint (e, "updated_at", r->updated_at);
    if (r->started_at) sb_enc_kuint (e, "started_at", r->started_at);
    if (r->ended_at) sb_enc_kuint (e, "ended_at", r->ended_at);
    if (lease) sb_enc_kuint (e, "lease_expires_at", sb_now_ms () + (uint64_t) (lease->expires - sb_mono_ms ()));
    sb_enc_kuint (e, "steps", lease && lease->steps > r->steps ? lease->steps : r->steps);
    /* tokens no model call reported are unknown: absent, never 0 */
    if (r->tokens_known || (lease && lease->tokens_known)) {
        sb_enc_kuint (e, "input_tokens", lease && lease->input_tokens > r->input_tokens ? lease->input_tokens : r->input_tokens);
        sb_enc_kuint (e, "output_tokens", lease && lease->output_tokens > r->output_tokens ? lease->output_tokens : r->output_tokens);
    }
    if (r->cancel_requested) sb_enc_kbool (e, "cancel_requested", true);
    if (r->waiting_for [0] && r->status == SB_RUN_queued) sb_enc_kstr (e, "waiting_for", r->waiting_for);
    if (r->worker_id [0]) sb_enc_kstr (e, "worker_id", r->worker_id);
    if (r->instance_id [0]) sb_enc_kstr (e, "instance_id", r->instance_id);
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
    r->status = sb_run_status_from_name (sb_get_str (v, "status"));
    s_copy (r->phase, sizeof r->phase, sb_get_str (v, "phase"));
    s_copy (r->reason, sizeof r->reason, sb_get_str (v, "reason"));
    s_copy (r->resume_from, sizeof r->resume_from, sb_get_str (v, "resume_from"));
    s_copy (r->owner, sizeof r->owner, sb_get_str (v, "owner"));
    s_copy (r->approval_policy, sizeof r->approval_policy, sb_get_str (v, "approval_policy"));
    const sb_val_t *t = sb_get_map (v, "target");
    s_copy (r->executor, sizeof r->executor, sb_get_str (t, "executor"));
    s_copy (r->pool, sizeof r->pool, sb_get_str (t, "pool"));
    s_copy (r->waiting_for, sizeof r->waiting_for, sb_get_str (v, "waiting_for"));
    s_copy (r->worker_id, sizeof r->worker_id, sb_get_str (v, "worker_id"));
    s_copy (r->instance_id, sizeof r->instance_id, sb_get_str (v, "instance_id"));
    s_copy (r->kind, sizeof r->kind, sb_get_str (v, "kind"));
    r->rewind_to = sb_get_uint (v, "rewind_to", 0);
    r->undo = sb_get_bool (v, "undo", false);
    r->no_code = !sb_get_bool (v, "code", true);
    r->no_conversation = !sb_get_bool (v, "conversation", true);
    const char *input = sb_get_str (v, "input");
    r->input = input ? strdup (input) : NULL;
    r->fence = sb_get_uint (v, "fence", 0);
    r->created_at = sb_get_uint (v, "created_at", 0);
    r->updated_at = sb_get_uint (v, "updated_at", 0);
    r->started_at = sb_get_uint (v, "started_at", 0);
    r->ended_at = sb_get_uint (v, "ended_at", 0);
    r->steps = sb_get_uint (v, "steps", 0);
    r->input_tokens = sb_get_uint (v, "input_tokens", 0);
    r->tokens_known = sb_get (v, "input_tokens") != NULL;
    r->output_tokens = sb_get_uint (v, "output_tokens", 0);
    const sb_val_t *l = sb_get_map (v, "limits");
    r->max_steps = sb_get_uint (l, "max_steps", DEFAULT_MAX_STEPS);
    r->timeout_s = sb_get_uint (l, "timeout_s", DEFAULT_TIMEOUT_S);
    r->max_output_tokens = sb_get_uint (l, "max_output_tokens", 0);
    r->cancel_requested = sb_get_bool (v, "cancel_requested", false);
    sb_doc_destroy (&doc);
    if (r->status == SB_RUN__COUNT) {
        /* a status this build does not know: no transition could apply */
        sb_run_record_free (r);
        return -1;
    }
    return 0;
}

int
sb_run_record_load (self_t *self, const char *run_id, run_t *r)
{
    if (!run_id || strlen (run_id) > 32)
        return -1;
    sb_key_t k;
    sb_key_init (&k, 'R');
    sb_key_str (&k, run_id);
    uint8_t *v;
    size_t len;
    if (sb_run_kv_get (self, DBI_RUNS, k.buf, k.len, &v, &len))
        return -1;
    int rc = s_run_decode (v, len, r);
    free (v);
    return rc;
}

typedef struct {
    zlistx_t *ids;
    sb_cluster_t *cluster;
} active_t;

/*  'A' session_id NUL -> run_id: on a node of a cluster, only the runs of
    sessions of the shards it holds are its to start, claim or end. */
static void
s_add_id (const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    active_t *a = arg;
    const char *k = key;
    if (a->cluster) {
        char sid [64];
        if (klen < 2 || klen - 2 >= sizeof sid)
            return;
        memcpy (sid, k + 1, klen - 2);
        sid [klen - 2] = 0;
        if (!sb_cluster_holds (a->cluster, sid))
            return;
    }
    zlistx_add_end (a->ids, strndup (val, vlen));
}

/*  The ids of every unfinished run (one per session at most) of the
    sessions this node holds. The caller destroys the list, so later
    writes are free to change the table while the caller walks it. */
zlistx_t *
sb_run_active_ids (self_t *self)
{
    active_t a = { .ids = zlistx_new (), .cluster = self->cluster };
    if (!a.ids)
        return NULL;
    zlistx_set_destructor (a.ids, (czmq_destructor *) zstr_free);
    if (sb_run_kv_scan (self, DBI_ACTIVE, "A", 1, s_add_id, &a))
        zlistx_destroy (&a.ids);
    return a.ids;
}

int
sb_run_active_run (self_t *self, const char *session_id, char *out)
{
    sb_key_t k;
    sb_key_init (&k, 'A');
    sb_key_str (&k, session_id);
    uint8_t *v;
    size_t len;
    if (sb_run_kv_get (self, DBI_ACTIVE, k.buf, k.len, &v, &len))
        return -1;
    int rc = -1;
    if (len < 33) {
        memcpy (out, v, len);
        out [len] = 0;
        rc = 0;
    }
    free (v);
    return rc;
}

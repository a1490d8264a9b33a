/*  actors/run/commands.c — the run coordinator's remembered command_ids
    (docs/sessions.md, "Idempotency"; store/cmdid.h).

    run.request and run.resume remember the run they made under (session,
    command_id), with their type and the digest of their body: a
    command_id names one request within its session, so an id used on
    another session is another command, and an id reused in the same
    session for another request is `conflict`, never the run that the
    first one made. The reply remembered is the run's id. Keys of the
    older global layout ('C' command_id) hold one string, never two, so
    they are never found.

    An id is remembered for SWITCHBOARD_COMMAND_TTL_S (24 h), as the
    session actor's are: past its `expires` it is not found (the request
    is carried out again), and the sweep deletes it. The expiry rows live
    in DBI_COMMANDS with the commands (their tag, 'E', tells them apart). The
    actor's writes go through its pending table (run/commit.c), so the
    rows are built and judged here and written with sb_run_kv_put. */
#include "actors/run/run_impl.h"
#include "store/cmdid.h"

#define SWEEP_MS        60000       /* at most this between two sweeps */
#define SWEEP_MAX       1000        /* rows deleted by one sweep */

static void
s_command_key (sb_key_t *k, const char *session_id, const char *cmd)
{
    sb_cmdid_key (k, &session_id, 1, cmd);
}

static void
s_next_sweep (self_t *self)
{
    self->next_sweep = sb_mono_ms () + (int64_t) (self->command_ttl_ms < SWEEP_MS ? self->command_ttl_ms : SWEEP_MS);
}

void
sb_run_commands_init (self_t *self)
{
    self->command_ttl_ms = sb_cmdid_ttl_ms (ACTOR);
    s_next_sweep (self);
}

int
sb_run_command_find (self_t *self, const sb_msg_t *msg, const char *session_id, run_t *r)
{
    const char *cmd = sb_get_str (msg->body, "command_id");
    if (!cmd)
        return 0;
    uint8_t digest [SB_DIGEST_LEN];
    if (sb_cmdid_digest_body (msg->body, digest) != 0) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return -1;
    }
    sb_key_t k;
    s_command_key (&k, session_id, cmd);
    uint8_t *v;
    size_t vlen;
    if (!sb_key_valid (&k) || sb_run_kv_get (self, DBI_COMMANDS, k.buf, k.len, &v, &vlen) != 0)
        return 0;
    sb_cmdid_found_t f;
    sb_cmdid_verdict_t verdict = sb_cmdid_judge (v, vlen, msg->h.type, digest, sb_now_ms (), &f);
    free (v);
    char run_id [33] = "";
    if (verdict == SB_CMDID_REPLAY)
        snprintf (run_id, sizeof run_id, "%.*s", (int) f.reply_len, (const char *) f.reply);
    sb_cmdid_found_done (&f);
    if (verdict == SB_CMDID_NEW)
        return 0;
    if (verdict != SB_CMDID_REPLAY) {
        sb_bus_error (self->bus, msg, SB_E_conflict,
                      "command_id %s was already used for another %s request on session %s; "
                      "a retry must repeat the request unchanged", cmd, f.type, session_id);
        return -1;
    }
    return run_id [0] && sb_run_record_load (self, run_id, r) == 0 ? 1 : 0;
}

void
sb_run_command_remember (self_t *self, const sb_msg_t *msg, const run_t *r)
{
    const char *cmd = sb_get_str (msg->body, "command_id");
    uint8_t digest [SB_DIGEST_LEN];
    if (!cmd || sb_cmdid_digest_body (msg->body, digest) != 0)
        return;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    uint64_t expires = sb_now_ms () + self->command_ttl_ms;
    sb_cmdid_encode (e, msg->h.type, digest, r->run_id, strlen (r->run_id), expires);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_key_t k, x;
    s_command_key (&k, r->session_id, cmd);
    sb_cmdid_expiry_key (&x, expires, &k);
    if (sb_key_valid (&k) && sb_key_valid (&x)) {
        self->kv_shards = sb_cluster_shard_bit (r->session_id);
        sb_run_kv_put (self, DBI_COMMANDS, k.buf, k.len, data, len);
        sb_run_kv_put (self, DBI_COMMANDS, x.buf, x.len, NULL, 0);
        self->kv_shards = 0;
    }
    sb_enc_destroy (&e);
}

/*  Rows written before the expiry rows: the commands of the older global
    layout, and those of builds that kept the run id without an expiry
    row. No expiry row leads the sweep to them, so the first sweeps after
    startup scan the commands themselves, as the actor used to, deleting
    those past their `expires` (or with none), at most SWEEP_MAX a sweep,
    until a scan finds none left. */
typedef struct {
    uint64_t now;
    zlistx_t *keys;             /* zchunk_t of the expired rows' keys */
} legacy_t;

static void
s_legacy_one (const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    legacy_t *l = arg;
    if (zlistx_size (l->keys) >= SWEEP_MAX)
        return;
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (val, vlen, NULL, 0, &err);
    uint64_t expires = doc ? sb_get_uint (sb_doc_root (doc), "expires", 0) : 0;
    sb_doc_destroy (&doc);
    if (expires <= l->now)
        zlistx_add_end (l->keys, zchunk_new (key, klen));
}

static void
s_chunk_free (void **item)
{
    zchunk_destroy ((zchunk_t **) item);
}

static size_t
s_sweep_legacy (self_t *self)
{
    legacy_t l = { .now = sb_now_ms (), .keys = zlistx_new () };
    if (!l.keys)
        return 0;
    zlistx_set_destructor (l.keys, s_chunk_free);
    sb_key_t p;
    sb_key_init (&p, 'C');
    if (sb_run_kv_scan (self, DBI_COMMANDS, p.buf, p.len, s_legacy_one, &l) == 0 && !zlistx_size (l.keys))
        self->legacy_swept = true;
    for (zchunk_t *c = zlistx_first (l.keys); c; c = zlistx_next (l.keys))
        sb_run_kv_del (self, DBI_COMMANDS, zchunk_data (c), zchunk_size (c), false);
    size_t n = zlistx_size (l.keys);
    zlistx_destroy (&l.keys);
    return n;
}

/*  One expired row, found in a read txn: its deletes join the open batch
    (not urgent: nothing acknowledged waits for them). */
static void
s_sweep_one (const sb_key_t *ckey, const sb_datum_t *ekey, void *arg)
{
    self_t *self = arg;
    if (sb_key_valid (ckey))
        sb_run_kv_del (self, DBI_COMMANDS, ckey->buf, ckey->len, false);
    sb_run_kv_del (self, DBI_COMMANDS, ekey->data, ekey->size, false);
}

void
sb_run_commands_sweep (self_t *self)
{
    if (sb_mono_ms () < self->next_sweep)
        return;
    s_next_sweep (self);
    /* the committed rows only: a pending one was written within the
       last commit, long before it expires, and the next sweep finds it */
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0)
        return;
    uint64_t next;
    size_t n = sb_cmdid_expired (&txn, DBI_COMMANDS, sb_now_ms (), SWEEP_MAX, &next, s_sweep_one, self);
    sb_txn_abort (&txn);
    if (!self->legacy_swept)
        n += s_sweep_legacy (self);
    if (n)
        sb_info (ACTOR, "forgot %zu expired command_ids", n);
}

/*  actors/run/commands.c — the run coordinator's remembered command_ids
    (docs/sessions.md, "Idempotency").

    run.request and run.resume remember the run they made under (session,
    command_id), with their type and the digest of their body: a
    command_id names one request within its session, so an id used on
    another session is another command, and an id reused in the same
    session for another request is `conflict`, never the run that the
    first one made. Keys of the older global layout ('C' command_id) hold
    one string, never two, so they are never found.

    An id is remembered for SWITCHBOARD_COMMAND_TTL_S (24 h), as the
    session actor's are: past its `expires` it is not found (the request
    is carried out again), and the sweep deletes it, with the rows of the
    older layout, which have no `expires`. */
#include "actors/run/run_impl.h"
#include "common/digest.h"

#define COMMAND_TTL_S   86400
#define SWEEP_MS        60000       /* at most this between two sweeps */
#define SWEEP_MAX       1000        /* rows deleted by one sweep */

static void
s_command_key (sb_key_t *k, const char *session_id, const char *cmd)
{
    sb_key_init (k, 'C');
    sb_key_str (k, session_id);
    sb_key_str (k, cmd);
}

/*  The digest of the body (common/digest.h); false when out of memory. */
static bool
s_command_digest (const sb_msg_t *msg, uint8_t out [SB_DIGEST_LEN])
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return false;
    sb_enc_val (e, msg->body);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    int rc = sb_digest_of (data, len, out);
    sb_enc_destroy (&e);
    return rc == 0;
}

void
sb_run_commands_init (self_t *self)
{
    self->command_ttl_ms = sb_actor_limit (ACTOR, 0, "SWITCHBOARD_COMMAND_TTL_S", COMMAND_TTL_S, 1,
                                           365 * 86400) * 1000;
    self->next_sweep = sb_mono_ms () + (int64_t) (self->command_ttl_ms < SWEEP_MS ? self->command_ttl_ms : SWEEP_MS);
}

int
sb_run_command_find (self_t *self, const sb_msg_t *msg, const char *session_id, run_t *r)
{
    const char *cmd = sb_get_str (msg->body, "command_id");
    if (!cmd)
        return 0;
    uint8_t digest [SB_DIGEST_LEN];
    if (!s_command_digest (msg, digest)) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return -1;
    }
    sb_key_t k;
    s_command_key (&k, session_id, cmd);
    uint8_t *v;
    size_t vlen;
    if (!sb_key_valid (&k))
        return 0;
    char run_id [33] = "", type [65] = "";
    bool same = false;
    if (sb_run_kv_get (self, DBI_COMMANDS, k.buf, k.len, &v, &vlen) == 0) {
        sb_verr_t err;
        sb_doc_t *doc = sb_decode (v, vlen, NULL, 0, &err);
        const sb_val_t *m = sb_doc_root (doc);
        size_t dlen = 0;
        const char *d = sb_get_bin (m, "digest", &dlen);
        //  past its time (or of a build that kept it for ever): forgotten
        if (sb_get_uint (m, "expires", 0) > sb_now_ms ()) {
            s_copy (run_id, sizeof run_id, sb_get_str (m, "run_id"));
            s_copy (type, sizeof type, sb_get_str (m, "type"));
        }
        same = d && dlen == SB_DIGEST_LEN && memcmp (d, digest, dlen) == 0
            && strcmp (type, msg->h.type) == 0;
        sb_doc_destroy (&doc);
        free (v);
    }
    if (!run_id [0])
        return 0;
    if (!same) {
        sb_bus_error (self->bus, msg, SB_E_conflict,
                      "command_id %s was already used for another %s request on session %s; "
                      "a retry must repeat the request unchanged", cmd, type, session_id);
        return -1;
    }
    return sb_run_record_load (self, run_id, r) == 0 ? 1 : 0;
}

void
sb_run_command_remember (self_t *self, const sb_msg_t *msg, const run_t *r)
{
    const char *cmd = sb_get_str (msg->body, "command_id");
    uint8_t digest [SB_DIGEST_LEN];
    if (!cmd || !s_command_digest (msg, digest))
        return;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "type", msg->h.type);
    sb_enc_key (e, "digest");
    sb_enc_bin (e, digest, sizeof digest);
    sb_enc_kstr (e, "run_id", r->run_id);
    sb_enc_kuint (e, "expires", sb_now_ms () + self->command_ttl_ms);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_key_t k;
    s_command_key (&k, r->session_id, cmd);
    if (sb_key_valid (&k))
        sb_run_kv_put (self, DBI_COMMANDS, k.buf, k.len, data, len);
    sb_enc_destroy (&e);
}

typedef struct {
    uint64_t now;
    zlistx_t *keys;             /* zchunk_t of the expired rows' keys */
} sweep_t;

static void
s_sweep_one (const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    sweep_t *s = arg;
    if (zlistx_size (s->keys) >= SWEEP_MAX)
        return;
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (val, vlen, NULL, 0, &err);
    uint64_t expires = doc ? sb_get_uint (sb_doc_root (doc), "expires", 0) : 0;
    sb_doc_destroy (&doc);
    if (expires <= s->now)
        zlistx_add_end (s->keys, zchunk_new (key, klen));
}

static void
s_chunk_free (void **item)
{
    zchunk_destroy ((zchunk_t **) item);
}

void
sb_run_commands_sweep (self_t *self)
{
    if (sb_mono_ms () < self->next_sweep)
        return;
    self->next_sweep = sb_mono_ms () + (int64_t) (self->command_ttl_ms < SWEEP_MS ? self->command_ttl_ms : SWEEP_MS);
    sweep_t s = { .now = sb_now_ms (), .keys = zlistx_new () };
    if (!s.keys)
        return;
    zlistx_set_destructor (s.keys, s_chunk_free);
    sb_key_t p;
    sb_key_init (&p, 'C');
    sb_run_kv_scan (self, DBI_COMMANDS, p.buf, p.len, s_sweep_one, &s);
    for (zchunk_t *c = zlistx_first (s.keys); c; c = zlistx_next (s.keys))
        sb_run_kv_del (self, DBI_COMMANDS, zchunk_data (c), zchunk_size (c), false);
    if (zlistx_size (s.keys))
        sb_info (ACTOR, "forgot %zu expired command_ids", zlistx_size (s.keys));
    zlistx_destroy (&s.keys);
}

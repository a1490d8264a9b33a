/*  actors/session/store.c — the layout of DATA/session.

    One dbi per table; keys built with sb_key_* (a tag byte, then
    NUL-terminated strings and big-endian integers); values msgpack:
      sessions  'S' sid                -> session record
      tape      'T' sid seq            -> the entry as published: {session_id,
                                          seq, ts, run_id?, kind, body}
      status    'I' status sid         -> "" (list by status)
      commands  'C' sid from command_id -> {type, expires, digest, reply}
                                          (idempotency, scoped:
                                          store/cmdid.h)
      expiry    'E' expires sid from command_id -> "" (sweeping them)
      purge     'P' sid                -> "" (a deleted session's tape still
                                          being removed, in chunks)
    A tape entry is stored exactly as it is published, session_id and all,
    so that replay and publishing copy bytes instead of re-encoding them.
    The record carries last_seq, updated in the same transaction as the
    entries, so a restart needs no scan of the tape.

    Records are read into the drain's cache and written back once, at the
    end of the drain's transaction. docs/sessions.md has the details. */
#include "actors/session/session_impl.h"
#include "schemas/types.h"

#include <errno.h>
#include <string.h>

//  --------------------------------------------------------------------------
//  Records

void
sb_session_record_encode (sb_enc_t *enc, const record_t *r)
{
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", r->session_id);
    sb_enc_kuint (enc, "created_at", r->created_at);
    sb_enc_kuint (enc, "updated_at", r->updated_at);
    sb_enc_kstr (enc, "status", r->status);
    sb_enc_kstr_opt (enc, "title", r->title);
    sb_enc_kstr (enc, "workspace", r->workspace);
    sb_enc_kstr_opt (enc, "provider", r->provider);
    sb_enc_kstr_opt (enc, "model", r->model);
    sb_enc_kstr_opt (enc, "approval_policy", r->approval_policy);
    sb_enc_kstr_opt (enc, "target", r->target);
    if (r->max_steps)
        sb_enc_kuint (enc, "max_steps", r->max_steps);
    if (r->labels)
        sb_enc_kval (enc, "labels", r->labels);
    if (r->rules)
        sb_enc_kval (enc, "rules", r->rules);
    if (r->has_deadline)
        sb_enc_kuint (enc, "approval_deadline_s", r->approval_deadline_s);
    if (r->mcp_servers)
        sb_enc_kval (enc, "mcp_servers", r->mcp_servers);
    if (r->network)
        sb_enc_kbool (enc, "network", true);
    if (r->mcp_sampling)
        sb_enc_kbool (enc, "mcp_sampling", true);
    sb_session_budget_encode (enc, r);
    sb_enc_kstr_opt (enc, "budget_notice", r->budget_notice);
    sb_enc_kuint (enc, "last_seq", r->last_seq);
    sb_enc_kstr_opt (enc, "last_run_id", r->last_run_id);
    sb_enc_kstr (enc, "turn_status", r->turn_status);
    if (r->last_activity_at)
        sb_enc_kuint (enc, "last_activity_at", r->last_activity_at);
    sb_enc_kstr_opt (enc, "last_prompt", r->last_prompt);
    sb_enc_kuint (enc, "config_version", r->config_version);
    if (r->fence)
        sb_enc_kuint (enc, "fence", r->fence);
    sb_enc_kuint (enc, "tape_bytes", r->tape_bytes);
    if (r->quota_noted)
        sb_enc_kuint (enc, "quota_noted", r->quota_noted);
    if (r->compacted_seq)
        sb_enc_kuint (enc, "compacted_seq", r->compacted_seq);
    if (r->forked_sid) {
        sb_enc_key (enc, "forked_from");
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "session_id", r->forked_sid);
        sb_enc_kuint (enc, "seq", r->forked_seq);
        sb_enc_map_close (enc);
    }
    if (r->ncuts) {
        sb_enc_key (enc, "context_cuts");
        sb_enc_array_open (enc);
        for (uint32_t k = 0; k < r->ncuts; k++) {
            sb_enc_map_open (enc);
            sb_enc_kuint (enc, "after", r->cut_after [k]);
            sb_enc_kuint (enc, "before", r->cut_before [k]);
            sb_enc_map_close (enc);
        }
        sb_enc_array_close (enc);
    }
    sb_enc_map_close (enc);
}

//  The stored record of session `sid`, as LMDB holds it: true with *v set,
//  else false with req failed (not_found) or with the txn's sticky error
//  set. Every request that names a session loads it here, so that a
//  missing one is refused alike everywhere.
bool
sb_session_record_load (sb_txn_t *txn, req_t *req, const char *sid, sb_datum_t *v)
{
    sb_key_t k;
    s_key_session (&k, sid);
    int rc = sb_txn_get (txn, DBI_SESSIONS, k.buf, k.len, v);
    if (rc == SB_STORE_NOTFOUND)
        sb_session_fail (req, SB_E_not_found, "no session %s", sid);
    return rc == 0;
}

//  The drain's copy of session `sid`: from the cache, else from the store.
//  NULL with req failed (not_found, or internal for a record that does not
//  decode) or with the txn's sticky error set.
record_t *
sb_session_record_get (self_t *self, sb_txn_t *txn, req_t *req, const char *sid)
{
    record_t *r = zhashx_lookup (self->rec_index, sid);
    if (r) {
        if (r->deleted)
            sb_session_fail (req, SB_E_not_found, "no session %s", sid);
        return r->deleted? NULL: r;
    }
    sb_datum_t v;
    if (!sb_session_record_load (txn, req, sid, &v))
        return NULL;
    sb_verr_t verr = { .code = SB_OK };
    sb_doc_t *doc = sb_decode (v.data, v.size, sb_session_record_fields, 0, &verr);
    r = sb_session_alloc (self, sizeof *r);
    if (!doc || !r || !sb_session_reserve ((void **) &self->recs, &self->recs_cap, self->nrecs, sizeof r)) {
        sb_doc_destroy (&doc);
        sb_error (ACTOR, "unreadable session record session=%s error=\"%s\"",
                  sid, verr.message);
        sb_session_fail (req, SB_E_internal, "the record of session %s cannot be read", sid);
        return NULL;
    }
    const sb_val_t *m = sb_doc_root (doc);
    *r = (record_t) {
        .doc = doc,
        .session_id = sb_get_str (m, "session_id"),
        .status = sb_get_str (m, "status"),
        .title = sb_get_str (m, "title"),
        .workspace = sb_get_str (m, "workspace"),
        .provider = sb_get_str (m, "provider"),
        .model = sb_get_str (m, "model"),
        .approval_policy = sb_get_str (m, "approval_policy"),
        .target = sb_get_str (m, "target"),
        .last_run_id = sb_get_str (m, "last_run_id"),
        .turn_status = sb_get_str (m, "turn_status"),
        .last_prompt = sb_get_str (m, "last_prompt"),
        .labels = sb_get_map (m, "labels"),
        .rules = sb_get_array (m, "rules"),
        .approval_deadline_s = sb_get_uint (m, "approval_deadline_s", 0),
        .has_deadline = sb_get (m, "approval_deadline_s") != NULL,
        .mcp_servers = sb_get_array (m, "mcp_servers"),
        .network = sb_get_bool (m, "network", false),
        .mcp_sampling = sb_get_bool (m, "mcp_sampling", false),
        .created_at = sb_get_uint (m, "created_at", 0),
        .updated_at = sb_get_uint (m, "updated_at", 0),
        .max_steps = sb_get_uint (m, "max_steps", 0),
        .last_seq = sb_get_uint (m, "last_seq", 0),
        .config_version = sb_get_uint (m, "config_version", 0),
        .fence = sb_get_uint (m, "fence", 0),
        .last_activity_at = sb_get_uint (m, "last_activity_at", 0),
        .tape_bytes = sb_get_uint (m, "tape_bytes", 0),
        .quota_noted = sb_get_uint (m, "quota_noted", 0),
        .compacted_seq = sb_get_uint (m, "compacted_seq", 0),
        .forked_sid = sb_get_str (sb_get_map (m, "forked_from"), "session_id"),
        .forked_seq = sb_get_uint (sb_get_map (m, "forked_from"), "seq", 0),
        .budget_notice = sb_get_str (m, "budget_notice"),
    };
    sb_session_budget_take (r, sb_get_map (m, "budget"));
    const sb_val_t *cuts = sb_get_array (m, "context_cuts");
    for (uint32_t k = 0; cuts && k < cuts->len && r->ncuts < SB_SESSION_CUTS_MAX; k++) {
        const sb_val_t *c = sb_array_at (cuts, k);
        r->cut_after [r->ncuts] = sb_get_uint (c, "after", 0);
        r->cut_before [r->ncuts++] = sb_get_uint (c, "before", 0);
    }
    self->recs [self->nrecs++] = r;
    zhashx_insert (self->rec_index, r->session_id, r);
    return r;
}

record_t *
sb_session_record_new (self_t *self, const char *sid)
{
    record_t *r = sb_session_alloc (self, sizeof *r);
    if (!r || !sb_session_reserve ((void **) &self->recs, &self->recs_cap, self->nrecs, sizeof r))
        return NULL;
    *r = (record_t) { .session_id = sid, .dirty = true };
    self->recs [self->nrecs++] = r;
    zhashx_insert (self->rec_index, sid, r);
    return r;
}

void
sb_session_cache_reset (self_t *self)
{
    for (size_t k = 0; k < self->nrecs; k++)
        sb_doc_destroy (&self->recs [k]->doc);
    self->nrecs = 0;
    if (self->rec_index)
        zhashx_purge (self->rec_index);
}

//  Writes every record the drain changed, once each.
void
sb_session_cache_flush (self_t *self, sb_txn_t *txn)
{
    for (size_t k = 0; k < self->nrecs && txn->ret == 0; k++) {
        record_t *r = self->recs [k];
        if (!r->dirty || r->deleted)
            continue;
        sb_enc_reset (self->scratch);
        sb_session_record_encode (self->scratch, r);
        size_t len;
        const uint8_t *data = sb_enc_data (self->scratch, &len);
        sb_key_t key;
        s_key_session (&key, r->session_id);
        sb_txn_put (txn, DBI_SESSIONS, key.buf, key.len, data, len);
    }
}

//  --------------------------------------------------------------------------
//  The tape

//  Writes entry `seq` of r's tape. The bytes stored are the bytes later
//  published and replayed.
void
sb_session_tape_put (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, uint64_t seq,
                     const char *kind, const uint8_t *body, size_t body_len)
{
    size_t off;
    sb_enc_data (self->tape, &off);
    sb_enc_map_open (self->tape);
    sb_enc_kstr (self->tape, "session_id", r->session_id);
    sb_enc_kuint (self->tape, "seq", seq);
    sb_enc_kuint (self->tape, "ts", self->now);
    sb_enc_kstr_opt (self->tape, "run_id", req->run_id);
    sb_enc_kstr (self->tape, "kind", kind);
    sb_enc_key (self->tape, "body");
    sb_enc_raw (self->tape, body, body_len);
    sb_enc_map_close (self->tape);
    sb_session_tape_put_raw (self, txn, req, r, seq, off);
}

int
sb_session_tape_put_raw (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, uint64_t seq, size_t off)
{
    size_t end;
    const uint8_t *data = sb_enc_data (self->tape, &end);

    sb_key_t key;
    s_key_tape (&key, r->session_id, seq, true);
    int rc = sb_txn_insert (txn, DBI_TAPE, key.buf, key.len, data + off, end - off);
    if (rc == SB_STORE_EXISTS) {
        //  The record's last_seq is behind its tape: never acknowledge an
        //  entry on top of one we cannot account for.
        sb_error (ACTOR, "tape entry already exists session=%s seq=%llu; refusing the drain",
                  r->session_id, (unsigned long long) seq);
        txn->ret = SB_STORE_ORDER;
        return -1;
    }
    if (rc != 0)
        return -1;
    if (!sb_session_reserve ((void **) &self->pubs, &self->pubs_cap, self->npubs, sizeof (pub_t))) {
        txn->ret = -ENOMEM;
        return -1;
    }
    self->pubs [self->npubs++] = (pub_t) { r->session_id, off, end - off };
    req->npubs++;
    if (!req->first_seq)
        req->first_seq = seq;
    req->last_seq = seq;
    r->dirty = true;
    return 0;
}

//  Appends a session.created / session.updated entry carrying the record
//  as it is after the change (its last_seq included).
void
sb_session_tape_put_record (self_t *self, sb_txn_t *txn, req_t *req, record_t *r,
                            const char *kind, const char *const *changed, size_t nchanged)
{
    uint64_t seq = ++r->last_seq;
    sb_enc_reset (self->scratch);
    sb_enc_map_open (self->scratch);
    sb_enc_key (self->scratch, "session");
    sb_session_record_encode (self->scratch, r);
    if (nchanged) {
        sb_enc_key (self->scratch, "changed");
        sb_enc_array_open (self->scratch);
        for (size_t k = 0; k < nchanged; k++)
            sb_enc_str (self->scratch, changed [k]);
        sb_enc_array_close (self->scratch);
    }
    sb_enc_map_close (self->scratch);
    size_t len;
    const uint8_t *body = sb_enc_data (self->scratch, &len);
    if (strcmp (kind, "session.updated") == 0)
        r->tape_bytes += len;       /* updates count against the quota */
    sb_session_tape_put (self, txn, req, r, seq, kind, body, len);
}

//  Removes up to `max` entries of sid's tape; returns how many, and sets
//  *done when none remain.
size_t
sb_session_tape_purge (sb_txn_t *txn, const char *sid, size_t max, bool *done)
{
    sb_key_t prefix;
    s_key_tape (&prefix, sid, 0, false);
    sb_txn_iter_t it;
    size_t n = 0;
    *done = false;
    if (sb_txn_iter_begin (txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0) != 0)
        return 0;
    sb_datum_t k, v;
    while (true) {
        if (n == max) {
            sb_txn_iter_end (&it);
            return n;
        }
        if (!sb_txn_iter_next (&it, &k, &v))
            break;
        if (sb_txn_iter_del (&it) != 0) {
            sb_txn_iter_end (&it);
            return n;
        }
        n++;
    }
    *done = txn->ret == 0;
    return n;
}

//  --------------------------------------------------------------------------
//  Idempotency

static void
s_reply_put (self_t *self, req_t *req, const uint8_t *data, size_t len)
{
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_raw (self->replies, data, len);
    req->reply_len = len;
}

//  Where req's command_id is remembered: in its scope (session_impl.h).
static void
s_command_key (sb_key_t *k, const req_t *req)
{
    const char *scope [] = { req->cmd_sid, req->cmd_from };
    sb_cmdid_key (k, scope, 2, req->cmd);
}

//  True when req is answered by a command_id remembered from before in
//  its scope: its first reply when the request is the same (its type and
//  the digest of its body), else `conflict`, never another request's
//  reply (store/cmdid.h).
bool
sb_session_command_replay (self_t *self, sb_txn_t *txn, req_t *req)
{
    sb_key_t k;
    s_command_key (&k, req);
    sb_cmdid_found_t f;
    sb_cmdid_verdict_t verdict = sb_cmdid_find (txn, DBI_COMMANDS, DBI_EXPIRY, &k, req->msg->h.type,
                                                req->cmd_digest, self->now, &f);
    if (f.unreadable)
        sb_warn (ACTOR, "unreadable remembered command command_id=%s; treating it as new", req->cmd);
    if (verdict == SB_CMDID_OTHER_TYPE)
        sb_session_fail (req, SB_E_conflict, "command_id %s was already used for a %s request",
                         req->cmd, f.type);
    else
    if (verdict == SB_CMDID_OTHER_BODY)
        sb_session_fail (req, SB_E_conflict, "command_id %s was already used for another %s request; "
                         "a retry must repeat the request unchanged", req->cmd, f.type);
    else
    if (verdict == SB_CMDID_REPLAY) {
        s_reply_put (self, req, f.reply, f.reply_len);
        req->replayed = true;
    }
    sb_cmdid_found_done (&f);
    return verdict != SB_CMDID_NEW;
}

void
sb_session_command_remember (self_t *self, sb_txn_t *txn, req_t *req)
{
    uint64_t expires = self->now + self->command_ttl_ms;
    size_t len;
    const uint8_t *replies = sb_enc_data (self->replies, &len);
    sb_key_t k;
    s_command_key (&k, req);
    sb_cmdid_remember (txn, DBI_COMMANDS, DBI_EXPIRY, &k, req->msg->h.type, req->cmd_digest,
                       replies + req->reply_off, req->reply_len, expires, self->scratch);
    if (!self->drain_min_expiry || expires < self->drain_min_expiry)
        self->drain_min_expiry = expires;
}

//  --------------------------------------------------------------------------
//  Housekeeping: expired command ids, deleted tapes

typedef struct {
    uint64_t now;
    size_t removed;
    uint64_t next;              //  the earliest expiry left; 0: none
} sweep_t;

static int
s_sweep_fn (sb_txn_t *txn, void *arg)
{
    sweep_t *sw = (sweep_t *) arg;
    sw->removed = sb_cmdid_sweep (txn, DBI_COMMANDS, DBI_EXPIRY, sw->now, SWEEP_CHUNK, &sw->next);
    return 0;
}

void
sb_session_sweep (self_t *self)
{
    sweep_t sw = { .now = sb_now_ms () };
    int rc = sb_store_write (self->store, s_sweep_fn, &sw);
    if (rc != 0) {
        sb_warn (ACTOR, "cannot sweep expired command ids error=\"%s\"", sb_store_strerror (rc));
        self->next_expiry = sw.now + 60 * 1000;
        return;
    }
    self->next_expiry = sw.next;
    if (sw.removed)
        sb_debug (ACTOR, "forgot expired command ids count=%zu", sw.removed);
}

typedef struct {
    char sid [SB_ULID_LEN + 1];
    size_t removed;
    bool more;                  //  another tape waits after this one
} purge_t;

static int
s_purge_fn (sb_txn_t *txn, void *arg)
{
    purge_t *p = (purge_t *) arg;
    p->removed = 0;
    p->more = false;
    p->sid [0] = 0;
    sb_key_t prefix;
    sb_key_init (&prefix, 'P');
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, DBI_PURGE, prefix.buf, prefix.len, NULL, 0);
    sb_datum_t k, v;
    if (!sb_txn_iter_next (&it, &k, &v))
        return 0;
    snprintf (p->sid, sizeof p->sid, "%.*s", (int) (k.size - 2), (const char *) k.data + 1);
    bool done;
    p->removed = sb_session_tape_purge (txn, p->sid, PURGE_CHUNK, &done);
    if (done)
        sb_txn_iter_del (&it);
    p->more = !done || sb_txn_iter_next (&it, &k, &v);
    sb_txn_iter_end (&it);
    return 0;
}

void
sb_session_purge (self_t *self)
{
    purge_t p;
    int rc = sb_store_write (self->store, s_purge_fn, &p);
    if (rc != 0) {
        sb_warn (ACTOR, "cannot purge a deleted tape error=\"%s\"", sb_store_strerror (rc));
        self->purge_pending = false;    //  retried at the next delete or start
        return;
    }
    self->purge_pending = p.more;
    if (p.sid [0])
        sb_debug (ACTOR, "purged deleted tape session=%s entries=%zu", p.sid, p.removed);
}

//  Finds what startup must know without scanning the tape: the earliest
//  remembered command's expiry, and whether a deleted tape is half-purged.
void
sb_session_recover (self_t *self)
{
    sb_txn_t txn;
    sb_txn_begin (self->store, &txn, false);
    sb_key_t e, p;
    sb_key_init (&e, 'E');
    sb_key_init (&p, 'P');
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_txn_iter_begin (&txn, &it, DBI_EXPIRY, e.buf, e.len, NULL, 0);
    if (sb_txn_iter_next (&it, &k, &v)) {
        self->next_expiry = sb_key_read_u64 (&k, 1);
        sb_txn_iter_end (&it);
    }
    sb_txn_iter_begin (&txn, &it, DBI_PURGE, p.buf, p.len, NULL, 0);
    if (sb_txn_iter_next (&it, &k, &v)) {
        self->purge_pending = true;
        sb_txn_iter_end (&it);
    }
    sb_txn_commit (&txn);
}

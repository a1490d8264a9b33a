/*  actors/session.c — sessions and their tape, on LMDB (DESIGN.md 3, 4).

    The tape is the ordered, durable log of a session. This actor is its
    only writer: it assigns each entry the next seq, commits it, and only
    then acknowledges it and publishes it on `session/<id>`.

    Group commit. One poll wake-up drains every request waiting on the bus
    (within caps on messages, entries and bytes), checks what can be
    checked without the store, runs every write of the drain in ONE write
    transaction (sb_store_write), commits it durably, and only then sends
    the replies and publishes the events. Reads are answered afterwards
    from a read transaction, so they see the drain's writes. The write
    function may run more than once (the map grows and it starts over), so
    it sends nothing and consumes nothing: everything it produces lives in
    buffers that each run resets.

    The environment (docs/sessions.md), one dbi per table, keys built with
    sb_key_* (a tag byte, then NUL-terminated strings and big-endian
    integers), values msgpack:
      sessions  'S' sid                -> session record
      tape      'T' sid seq            -> the entry as published: {session_id,
                                          seq, ts, run_id?, kind, body}
      status    'I' status sid         -> "" (list by status)
      commands  'C' command_id         -> {type, expires, reply} (idempotency)
      expiry    'E' expires command_id -> "" (sweeping expired commands)
      purge     'P' sid                -> "" (a deleted session's tape still
                                          being removed, in chunks)
    A tape entry is stored exactly as it is published, session_id and all,
    so that replay and publishing copy bytes instead of re-encoding them.
    The record carries last_seq, updated in the same transaction as the
    entries, so a restart needs no scan of the tape.

    Memory. No session is kept in RAM between drains: LMDB's pages are the
    cache, and they are file-backed. The per-drain record cache is freed
    at the end of each drain. */
#include "actors/session.h"
#include "actors/actor.h"
#include "actors/store.h"
#include "bus/client.h"
#include "common/log.h"
#include "schemas/types.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ACTOR "session"

//  Caps on one drain. The entry cap also keeps a transaction far below
//  LMDB's dirty-page limit (MDB_TXN_FULL).
#define BATCH_MAX_MSGS      4096
#define BATCH_MAX_ENTRIES   16384
#define BATCH_MAX_BYTES     ((size_t) 64 << 20)
//  Tape entries removed per transaction when a session is deleted.
#define PURGE_CHUNK         10000
//  Expired command ids removed per transaction.
#define SWEEP_CHUNK         256
#define COMMAND_TTL_S       (24 * 3600)
#define MAX_STEPS_MAX       10000
#define LABEL_KEY_MAX       64
#define LABEL_VALUE_MAX     1024
//  A body's size limit when its kind declares none: session.append's.
#define ENTRY_BYTES_MAX     (8u << 20)
#define ARENA_CHUNK         (64 * 1024)
//  The longest a drain waits for more writes to share its commit.
#define GATHER_MAX_US       2000

enum { DBI_SESSIONS, DBI_TAPE, DBI_STATUS, DBI_COMMANDS, DBI_EXPIRY, DBI_PURGE };
static const char *const s_dbi_names [] = {
    "sessions", "tape", "status", "commands", "expiry", "purge", NULL
};

typedef enum {
    OP_CREATE, OP_GET, OP_LIST, OP_UPDATE, OP_CLOSE, OP_DELETE, OP_APPEND, OP_EVENTS, OP_FENCE
} op_t;

static const struct {
    const char *type;
    op_t op;
    bool write;
    bool addressed;             //  takes a session_id
} s_ops [] = {
    { "session.create", OP_CREATE, true,  false },
    { "session.get",    OP_GET,    false, true  },
    { "session.list",   OP_LIST,   false, false },
    { "session.update", OP_UPDATE, true,  true  },
    { "session.close",  OP_CLOSE,  true,  true  },
    { "session.delete", OP_DELETE, true,  true  },
    { "session.append", OP_APPEND, true,  true  },
    { "session.events", OP_EVENTS, false, true  },
    { "session.fence",  OP_FENCE,  true,  true  },
};
#define NOPS (sizeof s_ops / sizeof s_ops [0])

//  A bump allocator whose pointers stay put until it is reset: strings
//  and records that must live until the drain's replies are sent.
typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas (16) uint8_t data [];
} chunk_t;

//  A session record being worked on. Strings point into `doc` (read from
//  the store), into a request's body, or into the arena.
typedef struct {
    sb_doc_t *doc;
    const char *session_id, *status, *title, *workspace, *provider, *model;
    const char *approval_policy, *last_run_id, *turn_status;
    const sb_val_t *labels;
    uint64_t created_at, updated_at, max_steps, last_seq, config_version, fence;
    bool dirty, deleted;
} record_t;

//  One prepared tape entry of an append: its kind and its encoded body.
typedef struct {
    const char *kind;
    const sb_val_t *body;
    size_t off, len;            //  in self->prep
} span_t;

//  One committed entry to publish: its bytes in self->tape.
typedef struct {
    const char *sid;
    size_t off, len;
} pub_t;

typedef struct {
    sb_msg_t *msg;
    op_t op;
    bool write;
    const char *sid;            //  the session addressed (create: the new id)
    const char *cmd;            //  command_id, or NULL
    const char *workspace;      //  create/update: the realpath
    const char *run_id;
    uint64_t fence;
    bool has_fence;
    bool batch_form;
    size_t span0, nspans;
    //  Found before the transaction; the write function skips the request.
    sb_err_t prep_err;
    //  The outcome, recomputed by every run of the write function.
    sb_err_t err;
    char errmsg [256];
    size_t reply_off, reply_len;    //  in self->replies
    size_t pub0, npubs;
    uint64_t first_seq, last_seq;
    bool replayed;
    bool changed;
} req_t;

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_pub_t *pub;
    sb_store_t *store;
    char instance [129];
    bool terminated;
    uint64_t command_ttl_ms;

    //  The current drain
    uint64_t now;               //  its timestamp: every entry's ts
    req_t *reqs;
    size_t nreqs, reqs_cap;
    span_t *spans;
    size_t nspans, spans_cap;
    pub_t *pubs;
    size_t npubs, pubs_cap;
    record_t **recs;            //  the drain's record cache
    size_t nrecs, recs_cap;
    zhashx_t *rec_index;        //  session id -> record_t *
    chunk_t *arena;
    sb_enc_t *enc;              //  replies sent at once (reads)
    sb_enc_t *prep;             //  prepared entry bodies
    sb_enc_t *tape;             //  entries written by the drain, as stored
    sb_enc_t *replies;          //  reply bodies of the drain's writes
    sb_enc_t *scratch;          //  records and bodies on their way in
    size_t drain_writes;        //  write requests taken
    size_t drain_entries;       //  tape entries (or requests) taken
    size_t drain_bytes;         //  estimated bytes of the appends taken
    size_t last_writes;         //  write requests of the last drain that had any
    int64_t last_commit_us;     //  how long its commit took
    uint64_t drain_min_expiry;  //  earliest expiry remembered by the drain
    bool drain_purge;           //  the drain left a tape to purge

    //  Housekeeping
    uint64_t next_expiry;       //  earliest remembered command expiry; 0: none
    bool purge_pending;
    sb_ratelimit_t rl;
    uint64_t appended;          //  entries since start
    uint64_t commits;
} self_t;

//  --------------------------------------------------------------------------
//  Small helpers

static void *
s_alloc (self_t *self, size_t n)
{
    n = (n + 15) & ~(size_t) 15;
    chunk_t *c = self->arena;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK? n: ARENA_CHUNK;
        c = malloc (sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = self->arena;
        c->used = 0;
        c->cap = cap;
        self->arena = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static char *
s_strdup (self_t *self, const char *s)
{
    size_t n = strlen (s) + 1;
    char *p = s_alloc (self, n);
    if (p)
        memcpy (p, s, n);
    return p;
}

static void
s_arena_reset (self_t *self)
{
    //  Keep one ordinary chunk: most drains fit in it.
    while (self->arena && (self->arena->next || self->arena->cap != ARENA_CHUNK)) {
        chunk_t *next = self->arena->next;
        free (self->arena);
        self->arena = next;
    }
    if (self->arena)
        self->arena->used = 0;
}

//  Makes room for one more element in a growable array; false when out of
//  memory.
static bool
s_reserve (void **array, size_t *cap, size_t count, size_t elem)
{
    if (count < *cap)
        return true;
    size_t ncap = *cap? *cap * 2: 64;
    void *p = realloc (*array, ncap * elem);
    if (!p)
        return false;
    *array = p;
    *cap = ncap;
    return true;
}

static void
s_fail (req_t *req, sb_err_t code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_fail (req_t *req, sb_err_t code, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (req->errmsg, sizeof req->errmsg, fmt, ap);
    va_end (ap);
    req->err = code;
}

//  A body's encoded bytes: the sum of its strings and a little per value,
//  to bound what one drain holds.
static size_t
s_val_bytes (const sb_val_t *v)
{
    size_t n = 8;
    if (v->type == SB_V_STR || v->type == SB_V_BIN)
        n += v->len;
    else
    if (v->type == SB_V_ARRAY || v->type == SB_V_MAP) {
        size_t items = v->type == SB_V_MAP? 2 * (size_t) v->len: v->len;
        for (size_t k = 0; k < items; k++)
            n += s_val_bytes (&v->v.a [k]);
    }
    return n;
}

//  A string field, checked for embedded NUL bytes: a key built from it
//  must name exactly what the client sent.
static const char *
s_clean_str (const sb_val_t *body, const char *name, bool *bad)
{
    const sb_val_t *v = sb_get (body, name);
    if (!v || v->type != SB_V_STR)
        return NULL;
    if (strlen (v->v.s) != v->len)
        *bad = true;
    return v->v.s;
}

static void
s_key_session (sb_key_t *k, const char *sid)
{
    sb_key_init (k, 'S');
    sb_key_str (k, sid);
}

static void
s_key_tape (sb_key_t *k, const char *sid, uint64_t seq, bool with_seq)
{
    sb_key_init (k, 'T');
    sb_key_str (k, sid);
    if (with_seq)
        sb_key_u64 (k, seq);
}

static void
s_key_status (sb_key_t *k, const char *status, const char *sid)
{
    sb_key_init (k, 'I');
    sb_key_str (k, status);
    if (sid)
        sb_key_str (k, sid);
}

static void
s_key_command (sb_key_t *k, const char *cmd)
{
    sb_key_init (k, 'C');
    sb_key_str (k, cmd);
}

static void
s_key_expiry (sb_key_t *k, uint64_t at, const char *cmd)
{
    sb_key_init (k, 'E');
    sb_key_u64 (k, at);
    sb_key_str (k, cmd);
}

static void
s_key_purge (sb_key_t *k, const char *sid)
{
    sb_key_init (k, 'P');
    sb_key_str (k, sid);
}

//  --------------------------------------------------------------------------
//  Records

static void
s_record_encode (sb_enc_t *enc, const record_t *r)
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
    if (r->max_steps)
        sb_enc_kuint (enc, "max_steps", r->max_steps);
    if (r->labels)
        sb_enc_kval (enc, "labels", r->labels);
    sb_enc_kuint (enc, "last_seq", r->last_seq);
    sb_enc_kstr_opt (enc, "last_run_id", r->last_run_id);
    sb_enc_kstr (enc, "turn_status", r->turn_status);
    sb_enc_kuint (enc, "config_version", r->config_version);
    if (r->fence)
        sb_enc_kuint (enc, "fence", r->fence);
    sb_enc_map_close (enc);
}

static bool
s_record_closed (const record_t *r)
{
    return strcmp (r->status, "closed") == 0;
}

//  The drain's copy of session `sid`: from the cache, else from the store.
//  NULL with req failed (not_found, or internal for a record that does not
//  decode) or with the txn's sticky error set.
static record_t *
s_record_get (self_t *self, sb_txn_t *txn, req_t *req, const char *sid)
{
    record_t *r = zhashx_lookup (self->rec_index, sid);
    if (r) {
        if (r->deleted)
            s_fail (req, SB_E_not_found, "no session %s", sid);
        return r->deleted? NULL: r;
    }
    sb_key_t k;
    s_key_session (&k, sid);
    MDB_val v;
    int rc = sb_txn_get (txn, DBI_SESSIONS, k.buf, k.len, &v);
    if (rc == SB_STORE_NOTFOUND)
        s_fail (req, SB_E_not_found, "no session %s", sid);
    if (rc != 0)
        return NULL;
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (v.mv_data, v.mv_size, sb_session_record_fields, 0, &verr);
    r = s_alloc (self, sizeof *r);
    if (!doc || !r || !s_reserve ((void **) &self->recs, &self->recs_cap, self->nrecs, sizeof r)) {
        sb_doc_destroy (&doc);
        sb_error (ACTOR, "unreadable session record session=%s error=\"%s\"",
                  sid, verr.message);
        s_fail (req, SB_E_internal, "the record of session %s cannot be read", sid);
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
        .last_run_id = sb_get_str (m, "last_run_id"),
        .turn_status = sb_get_str (m, "turn_status"),
        .labels = sb_get_map (m, "labels"),
        .created_at = sb_get_uint (m, "created_at", 0),
        .updated_at = sb_get_uint (m, "updated_at", 0),
        .max_steps = sb_get_uint (m, "max_steps", 0),
        .last_seq = sb_get_uint (m, "last_seq", 0),
        .config_version = sb_get_uint (m, "config_version", 0),
        .fence = sb_get_uint (m, "fence", 0),
    };
    self->recs [self->nrecs++] = r;
    zhashx_insert (self->rec_index, r->session_id, r);
    return r;
}

static record_t *
s_record_new (self_t *self, const char *sid)
{
    record_t *r = s_alloc (self, sizeof *r);
    if (!r || !s_reserve ((void **) &self->recs, &self->recs_cap, self->nrecs, sizeof r))
        return NULL;
    *r = (record_t) { .session_id = sid, .dirty = true };
    self->recs [self->nrecs++] = r;
    zhashx_insert (self->rec_index, sid, r);
    return r;
}

static void
s_cache_reset (self_t *self)
{
    for (size_t k = 0; k < self->nrecs; k++)
        sb_doc_destroy (&self->recs [k]->doc);
    self->nrecs = 0;
    if (self->rec_index)
        zhashx_purge (self->rec_index);
}

//  Writes every record the drain changed, once each.
static void
s_cache_flush (self_t *self, sb_txn_t *txn)
{
    for (size_t k = 0; k < self->nrecs && txn->ret == 0; k++) {
        record_t *r = self->recs [k];
        if (!r->dirty || r->deleted)
            continue;
        sb_enc_reset (self->scratch);
        s_record_encode (self->scratch, r);
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
static void
s_tape_put (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, uint64_t seq,
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
        txn->ret = MDB_KEYEXIST;
        return;
    }
    if (rc != 0)
        return;
    if (!s_reserve ((void **) &self->pubs, &self->pubs_cap, self->npubs, sizeof (pub_t))) {
        txn->ret = -ENOMEM;
        return;
    }
    self->pubs [self->npubs++] = (pub_t) { r->session_id, off, end - off };
    req->npubs++;
    if (!req->first_seq)
        req->first_seq = seq;
    req->last_seq = seq;
    r->dirty = true;
}

//  Appends a session.created / session.updated entry carrying the record
//  as it is after the change (its last_seq included).
static void
s_tape_put_record (self_t *self, sb_txn_t *txn, req_t *req, record_t *r,
                   const char *kind, const char *const *changed, size_t nchanged)
{
    uint64_t seq = ++r->last_seq;
    sb_enc_reset (self->scratch);
    sb_enc_map_open (self->scratch);
    sb_enc_key (self->scratch, "session");
    s_record_encode (self->scratch, r);
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
    s_tape_put (self, txn, req, r, seq, kind, body, len);
}

//  Removes up to `max` entries of sid's tape; returns how many, and sets
//  *done when none remain.
static size_t
s_tape_purge (sb_txn_t *txn, const char *sid, size_t max, bool *done)
{
    sb_key_t prefix;
    s_key_tape (&prefix, sid, 0, false);
    sb_txn_iter_t it;
    size_t n = 0;
    *done = false;
    if (sb_txn_iter_begin (txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0) != 0)
        return 0;
    MDB_val k, v;
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

//  True when req is answered by a command_id remembered from before: its
//  first reply, or `conflict` when the id was used for another type.
static bool
s_command_replay (self_t *self, sb_txn_t *txn, req_t *req)
{
    sb_key_t k;
    s_key_command (&k, req->cmd);
    MDB_val v;
    if (sb_txn_get (txn, DBI_COMMANDS, k.buf, k.len, &v) != 0)
        return false;
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (v.mv_data, v.mv_size, NULL, 0, &verr);
    const sb_val_t *m = sb_doc_root (doc);
    const char *type = sb_get_str (m, "type");
    uint64_t expires = sb_get_uint (m, "expires", 0);
    size_t rlen = 0;
    const char *reply = sb_get_bin (m, "reply", &rlen);
    bool answered = false;
    if (!doc || !type || !reply)
        sb_warn (ACTOR, "unreadable remembered command command_id=%s; treating it as new", req->cmd);
    else
    if (expires <= self->now) {
        //  Expired but not yet swept: forget it now, and run the request.
        sb_key_t e;
        s_key_expiry (&e, expires, req->cmd);
        sb_txn_del (txn, DBI_EXPIRY, e.buf, e.len);
        sb_txn_del (txn, DBI_COMMANDS, k.buf, k.len);
    }
    else
    if (strcmp (type, req->msg->h.type) != 0) {
        s_fail (req, SB_E_conflict, "command_id %s was already used for a %s request",
                req->cmd, type);
        answered = true;
    }
    else {
        s_reply_put (self, req, (const uint8_t *) reply, rlen);
        req->replayed = true;
        answered = true;
    }
    sb_doc_destroy (&doc);
    return answered;
}

static void
s_command_remember (self_t *self, sb_txn_t *txn, req_t *req)
{
    uint64_t expires = self->now + self->command_ttl_ms;
    size_t len;
    const uint8_t *replies = sb_enc_data (self->replies, &len);
    sb_enc_reset (self->scratch);
    sb_enc_map_open (self->scratch);
    sb_enc_kstr (self->scratch, "type", req->msg->h.type);
    sb_enc_kuint (self->scratch, "expires", expires);
    sb_enc_key (self->scratch, "reply");
    sb_enc_bin (self->scratch, replies + req->reply_off, req->reply_len);
    sb_enc_map_close (self->scratch);
    const uint8_t *data = sb_enc_data (self->scratch, &len);
    sb_key_t k, e;
    s_key_command (&k, req->cmd);
    s_key_expiry (&e, expires, req->cmd);
    sb_txn_put (txn, DBI_COMMANDS, k.buf, k.len, data, len);
    sb_txn_put (txn, DBI_EXPIRY, e.buf, e.len, NULL, 0);
    if (!self->drain_min_expiry || expires < self->drain_min_expiry)
        self->drain_min_expiry = expires;
}

//  --------------------------------------------------------------------------
//  Checks made before the transaction

static bool
s_policy_ok (const char *p)
{
    return strcmp (p, "yolo") == 0 || strcmp (p, "auto") == 0 || strcmp (p, "interactive") == 0;
}

//  The config fields of create and update. An empty string in an update
//  clears an optional field.
static void
s_prepare_config (self_t *self, req_t *req, bool creating)
{
    const sb_val_t *b = req->msg->body;
    const char *ws = sb_get_str (b, "workspace");
    if (ws) {
        char real [PATH_MAX];
        struct stat st;
        if (!*ws) {
            s_fail (req, SB_E_invalid, "workspace must not be empty");
            return;
        }
        if (!realpath (ws, real)) {
            s_fail (req, SB_E_invalid, "workspace %s: %s", ws, strerror (errno));
            return;
        }
        if (stat (real, &st) != 0 || !S_ISDIR (st.st_mode)) {
            s_fail (req, SB_E_invalid, "workspace %s is not a directory", real);
            return;
        }
        if (!(req->workspace = s_strdup (self, real))) {
            s_fail (req, SB_E_internal, "out of memory");
            return;
        }
    }
    else
    if (creating) {
        s_fail (req, SB_E_invalid, "workspace is required");
        return;
    }

    const char *policy = sb_get_str (b, "approval_policy");
    if (policy && *policy && !s_policy_ok (policy)) {
        s_fail (req, SB_E_invalid, "approval_policy must be yolo, auto or interactive, not '%.20s'",
                policy);
        return;
    }
    const sb_val_t *steps = sb_get (b, "max_steps");
    if (steps && (steps->v.u < 1 || steps->v.u > MAX_STEPS_MAX)) {
        s_fail (req, SB_E_invalid, "max_steps must be between 1 and %d", MAX_STEPS_MAX);
        return;
    }
    const sb_val_t *labels = sb_get_map (b, "labels");
    for (uint32_t k = 0; labels && k < labels->len; k++) {
        const sb_val_t *key = sb_map_key (labels, k), *val = sb_map_val (labels, k);
        if (key->type != SB_V_STR || key->len == 0 || key->len > LABEL_KEY_MAX) {
            s_fail (req, SB_E_invalid, "labels: keys must be strings of 1 to %d bytes",
                    LABEL_KEY_MAX);
            return;
        }
        if (val->type != SB_V_STR || val->len > LABEL_VALUE_MAX) {
            s_fail (req, SB_E_invalid, "labels.%s must be a string of at most %d bytes",
                    key->v.s, LABEL_VALUE_MAX);
            return;
        }
    }
}

//  Checks one entry against its kind's schema and encodes its body into
//  self->prep. index < 0: the single form.
static void
s_prepare_entry (self_t *self, req_t *req, long index, const char *kind, const sb_val_t *body)
{
    char where [32] = "";
    if (index >= 0)
        snprintf (where, sizeof where, "entries[%ld].", index);
    const sb_type_t *t = sb_schema_tape_kind (kind);
    if (!t) {
        s_fail (req, SB_E_invalid, "%skind: unknown tape entry kind '%.40s'", where, kind);
        return;
    }
    //  The session's own entries are its record's history; nobody else
    //  may write them.
    if (strncmp (kind, "session.", 8) == 0) {
        s_fail (req, SB_E_invalid, "%skind: %s entries are written by the session service only",
                where, kind);
        return;
    }
    size_t off, end;
    sb_enc_data (self->prep, &off);
    if (body)
        sb_enc_val (self->prep, body);
    else {
        sb_enc_map_open (self->prep);
        sb_enc_map_close (self->prep);
    }
    const uint8_t *data = sb_enc_data (self->prep, &end);
    sb_verr_t verr;
    if (sb_validate (data + off, end - off, t->fields, t->max_bytes? t->max_bytes: ENTRY_BYTES_MAX,
                     NULL, &verr) != 0) {
        s_fail (req, SB_E_invalid, "%sbody of %s: %s", where, kind, verr.message);
        return;
    }
    if (!s_reserve ((void **) &self->spans, &self->spans_cap, self->nspans, sizeof (span_t))) {
        s_fail (req, SB_E_internal, "out of memory");
        return;
    }
    self->spans [self->nspans++] = (span_t) { kind, body, off, end - off };
    req->nspans++;
}

static void
s_prepare_append (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    const char *kind = sb_get_str (b, "kind");
    const sb_val_t *body = sb_get_map (b, "body");
    const sb_val_t *entries = sb_get_array (b, "entries");
    bool bad = false;
    req->run_id = s_clean_str (b, "run_id", &bad);
    if (bad) {
        s_fail (req, SB_E_invalid, "run_id must not contain NUL bytes");
        return;
    }
    const sb_val_t *fence = sb_get (b, "fence");
    req->has_fence = fence != NULL;
    req->fence = fence? fence->v.u: 0;
    if (entries && (kind || body)) {
        s_fail (req, SB_E_invalid, "give kind and body, or entries, not both");
        return;
    }
    if (!entries && !kind) {
        s_fail (req, SB_E_invalid, "kind is required (or entries, for a batch)");
        return;
    }
    if (entries && entries->len == 0) {
        s_fail (req, SB_E_invalid, "entries is empty");
        return;
    }
    req->span0 = self->nspans;
    req->batch_form = entries != NULL;
    if (!entries)
        return s_prepare_entry (self, req, -1, kind, body);
    for (uint32_t k = 0; k < entries->len && !req->prep_err && !req->err; k++) {
        const sb_val_t *e = sb_array_at (entries, k);
        s_prepare_entry (self, req, (long) k, sb_get_str (e, "kind"), sb_get_map (e, "body"));
    }
}

//  Everything about a request that does not depend on the store. The
//  failures found here are final: the write function skips the request.
static void
s_prepare (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    bool bad = false;
    req->cmd = s_clean_str (b, "command_id", &bad);
    if (bad || (req->cmd && !*req->cmd))
        s_fail (req, SB_E_invalid, "command_id must be a non-empty string without NUL bytes");
    else
    if (s_ops [req->op].addressed) {
        const sb_val_t *v = sb_get (b, "session_id");
        if (!v || v->type != SB_V_STR || v->len != SB_ULID_LEN || !sb_ulid_valid (v->v.s))
            s_fail (req, SB_E_invalid, "session_id '%.40s' is not a session id (a 26-character ULID)",
                    v && v->type == SB_V_STR? v->v.s: "");
        else
            req->sid = v->v.s;
    }
    if (!req->err) {
        if (req->op == OP_CREATE) {
            char id [SB_ULID_LEN + 1];
            sb_ulid_new (id);
            if (!(req->sid = s_strdup (self, id)))
                s_fail (req, SB_E_internal, "out of memory");
            else
                s_prepare_config (self, req, true);
        }
        else
        if (req->op == OP_UPDATE)
            s_prepare_config (self, req, false);
        else
        if (req->op == OP_APPEND)
            s_prepare_append (self, req);
    }
    req->prep_err = req->err;
}

//  --------------------------------------------------------------------------
//  Writes, inside the drain's transaction

static void
s_reply_record (self_t *self, req_t *req, const record_t *r)
{
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    sb_enc_key (self->replies, "session");
    s_record_encode (self->replies, r);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

static void
s_put_status (sb_txn_t *txn, const char *status, const char *sid, bool add)
{
    sb_key_t k;
    s_key_status (&k, status, sid);
    if (add)
        sb_txn_put (txn, DBI_STATUS, k.buf, k.len, NULL, 0);
    else
        sb_txn_del (txn, DBI_STATUS, k.buf, k.len);
}

static void
s_write_create (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    record_t *r = s_record_new (self, req->sid);
    if (!r) {
        s_fail (req, SB_E_internal, "out of memory");
        return;
    }
    const char *s;
    r->created_at = r->updated_at = self->now;
    r->status = "active";
    r->turn_status = "idle";
    r->workspace = req->workspace;
    r->title = (s = sb_get_str (b, "title")) && *s? s: NULL;
    r->provider = (s = sb_get_str (b, "provider")) && *s? s: NULL;
    r->model = (s = sb_get_str (b, "model")) && *s? s: NULL;
    r->approval_policy = (s = sb_get_str (b, "approval_policy")) && *s? s: NULL;
    r->max_steps = sb_get_uint (b, "max_steps", 0);
    r->labels = sb_get_map (b, "labels");
    r->config_version = 1;
    s_put_status (txn, "active", r->session_id, true);
    s_tape_put_record (self, txn, req, r, "session.created", NULL, 0);
    s_reply_record (self, req, r);
}

//  Sets *field from the request when present; "" clears it. Returns true
//  when the value changed.
static bool
s_update_str (const sb_val_t *b, const char *name, const char **field)
{
    const char *s = sb_get_str (b, name);
    if (!s)
        return false;
    const char *now = *s? s: NULL;
    if ((now == NULL) == (*field == NULL) && (!now || strcmp (now, *field) == 0))
        return false;
    *field = now;
    return true;
}

static void
s_write_update (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    record_t *r = s_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    if (s_record_closed (r)) {
        s_fail (req, SB_E_conflict, "session %s is closed", req->sid);
        return;
    }
    const char *changed [8];
    size_t n = 0;
    if (s_update_str (b, "title", &r->title))
        changed [n++] = "title";
    if (req->workspace && strcmp (req->workspace, r->workspace) != 0) {
        r->workspace = req->workspace;
        changed [n++] = "workspace";
    }
    if (s_update_str (b, "provider", &r->provider))
        changed [n++] = "provider";
    if (s_update_str (b, "model", &r->model))
        changed [n++] = "model";
    if (s_update_str (b, "approval_policy", &r->approval_policy))
        changed [n++] = "approval_policy";
    uint64_t steps = sb_get_uint (b, "max_steps", 0);
    if (steps && steps != r->max_steps) {
        r->max_steps = steps;
        changed [n++] = "max_steps";
    }
    const sb_val_t *labels = sb_get_map (b, "labels");
    if (labels) {
        r->labels = labels->len? labels: NULL;
        changed [n++] = "labels";
    }
    //  An update that changes nothing writes nothing.
    if (n) {
        r->updated_at = self->now;
        r->config_version++;
        req->changed = true;
        s_tape_put_record (self, txn, req, r, "session.updated", changed, n);
    }
    s_reply_record (self, req, r);
}

static void
s_write_close (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = s_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    //  Closing a closed session changes nothing and is no error.
    if (!s_record_closed (r)) {
        static const char *const changed [] = { "status" };
        s_put_status (txn, r->status, r->session_id, false);
        r->status = "closed";
        r->turn_status = "idle";
        r->updated_at = self->now;
        s_put_status (txn, r->status, r->session_id, true);
        req->changed = true;
        s_tape_put_record (self, txn, req, r, "session.updated", changed, 1);
    }
    s_reply_record (self, req, r);
}

static void
s_write_delete (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = s_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    sb_key_t k;
    s_key_session (&k, r->session_id);
    sb_txn_del (txn, DBI_SESSIONS, k.buf, k.len);
    s_put_status (txn, r->status, r->session_id, false);
    //  A long tape is removed in chunks after this commit, so that one
    //  delete never makes a transaction too large for LMDB or stalls the
    //  actor; its record is gone now, so the session is gone for readers.
    bool done;
    s_tape_purge (txn, r->session_id, PURGE_CHUNK, &done);
    if (!done && txn->ret == 0) {
        s_key_purge (&k, r->session_id);
        sb_txn_put (txn, DBI_PURGE, k.buf, k.len, NULL, 0);
        self->drain_purge = true;
    }
    r->deleted = true;
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    sb_enc_kstr (self->replies, "session_id", r->session_id);
    sb_enc_kuint (self->replies, "deleted_events", r->last_seq);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
    req->last_seq = r->last_seq;
}

//  The run actor raises a session's fence before it hands a run to an
//  executor and before it announces a lapsed lease; from then on an
//  append that carries an older fence is refused. Fences only go up.
static void
s_write_fence (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = s_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    uint64_t fence = sb_get_uint (req->msg->body, "fence", 0);
    if (fence > r->fence) {
        r->fence = fence;
        r->dirty = true;
        req->changed = true;
    }
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    sb_enc_kuint (self->replies, "fence", r->fence);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

//  What a run.status entry means for the session's turn_status.
static const char *
s_turn_status (const char *run_status, const char *current)
{
    if (!run_status)
        return current;
    if (strcmp (run_status, "queued") == 0 || strcmp (run_status, "claimed") == 0
    ||  strcmp (run_status, "running") == 0)
        return "running";
    if (strcmp (run_status, "cancelling") == 0)
        return "cancelling";
    return "idle";
}

static void
s_write_append (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = s_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    if (s_record_closed (r)) {
        s_fail (req, SB_E_conflict, "session %s is closed; it takes no more entries", req->sid);
        return;
    }
    if (req->has_fence && req->fence < r->fence) {
        s_fail (req, SB_E_fenced, "fence %llu is older than the session's fence %llu",
                (unsigned long long) req->fence, (unsigned long long) r->fence);
        return;
    }
    const uint8_t *prep = sb_enc_data (self->prep, &(size_t) { 0 });
    for (size_t k = 0; k < req->nspans && txn->ret == 0; k++) {
        const span_t *sp = &self->spans [req->span0 + k];
        s_tape_put (self, txn, req, r, ++r->last_seq, sp->kind, prep + sp->off, sp->len);
        if (strcmp (sp->kind, "run.status") == 0)
            r->turn_status = s_turn_status (sb_get_str (sp->body, "status"), r->turn_status);
    }
    if (req->run_id)
        r->last_run_id = req->run_id;
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    if (req->batch_form) {
        sb_enc_kuint (self->replies, "first_seq", req->first_seq);
        sb_enc_kuint (self->replies, "last_seq", req->last_seq);
    }
    else
        sb_enc_kuint (self->replies, "seq", req->first_seq);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

static int
s_drain_fn (sb_txn_t *txn, void *arg)
{
    self_t *self = (self_t *) arg;
    //  Each run starts from scratch: a re-run after a map grow must not
    //  see what the aborted run produced.
    s_cache_reset (self);
    sb_enc_reset (self->tape);
    sb_enc_reset (self->replies);
    self->npubs = 0;
    self->drain_min_expiry = 0;
    self->drain_purge = false;
    for (size_t i = 0; i < self->nreqs && txn->ret == 0; i++) {
        req_t *req = &self->reqs [i];
        if (!req->write || req->prep_err)
            continue;
        req->err = SB_OK;
        req->errmsg [0] = 0;
        req->reply_off = req->reply_len = 0;
        req->pub0 = self->npubs;
        req->npubs = 0;
        req->first_seq = req->last_seq = 0;
        req->replayed = req->changed = false;
        if (req->cmd && s_command_replay (self, txn, req))
            continue;
        switch (req->op) {
            case OP_CREATE: s_write_create (self, txn, req); break;
            case OP_UPDATE: s_write_update (self, txn, req); break;
            case OP_CLOSE:  s_write_close (self, txn, req); break;
            case OP_DELETE: s_write_delete (self, txn, req); break;
            case OP_APPEND: s_write_append (self, txn, req); break;
            case OP_FENCE:  s_write_fence (self, txn, req); break;
            default: break;
        }
        if (!req->err && req->cmd && txn->ret == 0)
            s_command_remember (self, txn, req);
    }
    if (txn->ret == 0)
        s_cache_flush (self, txn);
    return 0;
}

//  --------------------------------------------------------------------------
//  Reads, after the drain's commit

static void
s_send_enc (self_t *self, req_t *req)
{
    size_t len;
    const uint8_t *data = sb_enc_data (self->enc, &len);
    sb_bus_reply (self->bus, req->msg, data, len);
}

static void
s_read_get (self_t *self, sb_txn_t *txn, req_t *req)
{
    sb_key_t k;
    s_key_session (&k, req->sid);
    MDB_val v;
    int rc = sb_txn_get (txn, DBI_SESSIONS, k.buf, k.len, &v);
    if (rc == SB_STORE_NOTFOUND) {
        s_fail (req, SB_E_not_found, "no session %s", req->sid);
        return;
    }
    if (rc != 0)
        return;
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_key (self->enc, "session");
    sb_enc_raw (self->enc, v.mv_data, v.mv_size);
    sb_enc_map_close (self->enc);
    s_send_enc (self, req);
}

static void
s_read_list (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    const char *status = sb_get_str (b, "status");
    const char *cursor = sb_get_str (b, "cursor");
    uint64_t limit = sb_get_uint (b, "limit", SB_SESSION_LIST_LIMIT);
    if (status && strcmp (status, "active") != 0 && strcmp (status, "closed") != 0) {
        s_fail (req, SB_E_invalid, "status must be active or closed");
        return;
    }
    if (limit < 1 || limit > SB_SESSION_LIST_LIMIT_MAX) {
        s_fail (req, SB_E_invalid, "limit must be between 1 and %d", SB_SESSION_LIST_LIMIT_MAX);
        return;
    }
    if (cursor && (strlen (cursor) != SB_ULID_LEN || !sb_ulid_valid (cursor))) {
        s_fail (req, SB_E_invalid, "cursor is not a session id from next_cursor");
        return;
    }

    //  By status, walk the index; else the records themselves. Both are in
    //  session id order, which is creation order (ULIDs).
    sb_key_t prefix, start;
    unsigned dbi = status? DBI_STATUS: DBI_SESSIONS;
    if (status) {
        s_key_status (&prefix, status, NULL);
        s_key_status (&start, status, cursor);
    }
    else {
        sb_key_init (&prefix, 'S');
        s_key_session (&start, cursor? cursor: "");
    }
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_key (self->enc, "sessions");
    sb_enc_array_open (self->enc);
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, dbi, prefix.buf, prefix.len,
                       cursor? start.buf: NULL, cursor? start.len: 0);
    MDB_val k, v;
    uint64_t n = 0;
    const char *last = NULL;
    char next [SB_ULID_LEN + 1] = "";
    while (sb_txn_iter_next (&it, &k, &v)) {
        //  The session id is the key's last field.
        const char *sid = (const char *) k.mv_data + prefix.len;
        if (cursor && strcmp (sid, cursor) == 0)
            continue;
        if (n == limit) {
            snprintf (next, sizeof next, "%s", last);
            sb_txn_iter_end (&it);
            break;
        }
        if (status) {
            sb_key_t rk;
            s_key_session (&rk, sid);
            if (sb_txn_get (txn, DBI_SESSIONS, rk.buf, rk.len, &v) != 0)
                continue;
        }
        sb_enc_raw (self->enc, v.mv_data, v.mv_size);
        last = sid;
        n++;
    }
    if (txn->ret)
        return;
    sb_enc_array_close (self->enc);
    if (next [0])
        sb_enc_kstr (self->enc, "next_cursor", next);
    sb_enc_map_close (self->enc);
    s_send_enc (self, req);
}

static void
s_read_events (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    uint64_t after = sb_get_uint (b, "after_seq", 0);
    uint64_t limit = sb_get_uint (b, "limit", SB_SESSION_EVENTS_LIMIT);
    if (limit < 1 || limit > SB_SESSION_EVENTS_LIMIT_MAX) {
        s_fail (req, SB_E_invalid, "limit must be between 1 and %d", SB_SESSION_EVENTS_LIMIT_MAX);
        return;
    }
    sb_key_t k;
    s_key_session (&k, req->sid);
    MDB_val v;
    int rc = sb_txn_get (txn, DBI_SESSIONS, k.buf, k.len, &v);
    if (rc == SB_STORE_NOTFOUND) {
        s_fail (req, SB_E_not_found, "no session %s", req->sid);
        return;
    }
    if (rc != 0)
        return;
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (v.mv_data, v.mv_size, sb_session_record_fields, 0, &verr);
    uint64_t head = sb_get_uint (sb_doc_root (doc), "last_seq", 0);
    sb_doc_destroy (&doc);

    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_key (self->enc, "events");
    sb_enc_array_open (self->enc);
    uint64_t next_after = after, n = 0;
    size_t bytes = 0;
    if (after < head) {
        sb_key_t prefix, start;
        s_key_tape (&prefix, req->sid, 0, false);
        s_key_tape (&start, req->sid, after + 1, true);
        sb_txn_iter_t it;
        sb_txn_iter_begin (txn, &it, DBI_TAPE, prefix.buf, prefix.len, start.buf, start.len);
        MDB_val tk, tv;
        while (sb_txn_iter_next (&it, &tk, &tv)) {
            //  A page holds at least one entry, however large, so that a
            //  reader always moves on.
            if (n == limit || (n > 0 && bytes + tv.mv_size > SB_SESSION_EVENTS_BYTES_MAX)) {
                sb_txn_iter_end (&it);
                break;
            }
            sb_enc_raw (self->enc, tv.mv_data, tv.mv_size);
            bytes += tv.mv_size;
            next_after = sb_key_read_u64 (&tk, prefix.len);
            n++;
        }
        if (txn->ret)
            return;
    }
    sb_enc_array_close (self->enc);
    sb_enc_kuint (self->enc, "next_after", next_after);
    sb_enc_kuint (self->enc, "last_seq", head);
    sb_enc_kbool (self->enc, "more", next_after < head);
    sb_enc_map_close (self->enc);
    s_send_enc (self, req);
}

//  --------------------------------------------------------------------------
//  The drain

static void
s_answer_error (self_t *self, req_t *req)
{
    if (req->err == SB_E_invalid && sb_ratelimit_ok (&self->rl, 10))
        sb_info (ACTOR, "refused %s code=%s error=\"%s\"", req->msg->h.type,
                 sb_err_name (req->err), req->errmsg);
    sb_bus_error (self->bus, req->msg, req->err, "%s", req->errmsg);
}

//  After the commit: publish the request's entries, then acknowledge it.
static void
s_answer_write (self_t *self, req_t *req)
{
    if (req->err)
        return s_answer_error (self, req);
    size_t len;
    const uint8_t *tape = sb_enc_data (self->tape, &len);
    char topic [SB_ULID_LEN + 16];
    for (size_t k = 0; k < req->npubs; k++) {
        const pub_t *p = &self->pubs [req->pub0 + k];
        snprintf (topic, sizeof topic, "session/%s", p->sid);
        if (sb_pub_send (self->pub, topic, "session.event", p->sid, tape + p->off, p->len) != 0
        &&  sb_ratelimit_ok (&self->rl, 10))
            //  Subscribers fill the gap from the tape: the entry is safe.
            sb_warn (ACTOR, "cannot publish session=%s error=\"%s\"", p->sid, zmq_strerror (errno));
    }
    const uint8_t *replies = sb_enc_data (self->replies, &len);
    sb_bus_reply (self->bus, req->msg, replies + req->reply_off, req->reply_len);
    self->appended += req->npubs;
    if (req->replayed || req->op == OP_APPEND)
        return;
    if (req->op == OP_CREATE)
        sb_info (ACTOR, "created session=%s workspace=%s", req->sid, req->workspace);
    else
    if (req->op == OP_DELETE)
        sb_info (ACTOR, "deleted session=%s entries=%llu", req->sid,
                 (unsigned long long) req->last_seq);
    else
    if (req->op == OP_FENCE)
        sb_debug (ACTOR, "fence session=%s", req->sid);
    else
    if (req->changed)
        sb_info (ACTOR, "%s session=%s seq=%llu", req->op == OP_CLOSE? "closed": "updated",
                 req->sid, (unsigned long long) req->last_seq);
}

static void
s_drain_end (self_t *self)
{
    bool big = self->nreqs > 256;
    for (size_t k = 0; k < self->nreqs; k++)
        sb_msg_destroy (&self->reqs [k].msg);
    self->nreqs = self->nspans = self->npubs = 0;
    self->drain_writes = self->drain_entries = self->drain_bytes = 0;
    s_cache_reset (self);
    s_arena_reset (self);
    sb_enc_t **encs [] = { &self->prep, &self->tape, &self->replies, &self->scratch, &self->enc };
    for (size_t k = 0; k < sizeof encs / sizeof encs [0]; k++) {
        size_t len;
        sb_enc_data (*encs [k], &len);
        //  Give a burst's buffers back rather than keep them for good.
        if (len > (1u << 20)) {
            sb_enc_destroy (encs [k]);
            *encs [k] = sb_enc_new ();
            big = true;
        }
        else
            sb_enc_reset (*encs [k]);
    }
    if (big) {
        free (self->reqs);
        free (self->spans);
        free (self->pubs);
        free (self->recs);
        self->reqs = NULL;
        self->spans = NULL;
        self->pubs = NULL;
        self->recs = NULL;
        self->reqs_cap = self->spans_cap = self->pubs_cap = self->recs_cap = 0;
        malloc_trim (0);
    }
}

static void
s_drain_run (self_t *self)
{
    self->now = sb_now_ms ();
    bool writes = false, reads = false;
    for (size_t k = 0; k < self->nreqs; k++) {
        req_t *req = &self->reqs [k];
        s_prepare (self, req);
        if (req->write && !req->prep_err)
            writes = true;
        if (!req->write && !req->prep_err)
            reads = true;
    }
    int rc = 0;
    if (writes) {
        int64_t t0 = sb_mono_us ();
        rc = sb_store_write (self->store, s_drain_fn, self);
        self->last_commit_us = sb_mono_us () - t0;
        self->last_writes = self->drain_writes;
        if (rc == 0) {
            self->commits++;
            if (self->drain_min_expiry
            && (!self->next_expiry || self->drain_min_expiry < self->next_expiry))
                self->next_expiry = self->drain_min_expiry;
            self->purge_pending |= self->drain_purge;
            sb_debug (ACTOR, "committed requests=%zu entries=%zu us=%lld", self->nreqs,
                      self->npubs, (long long) self->last_commit_us);
        }
        else
            sb_error (ACTOR, "commit failed requests=%zu error=\"%s\"", self->nreqs,
                      sb_store_strerror (rc));
    }
    for (size_t k = 0; k < self->nreqs; k++) {
        req_t *req = &self->reqs [k];
        if (!req->write)
            continue;
        if (rc != 0 && !req->prep_err) {
            //  Nothing of the drain was written: say so, and let the
            //  client retry with the same command_id.
            if (rc == SB_STORE_DISK_FULL)
                s_fail (req, SB_E_disk_full, "the disk is full; nothing was written");
            else
                s_fail (req, SB_E_internal, "the store failed: %s; nothing was written",
                        sb_store_strerror (rc));
        }
        s_answer_write (self, req);
    }
    if (reads) {
        sb_txn_t txn;
        sb_txn_begin (self->store, &txn, false);
        for (size_t k = 0; k < self->nreqs; k++) {
            req_t *req = &self->reqs [k];
            if (req->write || req->prep_err)
                continue;
            if (req->op == OP_GET)
                s_read_get (self, &txn, req);
            else
            if (req->op == OP_LIST)
                s_read_list (self, &txn, req);
            else
                s_read_events (self, &txn, req);
            if (!req->err && txn.ret)
                s_fail (req, SB_E_internal, "the store failed: %s", sb_store_strerror (txn.ret));
            if (req->err)
                s_answer_error (self, req);
        }
        sb_txn_commit (&txn);
    }
    for (size_t k = 0; k < self->nreqs; k++) {
        req_t *req = &self->reqs [k];
        if (!req->write && req->prep_err)
            s_answer_error (self, req);
    }
    s_drain_end (self);
}

static bool
s_drain_full (self_t *self)
{
    return self->nreqs >= BATCH_MAX_MSGS || self->drain_entries >= BATCH_MAX_ENTRIES
        || self->drain_bytes >= BATCH_MAX_BYTES;
}

//  Takes the requests waiting on the bus into the drain, within its caps.
static void
s_drain_take (self_t *self)
{
    while (!s_drain_full (self)) {
        sb_msg_t *msg = sb_bus_recv (self->bus, 0);
        if (!msg)
            break;
        if (!msg->route) {
            sb_msg_destroy (&msg);
            continue;
        }
        size_t op = 0;
        while (op < NOPS && strcmp (s_ops [op].type, msg->h.type) != 0)
            op++;
        if (op == NOPS) {
            sb_bus_error (self->bus, msg, SB_E_unknown_type, "the session service does not serve %s",
                          msg->h.type);
            sb_msg_destroy (&msg);
            continue;
        }
        if (!s_reserve ((void **) &self->reqs, &self->reqs_cap, self->nreqs, sizeof (req_t))) {
            sb_bus_error (self->bus, msg, SB_E_overloaded, "the session service is out of memory");
            sb_msg_destroy (&msg);
            break;
        }
        req_t *req = &self->reqs [self->nreqs++];
        memset (req, 0, sizeof *req);
        req->msg = msg;
        req->op = s_ops [op].op;
        req->write = s_ops [op].write;
        self->drain_writes += req->write;
        if (req->op == OP_APPEND) {
            const sb_val_t *e = sb_get_array (msg->body, "entries");
            self->drain_entries += e? e->len: 1;
            self->drain_bytes += s_val_bytes (msg->body);
        }
        else
            self->drain_entries++;
    }
}

//  Reads every request waiting on the bus, within the drain's caps, and
//  runs them as one drain.
static void
s_handle_bus (self_t *self)
{
    s_drain_take (self);
    //  Each drain with writes costs one fsync. When this one holds fewer
    //  writes than the last, the clients that the last commit answered are
    //  most likely sending their next requests right now: wait for them a
    //  little, which turns many small commits into one. The wait ends as
    //  soon as they are in, and never outlasts a commit.
    if (self->drain_writes && self->drain_writes < self->last_writes) {
        int64_t until = sb_mono_us () + (self->last_commit_us < GATHER_MAX_US?
                                         self->last_commit_us: GATHER_MAX_US);
        while (!s_drain_full (self) && self->drain_writes < self->last_writes) {
            int64_t left = until - sb_mono_us ();
            if (left <= 0)
                break;
            zmq_pollitem_t item = { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 };
            if (zmq_poll (&item, 1, (long) ((left + 999) / 1000)) <= 0)
                break;
            s_drain_take (self);
        }
    }
    if (self->nreqs)
        s_drain_run (self);
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
    sw->removed = 0;
    sw->next = 0;
    sb_key_t prefix;
    sb_key_init (&prefix, 'E');
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, DBI_EXPIRY, prefix.buf, prefix.len, NULL, 0);
    MDB_val k, v;
    while (sb_txn_iter_next (&it, &k, &v)) {
        uint64_t at = sb_key_read_u64 (&k, 1);
        if (at > sw->now || sw->removed == SWEEP_CHUNK) {
            sw->next = at;
            sb_txn_iter_end (&it);
            break;
        }
        sb_key_t c;
        sb_key_init (&c, 'C');
        if (k.mv_size > 10)
            sb_key_strn (&c, (const char *) k.mv_data + 9, k.mv_size - 10);
        if (sb_key_valid (&c))
            sb_txn_del (txn, DBI_COMMANDS, c.buf, c.len);
        sb_txn_iter_del (&it);
        sw->removed++;
    }
    return 0;
}

static void
s_sweep (self_t *self)
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
    MDB_val k, v;
    if (!sb_txn_iter_next (&it, &k, &v))
        return 0;
    snprintf (p->sid, sizeof p->sid, "%.*s", (int) (k.mv_size - 2), (const char *) k.mv_data + 1);
    bool done;
    p->removed = s_tape_purge (txn, p->sid, PURGE_CHUNK, &done);
    if (done)
        sb_txn_iter_del (&it);
    p->more = !done || sb_txn_iter_next (&it, &k, &v);
    sb_txn_iter_end (&it);
    return 0;
}

static void
s_purge (self_t *self)
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

//  --------------------------------------------------------------------------
//  Actor

static void
s_self_destroy (self_t **self_p)
{
    if (!*self_p)
        return;
    self_t *self = *self_p;
    s_cache_reset (self);
    while (self->arena) {
        chunk_t *next = self->arena->next;
        free (self->arena);
        self->arena = next;
    }
    zhashx_destroy (&self->rec_index);
    free (self->reqs);
    free (self->spans);
    free (self->pubs);
    free (self->recs);
    sb_enc_destroy (&self->enc);
    sb_enc_destroy (&self->prep);
    sb_enc_destroy (&self->tape);
    sb_enc_destroy (&self->replies);
    sb_enc_destroy (&self->scratch);
    sb_pub_destroy (&self->pub);
    sb_bus_destroy (&self->bus);
    sb_store_destroy (&self->store);
    free (self);
    *self_p = NULL;
}

//  Finds what startup must know without scanning the tape: the earliest
//  remembered command's expiry, and whether a deleted tape is half-purged.
static void
s_self_recover (self_t *self)
{
    sb_txn_t txn;
    sb_txn_begin (self->store, &txn, false);
    sb_key_t e, p;
    sb_key_init (&e, 'E');
    sb_key_init (&p, 'P');
    sb_txn_iter_t it;
    MDB_val k, v;
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

static self_t *
s_self_new (zsock_t *pipe, const sb_actor_args_t *args)
{
    self_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    snprintf (self->instance, sizeof self->instance, "%s", args->instance? args->instance: ACTOR);
    const char *ttl = getenv ("SWITCHBOARD_COMMAND_TTL_S");
    long long ttl_s = ttl && *ttl? atoll (ttl): COMMAND_TTL_S;
    if (ttl_s <= 0) {
        sb_warn (ACTOR, "ignoring SWITCHBOARD_COMMAND_TTL_S=%s (want seconds > 0)", ttl);
        ttl_s = COMMAND_TTL_S;
    }
    self->command_ttl_ms = (uint64_t) ttl_s * 1000;

    char dir [4200], err [512];
    snprintf (dir, sizeof dir, "%s/session", args->data_dir? args->data_dir: ".");
    self->store = sb_store_open (dir, s_dbi_names, SB_SESSION_SCHEMA_VERSION, 0, err, sizeof err);
    if (!self->store) {
        sb_error (ACTOR, "cannot open the store error=\"%s\"", err);
        s_self_destroy (&self);
        return NULL;
    }
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->pub = args->pub_endpoint? sb_pub_new (args->pub_endpoint, self->instance): NULL;
    self->rec_index = zhashx_new ();
    self->enc = sb_enc_new ();
    self->prep = sb_enc_new ();
    self->tape = sb_enc_new ();
    self->replies = sb_enc_new ();
    self->scratch = sb_enc_new ();
    if (!self->bus || !self->pub || !self->rec_index || !self->enc || !self->prep
    ||  !self->tape || !self->replies || !self->scratch) {
        sb_error (ACTOR, "cannot connect to the bus cmd=%s pub=%s", args->cmd_endpoint,
                  args->pub_endpoint? args->pub_endpoint: "(none)");
        s_self_destroy (&self);
        return NULL;
    }
    s_self_recover (self);
    sb_store_info_t info;
    if (sb_store_info (self->store, &info) == 0)
        sb_info (ACTOR, "opened store=%s sessions=%llu entries=%llu commands=%llu map_bytes=%zu "
                 "command_ttl_s=%lld", dir, (unsigned long long) info.entries [DBI_SESSIONS],
                 (unsigned long long) info.entries [DBI_TAPE],
                 (unsigned long long) info.entries [DBI_COMMANDS], info.mapsize, ttl_s);
    return self;
}

static void
s_handle_pipe (self_t *self)
{
    char *cmd = zstr_recv (self->pipe);
    if (!cmd || streq (cmd, "$TERM"))
        self->terminated = true;
    zstr_free (&cmd);
}

void
sb_session_actor (zsock_t *pipe, void *args)
{
    self_t *self = s_self_new (pipe, (const sb_actor_args_t *) args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    if (sb_actor_register (pipe, self->bus, ACTOR, self->instance, NULL, 0)) {
        s_self_destroy (&self);
        return;
    }
    while (!self->terminated) {
        int64_t wait = sb_bus_tick (self->bus);
        if (sb_bus_has_queued (self->bus) || self->purge_pending)
            wait = 0;
        if (self->next_expiry) {
            uint64_t now = sb_now_ms ();
            int64_t due = self->next_expiry > now? (int64_t) (self->next_expiry - now): 0;
            if (due < wait)
                wait = due;
        }
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
        };
        if (zmq_poll (items, 2, (long) wait) < 0 && errno != EINTR)
            break;
        if (items [0].revents & ZMQ_POLLIN)
            s_handle_pipe (self);
        if (self->terminated)
            break;
        if ((items [1].revents & ZMQ_POLLIN) || sb_bus_has_queued (self->bus))
            s_handle_bus (self);
        if (self->next_expiry && self->next_expiry <= sb_now_ms ())
            s_sweep (self);
        if (self->purge_pending)
            s_purge (self);
    }
    sb_info (ACTOR, "stopping entries_appended=%llu commits=%llu",
             (unsigned long long) self->appended, (unsigned long long) self->commits);
    s_self_destroy (&self);
}

/*  store/outbox.c — the outbox's book. See outbox.h.

    Written once for the run actor (which had it, with up to 32 appends in
    flight) and the interaction actor (which sent its oldest entry, one at
    a time: an outbox with inflight_max 1 does the same). */
#include "store/outbox.h"
#include "schemas/codec.h"
#include "schemas/errors.h"

#include <czmq.h>

//  A walk reads at most this many entries.
#define OUTBOX_SCAN_MAX 256

struct _sb_outbox_t {
    sb_store_t *store;
    unsigned dbi;
    size_t inflight_max;
    bool fenced_final;
    uint64_t acked;             //  every entry up to this one has landed (or was dropped)
    uint64_t durable;           //  every entry up to this one is on disk
    bool idle;                  //  the last walk found nothing, and nothing came since
    zhashx_t *inflight;         //  entries in flight: number -> session
    zhashx_t *busy;             //  sessions with an append in flight
    zhashx_t *landed;           //  entries past acked that landed
};

static void
s_nkey (uint64_t n, char *out)
{
    snprintf (out, 24, "%llu", (unsigned long long) n);
}

sb_outbox_t *
sb_outbox_new (sb_store_t *store, unsigned dbi, size_t inflight_max, bool fenced_final)
{
    sb_outbox_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->store = store;
    self->dbi = dbi;
    self->inflight_max = inflight_max? inflight_max: 1;
    self->fenced_final = fenced_final;
    self->inflight = zhashx_new ();
    self->busy = zhashx_new ();
    self->landed = zhashx_new ();
    if (!self->inflight || !self->busy || !self->landed) {
        sb_outbox_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->inflight, (czmq_destructor *) zstr_free);
    return self;
}

void
sb_outbox_destroy (sb_outbox_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sb_outbox_t *self = *self_p;
    zhashx_destroy (&self->inflight);
    zhashx_destroy (&self->busy);
    zhashx_destroy (&self->landed);
    free (self);
    *self_p = NULL;
}

//  The scope of this process's entries: "" on one host ('O' n), else the
//  node's id ('o' id n). Set once, before any actor starts.
static char s_scope [64];

void
sb_outbox_scope (const char *node_id)
{
    snprintf (s_scope, sizeof s_scope, "%s", node_id? node_id: "");
}

bool
sb_outbox_foreign (const void *key, size_t klen)
{
    const uint8_t *k = key;
    size_t slen = strlen (s_scope);
    //  'o', a NODE_ID of 1 or more bytes, its NUL, then n (8 bytes)
    if (!*s_scope || klen < 1 + 2 + 8 || k [0] != 'o' || k [klen - 9] != 0 || memchr (k + 1, 0, klen - 10))
        return false;
    return !(klen - 10 == slen && memcmp (k + 1, s_scope, slen) == 0);
}

bool
sb_outbox_final (int code, bool fenced_final)
{
    return code == SB_OK || code == SB_E_not_found || code == SB_E_invalid || code == SB_E_conflict
        || code == SB_E_too_large || (code == SB_E_fenced && fenced_final);
}

//  The part of every key before n.
static void
s_prefix (sb_key_t *k)
{
    if (*s_scope) {
        sb_key_init (k, 'o');
        sb_key_str (k, s_scope);
    }
    else
        sb_key_init (k, 'O');
}

void
sb_outbox_key (sb_key_t *k, uint64_t n)
{
    s_prefix (k);
    sb_key_u64 (k, n);
}

uint64_t
sb_outbox_last_stored (sb_store_t *store, unsigned dbi)
{
    uint64_t last = 0;
    sb_txn_t txn;
    if (sb_txn_begin (store, &txn, false) == 0) {
        sb_datum_t k;
        sb_key_t p;
        s_prefix (&p);
        if (sb_txn_last (&txn, dbi, p.buf, p.len, &k, NULL) == 0 && k.size == p.len + 8)
            last = sb_key_read_u64 (&k, p.len);
        sb_txn_abort (&txn);
    }
    return last;
}

void
sb_outbox_durable (sb_outbox_t *self, uint64_t n)
{
    if (n > self->durable)
        self->durable = n;
    self->idle = false;
}

uint64_t
sb_outbox_acked (sb_outbox_t *self)
{
    return self->acked;
}

size_t
sb_outbox_inflight (sb_outbox_t *self)
{
    return zhashx_size (self->inflight);
}

bool
sb_outbox_idle (sb_outbox_t *self)
{
    return self->idle;
}

//  Collects entry n, of body v, into *e when it may go: not in flight,
//  and its session has nothing in flight. True when collected.
static bool
s_collect (sb_outbox_t *self, uint64_t n, const char *nk, const sb_datum_t *v, sb_outbox_entry_t *e)
{
    if (zhashx_lookup (self->inflight, nk))
        return false;
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (v->data, v->size, NULL, 0, &err);
    const char *sid = doc? sb_get_str (sb_doc_root (doc), "session_id"): NULL;
    snprintf (e->session, sizeof e->session, "%s", sid? sid: "");
    sb_doc_destroy (&doc);
    if (zhashx_lookup (self->busy, e->session)
    ||  !(e->body = malloc (v->size? v->size: 1)))
        return false;
    memcpy (e->body, v->data, v->size);
    e->len = v->size;
    e->n = n;
    zhashx_insert (self->inflight, nk, strdup (e->session));
    zhashx_insert (self->busy, e->session, "");
    return true;
}

size_t
sb_outbox_take (sb_outbox_t *self, sb_outbox_entry_t *out, size_t max)
{
    size_t inflight = zhashx_size (self->inflight);
    size_t room = inflight < self->inflight_max? self->inflight_max - inflight: 0;
    if (max > room)
        max = room;
    size_t found = 0;
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false))
        return 0;
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_key_t start, prefix;
    sb_outbox_key (&start, self->acked + 1);
    s_prefix (&prefix);
    sb_txn_iter_begin (&txn, &it, self->dbi, prefix.buf, prefix.len, start.buf, start.len);
    bool blocked = false;       //  an entry that has not landed: acked stops before it
    size_t scanned = 0;         //  entries read that had not landed
    size_t seen = 0;            //  and those that had
    char nk [24];
    while (sb_txn_iter_next (&it, &k, &v)) {
        if (k.size != prefix.len + 8)
            continue;
        uint64_t n = sb_key_read_u64 (&k, prefix.len);
        s_nkey (n, nk);
        if (zhashx_lookup (self->landed, nk)) {
            if (!blocked) {
                self->acked = n;
                zhashx_delete (self->landed, nk);
            }
            seen++;
            continue;
        }
        if (!blocked) {
            if (n - 1 > self->acked)
                self->acked = n - 1;
            blocked = true;
        }
        if (found < max && s_collect (self, n, nk, &v, &out [found]))
            found++;
        if (++scanned >= OUTBOX_SCAN_MAX || (found == max && blocked))
            break;
    }
    sb_txn_iter_end (&it);
    sb_txn_abort (&txn);
    //  every durable entry after acked landed
    if (!blocked && scanned < OUTBOX_SCAN_MAX && self->durable > self->acked)
        self->acked = self->durable;
    if (scanned + seen == 0 && inflight == 0)
        self->idle = true;
    if (zhashx_size (self->landed)) {
        zlistx_t *keys = zhashx_keys (self->landed);
        for (const char *key = zlistx_first (keys); key; key = zlistx_next (keys))
            if (strtoull (key, NULL, 10) <= self->acked)
                zhashx_delete (self->landed, key);
        zlistx_destroy (&keys);
    }
    return found;
}

sb_outbox_fate_t
sb_outbox_answered (sb_outbox_t *self, uint64_t n, bool replied, int code)
{
    char nk [24];
    s_nkey (n, nk);
    const char *sid = zhashx_lookup (self->inflight, nk);
    if (sid) {
        zhashx_delete (self->busy, sid);
        zhashx_delete (self->inflight, nk);    //  frees sid
    }
    if (!replied)
        return SB_OUTBOX_RETRY;
    //  a refusal that a retry cannot change is final: the entry goes
    if (!sb_outbox_final (code, self->fenced_final))
        return SB_OUTBOX_RETRY;
    if (n > self->acked)
        zhashx_insert (self->landed, nk, "");
    return code == SB_OK? SB_OUTBOX_LANDED: SB_OUTBOX_DROPPED;
}

int
sb_outbox_delete (sb_outbox_t *self, uint64_t n)
{
    sb_key_t k;
    sb_outbox_key (&k, n);
    sb_txn_t txn;
    int rc = sb_txn_begin (self->store, &txn, true);
    if (rc == 0) {
        sb_txn_del (&txn, self->dbi, k.buf, k.len);
        rc = sb_txn_commit (&txn);
    }
    return rc;
}

/*  actors/session/queue_store.c — the layout of the queue in DATA/session
    (dbi `queue`, see actors/session/queue.c and docs/queue.md), its read
    (session.queue.list), starting a queue's next prompt once its session
    is idle, and what startup does with the queues it finds. */
#include "actors/session/queue_impl.h"
#include "schemas/types.h"
#include "schemas/vocab.h"

#include <errno.h>
#include <string.h>

//  --------------------------------------------------------------------------
//  Keys and records

void
sb_queue_key (sb_key_t *k, char tag, const char *sid)
{
    sb_key_init (k, tag);
    sb_key_str (k, sid);
}

void
sb_queue_meta_load (sb_txn_t *txn, const char *sid, qmeta_t *m)
{
    memset (m, 0, sizeof *m);
    m->head = m->tail = Q_BASE;
    m->steer_next = 1;
    sb_key_t k;
    sb_queue_key (&k, 'M', sid);
    sb_datum_t v;
    if (sb_txn_get (txn, DBI_QUEUE, k.buf, k.len, &v) != 0)
        return;
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (v.data, v.size, NULL, 0, &verr);
    const sb_val_t *d = sb_doc_root (doc);
    if (d) {
        const char *reason = sb_get_str (d, "reason");
        m->paused = sb_get_bool (d, "paused", false);
        snprintf (m->reason, sizeof m->reason, "%s", reason? reason: "");
        m->head = sb_get_uint (d, "head", Q_BASE);
        m->tail = sb_get_uint (d, "tail", Q_BASE);
        m->count = sb_get_uint (d, "count", 0);
        m->bytes = sb_get_uint (d, "bytes", 0);
        m->steer_next = sb_get_uint (d, "steer_next", 1);
        m->steers = sb_get_uint (d, "steers", 0);
    }
    sb_doc_destroy (&doc);
}

void
sb_queue_meta_save (sb_txn_t *txn, const char *sid, const qmeta_t *m)
{
    sb_key_t k;
    sb_queue_key (&k, 'M', sid);
    //  An empty queue that is not paused needs no record.
    if (!m->count && !m->steers && !m->paused) {
        sb_txn_del (txn, DBI_QUEUE, k.buf, k.len);
        return;
    }
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        txn->ret = -ENOMEM;
        return;
    }
    sb_enc_map_open (e);
    sb_enc_kbool (e, "paused", m->paused);
    if (m->paused && m->reason [0])
        sb_enc_kstr (e, "reason", m->reason);
    sb_enc_kuint (e, "head", m->head);
    sb_enc_kuint (e, "tail", m->tail);
    sb_enc_kuint (e, "count", m->count);
    sb_enc_kuint (e, "bytes", m->bytes);
    sb_enc_kuint (e, "steer_next", m->steer_next);
    sb_enc_kuint (e, "steers", m->steers);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_txn_put (txn, DBI_QUEUE, k.buf, k.len, data, len);
    sb_enc_destroy (&e);
}

void
sb_queue_item_put (sb_txn_t *txn, char tag, const char *sid, uint64_t pos, const qitem_t *it)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        txn->ret = -ENOMEM;
        return;
    }
    sb_enc_map_open (e);
    sb_enc_kstr (e, "prompt_id", it->prompt_id);
    sb_enc_kstr (e, "text", it->text);
    sb_enc_kstr (e, "mode", it->mode);
    sb_enc_kuint (e, "created_at", it->created_at);
    sb_enc_kstr_opt (e, "approval_policy", it->policy);
    sb_enc_kstr_opt (e, "run_id", it->run_id);
    sb_queue_item_images (e, it);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_key_t k;
    sb_queue_key (&k, tag, sid);
    sb_key_u64 (&k, pos);
    sb_txn_put (txn, DBI_QUEUE, k.buf, k.len, data, len);
    sb_enc_destroy (&e);
}

void
sb_queue_item_images (sb_enc_t *e, const qitem_t *it)
{
    if (!it->images_len)
        return;
    sb_enc_key (e, "images");
    sb_enc_raw (e, it->images, it->images_len);
}

//  The images of a stored prompt, as their msgpack bytes in the drain's
//  arena (they go back into the store, or onto the tape, as they are).
static bool
s_item_images (self_t *self, const sb_val_t *d, qitem_t *it)
{
    const sb_val_t *iv = sb_get (d, "images");
    if (!iv || iv->type != SB_V_ARRAY || !iv->len)
        return true;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return false;
    sb_enc_val (e, iv);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    uint8_t *copy = sb_session_alloc (self, len);
    if (copy) {
        memcpy (copy, b, len);
        it->images = copy;
        it->images_len = len;
    }
    sb_enc_destroy (&e);
    return copy != NULL;
}

//  A stored prompt into *it, its strings copied into the drain's arena
//  (the store's pages move under a write transaction). False when it
//  does not decode.
bool
sb_queue_item_read (self_t *self, const sb_datum_t *v, qitem_t *it)
{
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (v->data, v->size, NULL, 0, &verr);
    const sb_val_t *d = sb_doc_root (doc);
    const sb_val_t *text = d? sb_get (d, "text"): NULL;
    const char *id = d? sb_get_str (d, "prompt_id"): NULL;
    memset (it, 0, sizeof *it);
    bool ok = id && text && text->type == SB_V_STR;
    if (ok) {
        const char *mode = sb_get_str (d, "mode"), *policy = sb_get_str (d, "approval_policy");
        const char *run = sb_get_str (d, "run_id");
        it->prompt_id = sb_session_strdup (self, id);
        it->text = sb_session_strdup (self, text->v.s);
        it->len = text->len;
        it->mode = sb_session_strdup (self, mode? mode: "queue");
        it->policy = policy? sb_session_strdup (self, policy): NULL;
        it->run_id = run? sb_session_strdup (self, run): NULL;
        it->created_at = sb_get_uint (d, "created_at", 0);
        ok = it->prompt_id && it->text && it->mode && (!policy || it->policy) && (!run || it->run_id)
          && s_item_images (self, d, it);
        it->len = text->len + it->images_len;
    }
    sb_doc_destroy (&doc);
    return ok;
}

//  Finds prompt `id` under `tag` and removes it: true with *out filled.
bool
sb_queue_item_take (self_t *self, sb_txn_t *txn, char tag, const char *sid, const char *id, qitem_t *out)
{
    sb_key_t prefix;
    sb_queue_key (&prefix, tag, sid);
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v)) {
        qitem_t item;
        if (!sb_queue_item_read (self, &v, &item) || strcmp (item.prompt_id, id) != 0)
            continue;
        sb_txn_iter_del (&it);
        sb_txn_iter_end (&it);
        *out = item;
        return txn->ret == 0;
    }
    return false;
}

//  --------------------------------------------------------------------------
//  Dropping a session's queue

void
sb_session_queue_drop (sb_txn_t *txn, const char *sid)
{
    const char tags [] = { 'Q', 'W' };
    for (size_t t = 0; t < sizeof tags; t++) {
        sb_key_t prefix;
        sb_queue_key (&prefix, tags [t], sid);
        sb_txn_iter_t it;
        sb_datum_t k, v;
        sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
        while (sb_txn_iter_next (&it, &k, &v))
            sb_txn_iter_del (&it);
    }
    sb_key_t k;
    sb_queue_key (&k, 'M', sid);
    sb_txn_del (txn, DBI_QUEUE, k.buf, k.len);
}

//  --------------------------------------------------------------------------
//  Reads

//  One page of a session's queue: its steers (tag 'W', positions from 1)
//  and then its prompts (tag 'Q', positions around Q_BASE). The cursor
//  (`after`, `next_after`) names a position in that one order, and stays
//  below 2^53 so a JSON client holds it exactly: a steer's is its
//  position (below Q_CURSOR_SPLIT), a prompt's its position moved from
//  Q_BASE to Q_CURSOR_BASE. A page ends at `limit` items or Q_PAGE_BYTES
//  (the reply is bounded like every message), and holds at least one
//  item, however large, so a reader always moves on.
#define Q_CURSOR_SPLIT  ((uint64_t) 1 << 51)
#define Q_CURSOR_BASE   ((uint64_t) 1 << 52)

typedef struct {
    uint64_t limit, n, last;    //  last: the cursor of the last item on the page
    size_t bytes;
    bool more;
} s_page_t;

//  Reads `tag`'s items from position `from` on into the page.
static void
s_read_items (sb_txn_t *txn, sb_enc_t *enc, char tag, const char *sid, uint64_t from, s_page_t *pg)
{
    sb_key_t prefix, start;
    sb_queue_key (&prefix, tag, sid);
    sb_queue_key (&start, tag, sid);
    sb_key_u64 (&start, from);
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_enc_array_open (enc);
    if (!pg->more)
        sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, start.buf, start.len);
    while (!pg->more && sb_txn_iter_next (&it, &k, &v)) {
        if (pg->n == pg->limit || (pg->n > 0 && pg->bytes + v.size > Q_PAGE_BYTES)) {
            pg->more = true;
            sb_txn_iter_end (&it);
            break;
        }
        sb_enc_raw (enc, v.data, v.size);
        pg->bytes += v.size;
        uint64_t pos = sb_key_read_u64 (&k, prefix.len);
        pg->last = tag == 'W' ? pos : pos - Q_BASE + Q_CURSOR_BASE;
        pg->n++;
    }
    sb_enc_array_close (enc);
}

void
sb_session_queue_read (self_t *self, sb_txn_t *txn, req_t *req)
{
    sb_datum_t v;
    if (!sb_session_record_load (txn, req, req->sid, &v))
        return;
    qmeta_t m;
    sb_queue_meta_load (txn, req->sid, &m);
    const sb_val_t *b = req->msg->body;
    uint64_t after = sb_get_uint (b, "after", 0);
    s_page_t pg = { .limit = sb_get_uint (b, "limit", (uint64_t) sb_schema_default ("session.queue.list", "limit")),
                    .last = after };
    //  where each list starts: past the cursor, or from its first item
    bool in_prompts = after >= Q_CURSOR_SPLIT;
    uint64_t qfrom = in_prompts ? after - Q_CURSOR_BASE + Q_BASE + 1 : 0;
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    //  steers come first in the cursor's order: they are read first
    sb_enc_key (self->enc, "steers");
    if (in_prompts) {
        sb_enc_array_open (self->enc);
        sb_enc_array_close (self->enc);
    }
    else
        s_read_items (txn, self->enc, 'W', req->sid, after + 1, &pg);
    sb_enc_key (self->enc, "prompts");
    s_read_items (txn, self->enc, 'Q', req->sid, qfrom, &pg);
    sb_enc_kbool (self->enc, "paused", m.paused);
    if (m.paused && m.reason [0])
        sb_enc_kstr (self->enc, "reason", m.reason);
    if (pg.more) {
        sb_enc_kbool (self->enc, "more", true);
        sb_enc_kuint (self->enc, "next_after", pg.last);
    }
    sb_enc_map_close (self->enc);
    if (txn->ret)
        return;
    size_t len;
    const uint8_t *data = sb_enc_data (self->enc, &len);
    sb_bus_reply (self->bus, req->msg, data, len);
}

//  --------------------------------------------------------------------------
//  Starting the next prompt

void
sb_session_queue_check (self_t *self, const char *sid)
{
    zlistx_add_end (self->q_pump, (void *) sid);
}

void
sb_session_queue_pump (self_t *self)
{
    if (!zlistx_size (self->q_pump))
        return;
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0) {
        zlistx_purge (self->q_pump);
        return;
    }
    for (const char *sid = zlistx_first (self->q_pump); sid; sid = zlistx_next (self->q_pump)) {
        if (zhashx_lookup (self->starting, sid))
            continue;
        sb_key_t rk;
        sb_datum_t v;
        sb_key_init (&rk, 'S');
        sb_key_str (&rk, sid);
        if (sb_txn_get (&txn, DBI_SESSIONS, rk.buf, rk.len, &v) != 0)
            continue;
        sb_verr_t verr;
        sb_doc_t *doc = sb_decode (v.data, v.size, sb_session_record_fields, 0, &verr);
        const sb_val_t *rec = sb_doc_root (doc);
        const char *status = sb_get_str (rec, "status"), *turn = sb_get_str (rec, "turn_status");
        bool ready = sb_session_status_from_name (status) == SB_SESSION_ACTIVE
                  && sb_turn_status_from_name (turn) == SB_TURN_IDLE;
        sb_doc_destroy (&doc);
        qmeta_t m;
        if (!ready || (sb_queue_meta_load (&txn, sid, &m), m.paused || !m.count))
            continue;
        sb_key_t prefix;
        sb_queue_key (&prefix, 'Q', sid);
        sb_txn_iter_t it;
        sb_datum_t k;
        sb_txn_iter_begin (&txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
        if (!sb_txn_iter_next (&it, &k, &v))
            continue;
        sb_txn_iter_end (&it);
        doc = sb_decode (v.data, v.size, NULL, 0, &verr);
        const sb_val_t *item = sb_doc_root (doc);
        const char *id = sb_get_str (item, "prompt_id"), *text = sb_get_str (item, "text");
        if (id && text && !sb_session_prompt_start (self, sid, id, text, sb_get (item, "images"),
                                                    sb_get_str (item, "approval_policy")))
            sb_warn (ACTOR, "cannot send run.request for queued prompt session=%s prompt=%s", sid, id);
        sb_doc_destroy (&doc);
    }
    sb_txn_abort (&txn);
    zlistx_purge (self->q_pump);
}

//  --------------------------------------------------------------------------
//  Internal requests and startup

sb_msg_t *
sb_session_queue_msg (const char *type, const uint8_t *body, size_t len)
{
    sb_msg_t *msg = calloc (1, sizeof *msg);
    if (!msg)
        return NULL;
    sb_verr_t verr;
    msg->doc = sb_decode (body, len, NULL, 0, &verr);
    if (!msg->doc) {
        free (msg);
        return NULL;
    }
    msg->body = sb_doc_root (msg->doc);
    snprintf (msg->h.type, sizeof msg->h.type, "%s", type);
    snprintf (msg->h.from, sizeof msg->h.from, "%s", ACTOR);
    msg->h.ts = sb_now_ms ();
    return msg;
}

size_t
sb_session_queue_recover (self_t *self)
{
    zlistx_t *sids = zlistx_new ();
    if (!sids)
        return 0;
    zlistx_set_destructor (sids, (czmq_destructor *) zstr_free);
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) == 0) {
        sb_key_t prefix;
        sb_key_init (&prefix, 'M');
        sb_txn_iter_t it;
        sb_datum_t k, v;
        sb_txn_iter_begin (&txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
        while (sb_txn_iter_next (&it, &k, &v))
            if (k.size >= 2 && ((const char *) k.data) [k.size - 1] == 0)
                zlistx_add_end (sids, strndup ((const char *) k.data + 1, k.size - 2));
        sb_txn_abort (&txn);
    }
    size_t n = 0;
    for (const char *sid = zlistx_first (sids); sid; sid = zlistx_next (sids)) {
        sb_enc_t *e = sb_enc_new ();
        if (!e)
            break;
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", sid);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *msg = sb_session_queue_msg ("session.queue.restart", b, len);
        sb_enc_destroy (&e);
        if (msg && sb_session_take (self, &msg, OP_Q_RESTART))
            n++;
        sb_msg_destroy (&msg);
    }
    zlistx_destroy (&sids);
    if (n)
        sb_info (ACTOR, "queues held at restart sessions=%zu", n);
    return n;
}

//  session.steer.take comes before every model call of every run, and
//  nearly always finds nothing: then it is answered at once from a read
//  transaction, without waiting for a drain's commit. A steer that is
//  being written meanwhile is taken at the next boundary. True when
//  answered.
bool
sb_session_queue_take_none (self_t *self, const sb_msg_t *msg)
{
    const char *sid = sb_get_str (msg->body, "session_id");
    if (!sid || strlen (sid) != SB_ULID_LEN || !sb_ulid_valid (sid))
        return false;           //  the drain refuses it, saying why
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0)
        return false;
    qmeta_t m;
    sb_queue_meta_load (&txn, sid, &m);
    sb_key_t k;
    sb_queue_key (&k, 'S', sid);
    sb_datum_t v;
    bool known = sb_txn_get (&txn, DBI_SESSIONS, k.buf, k.len, &v) == 0;
    sb_txn_abort (&txn);
    if (!known || m.steers)
        return false;
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_kuint (self->enc, "taken", 0);
    sb_enc_map_close (self->enc);
    size_t len;
    const uint8_t *b = sb_enc_data (self->enc, &len);
    sb_bus_reply (self->bus, msg, b, len);
    return true;
}

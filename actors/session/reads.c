/*  actors/session/reads.c — the session service's reads: session.get,
    session.list and session.events (session.queue.list is the queue's,
    actors/session/queue_store.c). They are answered from a read transaction
    after the drain's commit, so they see everything committed, the
    drain's own writes included (actors/session.c). */
#include "actors/session/session_impl.h"
#include "schemas/types.h"

#include <string.h>

//  Sends what self->enc holds as req's reply.
static void
s_send_enc (self_t *self, req_t *req)
{
    size_t len;
    const uint8_t *data = sb_enc_data (self->enc, &len);
    sb_bus_reply (self->bus, req->msg, data, len);
}

//  session.get: the stored record, as it is.
void
sb_session_read_get (self_t *self, sb_txn_t *txn, req_t *req)
{
    sb_datum_t v;
    if (!sb_session_record_load (txn, req, req->sid, &v))
        return;
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_key (self->enc, "session");
    sb_enc_raw (self->enc, v.data, v.size);
    sb_enc_map_close (self->enc);
    s_send_enc (self, req);
}

//  session.list: a page of records, newest first, by status or all,
//  narrowed by an id prefix, below a cursor.
void
sb_session_read_list (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    const char *status = sb_get_str (b, "status");
    const char *cursor = sb_get_str (b, "cursor");
    //  The codec refused a limit outside the schema's range, and a status
    //  other than active or closed (an ENUM row), already.
    uint64_t limit = sb_get_uint (b, "limit", (uint64_t) sb_schema_default ("session.list", "limit"));
    if (cursor && (strlen (cursor) != SB_ULID_LEN || !sb_ulid_valid (cursor))) {
        sb_session_fail (req, SB_E_invalid, "cursor is not a session id from next_cursor");
        return;
    }
    const char *id_prefix = sb_get_str (b, "id_prefix");
    if (id_prefix && !sb_ulid_prefix_valid (id_prefix)) {
        sb_session_fail (req, SB_E_invalid, "id_prefix must be the start of a session id");
        return;
    }

    //  By status, walk the index; else the records themselves. Both are in
    //  session id order, which is creation order (ULIDs).
    sb_key_t prefix;
    unsigned dbi = status? DBI_STATUS: DBI_SESSIONS;
    if (status)
        s_key_status (&prefix, status, NULL);
    else
        sb_key_init (&prefix, 'S');
    //  An id prefix narrows the scan to its own key range: ids are the
    //  key's last field, so the prefix bytes extend the key prefix.
    size_t id_at = prefix.len;
    if (id_prefix)
        sb_key_bytes (&prefix, id_prefix, strlen (id_prefix));

    //  Newest first: a page is the `limit` greatest ids below the cursor.
    //  The store iterates forwards only, so the walk keeps the last
    //  limit + 1 keys it passes in a ring and stops at the cursor: one pass
    //  over the keys, and no record is read but the page's. Pointers into
    //  a read transaction stay valid until it ends.
    typedef struct { const char *sid; sb_datum_t val; } seen_t;
    size_t cap = (size_t) limit + 1;
    seen_t *ring = sb_session_alloc (self, cap * sizeof *ring);
    if (!ring) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, dbi, prefix.buf, prefix.len, NULL, 0);
    sb_datum_t k, v;
    size_t seen = 0;
    while (sb_txn_iter_next (&it, &k, &v)) {
        //  The session id is the key's last field.
        const char *sid = (const char *) k.data + id_at;
        if (cursor && strcmp (sid, cursor) >= 0) {
            sb_txn_iter_end (&it);
            break;
        }
        ring [seen++ % cap] = (seen_t) { sid, status? (sb_datum_t) { 0, NULL }: v };
    }
    if (txn->ret)
        return;
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_key (self->enc, "sessions");
    sb_enc_array_open (self->enc);
    size_t n = seen < limit? seen: (size_t) limit;
    //  Records with many rules are large: a page also ends at a byte
    //  budget, so that it always fits one reply.
    size_t bytes = 0, j = 0;
    const char *short_cursor = NULL;
    for (; j < n; j++) {
        seen_t *e = &ring [(seen - 1 - j) % cap];
        if (status) {
            sb_key_t rk;
            s_key_session (&rk, e->sid);
            if (sb_txn_get (txn, DBI_SESSIONS, rk.buf, rk.len, &e->val) != 0)
                continue;
        }
        if (j > 0 && bytes + e->val.size > LIST_BYTES_MAX) {
            short_cursor = ring [(seen - j) % cap].sid;
            break;
        }
        bytes += e->val.size;
        sb_enc_raw (self->enc, e->val.data, e->val.size);
    }
    if (txn->ret)
        return;
    sb_enc_array_close (self->enc);
    //  More than a page was passed: the older ones start below the page's
    //  oldest id.
    if (short_cursor)
        sb_enc_kstr (self->enc, "next_cursor", short_cursor);
    else
    if (seen > limit)
        sb_enc_kstr (self->enc, "next_cursor", ring [(seen - limit) % cap].sid);
    sb_enc_map_close (self->enc);
    s_send_enc (self, req);
}

//  session.events: a page of the tape after after_seq, bounded by count
//  and bytes.
void
sb_session_read_events (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    uint64_t after = sb_get_uint (b, "after_seq", 0);
    uint64_t limit = sb_get_uint (b, "limit", (uint64_t) sb_schema_default ("session.events", "limit"));
    sb_datum_t v;
    if (!sb_session_record_load (txn, req, req->sid, &v))
        return;
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (v.data, v.size, sb_session_record_fields, 0, &verr);
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
        sb_datum_t tk, tv;
        while (sb_txn_iter_next (&it, &tk, &tv)) {
            //  A page holds at least one entry, however large, so that a
            //  reader always moves on.
            if (n == limit || (n > 0 && bytes + tv.size > SB_SESSION_EVENTS_BYTES_MAX)) {
                sb_txn_iter_end (&it);
                break;
            }
            sb_enc_raw (self->enc, tv.data, tv.size);
            bytes += tv.size;
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


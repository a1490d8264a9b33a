/*  actors/session/attach.c — session.attach: a file the person attaches
    becomes an artifact of the session (docs/images.md).

    The bytes are stored first by blob.put (its caps and quotas); this
    checks the session holds the blob and appends an `artifact` entry
    whose body is {artifact: the reference, by: "person"}, as the model's
    attach_file puts its reference in its tool.result. */
#include "actors/session/session_impl.h"
#include "common/blob_ref.h"
#include "schemas/vocab.h"

#include <string.h>

void
sb_session_prepare_attach (self_t *self, req_t *req)
{
    const char *hex = sb_get_str (req->msg->body, "sha256");
    if (!hex || !sb_blob_hex_ok (hex)) {
        sb_session_fail (req, SB_E_invalid, "sha256 must be 64 lowercase hex digits");
        return;
    }
    sb_blob_info_t info;
    if (!sb_blob_held (self->blob_dir, req->sid, hex, &info))
        sb_session_fail (req, SB_E_not_found, "session %s holds no blob %.16s... (store it with blob.put first)",
                         req->sid, hex);
}

void
sb_session_write_attach (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = sb_session_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    if (sb_session_status_from_name (r->status) == SB_SESSION_CLOSED) {
        sb_session_fail (req, SB_E_conflict, "session %s is closed; it takes no more attachments", req->sid);
        return;
    }
    const char *hex = sb_get_str (req->msg->body, "sha256");
    const char *name = sb_get_str (req->msg->body, "name");
    sb_blob_info_t info;
    if (!sb_blob_held (self->blob_dir, req->sid, hex, &info)) {
        sb_session_fail (req, SB_E_not_found, "session %s holds no blob %.16s...", req->sid, hex);
        return;
    }
    sb_enc_reset (self->scratch);
    sb_enc_map_open (self->scratch);
    sb_enc_key (self->scratch, "artifact");
    sb_blob_encode_ref_map (self->scratch, &info, name, NULL);
    sb_enc_kstr (self->scratch, "by", "person");
    sb_enc_map_close (self->scratch);
    size_t len;
    const uint8_t *body = sb_enc_data (self->scratch, &len);
    uint64_t seq = ++r->last_seq;
    sb_session_tape_put (self, txn, req, r, seq, "artifact", body, len);
    r->tape_bytes += len;
    r->last_activity_at = self->now;

    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    sb_enc_kuint (self->replies, "seq", seq);
    sb_enc_key (self->replies, "artifact");
    sb_blob_encode_ref_map (self->replies, &info, name, NULL);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

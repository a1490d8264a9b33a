/*  actors/blob.c — the blob service: blob.put, blob.get, blob.stats over
    the blob store (common/blob.h, docs/images.md).

    One owner writes the store: this actor. A put is sniffed, checked
    against the caps and quotas, written atomically and referenced from
    its session; an image over the models' limits (SB_IMAGE_SEND_SIDE,
    SB_IMAGE_SEND_BYTES) gets a downscaled copy at once, so that nothing
    later (the context, llm.stream, a worker) carries more than a model
    takes. A get is served only to a request that names a session holding
    the blob: a hash alone is no credential.

    Collection: the session service removes a deleted session's refs file;
    this actor sweeps at start and whenever the refs folder changed. */
#include "actors/actor.h"
#include "common/blob_ref.h"
#include "bus/client.h"
#include "common/blob.h"
#include "common/image.h"
#include "common/log.h"
#include "schemas/types.h"

#include <string.h>
#include <sys/stat.h>

#define ACTOR "blob"

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_enc_t *enc;
    sb_blobs_t *blobs;
    char instance [129];
    struct timespec refs_mtime; //  of DATA/blobs/refs at the last sweep
    int64_t next_check;         //  mono ms
    uint64_t swept;
    bool terminated;
} self_t;

static void
s_self_destroy (self_t **self_p)
{
    if (*self_p) {
        sb_bus_destroy (&(*self_p)->bus);
        sb_enc_destroy (&(*self_p)->enc);
        sb_blobs_destroy (&(*self_p)->blobs);
        free (*self_p);
        *self_p = NULL;
    }
}

static self_t *
s_self_new (zsock_t *pipe, const sb_actor_args_t *args)
{
    self_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "blob");
    char err [512] = "";
    if (!args->data_dir)
        snprintf (err, sizeof err, "the blob service needs DATA");
    else
        self->blobs = sb_blobs_open (args->data_dir, err, sizeof err);
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    if (!self->blobs || !self->bus || !self->enc) {
        sb_error (ACTOR, "cannot start error=\"%s\"", err [0] ? err : "out of memory");
        s_self_destroy (&self);
        return NULL;
    }
    //  The caps (docs/images.md), in bytes; out-of-range values keep the
    //  defaults.
    sb_blobs_set_limits (self->blobs,
        sb_actor_limit (ACTOR, 0, "SWITCHBOARD_BLOB_MAX", SB_BLOB_MAX_DEFAULT, 1, SB_BLOB_BYTES_MAX),
        sb_actor_limit (ACTOR, 0, "SWITCHBOARD_BLOB_SESSION_QUOTA", SB_BLOB_SESSION_QUOTA_DEFAULT, 1, SB_COUNT_MAX),
        sb_actor_limit (ACTOR, 0, "SWITCHBOARD_BLOB_TOTAL_QUOTA", SB_BLOB_TOTAL_QUOTA_DEFAULT, 1, SB_COUNT_MAX));
    return self;
}

//  Sweeps when the refs folder changed (a session was deleted) since the
//  last sweep; once a second at most.
static void
s_maybe_sweep (self_t *self, bool force)
{
    int64_t now = sb_mono_ms ();
    if (!force && now < self->next_check)
        return;
    self->next_check = now + 1000;
    char refs [4300];
    snprintf (refs, sizeof refs, "%s/refs", sb_blobs_dir (self->blobs));
    struct stat st;
    if (stat (refs, &st))
        return;
    if (!force && st.st_mtim.tv_sec == self->refs_mtime.tv_sec && st.st_mtim.tv_nsec == self->refs_mtime.tv_nsec)
        return;
    self->refs_mtime = st.st_mtim;
    size_t n = sb_blobs_sweep (self->blobs);
    self->swept += n;
    if (n)
        sb_info (ACTOR, "swept blobs=%zu", n);
}

//  An image over what models take gets its downscaled copy, stored and
//  held for the same session. False with a reason when it cannot be made.
static bool
s_sent_copy (self_t *self, const char *sid, const uint8_t *data, size_t len, const sb_blob_info_t *info,
             sb_blob_info_t *sent, const char **code, char *err, size_t errlen)
{
    if (!sb_blob_is_image (info->mime)
        || (info->width <= SB_IMAGE_SEND_SIDE && info->height <= SB_IMAGE_SEND_SIDE && len <= SB_IMAGE_SEND_BYTES))
        return false;
    char have [SB_BLOB_HEX + 1];
    if (sb_blobs_sent_of (sb_blobs_dir (self->blobs), info->sha256, have)
        && sb_blob_held (sb_blobs_dir (self->blobs), sid, have, sent))
        return true;
    size_t out_len;
    uint32_t w, h;
    int64_t t0 = sb_mono_ms ();
    uint8_t *small = sb_image_downscale (data, len, info->mime, SB_IMAGE_SEND_SIDE, SB_IMAGE_SEND_BYTES, &out_len,
                                         &w, &h, err, errlen);
    if (!small) {
        *code = "invalid";
        return false;
    }
    int rc = sb_blobs_put (self->blobs, sid, small, out_len, sent, code, err, errlen);
    free (small);
    if (rc || sb_blobs_set_sent (self->blobs, info->sha256, sent->sha256)) {
        if (!rc) {
            *code = "internal";
            snprintf (err, errlen, "cannot record the downscaled copy");
        }
        return false;
    }
    sb_info (ACTOR, "downscaled %ux%u to %ux%u bytes=%llu->%llu ms=%lld", info->width, info->height, w, h,
             (unsigned long long) len, (unsigned long long) out_len, (long long) (sb_mono_ms () - t0));
    return true;
}

static void
s_handle_put (self_t *self, sb_msg_t *msg)
{
    const char *sid = sb_get_str (msg->body, "session_id");
    const char *name = sb_get_str (msg->body, "name");
    const sb_val_t *data = sb_get (msg->body, "data");
    sb_blob_info_t info, sent;
    const char *code = "internal";
    char err [512] = "";
    if (sb_blobs_put (self->blobs, sid, (const uint8_t *) data->v.s, data->len, &info, &code, err, sizeof err)) {
        sb_bus_error (self->bus, msg, sb_err_from_name (code), "%s", err);
        return;
    }
    bool has_sent = s_sent_copy (self, sid, (const uint8_t *) data->v.s, data->len, &info, &sent, &code, err,
                                 sizeof err);
    if (!has_sent && err [0]) {
        //  An image no model can be sent: it is kept (it may be an
        //  artifact), and the prompt that names it is refused.
        sb_info (ACTOR, "no downscaled copy sha256=%s error=\"%s\"", info.sha256, err);
    }
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "blob");
    sb_blob_encode_ref_map (e, &info, name, has_sent ? &sent : NULL);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

static void
s_handle_get (self_t *self, sb_msg_t *msg)
{
    const char *sid = sb_get_str (msg->body, "session_id");
    const char *hex = sb_get_str (msg->body, "sha256");
    sb_blob_info_t info;
    if (!sb_blob_hex_ok (hex)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "sha256 must be 64 lowercase hex digits");
        return;
    }
    if (!sb_blob_held (sb_blobs_dir (self->blobs), sid, hex, &info)) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "session %s holds no blob %s", sid, hex);
        return;
    }
    size_t len;
    uint8_t *data = sb_blob_read (sb_blobs_dir (self->blobs), hex, SB_BLOB_BYTES_MAX, &len);
    if (!data) {
        sb_bus_error (self->bus, msg, SB_E_internal, "cannot read blob %s: %s", hex, strerror (errno));
        return;
    }
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "blob");
    sb_blob_encode_ref_map (e, &info, NULL, NULL);
    sb_enc_key (e, "data");
    sb_enc_bin (e, data, len);
    sb_enc_map_close (e);
    free (data);
    size_t blen;
    const uint8_t *b = sb_enc_data (e, &blen);
    sb_bus_reply (self->bus, msg, b, blen);
}

static void
s_handle_stats (self_t *self, sb_msg_t *msg)
{
    uint64_t count, bytes, refused;
    sb_blobs_totals (self->blobs, &count, &bytes, &refused);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kuint (e, "blobs", count);
    sb_enc_kuint (e, "bytes", bytes);
    sb_enc_kuint (e, "refused", refused);
    sb_enc_kuint (e, "swept", self->swept);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

typedef void (s_handler_fn) (self_t *self, sb_msg_t *msg);

const sb_dispatch_t sb_blob_dispatch [] = {
    SB_DISPATCH ("blob.put", s_handle_put),
    SB_DISPATCH ("blob.get", s_handle_get),
    SB_DISPATCH ("blob.stats", s_handle_stats),
    SB_DISPATCH_END
};

static void
s_handle_request (self_t *self, sb_msg_t *msg)
{
    const sb_dispatch_t *row = sb_dispatch_find (sb_blob_dispatch, msg->h.type);
    if (row)
        ((s_handler_fn *) row->fn) (self, msg);
    else
        sb_bus_error (self->bus, msg, SB_E_unknown_type, "the blob service does not serve %s", msg->h.type);
}

void
sb_blob_actor (zsock_t *pipe, void *args)
{
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    s_maybe_sweep (self, true);
    if (sb_actor_register (pipe, self->bus, "blob", self->instance, NULL, 0)) {
        s_self_destroy (&self);
        return;
    }
    while (!self->terminated) {
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
        };
        long wait = sb_bus_has_queued (self->bus) ? 0 : (long) sb_bus_tick (self->bus);
        if (wait > 1000)
            wait = 1000;
        if (zmq_poll (items, 2, wait) < 0 && errno != EINTR)
            break;
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        sb_msg_t *msg;
        while ((msg = sb_bus_recv (self->bus, 0))) {
            if (msg->route)
                s_handle_request (self, msg);
            sb_msg_destroy (&msg);
        }
        s_maybe_sweep (self, false);
    }
    s_self_destroy (&self);
}

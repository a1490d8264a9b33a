/*  actors/exec/blobs.c — a run's blobs by hash (actors/exec/blobs.h). */
#include "actors/exec/blobs.h"
#include "actors/exec/agent.h"
#include "common/blob.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

//  What one image may be when it reaches a model (llm.stream's limit).
#define S_IMAGE_MAX (4u << 20)

uint8_t *
sb_exec_blob_load (void *arg, const char *sha256, size_t *len)
{
    sb_exec_run_t *run = arg;
    if (run->data_dir) {
        char dir [4200];
        snprintf (dir, sizeof dir, "%s/blobs", run->data_dir);
        //  A run reads only what its session holds, as blob.get answers:
        //  a run.request naming another session's blob gets nothing.
        sb_blob_info_t held;
        if (!sb_blob_held (dir, run->session_id, sha256, &held)) {
            sb_warn ("exec", "session %s holds no blob sha256=%s run=%s", run->session_id, sha256, run->run_id);
            return NULL;
        }
        uint8_t *data = sb_blob_read (dir, sha256, S_IMAGE_MAX, len);
        if (data)
            return data;
        if (errno != ENOENT) {
            sb_warn ("exec", "cannot read blob sha256=%s run=%s error=\"%s\"", sha256, run->run_id, strerror (errno));
            return NULL;
        }
    }
    //  A worker (or an executor on another host): the control plane's copy.
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return NULL;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_kstr (e, "sha256", sha256);
    sb_enc_map_close (e);
    size_t blen;
    const uint8_t *b = sb_enc_data (e, &blen);
    sb_msg_t *reply = sb_bus_call (run->bus, "blob.get", run->session_id, b, blen, SB_EXEC_CALL_MS);
    sb_enc_destroy (&e);
    uint8_t *data = NULL;
    size_t dlen = 0;
    const char *bytes = reply && !sb_msg_is_error (reply) ? sb_get_bin (reply->body, "data", &dlen) : NULL;
    if (bytes && dlen <= S_IMAGE_MAX && (data = malloc (dlen ? dlen : 1))) {
        memcpy (data, bytes, dlen);
        *len = dlen;
    }
    else
        sb_warn ("exec", "blob.get failed sha256=%s run=%s error=\"%s\"", sha256, run->run_id,
                 reply ? sb_msg_error_message (reply) : bytes ? "too large" : "no reply");
    sb_msg_destroy (&reply);
    return data;
}

int
sb_exec_blob_attach (void *arg, const uint8_t *data, size_t len, const char *name, const char *description,
                     sb_enc_t *entry)
{
    sb_exec_run_t *run = arg;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return -1;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_kstr_opt (e, "name", name);
    sb_enc_key (e, "data");
    sb_enc_bin (e, data, len);
    sb_enc_map_close (e);
    size_t blen;
    const uint8_t *b = sb_enc_data (e, &blen);
    sb_msg_t *reply = sb_bus_call (run->bus, "blob.put", run->session_id, b, blen, SB_EXEC_CALL_MS);
    sb_enc_destroy (&e);
    const sb_val_t *blob = reply && !sb_msg_is_error (reply) ? sb_get_map (reply->body, "blob") : NULL;
    if (blob && description) {
        //  attach_file: one artifact, not an image for the model's context
        sb_enc_key (entry, "artifact");
        sb_enc_val (entry, blob);
        if (description [0])
            sb_enc_kstr (entry, "description", description);
    }
    else if (blob) {
        sb_enc_key (entry, "images");
        sb_enc_array_open (entry);
        sb_enc_val (entry, blob);
        sb_enc_array_close (entry);
    }
    else
        sb_warn ("exec", "blob.put failed run=%s error=\"%s\"", run->run_id,
                 reply ? sb_msg_error_message (reply) : "no reply");
    sb_msg_destroy (&reply);
    return blob ? 0 : -1;
}

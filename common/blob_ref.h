/*  common/blob_ref.h — blob references in messages, shared by the blob and
    session services:
    the image reference as it goes on the tape and in run.request
    (sb_blob_ref_fields, schemas/types_blob.c). */
#ifndef SB_BLOB_REF_H
#define SB_BLOB_REF_H

#include "common/blob.h"
#include "schemas/codec.h"

/*  Writes the fields of a reference into the open map of e: sha256, mime,
    bytes, width and height for an image, and name when not NULL. */
void sb_blob_encode_ref (sb_enc_t *e, const sb_blob_info_t *b, const char *name);

/*  The same as a map of its own, with `sent` (the downscaled copy) when
    not NULL. */
void sb_blob_encode_ref_map (sb_enc_t *e, const sb_blob_info_t *b, const char *name, const sb_blob_info_t *sent);

/*  Checks that session sid holds image hex and that a model can be sent
    it: the image itself, within SB_IMAGE_SEND_*, or its downscaled copy
    (*has_sent, with *sent filled). -1 with a reason for people in err
    otherwise. Reads refs files only (any thread). */
int sb_blob_resolve_image (const char *blob_dir, const char *sid, const char *hex, sb_blob_info_t *info,
                           sb_blob_info_t *sent, bool *has_sent, char *err, size_t errlen);

/*  Encodes the `images` array of a session.prompt ({sha256, name}) as the
    key "images" and the references the tape keeps, each checked with
    sb_blob_resolve_image. Nothing when images is NULL or empty. -1 with
    the reason in err (e is then left mid-map: the caller drops it). */
int sb_blob_encode_images (sb_enc_t *e, const char *blob_dir, const char *sid, const sb_val_t *images, char *err,
                           size_t errlen);

/*  The same references as one array of its own (no key): what a queued
    prompt keeps (actors/session/queue.c). images must be an array. */
int sb_blob_encode_image_array (sb_enc_t *e, const char *blob_dir, const char *sid, const sb_val_t *images,
                                char *err, size_t errlen);

#endif

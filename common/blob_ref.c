/*  common/blob_ref.c — blob references in messages (common/blob_ref.h). */
#include "common/blob_ref.h"

#include <stdio.h>
#include <string.h>

void
sb_blob_encode_ref (sb_enc_t *e, const sb_blob_info_t *b, const char *name)
{
    sb_enc_kstr (e, "sha256", b->sha256);
    sb_enc_kstr (e, "mime", b->mime);
    sb_enc_kuint (e, "bytes", b->bytes);
    if (b->width) {
        sb_enc_kuint (e, "width", b->width);
        sb_enc_kuint (e, "height", b->height);
    }
    sb_enc_kstr_opt (e, "name", name);
}

void
sb_blob_encode_ref_map (sb_enc_t *e, const sb_blob_info_t *b, const char *name, const sb_blob_info_t *sent)
{
    sb_enc_map_open (e);
    sb_blob_encode_ref (e, b, name);
    if (sent) {
        sb_enc_key (e, "sent");
        sb_enc_map_open (e);
        sb_blob_encode_ref (e, sent, NULL);
        sb_enc_map_close (e);
    }
    sb_enc_map_close (e);
}

int
sb_blob_resolve_image (const char *blob_dir, const char *sid, const char *hex, sb_blob_info_t *info,
                       sb_blob_info_t *sent, bool *has_sent, char *err, size_t errlen)
{
    *has_sent = false;
    if (!sb_blob_hex_ok (hex)) {
        snprintf (err, errlen, "image %.64s: sha256 must be 64 lowercase hex digits", hex ? hex : "");
        return -1;
    }
    if (!sb_blob_held (blob_dir, sid, hex, info)) {
        snprintf (err, errlen, "image %.12s: session %s holds no such blob (put it with blob.put first)", hex, sid);
        return -1;
    }
    if (!sb_blob_is_image (info->mime)) {
        snprintf (err, errlen, "image %.12s is not an image: its bytes are %s", hex, info->mime);
        return -1;
    }
    if (info->width <= SB_IMAGE_SEND_SIDE && info->height <= SB_IMAGE_SEND_SIDE && info->bytes <= SB_IMAGE_SEND_BYTES)
        return 0;
    char small [SB_BLOB_HEX + 1];
    if (sb_blobs_sent_of (blob_dir, hex, small) && sb_blob_held (blob_dir, sid, small, sent)) {
        *has_sent = true;
        return 0;
    }
    snprintf (err, errlen, "image %.12s (%s, %ux%u, %llu bytes) is over what models take (%u px a side, %u bytes) "
              "and could not be downscaled (see the blob service's log)", hex, info->mime, info->width, info->height,
              (unsigned long long) info->bytes, SB_IMAGE_SEND_SIDE, SB_IMAGE_SEND_BYTES);
    return -1;
}

int
sb_blob_encode_images (sb_enc_t *e, const char *blob_dir, const char *sid, const sb_val_t *images, char *err,
                       size_t errlen)
{
    if (!images || images->type != SB_V_ARRAY || images->len == 0)
        return 0;
    sb_enc_key (e, "images");
    return sb_blob_encode_image_array (e, blob_dir, sid, images, err, errlen);
}

int
sb_blob_encode_image_array (sb_enc_t *e, const char *blob_dir, const char *sid, const sb_val_t *images, char *err,
                            size_t errlen)
{
    sb_enc_array_open (e);
    for (uint32_t k = 0; k < images->len; k++) {
        const sb_val_t *im = &images->v.a [k];
        sb_blob_info_t info, sent;
        bool has_sent;
        if (sb_blob_resolve_image (blob_dir, sid, sb_get_str (im, "sha256"), &info, &sent, &has_sent, err, errlen))
            return -1;
        sb_blob_encode_ref_map (e, &info, sb_get_str (im, "name"), has_sent ? &sent : NULL);
    }
    sb_enc_array_close (e);
    return 0;
}

/*  common/image.h — downscaling an image for a model: PNG, JPEG, GIF (its
    first frame) and WebP decoded with libpng, libjpeg, giflib and libwebp
    (Debian's), shrunk with a box filter so that the longest side is at
    most a limit, and encoded as JPEG.

    The caller has sniffed the image first (common/blob.h): its dimensions
    are within SB_IMAGE_SIDE_MAX and SB_IMAGE_PIXELS_MAX, and this checks
    again what the decoder reports before it allocates the pixels. Any
    thread. */
#ifndef SB_IMAGE_H
#define SB_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/*  A JPEG of the image in data (image/png, image/jpeg, image/gif or
    image/webp; an animated WebP is refused), its longest side
    at most max_side and its size at most max_bytes (the quality is
    lowered, then the size halved, until it fits). Returns a new buffer
    (the caller frees it) of *out_len bytes with its dimensions in *w and
    *h, or NULL with a reason in err. */
uint8_t *sb_image_downscale (const uint8_t *data, size_t len, const char *mime, uint32_t max_side, size_t max_bytes,
                             size_t *out_len, uint32_t *w, uint32_t *h, char *err, size_t errlen);

/*  The RGB pixels (3 bytes each, transparency over white) of a GIF's
    first frame on its canvas, or of a still WebP: a new buffer the caller
    frees, its dimensions in *w and *h, or NULL with a reason in err. The
    header's dimensions are checked against SB_IMAGE_SIDE_MAX and
    SB_IMAGE_PIXELS_MAX before anything is allocated
    (common/image_gif_webp.c). */
uint8_t *sb_image_decode_gif (const uint8_t *data, size_t len, uint32_t *w, uint32_t *h, char *err, size_t errlen);
uint8_t *sb_image_decode_webp (const uint8_t *data, size_t len, uint32_t *w, uint32_t *h, char *err, size_t errlen);

#endif

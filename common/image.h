/*  common/image.h — downscaling an image for a model: PNG and JPEG
    decoded with libpng and libjpeg (Debian's), shrunk with a box filter
    so that the longest side is at most a limit, and encoded as JPEG.

    The caller has sniffed the image first (common/blob.h): its dimensions
    are within SB_IMAGE_SIDE_MAX and SB_IMAGE_PIXELS_MAX, and this checks
    again what the decoder reports before it allocates the pixels. Any
    thread. */
#ifndef SB_IMAGE_H
#define SB_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/*  A JPEG of the image in data (image/png or image/jpeg), its longest side
    at most max_side and its size at most max_bytes (the quality is
    lowered, then the size halved, until it fits). Returns a new buffer
    (the caller frees it) of *out_len bytes with its dimensions in *w and
    *h, or NULL with a reason in err. */
uint8_t *sb_image_downscale (const uint8_t *data, size_t len, const char *mime, uint32_t max_side, size_t max_bytes,
                             size_t *out_len, uint32_t *w, uint32_t *h, char *err, size_t errlen);

#endif

/*  tests/fuzz/fuzz_blob_sniff.c — the mime sniffer and image checks of the
    blob store against hostile bytes (common/blob.h), and the downscaler
    behind them for what they pass (common/image.h).

    Input: a file's bytes, any. Whatever they are:
    - sniffing ends, reads within the input, and names one of its types;
    - an image it passes has dimensions within SB_IMAGE_SIDE_MAX and
      SB_IMAGE_PIXELS_MAX, and no other type has any;
    - the downscaler, given a PNG, JPEG, GIF or WebP the sniffer passed, fails
      cleanly or returns a JPEG within the sizes it was asked for.
*/
#include "common/blob.h"
#include "common/image.h"

#include <stdlib.h>
#include <string.h>

static const char *s_types [] = { "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf",
                                  "text/plain", "application/octet-stream", NULL };

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    //  The sniffer must not read past what it is given: a heap copy of
    //  exactly `size` bytes lets ASan see any overread.
    uint8_t *copy = malloc (size ? size : 1);
    if (!copy)
        return 0;
    memcpy (copy, data, size);
    sb_blob_info_t info;
    char err [256];
    int rc = sb_blob_sniff (copy, size, &info, err, sizeof err);
    bool known = false;
    for (int k = 0; s_types [k]; k++)
        known |= strcmp (info.mime, s_types [k]) == 0;
    if (!known || info.bytes != size)
        abort ();
    if (rc == 0 && sb_blob_is_image (info.mime)) {
        if (!info.width || !info.height || info.width > SB_IMAGE_SIDE_MAX || info.height > SB_IMAGE_SIDE_MAX
            || (uint64_t) info.width * info.height > SB_IMAGE_PIXELS_MAX)
            abort ();
        //  Decoding is bounded by the sniffed size; keep each run quick.
        if ((uint64_t) info.width * info.height <= (1u << 20)) {
            size_t out_len;
            uint32_t w, h;
            uint8_t *small = sb_image_downscale (copy, size, info.mime, 64, 64 * 1024, &out_len, &w, &h, err,
                                                 sizeof err);
            if (small && (w > 64 || h > 64 || out_len > 64 * 1024 || out_len < 3 || small [0] != 0xFF))
                abort ();
            free (small);
        }
    }
    else
    if (rc == 0 && (info.width || info.height))
        abort ();
    free (copy);
    return 0;
}

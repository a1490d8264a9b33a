/*  tests/unit/test_image.c — GIF and WebP through the downscaler
    (common/image.h): large ones made here with giflib's and libwebp's
    encoders are brought within the limits models take, the decoders'
    pixels are exact (an interlaced GIF with a transparent colour, a WebP
    with alpha, both over white), and cut-short or hostile files (a frame
    or a canvas larger than images may be, dimensions patched past the
    limits) are refused with a reason before anything large is
    allocated. */
#include <criterion/criterion.h>
#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/encode.h>

#include "common/blob.h"
#include "common/image.h"

typedef struct {
    uint8_t *data;
    size_t len, cap;
} s_buf_t;

static int
s_gif_write (GifFileType *gif, const GifByteType *data, int n)
{
    s_buf_t *b = gif->UserData;
    if (b->len + (size_t) n > b->cap) {
        b->cap = (b->len + (size_t) n) * 2;
        b->data = realloc (b->data, b->cap);
        cr_assert_not_null (b->data);
    }
    memcpy (b->data + b->len, data, (size_t) n);
    b->len += (size_t) n;
    return n;
}

//  A GIF of w x h whose one frame (fw x fh at left, top) has colour
//  (x + y) % 256 at each pixel; colour `transparent` (or -1) is clear.
static s_buf_t
s_gif (int w, int h, int left, int top, int fw, int fh, bool interlace, int transparent)
{
    s_buf_t b = { 0 };
    int err = 0;
    GifFileType *gif = EGifOpen (&b, s_gif_write, &err);
    cr_assert_not_null (gif);
    ColorMapObject *map = GifMakeMapObject (256, NULL);
    for (int i = 0; i < 256; i++) {
        map->Colors [i].Red = (GifByteType) i;
        map->Colors [i].Green = (GifByteType) (255 - i);
        map->Colors [i].Blue = (GifByteType) (i / 2);
    }
    EGifSetGifVersion (gif, true);
    cr_assert_eq (EGifPutScreenDesc (gif, w, h, 8, 0, map), GIF_OK);
    if (transparent >= 0) {
        GraphicsControlBlock gcb = { .DisposalMode = DISPOSAL_UNSPECIFIED, .TransparentColor = transparent };
        GifByteType ext [4];
        size_t n = EGifGCBToExtension (&gcb, ext);
        cr_assert_eq (EGifPutExtension (gif, GRAPHICS_EXT_FUNC_CODE, (int) n, ext), GIF_OK);
    }
    cr_assert_eq (EGifPutImageDesc (gif, left, top, fw, fh, interlace, NULL), GIF_OK);
    GifPixelType *line = malloc ((size_t) fw);
    static const int start [4] = { 0, 4, 2, 1 }, step [4] = { 8, 8, 4, 2 };
    for (int p = 0; p < (interlace ? 4 : 1); p++)
        for (int y = interlace ? start [p] : 0; y < fh; y += interlace ? step [p] : 1) {
            for (int x = 0; x < fw; x++)
                line [x] = (GifPixelType) ((x + y) % 256);
            cr_assert_eq (EGifPutLine (gif, line, fw), GIF_OK);
        }
    free (line);
    GifFreeMapObject (map);
    cr_assert_eq (EGifCloseFile (gif, &err), GIF_OK);
    return b;
}

static void
s_check_small (const uint8_t *data, size_t len, const char *mime, uint32_t want_w, uint32_t want_h)
{
    sb_blob_info_t info;
    char err [256];
    cr_assert_eq (sb_blob_sniff (data, len, &info, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq (info.mime, mime);
    size_t out_len;
    uint32_t w, h;
    uint8_t *small = sb_image_downscale (data, len, mime, SB_IMAGE_SEND_SIDE, SB_IMAGE_SEND_BYTES, &out_len, &w, &h,
                                         err, sizeof err);
    cr_assert_not_null (small, "%s", err);
    cr_assert_eq (w, want_w);
    cr_assert_eq (h, want_h);
    cr_assert_leq (out_len, SB_IMAGE_SEND_BYTES);
    //  the copy is a JPEG whose own header says the same
    cr_assert_eq (sb_blob_sniff (small, out_len, &info, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq (info.mime, "image/jpeg");
    cr_assert_eq (info.width, want_w);
    cr_assert_eq (info.height, want_h);
    free (small);
}

Test (image, large_gif_downscaled_within_the_limits)
{
    s_buf_t gif = s_gif (3000, 1500, 0, 0, 3000, 1500, false, -1);
    s_check_small (gif.data, gif.len, "image/gif", 2048, 1024);
    free (gif.data);
}

Test (image, large_webp_downscaled_within_the_limits)
{
    int w = 2600, h = 1300;
    uint8_t *rgb = malloc ((size_t) w * h * 3);
    for (int i = 0; i < w * h * 3; i++)
        rgb [i] = (uint8_t) (i * 31 % 251);
    uint8_t *out = NULL;
    size_t len = WebPEncodeRGB (rgb, w, h, w * 3, 80, &out);
    cr_assert_gt (len, 0);
    s_check_small (out, len, "image/webp", 2048, 1024);
    WebPFree (out);
    free (rgb);
}

//  The first frame on its canvas, interlaced rows in their places, the
//  transparent colour and what the frame does not cover white.
Test (image, gif_first_frame_pixels_exact)
{
    s_buf_t gif = s_gif (12, 20, 2, 3, 8, 13, true, 5);
    uint32_t w, h;
    char err [256];
    uint8_t *px = sb_image_decode_gif (gif.data, gif.len, &w, &h, err, sizeof err);
    cr_assert_not_null (px, "%s", err);
    cr_assert_eq (w, 12);
    cr_assert_eq (h, 20);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            const uint8_t *p = px + (y * w + x) * 3;
            bool in = x >= 2 && x < 10 && y >= 3 && y < 16;
            int c = in ? (int) ((x - 2 + y - 3) % 256) : -1;
            if (!in || c == 5)
                cr_assert (p [0] == 255 && p [1] == 255 && p [2] == 255, "(%u,%u) not white", x, y);
            else
                cr_assert (p [0] == c && p [1] == 255 - c && p [2] == c / 2, "(%u,%u) is %u,%u,%u not colour %d", x,
                           y, p [0], p [1], p [2], c);
        }
    free (px);
    free (gif.data);
}

Test (image, webp_alpha_over_white)
{
    uint8_t rgba [4 * 4 * 4];
    for (int i = 0; i < 16; i++) {
        rgba [i * 4] = 0;
        rgba [i * 4 + 1] = 0;
        rgba [i * 4 + 2] = 0;
        rgba [i * 4 + 3] = i < 8 ? 0 : 255;     //  the top half clear, the bottom black
    }
    uint8_t *out = NULL;
    size_t len = WebPEncodeLosslessRGBA (rgba, 4, 4, 16, &out);
    cr_assert_gt (len, 0);
    uint32_t w, h;
    char err [256];
    uint8_t *px = sb_image_decode_webp (out, len, &w, &h, err, sizeof err);
    cr_assert_not_null (px, "%s", err);
    cr_assert (w == 4 && h == 4);
    for (int i = 0; i < 16; i++)
        cr_assert_eq (px [i * 3], i < 8 ? 255 : 0, "pixel %d is %u", i, px [i * 3]);
    free (px);
    WebPFree (out);
}

static void
s_refused (const uint8_t *data, size_t len, const char *mime, const char *why)
{
    size_t out_len;
    uint32_t w, h;
    char err [256] = "";
    uint8_t *small = sb_image_downscale (data, len, mime, SB_IMAGE_SEND_SIDE, SB_IMAGE_SEND_BYTES, &out_len, &w, &h,
                                         err, sizeof err);
    cr_assert_null (small, "%s of %zu bytes was downscaled", mime, len);
    cr_assert (strstr (err, why), "the reason '%s' does not say '%s'", err, why);
}

Test (image, truncated_and_hostile_gif_refused)
{
    s_buf_t gif = s_gif (600, 400, 0, 0, 600, 400, false, -1);
    //  cut short inside the frame's data, in its header, in the screen
    s_refused (gif.data, gif.len / 2, "image/gif", "cut short");
    s_refused (gif.data, 13 + 3 * 256 + 5, "image/gif", "cannot decode the GIF");
    s_refused (gif.data, 10, "image/gif", "cannot decode the GIF");
    free (gif.data);
    //  a frame larger than any image may be, on a small canvas: refused
    //  before its lines are read
    s_buf_t big = s_gif (16, 16, 0, 0, 16, 16, false, -1);
    size_t desc = 13 + 3 * 256;
    cr_assert_eq (big.data [desc], ',');
    big.data [desc + 5] = 0xFF;                 //  width 65535
    big.data [desc + 6] = 0xFF;
    big.data [desc + 7] = 0xFF;                 //  height 65535
    big.data [desc + 8] = 0xFF;
    s_refused (big.data, big.len, "image/gif", "out of bounds");
    //  a canvas past the limits (the sniffer refuses it too; the decoder
    //  does not rely on that)
    big.data [6] = 0xFF;
    big.data [7] = 0xFF;
    s_refused (big.data, big.len, "image/gif", "out of bounds");
    sb_blob_info_t info;
    char err [256];
    cr_assert_neq (sb_blob_sniff (big.data, big.len, &info, err, sizeof err), 0);
    free (big.data);
    //  no frame at all
    s_buf_t none = s_gif (16, 16, 0, 0, 16, 16, false, -1);
    none.data [desc] = ';';
    s_refused (none.data, desc + 1, "image/gif", "no frame");
    free (none.data);
}

Test (image, truncated_and_hostile_webp_refused)
{
    uint8_t rgb [64 * 64 * 3];
    for (size_t i = 0; i < sizeof rgb; i++)
        rgb [i] = (uint8_t) (i * 7);
    uint8_t *out = NULL;
    size_t len = WebPEncodeRGB (rgb, 64, 64, 64 * 3, 80, &out);
    cr_assert_gt (len, 40);
    s_refused (out, len / 2, "image/webp", "cannot decode the WebP");
    s_refused (out, 20, "image/webp", "cannot decode the WebP");
    WebPFree (out);
    //  a lossless header that claims 16384 x 16384 (past the pixel limit)
    uint8_t *ll = NULL;
    len = WebPEncodeLosslessRGB (rgb, 64, 64, 64 * 3, &ll);
    cr_assert_gt (len, 30);
    cr_assert (memcmp (ll + 12, "VP8L", 4) == 0);
    uint32_t bits = 0x3FFF | 0x3FFFu << 14;
    ll [21] = (uint8_t) bits;
    ll [22] = (uint8_t) (bits >> 8);
    ll [23] = (uint8_t) (bits >> 16);
    ll [24] = (uint8_t) ((ll [24] & 0xF0) | (bits >> 24));
    s_refused (ll, len, "image/webp", "out of bounds");
    WebPFree (ll);
    //  not WebP at all behind a RIFF header
    static const uint8_t junk [] = "RIFF\x20\0\0\0WEBPVP8 \x10\0\0\0garbage-garbage-garbage";
    s_refused (junk, sizeof junk - 1, "image/webp", "cannot decode the WebP");
}

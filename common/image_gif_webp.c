/*  common/image_gif_webp.c — GIF (its first frame) and WebP decoded to
    RGB pixels for the downscaler (common/image.c), with giflib and
    libwebp (Debian's).

    Both read the dimensions from the header first and check them against
    SB_IMAGE_SIDE_MAX and SB_IMAGE_PIXELS_MAX before they allocate: the
    pixels of the largest image allowed take 192 MiB (RGB), or 256 MiB
    while a WebP with alpha is decoded. A GIF frame is decoded a line at a
    time into the canvas (never giflib's DGifSlurp, which allocates every
    frame a file declares). Transparency is composed over white, as the
    PNG path does. Any thread. */
#include "common/image.h"
#include "common/blob.h"

#include <gif_lib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>

static bool
s_bounds_ok (uint64_t w, uint64_t h)
{
    return w > 0 && h > 0 && w <= SB_IMAGE_SIDE_MAX && h <= SB_IMAGE_SIDE_MAX && w * h <= SB_IMAGE_PIXELS_MAX;
}

//  --------------------------------------------------------------------------
//  GIF

typedef struct {
    const uint8_t *data;
    size_t len, pos;
} s_gif_src_t;

static int
s_gif_read (GifFileType *gif, GifByteType *buf, int n)
{
    s_gif_src_t *src = gif->UserData;
    size_t left = src->len - src->pos;
    size_t take = n < 0 ? 0 : (size_t) n < left ? (size_t) n : left;
    memcpy (buf, src->data + src->pos, take);
    src->pos += take;
    return (int) take;
}

static uint8_t *
s_gif_fail (GifFileType *gif, uint8_t *px, uint8_t *line, const char *what, char *err, size_t errlen)
{
    int code = gif ? gif->Error : 0;
    snprintf (err, errlen, "cannot decode the GIF: %s%s%s", what, code ? ": " : "",
              code ? GifErrorString (code) : "");
    free (px);
    free (line);
    if (gif)
        DGifCloseFile (gif, NULL);
    return NULL;
}

uint8_t *
sb_image_decode_gif (const uint8_t *data, size_t len, uint32_t *w, uint32_t *h, char *err, size_t errlen)
{
    s_gif_src_t src = { .data = data, .len = len };
    int code = 0;
    GifFileType *gif = DGifOpen (&src, s_gif_read, &code);
    if (!gif) {
        snprintf (err, errlen, "cannot decode the GIF: %s", GifErrorString (code));
        return NULL;
    }
    uint32_t cw = (uint32_t) gif->SWidth, ch = (uint32_t) gif->SHeight;
    if (!s_bounds_ok (cw, ch))
        return s_gif_fail (gif, NULL, NULL, "its dimensions are out of bounds", err, errlen);
    uint8_t *px = malloc ((size_t) cw * ch * 3);
    if (!px)
        return s_gif_fail (gif, NULL, NULL, "out of memory", err, errlen);
    memset (px, 255, (size_t) cw * ch * 3);
    int transparent = -1;
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType (gif, &type) == GIF_ERROR)
            return s_gif_fail (gif, px, NULL, "cut short before its first frame", err, errlen);
        if (type == TERMINATE_RECORD_TYPE)
            return s_gif_fail (gif, px, NULL, "it has no frame", err, errlen);
        if (type == EXTENSION_RECORD_TYPE) {
            int ext;
            GifByteType *block;
            if (DGifGetExtension (gif, &ext, &block) == GIF_ERROR)
                return s_gif_fail (gif, px, NULL, "a malformed extension", err, errlen);
            //  The graphics control block before a frame names its
            //  transparent colour.
            GraphicsControlBlock gcb;
            if (ext == GRAPHICS_EXT_FUNC_CODE && block && block [0] >= 4
                && DGifExtensionToGCB (block [0], block + 1, &gcb) == GIF_OK)
                transparent = gcb.TransparentColor;
            while (block)
                if (DGifGetExtensionNext (gif, &block) == GIF_ERROR)
                    return s_gif_fail (gif, px, NULL, "a malformed extension", err, errlen);
            continue;
        }
        if (type == IMAGE_DESC_RECORD_TYPE)
            break;
    }
    if (DGifGetImageDesc (gif) == GIF_ERROR)
        return s_gif_fail (gif, px, NULL, "a malformed frame", err, errlen);
    const GifImageDesc *d = &gif->Image;
    const ColorMapObject *map = d->ColorMap ? d->ColorMap : gif->SColorMap;
    if (!map || !map->Colors || map->ColorCount <= 0)
        return s_gif_fail (gif, px, NULL, "its first frame has no colour table", err, errlen);
    //  A frame may lie partly or wholly outside the canvas (what falls
    //  outside is not shown), but not be larger than images may be.
    if (d->Left < 0 || d->Top < 0 || !s_bounds_ok ((uint64_t) d->Width, (uint64_t) d->Height))
        return s_gif_fail (gif, px, NULL, "its first frame's dimensions are out of bounds", err, errlen);
    uint32_t fw = (uint32_t) d->Width, fh = (uint32_t) d->Height;
    uint8_t *line = malloc (fw);
    if (!line)
        return s_gif_fail (gif, px, NULL, "out of memory", err, errlen);
    //  Interlaced rows come in four passes: every 8th from 0, every 8th
    //  from 4, every 4th from 2, every 2nd from 1.
    static const uint32_t start [4] = { 0, 4, 2, 1 }, step [4] = { 8, 8, 4, 2 };
    int passes = d->Interlace ? 4 : 1;
    for (int p = 0; p < passes; p++) {
        uint32_t y0 = d->Interlace ? start [p] : 0, dy = d->Interlace ? step [p] : 1;
        for (uint32_t y = y0; y < fh; y += dy) {
            if (DGifGetLine (gif, line, (int) fw) == GIF_ERROR)
                return s_gif_fail (gif, px, line, "its first frame is cut short", err, errlen);
            uint64_t cy = (uint64_t) d->Top + y;
            if (cy >= ch)
                continue;
            for (uint32_t x = 0; x < fw; x++) {
                uint64_t cx = (uint64_t) d->Left + x;
                if (cx >= cw)
                    break;
                int c = line [x];
                if (c == transparent || c >= map->ColorCount)
                    continue;
                uint8_t *q = px + ((size_t) cy * cw + cx) * 3;
                q [0] = map->Colors [c].Red;
                q [1] = map->Colors [c].Green;
                q [2] = map->Colors [c].Blue;
            }
        }
    }
    free (line);
    DGifCloseFile (gif, NULL);
    *w = cw;
    *h = ch;
    return px;
}

//  --------------------------------------------------------------------------
//  WebP

uint8_t *
sb_image_decode_webp (const uint8_t *data, size_t len, uint32_t *w, uint32_t *h, char *err, size_t errlen)
{
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures (data, len, &f);
    if (st != VP8_STATUS_OK) {
        snprintf (err, errlen, "cannot decode the WebP: %s", st == VP8_STATUS_NOT_ENOUGH_DATA
                  ? "it is cut short" : "its header is malformed");
        return NULL;
    }
    if (!s_bounds_ok ((uint64_t) (f.width > 0 ? f.width : 0), (uint64_t) (f.height > 0 ? f.height : 0))) {
        snprintf (err, errlen, "cannot decode the WebP: its dimensions are out of bounds");
        return NULL;
    }
    if (f.has_animation) {
        snprintf (err, errlen, "an animated WebP cannot be downscaled (a still one can)");
        return NULL;
    }
    size_t pixels = (size_t) f.width * (size_t) f.height;
    int bpp = f.has_alpha ? 4 : 3;
    uint8_t *px = malloc (pixels * (size_t) bpp);
    if (!px) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    size_t size = pixels * (size_t) bpp;
    int stride = f.width * bpp;
    uint8_t *got = f.has_alpha ? WebPDecodeRGBAInto (data, len, px, size, stride)
                               : WebPDecodeRGBInto (data, len, px, size, stride);
    if (!got) {
        free (px);
        snprintf (err, errlen, "cannot decode the WebP: its data is cut short or malformed");
        return NULL;
    }
    if (f.has_alpha) {
        //  Over white, in place: each RGB pixel is written at or before
        //  the RGBA one it comes from.
        for (size_t i = 0; i < pixels; i++) {
            const uint8_t *s = px + i * 4;
            uint32_t a = s [3];
            uint8_t *q = px + i * 3;
            uint8_t r = (uint8_t) ((s [0] * a + 255 * (255 - a)) / 255);
            uint8_t g = (uint8_t) ((s [1] * a + 255 * (255 - a)) / 255);
            uint8_t b = (uint8_t) ((s [2] * a + 255 * (255 - a)) / 255);
            q [0] = r;
            q [1] = g;
            q [2] = b;
        }
    }
    *w = (uint32_t) f.width;
    *h = (uint32_t) f.height;
    return px;
}

/*  common/image.c — downscaling for models (common/image.h). */
#include "common/image.h"
#include "common/blob.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

//  libjpeg reports errors by calling error_exit, which by default exits
//  the process: ours jumps back instead.
typedef struct {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg [JMSG_LENGTH_MAX];
} s_jerr_t;

static void
s_jpeg_exit (j_common_ptr cinfo)
{
    s_jerr_t *e = (s_jerr_t *) cinfo->err;
    (*cinfo->err->format_message) (cinfo, e->msg);
    longjmp (e->jump, 1);
}

static void
s_jpeg_quiet (j_common_ptr cinfo, int level)
{
    (void) cinfo;
    (void) level;
}

//  RGB pixels (3 bytes each) of the image; NULL with a reason.
static uint8_t *
s_decode (const uint8_t *data, size_t len, const char *mime, uint32_t *w, uint32_t *h, char *err, size_t errlen)
{
    if (strcmp (mime, "image/png") == 0) {
        png_image img;
        memset (&img, 0, sizeof img);
        img.version = PNG_IMAGE_VERSION;
        if (!png_image_begin_read_from_memory (&img, data, len)) {
            snprintf (err, errlen, "cannot decode the PNG: %s", img.message);
            return NULL;
        }
        if (img.width == 0 || img.height == 0 || img.width > SB_IMAGE_SIDE_MAX || img.height > SB_IMAGE_SIDE_MAX
            || (uint64_t) img.width * img.height > SB_IMAGE_PIXELS_MAX) {
            png_image_free (&img);
            snprintf (err, errlen, "the PNG's dimensions are out of bounds");
            return NULL;
        }
        img.format = PNG_FORMAT_RGB;
        //  Transparency is composed over white, as a viewer shows it.
        png_color white = { 255, 255, 255 };
        uint8_t *px = malloc ((size_t) img.width * img.height * 3);
        if (!px) {
            png_image_free (&img);
            snprintf (err, errlen, "out of memory");
            return NULL;
        }
        if (!png_image_finish_read (&img, &white, px, 0, NULL)) {
            snprintf (err, errlen, "cannot decode the PNG: %s", img.message);
            free (px);
            png_image_free (&img);
            return NULL;
        }
        *w = img.width;
        *h = img.height;
        return px;
    }
    if (strcmp (mime, "image/gif") == 0)
        return sb_image_decode_gif (data, len, w, h, err, errlen);
    if (strcmp (mime, "image/webp") == 0)
        return sb_image_decode_webp (data, len, w, h, err, errlen);
    if (strcmp (mime, "image/jpeg") != 0) {
        snprintf (err, errlen, "%s cannot be downscaled (PNG, JPEG, GIF and WebP can)", mime);
        return NULL;
    }
    struct jpeg_decompress_struct c;
    s_jerr_t jerr;
    uint8_t *volatile px = NULL;
    c.err = jpeg_std_error (&jerr.mgr);
    jerr.mgr.error_exit = s_jpeg_exit;
    jerr.mgr.emit_message = s_jpeg_quiet;
    if (setjmp (jerr.jump)) {
        snprintf (err, errlen, "cannot decode the JPEG: %s", jerr.msg);
        jpeg_destroy_decompress (&c);
        free (px);
        return NULL;
    }
    jpeg_create_decompress (&c);
    jpeg_mem_src (&c, data, len);
    jpeg_read_header (&c, TRUE);
    c.out_color_space = JCS_RGB;
    jpeg_start_decompress (&c);
    if (c.output_width == 0 || c.output_height == 0 || c.output_width > SB_IMAGE_SIDE_MAX
        || c.output_height > SB_IMAGE_SIDE_MAX || (uint64_t) c.output_width * c.output_height > SB_IMAGE_PIXELS_MAX
        || c.output_components != 3) {
        snprintf (err, errlen, "the JPEG's dimensions are out of bounds");
        jpeg_destroy_decompress (&c);
        return NULL;
    }
    px = malloc ((size_t) c.output_width * c.output_height * 3);
    if (!px) {
        snprintf (err, errlen, "out of memory");
        jpeg_destroy_decompress (&c);
        return NULL;
    }
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = px + (size_t) c.output_scanline * c.output_width * 3;
        jpeg_read_scanlines (&c, &row, 1);
    }
    *w = c.output_width;
    *h = c.output_height;
    jpeg_finish_decompress (&c);
    jpeg_destroy_decompress (&c);
    return px;
}

//  A box filter: each output pixel is the mean of the source pixels it
//  covers. Good enough for text in screenshots, and linear in the source.
static uint8_t *
s_shrink (const uint8_t *src, uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh)
{
    uint8_t *dst = malloc ((size_t) dw * dh * 3);
    if (!dst)
        return NULL;
    for (uint32_t y = 0; y < dh; y++) {
        uint32_t y0 = (uint32_t) ((uint64_t) y * sh / dh), y1 = (uint32_t) ((uint64_t) (y + 1) * sh / dh);
        if (y1 <= y0)
            y1 = y0 + 1;
        for (uint32_t x = 0; x < dw; x++) {
            uint32_t x0 = (uint32_t) ((uint64_t) x * sw / dw), x1 = (uint32_t) ((uint64_t) (x + 1) * sw / dw);
            if (x1 <= x0)
                x1 = x0 + 1;
            uint64_t sum [3] = { 0, 0, 0 };
            for (uint32_t yy = y0; yy < y1; yy++) {
                const uint8_t *p = src + ((size_t) yy * sw + x0) * 3;
                for (uint32_t xx = x0; xx < x1; xx++, p += 3) {
                    sum [0] += p [0];
                    sum [1] += p [1];
                    sum [2] += p [2];
                }
            }
            uint64_t n = (uint64_t) (y1 - y0) * (x1 - x0);
            uint8_t *q = dst + ((size_t) y * dw + x) * 3;
            q [0] = (uint8_t) (sum [0] / n);
            q [1] = (uint8_t) (sum [1] / n);
            q [2] = (uint8_t) (sum [2] / n);
        }
    }
    return dst;
}

static uint8_t *
s_encode (const uint8_t *px, uint32_t w, uint32_t h, int quality, size_t *out_len, char *err, size_t errlen)
{
    struct jpeg_compress_struct c;
    s_jerr_t jerr;
    unsigned char *volatile out = NULL;
    unsigned long size = 0;
    c.err = jpeg_std_error (&jerr.mgr);
    jerr.mgr.error_exit = s_jpeg_exit;
    if (setjmp (jerr.jump)) {
        snprintf (err, errlen, "cannot encode the JPEG: %s", jerr.msg);
        jpeg_destroy_compress (&c);
        free (out);
        return NULL;
    }
    jpeg_create_compress (&c);
    unsigned char *buf = NULL;
    jpeg_mem_dest (&c, &buf, &size);
    c.image_width = w;
    c.image_height = h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults (&c);
    jpeg_set_quality (&c, quality, TRUE);
    jpeg_start_compress (&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW) (px + (size_t) c.next_scanline * w * 3);
        jpeg_write_scanlines (&c, &row, 1);
    }
    jpeg_finish_compress (&c);
    out = buf;
    jpeg_destroy_compress (&c);
    *out_len = size;
    return out;
}

uint8_t *
sb_image_downscale (const uint8_t *data, size_t len, const char *mime, uint32_t max_side, size_t max_bytes,
                    size_t *out_len, uint32_t *w, uint32_t *h, char *err, size_t errlen)
{
    uint32_t sw, sh;
    uint8_t *px = s_decode (data, len, mime, &sw, &sh, err, errlen);
    if (!px)
        return NULL;
    uint32_t side = max_side;
    for (int tries = 0; tries < 6; tries++, side /= 2) {
        uint32_t dw = sw, dh = sh;
        if (sw > side || sh > side) {
            if (sw >= sh) {
                dw = side;
                dh = (uint32_t) ((uint64_t) sh * side / sw);
            }
            else {
                dh = side;
                dw = (uint32_t) ((uint64_t) sw * side / sh);
            }
            dw = dw ? dw : 1;
            dh = dh ? dh : 1;
        }
        uint8_t *small = dw == sw && dh == sh ? px : s_shrink (px, sw, sh, dw, dh);
        if (!small) {
            free (px);
            snprintf (err, errlen, "out of memory");
            return NULL;
        }
        for (int q = 85; q >= 55; q -= 15) {
            uint8_t *jpg = s_encode (small, dw, dh, q, out_len, err, errlen);
            if (jpg && *out_len <= max_bytes) {
                if (small != px)
                    free (small);
                free (px);
                *w = dw;
                *h = dh;
                return jpg;
            }
            free (jpg);
        }
        if (small != px)
            free (small);
    }
    free (px);
    snprintf (err, errlen, "cannot bring the image under %zu bytes", max_bytes);
    return NULL;
}

/*  tests/unit/test_blob.c — the blob store (common/blob.h): sniffing from
    the bytes, one copy of the same content, quotas, what a killed writer
    leaves, a corrupted blob refused on read, and the sweep. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>

#include "common/blob.h"
#include "common/image.h"

static char s_dir [64];

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/sbblobXXXXXX");
    cr_assert_not_null (mkdtemp (s_dir));
}

static void
s_teardown (void)
{
    char cmd [128];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    cr_assert_eq (system (cmd), 0);
}

//  A PNG header of w x h (the sniffer reads no further).
static size_t
s_png (uint8_t *out, uint32_t w, uint32_t h)
{
    static const uint8_t sig [] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R' };
    memcpy (out, sig, sizeof sig);
    uint8_t dims [8] = { w >> 24, w >> 16, w >> 8, w, h >> 24, h >> 16, h >> 8, h };
    memcpy (out + 16, dims, 8);
    memset (out + 24, 0, 9);
    return 33;
}

Test (blob, sniffs_from_the_bytes)
{
    sb_blob_info_t info;
    char err [256];
    uint8_t buf [64];
    size_t n = s_png (buf, 640, 480);
    cr_assert_eq (sb_blob_sniff (buf, n, &info, err, sizeof err), 0);
    cr_assert_str_eq (info.mime, "image/png");
    cr_assert_eq (info.width, 640);
    cr_assert_eq (info.height, 480);
    //  cut short, and dimensions past the decompression limits
    cr_assert_eq (sb_blob_sniff (buf, 20, &info, err, sizeof err), -1);
    n = s_png (buf, 16384, 16384);
    cr_assert_eq (sb_blob_sniff (buf, n, &info, err, sizeof err), -1);
    cr_assert (strstr (err, "refused"), "%s", err);
    n = s_png (buf, 0, 10);
    cr_assert_eq (sb_blob_sniff (buf, n, &info, err, sizeof err), -1);
    const uint8_t gif [] = "GIF89a\x20\x00\x10\x00";
    cr_assert_eq (sb_blob_sniff (gif, 10, &info, err, sizeof err), 0);
    cr_assert_str_eq (info.mime, "image/gif");
    cr_assert_eq (info.width, 32);
    const char *text = "plain words\n";
    cr_assert_eq (sb_blob_sniff ((const uint8_t *) text, strlen (text), &info, err, sizeof err), 0);
    cr_assert_str_eq (info.mime, "text/plain");
    cr_assert_eq (info.width, 0);
    const uint8_t bin [] = { 'a', 0, 'b' };
    cr_assert_eq (sb_blob_sniff (bin, 3, &info, err, sizeof err), 0);
    cr_assert_str_eq (info.mime, "application/octet-stream");
    cr_assert_eq (sb_blob_sniff ((const uint8_t *) "%PDF-1.7", 8, &info, err, sizeof err), 0);
    cr_assert_str_eq (info.mime, "application/pdf");
    //  an overlong UTF-8 form is not text
    cr_assert_eq (sb_blob_sniff ((const uint8_t *) "\xe0\x80\xaf", 3, &info, err, sizeof err), 0);
    cr_assert_str_eq (info.mime, "application/octet-stream");
}

Test (blob, same_content_once_quota_and_sweep, .init = s_setup, .fini = s_teardown)
{
    char err [256];
    sb_blobs_t *b = sb_blobs_open (s_dir, err, sizeof err);
    cr_assert_not_null (b, "%s", err);
    sb_blobs_set_limits (b, 100, 150, 0);
    const char *code;
    sb_blob_info_t i1, i2, i3;
    const char *sa = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n";
    cr_assert_eq (sb_blobs_put (b, "S1", (const uint8_t *) sa, strlen (sa), &i1, &code, err, sizeof err), 0, "%s", err);
    cr_assert_eq (sb_blobs_put (b, "S1", (const uint8_t *) sa, strlen (sa), &i2, &code, err, sizeof err), 0);
    cr_assert_eq (sb_blobs_put (b, "S2", (const uint8_t *) sa, strlen (sa), &i2, &code, err, sizeof err), 0);
    uint64_t count, bytes, refused;
    sb_blobs_totals (b, &count, &bytes, &refused);
    cr_assert_eq (count, 1, "the same content is stored once");
    cr_assert_eq (sb_blobs_session_bytes (b, "S1"), strlen (sa), "and counted once for S1");
    //  the session quota (150): a second 81-byte blob does not fit
    const char *sb = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB\n";
    cr_assert_eq (sb_blobs_put (b, "S1", (const uint8_t *) sb, strlen (sb), &i3, &code, err, sizeof err), -1);
    cr_assert_str_eq (code, "too_large");
    cr_assert (strstr (err, "quota"), "%s", err);
    //  the blob cap (100)
    char big [101];
    memset (big, 'c', sizeof big);
    cr_assert_eq (sb_blobs_put (b, "S3", (const uint8_t *) big, sizeof big, &i3, &code, err, sizeof err), -1);
    cr_assert (strstr (err, "cap"), "%s", err);
    cr_assert_eq (sb_blobs_put (b, "../x", (const uint8_t *) sb, 3, &i3, &code, err, sizeof err), -1);
    cr_assert_str_eq (code, "invalid");
    //  held by S1 and S2; S1 forgotten: still there; S2 too: swept
    sb_blob_info_t held;
    cr_assert (sb_blob_held (sb_blobs_dir (b), "S2", i1.sha256, &held));
    cr_assert_str_eq (held.mime, "text/plain");
    cr_assert_not (sb_blob_held (sb_blobs_dir (b), "S3", i1.sha256, &held));
    sb_blobs_forget (b, "S1");
    sb_blobs_totals (b, &count, &bytes, &refused);
    cr_assert_eq (count, 1);
    sb_blobs_forget (b, "S2");
    sb_blobs_totals (b, &count, &bytes, &refused);
    cr_assert_eq (count, 0);
    size_t len;
    cr_assert_null (sb_blob_read (sb_blobs_dir (b), i1.sha256, 1000, &len));
    sb_blobs_destroy (&b);
}

Test (blob, killed_writer_and_corruption, .init = s_setup, .fini = s_teardown)
{
    char err [256], path [256];
    sb_blobs_t *b = sb_blobs_open (s_dir, err, sizeof err);
    cr_assert_not_null (b);
    const char *code;
    sb_blob_info_t info;
    cr_assert_eq (sb_blobs_put (b, "S", (const uint8_t *) "hello\n", 6, &info, &code, err, sizeof err), 0);
    sb_blobs_destroy (&b);
    //  what a writer killed half way leaves: a temp file, which the next
    //  open removes
    snprintf (path, sizeof path, "%s/blobs/tmp/blob-half", s_dir);
    FILE *f = fopen (path, "w");
    fputs ("hal", f);
    fclose (f);
    b = sb_blobs_open (s_dir, err, sizeof err);
    cr_assert_eq (access (path, F_OK), -1);
    //  a blob changed on disk is refused on read (EIO), not sent on
    size_t len;
    uint8_t *data = sb_blob_read (sb_blobs_dir (b), info.sha256, 1000, &len);
    cr_assert_not_null (data);
    cr_assert_eq (len, 6);
    free (data);
    snprintf (path, sizeof path, "%s/blobs/%.2s/%s", s_dir, info.sha256, info.sha256 + 2);
    f = fopen (path, "w");
    fputs ("jello\n", f);
    fclose (f);
    cr_assert_null (sb_blob_read (sb_blobs_dir (b), info.sha256, 1000, &len));
    cr_assert_eq (errno, EIO);
    sb_blobs_destroy (&b);
}

//  The downscaler refuses a GIF cut short, a type it has no decoder for, and a PNG whose
//  header passes the sniffer but whose data is missing, with a reason
//  (test_images.py downscales a real 20 MB PNG).
Test (blob, downscale_refuses_what_it_cannot_decode)
{
    char err [256];
    size_t out_len;
    uint32_t w, h;
    cr_assert_null (sb_image_downscale ((const uint8_t *) "GIF89a", 6, "image/gif", 64, 1000, &out_len, &w, &h, err,
                                        sizeof err));
    cr_assert (strstr (err, "cannot decode the GIF"), "%s", err);
    cr_assert_null (sb_image_downscale ((const uint8_t *) "%PDF-", 5, "application/pdf", 64, 1000, &out_len, &w, &h,
                                        err, sizeof err));
    cr_assert (strstr (err, "cannot be downscaled"), "%s", err);
    uint8_t buf [64];
    size_t n = s_png (buf, 300, 100);
    cr_assert_null (sb_image_downscale (buf, n, "image/png", 64, 1000, &out_len, &w, &h, err, sizeof err));
    cr_assert (strstr (err, "PNG"), "%s", err);
}

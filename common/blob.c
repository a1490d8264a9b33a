/*  common/blob.c — the blob store (common/blob.h): sniffing, atomic
    writes, per-session references, quotas and the sweep. SHA-256 is
    libsodium's (no per-thread state, unlike OpenSSL's). */
#include "common/blob.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <czmq.h>

struct sb_blobs {
    char dir [4200];
    uint64_t blob_max, session_quota, total_quota;
    uint64_t count, bytes, refused, swept;
};

//  The figures of the process's store, for bus.stats (serve's hook runs
//  on the broker's thread): written by the owner, read by anyone.
static _Atomic uint64_t s_figures [4];

static void
s_publish (const sb_blobs_t *self)
{
    s_figures [0] = self->count;
    s_figures [1] = self->bytes;
    s_figures [2] = self->refused;
    s_figures [3] = self->swept;
}

void
sb_blob_figures (uint64_t *count, uint64_t *bytes, uint64_t *refused, uint64_t *swept)
{
    *count = s_figures [0];
    *bytes = s_figures [1];
    *refused = s_figures [2];
    *swept = s_figures [3];
}

//  --------------------------------------------------------------------------
//  Sniffing

static uint32_t
s_be32 (const uint8_t *p)
{
    return (uint32_t) p [0] << 24 | (uint32_t) p [1] << 16 | (uint32_t) p [2] << 8 | p [3];
}

static uint32_t
s_le16 (const uint8_t *p)
{
    return (uint32_t) p [0] | (uint32_t) p [1] << 8;
}

static uint32_t
s_le24 (const uint8_t *p)
{
    return (uint32_t) p [0] | (uint32_t) p [1] << 8 | (uint32_t) p [2] << 16;
}

//  JPEG: the dimensions are in the first start-of-frame segment; walk the
//  segments up to it, each length checked against what remains.
static int
s_jpeg_size (const uint8_t *d, size_t len, uint32_t *w, uint32_t *h)
{
    size_t at = 2;
    while (at + 4 <= len) {
        if (d [at] != 0xFF)
            return -1;
        uint8_t marker = d [at + 1];
        if (marker == 0xFF) {           //  fill byte
            at++;
            continue;
        }
        if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
            at += 2;
            continue;
        }
        size_t seg = (size_t) d [at + 2] << 8 | d [at + 3];
        if (seg < 2 || seg > len - at - 2)
            return -1;
        bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
        if (sof) {
            if (seg < 7)
                return -1;
            *h = (uint32_t) d [at + 5] << 8 | d [at + 6];
            *w = (uint32_t) d [at + 7] << 8 | d [at + 8];
            return 0;
        }
        if (marker == 0xD9 || marker == 0xDA)   //  end, or scan data before any frame
            return -1;
        at += 2 + seg;
    }
    return -1;
}

//  WebP: a RIFF file whose first chunk is VP8 (lossy), VP8L (lossless) or
//  VP8X (extended, which gives the canvas).
static int
s_webp_size (const uint8_t *d, size_t len, uint32_t *w, uint32_t *h)
{
    if (len < 30)
        return -1;
    if (memcmp (d + 12, "VP8 ", 4) == 0) {
        if (d [23] != 0x9D || d [24] != 0x01 || d [25] != 0x2A)
            return -1;
        *w = s_le16 (d + 26) & 0x3FFF;
        *h = s_le16 (d + 28) & 0x3FFF;
        return 0;
    }
    if (memcmp (d + 12, "VP8L", 4) == 0) {
        if (d [20] != 0x2F)
            return -1;
        uint32_t bits = (uint32_t) d [21] | (uint32_t) d [22] << 8 | (uint32_t) d [23] << 16 | (uint32_t) d [24] << 24;
        *w = (bits & 0x3FFF) + 1;
        *h = ((bits >> 14) & 0x3FFF) + 1;
        return 0;
    }
    if (memcmp (d + 12, "VP8X", 4) == 0) {
        *w = s_le24 (d + 24) + 1;
        *h = s_le24 (d + 27) + 1;
        return 0;
    }
    return -1;
}

static bool
s_text (const uint8_t *d, size_t len)
{
    size_t k = 0;
    while (k < len) {
        uint8_t c = d [k];
        if (c < 0x80) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != 0x1B)
                return false;
            if (c == 0x7F)
                return false;
            k++;
            continue;
        }
        size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
        if (n == 0 || (n == 3 && c >= 0xF0) || n > len - k)
            return false;
        for (size_t j = 1; j < n; j++)
            if ((d [k + j] & 0xC0) != 0x80)
                return false;
        //  overlong three-byte forms and UTF-16 surrogates
        if (n == 3 && ((c == 0xE0 && d [k + 1] < 0xA0) || (c == 0xED && d [k + 1] >= 0xA0)))
            return false;
        if (n == 4 && ((c == 0xF0 && d [k + 1] < 0x90) || (c == 0xF4 && d [k + 1] >= 0x90)))
            return false;
        k += n;
    }
    return true;
}

int
sb_blob_sniff (const uint8_t *d, size_t len, sb_blob_info_t *info, char *err, size_t errlen)
{
    info->width = info->height = 0;
    info->bytes = len;
    const char *mime = NULL;
    int rc = 0;
    uint32_t w = 0, h = 0;
    if (len >= 8 && memcmp (d, "\x89PNG\r\n\x1a\n", 8) == 0) {
        mime = "image/png";
        if (len < 24 || memcmp (d + 12, "IHDR", 4) != 0)
            rc = -1;
        else {
            w = s_be32 (d + 16);
            h = s_be32 (d + 20);
        }
    }
    else
    if (len >= 3 && d [0] == 0xFF && d [1] == 0xD8 && d [2] == 0xFF) {
        mime = "image/jpeg";
        rc = s_jpeg_size (d, len, &w, &h);
    }
    else
    if (len >= 6 && (memcmp (d, "GIF87a", 6) == 0 || memcmp (d, "GIF89a", 6) == 0)) {
        mime = "image/gif";
        if (len < 10)
            rc = -1;
        else {
            w = s_le16 (d + 6);
            h = s_le16 (d + 8);
        }
    }
    else
    if (len >= 12 && memcmp (d, "RIFF", 4) == 0 && memcmp (d + 8, "WEBP", 4) == 0) {
        mime = "image/webp";
        rc = s_webp_size (d, len, &w, &h);
    }
    if (mime) {
        snprintf (info->mime, sizeof info->mime, "%s", mime);
        if (rc) {
            snprintf (err, errlen, "not a valid %s: its header is cut short or malformed", mime);
            return -1;
        }
        if (w == 0 || h == 0 || w > SB_IMAGE_SIDE_MAX || h > SB_IMAGE_SIDE_MAX
            || (uint64_t) w * h > SB_IMAGE_PIXELS_MAX) {
            snprintf (err, errlen, "%s of %ux%u pixels refused: at most %u on a side and %u pixels", mime, w, h,
                      SB_IMAGE_SIDE_MAX, SB_IMAGE_PIXELS_MAX);
            return -1;
        }
        info->width = w;
        info->height = h;
        return 0;
    }
    if (len >= 5 && memcmp (d, "%PDF-", 5) == 0)
        mime = "application/pdf";
    else
    if (s_text (d, len))
        mime = "text/plain";
    else
        mime = "application/octet-stream";
    snprintf (info->mime, sizeof info->mime, "%s", mime);
    return 0;
}

bool
sb_blob_is_image (const char *mime)
{
    return mime && (strcmp (mime, "image/png") == 0 || strcmp (mime, "image/jpeg") == 0
                    || strcmp (mime, "image/gif") == 0 || strcmp (mime, "image/webp") == 0);
}

bool
sb_blob_hex_ok (const char *s)
{
    if (!s || strlen (s) != SB_BLOB_HEX)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

//  --------------------------------------------------------------------------
//  Files

static void
s_path (const char *dir, const char *hex, const char *suffix, char *out, size_t n)
{
    snprintf (out, n, "%s/%.2s/%s%s", dir, hex, hex + 2, suffix);
}

static void
s_hex (const uint8_t *data, size_t len, char out [SB_BLOB_HEX + 1])
{
    uint8_t md [crypto_hash_sha256_BYTES];
    crypto_hash_sha256 (md, data, len);
    sodium_bin2hex (out, SB_BLOB_HEX + 1, md, sizeof md);
}

static int
s_fsync_dir (const char *dir)
{
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync (fd);
    close (fd);
    return rc;
}

//  Writes data to path through tmp/: a temp file, fsync, rename, fsync of
//  the folder. Whoever sees path sees all of it.
static int
s_write_atomic (const char *dir, const char *path, const void *data, size_t len)
{
    char tmp [4400];
    snprintf (tmp, sizeof tmp, "%s/tmp/blob-XXXXXX", dir);
    int fd = mkostemp (tmp, O_CLOEXEC);
    if (fd < 0)
        return -1;
    const uint8_t *p = data;
    size_t left = len;
    while (left) {
        ssize_t n = write (fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close (fd);
            unlink (tmp);
            return -1;
        }
        p += n;
        left -= (size_t) n;
    }
    if (fsync (fd) || close (fd) || rename (tmp, path)) {
        unlink (tmp);
        return -1;
    }
    char parent [4400];
    snprintf (parent, sizeof parent, "%s", path);
    char *slash = strrchr (parent, '/');
    if (slash)
        *slash = 0;
    return s_fsync_dir (parent);
}

static int
s_mkdir (const char *path)
{
    return mkdir (path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

//  Calls fn for each "HEX BYTES" line of a refs file; stops when it
//  returns true.
typedef bool (s_ref_fn) (const sb_blob_info_t *ref, void *arg);

static void
s_refs_each (const char *path, s_ref_fn *fn, void *arg)
{
    FILE *f = fopen (path, "re");
    if (!f)
        return;
    char line [192];
    while (fgets (line, sizeof line, f)) {
        sb_blob_info_t ref;
        unsigned long long bytes;
        if (sscanf (line, "%64s %llu %31s %u %u", ref.sha256, &bytes, ref.mime, &ref.width, &ref.height) != 5
            || !sb_blob_hex_ok (ref.sha256))
            continue;
        ref.bytes = bytes;
        if (fn (&ref, arg))
            break;
    }
    fclose (f);
}

static void
s_refs_path (const sb_blobs_t *self, const char *sid, char *out, size_t n)
{
    snprintf (out, n, "%s/refs/%s", self->dir, sid);
}

//  Session ids name files: refuse anything but a plain name.
static bool
s_sid_ok (const char *sid)
{
    if (!sid || !*sid || strlen (sid) > 64)
        return false;
    for (const char *p = sid; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' || *p == '-'))
            return false;
    return true;
}

//  --------------------------------------------------------------------------
//  The store

static void
s_count (sb_blobs_t *self)
{
    self->count = self->bytes = 0;
    DIR *top = opendir (self->dir);
    if (!top)
        return;
    struct dirent *de;
    while ((de = readdir (top))) {
        if (strlen (de->d_name) != 2 || !isxdigit ((unsigned char) de->d_name [0]))
            continue;
        char sub [4400];
        snprintf (sub, sizeof sub, "%s/%s", self->dir, de->d_name);
        DIR *d = opendir (sub);
        if (!d)
            continue;
        struct dirent *fe;
        while ((fe = readdir (d))) {
            if (strlen (fe->d_name) != SB_BLOB_HEX - 2)
                continue;
            struct stat st;
            char path [4600];
            snprintf (path, sizeof path, "%s/%s", sub, fe->d_name);
            if (stat (path, &st) == 0) {
                self->count++;
                self->bytes += (uint64_t) st.st_size;
            }
        }
        closedir (d);
    }
    closedir (top);
    s_publish (self);
}

sb_blobs_t *
sb_blobs_open (const char *data_dir, char *err, size_t errlen)
{
    if (sodium_init () < 0) {
        snprintf (err, errlen, "cannot start libsodium");
        return NULL;
    }
    sb_blobs_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    snprintf (self->dir, sizeof self->dir, "%s/blobs", data_dir);
    sb_blobs_set_limits (self, 0, 0, 0);
    char sub [4400];
    bool ok = s_mkdir (self->dir) == 0;
    snprintf (sub, sizeof sub, "%s/tmp", self->dir);
    ok = ok && s_mkdir (sub) == 0;
    snprintf (sub, sizeof sub, "%s/refs", self->dir);
    ok = ok && s_mkdir (sub) == 0;
    if (!ok) {
        snprintf (err, errlen, "cannot create %s: %s", self->dir, strerror (errno));
        free (self);
        return NULL;
    }
    //  A writer killed half way left its temp file: no one refers to it.
    snprintf (sub, sizeof sub, "%s/tmp", self->dir);
    DIR *d = opendir (sub);
    if (d) {
        struct dirent *de;
        while ((de = readdir (d)))
            if (strncmp (de->d_name, "blob-", 5) == 0)
                unlinkat (dirfd (d), de->d_name, 0);
        closedir (d);
    }
    s_count (self);
    return self;
}

void
sb_blobs_destroy (sb_blobs_t **self_p)
{
    if (self_p && *self_p) {
        free (*self_p);
        *self_p = NULL;
    }
}

void
sb_blobs_set_limits (sb_blobs_t *self, uint64_t blob_max, uint64_t session_quota, uint64_t total_quota)
{
    self->blob_max = blob_max ? blob_max : SB_BLOB_MAX_DEFAULT;
    self->session_quota = session_quota ? session_quota : SB_BLOB_SESSION_QUOTA_DEFAULT;
    self->total_quota = total_quota ? total_quota : SB_BLOB_TOTAL_QUOTA_DEFAULT;
}

typedef struct {
    const char *hex;
    bool found;
    uint64_t bytes;
    sb_blob_info_t ref;
} s_find_t;

static bool
s_find_fn (const sb_blob_info_t *ref, void *arg)
{
    s_find_t *f = arg;
    if (f->hex && strcmp (ref->sha256, f->hex) == 0) {
        f->found = true;
        f->ref = *ref;
        return true;
    }
    f->bytes += ref->bytes;
    return false;
}

uint64_t
sb_blobs_session_bytes (sb_blobs_t *self, const char *sid)
{
    char path [4400];
    s_refs_path (self, sid, path, sizeof path);
    s_find_t f = { .hex = NULL };
    s_refs_each (path, s_find_fn, &f);
    return f.bytes;
}

static void
s_fail (sb_blobs_t *self, const char **code, const char *what, char *err, size_t errlen, const char *fmt, ...)
{
    self->refused++;
    s_publish (self);
    *code = what;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
}

int
sb_blobs_put (sb_blobs_t *self, const char *sid, const uint8_t *data, size_t len, sb_blob_info_t *info,
              const char **code, char *err, size_t errlen)
{
    if (!s_sid_ok (sid)) {
        s_fail (self, code, "invalid", err, errlen, "not a session id");
        return -1;
    }
    if (len > self->blob_max) {
        s_fail (self, code, "too_large", err, errlen, "a blob of %zu bytes is over the cap of %llu bytes a blob", len,
                (unsigned long long) self->blob_max);
        return -1;
    }
    if (sb_blob_sniff (data, len, info, err, errlen)) {
        s_fail (self, code, "invalid", err, errlen, "%s", err);
        return -1;
    }
    s_hex (data, len, info->sha256);
    char refs [4400];
    s_refs_path (self, sid, refs, sizeof refs);
    s_find_t f = { .hex = info->sha256 };
    s_refs_each (refs, s_find_fn, &f);
    if (f.found)
        return 0;               //  this session holds it already
    if (f.bytes + len > self->session_quota) {
        s_fail (self, code, "too_large", err, errlen,
                "the session's blob quota is reached: it holds %llu bytes, the quota is %llu",
                (unsigned long long) f.bytes, (unsigned long long) self->session_quota);
        return -1;
    }
    char path [4400];
    s_path (self->dir, info->sha256, "", path, sizeof path);
    struct stat st;
    if (stat (path, &st) != 0) {
        if (self->bytes + len > self->total_quota) {
            s_fail (self, code, "too_large", err, errlen,
                    "the server's blob quota is reached: %llu bytes stored, the quota is %llu",
                    (unsigned long long) self->bytes, (unsigned long long) self->total_quota);
            return -1;
        }
        char sub [4400];
        snprintf (sub, sizeof sub, "%s/%.2s", self->dir, info->sha256);
        if (s_mkdir (sub) || s_write_atomic (self->dir, path, data, len)) {
            s_fail (self, code, "internal", err, errlen, "cannot write the blob: %s", strerror (errno));
            return -1;
        }
        self->count++;
        self->bytes += len;
        s_publish (self);
    }
    //  The reference comes after the rename: a refs line never names a
    //  blob that is not whole.
    FILE *r = fopen (refs, "ae");
    bool ok = r && fprintf (r, "%s %zu %s %u %u\n", info->sha256, len, info->mime, info->width, info->height) > 0;
    ok = r && fflush (r) == 0 && fsync (fileno (r)) == 0 && ok;
    if (r)
        fclose (r);
    if (!ok) {
        s_fail (self, code, "internal", err, errlen, "cannot reference the blob: %s", strerror (errno));
        return -1;
    }
    return 0;
}

bool
sb_blob_held (const char *blob_dir, const char *sid, const char *hex, sb_blob_info_t *info)
{
    if (!s_sid_ok (sid) || !sb_blob_hex_ok (hex))
        return false;
    char refs [4400];
    snprintf (refs, sizeof refs, "%s/refs/%s", blob_dir, sid);
    s_find_t f = { .hex = hex };
    s_refs_each (refs, s_find_fn, &f);
    if (f.found)
        *info = f.ref;
    return f.found;
}

int
sb_blobs_set_sent (sb_blobs_t *self, const char *orig, const char *sent)
{
    char path [4400];
    s_path (self->dir, orig, ".sent", path, sizeof path);
    return s_write_atomic (self->dir, path, sent, SB_BLOB_HEX);
}

bool
sb_blobs_sent_of (const char *blob_dir, const char *orig, char out [SB_BLOB_HEX + 1])
{
    char path [4400];
    s_path (blob_dir, orig, ".sent", path, sizeof path);
    FILE *f = fopen (path, "re");
    if (!f)
        return false;
    size_t n = fread (out, 1, SB_BLOB_HEX, f);
    fclose (f);
    out [n] = 0;
    return n == SB_BLOB_HEX && sb_blob_hex_ok (out);
}

static bool
s_mark_fn (const sb_blob_info_t *ref, void *arg)
{
    zhashx_t *live = arg;
    zhashx_insert (live, ref->sha256, (void *) 1);
    return false;
}

size_t
sb_blobs_sweep (sb_blobs_t *self)
{
    zhashx_t *live = zhashx_new ();
    if (!live)
        return 0;
    char refs [4400];
    snprintf (refs, sizeof refs, "%s/refs", self->dir);
    DIR *d = opendir (refs);
    if (d) {
        struct dirent *de;
        while ((de = readdir (d))) {
            if (de->d_name [0] == '.')
                continue;
            char path [4700];
            snprintf (path, sizeof path, "%s/%s", refs, de->d_name);
            s_refs_each (path, s_mark_fn, live);
        }
        closedir (d);
    }
    //  A variant lives as long as its original.
    zlistx_t *keys = zhashx_keys (live);
    for (const char *k = keys ? zlistx_first (keys) : NULL; k; k = zlistx_next (keys)) {
        char sent [SB_BLOB_HEX + 1];
        if (sb_blobs_sent_of (self->dir, k, sent))
            zhashx_insert (live, sent, (void *) 1);
    }
    zlistx_destroy (&keys);
    size_t removed = 0;
    DIR *top = opendir (self->dir);
    struct dirent *de;
    while (top && (de = readdir (top))) {
        if (strlen (de->d_name) != 2 || !isxdigit ((unsigned char) de->d_name [0]))
            continue;
        char sub [4400];
        snprintf (sub, sizeof sub, "%s/%s", self->dir, de->d_name);
        DIR *s = opendir (sub);
        struct dirent *fe;
        while (s && (fe = readdir (s))) {
            size_t n = strlen (fe->d_name);
            if (n != SB_BLOB_HEX - 2 && n != SB_BLOB_HEX - 2 + 5)
                continue;
            char hex [SB_BLOB_HEX + 1];
            snprintf (hex, sizeof hex, "%s%.62s", de->d_name, fe->d_name);
            if (zhashx_lookup (live, hex))
                continue;
            if (unlinkat (dirfd (s), fe->d_name, 0) == 0 && n == SB_BLOB_HEX - 2)
                removed++;
        }
        if (s)
            closedir (s);
    }
    if (top)
        closedir (top);
    zhashx_destroy (&live);
    self->swept += removed;
    s_count (self);
    return removed;
}

void
sb_blob_unhold (const char *blob_dir, const char *sid)
{
    if (!s_sid_ok (sid))
        return;
    char refs [4400];
    snprintf (refs, sizeof refs, "%s/refs/%s", blob_dir, sid);
    unlink (refs);
}

void
sb_blobs_forget (sb_blobs_t *self, const char *sid)
{
    if (!s_sid_ok (sid))
        return;
    char refs [4400];
    s_refs_path (self, sid, refs, sizeof refs);
    if (unlink (refs) == 0)
        sb_blobs_sweep (self);
}

const char *
sb_blobs_dir (sb_blobs_t *self)
{
    return self->dir;
}

void
sb_blobs_totals (sb_blobs_t *self, uint64_t *count, uint64_t *bytes, uint64_t *refused)
{
    *count = self->count;
    *bytes = self->bytes;
    *refused = self->refused;
}

uint8_t *
sb_blob_read_fd (int fd, size_t size)
{
    uint8_t *buf = malloc (size ? size : 1);
    size_t got = 0;
    while (buf && got < size) {
        ssize_t n = read (fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    if (!buf || got != size) {
        free (buf);
        errno = buf ? EIO : ENOMEM;
        return NULL;
    }
    return buf;
}

uint8_t *
sb_blob_read (const char *blob_dir, const char *hex, size_t max, size_t *len)
{
    if (!sb_blob_hex_ok (hex)) {
        errno = EINVAL;
        return NULL;
    }
    char path [4400];
    s_path (blob_dir, hex, "", path, sizeof path);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat (fd, &st) || st.st_size < 0 || (uint64_t) st.st_size > max) {
        close (fd);
        errno = EFBIG;
        return NULL;
    }
    size_t size = (size_t) st.st_size;
    uint8_t *buf = sb_blob_read_fd (fd, size);
    close (fd);
    if (!buf)
        return NULL;
    char check [SB_BLOB_HEX + 1];
    s_hex (buf, size, check);
    if (strcmp (check, hex) != 0) {
        free (buf);
        errno = EIO;
        return NULL;
    }
    *len = size;
    return buf;
}

/*  store/wal.c — the store's write-ahead log: the file format (see
    store/wal.h) and its reads and writes. What goes into a record and when
    the log is flushed, replayed and checkpointed is store/lmdb_wal.c's.

    Every length read from the file is checked against the cap and against
    the bytes the file still holds before anything is allocated for it. */
#include "store/wal.h"
#include "store/store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define S_MAGIC     "SBWAL001"
#define S_FIXED     64          //  a header slot's fields before the meta pages

//  --------------------------------------------------------------------------
//  CRC32C (Castagnoli), a table of 256, made once

static uint32_t s_crc_table [256];
static pthread_once_t s_crc_once = PTHREAD_ONCE_INIT;

static void
s_crc_init (void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1? (c >> 1) ^ 0x82F63B78u: c >> 1;
        s_crc_table [i] = c;
    }
}

uint32_t
sb_wal_crc32c (uint32_t crc, const void *data, size_t len)
{
    pthread_once (&s_crc_once, s_crc_init);
    const uint8_t *p = (const uint8_t *) data;
    crc = ~crc;
    while (len--)
        crc = s_crc_table [(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

//  --------------------------------------------------------------------------
//  Little-endian fields

static void
s_put16 (uint8_t *p, uint32_t v)
{
    p [0] = (uint8_t) v;
    p [1] = (uint8_t) (v >> 8);
}

static void
s_put32 (uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p [i] = (uint8_t) (v >> (8 * i));
}

static void
s_put64 (uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p [i] = (uint8_t) (v >> (8 * i));
}

static uint32_t
s_get16 (const uint8_t *p)
{
    return (uint32_t) p [0] | (uint32_t) p [1] << 8;
}

static uint32_t
s_get32 (const uint8_t *p)
{
    return (uint32_t) p [0] | (uint32_t) p [1] << 8 | (uint32_t) p [2] << 16 | (uint32_t) p [3] << 24;
}

static uint64_t
s_get64 (const uint8_t *p)
{
    return (uint64_t) s_get32 (p) | (uint64_t) s_get32 (p + 4) << 32;
}

//  --------------------------------------------------------------------------
//  Record bodies

int
sb_wal_buf_op (sb_wal_buf_t *buf, int op, unsigned dbi,
               const void *key, size_t klen, const void *val, size_t vlen)
{
    if ((op != SB_WAL_PUT && op != SB_WAL_DEL) || dbi > 255 || klen == 0
        || klen > SB_STORE_KEY_MAX || (op == SB_WAL_DEL && vlen > 0))
        return SB_STORE_INVALID;
    if (vlen > SB_WAL_RECORD_MAX)
        return SB_STORE_TXN_FULL;
    size_t need = 8 + klen + vlen;
    if (buf->len + need > SB_WAL_RECORD_MAX)
        return SB_STORE_TXN_FULL;
    if (buf->len + need > buf->cap) {
        size_t cap = buf->cap? buf->cap: 4096;
        while (cap < buf->len + need)
            cap *= 2;
        uint8_t *data = (uint8_t *) realloc (buf->data, cap);
        if (!data)
            return -ENOMEM;
        buf->data = data;
        buf->cap = cap;
    }
    uint8_t *p = buf->data + buf->len;
    p [0] = (uint8_t) op;
    p [1] = (uint8_t) dbi;
    s_put16 (p + 2, (uint32_t) klen);
    s_put32 (p + 4, (uint32_t) vlen);
    memcpy (p + 8, key, klen);
    if (vlen > 0)
        memcpy (p + 8 + klen, val, vlen);
    buf->len += need;
    return 0;
}

void
sb_wal_buf_free (sb_wal_buf_t *buf)
{
    free (buf->data);
    *buf = (sb_wal_buf_t) { 0 };
}

static uint32_t
s_record_crc (const uint8_t lsn_le [8], const void *body, size_t len)
{
    return sb_wal_crc32c (sb_wal_crc32c (0, lsn_le, 8), body, len);
}

void
sb_wal_head_encode (uint8_t head [SB_WAL_HEAD], uint64_t lsn, const void *body, size_t len)
{
    s_put32 (head, (uint32_t) len);
    s_put64 (head + 8, lsn);
    s_put32 (head + 4, s_record_crc (head + 8, body, len));
}

int
sb_wal_head_decode (const uint8_t head [SB_WAL_HEAD], size_t avail,
                    uint32_t *len, uint64_t *lsn)
{
    uint32_t n = s_get32 (head);
    if (n == 0 || n > SB_WAL_RECORD_MAX || n > avail)
        return -1;
    *len = n;
    *lsn = s_get64 (head + 8);
    return 0;
}

bool
sb_wal_body_ok (const uint8_t head [SB_WAL_HEAD], const void *body, size_t len)
{
    return s_get32 (head) == len && s_get32 (head + 4) == s_record_crc (head + 8, body, len);
}

int
sb_wal_body_walk (const uint8_t *body, size_t len, unsigned ndbi,
                  sb_wal_op_fn *fn, void *ctx)
{
    //  Twice: the first pass only checks, so that a malformed body applies
    //  nothing at all.
    for (int pass = 0; pass < 2; pass++) {
        size_t at = 0;
        while (at < len) {
            if (len - at < 8)
                return SB_STORE_INVALID;
            const uint8_t *p = body + at;
            int op = p [0];
            unsigned dbi = p [1];
            size_t klen = s_get16 (p + 2);
            size_t vlen = s_get32 (p + 4);
            if ((op != SB_WAL_PUT && op != SB_WAL_DEL) || dbi >= ndbi
                || klen == 0 || klen > SB_STORE_KEY_MAX
                || (op == SB_WAL_DEL && vlen > 0)
                || klen > len - at - 8 || vlen > len - at - 8 - klen)
                return SB_STORE_INVALID;
            if (pass == 1 && fn) {
                int rc = fn (ctx, op, dbi, p + 8, klen, p + 8 + klen, vlen);
                if (rc != 0)
                    return rc;
            }
            at += 8 + klen + vlen;
        }
    }
    return 0;
}

//  --------------------------------------------------------------------------
//  The file

struct _sb_wal_t {
    int fd;
    char *path;
    char *dir;
    uint64_t fsize;             //  the file's size
    uint64_t rpos;              //  sb_wal_next's position
    uint64_t tail;              //  where the next record goes
    uint64_t last;              //  where the last appended record starts
    bool have_header;
    sb_wal_header_t header;
    uint8_t *meta;              //  header.meta's bytes
    uint8_t *body;              //  sb_wal_next's buffer
    size_t body_cap;
};

static int
s_pwrite_all (int fd, const void *data, size_t len, uint64_t off)
{
    const uint8_t *p = (const uint8_t *) data;
    while (len > 0) {
        ssize_t n = pwrite (fd, p, len, (off_t) off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0? -errno: -EIO;
        p += n;
        len -= (size_t) n;
        off += (uint64_t) n;
    }
    return 0;
}

static int
s_pread_all (int fd, void *data, size_t len, uint64_t off)
{
    uint8_t *p = (uint8_t *) data;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread (fd, p + got, len - got, (off_t) (off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t) n;
    }
    return (int) (got == len);
}

static int
s_sync_dir (const char *dir)
{
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync (fd) == 0? 0: -errno;
    close (fd);
    return rc;
}

//  A fresh file: both slots empty, the segment zero-filled.
static int
s_make (sb_wal_t *self)
{
    if (ftruncate (self->fd, 0) != 0)
        return -errno;
    size_t chunk = (size_t) 1 << 20;
    uint8_t *zeros = (uint8_t *) calloc (1, chunk);
    if (!zeros)
        return -ENOMEM;
    uint64_t size = SB_WAL_DATA + SB_WAL_SEGMENT;
    int rc = 0;
    for (uint64_t off = 0; off < size && rc == 0; off += chunk)
        rc = s_pwrite_all (self->fd, zeros, (size_t) (size - off < chunk? size - off: chunk), off);
    free (zeros);
    if (rc == 0 && fdatasync (self->fd) != 0)
        rc = -errno;
    if (rc == 0)
        rc = s_sync_dir (self->dir);
    self->fsize = size;
    return rc;
}

//  One slot, when it is whole: 1, and the header in *h with its meta pages
//  in `meta` (2 * SB_WAL_PAGE_MAX bytes); 0 when it is not.
static int
s_slot_read (sb_wal_t *self, int slot, sb_wal_header_t *h, uint8_t *meta)
{
    uint8_t fixed [S_FIXED];
    int rc = s_pread_all (self->fd, fixed, sizeof fixed, (uint64_t) slot * SB_WAL_SLOT);
    if (rc <= 0)
        return rc;
    if (memcmp (fixed, S_MAGIC, 8) != 0)
        return 0;
    uint32_t psize = s_get32 (fixed + 24);
    if (psize > SB_WAL_PAGE_MAX)
        return 0;
    rc = s_pread_all (self->fd, meta, 2 * (size_t) psize, (uint64_t) slot * SB_WAL_SLOT + S_FIXED);
    if (rc <= 0)
        return rc;
    uint32_t crc = sb_wal_crc32c (0, fixed, 32);
    crc = sb_wal_crc32c (crc, meta, 2 * (size_t) psize);
    if (crc != s_get32 (fixed + 32))
        return 0;
    *h = (sb_wal_header_t) {
        .seq = s_get64 (fixed + 8), .lsn = s_get64 (fixed + 16),
        .psize = psize, .names_crc = s_get32 (fixed + 28), .meta = meta,
    };
    return 1;
}

static int
s_header_load (sb_wal_t *self)
{
    uint8_t *meta [2];
    meta [0] = (uint8_t *) malloc (2 * SB_WAL_PAGE_MAX);
    meta [1] = (uint8_t *) malloc (2 * SB_WAL_PAGE_MAX);
    if (!meta [0] || !meta [1]) {
        free (meta [0]);
        free (meta [1]);
        return -ENOMEM;
    }
    sb_wal_header_t h [2];
    int ok [2];
    for (int s = 0; s < 2; s++)
        ok [s] = s_slot_read (self, s, &h [s], meta [s]);
    int rc = ok [0] < 0? ok [0]: ok [1] < 0? ok [1]: 0;
    int pick = -1;
    if (rc == 0) {
        if (ok [0] == 1 && ok [1] == 1)
            pick = h [1].seq > h [0].seq;
        else
        if (ok [0] == 1 || ok [1] == 1)
            pick = ok [1] == 1;
    }
    if (pick >= 0) {
        self->have_header = true;
        self->header = h [pick];
        self->meta = meta [pick];
        meta [pick] = NULL;
    }
    free (meta [0]);
    free (meta [1]);
    return rc;
}

sb_wal_t *
sb_wal_open (const char *dir, char *err, size_t errlen)
{
    sb_wal_t *self = (sb_wal_t *) calloc (1, sizeof *self);
    if (!self) {
        sb_store_err (err, errlen, "%s: out of memory", dir);
        return NULL;
    }
    self->fd = -1;
    self->dir = strdup (dir);
    size_t plen = strlen (dir) + sizeof "/log.wal";
    self->path = (char *) malloc (plen);
    if (!self->dir || !self->path) {
        sb_store_err (err, errlen, "%s: out of memory", dir);
        sb_wal_close (&self);
        return NULL;
    }
    snprintf (self->path, plen, "%s/log.wal", dir);
    self->fd = open (self->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (self->fd < 0) {
        sb_store_err (err, errlen, "%s: cannot open the log: %s", self->path, strerror (errno));
        sb_wal_close (&self);
        return NULL;
    }
    //  The log and the meta pages it restores assume one opener: a second
    //  one would interleave records and roll LMDB back under the first.
    if (flock (self->fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        sb_store_err (err, errlen, "%s: %s", self->path,
                      e == EWOULDBLOCK? "the store is open in another process (or twice in this one)"
                                      : strerror (e));
        sb_wal_close (&self);
        return NULL;
    }
    struct stat st;
    int rc = fstat (self->fd, &st) == 0? 0: -errno;
    if (rc == 0) {
        self->fsize = (uint64_t) st.st_size;
        if (self->fsize < SB_WAL_DATA)
            rc = s_make (self);
        else
            rc = s_header_load (self);
    }
    if (rc != 0) {
        sb_store_err (err, errlen, "%s: cannot read or make the log: %s", self->path, strerror (-rc));
        sb_wal_close (&self);
        return NULL;
    }
    self->rpos = self->tail = self->last = SB_WAL_DATA;
    return self;
}

void
sb_wal_close (sb_wal_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sb_wal_t *self = *self_p;
    if (self->fd >= 0)
        close (self->fd);
    free (self->path);
    free (self->dir);
    free (self->meta);
    free (self->body);
    free (self);
    *self_p = NULL;
}

int
sb_wal_remove (sb_wal_t **self_p)
{
    sb_wal_t *self = *self_p;
    int rc = unlink (self->path) == 0? 0: -errno;
    if (rc == 0)
        rc = s_sync_dir (self->dir);
    sb_wal_close (self_p);
    return rc;
}

const sb_wal_header_t *
sb_wal_header (sb_wal_t *self)
{
    return self->have_header? &self->header: NULL;
}

int
sb_wal_next (sb_wal_t *self, uint64_t expect, const uint8_t **body, uint32_t *len,
             uint64_t *lsn_out)
{
    self->tail = self->last = self->rpos;
    uint8_t head [SB_WAL_HEAD];
    if (self->rpos + SB_WAL_HEAD > self->fsize)
        return 0;
    int rc = s_pread_all (self->fd, head, sizeof head, self->rpos);
    if (rc <= 0)
        return rc;
    uint32_t n;
    uint64_t lsn;
    if (sb_wal_head_decode (head, self->fsize - self->rpos - SB_WAL_HEAD, &n, &lsn) != 0
        || (expect != 0 && lsn != expect))
        return 0;
    if (n > self->body_cap) {
        uint8_t *b = (uint8_t *) realloc (self->body, n);
        if (!b)
            return -ENOMEM;
        self->body = b;
        self->body_cap = n;
    }
    rc = s_pread_all (self->fd, self->body, n, self->rpos + SB_WAL_HEAD);
    if (rc <= 0)
        return rc;
    if (!sb_wal_body_ok (head, self->body, n))
        return 0;
    self->last = self->rpos;
    self->rpos += SB_WAL_HEAD + n;
    self->tail = self->rpos;
    *body = self->body;
    *len = n;
    *lsn_out = lsn;
    return 1;
}

int
sb_wal_append (sb_wal_t *self, uint64_t lsn, const void *body, size_t len)
{
    if (len == 0 || len > SB_WAL_RECORD_MAX)
        return SB_STORE_INVALID;
    uint8_t head [SB_WAL_HEAD];
    sb_wal_head_encode (head, lsn, body, len);
    struct iovec iov [2] = { { head, sizeof head }, { (void *) body, len } };
    size_t total = sizeof head + len;
    uint64_t off = self->tail;
    ssize_t n;
    do
        n = pwritev (self->fd, iov, 2, (off_t) off);
    while (n < 0 && errno == EINTR);
    int rc = n < 0? -errno: 0;
    if (rc == 0 && (size_t) n < total) {
        //  A short write: the rest byte by byte position.
        size_t done = (size_t) n;
        if (done < sizeof head)
            rc = s_pwrite_all (self->fd, head + done, sizeof head - done, off + done);
        if (rc == 0) {
            size_t bdone = done > sizeof head? done - sizeof head: 0;
            rc = s_pwrite_all (self->fd, (const uint8_t *) body + bdone, len - bdone,
                               off + sizeof head + bdone);
        }
    }
    if (rc == 0 && fdatasync (self->fd) != 0)
        rc = -errno;
    if (rc != 0) {
        //  Whatever reached the file must not pass for a record later.
        uint8_t zero [SB_WAL_HEAD] = { 0 };
        s_pwrite_all (self->fd, zero, sizeof zero, off);
        return rc;
    }
    self->last = off;
    self->tail = off + total;
    if (self->tail > self->fsize)
        self->fsize = self->tail;
    return 0;
}

int
sb_wal_unappend (sb_wal_t *self)
{
    uint8_t zero [SB_WAL_HEAD] = { 0 };
    int rc = s_pwrite_all (self->fd, zero, sizeof zero, self->last);
    if (rc == 0 && fdatasync (self->fd) != 0)
        rc = -errno;
    if (rc == 0)
        self->tail = self->last;
    return rc;
}

int
sb_wal_set_header (sb_wal_t *self, uint64_t lsn, uint32_t psize, uint32_t names_crc,
                   const void *meta)
{
    if (psize > SB_WAL_PAGE_MAX)
        return SB_STORE_INVALID;
    size_t mlen = 2 * (size_t) psize;
    uint8_t *slot = (uint8_t *) calloc (1, S_FIXED + mlen);
    uint8_t *copy = (uint8_t *) malloc (mlen? mlen: 1);
    if (!slot || !copy) {
        free (slot);
        free (copy);
        return -ENOMEM;
    }
    uint64_t seq = self->have_header? self->header.seq + 1: 1;
    memcpy (slot, S_MAGIC, 8);
    s_put64 (slot + 8, seq);
    s_put64 (slot + 16, lsn);
    s_put32 (slot + 24, psize);
    s_put32 (slot + 28, names_crc);
    memcpy (slot + S_FIXED, meta, mlen);
    uint32_t crc = sb_wal_crc32c (0, slot, 32);
    s_put32 (slot + 32, sb_wal_crc32c (crc, slot + S_FIXED, mlen));
    int rc = s_pwrite_all (self->fd, slot, S_FIXED + mlen, (seq & 1) * SB_WAL_SLOT);
    if (rc == 0 && fdatasync (self->fd) != 0)
        rc = -errno;
    free (slot);
    if (rc != 0) {
        free (copy);
        return rc;
    }
    memcpy (copy, meta, mlen);
    free (self->meta);
    self->meta = copy;
    self->have_header = true;
    self->header = (sb_wal_header_t) {
        .seq = seq, .lsn = lsn, .psize = psize, .names_crc = names_crc, .meta = copy,
    };
    return 0;
}

int
sb_wal_recycle (sb_wal_t *self)
{
    self->rpos = self->tail = self->last = SB_WAL_DATA;
    if (self->fsize > SB_WAL_DATA + SB_WAL_SEGMENT) {
        if (ftruncate (self->fd, (off_t) (SB_WAL_DATA + SB_WAL_SEGMENT)) != 0)
            return -errno;
        self->fsize = SB_WAL_DATA + SB_WAL_SEGMENT;
    }
    return 0;
}

size_t
sb_wal_used (sb_wal_t *self)
{
    return (size_t) (self->tail - SB_WAL_DATA);
}

//  --------------------------------------------------------------------------
//  Tests

static atomic_long s_crash_hits;

void
sb_wal_crash_point (const char *point)
{
    const char *spec = getenv ("SWITCHBOARD_TEST_WAL_CRASH");
    if (!spec || !*spec)
        return;
    size_t n = strlen (point);
    if (strncmp (spec, point, n) != 0 || (spec [n] != 0 && spec [n] != ':'))
        return;
    long nth = spec [n] == ':'? strtol (spec + n + 1, NULL, 10): 1;
    if (atomic_fetch_add (&s_crash_hits, 1) + 1 == nth) {
        static const char line [] = "switchboard: SWITCHBOARD_TEST_WAL_CRASH: exiting\n";
        if (write (2, line, sizeof line - 1) < 0) { }
        _exit (86);
    }
}

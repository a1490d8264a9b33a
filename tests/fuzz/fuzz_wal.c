/*  tests/fuzz/fuzz_wal.c — the write-ahead log's record decoder on
    arbitrary bytes, as the replay at open reads a log file.

    Input: byte 0 gives the number of dbis the store has (0..32), and the
    rest is the log's records, one after another. Each record is read as
    store/lmdb_wal.c reads them: the head (its length checked against what
    follows and the cap), the checksum, then the body's operations. Every
    record that is accepted must encode again to exactly its own bytes,
    and the walk must never yield an operation out of the body's bounds or
    of the store's dbis: a decoder that accepts what the encoder could not
    have written is wrong, which no crash would reveal.
*/
#include "store/wal.h"
#include "store/store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *body;
    size_t len;
    unsigned ndbi;
    sb_wal_buf_t again;
} walk_t;

static int
s_op (void *ctx, int op, unsigned dbi, const void *key, size_t klen,
      const void *val, size_t vlen)
{
    walk_t *w = (walk_t *) ctx;
    const uint8_t *k = (const uint8_t *) key, *v = (const uint8_t *) val;
    if (dbi >= w->ndbi || klen == 0 || klen > SB_STORE_KEY_MAX
        || k < w->body || k + klen > w->body + w->len
        || v < w->body || v + vlen > w->body + w->len
        || (op == SB_WAL_DEL && vlen != 0))
        abort ();
    if (sb_wal_buf_op (&w->again, op, dbi, key, klen, val, vlen) != 0)
        abort ();
    return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *buf, size_t size)
{
    if (size < 1)
        return 0;
    unsigned ndbi = buf [0] % (SB_STORE_DBI_MAX + 1);
    const uint8_t *p = buf + 1;
    size_t left = size - 1;
    uint64_t expect = 0;
    while (left >= SB_WAL_HEAD) {
        uint32_t len;
        uint64_t lsn;
        if (sb_wal_head_decode (p, left - SB_WAL_HEAD, &len, &lsn) != 0)
            break;
        if (len > left - SB_WAL_HEAD)
            abort ();
        const uint8_t *body = p + SB_WAL_HEAD;
        if (!sb_wal_body_ok (p, body, len) || (expect && lsn != expect))
            break;
        walk_t w = { body, len, ndbi, { 0 } };
        int rc = sb_wal_body_walk (body, len, ndbi, s_op, &w);
        if (rc == 0) {
            uint8_t head [SB_WAL_HEAD];
            sb_wal_head_encode (head, lsn, w.again.data, w.again.len);
            if (w.again.len != len || memcmp (w.again.data, body, len) != 0
                || memcmp (head, p, SB_WAL_HEAD) != 0)
                abort ();
        }
        else
        if (rc != SB_STORE_INVALID || w.again.len != 0)
            abort ();       //  a malformed body applies nothing at all
        sb_wal_buf_free (&w.again);
        expect = lsn + 1;
        p += SB_WAL_HEAD + len;
        left -= SB_WAL_HEAD + len;
    }
    return 0;
}

/*  store/wal.h — the store's write-ahead log: one file of records in front
    of an LMDB environment, so that a group commit costs one fdatasync.

    Not a public header: only the LMDB files of store/ use it (the
    PostgreSQL store has a log of its own). docs/sessions.md, "Durability:
    the log", has the recovery argument; this is the file format and the
    calls.

    The file (DIR/log.wal):
      0         header slot A  (SB_WAL_SLOT bytes)
      SB_WAL_SLOT header slot B
      SB_WAL_DATA records, one after another, from the last checkpoint on
    The two slots are written in turn, each with a checksum and a sequence
    number, so that a torn header write leaves the other slot whole; the
    valid slot with the higher sequence is the header. It holds the LSN of
    the last checkpoint (every record up to it is in LMDB's synced file),
    LMDB's page size, a checksum of the dbi names and LMDB's two meta pages
    as they were synced at that checkpoint.

    A record: a 16-byte head, then its body.
      u32 len     bytes of the body, 1..SB_WAL_RECORD_MAX
      u32 crc     CRC32C of the LSN's 8 bytes and the body
      u64 lsn     the record's number: the checkpoint's LSN + 1, + 2, ...
    and the body is a run of operations:
      u8 op (SB_WAL_PUT, SB_WAL_DEL), u8 dbi, u16 klen, u32 vlen, key, value
    (a delete has vlen 0). Integers are little-endian. The records end at
    the first head that is zero, torn, fails its checksum or does not carry
    the next LSN: a preallocated file holds zeros or older records past
    the last one written, and neither can pass as the next.
*/
#ifndef SB_STORE_WAL_H
#define SB_STORE_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_WAL_HEAD         16
#define SB_WAL_SLOT         ((size_t) 64 * 1024)
#define SB_WAL_DATA         (2 * SB_WAL_SLOT)
//  One record holds one group commit's writes; a group that writes more
//  fails with SB_STORE_TXN_FULL.
#define SB_WAL_RECORD_MAX   ((size_t) 64 << 20)
//  The bytes of records the file is made with (zero-filled, so that an
//  append overwrites blocks that exist and fdatasync has no metadata to
//  write), and the bytes of records after which a commit checkpoints
//  first (SWITCHBOARD_WAL_CHECKPOINT_KB changes it, 4..1048576).
#define SB_WAL_SEGMENT      ((size_t) 8 << 20)
#define SB_WAL_CHECKPOINT   ((size_t) 4 << 20)
//  The LMDB meta pages the header keeps: two pages of at most this.
#define SB_WAL_PAGE_MAX     ((SB_WAL_SLOT - 64) / 2)

enum { SB_WAL_PUT = 1, SB_WAL_DEL = 2 };

uint32_t
    sb_wal_crc32c (uint32_t crc, const void *data, size_t len);

//  --------------------------------------------------------------------------
//  Record bodies

//  A growing body; zero-initialise it.
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} sb_wal_buf_t;

//  Adds one operation (a put with its value, or a delete with vlen 0).
//  Returns 0, SB_STORE_INVALID (dbi over 255, key of 0 or over 65535
//  bytes), SB_STORE_TXN_FULL (the body would pass SB_WAL_RECORD_MAX) or
//  -ENOMEM.
int  sb_wal_buf_op   (sb_wal_buf_t *buf, int op, unsigned dbi,
                      const void *key, size_t klen, const void *val, size_t vlen);
void sb_wal_buf_free (sb_wal_buf_t *buf);

//  Fills the head of a record of `len` body bytes.
void sb_wal_head_encode (uint8_t head [SB_WAL_HEAD], uint64_t lsn,
                         const void *body, size_t len);

//  Reads a head: 0 and the body's length and LSN, or -1 when it cannot
//  start a record that fits in `avail` bytes after the head (zero, over
//  the cap, longer than what follows). The checksum needs the body: see
//  sb_wal_body_ok.
int  sb_wal_head_decode (const uint8_t head [SB_WAL_HEAD], size_t avail,
                         uint32_t *len, uint64_t *lsn);
bool sb_wal_body_ok     (const uint8_t head [SB_WAL_HEAD], const void *body, size_t len);

//  One operation of a body; the pointers are into the body. A non-zero
//  return stops the walk and is returned.
typedef int (sb_wal_op_fn) (void *ctx, int op, unsigned dbi,
                            const void *key, size_t klen, const void *val, size_t vlen);

//  Checks every operation of a body (op known, dbi < ndbi, key 1..511
//  bytes, lengths within the body) before calling `fn` on any of them:
//  SB_STORE_INVALID when one is malformed, else fn's first non-zero or 0.
int  sb_wal_body_walk (const uint8_t *body, size_t len, unsigned ndbi,
                       sb_wal_op_fn *fn, void *ctx);

//  --------------------------------------------------------------------------
//  The file

typedef struct _sb_wal_t sb_wal_t;

typedef struct {
    uint64_t seq;               //  which write of the header this is
    uint64_t lsn;               //  the checkpoint's LSN
    uint32_t psize;             //  LMDB's page size; 0: no meta pages
    uint32_t names_crc;         //  CRC32C of the dbi names, each with its NUL
    const uint8_t *meta;        //  2 * psize bytes (owned by the log)
} sb_wal_header_t;

//  Opens DIR/log.wal, making it (zero-filled, synced, its folder synced)
//  when absent, and takes an exclusive lock on it: a second opener, in
//  this process or another, is refused. NULL on failure with one line in
//  err. The caller owns the log; sb_wal_close frees it.
sb_wal_t *
    sb_wal_open (const char *dir, char *err, size_t errlen);
void
    sb_wal_close (sb_wal_t **self_p);
//  Closes and removes the file (SWITCHBOARD_WAL=off after a run with it).
int
    sb_wal_remove (sb_wal_t **self_p);

//  The header read at open, or NULL when the file has none yet.
const sb_wal_header_t *
    sb_wal_header (sb_wal_t *self);

//  The next record at the read position, which must carry LSN `expect`
//  (0: any): 1 and its body (owned by the log, valid until the next call)
//  and LSN, 0 at the end of the records (which leaves the write position
//  there), or -errno.
int  sb_wal_next (sb_wal_t *self, uint64_t expect, const uint8_t **body, uint32_t *len,
                  uint64_t *lsn);

//  Appends one record at the write position and fdatasyncs the file: 0 or
//  -errno (nothing of it counts then: the write position stays).
int  sb_wal_append (sb_wal_t *self, uint64_t lsn, const void *body, size_t len);
//  Unwrites the record last appended (its head zeroed and synced), for a
//  commit that failed after its record was written.
int  sb_wal_unappend (sb_wal_t *self);
//  Writes the other header slot and fdatasyncs it.
int  sb_wal_set_header (sb_wal_t *self, uint64_t lsn, uint32_t psize, uint32_t names_crc,
                        const void *meta);
//  Starts the records again at SB_WAL_DATA and gives the file its
//  segment's size back; the caller has checkpointed every record.
int  sb_wal_recycle (sb_wal_t *self);
//  Bytes of records since the last recycle.
size_t sb_wal_used (sb_wal_t *self);

//  --------------------------------------------------------------------------
//  Tests

//  SWITCHBOARD_TEST_WAL_CRASH=POINT[:N]: the Nth time (default 1) this
//  process reaches POINT (after_flush, after_apply, in_checkpoint,
//  in_truncate), it _exits with status 86 on the spot.
void sb_wal_crash_point (const char *point);

#endif

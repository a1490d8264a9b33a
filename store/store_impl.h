/*  store/store_impl.h — what the store's files share: the front and the
    backends behind it.

    Not a public header: store/store.h is the API, and it names no backend
    type. Only the files of store/ include this one. The store is split along
    its seams:
      store.c          the front: open (which backend), names, sb_store_write
                       and its re-runs, info, error names
      txn.c            the front of transactions and single-key operations:
                       the sticky error and every argument check, once
      iter.c           the front of prefix iteration and the last key
      key.c            the key builder (sb_key_t)
      lmdb.c           LMDB: the environment, map growth, info
      lmdb_txn.c       LMDB: transactions and single keys
      lmdb_iter.c      LMDB: cursors and the last key under a prefix
      lmdb_wal.c       LMDB: the write-ahead log's commits, replay, checkpoints
      wal.c            the write-ahead log's file and records (store/wal.h)
      pg.c             PostgreSQL: the URL, connections, open, info
      pg_txn.c         PostgreSQL: transactions and single keys
      pg_iter.c        PostgreSQL: paged prefix scans and the last key
    Beside them all, with public headers of their own and using only the API
    (docs/architecture.md, "State plumbing"):
      cmdid.c          remembered command_ids: remember, replay, expire
      outbox.c         the outbox's book: committed records to the tape
      committer.c      the group committer thread

    The front checks everything a backend would otherwise check on its own
    (txn state, sticky error, dbi index, key and prefix lengths, a write in
    a read txn), and counts commits and aborts, so that a backend op is
    called only with valid arguments on a live txn and only has to do the
    work and map its own failures to SB_STORE_* codes. One indirect call per
    operation is the whole cost of the seam.
*/
#ifndef SB_STORE_IMPL_H
#define SB_STORE_IMPL_H

#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

//  The store's own dbi (LMDB) or table (PostgreSQL), holding the schema
//  version, which no caller's dbi may be named.
#define SB_STORE_META_NAME      "meta"
#define SB_STORE_META_VERSION   "schema_version"

//  Buckets of the write latency histogram: eight per power of two, up to
//  2^40 us.
#define SB_STORE_LAT_BUCKETS    312

//  The backend's operations. Each is called by the front only after the
//  front's checks passed: the txn is live, txn->ret is 0, the dbi is in
//  range, keys are 1..SB_STORE_KEY_MAX bytes, writes are in write txns.
//  Returns are SB_STORE_* codes or -errno; NOTFOUND and EXISTS are returned
//  as such, and the front decides what sticks.
typedef struct {
    const char *name;           //  "lmdb", "postgresql"

    //  Environment. `open` fills self->impl (the front made self, its dir
    //  and names); on failure it writes one line in err and returns
    //  non-zero, and the front calls `destroy`, which must cope with a
    //  half-made impl.
    int  (*open)    (sb_store_t *self, unsigned schema_version, size_t mapsize,
                     char *err, size_t errlen);
    void (*destroy) (sb_store_t *self);
    //  The backend's fields of `info` (the front fills ndbi and counters);
    //  `txn` is a read txn the front began.
    int  (*info)    (sb_txn_t *txn, sb_store_info_t *info);
    //  sb_store_write's commit returned `rc` after `attempt` runs (1 for the
    //  first): returns 0 to run `fn` again, or the code to give the caller.
    int  (*again)   (sb_store_t *self, int rc, unsigned attempt);

    //  Transactions: begin sets txn->handle; commit and abort end the txn
    //  (the front clears handle and the registration).
    int  (*txn_begin)  (sb_txn_t *txn);
    int  (*txn_commit) (sb_txn_t *txn);
    void (*txn_abort)  (sb_txn_t *txn);

    //  Single keys. insert returns SB_STORE_EXISTS when the key is there;
    //  append returns SB_STORE_ORDER when a key >= this one is there; get
    //  and del return SB_STORE_NOTFOUND.
    int  (*put)    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                    const void *val, size_t vlen);
    int  (*insert) (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                    const void *val, size_t vlen);
    int  (*append) (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                    const void *val, size_t vlen);
    int  (*get)    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                    sb_datum_t *out);
    int  (*del)    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen);
    //  sb_txn_guard on a live write txn with a checked guard: 0 or
    //  SB_STORE_FENCED (or the failure of the check itself).
    int  (*guard)  (sb_txn_t *txn, const sb_guard_t *guard);

    //  The greatest key >= prefix and < the prefix's successor (`succ`,
    //  slen bytes; slen 0: no successor, up to the dbi's last key). The
    //  front checks that the key found has the prefix.
    int  (*last)   (sb_txn_t *txn, unsigned dbi,
                    const void *prefix, size_t plen, const void *succ, size_t slen,
                    sb_datum_t *key, sb_datum_t *val);
    //  Deletes the least key >= prefix and < succ (slen 0: no successor)
    //  that no other txn holds locked, and copies it into key (at most
    //  SB_STORE_KEY_MAX bytes): 0, SB_STORE_NOTFOUND or an error. The
    //  front checks that the txn writes.
    int  (*take)   (sb_txn_t *txn, unsigned dbi,
                    const void *prefix, size_t plen, const void *succ, size_t slen,
                    uint8_t *key, size_t *klen);

    //  Iteration. begin positions it->cursor on the first key >= `seek`
    //  (seek 0 bytes: the dbi's first key) and stores that entry in it->key
    //  and it->val, returning 0, SB_STORE_NOTFOUND (nothing there) or an
    //  error; it->prefix and it->plen are set. next moves to the following
    //  entry (0, SB_STORE_NOTFOUND or an error). The front checks the
    //  prefix of each key and ends the iterator when it no longer matches.
    //  del deletes the entry last yielded; end releases the cursor (it may
    //  be called after the txn ended: it must not touch the txn then).
    int  (*iter_begin) (sb_txn_iter_t *it, unsigned dbi, const void *seek, size_t seeklen);
    int  (*iter_next)  (sb_txn_iter_t *it, sb_datum_t *key, sb_datum_t *val);
    int  (*iter_del)   (sb_txn_iter_t *it);
    void (*iter_end)   (sb_txn_iter_t *it);
} sb_store_ops_t;

extern const sb_store_ops_t sb_store_lmdb_ops;
extern const sb_store_ops_t sb_store_pg_ops;

struct _sb_store_t {
    const sb_store_ops_t *ops;
    void *impl;                 //  the backend's own state
    char *dir;                  //  the folder or URL given to sb_store_open
    unsigned ndbi;
    char *names [SB_STORE_DBI_MAX];

    pthread_mutex_t lock;       //  orders txn registration against grows
    int open_txns;              //  guarded by lock
    atomic_bool writing;        //  a write txn is open

    atomic_uint_fast64_t commits;
    atomic_uint_fast64_t aborts;
    atomic_uint_fast64_t disk_full;
    atomic_uint_fast64_t retries;

    //  sb_store_write's latency, microseconds, log-linear (store/stats.c),
    //  and the list of open stores that stats walks.
    atomic_uint_fast64_t lat [SB_STORE_LAT_BUCKETS];
    struct _sb_store_t *reg_next;
};

//  store/stats.c: a monotonic clock in microseconds; one write's latency
//  into the histogram; the store into (on) or out of the process's list.
uint64_t sb_store_clock_us (void);
void     sb_store_lat_add (sb_store_t *self, uint64_t us);
void     sb_store_register (sb_store_t *self, bool on);

//  Formats one line into err (either may be 0).
void
    sb_store_err (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

//  Positive, so that it cannot be mistaken for a store code: a backend's
//  open body returns it from sb_store_write when it refused the store and
//  already wrote why in err.
#define SB_STORE_OPEN_REFUSED 1

//  The 4-byte big-endian schema version record, both backends.
static inline void
sb_store_version_put (uint8_t be [4], unsigned version)
{
    be [0] = (uint8_t) (version >> 24);
    be [1] = (uint8_t) (version >> 16);
    be [2] = (uint8_t) (version >> 8);
    be [3] = (uint8_t) version;
}

static inline unsigned
sb_store_version_get (const uint8_t be [4])
{
    return (unsigned) ((uint32_t) be [0] << 24 | (uint32_t) be [1] << 16
                     | (uint32_t) be [2] << 8 | be [3]);
}

#endif

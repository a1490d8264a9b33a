/*  store/lmdb_impl.h — what the LMDB backend's files share (store/lmdb.c,
    lmdb_txn.c, lmdb_iter.c). Not a public header, and only the LMDB files
    include it: nothing else in the tree names an LMDB type. */
#ifndef SB_STORE_LMDB_IMPL_H
#define SB_STORE_LMDB_IMPL_H

#include "store/store_impl.h"

#include "store/wal.h"

#include <lmdb.h>

typedef struct {
    MDB_env *env;
    MDB_dbi dbi [SB_STORE_DBI_MAX];
    MDB_dbi meta;
    size_t mapsize;             //  guarded by the store's lock
    atomic_uint_fast64_t grows;
    int stale_readers;

    //  The write-ahead log (store/lmdb_wal.c); wal is NULL without one.
    //  All of it but the counters belongs to the holder of LMDB's writer
    //  lock.
    sb_wal_t *wal;
    bool logging;               //  commits go through the log (after open)
    bool wal_off;               //  SWITCHBOARD_WAL=off: the log is replayed and removed
    bool meta_open;             //  `meta` is a handle (the applied LSN can be read)
    MDB_txn *reader;            //  the read txn on the last checkpoint's snapshot
    sb_wal_buf_t buf;           //  the open write txn's record
    uint64_t next_lsn;
    uint32_t psize;
    uint32_t names_crc;
    size_t ckpt_bytes;
    int broken;                 //  the log's header could not follow a grow: no more commits
    bool unwritten;             //  a failed commit's record is still to be unwritten
    unsigned long replayed;     //  records replayed at open
    atomic_uint_fast64_t checkpoints;
} sb_lmdb_t;

//  The LMDB state of a store, and the LMDB txn of a store txn.
#define S_LMDB(store) ((sb_lmdb_t *) (store)->impl)
#define S_TXN(t) ((MDB_txn *) (t)->handle)

//  Maps an LMDB return (MDB_* codes, or a positive errno) to ours.
static inline int
s_code (int rc)
{
    switch (rc) {
        case MDB_SUCCESS:   return 0;
        case MDB_NOTFOUND:  return SB_STORE_NOTFOUND;
        case MDB_KEYEXIST:  return SB_STORE_ORDER;     //  only MDB_APPEND gets here
        case MDB_MAP_FULL:  return SB_STORE_MAP_FULL;
        case MDB_TXN_FULL:  return SB_STORE_TXN_FULL;
        case ENOSPC:
        case EDQUOT:        return SB_STORE_DISK_FULL;
        default:            return rc > 0? -rc: SB_STORE_BACKEND;
    }
}

//  The ops of lmdb_txn.c and lmdb_iter.c, gathered in lmdb.c's table.
int  sb_lmdb_txn_begin  (sb_txn_t *txn);
int  sb_lmdb_txn_commit (sb_txn_t *txn);
void sb_lmdb_txn_abort  (sb_txn_t *txn);
int  sb_lmdb_put    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                     const void *val, size_t vlen);
int  sb_lmdb_insert (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                     const void *val, size_t vlen);
int  sb_lmdb_append (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                     const void *val, size_t vlen);
int  sb_lmdb_get    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                     sb_datum_t *out);
int  sb_lmdb_del    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen);
int  sb_lmdb_guard  (sb_txn_t *txn, const sb_guard_t *guard);
int  sb_lmdb_last   (sb_txn_t *txn, unsigned dbi,
                     const void *prefix, size_t plen, const void *succ, size_t slen,
                     sb_datum_t *key, sb_datum_t *val);
int  sb_lmdb_take   (sb_txn_t *txn, unsigned dbi,
                     const void *prefix, size_t plen, const void *succ, size_t slen,
                     uint8_t *key, size_t *klen);
int  sb_lmdb_iter_begin (sb_txn_iter_t *it, unsigned dbi, const void *seek, size_t seeklen);
int  sb_lmdb_iter_next  (sb_txn_iter_t *it, sb_datum_t *key, sb_datum_t *val);
int  sb_lmdb_iter_del   (sb_txn_iter_t *it);
void sb_lmdb_iter_end   (sb_txn_iter_t *it);

//  store/lmdb_wal.c. wanted: SWITCHBOARD_WAL is not "off". restore: before
//  mdb_env_open, opens the log (when wanted, or when one is there) and
//  writes its checkpoint's meta pages back; hold: after it, the read txn
//  on that snapshot; replay: after the dbis are open, the records past
//  LMDB's, then a checkpoint. commit: a write txn's commit through the
//  log; record: one put or delete into the open txn's record. release and
//  regain: around a map grow. close: the last checkpoint.
bool sb_lmdb_wal_wanted  (void);
int  sb_lmdb_wal_restore (sb_store_t *self, char *err, size_t errlen);
int  sb_lmdb_wal_hold    (sb_store_t *self);
int  sb_lmdb_wal_replay  (sb_store_t *self, char *err, size_t errlen);
int  sb_lmdb_wal_commit  (sb_txn_t *txn);
int  sb_lmdb_wal_record  (sb_txn_t *txn, int op, unsigned dbi,
                          const void *key, size_t klen, const void *val, size_t vlen);
void sb_lmdb_wal_release (sb_store_t *self);
int  sb_lmdb_wal_regain  (sb_store_t *self);
void sb_lmdb_wal_close   (sb_store_t *self);

#endif

/*  store/store_impl.h — what the LMDB store's files share.

    Not a public header: store/store.h is the API, and it names no LMDB
    type. Only the files of store/ include this one. The store is split along its
    seams:
      store.c          the environment: open, schema version, map growth,
                       sb_store_write, info, error names
      txn.c            transactions and single-key operations
      iter.c           prefix iteration and the last key under a prefix
      key.c            the key builder (sb_key_t)
    Beside them, with public headers of their own and using only the API
    (docs/architecture.md, "State plumbing"):
      cmdid.c          remembered command_ids: remember, replay, expire
      outbox.c         the outbox's book: committed records to the tape
      committer.c      the group committer thread
*/
#ifndef SB_STORE_IMPL_H
#define SB_STORE_IMPL_H

#include "store/store.h"

#include <lmdb.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

struct _sb_store_t {
    MDB_env *env;
    char *dir;
    unsigned ndbi;
    MDB_dbi dbi [SB_STORE_DBI_MAX];
    char *names [SB_STORE_DBI_MAX];
    MDB_dbi meta;

    pthread_mutex_t lock;       //  orders txn registration against grows
    int open_txns;              //  guarded by lock
    atomic_bool writing;        //  a write txn is open
    size_t mapsize;             //  guarded by lock

    atomic_uint_fast64_t commits;
    atomic_uint_fast64_t aborts;
    atomic_uint_fast64_t grows;
    atomic_uint_fast64_t disk_full;
    int stale_readers;
};

//  The LMDB txn of a store txn.
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

//  True when an operation may proceed; otherwise the txn holds (or now
//  gets) the error that the operation returns.
static inline bool
s_ready (sb_txn_t *txn, unsigned dbi)
{
    if (txn->ret != 0)
        return false;
    if (!txn->handle || dbi >= txn->store->ndbi) {
        txn->ret = SB_STORE_INVALID;
        return false;
    }
    return true;
}

#endif

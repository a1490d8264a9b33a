/*  store/lmdb_txn.c — the store on LMDB: transactions and single keys.
    The front (store/txn.c) has checked the arguments and registered the
    txn; these only call LMDB and map its codes. */
#include "store/lmdb_impl.h"

//  --------------------------------------------------------------------------
//  Transactions

int
sb_lmdb_txn_begin (sb_txn_t *txn)
{
    sb_store_t *store = txn->store;
    sb_lmdb_t *lm = S_LMDB (store);
    unsigned flags = txn->write? 0: MDB_RDONLY;
    int rc = mdb_txn_begin (lm->env, NULL, flags, (MDB_txn **) &txn->handle);
    if (rc == MDB_MAP_RESIZED) {
        //  Another process grew the map. Adopt its size, which LMDB allows
        //  only while we have no other txn open.
        pthread_mutex_lock (&store->lock);
        if (store->open_txns == 1 && mdb_env_set_mapsize (lm->env, 0) == 0) {
            MDB_envinfo info;
            mdb_env_info (lm->env, &info);
            lm->mapsize = info.me_mapsize;
            rc = mdb_txn_begin (lm->env, NULL, flags, (MDB_txn **) &txn->handle);
        }
        pthread_mutex_unlock (&store->lock);
    }
    if (rc == 0 && txn->write)
        lm->buf.len = 0;
    return s_code (rc);
}

void
sb_lmdb_txn_abort (sb_txn_t *txn)
{
    //  Also how LMDB releases a read txn, which has nothing to commit.
    mdb_txn_abort (S_TXN (txn));
}

int
sb_lmdb_txn_commit (sb_txn_t *txn)
{
    if (S_LMDB (txn->store)->logging)
        return sb_lmdb_wal_commit (txn);
    return s_code (mdb_txn_commit (S_TXN (txn)));
}

//  --------------------------------------------------------------------------
//  Single keys

static int
s_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
       const void *val, size_t vlen, unsigned flags)
{
    MDB_val k = { klen, (void *) key };
    MDB_val v = { vlen, (void *) val };
    sb_lmdb_t *lm = S_LMDB (txn->store);
    int rc = mdb_put (S_TXN (txn), lm->dbi [dbi], &k, &v, flags);
    if (rc == MDB_KEYEXIST && (flags & MDB_NOOVERWRITE))
        return SB_STORE_EXISTS;
    if (rc == 0 && lm->logging)
        return sb_lmdb_wal_record (txn, SB_WAL_PUT, dbi, key, klen, val, vlen);
    return s_code (rc);
}

int
sb_lmdb_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
             const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, 0);
}

int
sb_lmdb_insert (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, MDB_NOOVERWRITE);
}

int
sb_lmdb_append (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, MDB_APPEND);
}

int
sb_lmdb_get (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
             sb_datum_t *out)
{
    MDB_val k = { klen, (void *) key };
    MDB_val v;
    int rc = mdb_get (S_TXN (txn), S_LMDB (txn->store)->dbi [dbi], &k, &v);
    if (rc != 0)
        return s_code (rc);
    *out = (sb_datum_t) { v.mv_size, v.mv_data };
    return 0;
}

int
sb_lmdb_del (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen)
{
    MDB_val k = { klen, (void *) key };
    sb_lmdb_t *lm = S_LMDB (txn->store);
    int rc = mdb_del (S_TXN (txn), lm->dbi [dbi], &k, NULL);
    if (rc == 0 && lm->logging)
        return sb_lmdb_wal_record (txn, SB_WAL_DEL, dbi, key, klen, NULL, 0);
    return s_code (rc);
}

//  --------------------------------------------------------------------------
//  Fencing

//  One host, one writer per environment: there is no lease to check.
int
sb_lmdb_guard (sb_txn_t *txn, const sb_guard_t *guard)
{
    return 0;
}

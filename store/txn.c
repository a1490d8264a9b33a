/*  store/txn.c — the store's transactions (sticky error, see
    store/store.h) and its single-key operations. Every txn registers in
    the store's open_txns before it calls into LMDB: see store/store.c on
    map growth. */
#include "store/store_impl.h"

//  --------------------------------------------------------------------------
//  Transactions

int
sb_txn_begin (sb_store_t *store, sb_txn_t *txn, bool write)
{
    if (!txn)
        return SB_STORE_INVALID;
    *txn = (sb_txn_t) { .store = store, .write = write };
    if (!store)
        return txn->ret = SB_STORE_INVALID;

    //  LMDB's writer lock is not recursive: a nested begin on the owning
    //  thread would hang forever. Refuse it instead.
    if (write) {
        bool expected = false;
        if (!atomic_compare_exchange_strong (&store->writing, &expected, true))
            return txn->ret = SB_STORE_BUSY;
    }
    pthread_mutex_lock (&store->lock);
    store->open_txns++;
    pthread_mutex_unlock (&store->lock);

    int rc = mdb_txn_begin (store->env, NULL, write? 0: MDB_RDONLY, (MDB_txn **) &txn->handle);
    if (rc == MDB_MAP_RESIZED) {
        //  Another process grew the map. Adopt its size, which LMDB allows
        //  only while we have no other txn open.
        pthread_mutex_lock (&store->lock);
        if (store->open_txns == 1 && mdb_env_set_mapsize (store->env, 0) == 0) {
            MDB_envinfo info;
            mdb_env_info (store->env, &info);
            store->mapsize = info.me_mapsize;
            rc = mdb_txn_begin (store->env, NULL, write? 0: MDB_RDONLY, (MDB_txn **) &txn->handle);
        }
        pthread_mutex_unlock (&store->lock);
    }
    if (rc != 0) {
        txn->handle = NULL;
        txn->ret = s_code (rc);
        pthread_mutex_lock (&store->lock);
        store->open_txns--;
        pthread_mutex_unlock (&store->lock);
        if (write)
            atomic_store (&store->writing, false);
    }
    return txn->ret;
}

//  Forgets an ended txn: its LMDB handle is already freed.
static void
s_txn_release (sb_txn_t *txn)
{
    sb_store_t *store = txn->store;
    txn->handle = NULL;
    pthread_mutex_lock (&store->lock);
    store->open_txns--;
    pthread_mutex_unlock (&store->lock);
    if (txn->write)
        atomic_store (&store->writing, false);
}

void
sb_txn_abort (sb_txn_t *txn)
{
    if (!txn || !txn->handle)
        return;
    mdb_txn_abort (S_TXN (txn));
    if (txn->write)
        atomic_fetch_add_explicit (&txn->store->aborts, 1, memory_order_relaxed);
    s_txn_release (txn);
}

int
sb_txn_commit (sb_txn_t *txn)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!txn->handle)
        return txn->ret;
    if (txn->ret != 0) {
        sb_txn_abort (txn);
        return txn->ret;
    }
    if (!txn->write) {
        //  A read txn has nothing to commit; abort is how LMDB releases it.
        mdb_txn_abort (S_TXN (txn));
        s_txn_release (txn);
        return 0;
    }
    sb_store_t *store = txn->store;
    int rc = s_code (mdb_txn_commit (S_TXN (txn)));
    s_txn_release (txn);
    if (rc == 0)
        atomic_fetch_add_explicit (&store->commits, 1, memory_order_relaxed);
    else {
        txn->ret = rc;
        atomic_fetch_add_explicit (&store->aborts, 1, memory_order_relaxed);
        if (rc == SB_STORE_DISK_FULL)
            atomic_fetch_add_explicit (&store->disk_full, 1, memory_order_relaxed);
    }
    return rc;
}


//  A zero length is how an overflowed sb_key_t shows itself, and LMDB
//  refuses keys over its maximum anyway: make both a clear INVALID.
static bool
s_key_ok (sb_txn_t *txn, const void *key, size_t klen)
{
    if (!key || klen == 0 || klen > SB_STORE_KEY_MAX) {
        txn->ret = SB_STORE_INVALID;
        return false;
    }
    return true;
}

static int
s_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
       const void *val, size_t vlen, unsigned flags)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi) || !s_key_ok (txn, key, klen))
        return txn->ret;
    if (!val && vlen > 0)
        return txn->ret = SB_STORE_INVALID;
    MDB_val k = { klen, (void *) key };
    MDB_val v = { vlen, (void *) val };
    int rc = mdb_put (S_TXN (txn), txn->store->dbi [dbi], &k, &v, flags);
    if (rc == MDB_KEYEXIST && (flags & MDB_NOOVERWRITE))
        return SB_STORE_EXISTS;
    if (rc != 0) {
        txn->ret = s_code (rc);
        if (txn->ret == SB_STORE_DISK_FULL)
            atomic_fetch_add_explicit (&txn->store->disk_full, 1, memory_order_relaxed);
    }
    return txn->ret;
}

int
sb_txn_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
            const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, 0);
}

int
sb_txn_insert (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
               const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, MDB_NOOVERWRITE);
}

int
sb_txn_append (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
               const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, MDB_APPEND);
}

int
sb_txn_get (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
            sb_datum_t *out)
{
    if (out)
        *out = (sb_datum_t) { 0, NULL };
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi) || !s_key_ok (txn, key, klen))
        return txn->ret;
    MDB_val k = { klen, (void *) key };
    MDB_val v;
    int rc = mdb_get (S_TXN (txn), txn->store->dbi [dbi], &k, &v);
    if (rc == MDB_NOTFOUND)
        return SB_STORE_NOTFOUND;
    if (rc != 0)
        return txn->ret = s_code (rc);
    if (out)
        *out = (sb_datum_t) { v.mv_size, v.mv_data };
    return 0;
}

int
sb_txn_del (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi) || !s_key_ok (txn, key, klen))
        return txn->ret;
    MDB_val k = { klen, (void *) key };
    int rc = mdb_del (S_TXN (txn), txn->store->dbi [dbi], &k, NULL);
    if (rc == MDB_NOTFOUND)
        return SB_STORE_NOTFOUND;
    if (rc != 0)
        txn->ret = s_code (rc);
    return txn->ret;
}

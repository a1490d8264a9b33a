/*  store/txn.c — the front of transactions (the sticky error, see
    store/store.h) and of the single-key operations: every check is made
    here, once, and only a valid call on a live txn reaches the backend.

    Every txn registers in the store's open_txns before it calls into the
    backend: LMDB grows its map only while none is open (store/lmdb.c). */
#include "store/store_impl.h"

#include <string.h>

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

    //  One write txn at a time: LMDB's writer lock is not recursive (a
    //  nested begin on the owning thread would hang forever), and the
    //  PostgreSQL store keeps one connection for its writer. Refuse a
    //  second one instead.
    if (write) {
        bool expected = false;
        if (!atomic_compare_exchange_strong (&store->writing, &expected, true))
            return txn->ret = SB_STORE_BUSY;
    }
    pthread_mutex_lock (&store->lock);
    store->open_txns++;
    pthread_mutex_unlock (&store->lock);

    int rc = store->ops->txn_begin (txn);
    if (rc != 0) {
        txn->handle = NULL;
        txn->ret = rc;
        pthread_mutex_lock (&store->lock);
        store->open_txns--;
        pthread_mutex_unlock (&store->lock);
        if (write)
            atomic_store (&store->writing, false);
    }
    return txn->ret;
}

//  Forgets an ended txn: the backend freed its handle.
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
    txn->store->ops->txn_abort (txn);
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
    sb_store_t *store = txn->store;
    if (!txn->write) {
        //  A read txn has nothing to commit; the backend releases it.
        store->ops->txn_abort (txn);
        s_txn_release (txn);
        return 0;
    }
    int rc = store->ops->txn_commit (txn);
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

//  --------------------------------------------------------------------------
//  Checks shared by every operation

//  True when an operation may proceed; otherwise the txn holds (or now
//  gets) the error that the operation returns. A zero length is how an
//  overflowed sb_key_t shows itself, and no backend takes keys over the
//  maximum: both are a clear INVALID. A write in a read txn is -EACCES,
//  what LMDB has always said of it.
static bool
s_ready (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen, bool writes)
{
    if (txn->ret != 0)
        return false;
    if (!txn->handle || dbi >= txn->store->ndbi || !key || klen == 0 || klen > SB_STORE_KEY_MAX) {
        txn->ret = SB_STORE_INVALID;
        return false;
    }
    if (writes && !txn->write) {
        txn->ret = -EACCES;
        return false;
    }
    return true;
}

//  What a write's failure leaves: EXISTS is an answer, not an error; any
//  other failure sticks.
static int
s_wrote (sb_txn_t *txn, int rc)
{
    if (rc == 0 || rc == SB_STORE_EXISTS)
        return rc;
    txn->ret = rc;
    if (rc == SB_STORE_DISK_FULL)
        atomic_fetch_add_explicit (&txn->store->disk_full, 1, memory_order_relaxed);
    return rc;
}

//  --------------------------------------------------------------------------
//  Single keys

int
sb_txn_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
            const void *val, size_t vlen)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi, key, klen, true))
        return txn->ret;
    if (!val && vlen > 0)
        return txn->ret = SB_STORE_INVALID;
    return s_wrote (txn, txn->store->ops->put (txn, dbi, key, klen, val, vlen));
}

int
sb_txn_insert (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
               const void *val, size_t vlen)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi, key, klen, true))
        return txn->ret;
    if (!val && vlen > 0)
        return txn->ret = SB_STORE_INVALID;
    return s_wrote (txn, txn->store->ops->insert (txn, dbi, key, klen, val, vlen));
}

int
sb_txn_append (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
               const void *val, size_t vlen)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi, key, klen, true))
        return txn->ret;
    if (!val && vlen > 0)
        return txn->ret = SB_STORE_INVALID;
    return s_wrote (txn, txn->store->ops->append (txn, dbi, key, klen, val, vlen));
}

int
sb_txn_get (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
            sb_datum_t *out)
{
    if (out)
        *out = (sb_datum_t) { 0, NULL };
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi, key, klen, false))
        return txn->ret;
    sb_datum_t v = { 0, NULL };
    int rc = txn->store->ops->get (txn, dbi, key, klen, &v);
    if (rc == SB_STORE_NOTFOUND)
        return rc;
    if (rc != 0)
        return txn->ret = rc;
    if (out)
        *out = v;
    return 0;
}

int
sb_txn_del (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi, key, klen, true))
        return txn->ret;
    int rc = txn->store->ops->del (txn, dbi, key, klen);
    if (rc == SB_STORE_NOTFOUND)
        return rc;
    if (rc != 0)
        txn->ret = rc;
    return txn->ret;
}

//  --------------------------------------------------------------------------
//  Fencing

static bool
s_guard_ok (const sb_guard_t *g)
{
    if (!g || !g->owner || !*g->owner || !g->schema)
        return false;
    size_t n = strlen (g->schema);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = g->schema [i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

int
sb_txn_guard (sb_txn_t *txn, const sb_guard_t *guard)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (txn->ret != 0)
        return txn->ret;
    if (!txn->handle || !s_guard_ok (guard))
        return txn->ret = SB_STORE_INVALID;
    if (!txn->write)
        return txn->ret = -EACCES;
    int rc = txn->store->ops->guard (txn, guard);
    if (rc != 0)
        txn->ret = rc;
    return rc;
}

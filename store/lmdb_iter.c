/*  store/lmdb_iter.c — the store on LMDB: cursors, and the last key under
    a prefix. The front (store/iter.c) computes the seek key and the
    prefix's successor and checks that what is found is in range. */
#include "store/lmdb_impl.h"

#include <stddef.h>
#include <string.h>

int
sb_lmdb_last (sb_txn_t *txn, unsigned dbi,
              const void *prefix, size_t plen, const void *succ, size_t slen,
              sb_datum_t *key, sb_datum_t *val)
{
    MDB_cursor *cursor;
    int rc = mdb_cursor_open (S_TXN (txn), S_LMDB (txn->store)->dbi [dbi], &cursor);
    if (rc != 0)
        return s_code (rc);
    //  The last key before the successor, or the dbi's last key when there
    //  is no successor or nothing at or after it.
    MDB_val k, v;
    if (slen == 0)
        rc = mdb_cursor_get (cursor, &k, &v, MDB_LAST);
    else {
        k = (MDB_val) { slen, (void *) succ };
        rc = mdb_cursor_get (cursor, &k, &v, MDB_SET_RANGE);
        if (rc == 0)
            rc = mdb_cursor_get (cursor, &k, &v, MDB_PREV);
        else
        if (rc == MDB_NOTFOUND)
            rc = mdb_cursor_get (cursor, &k, &v, MDB_LAST);
    }
    mdb_cursor_close (cursor);
    if (rc != 0)
        return s_code (rc);
    *key = (sb_datum_t) { k.mv_size, k.mv_data };
    *val = (sb_datum_t) { v.mv_size, v.mv_data };
    return 0;
}

int
sb_lmdb_take (sb_txn_t *txn, unsigned dbi,
              const void *prefix, size_t plen, const void *succ, size_t slen,
              uint8_t *key, size_t *klen)
{
    //  One writer at a time: nothing is locked by another txn
    MDB_cursor *cursor;
    int rc = mdb_cursor_open (S_TXN (txn), S_LMDB (txn->store)->dbi [dbi], &cursor);
    if (rc != 0)
        return s_code (rc);
    MDB_val k = { plen, (void *) prefix }, v;
    rc = plen? mdb_cursor_get (cursor, &k, &v, MDB_SET_RANGE): mdb_cursor_get (cursor, &k, &v, MDB_FIRST);
    //  a key with the prefix is below its successor
    (void) succ;
    (void) slen;
    if (rc == 0 && (k.mv_size < plen || memcmp (k.mv_data, prefix, plen) != 0 || k.mv_size > SB_STORE_KEY_MAX))
        rc = MDB_NOTFOUND;
    if (rc == 0) {
        memcpy (key, k.mv_data, k.mv_size);
        *klen = k.mv_size;
        rc = mdb_cursor_del (cursor, 0);
    }
    mdb_cursor_close (cursor);
    return rc == 0? 0: s_code (rc);
}

int
sb_lmdb_iter_begin (sb_txn_iter_t *it, unsigned dbi, const void *seek, size_t seeklen)
{
    sb_txn_t *txn = it->txn;
    int rc = mdb_cursor_open (S_TXN (txn), S_LMDB (txn->store)->dbi [dbi],
                              (MDB_cursor **) &it->cursor);
    if (rc != 0) {
        it->cursor = NULL;
        return s_code (rc);
    }
    MDB_val k = { seeklen, (void *) seek };
    MDB_val v = { 0, NULL };
    if (seeklen > 0)
        rc = mdb_cursor_get (it->cursor, &k, &v, MDB_SET_RANGE);
    else
        rc = mdb_cursor_get (it->cursor, &k, &v, MDB_FIRST);
    it->key = (sb_datum_t) { k.mv_size, k.mv_data };
    it->val = (sb_datum_t) { v.mv_size, v.mv_data };
    return s_code (rc);
}

//  The hot loop of every scan: LMDB writes the entry straight into the
//  front's datums, which have MDB_val's layout (checked here), instead of
//  into MDB_vals that would be copied over.
_Static_assert (sizeof (MDB_val) == sizeof (sb_datum_t)
                && offsetof (MDB_val, mv_size) == offsetof (sb_datum_t, size)
                && offsetof (MDB_val, mv_data) == offsetof (sb_datum_t, data),
                "sb_datum_t has MDB_val's layout");

int
sb_lmdb_iter_next (sb_txn_iter_t *it, sb_datum_t *key, sb_datum_t *val)
{
    return s_code (mdb_cursor_get (it->cursor, (MDB_val *) key, (MDB_val *) val, MDB_NEXT));
}

int
sb_lmdb_iter_del (sb_txn_iter_t *it)
{
    sb_lmdb_t *lm = S_LMDB (it->txn->store);
    if (!lm->logging)
        return s_code (mdb_cursor_del (it->cursor, 0));
    //  The log needs the dbi's index and the key, which the delete takes
    //  away.
    MDB_dbi handle = mdb_cursor_dbi (it->cursor);
    unsigned dbi = 0;
    while (dbi < it->txn->store->ndbi && lm->dbi [dbi] != handle)
        dbi++;
    if (dbi == it->txn->store->ndbi)
        return SB_STORE_BACKEND;
    MDB_val k, v;
    int rc = mdb_cursor_get (it->cursor, &k, &v, MDB_GET_CURRENT);
    if (rc != 0)
        return s_code (rc);
    rc = sb_lmdb_wal_record (it->txn, SB_WAL_DEL, dbi, k.mv_data, k.mv_size, NULL, 0);
    if (rc == 0)
    if (rc == 0)
        rc = s_code (mdb_cursor_del (it->cursor, 0));
    return rc;
}

void
sb_lmdb_iter_end (sb_txn_iter_t *it)
{
    mdb_cursor_close (it->cursor);
}

/*  store/iter.c — reading by prefix: the last key under a prefix,
    cursors over a prefix, and foreach. */
#include "store/store_impl.h"

#include <string.h>

//  --------------------------------------------------------------------------
//  Prefix helpers

static bool
s_has_prefix (const MDB_val *key, const void *prefix, size_t plen)
{
    return plen == 0
        || (key->mv_size >= plen && memcmp (key->mv_data, prefix, plen) == 0);
}

//  Byte order, as LMDB's default comparison sees it: a proper prefix sorts
//  first.
static int
s_cmp (const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen? alen: blen;
    int c = n? memcmp (a, b, n): 0;
    if (c != 0)
        return c;
    return alen < blen? -1: alen > blen? 1: 0;
}

//  A NULL prefix of length 0 means "the whole dbi"; a non-NULL one of
//  length 0 is an overflowed sb_key_t and must not silently match all.
static bool
s_prefix_ok (sb_txn_t *txn, const void *prefix, size_t plen)
{
    if ((prefix && plen == 0) || (!prefix && plen > 0) || plen > SB_STORE_KEY_MAX) {
        txn->ret = SB_STORE_INVALID;
        return false;
    }
    return true;
}

int
sb_txn_last (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen,
             sb_datum_t *key, sb_datum_t *val)
{
    if (key)
        *key = (sb_datum_t) { 0, NULL };
    if (val)
        *val = (sb_datum_t) { 0, NULL };
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi) || !s_prefix_ok (txn, prefix, plen))
        return txn->ret;

    MDB_cursor *cursor;
    int rc = mdb_cursor_open (S_TXN (txn), txn->store->dbi [dbi], &cursor);
    if (rc != 0)
        return txn->ret = s_code (rc);

    //  The last key with the prefix is the one just before the prefix's
    //  successor: the prefix with trailing 0xff bytes dropped and its last
    //  byte incremented. A prefix of only 0xff bytes has no successor, and
    //  its last key is the dbi's last key.
    uint8_t succ [SB_STORE_KEY_MAX];
    size_t slen = plen;
    if (plen > 0)
        memcpy (succ, prefix, plen);
    while (slen > 0 && succ [slen - 1] == 0xff)
        slen--;
    MDB_val k, v;
    if (slen == 0)
        rc = mdb_cursor_get (cursor, &k, &v, MDB_LAST);
    else {
        succ [slen - 1]++;
        k = (MDB_val) { slen, succ };
        rc = mdb_cursor_get (cursor, &k, &v, MDB_SET_RANGE);
        if (rc == 0)
            rc = mdb_cursor_get (cursor, &k, &v, MDB_PREV);
        else
        if (rc == MDB_NOTFOUND)
            rc = mdb_cursor_get (cursor, &k, &v, MDB_LAST);
    }
    mdb_cursor_close (cursor);
    if (rc == MDB_NOTFOUND || (rc == 0 && !s_has_prefix (&k, prefix, plen)))
        return SB_STORE_NOTFOUND;
    if (rc != 0)
        return txn->ret = s_code (rc);
    if (key)
        *key = (sb_datum_t) { k.mv_size, k.mv_data };
    if (val)
        *val = (sb_datum_t) { v.mv_size, v.mv_data };
    return 0;
}

//  --------------------------------------------------------------------------
//  Prefix iteration

int
sb_txn_iter_begin (sb_txn_t *txn, sb_txn_iter_t *it, unsigned dbi,
                   const void *prefix, size_t plen,
                   const void *start, size_t slen)
{
    if (!txn || !it)
        return SB_STORE_INVALID;
    memset (it, 0, offsetof (sb_txn_iter_t, prefix));
    it->txn = txn;
    it->first_rc = MDB_NOTFOUND;
    it->started = true;         //  until positioned: next yields nothing
    if (!s_ready (txn, dbi) || !s_prefix_ok (txn, prefix, plen))
        return txn->ret;
    if ((start && slen == 0) || (!start && slen > 0) || slen > SB_STORE_KEY_MAX)
        return txn->ret = SB_STORE_INVALID;

    int rc = mdb_cursor_open (S_TXN (txn), txn->store->dbi [dbi], (MDB_cursor **) &it->cursor);
    if (rc != 0) {
        it->cursor = NULL;
        return txn->ret = s_code (rc);
    }
    it->plen = plen;
    if (plen > 0)
        memcpy (it->prefix, prefix, plen);

    //  Seek to whichever is later, the prefix or the start key: a start key
    //  before the prefix would otherwise begin outside the range.
    MDB_val seek = { plen, it->prefix };
    if (start && s_cmp (start, slen, prefix, plen) > 0)
        seek = (MDB_val) { slen, (void *) start };
    MDB_val val = { 0, NULL };
    if (seek.mv_size > 0)
        rc = mdb_cursor_get (it->cursor, &seek, &val, MDB_SET_RANGE);
    else
        rc = mdb_cursor_get (it->cursor, &seek, &val, MDB_FIRST);
    it->key = (sb_datum_t) { seek.mv_size, seek.mv_data };
    it->val = (sb_datum_t) { val.mv_size, val.mv_data };
    it->first_rc = rc;
    it->started = false;
    if (rc != 0 && rc != MDB_NOTFOUND) {
        txn->ret = s_code (rc);
        sb_txn_iter_end (it);
    }
    return txn->ret;
}

bool
sb_txn_iter_next (sb_txn_iter_t *it, sb_datum_t *key, sb_datum_t *val)
{
    if (!it || !it->cursor)
        return false;
    sb_txn_t *txn = it->txn;
    if (txn->ret != 0 || !txn->handle) {
        sb_txn_iter_end (it);
        return false;
    }
    int rc;
    MDB_val k, v;
    if (!it->started) {
        it->started = true;
        rc = it->first_rc;
        k = (MDB_val) { it->key.size, (void *) it->key.data };
        v = (MDB_val) { it->val.size, (void *) it->val.data };
    }
    else
        rc = mdb_cursor_get (it->cursor, &k, &v, MDB_NEXT);

    if (rc == 0 && s_has_prefix (&k, it->prefix, it->plen)) {
        if (key)
            *key = (sb_datum_t) { k.mv_size, k.mv_data };
        if (val)
            *val = (sb_datum_t) { v.mv_size, v.mv_data };
        return true;
    }
    if (rc != 0 && rc != MDB_NOTFOUND)
        txn->ret = s_code (rc);
    sb_txn_iter_end (it);
    return false;
}

int
sb_txn_iter_del (sb_txn_iter_t *it)
{
    if (!it || !it->txn)
        return SB_STORE_INVALID;
    sb_txn_t *txn = it->txn;
    if (txn->ret != 0)
        return txn->ret;
    if (!it->cursor || !it->started)
        return txn->ret = SB_STORE_INVALID;
    int rc = mdb_cursor_del (it->cursor, 0);
    if (rc != 0)
        txn->ret = s_code (rc);
    return txn->ret;
}

void
sb_txn_iter_end (sb_txn_iter_t *it)
{
    if (it && it->cursor) {
        mdb_cursor_close (it->cursor);
        it->cursor = NULL;
    }
}

int
sb_txn_foreach (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen,
                const void *start, size_t slen,
                sb_txn_foreach_fn *cb, void *ctx)
{
    if (!txn || !cb)
        return SB_STORE_INVALID;
    sb_txn_iter_t it;
    if (sb_txn_iter_begin (txn, &it, dbi, prefix, plen, start, slen) != 0)
        return txn->ret;
    sb_datum_t k, v;
    while (sb_txn_iter_next (&it, &k, &v)) {
        int rc = cb (&k, &v, ctx);
        if (rc != 0) {
            sb_txn_iter_end (&it);
            return rc;
        }
    }
    return txn->ret;
}

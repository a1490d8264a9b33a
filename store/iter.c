/*  store/iter.c — the front of reading by prefix: the last key under a
    prefix, cursors over a prefix, and foreach. The prefix arithmetic (the
    successor, the seek key, whether a key is still in range) is here,
    once; a backend only seeks and steps. */
#include "store/store_impl.h"

#include <string.h>

//  --------------------------------------------------------------------------
//  Prefix helpers

static bool
s_has_prefix (const sb_datum_t *key, const void *prefix, size_t plen)
{
    return plen == 0
        || (key->size >= plen && memcmp (key->data, prefix, plen) == 0);
}

//  Byte order, as both backends see it: a proper prefix sorts first.
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
s_prefix_ok (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen)
{
    if (txn->ret != 0)
        return false;
    if (!txn->handle || dbi >= txn->store->ndbi
        || (prefix && plen == 0) || (!prefix && plen > 0) || plen > SB_STORE_KEY_MAX) {
        txn->ret = SB_STORE_INVALID;
        return false;
    }
    return true;
}

//  The prefix's successor, the first key past every key with the prefix:
//  the prefix with trailing 0xff bytes dropped and its last byte
//  incremented. Its length; 0 for a prefix of only 0xff bytes, which has
//  no successor (its keys run to the dbi's end).
static size_t
s_successor (const void *prefix, size_t plen, uint8_t succ [SB_STORE_KEY_MAX])
{
    size_t slen = plen;
    if (plen > 0)
        memcpy (succ, prefix, plen);
    while (slen > 0 && succ [slen - 1] == 0xff)
        slen--;
    if (slen > 0)
        succ [slen - 1]++;
    return slen;
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
    if (!s_prefix_ok (txn, dbi, prefix, plen))
        return txn->ret;

    //  The last key with the prefix is the one just before its successor.
    uint8_t succ [SB_STORE_KEY_MAX];
    size_t slen = s_successor (prefix, plen, succ);
    sb_datum_t k = { 0, NULL }, v = { 0, NULL };
    int rc = txn->store->ops->last (txn, dbi, prefix, plen, succ, slen, &k, &v);
    if (rc == SB_STORE_NOTFOUND || (rc == 0 && !s_has_prefix (&k, prefix, plen)))
        return SB_STORE_NOTFOUND;
    if (rc != 0)
        return txn->ret = rc;
    if (key)
        *key = k;
    if (val)
        *val = v;
    return 0;
}

int
sb_txn_take_first (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen,
                   uint8_t *key, size_t *klen)
{
    if (klen)
        *klen = 0;
    if (!txn || !key || !klen)
        return SB_STORE_INVALID;
    if (!s_prefix_ok (txn, dbi, prefix, plen))
        return txn->ret;
    if (!txn->write)
        return txn->ret = SB_STORE_INVALID;
    uint8_t succ [SB_STORE_KEY_MAX];
    size_t slen = s_successor (prefix, plen, succ);
    int rc = txn->store->ops->take (txn, dbi, prefix, plen, succ, slen, key, klen);
    if (rc == SB_STORE_NOTFOUND)
        return SB_STORE_NOTFOUND;
    if (rc != 0)
        return txn->ret = rc;
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
    it->first_rc = SB_STORE_NOTFOUND;
    it->started = true;         //  until positioned: next yields nothing
    if (!s_prefix_ok (txn, dbi, prefix, plen))
        return txn->ret;
    if ((start && slen == 0) || (!start && slen > 0) || slen > SB_STORE_KEY_MAX)
        return txn->ret = SB_STORE_INVALID;

    it->plen = plen;
    if (plen > 0)
        memcpy (it->prefix, prefix, plen);

    //  Seek to whichever is later, the prefix or the start key: a start key
    //  before the prefix would otherwise begin outside the range.
    const void *seek = it->prefix;
    size_t seeklen = plen;
    if (start && s_cmp (start, slen, prefix, plen) > 0) {
        seek = start;
        seeklen = slen;
    }
    int rc = txn->store->ops->iter_begin (it, dbi, seek, seeklen);
    it->first_rc = rc;
    it->started = false;
    if (rc != 0 && rc != SB_STORE_NOTFOUND) {
        txn->ret = rc;
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
    sb_datum_t k, v;
    if (!it->started) {
        it->started = true;
        rc = it->first_rc;
        k = it->key;
        v = it->val;
    }
    else
        rc = txn->store->ops->iter_next (it, &k, &v);

    if (rc == 0 && s_has_prefix (&k, it->prefix, it->plen)) {
        //  Field by field: the backend wrote each 8-byte half on its own,
        //  and a 16-byte struct copy would wait on both stores.
        if (key) {
            key->size = k.size;
            key->data = k.data;
        }
        if (val) {
            val->size = v.size;
            val->data = v.data;
        }
        return true;
    }
    if (rc != 0 && rc != SB_STORE_NOTFOUND)
        txn->ret = rc;
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
    if (!it->cursor || !it->started || !txn->handle)
        return txn->ret = SB_STORE_INVALID;
    if (!txn->write)
        return txn->ret = -EACCES;
    int rc = txn->store->ops->iter_del (it);
    if (rc != 0)
        txn->ret = rc;
    return txn->ret;
}

void
sb_txn_iter_end (sb_txn_iter_t *it)
{
    if (it && it->cursor) {
        it->txn->store->ops->iter_end (it);
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

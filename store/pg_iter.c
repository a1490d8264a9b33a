/*  store/pg_iter.c — the store on PostgreSQL: the last key under a prefix,
    and scans in pages.

    A scan reads PG_PAGE_ROWS rows per round trip: the first page from the
    seek key (`key >= $1`), each next one after the last key seen (`key >
    $1`), both below the prefix's successor when it has one (a prefix of
    only 0xff bytes has none), in key order. So a scan costs one query per
    page, not one per key, and the server never sends more than a page
    ahead. The rows handed out stay valid until the txn ends (store/store.h):
    each page is kept by the txn, and so is the scan's state, which makes
    sb_txn_iter_end a no-op that is safe after the txn ended.

    A deletion through the iterator deletes the row just yielded; the next
    page starts after it anyway. Rows that the txn writes ahead of the scan
    while it runs are seen from the next page on, not in the current one.
*/
#include "store/pg_impl.h"

#include <stdlib.h>
#include <string.h>

int
sb_pg_last (sb_txn_t *txn, unsigned dbi,
            const void *prefix, size_t plen, const void *succ, size_t slen,
            sb_datum_t *key, sb_datum_t *val)
{
    const void *values [2] = { prefix, succ };
    size_t lengths [2] = { plen, slen };
    int which = slen > 0? PG_LAST_BELOW: PG_LAST_FROM;
    PGresult *res;
    int rc = sb_pg_exec (txn, S_PG (txn->store)->sql [dbi][which], slen > 0? 2: 1,
                         values, lengths, PGRES_TUPLES_OK, &res);
    if (rc != 0)
        return rc;
    if (PQntuples (res) == 0) {
        PQclear (res);
        return SB_STORE_NOTFOUND;
    }
    *key = (sb_datum_t) { (size_t) PQgetlength (res, 0, 0), PQgetvalue (res, 0, 0) };
    *val = (sb_datum_t) { (size_t) PQgetlength (res, 0, 1), PQgetvalue (res, 0, 1) };
    return sb_pg_keep (txn, res);
}

int
sb_pg_take (sb_txn_t *txn, unsigned dbi,
            const void *prefix, size_t plen, const void *succ, size_t slen,
            uint8_t *key, size_t *klen)
{
    const void *values [2] = { prefix, succ };
    size_t lengths [2] = { plen, slen };
    int which = slen > 0? PG_TAKE_BELOW: PG_TAKE_FROM;
    PGresult *res;
    int rc = sb_pg_exec (txn, S_PG (txn->store)->sql [dbi][which], slen > 0? 2: 1,
                         values, lengths, PGRES_TUPLES_OK, &res);
    if (rc != 0)
        return rc;
    size_t n = PQntuples (res) == 1? (size_t) PQgetlength (res, 0, 0): 0;
    if (n == 0 || n > SB_STORE_KEY_MAX) {
        PQclear (res);
        return n? SB_STORE_BACKEND: SB_STORE_NOTFOUND;
    }
    memcpy (key, PQgetvalue (res, 0, 0), n);
    *klen = n;
    PQclear (res);
    return 0;
}

//  Reads the page that starts at `from` (after it when `after`), and makes
//  its first row the scan's current one. Returns 0, SB_STORE_NOTFOUND when
//  the page is empty, or an error.
static int
s_page (sb_txn_t *txn, pg_iter_t *pi, const void *from, size_t flen, bool after,
        sb_datum_t *key, sb_datum_t *val)
{
    int which = after? (pi->has_succ? PG_PAGE_AFTER_BELOW: PG_PAGE_AFTER)
                     : (pi->has_succ? PG_PAGE_FROM_BELOW: PG_PAGE_FROM);
    const void *values [2] = { from, pi->succ };
    size_t lengths [2] = { flen, pi->slen };
    PGresult *res;
    int rc = sb_pg_exec (txn, S_PG (txn->store)->sql [pi->dbi][which],
                         pi->has_succ? 2: 1, values, lengths, PGRES_TUPLES_OK, &res);
    if (rc != 0)
        return rc;
    rc = sb_pg_keep (txn, res);
    if (rc != 0)
        return rc;
    pi->page = res;
    pi->nrows = PQntuples (res);
    pi->row = 0;
    if (pi->nrows == 0)
        return SB_STORE_NOTFOUND;
    *key = (sb_datum_t) { (size_t) PQgetlength (res, 0, 0), PQgetvalue (res, 0, 0) };
    *val = (sb_datum_t) { (size_t) PQgetlength (res, 0, 1), PQgetvalue (res, 0, 1) };
    return 0;
}

int
sb_pg_iter_begin (sb_txn_iter_t *it, unsigned dbi, const void *seek, size_t seeklen)
{
    sb_txn_t *txn = it->txn;
    pg_txn_t *t = S_PGTXN (txn);
    pg_iter_t *pi = (pg_iter_t *) calloc (1, sizeof *pi);
    if (!pi)
        return -ENOMEM;
    pi->next = t->iters;
    t->iters = pi;
    pi->dbi = dbi;
    //  The prefix's successor bounds every page (see store/iter.c's last).
    pi->slen = it->plen;
    if (it->plen > 0)
        memcpy (pi->succ, it->prefix, it->plen);
    while (pi->slen > 0 && pi->succ [pi->slen - 1] == 0xff)
        pi->slen--;
    if (pi->slen > 0) {
        pi->succ [pi->slen - 1]++;
        pi->has_succ = true;
    }
    it->cursor = pi;
    return s_page (txn, pi, seek, seeklen, false, &it->key, &it->val);
}

int
sb_pg_iter_next (sb_txn_iter_t *it, sb_datum_t *key, sb_datum_t *val)
{
    pg_iter_t *pi = (pg_iter_t *) it->cursor;
    if (pi->row + 1 < pi->nrows) {
        PGresult *res = pi->page;
        int r = ++pi->row;
        *key = (sb_datum_t) { (size_t) PQgetlength (res, r, 0), PQgetvalue (res, r, 0) };
        *val = (sb_datum_t) { (size_t) PQgetlength (res, r, 1), PQgetvalue (res, r, 1) };
        return 0;
    }
    //  A short page was the last one.
    if (pi->nrows < PG_PAGE_ROWS)
        return SB_STORE_NOTFOUND;
    PGresult *res = pi->page;
    int r = pi->row;
    return s_page (it->txn, pi, PQgetvalue (res, r, 0), (size_t) PQgetlength (res, r, 0),
                   true, key, val);
}

int
sb_pg_iter_del (sb_txn_iter_t *it)
{
    pg_iter_t *pi = (pg_iter_t *) it->cursor;
    if (pi->nrows == 0)
        return SB_STORE_NOTFOUND;
    PGresult *res = pi->page;
    int r = pi->row;
    const void *values [1] = { PQgetvalue (res, r, 0) };
    size_t lengths [1] = { (size_t) PQgetlength (res, r, 0) };
    PGresult *done;
    int rc = sb_pg_exec (it->txn, S_PG (it->txn->store)->sql [pi->dbi][PG_DEL], 1,
                         values, lengths, PGRES_COMMAND_OK, &done);
    PQclear (done);
    return rc;
}

//  The scan's state and pages belong to the txn, which frees them at its
//  end: nothing to do here, and nothing touched.
void
sb_pg_iter_end (sb_txn_iter_t *it)
{
}

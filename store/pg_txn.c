/*  store/pg_txn.c — the store on PostgreSQL: statements, their failures,
    transactions and single keys.

    Every statement goes through sb_pg_exec: binary bytea parameters, binary
    results, and one mapping of the server's failures to SB_STORE_* codes
    (a conflict is SB_STORE_BUSY, which sb_store_write re-runs; a full disk
    is SB_STORE_DISK_FULL; a lost connection and anything else is
    SB_STORE_BACKEND, logged once, with the server's message).

    A read txn is REPEATABLE READ, READ ONLY, and takes its snapshot at
    begin (the SELECT 1 after BEGIN), as an LMDB read txn does: what commits
    after sb_txn_begin is not seen, and a scan sees one state throughout.
    A write txn is SERIALIZABLE.
*/
#include "store/pg_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTEAOID 17

//  --------------------------------------------------------------------------
//  Statements

//  The code of a failed statement. Conflicts are not worth a log line: they
//  are re-run, and counted in info.retries.
static int
s_failure (sb_txn_t *txn, PGresult *res)
{
    PGconn *conn = S_PGTXN (txn)->conn->conn;
    const char *state = res? PQresultErrorField (res, PG_DIAG_SQLSTATE): NULL;
    if (state && (strcmp (state, "40001") == 0 || strcmp (state, "40P01") == 0
                  || strcmp (state, "23505") == 0))
        return SB_STORE_BUSY;
    if (state && strcmp (state, "53100") == 0)
        return SB_STORE_DISK_FULL;
    if (state && strcmp (state, "53200") == 0)
        return -ENOMEM;
    if (PQstatus (conn) != CONNECTION_OK)
        sb_pg_log (txn->store, "connection lost", PQerrorMessage (conn));
    else
        sb_pg_log (txn->store, state? state: "failed",
                   res? PQresultErrorMessage (res): PQerrorMessage (conn));
    return SB_STORE_BACKEND;
}

int
sb_pg_exec (sb_txn_t *txn, const char *sql, int nparams,
            const void *const *values, const size_t *lengths,
            ExecStatusType want, PGresult **res_p)
{
    Oid types [2] = { BYTEAOID, BYTEAOID };
    const char *vals [2];
    int lens [2], formats [2] = { 1, 1 };
    for (int i = 0; i < nparams && i < 2; i++) {
        //  NULL would be SQL NULL: an empty value is an empty bytea.
        vals [i] = values [i]? (const char *) values [i]: "";
        lens [i] = (int) lengths [i];
    }
    PGresult *res = PQexecParams (S_PGTXN (txn)->conn->conn, sql, nparams,
                                  nparams? types: NULL, nparams? vals: NULL,
                                  nparams? lens: NULL, nparams? formats: NULL, 1);
    if (res_p)
        *res_p = NULL;
    if (!res || PQresultStatus (res) != want) {
        int rc = s_failure (txn, res);
        PQclear (res);
        return rc;
    }
    if (res_p)
        *res_p = res;
    else
        PQclear (res);
    return 0;
}

int
sb_pg_keep (sb_txn_t *txn, PGresult *res)
{
    pg_txn_t *t = S_PGTXN (txn);
    if (t->nkept == t->cap) {
        size_t cap = t->cap? t->cap * 2: 8;
        PGresult **kept = (PGresult **) realloc (t->kept, cap * sizeof *kept);
        if (!kept) {
            PQclear (res);
            return -ENOMEM;
        }
        t->kept = kept;
        t->cap = cap;
    }
    t->kept [t->nkept++] = res;
    return 0;
}

//  A write that changed no row: the answer of insert, append and del.
static bool
s_no_row (PGresult *res)
{
    return strcmp (PQcmdTuples (res), "0") == 0;
}

//  --------------------------------------------------------------------------
//  Transactions

//  Sends the BEGIN (and, for a read txn, the statement after it) as one
//  simple query; the last result tells whether all went well.
static int
s_begin (sb_txn_t *txn, const char *sql)
{
    PGresult *res = PQexec (S_PGTXN (txn)->conn->conn, sql);
    ExecStatusType want = txn->write? PGRES_COMMAND_OK: PGRES_TUPLES_OK;
    int rc = res && PQresultStatus (res) == want? 0: s_failure (txn, res);
    PQclear (res);
    return rc;
}

//  BEGIN on a connection of the pool, and once more on a new one when the
//  pooled one turns out to be dead (the server restarted since it was
//  last used): nothing was done in the txn yet, so that retry is safe.
int
sb_pg_txn_begin (sb_txn_t *txn)
{
    //  A read txn's snapshot is taken by its first statement: the SELECT 1
    //  takes it now, in the same round trip as the BEGIN.
    const char *sql = txn->write
        ? "BEGIN ISOLATION LEVEL SERIALIZABLE"
        : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1";
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        pg_txn_t *t = (pg_txn_t *) calloc (1, sizeof *t);
        if (!t)
            return -ENOMEM;
        rc = sb_pg_conn_take (txn->store, &t->conn);
        if (rc != 0) {
            free (t);
            return rc;
        }
        txn->handle = t;
        rc = s_begin (txn, sql);
        if (rc == 0)
            return 0;
        bool lost = PQstatus (t->conn->conn) != CONNECTION_OK;
        sb_pg_txn_abort (txn);
        txn->handle = NULL;
        if (!lost)
            break;
    }
    return rc;
}

//  Frees what the txn handed out and gives its connection back.
static void
s_end (sb_txn_t *txn)
{
    pg_txn_t *t = S_PGTXN (txn);
    for (size_t i = 0; i < t->nkept; i++)
        PQclear (t->kept [i]);
    free (t->kept);
    while (t->iters) {
        pg_iter_t *it = t->iters;
        t->iters = it->next;
        free (it);
    }
    sb_pg_conn_give (txn->store, t->conn);
    free (t);
}

void
sb_pg_txn_abort (sb_txn_t *txn)
{
    pg_txn_t *t = S_PGTXN (txn);
    if (PQstatus (t->conn->conn) == CONNECTION_OK
        && PQtransactionStatus (t->conn->conn) != PQTRANS_IDLE)
        PQclear (PQexec (t->conn->conn, "ROLLBACK"));
    s_end (txn);
}

int
sb_pg_txn_commit (sb_txn_t *txn)
{
    PGresult *res;
    int rc = sb_pg_exec (txn, "COMMIT", 0, NULL, NULL, PGRES_COMMAND_OK, &res);
    //  A txn the server had already failed answers COMMIT with ROLLBACK.
    if (rc == 0 && strcmp (PQcmdStatus (res), "COMMIT") != 0) {
        sb_pg_log (txn->store, "commit", "the server rolled the transaction back");
        rc = SB_STORE_BACKEND;
    }
    PQclear (res);
    if (rc != 0)
        sb_pg_txn_abort (txn);
    else
        s_end (txn);
    return rc;
}

//  --------------------------------------------------------------------------
//  Single keys

static int
s_write (sb_txn_t *txn, unsigned dbi, int which, const void *key, size_t klen,
         const void *val, size_t vlen, int no_row)
{
    const void *values [2] = { key, val };
    size_t lengths [2] = { klen, vlen };
    PGresult *res;
    int rc = sb_pg_exec (txn, S_PG (txn->store)->sql [dbi][which], 2, values, lengths,
                         PGRES_COMMAND_OK, &res);
    if (rc != 0)
        return rc;
    rc = no_row && s_no_row (res)? no_row: 0;
    PQclear (res);
    return rc;
}

int
sb_pg_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
           const void *val, size_t vlen)
{
    return s_write (txn, dbi, PG_PUT, key, klen, val, vlen, 0);
}

int
sb_pg_insert (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
              const void *val, size_t vlen)
{
    return s_write (txn, dbi, PG_INSERT, key, klen, val, vlen, SB_STORE_EXISTS);
}

//  No row inserted means a key >= this one is there: the caller's idea of
//  the last key is wrong, as MDB_APPEND says.
int
sb_pg_append (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
              const void *val, size_t vlen)
{
    return s_write (txn, dbi, PG_APPEND, key, klen, val, vlen, SB_STORE_ORDER);
}

int
sb_pg_get (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
           sb_datum_t *out)
{
    const void *values [1] = { key };
    size_t lengths [1] = { klen };
    PGresult *res;
    int rc = sb_pg_exec (txn, S_PG (txn->store)->sql [dbi][PG_GET], 1, values, lengths,
                         PGRES_TUPLES_OK, &res);
    if (rc != 0)
        return rc;
    if (PQntuples (res) == 0) {
        PQclear (res);
        return SB_STORE_NOTFOUND;
    }
    *out = (sb_datum_t) { (size_t) PQgetlength (res, 0, 0), PQgetvalue (res, 0, 0) };
    return sb_pg_keep (txn, res);
}

int
sb_pg_del (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen)
{
    const void *values [1] = { key };
    size_t lengths [1] = { klen };
    PGresult *res;
    int rc = sb_pg_exec (txn, S_PG (txn->store)->sql [dbi][PG_DEL], 1, values, lengths,
                         PGRES_COMMAND_OK, &res);
    if (rc != 0)
        return rc;
    rc = s_no_row (res)? SB_STORE_NOTFOUND: 0;
    PQclear (res);
    return rc;
}

//  --------------------------------------------------------------------------
//  Fencing

//  The lease row, read in this txn and locked FOR SHARE: a takeover's
//  UPDATE waits until this txn ends, and a takeover that committed after
//  this txn's snapshot makes the lock a serialization failure (BUSY: the
//  body runs again, and then sees the new epoch). Text parameters: the
//  shard and the epoch are cast by the server.
int
sb_pg_guard (sb_txn_t *txn, const sb_guard_t *guard)
{
    PGconn *conn = S_PGTXN (txn)->conn->conn;
    char *schema = PQescapeIdentifier (conn, guard->schema, strlen (guard->schema));
    if (!schema)
        return -ENOMEM;
    char sql [256];
    snprintf (sql, sizeof sql, "SELECT 1 FROM %s.shard_leases WHERE shard = $1::int "
              "AND owner = $2 AND epoch = $3::bigint AND expires_at > now() FOR SHARE", schema);
    PQfreemem (schema);
    char shard [16], epoch [24];
    snprintf (shard, sizeof shard, "%u", (unsigned) guard->shard);
    snprintf (epoch, sizeof epoch, "%lld", (long long) guard->epoch);
    const char *values [3] = { shard, guard->owner, epoch };
    PGresult *res = PQexecParams (conn, sql, 3, NULL, values, NULL, NULL, 0);
    int rc;
    if (!res || PQresultStatus (res) != PGRES_TUPLES_OK)
        rc = s_failure (txn, res);
    else
        rc = PQntuples (res) == 1? 0: SB_STORE_FENCED;
    PQclear (res);
    return rc;
}

/*  store/pg_impl.h — what the PostgreSQL backend's files share (store/pg.c,
    pg_txn.c, pg_iter.c). Not a public header, and only these files include
    it: nothing else in the tree names a libpq type.

    One store is one schema of one database: a table per dbi, `(key bytea
    PRIMARY KEY, val bytea NOT NULL)`, and the table "meta" holding the
    schema version. Every statement is written once per dbi at open, with
    the table's name escaped by libpq; data only ever goes in as binary
    parameters.
*/
#ifndef SB_STORE_PG_IMPL_H
#define SB_STORE_PG_IMPL_H

#include "store/store_impl.h"

#include <libpq-fe.h>

//  The statements of one dbi.
enum {
    PG_GET,             //  $1 key
    PG_PUT,             //  $1 key, $2 val
    PG_INSERT,          //  $1 key, $2 val; no row when the key is there
    PG_APPEND,          //  $1 key, $2 val; no row when a key >= $1 is there
    PG_DEL,             //  $1 key
    PG_LAST_BELOW,      //  $1 prefix, $2 successor: greatest key in [$1, $2)
    PG_LAST_FROM,       //  $1 prefix: greatest key >= $1
    PG_PAGE_FROM_BELOW, //  $1 seek, $2 successor: a page of [$1, $2)
    PG_PAGE_FROM,       //  $1 seek: a page of keys >= $1
    PG_PAGE_AFTER_BELOW,//  $1 last key seen, $2 successor: a page of ($1, $2)
    PG_PAGE_AFTER,      //  $1 last key seen: a page of keys > $1
    PG_TAKE_BELOW,      //  $1 prefix, $2 successor: delete the least unlocked key in [$1, $2)
    PG_TAKE_FROM,       //  $1 prefix: delete the least unlocked key >= $1
    PG_COUNT,           //  no parameter: the number of rows
    PG_NSQL
};

//  Rows fetched by one round trip of a scan: enough that a tape is read in
//  few of them, few enough that one page stays small.
#define PG_PAGE_ROWS    256

//  Times sb_store_write runs a body that keeps conflicting with other
//  writers before it gives up with SB_STORE_BUSY.
#define PG_TRIES        32

//  Idle connections kept for the next txns; more are closed at txn end.
#define PG_IDLE_MAX     4

typedef struct _pg_conn_t {
    PGconn *conn;
    struct _pg_conn_t *next;
} pg_conn_t;

typedef struct {
    char *conninfo;             //  the URL as libpq takes it (no schema=)
    char *schema;               //  the schema the tables live in
    char *where;                //  the URL without credentials, for messages
    char *table [SB_STORE_DBI_MAX];     //  "schema"."name", escaped
    char *sql [SB_STORE_DBI_MAX][PG_NSQL];
    char *meta_table;           //  "schema"."meta", escaped

    pthread_mutex_t lock;       //  guards idle and last_error
    pg_conn_t *idle;
    unsigned nidle;
    char last_error [256];      //  the server's last message, for open's err
} sb_pg_t;

//  A scan in progress; owned by its txn, which frees it when it ends, so
//  that the rows it handed out stay valid until then.
typedef struct _pg_iter_t {
    unsigned dbi;
    PGresult *page;             //  the current page (also kept by the txn)
    int row, nrows;
    bool has_succ;
    size_t slen;
    uint8_t succ [SB_STORE_KEY_MAX];
    struct _pg_iter_t *next;
} pg_iter_t;

//  A txn: its connection, every result whose bytes it handed out, and its
//  scans. All freed when the txn ends.
typedef struct {
    pg_conn_t *conn;
    PGresult **kept;
    size_t nkept, cap;
    pg_iter_t *iters;
} pg_txn_t;

#define S_PG(store) ((sb_pg_t *) (store)->impl)
#define S_PGTXN(t)  ((pg_txn_t *) (t)->handle)

//  Runs one statement of the txn with binary bytea parameters (a NULL
//  value with length 0 is an empty bytea) and binary results. Returns 0
//  and the result in *res (or clears it when res is NULL), or a store
//  code, the server's message logged. `want` is PGRES_TUPLES_OK or
//  PGRES_COMMAND_OK.
int sb_pg_exec (sb_txn_t *txn, const char *sql, int nparams,
                const void *const *values, const size_t *lengths,
                ExecStatusType want, PGresult **res);

//  A connection for a txn: an idle one, or a new one. Returns 0, or
//  SB_STORE_BACKEND with the reason logged. give puts it back (or closes
//  it when it is broken, or when enough are idle).
int  sb_pg_conn_take (sb_store_t *store, pg_conn_t **conn);
void sb_pg_conn_give (sb_store_t *store, pg_conn_t *conn);

//  Logs a failure of the server or of the connection once, and keeps its
//  first line for open's err.
void sb_pg_log (sb_store_t *store, const char *what, const char *msg);

//  The ops of pg_txn.c and pg_iter.c, gathered in pg.c's table.
int  sb_pg_txn_begin  (sb_txn_t *txn);
int  sb_pg_txn_commit (sb_txn_t *txn);
void sb_pg_txn_abort  (sb_txn_t *txn);

//  Hands `res` to the txn, which frees it when it ends. Returns 0 or
//  -ENOMEM (then res is freed already).
int sb_pg_keep (sb_txn_t *txn, PGresult *res);

int  sb_pg_put    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                   const void *val, size_t vlen);
int  sb_pg_insert (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                   const void *val, size_t vlen);
int  sb_pg_append (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                   const void *val, size_t vlen);
int  sb_pg_get    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                   sb_datum_t *out);
int  sb_pg_del    (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen);
int  sb_pg_guard  (sb_txn_t *txn, const sb_guard_t *guard);
int  sb_pg_last   (sb_txn_t *txn, unsigned dbi,
                   const void *prefix, size_t plen, const void *succ, size_t slen,
                   sb_datum_t *key, sb_datum_t *val);
int  sb_pg_take   (sb_txn_t *txn, unsigned dbi,
                   const void *prefix, size_t plen, const void *succ, size_t slen,
                   uint8_t *key, size_t *klen);
int  sb_pg_iter_begin (sb_txn_iter_t *it, unsigned dbi, const void *seek, size_t seeklen);
int  sb_pg_iter_next  (sb_txn_iter_t *it, sb_datum_t *key, sb_datum_t *val);
int  sb_pg_iter_del   (sb_txn_iter_t *it);
void sb_pg_iter_end   (sb_txn_iter_t *it);

#endif

/*  store/pg.c — the store on PostgreSQL: the URL, the connections, open
    (schema, tables, version), info, and the re-run after a conflict.

    See store/store.h for the contract and docs/architecture.md,
    "Persistence", for how this backend differs from LMDB. In short:

    The URL. `postgres://` or `postgresql://`, as libpq takes it, plus one
    parameter of ours, `schema=NAME` ([a-z0-9_], at most 63 bytes, default
    "switchboard"): the schema that holds this store's tables, so that the
    stores of one server (session, run, interact) and of several servers
    can share a database. It is taken out before libpq sees the URL, and a
    connect_timeout of SB_STORE_CONNECT_TIMEOUT_S (5 s) is added unless the
    URL has one.

    Connections. libpq connections are not shared between txns: each txn
    takes one (an idle one, or a new one) and gives it back at its end, so
    read txns on several threads and the one write txn run side by side, as
    they do on LMDB.

    Conflicts. A write txn is SERIALIZABLE. When the server finds that it
    conflicts with another writer (SQLSTATE 40001, 40P01, or a unique key
    taken by a concurrent insert), the operation or the commit fails with
    SB_STORE_BUSY, and sb_store_write runs the body again from scratch,
    after a short random pause, up to PG_TRIES times; only then does a
    caller see SB_STORE_BUSY. Each re-run is counted in info.retries.
*/
#include "store/pg_impl.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PG_SCHEMA_DEFAULT   "switchboard"
#define PG_NAME_MAX         63          //  NAMEDATALEN - 1

//  --------------------------------------------------------------------------
//  Logging

static void
s_first_line (char *out, size_t size, const char *msg)
{
    if (!msg)
        msg = "";
    size_t n = strcspn (msg, "\n");
    if (n >= size)
        n = size - 1;
    memcpy (out, msg, n);
    out [n] = 0;
}

void
sb_pg_log (sb_store_t *store, const char *what, const char *msg)
{
    sb_pg_t *pg = S_PG (store);
    char line [256];
    s_first_line (line, sizeof line, msg);
    pthread_mutex_lock (&pg->lock);
    snprintf (pg->last_error, sizeof pg->last_error, "%s", line);
    pthread_mutex_unlock (&pg->lock);
    sb_warn ("store", "%s: %s: %s", pg->where, what, line);
}

//  --------------------------------------------------------------------------
//  The URL

static bool
s_schema_ok (const char *s, size_t n)
{
    if (n == 0 || n > PG_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s [i] >= 'a' && s [i] <= 'z') || (s [i] >= '0' && s [i] <= '9') || s [i] == '_'))
            return false;
    return true;
}

//  Splits off schema=NAME and adds connect_timeout unless given. Returns 0,
//  or -1 with one line in err.
static int
s_parse_url (sb_pg_t *pg, const char *url, char *err, size_t errlen)
{
    size_t len = strlen (url);
    char *out = (char *) malloc (len + 32);
    if (!out) {
        sb_store_err (err, errlen, "%s: out of memory", pg->where);
        return -1;
    }
    const char *q = strchr (url, '?');
    size_t base = q? (size_t) (q - url): len;
    memcpy (out, url, base);
    size_t n = base;
    bool timeout = false;
    const char *schema = PG_SCHEMA_DEFAULT;
    size_t schema_len = strlen (schema);
    for (const char *p = q? q + 1: NULL; p && *p; ) {
        size_t plen = strcspn (p, "&");
        if (plen >= 7 && strncmp (p, "schema=", 7) == 0) {
            schema = p + 7;
            schema_len = plen - 7;
            if (!s_schema_ok (schema, schema_len)) {
                sb_store_err (err, errlen, "%s: schema must be 1 to %d of a-z, 0-9 and _",
                              pg->where, PG_NAME_MAX);
                free (out);
                return -1;
            }
        }
        else
        if (plen > 0) {
            if (strncmp (p, "connect_timeout=", 16) == 0)
                timeout = true;
            out [n] = n == base? '?': '&';
            n++;
            memcpy (out + n, p, plen);
            n += plen;
        }
        p += plen;
        if (*p == '&')
            p++;
    }
    if (!timeout) {
        char t [32];
        int tl = snprintf (t, sizeof t, "connect_timeout=%d", SB_STORE_CONNECT_TIMEOUT_S);
        out [n] = n == base? '?': '&';
        n++;
        memcpy (out + n, t, (size_t) tl);
        n += (size_t) tl;
    }
    out [n] = 0;
    pg->conninfo = out;
    pg->schema = strndup (schema, schema_len);
    if (!pg->schema) {
        sb_store_err (err, errlen, "%s: out of memory", pg->where);
        return -1;
    }
    return 0;
}

//  --------------------------------------------------------------------------
//  Connections

//  The server's notices (CREATE ... IF NOT EXISTS says "skipping") are
//  not news: keep them out of stderr.
static void
s_notice (void *arg, const char *message)
{
}

static PGconn *
s_connect (sb_pg_t *pg, char *why, size_t whylen)
{
    PGconn *conn = PQconnectdb (pg->conninfo);
    if (!conn) {
        snprintf (why, whylen, "out of memory");
        return NULL;
    }
    if (PQstatus (conn) != CONNECTION_OK) {
        s_first_line (why, whylen, PQerrorMessage (conn));
        PQfinish (conn);
        return NULL;
    }
    PQsetNoticeProcessor (conn, s_notice, NULL);
    return conn;
}

int
sb_pg_conn_take (sb_store_t *store, pg_conn_t **conn_p)
{
    sb_pg_t *pg = S_PG (store);
    pthread_mutex_lock (&pg->lock);
    pg_conn_t *c = pg->idle;
    if (c) {
        pg->idle = c->next;
        pg->nidle--;
    }
    pthread_mutex_unlock (&pg->lock);
    //  A connection that broke while idle (the server restarted) is
    //  replaced, not handed to a txn that would fail on it.
    if (c && PQstatus (c->conn) != CONNECTION_OK) {
        PQfinish (c->conn);
        free (c);
        c = NULL;
    }
    if (!c) {
        c = (pg_conn_t *) calloc (1, sizeof *c);
        if (!c)
            return -ENOMEM;
        char why [256];
        c->conn = s_connect (pg, why, sizeof why);
        if (!c->conn) {
            free (c);
            sb_pg_log (store, "cannot connect", why);
            return SB_STORE_BACKEND;
        }
    }
    c->next = NULL;
    *conn_p = c;
    return 0;
}

void
sb_pg_conn_give (sb_store_t *store, pg_conn_t *c)
{
    sb_pg_t *pg = S_PG (store);
    bool keep = PQstatus (c->conn) == CONNECTION_OK
             && PQtransactionStatus (c->conn) == PQTRANS_IDLE;
    pthread_mutex_lock (&pg->lock);
    if (keep && pg->nidle < PG_IDLE_MAX) {
        c->next = pg->idle;
        pg->idle = c;
        pg->nidle++;
        c = NULL;
    }
    pthread_mutex_unlock (&pg->lock);
    if (c) {
        PQfinish (c->conn);
        free (c);
    }
}

//  --------------------------------------------------------------------------
//  Statements

//  Writes the statements of every dbi, with its table's name escaped.
static int
s_make_sql (sb_store_t *self, PGconn *conn)
{
    sb_pg_t *pg = S_PG (self);
    char *schema = PQescapeIdentifier (conn, pg->schema, strlen (pg->schema));
    if (!schema)
        return -ENOMEM;
    char *meta = PQescapeIdentifier (conn, SB_STORE_META_NAME, strlen (SB_STORE_META_NAME));
    int rc = meta? 0: -ENOMEM;
    if (rc == 0 && asprintf (&pg->meta_table, "%s.%s", schema, meta) < 0)
        rc = -ENOMEM;
    PQfreemem (meta);
    for (unsigned i = 0; i < self->ndbi && rc == 0; i++) {
        char *name = PQescapeIdentifier (conn, self->names [i], strlen (self->names [i]));
        if (!name) {
            rc = -ENOMEM;
            break;
        }
        char t [4 * PG_NAME_MAX + 16];
        snprintf (t, sizeof t, "%s.%s", schema, name);
        PQfreemem (name);
        if (!(pg->table [i] = strdup (t))) {
            rc = -ENOMEM;
            break;
        }
        const char *page = "SELECT key, val FROM %s WHERE %s ORDER BY key LIMIT %d";
        //  a queue's take: the row is locked as it is picked, and a row
        //  another txn holds is passed over, not waited for
        const char *take = "DELETE FROM %s WHERE key = (SELECT key FROM %s WHERE %s "
                           "ORDER BY key LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING key";
        char **sql = pg->sql [i];
        if (asprintf (&sql [PG_GET], "SELECT val FROM %s WHERE key = $1", t) < 0
            || asprintf (&sql [PG_PUT], "INSERT INTO %s (key, val) VALUES ($1, $2) "
                         "ON CONFLICT (key) DO UPDATE SET val = EXCLUDED.val", t) < 0
            || asprintf (&sql [PG_INSERT], "INSERT INTO %s (key, val) VALUES ($1, $2) "
                         "ON CONFLICT (key) DO NOTHING", t) < 0
            || asprintf (&sql [PG_APPEND], "INSERT INTO %s (key, val) SELECT $1, $2 "
                         "WHERE NOT EXISTS (SELECT 1 FROM %s WHERE key >= $1)", t, t) < 0
            || asprintf (&sql [PG_DEL], "DELETE FROM %s WHERE key = $1", t) < 0
            || asprintf (&sql [PG_LAST_BELOW], "SELECT key, val FROM %s WHERE key >= $1 "
                         "AND key < $2 ORDER BY key DESC LIMIT 1", t) < 0
            || asprintf (&sql [PG_LAST_FROM], "SELECT key, val FROM %s WHERE key >= $1 "
                         "ORDER BY key DESC LIMIT 1", t) < 0
            || asprintf (&sql [PG_PAGE_FROM_BELOW], page, t, "key >= $1 AND key < $2",
                         PG_PAGE_ROWS) < 0
            || asprintf (&sql [PG_PAGE_FROM], page, t, "key >= $1", PG_PAGE_ROWS) < 0
            || asprintf (&sql [PG_PAGE_AFTER_BELOW], page, t, "key > $1 AND key < $2",
                         PG_PAGE_ROWS) < 0
            || asprintf (&sql [PG_PAGE_AFTER], page, t, "key > $1", PG_PAGE_ROWS) < 0
            || asprintf (&sql [PG_TAKE_BELOW], take, t, t, "key >= $1 AND key < $2") < 0
            || asprintf (&sql [PG_TAKE_FROM], take, t, t, "key >= $1") < 0
            || asprintf (&sql [PG_COUNT], "SELECT count(*) FROM %s", t) < 0)
            rc = -ENOMEM;
    }
    PQfreemem (schema);
    return rc;
}

//  --------------------------------------------------------------------------
//  Open: the schema, the tables, the version

typedef struct {
    sb_store_t *self;
    unsigned version;
    char *err;
    size_t errlen;
} open_ctx_t;

//  A statement without parameters, in the txn.
static int
s_run (sb_txn_t *txn, const char *sql)
{
    return txn->ret = sb_pg_exec (txn, sql, 0, NULL, NULL, PGRES_COMMAND_OK, NULL);
}

//  No version record. Fine for a fresh schema; a refusal for one that
//  already holds tables we did not make.
static int
s_check_fresh (sb_txn_t *txn, open_ctx_t *c)
{
    sb_pg_t *pg = S_PG (c->self);
    const char *sql = "SELECT c.relname FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = convert_from ($1, 'UTF8') AND c.relkind IN ('r', 'p', 'v', 'm', 'f') "
        "AND c.relname <> 'meta' LIMIT 1";
    const void *values [1] = { pg->schema };
    size_t lengths [1] = { strlen (pg->schema) };
    PGresult *res;
    int rc = sb_pg_exec (txn, sql, 1, values, lengths, PGRES_TUPLES_OK, &res);
    if (rc != 0)
        return txn->ret = rc;
    bool foreign = PQntuples (res) > 0;
    PQclear (res);
    if (foreign) {
        sb_store_err (c->err, c->errlen,
                      "%s: schema \"%s\" has no schema version (not made by switchboard?); "
                      "expected version %u", pg->where, pg->schema, c->version);
        return SB_STORE_OPEN_REFUSED;
    }
    return 0;
}

//  Checks the version record, or writes it into a fresh schema.
static int
s_version (sb_txn_t *txn, open_ctx_t *c)
{
    sb_pg_t *pg = S_PG (c->self);
    char sql [400];
    snprintf (sql, sizeof sql, "SELECT val FROM %s WHERE key = $1", pg->meta_table);
    const void *values [2] = { SB_STORE_META_VERSION, NULL };
    size_t lengths [2] = { strlen (SB_STORE_META_VERSION), 4 };
    PGresult *res;
    int rc = sb_pg_exec (txn, sql, 1, values, lengths, PGRES_TUPLES_OK, &res);
    if (rc != 0)
        return txn->ret = rc;
    if (PQntuples (res) > 0) {
        size_t size = (size_t) PQgetlength (res, 0, 0);
        unsigned found = size == 4? sb_store_version_get ((const uint8_t *) PQgetvalue (res, 0, 0)): 0;
        PQclear (res);
        if (size != 4)
            sb_store_err (c->err, c->errlen,
                          "%s: schema version record is %zu bytes, not 4; refusing to open",
                          pg->where, size);
        else
        if (found != c->version)
            sb_store_err (c->err, c->errlen,
                          "%s: schema version %u is unknown to this build (expects %u)",
                          pg->where, found, c->version);
        return size == 4 && found == c->version? 0: SB_STORE_OPEN_REFUSED;
    }
    PQclear (res);
    rc = s_check_fresh (txn, c);
    if (rc != 0)
        return rc;
    uint8_t be [4];
    sb_store_version_put (be, c->version);
    values [1] = be;
    snprintf (sql, sizeof sql, "INSERT INTO %s (key, val) VALUES ($1, $2)", pg->meta_table);
    return txn->ret = sb_pg_exec (txn, sql, 2, values, lengths, PGRES_COMMAND_OK, NULL);
}

static int
s_open_fn (sb_txn_t *txn, void *arg)
{
    open_ctx_t *c = (open_ctx_t *) arg;
    sb_store_t *self = c->self;
    sb_pg_t *pg = S_PG (self);
    PGconn *conn = S_PGTXN (txn)->conn->conn;
    char sql [600];

    char *schema = PQescapeIdentifier (conn, pg->schema, strlen (pg->schema));
    if (!schema)
        return txn->ret = -ENOMEM;
    snprintf (sql, sizeof sql, "CREATE SCHEMA IF NOT EXISTS %s", schema);
    PQfreemem (schema);
    if (s_run (txn, sql) != 0)
        return txn->ret;
    const char *cols = "(key bytea PRIMARY KEY, val bytea NOT NULL)";
    snprintf (sql, sizeof sql, "CREATE TABLE IF NOT EXISTS %s %s", pg->meta_table, cols);
    if (s_run (txn, sql) != 0)
        return txn->ret;
    int rc = s_version (txn, c);
    if (rc != 0)
        return rc;
    for (unsigned i = 0; i < self->ndbi; i++) {
        snprintf (sql, sizeof sql, "CREATE TABLE IF NOT EXISTS %s %s", pg->table [i], cols);
        if (s_run (txn, sql) != 0)
            return txn->ret;
    }
    return 0;
}

static int
s_open (sb_store_t *self, unsigned schema_version, size_t mapsize, char *err, size_t errlen)
{
    sb_pg_t *pg = (sb_pg_t *) calloc (1, sizeof *pg);
    if (!pg) {
        sb_store_err (err, errlen, "store: out of memory");
        return -1;
    }
    pthread_mutex_init (&pg->lock, NULL);
    self->impl = pg;
    char where [512];
    pg->where = strdup (sb_log_redact_url (self->dir, where, sizeof where));
    if (!pg->where) {
        sb_store_err (err, errlen, "store: out of memory");
        return -1;
    }
    if (s_parse_url (pg, self->dir, err, errlen) != 0)
        return -1;
    for (unsigned i = 0; i < self->ndbi; i++)
        if (strlen (self->names [i]) > PG_NAME_MAX) {
            sb_store_err (err, errlen, "%s: dbi name \"%s\" is longer than PostgreSQL's "
                          "%d-byte names", pg->where, self->names [i], PG_NAME_MAX);
            return -1;
        }

    //  The first connection says whether the database is there at all, and
    //  becomes the first idle one.
    char why [256];
    PGconn *conn = s_connect (pg, why, sizeof why);
    if (!conn) {
        sb_store_err (err, errlen, "%s: cannot connect to PostgreSQL: %s", pg->where, why);
        return -1;
    }
    int rc = s_make_sql (self, conn);
    pg_conn_t *c = (pg_conn_t *) calloc (1, sizeof *c);
    if (rc != 0 || !c) {
        PQfinish (conn);
        free (c);
        sb_store_err (err, errlen, "%s: out of memory", pg->where);
        return -1;
    }
    c->conn = conn;
    sb_pg_conn_give (self, c);

    open_ctx_t ctx = { self, schema_version, err, errlen };
    rc = sb_store_write (self, s_open_fn, &ctx);
    if (rc != 0) {
        if (rc != SB_STORE_OPEN_REFUSED)
            sb_store_err (err, errlen, "%s: cannot open the tables of schema \"%s\": %s",
                          pg->where, pg->schema,
                          rc == SB_STORE_BACKEND && *pg->last_error? pg->last_error:
                          sb_store_strerror (rc));
        return -1;
    }
    return 0;
}

static void
s_destroy (sb_store_t *self)
{
    sb_pg_t *pg = S_PG (self);
    if (!pg)
        return;
    while (pg->idle) {
        pg_conn_t *c = pg->idle;
        pg->idle = c->next;
        PQfinish (c->conn);
        free (c);
    }
    for (unsigned i = 0; i < SB_STORE_DBI_MAX; i++) {
        free (pg->table [i]);
        for (unsigned j = 0; j < PG_NSQL; j++)
            free (pg->sql [i][j]);
    }
    free (pg->meta_table);
    free (pg->conninfo);
    free (pg->schema);
    free (pg->where);
    pthread_mutex_destroy (&pg->lock);
    free (pg);
    self->impl = NULL;
}

//  --------------------------------------------------------------------------
//  Info and conflicts

//  Entries are counted rows (a scan of each table); LMDB's map and reader
//  fields stay 0.
static int
s_info (sb_txn_t *txn, sb_store_info_t *info)
{
    sb_pg_t *pg = S_PG (txn->store);
    for (unsigned i = 0; i < txn->store->ndbi; i++) {
        PGresult *res;
        int rc = sb_pg_exec (txn, pg->sql [i][PG_COUNT], 0, NULL, NULL, PGRES_TUPLES_OK, &res);
        if (rc != 0)
            return rc;
        uint64_t n = 0;
        if (PQntuples (res) == 1 && PQgetlength (res, 0, 0) == 8) {
            const uint8_t *p = (const uint8_t *) PQgetvalue (res, 0, 0);
            for (int b = 0; b < 8; b++)
                n = n << 8 | p [b];
        }
        PQclear (res);
        info->entries [i] = n;
    }
    return 0;
}

//  A conflict with another writer: run the body again after a random
//  pause that grows with the attempts (at most about 50 ms), so that two
//  writers that keep colliding drift apart.
static int
s_again (sb_store_t *self, int rc, unsigned attempt)
{
    if (rc != SB_STORE_BUSY)
        return rc;
    if (attempt >= PG_TRIES) {
        sb_warn ("store", "%s: a write conflicted %u times in a row; giving up",
                 S_PG (self)->where, attempt);
        return rc;
    }
    atomic_fetch_add_explicit (&self->retries, 1, memory_order_relaxed);
    unsigned cap_us = attempt < 6? 1000u << attempt: 50000u;
    usleep ((useconds_t) (random () % cap_us));
    return 0;
}

const sb_store_ops_t sb_store_pg_ops = {
    .name       = "postgresql",
    .open       = s_open,
    .destroy    = s_destroy,
    .info       = s_info,
    .again      = s_again,
    .txn_begin  = sb_pg_txn_begin,
    .txn_commit = sb_pg_txn_commit,
    .txn_abort  = sb_pg_txn_abort,
    .put        = sb_pg_put,
    .insert     = sb_pg_insert,
    .append     = sb_pg_append,
    .get        = sb_pg_get,
    .del        = sb_pg_del,
    .guard      = sb_pg_guard,
    .last       = sb_pg_last,
    .take       = sb_pg_take,
    .iter_begin = sb_pg_iter_begin,
    .iter_next  = sb_pg_iter_next,
    .iter_del   = sb_pg_iter_del,
    .iter_end   = sb_pg_iter_end,
};

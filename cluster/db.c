/*  cluster/db.c — the cluster's database: the URL, the one connection,
    statements with text parameters, and the tables.

    The URL is the store's (store/store.h): postgres:// or postgresql://
    as libpq takes it, plus `schema=NAME` ([a-z0-9_], default
    "switchboard"). The cluster's tables live in the schema NAME_cluster
    ("switchboard_cluster" by default; so NAME has at most 55 bytes here),
    so that one URL serves a node's stores and its cluster, and in a schema
    of their own rather than beside a store's, because a store refuses a
    schema that holds tables it did not make.

    Statements name the schema with '@' (no statement of ours has an '@'
    otherwise); it is replaced by the escaped name before the statement is
    sent, and every value goes in as a parameter.
*/
#include "cluster/cluster_impl.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  --------------------------------------------------------------------------
//  The URL

static bool
s_schema_ok (const char *s, size_t n)
{
    if (n == 0 || n + strlen (SB_CLUSTER_SCHEMA_SUFFIX) > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s [i] >= 'a' && s [i] <= 'z') || (s [i] >= '0' && s [i] <= '9') || s [i] == '_'))
            return false;
    return true;
}

//  The URL with its query split: schema= taken out, connect_timeout=SB_STORE_CONNECT_TIMEOUT_S
//  and application_name=switchboard-cluster added unless given (the
//  name tells the cluster's connections apart in pg_stat_activity); `where` is the URL up to the query, less any
//  user:password@.
static int
s_parse (sb_cluster_db_t *db, const char *url, char *err, size_t errlen)
{
    if (strncmp (url, "postgres://", 11) != 0 && strncmp (url, "postgresql://", 13) != 0) {
        snprintf (err, errlen, "cluster: the store must be a postgres:// or postgresql:// URL");
        return -1;
    }
    size_t len = strlen (url);
    const char *q = strchr (url, '?');
    size_t base = q? (size_t) (q - url): len;
    char *out = (char *) malloc (len + 64);
    if (!out) {
        snprintf (err, errlen, "cluster: out of memory");
        return -1;
    }
    memcpy (out, url, base);
    size_t n = base;
    bool timeout = false, named = false;
    snprintf (db->schema, sizeof db->schema, "%s%s", SB_CLUSTER_SCHEMA_BASE, SB_CLUSTER_SCHEMA_SUFFIX);
    for (const char *p = q? q + 1: NULL; p && *p; ) {
        size_t plen = strcspn (p, "&");
        if (plen >= 7 && strncmp (p, "schema=", 7) == 0) {
            if (!s_schema_ok (p + 7, plen - 7)) {
                snprintf (err, errlen, "cluster: schema must be 1 to %zu of a-z, 0-9 and _",
                          63 - strlen (SB_CLUSTER_SCHEMA_SUFFIX));
                free (out);
                return -1;
            }
            snprintf (db->schema, sizeof db->schema, "%.*s%s", (int) (plen - 7), p + 7,
                      SB_CLUSTER_SCHEMA_SUFFIX);
        }
        else
        if (plen > 0) {
            timeout = timeout || strncmp (p, "connect_timeout=", 16) == 0;
            named = named || strncmp (p, "application_name=", 17) == 0;
            n += (size_t) sprintf (out + n, "%c%.*s", n == base? '?': '&', (int) plen, p);
        }
        p += plen + (p [plen] == '&');
    }
    if (!timeout)
        n += (size_t) sprintf (out + n, "%cconnect_timeout=%d", n == base? '?': '&', SB_STORE_CONNECT_TIMEOUT_S);
    if (!named)
        n += (size_t) sprintf (out + n, "%capplication_name=switchboard-cluster", n == base? '?': '&');
    db->conninfo = out;
    const char *host = strstr (url, "://") + 3;
    const char *at = memchr (host, '@', base - (size_t) (host - url));
    if (asprintf (&db->where, "%.*s%.*s", (int) (host - url), url,
                  (int) (base - (size_t) ((at? at + 1: host) - url)), at? at + 1: host) < 0) {
        db->where = NULL;
        snprintf (err, errlen, "cluster: out of memory");
        return -1;
    }
    return 0;
}

int
sb_cluster_url_schema (const char *url, char *out, size_t size)
{
    sb_cluster_db_t db;
    memset (&db, 0, sizeof db);
    char err [128];
    int rc = url && s_parse (&db, url, err, sizeof err) == 0? 0: SB_STORE_INVALID;
    snprintf (out, size, "%s", rc == 0? db.schema: "");
    free (db.conninfo);
    free (db.where);
    return rc;
}

//  --------------------------------------------------------------------------
//  The connection

static void
s_notice (void *arg, const char *message)
{
}

int
sb_cluster_db_open (sb_cluster_db_t *db, const char *url, char *err, size_t errlen)
{
    memset (db, 0, sizeof *db);
    if (!url || s_parse (db, url, err, errlen) != 0)
        return -1;
    db->conn = PQconnectdb (db->conninfo);
    if (!db->conn || PQstatus (db->conn) != CONNECTION_OK) {
        const char *msg = db->conn? PQerrorMessage (db->conn): "out of memory";
        snprintf (err, errlen, "cluster: cannot connect to PostgreSQL at %s: %.*s",
                  db->where, (int) strcspn (msg, "\n"), msg);
        return -1;
    }
    PQsetNoticeProcessor (db->conn, s_notice, NULL);
    db->qschema = PQescapeIdentifier (db->conn, db->schema, strlen (db->schema));
    if (!db->qschema) {
        snprintf (err, errlen, "cluster: out of memory");
        return -1;
    }
    return 0;
}

void
sb_cluster_db_close (sb_cluster_db_t *db)
{
    if (db->qschema)
        PQfreemem (db->qschema);
    if (db->conn)
        PQfinish (db->conn);
    free (db->conninfo);
    free (db->where);
    memset (db, 0, sizeof *db);
}

//  --------------------------------------------------------------------------
//  Statements

//  The statement with every '@' made the escaped schema.
static char *
s_sql (sb_cluster_db_t *db, const char *tmpl)
{
    size_t ats = 0;
    for (const char *p = tmpl; *p; p++)
        ats += *p == '@';
    size_t qlen = strlen (db->qschema);
    char *out = (char *) malloc (strlen (tmpl) + ats * qlen + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const char *p = tmpl; *p; p++) {
        if (*p == '@') {
            memcpy (o, db->qschema, qlen);
            o += qlen;
        }
        else
            *o++ = *p;
    }
    *o = 0;
    return out;
}

int
sb_cluster_db_exec (sb_cluster_db_t *db, const char *tmpl, int nparams,
                    const char *const *values, PGresult **res_p)
{
    if (res_p)
        *res_p = NULL;
    //  Outside a txn only: a reset inside one would lose what it did.
    if (PQstatus (db->conn) != CONNECTION_OK && PQtransactionStatus (db->conn) != PQTRANS_INTRANS)
        PQreset (db->conn);
    char *sql = s_sql (db, tmpl);
    if (!sql)
        return -ENOMEM;
    PGresult *res = PQexecParams (db->conn, sql, nparams, NULL, values, NULL, NULL, 0);
    free (sql);
    ExecStatusType st = res? PQresultStatus (res): PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if (res_p)
            *res_p = res;
        else
            PQclear (res);
        return 0;
    }
    const char *state = res? PQresultErrorField (res, PG_DIAG_SQLSTATE): NULL;
    int rc = SB_STORE_BACKEND;
    if (state && (strcmp (state, "40001") == 0 || strcmp (state, "40P01") == 0))
        rc = SB_STORE_BUSY;
    else {
        const char *msg = res? PQresultErrorMessage (res): PQerrorMessage (db->conn);
        sb_warn ("cluster", "%s: %.*s", db->where, (int) strcspn (msg, "\n"), msg);
    }
    PQclear (res);
    return rc;
}

int
sb_cluster_db_begin (sb_cluster_db_t *db)
{
    return sb_cluster_db_exec (db, "BEGIN ISOLATION LEVEL READ COMMITTED", 0, NULL, NULL);
}

int
sb_cluster_db_commit (sb_cluster_db_t *db)
{
    PGresult *res;
    int rc = sb_cluster_db_exec (db, "COMMIT", 0, NULL, &res);
    //  A txn the server had already failed answers COMMIT with ROLLBACK.
    if (rc == 0 && strcmp (PQcmdStatus (res), "COMMIT") != 0)
        rc = SB_STORE_BACKEND;
    PQclear (res);
    return rc;
}

void
sb_cluster_db_rollback (sb_cluster_db_t *db)
{
    if (PQstatus (db->conn) == CONNECTION_OK && PQtransactionStatus (db->conn) != PQTRANS_IDLE)
        PQclear (PQexec (db->conn, "ROLLBACK"));
}

void
sb_cluster_array (uint64_t shards, char *out, size_t size)
{
    size_t n = (size_t) snprintf (out, size, "{");
    for (unsigned s = 0; s < SB_CLUSTER_SHARDS && n < size; s++)
        if (shards & (1ull << s))
            n += (size_t) snprintf (out + n, size - n, "%s%u", n > 1? ",": "", s);
    if (n < size)
        snprintf (out + n, size - n, "}");
}

//  --------------------------------------------------------------------------
//  The tables

static const char *s_tables [] = {
    "CREATE SCHEMA IF NOT EXISTS @",
    "CREATE TABLE IF NOT EXISTS @.cluster_version (version int NOT NULL)",
    "CREATE TABLE IF NOT EXISTS @.nodes (node_id text PRIMARY KEY, "
        "bus_endpoint text NOT NULL DEFAULT '', event_endpoint text NOT NULL DEFAULT '', "
        "curve_public text NOT NULL DEFAULT '', lease_ms int NOT NULL, "
        "started_at timestamptz NOT NULL, heartbeat_at timestamptz NOT NULL)",
    "CREATE TABLE IF NOT EXISTS @.shard_leases (shard int PRIMARY KEY, owner text, "
        "epoch bigint NOT NULL DEFAULT 0, expires_at timestamptz NOT NULL DEFAULT '-infinity')",
    NULL
};

//  One integer out of a one-row result.
static int
s_scalar (sb_cluster_db_t *db, const char *sql, long long *out)
{
    PGresult *res;
    int rc = sb_cluster_db_exec (db, sql, 0, NULL, &res);
    if (rc != 0)
        return rc;
    *out = PQntuples (res) == 1 && !PQgetisnull (res, 0, 0)? atoll (PQgetvalue (res, 0, 0)): -1;
    PQclear (res);
    return 0;
}

int
sb_cluster_db_prepare (sb_cluster_db_t *db, char *err, size_t errlen)
{
    //  CREATE ... IF NOT EXISTS is not safe against itself run at once by
    //  two sessions: nodes that start together take turns here.
    const char *key [1] = { db->schema };
    if (sb_cluster_db_exec (db, "SELECT pg_advisory_xact_lock (hashtext ('switchboard cluster ' || $1))",
                            1, key, NULL) != 0)
        goto failed;
    for (int i = 0; s_tables [i]; i++)
        if (sb_cluster_db_exec (db, s_tables [i], 0, NULL, NULL) != 0)
            goto failed;
    char sql [160];
    snprintf (sql, sizeof sql, "INSERT INTO @.cluster_version SELECT %d "
              "WHERE NOT EXISTS (SELECT 1 FROM @.cluster_version)", SB_CLUSTER_VERSION);
    long long version, rows;
    if (sb_cluster_db_exec (db, sql, 0, NULL, NULL) != 0
        || s_scalar (db, "SELECT max (version) FROM @.cluster_version", &version) != 0)
        goto failed;
    if (version != SB_CLUSTER_VERSION) {
        snprintf (err, errlen, "cluster: %s schema %s has layout version %lld, this build reads %d",
                  db->where, db->schema, version, SB_CLUSTER_VERSION);
        return -1;
    }
    snprintf (sql, sizeof sql, "INSERT INTO @.shard_leases (shard) "
              "SELECT generate_series (0, %d) ON CONFLICT DO NOTHING", SB_CLUSTER_SHARDS - 1);
    if (sb_cluster_db_exec (db, sql, 0, NULL, NULL) != 0
        || s_scalar (db, "SELECT count(*) FROM @.shard_leases", &rows) != 0)
        goto failed;
    if (rows != SB_CLUSTER_SHARDS) {
        snprintf (err, errlen, "cluster: %s schema %s has %lld shards, this build has %d",
                  db->where, db->schema, rows, SB_CLUSTER_SHARDS);
        return -1;
    }
    return 0;
failed:
    snprintf (err, errlen, "cluster: %s: cannot make the tables of schema %s: %.*s", db->where,
              db->schema, (int) strcspn (PQerrorMessage (db->conn), "\n"), PQerrorMessage (db->conn));
    return -1;
}

int
sb_cluster_db_exists (sb_cluster_db_t *db)
{
    const char *name [1] = { db->schema };
    PGresult *res;
    int rc = sb_cluster_db_exec (db, "SELECT count(*) FROM pg_catalog.pg_tables "
                                 "WHERE schemaname = $1 AND tablename IN ('nodes', 'shard_leases')",
                                 1, name, &res);
    if (rc != 0)
        return rc;
    rc = atoi (PQgetvalue (res, 0, 0)) == 2;
    PQclear (res);
    return rc;
}

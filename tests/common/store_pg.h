/*  tests/common/store_pg.h — the store's tests against PostgreSQL.

    When SB_TEST_STORE_URL names a database (postgresql://user@host:port/db,
    without a schema parameter), the store tests open their stores there
    instead of in folders: each store in a schema of its own, named from a
    tag of the test and the folder name it would have had, and every schema
    of the tag is dropped when the test ends. tests/integration/
    test_store_postgres.py starts a PostgreSQL and runs them so.

    Header-only (static), since each test binary is one translation unit.
    libpq is linked into every test binary (the Makefile's PKGS).
*/
#ifndef SB_TESTS_COMMON_STORE_PG_H
#define SB_TESTS_COMMON_STORE_PG_H

#include <libpq-fe.h>

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  The database the tests run against, or NULL for LMDB.
static inline const char *
sbt_pg_base (void)
{
    const char *url = getenv ("SB_TEST_STORE_URL");
    return url && *url? url: NULL;
}

//  A tag for this test's schemas: this process and a counter, so that tests
//  run in parallel (criterion --jobs) never share a schema.
static inline const char *
sbt_pg_tag (void)
{
    static char tag [32];
    if (!*tag)
        snprintf (tag, sizeof tag, "t%x_%lx", (unsigned) getpid (), (unsigned long) random () & 0xffff);
    return tag;
}

//  The store URL for what would be the folder `sub`: its schema is the tag
//  and `sub` with every other character than a-z, 0-9 and _ made a _.
static inline void
sbt_pg_where (char *out, size_t size, const char *sub)
{
    char schema [64];
    int n = snprintf (schema, sizeof schema, "%s_%s", sbt_pg_tag (), sub);
    for (int i = 0; i < n && schema [i]; i++) {
        char c = (char) tolower ((unsigned char) schema [i]);
        schema [i] = (isalnum ((unsigned char) c) || c == '_')? c: '_';
    }
    const char *base = sbt_pg_base ();
    snprintf (out, size, "%s%sschema=%s", base, strchr (base, '?')? "&": "?", schema);
}

//  Runs SQL on the test database, as a stranger would. Returns 0 or -1
//  (the server's message on stderr).
static inline void
sbt_pg_quiet (void *arg, const char *message)
{
}

static inline int
sbt_pg_exec (const char *sql)
{
    PGconn *conn = PQconnectdb (sbt_pg_base ());
    int rc = -1;
    if (PQstatus (conn) == CONNECTION_OK) {
        PQsetNoticeProcessor (conn, sbt_pg_quiet, NULL);
        PGresult *res = PQexec (conn, sql);
        ExecStatusType st = PQresultStatus (res);
        rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK? 0: -1;
        if (rc != 0)
            fprintf (stderr, "sbt_pg_exec: %s: %s", sql, PQresultErrorMessage (res));
        PQclear (res);
    }
    else
        fprintf (stderr, "sbt_pg_exec: %s", PQerrorMessage (conn));
    PQfinish (conn);
    return rc;
}

//  Drops every schema this test made.
static inline void
sbt_pg_drop (void)
{
    char sql [512];
    snprintf (sql, sizeof sql,
              "DO $$ DECLARE s text; BEGIN FOR s IN SELECT nspname FROM pg_namespace "
              "WHERE starts_with (nspname, '%s_') LOOP "
              "EXECUTE format ('DROP SCHEMA %%I CASCADE', s); END LOOP; END $$",
              sbt_pg_tag ());
    sbt_pg_exec (sql);
}

#endif

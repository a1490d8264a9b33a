/*  tests/unit/test_store_stats.c — where an actor's store lives
    (sb_store_locate: a folder under DATA, or the URL with the schema of
    its role) and what stats reads of the stores of a process
    (sb_store_stats_each: backend, writes, latency percentiles). */
#include "store/store.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test (store_locate, lmdb_folder_when_no_url)
{
    char out [256], err [256];
    cr_assert_eq (sb_store_locate (NULL, "/data", "session", out, sizeof out, err, sizeof err), 0);
    cr_assert_str_eq (out, "/data/session");
    cr_assert_eq (sb_store_locate ("", "/data", "run", out, sizeof out, err, sizeof err), 0);
    cr_assert_str_eq (out, "/data/run");
}

Test (store_locate, url_gets_the_role_schema)
{
    char out [256], err [256];
    cr_assert_eq (sb_store_locate ("postgres://u@h:5432/db", NULL, "session", out, sizeof out,
                                   err, sizeof err), 0);
    cr_assert_str_eq (out, "postgres://u@h:5432/db?schema=switchboard_session");
    cr_assert_eq (sb_store_locate ("postgresql://u:pw@h/db?schema=prod&sslmode=disable", NULL, "interact",
                                   out, sizeof out, err, sizeof err), 0);
    cr_assert_str_eq (out, "postgresql://u:pw@h/db?sslmode=disable&schema=prod_interact");
    cr_assert_eq (sb_store_locate ("postgresql://h/db?connect_timeout=2", NULL, "run",
                                   out, sizeof out, err, sizeof err), 0);
    cr_assert_str_eq (out, "postgresql://h/db?connect_timeout=2&schema=switchboard_run");
}

Test (store_locate, refusals)
{
    char out [48], err [256];
    cr_assert_eq (sb_store_locate ("mysql://h/db", NULL, "run", out, sizeof out, err, sizeof err), -1);
    cr_assert (strstr (err, "postgres://"), "%s", err);
    //  too long for the buffer: refused, never cut
    cr_assert_eq (sb_store_locate ("postgresql://a-rather-long-host-name.example/db", NULL, "interact",
                                   out, sizeof out, err, sizeof err), -1);
    cr_assert (strstr (err, "too long"), "%s", err);
    char tiny [8];
    cr_assert_eq (sb_store_locate (NULL, "/a/long/data/folder", "session", tiny, sizeof tiny,
                                   err, sizeof err), -1);
}

static const char *s_names [] = { "t", NULL };

static int
s_put (sb_txn_t *txn, void *ctx)
{
    sb_key_t k;
    sb_key_init (&k, 'T');
    sb_key_u64 (&k, *(uint64_t *) ctx);
    return sb_txn_put (txn, 0, k.buf, k.len, "v", 1);
}

typedef struct {
    int seen;
    sb_store_stats_t st;
} found_t;

static int
s_find (const sb_store_stats_t *st, void *ctx)
{
    found_t *f = ctx;
    if (strcmp (st->name, "statstore") == 0) {
        f->seen++;
        f->st = *st;
    }
    return 0;
}

Test (store_stats, writes_and_percentiles_of_an_open_store)
{
    char dir [] = "/tmp/sbstatsXXXXXX";
    cr_assert_not_null (mkdtemp (dir));
    char path [64], err [256];
    snprintf (path, sizeof path, "%s/statstore", dir);
    sb_store_t *store = sb_store_open (path, s_names, 1, 0, err, sizeof err);
    cr_assert_not_null (store, "%s", err);
    found_t f = { 0 };
    sb_store_stats_each (s_find, &f);
    cr_assert_eq (f.seen, 1);
    cr_assert_str_eq (f.st.backend, "lmdb");
    cr_assert_eq (f.st.writes, 0);
    cr_assert_eq (f.st.write_p50_us, 0);
    for (uint64_t i = 0; i < 50; i++)
        cr_assert_eq (sb_store_write (store, s_put, &i), 0);
    memset (&f, 0, sizeof f);
    sb_store_stats_each (s_find, &f);
    cr_assert_eq (f.seen, 1);
    cr_assert_eq (f.st.writes, 50);
    cr_assert_geq (f.st.commits, 50);
    cr_assert_leq (f.st.write_p50_us, f.st.write_p99_us);
    cr_assert_gt (f.st.write_p99_us, 0);
    sb_store_destroy (&store);
    memset (&f, 0, sizeof f);
    sb_store_stats_each (s_find, &f);
    cr_assert_eq (f.seen, 0, "a closed store is still listed");
    char cmd [96];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq (system (cmd), 0);
}

/*  tests/unit/test_store_pg.c — what only the PostgreSQL store has: the
    URL, conflicts between two writers, scans over many pages, a foreign
    schema, a lost connection.

    The tests of the URL need no server and always run. The others need a
    database named by SB_TEST_STORE_URL (tests/common/store_pg.h) and skip
    without one; tests/integration/test_store_postgres.py starts a
    PostgreSQL and runs them. test_store runs everything else on both
    backends.
*/
#include "store/store.h"
#include "tests/common/store_pg.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum { DBI_TAPE, DBI_SESS, DBI_COUNT };
static const char *const g_names [] = { "tape", "sessions", NULL };
static char g_err [512];

#define NEEDS_SERVER() \
    do { if (!sbt_pg_base ()) cr_skip_test ("SB_TEST_STORE_URL names no database"); } while (0)

static void
teardown (void)
{
    if (sbt_pg_base ())
        sbt_pg_drop ();
}

TestSuite (store_pg, .fini = teardown);

static sb_store_t *
s_open (const char *sub)
{
    char url [1024];
    sbt_pg_where (url, sizeof url, sub);
    sb_store_t *store = sb_store_open (url, g_names, 1, 0, g_err, sizeof g_err);
    cr_assert_not_null (store, "open %s: %s", url, g_err);
    return store;
}

static void
s_key (sb_key_t *k, const char *session, uint64_t seq)
{
    sb_key_init (k, 'T');
    sb_key_str (k, session);
    sb_key_u64 (k, seq);
}

//  --------------------------------------------------------------------------
//  The URL (no server needed)

Test (store_pg, unreachable_database_is_one_clear_line)
{
    //  Nothing listens on port 1 of the loopback: refused at once.
    const char *url = "postgresql://sbuser:hunter2@127.0.0.1:1/none";
    cr_assert_null (sb_store_open (url, g_names, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "cannot connect to PostgreSQL"), "%s", g_err);
    cr_assert (strstr (g_err, "127.0.0.1:1/none"), "%s", g_err);
    cr_assert_null (strchr (g_err, '\n'), "one line: %s", g_err);
    cr_assert_null (strstr (g_err, "hunter2"), "no password in the message: %s", g_err);
}

Test (store_pg, bad_urls_and_names_are_refused_before_connecting)
{
    cr_assert_null (sb_store_open ("postgresql://127.0.0.1:1/x?schema=Bad-Name",
                                   g_names, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "schema must be"), "%s", g_err);
    cr_assert_null (sb_store_open ("postgresql://127.0.0.1:1/x?sslmode=disable&schema=",
                                   g_names, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "schema must be"), "an empty schema: %s", g_err);

    //  PostgreSQL names are 63 bytes at most; a longer dbi name would be
    //  cut and could meet another one.
    char name [80];
    memset (name, 'n', 64);
    name [64] = 0;
    const char *const names [] = { name, NULL };
    cr_assert_null (sb_store_open ("postgres://127.0.0.1:1/x", names, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "longer than PostgreSQL's"), "%s", g_err);
}

//  --------------------------------------------------------------------------
//  Conflicts

typedef struct {
    sb_store_t *store;
    pthread_barrier_t *both_read;
    unsigned calls;
    int rc;
} writer_t;

//  Reads the counter, waits (on its first run only) until the other writer
//  has read it too, and writes it plus one: the textbook lost update, which
//  SERIALIZABLE turns into a conflict for one of the two.
static int
s_incr_fn (sb_txn_t *txn, void *arg)
{
    writer_t *w = (writer_t *) arg;
    w->calls++;
    sb_key_t k;
    sb_key_init (&k, 'C');
    sb_key_str (&k, "counter");
    uint64_t n = 0;
    sb_datum_t v;
    if (sb_txn_get (txn, DBI_SESS, k.buf, k.len, &v) == 0 && v.size == sizeof n)
        memcpy (&n, v.data, sizeof n);
    if (w->calls == 1)
        pthread_barrier_wait (w->both_read);
    n++;
    sb_txn_put (txn, DBI_SESS, k.buf, k.len, &n, sizeof n);
    return 0;
}

static void *
s_writer (void *arg)
{
    writer_t *w = (writer_t *) arg;
    w->rc = sb_store_write (w->store, s_incr_fn, w);
    return NULL;
}

Test (store_pg, two_writers_conflict_and_both_commit, .timeout = 60)
{
    NEEDS_SERVER ();
    //  Two handles on one schema: two hosts sharing the store.
    sb_store_t *a = s_open ("conflict");
    sb_store_t *b = s_open ("conflict");
    cr_assert_str_eq (sb_store_backend (a), "postgresql");

    pthread_barrier_t both_read;
    pthread_barrier_init (&both_read, NULL, 2);
    writer_t wa = { a, &both_read, 0, -1 }, wb = { b, &both_read, 0, -1 };
    pthread_t ta, tb;
    pthread_create (&ta, NULL, s_writer, &wa);
    pthread_create (&tb, NULL, s_writer, &wb);
    pthread_join (ta, NULL);
    pthread_join (tb, NULL);
    pthread_barrier_destroy (&both_read);

    cr_assert_eq (wa.rc, 0, "%s", sb_store_strerror (wa.rc));
    cr_assert_eq (wb.rc, 0, "%s", sb_store_strerror (wb.rc));
    cr_assert_geq (wa.calls + wb.calls, 3, "one of the two bodies ran again");

    sb_store_info_t ia, ib;
    cr_assert_eq (sb_store_info (a, &ia), 0);
    cr_assert_eq (sb_store_info (b, &ib), 0);
    cr_assert_geq (ia.retries + ib.retries, 1, "the re-run is counted");
    cr_assert_eq (ia.retries + ib.retries, wa.calls + wb.calls - 2);
    cr_assert_eq (ia.commits + ib.commits, 2);
    cr_assert_eq (ia.entries [DBI_SESS], 1);

    //  No update was lost.
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (a, &txn, false), 0);
    sb_key_t k;
    sb_key_init (&k, 'C');
    sb_key_str (&k, "counter");
    sb_datum_t v;
    cr_assert_eq (sb_txn_get (&txn, DBI_SESS, k.buf, k.len, &v), 0);
    uint64_t n;
    cr_assert_eq (v.size, sizeof n);
    memcpy (&n, v.data, sizeof n);
    cr_assert_eq (n, 2);
    sb_txn_abort (&txn);
    sb_store_destroy (&a);
    sb_store_destroy (&b);
}

//  A queue's take (sb_txn_take_first) from two hosts at once.
#define TAKE_KEYS 300

typedef struct {
    sb_store_t *store;
    pthread_barrier_t *go;
    uint8_t taken [TAKE_KEYS];  //  how often this host took key n
    int n, rc;
} taker_t;

static int
s_take_fn (sb_txn_t *txn, void *arg)
{
    taker_t *t = (taker_t *) arg;
    //  a body is run again after a serialization failure: what a run
    //  that did not commit took is not taken
    t->n = -1;
    sb_key_t prefix;
    sb_key_init (&prefix, 'Q');
    sb_key_str (&prefix, "pool");
    uint8_t key [SB_STORE_KEY_MAX];
    size_t klen;
    int rc = sb_txn_take_first (txn, DBI_SESS, prefix.buf, prefix.len, key, &klen);
    if (rc == 0 && klen == prefix.len + 8) {
        sb_datum_t k = { klen, key };
        t->n = (int) sb_key_read_u64 (&k, prefix.len);
    }
    return rc == SB_STORE_NOTFOUND? 0: rc;
}

static void *
s_taker (void *arg)
{
    taker_t *t = (taker_t *) arg;
    pthread_barrier_wait (t->go);
    while (true) {
        t->n = -1;
        t->rc = sb_store_write (t->store, s_take_fn, t);
        if (t->rc != 0 || t->n < 0)
            break;
        if (t->n < TAKE_KEYS)
            t->taken [t->n]++;
    }
    return NULL;
}

Test (store_pg, takes_from_two_hosts_skip_locked_rows_and_take_each_key_once, .timeout = 60)
{
    NEEDS_SERVER ();
    sb_store_t *a = s_open ("take");
    sb_store_t *b = s_open ("take");
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (a, &txn, true), 0);
    for (uint64_t n = 0; n < TAKE_KEYS; n++) {
        sb_key_t k;
        sb_key_init (&k, 'Q');
        sb_key_str (&k, "pool");
        sb_key_u64 (&k, n);
        sb_txn_put (&txn, DBI_SESS, k.buf, k.len, "", 0);
    }
    cr_assert_eq (sb_txn_commit (&txn), 0, "%s", sb_store_strerror (txn.ret));

    //  A take in flight holds its row: the other host's take passes over
    //  it to the next key at once, rather than waiting for it.
    sb_key_t prefix;
    sb_key_init (&prefix, 'Q');
    sb_key_str (&prefix, "pool");
    uint8_t ka [SB_STORE_KEY_MAX], kb [SB_STORE_KEY_MAX];
    size_t la, lb;
    sb_txn_t tb;
    cr_assert_eq (sb_txn_begin (a, &txn, true), 0);
    cr_assert_eq (sb_txn_take_first (&txn, DBI_SESS, prefix.buf, prefix.len, ka, &la), 0);
    cr_assert_eq (sb_txn_begin (b, &tb, true), 0);
    cr_assert_eq (sb_txn_take_first (&tb, DBI_SESS, prefix.buf, prefix.len, kb, &lb), 0,
                  "%s", sb_store_strerror (tb.ret));
    sb_datum_t da = { la, ka }, db = { lb, kb };
    cr_assert_eq (sb_key_read_u64 (&da, prefix.len), 0);
    cr_assert_eq (sb_key_read_u64 (&db, prefix.len), 1, "the locked key 0 is skipped");
    //  the first take gives up: key 0 is free again, and is taken next
    sb_txn_abort (&txn);
    cr_assert_eq (sb_txn_commit (&tb), 0);

    pthread_barrier_t go;
    pthread_barrier_init (&go, NULL, 2);
    taker_t *ta = calloc (1, sizeof *ta), *tk = calloc (1, sizeof *tk);
    ta->store = a;
    tk->store = b;
    ta->go = tk->go = &go;
    pthread_t pa, pb;
    pthread_create (&pa, NULL, s_taker, ta);
    pthread_create (&pb, NULL, s_taker, tk);
    pthread_join (pa, NULL);
    pthread_join (pb, NULL);
    pthread_barrier_destroy (&go);
    cr_assert_eq (ta->rc, 0, "%s", sb_store_strerror (ta->rc));
    cr_assert_eq (tk->rc, 0, "%s", sb_store_strerror (tk->rc));
    int na = 0, nb = 0;
    for (int n = 0; n < TAKE_KEYS; n++) {
        int want = n == 1 ? 0 : 1;
        cr_assert_eq (ta->taken [n] + tk->taken [n], want, "key %d taken %d + %d times", n, ta->taken [n],
                      tk->taken [n]);
        na += ta->taken [n];
        nb += tk->taken [n];
    }
    cr_assert_gt (na, 0, "host a took none: the test raced nothing");
    cr_assert_gt (nb, 0, "host b took none: the test raced nothing");
    cr_log_info ("two hosts took %d + %d of %d keys, each once", na, nb, TAKE_KEYS - 1);
    free (ta);
    free (tk);
    sb_store_destroy (&a);
    sb_store_destroy (&b);
}

typedef struct {
    const char *url;
    pthread_barrier_t *go;
    sb_store_t *store;
    char err [512];
} opener_t;

static void *
s_opener (void *arg)
{
    opener_t *o = (opener_t *) arg;
    pthread_barrier_wait (o->go);
    o->store = sb_store_open (o->url, g_names, 1, 0, o->err, sizeof o->err);
    return NULL;
}

Test (store_pg, hosts_that_start_at_once_all_open_a_fresh_schema, .timeout = 60)
{
    NEEDS_SERVER ();
    //  Creating the schema and its tables races between them: whoever
    //  loses runs the open again and finds them made.
    char url [1024];
    sbt_pg_where (url, sizeof url, "race");
    enum { N = 4 };
    pthread_barrier_t go;
    pthread_barrier_init (&go, NULL, N);
    opener_t o [N];
    pthread_t t [N];
    for (int i = 0; i < N; i++) {
        o [i] = (opener_t) { url, &go, NULL, "" };
        pthread_create (&t [i], NULL, s_opener, &o [i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join (t [i], NULL);
    pthread_barrier_destroy (&go);
    for (int i = 0; i < N; i++) {
        cr_assert_not_null (o [i].store, "opener %d: %s", i, o [i].err);
        sb_store_destroy (&o [i].store);
    }
}

Test (store_pg, append_after_another_host_appended_is_out_of_order)
{
    NEEDS_SERVER ();
    sb_store_t *a = s_open ("append");
    sb_store_t *b = s_open ("append");
    sb_key_t k5, k3, k6;
    s_key (&k5, "s", 5);
    s_key (&k3, "s", 3);
    s_key (&k6, "s", 6);
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (a, &txn, true), 0);
    cr_assert_eq (sb_txn_append (&txn, DBI_TAPE, k5.buf, k5.len, "5", 1), 0);
    cr_assert_eq (sb_txn_commit (&txn), 0);

    cr_assert_eq (sb_txn_begin (b, &txn, true), 0);
    cr_assert_eq (sb_txn_append (&txn, DBI_TAPE, k3.buf, k3.len, "3", 1), SB_STORE_ORDER);
    cr_assert_eq (sb_txn_commit (&txn), SB_STORE_ORDER, "sticky");
    cr_assert_eq (sb_txn_begin (b, &txn, true), 0);
    cr_assert_eq (sb_txn_append (&txn, DBI_TAPE, k5.buf, k5.len, "5", 1), SB_STORE_ORDER,
                  "an equal key does not sort after");
    sb_txn_abort (&txn);
    cr_assert_eq (sb_txn_begin (b, &txn, true), 0);
    cr_assert_eq (sb_txn_append (&txn, DBI_TAPE, k6.buf, k6.len, "6", 1), 0);
    cr_assert_eq (sb_txn_commit (&txn), 0);
    sb_store_destroy (&a);
    sb_store_destroy (&b);
}

//  --------------------------------------------------------------------------
//  Scans over many pages

#define NROWS 1000

static int
s_fill_fn (sb_txn_t *txn, void *arg)
{
    char val [32];
    sb_key_t k;
    for (uint64_t seq = 0; seq < NROWS; seq++) {
        s_key (&k, "a", seq);
        int n = snprintf (val, sizeof val, "a:%llu", (unsigned long long) seq);
        sb_txn_append (txn, DBI_TAPE, k.buf, k.len, val, (size_t) n);
    }
    //  Neighbours on both sides, and keys under a prefix of only 0xff.
    s_key (&k, "", 1);
    sb_txn_put (txn, DBI_TAPE, k.buf, k.len, "before", 6);
    s_key (&k, "ab", 1);
    sb_txn_put (txn, DBI_TAPE, k.buf, k.len, "after", 5);
    for (uint64_t seq = 0; seq < 300; seq++) {
        sb_key_init (&k, (char) 0xff);
        sb_key_u8 (&k, 0xff);
        sb_key_u64 (&k, seq);
        sb_txn_put (txn, DBI_TAPE, k.buf, k.len, "ff", 2);
    }
    return 0;
}

static size_t
s_count (sb_txn_t *txn, const void *prefix, size_t plen, const void *start, size_t slen)
{
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, DBI_TAPE, prefix, plen, start, slen);
    size_t n = 0;
    while (sb_txn_iter_next (&it, NULL, NULL))
        n++;
    return n;
}

Test (store_pg, scans_cross_pages_and_values_stay_valid, .timeout = 60)
{
    NEEDS_SERVER ();
    sb_store_t *store = s_open ("pages");
    cr_assert_eq (sb_store_write (store, s_fill_fn, NULL), 0);

    sb_key_t prefix;
    sb_key_init (&prefix, 'T');
    sb_key_str (&prefix, "a");
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    sb_txn_iter_t it;
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0), 0);
    sb_datum_t k, v, first = { 0, NULL };
    uint64_t want = 0;
    while (sb_txn_iter_next (&it, &k, &v)) {
        cr_assert_eq (sb_key_read_u64 (&k, prefix.len), want, "in order across pages");
        if (want == 0)
            first = v;
        want++;
    }
    cr_assert_eq (txn.ret, 0);
    cr_assert_eq (want, NROWS);
    //  The first page's value is still there after the last page came in.
    cr_assert_eq (first.size, 3);
    cr_assert_eq (memcmp (first.data, "a:0", 3), 0);

    sb_key_t start;
    s_key (&start, "a", 600);
    cr_assert_eq (s_count (&txn, prefix.buf, prefix.len, start.buf, start.len), NROWS - 600);
    const uint8_t ff [] = { 0xff };
    cr_assert_eq (s_count (&txn, ff, 1, NULL, 0), 300, "a prefix with no successor");
    cr_assert_eq (s_count (&txn, NULL, 0, NULL, 0), NROWS + 2 + 300, "the whole dbi");
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, ff, 1, &k, NULL), 0);
    cr_assert_eq (sb_key_read_u64 (&k, 2), 299);
    cr_assert_eq (sb_txn_commit (&txn), 0);

    //  Deleting every third entry while walking, across page boundaries.
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0), 0);
    size_t seen = 0;
    while (sb_txn_iter_next (&it, &k, NULL)) {
        if (seen++ % 3 == 0)
            cr_assert_eq (sb_txn_iter_del (&it), 0);
    }
    cr_assert_eq (seen, NROWS, "deleting does not skip the next entry");
    cr_assert_eq (sb_txn_commit (&txn), 0);
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    cr_assert_eq (s_count (&txn, prefix.buf, prefix.len, NULL, 0), NROWS - (NROWS + 2) / 3);
    sb_txn_abort (&txn);
    sb_store_destroy (&store);
}

//  --------------------------------------------------------------------------
//  Refusals and failures

Test (store_pg, foreign_schema_is_refused)
{
    NEEDS_SERVER ();
    //  A schema that someone else made: a table, no version.
    char url [1024], sql [256];
    sbt_pg_where (url, sizeof url, "foreign");
    const char *schema = strstr (url, "schema=") + 7;
    snprintf (sql, sizeof sql, "CREATE SCHEMA %s; CREATE TABLE %s.theirs (id int)", schema, schema);
    cr_assert_eq (sbt_pg_exec (sql), 0);
    cr_assert_null (sb_store_open (url, g_names, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "has no schema version"), "%s", g_err);

    //  An empty schema is a fresh one: its tables are made on open.
    sbt_pg_where (url, sizeof url, "empty");
    schema = strstr (url, "schema=") + 7;
    snprintf (sql, sizeof sql, "CREATE SCHEMA %s", schema);
    cr_assert_eq (sbt_pg_exec (sql), 0);
    sb_store_t *store = sb_store_open (url, g_names, 1, 0, g_err, sizeof g_err);
    cr_assert_not_null (store, "%s", g_err);
    sb_store_destroy (&store);
    snprintf (sql, sizeof sql, "SELECT 1 FROM %s.tape, %s.sessions, %s.meta", schema, schema, schema);
    cr_assert_eq (sbt_pg_exec (sql), 0, "a table per dbi, and meta");
}

Test (store_pg, lost_connection_is_an_error_then_recovers)
{
    NEEDS_SERVER ();
    //  The store's connections carry a name of their own, so that only
    //  they are cut, not those of tests running beside this one.
    char url [1024], app [64];
    sbt_pg_where (url, sizeof url, "lost");
    snprintf (app, sizeof app, "%s_lost", sbt_pg_tag ());
    size_t len = strlen (url);
    snprintf (url + len, sizeof url - len, "&application_name=%s", app);
    sb_store_t *store = sb_store_open (url, g_names, 1, 0, g_err, sizeof g_err);
    cr_assert_not_null (store, "%s", g_err);
    sb_key_t k;
    s_key (&k, "s", 1);
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    sb_txn_put (&txn, DBI_TAPE, k.buf, k.len, "v", 1);
    cr_assert_eq (sb_txn_commit (&txn), 0);

    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    char sql [256];
    snprintf (sql, sizeof sql, "SELECT pg_terminate_backend (pid) FROM pg_stat_activity "
              "WHERE application_name = '%s'", app);
    cr_assert_eq (sbt_pg_exec (sql), 0);
    sb_datum_t v;
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, k.buf, k.len, &v), SB_STORE_BACKEND);
    cr_assert_eq (txn.ret, SB_STORE_BACKEND, "sticky");
    cr_assert_eq (sb_txn_commit (&txn), SB_STORE_BACKEND);

    //  The next txn has a new connection.
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, k.buf, k.len, &v), 0);
    cr_assert_eq (sb_txn_commit (&txn), 0);
    sb_store_destroy (&store);
}

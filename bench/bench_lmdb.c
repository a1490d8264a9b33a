/*  bench/bench_lmdb.c — raw LMDB append baselines.

    The tape benchmark is judged against these: how many tape-shaped entries
    per second LMDB itself takes with durable commits, when nothing but
    mdb_put and mdb_txn_commit is in the way.

    Entry shape: key 'T' + 26-byte session id + be64 seq (35 bytes), value
    150 bytes, keys in ascending order, plain mdb_put (no MDB_APPEND), no
    MDB_NOSYNC / MDB_NOMETASYNC / MDB_WRITEMAP: every commit is fsync'd, as
    in the store.

    Figures, entries/s, each the median of 5 runs of about SECONDS seconds
    (argument 1, default 1.5), each run in a fresh environment under $TMPDIR
    (default /tmp), so they measure the disk behind that folder:
      lmdb.raw.batch1      one entry per write txn
      lmdb.raw.batch64     64 entries per write txn
      lmdb.raw.batch1000   1000 entries per write txn
      lmdb.store.batch64   64 per txn through sb_store_write, for the
                           wrapper's own overhead against lmdb.raw.batch64
*/
#include "store/store.h"
#include "bench/lmdb_raw.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RUNS        5
#define KEY_LEN     SB_RAW_KEY_LEN
#define VAL_LEN     SB_RAW_VAL_LEN

static double g_seconds = 1.5;
static char g_tmp [256];

static void
s_die (const char *what, int rc)
{
    fprintf (stderr, "bench_lmdb: %s: %s\n", what, sb_store_strerror (rc > 0? -rc: rc));
    exit (1);
}

static char *
s_mkdir (void)
{
    static char dir [300];
    snprintf (dir, sizeof dir, "%s/bench_lmdb_XXXXXX", g_tmp);
    if (!mkdtemp (dir)) {
        perror ("bench_lmdb: mkdtemp");
        exit (1);
    }
    return dir;
}

static void
s_rmdir (const char *dir)
{
    char path [400];
    snprintf (path, sizeof path, "%s/data.mdb", dir);
    unlink (path);
    snprintf (path, sizeof path, "%s/lock.mdb", dir);
    unlink (path);
    rmdir (dir);
}

//  One timed run of raw LMDB with `batch` entries per txn; entries/s.
static double
s_raw_run (int batch)
{
    char *dir = s_mkdir ();
    double rate = sb_raw_run (dir, batch, g_seconds, NULL);
    if (rate < 0)
        s_die ("raw run", (int) rate);
    s_rmdir (dir);
    return rate;
}

typedef struct {
    uint64_t next;
    int batch;
} store_ctx_t;

static int
s_store_fn (sb_txn_t *txn, void *arg)
{
    store_ctx_t *c = (store_ctx_t *) arg;
    uint8_t key [KEY_LEN], val [VAL_LEN];
    for (int i = 0; i < c->batch; i++) {
        sb_raw_key (key, c->next + i);
        sb_raw_value (val, c->next + i);
        sb_txn_put (txn, 0, key, KEY_LEN, val, VAL_LEN);
    }
    return 0;
}

//  The same through the wrapper, with the map sized like the raw runs.
static double
s_store_run (int batch)
{
    char *dir = s_mkdir ();
    static const char *const names [] = { "tape", NULL };
    char err [256];
    sb_store_t *store = sb_store_open (dir, names, 1, (size_t) 8 << 30, err, sizeof err);
    if (!store) {
        fprintf (stderr, "bench_lmdb: %s\n", err);
        exit (1);
    }
    store_ctx_t c = { 0, batch };
    double start = sb_raw_now (), elapsed;
    do {
        int rc = sb_store_write (store, s_store_fn, &c);
        if (rc != 0)
            s_die ("store write", rc);
        c.next += batch;
        elapsed = sb_raw_now () - start;
    } while (elapsed < g_seconds);
    sb_store_destroy (&store);
    s_rmdir (dir);
    return c.next / elapsed;
}

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y? -1: x > y;
}

static void
s_figure (const char *name, double (*run) (int), int batch)
{
    double v [RUNS];
    for (int i = 0; i < RUNS; i++)
        v [i] = run (batch);
    qsort (v, RUNS, sizeof v [0], s_cmp);
    printf ("{\"bench\":\"%s\",\"value\":%.0f,\"unit\":\"entries/s\"}\n", name, v [RUNS / 2]);
    fflush (stdout);
}

int
main (int argc, char *argv [])
{
    if (argc > 1) {
        g_seconds = atof (argv [1]);
        if (!(g_seconds > 0 && g_seconds <= 60)) {
            fprintf (stderr, "usage: bench_lmdb [SECONDS per run, default 1.5]\n");
            return 2;
        }
    }
    const char *tmp = getenv ("TMPDIR");
    snprintf (g_tmp, sizeof g_tmp, "%s", tmp && *tmp? tmp: "/tmp");

    s_figure ("lmdb.raw.batch1", s_raw_run, 1);
    s_figure ("lmdb.raw.batch64", s_raw_run, 64);
    s_figure ("lmdb.raw.batch1000", s_raw_run, 1000);
    s_figure ("lmdb.store.batch64", s_store_run, 64);
    return 0;
}

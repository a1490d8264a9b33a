/*  bench/lmdb_raw.h — the raw LMDB append loop that the tape is measured
    against: 150-byte values keyed 'T' + a 26-byte session id + a big-endian
    seq, in durable transactions of `batch` entries. Shared by bench_lmdb.c
    (the baselines alone) and bench_tape.c (baselines beside the tape). */
#ifndef SB_BENCH_LMDB_RAW_H
#define SB_BENCH_LMDB_RAW_H

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SB_RAW_KEY_LEN 35
#define SB_RAW_VAL_LEN 150
#define SB_RAW_SID     "01J9ZK3QH6X0M4T8V2B7C5D1EF"

static inline double
sb_raw_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void
sb_raw_key (uint8_t *key, uint64_t seq)
{
    key [0] = 'T';
    memcpy (key + 1, SB_RAW_SID, 26);
    for (int i = 7; i >= 0; i--, seq >>= 8)
        key [27 + i] = (uint8_t) seq;
}

/*  Different bytes per entry, so nothing is accidentally shared. */
static inline void
sb_raw_value (uint8_t *val, uint64_t seq)
{
    uint64_t x = seq * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < SB_RAW_VAL_LEN; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        val [i] = (uint8_t) x;
    }
}

/*  Opens (creating) the raw environment in `dir` with one table, "tape". */
static inline int
sb_raw_open (const char *dir, size_t mapsize, MDB_env **env_p, MDB_dbi *dbi)
{
    MDB_env *env;
    MDB_txn *txn;
    *env_p = NULL;
    int rc = mdb_env_create (&env);
    if (rc != 0)
        return rc;
    rc = mdb_env_set_maxdbs (env, 2);
    if (rc == 0)
        rc = mdb_env_set_mapsize (env, mapsize);
    if (rc == 0)
        rc = mdb_env_open (env, dir, MDB_NOTLS, 0600);
    if (rc == 0)
        rc = mdb_txn_begin (env, NULL, 0, &txn);
    if (rc == 0)
        rc = mdb_dbi_open (txn, "tape", MDB_CREATE, dbi);
    if (rc == 0)
        rc = mdb_txn_commit (txn);
    *env_p = env;
    return rc;
}

/*  One timed run in the existing empty folder `dir` for `seconds`: returns
    entries/s (and the mean commit time in µs in *txn_us when not NULL), or
    a negative LMDB error code. The map is large enough that it never
    grows: growth is not what is measured. */
static inline double
sb_raw_run (const char *dir, int batch, double seconds, double *txn_us)
{
    MDB_env *env = NULL;
    MDB_txn *txn;
    MDB_dbi dbi;
    int rc = sb_raw_open (dir, (size_t) 8 << 30, &env, &dbi);
    uint8_t key [SB_RAW_KEY_LEN], val [SB_RAW_VAL_LEN];
    uint64_t seq = 0, txns = 0;
    double start = sb_raw_now (), elapsed = 0;
    while (rc == 0) {
        rc = mdb_txn_begin (env, NULL, 0, &txn);
        for (int i = 0; i < batch && rc == 0; i++, seq++) {
            sb_raw_key (key, seq);
            sb_raw_value (val, seq);
            MDB_val k = { SB_RAW_KEY_LEN, key }, v = { SB_RAW_VAL_LEN, val };
            rc = mdb_put (txn, dbi, &k, &v, 0);
        }
        if (rc == 0)
            rc = mdb_txn_commit (txn);
        txns++;
        elapsed = sb_raw_now () - start;
        if (elapsed >= seconds)
            break;
    }
    if (env)
        if (env)
            mdb_env_close (env);
    if (rc != 0)
        return rc > 0 ? -rc : rc;
    if (txn_us)
        *txn_us = elapsed * 1e6 / (double) txns;
    return seq / elapsed;
}

static int
sb_raw_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y? -1: x > y;
}

/*  The physical bounds of one durable event, each timed `n` times in the
    existing empty folder `dir`: a raw LMDB transaction of one entry
    (`lmdb` true: its pages, then its meta page, each made durable) or a
    bare 150-byte append + fdatasync on a file (`lmdb` false: what Redis's
    appendfsync always pays per event loop, before it answers). Fills p50 and p99 in µs;
    returns 0, or a negative LMDB error / -errno. */
static inline int
sb_raw_latency (const char *dir, bool lmdb, int n, double *p50, double *p99)
{
    double *lat = (double *) malloc ((size_t) n * sizeof *lat);
    if (!lat)
        return -ENOMEM;
    int rc = 0;
    if (lmdb) {
        MDB_env *env = NULL;
        MDB_txn *txn;
        MDB_dbi dbi;
        rc = sb_raw_open (dir, (size_t) 1 << 30, &env, &dbi);
        uint8_t key [SB_RAW_KEY_LEN], val [SB_RAW_VAL_LEN];
        for (int k = 0; k < n && rc == 0; k++) {
            double t = sb_raw_now ();
            rc = mdb_txn_begin (env, NULL, 0, &txn);
            sb_raw_key (key, (uint64_t) k);
            sb_raw_value (val, (uint64_t) k);
            MDB_val kv = { SB_RAW_KEY_LEN, key }, vv = { SB_RAW_VAL_LEN, val };
            if (rc == 0)
                rc = mdb_put (txn, dbi, &kv, &vv, 0);
            if (rc == 0)
                rc = mdb_txn_commit (txn);
            lat [k] = (sb_raw_now () - t) * 1e6;
        }
        if (env)
            mdb_env_close (env);
        rc = rc > 0? -rc: rc;
    }
    else {
        char path [4200];
        snprintf (path, sizeof path, "%s/fsync-probe", dir);
        int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            rc = -errno;
        uint8_t rec [SB_RAW_VAL_LEN];
        memset (rec, 0x5a, sizeof rec);
        for (int k = 0; k < n && rc == 0; k++) {
            double t = sb_raw_now ();
            //  one record appended, as Redis appends a command to its AOF
            if (pwrite (fd, rec, sizeof rec, (off_t) k * (off_t) sizeof rec) != (ssize_t) sizeof rec
            ||  fdatasync (fd) != 0)
                rc = -errno;
            lat [k] = (sb_raw_now () - t) * 1e6;
        }
        if (fd >= 0) {
            close (fd);
            unlink (path);
        }
    }
    if (rc == 0) {
        qsort (lat, (size_t) n, sizeof *lat, sb_raw_cmp);
        *p50 = lat [n / 2];
        *p99 = lat [n * 99 / 100];
    }
    free (lat);
    return rc;
}

#endif

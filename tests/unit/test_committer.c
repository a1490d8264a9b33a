/*  tests/unit/test_committer.c — the group committer's thread
    (store/committer.c), against real LMDB in a mkdtemp folder.

    What the actor relies on: each batch's write function runs on the
    committer's thread, one batch at a time and in the order handed over;
    the fd is readable only once the commit has returned; a batch that
    fails is written not at all (its function's error, a full disk); and
    a batch that outgrows the map is run again after the map grows.

    A full disk is made by interposing pwrite and writev, as test_store
    does: liblmdb's calls resolve to these definitions, which fail with
    ENOSPC while g_fail is set. */
#include "store/committer.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_bool g_fail;

ssize_t
pwrite (int fd, const void *buf, size_t n, off_t off)
{
    static ssize_t (*real) (int, const void *, size_t, off_t);
    if (!real)
        real = (ssize_t (*) (int, const void *, size_t, off_t)) dlsym (RTLD_NEXT, "pwrite");
    if (atomic_load (&g_fail) && fd > 2) {
        errno = ENOSPC;
        return -1;
    }
    return real (fd, buf, n, off);
}

ssize_t
writev (int fd, const struct iovec *iov, int iovcnt)
{
    static ssize_t (*real) (int, const struct iovec *, int);
    if (!real)
        real = (ssize_t (*) (int, const struct iovec *, int)) dlsym (RTLD_NEXT, "writev");
    if (atomic_load (&g_fail) && fd > 2) {
        errno = ENOSPC;
        return -1;
    }
    return real (fd, iov, iovcnt);
}

static const char *const g_names [] = { "tape", NULL };
static char g_dir [64];

static int
s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    return remove (path);
}

static sb_store_t *
s_open (size_t mapsize)
{
    snprintf (g_dir, sizeof g_dir, "/tmp/test_committer.XXXXXX");
    cr_assert_not_null (mkdtemp (g_dir));
    char err [256];
    sb_store_t *store = sb_store_open (g_dir, g_names, 1, mapsize, err, sizeof err);
    cr_assert_not_null (store, "%s", err);
    return store;
}

static void
s_close (sb_store_t **store)
{
    sb_store_destroy (store);
    nftw (g_dir, s_rm, 8, FTW_DEPTH | FTW_PHYS);
}

//  A batch: entries first..first+count-1 of one tape, each a value of
//  `size` bytes; fails with `fail` after writing them when non-zero.
typedef struct {
    uint64_t first, count;
    size_t size;
    int fail;
    int runs;                   //  how many times the function ran
    pthread_t thread;           //  where it ran
    //  With hold: the function waits until released.
    bool hold;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool released, started;
} batch_t;

static int
s_batch_fn (sb_txn_t *txn, void *arg)
{
    batch_t *b = (batch_t *) arg;
    b->runs++;
    b->thread = pthread_self ();
    if (b->hold) {
        pthread_mutex_lock (&b->lock);
        b->started = true;
        pthread_cond_broadcast (&b->cond);
        while (!b->released)
            pthread_cond_wait (&b->cond, &b->lock);
        pthread_mutex_unlock (&b->lock);
    }
    uint8_t *val = calloc (1, b->size);
    cr_assert_not_null (val);
    for (uint64_t k = 0; k < b->count && txn->ret == 0; k++) {
        sb_key_t key;
        sb_key_init (&key, 'T');
        sb_key_u64 (&key, b->first + k);
        memcpy (val, &(uint64_t) { b->first + k }, sizeof (uint64_t));
        sb_txn_append (txn, 0, key.buf, key.len, val, b->size);
    }
    free (val);
    return b->fail;
}

static batch_t *
s_batch (uint64_t first, uint64_t count, size_t size)
{
    batch_t *b = calloc (1, sizeof *b);
    cr_assert_not_null (b);
    *b = (batch_t) { .first = first, .count = count, .size = size };
    pthread_mutex_init (&b->lock, NULL);
    pthread_cond_init (&b->cond, NULL);
    return b;
}

static bool
s_readable (int fd, int timeout_ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    return poll (&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

//  The tape's keys, in order: true when they are exactly 1..n.
static bool
s_tape_is (sb_store_t *store, uint64_t n)
{
    sb_txn_t txn;
    sb_txn_begin (store, &txn, false);
    sb_key_t prefix;
    sb_key_init (&prefix, 'T');
    sb_txn_iter_t it;
    sb_txn_iter_begin (&txn, &it, 0, prefix.buf, prefix.len, NULL, 0);
    sb_datum_t k, v;
    uint64_t want = 1;
    bool ok = true;
    while (sb_txn_iter_next (&it, &k, &v)) {
        uint64_t seq = sb_key_read_u64 (&k, 1), stored;
        memcpy (&stored, v.data, sizeof stored);
        if (seq != want || stored != seq)
            ok = false;
        want++;
    }
    sb_txn_commit (&txn);
    return ok && want == n + 1;
}

Test (committer, batches_commit_in_order_on_its_thread)
{
    sb_store_t *store = s_open (0);
    sb_committer_t *c = sb_committer_new (store);
    cr_assert_not_null (c);
    cr_assert (!sb_committer_busy (c));
    cr_assert_eq (sb_committer_finish (c), 0, "finish with nothing in flight");
    uint64_t next = 1;
    for (int k = 0; k < 50; k++) {
        batch_t *b = s_batch (next, 1 + (uint64_t) k % 7, 150);
        sb_committer_start (c, s_batch_fn, b);
        cr_assert (sb_committer_busy (c));
        cr_assert (s_readable (sb_committer_fd (c), 10000), "batch %d: the fd never became readable", k);
        cr_assert_eq (sb_committer_finish (c), 0, "batch %d failed", k);
        cr_assert (!sb_committer_busy (c));
        cr_assert (!s_readable (sb_committer_fd (c), 0), "the fd stays readable after finish");
        cr_assert_eq (b->runs, 1);
        cr_assert (!pthread_equal (b->thread, pthread_self ()), "the batch ran on the caller's thread");
        next += b->count;
        free (b);
    }
    cr_assert (s_tape_is (store, next - 1), "the tape is not 1..%llu in order", (unsigned long long) next - 1);
    sb_committer_destroy (&c);
    cr_assert_null (c);
    s_close (&store);
}

//  While a batch is in its transaction, the caller goes on (that is the
//  point), the fd says nothing, and readers see none of it.
Test (committer, the_caller_works_while_a_batch_commits)
{
    sb_store_t *store = s_open (0);
    sb_committer_t *c = sb_committer_new (store);
    batch_t *b = s_batch (1, 100, 150);
    b->hold = true;
    sb_committer_start (c, s_batch_fn, b);
    pthread_mutex_lock (&b->lock);
    while (!b->started)
        pthread_cond_wait (&b->cond, &b->lock);
    pthread_mutex_unlock (&b->lock);
    cr_assert (sb_committer_busy (c));
    cr_assert (!s_readable (sb_committer_fd (c), 50), "readable before the commit returned");
    cr_assert (s_tape_is (store, 0), "a reader saw an uncommitted batch");
    pthread_mutex_lock (&b->lock);
    b->released = true;
    pthread_cond_broadcast (&b->cond);
    pthread_mutex_unlock (&b->lock);
    cr_assert_eq (sb_committer_finish (c), 0);
    cr_assert (s_tape_is (store, 100));
    free (b);
    //  Destroy waits for a batch in flight.
    b = s_batch (101, 10, 150);
    sb_committer_start (c, s_batch_fn, b);
    sb_committer_destroy (&c);
    cr_assert (s_tape_is (store, 110), "destroy did not wait for the batch in flight");
    free (b);
    s_close (&store);
}

Test (committer, a_batch_fails_as_a_whole)
{
    sb_store_t *store = s_open (0);
    sb_committer_t *c = sb_committer_new (store);
    batch_t *ok = s_batch (1, 10, 150);
    sb_committer_start (c, s_batch_fn, ok);
    cr_assert_eq (sb_committer_finish (c), 0);

    //  The write function's own error: nothing of the batch is written.
    batch_t *bad = s_batch (11, 20, 150);
    bad->fail = 7;
    sb_committer_start (c, s_batch_fn, bad);
    cr_assert_eq (sb_committer_finish (c), 7);
    cr_assert (s_tape_is (store, 10), "a failed batch left entries behind");

    //  A full disk at the commit: the whole batch is refused.
    batch_t *full = s_batch (11, 20, 150);
    atomic_store (&g_fail, true);
    sb_committer_start (c, s_batch_fn, full);
    int rc = sb_committer_finish (c);
    atomic_store (&g_fail, false);
    cr_assert_eq (rc, SB_STORE_DISK_FULL, "a full disk gave %d (%s)", rc, sb_store_strerror (rc));
    cr_assert (s_tape_is (store, 10), "a batch refused for a full disk left entries behind");

    //  And the next batch takes the same seqs, as the actor's would.
    batch_t *again = s_batch (11, 20, 150);
    sb_committer_start (c, s_batch_fn, again);
    cr_assert_eq (sb_committer_finish (c), 0);
    cr_assert (s_tape_is (store, 30));
    free (ok); free (bad); free (full); free (again);
    sb_committer_destroy (&c);
    s_close (&store);
}

Test (committer, a_batch_that_outgrows_the_map_runs_again)
{
    sb_store_t *store = s_open (64 * 1024);
    sb_committer_t *c = sb_committer_new (store);
    batch_t *b = s_batch (1, 2000, 300);
    sb_committer_start (c, s_batch_fn, b);
    cr_assert_eq (sb_committer_finish (c), 0);
    cr_assert (b->runs > 1, "the map never filled (runs %d)", b->runs);
    cr_assert (s_tape_is (store, 2000));
    free (b);
    sb_committer_destroy (&c);
    s_close (&store);
}

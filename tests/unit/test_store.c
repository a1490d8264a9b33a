/*  tests/unit/test_store.c — the store, against real LMDB in a mkdtemp
    folder, or, when SB_TEST_STORE_URL names a database, against PostgreSQL
    (tests/common/store_pg.h): every test that is not about LMDB itself
    runs on both, and the LMDB-only ones (map growth, disk full, reader
    slots, LMDB's tools and files) skip under PostgreSQL, saying why.
    tests/integration/test_store_postgres.py runs this binary so.

    Disk-full is made real enough to test by interposing pwrite and writev:
    liblmdb is a shared library, so its calls resolve to the definitions in
    this executable, which fail with ENOSPC on the environment's data file
    while `g_fail_fd` names it and pass everything else on to libc.
*/
#include "store/store.h"
#include "common/log.h"
#include "tests/common/store_pg.h"

#include <lmdb.h>          //  the tests open environments of their own, as a stranger would

#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

//  --------------------------------------------------------------------------
//  Fault injection

static atomic_int g_fail_fd = -1;
static atomic_int g_failed_writes = 0;

ssize_t
pwrite (int fd, const void *buf, size_t n, off_t off)
{
    static ssize_t (*real) (int, const void *, size_t, off_t);
    if (!real)
        real = (ssize_t (*) (int, const void *, size_t, off_t)) dlsym (RTLD_NEXT, "pwrite");
    if (fd >= 0 && fd == atomic_load (&g_fail_fd)) {
        atomic_fetch_add (&g_failed_writes, 1);
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
    if (fd >= 0 && fd == atomic_load (&g_fail_fd)) {
        atomic_fetch_add (&g_failed_writes, 1);
        errno = ENOSPC;
        return -1;
    }
    return real (fd, iov, iovcnt);
}

//  LMDB opens data.mdb twice: once for page writes, and once with O_DSYNC
//  for the meta page. Failing only the first one is what a full disk does
//  to a commit, without also marking the environment as broken.
static int
s_data_fd (const char *dir)
{
    char want [PATH_MAX], path [64], link [PATH_MAX];
    snprintf (want, sizeof want, "%s/data.mdb", dir);
    DIR *d = opendir ("/proc/self/fd");
    cr_assert_not_null (d);
    int found = -1;
    struct dirent *e;
    while ((e = readdir (d))) {
        int fd = atoi (e->d_name);
        if (e->d_name [0] == '.')
            continue;
        snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink (path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link [n] = 0;
        if (strcmp (link, want) == 0 && !(fcntl (fd, F_GETFL) & O_DSYNC))
            found = fd;
    }
    closedir (d);
    return found;
}

//  --------------------------------------------------------------------------
//  Fixture

static char g_dir [PATH_MAX];
static char g_err [256];
static bool g_pg;           //  SB_TEST_STORE_URL is set: the stores are on PostgreSQL

//  For the tests of what only LMDB has. A skipped test's fini does not
//  run: the folder setup made goes first.
static void teardown (void);
#define LMDB_ONLY(why) \
    do { if (g_pg) { teardown (); cr_skip_test ("LMDB only: %s", why); } } while (0)

enum { DBI_TAPE, DBI_SESS, DBI_COUNT };
static const char *const g_names [] = { "tape", "sessions", NULL };

static int
s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove (path);
}

static void
setup (void)
{
    const char *tmp = getenv ("TMPDIR");
    snprintf (g_dir, sizeof g_dir, "%s/sb_store_XXXXXX", tmp && *tmp? tmp: "/tmp");
    cr_assert_not_null (mkdtemp (g_dir));
    atomic_store (&g_fail_fd, -1);
    g_pg = sbt_pg_base () != NULL;
}

static void
teardown (void)
{
    nftw (g_dir, s_rm, 16, FTW_DEPTH | FTW_PHYS);
    if (g_pg)
        sbt_pg_drop ();
}

//  Where the store `sub` of this test lives: a folder, or a URL.
static void
s_where (char *dir, size_t size, const char *sub)
{
    if (g_pg)
        sbt_pg_where (dir, size, sub);
    else
        snprintf (dir, size, "%s/%s", g_dir, sub);
}

static sb_store_t *
s_open (const char *sub, unsigned version, size_t mapsize)
{
    char dir [PATH_MAX];
    s_where (dir, sizeof dir, sub);
    sb_store_t *store = sb_store_open (dir, g_names, version, mapsize, g_err, sizeof g_err);
    cr_assert_not_null (store, "open %s: %s", dir, g_err);
    return store;
}

static void
s_tape_key (sb_key_t *k, const char *session, uint64_t seq)
{
    sb_key_init (k, 'T');
    sb_key_str (k, session);
    sb_key_u64 (k, seq);
}

static void
s_prefix (sb_key_t *k, const char *session)
{
    sb_key_init (k, 'T');
    sb_key_str (k, session);
}

//  Puts one small entry in its own committed txn.
static void
s_put_one (sb_store_t *store, unsigned dbi, const sb_key_t *k, const char *val)
{
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    sb_txn_put (&txn, dbi, k->buf, k->len, val, strlen (val));
    cr_assert_eq (sb_txn_commit (&txn), 0, "%s", sb_store_strerror (txn.ret));
}

TestSuite (store, .init = setup, .fini = teardown);

//  --------------------------------------------------------------------------
//  Key builder

Test (store, key_builder_layout_and_order)
{
    sb_key_t k;
    s_tape_key (&k, "ab", 0x0102030405060708ull);
    const uint8_t want [] = { 'T', 'a', 'b', 0, 1, 2, 3, 4, 5, 6, 7, 8 };
    cr_assert_eq (k.len, sizeof want);
    cr_assert_arr_eq (k.buf, want, sizeof want);
    cr_assert (sb_key_valid (&k));

    sb_datum_t v = { k.len, k.buf };
    cr_assert_eq (sb_key_read_u64 (&v, 4), 0x0102030405060708ull);
    cr_assert_eq (sb_key_read_u64 (&v, 5), 0, "short read gives 0");

    sb_key_init (&k, 'X');
    sb_key_u32 (&k, 0xdeadbeef);
    v = (sb_datum_t) { k.len, k.buf };
    cr_assert_eq (sb_key_read_u32 (&v, 1), 0xdeadbeef);

    //  Byte order is numeric order across the byte boundaries.
    const uint64_t seqs [] = { 0, 1, 255, 256, 65535, 65536, 1ull << 32, UINT64_MAX };
    for (size_t i = 1; i < sizeof seqs / sizeof seqs [0]; i++) {
        sb_key_t a, b;
        s_tape_key (&a, "s", seqs [i - 1]);
        s_tape_key (&b, "s", seqs [i]);
        cr_assert_lt (memcmp (a.buf, b.buf, a.len), 0, "%llu < %llu",
                      (unsigned long long) seqs [i - 1], (unsigned long long) seqs [i]);
    }
    //  The terminator keeps "ab" from being a prefix of "abc".
    sb_key_t ab, abc;
    s_prefix (&ab, "ab");
    s_prefix (&abc, "abc");
    cr_assert_neq (memcmp (ab.buf, abc.buf, ab.len), 0);
}

Test (store, key_builder_overflow_is_sticky)
{
    sb_key_t k;
    uint8_t fill [SB_STORE_KEY_MAX];
    memset (fill, 'x', sizeof fill);

    //  Exactly the maximum fits.
    sb_key_init (&k, 'T');
    sb_key_bytes (&k, fill, SB_STORE_KEY_MAX - 1 - 8);
    sb_key_u64 (&k, 7);
    cr_assert (sb_key_valid (&k));
    cr_assert_eq (k.len, SB_STORE_KEY_MAX);

    //  One byte more does not, and nothing after it revives the key.
    sb_key_init (&k, 'T');
    sb_key_bytes (&k, fill, SB_STORE_KEY_MAX - 1 - 8);
    sb_key_u32 (&k, 1);
    cr_assert (sb_key_valid (&k));
    sb_key_u64 (&k, 7);
    cr_assert_not (sb_key_valid (&k));
    cr_assert_eq (k.len, 0);
    sb_key_u8 (&k, 1);
    sb_key_str (&k, "");
    cr_assert_not (sb_key_valid (&k));
    cr_assert_eq (k.len, 0);

    //  An embedded NUL would make two strings share a key.
    sb_key_init (&k, 'S');
    sb_key_strn (&k, "a\0b", 3);
    cr_assert_not (sb_key_valid (&k));

    //  Every txn operation refuses an invalid key, and the refusal sticks.
    sb_store_t *store = s_open ("kov", 1, 0);
    sb_key_init (&k, 'T');
    sb_key_bytes (&k, fill, sizeof fill);
    cr_assert_not (sb_key_valid (&k));
    sb_txn_t txn;
    sb_txn_begin (store, &txn, true);
    cr_assert_eq (sb_txn_put (&txn, DBI_TAPE, k.buf, k.len, "v", 1), SB_STORE_INVALID);
    cr_assert_eq (txn.ret, SB_STORE_INVALID);
    cr_assert_eq (sb_txn_commit (&txn), SB_STORE_INVALID);

    sb_txn_begin (store, &txn, false);
    sb_txn_iter_t it;
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, k.buf, k.len, NULL, 0),
                  SB_STORE_INVALID, "an invalid prefix must not match everything");
    cr_assert_not (sb_txn_iter_next (&it, NULL, NULL));
    sb_txn_abort (&txn);
    sb_store_destroy (&store);
    cr_assert_null (store);
}

//  --------------------------------------------------------------------------
//  Transactions

Test (store, sticky_error_discards_the_whole_txn)
{
    sb_store_t *store = s_open ("sticky", 1, 0);
    sb_key_t a, b, big;
    s_tape_key (&a, "s", 1);
    s_tape_key (&b, "s", 2);
    uint8_t fill [SB_STORE_KEY_MAX + 1];
    memset (fill, 'x', sizeof fill);

    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    cr_assert_eq (sb_txn_put (&txn, DBI_TAPE, a.buf, a.len, "A", 1), 0);
    //  A key one byte over LMDB's limit fails the txn...
    cr_assert_eq (sb_txn_put (&txn, DBI_TAPE, fill, sizeof fill, "X", 1), SB_STORE_INVALID);
    //  ...and every later operation is a no-op that returns the same error.
    cr_assert_eq (sb_txn_put (&txn, DBI_TAPE, b.buf, b.len, "B", 1), SB_STORE_INVALID);
    sb_datum_t v = { 3, (void *) "junk" };
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, a.buf, a.len, &v), SB_STORE_INVALID);
    cr_assert_eq (v.size, 0, "out is zeroed on failure");
    cr_assert_eq (sb_txn_del (&txn, DBI_TAPE, a.buf, a.len), SB_STORE_INVALID);
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, "T", 1, NULL, NULL), SB_STORE_INVALID);
    cr_assert_eq (sb_txn_commit (&txn), SB_STORE_INVALID);
    cr_assert_eq (sb_txn_commit (&txn), SB_STORE_INVALID, "a second commit is harmless");
    sb_txn_abort (&txn);

    //  Nothing from that txn is visible: neither the write before the
    //  failure nor the one after.
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, a.buf, a.len, &v), SB_STORE_NOTFOUND);
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, b.buf, b.len, &v), SB_STORE_NOTFOUND);
    cr_assert_eq (sb_txn_commit (&txn), 0);

    //  An error of the backend sticks the same way: an append out of order.
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    cr_assert_eq (sb_txn_append (&txn, DBI_TAPE, b.buf, b.len, "B", 1), 0);
    cr_assert_eq (sb_txn_append (&txn, DBI_TAPE, a.buf, a.len, "A", 1), SB_STORE_ORDER);
    cr_assert_eq (sb_txn_commit (&txn), SB_STORE_ORDER);

    //  A bad dbi index is refused, not passed to LMDB.
    s_tape_key (&big, "s", 3);
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    cr_assert_eq (sb_txn_put (&txn, DBI_COUNT, big.buf, big.len, "C", 1), SB_STORE_INVALID);
    cr_assert_eq (sb_txn_commit (&txn), SB_STORE_INVALID);

    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, NULL, 0, NULL, NULL), SB_STORE_NOTFOUND,
                  "the tape is still empty");
    sb_txn_abort (&txn);

    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.commits, 0);
    cr_assert_eq (info.aborts, 3);
    sb_store_destroy (&store);
}

Test (store, take_first_deletes_the_least_key_of_the_prefix)
{
    sb_store_t *store = s_open ("take", 1, 0);
    //  queue "q": keys 3, 1, 2 put out of order; another session's key and
    //  one past the prefix are never taken
    for (uint64_t n = 3; n >= 1; n--) {
        sb_key_t k;
        s_tape_key (&k, "q", n);
        s_put_one (store, DBI_TAPE, &k, "x");
    }
    sb_key_t other, prefix;
    s_tape_key (&other, "r", 1);
    s_put_one (store, DBI_TAPE, &other, "x");
    s_prefix (&prefix, "q");

    sb_txn_t txn;
    uint8_t key [SB_STORE_KEY_MAX];
    size_t klen;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    cr_assert_eq (sb_txn_take_first (&txn, DBI_TAPE, prefix.buf, prefix.len, key, &klen), SB_STORE_INVALID,
                  "a read txn cannot take");
    sb_txn_abort (&txn);
    for (uint64_t n = 1; n <= 3; n++) {
        cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
        cr_assert_eq (sb_txn_take_first (&txn, DBI_TAPE, prefix.buf, prefix.len, key, &klen), 0,
                      "%s", sb_store_strerror (txn.ret));
        sb_key_t want;
        s_tape_key (&want, "q", n);
        cr_assert_eq (klen, want.len);
        cr_assert_eq (memcmp (key, want.buf, klen), 0, "the least key first (%llu)", (unsigned long long) n);
        cr_assert_eq (sb_txn_commit (&txn), 0);
    }
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    cr_assert_eq (sb_txn_take_first (&txn, DBI_TAPE, prefix.buf, prefix.len, key, &klen), SB_STORE_NOTFOUND);
    cr_assert_eq (txn.ret, 0, "not found is not sticky");
    sb_datum_t v;
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, other.buf, other.len, &v), 0, "another prefix's key stays");
    cr_assert_eq (sb_txn_commit (&txn), 0);
    sb_store_destroy (&store);
}

Test (store, notfound_and_exists_are_not_sticky)
{
    sb_store_t *store = s_open ("nf", 1, 0);
    sb_key_t a;
    s_tape_key (&a, "s", 1);
    s_put_one (store, DBI_TAPE, &a, "first");

    sb_key_t missing;
    s_tape_key (&missing, "s", 2);
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    sb_datum_t v;
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, missing.buf, missing.len, &v), SB_STORE_NOTFOUND);
    cr_assert_eq (sb_txn_del (&txn, DBI_TAPE, missing.buf, missing.len), SB_STORE_NOTFOUND);
    cr_assert_eq (sb_txn_insert (&txn, DBI_TAPE, a.buf, a.len, "second", 6), SB_STORE_EXISTS);
    cr_assert_eq (txn.ret, 0);
    cr_assert_eq (sb_txn_insert (&txn, DBI_TAPE, missing.buf, missing.len, "new", 3), 0);
    cr_assert_eq (sb_txn_commit (&txn), 0);

    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, a.buf, a.len, &v), 0);
    cr_assert_eq (v.size, 5, "first writer wins");
    cr_assert_eq (memcmp (v.data, "first", 5), 0);
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, missing.buf, missing.len, &v), 0);
    cr_assert_eq (sb_txn_commit (&txn), 0);

    //  Deleting works, and a read txn cannot write.
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    cr_assert_eq (sb_txn_del (&txn, DBI_TAPE, a.buf, a.len), 0);
    cr_assert_eq (sb_txn_commit (&txn), 0);
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, a.buf, a.len, &v), SB_STORE_NOTFOUND);
    cr_assert_lt (sb_txn_put (&txn, DBI_TAPE, a.buf, a.len, "x", 1), 0);
    cr_assert_eq (sb_txn_commit (&txn), -EACCES);
    sb_store_destroy (&store);
}

Test (store, one_write_txn_at_a_time)
{
    sb_store_t *store = s_open ("busy", 1, 0);
    sb_txn_t w1, w2, r;
    cr_assert_eq (sb_txn_begin (store, &w1, true), 0);
    //  A nested write begin would hang on LMDB's writer lock.
    cr_assert_eq (sb_txn_begin (store, &w2, true), SB_STORE_BUSY);
    cr_assert_eq (sb_txn_commit (&w2), SB_STORE_BUSY);
    //  A read txn alongside is fine (MDB_NOTLS).
    cr_assert_eq (sb_txn_begin (store, &r, false), 0);
    sb_key_t k;
    s_tape_key (&k, "s", 1);
    sb_txn_put (&w1, DBI_TAPE, k.buf, k.len, "v", 1);
    cr_assert_eq (sb_txn_commit (&w1), 0);
    sb_datum_t v;
    cr_assert_eq (sb_txn_get (&r, DBI_TAPE, k.buf, k.len, &v), SB_STORE_NOTFOUND,
                  "the older snapshot does not see the commit");
    sb_txn_abort (&r);
    cr_assert_eq (sb_txn_begin (store, &w2, true), 0, "the writer slot is free again");
    sb_txn_abort (&w2);
    sb_store_destroy (&store);
}

//  --------------------------------------------------------------------------
//  Prefix iteration and last-with-prefix

static const uint64_t g_seqs [] = {
    65536, 1, 256, 4294967296ull, 255, 65535, 2, 257, 0
};
#define NSEQS (sizeof g_seqs / sizeof g_seqs [0])

static int
s_u64cmp (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y? -1: x > y;
}

//  Session "a" among neighbours that share bytes with its prefix: "ab"
//  (a longer string), "" (a shorter one), and another table tag.
static void
s_fill_neighbours (sb_store_t *store)
{
    sb_key_t k;
    for (size_t i = 0; i < NSEQS; i++) {
        s_tape_key (&k, "a", g_seqs [i]);
        char val [32];
        snprintf (val, sizeof val, "a:%llu", (unsigned long long) g_seqs [i]);
        s_put_one (store, DBI_TAPE, &k, val);
    }
    s_tape_key (&k, "ab", 0);
    s_put_one (store, DBI_TAPE, &k, "ab:0");
    s_tape_key (&k, "", 9);
    s_put_one (store, DBI_TAPE, &k, ":9");
    sb_key_init (&k, 'U');
    sb_key_str (&k, "a");
    sb_key_u64 (&k, 3);
    s_put_one (store, DBI_TAPE, &k, "U");
    //  Same key in another dbi: iteration must stay in its own.
    s_tape_key (&k, "a", 3);
    s_put_one (store, DBI_SESS, &k, "other dbi");
}

Test (store, prefix_iteration_in_numeric_order)
{
    sb_store_t *store = s_open ("iter", 1, 0);
    s_fill_neighbours (store);

    uint64_t sorted [NSEQS];
    memcpy (sorted, g_seqs, sizeof sorted);
    qsort (sorted, NSEQS, sizeof sorted [0], s_u64cmp);

    sb_key_t prefix;
    s_prefix (&prefix, "a");
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    sb_txn_iter_t it;
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0), 0);
    sb_datum_t k, v;
    size_t n = 0;
    while (sb_txn_iter_next (&it, &k, &v)) {
        cr_assert_lt (n, NSEQS, "a key outside the prefix was yielded");
        cr_assert_eq (k.size, prefix.len + 8);
        cr_assert_eq (sb_key_read_u64 (&k, prefix.len), sorted [n]);
        char want [32];
        snprintf (want, sizeof want, "a:%llu", (unsigned long long) sorted [n]);
        cr_assert_eq (v.size, strlen (want));
        cr_assert_eq (memcmp (v.data, want, v.size), 0);
        n++;
    }
    cr_assert_eq (n, NSEQS);
    cr_assert_eq (txn.ret, 0);

    //  From a start key (session.events after_seq): seq >= 256.
    sb_key_t start;
    s_tape_key (&start, "a", 256);
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len,
                                     start.buf, start.len), 0);
    const uint64_t from256 [] = { 256, 257, 65535, 65536, 4294967296ull };
    n = 0;
    while (sb_txn_iter_next (&it, &k, NULL)) {
        cr_assert_lt (n, 5);
        cr_assert_eq (sb_key_read_u64 (&k, prefix.len), from256 [n]);
        n++;
    }
    cr_assert_eq (n, 5);

    //  A start key before the prefix starts at the prefix; one past the
    //  range yields nothing.
    sb_key_t early;
    sb_key_init (&early, 'A');
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len,
                                     early.buf, early.len), 0);
    cr_assert (sb_txn_iter_next (&it, &k, NULL));
    cr_assert_eq (sb_key_read_u64 (&k, prefix.len), 0);
    sb_txn_iter_end (&it);
    sb_txn_iter_end (&it);
    s_tape_key (&start, "a", UINT64_MAX);
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len,
                                     start.buf, start.len), 0);
    cr_assert_not (sb_txn_iter_next (&it, NULL, NULL));

    //  A prefix nothing has.
    sb_key_t none;
    s_prefix (&none, "zz");
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, none.buf, none.len, NULL, 0), 0);
    cr_assert_not (sb_txn_iter_next (&it, NULL, NULL));

    //  NULL prefix: the whole dbi, 9 + 3 entries.
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, NULL, 0, NULL, 0), 0);
    n = 0;
    while (sb_txn_iter_next (&it, NULL, NULL))
        n++;
    cr_assert_eq (n, NSEQS + 3);
    cr_assert_eq (sb_txn_commit (&txn), 0);
    sb_store_destroy (&store);
}

typedef struct {
    size_t seen;
    size_t stop_after;
    uint64_t last;
} each_ctx_t;

static int
s_each (const sb_datum_t *key, const sb_datum_t *val, void *arg)
{
    each_ctx_t *c = (each_ctx_t *) arg;
    c->last = sb_key_read_u64 (key, key->size - 8);
    return ++c->seen == c->stop_after? 42: 0;
}

Test (store, foreach_and_early_stop)
{
    sb_store_t *store = s_open ("each", 1, 0);
    s_fill_neighbours (store);
    sb_key_t prefix;
    s_prefix (&prefix, "a");
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    each_ctx_t c = { 0, 0, 0 };
    cr_assert_eq (sb_txn_foreach (&txn, DBI_TAPE, prefix.buf, prefix.len, NULL, 0, s_each, &c), 0);
    cr_assert_eq (c.seen, NSEQS);
    cr_assert_eq (c.last, 4294967296ull);

    c = (each_ctx_t) { 0, 4, 0 };
    cr_assert_eq (sb_txn_foreach (&txn, DBI_TAPE, prefix.buf, prefix.len, NULL, 0, s_each, &c), 42);
    cr_assert_eq (c.seen, 4);
    cr_assert_eq (c.last, 255);
    cr_assert_eq (sb_txn_commit (&txn), 0);

    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    if (!g_pg)
        cr_assert_eq (info.num_readers, 1, "the early stop left no cursor or reader behind");
    sb_store_destroy (&store);
}

Test (store, iter_del_removes_while_walking)
{
    sb_store_t *store = s_open ("idel", 1, 0);
    s_fill_neighbours (store);
    sb_key_t prefix;
    s_prefix (&prefix, "a");
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    sb_txn_iter_t it;
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0), 0);
    sb_datum_t k;
    size_t seen = 0;
    while (sb_txn_iter_next (&it, &k, NULL)) {
        seen++;
        if (sb_key_read_u64 (&k, prefix.len) % 2 == 0)
            cr_assert_eq (sb_txn_iter_del (&it), 0);
    }
    cr_assert_eq (seen, NSEQS, "deleting does not skip the next entry");
    cr_assert_eq (sb_txn_commit (&txn), 0);

    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    const uint64_t odd [] = { 1, 255, 257, 65535 };
    cr_assert_eq (sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0), 0);
    size_t n = 0;
    while (sb_txn_iter_next (&it, &k, NULL)) {
        cr_assert_lt (n, 4);
        cr_assert_eq (sb_key_read_u64 (&k, prefix.len), odd [n]);
        n++;
    }
    cr_assert_eq (n, 4);
    sb_key_t ab;
    s_tape_key (&ab, "ab", 0);
    sb_datum_t v;
    cr_assert_eq (sb_txn_get (&txn, DBI_TAPE, ab.buf, ab.len, &v), 0, "the neighbour survives");
    sb_txn_abort (&txn);
    sb_store_destroy (&store);
}

Test (store, last_with_prefix)
{
    sb_store_t *store = s_open ("last", 1, 0);
    sb_key_t prefix;
    s_prefix (&prefix, "a");
    sb_txn_t txn;
    sb_datum_t k, v;

    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, prefix.buf, prefix.len, &k, &v), SB_STORE_NOTFOUND);
    cr_assert_eq (txn.ret, 0, "not found is not sticky");
    sb_txn_abort (&txn);

    s_fill_neighbours (store);
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    //  A key after the range exists ("ab"): found by seeking the successor.
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, prefix.buf, prefix.len, &k, &v), 0);
    cr_assert_eq (sb_key_read_u64 (&k, prefix.len), 4294967296ull);
    cr_assert_eq (v.size, strlen ("a:4294967296"));

    //  Nothing after the range in this dbi's 'T' keys but 'U': still right.
    sb_key_t ab;
    s_prefix (&ab, "ab");
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, ab.buf, ab.len, &k, NULL), 0);
    cr_assert_eq (k.size, ab.len + 8);
    cr_assert_eq (sb_key_read_u64 (&k, ab.len), 0);

    //  The last key of the whole dbi (MDB_LAST path), via a bare tag.
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, "U", 1, &k, &v), 0);
    cr_assert_eq (memcmp (v.data, "U", 1), 0);
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, NULL, 0, &k, &v), 0);
    cr_assert_eq (memcmp (v.data, "U", 1), 0);

    //  A prefix between existing keys, and one after all of them.
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, "S", 1, &k, &v), SB_STORE_NOTFOUND);
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, "Z", 1, &k, &v), SB_STORE_NOTFOUND);
    sb_txn_abort (&txn);

    //  Prefixes ending in 0xff have no simple successor.
    sb_key_t k1;
    sb_key_init (&k1, (char) 0xff);
    sb_key_u8 (&k1, 0xff);
    sb_key_u64 (&k1, 5);
    s_put_one (store, DBI_TAPE, &k1, "ff5");
    sb_key_init (&k1, 'V');
    sb_key_u8 (&k1, 0xff);
    sb_key_u64 (&k1, 6);
    s_put_one (store, DBI_TAPE, &k1, "V6");
    sb_key_init (&k1, 'W');
    s_put_one (store, DBI_TAPE, &k1, "W");
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    const uint8_t ffff [] = { 0xff, 0xff };
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, ffff, 2, &k, &v), 0);
    cr_assert_eq (sb_key_read_u64 (&k, 2), 5);
    const uint8_t vff [] = { 'V', 0xff };
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, vff, 2, &k, &v), 0);
    cr_assert_eq (sb_key_read_u64 (&k, 2), 6);
    cr_assert_eq (sb_txn_commit (&txn), 0);
    sb_store_destroy (&store);
}

//  --------------------------------------------------------------------------
//  Map growth and disk full

#define GROW_VAL    1000
#define GROW_BATCH  1000
#define GROW_TOTAL  100000      //  100 MB of values

typedef struct {
    uint64_t next;              //  first seq of this batch; advanced only after commit
    unsigned calls;
    bool use_append;
} grow_ctx_t;

static void
s_value (uint8_t *buf, uint64_t seq)
{
    memset (buf, (int) (seq % 251), GROW_VAL);
    memcpy (buf, &seq, sizeof seq);
}

static int
s_grow_fn (sb_txn_t *txn, void *arg)
{
    grow_ctx_t *c = (grow_ctx_t *) arg;
    c->calls++;
    uint8_t val [GROW_VAL];
    for (uint64_t seq = c->next; seq < c->next + GROW_BATCH; seq++) {
        sb_key_t k;
        s_tape_key (&k, "01HZZZZZZZZZZZZZZZZZZZZZZZ", seq);
        s_value (val, seq);
        if (c->use_append)
            sb_txn_append (txn, DBI_TAPE, k.buf, k.len, val, sizeof val);
        else
            sb_txn_put (txn, DBI_TAPE, k.buf, k.len, val, sizeof val);
    }
    return 0;
}

Test (store, map_grows_from_64k_through_100mb, .timeout = 120)
{
    LMDB_ONLY ("the map and its growth");
    sb_store_t *store = s_open ("grow", 1, 64 * 1024);
    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.mapsize, 64 * 1024);

    grow_ctx_t c = { 0, 0, false };
    while (c.next < GROW_TOTAL) {
        c.use_append = (c.next / GROW_BATCH) % 2;
        int rc = sb_store_write (store, s_grow_fn, &c);
        cr_assert_eq (rc, 0, "batch at %llu: %s", (unsigned long long) c.next,
                      sb_store_strerror (rc));
        c.next += GROW_BATCH;
    }
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_geq (info.map_grows, 10, "64 KiB to >100 MB is at least 11 doublings");
    cr_assert_gt (c.calls, GROW_TOTAL / GROW_BATCH, "full maps made fn run again");
    cr_assert_geq (info.mapsize, (size_t) GROW_TOTAL * GROW_VAL);
    cr_assert_eq (info.entries [DBI_TAPE], GROW_TOTAL, "re-runs wrote nothing twice");
    cr_assert_eq (info.commits, GROW_TOTAL / GROW_BATCH);

    //  All readable, in order, with the right bytes.
    sb_key_t prefix;
    s_prefix (&prefix, "01HZZZZZZZZZZZZZZZZZZZZZZZ");
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    sb_txn_iter_t it;
    sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0);
    sb_datum_t k, v;
    uint64_t want = 0;
    uint8_t val [GROW_VAL];
    while (sb_txn_iter_next (&it, &k, &v)) {
        cr_assert_eq (sb_key_read_u64 (&k, prefix.len), want);
        s_value (val, want);
        cr_assert_eq (v.size, GROW_VAL);
        cr_assert_eq (memcmp (v.data, val, GROW_VAL), 0, "value %llu", (unsigned long long) want);
        want++;
    }
    cr_assert_eq (want, GROW_TOTAL);
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, prefix.buf, prefix.len, &k, NULL), 0);
    cr_assert_eq (sb_key_read_u64 (&k, prefix.len), GROW_TOTAL - 1);
    cr_assert_eq (sb_txn_commit (&txn), 0);
    sb_store_destroy (&store);

    //  Reopened with the same tiny initial size, the map covers the data.
    store = s_open ("grow", 1, 64 * 1024);
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_geq (info.mapsize, info.used_bytes);
    cr_assert_eq (info.entries [DBI_TAPE], GROW_TOTAL);
    c.next = GROW_TOTAL;
    cr_assert_eq (sb_store_write (store, s_grow_fn, &c), 0);
    sb_store_destroy (&store);
}

static int
s_big_fn (sb_txn_t *txn, void *arg)
{
    unsigned *calls = (unsigned *) arg;
    (*calls)++;
    static uint8_t big [1 << 20];
    sb_key_t k;
    sb_key_init (&k, 'B');
    sb_key_u64 (&k, *calls);
    sb_txn_put (txn, DBI_TAPE, k.buf, k.len, big, sizeof big);
    return 0;
}

Test (store, growth_refused_while_a_reader_is_open)
{
    LMDB_ONLY ("the map and its growth");
    sb_store_t *store = s_open ("reader", 1, 64 * 1024);
    sb_txn_t r;
    cr_assert_eq (sb_txn_begin (store, &r, false), 0);
    unsigned calls = 0;
    //  The reader pins the map: no grow, and no endless retry either.
    cr_assert_eq (sb_store_write (store, s_big_fn, &calls), SB_STORE_MAP_FULL);
    cr_assert_eq (calls, 1);
    sb_txn_abort (&r);
    cr_assert_eq (sb_store_write (store, s_big_fn, &calls), 0);
    cr_assert_gt (calls, 2);
    sb_store_destroy (&store);
}

typedef struct {
    unsigned calls;
    int rc;
} disk_ctx_t;

static int
s_disk_fn (sb_txn_t *txn, void *arg)
{
    disk_ctx_t *c = (disk_ctx_t *) arg;
    c->calls++;
    for (uint64_t seq = 0; seq < 200; seq++) {
        sb_key_t k;
        s_tape_key (&k, "disk", seq);
        sb_txn_put (txn, DBI_TAPE, k.buf, k.len, "0123456789abcdef", 16);
    }
    return c->rc;
}

Test (store, disk_full_is_reported_not_retried)
{
    LMDB_ONLY ("a full disk is faked on LMDB's data file");
    sb_store_t *store = s_open ("disk", 1, 0);
    char dir [PATH_MAX];
    snprintf (dir, sizeof dir, "%s/disk", g_dir);
    int fd = s_data_fd (dir);
    cr_assert_geq (fd, 0, "found the data file's descriptor");

    atomic_store (&g_fail_fd, fd);
    disk_ctx_t c = { 0, 0 };
    int rc = sb_store_write (store, s_disk_fn, &c);
    atomic_store (&g_fail_fd, -1);
    cr_assert_eq (rc, SB_STORE_DISK_FULL, "got %d: %s", rc, sb_store_strerror (rc));
    cr_assert_eq (c.calls, 1, "a full disk is not a full map");
    cr_assert_gt (atomic_load (&g_failed_writes), 0, "the failure came from a real write");

    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.entries [DBI_TAPE], 0, "the failed commit left nothing");
    cr_assert_eq (info.disk_full, 1);

    //  Space is back: the same writes now commit.
    cr_assert_eq (sb_store_write (store, s_disk_fn, &c), 0);
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.entries [DBI_TAPE], 200);

    //  fn's own failure aborts and comes back as is.
    c.rc = 7;
    cr_assert_eq (sb_store_write (store, s_disk_fn, &c), 7);
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.commits, 1);
    sb_store_destroy (&store);
}

//  --------------------------------------------------------------------------
//  Open, version, reopen, tools

Test (store, schema_version_mismatch_fails_clearly)
{
    sb_store_t *store = s_open ("session", 7, 0);
    sb_store_destroy (&store);

    char dir [PATH_MAX];
    s_where (dir, sizeof dir, "session");
    store = sb_store_open (dir, g_names, 1, 0, g_err, sizeof g_err);
    cr_assert_null (store);
    //  A URL is named without its credentials.
    char where [PATH_MAX];
    if (g_pg)
        sb_log_redact_url (dir, where, sizeof where);
    else
        snprintf (where, sizeof where, "%s", dir);
    char want [PATH_MAX + 128];
    snprintf (want, sizeof want,
              "%s: schema version 7 is unknown to this build (expects 1)", where);
    cr_assert_str_eq (g_err, want);

    //  The refusal changed nothing: version 7 still opens.
    store = s_open ("session", 7, 0);
    sb_store_destroy (&store);
}

Test (store, foreign_environment_is_refused)
{
    LMDB_ONLY ("LMDB files made by another program (test_store_pg: a foreign schema)");
    //  An LMDB environment that someone else made: a named db, no version.
    char dir [PATH_MAX];
    snprintf (dir, sizeof dir, "%s/foreign", g_dir);
    cr_assert_eq (mkdir (dir, 0700), 0);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    cr_assert_eq (mdb_env_create (&env), 0);
    mdb_env_set_maxdbs (env, 4);
    cr_assert_eq (mdb_env_open (env, dir, 0, 0600), 0);
    cr_assert_eq (mdb_txn_begin (env, NULL, 0, &txn), 0);
    cr_assert_eq (mdb_dbi_open (txn, "theirs", MDB_CREATE, &dbi), 0);
    cr_assert_eq (mdb_txn_commit (txn), 0);
    mdb_env_close (env);

    cr_assert_null (sb_store_open (dir, g_names, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "has no schema version"), "%s", g_err);

    //  A file that is not LMDB at all.
    snprintf (dir, sizeof dir, "%s/garbage", g_dir);
    cr_assert_eq (mkdir (dir, 0700), 0);
    char path [PATH_MAX + 16];
    snprintf (path, sizeof path, "%s/data.mdb", dir);
    FILE *f = fopen (path, "w");
    cr_assert_not_null (f);
    for (int i = 0; i < 4096; i++)
        fputs ("not lmdb", f);
    fclose (f);
    cr_assert_null (sb_store_open (dir, g_names, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "cannot open LMDB environment"), "%s", g_err);
}

Test (store, bad_arguments_are_refused_before_anything_is_made)
{
    char dir [PATH_MAX];
    s_where (dir, sizeof dir, "args");
    const char *const dup [] = { "a", "b", "a", NULL };
    const char *const meta [] = { "meta", NULL };
    const char *const empty [] = { "", NULL };
    cr_assert_null (sb_store_open (dir, dup, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "given twice"), "%s", g_err);
    cr_assert_null (sb_store_open (dir, meta, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "reserved"), "%s", g_err);
    cr_assert_null (sb_store_open (dir, empty, 1, 0, g_err, sizeof g_err));
    cr_assert_null (sb_store_open (dir, NULL, 1, 0, g_err, sizeof g_err));
    cr_assert_null (sb_store_open (NULL, g_names, 1, 0, NULL, 0), "err may be NULL");
    sb_store_destroy (NULL);
    sb_store_t *none = NULL;
    sb_store_destroy (&none);
    if (g_pg)
        return;         //  the rest is about folders

    struct stat st;
    cr_assert_neq (stat (dir, &st), 0, "no folder was made for a refused open");

    //  A folder that cannot be made.
    snprintf (dir, sizeof dir, "%s/file", g_dir);
    FILE *f = fopen (dir, "w");
    fclose (f);
    char sub [PATH_MAX + 8];
    snprintf (sub, sizeof sub, "%s/x", dir);
    cr_assert_null (sb_store_open (sub, g_names, 1, 0, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "cannot create folder"), "%s", g_err);
}

Test (store, open_makes_nested_private_folders)
{
    LMDB_ONLY ("folders and their modes");
    sb_store_t *store = s_open ("a/b/c", 1, 0);
    cr_assert_str_eq (sb_store_dbi_name (store, DBI_SESS), "sessions");
    cr_assert_null (sb_store_dbi_name (store, DBI_COUNT));
    char dir [PATH_MAX];
    struct stat st;
    const char *subs [] = { "a", "a/b", "a/b/c" };
    for (int i = 0; i < 3; i++) {
        snprintf (dir, sizeof dir, "%s/%s", g_dir, subs [i]);
        cr_assert_eq (stat (dir, &st), 0);
        cr_assert_eq (st.st_mode & 0777, 0700, "%s is %o", subs [i], st.st_mode & 0777);
    }
    cr_assert_str_eq (sb_store_dir (store), dir);
    sb_store_destroy (&store);
}

Test (store, reopen_keeps_data)
{
    sb_store_t *store = s_open ("reopen", 3, 0);
    sb_key_t k;
    for (uint64_t seq = 1; seq <= 50; seq++) {
        s_tape_key (&k, "s", seq);
        s_put_one (store, DBI_TAPE, &k, "entry");
    }
    sb_key_init (&k, 'S');
    sb_key_str (&k, "s");
    s_put_one (store, DBI_SESS, &k, "config");
    sb_store_destroy (&store);

    store = s_open ("reopen", 3, 0);
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    sb_datum_t v;
    cr_assert_eq (sb_txn_get (&txn, DBI_SESS, k.buf, k.len, &v), 0);
    cr_assert_eq (v.size, 6);
    cr_assert_eq (memcmp (v.data, "config", 6), 0);
    sb_key_t prefix;
    s_prefix (&prefix, "s");
    sb_datum_t last;
    cr_assert_eq (sb_txn_last (&txn, DBI_TAPE, prefix.buf, prefix.len, &last, NULL), 0);
    cr_assert_eq (sb_key_read_u64 (&last, prefix.len), 50);
    sb_txn_abort (&txn);

    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.ndbi, 2);
    cr_assert_eq (info.entries [DBI_TAPE], 50);
    cr_assert_eq (info.entries [DBI_SESS], 1);
    cr_assert_eq (info.commits, 0, "counters are per open");
    sb_store_destroy (&store);
}

//  In a child: opens the store, and either dies inside a read txn, or holds
//  the environment open until `hold` reaches end of file.
static void
s_child (const char *sub, int ready, int hold)
{
    char dir [PATH_MAX];
    snprintf (dir, sizeof dir, "%s/%s", g_dir, sub);
    sb_store_t *store = sb_store_open (dir, g_names, 1, 0, NULL, 0);
    if (!store)
        _exit (1);
    if (hold < 0) {
        sb_txn_t txn;
        _exit (sb_txn_begin (store, &txn, false) == 0? 0: 1);
    }
    char c = 'r';
    if (write (ready, &c, 1) != 1)
        _exit (1);
    while (read (hold, &c, 1) > 0)
        ;
    sb_store_destroy (&store);
    _exit (0);
}

Test (store, stale_reader_is_cleared_at_open)
{
    LMDB_ONLY ("LMDB's reader slots");
    //  LMDB resets the reader table when the first process opens an
    //  environment, so a stale slot only exists while someone else still
    //  has it open: a holder process keeps it open while another process
    //  dies inside a read txn. The write-ahead log admits one opener only
    //  (store/wal.c), so these processes share the environment without
    //  it; test_wal has the refusal of a second opener.
    setenv ("SWITCHBOARD_WAL", "off", 1);
    int ready [2], hold [2];
    cr_assert_eq (pipe (ready), 0);
    cr_assert_eq (pipe (hold), 0);
    pid_t holder = fork ();
    cr_assert_geq (holder, 0);
    if (holder == 0) {
        close (hold [1]);
        s_child ("stale", ready [1], hold [0]);
    }
    close (hold [0]);
    char c;
    cr_assert_eq (read (ready [0], &c, 1), 1, "holder opened the store");

    pid_t dier = fork ();
    cr_assert_geq (dier, 0);
    if (dier == 0)
        s_child ("stale", -1, -1);
    int status;
    cr_assert_eq (waitpid (dier, &status, 0), dier);
    cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);

    sb_store_t *store = s_open ("stale", 1, 0);
    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.stale_readers, 1);
    sb_store_destroy (&store);

    close (hold [1]);
    cr_assert_eq (waitpid (holder, &status, 0), holder);
    cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

//  Runs a command and returns its exit status, its output in `out`.
static int
s_run (const char *cmd, char *out, size_t outlen)
{
    FILE *p = popen (cmd, "r");
    cr_assert_not_null (p);
    size_t n = fread (out, 1, outlen - 1, p);
    out [n] = 0;
    int status = pclose (p);
    return WIFEXITED (status)? WEXITSTATUS (status): -1;
}

Test (store, lmdb_utils_can_read_the_environment)
{
    LMDB_ONLY ("mdb_stat and mdb_dump");
    cr_assert_eq (access ("/usr/bin/mdb_stat", X_OK), 0, "lmdb-utils is installed");
    sb_store_t *store = s_open ("tools", 1, 0);
    sb_key_t k;
    for (uint64_t seq = 0; seq < 25; seq++) {
        s_tape_key (&k, "s", seq);
        s_put_one (store, DBI_TAPE, &k, "entry");
    }
    char cmd [PATH_MAX + 64], out [8192];
    //  While the store is open, as an operator would run it.
    snprintf (cmd, sizeof cmd, "/usr/bin/mdb_stat -a '%s/tools' 2>&1", g_dir);
    cr_assert_eq (s_run (cmd, out, sizeof out), 0, "%s", out);
    cr_assert (strstr (out, "Status of tape"), "%s", out);
    cr_assert (strstr (out, "Status of sessions"), "%s", out);
    cr_assert (strstr (out, "Status of meta"), "%s", out);
    cr_assert (strstr (out, "Entries: 25"), "%s", out);
    sb_store_destroy (&store);

    //  The schema version is visible to mdb_dump: "schema_version" -> 00000001.
    snprintf (cmd, sizeof cmd, "/usr/bin/mdb_dump -s meta '%s/tools' 2>&1", g_dir);
    cr_assert_eq (s_run (cmd, out, sizeof out), 0, "%s", out);
    cr_assert (strstr (out, "736368656d615f76657273696f6e"), "%s", out);
    cr_assert (strstr (out, " 00000001"), "%s", out);
}

Test (store, strerror_covers_every_kind)
{
    cr_assert_str_eq (sb_store_strerror (SB_STORE_DISK_FULL), "disk full");
    cr_assert_str_eq (sb_store_strerror (SB_STORE_NOTFOUND), "not found");
    cr_assert (strstr (sb_store_strerror (SB_STORE_MAP_FULL), "map"));
    cr_assert (strstr (sb_store_strerror (SB_STORE_ORDER), "append"));
    cr_assert (strstr (sb_store_strerror (SB_STORE_BACKEND), "backend failed"));
    cr_assert_str_eq (sb_store_strerror (-EACCES), strerror (EACCES));
    cr_assert_str_eq (sb_store_strerror (-99999), "unknown store error");
}

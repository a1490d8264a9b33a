/*  tests/unit/test_wal.c — the store's write-ahead log (store/wal.c,
    store/lmdb_wal.c): records, the file, and the store's recovery from a
    process that died at each point of a commit or a checkpoint, with real
    files in a temporary folder.

    A crash is a child process that opens the store with
    SWITCHBOARD_TEST_WAL_CRASH set and _exits at that point (status 86).
    A power loss is simulated after such a crash by what it may leave of
    LMDB's unsynced writes: its two meta pages torn and every page written
    after the last checkpoint garbage. */
#include "store/wal.h"
#include "store/store.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir [PATH_MAX];
static char g_err [256];
static const char *const g_names [] = { "tape", "other", NULL };

static int
s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    return remove (path);
}

static void
setup (void)
{
    const char *tmp = getenv ("TMPDIR");
    snprintf (g_dir, sizeof g_dir, "%s/sb_wal_XXXXXX", tmp && *tmp? tmp: "/tmp");
    cr_assert_not_null (mkdtemp (g_dir));
    unsetenv ("SWITCHBOARD_WAL");
    unsetenv ("SWITCHBOARD_TEST_WAL_CRASH");
}

static void
teardown (void)
{
    nftw (g_dir, s_rm, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite (wal, .init = setup, .fini = teardown);

//  --------------------------------------------------------------------------
//  Records

typedef struct {
    int n;
    int op [8];
    unsigned dbi [8];
    char key [8][16];
    char val [8][16];
} seen_t;

static int
s_seen (void *ctx, int op, unsigned dbi, const void *key, size_t klen,
        const void *val, size_t vlen)
{
    seen_t *s = (seen_t *) ctx;
    cr_assert_lt (s->n, 8);
    s->op [s->n] = op;
    s->dbi [s->n] = dbi;
    snprintf (s->key [s->n], 16, "%.*s", (int) klen, (const char *) key);
    snprintf (s->val [s->n], 16, "%.*s", (int) vlen, (const char *) val);
    s->n++;
    return 0;
}

Test (wal, a_record_decodes_to_what_was_encoded)
{
    sb_wal_buf_t b = { 0 };
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_PUT, 0, "k1", 2, "one", 3), 0);
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_DEL, 1, "k2", 2, NULL, 0), 0);
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_PUT, 1, "k3", 2, "", 0), 0);
    uint8_t head [SB_WAL_HEAD];
    sb_wal_head_encode (head, 42, b.data, b.len);

    uint32_t len;
    uint64_t lsn;
    cr_assert_eq (sb_wal_head_decode (head, b.len, &len, &lsn), 0);
    cr_assert_eq (len, b.len);
    cr_assert_eq (lsn, 42);
    cr_assert (sb_wal_body_ok (head, b.data, b.len));
    seen_t s = { 0 };
    cr_assert_eq (sb_wal_body_walk (b.data, b.len, 2, s_seen, &s), 0);
    cr_assert_eq (s.n, 3);
    cr_assert (s.op [0] == SB_WAL_PUT && s.dbi [0] == 0 && !strcmp (s.key [0], "k1") && !strcmp (s.val [0], "one"));
    cr_assert (s.op [1] == SB_WAL_DEL && s.dbi [1] == 1 && !strcmp (s.key [1], "k2"));
    cr_assert (s.op [2] == SB_WAL_PUT && !strcmp (s.key [2], "k3") && !strcmp (s.val [2], ""));

    //  One flipped bit anywhere, LSN included, fails the checksum.
    for (size_t i = 0; i < b.len; i++) {
        b.data [i] ^= 4;
        cr_assert_not (sb_wal_body_ok (head, b.data, b.len), "flip at %zu passed", i);
        b.data [i] ^= 4;
    }
    head [9] ^= 1;
    cr_assert_not (sb_wal_body_ok (head, b.data, b.len));
    sb_wal_buf_free (&b);
}

Test (wal, a_head_is_checked_before_its_body_is_read)
{
    uint8_t head [SB_WAL_HEAD] = { 0 };
    uint32_t len;
    uint64_t lsn;
    cr_assert_eq (sb_wal_head_decode (head, 1000, &len, &lsn), -1, "a zero length ends the log");
    head [0] = 100;
    cr_assert_eq (sb_wal_head_decode (head, 99, &len, &lsn), -1, "longer than what follows");
    cr_assert_eq (sb_wal_head_decode (head, 100, &len, &lsn), 0);
    memset (head, 0xff, 4);
    cr_assert_eq (sb_wal_head_decode (head, SIZE_MAX, &len, &lsn), -1, "over the cap");
}

Test (wal, a_malformed_body_applies_nothing)
{
    sb_wal_buf_t b = { 0 };
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_PUT, 0, "ok", 2, "v", 1), 0);
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_PUT, 1, "k", 1, "v", 1), 0);
    seen_t s = { 0 };
    //  The second op names dbi 1, which a store of one dbi lacks.
    cr_assert_eq (sb_wal_body_walk (b.data, b.len, 1, s_seen, &s), SB_STORE_INVALID);
    cr_assert_eq (s.n, 0, "the first op was applied before the second was checked");
    //  Cut short, an unknown op, a key of 0 bytes.
    cr_assert_eq (sb_wal_body_walk (b.data, b.len - 1, 2, s_seen, &s), SB_STORE_INVALID);
    b.data [0] = 9;
    cr_assert_eq (sb_wal_body_walk (b.data, b.len, 2, s_seen, &s), SB_STORE_INVALID);
    b.data [0] = SB_WAL_PUT;
    b.data [2] = 0;
    cr_assert_eq (sb_wal_body_walk (b.data, b.len, 2, s_seen, &s), SB_STORE_INVALID);
    cr_assert_eq (s.n, 0);
    //  And the builder refuses what the walk would.
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_PUT, 0, "k", 0, NULL, 0), SB_STORE_INVALID);
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_DEL, 0, "k", 1, "v", 1), SB_STORE_INVALID);
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_PUT, 256, "k", 1, NULL, 0), SB_STORE_INVALID);
    cr_assert_eq (sb_wal_buf_op (&b, SB_WAL_PUT, 0, "k", 1, "v", SB_WAL_RECORD_MAX), SB_STORE_TXN_FULL);
    sb_wal_buf_free (&b);
}

//  --------------------------------------------------------------------------
//  The file

static int
s_count (sb_wal_t *w, uint64_t *last)
{
    const uint8_t *body;
    uint32_t len;
    uint64_t lsn, expect = 0;
    int n = 0, rc;
    while ((rc = sb_wal_next (w, expect, &body, &len, &lsn)) == 1) {
        expect = lsn + 1;
        n++;
    }
    cr_assert_eq (rc, 0);
    *last = expect - 1;
    return n;
}

Test (wal, records_end_at_a_torn_tail_or_a_stale_lsn)
{
    sb_wal_t *w = sb_wal_open (g_dir, g_err, sizeof g_err);
    cr_assert_not_null (w, "%s", g_err);
    cr_assert_null (sb_wal_header (w), "a fresh log has no header");
    uint8_t meta [64] = { 7 };
    cr_assert_eq (sb_wal_set_header (w, 10, 32, 99, meta), 0);
    char body [100];
    memset (body, 'x', sizeof body);
    for (uint64_t lsn = 11; lsn <= 13; lsn++)
        cr_assert_eq (sb_wal_append (w, lsn, body, sizeof body), 0);
    cr_assert_eq (sb_wal_used (w), 3 * (SB_WAL_HEAD + sizeof body));
    sb_wal_close (&w);

    w = sb_wal_open (g_dir, g_err, sizeof g_err);
    cr_assert_not_null (w, "%s", g_err);
    const sb_wal_header_t *h = sb_wal_header (w);
    cr_assert_not_null (h);
    cr_assert (h->lsn == 10 && h->psize == 32 && h->names_crc == 99 && h->meta [0] == 7);
    uint64_t last;
    cr_assert_eq (s_count (w, &last), 3);
    cr_assert_eq (last, 13);
    sb_wal_close (&w);

    //  The last record torn: its last three bytes never reached the disk.
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/log.wal", g_dir);
    int fd = open (path, O_RDWR);
    cr_assert_geq (fd, 0);
    off_t end = SB_WAL_DATA + 3 * (SB_WAL_HEAD + sizeof body);
    cr_assert_eq (pwrite (fd, "\0\0\0", 3, end - 3), 3);
    close (fd);
    w = sb_wal_open (g_dir, g_err, sizeof g_err);
    cr_assert_eq (s_count (w, &last), 2);
    cr_assert_eq (last, 12);
    //  Appending goes on where the records end, and the records after a
    //  recycle start again: the older ones behind them are not the next.
    cr_assert_eq (sb_wal_append (w, 13, body, 10), 0);
    cr_assert_eq (sb_wal_set_header (w, 13, 32, 99, meta), 0);
    cr_assert_eq (sb_wal_recycle (w), 0);
    cr_assert_eq (sb_wal_append (w, 14, body, sizeof body), 0);
    sb_wal_close (&w);
    w = sb_wal_open (g_dir, g_err, sizeof g_err);
    cr_assert_eq (sb_wal_header (w)->lsn, 13);
    cr_assert_eq (s_count (w, &last), 1, "a stale record was taken for the next one");
    cr_assert_eq (last, 14);
    sb_wal_close (&w);
}

Test (wal, a_torn_header_leaves_the_other_slot)
{
    sb_wal_t *w = sb_wal_open (g_dir, g_err, sizeof g_err);
    uint8_t meta [64] = { 1 };
    cr_assert_eq (sb_wal_set_header (w, 5, 32, 1, meta), 0);     //  slot B (seq 1)
    meta [0] = 2;
    cr_assert_eq (sb_wal_set_header (w, 6, 32, 1, meta), 0);     //  slot A (seq 2)
    sb_wal_close (&w);
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/log.wal", g_dir);
    int fd = open (path, O_RDWR);
    cr_assert_eq (pwrite (fd, "garbage", 7, 70), 7);
    close (fd);
    w = sb_wal_open (g_dir, g_err, sizeof g_err);
    cr_assert_not_null (sb_wal_header (w));
    cr_assert_eq (sb_wal_header (w)->lsn, 5);
    cr_assert_eq (sb_wal_header (w)->meta [0], 1);
    sb_wal_close (&w);
}

Test (wal, a_second_opener_is_refused)
{
    sb_wal_t *w = sb_wal_open (g_dir, g_err, sizeof g_err);
    cr_assert_not_null (w);
    sb_wal_t *again = sb_wal_open (g_dir, g_err, sizeof g_err);
    cr_assert_null (again);
    cr_assert (strstr (g_err, "open in another process"), "%s", g_err);
    sb_wal_close (&w);
    sb_store_t *store = sb_store_open (g_dir, g_names, 1, 0, g_err, sizeof g_err);
    cr_assert_not_null (store, "%s", g_err);
    cr_assert_null (sb_store_open (g_dir, g_names, 1, 0, g_err, sizeof g_err));
    sb_store_destroy (&store);
}

//  --------------------------------------------------------------------------
//  The store's recovery

typedef struct {
    int i;
} put_t;

static int
s_put_fn (sb_txn_t *txn, void *arg)
{
    put_t *p = (put_t *) arg;
    char key [16], val [32];
    snprintf (key, sizeof key, "k%04d", p->i);
    snprintf (val, sizeof val, "value %d", p->i);
    sb_txn_put (txn, 0, key, strlen (key), val, strlen (val));
    //  And one delete per commit, of the key two commits back.
    if (p->i > 2) {
        snprintf (key, sizeof key, "d%04d", p->i - 2);
        sb_txn_del (txn, 1, key, strlen (key));
    }
    snprintf (key, sizeof key, "d%04d", p->i);
    sb_txn_put (txn, 1, key, strlen (key), "x", 1);
    return 0;
}

//  A child that opens the store with `crash` set and commits 1..n, one
//  per commit: its exit status (86: it crashed at the point).
static int
s_child (const char *crash, int n)
{
    pid_t pid = fork ();
    cr_assert_geq (pid, 0);
    if (pid == 0) {
        setenv ("SWITCHBOARD_TEST_WAL_CRASH", crash, 1);
        sb_store_t *store = sb_store_open (g_dir, g_names, 1, 0, NULL, 0);
        if (!store)
            _exit (1);
        for (int i = 1; i <= n; i++) {
            put_t p = { i };
            if (sb_store_write (store, s_put_fn, &p) != 0)
                _exit (2);
        }
        sb_store_destroy (&store);
        _exit (0);
    }
    int status;
    cr_assert_eq (waitpid (pid, &status, 0), pid);
    cr_assert (WIFEXITED (status));
    return WEXITSTATUS (status);
}

//  The store holds exactly commits 1..n: each key once, with its value,
//  and of the other dbi only the last two.
static void
s_holds (sb_store_t *store, int n)
{
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    sb_txn_iter_t it;
    sb_datum_t k, v;
    int seen = 0;
    sb_txn_iter_begin (&txn, &it, 0, NULL, 0, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v)) {
        seen++;
        char want [32];
        snprintf (want, sizeof want, "k%04d", seen);
        cr_assert (k.size == strlen (want) && !memcmp (k.data, want, k.size),
                   "entry %d is %.*s", seen, (int) k.size, (const char *) k.data);
        snprintf (want, sizeof want, "value %d", seen);
        cr_assert (v.size == strlen (want) && !memcmp (v.data, want, v.size));
    }
    cr_assert_eq (seen, n, "%d entries, not %d", seen, n);
    int others = 0;
    sb_txn_iter_begin (&txn, &it, 1, NULL, 0, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v))
        others++;
    cr_assert_eq (others, n < 2? n: 2);
    cr_assert_eq (sb_txn_commit (&txn), 0);
}

static sb_store_t *
s_open (void)
{
    sb_store_t *store = sb_store_open (g_dir, g_names, 1, 0, g_err, sizeof g_err);
    cr_assert_not_null (store, "%s", g_err);
    return store;
}

Test (wal, a_crash_after_the_flush_is_replayed)
{
    //  Commit 3's record is synced, LMDB never got it: the replay does.
    cr_assert_eq (s_child ("after_flush:3", 5), 86);
    sb_store_t *store = s_open ();
    s_holds (store, 3);
    put_t p = { 4 };
    cr_assert_eq (sb_store_write (store, s_put_fn, &p), 0);
    sb_store_destroy (&store);
    store = s_open ();
    s_holds (store, 4);
    sb_store_destroy (&store);
}

Test (wal, a_replay_cut_short_runs_again_to_the_same_state)
{
    cr_assert_eq (s_child ("after_apply:6", 8), 86);
    //  The next opener replays, and dies in its checkpoint (the first
    //  point it reaches): LMDB has the replay, unsynced, and the header is
    //  still the old one.
    cr_assert_eq (s_child ("in_checkpoint:1", 0), 86);
    cr_assert_eq (s_child ("in_checkpoint:1", 0), 86);
    sb_store_t *store = s_open ();
    s_holds (store, 6);
    sb_store_destroy (&store);
    //  And a crash after the header but before the records start again.
    cr_assert_eq (s_child ("in_truncate:1", 0), 86);
    store = s_open ();
    s_holds (store, 6);
    sb_store_destroy (&store);
}

Test (wal, checkpoints_under_way_lose_nothing)
{
    //  A checkpoint every 4 KiB of records: several during the run, and a
    //  crash inside the third and in the truncate of the fourth.
    setenv ("SWITCHBOARD_WAL_CHECKPOINT_KB", "4", 1);
    int status = s_child ("in_checkpoint:3", 400);
    cr_assert_eq (status, 86);
    sb_store_t *store = s_open ();
    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    int n = (int) info.entries [0];
    cr_assert_gt (n, 10, "the crash came after some checkpoints");
    s_holds (store, n);
    sb_store_destroy (&store);
    cr_assert_eq (s_child ("in_truncate:4", 400), 86);
    store = s_open ();
    s_holds (store, (int) (sb_store_info (store, &info), info.entries [0]));
    cr_assert_gt (info.entries [0], 10);
    sb_store_destroy (&store);
}

//  What a power loss may do to what LMDB wrote without a sync since the
//  log's last checkpoint: tear both meta pages and leave garbage in every
//  page past the checkpoint's last one.
static void
s_power_loss (void)
{
    sb_wal_t *w = sb_wal_open (g_dir, g_err, sizeof g_err);
    cr_assert_not_null (w, "%s", g_err);
    const sb_wal_header_t *h = sb_wal_header (w);
    cr_assert_not_null (h);
    cr_assert_gt (h->psize, 0);
    size_t psize = h->psize;
    //  MDB_meta after a 16-byte page header: mm_last_pg at 136, mm_txnid at 144.
    uint64_t last [2], txnid [2];
    for (int i = 0; i < 2; i++) {
        memcpy (&last [i], h->meta + i * psize + 136, 8);
        memcpy (&txnid [i], h->meta + i * psize + 144, 8);
    }
    uint64_t last_pg = txnid [1] > txnid [0]? last [1]: last [0];
    sb_wal_close (&w);

    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/data.mdb", g_dir);
    int fd = open (path, O_RDWR);
    cr_assert_geq (fd, 0);
    off_t size = lseek (fd, 0, SEEK_END);
    char *junk = malloc (psize);
    memset (junk, 0xa5, psize);
    cr_assert_eq (pwrite (fd, junk, psize, 0), (ssize_t) psize);
    cr_assert_eq (pwrite (fd, junk, psize, (off_t) psize), (ssize_t) psize);
    int garbled = 0;
    for (off_t off = (off_t) ((last_pg + 1) * psize); off + (off_t) psize <= size; off += (off_t) psize, garbled++)
        cr_assert_eq (pwrite (fd, junk, psize, off), (ssize_t) psize);
    free (junk);
    close (fd);
    cr_assert_gt (garbled, 0, "the commits after the checkpoint wrote new pages");
}

Test (wal, a_power_loss_after_acknowledged_commits_loses_none)
{
    cr_assert_eq (s_child ("after_apply:20", 30), 86);
    s_power_loss ();
    sb_store_t *store = s_open ();
    s_holds (store, 20);
    put_t p = { 21 };
    cr_assert_eq (sb_store_write (store, s_put_fn, &p), 0);
    sb_store_destroy (&store);
    store = s_open ();
    s_holds (store, 21);
    sb_store_destroy (&store);
}

Test (wal, a_torn_last_record_stops_the_replay_cleanly)
{
    cr_assert_eq (s_child ("after_apply:5", 10), 86);
    //  The fifth record's last bytes never reached the disk, and neither
    //  did LMDB's pages: commits 1..4 come back, and nothing of 5.
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/log.wal", g_dir);
    sb_wal_t *w = sb_wal_open (g_dir, g_err, sizeof g_err);
    const uint8_t *body;
    uint32_t len;
    uint64_t lsn, expect = 0;
    off_t end = SB_WAL_DATA;
    int n = 0;
    while (sb_wal_next (w, expect, &body, &len, &lsn) == 1) {
        expect = lsn + 1;
        end += SB_WAL_HEAD + len;
        n++;
    }
    sb_wal_close (&w);
    cr_assert_eq (n, 5);
    int fd = open (path, O_RDWR);
    cr_assert_eq (pwrite (fd, "\0\0\0\0", 4, end - 4), 4);
    close (fd);
    s_power_loss ();
    sb_store_t *store = s_open ();
    s_holds (store, 4);
    put_t p = { 5 };
    cr_assert_eq (sb_store_write (store, s_put_fn, &p), 0);
    sb_store_destroy (&store);
    store = s_open ();
    s_holds (store, 5);
    sb_store_destroy (&store);
}

Test (wal, off_replays_the_log_then_removes_it)
{
    cr_assert_eq (s_child ("after_flush:4", 5), 86);
    setenv ("SWITCHBOARD_WAL", "off", 1);
    sb_store_t *store = s_open ();
    s_holds (store, 4);
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/log.wal", g_dir);
    cr_assert_neq (access (path, F_OK), 0, "the log is still there");
    put_t p = { 5 };
    cr_assert_eq (sb_store_write (store, s_put_fn, &p), 0);
    sb_store_destroy (&store);
    unsetenv ("SWITCHBOARD_WAL");
    store = s_open ();
    s_holds (store, 5);
    sb_store_destroy (&store);
}

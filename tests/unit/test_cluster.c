/*  tests/unit/test_cluster.c — nodes, shard leases and fencing
    (cluster/cluster.h, sb_txn_guard in store/store.h), against a real
    PostgreSQL.

    The shard hash, the ranges, the argument checks and the guard on LMDB
    need no server and always run. The others need a database named by
    SB_TEST_STORE_URL (tests/common/store_pg.h) and skip without one;
    tests/integration/test_cluster_postgres.py starts a PostgreSQL and runs
    them. Leases are short here (LEASE_MS), so that lapses take about a
    second.
*/
#include "cluster/cluster.h"
#include "store/store.h"
#include "tests/common/store_pg.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEASE_MS    1000
#define BEAT_MS     200

static char g_err [512];

#define NEEDS_SERVER() \
    do { if (!sbt_pg_base ()) cr_skip_test ("SB_TEST_STORE_URL names no database"); } while (0)

static void
teardown (void)
{
    if (sbt_pg_base ())
        sbt_pg_drop ();
}

TestSuite (cluster, .fini = teardown);

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_sleep_ms (unsigned ms)
{
    usleep (ms * 1000u);
}

static sb_cluster_t *
s_node (const char *id)
{
    char url [1024];
    sbt_pg_where (url, sizeof url, "cluster");
    char bus [64], events [64];
    snprintf (bus, sizeof bus, "tcp://10.0.0.%zu:5555", strlen (id));
    snprintf (events, sizeof events, "tcp://10.0.0.%zu:5556", strlen (id));
    sb_cluster_config_t config = { .node_id = id, .bus_endpoint = bus, .event_endpoint = events,
                                   .curve_public = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
                                   .lease_ms = LEASE_MS, .heartbeat_ms = BEAT_MS };
    sb_cluster_t *c = sb_cluster_open (url, &config, g_err, sizeof g_err);
    cr_assert_not_null (c, "open %s: %s", id, g_err);
    return c;
}

//  One period of a node: beat, then balance.
static void
s_tick (sb_cluster_t *c)
{
    cr_assert_eq (sb_cluster_heartbeat (c, NULL), 0, "heartbeat of %s", sb_cluster_node_id (c));
    cr_assert_eq (sb_cluster_balance (c, NULL, NULL), 0, "balance of %s", sb_cluster_node_id (c));
}

//  Ticks every node until their shards are disjoint, cover all S and no
//  node holds more than ceil(S / n); returns the rounds it took.
static int
s_settle (sb_cluster_t **nodes, int n, int max_rounds)
{
    unsigned share = (SB_CLUSTER_SHARDS + (unsigned) n - 1) / (unsigned) n;
    for (int round = 1; round <= max_rounds; round++) {
        for (int i = 0; i < n; i++)
            s_tick (nodes [i]);
        uint64_t all = 0;
        bool ok = true;
        for (int i = 0; i < n; i++) {
            uint64_t h = sb_cluster_held (nodes [i]);
            ok = ok && !(all & h) && (unsigned) __builtin_popcountll (h) <= share;
            all |= h;
        }
        if (ok && all == ~0ull)
            return round;
    }
    return -1;
}

//  --------------------------------------------------------------------------
//  No server needed

Test (cluster, shard_of_is_a_stable_fnv1a_hash)
{
    //  Fixed values: a change of the hash would move every session.
    cr_assert_eq (sb_cluster_shard_of (""), 5);
    cr_assert_eq (sb_cluster_shard_of ("a"), 44);
    cr_assert_eq (sb_cluster_shard_of ("session-42"), 20);
    cr_assert_eq (sb_cluster_shard_of ("ses_01J9Z3K4Q5R6S7T8V9W0X1Y2Z3"), 0);
    //  and spread: 64,000 ids, no shard below half or above twice its share
    unsigned count [SB_CLUSTER_SHARDS] = { 0 };
    char id [32];
    for (int i = 0; i < 64000; i++) {
        snprintf (id, sizeof id, "ses_%08d", i);
        uint32_t s = sb_cluster_shard_of (id);
        cr_assert_lt (s, SB_CLUSTER_SHARDS);
        count [s]++;
    }
    for (int s = 0; s < SB_CLUSTER_SHARDS; s++)
        cr_assert (count [s] > 500 && count [s] < 2000, "shard %d has %u of 64000", s, count [s]);
}

Test (cluster, ranges_are_compact)
{
    char out [256];
    sb_cluster_ranges (0, out, sizeof out);
    cr_assert_str_eq (out, "-");
    sb_cluster_ranges (~0ull, out, sizeof out);
    cr_assert_str_eq (out, "0-63");
    sb_cluster_ranges (0x7ull | 1ull << 5 | 1ull << 40 | 1ull << 41, out, sizeof out);
    cr_assert_str_eq (out, "0-2,5,40-41");
}

Test (cluster, bad_ids_and_urls_are_refused_before_connecting)
{
    sb_cluster_config_t config = { .node_id = "bad id" };
    cr_assert_null (sb_cluster_open ("postgresql://127.0.0.1:1/x", &config, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "node id"), "%s", g_err);
    config.node_id = "n1";
    cr_assert_null (sb_cluster_open ("/var/lib/data", &config, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "postgres"), "%s", g_err);
    cr_assert_null (sb_cluster_open ("postgresql://127.0.0.1:1/x?schema=Bad", &config, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "schema must be"), "%s", g_err);
    config.lease_ms = 100;      //  below SB_CLUSTER_LEASE_MS_MIN
    cr_assert_null (sb_cluster_open ("postgresql://127.0.0.1:1/x", &config, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "out of range"), "%s", g_err);
    config.lease_ms = 0;
    cr_assert_null (sb_cluster_open ("postgresql://u:hunter2@127.0.0.1:1/x", &config, g_err, sizeof g_err));
    cr_assert (strstr (g_err, "cannot connect"), "%s", g_err);
    cr_assert_null (strstr (g_err, "hunter2"), "no password in the message: %s", g_err);
}

Test (cluster, the_cluster_schema_is_the_store_schema_and_cluster)
{
    char schema [64];
    cr_assert_eq (sb_cluster_url_schema ("postgresql://h/db", schema, sizeof schema), 0);
    cr_assert_str_eq (schema, "switchboard_cluster");
    cr_assert_eq (sb_cluster_url_schema ("postgres://h/db?sslmode=disable&schema=prod", schema, sizeof schema), 0);
    cr_assert_str_eq (schema, "prod_cluster");
    char url [128];
    snprintf (url, sizeof url, "postgresql://h/db?schema=%055d", 0);     //  55 + 8 = 63: fits
    cr_assert_eq (sb_cluster_url_schema (url, schema, sizeof schema), 0);
    cr_assert_eq (strlen (schema), 63);
    snprintf (url, sizeof url, "postgresql://h/db?schema=%056d", 0);
    cr_assert_eq (sb_cluster_url_schema (url, schema, sizeof schema), SB_STORE_INVALID);
    cr_assert_eq (sb_cluster_url_schema ("/var/lib/sb", schema, sizeof schema), SB_STORE_INVALID);
}

//  What a fenced write writes: one key, after the guard.
typedef struct {
    sb_guard_t guard;
    const char *value;
} write_ctx_t;

static const char *const g_names [] = { "tape", NULL };

static int
s_guarded_put (sb_txn_t *txn, void *arg)
{
    write_ctx_t *w = (write_ctx_t *) arg;
    sb_txn_guard (txn, &w->guard);
    sb_key_t k;
    sb_key_init (&k, 'T');
    sb_key_str (&k, "ses_fenced");
    return sb_txn_put (txn, 0, k.buf, k.len, w->value, strlen (w->value));
}

//  The test's store on PostgreSQL (its tape dbi: "tape").
static sb_store_t *
s_pg_store (void)
{
    char url [1024];
    sbt_pg_where (url, sizeof url, "store");
    sb_store_t *store = sb_store_open (url, g_names, 1, 0, g_err, sizeof g_err);
    cr_assert_not_null (store, "%s", g_err);
    return store;
}

static int
s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove (path);
}

Test (cluster, the_guard_is_a_no_op_on_lmdb)
{
    char dir [] = "/tmp/sbt_cluster_XXXXXX";
    cr_assert_not_null (mkdtemp (dir));
    sb_store_t *store = sb_store_open (dir, g_names, 1, 0, g_err, sizeof g_err);
    cr_assert_not_null (store, "%s", g_err);
    write_ctx_t w = { { .schema = "switchboard_cluster", .shard = 3, .owner = "n1", .epoch = 9 }, "v" };
    cr_assert_eq (sb_store_write (store, s_guarded_put, &w), 0);
    //  a bad guard is refused on either backend
    w.guard.schema = "Bad-Schema";
    cr_assert_eq (sb_store_write (store, s_guarded_put, &w), SB_STORE_INVALID);
    sb_store_destroy (&store);
    nftw (dir, s_rm, 16, FTW_DEPTH | FTW_PHYS);
}

//  --------------------------------------------------------------------------
//  Against PostgreSQL

Test (cluster, three_nodes_split_the_shards_fairly)
{
    NEEDS_SERVER ();
    sb_cluster_t *nodes [3] = { s_node ("n1"), s_node ("n2"), s_node ("n3") };
    //  n1 alone takes everything; the others join and it gives back
    int rounds = s_settle (nodes, 3, 20);
    cr_assert (rounds > 0, "the shards did not settle in 20 rounds");
    for (int i = 0; i < 3; i++) {
        unsigned held = (unsigned) __builtin_popcountll (sb_cluster_held (nodes [i]));
        cr_assert (held >= 20 && held <= 22, "node %d holds %u", i, held);
    }
    //  the database agrees, and every node's cache names the owners
    sb_cluster_info_t *list;
    size_t count;
    cr_assert_eq (sb_cluster_nodes_list (nodes [0], &list, &count), 0);
    cr_assert_eq (count, 3);
    for (size_t i = 0; i < count; i++) {
        cr_assert (list [i].alive, "%s not alive", list [i].node_id);
        cr_assert_eq (list [i].shards, sb_cluster_held (nodes [i]), "%s", list [i].node_id);
        cr_assert_lt (list [i].heartbeat_age_ms, LEASE_MS);
    }
    sb_cluster_nodes_free (&list);
    s_tick (nodes [0]);
    for (uint32_t s = 0; s < SB_CLUSTER_SHARDS; s++) {
        sb_cluster_owner_t o;
        cr_assert_eq (sb_cluster_owner_of (nodes [0], s, &o), 0, "shard %u", s);
        int i = o.node_id [1] - '1';
        cr_assert (i >= 0 && i < 3 && (sb_cluster_held (nodes [i]) >> s & 1), "shard %u: %s", s, o.node_id);
        cr_assert (strstr (o.bus_endpoint, "tcp://10.0.0.2:5555"), "%s", o.bus_endpoint);
        cr_assert_gt (o.epoch, 0);
    }
    for (int i = 0; i < 3; i++)
        sb_cluster_destroy (&nodes [i]);
}

Test (cluster, a_dead_nodes_shards_go_to_the_others_within_lease_and_a_beat)
{
    NEEDS_SERVER ();
    sb_cluster_t *nodes [3] = { s_node ("n1"), s_node ("n2"), s_node ("n3") };
    cr_assert (s_settle (nodes, 3, 20) > 0);
    //  n3 beats one last time, then stops (as a crashed node does)
    cr_assert_eq (sb_cluster_heartbeat (nodes [2], NULL), 0);
    int64_t t0 = s_now_ms ();
    uint64_t orphans = sb_cluster_held (nodes [2]);
    int64_t taken = -1;
    while (s_now_ms () - t0 < 3 * LEASE_MS) {
        s_sleep_ms (BEAT_MS);
        s_tick (nodes [0]);
        s_tick (nodes [1]);
        if ((sb_cluster_held (nodes [0]) | sb_cluster_held (nodes [1])) == ~0ull) {
            taken = s_now_ms () - t0;
            break;
        }
    }
    cr_assert_geq (taken, 0, "n3's shards were not taken within %d ms", 3 * LEASE_MS);
    //  not before the lease lapsed, and within the lease and one beat (a
    //  slack of 300 ms for a loaded machine's round trips)
    fprintf (stderr, "takeover of %d shards after %lld ms (lease %d ms, beat %d ms)\n",
             __builtin_popcountll (orphans), (long long) taken, LEASE_MS, BEAT_MS);
    cr_assert_geq (taken, LEASE_MS - BEAT_MS, "taken after %lld ms, before the lease lapsed", (long long) taken);
    cr_assert_leq (taken, LEASE_MS + BEAT_MS + 300, "taken after %lld ms", (long long) taken);
    cr_assert_eq (sb_cluster_held (nodes [0]) & sb_cluster_held (nodes [1]), 0);
    for (int i = 0; i < 3; i++)
        sb_cluster_destroy (&nodes [i]);
}

//  Reads the fenced key back: its value, or "" when absent.
static void
s_read_back (sb_store_t *store, char *out, size_t size)
{
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    sb_key_t k;
    sb_key_init (&k, 'T');
    sb_key_str (&k, "ses_fenced");
    sb_datum_t v;
    int rc = sb_txn_get (&txn, 0, k.buf, k.len, &v);
    snprintf (out, size, "%.*s", rc == 0? (int) v.size: 0, rc == 0? (const char *) v.data: "");
    sb_txn_commit (&txn);
}

Test (cluster, a_node_whose_lease_was_taken_is_fenced_and_takes_nothing_back)
{
    NEEDS_SERVER ();
    char got [64];
    sb_store_t *store = s_pg_store ();
    sb_cluster_t *a = s_node ("na");
    s_tick (a);
    uint32_t shard = sb_cluster_shard_of ("ses_fenced");
    write_ctx_t w = { .value = "from a" };
    cr_assert_eq (sb_cluster_guard (a, shard, &w.guard), 0);
    cr_assert_eq (sb_store_write (store, s_guarded_put, &w), 0);

    //  a stalls past its lease; b comes and takes every shard
    sb_cluster_t *b = s_node ("nb");
    s_sleep_ms (LEASE_MS + 100);
    s_tick (b);
    cr_assert_eq (sb_cluster_held (b), ~0ull);
    //  a has not noticed: its cache still gives the old guard, and the
    //  database refuses it in the write's own txn
    cr_assert_eq (sb_cluster_guard (a, shard, &w.guard), 0);
    w.value = "from a, stale";
    cr_assert_eq (sb_store_write (store, s_guarded_put, &w), SB_STORE_FENCED);
    s_read_back (store, got, sizeof got);
    cr_assert_str_eq (got, "from a", "the fenced write was committed");
    //  b writes at its new epoch
    write_ctx_t wb = { .value = "from b" };
    cr_assert_eq (sb_cluster_guard (b, shard, &wb.guard), 0);
    cr_assert_gt (wb.guard.epoch, w.guard.epoch);
    cr_assert_eq (sb_store_write (store, s_guarded_put, &wb), 0);

    //  a comes back: its beat reports every shard lost, and its balance
    //  takes none b holds
    uint64_t lost, gained;
    cr_assert_eq (sb_cluster_heartbeat (a, &lost), 0);
    cr_assert_eq (lost, ~0ull);
    cr_assert_eq (sb_cluster_held (a), 0);
    cr_assert_eq (sb_cluster_guard (a, shard, &w.guard), SB_STORE_FENCED);
    cr_assert_eq (sb_cluster_balance (a, &gained, NULL), 0);
    cr_assert_eq (gained, 0);
    //  later, b gives back above its share and a takes only those
    uint64_t released;
    cr_assert_eq (sb_cluster_heartbeat (b, NULL), 0);
    cr_assert_eq (sb_cluster_balance (b, NULL, &released), 0);
    cr_assert_eq (__builtin_popcountll (released), 32);
    s_tick (a);
    cr_assert_eq (sb_cluster_held (a), released);
    cr_assert_eq (sb_cluster_held (a) & sb_cluster_held (b), 0);
    s_read_back (store, got, sizeof got);
    cr_assert_str_eq (got, "from b");
    sb_cluster_destroy (&a);
    sb_cluster_destroy (&b);
    sb_store_destroy (&store);
}

//  The actors' fence (cluster/member.c): every shard a write touches must
//  be held; a NULL cluster (LMDB, no cluster) fences nothing.
typedef struct {
    sb_cluster_t *cluster;
    uint64_t shards;
    const char *value;
} fenced_ctx_t;

static int
s_fenced_put (sb_txn_t *txn, void *arg)
{
    fenced_ctx_t *f = (fenced_ctx_t *) arg;
    if (sb_cluster_fence (f->cluster, txn, f->shards) != 0)
        return txn->ret;
    sb_key_t k;
    sb_key_init (&k, 'T');
    sb_key_str (&k, "ses_fenced");
    return sb_txn_put (txn, 0, k.buf, k.len, f->value, strlen (f->value));
}

Test (cluster, the_member_holds_every_shard_alone_and_the_fence_checks_each_shard)
{
    NEEDS_SERVER ();
    char got [64];
    sb_store_t *store = s_pg_store ();
    //  no cluster: no fence
    fenced_ctx_t f = { .cluster = NULL, .shards = ~0ull, .value = "alone" };
    cr_assert_eq (sb_store_write (store, s_fenced_put, &f), 0);
    cr_assert (sb_cluster_holds (NULL, "ses_fenced"));
    //  a lone member holds every shard once start returns
    sb_cluster_t *a = s_node ("na");
    cr_assert_eq (sb_cluster_member_start (a, NULL, NULL), 0);
    cr_assert_eq (sb_cluster_held (a), ~0ull);
    cr_assert (sb_cluster_holds (a, "ses_fenced"));
    f = (fenced_ctx_t) { .cluster = a, .shards = ~0ull, .value = "every shard" };
    cr_assert_eq (sb_store_write (store, s_fenced_put, &f), 0);
    //  a second node: the member thread gives half away within a few beats
    sb_cluster_t *b = s_node ("nb");
    int64_t t0 = s_now_ms ();
    while (__builtin_popcountll (sb_cluster_held (b)) < 32 && s_now_ms () - t0 < 20 * BEAT_MS) {
        s_tick (b);
        s_sleep_ms (BEAT_MS / 4);
    }
    cr_assert_eq (__builtin_popcountll (sb_cluster_held (a)), 32, "a holds %d",
                  __builtin_popcountll (sb_cluster_held (a)));
    cr_assert_eq (sb_cluster_held (a) & sb_cluster_held (b), 0);
    //  a write touching one of b's shards is fenced, as a whole
    uint64_t mine = sb_cluster_held (a), theirs = sb_cluster_held (b);
    f = (fenced_ctx_t) { .cluster = a, .shards = mine | (theirs & -theirs), .value = "mixed" };
    cr_assert_eq (sb_store_write (store, s_fenced_put, &f), SB_STORE_FENCED);
    s_read_back (store, got, sizeof got);
    cr_assert_str_eq (got, "every shard", "the fenced write was committed");
    f = (fenced_ctx_t) { .cluster = a, .shards = mine, .value = "mine" };
    cr_assert_eq (sb_store_write (store, s_fenced_put, &f), 0);
    sb_cluster_stats_t st;
    sb_cluster_stats (a, &st);
    cr_assert (st.beats >= 2 && st.fenced >= 1 && st.lost == 32 && st.gained == 64,
               "beats %llu fenced %llu lost %llu gained %llu", (unsigned long long) st.beats,
               (unsigned long long) st.fenced, (unsigned long long) st.lost, (unsigned long long) st.gained);
    //  stop leaves: every lease goes at once, for b to take
    sb_cluster_member_stop (a);
    cr_assert_eq (sb_cluster_held (a), 0);
    s_tick (b);
    cr_assert_eq (sb_cluster_held (b), ~0ull);
    sb_cluster_destroy (&a);
    sb_cluster_destroy (&b);
    sb_store_destroy (&store);
}

//  The orders of a write and a takeover (docs/scale-out.md, "What the
//  epoch fences"). Case 3: the guard holds the lease row FOR SHARE; a
//  claim after the lease lapsed skips that row until the write ends.
Test (cluster, a_takeover_waits_for_a_write_that_holds_the_lease_row)
{
    NEEDS_SERVER ();
    char got [64];
    sb_store_t *store = s_pg_store ();
    sb_cluster_t *a = s_node ("na");
    s_tick (a);
    uint32_t shard = sb_cluster_shard_of ("ses_fenced");
    write_ctx_t w = { .value = "slow write" };
    cr_assert_eq (sb_cluster_guard (a, shard, &w.guard), 0);
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, true), 0);
    cr_assert_eq (s_guarded_put (&txn, &w), 0);
    //  the lease lapses with the write still open: b takes every other shard
    sb_cluster_t *b = s_node ("nb");
    s_sleep_ms (LEASE_MS + 100);
    s_tick (b);
    cr_assert_eq (sb_cluster_held (b), ~0ull & ~(1ull << shard));
    cr_assert_eq (sb_txn_commit (&txn), 0);
    s_read_back (store, got, sizeof got);
    cr_assert_str_eq (got, "slow write");
    //  the write ended: the next round takes the shard, at a new epoch
    s_tick (b);
    cr_assert_eq (sb_cluster_held (b), ~0ull);
    sb_guard_t g;
    cr_assert_eq (sb_cluster_guard (b, shard, &g), 0);
    cr_assert_gt (g.epoch, w.guard.epoch);
    sb_cluster_destroy (&a);
    sb_cluster_destroy (&b);
    sb_store_destroy (&store);
}

//  Case 2: the write's snapshot is older than the takeover, its guard
//  newer. Locking the changed row fails the SERIALIZABLE write, which
//  sb_store_write runs again; that run sees the new epoch.
typedef struct {
    write_ctx_t w;
    sb_cluster_t *b;
    int runs;
} race_write_t;

static int
s_read_then_guard (sb_txn_t *txn, void *arg)
{
    race_write_t *r = (race_write_t *) arg;
    sb_key_t k;
    sb_key_init (&k, 'T');
    sb_key_str (&k, "ses_other");
    sb_datum_t v;
    sb_txn_get (txn, 0, k.buf, k.len, &v);     //  takes the snapshot
    if (r->runs++ == 0) {
        s_sleep_ms (LEASE_MS + 100);
        s_tick (r->b);
        cr_assert_eq (sb_cluster_held (r->b), ~0ull, "the takeover did not happen");
    }
    return s_guarded_put (txn, &r->w);
}

Test (cluster, a_write_whose_snapshot_predates_a_takeover_runs_again_and_is_fenced)
{
    NEEDS_SERVER ();
    char got [64];
    sb_store_t *store = s_pg_store ();
    sb_cluster_t *a = s_node ("na");
    sb_cluster_t *b = s_node ("nb");
    cr_assert_eq (sb_cluster_leave (b), 0);    //  b waits outside until the takeover
    s_tick (a);
    cr_assert_eq (sb_cluster_held (a), ~0ull);
    race_write_t r = { .w = { .value = "stale" }, .b = b };
    cr_assert_eq (sb_cluster_guard (a, sb_cluster_shard_of ("ses_fenced"), &r.w.guard), 0);
    cr_assert_eq (sb_store_write (store, s_read_then_guard, &r), SB_STORE_FENCED);
    cr_assert_eq (r.runs, 2, "ran %d times", r.runs);
    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.retries, 1);
    s_read_back (store, got, sizeof got);
    cr_assert_str_eq (got, "");
    sb_cluster_destroy (&a);
    sb_cluster_destroy (&b);
    sb_store_destroy (&store);
}

//  A node that cannot renew gives everything up once a lease has passed
//  since its last good renewal began, without a word from the database.
//  The database is made unreachable for it by a lock on its table and a
//  short statement_timeout in its URL: each beat fails after 100 ms.
Test (cluster, a_node_that_cannot_renew_gives_up_its_shards_within_a_lease)
{
    NEEDS_SERVER ();
    char url [1024];
    sbt_pg_where (url, sizeof url, "cluster");
    strcat (url, "&options=-c%20statement_timeout%3D100");
    sb_cluster_config_t config = { .node_id = "cut", .lease_ms = LEASE_MS, .heartbeat_ms = BEAT_MS };
    sb_cluster_t *c = sb_cluster_open (url, &config, g_err, sizeof g_err);
    cr_assert_not_null (c, "%s", g_err);
    s_tick (c);
    cr_assert_eq (sb_cluster_heartbeat (c, NULL), 0);
    int64_t t0 = s_now_ms ();
    cr_assert_eq (sb_cluster_held (c), ~0ull);

    PGconn *locker = PQconnectdb (sbt_pg_base ());
    char sql [256];
    snprintf (sql, sizeof sql, "BEGIN; LOCK TABLE %s.nodes IN ACCESS EXCLUSIVE MODE", sb_cluster_schema (c));
    PGresult *res = PQexec (locker, sql);
    cr_assert_eq (PQresultStatus (res), PGRES_COMMAND_OK, "%s", PQerrorMessage (locker));
    PQclear (res);
    uint64_t lost = 0;
    int64_t gave_up = -1;
    while (s_now_ms () - t0 < 3 * LEASE_MS) {
        s_sleep_ms (BEAT_MS);
        cr_assert_neq (sb_cluster_heartbeat (c, &lost), 0, "a beat got through the lock");
        if (lost) {
            gave_up = s_now_ms () - t0;
            break;
        }
        cr_assert_eq (sb_cluster_held (c), ~0ull);
    }
    cr_assert_eq (lost, ~0ull);
    cr_assert_eq (sb_cluster_held (c), 0);
    sb_guard_t g;
    cr_assert_eq (sb_cluster_guard (c, 1, &g), SB_STORE_FENCED);
    //  given up after a lease, and by the next beat after that
    cr_assert (gave_up >= LEASE_MS - 100 && gave_up <= LEASE_MS + BEAT_MS + 300, "gave up after %lld ms",
               (long long) gave_up);
    PQclear (PQexec (locker, "ROLLBACK"));
    PQfinish (locker);
    //  back in reach: it beats again and takes the shards anew
    s_tick (c);
    cr_assert_eq (sb_cluster_held (c), ~0ull);
    sb_cluster_destroy (&c);
}

Test (cluster, every_lease_renews_at_epochs_of_nineteen_digits)
{
    NEEDS_SERVER ();
    sb_cluster_t *c = s_node ("big");
    char sql [256];
    snprintf (sql, sizeof sql, "UPDATE %s.shard_leases SET epoch = 999999999999999990",
              sb_cluster_schema (c));
    cr_assert_eq (sbt_pg_exec (sql), 0);
    s_tick (c);
    cr_assert_eq (sb_cluster_held (c), ~0ull);
    uint64_t lost;
    cr_assert_eq (sb_cluster_heartbeat (c, &lost), 0);
    cr_assert_eq (lost, 0);
    sb_guard_t g;
    cr_assert_eq (sb_cluster_guard (c, 63, &g), 0);
    cr_assert_eq (g.epoch, 999999999999999991LL);
    sb_cluster_destroy (&c);
}

//  Two threads balance at once, released together by a barrier.
typedef struct {
    sb_cluster_t *node;
    pthread_barrier_t *barrier;
    uint64_t gained;
    int rc;
} racer_t;

static void *
s_racer (void *arg)
{
    racer_t *r = (racer_t *) arg;
    pthread_barrier_wait (r->barrier);
    r->rc = sb_cluster_balance (r->node, &r->gained, NULL);
    return NULL;
}

static long long
s_epoch_of (uint32_t shard, const char *schema, char *owner, size_t size)
{
    PGconn *conn = PQconnectdb (sbt_pg_base ());
    char sql [256];
    snprintf (sql, sizeof sql, "SELECT coalesce (owner, ''), epoch FROM %s.shard_leases WHERE shard = %u",
              schema, shard);
    PGresult *res = PQexec (conn, sql);
    cr_assert_eq (PQresultStatus (res), PGRES_TUPLES_OK, "%s", PQerrorMessage (conn));
    snprintf (owner, size, "%s", PQgetvalue (res, 0, 0));
    long long epoch = atoll (PQgetvalue (res, 0, 1));
    PQclear (res);
    PQfinish (conn);
    return epoch;
}

Test (cluster, two_nodes_racing_for_one_free_shard_give_one_owner)
{
    NEEDS_SERVER ();
    sb_cluster_t *a = s_node ("ra"), *b = s_node ("rb");
    const char *schema = sb_cluster_schema (a);
    //  every shard but 7 held far into the future by a third node
    char sql [512];
    snprintf (sql, sizeof sql, "INSERT INTO %s.nodes VALUES ('holder', '', '', '', 600000, now (), "
              "now () + interval '1 day'); UPDATE %s.shard_leases SET owner = 'holder', epoch = 1, "
              "expires_at = now () + interval '1 day' WHERE shard <> 7", schema, schema);
    cr_assert_eq (sbt_pg_exec (sql), 0);
    snprintf (sql, sizeof sql, "UPDATE %s.shard_leases SET owner = NULL, expires_at = now () "
              "WHERE shard = 7", schema);
    for (int round = 0; round < 100; round++) {
        cr_assert_eq (sbt_pg_exec (sql), 0);
        char owner [64];
        long long before = s_epoch_of (7, schema, owner, sizeof owner);
        pthread_barrier_t barrier;
        pthread_barrier_init (&barrier, NULL, 2);
        racer_t r [2] = { { a, &barrier }, { b, &barrier } };
        pthread_t t [2];
        for (int i = 0; i < 2; i++)
            pthread_create (&t [i], NULL, s_racer, &r [i]);
        for (int i = 0; i < 2; i++)
            pthread_join (t [i], NULL);
        pthread_barrier_destroy (&barrier);
        cr_assert (r [0].rc == 0 && r [1].rc == 0, "round %d: %d %d", round, r [0].rc, r [1].rc);
        cr_assert_eq ((r [0].gained | r [1].gained), 1ull << 7, "round %d: %llx %llx", round,
                      (unsigned long long) r [0].gained, (unsigned long long) r [1].gained);
        cr_assert_eq (r [0].gained & r [1].gained, 0, "round %d: both took shard 7", round);
        long long after = s_epoch_of (7, schema, owner, sizeof owner);
        cr_assert_eq (after, before + 1, "round %d: epoch %lld -> %lld", round, before, after);
        cr_assert_str_eq (owner, r [0].gained? "ra": "rb", "round %d", round);
        //  the loser holds nothing, the winner exactly shard 7
        sb_cluster_t *winner = r [0].gained? a: b, *loser = r [0].gained? b: a;
        cr_assert_eq (sb_cluster_held (winner), 1ull << 7);
        cr_assert_eq (sb_cluster_held (loser), 0);
        //  hand it back for the next round: the winner forgets it
        uint64_t lost;
        cr_assert_eq (sbt_pg_exec (sql), 0);
        cr_assert_eq (sb_cluster_heartbeat (winner, &lost), 0);
        cr_assert_eq (lost, 1ull << 7);
    }
    sb_cluster_destroy (&a);
    sb_cluster_destroy (&b);
}

Test (cluster, settings_come_from_the_environment_within_their_ranges)
{
    NEEDS_SERVER ();
    char url [1024];
    sbt_pg_where (url, sizeof url, "cluster");
    sb_cluster_config_t config = { .node_id = "env" };
    setenv ("SWITCHBOARD_SHARD_LEASE_MS", "3000", 1);
    setenv ("SWITCHBOARD_SHARD_HEARTBEAT_MS", "500", 1);
    sb_cluster_t *c = sb_cluster_open (url, &config, g_err, sizeof g_err);
    cr_assert_not_null (c, "%s", g_err);
    cr_assert_eq (sb_cluster_lease_ms (c), 3000);
    cr_assert_eq (sb_cluster_heartbeat_ms (c), 500);
    sb_cluster_destroy (&c);
    //  out of range, or not digits: the defaults; a beat over a third of
    //  the lease: a third of it
    setenv ("SWITCHBOARD_SHARD_LEASE_MS", "10", 1);
    setenv ("SWITCHBOARD_SHARD_HEARTBEAT_MS", "2s", 1);
    c = sb_cluster_open (url, &config, g_err, sizeof g_err);
    cr_assert_not_null (c, "%s", g_err);
    cr_assert_eq (sb_cluster_lease_ms (c), SB_CLUSTER_LEASE_MS_DEFAULT);
    cr_assert_eq (sb_cluster_heartbeat_ms (c), SB_CLUSTER_HEARTBEAT_MS_DEFAULT);
    sb_cluster_destroy (&c);
    setenv ("SWITCHBOARD_SHARD_LEASE_MS", "900", 1);
    setenv ("SWITCHBOARD_SHARD_HEARTBEAT_MS", "600", 1);
    c = sb_cluster_open (url, &config, g_err, sizeof g_err);
    cr_assert_not_null (c, "%s", g_err);
    cr_assert_eq (sb_cluster_heartbeat_ms (c), 300);
    sb_cluster_destroy (&c);
    unsetenv ("SWITCHBOARD_SHARD_LEASE_MS");
    unsetenv ("SWITCHBOARD_SHARD_HEARTBEAT_MS");
}

Test (cluster, leave_releases_everything_and_a_restart_fences_the_old_run)
{
    NEEDS_SERVER ();
    sb_cluster_t *a = s_node ("na");
    s_tick (a);
    cr_assert_eq (sb_cluster_held (a), ~0ull);
    sb_guard_t old;
    cr_assert_eq (sb_cluster_guard (a, 9, &old), 0);
    //  the same id opened again (a restart) releases what the first run held
    sb_cluster_t *again = s_node ("na");
    char owner [64];
    s_epoch_of (9, sb_cluster_schema (a), owner, sizeof owner);
    cr_assert_str_eq (owner, "");
    uint64_t lost;
    cr_assert_eq (sb_cluster_heartbeat (a, &lost), 0);
    cr_assert_eq (lost, ~0ull);
    sb_cluster_destroy (&a);
    s_tick (again);
    cr_assert_eq (sb_cluster_leave (again), 0);
    cr_assert_eq (sb_cluster_held (again), 0);
    sb_cluster_info_t *list;
    size_t count;
    cr_assert_eq (sb_cluster_nodes_list (again, &list, &count), 0);
    cr_assert_eq (count, 0);
    sb_cluster_nodes_free (&list);
    sb_cluster_destroy (&again);
}

//  --------------------------------------------------------------------------
//  A fixture for tests/integration/test_cluster_postgres.py, which lists it
//  with `switchboard nodes`: in the cluster SB_TEST_CLUSTER_FIXTURE names,
//  n1 and n2 alive with 32 shards each (leases of a minute), n3 registered
//  and dead. Nothing is dropped after.

Test (cluster_fixture, register_nodes_for_the_cli)
{
    const char *url = getenv ("SB_TEST_CLUSTER_FIXTURE");
    if (!url || !*url)
        cr_skip_test ("SB_TEST_CLUSTER_FIXTURE names no cluster (run by test_cluster_postgres.py)");
    sb_cluster_t *nodes [3];
    for (int i = 0; i < 3; i++) {
        char id [8], bus [64], events [64];
        snprintf (id, sizeof id, "n%d", i + 1);
        snprintf (bus, sizeof bus, "tcp://192.0.2.%d:7001", i + 1);
        snprintf (events, sizeof events, "tcp://192.0.2.%d:7002", i + 1);
        sb_cluster_config_t config = { .node_id = id, .bus_endpoint = bus, .event_endpoint = events,
                                       .curve_public = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
                                       .lease_ms = i < 2? 60000: 300, .heartbeat_ms = i < 2? 1000: 100 };
        nodes [i] = sb_cluster_open (url, &config, g_err, sizeof g_err);
        cr_assert_not_null (nodes [i], "%s", g_err);
        if (i == 1)
            cr_assert (s_settle (nodes, 2, 10) > 0);
    }
    s_sleep_ms (400);
    for (int i = 0; i < 3; i++)
        sb_cluster_destroy (&nodes [i]);
}

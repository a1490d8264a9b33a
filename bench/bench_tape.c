/*  bench/bench_tape.c — the durable tape, through the real server.

    Each figure is one JSON line {bench, value, unit, baseline, ratio, ...},
    the median of RUNS runs, with its baseline measured in the same run of
    this program:

      tape.append.closed64    64 appenders, each on its own session, each
                              waiting for its ack before its next append:
                              durable acknowledged appends/s, with p50 and
                              p99 append->ack latency (µs). Baseline
                              lmdb.raw.batch64: raw LMDB, 150-byte values,
                              64 per durable txn. Target ratio >= 0.5.
      tape.append.closed64.p99 the p99 latency (µs) against the time of one
                              raw 64-entry durable commit.
      tape.append.pipelined   64 appenders, each with up to 16 batch appends
                              of 32 entries in flight: durable acknowledged
                              entries/s. Baseline lmdb.raw.batch1000 (the
                              same in 1000-entry txns). Target ratio >= 0.2.
      tape.replay             1,000,000 entries of one session read through
                              the bus with session.events pages: entries/s.
                              Baseline lmdb.raw.read: a raw cursor over the
                              same environment.
      tape.restart            from spawning `serve` on DATA holding a
                              1,000,000-entry tape until session.events
                              answers: ms. Baseline: the same on an empty
                              DATA. Target: under 1000 ms.
      tape.memory.idle        RssAnon (KiB, not RSS: LMDB's pages are file
                              backed) of a restarted `serve` holding 100,000
                              closed sessions, after one session.list.
                              Baseline: the same with no session. Target:
                              ratio 1 (idle sessions cost no anonymous
                              memory).
      tape.e2e                one event at a time: session.append sent to
                              the entry arriving on a subscriber of the
                              session's topic; p99 µs, p50 beside it.
                              Baseline peer.redis.e2e (ratio = ours /
                              Redis; target <= 1).

    The peer, measured in the same rounds (bench/redis_peer.h): Redis 7
    Streams with appendonly yes and appendfsync always, started by this
    program on a loopback port, 150-byte field values:
      peer.redis.xadd.closed64  64 clients, one XADD in flight each;
                                tape.append.closed64 carries peer_ratio
                                (target >= 1.5)
      peer.redis.xadd.pipelined 64 clients, 100 XADDs in flight each;
                                tape.append.pipelined carries peer_ratio
                                (target >= 1.0)
      peer.redis.e2e            XADD to a client blocked in XREAD: p99 µs
    Without /usr/bin/redis-server one line says why the peer is skipped.

    The server is the real binary (`serve --actors session`), spawned on a
    fresh data folder under $TMPDIR (default /tmp), reached over ipc by
    clients in this process. It is found at $SB_BIN, else next to this
    program (../switchboard). Tape entries are about 150 bytes, as in the
    baselines: a text.delta with 44 bytes of text.

    Usage: bench_tape [SECONDS per timed run, default 1.5]
    Environment: SB_BENCH_QUICK=1 shrinks the 1,000,000 and 100,000 to a
    tenth, for a quick look; SB_BENCH_STORE=postgres://... runs serve with
    --store on that database (bench/bench_store.py). */
#include "bench/lmdb_raw.h"
#include "bench/redis_peer.h"
#include "bus/client.h"
#include "common/log.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define RUNS        5
#define APPENDERS   64
#define IN_FLIGHT   16
#define BATCH       32
#define PEER_PIPELINE 100      //  XADDs in flight per Redis client
#define TEXT_LEN    44              //  makes a stored entry of about 150 bytes
#define KEY_LEN     SB_RAW_KEY_LEN
#define VAL_LEN     SB_RAW_VAL_LEN

static double g_seconds = 1.5;
static long g_replay_entries = 1000000;
static long g_idle_sessions = 100000;
static char g_tmp [256];
static char g_bin [4096];
static volatile unsigned g_sink;     //  keeps the raw read's work from being optimized away

static void
s_die (const char *fmt, ...) __attribute__ ((format (printf, 1, 2), noreturn));

static void
s_die (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    fprintf (stderr, "bench_tape: ");
    vfprintf (stderr, fmt, ap);
    fprintf (stderr, "\n");
    va_end (ap);
    exit (1);
}

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y? -1: x > y;
}

static double
s_median (double *v, int n)
{
    qsort (v, (size_t) n, sizeof v [0], s_cmp);
    return v [n / 2];
}

static void
s_figure (const char *name, double value, const char *unit, double baseline, const char *extra)
{
    /* a baseline figure itself has no baseline: print it without one */
    if (baseline > 0)
        printf ("{\"bench\":\"%s\",\"value\":%.1f,\"unit\":\"%s\",\"baseline\":%.1f,\"ratio\":%.3f%s%s}\n",
                name, value, unit, baseline, value / baseline, extra? ",": "", extra? extra: "");
    else
        printf ("{\"bench\":\"%s\",\"value\":%.1f,\"unit\":\"%s\"%s%s}\n",
                name, value, unit, extra? ",": "", extra? extra: "");
    fflush (stdout);
}

static char *
s_mkdtemp (const char *tag)
{
    char *dir = malloc (300);
    snprintf (dir, 300, "%s/bt_%s_XXXXXX", g_tmp, tag);
    if (!mkdtemp (dir))
        s_die ("mkdtemp %s: %s", dir, strerror (errno));
    return dir;
}

static void
s_rmrf (const char *dir)
{
    if (getenv ("SB_BENCH_KEEP"))
        return;
    char cmd [600];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system (cmd) != 0)
        fprintf (stderr, "bench_tape: could not remove %s\n", dir);
}

//  --------------------------------------------------------------------------
//  Raw LMDB baselines (the loop of bench_lmdb.c)

//  One timed run with `batch` entries per durable txn; entries/s, and the
//  mean time of one commit in µs.
static double
s_raw_run (int batch, double *txn_us)
{
    char *dir = s_mkdtemp ("raw");
    double rate = sb_raw_run (dir, batch, g_seconds, txn_us);
    if (rate < 0)
        s_die ("raw write: %s", mdb_strerror ((int) rate));
    s_rmrf (dir);
    free (dir);
    return rate;
}

//  The physical bound of one durable event on this disk, right now: one
//  raw LMDB commit of one entry (lmdb) or one bare 150-byte append +
//  fdatasync.
#define BOUND_COUNT 500
static void
s_bound (bool lmdb, double *p50, double *p99)
{
    char *dir = s_mkdtemp (lmdb? "rawlat": "fsync");
    int rc = sb_raw_latency (dir, lmdb, BOUND_COUNT, p50, p99);
    if (rc != 0)
        s_die ("raw latency: %s", lmdb? mdb_strerror (rc): strerror (-rc));
    s_rmrf (dir);
    free (dir);
}

//  A raw cursor over every entry of the tape dbi of `env_dir`: entries/s.
static double
s_raw_read (const char *env_dir, long *count)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    int rc = mdb_env_create (&env);
    if (rc == 0)
        rc = mdb_env_set_maxdbs (env, 16);
    if (rc == 0)
        rc = mdb_env_open (env, env_dir, MDB_RDONLY | MDB_NOTLS, 0600);
    if (rc == 0)
        rc = mdb_txn_begin (env, NULL, MDB_RDONLY, &txn);
    if (rc == 0)
        rc = mdb_dbi_open (txn, "tape", 0, &dbi);
    if (rc == 0)
        rc = mdb_cursor_open (txn, dbi, &cur);
    if (rc != 0)
        s_die ("raw read of %s: %s", env_dir, mdb_strerror (rc));
    MDB_val k, v;
    long n = 0;
    unsigned sum = 0;
    double start = s_now ();
    for (rc = mdb_cursor_get (cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get (cur, &k, &v, MDB_NEXT)) {
        //  Touch the value, as a reader copying it out would.
        sum += ((const uint8_t *) v.mv_data) [v.mv_size - 1];
        n++;
    }
    double elapsed = s_now () - start;
    mdb_cursor_close (cur);
    mdb_txn_abort (txn);
    mdb_env_close (env);
    g_sink += sum;
    *count = n;
    return n / elapsed;
}

//  --------------------------------------------------------------------------
//  The server

typedef struct {
    pid_t pid;
    char data [300];
    char ep [400];
} server_t;

static bool
s_exists (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0;
}

static sb_msg_t *
s_call (sb_bus_t *bus, const char *type, sb_enc_t *enc, int timeout_ms)
{
    size_t len;
    const uint8_t *body = sb_enc_data (enc, &len);
    return sb_bus_call (bus, type, NULL, body, len, timeout_ms);
}

static sb_msg_t *
s_call_ok (sb_bus_t *bus, const char *type, sb_enc_t *enc)
{
    sb_msg_t *m = s_call (bus, type, enc, 60000);
    if (!m)
        s_die ("no reply to %s", type);
    if (sb_msg_is_error (m))
        s_die ("%s: %s: %s", type, sb_msg_error_code (m), sb_msg_error_message (m));
    return m;
}

//  Spawns `serve` on `data` and returns once the session service answers;
//  *ready_ms is the time from the spawn to that answer.
static void
s_server_start (server_t *s, const char *data, double *ready_ms)
{
    snprintf (s->data, sizeof s->data, "%s", data);
    snprintf (s->ep, sizeof s->ep, "ipc://%s/bus-cmd", data);
    char log [400], sock [400];
    snprintf (log, sizeof log, "%s/serve.log", data);
    snprintf (sock, sizeof sock, "%s/bus-cmd", data);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_addopen (&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2 (&fa, 1, 2);
    posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
    //  SB_BENCH_STORE=postgres://...: the state on PostgreSQL (bench_store.py)
    char *store = getenv ("SB_BENCH_STORE");
    char *argv [] = { g_bin, "serve", "--data", (char *) data, "--http", "127.0.0.1:0",
                      "--actors", "session", store && *store? "--store": NULL, store, NULL };
    double t0 = s_now ();
    if (posix_spawn (&s->pid, g_bin, &fa, NULL, argv, environ) != 0)
        s_die ("cannot start %s: %s", g_bin, strerror (errno));
    posix_spawn_file_actions_destroy (&fa);
    //  The command socket appears only once every actor is ready.
    while (!s_exists (sock)) {
        int status;
        if (waitpid (s->pid, &status, WNOHANG) == s->pid)
            s_die ("serve exited during startup; see %s", log);
        if (s_now () - t0 > 30)
            s_die ("serve did not start within 30 s; see %s", log);
        usleep (500);
    }
    sb_bus_t *bus = sb_bus_new (s->ep, "bench");
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kuint (enc, "limit", 1);
    sb_enc_map_close (enc);
    sb_msg_t *m = NULL;
    while (!m) {
        m = s_call (bus, "session.list", enc, 2000);
        if (s_now () - t0 > 30)
            s_die ("serve does not answer session.list; see %s", log);
    }
    if (ready_ms)
        *ready_ms = (s_now () - t0) * 1000;
    if (sb_msg_is_error (m))
        s_die ("session.list: %s", sb_msg_error_message (m));
    sb_msg_destroy (&m);
    sb_enc_destroy (&enc);
    sb_bus_destroy (&bus);
}

static void
s_server_stop (server_t *s)
{
    if (s->pid <= 0)
        return;
    kill (s->pid, SIGTERM);
    int status;
    waitpid (s->pid, &status, 0);
    s->pid = 0;
}

static long
s_rss_anon_kib (pid_t pid)
{
    char path [64], line [256];
    snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *f = fopen (path, "r");
    long kib = -1;
    while (f && fgets (line, sizeof line, f))
        if (sscanf (line, "RssAnon: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose (f);
    return kib;
}

//  CPU time (user + system, µs) a process has used so far: the load-
//  independent cost of what it served (SB_BENCH_ONLY prints it per entry).
static double
s_cpu_us (pid_t pid)
{
    char path [64], buf [1024];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *f = fopen (path, "r");
    size_t n = f? fread (buf, 1, sizeof buf - 1, f): 0;
    if (f)
        fclose (f);
    buf [n] = 0;
    //  The fields after the command name, which may hold spaces: state
    //  is the 3rd field; utime and stime are the 14th and 15th.
    char *p = strrchr (buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf (p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double) (ut + st) * 1e6 / (double) sysconf (_SC_CLK_TCK);
}

static double g_serve_cpu_us_per_entry;

static void
s_create_sessions (server_t *s, char sids [][SB_ULID_LEN + 1], int n, const char *workspace)
{
    sb_bus_t *bus = sb_bus_new (s->ep, "bench");
    sb_enc_t *enc = sb_enc_new ();
    for (int k = 0; k < n; k++) {
        sb_enc_reset (enc);
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "workspace", workspace);
        sb_enc_map_close (enc);
        sb_msg_t *m = s_call_ok (bus, "session.create", enc);
        const char *sid = sb_get_str (sb_get_map (m->body, "session"), "session_id");
        snprintf (sids [k], SB_ULID_LEN + 1, "%s", sid? sid: "");
        sb_msg_destroy (&m);
    }
    sb_enc_destroy (&enc);
    sb_bus_destroy (&bus);
}

//  --------------------------------------------------------------------------
//  Appenders: APPENDERS logical clients, each with its own requests in
//  flight, multiplexed over SOCKETS sockets and driven from one thread.
//  The server sees the same traffic as from 64 processes; the client pays
//  for one zmq_poll over 8 sockets instead of 64, so that it is not what
//  the figure measures.

#define SOCKETS 8

typedef struct {
    uint8_t *body;              //  the request, encoded once
    size_t len;
    int sock;
    int in_flight;
} appender_t;

typedef struct {
    int appender;
    double sent_at;
} flight_t;

static void
s_free_item (void **item)
{
    free (*item);
    *item = NULL;
}

static void
s_encode_text (sb_enc_t *enc, uint64_t k)
{
    char text [TEXT_LEN + 1];
    snprintf (text, sizeof text, "%0*llu", TEXT_LEN, (unsigned long long) k);
    sb_enc_key (enc, "body");
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "text", text);
    sb_enc_map_close (enc);
}

static void
s_send_append (appender_t *a, int who, sb_bus_t **bus, zhashx_t *flights, double now)
{
    char id [SB_ULID_LEN + 1];
    if (sb_bus_send (bus [a [who].sock], "session.append", NULL, NULL, a [who].body, a [who].len, 0, id))
        s_die ("send failed");
    flight_t *f = malloc (sizeof *f);
    if (!f)
        s_die ("out of memory");
    f->appender = who;
    f->sent_at = now;
    zhashx_insert (flights, id, f);
    a [who].in_flight++;
}

//  One timed run: each appender keeps `depth` requests of `batch` entries
//  in flight, on `nsessions` sessions (1: all on one; APPENDERS: one
//  each). Returns acknowledged entries/s; fills the append->ack latency
//  percentiles (µs) when asked.
static double
s_append_run (int depth, int batch, int nsessions, double *p50, double *p99)
{
    char *data = s_mkdtemp ("app");
    server_t s;
    s_server_start (&s, data, NULL);
    static char sids [APPENDERS][SB_ULID_LEN + 1];
    s_create_sessions (&s, sids, nsessions, g_tmp);

    sb_bus_t *bus [SOCKETS];
    for (int k = 0; k < SOCKETS; k++)
        if (!(bus [k] = sb_bus_new (s.ep, "appender")))
            s_die ("cannot connect to %s", s.ep);
    appender_t a [APPENDERS];
    sb_enc_t *enc = sb_enc_new ();
    for (int k = 0; k < APPENDERS; k++) {
        sb_enc_reset (enc);
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "session_id", sids [k % nsessions]);
        if (batch == 1) {
            sb_enc_kstr (enc, "kind", "text.delta");
            s_encode_text (enc, (uint64_t) k);
        }
        else {
            sb_enc_key (enc, "entries");
            sb_enc_array_open (enc);
            for (int e = 0; e < batch; e++) {
                sb_enc_map_open (enc);
                sb_enc_kstr (enc, "kind", "text.delta");
                s_encode_text (enc, (uint64_t) e);
                sb_enc_map_close (enc);
            }
            sb_enc_array_close (enc);
        }
        sb_enc_map_close (enc);
        a [k].body = sb_enc_release (enc, &a [k].len);
        a [k].sock = k % SOCKETS;
        a [k].in_flight = 0;
    }
    sb_enc_destroy (&enc);

    //  request id -> its flight
    zhashx_t *flights = zhashx_new ();
    zhashx_set_destructor (flights, s_free_item);
    size_t lat_cap = 1 << 20, nlat = 0;
    double *lat = p50? malloc (lat_cap * sizeof *lat): NULL;
    double warm = 0.3;
    double start = s_now (), measure_from = start + warm, end = measure_from + g_seconds;
    long acked = 0, acked_all = 0;
    double cpu0 = s_cpu_us (s.pid);
    int outstanding = 0;
    //  Each appender sends its next request the moment its reply is in,
    //  as 64 separate clients would: none waits for the others' replies.
    for (int k = 0; k < APPENDERS; k++)
        while (a [k].in_flight < depth) {
            s_send_append (a, k, bus, flights, s_now ());
            outstanding++;
        }
    while (outstanding > 0) {
        zmq_pollitem_t items [SOCKETS];
        for (int k = 0; k < SOCKETS; k++)
            items [k] = (zmq_pollitem_t) { sb_bus_socket (bus [k]), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (items, SOCKETS, 5000) <= 0)
            s_die ("no reply within 5 s (%d outstanding)", outstanding);
        for (int k = 0; k < SOCKETS; k++) {
            if (!(items [k].revents & ZMQ_POLLIN))
                continue;
            sb_msg_t *m;
            while ((m = sb_bus_recv (bus [k], 0))) {
                double now = s_now ();
                if (sb_msg_is_error (m))
                    s_die ("append: %s: %s", sb_msg_error_code (m), sb_msg_error_message (m));
                flight_t *f = zhashx_lookup (flights, m->h.corr);
                if (!f)
                    s_die ("a reply to an unknown request %s", m->h.corr);
                int who = f->appender;
                a [who].in_flight--;
                outstanding--;
                acked_all += batch;
                if (f->sent_at >= measure_from && now <= end) {
                    acked += batch;
                    if (lat && nlat < lat_cap)
                        lat [nlat++] = (now - f->sent_at) * 1e6;
                }
                zhashx_delete (flights, m->h.corr);
                sb_msg_destroy (&m);
                if (now < end) {
                    s_send_append (a, who, bus, flights, now);
                    outstanding++;
                }
            }
        }
    }
    zhashx_destroy (&flights);
    for (int k = 0; k < SOCKETS; k++)
        sb_bus_destroy (&bus [k]);
    for (int k = 0; k < APPENDERS; k++)
        free (a [k].body);
    if (lat && nlat) {
        qsort (lat, nlat, sizeof *lat, s_cmp);
        *p50 = lat [nlat / 2];
        *p99 = lat [nlat * 99 / 100];
    }
    free (lat);
    g_serve_cpu_us_per_entry = acked_all? (s_cpu_us (s.pid) - cpu0) / (double) acked_all: 0;
    s_server_stop (&s);
    s_rmrf (data);
    free (data);
    return acked / g_seconds;
}

//  --------------------------------------------------------------------------
//  Replay and restart on a large tape

//  Appends `n` entries to `sid` with pipelined batches of 1000.
static void
s_fill_tape (server_t *s, const char *sid, long n)
{
    enum { FILL_SOCKETS = 4, FILL_DEPTH = 4, FILL_BATCH = 1000 };
    sb_bus_t *bus [FILL_SOCKETS];
    int in_flight [FILL_SOCKETS] = { 0 };
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", sid);
    sb_enc_key (enc, "entries");
    sb_enc_array_open (enc);
    for (int e = 0; e < FILL_BATCH; e++) {
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "kind", "text.delta");
        s_encode_text (enc, (uint64_t) e);
        sb_enc_map_close (enc);
    }
    sb_enc_array_close (enc);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *body = sb_enc_data (enc, &len);
    for (int k = 0; k < FILL_SOCKETS; k++)
        bus [k] = sb_bus_new (s->ep, "filler");
    long sent = 0, done = 0;
    while (done < n) {
        for (int k = 0; k < FILL_SOCKETS; k++)
            while (in_flight [k] < FILL_DEPTH && sent < n) {
                sb_bus_send (bus [k], "session.append", NULL, NULL, body, len, 0, NULL);
                in_flight [k]++;
                sent += FILL_BATCH;
            }
        zmq_pollitem_t items [FILL_SOCKETS];
        for (int k = 0; k < FILL_SOCKETS; k++)
            items [k] = (zmq_pollitem_t) { sb_bus_socket (bus [k]), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (items, FILL_SOCKETS, 30000) <= 0)
            s_die ("filling the tape: no reply within 30 s");
        for (int k = 0; k < FILL_SOCKETS; k++) {
            sb_msg_t *m;
            while ((items [k].revents & ZMQ_POLLIN) && (m = sb_bus_recv (bus [k], 0))) {
                if (sb_msg_is_error (m))
                    s_die ("fill: %s", sb_msg_error_message (m));
                in_flight [k]--;
                done += FILL_BATCH;
                sb_msg_destroy (&m);
            }
        }
    }
    for (int k = 0; k < FILL_SOCKETS; k++)
        sb_bus_destroy (&bus [k]);
    sb_enc_destroy (&enc);
}

//  Reads the whole tape of `sid` through session.events; entries/s.
static double
s_replay_run (server_t *s, const char *sid, long want)
{
    sb_bus_t *bus = sb_bus_new (s->ep, "replayer");
    sb_enc_t *enc = sb_enc_new ();
    uint64_t after = 0;
    long n = 0;
    double start = s_now ();
    while (true) {
        sb_enc_reset (enc);
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "session_id", sid);
        sb_enc_kuint (enc, "after_seq", after);
        sb_enc_kuint (enc, "limit", 5000);
        sb_enc_map_close (enc);
        sb_msg_t *m = s_call_ok (bus, "session.events", enc);
        const sb_val_t *events = sb_get_array (m->body, "events");
        n += events? events->len: 0;
        after = sb_get_uint (m->body, "next_after", 0);
        bool more = sb_get_bool (m->body, "more", false);
        sb_msg_destroy (&m);
        if (!more)
            break;
    }
    double elapsed = s_now () - start;
    if (n < want)
        s_die ("replay read %ld entries, want %ld", n, want);
    sb_enc_destroy (&enc);
    sb_bus_destroy (&bus);
    return n / elapsed;
}

static void
s_bench_large_tape (void)
{
    char *data = s_mkdtemp ("big");
    server_t s;
    s_server_start (&s, data, NULL);
    char sid [1][SB_ULID_LEN + 1];
    s_create_sessions (&s, sid, 1, g_tmp);
    double t0 = s_now ();
    s_fill_tape (&s, sid [0], g_replay_entries - 1);
    fprintf (stderr, "bench_tape: filled a tape of %ld entries in %.1f s\n", g_replay_entries,
             s_now () - t0);

    double replay [RUNS], raw [RUNS];
    for (int r = 0; r < RUNS; r++)
        replay [r] = s_replay_run (&s, sid [0], g_replay_entries);
    s_server_stop (&s);
    char env [400];
    snprintf (env, sizeof env, "%s/session", data);
    long count = 0;
    for (int r = 0; r < RUNS; r++)
        raw [r] = s_raw_read (env, &count);
    char extra [128];
    snprintf (extra, sizeof extra, "\"entries\":%ld", count);
    s_figure ("lmdb.raw.read", s_median (raw, RUNS), "entries/s", 0, extra);
    double raw_read = raw [RUNS / 2];
    s_figure ("tape.replay", s_median (replay, RUNS), "entries/s", raw_read, extra);

    //  Restart: the big DATA against an empty one, alternating.
    char *empty = s_mkdtemp ("empty");
    double big [RUNS], small [RUNS];
    for (int r = 0; r < RUNS; r++) {
        s_server_start (&s, data, &big [r]);
        s_server_stop (&s);
        s_server_start (&s, empty, &small [r]);
        s_server_stop (&s);
    }
    double baseline = s_median (small, RUNS);
    snprintf (extra, sizeof extra, "\"entries\":%ld,\"target_ms\":1000", count);
    s_figure ("tape.restart", s_median (big, RUNS), "ms", baseline, extra);
    s_rmrf (empty);
    s_rmrf (data);
    free (empty);
    free (data);
}

//  --------------------------------------------------------------------------
//  Memory of idle sessions

//  Creates n sessions and closes them, pipelined.
static void
s_make_closed_sessions (server_t *s, long n)
{
    enum { DEPTH = 512 };
    sb_bus_t *bus = sb_bus_new (s->ep, "creator");
    sb_enc_t *enc = sb_enc_new ();
    long created = 0, closed = 0, in_flight = 0, sent = 0;
    while (closed < n) {
        while (in_flight < DEPTH && sent < n) {
            sb_enc_reset (enc);
            sb_enc_map_open (enc);
            sb_enc_kstr (enc, "workspace", g_tmp);
            sb_enc_kstr (enc, "title", "idle");
            sb_enc_map_close (enc);
            size_t len;
            const uint8_t *body = sb_enc_data (enc, &len);
            sb_bus_send (bus, "session.create", NULL, NULL, body, len, 0, NULL);
            in_flight++;
            sent++;
        }
        sb_msg_t *m = sb_bus_recv (bus, 30000);
        if (!m)
            s_die ("creating sessions: no reply within 30 s");
        if (sb_msg_is_error (m))
            s_die ("%s: %s", m->h.type, sb_msg_error_message (m));
        in_flight--;
        if (strcmp (m->h.type, "session.create.ok") == 0) {
            created++;
            sb_enc_reset (enc);
            sb_enc_map_open (enc);
            sb_enc_kstr (enc, "session_id", sb_get_str (sb_get_map (m->body, "session"), "session_id"));
            sb_enc_map_close (enc);
            size_t len;
            const uint8_t *body = sb_enc_data (enc, &len);
            sb_bus_send (bus, "session.close", NULL, NULL, body, len, 0, NULL);
            in_flight++;
        }
        else
            closed++;
        sb_msg_destroy (&m);
    }
    sb_enc_destroy (&enc);
    sb_bus_destroy (&bus);
}

//  RssAnon of a freshly started serve on `data` after one session.list.
static double
s_idle_rss (const char *data)
{
    server_t s;
    s_server_start (&s, data, NULL);       //  its readiness check is the list
    double kib = (double) s_rss_anon_kib (s.pid);
    s_server_stop (&s);
    return kib;
}

static void
s_bench_memory (void)
{
    char *empty = s_mkdtemp ("mem0");
    char *full = s_mkdtemp ("memN");
    server_t s;
    s_server_start (&s, full, NULL);
    double t0 = s_now ();
    s_make_closed_sessions (&s, g_idle_sessions);
    double loaded = (double) s_rss_anon_kib (s.pid);
    s_server_stop (&s);
    fprintf (stderr, "bench_tape: created and closed %ld sessions in %.1f s; RssAnon of that "
             "process afterwards %.0f KiB\n", g_idle_sessions, s_now () - t0, loaded);
    double idle [RUNS], none [RUNS];
    for (int r = 0; r < RUNS; r++) {
        idle [r] = s_idle_rss (full);
        none [r] = s_idle_rss (empty);
    }
    char extra [128];
    snprintf (extra, sizeof extra, "\"sessions\":%ld,\"status\":\"closed\"", g_idle_sessions);
    s_figure ("tape.memory.idle", s_median (idle, RUNS), "KiB", s_median (none, RUNS), extra);
    s_rmrf (empty);
    s_rmrf (full);
    free (empty);
    free (full);
}

//  --------------------------------------------------------------------------

//  One event at a time: session.append sent, then the time until the
//  entry arrives on a subscriber of the session's topic on the event
//  plane (and its ack on the appender). p50/p99 µs of send->delivery.
#define E2E_COUNT 2000
static void
s_e2e_run (double *p50, double *p99)
{
    char *data = s_mkdtemp ("e2e");
    server_t s;
    s_server_start (&s, data, NULL);
    char sids [1][SB_ULID_LEN + 1];
    s_create_sessions (&s, sids, 1, g_tmp);
    char pub_ep [400], topic [64];
    snprintf (pub_ep, sizeof pub_ep, "ipc://%s/bus-pub", data);
    snprintf (topic, sizeof topic, "session/%s", sids [0]);
    sb_sub_t *sub = sb_sub_new (pub_ep);
    sb_bus_t *bus = sb_bus_new (s.ep, "e2e");
    if (!sub || !bus || sb_sub_subscribe (sub, topic) != 0)
        s_die ("cannot subscribe on %s", pub_ep);
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", sids [0]);
    sb_enc_kstr (enc, "kind", "text.delta");
    s_encode_text (enc, 0);
    sb_enc_map_close (enc);
    size_t len;
    uint8_t *body = sb_enc_release (enc, &len);
    sb_enc_destroy (&enc);
    //  the subscription must have reached the broker before the first
    //  timed append: append until one event comes through
    for (int tries = 0; ; tries++) {
        if (tries > 100)
            s_die ("no event reached the subscriber");
        char id [SB_ULID_LEN + 1];
        sb_bus_send (bus, "session.append", NULL, NULL, body, len, 0, id);
        sb_msg_t *ack = sb_bus_recv (bus, 5000);
        sb_msg_destroy (&ack);
        sb_msg_t *ev = sb_sub_recv (sub, 50);
        if (ev) {
            sb_msg_destroy (&ev);
            break;
        }
    }
    while (true) {                  //  drain what the warm-up left
        sb_msg_t *ev = sb_sub_recv (sub, 20);
        if (!ev)
            break;
        sb_msg_destroy (&ev);
    }
    double *lat = malloc (E2E_COUNT * sizeof *lat);
    for (int k = 0; k < E2E_COUNT; k++) {
        char id [SB_ULID_LEN + 1];
        double t = s_now ();
        if (sb_bus_send (bus, "session.append", NULL, NULL, body, len, 0, id))
            s_die ("send failed");
        sb_msg_t *ev = sb_sub_recv (sub, 5000);
        if (!ev)
            s_die ("an appended entry never reached the subscriber");
        lat [k] = (s_now () - t) * 1e6;
        sb_msg_destroy (&ev);
        sb_msg_t *ack = sb_bus_recv (bus, 5000);
        if (!ack || sb_msg_is_error (ack))
            s_die ("append %d was not acknowledged", k);
        sb_msg_destroy (&ack);
    }
    qsort (lat, E2E_COUNT, sizeof *lat, s_cmp);
    *p50 = lat [E2E_COUNT / 2];
    *p99 = lat [E2E_COUNT * 99 / 100];
    free (lat);
    free (body);
    sb_sub_destroy (&sub);
    sb_bus_destroy (&bus);
    s_server_stop (&s);
    s_rmrf (data);
    free (data);
}

static void
s_find_binary (const char *argv0)
{
    const char *env = getenv ("SB_BIN");
    if (env && *env)
        snprintf (g_bin, sizeof g_bin, "%s", env);
    else {
        char self [4096];
        ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            snprintf (self, sizeof self, "%s", argv0);
        else
            self [n] = 0;
        char *slash = strrchr (self, '/');
        if (slash)
            *slash = 0;
        snprintf (g_bin, sizeof g_bin, "%s/../switchboard", self);
    }
    if (access (g_bin, X_OK) != 0)
        s_die ("no switchboard binary at %s (build it, or set SB_BIN)", g_bin);
}

int
main (int argc, char *argv [])
{
    if (argc > 1) {
        g_seconds = atof (argv [1]);
        if (!(g_seconds > 0 && g_seconds <= 60)) {
            fprintf (stderr, "usage: bench_tape [SECONDS per timed run, default 1.5]\n");
            return 2;
        }
    }
    const char *quick = getenv ("SB_BENCH_QUICK");
    if (quick && *quick && strcmp (quick, "0") != 0) {
        g_replay_entries /= 10;
        g_idle_sessions /= 10;
    }
    const char *tmp = getenv ("TMPDIR");
    snprintf (g_tmp, sizeof g_tmp, "%s", tmp && *tmp? tmp: "/tmp");
    s_find_binary (argv [0]);
    zsys_handler_set (NULL);
    signal (SIGPIPE, SIG_IGN);
    setenv ("SWITCHBOARD_LOG", "warn", 0);

    //  SB_BENCH_ONLY=closed64|pipelined|e2e: one timed run of that, for
    //  profiling; no JSON lines.
    const char *only = getenv ("SB_BENCH_ONLY");
    if (only && *only && strcmp (only, "e2e") == 0) {
        double p50 = 0, p99 = 0;
        double c50, c99, f50, f99;
        s_e2e_run (&p50, &p99);
        s_bound (true, &c50, &c99);
        s_bound (false, &f50, &f99);
        fprintf (stderr, "e2e: p50 %.0f us p99 %.0f us; one raw LMDB commit p50 %.0f p99 %.0f us; "
                 "one fdatasync p50 %.0f p99 %.0f us\n", p50, p99, c50, c99, f50, f99);
        return 0;
    }
    if (only && *only) {
        double p50 = 0, p99 = 0;
        int nsessions = getenv ("SB_BENCH_SESSIONS")? atoi (getenv ("SB_BENCH_SESSIONS")): 1;
        if (nsessions < 1 || nsessions > APPENDERS)
            nsessions = 1;
        double v = strcmp (only, "closed64") == 0? s_append_run (1, 1, nsessions, &p50, &p99)
                                                  : s_append_run (IN_FLIGHT, BATCH, nsessions, NULL, NULL);
        fprintf (stderr, "%s: %.0f entries/s p50 %.0f us p99 %.0f us serve_cpu %.2f us/entry\n", only, v,
                 p50, p99, g_serve_cpu_us_per_entry);
        return 0;
    }
    //  The disk behind TMPDIR is shared and its fsync time drifts, so each
    //  run measures its baselines right before the figures they judge.
    double raw64 [RUNS], raw64_us [RUNS], raw1000 [RUNS];
    double closed [RUNS], p50 [RUNS], p99 [RUNS], closed_m [RUNS], p50_m [RUNS], p99_m [RUNS];
    double piped [RUNS], piped_m [RUNS];
    double e2e50 [RUNS], e2e99 [RUNS], c50 [RUNS], c99 [RUNS], f50 [RUNS], f99 [RUNS];
    //  The peer, Redis Streams with appendfsync always, in the same rounds
    //  (bench/redis_peer.h); skipped, with the reason, where it is missing.
    double rc64 [RUNS], rc64_50 [RUNS], rc64_99 [RUNS], rpiped [RUNS], re50 [RUNS], re99 [RUNS];
    rp_server_t redis;
    char *redis_dir = s_mkdtemp ("redis");
    bool peer = rp_start (&redis, redis_dir) == 0;
    if (!peer)
        fprintf (stderr, "bench_tape: the Redis peer is skipped: %s\n", redis.why);
    for (int r = 0; r < RUNS; r++) {
        raw64 [r] = s_raw_run (64, &raw64_us [r]);
        closed [r] = s_append_run (1, 1, 1, &p50 [r], &p99 [r]);
        if (peer)
            rc64 [r] = rp_xadd_run (&redis, APPENDERS, 1, g_seconds, &rc64_50 [r], &rc64_99 [r]);
        closed_m [r] = s_append_run (1, 1, APPENDERS, &p50_m [r], &p99_m [r]);
        raw1000 [r] = s_raw_run (1000, NULL);
        piped [r] = s_append_run (IN_FLIGHT, BATCH, 1, NULL, NULL);
        if (peer)
            rpiped [r] = rp_xadd_run (&redis, APPENDERS, PEER_PIPELINE, g_seconds, NULL, NULL);
        piped_m [r] = s_append_run (IN_FLIGHT, BATCH, APPENDERS, NULL, NULL);
        s_e2e_run (&e2e50 [r], &e2e99 [r]);
        s_bound (true, &c50 [r], &c99 [r]);
        s_bound (false, &f50 [r], &f99 [r]);
        if (peer && rp_e2e_run (&redis, E2E_COUNT, &re50 [r], &re99 [r]) != 0)
            s_die ("the Redis e2e run failed");
    }
    rp_stop (&redis);
    s_rmrf (redis_dir);
    free (redis_dir);
    double b64 = s_median (raw64, RUNS), b64_us = s_median (raw64_us, RUNS);
    double b1000 = s_median (raw1000, RUNS);
    s_figure ("lmdb.raw.batch64", b64, "entries/s", 0, NULL);
    s_figure ("lmdb.raw.batch1000", b1000, "entries/s", 0, NULL);
    char extra [300];
    double peer64 = peer? s_median (rc64, RUNS): 0, peer_piped = peer? s_median (rpiped, RUNS): 0;
    double peer_e2e = peer? s_median (re99, RUNS): 0;
    if (peer) {
        snprintf (extra, sizeof extra, "\"clients\":%d,\"p50_us\":%.0f,\"p99_us\":%.0f,\"appendfsync\":\"always\"",
                  APPENDERS, s_median (rc64_50, RUNS), s_median (rc64_99, RUNS));
        s_figure ("peer.redis.xadd.closed64", peer64, "appends/s", 0, extra);
        snprintf (extra, sizeof extra, "\"clients\":%d,\"pipeline\":%d,\"appendfsync\":\"always\"",
                  APPENDERS, PEER_PIPELINE);
        s_figure ("peer.redis.xadd.pipelined", peer_piped, "entries/s", 0, extra);
        snprintf (extra, sizeof extra, "\"p50_us\":%.0f,\"events\":%d", s_median (re50, RUNS), E2E_COUNT);
        s_figure ("peer.redis.e2e", peer_e2e, "us", 0, extra);
    }
    else
        printf ("{\"bench\":\"peer.redis\",\"skipped\":\"%s\"}\n", redis.why);
    //  What one durable event costs this disk, measured in the same
    //  rounds: the floor under tape.e2e (an LMDB commit makes its pages,
    //  then its meta page, durable) and under peer.redis.e2e (one
    //  fdatasync of its append-only file).
    snprintf (extra, sizeof extra, "\"p50_us\":%.0f,\"entries\":1", s_median (c50, RUNS));
    s_figure ("lmdb.raw.commit1", s_median (c99, RUNS), "us", 0, extra);
    snprintf (extra, sizeof extra, "\"p50_us\":%.0f,\"bytes\":%d", s_median (f50, RUNS), SB_RAW_VAL_LEN);
    s_figure ("fs.fdatasync", s_median (f99, RUNS), "us", 0, extra);
    snprintf (extra, sizeof extra, "\"p50_us\":%.0f,\"events\":%d,\"target_ratio_max\":1.0,"
              "\"p50_over_raw_commit\":%.2f,\"p50_over_fdatasync\":%.2f",
              s_median (e2e50, RUNS), E2E_COUNT, s_median (e2e50, RUNS) / s_median (c50, RUNS),
              s_median (e2e50, RUNS) / s_median (f50, RUNS));
    s_figure ("tape.e2e", s_median (e2e99, RUNS), "us", peer_e2e, extra);
    snprintf (extra, sizeof extra, "\"sessions\":1,\"p50_us\":%.0f,\"p99_us\":%.0f,\"target_ratio\":0.5",
              s_median (p50, RUNS), s_median (p99, RUNS));
    if (peer) {
        size_t n = strlen (extra);
        snprintf (extra + n, sizeof extra - n, ",\"peer_ratio\":%.3f,\"peer_target\":1.5",
                  s_median (closed, RUNS) / peer64);
    }
    s_figure ("tape.append.closed64", s_median (closed, RUNS), "appends/s", b64, extra);
    s_figure ("tape.append.closed64.p99", s_median (p99, RUNS), "us", b64_us,
              "\"baseline_is\":\"the time of one raw 64-entry commit\"");
    //  The same with each appender on its own session: every commit then
    //  dirties a tape page per session, where the baseline dirties one.
    snprintf (extra, sizeof extra, "\"sessions\":%d,\"p50_us\":%.0f,\"p99_us\":%.0f", APPENDERS,
              s_median (p50_m, RUNS), s_median (p99_m, RUNS));
    s_figure ("tape.append.closed64.sessions64", s_median (closed_m, RUNS), "appends/s", b64, extra);
    snprintf (extra, sizeof extra, "\"sessions\":1,\"target_ratio\":0.2");
    if (peer) {
        size_t n = strlen (extra);
        snprintf (extra + n, sizeof extra - n, ",\"peer_ratio\":%.3f,\"peer_target\":1.0",
                  s_median (piped, RUNS) / peer_piped);
    }
    s_figure ("tape.append.pipelined", s_median (piped, RUNS), "entries/s", b1000, extra);
    snprintf (extra, sizeof extra, "\"sessions\":%d", APPENDERS);
    s_figure ("tape.append.pipelined.sessions64", s_median (piped_m, RUNS), "entries/s", b1000, extra);

    s_bench_large_tape ();
    s_bench_memory ();
    return 0;
}

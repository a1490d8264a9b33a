/*  bench/bench_llm.c — the llm actor under 500 concurrent streams.

    Setup: SERVERS processes of tests/llm_server.py on loopback, and
    `switchboard serve --actors broker,llm --providers FILE`, the embedded
    server with its llm actor as a thread, one provider per llm_server
    process. This process is the requester: one DEALER on ipc://DATA/bus-cmd
    sends STREAMS llm.stream requests at once, spread over the providers,
    each for DELTAS generated text deltas (gen=DELTAS/stamp=1/batch=BATCH),
    and reads every chunk until every stream has ended. Each delta is its own
    SSE event and its own llm.stream.chunk.

    Figures, each the median of RUNS runs, one JSON line each:
      llm.server_raw      the llm_server processes alone: the same streams
                          read by a libcurl multi client in this process,
                          no switchboard (deltas/s). The ceiling the loopback
                          server puts on the next figure.
      llm.deltas          deltas per second through the llm actor, from the
                          first request sent to the last llm.stream.ok.
      llm.cpu_per_delta   CPU time of the llm actor's thread per delta (µs).
                          The actor is a thread of serve named "sb-llm"
                          (/proc/PID/task/TID/comm); its CPU is from
                          /proc/PID/task/TID/schedstat (ns, on-CPU time).
                          The line also carries the whole serve process's CPU
                          per delta (broker and ZeroMQ I/O threads included).
      llm.latency_p99     from the server's write to the requester's receipt
                          (µs, with p50), in the saturated run above: stamp=1
                          puts CLOCK_MONOTONIC µs in each delta just before its
                          write; this process reads the same clock on receipt.
                          The servers write as fast as they can, so this is
                          mostly the time a delta waits in the loopback TCP
                          buffers behind the ones before it.
      llm.latency_p99.paced  the same latency when the load is paced: the
                          same streams, each PACED_DELTAS deltas one every
                          PACED_DELAY_MS ms, one event per write (batch=1).

    Every run checks that each stream ended with llm.stream.ok, without a
    seq gap, with exactly DELTAS text chunks; otherwise it exits 1.

    Environment: SB_BENCH_STREAMS (500), SB_BENCH_DELTAS (2000),
    SB_BENCH_SERVERS (llm_server processes, 4), SB_BENCH_BATCH (events per
    server write, 8), SB_BENCH_PACED_DELTAS (200), SB_BENCH_PACED_DELAY_MS
    (20), SB_BENCH_RUNS (5), SB_BENCH_VERBOSE (per-thread CPU), SB_BIN,
    SB_ROOT, SB_KEEP_DATA (keep the temp dir with the logs). */
#include "bus/client.h"
#include "common/log.h"

#include <curl/curl.h>
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_SERVERS 32
#define MAX_THREADS 256

static int g_streams = 500, g_deltas = 2000, g_servers = 4, g_batch = 8, g_runs = 5;
static int g_paced_deltas = 200, g_paced_delay_ms = 20;
static char g_root [2048], g_bin [2200], g_dir [64];
static pid_t g_server_pids [MAX_SERVERS];
static int g_ports [MAX_SERVERS];
static pid_t g_serve_pid;
static long g_gaps, g_lost;
static int r_warned;     /* seq gaps seen by the requester, chunks missing */

static void s_cleanup (void);

static void
s_die (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    fprintf (stderr, "bench_llm: ");
    vfprintf (stderr, fmt, ap);
    fprintf (stderr, "\n");
    va_end (ap);
    s_cleanup ();
    exit (1);
}

static int
s_env_int (const char *name, int dflt)
{
    const char *v = getenv (name);
    return v && atoi (v) > 0 ? atoi (v) : dflt;
}

static int
s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double
s_median (double *v, int n)
{
    qsort (v, (size_t) n, sizeof *v, s_cmp_double);
    return n % 2 ? v [n / 2] : (v [n / 2 - 1] + v [n / 2]) / 2;
}

/* ------------------------------------------------------------------ */
/*  Processes */

static pid_t
s_spawn (char *const argv [], const char *log)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen (&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2 (&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawn (&pid, argv [0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy (&fa);
    if (rc != 0)
        s_die ("cannot start %s: %s", argv [0], strerror (rc));
    return pid;
}

static void
s_stop (pid_t *pid)
{
    if (*pid <= 0)
        return;
    kill (*pid, SIGTERM);
    for (int k = 0; k < 100; k++) {
        if (waitpid (*pid, NULL, WNOHANG) == *pid) {
            *pid = 0;
            return;
        }
        usleep (20000);
    }
    kill (*pid, SIGKILL);
    waitpid (*pid, NULL, 0);
    *pid = 0;
}

static void
s_rmtree (const char *path)
{
    DIR *d = opendir (path);
    if (d) {
        struct dirent *e;
        while ((e = readdir (d))) {
            if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
                continue;
            char p [512];
            snprintf (p, sizeof p, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat (p, &st) == 0 && S_ISDIR (st.st_mode))
                s_rmtree (p);
            else
                unlink (p);
        }
        closedir (d);
    }
    rmdir (path);
}

static void
s_cleanup (void)
{
    s_stop (&g_serve_pid);
    for (int k = 0; k < g_servers; k++)
        s_stop (&g_server_pids [k]);
    if (g_dir [0] && !getenv ("SB_KEEP_DATA"))
        s_rmtree (g_dir);
}

static void
s_find_paths (void)
{
    /* the binary is ROOT/BUILD/bench/bench_llm */
    char exe [2048];
    ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        s_die ("readlink /proc/self/exe");
    exe [n] = 0;
    char build [2048];
    snprintf (build, sizeof build, "%s", exe);
    for (int k = 0; k < 2; k++) {
        char *slash = strrchr (build, '/');
        if (slash)
            *slash = 0;
    }
    const char *root = getenv ("SB_ROOT");
    if (root)
        snprintf (g_root, sizeof g_root, "%s", root);
    else {
        snprintf (g_root, sizeof g_root, "%s", build);
        char *slash = strrchr (g_root, '/');
        if (slash)
            *slash = 0;
    }
    const char *bin = getenv ("SB_BIN");
    if (bin)
        snprintf (g_bin, sizeof g_bin, "%s", bin);
    else
        snprintf (g_bin, sizeof g_bin, "%s/switchboard", build);
    if (access (g_bin, X_OK) != 0)
        s_die ("no switchboard binary at %s", g_bin);
}

static int
s_wait_file_int (const char *path, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        FILE *f = fopen (path, "r");
        if (f) {
            int v = 0;
            int ok = fscanf (f, "%d", &v);
            fclose (f);
            if (ok == 1 && v > 0)
                return v;
        }
        usleep (10000);
    }
    return -1;
}

static void
s_start_servers (void)
{
    char script [2300], fixtures [2300];
    snprintf (script, sizeof script, "%s/tests/llm_server.py", g_root);
    snprintf (fixtures, sizeof fixtures, "%s/tests", g_root);
    for (int k = 0; k < g_servers; k++) {
        char portfile [128], log [128];
        snprintf (portfile, sizeof portfile, "%s/port%d", g_dir, k);
        snprintf (log, sizeof log, "%s/llm_server%d.log", g_dir, k);
        char *argv [] = { "/usr/bin/python3", script, "--port", "0", "--fixtures", fixtures,
                          "--portfile", portfile, NULL };
        g_server_pids [k] = s_spawn (argv, log);
    }
    for (int k = 0; k < g_servers; k++) {
        char portfile [128];
        snprintf (portfile, sizeof portfile, "%s/port%d", g_dir, k);
        g_ports [k] = s_wait_file_int (portfile, 10000);
        if (g_ports [k] < 0)
            s_die ("llm_server %d did not start (see %s/llm_server%d.log)", k, g_dir, k);
    }
}

static void
s_base_url (int k, char *out, size_t size)
{
    snprintf (out, size, "http://127.0.0.1:%d/gen=%d/stamp=1/batch=%d/tag=bench/v1",
              g_ports [k], g_deltas, g_batch);
}

/*  The paced streams: one delta every g_paced_delay_ms, one per write. */
static void
s_paced_url (int k, char *out, size_t size)
{
    snprintf (out, size, "http://127.0.0.1:%d/gen=%d/stamp=1/delay_ms=%d/tag=paced/v1",
              g_ports [k], g_paced_deltas, g_paced_delay_ms);
}

static void
s_start_serve (char *endpoint, size_t size)
{
    char providers [128], data [128], log [128];
    snprintf (providers, sizeof providers, "%s/providers.json", g_dir);
    snprintf (data, sizeof data, "%s/data", g_dir);
    snprintf (log, sizeof log, "%s/serve.log", g_dir);
    FILE *f = fopen (providers, "w");
    if (!f)
        s_die ("cannot write %s", providers);
    fprintf (f, "{\"default\": \"s0\", \"providers\": [");
    for (int k = 0; k < g_servers; k++) {
        char url [256];
        s_base_url (k, url, sizeof url);
        fprintf (f, "%s{\"name\": \"s%d\", \"kind\": \"responses\", \"base_url\": \"%s\", "
                    "\"model\": \"bench\", \"max_attempts\": 1, \"idle_timeout_s\": 120}",
                 k ? ", " : "", k, url);
        s_paced_url (k, url, sizeof url);
        fprintf (f, ", {\"name\": \"p%d\", \"kind\": \"responses\", \"base_url\": \"%s\", "
                    "\"model\": \"bench\", \"max_attempts\": 1, \"idle_timeout_s\": 120}", k, url);
    }
    fprintf (f, "]}\n");
    fclose (f);
    char *argv [] = { g_bin, "serve", "--data", data, "--http", "127.0.0.1:0",
                      "--actors", "broker,llm", "--providers", providers, NULL };
    g_serve_pid = s_spawn (argv, log);
    snprintf (endpoint, size, "ipc://%s/bus-cmd", data);
    char sock [160];
    snprintf (sock, sizeof sock, "%s/bus-cmd", data);
    for (int waited = 0; access (sock, F_OK) != 0; waited += 10) {
        if (waited > 10000 || waitpid (g_serve_pid, NULL, WNOHANG) == g_serve_pid)
            s_die ("serve did not start (see %s)", log);
        usleep (10000);
    }
}

/* ------------------------------------------------------------------ */
/*  /proc */

typedef struct {
    int tid;
    char comm [32];
    uint64_t cpu_ns;
} task_t;

static uint64_t
s_task_cpu_ns (int pid, int tid)
{
    char path [128];
    snprintf (path, sizeof path, "/proc/%d/task/%d/schedstat", pid, tid);
    FILE *f = fopen (path, "r");
    unsigned long long ns = 0;
    if (f) {
        int ok = fscanf (f, "%llu", &ns);
        fclose (f);
        if (ok == 1)
            return ns;
    }
    /* no schedstat: utime + stime in clock ticks */
    snprintf (path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    f = fopen (path, "r");
    if (!f)
        return 0;
    char buf [1024];
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf [n] = 0;
    char *p = strrchr (buf, ')');
    unsigned long long ut = 0, st = 0;
    if (p && sscanf (p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
        return (ut + st) * (1000000000ull / (unsigned long long) sysconf (_SC_CLK_TCK));
    return 0;
}

static void
s_task_comm (int pid, int tid, char *out, size_t size)
{
    char path [128];
    snprintf (path, sizeof path, "/proc/%d/task/%d/comm", pid, tid);
    FILE *f = fopen (path, "r");
    out [0] = 0;
    if (f) {
        if (fgets (out, (int) size, f))
            out [strcspn (out, "\n")] = 0;
        fclose (f);
    }
}

static int
s_tasks (int pid, task_t *out, int max)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir (path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir (d)) && n < max) {
        int tid = atoi (e->d_name);
        if (tid <= 0)
            continue;
        out [n].tid = tid;
        s_task_comm (pid, tid, out [n].comm, sizeof out [n].comm);
        out [n].cpu_ns = s_task_cpu_ns (pid, tid);
        n++;
    }
    if (d)
        closedir (d);
    return n;
}

/*  CPU ns of a whole process (all threads, live and gone). */
static uint64_t
s_proc_cpu_ns (int pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen (path, "r");
    if (!f)
        return 0;
    char buf [1024];
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf [n] = 0;
    char *p = strrchr (buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf (p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (ut + st) * (1000000000ull / (unsigned long long) sysconf (_SC_CLK_TCK));
}

static uint64_t
s_servers_cpu_ns (void)
{
    uint64_t sum = 0;
    for (int k = 0; k < g_servers; k++)
        sum += s_proc_cpu_ns (g_server_pids [k]);
    return sum;
}

/* ------------------------------------------------------------------ */
/*  llm.server_raw: the loopback servers alone, read by libcurl */

typedef struct {
    size_t bytes;
    char tail [32];
} raw_stream_t;

static size_t
s_raw_write (char *ptr, size_t size, size_t nmemb, void *arg)
{
    raw_stream_t *s = arg;
    size_t n = size * nmemb;
    s->bytes += n;
    size_t keep = n < sizeof s->tail - 1 ? n : sizeof s->tail - 1;
    memmove (s->tail, s->tail + keep, sizeof s->tail - 1 - keep);
    memcpy (s->tail + sizeof s->tail - 1 - keep, ptr + n - keep, keep);
    return n;
}

static double
s_run_raw (void)
{
    CURLM *multi = curl_multi_init ();
    curl_multi_setopt (multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    CURL **easy = calloc ((size_t) g_streams, sizeof *easy);
    raw_stream_t *st = calloc ((size_t) g_streams, sizeof *st);
    struct curl_slist *h = curl_slist_append (NULL, "Content-Type: application/json");
    int64_t t0 = sb_mono_us ();
    for (int i = 0; i < g_streams; i++) {
        char url [300], base [256];
        s_base_url (i % g_servers, base, sizeof base);
        snprintf (url, sizeof url, "%s/responses", base);
        easy [i] = curl_easy_init ();
        curl_easy_setopt (easy [i], CURLOPT_URL, url);
        curl_easy_setopt (easy [i], CURLOPT_POSTFIELDS, "{\"model\":\"bench\",\"stream\":true}");
        curl_easy_setopt (easy [i], CURLOPT_HTTPHEADER, h);
        curl_easy_setopt (easy [i], CURLOPT_WRITEFUNCTION, s_raw_write);
        curl_easy_setopt (easy [i], CURLOPT_WRITEDATA, &st [i]);
        curl_easy_setopt (easy [i], CURLOPT_TCP_NODELAY, 1L);
        curl_multi_add_handle (multi, easy [i]);
    }
    int running = 1;
    while (running) {
        curl_multi_perform (multi, &running);
        if (running)
            curl_multi_poll (multi, NULL, 0, 1000, NULL);
    }
    int64_t t1 = sb_mono_us ();
    int ok = 0;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read (multi, &left)))
        if (m->msg == CURLMSG_DONE && m->data.result == CURLE_OK)
            ok++;
    for (int i = 0; i < g_streams; i++) {
        /* the terminal event (its usage) came, after at least the deltas */
        if (!strstr (st [i].tail, "total_tokens") || st [i].bytes < (size_t) g_deltas * 100)
            ok = -g_streams;
        curl_multi_remove_handle (multi, easy [i]);
        curl_easy_cleanup (easy [i]);
    }
    curl_slist_free_all (h);
    curl_multi_cleanup (multi);
    free (easy);
    free (st);
    if (ok != g_streams)
        s_die ("raw run: %d of %d streams completed", ok < 0 ? 0 : ok, g_streams);
    return (double) g_streams * g_deltas * 1e6 / (double) (t1 - t0);
}

/* ------------------------------------------------------------------ */
/*  Through the llm actor */

typedef struct {
    double rate;                /* deltas/s */
    double thread_us;           /* llm thread CPU µs per delta */
    double process_us;          /* serve process CPU µs per delta */
    double servers_util;        /* llm_server CPU / wall, in cores */
    double p50, p99;            /* µs */
} run_t;

typedef struct {
    char id [33];
    uint64_t seq;
    long texts;
    bool done;
} stream_t;

static run_t
s_run_actor (sb_bus_t *bus, int serve_pid, double *lat, char prefix, int deltas)
{
    run_t r = { 0 };
    stream_t *st = calloc ((size_t) g_streams, sizeof *st);
    zhashx_t *index = zhashx_new ();
    sb_enc_t *enc = sb_enc_new ();
    task_t before [MAX_THREADS], after [MAX_THREADS];
    int nb = s_tasks (serve_pid, before, MAX_THREADS);
    uint64_t proc0 = s_proc_cpu_ns (serve_pid), serv0 = s_servers_cpu_ns ();

    struct rusage ru0, ru1;
    getrusage (RUSAGE_SELF, &ru0);
    int64_t t0 = sb_mono_us ();
    for (int i = 0; i < g_streams; i++) {
        char prov [16];
        snprintf (prov, sizeof prov, "%c%d", prefix, i % g_servers);
        sb_enc_reset (enc);
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "provider", prov);
        sb_enc_key (enc, "messages");
        sb_enc_array_open (enc);
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "role", "user");
        sb_enc_kstr (enc, "content", "stream, please");
        sb_enc_map_close (enc);
        sb_enc_array_close (enc);
        sb_enc_map_close (enc);
        size_t len;
        const uint8_t *body = sb_enc_data (enc, &len);
        if (sb_bus_send (bus, "llm.stream", NULL, NULL, body, len, 0, st [i].id) != 0)
            s_die ("cannot send llm.stream");
        zhashx_insert (index, st [i].id, (void *) (intptr_t) (i + 1));
    }
    long nlat = 0, done = 0, total = (long) g_streams * deltas;
    while (done < g_streams) {
        sb_msg_t *msg = sb_bus_recv (bus, 30000);
        if (!msg)
            s_die ("no message for 30 s; %ld of %d streams ended", done, g_streams);
        intptr_t k = (intptr_t) zhashx_lookup (index, msg->h.corr);
        if (!k)
            s_die ("a message for no stream of ours: %s", msg->h.type);
        stream_t *s = &st [k - 1];
        if (strcmp (msg->h.type, "llm.stream.chunk") == 0) {
            if (msg->h.seq != s->seq + 1) {
                if (g_gaps++ == 0)
                    fprintf (stderr, "bench_llm: stream %s: seq %llu after %llu\n", s->id,
                             (unsigned long long) msg->h.seq, (unsigned long long) s->seq);
                g_lost += (long) (msg->h.seq - s->seq - 1);
            }
            s->seq = msg->h.seq;
            const char *kind = sb_get_str (msg->body, "kind");
            const char *text = sb_get_str (msg->body, "text");
            if (kind && strcmp (kind, "text") == 0 && text && text [0] == 'T') {
                struct timespec ts;
                clock_gettime (CLOCK_MONOTONIC, &ts);
                double now = (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
                if (nlat < total)
                    lat [nlat++] = now - strtod (text + 1, NULL);
                s->texts++;
            }
        }
        else {
            if (strcmp (msg->h.type, "llm.stream.ok") != 0)
                s_die ("stream %s ended with %s: %s", s->id, msg->h.type, sb_msg_error_message (msg));
            if (s->texts != deltas && !g_gaps)
                s_die ("stream %s: %ld text chunks, want %d", s->id, s->texts, deltas);
            s->done = true;
            done++;
        }
        sb_msg_destroy (&msg);
    }
    int64_t t1 = sb_mono_us ();
    getrusage (RUSAGE_SELF, &ru1);
    int na = s_tasks (serve_pid, after, MAX_THREADS);
    uint64_t proc1 = s_proc_cpu_ns (serve_pid), serv1 = s_servers_cpu_ns ();

    /* the llm thread: named sb-llm by the actor; else the busiest thread */
    uint64_t thread_ns = 0;
    bool named = false;
    for (int a = 0; a < na; a++)
        for (int b = 0; b < nb; b++)
            if (after [a].tid == before [b].tid) {
                uint64_t ns = after [a].cpu_ns - before [b].cpu_ns;
                bool is_llm = strcmp (after [a].comm, "sb-llm") == 0;
                if (is_llm && !named)
                    thread_ns = ns;
                else
                if (!named && ns > thread_ns)
                    thread_ns = ns;
                named = named || is_llm;
            }
    if (!named && r_warned++ == 0)
        fprintf (stderr, "bench_llm: no thread named sb-llm in serve; taking its busiest thread\n");
    if (getenv ("SB_BENCH_VERBOSE")) {
        for (int a = 0; a < na; a++)
            for (int b = 0; b < nb; b++)
                if (after [a].tid == before [b].tid)
                    fprintf (stderr, "bench_llm:   serve thread %d %-16s %.2f cores\n", after [a].tid,
                             after [a].comm,
                             (double) (after [a].cpu_ns - before [b].cpu_ns) / 1e3 / (double) (t1 - t0));
        double self_us = (double) (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e6
                       + (double) (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec)
                       + (double) (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6
                       + (double) (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
        fprintf (stderr, "bench_llm:   requester (this process): %.2f cores\n", self_us / (double) (t1 - t0));
    }
    r.rate = (double) total * 1e6 / (double) (t1 - t0);
    r.thread_us = (double) thread_ns / 1e3 / (double) total;
    r.process_us = (double) (proc1 - proc0) / 1e3 / (double) total;
    r.servers_util = (double) (serv1 - serv0) / 1e3 / (double) (t1 - t0);
    qsort (lat, (size_t) nlat, sizeof *lat, s_cmp_double);
    r.p50 = lat [(long) (0.50 * (double) (nlat - 1) + 0.5)];
    r.p99 = lat [(long) (0.99 * (double) (nlat - 1) + 0.5)];
    zhashx_destroy (&index);
    sb_enc_destroy (&enc);
    free (st);
    return r;
}

/*  Dies when the requester saw a seq gap: the bus dropped chunks. */
static void
s_check_gaps (sb_bus_t *bus, int r)
{
    if (!g_gaps)
        return;
    sb_msg_t *st = sb_bus_call (bus, "bus.stats", NULL, (const uint8_t *) "\x80", 1, 10000);
    fprintf (stderr, "bench_llm: run %d: %ld seq gaps, %ld chunks lost; broker dropped_hwm=%llu\n",
             r + 1, g_gaps, g_lost, st ? (unsigned long long) sb_get_uint (st->body, "dropped_hwm", 0) : 0ull);
    sb_msg_destroy (&st);
    s_die ("chunks were lost on the bus (see above)");
}

int
main (void)
{
    g_streams = s_env_int ("SB_BENCH_STREAMS", g_streams);
    g_deltas = s_env_int ("SB_BENCH_DELTAS", g_deltas);
    g_servers = s_env_int ("SB_BENCH_SERVERS", g_servers);
    g_batch = s_env_int ("SB_BENCH_BATCH", g_batch);
    g_runs = s_env_int ("SB_BENCH_RUNS", g_runs);
    g_paced_deltas = s_env_int ("SB_BENCH_PACED_DELTAS", g_paced_deltas);
    g_paced_delay_ms = s_env_int ("SB_BENCH_PACED_DELAY_MS", g_paced_delay_ms);
    if (g_servers > MAX_SERVERS)
        g_servers = MAX_SERVERS;
    sb_log_init ();
    sb_log_set_level (SB_LOG_WARN);
    zsys_handler_set (NULL);
    zsys_init ();
    signal (SIGPIPE, SIG_IGN);
    curl_global_init (CURL_GLOBAL_DEFAULT);
    struct rlimit rl;
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit (RLIMIT_NOFILE, &rl);
    }
    s_find_paths ();
    snprintf (g_dir, sizeof g_dir, "/tmp/sbllmXXXXXX");
    if (!mkdtemp (g_dir))
        s_die ("mkdtemp: %s", strerror (errno));
    s_start_servers ();
    char endpoint [200];
    s_start_serve (endpoint, sizeof endpoint);
    sb_bus_t *bus = sb_bus_new (endpoint, "bench-llm");
    if (!bus)
        s_die ("cannot connect to %s", endpoint);
    sb_msg_t *stats = sb_bus_call (bus, "bus.stats", NULL, (const uint8_t *) "\x80", 1, 10000);
    if (!stats)
        s_die ("serve does not answer bus.stats");
    sb_msg_destroy (&stats);

    size_t nlat = (size_t) g_streams * (size_t) (g_deltas > g_paced_deltas ? g_deltas : g_paced_deltas);
    double *lat = malloc (nlat * sizeof *lat);
    double raw [64], rate [64], thr [64], proc [64], util [64], p50 [64], p99 [64], pp50 [64], pp99 [64];
    double load0 = 0;
    if (g_runs > 64)
        g_runs = 64;
    if (getloadavg (&load0, 1) != 1)
        load0 = -1;
    /* interleaved, so a slow moment of the machine hits every figure */
    for (int r = 0; r < g_runs; r++) {
        raw [r] = s_run_raw ();
        run_t a = s_run_actor (bus, g_serve_pid, lat, 's', g_deltas);
        s_check_gaps (bus, r);
        run_t p = s_run_actor (bus, g_serve_pid, lat, 'p', g_paced_deltas);
        s_check_gaps (bus, r);
        rate [r] = a.rate;
        thr [r] = a.thread_us;
        proc [r] = a.process_us;
        util [r] = a.servers_util;
        p50 [r] = a.p50;
        p99 [r] = a.p99;
        pp50 [r] = p.p50;
        pp99 [r] = p.p99;
        fprintf (stderr, "bench_llm: run %d: raw %.0f deltas/s; actor %.0f deltas/s, llm thread "
                 "%.2f us/delta, serve %.2f us/delta, servers %.2f cores, p50 %.0f us, p99 %.0f us; "
                 "paced %.0f deltas/s p50 %.0f us p99 %.0f us\n",
                 r + 1, raw [r], a.rate, a.thread_us, a.process_us, a.servers_util, a.p50, a.p99,
                 p.rate, p.p50, p.p99);
    }
    long cores = sysconf (_SC_NPROCESSORS_ONLN);
    printf ("{\"bench\":\"llm.server_raw\",\"value\":%.0f,\"unit\":\"deltas/s\",\"streams\":%d,"
            "\"deltas\":%d,\"servers\":%d,\"batch\":%d,\"runs\":%d,\"cores\":%ld,\"loadavg\":%.1f}\n",
            s_median (raw, g_runs), g_streams, g_deltas, g_servers, g_batch, g_runs, cores, load0);
    printf ("{\"bench\":\"llm.deltas\",\"value\":%.0f,\"unit\":\"deltas/s\",\"streams\":%d,"
            "\"deltas\":%d,\"servers\":%d,\"batch\":%d,\"runs\":%d,\"servers_cores\":%.2f,\"cores\":%ld,"
            "\"loadavg\":%.1f}\n",
            s_median (rate, g_runs), g_streams, g_deltas, g_servers, g_batch, g_runs,
            s_median (util, g_runs), cores, load0);
    printf ("{\"bench\":\"llm.cpu_per_delta\",\"value\":%.3f,\"unit\":\"us\",\"thread\":\"sb-llm\","
            "\"serve_process_us\":%.3f,\"runs\":%d}\n",
            s_median (thr, g_runs), s_median (proc, g_runs), g_runs);
    printf ("{\"bench\":\"llm.latency_p99\",\"value\":%.0f,\"unit\":\"us\",\"p50\":%.0f,"
            "\"load\":\"saturated\",\"streams\":%d,\"deltas\":%d,\"batch\":%d,\"runs\":%d}\n",
            s_median (p99, g_runs), s_median (p50, g_runs), g_streams, g_deltas, g_batch, g_runs);
    printf ("{\"bench\":\"llm.latency_p99.paced\",\"value\":%.0f,\"unit\":\"us\",\"p50\":%.0f,"
            "\"streams\":%d,\"deltas\":%d,\"delay_ms\":%d,\"offered\":%.0f,\"batch\":1,\"runs\":%d}\n",
            s_median (pp99, g_runs), s_median (pp50, g_runs), g_streams, g_paced_deltas, g_paced_delay_ms,
            (double) g_streams * 1000.0 / g_paced_delay_ms, g_runs);
    fflush (stdout);
    free (lat);
    sb_bus_destroy (&bus);
    s_cleanup ();
    return 0;
}

/*  bench/bench_bus.c — the bus against raw ZeroMQ.

    Figures, each the median of RUNS runs, printed as one JSON line each:
      zmq.ipc.raw         PUSH -> PULL over ipc, 200-byte messages (msg/s):
                          the baseline, measured in the same run
      zmq.ipc.proxy       the bus's topology with no switchboard code: a
                          bare ROUTER forwarding 2-frame messages between
                          two DEALERs over ipc (msg/s; the ceiling for
                          any broker here)
      bus.oneway          echo.note with a ~200-byte body, DEALER -> broker
                          ROUTER -> registered instance, over ipc, no tap
                          subscriber (msg/s; ratio against zmq.ipc.raw)
      bus.oneway.tapped   the same with one tap subscriber draining
      bus.oneway.inproc   the same as bus.oneway, but the receiver reaches
                          the broker over inproc, as the actors inside
                          `serve` do: one ipc hop, like the baseline
      bus.roundtrip       echo.ping request/reply through the broker to the
                          real echo actor, p99 in µs, with p50

    The broker runs in this process as a zactor with its ipc endpoints in
    a fresh temp dir (as `serve` runs it), one broker for every run (its
    inproc endpoints have fixed names, and libzmq frees an inproc name
    only some time after the socket closes). Each run registers a fresh
    receiver. Sender, receiver and tap each have their own thread and their
    own socket over ipc, so every message crosses two ipc hops (sender ->
    broker -> receiver) against the baseline's one.

    A one-way command the receiver cannot take is dropped at the broker's
    HWM (and counted there); the sender therefore keeps at most WINDOW
    notes unacknowledged, using an echo.ping as a credit every BATCH
    notes. Each figure line carries `lost` (notes that never arrived), so
    a run that outran the receiver is visible.

    Environment: SB_BENCH_N (notes per run, default 200000),
    SB_BENCH_RT (round trips per run, default 10000), SB_BENCH_ONLY=oneway,
    raw or proxy (only those runs, for profiling: no JSON lines). */
#include "actors/actor.h"
#include "bus/broker.h"
#include "bus/client.h"
#include "common/log.h"

#include <czmq.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUNS      5
#define MSG_SIZE  200
#define BATCH     2000          /* notes per credit ping */
#define WINDOW    20000         /* notes the sender may have unacknowledged */

static long g_notes = 200000;
static long g_round_trips = 10000;

static void
s_die (const char *what)
{
    fprintf (stderr, "bench_bus: %s: %s\n", what, zmq_strerror (zmq_errno ()));
    exit (1);
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

static double
s_percentile (double *v, long n, double p)
{
    qsort (v, (size_t) n, sizeof *v, s_cmp_double);
    long k = (long) (p * (double) (n - 1) + 0.5);
    return v [k];
}

/* ------------------------------------------------------------------ */
/*  zmq.ipc.raw */

typedef struct {
    char endpoint [256];
    long count;
} raw_args_t;

static void *
s_raw_sender (void *arg)
{
    raw_args_t *a = arg;
    zsock_t *push = zsock_new (ZMQ_PUSH);
    if (!push || zsock_connect (push, "%s", a->endpoint))
        s_die ("raw connect");
    uint8_t buf [MSG_SIZE];
    memset (buf, 'x', sizeof buf);
    void *s = zsock_resolve (push);
    for (long k = 0; k < a->count; k++)
        if (zmq_send (s, buf, sizeof buf, 0) < 0)
            s_die ("raw send");
    zsock_set_linger (push, -1);
    zsock_destroy (&push);
    return NULL;
}

static double
s_run_raw (const char *dir)
{
    raw_args_t a = { .count = g_notes };
    snprintf (a.endpoint, sizeof a.endpoint, "ipc://%s/raw", dir);
    zsock_t *pull = zsock_new (ZMQ_PULL);
    if (!pull || zsock_bind (pull, "%s", a.endpoint) < 0)
        s_die ("raw bind");
    void *s = zsock_resolve (pull);
    pthread_t t;
    pthread_create (&t, NULL, s_raw_sender, &a);
    uint8_t buf [MSG_SIZE];
    if (zmq_recv (s, buf, sizeof buf, 0) < 0)
        s_die ("raw recv");
    /* from the first message on, so connection set-up is not measured */
    int64_t t0 = sb_mono_us ();
    for (long k = 1; k < a.count; k++)
        if (zmq_recv (s, buf, sizeof buf, 0) < 0)
            s_die ("raw recv");
    int64_t t1 = sb_mono_us ();
    pthread_join (t, NULL);
    zsock_destroy (&pull);
    unlink (a.endpoint + strlen ("ipc://"));
    return (double) (a.count - 1) * 1e6 / (double) (t1 - t0);
}

/* ------------------------------------------------------------------ */
/*  zmq.ipc.proxy: the same topology as the bus with no switchboard code
    in it. A ROUTER forwards [sender][header][body] to a receiver DEALER as
    [receiver][sender][header][body] without looking at the bytes. It is
    the ceiling for any broker on this machine and transport. */

#define PROXY_HDR_BYTES 80

typedef struct {
    char endpoint [256];
    long count;
    atomic_int ready;           /* 1 bound, 2 the receiver's hello arrived */
} proxy_args_t;

static void *
s_proxy_sender (void *arg)
{
    proxy_args_t *a = arg;
    zsock_t *d = zsock_new (ZMQ_DEALER);
    if (!d || zsock_connect (d, "%s", a->endpoint))
        s_die ("proxy sender connect");
    void *s = zsock_resolve (d);
    uint8_t hdr [PROXY_HDR_BYTES], body [MSG_SIZE];
    memset (hdr, 'h', sizeof hdr);
    memset (body, 'x', sizeof body);
    for (long k = 0; k < a->count; k++)
        if (zmq_send (s, hdr, sizeof hdr, ZMQ_SNDMORE) < 0 || zmq_send (s, body, sizeof body, 0) < 0)
            s_die ("proxy send");
    zsock_set_linger (d, -1);
    zsock_destroy (&d);
    return NULL;
}

static void *
s_proxy_router (void *arg)
{
    proxy_args_t *a = arg;
    zsock_t *r = zsock_new (ZMQ_ROUTER);
    if (!r)
        s_die ("proxy router");
    zsock_set_router_mandatory (r, 1);
    if (zsock_bind (r, "%s", a->endpoint) < 0)
        s_die ("proxy bind");
    atomic_store (&a->ready, 1);
    void *s = zsock_resolve (r);
    long forwarded = 0;
    while (forwarded < a->count) {
        zmq_msg_t f [3];
        int n = 0, more = 1;
        while (more && n < 3) {
            zmq_msg_init (&f [n]);
            if (zmq_msg_recv (&f [n], s, 0) < 0)
                s_die ("proxy recv");
            more = zmq_msg_more (&f [n]);
            n++;
        }
        bool from_rx = zmq_msg_size (&f [0]) == 2 && memcmp (zmq_msg_data (&f [0]), "rx", 2) == 0;
        if (from_rx)
            atomic_store (&a->ready, 2);
        else
        if (n == 3) {
            /* blocking sends: ROUTER_MANDATORY waits at the HWM */
            if (zmq_send (s, "rx", 2, ZMQ_SNDMORE) < 0)
                s_die ("proxy forward");
            zmq_msg_send (&f [0], s, ZMQ_SNDMORE);
            zmq_msg_send (&f [1], s, ZMQ_SNDMORE);
            zmq_msg_send (&f [2], s, 0);
            forwarded++;
        }
        for (int k = 0; k < n; k++)
            zmq_msg_close (&f [k]);
    }
    zsock_set_linger (r, -1);   /* deliver what is queued before closing */
    zsock_destroy (&r);
    return NULL;
}

static double
s_run_proxy (const char *dir)
{
    proxy_args_t a = { .count = g_notes };
    snprintf (a.endpoint, sizeof a.endpoint, "ipc://%s/proxy", dir);
    pthread_t rt, st;
    pthread_create (&rt, NULL, s_proxy_router, &a);
    while (!atomic_load (&a.ready))
        usleep (1000);
    zsock_t *rx = zsock_new (ZMQ_DEALER);
    zsock_set_identity (rx, "rx");
    if (!rx || zsock_connect (rx, "%s", a.endpoint))
        s_die ("proxy receiver connect");
    void *s = zsock_resolve (rx);
    /* the router learns the receiver's identity from its first message */
    zmq_send (s, "hi", 2, ZMQ_SNDMORE);
    zmq_send (s, "hi", 2, 0);
    while (atomic_load (&a.ready) < 2)
        usleep (1000);
    pthread_create (&st, NULL, s_proxy_sender, &a);
    int64_t t0 = 0;
    for (long k = 0; k < a.count; k++) {
        zmq_msg_t m;
        int more = 1;
        while (more) {
            zmq_msg_init (&m);
            if (zmq_msg_recv (&m, s, 0) < 0)
                s_die ("proxy receive");
            more = zmq_msg_more (&m);
            zmq_msg_close (&m);
        }
        if (k == 0)
            t0 = sb_mono_us ();
    }
    int64_t t1 = sb_mono_us ();
    pthread_join (st, NULL);
    pthread_join (rt, NULL);
    zsock_destroy (&rx);
    char p [300];
    snprintf (p, sizeof p, "%s/proxy", dir);
    unlink (p);
    return (double) (a.count - 1) * 1e6 / (double) (t1 - t0);
}

/* ------------------------------------------------------------------ */
/*  The broker, as serve runs it */

typedef struct {
    char dir [128];
    char cmd [160];
    char tap [160];
    zactor_t *broker;
    sb_broker_config_t cfg;
} bus_env_t;

static void
s_bus_start (bus_env_t *env, const char *dir)
{
    memset (env, 0, sizeof *env);
    snprintf (env->dir, sizeof env->dir, "%s", dir);
    snprintf (env->cmd, sizeof env->cmd, "ipc://%s/bus-cmd", dir);
    snprintf (env->tap, sizeof env->tap, "ipc://%s/bus-tap", dir);
    env->cfg.ipc_dir = env->dir;
    env->broker = zactor_new (sb_broker_actor, &env->cfg);
    if (!env->broker)
        s_die ("broker start");
    zstr_send (env->broker, "BIND");
    if (zsock_wait (env->broker) != 0)
        s_die ("broker bind");
}

static void
s_bus_stop (bus_env_t *env)
{
    zactor_destroy (&env->broker);
    const char *socks [] = { "bus-cmd", "bus-in", "bus-pub", "bus-tap" };
    for (int k = 0; k < 4; k++) {
        char p [256];
        snprintf (p, sizeof p, "%s/%s", env->dir, socks [k]);
        unlink (p);
    }
}

/* ------------------------------------------------------------------ */
/*  bus.oneway: a registered receiver counting echo.note */

typedef struct {
    const bus_env_t *env;
    const char *endpoint;       /* where the receiver connects */
    char name [32];
    long expect;
    atomic_long received;
    atomic_int ready;           /* 1 registered, -1 failed */
    atomic_int stop;
    int64_t t_last;             /* mono µs of the last note */
} receiver_t;

static void
s_answer_ping (sb_bus_t *bus, sb_msg_t *msg)
{
    sb_bus_reply (bus, msg, (const uint8_t *) "\x81\xa8instance\xa2rx", 13);
}

static void *
s_receiver (void *arg)
{
    receiver_t *rx = arg;
    sb_bus_t *bus = sb_bus_new (rx->endpoint, rx->name);
    sb_verr_t err;
    if (!bus || sb_bus_register (bus, "echo", rx->name, NULL, 0, 5000, &err)) {
        fprintf (stderr, "bench_bus: receiver cannot register: %s\n", bus ? err.message : "no socket");
        atomic_store (&rx->ready, -1);
        sb_bus_destroy (&bus);
        return NULL;
    }
    atomic_store (&rx->ready, 1);
    long n = 0;
    while (!atomic_load (&rx->stop)) {
        sb_msg_t *msg = sb_bus_recv (bus, 50);
        if (!msg)
            continue;
        if (strcmp (msg->h.type, "echo.note") == 0) {
            if (++n == rx->expect)
                rx->t_last = sb_mono_us ();
            atomic_store_explicit (&rx->received, n, memory_order_relaxed);
        }
        else
        if (strcmp (msg->h.type, "echo.ping") == 0 && msg->route) {
            /* the sender's credit: answered after every note before it */
            atomic_store (&rx->received, n);
            s_answer_ping (bus, msg);
        }
        sb_msg_destroy (&msg);
    }
    sb_bus_destroy (&bus);
    return NULL;
}

/*  A tap subscriber that drains as fast as it can. */
typedef struct {
    const bus_env_t *env;
    atomic_int stop;
    atomic_int ready;
    long seen;
} tapper_t;

static void *
s_tapper (void *arg)
{
    tapper_t *tp = arg;
    zsock_t *sub = zsock_new (ZMQ_SUB);
    if (!sub || zsock_connect (sub, "%s", tp->env->tap))
        s_die ("tap connect");
    zsock_set_subscribe (sub, "");
    zsock_set_rcvhwm (sub, 100000);
    void *s = zsock_resolve (sub);
    atomic_store (&tp->ready, 1);
    while (!atomic_load (&tp->stop)) {
        zmq_pollitem_t item = { s, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 50) <= 0)
            continue;
        zmq_msg_t m;
        zmq_msg_init (&m);
        while (zmq_msg_recv (&m, s, ZMQ_DONTWAIT) >= 0) {
            if (!zmq_msg_more (&m))
                tp->seen++;
        }
        zmq_msg_close (&m);
    }
    zsock_destroy (&sub);
    return NULL;
}

/*  Sends one request or note, waiting while the DEALER's queue is full
    (sb_bus_send does not block). */
static void
s_send (sb_bus_t *bus, const char *type, const uint8_t *body, size_t len, char *id)
{
    while (sb_bus_send (bus, type, NULL, NULL, body, len, 0, id) != 0) {
        if (zmq_errno () != EAGAIN)
            s_die ("bus send");
        zmq_pollitem_t item = { sb_bus_socket (bus), 0, ZMQ_POLLOUT, 0 };
        zmq_poll (&item, 1, 100);
    }
}

typedef struct {
    double rate;
    long lost;
    long tapped;
} oneway_t;

/*  Waits until the broker counts `want` tap subscriptions, so an untapped
    run does not pay for the previous run's tap. */
static void
s_wait_tap_subs (sb_bus_t *bus, uint64_t want)
{
    for (int k = 0; k < 500; k++) {
        sb_msg_t *st = sb_bus_call (bus, "bus.stats", NULL, (const uint8_t *) "\x80", 1, 5000);
        const sb_val_t *q = st ? sb_get_map (st->body, "queues") : NULL;
        uint64_t n = q ? sb_get_uint (q, "tap_subscriptions", 99) : 99;
        sb_msg_destroy (&st);
        if (n == want)
            return;
        usleep (2000);
    }
    s_die ("tap subscriptions never settled");
}

/*  One run: `tapped` adds a tap subscriber; `inproc` connects the
    receiver over inproc instead of ipc. */
static oneway_t
s_run_oneway (bus_env_t *envp, bool tapped, bool inproc, int run)
{
    bus_env_t env = *envp;
    tapper_t tp = { .env = &env };
    pthread_t tt;
    if (tapped) {
        pthread_create (&tt, NULL, s_tapper, &tp);
        while (!atomic_load (&tp.ready))
            usleep (1000);
    }
    receiver_t rx = { .env = &env, .expect = g_notes, .endpoint = inproc ? SB_INPROC_CMD : env.cmd };
    snprintf (rx.name, sizeof rx.name, "bench-rx-%d%s%s", run, tapped ? "t" : "", inproc ? "i" : "");
    pthread_t rt;
    pthread_create (&rt, NULL, s_receiver, &rx);
    while (atomic_load (&rx.ready) == 0)
        usleep (1000);
    if (atomic_load (&rx.ready) < 0)
        exit (1);

    /* the note: {"text": "xxx…"}, 200 bytes of body */
    sb_enc_t *enc = sb_enc_new ();
    char text [MSG_SIZE - 8];
    memset (text, 'x', sizeof text - 1);
    text [sizeof text - 1] = 0;
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "text", text);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *note = sb_enc_data (enc, &len);

    sb_bus_t *tx = sb_bus_new (env.cmd, "bench-tx");
    if (!tx)
        s_die ("sender connect");
    if (!tapped)
        s_wait_tap_subs (tx, 0);
    /* Warm up until the whole path carries traffic (the tap's
       subscription has reached the broker, the pipes exist). */
    char id [SB_ULID_LEN + 1];
    sb_msg_t *reply = sb_bus_call (tx, "echo.ping", NULL, (const uint8_t *) "\x80", 1, 5000);
    if (!reply || sb_msg_is_error (reply))
        s_die ("warm-up ping");
    sb_msg_destroy (&reply);
    if (tapped) {
        /* wait until the broker has seen the tap's subscription */
        while (tp.seen == 0) {
            reply = sb_bus_call (tx, "echo.ping", NULL, (const uint8_t *) "\x80", 1, 5000);
            sb_msg_destroy (&reply);
        }
    }

    int64_t t0 = sb_mono_us ();
    long credits_out = 0;
    for (long k = 1; k <= g_notes; k++) {
        s_send (tx, "echo.note", note, len, id);
        if (k % BATCH == 0 && k < g_notes) {
            s_send (tx, "echo.ping", (const uint8_t *) "\x80", 1, id);
            credits_out++;
            /* keep at most WINDOW notes ahead of the receiver */
            while (credits_out * BATCH > WINDOW) {
                sb_msg_t *m = sb_bus_recv (tx, 5000);
                if (!m)
                    s_die ("credit timeout");
                if (sb_type_has_suffix (m->h.type, ".ok"))
                    credits_out--;
                sb_msg_destroy (&m);
            }
        }
    }
    /* every note sent: wait for the receiver, or give up after a quiet 2 s */
    long last = -1;
    int64_t quiet_since = sb_mono_us ();
    while (atomic_load (&rx.received) < g_notes) {
        long r = atomic_load (&rx.received);
        if (r != last) {
            last = r;
            quiet_since = sb_mono_us ();
        }
        if (sb_mono_us () - quiet_since > 2000000)
            break;
        usleep (200);
    }
    long got = atomic_load (&rx.received);
    int64_t t1 = got == g_notes ? rx.t_last : quiet_since;
    atomic_store (&rx.stop, 1);
    pthread_join (rt, NULL);
    if (tapped) {
        atomic_store (&tp.stop, 1);
        pthread_join (tt, NULL);
    }
    sb_bus_destroy (&tx);
    sb_enc_destroy (&enc);
    oneway_t out = { (double) got * 1e6 / (double) (t1 - t0), g_notes - got, tp.seen };
    return out;
}

/* ------------------------------------------------------------------ */
/*  bus.roundtrip: echo.ping through the broker to the real echo actor */

static void
s_run_roundtrip (bus_env_t *env, double *p50, double *p99)
{
    sb_actor_args_t args = { .cmd_endpoint = env->cmd, .instance = "bench-echo" };
    zactor_t *echo = zactor_new (sb_echo_actor, &args);
    if (!echo)
        s_die ("echo actor");
    sb_bus_t *c = sb_bus_new (env->cmd, "bench-rt");
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "text", "ping");
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *body = sb_enc_data (enc, &len);
    double *lat = calloc ((size_t) g_round_trips, sizeof *lat);
    for (long k = -1000; k < g_round_trips; k++) {
        int64_t t0 = sb_mono_us ();
        sb_msg_t *reply = sb_bus_call (c, "echo.ping", NULL, body, len, 5000);
        int64_t t1 = sb_mono_us ();
        if (!reply || sb_msg_is_error (reply))
            s_die ("round trip");
        sb_msg_destroy (&reply);
        if (k >= 0)
            lat [k] = (double) (t1 - t0);
    }
    *p50 = s_percentile (lat, g_round_trips, 0.50);
    *p99 = s_percentile (lat, g_round_trips, 0.99);
    free (lat);
    sb_enc_destroy (&enc);
    sb_bus_destroy (&c);
    zactor_destroy (&echo);
}

/* ------------------------------------------------------------------ */

int
main (void)
{
    const char *env_n = getenv ("SB_BENCH_N");
    const char *env_rt = getenv ("SB_BENCH_RT");
    if (env_n && atol (env_n) > 1)
        g_notes = atol (env_n);
    if (env_rt && atol (env_rt) > 0)
        g_round_trips = atol (env_rt);
    sb_log_init ();
    sb_log_set_level (SB_LOG_WARN);
    zsys_handler_set (NULL);
    zsys_init ();
    char dir [] = "/tmp/sbbenchXXXXXX";
    if (!mkdtemp (dir)) {
        perror ("bench_bus: mkdtemp");
        return 1;
    }

    bus_env_t env;
    s_bus_start (&env, dir);
    double raw [RUNS], prx [RUNS], one [RUNS], tap [RUNS], inp [RUNS], p50 [RUNS], p99 [RUNS];
    long lost = 0, tap_lost = 0, tap_seen = 0, inp_lost = 0;
    /* interleaved, so a slow moment of the machine hits every figure */
    const char *only = getenv ("SB_BENCH_ONLY");
    if (only && strcmp (only, "oneway") == 0) {
        for (int r = 0; r < RUNS; r++)
            fprintf (stderr, "bench_bus: oneway %.0f msg/s\n", s_run_oneway (&env, false, false, r).rate);
        s_bus_stop (&env);
        rmdir (dir);
        return 0;
    }
    if (only && strcmp (only, "proxy") == 0) {
        for (int r = 0; r < RUNS; r++)
            fprintf (stderr, "bench_bus: proxy %.0f msg/s\n", s_run_proxy (dir));
        s_bus_stop (&env);
        rmdir (dir);
        return 0;
    }
    if (only && strcmp (only, "raw") == 0) {
        for (int r = 0; r < RUNS; r++)
            fprintf (stderr, "bench_bus: raw %.0f msg/s\n", s_run_raw (dir));
        s_bus_stop (&env);
        rmdir (dir);
        return 0;
    }
    for (int r = 0; r < RUNS; r++) {
        raw [r] = s_run_raw (dir);
        prx [r] = s_run_proxy (dir);
        oneway_t o = s_run_oneway (&env, false, false, r);
        one [r] = o.rate;
        lost += o.lost;
        o = s_run_oneway (&env, true, false, r);
        tap [r] = o.rate;
        tap_lost += o.lost;
        tap_seen += o.tapped;
        o = s_run_oneway (&env, false, true, r);
        inp [r] = o.rate;
        inp_lost += o.lost;
        s_run_roundtrip (&env, &p50 [r], &p99 [r]);
        fprintf (stderr, "bench_bus: run %d raw %.0f proxy %.0f oneway %.0f tapped %.0f inproc %.0f rt p50 %.0f p99 %.0f\n",
                 r + 1, raw [r], prx [r], one [r], tap [r], inp [r], p50 [r], p99 [r]);
    }
    s_bus_stop (&env);
    rmdir (dir);
    double base = s_median (raw, RUNS);
    double v_prx = s_median (prx, RUNS);
    double v_one = s_median (one, RUNS);
    double v_tap = s_median (tap, RUNS);
    double v_inp = s_median (inp, RUNS);
    printf ("{\"bench\":\"zmq.ipc.raw\",\"value\":%.0f,\"unit\":\"msg/s\",\"msg_bytes\":%d}\n",
            base, MSG_SIZE);
    printf ("{\"bench\":\"zmq.ipc.proxy\",\"value\":%.0f,\"unit\":\"msg/s\",\"baseline\":%.0f,"
            "\"ratio\":%.3f}\n", v_prx, base, v_prx / base);
    //  proxy_ratio: against the bare ROUTER forwarder, the bound of any
    //  broker of our shape (target >= 0.9)
    printf ("{\"bench\":\"bus.oneway\",\"value\":%.0f,\"unit\":\"msg/s\",\"baseline\":%.0f,"
            "\"ratio\":%.3f,\"lost\":%ld,\"proxy_ratio\":%.3f,\"proxy_target\":0.9}\n",
            v_one, base, v_one / base, lost, v_one / v_prx);
    printf ("{\"bench\":\"bus.oneway.tapped\",\"value\":%.0f,\"unit\":\"msg/s\",\"baseline\":%.0f,"
            "\"ratio\":%.3f,\"lost\":%ld,\"tap_frames\":%ld}\n", v_tap, base, v_tap / base, tap_lost,
            tap_seen);
    printf ("{\"bench\":\"bus.oneway.inproc\",\"value\":%.0f,\"unit\":\"msg/s\",\"baseline\":%.0f,"
            "\"ratio\":%.3f,\"lost\":%ld}\n", v_inp, base, v_inp / base, inp_lost);
    printf ("{\"bench\":\"bus.roundtrip\",\"value\":%.1f,\"unit\":\"us\",\"p50\":%.1f}\n",
            s_median (p99, RUNS), s_median (p50, RUNS));
    fflush (stdout);
    return 0;
}

/*  bench/redis_peer.h — Redis Streams as the peer of the tape, measured in
    the same run of bench_tape (docs/bench.md).

    Starts its own `redis-server` (Debian's redis-server package; `make
    bench` installs it) on a loopback port with the durability the tape
    has: `appendonly yes`, `appendfsync always`, no RDB snapshots, its data
    under the bench's temporary folder. It is reached with a small RESP
    client of our own over plain sockets, one event loop for all clients,
    as redis-benchmark does, so the peer's figures are not bounded by a
    slow client. The payload is the tape's: a 150-byte field value.

    Figures:
      closed    N clients, one XADD in flight each: entries/s, p50/p99 µs
      pipelined N clients, DEPTH XADDs in flight each: entries/s
      e2e       one event at a time, XADD on one connection to a client
                blocked in XREAD on another: p50/p99 µs

    Header-only: each bench is one C file (Makefile). */
#ifndef SB_BENCH_REDIS_PEER_H
#define SB_BENCH_REDIS_PEER_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RP_PAYLOAD      150
#define RP_MAX_CLIENTS  128
#define RP_BUF          (1 << 20)

typedef struct {
    pid_t pid;
    int port;
    char dir [400];
    char why [256];             //  why the peer is unavailable, when it is
} rp_server_t;

typedef struct {
    int fd;
    char *in;                   //  bytes received and not yet parsed
    size_t in_len;
    int in_flight;
    double sent [4096];         //  send times of the in-flight requests, in order
    int head;
} rp_conn_t;

static double
rp_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
rp_connect (int port)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (connect (fd, (struct sockaddr *) &a, sizeof a) != 0) {
        close (fd);
        return -1;
    }
    int one = 1;
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

//  Length of the one RESP value at the start of buf, 0 when incomplete,
//  -1 when it is an error reply or malformed.
static long
rp_value_len (const char *buf, size_t len)
{
    if (len < 3)
        return 0;
    const char *crlf = memmem (buf, len, "\r\n", 2);
    if (!crlf)
        return 0;
    long head = crlf + 2 - buf;
    long n = strtol (buf + 1, NULL, 10);
    switch (buf [0]) {
        case '+': case ':': return head;
        case '-': return -1;
        case '$':
            if (n < 0)
                return head;
            return (size_t) (head + n + 2) <= len? head + n + 2: 0;
        case '*': {
            long at = head;
            for (long k = 0; k < n; k++) {
                long v = rp_value_len (buf + at, len - (size_t) at);
                if (v <= 0)
                    return v;
                at += v;
            }
            return at;
        }
        default: return -1;
    }
}

//  Appends one RESP command of `argc` strings to out; returns its length.
static size_t
rp_command (char *out, size_t cap, int argc, const char **argv)
{
    size_t n = (size_t) snprintf (out, cap, "*%d\r\n", argc);
    for (int k = 0; k < argc && n < cap; k++)
        n += (size_t) snprintf (out + n, cap - n, "$%zu\r\n%s\r\n", strlen (argv [k]), argv [k]);
    return n;
}

static int
rp_write_all (int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write (fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t) w;
    }
    return 0;
}

//  Reads one whole reply on a blocking socket into buf (cap bytes).
static int
rp_read_reply (int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (true) {
        long v = rp_value_len (buf, len);
        if (v < 0)
            return -1;
        if (v > 0)
            return 0;
        ssize_t r = read (fd, buf + len, cap - len);
        if (r <= 0)
            return -1;
        len += (size_t) r;
    }
}

static void
rp_stop (rp_server_t *s)
{
    if (s->pid > 0) {
        kill (s->pid, SIGTERM);
        int status;
        waitpid (s->pid, &status, 0);
        s->pid = 0;
    }
}

//  Starts redis-server under `dir`; 0, or -1 with s->why set.
static int
rp_start (rp_server_t *s, const char *dir)
{
    extern char **environ;
    memset (s, 0, sizeof *s);
    snprintf (s->dir, sizeof s->dir, "%s", dir);
    const char *bin = "/usr/bin/redis-server";
    if (access (bin, X_OK) != 0) {
        snprintf (s->why, sizeof s->why, "redis-server is not installed (Debian package redis-server)");
        return -1;
    }
    //  a free port: bind 0, read it, close; redis binds it right after
    int probe = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (probe < 0 || bind (probe, (struct sockaddr *) &a, sizeof a) != 0
    ||  getsockname (probe, (struct sockaddr *) &a, &alen) != 0) {
        snprintf (s->why, sizeof s->why, "no free loopback port");
        if (probe >= 0)
            close (probe);
        return -1;
    }
    s->port = ntohs (a.sin_port);
    close (probe);
    char port [16], log [480];
    snprintf (port, sizeof port, "%d", s->port);
    snprintf (log, sizeof log, "%s/redis.log", dir);
    char *argv [] = { (char *) bin, "--port", port, "--bind", "127.0.0.1", "--dir", (char *) dir,
                      "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                      "--logfile", log, "--daemonize", "no", "--protected-mode", "yes", NULL };
    if (posix_spawn (&s->pid, bin, NULL, NULL, argv, environ) != 0) {
        snprintf (s->why, sizeof s->why, "cannot start redis-server: %s", strerror (errno));
        return -1;
    }
    double t0 = rp_now ();
    while (rp_now () - t0 < 10) {
        int fd = rp_connect (s->port);
        if (fd >= 0) {
            char buf [64];
            const char *ping [] = { "PING" };
            char cmd [64];
            size_t n = rp_command (cmd, sizeof cmd, 1, ping);
            int ok = rp_write_all (fd, cmd, n) == 0 && rp_read_reply (fd, buf, sizeof buf) == 0
                     && strncmp (buf, "+PONG", 5) == 0;
            close (fd);
            if (ok)
                return 0;
        }
        usleep (2000);
    }
    rp_stop (s);
    snprintf (s->why, sizeof s->why, "redis-server did not answer within 10 s; see %s", log);
    return -1;
}

static void
rp_payload (char *out)
{
    for (int k = 0; k < RP_PAYLOAD; k++)
        out [k] = (char) ('a' + k % 26);
    out [RP_PAYLOAD] = 0;
}

static int
rp_dcmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y? -1: x > y;
}

//  nclients connections, `depth` XADDs in flight on each, to one stream,
//  for `seconds` after a 0.3 s warm-up. Returns entries/s; p50/p99 (µs)
//  of send->reply when asked.
static double
rp_xadd_run (const rp_server_t *s, int nclients, int depth, double seconds, double *p50, double *p99)
{
    if (nclients > RP_MAX_CLIENTS)
        nclients = RP_MAX_CLIENTS;
    if (depth > 4096)
        depth = 4096;
    char payload [RP_PAYLOAD + 1];
    rp_payload (payload);
    const char *xadd [] = { "XADD", "peer", "*", "d", payload };
    char one [512];
    size_t one_len = rp_command (one, sizeof one, 5, xadd);
    static rp_conn_t conns [RP_MAX_CLIENTS];
    struct pollfd pfd [RP_MAX_CLIENTS];
    for (int k = 0; k < nclients; k++) {
        conns [k] = (rp_conn_t) { .fd = rp_connect (s->port), .in = malloc (RP_BUF) };
        if (conns [k].fd < 0 || !conns [k].in) {
            fprintf (stderr, "redis_peer: cannot connect to port %d\n", s->port);
            exit (1);
        }
        pfd [k] = (struct pollfd) { conns [k].fd, POLLIN, 0 };
    }
    size_t lat_cap = 1 << 21, nlat = 0;
    double *lat = p50? malloc (lat_cap * sizeof *lat): NULL;
    char *burst = malloc (one_len * (size_t) depth);
    for (int k = 0; k < depth; k++)
        memcpy (burst + one_len * (size_t) k, one, one_len);
    double start = rp_now (), from = start + 0.3, end = from + seconds;
    long done = 0;
    for (int k = 0; k < nclients; k++) {
        double t = rp_now ();
        for (int d = 0; d < depth; d++)
            conns [k].sent [(conns [k].head + d) % 4096] = t;
        conns [k].in_flight = depth;
        if (rp_write_all (conns [k].fd, burst, one_len * (size_t) depth) != 0)
            exit (1);
    }
    int open = nclients;
    while (open > 0) {
        if (poll (pfd, (nfds_t) nclients, 5000) <= 0) {
            fprintf (stderr, "redis_peer: no reply within 5 s\n");
            exit (1);
        }
        double now = rp_now ();
        bool stopping = now >= end;
        for (int k = 0; k < nclients; k++) {
            rp_conn_t *c = &conns [k];
            if (!(pfd [k].revents & POLLIN))
                continue;
            ssize_t r = read (c->fd, c->in + c->in_len, RP_BUF - c->in_len);
            if (r <= 0) {
                fprintf (stderr, "redis_peer: connection lost\n");
                exit (1);
            }
            c->in_len += (size_t) r;
            size_t at = 0;
            int replies = 0;
            while (at < c->in_len) {
                long v = rp_value_len (c->in + at, c->in_len - at);
                if (v < 0) {
                    fprintf (stderr, "redis_peer: error reply: %.80s\n", c->in + at);
                    exit (1);
                }
                if (v == 0)
                    break;
                at += (size_t) v;
                double sent = c->sent [c->head];
                c->head = (c->head + 1) % 4096;
                c->in_flight--;
                replies++;
                if (sent >= from && now <= end) {
                    done++;
                    if (lat && nlat < lat_cap)
                        lat [nlat++] = (now - sent) * 1e6;
                }
            }
            memmove (c->in, c->in + at, c->in_len - at);
            c->in_len -= at;
            if (!stopping && replies) {
                for (int d = 0; d < replies; d++)
                    c->sent [(c->head + c->in_flight + d) % 4096] = now;
                c->in_flight += replies;
                if (rp_write_all (c->fd, burst, one_len * (size_t) replies) != 0)
                    exit (1);
            }
            if (stopping && c->in_flight == 0 && pfd [k].fd >= 0) {
                pfd [k].fd = -1;
                open--;
            }
        }
    }
    double rate = done / seconds;
    if (lat && nlat) {
        qsort (lat, nlat, sizeof *lat, rp_dcmp);
        *p50 = lat [nlat / 2];
        *p99 = lat [nlat * 99 / 100];
    }
    free (lat);
    free (burst);
    for (int k = 0; k < nclients; k++) {
        close (conns [k].fd);
        free (conns [k].in);
    }
    //  keep the AOF from growing across rounds
    int fd = rp_connect (s->port);
    const char *del [] = { "DEL", "peer" };
    char cmd [64], buf [64];
    size_t n = rp_command (cmd, sizeof cmd, 2, del);
    if (fd >= 0) {
        if (rp_write_all (fd, cmd, n) == 0)
            rp_read_reply (fd, buf, sizeof buf);
        close (fd);
    }
    return rate;
}

//  One event at a time: XADD on one connection, a reader blocked in XREAD
//  on another; `count` events, send->delivery p50/p99 in µs.
static int
rp_e2e_run (const rp_server_t *s, int count, double *p50, double *p99)
{
    int w = rp_connect (s->port), r = rp_connect (s->port);
    if (w < 0 || r < 0)
        return -1;
    char payload [RP_PAYLOAD + 1];
    rp_payload (payload);
    char *buf = malloc (RP_BUF);
    double *lat = malloc ((size_t) count * sizeof *lat);
    char last [64] = "$";
    char cmd [512];
    int rc = 0;
    for (int k = 0; k < count && rc == 0; k++) {
        const char *xread [] = { "XREAD", "BLOCK", "0", "STREAMS", "e2e", last };
        size_t n = rp_command (cmd, sizeof cmd, 6, xread);
        if (rp_write_all (r, cmd, n) != 0) {
            rc = -1;
            break;
        }
        //  the XREAD must be blocked in the server before the XADD, or it
        //  would measure nothing: a PING behind it on the same connection
        //  cannot tell, so wait for the server to report one blocked client
        for (double t0 = rp_now (); rp_now () - t0 < 5; ) {
            const char *info [] = { "INFO", "clients" };
            n = rp_command (cmd, sizeof cmd, 2, info);
            if (rp_write_all (w, cmd, n) != 0 || rp_read_reply (w, buf, RP_BUF) != 0) {
                rc = -1;
                break;
            }
            if (strstr (buf, "blocked_clients:1"))
                break;
        }
        const char *xadd [] = { "XADD", "e2e", "*", "d", payload };
        n = rp_command (cmd, sizeof cmd, 5, xadd);
        double t = rp_now ();
        if (rc || rp_write_all (w, cmd, n) != 0 || rp_read_reply (r, buf, RP_BUF) != 0) {
            rc = -1;
            break;
        }
        lat [k] = (rp_now () - t) * 1e6;
        //  the id of what we read is the next XREAD's cursor: "*1\r\n*2\r\n$3\r\ne2e\r\n*1\r\n*2\r\n$N\r\nID\r\n"
        char *id = strstr (buf, "e2e\r\n*1\r\n*2\r\n$");
        if (id) {
            id = strstr (id + 13, "\r\n");
            char *idend = id? strstr (id + 2, "\r\n"): NULL;
            if (id && idend && idend - id - 2 < (long) sizeof last) {
                memcpy (last, id + 2, (size_t) (idend - id - 2));
                last [idend - id - 2] = 0;
            }
        }
        if (rp_read_reply (w, buf, RP_BUF) != 0)    //  the XADD's own reply
            rc = -1;
    }
    if (rc == 0) {
        qsort (lat, (size_t) count, sizeof *lat, rp_dcmp);
        *p50 = lat [count / 2];
        *p99 = lat [count * 99 / 100];
    }
    free (lat);
    free (buf);
    close (w);
    close (r);
    return rc;
}

#endif

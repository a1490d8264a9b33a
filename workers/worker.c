/*  workers/worker.c — `switchboard worker`: an external worker
    (docs/workers.md).

    It registers with the run coordinator (worker.register), claims the
    oldest queued run of its pool (run.claim, a long-poll), and runs it
    on exec's own run host (actors/exec/host.h), which the exec actor
    uses too: the same start-up and tear-down, agent loop, context
    builder, tools, coalescing and fenced appends. The model is reached
    through the bus's llm actor, so the worker holds no provider key. The
    run thread heartbeats every min(5 s, lease/3); the heartbeat's reply
    carries cancel_requested, and a fenced reply (the lease lapsed and the
    run was taken away) stops the run without another write. One run at a
    time; a server that forgot the worker (a restart) is answered with a
    new registration. */
#include "cli/cli.h"
#include "cli/serve.h"
#include "actors/exec/host.h"
#include "bus/curve.h"
#include "common/log.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ACTOR "worker"
#define CLAIM_WAIT_MS 5000
#define CAPS_MAX 32

static const char *s_usage =
    "usage: switchboard worker [--connect ENDPOINT] [--data DIR] [--id NAME] [--pool P]\n"
    "                          [--workspace DIR] [--capability K=V]... [--lease S]\n"
    "                          [--cert FILE --server-key FILE[,FILE...]] [--sandbox KIND]\n"
    "\n"
    "Runs an external worker: it registers with the server, claims the oldest\n"
    "queued run of its pool, runs the agent loop on it (tools run here, the\n"
    "model is reached through the server: the worker holds no provider key)\n"
    "and reports it, then claims the next. A session sends its runs to a pool\n"
    "with 'switchboard sessions new --target worker:POOL'.\n"
    "\n"
    "  --connect EP      the server's command endpoint (default: ipc in DATA);\n"
    "                    EP1,EP2,... for the nodes of a cluster: one at a time,\n"
    "                    the next when it goes (docs/scale-out.md)\n"
    "  --data DIR        the server's data folder (for the default endpoint)\n"
    "  --id NAME         the worker's name (default: HOSTNAME-PID)\n"
    "  --pool P          the pool it claims from (default: default)\n"
    "  --workspace DIR   run tools in this checkout (workspace_sync none);\n"
    "                    without it the session's own folder is used, which\n"
    "                    must be the same path here (workspace_sync same_path)\n"
    "  --capability K=V  a capability to declare (repeatable, at most 32)\n"
    "  --lease S         lease length in seconds, 3 to 3600 (default 30); it\n"
    "                    heartbeats every min(5 s, S/3)\n"
    "  --cert FILE       its CURVE key pair for a tcp:// endpoint (the secret\n"
    "                    file 'switchboard keys new NAME' printed)\n"
    "  --server-key FILE the server's public certificate (DATA/certs/server);\n"
    "                    FILE1,FILE2,... one per --connect endpoint, in its\n"
    "                    order, for the nodes of a cluster (each node has a\n"
    "                    key of its own; one FILE serves every endpoint)\n"
    "  --sandbox KIND    where tools run, as in serve: auto\n"
    "                    (default), bwrap, landlock or none (docs/sandbox.md)\n"
    "  -h, --help        this help\n"
    "\n"
    "Stop it with Ctrl-C or SIGTERM: a run in progress is cancelled and\n"
    "reported first.\n";

static volatile sig_atomic_t s_stop;

static void
s_on_signal (int sig)
{
    (void) sig;
    s_stop = 1;
}

typedef struct {
    const char *endpoint;
    const char *sub_endpoint;
    char id [65];
    char instance [65];
    const char *pool;
    const char *workspace;
    char host [256];
    const char *caps [CAPS_MAX];
    int ncaps;
    uint64_t lease_s;
    sb_exec_host_t *runs;       /* its runs, one at a time (actors/exec/host.h) */
} worker_t;

/*  Registers with the server: 0 when registered, -1 when no server
    answered, 1 when one refused (its code in code, "CODE: message" in
    why, for the worker's last words: docs/workers.md). */
static int
s_register (worker_t *w, sb_bus_t *bus, char *code, size_t codelen, char *why, size_t whylen)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "worker_id", w->id);
    sb_enc_kstr (e, "instance_id", w->instance);
    sb_enc_kuint (e, "pid", (uint64_t) getpid ());
    sb_enc_kstr (e, "hostname", w->host);
    sb_enc_kstr (e, "pool", w->pool);
    sb_enc_kstr (e, "workspace_sync", w->workspace ? "none" : "same_path");
    if (w->ncaps) {
        sb_enc_key (e, "capabilities");
        sb_enc_map_open (e);
        for (int k = 0; k < w->ncaps; k++) {
            const char *eq = strchr (w->caps [k], '=');
            char key [128];
            snprintf (key, sizeof key, "%.*s", (int) (eq - w->caps [k]), w->caps [k]);
            sb_enc_kstr (e, key, eq + 1);
        }
        sb_enc_map_close (e);
    }
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (bus, "worker.register", NULL, b, len, 10000);
    sb_enc_destroy (&e);
    int rc = !reply ? -1 : sb_msg_is_error (reply) ? 1 : 0;
    if (rc > 0) {
        snprintf (code, codelen, "%s", sb_msg_error_code (reply));
        snprintf (why, whylen, "%s: %s", sb_msg_error_code (reply), sb_msg_error_message (reply));
    }
    if (rc)
        sb_warn (ACTOR, "worker.register failed: %s", reply ? sb_msg_error_message (reply) : "no answer");
    else
        sb_info (ACTOR, "registered worker=%s instance=%s pool=%s endpoint=%s", w->id, w->instance,
                 w->pool, w->endpoint);
    sb_msg_destroy (&reply);
    return rc;
}

/*  Runs one claimed run to its end (or to a stop), on exec's run host
    (actors/exec/host.h). The lease is the worker's: it sets the
    heartbeat period, min(5 s, lease/3). */
static void
s_execute (worker_t *w, const sb_val_t *claim)
{
    uint64_t lease_ms = sb_get_uint (claim, "lease_ms", w->lease_s * 1000);
    int hb_ms = (int) (lease_ms / 3 < 5000 ? lease_ms / 3 : 5000);
    if (sb_exec_host_start (w->runs, claim, sb_get_map (claim, "config"), hb_ms) != 0)
        return;
    const char *run_id = sb_get_str (claim, "run_id");
    sb_info (ACTOR, "run lease run=%s lease_ms=%llu heartbeat_ms=%d", run_id, (unsigned long long) lease_ms, hb_ms);
    bool cancelled = false;
    while (sb_exec_host_wait (w->runs, 200) > 0)
        if (s_stop && !cancelled) {
            /* stopping: the run is cancelled and reported, not abandoned */
            sb_exec_host_cancel (w->runs, run_id);
            cancelled = true;
        }
}

/*  One long-poll claim; returns its reply (or NULL: nothing, or stopped). */
static sb_msg_t *
s_claim (worker_t *w, sb_bus_t *bus)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "worker_id", w->id);
    sb_enc_kstr (e, "pool", w->pool);
    sb_enc_kuint (e, "lease_s", w->lease_s);
    sb_enc_kuint (e, "wait_ms", CLAIM_WAIT_MS);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    char id [SB_ULID_LEN + 1];
    int rc = sb_bus_send (bus, "run.claim", NULL, NULL, b, len, sb_now_ms () + CLAIM_WAIT_MS + 5000, id);
    sb_enc_destroy (&e);
    if (rc)
        return NULL;
    int64_t until = sb_mono_ms () + CLAIM_WAIT_MS + 5000;
    while (!s_stop && sb_mono_ms () < until) {
        /* between runs too: what a tool orphaned exits later, a zombie
           of ours until the host's sweep reaps it */
        sb_exec_host_tick (w->runs);
        sb_msg_t *msg = sb_bus_recv (bus, 200);
        if (!msg)
            continue;
        if (strcmp (msg->h.corr, id) == 0)
            return msg;
        sb_msg_destroy (&msg);
    }
    return NULL;
}

//  What the command line gives beyond the worker's own fields, and the
//  buffers that those fields point into.
typedef struct {
    const char *connect, *data, *id, *cert, *server_key, *sandbox;
    char wsbuf [PATH_MAX];
    char ep [4200], sub [4200];
} s_opts_t;

//  One --capability K=V, checked. Returns -1, or the exit code.
static int
s_add_capability (worker_t *w, const char *kv)
{
    if (w->ncaps >= CAPS_MAX)
        return sb_cli_usage ("worker", "at most %d --capability", CAPS_MAX);
    if (!strchr (kv, '=') || kv [0] == '=' || strchr (kv, '=') - kv > 64
    ||  strlen (strchr (kv, '=') + 1) > 256)
        return sb_cli_usage ("worker", "--capability takes K=V (K 1 to 64 bytes), not '%s'", kv);
    w->caps [w->ncaps++] = kv;
    return -1;
}

//  The command line into *w and *o. Returns -1 to go on, or the exit code
//  (0 after --help).
static int
s_parse (int argc, char **argv, worker_t *w, s_opts_t *o)
{
    static struct option longopts [] = {
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "id", required_argument, 0, 'i' },
        { "pool", required_argument, 0, 'p' },
        { "workspace", required_argument, 0, 'w' },
        { "capability", required_argument, 0, 'k' },
        { "lease", required_argument, 0, 'l' },
        { "cert", required_argument, 0, 'C' },
        { "server-key", required_argument, 0, 'S' },
        { "sandbox", required_argument, 0, 'x' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    int c, rc = -1;
    optind = 1;
    while (rc < 0 && (c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'c': o->connect = optarg; break;
            case 'd': o->data = optarg; break;
            case 'i': o->id = optarg; break;
            case 'p': w->pool = optarg; break;
            case 'w':
                if (!realpath (optarg, o->wsbuf))
                    return sb_cli_usage ("worker", "--workspace %s: %s", optarg, strerror (errno));
                w->workspace = o->wsbuf;
                break;
            case 'k': rc = s_add_capability (w, optarg); break;
            case 'l': {
                char *end;
                errno = 0;
                unsigned long long v = strtoull (optarg, &end, 10);
                if (!*optarg || *end || errno || v < 3 || v > 3600)
                    return sb_cli_usage ("worker", "--lease takes seconds from 3 to 3600, not '%s'", optarg);
                w->lease_s = v;
                break;
            }
            case 'C': o->cert = optarg; break;
            case 'S': o->server_key = optarg; break;
            case 'x': o->sandbox = optarg; break;
            case 'h': fputs (s_usage, stdout); return 0;
            default: return sb_cli_usage ("worker", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (rc >= 0)
        return rc;
    if (optind < argc)
        return sb_cli_usage ("worker", "unexpected argument '%s'", argv [optind]);
    if (!o->cert != !o->server_key)
        return sb_cli_usage ("worker", "--cert and --server-key go together");
    return -1;
}

//  The key pair, the sandbox, the worker's name and instance, and its
//  endpoints. Returns -1 to go on, or the exit code.
static int
s_prepare (worker_t *w, s_opts_t *o)
{
    if (sb_serve_sandbox_check ("worker", o->sandbox))
        return 2;
    char err [512];
    if (sb_cli_endpoint (o->connect, o->data, "cmd", o->ep, sizeof o->ep, err, sizeof err))
        return sb_cli_fail ("worker", "%s", err);
    w->endpoint = o->ep;
    w->sub_endpoint = sb_cli_endpoint (o->connect, o->data, "pub", o->sub, sizeof o->sub, err, sizeof err) == 0
                    ? o->sub : "";
    if (o->cert) {
        if (sb_curve_server_keys_fit (o->server_key, o->ep, err, sizeof err))
            return sb_cli_usage ("worker", "%s", err);
        /* the k-th server key is the k-th endpoint's, on both planes */
        if (sb_curve_client_set (o->cert, o->server_key, err, sizeof err)
        ||  sb_curve_client_endpoints (o->ep, err, sizeof err)
        ||  (*w->sub_endpoint && sb_curve_client_endpoints (w->sub_endpoint, err, sizeof err)))
            return sb_cli_fail ("worker", "%s", err);
    }
    /* tools run in the same box as the server's, blind to the worker's
       key pair and the data folder it was pointed at (docs/sandbox.md) */
    char dir [4096], derr [512];
    const char *secrets [] = {
        sb_cli_data_dir (o->data, dir, sizeof dir, derr, sizeof derr) == 0 ? dir : NULL, o->cert,
    };
    if (sb_serve_sandbox ("worker", o->sandbox, NULL, secrets, 2))
        return 1;
    gethostname (w->host, sizeof w->host - 1);
    if (o->id)
        snprintf (w->id, sizeof w->id, "%s", o->id);
    else
        snprintf (w->id, sizeof w->id, "%.40s-%d", w->host, (int) getpid ());
    char ulid [SB_ULID_LEN + 1];
    sb_ulid_new (ulid);
    snprintf (w->instance, sizeof w->instance, "%s", ulid);
    /* A worker key may not subscribe to the event plane over CURVE (it
       shows every session: docs/workers.md): an approval's answer is then
       learned by polling interact.get, once a second. */
    if (o->cert && strncmp (o->ep, "tcp://", 6) == 0)
        w->sub_endpoint = "";
    return -1;
}

//  Registers the worker. Returns 0, or the exit code with the reason
//  said: the server's refusal, or no answer and its likely cause.
static int
s_start (worker_t *w, sb_bus_t *bus, const s_opts_t *o)
{
    char refused [64], why [600];
    const char *ep = o->ep;
    int reg = s_register (w, bus, refused, sizeof refused, why, sizeof why);
    if (reg > 0)
        return sb_cli_fail_code ("worker", refused, "the server at %s refused worker.register for id '%s': %s", ep,
                                 w->id, why);
    if (reg < 0 && !o->cert && strncmp (ep, "tcp://", 6) == 0)
        /* a CURVE server never answers a plain client: the likely cause */
        return sb_cli_fail_code ("worker", "unavailable", "no server answered worker.register at %s within 10 s. "
                                 "A tcp:// bus is served with CURVE (unless 'serve --insecure-tcp'), and it "
                                 "answers only a known key: make one on the server with 'switchboard keys new "
                                 "NAME' (it prints the secret file's path, DATA/certs/clients/NAME_secret), copy "
                                 "that file and DATA/certs/server here, and start the worker with --cert "
                                 "NAME_secret --server-key server (docs/workers.md)", ep);
    if (reg < 0)
        return sb_cli_fail_code ("worker", "unavailable", "no server answered worker.register at %s within 10 s%s",
                                 ep, o->cert ? " (with --cert: is --server-key the server's DATA/certs/server, and "
                                 "the key in its DATA/certs/clients?)" : ": is the server running?");
    return 0;
}

/*  exec's run host for the worker's runs: its own checkout (or the
    session's folder), the final report run.complete, and neither a
    runtime cache nor MCP servers (a worker runs one run at a time, and
    reads no mcp.json). */
static sb_exec_host_t *
s_host_new (worker_t *w)
{
    sb_exec_host_opts_t opts = {
        .actor = ACTOR,
        .instance = w->id,
        .endpoint = w->endpoint,
        .sub_endpoint = w->sub_endpoint,
        .workspace = w->workspace,
        .finish_type = "run.complete",
        .worker_id = w->id,
    };
    return sb_exec_host_new (&opts);
}

//  Claims runs and runs them, one at a time, until a signal stops it.
static void
s_serve (worker_t *w, sb_bus_t *bus)
{
    char refused [64], why [600];
    while (!s_stop) {
        sb_msg_t *reply = s_claim (w, bus);
        if (!reply)
            continue;
        if (sb_msg_is_error (reply)) {
            sb_err_t code = sb_err_from_name (sb_msg_error_code (reply));
            sb_warn (ACTOR, "run.claim refused code=%s message=\"%s\"", sb_msg_error_code (reply),
                     sb_msg_error_message (reply));
            /* the server forgot us (it restarted): register again */
            if (code == SB_E_not_found)
                s_register (w, bus, refused, sizeof refused, why, sizeof why);
            else {
                struct pollfd p = { -1, 0, 0 };
                poll (&p, 0, 1000);     /* a refusal, not work: do not spin */
            }
        }
        else
        if (sb_get_str (reply->body, "run_id"))
            s_execute (w, reply->body);
        sb_msg_destroy (&reply);
    }
}

int
sb_cmd_worker (int argc, char **argv)
{
    worker_t w = { .pool = "default", .lease_s = 30 };
    s_opts_t o = { 0 };
    int rc = s_parse (argc, argv, &w, &o);
    if (rc < 0)
        rc = s_prepare (&w, &o);
    if (rc >= 0)
        return rc;

    /* as exec does: grandchildren a tool orphans come back here to be
       killed and reaped, and tool calls get cgroups where they can */
    w.runs = s_host_new (&w);
    /* czmq's own handler would take SIGINT and SIGTERM from us */
    zsys_handler_set (NULL);
    sb_bus_t *bus = sb_bus_new (o.ep, w.id);
    struct sigaction sa = { .sa_handler = s_on_signal };
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    signal (SIGPIPE, SIG_IGN);
    if (!bus || !w.runs) {
        sb_bus_destroy (&bus);
        sb_exec_host_destroy (&w.runs);
        return sb_cli_fail ("worker", "cannot connect to %s", o.ep);
    }
    rc = s_start (&w, bus, &o);
    if (rc) {
        /* never started: the reason is the last word, no "stopped" after it */
        sb_bus_destroy (&bus);
        sb_exec_host_destroy (&w.runs);
        return rc;
    }
    s_serve (&w, bus);
    sb_info (ACTOR, "stopped worker=%s", w.id);
    sb_bus_destroy (&bus);
    sb_exec_host_destroy (&w.runs);
    return 0;
}

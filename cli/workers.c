/*  cli/workers.c — `switchboard workers` and `switchboard worker-status`:
    the worker registry of the run coordinator (docs/workers.md). */
#include "cli/cli.h"

#include <getopt.h>
#include <string.h>

static const char *s_workers_head =
    "usage: switchboard workers [--pool P] [--json] [--connect EP] [--data DIR]\n";
static const char *s_status_head =
    "usage: switchboard worker-status ID [--json] [--connect EP] [--data DIR]\n";
static const char *s_workers_usage =
    "\n"
    "Lists the registered workers, or shows one: its status (idle, running,\n"
    "stale after 60 s without being heard from, offline after 300 s; set by\n"
    "SWITCHBOARD_WORKER_STALE_S and SWITCHBOARD_WORKER_OFFLINE_S on the server),\n"
    "the run it holds and its lease, and what it declared when it registered.\n"
    "\n"
    "  --pool P          only the workers of pool P (workers)\n"
    "  --json            one JSON document (workers: one JSON object per line)\n"
    "  --connect EP      the server's command endpoint (default: ipc in DATA)\n"
    "  --data DIR        the server's data folder\n"
    "  -h, --help        this help\n";

#define ROW "%-20s  %-8s  %-12s  %-26s  %-16s  %s\n"

static void
s_row (const sb_val_t *w)
{
    char seen [32];
    sb_cli_time_cell (sb_get_uint (w, "last_seen_at", 0), seen, sizeof seen);
    const char *run = sb_get_str (w, "current_run_id");
    const char *host = sb_get_str (w, "hostname");
    printf (ROW, sb_get_str (w, "worker_id"), sb_get_str (w, "status"), sb_get_str (w, "pool"),
            run ? run : "-", seen, host ? host : "-");
}

static void
s_show (const sb_val_t *w)
{
    char t [32];
    printf ("worker      %s\n", sb_get_str (w, "worker_id"));
    printf ("status      %s\n", sb_get_str (w, "status"));
    printf ("pool        %s\n", sb_get_str (w, "pool"));
    printf ("instance    %s\n", sb_get_str (w, "instance_id"));
    const char *host = sb_get_str (w, "hostname");
    printf ("host        %s (pid %llu)\n", host ? host : "-", (unsigned long long) sb_get_uint (w, "pid", 0));
    printf ("workspace   %s\n", sb_get_str (w, "workspace_sync"));
    const char *run = sb_get_str (w, "current_run_id");
    printf ("run         %s\n", run ? run : "-");
    if (sb_get (w, "lease_expires_at")) {
        sb_cli_time_cell (sb_get_uint (w, "lease_expires_at", 0), t, sizeof t);
        printf ("lease until %s\n", t);
    }
    sb_cli_time_cell (sb_get_uint (w, "last_seen_at", 0), t, sizeof t);
    printf ("last seen   %s\n", t);
    sb_cli_time_cell (sb_get_uint (w, "registered_at", 0), t, sizeof t);
    printf ("registered  %s\n", t);
    const sb_val_t *caps = sb_get_map (w, "capabilities");
    printf ("capabilities");
    for (uint32_t k = 0; caps && k < caps->len; k++) {
        const sb_val_t *key = sb_map_key (caps, k), *val = sb_map_val (caps, k);
        if (key->type == SB_V_STR && val->type == SB_V_STR)
            printf (" %.*s=%.*s", (int) key->len, key->v.s, (int) val->len, val->v.s);
    }
    printf (caps && caps->len ? "\n" : " -\n");
}

static int
s_main (const char *cmd, int argc, char **argv, bool one)
{
    static struct option longopts [] = {
        { "pool", required_argument, 0, 'p' },
        { "json", no_argument, 0, 'j' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *pool = NULL, *connect = NULL, *data = NULL;
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'p': pool = optarg; break;
            case 'j': json = true; break;
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 'h':
                fputs (one ? s_status_head : s_workers_head, stdout);
                fputs (one ? "       switchboard workers [--pool P] [--json]\n"
                           : "       switchboard worker-status ID [--json]\n", stdout);
                fputs (s_workers_usage, stdout);
                return 0;
            default: return sb_cli_usage (cmd, "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    const char *id = NULL;
    if (one) {
        if (optind >= argc)
            return sb_cli_usage (cmd, "needs a worker id");
        id = argv [optind++];
        if (pool)
            return sb_cli_usage (cmd, "--pool goes with workers");
    }
    if (optind < argc)
        return sb_cli_usage (cmd, "unexpected argument '%s'", argv [optind]);
    sb_bus_t *bus = sb_cli_connect (cmd, connect, data);
    if (!bus)
        return 1;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    if (id)
        sb_enc_kstr (e, "worker_id", id);
    sb_enc_kstr_opt (e, "pool", pool);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call (cmd, bus, one ? "worker.get" : "worker.list", b, len, 10000);
    sb_enc_destroy (&e);
    int rc = 1;
    if (reply) {
        rc = 0;
        if (one) {
            const sb_val_t *w = sb_get_map (reply->body, "worker");
            if (json)
                sb_cli_print_json (w);
            else
                s_show (w);
        }
        else {
            const sb_val_t *ws = sb_get (reply->body, "workers");
            if (!json)
                printf (ROW, "WORKER", "STATUS", "POOL", "RUN", "LAST SEEN", "HOST");
            for (uint32_t k = 0; ws && k < ws->len; k++) {
                if (json)
                    sb_cli_print_json (&ws->v.a [k]);
                else
                    s_row (&ws->v.a [k]);
            }
        }
        sb_msg_destroy (&reply);
    }
    sb_bus_destroy (&bus);
    return rc;
}

int
sb_cmd_workers (int argc, char **argv)
{
    return s_main ("workers", argc, argv, false);
}

int
sb_cmd_worker_status (int argc, char **argv)
{
    return s_main ("worker-status", argc, argv, true);
}

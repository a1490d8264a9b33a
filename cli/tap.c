/*  cli/tap.c — `switchboard tap`: every bus message, live, one per line;
    and `switchboard stats`: the broker's counters. */
#include "cli/cli.h"
#include "bus/tap.h"
#include "common/log.h"
#include "schemas/json.h"

#include <czmq.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *s_tap_usage =
    "usage: switchboard tap [--filter PREFIX] [--exclude PREFIX]... [--heartbeats] [--json]\n"
    "                       [--count N] [--connect EP] [--data DIR]\n"
    "\n"
    "Prints every message on both bus planes as the broker sees it, decoded,\n"
    "one per line. The tap's frames are [plane][peer or topic][header][body].\n"
    "Heartbeats (bus.heartbeat, run.heartbeat and its reply), one a second per\n"
    "peer, are hidden unless --heartbeats is given.\n"
    "\n"
    "  --filter PREFIX  only messages whose type or topic starts with PREFIX\n"
    "  --exclude PREFIX leave out messages whose type or topic starts with PREFIX\n"
    "                   (repeatable)\n"
    "  --heartbeats     show heartbeats too\n"
    "  --json           one JSON object per line: plane, peer/topic, header, body\n"
    "  --count N        exit after N messages\n"
    "  --connect EP     the server's command endpoint (tap is derived from it)\n"
    "  --data DIR       the server's data folder\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed, 2 usage error.\n";

#define MAX_EXCLUDES 32

int
sb_cmd_tap (int argc, char **argv)
{
    static struct option longopts [] = {
        { "filter", required_argument, 0, 'f' },
        { "exclude", required_argument, 0, 'x' },
        { "heartbeats", no_argument, 0, 'H' },
        { "json", no_argument, 0, 'j' },
        { "count", required_argument, 0, 'n' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *filter = NULL, *connect = NULL, *data = NULL;
    const char *excludes [MAX_EXCLUDES];
    size_t nexcludes = 0;
    bool json = false, heartbeats = false;
    long count = -1;
    char *end;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'f': filter = optarg; break;
            case 'x':
                if (nexcludes == MAX_EXCLUDES)
                    return sb_cli_usage ("tap", "at most %d --exclude options", MAX_EXCLUDES);
                excludes [nexcludes++] = optarg;
                break;
            case 'H': heartbeats = true; break;
            case 'j': json = true; break;
            case 'n':
                count = strtol (optarg, &end, 10);
                if (*end || count <= 0)
                    return sb_cli_usage ("tap", "--count takes a positive number, not '%s'", optarg);
                break;
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 'h': fputs (s_tap_usage, stdout); return 0;
            default: return sb_cli_usage ("tap", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (optind < argc)
        return sb_cli_usage ("tap", "unexpected argument '%s'", argv [optind]);
    char ep [4200], err [512];
    if (sb_cli_endpoint (connect, data, "tap", ep, sizeof ep, err, sizeof err))
        return sb_cli_fail ("tap", "%s", err);
    //  A SUB socket connects lazily and would wait for ever on a server
    //  that is not there; an ipc endpoint can be checked first.
    struct stat st;
    if (strncmp (ep, "ipc://", 6) == 0 && stat (ep + 6, &st) != 0)
        return sb_cli_fail_code ("tap", "unavailable", "no server at %s: start one with 'switchboard serve' "
                                 "(or pass --connect/--data)", ep);
    zsys_handler_set (NULL);
    zsock_t *sub = zsock_new (ZMQ_SUB);
    if (!sub || zsock_connect (sub, "%s", ep) != 0) {
        zsock_destroy (&sub);
        return sb_cli_fail ("tap", "cannot connect to %s", ep);
    }
    zsock_set_subscribe (sub, "");
    zsock_set_rcvhwm (sub, 100000);
    fprintf (stderr, "tapping %s%s%s\n", ep, filter ? " filter=" : "", filter ? filter : "");
    long seen = 0;
    while (count < 0 || seen < count) {
        zmsg_t *msg = zmsg_recv (sub);
        if (!msg)
            break;
        sb_tap_msg_t t;
        if (sb_tap_parse (msg, &t)) {
            zmsg_destroy (&msg);
            continue;
        }
        bool shown = !filter || sb_tap_matches (&t, filter);
        for (size_t k = 0; k < nexcludes && shown; k++)
            shown = !sb_tap_matches (&t, excludes [k]);
        if (!shown || (!heartbeats && sb_tap_is_heartbeat (t.h.type))) {
            zmsg_destroy (&msg);
            continue;
        }
        if (json) {
            char *line = sb_tap_json (&t, NULL);
            if (line)
                printf ("%s\n", line);
            free (line);
        }
        else {
            char *body = sb_tap_body_json (&t);
            struct timespec ts;
            clock_gettime (CLOCK_REALTIME, &ts);
            struct tm tm;
            localtime_r (&ts.tv_sec, &tm);
            printf ("%02d:%02d:%02d.%03ld %s %-14.14s %-22s from=%s%s%s %s\n",
                    tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                    t.evt ? "evt" : "cmd", t.who, t.h.type, t.h.from [0] ? t.h.from : "-",
                    t.h.corr [0] ? " corr=" : "", t.h.corr, body ? body : "(undecodable body)");
            free (body);
        }
        fflush (stdout);
        zmsg_destroy (&msg);
        seen++;
    }
    zsock_destroy (&sub);
    return 0;
}

static const char *s_stats_usage =
    "usage: switchboard stats [--json] [--connect EP] [--data DIR]\n"
    "\n"
    "Prints the broker's counters: messages per plane and per type, live\n"
    "instances per service, malformed frames by kind, queue depths and\n"
    "bytes, what the byte bounds dropped per plane, and each store's backend\n"
    "(lmdb or postgresql) with its durable writes' latency, p50 and p99.\n";

static void
s_print_section (const char *title, const sb_val_t *map)
{
    printf ("%s\n", title);
    for (uint32_t k = 0; map && k < map->len; k++) {
        const sb_val_t *key = sb_map_key (map, k), *val = sb_map_val (map, k);
        if (val->type == SB_V_UINT)
            printf ("  %-28s %llu\n", key->v.s, (unsigned long long) val->v.u);
        else
        if (val->type == SB_V_MAP) {
            char *j = sb_json_dump (sb_get (val, "instances"));
            printf ("  %-28s %llu live  %s\n", key->v.s,
                    (unsigned long long) sb_get_uint (val, "live", 0), j ? j : "");
            free (j);
        }
    }
}

//  One line per store: its backend, writes, and their latency.
static void
s_print_store (const sb_val_t *map)
{
    if (!map)
        return;
    printf ("store\n");
    for (uint32_t k = 0; k < map->len; k++) {
        const sb_val_t *key = sb_map_key (map, k), *val = sb_map_val (map, k);
        if (key->type != SB_V_STR || val->type != SB_V_MAP)
            continue;
        const char *backend = sb_get_str (val, "backend");
        printf ("  %-28s %s  writes %llu  write p50 %.3f ms  p99 %.3f ms  retries %llu\n", key->v.s,
                backend ? backend : "-", (unsigned long long) sb_get_uint (val, "writes", 0),
                (double) sb_get_uint (val, "write_p50_us", 0) / 1000.0,
                (double) sb_get_uint (val, "write_p99_us", 0) / 1000.0,
                (unsigned long long) sb_get_uint (val, "retries", 0));
    }
}

//  The node: standalone (LMDB), or a member of a cluster with the shards
//  it holds and its heartbeat.
static void
s_print_node (const sb_val_t *map)
{
    const char *role = sb_get_str (map, "role");
    if (!role)
        return;
    if (strcmp (role, "member") != 0) {
        printf ("node\n  role standalone (one host, LMDB)\n");
        return;
    }
    const char *id = sb_get_str (map, "node_id"), *cl = sb_get_str (map, "cluster");
    const char *ranges = sb_get_str (map, "shard_ranges");
    printf ("node\n  role member  id %s  cluster %s\n  shards %llu of %llu (%s)  gained %llu  lost %llu  "
            "fenced writes %llu\n  heartbeat every %llu ms, lease %llu ms  beats %llu  failed %llu  "
            "last %lld ms ago, took %.3f ms\n",
            id ? id : "-", cl ? cl : "-", (unsigned long long) sb_get_uint (map, "shards", 0),
            (unsigned long long) sb_get_uint (map, "shards_total", 0), ranges ? ranges : "-",
            (unsigned long long) sb_get_uint (map, "shards_gained", 0),
            (unsigned long long) sb_get_uint (map, "shards_lost", 0),
            (unsigned long long) sb_get_uint (map, "fenced", 0),
            (unsigned long long) sb_get_uint (map, "heartbeat_ms", 0),
            (unsigned long long) sb_get_uint (map, "lease_ms", 0),
            (unsigned long long) sb_get_uint (map, "beats", 0),
            (unsigned long long) sb_get_uint (map, "beat_failures", 0),
            (long long) sb_get_int (map, "last_beat_age_ms", -1),
            (double) sb_get_uint (map, "last_beat_us", 0) / 1000.0);
}

int
sb_cmd_stats (int argc, char **argv)
{
    sb_cli_opts_t o;
    int parsed = sb_cli_parse_opts (argc, argv, "stats", s_stats_usage, &o);
    if (parsed >= 0)
        return parsed;
    const char *connect = o.connect, *data = o.data;
    bool json = o.json;
    if (optind < argc)
        return sb_cli_usage ("stats", "unexpected argument '%s'", argv [optind]);
    sb_bus_t *bus = sb_cli_connect ("stats", connect, data);
    if (!bus)
        return 1;
    sb_msg_t *reply = sb_cli_call ("stats", bus, "bus.stats", (const uint8_t *) "\x80", 1, 3000);
    int rc = 1;
    if (reply) {
        if (json)
            sb_cli_print_json (reply->body);
        else {
            printf ("uptime %.1f s\n", (double) sb_get_uint (reply->body, "uptime_ms", 0) / 1000.0);
            s_print_section ("planes", sb_get_map (reply->body, "planes"));
            s_print_section ("services", sb_get_map (reply->body, "services"));
            s_print_section ("types", sb_get_map (reply->body, "types"));
            s_print_section ("malformed", sb_get_map (reply->body, "malformed"));
            s_print_section ("queues", sb_get_map (reply->body, "queues"));
            s_print_section ("dropped past the byte bounds", sb_get_map (reply->body, "dropped"));
            s_print_store (sb_get_map (reply->body, "store"));
            s_print_node (sb_get_map (reply->body, "node"));
            s_print_section ("blobs", sb_get_map (reply->body, "blobs"));
        }
        rc = 0;
    }
    sb_msg_destroy (&reply);
    sb_bus_destroy (&bus);
    return rc;
}

/*  cli/nodes.c — `switchboard nodes`: the nodes of a cluster, read straight
    from its PostgreSQL database (cluster/cluster.h), not from a server, so
    that it works when no node runs, or when the one asked is the one that
    is down. */
#include "cli/cli.h"
#include "cli/nodes.h"
#include "cluster/cluster.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_usage =
    "usage: switchboard nodes [--store URL] [--json]\n"
    "\n"
    "Lists the nodes of the cluster whose state is on PostgreSQL at URL: each\n"
    "node's id, its bus and event endpoints, how long ago it last beat (by the\n"
    "database's clock), whether it is alive (it beat within its lease), and the\n"
    "shards it owns (count and ranges), then the shards nobody owns. A node that\n"
    "stopped without leaving stays listed, not alive, until it comes back.\n"
    "\n"
    "  --store URL       postgresql://USER@HOST:PORT/DB[?schema=NAME], as serve\n"
    "                    takes it (default $SWITCHBOARD_STORE); the cluster is\n"
    "                    in the schema NAME_cluster (switchboard_cluster)\n"
    "  --json            one JSON document: {\"schema\", \"shards\", \"nodes\": [...],\n"
    "                    \"unowned\"}\n"
    "  -h, --help        this help\n";

static void
s_age (int64_t ms, char *out, size_t size)
{
    if (ms < 60000)
        snprintf (out, size, "%.1fs ago", (double) ms / 1000.0);
    else
    if (ms < 3600000)
        snprintf (out, size, "%lldm ago", (long long) (ms / 60000));
    else
        snprintf (out, size, "%lldh ago", (long long) (ms / 3600000));
}

static void
s_text (const sb_cluster_info_t *list, size_t count, uint64_t unowned)
{
    printf ("%-20s  %-26s  %-26s  %-10s  %-5s  %s\n", "NODE", "BUS", "EVENTS", "BEAT", "STATE", "SHARDS");
    char age [32], ranges [256];
    for (size_t i = 0; i < count; i++) {
        const sb_cluster_info_t *n = &list [i];
        s_age (n->heartbeat_age_ms, age, sizeof age);
        sb_cluster_ranges (n->shards, ranges, sizeof ranges);
        printf ("%-20s  %-26s  %-26s  %-10s  %-5s  %d %s\n", n->node_id,
                *n->bus_endpoint? n->bus_endpoint: "-", *n->event_endpoint? n->event_endpoint: "-",
                age, n->alive? "alive": "dead", __builtin_popcountll (n->shards), ranges);
    }
    sb_cluster_ranges (unowned, ranges, sizeof ranges);
    printf ("%zu node%s; unowned shards: %d %s\n", count, count == 1? "": "s",
            __builtin_popcountll (unowned), ranges);
}

static json_t *
s_node_json (const sb_cluster_info_t *n)
{
    char ranges [256];
    sb_cluster_ranges (n->shards, ranges, sizeof ranges);
    json_t *shards = json_array ();
    for (int s = 0; s < SB_CLUSTER_SHARDS; s++)
        if (n->shards & (1ull << s))
            json_array_append_new (shards, json_integer (s));
    return json_pack ("{s:s,s:s,s:s,s:s,s:I,s:I,s:i,s:b,s:i,s:s,s:o}",
                      "node_id", n->node_id, "bus_endpoint", n->bus_endpoint,
                      "event_endpoint", n->event_endpoint, "curve_public", n->curve_public,
                      "started_at", (json_int_t) n->started_at,
                      "heartbeat_age_ms", (json_int_t) n->heartbeat_age_ms,
                      "lease_ms", (int) n->lease_ms, "alive", n->alive,
                      "shard_count", __builtin_popcountll (n->shards), "shard_ranges", ranges,
                      "shards", shards);
}

static int
s_json (const char *schema, const sb_cluster_info_t *list, size_t count, uint64_t unowned)
{
    json_t *nodes = json_array ();
    for (size_t i = 0; i < count; i++)
        json_array_append_new (nodes, s_node_json (&list [i]));
    char ranges [256];
    sb_cluster_ranges (unowned, ranges, sizeof ranges);
    json_t *doc = json_pack ("{s:s,s:i,s:o,s:i,s:s}", "schema", schema, "shards", SB_CLUSTER_SHARDS,
                             "nodes", nodes, "unowned_count", __builtin_popcountll (unowned),
                             "unowned", ranges);
    char *text = doc? json_dumps (doc, JSON_COMPACT): NULL;
    json_decref (doc);
    if (!text)
        return sb_cli_fail ("nodes", "out of memory");
    printf ("%s\n", text);
    free (text);
    return 0;
}

int
sb_cmd_nodes (int argc, char **argv)
{
    static struct option opts [] = {
        { "store", required_argument, 0, 's' }, { "json", no_argument, 0, 'j' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    const char *url = getenv ("SWITCHBOARD_STORE");
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
            case 's': url = optarg; break;
            case 'j': json = true; break;
            case 'h': fputs (s_usage, stdout); return 0;
            default: return sb_cli_usage ("nodes", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (optind < argc)
        return sb_cli_usage ("nodes", "unexpected argument: %s", argv [optind]);
    if (!url || !*url)
        return sb_cli_usage ("nodes", "no store: give --store URL or set SWITCHBOARD_STORE");
    if (strncmp (url, "postgres://", 11) != 0 && strncmp (url, "postgresql://", 13) != 0)
        return sb_cli_usage ("nodes", "the store must be a postgres:// or postgresql:// URL "
                             "(a data folder is one host, with no nodes to list)");
    sb_cluster_info_t *list;
    size_t count;
    char err [512] = "";
    if (sb_cluster_nodes_read (url, &list, &count, err, sizeof err) != 0)
        return sb_cli_fail ("nodes", "%s", err);
    uint64_t owned = 0;
    for (size_t i = 0; i < count; i++)
        owned |= list [i].shards;
    uint64_t unowned = ~owned;
    char schema [64];
    sb_cluster_url_schema (url, schema, sizeof schema);
    int rc = 0;
    if (json)
        rc = s_json (schema, list, count, unowned);
    else
        s_text (list, count, unowned);
    sb_cluster_nodes_free (&list);
    return rc;
}

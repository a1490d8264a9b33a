/*  cli/serve_cluster.c — serve as a node of a cluster (docs/scale-out.md,
    "A node in serve"): with the state on PostgreSQL, serve joins the
    cluster kept in that database, with no flag of its own. Its id, its
    endpoints and its bus's CURVE public key go to the nodes table; it
    holds shard leases instead of the one-server advisory lock, and the
    member thread (cluster/member.c) beats and balances them. */
#include "cli/cli.h"
#include "cli/serve.h"
#include "bus/curve.h"
#include "cluster/cluster.h"
#include "store/outbox.h"
#include "common/log.h"
#include "schemas/codec.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  The node's id: SWITCHBOARD_NODE_ID when set, else the host's name and
//  a hash of the data folder's real path, so that two nodes on one host
//  differ and a node that restarts on its folder comes back as itself
//  (and releases what its previous run still held).
static void
s_node_id (const char *dir, char *out, size_t size)
{
    const char *env = getenv ("SWITCHBOARD_NODE_ID");
    if (env && *env) {
        snprintf (out, size, "%s", env);
        return;
    }
    char host [256] = "node", real [PATH_MAX];
    if (gethostname (host, sizeof host) != 0 || !*host)
        snprintf (host, sizeof host, "node");
    host [sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (!isalnum ((unsigned char) *c) && *c != '.' && *c != '_' && *c != '-')
            *c = '-';
    if (!realpath (dir, real))
        snprintf (real, sizeof real, "%s", dir);
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *) real; *p; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    snprintf (out, size, "%.50s-%08x", host, h);
}

//  --bus tcp://ADDR:PORT: commands on PORT, events on PORT + 1.
static void
s_endpoints (const sb_serve_opts_t *o, char *bus, char *events, size_t size)
{
    *bus = *events = 0;
    if (!o->bus)
        return;
    snprintf (bus, size, "%s", o->bus);
    const char *colon = strrchr (o->bus, ':');
    int port = colon ? atoi (colon + 1) : 0;
    if (colon && port > 0 && port < 65535)
        snprintf (events, size, "%.*s:%d", (int) (colon - o->bus), o->bus, port + 1);
}

//  After each beat (on the member's thread): the bus keys of the live
//  nodes, as the database gives them, are allowed on this node's bus
//  (role actor), so that they can forward requests to it; a node that
//  joins is allowed within a beat of its registration.
typedef struct {
    sb_cluster_t *cluster;
    char dir [4096];
    char allowed [SB_CLUSTER_SHARDS][SB_CLUSTER_ID_MAX + SB_CLUSTER_KEY_MAX + 2];
} s_keys_t;

static s_keys_t s_keys;

static void
s_allow_owners (uint64_t gained, uint64_t lost, void *arg)
{
    (void) gained;
    (void) lost;
    s_keys_t *k = arg;
    sb_cluster_info_t *list = NULL;
    size_t count = 0;
    if (sb_cluster_nodes_list (k->cluster, &list, &count) != 0)
        return;
    for (size_t n = 0; n < count; n++) {
        const sb_cluster_info_t *o = &list [n];
        if (!o->alive || !*o->curve_public || strcmp (o->node_id, sb_cluster_node_id (k->cluster)) == 0)
            continue;
        char both [sizeof k->allowed [0]];
        snprintf (both, sizeof both, "%s %s", o->node_id, o->curve_public);
        size_t i = 0;
        while (i < SB_CLUSTER_SHARDS && k->allowed [i][0] && strcmp (k->allowed [i], both) != 0)
            i++;
        if (i < SB_CLUSTER_SHARDS && !k->allowed [i][0]) {
            if (sb_curve_node_allow (k->dir, o->node_id, o->curve_public) == 0)
                snprintf (k->allowed [i], sizeof k->allowed [i], "%s", both);
            else
                sb_warn ("serve", "cannot allow node %s's key on the bus", o->node_id);
        }
    }
    sb_cluster_nodes_free (&list);
}

sb_cluster_t *
sb_serve_cluster_open (const sb_serve_opts_t *o, const char *dir, char *err, size_t errlen)
{
    char id [SB_CLUSTER_ID_MAX + 1], bus [SB_CLUSTER_EP_MAX + 1], events [SB_CLUSTER_EP_MAX + 1];
    char pub [SB_CLUSTER_KEY_MAX + 1] = "";
    s_node_id (dir, id, sizeof id);
    s_endpoints (o, bus, events, sizeof bus);
    if (!o->bus)
        sb_warn ("serve", "node %s has no --bus tcp://ADDR:PORT: other nodes cannot reach it", id);
    if (o->bus && !o->insecure_bus) {
        zcert_t *cert = sb_curve_server_cert (dir, err, errlen);
        if (!cert)
            return NULL;
        snprintf (pub, sizeof pub, "%s", zcert_public_txt (cert));
        zcert_destroy (&cert);
    }
    sb_cluster_config_t cfg = { .node_id = id, .bus_endpoint = bus, .event_endpoint = events,
                                .curve_public = *pub ? pub : NULL };
    sb_cluster_t *c = sb_cluster_open (o->store, &cfg, err, errlen);
    if (!c)
        return NULL;
    sb_outbox_scope (id);
    s_keys.cluster = c;
    snprintf (s_keys.dir, sizeof s_keys.dir, "%s", dir);
    if (sb_cluster_member_start (c, s_allow_owners, &s_keys) != 0) {
        snprintf (err, errlen, "node %s could not start its heartbeat", id);
        sb_cluster_destroy (&c);
        return NULL;
    }
    char ranges [256];
    sb_cluster_ranges (sb_cluster_held (c), ranges, sizeof ranges);
    sb_info ("serve", "node %s joined cluster=%s bus=%s lease_ms=%u heartbeat_ms=%u shards=%d (%s)", id,
             sb_cluster_schema (c), *bus ? bus : "-", sb_cluster_lease_ms (c), sb_cluster_heartbeat_ms (c),
             __builtin_popcountll (sb_cluster_held (c)), ranges);
    return c;
}

void
sb_serve_cluster_close (sb_cluster_t **c_p)
{
    if (!*c_p)
        return;
    sb_cluster_member_stop (*c_p);
    sb_cluster_destroy (c_p);
}

void
sb_serve_cluster_stats (sb_cluster_t *c, sb_enc_t *e)
{
    sb_enc_key (e, "node");
    sb_enc_map_open (e);
    if (!c) {
        //  LMDB: one host, one writer, every session its own
        sb_enc_kstr (e, "role", "standalone");
        sb_enc_map_close (e);
        return;
    }
    sb_cluster_stats_t st;
    sb_cluster_stats (c, &st);
    char ranges [256];
    sb_cluster_ranges (st.held, ranges, sizeof ranges);
    sb_enc_kstr (e, "role", "member");
    sb_enc_kstr (e, "node_id", sb_cluster_node_id (c));
    sb_enc_kstr (e, "cluster", sb_cluster_schema (c));
    sb_enc_kuint (e, "shards", (uint64_t) __builtin_popcountll (st.held));
    sb_enc_kstr (e, "shard_ranges", ranges);
    sb_enc_kuint (e, "shards_total", SB_CLUSTER_SHARDS);
    sb_enc_kuint (e, "lease_ms", sb_cluster_lease_ms (c));
    sb_enc_kuint (e, "heartbeat_ms", sb_cluster_heartbeat_ms (c));
    sb_enc_kuint (e, "beats", st.beats);
    sb_enc_kuint (e, "beat_failures", st.beat_failures);
    sb_enc_kint (e, "last_beat_age_ms", st.last_beat_age_ms);
    sb_enc_kuint (e, "last_beat_us", st.last_beat_us);
    sb_enc_kuint (e, "shards_gained", st.gained);
    sb_enc_kuint (e, "shards_lost", st.lost);
    sb_enc_kuint (e, "fenced", st.fenced);
    sb_enc_map_close (e);
}

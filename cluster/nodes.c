/*  cluster/nodes.c — the list of nodes and what each owns, for a node
    (sb_cluster_nodes_list) and for `switchboard nodes`, which reads the
    tables without joining (sb_cluster_nodes_read). */
#include "cluster/cluster_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_field (char *out, size_t size, PGresult *res, int row, int col)
{
    snprintf (out, size, "%s", PQgetvalue (res, row, col));
}

int
sb_cluster_db_nodes (sb_cluster_db_t *db, sb_cluster_info_t **list_p, size_t *count_p)
{
    *list_p = NULL;
    *count_p = 0;
    //  Ages and liveness by the database's clock; the shards as a list of
    //  the live leases each node holds.
    PGresult *res;
    int rc = sb_cluster_db_exec (db,
        "SELECT n.node_id, n.bus_endpoint, n.event_endpoint, n.curve_public, "
        "(extract (epoch FROM n.started_at) * 1000)::bigint, "
        "greatest (0, (extract (epoch FROM now () - n.heartbeat_at) * 1000)::bigint), n.lease_ms, "
        "n.heartbeat_at + n.lease_ms * interval '1 millisecond' > now (), "
        "coalesce ((SELECT string_agg (l.shard::text, ',') FROM @.shard_leases l "
        "WHERE l.owner = n.node_id AND l.expires_at > now ()), '') "
        "FROM @.nodes n ORDER BY n.node_id", 0, NULL, &res);
    if (rc != 0)
        return rc;
    int rows = PQntuples (res);
    sb_cluster_info_t *list = (sb_cluster_info_t *) calloc ((size_t) rows + 1, sizeof *list);
    if (!list) {
        PQclear (res);
        return -ENOMEM;
    }
    for (int r = 0; r < rows; r++) {
        sb_cluster_info_t *n = &list [r];
        s_field (n->node_id, sizeof n->node_id, res, r, 0);
        s_field (n->bus_endpoint, sizeof n->bus_endpoint, res, r, 1);
        s_field (n->event_endpoint, sizeof n->event_endpoint, res, r, 2);
        s_field (n->curve_public, sizeof n->curve_public, res, r, 3);
        n->started_at = atoll (PQgetvalue (res, r, 4));
        n->heartbeat_age_ms = atoll (PQgetvalue (res, r, 5));
        n->lease_ms = (unsigned) atol (PQgetvalue (res, r, 6));
        n->alive = strcmp (PQgetvalue (res, r, 7), "t") == 0;
        for (const char *p = PQgetvalue (res, r, 8); *p; ) {
            int s = atoi (p);
            if (s >= 0 && s < SB_CLUSTER_SHARDS)
                n->shards |= 1ull << s;
            p += strcspn (p, ",");
            p += *p == ',';
        }
    }
    PQclear (res);
    *list_p = list;
    *count_p = (size_t) rows;
    return 0;
}

int
sb_cluster_nodes_list (sb_cluster_t *self, sb_cluster_info_t **list, size_t *count)
{
    if (!self || !list || !count)
        return SB_STORE_INVALID;
    return sb_cluster_db_nodes (&self->db, list, count);
}

int
sb_cluster_nodes_read (const char *url, sb_cluster_info_t **list, size_t *count,
                       char *err, size_t errlen)
{
    if (!list || !count)
        return SB_STORE_INVALID;
    *list = NULL;
    *count = 0;
    sb_cluster_db_t db;
    if (sb_cluster_db_open (&db, url, err, errlen) != 0) {
        sb_cluster_db_close (&db);
        return SB_STORE_BACKEND;
    }
    int rc = sb_cluster_db_exists (&db);
    if (rc == 1)
        rc = sb_cluster_db_nodes (&db, list, count);
    else
    if (rc == 0)
        *list = (sb_cluster_info_t *) calloc (1, sizeof **list);
    if (rc != 0)
        snprintf (err, errlen, "cluster: %s: cannot read the nodes of schema %s", db.where, db.schema);
    sb_cluster_db_close (&db);
    return rc;
}

void
sb_cluster_nodes_free (sb_cluster_info_t **list)
{
    if (list) {
        free (*list);
        *list = NULL;
    }
}

void
sb_cluster_ranges (uint64_t shards, char *out, size_t size)
{
    if (size == 0)
        return;
    out [0] = 0;
    size_t n = 0;
    for (int s = 0; s < SB_CLUSTER_SHARDS && n < size; s++) {
        if (!(shards & (1ull << s)))
            continue;
        int e = s;
        while (e + 1 < SB_CLUSTER_SHARDS && (shards & (1ull << (e + 1))))
            e++;
        if (e == s)
            n += (size_t) snprintf (out + n, size - n, "%s%d", n? ",": "", s);
        else
            n += (size_t) snprintf (out + n, size - n, "%s%d-%d", n? ",": "", s, e);
        s = e;
    }
    if (n == 0)
        snprintf (out, size, "-");
}

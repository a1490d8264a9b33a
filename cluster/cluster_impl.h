/*  cluster/cluster_impl.h — what the cluster's files share: the handle,
    the connection and its statements. Not a public header: only cluster/
    includes it, and nothing else names a libpq type for the cluster.
      db.c        the URL, the connection, statements, the tables
      cluster.c   open, heartbeat, balance, leave, the owner cache
      nodes.c     the list of nodes (for `switchboard nodes`), ranges
*/
#ifndef SB_CLUSTER_IMPL_H_INCLUDED
#define SB_CLUSTER_IMPL_H_INCLUDED

#include "cluster/cluster.h"

#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>

//  The cluster's schema: the URL's schema= (or this base) and the suffix.
#define SB_CLUSTER_SCHEMA_BASE      "switchboard"
#define SB_CLUSTER_SCHEMA_SUFFIX    "_cluster"

//  A connection to the cluster's database, and the schema's name, plain
//  (for guards) and escaped (for statements).
typedef struct {
    PGconn *conn;
    char *conninfo;             //  the URL as libpq takes it (no schema=)
    char *where;                //  the URL without credentials, for messages
    char schema [64];
    char *qschema;              //  the schema, escaped for SQL
} sb_cluster_db_t;

struct _sb_cluster_t {
    sb_cluster_db_t db;
    char node_id [SB_CLUSTER_ID_MAX + 1];
    char bus_endpoint [SB_CLUSTER_EP_MAX + 1];
    char event_endpoint [SB_CLUSTER_EP_MAX + 1];
    char curve_public [SB_CLUSTER_KEY_MAX + 1];
    unsigned lease_ms, heartbeat_ms;
    int64_t renewed_ms;         //  monotonic, before the last renewal began

    pthread_mutex_t lock;       //  guards what follows: the cache
    uint64_t held;              //  the shards this node holds
    int64_t epoch [SB_CLUSTER_SHARDS];  //  of each held shard
    bool owned [SB_CLUSTER_SHARDS];     //  had a live owner at the refresh
    sb_cluster_owner_t owner [SB_CLUSTER_SHARDS];
};

//  Splits off schema=NAME (the cluster is NAME_cluster) and adds a
//  connect_timeout, then connects. Returns 0, or -1 with one line in err.
int  sb_cluster_db_open (sb_cluster_db_t *db, const char *url, char *err, size_t errlen);
void sb_cluster_db_close (sb_cluster_db_t *db);

//  Runs one statement with text parameters; every '@' in `sql` is where
//  the escaped schema goes. Returns 0 and the result in *res (or clears it when
//  res is NULL); SB_STORE_BUSY on a conflict (40001, 40P01);
//  SB_STORE_BACKEND otherwise, logged. A broken connection is reset first.
int  sb_cluster_db_exec (sb_cluster_db_t *db, const char *sql, int nparams,
                         const char *const *values, PGresult **res);

//  BEGIN (READ COMMITTED: a claim re-reads a row another node changed
//  meanwhile, which is the check it needs), COMMIT, ROLLBACK.
int  sb_cluster_db_begin (sb_cluster_db_t *db);
int  sb_cluster_db_commit (sb_cluster_db_t *db);
void sb_cluster_db_rollback (sb_cluster_db_t *db);

//  Makes the schema, the tables and the S lease rows when absent and checks
//  the version and the shard count, in the open txn. 0, or -1 with err.
int  sb_cluster_db_prepare (sb_cluster_db_t *db, char *err, size_t errlen);

//  Whether the schema holds the cluster's tables (for a reader that must
//  not make them). 1, 0, or a negative error.
int  sb_cluster_db_exists (sb_cluster_db_t *db);

//  "{1,2,3}": a set of shards as a PostgreSQL array literal.
void sb_cluster_array (uint64_t shards, char *out, size_t size);

//  Reads every node row, with the live leases each holds.
int  sb_cluster_db_nodes (sb_cluster_db_t *db, sb_cluster_info_t **list, size_t *count);

#endif

/*  cluster/cluster.h — several nodes, one control plane: nodes, shard
    leases with epochs, and the fence a write checks (docs/scale-out.md,
    "Shards and leases").

    PostgreSQL is the source of truth; there is no membership, consensus or
    replication protocol of our own. The URL is the store's (store/store.h),
    and a cluster is one schema of that database, NAME_cluster for the
    URL's `schema=NAME` (so "switchboard_cluster" by default), holding:
      nodes          one row per node: its id, its bus and event endpoints,
                     its CURVE public key, its lease length, when it
                     started and when it last beat
      shard_leases   SB_CLUSTER_SHARDS rows: who owns the shard, the epoch
                     of that ownership, and until when (the database's
                     clock: every expiry is `now()` there, never a node's)
      cluster_version  the layout's version

    Sessions hash to a fixed number of shards (sb_cluster_shard_of). A node
    owns a shard while its lease row names it and has not expired; each
    takeover moves the epoch on, so a write fenced with (shard, owner,
    epoch) by sb_txn_guard (store/store.h) fails once another node took the
    shard, even if the old owner has not noticed yet.

    A node runs, every heartbeat period (sb_cluster_heartbeat_ms):
        sb_cluster_heartbeat (c, &lost);    //  renew; stop writing `lost`
        sb_cluster_balance (c, &gained, &released);
    heartbeat renews the node's row and every lease it holds in one
    transaction; a lease whose epoch moved (or that lapsed) is reported
    lost and forgotten. balance takes free or lapsed shards up to the fair
    share ceil(S / live nodes) and releases what it holds above it.

    Threads: heartbeat, balance, leave and nodes_list use the cluster's one
    connection and are called from one thread; shard_of, owner_of, held and
    guard read a cache under a lock and may be called from any thread.

    Errors are the store's codes (store/store.h): SB_STORE_INVALID for a
    bad argument, SB_STORE_BACKEND when the database failed (logged),
    SB_STORE_NOTFOUND for a shard without a live owner, SB_STORE_FENCED for
    a guard of a shard this node does not hold.
*/
#ifndef SB_CLUSTER_H_INCLUDED
#define SB_CLUSTER_H_INCLUDED

#include "store/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

//  The number of shards: fixed for the life of a cluster (a database made
//  with another count is refused), and at most 64 so that a set of shards
//  is one uint64_t (bit n: shard n).
#define SB_CLUSTER_SHARDS       64
#define SB_CLUSTER_VERSION      1

//  Lease length and heartbeat period, in ms. The environment
//  (SWITCHBOARD_SHARD_LEASE_MS, SWITCHBOARD_SHARD_HEARTBEAT_MS) or the
//  config overrides the defaults within these ranges; the heartbeat is
//  kept at most a third of the lease, so that two beats can be missed
//  before a lease lapses.
#define SB_CLUSTER_LEASE_MS_DEFAULT     10000
#define SB_CLUSTER_LEASE_MS_MIN         300
#define SB_CLUSTER_LEASE_MS_MAX         600000
#define SB_CLUSTER_HEARTBEAT_MS_DEFAULT 2000
#define SB_CLUSTER_HEARTBEAT_MS_MIN     50
#define SB_CLUSTER_HEARTBEAT_MS_MAX     200000

#define SB_CLUSTER_ID_MAX       63      //  node ids: 1 to 63 of A-Z a-z 0-9 . _ : -
#define SB_CLUSTER_EP_MAX       255     //  an endpoint, in bytes
#define SB_CLUSTER_KEY_MAX      63      //  a CURVE public key (Z85 is 40)

typedef struct _sb_cluster_t sb_cluster_t;

//  Who this node is. Strings are copied by open.
typedef struct {
    const char *node_id;
    const char *bus_endpoint;       //  where other nodes reach its bus
    const char *event_endpoint;     //  its event plane
    const char *curve_public;       //  its bus's CURVE public key; NULL: none
    unsigned lease_ms;              //  0: SWITCHBOARD_SHARD_LEASE_MS or default
    unsigned heartbeat_ms;          //  0: SWITCHBOARD_SHARD_HEARTBEAT_MS or default
} sb_cluster_config_t;

//  A shard's owner, as last read (each heartbeat refreshes it).
typedef struct {
    char node_id [SB_CLUSTER_ID_MAX + 1];
    char bus_endpoint [SB_CLUSTER_EP_MAX + 1];
    char event_endpoint [SB_CLUSTER_EP_MAX + 1];
    char curve_public [SB_CLUSTER_KEY_MAX + 1];
    int64_t epoch;
} sb_cluster_owner_t;

//  One row of sb_cluster_nodes_list.
typedef struct {
    char node_id [SB_CLUSTER_ID_MAX + 1];
    char bus_endpoint [SB_CLUSTER_EP_MAX + 1];
    char event_endpoint [SB_CLUSTER_EP_MAX + 1];
    char curve_public [SB_CLUSTER_KEY_MAX + 1];
    int64_t started_at;             //  Unix ms
    int64_t heartbeat_age_ms;       //  by the database's clock
    unsigned lease_ms;
    bool alive;                     //  beat within its lease
    uint64_t shards;                //  the live leases it holds
} sb_cluster_info_t;

//  The shard of a session: FNV-1a (32 bits) of the id's bytes, modulo
//  SB_CLUSTER_SHARDS. Stable: it must never change, or sessions would move.
uint32_t
    sb_cluster_shard_of (const char *session_id);

//  Connects, makes the schema and tables when absent (under an advisory
//  lock, so that nodes may start together), checks the version and the
//  shard count, and registers the node (a node that restarts under the
//  same id releases what its previous run still held). Returns NULL with
//  one line in err on failure.
sb_cluster_t *
    sb_cluster_open (const char *url, const sb_cluster_config_t *config,
                     char *err, size_t errlen);

//  Closes the connection; holds on to nothing else (the leases lapse).
//  Call sb_cluster_leave first for a graceful exit. Tolerates NULL.
void
    sb_cluster_destroy (sb_cluster_t **self_p);

//  Renews the node's row and every lease it holds, in one transaction.
//  Fills `lost` (may be NULL) with the shards it held whose epoch moved or
//  whose lease lapsed: this node must stop writing them. Refreshes the
//  owner cache. Returns 0 or an error: then nothing was renewed, and once
//  no renewal has succeeded for a lease (by this host's monotonic clock,
//  measured from before the last good one began, so never later than the
//  database's expiry), every shard is given up and reported in `lost`.
int
    sb_cluster_heartbeat (sb_cluster_t *self, uint64_t *lost);

//  Takes free or lapsed shards up to ceil(S / live nodes), each at a new
//  epoch, and releases (gracefully: no epoch move, the next owner moves it)
//  what it holds above that. Fills `gained` and `released` (may be NULL).
int
    sb_cluster_balance (sb_cluster_t *self, uint64_t *gained, uint64_t *released);

//  Releases every lease and removes the node's row. The node holds nothing
//  after, whatever the return.
int
    sb_cluster_leave (sb_cluster_t *self);

//  The shards this node holds, as of its last heartbeat or balance.
uint64_t
    sb_cluster_held (sb_cluster_t *self);

//  The owner of `shard` from the cache: 0, or SB_STORE_NOTFOUND when it had
//  no live owner at the last refresh, or SB_STORE_INVALID.
int
    sb_cluster_owner_of (sb_cluster_t *self, uint32_t shard, sb_cluster_owner_t *out);

//  Fills `guard` for a write of `shard` by this node (for sb_txn_guard);
//  its strings belong to the cluster. SB_STORE_FENCED when this node does
//  not hold the shard.
int
    sb_cluster_guard (sb_cluster_t *self, uint32_t shard, sb_guard_t *guard);

//  Every registered node, alive or not, and what it owns, read now.
//  *list is the caller's (sb_cluster_nodes_free).
int
    sb_cluster_nodes_list (sb_cluster_t *self, sb_cluster_info_t **list, size_t *count);

//  The same without joining: for `switchboard nodes`. A database without
//  the cluster's tables is an empty list.
int
    sb_cluster_nodes_read (const char *url, sb_cluster_info_t **list, size_t *count,
                           char *err, size_t errlen);

void
    sb_cluster_nodes_free (sb_cluster_info_t **list);

//  The schema, the node id, the lease length and heartbeat period in use.
const char *sb_cluster_schema (sb_cluster_t *self);
const char *sb_cluster_node_id (sb_cluster_t *self);
unsigned    sb_cluster_lease_ms (sb_cluster_t *self);
unsigned    sb_cluster_heartbeat_ms (sb_cluster_t *self);

//  The cluster schema a URL names (NAME_cluster), or SB_STORE_INVALID for
//  a URL the cluster refuses.
int
    sb_cluster_url_schema (const char *url, char *out, size_t size);

//  Writes a set of shards as ranges ("0-21,40"; "-" when empty) into out.
void
    sb_cluster_ranges (uint64_t shards, char *out, size_t size);

//  --------------------------------------------------------------------------
//  What the stateful actors use (cluster/member.c). Each takes a NULL
//  cluster as "no cluster" (LMDB, or a process without one): then this
//  process is the only writer and owns every session.

//  The bit of session_id's shard in a set of shards.
uint64_t
    sb_cluster_shard_bit (const char *session_id);

//  True when this node holds the shard of session_id (by the cache), or
//  when self is NULL.
bool
    sb_cluster_holds (sb_cluster_t *self, const char *session_id);

//  Runs sb_txn_guard in `txn` for every shard of `shards`, so that a
//  write touching several sessions is fenced by each of their leases.
//  Returns 0 or the txn's sticky error (SB_STORE_FENCED when this node
//  does not hold one of them). With self NULL or shards 0: 0.
int
    sb_cluster_fence (sb_cluster_t *self, sb_txn_t *txn, uint64_t shards);

//  The message of a `not_owner` refusal of a write of session_id:
//  "session S is in shard N, owned by node X (BUS), not this one", or
//  that no node owns it right now.
void
    sb_cluster_owner_line (sb_cluster_t *self, const char *session_id, char *out, size_t size);

//  Called on the member's thread after each beat with what changed (0 and
//  0 when nothing did): shards gained and lost (released, lapsed or
//  taken); the owner cache is fresh then.
typedef void (sb_cluster_change_fn) (uint64_t gained, uint64_t lost, void *arg);

//  The member: a thread of its own that beats and balances every
//  heartbeat period until sb_cluster_member_stop. The first beat and
//  balance run in start itself, so that a lone node holds every shard
//  before it serves anything. Only this thread uses the cluster's
//  connection from then on. Returns 0, or -1 (logged).
int
    sb_cluster_member_start (sb_cluster_t *self, sb_cluster_change_fn *fn, void *arg);

//  Stops the thread (waits for its beat in flight) and leaves the
//  cluster: the leases go at once, for the other nodes to take.
void
    sb_cluster_member_stop (sb_cluster_t *self);

//  For `stats` and /metrics: what the member has done since start.
typedef struct {
    uint64_t held;                  //  the shards held now
    uint64_t beats, beat_failures;
    uint64_t gained, lost;          //  shards gained and lost since start
    uint64_t fenced;                //  guards refused (a write of a shard not held)
    uint64_t last_beat_us;          //  the last beat and balance, together
    int64_t last_beat_age_ms;       //  since the last good beat; -1: none
} sb_cluster_stats_t;

void
    sb_cluster_stats (sb_cluster_t *self, sb_cluster_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif

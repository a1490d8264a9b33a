/*  cluster/cluster.c — a node of the cluster: open, heartbeat, balance,
    leave, and the owner cache (see cluster/cluster.h and
    docs/scale-out.md, "Shards and leases").

    Every transaction here is READ COMMITTED, and every check of a lease
    sits in the WHERE of the UPDATE that changes it. When two nodes go for
    the same row, the second waits for the first's row lock and then
    re-checks its WHERE against the row the first committed: so a claim of
    a lapsed shard that another node just renewed or claimed changes
    nothing, and a renewal of a shard another node just took returns no
    row (the epoch moved). That is the whole of the mutual exclusion.

    The clock is the database's: expiries are `now() + lease`, lapses are
    `expires_at <= now()`. now() is the start of the txn, so a renewal
    gives a lease a little shorter than its nominal length, never longer.
*/
#include "cluster/cluster_impl.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

//  --------------------------------------------------------------------------
//  Settings

static int64_t
s_mono_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

//  SWITCHBOARD_SHARD_LEASE_MS and _HEARTBEAT_MS: digits only, in range;
//  anything else is ignored with a warning.
static unsigned
s_env_ms (const char *name, unsigned dflt, unsigned min, unsigned max)
{
    const char *v = getenv (name);
    if (!v || !*v)
        return dflt;
    char *end;
    unsigned long n = strspn (v, "0123456789") == strlen (v)? strtoul (v, &end, 10): 0;
    if (n < min || n > max) {
        sb_warn ("cluster", "ignoring %s=%s (want ms from %u to %u); using %u", name, v, min, max, dflt);
        return dflt;
    }
    return (unsigned) n;
}

static int
s_settings (sb_cluster_t *self, const sb_cluster_config_t *c, char *err, size_t errlen)
{
    self->lease_ms = c->lease_ms? c->lease_ms
        : s_env_ms ("SWITCHBOARD_SHARD_LEASE_MS", SB_CLUSTER_LEASE_MS_DEFAULT,
                    SB_CLUSTER_LEASE_MS_MIN, SB_CLUSTER_LEASE_MS_MAX);
    self->heartbeat_ms = c->heartbeat_ms? c->heartbeat_ms
        : s_env_ms ("SWITCHBOARD_SHARD_HEARTBEAT_MS", SB_CLUSTER_HEARTBEAT_MS_DEFAULT,
                    SB_CLUSTER_HEARTBEAT_MS_MIN, SB_CLUSTER_HEARTBEAT_MS_MAX);
    if (self->lease_ms < SB_CLUSTER_LEASE_MS_MIN || self->lease_ms > SB_CLUSTER_LEASE_MS_MAX
        || self->heartbeat_ms < SB_CLUSTER_HEARTBEAT_MS_MIN
        || self->heartbeat_ms > SB_CLUSTER_HEARTBEAT_MS_MAX) {
        snprintf (err, errlen, "cluster: lease %u ms or heartbeat %u ms out of range", self->lease_ms,
                  self->heartbeat_ms);
        return -1;
    }
    //  Two missed beats before a lease lapses.
    if (self->heartbeat_ms > self->lease_ms / 3) {
        sb_warn ("cluster", "heartbeat %u ms is over a third of the lease (%u ms); using %u ms",
                 self->heartbeat_ms, self->lease_ms, self->lease_ms / 3);
        self->heartbeat_ms = self->lease_ms / 3;
    }
    return 0;
}

static bool
s_id_ok (const char *s)
{
    size_t n = s? strlen (s): 0;
    if (n == 0 || n > SB_CLUSTER_ID_MAX)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')
              || *s == '.' || *s == '_' || *s == ':' || *s == '-'))
            return false;
    return true;
}

//  Copies an optional string; false when it does not fit.
static bool
s_copy (char *out, size_t size, const char *s)
{
    s = s? s: "";
    if (strlen (s) >= size)
        return false;
    strcpy (out, s);
    return true;
}

//  --------------------------------------------------------------------------
//  Open

//  The node's row, made or taken over, and whatever a previous run under
//  the same id still held released: the leases' epochs stay, so the run
//  that held them (if it still runs) is fenced at once.
static int
s_register (sb_cluster_t *self)
{
    char lease [16];
    snprintf (lease, sizeof lease, "%u", self->lease_ms);
    const char *v [5] = { self->node_id, self->bus_endpoint, self->event_endpoint,
                          self->curve_public, lease };
    int rc = sb_cluster_db_exec (&self->db,
        "INSERT INTO @.nodes (node_id, bus_endpoint, event_endpoint, curve_public, lease_ms, "
        "started_at, heartbeat_at) VALUES ($1, $2, $3, $4, $5::int, now(), now()) "
        "ON CONFLICT (node_id) DO UPDATE SET bus_endpoint = $2, event_endpoint = $3, "
        "curve_public = $4, lease_ms = $5::int, started_at = now(), heartbeat_at = now()",
        5, v, NULL);
    if (rc == 0)
        rc = sb_cluster_db_exec (&self->db, "UPDATE @.shard_leases SET owner = NULL, "
                                 "expires_at = now() WHERE owner = $1", 1, v, NULL);
    return rc;
}

sb_cluster_t *
sb_cluster_open (const char *url, const sb_cluster_config_t *config, char *err, size_t errlen)
{
    char dummy [1];
    if (!err) {
        err = dummy;
        errlen = sizeof dummy;
    }
    if (!url || !config || !s_id_ok (config->node_id)) {
        snprintf (err, errlen, "cluster: a node id is 1 to %d of A-Z, a-z, 0-9, '.', '_', ':', '-'",
                  SB_CLUSTER_ID_MAX);
        return NULL;
    }
    sb_cluster_t *self = (sb_cluster_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "cluster: out of memory");
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    strcpy (self->node_id, config->node_id);
    if (!s_copy (self->bus_endpoint, sizeof self->bus_endpoint, config->bus_endpoint)
        || !s_copy (self->event_endpoint, sizeof self->event_endpoint, config->event_endpoint)
        || !s_copy (self->curve_public, sizeof self->curve_public, config->curve_public)) {
        snprintf (err, errlen, "cluster: an endpoint or key is too long");
        goto failed;
    }
    if (s_settings (self, config, err, errlen) != 0
        || sb_cluster_db_open (&self->db, url, err, errlen) != 0)
        goto failed;
    self->renewed_ms = s_mono_ms ();
    if (sb_cluster_db_begin (&self->db) != 0) {
        snprintf (err, errlen, "cluster: %s: cannot begin a transaction", self->db.where);
        goto failed;
    }
    if (sb_cluster_db_prepare (&self->db, err, errlen) != 0)
        goto rollback;
    if (s_register (self) != 0 || sb_cluster_db_commit (&self->db) != 0) {
        snprintf (err, errlen, "cluster: %s: cannot register node %s", self->db.where, self->node_id);
        goto rollback;
    }
    sb_info ("cluster", "node %s joined %s schema %s (lease %u ms, heartbeat %u ms)", self->node_id,
             self->db.where, self->db.schema, self->lease_ms, self->heartbeat_ms);
    return self;
rollback:
    sb_cluster_db_rollback (&self->db);
failed:
    sb_cluster_destroy (&self);
    return NULL;
}

void
sb_cluster_destroy (sb_cluster_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sb_cluster_t *self = *self_p;
    sb_cluster_db_close (&self->db);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

//  --------------------------------------------------------------------------
//  The owner cache

//  Every lease and its owner's endpoints, read in the heartbeat's txn.
static int
s_refresh (sb_cluster_t *self)
{
    PGresult *res;
    int rc = sb_cluster_db_exec (&self->db,
        "SELECT l.shard, coalesce (l.owner, ''), l.epoch, l.owner IS NOT NULL AND l.expires_at > now(), "
        "coalesce (n.bus_endpoint, ''), coalesce (n.event_endpoint, ''), coalesce (n.curve_public, '') "
        "FROM @.shard_leases l LEFT JOIN @.nodes n ON n.node_id = l.owner ORDER BY l.shard",
        0, NULL, &res);
    if (rc != 0)
        return rc;
    pthread_mutex_lock (&self->lock);
    for (int r = 0; r < PQntuples (res); r++) {
        int s = atoi (PQgetvalue (res, r, 0));
        if (s < 0 || s >= SB_CLUSTER_SHARDS)
            continue;
        sb_cluster_owner_t *o = &self->owner [s];
        memset (o, 0, sizeof *o);
        self->owned [s] = strcmp (PQgetvalue (res, r, 3), "t") == 0;
        s_copy (o->node_id, sizeof o->node_id, PQgetvalue (res, r, 1));
        o->epoch = atoll (PQgetvalue (res, r, 2));
        s_copy (o->bus_endpoint, sizeof o->bus_endpoint, PQgetvalue (res, r, 4));
        s_copy (o->event_endpoint, sizeof o->event_endpoint, PQgetvalue (res, r, 5));
        s_copy (o->curve_public, sizeof o->curve_public, PQgetvalue (res, r, 6));
    }
    pthread_mutex_unlock (&self->lock);
    PQclear (res);
    return 0;
}

//  The shards and epochs this node holds, as array literals.
//  Sized for the worst: 64 shards of 2 digits, 64 epochs of 19.
#define S_SHARDS_TEXT   (SB_CLUSTER_SHARDS * 3 + 3)
#define S_EPOCHS_TEXT   (SB_CLUSTER_SHARDS * 21 + 3)

static void
s_held_arrays (sb_cluster_t *self, char *shards, char *epochs)
{
    size_t size = S_EPOCHS_TEXT;
    pthread_mutex_lock (&self->lock);
    uint64_t held = self->held;
    sb_cluster_array (held, shards, S_SHARDS_TEXT);
    size_t n = (size_t) snprintf (epochs, size, "{");
    for (unsigned s = 0; s < SB_CLUSTER_SHARDS && n < size; s++)
        if (held & (1ull << s))
            n += (size_t) snprintf (epochs + n, size - n, "%s%lld", n > 1? ",": "",
                                    (long long) self->epoch [s]);
    pthread_mutex_unlock (&self->lock);
    if (n < size)
        snprintf (epochs + n, size - n, "}");
}

//  --------------------------------------------------------------------------
//  Heartbeat

//  The renewal: the node's row (made again if someone removed it), then
//  every lease still at the epoch this node took it at and not lapsed.
//  What comes back is what is still held.
static int
s_renew (sb_cluster_t *self, uint64_t *kept)
{
    char lease [16], shards [S_SHARDS_TEXT], epochs [S_EPOCHS_TEXT];
    snprintf (lease, sizeof lease, "%u", self->lease_ms);
    s_held_arrays (self, shards, epochs);
    const char *v [4] = { self->node_id, lease, shards, epochs };
    const char *row [5] = { self->node_id, self->bus_endpoint, self->event_endpoint,
                            self->curve_public, lease };
    int rc = sb_cluster_db_exec (&self->db,
        "INSERT INTO @.nodes (node_id, bus_endpoint, event_endpoint, curve_public, lease_ms, "
        "started_at, heartbeat_at) VALUES ($1, $2, $3, $4, $5::int, now(), now()) "
        "ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now(), lease_ms = $5::int",
        5, row, NULL);
    PGresult *res = NULL;
    if (rc == 0)
        rc = sb_cluster_db_exec (&self->db,
            "UPDATE @.shard_leases l SET expires_at = now () + $2::int * interval '1 millisecond' "
            "FROM unnest ($3::int[], $4::bigint[]) AS h (shard, epoch) "
            "WHERE l.shard = h.shard AND l.epoch = h.epoch AND l.owner = $1 AND l.expires_at > now () "
            "RETURNING l.shard", 4, v, &res);
    *kept = 0;
    for (int r = 0; rc == 0 && r < PQntuples (res); r++) {
        int s = atoi (PQgetvalue (res, r, 0));
        if (s >= 0 && s < SB_CLUSTER_SHARDS)
            *kept |= 1ull << s;
    }
    PQclear (res);
    return rc;
}

//  A node that cannot renew (the database is down or out of reach) must
//  not go on as the owner past its leases: they expire at the server's
//  now() of the last renewal plus the lease, and that now() came after
//  renewed_ms here. So once a lease has passed since then, everything is
//  given up, with no word from the database needed.
static uint64_t
s_give_up_when_late (sb_cluster_t *self)
{
    if (s_mono_ms () - self->renewed_ms < (int64_t) self->lease_ms)
        return 0;
    pthread_mutex_lock (&self->lock);
    uint64_t gone = self->held;
    self->held = 0;
    memset (self->owned, 0, sizeof self->owned);
    pthread_mutex_unlock (&self->lock);
    return gone;
}

int
sb_cluster_heartbeat (sb_cluster_t *self, uint64_t *lost)
{
    if (lost)
        *lost = 0;
    if (!self)
        return SB_STORE_INVALID;
    uint64_t kept = 0;
    int64_t began = s_mono_ms ();
    int rc = sb_cluster_db_begin (&self->db);
    if (rc == 0)
        rc = s_renew (self, &kept);
    if (rc == 0)
        rc = s_refresh (self);
    if (rc == 0)
        rc = sb_cluster_db_commit (&self->db);
    uint64_t gone;
    if (rc != 0) {
        sb_cluster_db_rollback (&self->db);
        gone = s_give_up_when_late (self);
    }
    else {
        self->renewed_ms = began;
        pthread_mutex_lock (&self->lock);
        gone = self->held & ~kept;
        self->held &= kept;
        pthread_mutex_unlock (&self->lock);
    }
    if (gone) {
        char ranges [256];
        sb_cluster_ranges (gone, ranges, sizeof ranges);
        sb_warn ("cluster", "node %s lost shards %s (%s)", self->node_id, ranges,
                 rc? "no renewal within a lease": "their leases lapsed or moved");
    }
    if (lost)
        *lost = gone;
    return rc;
}

//  --------------------------------------------------------------------------
//  Balance

static unsigned
s_count (uint64_t set)
{
    return (unsigned) __builtin_popcountll (set);
}

//  Takes up to `want` free or lapsed shards, each at epoch + 1. SKIP
//  LOCKED keeps two claimers off each other's rows; the WHERE of the
//  UPDATE itself re-checks the row a claimer waited for.
static int
s_claim (sb_cluster_t *self, unsigned want, uint64_t *gained)
{
    char lease [16], limit [16];
    snprintf (lease, sizeof lease, "%u", self->lease_ms);
    snprintf (limit, sizeof limit, "%u", want);
    const char *v [3] = { self->node_id, lease, limit };
    PGresult *res;
    int rc = sb_cluster_db_exec (&self->db,
        "UPDATE @.shard_leases SET owner = $1, epoch = epoch + 1, "
        "expires_at = now () + $2::int * interval '1 millisecond' "
        "WHERE shard IN (SELECT shard FROM @.shard_leases WHERE owner IS NULL OR expires_at <= now () "
        "ORDER BY shard LIMIT $3::int FOR UPDATE SKIP LOCKED) "
        "AND (owner IS NULL OR expires_at <= now ()) RETURNING shard, epoch", 3, v, &res);
    if (rc != 0)
        return rc;
    pthread_mutex_lock (&self->lock);
    for (int r = 0; r < PQntuples (res); r++) {
        int s = atoi (PQgetvalue (res, r, 0));
        if (s < 0 || s >= SB_CLUSTER_SHARDS)
            continue;
        self->held |= 1ull << s;
        self->epoch [s] = atoll (PQgetvalue (res, r, 1));
        self->owned [s] = true;
        sb_cluster_owner_t *o = &self->owner [s];
        s_copy (o->node_id, sizeof o->node_id, self->node_id);
        s_copy (o->bus_endpoint, sizeof o->bus_endpoint, self->bus_endpoint);
        s_copy (o->event_endpoint, sizeof o->event_endpoint, self->event_endpoint);
        s_copy (o->curve_public, sizeof o->curve_public, self->curve_public);
        o->epoch = self->epoch [s];
        *gained |= 1ull << s;
    }
    pthread_mutex_unlock (&self->lock);
    PQclear (res);
    return 0;
}

//  Gives up `set`: no owner, lapsed now, the epoch left for the next owner
//  to move. The shards are forgotten here first, so that no write is
//  fenced through them while the release is under way.
static int
s_release (sb_cluster_t *self, uint64_t set)
{
    char shards [512];
    sb_cluster_array (set, shards, sizeof shards);
    pthread_mutex_lock (&self->lock);
    self->held &= ~set;
    for (unsigned s = 0; s < SB_CLUSTER_SHARDS; s++)
        if (set & (1ull << s))
            self->owned [s] = false;
    pthread_mutex_unlock (&self->lock);
    const char *v [2] = { self->node_id, shards };
    return sb_cluster_db_exec (&self->db, "UPDATE @.shard_leases SET owner = NULL, expires_at = now () "
                               "WHERE owner = $1 AND shard = ANY ($2::int[])", 2, v, NULL);
}

//  The highest `n` shards of `set`.
static uint64_t
s_top (uint64_t set, unsigned n)
{
    uint64_t out = 0;
    for (int s = SB_CLUSTER_SHARDS - 1; s >= 0 && n > 0; s--)
        if (set & (1ull << s)) {
            out |= 1ull << s;
            n--;
        }
    return out;
}

int
sb_cluster_balance (sb_cluster_t *self, uint64_t *gained, uint64_t *released)
{
    uint64_t g = 0, r = 0;
    if (gained)
        *gained = 0;
    if (released)
        *released = 0;
    if (!self)
        return SB_STORE_INVALID;
    long long live = 0;
    PGresult *res;
    int rc = sb_cluster_db_begin (&self->db);
    if (rc == 0)
        rc = sb_cluster_db_exec (&self->db, "SELECT count(*) FROM @.nodes "
                                 "WHERE heartbeat_at + lease_ms * interval '1 millisecond' > now ()",
                                 0, NULL, &res);
    if (rc == 0) {
        live = atoll (PQgetvalue (res, 0, 0));
        PQclear (res);
        //  This node counts even when its own row looks stale (a slow
        //  beat): it is here, asking.
        unsigned nodes = live < 1? 1: (unsigned) live;
        unsigned share = (SB_CLUSTER_SHARDS + nodes - 1) / nodes;
        uint64_t held = sb_cluster_held (self);
        if (s_count (held) > share)
            rc = s_release (self, r = s_top (held, s_count (held) - share));
        else
        if (s_count (held) < share)
            rc = s_claim (self, share - s_count (held), &g);
    }
    if (rc == 0)
        rc = sb_cluster_db_commit (&self->db);
    if (rc != 0) {
        sb_cluster_db_rollback (&self->db);
        //  Claims that did not commit are not held; releases stay given up.
        pthread_mutex_lock (&self->lock);
        self->held &= ~g;
        pthread_mutex_unlock (&self->lock);
        g = 0;
    }
    if (gained)
        *gained = g;
    if (released)
        *released = r;
    return rc;
}

//  --------------------------------------------------------------------------
//  Leave, and the cache's readers

int
sb_cluster_leave (sb_cluster_t *self)
{
    if (!self)
        return SB_STORE_INVALID;
    pthread_mutex_lock (&self->lock);
    self->held = 0;
    pthread_mutex_unlock (&self->lock);
    const char *v [1] = { self->node_id };
    int rc = sb_cluster_db_begin (&self->db);
    if (rc == 0)
        rc = sb_cluster_db_exec (&self->db, "UPDATE @.shard_leases SET owner = NULL, expires_at = now () "
                                 "WHERE owner = $1", 1, v, NULL);
    if (rc == 0)
        rc = sb_cluster_db_exec (&self->db, "DELETE FROM @.nodes WHERE node_id = $1", 1, v, NULL);
    if (rc == 0)
        rc = sb_cluster_db_commit (&self->db);
    if (rc != 0)
        sb_cluster_db_rollback (&self->db);
    return rc;
}

uint64_t
sb_cluster_held (sb_cluster_t *self)
{
    pthread_mutex_lock (&self->lock);
    uint64_t held = self->held;
    pthread_mutex_unlock (&self->lock);
    return held;
}

int
sb_cluster_owner_of (sb_cluster_t *self, uint32_t shard, sb_cluster_owner_t *out)
{
    if (!self || shard >= SB_CLUSTER_SHARDS || !out)
        return SB_STORE_INVALID;
    pthread_mutex_lock (&self->lock);
    int rc = self->owned [shard]? 0: SB_STORE_NOTFOUND;
    *out = self->owner [shard];
    pthread_mutex_unlock (&self->lock);
    return rc;
}

int
sb_cluster_guard (sb_cluster_t *self, uint32_t shard, sb_guard_t *guard)
{
    if (!self || shard >= SB_CLUSTER_SHARDS || !guard)
        return SB_STORE_INVALID;
    pthread_mutex_lock (&self->lock);
    bool held = (self->held >> shard) & 1;
    *guard = (sb_guard_t) { .schema = self->db.schema, .shard = shard, .owner = self->node_id,
                            .epoch = held? self->epoch [shard]: -1 };
    pthread_mutex_unlock (&self->lock);
    return held? 0: SB_STORE_FENCED;
}

uint32_t
sb_cluster_shard_of (const char *session_id)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *) (session_id? session_id: ""); *p; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    return h % SB_CLUSTER_SHARDS;
}

const char *sb_cluster_schema (sb_cluster_t *self) { return self->db.schema; }
const char *sb_cluster_node_id (sb_cluster_t *self) { return self->node_id; }
unsigned sb_cluster_lease_ms (sb_cluster_t *self) { return self->lease_ms; }
unsigned sb_cluster_heartbeat_ms (sb_cluster_t *self) { return self->heartbeat_ms; }

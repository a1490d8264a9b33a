/*  cluster/member.c — a node's membership, run for serve: the thread that
    beats and balances, and the fence the stateful actors' writes go
    through (cluster/cluster.h, docs/scale-out.md "A node in serve").

    Why a thread of its own: a beat is a transaction or two on the
    database, and a slow database must not stall any actor's loop, nor an
    actor's long drain delay a beat past the lease. The thread is the only
    user of the cluster's connection once started; the actors read the
    cache (held shards and epochs) under the cluster's lock. */
#include "cluster/cluster_impl.h"
#include "common/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

//  The member's state lives beside the cluster, one per process: serve
//  runs one node.
typedef struct {
    sb_cluster_t *cluster;
    sb_cluster_change_fn *fn;
    void *arg;
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    _Atomic uint64_t beats, beat_failures, gained, lost, fenced, last_beat_us;
    _Atomic int64_t last_beat_ms;       //  monotonic, of the last good beat; 0: none
} member_t;

static member_t s_member = {
    .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
};

//  One beat then one balance; tells the change function what moved.
static void
s_beat (member_t *m)
{
    int64_t t0 = sb_mono_us ();
    uint64_t lost = 0, gained = 0, released = 0;
    int rc = sb_cluster_heartbeat (m->cluster, &lost);
    //  Balance only after a good beat: the live count and the owners it
    //  reads are the ones this beat refreshed.
    if (rc == 0)
        rc = sb_cluster_balance (m->cluster, &gained, &released);
    atomic_store (&m->last_beat_us, (uint64_t) (sb_mono_us () - t0));
    atomic_fetch_add (&m->beats, 1);
    if (rc == 0)
        atomic_store (&m->last_beat_ms, t0 / 1000);
    else
        atomic_fetch_add (&m->beat_failures, 1);
    lost |= released;
    atomic_fetch_add (&m->gained, (uint64_t) __builtin_popcountll (gained));
    atomic_fetch_add (&m->lost, (uint64_t) __builtin_popcountll (lost));
    if (gained || released) {
        char g [256], r [256];
        sb_cluster_ranges (gained, g, sizeof g);
        sb_cluster_ranges (released, r, sizeof r);
        sb_info ("cluster", "node %s gained=%s released=%s held=%d", m->cluster->node_id, g, r,
                 __builtin_popcountll (sb_cluster_held (m->cluster)));
    }
    if (m->fn)
        m->fn (gained, lost, m->arg);
}

static void *
s_member_thread (void *arg)
{
    member_t *m = arg;
    pthread_mutex_lock (&m->lock);
    while (!m->stop) {
        struct timespec until;
        clock_gettime (CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t) until.tv_nsec + (uint64_t) m->cluster->heartbeat_ms * 1000000u;
        until.tv_sec += (time_t) (ns / 1000000000u);
        until.tv_nsec = (long) (ns % 1000000000u);
        pthread_cond_timedwait (&m->wake, &m->lock, &until);
        if (m->stop)
            break;
        pthread_mutex_unlock (&m->lock);
        s_beat (m);
        pthread_mutex_lock (&m->lock);
    }
    pthread_mutex_unlock (&m->lock);
    return NULL;
}

int
sb_cluster_member_start (sb_cluster_t *self, sb_cluster_change_fn *fn, void *arg)
{
    member_t *m = &s_member;
    if (!self || m->running)
        return -1;
    m->cluster = self;
    m->fn = fn;
    m->arg = arg;
    m->stop = false;
    //  The first beat here, on the caller's thread: a lone node (or the
    //  first of several) holds its share before its actors start.
    s_beat (m);
    if (pthread_create (&m->thread, NULL, s_member_thread, m) != 0) {
        sb_error ("cluster", "cannot start the member thread");
        return -1;
    }
    m->running = true;
    return 0;
}

void
sb_cluster_member_stop (sb_cluster_t *self)
{
    member_t *m = &s_member;
    if (!self || m->cluster != self)
        return;
    if (m->running) {
        pthread_mutex_lock (&m->lock);
        m->stop = true;
        pthread_cond_signal (&m->wake);
        pthread_mutex_unlock (&m->lock);
        pthread_join (m->thread, NULL);
        m->running = false;
    }
    if (sb_cluster_leave (self) != 0)
        sb_warn ("cluster", "node %s could not leave; its leases lapse in %u ms", self->node_id,
                 self->lease_ms);
    m->cluster = NULL;
}

void
sb_cluster_stats (sb_cluster_t *self, sb_cluster_stats_t *out)
{
    member_t *m = &s_member;
    memset (out, 0, sizeof *out);
    out->last_beat_age_ms = -1;
    if (!self)
        return;
    out->held = sb_cluster_held (self);
    out->beats = atomic_load (&m->beats);
    out->beat_failures = atomic_load (&m->beat_failures);
    out->gained = atomic_load (&m->gained);
    out->lost = atomic_load (&m->lost);
    out->fenced = atomic_load (&m->fenced);
    out->last_beat_us = atomic_load (&m->last_beat_us);
    int64_t last = atomic_load (&m->last_beat_ms);
    if (last)
        out->last_beat_age_ms = sb_mono_us () / 1000 - last;
}

//  --------------------------------------------------------------------------
//  The actors' side

uint64_t
sb_cluster_shard_bit (const char *session_id)
{
    return 1ull << sb_cluster_shard_of (session_id);
}

bool
sb_cluster_holds (sb_cluster_t *self, const char *session_id)
{
    return !self || (sb_cluster_held (self) & sb_cluster_shard_bit (session_id)) != 0;
}

void
sb_cluster_owner_line (sb_cluster_t *self, const char *session_id, char *out, size_t size)
{
    uint32_t shard = sb_cluster_shard_of (session_id);
    sb_cluster_owner_t owner;
    if (sb_cluster_owner_of (self, shard, &owner) == 0)
        snprintf (out, size, "session %s is in shard %u, owned by node %s (%s), not this one", session_id,
                  shard, owner.node_id, *owner.bus_endpoint ? owner.bus_endpoint : "no tcp bus");
    else
        snprintf (out, size, "session %s is in shard %u, which no node owns right now; retry", session_id,
                  shard);
}

int
sb_cluster_fence (sb_cluster_t *self, sb_txn_t *txn, uint64_t shards)
{
    if (!self || !shards)
        return txn->ret;
    for (uint32_t s = 0; s < SB_CLUSTER_SHARDS && txn->ret == 0; s++) {
        if (!(shards & (1ull << s)))
            continue;
        sb_guard_t guard;
        if (sb_cluster_guard (self, s, &guard) != 0) {
            //  Not held by the cache: no need to ask the database.
            if (txn->ret == 0)
                txn->ret = SB_STORE_FENCED;
        }
        else
            sb_txn_guard (txn, &guard);
    }
    if (txn->ret == SB_STORE_FENCED)
        atomic_fetch_add (&s_member.fenced, 1);
    return txn->ret;
}

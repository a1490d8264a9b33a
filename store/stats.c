/*  store/stats.c — what `switchboard stats` and /metrics say about the
    stores of this process: each store's backend and the latency of its
    durable writes (sb_store_write, body and commit together), p50 and
    p99.

    The latency is a log-linear histogram of microseconds: eight buckets
    per power of two, so a percentile is off by at most an eighth; counts
    are atomics, bumped by the writing thread and read by any other
    without a lock. The stores of a process are kept in one list under one
    lock, so that the broker's thread can read them while the actors' own
    threads open and close theirs (serve runs them all in one process). */
#include "store/store_impl.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t s_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static sb_store_t *s_reg_head;

static unsigned
s_bucket (uint64_t us)
{
    if (us < 8)
        return (unsigned) us;
    unsigned e = 63u - (unsigned) __builtin_clzll (us);
    unsigned idx = 8 * (e - 2) + (unsigned) ((us >> (e - 3)) & 7);
    return idx < SB_STORE_LAT_BUCKETS ? idx : SB_STORE_LAT_BUCKETS - 1;
}

//  The largest value that falls in bucket `idx`.
static uint64_t
s_bucket_top (unsigned idx)
{
    if (idx < 8)
        return idx;
    unsigned e = idx / 8 + 2, sub = idx % 8;
    return ((uint64_t) (8 + sub + 1) << (e - 3)) - 1;
}

uint64_t
sb_store_clock_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

void
sb_store_lat_add (sb_store_t *self, uint64_t us)
{
    atomic_fetch_add_explicit (&self->lat [s_bucket (us)], 1, memory_order_relaxed);
}

void
sb_store_register (sb_store_t *self, bool on)
{
    pthread_mutex_lock (&s_reg_lock);
    if (on) {
        self->reg_next = s_reg_head;
        s_reg_head = self;
    }
    else
        for (sb_store_t **p = &s_reg_head; *p; p = &(*p)->reg_next)
            if (*p == self) {
                *p = self->reg_next;
                break;
            }
    pthread_mutex_unlock (&s_reg_lock);
}

//  A short name for a store: the folder's last part on LMDB ("session"),
//  the schema on PostgreSQL ("switchboard_session"); never the URL, which
//  may hold a password.
static void
s_label (const sb_store_t *self, char *out, size_t size)
{
    const char *d = self->dir;
    if (self->ops == &sb_store_pg_ops) {
        const char *q = strchr (d, '?');
        const char *s = q ? strstr (q, "schema=") : NULL;
        while (s && s [-1] != '?' && s [-1] != '&')
            s = strstr (s + 1, "schema=");
        if (s)
            snprintf (out, size, "%.*s", (int) strcspn (s + 7, "&"), s + 7);
        else
            snprintf (out, size, "switchboard");
        return;
    }
    size_t n = strlen (d);
    while (n > 1 && d [n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && d [b - 1] != '/')
        b--;
    snprintf (out, size, "%.*s", (int) (n - b), d + b);
}

int
sb_store_stats_each (sb_store_stats_fn *cb, void *ctx)
{
    int rc = 0;
    pthread_mutex_lock (&s_reg_lock);
    for (sb_store_t *s = s_reg_head; s && rc == 0; s = s->reg_next) {
        sb_store_stats_t st = { .backend = s->ops->name };
        s_label (s, st.name, sizeof st.name);
        uint64_t counts [SB_STORE_LAT_BUCKETS], total = 0;
        for (unsigned k = 0; k < SB_STORE_LAT_BUCKETS; k++) {
            counts [k] = atomic_load_explicit (&s->lat [k], memory_order_relaxed);
            total += counts [k];
        }
        st.writes = total;
        st.commits = atomic_load_explicit (&s->commits, memory_order_relaxed);
        st.retries = atomic_load_explicit (&s->retries, memory_order_relaxed);
        uint64_t p50 = (total + 1) / 2, p99 = total - total / 100, seen = 0;
        bool got50 = false;
        for (unsigned k = 0; k < SB_STORE_LAT_BUCKETS && total; k++) {
            seen += counts [k];
            if (!got50 && seen >= p50) {
                st.write_p50_us = s_bucket_top (k);
                got50 = true;
            }
            if (seen >= p99) {
                st.write_p99_us = s_bucket_top (k);
                break;
            }
        }
        rc = cb (&st, ctx);
    }
    pthread_mutex_unlock (&s_reg_lock);
    return rc;
}

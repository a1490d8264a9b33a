/*  actors/exec/runtime.c — a session's prepared runtime, and the exec
    actor's LRU cache of them.

    The cache is a hash table of chains (by session id) over the runtimes
    themselves, threaded on one doubly linked list from most to least
    recently used. The links live in the runtime, so put allocates nothing
    and cannot fail: a runtime handed over is always either held or
    destroyed, never leaked.
*/
#include "actors/exec/runtime.h"
#include "actors/exec/policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static size_t s_live;

size_t
sb_runtime_live (void)
{
    return __atomic_load_n (&s_live, __ATOMIC_RELAXED);
}

sb_runtime_t *
sb_runtime_new (const char *session_id)
{
    if (!session_id || !*session_id) {
        errno = EINVAL;
        return NULL;
    }
    sb_runtime_t *rt = calloc (1, sizeof *rt);
    if (!rt)
        return NULL;
    __atomic_add_fetch (&s_live, 1, __ATOMIC_RELAXED);
    rt->session_id = strdup (session_id);
    rt->context = sb_context_new ();
    rt->policy = sb_policy_new ();
    if (!rt->session_id || !rt->context || !rt->policy) {
        sb_runtime_destroy (&rt);
        errno = ENOMEM;
    }
    return rt;
}

void
sb_runtime_destroy (sb_runtime_t **rt_p)
{
    if (!rt_p || !*rt_p)
        return;
    sb_runtime_t *rt = *rt_p;
    sb_context_destroy (&rt->context);
    sb_policy_destroy (&rt->policy);
    free (rt->session_id);
    free (rt->workspace);
    free (rt->workspace_given);
    free (rt->provider);
    free (rt->model);
    free (rt->approval_policy);
    free (rt);
    *rt_p = NULL;
    __atomic_sub_fetch (&s_live, 1, __ATOMIC_RELAXED);
}

int
sb_runtime_set_workspace (sb_runtime_t *rt, const char *workspace)
{
    if (!workspace || !*workspace) {
        errno = EINVAL;
        return -1;
    }
    char *real = realpath (workspace, NULL);
    if (!real)
        return -1;
    struct stat st;
    if (stat (real, &st) != 0 || !S_ISDIR (st.st_mode)) {
        free (real);
        errno = ENOTDIR;
        return -1;
    }
    char *given = strdup (workspace);
    if (!given) {
        free (real);
        errno = ENOMEM;
        return -1;
    }
    free (rt->workspace);
    free (rt->workspace_given);
    rt->workspace = real;
    rt->workspace_given = given;
    return 0;
}

//  A copy of s, or NULL for NULL; false only when out of memory.
static bool
s_dup_opt (const char *s, char **out)
{
    *out = s ? strdup (s) : NULL;
    return !s || *out;
}

int
sb_runtime_set_config (sb_runtime_t *rt, uint64_t config_version,
                       const char *provider, const char *model,
                       const char *approval_policy, uint32_t max_steps)
{
    char *p, *m = NULL, *a = NULL;
    if (!s_dup_opt (provider, &p) || !s_dup_opt (model, &m)
        || !s_dup_opt (approval_policy, &a)) {
        free (p);
        free (m);
        free (a);
        errno = ENOMEM;
        return -1;
    }
    free (rt->provider);
    free (rt->model);
    free (rt->approval_policy);
    rt->provider = p;
    rt->model = m;
    rt->approval_policy = a;
    rt->config_version = config_version;
    rt->max_steps = max_steps;
    return 0;
}

bool
sb_runtime_matches (const sb_runtime_t *rt, const char *workspace, uint64_t config_version)
{
    return rt && workspace && rt->workspace_given
        && strcmp (rt->workspace_given, workspace) == 0
        && rt->config_version == config_version;
}

//  ---------------------------------------------------------------------------

struct sb_runtime_cache {
    sb_runtime_t **buckets;
    size_t nbuckets;            //  a power of two
    sb_runtime_t *mru, *lru;    //  ends of the recency list
    size_t capacity;
    sb_runtime_stats_t stats;
};

sb_runtime_cache_t *
sb_runtime_cache_new (size_t capacity)
{
    if (capacity == 0)
        capacity = SB_RUNTIME_CACHE_DEFAULT;
    if (capacity > SB_RUNTIME_CACHE_MAX) {
        errno = EINVAL;
        return NULL;
    }
    sb_runtime_cache_t *cache = calloc (1, sizeof *cache);
    if (!cache)
        return NULL;
    //  About one runtime per chain when full.
    cache->nbuckets = 16;
    while (cache->nbuckets < capacity)
        cache->nbuckets *= 2;
    cache->buckets = calloc (cache->nbuckets, sizeof *cache->buckets);
    if (!cache->buckets) {
        free (cache);
        return NULL;
    }
    cache->capacity = capacity;
    cache->stats.capacity = capacity;
    return cache;
}

void
sb_runtime_cache_destroy (sb_runtime_cache_t **cache_p)
{
    if (!cache_p || !*cache_p)
        return;
    sb_runtime_cache_t *cache = *cache_p;
    sb_runtime_t *rt = cache->mru;
    while (rt) {
        sb_runtime_t *next = rt->lru_next;
        sb_runtime_destroy (&rt);
        rt = next;
    }
    free (cache->buckets);
    free (cache);
    *cache_p = NULL;
}

static size_t
s_bucket (const sb_runtime_cache_t *cache, const char *key)
{
    uint32_t h = 2166136261u;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t) *p) * 16777619u;
    return h & (cache->nbuckets - 1);
}

//  Unlinks rt from its chain and the recency list; it stays alive.
static void
s_unlink (sb_runtime_cache_t *cache, sb_runtime_t *rt)
{
    sb_runtime_t **pp = &cache->buckets [s_bucket (cache, rt->session_id)];
    while (*pp && *pp != rt)
        pp = &(*pp)->hash_next;
    if (*pp)
        *pp = rt->hash_next;
    if (rt->lru_prev)
        rt->lru_prev->lru_next = rt->lru_next;
    else
        cache->mru = rt->lru_next;
    if (rt->lru_next)
        rt->lru_next->lru_prev = rt->lru_prev;
    else
        cache->lru = rt->lru_prev;
    rt->lru_prev = rt->lru_next = rt->hash_next = NULL;
    cache->stats.size--;
}

static sb_runtime_t *
s_find (const sb_runtime_cache_t *cache, const char *session_id)
{
    sb_runtime_t *rt = cache->buckets [s_bucket (cache, session_id)];
    while (rt && strcmp (rt->session_id, session_id) != 0)
        rt = rt->hash_next;
    return rt;
}

sb_runtime_t *
sb_runtime_cache_take (sb_runtime_cache_t *cache, const char *session_id)
{
    if (!cache || !session_id)
        return NULL;
    sb_runtime_t *rt = s_find (cache, session_id);
    if (!rt) {
        cache->stats.misses++;
        return NULL;
    }
    s_unlink (cache, rt);
    cache->stats.hits++;
    return rt;
}

sb_runtime_t *
sb_runtime_cache_take_valid (sb_runtime_cache_t *cache, const char *session_id,
                             const char *workspace, uint64_t config_version)
{
    sb_runtime_t *rt = sb_runtime_cache_take (cache, session_id);
    if (rt && !sb_runtime_matches (rt, workspace, config_version)) {
        //  Counted as stale, not as a hit: the caller prepares anew.
        cache->stats.hits--;
        cache->stats.stale++;
        sb_runtime_destroy (&rt);
    }
    return rt;
}

void
sb_runtime_cache_put (sb_runtime_cache_t *cache, sb_runtime_t **rt_p)
{
    if (!rt_p || !*rt_p)
        return;
    sb_runtime_t *rt = *rt_p;
    *rt_p = NULL;
    if (!cache) {
        sb_runtime_destroy (&rt);
        return;
    }
    sb_runtime_t *old = s_find (cache, rt->session_id);
    if (old == rt)
        return;         //  already held (a caller bug, but harmless)
    if (old) {
        s_unlink (cache, old);
        sb_runtime_destroy (&old);
    }
    size_t b = s_bucket (cache, rt->session_id);
    rt->hash_next = cache->buckets [b];
    cache->buckets [b] = rt;
    rt->lru_prev = NULL;
    rt->lru_next = cache->mru;
    if (cache->mru)
        cache->mru->lru_prev = rt;
    cache->mru = rt;
    if (!cache->lru)
        cache->lru = rt;
    cache->stats.size++;

    while (cache->stats.size > cache->capacity) {
        sb_runtime_t *victim = cache->lru;
        s_unlink (cache, victim);
        sb_runtime_destroy (&victim);
        cache->stats.evictions++;
    }
}

void
sb_runtime_cache_stats (const sb_runtime_cache_t *cache, sb_runtime_stats_t *stats)
{
    *stats = cache->stats;
}

/*  tests/unit/test_runtime.c — session runtimes and the exec actor's LRU
    cache of them (actors/exec/runtime.c). Run under ASan too: an evicted,
    replaced or stale runtime must be destroyed, never leaked.
*/
#include "actors/exec/runtime.h"
#include "schemas/codec.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define S_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define S_LSAN 1
#endif
#endif
#ifdef S_LSAN
#include <sanitizer/lsan_interface.h>
#endif

//  Under ASan, a leak fails the test itself: LeakSanitizer's report at exit
//  does not change a Criterion worker's verdict, nor does an assertion in a
//  suite's fini, so each test ends with this.
static void
s_no_leak (void)
{
#ifdef S_LSAN
    cr_assert_eq (__lsan_do_recoverable_leak_check (), 0, "LeakSanitizer found leaks");
#endif
}

static char ws1 [PATH_MAX], ws2 [PATH_MAX], link1 [PATH_MAX], file1 [PATH_MAX];

static void
s_setup (void)
{
    char t1 [] = "/tmp/sbrt-ws1-XXXXXX", t2 [] = "/tmp/sbrt-ws2-XXXXXX";
    cr_assert (mkdtemp (t1) && mkdtemp (t2));
    cr_assert (realpath (t1, ws1) && realpath (t2, ws2));
    snprintf (link1, sizeof link1, "%s-link", ws1);
    cr_assert_eq (symlink (ws1, link1), 0);
    snprintf (file1, sizeof file1, "%s/file", ws1);
    FILE *f = fopen (file1, "w");
    cr_assert (f);
    fclose (f);
}

static void
s_teardown (void)
{
    unlink (file1);
    unlink (link1);
    rmdir (ws1);
    rmdir (ws2);
}

TestSuite (runtime, .init = s_setup, .fini = s_teardown, .timeout = 30);

//  Feeds one prompt entry to a runtime's context.
static int
s_prompt (sb_runtime_t *rt, uint64_t seq, const char *text)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", rt->session_id);
    sb_enc_kuint (enc, "seq", seq);
    sb_enc_kuint (enc, "ts", 1);
    sb_enc_kstr (enc, "kind", text ? "prompt" : "tool.call");
    sb_enc_key (enc, "body");
    sb_enc_map_open (enc);
    if (text)
        sb_enc_kstr (enc, "text", text);
    sb_enc_map_close (enc);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, NULL, 0, &err);
    cr_assert (doc);
    int rc = sb_context_add (rt->context, sb_doc_root (doc));
    sb_doc_destroy (&doc);
    sb_enc_destroy (&enc);
    return rc;
}

//  What the exec actor does to prepare a runtime: any step may fail, and
//  then nothing is cached. fail_at: 0 none, 1 workspace, 2 tape.
static sb_runtime_t *
s_prepare (const char *session_id, const char *workspace, uint64_t version, int fail_at)
{
    sb_runtime_t *rt = sb_runtime_new (session_id);
    cr_assert (rt);
    if (sb_runtime_set_config (rt, version, "demo", "demo-1", "yolo", 20) != 0
        || sb_runtime_set_workspace (rt, fail_at == 1 ? "/nonexistent/sbrt" : workspace) != 0
        || s_prompt (rt, 1, "hello") != 0
        || s_prompt (rt, 2, fail_at == 2 ? NULL : "again") != 0) {
        sb_runtime_destroy (&rt);
        cr_assert_null (rt);
    }
    return rt;
}

static sb_runtime_stats_t
s_stats (const sb_runtime_cache_t *cache)
{
    sb_runtime_stats_t st;
    sb_runtime_cache_stats (cache, &st);
    return st;
}

Test (runtime, new_validates_and_configures)
{
    cr_assert_null (sb_runtime_new (NULL));
    cr_assert_null (sb_runtime_new (""));

    sb_runtime_t *rt = sb_runtime_new ("01S");
    cr_assert (rt);
    cr_assert_str_eq (rt->session_id, "01S");
    cr_assert (rt->context);
    cr_assert_eq (sb_context_last_seq (rt->context), 0);
    cr_assert_null (rt->workspace);
    cr_assert_not (sb_runtime_matches (rt, ws1, 0));

    //  The workspace is kept as given and as its realpath.
    cr_assert_eq (sb_runtime_set_workspace (rt, link1), 0);
    cr_assert_str_eq (rt->workspace, ws1);
    cr_assert_str_eq (rt->workspace_given, link1);

    //  A failed change leaves the runtime as it was.
    errno = 0;
    cr_assert_eq (sb_runtime_set_workspace (rt, file1), -1);
    cr_assert_eq (errno, ENOTDIR);
    cr_assert_eq (sb_runtime_set_workspace (rt, "/nonexistent/sbrt"), -1);
    cr_assert_eq (errno, ENOENT);
    cr_assert_eq (sb_runtime_set_workspace (rt, NULL), -1);
    cr_assert_str_eq (rt->workspace, ws1);
    cr_assert_str_eq (rt->workspace_given, link1);

    cr_assert_eq (sb_runtime_set_config (rt, 7, "openai", "gpt-x", "auto", 50), 0);
    cr_assert_eq (rt->config_version, 7);
    cr_assert_str_eq (rt->provider, "openai");
    cr_assert_str_eq (rt->model, "gpt-x");
    cr_assert_str_eq (rt->approval_policy, "auto");
    cr_assert_eq (rt->max_steps, 50);
    cr_assert_eq (sb_runtime_set_config (rt, 8, NULL, NULL, NULL, 0), 0);
    cr_assert_null (rt->provider);
    cr_assert_null (rt->model);
    cr_assert_null (rt->approval_policy);

    sb_runtime_destroy (&rt);
    cr_assert_null (rt);
    sb_runtime_destroy (&rt);
    sb_runtime_destroy (NULL);
    s_no_leak ();
}

Test (runtime, matches_follows_workspace_and_config)
{
    sb_runtime_t *rt = s_prepare ("01S", ws1, 3, 0);
    cr_assert (rt);
    cr_assert (sb_runtime_matches (rt, ws1, 3));
    cr_assert_not (sb_runtime_matches (rt, ws2, 3), "workspace changed");
    cr_assert_not (sb_runtime_matches (rt, ws1, 4), "config changed");
    cr_assert_not (sb_runtime_matches (rt, NULL, 3));
    cr_assert_not (sb_runtime_matches (NULL, ws1, 3));
    sb_runtime_destroy (&rt);
    s_no_leak ();
}

Test (runtime, reuse_and_miss)
{
    sb_runtime_cache_t *cache = sb_runtime_cache_new (0);
    cr_assert (cache);
    cr_assert_eq (s_stats (cache).capacity, SB_RUNTIME_CACHE_DEFAULT);

    cr_assert_null (sb_runtime_cache_take (cache, "01S"));
    cr_assert_eq (s_stats (cache).misses, 1);

    sb_runtime_t *rt = s_prepare ("01S", ws1, 1, 0);
    sb_runtime_t *kept = rt;
    sb_runtime_cache_put (cache, &rt);
    cr_assert_null (rt, "put takes ownership");
    cr_assert_eq (s_stats (cache).size, 1);

    //  A checkout: the same runtime, context and all, and no longer cached.
    rt = sb_runtime_cache_take (cache, "01S");
    cr_assert_eq (rt, kept);
    cr_assert_eq (sb_context_last_seq (rt->context), 2);
    cr_assert_eq (sb_context_count (rt->context), 2);
    cr_assert_eq (s_stats (cache).hits, 1);
    cr_assert_eq (s_stats (cache).size, 0);
    cr_assert_null (sb_runtime_cache_take (cache, "01S"), "one run at a time owns it");
    cr_assert_eq (s_stats (cache).misses, 2);

    //  The next run reads only the entries after the cached seq.
    cr_assert_eq (s_prompt (rt, 3, "more"), 0);
    sb_runtime_cache_put (cache, &rt);
    rt = sb_runtime_cache_take_valid (cache, "01S", ws1, 1);
    cr_assert_eq (rt, kept);
    cr_assert_eq (sb_context_last_seq (rt->context), 3);
    cr_assert_eq (s_stats (cache).hits, 2);
    sb_runtime_cache_put (cache, &rt);

    cr_assert_null (sb_runtime_cache_take (cache, "01OTHER"));
    cr_assert_null (sb_runtime_cache_take (cache, NULL));
    sb_runtime_stats_t st = s_stats (cache);
    cr_assert_eq (st.hits, 2);
    cr_assert_eq (st.misses, 3);
    cr_assert_eq (st.evictions, 0);
    cr_assert_eq (st.stale, 0);
    cr_assert_eq (st.size, 1);
    //  Destroying the cache destroys what it holds.
    cr_assert_eq (sb_runtime_live (), 1);
    sb_runtime_cache_destroy (&cache);
    cr_assert_null (cache);
    cr_assert_eq (sb_runtime_live (), 0);
    sb_runtime_cache_destroy (&cache);
    s_no_leak ();
}

Test (runtime, put_replaces_the_same_session)
{
    sb_runtime_cache_t *cache = sb_runtime_cache_new (4);
    sb_runtime_t *a1 = s_prepare ("01A", ws1, 1, 0);
    sb_runtime_t *a2 = s_prepare ("01A", ws2, 2, 0);
    sb_runtime_t *want = a2;
    sb_runtime_cache_put (cache, &a1);
    sb_runtime_cache_put (cache, &a2);
    sb_runtime_stats_t st = s_stats (cache);
    cr_assert_eq (st.size, 1);
    cr_assert_eq (st.evictions, 0, "a replacement is not an eviction");
    cr_assert_eq (sb_runtime_live (), 1, "the replaced runtime was not destroyed");
    sb_runtime_t *rt = sb_runtime_cache_take (cache, "01A");
    cr_assert_eq (rt, want);
    cr_assert_str_eq (rt->workspace, ws2);
    cr_assert_eq (rt->config_version, 2);
    cr_assert_null (sb_runtime_cache_take (cache, "01A"));
    sb_runtime_destroy (&rt);

    //  NULL-safe.
    sb_runtime_cache_put (cache, NULL);
    sb_runtime_t *none = NULL;
    sb_runtime_cache_put (cache, &none);
    cr_assert_eq (s_stats (cache).size, 0);
    sb_runtime_cache_destroy (&cache);
    s_no_leak ();
}

Test (runtime, evicts_the_least_recently_used)
{
    sb_runtime_cache_t *cache = sb_runtime_cache_new (2);
    sb_runtime_t *a = s_prepare ("01A", ws1, 1, 0);
    sb_runtime_t *b = s_prepare ("01B", ws1, 1, 0);
    sb_runtime_t *c = s_prepare ("01C", ws1, 1, 0);
    sb_runtime_t *a_ptr = a, *c_ptr = c;
    sb_runtime_cache_put (cache, &a);
    sb_runtime_cache_put (cache, &b);
    //  A run of A uses it again: A is now the most recent, B the least.
    a = sb_runtime_cache_take (cache, "01A");
    cr_assert_eq (a, a_ptr);
    sb_runtime_cache_put (cache, &a);
    sb_runtime_cache_put (cache, &c);

    sb_runtime_stats_t st = s_stats (cache);
    cr_assert_eq (st.size, 2);
    cr_assert_eq (st.evictions, 1);
    //  B was evicted and destroyed, not just forgotten.
    cr_assert_eq (sb_runtime_live (), 2);
    cr_assert_null (sb_runtime_cache_take (cache, "01B"));
    a = sb_runtime_cache_take (cache, "01A");
    c = sb_runtime_cache_take (cache, "01C");
    cr_assert_eq (a, a_ptr);
    cr_assert_eq (c, c_ptr);

    //  Put back C then A: C is now the least recent and goes first.
    sb_runtime_cache_put (cache, &c);
    sb_runtime_cache_put (cache, &a);
    sb_runtime_t *d = s_prepare ("01D", ws1, 1, 0);
    sb_runtime_cache_put (cache, &d);
    cr_assert_eq (s_stats (cache).evictions, 2);
    cr_assert_eq (sb_runtime_live (), 2);
    cr_assert_null (sb_runtime_cache_take (cache, "01C"));
    a = sb_runtime_cache_take (cache, "01A");
    cr_assert_eq (a, a_ptr);
    sb_runtime_destroy (&a);
    sb_runtime_cache_destroy (&cache);
    cr_assert_eq (sb_runtime_live (), 0);
    s_no_leak ();
}

Test (runtime, default_capacity_bounds_the_cache)
{
    sb_runtime_cache_t *cache = sb_runtime_cache_new (0);
    char id [32];
    for (int k = 0; k < 300; k++) {
        snprintf (id, sizeof id, "01S%03d", k);
        sb_runtime_t *rt = sb_runtime_new (id);
        cr_assert (rt);
        sb_runtime_cache_put (cache, &rt);
    }
    sb_runtime_stats_t st = s_stats (cache);
    cr_assert_eq (st.size, SB_RUNTIME_CACHE_DEFAULT);
    cr_assert_eq (st.evictions, 300 - SB_RUNTIME_CACHE_DEFAULT);
    cr_assert_eq (sb_runtime_live (), SB_RUNTIME_CACHE_DEFAULT);
    //  The first 44 went, in order; the rest are all there.
    for (int k = 0; k < 300; k++) {
        snprintf (id, sizeof id, "01S%03d", k);
        sb_runtime_t *rt = sb_runtime_cache_take (cache, id);
        if (k < 300 - SB_RUNTIME_CACHE_DEFAULT)
            cr_assert_null (rt, "%s should have been evicted", id);
        else {
            cr_assert (rt, "%s should be cached", id);
            cr_assert_str_eq (rt->session_id, id);
        }
        sb_runtime_destroy (&rt);
    }
    cr_assert_eq (s_stats (cache).size, 0);
    sb_runtime_cache_destroy (&cache);

    cr_assert_null (sb_runtime_cache_new (SB_RUNTIME_CACHE_MAX + 1));
    s_no_leak ();
}

Test (runtime, rebuilt_after_a_workspace_or_config_change)
{
    sb_runtime_cache_t *cache = sb_runtime_cache_new (8);
    sb_runtime_t *rt = s_prepare ("01S", ws1, 1, 0);
    sb_runtime_cache_put (cache, &rt);

    //  The session moved to ws2: the cached runtime is stale and destroyed.
    cr_assert_null (sb_runtime_cache_take_valid (cache, "01S", ws2, 1));
    sb_runtime_stats_t st = s_stats (cache);
    cr_assert_eq (st.stale, 1);
    cr_assert_eq (st.hits, 0);
    cr_assert_eq (st.size, 0);
    cr_assert_eq (sb_runtime_live (), 0, "the stale runtime was not destroyed");

    rt = s_prepare ("01S", ws2, 1, 0);
    sb_runtime_t *rebuilt = rt;
    sb_runtime_cache_put (cache, &rt);
    rt = sb_runtime_cache_take_valid (cache, "01S", ws2, 1);
    cr_assert_eq (rt, rebuilt);
    cr_assert_str_eq (rt->workspace, ws2);
    sb_runtime_cache_put (cache, &rt);

    //  Then its config changed.
    cr_assert_null (sb_runtime_cache_take_valid (cache, "01S", ws2, 2));
    cr_assert_eq (s_stats (cache).stale, 2);
    cr_assert_eq (s_stats (cache).hits, 1);
    sb_runtime_cache_destroy (&cache);
    s_no_leak ();
}

Test (runtime, failed_preparation_caches_nothing)
{
    sb_runtime_cache_t *cache = sb_runtime_cache_new (2);
    sb_runtime_t *a = s_prepare ("01A", ws1, 1, 0);
    sb_runtime_t *a_ptr = a;
    sb_runtime_cache_put (cache, &a);
    sb_runtime_stats_t before = s_stats (cache);

    //  Midway failures: the workspace is gone, or the tape cannot be read.
    cr_assert_null (s_prepare ("01B", "/nonexistent", 1, 1));
    cr_assert_null (s_prepare ("01B", ws1, 1, 2));
    sb_runtime_stats_t after = s_stats (cache);
    cr_assert_eq (memcmp (&before, &after, sizeof before), 0, "the cache was touched");
    cr_assert_eq (sb_runtime_live (), 1, "a half-built runtime survived");
    cr_assert_null (sb_runtime_cache_take (cache, "01B"));

    //  A rebuild of a checked-out session that fails leaves it uncached,
    //  rather than cached half-built.
    a = sb_runtime_cache_take (cache, "01A");
    cr_assert_eq (a, a_ptr);
    sb_runtime_destroy (&a);
    cr_assert_null (s_prepare ("01A", ws2, 2, 2));
    cr_assert_null (sb_runtime_cache_take (cache, "01A"));
    cr_assert_eq (s_stats (cache).size, 0);
    sb_runtime_cache_destroy (&cache);
    s_no_leak ();
}

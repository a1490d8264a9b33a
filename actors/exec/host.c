/*  actors/exec/host.c — the one run host; see actors/exec/host.h.

    The host owns the table of runs, the runtime cache and the list of
    runs that have ended. A run is filled in here, before its thread
    starts (actors/exec/agent.c: sb_exec_run_thread); from then on only
    the run thread writes it but for its atomics and eventfds. As it ends
    it puts itself on the done list and writes the done eventfd; the
    owner's thread joins it, gives its runtime back and frees it.
*/
#include "actors/exec/host.h"
#include "actors/exec/agent.h"
#include "actors/exec/mcp.h"
#include "actors/exec/runtime.h"
#include "sandbox/spawn.h"
#include "schemas/vocab.h"
#include "common/log.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define S_SWEEP_MS 1000

struct sb_exec_host {
    sb_exec_host_opts_t opts;
    zhashx_t *runs;             /* run_id -> sb_exec_run_t */
    sb_runtime_cache_t *cache;  /* NULL: no runtime is kept between runs */
    pthread_mutex_t done_lock;
    zlistx_t *done;             /* ended sb_exec_run_t, for the owner to reap */
    int done_fd;                /* eventfd: a run ended */
    int64_t next_sweep;         /* mono ms of the next orphan sweep */
};

/*  Called on a run's thread as it ends: hands the run back to the host's
    thread, which reaps it. */
static void
s_run_ended (sb_exec_run_t *run)
{
    sb_exec_host_t *host = run->owner;
    pthread_mutex_lock (&host->done_lock);
    zlistx_add_end (host->done, run);
    pthread_mutex_unlock (&host->done_lock);
    eventfd_write (host->done_fd, 1);
}

sb_exec_host_t *
sb_exec_host_new (const sb_exec_host_opts_t *opts)
{
    /* tools' grandchildren that escape with setsid are reparented to us */
    sb_spawn_init_subreaper ();
    sb_exec_host_t *host = calloc (1, sizeof *host);
    if (!host)
        return NULL;
    host->opts = *opts;
    if (!host->opts.tool_tape_cap)
        host->opts.tool_tape_cap = SB_EXEC_TOOL_TAPE_DEFAULT;
    if (!host->opts.actor)
        host->opts.actor = "exec";
    pthread_mutex_init (&host->done_lock, NULL);
    host->runs = zhashx_new ();
    host->done = zlistx_new ();
    host->done_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    bool cache_ok = true;
    if (opts->runtime_cache) {
        host->cache = sb_runtime_cache_new (opts->runtime_cache);
        cache_ok = host->cache != NULL;
    }
    if (!host->runs || !host->done || host->done_fd < 0 || !cache_ok)
        sb_exec_host_destroy (&host);
    return host;
}

void
sb_exec_host_destroy (sb_exec_host_t **host_p)
{
    sb_exec_host_t *host = *host_p;
    if (!host)
        return;
    if (host->runs) {
        /* stop every run without reporting: like a crash, recovery decides */
        for (sb_exec_run_t *run = zhashx_first (host->runs); run; run = zhashx_next (host->runs)) {
            atomic_store (&run->shutdown, true);
            eventfd_write (run->cancel_fd, 1);
        }
        while (zhashx_size (host->runs) > 0) {
            struct pollfd p = { host->done_fd, POLLIN, 0 };
            poll (&p, 1, 100);
            sb_exec_host_reap (host);
        }
        zhashx_destroy (&host->runs);
    }
    sb_runtime_cache_destroy (&host->cache);   /* stops every MCP server */
    zlistx_destroy (&host->done);
    if (host->done_fd >= 0)
        close (host->done_fd);
    pthread_mutex_destroy (&host->done_lock);
    free (host);
    *host_p = NULL;
}

/*  The run's limits, and what it made before this start (an approval
    across a restart), from `config`. */
static void
s_run_limits (sb_exec_run_t *run, const sb_val_t *config)
{
    const sb_val_t *lim = sb_get_map (config, "limits");
    run->max_steps = sb_get_uint (lim, "max_steps", 50);
    /* the schema bounds timeout_s (docs/protocol.md); clamped here too,
       so the deadline below cannot overflow whatever reached us */
    run->timeout_s = sb_get_uint (lim, "timeout_s", 3600);
    if (run->timeout_s > SB_RUN_TIMEOUT_MAX_S)
        run->timeout_s = SB_RUN_TIMEOUT_MAX_S;
    run->max_output_tokens = sb_get_uint (lim, "max_output_tokens", 0);
    run->steps = sb_get_uint (config, "steps", 0);
    const sb_val_t *usage = sb_get_map (config, "usage");
    if (sb_get (usage, "input_tokens")) {
        run->input_tokens = sb_get_uint (usage, "input_tokens", 0);
        run->output_tokens = sb_get_uint (usage, "output_tokens", 0);
        run->usage_known = true;
    }
    run->deadline = sb_mono_ms () + (int64_t) run->timeout_s * 1000;
}

/*  A new run, filled in from the start message and the host's options,
    its eventfds open. NULL when out of memory or out of descriptors. */
static sb_exec_run_t *
s_run_new (sb_exec_host_t *host, const sb_val_t *start, const sb_val_t *config, int hb_ms)
{
    sb_exec_run_t *run = calloc (1, sizeof *run);
    if (!run)
        return NULL;
    const sb_exec_host_opts_t *o = &host->opts;
    run->owner = host;
    run->on_end = s_run_ended;
    run->data_dir = o->data_dir;
    run->tool_tape.cap = o->tool_tape_cap;
    run->mcp_config = o->mcp_config;
    run->workspace = o->workspace;
    run->finish_type = o->finish_type;
    run->worker_id = o->worker_id;
    run->hb_ms = hb_ms;
    snprintf (run->run_id, sizeof run->run_id, "%s", sb_get_str (start, "run_id"));
    snprintf (run->session_id, sizeof run->session_id, "%s", sb_get_str (start, "session_id"));
    run->fence = sb_get_uint (start, "fence", 0);
    const char *rf = sb_get_str (config, "resume_from");
    snprintf (run->resume_from, sizeof run->resume_from, "%s", rf ? rf : "");
    const char *kind = sb_get_str (config, "kind");
    sb_run_kind_t rk = sb_run_kind_from_name (kind);
    snprintf (run->kind, sizeof run->kind, "%s", rk == SB_RUN_KIND_COMPACT || rk == SB_RUN_KIND_REWIND ? kind : "");
    run->rewind_to = sb_get_uint (config, "rewind_to", 0);
    run->undo = sb_get_bool (config, "undo", false);
    run->no_code = !sb_get_bool (config, "code", true);
    run->no_conversation = !sb_get_bool (config, "conversation", true);
    const char *pol = sb_get_str (config, "approval_policy");
    snprintf (run->policy, sizeof run->policy, "%s", pol ? pol : "auto");
    snprintf (run->endpoint, sizeof run->endpoint, "%s", o->endpoint);
    snprintf (run->sub_endpoint, sizeof run->sub_endpoint, "%s", o->sub_endpoint ? o->sub_endpoint : "");
    snprintf (run->instance, sizeof run->instance, "%s-%.8s", o->instance, run->run_id + 18);
    s_run_limits (run, config);
    snprintf (run->text.kind, sizeof run->text.kind, "text.delta");
    snprintf (run->thinking.kind, sizeof run->thinking.kind, "thinking.delta");
    run->cancel_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    run->hb_stop_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (run->cancel_fd < 0 || run->hb_stop_fd < 0)
        sb_exec_run_free (&run);
    return run;
}

int
sb_exec_host_start (sb_exec_host_t *host, const sb_val_t *start, const sb_val_t *config, int hb_ms)
{
    const char *run_id = sb_get_str (start, "run_id");
    if (run_id && zhashx_lookup (host->runs, run_id))
        return 1;
    sb_exec_run_t *run = s_run_new (host, start, config, hb_ms);
    if (!run) {
        sb_error (host->opts.actor, "cannot start the run thread run=%s: out of resources", run_id ? run_id : "-");
        return -1;
    }
    run->runtime = sb_runtime_cache_take (host->cache, run->session_id);
    if (pthread_create (&run->thread, NULL, sb_exec_run_thread, run) != 0) {
        sb_error (host->opts.actor, "cannot start the run thread run=%s", run->run_id);
        sb_exec_run_free (&run);
        return -1;
    }
    zhashx_insert (host->runs, run->run_id, run);
    sb_info (host->opts.actor, "run started run=%s session=%s fence=%llu policy=%s", run->run_id,
             run->session_id, (unsigned long long) run->fence, run->policy);
    return 0;
}

bool
sb_exec_host_cancel (sb_exec_host_t *host, const char *run_id)
{
    sb_exec_run_t *run = run_id ? zhashx_lookup (host->runs, run_id) : NULL;
    if (run)
        eventfd_write (run->cancel_fd, 1);
    return run != NULL;
}

size_t
sb_exec_host_size (sb_exec_host_t *host)
{
    return zhashx_size (host->runs);
}

int
sb_exec_host_fd (sb_exec_host_t *host)
{
    return host->done_fd;
}

size_t
sb_exec_host_reap (sb_exec_host_t *host)
{
    eventfd_t v;
    eventfd_read (host->done_fd, &v);
    size_t reaped = 0;
    while (true) {
        pthread_mutex_lock (&host->done_lock);
        sb_exec_run_t *run = zlistx_detach (host->done, NULL);
        pthread_mutex_unlock (&host->done_lock);
        if (!run)
            break;
        pthread_join (run->thread, NULL);
        zhashx_delete (host->runs, run->run_id);
        /* a runtime that prepared fully goes back to the cache (without
           one, sb_runtime_cache_put destroys it) */
        if (run->runtime && !atomic_load (&run->lost))
            sb_runtime_cache_put (host->cache, &run->runtime);
        sb_exec_run_free (&run);
        reaped++;
    }
    return reaped;
}

/*  mcp_idle_ms: how long an MCP server of a cached session may sit
    unused before it is stopped. */
static void
s_stop_idle_mcp (sb_runtime_t *rt, void *arg)
{
    sb_exec_host_t *host = arg;
    if (rt->mcp && host->opts.mcp_idle_ms > 0)
        sb_mcp_set_stop_idle (rt->mcp, host->opts.mcp_idle_ms);
}

int64_t
sb_exec_host_tick (sb_exec_host_t *host)
{
    int64_t now = sb_mono_ms ();
    if (now >= host->next_sweep) {
        /* As the subreaper we inherit what tools leave behind; a process
           that exited while its spawn was deciding whose it was ends up a
           zombie of ours that no spawn waits for. Reap those. */
        sb_spawn_reap_orphans ();
        /* MCP servers of sessions that have not run for a while */
        sb_runtime_cache_each (host->cache, s_stop_idle_mcp, host);
        host->next_sweep = now + S_SWEEP_MS;
    }
    return host->next_sweep - now;
}

size_t
sb_exec_host_wait (sb_exec_host_t *host, int timeout_ms)
{
    int64_t due = sb_exec_host_tick (host);
    struct pollfd p = { host->done_fd, POLLIN, 0 };
    if (poll (&p, 1, due < timeout_ms ? (int) due : timeout_ms) > 0)
        sb_exec_host_reap (host);
    sb_exec_host_tick (host);
    return sb_exec_host_size (host);
}

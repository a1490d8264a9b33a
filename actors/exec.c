/*  actors/exec.c — the local executor (docs/architecture.md): drives the agent loop
    of each run it is given.

    The actor thread owns the table of runs and the runtime cache; each run
    gets a thread of its own that talks to the bus with its own socket, and
    a heartbeat thread that keeps the lease alive even while a tool blocks
    (actors/exec/agent.c). Cancel reaches a run through an eventfd: the
    actor writes it on exec.cancel (pushed by the run actor at once).

    Every append to the tape carries the run's fence, so an executor whose
    lease lapsed cannot write: the session actor refuses it
    (actors/exec/tape.c). */
#include "actors/actor.h"
#include "actors/exec/agent.h"
#include "actors/exec/approval.h"
#include "actors/exec/mcp.h"
#include "actors/exec/changes.h"
#include "actors/exec/runtime.h"
#include "sandbox/spawn.h"
#include "bus/client.h"
#include "common/log.h"
#include "schemas/vocab.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define ACTOR "exec"
#define ORPHAN_SWEEP_MS 1000

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_enc_t *enc;
    char instance [129];
    const char *endpoint;
    const char *sub_endpoint;   /* the event plane: executors wait there for approvals */
    const sb_server_config_t *config;
    zhashx_t *runs;             /* run_id -> sb_exec_run_t */
    sb_runtime_cache_t *cache;
    pthread_mutex_t done_lock;
    zlistx_t *done;             /* finished sb_exec_run_t, for the actor to reap */
    int done_fd;                /* eventfd: a run finished */
    int64_t next_sweep;         /* mono ms of the next orphan sweep */
    uint64_t tool_tape_cap;     /* the tape's share of one tool call's output */
    sb_mcp_config_t *mcp;       /* MCP servers (actors/exec/mcp.h), or NULL; read-only once loaded */
    int64_t mcp_idle_ms;        /* a cached session's unused MCP server is stopped after */
    sb_exec_diffs_t *diffs;     /* exec.diff jobs (actors/exec/diff.c) */
    bool terminated;
} self_t;


/* ------------------------------------------------------------------ */
/*  The actor thread */

static void
s_run_free (sb_exec_run_t **run_p)
{
    sb_exec_run_free (run_p);
}

/*  Called on a run's thread as it ends: hands the run back to the actor
    thread, which reaps it. */
static void
s_run_ended (sb_exec_run_t *run)
{
    self_t *self = run->owner;
    pthread_mutex_lock (&self->done_lock);
    zlistx_add_end (self->done, run);
    pthread_mutex_unlock (&self->done_lock);
    eventfd_write (self->done_fd, 1);
}

static void
s_reap (self_t *self)
{
    eventfd_t v;
    eventfd_read (self->done_fd, &v);
    while (true) {
        pthread_mutex_lock (&self->done_lock);
        sb_exec_run_t *run = zlistx_detach (self->done, NULL);
        pthread_mutex_unlock (&self->done_lock);
        if (!run)
            break;
        pthread_join (run->thread, NULL);
        zhashx_delete (self->runs, run->run_id);
        /* a runtime that prepared fully goes back to the cache */
        if (run->runtime && !atomic_load (&run->lost))
            sb_runtime_cache_put (self->cache, &run->runtime);
        s_run_free (&run);
    }
}

/*  SWITCHBOARD_MCP_IDLE_S: seconds an MCP server of a cached session may
    sit unused before it is stopped (default 600). */
static void
s_stop_idle_mcp (sb_runtime_t *rt, void *arg)
{
    self_t *self = arg;
    if (rt->mcp)
        sb_mcp_set_stop_idle (rt->mcp, self->mcp_idle_ms);
}

static void
s_handle_start (self_t *self, sb_msg_t *msg)
{
    const char *run_id = sb_get_str (msg->body, "run_id");
    sb_enc_t *e = self->enc;
    if (!zhashx_lookup (self->runs, run_id)) {
        sb_exec_run_t *run = calloc (1, sizeof *run);
        if (!run) {
            sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
            return;
        }
        run->owner = self;
        run->on_end = s_run_ended;
        run->data_dir = sb_exec_diffs_data_dir (self->diffs);
        run->tool_tape.cap = self->tool_tape_cap;
        run->mcp_config = self->mcp;
        snprintf (run->run_id, sizeof run->run_id, "%s", run_id);
        snprintf (run->session_id, sizeof run->session_id, "%s", sb_get_str (msg->body, "session_id"));
        const char *rf = sb_get_str (msg->body, "resume_from");
        snprintf (run->resume_from, sizeof run->resume_from, "%s", rf ? rf : "");
        const char *kind = sb_get_str (msg->body, "kind");
        snprintf (run->kind, sizeof run->kind, "%s", sb_run_kind_from_name (kind) == SB_RUN_KIND_COMPACT ? kind : "");
        const char *pol = sb_get_str (msg->body, "approval_policy");
        snprintf (run->policy, sizeof run->policy, "%s", pol ? pol : "auto");
        snprintf (run->endpoint, sizeof run->endpoint, "%s", self->endpoint);
        snprintf (run->sub_endpoint, sizeof run->sub_endpoint, "%s", self->sub_endpoint ? self->sub_endpoint : "");
        snprintf (run->instance, sizeof run->instance, "%s-%.8s", self->instance, run_id + 18);
        run->fence = sb_get_uint (msg->body, "fence", 0);
        const sb_val_t *lim = sb_get_map (msg->body, "limits");
        run->max_steps = sb_get_uint (lim, "max_steps", 50);
        /* the schema bounds timeout_s (docs/protocol.md); clamped here too,
           so the deadline below cannot overflow whatever reached us */
        run->timeout_s = sb_get_uint (lim, "timeout_s", 3600);
        if (run->timeout_s > SB_RUN_TIMEOUT_MAX_S)
            run->timeout_s = SB_RUN_TIMEOUT_MAX_S;
        run->max_output_tokens = sb_get_uint (lim, "max_output_tokens", 0);
        /* what the run made before this start (an approval across a restart) */
        run->steps = sb_get_uint (msg->body, "steps", 0);
        const sb_val_t *usage = sb_get_map (msg->body, "usage");
        if (sb_get (usage, "input_tokens")) {
            run->input_tokens = sb_get_uint (usage, "input_tokens", 0);
            run->output_tokens = sb_get_uint (usage, "output_tokens", 0);
            run->usage_known = true;
        }
        run->deadline = sb_mono_ms () + (int64_t) run->timeout_s * 1000;
        snprintf (run->text.kind, sizeof run->text.kind, "text.delta");
        snprintf (run->thinking.kind, sizeof run->thinking.kind, "thinking.delta");
        run->cancel_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
        run->hb_stop_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
        run->runtime = sb_runtime_cache_take (self->cache, run->session_id);
        if (run->cancel_fd < 0 || run->hb_stop_fd < 0
        ||  pthread_create (&run->thread, NULL, sb_exec_run_thread, run) != 0) {
            s_run_free (&run);
            sb_bus_error (self->bus, msg, SB_E_internal, "cannot start a run thread");
            return;
        }
        zhashx_insert (self->runs, run->run_id, run);
        sb_info (ACTOR, "run started run=%s session=%s fence=%llu policy=%s", run->run_id, run->session_id,
                 (unsigned long long) run->fence, run->policy);
    }
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "instance", self->instance);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

static void
s_handle_cancel (self_t *self, sb_msg_t *msg)
{
    sb_exec_run_t *run = zhashx_lookup (self->runs, sb_get_str (msg->body, "run_id"));
    if (run)
        eventfd_write (run->cancel_fd, 1);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kbool (e, "found", run != NULL);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

/*  The configured MCP servers, their state in the sessions that started
    them and their tools (`switchboard mcp list`). */
static void
s_handle_mcp_list (self_t *self, sb_msg_t *msg)
{
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_mcp_status_encode (self->mcp, e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

/*  The sandbox tools run in (the UI warns when there is none). */
static void
s_handle_info (self_t *self, sb_msg_t *msg)
{
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "sandbox", sb_spawn_sandbox_name ());
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

static void
s_handle_diff (self_t *self, sb_msg_t *msg)
{
    sb_exec_diffs_start (self->diffs, self->bus, msg);
}

/* ------------------------------------------------------------------ */
/*  Dispatch: every request exec serves, one row each */

typedef void (s_handler_fn) (self_t *self, sb_msg_t *msg);

static const struct {
    const char *type;
    s_handler_fn *handler;
} s_dispatch_table [] = {
    { "exec.start", s_handle_start },
    { "exec.cancel", s_handle_cancel },
    { "exec.mcp.list", s_handle_mcp_list },
    { "exec.diff", s_handle_diff },
    { "exec.info", s_handle_info },
};

#define S_DISPATCH_COUNT (sizeof s_dispatch_table / sizeof s_dispatch_table [0])

const char *
sb_exec_dispatch_type (size_t index)
{
    return index < S_DISPATCH_COUNT ? s_dispatch_table [index].type : NULL;
}

static void
s_dispatch (self_t *self, sb_msg_t *msg)
{
    for (size_t k = 0; k < S_DISPATCH_COUNT; k++)
        if (strcmp (msg->h.type, s_dispatch_table [k].type) == 0) {
            s_dispatch_table [k].handler (self, msg);
            return;
        }
    sb_bus_error (self->bus, msg, SB_E_unknown_type, "exec does not serve %s", msg->h.type);
}

/* ------------------------------------------------------------------ */
/*  Startup and shutdown */

static void
s_self_destroy (self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    if (self->runs) {
        /* stop every run without reporting: like a crash, recovery decides */
        for (sb_exec_run_t *run = zhashx_first (self->runs); run; run = zhashx_next (self->runs)) {
            atomic_store (&run->shutdown, true);
            eventfd_write (run->cancel_fd, 1);
        }
        while (zhashx_size (self->runs) > 0) {
            struct pollfd p = { self->done_fd, POLLIN, 0 };
            poll (&p, 1, 100);
            s_reap (self);
        }
        zhashx_destroy (&self->runs);
    }
    sb_runtime_cache_destroy (&self->cache);   /* stops every MCP server */
    sb_mcp_config_destroy (&self->mcp);
    sb_runtime_cache_destroy (&self->cache);
    sb_exec_diffs_destroy (&self->diffs);
    zlistx_destroy (&self->done);
    if (self->done_fd >= 0)
        close (self->done_fd);
    pthread_mutex_destroy (&self->done_lock);
    sb_bus_destroy (&self->bus);
    sb_enc_destroy (&self->enc);
    free (self);
    *self_p = NULL;
}

static self_t *
s_self_new (zsock_t *pipe, const sb_actor_args_t *args)
{
    self_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    self->done_fd = -1;
    pthread_mutex_init (&self->done_lock, NULL);
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "exec");
    self->endpoint = args->cmd_endpoint;
    self->sub_endpoint = args->sub_endpoint;
    self->config = args->config;
    /* a command that prints without end must not fill the disk: the tape
       keeps a bounded head and tail of each call (docs/operations.md) */
    self->tool_tape_cap = sb_actor_limit (ACTOR, self->config ? self->config->tool_output_tape : 0,
                                          "SWITCHBOARD_TOOL_OUTPUT_TAPE", SB_EXEC_TOOL_TAPE_DEFAULT,
                                          SB_EXEC_TOOL_TAPE_MIN, SB_EXEC_TOOL_TAPE_MAX);
    /* MCP servers: --mcp-config FILE must load; DATA/mcp.json when present */
    char mcp_path [4200], err [512] = "";
    const char *given = self->config ? self->config->mcp_config : NULL;
    if (given || args->data_dir) {
        if (!given)
            snprintf (mcp_path, sizeof mcp_path, "%s/mcp.json", args->data_dir);
        self->mcp = sb_mcp_config_load (given ? given : mcp_path, given != NULL, err, sizeof err);
        if (!self->mcp && err [0]) {
            sb_error (ACTOR, "MCP servers: %s", err);
            s_self_destroy (&self);
            return NULL;
        }
        if (self->mcp)
            sb_info (ACTOR, "MCP servers: %zu from %s", self->mcp->n, self->mcp->source);
    }
    self->mcp_idle_ms = (int64_t) sb_actor_limit (ACTOR, 0, "SWITCHBOARD_MCP_IDLE_S", SB_MCP_IDLE_MS / 1000,
                                                  1, 7 * 24 * 3600) * 1000;
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    self->runs = zhashx_new ();
    self->done = zlistx_new ();
    /* SWITCHBOARD_RUNTIME_CACHE: sessions whose prepared runtime is kept (256) */
    const char *cap = getenv ("SWITCHBOARD_RUNTIME_CACHE");
    self->cache = sb_runtime_cache_new (cap && atol (cap) > 0 ? (size_t) atol (cap) : 0);
    self->done_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    self->diffs = sb_exec_diffs_new (args->cmd_endpoint, args->data_dir);
    if (!self->bus || !self->enc || !self->runs || !self->done || !self->cache || self->done_fd < 0
    ||  !self->diffs) {
        s_self_destroy (&self);
        return NULL;
    }
    return self;
}

void
sb_exec_actor (zsock_t *pipe, void *args)
{
    /* tools' grandchildren that escape with setsid are reparented to us */
    sb_spawn_init_subreaper ();
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    sb_enc_t *caps = sb_enc_new ();
    sb_enc_map_open (caps);
    sb_enc_kstr (caps, "workspace_sync", "same_path");
    sb_enc_map_close (caps);
    size_t clen;
    const uint8_t *cdata = sb_enc_data (caps, &clen);
    int rc = sb_actor_register (pipe, self->bus, "exec", self->instance, cdata, clen);
    sb_enc_destroy (&caps);
    if (rc) {
        s_self_destroy (&self);
        return;
    }
    while (!self->terminated) {
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
            { NULL, self->done_fd, ZMQ_POLLIN, 0 },
            { NULL, sb_exec_diffs_fd (self->diffs), ZMQ_POLLIN, 0 },
        };
        long wait = sb_bus_has_queued (self->bus) ? 0 : (long) sb_bus_tick (self->bus);
        int64_t sweep_in = self->next_sweep - sb_mono_ms ();
        if (sweep_in < wait)
            wait = sweep_in > 0 ? (long) sweep_in : 0;
        if (zmq_poll (items, 4, wait) < 0 && errno != EINTR)
            break;
        /* As the subreaper we inherit what tools leave behind; a process
           that exited while its spawn was deciding whose it was ends up a
           zombie of ours that no spawn waits for. Reap those. */
        if (sb_mono_ms () >= self->next_sweep) {
            sb_spawn_reap_orphans ();
            /* MCP servers of sessions that have not run for a while */
            sb_runtime_cache_each (self->cache, s_stop_idle_mcp, self);
            self->next_sweep = sb_mono_ms () + ORPHAN_SWEEP_MS;
        }
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        if (items [2].revents & ZMQ_POLLIN)
            s_reap (self);
        if (items [3].revents & ZMQ_POLLIN)
            sb_exec_diffs_answer (self->diffs, self->bus);
        sb_msg_t *msg;
        while ((msg = sb_bus_recv (self->bus, 0))) {
            if (msg->route)
                s_dispatch (self, msg);
            sb_msg_destroy (&msg);
        }
    }
    s_self_destroy (&self);
}

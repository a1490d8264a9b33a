/*  actors/exec.c — the local executor (docs/architecture.md): drives the agent loop
    of each run it is given.

    The actor thread owns the run host (actors/exec/host.h, shared with the
    external worker): the table of runs and the runtime cache. Each run
    gets a thread of its own that talks to the bus with its own socket, and
    a heartbeat thread that keeps the lease alive even while a tool blocks
    (actors/exec/agent.c). Cancel reaches a run through an eventfd: the
    actor writes it on exec.cancel (pushed by the run actor at once).

    Every append to the tape carries the run's fence, so an executor whose
    lease lapsed cannot write: the session actor refuses it
    (actors/exec/tape.c). */
#include "actors/actor.h"
#include "actors/exec/agent.h"
#include "actors/exec/host.h"
#include "actors/exec/mcp.h"
#include "actors/exec/mcp_oauth.h"
#include "actors/exec/changes.h"
#include "actors/exec/runtime.h"
#include "sandbox/spawn.h"
#include "bus/client.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ACTOR "exec"

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_enc_t *enc;
    char instance [129];
    const sb_server_config_t *config;
    sb_exec_host_t *host;       /* the runs and the runtime cache (actors/exec/host.h) */
    sb_mcp_config_t *mcp;       /* MCP servers (actors/exec/mcp.h), or NULL; read-only once loaded */
    sb_mcp_logins_t *logins;    /* OAuth logins waiting for the person (actors/exec/mcp_login.c) */
    sb_exec_diffs_t *diffs;     /* exec.diff jobs (actors/exec/diff.c) */
    bool terminated;
} self_t;


/* ------------------------------------------------------------------ */
/*  The actor thread */

/*  Starts the run (actors/exec/host.h) unless it runs here already: the
    run actor may repeat an exec.start whose reply it did not see. */
static void
s_handle_start (self_t *self, sb_msg_t *msg)
{
    if (sb_exec_host_start (self->host, msg->body, msg->body, 0) < 0) {
        sb_bus_error (self->bus, msg, SB_E_internal, "cannot start a run thread");
        return;
    }
    sb_enc_t *e = self->enc;
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
    bool found = sb_exec_host_cancel (self->host, sb_get_str (msg->body, "run_id"));
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kbool (e, "found", found);
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

/*  A person connects an OAuth MCP server: the URL to open. The flow
    (discovery, registration) blocks this thread for its HTTP requests,
    at most 30 s; runs go on on their own threads. */
static void
s_handle_mcp_login (self_t *self, sb_msg_t *msg)
{
    const char *server = sb_get_str (msg->body, "server");
    char *url = NULL, err [512];
    sb_err_t code;
    if (!self->logins && !(self->logins = sb_mcp_logins_new (self->mcp))) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return;
    }
    if (sb_mcp_logins_start (self->logins, server, sb_get_str (msg->body, "redirect_uri"), &url, &code, err,
                             sizeof err)) {
        sb_bus_error (self->bus, msg, code, "%s", err);
        return;
    }
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "server", server);
    if (url) {
        sb_enc_kstr (e, "url", url);
        sb_enc_kuint (e, "expires_in_s", 600);
    }
    sb_enc_map_close (e);
    free (url);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

/*  The browser came back to the gateway's /oauth/callback. */
static void
s_handle_mcp_oauth_callback (self_t *self, sb_msg_t *msg)
{
    char server [SB_MCP_NAME_MAX + 1], err [512];
    sb_err_t code = SB_E_not_found;
    if (!self->logins || sb_mcp_logins_finish (self->logins, sb_get_str (msg->body, "state"),
                                               sb_get_str (msg->body, "code"), sb_get_str (msg->body, "error"),
                                               server, sizeof server, &code, err, sizeof err)) {
        sb_bus_error (self->bus, msg, code, "%s", self->logins ? err : "no login is waiting (mcp login)");
        return;
    }
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "server", server);
    sb_enc_kbool (e, "authorized", true);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

/*  A person logs out of an OAuth MCP server: its tokens are revoked
    (best effort, at most 30 s of this thread, as a login) and forgotten. */
static void
s_handle_mcp_logout (self_t *self, sb_msg_t *msg)
{
    const char *server = sb_get_str (msg->body, "server");
    char how [512], err [512];
    bool revoked;
    sb_err_t code;
    if (!self->logins && !(self->logins = sb_mcp_logins_new (self->mcp))) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return;
    }
    if (sb_mcp_logins_logout (self->logins, server, &revoked, how, sizeof how, &code, err, sizeof err)) {
        sb_bus_error (self->bus, msg, code, "%s", err);
        return;
    }
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "server", server);
    sb_enc_kbool (e, "revoked", revoked);
    sb_enc_kstr (e, "revocation", how);
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

const sb_dispatch_t sb_exec_dispatch [] = {
    SB_DISPATCH ("exec.start", s_handle_start),
    SB_DISPATCH ("exec.cancel", s_handle_cancel),
    SB_DISPATCH ("exec.mcp.list", s_handle_mcp_list),
    SB_DISPATCH ("exec.mcp.login", s_handle_mcp_login),
    SB_DISPATCH ("exec.mcp.oauth_callback", s_handle_mcp_oauth_callback),
    SB_DISPATCH ("exec.mcp.logout", s_handle_mcp_logout),
    SB_DISPATCH ("exec.diff", s_handle_diff),
    SB_DISPATCH ("exec.checkpoint_diff", s_handle_diff),
    SB_DISPATCH ("exec.checkpoints", s_handle_diff),
    SB_DISPATCH ("exec.info", s_handle_info),
    SB_DISPATCH_END
};

static void
s_dispatch (self_t *self, sb_msg_t *msg)
{
    const sb_dispatch_t *row = sb_dispatch_find (sb_exec_dispatch, msg->h.type);
    if (row)
        ((s_handler_fn *) row->fn) (self, msg);
    else
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
    /* stops every run without reporting, then every MCP server; the
       runs borrow the MCP config, so it goes after them */
    sb_exec_host_destroy (&self->host);
    sb_mcp_logins_destroy (&self->logins);
    sb_mcp_config_destroy (&self->mcp);
    sb_exec_diffs_destroy (&self->diffs);
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
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "exec");
    self->config = args->config;
    /* a command that prints without end must not fill the disk: the tape
       keeps a bounded head and tail of each call (docs/operations.md) */
    uint64_t tool_tape_cap = sb_actor_limit (ACTOR, self->config ? self->config->tool_output_tape : 0,
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
        /* OAuth tokens of HTTP servers (mcp login's) are kept in DATA/mcp-oauth */
        if (self->mcp && args->data_dir)
            self->mcp->data_dir = strdup (args->data_dir);
    }
    /* SWITCHBOARD_RUNTIME_CACHE: sessions whose prepared runtime is kept (256) */
    const char *cap = getenv ("SWITCHBOARD_RUNTIME_CACHE");
    sb_exec_host_opts_t opts = {
        .actor = ACTOR,
        .instance = self->instance,
        .endpoint = args->cmd_endpoint,
        .sub_endpoint = args->sub_endpoint,
        .tool_tape_cap = tool_tape_cap,
        .mcp_config = self->mcp,
        .mcp_idle_ms = (int64_t) sb_actor_limit (ACTOR, 0, "SWITCHBOARD_MCP_IDLE_S", SB_MCP_IDLE_MS / 1000,
                                                 1, 7 * 24 * 3600) * 1000,
        .runtime_cache = cap && atol (cap) > 0 ? (size_t) atol (cap) : SB_RUNTIME_CACHE_DEFAULT,
    };
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    self->diffs = sb_exec_diffs_new (args->cmd_endpoint, args->data_dir);
    if (self->diffs) {
        opts.data_dir = sb_exec_diffs_data_dir (self->diffs);
        self->host = sb_exec_host_new (&opts);
    }
    if (!self->bus || !self->enc || !self->diffs || !self->host) {
        s_self_destroy (&self);
        return NULL;
    }
    return self;
}

void
sb_exec_actor (zsock_t *pipe, void *args)
{
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    /* a person answers MCP servers' elicitations through interact */
    sb_exec_mcp_elicit_install ();
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
            { NULL, sb_exec_host_fd (self->host), ZMQ_POLLIN, 0 },
            { NULL, sb_exec_diffs_fd (self->diffs), ZMQ_POLLIN, 0 },
        };
        long wait = sb_bus_has_queued (self->bus) ? 0 : (long) sb_bus_tick (self->bus);
        /* the host's timer: orphaned zombies, idle MCP servers */
        int64_t sweep_in = sb_exec_host_tick (self->host);
        if (sweep_in < wait)
            wait = (long) sweep_in;
        if (zmq_poll (items, 4, wait) < 0 && errno != EINTR)
            break;
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        if (items [2].revents & ZMQ_POLLIN)
            sb_exec_host_reap (self->host);
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

/*  actors/exec/mcp.c — one session's MCP servers: their processes or HTTP
    endpoints, the JSON-RPC exchanges (initialize, tools/list, tools/call,
    notifications/cancelled), and what the model and the person see of
    them. See actors/exec/mcp.h and docs/mcp.md.

    Every exchange is a blocking request on the run thread that owns the
    set, bounded by a deadline and watching the run's cancel eventfd. While
    it waits, whatever else the server says is handled: a tools/list_changed
    notification marks its tools stale, a ping is answered, roots/list is
    answered with the session's workspace (the one client capability we
    declare), any other request of the server is refused.
*/
#include "actors/exec/mcp_impl.h"
#include "sandbox/spawn.h"
#include "common/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ACTOR "exec"
#define S_STOP_GRACE_MS 200
#define S_DESC_MAX 4096
#define S_SCHEMA_MAX (64 * 1024)

struct sb_mcp_set {
    const sb_mcp_config_t *cfg;
    char session_id [33];
    char cwd [4096];
    s_server_t *servers;
    size_t n;
};

static int64_t
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}



/* ------------------------------------------------------------------ */
/*  Messages from the server */

static void
s_tail_add (s_server_t *srv, const char *data, size_t n)
{
    size_t have = strlen (srv->err_tail);
    if (n >= S_STDERR_TAIL) {
        memcpy (srv->err_tail, data + n - S_STDERR_TAIL, S_STDERR_TAIL);
        srv->err_tail [S_STDERR_TAIL] = 0;
        return;
    }
    if (have + n > S_STDERR_TAIL) {
        size_t drop = have + n - S_STDERR_TAIL;
        memmove (srv->err_tail, srv->err_tail + drop, have - drop + 1);
        have -= drop;
    }
    memcpy (srv->err_tail + have, data, n);
    srv->err_tail [have + n] = 0;
}

static int s_send (s_server_t *srv, json_t *msg, int64_t deadline, int cancel_fd);

static void
s_on_message (s_server_t *srv, json_t *m, sb_mcp_msg_kind_t kind, int64_t id)
{
    if (kind == SB_MCP_MSG_RESPONSE) {
        if (id == srv->want_id && !srv->resp) {
            srv->resp = m;
            return;
        }
    }
    else
    if (kind == SB_MCP_MSG_NOTIFICATION) {
        const char *method = json_string_value (json_object_get (m, "method"));
        if (strcmp (method, "notifications/tools/list_changed") == 0)
            srv->stale = true;
        else
        if (strcmp (method, "notifications/progress") == 0)
            sb_mcp_progress (srv, json_object_get (m, "params"));
    }
    else
    if (kind == SB_MCP_MSG_REQUEST) {
        //  Answered at once, on either transport: a server waits for the
        //  answer before it answers our call.
        const char *method = json_string_value (json_object_get (m, "method"));
        int64_t asked = s_now ();
        json_t *r = strcmp (method, "sampling/createMessage") == 0
                  ? sb_mcp_sample_answer (m, srv->conf->name, srv->sampler, srv->sampler_arg)
                  : sb_mcp_answer (m, srv->cwd, srv->conf->name);
        srv->held_ms += s_now () - asked;
        if (r && srv->proc)
            s_send (srv, r, s_now () + 1000 - srv->held_ms, -1);
        else
        if (r)
            sb_mcp_http_reply (srv, r);
    }
    json_decref (m);
}

void
sb_mcp_on_line (const char *line, size_t len, void *arg)
{
    s_server_t *srv = arg;
    void *json;
    int64_t id;
    sb_mcp_msg_kind_t kind = sb_mcp_msg_parse (line, len, &json, &id);
    if (kind != SB_MCP_MSG_INVALID)
        s_on_message (srv, json, kind, id);
}

/* ------------------------------------------------------------------ */
/*  stdio */

static void
s_stop (s_server_t *srv)
{
    sb_spawn_proc_stop (&srv->proc, S_STOP_GRACE_MS);
    sb_mcp_http_close (srv);
    srv->http_session [0] = 0;
    sb_mcp_lines_clear (&srv->lines);
    json_decref (srv->resp);
    srv->resp = NULL;
}

static void
s_fail (s_server_t *srv, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_fail (s_server_t *srv, const char *fmt, ...)
{
    char msg [384];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    //  What the server printed last often says why; secrets are taken out
    //  by the caller before anything leaves the executor.
    if (srv->err_tail [0]) {
        const char *t = srv->err_tail;
        size_t tl = strlen (t);
        if (tl > 100)
            t += tl - 100;
        snprintf (srv->error, sizeof srv->error, "%s (stderr: %s)", msg, t);
    }
    else
        snprintf (srv->error, sizeof srv->error, "%s", msg);
    for (char *p = srv->error; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    srv->state = S_FAILED;
    s_stop (srv);
    sb_mcp_status_note (srv);
}

bool
sb_mcp_cancel_ready (int fd)
{
    if (fd <= 0)
        return false;
    struct pollfd p = { fd, POLLIN, 0 };
    return poll (&p, 1, 0) > 0;
}

static int
s_send_stdio (s_server_t *srv, const char *data, size_t len, int64_t deadline, int cancel_fd)
{
    int fd = sb_spawn_proc_stdin (srv->proc);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write (fd, data + off, len - off);
        if (w > 0) {
            off += (size_t) w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return S_DEAD;
        int64_t left = sb_mcp_deadline (srv, deadline) - s_now ();
        if (left <= 0)
            return S_TIMEOUT;
        struct pollfd p [2] = { { fd, POLLOUT, 0 }, { cancel_fd, POLLIN, 0 } };
        poll (p, cancel_fd > 0 ? 2 : 1, (int) (left > 1000 ? 1000 : left));
        if (cancel_fd > 0 && (p [1].revents & POLLIN))
            return S_CANCELLED;
        //  A server blocked writing stdout or stderr reads no stdin: keep
        //  both drained, so that it cannot block us both.
        char buf [65536];
        ssize_t r = read (sb_spawn_proc_stdout (srv->proc), buf, sizeof buf);
        if (r > 0)
            sb_mcp_lines_feed (&srv->lines, buf, (size_t) r, sb_mcp_on_line, srv);
        r = read (sb_spawn_proc_stderr (srv->proc), buf, sizeof buf);
        if (r > 0)
            s_tail_add (srv, buf, (size_t) r);
    }
    return S_OK;
}

//  Reads what the server says until the awaited response came, the
//  deadline passed, a cancel arrived or the server died.
static int
s_wait_stdio (s_server_t *srv, int64_t deadline, int cancel_fd)
{
    int out = sb_spawn_proc_stdout (srv->proc), err = sb_spawn_proc_stderr (srv->proc);
    bool err_open = true;
    while (!srv->resp) {
        int64_t left = sb_mcp_deadline (srv, deadline) - s_now ();
        if (left <= 0)
            return S_TIMEOUT;
        struct pollfd p [4] = { { out, POLLIN, 0 }, { cancel_fd, POLLIN, 0 }, { err_open ? err : -1, POLLIN, 0 },
                                { sb_spawn_proc_pidfd (srv->proc), POLLIN, 0 } };
        int pr = poll (p, 4, (int) (left > 1000 ? 1000 : left));
        if (pr < 0 && errno != EINTR)
            return S_DEAD;
        if (cancel_fd > 0 && (p [1].revents & POLLIN))
            return S_CANCELLED;
        if (p [2].revents) {
            char buf [4096];
            ssize_t r = read (err, buf, sizeof buf);
            if (r > 0)
                s_tail_add (srv, buf, (size_t) r);
            else
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                err_open = false;
        }
        if (p [0].revents) {
            //  Bounded per round, so the deadline and a cancel are seen
            //  even while a server floods.
            for (int i = 0; i < 16 && !srv->resp; i++) {
                char buf [65536];
                ssize_t r = read (out, buf, sizeof buf);
                if (r > 0) {
                    sb_mcp_lines_feed (&srv->lines, buf, (size_t) r, sb_mcp_on_line, srv);
                    continue;
                }
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                    return srv->resp ? S_OK : S_DEAD;
                break;
            }
        }
        if ((pr == 0 || p [3].revents) && sb_spawn_proc_exited (srv->proc) && !(p [0].revents & POLLIN))
            return S_DEAD;
    }
    return S_OK;
}


/* ------------------------------------------------------------------ */
/*  One exchange */

static int
s_send (s_server_t *srv, json_t *msg, int64_t deadline, int cancel_fd)
{
    char *text = json_dumps (msg, JSON_COMPACT);
    json_decref (msg);
    if (!text)
        return S_ERROR;
    int rc;
    if (srv->proc) {
        size_t n = strlen (text);
        text [n] = 0;
        char *line = malloc (n + 2);
        if (!line) {
            free (text);
            return S_ERROR;
        }
        memcpy (line, text, n);
        line [n] = '\n';
        rc = s_send_stdio (srv, line, n + 1, deadline, cancel_fd);
        free (line);
    }
    else
        rc = sb_mcp_http_post (srv, text, strlen (text), deadline, cancel_fd);
    free (text);
    return rc;
}

static void
s_notify (s_server_t *srv, const char *method, json_t *params)
{
    json_t *m = params ? json_pack ("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params)
                       : json_pack ("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    if (m)
        s_send (srv, m, s_now () + 2000 - srv->held_ms, -1);
}

/*  Sends a request and waits for its response: *result gets the result
    (owned) on S_OK; a JSON-RPC error is S_ERROR with its message in err. */
static int
s_rpc (s_server_t *srv, const char *method, json_t *params, int timeout_ms, int cancel_fd, json_t **result,
       char *err, size_t errlen)
{
    *result = NULL;
    err [0] = 0;
    int64_t id = srv->next_id++;
    int64_t deadline = s_now () + timeout_ms;
    srv->held_ms = 0;
    json_t *m = json_pack ("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", (json_int_t) id, "method", method,
                           "params", params ? params : json_object ());
    if (!m)
        return S_ERROR;
    json_decref (srv->resp);
    srv->resp = NULL;
    srv->want_id = id;
    srv->used = s_now ();
    int rc = s_send (srv, m, deadline, cancel_fd);
    if (rc == S_OK && srv->proc)
        rc = s_wait_stdio (srv, deadline, cancel_fd);
    else
    if (rc == S_OK && !srv->resp)
        rc = S_DEAD, snprintf (srv->error, sizeof srv->error, "HTTP: no JSON-RPC response to %s", method);
    if (rc == S_CANCELLED || rc == S_TIMEOUT)
        s_notify (srv, "notifications/cancelled",
                  json_pack ("{s:I, s:s}", "requestId", (json_int_t) id, "reason",
                             rc == S_CANCELLED ? "cancelled" : "timed out"));
    if (rc != S_OK)
        return rc;
    json_t *resp = srv->resp;
    srv->resp = NULL;
    srv->want_id = -1;
    json_t *e = json_object_get (resp, "error");
    if (e) {
        const char *msg = json_string_value (json_object_get (e, "message"));
        snprintf (err, errlen, "JSON-RPC error %lld: %.300s", (long long) json_integer_value (json_object_get (e, "code")),
                  msg ? msg : "(no message)");
        json_decref (resp);
        return S_ERROR;
    }
    *result = json_incref (json_object_get (resp, "result"));
    json_decref (resp);
    return S_OK;
}


/* ------------------------------------------------------------------ */
/*  Tools */

//  At most max bytes of s, cut on a character boundary, valid UTF-8.
static char *
s_text_dup (const char *s, size_t max)
{
    size_t n = strlen (s);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char) s [n] & 0xC0) == 0x80)
            n--;
    }
    return sb_tools_utf8_clean (s, n, NULL);
}

static void
s_tools_free (s_server_t *srv)
{
    for (size_t k = 0; k < srv->ntools; k++) {
        free (srv->tools [k].orig);
        free (srv->tools [k].description);
        free (srv->tools [k].schema);
    }
    free (srv->tools);
    srv->tools = NULL;
    srv->ntools = 0;
}

//  mcp__<server>__<tool>, with what the providers refuse in a function
//  name made '_'. Returns false when it does not fit.
static bool
s_expose (const char *server, const char *tool, char *out, size_t size)
{
    int n = snprintf (out, size, SB_MCP_PREFIX "%s__%s", server, tool);
    if (n < 0 || (size_t) n >= size)
        return false;
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            *p = '_';
    return true;
}

static int
s_list_tools (s_server_t *srv, int cancel_fd)
{
    s_tool_t *tools = NULL;
    size_t n = 0;
    char *cursor = NULL;
    char err [400];
    int rc = S_OK;
    for (int page = 0; page < 32; page++) {
        json_t *params = cursor ? json_pack ("{s:s}", "cursor", cursor) : json_object ();
        free (cursor);
        cursor = NULL;
        json_t *res;
        rc = s_rpc (srv, "tools/list", params, srv->conf->startup_ms, cancel_fd, &res, err, sizeof err);
        if (rc != S_OK)
            break;
        json_t *list = json_object_get (res, "tools");
        size_t i;
        json_t *t;
        json_array_foreach (list, i, t) {
            const char *name = json_string_value (json_object_get (t, "name"));
            json_t *schema = json_object_get (t, "inputSchema");
            if (!name || n >= SB_MCP_MAX_TOOLS)
                continue;
            s_tool_t tool = { 0 };
            if (!s_expose (srv->conf->name, name, tool.exposed, sizeof tool.exposed)) {
                sb_warn (ACTOR, "mcp server %s: tool %.80s skipped: mcp__%s__<tool> is over %d characters",
                         srv->conf->name, name, srv->conf->name, SB_EXEC_TOOL_NAME_MAX_MCP);
                continue;
            }
            bool dup = false;
            for (size_t k = 0; k < n; k++)
                dup = dup || strcmp (tools [k].exposed, tool.exposed) == 0;
            char *sch = json_is_object (schema) ? json_dumps (schema, JSON_COMPACT) : strdup ("{\"type\":\"object\"}");
            if (dup || !sch || strlen (sch) > S_SCHEMA_MAX) {
                free (sch);
                continue;
            }
            const char *d = json_string_value (json_object_get (t, "description"));
            tool.read_only_hint = json_is_true (json_object_get (json_object_get (t, "annotations"), "readOnlyHint"));
            tool.orig = strdup (name);
            tool.schema = sch;
            tool.description = s_text_dup (d ? d : "", S_DESC_MAX);
            s_tool_t *nt = realloc (tools, (n + 1) * sizeof *nt);
            if (!nt || !tool.orig || !tool.description) {
                free (tool.orig), free (tool.schema), free (tool.description);
                if (nt)
                    tools = nt;
                continue;
            }
            tools = nt;
            tools [n++] = tool;
        }
        const char *next = json_string_value (json_object_get (res, "nextCursor"));
        cursor = next && *next ? strdup (next) : NULL;
        json_decref (res);
        if (!cursor)
            break;
    }
    free (cursor);
    if (rc != S_OK) {
        for (size_t k = 0; k < n; k++)
            free (tools [k].orig), free (tools [k].schema), free (tools [k].description);
        free (tools);
        if (rc == S_ERROR)
            s_fail (srv, "tools/list failed: %s", err);
        else
            s_fail (srv, "tools/list: %s", rc == S_TIMEOUT ? "no answer in time" : rc == S_CANCELLED ? "cancelled"
                                           : srv->error [0] ? srv->error : "the server went away");
        return rc;
    }
    s_tools_free (srv);
    srv->tools = tools;
    srv->ntools = n;
    srv->stale = false;
    sb_mcp_status_note (srv);
    return S_OK;
}

//  Starts (or restarts) a server, initializes it and lists its tools.
static int
s_start (s_server_t *srv, const char *cwd, int cancel_fd)
{
    s_stop (srv);
    srv->err_tail [0] = 0;
    srv->error [0] = 0;
    srv->next_id = 1;
    sb_mcp_lines_init (&srv->lines, SB_MCP_LINE_MAX);
    if (srv->conf->argv) {
        //  In the tools' box (docs/sandbox.md), with the network: a server
        //  may call its service. Its /proc is its own, so a tool of the
        //  session cannot read the secrets in its environment.
        sb_spawn_opts_t o = {
            .argv = (const char *const *) srv->conf->argv,
            .cwd = cwd,
            .env_extra = (const char *const *) srv->conf->env,
            .network = true,
        };
        char err [512];
        srv->proc = sb_spawn_proc_start (&o, err, sizeof err);
        if (!srv->proc) {
            s_fail (srv, "cannot start: %s", err);
            return S_DEAD;
        }
    }
    srv->cwd = cwd;
    json_t *params = json_pack ("{s:s, s:{s:{s:b}}, s:{s:s, s:s}}", "protocolVersion", S_PROTOCOL, "capabilities",
                                "roots", "listChanged", 0, "clientInfo", "name", "switchboard", "version", "1");
    //  Elicitation only where someone can answer (an elicitor installed).
    if (params && sb_mcp_elicit_supported ())
        json_object_set_new (json_object_get (params, "capabilities"), "elicitation", json_object ());
    //  Sampling only for a session that allows it (sb_mcp_set_sampler).
    srv->sampling_declared = srv->sampler != NULL;
    if (params && srv->sampler)
        json_object_set_new (json_object_get (params, "capabilities"), "sampling", json_object ());
    json_t *res;
    char err [400];
    int rc = s_rpc (srv, "initialize", params, srv->conf->startup_ms, cancel_fd, &res, err, sizeof err);
    if (rc != S_OK) {
        if (rc == S_ERROR)
            s_fail (srv, "initialize failed: %s", err);
        else
        if (rc == S_CANCELLED)
            s_fail (srv, "cancelled while starting");
        else
        if (rc == S_TIMEOUT)
            s_fail (srv, "no answer to initialize within %d s", srv->conf->startup_ms / 1000);
        else {
            char why [300];
            snprintf (why, sizeof why, "%s", srv->error [0] ? srv->error : "it went away during initialize");
            s_fail (srv, "%s", why);
        }
        return rc;
    }
    json_decref (res);
    s_notify (srv, "notifications/initialized", NULL);
    if (!srv->proc && sb_mcp_elicit_supported ())
        sb_mcp_http_open_stream (srv, srv->conf->startup_ms < 5000 ? srv->conf->startup_ms : 5000);
    srv->state = S_READY;
    rc = s_list_tools (srv, cancel_fd);
    if (rc == S_OK)
        sb_info (ACTOR, "mcp server %s ready: %zu tools%s", srv->conf->name, srv->ntools,
                 srv->proc ? "" : " (http)");
    return rc;
}


/* ------------------------------------------------------------------ */
/*  The set */

sb_mcp_set_t *
sb_mcp_set_new (const sb_mcp_config_t *cfg, const char *session_id, const sb_val_t *names)
{
    sb_mcp_set_t *set = calloc (1, sizeof *set);
    if (!set)
        return NULL;
    set->cfg = cfg;
    snprintf (set->session_id, sizeof set->session_id, "%s", session_id ? session_id : "");
    size_t n = cfg ? cfg->n : 0;
    set->servers = calloc (n + 1, sizeof *set->servers);
    if (!set->servers) {
        free (set);
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        bool wanted = !names;
        for (uint32_t i = 0; names && names->type == SB_V_ARRAY && i < names->len; i++) {
            const sb_val_t *v = sb_array_at (names, i);
            wanted = wanted || (v->type == SB_V_STR && strcmp (v->v.s, cfg->servers [k].name) == 0);
        }
        if (!wanted)
            continue;
        s_server_t *srv = &set->servers [set->n++];
        srv->conf = &cfg->servers [k];
        srv->cfg = cfg;
        srv->want_id = -1;
        sb_mcp_lines_init (&srv->lines, SB_MCP_LINE_MAX);
    }
    return set;
}

void
sb_mcp_set_destroy (sb_mcp_set_t **set_p)
{
    sb_mcp_set_t *set = set_p ? *set_p : NULL;
    if (!set)
        return;
    for (size_t k = 0; k < set->n; k++) {
        s_server_t *srv = &set->servers [k];
        bool was = srv->proc || srv->curl;
        s_stop (srv);
        s_tools_free (srv);
        sb_mcp_oauth_destroy (&srv->oauth);
        if (was) {
            srv->state = S_NEW;
            sb_mcp_status_note (srv);
        }
    }
    free (set->servers);
    free (set);
    *set_p = NULL;
}

void
sb_mcp_set_sampler (sb_mcp_set_t *set, sb_mcp_sampler_fn *fn, void *arg)
{
    for (size_t k = 0; set && k < set->n; k++) {
        s_server_t *srv = &set->servers [k];
        //  The capability is declared at initialize: a server that runs
        //  with the other one starts again (at sb_mcp_set_prepare).
        if (srv->state == S_READY && srv->sampling_declared != (fn != NULL)) {
            sb_info (ACTOR, "session=%s: mcp server %s starts again: sampling is now %s", set->session_id,
                     srv->conf->name, fn ? "allowed" : "not allowed");
            s_stop (srv);
            srv->state = S_NEW;
            sb_mcp_status_note (srv);
        }
        srv->sampler = fn;
        srv->sampler_arg = arg;
    }
}

void
sb_mcp_set_prepare (sb_mcp_set_t *set, const char *cwd, int cancel_fd, char *notes, size_t notes_len)
{
    if (notes_len)
        notes [0] = 0;
    if (!set)
        return;
    snprintf (set->cwd, sizeof set->cwd, "%s", cwd);
    for (size_t k = 0; k < set->n; k++) {
        s_server_t *srv = &set->servers [k];
        srv->restarts = 0;
        bool dead = srv->proc && sb_spawn_proc_exited (srv->proc);
        if (srv->state == S_READY && !dead) {
            if (srv->stale)
                s_list_tools (srv, cancel_fd);
            continue;
        }
        //  Not started yet, or failed or died since the last run: each run
        //  gives it a fresh start.
        if (s_start (srv, set->cwd, cancel_fd) != S_OK && notes_len) {
            size_t used = strlen (notes);
            char *red = sb_mcp_redact (set->cfg, srv->error);
            snprintf (notes + used, notes_len - used, "%sthe MCP server %s is not available: %s; its tools are not offered",
                      used ? "\n" : "", srv->conf->name, red ? red : "");
            free (red);
            sb_warn (ACTOR, "session=%s: mcp server %s is not available", set->session_id, srv->conf->name);
        }
    }
}

void
sb_mcp_set_refresh (sb_mcp_set_t *set, int cancel_fd)
{
    for (size_t k = 0; set && k < set->n; k++)
        if (set->servers [k].state == S_READY && set->servers [k].stale)
            s_list_tools (&set->servers [k], cancel_fd);
}

size_t
sb_mcp_set_stop_idle (sb_mcp_set_t *set, int64_t idle_ms)
{
    size_t n = 0;
    for (size_t k = 0; set && k < set->n; k++) {
        s_server_t *srv = &set->servers [k];
        if (srv->state == S_READY && srv->proc && s_now () - srv->used > idle_ms) {
            sb_info (ACTOR, "session=%s: mcp server %s stopped after %lld s unused", set->session_id,
                     srv->conf->name, (long long) (idle_ms / 1000));
            s_stop (srv);
            s_tools_free (srv);
            srv->state = S_NEW;
            sb_mcp_status_note (srv);
            n++;
        }
    }
    return n;
}

size_t
sb_mcp_set_tool_count (const sb_mcp_set_t *set)
{
    size_t n = 0;
    for (size_t k = 0; set && k < set->n; k++)
        n += set->servers [k].ntools;
    return n;
}

void
sb_mcp_set_tool (const sb_mcp_set_t *set, size_t i, const char **name, const char **description,
                 const char **parameters)
{
    for (size_t k = 0; k < set->n; k++) {
        const s_server_t *srv = &set->servers [k];
        if (i < srv->ntools) {
            *name = srv->tools [i].exposed;
            *description = srv->tools [i].description;
            *parameters = srv->tools [i].schema;
            return;
        }
        i -= srv->ntools;
    }
}

int
sb_mcp_set_read_only_hint (const sb_mcp_set_t *set, const char *name)
{
    for (size_t k = 0; set && k < set->n; k++)
        for (size_t t = 0; t < set->servers [k].ntools; t++)
            if (strcmp (set->servers [k].tools [t].exposed, name) == 0)
                return set->servers [k].tools [t].read_only_hint;
    return -1;
}

//  The server a tool name belongs to, by its mcp__<server>__ prefix.
static s_server_t *
s_server_of (sb_mcp_set_t *set, const char *name, const char **tool)
{
    size_t pl = strlen (SB_MCP_PREFIX);
    for (size_t k = 0; set && k < set->n; k++) {
        s_server_t *srv = &set->servers [k];
        size_t nl = strlen (srv->conf->name);
        if (strncmp (name + pl, srv->conf->name, nl) == 0 && strncmp (name + pl + nl, "__", 2) == 0) {
            *tool = name + pl + nl + 2;
            return srv;
        }
    }
    return NULL;
}

int
sb_mcp_set_why_missing (sb_mcp_set_t *set, const char *name, char *out, size_t size)
{
    const char *tname = NULL;
    s_server_t *srv = sb_mcp_is_tool (name) ? s_server_of (set, name, &tname) : NULL;
    out [0] = 0;
    if (!srv)
        return -1;
    char msg [1024];
    if (srv->state == S_READY)
        snprintf (msg, sizeof msg, "the MCP server %s has no tool %.100s", srv->conf->name, tname);
    else
        snprintf (msg, sizeof msg, "the MCP server %s is not available: %s", srv->conf->name,
                  srv->error [0] ? srv->error : "it is not running");
    char *red = sb_mcp_redact (set->cfg, msg);
    snprintf (out, size, "%s", red ? red : "");
    free (red);
    return 0;
}

static void
s_result (sb_tool_result_t *res, const sb_mcp_config_t *cfg, bool ok, const char *text, int64_t start)
{
    char *clean = sb_tools_utf8_clean (text, strlen (text), NULL);
    res->output = sb_mcp_redact (cfg, clean ? clean : "");
    free (clean);
    res->ok = ok && res->output;
    res->duration_ms = s_now () - start;
}

/*  A tools/call result as text for the model: text content as it is,
    other kinds described, structuredContent when there is no content;
    capped like every tool output (the first and last halves). */
static char *
s_format_result (json_t *result, bool *truncated)
{
    json_t *content = json_object_get (result, "content");
    size_t cap = 4096, len = 0;
    char *out = malloc (cap);
    if (!out)
        return NULL;
    out [0] = 0;
    uint64_t total = 0;
    size_t i;
    json_t *c;
    json_array_foreach (content, i, c) {
        const char *type = json_string_value (json_object_get (c, "type"));
        char desc [600];
        const char *piece = NULL;
        if (type && strcmp (type, "text") == 0)
            piece = json_string_value (json_object_get (c, "text"));
        else
        if (type && (strcmp (type, "image") == 0 || strcmp (type, "audio") == 0)) {
            const char *mime = json_string_value (json_object_get (c, "mimeType"));
            const char *data = json_string_value (json_object_get (c, "data"));
            snprintf (desc, sizeof desc, "[%s content: %.100s, %zu bytes of base64, not shown]", type,
                      mime ? mime : "?", data ? strlen (data) : 0);
            piece = desc;
        }
        else
        if (type && strcmp (type, "resource_link") == 0) {
            const char *uri = json_string_value (json_object_get (c, "uri"));
            const char *name = json_string_value (json_object_get (c, "name"));
            snprintf (desc, sizeof desc, "[resource link: %.300s%s%.200s]", uri ? uri : "?", name ? " " : "",
                      name ? name : "");
            piece = desc;
        }
        else
        if (type && strcmp (type, "resource") == 0) {
            json_t *r = json_object_get (c, "resource");
            piece = json_string_value (json_object_get (r, "text"));
            if (!piece) {
                const char *uri = json_string_value (json_object_get (r, "uri"));
                const char *mime = json_string_value (json_object_get (r, "mimeType"));
                snprintf (desc, sizeof desc, "[embedded resource: %.300s, %.100s, binary, not shown]",
                          uri ? uri : "?", mime ? mime : "?");
                piece = desc;
            }
        }
        else {
            snprintf (desc, sizeof desc, "[content of type %.40s, not shown]", type ? type : "?");
            piece = desc;
        }
        if (!piece)
            continue;
        size_t n = strlen (piece) + (len ? 1 : 0);
        total += n;
        if (len + n + 1 > cap) {
            while (len + n + 1 > cap)
                cap *= 2;
            char *nb = realloc (out, cap);
            if (!nb) {
                free (out);
                return NULL;
            }
            out = nb;
        }
        if (len)
            out [len++] = '\n';
        memcpy (out + len, piece, strlen (piece) + 1);
        len += strlen (piece);
    }
    if (!len) {
        json_t *sc = json_object_get (result, "structuredContent");
        free (out);
        out = sc ? json_dumps (sc, JSON_COMPACT) : strdup ("(the tool returned no content)");
        if (!out)
            return NULL;
        len = strlen (out);
    }
    *truncated = false;
    if (len > SB_TOOLS_OUTPUT_MAX) {
        size_t half = SB_TOOLS_OUTPUT_MAX / 2;
        size_t head = half, tail = len - half;
        while (head > 0 && ((unsigned char) out [head] & 0xC0) == 0x80)
            head--;
        while (tail < len && ((unsigned char) out [tail] & 0xC0) == 0x80)
            tail++;
        char marker [160];
        int ml = snprintf (marker, sizeof marker, "\n\n[... output truncated: %zu bytes in total; the first %zu "
                           "and the last %zu bytes are shown ...]\n\n", len, head, len - tail);
        memcpy (out + head, marker, (size_t) ml);
        memmove (out + head + ml, out + tail, len - tail + 1);
        *truncated = true;
    }
    return out;
}

//  The tool of srv that the model knows as `name`, or NULL.
static const s_tool_t *
s_tool_of (const s_server_t *srv, const char *name)
{
    const s_tool_t *tool = NULL;
    for (size_t k = 0; k < srv->ntools; k++)
        if (strcmp (srv->tools [k].exposed, name) == 0)
            tool = &srv->tools [k];
    return tool;
}

//  Why a tools/call that did not succeed (rc from s_rpc, err its error)
//  failed, into msg, with what it means for the server: a call that timed
//  out or lost its server stops it, to be started again at its next call.
static void
s_call_failed (s_server_t *srv, int rc, int limit, const char *err, sb_tool_result_t *res, char *msg,
               size_t msglen)
{
    if (rc == S_ERROR)
        snprintf (msg, msglen, "the MCP server %s refused the call: %s", srv->conf->name, err);
    else
    if (rc == S_CANCELLED) {
        res->cancelled = true;
        snprintf (msg, msglen, "cancelled: the call was cancelled (the server was told)");
    }
    else
    if (rc == S_TIMEOUT) {
        res->timed_out = true;
        snprintf (msg, msglen, "the MCP server %s did not answer within %d s; it was stopped, "
                  "and is started again at its next call", srv->conf->name, limit / 1000);
        s_fail (srv, "it did not answer a call within %d s", limit / 1000);
    }
    else
    if (rc == S_AUTH || rc == S_FORGOTTEN || srv->state != S_READY) {
        //  Refused before it ran (or the server could not be started
        //  again after it forgot us): the call did not run
        char why [300];
        snprintf (why, sizeof why, "%s", srv->error [0] ? srv->error : "it is not running");
        if (srv->state == S_READY)
            s_fail (srv, "%s", why);
        snprintf (msg, msglen, "the MCP server %s did not run the call: %s", srv->conf->name, why);
    }
    else {
        char why [300];
        snprintf (why, sizeof why, "%s", srv->error);
        s_fail (srv, "it went away during a call%s%s", why [0] ? ": " : "", why);
        char detail [310] = "";
        if (why [0])
            snprintf (detail, sizeof detail, " (%s)", why);
        snprintf (msg, msglen, "the MCP server %s went away during the call%s; its effect is unknown, and "
                  "it was not retried", srv->conf->name, detail);
    }
}

int
sb_mcp_set_call (sb_mcp_set_t *set, const char *name, const char *args_json, int cancel_fd, int timeout_ms,
                 sb_tool_output_fn *on_progress, void *progress_arg, sb_tool_result_t *res)
{
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    int64_t start = s_now ();
    const char *tname = NULL;
    s_server_t *srv = s_server_of (set, name, &tname);
    char msg [1024];
    if (!srv) {
        snprintf (msg, sizeof msg, "no MCP server of this session offers %s", name);
        s_result (res, set ? set->cfg : NULL, false, msg, start);
        return -1;
    }
    const s_tool_t *tool = s_tool_of (srv, name);
    bool dead = srv->state != S_READY || (srv->proc && sb_spawn_proc_exited (srv->proc));
    if (dead && srv->restarts < 1) {
        //  A crashed server gets one more start per run.
        srv->restarts++;
        sb_info (ACTOR, "session=%s: restarting mcp server %s", set->session_id, srv->conf->name);
        s_start (srv, set->cwd, cancel_fd);
        tool = s_tool_of (srv, name);
    }
    if (srv->state != S_READY) {
        snprintf (msg, sizeof msg, "the MCP server %s is not available: %s", srv->conf->name,
                  srv->error [0] ? srv->error : "it is not running");
        s_result (res, set->cfg, false, msg, start);
        return -1;
    }
    if (!tool) {
        snprintf (msg, sizeof msg, "the MCP server %s has no tool %.100s (any more)", srv->conf->name, tname);
        s_result (res, set->cfg, false, msg, start);
        return -1;
    }
    json_error_t jerr;
    json_t *args = json_loads (args_json && *args_json ? args_json : "{}", JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object (args)) {
        json_decref (args);
        s_result (res, set->cfg, false, "the arguments must be a JSON object", start);
        return -1;
    }
    int limit = timeout_ms > 0 && timeout_ms < srv->conf->call_ms ? timeout_ms : srv->conf->call_ms;
    //  A progressToken of its own to each call: the server's progress
    //  notifications with it become the call's live output.
    static _Atomic uint64_t s_calls;
    snprintf (srv->progress_token, sizeof srv->progress_token, "sb-%llu", (unsigned long long) ++s_calls);
    srv->on_progress = on_progress;
    srv->progress_arg = progress_arg;
    srv->progress_ms = 0;
    srv->progress_last = -1;
    srv->progress_shown = 0;
    json_t *params = json_pack ("{s:s, s:o, s:{s:s}}", "name", tool->orig, "arguments", args, "_meta",
                                "progressToken", srv->progress_token);
    json_t *result;
    char err [400];
    json_incref (params);       //  kept for one retry
    int rc = s_rpc (srv, "tools/call", params, limit, cancel_fd, &result, err, sizeof err);
    if (rc == S_FORGOTTEN) {
        //  The server forgot our session (it restarted): the call never
        //  ran. A new session, and the call once more.
        sb_info (ACTOR, "session=%s: mcp server %s forgot our session; initializing again", set->session_id,
                 srv->conf->name);
        rc = s_start (srv, set->cwd, cancel_fd);
        if (rc == S_OK)
            rc = s_rpc (srv, "tools/call", params, limit, cancel_fd, &result, err, sizeof err);
        else
            json_decref (params);
    }
    else
        json_decref (params);
    srv->progress_token [0] = 0;
    srv->on_progress = NULL;
    if (rc == S_OK) {
        char *text = s_format_result (result, &res->truncated);
        bool is_error = json_is_true (json_object_get (result, "isError"));
        json_decref (result);
        if (is_error && text) {
            size_t n = strlen (text) + 64;
            char *t2 = malloc (n);
            if (t2)
                snprintf (t2, n, "reported by the tool: %s", text);
            free (text);
            text = t2;
        }
        s_result (res, set->cfg, !is_error, text ? text : "out of memory", start);
        //  A server that echoes its OAuth token does not show it.
        sb_mcp_oauth_redact (srv->oauth, res->output);
        free (text);
        return res->ok ? 0 : -1;
    }
    s_call_failed (srv, rc, limit, err, res, msg, sizeof msg);
    s_result (res, set->cfg, false, msg, start);
    return -1;
}

/*  actors/exec.c — the local executor (docs/architecture.md): drives the agent loop
    of each run it is given.

    The actor thread owns the table of runs and the runtime cache; each run
    gets a thread of its own that talks to the bus with its own socket, and
    a heartbeat thread that keeps the lease alive even while a tool blocks.
    Cancel reaches a run through an eventfd: the actor writes it on
    exec.cancel (pushed by the run actor at once), the heartbeat thread
    writes it when a heartbeat reply says cancel_requested, and the tool
    runner and the model stream both poll it.

    Every append to the tape carries the run's fence, so an executor whose
    lease lapsed cannot write: the session actor refuses it. */
#include "actors/actor.h"
#include "actors/exec/context.h"
#include "actors/exec/runtime.h"
#include "actors/exec/spawn.h"
#include "actors/exec/tools.h"
#include "bus/client.h"
#include "common/log.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define ACTOR "exec"
#define CALL_MS 10000
#define HEARTBEAT_MS 2000
#define COALESCE_MS 20
#define COALESCE_BYTES 512
#define TOOL_OUTPUT_BYTES 4096
#define TOOL_OUTPUT_MS 100
#define STREAM_IDLE_MS (15 * 60 * 1000)
#define ORPHAN_SWEEP_MS 1000

typedef struct exec_run exec_run_t;

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_enc_t *enc;
    char instance [129];
    const char *endpoint;
    const sb_server_config_t *config;
    zhashx_t *runs;             /* run_id -> exec_run_t */
    sb_runtime_cache_t *cache;
    pthread_mutex_t done_lock;
    zlistx_t *done;             /* finished exec_run_t, for the actor to reap */
    int done_fd;                /* eventfd: a run finished */
    int64_t next_sweep;         /* mono ms of the next orphan sweep */
    bool terminated;
} self_t;

/*  What a coalescing buffer holds: text or thinking deltas, or one tool's
    output. */
typedef struct {
    char kind [16];
    char call_id [129];
    char *buf;
    size_t len, cap;
    int64_t first_ms;
} coalesce_t;

struct exec_run {
    self_t *self;
    pthread_t thread;
    pthread_t hb_thread;
    bool hb_started;
    char run_id [33];
    char session_id [33];
    char resume_from [33];
    char policy [16];
    char endpoint [4200];
    char instance [160];
    uint64_t fence;
    uint64_t max_steps, timeout_s, max_output_tokens;
    int cancel_fd;              /* readable = stop */
    int hb_stop_fd;             /* readable = heartbeat thread ends */
    atomic_bool shutdown;       /* the server is stopping: exit without reporting */
    atomic_bool lost;           /* fenced or no longer ours: exit without reporting */
    atomic_int phase;           /* 0 idle, 1 model, 2 tool */
    atomic_uint_fast64_t steps, input_tokens, output_tokens;
    sb_runtime_t *runtime;      /* checked out of the cache; returned when done */
    sb_bus_t *bus;              /* the run thread's own socket */
    int64_t deadline;           /* mono ms, from timeout_s */
    coalesce_t text, thinking, tool_out;
    char status [16];
    char reason [1024];
};

static const char *s_phases [] = { "idle", "model", "tool" };

/* ------------------------------------------------------------------ */
/*  Small helpers */

static bool
s_cancelled (exec_run_t *run)
{
    uint64_t v;
    struct pollfd p = { run->cancel_fd, POLLIN, 0 };
    (void) v;
    return poll (&p, 1, 0) > 0;
}

static void
s_finish_with (exec_run_t *run, const char *status, const char *fmt, ...)
{
    if (run->status [0])
        return;                 /* the first reason wins */
    snprintf (run->status, sizeof run->status, "%s", status);
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (run->reason, sizeof run->reason, fmt, ap);
    va_end (ap);
}

/*  Appends entries (an encoded array in `entries`) to the tape with the
    run's fence. Returns 0, or -1 (and marks the run lost when fenced). */
static int
s_append (exec_run_t *run, sb_enc_t *entries)
{
    size_t elen;
    const uint8_t *edata = sb_enc_data (entries, &elen);
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kuint (e, "fence", run->fence);
    sb_enc_key (e, "entries");
    sb_enc_raw (e, edata, elen);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "session.append", run->session_id, b, len, CALL_MS);
    sb_enc_destroy (&e);
    int rc = 0;
    if (!reply || sb_msg_is_error (reply)) {
        const char *code = reply ? sb_msg_error_code (reply) : "timeout";
        if (strcmp (code, "fenced") == 0 || strcmp (code, "conflict") == 0 || strcmp (code, "not_found") == 0) {
            atomic_store (&run->lost, true);
            sb_warn (ACTOR, "run lost its right to write run=%s code=%s", run->run_id, code);
        }
        else
            s_finish_with (run, "failed", "cannot append to the tape: %s %s", code,
                           reply ? sb_msg_error_message (reply) : "");
        rc = -1;
    }
    sb_msg_destroy (&reply);
    return rc;
}

/*  One entry: {kind, body: {...}} built by the caller between
    s_entry_open and s_entry_close. */
static void
s_entry_open (sb_enc_t *e, const char *kind)
{
    sb_enc_map_open (e);
    sb_enc_kstr (e, "kind", kind);
    sb_enc_key (e, "body");
    sb_enc_map_open (e);
}

static void
s_entry_close (sb_enc_t *e)
{
    sb_enc_map_close (e);
    sb_enc_map_close (e);
}

static int
s_append_one (exec_run_t *run, const char *kind, const char *key, const char *text)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    s_entry_open (e, kind);
    if (key)
        sb_enc_kstr (e, key, text);
    s_entry_close (e);
    sb_enc_array_close (e);
    int rc = s_append (run, e);
    sb_enc_destroy (&e);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Coalescing: the tape grows with the text, not with the token count */

static void
s_co_add (coalesce_t *c, const char *data, size_t n)
{
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        while (cap < c->len + n + 1)
            cap *= 2;
        char *nb = realloc (c->buf, cap);
        if (!nb)
            return;
        c->buf = nb;
        c->cap = cap;
    }
    if (c->len == 0)
        c->first_ms = sb_mono_ms ();
    memcpy (c->buf + c->len, data, n);
    c->len += n;
    c->buf [c->len] = 0;
}

static void
s_co_encode (coalesce_t *c, sb_enc_t *e)
{
    if (!c->len)
        return;
    s_entry_open (e, c->kind);
    if (c->call_id [0])
        sb_enc_kstr (e, "call_id", c->call_id);
    sb_enc_key (e, "text");
    sb_enc_strn (e, c->buf, c->len);
    s_entry_close (e);
    c->len = 0;
}

/*  Flushes the delta buffers that are due (or all with force). */
static int
s_flush_deltas (exec_run_t *run, bool force)
{
    int64_t now = sb_mono_ms ();
    bool text_due = run->text.len && (force || run->text.len >= COALESCE_BYTES || now - run->text.first_ms >= COALESCE_MS);
    bool think_due = run->thinking.len && (force || run->thinking.len >= COALESCE_BYTES || now - run->thinking.first_ms >= COALESCE_MS);
    if (!text_due && !think_due)
        return 0;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    /* thinking precedes the text it led to */
    if (think_due || (text_due && run->thinking.len))
        s_co_encode (&run->thinking, e);
    if (text_due)
        s_co_encode (&run->text, e);
    sb_enc_array_close (e);
    int rc = s_append (run, e);
    sb_enc_destroy (&e);
    return rc;
}

static int64_t
s_flush_wait (exec_run_t *run)
{
    int64_t now = sb_mono_ms (), wait = 500;
    if (run->text.len && run->text.first_ms + COALESCE_MS - now < wait)
        wait = run->text.first_ms + COALESCE_MS - now;
    if (run->thinking.len && run->thinking.first_ms + COALESCE_MS - now < wait)
        wait = run->thinking.first_ms + COALESCE_MS - now;
    return wait < 0 ? 0 : wait;
}

/* ------------------------------------------------------------------ */
/*  Heartbeats */

/*  One heartbeat on `bus`, answered before it returns. A reply that says
    the run is no longer ours, or that a cancel is pending, trips the
    cancel eventfd. */
static void
s_heartbeat (exec_run_t *run, sb_bus_t *bus, sb_enc_t *e)
{
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kuint (e, "fence", run->fence);
    sb_enc_kstr (e, "phase", s_phases [atomic_load (&run->phase)]);
    sb_enc_kuint (e, "steps", atomic_load (&run->steps));
    sb_enc_kuint (e, "input_tokens", atomic_load (&run->input_tokens));
    sb_enc_kuint (e, "output_tokens", atomic_load (&run->output_tokens));
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (bus, "run.heartbeat", run->session_id, b, len, HEARTBEAT_MS);
    if (reply && sb_msg_is_error (reply)) {
        const char *code = sb_msg_error_code (reply);
        if (strcmp (code, "fenced") == 0 || strcmp (code, "not_found") == 0 || strcmp (code, "conflict") == 0) {
            /* the run is no longer ours: stop without writing */
            atomic_store (&run->lost, true);
            eventfd_write (run->cancel_fd, 1);
        }
    }
    else
    if (reply && sb_get_bool (reply->body, "cancel_requested", false))
        eventfd_write (run->cancel_fd, 1);
    sb_msg_destroy (&reply);
}

static void *
s_heartbeat_thread (void *arg)
{
    exec_run_t *run = arg;
    char name [200];
    snprintf (name, sizeof name, "%s-hb", run->instance);
    sb_bus_t *bus = sb_bus_new (run->endpoint, name);
    sb_enc_t *e = sb_enc_new ();
    while (bus && e) {
        struct pollfd p = { run->hb_stop_fd, POLLIN, 0 };
        if (poll (&p, 1, HEARTBEAT_MS) > 0)
            break;
        s_heartbeat (run, bus, e);
    }
    sb_enc_destroy (&e);
    sb_bus_destroy (&bus);
    return NULL;
}

/* ------------------------------------------------------------------ */
/*  The runtime: workspace, config and the model context from the tape */

/*  Reads the tape after what the context has seen. */
static int
s_catch_up (exec_run_t *run)
{
    sb_context_t *ctx = run->runtime->context;
    while (true) {
        sb_enc_t *e = sb_enc_new ();
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", run->session_id);
        sb_enc_kuint (e, "after_seq", sb_context_last_seq (ctx));
        sb_enc_kuint (e, "limit", 5000);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *reply = sb_bus_call (run->bus, "session.events", run->session_id, b, len, CALL_MS);
        sb_enc_destroy (&e);
        if (!reply || sb_msg_is_error (reply)) {
            s_finish_with (run, "failed", "cannot read the tape: %s", reply ? sb_msg_error_message (reply) : "no reply");
            sb_msg_destroy (&reply);
            return -1;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        for (uint32_t k = 0; events && k < events->len; k++)
            if (sb_context_add (ctx, sb_array_at (events, k)) != 0) {
                s_finish_with (run, "failed", "the conversation is too large for the model context");
                sb_msg_destroy (&reply);
                return -1;
            }
        bool more = sb_get_bool (reply->body, "more", false);
        sb_msg_destroy (&reply);
        if (!more)
            return 0;
    }
}

static int
s_prepare (exec_run_t *run)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "session.get", run->session_id, b, len, CALL_MS);
    sb_enc_destroy (&e);
    if (!reply || sb_msg_is_error (reply)) {
        s_finish_with (run, "failed", "cannot read the session: %s", reply ? sb_msg_error_message (reply) : "no reply");
        sb_msg_destroy (&reply);
        return -1;
    }
    const sb_val_t *rec = sb_get_map (reply->body, "session");
    const char *ws = sb_get_str (rec, "workspace");
    uint64_t version = sb_get_uint (rec, "config_version", 0);
    if (run->runtime && !sb_runtime_matches (run->runtime, ws, version))
        sb_runtime_destroy (&run->runtime);     /* the workspace or config changed */
    if (!run->runtime) {
        run->runtime = sb_runtime_new (run->session_id);
        if (!run->runtime) {
            sb_msg_destroy (&reply);
            s_finish_with (run, "failed", "out of memory");
            return -1;
        }
    }
    sb_runtime_t *rt = run->runtime;
    if (!rt->workspace && sb_runtime_set_workspace (rt, ws) != 0) {
        s_finish_with (run, "failed", "the workspace %s is not usable", ws ? ws : "(none)");
        sb_msg_destroy (&reply);
        return -1;
    }
    sb_runtime_set_config (rt, version, sb_get_str (rec, "provider"), sb_get_str (rec, "model"),
                           sb_get_str (rec, "approval_policy"), (uint32_t) sb_get_uint (rec, "max_steps", 0));
    sb_msg_destroy (&reply);
    return s_catch_up (run);
}

/* ------------------------------------------------------------------ */
/*  One model call */

typedef struct {
    char call_id [257];
    char name [129];
    char *arguments;
} call_t;

typedef struct {
    call_t calls [64];
    int ncalls;
    char *text;                 /* full text of this step */
    size_t text_len, text_cap;
    char *states [16];          /* reasoning_state data, in order */
    int nstates;
    uint64_t in_tokens, out_tokens, cached_tokens, reasoning_tokens;
    bool usage;
    char stop [32];
} step_t;

static void
s_step_clear (step_t *s)
{
    for (int k = 0; k < s->ncalls; k++)
        free (s->calls [k].arguments);
    for (int k = 0; k < s->nstates; k++)
        free (s->states [k]);
    free (s->text);
    memset (s, 0, sizeof *s);
}

static void
s_encode_tools (sb_enc_t *e)
{
    size_t n;
    const sb_tool_def_t *defs = sb_tools_list (&n);
    sb_enc_key (e, "tools");
    sb_enc_array_open (e);
    for (size_t k = 0; k < n; k++) {
        sb_enc_map_open (e);
        sb_enc_kstr (e, "name", defs [k].name);
        sb_enc_kstr (e, "description", defs [k].description);
        sb_enc_kstr (e, "parameters", defs [k].parameters);
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
}

static void
s_on_chunk (exec_run_t *run, step_t *step, const sb_val_t *c)
{
    const char *kind = sb_get_str (c, "kind");
    if (!kind)
        return;
    if (strcmp (kind, "text") == 0 || strcmp (kind, "thinking") == 0) {
        const char *t = sb_get_str (c, "text");
        size_t n = t ? strlen (t) : 0;
        if (!n)
            return;
        bool text = kind [1] == 'e';
        /* keep the order of the two kinds on the tape */
        if (text && run->thinking.len)
            s_flush_deltas (run, true);
        if (!text && run->text.len)
            s_flush_deltas (run, true);
        s_co_add (text ? &run->text : &run->thinking, t, n);
        if (text) {
            if (step->text_len + n + 1 > step->text_cap) {
                size_t cap = step->text_cap ? step->text_cap * 2 : 1024;
                while (cap < step->text_len + n + 1)
                    cap *= 2;
                char *nb = realloc (step->text, cap);
                if (!nb)
                    return;
                step->text = nb;
                step->text_cap = cap;
            }
            memcpy (step->text + step->text_len, t, n);
            step->text_len += n;
            step->text [step->text_len] = 0;
        }
    }
    else
    if (strcmp (kind, "tool_call") == 0 && step->ncalls < 64) {
        call_t *call = &step->calls [step->ncalls++];
        snprintf (call->call_id, sizeof call->call_id, "%s", sb_get_str (c, "call_id"));
        snprintf (call->name, sizeof call->name, "%s", sb_get_str (c, "name"));
        const char *a = sb_get_str (c, "arguments");
        call->arguments = strdup (a ? a : "{}");
    }
    else
    if (strcmp (kind, "error") == 0 && step->ncalls < 64) {
        /* an unusable call still gets a result, so the model sees why */
        call_t *call = &step->calls [step->ncalls++];
        snprintf (call->call_id, sizeof call->call_id, "%s", sb_get_str (c, "call_id"));
        snprintf (call->name, sizeof call->name, "%s", sb_get_str (c, "name") ? sb_get_str (c, "name") : "?");
        call->arguments = NULL;
    }
    else
    if (strcmp (kind, "usage") == 0) {
        step->usage = true;
        step->in_tokens += sb_get_uint (c, "input_tokens", 0);
        step->out_tokens += sb_get_uint (c, "output_tokens", 0);
        step->cached_tokens += sb_get_uint (c, "cached_tokens", 0);
        step->reasoning_tokens += sb_get_uint (c, "reasoning_tokens", 0);
    }
    else
    if (strcmp (kind, "reasoning_state") == 0 && step->nstates < 16) {
        const char *d = sb_get_str (c, "data");
        if (d)
            step->states [step->nstates++] = strdup (d);
    }
}

/*  Streams one model call into `step`. Returns 0 when the stream ended
    (step->stop set), -1 on failure (run status set). */
static int
s_model_call (exec_run_t *run, step_t *step)
{
    sb_runtime_t *rt = run->runtime;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    if (rt->provider) sb_enc_kstr (e, "provider", rt->provider);
    if (rt->model) sb_enc_kstr (e, "model", rt->model);
    char instructions [8192];
    snprintf (instructions, sizeof instructions,
              "You are a coding agent working in the folder %s. Use the tools to look at and change "
              "files there; every path is relative to that folder. Work step by step, and end with a "
              "short answer that says what you did.", rt->workspace);
    sb_enc_kstr (e, "instructions", instructions);
    sb_enc_key (e, "messages");
    sb_context_encode (rt->context, e);
    s_encode_tools (e);
    if (run->max_output_tokens) {
        uint64_t used = atomic_load (&run->output_tokens);
        sb_enc_key (e, "options");
        sb_enc_map_open (e);
        sb_enc_kuint (e, "max_output_tokens", run->max_output_tokens > used ? run->max_output_tokens - used : 1);
        sb_enc_map_close (e);
    }
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    char id [SB_ULID_LEN + 1];
    int rc = sb_bus_send (run->bus, "llm.stream", run->session_id, NULL, b, len, 0, id);
    sb_enc_destroy (&e);
    if (rc) {
        s_finish_with (run, "failed", "cannot send the model request");
        return -1;
    }
    atomic_store (&run->phase, 1);
    uint64_t expect = 1;
    char llm_instance [129] = "";
    char stream_id [33] = "";
    bool cancel_sent = false;
    int64_t last_rx = sb_mono_ms ();
    int64_t cancel_at = 0;
    while (true) {
        zmq_pollitem_t items [] = {
            { sb_bus_socket (run->bus), 0, ZMQ_POLLIN, 0 },
            { NULL, run->cancel_fd, ZMQ_POLLIN, 0 },
        };
        long wait = (long) s_flush_wait (run);
        if (sb_bus_has_queued (run->bus))
            wait = 0;
        zmq_poll (items, cancel_sent ? 1 : 2, wait);
        if (!cancel_sent && (items [1].revents & ZMQ_POLLIN || sb_mono_ms () > run->deadline)) {
            /* cancel the stream at the instance that holds it */
            if (stream_id [0]) {
                sb_enc_t *c = sb_enc_new ();
                sb_enc_map_open (c);
                sb_enc_kstr (c, "stream_id", stream_id);
                sb_enc_map_close (c);
                size_t cl;
                const uint8_t *cb = sb_enc_data (c, &cl);
                sb_bus_send (run->bus, "llm.cancel", run->session_id, llm_instance, cb, cl, 0, NULL);
                sb_enc_destroy (&c);
            }
            cancel_sent = true;
            cancel_at = sb_mono_ms ();
        }
        if (cancel_sent && (!stream_id [0] || sb_mono_ms () - cancel_at > 1000)) {
            snprintf (step->stop, sizeof step->stop, "cancelled");
            break;
        }
        sb_msg_t *msg;
        bool ended = false;
        while (!ended && (msg = sb_bus_recv (run->bus, 0))) {
            if (strcmp (msg->h.corr, id) != 0) {
                sb_msg_destroy (&msg);
                continue;
            }
            last_rx = sb_mono_ms ();
            if (sb_type_has_suffix (msg->h.type, ".chunk")) {
                if (msg->h.seq != expect) {
                    /* a gap means a lost chunk: a partial stream is not used */
                    s_finish_with (run, "failed", "the model stream lost a chunk (expected %llu, got %llu)",
                                   (unsigned long long) expect, (unsigned long long) msg->h.seq);
                    sb_msg_destroy (&msg);
                    return -1;
                }
                expect++;
                const char *kind = sb_get_str (msg->body, "kind");
                if (kind && strcmp (kind, "open") == 0) {
                    snprintf (stream_id, sizeof stream_id, "%s", sb_get_str (msg->body, "stream_id"));
                    snprintf (llm_instance, sizeof llm_instance, "%s", msg->h.from);
                }
                else
                    s_on_chunk (run, step, msg->body);
            }
            else
            if (sb_msg_is_error (msg)) {
                s_flush_deltas (run, true);
                s_finish_with (run, "failed", "model call failed: %s: %s", sb_msg_error_code (msg),
                               sb_msg_error_message (msg));
                sb_msg_destroy (&msg);
                return -1;
            }
            else {
                snprintf (step->stop, sizeof step->stop, "%s", sb_get_str (msg->body, "stop_reason"));
                ended = true;
            }
            sb_msg_destroy (&msg);
        }
        if (s_flush_deltas (run, ended) != 0)
            return -1;
        if (ended)
            break;
        if (sb_mono_ms () - last_rx > STREAM_IDLE_MS) {
            s_finish_with (run, "failed", "the model stream went silent");
            return -1;
        }
    }
    s_flush_deltas (run, true);
    if (cancel_sent && strcmp (step->stop, "cancelled") != 0)
        snprintf (step->stop, sizeof step->stop, "cancelled");
    return 0;
}

/*  Records what the model produced in this step: text.done, reasoning
    state, usage and the tool calls, in one batch. */
static int
s_record_step (exec_run_t *run, step_t *step)
{
    /* a stream cancelled before it produced anything leaves nothing to
       record, and the session refuses an empty batch */
    if (!step->text_len && !step->nstates && !step->usage && !step->ncalls)
        return 0;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    if (step->text_len) {
        s_entry_open (e, "text.done");
        sb_enc_kstr (e, "text", step->text);
        s_entry_close (e);
    }
    for (int k = 0; k < step->nstates; k++) {
        s_entry_open (e, "reasoning.state");
        sb_enc_kstr (e, "provider", run->runtime->provider ? run->runtime->provider : "default");
        sb_enc_kstr (e, "data", step->states [k]);
        s_entry_close (e);
    }
    if (step->usage) {
        s_entry_open (e, "usage");
        sb_enc_kuint (e, "input_tokens", step->in_tokens);
        sb_enc_kuint (e, "output_tokens", step->out_tokens);
        sb_enc_kuint (e, "cached_tokens", step->cached_tokens);
        sb_enc_kuint (e, "reasoning_tokens", step->reasoning_tokens);
        s_entry_close (e);
    }
    for (int k = 0; k < step->ncalls; k++) {
        s_entry_open (e, "tool.call");
        sb_enc_kstr (e, "call_id", step->calls [k].call_id);
        sb_enc_kstr (e, "name", step->calls [k].name);
        sb_enc_kstr (e, "arguments", step->calls [k].arguments ? step->calls [k].arguments : "{}");
        s_entry_close (e);
    }
    sb_enc_array_close (e);
    int rc = s_append (run, e);
    sb_enc_destroy (&e);
    atomic_fetch_add (&run->input_tokens, step->in_tokens);
    atomic_fetch_add (&run->output_tokens, step->out_tokens);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Tools */

static void
s_tool_output (const char *data, size_t len, void *arg)
{
    exec_run_t *run = arg;
    s_co_add (&run->tool_out, data, len);
    if (run->tool_out.len >= TOOL_OUTPUT_BYTES || sb_mono_ms () - run->tool_out.first_ms >= TOOL_OUTPUT_MS) {
        sb_enc_t *e = sb_enc_new ();
        sb_enc_array_open (e);
        /* the tape takes text: make the bytes valid UTF-8 first */
        size_t clean_len;
        char *clean = sb_tools_utf8_clean (run->tool_out.buf, run->tool_out.len, &clean_len);
        s_entry_open (e, "tool.output");
        sb_enc_kstr (e, "call_id", run->tool_out.call_id);
        sb_enc_key (e, "text");
        sb_enc_strn (e, clean ? clean : "", clean ? clean_len : 0);
        s_entry_close (e);
        free (clean);
        sb_enc_array_close (e);
        run->tool_out.len = 0;
        s_append (run, e);
        sb_enc_destroy (&e);
    }
}

static int
s_run_tool (exec_run_t *run, const call_t *call)
{
    const sb_tool_def_t *def = sb_tools_find (call->name);
    sb_tool_result_t res;
    memset (&res, 0, sizeof res);
    res.exit_code = -1;
    char note [512];
    const char *refusal = NULL;
    if (!call->arguments)
        refusal = "not run: the model sent arguments that are not valid JSON";
    else
    if (def && !def->read_only && strcmp (run->policy, "yolo") != 0) {
        snprintf (note, sizeof note,
                  "not run: the approval policy '%s' allows only read-only tools until approvals are "
                  "available; the person can switch the session to yolo to allow %s", run->policy, call->name);
        refusal = note;
    }
    if (refusal) {
        res.ok = false;
        res.output = strdup (refusal);
    }
    else {
        atomic_store (&run->phase, 2);
        int64_t left_s = (run->deadline - sb_mono_ms ()) / 1000;
        sb_tool_ctx_t ctx = {
            .workspace = run->runtime->workspace,
            .cancel_fd = run->cancel_fd,
            .on_output = s_tool_output,
            .output_arg = run,
            .shell_timeout_s = left_s < SB_TOOLS_SHELL_TIMEOUT_S ? (int) (left_s > 0 ? left_s : 1) : 0,
            .sandbox = run->self->config ? run->self->config->sandbox : NULL,
        };
        snprintf (run->tool_out.kind, sizeof run->tool_out.kind, "tool.output");
        snprintf (run->tool_out.call_id, sizeof run->tool_out.call_id, "%s", call->call_id);
        run->tool_out.len = 0;
        sb_tool_run (&ctx, call->name, call->arguments, &res);
        if (run->tool_out.len) {
            run->tool_out.first_ms = 0;     /* force the last piece out */
            s_tool_output ("", 0, run);
        }
        atomic_store (&run->phase, 0);
    }
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    s_entry_open (e, "tool.result");
    sb_enc_kstr (e, "call_id", call->call_id);
    sb_enc_kbool (e, "ok", res.ok);
    sb_enc_kstr (e, "output", res.output ? res.output : "");
    if (res.exit_code >= 0 || res.exit_code < -1)
        sb_enc_kint (e, "exit_code", res.exit_code);
    sb_enc_kuint (e, "duration_ms", (uint64_t) (res.duration_ms > 0 ? res.duration_ms : 0));
    s_entry_close (e);
    sb_enc_array_close (e);
    int rc = s_append (run, e);
    sb_enc_destroy (&e);
    bool cancelled = res.cancelled;
    sb_tool_result_clear (&res);
    if (cancelled)
        s_finish_with (run, "cancelled", "cancelled during %s", call->name);
    return rc;
}

/*  A resumed run first answers the calls its predecessor left without a
    result: they are recorded as interrupted and never re-run. */
static int
s_close_unanswered (exec_run_t *run)
{
    const char *ids [64], *names [64];
    size_t n = sb_context_unanswered (run->runtime->context, ids, names, 64);
    if (!n)
        return 0;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    for (size_t k = 0; k < n; k++) {
        s_entry_open (e, "tool.result");
        sb_enc_kstr (e, "call_id", ids [k]);
        sb_enc_kbool (e, "ok", false);
        sb_enc_kstr (e, "output", "interrupted: the server stopped while this tool ran; it was not run again");
        s_entry_close (e);
    }
    sb_enc_array_close (e);
    int rc = s_append (run, e);
    sb_enc_destroy (&e);
    return rc ? rc : s_catch_up (run);
}

/* ------------------------------------------------------------------ */
/*  The agent loop */

static void
s_agent_loop (exec_run_t *run)
{
    if (s_prepare (run) || s_append_one (run, "turn.begin", NULL, NULL) || s_catch_up (run))
        return;
    if (run->resume_from [0] && s_close_unanswered (run))
        return;
    while (!run->status [0] && !atomic_load (&run->lost)) {
        if (s_cancelled (run)) {
            s_finish_with (run, "cancelled", "cancelled");
            break;
        }
        if (atomic_load (&run->steps) >= run->max_steps) {
            s_finish_with (run, "failed", "max_steps (%llu) reached", (unsigned long long) run->max_steps);
            break;
        }
        if (sb_mono_ms () > run->deadline) {
            s_finish_with (run, "failed", "timeout_s (%llu) exceeded", (unsigned long long) run->timeout_s);
            break;
        }
        if (s_catch_up (run))
            break;
        step_t step;
        memset (&step, 0, sizeof step);
        int rc = s_model_call (run, &step);
        atomic_fetch_add (&run->steps, 1);
        if (rc == 0 && strcmp (step.stop, "cancelled") != 0)
            rc = s_record_step (run, &step);
        else
        if (rc == 0)
            s_record_step (run, &step);
        if (rc != 0) {
            s_step_clear (&step);
            break;
        }
        if (strcmp (step.stop, "cancelled") == 0 || s_cancelled (run)) {
            s_finish_with (run, "cancelled", "cancelled");
            s_step_clear (&step);
            break;
        }
        if (run->max_output_tokens && atomic_load (&run->output_tokens) > run->max_output_tokens) {
            s_finish_with (run, "failed", "max_output_tokens (%llu) exceeded", (unsigned long long) run->max_output_tokens);
            s_step_clear (&step);
            break;
        }
        if (step.ncalls == 0) {
            if (strcmp (step.stop, "length") == 0)
                s_finish_with (run, "failed", "the model hit its output limit (stop_reason length)");
            else
                s_finish_with (run, "completed", "%s", step.stop [0] ? step.stop : "end");
            s_step_clear (&step);
            break;
        }
        for (int k = 0; k < step.ncalls && !run->status [0] && !atomic_load (&run->lost); k++) {
            if (s_cancelled (run)) {
                s_finish_with (run, "cancelled", "cancelled");
                break;
            }
            s_run_tool (run, &step.calls [k]);
        }
        s_step_clear (&step);
    }
    atomic_store (&run->phase, 0);
    if (!atomic_load (&run->lost) && !atomic_load (&run->shutdown)) {
        s_flush_deltas (run, true);
        s_append_one (run, "turn.end", NULL, NULL);
    }
}

static void
s_report (exec_run_t *run)
{
    if (atomic_load (&run->lost) || atomic_load (&run->shutdown))
        return;                 /* not ours to report: recovery or the new owner decides */
    if (!run->status [0])
        s_finish_with (run, "failed", "the run stopped unexpectedly");
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kuint (e, "fence", run->fence);
    sb_enc_kstr (e, "status", run->status);
    sb_enc_kstr (e, "reason", run->reason);
    sb_enc_kuint (e, "steps", atomic_load (&run->steps));
    sb_enc_key (e, "usage");
    sb_enc_map_open (e);
    sb_enc_kuint (e, "input_tokens", atomic_load (&run->input_tokens));
    sb_enc_kuint (e, "output_tokens", atomic_load (&run->output_tokens));
    sb_enc_map_close (e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    for (int attempt = 0; attempt < 3; attempt++) {
        sb_msg_t *reply = sb_bus_call (run->bus, "run.finish", run->session_id, b, len, CALL_MS);
        bool retry = !reply || (sb_msg_is_error (reply) && sb_err_retryable (sb_err_from_name (sb_msg_error_code (reply))));
        if (reply && sb_msg_is_error (reply))
            sb_warn (ACTOR, "run.finish refused run=%s code=%s", run->run_id, sb_msg_error_code (reply));
        sb_msg_destroy (&reply);
        if (!retry)
            break;
    }
    sb_enc_destroy (&e);
}

static void *
s_run_thread (void *arg)
{
    exec_run_t *run = arg;
    run->bus = sb_bus_new (run->endpoint, run->instance);
    sb_enc_t *e = sb_enc_new ();
    if (run->bus && e) {
        /* The first heartbeat is answered only after the run actor has
           committed `claimed` (and this heartbeat's `running`) and put them
           on the tape, so the run's own entries, from turn.begin on, come
           after its status changes. */
        s_heartbeat (run, run->bus, e);
        if (pthread_create (&run->hb_thread, NULL, s_heartbeat_thread, run) == 0)
            run->hb_started = true;
        s_agent_loop (run);
        s_report (run);
    }
    sb_enc_destroy (&e);
    eventfd_write (run->hb_stop_fd, 1);
    if (run->hb_started)
        pthread_join (run->hb_thread, NULL);
    sb_bus_destroy (&run->bus);
    sb_info (ACTOR, "run ended run=%s status=%s reason=\"%s\" steps=%llu", run->run_id,
             run->status [0] ? run->status : "-", run->reason, (unsigned long long) atomic_load (&run->steps));
    /* hand the run back to the actor thread, which reaps it */
    self_t *self = run->self;
    pthread_mutex_lock (&self->done_lock);
    zlistx_add_end (self->done, run);
    pthread_mutex_unlock (&self->done_lock);
    eventfd_write (self->done_fd, 1);
    return NULL;
}

/* ------------------------------------------------------------------ */
/*  The actor thread */

static void
s_run_free (exec_run_t **run_p)
{
    exec_run_t *run = *run_p;
    if (!run)
        return;
    close (run->cancel_fd);
    close (run->hb_stop_fd);
    sb_runtime_destroy (&run->runtime);
    free (run->text.buf);
    free (run->thinking.buf);
    free (run->tool_out.buf);
    free (run);
    *run_p = NULL;
}

static void
s_reap (self_t *self)
{
    eventfd_t v;
    eventfd_read (self->done_fd, &v);
    while (true) {
        pthread_mutex_lock (&self->done_lock);
        exec_run_t *run = zlistx_detach (self->done, NULL);
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

static void
s_handle_start (self_t *self, sb_msg_t *msg)
{
    const char *run_id = sb_get_str (msg->body, "run_id");
    sb_enc_t *e = self->enc;
    if (!zhashx_lookup (self->runs, run_id)) {
        exec_run_t *run = calloc (1, sizeof *run);
        if (!run) {
            sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
            return;
        }
        run->self = self;
        snprintf (run->run_id, sizeof run->run_id, "%s", run_id);
        snprintf (run->session_id, sizeof run->session_id, "%s", sb_get_str (msg->body, "session_id"));
        const char *rf = sb_get_str (msg->body, "resume_from");
        snprintf (run->resume_from, sizeof run->resume_from, "%s", rf ? rf : "");
        const char *pol = sb_get_str (msg->body, "approval_policy");
        snprintf (run->policy, sizeof run->policy, "%s", pol ? pol : "auto");
        snprintf (run->endpoint, sizeof run->endpoint, "%s", self->endpoint);
        snprintf (run->instance, sizeof run->instance, "%s-%.8s", self->instance, run_id + 18);
        run->fence = sb_get_uint (msg->body, "fence", 0);
        const sb_val_t *lim = sb_get_map (msg->body, "limits");
        run->max_steps = sb_get_uint (lim, "max_steps", 50);
        run->timeout_s = sb_get_uint (lim, "timeout_s", 3600);
        run->max_output_tokens = sb_get_uint (lim, "max_output_tokens", 0);
        run->deadline = sb_mono_ms () + (int64_t) run->timeout_s * 1000;
        snprintf (run->text.kind, sizeof run->text.kind, "text.delta");
        snprintf (run->thinking.kind, sizeof run->thinking.kind, "thinking.delta");
        run->cancel_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
        run->hb_stop_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
        run->runtime = sb_runtime_cache_take (self->cache, run->session_id);
        if (run->cancel_fd < 0 || run->hb_stop_fd < 0
        ||  pthread_create (&run->thread, NULL, s_run_thread, run) != 0) {
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
    exec_run_t *run = zhashx_lookup (self->runs, sb_get_str (msg->body, "run_id"));
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

static void
s_self_destroy (self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    if (self->runs) {
        /* stop every run without reporting: like a crash, recovery decides */
        for (exec_run_t *run = zhashx_first (self->runs); run; run = zhashx_next (self->runs)) {
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
    sb_runtime_cache_destroy (&self->cache);
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
    self->config = args->config;
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    self->runs = zhashx_new ();
    self->done = zlistx_new ();
    /* SWITCHBOARD_RUNTIME_CACHE: sessions whose prepared runtime is kept (256) */
    const char *cap = getenv ("SWITCHBOARD_RUNTIME_CACHE");
    self->cache = sb_runtime_cache_new (cap && atol (cap) > 0 ? (size_t) atol (cap) : 0);
    self->done_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!self->bus || !self->enc || !self->runs || !self->done || !self->cache || self->done_fd < 0) {
        s_self_destroy (&self);
        return NULL;
    }
    return self;
}

void
sb_exec_actor (zsock_t *pipe, void *args)
{
    const sb_actor_args_t *a = args;
    if (a->config && a->config->sandbox && strcmp (a->config->sandbox, "bwrap") == 0
    &&  access ("/usr/bin/bwrap", X_OK) != 0) {
        sb_error (ACTOR, "--sandbox bwrap was asked for but /usr/bin/bwrap is missing (apt-get install bubblewrap)");
        sb_actor_signal (pipe, 1);
        return;
    }
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
        };
        long wait = sb_bus_has_queued (self->bus) ? 0 : (long) sb_bus_tick (self->bus);
        int64_t sweep_in = self->next_sweep - sb_mono_ms ();
        if (sweep_in < wait)
            wait = sweep_in > 0 ? (long) sweep_in : 0;
        if (zmq_poll (items, 3, wait) < 0 && errno != EINTR)
            break;
        /* As the subreaper we inherit what tools leave behind; a process
           that exited while its spawn was deciding whose it was ends up a
           zombie of ours that no spawn waits for. Reap those. */
        if (sb_mono_ms () >= self->next_sweep) {
            sb_spawn_reap_orphans ();
            self->next_sweep = sb_mono_ms () + ORPHAN_SWEEP_MS;
        }
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        if (items [2].revents & ZMQ_POLLIN)
            s_reap (self);
        sb_msg_t *msg;
        while ((msg = sb_bus_recv (self->bus, 0))) {
            if (msg->route) {
                if (strcmp (msg->h.type, "exec.start") == 0)
                    s_handle_start (self, msg);
                else
                if (strcmp (msg->h.type, "exec.cancel") == 0)
                    s_handle_cancel (self, msg);
                else
                    sb_bus_error (self->bus, msg, SB_E_unknown_type, "exec does not serve %s", msg->h.type);
            }
            sb_msg_destroy (&msg);
        }
    }
    s_self_destroy (&self);
}

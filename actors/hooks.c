/*  actors/hooks.c — the person's own commands, run when something happens
    in a session (docs/hooks.md).

        {"hooks": {"approval.requested": [{"command": ["notify-send", "switchboard",
                                                       "a tool call waits for you"],
                                           "timeout_s": 10}],
                   "run.finished": [...], "run.failed": [...], "session.created": [...]}}

    from `--hooks FILE` or DATA/hooks.json. The actor subscribes to every
    session's tape on the event plane (session/), and for each entry that
    is one of the events hands a job to a small pool of worker threads: the
    actor's loop never waits for a hook, nor does any other actor, so a
    slow hook delays nothing. Each command starts like a tool's
    (sandbox/spawn.h: no fork, its own process group, an allowlisted
    environment without provider keys), gets the event's JSON on stdin, and
    is killed with everything it started at its timeout. Its failure is
    logged and counted (hooks.stats), never fatal. It runs in the tools'
    sandbox (docs/sandbox.md) with the network on: the host read-only, the
    data folder hidden, writable only its own "writable" folders and a
    private /tmp.

    Jobs wait in a queue bounded in count and bytes; past it a job is
    dropped and counted. The event plane can drop under load (a full
    high-water mark): the actor tracks each session's last seq, and a gap
    is filled from the tape (session.events, asked without waiting: the
    reply continues the work), so an approval does not go unannounced.
*/
#include "actors/actor.h"
#include "sandbox/spawn.h"
#include "bus/client.h"
#include "common/log.h"
#include "schemas/json.h"
#include "schemas/run_status.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ACTOR "hooks"
#define SB_HOOKS_WORKERS        4
#define SB_HOOKS_QUEUE_MAX      256
#define SB_HOOKS_QUEUE_BYTES    (16u << 20)
#define SB_HOOKS_PER_EVENT      16
#define SB_HOOKS_MAX_ARGS       256
#define SB_HOOKS_MAX_ENV        32
#define SB_HOOKS_MAX_WRITABLE   8
#define SB_HOOKS_TIMEOUT_S      30
#define SB_HOOKS_TIMEOUT_MAX_S  3600
#define SB_HOOKS_CONFIG_MAX     (1u << 20)
#define SB_HOOKS_TAIL           256
#define SB_HOOKS_SESSIONS_MAX   65536   //  sessions whose last seq is tracked
#define SB_HOOKS_FILL_MAX       1000    //  entries one gap fill reads
#define SB_HOOKS_FILLS_MAX      64      //  gap fills in flight

//  The events a hook can be bound to.
static const char *s_events [] = { "approval.requested", "run.finished", "run.failed", "session.created" };
#define NEVENTS (sizeof s_events / sizeof s_events [0])

typedef struct {
    char **argv;                //  NULL-terminated
    char **env;                 //  "NAME=VALUE" extras, NULL-terminated
    char **writable;            //  realpaths of folders it may write, NULL-terminated; or NULL
    int timeout_ms;
} s_hook_t;

typedef struct {
    s_hook_t hooks [NEVENTS][SB_HOOKS_PER_EVENT];
    int count [NEVENTS];
    char *source;
} s_config_t;

typedef struct s_job {
    const s_hook_t *hook;
    int event;
    char *payload;
    size_t len;
    char session_id [33], run_id [33];
    struct s_job *next;
} s_job_t;

//  A gap being filled from the tape: entries (after, upto] of a session.
typedef struct {
    char id [SB_ULID_LEN + 1];
    char session_id [33];
    uint64_t after, upto;
} s_fill_t;

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    zhashx_t *last_seq;         //  session id -> (uintptr_t) last seq seen
    s_fill_t fills [SB_HOOKS_FILLS_MAX];
    size_t nfills;
    sb_sub_t *sub;
    sb_enc_t *enc;
    s_config_t *cfg;
    const char *data_dir;
    char instance [129];
    pthread_t workers [SB_HOOKS_WORKERS];
    int nworkers;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    s_job_t *head, *tail;
    size_t queued, queued_bytes;
    atomic_bool stopping;
    atomic_uint_fast64_t fired, ok, failed, timed_out, dropped, running;
    bool terminated;
} self_t;


/* ------------------------------------------------------------------ */
/*  Configuration */

static void
s_strv_free (char **v)
{
    for (size_t k = 0; v && v [k]; k++)
        free (v [k]);
    free (v);
}

static void
s_config_destroy (s_config_t **cfg_p)
{
    s_config_t *cfg = *cfg_p;
    if (!cfg)
        return;
    for (size_t e = 0; e < NEVENTS; e++)
        for (int k = 0; k < cfg->count [e]; k++) {
            s_strv_free (cfg->hooks [e][k].argv);
            s_strv_free (cfg->hooks [e][k].env);
            s_strv_free (cfg->hooks [e][k].writable);
        }
    free (cfg->source);
    free (cfg);
    *cfg_p = NULL;
}

static int
s_event_index (const char *name)
{
    for (size_t e = 0; e < NEVENTS; e++)
        if (strcmp (s_events [e], name) == 0)
            return (int) e;
    return -1;
}

//  "writable": existing folders, by absolute path, that the hook may
//  write in its sandbox (the first is its working folder).
static int
s_hook_writable (s_hook_t *h, json_t *w, const char *ev, int k, char *err, size_t errlen)
{
    if (!json_is_array (w) || json_array_size (w) > SB_HOOKS_MAX_WRITABLE) {
        snprintf (err, errlen, "hooks.%s[%d].writable must be an array of at most %d folders", ev, k,
                  SB_HOOKS_MAX_WRITABLE);
        return -1;
    }
    h->writable = calloc (json_array_size (w) + 1, sizeof *h->writable);
    if (!h->writable)
        return -1;
    size_t i;
    json_t *a;
    json_array_foreach (w, i, a) {
        const char *p = json_string_value (a);
        struct stat st;
        if (!p || p [0] != '/' || !(h->writable [i] = realpath (p, NULL))
        ||  stat (h->writable [i], &st) != 0 || !S_ISDIR (st.st_mode)) {
            snprintf (err, errlen, "hooks.%s[%d].writable[%zu] must be the absolute path of an existing folder",
                      ev, k, i);
            return -1;
        }
    }
    return 0;
}

static int
s_hook_parse (s_hook_t *h, json_t *j, const char *ev, int k, char *err, size_t errlen)
{
    json_t *cmd = json_object_get (j, "command");
    if (!json_is_object (j) || !json_is_array (cmd) || json_array_size (cmd) == 0
    ||  json_array_size (cmd) > SB_HOOKS_MAX_ARGS) {
        snprintf (err, errlen, "hooks.%s[%d] needs \"command\": [PROGRAM, ARGS...] (1 to %d strings)", ev, k,
                  SB_HOOKS_MAX_ARGS);
        return -1;
    }
    h->argv = calloc (json_array_size (cmd) + 1, sizeof *h->argv);
    if (!h->argv)
        return -1;
    size_t i;
    json_t *a;
    json_array_foreach (cmd, i, a) {
        if (!json_is_string (a) || (i == 0 && !*json_string_value (a))) {
            snprintf (err, errlen, "hooks.%s[%d].command[%zu] is not a string", ev, k, i);
            return -1;
        }
        if (!(h->argv [i] = strdup (json_string_value (a))))
            return -1;
    }
    json_t *t = json_object_get (j, "timeout_s");
    if (t && (!json_is_integer (t) || json_integer_value (t) < 1 || json_integer_value (t) > SB_HOOKS_TIMEOUT_MAX_S)) {
        snprintf (err, errlen, "hooks.%s[%d].timeout_s must be an integer from 1 to %d", ev, k, SB_HOOKS_TIMEOUT_MAX_S);
        return -1;
    }
    h->timeout_ms = (int) (t ? json_integer_value (t) : SB_HOOKS_TIMEOUT_S) * 1000;
    json_t *w = json_object_get (j, "writable");
    if (w && s_hook_writable (h, w, ev, k, err, errlen) != 0)
        return -1;
    json_t *env = json_object_get (j, "env");
    if (env) {
        if (!json_is_object (env) || json_object_size (env) > SB_HOOKS_MAX_ENV) {
            snprintf (err, errlen, "hooks.%s[%d].env must be an object of at most %d strings", ev, k, SB_HOOKS_MAX_ENV);
            return -1;
        }
        h->env = calloc (json_object_size (env) + 1, sizeof *h->env);
        if (!h->env)
            return -1;
        size_t n = 0;
        const char *key;
        json_t *v;
        json_object_foreach (env, key, v) {
            if (!json_is_string (v) || !*key || strchr (key, '=')) {
                snprintf (err, errlen, "hooks.%s[%d].env.%s must be a string", ev, k, key);
                return -1;
            }
            size_t len = strlen (key) + strlen (json_string_value (v)) + 2;
            if (!(h->env [n] = malloc (len)))
                return -1;
            snprintf (h->env [n++], len, "%s=%s", key, json_string_value (v));
        }
    }
    return 0;
}

//  NULL with err empty: no file (and none required).
static s_config_t *
s_config_load (const char *path, bool required, char *err, size_t errlen)
{
    err [0] = 0;
    struct stat st;
    if (stat (path, &st) != 0) {
        if (errno == ENOENT && !required)
            return NULL;
        snprintf (err, errlen, "%s: %s", path, strerror (errno));
        return NULL;
    }
    if (!S_ISREG (st.st_mode) || st.st_size > SB_HOOKS_CONFIG_MAX) {
        snprintf (err, errlen, "%s: not a regular file of at most %u bytes", path, SB_HOOKS_CONFIG_MAX);
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_load_file (path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf (err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
        return NULL;
    }
    json_t *hooks = json_object_get (root, "hooks");
    s_config_t *cfg = calloc (1, sizeof *cfg);
    if (!cfg || !(cfg->source = strdup (path))) {
        snprintf (err, errlen, "out of memory");
        goto fail;
    }
    if (!json_is_object (root) || (hooks && !json_is_object (hooks))) {
        snprintf (err, errlen, "%s: expected {\"hooks\": {EVENT: [{\"command\": [...], \"timeout_s\": N}]}}", path);
        goto fail;
    }
    const char *ev;
    json_t *list;
    if (hooks)
        json_object_foreach (hooks, ev, list) {
            int e = s_event_index (ev);
            if (e < 0) {
                snprintf (err, errlen, "%s: unknown event \"%.60s\" (known: approval.requested, run.finished, "
                          "run.failed, session.created)", path, ev);
                goto fail;
            }
            if (!json_is_array (list) || json_array_size (list) > SB_HOOKS_PER_EVENT) {
                snprintf (err, errlen, "%s: hooks.%s must be an array of at most %d hooks", path, ev, SB_HOOKS_PER_EVENT);
                goto fail;
            }
            size_t i;
            json_t *h;
            json_array_foreach (list, i, h) {
                if (s_hook_parse (&cfg->hooks [e][cfg->count [e]++], h, ev, (int) i, err, errlen) != 0) {
                    if (!err [0])
                        snprintf (err, errlen, "out of memory");
                    goto fail;
                }
            }
        }
    json_decref (root);
    return cfg;
fail:
    json_decref (root);
    s_config_destroy (&cfg);
    return NULL;
}


/* ------------------------------------------------------------------ */
/*  Workers: one hook at a time each */

static int64_t
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_tail (char *tail, const char *data, size_t n)
{
    size_t have = strlen (tail);
    if (n >= SB_HOOKS_TAIL) {
        memcpy (tail, data + n - SB_HOOKS_TAIL, SB_HOOKS_TAIL);
        tail [SB_HOOKS_TAIL] = 0;
        return;
    }
    if (have + n > SB_HOOKS_TAIL) {
        memmove (tail, tail + (have + n - SB_HOOKS_TAIL), SB_HOOKS_TAIL - n);
        have = SB_HOOKS_TAIL - n;
    }
    memcpy (tail + have, data, n);
    tail [have + n] = 0;
}

//  The hook's own env values may be secrets (a webhook's token): what it
//  printed is logged without them.
static void
s_redact (char *text, char *const *env)
{
    for (size_t k = 0; env && env [k]; k++) {
        const char *v = strchr (env [k], '=') + 1;
        size_t vl = strlen (v);
        if (vl < 6)
            continue;
        char *hit;
        while ((hit = strstr (text, v))) {
            memcpy (hit, "***", 3);
            memmove (hit + 3, hit + vl, strlen (hit + vl) + 1);
        }
    }
}

static void
s_run_job (self_t *self, s_job_t *job)
{
    const s_hook_t *h = job->hook;
    //  The same allowlist as tools, plus what a desktop notification needs
    //  (none of them is a secret), the event, and the hook's own env.
    const char *env [SB_HOOKS_MAX_ENV + 16];
    char ev [80], sid [64], rid [64];
    size_t n = 0;
    snprintf (ev, sizeof ev, "SWITCHBOARD_EVENT=%s", s_events [job->event]);
    snprintf (sid, sizeof sid, "SWITCHBOARD_SESSION_ID=%s", job->session_id);
    snprintf (rid, sizeof rid, "SWITCHBOARD_RUN_ID=%s", job->run_id);
    env [n++] = "DISPLAY";
    env [n++] = "WAYLAND_DISPLAY";
    env [n++] = "DBUS_SESSION_BUS_ADDRESS";
    env [n++] = "XDG_RUNTIME_DIR";
    env [n++] = ev;
    env [n++] = sid;
    if (job->run_id [0])
        env [n++] = rid;
    for (size_t k = 0; h->env && h->env [k] && n < sizeof env / sizeof env [0] - 1; k++)
        env [n++] = h->env [k];
    env [n] = NULL;
    //  In the tools' box, with the network (webhooks) and its own folders.
    sb_spawn_opts_t o = {
        .argv = (const char *const *) h->argv,
        .cwd = h->writable && h->writable [0] ? h->writable [0] : "/",
        .env_extra = env,
        .network = true,
        .writable = h->writable && h->writable [0] ? (const char *const *) h->writable + 1 : NULL,
    };
    char err [512], out_tail [SB_HOOKS_TAIL + 1] = "";
    atomic_fetch_add (&self->running, 1);
    int64_t start = s_now (), deadline = start + h->timeout_ms;
    sb_spawn_proc_t *p = sb_spawn_proc_start (&o, err, sizeof err);
    if (!p) {
        atomic_fetch_add (&self->failed, 1);
        atomic_fetch_sub (&self->running, 1);
        sb_warn (ACTOR, "hook for %s did not start: %s", s_events [job->event], err);
        return;
    }
    size_t off = 0;
    bool out_open = true, err_open = true, timed_out = false;
    while (true) {
        if (atomic_load (&self->stopping))
            break;
        int64_t left = deadline - s_now ();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        int in = sb_spawn_proc_stdin (p);
        struct pollfd pf [4] = {
            { out_open ? sb_spawn_proc_stdout (p) : -1, POLLIN, 0 },
            { err_open ? sb_spawn_proc_stderr (p) : -1, POLLIN, 0 },
            { in, POLLOUT, 0 },
            { sb_spawn_proc_pidfd (p), POLLIN, 0 },
        };
        poll (pf, 4, (int) (left < 50 ? left : 50));
        if (in >= 0 && (pf [2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write (in, job->payload + off, job->len - off);
            if (w > 0)
                off += (size_t) w;
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || off >= job->len)
                sb_spawn_proc_close_stdin (p);      //  all of it, or a hook that does not read
        }
        for (int k = 0; k < 2; k++)
            if (pf [k].revents) {
                char buf [4096];
                ssize_t r = read (pf [k].fd, buf, sizeof buf);
                if (r > 0)
                    s_tail (out_tail, buf, (size_t) r);
                else
                if (r == 0 || (errno != EAGAIN && errno != EINTR))
                    *(k ? &err_open : &out_open) = false;
            }
        //  Exited, and what it printed is read (a process it left may
        //  still hold the pipes: the stop below kills it).
        if (sb_spawn_proc_exited (p) && ((!out_open && !err_open) || !(pf [0].revents | pf [1].revents)))
            break;
    }
    int code = sb_spawn_proc_stop (&p, 0);
    atomic_fetch_sub (&self->running, 1);
    for (char *c = out_tail; *c; c++)
        if (*c == '\n' || *c == '\r' || (unsigned char) *c < 0x20)
            *c = ' ';
    s_redact (out_tail, h->env);
    if (timed_out) {
        atomic_fetch_add (&self->timed_out, 1);
        atomic_fetch_add (&self->failed, 1);
        sb_warn (ACTOR, "hook %s for %s killed at its timeout (%d s) session=%s", h->argv [0], s_events [job->event],
                 h->timeout_ms / 1000, job->session_id);
    }
    else
    if (code != 0) {
        atomic_fetch_add (&self->failed, 1);
        sb_warn (ACTOR, "hook %s for %s failed (%s %d) session=%s: %s", h->argv [0], s_events [job->event],
                 code < 0 ? "signal" : "exit", code < 0 ? -code : code, job->session_id, out_tail);
    }
    else {
        atomic_fetch_add (&self->ok, 1);
        sb_info (ACTOR, "hook %s for %s ran in %lld ms session=%s", h->argv [0], s_events [job->event],
                 (long long) (s_now () - start), job->session_id);
    }
}

static void *
s_worker (void *arg)
{
    self_t *self = arg;
    while (true) {
        pthread_mutex_lock (&self->lock);
        while (!self->head && !atomic_load (&self->stopping))
            pthread_cond_wait (&self->cond, &self->lock);
        s_job_t *job = self->head;
        if (job) {
            self->head = job->next;
            if (!self->head)
                self->tail = NULL;
            self->queued--;
            self->queued_bytes -= job->len;
        }
        pthread_mutex_unlock (&self->lock);
        if (!job)
            return NULL;        //  stopping, and nothing queued
        if (!atomic_load (&self->stopping))
            s_run_job (self, job);
        free (job->payload);
        free (job);
    }
}


/* ------------------------------------------------------------------ */
/*  Events */

static const char *
s_final (const char *status)
{
    static const char *finals [] = { "completed", "failed", "cancelled", "expired", "interrupted" };
    for (size_t k = 0; status && k < sizeof finals / sizeof finals [0]; k++)
        if (strcmp (status, finals [k]) == 0)
            return finals [k];
    return NULL;
}

static void
s_enqueue (self_t *self, int e, const sb_val_t *rec)
{
    for (int k = 0; k < self->cfg->count [e]; k++) {
        atomic_fetch_add (&self->fired, 1);
        json_t *j = sb_json_from_val (rec);
        char *text = NULL;
        if (j && json_is_object (j)) {
            json_object_set_new (j, "event", json_string (s_events [e]));
            text = json_dumps (j, JSON_COMPACT);
        }
        json_decref (j);
        s_job_t *job = text ? calloc (1, sizeof *job) : NULL;
        size_t len = text ? strlen (text) + 1 : 0;
        pthread_mutex_lock (&self->lock);
        bool full = !job || self->queued >= SB_HOOKS_QUEUE_MAX || self->queued_bytes + len > SB_HOOKS_QUEUE_BYTES;
        if (!full) {
            text [len - 1] = '\n';      //  one JSON line on stdin
            job->payload = text;
            job->len = len;
            job->hook = &self->cfg->hooks [e][k];
            job->event = e;
            snprintf (job->session_id, sizeof job->session_id, "%s", sb_get_str (rec, "session_id"));
            const char *rid = sb_get_str (rec, "run_id");
            snprintf (job->run_id, sizeof job->run_id, "%s", rid ? rid : "");
            if (self->tail)
                self->tail->next = job;
            else
                self->head = job;
            self->tail = job;
            self->queued++;
            self->queued_bytes += len;
            pthread_cond_signal (&self->cond);
        }
        pthread_mutex_unlock (&self->lock);
        if (full) {
            atomic_fetch_add (&self->dropped, 1);
            sb_warn (ACTOR, "hook for %s dropped: %s", s_events [e], job ? "the queue is full" : "out of memory");
            free (text);
            free (job);
        }
    }
}

static void
s_fire (self_t *self, const sb_val_t *rec)
{
    const char *kind = sb_get_str (rec, "kind");
    if (!kind || !sb_get_str (rec, "session_id"))
        return;
    if (strcmp (kind, "approval.requested") == 0 || strcmp (kind, "session.created") == 0)
        s_enqueue (self, s_event_index (kind), rec);
    else
    if (strcmp (kind, "run.status") == 0) {
        const char *st = s_final (sb_get_str (sb_get_map (rec, "body"), "status"));
        if (st)
            s_enqueue (self, s_event_index ("run.finished"), rec);
        if (sb_run_status_from_name (st) == SB_RUN_failed)
            s_enqueue (self, s_event_index ("run.failed"), rec);
    }
}

//  Asks the tape for entries (after, upto] of a session; the reply is
//  handled in s_handle_fill.
static void
s_fill (self_t *self, const char *sid, uint64_t after, uint64_t upto)
{
    if (self->nfills >= SB_HOOKS_FILLS_MAX)
        self->fills [0] = self->fills [--self->nfills];     //  an unanswered one makes room
    s_fill_t *f = &self->fills [self->nfills];
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sid);
    sb_enc_kuint (e, "after_seq", after);
    sb_enc_kuint (e, "limit", upto - after < SB_HOOKS_FILL_MAX ? upto - after : SB_HOOKS_FILL_MAX);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    if (sb_bus_send (self->bus, "session.events", sid, NULL, b, len, 0, f->id) != 0)
        return;
    snprintf (f->session_id, sizeof f->session_id, "%s", sid);
    f->after = after;
    f->upto = upto;
    self->nfills++;
}

static void
s_handle_fill (self_t *self, sb_msg_t *reply)
{
    for (size_t k = 0; k < self->nfills; k++) {
        s_fill_t *f = &self->fills [k];
        if (strcmp (f->id, reply->h.corr) != 0)
            continue;
        const sb_val_t *events = sb_msg_is_error (reply) ? NULL : sb_get_array (reply->body, "events");
        for (uint32_t i = 0; events && i < events->len; i++) {
            const sb_val_t *ev = sb_array_at (events, i);
            uint64_t seq = sb_get_uint (ev, "seq", 0);
            if (seq > f->after && seq <= f->upto)
                s_fire (self, ev);
        }
        if (sb_msg_is_error (reply))
            sb_warn (ACTOR, "cannot fill a gap of session=%s from the tape: %s", f->session_id,
                     sb_msg_error_message (reply));
        self->fills [k] = self->fills [--self->nfills];
        return;
    }
}

//  An entry from the event plane: fired, after whatever it skipped.
static void
s_handle_event (self_t *self, const sb_val_t *rec)
{
    const char *sid = sb_get_str (rec, "session_id");
    uint64_t seq = sb_get_uint (rec, "seq", 0);
    if (!sid || !seq)
        return;
    uint64_t last = (uint64_t) (uintptr_t) zhashx_lookup (self->last_seq, sid);
    if (last && seq <= last)
        return;                 //  seen (a fill got there first)
    if (last && seq > last + 1)
        s_fill (self, sid, last, seq - 1);
    if (!last && zhashx_size (self->last_seq) >= SB_HOOKS_SESSIONS_MAX)
        zhashx_purge (self->last_seq);      //  forget them all: only gaps go unfilled
    zhashx_update (self->last_seq, sid, (void *) (uintptr_t) seq);
    s_fire (self, rec);
}

/* ------------------------------------------------------------------ */
/*  Requests */

static void
s_handle_stats (self_t *self, sb_msg_t *msg)
{
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "config", self->cfg && self->cfg->source ? self->cfg->source : "");
    uint64_t hooks = 0;
    for (size_t k = 0; self->cfg && k < NEVENTS; k++)
        hooks += (uint64_t) self->cfg->count [k];
    sb_enc_kuint (e, "hooks", hooks);
    sb_enc_kuint (e, "fired", atomic_load (&self->fired));
    sb_enc_kuint (e, "ok", atomic_load (&self->ok));
    sb_enc_kuint (e, "failed", atomic_load (&self->failed));
    sb_enc_kuint (e, "timed_out", atomic_load (&self->timed_out));
    sb_enc_kuint (e, "dropped", atomic_load (&self->dropped));
    sb_enc_kuint (e, "running", atomic_load (&self->running));
    pthread_mutex_lock (&self->lock);
    sb_enc_kuint (e, "queued", self->queued);
    pthread_mutex_unlock (&self->lock);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

typedef void (s_handler_fn) (self_t *self, sb_msg_t *msg);

const sb_dispatch_t sb_hooks_dispatch [] = {
    SB_DISPATCH ("hooks.stats", s_handle_stats),
    SB_DISPATCH_END
};

static void
s_dispatch (self_t *self, sb_msg_t *msg)
{
    const sb_dispatch_t *row = sb_dispatch_find (sb_hooks_dispatch, msg->h.type);
    if (row)
        ((s_handler_fn *) row->fn) (self, msg);
    else
        sb_bus_error (self->bus, msg, SB_E_unknown_type, "hooks does not serve %s", msg->h.type);
}


/* ------------------------------------------------------------------ */
/*  Startup and shutdown */

static void
s_self_destroy (self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock (&self->lock);
    atomic_store (&self->stopping, true);
    pthread_cond_broadcast (&self->cond);
    pthread_mutex_unlock (&self->lock);
    for (int k = 0; k < self->nworkers; k++)
        pthread_join (self->workers [k], NULL);
    while (self->head) {
        s_job_t *j = self->head;
        self->head = j->next;
        free (j->payload);
        free (j);
    }
    pthread_cond_destroy (&self->cond);
    pthread_mutex_destroy (&self->lock);
    s_config_destroy (&self->cfg);
    zhashx_destroy (&self->last_seq);
    sb_sub_destroy (&self->sub);
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
    self->data_dir = args->data_dir;
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->cond, NULL);
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "hooks");
    char path [4200], err [512] = "";
    const char *given = args->config ? args->config->hooks : NULL;
    if (given || args->data_dir) {
        if (!given)
            snprintf (path, sizeof path, "%s/hooks.json", args->data_dir);
        self->cfg = s_config_load (given ? given : path, given != NULL, err, sizeof err);
        if (!self->cfg && err [0]) {
            sb_error (ACTOR, "hooks: %s", err);
            s_self_destroy (&self);
            return NULL;
        }
    }
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    self->last_seq = zhashx_new ();
    if (!self->bus || !self->enc || !self->last_seq) {
        s_self_destroy (&self);
        return NULL;
    }
    if (self->cfg) {
        sb_info (ACTOR, "hooks from %s", self->cfg->source);
        //  Subscribed before serve binds its endpoints, so no event of a
        //  client's session comes before the subscription.
        self->sub = args->sub_endpoint ? sb_sub_new (args->sub_endpoint) : NULL;
        if (!self->sub || sb_sub_subscribe (self->sub, "session/") != 0) {
            sb_error (ACTOR, "hooks: cannot subscribe to the event plane");
            s_self_destroy (&self);
            return NULL;
        }
        for (int k = 0; k < SB_HOOKS_WORKERS; k++)
            if (pthread_create (&self->workers [k], NULL, s_worker, self) == 0)
                self->nworkers++;
    }
    return self;
}

void
sb_hooks_actor (zsock_t *pipe, void *args)
{
    sb_spawn_init_subreaper ();
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    if (sb_actor_register (pipe, self->bus, "hooks", self->instance, NULL, 0)) {
        s_self_destroy (&self);
        return;
    }
    while (!self->terminated) {
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
            { self->sub ? sb_sub_socket (self->sub) : NULL, 0, ZMQ_POLLIN, 0 },
        };
        long wait = sb_bus_has_queued (self->bus) ? 0 : (long) sb_bus_tick (self->bus);
        if (zmq_poll (items, self->sub ? 3 : 2, wait) < 0 && errno != EINTR)
            break;
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        if (self->sub && (items [2].revents & ZMQ_POLLIN)) {
            sb_msg_t *ev;
            for (int k = 0; k < 256 && (ev = sb_sub_recv (self->sub, 0)); k++) {
                s_handle_event (self, ev->body);
                sb_msg_destroy (&ev);
            }
        }
        sb_msg_t *msg;
        while ((msg = sb_bus_recv (self->bus, 0))) {
            if (msg->route)
                s_dispatch (self, msg);
            else
                s_handle_fill (self, msg);
            sb_msg_destroy (&msg);
        }
    }
    s_self_destroy (&self);
}

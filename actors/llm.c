/*  actors/llm.c — the model broker (docs/architecture.md): LLM streaming over
    libcurl's multi interface, one thread, many concurrent streams.

    The actor's ZeroMQ sockets and curl's sockets are polled together with
    zmq_poll; curl says which fds it wants through CURLMOPT_SOCKETFUNCTION
    and when it wants a timeout through CURLMOPT_TIMERFUNCTION. Each stream
    answers its llm.stream request with chunks routed back to the
    requester, then one llm.stream.ok or error.

    It is the only holder of provider keys: they go into HTTP headers and
    nowhere else — not into logs, errors, chunks or the tape.

    This file holds the actor, its loop and its requests; the rest is under
    actors/llm/ (see llm_impl.h for the map). */
#include "actors/llm/llm_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/*  Requests */

//  A provider name that is not configured: the error lists the ones that
//  are, so the person can correct the name without reading the config.
static void
s_no_provider (self_t *self, sb_msg_t *msg, const char *pname)
{
    char names [512] = "";
    size_t used = 0;
    for (int k = 0; k < self->cfg.count && used < sizeof names; k++)
        used += snprintf (names + used, sizeof names - used, "%s'%s'", k? ", ": "",
                          self->cfg.providers [k].name);
    sb_bus_error (self->bus, msg, SB_E_not_found, "no provider named '%s' is configured; configured: %s",
                  pname ? pname : "", names);
}

static void
s_handle_stream (self_t *self, sb_msg_t *msg)
{
    const char *pname = sb_get_str (msg->body, "provider");
    sb_llm_provider_t *prov = sb_llm_config_find (&self->cfg, pname);
    if (!prov) {
        s_no_provider (self, msg, pname);
        return;
    }
    if (zhashx_size (self->jobs) >= MAX_STREAMS) {
        sb_bus_error (self->bus, msg, SB_E_overloaded, "this llm instance has %d streams open", MAX_STREAMS);
        return;
    }
    if (zhashx_lookup (self->jobs, msg->h.id)) {
        sb_bus_error (self->bus, msg, SB_E_conflict, "stream %s is already open", msg->h.id);
        return;
    }
    job_t *job = sb_llm_job_new (self, JOB_STREAM, msg);
    if (!job) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return;
    }
    job->prov = prov;
    const char *model = sb_get_str (msg->body, "model");
    snprintf (job->model, sizeof job->model, "%s", model && *model ? model : prov->model);
    char err [512];
    if (!job->model [0]) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "no model given and provider %s has no default", prov->name);
        sb_llm_job_destroy (&job);
        return;
    }
    if (sb_llm_build_request (self, msg->body, job, err, sizeof err)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "%s", err);
        sb_llm_job_destroy (&job);
        return;
    }
    zhashx_insert (self->jobs, job->id, job);
    self->streams_total++;
    /* The first chunk names the stream and, through header.from, the
       instance that holds it: llm.cancel goes there. */
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "kind", "open");
    sb_enc_kstr (e, "stream_id", job->id);
    sb_enc_map_close (e);
    sb_llm_send (self, job, "llm.stream.chunk", ++job->seq);
    int rc = sb_llm_attempt (self, job);
    if (rc == -2)
        sb_llm_fail_stream (self, job, SB_E_auth, false, NULL, 0, "cannot read the codex token file");
    else
    if (rc != 0)
        sb_llm_fail_stream (self, job, SB_E_internal, true, NULL, 0, "cannot start the HTTP request");
}

static void
s_handle_cancel (self_t *self, sb_msg_t *msg)
{
    const char *id = sb_get_str (msg->body, "stream_id");
    job_t *job = zhashx_lookup (self->jobs, id);
    sb_enc_t *e = self->enc;
    if (job) {
        sb_enc_reset (e);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "stop_reason", "cancelled");
        sb_enc_kstr (e, "provider", job->prov->name);
        sb_enc_kstr (e, "model", job->model);
        sb_enc_kuint (e, "attempts", (uint64_t) job->attempts);
        sb_enc_map_close (e);
        sb_llm_send (self, job, "llm.stream.ok", 0);
        sb_info (ACTOR, "stream cancelled id=%s", id);
        sb_llm_stream_end (self, job);
    }
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kbool (e, "cancelled", job != NULL);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

static void
s_handle_models (self_t *self, sb_msg_t *msg)
{
    const char *pname = sb_get_str (msg->body, "provider");
    sb_llm_provider_t *prov = sb_llm_config_find (&self->cfg, pname);
    if (!prov) {
        s_no_provider (self, msg, pname);
        return;
    }
    job_t *job = sb_llm_job_new (self, JOB_MODELS, msg);
    if (!job)
        return;
    job->prov = prov;
    job->easy = curl_easy_init ();
    char url [1200];
    snprintf (url, sizeof url, "%s/models", prov->base_url);
    sb_llm_curl_opts (job, url);
    curl_easy_setopt (job->easy, CURLOPT_TIMEOUT_MS, 10000L);
    char auth [16500];
    if (prov->api_key) {
        if (prov->kind == SB_PROVIDER_ANTHROPIC) {
            snprintf (auth, sizeof auth, "x-api-key: %s", prov->api_key);
            job->headers = curl_slist_append (job->headers, auth);
            job->headers = curl_slist_append (job->headers, "anthropic-version: 2023-06-01");
        }
        else {
            snprintf (auth, sizeof auth, "Authorization: Bearer %s", prov->api_key);
            job->headers = curl_slist_append (job->headers, auth);
        }
        explicit_bzero (auth, sizeof auth);
        curl_easy_setopt (job->easy, CURLOPT_HTTPHEADER, job->headers);
    }
    if (prov->kind == SB_PROVIDER_CODEX || curl_multi_add_handle (self->multi, job->easy) != CURLM_OK)
        sb_llm_models_done (self, job, CURLE_FAILED_INIT);   /* configured list */
    else
        job->in_multi = true;
}

/*  A model's limits from the configuration alone: the executor asks
    before it builds a context (docs/compaction.md), so it must not wait
    on the provider's /models. */
/*  The latest rate-limit headers a provider sent (docs/usage.md), when
    it sent any. */
static void
s_encode_ratelimit (const sb_limits_seen_t *rl, sb_enc_t *e)
{
    if (!sb_limits_seen_any (rl))
        return;
    sb_enc_key (e, "ratelimit");
    sb_enc_map_open (e);
    for (int k = 0; k < SB_RL_COUNT; k++)
        if (rl->v [k] >= 0)
            sb_enc_kuint (e, sb_limits_seen_key ((sb_limits_field_t) k), (uint64_t) rl->v [k]);
    sb_enc_map_close (e);
}

static void
s_handle_info (self_t *self, sb_msg_t *msg)
{
    const char *pname = sb_get_str (msg->body, "provider");
    sb_llm_provider_t *prov = sb_llm_config_find (&self->cfg, pname);
    if (!prov) {
        s_no_provider (self, msg, pname);
        return;
    }
    const char *model = sb_get_str (msg->body, "model");
    if (!model || !*model)
        model = prov->model;
    sb_llm_limits_t l;
    sb_llm_model_limits (&self->cfg, prov, model, &l);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "provider", prov->name);
    sb_enc_kstr (e, "model", model);
    sb_enc_kuint (e, "context_window", l.context_window);
    sb_enc_kuint (e, "max_output_tokens", l.max_output_tokens);
    sb_enc_kstr (e, "source", l.source);
    sb_price_t price;
    if (sb_llm_model_price (prov, model, &price)) {
        sb_enc_key (e, "prices");
        sb_enc_map_open (e);
        sb_enc_kuint (e, "input", price.input);
        sb_enc_kuint (e, "cached_input", price.cached_input);
        sb_enc_kuint (e, "output", price.output);
        sb_enc_map_close (e);
    }
    s_encode_ratelimit (&prov->ratelimit, e);
    /* the providers a person may choose among (the UI's, the CLI's
       effective model of a session): names, kinds and default models, no
       more (keys and URLs stay here) */
    sb_enc_key (e, "providers");
    sb_enc_array_open (e);
    for (int k = 0; k < self->cfg.count; k++) {
        const sb_llm_provider_t *p = &self->cfg.providers [k];
        sb_enc_map_open (e);
        sb_enc_kstr (e, "provider", p->name);
        sb_enc_kstr (e, "kind", p->demo ? "demo" : sb_provider_kind_name (p->kind));
        sb_enc_kstr (e, "model", p->model);
        s_encode_ratelimit (&p->ratelimit, e);
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

/*  Every message type this actor serves, and its handler: the one place
    to look a type up. tests/unit/test_dispatch.c holds the type column
    against the schema tables. */
typedef void (handler_fn) (self_t *self, sb_msg_t *msg);

const sb_dispatch_t sb_llm_dispatch [] = {
    SB_DISPATCH ("llm.stream", s_handle_stream),
    SB_DISPATCH ("llm.cancel", s_handle_cancel),
    SB_DISPATCH ("llm.models", s_handle_models),
    SB_DISPATCH ("llm.info", s_handle_info),
    SB_DISPATCH_END
};

static void
s_handle_bus (self_t *self)
{
    sb_msg_t *msg;
    while ((msg = sb_bus_recv (self->bus, 0))) {
        if (msg->route) {
            const sb_dispatch_t *row = sb_dispatch_find (sb_llm_dispatch, msg->h.type);
            if (row)
                ((handler_fn *) row->fn) (self, msg);
            else
                sb_bus_error (self->bus, msg, SB_E_unknown_type, "llm does not serve %s", msg->h.type);
        }
        sb_msg_destroy (&msg);
    }
}

/* ------------------------------------------------------------------ */

static void
s_self_destroy (self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    if (self->jobs) {
        zlistx_t *keys = zhashx_keys (self->jobs);
        for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
            job_t *job = zhashx_lookup (self->jobs, k);
            if (job) {
                sb_llm_send_error (self, job, SB_E_unavailable, true, -1, NULL, 0, "the llm actor is shutting down");
                sb_llm_stream_end (self, job);
            }
        }
        zlistx_destroy (&keys);
        zhashx_destroy (&self->jobs);
    }
    zlistx_destroy (&self->waiting);
    if (self->multi)
        curl_multi_cleanup (self->multi);
    sb_demo_destroy (&self->demo);
    sb_llm_config_clear (&self->cfg);
    sb_bus_destroy (&self->bus);
    sb_enc_destroy (&self->enc);
    free (self->fds);
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
    self->curl_timeout_at = -1;
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "llm");
    const sb_server_config_t *sc = args->config;
    char err [600];
    if (sb_llm_config_load (&self->cfg, sc ? sc->llm : NULL, sc ? sc->llm_url : NULL,
                            sc ? sc->model : NULL, sc ? sc->providers : NULL, err, sizeof err)) {
        /* a providers file's error names itself (config.c) */
        sb_error (ACTOR, "%s%s", strncmp (err, "bad provider configuration", 26) ? "bad provider configuration: "
                  : "", err);
        s_self_destroy (&self);
        return NULL;
    }
    self->cfg.context_window = sc ? sc->context_window : 0;
    for (int i = 0; i < self->cfg.count; i++) {
        sb_llm_provider_t *p = &self->cfg.providers [i];
        if (p->demo) {
            if (!self->demo)
                self->demo = sb_demo_new (sc && sc->demo_delay_ms >= 0 ? sc->demo_delay_ms : 15);
            if (!self->demo) {
                sb_error (ACTOR, "cannot start the demo model server");
                s_self_destroy (&self);
                return NULL;
            }
            snprintf (p->base_url, sizeof p->base_url, "%s", sb_demo_url (self->demo));
        }
        /* name what is configured, never the key itself nor the URL's
           credentials */
        char url [sizeof p->base_url];
        sb_log_redact_url (p->base_url, url, sizeof url);
        sb_info (ACTOR, "provider name=%s kind=%s%s url=%s model=%s key=%s", p->name,
                 sb_provider_kind_name (p->kind), p->demo ? " (demo)" : "", url,
                 p->model [0] ? p->model : "-", p->api_key ? "set" : "none");
        /* A missing key would otherwise first show as a 401 on the first
           prompt; say it now, and say what to set. */
        const char *var = sb_llm_config_missing_key (p);
        if (var && p->kind == SB_PROVIDER_CODEX)
            sb_warn (ACTOR, "provider \"%s\" (%s) cannot read its token file %s: sign in with the "
                     "Codex CLI, or set %s", p->name, url, p->token_file, var);
        else
        if (var)
            sb_warn (ACTOR, "provider \"%s\" (%s) has no key: set %s", p->name, url, var);
    }
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    self->jobs = zhashx_new ();
    self->waiting = zlistx_new ();
    self->multi = curl_multi_init ();
    if (!self->bus || !self->enc || !self->jobs || !self->waiting || !self->multi) {
        s_self_destroy (&self);
        return NULL;
    }
    curl_multi_setopt (self->multi, CURLMOPT_SOCKETFUNCTION, sb_llm_socket_cb);
    curl_multi_setopt (self->multi, CURLMOPT_SOCKETDATA, self);
    curl_multi_setopt (self->multi, CURLMOPT_TIMERFUNCTION, sb_llm_timer_cb);
    curl_multi_setopt (self->multi, CURLMOPT_TIMERDATA, self);
    curl_multi_setopt (self->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    return self;
}

static void
s_run_timers (self_t *self)
{
    int64_t now = sb_mono_ms ();
    /* retries that are due */
    job_t *job = zlistx_first (self->waiting);
    while (job) {
        job_t *next = zlistx_next (self->waiting);
        if (job->retry_at && job->retry_at <= now) {
            zlistx_delete (self->waiting, zlistx_find (self->waiting, job));
            if (sb_llm_attempt (self, job) != 0)
                sb_llm_fail_stream (self, job, SB_E_internal, true, NULL, 0, "cannot start the HTTP request");
        }
        job = next;
    }
    /* requests whose deadline passed */
    zlistx_t *keys = zhashx_keys (self->jobs);
    for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
        job_t *j = zhashx_lookup (self->jobs, k);
        if (j && j->deadline && j->deadline <= now)
            sb_llm_fail_stream (self, j, SB_E_timeout, true, NULL, 0, "the request's deadline passed");
        else
        /* The idle timeout, between bytes. curl's low-speed check averages
           over several seconds, so a timeout of 1 s would fire after ~7. */
        if (j && j->in_multi && now - j->last_byte_ms >= (int64_t) j->prov->idle_timeout_s * 1000) {
            curl_multi_remove_handle (self->multi, j->easy);
            j->in_multi = false;
            char m [200];
            snprintf (m, sizeof m, "the provider sent nothing for %d s (idle timeout)",
                      j->prov->idle_timeout_s);
            sb_llm_retry_or_fail (self, j, SB_E_timeout, "idle_timeout", 0, true, -1, m);
        }
    }
    zlistx_destroy (&keys);
}

void
sb_llm_actor (zsock_t *pipe, void *args)
{
    /* a name for top -H and /proc/PID/task/TID/comm (bench/bench_llm.c) */
    pthread_setname_np (pthread_self (), "sb-llm");
    curl_global_init (CURL_GLOBAL_DEFAULT);
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    if (sb_actor_register (pipe, self->bus, "llm", self->instance, NULL, 0)) {
        s_self_destroy (&self);
        return;
    }
    zmq_pollitem_t *items = NULL;
    size_t cap = 0;
    while (!self->terminated) {
        size_t n = 2 + self->nfds;
        if (n > cap) {
            zmq_pollitem_t *ni = realloc (items, n * 2 * sizeof *ni);
            if (!ni)
                break;
            items = ni;
            cap = n * 2;
        }
        items [0] = (zmq_pollitem_t) { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 };
        items [1] = (zmq_pollitem_t) { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 };
        for (size_t k = 0; k < self->nfds; k++)
            items [2 + k] = (zmq_pollitem_t) { NULL, self->fds [k].fd, self->fds [k].events, 0 };
        int64_t now = sb_mono_ms ();
        int64_t wait = sb_bus_tick (self->bus);
        if (self->curl_timeout_at >= 0 && self->curl_timeout_at - now < wait)
            wait = self->curl_timeout_at - now;
        for (job_t *j = zlistx_first (self->waiting); j; j = zlistx_next (self->waiting))
            if (j->retry_at - now < wait)
                wait = j->retry_at - now;
        if (zhashx_size (self->jobs) && wait > 100)
            wait = 100;         /* deadlines are checked at this granularity */
        if (sb_bus_has_queued (self->bus) || wait < 0)
            wait = 0;
        if (zmq_poll (items, (int) n, (long) wait) < 0 && errno != EINTR)
            break;
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        int running;
        /* curl may change the fd table from inside socket_action, so act
           on the snapshot taken for this poll */
        for (size_t k = 2; k < n; k++)
            if (items [k].revents) {
                int ev = (items [k].revents & ZMQ_POLLIN ? CURL_CSELECT_IN : 0)
                       | (items [k].revents & ZMQ_POLLOUT ? CURL_CSELECT_OUT : 0)
                       | (items [k].revents & ZMQ_POLLERR ? CURL_CSELECT_ERR : 0);
                curl_multi_socket_action (self->multi, items [k].fd, ev, &running);
            }
        if (self->curl_timeout_at >= 0 && sb_mono_ms () >= self->curl_timeout_at) {
            self->curl_timeout_at = -1;
            curl_multi_socket_action (self->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        sb_llm_check_multi (self);
        s_handle_bus (self);
        s_run_timers (self);
        sb_llm_check_multi (self);
    }
    free (items);
    s_self_destroy (&self);
}
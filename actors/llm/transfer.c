/*  actors/llm/transfer.c — the llm actor's HTTP transfers: curl's
    callbacks, one attempt of a stream, retries, and what a finished
    transfer means for its job. */
#include "actors/llm/llm_impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/*  curl callbacks */

/*  The counts the provider reported; an unknown one is left out. */
void
sb_llm_encode_tokens (const sb_llm_usage_t *u, sb_enc_t *e)
{
    if (u->input_tokens >= 0) sb_enc_kuint (e, "input_tokens", (uint64_t) u->input_tokens);
    if (u->output_tokens >= 0) sb_enc_kuint (e, "output_tokens", (uint64_t) u->output_tokens);
    if (u->cached_tokens >= 0) sb_enc_kuint (e, "cached_tokens", (uint64_t) u->cached_tokens);
    if (u->reasoning_tokens >= 0) sb_enc_kuint (e, "reasoning_tokens", (uint64_t) u->reasoning_tokens);
}

/*  A usage chunk: the counts, who answered, the cost when the model has a
    price (docs/usage.md), and the rate-limit headers of this response. The
    latest headers are also kept per provider, for llm.info. */
void
sb_llm_encode_usage (job_t *job, const sb_llm_usage_t *u, sb_enc_t *e)
{
    sb_llm_encode_tokens (u, e);
    sb_enc_kstr (e, "provider", job->prov->name);
    sb_enc_kstr (e, "model", job->model [0] ? job->model : job->prov->model);
    sb_price_t price;
    if (sb_llm_model_price (job->prov, job->model, &price)) {
        int64_t cost = sb_price_cost (&price, u->input_tokens, u->cached_tokens, u->output_tokens);
        if (cost >= 0)
            sb_enc_kuint (e, "cost_microusd", (uint64_t) cost);
    }
    for (int k = 0; k < SB_RL_COUNT; k++)
        if (job->rl.v [k] >= 0)
            sb_enc_kuint (e, sb_limits_seen_key ((sb_limits_field_t) k), (uint64_t) job->rl.v [k]);
    if (sb_limits_seen_any (&job->rl))
        job->prov->ratelimit = job->rl;
}

static int
s_on_chunk (const sb_chunk_t *c, void *arg)
{
    job_t *job = arg;
    self_t *self = job->self;
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "kind", sb_chunk_kind_name (c->kind));
    switch (c->kind) {
        case SB_CHUNK_TEXT:
        case SB_CHUNK_THINKING:
            sb_enc_key (e, "text");
            sb_enc_strn (e, c->text, c->text_len);
            break;
        case SB_CHUNK_TOOL_CALL:
            sb_enc_kstr (e, "call_id", c->call_id ? c->call_id : "");
            sb_enc_kstr (e, "name", c->name ? c->name : "");
            sb_enc_key (e, "arguments");
            sb_enc_strn (e, c->arguments ? c->arguments : "", c->arguments ? c->arguments_len : 0);
            break;
        case SB_CHUNK_USAGE:
            sb_llm_encode_usage (job, &c->usage, e);
            break;
        case SB_CHUNK_REASONING_STATE:
            sb_enc_key (e, "data");
            sb_enc_strn (e, c->data ? c->data : "", c->data ? c->data_len : 0);
            break;
        case SB_CHUNK_ERROR:
            sb_enc_kstr (e, "call_id", c->call_id ? c->call_id : "");
            sb_enc_kstr_opt (e, "name", c->name);
            sb_enc_kstr (e, "code", c->code ? c->code : "error");
            sb_enc_kstr (e, "message", c->message ? c->message : "");
            if (c->arguments) {
                sb_enc_key (e, "arguments");
                sb_enc_strn (e, c->arguments, c->arguments_len);
            }
            break;
    }
    sb_enc_map_close (e);
    job->content_chunks++;
    self->chunks_total++;
    sb_llm_send (self, job, "llm.stream.chunk", ++job->seq);
    return 0;
}

static size_t
s_write_cb (char *ptr, size_t size, size_t nmemb, void *arg)
{
    job_t *job = arg;
    size_t n = size * nmemb;
    job->last_byte_ms = sb_mono_ms ();
    if (!job->status_known) {
        curl_easy_getinfo (job->easy, CURLINFO_RESPONSE_CODE, &job->status);
        job->status_known = true;
    }
    /* a server that ignores "stream": true answers with one JSON
       document; it is kept like an error body, and said so once */
    if (job->kind == JOB_STREAM && job->status >= 200 && job->status < 300 && job->json_body && !job->seq_body) {
        size_t k = 0;
        while (k < n && (ptr [k] == ' ' || ptr [k] == '\r' || ptr [k] == '\n' || ptr [k] == '\t'))
            k++;
        if (k < n)
            job->whole = ptr [k] == '{' || ptr [k] == '[';
    }
    if (job->kind == JOB_STREAM && job->status >= 200 && job->status < 300 && !job->whole) {
        job->seq_body = true;
        int rc = sb_mapper_feed (job->mapper, job->sse, ptr, n, s_on_chunk, job);
        return rc == SB_MAPPER_OK ? n : 0;
    }
    /* error bodies and non-stream responses are kept, bounded */
    char **buf = job->kind == JOB_STREAM ? &job->errbody : &job->resp;
    size_t *len = job->kind == JOB_STREAM ? &job->errlen : &job->resp_len;
    size_t cap = job->kind == JOB_STREAM ? MAX_ERRBODY : (4u << 20);
    if (*len + n > cap)
        return *len >= cap ? n : n;     /* drop the excess, keep reading */
    char *nb = realloc (*buf, *len + n + 1);
    if (!nb)
        return 0;
    memcpy (nb + *len, ptr, n);
    *len += n;
    nb [*len] = 0;
    *buf = nb;
    return n;
}

static size_t
s_header_cb (char *ptr, size_t size, size_t nmemb, void *arg)
{
    job_t *job = arg;
    size_t n = size * nmemb;
    job->last_byte_ms = sb_mono_ms ();
    /* the value without its CRLF, which the parser would refuse */
    size_t v = n;
    while (v > 0 && (ptr [v - 1] == '\r' || ptr [v - 1] == '\n' || ptr [v - 1] == ' '))
        v--;
    if (v > 12 && strncasecmp (ptr, "retry-after:", 12) == 0)
        snprintf (job->retry_after, sizeof job->retry_after, "%.*s", (int) (v - 12), ptr + 12);
    else
    if (v > 15 && strncasecmp (ptr, "retry-after-ms:", 15) == 0)
        snprintf (job->retry_after_ms, sizeof job->retry_after_ms, "%.*s", (int) (v - 15), ptr + 15);
    sb_limits_seen_header (&job->rl, ptr, v);
    if (v > 13 && strncasecmp (ptr, "content-type:", 13) == 0)
        job->json_body = strcasestr (ptr, "application/json") != NULL && strcasestr (ptr, "event-stream") == NULL;
    /* the status line of each attempt comes first: reset per response */
    if (n > 5 && strncmp (ptr, "HTTP/", 5) == 0) {
        job->status_known = false;
        job->json_body = false;
        job->retry_after [0] = job->retry_after_ms [0] = 0;
        sb_limits_seen_clear (&job->rl);
    }
    return n;
}

int
sb_llm_socket_cb (CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    self_t *self = userp;
    size_t k;
    for (k = 0; k < self->nfds; k++)
        if (self->fds [k].fd == fd)
            break;
    if (what == CURL_POLL_REMOVE) {
        if (k < self->nfds)
            self->fds [k] = self->fds [--self->nfds];
        return 0;
    }
    if (k == self->nfds) {
        if (self->nfds == self->capfds) {
            size_t cap = self->capfds ? self->capfds * 2 : 64;
            curl_fd_t *nf = realloc (self->fds, cap * sizeof *nf);
            if (!nf)
                return -1;
            self->fds = nf;
            self->capfds = cap;
        }
        self->fds [self->nfds++].fd = fd;
    }
    self->fds [k].events = (short) ((what & CURL_POLL_IN ? ZMQ_POLLIN : 0)
                                  | (what & CURL_POLL_OUT ? ZMQ_POLLOUT : 0));
    return 0;
}

int
sb_llm_timer_cb (CURLM *multi, long timeout_ms, void *userp)
{
    self_t *self = userp;
    self->curl_timeout_at = timeout_ms < 0 ? -1 : sb_mono_ms () + timeout_ms;
    return 0;
}


/* ------------------------------------------------------------------ */
/*  Attempts */

void
sb_llm_curl_opts (job_t *job, const char *url)
{
    CURL *c = job->easy;
    curl_easy_setopt (c, CURLOPT_URL, url);
    curl_easy_setopt (c, CURLOPT_PRIVATE, job);
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, s_write_cb);
    curl_easy_setopt (c, CURLOPT_WRITEDATA, job);
    curl_easy_setopt (c, CURLOPT_HEADERFUNCTION, s_header_cb);
    curl_easy_setopt (c, CURLOPT_HEADERDATA, job);
    curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT_MS, (long) (job->prov ? job->prov->connect_timeout_ms : 10000));
    /* idle timeout: fewer than 1 byte/s for idle_timeout_s seconds */
    curl_easy_setopt (c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt (c, CURLOPT_LOW_SPEED_TIME, (long) (job->prov ? job->prov->idle_timeout_s : 300));
    curl_easy_setopt (c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt (c, CURLOPT_PROTOCOLS_STR, "http,https");
#if LIBCURL_VERSION_NUM >= 0x075700
    /* TLS handshakes should not reload the CA store every time */
    curl_easy_setopt (c, CURLOPT_CA_CACHE_TIMEOUT, 3600L);
#endif
}

int
sb_llm_attempt (self_t *self, job_t *job)
{
    sb_llm_provider_t *p = job->prov;
    if (job->easy) {
        if (job->in_multi)
            curl_multi_remove_handle (self->multi, job->easy);
        job->in_multi = false;
        curl_easy_cleanup (job->easy);
        job->easy = NULL;
    }
    curl_slist_free_all (job->headers);
    job->headers = NULL;
    sb_sse_destroy (&job->sse);
    sb_mapper_destroy (&job->mapper);
    free (job->errbody);
    job->errbody = NULL;
    job->errlen = 0;
    job->status = 0;
    job->status_known = false;
    job->json_body = job->whole = job->seq_body = false;
    job->sse = sb_sse_new (0);
    job->mapper = sb_mapper_new (p->kind);
    job->easy = curl_easy_init ();
    if (!job->sse || !job->mapper || !job->easy)
        return -1;
    char url [1200];
    snprintf (url, sizeof url, "%s%s", p->base_url, sb_provider_endpoint (p->kind));
    sb_llm_curl_opts (job, url);
    curl_easy_setopt (job->easy, CURLOPT_POSTFIELDS, job->body);
    curl_easy_setopt (job->easy, CURLOPT_POSTFIELDSIZE, (long) strlen (job->body));
    struct curl_slist *h = NULL;
    h = curl_slist_append (h, "Content-Type: application/json");
    h = curl_slist_append (h, "Accept: text/event-stream");
    char auth [16500];
    if (p->kind == SB_PROVIDER_ANTHROPIC) {
        if (p->api_key) {
            snprintf (auth, sizeof auth, "x-api-key: %s", p->api_key);
            h = curl_slist_append (h, auth);
        }
        h = curl_slist_append (h, "anthropic-version: 2023-06-01");
    }
    else
    if (p->kind == SB_PROVIDER_CODEX) {
        if (!job->access_token && sb_llm_codex_load (job) != 0)
            return -2;
        snprintf (auth, sizeof auth, "Authorization: Bearer %s", job->access_token);
        h = curl_slist_append (h, auth);
        if (job->account_id [0]) {
            snprintf (auth, sizeof auth, "chatgpt-account-id: %s", job->account_id);
            h = curl_slist_append (h, auth);
        }
    }
    else
    if (p->api_key) {
        snprintf (auth, sizeof auth, "Authorization: Bearer %s", p->api_key);
        h = curl_slist_append (h, auth);
    }
    explicit_bzero (auth, sizeof auth);
    job->headers = h;
    curl_easy_setopt (job->easy, CURLOPT_HTTPHEADER, h);
    job->attempts++;
    job->retry_at = 0;
    job->last_byte_ms = sb_mono_ms ();
    if (curl_multi_add_handle (self->multi, job->easy) != CURLM_OK)
        return -1;
    job->in_multi = true;
    return 0;
}

/*  Schedules another attempt, or gives up. Never retries a stream whose
    output the requester has already seen: a silent retry would show it
    twice. */
void
sb_llm_retry_or_fail (self_t *self, job_t *job, sb_err_t code, const char *provider_code, long status,
                      bool retryable, int64_t hint_ms, const char *message)
{
    if (retryable && job->content_chunks == 0 && job->attempts < job->prov->max_attempts) {
        int64_t delay = hint_ms;
        if (delay < 0) {
            /* exponential backoff with jitter */
            int64_t base = (int64_t) job->prov->backoff_base_ms << (job->attempts - 1);
            if (base > 8000)
                base = 8000;
            uint32_t r = 0;
            if (getrandom (&r, sizeof r, 0) != sizeof r)
                r = (uint32_t) sb_mono_us ();
            delay = base / 2 + (int64_t) (r % (uint32_t) (base / 2 + 1));
        }
        job->retry_at = sb_mono_ms () + delay;
        zlistx_add_end (self->waiting, job);
        self->retries_total++;
        sb_info (ACTOR, "retrying stream id=%s provider=%s attempt=%d delay_ms=%lld reason=%s",
                 job->id, job->prov->name, job->attempts + 1, (long long) delay,
                 provider_code ? provider_code : sb_err_name (code));
        return;
    }
    if (job->content_chunks > 0 && retryable) {
        char m [800];
        snprintf (m, sizeof m, "%s (the stream failed after output was sent; retry the call)", message);
        sb_llm_fail_stream (self, job, code, true, provider_code, status, m);
        return;
    }
    sb_llm_fail_stream (self, job, code, retryable && job->attempts >= job->prov->max_attempts, provider_code,
                   status, message);
}

/*  A stream request answered with one JSON document, not an event
    stream: a server that does not stream at this URL (or ignores
    "stream"), or a proxy's error page. An error object in it is the
    provider's error; anything else fails at once, in one line: the same
    request would get the same answer, so it is not retried. */
static void
s_whole_answer (self_t *self, job_t *job, long status)
{
    sb_provider_error_t perr;
    sb_provider_classify_http (job->prov->kind, 400, job->errbody, job->errlen, &perr);
    char start [161];
    size_t n = job->errlen < sizeof start - 1 ? job->errlen : sizeof start - 1;
    memcpy (start, job->errbody ? job->errbody : "", n);
    start [n] = 0;
    for (char *p = start; *p; p++)
        if ((unsigned char) *p < 0x20)
            *p = ' ';
    char m [700];
    if (strstr (start, "\"error\""))
        snprintf (m, sizeof m, "it answered HTTP %ld with a JSON error, not an event stream: %s: %s",
                  status, perr.code, perr.message);
    else
        snprintf (m, sizeof m, "it answered HTTP %ld with one JSON document, not an event stream: it "
                  "does not stream at this URL (%.160s%s)", status, start, job->errlen > n ? "..." : "");
    sb_llm_retry_or_fail (self, job, SB_E_provider, perr.code [0] ? perr.code : "not_streamed", status, false, -1, m);
}

static void
s_stream_done (self_t *self, job_t *job, CURLcode res)
{
    job->in_multi = false;
    curl_multi_remove_handle (self->multi, job->easy);
    if (!job->status_known)
        curl_easy_getinfo (job->easy, CURLINFO_RESPONSE_CODE, &job->status);
    long status = job->status;
    /* A 2xx stream whose connection broke mid-body was reached: it ended
       without its terminal event (incomplete_stream), unless that event
       had already come, and then the break does not matter. */
    bool broken = status >= 200 && status < 300
               && (res == CURLE_PARTIAL_FILE || res == CURLE_RECV_ERROR || res == CURLE_GOT_NOTHING);
    if (job->whole && (res == CURLE_OK || broken) && status >= 200 && status < 300) {
        s_whole_answer (self, job, status);
        return;
    }
    if ((res == CURLE_OK || broken) && status >= 200 && status < 300) {
        const char *stop = NULL;
        sb_provider_error_t perr;
        if (sb_mapper_done (job->mapper, &stop, &perr) == 0) {
            sb_enc_t *e = self->enc;
            sb_enc_reset (e);
            sb_enc_map_open (e);
            sb_enc_kstr (e, "stop_reason", stop);
            sb_llm_usage_t u;
            if (sb_mapper_usage (job->mapper, &u)) {
                sb_enc_key (e, "usage");
                sb_enc_map_open (e);
                sb_llm_encode_tokens (&u, e);
                sb_enc_map_close (e);
            }
            sb_enc_kstr (e, "provider", job->prov->name);
            sb_enc_kstr (e, "model", job->model);
            sb_enc_kuint (e, "attempts", (uint64_t) job->attempts);
            sb_enc_map_close (e);
            sb_llm_send (self, job, "llm.stream.ok", 0);
            sb_debug (ACTOR, "stream done id=%s stop=%s chunks=%llu", job->id, stop,
                      (unsigned long long) job->content_chunks);
            sb_llm_stream_end (self, job);
            return;
        }
        /* A provider's own code is any string; only the two the mapper
           raises itself keep their meaning on the bus. */
        sb_err_t code = sb_err_from_name (perr.code);
        if (code != SB_E_incomplete_stream && code != SB_E_too_large)
            code = sb_provider_error_overflow (&perr) ? SB_E_context_overflow : SB_E_provider;
        char m [700];
        snprintf (m, sizeof m, "%s: %s", perr.code, perr.message);
        sb_llm_retry_or_fail (self, job, code, perr.code, 0, perr.retryable && code != SB_E_context_overflow,
                              perr.retry_after_ms, m);
        return;
    }
    if (res == CURLE_OK || (res == CURLE_WRITE_ERROR && status >= 300)) {
        if ((status == 401 || status == 403) && job->prov->kind == SB_PROVIDER_CODEX && !job->refreshed) {
            sb_llm_codex_refresh (self, job);
            return;
        }
        sb_provider_error_t perr;
        sb_provider_classify_http (job->prov->kind, status, job->errbody, job->errlen, &perr);
        int64_t hint = sb_provider_retry_after (job->retry_after_ms [0] ? job->retry_after_ms : NULL,
                                                job->retry_after [0] ? job->retry_after : NULL, time (NULL));
        if (hint < 0)
            hint = perr.retry_after_ms;
        sb_err_t code = status == 401 || status == 403 ? SB_E_auth
                      : sb_provider_error_overflow (&perr) ? SB_E_context_overflow : SB_E_provider;
        char m [700];
        snprintf (m, sizeof m, "HTTP %ld %s: %s", status, perr.code, perr.message);
        sb_llm_retry_or_fail (self, job, code, perr.code, status, perr.retryable && code != SB_E_context_overflow,
                              hint, m);
        return;
    }
    /* transport failures */
    sb_err_t code;
    bool retryable;
    char m [400];
    if (res == CURLE_OPERATION_TIMEDOUT) {
        code = SB_E_timeout;
        retryable = true;
        snprintf (m, sizeof m, "the provider sent nothing for %d s (idle timeout) or the connection timed out",
                  job->prov->idle_timeout_s);
    }
    else
    if (res == CURLE_WRITE_ERROR) {
        sb_provider_error_t perr;
        sb_mapper_done (job->mapper, NULL, &perr);
        code = SB_E_provider;
        retryable = false;
        snprintf (m, sizeof m, "malformed stream: %s", perr.message);
    }
    else {
        code = SB_E_unavailable;
        retryable = res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST
                 || res == CURLE_RECV_ERROR || res == CURLE_SEND_ERROR || res == CURLE_GOT_NOTHING
                 || res == CURLE_PARTIAL_FILE;
        snprintf (m, sizeof m, "cannot reach the provider: %s", curl_easy_strerror (res));
    }
    sb_llm_retry_or_fail (self, job, code, curl_easy_strerror (res), 0, retryable, -1, m);
}

/*  One {model, context_window, max_output_tokens, source} per id. */
static void
s_encode_limit (self_t *self, const sb_llm_provider_t *p, const char *id, sb_enc_t *e)
{
    sb_llm_limits_t l;
    sb_llm_model_limits (&self->cfg, p, id, &l);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "model", id);
    sb_enc_kuint (e, "context_window", l.context_window);
    sb_enc_kuint (e, "max_output_tokens", l.max_output_tokens);
    sb_enc_kstr (e, "source", l.source);
    sb_enc_map_close (e);
}

/*  The `limits` of an llm.models reply: one per id of `models`, in the
    same order (data: the provider's list, or NULL for the configured one). */
void
sb_llm_encode_limits (self_t *self, const sb_llm_provider_t *p, json_t *data, sb_enc_t *e)
{
    sb_enc_key (e, "limits");
    sb_enc_array_open (e);
    size_t k, n = 0;
    json_t *m;
    if (json_is_array (data))
        json_array_foreach (data, k, m) {
            const char *id = json_string_value (json_object_get (m, "id"));
            if (!id)
                id = json_string_value (json_object_get (m, "name"));
            if (id && strlen (id) < 256 && n < 4096) {
                s_encode_limit (self, p, id, e);
                n++;
            }
        }
    else
        for (int i = 0; i < p->nmodels; i++)
            s_encode_limit (self, p, p->models [i], e);
    if (!json_is_array (data) && p->nmodels == 0 && p->model [0])
        s_encode_limit (self, p, p->model, e);
    sb_enc_array_close (e);
}

void
sb_llm_models_done (self_t *self, job_t *job, CURLcode res)
{
    long status = 0;
    curl_easy_getinfo (job->easy, CURLINFO_RESPONSE_CODE, &status);
    json_t *resp = res == CURLE_OK && status == 200 && job->resp ? json_loads (job->resp, 0, NULL) : NULL;
    json_t *data = resp ? json_object_get (resp, "data") : NULL;
    if (!json_is_array (data))
        data = resp ? json_object_get (resp, "models") : NULL;
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "provider", job->prov->name);
    sb_enc_key (e, "models");
    sb_enc_array_open (e);
    size_t k, n = 0;
    json_t *m;
    if (json_is_array (data))
        json_array_foreach (data, k, m) {
            const char *id = json_string_value (json_object_get (m, "id"));
            if (!id)
                id = json_string_value (json_object_get (m, "name"));
            if (id && strlen (id) < 256 && n < 4096) {
                sb_enc_str (e, id);
                n++;
            }
        }
    else
        for (int i = 0; i < job->prov->nmodels; i++)
            sb_enc_str (e, job->prov->models [i]);
    if (!json_is_array (data) && job->prov->nmodels == 0 && job->prov->model [0])
        sb_enc_str (e, job->prov->model);
    sb_enc_array_close (e);
    sb_enc_kstr (e, "source", json_is_array (data) ? "provider" : "configured");
    sb_llm_encode_limits (self, job->prov, data, e);
    sb_enc_map_close (e);
    sb_llm_send (self, job, "llm.models.ok", 0);
    json_decref (resp);
    sb_llm_job_destroy (&job);
}

void
sb_llm_check_multi (self_t *self)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read (self->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        job_t *job = NULL;
        curl_easy_getinfo (m->easy_handle, CURLINFO_PRIVATE, (char **) &job);
        CURLcode res = m->data.result;
        if (!job)
            continue;
        if (job->kind == JOB_STREAM)
            s_stream_done (self, job, res);
        else
        if (job->kind == JOB_REFRESH)
            sb_llm_codex_refresh_done (self, job, res);
        else
            sb_llm_models_done (self, job, res);
    }
}


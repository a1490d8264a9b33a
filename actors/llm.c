/*  actors/llm.c — the model broker (docs/architecture.md): LLM streaming over
    libcurl's multi interface, one thread, many concurrent streams.

    The actor's ZeroMQ sockets and curl's sockets are polled together with
    zmq_poll; curl says which fds it wants through CURLMOPT_SOCKETFUNCTION
    and when it wants a timeout through CURLMOPT_TIMERFUNCTION. Each stream
    answers its llm.stream request with chunks routed back to the
    requester, then one llm.stream.ok or error.

    It is the only holder of provider keys: they go into HTTP headers and
    nowhere else — not into logs, errors, chunks or the tape. */
#include "actors/actor.h"
#include "actors/llm/config.h"
#include "actors/llm/demo.h"
#include "actors/llm/provider.h"
#include "actors/llm/sse.h"
#include "bus/client.h"
#include "common/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define ACTOR "llm"
#define MAX_ERRBODY (64 * 1024)
#define MAX_STREAMS 4096

typedef enum { JOB_STREAM, JOB_MODELS, JOB_REFRESH } job_kind_t;

typedef struct self self_t;

typedef struct job {
    job_kind_t kind;
    self_t *self;
    char id [33];               /* the request id (= stream_id) */
    uint8_t *route;             /* requester route */
    size_t route_len;
    sb_header_t req;            /* request header, for replies */
    sb_llm_provider_t *prov;
    char model [128];
    char *body;                 /* HTTP body, kept for retries */
    CURL *easy;
    struct curl_slist *headers;
    char *errbody;              /* non-2xx response body */
    size_t errlen;
    char retry_after [64];
    char retry_after_ms [64];
    long status;
    bool status_known;
    sb_sse_t *sse;
    sb_mapper_t *mapper;
    uint64_t seq;               /* chunk seq sent so far */
    uint64_t content_chunks;    /* chunks other than "open" */
    int attempts;
    int64_t retry_at;           /* mono ms of the next attempt; 0 = none */
    int64_t deadline;           /* mono ms; 0 = none */
    bool refreshed;             /* codex: the one token refresh is spent */
    bool in_multi;
    struct job *parent;         /* JOB_REFRESH: the stream waiting on it */
    char *access_token;         /* codex: the token of this attempt */
    char account_id [128];
    char *resp;                 /* JOB_MODELS / JOB_REFRESH: response body */
    size_t resp_len;
    int64_t t_first;            /* mono us of the first chunk */
    int64_t last_byte_ms;       /* mono ms of the attempt's start or its last byte */
} job_t;

typedef struct {
    curl_socket_t fd;
    short events;
} curl_fd_t;

struct self {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_enc_t *enc;
    CURLM *multi;
    char instance [129];
    sb_llm_config_t cfg;
    sb_demo_t *demo;
    zhashx_t *jobs;             /* stream id -> job_t (streams only) */
    zlistx_t *waiting;          /* job_t waiting for retry_at */
    curl_fd_t *fds;
    size_t nfds, capfds;
    int64_t curl_timeout_at;    /* mono ms; -1 = none */
    bool terminated;
    uint64_t streams_total, chunks_total, retries_total, errors_total;
};

/* ------------------------------------------------------------------ */
/*  Replies */

static void
s_send (self_t *self, job_t *job, const char *type, uint64_t seq)
{
    size_t len;
    const uint8_t *b = sb_enc_data (self->enc, &len);
    sb_bus_reply_to (self->bus, job->route, job->route_len, &job->req, type, seq, b, len);
}

/*  Withholds a secret the message holds verbatim. The provider adapters
    redact what looks like a key, but a local server's key can look like
    anything, and only this actor knows it is one. */
static void
s_scrub (char *message, size_t size, const char *secret)
{
    size_t slen = secret ? strlen (secret) : 0;
    if (slen < 4)
        return;
    const char *mark = "[redacted]";
    size_t mlen = strlen (mark);
    char *from = message, *at;
    while ((at = strstr (from, secret))) {
        size_t head = (size_t) (at - message);
        if (head + mlen + 1 > size) {
            *at = 0;            /* no room for the mark: cut the message there */
            return;
        }
        size_t tail = strlen (at + slen);
        if (head + mlen + tail + 1 > size)
            tail = size - 1 - head - mlen;
        memmove (at + mlen, at + slen, tail);
        at [mlen + tail] = 0;
        memcpy (at, mark, mlen);
        from = at + mlen;       /* the mark itself is never searched again */
    }
}

static void
s_send_error (self_t *self, job_t *job, sb_err_t code, bool retryable, int64_t retry_after_ms,
              const char *provider_code, long http_status, const char *fmt, ...)
{
    char message [1024];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (message, sizeof message, fmt, ap);
    va_end (ap);
    if (job->prov)
        s_scrub (message, sizeof message, job->prov->api_key);
    s_scrub (message, sizeof message, job->access_token);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "code", sb_err_name (code));
    sb_enc_kstr (e, "message", message);
    sb_enc_kbool (e, "retryable", retryable);
    if (retry_after_ms >= 0)
        sb_enc_kuint (e, "retry_after_ms", (uint64_t) retry_after_ms);
    if (provider_code || http_status) {
        sb_enc_key (e, "detail");
        sb_enc_map_open (e);
        if (provider_code)
            sb_enc_kstr (e, "provider_code", provider_code);
        if (http_status)
            sb_enc_kint (e, "http_status", http_status);
        if (job->prov)
            sb_enc_kstr (e, "provider", job->prov->name);
        sb_enc_map_close (e);
    }
    sb_enc_map_close (e);
    self->errors_total++;
    s_send (self, job, "error", 0);
    sb_warn (ACTOR, "stream failed id=%s provider=%s code=%s provider_code=%s status=%ld",
             job->id, job->prov ? job->prov->name : "-", sb_err_name (code),
             provider_code ? provider_code : "-", http_status);
}

/* ------------------------------------------------------------------ */
/*  Jobs */

static void
s_job_destroy (job_t **job_p)
{
    job_t *job = *job_p;
    if (!job)
        return;
    if (job->easy) {
        if (job->in_multi)
            curl_multi_remove_handle (job->self->multi, job->easy);
        curl_easy_cleanup (job->easy);
    }
    curl_slist_free_all (job->headers);
    sb_sse_destroy (&job->sse);
    sb_mapper_destroy (&job->mapper);
    if (job->access_token) {
        explicit_bzero (job->access_token, strlen (job->access_token));
        free (job->access_token);
    }
    free (job->route);
    free (job->body);
    free (job->errbody);
    free (job->resp);
    free (job);
    *job_p = NULL;
}

/*  Ends a stream job: forgets it and frees it. */
static void
s_stream_end (self_t *self, job_t *job)
{
    void *h = zlistx_find (self->waiting, job);
    if (h)
        zlistx_delete (self->waiting, h);
    zhashx_delete (self->jobs, job->id);
    s_job_destroy (&job);
}

static job_t *
s_job_new (self_t *self, job_kind_t kind, const sb_msg_t *req)
{
    job_t *job = calloc (1, sizeof *job);
    if (!job)
        return NULL;
    job->kind = kind;
    job->self = self;
    if (req) {
        snprintf (job->id, sizeof job->id, "%s", req->h.id);
        job->req = req->h;
        job->route = malloc (req->route_len ? req->route_len : 1);
        if (!job->route) {
            free (job);
            return NULL;
        }
        memcpy (job->route, req->route, req->route_len);
        job->route_len = req->route_len;
        if (req->h.deadline) {
            int64_t left = (int64_t) req->h.deadline - (int64_t) sb_now_ms ();
            job->deadline = sb_mono_ms () + (left > 0 ? left : 0);
        }
    }
    return job;
}

/* ------------------------------------------------------------------ */
/*  curl callbacks */

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
            sb_enc_kuint (e, "input_tokens", (uint64_t) (c->usage.input_tokens > 0 ? c->usage.input_tokens : 0));
            sb_enc_kuint (e, "output_tokens", (uint64_t) (c->usage.output_tokens > 0 ? c->usage.output_tokens : 0));
            sb_enc_kuint (e, "cached_tokens", (uint64_t) (c->usage.cached_tokens > 0 ? c->usage.cached_tokens : 0));
            sb_enc_kuint (e, "reasoning_tokens", (uint64_t) (c->usage.reasoning_tokens > 0 ? c->usage.reasoning_tokens : 0));
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
    s_send (self, job, "llm.stream.chunk", ++job->seq);
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
    if (job->kind == JOB_STREAM && job->status >= 200 && job->status < 300) {
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
    /* the status line of each attempt comes first: reset per response */
    if (n > 5 && strncmp (ptr, "HTTP/", 5) == 0) {
        job->status_known = false;
        job->retry_after [0] = job->retry_after_ms [0] = 0;
    }
    return n;
}

static int
s_socket_cb (CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
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

static int
s_timer_cb (CURLM *multi, long timeout_ms, void *userp)
{
    self_t *self = userp;
    self->curl_timeout_at = timeout_ms < 0 ? -1 : sb_mono_ms () + timeout_ms;
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Codex tokens */

/*  Reads access_token and account_id from the token file (top level or
    under "tokens", as the Codex CLI writes it). */
static int
s_codex_load (job_t *job)
{
    json_t *root = json_load_file (job->prov->token_file, 0, NULL);
    if (!root)
        return -1;
    json_t *t = json_object_get (root, "tokens");
    if (!json_is_object (t))
        t = root;
    const char *access = json_string_value (json_object_get (t, "access_token"));
    const char *account = json_string_value (json_object_get (t, "account_id"));
    int rc = -1;
    if (access) {
        free (job->access_token);
        job->access_token = strdup (access);
        snprintf (job->account_id, sizeof job->account_id, "%s", account ? account : "");
        rc = 0;
    }
    json_decref (root);
    return rc;
}

/*  Writes the refreshed tokens back, atomically and private. */
static int
s_codex_store (const char *path, const char *access, const char *refresh)
{
    json_t *root = json_load_file (path, 0, NULL);
    if (!root)
        root = json_object ();
    json_t *t = json_object_get (root, "tokens");
    if (!json_is_object (t))
        t = root;
    json_object_set_new (t, "access_token", json_string (access));
    if (refresh)
        json_object_set_new (t, "refresh_token", json_string (refresh));
    char tmp [1100];
    snprintf (tmp, sizeof tmp, "%s.tmp.%d", path, (int) getpid ());
    int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = -1;
    if (fd >= 0) {
        char *text = json_dumps (root, JSON_INDENT (2));
        if (text && write (fd, text, strlen (text)) == (ssize_t) strlen (text) && fsync (fd) == 0)
            rc = 0;
        free (text);
        close (fd);
        if (rc == 0 && rename (tmp, path) != 0)
            rc = -1;
        if (rc != 0)
            unlink (tmp);
    }
    json_decref (root);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Attempts */

static void s_fail_stream (self_t *self, job_t *job, sb_err_t code, bool retryable,
                           const char *provider_code, long status, const char *message);

static void
s_common_opts (job_t *job, const char *url)
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

static int
s_attempt (self_t *self, job_t *job)
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
    job->sse = sb_sse_new (0);
    job->mapper = sb_mapper_new (p->kind);
    job->easy = curl_easy_init ();
    if (!job->sse || !job->mapper || !job->easy)
        return -1;
    char url [1200];
    snprintf (url, sizeof url, "%s%s", p->base_url, sb_provider_endpoint (p->kind));
    s_common_opts (job, url);
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
        if (!job->access_token && s_codex_load (job) != 0)
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

static void
s_fail_stream (self_t *self, job_t *job, sb_err_t code, bool retryable, const char *provider_code,
               long status, const char *message)
{
    s_send_error (self, job, code, retryable, -1, provider_code, status, "%s", message);
    s_stream_end (self, job);
}

/*  Schedules another attempt, or gives up. Never retries a stream whose
    output the requester has already seen: a silent retry would show it
    twice. */
static void
s_retry_or_fail (self_t *self, job_t *job, sb_err_t code, const char *provider_code, long status,
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
        s_fail_stream (self, job, code, true, provider_code, status, m);
        return;
    }
    s_fail_stream (self, job, code, retryable && job->attempts >= job->prov->max_attempts, provider_code,
                   status, message);
}

static void
s_start_refresh (self_t *self, job_t *stream)
{
    job_t *r = calloc (1, sizeof *r);
    json_t *tok = json_load_file (stream->prov->token_file, 0, NULL);
    json_t *t = tok ? json_object_get (tok, "tokens") : NULL;
    if (!json_is_object (t))
        t = tok;
    const char *refresh = t ? json_string_value (json_object_get (t, "refresh_token")) : NULL;
    if (!r || !refresh || !stream->prov->token_url [0]) {
        free (r);
        json_decref (tok);
        s_fail_stream (self, stream, SB_E_auth, false, "no_refresh_token", 401,
                       "the provider refused the token and it cannot be refreshed (no refresh_token or token_url)");
        return;
    }
    r->kind = JOB_REFRESH;
    r->self = self;
    r->parent = stream;
    r->prov = stream->prov;
    json_t *body = json_pack ("{s:s, s:s}", "grant_type", "refresh_token", "refresh_token", refresh);
    if (stream->prov->client_id [0])
        json_object_set_new (body, "client_id", json_string (stream->prov->client_id));
    r->body = json_dumps (body, JSON_COMPACT);
    json_decref (body);
    json_decref (tok);
    r->easy = curl_easy_init ();
    s_common_opts (r, stream->prov->token_url);
    curl_easy_setopt (r->easy, CURLOPT_POSTFIELDS, r->body);
    r->headers = curl_slist_append (NULL, "Content-Type: application/json");
    curl_easy_setopt (r->easy, CURLOPT_HTTPHEADER, r->headers);
    stream->refreshed = true;
    if (curl_multi_add_handle (self->multi, r->easy) == CURLM_OK)
        r->in_multi = true;
    sb_info (ACTOR, "refreshing the codex token id=%s provider=%s", stream->id, stream->prov->name);
}

static void
s_refresh_done (self_t *self, job_t *r, CURLcode res)
{
    job_t *stream = r->parent;
    long status = 0;
    curl_easy_getinfo (r->easy, CURLINFO_RESPONSE_CODE, &status);
    json_t *resp = res == CURLE_OK && status == 200 && r->resp ? json_loads (r->resp, 0, NULL) : NULL;
    const char *access = resp ? json_string_value (json_object_get (resp, "access_token")) : NULL;
    const char *refresh = resp ? json_string_value (json_object_get (resp, "refresh_token")) : NULL;
    if (!zhashx_lookup (self->jobs, stream->id)) {
        /* the stream was cancelled meanwhile */
    }
    else
    if (!access || s_codex_store (stream->prov->token_file, access, refresh) != 0) {
        s_fail_stream (self, stream, SB_E_auth, false, "refresh_failed", status,
                       "the token refresh failed; sign in again");
    }
    else {
        free (stream->access_token);
        stream->access_token = NULL;
        if (s_attempt (self, stream) != 0)
            s_fail_stream (self, stream, SB_E_internal, true, NULL, 0, "cannot start the request");
    }
    json_decref (resp);
    s_job_destroy (&r);
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
                sb_enc_kuint (e, "input_tokens", (uint64_t) (u.input_tokens > 0 ? u.input_tokens : 0));
                sb_enc_kuint (e, "output_tokens", (uint64_t) (u.output_tokens > 0 ? u.output_tokens : 0));
                sb_enc_kuint (e, "cached_tokens", (uint64_t) (u.cached_tokens > 0 ? u.cached_tokens : 0));
                sb_enc_kuint (e, "reasoning_tokens", (uint64_t) (u.reasoning_tokens > 0 ? u.reasoning_tokens : 0));
                sb_enc_map_close (e);
            }
            sb_enc_kstr (e, "provider", job->prov->name);
            sb_enc_kstr (e, "model", job->model);
            sb_enc_kuint (e, "attempts", (uint64_t) job->attempts);
            sb_enc_map_close (e);
            s_send (self, job, "llm.stream.ok", 0);
            sb_debug (ACTOR, "stream done id=%s stop=%s chunks=%llu", job->id, stop,
                      (unsigned long long) job->content_chunks);
            s_stream_end (self, job);
            return;
        }
        sb_err_t code = strcmp (perr.code, "incomplete_stream") == 0 ? SB_E_incomplete_stream
                      : strcmp (perr.code, "too_large") == 0 ? SB_E_too_large : SB_E_provider;
        char m [700];
        snprintf (m, sizeof m, "%s: %s", perr.code, perr.message);
        s_retry_or_fail (self, job, code, perr.code, 0, perr.retryable, perr.retry_after_ms, m);
        return;
    }
    if (res == CURLE_OK || (res == CURLE_WRITE_ERROR && status >= 300)) {
        if ((status == 401 || status == 403) && job->prov->kind == SB_PROVIDER_CODEX && !job->refreshed) {
            s_start_refresh (self, job);
            return;
        }
        sb_provider_error_t perr;
        sb_provider_classify_http (job->prov->kind, status, job->errbody, job->errlen, &perr);
        int64_t hint = sb_provider_retry_after (job->retry_after_ms [0] ? job->retry_after_ms : NULL,
                                                job->retry_after [0] ? job->retry_after : NULL, time (NULL));
        if (hint < 0)
            hint = perr.retry_after_ms;
        sb_err_t code = status == 401 || status == 403 ? SB_E_auth : SB_E_provider;
        char m [700];
        snprintf (m, sizeof m, "HTTP %ld %s: %s", status, perr.code, perr.message);
        s_retry_or_fail (self, job, code, perr.code, status, perr.retryable, hint, m);
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
        snprintf (m, sizeof m, "cannot reach the provider at %s: %s", job->prov->base_url,
                  curl_easy_strerror (res));
    }
    s_retry_or_fail (self, job, code, curl_easy_strerror (res), 0, retryable, -1, m);
}

static void
s_models_done (self_t *self, job_t *job, CURLcode res)
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
    sb_enc_map_close (e);
    s_send (self, job, "llm.models.ok", 0);
    json_decref (resp);
    s_job_destroy (&job);
}

static void
s_check_multi (self_t *self)
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
            s_refresh_done (self, job, res);
        else
            s_models_done (self, job, res);
    }
}

/* ------------------------------------------------------------------ */
/*  Requests */

static int
s_build_request (self_t *self, const sb_val_t *body, job_t *job, char *err, size_t errlen)
{
    const sb_val_t *msgs = sb_get_array (body, "messages");
    const sb_val_t *tools = sb_get_array (body, "tools");
    size_t nm = msgs ? msgs->len : 0, nt = tools ? tools->len : 0;
    sb_llm_message_t *m = calloc (nm ? nm : 1, sizeof *m);
    sb_llm_tool_t *t = calloc (nt ? nt : 1, sizeof *t);
    size_t ncalls = 0;
    for (size_t k = 0; k < nm; k++) {
        const sb_val_t *calls = sb_get_array (sb_array_at (msgs, (uint32_t) k), "tool_calls");
        ncalls += calls ? calls->len : 0;
    }
    sb_llm_tool_call_t *calls_mem = calloc (ncalls ? ncalls : 1, sizeof *calls_mem);
    int rc = -1;
    if (!m || !t || !calls_mem) {
        snprintf (err, errlen, "out of memory");
        goto done;
    }
    size_t used = 0;
    for (size_t k = 0; k < nm; k++) {
        const sb_val_t *v = sb_array_at (msgs, (uint32_t) k);
        const char *role = sb_get_str (v, "role");
        if (strcmp (role, "user") == 0) m [k].role = SB_LLM_ROLE_USER;
        else if (strcmp (role, "assistant") == 0) m [k].role = SB_LLM_ROLE_ASSISTANT;
        else if (strcmp (role, "tool") == 0) m [k].role = SB_LLM_ROLE_TOOL;
        else {
            snprintf (err, errlen, "messages[%zu].role must be user, assistant or tool", k);
            goto done;
        }
        m [k].content = sb_get_str (v, "content");
        m [k].call_id = sb_get_str (v, "call_id");
        m [k].reasoning_state = sb_get_str (v, "reasoning_state");
        const sb_val_t *calls = sb_get_array (v, "tool_calls");
        if (calls && calls->len) {
            m [k].tool_calls = &calls_mem [used];
            m [k].tool_call_count = calls->len;
            for (uint32_t c = 0; c < calls->len; c++, used++) {
                const sb_val_t *cv = sb_array_at (calls, c);
                calls_mem [used].call_id = sb_get_str (cv, "call_id");
                calls_mem [used].name = sb_get_str (cv, "name");
                calls_mem [used].arguments = sb_get_str (cv, "arguments");
            }
        }
    }
    for (size_t k = 0; k < nt; k++) {
        const sb_val_t *v = sb_array_at (tools, (uint32_t) k);
        t [k].name = sb_get_str (v, "name");
        t [k].description = sb_get_str (v, "description");
        t [k].parameters = sb_get_str (v, "parameters");
    }
    sb_llm_request_t req = {
        .model = job->model,
        .instructions = sb_get_str (body, "instructions"),
        .messages = m, .message_count = nm,
        .tools = t, .tool_count = nt,
    };
    const sb_val_t *opt = sb_get_map (body, "options");
    if (opt) {
        req.options.reasoning_effort = sb_get_str (opt, "reasoning_effort");
        if (sb_get (opt, "max_output_tokens")) {
            req.options.has_max_output_tokens = true;
            req.options.max_output_tokens = (int64_t) sb_get_uint (opt, "max_output_tokens", 0);
        }
        if (sb_get (opt, "temperature")) {
            req.options.has_temperature = true;
            req.options.temperature = sb_get_float (opt, "temperature", 1.0);
        }
    }
    job->body = sb_provider_build_body (job->prov->kind, &req, err, errlen);
    rc = job->body ? 0 : -1;
done:
    free (m);
    free (t);
    free (calls_mem);
    return rc;
}

static void
s_handle_stream (self_t *self, sb_msg_t *msg)
{
    const char *pname = sb_get_str (msg->body, "provider");
    sb_llm_provider_t *prov = sb_llm_config_find (&self->cfg, pname);
    if (!prov) {
        sb_bus_error (self->bus, msg, SB_E_not_found, "no provider named '%s' is configured", pname ? pname : "");
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
    job_t *job = s_job_new (self, JOB_STREAM, msg);
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
        s_job_destroy (&job);
        return;
    }
    if (s_build_request (self, msg->body, job, err, sizeof err)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "%s", err);
        s_job_destroy (&job);
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
    s_send (self, job, "llm.stream.chunk", ++job->seq);
    int rc = s_attempt (self, job);
    if (rc == -2)
        s_fail_stream (self, job, SB_E_auth, false, NULL, 0, "cannot read the codex token file");
    else
    if (rc != 0)
        s_fail_stream (self, job, SB_E_internal, true, NULL, 0, "cannot start the HTTP request");
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
        s_send (self, job, "llm.stream.ok", 0);
        sb_info (ACTOR, "stream cancelled id=%s", id);
        s_stream_end (self, job);
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
        sb_bus_error (self->bus, msg, SB_E_not_found, "no provider named '%s' is configured", pname ? pname : "");
        return;
    }
    job_t *job = s_job_new (self, JOB_MODELS, msg);
    if (!job)
        return;
    job->prov = prov;
    job->easy = curl_easy_init ();
    char url [1200];
    snprintf (url, sizeof url, "%s/models", prov->base_url);
    s_common_opts (job, url);
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
        s_models_done (self, job, CURLE_FAILED_INIT);   /* configured list */
    else
        job->in_multi = true;
}

static void
s_handle_bus (self_t *self)
{
    sb_msg_t *msg;
    while ((msg = sb_bus_recv (self->bus, 0))) {
        if (msg->route) {
            if (strcmp (msg->h.type, "llm.stream") == 0)
                s_handle_stream (self, msg);
            else
            if (strcmp (msg->h.type, "llm.cancel") == 0)
                s_handle_cancel (self, msg);
            else
            if (strcmp (msg->h.type, "llm.models") == 0)
                s_handle_models (self, msg);
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
                s_send_error (self, job, SB_E_unavailable, true, -1, NULL, 0, "the llm actor is shutting down");
                s_stream_end (self, job);
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
        sb_error (ACTOR, "bad provider configuration: %s", err);
        s_self_destroy (&self);
        return NULL;
    }
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
        /* name what is configured, never the key itself */
        sb_info (ACTOR, "provider name=%s kind=%s%s url=%s model=%s key=%s", p->name,
                 sb_provider_kind_name (p->kind), p->demo ? " (demo)" : "", p->base_url,
                 p->model [0] ? p->model : "-", p->api_key ? "set" : "none");
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
    curl_multi_setopt (self->multi, CURLMOPT_SOCKETFUNCTION, s_socket_cb);
    curl_multi_setopt (self->multi, CURLMOPT_SOCKETDATA, self);
    curl_multi_setopt (self->multi, CURLMOPT_TIMERFUNCTION, s_timer_cb);
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
            if (s_attempt (self, job) != 0)
                s_fail_stream (self, job, SB_E_internal, true, NULL, 0, "cannot start the HTTP request");
        }
        job = next;
    }
    /* requests whose deadline passed */
    zlistx_t *keys = zhashx_keys (self->jobs);
    for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
        job_t *j = zhashx_lookup (self->jobs, k);
        if (j && j->deadline && j->deadline <= now)
            s_fail_stream (self, j, SB_E_timeout, true, NULL, 0, "the request's deadline passed");
        else
        /* The idle timeout, between bytes. curl's low-speed check averages
           over several seconds, so a timeout of 1 s would fire after ~7. */
        if (j && j->in_multi && now - j->last_byte_ms >= (int64_t) j->prov->idle_timeout_s * 1000) {
            curl_multi_remove_handle (self->multi, j->easy);
            j->in_multi = false;
            char m [200];
            snprintf (m, sizeof m, "the provider sent nothing for %d s (idle timeout)",
                      j->prov->idle_timeout_s);
            s_retry_or_fail (self, j, SB_E_timeout, "idle_timeout", 0, true, -1, m);
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
        s_check_multi (self);
        s_handle_bus (self);
        s_run_timers (self);
        s_check_multi (self);
    }
    free (items);
    s_self_destroy (&self);
}

/*  actors/llm/job.c — a job's life in the llm actor: creation, the replies
    it sends, the error that ends a stream, and its end. */
#include "actors/llm/llm_impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/*  Replies */

void
sb_llm_send (self_t *self, job_t *job, const char *type, uint64_t seq)
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

/*  Writes `provider "NAME" (URL, model M): ` into buf: the person who reads
    a run's failure must be able to tell which of several providers failed
    and with which model. The URL's credentials are left out, as the key
    is (sb_log_redact_url). Returns the length written. */
static size_t
s_origin (const job_t *job, char *buf, size_t size)
{
    /* a long URL is cut so that the error itself still fits */
    char url [301];
    sb_log_redact_url (job->prov->base_url, url, sizeof url);
    int n = snprintf (buf, size, "provider \"%s\" (%s, model %s): ", job->prov->name,
                      url, job->model [0] ? job->model : "-");
    return n < 0 ? 0 : (size_t) n < size ? (size_t) n : size - 1;
}

void
sb_llm_send_error (self_t *self, job_t *job, sb_err_t code, bool retryable, int64_t retry_after_ms,
                   const char *provider_code, long http_status, const char *fmt, ...)
{
    char message [1536];
    size_t head = job->prov ? s_origin (job, message, sizeof message) : 0;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (message + head, sizeof message - head, fmt, ap);
    va_end (ap);
    if (job->prov)
        s_scrub (message, sizeof message, job->prov->api_key);
    s_scrub (message, sizeof message, job->access_token);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_error_open (e, code, message, retryable);
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
    sb_llm_send (self, job, "error", 0);
    sb_warn (ACTOR, "stream failed id=%s provider=%s code=%s provider_code=%s status=%ld",
             job->id, job->prov ? job->prov->name : "-", sb_err_name (code),
             provider_code ? provider_code : "-", http_status);
}

/* ------------------------------------------------------------------ */
/*  Jobs */

void
sb_llm_job_destroy (job_t **job_p)
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
void
sb_llm_stream_end (self_t *self, job_t *job)
{
    void *h = zlistx_find (self->waiting, job);
    if (h)
        zlistx_delete (self->waiting, h);
    zhashx_delete (self->jobs, job->id);
    sb_llm_job_destroy (&job);
}

job_t *
sb_llm_job_new (self_t *self, job_kind_t kind, const sb_msg_t *req)
{
    job_t *job = calloc (1, sizeof *job);
    if (!job)
        return NULL;
    job->kind = kind;
    job->self = self;
    sb_limits_seen_clear (&job->rl);
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


void
sb_llm_fail_stream (self_t *self, job_t *job, sb_err_t code, bool retryable, const char *provider_code,
                    long status, const char *message)
{
    sb_llm_send_error (self, job, code, retryable, -1, provider_code, status, "%s", message);
    sb_llm_stream_end (self, job);
}

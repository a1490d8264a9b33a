/*  actors/llm/llm_impl.h — what the llm actor's files share.

    Not a public header: only actors/llm.c and the files below include it.
    The actor is split along its seams:
      llm.c             the actor: its loop, its dispatch table, the
                        request handlers (llm.stream, llm.cancel,
                        llm.models, llm.info)
      llm/job.c         a job's life: creation, replies and errors, its end
      llm/transfer.c    curl: callbacks, one HTTP attempt, retries, and what
                        a finished transfer means
      llm/codex.c       Codex tokens: reading, refreshing, writing back
      llm/request.c     an llm.stream body turned into a provider request
    Every function here runs on the actor's thread. */
#ifndef SB_LLM_IMPL_H
#define SB_LLM_IMPL_H

#include "actors/actor.h"
#include "actors/llm/config.h"
#include "actors/llm/demo.h"
#include "actors/llm/provider.h"
#include "actors/llm/sse.h"
#include "bus/client.h"
#include "common/log.h"

#include <curl/curl.h>
#include <jansson.h>

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
    sb_limits_seen_t rl;          /* rate-limit headers of the last response */
    long status;
    bool status_known;
    bool json_body;             /* Content-Type application/json: an answer, not an event stream */
    bool whole;                 /* a 2xx stream answered with one JSON document (kept in errbody) */
    bool seq_body;              /* the body has started (the JSON check looks at its first bytes) */
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

/*  Jobs and replies (llm/job.c) */

/*  Sends the encoder's contents to the job's requester as `type`. */
void sb_llm_send (self_t *self, job_t *job, const char *type, uint64_t seq);
/*  Sends an error reply; the message never holds the provider's key or
    the job's token. */
void sb_llm_encode_tokens (const sb_llm_usage_t *u, sb_enc_t *e);
void sb_llm_encode_usage (job_t *job, const sb_llm_usage_t *u, sb_enc_t *e);
void sb_llm_send_error (self_t *self, job_t *job, sb_err_t code, bool retryable, int64_t retry_after_ms,
                        const char *provider_code, long http_status, const char *fmt, ...)
    __attribute__ ((format (printf, 8, 9)));
/*  A new job for `req` (NULL for a job of the actor's own); NULL when out
    of memory. */
job_t *sb_llm_job_new (self_t *self, job_kind_t kind, const sb_msg_t *req);
void sb_llm_job_destroy (job_t **job_p);
/*  Ends a stream job: forgets it and frees it. */
void sb_llm_stream_end (self_t *self, job_t *job);
/*  Answers a stream with an error and ends it. */
void sb_llm_fail_stream (self_t *self, job_t *job, sb_err_t code, bool retryable,
                         const char *provider_code, long status, const char *message);

/*  Transfers (llm/transfer.c) */

int sb_llm_socket_cb (CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp);
int sb_llm_timer_cb (CURLM *multi, long timeout_ms, void *userp);
/*  The options every transfer of a job shares: URL, callbacks, timeouts. */
void sb_llm_curl_opts (job_t *job, const char *url);
/*  Starts one HTTP attempt of a stream: 0, -1 when it cannot start, -2
    when the codex token file cannot be read. */
int sb_llm_attempt (self_t *self, job_t *job);
/*  Schedules another attempt, or gives up. */
void sb_llm_retry_or_fail (self_t *self, job_t *job, sb_err_t code, const char *provider_code, long status,
                           bool retryable, int64_t hint_ms, const char *message);
/*  Answers an llm.models job from the response or from the configuration,
    and frees the job. */
void sb_llm_models_done (self_t *self, job_t *job, CURLcode res);
/*  llm.models' `limits` field: one per model id it lists (data: the
    provider's json list, or NULL for the configured one). */
void sb_llm_encode_limits (self_t *self, const sb_llm_provider_t *p, json_t *data, sb_enc_t *e);
/*  Acts on every transfer curl has finished. */
void sb_llm_check_multi (self_t *self);

/*  Codex tokens (llm/codex.c) */

int sb_llm_codex_load (job_t *job);
/*  Starts the one token refresh of a stream the provider refused. */
void sb_llm_codex_refresh (self_t *self, job_t *stream);
void sb_llm_codex_refresh_done (self_t *self, job_t *r, CURLcode res);

/*  Requests (llm/request.c) */

/*  Builds the HTTP body of an llm.stream into job->body: 0, or -1 with
    err set. */
int sb_llm_build_request (self_t *self, const sb_val_t *body, job_t *job, char *err, size_t errlen);

#endif

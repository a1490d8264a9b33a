/*  actors/exec/mcp_http.c — the Streamable HTTP transport of the MCP
    client (actors/exec/mcp_impl.h, docs/mcp.md).

    Each JSON-RPC message is one POST; the server answers with one JSON
    document or an SSE stream, in which it may also send requests of its
    own (a ping) before its answer. Those are answered by a POST of their
    own on a second handle, while the exchange's stream is still open.

    A stream that ends before our answer came is resumed: if the server
    gave its events ids, a GET with Last-Event-ID reopens it after the
    server's `retry` delay, a bounded number of times (S_SSE_* in
    mcp_impl.h), and the answer may come on the new stream.

    After initialize, when the client has a capability the server asks
    through it (elicitation), the standalone GET stream is opened too: the
    server's own requests come there (the SDKs send elicitation/create
    there). One multi handle drives it together with each exchange's
    request, so it is read whenever we wait for an answer.
*/
#include "actors/exec/mcp_impl.h"
#include "common/log.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ACTOR "exec"

typedef struct {
    s_server_t *srv;
    int64_t deadline;
    int cancel_fd;
    bool sse;
    bool content_type_seen;
    size_t bytes;
    sb_mcp_lines_t body;        //  a JSON body is one "line"; SSE is many
    sb_mcp_sse_t stream;        //  kept across its resumptions
} s_http_t;

//  Streamable HTTP answers with SSE: each `data:` line of an event is one
//  JSON-RPC message in practice (servers do not split them).
static void
s_on_sse_line (const char *line, size_t len, void *arg)
{
    s_http_t *h = arg;
    size_t n;
    const char *data = sb_mcp_sse_line (&h->stream, line, len, &n);
    if (data)
        sb_mcp_on_line (data, n, h->srv);
}


static size_t
s_discard (char *b, size_t size, size_t n, void *arg)
{
    return size * n;
}

//  The request headers of every POST to the server: ours, the session's
//  and the configured ones. Returns the list (the caller frees it).
//  A GET (get true) asks for a stream, resumed from last_id when it is
//  not empty.
static struct curl_slist *
s_http_headers (s_server_t *srv, bool get, const char *last_id, int64_t deadline)
{
    struct curl_slist *hl = NULL;
    if (get) {
        hl = curl_slist_append (hl, "Accept: text/event-stream");
        if (last_id && last_id [0]) {
            char h [SB_MCP_SSE_ID_MAX + 32];
            snprintf (h, sizeof h, "Last-Event-ID: %s", last_id);
            hl = curl_slist_append (hl, h);
        }
    }
    else {
        hl = curl_slist_append (hl, "Content-Type: application/json");
        hl = curl_slist_append (hl, "Accept: application/json, text/event-stream");
    }
    hl = curl_slist_append (hl, "MCP-Protocol-Version: " S_PROTOCOL);
    if (srv->http_session [0]) {
        char sess [300];
        snprintf (sess, sizeof sess, "Mcp-Session-Id: %s", srv->http_session);
        hl = curl_slist_append (hl, sess);
    }
    for (size_t k = 0; srv->conf->headers && srv->conf->headers [k]; k++)
        hl = curl_slist_append (hl, srv->conf->headers [k]);
    //  The OAuth token, when the server asked for one (refreshed first
    //  when it is about to expire).
    const char *auth = sb_mcp_oauth_header (srv->oauth, deadline);
    if (auth)
        hl = curl_slist_append (hl, auth);
    return hl;
}

static size_t
s_http_header (char *b, size_t size, size_t n, void *arg)
{
    s_http_t *h = arg;
    size_t len = size * n;
    sb_mcp_header_value (b, len, "mcp-session-id", h->srv->http_session, sizeof h->srv->http_session);
    //  Cut when longer: only its parameters are read.
    if (!sb_mcp_header_value (b, len, "www-authenticate", h->srv->www_auth, sizeof h->srv->www_auth)
    &&  len > 17 && strncasecmp (b, "www-authenticate:", 17) == 0)
        snprintf (h->srv->www_auth, sizeof h->srv->www_auth, "%.*s", (int) (sizeof h->srv->www_auth - 1), b + 17);
    if (len > 13 && strncasecmp (b, "content-type:", 13) == 0) {
        h->content_type_seen = true;
        h->sse = strstr (b, "text/event-stream") != NULL;
    }
    return len;
}

static size_t
s_http_write (char *b, size_t size, size_t n, void *arg)
{
    s_http_t *h = arg;
    size_t len = size * n;
    h->bytes += len;
    if (h->sse)
        sb_mcp_lines_feed (&h->body, b, len, s_on_sse_line, h);
    else {
        //  One JSON document: held whole, within the line bound.
        if (h->body.len + len > h->body.max)
            return 0;
        char *nb = realloc (h->body.buf, h->body.len + len + 1);
        if (!nb)
            return 0;
        h->body.buf = nb;
        memcpy (nb + h->body.len, b, len);
        h->body.len += len;
        nb [h->body.len] = 0;
    }
    //  Once the answer is in, the rest of an SSE stream is not ours.
    return h->srv->resp ? 0 : len;
}

static int
s_http_progress (void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    s_http_t *h = arg;
    return sb_mcp_cancel_ready (h->cancel_fd) || sb_mono_ms () > sb_mcp_deadline (h->srv, h->deadline);
}

/* ------------------------------------------------------------------ */
/*  The standalone stream */

struct s_standalone {
    CURL *curl;
    struct curl_slist *headers;
    bool attached;              //  in srv->multi
    bool sse;
    bool answered;              //  its headers are in: the server has it
    bool gone;                  //  not offered: never reopened
    int idle_opens;             //  reopened in a row without an event
    bool evented;               //  this connection brought an event
    int64_t reopen_at;          //  mono ms
    sb_mcp_lines_t lines;
    sb_mcp_sse_t stream;
    s_server_t *srv;
};

static void
s_on_standalone_line (const char *line, size_t len, void *arg)
{
    struct s_standalone *g = arg;
    size_t n;
    const char *data = sb_mcp_sse_line (&g->stream, line, len, &n);
    if (data) {
        g->evented = true;
        sb_mcp_on_line (data, n, g->srv);
    }
}

static size_t
s_standalone_header (char *b, size_t size, size_t n, void *arg)
{
    struct s_standalone *g = arg;
    size_t len = size * n;
    if (len > 13 && strncasecmp (b, "content-type:", 13) == 0)
        g->sse = strstr (b, "text/event-stream") != NULL;
    else
    if (len <= 2 && (b [0] == '\r' || b [0] == '\n'))
        g->answered = true;
    return len;
}

static size_t
s_standalone_write (char *b, size_t size, size_t n, void *arg)
{
    struct s_standalone *g = arg;
    if (!g->sse)
        return 0;               //  not a stream: not ours to read
    sb_mcp_lines_feed (&g->lines, b, size * n, s_on_standalone_line, g);
    return size * n;
}

//  (Re)opens the stream when it is due: added to the multi handle, it
//  connects at the next exchange.
static void
s_standalone_due (s_server_t *srv)
{
    struct s_standalone *g = srv->get;
    if (!g || g->gone || g->attached || sb_mono_ms () < g->reopen_at)
        return;
    if (!g->curl && !(g->curl = curl_easy_init ())) {
        g->gone = true;
        return;
    }
    CURL *c = g->curl;
    curl_easy_reset (c);
    curl_slist_free_all (g->headers);
    g->headers = s_http_headers (srv, true, g->stream.last_id, sb_mono_ms () + 5000);
    g->sse = g->evented = g->answered = false;
    sb_mcp_lines_clear (&g->lines);
    curl_easy_setopt (c, CURLOPT_URL, srv->conf->url);
    curl_easy_setopt (c, CURLOPT_HTTPHEADER, g->headers);
    curl_easy_setopt (c, CURLOPT_HEADERFUNCTION, s_standalone_header);
    curl_easy_setopt (c, CURLOPT_HEADERDATA, g);
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, s_standalone_write);
    curl_easy_setopt (c, CURLOPT_WRITEDATA, g);
    sb_mcp_curl_bounds (c, 0L);
    //  A stream has no end to wait for: no overall timeout.
    curl_easy_setopt (c, CURLOPT_TIMEOUT_MS, 0L);
    if (curl_multi_add_handle (srv->multi, c) == CURLM_OK)
        g->attached = true;
    else
        g->gone = true;
}

//  The stream ended: reopened after the server's retry if it was one,
//  never again if the server does not offer it or it keeps ending with
//  nothing in it.
static void
s_standalone_ended (s_server_t *srv, CURLcode rc)
{
    struct s_standalone *g = srv->get;
    long status = 0;
    curl_easy_getinfo (g->curl, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle (srv->multi, g->curl);
    g->attached = false;
    g->idle_opens = g->evented ? 0 : g->idle_opens + 1;
    if (status != 200 || !g->sse || g->idle_opens > S_SSE_RESUMES) {
        g->gone = true;
        sb_info (ACTOR, "MCP server %s: no standalone stream (HTTP %ld%s)", srv->conf->name, status,
                 g->sse ? ", it keeps ending" : "");
        return;
    }
    g->reopen_at = sb_mono_ms () + (g->stream.retry_ms >= 0 ? g->stream.retry_ms : S_SSE_RETRY_DEFAULT_MS);
    (void) rc;
}

void
sb_mcp_http_open_stream (s_server_t *srv, int wait_ms)
{
    if (srv->get || !srv->conf->url)
        return;
    struct s_standalone *g = calloc (1, sizeof *g);
    if (!g)
        return;
    g->srv = srv;
    sb_mcp_sse_init (&g->stream);
    sb_mcp_lines_init (&g->lines, SB_MCP_LINE_MAX);
    srv->get = g;
    //  Driven until the server has answered it (or refused it), so that
    //  a request it sends during our next call finds the stream open;
    //  left to the exchanges after `wait_ms` (a server that holds the
    //  headers back).
    if (!srv->multi && !(srv->multi = curl_multi_init ()))
        return;
    s_standalone_due (srv);
    int64_t deadline = sb_mono_ms () + wait_ms;
    while (srv->get && g->attached && !g->answered && sb_mono_ms () < deadline) {
        int running = 0;
        if (curl_multi_perform (srv->multi, &running) != CURLM_OK)
            break;
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read (srv->multi, &left)) != NULL)
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == g->curl)
                s_standalone_ended (srv, msg->data.result);
        if (g->attached && !g->answered)
            curl_multi_poll (srv->multi, NULL, 0, 50, NULL);
    }
}

static void
s_standalone_close (s_server_t *srv)
{
    struct s_standalone *g = srv->get;
    if (!g)
        return;
    if (g->attached)
        curl_multi_remove_handle (srv->multi, g->curl);
    if (g->curl)
        curl_easy_cleanup (g->curl);
    curl_slist_free_all (g->headers);
    sb_mcp_lines_clear (&g->lines);
    free (g);
    srv->get = NULL;
}

//  Performs `c` (an exchange's request) on the server's multi handle,
//  with the standalone stream when it is open: returns c's curl code.
//  c's progress callback ends it at the deadline or on cancel; the poll
//  wakes on cancel_fd too.
static CURLcode
s_drive (s_server_t *srv, CURL *c, int cancel_fd)
{
    if (!srv->multi && !(srv->multi = curl_multi_init ()))
        return CURLE_OUT_OF_MEMORY;
    if (curl_multi_add_handle (srv->multi, c) != CURLM_OK)
        return CURLE_FAILED_INIT;
    s_standalone_due (srv);
    CURLcode rc = CURLE_OK;
    for (bool done = false; !done; ) {
        int running = 0;
        if (curl_multi_perform (srv->multi, &running) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read (srv->multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            if (msg->easy_handle == c) {
                rc = msg->data.result;
                done = true;
            }
            else
            if (srv->get && msg->easy_handle == srv->get->curl)
                s_standalone_ended (srv, msg->data.result);
        }
        //  The answer may come on the standalone stream (a server may
        //  send it there): the exchange is over, whatever its own stream.
        if (done || srv->resp)
            break;
        s_standalone_due (srv);
        struct curl_waitfd w = { .fd = cancel_fd, .events = CURL_WAIT_POLLIN };
        curl_multi_poll (srv->multi, &w, cancel_fd > 0 ? 1 : 0, 100, NULL);
    }
    curl_multi_remove_handle (srv->multi, c);
    return rc;
}

//  One request of an exchange: the POST of `data`, or (data NULL) the GET
//  that resumes its stream from h->stream.last_id. Returns the curl code; the
//  HTTP status into *status.
static CURLcode
s_http_perform (s_server_t *srv, s_http_t *h, const char *data, size_t len, long *status)
{
    CURL *c = srv->curl;
    curl_easy_reset (c);
    struct curl_slist *hl = s_http_headers (srv, !data, h->stream.last_id, sb_mcp_deadline (srv, h->deadline));
    h->sse = h->content_type_seen = false;
    srv->www_auth [0] = 0;
    int64_t left = sb_mcp_deadline (srv, h->deadline) - sb_mono_ms ();
    curl_easy_setopt (c, CURLOPT_URL, srv->conf->url);
    curl_easy_setopt (c, CURLOPT_HTTPHEADER, hl);
    if (data) {
        curl_easy_setopt (c, CURLOPT_POSTFIELDS, data);
        curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE, (long) len);
    }
    curl_easy_setopt (c, CURLOPT_HEADERFUNCTION, s_http_header);
    curl_easy_setopt (c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, s_http_write);
    curl_easy_setopt (c, CURLOPT_WRITEDATA, h);
    curl_easy_setopt (c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt (c, CURLOPT_XFERINFOFUNCTION, s_http_progress);
    curl_easy_setopt (c, CURLOPT_XFERINFODATA, h);
    sb_mcp_curl_bounds (c, (long) left);
    //  The deadline is the progress callback's: it moves on while a person
    //  answers the server's question (held_ms), which curl's own would not.
    curl_easy_setopt (c, CURLOPT_TIMEOUT_MS, 0L);
    CURLcode rc = s_drive (srv, c, h->cancel_fd);
    curl_slist_free_all (hl);
    *status = 0;
    curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, status);
    return rc;
}

//  Whether the stream that just ended may be resumed: it was SSE, gave an
//  event id, had not brought our answer, resumptions are left. Waits the
//  server's retry first (watching the deadline and cancel_fd): false when
//  either comes first.
static bool
s_http_resumable (s_http_t *h, int resumes)
{
    if (h->srv->resp || !h->sse || !h->stream.last_id [0] || resumes >= S_SSE_RESUMES)
        return false;
    int64_t until = sb_mono_ms () + (h->stream.retry_ms >= 0 ? h->stream.retry_ms : S_SSE_RETRY_DEFAULT_MS);
    if (until >= sb_mcp_deadline (h->srv, h->deadline))
        return false;
    for (int64_t now; (now = sb_mono_ms ()) < until; ) {
        struct pollfd p = { .fd = h->cancel_fd, .events = POLLIN };
        if (poll (&p, h->cancel_fd > 0 ? 1 : 0, (int) (until - now)) > 0)
            return false;
    }
    //  A partial line of the old stream is not the start of the new one.
    sb_mcp_lines_clear (&h->body);
    //  The id is the server's bytes: not logged.
    sb_info (ACTOR, "MCP server %s: resuming its stream (resumption %d)", h->srv->conf->name, resumes + 1);
    return true;
}

//  One exchange: the POST, and the resumptions of its stream. Returns
//  S_OK, S_AUTH (the status into *status, the request never ran), or an
//  error with srv->error set.
static int
s_http_exchange (s_server_t *srv, const char *data, size_t len, int64_t deadline, int cancel_fd, long *status_p)
{
    s_http_t h = { .srv = srv, .deadline = deadline, .cancel_fd = cancel_fd };
    sb_mcp_sse_init (&h.stream);
    sb_mcp_lines_init (&h.body, SB_MCP_LINE_MAX);
    long status = 0;
    CURLcode rc = s_http_perform (srv, &h, data, len, &status);
    *status_p = status;
    //  A stream cut (the connection closed mid-body) is as resumable as
    //  one the server ended.
    int resumes = 0;
    for (; (rc == CURLE_OK || rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR) && status < 300
           && s_http_resumable (&h, resumes); resumes++)
        rc = s_http_perform (srv, &h, NULL, 0, &status);
    int out = S_OK;
    if (srv->resp)
        out = S_OK;
    else
    //  The POST was taken, so the request may have run: a refused
    //  resumption (even a 404 or 401) is never a request to send again.
    if (resumes && rc == CURLE_OK && status >= 300) {
        snprintf (srv->error, sizeof srv->error, "HTTP %ld on resuming the stream (resumption %d)", status,
                  resumes);
        out = S_DEAD;
    }
    else
    if (rc == CURLE_ABORTED_BY_CALLBACK)
        out = sb_mcp_cancel_ready (cancel_fd) ? S_CANCELLED : S_TIMEOUT;
    else
    if (rc == CURLE_OPERATION_TIMEDOUT)
        out = S_TIMEOUT;
    else
    if (rc != CURLE_OK) {
        snprintf (srv->error, sizeof srv->error, "HTTP: %s", curl_easy_strerror (rc));
        out = S_DEAD;
    }
    else
    if (status == 404 && srv->http_session [0]) {
        snprintf (srv->error, sizeof srv->error, "HTTP 404: the server forgot our session");
        out = S_FORGOTTEN;
    }
    else
    if (status == 401 || status == 403) {
        snprintf (srv->error, sizeof srv->error, "HTTP %ld: this server needs authorization", status);
        out = S_AUTH;
    }
    else
    if (status >= 400) {
        snprintf (srv->error, sizeof srv->error, "HTTP %ld", status);
        out = S_DEAD;
    }
    else
    if (!h.sse && h.body.len)
        sb_mcp_on_line (h.body.buf, h.body.len, srv);
    sb_mcp_lines_clear (&h.body);
    return out;
}

int
sb_mcp_http_post (s_server_t *srv, const char *data, size_t len, int64_t deadline, int cancel_fd)
{
    if (!srv->curl && !(srv->curl = curl_easy_init ()))
        return S_DEAD;
    //  Made at the first request, so that tokens saved before (mcp login)
    //  go with it.
    if (!srv->oauth)
        srv->oauth = sb_mcp_oauth_new (srv->conf, srv->cfg ? srv->cfg->data_dir : NULL);
    sb_mcp_oauth_begin (srv->oauth);
    for (;;) {
        long status = 0;
        int out = s_http_exchange (srv, data, len, deadline, cancel_fd, &status);
        if (out != S_AUTH)
            return out;
        //  Refused before it ran: authorized (actors/exec/mcp_oauth.c),
        //  then sent again. A server configured with its own
        //  Authorization header is not ours to authorize.
        bool own = false;
        for (size_t k = 0; srv->conf->headers && srv->conf->headers [k]; k++)
            own = own || strncasecmp (srv->conf->headers [k], "authorization:", 14) == 0;
        if (own) {
            snprintf (srv->error, sizeof srv->error, "HTTP %ld: the server refused the Authorization header "
                      "given in its \"headers\"", status);
            return S_AUTH;
        }
        if (!srv->oauth)
            return S_AUTH;
        char err [sizeof srv->error];
        if (sb_mcp_oauth_challenge (srv->oauth, status, srv->www_auth, sb_mcp_deadline (srv, deadline), err,
                                    sizeof err) != 0) {
            snprintf (srv->error, sizeof srv->error, "HTTP %ld: %s", status, err);
            return S_AUTH;
        }
    }
}


//  Answers a request the server made inside the stream of one of ours
//  (a ping during tools/call): streamable HTTP takes the answer as a POST
//  of its own. The exchange's handle is busy in its callback, so this
//  uses a second one (libcurl refuses only a call on the same handle);
//  the server answers 202 at once, and a failure is the server's to see.
void
sb_mcp_http_reply (s_server_t *srv, json_t *msg)
{
    char *text = json_dumps (msg, JSON_COMPACT);
    json_decref (msg);
    if (!text)
        return;
    if (!srv->reply_curl)
        srv->reply_curl = curl_easy_init ();
    CURL *c = srv->reply_curl;
    if (c) {
        curl_easy_reset (c);
        struct curl_slist *hl = s_http_headers (srv, false, NULL, sb_mono_ms () + 5000);
        curl_easy_setopt (c, CURLOPT_URL, srv->conf->url);
        curl_easy_setopt (c, CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt (c, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE, (long) strlen (text));
        curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, s_discard);
        sb_mcp_curl_bounds (c, 5000L);
        CURLcode rc = curl_easy_perform (c);
        if (rc != CURLE_OK)
            sb_warn (ACTOR, "MCP server %s: cannot answer its request: %s", srv->conf->name, curl_easy_strerror (rc));
        curl_slist_free_all (hl);
    }
    free (text);
}


void
sb_mcp_http_close (s_server_t *srv)
{
    if (srv->curl && srv->http_session [0]) {
        //  Streamable HTTP: a DELETE ends our session at the server.
        struct curl_slist *hl = NULL;
        char sess [300];
        snprintf (sess, sizeof sess, "Mcp-Session-Id: %s", srv->http_session);
        hl = curl_slist_append (hl, sess);
        for (size_t k = 0; srv->conf->headers && srv->conf->headers [k]; k++)
            hl = curl_slist_append (hl, srv->conf->headers [k]);
        const char *auth = sb_mcp_oauth_header (srv->oauth, sb_mono_ms () + 1000);
        if (auth)
            hl = curl_slist_append (hl, auth);
        curl_easy_reset (srv->curl);
        curl_easy_setopt (srv->curl, CURLOPT_URL, srv->conf->url);
        curl_easy_setopt (srv->curl, CURLOPT_CUSTOMREQUEST, "DELETE");
        curl_easy_setopt (srv->curl, CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt (srv->curl, CURLOPT_WRITEFUNCTION, s_discard);
        sb_mcp_curl_bounds (srv->curl, 1000L);
        curl_easy_perform (srv->curl);
        curl_slist_free_all (hl);
    }
    s_standalone_close (srv);
    if (srv->multi) {
        curl_multi_cleanup (srv->multi);
        srv->multi = NULL;
    }
    if (srv->curl) {
        curl_easy_cleanup (srv->curl);
        srv->curl = NULL;
    }
    if (srv->reply_curl) {
        curl_easy_cleanup (srv->reply_curl);
        srv->reply_curl = NULL;
    }
}

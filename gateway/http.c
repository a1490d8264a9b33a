/*  gateway/http.c — the lws thread: the context, the connection table,
    HTTP (static UI, REST, /metrics, /healthz), the token, and the checks
    made before a WebSocket is accepted. Everything in this file runs on
    the lws thread, except gw_lws_main's startup handshake, which
    sb_gateway_start waits on. */
#include "gateway/gateway_impl.h"
#include "common/log.h"
#include "schemas/json.h"

#include <ctype.h>
#include <netdb.h>
#include <sys/socket.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <czmq.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATIC_MAX      (8u << 20)      /* largest UI file served */
#define HTTP_CHUNK      (64u << 10)     /* body bytes written per WRITEABLE */
#define BODY_MAX_MS     30000           /* a request body must be in within this */
#define FD_RESERVE_MIN  128             /* descriptors always left to the rest of serve */

/*  Sent with every response (docs/gateway.md): no inline script, nothing
    from elsewhere, no sniffing, no referrer, no framing. */
static const char *s_security_headers [][2] = {
    { "content-security-policy:", "default-src 'self'; script-src 'self'; style-src 'self'; "
      "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
      "frame-ancestors 'none'; form-action 'self'" },
    { "x-content-type-options:", "nosniff" },
    { "referrer-policy:", "no-referrer" },
    { "x-frame-options:", "DENY" },
};

/* ------------------------------------------------------------------ */
/*  The connection table: conn ids are slot | generation << 32, so an
    answer for a connection that closed (its slot reused) is dropped. */

typedef struct {
    char addr [64];
    uint32_t count;
} addr_count_t;

struct gw_conns {
    uint32_t cap;
    struct { gw_pss_t *pss; struct lws *wsi; uint32_t gen; } *slot;
    uint32_t next;              /* where to look for a free slot first */
    addr_count_t *addrs;        /* WebSocket connections per address */
    size_t naddrs;
};

static int
s_conns_init (sb_gateway_t *gw)
{
    struct gw_conns *c = calloc (1, sizeof *c);
    if (!c)
        return -1;
    c->cap = gw->max_conns * 2 + 256;
    c->slot = calloc (c->cap, sizeof *c->slot);
    c->addrs = calloc (gw->max_conns + 1, sizeof *c->addrs);
    if (!c->slot || !c->addrs) {
        free (c->slot);
        free (c->addrs);
        free (c);
        return -1;
    }
    gw->conns = c;
    return 0;
}

static void
s_conns_free (sb_gateway_t *gw)
{
    if (gw->conns) {
        free (gw->conns->slot);
        free (gw->conns->addrs);
        free (gw->conns);
        gw->conns = NULL;
    }
}

static uint64_t
s_conn_register (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    struct gw_conns *c = gw->conns;
    if (pss->conn)
        return pss->conn;
    for (uint32_t k = 0; k < c->cap; k++) {
        uint32_t s = (c->next + k) % c->cap;
        if (!c->slot [s].pss) {
            c->slot [s].pss = pss;
            c->slot [s].wsi = wsi;
            c->slot [s].gen++;
            if (c->slot [s].gen == 0)
                c->slot [s].gen = 1;
            c->next = s + 1;
            pss->conn = (uint64_t) c->slot [s].gen << 32 | s;
            return pss->conn;
        }
    }
    return 0;
}

static void
s_conn_unregister (sb_gateway_t *gw, gw_pss_t *pss)
{
    if (!pss->conn || !gw->conns)
        return;
    uint32_t s = (uint32_t) pss->conn;
    if (s < gw->conns->cap && gw->conns->slot [s].pss == pss) {
        gw->conns->slot [s].pss = NULL;
        gw->conns->slot [s].wsi = NULL;
    }
    pss->conn = 0;
}

static gw_pss_t *
s_conn_find (sb_gateway_t *gw, uint64_t conn, struct lws **wsi)
{
    uint32_t s = (uint32_t) conn;
    uint32_t gen = (uint32_t) (conn >> 32);
    struct gw_conns *c = gw->conns;
    if (!c || s >= c->cap || !c->slot [s].pss || c->slot [s].gen != gen)
        return NULL;
    *wsi = c->slot [s].wsi;
    return c->slot [s].pss;
}

static addr_count_t *
s_addr (sb_gateway_t *gw, const char *addr, bool add)
{
    struct gw_conns *c = gw->conns;
    for (size_t k = 0; k < c->naddrs; k++)
        if (strcmp (c->addrs [k].addr, addr) == 0)
            return &c->addrs [k];
    if (!add || c->naddrs > gw->max_conns)
        return NULL;
    addr_count_t *a = &c->addrs [c->naddrs++];
    snprintf (a->addr, sizeof a->addr, "%s", addr);
    a->count = 0;
    return a;
}

static void
s_addr_release (sb_gateway_t *gw, const char *addr)
{
    struct gw_conns *c = gw->conns;
    addr_count_t *a = s_addr (gw, addr, false);
    if (a && a->count > 0 && --a->count == 0) {
        *a = c->addrs [--c->naddrs];
    }
}

/* ------------------------------------------------------------------ */
/*  Responses */

static void
s_reset_http (sb_gateway_t *gw, gw_pss_t *pss)
{
    if (pss->resp_charged) {
        gw_queued (gw, pss->resp_charged, false);
        pss->resp_charged = 0;
    }
    free (pss->body);
    pss->body = NULL;
    pss->body_len = 0;
    free (pss->extra);
    pss->extra = NULL;
    gw_buf_unref (&pss->resp);
    pss->resp_off = 0;
    pss->hdr_sent = false;
    pss->resp_ready = false;
    pss->waiting = false;
    pss->too_large = false;
    pss->no_store = false;
    pss->oauth_page = false;
}

//  Queues a whole response; it is written in WRITEABLE. Takes `body`.
//  Its bytes count in the total of every connection's queue (with the
//  WebSockets'): an answer that does not fit becomes 503 overloaded.
static void
s_respond (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, int status, const char *ctype,
           gw_buf_t *body, const char *extra)
{
    static const char full [] = "{\"error\":{\"code\":\"overloaded\",\"message\":\"the gateway's outbound "
                                "bytes are at their bound (--http-out-total): ask again later\"}}";
    gw_buf_unref (&pss->resp);
    if (pss->resp_charged) {
        gw_queued (gw, pss->resp_charged, false);
        pss->resp_charged = 0;
    }
    if (pss->oauth_page)
        ctype = gw_oauth_respond (pss, status, &body);     /* a page for the person (gateway/oauth_page.c) */
    if (body && body->len > sizeof full && !gw_total_fits (gw, body->len)) {
        atomic_fetch_add (&gw->stats.ws_replies_dropped, 1);
        gw_buf_unref (&body);
        body = gw_buf_new (full, sizeof full - 1);
        status = 503;
        ctype = "application/json";
        pss->no_store = true;
    }
    pss->resp = body;
    pss->resp_charged = body ? body->len : 0;
    gw_queued (gw, pss->resp_charged, true);
    pss->status = status;
    pss->ctype = ctype;
    free (pss->extra);
    pss->extra = extra ? strdup (extra) : NULL;
    pss->resp_off = 0;
    pss->hdr_sent = false;
    pss->resp_ready = true;
    pss->waiting = false;
    if (status >= 400)
        atomic_fetch_add (&gw->stats.http_errors, 1);
    lws_callback_on_writable (wsi);
}

static void
s_respond_error (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, int status, const char *code,
                 const char *message)
{
    json_t *j = json_pack ("{s:{s:s,s:s}}", "error", "code", code, "message", message);
    char *text = j ? json_dumps (j, JSON_COMPACT) : NULL;
    json_decref (j);
    gw_buf_t *buf = text ? gw_buf_new (text, strlen (text)) : gw_buf_new ("{}", 2);
    free (text);
    pss->no_store = true;
    s_respond (gw, wsi, pss, status, "application/json", buf, NULL);
}

static int
s_write_headers (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    unsigned char hdr [LWS_PRE + 4096];
    unsigned char *start = hdr + LWS_PRE, *p = start, *end = hdr + sizeof hdr - 1;
    size_t len = pss->resp ? pss->resp->len : 0;
    if (lws_add_http_common_headers (wsi, (unsigned) pss->status, pss->ctype, len, &p, end))
        return -1;
    for (size_t k = 0; k < sizeof s_security_headers / sizeof s_security_headers [0]; k++) {
        const char *value = k == 0 && pss->oauth_page ? GW_OAUTH_CSP : s_security_headers [k][1];
        if (lws_add_http_header_by_name (wsi, (const unsigned char *) s_security_headers [k][0],
                                         (const unsigned char *) value, (int) strlen (value), &p, end))
            return -1;
    }
    if (pss->no_store
    &&  lws_add_http_header_by_name (wsi, (const unsigned char *) "cache-control:",
                                     (const unsigned char *) "no-store", 8, &p, end))
        return -1;
    /* extra: "name: value\n" lines (Location, Set-Cookie) */
    for (char *line = pss->extra; line && *line; ) {
        char *nl = strchr (line, '\n');
        char *colon = strchr (line, ':');
        if (!nl || !colon || colon > nl)
            break;
        char name [64];
        snprintf (name, sizeof name, "%.*s", (int) (colon - line + 1), line);
        const char *value = colon + 1;
        while (*value == ' ')
            value++;
        if (lws_add_http_header_by_name (wsi, (const unsigned char *) name, (const unsigned char *) value,
                                         (int) (nl - value), &p, end))
            return -1;
        line = nl + 1;
    }
    return lws_finalize_write_http_header (wsi, start, &p, end) ? -1 : 0;
}

//  WRITEABLE on an HTTP connection: the headers once, then the body a
//  chunk per callback.
static int
s_http_writeable (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    if (!pss->resp_ready)
        return 0;
    size_t len = pss->resp ? pss->resp->len : 0;
    if (!pss->hdr_sent) {
        if (s_write_headers (gw, wsi, pss))
            return -1;
        pss->hdr_sent = true;
        if (len > 0) {
            lws_callback_on_writable (wsi);
            return 0;
        }
    }
    else {
        static unsigned char chunk [LWS_PRE + HTTP_CHUNK];
        size_t n = len - pss->resp_off;
        if (n > HTTP_CHUNK)
            n = HTTP_CHUNK;
        memcpy (chunk + LWS_PRE, gw_buf_text (pss->resp) + pss->resp_off, n);
        bool last = pss->resp_off + n == len;
        if (lws_write (wsi, chunk + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) != (int) n)
            return -1;
        pss->resp_off += n;
        if (!last) {
            lws_callback_on_writable (wsi);
            return 0;
        }
    }
    bool close_after = pss->close_after;
    s_reset_http (gw, pss);
    if (close_after)
        return -1;      /* the request's framing cannot be trusted: no next one */
    return lws_http_transaction_completed (wsi) ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/*  Static files */

static void
s_static (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *path)
{
    if (strcmp (path, "/") == 0)
        path = "/index.html";
    /* only plain names below the UI folder: no "..", no hidden files */
    if (strlen (path) > 256 || strspn (path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-")
        != strlen (path) || strstr (path, "/.")) {
        s_respond_error (gw, wsi, pss, 404, "not_found", "no such file");
        return;
    }
    if (!gw->ui_dir [0]) {
        const char *note = "<!doctype html><title>switchboard</title><p>The gateway runs, but no UI folder "
                           "was found (gateway/ui next to the binary, or $SWITCHBOARD_UI). The API is at /api/.";
        s_respond (gw, wsi, pss, strcmp (path, "/index.html") == 0 ? 200 : 404, "text/html; charset=utf-8",
                   gw_buf_new (note, strlen (note)), NULL);
        return;
    }
    char full [4500];
    snprintf (full, sizeof full, "%s%s", gw->ui_dir, path);
    int fd = open (full, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || st.st_size > STATIC_MAX) {
        if (fd >= 0)
            close (fd);
        s_respond_error (gw, wsi, pss, 404, "not_found", "no such file");
        return;
    }
    gw_buf_t *buf = gw_buf_alloc ((size_t) st.st_size);
    size_t got = 0;
    while (buf && got < (size_t) st.st_size) {
        ssize_t n = read (fd, gw_buf_text (buf) + got, (size_t) st.st_size - got);
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    close (fd);
    if (!buf || got != (size_t) st.st_size) {
        gw_buf_unref (&buf);
        s_respond_error (gw, wsi, pss, 500, "internal", "cannot read the file");
        return;
    }
    /* the UI changes with the binary: revalidate every load */
    pss->no_store = true;
    s_respond (gw, wsi, pss, 200, gw_static_mime (path), buf, NULL);
}

/* ------------------------------------------------------------------ */
/*  HTTP requests */

//  GET /?token=...: set the cookie and send the browser to the same URL
//  without the token, so it stays out of the history and the address bar.
static void
s_token_redirect (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *path)
{
    char loc [1200], extra [1600];
    size_t used = (size_t) snprintf (loc, sizeof loc, "%s", path);
    const char *p = pss->args;
    bool first = true;
    for (size_t k = 0; p && k < pss->nargs && used < sizeof loc - 8; k++) {
        const char *value = p + strlen (p) + 1;
        if (strcmp (p, "token") != 0) {
            used += (size_t) snprintf (loc + used, sizeof loc - used, "%c", first ? '?' : '&');
            first = false;
            for (const char *s = p; *s && used < sizeof loc - 4; s++)
                used += (size_t) snprintf (loc + used, sizeof loc - used,
                                           isalnum ((unsigned char) *s) || strchr ("-._~", *s) ? "%c" : "%%%02X",
                                           (unsigned char) *s);
            used += (size_t) snprintf (loc + used, sizeof loc - used, "=");
            for (const char *s = value; *s && used < sizeof loc - 4; s++)
                used += (size_t) snprintf (loc + used, sizeof loc - used,
                                           isalnum ((unsigned char) *s) || strchr ("-._~", *s) ? "%c" : "%%%02X",
                                           (unsigned char) *s);
        }
        p = value + strlen (value) + 1;
    }
    char name [32];
    gw_cookie_name (gw, name, sizeof name);
    snprintf (extra, sizeof extra, "location: %s\nset-cookie: %s=%s; Path=/; HttpOnly; SameSite=Strict%s\n",
              loc, name, gw->token, gw->tls ? "; Secure" : "");
    pss->no_store = true;
    s_respond (gw, wsi, pss, 303, "text/plain", NULL, extra);
}

//  Hands a REST call to the bridge, which answers it; takes `in` (NULL:
//  out of memory).
static void
s_send_call (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, gw_in_t *in)
{
    if (!in || !s_conn_register (gw, wsi, pss)) {
        gw_in_free (in);
        s_respond_error (gw, wsi, pss, 503, "overloaded", "too many requests in flight");
        return;
    }
    in->conn = pss->conn;
    pss->waiting = true;
    gw_to_bridge (gw, in);
}

static void
s_dispatch_api (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    char code [32], message [256], type [96];
    json_t *body = NULL;
    gw_in_t *blob = NULL;       //  /api/blobs/: raw bytes both ways (gateway/blobs.c)
    if (gw_blob_in (pss, &blob, code, message, sizeof message)) {
        if (blob || strcmp (code, "overloaded") == 0)
            s_send_call (gw, wsi, pss, blob);
        else
            s_respond_error (gw, wsi, pss, 405, code, message);
        return;
    }
    if (pss->post && pss->body_len > 0) {
        sb_verr_t err;
        body = sb_json_parse ((const char *) pss->body, pss->body_len, SB_GW_MAX_FRAME, SB_GW_MAX_DEPTH, &err);
        if (!body) {
            s_respond_error (gw, wsi, pss, err.code == SB_E_too_large ? 413 : 400, sb_err_name (err.code),
                             err.message);
            return;
        }
    }
    gw_arg_t args [64] = { { 0 } };
    size_t nargs = 0;
    const char *p = pss->args;
    for (size_t k = 0; p && k < pss->nargs && nargs < 64; k++) {
        const char *value = p + strlen (p) + 1;
        if (strcmp (p, "token") != 0)
            args [nargs++] = (gw_arg_t) { p, value };
        p = value + strlen (value) + 1;
    }
    json_t *jbody = NULL;
    int status = gw_rest_route (pss->post ? "POST" : "GET", pss->path, args, nargs, body, type, sizeof type,
                                &jbody, code, sizeof code, message, sizeof message);
    json_decref (body);
    if (status) {
        s_respond_error (gw, wsi, pss, status, code, message);
        return;
    }
    uint8_t *mp;
    size_t mp_len;
    int rc = gw_translate (type, jbody, &mp, &mp_len, code, sizeof code, message, sizeof message);
    json_decref (jbody);
    if (rc) {
        if (sb_err_from_name (code) == SB_E_forbidden)
            atomic_fetch_add (&gw->stats.ws_forbidden, 1);
        s_respond_error (gw, wsi, pss, gw_http_status (code), code, message);
        return;
    }
    gw_in_t *in = calloc (1, sizeof *in);
    if (in) {
        in->kind = GW_IN_CALL;
        in->http = true;
        snprintf (in->type, sizeof in->type, "%s", type);
        in->body = mp;
        in->body_len = mp_len;
    }
    else
        free (mp);
    s_send_call (gw, wsi, pss, in);
}

//  Refuses a request at its headers: the answer goes out, and nothing of
//  the request runs, whatever of its body lws still delivers.
static int
s_refuse (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, atomic_uint_fast64_t *counter, int status,
          const char *code, const char *message)
{
    if (counter)
        atomic_fetch_add (counter, 1);
    pss->stage = GW_REQ_DONE;
    s_respond_error (gw, wsi, pss, status, code, message);
    return 0;
}

//  The checks every request past Host and method passes before anything
//  of it runs: that a browser's request comes from our own page (strictly
//  for the API and /metrics), the token, and that a write proves a script
//  of ours made it. Returns
//  true when the request may go on; else the refusal is queued.
static bool
s_admit (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *host, bool guarded)
{
    if (!gw_same_origin (gw, wsi, host, guarded))
        return s_refuse (gw, wsi, pss, &gw->stats.origin_refused, 403, "forbidden",
                         "a request from another origin (Origin or Sec-Fetch-Site) is refused"), false;
    gw_auth_t auth = gw_authorized (gw, wsi, pss, false);
    if (auth == GW_AUTH_NONE)
        return s_refuse (gw, wsi, pss, &gw->stats.auth_failures, 401, "unauthorized",
                         "a token is needed: open the URL serve printed (with ?token=), or send "
                         "Authorization: Bearer <DATA/token>"), false;
    if (pss->post && auth == GW_AUTH_COOKIE && !gw_script_proof (wsi))
        return s_refuse (gw, wsi, pss, &gw->stats.csrf_refused, 403, "forbidden",
                         "a write with the cookie needs the X-Switchboard header (or send the token "
                         "as Authorization: Bearer)"), false;
    return true;
}

//  A POST's body is read only once the request is admitted, and only when
//  its length is announced and within the bound: lws does not decode a
//  chunked request body, and reads one without a length until the close.
static int
s_expect_body (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    char cl [32];
    int n = gw_header (wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, cl, sizeof cl);
    if (n <= 0 || lws_hdr_total_length (wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0
    ||  strspn (cl, "0123456789") != strlen (cl)) {
        pss->close_after = true;
        return s_refuse (gw, wsi, pss, NULL, 411, "invalid", "a POST needs a Content-Length (no chunked body)");
    }
    if (strlen (cl) > 9 || strtoull (cl, NULL, 10) > gw_body_max (pss->path))
        /* answered now; lws reads what follows of the body and drops it */
        return s_refuse (gw, wsi, pss, NULL, 413, "too_large", SB_GW_TOO_LARGE);
    /* lws calls HTTP_BODY_COMPLETION for every POST with a length, 0 too:
       the request is dispatched there, once */
    pss->stage = GW_REQ_BODY;
    pss->body_deadline = zclock_mono () + BODY_MAX_MS;
    return 0;
}

static int
s_http (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *uri)
{
    s_reset_http (gw, pss);
    pss->stage = GW_REQ_DONE;
    pss->close_after = false;
    atomic_fetch_add (&gw->stats.http_requests, 1);
    lws_get_peer_simple (wsi, pss->addr, sizeof pss->addr);
    bool get = lws_hdr_total_length (wsi, WSI_TOKEN_GET_URI) > 0;
    pss->post = lws_hdr_total_length (wsi, WSI_TOKEN_POST_URI) > 0;
    snprintf (pss->path, sizeof pss->path, "%s", uri ? uri : "/");
    gw_read_args (wsi, pss);
    char host [256];
    if (!gw_host_allowed (gw, wsi, host, sizeof host))
        return s_refuse (gw, wsi, pss, &gw->stats.host_refused, 403, "forbidden",
                         "this Host is not served (use localhost or 127.0.0.1; serve --allow-host adds names)");
    if (!get && !pss->post)
        return s_refuse (gw, wsi, pss, NULL, 405, "invalid", "only GET and POST are served");
    if (strcmp (pss->path, "/healthz") == 0) {
        pss->no_store = true;
        s_respond (gw, wsi, pss, 200, "text/plain", gw_buf_new ("ok\n", 3), NULL);
        return 0;
    }
    if (get && strcmp (pss->path, "/oauth/callback") == 0) {
        /* An MCP authorization server sends the browser back here, cross-site, without our cookie
           (docs/mcp.md): the state, 128 random bits naming a pending login, is the capability. */
        pss->no_store = pss->oauth_page = true;
        snprintf (pss->path, sizeof pss->path, "/api/oauth");
        s_dispatch_api (gw, wsi, pss);
        return 0;
    }
    bool api = strncmp (pss->path, "/api/", 5) == 0 || strcmp (pss->path, "/api") == 0;
    bool metrics = strcmp (pss->path, "/metrics") == 0;
    if (!api && !metrics && get && gw_arg (pss, "token")) {
        if (gw_authorized (gw, wsi, pss, true) != GW_AUTH_QUERY)
            return s_refuse (gw, wsi, pss, &gw->stats.auth_failures, 401, "unauthorized",
                             "wrong token: use the URL serve printed");
        s_token_redirect (gw, wsi, pss, pss->path);
        return 0;
    }
    if (!s_admit (gw, wsi, pss, host, api || metrics))
        return 0;
    if (metrics) {
        if (!get)
            return s_refuse (gw, wsi, pss, NULL, 405, "invalid", "/metrics is read with GET");
        gw_in_t *in = calloc (1, sizeof *in);
        if (in) {
            in->kind = GW_IN_METRICS;
            in->http = true;
        }
        s_send_call (gw, wsi, pss, in);
        return 0;
    }
    if (!api) {
        if (!get)
            return s_refuse (gw, wsi, pss, NULL, 405, "invalid", "static files are read with GET");
        s_static (gw, wsi, pss, pss->path);
        return 0;
    }
    if (pss->post)
        return s_expect_body (gw, wsi, pss);
    s_dispatch_api (gw, wsi, pss);
    return 0;
}

//  Body bytes of an admitted POST, up to the bound; of any other request
//  (refused, answered, a GET with a body) they are dropped.
static int
s_http_body (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const void *in, size_t len)
{
    (void) wsi;
    if (pss->stage != GW_REQ_BODY)
        return 0;
    /* lws times out a pause between two parts of a body, not the whole:
       a body that trickles a byte at a time is closed here */
    if (zclock_mono () > pss->body_deadline) {
        atomic_fetch_add (&gw->stats.body_timeouts, 1);
        return -1;
    }
    if (pss->too_large || len == 0)
        return 0;
    if (pss->body_len + len > gw_body_max (pss->path)) {
        pss->too_large = true;
        free (pss->body);
        pss->body = NULL;
        pss->body_len = 0;
        return 0;
    }
    uint8_t *grown = realloc (pss->body, pss->body_len + len + 1);
    if (!grown)
        return -1;
    memcpy (grown + pss->body_len, in, len);
    pss->body = grown;
    pss->body_len += len;
    return 0;
}

//  The body is complete: an admitted POST runs now, once.
static int
s_http_body_done (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    if (pss->stage != GW_REQ_BODY)
        return 0;
    pss->stage = GW_REQ_DONE;
    if (pss->too_large)
        s_respond_error (gw, wsi, pss, 413, "too_large", SB_GW_TOO_LARGE);
    else
        s_dispatch_api (gw, wsi, pss);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  The WebSocket upgrade */

//  Host, Origin, token and the connection limits, before anything is
//  upgraded. Returns 0 to accept, 1 when a refusal was written.
static int
s_confirm_upgrade (sb_gateway_t *gw, struct lws *wsi)
{
    /* lws has no per-connection data for this wsi yet: the checks use
       one of their own */
    gw_pss_t tmp;
    memset (&tmp, 0, sizeof tmp);
    int rc = 0;
    char host [256], origin [512], uri [512];
    lws_get_peer_simple (wsi, tmp.addr, sizeof tmp.addr);
    gw_read_args (wsi, &tmp);
    int olen = gw_header (wsi, WSI_TOKEN_ORIGIN, origin, sizeof origin);
    if (gw_header (wsi, WSI_TOKEN_GET_URI, uri, sizeof uri) <= 0 || strcmp (uri, "/ws") != 0) {
        lws_return_http_status (wsi, HTTP_STATUS_NOT_FOUND, "the WebSocket is at /ws");
        rc = 1;
    }
    else
    if (!gw_host_allowed (gw, wsi, host, sizeof host)) {
        atomic_fetch_add (&gw->stats.host_refused, 1);
        lws_return_http_status (wsi, HTTP_STATUS_FORBIDDEN, "this Host is not served");
        rc = 1;
    }
    else
    if (olen != 0) {
        /* a browser always sends Origin: it must be the page this server
           served, so another site open in the same browser cannot drive
           the agent with the cookie. A client without Origin is not a
           browser, and still needs the token. */
        char want [300];
        snprintf (want, sizeof want, "%s://%s", gw->tls ? "https" : "http", host);
        if (olen < 0 || strcasecmp (origin, want) != 0) {
            atomic_fetch_add (&gw->stats.origin_refused, 1);
            lws_return_http_status (wsi, HTTP_STATUS_FORBIDDEN, "cross-origin WebSocket refused");
            rc = 1;
        }
    }
    if (rc == 0 && gw_authorized (gw, wsi, &tmp, true) == GW_AUTH_NONE) {
        atomic_fetch_add (&gw->stats.auth_failures, 1);
        lws_return_http_status (wsi, HTTP_STATUS_UNAUTHORIZED, "a token is needed");
        rc = 1;
    }
    if (rc == 0) {
        addr_count_t *a = s_addr (gw, tmp.addr, false);
        if ((uint64_t) atomic_load (&gw->stats.ws_open) >= gw->max_conns
        ||  (a && a->count >= gw->max_per_addr)) {
            atomic_fetch_add (&gw->stats.conn_refused, 1);
            lws_return_http_status (wsi, HTTP_STATUS_SERVICE_UNAVAILABLE, "too many connections");
            rc = 1;
        }
    }
    free (tmp.args);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Answers from the bridge */

static void
s_take_out (sb_gateway_t *gw)
{
    for (gw_out_t *out = gw_queue_take (&gw->out); out; ) {
        gw_out_t *next = out->next;
        gw_handoff_release (gw, out);
        struct lws *wsi = NULL;
        gw_pss_t *pss = s_conn_find (gw, out->conn, &wsi);
        if (!pss)
            gw_out_free (out);
        else
        if (out->kind == GW_OUT_WS && pss->is_ws)
            gw_ws_deliver (gw, wsi, pss, out);
        else
        if (out->kind == GW_OUT_HTTP && !pss->is_ws && pss->waiting) {
            s_conn_unregister (gw, pss);
            pss->no_store = true;
            s_respond (gw, wsi, pss, out->status, out->ctype, out->buf, out->extra);
            out->buf = NULL;
            gw_out_free (out);
        }
        else
            gw_out_free (out);
        out = next;
    }
}

/* ------------------------------------------------------------------ */
/*  The callback */

static int
s_callback (struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    struct lws_context *ctx = lws_get_context (wsi);
    sb_gateway_t *gw = ctx ? lws_context_user (ctx) : NULL;
    gw_pss_t *pss = user;
    if (!gw)
        return 0;
    switch (reason) {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            s_take_out (gw);
            return 0;
        case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
            /* `in` is the accepted descriptor: past the cap, the rest of
               serve (the bus, LMDB, the tools) would run out */
            if ((int) (intptr_t) in >= gw->fd_cap) {
                atomic_fetch_add (&gw->stats.fd_refused, 1);
                return 1;
            }
            return 0;
        case LWS_CALLBACK_HTTP:
            return s_http (gw, wsi, pss, in);
        case LWS_CALLBACK_HTTP_BODY:
            return s_http_body (gw, wsi, pss, in, len);
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            return s_http_body_done (gw, wsi, pss);
        case LWS_CALLBACK_HTTP_WRITEABLE:
            return s_http_writeable (gw, wsi, pss);
        case LWS_CALLBACK_CLOSED_HTTP:
        case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
            if (pss && !pss->is_ws) {
                s_conn_unregister (gw, pss);
                s_reset_http (gw, pss);
                free (pss->args);
                pss->args = NULL;
            }
            return 0;
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            return s_confirm_upgrade (gw, wsi);
        case LWS_CALLBACK_ESTABLISHED: {
            if (!pss->is_ws)
                s_reset_http (gw, pss);     /* an answer the upgrade cut short: its bytes */
            free (pss->args);
            memset (pss, 0, sizeof *pss);
            pss->is_ws = true;
            lws_get_peer_simple (wsi, pss->addr, sizeof pss->addr);
            addr_count_t *a = s_addr (gw, pss->addr, true);
            if (!a || !s_conn_register (gw, wsi, pss))
                return -1;
            a->count++;
            pss->counted = true;
            atomic_fetch_add (&gw->stats.ws_opened, 1);
            atomic_fetch_add (&gw->stats.ws_open, 1);
            gw_ws_established (gw, wsi, pss);
            return 0;
        }
        case LWS_CALLBACK_RECEIVE:
            return gw_ws_receive (gw, wsi, pss, in, len);
        case LWS_CALLBACK_SERVER_WRITEABLE:
            return gw_ws_writeable (gw, wsi, pss);
        case LWS_CALLBACK_CLOSED:
            if (pss->is_ws) {
                gw_ws_closed (gw, pss);
                s_conn_unregister (gw, pss);
                atomic_fetch_add (&gw->stats.ws_closed, 1);
                atomic_fetch_sub (&gw->stats.ws_open, 1);
                pss->is_ws = false;
            }
            return 0;
        case LWS_CALLBACK_WSI_DESTROY:
            if (pss && pss->counted) {
                s_addr_release (gw, pss->addr);
                pss->counted = false;
            }
            return 0;
        default:
            return 0;
    }
}

static const struct lws_protocols s_protocols [] = {
    /* tx_packet_size: what lws hands the socket in one send; smaller, it
       would copy the rest of a batch of frames (TX_BATCH, gateway/ws.c)
       or an HTTP chunk into its own buffer and send it later */
    { "switchboard", s_callback, sizeof (gw_pss_t), 4096, 0, NULL, SB_GW_TX_BATCH },
    { NULL, NULL, 0, 0, 0, NULL, 0 }
};

//  lws's log lines, into ours. A line that repeats (lws logs `accept:
//  errno 24` on every poll while descriptors are short) is written once a
//  second at most, with how many were left out.
static void
s_lws_log (int level, const char *line)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char last [512];
    static int64_t last_ms;
    static uint64_t dropped;
    char copy [512];
    snprintf (copy, sizeof copy, "%s", line);
    copy [strcspn (copy, "\n")] = 0;
    int64_t now = zclock_mono ();
    pthread_mutex_lock (&lock);
    if (strcmp (copy, last) == 0 && now - last_ms < 1000) {
        dropped++;
        pthread_mutex_unlock (&lock);
        return;
    }
    uint64_t left_out = dropped;
    dropped = 0;
    last_ms = now;
    snprintf (last, sizeof last, "%s", copy);
    pthread_mutex_unlock (&lock);
    if (level & LLL_ERR)
        sb_error ("gateway", "lws: %s", copy);
    else
    if (level & LLL_WARN)
        sb_warn ("gateway", "lws: %s", copy);
    else
        sb_info ("gateway", "lws: %s", copy);
    if (left_out)
        sb_warn ("gateway", "lws: the line before the last repeated %" PRIu64 " more times within a second",
                 left_out);
}

//  The first descriptor a connection may not have: the process's limit
//  less a reserve (a quarter, at least FD_RESERVE_MIN) for the bus, LMDB,
//  the tools and the runs, so no number of clients leaves serve without.
static int
s_fd_cap (void)
{
    struct rlimit rl;
    if (getrlimit (RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT_MAX)
        return INT_MAX;
    int limit = (int) rl.rlim_cur;
    int reserve = limit / 4 > FD_RESERVE_MIN ? limit / 4 : FD_RESERVE_MIN;
    return limit > 2 * reserve ? limit - reserve : limit / 2;
}

static void
s_started (sb_gateway_t *gw, int state, const char *err)
{
    pthread_mutex_lock (&gw->start_lock);
    gw->start_state = state;
    if (err)
        snprintf (gw->start_err, sizeof gw->start_err, "%s", err);
    pthread_cond_broadcast (&gw->start_cond);
    pthread_mutex_unlock (&gw->start_lock);
}

/*  Whether iface:port can be bound, as lws would bind it (SO_REUSEADDR):
    0, or the errno. lws 4.1 leaks an allocation when its context fails to
    bind, and says less than errno does, so a taken port is found here
    first. Port 0 (any free one) always binds. */
static int
s_port_bindable (const char *iface, int port)
{
    if (port == 0)
        return 0;
    char service [16];
    snprintf (service, sizeof service, "%d", port);
    struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM }, *res = NULL;
    if (getaddrinfo (*iface ? iface : NULL, service, &hints, &res) != 0 || !res)
        return EADDRNOTAVAIL;
    int rc = 0;
    int fd = socket (res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        rc = errno;
    else
    if (setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0
    ||  bind (fd, res->ai_addr, res->ai_addrlen) != 0)
        rc = errno;
    if (fd >= 0)
        close (fd);
    freeaddrinfo (res);
    return rc;
}

void *
gw_lws_main (void *arg)
{
    sb_gateway_t *gw = arg;
    /* SWITCHBOARD_LWS_LOG: lws's own log bits, for debugging lws itself */
    const char *bits = getenv ("SWITCHBOARD_LWS_LOG");
    lws_set_log_level (bits ? atoi (bits) : LLL_ERR | LLL_WARN, s_lws_log);
    gw->fd_cap = s_fd_cap ();
    if (s_conns_init (gw)) {
        s_started (gw, -1, "out of memory");
        return NULL;
    }
    char iface [256];
    snprintf (iface, sizeof iface, "%s", strcasecmp (gw->bind_addr, "localhost") == 0 ? "127.0.0.1" : gw->bind_addr);
    struct lws_context_creation_info info;
    memset (&info, 0, sizeof info);
    info.port = gw->port;
    info.iface = iface [0] ? iface : NULL;
    info.protocols = s_protocols;
    info.user = gw;
    info.vhost_name = "switchboard";
    info.options = LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND | LWS_SERVER_OPTION_VALIDATE_UTF8;
    /* idle WebSockets (docs/gateway.md): lws pings one that has not
       answered a ping (or just opened) for idle_s seconds and closes it
       when no pong came idle_s seconds after; every client library and
       browser answers pings by itself */
    gw->idle.secs_since_valid_ping = (uint16_t) gw->idle_s;
    gw->idle.secs_since_valid_hangup = (uint16_t) (2 * gw->idle_s);
    info.retry_and_idle_policy = &gw->idle;
    info.max_http_header_data = 4096;
    info.timeout_secs = 20;
    /* fd_limit_per_thread is left at 0 (the process's `ulimit -n`): below
       that limit lws 4.1 finds a socket's connection by a linear scan of
       its whole fd table on every poll event, which cost a fifth of the
       gateway's CPU at 1,000 clients (docs/gateway.md). Connections are
       bounded by --http-max-conns (WebSocket) and the connection table
       (HTTP) instead. */
    info.alpn = "http/1.1";
    if (strchr (iface, ':') == NULL)
        info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
    if (gw->tls) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.ssl_cert_filepath = gw->cfg.tls_cert;
        info.ssl_private_key_filepath = gw->cfg.tls_key;
    }
    int bind_err = s_port_bindable (iface, gw->port);
    if (bind_err) {
        char err [256];
        snprintf (err, sizeof err, "cannot listen on %s:%d: %s", gw->bind_addr, gw->port, strerror (bind_err));
        s_conns_free (gw);
        s_started (gw, -1, err);
        return NULL;
    }
    struct lws_context *ctx = lws_create_context (&info);
    struct lws_vhost *vh = ctx ? lws_get_vhost_by_name (ctx, "switchboard") : NULL;
    int port = vh ? lws_get_vhost_listen_port (vh) : -1;
    if (!ctx || port <= 0) {
        char err [256];
        snprintf (err, sizeof err, "cannot listen on %s:%d%s (in use, or not an address of this host%s)",
                  gw->bind_addr, gw->port, gw->tls ? " with TLS" : "", gw->tls ? ", or the TLS files do not load" : "");
        if (ctx)
            lws_context_destroy (ctx);
        s_conns_free (gw);
        s_started (gw, -1, err);
        return NULL;
    }
    pthread_mutex_lock (&gw->start_lock);
    gw->context = ctx;
    gw->port = port;
    pthread_mutex_unlock (&gw->start_lock);
    s_started (gw, 1, NULL);
    while (!atomic_load (&gw->stopping))
        if (lws_service (ctx, 0) < 0)
            break;
    pthread_mutex_lock (&gw->start_lock);
    gw->context = NULL;
    pthread_mutex_unlock (&gw->start_lock);
    lws_context_destroy (ctx);
    s_conns_free (gw);
    return NULL;
}

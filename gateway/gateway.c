/*  gateway/gateway.c — see gateway.h: start and stop, the token, the Host
    allowlist, and the queues and frames the two threads share. */
#include "gateway/gateway_impl.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/*  Frames */

gw_buf_t *
gw_buf_alloc (size_t len)
{
    gw_buf_t *buf = malloc (sizeof *buf + LWS_PRE + len + 1);
    if (!buf)
        return NULL;
    atomic_init (&buf->refs, 1);
    buf->len = len;
    buf->data [LWS_PRE + len] = 0;
    return buf;
}

gw_buf_t *
gw_buf_new (const char *text, size_t len)
{
    gw_buf_t *buf = gw_buf_alloc (len);
    if (buf)
        memcpy (buf->data + LWS_PRE, text, len);
    return buf;
}

char *
gw_buf_text (gw_buf_t *buf)
{
    return (char *) buf->data + LWS_PRE;
}

//  Any thread.
gw_buf_t *
gw_buf_ref (gw_buf_t *buf)
{
    if (buf)
        atomic_fetch_add (&buf->refs, 1);
    return buf;
}

//  Any thread.
void
gw_buf_unref (gw_buf_t **buf_p)
{
    if (buf_p && *buf_p) {
        if (atomic_fetch_sub (&(*buf_p)->refs, 1) == 1)
            free (*buf_p);
        *buf_p = NULL;
    }
}

/* ------------------------------------------------------------------ */
/*  Queues */

void
gw_queue_init (gw_queue_t *q)
{
    pthread_mutex_init (&q->lock, NULL);
    q->head = q->tail = NULL;
    q->count = 0;
}

//  Any thread.
size_t
gw_queue_push (gw_queue_t *q, void *item)
{
    *(void **) item = NULL;
    pthread_mutex_lock (&q->lock);
    size_t before = q->count++;
    if (q->tail)
        *(void **) q->tail = item;
    else
        q->head = item;
    q->tail = item;
    pthread_mutex_unlock (&q->lock);
    return before;
}

//  Any thread.
void *
gw_queue_take (gw_queue_t *q)
{
    pthread_mutex_lock (&q->lock);
    void *head = q->head;
    q->head = q->tail = NULL;
    q->count = 0;
    pthread_mutex_unlock (&q->lock);
    return head;
}

void
gw_in_free (gw_in_t *in)
{
    if (in) {
        free (in->tx);
        free (in->body);
        free (in);
    }
}

void
gw_out_free (gw_out_t *out)
{
    if (out) {
        gw_buf_unref (&out->buf);
        free (out->tx);
        free (out->extra);
        free (out);
    }
}

//  Any thread (the lws thread in practice).
void
gw_to_bridge (sb_gateway_t *gw, gw_in_t *in)
{
    gw_queue_push (&gw->in, in);
    uint64_t one = 1;
    if (write (gw->in_fd, &one, sizeof one) != sizeof one) {
        /* the counter is already non-zero: the bridge is woken anyway */
    }
}

//  Bridge thread. lws_cancel_service is the one lws call another thread
//  may make; it wakes lws_service, which then takes the queue.
void
gw_to_lws (sb_gateway_t *gw, gw_out_t *out)
{
    size_t before = gw_queue_push (&gw->out, out);
    if (before == 0) {
        pthread_mutex_lock (&gw->start_lock);
        if (gw->context)
            lws_cancel_service (gw->context);
        pthread_mutex_unlock (&gw->start_lock);
    }
}

//  Bridge thread: counts an answer's bytes in the handoff to the lws
//  thread, when they fit out_total. A small answer (an error) always fits,
//  uncounted, so that every call is still answered.
bool
gw_handoff_charge (sb_gateway_t *gw, gw_out_t *out)
{
    size_t len = out->buf ? out->buf->len : 0;
    if (len <= SB_GW_HANDOFF_SMALL)
        return true;
    int_fast64_t now = atomic_load (&gw->stats.handoff_bytes);
    if ((uint64_t) now + len > gw->out_total)
        return false;
    now = atomic_fetch_add (&gw->stats.handoff_bytes, (int_fast64_t) len) + (int_fast64_t) len;
    out->handoff = len;
    int_fast64_t peak = atomic_load (&gw->stats.handoff_peak);
    while (now > peak && !atomic_compare_exchange_weak (&gw->stats.handoff_peak, &peak, now))
        ;
    return true;
}

//  lws thread: the answer has arrived.
void
gw_handoff_release (sb_gateway_t *gw, gw_out_t *out)
{
    if (out->handoff) {
        atomic_fetch_sub (&gw->stats.handoff_bytes, (int_fast64_t) out->handoff);
        out->handoff = 0;
    }
}

//  Bridge thread.
void
gw_to_lws_chain (sb_gateway_t *gw, gw_out_t *head, gw_out_t *tail, size_t n)
{
    if (!head)
        return;
    gw_queue_t *q = &gw->out;
    tail->next = NULL;
    pthread_mutex_lock (&q->lock);
    size_t before = q->count;
    q->count += n;
    if (q->tail)
        ((gw_out_t *) q->tail)->next = head;
    else
        q->head = head;
    q->tail = tail;
    pthread_mutex_unlock (&q->lock);
    if (before == 0) {
        pthread_mutex_lock (&gw->start_lock);
        if (gw->context)
            lws_cancel_service (gw->context);
        pthread_mutex_unlock (&gw->start_lock);
    }
}

/* ------------------------------------------------------------------ */
/*  Token */

int
sb_gateway_token_load (const char *data_dir, char out [65], char *err, size_t err_len)
{
    char path [4200], tmp [4300];
    snprintf (path, sizeof path, "%s/token", data_dir);
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            struct stat st;
            char buf [128];
            ssize_t n = fstat (fd, &st) == 0 ? read (fd, buf, sizeof buf - 1) : -1;
            close (fd);
            if (n < 0) {
                snprintf (err, err_len, "cannot read %s: %s", path, strerror (errno));
                return -1;
            }
            buf [n] = 0;
            buf [strcspn (buf, "\r\n")] = 0;
            size_t len = strlen (buf);
            if (len < 32 || len > 64 || strspn (buf, "0123456789abcdefABCDEF") != len) {
                snprintf (err, err_len, "%s is not a token (32 to 64 hex digits); delete it "
                          "and a new one is made at the next start", path);
                return -1;
            }
            /* someone made it readable by others: the token is a password */
            if ((st.st_mode & 077) && chmod (path, 0600) == 0)
                sb_warn ("gateway", "%s was readable by others; mode set to 0600", path);
            memcpy (out, buf, len + 1);
            return 0;
        }
        if (errno != ENOENT) {
            snprintf (err, err_len, "cannot open %s: %s", path, strerror (errno));
            return -1;
        }
        /* first start: write a fresh token to a private temporary file and
           link it into place, so a reader never sees half a token and two
           starters agree on one */
        uint8_t raw [32];
        randombytes_buf (raw, sizeof raw);
        char hex [65];
        sodium_bin2hex (hex, sizeof hex, raw, sizeof raw);
        sodium_memzero (raw, sizeof raw);
        snprintf (tmp, sizeof tmp, "%s/.token.%d", data_dir, (int) getpid ());
        unlink (tmp);
        fd = open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            snprintf (err, err_len, "cannot create %s: %s", tmp, strerror (errno));
            return -1;
        }
        hex [64] = '\n';
        bool ok = write (fd, hex, 65) == 65 && fsync (fd) == 0;
        close (fd);
        if (!ok) {
            unlink (tmp);
            snprintf (err, err_len, "cannot write %s: %s", tmp, strerror (errno));
            return -1;
        }
        int rc = link (tmp, path);
        int saved = errno;
        unlink (tmp);
        if (rc != 0 && saved != EEXIST) {
            snprintf (err, err_len, "cannot create %s: %s", path, strerror (saved));
            return -1;
        }
    }
    snprintf (err, err_len, "cannot create %s", path);
    return -1;
}

bool
sb_gateway_token_ok (const char *token, const char *given, size_t len)
{
    size_t tlen = strlen (token);
    /* the length is no secret (it is fixed); the bytes are compared in
       constant time */
    if (!given || len != tlen)
        return false;
    return sodium_memcmp (token, given, tlen) == 0;
}

/* ------------------------------------------------------------------ */
/*  Host allowlist */

//  The host part of "name:port", "[v6]:port", "name" or "[v6]".
static void
s_host_part (const char *in, char *out, size_t n)
{
    const char *end;
    if (in [0] == '[') {
        in++;
        end = strchr (in, ']');
        if (!end)
            end = in + strlen (in);
    }
    else {
        /* one colon: name:port; more: a bare v6 address */
        const char *first = strchr (in, ':');
        const char *last = strrchr (in, ':');
        end = first && first == last ? first : in + strlen (in);
    }
    size_t len = (size_t) (end - in);
    if (len >= n)
        len = n - 1;
    memcpy (out, in, len);
    out [len] = 0;
    /* a trailing dot names the same host */
    if (len > 0 && out [len - 1] == '.')
        out [len - 1] = 0;
}

bool
sb_gateway_host_ok (const char *host, const char *bound, const char *const *extra)
{
    if (!host || !*host)
        return false;
    char h [256], b [256];
    s_host_part (host, h, sizeof h);
    if (!*h)
        return false;
    if (strcasecmp (h, "localhost") == 0 || strcmp (h, "127.0.0.1") == 0 || strcmp (h, "::1") == 0)
        return true;
    if (bound && *bound) {
        s_host_part (bound, b, sizeof b);
        if (*b && strcmp (b, "0.0.0.0") != 0 && strcmp (b, "::") != 0 && strcasecmp (h, b) == 0)
            return true;
    }
    for (size_t k = 0; extra && extra [k]; k++)
        if (strcasecmp (h, extra [k]) == 0)
            return true;
    return false;
}

bool
sb_gateway_addr_loopback (const char *addr)
{
    char h [256];
    s_host_part (addr, h, sizeof h);
    if (strcasecmp (h, "localhost") == 0 || strcmp (h, "::1") == 0)
        return true;
    struct in_addr a4;
    if (inet_pton (AF_INET, h, &a4) == 1)
        return (ntohl (a4.s_addr) >> 24) == 127;
    return false;
}

/* ------------------------------------------------------------------ */
/*  Start and stop */

//  The UI folder: $SWITCHBOARD_UI, else gateway/ui next to the binary's
//  folder (build/switchboard -> gateway/ui in a clone), else the binary's
//  own folder's gateway/ui, else share/switchboard/ui beside bin/.
static void
s_find_ui (const char *given, char *out, size_t n)
{
    out [0] = 0;
    const char *env = getenv ("SWITCHBOARD_UI");
    char exe [4096], cand [4300];
    struct stat st;
    if (given && *given) {
        snprintf (out, n, "%s", given);
        return;
    }
    if (env && *env) {
        snprintf (out, n, "%s", env);
        return;
    }
    if (!realpath ("/proc/self/exe", exe))
        return;
    char *slash = strrchr (exe, '/');
    if (!slash)
        return;
    *slash = 0;
    const char *rel [] = { "/../gateway/ui", "/gateway/ui", "/../share/switchboard/ui" };
    for (size_t k = 0; k < sizeof rel / sizeof rel [0]; k++) {
        snprintf (cand, sizeof cand, "%s%s", exe, rel [k]);
        char real [4096];
        if (stat (cand, &st) == 0 && S_ISDIR (st.st_mode) && realpath (cand, real)) {
            snprintf (out, n, "%s", real);
            return;
        }
    }
}

sb_gateway_t *
sb_gateway_start (const sb_gateway_config_t *cfg, char *err, size_t err_len)
{
    if (sodium_init () < 0) {
        snprintf (err, err_len, "libsodium failed to start");
        return NULL;
    }
    if (!!cfg->tls_cert != !!cfg->tls_key) {
        snprintf (err, err_len, "TLS needs both --tls-cert and --tls-key");
        return NULL;
    }
    sb_gateway_t *gw = calloc (1, sizeof *gw);
    if (!gw) {
        snprintf (err, err_len, "out of memory");
        return NULL;
    }
    gw->cfg = *cfg;
    gw->in_fd = -1;
    /* the caller's list may not outlive this call */
    for (size_t k = 0; cfg->allow_hosts && cfg->allow_hosts [k] && k < 16; k++) {
        snprintf (gw->allow [k], sizeof gw->allow [k], "%s", cfg->allow_hosts [k]);
        gw->allow_ptrs [k] = gw->allow [k];
    }
    gw->cfg.allow_hosts = gw->allow_ptrs;
    snprintf (gw->data_dir, sizeof gw->data_dir, "%s", cfg->data_dir);
    const char *colon = strrchr (cfg->http, ':');
    size_t alen = colon ? (size_t) (colon - cfg->http) : strlen (cfg->http);
    if (alen >= sizeof gw->bind_addr)
        alen = sizeof gw->bind_addr - 1;
    memcpy (gw->bind_addr, cfg->http, alen);
    gw->bind_addr [alen] = 0;
    if (gw->bind_addr [0] == '[') {     /* [::1] -> ::1 for lws */
        memmove (gw->bind_addr, gw->bind_addr + 1, strlen (gw->bind_addr));
        char *rb = strchr (gw->bind_addr, ']');
        if (rb)
            *rb = 0;
    }
    gw->port = colon ? atoi (colon + 1) : 8080;
    gw->tls = cfg->tls_cert != NULL;
    gw->max_conns = cfg->max_conns ? cfg->max_conns : SB_GW_MAX_CONNS_DEFAULT;
    gw->max_per_addr = cfg->max_per_addr ? cfg->max_per_addr : SB_GW_MAX_PER_ADDR_DEFAULT;
    gw->out_max = cfg->out_max ? cfg->out_max : SB_GW_OUT_MAX_DEFAULT;
    gw->out_total = cfg->out_total ? cfg->out_total : SB_GW_OUT_TOTAL_DEFAULT;
    if (gw->out_total < gw->out_max)
        gw->out_total = gw->out_max;
    gw->idle_s = cfg->idle_s ? cfg->idle_s : SB_GW_IDLE_PING_S;
    if (gw->idle_s > SB_GW_IDLE_MAX_S)
        gw->idle_s = SB_GW_IDLE_MAX_S;
    s_find_ui (cfg->ui_dir, gw->ui_dir, sizeof gw->ui_dir);
    gw_queue_init (&gw->in);
    gw_queue_init (&gw->out);
    pthread_mutex_init (&gw->start_lock, NULL);
    pthread_cond_init (&gw->start_cond, NULL);
    atomic_init (&gw->stopping, false);

    if (sb_gateway_token_load (gw->data_dir, gw->token, err, err_len))
        goto fail;
    gw->in_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (gw->in_fd < 0) {
        snprintf (err, err_len, "eventfd: %s", strerror (errno));
        goto fail;
    }
    gw->bridge = gw_bridge_start (gw, err, err_len);
    if (!gw->bridge)
        goto fail;
    if (pthread_create (&gw->lws_thread, NULL, gw_lws_main, gw) != 0) {
        snprintf (err, err_len, "cannot start the gateway thread");
        goto fail;
    }
    gw->lws_started = true;
    pthread_mutex_lock (&gw->start_lock);
    while (gw->start_state == 0)
        pthread_cond_wait (&gw->start_cond, &gw->start_lock);
    pthread_mutex_unlock (&gw->start_lock);
    if (gw->start_state < 0) {
        snprintf (err, err_len, "%s", gw->start_err);
        goto fail;
    }
    if (!gw->ui_dir [0])
        sb_warn ("gateway", "no UI folder found (gateway/ui next to the binary, or $SWITCHBOARD_UI); "
                 "/ serves a note instead");
    sb_info ("gateway", "listening %s://%s:%d ui=%s", gw->tls ? "https" : "http",
             gw->bind_addr, gw->port, gw->ui_dir [0] ? gw->ui_dir : "-");
    return gw;
fail:
    sb_gateway_stop (&gw);
    return NULL;
}

int
sb_gateway_port (const sb_gateway_t *gw)
{
    return gw->port;
}

const char *
sb_gateway_token (const sb_gateway_t *gw)
{
    return gw->token;
}

const char *
sb_gateway_scheme (const sb_gateway_t *gw)
{
    return gw->tls ? "https" : "http";
}

void
sb_gateway_stop (sb_gateway_t **gw_p)
{
    if (!gw_p || !*gw_p)
        return;
    sb_gateway_t *gw = *gw_p;
    atomic_store (&gw->stopping, true);
    if (gw->lws_started) {
        /* the context pointer is set before start_state is; the lws
           thread sees `stopping` on its next wake-up */
        pthread_mutex_lock (&gw->start_lock);
        struct lws_context *ctx = gw->context;
        pthread_mutex_unlock (&gw->start_lock);
        if (ctx)
            lws_cancel_service (ctx);
        pthread_join (gw->lws_thread, NULL);
    }
    gw_bridge_stop (&gw->bridge);
    for (gw_in_t *in = gw_queue_take (&gw->in); in; ) {
        gw_in_t *next = in->next;
        gw_in_free (in);
        in = next;
    }
    for (gw_out_t *out = gw_queue_take (&gw->out); out; ) {
        gw_out_t *next = out->next;
        gw_out_free (out);
        out = next;
    }
    if (gw->in_fd >= 0)
        close (gw->in_fd);
    sodium_memzero (gw->token, sizeof gw->token);
    pthread_mutex_destroy (&gw->start_lock);
    pthread_cond_destroy (&gw->start_cond);
    pthread_mutex_destroy (&gw->in.lock);
    pthread_mutex_destroy (&gw->out.lock);
    free (gw);
    *gw_p = NULL;
}

/*  bus/client.c — DEALER-side bus client, publisher and subscriber. */
#include "bus/client.h"
#include "bus/curve.h"
#include "common/log.h"

#include <czmq.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SB_CLIENT_HWM 10000
#define SB_CLIENT_SNDTIMEO_MS 5000
#define MAX_FRAMES 4
/*  A header's size limit, as sb_header_parse enforces it (bus/envelope.c). */
#define S_HEADER_MAX 4096

struct sb_bus {
    zsock_t *sock;
    char *endpoint;
    char name [129];
    sb_enc_t *enc;              /* header encoder, reused */
    zlistx_t *queue;            /* messages received while sb_bus_call waited */
    /* registration, kept to register again after a broker restart */
    bool registered;
    char service [33];
    char instance [129];
    uint8_t *caps;
    size_t caps_len;
    char ready_id [33];         /* id of an outstanding bus.ready */
    int64_t last_rx;            /* last frame from the broker (mono ms) */
    int64_t last_hb;            /* last heartbeat we sent */
    uint64_t malformed;
    sb_ratelimit_t rl;
    /* several endpoints ("EP1,EP2"): one connected at a time, the next
       once it disconnects (s_failover) */
    zsock_t *monitor;           /* the socket's disconnections; NULL: one endpoint */
    size_t ep_at;               /* the connected one, an index into the list */
    char ep_now [SB_BUS_ENDPOINT_MAX + 1];
    bool ep_up;                 /* ep_now was connected once */
    bool keyed;                 /* keys of its own (sb_bus_new_curve), not the process's */
    bool switched;              /* went on through another since the last send */
    sb_bus_failover_fn *on_failover;
    void *failover_arg;
};

/* ------------------------------------------------------------------ */

void
sb_msg_destroy (sb_msg_t **msg_p)
{
    if (msg_p && *msg_p) {
        sb_msg_t *msg = *msg_p;
        sb_doc_destroy (&msg->doc);
        free (msg->route);
        free (msg);
        *msg_p = NULL;
    }
}

bool
sb_msg_is_error (const sb_msg_t *msg)
{
    return msg && strcmp (msg->h.type, "error") == 0;
}

const char *
sb_msg_error_code (const sb_msg_t *msg)
{
    const char *s = sb_msg_is_error (msg) ? sb_get_str (msg->body, "code") : NULL;
    return s ? s : "";
}

const char *
sb_msg_error_message (const sb_msg_t *msg)
{
    const char *s = sb_msg_is_error (msg) ? sb_get_str (msg->body, "message") : NULL;
    return s ? s : "";
}

sb_msg_t *
sb_msg_parse (const uint8_t *hbuf, size_t hlen, const uint8_t *bbuf, size_t blen, sb_verr_t *err)
{
    sb_header_t h;
    if (sb_header_parse (hbuf, hlen, &h, err))
        return NULL;
    const sb_type_t *type = sb_schema_find (h.type, strlen (h.type));
    if (!type) {
        if (err) {
            err->code = SB_E_unknown_type;
            snprintf (err->message, sizeof err->message, "unknown message type '%s'", h.type);
        }
        return NULL;
    }
    sb_doc_t *doc = sb_decode_type (type, bbuf, blen, err);
    if (!doc)
        return NULL;
    sb_msg_t *msg = calloc (1, sizeof *msg);
    if (!msg) {
        sb_doc_destroy (&doc);
        return NULL;
    }
    msg->h = h;
    msg->type = type;
    msg->doc = doc;
    msg->body = sb_doc_root (doc);
    return msg;
}

int64_t
sb_bus_max_frame (void)
{
    size_t n;
    const sb_type_t *types = sb_schema_all (&n);
    int64_t max = S_HEADER_MAX;
    for (size_t k = 0; k < n; k++) {
        int64_t cap = types [k].max_bytes ? types [k].max_bytes : SB_MAX_MSG_BYTES;
        if (cap > max)
            max = cap;
    }
    return max;
}

/* ------------------------------------------------------------------ */

static zsock_t *
s_dealer_keyed (const char *endpoint, zcert_t *cert, const char *server_public);

static zsock_t *
s_dealer (const char *endpoint)
{
    return s_dealer_keyed (endpoint, NULL, NULL);
}

static zsock_t *
s_dealer_keyed (const char *endpoint, zcert_t *cert, const char *server_public)
{
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    if (!sock)
        return NULL;
    zsock_set_sndhwm (sock, SB_CLIENT_HWM);
    zsock_set_rcvhwm (sock, SB_CLIENT_HWM);
    zsock_set_linger (sock, 0);
    /* A full queue makes a sender wait (backpressure, e.g. a model stream
       faster than its reader) rather than drop a chunk that the reader
       would then see as a gap; a broker gone for good fails the send
       after this long instead of blocking forever. */
    zsock_set_sndtimeo (sock, SB_CLIENT_SNDTIMEO_MS);
    /* Over ipc or tcp the broker may be anyone's: refuse a frame no
       schema allows before it is allocated. */
    zsock_set_maxmsgsize (sock, (int) sb_bus_max_frame ());
    if (cert) {
        zcert_apply (cert, sock);
        zsock_set_curve_serverkey (sock, server_public);
    }
    else
        sb_curve_apply_client (sock, endpoint);
    if (zsock_connect (sock, "%s", endpoint)) {
        zsock_destroy (&sock);
        return NULL;
    }
    return sock;
}

/*  The k-th endpoint of a comma-separated list into out (wrapping
    around); false when it does not fit. */
static bool
s_endpoint_at (const char *list, size_t k, char *out, size_t n)
{
    size_t count = 1;
    for (const char *c = list; *c; c++)
        count += *c == ',';
    k %= count;
    const char *p = list;
    while (k--)
        p = strchr (p, ',') + 1;
    size_t len = strcspn (p, ",");
    if (len == 0 || len >= n)
        return false;
    memcpy (out, p, len);
    out [len] = 0;
    return true;
}

/*  With several endpoints, the one connected is watched; when its peer
    goes (a node's kill -9 closes its end at once), or when it cannot be
    reached at all (its first connect is retried), the socket connects to
    the next instead, so that a worker or a CLI whose node died goes on
    through another. What was queued for a peer that was connected is lost
    with it: callers retry as they do after any lost reply (heartbeats,
    claims). True when the one left was never reached, so nothing sent
    left this process: sb_bus_call then sends its request again. */
static bool
s_failover (sb_bus_t *bus)
{
    zmsg_t *ev;
    bool gone = false;
    while (bus->monitor && (zsock_events (bus->monitor) & ZMQ_POLLIN) && (ev = zmsg_recv (bus->monitor))) {
        zframe_t *f = zmsg_first (ev);
        uint16_t event = 0;
        if (f && zframe_size (f) >= 2)
            memcpy (&event, zframe_data (f), 2);
        bus->ep_up = bus->ep_up || event == ZMQ_EVENT_CONNECTED;
        gone = gone || event == ZMQ_EVENT_DISCONNECTED || (event == ZMQ_EVENT_CONNECT_RETRIED && !bus->ep_up);
        zmsg_destroy (&ev);
    }
    if (!gone)
        return false;
    char next [SB_BUS_ENDPOINT_MAX + 1];
    if (!s_endpoint_at (bus->endpoint, bus->ep_at + 1, next, sizeof next))
        return false;
    zsock_disconnect (bus->sock, "%s", bus->ep_now);
    /* the next node may have a server key of its own (--server-key K1,K2) */
    if (!bus->keyed)
        sb_curve_apply_client (bus->sock, next);
    if (zsock_connect (bus->sock, "%s", next) != 0) {
        if (!bus->keyed)
            sb_curve_apply_client (bus->sock, bus->ep_now);
        zsock_connect (bus->sock, "%s", bus->ep_now);
        return false;
    }
    sb_warn (bus->name, "the bus at %s %s; going on through %s", bus->ep_now,
             bus->ep_up ? "went away" : "cannot be reached", next);
    bool unsent = !bus->ep_up;
    bus->ep_at++;
    bus->ep_up = false;
    bus->switched = true;
    snprintf (bus->ep_now, sizeof bus->ep_now, "%s", next);
    return unsent;
}

sb_bus_t *
sb_bus_new (const char *endpoint, const char *name)
{
    return sb_bus_new_curve (endpoint, name, NULL, NULL);
}

sb_bus_t *
sb_bus_new_curve (const char *endpoint, const char *name, zcert_t *cert, const char *server_public)
{
    sb_bus_t *bus = calloc (1, sizeof *bus);
    if (!bus)
        return NULL;
    bus->endpoint = strdup (endpoint);
    bus->enc = sb_enc_new ();
    bus->queue = zlistx_new ();
    if (!s_endpoint_at (endpoint, 0, bus->ep_now, sizeof bus->ep_now)) {
        sb_bus_destroy (&bus);
        return NULL;
    }
    bus->keyed = cert && server_public;
    bus->sock = bus->keyed ? s_dealer_keyed (bus->ep_now, cert, server_public) : s_dealer (bus->ep_now);
    if (bus->sock && strchr (endpoint, ',')) {
        static _Atomic uint64_t made;     /* a name never used before (cluster/forward.c) */
        char addr [80];
        snprintf (addr, sizeof addr, "inproc://sb-bus-failover-%p-%llu", (void *) bus, (unsigned long long) ++made);
        if (zmq_socket_monitor (zsock_resolve (bus->sock), addr,
                                ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED) == 0) {
            bus->monitor = zsock_new (ZMQ_PAIR);
            if (bus->monitor && zsock_connect (bus->monitor, "%s", addr) != 0)
                zsock_destroy (&bus->monitor);
        }
    }
    snprintf (bus->name, sizeof bus->name, "%s", name ? name : "client");
    if (!bus->endpoint || !bus->enc || !bus->queue || !bus->sock) {
        sb_bus_destroy (&bus);
        return NULL;
    }
    bus->last_rx = sb_mono_ms ();
    return bus;
}

void
sb_bus_destroy (sb_bus_t **bus_p)
{
    if (!bus_p || !*bus_p)
        return;
    sb_bus_t *bus = *bus_p;
    if (bus->registered && bus->sock) {
        /* leave cleanly so the broker forgets us at once */
        sb_bus_send (bus, "bus.bye", NULL, NULL, (const uint8_t *) "\x80", 1, 0, NULL);
    }
    if (bus->queue) {
        sb_msg_t *msg;
        while ((msg = zlistx_detach (bus->queue, NULL)))
            sb_msg_destroy (&msg);
        zlistx_destroy (&bus->queue);
    }
    zsock_destroy (&bus->monitor);
    zsock_destroy (&bus->sock);
    sb_enc_destroy (&bus->enc);
    free (bus->endpoint);
    free (bus->caps);
    free (bus);
    *bus_p = NULL;
}

void *
sb_bus_socket (sb_bus_t *bus)
{
    return zsock_resolve (bus->sock);
}

bool
sb_bus_has_queued (sb_bus_t *bus)
{
    return zlistx_size (bus->queue) > 0;
}

const char *
sb_bus_name (sb_bus_t *bus)
{
    return bus->name;
}

uint64_t
sb_bus_malformed (sb_bus_t *bus)
{
    return bus->malformed;
}

/*  Sends frames [route?][header][body] without blocking. */
static int
s_send_frames (sb_bus_t *bus, const uint8_t *route, size_t route_len, const sb_header_t *h,
               const uint8_t *body, size_t len)
{
    void *s = zsock_resolve (bus->sock);
    sb_header_encode (h, bus->enc);
    size_t hlen;
    const uint8_t *hbuf = sb_enc_data (bus->enc, &hlen);
    if (route && zmq_send (s, route, route_len, ZMQ_SNDMORE) < 0)
        return -1;
    if (zmq_send (s, hbuf, hlen, ZMQ_SNDMORE) < 0)
        return -1;
    if (zmq_send (s, body, len, 0) < 0)
        return -1;
    return 0;
}

void
sb_bus_on_failover (sb_bus_t *bus, sb_bus_failover_fn *fn, void *arg)
{
    bus->on_failover = fn;
    bus->failover_arg = arg;
}

int
sb_bus_send (sb_bus_t *bus, const char *type, const char *key, const char *to,
             const uint8_t *body, size_t len, uint64_t deadline_ms, char *id_out)
{
    s_failover (bus);
    if (bus->switched) {
        bus->switched = false;          /* first, so that what the hook sends does not call it again */
        if (bus->on_failover)
            bus->on_failover (bus, bus->failover_arg);
    }
    sb_header_t h;
    sb_header_init (&h, type, bus->name);
    if (key)
        snprintf (h.key, sizeof h.key, "%s", key);
    if (to)
        snprintf (h.to, sizeof h.to, "%s", to);
    h.deadline = deadline_ms;
    if (id_out)
        memcpy (id_out, h.id, SB_ULID_LEN + 1);
    return s_send_frames (bus, NULL, 0, &h, body, len);
}

int
sb_bus_reply_to (sb_bus_t *bus, const uint8_t *route, size_t route_len, const sb_header_t *req,
                 const char *type, uint64_t seq, const uint8_t *body, size_t len)
{
    sb_header_t h;
    sb_header_init (&h, type, bus->name);
    memcpy (h.corr, req->id, sizeof h.corr);
    memcpy (h.key, req->key, sizeof h.key);
    memcpy (h.trace, req->trace, sizeof h.trace);
    h.seq = seq;
    return s_send_frames (bus, route, route_len, &h, body, len);
}

static int
s_reply_typed (sb_bus_t *bus, const sb_msg_t *req, const char *suffix, uint64_t seq,
               const uint8_t *body, size_t len)
{
    char type [80];
    snprintf (type, sizeof type, "%s%s", req->h.type, suffix);
    return sb_bus_reply_to (bus, req->route, req->route_len, &req->h, type, seq, body, len);
}

int
sb_bus_reply (sb_bus_t *bus, const sb_msg_t *req, const uint8_t *body, size_t len)
{
    return s_reply_typed (bus, req, ".ok", 0, body, len);
}

int
sb_bus_chunk (sb_bus_t *bus, const sb_msg_t *req, uint64_t seq, const uint8_t *body, size_t len)
{
    return s_reply_typed (bus, req, ".chunk", seq, body, len);
}

int
sb_bus_error (sb_bus_t *bus, const sb_msg_t *req, sb_err_t code, const char *fmt, ...)
{
    char message [1024];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (message, sizeof message, fmt, ap);
    va_end (ap);
    sb_enc_t *enc = sb_enc_new ();
    if (!enc)
        return -1;
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "code", sb_err_name (code));
    sb_enc_kstr (enc, "message", message);
    sb_enc_kbool (enc, "retryable", sb_err_retryable (code));
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *body = sb_enc_data (enc, &len);
    int rc = sb_bus_reply_to (bus, req->route, req->route_len, &req->h, "error", 0, body, len);
    sb_enc_destroy (&enc);
    return rc;
}

/* ------------------------------------------------------------------ */

static void
s_send_ready (sb_bus_t *bus)
{
    sb_enc_t *enc = sb_enc_new ();
    if (!enc)
        return;
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "service", bus->service);
    sb_enc_kstr (enc, "instance", bus->instance);
    sb_enc_kuint (enc, "protocol", SB_PROTOCOL_VERSION);
    if (bus->caps && bus->caps_len) {
        sb_enc_key (enc, "capabilities");
        sb_enc_raw (enc, bus->caps, bus->caps_len);
    }
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *body = sb_enc_data (enc, &len);
    sb_bus_send (bus, "bus.ready", NULL, NULL, body, len, 0, bus->ready_id);
    sb_enc_destroy (&enc);
}

/*  Reads one multipart message from the socket. Returns the frame count
    (0 when nothing was waiting), frames beyond MAX_FRAMES are dropped and
    reported as MAX_FRAMES + 1. */
static int
s_read_frames (void *s, zmq_msg_t *frames, int flags)
{
    int n = 0;
    int more = 1;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_t *f = n < MAX_FRAMES ? &frames [n] : &tmp;
        zmq_msg_init (f);
        if (zmq_msg_recv (f, s, n == 0 ? flags : 0) < 0) {
            zmq_msg_close (f);
            return n == 0 ? 0 : -1;
        }
        more = zmq_msg_more (f);
        if (n >= MAX_FRAMES)
            zmq_msg_close (f);
        n++;
        flags = 0;
    }
    return n;
}

static void
s_close_frames (zmq_msg_t *frames, int n)
{
    for (int k = 0; k < n && k < MAX_FRAMES; k++)
        zmq_msg_close (&frames [k]);
}

static void
s_malformed (sb_bus_t *bus, const char *what, const sb_verr_t *err)
{
    bus->malformed++;
    if (sb_ratelimit_ok (&bus->rl, 5))
        sb_warn (bus->name, "dropped malformed message from broker kind=%s error=\"%s\"",
                 what, err ? err->message : "");
}

/*  Reads and classifies one message: NULL when nothing is ready or the
    message was consumed here (heartbeat, registration, malformed). */
static sb_msg_t *
s_read_one (sb_bus_t *bus, int flags, bool *got_any)
{
    zmq_msg_t frames [MAX_FRAMES];
    int n = s_read_frames (zsock_resolve (bus->sock), frames, flags);
    if (n <= 0)
        return NULL;
    *got_any = true;
    bus->last_rx = sb_mono_ms ();
    if (n != 2 && n != 3) {
        s_close_frames (frames, n);
        s_malformed (bus, "frames", NULL);
        return NULL;
    }
    int off = n - 2;
    sb_verr_t err;
    sb_msg_t *msg = sb_msg_parse (zmq_msg_data (&frames [off]), zmq_msg_size (&frames [off]),
                                  zmq_msg_data (&frames [off + 1]), zmq_msg_size (&frames [off + 1]),
                                  &err);
    if (!msg) {
        s_close_frames (frames, n);
        s_malformed (bus, "message", &err);
        return NULL;
    }
    if (n == 3) {
        msg->route_len = zmq_msg_size (&frames [0]);
        msg->route = malloc (msg->route_len ? msg->route_len : 1);
        if (msg->route)
            memcpy (msg->route, zmq_msg_data (&frames [0]), msg->route_len);
    }
    s_close_frames (frames, n);

    /* bus traffic handled here */
    if (strcmp (msg->h.type, "bus.heartbeat") == 0) {
        sb_msg_destroy (&msg);
        return NULL;
    }
    if (bus->ready_id [0] && strcmp (msg->h.corr, bus->ready_id) == 0) {
        if (sb_msg_is_error (msg))
            sb_error (bus->name, "registration refused service=%s code=%s message=\"%s\"",
                      bus->service, sb_msg_error_code (msg), sb_msg_error_message (msg));
        else
            sb_info (bus->name, "registered service=%s instance=%s", bus->service, bus->instance);
        /* sb_bus_register waits for this reply itself */
        return msg;
    }
    if (sb_msg_is_error (msg) && sb_err_from_name (sb_msg_error_code (msg)) == SB_E_not_registered) {
        if (bus->registered) {
            sb_info (bus->name, "broker does not know us; registering again service=%s", bus->service);
            s_send_ready (bus);
        }
        sb_msg_destroy (&msg);
        return NULL;
    }
    return msg;
}

int64_t
sb_bus_tick (sb_bus_t *bus)
{
    if (!bus->registered)
        return SB_HEARTBEAT_MS;
    int64_t now = sb_mono_ms ();
    if (now - bus->last_rx > SB_HEARTBEAT_MS * SB_HEARTBEAT_MISSES) {
        /* The broker went silent: it restarted, or it was stopped long
           enough to forget us. The socket reconnects by itself (and so
           keeps its place in the caller's poll set); registering again
           makes a broker that forgot us learn us back. */
        sb_warn (bus->name, "broker silent for %lld ms; registering again endpoint=%s",
                 (long long) (now - bus->last_rx), bus->endpoint);
        s_send_ready (bus);
        bus->last_rx = now;
    }
    if (now - bus->last_hb >= SB_HEARTBEAT_MS) {
        sb_bus_send (bus, "bus.heartbeat", NULL, NULL, (const uint8_t *) "\x80", 1, 0, NULL);
        bus->last_hb = now;
    }
    int64_t next = bus->last_hb + SB_HEARTBEAT_MS - now;
    return next > 0 ? next : 0;
}

sb_msg_t *
sb_bus_recv (sb_bus_t *bus, int timeout_ms)
{
    sb_msg_t *msg = zlistx_detach (bus->queue, NULL);
    if (msg)
        return msg;
    s_failover (bus);
    int64_t until = timeout_ms < 0 ? -1 : sb_mono_ms () + timeout_ms;
    while (true) {
        bool got = false;
        msg = s_read_one (bus, ZMQ_DONTWAIT, &got);
        if (msg) {
            if (bus->ready_id [0] && strcmp (msg->h.corr, bus->ready_id) == 0) {
                bus->ready_id [0] = 0;      /* a re-registration answer */
                sb_msg_destroy (&msg);
                continue;
            }
            return msg;
        }
        if (got)
            continue;
        int64_t wait = until < 0 ? SB_HEARTBEAT_MS : until - sb_mono_ms ();
        if (wait <= 0 && timeout_ms != 0)
            return NULL;
        if (timeout_ms == 0)
            return NULL;
        int64_t tick = sb_bus_tick (bus);
        if (bus->registered && tick < wait)
            wait = tick;
        zmq_pollitem_t item = { zsock_resolve (bus->sock), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, (long) wait) < 0 && errno == EINTR)
            return NULL;
    }
}

int
sb_bus_register (sb_bus_t *bus, const char *service, const char *instance,
                 const uint8_t *caps, size_t caps_len, int timeout_ms, sb_verr_t *err)
{
    snprintf (bus->service, sizeof bus->service, "%s", service);
    snprintf (bus->instance, sizeof bus->instance, "%s", instance);
    snprintf (bus->name, sizeof bus->name, "%s", instance);
    free (bus->caps);
    bus->caps = NULL;
    bus->caps_len = 0;
    if (caps && caps_len) {
        bus->caps = malloc (caps_len);
        if (bus->caps) {
            memcpy (bus->caps, caps, caps_len);
            bus->caps_len = caps_len;
        }
    }
    s_send_ready (bus);
    char want [33];
    memcpy (want, bus->ready_id, sizeof want);
    int64_t until = sb_mono_ms () + timeout_ms;
    while (sb_mono_ms () < until) {
        bool got = false;
        sb_msg_t *msg = s_read_one (bus, ZMQ_DONTWAIT, &got);
        if (msg && strcmp (msg->h.corr, want) == 0) {
            bus->ready_id [0] = 0;
            int rc = 0;
            if (sb_msg_is_error (msg)) {
                if (err) {
                    err->code = sb_err_from_name (sb_msg_error_code (msg));
                    snprintf (err->message, sizeof err->message, "%s", sb_msg_error_message (msg));
                }
                rc = -1;
            }
            else
                bus->registered = true;
            sb_msg_destroy (&msg);
            bus->last_rx = bus->last_hb = sb_mono_ms ();
            return rc;
        }
        if (msg)
            zlistx_add_end (bus->queue, msg);
        if (got)
            continue;
        zmq_pollitem_t item = { zsock_resolve (bus->sock), 0, ZMQ_POLLIN, 0 };
        zmq_poll (&item, 1, (long) (until - sb_mono_ms ()));
    }
    if (err) {
        err->code = SB_E_timeout;
        snprintf (err->message, sizeof err->message, "no answer from the broker at %s within %d ms",
                  bus->endpoint, timeout_ms);
    }
    return -1;
}

sb_msg_t *
sb_bus_call (sb_bus_t *bus, const char *type, const char *key, const uint8_t *body, size_t len,
             int timeout_ms)
{
    char id [SB_ULID_LEN + 1];
    uint64_t deadline = timeout_ms > 0 ? sb_now_ms () + (uint64_t) timeout_ms : 0;
    if (sb_bus_send (bus, type, key, NULL, body, len, deadline, id))
        return NULL;
    int64_t until = sb_mono_ms () + (timeout_ms > 0 ? timeout_ms : 24 * 3600 * 1000);
    while (true) {
        int64_t left = until - sb_mono_ms ();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return NULL;
        }
        bool got = false;
        sb_msg_t *msg = s_read_one (bus, ZMQ_DONTWAIT, &got);
        if (msg) {
            if (strcmp (msg->h.corr, id) == 0) {
                if (sb_type_has_suffix (msg->h.type, ".chunk")) {
                    sb_msg_destroy (&msg);
                    continue;
                }
                return msg;
            }
            zlistx_add_end (bus->queue, msg);
            continue;
        }
        if (got)
            continue;
        int64_t wait = left;
        if (bus->registered) {
            int64_t tick = sb_bus_tick (bus);
            if (tick < wait)
                wait = tick;
        }
        /* several endpoints: the one connected is looked at every 50 ms,
           and a request that never left goes again through the next */
        if (bus->monitor && wait > 50)
            wait = 50;
        if (s_failover (bus) && sb_bus_send (bus, type, key, NULL, body, len, deadline, id))
            return NULL;
        zmq_pollitem_t item = { zsock_resolve (bus->sock), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, (long) wait) < 0 && errno == EINTR) {
            return NULL;
        }
    }
}

/* ------------------------------------------------------------------ */
/*  Event plane */

struct sb_pub {
    zsock_t *sock;
    sb_enc_t *enc;
    char name [129];
};

sb_pub_t *
sb_pub_new (const char *endpoint, const char *name)
{
    sb_pub_t *pub = calloc (1, sizeof *pub);
    if (!pub)
        return NULL;
    pub->sock = zsock_new (ZMQ_PUB);
    pub->enc = sb_enc_new ();
    snprintf (pub->name, sizeof pub->name, "%s", name ? name : "pub");
    if (!pub->sock || !pub->enc) {
        sb_pub_destroy (&pub);
        return NULL;
    }
    zsock_set_sndhwm (pub->sock, 100000);
    zsock_set_linger (pub->sock, 1000);
    if (zsock_connect (pub->sock, "%s", endpoint)) {
        sb_pub_destroy (&pub);
        return NULL;
    }
    return pub;
}

void
sb_pub_destroy (sb_pub_t **pub_p)
{
    if (pub_p && *pub_p) {
        zsock_destroy (&(*pub_p)->sock);
        sb_enc_destroy (&(*pub_p)->enc);
        free (*pub_p);
        *pub_p = NULL;
    }
}

int
sb_pub_send (sb_pub_t *pub, const char *topic, const char *type, const char *key,
             const uint8_t *body, size_t len)
{
    sb_header_t h;
    sb_header_init (&h, type, pub->name);
    if (key)
        snprintf (h.key, sizeof h.key, "%s", key);
    sb_header_encode (&h, pub->enc);
    size_t hlen;
    const uint8_t *hbuf = sb_enc_data (pub->enc, &hlen);
    void *s = zsock_resolve (pub->sock);
    if (zmq_send (s, topic, strlen (topic), ZMQ_SNDMORE) < 0
    ||  zmq_send (s, hbuf, hlen, ZMQ_SNDMORE) < 0
    ||  zmq_send (s, body, len, 0) < 0)
        return -1;
    return 0;
}

struct sb_sub {
    zsock_t *sock;
    uint64_t malformed;
};

sb_sub_t *
sb_sub_new (const char *endpoint)
{
    return sb_sub_new_curve (endpoint, NULL, NULL);
}

sb_sub_t *
sb_sub_new_curve (const char *endpoint, zcert_t *cert, const char *server_public)
{
    sb_sub_t *sub = calloc (1, sizeof *sub);
    if (!sub)
        return NULL;
    sub->sock = zsock_new (ZMQ_SUB);
    if (!sub->sock) {
        free (sub);
        return NULL;
    }
    zsock_set_rcvhwm (sub->sock, 100000);
    zsock_set_linger (sub->sock, 0);
    zsock_set_maxmsgsize (sub->sock, (int) sb_bus_max_frame ());
    bool keyed = cert && server_public;
    if (keyed) {
        zcert_apply (cert, sub->sock);
        zsock_set_curve_serverkey (sub->sock, server_public);
    }
    /* several endpoints: subscribed to each (the nodes of a cluster each
       publish every session's entries, so a subscriber may see one twice;
       entries carry their seq), each with its own server key */
    size_t count = 1;
    for (const char *c = endpoint; *c; c++)
        count += *c == ',';
    char one [SB_BUS_ENDPOINT_MAX + 1];
    for (size_t k = 0; k < count; k++) {
        bool ok = s_endpoint_at (endpoint, k, one, sizeof one);
        if (ok && !keyed)
            sb_curve_apply_client (sub->sock, one);
        if (!ok || zsock_connect (sub->sock, "%s", one)) {
            sb_sub_destroy (&sub);
            return NULL;
        }
    }
    return sub;
}

void
sb_sub_destroy (sb_sub_t **sub_p)
{
    if (sub_p && *sub_p) {
        zsock_destroy (&(*sub_p)->sock);
        free (*sub_p);
        *sub_p = NULL;
    }
}

int
sb_sub_subscribe (sb_sub_t *sub, const char *prefix)
{
    zsock_set_subscribe (sub->sock, prefix);
    return 0;
}

void *
sb_sub_socket (sb_sub_t *sub)
{
    return zsock_resolve (sub->sock);
}

sb_msg_t *
sb_sub_recv (sb_sub_t *sub, int timeout_ms)
{
    void *s = zsock_resolve (sub->sock);
    int64_t until = sb_mono_ms () + (timeout_ms < 0 ? 0 : timeout_ms);
    while (true) {
        zmq_msg_t frames [MAX_FRAMES];
        int n = s_read_frames (s, frames, ZMQ_DONTWAIT);
        if (n == 3) {
            sb_verr_t err;
            sb_msg_t *msg = sb_msg_parse (zmq_msg_data (&frames [1]), zmq_msg_size (&frames [1]),
                                          zmq_msg_data (&frames [2]), zmq_msg_size (&frames [2]),
                                          &err);
            if (msg) {
                size_t tl = zmq_msg_size (&frames [0]);
                if (tl >= sizeof msg->topic)
                    tl = sizeof msg->topic - 1;
                memcpy (msg->topic, zmq_msg_data (&frames [0]), tl);
                msg->topic [tl] = 0;
            }
            else
                sub->malformed++;
            s_close_frames (frames, n);
            if (msg)
                return msg;
            continue;
        }
        if (n > 0) {
            s_close_frames (frames, n);
            sub->malformed++;
            continue;
        }
        int64_t wait = timeout_ms < 0 ? -1 : until - sb_mono_ms ();
        if (timeout_ms >= 0 && wait <= 0)
            return NULL;
        zmq_pollitem_t item = { s, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, (long) wait) <= 0 && timeout_ms >= 0 && sb_mono_ms () >= until)
            return NULL;
    }
}

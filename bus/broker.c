/*  bus/broker.c — the Majordomo-style broker, reduced to what switchboard
    needs (docs/architecture.md): registration, heartbeats both ways, LRU routing by
    the type's prefix, a pending table keyed by (route, id), the event-plane
    proxy and the tap.

    Nothing here blocks: every send is ZMQ_DONTWAIT with ROUTER_MANDATORY,
    so a reply to a vanished peer or a full queue is counted, never waited
    on. Frames that do not validate go nowhere and are counted by kind.

    What ZeroMQ holds for a peer is bounded in bytes, not only in messages
    (bus/outq.h): every body leaves as a message charged to its peer's
    account on the command plane, or to the plane's account on the event
    plane and the tap, and is not sent when it would pass the bound.

    This file: the broker's life, sending, and the command plane. The
    members (instances, services, bus.*, the timers) are in
    bus/broker_members.c, the event plane in bus/broker_events.c; what
    they share is bus/broker_impl.h. */
#include "bus/broker_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*  The names of the malformed-frame kinds, for the log and bus.stats. */
const char *const brk_malformed_names [M_COUNT] = {
    "frames", "header", "unknown_type", "body", "kind", "unmatched_reply",
    "event_frames", "event_header", "event_body"
};

/* ------------------------------------------------------------------ */

/*  The hex of p [0..n) into out (2n + 1 bytes). */
void
brk_hex (const uint8_t *p, size_t n, char *out)
{
    static const char hex [] = "0123456789abcdef";
    for (size_t k = 0; k < n; k++) {
        out [2 * k] = hex [p [k] >> 4];
        out [2 * k + 1] = hex [p [k] & 15];
    }
    out [2 * n] = 0;
}

/*  "a:b" into out (n bytes), cut as snprintf would cut it: the key of a
    pending request (a peer's identity in hex, then a header id). Hot:
    every request goes through it, so no printf. */
static void
s_join_key (char *out, size_t n, const char *a, const char *b)
{
    size_t k = 0;
    for (; *a && k + 1 < n; a++)
        out [k++] = *a;
    if (k + 1 < n)
        out [k++] = ':';
    for (; *b && k + 1 < n; b++)
        out [k++] = *b;
    out [k] = 0;
}

static void
s_service_destroy (void **item)
{
    service_t *svc = *item;
    if (svc) {
        zlistx_destroy (&svc->lru);
        free (svc);
        *item = NULL;
    }
}

static void
s_free_item (void **item)
{
    free (*item);
    *item = NULL;
}

/*  A byte count from the environment variable `name`, 0 when it is unset,
    empty or not a count (which is said once, in the log). */
static size_t
s_env_bytes (const char *name)
{
    const char *env = getenv (name);
    if (!env || !*env)
        return 0;
    char *end;
    unsigned long long v = strtoull (env, &end, 10);
    if (*end == 0)
        return (size_t) v;
    sb_warn (ACTOR, "ignoring %s=%s (want a byte count)", name, env);
    return 0;
}

/*  The byte bound: the config's, else SWITCHBOARD_BUS_QUEUE_BYTES, else
    the default; never below the minimum. */
static size_t
s_queue_bytes (const sb_broker_config_t *config)
{
    size_t bytes = config ? config->queue_bytes : 0;
    if (!bytes)
        bytes = s_env_bytes ("SWITCHBOARD_BUS_QUEUE_BYTES");
    if (!bytes)
        bytes = SB_BROKER_QUEUE_BYTES;
    return bytes < SB_BROKER_QUEUE_BYTES_MIN ? SB_BROKER_QUEUE_BYTES_MIN : bytes;
}

/*  The bound across every peer of the command plane: the config's, else
    SWITCHBOARD_BUS_QUEUE_TOTAL_BYTES, else SB_BROKER_QUEUE_TOTAL_FACTOR
    per-peer bounds; never below one per-peer bound. */
static size_t
s_queue_total (const sb_broker_config_t *config, size_t per_peer)
{
    size_t bytes = config ? config->queue_total : 0;
    if (!bytes)
        bytes = s_env_bytes ("SWITCHBOARD_BUS_QUEUE_TOTAL_BYTES");
    if (!bytes)
        bytes = per_peer * SB_BROKER_QUEUE_TOTAL_FACTOR;
    return bytes < per_peer ? per_peer : bytes;
}

static self_t *
s_self_new (zsock_t *pipe, const sb_broker_config_t *config)
{
    self_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    self->ipc_dir = config && config->ipc_dir ? strdup (config->ipc_dir) : NULL;
    self->tcp = config && config->tcp ? strdup (config->tcp) : NULL;
    self->certs_data = config && config->certs_data ? strdup (config->certs_data) : NULL;
    self->stats_extra = config ? config->stats_extra : NULL;
    self->instances = zhashx_new ();
    self->services = zhashx_new ();
    self->pending = zhashx_new ();
    self->tap_subs = zhashx_new ();
    self->enc = sb_enc_new ();
    self->body_enc = sb_enc_new ();
    sb_schema_all (&self->ntypes);
    self->type_counts = calloc (self->ntypes + 1, sizeof (uint64_t));
    self->cmd_q = sb_outq_new ();
    self->evt_q = sb_outq_acct_new ();
    self->tap_q = sb_outq_acct_new ();
    self->queue_bytes = s_queue_bytes (config);
    self->queue_total = s_queue_total (config, self->queue_bytes);
    self->router = zsock_new (ZMQ_ROUTER);
    self->xsub = zsock_new (ZMQ_XSUB);
    self->xpub = zsock_new (ZMQ_XPUB);
    self->tap = zsock_new (ZMQ_XPUB);
    if (!self->instances || !self->services || !self->pending || !self->tap_subs || !self->enc
    ||  !self->body_enc || !self->type_counts || !self->router || !self->xsub || !self->xpub || !self->tap
    ||  !self->cmd_q || !self->evt_q || !self->tap_q)
        return NULL;            /* the caller destroys */
    zhashx_set_destructor (self->instances, s_free_item);
    zhashx_set_destructor (self->services, s_service_destroy);
    zhashx_set_destructor (self->pending, s_free_item);
    zsock_set_router_mandatory (self->router, 1);
    zsock_set_sndhwm (self->router, SB_BROKER_ROUTER_HWM);
    zsock_set_rcvhwm (self->router, SB_BROKER_ROUTER_HWM);
    zsock_set_sndhwm (self->xpub, SB_BROKER_PUB_HWM);
    zsock_set_rcvhwm (self->xsub, SB_BROKER_PUB_HWM);
    zsock_set_sndhwm (self->tap, SB_BROKER_TAP_HWM);
    /* ZeroMQ drops a connection that announces a frame longer than any
       message the schemas allow, before allocating it; a subscriber only
       ever sends topic prefixes. Inproc peers are our own actors. */
    zsock_set_maxmsgsize (self->router, (int) sb_bus_max_frame ());
    zsock_set_maxmsgsize (self->xsub, (int) sb_bus_max_frame ());
    zsock_set_maxmsgsize (self->xpub, SB_BROKER_SUB_FRAME_MAX);
    zsock_set_maxmsgsize (self->tap, SB_BROKER_SUB_FRAME_MAX);
    zsock_set_linger (self->router, 0);
    zsock_set_linger (self->xsub, 0);
    zsock_set_linger (self->xpub, 0);
    zsock_set_linger (self->tap, 0);
    if (zsock_bind (self->router, SB_INPROC_CMD) < 0
    ||  zsock_bind (self->xsub, SB_INPROC_PUB_IN) < 0
    ||  zsock_bind (self->xpub, SB_INPROC_PUB) < 0
    ||  zsock_bind (self->tap, SB_INPROC_TAP) < 0) {
        sb_error (ACTOR, "cannot bind inproc endpoints error=\"%s\"", zmq_strerror (zmq_errno ()));
        return NULL;
    }
    /* The broker subscribes to every event so the tap sees every frame;
       subscribers filter on the XPUB side. */
    uint8_t all = 1;
    zmq_send (zsock_resolve (self->xsub), &all, 1, 0);
    self->started = sb_mono_ms ();
    self->next_heartbeat = self->started + SB_HEARTBEAT_MS;
    return self;
}

static void
s_self_destroy (self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    zhashx_destroy (&self->pending);
    zhashx_destroy (&self->services);
    zhashx_destroy (&self->instances);
    zhashx_destroy (&self->tap_subs);
    sb_enc_destroy (&self->enc);
    sb_enc_destroy (&self->body_enc);
    free (self->type_counts);
    zsock_destroy (&self->router);
    zsock_destroy (&self->xsub);
    zsock_destroy (&self->xpub);
    zsock_destroy (&self->tap);
    sb_outq_destroy (&self->cmd_q);
    sb_outq_acct_destroy (&self->evt_q);
    sb_outq_acct_destroy (&self->tap_q);
    free (self->ipc_dir);
    free (self->tcp);
    free (self->certs_data);
    zactor_destroy (&self->auth);
    sb_curve_ids_destroy (&self->ids);
    free (self);
    *self_p = NULL;
}

/* ------------------------------------------------------------------ */
/*  Sending */

static void
s_count_send_error (self_t *self)
{
    if (errno == EHOSTUNREACH)
        self->drop_unroutable++;
    else
        self->drop_hwm++;
}

bool
brk_tap_active (self_t *self)
{
    return zhashx_size (self->tap_subs) > 0;
}

/*  Copies a message to the tap: [plane][peer-or-topic][header][body].
    Observers lose tap frames past the tap's HWM or byte bound; the bus
    does not slow down for them. */
void
brk_tap_copy (self_t *self, const char *plane, const void *peer, size_t peer_len,
            const void *hdr, size_t hlen, const void *body, size_t blen)
{
    size_t charge = peer_len + hlen + blen + SB_OUTQ_MSG_OVERHEAD;
    zmq_msg_t bm;
    if (blen <= SB_BROKER_SMALL_BODY) {
        /* small: copied by ZeroMQ, bounded by the tap's HWM */
        if (zmq_msg_init_size (&bm, blen) != 0)
            return;
        if (blen)
            memcpy (zmq_msg_data (&bm), body, blen);
    }
    else
    if (!sb_outq_fits (self->tap_q, charge, self->queue_bytes)
    ||  sb_outq_msg (self->tap_q, &bm, body, blen, charge)) {
        self->drop_tap++;
        self->drop_tap_bytes += charge;
        return;
    }
    void *tap = zsock_resolve (self->tap);
    if (zmq_send (tap, plane, strlen (plane), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close (&bm);
        return;
    }
    zmq_send (tap, peer, peer_len, ZMQ_SNDMORE);
    zmq_send (tap, hdr, hlen, ZMQ_SNDMORE);
    if (zmq_msg_send (&bm, tap, 0) < 0)
        zmq_msg_close (&bm);
    self->plane_tap_out++;
}

/*  Sends [dest][route?][header][body] on the ROUTER, the header moved
    from hmsg or copied from hbuf, the body moved from bm or copied from
    body. Frames moved are closed when the send fails. */
static send_t
s_send_frames (self_t *self, const uint8_t *dest, size_t dest_len, const uint8_t *route,
               size_t route_len, zmq_msg_t *hmsg, const uint8_t *hbuf, size_t hlen,
               zmq_msg_t *bm, const uint8_t *body, size_t blen)
{
    void *r = zsock_resolve (self->router);
    if (zmq_send (r, dest, dest_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        if (bm)
            zmq_msg_close (bm);
        s_count_send_error (self);
        return SEND_FAILED;
    }
    if (route)
        zmq_send (r, route, route_len, ZMQ_SNDMORE);
    if (hmsg)
        zmq_msg_send (hmsg, r, ZMQ_SNDMORE);
    else
        zmq_send (r, hbuf, hlen, ZMQ_SNDMORE);
    if (!bm)
        zmq_send (r, body, blen, 0);
    else
    if (zmq_msg_send (bm, r, 0) < 0)
        zmq_msg_close (bm);
    self->plane_cmd_out++;
    return SEND_OK;
}

/*  Sends [dest][route?][header][body] on the ROUTER, the body charged to
    dest's account: shared with the received frame bmsg when there is one
    (no copy), else a copy of body. `slack` lets an error reply pass the bound
    by that much. SEND_FULL: over the bound, nothing sent and the drop
    counted; SEND_FAILED: ZeroMQ refused (no such peer, or its HWM), and
    that is counted. The header frame is a zmq_msg_t when hmsg is set
    (moved on success), else hbuf. */
static send_t
s_send_to (self_t *self, const uint8_t *dest, size_t dest_len, const uint8_t *route,
           size_t route_len, zmq_msg_t *hmsg, const uint8_t *hbuf, size_t hlen,
           zmq_msg_t *bmsg, const uint8_t *body, size_t blen, size_t slack)
{
    /*  Small bodies go as ZeroMQ would send them by itself: the received
        frame moved (no copy) when there is one, and nothing charged. What
        a peer can pin with them is bounded by the ROUTER's HWM times
        SB_BROKER_SMALL_BODY (bus/broker.h); the account's copy and
        cross-thread release would cost every heartbeat, delta and small
        request a malloc here and a free on ZeroMQ's I/O thread. */
    if (blen <= SB_BROKER_SMALL_BODY) {
        if (!bmsg)
            return s_send_frames (self, dest, dest_len, route, route_len, hmsg, hbuf, hlen, NULL, body, blen);
        zmq_msg_t moved;
        zmq_msg_init (&moved);
        zmq_msg_move (&moved, bmsg);
        return s_send_frames (self, dest, dest_len, route, route_len, hmsg, hbuf, hlen, &moved, NULL, 0);
    }
    char dkey [2 * ID_MAX + 1];
    brk_hex (dest, dest_len, dkey);
    sb_outq_acct_t *acct = sb_outq_get (self->cmd_q, dkey);
    if (hmsg)
        hlen = zmq_msg_size (hmsg);
    size_t charge = dest_len + route_len + hlen + blen + SB_OUTQ_MSG_OVERHEAD;
    zmq_msg_t bm;
    if (!acct || !sb_outq_fits (acct, charge, self->queue_bytes + slack)
    ||  !sb_outq_fits_total (self->cmd_q, charge, self->queue_total + slack)
    ||  (bmsg? sb_outq_msg_ref (acct, &bm, bmsg, charge): sb_outq_msg (acct, &bm, body, blen, charge))) {
        self->drop_cmd++;
        self->drop_cmd_bytes += charge;
        return SEND_FULL;
    }
    return s_send_frames (self, dest, dest_len, route, route_len, hmsg, hbuf, hlen, &bm, NULL, 0);
}

/*  Sends a broker-made message [dest][route?][header][body] on the ROUTER. */
void
brk_send_made (self_t *self, const uint8_t *dest, size_t dest_len, const uint8_t *route,
             size_t route_len, const sb_header_t *h, const uint8_t *body, size_t blen)
{
    sb_header_encode (h, self->enc);
    size_t hlen;
    const uint8_t *hbuf = sb_enc_data (self->enc, &hlen);
    /* The broker's own messages are errors, heartbeats and stats: small,
       and an error must reach a requester whose reply was dropped. */
    if (s_send_to (self, dest, dest_len, route, route_len, NULL, hbuf, hlen, NULL, body, blen,
                   SB_BROKER_QUEUE_SLACK) != SEND_OK)
        return;
    if (brk_tap_active (self))
        brk_tap_copy (self, "cmd", "", 0, hbuf, hlen, body, blen);
}

/*  Replies to the request (h) from `dest` with a broker-made message. */
void
brk_reply (self_t *self, const uint8_t *dest, size_t dest_len, const sb_header_t *req,
         const char *type, const uint8_t *body, size_t blen)
{
    sb_header_t h;
    sb_header_init (&h, type, ACTOR);
    memcpy (h.corr, req->id, sizeof h.corr);
    memcpy (h.key, req->key, sizeof h.key);
    brk_send_made (self, dest, dest_len, NULL, 0, &h, body, blen);
}

void
brk_reply_error (self_t *self, const uint8_t *dest, size_t dest_len, const sb_header_t *req,
               sb_err_t code, const char *fmt, ...)
{
    char message [512];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (message, sizeof message, fmt, ap);
    va_end (ap);
    sb_enc_reset (self->body_enc);
    sb_enc_map_open (self->body_enc);
    sb_enc_kstr (self->body_enc, "code", sb_err_name (code));
    sb_enc_kstr (self->body_enc, "message", message);
    sb_enc_kbool (self->body_enc, "retryable", sb_err_retryable (code));
    sb_enc_map_close (self->body_enc);
    size_t blen;
    const uint8_t *body = sb_enc_data (self->body_enc, &blen);
    brk_reply (self, dest, dest_len, req, "error", body, blen);
}

void
brk_bad (self_t *self, int kind, const uint8_t *peer, size_t peer_len, const char *detail)
{
    self->malformed [kind]++;
    if (sb_ratelimit_ok (&self->rl, 10)) {
        char hex [2 * 32 + 1];
        brk_hex (peer, peer_len > 32 ? 32 : peer_len, hex);
        sb_warn (ACTOR, "dropped malformed frame kind=%s peer=%s detail=\"%s\" suppressed=%u",
                 brk_malformed_names [kind], hex, detail ? detail : "", self->rl.suppressed);
    }
}

/* ------------------------------------------------------------------ */
/*  Command plane */

void
brk_count_type (self_t *self, const sb_type_t *t)
{
    size_t n;
    const sb_type_t *base = sb_schema_all (&n);
    size_t idx = (size_t) (t - base);
    if (idx < n)
        self->type_counts [idx]++;
}

static instance_t *
s_pick (service_t *svc, const char *to)
{
    if (to && to [0]) {
        for (instance_t *i = zlistx_first (svc->lru); i; i = zlistx_next (svc->lru))
            if (strcmp (i->instance, to) == 0)
                return i;
        return NULL;
    }
    instance_t *inst = zlistx_first (svc->lru);
    if (inst)
        zlistx_move_end (svc->lru, inst->handle);
    return inst;
}

/*  Checks a request's header and body, in the order that costs least
    first: the header, the type, its kind, the body against the schema,
    and what a CURVE peer's key may send. Fills *h, *t and *stat. Returns
    0, or -1 when the frame was dropped (and answered when the sender can
    be). Any message from a registered instance proves it alive. */
static int
s_check_request (self_t *self, zmq_msg_t *f, const char *skey, sb_header_t *h, const sb_type_t **tp,
                 sb_vstat_t *stat)
{
    const uint8_t *sid = zmq_msg_data (&f [0]);
    size_t sidlen = zmq_msg_size (&f [0]);
    sb_verr_t err;
    if (sb_header_parse (zmq_msg_data (&f [1]), zmq_msg_size (&f [1]), h, &err)) {
        brk_bad (self, M_HEADER, sid, sidlen, err.message);
        if (h->id [0])          /* a value out of range: the sender learns why */
            brk_reply_error (self, sid, sidlen, h, err.code, "header: %s", err.message);
        return -1;
    }
    instance_t *from = zhashx_lookup (self->instances, skey);
    if (from)
        from->expires = sb_mono_ms () + SB_HEARTBEAT_MS * SB_HEARTBEAT_MISSES;

    const sb_type_t *t = sb_schema_find (h->type, strlen (h->type));
    if (!t) {
        brk_bad (self, M_UNKNOWN_TYPE, sid, sidlen, h->type);
        brk_reply_error (self, sid, sidlen, h, SB_E_unknown_type, "unknown message type '%s'", h->type);
        return -1;
    }
    brk_count_type (self, t);
    if (t->kind != SB_KIND_REQUEST && t->kind != SB_KIND_ONEWAY) {
        brk_bad (self, M_KIND, sid, sidlen, h->type);
        brk_reply_error (self, sid, sidlen, h, SB_E_invalid,
                       "%s is a %s, not a request", h->type, sb_kind_name (t->kind));
        return -1;
    }
    const uint8_t *body = zmq_msg_data (&f [2]);
    size_t blen = zmq_msg_size (&f [2]);
    if (sb_validate (body, blen, t->fields, t->max_bytes, stat, &err)) {
        brk_bad (self, M_BODY, sid, sidlen, err.message);
        if (t->kind == SB_KIND_REQUEST)
            brk_reply_error (self, sid, sidlen, h, err.code, "%s: %s", h->type, err.message);
        return -1;
    }
    /* A CURVE peer is who its key says (the ZAP handler puts the key in
       User-Id): a worker key may use only the worker protocol, for its
       own worker_id and the runs it claimed; a client key only the public
       types (bus/curve.h). */
    const char *uid = self->ids ? zmq_msg_gets (&f [1], "User-Id") : NULL;
    if (uid && *uid) {
        char why [256];
        sb_err_t refused = sb_curve_check (self->ids, uid, skey, h, t->scope, body, blen, why, sizeof why);
        if (refused) {
            brk_bad (self, M_KIND, sid, sidlen, why);
            if (t->kind == SB_KIND_REQUEST)
                brk_reply_error (self, sid, sidlen, h, refused, "%s", why);
            return -1;
        }
    }
    *tp = t;
    return 0;
}

/*  The live instance of the request's service that takes it (header.to
    when set, else the least recently used one), or NULL, counted and
    answered no_service. */
static instance_t *
s_route (self_t *self, const uint8_t *sid, size_t sidlen, const sb_header_t *h, const sb_type_t *t,
         const char *svcname, size_t svclen)
{
    char name [33];
    snprintf (name, sizeof name, "%.*s", (int) (svclen < 32 ? svclen : 32), svcname);
    service_t *svc = zhashx_lookup (self->services, name);
    instance_t *inst = svc ? s_pick (svc, h->to) : NULL;
    if (inst)
        return inst;
    self->no_service++;
    if (t->kind == SB_KIND_REQUEST) {
        if (h->to [0])
            brk_reply_error (self, sid, sidlen, h, SB_E_no_service,
                           "instance %s of service %s is not live", h->to, name);
        else
            brk_reply_error (self, sid, sidlen, h, SB_E_no_service,
                           "no live instance of service %s", name);
    }
    return NULL;
}

/*  Keeps a request in the pending table until its reply, keyed by (route,
    id), with its expiry: the header's deadline and a second, else the
    broker's TTL. Returns 0, or -1 answered (overloaded, or the id already
    in flight from this peer). */
static int
s_add_pending (self_t *self, const uint8_t *sid, size_t sidlen, const char *skey, const sb_header_t *h,
               instance_t *inst)
{
    if (zhashx_size (self->pending) >= SB_BROKER_MAX_PENDING) {
        brk_reply_error (self, sid, sidlen, h, SB_E_overloaded,
                       "the broker has %d requests in flight", SB_BROKER_MAX_PENDING);
        return -1;
    }
    pending_t *p = calloc (1, sizeof *p);
    if (!p)
        return -1;
    p->inst = inst;
    memcpy (p->route, sid, sidlen);
    p->route_len = sidlen;
    int64_t now = sb_mono_ms ();
    int64_t wall = (int64_t) sb_now_ms ();
    /* the schema bounds deadline (docs/protocol.md); clamped here
       too, so the sum cannot overflow whatever the header held */
    int64_t dl = h->deadline < (uint64_t) SB_TIME_MS_MAX ? (int64_t) h->deadline : SB_TIME_MS_MAX;
    p->expires = h->deadline ? now + (dl - wall) + 1000
                             : now + SB_BROKER_PENDING_TTL_MS;
    _Static_assert (sizeof p->type == sizeof h->type && sizeof p->id == sizeof h->id,
                    "a pending request keeps its header's type and id whole");
    memcpy (p->type, h->type, sizeof p->type);
    memcpy (p->id, h->id, sizeof p->id);
    char pkey [2 * ID_MAX + 40];
    s_join_key (pkey, sizeof pkey, skey, h->id);
    if (zhashx_insert (self->pending, pkey, p) != 0) {
        free (p);               /* a duplicate id from the same peer */
        brk_reply_error (self, sid, sidlen, h, SB_E_conflict, "request id %s is already in flight", h->id);
        return -1;
    }
    return 0;
}

/*  [sid][header][body]: a request, one-way command or bus message. */
static void
s_handle_request (self_t *self, zmq_msg_t *f)
{
    const uint8_t *sid = zmq_msg_data (&f [0]);
    size_t sidlen = zmq_msg_size (&f [0]);
    if (sidlen > ID_MAX) {
        brk_bad (self, M_FRAMES, sid, 0, "identity too long");
        return;
    }
    char skey [2 * ID_MAX + 1];
    brk_hex (sid, sidlen, skey);
    sb_header_t h;
    const sb_type_t *t;
    sb_vstat_t stat;
    if (s_check_request (self, f, skey, &h, &t, &stat) != 0)
        return;
    const uint8_t *body = zmq_msg_data (&f [2]);
    size_t blen = zmq_msg_size (&f [2]);
    /* every valid message is copied, the broker's own bus.* traffic too */
    if (brk_tap_active (self))
        brk_tap_copy (self, "cmd", sid, sidlen, zmq_msg_data (&f [1]), zmq_msg_size (&f [1]), body, blen);
    const char *svcname;
    size_t svclen = sb_type_service (h.type, &svcname);
    if (svclen == 3 && memcmp (svcname, "bus", 3) == 0) {
        _Alignas (16) uint8_t mem [16384];
        const sb_val_t *root = sb_doc_decode_into (body, blen, &stat, mem, sizeof mem);
        if (!root) {
            brk_reply_error (self, sid, sidlen, &h, SB_E_too_large, "bus message too large");
            return;
        }
        brk_handle_bus (self, sid, sidlen, skey, &h, root);
        return;
    }
    instance_t *inst = s_route (self, sid, sidlen, &h, t, svcname, svclen);
    if (!inst)
        return;
    if (t->kind == SB_KIND_REQUEST && s_add_pending (self, sid, sidlen, skey, &h, inst) != 0)
        return;
    /* forward [inst][sid][header][body], moving the header frame */
    send_t sent = s_send_to (self, inst->id, inst->idlen, sid, sidlen, &f [1], NULL, 0,
                             &f [2], body, blen, 0);
    if (sent != SEND_OK) {
        if (t->kind == SB_KIND_REQUEST) {
            char pkey [2 * ID_MAX + 40];
            s_join_key (pkey, sizeof pkey, skey, h.id);
            zhashx_delete (self->pending, pkey);
            brk_reply_error (self, sid, sidlen, &h, sent == SEND_FULL ? SB_E_overloaded : SB_E_unavailable,
                           "instance %s cannot take more work now", inst->instance);
        }
        return;
    }
    inst->served++;
}

/*  [iid][route][header][body]: a reply, chunk or error from an instance. */
static void
s_handle_reply (self_t *self, zmq_msg_t *f)
{
    const uint8_t *iid = zmq_msg_data (&f [0]);
    size_t iidlen = zmq_msg_size (&f [0]);
    const uint8_t *route = zmq_msg_data (&f [1]);
    size_t route_len = zmq_msg_size (&f [1]);
    if (iidlen > ID_MAX || route_len > ID_MAX || route_len == 0) {
        brk_bad (self, M_FRAMES, iid, iidlen > ID_MAX ? 0 : iidlen, "bad route frame");
        return;
    }
    char ikey [2 * ID_MAX + 1];
    brk_hex (iid, iidlen, ikey);
    instance_t *inst = zhashx_lookup (self->instances, ikey);
    if (!inst) {
        brk_bad (self, M_UNMATCHED, iid, iidlen, "reply from an unregistered peer");
        return;
    }
    inst->expires = sb_mono_ms () + SB_HEARTBEAT_MS * SB_HEARTBEAT_MISSES;
    sb_header_t h;
    sb_verr_t err;
    if (sb_header_parse (zmq_msg_data (&f [2]), zmq_msg_size (&f [2]), &h, &err)) {
        brk_bad (self, M_HEADER, iid, iidlen, err.message);
        return;
    }
    const sb_type_t *t = sb_schema_find (h.type, strlen (h.type));
    if (!t || (t->kind != SB_KIND_REPLY && t->kind != SB_KIND_CHUNK)) {
        brk_bad (self, t ? M_KIND : M_UNKNOWN_TYPE, iid, iidlen, h.type);
        return;
    }
    brk_count_type (self, t);
    char pkey [2 * ID_MAX + 40];
    char rkey [2 * ID_MAX + 1];
    brk_hex (route, route_len, rkey);
    snprintf (pkey, sizeof pkey, "%s:%s", rkey, h.corr);
    pending_t *p = zhashx_lookup (self->pending, pkey);
    if (!p || p->inst != inst) {
        brk_bad (self, M_UNMATCHED, iid, iidlen, h.corr);
        return;
    }
    const uint8_t *body = zmq_msg_data (&f [3]);
    size_t blen = zmq_msg_size (&f [3]);
    if (sb_validate (body, blen, t->fields, t->max_bytes, NULL, &err)) {
        /* the requester still gets an answer, never a silent hang */
        brk_bad (self, M_BODY, iid, iidlen, err.message);
        sb_header_t req;
        memset (&req, 0, sizeof req);
        memcpy (req.id, p->id, sizeof req.id);
        brk_reply_error (self, route, route_len, &req, SB_E_internal,
                       "%s sent an invalid %s: %s", inst->instance, h.type, err.message);
        zhashx_delete (self->pending, pkey);
        return;
    }
    bool final = t->kind != SB_KIND_CHUNK;
    /* a worker key's claims are learned from the replies it gets, and
       what it may not see is withheld */
    if (sb_curve_reply (self->ids, pkey, h.type, body, blen, final)) {
        sb_header_t req;
        memset (&req, 0, sizeof req);
        memcpy (req.id, p->id, sizeof req.id);
        brk_reply_error (self, route, route_len, &req, SB_E_forbidden,
                         "the worker key may read only the interactions its claimed runs asked for");
        zhashx_delete (self->pending, pkey);
        return;
    }
    if (p->dropped) {
        /* the rest of a stream the requester already got an error for */
        self->drop_cmd++;
        self->drop_cmd_bytes += blen;
        if (final)
            zhashx_delete (self->pending, pkey);
        return;
    }
    if (brk_tap_active (self))
        brk_tap_copy (self, "cmd", iid, iidlen, zmq_msg_data (&f [2]), zmq_msg_size (&f [2]), body, blen);
    size_t held_before = 0;
    if (blen > SB_BROKER_SMALL_BODY) {
        sb_outq_acct_t *acct = sb_outq_get (self->cmd_q, rkey);
        held_before = acct ? sb_outq_held (acct) : 0;
    }
    if (s_send_to (self, route, route_len, NULL, 0, &f [2], NULL, 0, &f [3], body, blen, 0) == SEND_FULL) {
        /* The requester does not read what it asked for: it learns that
           this reply was dropped, and the rest of the stream with it,
           which goes nowhere until its final reply ends the request. */
        sb_header_t req;
        memset (&req, 0, sizeof req);
        memcpy (req.id, p->id, sizeof req.id);
        memcpy (req.key, h.key, sizeof req.key);
        brk_reply_error (self, route, route_len, &req, SB_E_overloaded,
                       "%s of %zu bytes dropped: %zu bytes are already queued for you (limit %zu), "
                       "%zu for every peer (limit %zu); read your replies, then ask again",
                       h.type, blen, held_before, self->queue_bytes, sb_outq_held_total (self->cmd_q),
                       self->queue_total);
        p->dropped = true;
    }
    if (final)
        zhashx_delete (self->pending, pkey);
}

void
brk_read_frames_close (zmq_msg_t *f, int n)
{
    for (int k = 0; k < n && k < MAX_FRAMES; k++)
        zmq_msg_close (&f [k]);
}

/*  Reads one multipart message; returns its frame count or 0. */
int
brk_read (void *sock, zmq_msg_t *f)
{
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_t *m = n < MAX_FRAMES ? &f [n] : &tmp;
        zmq_msg_init (m);
        if (zmq_msg_recv (m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (m);
            if (n == 0)
                return 0;
            break;
        }
        more = zmq_msg_more (m);
        if (n >= MAX_FRAMES)
            zmq_msg_close (m);
        n++;
    }
    return n;
}

static void
s_handle_router (self_t *self)
{
    void *r = zsock_resolve (self->router);
    /* Drain a bounded batch so the event plane and timers get their turn. */
    for (int budget = 0; budget < 1000; budget++) {
        zmq_msg_t f [MAX_FRAMES];
        int n = brk_read (r, f);
        if (n == 0)
            return;
        self->plane_cmd_in++;
        if (n == 3)
            s_handle_request (self, f);
        else
        if (n == 4)
            s_handle_reply (self, f);
        else
            brk_bad (self, M_FRAMES, zmq_msg_data (&f [0]), zmq_msg_size (&f [0]) > 32 ? 32 : zmq_msg_size (&f [0]),
                   "wrong frame count");
        brk_read_frames_close (f, n);
    }
}

/* ------------------------------------------------------------------ */

/*  CURVE for the tcp endpoints: our ZAP handler (bus/curve.h) answers
    with the public keys of DATA/certs/clients/, each plane in its own ZAP
    domain so a worker key gets the command plane only, and the three tcp
    sockets get the server's key pair. Socket options take effect at bind
    time: the ipc endpoints, bound before, stay as they are. */
static int
s_curve_on (self_t *self)
{
    char err [512], clients [4300];
    zcert_t *cert = sb_curve_server_cert (self->certs_data, err, sizeof err);
    if (!cert) {
        sb_error (ACTOR, "CURVE: %s", err);
        return -1;
    }
    snprintf (clients, sizeof clients, "%s/certs/clients", self->certs_data);
    self->auth = sb_curve_zap_new (self->certs_data);
    if (!self->auth) {
        zcert_destroy (&cert);
        sb_error (ACTOR, "CURVE: cannot start the ZAP handler");
        return -1;
    }
    self->ids = sb_curve_ids_new (self->certs_data);
    if (!self->ids) {
        zcert_destroy (&cert);
        sb_error (ACTOR, "CURVE: cannot read the keys of %s", clients);
        return -1;
    }
    zsock_t *socks [] = { self->router, self->xpub, self->tap };
    const char *domains [] = { SB_CURVE_DOMAIN_CMD, SB_CURVE_DOMAIN_EVT, SB_CURVE_DOMAIN_TAP };
    for (size_t k = 0; k < 3; k++) {
        zcert_apply (cert, socks [k]);
        zsock_set_curve_server (socks [k], 1);
        zsock_set_zap_domain (socks [k], domains [k]);
    }
    sb_info (ACTOR, "CURVE on tcp server_key=%s clients=%s", zcert_public_txt (cert), clients);
    zcert_destroy (&cert);
    return 0;
}

static int
s_bind_external (self_t *self)
{
    if (self->ipc_dir) {
        if (zsock_bind (self->router, "ipc://%s/bus-cmd", self->ipc_dir) < 0
        ||  zsock_bind (self->xsub, "ipc://%s/bus-in", self->ipc_dir) < 0
        ||  zsock_bind (self->xpub, "ipc://%s/bus-pub", self->ipc_dir) < 0
        ||  zsock_bind (self->tap, "ipc://%s/bus-tap", self->ipc_dir) < 0) {
            sb_error (ACTOR, "cannot bind ipc endpoints dir=%s error=\"%s\"", self->ipc_dir,
                      zmq_strerror (zmq_errno ()));
            return -1;
        }
        sb_info (ACTOR, "bound endpoint=ipc://%s/bus-cmd", self->ipc_dir);
    }
    if (self->tcp) {
        /* tcp://ADDR:P -> cmd on P, the event plane's subscriber side on
           P+1, the tap on P+2. The XSUB side never goes on tcp. */
        char host [256];
        int port = 0;
        const char *colon = strrchr (self->tcp, ':');
        if (strncmp (self->tcp, "tcp://", 6) != 0 || !colon || (port = atoi (colon + 1)) <= 0
        ||  (size_t) (colon - self->tcp - 6) >= sizeof host) {
            sb_error (ACTOR, "bad --bus endpoint %s (want tcp://ADDR:PORT)", self->tcp);
            return -1;
        }
        snprintf (host, sizeof host, "%.*s", (int) (colon - self->tcp - 6), self->tcp + 6);
        if (self->certs_data && s_curve_on (self))
            return -1;
        if (zsock_bind (self->router, "tcp://%s:%d", host, port) < 0
        ||  zsock_bind (self->xpub, "tcp://%s:%d", host, port + 1) < 0
        ||  zsock_bind (self->tap, "tcp://%s:%d", host, port + 2) < 0) {
            sb_error (ACTOR, "cannot bind %s error=\"%s\"", self->tcp, zmq_strerror (zmq_errno ()));
            return -1;
        }
        sb_info (ACTOR, "bound endpoint=%s", self->tcp);
    }
    return 0;
}

static void
s_handle_pipe (self_t *self)
{
    zmsg_t *msg = zmsg_recv (self->pipe);
    if (!msg) {
        self->terminated = true;
        return;
    }
    char *cmd = zmsg_popstr (msg);
    if (cmd && streq (cmd, "$TERM"))
        self->terminated = true;
    else
    if (cmd && streq (cmd, "BIND"))
        zsock_signal (self->pipe, s_bind_external (self) == 0 ? 0 : 1);
    free (cmd);
    zmsg_destroy (&msg);
}

void
sb_broker_actor (zsock_t *pipe, void *args)
{
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        s_self_destroy (&self);
        zsock_signal (pipe, 1);
        return;
    }
    zsock_signal (pipe, 0);
    zmq_pollitem_t items [] = {
        { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
        { zsock_resolve (self->router), 0, ZMQ_POLLIN, 0 },
        { zsock_resolve (self->xsub), 0, ZMQ_POLLIN, 0 },
        { zsock_resolve (self->xpub), 0, ZMQ_POLLIN, 0 },
        { zsock_resolve (self->tap), 0, ZMQ_POLLIN, 0 },
    };
    while (!self->terminated) {
        int64_t wait = self->next_heartbeat - sb_mono_ms ();
        if (self->next_expiry - sb_mono_ms () < wait)
            wait = self->next_expiry - sb_mono_ms ();
        if (wait < 0)
            wait = 0;
        if (zmq_poll (items, 5, (long) wait) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (items [0].revents & ZMQ_POLLIN)
            s_handle_pipe (self);
        if (items [1].revents & ZMQ_POLLIN)
            s_handle_router (self);
        if (items [2].revents & ZMQ_POLLIN)
            brk_handle_xsub (self);
        if (items [3].revents & ZMQ_POLLIN)
            brk_handle_subs (self, self->xpub, false);
        if (items [4].revents & ZMQ_POLLIN)
            brk_handle_subs (self, self->tap, true);
        if (sb_mono_ms () >= self->next_expiry)
            brk_expire_instances (self);
        if (sb_mono_ms () >= self->next_heartbeat)
            brk_heartbeat (self);
    }
    s_self_destroy (&self);
}

/*  cluster/forward.c — a request for a session of a shard another node
    owns, forwarded to that node and its reply relayed (cluster/forward.h;
    docs/scale-out.md, "Forwarding"). The session, run and interact actors
    each keep one.

    When the owner answers not_owner (the shard moved meanwhile), the
    request is sent once more to the owner the cache names a beat later,
    or taken here when the shard came to this node; after that the
    refusal is relayed. A node allows another's key within a beat of its
    registration; a forward sent before that is refused at the CURVE
    handshake, and ZeroMQ does not connect again after a refusal: so the
    bus to a peer watches its handshakes, and one refused before any
    succeeded is made again, a little later, with its forwards sent again
    (none of them reached the peer). A forward not answered by its
    deadline (the request's, at most FORWARD_MS) is answered unavailable:
    the client retries, with its command_id, and the owner's command ids
    make the retry do nothing twice. One whose node lost the shard while
    it was in flight (that node died) goes to the new owner at once
    (s_reroute). */
#include "cluster/forward.h"
#include "bus/client.h"
#include "bus/curve.h"
#include "cluster/cluster.h"
#include "common/log.h"
#include "schemas/codec.h"
#include "schemas/errors.h"

#include <string.h>

#define FORWARD_MS      30000   /* a forward's longest wait */
#define FORWARDS_MAX    4096    /* forwards in flight, all peers; past it: overloaded */
#define PEERS_MAX       64      /* other nodes an actor keeps a bus to */
#define REMAKE_MS       50      /* after a refused handshake, the pause before the next socket */
#define REROUTE_MS      50      /* how often the forwards in flight are held against the owner cache */

typedef struct {
    char node_id [SB_CLUSTER_ID_MAX + 1];
    char endpoint [SB_CLUSTER_EP_MAX + 1];
    char key [SB_CLUSTER_KEY_MAX + 1];
    sb_bus_t *bus;
    sb_peer_watch_t watch;      /* the bus's handshakes */
} peer_t;

typedef struct {
    sb_msg_t *msg;              /* the request, as it came */
    char sid [SB_ULID_LEN + 1]; /* the session it changes */
    int tag;
    char node_id [SB_CLUSTER_ID_MAX + 1];
    int tries;
    int64_t deadline;           /* mono ms */
    int64_t retry_at;           /* mono ms: refused not_owner, tried again then; 0: in flight */
} fwd_t;

struct sb_forward {
    sb_cluster_t *cluster;
    const char *actor;
    char data_dir [4096];
    char instance [160];
    sb_forward_take_fn *take;
    void *arg;
    zcert_t *cert;              /* this node's bus key pair, read at the first forward */
    peer_t peers [PEERS_MAX];
    size_t npeers;
    zhashx_t *inflight;         /* forwarded request id -> fwd_t (no destructor: freed by hand) */
    zlistx_t *later;            /* fwd_t refused not_owner once, waiting for a fresher owner cache */
    int64_t reroute_at;         /* mono ms: the next look at the owners of the forwards in flight */
};

static void
s_fwd_drop (fwd_t *f)
{
    if (f) {
        sb_msg_destroy (&f->msg);
        free (f);
    }
}

sb_forward_t *
sb_forward_new (sb_cluster_t *cluster, const char *actor, const char *data_dir, const char *instance,
                sb_forward_take_fn *take, void *arg)
{
    sb_forward_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->cluster = cluster;
    self->actor = actor;
    snprintf (self->data_dir, sizeof self->data_dir, "%s", data_dir ? data_dir : ".");
    snprintf (self->instance, sizeof self->instance, "%s", instance ? instance : actor);
    self->take = take;
    self->arg = arg;
    self->inflight = zhashx_new ();
    self->later = zlistx_new ();
    if (!self->inflight || !self->later)
        sb_forward_destroy (&self);
    return self;
}

void
sb_forward_destroy (sb_forward_t **self_p)
{
    sb_forward_t *self = *self_p;
    if (!self)
        return;
    for (fwd_t *f = self->inflight ? zhashx_first (self->inflight) : NULL; f; f = zhashx_next (self->inflight))
        s_fwd_drop (f);
    zhashx_destroy (&self->inflight);
    for (fwd_t *f = self->later ? zlistx_first (self->later) : NULL; f; f = zlistx_next (self->later))
        s_fwd_drop (f);
    zlistx_destroy (&self->later);
    for (size_t i = 0; i < self->npeers; i++) {
        sb_peer_watch_stop (&self->peers [i].watch);
        sb_bus_destroy (&self->peers [i].bus);
    }
    zcert_destroy (&self->cert);
    free (self);
    *self_p = NULL;
}

/* ------------------------------------------------------------------ */
/*  The handshakes of a socket to another node */

void
sb_peer_watch_start (sb_peer_watch_t *w, void *sock, const void *tag)
{
    sb_peer_watch_stop (w);
    /* a name never used before: a socket made again at the address of the
       one it replaces would find the old monitor's name still bound (it
       goes with the old socket, asynchronously), and be watched no more */
    static _Atomic uint64_t made;
    char addr [128];
    snprintf (addr, sizeof addr, "inproc://sb-watch-%p-%p-%llu", (void *) w, tag,
              (unsigned long long) ++made);
    if (zmq_socket_monitor (sock, addr, ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                            | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0) {
        w->monitor = zsock_new (ZMQ_PAIR);
        if (w->monitor && zsock_connect (w->monitor, "%s", addr) != 0)
            zsock_destroy (&w->monitor);
    }
}

void
sb_peer_watch_stop (sb_peer_watch_t *w)
{
    zsock_destroy (&w->monitor);
    w->connected = false;
    w->remake_at = 0;
}

bool
sb_peer_watch_refused (sb_peer_watch_t *w, const char *actor, const char *node_id)
{
    zmsg_t *ev;
    while (w->monitor && (zsock_events (w->monitor) & ZMQ_POLLIN) && (ev = zmsg_recv (w->monitor))) {
        zframe_t *f = zmsg_first (ev);
        if (f && zframe_size (f) >= 2) {
            uint16_t event;
            memcpy (&event, zframe_data (f), 2);
            if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
                w->connected = true;
            else
            if (!w->connected && !w->remake_at) {
                sb_warn (actor, "node %s refused this node's bus key; trying again", node_id);
                w->remake_at = sb_mono_ms () + REMAKE_MS;
            }
        }
        zmsg_destroy (&ev);
    }
    return w->remake_at && w->remake_at <= sb_mono_ms ();
}

/* ------------------------------------------------------------------ */

/*  Makes p's bus, and the watch of its handshakes. */
static void
s_peer_connect (sb_forward_t *self, peer_t *p)
{
    sb_peer_watch_stop (&p->watch);
    sb_bus_destroy (&p->bus);
    p->bus = sb_bus_new_curve (p->endpoint, self->instance, *p->key ? self->cert : NULL, *p->key ? p->key : NULL);
    if (p->bus)
        sb_peer_watch_start (&p->watch, sb_bus_socket (p->bus), p->bus);
}

/*  The bus to `owner`, made on first use (and again when its endpoint or
    key changed). NULL when it cannot be made. */
static sb_bus_t *
s_peer (sb_forward_t *self, const sb_cluster_owner_t *owner)
{
    peer_t *p = NULL;
    for (size_t i = 0; i < self->npeers && !p; i++)
        if (strcmp (self->peers [i].node_id, owner->node_id) == 0)
            p = &self->peers [i];
    if (p && (strcmp (p->endpoint, owner->bus_endpoint) || strcmp (p->key, owner->curve_public))) {
        sb_peer_watch_stop (&p->watch);
        sb_bus_destroy (&p->bus);
    }
    if (!p) {
        if (self->npeers == PEERS_MAX)
            return NULL;
        p = &self->peers [self->npeers++];
        memset (p, 0, sizeof *p);
    }
    if (!p->bus && !p->watch.remake_at) {
        snprintf (p->node_id, sizeof p->node_id, "%s", owner->node_id);
        snprintf (p->endpoint, sizeof p->endpoint, "%s", owner->bus_endpoint);
        snprintf (p->key, sizeof p->key, "%s", owner->curve_public);
        s_peer_connect (self, p);
    }
    return p->bus;
}

/*  Sends f's request to the owner the cache names now: true when sent. */
static bool
s_send (sb_forward_t *self, fwd_t *f)
{
    sb_cluster_owner_t owner;
    if (sb_cluster_owner_of (self->cluster, sb_cluster_shard_of (f->sid), &owner) != 0
    ||  strcmp (owner.node_id, sb_cluster_node_id (self->cluster)) == 0
    ||  !*owner.bus_endpoint)
        return false;
    sb_bus_t *bus = s_peer (self, &owner);
    sb_enc_t *e = sb_enc_new ();
    if (!bus || !e) {
        sb_enc_destroy (&e);
        return false;
    }
    sb_enc_val (e, f->msg->body);
    size_t len;
    const uint8_t *body = sb_enc_data (e, &len);
    char id [40];
    uint64_t deadline = sb_now_ms () + (uint64_t) (f->deadline - sb_mono_ms ());
    int rc = sb_bus_send (bus, f->msg->h.type, *f->msg->h.key ? f->msg->h.key : f->sid, NULL, body, len,
                          deadline, id);
    sb_enc_destroy (&e);
    if (rc != 0)
        return false;
    snprintf (f->node_id, sizeof f->node_id, "%s", owner.node_id);
    f->tries++;
    zhashx_insert (self->inflight, id, f);
    return true;
}

/*  f waits one heartbeat period for a fresher owner cache, then goes to
    the owner it names, or is taken here (sb_forward_poll). */
static void
s_later (sb_forward_t *self, fwd_t *f)
{
    f->tries = 1;
    f->retry_at = sb_mono_ms () + (int64_t) sb_cluster_heartbeat_ms (self->cluster);
    zlistx_add_end (self->later, f);
}

bool
sb_forward (sb_forward_t *self, sb_bus_t *bus, sb_msg_t **msg_p, const char *sid, int tag)
{
    sb_msg_t *msg = *msg_p;
    if (!self || !self->cluster || !msg->route || !sid || strlen (sid) != SB_ULID_LEN || !sb_ulid_valid (sid)
    ||  sb_cluster_holds (self->cluster, sid))
        return false;
    if (!self->cert) {
        char err [256];
        self->cert = sb_curve_server_cert (self->data_dir, err, sizeof err);
        if (!self->cert)
            return false;       /* refused not_owner by the actor, as without forwarding */
    }
    if (zhashx_size (self->inflight) >= FORWARDS_MAX) {
        sb_bus_error (bus, msg, SB_E_overloaded, "%d requests are being forwarded already; retry",
                      FORWARDS_MAX);
        sb_msg_destroy (msg_p);
        return true;
    }
    fwd_t *f = calloc (1, sizeof *f);
    if (!f)
        return false;
    f->msg = msg;
    f->tag = tag;
    memcpy (f->sid, sid, SB_ULID_LEN + 1);
    int64_t now = sb_mono_ms ();
    uint64_t wall = sb_now_ms ();
    f->deadline = now + FORWARD_MS;
    if (msg->h.deadline && msg->h.deadline > wall && msg->h.deadline - wall < FORWARD_MS)
        f->deadline = now + (int64_t) (msg->h.deadline - wall);
    /* No owner to send to (the shard is between two nodes, one released
       it and the other has not taken it yet): tried again a beat later */
    if (!s_send (self, f))
        s_later (self, f);
    *msg_p = NULL;
    return true;
}

/*  One answer of a peer: relayed, or sent once more on not_owner. */
static void
s_answer (sb_forward_t *self, sb_bus_t *bus, sb_msg_t *reply)
{
    fwd_t *f = zhashx_lookup (self->inflight, reply->h.corr);
    if (!f)
        return;                 /* a late answer (its forward expired), or a chunk */
    zhashx_delete (self->inflight, reply->h.corr);     /* no destructor: f is ours now */
    const char *code = sb_msg_is_error (reply) ? sb_msg_error_code (reply) : NULL;
    /* The shard moved under the forward: once the owner cache is a beat
       fresher, the request goes to the owner it names (this node, maybe) */
    if (code && strcmp (code, "not_owner") == 0 && f->tries == 1) {
        s_later (self, f);
        return;
    }
    sb_enc_t *e = sb_enc_new ();
    if (e) {
        sb_enc_val (e, reply->body);
        size_t len;
        const uint8_t *body = sb_enc_data (e, &len);
        sb_bus_reply_to (bus, f->msg->route, f->msg->route_len, &f->msg->h, reply->h.type,
                         reply->h.seq, body, len);
        sb_enc_destroy (&e);
    }
    s_fwd_drop (f);
}

/*  A refused bus made again, and its forwards (none of which reached the
    peer) sent again on it. */
static void
s_peer_remake (sb_forward_t *self, peer_t *p)
{
    s_peer_connect (self, p);
    zlistx_t *ids = zhashx_keys (self->inflight);
    for (const char *id = ids ? zlistx_first (ids) : NULL; id; id = zlistx_next (ids)) {
        fwd_t *f = zhashx_lookup (self->inflight, id);
        if (!f || strcmp (f->node_id, p->node_id) != 0)
            continue;
        zhashx_delete (self->inflight, id);
        f->tries--;
        if (!s_send (self, f))
            s_later (self, f);
    }
    zlistx_destroy (&ids);
}

/*  The forwards in flight to a node that no longer owns their shard (it
    died, and the shard went to another, or to this node): sent to the
    owner named now, or taken here, rather than left to their deadline,
    which is longer than a client waits. The dead node may have done one
    before it died: the owner's command ids make the second do nothing
    twice, as they do a client's retry. */
static void
s_reroute (sb_forward_t *self)
{
    int64_t now = sb_mono_ms ();
    if (now < self->reroute_at || !zhashx_size (self->inflight))
        return;
    self->reroute_at = now + REROUTE_MS;
    zlistx_t *ids = zhashx_keys (self->inflight);
    for (const char *id = ids ? zlistx_first (ids) : NULL; id; id = zlistx_next (ids)) {
        fwd_t *f = zhashx_lookup (self->inflight, id);
        sb_cluster_owner_t owner;
        if (!f || sb_cluster_owner_of (self->cluster, sb_cluster_shard_of (f->sid), &owner) != 0
        ||  strcmp (owner.node_id, f->node_id) == 0)
            continue;           /* still its owner's, or between two owners */
        zhashx_delete (self->inflight, id);     /* no destructor: f is ours now */
        sb_info (self->actor, "a %s forwarded to node %s goes to node %s, the session's owner now",
                 f->msg->h.type, f->node_id, owner.node_id);
        if (sb_cluster_holds (self->cluster, f->sid)) {
            self->take (self->arg, &f->msg, f->tag);
            s_fwd_drop (f);
            continue;
        }
        f->tries--;
        if (!s_send (self, f))
            s_later (self, f);
    }
    zlistx_destroy (&ids);
}

void
sb_forward_poll (sb_forward_t *self, sb_bus_t *bus)
{
    if (!self)
        return;
    s_reroute (self);
    for (size_t i = 0; i < self->npeers; i++)
        if (sb_peer_watch_refused (&self->peers [i].watch, self->actor, self->peers [i].node_id))
            s_peer_remake (self, &self->peers [i]);
    for (size_t i = 0; i < self->npeers; i++) {
        sb_msg_t *reply;
        while (self->peers [i].bus && (reply = sb_bus_recv (self->peers [i].bus, 0))) {
            if (!reply->route)
                s_answer (self, bus, reply);
            sb_msg_destroy (&reply);
        }
    }
    /* the refused, once a beat passed: to the owner now named, or taken
       here when that is this node */
    int64_t now = sb_mono_ms ();
    for (fwd_t *f = zlistx_first (self->later); f; ) {
        if (f->retry_at > now) {
            f = zlistx_next (self->later);
            continue;
        }
        zlistx_detach_cur (self->later);
        if (sb_cluster_holds (self->cluster, f->sid)) {
            self->take (self->arg, &f->msg, f->tag);
            s_fwd_drop (f);
        }
        else
        if (!s_send (self, f)) {
            char line [256];
            sb_cluster_owner_line (self->cluster, f->sid, line, sizeof line);
            sb_bus_error (bus, f->msg, SB_E_not_owner, "%s", line);
            s_fwd_drop (f);
        }
        f = zlistx_first (self->later);
    }
    zlistx_t *late = NULL;
    for (fwd_t *f = zhashx_first (self->inflight); f; f = zhashx_next (self->inflight))
        if (f->deadline <= now) {
            if (!late)
                late = zlistx_new ();
            if (late) {
                zlistx_set_destructor (late, (czmq_destructor *) zstr_free);
                zlistx_add_end (late, strdup ((const char *) zhashx_cursor (self->inflight)));
            }
        }
    for (const char *id = late ? zlistx_first (late) : NULL; id; id = zlistx_next (late)) {
        fwd_t *f = zhashx_lookup (self->inflight, id);
        sb_bus_error (bus, f->msg, SB_E_unavailable, "node %s, which owns the session, did not answer "
                      "the forwarded %s in time; retry with the same command_id", f->node_id, f->msg->h.type);
        zhashx_delete (self->inflight, id);
        s_fwd_drop (f);
    }
    zlistx_destroy (&late);
}

int64_t
sb_forward_wait (sb_forward_t *self)
{
    /* While a forward is in flight the loop looks at the peers' sockets
       every few ms. */
    return self && (zhashx_size (self->inflight) || zlistx_size (self->later)) ? 2 : INT64_MAX;
}

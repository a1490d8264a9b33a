/*  actors/session/relay.c — followers across nodes (docs/scale-out.md,
    "Followers across nodes").

    A follower of a session subscribes to the event plane of the node it
    reached; the session's entries are published by the node that owns
    it. So each node's session actor subscribes to the event plane of
    every other node that owns shards (CURVE, as forward.c's bus: this
    node's keys, the owner's public key from the nodes table) and
    publishes here, unchanged, every session.event of a session whose
    owner, by the cache, is the node it came from and not this one. Only
    owners' events are relayed, so a relayed copy is never relayed again
    and a follower sees each entry once, in the owner's order; one lost on
    the way (a high-water mark, a reconnect) is a gap in seq, which the
    follower fills from the tape as it does on one node. */
#include "actors/session/session_impl.h"
#include "bus/curve.h"

#include <string.h>

#define RELAY_REFRESH_MS 100    //  how often the owners are looked at again

typedef struct {
    char node_id [SB_CLUSTER_ID_MAX + 1];
    char endpoint [SB_CLUSTER_EP_MAX + 1];
    char key [SB_CLUSTER_KEY_MAX + 1];
    sb_sub_t *sub;
    sb_peer_watch_t watch;
} source_t;

struct sb_session_relay {
    zcert_t *cert;
    source_t sources [SB_SESSION_RELAY_MAX];
    size_t nsources;
    int64_t refreshed;          //  mono ms
    uint64_t relayed;
};

void
sb_session_relay_destroy (self_t *self)
{
    sb_session_relay_t *r = self->relay;
    if (!r)
        return;
    for (size_t i = 0; i < r->nsources; i++) {
        sb_peer_watch_stop (&r->sources [i].watch);
        sb_sub_destroy (&r->sources [i].sub);
    }
    zcert_destroy (&r->cert);
    free (r);
    self->relay = NULL;
}

static void
s_source_connect (sb_session_relay_t *r, source_t *s)
{
    sb_peer_watch_stop (&s->watch);
    sb_sub_destroy (&s->sub);
    s->sub = sb_sub_new_curve (s->endpoint, *s->key ? r->cert : NULL, *s->key ? s->key : NULL);
    if (!s->sub)
        return;
    sb_sub_subscribe (s->sub, "session/");
    sb_peer_watch_start (&s->watch, sb_sub_socket (s->sub), s->sub);
}

//  A source for every other node that owns shards, by the cache.
static void
s_refresh (self_t *self)
{
    sb_session_relay_t *r = self->relay;
    for (uint32_t sh = 0; sh < SB_CLUSTER_SHARDS; sh++) {
        sb_cluster_owner_t o;
        if (sb_cluster_owner_of (self->cluster, sh, &o) != 0 || !*o.event_endpoint
        ||  strcmp (o.node_id, sb_cluster_node_id (self->cluster)) == 0)
            continue;
        source_t *s = NULL;
        for (size_t i = 0; i < r->nsources && !s; i++)
            if (strcmp (r->sources [i].node_id, o.node_id) == 0)
                s = &r->sources [i];
        if (s && !strcmp (s->endpoint, o.event_endpoint) && !strcmp (s->key, o.curve_public))
            continue;
        if (!s) {
            if (r->nsources == SB_SESSION_RELAY_MAX)
                continue;
            s = &r->sources [r->nsources++];
            memset (s, 0, sizeof *s);
        }
        snprintf (s->node_id, sizeof s->node_id, "%s", o.node_id);
        snprintf (s->endpoint, sizeof s->endpoint, "%s", o.event_endpoint);
        snprintf (s->key, sizeof s->key, "%s", o.curve_public);
        s_source_connect (r, s);
    }
}

size_t
sb_session_relay_items (self_t *self, zmq_pollitem_t *items, size_t max)
{
    if (!self->cluster || !self->pub)
        return 0;
    if (!self->relay) {
        char err [256];
        self->relay = calloc (1, sizeof *self->relay);
        if (self->relay)
            self->relay->cert = sb_curve_server_cert (self->data_dir, err, sizeof err);
        if (!self->relay || !self->relay->cert) {
            sb_session_relay_destroy (self);
            return 0;
        }
    }
    sb_session_relay_t *r = self->relay;
    if (sb_mono_ms () - r->refreshed >= RELAY_REFRESH_MS) {
        r->refreshed = sb_mono_ms ();
        s_refresh (self);
    }
    size_t n = 0;
    for (size_t i = 0; i < r->nsources && n < max; i++)
        if (r->sources [i].sub)
            items [n++] = (zmq_pollitem_t) { sb_sub_socket (r->sources [i].sub), 0, ZMQ_POLLIN, 0 };
    return n;
}

int64_t
sb_session_relay_wait (self_t *self)
{
    //  the owners are looked at again, and refused sockets made again, soon
    return self->relay ? RELAY_REFRESH_MS : INT64_MAX;
}

void
sb_session_relay_recv (self_t *self)
{
    sb_session_relay_t *r = self->relay;
    if (!r)
        return;
    for (size_t i = 0; i < r->nsources; i++) {
        source_t *s = &r->sources [i];
        if (sb_peer_watch_refused (&s->watch, ACTOR, s->node_id))
            s_source_connect (r, s);
        sb_msg_t *msg;
        while (s->sub && (msg = sb_sub_recv (s->sub, 0))) {
            const char *sid = msg->h.key;
            sb_cluster_owner_t o;
            if (strcmp (msg->h.type, "session.event") == 0 && strlen (sid) == SB_ULID_LEN
            &&  !sb_cluster_holds (self->cluster, sid)
            &&  sb_cluster_owner_of (self->cluster, sb_cluster_shard_of (sid), &o) == 0
            &&  strcmp (o.node_id, s->node_id) == 0) {
                sb_enc_t *e = sb_enc_new ();
                if (e) {
                    sb_enc_val (e, msg->body);
                    size_t len;
                    const uint8_t *body = sb_enc_data (e, &len);
                    if (sb_pub_send (self->pub, msg->topic, msg->h.type, sid, body, len) == 0)
                        r->relayed++;
                    sb_enc_destroy (&e);
                }
            }
            sb_msg_destroy (&msg);
        }
    }
}

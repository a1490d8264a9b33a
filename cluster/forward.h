/*  cluster/forward.h — a request for a session of a shard another node
    owns, forwarded to that node and its answer relayed (docs/scale-out.md,
    "Forwarding"). Used by the three stateful actors: session, run and
    interact.

    On a node of a cluster, a request that changes a session whose shard
    this node does not hold goes, unchanged (type, key, body and so its
    command_id), to the same service of the owner, over a bus client of
    the actor's own to the owner's --bus: CURVE with this node's server
    key pair as the client's and the owner's public key from the nodes
    table. The owner's answer (.ok or error) goes back to the requester
    as the owner gave it. */
#ifndef SB_FORWARD_H
#define SB_FORWARD_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

struct sb_bus;
struct sb_msg;
struct _sb_cluster_t;

/*  The handshakes of a socket to another node: a CURVE refusal before any
    success (the other node has not allowed this one's key yet) asks for
    the socket to be made again, since ZeroMQ does not reconnect after it.
    Also the event relay's (actors/session/relay.c). */
typedef struct {
    zsock_t *monitor;           /* zmq_socket_monitor's events */
    bool connected;             /* a handshake succeeded */
    int64_t remake_at;          /* mono ms: refused, make it again then; 0: not refused */
} sb_peer_watch_t;
void sb_peer_watch_start (sb_peer_watch_t *w, void *sock, const void *tag);
void sb_peer_watch_stop (sb_peer_watch_t *w);
/*  Reads the events; true once a refused socket is due to be made again. */
bool sb_peer_watch_refused (sb_peer_watch_t *w, const char *actor, const char *node_id);

typedef struct sb_forward sb_forward_t;

/*  Takes a request here after all (its shard came to this node while it
    waited for a fresher owner cache): as the actor's dispatch takes it.
    It may take *msg_p; what it leaves is destroyed. */
typedef void (sb_forward_take_fn) (void *arg, struct sb_msg **msg_p, int tag);

/*  actor: the log's name; data_dir: where this node's bus key pair is
    (DATA/certs/server); instance: the bus clients' name prefix. NULL on
    no memory. Nothing is connected before the first forward. */
sb_forward_t *sb_forward_new (struct _sb_cluster_t *cluster, const char *actor, const char *data_dir,
                              const char *instance, sb_forward_take_fn *take, void *arg);
void sb_forward_destroy (sb_forward_t **self_p);

/*  True when it took *msg_p (forwarded, or answered overloaded); false to
    take it as usual (the session is this node's, or no bus to its owner
    can be made: the actor then refuses it not_owner as without
    forwarding). session_id: the session the request changes; tag: given
    back to take. */
bool sb_forward (sb_forward_t *self, struct sb_bus *bus, struct sb_msg **msg_p, const char *session_id, int tag);

/*  Relays the owners' answers, sends again what waited, expires the late. */
void sb_forward_poll (sb_forward_t *self, struct sb_bus *bus);

/*  The longest the actor's loop may sleep meanwhile (INT64_MAX: nothing
    in flight). The peers' sockets are not in the actor's poll. */
int64_t sb_forward_wait (sb_forward_t *self);

#endif

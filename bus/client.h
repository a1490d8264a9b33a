/*  bus/client.h — the bus as seen by actors and the CLI.

    One sb_bus_t is one DEALER on the command plane; it belongs to one
    thread. Frames on the wire (docs/protocol.md):
      request or one-way, either direction     [header][body]
      request delivered to a service instance  [route][header][body]
      reply from a service instance            [route][header][body]
    The route is the requester's identity at the broker; the instance hands
    it back untouched, and the broker matches (route, corr) against its
    pending table. */
#ifndef SB_BUS_CLIENT_H
#define SB_BUS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bus/envelope.h"
#include "schemas/codec.h"
#include "schemas/errors.h"


typedef struct sb_bus sb_bus_t;

/*  A received message. Owned by the caller of sb_bus_recv / sb_bus_call;
    free with sb_msg_destroy. */
typedef struct sb_msg {
    sb_header_t h;
    const sb_type_t *type;      /* schema row of h.type */
    sb_doc_t *doc;              /* owns the decoded body */
    const sb_val_t *body;       /* the body map */
    uint8_t *route;             /* requester route: set on requests delivered to us */
    size_t route_len;
    char topic [160];           /* event plane: the topic */
} sb_msg_t;

void sb_msg_destroy (sb_msg_t **msg_p);
bool sb_msg_is_error (const sb_msg_t *msg);
/*  For an error reply: its code name and message ("" when not an error). */
const char *sb_msg_error_code (const sb_msg_t *msg);
const char *sb_msg_error_message (const sb_msg_t *msg);

/*  The longest one endpoint of a list may be. */
#define SB_BUS_ENDPOINT_MAX 1024

/*  Connects a DEALER to the command endpoint. `name` goes in every header's
    `from`. Returns NULL on failure. `endpoint` may be a comma-separated
    list (the nodes of a cluster, docs/scale-out.md): the bus is connected
    to one at a time, the first, then the next when the one connected goes
    away. */
sb_bus_t *sb_bus_new (const char *endpoint, const char *name);
/*  The same over CURVE with keys of its own rather than the process's
    (bus/curve.h): `cert` (a full key pair) as the client's, the server's
    public key `server_public` (Z85). For a node's bus to another node. */
struct _zcert_t;
sb_bus_t *sb_bus_new_curve (const char *endpoint, const char *name, struct _zcert_t *cert,
                            const char *server_public);
void sb_bus_destroy (sb_bus_t **bus_p);
/*  With several endpoints: fn (bus, arg) runs on the caller's thread
    once the bus has gone on through the next endpoint, before the next
    request leaves, and may itself call sb_bus_call on the bus (a
    worker's executor re-asserts its claim to the node it now reaches,
    actors/exec/agent.c). NULL: nothing. */
typedef void (sb_bus_failover_fn) (sb_bus_t *bus, void *arg);
void sb_bus_on_failover (sb_bus_t *bus, sb_bus_failover_fn *fn, void *arg);

/*  The libzmq socket, for zmq_poll. It stays the same for the client's
    life: reconnects happen underneath. */
void *sb_bus_socket (sb_bus_t *bus);
/*  True when messages are already queued inside the client (poll with a
    zero timeout then). */
bool sb_bus_has_queued (sb_bus_t *bus);
const char *sb_bus_name (sb_bus_t *bus);

/*  Registers this client as an instance of `service` and waits for the
    broker's answer. caps: an encoded msgpack map, or NULL. Returns 0, or -1
    with err set (conflict, version, no broker: timeout). */
int sb_bus_register (sb_bus_t *bus, const char *service, const char *instance,
                     const uint8_t *caps, size_t caps_len, int timeout_ms, sb_verr_t *err);

/*  Sends a request without waiting. id_out (27 bytes) receives its id.
    deadline_ms: absolute ms since epoch, 0 for none. key: shard key or
    NULL. to: a specific instance or NULL. */
int sb_bus_send (sb_bus_t *bus, const char *type, const char *key, const char *to,
                 const uint8_t *body, size_t len, uint64_t deadline_ms, char *id_out);

/*  Next message for the caller, waiting up to timeout_ms (-1 forever, 0
    poll): a request delivered to this instance (msg->route set) or a
    reply, chunk or error answering one of ours. Heartbeats and other bus
    traffic are handled inside. NULL on timeout. */
sb_msg_t *sb_bus_recv (sb_bus_t *bus, int timeout_ms);

/*  Answers a request: type = request type + ".ok". */
int sb_bus_reply (sb_bus_t *bus, const sb_msg_t *req, const uint8_t *body, size_t len);
/*  One chunk of a streaming reply: type = request type + ".chunk". */
int sb_bus_chunk (sb_bus_t *bus, const sb_msg_t *req, uint64_t seq,
                  const uint8_t *body, size_t len);
/*  Answers with `error {code, message, retryable}`. */
int sb_bus_error (sb_bus_t *bus, const sb_msg_t *req, sb_err_t code, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
/*  The same, addressed by route and request header (for late answers). */
int sb_bus_reply_to (sb_bus_t *bus, const uint8_t *route, size_t route_len,
                     const sb_header_t *req, const char *type, uint64_t seq,
                     const uint8_t *body, size_t len);

/*  Sends a heartbeat when due and notices a lost broker (then registers
    again). Returns ms until it wants to run again. */
int64_t sb_bus_tick (sb_bus_t *bus);

/*  Blocking request/reply: returns the final reply (.ok or error) or NULL
    on timeout. Chunks are dropped; other messages that arrive meanwhile
    are queued for sb_bus_recv. */
sb_msg_t *sb_bus_call (sb_bus_t *bus, const char *type, const char *key,
                       const uint8_t *body, size_t len, int timeout_ms);

/*  Counters of what this client dropped as malformed. */
uint64_t sb_bus_malformed (sb_bus_t *bus);

/*  The largest frame any bus socket accepts (ZMQ_MAXMSGSIZE): the largest
    body a schema allows, or a header, whichever is larger. ZeroMQ drops a
    connection that announces a longer frame before it allocates it. */
int64_t sb_bus_max_frame (void);

/* ------------------------------------------------------------------ */
/*  Event plane */

typedef struct sb_pub sb_pub_t;
typedef struct sb_sub sb_sub_t;

/*  PUB connected to the broker's XSUB side (inproc or ipc bus-in). */
sb_pub_t *sb_pub_new (const char *endpoint, const char *name);
void sb_pub_destroy (sb_pub_t **pub_p);
int sb_pub_send (sb_pub_t *pub, const char *topic, const char *type, const char *key,
                 const uint8_t *body, size_t len);

/*  SUB connected to the broker's XPUB side. */
sb_sub_t *sb_sub_new (const char *endpoint);
/*  The same over CURVE with keys of its own (as sb_bus_new_curve). */
sb_sub_t *sb_sub_new_curve (const char *endpoint, struct _zcert_t *cert, const char *server_public);
void sb_sub_destroy (sb_sub_t **sub_p);
int sb_sub_subscribe (sb_sub_t *sub, const char *prefix);
void *sb_sub_socket (sb_sub_t *sub);
/*  Next valid event, or NULL on timeout. msg->topic is set. */
sb_msg_t *sb_sub_recv (sb_sub_t *sub, int timeout_ms);

/*  Parses [header][body] frames into a message, validating both against
    the schema. NULL with err set when malformed. */
sb_msg_t *sb_msg_parse (const uint8_t *hbuf, size_t hlen, const uint8_t *bbuf, size_t blen,
                        sb_verr_t *err);

#endif

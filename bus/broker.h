/*  bus/broker.h — the broker: command plane (ROUTER), event plane
    (XSUB -> XPUB proxy) and tap (XPUB copy of both planes).

    Runs as a czmq actor. In-process peers reach it at the SB_INPROC_*
    endpoints at once; the external endpoints (ipc, tcp) are bound only
    when the parent sends "BIND", after the other actors are ready
    (docs/architecture.md, startup order). */
#ifndef SB_BROKER_H
#define SB_BROKER_H

#include <czmq.h>

struct sb_enc;

#define SB_INPROC_CMD    "inproc://sb-cmd"
#define SB_INPROC_PUB_IN "inproc://sb-pub-in"
#define SB_INPROC_PUB    "inproc://sb-pub"
#define SB_INPROC_TAP    "inproc://sb-tap"

/*  High-water marks, in messages. The ROUTER's are high because one
    broker carries every actor's traffic and a burst must not be dropped;
    the tap's is low because a slow observer should lose tap frames, not
    slow the bus. The event plane's is per subscriber and trades two
    things: a subscriber that stops reading pins up to this many events
    (one copy is shared by every subscriber, so they count against the
    plane's byte bound, and past it every subscriber loses events until
    the pinned ones are released), while one that reads but falls behind
    in a burst loses the events past it, silently. 10,000 events of the
    usual few hundred bytes stay far below the bound. An inproc
    subscriber adds its own receive HWM to it. */
#define SB_BROKER_ROUTER_HWM 100000
#define SB_BROKER_PUB_HWM    10000
#define SB_BROKER_TAP_HWM    10000
/*  Bodies up to this size travel as ZeroMQ frames of their own, with no
    byte account: they are bounded by the HWMs above (a peer that never
    reads pins at most SB_BROKER_ROUTER_HWM of them, about 80 MiB with
    their frames), and they are most of the bus's traffic, which an
    account's copy and cross-thread release would slow by a fifth. Bigger
    bodies are charged to the byte bounds below. */
#define SB_BROKER_SMALL_BODY 512
/*  Byte bounds on what ZeroMQ holds in the server's memory
    (docs/operations.md, bounded queues): per peer on the command plane,
    and for all subscribers together on the event plane and on the tap
    (one message is shared by every subscriber). Past the bound a reply
    becomes an `overloaded` error, and an event or tap copy is dropped;
    each is counted. SWITCHBOARD_BUS_QUEUE_BYTES sets all three. The
    command plane also has a bound across all its peers together,
    SB_BROKER_QUEUE_TOTAL_FACTOR times the per-peer one (at most), so
    twenty peers that never read pin four bounds' worth, not twenty;
    SWITCHBOARD_BUS_QUEUE_TOTAL_BYTES sets it (never below the per-peer
    bound). */
#define SB_BROKER_QUEUE_BYTES      ((size_t) 64 << 20)
#define SB_BROKER_QUEUE_TOTAL_FACTOR 4
#define SB_BROKER_QUEUE_BYTES_MIN  ((size_t) 1 << 20)
/*  Error replies may go this far past the bound, so a requester learns
    that its reply was dropped. */
#define SB_BROKER_QUEUE_SLACK      ((size_t) 1 << 20)
/*  The largest frame a subscriber may send on the event plane's or the
    tap's XPUB: a subscription is a topic prefix. */
#define SB_BROKER_SUB_FRAME_MAX    4096
/*  The pending-request table's bound; a request beyond it is refused
    with `overloaded`. */
#define SB_BROKER_MAX_PENDING 200000
/*  A request without a deadline is forgotten after this long. */
#define SB_BROKER_PENDING_TTL_MS (3600 * 1000)

typedef struct {
    const char *ipc_dir;        /* bind ipc://<dir>/bus-{cmd,in,pub,tap}; NULL: none */
    const char *tcp;            /* tcp://ADDR:P for cmd, P+1 pub, P+2 tap; NULL: none */
    const char *certs_data;     /* CURVE on tcp with DATA/certs (bus/curve.h); NULL: plain tcp */
    size_t queue_bytes;         /* byte bound per plane; 0: the environment or the default */
    size_t queue_total;         /* command plane, all peers; 0: the environment or the default */
    /* more sections of bus.stats, written by the process that runs the
       broker (serve: the store's); called on the broker's thread with
       the stats map open. NULL: none */
    void (*stats_extra) (struct sb_enc *enc);
} sb_broker_config_t;

/*  zactor body: args is a sb_broker_config_t *, read at start.
    Pipe commands: "BIND" -> signal 0 (or 1 with an error logged);
    "$TERM". */
void sb_broker_actor (zsock_t *pipe, void *args);

#endif

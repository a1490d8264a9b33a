/*  bus/broker.h — the broker: command plane (ROUTER), event plane
    (XSUB -> XPUB proxy) and tap (XPUB copy of both planes).

    Runs as a czmq actor. In-process peers reach it at the SB_INPROC_*
    endpoints at once; the external endpoints (ipc, tcp) are bound only
    when the parent sends "BIND", after the other actors are ready
    (docs/architecture.md, startup order). */
#ifndef SB_BROKER_H
#define SB_BROKER_H

#include <czmq.h>

#define SB_INPROC_CMD    "inproc://sb-cmd"
#define SB_INPROC_PUB_IN "inproc://sb-pub-in"
#define SB_INPROC_PUB    "inproc://sb-pub"
#define SB_INPROC_TAP    "inproc://sb-tap"

/*  High-water marks, in messages. The ROUTER's are high because one
    broker carries every actor's traffic and a burst must not be dropped;
    the tap's is low because a slow observer should lose tap frames, not
    slow the bus. */
#define SB_BROKER_ROUTER_HWM 100000
#define SB_BROKER_PUB_HWM    100000
#define SB_BROKER_TAP_HWM    10000
/*  The pending-request table's bound; a request beyond it is refused
    with `overloaded`. */
#define SB_BROKER_MAX_PENDING 200000
/*  A request without a deadline is forgotten after this long. */
#define SB_BROKER_PENDING_TTL_MS (3600 * 1000)

typedef struct {
    const char *ipc_dir;        /* bind ipc://<dir>/bus-{cmd,in,pub,tap}; NULL: none */
    const char *tcp;            /* tcp://ADDR:P for cmd, P+1 pub, P+2 tap; NULL: none */
} sb_broker_config_t;

/*  zactor body: args is a sb_broker_config_t *, read at start.
    Pipe commands: "BIND" -> signal 0 (or 1 with an error logged);
    "$TERM". */
void sb_broker_actor (zsock_t *pipe, void *args);

#endif

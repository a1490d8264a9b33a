/*  gateway/bridge_impl.h — what the bridge's files share: the bus
    thread's state (gateway/bridge.c) and its bus tap (gateway/bridge_tap.c).

    Not a public header: only the bridge's files include it. Everything
    here runs on the bridge thread. */
#ifndef SB_GW_BRIDGE_IMPL_H
#define SB_GW_BRIDGE_IMPL_H

#include "gateway/gateway_impl.h"
#include "bus/client.h"

#include <czmq.h>
#include <stdatomic.h>

#define REPLAY_PAGE        500          /* tape entries per session.events */
#define LIVE_BUFFER_MAX    4096         /* live events held during a replay */
#define VERIFY_AFTER_MS    300          /* re-read a new topic's tape once after this */
#define PENDING_MAX        100000       /* calls waiting on the bus, all connections */

/*  A /metrics scrape is two calls: bus.stats (P_METRICS), then llm.info
    for the providers' latest rate limits (P_METRICS_LLM). */
typedef enum { P_CALL, P_REPLAY, P_METRICS, P_METRICS_LLM, P_BLOB } pend_kind_t;

typedef struct {
    pend_kind_t kind;
    sb_msg_t *stats;            /* P_METRICS_LLM: the bus.stats answer, or NULL */
    uint64_t conn;
    uint32_t sub_id;
    bool http;
    char *tx;
    int64_t deadline;           /* mono ms */
} pending_t;

typedef enum { S_REPLAYING, S_PAGE_WAIT, S_LIVE } sub_state_t;

typedef struct watch watch_t;

typedef struct {
    char key [40];
    uint64_t conn;
    uint32_t sub_id;
    char sid [32];
    char *tx;                   /* the subscribe's tx until "subscribed" is sent */
    uint64_t after;             /* the cursor the client asked for */
    uint64_t last;              /* the last seq delivered */
    sub_state_t state;
    bool more;                  /* S_PAGE_WAIT: the tape has more after this page */
    gw_buf_t **held;            /* live events buffered during a replay */
    uint64_t *held_seq;
    size_t nheld;
    size_t held_bytes;
    bool overflow;
    int64_t verify_at;          /* mono ms; 0: no verification due */
    watch_t *watch;
} bsub_t;

struct watch {
    char sid [32];
    zlistx_t *subs;             /* bsub_t *, not owned */
};

struct gw_bridge {
    sb_gateway_t *gw;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    sb_bus_t *bus;
    sb_sub_t *sub;
    zhashx_t *pending;          /* request id -> pending_t */
    zhashx_t *subs;             /* "conn:sub_id" -> bsub_t (owned) */
    zhashx_t *watches;          /* session id -> watch_t (owned) */
    sb_enc_t *enc;
    zsock_t *tap;               /* SUB on the broker's tap; subscribed while taps exist */
    zlistx_t *taps;             /* btap_t * (owned) */
    bool tap_live;              /* a tap message came since the subscription was made */
    int64_t tap_since;          /* when it was made (mono ms) */
};

typedef struct {
    uint64_t conn;
    uint32_t id;
    char filter [65];
    gw_buf_t *ack;              /* the `tapping` reply, held until the tap is live */
} btap_t;

//  The `tapping` reply waits for the first tap message after a new
//  subscription (the bus's heartbeats bring one every few ms), at most
//  this long: a subscription reaches the broker some time after it is made,
//  and a call made right after `tapping` must be on the tap.
#define SB_GW_TAP_ACK_MS 2000

/*  bridge.c: an item for the lws thread on a WebSocket (buf given up), and
    one added to a chain of live items (false when out of memory). */
void gw_bridge_out_ws (gw_bridge_t *self, uint64_t conn, uint32_t sub_id, gw_buf_t *buf, bool live, bool page_end);
bool gw_bridge_chain_live (gw_out_t **head, gw_out_t **tail, size_t *n, uint64_t conn, uint32_t sub_id,
                           gw_buf_t *buf);

/*  bridge_tap.c: the bus tap, for the connections that asked with op tap.
    _confirm: a tap message came, the held `tapping` replies go; _remove
    with id 0 drops every tap of conn; _on_tap renders one tap message. */
void gw_bridge_tap_add (gw_bridge_t *self, gw_in_t *in);
void gw_bridge_tap_remove (gw_bridge_t *self, uint64_t conn, uint32_t id);
void gw_bridge_tap_confirm (gw_bridge_t *self);
void gw_bridge_on_tap (gw_bridge_t *self, zmsg_t *msg);

#endif

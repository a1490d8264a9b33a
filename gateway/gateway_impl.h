/*  gateway/gateway_impl.h — what the lws thread and the bridge thread share.

    Two threads, two queues:
      lws thread    owns the lws context, every connection and its outbound
                    queue; parses and checks what clients send.
      bridge thread owns the bus DEALER and the event-plane SUB; sends
                    calls, follows tapes, turns replies and events into JSON.
    lws -> bridge: gw_in_t items on `in`, woken by an eventfd.
    bridge -> lws: gw_out_t items on `out`, woken by lws_cancel_service().
    Connections are named by a conn_id (slot and generation), never by a
    pointer, so an answer for a connection that has gone is dropped. */
#ifndef SB_GATEWAY_IMPL_H
#define SB_GATEWAY_IMPL_H

#include "gateway/gateway.h"

#include <libwebsockets.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*  A frame as it will be written: LWS_PRE bytes of headroom, then the
    text. Shared by every connection an event goes to, so 1,000 watchers
    of a session cost one encoding; freed when the last one has written it. */
typedef struct {
    atomic_int refs;
    size_t len;
    unsigned char data [];      /* LWS_PRE + len + 1 */
} gw_buf_t;

gw_buf_t *gw_buf_new (const char *text, size_t len);
/*  A buffer of len bytes for the caller to fill at gw_buf_text. */
gw_buf_t *gw_buf_alloc (size_t len);
char *gw_buf_text (gw_buf_t *buf);
gw_buf_t *gw_buf_ref (gw_buf_t *buf);
void gw_buf_unref (gw_buf_t **buf_p);

/*  Bytes of WebSocket frames gathered into one send (gateway/ws.c), and
    lws's tx_packet_size, so such a send is not cut and copied. */
#define SB_GW_TX_BATCH  (64u << 10)

typedef enum {
    GW_IN_CALL,         /* a request for the bus (WS call or REST) */
    GW_IN_SUB,          /* subscribe conn/sub_id to session sid after `after` */
    GW_IN_UNSUB,        /* drop conn/sub_id */
    GW_IN_PAGE_DONE,    /* the last event of a replay page was written */
    GW_IN_CLOSE,        /* the connection went: drop its calls and subscriptions */
    GW_IN_METRICS,      /* render /metrics (needs bus.stats) */
    GW_IN_TAP,          /* stream the bus tap to conn as sub_id; `type`: the filter */
    GW_IN_UNTAP         /* stop conn's tap sub_id */
} gw_in_kind_t;

typedef struct gw_in {
    struct gw_in *next;
    gw_in_kind_t kind;
    uint64_t conn;
    uint32_t sub_id;
    bool http;          /* CALL: answer as an HTTP response, not a WS reply */
    bool blob;          /* CALL: a blob download, answered with its bytes (gateway/blobs.c) */
    char type [65];     /* CALL: the message type */
    char sid [64];      /* SUB: the session */
    uint64_t after;     /* SUB: after_seq */
    char *tx;           /* CALL, SUB, UNSUB, TAP: the client's tx as JSON text (owned) */
    uint8_t *body;      /* CALL: msgpack (owned) */
    size_t body_len;
} gw_in_t;

typedef enum {
    GW_OUT_WS,          /* a frame for one WebSocket */
    GW_OUT_HTTP         /* a whole HTTP response */
} gw_out_kind_t;

typedef struct gw_out {
    struct gw_out *next;
    gw_out_kind_t kind;
    uint64_t conn;
    uint32_t sub_id;    /* WS: the subscription an event belongs to (0: none) */
    bool live;          /* WS: a live event (counts against the outbound bound) */
    bool page_end;      /* WS: the last event of a replay page: say when written */
    bool reply;         /* WS: the answer to a call (the in-flight count drops) */
    bool end_sub;       /* WS: the bridge ended this subscription (an error, a resync) */
    int status;         /* HTTP */
    const char *ctype;  /* HTTP: content type (static string) */
    gw_buf_t *buf;
    char *tx;           /* WS reply: the call's tx as JSON text, for an `overloaded` in its place */
    size_t handoff;     /* bytes of buf counted in the gateway's handoff_bytes */
    char *extra;        /* HTTP: more header lines, "name: value\n" each (owned), or NULL */
} gw_out_t;

/*  Blobs over HTTP (gateway/blobs.c, docs/images.md). An upload's body
    may be this large; every other body SB_GW_MAX_FRAME. */
#define SB_GW_MAX_BLOB (24u << 20)
#define SB_GW_TOO_LARGE "a body may be at most 1 MiB (an upload to /api/blobs/: 24 MiB)"
//  What a POST to path may carry.
size_t gw_body_max (const char *path);
struct gw_pss;
/*  A request on /api/blobs/: true, with *in the bus call to make (NULL
    when out of memory), or with code and message set when the method
    does not fit the route (*in NULL). false for any other path. */
bool gw_blob_in (const struct gw_pss *pss, gw_in_t **in, char code [32], char *message, size_t message_len);
struct sb_msg;
//  Hands the lws thread the answer to a download (bridge thread); false
//  when out of memory or past the handoff's bound (nothing was sent).
bool gw_blob_answer (sb_gateway_t *gw, uint64_t conn, const struct sb_msg *reply);
//  A UI file's content type, by its name.
const char *gw_static_mime (const char *path);

/*  A locked singly linked FIFO of gw_in_t or gw_out_t. */
typedef struct {
    pthread_mutex_t lock;
    void *head, *tail;
    size_t count;
} gw_queue_t;

void gw_queue_init (gw_queue_t *q);
/*  `item` starts with a `next` pointer. Returns the count before. */
size_t gw_queue_push (gw_queue_t *q, void *item);
/*  Takes the whole list at once: the caller walks it by `next`. */
void *gw_queue_take (gw_queue_t *q);

void gw_in_free (gw_in_t *in);
void gw_out_free (gw_out_t *out);

/*  Counters for /metrics, written by both threads. */
typedef struct {
    atomic_uint_fast64_t http_requests;
    atomic_uint_fast64_t http_errors;
    atomic_uint_fast64_t ws_opened;
    atomic_uint_fast64_t ws_closed;
    atomic_uint_fast64_t ws_rx_frames;
    atomic_uint_fast64_t ws_tx_frames;
    atomic_uint_fast64_t ws_tx_bytes;
    atomic_uint_fast64_t ws_tx_sends;       /* writes to a socket: a batch of frames is one */
    atomic_uint_fast64_t ws_bad_frames;
    atomic_uint_fast64_t ws_too_large;
    atomic_uint_fast64_t ws_forbidden;
    atomic_uint_fast64_t ws_resyncs;
    atomic_uint_fast64_t ws_flow_paused;
    atomic_uint_fast64_t ws_replies_dropped;  /* replies over a bound, answered `overloaded` */
    atomic_uint_fast64_t ws_overflow_closed;  /* connections closed: not even an error fitted */
    atomic_int_fast64_t ws_queued_bytes;      /* now, over every WebSocket */
    atomic_int_fast64_t handoff_bytes;        /* now: answers on their way from the bridge to
                                                 the lws thread (bound: out_total) */
    atomic_int_fast64_t handoff_peak;         /* the most handoff_bytes has been */
    atomic_uint_fast64_t auth_failures;
    atomic_uint_fast64_t host_refused;
    atomic_uint_fast64_t origin_refused;
    atomic_uint_fast64_t csrf_refused;      /* writes without proof a script of ours made them */
    atomic_uint_fast64_t conn_refused;
    atomic_uint_fast64_t fd_refused;        /* connections refused to keep serve's descriptors */
    atomic_uint_fast64_t body_timeouts;     /* requests closed for a body that took too long */
    atomic_uint_fast64_t calls;
    atomic_uint_fast64_t call_timeouts;
    atomic_uint_fast64_t events_in;         /* live events from the event plane */
    atomic_uint_fast64_t events_out;        /* event frames queued to clients */
    atomic_uint_fast64_t replays;           /* session.events pages read for subscribers */
    atomic_int_fast64_t ws_open;            /* now */
    atomic_int_fast64_t subs_open;          /* now */
} gw_stats_t;

typedef struct gw_bridge gw_bridge_t;

struct sb_gateway {
    sb_gateway_config_t cfg;
    char data_dir [4096];
    char bind_addr [256];
    char ui_dir [4096];         /* "" when no UI was found */
    char token [65];
    char allow [16][256];       /* --allow-host names, copied */
    const char *allow_ptrs [17];
    int port;
    bool tls;
    uint32_t max_conns, max_per_addr;
    uint64_t out_max;
    uint64_t out_total;         /* the bound on q_total */
    size_t q_total;             /* lws thread only: bytes queued on every connection
                                   (WebSocket frames, HTTP answers) */
    uint32_t idle_s;            /* ping an idle WebSocket after this; close at twice */
    int fd_cap;                 /* a connection on a descriptor at or past this is refused:
                                   what is left of `ulimit -n` is the rest of serve's */
    lws_retry_bo_t idle;        /* lws keeps a pointer: lives as long as the context */

    struct lws_context *context;
    pthread_t lws_thread;
    bool lws_started;
    atomic_bool stopping;
    /* startup handshake between sb_gateway_start and the lws thread */
    pthread_mutex_t start_lock;
    pthread_cond_t start_cond;
    int start_state;            /* 0 pending, 1 listening, -1 failed */
    char start_err [256];

    gw_queue_t in;              /* lws -> bridge */
    int in_fd;                  /* eventfd that wakes the bridge */
    gw_queue_t out;             /* bridge -> lws */
    gw_bridge_t *bridge;
    gw_stats_t stats;
    struct gw_conns *conns;     /* lws thread only (gateway/http.c) */
    /* lws thread only: frames queued for one connection, gathered for one
       send (gateway/ws.c) */
    unsigned char tx_batch [LWS_PRE + SB_GW_TX_BATCH];
};

/*  The bridge thread (gateway/bridge.c). */
gw_bridge_t *gw_bridge_start (sb_gateway_t *gw, char *err, size_t err_len);
void gw_bridge_stop (gw_bridge_t **bridge_p);

/*  Any thread: hand an item to the bridge. */
void gw_to_bridge (sb_gateway_t *gw, gw_in_t *in);
/*  Bridge thread: hand an item to the lws thread and wake it. */
void gw_to_lws (sb_gateway_t *gw, gw_out_t *out);
/*  The same for a chain head..tail of n items linked by `next`, under one
    lock: how one event reaches all its watchers. */
void gw_to_lws_chain (sb_gateway_t *gw, gw_out_t *head, gw_out_t *tail, size_t n);
/*  The bytes of answers (replies, REST bodies) on their way from the
    bridge to the lws thread are bounded by out_total: the bridge charges
    an answer before it hands it over (false: it does not fit, and the
    call is answered `overloaded` instead), the lws thread releases it when
    it takes it. Answers of at most SB_GW_HANDOFF_SMALL bytes are not
    counted, so an error always gets through. */
#define SB_GW_HANDOFF_SMALL 4096
bool gw_handoff_charge (sb_gateway_t *gw, gw_out_t *out);
void gw_handoff_release (sb_gateway_t *gw, gw_out_t *out);

/*  The lws thread's entry (gateway/http.c). */
void *gw_lws_main (void *arg);

/*  Where an HTTP request stands. Only an admitted POST reads its body,
    and only BODY -> DISPATCHED runs a handler, once: a request answered
    or refused at its headers is DONE, and what lws still delivers of its
    body (it may already be in the buffer) is dropped. */
typedef enum {
    GW_REQ_DONE,        /* answered, refused or dispatched: nothing more runs */
    GW_REQ_BODY         /* admitted: the body is read, then dispatched once */
} gw_req_stage_t;

/*  One connection's state (lws's per-session data), HTTP or WebSocket.
    Lives on the lws thread only. */
typedef struct {
    uint32_t id;
    char sid [32];
} gw_sub_t;

typedef struct gw_pss {
    uint64_t conn;              /* 0 until registered in the table */
    bool is_ws;
    bool counted;               /* counted in its address's WS connections */
    char addr [64];             /* the peer's address */
    /* HTTP: one transaction at a time */
    bool post;
    bool waiting;               /* a bus reply is due */
    bool too_large;
    gw_req_stage_t stage;       /* what the request may still do (below) */
    bool close_after;           /* close the connection once the answer is written */
    int64_t body_deadline;      /* BODY: monotonic ms by which the body must be in */
    char path [512];
    char *args;                 /* query arguments, decoded, NUL-separated pairs */
    size_t nargs;
    uint8_t *body;
    size_t body_len;
    int status;
    const char *ctype;
    char *extra;                /* more headers: "Name: value\n"... */
    bool no_store;
    bool oauth_page;            /* /oauth/callback: answered as an HTML page (gateway/oauth_page.c) */
    gw_buf_t *resp;
    size_t resp_off;
    size_t resp_charged;        /* bytes of resp counted in the gateway's q_total */
    bool hdr_sent;
    bool resp_ready;
    /* WebSocket */
    gw_out_t *q_head, *q_tail;  /* outbound frames, oldest first */
    size_t q_bytes;
    size_t q_count;
    char *rx;                   /* the message being received */
    size_t rx_len, rx_cap;
    bool rx_binary;
    int inflight;               /* calls without their reply yet */
    bool rx_paused;             /* lws_rx_flow_control (wsi, 0) is in force */
    bool kill;                  /* a frame did not fit even as an error: close */
    gw_sub_t *subs;
    size_t nsubs, subs_cap;
    uint32_t next_sub;
    uint32_t tap_id;            /* the bus tap's stream id (0: not tapping) */
} gw_pss_t;

/*  /oauth/callback's page (gateway/oauth_page.c): the HTTP `status` and
    the JSON answer (json, len) as HTML for the person's browser, every
    value escaped; as_error and as_description (or NULL) what the
    authorization server put in the query. A new buffer, or NULL.        */
gw_buf_t *gw_oauth_page (int status, const char *json, size_t len, const char *as_error, const char *as_description);
/*  The same for a response of `pss` (an /oauth/callback): replaces *body
    (taken) by the page, marks it no-store, and returns its Content-Type.
    The page is sent with GW_OAUTH_CSP: it has no script, style or image,
    so nothing at all may load in it.                                      */
const char *gw_oauth_respond (struct gw_pss *pss, int status, gw_buf_t **body);
#define GW_OAUTH_CSP "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/*  WebSocket frames (gateway/ws.c), on the lws thread. The connection
    state is defined in http.c; ws.c sees it through these calls. */
struct gw_pss;
void gw_ws_established (sb_gateway_t *gw, struct lws *wsi, struct gw_pss *pss);
int gw_ws_receive (sb_gateway_t *gw, struct lws *wsi, struct gw_pss *pss, const void *in, size_t len);
int gw_ws_writeable (sb_gateway_t *gw, struct lws *wsi, struct gw_pss *pss);
void gw_ws_closed (sb_gateway_t *gw, struct gw_pss *pss);
/*  An item from the bridge for this WebSocket. Takes ownership. */
void gw_ws_deliver (sb_gateway_t *gw, struct lws *wsi, struct gw_pss *pss, gw_out_t *out);

/*  Who may ask (gateway/auth.c), on the lws thread. */
/*  How a request proved it has the token. */
typedef enum {
    GW_AUTH_NONE,          /* it did not */
    GW_AUTH_BEARER,        /* Authorization: Bearer: a script or a program, never a form */
    GW_AUTH_COOKIE,        /* the browser's cookie: any page of 127.0.0.1 may make it send it */
    GW_AUTH_QUERY          /* ?token= on a page load or the /ws URL */
} gw_auth_t;

/*  A header into out (n bytes): its length, 0 when absent, -1 when longer. */
int gw_header (struct lws *wsi, enum lws_token_indexes h, char *out, size_t n);
/*  The decoded query arguments into pss (NUL-separated pairs), and one of them. */
void gw_read_args (struct lws *wsi, struct gw_pss *pss);
const char *gw_arg (const struct gw_pss *pss, const char *name);
/*  The cookie's name: sb_token_PORT. */
void gw_cookie_name (sb_gateway_t *gw, char *out, size_t n);
/*  Which way the request carries the right token (?token= only when query_ok). */
gw_auth_t gw_authorized (sb_gateway_t *gw, struct lws *wsi, struct gw_pss *pss, bool query_ok);
/*  Origin, when sent, is ours; with `strict`, Sec-Fetch-Site, when sent, is
    same-origin or none. */
bool gw_same_origin (sb_gateway_t *gw, struct lws *wsi, const char *host, bool strict);
/*  The request carries X-Switchboard (only a script of ours can set it). */
bool gw_script_proof (struct lws *wsi);
/*  The Host header (into host, n bytes) is one the gateway answers to. */
bool gw_host_allowed (sb_gateway_t *gw, struct lws *wsi, char *host, size_t n);

/*  Counts len bytes into (add) or out of the total of every connection's
    queue, and whether len more would fit it (gateway/ws.c). */
void gw_queued (sb_gateway_t *gw, size_t len, bool add);
bool gw_total_fits (sb_gateway_t *gw, size_t len);

/*  /metrics as Prometheus text: the counters, then the numbers of a
    bus.stats reply (NULL or an error: a comment says so). A new buffer,
    NULL when out of memory (gateway/metrics.c). */
struct sb_msg;
gw_buf_t *gw_metrics_render (sb_gateway_t *gw, const struct sb_msg *stats, const struct sb_msg *llm);

/*  The frames the bridge sends (gateway/translate.c), each a new buffer
    (NULL: out of memory): an event {op:"event", ...the event's fields};
    a reply {op:"reply", tx, type, body} (tx: JSON text, NULL for null);
    an error with retryable and detail when set, as a WebSocket frame
    {code, message, tx, op:"error"} or as REST's {error:{code, message}}. */
struct sb_val;
gw_buf_t *gw_event_frame (const struct sb_val *event);
gw_buf_t *gw_reply_frame (const char *tx, const char *type, const struct sb_val *body);
gw_buf_t *gw_error_json (const char *tx, bool http, const char *code, const char *message, bool retryable,
                         const struct sb_val *detail);
/*  The JSON of an error frame {op:"error", tx, code, message}: a new buffer. */
gw_buf_t *gw_error_frame (const char *tx, const char *code, const char *message);
/*  The HTTP status that fits an error code. */
int gw_http_status (const char *code);

/*  REST (gateway/rest.c): maps METHOD PATH?QUERY + body to a message type
    and a JSON body. Returns 0 with *type and *body (new reference) set,
    or an HTTP status with code/message filled when the route is wrong. */
#include <jansson.h>
typedef struct {
    const char *name;
    const char *value;
} gw_arg_t;
int gw_rest_route (const char *method, const char *path, const gw_arg_t *args, size_t nargs,
                   json_t *body, char *type, size_t type_len, json_t **out,
                   char *code, size_t code_len, char *message, size_t message_len);

/*  JSON -> msgpack for a type: the shared translation of WS calls and REST.
    Refuses a type the schema lacks (unknown_type), one that is not public
    (forbidden), a body that is not an object or does not validate
    (invalid). Returns 0 with *msgpack (caller frees) set, else -1 with
    code and message filled. */
int gw_translate (const char *type, const json_t *body, uint8_t **msgpack, size_t *len,
                  char *code, size_t code_len, char *message, size_t message_len);

#endif

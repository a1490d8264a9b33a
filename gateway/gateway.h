/*  gateway/gateway.h — the HTTP and WebSocket gateway of `serve`
    (docs/gateway.md).

    One libwebsockets context serves the browser UI, the WebSocket at /ws,
    REST at /api/..., /metrics and /healthz on one port. lws runs in a
    thread of its own; a second thread (the bridge) owns the bus sockets.
    The two meet only through queues (gateway/gateway_impl.h). */
#ifndef SB_GATEWAY_H
#define SB_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*  Limits, each with its default; serve's flags override them. */
#define SB_GW_MAX_FRAME          (1u << 20)   /* a WS message or HTTP body */
#define SB_GW_MAX_DEPTH          32           /* JSON nesting */
#define SB_GW_OUT_MAX_DEFAULT    (8u << 20)   /* queued outbound bytes per connection */
#define SB_GW_OUT_TOTAL_DEFAULT  (256u << 20) /* queued outbound bytes, all WebSockets */
#define SB_GW_MAX_CONNS_DEFAULT  1024         /* WebSocket connections, in total */
#define SB_GW_MAX_PER_ADDR_DEFAULT 256        /* WebSocket connections from one address */
#define SB_GW_MAX_INFLIGHT       64           /* calls one connection may have waiting */
#define SB_GW_MAX_SUBS           256          /* sessions one connection may watch */
#define SB_GW_CALL_TIMEOUT_MS    30000        /* a call with no reply gets `timeout` */
#define SB_GW_IDLE_PING_S        30           /* an idle WS gets a ping after this (--http-idle) */
#define SB_GW_IDLE_MAX_S         3600         /* the most --http-idle takes */

typedef struct {
    const char *data_dir;       /* DATA: the token, http.port */
    const char *http;           /* ADDR:PORT to listen on; port 0: any free one */
    const char *tls_cert;       /* PEM files, both or neither */
    const char *tls_key;
    const char *ui_dir;         /* the static UI; NULL: found next to the binary */
    const char *cmd_endpoint;   /* broker command plane */
    const char *sub_endpoint;   /* broker XPUB side */
    const char *const *allow_hosts; /* more Host names to accept, NULL-terminated; may be NULL */
    uint32_t max_conns;         /* 0: default */
    uint32_t max_per_addr;      /* 0: default */
    uint64_t out_max;           /* 0: default */
    uint64_t out_total;         /* 0: default (never below out_max) */
    uint32_t idle_s;            /* ping an idle WebSocket after this many seconds, and close
                                   it when no pong came as long again; 0: SB_GW_IDLE_PING_S */
} sb_gateway_config_t;

typedef struct sb_gateway sb_gateway_t;

/*  Creates DATA/token when absent, binds the port and starts both threads.
    Returns NULL with err filled when it cannot (the port is taken, the TLS
    files do not load, the bus is unreachable). Called from serve's main
    thread once the actors are ready. */
sb_gateway_t *sb_gateway_start (const sb_gateway_config_t *cfg, char *err, size_t err_len);

/*  The port it listens on, and the token (owned by the gateway). */
int sb_gateway_port (const sb_gateway_t *gw);
const char *sb_gateway_token (const sb_gateway_t *gw);
/*  "http" or "https". */
const char *sb_gateway_scheme (const sb_gateway_t *gw);

/*  Stops both threads, closing every connection. Tolerates NULL. */
void sb_gateway_stop (sb_gateway_t **gw_p);

/*  Reads DATA/token, creating it (mode 0600, 32 random bytes as hex) on
    first use. Returns 0, or -1 with err filled. out holds 65 bytes. */
int sb_gateway_token_load (const char *data_dir, char out [65], char *err, size_t err_len);

/*  True when `given` (len bytes) equals the token, in constant time. */
bool sb_gateway_token_ok (const char *token, const char *given, size_t len);

/*  True when the host part of a Host header value (name, v4 address or
    [v6], with an optional :port) is one the gateway answers to:
    localhost, 127.0.0.1, ::1, the bound address or one of `extra`. */
bool sb_gateway_host_ok (const char *host, const char *bound, const char *const *extra);

/*  True when an address (as given to --http) is loopback. */
bool sb_gateway_addr_loopback (const char *addr);

#endif

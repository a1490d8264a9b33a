/*  bus/broker_impl.h — what the broker's files share (bus/broker.c: its
    life, sending and the command plane; bus/broker_members.c: instances,
    services, the bus.* requests and the timers; bus/broker_events.c: the
    event plane). Everything here runs on the broker's thread. */
#ifndef SB_BUS_BROKER_IMPL_H
#define SB_BUS_BROKER_IMPL_H

#include "bus/broker.h"
#include "bus/curve.h"
#include "bus/client.h"
#include "bus/envelope.h"
#include "bus/outq.h"
#include "common/log.h"
#include "schemas/codec.h"
#include "schemas/schema.h"

#include <czmq.h>

#define ACTOR "broker"
#define MAX_FRAMES 5
#define ID_MAX 256
#define SB_EXPIRY_CHECK_MS 100

typedef struct service service_t;

typedef struct {
    uint8_t id [ID_MAX];        /* ROUTER identity */
    size_t idlen;
    char key [2 * ID_MAX + 1];  /* hex of id: the table key */
    char instance [129];
    service_t *service;
    int64_t expires;            /* mono ms */
    void *handle;               /* position in the service's LRU list */
    uint64_t served;
} instance_t;

struct service {
    char name [33];
    bool singleton;
    zlistx_t *lru;              /* instance_t *, least recently used first */
};

typedef struct {
    instance_t *inst;
    uint8_t route [ID_MAX];
    size_t route_len;
    int64_t expires;            /* mono ms */
    char type [65];
    char id [33];
    bool dropped;               /* the requester was told its stream was dropped */
} pending_t;

enum { M_FRAMES, M_HEADER, M_UNKNOWN_TYPE, M_BODY, M_KIND, M_UNMATCHED,
       M_EVT_FRAMES, M_EVT_HEADER, M_EVT_BODY, M_COUNT };
extern const char *const brk_malformed_names [M_COUNT];

typedef struct {
    zsock_t *pipe;
    zsock_t *router;
    zsock_t *xsub;
    zsock_t *xpub;
    zsock_t *tap;
    sb_broker_config_t config;
    char *ipc_dir;
    char *tcp;
    char *certs_data;           /* CURVE on tcp: DATA of DATA/certs */
    void (*stats_extra) (struct sb_enc *enc);   /* sb_broker_config_t's */
    zactor_t *auth;             /* the ZAP handler (bus/curve.h), while CURVE is on */
    sb_curve_ids_t *ids;        /* the roles of the allowed keys, a worker key's grants */
    zhashx_t *instances;        /* key hex -> instance_t */
    zhashx_t *services;         /* name -> service_t */
    zhashx_t *pending;          /* "routehex:id" -> pending_t */
    zhashx_t *tap_subs;         /* prefix -> count (as pointer) */
    sb_enc_t *enc;
    sb_enc_t *body_enc;
    int64_t started;
    int64_t next_heartbeat;
    int64_t next_expiry;
    bool terminated;
    /* counters */
    uint64_t plane_cmd_in, plane_cmd_out, plane_evt_in, plane_evt_out, plane_tap_out;
    uint64_t *type_counts;      /* indexed like sb_schema_all() */
    size_t ntypes;
    uint64_t malformed [M_COUNT];
    uint64_t drop_unroutable, drop_hwm, no_service, expired_instances, expired_pending;
    sb_ratelimit_t rl;
    /* byte bounds (bus/outq.h) */
    size_t queue_bytes;         /* the bound, per peer or per plane */
    size_t queue_total;         /* the bound over every peer of the command plane */
    sb_outq_t *cmd_q;           /* command plane: one account per peer */
    sb_outq_acct_t *evt_q;      /* event plane: one account, shared */
    sb_outq_acct_t *tap_q;      /* tap: one account, shared */
    uint64_t drop_cmd, drop_evt, drop_tap;                  /* messages past the bound */
    uint64_t drop_cmd_bytes, drop_evt_bytes, drop_tap_bytes;
} self_t;

/*  What a send on the command plane came to. */
typedef enum { SEND_OK, SEND_FULL, SEND_FAILED } send_t;

/*  bus/broker.c */
void brk_bad (self_t *self, int kind, const uint8_t *peer, size_t peer_len, const char *detail);
void brk_count_type (self_t *self, const sb_type_t *t);
void brk_hex (const uint8_t *p, size_t n, char *out);
int brk_read (void *sock, zmq_msg_t *f);
void brk_read_frames_close (zmq_msg_t *f, int n);
void brk_reply (self_t *self, const uint8_t *dest, size_t dest_len, const sb_header_t *req,
                const char *type, const uint8_t *body, size_t blen);
void brk_reply_error (self_t *self, const uint8_t *dest, size_t dest_len, const sb_header_t *req,
                      sb_err_t code, const char *fmt, ...) __attribute__ ((format (printf, 6, 7)));
void brk_send_made (self_t *self, const uint8_t *dest, size_t dest_len, const uint8_t *route,
                    size_t route_len, const sb_header_t *h, const uint8_t *body, size_t blen);
bool brk_tap_active (self_t *self);
void brk_tap_copy (self_t *self, const char *plane, const void *peer, size_t peer_len,
                   const void *hdr, size_t hlen, const void *body, size_t blen);

/*  bus/broker_members.c */
void brk_expire_instances (self_t *self);
void brk_handle_bus (self_t *self, const uint8_t *sid, size_t sidlen, const char *skey,
                     const sb_header_t *h, const sb_val_t *body);
void brk_heartbeat (self_t *self);

/*  bus/broker_events.c */
void brk_handle_subs (self_t *self, zsock_t *sock, bool track);
void brk_handle_xsub (self_t *self);

#endif

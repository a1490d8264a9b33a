/*  bus/curve.h — CURVE on the bus's TCP endpoints (docs/workers.md,
    "Security on TCP").

    The server's key pair is czmq's layout, DATA/certs/server and
    DATA/certs/server_secret; a client key is allowed by its public
    certificate in DATA/certs/clients/. `switchboard keys new NAME` writes
    DATA/certs/clients/NAME and NAME_secret. ipc and inproc stay without
    CURVE: the broker binds them before it turns curve_server on. */
#ifndef SB_BUS_CURVE_H
#define SB_BUS_CURVE_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>

#include "bus/envelope.h"
#include "schemas/errors.h"

/*  The server's certificate, made (0600 secret) on first use. NULL with
    err set on failure. The caller destroys it. */
zcert_t *sb_curve_server_cert (const char *data_dir, char *err, size_t errlen);

/*  Writes a client key pair NAME (public) and NAME_secret (0600) in
    DATA/certs/clients/, with its role (worker, client, actor: below) and,
    for a worker key, the pools it may serve (`pools`, "a,b"; NULL or "":
    the default pool only); secret_path receives the secret file's path.
    Returns 0, or -1 with err set (an existing NAME is not overwritten). */
int sb_curve_client_new (const char *data_dir, const char *name, const char *role, const char *pools,
                         char *secret_path, size_t n, char *err, size_t errlen);

/*  Allows another node of a cluster (docs/scale-out.md, "Forwarding") by
    its bus's public key (Z85), as DATA/certs/clients/node-NODE_ID with
    the role actor: nodes learn each other's keys from the cluster's
    database, and the broker's ZAP handler reads the folder as for any
    key. Rewritten when the key changed. Returns 0, or -1. */
int sb_curve_node_allow (const char *data_dir, const char *node_id, const char *public_txt);

/*  At most this many server certificates in one --server-key list: one
    per endpoint of a --connect list (docs/scale-out.md, "Workers and the
    CLI with several endpoints"). */
#define SB_CURVE_SERVER_KEYS_MAX 16

/*  The number of files in a --server-key list ("FILE" or
    "FILE1,FILE2,..."), or 0 with err set when it is not one: an empty
    name, or more than SB_CURVE_SERVER_KEYS_MAX. Reads nothing. */
size_t sb_curve_server_key_count (const char *list, char *err, size_t errlen);

/*  Whether a --server-key list fits an endpoint list: one key for any
    list, else one key per endpoint. Returns 0, or -1 with err set (the
    list itself malformed, or the counts apart). Reads nothing. */
int sb_curve_server_keys_fit (const char *list, const char *endpoints, char *err, size_t errlen);

/*  A client process's keys for tcp endpoints: its certificate (the
    secret file, or the public file beside it) and the servers' public
    certificates, a list as above. Every bus socket this process then
    connects to a tcp:// endpoint uses CURVE, with the first server key
    unless sb_curve_client_endpoints gave that endpoint another. Returns
    0, or -1 with err set. */
int sb_curve_client_set (const char *cert_path, const char *server_cert_paths, char *err, size_t errlen);

/*  Pairs the endpoints of a list ("EP1,EP2,...", as sb_cli_endpoint
    derives it) with the server keys, in order: the k-th endpoint is
    served by the k-th key. With one key, every endpoint has it and the
    list may be any length; with several, the list must have as many
    endpoints as there are keys (else -1 with err set, as
    sb_curve_server_keys_fit says). Called once per
    derived list (the command plane's, the event plane's), before any
    socket connects. */
int sb_curve_client_endpoints (const char *endpoints, char *err, size_t errlen);

/*  Applies the client keys to a socket about to connect to `endpoint`
    (nothing unless it is tcp:// and sb_curve_client_set was called):
    the client's key pair, and the server key of that endpoint. A
    socket that connects to another endpoint later (a failover) calls it
    again first: ZeroMQ takes the server key at connect. */
void sb_curve_apply_client (zsock_t *sock, const char *endpoint);

/* ------------------------------------------------------------------ */
/*  Who a CURVE peer is (the broker's ZAP handler and per-message check;
    docs/workers.md, "Security on TCP")

    A client key's certificate in DATA/certs/clients/ carries a role in its
    metadata (`keys new NAME [--client|--actor]`):
      worker  (the default) only the worker protocol, for worker_id NAME,
              in the pools of its `pools` metadata (`keys new --pool P`;
              none: the pool `default` only), on the command plane only,
              and only for the runs it holds a claim on (below); it
              appends only the kinds an executor writes, with its claim's
              run_id and fence;
      client  the public types (what the gateway passes), every plane;
      actor   everything: a remote `switchboard actor exec|llm`.
    Peers on ipc and inproc carry no User-Id and are not checked.

    A worker key's grants. The broker learns a claim from the run.claim
    reply it forwards to the key (run_id, session_id, lease_expires_at)
    and from then on lets the key reach that session and that run only:
    session.get, session.events, session.append, session.steer.take and
    interact.request must name a granted session (and, where they name a
    run, its run); run.heartbeat and run.complete a granted run;
    interact.get an interaction the key asked for under a grant; llm.*
    needs a live grant. A grant ends with run.complete's reply, with any
    `fenced` reply to the key, and when its lease lapses (a heartbeat's
    reply extends it). A claim made through another node (the worker's
    bus failed over here when that node died) is granted by the reply to
    a run.heartbeat that names the key's own worker_id: the run actor
    answers it only when that worker holds the run's claim with the
    heartbeat's fence; an interaction it asked for there is then readable
    when interact.get's reply shows it is of a granted run (else the
    reply is withheld and answered forbidden). Everything else is
    `forbidden`. */

/*  The ZAP domains of the three tcp planes (zsock_set_zap_domain). */
#define SB_CURVE_DOMAIN_CMD "switchboard-cmd"
#define SB_CURVE_DOMAIN_EVT "switchboard-evt"
#define SB_CURVE_DOMAIN_TAP "switchboard-tap"

#define SB_CURVE_POOLS_MAX        16     /* pools a worker key may be bound to */
#define SB_CURVE_GRANTS_MAX       8      /* grants a worker key holds at once; a new one drops the oldest */
#define SB_CURVE_GRANT_IAS        16     /* interactions remembered per grant (the newest) */
#define SB_CURVE_INFLIGHT_MAX     4096   /* worker requests awaiting a reply the grants need, all keys */
#define SB_CURVE_INFLIGHT_PER_KEY 64     /* the same, per key */
#define SB_CURVE_INFLIGHT_TTL_MS  75000  /* forgotten after this (the longest claim waits 60 s) */

typedef struct sb_curve_ids sb_curve_ids_t;

sb_curve_ids_t *sb_curve_ids_new (const char *data_dir);
void sb_curve_ids_destroy (sb_curve_ids_t **ids_p);
/*  The role ("worker", "client", "actor") of the allowed key `user_id`
    (Z85), the folder read again first; NULL when it is not allowed. */
const char *sb_curve_ids_role (sb_curve_ids_t *ids, const char *user_id);

/*  Whether the peer with public key `user_id` (Z85), whose route is
    `route_hex`, may send the request `h`, whose type's row has `scope`
    (schemas/schema.h: SB_SCOPE_*), with the (validated) `body`:
    SB_OK, or the error to answer with and why [] filled. A request whose
    reply changes the key's grants is remembered for sb_curve_reply. */
sb_err_t sb_curve_check (sb_curve_ids_t *ids, const char *user_id, const char *route_hex, const sb_header_t *h,
                         unsigned scope, const uint8_t *body, size_t blen, char *why, size_t whylen);

/*  The reply path: the broker forwards a (validated) reply, chunk or
    error of `type` to the request named `pkey` ("ROUTEHEX:ID"); a final
    one settles what sb_curve_check remembered for it. True when the
    reply must not reach the key (an interaction of a run it holds no
    grant on): the broker answers forbidden instead. */
bool sb_curve_reply (sb_curve_ids_t *ids, const char *pkey, const char *type, const uint8_t *body, size_t blen,
                     bool final);

/*  The ZAP handler (it replaces czmq's zauth, which cannot tell the
    planes apart): an actor answering inproc://zeromq.zap.01 for the
    process's context. It admits a CURVE key whose certificate is in
    DATA/certs/clients/ (read again whenever the folder changes, so a new
    key works at once and a removed one is refused), worker keys on the
    command plane's domain only, and puts the key (Z85) in User-Id. NULL
    on failure. Destroy with zactor_destroy. */
zactor_t *sb_curve_zap_new (const char *data_dir);

#endif

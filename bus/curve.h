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

/*  The server's certificate, made (0600 secret) on first use. NULL with
    err set on failure. The caller destroys it. */
zcert_t *sb_curve_server_cert (const char *data_dir, char *err, size_t errlen);

/*  Writes a client key pair NAME (public) and NAME_secret (0600) in
    DATA/certs/clients/, with its role (worker, client, actor: below); secret_path receives the secret file's path.
    Returns 0, or -1 with err set (an existing NAME is not overwritten). */
int sb_curve_client_new (const char *data_dir, const char *name, const char *role, char *secret_path, size_t n,
                         char *err, size_t errlen);

/*  A client process's keys for tcp endpoints: its certificate (the
    secret file, or the public file beside it) and the server's public
    certificate. Every bus socket this process then connects to a tcp://
    endpoint uses CURVE. Returns 0, or -1 with err set. */
int sb_curve_client_set (const char *cert_path, const char *server_cert_path, char *err, size_t errlen);

/*  Applies the client keys to a socket about to connect to `endpoint`
    (nothing unless it is tcp:// and sb_curve_client_set was called). */
void sb_curve_apply_client (zsock_t *sock, const char *endpoint);

#endif

/* ------------------------------------------------------------------ */
/*  Who a CURVE peer is (the broker's per-message check)

    A client key's certificate in DATA/certs/clients/ carries a role in its
    metadata (`keys new NAME [--client|--actor]`):
      worker  (the default) only the worker protocol, for worker_id NAME:
              worker.register and run.claim naming NAME, run.heartbeat,
              run.complete, session.append, session.get, session.events,
              session.steer.take, llm.stream, llm.cancel, llm.models,
              llm.info, interact.request, interact.get (asking for an
              approval, never answering one);
      client  the public types (what the gateway passes);
      actor   everything: a remote `switchboard actor exec|llm`.
    Peers on ipc and inproc carry no User-Id and are not checked. */

typedef struct sb_curve_ids sb_curve_ids_t;

sb_curve_ids_t *sb_curve_ids_new (const char *data_dir);
void sb_curve_ids_destroy (sb_curve_ids_t **ids_p);

/*  Whether the peer with public key `user_id` (Z85) may send `type` with
    `body`; false with why [] filled when not. */
bool sb_curve_allowed (sb_curve_ids_t *ids, const char *user_id, const char *type, bool is_public,
                       const uint8_t *body, size_t blen, char *why, size_t whylen);

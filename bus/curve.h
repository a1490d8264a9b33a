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
    DATA/certs/clients/; secret_path receives the secret file's path.
    Returns 0, or -1 with err set (an existing NAME is not overwritten). */
int sb_curve_client_new (const char *data_dir, const char *name, char *secret_path, size_t n,
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

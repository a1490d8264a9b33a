/*  actors/actor.c — what every actor shares at startup. */
#include "actors/actor.h"
#include "bus/client.h"
#include "cluster/cluster.h"
#include "common/log.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/*  zactor_new waits for the child's first signal but drops its status, so
    the status is also kept here. Actors start one at a time (serve waits
    for each), so one slot is unambiguous. */
static atomic_int s_last_status;

void
sb_actor_signal (zsock_t *pipe, int status)
{
    atomic_store (&s_last_status, status);
    zsock_signal (pipe, (byte) status);
}

int
sb_actor_last_status (void)
{
    return atomic_load (&s_last_status);
}

/*  czmq's actor threads are detached: zactor_destroy returns once the
    handler has returned, while the thread may still be running its
    thread-local destructors. OpenSSL's (libcurl's and libpq's TLS) would
    then race the process's exit, whose OPENSSL_cleanup frees the same
    per-thread state: a double free that ASan saw at serve's end. So the
    handler's thread gives that state back itself, before czmq says the
    actor is done. */
typedef struct {
    zactor_fn *fn;
    void *args;
} s_shim_t;

static void
s_shim (zsock_t *pipe, void *arg)
{
    s_shim_t shim = *(s_shim_t *) arg;
    free (arg);
    shim.fn (pipe, shim.args);
    OPENSSL_thread_stop ();
}

zactor_t *
sb_actor_start (zactor_fn *fn, void *args)
{
    s_shim_t *shim = malloc (sizeof *shim);
    if (!shim)
        return NULL;
    *shim = (s_shim_t) { fn, args };
    zactor_t *actor = zactor_new (s_shim, shim);
    if (!actor)
        free (shim);
    return actor;
}

int
sb_actor_register (zsock_t *pipe, sb_bus_t *bus, const char *service, const char *instance,
                   const uint8_t *caps, size_t caps_len)
{
    sb_verr_t err;
    if (sb_bus_register (bus, service, instance, caps, caps_len, 5000, &err)) {
        sb_error (service, "cannot register instance=%s code=%s error=\"%s\"",
                  instance, sb_err_name (err.code), err.message);
        sb_actor_signal (pipe, 1);
        return -1;
    }
    sb_actor_signal (pipe, 0);
    return 0;
}

bool
sb_actor_pipe_term (zsock_t *pipe)
{
    char *cmd = zstr_recv (pipe);
    bool term = !cmd || streq (cmd, "$TERM");
    zstr_free (&cmd);
    return term;
}

uint64_t
sb_actor_limit (const char *actor, uint64_t configured, const char *env, uint64_t def,
                uint64_t min, uint64_t max)
{
    if (configured)
        return configured;
    const char *v = getenv (env);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    unsigned long long n = strtoull (v, &end, 10);
    if (errno || *end || *v == '-' || n < min || n > max) {
        sb_warn (actor, "ignoring %s=%s (want bytes from %llu to %llu); using %llu", env, v,
                 (unsigned long long) min, (unsigned long long) max, (unsigned long long) def);
        return def;
    }
    return n;
}

/*  A linear scan: the longest table has fifteen rows, and a strcmp fails
    on the first bytes that differ. */
size_t
sb_dispatch_index (const void *rows, size_t stride, const char *type)
{
    size_t k = 0;
    const char *row = rows;
    for (const char *t; (t = *(const char *const *) (const void *) (row + k * stride)); k++)
        if (strcmp (t, type) == 0)
            break;
    return k;
}

const sb_dispatch_t *
sb_dispatch_find (const sb_dispatch_t *rows, const char *type)
{
    const sb_dispatch_t *row = &rows [sb_dispatch_index (rows, sizeof rows [0], type)];
    return row->type ? row : NULL;
}

bool
sb_actor_owns (sb_bus_t *bus, sb_msg_t *msg, sb_cluster_t *cluster, const char *session_id)
{
    if (!session_id || !*session_id || sb_cluster_holds (cluster, session_id))
        return true;
    char line [256];
    sb_cluster_owner_line (cluster, session_id, line, sizeof line);
    sb_bus_error (bus, msg, SB_E_not_owner, "%s", line);
    return false;
}

/*  bus/curve.c — CURVE keys for the bus's TCP endpoints (bus/curve.h). */
#include "bus/curve.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*  Set once by sb_curve_client_set, before any socket of the process
    connects; read by every thread afterwards. */
static zcert_t *s_client_cert;
static char s_server_key [41];

static int
s_mkdir (const char *path)
{
    if (mkdir (path, 0700) == 0 || errno == EEXIST)
        return 0;
    return -1;
}

zcert_t *
sb_curve_server_cert (const char *data_dir, char *err, size_t errlen)
{
    char dir [4200], path [4300], secret [4400];
    snprintf (dir, sizeof dir, "%s/certs", data_dir);
    snprintf (path, sizeof path, "%s/server", dir);
    snprintf (secret, sizeof secret, "%s/server_secret", dir);
    zcert_t *cert = access (secret, R_OK) == 0 ? zcert_load (path) : NULL;
    if (cert)
        return cert;
    char clients [4300];
    snprintf (clients, sizeof clients, "%s/clients", dir);
    if (s_mkdir (dir) || s_mkdir (clients)) {
        snprintf (err, errlen, "cannot create %s: %s", clients, strerror (errno));
        return NULL;
    }
    cert = zcert_new ();
    if (!cert) {
        snprintf (err, errlen, "cannot make a key pair");
        return NULL;
    }
    /* the secret file is written 0600 from the start */
    mode_t old = umask (077);
    int rc = zcert_save (cert, path);
    umask (old);
    if (rc) {
        snprintf (err, errlen, "cannot write %s", path);
        zcert_destroy (&cert);
        return NULL;
    }
    chmod (path, 0644);
    return cert;
}

int
sb_curve_client_new (const char *data_dir, const char *name, const char *role, char *secret_path, size_t n,
                     char *err, size_t errlen)
{
    char serr [512];
    zcert_t *server = sb_curve_server_cert (data_dir, serr, sizeof serr);
    if (!server) {
        snprintf (err, errlen, "%s", serr);
        return -1;
    }
    zcert_destroy (&server);
    char path [4400];
    snprintf (path, sizeof path, "%s/certs/clients/%s", data_dir, name);
    snprintf (secret_path, n, "%s_secret", path);
    if (access (path, F_OK) == 0 || access (secret_path, F_OK) == 0) {
        snprintf (err, errlen, "%s exists already; remove it first to make a new key", path);
        return -1;
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        snprintf (err, errlen, "cannot make a key pair");
        return -1;
    }
    zcert_set_meta (cert, "name", "%s", name);
    zcert_set_meta (cert, "role", "%s", role);
    mode_t old = umask (077);
    int rc = zcert_save (cert, path);
    umask (old);
    zcert_destroy (&cert);
    if (rc) {
        snprintf (err, errlen, "cannot write %s", path);
        return -1;
    }
    chmod (path, 0644);
    return 0;
}

int
sb_curve_client_set (const char *cert_path, const char *server_cert_path, char *err, size_t errlen)
{
    /* czmq loads NAME and NAME_secret from NAME: take either file's path */
    char base [4200];
    snprintf (base, sizeof base, "%s", cert_path);
    size_t len = strlen (base);
    if (len > 7 && strcmp (base + len - 7, "_secret") == 0)
        base [len - 7] = 0;
    zcert_t *cert = zcert_load (base);
    if (!cert || !zcert_secret_txt (cert) || strcmp (zcert_secret_txt (cert),
                                                      "0000000000000000000000000000000000000000") == 0) {
        snprintf (err, errlen, "cannot read the key pair %s (and %s_secret)", base, base);
        zcert_destroy (&cert);
        return -1;
    }
    zcert_t *server = zcert_load (server_cert_path);
    if (!server) {
        snprintf (err, errlen, "cannot read the server's certificate %s", server_cert_path);
        zcert_destroy (&cert);
        return -1;
    }
    snprintf (s_server_key, sizeof s_server_key, "%s", zcert_public_txt (server));
    zcert_destroy (&server);
    zcert_destroy (&s_client_cert);
    s_client_cert = cert;
    return 0;
}

void
sb_curve_apply_client (zsock_t *sock, const char *endpoint)
{
    if (!s_client_cert || strncmp (endpoint, "tcp://", 6) != 0)
        return;
    zcert_apply (s_client_cert, sock);
    zsock_set_curve_serverkey (sock, s_server_key);
}

/* ------------------------------------------------------------------ */
/*  Identities */

#include "schemas/codec.h"
#include <dirent.h>

typedef struct {
    char name [65];
    char role [16];
} s_id_t;

struct sb_curve_ids {
    char dir [4300];
    zhashx_t *by_key;           /* public key (Z85) -> s_id_t */
};

static void
s_id_free (void **item)
{
    free (*item);
    *item = NULL;
}

/*  Reads every public certificate of the folder (a new key is found by
    the next message that carries it: zauth let it in). */
static void
s_ids_load (sb_curve_ids_t *ids)
{
    zhashx_purge (ids->by_key);
    DIR *d = opendir (ids->dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir (d))) {
        size_t n = strlen (e->d_name);
        if (e->d_name [0] == '.' || (n > 7 && strcmp (e->d_name + n - 7, "_secret") == 0))
            continue;
        char path [4600];
        snprintf (path, sizeof path, "%s/%s", ids->dir, e->d_name);
        zcert_t *cert = zcert_load (path);
        if (!cert)
            continue;
        s_id_t *id = calloc (1, sizeof *id);
        if (id) {
            const char *name = zcert_meta (cert, "name");
            const char *role = zcert_meta (cert, "role");
            snprintf (id->name, sizeof id->name, "%s", name ? name : e->d_name);
            snprintf (id->role, sizeof id->role, "%s", role ? role : "worker");
            zhashx_update (ids->by_key, zcert_public_txt (cert), id);
        }
        zcert_destroy (&cert);
    }
    closedir (d);
}

sb_curve_ids_t *
sb_curve_ids_new (const char *data_dir)
{
    sb_curve_ids_t *ids = calloc (1, sizeof *ids);
    if (!ids)
        return NULL;
    snprintf (ids->dir, sizeof ids->dir, "%s/certs/clients", data_dir);
    ids->by_key = zhashx_new ();
    if (!ids->by_key) {
        free (ids);
        return NULL;
    }
    zhashx_set_destructor (ids->by_key, s_id_free);
    s_ids_load (ids);
    return ids;
}

void
sb_curve_ids_destroy (sb_curve_ids_t **ids_p)
{
    if (*ids_p) {
        zhashx_destroy (&(*ids_p)->by_key);
        free (*ids_p);
        *ids_p = NULL;
    }
}

static const char *s_worker_types [] = {
    "worker.register", "run.claim", "run.heartbeat", "run.complete", "session.append", "session.get",
    "session.events", "session.steer.take", "llm.stream", "llm.cancel", "llm.models", "llm.info",
    "interact.request", "interact.get", "bus.heartbeat", NULL
};

bool
sb_curve_allowed (sb_curve_ids_t *ids, const char *user_id, const char *type, bool is_public,
                  const uint8_t *body, size_t blen, char *why, size_t whylen)
{
    s_id_t *id = zhashx_lookup (ids->by_key, user_id);
    if (!id) {
        s_ids_load (ids);
        id = zhashx_lookup (ids->by_key, user_id);
    }
    if (!id) {
        snprintf (why, whylen, "the key is no longer allowed");
        return false;
    }
    if (strcmp (id->role, "actor") == 0)
        return true;
    if (strcmp (id->role, "client") == 0) {
        if (is_public)
            return true;
        snprintf (why, whylen, "a client key may call the public types only, not %s", type);
        return false;
    }
    size_t k = 0;
    while (s_worker_types [k] && strcmp (s_worker_types [k], type) != 0)
        k++;
    if (!s_worker_types [k]) {
        snprintf (why, whylen, "worker key %s may call the worker protocol only, not %s", id->name, type);
        return false;
    }
    if (strcmp (type, "worker.register") == 0 || strcmp (type, "run.claim") == 0) {
        _Alignas (16) uint8_t mem [16384];
        sb_vstat_t stat;
        sb_verr_t err;
        const sb_val_t *root = NULL;
        if (sb_validate (body, blen, NULL, 0, &stat, &err) == 0)
            root = sb_doc_decode_into (body, blen, &stat, mem, sizeof mem);
        const char *wid = root ? sb_get_str (root, "worker_id") : NULL;
        if (!wid || strcmp (wid, id->name) != 0) {
            snprintf (why, whylen, "worker key %s may act for worker_id %s only", id->name, id->name);
            return false;
        }
    }
    return true;
}

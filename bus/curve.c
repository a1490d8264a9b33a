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
sb_curve_client_new (const char *data_dir, const char *name, char *secret_path, size_t n,
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

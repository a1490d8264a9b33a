/*  cli/serve_http.c — serve's web gateway: its flags' checks, its start
    (after the actors are ready, before serve reports ready), DATA/http.port
    and the line a person clicks (docs/gateway.md). */
#include "cli/cli.h"
#include "cli/serve.h"
#include "common/log.h"
#include "gateway/gateway.h"
#include "bus/broker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_PORT_TRIES 20       /* 8080, then the next free ones */

int
sb_serve_http_check (const sb_serve_opts_t *o)
{
    if (!o->tls_cert != !o->tls_key)
        return sb_cli_usage ("serve", "--tls-cert and --tls-key go together");
    const char *colon = strrchr (o->http, ':');
    char addr [256];
    snprintf (addr, sizeof addr, "%.*s", colon ? (int) (colon - o->http) : 0, o->http);
    /* the token travels in every request: beyond this machine it needs
       TLS, or a person who says they accept that */
    if (!sb_gateway_addr_loopback (addr) && !o->tls_cert && !o->insecure_http)
        return sb_cli_usage ("serve", "--http %s is beyond loopback: give --tls-cert FILE --tls-key FILE, "
                             "or --insecure-http to send the token in clear text", o->http);
    return 0;
}

//  DATA/http.port, written whole or not at all.
static int
s_write_port (const char *dir, int port)
{
    char path [4200], tmp [4300], text [16];
    snprintf (path, sizeof path, "%s/http.port", dir);
    snprintf (tmp, sizeof tmp, "%s/.http.port.%d", dir, (int) getpid ());
    int n = snprintf (text, sizeof text, "%d\n", port);
    int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    bool ok = write (fd, text, (size_t) n) == n && fsync (fd) == 0;
    close (fd);
    if (!ok || rename (tmp, path) != 0) {
        unlink (tmp);
        return -1;
    }
    return 0;
}

sb_gateway_t *
sb_serve_http_start (const sb_serve_opts_t *o, const char *dir, int *failed)
{
    char list [1024] = "";
    const char *hosts [17] = { 0 };
    if (o->allow_hosts) {
        snprintf (list, sizeof list, "%s", o->allow_hosts);
        size_t n = 0;
        for (char *save = NULL, *h = strtok_r (list, ",", &save); h && n < 16; h = strtok_r (NULL, ",", &save))
            hosts [n++] = h;
    }
    sb_gateway_config_t cfg = {
        .data_dir = dir, .http = o->http, .tls_cert = o->tls_cert, .tls_key = o->tls_key,
        .ui_dir = o->ui_dir, .cmd_endpoint = SB_INPROC_CMD, .sub_endpoint = SB_INPROC_PUB,
        .allow_hosts = hosts, .max_conns = o->http_max_conns, .max_per_addr = o->http_max_per_addr,
        .out_max = o->http_out_max, .out_total = o->http_out_total, .idle_s = o->http_idle_s,
    };
    char err [512], addr [300];
    sb_gateway_t *gw = sb_gateway_start (&cfg, err, sizeof err);
    /* the default port may be taken (another server, another program):
       the default means "near 8080", an explicit one means exactly that */
    const char *colon = strrchr (o->http, ':');
    snprintf (addr, sizeof addr, "%.*s", (int) (colon - o->http), o->http);
    for (int k = 1; !gw && !o->http_explicit && k < DEFAULT_PORT_TRIES; k++) {
        char http [320];
        snprintf (http, sizeof http, "%s:%d", addr, 8080 + k);
        cfg.http = http;
        gw = sb_gateway_start (&cfg, err, sizeof err);
        if (gw)
            sb_warn ("serve", "port 8080 is taken; the gateway listens on %d", 8080 + k);
    }
    if (!gw) {
        sb_error ("serve", "the web gateway cannot start: %s", err);
        *failed = 1;
        return NULL;
    }
    if (s_write_port (dir, sb_gateway_port (gw)) != 0) {
        sb_error ("serve", "cannot write %s/http.port: %s", dir, strerror (errno));
        sb_gateway_stop (&gw);
        *failed = 1;
        return NULL;
    }
    return gw;
}

void
sb_serve_http_banner (const sb_serve_opts_t *o, sb_gateway_t *gw)
{
    const char *colon = strrchr (o->http, ':');
    char host [300];
    snprintf (host, sizeof host, "%.*s", (int) (colon - o->http), o->http);
    /* a wildcard address is reached on this machine through loopback */
    if (!*host || strcmp (host, "0.0.0.0") == 0 || strcmp (host, "localhost") == 0)
        snprintf (host, sizeof host, "127.0.0.1");
    else
    if (strcmp (host, "::") == 0 || strcmp (host, "[::]") == 0)
        snprintf (host, sizeof host, "[::1]");
    else
    if (strchr (host, ':') && host [0] != '[') {
        char v6 [300];
        snprintf (v6, sizeof v6, "[%.290s]", host);
        snprintf (host, sizeof host, "%s", v6);
    }
    printf ("open: %s://%s:%d/?token=%s\n", sb_gateway_scheme (gw), host, sb_gateway_port (gw),
            sb_gateway_token (gw));
    fflush (stdout);
}

/*  gateway/auth.c — who may ask (docs/gateway.md, "Who can reach the
    gateway, and what stops them"): a request's headers and arguments, the
    token (bearer, the sb_token_PORT cookie, ?token=), Host, Origin and
    Sec-Fetch-Site, and the X-Switchboard header a write with the cookie
    needs. The lws thread only: every function reads a request lws holds. */
#include "gateway/gateway_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ARGS_MAX        4096            /* decoded query bytes kept */

//  A header's value into out, or 0 when absent and -1 when it does not fit
//  (a value cut short could pass a check the whole would fail).
int
gw_header (struct lws *wsi, enum lws_token_indexes h, char *out, size_t n)
{
    out [0] = 0;
    int len = lws_hdr_total_length (wsi, h);
    if (len <= 0 || (size_t) len >= n)
        return len <= 0 ? 0 : -1;
    return lws_hdr_copy (wsi, out, (int) n, h) < 0 ? -1 : len;
}

//  The decoded query arguments as NUL-separated name, value pairs.
void
gw_read_args (struct lws *wsi, gw_pss_t *pss)
{
    free (pss->args);
    pss->args = NULL;
    pss->nargs = 0;
    char frag [1024];
    char *buf = malloc (ARGS_MAX);
    size_t used = 0;
    if (!buf)
        return;
    for (int k = 0; k < 64; k++) {
        int n = lws_hdr_copy_fragment (wsi, frag, sizeof frag, WSI_TOKEN_HTTP_URI_ARGS, k);
        if (n < 0)
            break;
        char *eq = strchr (frag, '=');
        const char *value = eq ? eq + 1 : "";
        if (eq)
            *eq = 0;
        size_t need = strlen (frag) + strlen (value) + 2;
        if (used + need > ARGS_MAX)
            break;
        memcpy (buf + used, frag, strlen (frag) + 1);
        used += strlen (frag) + 1;
        memcpy (buf + used, value, strlen (value) + 1);
        used += strlen (value) + 1;
        pss->nargs++;
    }
    pss->args = buf;
}

const char *
gw_arg (const gw_pss_t *pss, const char *name)
{
    const char *p = pss->args;
    for (size_t k = 0; p && k < pss->nargs; k++) {
        const char *value = p + strlen (p) + 1;
        if (strcmp (p, name) == 0)
            return value;
        p = value + strlen (value) + 1;
    }
    return NULL;
}

//  The cookie's name: sb_token_PORT. Cookies have no port, so every server
//  on 127.0.0.1 gets the cookies of every other; with the port in the name
//  two gateways on one host do not take each other's.
void
gw_cookie_name (sb_gateway_t *gw, char *out, size_t n)
{
    snprintf (out, n, "sb_token_%d", gw->port);
}

//  The token a request carries: a bearer header, the sb_token_PORT cookie,
//  or (only where `query_ok`) ?token=. Says which one was right.
gw_auth_t
gw_authorized (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, bool query_ok)
{
    char buf [1024], name [32];
    if (gw_header (wsi, WSI_TOKEN_HTTP_AUTHORIZATION, buf, sizeof buf) > 0
    &&  strncasecmp (buf, "Bearer ", 7) == 0) {
        const char *t = buf + 7;
        while (*t == ' ')
            t++;
        if (sb_gateway_token_ok (gw->token, t, strlen (t)))
            return GW_AUTH_BEARER;
    }
    gw_cookie_name (gw, name, sizeof name);
    size_t name_len = strlen (name);
    if (gw_header (wsi, WSI_TOKEN_HTTP_COOKIE, buf, sizeof buf) > 0) {
        for (char *p = buf; p && *p; ) {
            while (*p == ' ' || *p == ';')
                p++;
            size_t len = strcspn (p, ";");
            if (len > name_len && strncmp (p, name, name_len) == 0 && p [name_len] == '='
            &&  sb_gateway_token_ok (gw->token, p + name_len + 1, len - name_len - 1))
                return GW_AUTH_COOKIE;
            p += len;
        }
    }
    if (query_ok) {
        const char *t = gw_arg (pss, "token");
        if (t && sb_gateway_token_ok (gw->token, t, strlen (t)))
            return GW_AUTH_QUERY;
    }
    return GW_AUTH_NONE;
}

//  Whether a browser says this request comes from a page of ours. Origin,
//  when sent, must be the served origin (scheme://Host); Sec-Fetch-Site,
//  when sent and `strict`, must be same-origin or none (a person typed the
//  address). Another port of 127.0.0.1 is another origin but the same
//  site: SameSite cookies go to it, these headers tell it apart.
bool
gw_same_origin (sb_gateway_t *gw, struct lws *wsi, const char *host, bool strict)
{
    char origin [512], want [300], site [64];
    int olen = gw_header (wsi, WSI_TOKEN_ORIGIN, origin, sizeof origin);
    if (olen != 0) {
        snprintf (want, sizeof want, "%s://%s", gw->tls ? "https" : "http", host);
        if (olen < 0 || strcasecmp (origin, want) != 0)
            return false;
    }
    int slen = lws_hdr_custom_length (wsi, "sec-fetch-site:", 15);
    if (strict && slen > 0) {
        if ((size_t) slen >= sizeof site
        ||  lws_hdr_custom_copy (wsi, site, sizeof site, "sec-fetch-site:", 15) < 0)
            return false;
        if (strcasecmp (site, "same-origin") != 0 && strcasecmp (site, "none") != 0)
            return false;
    }
    return true;
}

//  A write authorised by the cookie alone could come from any page the
//  browser shows (a form posts cross-site with the cookie). It must carry
//  X-Switchboard, which only a script may set, and a cross-origin script
//  only after a CORS preflight that the gateway never grants.
bool
gw_script_proof (struct lws *wsi)
{
    return lws_hdr_custom_length (wsi, "x-switchboard:", 14) > 0;
}

bool
gw_host_allowed (sb_gateway_t *gw, struct lws *wsi, char *host, size_t n)
{
    if (gw_header (wsi, WSI_TOKEN_HOST, host, n) <= 0)
        return false;
    return sb_gateway_host_ok (host, gw->bind_addr, gw->cfg.allow_hosts);
}

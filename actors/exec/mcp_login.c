/*  actors/exec/mcp_login.c — a person connects an OAuth MCP server
    (exec.mcp.login, exec.mcp.oauth_callback; docs/mcp.md "Authorization").

    The flow runs here, in the control plane, and the tokens never leave
    it: exec.mcp.login discovers the server's authorization server,
    registers a client, and answers the URL the person opens (from
    `switchboard mcp login` or the UI's Connect). The authorization server
    sends the browser back to the gateway's /oauth/callback, which passes
    the query on as exec.mcp.oauth_callback; its state names the pending
    login, whose PKCE verifier the code is exchanged with. The tokens go
    to the store (DATA/mcp-oauth), where every session's copy of the
    server finds them at its next request.

    Pending logins are few and short-lived: at most S_LOGINS_MAX, each
    S_LOGIN_TTL_MS; a state is used once. The exec actor's thread only.
*/
#include "actors/exec/mcp_oauth.h"
#include "common/log.h"

#include <curl/curl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTOR "exec"

#define S_LOGINS_MAX   16
#define S_LOGIN_TTL_MS (10 * 60 * 1000)
#define S_HTTP_MS      30000

typedef struct {
    sb_mcp_oauth_t *oauth;
    char state [SB_NONCE_HEX + 1];
    char server [SB_MCP_NAME_MAX + 1];
    int64_t expires;            //  mono ms
} s_login_t;

struct sb_mcp_logins {
    const sb_mcp_config_t *cfg;
    s_login_t pending [S_LOGINS_MAX];
};

sb_mcp_logins_t *
sb_mcp_logins_new (const sb_mcp_config_t *cfg)
{
    sb_mcp_logins_t *self = calloc (1, sizeof *self);
    if (self)
        self->cfg = cfg;
    return self;
}

static void
s_drop (s_login_t *l)
{
    sb_mcp_oauth_destroy (&l->oauth);
    memset (l, 0, sizeof *l);
}

void
sb_mcp_logins_destroy (sb_mcp_logins_t **self_p)
{
    sb_mcp_logins_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t k = 0; k < S_LOGINS_MAX; k++)
        s_drop (&self->pending [k]);
    free (self);
    *self_p = NULL;
}

static const sb_mcp_server_conf_t *
s_conf (const sb_mcp_config_t *cfg, const char *name)
{
    for (size_t k = 0; cfg && k < cfg->n; k++)
        if (strcmp (cfg->servers [k].name, name) == 0)
            return &cfg->servers [k];
    return NULL;
}

int
sb_mcp_logins_start (sb_mcp_logins_t *self, const char *server, const char *redirect_uri, char **url,
                     sb_err_t *code, char *err, size_t errlen)
{
    *url = NULL;
    *code = SB_E_invalid;
    const sb_mcp_server_conf_t *conf = s_conf (self->cfg, server);
    if (!conf) {
        *code = SB_E_not_found;
        snprintf (err, errlen, "no MCP server is named %s (mcp list)", server);
        return -1;
    }
    if (!conf->url) {
        snprintf (err, errlen, "%s is a stdio server: only HTTP servers are authorized with OAuth", server);
        return -1;
    }
    if (strncmp (redirect_uri, "http://", 7) != 0 && strncmp (redirect_uri, "https://", 8) != 0) {
        snprintf (err, errlen, "redirect_uri must be an http:// or https:// URL (the gateway's /oauth/callback)");
        return -1;
    }
    //  A free slot: an expired one, or one of the same server (its
    //  person started again).
    int64_t now = sb_mono_ms ();
    s_login_t *slot = NULL;
    for (size_t k = 0; k < S_LOGINS_MAX; k++) {
        s_login_t *l = &self->pending [k];
        if (l->oauth && (l->expires < now || strcmp (l->server, server) == 0))
            s_drop (l);
        if (!l->oauth && !slot)
            slot = l;
    }
    if (!slot) {
        *code = SB_E_conflict;
        snprintf (err, errlen, "%d logins are in progress already; finish one, or wait 10 minutes", S_LOGINS_MAX);
        return -1;
    }
    sb_mcp_oauth_t *o = sb_mcp_oauth_new (conf, self->cfg->data_dir);
    if (!o) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    char state [SB_NONCE_HEX + 1];
    *code = SB_E_auth;
    if (sb_mcp_oauth_login_begin (o, redirect_uri, now + S_HTTP_MS, url, state, err, errlen)) {
        sb_mcp_oauth_destroy (&o);
        return -1;
    }
    if (!*url) {
        //  client_credentials: authorized already.
        sb_info (ACTOR, "MCP server %s: authorized (client credentials)", server);
        sb_mcp_oauth_destroy (&o);
        return 0;
    }
    slot->oauth = o;
    snprintf (slot->state, sizeof slot->state, "%s", state);
    snprintf (slot->server, sizeof slot->server, "%s", server);
    slot->expires = now + S_LOGIN_TTL_MS;
    sb_info (ACTOR, "MCP server %s: a login is waiting for the person", server);
    return 0;
}

int
sb_mcp_logins_finish (sb_mcp_logins_t *self, const char *state, const char *code_, const char *error,
                      char *server, size_t server_len, sb_err_t *code, char *err, size_t errlen)
{
    server [0] = 0;
    int64_t now = sb_mono_ms ();
    s_login_t *l = NULL;
    for (size_t k = 0; k < S_LOGINS_MAX && !l; k++)
        if (self->pending [k].oauth && self->pending [k].expires >= now
        &&  sodium_memcmp (self->pending [k].state, state, SB_NONCE_HEX) == 0 && strlen (state) == SB_NONCE_HEX)
            l = &self->pending [k];
    if (!l) {
        *code = SB_E_not_found;
        snprintf (err, errlen, "no login is waiting for this state (it expired after 10 minutes, or was used): "
                  "start again with mcp login");
        return -1;
    }
    snprintf (server, server_len, "%s", l->server);
    //  The redirect's query, as sb_mcp_oauth_redirected reads it.
    char *q = NULL;
    CURL *c = curl_easy_init ();
    char *es = c ? curl_easy_escape (c, state, 0) : NULL;
    char *ec = c && code_ ? curl_easy_escape (c, code_, 0) : NULL;
    char *ee = c && error ? curl_easy_escape (c, error, 0) : NULL;
    size_t n = 64 + (es ? strlen (es) : 0) + (ec ? strlen (ec) : 0) + (ee ? strlen (ee) : 0);
    if (es && (q = malloc (n)))
        snprintf (q, n, "?state=%s%s%s%s%s", es, ec ? "&code=" : "", ec ? ec : "", ee ? "&error=" : "", ee ? ee : "");
    curl_free (es);
    curl_free (ec);
    curl_free (ee);
    if (c)
        curl_easy_cleanup (c);
    *code = SB_E_auth;
    int rc = q ? sb_mcp_oauth_redirected (l->oauth, q, now + S_HTTP_MS, err, errlen)
               : (snprintf (err, errlen, "out of memory"), -1);
    if (q) {
        sodium_memzero (q, strlen (q));
        free (q);
    }
    if (rc == 0)
        sb_info (ACTOR, "MCP server %s: authorized by the person", l->server);
    s_drop (l);
    return rc;
}

int
sb_mcp_logins_logout (sb_mcp_logins_t *self, const char *server, bool *revoked, char *how, size_t how_len,
                      sb_err_t *code, char *err, size_t errlen)
{
    *revoked = false;
    how [0] = 0;
    const sb_mcp_server_conf_t *conf = s_conf (self->cfg, server);
    if (!conf) {
        *code = SB_E_not_found;
        snprintf (err, errlen, "no MCP server is named %s (mcp list)", server);
        return -1;
    }
    if (!conf->url) {
        *code = SB_E_invalid;
        snprintf (err, errlen, "%s is a stdio server: it has no OAuth tokens to forget", server);
        return -1;
    }
    //  A login the person started and did not finish goes too: its
    //  callback would store tokens again.
    for (size_t k = 0; k < S_LOGINS_MAX; k++)
        if (self->pending [k].oauth && strcmp (self->pending [k].server, server) == 0)
            s_drop (&self->pending [k]);
    return sb_mcp_oauth_logout (conf, self->cfg->data_dir, sb_mono_ms () + S_HTTP_MS, revoked, how, how_len, code,
                                err, errlen);
}

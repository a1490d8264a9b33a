/*  actors/exec/mcp_oauth.c — OAuth for streamable HTTP MCP servers
    (actors/exec/mcp_oauth.h, docs/mcp.md "Authorization").

    The object of one server: its tokens (loaded from and saved to the
    store), the token endpoint (grants, refresh), what a refusal
    (401, 403 insufficient_scope) leads to, and the two halves of a
    person's login. Every answer is read within SB_OAUTH_BODY_MAX
    (mcp_oauth_http.c) and checked before anything of it is kept; tokens
    are bounded by SB_OAUTH_TOKEN_MAX. Errors say what failed and never
    carry a token or a secret: the token endpoint's error_description is
    the authorization server's own text, cut and kept printable.
*/
#include "actors/exec/mcp_oauth_impl.h"
#include "common/log.h"

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#define ACTOR "exec"

static sb_mcp_oauth_authorizer_fn *s_authorizer;
static void *s_authorizer_arg;

void
sb_mcp_oauth_set_authorizer (sb_mcp_oauth_authorizer_fn *fn, void *arg)
{
    s_authorizer = fn;
    s_authorizer_arg = arg;
}


/* ------------------------------------------------------------------ */
/*  The store */

static void
s_save (sb_mcp_oauth_t *self)
{
    if (!self->data_dir)
        return;
    json_t *doc = json_object ();
    const struct { const char *k; const char *v; } f [] = {
        { "client_id", self->client_id }, { "client_secret", self->client_secret }, { "method", self->method },
        { "token_endpoint", self->token_ep }, { "issuer", self->issuer }, { "resource", self->resource },
        { "scope", self->scope }, { "access_token", self->access }, { "refresh_token", self->refresh },
    };
    for (size_t k = 0; doc && k < sizeof f / sizeof f [0]; k++)
        if (f [k].v && f [k].v [0])
            json_object_set_new (doc, f [k].k, json_string (f [k].v));
    if (doc)
        json_object_set_new (doc, "expires_at", json_integer (self->expires_at));
    if (doc)
        json_object_set_new (doc, "lifetime_ms", json_integer (self->lifetime_ms));
    if (doc)
        json_object_set_new (doc, "saved_at", json_integer (sb_oauth_wall_ms ()));
    char *text = doc ? json_dumps (doc, JSON_COMPACT) : NULL;
    json_decref (doc);
    if (text && sb_mcp_oauth_store_save (self->data_dir, self->conf->name, self->conf->url, text) != 0)
        sb_warn (ACTOR, "MCP server %s: cannot save its OAuth tokens in %s", self->conf->name, self->data_dir);
    else
    if (text)
        self->stored = self->access != NULL;
    if (text) {
        sodium_memzero (text, strlen (text));
        free (text);
    }
}


//  Takes the saved state. True when it holds an access token other than
//  the one we had (another process, mcp login, obtained it).
static bool
s_load (sb_mcp_oauth_t *self)
{
    if (!self->data_dir)
        return false;
    char *text = sb_mcp_oauth_store_load (self->data_dir, self->conf->name, self->conf->url);
    json_t *doc = text ? json_loads (text, 0, NULL) : NULL;
    if (text) {
        sodium_memzero (text, strlen (text));
        free (text);
    }
    if (!json_is_object (doc)) {
        json_decref (doc);
        return false;
    }
    const char *access = sb_oauth_str (doc, "access_token", SB_OAUTH_TOKEN_MAX);
    bool newer = access && (!self->access || strcmp (access, self->access) != 0);
    const char *method = sb_oauth_str (doc, "method", sizeof self->method - 1);
    sb_oauth_set (&self->client_id, sb_oauth_str (doc, "client_id", S_URL_MAX));
    sb_oauth_wipe (&self->client_secret);
    sb_oauth_set (&self->client_secret, sb_oauth_str (doc, "client_secret", SB_OAUTH_TOKEN_MAX));
    snprintf (self->method, sizeof self->method, "%s", method ? method : "none");
    const char *ep = sb_oauth_str (doc, "token_endpoint", S_URL_MAX);
    sb_oauth_set (&self->token_ep, sb_oauth_http_url (ep) ? ep : NULL);
    sb_oauth_set (&self->issuer, sb_oauth_str (doc, "issuer", S_URL_MAX));
    sb_oauth_set (&self->resource, sb_oauth_str (doc, "resource", S_URL_MAX));
    sb_oauth_set (&self->scope, sb_oauth_str (doc, "scope", S_SCOPE_MAX));
    sb_oauth_wipe (&self->access);
    sb_oauth_set (&self->access, access);
    sb_oauth_wipe (&self->refresh);
    sb_oauth_set (&self->refresh, sb_oauth_str (doc, "refresh_token", SB_OAUTH_TOKEN_MAX));
    self->stored = access != NULL;
    json_int_t at = json_integer_value (json_object_get (doc, "expires_at"));
    self->expires_at = at > 0 ? (int64_t) at : 0;
    json_int_t life = json_integer_value (json_object_get (doc, "lifetime_ms"));
    self->lifetime_ms = life > 0 && life <= SB_OAUTH_EXPIRES_MAX * 1000 ? (int64_t) life : 0;
    json_decref (doc);
    return newer;
}

/* ------------------------------------------------------------------ */
/*  The object */

sb_mcp_oauth_t *
sb_mcp_oauth_new (const sb_mcp_server_conf_t *conf, const char *data_dir)
{
    sb_mcp_oauth_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->conf = conf;
    self->data_dir = data_dir ? strdup (data_dir) : NULL;
    snprintf (self->method, sizeof self->method, "none");
    s_load (self);
    return self;
}

void
sb_mcp_oauth_destroy (sb_mcp_oauth_t **self_p)
{
    sb_mcp_oauth_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    if (self->curl)
        curl_easy_cleanup (self->curl);
    free (self->data_dir);
    free (self->resource);
    free (self->issuer);
    free (self->authz_ep);
    free (self->token_ep);
    free (self->reg_ep);
    free (self->prm_scopes);
    free (self->client_id);
    sb_oauth_wipe (&self->client_secret);
    sb_oauth_wipe (&self->access);
    sb_oauth_wipe (&self->refresh);
    sb_oauth_wipe (&self->header);
    sb_oauth_wipe (&self->verifier);
    free (self->redirect);
    free (self->scope);
    free (self);
    *self_p = NULL;
}

void
sb_mcp_oauth_begin (sb_mcp_oauth_t *self)
{
    if (self) {
        self->attempts = 0;
        self->refreshed = false;
    }
}

void
sb_mcp_oauth_redact (const sb_mcp_oauth_t *self, char *text)
{
    if (self) {
        sb_mcp_blank (text, self->access);
        sb_mcp_blank (text, self->refresh);
    }
}

bool
sb_mcp_oauth_authorized (const sb_mcp_oauth_t *self)
{
    return self && self->access;
}

/* ------------------------------------------------------------------ */
/*  The token endpoint */

//  POSTs `form` (with the client's authentication) and takes the tokens
//  of a 200 answer.
static int
s_token (sb_mcp_oauth_t *self, sb_oauth_form_t *form, int64_t deadline, char *err, size_t errlen)
{
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return sb_oauth_err (err, errlen, "out of memory");
    struct curl_slist *hl = NULL;
    if (sb_oauth_client_auth (self, form, &hl, err, errlen)) {
        curl_slist_free_all (hl);
        return -1;
    }
    if (form->failed) {
        curl_slist_free_all (hl);
        return sb_oauth_err (err, errlen, "out of memory");
    }
    sb_oauth_resp_t r;
    int rc = sb_oauth_request (self, self->token_ep, form->s, hl, deadline, &r, err, errlen);
    json_t *doc = rc == 0 && r.body ? json_loadb (r.body, r.len, 0, NULL) : NULL;
    long status = r.status;
    sb_oauth_resp_free (&r);
    if (rc)
        return -1;
    if (status != 200) {
        char e [170], d [170];
        sb_oauth_safe (e, sizeof e, json_string_value (json_object_get (doc, "error")));
        sb_oauth_safe (d, sizeof d, json_string_value (json_object_get (doc, "error_description")));
        json_decref (doc);
        return sb_oauth_err (err, errlen, "the token endpoint of %s refused (HTTP %ld%s%s%s%s)", self->conf->name, status,
                      e [0] ? ": " : "", e, d [0] ? ": " : "", d);
    }
    const char *access = sb_oauth_str (doc, "access_token", SB_OAUTH_TOKEN_MAX);
    const char *type = json_string_value (json_object_get (doc, "token_type"));
    json_t *exp = json_object_get (doc, "expires_in");
    if (!access || !type || strcasecmp (type, "bearer") != 0 || (exp && !json_is_integer (exp))
    ||  strpbrk (access, "\r\n")) {
        json_decref (doc);
        return sb_oauth_err (err, errlen, "the token endpoint of %s gave no valid bearer token", self->conf->name);
    }
    sb_oauth_wipe (&self->access);
    sb_oauth_set (&self->access, access);
    const char *refresh = sb_oauth_str (doc, "refresh_token", SB_OAUTH_TOKEN_MAX);
    if (refresh) {
        sb_oauth_wipe (&self->refresh);
        sb_oauth_set (&self->refresh, refresh);
    }
    json_int_t in = exp ? json_integer_value (exp) : 0;
    if (in < 0)
        in = 0;
    if (in > SB_OAUTH_EXPIRES_MAX)
        in = SB_OAUTH_EXPIRES_MAX;
    self->expires_at = exp ? sb_oauth_wall_ms () + (int64_t) in * 1000 : 0;
    self->lifetime_ms = (int64_t) in * 1000;
    json_decref (doc);
    sb_oauth_wipe (&self->header);
    s_save (self);
    return 0;
}

static bool s_newer_saved (sb_mcp_oauth_t *self);

//  Whether the access token expires within SB_OAUTH_REFRESH_EARLY_MS, or
//  a quarter of its lifetime for short-lived ones (not at every request).
static bool
s_expiring (const sb_mcp_oauth_t *self)
{
    int64_t early = SB_OAUTH_REFRESH_EARLY_MS;
    if (self->lifetime_ms && self->lifetime_ms / 4 < early)
        early = self->lifetime_ms / 4;
    return self->expires_at && sb_oauth_wall_ms () + early > self->expires_at;
}

static int
s_refresh (sb_mcp_oauth_t *self, int64_t deadline, char *err, size_t errlen)
{
    self->refreshed = true;
    //  Every session has its copy of the server: another may have
    //  refreshed already, and a rotating refresh token of ours is spent.
    if (s_newer_saved (self) && !s_expiring (self))
        return 0;
    if (!self->refresh || !self->token_ep || !self->client_id)
        return sb_oauth_err (err, errlen, "no refresh token");
    sb_oauth_form_t form = { 0 };
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return sb_oauth_err (err, errlen, "out of memory");
    sb_oauth_form_add (&form, self->curl, "grant_type", "refresh_token");
    sb_oauth_form_add (&form, self->curl, "refresh_token", self->refresh);
    sb_oauth_form_add (&form, self->curl, "resource", self->resource);
    int rc = s_token (self, &form, deadline, err, errlen);
    sb_oauth_form_free (&form);
    if (rc) {
        //  A refused refresh token is not tried again (by this copy; the
        //  saved state is left to the copy that may have a newer one).
        sb_oauth_wipe (&self->refresh);
        sb_info (ACTOR, "MCP server %s: the token refresh failed: %s", self->conf->name, err);
    }
    else
        sb_info (ACTOR, "MCP server %s: its OAuth token was refreshed", self->conf->name);
    return rc;
}

//  The query parameter `key` of URL `url`, decoded, into out.
static bool
s_query (const char *url, const char *key, char *out, size_t size)
{
    const char *q = strchr (url, '?');
    size_t kl = strlen (key);
    for (const char *p = q; p && *p; ) {
        p++;
        if (strncmp (p, key, kl) == 0 && p [kl] == '=') {
            const char *v = p + kl + 1;
            size_t n = strcspn (v, "&#");
            int dl = 0;
            char *dec = curl_easy_unescape (NULL, v, (int) n, &dl);
            bool ok = dec && (size_t) dl < size && !memchr (dec, 0, (size_t) dl);
            if (ok) {
                memcpy (out, dec, (size_t) dl);
                out [dl] = 0;
            }
            curl_free (dec);
            return ok;
        }
        p = strchr (p, '&');
    }
    return false;
}

//  The first half of the authorization-code grant with PKCE: the URL the
//  person opens (the caller frees it); the verifier, the state and the
//  redirect URI are kept for the second half.
static int
s_code_url (sb_mcp_oauth_t *self, const char *redirect, char **url, char *err, size_t errlen)
{
    *url = NULL;
    if (!self->authz_ep)
        return sb_oauth_err (err, errlen, "the authorization server of %s has no authorization endpoint",
                             self->conf->name);
    unsigned char raw [32];
    randombytes_buf (raw, sizeof raw);
    sb_oauth_wipe (&self->verifier);
    self->verifier = sb_oauth_b64url (raw, sizeof raw);
    sodium_memzero (raw, sizeof raw);
    sb_oauth_set (&self->redirect, redirect);
    if (!self->verifier || !self->redirect)
        return sb_oauth_err (err, errlen, "out of memory");
    char challenge [44];
    sb_mcp_oauth_s256 (self->verifier, challenge);
    sb_nonce_hex (self->state);
    sb_oauth_form_t q = { 0 };
    sb_oauth_form_add (&q, self->curl, "response_type", "code");
    sb_oauth_form_add (&q, self->curl, "client_id", self->client_id);
    sb_oauth_form_add (&q, self->curl, "redirect_uri", redirect);
    sb_oauth_form_add (&q, self->curl, "code_challenge", challenge);
    sb_oauth_form_add (&q, self->curl, "code_challenge_method", "S256");
    sb_oauth_form_add (&q, self->curl, "state", self->state);
    sb_oauth_form_add (&q, self->curl, "scope", self->scope);
    sb_oauth_form_add (&q, self->curl, "resource", self->resource);
    size_t ul = strlen (self->authz_ep) + (q.s ? q.len : 0) + 2;
    *url = q.failed ? NULL : malloc (ul);
    if (*url)
        snprintf (*url, ul, "%s%c%s", self->authz_ep, strchr (self->authz_ep, '?') ? '&' : '?', q.s ? q.s : "");
    free (q.s);         //  nothing in it is secret
    return *url ? 0 : sb_oauth_err (err, errlen, "out of memory");
}

//  The second half: the code the redirect brought, exchanged for tokens.
static int
s_code_token (sb_mcp_oauth_t *self, const char *code, int64_t deadline, char *err, size_t errlen)
{
    if (!self->verifier || !self->redirect)
        return sb_oauth_err (err, errlen, "no authorization of %s is in progress", self->conf->name);
    sb_oauth_form_t form = { 0 };
    sb_oauth_form_add (&form, self->curl, "grant_type", "authorization_code");
    sb_oauth_form_add (&form, self->curl, "code", code);
    sb_oauth_form_add (&form, self->curl, "redirect_uri", self->redirect);
    sb_oauth_form_add (&form, self->curl, "code_verifier", self->verifier);
    sb_oauth_form_add (&form, self->curl, "resource", self->resource);
    int rc = s_token (self, &form, deadline, err, errlen);
    sb_oauth_form_free (&form);
    sb_oauth_wipe (&self->verifier);        //  a code is exchanged once
    return rc;
}

int
sb_mcp_oauth_redirected (sb_mcp_oauth_t *self, const char *redirected, int64_t deadline, char *err,
                         size_t errlen)
{
    char code [4096], got [SB_NONCE_HEX + 8], oerr [200];
    int rc = 0;
    if (s_query (redirected, "error", oerr, sizeof oerr)) {
        char shown [170];
        sb_oauth_safe (shown, sizeof shown, oerr);
        rc = sb_oauth_err (err, errlen, "the authorization server of %s refused: %s", self->conf->name, shown);
    }
    else
    if (!s_query (redirected, "state", got, sizeof got) || !self->state [0] || strcmp (got, self->state) != 0)
        rc = sb_oauth_err (err, errlen, "the authorization of %s came back with another state: refused",
                           self->conf->name);
    else
    if (!s_query (redirected, "code", code, sizeof code))
        rc = sb_oauth_err (err, errlen, "the authorization of %s came back without a code", self->conf->name);
    else
        rc = s_code_token (self, code, deadline, err, errlen);
    sodium_memzero (code, sizeof code);
    self->state [0] = 0;
    return rc;
}

//  The authorization-code grant through the process's authorizer (the
//  person's browser, or --oauth-auto).
static int
s_authorize_code (sb_mcp_oauth_t *self, const char *redirect, int64_t deadline, char *err, size_t errlen)
{
    char *url;
    if (s_code_url (self, redirect, &url, err, errlen))
        return -1;
    char back [S_URL_MAX * 2];
    int rc = s_authorizer (s_authorizer_arg, self->conf->name, url, redirect, deadline, back, sizeof back, err,
                           errlen);
    free (url);
    return rc ? -1 : sb_mcp_oauth_redirected (self, back, deadline, err, errlen);
}

static int
s_client_credentials (sb_mcp_oauth_t *self, int64_t deadline, char *err, size_t errlen)
{
    sb_oauth_form_t form = { 0 };
    sb_oauth_form_add (&form, self->curl, "grant_type", "client_credentials");
    sb_oauth_form_add (&form, self->curl, "scope", self->scope);
    sb_oauth_form_add (&form, self->curl, "resource", self->resource);
    int rc = s_token (self, &form, deadline, err, errlen);
    sb_oauth_form_free (&form);
    return rc;
}

//  The person's ID token (a file of at most SB_OAUTH_TOKEN_MAX bytes, one
//  line), or NULL.
static char *
s_id_token (const char *file)
{
    FILE *f = fopen (file, "r");
    char *buf = f ? malloc (SB_OAUTH_TOKEN_MAX + 2) : NULL;
    size_t n = buf ? fread (buf, 1, SB_OAUTH_TOKEN_MAX + 1, f) : 0;
    if (f)
        fclose (f);
    while (n && (buf [n - 1] == '\n' || buf [n - 1] == '\r' || buf [n - 1] == ' '))
        n--;
    if (!buf || n == 0 || n > SB_OAUTH_TOKEN_MAX || memchr (buf, 0, n) || memchr (buf, '\n', n)) {
        if (buf)
            sodium_memzero (buf, SB_OAUTH_TOKEN_MAX + 2);
        free (buf);
        return NULL;
    }
    buf [n] = 0;
    return buf;
}

//  Enterprise-managed authorization (SEP-990): the ID token is exchanged
//  at the identity provider (RFC 8693) for an ID-JAG naming the
//  authorization server and the resource; the ID-JAG is the assertion of
//  a JWT bearer grant (RFC 7523) at the authorization server.
static int
s_jwt_bearer (sb_mcp_oauth_t *self, int64_t deadline, char *err, size_t errlen)
{
    const sb_mcp_oauth_conf_t *oc = &self->conf->oauth;
    char *id_token = s_id_token (oc->id_token_file);
    if (!id_token)
        return sb_oauth_err (err, errlen, "cannot read the ID token of %s (oauth.id_token_file: one line of at "
                             "most %d bytes)", self->conf->name, SB_OAUTH_TOKEN_MAX);
    sb_oauth_form_t x = { 0 };
    sb_oauth_form_add (&x, self->curl, "grant_type", "urn:ietf:params:oauth:grant-type:token-exchange");
    sb_oauth_form_add (&x, self->curl, "requested_token_type", "urn:ietf:params:oauth:token-type:id-jag");
    sb_oauth_form_add (&x, self->curl, "subject_token", id_token);
    sb_oauth_form_add (&x, self->curl, "subject_token_type", "urn:ietf:params:oauth:token-type:id_token");
    sb_oauth_form_add (&x, self->curl, "audience", self->issuer);
    sb_oauth_form_add (&x, self->curl, "resource", self->resource);
    sb_oauth_form_add (&x, self->curl, "scope", self->scope);
    sb_oauth_form_add (&x, self->curl, "client_id", oc->idp_client_id);
    sodium_memzero (id_token, strlen (id_token));
    free (id_token);
    sb_oauth_resp_t r;
    int rc = x.failed ? sb_oauth_err (err, errlen, "out of memory")
                      : sb_oauth_request (self, oc->idp_token_endpoint, x.s, NULL, deadline, &r, err, errlen);
    sb_oauth_form_free (&x);
    if (rc)
        return -1;
    json_t *doc = r.body ? json_loadb (r.body, r.len, 0, NULL) : NULL;
    long status = r.status;
    sb_oauth_resp_free (&r);
    const char *jag = sb_oauth_str (doc, "access_token", SB_OAUTH_TOKEN_MAX);
    const char *type = json_string_value (json_object_get (doc, "issued_token_type"));
    if (status != 200 || !jag || !type || strcmp (type, "urn:ietf:params:oauth:token-type:id-jag") != 0) {
        json_decref (doc);
        return sb_oauth_err (err, errlen, "the identity provider of %s refused the token exchange (HTTP %ld)",
                             self->conf->name, status);
    }
    sb_oauth_form_t form = { 0 };
    sb_oauth_form_add (&form, self->curl, "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
    sb_oauth_form_add (&form, self->curl, "assertion", jag);
    sb_oauth_form_add (&form, self->curl, "scope", self->scope);
    sb_oauth_form_add (&form, self->curl, "resource", self->resource);
    json_decref (doc);
    rc = s_token (self, &form, deadline, err, errlen);
    sb_oauth_form_free (&form);
    return rc;
}

//  A grant without the person: client credentials, or the JWT bearer
//  grant of an enterprise-managed authorization.
static bool
s_unattended (const sb_mcp_oauth_t *self)
{
    return self->conf->oauth.client_credentials || self->conf->oauth.jwt_bearer;
}

static int
s_unattended_grant (sb_mcp_oauth_t *self, int64_t deadline, char *err, size_t errlen)
{
    return self->conf->oauth.jwt_bearer ? s_jwt_bearer (self, deadline, err, errlen)
                                        : s_client_credentials (self, deadline, err, errlen);
}

/* ------------------------------------------------------------------ */
/*  Scopes */

static bool
s_scope_has (const char *list, const char *one, size_t n)
{
    for (const char *p = list; p && *p; ) {
        size_t l = strcspn (p, " ");
        if (l == n && strncmp (p, one, n) == 0)
            return true;
        p += l;
        while (*p == ' ')
            p++;
    }
    return false;
}

//  `base` with the scopes of `more` it lacks, into out.
static void
s_scope_union (char *out, size_t size, const char *base, const char *more)
{
    snprintf (out, size, "%s", base ? base : "");
    for (const char *p = more; p && *p; ) {
        size_t l = strcspn (p, " ");
        if (l && !s_scope_has (out, p, l) && strlen (out) + l + 2 < size)
            snprintf (out + strlen (out), size - strlen (out), "%s%.*s", out [0] ? " " : "", (int) l, p);
        p += l;
        while (*p == ' ')
            p++;
    }
}

//  The scope to ask for (MCP's scope selection): the configured one; else
//  the challenge's (with those asked before, on a step-up); else the
//  resource's scopes_supported; else none. offline_access is added when
//  the authorization server lists it (a refresh token is wanted).
static void
s_choose_scope (sb_mcp_oauth_t *self, const char *challenge, bool step_up)
{
    char s [S_SCOPE_MAX];
    const char *conf = self->conf->oauth.scope;
    if (conf)
        snprintf (s, sizeof s, "%s", conf);
    else
    if (challenge && challenge [0])
        s_scope_union (s, sizeof s, step_up ? self->scope : NULL, challenge);
    else
        snprintf (s, sizeof s, "%s", self->prm_scopes ? self->prm_scopes : "");
    char with [S_SCOPE_MAX];
    if (s [0] && self->as_offline && !s_unattended (self)) {
        s_scope_union (with, sizeof with, s, "offline_access");
        snprintf (s, sizeof s, "%s", with);
    }
    sb_oauth_set (&self->scope, s [0] ? s : NULL);
}

/* ------------------------------------------------------------------ */

const char *
sb_mcp_oauth_header (sb_mcp_oauth_t *self, int64_t deadline)
{
    if (!self || !self->access)
        return NULL;
    //  mcp logout removed the tokens from the store: this copy forgets
    //  them too, rather than go on with a token the person took back.
    if (self->stored && self->data_dir && !sb_mcp_oauth_store_exists (self->data_dir, self->conf->name)) {
        sb_info (ACTOR, "MCP server %s: logged out (its OAuth tokens were removed)", self->conf->name);
        sb_oauth_wipe (&self->access);
        sb_oauth_wipe (&self->refresh);
        sb_oauth_wipe (&self->header);
        self->stored = false;
        return NULL;
    }
    if (s_expiring (self) && self->refresh && !self->refreshed) {
        char err [256];
        s_refresh (self, deadline, err, sizeof err);
    }
    if (!self->header && self->access) {
        size_t n = strlen (self->access) + 24;
        if ((self->header = malloc (n)))
            snprintf (self->header, n, "Authorization: Bearer %s", self->access);
    }
    return self->header;
}

//  Takes the saved state when it holds another access token than ours.
static bool
s_newer_saved (sb_mcp_oauth_t *self)
{
    char *ours = self->access ? strdup (self->access) : NULL;
    bool newer = s_load (self) && self->access && (!ours || strcmp (ours, self->access) != 0);
    if (ours) {
        sodium_memzero (ours, strlen (ours));
        free (ours);
    }
    sb_oauth_wipe (&self->header);
    return newer;
}

int
sb_mcp_oauth_challenge (sb_mcp_oauth_t *self, long status, const char *www, int64_t deadline, char *err,
                        size_t errlen)
{
    const char *name = self->conf->name;
    char error [64] = "", scope [S_SCOPE_MAX] = "";
    sb_mcp_oauth_param (www, "error", error, sizeof error);
    sb_mcp_oauth_param (www, "scope", scope, sizeof scope);
    bool step_up = status == 403 && strcmp (error, "insufficient_scope") == 0;
    if (status == 403 && !step_up)
        return sb_oauth_err (err, errlen, "HTTP 403: %s refused the request (not for a missing scope)", name);
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return sb_oauth_err (err, errlen, "out of memory");
    //  The token we sent expired or was revoked: a refresh first.
    char why [256];
    if (!step_up && self->access && self->refresh && !self->refreshed
    &&  s_refresh (self, deadline, why, sizeof why) == 0)
        return 0;
    //  Then what was saved since by another process (mcp login), for a
    //  step-up too: the person may have granted the wider scope.
    if (s_newer_saved (self))
        return 0;
    if (!step_up)
        sb_oauth_wipe (&self->access);
    if (self->attempts >= S_OAUTH_ATTEMPTS)
        return sb_oauth_err (err, errlen, "%s still refuses after %d authorizations (it asks for scope \"%.200s\")", name,
                      self->attempts, scope);
    bool cc = s_unattended (self);
    if (!cc && !s_authorizer) {
        if (step_up) {
            //  The person's next login asks for what the server wants now.
            char want [S_SCOPE_MAX];
            s_scope_union (want, sizeof want, self->scope, scope);
            sb_oauth_set (&self->scope, want);
            s_save (self);
            return sb_oauth_err (err, errlen, "%s needs authorization for more scope (%.200s): run switchboard "
                                 "mcp login %s", name, scope, name);
        }
        return sb_oauth_err (err, errlen, "%s needs authorization: run switchboard mcp login %s", name, name);
    }
    json_t *meta = NULL;
    if (sb_oauth_discover (self, www, deadline, &meta, err, errlen))
        return -1;
    const sb_mcp_oauth_conf_t *oc = &self->conf->oauth;
    char redirect [S_URL_MAX];
    snprintf (redirect, sizeof redirect, "%s", oc->redirect_uri ? oc->redirect_uri
              : "http://127.0.0.1:8080/oauth/callback");
    int rc = sb_oauth_client (self, meta, redirect, deadline, err, errlen);
    json_decref (meta);
    if (rc)
        return -1;
    s_choose_scope (self, scope, step_up);
    self->attempts++;
    sb_info (ACTOR, "MCP server %s: authorizing (%s%s, attempt %d)", name,
             self->conf->oauth.jwt_bearer ? "JWT bearer" : cc ? "client credentials" : "authorization code",
             step_up ? ", step-up" : "", self->attempts);
    return cc ? s_unattended_grant (self, deadline, err, errlen)
              : s_authorize_code (self, redirect, deadline, err, errlen);
}


//  The server's challenge, asked for: an initialize without a token.
//  0 with its WWW-Authenticate (maybe "") in www; 1 when it needs none.
static int
s_ask_challenge (sb_mcp_oauth_t *self, int64_t deadline, char *www, size_t size, char *err, size_t errlen)
{
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
                       "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                       "\"clientInfo\":{\"name\":\"switchboard\",\"version\":\"1\"}}}";
    struct curl_slist *hl = curl_slist_append (NULL, "Content-Type: application/json");
    hl = curl_slist_append (hl, "Accept: application/json, text/event-stream");
    for (size_t k = 0; self->conf->headers && self->conf->headers [k]; k++)
        hl = curl_slist_append (hl, self->conf->headers [k]);
    sb_oauth_resp_t r;
    if (sb_oauth_request (self, self->conf->url, init, hl, deadline, &r, err, errlen))
        return -1;
    snprintf (www, size, "%s", r.www);
    long status = r.status;
    sb_oauth_resp_free (&r);
    if (status == 401 || status == 403)
        return 0;
    if (status >= 200 && status < 300)
        return 1;
    return sb_oauth_err (err, errlen, "%s answered HTTP %ld to initialize", self->conf->name, status);
}

int
sb_mcp_oauth_login_begin (sb_mcp_oauth_t *self, const char *redirect, int64_t deadline, char **url,
                          char state [SB_NONCE_HEX + 1], char *err, size_t errlen)
{
    *url = NULL;
    state [0] = 0;
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return sb_oauth_err (err, errlen, "out of memory");
    char www [2048], scope [S_SCOPE_MAX] = "";
    int asked = s_ask_challenge (self, deadline, www, sizeof www, err, errlen);
    if (asked < 0)
        return -1;
    if (asked == 1 && !s_unattended (self))
        return sb_oauth_err (err, errlen, "%s needs no authorization (it answered initialize)", self->conf->name);
    json_t *meta = NULL;
    if (sb_oauth_discover (self, www [0] ? www : NULL, deadline, &meta, err, errlen))
        return -1;
    int rc = sb_oauth_client (self, meta, redirect, deadline, err, errlen);
    json_decref (meta);
    if (rc)
        return -1;
    //  With what was asked before (a step-up the server wanted, saved).
    sb_mcp_oauth_param (www, "scope", scope, sizeof scope);
    s_choose_scope (self, scope, true);
    if (s_unattended (self))
        return s_unattended_grant (self, deadline, err, errlen);
    if (s_code_url (self, redirect, url, err, errlen))
        return -1;
    snprintf (state, SB_NONCE_HEX + 1, "%s", self->state);
    return 0;
}

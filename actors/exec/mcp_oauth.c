/*  actors/exec/mcp_oauth.c — OAuth for streamable HTTP MCP servers
    (actors/exec/mcp_oauth.h, docs/mcp.md "Authorization").

    Everything here talks to the server's authorization side with a
    libcurl handle of its own: metadata documents, registration, the
    token endpoint. Every answer is read within SB_OAUTH_BODY_MAX and
    checked before anything of it is kept; tokens are bounded by
    SB_OAUTH_TOKEN_MAX. Errors say what failed and never carry a token or
    a secret: the token endpoint's error_description is the authorization
    server's own text, cut and kept printable.
*/
#include "actors/exec/mcp_oauth.h"
#include "common/digest.h"
#include "common/log.h"

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#define ACTOR "exec"

//  Authorizations (not refreshes) one request may cause: the first one
//  and two step-ups. A server that keeps asking for more is refused then.
#define S_OAUTH_ATTEMPTS  3
#define S_URL_MAX         4096
#define S_SCOPE_MAX       1024
#define S_KEY_FILE_MAX    (16u << 10)
#define S_HTTP_MAX_MS     30000

struct sb_mcp_oauth {
    const sb_mcp_server_conf_t *conf;
    char *data_dir;
    CURL *curl;
    //  What discovery found.
    char *resource;             //  the RFC 8707 resource (NULL: none, 2025-03-26 servers)
    char *issuer;
    char *authz_ep, *token_ep, *reg_ep;
    char *prm_scopes;           //  the resource's scopes_supported, space-separated
    bool as_offline;            //  the authorization server lists offline_access
    bool discovered;
    //  The client.
    char *client_id, *client_secret;
    char method [32];           //  none, client_secret_basic, client_secret_post, private_key_jwt
    //  The tokens.
    char *access, *refresh;
    int64_t expires_at;         //  wall ms; 0: not said
    char *scope;                //  what was asked for last
    char *header;               //  "Authorization: Bearer ..."
    int attempts;               //  authorizations during this request
    bool refreshed;             //  a refresh was tried during this request
};

static sb_mcp_oauth_authorizer_fn *s_authorizer;
static void *s_authorizer_arg;

void
sb_mcp_oauth_set_authorizer (sb_mcp_oauth_authorizer_fn *fn, void *arg)
{
    s_authorizer = fn;
    s_authorizer_arg = arg;
}

static int64_t
s_wall_ms (void)
{
    struct timeval tv;
    gettimeofday (&tv, NULL);
    return (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int
s_err (char *err, size_t errlen, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static int
s_err (char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
    return -1;
}

static void
s_set (char **field, const char *v)
{
    free (*field);
    *field = v ? strdup (v) : NULL;
}

//  Frees a secret after wiping it.
static void
s_wipe (char **field)
{
    if (*field) {
        sodium_memzero (*field, strlen (*field));
        free (*field);
        *field = NULL;
    }
}

/* ------------------------------------------------------------------ */
/*  Small codecs */

static char *
s_b64url (const unsigned char *data, size_t len)
{
    size_t cap = sodium_base64_ENCODED_LEN (len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    char *out = malloc (cap);
    if (out)
        sodium_bin2base64 (out, cap, data, len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    return out;
}

void
sb_mcp_oauth_s256 (const char *verifier, char out [44])
{
    unsigned char md [32];
    crypto_hash_sha256 (md, (const unsigned char *) verifier, strlen (verifier));
    sodium_bin2base64 (out, 44, md, sizeof md, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

//  A growing application/x-www-form-urlencoded body.
typedef struct {
    char *s;
    size_t len;
    bool failed;
} s_form_t;

static void
s_form_add (s_form_t *f, CURL *c, const char *key, const char *value)
{
    if (!value || f->failed)
        return;
    char *ev = curl_easy_escape (c, value, 0);
    size_t need = f->len + strlen (key) + (ev ? strlen (ev) : 0) + 3;
    char *ns = ev ? realloc (f->s, need) : NULL;
    if (!ns) {
        f->failed = true;
        curl_free (ev);
        return;
    }
    f->s = ns;
    f->len += (size_t) snprintf (ns + f->len, need - f->len, "%s%s=%s", f->len ? "&" : "", key, ev);
    sodium_memzero (ev, strlen (ev));
    curl_free (ev);
}

static void
s_form_free (s_form_t *f)
{
    if (f->s) {
        sodium_memzero (f->s, f->len);
        free (f->s);
    }
    f->s = NULL;
}

bool
sb_mcp_oauth_param (const char *www, const char *name, char *out, size_t size)
{
    if (!www)
        return false;
    size_t nl = strlen (name);
    for (const char *p = www; (p = strcasestr (p, name)); p += nl) {
        //  A whole parameter name: after the scheme, a space or a comma.
        if (p > www && p [-1] != ' ' && p [-1] != ',' && p [-1] != '\t')
            continue;
        const char *q = p + nl;
        while (*q == ' ')
            q++;
        if (*q != '=')
            continue;
        q++;
        while (*q == ' ')
            q++;
        size_t n = 0;
        if (*q == '"') {
            for (q++; *q && *q != '"'; q++) {
                if (*q == '\\' && q [1])
                    q++;
                if (n + 1 >= size)
                    return false;
                out [n++] = *q;
            }
        }
        else
            for (; *q && *q != ',' && *q != ' '; q++) {
                if (n + 1 >= size)
                    return false;
                out [n++] = *q;
            }
        out [n] = 0;
        return true;
    }
    return false;
}

//  The origin (scheme://host[:port]) and the path (without a trailing
//  '/'; "" for the root) of an http(s) URL. 0, or -1 when it is not one.
static int
s_url_split (const char *url, char *origin, size_t osize, char *path, size_t psize)
{
    CURLU *u = curl_url ();
    char *scheme = NULL, *host = NULL, *port = NULL, *p = NULL;
    int rc = -1;
    if (u && curl_url_set (u, CURLUPART_URL, url, 0) == CURLUE_OK
    &&  curl_url_get (u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK
    &&  curl_url_get (u, CURLUPART_HOST, &host, 0) == CURLUE_OK
    &&  curl_url_get (u, CURLUPART_PATH, &p, 0) == CURLUE_OK
    &&  (strcmp (scheme, "http") == 0 || strcmp (scheme, "https") == 0)) {
        curl_url_get (u, CURLUPART_PORT, &port, 0);
        int n = snprintf (origin, osize, "%s://%s%s%s", scheme, host, port ? ":" : "", port ? port : "");
        size_t pl = strlen (p);
        while (pl && p [pl - 1] == '/')
            pl--;
        int m = snprintf (path, psize, "%.*s", (int) pl, p);
        rc = n > 0 && (size_t) n < osize && m >= 0 && (size_t) m < psize ? 0 : -1;
    }
    curl_free (scheme);
    curl_free (host);
    curl_free (port);
    curl_free (p);
    curl_url_cleanup (u);
    return rc;
}

bool
sb_mcp_oauth_resource_ok (const char *resource, const char *url)
{
    char ro [S_URL_MAX], rp [S_URL_MAX], uo [S_URL_MAX], up [S_URL_MAX];
    if (!resource || s_url_split (resource, ro, sizeof ro, rp, sizeof rp)
    ||  s_url_split (url, uo, sizeof uo, up, sizeof up) || strcasecmp (ro, uo) != 0)
        return false;
    size_t n = strlen (rp);
    return strncmp (up, rp, n) == 0 && (up [n] == 0 || up [n] == '/');
}

static bool
s_http_url (const char *s)
{
    return s && strlen (s) < S_URL_MAX && (strncmp (s, "https://", 8) == 0 || strncmp (s, "http://", 7) == 0);
}

//  An error text of the authorization server's, made safe to show: at
//  most 160 printable bytes.
static void
s_safe (char *out, size_t size, const char *in)
{
    size_t n = 0;
    for (; in && *in && n + 1 < size && n < 160; in++)
        out [n++] = (*in >= 32 && *in < 127) ? *in : '?';
    out [n] = 0;
}

/* ------------------------------------------------------------------ */
/*  HTTP */

typedef struct {
    long status;
    char *body;
    size_t len;
    bool over;
    char location [S_URL_MAX];
} s_resp_t;

static size_t
s_on_body (char *b, size_t size, size_t n, void *arg)
{
    s_resp_t *r = arg;
    size_t len = size * n;
    if (r->len + len > SB_OAUTH_BODY_MAX) {
        r->over = true;
        return 0;
    }
    char *nb = realloc (r->body, r->len + len + 1);
    if (!nb)
        return 0;
    r->body = nb;
    memcpy (nb + r->len, b, len);
    r->len += len;
    nb [r->len] = 0;
    return len;
}

static size_t
s_on_header (char *b, size_t size, size_t n, void *arg)
{
    s_resp_t *r = arg;
    size_t len = size * n;
    if (len > 9 && strncasecmp (b, "location:", 9) == 0) {
        const char *v = b + 9;
        while (*v == ' ')
            v++;
        size_t vl = (size_t) (b + len - v);
        while (vl && (v [vl - 1] == '\r' || v [vl - 1] == '\n' || v [vl - 1] == ' '))
            vl--;
        if (vl < sizeof r->location) {
            memcpy (r->location, v, vl);
            r->location [vl] = 0;
        }
    }
    return len;
}

static void
s_resp_free (s_resp_t *r)
{
    if (r->body) {
        sodium_memzero (r->body, r->len);
        free (r->body);
    }
    r->body = NULL;
}

//  One request: a GET (form NULL) or a form POST, with `hl` added to its
//  headers; never follows a redirect. 0 when an answer came (any status).
static int
s_request (sb_mcp_oauth_t *self, const char *url, const char *form, struct curl_slist *hl, int64_t deadline,
           s_resp_t *r, char *err, size_t errlen)
{
    memset (r, 0, sizeof *r);
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return s_err (err, errlen, "out of memory");
    CURL *c = self->curl;
    curl_easy_reset (c);
    int64_t left = deadline - sb_mono_ms ();
    if (left > S_HTTP_MAX_MS)
        left = S_HTTP_MAX_MS;
    hl = curl_slist_append (hl, "Accept: application/json");
    if (form)
        hl = curl_slist_append (hl, "Content-Type: application/x-www-form-urlencoded");
    curl_easy_setopt (c, CURLOPT_URL, url);
    curl_easy_setopt (c, CURLOPT_HTTPHEADER, hl);
    if (form) {
        curl_easy_setopt (c, CURLOPT_POSTFIELDS, form);
        curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE, (long) strlen (form));
    }
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, s_on_body);
    curl_easy_setopt (c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt (c, CURLOPT_HEADERFUNCTION, s_on_header);
    curl_easy_setopt (c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt (c, CURLOPT_TIMEOUT_MS, (long) (left > 0 ? left : 1));
    curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform (c);
    curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all (hl);
    if (r->over)
        return s_err (err, errlen, "%s answered more than %u KiB", url, SB_OAUTH_BODY_MAX >> 10);
    if (rc != CURLE_OK)
        return s_err (err, errlen, "%s: %s", url, curl_easy_strerror (rc));
    return 0;
}

//  The JSON object a GET of `url` answers with 200, or NULL.
static json_t *
s_get_json (sb_mcp_oauth_t *self, const char *url, int64_t deadline)
{
    s_resp_t r;
    char err [256];
    json_t *doc = NULL;
    struct curl_slist *hl = curl_slist_append (NULL, "MCP-Protocol-Version: " "2025-06-18");
    if (s_request (self, url, NULL, hl, deadline, &r, err, sizeof err) == 0 && r.status == 200 && r.body)
        doc = json_loadb (r.body, r.len, 0, NULL);
    s_resp_free (&r);
    if (doc && !json_is_object (doc)) {
        json_decref (doc);
        doc = NULL;
    }
    return doc;
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
    char *text = doc ? json_dumps (doc, JSON_COMPACT) : NULL;
    json_decref (doc);
    if (text && sb_mcp_oauth_store_save (self->data_dir, self->conf->name, self->conf->url, text) != 0)
        sb_warn (ACTOR, "MCP server %s: cannot save its OAuth tokens in %s", self->conf->name, self->data_dir);
    if (text) {
        sodium_memzero (text, strlen (text));
        free (text);
    }
}

static const char *
s_str (json_t *o, const char *k, size_t max)
{
    const char *s = json_string_value (json_object_get (o, k));
    return s && *s && strlen (s) <= max ? s : NULL;
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
    const char *access = s_str (doc, "access_token", SB_OAUTH_TOKEN_MAX);
    bool newer = access && (!self->access || strcmp (access, self->access) != 0);
    const char *method = s_str (doc, "method", sizeof self->method - 1);
    s_set (&self->client_id, s_str (doc, "client_id", S_URL_MAX));
    s_wipe (&self->client_secret);
    s_set (&self->client_secret, s_str (doc, "client_secret", SB_OAUTH_TOKEN_MAX));
    snprintf (self->method, sizeof self->method, "%s", method ? method : "none");
    const char *ep = s_str (doc, "token_endpoint", S_URL_MAX);
    s_set (&self->token_ep, s_http_url (ep) ? ep : NULL);
    s_set (&self->issuer, s_str (doc, "issuer", S_URL_MAX));
    s_set (&self->resource, s_str (doc, "resource", S_URL_MAX));
    s_set (&self->scope, s_str (doc, "scope", S_SCOPE_MAX));
    s_wipe (&self->access);
    s_set (&self->access, access);
    s_wipe (&self->refresh);
    s_set (&self->refresh, s_str (doc, "refresh_token", SB_OAUTH_TOKEN_MAX));
    json_int_t at = json_integer_value (json_object_get (doc, "expires_at"));
    self->expires_at = at > 0 ? (int64_t) at : 0;
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
    s_wipe (&self->client_secret);
    s_wipe (&self->access);
    s_wipe (&self->refresh);
    s_wipe (&self->header);
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

bool
sb_mcp_oauth_authorized (const sb_mcp_oauth_t *self)
{
    return self && self->access;
}

/* ------------------------------------------------------------------ */
/*  Discovery */

//  The protected-resource metadata (RFC 9728): the challenge's
//  resource_metadata, else the path-based then the root well-known URL.
static json_t *
s_prm (sb_mcp_oauth_t *self, const char *www, int64_t deadline)
{
    char url [S_URL_MAX], origin [S_URL_MAX], path [S_URL_MAX];
    if (sb_mcp_oauth_param (www, "resource_metadata", url, sizeof url) && s_http_url (url)) {
        json_t *doc = s_get_json (self, url, deadline);
        if (doc)
            return doc;
    }
    if (s_url_split (self->conf->url, origin, sizeof origin, path, sizeof path))
        return NULL;
    if (path [0]) {
        snprintf (url, sizeof url, "%s/.well-known/oauth-protected-resource%s", origin, path);
        json_t *doc = s_get_json (self, url, deadline);
        if (doc)
            return doc;
    }
    snprintf (url, sizeof url, "%s/.well-known/oauth-protected-resource", origin);
    return s_get_json (self, url, deadline);
}

//  The authorization server's metadata: RFC 8414 and OpenID Connect
//  discovery, path-inserted for an issuer with a path, then OpenID's
//  path-appended form; never the root for an issuer with a path.
static json_t *
s_as_meta (sb_mcp_oauth_t *self, const char *issuer, int64_t deadline)
{
    char origin [S_URL_MAX], path [S_URL_MAX], url [S_URL_MAX];
    if (s_url_split (issuer, origin, sizeof origin, path, sizeof path))
        return NULL;
    const char *fmt [] = { "%s/.well-known/oauth-authorization-server%s", "%s/.well-known/openid-configuration%s",
                           "%s%s/.well-known/openid-configuration" };
    for (size_t k = 0; k < (path [0] ? 3 : 2); k++) {
        snprintf (url, sizeof url, fmt [k], origin, path);
        json_t *doc = s_get_json (self, url, deadline);
        if (doc)
            return doc;
    }
    return NULL;
}

static bool
s_has (json_t *array, const char *v)
{
    size_t i;
    json_t *e;
    json_array_foreach (array, i, e)
        if (json_is_string (e) && strcmp (json_string_value (e), v) == 0)
            return true;
    return false;
}

static int
s_discover (sb_mcp_oauth_t *self, const char *www, int64_t deadline, json_t **meta_p, char *err, size_t errlen)
{
    const char *name = self->conf->name;
    char issuer [S_URL_MAX];
    json_t *prm = s_prm (self, www, deadline);
    s_set (&self->resource, NULL);
    s_set (&self->prm_scopes, NULL);
    if (prm) {
        const char *resource = s_str (prm, "resource", S_URL_MAX);
        const char *as = json_string_value (json_array_get (json_object_get (prm, "authorization_servers"), 0));
        if (!sb_mcp_oauth_resource_ok (resource, self->conf->url)) {
            char shown [170];
            s_safe (shown, sizeof shown, resource ? resource : "(none)");
            json_decref (prm);
            return s_err (err, errlen, "the protected-resource metadata of %s names another resource (%s): "
                          "refused", name, shown);
        }
        if (!s_http_url (as)) {
            json_decref (prm);
            return s_err (err, errlen, "the protected-resource metadata of %s names no authorization server", name);
        }
        snprintf (issuer, sizeof issuer, "%s", as);
        s_set (&self->resource, resource);
        json_t *sc = json_object_get (prm, "scopes_supported");
        size_t i;
        json_t *e;
        char scopes [S_SCOPE_MAX] = "";
        json_array_foreach (sc, i, e)
            if (json_is_string (e) && strlen (scopes) + strlen (json_string_value (e)) + 2 < sizeof scopes
            &&  !strpbrk (json_string_value (e), " \"\\"))
                snprintf (scopes + strlen (scopes), sizeof scopes - strlen (scopes), "%s%s", scopes [0] ? " " : "",
                          json_string_value (e));
        if (scopes [0])
            s_set (&self->prm_scopes, scopes);
        json_decref (prm);
    }
    else {
        //  2025-03-26: no protected-resource metadata; the MCP server's
        //  origin is the authorization server.
        char path [S_URL_MAX];
        if (s_url_split (self->conf->url, issuer, sizeof issuer, path, sizeof path))
            return s_err (err, errlen, "the URL of %s is not an http(s) URL", name);
    }
    json_t *meta = s_as_meta (self, issuer, deadline);
    if (meta) {
        const char *a = s_str (meta, "authorization_endpoint", S_URL_MAX);
        const char *t = s_str (meta, "token_endpoint", S_URL_MAX);
        const char *r = s_str (meta, "registration_endpoint", S_URL_MAX);
        json_t *methods = json_object_get (meta, "code_challenge_methods_supported");
        if (!s_http_url (t) || (a && !s_http_url (a)) || (r && !s_http_url (r))) {
            json_decref (meta);
            return s_err (err, errlen, "the authorization server of %s (%s) gives no valid token endpoint", name,
                          issuer);
        }
        if (json_is_array (methods) && !s_has (methods, "S256") && !self->conf->oauth.client_credentials) {
            json_decref (meta);
            return s_err (err, errlen, "the authorization server of %s does not support PKCE S256: refused", name);
        }
        s_set (&self->authz_ep, a);
        s_set (&self->token_ep, t);
        s_set (&self->reg_ep, r);
        self->as_offline = s_has (json_object_get (meta, "scopes_supported"), "offline_access");
    }
    else
    if (!self->resource) {
        //  2025-03-26 without metadata: the default endpoints.
        char url [S_URL_MAX + 16];
        snprintf (url, sizeof url, "%s/authorize", issuer);
        s_set (&self->authz_ep, url);
        snprintf (url, sizeof url, "%s/token", issuer);
        s_set (&self->token_ep, url);
        snprintf (url, sizeof url, "%s/register", issuer);
        s_set (&self->reg_ep, url);
        self->as_offline = false;
    }
    else
        return s_err (err, errlen, "cannot read the metadata of the authorization server of %s (%s)", name, issuer);
    s_set (&self->issuer, issuer);
    self->discovered = true;
    *meta_p = meta ? meta : json_object ();
    return 0;
}

/* ------------------------------------------------------------------ */
/*  The client */

static const char *
s_pick_method (json_t *meta, bool secret)
{
    json_t *m = json_object_get (meta, "token_endpoint_auth_methods_supported");
    if (!secret)
        return "none";
    //  RFC 8414: client_secret_basic when the server does not say.
    if (!json_is_array (m) || s_has (m, "client_secret_basic"))
        return "client_secret_basic";
    return s_has (m, "client_secret_post") ? "client_secret_post" : "client_secret_basic";
}

//  Dynamic client registration (RFC 7591).
static int
s_register (sb_mcp_oauth_t *self, json_t *meta, const char *redirect, int64_t deadline, char *err, size_t errlen)
{
    json_t *m = json_object_get (meta, "token_endpoint_auth_methods_supported");
    const char *want = !json_is_array (m) || s_has (m, "none") ? "none"
                     : s_has (m, "client_secret_basic") ? "client_secret_basic" : "client_secret_post";
    bool cc = self->conf->oauth.client_credentials;
    json_t *body = json_pack ("{s:s, s:[s], s:[s,s], s:[s], s:s}", "client_name", "switchboard", "redirect_uris",
                              redirect, "grant_types", cc ? "client_credentials" : "authorization_code",
                              "refresh_token", "response_types", "code", "token_endpoint_auth_method", want);
    char *text = body ? json_dumps (body, JSON_COMPACT) : NULL;
    json_decref (body);
    if (!text)
        return s_err (err, errlen, "out of memory");
    struct curl_slist *hl = curl_slist_append (NULL, "Content-Type: application/json");
    s_resp_t r;
    //  s_request names the body a form; the JSON type comes first and wins.
    int rc = s_request (self, self->reg_ep, text, hl, deadline, &r, err, errlen);
    free (text);
    json_t *doc = rc == 0 && r.body ? json_loadb (r.body, r.len, 0, NULL) : NULL;
    long status = r.status;
    s_resp_free (&r);
    if (rc)
        return -1;
    const char *id = s_str (doc, "client_id", S_URL_MAX);
    if ((status != 201 && status != 200) || !id) {
        json_decref (doc);
        return s_err (err, errlen, "the authorization server of %s refused the client registration (HTTP %ld)",
                      self->conf->name, status);
    }
    s_set (&self->client_id, id);
    s_wipe (&self->client_secret);
    s_set (&self->client_secret, s_str (doc, "client_secret", SB_OAUTH_TOKEN_MAX));
    const char *method = s_str (doc, "token_endpoint_auth_method", sizeof self->method - 1);
    snprintf (self->method, sizeof self->method, "%s",
              method ? method : s_pick_method (meta, self->client_secret != NULL));
    json_decref (doc);
    sb_info (ACTOR, "MCP server %s: registered a client with its authorization server", self->conf->name);
    return 0;
}

static int
s_client (sb_mcp_oauth_t *self, json_t *meta, const char *redirect, int64_t deadline, char *err, size_t errlen)
{
    const sb_mcp_oauth_conf_t *oc = &self->conf->oauth;
    if (oc->client_id) {
        s_set (&self->client_id, oc->client_id);
        s_wipe (&self->client_secret);
        s_set (&self->client_secret, oc->client_secret);
        snprintf (self->method, sizeof self->method, "%s", oc->private_key_file ? "private_key_jwt"
                  : s_pick_method (meta, oc->client_secret != NULL));
        return 0;
    }
    if (oc->client_metadata_url && json_is_true (json_object_get (meta, "client_id_metadata_document_supported"))) {
        s_set (&self->client_id, oc->client_metadata_url);
        s_wipe (&self->client_secret);
        snprintf (self->method, sizeof self->method, "none");
        return 0;
    }
    if (self->client_id && self->issuer)
        return 0;               //  registered before (the store)
    if (!self->reg_ep)
        return s_err (err, errlen, "the authorization server of %s offers no client registration: give "
                      "oauth.client_id (and client_secret) in the MCP config", self->conf->name);
    return s_register (self, meta, redirect, deadline, err, errlen);
}

/* ------------------------------------------------------------------ */
/*  private_key_jwt (RFC 7523) */

static char *
s_jwt (sb_mcp_oauth_t *self, char *err, size_t errlen)
{
    const char *file = self->conf->oauth.private_key_file;
    FILE *f = fopen (file, "r");
    if (!f) {
        s_err (err, errlen, "cannot read the private key file of %s", self->conf->name);
        return NULL;
    }
    EVP_PKEY *key = PEM_read_PrivateKey (f, NULL, NULL, NULL);
    fclose (f);
    if (!key) {
        s_err (err, errlen, "the private key file of %s is not a PEM private key", self->conf->name);
        return NULL;
    }
    int type = EVP_PKEY_base_id (key);
    const char *alg = type == EVP_PKEY_EC ? "ES256" : type == EVP_PKEY_RSA ? "RS256" : NULL;
    char *out = NULL;
    if (!alg) {
        s_err (err, errlen, "the private key of %s is neither EC P-256 nor RSA", self->conf->name);
        EVP_PKEY_free (key);
        return NULL;
    }
    char jti [SB_NONCE_HEX + 1];
    sb_nonce_hex (jti);
    int64_t now = s_wall_ms () / 1000;
    const char *aud = self->issuer ? self->issuer : self->token_ep;
    json_t *h = json_pack ("{s:s, s:s}", "alg", alg, "typ", "JWT");
    json_t *p = json_pack ("{s:s, s:s, s:s, s:I, s:I, s:s}", "iss", self->client_id, "sub", self->client_id, "aud",
                           aud, "iat", (json_int_t) now, "exp", (json_int_t) now + 300, "jti", jti);
    char *hs = h ? json_dumps (h, JSON_COMPACT) : NULL, *ps = p ? json_dumps (p, JSON_COMPACT) : NULL;
    json_decref (h);
    json_decref (p);
    char *hb = hs ? s_b64url ((unsigned char *) hs, strlen (hs)) : NULL;
    char *pb = ps ? s_b64url ((unsigned char *) ps, strlen (ps)) : NULL;
    size_t il = hb && pb ? strlen (hb) + strlen (pb) + 2 : 0;
    char *input = il ? malloc (il) : NULL;
    unsigned char sig [1024];
    size_t sl = sizeof sig;
    EVP_MD_CTX *md = EVP_MD_CTX_new ();
    if (input && md) {
        snprintf (input, il, "%s.%s", hb, pb);
        if (EVP_DigestSignInit (md, NULL, EVP_sha256 (), NULL, key) == 1
        &&  EVP_DigestSign (md, sig, &sl, (unsigned char *) input, strlen (input)) == 1) {
            unsigned char raw [64];
            const unsigned char *der = sig;
            bool ok = true;
            if (type == EVP_PKEY_EC) {
                //  JWS wants r || s, 32 bytes each, not OpenSSL's DER.
                ECDSA_SIG *es = d2i_ECDSA_SIG (NULL, &der, (long) sl);
                const BIGNUM *r, *s;
                ok = es != NULL;
                if (ok) {
                    ECDSA_SIG_get0 (es, &r, &s);
                    ok = BN_bn2binpad (r, raw, 32) == 32 && BN_bn2binpad (s, raw + 32, 32) == 32;
                    ECDSA_SIG_free (es);
                }
                memcpy (sig, raw, 64);
                sl = 64;
            }
            char *sb = ok ? s_b64url (sig, sl) : NULL;
            size_t ol = sb ? il + strlen (sb) + 1 : 0;
            if (ol && (out = malloc (ol)))
                snprintf (out, ol, "%s.%s", input, sb);
            free (sb);
        }
    }
    if (!out)
        s_err (err, errlen, "cannot sign the client assertion of %s", self->conf->name);
    EVP_MD_CTX_free (md);
    EVP_PKEY_free (key);
    free (hs);
    free (ps);
    free (hb);
    free (pb);
    free (input);
    return out;
}

//  The client's authentication at the token endpoint, into the form or
//  the headers.
static int
s_client_auth (sb_mcp_oauth_t *self, s_form_t *form, struct curl_slist **hl, char *err, size_t errlen)
{
    if (strcmp (self->method, "private_key_jwt") == 0 && self->conf->oauth.private_key_file) {
        char *jwt = s_jwt (self, err, errlen);
        if (!jwt)
            return -1;
        s_form_add (form, self->curl, "client_id", self->client_id);
        s_form_add (form, self->curl, "client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
        s_form_add (form, self->curl, "client_assertion", jwt);
        free (jwt);
    }
    else
    if (strcmp (self->method, "client_secret_basic") == 0 && self->client_secret) {
        //  RFC 6749 2.3.1: each part form-encoded, then base64.
        char *id = curl_easy_escape (self->curl, self->client_id, 0);
        char *sec = curl_easy_escape (self->curl, self->client_secret, 0);
        size_t n = id && sec ? strlen (id) + strlen (sec) + 2 : 0;
        char *pair = n ? malloc (n) : NULL;
        char *b64 = NULL;
        if (pair) {
            snprintf (pair, n, "%s:%s", id, sec);
            size_t cap = sodium_base64_ENCODED_LEN (n - 1, sodium_base64_VARIANT_ORIGINAL);
            if ((b64 = malloc (cap + 32))) {
                memcpy (b64, "Authorization: Basic ", 21);
                sodium_bin2base64 (b64 + 21, cap, (unsigned char *) pair, n - 1, sodium_base64_VARIANT_ORIGINAL);
                *hl = curl_slist_append (*hl, b64);
                sodium_memzero (b64, strlen (b64));
            }
            sodium_memzero (pair, n);
        }
        if (sec)
            sodium_memzero (sec, strlen (sec));
        curl_free (id);
        curl_free (sec);
        free (pair);
        free (b64);
        if (!b64)
            return s_err (err, errlen, "out of memory");
    }
    else {
        s_form_add (form, self->curl, "client_id", self->client_id);
        if (strcmp (self->method, "client_secret_post") == 0)
            s_form_add (form, self->curl, "client_secret", self->client_secret);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/*  The token endpoint */

//  POSTs `form` (with the client's authentication) and takes the tokens
//  of a 200 answer.
static int
s_token (sb_mcp_oauth_t *self, s_form_t *form, int64_t deadline, char *err, size_t errlen)
{
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return s_err (err, errlen, "out of memory");
    struct curl_slist *hl = NULL;
    if (s_client_auth (self, form, &hl, err, errlen)) {
        curl_slist_free_all (hl);
        return -1;
    }
    if (form->failed) {
        curl_slist_free_all (hl);
        return s_err (err, errlen, "out of memory");
    }
    s_resp_t r;
    int rc = s_request (self, self->token_ep, form->s, hl, deadline, &r, err, errlen);
    json_t *doc = rc == 0 && r.body ? json_loadb (r.body, r.len, 0, NULL) : NULL;
    long status = r.status;
    s_resp_free (&r);
    if (rc)
        return -1;
    if (status != 200) {
        char e [170], d [170];
        s_safe (e, sizeof e, json_string_value (json_object_get (doc, "error")));
        s_safe (d, sizeof d, json_string_value (json_object_get (doc, "error_description")));
        json_decref (doc);
        return s_err (err, errlen, "the token endpoint of %s refused (HTTP %ld%s%s%s%s)", self->conf->name, status,
                      e [0] ? ": " : "", e, d [0] ? ": " : "", d);
    }
    const char *access = s_str (doc, "access_token", SB_OAUTH_TOKEN_MAX);
    const char *type = json_string_value (json_object_get (doc, "token_type"));
    json_t *exp = json_object_get (doc, "expires_in");
    if (!access || !type || strcasecmp (type, "bearer") != 0 || (exp && !json_is_integer (exp))
    ||  strpbrk (access, "\r\n")) {
        json_decref (doc);
        return s_err (err, errlen, "the token endpoint of %s gave no valid bearer token", self->conf->name);
    }
    s_wipe (&self->access);
    s_set (&self->access, access);
    const char *refresh = s_str (doc, "refresh_token", SB_OAUTH_TOKEN_MAX);
    if (refresh) {
        s_wipe (&self->refresh);
        s_set (&self->refresh, refresh);
    }
    json_int_t in = exp ? json_integer_value (exp) : 0;
    if (in < 0)
        in = 0;
    if (in > SB_OAUTH_EXPIRES_MAX)
        in = SB_OAUTH_EXPIRES_MAX;
    self->expires_at = exp ? s_wall_ms () + (int64_t) in * 1000 : 0;
    json_decref (doc);
    s_wipe (&self->header);
    s_save (self);
    return 0;
}

static int
s_refresh (sb_mcp_oauth_t *self, int64_t deadline, char *err, size_t errlen)
{
    self->refreshed = true;
    if (!self->refresh || !self->token_ep || !self->client_id)
        return s_err (err, errlen, "no refresh token");
    s_form_t form = { 0 };
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return s_err (err, errlen, "out of memory");
    s_form_add (&form, self->curl, "grant_type", "refresh_token");
    s_form_add (&form, self->curl, "refresh_token", self->refresh);
    s_form_add (&form, self->curl, "resource", self->resource);
    int rc = s_token (self, &form, deadline, err, errlen);
    s_form_free (&form);
    if (rc) {
        //  A refused refresh token is not tried again.
        s_wipe (&self->refresh);
        s_save (self);
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

//  The authorization-code grant with PKCE: the person (the authorizer)
//  opens the URL; the code it brings back is exchanged for tokens.
static int
s_authorize_code (sb_mcp_oauth_t *self, const char *redirect, int64_t deadline, char *err, size_t errlen)
{
    if (!self->authz_ep)
        return s_err (err, errlen, "the authorization server of %s has no authorization endpoint", self->conf->name);
    unsigned char raw [32];
    randombytes_buf (raw, sizeof raw);
    char *verifier = s_b64url (raw, sizeof raw);
    char challenge [44], state [SB_NONCE_HEX + 1];
    if (!verifier)
        return s_err (err, errlen, "out of memory");
    sb_mcp_oauth_s256 (verifier, challenge);
    sb_nonce_hex (state);
    s_form_t q = { 0 };
    s_form_add (&q, self->curl, "response_type", "code");
    s_form_add (&q, self->curl, "client_id", self->client_id);
    s_form_add (&q, self->curl, "redirect_uri", redirect);
    s_form_add (&q, self->curl, "code_challenge", challenge);
    s_form_add (&q, self->curl, "code_challenge_method", "S256");
    s_form_add (&q, self->curl, "state", state);
    s_form_add (&q, self->curl, "scope", self->scope);
    s_form_add (&q, self->curl, "resource", self->resource);
    size_t ul = strlen (self->authz_ep) + (q.s ? q.len : 0) + 2;
    char *url = q.failed ? NULL : malloc (ul);
    if (url)
        snprintf (url, ul, "%s%c%s", self->authz_ep, strchr (self->authz_ep, '?') ? '&' : '?', q.s ? q.s : "");
    free (q.s);         //  nothing in it is secret
    if (!url) {
        free (verifier);
        return s_err (err, errlen, "out of memory");
    }
    char back [S_URL_MAX * 2];
    int rc = s_authorizer (s_authorizer_arg, self->conf->name, url, redirect, deadline, back, sizeof back, err,
                           errlen);
    free (url);
    char code [4096], got [SB_NONCE_HEX + 8], oerr [200];
    if (rc == 0 && s_query (back, "error", oerr, sizeof oerr)) {
        char shown [170];
        s_safe (shown, sizeof shown, oerr);
        rc = s_err (err, errlen, "the authorization server of %s refused: %s", self->conf->name, shown);
    }
    else
    if (rc == 0 && (!s_query (back, "state", got, sizeof got) || strcmp (got, state) != 0))
        rc = s_err (err, errlen, "the authorization of %s came back with another state: refused", self->conf->name);
    else
    if (rc == 0 && !s_query (back, "code", code, sizeof code))
        rc = s_err (err, errlen, "the authorization of %s came back without a code", self->conf->name);
    if (rc == 0) {
        s_form_t form = { 0 };
        s_form_add (&form, self->curl, "grant_type", "authorization_code");
        s_form_add (&form, self->curl, "code", code);
        s_form_add (&form, self->curl, "redirect_uri", redirect);
        s_form_add (&form, self->curl, "code_verifier", verifier);
        s_form_add (&form, self->curl, "resource", self->resource);
        rc = s_token (self, &form, deadline, err, errlen);
        s_form_free (&form);
        sodium_memzero (code, sizeof code);
    }
    sodium_memzero (verifier, strlen (verifier));
    free (verifier);
    return rc;
}

static int
s_client_credentials (sb_mcp_oauth_t *self, int64_t deadline, char *err, size_t errlen)
{
    s_form_t form = { 0 };
    s_form_add (&form, self->curl, "grant_type", "client_credentials");
    s_form_add (&form, self->curl, "scope", self->scope);
    s_form_add (&form, self->curl, "resource", self->resource);
    int rc = s_token (self, &form, deadline, err, errlen);
    s_form_free (&form);
    return rc;
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
    if (s [0] && self->as_offline && !self->conf->oauth.client_credentials)
        s_scope_union (s, sizeof s, s, "offline_access");
    s_set (&self->scope, s [0] ? s : NULL);
}

/* ------------------------------------------------------------------ */

const char *
sb_mcp_oauth_header (sb_mcp_oauth_t *self, int64_t deadline)
{
    if (!self || !self->access)
        return NULL;
    if (self->expires_at && s_wall_ms () + SB_OAUTH_REFRESH_EARLY_MS > self->expires_at && self->refresh
    &&  !self->refreshed) {
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
        return s_err (err, errlen, "HTTP 403: %s refused the request (not for a missing scope)", name);
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return s_err (err, errlen, "out of memory");
    if (!step_up && self->access) {
        //  The token we sent expired or was revoked: a refresh first, then
        //  what another process may have saved since (mcp login).
        char why [256];
        if (self->refresh && !self->refreshed && s_refresh (self, deadline, why, sizeof why) == 0)
            return 0;
        char *failed = self->access;
        self->access = NULL;
        bool newer = s_load (self) && (!failed || !self->access || strcmp (failed, self->access) != 0);
        if (failed) {
            sodium_memzero (failed, strlen (failed));
            free (failed);
        }
        s_wipe (&self->header);
        if (newer)
            return 0;
        s_wipe (&self->access);
    }
    else
    if (!step_up && s_load (self)) {
        s_wipe (&self->header);
        return 0;
    }
    if (self->attempts >= S_OAUTH_ATTEMPTS)
        return s_err (err, errlen, "%s still refuses after %d authorizations (it asks for scope \"%.200s\")", name,
                      self->attempts, scope);
    bool cc = self->conf->oauth.client_credentials;
    if (!cc && !s_authorizer)
        return s_err (err, errlen, "%s needs authorization: run switchboard mcp login %s", name, name);
    json_t *meta = NULL;
    if (s_discover (self, www, deadline, &meta, err, errlen))
        return -1;
    const sb_mcp_oauth_conf_t *oc = &self->conf->oauth;
    char redirect [S_URL_MAX];
    snprintf (redirect, sizeof redirect, "%s", oc->redirect_uri ? oc->redirect_uri
              : "http://127.0.0.1:8080/oauth/callback");
    int rc = s_client (self, meta, redirect, deadline, err, errlen);
    json_decref (meta);
    if (rc)
        return -1;
    s_choose_scope (self, scope, step_up);
    self->attempts++;
    sb_info (ACTOR, "MCP server %s: authorizing (%s%s, attempt %d)", name, cc ? "client credentials" : "authorization code",
             step_up ? ", step-up" : "", self->attempts);
    return cc ? s_client_credentials (self, deadline, err, errlen)
              : s_authorize_code (self, redirect, deadline, err, errlen);
}

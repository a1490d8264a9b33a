/*  actors/exec/mcp_oauth_http.c — the wire of OAuth for MCP servers
    (actors/exec/mcp_oauth.h): small codecs, bounded HTTP requests to the
    authorization side, and the client's authentication at the token
    endpoint (client_secret_basic, _post, private_key_jwt).
*/
#include "actors/exec/mcp_oauth_impl.h"
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
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#define ACTOR "exec"

int64_t
sb_oauth_wall_ms (void)
{
    struct timeval tv;
    gettimeofday (&tv, NULL);
    return (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

int
sb_oauth_err (char *err, size_t errlen, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

int
sb_oauth_err (char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
    return -1;
}

void
sb_oauth_set (char **field, const char *v)
{
    free (*field);
    *field = v ? strdup (v) : NULL;
}

//  Frees a secret after wiping it.
void
sb_oauth_wipe (char **field)
{
    if (*field) {
        sodium_memzero (*field, strlen (*field));
        free (*field);
        *field = NULL;
    }
}

const char *
sb_oauth_str (json_t *o, const char *k, size_t max)
{
    const char *s = json_string_value (json_object_get (o, k));
    return s && *s && strlen (s) <= max ? s : NULL;
}

bool
sb_oauth_has (json_t *array, const char *v)
{
    size_t i;
    json_t *e;
    json_array_foreach (array, i, e)
        if (json_is_string (e) && strcmp (json_string_value (e), v) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------------ */
/*  Small codecs */

char *
sb_oauth_b64url (const unsigned char *data, size_t len)
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


void
sb_oauth_form_add (sb_oauth_form_t *f, CURL *c, const char *key, const char *value)
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

//  Frees `len` bytes at *p after wiping them.
static void
s_free_wiped (char **p, size_t len)
{
    if (*p) {
        sodium_memzero (*p, len);
        free (*p);
    }
    *p = NULL;
}

void
sb_oauth_form_free (sb_oauth_form_t *f)
{
    s_free_wiped (&f->s, f->len);
}

void
sb_mcp_curl_bounds (void *curl, long timeout_ms)
{
    CURL *c = curl;
    curl_easy_setopt (c, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
    curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms > 0 && timeout_ms < 10000 ? timeout_ms : 10000L);
    curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (c, CURLOPT_PROTOCOLS_STR, "http,https");
}

bool
sb_mcp_header_value (const char *line, size_t len, const char *name, char *out, size_t size)
{
    size_t nl = strlen (name);
    if (len <= nl || strncasecmp (line, name, nl) != 0 || line [nl] != ':')
        return false;
    const char *v = line + nl + 1;
    while (v < line + len && *v == ' ')
        v++;
    size_t vl = (size_t) (line + len - v);
    while (vl && (v [vl - 1] == '\r' || v [vl - 1] == '\n' || v [vl - 1] == ' '))
        vl--;
    if (vl >= size)
        return false;           //  too long to be kept whole: not kept
    memcpy (out, v, vl);
    out [vl] = 0;
    return true;
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
int
sb_oauth_url_split (const char *url, char *origin, size_t osize, char *path, size_t psize)
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
    if (!resource || sb_oauth_url_split (resource, ro, sizeof ro, rp, sizeof rp)
    ||  sb_oauth_url_split (url, uo, sizeof uo, up, sizeof up) || strcasecmp (ro, uo) != 0)
        return false;
    size_t n = strlen (rp);
    return strncmp (up, rp, n) == 0 && (up [n] == 0 || up [n] == '/');
}

bool
sb_oauth_http_url (const char *s)
{
    return s && strlen (s) < S_URL_MAX && (strncmp (s, "https://", 8) == 0 || strncmp (s, "http://", 7) == 0);
}

//  An error text of the authorization server's, made safe to show: at
//  most 160 printable bytes.
void
sb_oauth_safe (char *out, size_t size, const char *in)
{
    size_t n = 0;
    for (; in && *in && n + 1 < size && n < 160; in++)
        out [n++] = (*in >= 32 && *in < 127) ? *in : '?';
    out [n] = 0;
}

/* ------------------------------------------------------------------ */
/*  HTTP */


static size_t
s_on_body (char *b, size_t size, size_t n, void *arg)
{
    sb_oauth_resp_t *r = arg;
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
    sb_oauth_resp_t *r = arg;
    size_t len = size * n;
    sb_mcp_header_value (b, len, "www-authenticate", r->www, sizeof r->www);
    sb_mcp_header_value (b, len, "location", r->location, sizeof r->location);
    return len;
}

void
sb_oauth_resp_free (sb_oauth_resp_t *r)
{
    s_free_wiped (&r->body, r->len);
}

//  One request: a GET (form NULL) or a form POST, with `hl` added to its
//  headers; never follows a redirect. 0 when an answer came (any status).
int
sb_oauth_request (sb_mcp_oauth_t *self, const char *url, const char *form, struct curl_slist *hl, int64_t deadline,
           sb_oauth_resp_t *r, char *err, size_t errlen)
{
    memset (r, 0, sizeof *r);
    if (!self->curl && !(self->curl = curl_easy_init ()))
        return sb_oauth_err (err, errlen, "out of memory");
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
    sb_mcp_curl_bounds (c, (long) left);
    CURLcode rc = curl_easy_perform (c);
    curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all (hl);
    if (r->over)
        return sb_oauth_err (err, errlen, "%s answered more than %u KiB", url, SB_OAUTH_BODY_MAX >> 10);
    if (rc != CURLE_OK)
        return sb_oauth_err (err, errlen, "%s: %s", url, curl_easy_strerror (rc));
    return 0;
}

//  The JSON object a GET of `url` answers with 200, or NULL.
json_t *
sb_oauth_get_json (sb_mcp_oauth_t *self, const char *url, int64_t deadline)
{
    sb_oauth_resp_t r;
    char err [256];
    json_t *doc = NULL;
    struct curl_slist *hl = curl_slist_append (NULL, "MCP-Protocol-Version: " "2025-06-18");
    if (sb_oauth_request (self, url, NULL, hl, deadline, &r, err, sizeof err) == 0 && r.status == 200 && r.body)
        doc = json_loadb (r.body, r.len, 0, NULL);
    sb_oauth_resp_free (&r);
    if (doc && !json_is_object (doc)) {
        json_decref (doc);
        doc = NULL;
    }
    return doc;
}

/* ------------------------------------------------------------------ */
/*  private_key_jwt (RFC 7523) */

static char *
s_jwt (sb_mcp_oauth_t *self, char *err, size_t errlen)
{
    const char *file = self->conf->oauth.private_key_file;
    FILE *f = fopen (file, "r");
    struct stat st;
    if (!f || fstat (fileno (f), &st) != 0 || st.st_size > S_KEY_FILE_MAX) {
        if (f)
            fclose (f);
        sb_oauth_err (err, errlen, "cannot read the private key file of %s (a PEM file of at most %u KiB)",
                      self->conf->name, S_KEY_FILE_MAX >> 10);
        return NULL;
    }
    EVP_PKEY *key = PEM_read_PrivateKey (f, NULL, NULL, NULL);
    fclose (f);
    if (!key) {
        sb_oauth_err (err, errlen, "the private key file of %s is not a PEM private key", self->conf->name);
        return NULL;
    }
    int type = EVP_PKEY_base_id (key);
    const char *alg = type == EVP_PKEY_EC ? "ES256" : type == EVP_PKEY_RSA ? "RS256" : NULL;
    char *out = NULL;
    if (!alg) {
        sb_oauth_err (err, errlen, "the private key of %s is neither EC P-256 nor RSA", self->conf->name);
        EVP_PKEY_free (key);
        return NULL;
    }
    char jti [SB_NONCE_HEX + 1];
    sb_nonce_hex (jti);
    int64_t now = sb_oauth_wall_ms () / 1000;
    const char *aud = self->issuer ? self->issuer : self->token_ep;
    json_t *h = json_pack ("{s:s, s:s}", "alg", alg, "typ", "JWT");
    json_t *p = json_pack ("{s:s, s:s, s:s, s:I, s:I, s:s}", "iss", self->client_id, "sub", self->client_id, "aud",
                           aud, "iat", (json_int_t) now, "exp", (json_int_t) now + 300, "jti", jti);
    char *hs = h ? json_dumps (h, JSON_COMPACT) : NULL, *ps = p ? json_dumps (p, JSON_COMPACT) : NULL;
    json_decref (h);
    json_decref (p);
    char *hb = hs ? sb_oauth_b64url ((unsigned char *) hs, strlen (hs)) : NULL;
    char *pb = ps ? sb_oauth_b64url ((unsigned char *) ps, strlen (ps)) : NULL;
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
            char *sb = ok ? sb_oauth_b64url (sig, sl) : NULL;
            size_t ol = sb ? il + strlen (sb) + 1 : 0;
            if (ol && (out = malloc (ol)))
                snprintf (out, ol, "%s.%s", input, sb);
            free (sb);
        }
    }
    if (!out)
        sb_oauth_err (err, errlen, "cannot sign the client assertion of %s", self->conf->name);
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
int
sb_oauth_client_auth (sb_mcp_oauth_t *self, sb_oauth_form_t *form, struct curl_slist **hl, char *err, size_t errlen)
{
    if (strcmp (self->method, "private_key_jwt") == 0 && self->conf->oauth.private_key_file) {
        char *jwt = s_jwt (self, err, errlen);
        if (!jwt)
            return -1;
        sb_oauth_form_add (form, self->curl, "client_id", self->client_id);
        sb_oauth_form_add (form, self->curl, "client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
        sb_oauth_form_add (form, self->curl, "client_assertion", jwt);
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
            return sb_oauth_err (err, errlen, "out of memory");
    }
    else {
        sb_oauth_form_add (form, self->curl, "client_id", self->client_id);
        if (strcmp (self->method, "client_secret_post") == 0)
            sb_oauth_form_add (form, self->curl, "client_secret", self->client_secret);
    }
    return 0;
}


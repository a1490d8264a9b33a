/*  actors/exec/mcp_oauth_discover.c — where a server's authorization
    happens (actors/exec/mcp_oauth.h): protected-resource metadata,
    authorization-server metadata and their 2025-03-26 fallbacks, and the
    client (configured, a client ID metadata document, or registered).
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

#define ACTOR "exec"

/* ------------------------------------------------------------------ */
/*  Discovery */

//  The protected-resource metadata (RFC 9728): the challenge's
//  resource_metadata, else the path-based then the root well-known URL.
static json_t *
s_prm (sb_mcp_oauth_t *self, const char *www, int64_t deadline)
{
    char url [S_URL_MAX], origin [S_URL_MAX], path [S_URL_MAX];
    if (sb_mcp_oauth_param (www, "resource_metadata", url, sizeof url) && sb_oauth_http_url (url)) {
        json_t *doc = sb_oauth_get_json (self, url, deadline);
        if (doc)
            return doc;
    }
    if (sb_oauth_url_split (self->conf->url, origin, sizeof origin, path, sizeof path))
        return NULL;
    if (path [0]) {
        snprintf (url, sizeof url, "%s/.well-known/oauth-protected-resource%s", origin, path);
        json_t *doc = sb_oauth_get_json (self, url, deadline);
        if (doc)
            return doc;
    }
    snprintf (url, sizeof url, "%s/.well-known/oauth-protected-resource", origin);
    return sb_oauth_get_json (self, url, deadline);
}

//  The authorization server's metadata: RFC 8414 and OpenID Connect
//  discovery, path-inserted for an issuer with a path, then OpenID's
//  path-appended form; never the root for an issuer with a path.
json_t *
sb_oauth_as_meta (sb_mcp_oauth_t *self, const char *issuer, int64_t deadline)
{
    char origin [S_URL_MAX], path [S_URL_MAX], url [S_URL_MAX];
    if (sb_oauth_url_split (issuer, origin, sizeof origin, path, sizeof path))
        return NULL;
    const char *fmt [] = { "%s/.well-known/oauth-authorization-server%s", "%s/.well-known/openid-configuration%s",
                           "%s%s/.well-known/openid-configuration" };
    for (size_t k = 0; k < (path [0] ? 3 : 2); k++) {
        snprintf (url, sizeof url, fmt [k], origin, path);
        json_t *doc = sb_oauth_get_json (self, url, deadline);
        if (doc)
            return doc;
    }
    return NULL;
}


int
sb_oauth_discover (sb_mcp_oauth_t *self, const char *www, int64_t deadline, json_t **meta_p, char *err, size_t errlen)
{
    const char *name = self->conf->name;
    char issuer [S_URL_MAX];
    json_t *prm = s_prm (self, www, deadline);
    sb_oauth_set (&self->resource, NULL);
    sb_oauth_set (&self->prm_scopes, NULL);
    if (prm) {
        const char *resource = sb_oauth_str (prm, "resource", S_URL_MAX);
        const char *as = json_string_value (json_array_get (json_object_get (prm, "authorization_servers"), 0));
        if (!sb_mcp_oauth_resource_ok (resource, self->conf->url)) {
            char shown [170];
            sb_oauth_safe (shown, sizeof shown, resource ? resource : "(none)");
            json_decref (prm);
            return sb_oauth_err (err, errlen, "the protected-resource metadata of %s names another resource (%s): "
                          "refused", name, shown);
        }
        if (!sb_oauth_http_url (as)) {
            json_decref (prm);
            return sb_oauth_err (err, errlen, "the protected-resource metadata of %s names no authorization server", name);
        }
        snprintf (issuer, sizeof issuer, "%s", as);
        sb_oauth_set (&self->resource, resource);
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
            sb_oauth_set (&self->prm_scopes, scopes);
        json_decref (prm);
    }
    else {
        //  2025-03-26: no protected-resource metadata; the MCP server's
        //  origin is the authorization server.
        char path [S_URL_MAX];
        if (sb_oauth_url_split (self->conf->url, issuer, sizeof issuer, path, sizeof path))
            return sb_oauth_err (err, errlen, "the URL of %s is not an http(s) URL", name);
    }
    json_t *meta = sb_oauth_as_meta (self, issuer, deadline);
    if (meta) {
        const char *a = sb_oauth_str (meta, "authorization_endpoint", S_URL_MAX);
        const char *t = sb_oauth_str (meta, "token_endpoint", S_URL_MAX);
        const char *r = sb_oauth_str (meta, "registration_endpoint", S_URL_MAX);
        json_t *methods = json_object_get (meta, "code_challenge_methods_supported");
        if (!sb_oauth_http_url (t) || (a && !sb_oauth_http_url (a)) || (r && !sb_oauth_http_url (r))) {
            json_decref (meta);
            return sb_oauth_err (err, errlen, "the authorization server of %s (%s) gives no valid token endpoint", name,
                          issuer);
        }
        if (json_is_array (methods) && !sb_oauth_has (methods, "S256") && !self->conf->oauth.client_credentials
        &&  !self->conf->oauth.jwt_bearer) {
            json_decref (meta);
            return sb_oauth_err (err, errlen, "the authorization server of %s does not support PKCE S256: refused", name);
        }
        sb_oauth_set (&self->authz_ep, a);
        sb_oauth_set (&self->token_ep, t);
        sb_oauth_set (&self->reg_ep, r);
        self->as_offline = sb_oauth_has (json_object_get (meta, "scopes_supported"), "offline_access");
    }
    else
    if (!self->resource) {
        //  2025-03-26 without metadata: the default endpoints.
        char url [S_URL_MAX + 16];
        snprintf (url, sizeof url, "%s/authorize", issuer);
        sb_oauth_set (&self->authz_ep, url);
        snprintf (url, sizeof url, "%s/token", issuer);
        sb_oauth_set (&self->token_ep, url);
        snprintf (url, sizeof url, "%s/register", issuer);
        sb_oauth_set (&self->reg_ep, url);
        self->as_offline = false;
    }
    else
        return sb_oauth_err (err, errlen, "cannot read the metadata of the authorization server of %s (%s)", name, issuer);
    sb_oauth_set (&self->issuer, issuer);
    *meta_p = meta ? meta : json_object ();
    return 0;
}

/* ------------------------------------------------------------------ */
/*  The client */

const char *
sb_oauth_pick_method (json_t *meta, bool secret)
{
    json_t *m = json_object_get (meta, "token_endpoint_auth_methods_supported");
    if (!secret)
        return "none";
    //  RFC 8414: client_secret_basic when the server does not say.
    if (!json_is_array (m) || sb_oauth_has (m, "client_secret_basic"))
        return "client_secret_basic";
    return sb_oauth_has (m, "client_secret_post") ? "client_secret_post" : "client_secret_basic";
}

//  Dynamic client registration (RFC 7591).
static int
s_register (sb_mcp_oauth_t *self, json_t *meta, const char *redirect, int64_t deadline, char *err, size_t errlen)
{
    json_t *m = json_object_get (meta, "token_endpoint_auth_methods_supported");
    const char *want = !json_is_array (m) || sb_oauth_has (m, "none") ? "none"
                     : sb_oauth_has (m, "client_secret_basic") ? "client_secret_basic" : "client_secret_post";
    bool cc = self->conf->oauth.client_credentials;
    json_t *body = json_pack ("{s:s, s:[s], s:[s,s], s:[s], s:s}", "client_name", "switchboard", "redirect_uris",
                              redirect, "grant_types", cc ? "client_credentials" : "authorization_code",
                              "refresh_token", "response_types", "code", "token_endpoint_auth_method", want);
    char *text = body ? json_dumps (body, JSON_COMPACT) : NULL;
    json_decref (body);
    if (!text)
        return sb_oauth_err (err, errlen, "out of memory");
    struct curl_slist *hl = curl_slist_append (NULL, "Content-Type: application/json");
    sb_oauth_resp_t r;
    //  sb_oauth_request names the body a form; the JSON type comes first and wins.
    int rc = sb_oauth_request (self, self->reg_ep, text, hl, deadline, &r, err, errlen);
    free (text);
    json_t *doc = rc == 0 && r.body ? json_loadb (r.body, r.len, 0, NULL) : NULL;
    long status = r.status;
    sb_oauth_resp_free (&r);
    if (rc)
        return -1;
    const char *id = sb_oauth_str (doc, "client_id", S_URL_MAX);
    if ((status != 201 && status != 200) || !id) {
        json_decref (doc);
        return sb_oauth_err (err, errlen, "the authorization server of %s refused the client registration (HTTP %ld)",
                      self->conf->name, status);
    }
    sb_oauth_set (&self->client_id, id);
    sb_oauth_wipe (&self->client_secret);
    sb_oauth_set (&self->client_secret, sb_oauth_str (doc, "client_secret", SB_OAUTH_TOKEN_MAX));
    const char *method = sb_oauth_str (doc, "token_endpoint_auth_method", sizeof self->method - 1);
    snprintf (self->method, sizeof self->method, "%s",
              method ? method : sb_oauth_pick_method (meta, self->client_secret != NULL));
    json_decref (doc);
    sb_info (ACTOR, "MCP server %s: registered a client with its authorization server", self->conf->name);
    return 0;
}

int
sb_oauth_client (sb_mcp_oauth_t *self, json_t *meta, const char *redirect, int64_t deadline, char *err, size_t errlen)
{
    const sb_mcp_oauth_conf_t *oc = &self->conf->oauth;
    if (oc->client_id) {
        sb_oauth_set (&self->client_id, oc->client_id);
        sb_oauth_wipe (&self->client_secret);
        sb_oauth_set (&self->client_secret, oc->client_secret);
        snprintf (self->method, sizeof self->method, "%s", oc->private_key_file ? "private_key_jwt"
                  : sb_oauth_pick_method (meta, oc->client_secret != NULL));
        return 0;
    }
    if (oc->client_metadata_url && json_is_true (json_object_get (meta, "client_id_metadata_document_supported"))) {
        sb_oauth_set (&self->client_id, oc->client_metadata_url);
        sb_oauth_wipe (&self->client_secret);
        snprintf (self->method, sizeof self->method, "none");
        return 0;
    }
    if (self->client_id && self->issuer)
        return 0;               //  registered before (the store)
    if (!self->reg_ep)
        return sb_oauth_err (err, errlen, "the authorization server of %s offers no client registration: give "
                      "oauth.client_id (and client_secret) in the MCP config", self->conf->name);
    return s_register (self, meta, redirect, deadline, err, errlen);
}


/*  actors/exec/mcp_oauth_revoke.c — `mcp logout`: the stored tokens of an
    MCP server are revoked, then forgotten (actors/exec/mcp_oauth.h,
    docs/mcp.md "Authorization").

    Revocation (RFC 7009) is best effort: the authorization server's
    metadata is read again from the saved issuer, and when it names a
    revocation_endpoint the refresh token (which would mint new access
    tokens) then the access token are posted there, with the client's
    authentication as at the token endpoint. Whatever it answers, the
    saved state goes: the person asked to be logged out, and a server
    that cannot be reached must not keep them logged in. The saved state
    holds the dynamically registered client too; it goes with the
    tokens, so the next login registers afresh (a pre-registered client
    is in the MCP config and stays).
*/
#include "actors/exec/mcp_oauth_impl.h"
#include "common/log.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define ACTOR "exec"

//  Posts one token to the revocation endpoint `ep`. 0 when it answered
//  200 (RFC 7009 2.2: also for a token it did not know); else -1, why in
//  err.
static int
s_revoke_one (sb_mcp_oauth_t *self, const char *ep, const char *token, const char *hint, int64_t deadline,
              char *err, size_t errlen)
{
    sb_oauth_form_t form = { 0 };
    struct curl_slist *hl = NULL;
    sb_oauth_form_add (&form, self->curl, "token", token);
    sb_oauth_form_add (&form, self->curl, "token_type_hint", hint);
    if (sb_oauth_client_auth (self, &form, &hl, err, errlen) || form.failed) {
        if (form.failed)
            sb_oauth_err (err, errlen, "out of memory");
        curl_slist_free_all (hl);
        sb_oauth_form_free (&form);
        return -1;
    }
    sb_oauth_resp_t r;
    int rc = sb_oauth_request (self, ep, form.s, hl, deadline, &r, err, errlen);
    sb_oauth_form_free (&form);
    long status = r.status;
    sb_oauth_resp_free (&r);
    if (rc)
        return -1;
    if (status != 200)
        return sb_oauth_err (err, errlen, "the revocation endpoint answered HTTP %ld", status);
    return 0;
}

//  Revokes what `self` holds; a sentence about it into `out`.
static bool
s_revoke (sb_mcp_oauth_t *self, int64_t deadline, char *out, size_t size)
{
    if (!self->access && !self->refresh) {
        snprintf (out, size, "no tokens were stored, nothing to revoke");
        return false;
    }
    if (!self->issuer) {
        snprintf (out, size, "not revoked: the authorization server is not known");
        return false;
    }
    if (!self->curl && !(self->curl = curl_easy_init ())) {
        snprintf (out, size, "not revoked: out of memory");
        return false;
    }
    json_t *meta = sb_oauth_as_meta (self, self->issuer, deadline);
    const char *ep = sb_oauth_str (meta, "revocation_endpoint", S_URL_MAX);
    char shown [170], err [256];
    if (!meta || !sb_oauth_http_url (ep)) {
        sb_oauth_safe (shown, sizeof shown, self->issuer);
        snprintf (out, size, "not revoked: %s %s", shown, meta ? "has no revocation endpoint"
                  : "did not answer its metadata");
        json_decref (meta);
        return false;
    }
    sb_oauth_safe (shown, sizeof shown, ep);
    //  The refresh token first: with it gone, a stolen access token at
    //  least dies at its expiry.
    const char *what = self->refresh ? "refresh" : "access";
    int rc = 0;
    if (self->refresh)
        rc = s_revoke_one (self, ep, self->refresh, "refresh_token", deadline, err, sizeof err);
    if (rc == 0 && self->access) {
        rc = s_revoke_one (self, ep, self->access, "access_token", deadline, err, sizeof err);
        what = self->refresh ? "refresh and access" : "access";
    }
    json_decref (meta);
    if (rc) {
        snprintf (out, size, "not revoked: %s", err);
        return false;
    }
    snprintf (out, size, "the %s tokens were revoked at %s", what, shown);
    return true;
}

int
sb_mcp_oauth_logout (const sb_mcp_server_conf_t *conf, const char *data_dir, int64_t deadline, bool *done,
                     char *revoked, size_t size, sb_err_t *code, char *err, size_t errlen)
{
    *done = false;
    revoked [0] = 0;
    *code = SB_E_not_found;
    if (!data_dir || !sb_mcp_oauth_store_exists (data_dir, conf->name))
        return sb_oauth_err (err, errlen, "%s is not logged in (no OAuth tokens are stored for it)", conf->name);
    sb_mcp_oauth_t *o = sb_mcp_oauth_new (conf, data_dir);
    if (!o) {
        *code = SB_E_internal;
        return sb_oauth_err (err, errlen, "out of memory");
    }
    //  The stored file may not open (another URL, another key): it is
    //  forgotten all the same, with nothing to revoke.
    *done = s_revoke (o, deadline, revoked, size);
    sb_mcp_oauth_destroy (&o);
    int rc = sb_mcp_oauth_store_remove (data_dir, conf->name);
    if (rc < 0) {
        *code = SB_E_internal;
        return sb_oauth_err (err, errlen, "cannot remove the OAuth tokens of %s from %s/mcp-oauth: %s", conf->name,
                             data_dir, strerror (errno));
    }
    sb_info (ACTOR, "MCP server %s: logged out (%s)", conf->name, revoked);
    return 0;
}

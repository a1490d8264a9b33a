/*  actors/exec/mcp_oauth.h — OAuth for streamable HTTP MCP servers, as
    the MCP specification's authorization section defines it (docs/mcp.md,
    "Authorization").

    A server that answers 401 (or 403 insufficient_scope) is authorized
    here, and the request is sent again with the token:
      - protected-resource metadata (RFC 9728): the WWW-Authenticate
        header's resource_metadata, else the path-based then the root
        well-known URL; its `resource` must be the server's URL (or a
        prefix of it): another one is refused;
      - authorization-server metadata (RFC 8414, then OpenID discovery),
        with the 2025-03-26 fallbacks when the server has no
        protected-resource metadata (the server's origin as the issuer,
        /authorize, /token and /register);
      - the client: configured (pre-registered, `oauth.client_id`), a
        client ID metadata document (`oauth.client_metadata_url`, when
        the server supports them), or dynamic client registration;
      - the grant: authorization code with PKCE S256 (the person's
        browser, through the authorizer a command installs), or client
        credentials (client_secret_basic / _post, or private_key_jwt with
        an ES256 or RS256 key); the token endpoint's auth method among
        none, client_secret_basic and client_secret_post;
      - the `resource` parameter (RFC 8707) in both requests; scopes from
        the challenge, else the resource's scopes_supported, else none,
        plus offline_access when the authorization server lists it;
        step-up on 403 insufficient_scope, at most S_OAUTH_ATTEMPTS
        authorizations per request;
      - refresh before expiry (and on a 401), tokens kept encrypted in the
        data folder (actors/exec/mcp_oauth_store.c).

    Tokens never leave this module but as the Authorization header of
    requests to their server: not logged, not in notes or errors.
    Threads: an object belongs to its server, so to one run thread.
*/
#ifndef SB_EXEC_MCP_OAUTH_H
#define SB_EXEC_MCP_OAUTH_H

#include "actors/exec/mcp.h"
#include "common/digest.h"
#include "schemas/errors.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_OAUTH_TOKEN_MAX   8192           //  an access or refresh token, in bytes
#define SB_OAUTH_BODY_MAX    (256u << 10)   //  a metadata or token response
#define SB_OAUTH_EXPIRES_MAX (400LL * 86400) //  expires_in is clamped to this (s)
#define SB_OAUTH_REFRESH_EARLY_MS 60000     //  refreshed this long before expiry (at most a quarter of its life)

typedef struct sb_mcp_oauth sb_mcp_oauth_t;

/*  How the authorization-code grant reaches the person: given the URL to
    open and the redirect URI, fills `redirected` with the URL the
    authorization server redirected to (with code and state). Returns 0,
    or -1 with a message in err. Installed once per process by the
    command that can run the flow: `mcp login` (the person's browser),
    `mcp probe --oauth-auto` (follows the redirect itself; for tests).
    Without one (serve), a server that needs authorization fails with
    "run switchboard mcp login NAME".                                      */
typedef int (sb_mcp_oauth_authorizer_fn) (void *arg, const char *server, const char *url,
                                         const char *redirect_uri, int64_t deadline,
                                         char *redirected, size_t size, char *err, size_t errlen);
void sb_mcp_oauth_set_authorizer (sb_mcp_oauth_authorizer_fn *fn, void *arg);

/*  The OAuth state of one HTTP server; tokens are loaded from (and saved
    to) the store in `data_dir` (NULL: kept in memory only).              */
sb_mcp_oauth_t *sb_mcp_oauth_new (const sb_mcp_server_conf_t *conf, const char *data_dir);
void sb_mcp_oauth_destroy (sb_mcp_oauth_t **self_p);

/*  The start of one request: the step-up budget is renewed.              */
void sb_mcp_oauth_begin (sb_mcp_oauth_t *self);

/*  "Authorization: Bearer ..." for the next request (refreshed first when
    it expires within SB_OAUTH_REFRESH_EARLY_MS), or NULL when there is no
    token yet. The text is the object's until its next call.              */
const char *sb_mcp_oauth_header (sb_mcp_oauth_t *self, int64_t deadline);

/*  The server refused a request (`status` 401 or 403, its WWW-Authenticate
    header or NULL): obtains a token that may do (refresh, or a new
    authorization). 0: send the request again; -1: not authorized, why in
    err (no secret in it).                                                 */
int sb_mcp_oauth_challenge (sb_mcp_oauth_t *self, long status, const char *www_auth, int64_t deadline,
                            char *err, size_t errlen);

/*  A person's login (mcp login, the UI's Connect; actors/exec/mcp_login.c):
    asks the server for its challenge (an initialize without a token),
    discovers, registers, and puts the URL to open into *url (the caller
    frees it) and the state it carries into `state`. A client_credentials
    server is authorized at once (*url stays NULL). 0, or -1 with err.   */
int sb_mcp_oauth_login_begin (sb_mcp_oauth_t *self, const char *redirect_uri, int64_t deadline, char **url,
                              char state [SB_NONCE_HEX + 1], char *err, size_t errlen);

/*  The second half: `redirected`, the URL the authorization server sent
    the browser back to (or just its query: "?code=...&state=..."); its
    state must be the login's; its code is exchanged for tokens, saved.   */
int sb_mcp_oauth_redirected (sb_mcp_oauth_t *self, const char *redirected, int64_t deadline, char *err,
                             size_t errlen);

/*  Replaces, in place, the object's access and refresh tokens in `text`
    by "***" (a server's answer that echoes them). NULLs tolerated.       */
void sb_mcp_oauth_redact (const sb_mcp_oauth_t *self, char *text);

/*  Whether the object holds an access token (loaded or obtained).       */
bool sb_mcp_oauth_authorized (const sb_mcp_oauth_t *self);

/*  mcp logout (actors/exec/mcp_oauth_revoke.c): revokes the stored
    refresh and access tokens at the authorization server's
    revocation_endpoint (RFC 7009), best effort, then forgets the saved
    state (tokens and a dynamically registered client). What happened to
    the revocation goes into `revoked` (a sentence, no secret in it);
    *done says whether the server accepted it. 0 when forgotten; -1 with
    *code and err: nothing was stored (SB_E_not_found), or the file could
    not be removed.                                                        */
int sb_mcp_oauth_logout (const sb_mcp_server_conf_t *conf, const char *data_dir, int64_t deadline, bool *done,
                         char *revoked, size_t size, sb_err_t *code, char *err, size_t errlen);

//  ---------------------------------------------------------------------
//  Logins in progress, in the executor (actors/exec/mcp_login.c).

typedef struct sb_mcp_logins sb_mcp_logins_t;

sb_mcp_logins_t *sb_mcp_logins_new (const sb_mcp_config_t *cfg);
void sb_mcp_logins_destroy (sb_mcp_logins_t **self_p);

/*  exec.mcp.login: the URL the person opens into *url (the caller frees
    it); NULL when the server was authorized at once (client
    credentials). -1 with *code and err when it cannot start.             */
int sb_mcp_logins_start (sb_mcp_logins_t *self, const char *server, const char *redirect_uri, char **url,
                         sb_err_t *code, char *err, size_t errlen);

/*  exec.mcp.oauth_callback: the redirect's state, code and error (NULL
    when absent). The server's name into `server`; 0 when authorized.     */
int sb_mcp_logins_finish (sb_mcp_logins_t *self, const char *state, const char *code_, const char *error,
                          char *server, size_t server_len, sb_err_t *code, char *err, size_t errlen);

/*  exec.mcp.logout: forgets the server's tokens, revoking them first
    (sb_mcp_oauth_logout), and drops a login of it in progress. *revoked
    and `how` say what the revocation did. -1 with *code and err: no such
    server, a stdio one, or not logged in.                                 */
int sb_mcp_logins_logout (sb_mcp_logins_t *self, const char *server, bool *revoked, char *how, size_t how_len,
                          sb_err_t *code, char *err, size_t errlen);

//  ---------------------------------------------------------------------
//  The parts, exposed for the unit tests.

/*  The options every libcurl request of the MCP client sets (`curl` is a
    CURL *): the whole request within timeout_ms, the connection within
    the smaller of that and 10 s, no signals (threads), http(s) only.    */
void sb_mcp_curl_bounds (void *curl, long timeout_ms);

/*  When the raw header line (len bytes, CRLF included) is header `name`
    (case-insensitive), its value, trimmed, into out. False otherwise, and
    when the value does not fit (then out is left as it was).            */
bool sb_mcp_header_value (const char *line, size_t len, const char *name, char *out, size_t size);

/*  The value of parameter `name` in a WWW-Authenticate Bearer challenge
    (quoted or token form) into out; false when absent or too long.       */
bool sb_mcp_oauth_param (const char *www_auth, const char *name, char *out, size_t size);

/*  Whether `resource` (from protected-resource metadata) may stand for
    the server at `url`: same scheme, host and port, and its path a prefix
    of the URL's (at a '/' boundary).                                     */
bool sb_mcp_oauth_resource_ok (const char *resource, const char *url);

/*  The PKCE S256 challenge of `verifier`: base64url of its SHA-256,
    without padding (43 characters and a NUL).                             */
void sb_mcp_oauth_s256 (const char *verifier, char out [44]);

//  ---------------------------------------------------------------------
//  The encrypted store (actors/exec/mcp_oauth_store.c): one file per
//  server, DATA/mcp-oauth/NAME, AES-256-GCM under DATA/mcp-oauth/key
//  (32 random bytes, 0600, made on first use), bound to the server's
//  name and URL (a file moved to another server is refused).

#define SB_OAUTH_STORE_MAX (64u << 10)

/*  Saves `doc` (a JSON object) for server `name` at `url`. 0 or -1.      */
int sb_mcp_oauth_store_save (const char *data_dir, const char *name, const char *url, const char *doc);

/*  The saved document (the caller frees it), or NULL: none, another URL,
    or not readable (tampered, another key).                               */
char *sb_mcp_oauth_store_load (const char *data_dir, const char *name, const char *url);

/*  Forgets what was saved for server `name`: 0 removed, 1 there was
    nothing, -1 it could not be removed (errno).                           */
int sb_mcp_oauth_store_remove (const char *data_dir, const char *name);

/*  Whether a file is saved for `name` (true too when it cannot be told). */
bool sb_mcp_oauth_store_exists (const char *data_dir, const char *name);

#endif

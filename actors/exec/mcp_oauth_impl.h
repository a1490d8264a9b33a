/*  actors/exec/mcp_oauth_impl.h — what the OAuth files share
    (actors/exec/mcp_oauth.h). Not a public header:
      mcp_oauth.c          the object, the token endpoint, the challenge, logins
      mcp_oauth_http.c     codecs, the HTTP requests, the client's authentication
      mcp_oauth_discover.c metadata discovery and the client's registration
      mcp_oauth_store.c    the encrypted store */
#ifndef SB_EXEC_MCP_OAUTH_IMPL_H
#define SB_EXEC_MCP_OAUTH_IMPL_H

#include "actors/exec/mcp_oauth.h"
#include "common/digest.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

//  Authorizations (not refreshes) one request may cause: the first one
//  and two step-ups. A server that keeps asking for more is refused then.
#define S_OAUTH_ATTEMPTS  3
#define S_URL_MAX         4096
#define S_SCOPE_MAX       1024
#define S_KEY_FILE_MAX    (16u << 10)
#define S_HTTP_MAX_MS     30000
#define S_VERIFIER_MAX    64

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
    //  The client.
    char *client_id, *client_secret;
    char method [32];           //  none, client_secret_basic, client_secret_post, private_key_jwt
    //  The tokens.
    char *access, *refresh;
    int64_t expires_at;         //  wall ms; 0: not said
    int64_t lifetime_ms;        //  its expires_in
    char *scope;                //  what was asked for last
    char *header;               //  "Authorization: Bearer ..."
    //  An authorization-code grant in progress (PKCE).
    char *verifier, *redirect;
    char state [SB_NONCE_HEX + 1];
    int attempts;               //  authorizations during this request
    bool refreshed;             //  a refresh was tried during this request
    bool stored;                //  the tokens are in the store (mcp logout removes them there)
};

//  A growing application/x-www-form-urlencoded body.
typedef struct {
    char *s;
    size_t len;
    bool failed;
} sb_oauth_form_t;

typedef struct {
    long status;
    char *body;
    size_t len;
    bool over;
    char location [S_URL_MAX];
    char www [2048];            //  WWW-Authenticate
} sb_oauth_resp_t;

int64_t sb_oauth_wall_ms (void);
int sb_oauth_err (char *err, size_t errlen, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
//  Replaces a string field with a copy of v (NULL: none).
void sb_oauth_set (char **field, const char *v);
//  Frees a secret after wiping it.
void sb_oauth_wipe (char **field);
char *sb_oauth_b64url (const unsigned char *data, size_t len);
void sb_oauth_form_add (sb_oauth_form_t *f, CURL *c, const char *key, const char *value);
void sb_oauth_form_free (sb_oauth_form_t *f);
int sb_oauth_url_split (const char *url, char *origin, size_t osize, char *path, size_t psize);
bool sb_oauth_http_url (const char *s);
void sb_oauth_safe (char *out, size_t size, const char *in);
int sb_oauth_request (sb_mcp_oauth_t *self, const char *url, const char *form, struct curl_slist *hl,
                      int64_t deadline, sb_oauth_resp_t *r, char *err, size_t errlen);
void sb_oauth_resp_free (sb_oauth_resp_t *r);
json_t *sb_oauth_get_json (sb_mcp_oauth_t *self, const char *url, int64_t deadline);
//  A non-empty string member of at most max bytes, or NULL.
const char *sb_oauth_str (json_t *o, const char *k, size_t max);
//  Whether the JSON array holds the string v.
bool sb_oauth_has (json_t *array, const char *v);
const char *sb_oauth_pick_method (json_t *meta, bool secret);
int sb_oauth_client_auth (sb_mcp_oauth_t *self, sb_oauth_form_t *form, struct curl_slist **hl, char *err,
                          size_t errlen);
//  The authorization server's metadata (RFC 8414, then OpenID discovery)
//  of `issuer`, or NULL. The caller owns it.
json_t *sb_oauth_as_meta (sb_mcp_oauth_t *self, const char *issuer, int64_t deadline);
//  Discovery from the challenge `www` (NULL: the well-known URLs only):
//  the resource, the endpoints; *meta_p the authorization server's
//  metadata (owned by the caller; {} for the 2025-03-26 defaults).
int sb_oauth_discover (sb_mcp_oauth_t *self, const char *www, int64_t deadline, json_t **meta_p, char *err,
                       size_t errlen);
//  The client: configured, a metadata document, or registered.
int sb_oauth_client (sb_mcp_oauth_t *self, json_t *meta, const char *redirect, int64_t deadline, char *err,
                     size_t errlen);

#endif

/*  tests/unit/test_mcp_oauth.c — the OAuth pieces of the MCP client that
    need no server (actors/exec/mcp_oauth.h): the WWW-Authenticate
    parameters, the resource check, PKCE S256, the encrypted store, the
    redaction of tokens and the "oauth" config entry.
*/
#include "actors/exec/mcp_oauth.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir [PATH_MAX];

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/sb_test_oauth_XXXXXX");
    cr_assert_not_null (mkdtemp (s_dir));
}

static void
s_teardown (void)
{
    char cmd [PATH_MAX + 16];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    cr_assert_eq (system (cmd), 0);
}

TestSuite (mcp_oauth, .init = s_setup, .fini = s_teardown);

Test (mcp_oauth, challenge_parameters_quoted_or_not)
{
    const char *www = " Bearer error=\"insufficient_scope\", scope=\"a b\", "
                      "resource_metadata=\"http://h/.well-known/oauth-protected-resource/mcp\",realm=x";
    char v [128];
    cr_assert (sb_mcp_oauth_param (www, "scope", v, sizeof v));
    cr_assert_str_eq (v, "a b");
    cr_assert (sb_mcp_oauth_param (www, "error", v, sizeof v));
    cr_assert_str_eq (v, "insufficient_scope");
    cr_assert (sb_mcp_oauth_param (www, "realm", v, sizeof v));
    cr_assert_str_eq (v, "x");
    cr_assert (sb_mcp_oauth_param (www, "resource_metadata", v, sizeof v));
    cr_assert_str_eq (v, "http://h/.well-known/oauth-protected-resource/mcp");
    //  Not a parameter name of its own: "metadata" inside resource_metadata.
    cr_assert_not (sb_mcp_oauth_param (www, "metadata", v, sizeof v));
    cr_assert_not (sb_mcp_oauth_param (www, "missing", v, sizeof v));
    cr_assert_not (sb_mcp_oauth_param (NULL, "scope", v, sizeof v));
    //  Too long for the buffer: refused, not cut.
    char small [4];
    cr_assert_not (sb_mcp_oauth_param (www, "error", small, sizeof small));
    cr_assert (sb_mcp_oauth_param ("Bearer scope=\"q\\\"x\"", "scope", v, sizeof v));
    cr_assert_str_eq (v, "q\"x");
}

Test (mcp_oauth, resource_must_be_the_server_or_a_prefix_of_it)
{
    cr_assert (sb_mcp_oauth_resource_ok ("http://h:1/mcp", "http://h:1/mcp"));
    cr_assert (sb_mcp_oauth_resource_ok ("http://h:1", "http://h:1/mcp"));
    cr_assert (sb_mcp_oauth_resource_ok ("http://h:1/", "http://h:1/mcp"));
    cr_assert (sb_mcp_oauth_resource_ok ("HTTP://H:1/mcp", "http://h:1/mcp"));
    cr_assert_not (sb_mcp_oauth_resource_ok ("https://evil.example.com/mcp", "http://h:1/mcp"));
    cr_assert_not (sb_mcp_oauth_resource_ok ("http://h:2/mcp", "http://h:1/mcp"));
    cr_assert_not (sb_mcp_oauth_resource_ok ("http://h:1/mc", "http://h:1/mcp"));
    cr_assert_not (sb_mcp_oauth_resource_ok ("http://h:1/mcp/other", "http://h:1/mcp"));
    cr_assert_not (sb_mcp_oauth_resource_ok ("file:///mcp", "http://h:1/mcp"));
    cr_assert_not (sb_mcp_oauth_resource_ok (NULL, "http://h:1/mcp"));
}

Test (mcp_oauth, pkce_s256_is_the_base64url_sha256_without_padding)
{
    //  The expected value from Python's hashlib and base64, apart.
    char c [44];
    sb_mcp_oauth_s256 ("dBjftJeZ4CVP-mJ92IZuVd5gF3GjrZjRdnGwj31NbmE", c);
    cr_assert_str_eq (c, "UXwiPuviqJ_CWaiwxnALez6qL6NDKkE8ogTkqqfpxnA");
}

Test (mcp_oauth, store_round_trips_encrypted_and_bound_to_name_and_url)
{
    const char *doc = "{\"access_token\":\"at-secret-value-123\"}";
    cr_assert_eq (sb_mcp_oauth_store_save (s_dir, "docs", "http://h/mcp", doc), 0);
    char *back = sb_mcp_oauth_store_load (s_dir, "docs", "http://h/mcp");
    cr_assert_not_null (back);
    cr_assert_str_eq (back, doc);
    free (back);
    //  At rest: not the token, and the key 0600.
    char path [PATH_MAX + 32], buf [4096];
    snprintf (path, sizeof path, "%s/mcp-oauth/docs", s_dir);
    int fd = open (path, O_RDONLY);
    cr_assert_geq (fd, 0);
    ssize_t n = read (fd, buf, sizeof buf - 1);
    close (fd);
    cr_assert_gt (n, 0);
    buf [n] = 0;
    cr_assert_null (memmem (buf, (size_t) n, "at-secret", 9));
    struct stat st;
    snprintf (path, sizeof path, "%s/mcp-oauth/key", s_dir);
    cr_assert_eq (stat (path, &st), 0);
    cr_assert_eq (st.st_mode & 0777, 0600);
    //  Another URL or name does not open it; nor does a flipped byte.
    cr_assert_null (sb_mcp_oauth_store_load (s_dir, "docs", "http://other/mcp"));
    cr_assert_null (sb_mcp_oauth_store_load (s_dir, "other", "http://h/mcp"));
    snprintf (path, sizeof path, "%s/mcp-oauth/docs", s_dir);
    fd = open (path, O_RDWR);
    cr_assert_geq (fd, 0);
    buf [n - 20] ^= 1;
    cr_assert_eq (pwrite (fd, buf, (size_t) n, 0), n);
    close (fd);
    cr_assert_null (sb_mcp_oauth_store_load (s_dir, "docs", "http://h/mcp"));
}

Test (mcp_oauth, store_refuses_a_key_others_can_read_and_an_oversized_file)
{
    cr_assert_eq (sb_mcp_oauth_store_save (s_dir, "a", "http://h/mcp", "{}"), 0);
    char path [PATH_MAX + 32];
    snprintf (path, sizeof path, "%s/mcp-oauth/key", s_dir);
    cr_assert_eq (chmod (path, 0644), 0);
    cr_assert_null (sb_mcp_oauth_store_load (s_dir, "a", "http://h/mcp"));
    cr_assert_eq (chmod (path, 0600), 0);
    snprintf (path, sizeof path, "%s/mcp-oauth/big", s_dir);
    FILE *f = fopen (path, "w");
    cr_assert_not_null (f);
    for (size_t k = 0; k < SB_OAUTH_STORE_MAX + 10; k++)
        fputc ('x', f);
    fclose (f);
    cr_assert_null (sb_mcp_oauth_store_load (s_dir, "big", "http://h/mcp"));
}

Test (mcp_oauth, oauth_config_entry_is_checked_and_its_secret_redacted)
{
    char path [PATH_MAX + 16], err [512];
    snprintf (path, sizeof path, "%s/mcp.json", s_dir);
    FILE *f = fopen (path, "w");
    cr_assert_not_null (f);
    fputs ("{\"mcpServers\":{\"d\":{\"url\":\"http://h/mcp\",\"oauth\":{\"client_id\":\"c1\","
           "\"client_secret\":\"s3cret-client\",\"scope\":\"a b\",\"grant\":\"client_credentials\"}}}}", f);
    fclose (f);
    sb_mcp_config_t *cfg = sb_mcp_config_load (path, true, err, sizeof err);
    cr_assert_not_null (cfg, "%s", err);
    cr_assert_str_eq (cfg->servers [0].oauth.client_id, "c1");
    cr_assert (cfg->servers [0].oauth.client_credentials);
    char *red = sb_mcp_redact (cfg, "the secret is s3cret-client");
    cr_assert_str_eq (red, "the secret is ***");
    free (red);
    sb_mcp_config_destroy (&cfg);
    const char *bad [] = {
        "{\"mcpServers\":{\"d\":{\"url\":\"http://h/mcp\",\"oauth\":{\"nope\":\"x\"}}}}",
        "{\"mcpServers\":{\"d\":{\"url\":\"http://h/mcp\",\"oauth\":{\"grant\":\"implicit\"}}}}",
        "{\"mcpServers\":{\"d\":{\"url\":\"http://h/mcp\",\"oauth\":{\"grant\":\"client_credentials\"}}}}",
        "{\"mcpServers\":{\"d\":{\"url\":\"http://h/mcp\",\"oauth\":{\"redirect_uri\":\"javascript:x\"}}}}",
        "{\"mcpServers\":{\"d\":{\"url\":\"http://h/mcp\",\"oauth\":[1]}}}",
        "{\"mcpServers\":{\"d\":{\"url\":\"http://h/mcp\",\"oauth\":{\"grant\":\"jwt_bearer\",\"client_id\":\"c\"}}}}",
    };
    const char *why [] = { "unknown key", "grant is", "needs a client_id", "must be an http", "must be an object",
                           "needs idp_token_endpoint and id_token_file" };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        f = fopen (path, "w");
        fputs (bad [k], f);
        fclose (f);
        cr_assert_null (sb_mcp_config_load (path, true, err, sizeof err), "%s", bad [k]);
        cr_assert_not_null (strstr (err, why [k]), "%s: %s", bad [k], err);
    }
}

Test (mcp_oauth, redaction_of_the_tokens_it_holds)
{
    sb_mcp_server_conf_t conf = { .name = "d", .url = (char *) "http://h/mcp" };
    //  A store with tokens, taken by a new object.
    cr_assert_eq (sb_mcp_oauth_store_save (s_dir, "d", "http://h/mcp",
                                           "{\"access_token\":\"at-0123456789\",\"refresh_token\":\"rt-abcdefgh\"}"),
                  0);
    sb_mcp_oauth_t *o = sb_mcp_oauth_new (&conf, s_dir);
    cr_assert (sb_mcp_oauth_authorized (o));
    char text [] = "Bearer at-0123456789 and rt-abcdefgh and at-0123456789.";
    sb_mcp_oauth_redact (o, text);
    cr_assert_str_eq (text, "Bearer *** and *** and ***.");
    const char *h = sb_mcp_oauth_header (o, 0);
    cr_assert_str_eq (h, "Authorization: Bearer at-0123456789");
    sb_mcp_oauth_destroy (&o);
    cr_assert_null (o);
    sb_mcp_oauth_redact (NULL, text);
}

Test (mcp_oauth, logout_forgets_the_store_and_a_live_copy_drops_its_token)
{
    sb_mcp_server_conf_t conf = { .name = "d", .url = (char *) "http://h/mcp" };
    cr_assert (!sb_mcp_oauth_store_exists (s_dir, "d"));
    cr_assert_eq (sb_mcp_oauth_store_remove (s_dir, "d"), 1, "nothing to remove");
    bool done;
    char how [256], err [256];
    sb_err_t code;
    cr_assert_eq (sb_mcp_oauth_logout (&conf, s_dir, 0, &done, how, sizeof how, &code, err, sizeof err), -1);
    cr_assert (code == SB_E_not_found && strstr (err, "d is not logged in"), "%s", err);
    //  Tokens without an issuer: forgotten, nothing asked of any server.
    cr_assert_eq (sb_mcp_oauth_store_save (s_dir, "d", "http://h/mcp", "{\"access_token\":\"at-1\"}"), 0);
    sb_mcp_oauth_t *live = sb_mcp_oauth_new (&conf, s_dir);
    cr_assert_not_null (sb_mcp_oauth_header (live, 0));
    cr_assert_eq (sb_mcp_oauth_logout (&conf, s_dir, 0, &done, how, sizeof how, &code, err, sizeof err), 0, "%s",
                  err);
    cr_assert (!done && strstr (how, "not revoked: the authorization server is not known"), "%s", how);
    cr_assert (!sb_mcp_oauth_store_exists (s_dir, "d"));
    //  The session's copy that held the token sends none from then on.
    cr_assert_null (sb_mcp_oauth_header (live, 0));
    cr_assert (!sb_mcp_oauth_authorized (live));
    sb_mcp_oauth_destroy (&live);
}

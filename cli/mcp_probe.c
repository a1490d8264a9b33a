/*  cli/mcp_probe.c — `switchboard mcp probe URL`: the executor's MCP
    client (actors/exec/mcp.h) run once, in this process, against one
    streamable HTTP server: initialize, list its tools, call one. For
    trying a server before configuring it, and the client under test of
    the MCP conformance suite (tests/integration/test_mcp_conformance.py).
*/
#include "cli/cli.h"
#include "actors/exec/mcp.h"
#include "actors/exec/mcp_elicit.h"
#include "actors/exec/mcp_oauth.h"

#include <curl/curl.h>

#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t
s_discard (char *b, size_t size, size_t n, void *arg)
{
    return size * n;
}

static const char *s_usage =
    "usage: switchboard mcp probe URL [--call TOOL [--args JSON]] [--root DIR] [--timeout S]\n"
    "                             [--oauth-auto] [--client-id ID] [--client-secret S]\n"
    "                             [--private-key PEM] [--client-credentials] [--scope S]\n"
    "                             [--client-metadata-url URL] [--jwt-bearer --idp-token-endpoint URL\n"
    "                             --id-token-file FILE [--idp-client-id ID]]\n"
    "\n"
    "Connects switchboard's MCP client to the streamable HTTP server at URL,\n"
    "as a session's run would: initialize, tools/list, and with --call one\n"
    "tools/call. Prints the tools (as the model sees them), the call's\n"
    "progress lines (\"progress: P/TOTAL MESSAGE\") and its result. Needs no\n"
    "running server; nothing reaches a tape.\n"
    "\n"
    "  --call TOOL       calls the server's tool TOOL\n"
    "  --args JSON       its arguments, a JSON object (default {})\n"
    "  --root DIR        the workspace roots/list answers (default: the current folder)\n"
    "  --timeout S       the timeout of each exchange, in seconds (default 30)\n"
    "  --elicit-accept-defaults  a test feature: declares elicitation and accepts\n"
    "                    each of the server's elicitation/create with the\n"
    "                    schema's defaults, as if a person had (without it,\n"
    "                    elicitation is not declared: no one can answer here)\n"
    "\n"
    "OAuth, when the server answers 401 (docs/mcp.md, \"Authorization\"); the\n"
    "tokens are kept in memory only:\n"
    "  --oauth-auto      a test feature: follows the authorization URL itself and\n"
    "                    takes the code from the redirect, as if a person had\n"
    "                    approved (for authorization servers that redirect at\n"
    "                    once, like the conformance suite's); without it, an\n"
    "                    authorization-code server is refused (use mcp login)\n"
    "  --client-id ID, --client-secret S   a pre-registered client\n"
    "  --private-key PEM the client's key file, for private_key_jwt\n"
    "  --client-credentials  the client_credentials grant (needs --client-id)\n"
    "  --scope S         the scope to ask for\n"
    "  --client-metadata-url URL  our client ID metadata document\n"
    "  --jwt-bearer      enterprise-managed authorization: the ID token in\n"
    "                    --id-token-file is exchanged at --idp-token-endpoint\n"
    "                    (as --idp-client-id) for an ID-JAG, the JWT bearer grant\n"
    "                    at the server's authorization server (needs --client-id)\n"
    "\n"
    "Exit status: 0 success, 1 the server could not be used or the call\n"
    "failed, 2 usage error.\n";

//  The MCP config of one server at `url`, as a file the loader reads (the
//  one way a config is made): a temporary file, removed before return.
//  The authorization server of a test redirects at once: the code is in
//  the Location of its answer to the authorization URL. --oauth-auto only.
static int
s_follow (void *arg, const char *server, const char *url, const char *redirect_uri, int64_t deadline,
          char *redirected, size_t size, char *err, size_t errlen)
{
    CURL *c = curl_easy_init ();
    if (!c) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    char *location = NULL;
    long status = 0;
    curl_easy_setopt (c, CURLOPT_URL, url);
    curl_easy_setopt (c, CURLOPT_NOBODY, 0L);
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, s_discard);
    sb_mcp_curl_bounds (c, 10000L);
    CURLcode rc = curl_easy_perform (c);
    curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo (c, CURLINFO_REDIRECT_URL, &location);
    int out = -1;
    if (rc != CURLE_OK)
        snprintf (err, errlen, "the authorization URL: %s", curl_easy_strerror (rc));
    else
    if (status < 300 || status >= 400 || !location || strncmp (location, redirect_uri, strlen (redirect_uri)) != 0)
        snprintf (err, errlen, "the authorization URL answered HTTP %ld, not a redirect to %s", status, redirect_uri);
    else
    if (strlen (location) >= size)
        snprintf (err, errlen, "the redirect is too long");
    else {
        snprintf (redirected, size, "%s", location);
        out = 0;
    }
    curl_easy_cleanup (c);
    return out;
}

typedef struct {
    const char *client_id, *client_secret, *private_key, *scope, *metadata_url;
    const char *idp_token_endpoint, *idp_client_id, *id_token_file;
    bool client_credentials, jwt_bearer;
} s_oauth_opts_t;

static sb_mcp_config_t *
s_config (const char *url, int timeout_s, const s_oauth_opts_t *o, char *err, size_t errlen)
{
    const char *tmp = getenv ("TMPDIR");
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/sb-mcp-probe-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp (path);
    if (fd < 0) {
        snprintf (err, errlen, "cannot create a temporary file in %s", tmp && *tmp ? tmp : "/tmp");
        return NULL;
    }
    json_t *cfg = json_pack ("{s:{s:{s:s, s:i, s:i}}}", "mcpServers", "probe", "url", url,
                             "timeout_s", timeout_s, "startup_timeout_s", timeout_s);
    json_t *oauth = json_object ();
    const struct { const char *k, *v; } f [] = {
        { "client_id", o->client_id }, { "client_secret", o->client_secret }, { "private_key_file", o->private_key },
        { "scope", o->scope }, { "client_metadata_url", o->metadata_url },
        { "grant", o->client_credentials ? "client_credentials" : o->jwt_bearer ? "jwt_bearer" : NULL },
        { "idp_token_endpoint", o->idp_token_endpoint }, { "idp_client_id", o->idp_client_id },
        { "id_token_file", o->id_token_file },
        //  Never opened: --oauth-auto takes the code from the redirect.
        { "redirect_uri", "http://127.0.0.1/oauth/callback" },
    };
    for (size_t k = 0; oauth && k < sizeof f / sizeof f [0]; k++)
        if (f [k].v)
            json_object_set_new (oauth, f [k].k, json_string (f [k].v));
    json_object_set_new (json_object_get (json_object_get (cfg, "mcpServers"), "probe"), "oauth", oauth);
    char *text = cfg ? json_dumps (cfg, JSON_COMPACT) : NULL;
    json_decref (cfg);
    bool written = text && write (fd, text, strlen (text)) == (ssize_t) strlen (text);
    free (text);
    close (fd);
    sb_mcp_config_t *out = NULL;
    if (written)
        out = sb_mcp_config_load (path, true, err, errlen);
    else
        snprintf (err, errlen, "cannot write %s", path);
    unlink (path);
    return out;
}

//  A progress line of the call, printed as it comes.
static void
s_progress (const char *data, size_t len, void *arg)
{
    fwrite (data, 1, len, stdout);
    fflush (stdout);
}

static int
s_probe (const sb_mcp_config_t *cfg, const char *root, const char *call, const char *args)
{
    sb_mcp_set_t *set = sb_mcp_set_new (cfg, "probe", NULL);
    if (!set)
        return sb_cli_fail ("mcp", "out of memory");
    char notes [2048];
    sb_mcp_set_prepare (set, root, -1, notes, sizeof notes);
    if (notes [0]) {
        sb_mcp_set_destroy (&set);
        return sb_cli_fail ("mcp", "%s", notes);
    }
    size_t n = sb_mcp_set_tool_count (set);
    for (size_t k = 0; k < n; k++) {
        const char *name, *desc, *params;
        sb_mcp_set_tool (set, k, &name, &desc, &params);
        printf ("tool %s\n", name);
    }
    int rc = 0;
    if (call) {
        char exposed [SB_EXEC_TOOL_NAME_MAX_MCP + 1];
        snprintf (exposed, sizeof exposed, SB_MCP_PREFIX "probe__%s", call);
        sb_tool_result_t res = { 0 };
        rc = sb_mcp_set_call (set, exposed, args, -1, 0, s_progress, NULL, &res) == 0 ? 0 : 1;
        printf ("%s %s\n", res.ok ? "result" : "error", res.output ? res.output : "");
        free (res.output);
    }
    fflush (stdout);
    sb_mcp_set_destroy (&set);
    return rc;
}

int
sb_cmd_mcp_probe (int argc, char **argv)
{
    static const struct option opts [] = {
        { "call", required_argument, 0, 'c' }, { "args", required_argument, 0, 'a' },
        { "root", required_argument, 0, 'r' }, { "timeout", required_argument, 0, 't' },
        { "oauth-auto", no_argument, 0, 'A' }, { "client-id", required_argument, 0, 'i' },
        { "client-secret", required_argument, 0, 's' }, { "private-key", required_argument, 0, 'k' },
        { "client-credentials", no_argument, 0, 'C' }, { "scope", required_argument, 0, 'S' },
        { "client-metadata-url", required_argument, 0, 'M' }, { "jwt-bearer", no_argument, 0, 'J' },
        { "idp-token-endpoint", required_argument, 0, 'I' }, { "idp-client-id", required_argument, 0, 'D' },
        { "id-token-file", required_argument, 0, 'T' }, { "elicit-accept-defaults", no_argument, 0, 'E' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    const char *call = NULL, *args = "{}", *root = NULL;
    s_oauth_opts_t oauth = { 0 };
    bool automatic = false;
    int timeout_s = 30, c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'c')
            call = optarg;
        else
        if (c == 'a')
            args = optarg;
        else
        if (c == 'r')
            root = optarg;
        else
        if (c == 'A')
            automatic = true;
        else
        if (c == 'i')
            oauth.client_id = optarg;
        else
        if (c == 's')
            oauth.client_secret = optarg;
        else
        if (c == 'k')
            oauth.private_key = optarg;
        else
        if (c == 'C')
            oauth.client_credentials = true;
        else
        if (c == 'S')
            oauth.scope = optarg;
        else
        if (c == 'M')
            oauth.metadata_url = optarg;
        else
        if (c == 'J')
            oauth.jwt_bearer = true;
        else
        if (c == 'I')
            oauth.idp_token_endpoint = optarg;
        else
        if (c == 'D')
            oauth.idp_client_id = optarg;
        else
        if (c == 'T')
            oauth.id_token_file = optarg;
        else
        if (c == 'E')
            sb_mcp_elicit_set_elicitor (sb_mcp_elicit_accept_defaults, NULL);
        else
        if (c == 't') {
            char *end;
            long v = strtol (optarg, &end, 10);
            if (*end || v < 1 || v > SB_MCP_TIMEOUT_MAX_S)
                return sb_cli_usage ("mcp", "--timeout takes seconds, 1 to %d", SB_MCP_TIMEOUT_MAX_S);
            timeout_s = (int) v;
        }
        else
        if (c == 'h') {
            fputs (s_usage, stdout);
            return 0;
        }
        else
            return sb_cli_usage ("mcp", "unknown option (mcp probe --help)");
    }
    if (optind + 1 != argc)
        return sb_cli_usage ("mcp", "mcp probe takes one URL");
    const char *url = argv [optind];
    if (strncmp (url, "http://", 7) != 0 && strncmp (url, "https://", 8) != 0)
        return sb_cli_usage ("mcp", "mcp probe takes an http:// or https:// URL, not '%s'", url);
    json_t *parsed = json_loads (args, 0, NULL);
    bool object = json_is_object (parsed);
    json_decref (parsed);
    if (!object)
        return sb_cli_usage ("mcp", "--args takes a JSON object");
    char cwd [PATH_MAX];
    if (!root)
        root = getcwd (cwd, sizeof cwd) ? cwd : "/";
    char err [512];
    if ((oauth.client_credentials || oauth.jwt_bearer) && !oauth.client_id)
        return sb_cli_usage ("mcp", "--client-credentials and --jwt-bearer need --client-id");
    if (oauth.jwt_bearer && (!oauth.idp_token_endpoint || !oauth.id_token_file))
        return sb_cli_usage ("mcp", "--jwt-bearer needs --idp-token-endpoint and --id-token-file");
    if (automatic)
        sb_mcp_oauth_set_authorizer (s_follow, NULL);
    sb_mcp_config_t *cfg = s_config (url, timeout_s, &oauth, err, sizeof err);
    if (!cfg)
        return sb_cli_fail ("mcp", "%s", err);
    int rc = s_probe (cfg, root, call, args);
    sb_mcp_config_destroy (&cfg);
    return rc;
}

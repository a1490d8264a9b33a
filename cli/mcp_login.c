/*  cli/mcp_login.c — `switchboard mcp login SERVER`: a person connects an
    OAuth MCP server (exec.mcp.login; docs/mcp.md "Authorization").

    The flow runs in the server's executor (the control plane): this
    prints the URL it answers, for the person to open in a browser; the
    authorization server sends the browser back to the gateway's
    /oauth/callback, and the executor keeps the tokens, encrypted, in the
    data folder. This waits until the server shows as authorized, printing
    what it waits for. No token reaches this process.
*/
#include "cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_POLL_MS 500

static const char *s_usage =
    "usage: switchboard mcp login SERVER [--redirect-uri URL] [--wait S] [--no-wait]\n"
    "                                    [--connect EP] [--data DIR]\n"
    "\n"
    "Connects the MCP server SERVER (an HTTP server of the MCP config that\n"
    "asks for OAuth): prints the URL to open in your browser, and waits\n"
    "until you have approved there. The authorization server sends the\n"
    "browser back to the gateway's /oauth/callback; the server then keeps\n"
    "the tokens, encrypted, in its data folder, and refreshes them. A server\n"
    "with \"grant\": \"client_credentials\" is authorized at once.\n"
    "\n"
    "  --redirect-uri URL  the gateway's callback as the browser reaches it\n"
    "                      (default http://127.0.0.1:PORT/oauth/callback, PORT\n"
    "                      the gateway's, from DATA/http.port; else 8080)\n"
    "  --wait S            how long to wait for the approval (default 600)\n"
    "  --no-wait           print the URL and return\n"
    "  --connect EP        the server's command endpoint (default: ipc in DATA)\n"
    "  --data DIR          the server's data folder\n"
    "\n"
    "Exit status: 0 authorized (or the URL printed, --no-wait), 1 the login\n"
    "failed or timed out, 2 usage error.\n";

//  The server's `authorized_at` in exec.mcp.list (0: not authorized;
//  -1: the list failed or names no such server).
static int64_t
s_authorized_at (sb_bus_t *bus, const char *server)
{
    sb_msg_t *reply = sb_bus_call (bus, "exec.mcp.list", NULL, (const uint8_t *) "\x80", 1, 5000);
    int64_t at = -1;
    const sb_val_t *servers = reply && !sb_msg_is_error (reply) ? sb_get_array (reply->body, "servers") : NULL;
    for (uint32_t k = 0; servers && k < servers->len; k++) {
        const sb_val_t *s = sb_array_at (servers, k);
        if (sb_get_str (s, "name") && strcmp (sb_get_str (s, "name"), server) == 0)
            at = sb_get_bool (s, "authorized", false) ? (int64_t) sb_get_uint (s, "authorized_at", 1) : 0;
    }
    sb_msg_destroy (&reply);
    return at;
}

int
sb_cmd_mcp_login (int argc, char **argv)
{
    static const struct option opts [] = {
        { "redirect-uri", required_argument, 0, 'r' }, { "wait", required_argument, 0, 'w' },
        { "no-wait", no_argument, 0, 'n' }, { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    const char *redirect = NULL, *connect = NULL, *data = NULL;
    char dflt [300], dir [4096], err [512];
    long wait_s = 600;
    bool no_wait = false;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'r')
            redirect = optarg;
        else
        if (c == 'w') {
            char *end;
            wait_s = strtol (optarg, &end, 10);
            if (*end || wait_s < 1 || wait_s > 3600)
                return sb_cli_usage ("mcp", "--wait takes seconds, 1 to 3600");
        }
        else
        if (c == 'n')
            no_wait = true;
        else
        if (c == 'c')
            connect = optarg;
        else
        if (c == 'd')
            data = optarg;
        else
        if (c == 'h') {
            fputs (s_usage, stdout);
            return 0;
        }
        else
            return sb_cli_usage ("mcp", "unknown option (mcp login --help)");
    }
    if (optind + 1 != argc)
        return sb_cli_usage ("mcp", "mcp login takes one SERVER (a name in mcp list)");
    const char *server = argv [optind];
    if (!redirect) {
        //  The gateway of the server in DATA, on loopback (DATA/http.port).
        int port = 8080;
        if (sb_cli_data_dir (data, dir, sizeof dir, err, sizeof err) == 0) {
            char path [4200];
            snprintf (path, sizeof path, "%s/http.port", dir);
            FILE *f = fopen (path, "r");
            if (f) {
                if (fscanf (f, "%d", &port) != 1 || port < 1 || port > 65535)
                    port = 8080;
                fclose (f);
            }
        }
        snprintf (dflt, sizeof dflt, "http://127.0.0.1:%d/oauth/callback", port);
        redirect = dflt;
    }
    if (strncmp (redirect, "http://", 7) != 0 && strncmp (redirect, "https://", 8) != 0)
        return sb_cli_usage ("mcp", "--redirect-uri takes an http:// or https:// URL");
    sb_bus_t *bus = sb_cli_connect ("mcp", connect, data);
    if (!bus)
        return 1;
    int64_t before = s_authorized_at (bus, server);
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        sb_bus_destroy (&bus);
        return sb_cli_fail ("mcp", "out of memory");
    }
    sb_enc_map_open (e);
    sb_enc_kstr (e, "server", server);
    sb_enc_kstr (e, "redirect_uri", redirect);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    printf ("asking %s for its authorization server...\n", server);
    fflush (stdout);
    sb_msg_t *reply = sb_cli_call ("mcp", bus, "exec.mcp.login", b, len, 40000);
    sb_enc_destroy (&e);
    int rc = 1;
    const char *url = reply ? sb_get_str (reply->body, "url") : NULL;
    if (reply && !url) {
        printf ("%s is authorized (client credentials)\n", server);
        rc = 0;
    }
    else
    if (reply) {
        printf ("open this URL in your browser to connect %s:\n\n  %s\n\n", server, url);
        fflush (stdout);
        if (no_wait)
            rc = 0;
        else {
            printf ("waiting for the approval (up to %ld s; the browser comes back to %s)...\n", wait_s, redirect);
            fflush (stdout);
            for (long waited = 0; rc && waited < wait_s * 1000; waited += S_POLL_MS) {
                int64_t at = s_authorized_at (bus, server);
                if (at > 0 && at != before) {
                    printf ("%s is authorized\n", server);
                    rc = 0;
                    break;
                }
                usleep (S_POLL_MS * 1000);
            }
            if (rc)
                sb_cli_fail ("mcp", "no approval came within %ld s (start again with mcp login %s)", wait_s, server);
        }
    }
    sb_msg_destroy (&reply);
    sb_bus_destroy (&bus);
    return rc;
}

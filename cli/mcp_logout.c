/*  cli/mcp_logout.c — `switchboard mcp logout SERVER`: a person forgets an
    OAuth MCP server (exec.mcp.logout; docs/mcp.md "Authorization").

    The server's executor revokes the stored tokens at the authorization
    server when it offers a revocation endpoint (RFC 7009), then removes
    them, with the client it registered, from the data folder; this
    prints whether the revocation happened. The tokens are the server's,
    shared by every session, as `mcp login` stores them: there is no
    per-session logout.
*/
#include "cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char *s_usage =
    "usage: switchboard mcp logout SERVER [--connect EP] [--data DIR]\n"
    "\n"
    "Logs out of the MCP server SERVER (an HTTP server that mcp login\n"
    "connected): where its authorization server offers a revocation\n"
    "endpoint, the refresh and access tokens are revoked there first (best\n"
    "effort; the output says whether it happened); then the tokens and the\n"
    "client registered for it are removed from the data folder. Every\n"
    "session's use of SERVER needs mcp login again from then on.\n"
    "\n"
    "  --connect EP      the server's command endpoint (default: ipc in DATA)\n"
    "  --data DIR        the server's data folder\n"
    "\n"
    "Exit status: 0 logged out, 1 the logout failed (no such server, or\n"
    "not logged in), 2 usage error.\n";

int
sb_cmd_mcp_logout (int argc, char **argv)
{
    static const struct option opts [] = {
        { "connect", required_argument, 0, 'c' }, { "data", required_argument, 0, 'd' },
        { "session", required_argument, 0, 's' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    const char *connect = NULL, *data = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'c')
            connect = optarg;
        else
        if (c == 'd')
            data = optarg;
        else
        if (c == 's')
            return sb_cli_usage ("mcp", "mcp logout takes no --session: a server's tokens are shared by every "
                                 "session (as mcp login stores them)");
        else
        if (c == 'h') {
            fputs (s_usage, stdout);
            return 0;
        }
        else
            return sb_cli_usage ("mcp", "unknown option (mcp logout --help)");
    }
    if (optind + 1 != argc)
        return sb_cli_usage ("mcp", "mcp logout takes one SERVER (a name in mcp list)");
    const char *server = argv [optind];
    sb_bus_t *bus = sb_cli_connect ("mcp", connect, data);
    if (!bus)
        return 1;
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        sb_bus_destroy (&bus);
        return sb_cli_fail ("mcp", "out of memory");
    }
    sb_enc_map_open (e);
    sb_enc_kstr (e, "server", server);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("mcp", bus, "exec.mcp.logout", b, len, 40000);
    sb_enc_destroy (&e);
    int rc = 1;
    if (reply) {
        const char *how = sb_get_str (reply->body, "revocation");
        printf ("%s is logged out (%s)\n", server, how ? how : "-");
        rc = 0;
    }
    sb_msg_destroy (&reply);
    sb_bus_destroy (&bus);
    return rc;
}

/*  cli/mcp_probe.c — `switchboard mcp probe URL`: the executor's MCP
    client (actors/exec/mcp.h) run once, in this process, against one
    streamable HTTP server: initialize, list its tools, call one. For
    trying a server before configuring it, and the client under test of
    the MCP conformance suite (tests/integration/test_mcp_conformance.py).
*/
#include "cli/cli.h"
#include "actors/exec/mcp.h"

#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *s_usage =
    "usage: switchboard mcp probe URL [--call TOOL [--args JSON]] [--root DIR] [--timeout S]\n"
    "\n"
    "Connects switchboard's MCP client to the streamable HTTP server at URL,\n"
    "as a session's run would: initialize, tools/list, and with --call one\n"
    "tools/call. Prints the tools (as the model sees them) and the call's\n"
    "result. Needs no running server; nothing reaches a tape.\n"
    "\n"
    "  --call TOOL       calls the server's tool TOOL\n"
    "  --args JSON       its arguments, a JSON object (default {})\n"
    "  --root DIR        the workspace roots/list answers (default: the current folder)\n"
    "  --timeout S       the timeout of each exchange, in seconds (default 30)\n"
    "\n"
    "Exit status: 0 success, 1 the server could not be used or the call\n"
    "failed, 2 usage error.\n";

//  The MCP config of one server at `url`, as a file the loader reads (the
//  one way a config is made): a temporary file, removed before return.
static sb_mcp_config_t *
s_config (const char *url, int timeout_s, char *err, size_t errlen)
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
        rc = sb_mcp_set_call (set, exposed, args, -1, 0, &res) == 0 ? 0 : 1;
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
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    const char *call = NULL, *args = "{}", *root = NULL;
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
    sb_mcp_config_t *cfg = s_config (url, timeout_s, err, sizeof err);
    if (!cfg)
        return sb_cli_fail ("mcp", "%s", err);
    int rc = s_probe (cfg, root, call, args);
    sb_mcp_config_destroy (&cfg);
    return rc;
}

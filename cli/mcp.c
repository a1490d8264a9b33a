/*  cli/mcp.c — `switchboard mcp list` (and `mcp probe`, cli/mcp_probe.c): the MCP tool servers the server's
    executor is configured with, their state and their tools
    (exec.mcp.list; docs/mcp.md). */
#include "cli/cli.h"

#include <getopt.h>
#include <string.h>

static const char *s_usage =
    "usage: switchboard mcp [list] [--json] [--connect EP] [--data DIR]\n"
    "       switchboard mcp probe URL [--call TOOL [--args JSON]] (mcp probe --help)\n"
    "       switchboard mcp login SERVER (connects an OAuth server; mcp login --help)\n"
    "       switchboard mcp logout SERVER (forgets its tokens, revoked first; mcp logout --help)\n"
    "\n"
    "Lists the MCP tool servers the server was configured with (serve\n"
    "--mcp-config FILE, or DATA/mcp.json): for each its transport, its state\n"
    "(not started: no session has needed it yet; running: started for N\n"
    "sessions; failed: why), and the tools it offers, as the model sees them\n"
    "(mcp__<server>__<tool>). Secrets in env and headers are never shown.\n"
    "\n"
    "  --json            one JSON object per server, one per line\n"
    "  --connect EP      the server's command endpoint (default: ipc in DATA)\n"
    "  --data DIR        the server's data folder\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed, 2 usage error.\n";

bool
sb_cli_mcp_names_check (const char *cmd, const char *list)
{
    if (strcmp (list, "all") == 0 || strcmp (list, "none") == 0)
        return false;
    for (const char *p = list; ; ) {
        size_t n = strcspn (p, ",");
        bool ok = n >= 1 && n <= 32;
        for (size_t i = 0; ok && i < n; i++)
            ok = (p [i] >= 'a' && p [i] <= 'z') || (p [i] >= 'A' && p [i] <= 'Z') || (p [i] >= '0' && p [i] <= '9')
              || p [i] == '-' || p [i] == '_';
        if (!ok || (n >= 2 && memmem (p, n, "__", 2))) {
            sb_cli_usage (cmd, "--mcp takes server names (letters, digits, - and _; at most 32 each) "
                          "separated by commas, or all, or none; not '%s'", list);
            return true;
        }
        if (!p [n])
            return false;
        p += n + 1;
    }
}

int
sb_cmd_mcp (int argc, char **argv)
{
    if (argc > 1 && strcmp (argv [1], "probe") == 0)
        return sb_cmd_mcp_probe (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "login") == 0)
        return sb_cmd_mcp_login (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "logout") == 0)
        return sb_cmd_mcp_logout (argc - 1, argv + 1);
    sb_cli_opts_t o;
    int parsed = sb_cli_parse_opts (argc, argv, "mcp", s_usage, &o);
    if (parsed >= 0)
        return parsed;
    const char *connect = o.connect, *data = o.data;
    bool json = o.json;
    if (optind < argc && strcmp (argv [optind], "list") == 0)
        optind++;
    if (optind < argc)
        return sb_cli_usage ("mcp", "unexpected argument '%s' (mcp list)", argv [optind]);
    sb_bus_t *bus = sb_cli_connect ("mcp", connect, data);
    if (!bus)
        return 1;
    sb_msg_t *reply = sb_cli_call ("mcp", bus, "exec.mcp.list", (const uint8_t *) "\x80", 1, 5000);
    int rc = 1;
    if (reply) {
        const sb_val_t *servers = sb_get_array (reply->body, "servers");
        const char *cfg = sb_get_str (reply->body, "config");
        if (!json && (!servers || servers->len == 0))
            printf ("no MCP servers are configured (serve --mcp-config FILE, or DATA/mcp.json; see docs/mcp.md)\n");
        else
        if (!json)
            printf ("from %s\n", cfg && *cfg ? cfg : "-");
        for (uint32_t k = 0; servers && k < servers->len; k++) {
            const sb_val_t *s = sb_array_at (servers, k);
            if (json) {
                sb_cli_print_json (s);
                continue;
            }
            const char *where = sb_get_str (s, "command") ? sb_get_str (s, "command") : sb_get_str (s, "url");
            uint64_t sessions = sb_get_uint (s, "sessions", 0);
            printf ("\n%-20s %-6s %s", sb_get_str (s, "name"), sb_get_str (s, "transport"), sb_get_str (s, "state"));
            if (sessions)
                printf (" (%llu session%s)", (unsigned long long) sessions, sessions == 1 ? "" : "s");
            printf ("  %s\n", where ? where : "");
            if (sb_get_bool (s, "authorized", false))
                printf ("  authorized (OAuth tokens stored)\n");
            if (sb_get_str (s, "error"))
                printf ("  error: %s\n", sb_get_str (s, "error"));
            const sb_val_t *tools = sb_get_array (s, "tools");
            for (uint32_t t = 0; tools && t < tools->len; t++) {
                const sb_val_t *tool = sb_array_at (tools, t);
                char desc [128];
                sb_cli_text_cell (sb_get_str (tool, "description"), 70, desc, sizeof desc);
                printf ("  %-40s %s%s\n", sb_get_str (tool, "name"),
                        sb_get_bool (tool, "read_only_hint", false) ? "(says read-only) " : "", desc);
            }
        }
        rc = 0;
    }
    sb_msg_destroy (&reply);
    sb_bus_destroy (&bus);
    return rc;
}

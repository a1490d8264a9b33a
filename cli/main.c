/*  cli/main.c — `switchboard`: subcommands in the style of git. */
#include "cli/cli.h"
#include "common/log.h"

#include <getopt.h>
#include <string.h>

static const sb_cmd_t s_commands [] = {
    { "serve", sb_cmd_serve, "run the broker and the actors (the embedded server)" },
    { "run", sb_cmd_run, "one shot: give an agent a goal in a repo and stream it" },
    { "prompt", sb_cmd_prompt, "give a session a prompt (starts a run)" },
    { "runs", sb_cmd_runs, "list runs" },
    { "run-info", sb_cmd_run_info, "show one run" },
    { "cancel", sb_cmd_cancel, "cancel a run" },
    { "resume", sb_cmd_resume, "continue a failed, cancelled or interrupted run" },
    { "tap", sb_cmd_tap, "print every bus message live" },
    { "stats", sb_cmd_stats, "print the broker's counters" },
    { "schemas", sb_cmd_schemas, "print the message tables" },
    { "call", sb_cmd_call, "send one request with a JSON body, print the reply" },
    { "actor", sb_cmd_actor, "run one actor attached to a broker" },
    { "sessions", sb_cmd_sessions, "list, show, create, update, close and delete sessions" },
    { "events", sb_cmd_events, "print a session's tape; --follow streams it live" },
};
#define NCOMMANDS (sizeof s_commands / sizeof s_commands [0])

static void
s_usage (FILE *out)
{
    fprintf (out, "usage: switchboard [--version] [--help] COMMAND [ARGS]\n\n"
                  "switchboard is a control plane for coding-agent sessions.\n\ncommands:\n");
    for (size_t k = 0; k < NCOMMANDS; k++)
        fprintf (out, "  %-12s %s\n", s_commands [k].name, s_commands [k].summary);
    fprintf (out, "\n'switchboard COMMAND --help' tells more about one command.\n");
}

int
main (int argc, char **argv)
{
    sb_log_init ();
    /* each command prints its own one-line usage error */
    opterr = 0;
    if (argc < 2) {
        s_usage (stderr);
        return 2;
    }
    const char *cmd = argv [1];
    //  Errors may come before a command has parsed --json (a bad option),
    //  and they must be JSON all the same.
    for (int k = 2; k < argc && strcmp (argv [k], "--") != 0; k++)
        if (strcmp (argv [k], "--json") == 0)
            sb_cli_json_errors = true;
    if (strcmp (cmd, "--help") == 0 || strcmp (cmd, "-h") == 0 || strcmp (cmd, "help") == 0) {
        s_usage (stdout);
        return 0;
    }
    if (strcmp (cmd, "--version") == 0 || strcmp (cmd, "version") == 0) {
        printf ("switchboard %s (bus protocol %d)\n", SB_VERSION, SB_PROTOCOL_VERSION);
        return 0;
    }
    for (size_t k = 0; k < NCOMMANDS; k++)
        if (strcmp (s_commands [k].name, cmd) == 0)
            return s_commands [k].fn (argc - 1, argv + 1);
    if (sb_cli_json_errors)
        return sb_cli_usage ("", "'%s' is not a command (see 'switchboard --help')", cmd);
    fprintf (stderr, "switchboard: '%s' is not a command (see 'switchboard --help')\n", cmd);
    return 2;
}

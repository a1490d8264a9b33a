/*  cli/main.c — `switchboard`: subcommands in the style of git. */
#include "cli/cli.h"
#include "cli/chat.h"
#include "cli/interactions.h"
#include "cli/nodes.h"
#include "cli/queue.h"
#include "actors/llm/keys.h"
#include "common/log.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

static const sb_cmd_t s_commands [] = {
    { "serve", sb_cmd_serve, "run the broker and the actors (the embedded server)" },
    { "run", sb_cmd_run, "one shot: give an agent a goal in a repo and stream it" },
    { "prompt", sb_cmd_prompt, "give a session a prompt (starts a run, or queues or steers while one runs)" },
    { "queue", sb_cmd_queue, "a session's waiting prompts: list, rm, resume" },
    { "runs", sb_cmd_runs, "list runs" },
    { "run-info", sb_cmd_run_info, "show one run" },
    { "usage", sb_cmd_usage, "tokens and cost of a session, its runs, or all, by day" },
    { "cancel", sb_cmd_cancel, "cancel a run" },
    { "resume", sb_cmd_resume, "continue a failed, cancelled or interrupted run" },
    { "tap", sb_cmd_tap, "print every bus message live" },
    { "stats", sb_cmd_stats, "print the broker's counters" },
    { "schemas", sb_cmd_schemas, "print the message tables" },
    { "call", sb_cmd_call, "send one request with a JSON body, print the reply" },
    { "actor", sb_cmd_actor, "run one actor attached to a broker" },
    { "sessions", sb_cmd_sessions, "list, show, create, update, close and delete sessions" },
    { "events", sb_cmd_events, "print a session's tape; --follow streams it live" },
    { "artifacts", sb_cmd_artifacts, "list the images and files a session's tape references, by hash" },
    { "artifact", sb_cmd_artifact, "download one blob: artifact get HASH [-o FILE]" },
    { "attach", sb_cmd_attach, "attach a file to a session as an artifact" },
    { "checkpoints", sb_cmd_checkpoints, "list a session's checkpoints: the work tree after each step" },
    { "workers", sb_cmd_workers, "list the registered workers and their status" },
    { "nodes", sb_cmd_nodes, "list a cluster's nodes on PostgreSQL: endpoints, heartbeat, shards owned" },
    { "worker-status", sb_cmd_worker_status, "show one worker" },
    { "worker", sb_cmd_worker, "run an external worker that claims a pool's runs" },
    { "keys", sb_cmd_keys, "make a client key pair for the bus's CURVE TCP endpoints" },
    { "rewind", sb_cmd_rewind, "put a session's work tree and conversation back to a seq (or --undo the last rewind)" },
    { "fork", sb_cmd_fork, "a new session whose history is another's up to a seq" },
    { "compact", sb_cmd_compact, "compact a session's model context now (summarize older turns)" },
    { "mcp", sb_cmd_mcp, "list the MCP tool servers: state and tools" },
    { "interactions", sb_cmd_interactions, "list the approvals runs ask for" },
    { "interaction", sb_cmd_interaction, "show one approval and the tool call it is about" },
    { "resolve", sb_cmd_resolve, "answer an approval: --approve or --reject" },
    { "chat", sb_cmd_chat, "an interactive terminal on a session: prompts, runs, approvals" },
};
#define NCOMMANDS (sizeof s_commands / sizeof s_commands [0])

static void
s_usage (FILE *out)
{
    fprintf (out, "usage: switchboard [--data DIR] [--connect EP] [--version] [--help] COMMAND [ARGS]\n\n"
                  "switchboard is a control plane for coding-agent sessions.\n\n"
                  "  --data DIR    the data folder, for every command (as $SWITCHBOARD_DATA)\n"
                  "  --connect EP  the server's bus endpoint (as $SWITCHBOARD_BUS); EP1,EP2 for a cluster's nodes\n"
                  "Given after the command, they mean the same; there they win over these.\n\n"
                  "commands:\n");
    for (size_t k = 0; k < NCOMMANDS; k++)
        fprintf (out, "  %-12s %s\n", s_commands [k].name, s_commands [k].summary);
    fprintf (out, "\n'switchboard COMMAND --help' tells more about one command.\n");
}

//  The value of --providers FILE (or --providers=FILE, or a prefix of it
//  that getopt_long would take) among a command's arguments, or NULL.
static const char *
s_providers_arg (int argc, char **argv)
{
    for (int k = 2; k < argc && strcmp (argv [k], "--") != 0; k++) {
        if (strncmp (argv [k], "--p", 3) != 0)
            continue;
        size_t n = strcspn (argv [k] + 2, "=");
        if (strncmp (argv [k] + 2, "providers", n) != 0)
            continue;
        if (argv [k][2 + n] == '=')
            return argv [k] + 3 + n;
        return k + 1 < argc ? argv [k + 1] : NULL;
    }
    return NULL;
}

static void
s_free_args (int argc, char ***args_p)
{
    //  getopt reorders the array, never its strings: each is freed once
    for (int k = 0; *args_p && k < argc; k++)
        free ((*args_p) [k]);
    free (*args_p);
    *args_p = NULL;
}

//  Process-wide hardening, before any thread exists (docs/operations.md).
//  Provider keys leave the environment, whose initial block any process
//  of the same user (and every tool the server starts) can read in
//  /proc/PID/environ; URL credentials leave the arguments, which
//  /proc/PID/cmdline shows to everyone. Commands work on a copy of argv.
//  A process that can start the llm actor also makes itself non-dumpable:
//  no core file, and no /proc/PID/mem, environ or ptrace for the other
//  processes of its user (root still reads them, hence the wipe).
//  Returns the copy (free it with s_free_args), NULL when out of memory.
static char **
s_harden (int argc, char **argv)
{
    sb_llm_keys_take (s_providers_arg (argc, argv));
    char **args = calloc ((size_t) argc + 1, sizeof *args);
    for (int k = 0; args && k < argc; k++)
        if (!(args [k] = strdup (argv [k]))) {
            s_free_args (argc, &args);
            return NULL;
        }
    if (!args)
        return NULL;
    //  The redacted URL is cut to the original's length (a short value
    //  turned "***" grows it), and the rest of the string is zeroed so
    //  that no tail of a credential stays behind.
    for (int k = 1; k < argc; k++)
        if (strstr (argv [k], "://")) {
            size_t len = strlen (argv [k]);
            char *clean = malloc (len + 1);
            if (!clean)
                continue;
            sb_log_redact_url (args [k], clean, len + 1);
            memset (argv [k], 0, len);
            memcpy (argv [k], clean, strlen (clean));
            free (clean);
        }
    if (argc > 1 && (strcmp (argv [1], "serve") == 0 || strcmp (argv [1], "run") == 0
                 ||  strcmp (argv [1], "actor") == 0))
        prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
    return args;
}

static int
s_main (int argc, char **argv)
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

//  Global options before the command (`switchboard --data DIR runs`):
//  each becomes the variable that every command already reads when the
//  option is not given after it, so that one given after still wins.
//  Returns how many arguments they took (argv [1..]), or -1 after an
//  error (said).
static int
s_globals (int argc, char **argv)
{
    static const struct { const char *opt, *env; } s_globals_ [] = {
        { "--data", "SWITCHBOARD_DATA" }, { "--connect", "SWITCHBOARD_BUS" },
    };
    int k = 1;
    while (k < argc) {
        size_t g = 0, n = 0;
        for (; g < sizeof s_globals_ / sizeof s_globals_ [0]; g++) {
            n = strlen (s_globals_ [g].opt);
            if (strncmp (argv [k], s_globals_ [g].opt, n) == 0 && (argv [k][n] == 0 || argv [k][n] == '='))
                break;
        }
        if (g == sizeof s_globals_ / sizeof s_globals_ [0])
            break;
        const char *value = argv [k][n] == '=' ? argv [k] + n + 1 : k + 1 < argc ? argv [k + 1] : NULL;
        if (!value || !*value || strlen (value) > 4096) {
            fprintf (stderr, "switchboard: %s takes a value before the command (see 'switchboard --help')\n",
                     s_globals_ [g].opt);
            return -1;
        }
        setenv (s_globals_ [g].env, value, 1);
        k += argv [k][n] == '=' ? 1 : 2;
    }
    return k - 1;
}

int
main (int argc, char **argv)
{
    int globals = s_globals (argc, argv);
    if (globals < 0)
        return 2;
    if (globals > 0) {
        //  the command's arguments start at argv [1] as before
        argv [globals] = argv [0];
        argv += globals;
        argc -= globals;
    }
    char **args = s_harden (argc, argv);
    if (!args) {
        fprintf (stderr, "switchboard: out of memory\n");
        return 1;
    }
    int rc = s_main (argc, args);
    s_free_args (argc, &args);
    return rc;
}

/*  cli/chat_opts.c — `switchboard chat`'s options and its --help
    (cli/chat.h). */
#include "cli/chat.h"
#include "cli/cli.h"
#include "schemas/approval_policy.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_usage =
    "usage: switchboard chat [SESSION] [--workspace DIR] [--title T] [--provider P] [--model M]\n"
    "                        [--approval yolo|auto|interactive] [--max-steps N]\n"
    "                        [--connect EP] [--data DIR]\n"
    "\n"
    "An interactive terminal attached to a session. Type a prompt and the run\n"
    "streams as 'prompt --follow' prints it. When the run asks before a tool\n"
    "call, the call shows inline (the shell command, or the diff a file tool\n"
    "would make) with the choices, one key each (no Enter):\n"
    "  y  approve it            a  approve, and always for this tool and pattern\n"
    "  n  reject it             s  approve identical calls for this session\n"
    "  f  reject it with words for the model\n"
    "/exit (or Ctrl-D) leaves from the question too.\n"
    "An MCP server's question (an elicitation) is asked field by field, each\n"
    "prompt with its type, choices and default (Enter takes it); /decline or\n"
    "/cancel answers the server so, and an answer its schema refuses is asked\n"
    "again.\n"
    "An approval answered elsewhere (another terminal, 'switchboard resolve', a\n"
    "browser, its deadline) leaves the prompt and says who answered.\n"
    "\n"
    "While a run streams, a line you type is queued to run after it, and a line\n"
    "starting with '!' steers the running run (the model reads it before its\n"
    "next step). Ctrl-C cancels the running run; a second Ctrl-C, Ctrl-D or\n"
    "/exit leaves (a run left going goes on in the server).\n"
    "\n"
    "SESSION is a session id, any unique prefix of one, or 'last' (the newest).\n"
    "With none, chat opens a new session on the current folder (or --workspace)\n"
    "with the options of 'sessions new'. Attached to a session whose run is\n"
    "going, it shows that run from its start, then live.\n"
    "\n"
    "Exit status: 0 left with Ctrl-D or /exit, 130 left with Ctrl-C, 1 the\n"
    "server could not be reached, 2 usage error.\n";

int
sb_chat_parse (int argc, char **argv, sb_chat_opts_t *o)
{
    static struct option longopts [] = {
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "workspace", required_argument, 0, 'w' },
        { "title", required_argument, 0, 't' },
        { "provider", required_argument, 0, 'p' },
        { "model", required_argument, 0, 'm' },
        { "approval", required_argument, 0, 'a' },
        { "max-steps", required_argument, 0, 'x' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    memset (o, 0, sizeof *o);
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'c': o->connect = optarg; break;
            case 'd': o->data = optarg; break;
            case 'w': o->workspace = optarg; o->config_opts++; break;
            case 't': o->title = optarg; o->config_opts++; break;
            case 'p': o->provider = optarg; o->config_opts++; break;
            case 'm': o->model = optarg; o->config_opts++; break;
            case 'a': o->approval = optarg; o->config_opts++; break;
            case 'x': {
                char *end;
                o->max_steps = strtoul (optarg, &end, 10);
                if (!*optarg || *end || *optarg == '-' || o->max_steps == 0 || o->max_steps > 10000)
                    return sb_cli_usage ("chat", "--max-steps takes a number from 1 to 10000, not '%s'", optarg);
                o->config_opts++;
                break;
            }
            case 'h': fputs (s_usage, stdout); return -1;
            default: return sb_cli_usage ("chat", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (optind < argc)
        o->session = argv [optind++];
    if (optind < argc)
        return sb_cli_usage ("chat", "unexpected argument '%s'", argv [optind]);
    if (o->session && o->config_opts)
        return sb_cli_usage ("chat", "--workspace, --title, --provider, --model, --approval and --max-steps "
                             "make a new session; give them without SESSION");
    if (o->approval && !sb_policy_mode_ok (o->approval))
        return sb_cli_usage ("chat", "--approval takes yolo, auto or interactive, not '%s'", o->approval);
    if (o->session)
        return sb_cli_id_check ("chat", SB_CLI_SESSION, o->session);
    return 0;
}


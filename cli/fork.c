/*  cli/fork.c — `switchboard fork SESSION --at SEQ [--workspace DIR]`: a
    new session whose history is the source's up to SEQ
    (docs/checkpoints.md).

    session.fork answers with the new record and where it came from; a
    cut that is not a step boundary is refused with the nearest seqs that
    are, which the error names. */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *s_usage =
    "usage: switchboard fork SESSION --at SEQ [--workspace DIR] [--json] [--connect EP] [--data DIR]\n\n"
    "Makes a new session whose history is SESSION's up to SEQ: its tape begins\n"
    "with a session.forked entry, then holds the source's entries up to SEQ at\n"
    "the same seqs, and the model's context of its next run ends at SEQ. SEQ\n"
    "must be a step boundary: not inside a tool call, no approval pending\n"
    "('switchboard events SESSION' shows the seqs; a refused one names the\n"
    "nearest valid ones). The fork starts idle, its queue empty, its usage\n"
    "counters at zero; it keeps the source's config (model, policy, rules).\n"
    "Without --workspace the fork works in the source's workspace. With it, DIR\n"
    "(absent or empty) becomes the fork's own work tree at the checkpoint of\n"
    "SEQ: a git worktree (detached) when the workspace is in git, a copy of the\n"
    "checkpoint's files otherwise.\n"
    "SESSION is a session id, any unique prefix of one, or 'last' (the newest).\n\n"
    "  --at SEQ         the source's last entry the fork keeps\n"
    "  --workspace DIR  a new folder for the fork's work tree\n"
    "  --json           print the reply {session, forked_from} as JSON\n"
    "  --connect EP     the server's bus endpoint (as $SWITCHBOARD_BUS)\n"
    "  --data DIR       the data folder (as $SWITCHBOARD_DATA)\n\n"
    "Exit status: 0 forked, 1 refused or failed, 2 usage error.\n";

typedef struct {
    const char *connect, *data, *workspace;
    bool json, has_at;
    uint64_t at;
} s_opts_t;

static int
s_parse (int argc, char **argv, s_opts_t *o, int *rest)
{
    static struct option longopts [] = {
        { "at", required_argument, 0, 'a' },
        { "workspace", required_argument, 0, 'w' },
        { "json", no_argument, 0, 'j' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    memset (o, 0, sizeof *o);
    optind = 1;
    int c;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'a': {
                char *end = NULL;
                errno = 0;
                unsigned long long v = strtoull (optarg, &end, 10);
                if (errno || !*optarg || *end || optarg [0] == '-' || v == 0)
                    return sb_cli_usage ("fork", "--at takes a seq (a number from 1): %s", optarg);
                o->at = v;
                o->has_at = true;
                break;
            }
            case 'w': o->workspace = optarg; break;
            case 'j': o->json = true; break;
            case 'c': o->connect = optarg; break;
            case 'd': o->data = optarg; break;
            case 'h': fputs (s_usage, stdout); return -1;
            default: return sb_cli_usage ("fork", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (!o->has_at)
        return sb_cli_usage ("fork", "give --at SEQ");
    if (o->workspace && !*o->workspace)
        return sb_cli_usage ("fork", "--workspace takes a folder");
    if (argc - optind != 1)
        return sb_cli_usage ("fork", "give one SESSION");
    *rest = optind;
    return 0;
}

int
sb_cmd_fork (int argc, char **argv)
{
    s_opts_t o;
    int rest = 0, rc = s_parse (argc, argv, &o, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    //  The server resolves nothing against its own folder: a relative
    //  DIR is the person's, from here.
    char ws [PATH_MAX];
    if (o.workspace && o.workspace [0] != '/') {
        char cwd [PATH_MAX];
        if (!getcwd (cwd, sizeof cwd) || snprintf (ws, sizeof ws, "%s/%s", cwd, o.workspace) >= (int) sizeof ws)
            return sb_cli_fail ("fork", "cannot make %s an absolute path", o.workspace);
        o.workspace = ws;
    }
    char id [SB_ULID_LEN + 1];
    sb_bus_t *bus = sb_cli_session_open ("fork", argv [rest], o.connect, o.data, id, &rc);
    if (!bus)
        return rc;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", id);
    sb_enc_kuint (e, "at", o.at);
    sb_enc_kstr_opt (e, "workspace", o.workspace);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("fork", bus, "session.fork", b, len, 60000);
    sb_enc_destroy (&e);
    rc = 1;
    if (reply) {
        const sb_val_t *s = sb_get_map (reply->body, "session");
        if (o.json)
            sb_cli_print_json (reply->body);
        else
            printf ("forked %s at seq %llu: session %s, workspace %s\n", id, (unsigned long long) o.at,
                    sb_get_str (s, "session_id"), sb_get_str (s, "workspace"));
        rc = 0;
        sb_msg_destroy (&reply);
    }
    sb_bus_destroy (&bus);
    return rc;
}

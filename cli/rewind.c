/*  cli/rewind.c — `switchboard rewind SESSION --to SEQ | --undo`: the
    session's work tree put back to a checkpoint, and its model context
    cut at SEQ (docs/checkpoints.md).

    session.rewind starts a run of kind rewind; the command follows it as
    `compact` follows a compaction, and its session.rewound entry says
    what was restored, removed and left alone. */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_usage =
    "usage: switchboard rewind SESSION --to SEQ [--code | --conversation] [--json] [--connect EP] [--data DIR]\n"
    "       switchboard rewind SESSION --undo [--json] [--connect EP] [--data DIR]\n\n"
    "Puts the session back as it was at SEQ: its work tree and its conversation\n"
    "(both by default). The conversation: the context the model sees at its next\n"
    "run ends at SEQ; the entries after it stay on the tape ('events' shows them)\n"
    "but no model reads them again. The work tree: the latest checkpoint at or before SEQ\n"
    "('switchboard checkpoints SESSION' lists them): files changed or deleted\n"
    "since are written back, files made since are removed (a symlink is removed\n"
    "itself, never followed). Files the checkpoint skipped as too large are left\n"
    "as they are and named. The tape keeps every entry; the rewind appends a\n"
    "session.rewound entry, which also names the tool calls after SEQ that may\n"
    "have had effects outside the workspace: those are not undone. Your git index\n"
    "and HEAD are not touched. It runs as a run of its own: refused while another\n"
    "run of the session is active.\n"
    "--undo puts back what the last rewind undid (the work tree as it found it,\n"
    "the entries it cut from the conversation), unless a prompt was sent since.\n"
    "SESSION is a session id, any unique prefix of one, or 'last' (the newest).\n\n"
    "  --to SEQ       the seq to go back to (a checkpoint's seq, or any later one)\n"
    "  --code         the work tree only: the conversation goes on with everything\n"
    "  --conversation the conversation only: the work tree is not touched\n"
    "  --undo         undo the session's last rewind\n"
    "  --json         the run's tape entries as JSON lines\n"
    "  --connect EP   the server's bus endpoint (as $SWITCHBOARD_BUS)\n"
    "  --data DIR     the data folder (as $SWITCHBOARD_DATA)\n\n"
    "Exit status: 0 rewound, 1 refused or failed, 2 usage error.\n";

typedef struct {
    const char *connect, *data;
    bool json, undo, has_to, code_only, conversation_only;
    uint64_t to;
} s_opts_t;

static int
s_parse (int argc, char **argv, s_opts_t *o, int *rest)
{
    static struct option longopts [] = {
        { "to", required_argument, 0, 't' },
        { "undo", no_argument, 0, 'u' },
        { "code", no_argument, 0, 'C' },
        { "conversation", no_argument, 0, 'V' },
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
            case 't': {
                char *end = NULL;
                errno = 0;
                unsigned long long v = strtoull (optarg, &end, 10);
                if (errno || !*optarg || *end || optarg [0] == '-')
                    return sb_cli_usage ("rewind", "--to takes a seq (a number): %s", optarg);
                o->to = v;
                o->has_to = true;
                break;
            }
            case 'u': o->undo = true; break;
            case 'C': o->code_only = true; break;
            case 'V': o->conversation_only = true; break;
            case 'j': o->json = true; break;
            case 'c': o->connect = optarg; break;
            case 'd': o->data = optarg; break;
            case 'h': fputs (s_usage, stdout); return -1;
            default: return sb_cli_usage ("rewind", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (o->undo == o->has_to)
        return sb_cli_usage ("rewind", "give --to SEQ or --undo (one of them)");
    if (o->code_only && o->conversation_only)
        return sb_cli_usage ("rewind", "--code and --conversation exclude each other (give neither for both)");
    if (o->undo && (o->code_only || o->conversation_only))
        return sb_cli_usage ("rewind", "--undo undoes what the last rewind did: it takes no --code or --conversation");
    if (argc - optind != 1)
        return sb_cli_usage ("rewind", "give one SESSION");
    *rest = optind;
    return 0;
}

int
sb_cmd_rewind (int argc, char **argv)
{
    s_opts_t o;
    int rest = 0, rc = s_parse (argc, argv, &o, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    char id [SB_ULID_LEN + 1];
    sb_bus_t *bus = sb_cli_session_open ("rewind", argv [rest], o.connect, o.data, id, &rc);
    if (!bus)
        return rc;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", id);
    if (o.undo)
        sb_enc_kbool (e, "undo", true);
    else {
        sb_enc_kuint (e, "to_seq", o.to);
        if (o.code_only)
            sb_enc_kbool (e, "conversation", false);
        if (o.conversation_only)
            sb_enc_kbool (e, "code", false);
    }
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("rewind", bus, "session.rewind", b, len, 15000);
    sb_enc_destroy (&e);
    rc = 1;
    if (reply) {
        rc = sb_cli_follow_run ("rewind", bus, o.connect, o.data, sb_get_map (reply->body, "run"), o.json, true);
        sb_msg_destroy (&reply);
    }
    sb_bus_destroy (&bus);
    return rc;
}

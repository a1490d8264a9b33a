/*  cli/checkpoints.c — `switchboard checkpoints SESSION`: the work tree's
    checkpoints of a session, read from its tape (docs/checkpoints.md).

    The list has no bus type of its own: the tape holds the checkpoint
    entries, and session.events pages through it (cli/follow.h), kept by
    kind here. `--diff A B` asks the exec actor, which holds the
    workspace's object store, for the diff between two of them
    (exec.checkpoint_diff). */
#include "cli/cli.h"
#include "cli/follow.h"
#include "schemas/json.h"

#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *s_usage =
    "usage: switchboard checkpoints SESSION [--json] [--connect EP] [--data DIR]\n"
    "       switchboard checkpoints SESSION --diff A B [--stat] [--json] [...]\n\n"
    "Lists the session's checkpoints: the work tree recorded as a git tree before\n"
    "each run's first step and after each step that ran a tool that is not\n"
    "read-only (docs/checkpoints.md). One line each: the seq of the step's last\n"
    "entry, the run, the time (UTC), how many paths changed since the previous\n"
    "checkpoint and the first of them. Files over SWITCHBOARD_CHECKPOINT_MAX_FILE\n"
    "are in no tree: they are named, with their size, after 'skipped' (--json\n"
    "also gives their hash).\n"
    "SESSION is a session id, any unique prefix of one, or 'last' (the newest).\n\n"
    "  --diff A B     the diff between the checkpoints at A and B (each the latest\n"
    "                 checkpoint at or before that seq): git's unified diff, paths\n"
    "                 relative to the repository's top, at most 1000 files and 4 MiB\n"
    "  --stat         with --diff: one line a file (status, +added -removed, path)\n"
    "  --json         one JSON object per checkpoint: seq, ts and the entry's body;\n"
    "                 with --diff, the exec.checkpoint_diff.ok reply\n"
    "  --connect EP   the server's bus endpoint (as $SWITCHBOARD_BUS)\n"
    "  --data DIR     the data folder (as $SWITCHBOARD_DATA)\n\n"
    "Exit status: 0 listed (also none), 1 the server failed (a seq before the\n"
    "first checkpoint, a tree no longer there), 2 usage error.\n";

static void
s_print_text (const sb_val_t *ev)
{
    const sb_val_t *body = sb_get_map (ev, "body");
    time_t t = (time_t) (sb_get_uint (ev, "ts", 0) / 1000);
    struct tm tm;
    char when [32] = "-";
    if (gmtime_r (&t, &tm))
        strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const sb_val_t *changed = sb_get_array (body, "changed");
    uint64_t files = sb_get_uint (body, "files", changed ? changed->len : 0);
    printf ("%-6llu %-26s %s  %llu file%s", (unsigned long long) sb_get_uint (body, "seq_of", 0),
            sb_get_str (body, "run_id") ? sb_get_str (body, "run_id") : "-", when,
            (unsigned long long) files, files == 1 ? "" : "s");
    if (sb_get_bool (body, "first", false))
        printf (" (first)");
    //  control bytes in a path are the workspace's, not ours to print
    for (uint32_t k = 0; changed && k < changed->len && k < 8; k++) {
        const sb_val_t *p = sb_array_at (changed, k);
        const char *s = p && p->type == SB_V_STR ? p->v.s : "?";
        putchar (k ? ',' : ' ');
        for (uint32_t i = 0; p && p->type == SB_V_STR && i < p->len; i++)
            putchar ((unsigned char) s [i] < 0x20 || s [i] == 0x7f ? '?' : s [i]);
    }
    if (files > 8)
        printf (", ...");
    const sb_val_t *skipped = sb_get_array (body, "skipped");
    for (uint32_t k = 0; skipped && k < skipped->len; k++) {
        const sb_val_t *s = sb_array_at (skipped, k);
        printf ("%s%s (%llu bytes)", k ? ", " : "; skipped ", sb_get_str (s, "path") ? sb_get_str (s, "path") : "?",
                (unsigned long long) sb_get_uint (s, "size", 0));
    }
    putchar ('\n');
}

static int
s_each (const sb_val_t *ev, void *arg)
{
    sb_tape_list_t *self = arg;
    const char *kind = sb_get_str (ev, "kind");
    if (!kind || strcmp (kind, "checkpoint") != 0)
        return 0;
    if (self->json) {
        json_t *o = json_object ();
        json_t *body = sb_json_from_val (sb_get_map (ev, "body"));
        char *line = NULL;
        if (o && body) {
            json_object_set_new (o, "seq", json_integer ((json_int_t) sb_get_uint (ev, "seq", 0)));
            json_object_set_new (o, "ts", json_integer ((json_int_t) sb_get_uint (ev, "ts", 0)));
            json_object_set_new (o, "checkpoint", body);
            body = NULL;
            line = json_dumps (o, JSON_COMPACT);
        }
        if (line)
            printf ("%s\n", line);
        free (line);
        json_decref (body);
        json_decref (o);
    }
    else {
        if (self->count == 0)
            printf ("%-6s %-26s %-20s  %s\n", "SEQ", "RUN", "TIME", "CHANGED");
        s_print_text (ev);
    }
    self->count++;
    return 0;
}

//  A seq given on the command line: digits only, at most SB_COUNT_MAX.
static int
s_seq_arg (const char *arg, uint64_t *seq)
{
    char *end = NULL;
    if (!arg || !*arg || strspn (arg, "0123456789") != strlen (arg) || strlen (arg) > 16)
        return -1;
    *seq = strtoull (arg, &end, 10);
    return *seq <= SB_COUNT_MAX ? 0 : -1;
}

//  Prints a path or a diff as the workspace holds it, control bytes but
//  tabs and newlines as '?': a file's content is not ours to send to a
//  terminal.
static void
s_print_bytes (const sb_val_t *v)
{
    for (uint32_t i = 0; v && v->type == SB_V_STR && i < v->len; i++) {
        unsigned char c = (unsigned char) v->v.s [i];
        putchar ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : c);
    }
}

static int
s_diff (sb_bus_t *bus, const char *sid, uint64_t from, uint64_t to, bool json, bool stat)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return sb_cli_fail ("checkpoints", "out of memory");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sid);
    sb_enc_kuint (e, "from_seq", from);
    sb_enc_kuint (e, "to_seq", to);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("checkpoints", bus, "exec.checkpoint_diff", b, len, 60000);
    sb_enc_destroy (&e);
    if (!reply)
        return 1;
    const sb_val_t *body = reply->body;
    if (json)
        sb_cli_print_json (body);
    else {
        const sb_val_t *files = sb_get_array (body, "files");
        printf ("checkpoint %llu -> %llu (%s): %u file%s\n",
                (unsigned long long) sb_get_uint (sb_get_map (body, "from"), "seq_of", 0),
                (unsigned long long) sb_get_uint (sb_get_map (body, "to"), "seq_of", 0),
                sb_get_str (body, "store") ? sb_get_str (body, "store") : "?", files ? files->len : 0,
                files && files->len == 1 ? "" : "s");
        for (uint32_t k = 0; files && k < files->len; k++) {
            const sb_val_t *f = sb_array_at (files, k);
            if (stat) {
                const char *st = sb_get_str (f, "status");
                printf ("%c +%llu -%llu ", st ? (char) (st [0] - 'a' + 'A') : '?',
                        (unsigned long long) sb_get_uint (f, "additions", 0),
                        (unsigned long long) sb_get_uint (f, "deletions", 0));
                if (sb_get_str (f, "old_path")) {
                    s_print_bytes (sb_get (f, "old_path"));
                    printf (" -> ");
                }
                s_print_bytes (sb_get (f, "path"));
                putchar ('\n');
            }
            else
                s_print_bytes (sb_get (f, "diff"));
        }
        if (sb_get_bool (body, "truncated", false))
            printf ("(cut at the server's limit: 1000 files or 4 MiB of diff)\n");
    }
    sb_msg_destroy (&reply);
    return 0;
}

int
sb_cmd_checkpoints (int argc, char **argv)
{
    static struct option longopts [] = {
        { "json", no_argument, 0, 'j' },
        { "diff", required_argument, 0, 'D' },
        { "stat", no_argument, 0, 's' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *connect = NULL, *data = NULL, *diff_from = NULL;
    bool stat = false;
    sb_tape_list_t list = { 0 };
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'j': list.json = true; break;
            case 'D': diff_from = optarg; break;
            case 's': stat = true; break;
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 'h': fputs (s_usage, stdout); return 0;
            default: return sb_cli_usage ("checkpoints", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    uint64_t from = 0, to = 0;
    if (diff_from) {
        if (argc - optind != 2)
            return sb_cli_usage ("checkpoints", "--diff takes two seqs: SESSION --diff A B");
        if (s_seq_arg (diff_from, &from) != 0 || s_seq_arg (argv [optind + 1], &to) != 0)
            return sb_cli_usage ("checkpoints", "--diff A B: seqs are whole numbers from 0 to %llu",
                                 (unsigned long long) SB_COUNT_MAX);
    }
    else
    if (stat)
        return sb_cli_usage ("checkpoints", "--stat goes with --diff");
    else
    if (argc - optind != 1)
        return sb_cli_usage ("checkpoints", "give one SESSION");
    int rc;
    char sid [SB_ULID_LEN + 1];
    sb_bus_t *bus = sb_cli_session_open ("checkpoints", argv [optind], connect, data, sid, &rc);
    if (!bus)
        return rc;
    if (diff_from) {
        rc = s_diff (bus, sid, from, to, list.json, stat);
        sb_bus_destroy (&bus);
        return rc;
    }
    rc = sb_follow (bus, NULL, sid, 0, false, s_each, NULL, &list) < 0 ? 1 : 0;
    if (rc == 0 && !list.json && list.count == 0)
        printf ("no checkpoints\n");
    sb_bus_destroy (&bus);
    return rc;
}

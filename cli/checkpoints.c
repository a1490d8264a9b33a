/*  cli/checkpoints.c — `switchboard checkpoints SESSION`: the work tree's
    checkpoints of a session, read from its tape (docs/checkpoints.md).

    No bus type of its own: the tape holds the checkpoint entries, and
    session.events pages through it (cli/follow.h), kept by kind here. */
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
    "usage: switchboard checkpoints SESSION [--json] [--connect EP] [--data DIR]\n\n"
    "Lists the session's checkpoints: the work tree recorded as a git tree before\n"
    "each run's first step and after each step that ran a tool that is not\n"
    "read-only (docs/checkpoints.md). One line each: the seq of the step's last\n"
    "entry, the run, the time (UTC), how many paths changed since the previous\n"
    "checkpoint and the first of them. Files over SWITCHBOARD_CHECKPOINT_MAX_FILE\n"
    "are in no tree: they are named, with their size, after 'skipped' (--json\n"
    "also gives their hash).\n"
    "SESSION is a session id, any unique prefix of one, or 'last' (the newest).\n\n"
    "  --json         one JSON object per checkpoint: seq, ts and the entry's body\n"
    "  --connect EP   the server's bus endpoint (as $SWITCHBOARD_BUS)\n"
    "  --data DIR     the data folder (as $SWITCHBOARD_DATA)\n\n"
    "Exit status: 0 listed (also none), 1 the server failed, 2 usage error.\n";

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

int
sb_cmd_checkpoints (int argc, char **argv)
{
    sb_tape_list_t list = { 0 };
    return sb_tape_list_cmd ("checkpoints", argc, argv, s_usage, s_each, &list, "no checkpoints");
}

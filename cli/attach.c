/*  cli/attach.c — `switchboard attach SESSION FILE`: the person attaches
    a file to a session; it becomes an artifact (docs/images.md).

    blob.put stores the bytes (its caps and quotas decide, and say why
    when they refuse), then session.attach appends the `artifact` entry
    that `switchboard artifacts` lists with the origin "person". */
#include "cli/cli.h"
#include "cli/images.h"
#include "schemas/json.h"

#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_usage =
    "usage: switchboard attach SESSION FILE [--name NAME] [--json] [--connect EP] [--data DIR]\n\n"
    "Attaches FILE to the session as an artifact: the server stores its bytes in\n"
    "the blob store (at most serve --blob-max bytes, within the session's and the\n"
    "server's quotas) and appends an 'artifact' entry to the tape, which\n"
    "'switchboard artifacts' lists with the origin 'person'. Prints the sha256,\n"
    "type, size and the entry's seq.\n"
    "SESSION is a session id, any unique prefix of one, or 'last' (the newest).\n\n"
    "  --name NAME    the name the artifact shows (default: FILE's base name)\n"
    "  --json         the reply as one JSON object: seq and artifact\n"
    "  --connect EP   the server's bus endpoint (as $SWITCHBOARD_BUS)\n"
    "  --data DIR     the data folder (as $SWITCHBOARD_DATA)\n\n"
    "Exit status: 0 attached, 1 the file cannot be read, is too big, the session is\n"
    "unknown or closed, or the server failed, 2 usage error.\n";

int
sb_cmd_attach (int argc, char **argv)
{
    static struct option longopts [] = {
        { "name", required_argument, 0, 'n' },
        { "json", no_argument, 0, 'j' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *connect = NULL, *data = NULL, *name = NULL;
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'n': name = optarg; break;
            case 'j': json = true; break;
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 'h': fputs (s_usage, stdout); return 0;
            default: return sb_cli_usage ("attach", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (argc - optind != 2)
        return sb_cli_usage ("attach", "give a SESSION and a FILE");
    const char *file = argv [optind + 1];
    if (name && (!*name || strlen (name) > 256))
        return sb_cli_usage ("attach", "--name must be 1 to 256 bytes");
    int rc;
    char sid [SB_ULID_LEN + 1];
    sb_bus_t *bus = sb_cli_session_open ("attach", argv [optind], connect, data, sid, &rc);
    if (!bus)
        return rc;
    sb_msg_t *put = NULL;
    rc = sb_cli_put_file ("attach", bus, sid, file, &put);
    const char *hex = put ? sb_get_str (sb_get_map (put->body, "blob"), "sha256") : NULL;
    sb_msg_t *reply = NULL;
    if (!rc && hex) {
        char copy [4096];
        snprintf (copy, sizeof copy, "%s", file);
        sb_enc_t *e = sb_enc_new ();
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", sid);
        sb_enc_kstr (e, "sha256", hex);
        sb_enc_kstr (e, "name", name ? name : basename (copy));
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        reply = sb_cli_call ("attach", bus, "session.attach", b, len, 30000);
        sb_enc_destroy (&e);
    }
    rc = 1;
    const sb_val_t *ref = reply ? sb_get_map (reply->body, "artifact") : NULL;
    if (ref) {
        rc = 0;
        uint64_t seq = sb_get_uint (reply->body, "seq", 0);
        if (json) {
            json_t *o = sb_json_from_val (reply->body);
            char *line = o ? json_dumps (o, JSON_COMPACT) : NULL;
            if (line)
                printf ("%s\n", line);
            free (line);
            json_decref (o);
        }
        else
            printf ("attached %s  %s  %llu bytes  %s  seq %llu\n", sb_get_str (ref, "sha256"),
                    sb_get_str (ref, "mime") ? sb_get_str (ref, "mime") : "?",
                    (unsigned long long) sb_get_uint (ref, "bytes", 0),
                    sb_get_str (ref, "name") ? sb_get_str (ref, "name") : "-", (unsigned long long) seq);
    }
    sb_msg_destroy (&reply);
    sb_msg_destroy (&put);
    sb_bus_destroy (&bus);
    return rc;
}

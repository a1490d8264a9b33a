/*  cli/artifacts.c — `switchboard artifacts SESSION` and `switchboard
    artifact get HASH`: the blobs a session's tape references, and one of
    them downloaded (docs/images.md).

    No list type of its own: the `prompt` entries on the tape hold the
    references (with their seq and run: where each came from), and
    session.events pages through them (cli/follow.h); blob.get reads the
    bytes, for a session that holds the blob. */
#include "cli/cli.h"
#include "cli/follow.h"
#include "common/blob.h"
#include "schemas/json.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_list_usage =
    "usage: switchboard artifacts SESSION [--json] [--connect EP] [--data DIR]\n\n"
    "Lists the images and files the session's tape references, oldest first: one\n"
    "line each with its sha256, type, size, name and origin (the tape entry that\n"
    "referenced it, its seq and run: a prompt, or the tool.result of view_image\n"
    "or attach_file, or\n"
    "'person' for a file attached with 'switchboard attach', "
    "with its call_id in --json). An image sent to models downscaled is\n"
    "followed by the copy they got, marked 'sent'. The bytes are in the server's\n"
    "blob store; 'switchboard artifact get HASH' downloads one.\n"
    "SESSION is a session id, any unique prefix of one, or 'last' (the newest).\n\n"
    "  --json         one JSON object per blob: sha256, mime, bytes, name, width,\n"
    "                 height, origin, seq, run_id, call_id, sent_of (the original's hash)\n"
    "  --connect EP   the server's bus endpoint (as $SWITCHBOARD_BUS)\n"
    "  --data DIR     the data folder (as $SWITCHBOARD_DATA)\n\n"
    "Exit status: 0 listed (also none), 1 the server failed, 2 usage error.\n";

static const char *s_get_usage =
    "usage: switchboard artifact get HASH [-o FILE] [--session SESSION] [--connect EP] [--data DIR]\n\n"
    "Downloads the blob whose sha256 is HASH (64 hex digits) to FILE, or to\n"
    "standard output without -o. The server gives a blob only to a request that\n"
    "names a session holding it: --session (default 'last', the newest session).\n\n"
    "Exit status: 0 written, 1 not found or the server failed, 2 usage error.\n";

static void
s_print (sb_tape_list_t *self, const sb_val_t *ev, const sb_val_t *ref, const char *sent_of)
{
    const char *kind = sb_get_str (ev, "kind");
    if (strcmp (kind, "artifact") == 0)
        kind = "person";
    const char *run = sb_get_str (ev, "run_id");
    uint64_t seq = sb_get_uint (ev, "seq", 0);
    const char *name = sb_get_str (ref, "name");
    if (self->json) {
        json_t *o = sb_json_from_val (ref);
        if (o) {
            json_object_del (o, "sent");
            json_object_set_new (o, "origin", json_string (sent_of ? "sent" : kind));
            json_object_set_new (o, "seq", json_integer ((json_int_t) seq));
            if (run)
                json_object_set_new (o, "run_id", json_string (run));
            const char *call = sb_get_str (sb_get_map (ev, "body"), "call_id");
            if (call && strcmp (kind, "tool.result") == 0)
                json_object_set_new (o, "call_id", json_string (call));
            if (sent_of)
                json_object_set_new (o, "sent_of", json_string (sent_of));
            char *line = json_dumps (o, JSON_COMPACT);
            if (line)
                printf ("%s\n", line);
            free (line);
            json_decref (o);
        }
    }
    else {
        if (self->count == 0)
            printf ("%-64s  %-24s %10s  %-24s %s\n", "SHA256", "TYPE", "BYTES", "NAME", "ORIGIN");
        char origin [96];
        snprintf (origin, sizeof origin, "%s seq %llu%s%.26s", sent_of ? "sent" : kind, (unsigned long long) seq,
                  run ? " run " : "", run ? run : "");
        char dims [32] = "";
        if (sb_get_uint (ref, "width", 0))
            snprintf (dims, sizeof dims, " %llux%llu", (unsigned long long) sb_get_uint (ref, "width", 0),
                      (unsigned long long) sb_get_uint (ref, "height", 0));
        char type [64];
        snprintf (type, sizeof type, "%s%s", sb_get_str (ref, "mime") ? sb_get_str (ref, "mime") : "?", dims);
        printf ("%-64s  %-24s %10llu  %-24.64s %s\n", sb_get_str (ref, "sha256") ? sb_get_str (ref, "sha256") : "?",
                type, (unsigned long long) sb_get_uint (ref, "bytes", 0), name ? name : "-", origin);
    }
    self->count++;
}

static int
s_each (const sb_val_t *ev, void *arg)
{
    //  a prompt's images, and what view_image showed the model
    const char *kind = sb_get_str (ev, "kind");
    if (!kind || (strcmp (kind, "prompt") != 0 && strcmp (kind, "tool.result") != 0 && strcmp (kind, "artifact") != 0))
        return 0;
    const sb_val_t *images = sb_get_array (sb_get_map (ev, "body"), "images");
    for (uint32_t k = 0; images && k < images->len; k++) {
        const sb_val_t *ref = sb_array_at (images, k);
        s_print (arg, ev, ref, NULL);
        const sb_val_t *sent = sb_get_map (ref, "sent");
        if (sent)
            s_print (arg, ev, sent, sb_get_str (ref, "sha256"));
    }
    //  what attach_file made an artifact, and what the person attached
    //  (an `artifact` entry, shown with the origin "person")
    const sb_val_t *artifact = sb_get_map (sb_get_map (ev, "body"), "artifact");
    if (artifact)
        s_print (arg, ev, artifact, NULL);
    return 0;
}

int
sb_cmd_artifacts (int argc, char **argv)
{
    sb_tape_list_t list = { 0 };
    return sb_tape_list_cmd ("artifacts", argc, argv, s_list_usage, s_each, &list, "no artifacts");
}

int
sb_cmd_artifact (int argc, char **argv)
{
    static struct option longopts [] = {
        { "output", required_argument, 0, 'o' },
        { "session", required_argument, 0, 's' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *connect = NULL, *data = NULL, *out = NULL, *session = "last";
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "ho:", longopts, NULL)) != -1) {
        switch (c) {
            case 'o': out = optarg; break;
            case 's': session = optarg; break;
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 'h': fputs (s_get_usage, stdout); return 0;
            default: return sb_cli_usage ("artifact", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (argc - optind != 2 || strcmp (argv [optind], "get") != 0)
        return sb_cli_usage ("artifact", "give get and a HASH");
    const char *hex = argv [optind + 1];
    if (!sb_blob_hex_ok (hex))
        return sb_cli_usage ("artifact", "HASH must be 64 lowercase hex digits (from 'switchboard artifacts')");
    int rc;
    char sid [SB_ULID_LEN + 1];
    sb_bus_t *bus = sb_cli_session_open ("artifact", session, connect, data, sid, &rc);
    if (!bus)
        return rc;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sid);
    sb_enc_kstr (e, "sha256", hex);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("artifact", bus, "blob.get", b, len, 60000);
    sb_enc_destroy (&e);
    rc = 1;
    size_t dlen = 0;
    const char *bytes = reply ? sb_get_bin (reply->body, "data", &dlen) : NULL;
    if (bytes) {
        FILE *f = out ? fopen (out, "wb") : stdout;
        if (!f)
            sb_cli_fail ("artifact", "cannot write %s", out);
        else {
            bool ok = fwrite (bytes, 1, dlen, f) == dlen;
            ok = (out ? fclose (f) == 0 : fflush (f) == 0) && ok;
            if (!ok)
                sb_cli_fail ("artifact", "cannot write %s", out ? out : "standard output");
            rc = ok ? 0 : 1;
        }
    }
    sb_msg_destroy (&reply);
    sb_bus_destroy (&bus);
    return rc;
}

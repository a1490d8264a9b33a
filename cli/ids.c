/*  cli/ids.c — session and run ids as people write them.

    A ULID is 26 characters, too long to type. As git and docker do with
    their hashes, any unique prefix names the object, and `last` names the
    newest. A full id is used as is, with no call, so that scripts pay
    nothing. The server does the matching (id_prefix on session.list and
    run.list, a range scan over its id-ordered keys), so a prefix costs
    one call whatever the number of sessions. */
#include "cli/cli.h"

#include <ctype.h>
#include <string.h>

//  How many matches an ambiguous prefix lists.
#define MATCHES_SHOWN 10

static const char *
s_noun (sb_cli_id_kind_t kind)
{
    return kind == SB_CLI_SESSION ? "session" : "run";
}

//  Crockford base32 is read in either case; ids are stored in upper case.
static void
s_upper (const char *arg, char *out, size_t n)
{
    size_t k = 0;
    for (; arg [k] && k + 1 < n; k++)
        out [k] = (char) toupper ((unsigned char) arg [k]);
    out [k] = 0;
}

int
sb_cli_id_check (const char *cmd, sb_cli_id_kind_t kind, const char *arg)
{
    char id [SB_ULID_LEN + 2];
    if (strcmp (arg, "last") == 0)
        return 0;
    s_upper (arg, id, sizeof id);
    if (strlen (arg) > SB_ULID_LEN || !sb_ulid_prefix_valid (id))
        return sb_cli_usage (cmd, "'%s' is not a %s id: ids are up to 26 characters of 0-9 and A-Z "
                             "(any unique prefix will do, or 'last')", arg, s_noun (kind));
    return 0;
}

//  One list call: the first `limit` sessions or runs whose id starts with
//  `prefix` (all when NULL). Returns the reply, or NULL after printing.
static sb_msg_t *
s_list (const char *cmd, sb_bus_t *bus, sb_cli_id_kind_t kind, const char *prefix, uint32_t limit)
{
    const char *type = kind == SB_CLI_SESSION ? "session.list" : "run.list";
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr_opt (e, "id_prefix", prefix);
    sb_enc_kuint (e, "limit", limit);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call (cmd, bus, type, b, len, 15000);
    sb_enc_destroy (&e);
    return reply;
}

static const char *
s_id_of (sb_cli_id_kind_t kind, const sb_val_t *r)
{
    const char *id = sb_get_str (r, kind == SB_CLI_SESSION ? "session_id" : "run_id");
    return id ? id : "";
}

int
sb_cli_resolve (const char *cmd, sb_bus_t *bus, sb_cli_id_kind_t kind, const char *arg,
                char out [SB_ULID_LEN + 1])
{
    int rc = sb_cli_id_check (cmd, kind, arg);
    if (rc)
        return rc;
    char prefix [SB_ULID_LEN + 1];
    s_upper (arg, prefix, sizeof prefix);
    if (strlen (prefix) == SB_ULID_LEN) {
        memcpy (out, prefix, SB_ULID_LEN + 1);
        return 0;
    }
    bool last = strcmp (arg, "last") == 0;
    //  Both lists are newest first, so `last` is the first row.
    sb_msg_t *reply = s_list (cmd, bus, kind, last ? NULL : prefix, last ? 1 : MATCHES_SHOWN + 1);
    if (!reply)
        return 1;
    const sb_val_t *list = sb_get_array (reply->body, kind == SB_CLI_SESSION ? "sessions" : "runs");
    uint32_t n = list ? list->len : 0;
    if (n == 0)
        rc = last ? sb_cli_fail_code (cmd, "not_found", "there is no %s yet, so 'last' names none", s_noun (kind))
                  : sb_cli_fail_code (cmd, "not_found", "no %s id starts with %s", s_noun (kind), prefix);
    else
    if (n == 1 || last)
        snprintf (out, SB_ULID_LEN + 1, "%s", s_id_of (kind, sb_array_at (list, 0)));
    else {
        //  One message, so that --json gives one object; people get the
        //  matches one per line, as git lists an ambiguous hash's.
        char msg [4096];
        size_t w = (size_t) snprintf (msg, sizeof msg, "%s id prefix %s is ambiguous; it matches:",
                                      s_noun (kind), prefix);
        for (uint32_t k = 0; k < n && k < MATCHES_SHOWN && w < sizeof msg; k++) {
            const sb_val_t *r = sb_array_at (list, k);
            const char *what = kind == SB_CLI_SESSION
                ? (sb_get_str (r, "title") ? sb_get_str (r, "title") : sb_get_str (r, "workspace"))
                : sb_get_str (r, "status");
            w += (size_t) snprintf (msg + w, sizeof msg - w, "\n  %s  %.60s", s_id_of (kind, r),
                                    what ? what : "");
        }
        if (n > MATCHES_SHOWN && w < sizeof msg)
            snprintf (msg + w, sizeof msg - w, "\n  ... and more");
        sb_cli_fail_code (cmd, "usage", "%s", msg);
        rc = 2;
    }
    sb_msg_destroy (&reply);
    return rc;
}

sb_bus_t *
sb_cli_session_open (const char *cmd, const char *arg, const char *connect, const char *data,
                     char sid [SB_ULID_LEN + 1], int *rc)
{
    if ((*rc = sb_cli_id_check (cmd, SB_CLI_SESSION, arg)) != 0)
        return NULL;
    sb_bus_t *bus = sb_cli_connect (cmd, connect, data);
    if (!bus) {
        *rc = 1;
        return NULL;
    }
    if ((*rc = sb_cli_resolve (cmd, bus, SB_CLI_SESSION, arg, sid)) != 0)
        sb_bus_destroy (&bus);
    return bus;
}

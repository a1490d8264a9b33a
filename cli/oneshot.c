/*  cli/oneshot.c — see oneshot.h. */
#include "cli/oneshot.h"
#include "cli/images.h"
#include "cli/changes.h"
#include "cli/cli.h"
#include "cli/follow.h"
#include "bus/broker.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define TITLE_MAX 200           /* the session title: the goal's first line, cut */

typedef struct {
    sb_oneshot_t *o;
    sb_changes_t *changes;
} oneshot_run_t;

static sb_msg_t *
s_call (sb_bus_t *bus, const char *type, sb_enc_t *e)
{
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    return sb_cli_call ("run", bus, type, b, len, 15000);
}

/*  The goal's first line, at most TITLE_MAX bytes, cut on a UTF-8
    boundary: a long goal must not make session.create refuse the title. */
static void
s_title (const char *goal, char *out, size_t n)
{
    size_t len = strcspn (goal, "\n");
    if (len > TITLE_MAX)
        len = TITLE_MAX;
    while (len > 0 && ((unsigned char) goal [len] & 0xc0) == 0x80 && goal [len] != 0)
        len--;
    snprintf (out, n, "%.*s", (int) len, goal);
}

static void
s_print_changes (void *arg)
{
    oneshot_run_t *r = arg;
    if (r->changes && !r->o->json)
        sb_changes_print (r->changes, stdout);
}

/*  Creates the session and the run on `bus`, then follows the run. */
static int
s_drive (sb_oneshot_t *o, sb_bus_t *bus, const char *pub, const char *data_dir)
{
    oneshot_run_t r = { .o = o };
    /* taken before the run starts, so earlier edits are not claimed */
    if (!o->json)
        r.changes = sb_changes_new (o->repo, data_dir);
    char title [TITLE_MAX + 1];
    s_title (o->goal, title, sizeof title);
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "workspace", o->repo);
    sb_enc_kstr (e, "title", title);
    sb_enc_kstr (e, "approval_policy", o->approval);
    if (o->max_steps)
        sb_enc_kuint (e, "max_steps", o->max_steps);
    sb_cli_budget_encode (e, &o->budget);
    sb_enc_map_close (e);
    sb_msg_t *sess = s_call (bus, "session.create", e);
    int rc = 1;
    if (sess) {
        char sid [33];
        snprintf (sid, sizeof sid, "%s", sb_get_str (sb_get_map (sess->body, "session"), "session_id"));
        sb_enc_reset (e);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", sid);
        sb_enc_kstr (e, "input", o->goal);
        //  the images' references as blob.put gave them (with the
        //  downscaled copy when there is one): run.request takes them so
        int bad = sb_cli_put_refs ("run", bus, sid, o->images, o->nimages, e);
        sb_enc_map_close (e);
        sb_msg_t *run = bad ? NULL : s_call (bus, "run.request", e);
        if (run) {
            char rid [33];
            snprintf (rid, sizeof rid, "%s", sb_get_str (sb_get_map (run->body, "run"), "run_id"));
            if (!o->json)
                fprintf (stderr, "session %s, run %s, workspace %s%s%s\n", sid, rid, o->repo,
                         o->ephemeral ? "" : ", data ", o->ephemeral ? " (ephemeral: removed at exit)" : data_dir);
            sb_watch_t w = {
                .bus = bus, .sub_endpoint = pub, .session_id = sid, .run_id = rid, .json = o->json,
                .cancel_on_interrupt = true, .before_summary = s_print_changes, .arg = &r,
            };
            rc = sb_follow_run (&w);
            sb_msg_destroy (&run);
        }
        sb_msg_destroy (&sess);
    }
    sb_enc_destroy (&e);
    sb_changes_destroy (&r.changes);
    return rc;
}

static int
s_embedded_hook (void *arg, const char *data_dir)
{
    sb_oneshot_t *o = arg;
    sb_bus_t *bus = sb_bus_new (SB_INPROC_CMD, "run-cli");
    if (!bus)
        return sb_cli_fail ("run", "cannot reach the embedded server");
    int rc = s_drive (o, bus, SB_INPROC_PUB, data_dir);
    sb_bus_destroy (&bus);
    return rc;
}

/*  A serve holds DATA/lock while it runs (cli/serve.c); a lock we cannot
    take means there is a server to use. */
static bool
s_server_running (const char *dir)
{
    char path [4200];
    snprintf (path, sizeof path, "%s/lock", dir);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool held = flock (fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close (fd);
    return held;
}

static int
s_on_server (sb_oneshot_t *o, const sb_serve_opts_t *so, const char *dir)
{
    if (so->llm || so->model || so->llm_url || so->providers)
        return sb_cli_usage ("run", "a server is running on %s and answers with its own model; "
                             "drop --llm, --model, --llm-url and --providers, or add --ephemeral "
                             "to run on a server of your own", dir);
    if (so->mcp_config || so->hooks)
        return sb_cli_usage ("run", "a server is running on %s with its own MCP servers and hooks; "
                             "drop --mcp-config and --hooks, or add --ephemeral to run on a server "
                             "of your own", dir);
    char pub [4200], err [512];
    if (sb_cli_endpoint (NULL, dir, "pub", pub, sizeof pub, err, sizeof err))
        return sb_cli_fail ("run", "%s", err);
    sb_bus_t *bus = sb_cli_connect ("run", NULL, dir);
    if (!bus)
        return 1;
    int rc = s_drive (o, bus, pub, dir);
    sb_bus_destroy (&bus);
    return rc;
}

static int
s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    return remove (path);
}

int
sb_oneshot_run (sb_oneshot_t *o, sb_serve_opts_t *so)
{
    if (o->ephemeral && so->data)
        return sb_cli_usage ("run", "--ephemeral and --data do not go together");
    char tmp [64] = "";
    if (o->ephemeral) {
        snprintf (tmp, sizeof tmp, "/tmp/switchboard-run-XXXXXX");
        if (!mkdtemp (tmp))
            return sb_cli_fail ("run", "cannot make a temporary data folder: %s", strerror (errno));
        so->data = tmp;
    }
    else {
        char dir [4096], err [512];
        if (sb_cli_data_dir (so->data, dir, sizeof dir, err, sizeof err))
            return sb_cli_fail ("run", "%s", err);
        if (s_server_running (dir))
            return s_on_server (o, so, dir);
    }
    if (!getenv ("SWITCHBOARD_LOG"))
        sb_log_set_level (SB_LOG_WARN);
    int rc = sb_serve_run (so, s_embedded_hook, o);
    if (tmp [0])
        nftw (tmp, s_rm, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

/*  cli/queue.c — `queue SESSION`, `queue rm SESSION PROMPT_ID`, `queue
    resume SESSION`, and what `prompt` prints when its prompt waits
    (queued, or steering the running run). docs/queue.md. */
#include "cli/cli.h"
#include "cli/follow.h"
#include "cli/queue.h"
#include "schemas/json.h"

#include <czmq.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *s_usage =
    "usage: switchboard queue SESSION [--json] [--connect EP] [--data DIR]\n"
    "       switchboard queue rm SESSION PROMPT_ID [--json] [--connect EP] [--data DIR]\n"
    "       switchboard queue resume SESSION [--json] [--connect EP] [--data DIR]\n"
    "\n"
    "A session runs one run at a time. A prompt given while a run is active\n"
    "waits in the session's queue and runs as the next run when the current one\n"
    "completes ('prompt SESSION TEXT --queue', the default then); a steer\n"
    "('prompt SESSION TEXT --steer') joins the running run at its next step\n"
    "instead. The queue is stored with the session: a restart loses nothing.\n"
    "\n"
    "  queue SESSION         the waiting prompts, next first, the steers not yet\n"
    "                        taken, and whether the queue is paused (and why)\n"
    "  queue rm SESSION ID   removes a waiting prompt or an untaken steer\n"
    "  queue resume SESSION  lets a paused queue start its next prompt again\n"
    "\n"
    "A cancel, a failed, expired or interrupted run and a server restart pause\n"
    "the queue, so that nothing starts later by surprise; steers the run did not\n"
    "take go back to the front of the queue. SESSION is a session id, any unique\n"
    "prefix of one, or 'last'. --json prints the reply as one JSON document\n"
    "(the listing: every page of session.queue.list, merged).\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed, 2 usage error.\n";

static void
s_print_item (int n, const sb_val_t *p, const char *what)
{
    char when [32], text [256];
    sb_cli_time_cell (sb_get_uint (p, "created_at", 0), when, sizeof when);
    sb_cli_text_cell (sb_get_str (p, "text"), 60, text, sizeof text);
    char pos [16] = "-";        /* steers have no place in the queue */
    if (n > 0)
        snprintf (pos, sizeof pos, "%d", n);
    printf ("%3s  %-29s  %-5s  %-16s  %s\n", pos, sb_get_str (p, "prompt_id"), what, when, text);
}

static void
s_print_queue (const char *sid, const sb_val_t *b)
{
    const sb_val_t *prompts = sb_get_array (b, "prompts");
    const sb_val_t *steers = sb_get_array (b, "steers");
    uint32_t np = prompts ? prompts->len : 0, ns = steers ? steers->len : 0;
    bool paused = sb_get_bool (b, "paused", false);
    const char *reason = sb_get_str (b, "reason");
    printf ("session %s: %u queued%s%s%s", sid, np, paused ? ", paused" : "",
            paused && reason ? ": " : "", paused && reason ? reason : "");
    if (ns)
        printf (", %u steer%s waiting for the running run's next step", ns, ns == 1 ? "" : "s");
    printf ("\n");
    if (np || ns)
        printf ("%3s  %-29s  %-5s  %-16s  %s\n", "#", "PROMPT", "MODE", "GIVEN", "TEXT");
    for (uint32_t k = 0; k < ns; k++)
        s_print_item (0, sb_array_at (steers, k), "steer");
    for (uint32_t k = 0; k < np; k++)
        s_print_item ((int) k + 1, sb_array_at (prompts, k), sb_get_str (sb_array_at (prompts, k), "mode"));
    if (paused && np)
        printf ("paused: nothing starts until 'switchboard queue resume %s'\n", sid);
}

#define S_PAGES_MAX 4096        /* a queue of 16 MiB is some 22 pages; this bounds a server that loops */
#define S_LISTING_MAX (64u << 20)   /* the merged listing: a full queue is 16 MiB of text, steers included */

/*  Encodes one array of every page's items under `key`. */
static void
s_merge (sb_enc_t *out, const char *key, zlistx_t *pages)
{
    sb_enc_key (out, key);
    sb_enc_array_open (out);
    for (sb_msg_t *m = zlistx_first (pages); m; m = zlistx_next (pages)) {
        const sb_val_t *a = sb_get_array (m->body, key);
        for (uint32_t k = 0; a && k < a->len; k++)
            sb_enc_val (out, sb_array_at (a, k));
    }
    sb_enc_array_close (out);
}

/*  Every page of session.queue.list, merged into one body of the same
    form (prompts, steers, paused, reason) into `out`. Returns 0, or 1
    when a call failed (it said why). */
static int
s_list_all (sb_bus_t *bus, const char *sid, sb_enc_t *out)
{
    zlistx_t *pages = zlistx_new ();
    sb_enc_t *req = sb_enc_new ();
    if (!pages || !req) {
        zlistx_destroy (&pages);
        sb_enc_destroy (&req);
        return 1;
    }
    zlistx_set_destructor (pages, (czmq_destructor *) sb_msg_destroy);
    uint64_t after = 0;
    int rc = 0;
    for (int page = 0; page < S_PAGES_MAX; page++) {
        sb_enc_reset (req);
        sb_enc_map_open (req);
        sb_enc_kstr (req, "session_id", sid);
        if (after)
            sb_enc_kuint (req, "after", after);
        sb_enc_map_close (req);
        size_t len;
        const uint8_t *b = sb_enc_data (req, &len);
        sb_msg_t *m = sb_cli_call ("queue", bus, "session.queue.list", b, len, 15000);
        if (!m) {
            rc = 1;
            break;
        }
        zlistx_add_end (pages, m);
        uint64_t next = sb_get_uint (m->body, "next_after", 0);
        if (!sb_get_bool (m->body, "more", false) || next <= after)
            break;
        after = next;
    }
    sb_msg_t *last = zlistx_last (pages);
    if (rc == 0 && last) {
        sb_enc_map_open (out);
        s_merge (out, "prompts", pages);
        s_merge (out, "steers", pages);
        sb_enc_kbool (out, "paused", sb_get_bool (last->body, "paused", false));
        sb_enc_kstr_opt (out, "reason", sb_get_str (last->body, "reason"));
        sb_enc_map_close (out);
    }
    zlistx_destroy (&pages);
    sb_enc_destroy (&req);
    return rc;
}

int
sb_cmd_queue (int argc, char **argv)
{
    sb_cli_opts_t o;
    int parsed = sb_cli_parse_opts (argc, argv, "queue", s_usage, &o);
    if (parsed >= 0)
        return parsed;
    const char *connect = o.connect, *data = o.data;
    bool json = o.json;
    int rest = optind, nargs = argc - optind;
    const char *verb = nargs > 0 ? argv [rest] : NULL;
    const char *type = "session.queue.list";
    int want = 1;
    if (verb && strcmp (verb, "rm") == 0) {
        type = "session.queue.remove";
        want = 3;
    }
    else
    if (verb && strcmp (verb, "resume") == 0) {
        type = "session.queue.resume";
        want = 2;
    }
    if (nargs != want)
        return sb_cli_usage ("queue", want == 1 ? "give one SESSION (or rm SESSION PROMPT_ID, resume SESSION)"
                             : want == 2 ? "queue resume takes one SESSION" : "queue rm takes a SESSION and a PROMPT_ID");
    const char *session = argv [rest + want - (want == 3 ? 2 : 1)];
    const char *prompt_id = want == 3 ? argv [rest + 2] : NULL;
    int rc = sb_cli_id_check ("queue", SB_CLI_SESSION, session);
    if (rc)
        return rc;
    if (prompt_id && (strncmp (prompt_id, "pr_", 3) != 0 || strlen (prompt_id) != 3 + SB_ULID_LEN
                      || !sb_ulid_valid (prompt_id + 3)))
        return sb_cli_usage ("queue", "'%s' is not a prompt id (pr_ and 26 characters; see 'switchboard queue %s')",
                             prompt_id, session);
    sb_bus_t *bus = sb_cli_connect ("queue", connect, data);
    if (!bus)
        return 1;
    char sid [SB_ULID_LEN + 1];
    if ((rc = sb_cli_resolve ("queue", bus, SB_CLI_SESSION, session, sid)) != 0) {
        sb_bus_destroy (&bus);
        return rc;
    }
    sb_enc_t *e = sb_enc_new ();
    if (want == 1) {
        /* the listing: every page, printed as one */
        rc = s_list_all (bus, sid, e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_verr_t verr;
        sb_doc_t *doc = rc == 0 ? sb_decode (b, len, NULL, S_LISTING_MAX, &verr) : NULL;
        if (doc && json)
            sb_cli_print_json (sb_doc_root (doc));
        else
        if (doc)
            s_print_queue (sid, sb_doc_root (doc));
        else
        if (rc == 0)
            rc = sb_cli_fail ("queue", "cannot decode the queue: %s", verr.message);
        sb_doc_destroy (&doc);
        sb_enc_destroy (&e);
        sb_bus_destroy (&bus);
        return rc;
    }
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sid);
    sb_enc_kstr_opt (e, "prompt_id", prompt_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("queue", bus, type, b, len, 15000);
    rc = 1;
    if (reply) {
        rc = 0;
        if (json)
            sb_cli_print_json (reply->body);
        else
        if (want == 3)
            printf ("removed %s; %llu queued\n", prompt_id,
                    (unsigned long long) sb_get_uint (reply->body, "queued", 0));
        else
            printf ("queue of session %s resumed; %llu queued\n", sid,
                    (unsigned long long) sb_get_uint (reply->body, "queued", 0));
        sb_msg_destroy (&reply);
    }
    sb_enc_destroy (&e);
    sb_bus_destroy (&bus);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  `prompt` when the prompt waits */

typedef struct {
    const char *prompt_id;
    char run_id [SB_ULID_LEN + 1];
    bool removed, json;
    sigset_t sigs;
    bool interrupted;
} waiting_t;

static int
s_on_wait_entry (const sb_val_t *ev, void *arg)
{
    waiting_t *w = arg;
    const sb_val_t *body = sb_get_map (ev, "body");
    const char *kind = sb_get_str (ev, "kind"), *id = sb_get_str (body, "prompt_id");
    if (!kind || !id || strcmp (id, w->prompt_id) != 0) {
        //  what stops the queue concerns the person who waits on it
        if (kind && strcmp (kind, "queue.paused") == 0 && !w->json)
            printf ("the queue paused (%s): resume it with 'switchboard queue resume %s'\n",
                    sb_get_str (body, "reason") ? sb_get_str (body, "reason") : "?", sb_get_str (ev, "session_id"));
        fflush (stdout);
        return 0;
    }
    if (w->json)
        sb_cli_print_json (ev);
    if (strcmp (kind, "prompt.dequeued") == 0 && sb_get_str (body, "run_id")) {
        snprintf (w->run_id, sizeof w->run_id, "%s", sb_get_str (body, "run_id"));
        if (!w->json)
            printf ("prompt %s started run %s\n", w->prompt_id, w->run_id);
        return 1;
    }
    if (strcmp (kind, "prompt.removed") == 0) {
        w->removed = true;
        if (!w->json)
            printf ("prompt %s was removed from the queue\n", w->prompt_id);
        return 1;
    }
    if (strcmp (kind, "prompt.steered") == 0 && sb_get_str (ev, "run_id")) {
        //  taken: follow the run it joined to its end
        snprintf (w->run_id, sizeof w->run_id, "%s", sb_get_str (ev, "run_id"));
        if (!w->json)
            printf ("steered: prompt %s joined run %s at step %llu\n", w->prompt_id, w->run_id,
                    (unsigned long long) sb_get_uint (body, "step", 0));
        return 1;
    }
    if (strcmp (kind, "prompt.queued") == 0 && sb_get_str (body, "reason") && !w->json)
        printf ("prompt %s is queued again at position %llu: %s\n", w->prompt_id,
                (unsigned long long) sb_get_uint (body, "position", 0), sb_get_str (body, "reason"));
    fflush (stdout);
    return 0;
}

static int
s_on_wait_idle (void *arg)
{
    waiting_t *w = arg;
    struct timespec zero = { 0, 0 };
    int sig = sigtimedwait (&w->sigs, NULL, &zero);
    if (sig == SIGINT || sig == SIGTERM) {
        w->interrupted = true;
        return 1;
    }
    return 0;
}

int
sb_queue_prompt_waits (sb_bus_t *bus, const char *connect, const char *data, bool json, bool follow,
                       const char *sid, const sb_val_t *reply)
{
    const char *prompt_id = sb_get_str (reply, "prompt_id");
    bool steered = sb_get_bool (reply, "steered", false);
    if (json)
        sb_cli_print_json (reply);
    else
    if (steered)
        printf ("steer %s: it joins the running run of session %s at its next step\n", prompt_id, sid);
    else
        printf ("queued at position %llu as %s: a run is active in session %s; this prompt runs when it "
                "ends (see 'switchboard queue %s')\n", (unsigned long long) sb_get_uint (reply, "queued", 0),
                prompt_id, sid, sid);
    fflush (stdout);
    if (!follow || !prompt_id)
        return 0;
    char ep [4200], err [512];
    if (sb_cli_endpoint (connect, data, "pub", ep, sizeof ep, err, sizeof err))
        return sb_cli_fail ("prompt", "%s", err);
    //  A queued prompt: wait until it starts its run, then follow that
    //  run. A steer: follow the run it joins (whose steps show it) until
    //  it ends; if it ends without taking the steer, the steer is queued,
    //  and this waits for it like for a queued prompt.
    waiting_t w = { .prompt_id = prompt_id, .json = json };
    sigemptyset (&w.sigs);
    sigaddset (&w.sigs, SIGINT);
    sigaddset (&w.sigs, SIGTERM);
    pthread_sigmask (SIG_BLOCK, &w.sigs, NULL);
    uint64_t after = sb_get_uint (reply, "seq", 1) - 1;
    if (sb_follow (bus, ep, sid, after, true, s_on_wait_entry, s_on_wait_idle, &w) != 0)
        return 1;
    if (w.interrupted) {
        fprintf (json ? stderr : stdout, "Ctrl-C: stopped waiting; prompt %s still waits in the queue of session %s "
                 "(remove it with: switchboard queue rm %s %s)\n", prompt_id, sid, sid, prompt_id);
        return 130;
    }
    if (w.removed || !w.run_id [0])
        return 1;
    sb_watch_t watch = { .bus = bus, .sub_endpoint = ep, .session_id = sid, .run_id = w.run_id, .json = json };
    return sb_follow_run (&watch);
}

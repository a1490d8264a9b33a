/*  cli/follow.c — see follow.h. */
#include "schemas/run_status.h"
#include "cli/cli.h"
#include "cli/follow.h"
#include "cli/transcript.h"
#include "common/log.h"
#include "schemas/json.h"
#include "schemas/schema.h"

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/*  Replays the tape after *last; returns 1 when fn asked to stop, 0 when
    caught up, -1 on error. */
static int
s_replay (sb_bus_t *bus, const char *sid, uint64_t *last, sb_follow_fn *fn, void *arg)
{
    sb_enc_t *e = sb_enc_new ();
    int rc = 0;
    while (e) {
        sb_enc_reset (e);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", sid);
        sb_enc_kuint (e, "after_seq", *last);
        sb_enc_kuint (e, "limit", 1000);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *reply = sb_bus_call (bus, "session.events", sid, b, len, 10000);
        if (!reply || sb_msg_is_error (reply)) {
            fprintf (stderr, "switchboard: cannot read the tape of %s: %s\n", sid,
                     reply ? sb_msg_error_message (reply) : "no reply from the server");
            sb_msg_destroy (&reply);
            rc = -1;
            break;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        for (uint32_t k = 0; events && k < events->len && rc == 0; k++) {
            const sb_val_t *ev = sb_array_at (events, k);
            uint64_t seq = sb_get_uint (ev, "seq", 0);
            if (seq <= *last)
                continue;
            *last = seq;
            if (fn (ev, arg))
                rc = 1;
        }
        bool more = sb_get_bool (reply->body, "more", false);
        sb_msg_destroy (&reply);
        if (rc || !more)
            break;
    }
    sb_enc_destroy (&e);
    return rc;
}

int
sb_follow (sb_bus_t *bus, const char *sub_endpoint, const char *sid, uint64_t after, bool live,
           sb_follow_fn *fn, sb_follow_idle_fn *idle, void *arg)
{
    sb_sub_t *sub = NULL;
    if (live) {
        sub = sb_sub_new (sub_endpoint);
        if (!sub) {
            fprintf (stderr, "switchboard: cannot subscribe at %s\n", sub_endpoint);
            return -1;
        }
        char topic [64];
        snprintf (topic, sizeof topic, "session/%s", sid);
        sb_sub_subscribe (sub, topic);
    }
    uint64_t last = after;
    int rc = s_replay (bus, sid, &last, fn, arg);
    int64_t quiet_since = sb_mono_ms ();
    while (live && rc == 0) {
        sb_msg_t *msg = sb_sub_recv (sub, 200);
        if (msg) {
            uint64_t seq = sb_get_uint (msg->body, "seq", 0);
            if (seq == last + 1) {
                last = seq;
                if (fn (msg->body, arg))
                    rc = 1;
            }
            else
            if (seq > last + 1)
                rc = s_replay (bus, sid, &last, fn, arg);   /* a gap: fill it from the tape */
            sb_msg_destroy (&msg);
            quiet_since = sb_mono_ms ();
        }
        else
        if (sb_mono_ms () - quiet_since >= 1000) {
            rc = s_replay (bus, sid, &last, fn, arg);
            quiet_since = sb_mono_ms ();
        }
        if (rc == 0 && idle && idle (arg))
            rc = 1;
    }
    sb_sub_destroy (&sub);
    return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/*  sb_follow_run */

typedef struct {
    const sb_watch_t *w;
    sb_transcript_t *t;
    sigset_t sigs;
    int interrupts;
    uint64_t last_seq;          /* the last entry seen, to re-attach after it */
    char final [16];            /* --json: the final status */
} watching_t;

static bool
s_ours (const sb_val_t *ev, const char *run_id)
{
    const char *run = sb_get_str (ev, "run_id");
    if (!run)
        run = sb_get_str (sb_get_map (ev, "body"), "run_id");
    return run && strcmp (run, run_id) == 0;
}

static int
s_on_entry (const sb_val_t *ev, void *arg)
{
    watching_t *s = arg;
    s->last_seq = sb_get_uint (ev, "seq", s->last_seq);
    if (!s->w->json)
        return sb_transcript_feed (s->t, ev);
    if (!s_ours (ev, s->w->run_id))
        return 0;
    sb_json_print (stdout, ev);
    fflush (stdout);
    const char *status = sb_get_str (sb_get_map (ev, "body"), "status");
    const char *kind = sb_get_str (ev, "kind");
    if (kind && strcmp (kind, "run.status") == 0 && status && sb_run_status_final (status)) {
        snprintf (s->final, sizeof s->final, "%s", status);
        return 1;
    }
    return 0;
}

static void
s_cancel (const sb_watch_t *w)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", w->run_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (w->bus, "run.cancel", NULL, b, len, 5000);
    if (!reply || sb_msg_is_error (reply))
        fprintf (stderr, "switchboard: cannot cancel run %s: %s\n", w->run_id,
                 reply ? sb_msg_error_message (reply) : "no reply from the server");
    sb_msg_destroy (&reply);
    sb_enc_destroy (&e);
}

/*  Redraws the status line, and takes Ctrl-C: signals are blocked in
    this thread and taken here, so a Ctrl-C never cuts a line in half. */
static int
s_on_idle (void *arg)
{
    watching_t *s = arg;
    if (s->t)
        sb_transcript_tick (s->t);
    struct timespec zero = { 0, 0 };
    int sig = sigtimedwait (&s->sigs, NULL, &zero);
    if (sig != SIGINT && sig != SIGTERM)
        return 0;
    if (++s->interrupts > 1 || !s->w->cancel_on_interrupt)
        return 1;
    if (s->t)
        sb_transcript_flush (s->t);
    fprintf (stderr, "cancelling run %s (Ctrl-C again to stop waiting)\n", s->w->run_id);
    s_cancel (s->w);
    return 0;
}

int
sb_follow_run (const sb_watch_t *w)
{
    watching_t s = { .w = w };
    sigemptyset (&s.sigs);
    sigaddset (&s.sigs, SIGINT);
    sigaddset (&s.sigs, SIGTERM);
    pthread_sigmask (SIG_BLOCK, &s.sigs, NULL);
    if (!w->json) {
        sb_transcript_opts_t opts;
        sb_transcript_opts_stdout (&opts, w->run_id);
        s.t = sb_transcript_new (&opts);
        if (!s.t) {
            fprintf (stderr, "switchboard: out of memory\n");
            return 1;
        }
    }
    int64_t started = sb_mono_ms ();
    int rc = sb_follow (w->bus, w->sub_endpoint, w->session_id, 0, true, s_on_entry, s_on_idle, &s);
    char final [16];
    snprintf (final, sizeof final, "%s", s.t ? sb_transcript_tally (s.t)->final : s.final);
    if (s.t)
        sb_transcript_flush (s.t);
    if (w->before_summary)
        w->before_summary (w->arg);
    if (s.t)
        sb_transcript_summary (s.t, (double) (sb_mono_ms () - started) / 1000.0);
    sb_transcript_destroy (&s.t);
    int code = rc == 0 && sb_run_status_from_name (final) == SB_RUN_completed ? 0 : 1;
    if (s.interrupts == 0)
        return code;
    /* what Ctrl-C did, as the last line (of stderr with --json, which
       keeps stdout to JSON lines) */
    FILE *out = w->json ? stderr : stdout;
    if (w->cancel_on_interrupt && final [0] && sb_run_status_from_name (final) != SB_RUN_cancelled) {
        fprintf (out, "Ctrl-C came too late: run %s had already ended %s\n", w->run_id, final);
        fflush (out);
        return code;
    }
    if (w->cancel_on_interrupt && final [0])
        fprintf (out, "Ctrl-C: cancelled run %s; its history stays in session %s\n", w->run_id, w->session_id);
    else
    if (w->cancel_on_interrupt)
        fprintf (out, "Ctrl-C: stopped waiting for run %s, which was asked to cancel; "
                "see it with: switchboard run-info %s\n", w->run_id, w->run_id);
    else
        fprintf (out, "Ctrl-C: detached from run %s, which goes on; re-attach with: "
                "switchboard events --session %s --after %llu --follow --text "
                "(stop it with: switchboard cancel %s)\n", w->run_id, w->session_id,
                (unsigned long long) s.last_seq, w->run_id);
    fflush (out);
    return 130;
}

int
sb_tape_list_cmd (const char *cmd, int argc, char **argv, const char *usage, sb_follow_fn *fn,
                  sb_tape_list_t *list, const char *none)
{
    static struct option longopts [] = {
        { "json", no_argument, 0, 'j' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *connect = NULL, *data = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'j': list->json = true; break;
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 'h': fputs (usage, stdout); return 0;
            default: return sb_cli_usage (cmd, "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (argc - optind != 1)
        return sb_cli_usage (cmd, "give one SESSION");
    int rc;
    char sid [SB_ULID_LEN + 1];
    sb_bus_t *bus = sb_cli_session_open (cmd, argv [optind], connect, data, sid, &rc);
    if (!bus)
        return rc;
    rc = sb_follow (bus, NULL, sid, 0, false, fn, NULL, list) < 0 ? 1 : 0;
    if (rc == 0 && !list->json && list->count == 0)
        printf ("%s\n", none);
    sb_bus_destroy (&bus);
    return rc;
}

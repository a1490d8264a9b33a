/*  cli/chat.c — `switchboard chat [SESSION]`: an interactive terminal
    attached to a session (docs/approvals.md, "The terminal").

    One loop polls the keyboard (cli/chat_screen.c), Ctrl-C (a signalfd)
    and the session's topic on the event plane. The tape is followed as
    cli/follow.c does (subscribe first, replay from a cursor, drop what was
    seen by seq, fill a gap from the tape), but without blocking, so that
    typing, streaming and answering approvals share one thread.

    What a person sees:
      - each run as `prompt --follow` prints it (cli/transcript.c);
      - an approval a run waits for, inline: the tool, the command or the
        diff, and the choices [y]es / [n]o / [a]lways / [s]ession /
        [f]eedback, one key each (the screen's key mode); the answer goes to interact.resolve signed
        chat:USER@HOST. One answered elsewhere (another terminal, the CLI,
        a browser, its deadline) leaves the question and says who did;
      - while a run streams, a typed line is queued for after it
        (session.prompt mode queue) and a line starting with '!' steers
        it (mode steer);
      - Ctrl-C cancels the running run; a second Ctrl-C, or Ctrl-D, leaves.
    Attached to a session whose run is going, it shows that run from its
    start, then live, with no gap and no duplicate. */
#include "schemas/run_status.h"
#include "cli/chat.h"
#include "cli/cli.h"
#include "cli/images.h"
#include "cli/interactions.h"
#include "cli/models.h"
#include "cli/transcript.h"
#include "common/log.h"
#include "schemas/approval_policy.h"
#include "schemas/vocab.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zmq.h>

#define CALL_MS 15000
/*  With nothing on the topic for this long, the tape is read: pub/sub may
    have dropped the last entry. */
#define QUIET_CHECK_MS 1000
/*  Approvals of one run waiting at once (parallel tool calls); answers to
    recent ones remembered, so the tape's echo of ours is not news. */
#define ASKED_MAX 16
#define ANSWERED_MAX 32

#define PROMPT_IDLE     "> "
#define PROMPT_RUNNING  "queue> "
#define PROMPT_CHOICES  "[y]es / [n]o / [a]lways / [s]ession / [f]eedback > "
#define PROMPT_FEEDBACK "feedback for the model > "
/*  A budget question (docs/usage.md): yes raises the budget by its amount */
#define PROMPT_BUDGET   "go on past the budget? [y]es / [n]o, stop the run > "

typedef struct {
    char id [40];
    char tool [65];
    bool budget;                /* a budget question, not a tool call's */
    bool asked;                 /* the question is on the screen */
    char *schema;               /* an MCP server's elicitation: its schema (heap), asked field by field */
} asked_t;

typedef struct {
    sb_bus_t *bus;
    sb_sub_t *sub;
    sb_screen_t *screen;
    sb_transcript_t *t;         /* the run being shown, NULL between runs */
    char sid [SB_ULID_LEN + 1];
    char run [SB_ULID_LEN + 1];         /* the run being shown ("" none) */
    char own_prompt_run [SB_ULID_LEN + 1];  /* its prompt was typed here */
    char attach_run [SB_ULID_LEN + 1];  /* show nothing before this run's first entry */
    uint64_t last_seq;
    int64_t quiet_since;
    asked_t asked [ASKED_MAX];
    int nasked;
    char answered [ANSWERED_MAX][40];
    int nanswered;
    sb_chat_form_t form;        /* when asked [0] is an elicitation (cli/chat_form.c) */
    bool want_feedback;         /* the next line is the feedback of a rejection */
    bool command_line;          /* '/' typed at the question: a line, not a key */
    bool status_open;           /* the run's status line waits for its next status */
    bool cancelling;
    int interrupts;             /* Ctrl-C since the last line typed */
    bool quit;
    bool server_lost;           /* the last call got no reply */
    bool input_done;            /* a pipe ended: leave when the run ends */
    int exit_code;
    char who [400];
    sb_cli_images_t images;     /* /image PATH: files for the next prompt */
} chat_t;

/* ------------------------------------------------------------------ */
/*  Output */

/*  cli/transcript.c prints to stdout; the chat prints through its screen,
    which keeps the input line below the output. So stdout points at the
    screen's buffer while the transcript runs (glibc's printf family reads
    the `stdout` variable), and back right after. */
static void s_status_close (chat_t *c);

static int
s_feed (chat_t *c, const sb_val_t *ev)
{
    s_status_close (c);
    FILE *real = stdout;
    stdout = sb_screen_out (c->screen);
    int rc = sb_transcript_feed (c->t, ev);
    stdout = real;
    return rc;
}

static void
s_summary (chat_t *c)
{
    s_status_close (c);
    FILE *real = stdout;
    stdout = sb_screen_out (c->screen);
    sb_transcript_flush (c->t);
    const sb_transcript_tally_t *t = sb_transcript_tally (c->t);
    char tokens [96];
    sb_transcript_tokens (t, tokens, sizeof tokens);
    printf ("%s[run %s %s · steps %llu · %s]%s\n",
            sb_screen_color (c->screen) ? "\033[2m" : "", c->run, t->final [0] ? t->final : "ended",
            (unsigned long long) t->steps, tokens, sb_screen_color (c->screen) ? "\033[0m" : "");
    stdout = real;
}

/*  Ends the run's status line (s_run_status) before anything else is
    printed, so that its next status starts a line of its own. */
static void
s_status_close (chat_t *c)
{
    if (!c->status_open)
        return;
    c->status_open = false;
    fputs (sb_screen_color (c->screen) ? "]\033[0m\n" : "]\n", sb_screen_out (c->screen));
    sb_screen_flush (c->screen);
}

/*  The statuses a run passes before it is final (queued, claimed,
    running, cancelling) folded into one line that grows as they come:
    "[run ID queued → claimed → running]". The final one is the run's
    summary line (s_summary). */
static void
s_run_status (chat_t *c, const char *status)
{
    FILE *out = sb_screen_out (c->screen);
    if (c->status_open)
        fprintf (out, " → %s", status);
    else {
        sb_screen_newline (c->screen);
        fprintf (out, "%s[run %s %s", sb_screen_color (c->screen) ? "\033[2m" : "", c->run, status);
        c->status_open = true;
    }
    sb_screen_flush (c->screen);
}

static void
s_say (chat_t *c, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/*  One line of the chat's own, dim, on a line of its own. */
static void
s_say (chat_t *c, const char *fmt, ...)
{
    s_status_close (c);
    sb_screen_newline (c->screen);
    FILE *out = sb_screen_out (c->screen);
    bool color = sb_screen_color (c->screen);
    if (color)
        fputs ("\033[2m", out);
    va_list ap;
    va_start (ap, fmt);
    vfprintf (out, fmt, ap);
    va_end (ap);
    fputs (color ? "\033[0m\n" : "\n", out);
    sb_screen_flush (c->screen);
}

static bool s_on_key (int key, void *arg);

/*  The input line's prompt, and its mode: one key answers the question
    on the screen (docs/approvals.md), lines for the rest. */
static void
s_update_prompt (chat_t *c)
{
    bool asking = c->nasked && c->asked [0].asked;
    bool form = asking && c->asked [0].schema && sb_chat_form_active (&c->form);
    const char *p = form ? sb_chat_form_prompt (&c->form) : c->want_feedback ? PROMPT_FEEDBACK
                  : asking ? (c->asked [0].budget ? PROMPT_BUDGET : PROMPT_CHOICES)
                  : c->run [0] ? PROMPT_RUNNING : PROMPT_IDLE;
    if (!asking)
        c->command_line = false;
    sb_screen_prompt (c->screen, p);
    if (asking && !form && !c->want_feedback && !c->command_line)
        sb_screen_keys (c->screen, s_on_key, c);
    else
        sb_screen_lines (c->screen, NULL);
}

/* ------------------------------------------------------------------ */
/*  Calls */

static sb_msg_t *
s_call_ms (chat_t *c, const char *type, sb_enc_t *e, int timeout_ms)
{
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (c->bus, type, c->sid, b, len, timeout_ms);
    /* said once until the server answers again */
    if (!reply && !c->server_lost)
        s_say (c, "no reply to %s within %.1f s: is the server running? (still trying)", type,
               timeout_ms / 1000.0);
    c->server_lost = !reply;
    return reply;
}

static sb_msg_t *
s_call (chat_t *c, const char *type, sb_enc_t *e)
{
    return s_call_ms (c, type, e, CALL_MS);
}

/* ------------------------------------------------------------------ */
/*  Approvals */

static bool
s_answered (const chat_t *c, const char *id)
{
    for (int k = 0; k < c->nanswered && k < ANSWERED_MAX; k++)
        if (strcmp (c->answered [k], id) == 0)
            return true;
    return false;
}

static void
s_remember_answer (chat_t *c, const char *id)
{
    snprintf (c->answered [c->nanswered++ % ANSWERED_MAX], sizeof c->answered [0], "%s", id);
}

static void
s_drop_asked (chat_t *c, int k)
{
    free (c->asked [k].schema);
    if (k == 0)
        sb_chat_form_end (&c->form);
    memmove (&c->asked [k], &c->asked [k + 1], (size_t) (c->nasked - k - 1) * sizeof c->asked [0]);
    c->nasked--;
    if (k == 0)
        c->want_feedback = false;
}

/*  Puts the first waiting approval's question on the input line. */
/*  Starts asking the elicitation asked [0] field by field. */
static void
s_form_begin (chat_t *c)
{
    if (sb_chat_form_begin (&c->form, c->asked [0].schema) == 0)
        s_say (c, "answer field by field (Enter takes the default; /decline or /cancel answers the server so)");
}

static void
s_ask_next (chat_t *c)
{
    if (c->nasked && !c->asked [0].asked) {
        c->asked [0].asked = true;
        sb_screen_clear_input (c->screen);
        if (c->asked [0].schema)
            s_form_begin (c);
    }
    s_update_prompt (c);
}

static void
s_on_requested (chat_t *c, const sb_val_t *body)
{
    const char *id = sb_get_str (body, "interaction_id");
    if (!id || s_answered (c, id))
        return;
    char when [96] = "no deadline";
    uint64_t deadline = sb_get_uint (body, "deadline_at", 0);
    if (deadline) {
        int64_t left = ((int64_t) deadline - (int64_t) sb_now_ms ()) / 1000;
        snprintf (when, sizeof when, "%s in %lldm %02llds", sb_get_str (body, "default_outcome")
                  ? sb_get_str (body, "default_outcome") : "reject",
                  (long long) (left > 0 ? left / 60 : 0), (long long) (left > 0 ? left % 60 : 0));
    }
    s_status_close (c);
    sb_screen_newline (c->screen);
    FILE *out = sb_screen_out (c->screen);
    bool color = sb_screen_color (c->screen);
    fprintf (out, "%s%s%s  %s (%s)\n", color ? "\033[1m" : "",
             sb_interaction_is_budget (body) ? "budget reached" : sb_interaction_is_elicitation (body)
             ? "question from an MCP server" : "approval needed", color ? "\033[0m" : "", id, when);
    sb_interaction_print_call (out, body);
    sb_screen_flush (c->screen);
    if (c->nasked < ASKED_MAX) {
        asked_t *a = &c->asked [c->nasked++];
        memset (a, 0, sizeof *a);
        snprintf (a->id, sizeof a->id, "%s", id);
        snprintf (a->tool, sizeof a->tool, "%s", sb_get_str (body, "tool") ? sb_get_str (body, "tool") : "?");
        a->budget = sb_interaction_is_budget (body);
        if (sb_interaction_is_elicitation (body) && sb_get_str (body, "schema"))
            a->schema = strdup (sb_get_str (body, "schema"));
    }
    s_ask_next (c);
}

static void
s_on_resolved (chat_t *c, const sb_val_t *body)
{
    const char *id = sb_get_str (body, "interaction_id");
    if (!id || s_answered (c, id))
        return;
    int k = 0;
    while (k < c->nasked && strcmp (c->asked [k].id, id) != 0)
        k++;
    const char *status = sb_get_str (body, "status");
    const char *by = sb_get_str (body, "resolved_by");
    const char *fb = sb_get_str (body, "feedback");
    bool was_asking = k < c->nasked && c->asked [k].asked;
    if (k < c->nasked)
        s_drop_asked (c, k);
    s_say (c, "%s%s %s by %s%s%s", was_asking ? "resolved elsewhere: " : "", id, status ? status : "resolved",
           by ? by : "?", fb ? ": " : "", fb ? fb : "");
    s_remember_answer (c, id);
    if (was_asking)
        sb_screen_clear_input (c->screen);
    s_ask_next (c);
}

static void
s_resolve_as (chat_t *c, const char *decision, const char *scope, const char *feedback, const char *action,
              const char *content)
{
    asked_t a = c->asked [0];
    char cmd [40], ulid [SB_ULID_LEN + 1];
    sb_ulid_new (ulid);
    snprintf (cmd, sizeof cmd, "chat-%s", ulid);
    sb_msg_t *reply = sb_interaction_resolve (c->bus, a.id, decision, scope, feedback, c->who, cmd, 0, action,
                                              content);
    /* a retry under the same command_id is safe: the first answer's
       reply comes back if it was taken */
    if (!reply)
        reply = sb_interaction_resolve (c->bus, a.id, decision, scope, feedback, c->who, cmd, 0, action, content);
    c->want_feedback = false;
    if (!reply) {
        s_say (c, "no reply to interact.resolve: is the server running? (answer again)");
        s_update_prompt (c);
        return;
    }
    if (!sb_msg_is_error (reply)) {
        const sb_val_t *ia = sb_get_map (reply->body, "interaction");
        if (sb_get_str (ia, "action"))
            s_say (c, "%s %s: %s%s%s", sb_get_str (ia, "status"), a.id, sb_get_str (ia, "action"),
                   sb_get_str (ia, "content") ? " " : "", sb_get_str (ia, "content") ? sb_get_str (ia, "content") : "");
        else
            s_say (c, "%s %s (%s)%s%s", sb_get_str (ia, "status"), a.id, sb_get_str (ia, "scope"),
                   feedback && *feedback ? ": " : "", feedback && *feedback ? feedback : "");
        s_remember_answer (c, a.id);
    }
    else
    if (action && sb_err_from_name (sb_msg_error_code (reply)) == SB_E_invalid && sb_chat_form_active (&c->form)) {
        /* content the schema refused: said, and asked again from the top */
        s_say (c, "not taken: %s", sb_msg_error_message (reply));
        sb_msg_destroy (&reply);
        s_form_begin (c);
        s_update_prompt (c);
        return;
    }
    else
    if (sb_err_from_name (sb_msg_error_code (reply)) == SB_E_conflict) {
        char line [1024];
        sb_interaction_conflict_line (reply, line, sizeof line);
        s_say (c, "too late: %s", line);
        s_remember_answer (c, a.id);
    }
    else
        s_say (c, "cannot answer %s: %s: %s", a.id, sb_msg_error_code (reply), sb_msg_error_message (reply));
    sb_msg_destroy (&reply);
    if (c->nasked && strcmp (c->asked [0].id, a.id) == 0)
        s_drop_asked (c, 0);
    s_ask_next (c);
}

static void
s_resolve (chat_t *c, const char *decision, const char *scope, const char *feedback)
{
    s_resolve_as (c, decision, scope, feedback, NULL, NULL);
}

/*  A line typed at a field of the elicitation (cli/chat_form.c): the
    next field, the reason it was not taken, or the answer. */
static void
s_on_field (chat_t *c, const char *line)
{
    char why [128], *content = NULL;
    switch (sb_chat_form_take (&c->form, line, why, sizeof why, &content)) {
        case SB_CHAT_FORM_NEXT:    s_update_prompt (c); break;
        case SB_CHAT_FORM_BAD:     s_say (c, "%s", why); break;
        case SB_CHAT_FORM_DECLINE: s_resolve_as (c, "reject", "once", NULL, "decline", NULL); break;
        case SB_CHAT_FORM_CANCEL:  s_resolve_as (c, "reject", "once", NULL, "cancel", NULL); break;
        case SB_CHAT_FORM_DONE:
            s_resolve_as (c, "approve", "once", NULL, "accept", content ? content : "{}");
            free (content);
            break;
    }
}

/*  What a line typed at the question means (chat.h). */
sb_chat_answer_t
sb_chat_answer_parse (const char *line, const char **rest)
{
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strcspn (line, " \t");
    const char *r = line + n;
    while (*r == ' ' || *r == '\t')
        r++;
    *rest = r;
    static const struct {
        const char *word;
        sb_chat_answer_t answer;
    } s_words [] = {
        { "y", SB_CHAT_YES }, { "yes", SB_CHAT_YES }, { "n", SB_CHAT_NO }, { "no", SB_CHAT_NO },
        { "a", SB_CHAT_ALWAYS }, { "always", SB_CHAT_ALWAYS }, { "s", SB_CHAT_SESSION },
        { "session", SB_CHAT_SESSION }, { "f", SB_CHAT_FEEDBACK }, { "feedback", SB_CHAT_FEEDBACK },
    };
    for (size_t k = 0; k < sizeof s_words / sizeof s_words [0]; k++)
        if (strlen (s_words [k].word) == n && strncasecmp (line, s_words [k].word, n) == 0)
            return s_words [k].answer;
    return SB_CHAT_UNKNOWN;
}

/*  A line typed while an approval is asked: y, n, a, s, f (or the words),
    or "n TEXT" to reject with feedback in one go. */
static void
s_on_answer (chat_t *c, const char *line)
{
    if (c->want_feedback) {
        s_resolve (c, "reject", "once", line);
        return;
    }
    const char *rest;
    switch (sb_chat_answer_parse (line, &rest)) {
        case SB_CHAT_YES:     s_resolve (c, "approve", "once", *rest ? rest : NULL); break;
        case SB_CHAT_NO:      s_resolve (c, "reject", "once", *rest ? rest : NULL); break;
        case SB_CHAT_ALWAYS:  s_resolve (c, "approve", "always", *rest ? rest : NULL); break;
        case SB_CHAT_SESSION: s_resolve (c, "approve", "session", *rest ? rest : NULL); break;
        case SB_CHAT_FEEDBACK:
            if (*rest)
                s_resolve (c, "reject", "once", rest);
            else {
                c->want_feedback = true;
                s_update_prompt (c);
            }
            break;
        default:
            s_say (c, "answer y (approve), n (reject), a (approve always), s (approve for this session) "
                   "or f (reject with words for the model)");
    }
}

/*  A key pressed at the question (key mode, on a terminal): y, n, a and s
    answer at once, f asks for the words of a rejection, '/' starts a
    command line (/exit), Ctrl-D leaves. True when the key was taken. */
static bool
s_on_key (int key, void *arg)
{
    chat_t *c = arg;
    c->interrupts = 0;
    if (key == 4) {
        c->quit = true;
        return true;
    }
    if (key == '/') {
        /* not taken: what was typed after it is the rest of the line */
        c->command_line = true;
        sb_screen_lines (c->screen, "/");
        return false;
    }
    if (key == '\r' || key == '\n' || key == ' ' || key == '\t')
        return false;
    char line [2] = { (char) key, 0 };
    const char *rest;
    if (key < 0x20 || key > 0x7e || sb_chat_answer_parse (line, &rest) == SB_CHAT_UNKNOWN) {
        s_say (c, "press y (approve), n (reject), a (approve always), s (approve for this session), "
               "f (reject with words for the model), or /exit");
        return false;
    }
    s_on_answer (c, line);
    /* f asks for a line: what was typed after it belongs to it */
    return !c->want_feedback;
}

/* ------------------------------------------------------------------ */
/*  The tape */

static const char *
s_entry_run (const sb_val_t *ev)
{
    const char *run = sb_get_str (ev, "run_id");
    return run ? run : sb_get_str (sb_get_map (ev, "body"), "run_id");
}

static void
s_start_run (chat_t *c, const char *run_id)
{
    if (c->t) {
        sb_transcript_destroy (&c->t);
    }
    snprintf (c->run, sizeof c->run, "%s", run_id);
    sb_transcript_opts_t opts = { .run_id = c->run, .color = sb_screen_color (c->screen), .live = false };
    c->t = sb_transcript_new (&opts);
    c->cancelling = false;
    s_update_prompt (c);
}

static void
s_end_run (chat_t *c)
{
    s_summary (c);
    sb_screen_flush (c->screen);
    sb_transcript_destroy (&c->t);
    c->run [0] = 0;
    c->cancelling = false;
    /* questions of the run that ended can no longer be answered */
    while (c->nasked)
        s_drop_asked (c, c->nasked - 1);
    sb_chat_form_end (&c->form);
    c->want_feedback = false;
    s_update_prompt (c);
    if (c->input_done)
        c->quit = true;
}

/*  A queue's entry on the tape (docs/queue.md) in words: what was queued
    or steered, taken, removed, paused or resumed (cli/chat_words.c). */
static void
s_on_queue (chat_t *c, const char *kind, const sb_val_t *body)
{
    char line [600];
    sb_chat_queue_words (kind, body, c->sid, line, sizeof line);
    s_say (c, "%s", line);
}

static void
s_on_entry (chat_t *c, const sb_val_t *ev)
{
    const char *kind = sb_get_str (ev, "kind");
    const sb_val_t *body = sb_get_map (ev, "body");
    const char *run = s_entry_run (ev);
    if (!kind)
        return;
    if (c->attach_run [0]) {
        /* attached mid-run: the tape from that run's start */
        if (!run || strcmp (run, c->attach_run) != 0)
            return;
        c->attach_run [0] = 0;
    }
    if (strcmp (kind, "approval.requested") == 0) {
        s_on_requested (c, body);
        return;
    }
    if (strcmp (kind, "approval.resolved") == 0) {
        s_on_resolved (c, body);
        return;
    }
    if (strncmp (kind, "prompt.", 7) == 0 || strncmp (kind, "queue.", 6) == 0) {
        s_on_queue (c, kind, body);
        return;
    }
    if (!run || (strcmp (kind, "prompt") != 0 && strcmp (kind, "run.status") != 0 && !c->run [0]))
        return;
    if (strcmp (run, c->run) != 0) {
        /* a new run: its prompt and first status open it */
        if (strcmp (kind, "prompt") != 0 && strcmp (kind, "run.status") != 0)
            return;
        if (c->t)
            s_end_run (c);
        s_start_run (c, run);
    }
    if (strcmp (kind, "prompt") == 0 && strcmp (run, c->own_prompt_run) == 0)
        return;                 /* typed here: it is on the screen already */
    if (strcmp (kind, "run.status") == 0) {
        const char *status = sb_get_str (body, "status");
        /* a status of the table only: anything else goes to the
           transcript, which prints it scrubbed */
        if (status && sb_run_status_from_name (status) != SB_RUN__COUNT && !sb_run_status_final (status)) {
            s_run_status (c, status);
            return;
        }
    }
    int done = s_feed (c, ev);
    sb_screen_flush (c->screen);
    if (done)
        s_end_run (c);
}

/*  Reads the tape after last_seq up to its head, waiting at most
    timeout_ms for each page. -1 on error (said). */
static int
s_replay (chat_t *c, int timeout_ms)
{
    sb_enc_t *e = sb_enc_new ();
    int rc = 0;
    bool more = true;
    while (e && more && !c->quit) {
        sb_enc_reset (e);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", c->sid);
        sb_enc_kuint (e, "after_seq", c->last_seq);
        sb_enc_kuint (e, "limit", 1000);
        sb_enc_map_close (e);
        sb_msg_t *reply = s_call_ms (c, "session.events", e, timeout_ms);
        if (!reply || sb_msg_is_error (reply)) {
            if (reply)
                s_say (c, "cannot read the tape: %s", sb_msg_error_message (reply));
            sb_msg_destroy (&reply);
            rc = -1;
            break;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        for (uint32_t k = 0; events && k < events->len; k++) {
            const sb_val_t *ev = sb_array_at (events, k);
            uint64_t seq = sb_get_uint (ev, "seq", 0);
            if (seq <= c->last_seq)
                continue;
            c->last_seq = seq;
            s_on_entry (c, ev);
        }
        more = sb_get_bool (reply->body, "more", false) && events && events->len;
        sb_msg_destroy (&reply);
    }
    sb_enc_destroy (&e);
    c->quiet_since = sb_mono_ms ();
    return rc;
}

static void
s_on_event (chat_t *c)
{
    sb_msg_t *msg;
    while ((msg = sb_sub_recv (c->sub, 0))) {
        uint64_t seq = sb_get_uint (msg->body, "seq", 0);
        if (seq == c->last_seq + 1) {
            c->last_seq = seq;
            s_on_entry (c, msg->body);
        }
        else
        if (seq > c->last_seq + 1)
            s_replay (c, CALL_MS);  /* a gap: fill it from the tape */
        sb_msg_destroy (&msg);
        c->quiet_since = sb_mono_ms ();
    }
}

/* ------------------------------------------------------------------ */
/*  Input */

static void
s_prompt (chat_t *c, const char *text)
{
    bool steer = c->run [0] && text [0] == '!';
    if (steer)
        text++;
    while (*text == ' ')
        text++;
    if (!*text)
        return;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", c->sid);
    sb_enc_kstr (e, "text", text);
    /* with no run going, a prompt starts one as it always did */
    if (c->run [0])
        sb_enc_kstr (e, "mode", steer ? "steer" : "queue");
    char cmd [40], ulid [SB_ULID_LEN + 1];
    sb_ulid_new (ulid);
    snprintf (cmd, sizeof cmd, "chat-%s", ulid);
    sb_enc_kstr (e, "command_id", cmd);
    /* the images /image gathered go with this prompt (cli/images.h) */
    if (sb_cli_put_images ("chat", c->bus, c->sid, (const char *const *) c->images.files, c->images.n, e)) {
        s_say (c, "the prompt was not sent: an image was refused (see above); /image clear drops them");
        sb_enc_destroy (&e);
        return;
    }
    sb_cli_images_line (&c->images, "clear", NULL, 0);
    sb_enc_map_close (e);
    sb_msg_t *reply = s_call (c, "session.prompt", e);
    sb_enc_destroy (&e);
    if (!reply)
        return;
    if (sb_msg_is_error (reply))
        s_say (c, "%s: %s", sb_msg_error_code (reply), sb_msg_error_message (reply));
    else {
        const char *run = sb_get_str (reply->body, "run_id");
        if (run) {
            snprintf (c->own_prompt_run, sizeof c->own_prompt_run, "%s", run);
            if (strcmp (run, c->run) != 0) {
                if (c->t)
                    s_end_run (c);
                s_start_run (c, run);
            }
        }
        /* a queued or steered line is said by its entry on the tape
           (s_on_queue), which every terminal on the session sees */
    }
    sb_msg_destroy (&reply);
}

static void
s_on_line (const char *line, void *arg)
{
    chat_t *c = arg;
    if (!line) {
        /* Ctrl-D leaves at once; the end of a pipe leaves once the run
           its lines started has ended, as prompt --follow would */
        if (!sb_screen_tty (c->screen) && c->run [0])
            c->input_done = true;
        else
            c->quit = true;
        return;
    }
    c->interrupts = 0;
    bool command_line = c->command_line;   /* back to keys after this line */
    c->command_line = false;
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    /* the commands work at the question too */
    if (strcmp (p, "/exit") == 0 || strcmp (p, "/quit") == 0) {
        c->quit = true;
        return;
    }
    if (strncmp (p, "/image", 6) == 0 && (p [6] == ' ' || p [6] == 0)) {
        char said [512];
        sb_cli_images_line (&c->images, p + 6, said, sizeof said);
        s_say (c, "%s", said);
        s_update_prompt (c);
        return;
    }
    if (strcmp (p, "/help") == 0) {
        s_say (c, "type a prompt to start a run; while one runs, a line is queued for after it and "
               "'!text' steers it; '/image PATH' gives the next prompt an image; at a question one key "
               "answers (y n a s f); Ctrl-C cancels the run; Ctrl-C twice, Ctrl-D or /exit leaves");
        s_update_prompt (c);
        return;
    }
    if (c->nasked && c->asked [0].asked && sb_chat_form_active (&c->form)) {
        s_on_field (c, line);
        return;
    }
    if (c->nasked && c->asked [0].asked) {
        /* a line at the question (a pipe, or '/' then something else) is
           read as an answer the old way, "n WORDS" included */
        s_on_answer (c, line);
        if (command_line)
            s_update_prompt (c);
        return;
    }
    if (!*p)
        return;
    sb_screen_history (c->screen, line);
    s_prompt (c, p);
}

static void
s_cancel (chat_t *c)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", c->run);
    sb_enc_map_close (e);
    sb_msg_t *reply = s_call (c, "run.cancel", e);
    sb_enc_destroy (&e);
    if (reply && sb_msg_is_error (reply))
        s_say (c, "cannot cancel run %s: %s", c->run, sb_msg_error_message (reply));
    sb_msg_destroy (&reply);
}

static void
s_on_interrupt (chat_t *c)
{
    c->interrupts++;
    if (c->run [0] && !c->cancelling && c->interrupts == 1) {
        c->cancelling = true;
        c->want_feedback = false;
        sb_screen_clear_input (c->screen);
        s_say (c, "cancelling run %s (Ctrl-C again or Ctrl-D to leave)", c->run);
        s_cancel (c);
        s_update_prompt (c);
        return;
    }
    if (c->interrupts >= 2) {
        c->quit = true;
        c->exit_code = 130;
        return;
    }
    sb_screen_clear_input (c->screen);
    s_say (c, "(Ctrl-C again or Ctrl-D to leave)");
}

/* ------------------------------------------------------------------ */
/*  Setup */

/*  A new session on the workspace (the current folder by default). */
static int
s_new_session (chat_t *c, const sb_chat_opts_t *o)
{
    char ws [PATH_MAX];
    if (!realpath (o->workspace ? o->workspace : ".", ws))
        return sb_cli_fail ("chat", "the workspace %s does not exist", o->workspace ? o->workspace : ".");
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return sb_cli_fail ("chat", "out of memory");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "workspace", ws);
    sb_enc_kstr_opt (e, "title", o->title);
    sb_enc_kstr_opt (e, "provider", o->provider);
    sb_enc_kstr_opt (e, "model", o->model);
    sb_enc_kstr_opt (e, "approval_policy", o->approval);
    if (o->max_steps)
        sb_enc_kuint (e, "max_steps", o->max_steps);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("chat", c->bus, "session.create", b, len, CALL_MS);
    sb_enc_destroy (&e);
    if (!reply)
        return 1;
    snprintf (c->sid, sizeof c->sid, "%s", sb_get_str (sb_get_map (reply->body, "session"), "session_id"));
    sb_msg_destroy (&reply);
    return 0;
}

/*  Where to start on the tape: after its head, or, when a run is going,
    at that run's first entry (c->attach_run). Prints the header. */
static int
s_attach (chat_t *c)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return sb_cli_fail ("chat", "out of memory");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", c->sid);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("chat", c->bus, "session.get", b, len, CALL_MS);
    sb_enc_destroy (&e);
    if (!reply)
        return 1;
    const sb_val_t *s = sb_get_map (reply->body, "session");
    const char *turn = sb_get_str (s, "turn_status");
    const char *last_run = sb_get_str (s, "last_run_id");
    if (turn && sb_turn_status_from_name (turn) != SB_TURN_IDLE && last_run)
        snprintf (c->attach_run, sizeof c->attach_run, "%s", last_run);
    else
        c->last_seq = sb_get_uint (s, "last_seq", 0);
    /* the effective provider and model (cli/models.h), not a dash */
    sb_cli_models_t models;
    sb_cli_models_load (c->bus, &models, 3000);
    char provider [64], model [256];
    bool own_p, own_m;
    sb_cli_models_effective (&models, s, provider, sizeof provider, model, sizeof model, &own_p, &own_m);
    printf ("session %s · %s · approval %s · provider %s · model %s%s\n", c->sid, sb_get_str (s, "workspace"),
            sb_get_str (s, "approval_policy") ? sb_get_str (s, "approval_policy") : "auto", provider, model,
            own_m ? "" : own_p ? " (the provider's default)" : " (the server's default)");
    printf ("Type a prompt. While a run streams: a line queues, '!text' steers, Ctrl-C cancels it.\n"
            "Ctrl-C twice or Ctrl-D leaves.%s\n", c->attach_run [0] ? " A run is going: from its start." : "");
    fflush (stdout);
    sb_msg_destroy (&reply);
    return 0;
}

static int
s_loop (chat_t *c)
{
    sigset_t sigs;
    sigemptyset (&sigs);
    sigaddset (&sigs, SIGINT);
    sigaddset (&sigs, SIGTERM);
    pthread_sigmask (SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd (-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        return sb_cli_fail ("chat", "signalfd: %s", strerror (errno));
    c->screen = sb_screen_new (PROMPT_IDLE, s_on_line, c);
    if (!c->screen) {
        close (sfd);
        return sb_cli_fail ("chat", "out of memory");
    }
    /* subscribed before the replay, so that nothing falls in between */
    if (s_replay (c, CALL_MS) != 0)
        c->quit = true;
    s_update_prompt (c);
    while (!c->quit) {
        zmq_pollitem_t items [] = {
            { NULL, sb_screen_fd (c->screen), ZMQ_POLLIN, 0 },
            { NULL, sfd, ZMQ_POLLIN, 0 },
            { sb_sub_socket (c->sub), 0, ZMQ_POLLIN, 0 },
        };
        if (zmq_poll (items, 3, 200) < 0 && errno != EINTR)
            break;
        if (items [1].revents & ZMQ_POLLIN) {
            struct signalfd_siginfo si;
            while (read (sfd, &si, sizeof si) == (ssize_t) sizeof si) {
                if (si.ssi_signo == SIGTERM) {
                    c->quit = true;
                    c->exit_code = 128 + SIGTERM;
                }
                else
                    s_on_interrupt (c);
            }
        }
        if (!c->quit && (items [0].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
            sb_screen_read (c->screen);
        if (!c->quit)
            s_on_event (c);
        /* a short wait: the keyboard must not freeze on a server that went */
        if (!c->quit && c->run [0] && sb_mono_ms () - c->quiet_since >= QUIET_CHECK_MS)
            s_replay (c, QUIET_CHECK_MS);
    }
    if (c->run [0] && c->exit_code == 0)
        s_say (c, "left; run %s goes on (stop it with: switchboard cancel %s)", c->run, c->run);
    sb_screen_destroy (&c->screen);
    sb_cli_images_line (&c->images, "clear", NULL, 0);
    close (sfd);
    return c->exit_code;
}

int
sb_cmd_chat (int argc, char **argv)
{
    sb_chat_opts_t o;
    int rc = sb_chat_parse (argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    chat_t c = { .exit_code = 0 };
    sb_interaction_who ("chat", c.who, sizeof c.who);
    c.bus = sb_cli_connect ("chat", o.connect, o.data);
    if (!c.bus)
        return 1;
    if (o.session)
        rc = sb_cli_resolve ("chat", c.bus, SB_CLI_SESSION, o.session, c.sid);
    else
        rc = s_new_session (&c, &o);
    char ep [4200], err [512];
    if (!rc && sb_cli_endpoint (o.connect, o.data, "pub", ep, sizeof ep, err, sizeof err))
        rc = sb_cli_fail ("chat", "%s", err);
    if (!rc && !(c.sub = sb_sub_new (ep)))
        rc = sb_cli_fail ("chat", "cannot subscribe at %s", ep);
    if (!rc) {
        char topic [64];
        snprintf (topic, sizeof topic, "session/%s", c.sid);
        sb_sub_subscribe (c.sub, topic);
        rc = s_attach (&c);
    }
    if (!rc)
        rc = s_loop (&c);
    while (c.nasked)
        s_drop_asked (&c, c.nasked - 1);
    sb_transcript_destroy (&c.t);
    sb_sub_destroy (&c.sub);
    sb_bus_destroy (&c.bus);
    return rc;
}

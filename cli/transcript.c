/*  cli/transcript.c — see transcript.h. Single-threaded: the CLI's main
    thread feeds entries and ticks. */
#include "schemas/run_status.h"
#include "cli/transcript.h"
#include "cli/chat.h"
#include "common/log.h"
#include "schemas/json.h"
#include "schemas/schema.h"
#include "schemas/vocab.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RESULT_LINES    10      /* a tool result shows at most this many lines */
#define LINE_MAX_BYTES  240     /* a shown line is cut there */
#define CALL_MAX_BYTES  300     /* a tool call's arguments are cut there */
#define PENDING_MAX     16      /* tool calls awaiting their result */

typedef enum { BLOCK_NONE, BLOCK_TEXT, BLOCK_THINKING } block_t;

typedef struct {
    char call_id [129];
    char name [65];
    char what [160];            /* "shell: make test", for the status line */
    int64_t seen_ms;
} pending_t;

struct sb_transcript {
    sb_transcript_opts_t opts;
    char run_id [33];
    block_t block;
    bool at_bol;                /* the cursor is at the start of a line */
    bool step_text;             /* text deltas seen since the last text.done */
    char last_call [129];       /* the call just printed, while nothing followed it */
    sb_transcript_tally_t tally;
    pending_t pending [PENDING_MAX];
    int npending;
    int64_t tool_since;         /* when the first pending call started */
    size_t status_width;        /* columns of the status line on screen, 0: none */
    int64_t status_secs;
};

void
sb_transcript_opts_stdout (sb_transcript_opts_t *o, const char *run_id)
{
    const char *no_color = getenv ("NO_COLOR");
    const char *term = getenv ("TERM");
    bool tty = isatty (1);
    memset (o, 0, sizeof *o);
    o->run_id = run_id;
    o->live = tty;
    o->color = tty && !(no_color && *no_color) && !(term && strcmp (term, "dumb") == 0);
}

sb_transcript_t *
sb_transcript_new (const sb_transcript_opts_t *opts)
{
    sb_transcript_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->opts = *opts;
    snprintf (self->run_id, sizeof self->run_id, "%s", opts->run_id ? opts->run_id : "");
    self->opts.run_id = self->run_id [0] ? self->run_id : NULL;
    self->at_bol = true;
    return self;
}

void
sb_transcript_destroy (sb_transcript_t **self_p)
{
    if (*self_p) {
        free (*self_p);
        *self_p = NULL;
    }
}

const sb_transcript_tally_t *
sb_transcript_tally (const sb_transcript_t *self)
{
    return &self->tally;
}

/* ------------------------------------------------------------------ */
/*  Writing */

static const char *
s_attr (sb_transcript_t *self, const char *code)
{
    return self->opts.color ? code : "";
}
#define BOLD(t)  s_attr (t, "\033[1m")
#define DIM(t)   s_attr (t, "\033[2m")
#define OFF(t)   s_attr (t, "\033[0m")

/*  Writes model or tool text. Control characters other than newline and
    tab, and the C1 range (U+0080-U+009F, which some terminals read as
    CSI), become '?': a tool's output must not drive the terminal. A \r is
    dropped, so CRLF output reads as lines. */
static void
s_put (sb_transcript_t *self, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char) s [k];
        bool bad = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f;
        bool c1 = c == 0xc2 && k + 1 < n && (unsigned char) s [k + 1] >= 0x80
               && (unsigned char) s [k + 1] <= 0x9f;
        if (!bad && !c1 && c != '\r')
            continue;
        fwrite (s + run, 1, k - run, stdout);
        if (c != '\r')
            fputc ('?', stdout);
        if (c1)
            k++;
        run = k + 1;
    }
    fwrite (s + run, 1, n - run, stdout);
    if (n > 0)
        self->at_bol = s [n - 1] == '\n';
}

/*  s_put on one line: newlines and tabs become spaces. */
static void
s_put_oneline (sb_transcript_t *self, const char *s, size_t n)
{
    char buf [512];
    while (n > 0) {
        size_t k = n < sizeof buf ? n : sizeof buf;
        for (size_t j = 0; j < k; j++)
            buf [j] = s [j] == '\n' || s [j] == '\t' ? ' ' : s [j];
        s_put (self, buf, k);
        s += k;
        n -= k;
    }
}

/*  A field of an entry inside a line of ours: scrubbed, on one line. */
static void
s_field (sb_transcript_t *self, const char *s)
{
    s_put_oneline (self, s ? s : "?", s ? strlen (s) : 1);
}

/*  The status line goes before anything else is written. Without escape
    codes it is overwritten with spaces. */
static void
s_clear_status (sb_transcript_t *self)
{
    if (!self->status_width)
        return;
    if (self->opts.color)
        fputs ("\r\033[K", stdout);
    else
        printf ("\r%*s\r", (int) self->status_width, "");
    self->status_width = 0;
}

static void
s_endline (sb_transcript_t *self)
{
    s_clear_status (self);
    if (!self->at_bol)
        fputc ('\n', stdout);
    if (self->block != BLOCK_NONE && self->opts.color)
        fputs (OFF (self), stdout);
    self->at_bol = true;
    self->block = BLOCK_NONE;
    self->last_call [0] = 0;
}

/*  The length of s cut to at most max bytes on a UTF-8 boundary. */
static size_t
s_utf8_cut (const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    while (n > 0 && ((unsigned char) s [n] & 0xc0) == 0x80)
        n--;
    return n;
}

/*  One line of tool output, indented, cut at LINE_MAX_BYTES. */
static void
s_result_line (sb_transcript_t *self, const char *s, size_t len)
{
    fputs ("    ", stdout);
    size_t n = s_utf8_cut (s, len, LINE_MAX_BYTES);
    s_put (self, s, n);
    fputs (n < len ? "…\n" : "\n", stdout);
    self->at_bol = true;
}

/*  The length of a tool's output without its trailing line ends. */
static size_t
s_trimmed (const char *out)
{
    size_t len = out ? strlen (out) : 0;
    while (len > 0 && (out [len - 1] == '\n' || out [len - 1] == '\r'))
        len--;
    return len;
}

/*  Up to RESULT_LINES lines of output: all of them, or the head and the
    tail around a marker that counts what was left out. */
static void
s_result_body (sb_transcript_t *self, const char *out)
{
    size_t len = s_trimmed (out);
    if (len == 0)
        return;
    size_t lines = 1;
    for (size_t k = 0; k < len; k++)
        lines += out [k] == '\n';
    size_t head = lines <= RESULT_LINES ? lines : RESULT_LINES / 2;
    size_t tail_from = lines <= RESULT_LINES ? lines : lines - (RESULT_LINES - head);
    const char *p = out, *end = out + len;
    for (size_t line = 0; line < lines; line++) {
        const char *nl = memchr (p, '\n', (size_t) (end - p));
        size_t n = nl ? (size_t) (nl - p) : (size_t) (end - p);
        if (line < head || line >= tail_from)
            s_result_line (self, p, n);
        else
        if (line == head)
            printf ("    %s… %zu line%s …%s\n", DIM (self), tail_from - head, tail_from - head == 1 ? "" : "s",
                    OFF (self));
        p = nl ? nl + 1 : end;
    }
}

/*  For text printed as is (the status line, a result's label): control
    characters, C1 included, are taken out in place. */
static void
s_scrub (char *s)
{
    for (unsigned char *c = (unsigned char *) s; *c; c++) {
        if (*c < 0x20 || *c == 0x7f)
            *c = ' ';
        else
        if (*c == 0xc2 && c [1] >= 0x80 && c [1] <= 0x9f)
            c [0] = c [1] = '?';
    }
}

/*  "shell: make test" or "read_file src/a.c": what a call runs, for the
    status line. */
static void
s_describe_call (const char *name, const char *arguments, char *out, size_t n)
{
    json_t *args = arguments ? json_loads (arguments, 0, NULL) : NULL;
    const char *detail = NULL;
    if (json_is_object (args)) {
        static const char *keys [] = { "command", "path", "pattern", "query" };
        for (size_t k = 0; k < sizeof keys / sizeof keys [0] && !detail; k++)
            detail = json_string_value (json_object_get (args, keys [k]));
    }
    char buf [120];
    size_t len = detail ? strlen (detail) : 0;
    size_t cut = s_utf8_cut (detail ? detail : "", len, sizeof buf - 4);
    snprintf (buf, sizeof buf, "%.*s%s", (int) cut, detail ? detail : "", cut < len ? "…" : "");
    snprintf (out, n, "%s%s%s", name ? name : "tool", buf [0] ? ": " : "", buf);
    s_scrub (out);
    json_decref (args);
}

/* ------------------------------------------------------------------ */
/*  Entries */

static void
s_on_tool_call (sb_transcript_t *self, const sb_val_t *body)
{
    const char *name = sb_get_str (body, "name");
    const char *args = sb_get_str (body, "arguments");
    s_endline (self);
    printf ("%s→ ", BOLD (self));
    s_put_oneline (self, name ? name : "?", name ? strlen (name) : 1);
    printf ("%s ", OFF (self));
    size_t len = args ? strlen (args) : 0;
    size_t cut = s_utf8_cut (args ? args : "", len, CALL_MAX_BYTES);
    s_put_oneline (self, args ? args : "", cut);
    fputs (cut < len ? "…\n" : "\n", stdout);
    self->at_bol = true;
    snprintf (self->last_call, sizeof self->last_call, "%s",
              sb_get_str (body, "call_id") ? sb_get_str (body, "call_id") : "");
    if (self->npending < PENDING_MAX) {
        pending_t *p = &self->pending [self->npending++];
        snprintf (p->call_id, sizeof p->call_id, "%s", self->last_call);
        snprintf (p->name, sizeof p->name, "%s", name ? name : "?");
        s_scrub (p->name);
        s_describe_call (name, args, p->what, sizeof p->what);
        p->seen_ms = sb_mono_ms ();
        if (self->npending == 1)
            self->tool_since = p->seen_ms;
    }
}

static void
s_on_tool_result (sb_transcript_t *self, const sb_val_t *ev, const sb_val_t *body)
{
    const char *call_id = sb_get_str (body, "call_id");
    /* a result that does not follow its call names the tool */
    char label [80] = "";
    bool adjacent = call_id && strcmp (self->last_call, call_id) == 0;
    for (int k = 0; k < self->npending; k++) {
        if (call_id && strcmp (self->pending [k].call_id, call_id) == 0) {
            if (!adjacent)
                snprintf (label, sizeof label, "%s: ", self->pending [k].name);
            memmove (&self->pending [k], &self->pending [k + 1],
                     (size_t) (self->npending - k - 1) * sizeof self->pending [0]);
            self->npending--;
            /* the next call runs from now on */
            self->tool_since = sb_mono_ms ();
            break;
        }
    }
    bool refused = sb_get_bool (body, "refused", false);
    bool mutating = sb_get_bool (body, "mutating", false);
    const char *policy = sb_get_str (body, "policy");
    const char *fix = sb_get_str (body, "fix");
    sb_transcript_tally_t *t = &self->tally;
    t->tools++;
    t->refused += refused;
    t->mutating += mutating;
    t->mutating_refused += mutating && refused;
    if (refused) {
        char dflt [160];
        snprintf (dflt, sizeof dflt, "switchboard sessions update %s --approval yolo",
                  sb_get_str (ev, "session_id") ? sb_get_str (ev, "session_id") : "SESSION");
        snprintf (t->policy, sizeof t->policy, "%s", policy ? policy : "?");
        snprintf (t->fix, sizeof t->fix, "%s", fix ? fix : dflt);
        s_scrub (t->policy);
        s_scrub (t->fix);
    }

    s_endline (self);
    const char *out = sb_get_str (body, "output");
    if (refused)
        printf ("%s  ← %srefused by the approval policy '%s'%s\n", DIM (self), label, t->policy, OFF (self));
    else {
        char ec [32] = "";
        if (sb_get (body, "exit_code"))
            snprintf (ec, sizeof ec, ", exit %lld", (long long) sb_get_int (body, "exit_code", 0));
        printf ("%s  ← %s%s%s, %llu ms%s%s\n", DIM (self), label,
                sb_get_bool (body, "ok", false) ? "ok" : "error", ec,
                (unsigned long long) sb_get_uint (body, "duration_ms", 0), s_trimmed (out) ? "" : ", no output",
                OFF (self));
    }
    if (self->opts.color)
        fputs (DIM (self), stdout);
    s_result_body (self, out ? out : "");
    if (refused)
        printf ("    allow it: %s\n", t->fix);
    if (self->opts.color)
        fputs (OFF (self), stdout);
}

/*  Without a followed run, every run's end gets its own refusal line. */
static void
s_refusal_note (sb_transcript_t *self)
{
    const sb_transcript_tally_t *t = &self->tally;
    if (t->mutating == 0 || t->mutating_refused < t->mutating)
        return;
    printf ("%severy change this run tried (%u) was refused by the approval policy '%s'; "
            "to allow changes: %s%s\n", BOLD (self), t->mutating, t->policy, t->fix, OFF (self));
}

static int
s_on_run_status (sb_transcript_t *self, const sb_val_t *body)
{
    const char *status = sb_get_str (body, "status");
    const char *reason = sb_get_str (body, "reason");
    s_endline (self);
    printf ("%s[run ", DIM (self));
    s_field (self, sb_get_str (body, "run_id"));
    fputc (' ', stdout);
    s_field (self, status);
    if (reason) {
        fputs (": ", stdout);
        s_field (self, reason);
    }
    printf ("]%s\n", OFF (self));
    self->at_bol = true;
    if (!status || !sb_run_status_final (status))
        return 0;
    self->npending = 0;
    sb_transcript_tally_t *t = &self->tally;
    /* the run's own account, when the entry carries it (the usage
       entries miss a call the provider refused) */
    if (sb_get (body, "steps"))
        t->steps = sb_get_uint (body, "steps", 0);
    if (sb_get (body, "input_tokens")) {
        t->in_tokens = sb_get_uint (body, "input_tokens", 0);
        t->out_tokens = sb_get_uint (body, "output_tokens", 0);
        t->tokens_known = true;
    }
    snprintf (t->final, sizeof t->final, "%s", status);
    snprintf (t->reason, sizeof t->reason, "%s", reason ? reason : "");
    s_scrub (t->final);
    s_scrub (t->reason);
    if (self->opts.run_id)
        return 1;
    s_refusal_note (self);
    memset (t, 0, sizeof *t);
    return 0;
}

static void
s_on_text (sb_transcript_t *self, block_t block, const char *text)
{
    if (!text || !*text)
        return;
    if (self->block != block) {
        s_endline (self);
        if (block == BLOCK_THINKING)
            printf ("%sthinking: ", DIM (self));
        self->block = block;
    }
    s_clear_status (self);
    s_put (self, text, strlen (text));
}

static void
s_on_session (sb_transcript_t *self, const char *kind, const sb_val_t *body)
{
    const sb_val_t *s = sb_get_map (body, "session");
    s_endline (self);
    if (strcmp (kind, "session.created") == 0) {
        printf ("%s[session created: workspace ", DIM (self));
        s_field (self, sb_get_str (s, "workspace"));
        fputs (", approval ", stdout);
        s_field (self, sb_get_str (s, "approval_policy") ? sb_get_str (s, "approval_policy") : "default");
        printf ("]%s\n", OFF (self));
        self->at_bol = true;
        return;
    }
    const sb_val_t *changed = sb_get_array (body, "changed");
    printf ("%s[session updated:", DIM (self));
    for (uint32_t k = 0; changed && k < changed->len; k++) {
        const sb_val_t *c = sb_array_at (changed, k);
        const char *field = c->type == SB_V_STR ? c->v.s : "?";
        const sb_val_t *now = sb_get (s, field);
        fputs (k ? ", " : " ", stdout);
        s_field (self, field);
        if (now && now->type == SB_V_STR) {
            fputc ('=', stdout);
            s_field (self, now->v.s);
        }
    }
    printf ("%s]%s\n", changed && changed->len ? "" : " status", OFF (self));
    self->at_bol = true;
}

/*  An approval a run waits for, and its answer, as a person reads them:
    what the call would do and how to answer, then who answered
    (docs/approvals.md). */
static void
s_on_approval (sb_transcript_t *self, const char *kind, const sb_val_t *body)
{
    const char *id = sb_get_str (body, "interaction_id");
    s_endline (self);
    if (strcmp (kind, "approval.requested") == 0) {
        char what [160];
        s_describe_call (sb_get_str (body, "tool"), sb_get_str (body, "arguments"), what, sizeof what);
        printf ("%s? approval needed: %s%s\n", BOLD (self), what, OFF (self));
        printf ("%s  answer: switchboard resolve ", DIM (self));
        s_field (self, id);
        printf (" --approve|--reject [--feedback TEXT]%s\n", OFF (self));
    }
    else {
        const char *fb = sb_get_str (body, "feedback");
        printf ("%s  approval ", DIM (self));
        s_field (self, id);
        fputc (' ', stdout);
        s_field (self, sb_get_str (body, "status"));
        fputs (" by ", stdout);
        s_field (self, sb_get_str (body, "resolved_by"));
        if (fb) {
            fputs (": ", stdout);
            s_field (self, fb);
        }
        printf ("%s\n", OFF (self));
    }
    self->at_bol = true;
}

/*  What a rewind did, and what it could not undo (docs/checkpoints.md). */
static void
s_on_rewound (sb_transcript_t *self, const sb_val_t *body)
{
    s_endline (self);
    const sb_val_t *nr = sb_get_array (body, "not_restored"), *fx = sb_get_array (body, "effects");
    bool undo = sb_get_bool (body, "undo", false), conversation = sb_get_bool (body, "conversation", false);
    printf ("%s[%s", DIM (self), undo ? "rewind undone" : "rewound");
    if (sb_get_bool (body, "code", true))
        printf ("%s to the checkpoint after seq %llu: %llu restored, %llu removed", undo ? ", back" : "",
                (unsigned long long) sb_get_uint (body, "checkpoint_seq", 0),
                (unsigned long long) sb_get_uint (body, "restored_total", 0),
                (unsigned long long) sb_get_uint (body, "removed_total", 0));
    if (conversation && undo)
        printf ("; the conversation's cut is lifted");
    else
    if (conversation)
        printf ("; the conversation ends at seq %llu", (unsigned long long) sb_get_uint (body, "to_seq", 0));
    for (uint32_t k = 0; nr && k < nr->len; k++)
        printf ("; not restored: %s (%s)", sb_get_str (sb_array_at (nr, k), "path"),
                sb_get_str (sb_array_at (nr, k), "why"));
    if (fx && fx->len)
        printf ("; %u tool call(s) after seq %llu may have had effects outside the workspace that were not "
                "undone:", (unsigned) fx->len, (unsigned long long) sb_get_uint (body, "to_seq", 0));
    for (uint32_t k = 0; fx && k < fx->len && k < 8; k++)
        printf (" %s", sb_get_str (sb_array_at (fx, k), "tool"));
    printf ("]%s\n", OFF (self));
    self->at_bol = true;
}

int
sb_transcript_feed (sb_transcript_t *self, const sb_val_t *ev)
{
    const char *kind = sb_get_str (ev, "kind");
    const sb_val_t *body = sb_get_map (ev, "body");
    if (!kind)
        return 0;
    if (self->opts.run_id) {
        /* a run's status entries name it in the body as well */
        const char *run = sb_get_str (ev, "run_id");
        if (!run)
            run = sb_get_str (body, "run_id");
        if (!run || strcmp (run, self->opts.run_id) != 0)
            return 0;
    }
    int rc = 0;
    if (strcmp (kind, "text.delta") == 0) {
        s_on_text (self, BLOCK_TEXT, sb_get_str (body, "text"));
        self->step_text = true;
    }
    else
    if (strcmp (kind, "thinking.delta") == 0)
        s_on_text (self, BLOCK_THINKING, sb_get_str (body, "text"));
    else
    if (strcmp (kind, "text.done") == 0) {
        /* the deltas already showed it; a tape without them still reads */
        if (!self->step_text)
            s_on_text (self, BLOCK_TEXT, sb_get_str (body, "text"));
        self->step_text = false;
    }
    else
    if (strcmp (kind, "tool.call") == 0)
        s_on_tool_call (self, body);
    else
    if (strcmp (kind, "tool.result") == 0)
        s_on_tool_result (self, ev, body);
    else
    if (strcmp (kind, "usage") == 0) {
        self->tally.in_tokens += sb_get_uint (body, "input_tokens", 0);
        self->tally.out_tokens += sb_get_uint (body, "output_tokens", 0);
        self->tally.tokens_known |= sb_get (body, "input_tokens") != NULL;
        self->tally.steps++;
    }
    else
    if (strcmp (kind, "run.status") == 0)
        rc = s_on_run_status (self, body);
    else
    if (strcmp (kind, "error") == 0) {
        s_endline (self);
        fputs ("error: ", stdout);
        s_field (self, sb_get_str (body, "code"));
        fputs (": ", stdout);
        const char *m = sb_get_str (body, "message");
        s_put (self, m ? m : "", m ? strlen (m) : 0);
        s_endline (self);
    }
    else
    if (strcmp (kind, "prompt") == 0) {
        s_endline (self);
        const char *text = sb_get_str (body, "text");
        printf ("%s> ", BOLD (self));
        s_put (self, text ? text : "", text ? strlen (text) : 0);
        fputs (OFF (self), stdout);
        s_endline (self);
    }
    else
    if (strcmp (kind, "prompt.steered") == 0) {
        /* a steer the run took at a step boundary (docs/queue.md) */
        s_endline (self);
        const char *text = sb_get_str (body, "text");
        printf ("%s> [steer, step %llu] ", BOLD (self), (unsigned long long) sb_get_uint (body, "step", 0));
        s_put (self, text ? text : "", text ? strlen (text) : 0);
        fputs (OFF (self), stdout);
        s_endline (self);
    }
    else
    if (strcmp (kind, "session.created") == 0 || strcmp (kind, "session.updated") == 0)
        s_on_session (self, kind, body);
    else
    if (strcmp (kind, "context.compacted") == 0) {
        /* one line, the summary itself is for the model (docs/compaction.md) */
        s_endline (self);
        const char *method = sb_get_str (body, "method");
        printf ("%s[context compacted (%s): %llu → %llu tokens]%s\n", DIM (self),
                sb_compact_method_from_name (method) == SB_COMPACT_SUMMARY ? "summarized" : "old tool output elided",
                (unsigned long long) sb_get_uint (body, "tokens_before", 0),
                (unsigned long long) sb_get_uint (body, "tokens_after", 0), OFF (self));
        self->at_bol = true;
    }
    else
    if (strcmp (kind, "session.rewound") == 0)
        s_on_rewound (self, body);
    else
    if (strncmp (kind, "approval.", 9) == 0)
        s_on_approval (self, kind, body);
    else
    if (strncmp (kind, "prompt.", 7) == 0 || strncmp (kind, "queue.", 6) == 0) {
        /* the queue in words, as the chat says it (cli/chat_words.c) */
        s_endline (self);
        const char *sid = sb_get_str (ev, "session_id");
        char line [640];
        sb_chat_queue_words (kind, body, sid ? sid : "SESSION", line, sizeof line);
        printf ("%s[%s]%s\n", DIM (self), line, OFF (self));
        self->at_bol = true;
    }
    else
    if (strcmp (kind, "note") == 0) {
        s_endline (self);
        char *j = body ? sb_json_dump (body) : NULL;
        printf ("%s[%s] ", DIM (self), kind);
        s_put (self, j ? j : "{}", j ? strlen (j) : 2);
        printf ("%s\n", OFF (self));
        self->at_bol = true;
        free (j);
    }
    /* turn.begin/end, tool.output (the result carries it), reasoning.state:
       nothing a person reads */
    fflush (stdout);
    return rc;
}

void
sb_transcript_tick (sb_transcript_t *self)
{
    if (!self->opts.live || self->npending == 0 || !self->at_bol)
        return;
    int64_t secs = (sb_mono_ms () - self->tool_since) / 1000;
    if (secs < 1 || (self->status_width && secs == self->status_secs))
        return;
    char line [256];
    int n = snprintf (line, sizeof line, "  … %s · %llds", self->pending [0].what, (long long) secs);
    /* columns, not bytes: the ellipsis and the dot take one each */
    size_t width = 0;
    for (int k = 0; k < n && line [k]; k++)
        width += ((unsigned char) line [k] & 0xc0) != 0x80;
    if (self->opts.color)
        printf ("\r%s%s%s\033[K", DIM (self), line, OFF (self));
    else
        printf ("\r%s%*s", line, self->status_width > width ? (int) (self->status_width - width) : 0, "");
    self->status_width = width;
    self->status_secs = secs;
    fflush (stdout);
}

void
sb_transcript_flush (sb_transcript_t *self)
{
    s_endline (self);
    fflush (stdout);
}

void
sb_transcript_tokens (const sb_transcript_tally_t *t, char *out, size_t size)
{
    if (t->tokens_known)
        snprintf (out, size, "tokens %llu in / %llu out", (unsigned long long) t->in_tokens,
                  (unsigned long long) t->out_tokens);
    else
        snprintf (out, size, "tokens unknown");
}

void
sb_transcript_summary (sb_transcript_t *self, double secs)
{
    s_endline (self);
    const sb_transcript_tally_t *t = &self->tally;
    bool why = t->reason [0] && sb_run_status_from_name (t->final) != SB_RUN_completed;
    char tokens [96];
    sb_transcript_tokens (t, tokens, sizeof tokens);
    printf ("%srun %s %s%s%s · steps %llu · %s · %.1f s", BOLD (self),
            self->run_id [0] ? self->run_id : "?", t->final [0] ? t->final : "unfinished",
            why ? ": " : "", why ? t->reason : "", (unsigned long long) t->steps, tokens, secs);
    if (t->refused)
        printf (" · %u tool%s refused", t->refused, t->refused == 1 ? "" : "s");
    printf ("%s\n", OFF (self));
    s_refusal_note (self);
    fflush (stdout);
}

/*  cli/chat.h — `switchboard chat`: an interactive terminal attached to a
    session (cli/chat.c), and its screen (cli/chat_screen.c).

    The screen keeps one input line at the bottom of the terminal, edited
    with libedit, while the run's transcript streams above it: everything
    printed goes through sb_screen, which hides the input line, prints
    whole lines (the last, unfinished one is redrawn in place as text
    arrives), and shows the input line again below them. On a terminal
    only; without one (a pipe), lines are read from stdin and output is
    written as it comes. Single-threaded: the chat's loop calls all of it. */
#ifndef SB_CLI_CHAT_H
#define SB_CLI_CHAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "schemas/codec.h"

typedef struct sb_screen sb_screen_t;

/*  Called with each line typed (the caller owns nothing: the line is
    freed after the call), or NULL at end of input (Ctrl-D). */
typedef void (sb_screen_line_fn) (const char *line, void *arg);

/*  Takes the terminal (when stdin and stdout are one) with `prompt`.
    NULL when out of memory. */
sb_screen_t *sb_screen_new (const char *prompt, sb_screen_line_fn *fn, void *arg);
/*  Gives the terminal back as it was. */
void sb_screen_destroy (sb_screen_t **self_p);

/*  True when the screen edits lines on a terminal. */
bool sb_screen_tty (const sb_screen_t *self);
/*  True when escape codes (color) may be written. */
bool sb_screen_color (const sb_screen_t *self);

/*  A FILE to print into; what is printed appears at sb_screen_flush. */
FILE *sb_screen_out (sb_screen_t *self);
/*  Prints what was written to sb_screen_out above the input line: whole
    lines, and the unfinished last one, redrawn as it grows. */
void sb_screen_flush (sb_screen_t *self);
/*  Ends an unfinished last line, so that what follows starts a line. */
void sb_screen_newline (sb_screen_t *self);

/*  Changes the input line's prompt (redrawn at once). */
void sb_screen_prompt (sb_screen_t *self, const char *prompt);
/*  Throws away what was typed on the input line so far. */
void sb_screen_clear_input (sb_screen_t *self);

/*  The descriptor to poll for input (-1 once a pipe ended), and the call
    to make when it is readable: it reads what is there and calls the line
    function for each line completed. */
int sb_screen_fd (const sb_screen_t *self);
void sb_screen_read (sb_screen_t *self);

/*  Called with each key pressed in key mode: a byte (4 for Ctrl-D, no
    escape sequences: arrows and the like are dropped). Returns true when
    the key was taken as an answer: what was typed after it is then thrown
    away, so that a habit such as "yes<Enter>" answers once, not three
    times. A key that turns back to lines (sb_screen_lines) and returns
    false leaves what was typed after it to the line. */
typedef bool (sb_screen_key_fn) (int key, void *arg);

/*  Key mode, on a terminal only (a pipe stays with lines): each key goes
    to fn at once, without Enter and without echo, as an approval is
    answered in Codex or Claude Code. The prompt stays on the input line;
    Ctrl-C still raises SIGINT. */
void sb_screen_keys (sb_screen_t *self, sb_screen_key_fn *fn, void *arg);
/*  Back to lines (nothing when in line mode already), with `typed` (or
    nothing when NULL) already on the input line. */
void sb_screen_lines (sb_screen_t *self, const char *typed);

/*  Adds a line to the history (Up/Down). */
void sb_screen_history (sb_screen_t *self, const char *line);

/*  The answers to an approval's question. */
typedef enum {
    SB_CHAT_UNKNOWN, SB_CHAT_YES, SB_CHAT_NO, SB_CHAT_ALWAYS, SB_CHAT_SESSION, SB_CHAT_FEEDBACK
} sb_chat_answer_t;

/*  What a line typed at the question means: its first word, y(es), n(o),
    a(lways), s(ession) or f(eedback) in any case, after any blanks; *rest
    points at the words after it (the feedback, "" when none). */
sb_chat_answer_t sb_chat_answer_parse (const char *line, const char **rest);

/*  Text of the tape for one line of the chat: at most max bytes of it
    (then "..."), control characters (escapes included) as spaces. */
void sb_chat_clean (const char *text, size_t max, char *out, size_t n);

/*  A queue entry of the tape (prompt.queued, .steered, .removed,
    .dequeued, queue.paused, .resumed; docs/queue.md) as one line of words
    in out: "queued (#1), to run when this run ends: TEXT", "the model took
    the steer at step 2: TEXT", ... A kind it does not know gives its name. */
void sb_chat_queue_words (const char *kind, const sb_val_t *body, const char *sid, char *out, size_t n);

int sb_cmd_chat (int argc, char **argv);

/*  cli/chat_form.c: an MCP server's elicitation asked field by field.
    Each field's prompt names its type, choices and default; a line is its
    value in that type (empty: the default, which interact fills in), or
    /decline or /cancel. */
typedef struct {
    json_t *schema;
    json_t *content;            /* the values typed so far */
    const char **names;         /* the fields, in the server's order */
    size_t n, k;                /* how many, and the one asked */
    char prompt [256];
} sb_chat_form_t;

typedef enum {
    SB_CHAT_FORM_NEXT,          /* taken; the prompt is the next field's */
    SB_CHAT_FORM_BAD,           /* not a value of the field: why says so */
    SB_CHAT_FORM_DONE,          /* the last field: *content is the answer (malloc'd JSON) */
    SB_CHAT_FORM_DECLINE,
    SB_CHAT_FORM_CANCEL
} sb_chat_form_step_t;

/*  Starts (again) at the first field of `schema` (JSON text); 0, or -1
    when it has none or cannot be read (then the question is answered
    the old way, y or n). */
int sb_chat_form_begin (sb_chat_form_t *f, const char *schema);
void sb_chat_form_end (sb_chat_form_t *f);
bool sb_chat_form_active (const sb_chat_form_t *f);
const char *sb_chat_form_prompt (const sb_chat_form_t *f);
sb_chat_form_step_t sb_chat_form_take (sb_chat_form_t *f, const char *line, char *why, size_t whylen,
                                       char **content);

/*  cli/chat_opts.c: chat's options. 0, -1 after --help, or a usage
    error's exit status. */
typedef struct {
    const char *connect, *data, *session;
    const char *workspace, *title, *provider, *model, *approval;
    unsigned long max_steps;
    int config_opts;
} sb_chat_opts_t;
int sb_chat_parse (int argc, char **argv, sb_chat_opts_t *o);

#endif

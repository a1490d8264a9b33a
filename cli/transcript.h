/*  cli/transcript.h — a session's tape as people read it.

    Used by `run`, `prompt --follow`, `resume --follow` and `events --text`.
    Deltas are merged into running text; thinking is marked "thinking:" in
    plain text, not only by terminal attributes; a tool result shows up to
    10 lines (head and tail around a "… N lines …" marker); a refused tool
    names its policy and the command that allows it (docs/sessions.md).

    Escape codes are written only when opts.color is set, and the live
    status line of a running tool only when opts.live is set: a pipe or a
    file gets plain, stable text. Control characters in model or tool
    output are never passed through to the terminal. */
#ifndef SB_CLI_TRANSCRIPT_H
#define SB_CLI_TRANSCRIPT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "schemas/codec.h"

typedef struct sb_transcript sb_transcript_t;

typedef struct {
    const char *run_id;         /* only this run's entries; NULL: every entry */
    bool color;                 /* bold and dim attributes (escape codes) */
    bool live;                  /* a terminal: the running-tool status line */
} sb_transcript_opts_t;

/*  What one run did, counted from its tool.result and usage entries (one
    per model call), then taken from its final run.status, which says. */
typedef struct {
    char final [16];            /* the final status once seen, else "" */
    char reason [512];
    uint64_t steps, in_tokens, out_tokens;
    bool tokens_known;          /* a call reported them: else "unknown", never 0 */
    unsigned tools, refused;    /* tool results; of them refused by the policy */
    unsigned mutating, mutating_refused;
    char policy [32];           /* of the last refusal */
    char fix [512];             /* the command that allows it */
} sb_transcript_tally_t;

/*  Options for stdout: color on a terminal unless NO_COLOR is set (to
    anything but "") or TERM is dumb; the status line on a terminal. */
void sb_transcript_opts_stdout (sb_transcript_opts_t *opts, const char *run_id);

/*  Returns NULL on allocation failure. Writes to stdout. */
sb_transcript_t *sb_transcript_new (const sb_transcript_opts_t *opts);
void sb_transcript_destroy (sb_transcript_t **self_p);

/*  Prints one tape entry (a `{seq, ts, session_id, run_id?, kind, body}`
    map). Returns 1 once the followed run reached a final status, else 0. */
int sb_transcript_feed (sb_transcript_t *self, const sb_val_t *event);

/*  Redraws the status line of a running tool when its elapsed second
    changed; call it at least every 200 ms while waiting. No-op unless
    opts.live. */
void sb_transcript_tick (sb_transcript_t *self);

/*  Ends a partial line and clears the status line. */
void sb_transcript_flush (sb_transcript_t *self);

const sb_transcript_tally_t *sb_transcript_tally (const sb_transcript_t *self);

/*  The closing lines of a followed run: "run ID STATUS · steps · tokens ·
    seconds · refused", then, when the run tried changes and the policy
    refused every one, a last line that says so with the fix command. */
/*  "tokens N in / M out", or "tokens unknown" when no model call of the
    run reported them, into out. */
void sb_transcript_tokens (const sb_transcript_tally_t *t, char *out, size_t size);

void sb_transcript_summary (sb_transcript_t *self, double secs);

#endif

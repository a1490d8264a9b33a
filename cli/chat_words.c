/*  cli/chat_words.c — the tape's queue entries in words, for the chat
    (docs/approvals.md, "The terminal"): what was queued or steered, taken,
    removed, paused or resumed, as a person reads it, never as JSON. */
#include "cli/chat.h"
#include "schemas/vocab.h"

#include <stdio.h>
#include <string.h>

/*  Text of the tape for one line of the chat (chat.h). */
void
sb_chat_clean (const char *text, size_t max, char *out, size_t n)
{
    snprintf (out, n, "%.*s%s", (int) max, text ? text : "", text && strlen (text) > max ? "..." : "");
    for (char *p = out; *p; p++)
        if ((unsigned char) *p < 0x20 || *p == 0x7f)
            *p = ' ';
}

/*  One line for a queue entry (chat.h). */
void
sb_chat_queue_words (const char *kind, const sb_val_t *body, const char *sid, char *out, size_t n)
{
    char cut [120], why [240], run [40];
    sb_chat_clean (sb_get_str (body, "text"), 100, cut, sizeof cut);
    sb_chat_clean (sb_get_str (body, "reason"), 200, why, sizeof why);
    sb_chat_clean (sb_get_str (body, "run_id"), 26, run, sizeof run);
    const char *reason = sb_get_str (body, "reason") ? why : NULL;
    unsigned long long position = sb_get_uint (body, "position", 0);
    unsigned long long queued = sb_get_uint (body, "queued", 0);
    const char *mode = sb_get_str (body, "mode");
    char what [80];
    sb_chat_clean (kind, 64, what, sizeof what);
    if (strcmp (kind, "prompt.queued") == 0 && sb_prompt_mode_from_name (mode) == SB_PROMPT_STEER)
        snprintf (out, n, "steering: the model reads it before its next step: %s", cut);
    else
    if (strcmp (kind, "prompt.queued") == 0 && reason)
        snprintf (out, n, "back in the queue (#%llu, %s): %s", position, reason, cut);
    else
    if (strcmp (kind, "prompt.queued") == 0)
        snprintf (out, n, "queued (#%llu), to run when this run ends: %s", position, cut);
    else
    if (strcmp (kind, "prompt.steered") == 0)
        snprintf (out, n, "the model took the steer at step %llu: %s",
                  (unsigned long long) sb_get_uint (body, "step", 0), cut);
    else
    if (strcmp (kind, "prompt.removed") == 0)
        snprintf (out, n, "a prompt was %s", reason ? reason : "removed from the queue");
    else
    if (strcmp (kind, "prompt.dequeued") == 0)
        snprintf (out, n, "the next queued prompt starts%s%s", *run ? " as run " : "", run);
    else
    if (strcmp (kind, "queue.paused") == 0)
        snprintf (out, n, "the queue is paused with %llu waiting: %s (switchboard queue resume %s)", queued,
                  reason ? reason : "no reason given", sid);
    else
    if (strcmp (kind, "queue.resumed") == 0)
        snprintf (out, n, "the queue goes on (%llu waiting)%s%s", queued, reason ? ": " : "", reason ? reason : "");
    else
        snprintf (out, n, "%s", what);  /* a queue entry this chat does not know: its name */
}

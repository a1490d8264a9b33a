/*  tests/unit/test_chat.c — what a line typed at an approval's question
    means in `switchboard chat` (cli/chat.c, sb_chat_answer_parse), and the
    tape's queue entries in words (cli/chat_words.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "cli/chat.h"

Test (chat, answers)
{
    static const struct {
        const char *line;
        sb_chat_answer_t answer;
        const char *rest;
    } s_cases [] = {
        { "y", SB_CHAT_YES, "" }, { "yes", SB_CHAT_YES, "" }, { "Y", SB_CHAT_YES, "" },
        { "  YES  ", SB_CHAT_YES, "" }, { "n", SB_CHAT_NO, "" }, { "no", SB_CHAT_NO, "" },
        { "n use make clean", SB_CHAT_NO, "use make clean" }, { "no\tnot now", SB_CHAT_NO, "not now" },
        { "a", SB_CHAT_ALWAYS, "" }, { "always", SB_CHAT_ALWAYS, "" }, { "s", SB_CHAT_SESSION, "" },
        { "Session", SB_CHAT_SESSION, "" }, { "f", SB_CHAT_FEEDBACK, "" },
        { "f   the file is called b.txt", SB_CHAT_FEEDBACK, "the file is called b.txt" },
        { "y fine, but be quick", SB_CHAT_YES, "fine, but be quick" },
        { "", SB_CHAT_UNKNOWN, "" }, { "   ", SB_CHAT_UNKNOWN, "" }, { "maybe", SB_CHAT_UNKNOWN, "" },
        { "yess", SB_CHAT_UNKNOWN, "" }, { "ya", SB_CHAT_UNKNOWN, "" }, { "nope", SB_CHAT_UNKNOWN, "" },
        { "!y", SB_CHAT_UNKNOWN, "" }, { "fe", SB_CHAT_UNKNOWN, "" },
    };
    for (size_t k = 0; k < sizeof s_cases / sizeof s_cases [0]; k++) {
        const char *rest = NULL;
        sb_chat_answer_t a = sb_chat_answer_parse (s_cases [k].line, &rest);
        cr_expect_eq (a, s_cases [k].answer, "'%s' read as %d, not %d", s_cases [k].line, a, s_cases [k].answer);
        cr_expect_not_null (rest);
        if (a != SB_CHAT_UNKNOWN && rest)
            cr_expect_str_eq (rest, s_cases [k].rest, "'%s': the words after are '%s'", s_cases [k].line, rest);
    }
}

/*  A map of string and number fields, as the codec gives a body. */
#define STR(text) { .type = SB_V_STR, .len = sizeof (text) - 1, .v.s = (text) }
#define UINT(n) { .type = SB_V_UINT, .v.u = (n) }

Test (chat, queue_entries_in_words)
{
    const sb_val_t queued_kv [] = { STR ("text"), STR ("second task"), STR ("mode"), STR ("queue"),
                                    STR ("position"), UINT (2) };
    const sb_val_t steer_kv [] = { STR ("text"), STR ("look at\x1b[31m the README"), STR ("mode"), STR ("steer") };
    const sb_val_t taken_kv [] = { STR ("text"), STR ("look at the README"), STR ("step"), UINT (3) };
    const sb_val_t paused_kv [] = { STR ("reason"), STR ("the run failed"), STR ("queued"), UINT (4) };
    const sb_val_t queued = { .type = SB_V_MAP, .len = 3, .v.a = queued_kv };
    const sb_val_t steer = { .type = SB_V_MAP, .len = 2, .v.a = steer_kv };
    const sb_val_t taken = { .type = SB_V_MAP, .len = 2, .v.a = taken_kv };
    const sb_val_t paused = { .type = SB_V_MAP, .len = 2, .v.a = paused_kv };
    static const char *sid = "01JD00000000000000000000SS";
    const struct {
        const char *kind;
        const sb_val_t *body;
        const char *want;
    } s_cases [] = {
        { "prompt.queued", &queued, "queued (#2), to run when this run ends: second task" },
        { "prompt.queued", &steer, "steering: the model reads it before its next step: look at [31m the README" },
        { "prompt.steered", &taken, "the model took the steer at step 3: look at the README" },
        { "queue.paused", &paused, "the queue is paused with 4 waiting: the run failed "
                                   "(switchboard queue resume 01JD00000000000000000000SS)" },
        { "queue.resumed", NULL, "the queue goes on (0 waiting)" },
        { "prompt.removed", NULL, "a prompt was removed from the queue" },
        { "queue.\x1b[2Jnew", NULL, "queue. [2Jnew" },
    };
    for (size_t k = 0; k < sizeof s_cases / sizeof s_cases [0]; k++) {
        char line [600];
        sb_chat_queue_words (s_cases [k].kind, s_cases [k].body, sid, line, sizeof line);
        cr_expect_str_eq (line, s_cases [k].want, "%s", s_cases [k].kind);
        cr_expect_null (strchr (line, '{'), "JSON in '%s'", line);
        cr_expect_null (strchr (line, '\x1b'), "an escape in '%s'", line);
    }
}

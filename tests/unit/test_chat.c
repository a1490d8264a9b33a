/*  tests/unit/test_chat.c — what a line typed at an approval's question
    means in `switchboard chat` (cli/chat.c, sb_chat_answer_parse). */
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

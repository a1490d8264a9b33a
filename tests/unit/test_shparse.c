/*  tests/unit/test_shparse.c — shell command lines as the approval rules
    see them (common/shparse.h, actors/exec/policy_shell.c): the parser's
    words and flags, then a table of hostile commands decided under a set
    of allow rules (none may slip past) and under a deny rule (none may
    run unasked). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exec/policy.h"
#include "common/shparse.h"

#define AL SB_POLICY_ALLOW
#define AS SB_POLICY_ASK
#define DE SB_POLICY_DENY

static sb_policy_action_t
s_decide (sb_policy_mode_t mode, const sb_policy_rule_t *rules, size_t n, const char *command)
{
    json_t *j = json_pack ("{ss}", "command", command);
    char *args = json_dumps (j, JSON_COMPACT);
    json_decref (j);
    sb_policy_key_t *key = sb_policy_key_new ("shell", args, "/ws");
    cr_assert (key);
    sb_policy_decision_t d = sb_policy_decide (mode, rules, n, NULL, "shell", key);
    sb_policy_key_destroy (&key);
    free (args);
    return d.action;
}

//  The words of command k, joined by '|'.
static char *
s_words (const sb_sh_t *sh, size_t k)
{
    static char buf [1024];
    buf [0] = 0;
    for (size_t a = 0; a < sh->cmds [k].argc; a++)
        snprintf (buf + strlen (buf), sizeof buf - strlen (buf), "%s%s", a ? "|" : "", sh->cmds [k].argv [a]);
    return buf;
}

static sb_sh_t *
s_parse (const char *text)
{
    sb_sh_t *sh = sb_sh_parse (text, strlen (text));
    cr_assert (sh);
    return sh;
}

Test (shparse, words_quotes_and_flags)
{
    sb_sh_t *sh = s_parse ("r''m  -rf\t\"a b\" c\\ d 'e'\"f\"");
    cr_assert_str_eq (sh->error, "");
    cr_assert_eq (sh->ncmds, 1);
    cr_assert_str_eq (s_words (sh, 0), "rm|-rf|a b|c d|ef");
    cr_assert_not_null (sb_sh_whole (sh));
    sb_sh_destroy (&sh);

    sh = s_parse ("A=1 B=\"x y\" git status > out");
    cr_assert_eq (sh->cmds [0].nassigns, 2);
    cr_assert_str_eq (sh->cmds [0].assigns [1], "B=x y");
    cr_assert_str_eq (s_words (sh, 0), "git|status");
    cr_assert (sh->cmds [0].flags & SB_SH_ASSIGN);
    cr_assert (sh->cmds [0].flags & SB_SH_REDIR);
    cr_assert_null (sb_sh_whole (sh));
    sb_sh_destroy (&sh);

    //  substitutions are commands of their own, nested
    sh = s_parse ("echo $(id -u) `whoami` \"$(date)\"");
    cr_assert_eq (sh->ncmds, 4);
    cr_assert_str_eq (s_words (sh, 0), "id|-u");
    cr_assert (sh->cmds [0].flags & SB_SH_NESTED);
    cr_assert_str_eq (s_words (sh, 3), "echo|||");     //  what expands is not known
    cr_assert (sh->cmds [3].flags & SB_SH_SUBST);
    cr_assert_eq (sh->ntop, 1);
    sb_sh_destroy (&sh);

    //  what sh -c, sudo, xargs and find -exec run
    sh = s_parse ("sudo -u root sh -c 'rm -rf x; ls' | xargs -n1 touch; find . -exec cat {} +");
    cr_assert_str_eq (sh->error, "");
    const char *want [] = { "rm|-rf|x", "ls", "sh|-c|rm -rf x; ls", "sudo|-u|root|sh|-c|rm -rf x; ls",
                            "touch", "xargs|-n1|touch", "cat|{}", "find|.|-exec|cat|{}|+" };
    bool seen [8] = { false };
    for (size_t k = 0; k < sh->ncmds; k++)
        for (size_t w = 0; w < 8; w++)
            if (strcmp (s_words (sh, k), want [w]) == 0)
                seen [w] = true;
    for (size_t w = 0; w < 8; w++)
        cr_assert (seen [w], "missing %s", want [w]);
    sb_sh_destroy (&sh);

    //  a comment ends the line; a line continuation joins
    sh = s_parse ("git sta\\\ntus # ; rm -rf /");
    cr_assert_eq (sh->ncmds, 1);
    cr_assert_str_eq (s_words (sh, 0), "git|status");
    sb_sh_destroy (&sh);
}

Test (shparse, errors_and_limits)
{
    const char *bad [] = {
        "echo 'a", "echo \"a", "echo $(a", "echo `a", "echo )", "(echo a", "cat <<EOF\nx\nEOF", "echo $'\\x41'",
        "echo $((1+2))", "case a in a) rm;; esac", "f() { rm x; }", "echo ${a", "ls >", "echo \"$(\"",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        sb_sh_t *sh = s_parse (bad [k]);
        cr_assert_neq (sh->error [0], 0, "parsed: %s", bad [k]);
        cr_assert_null (sb_sh_whole (sh));
        sb_sh_destroy (&sh);
    }
    //  too deep
    char deep [256] = "";
    for (int k = 0; k < SB_SH_DEPTH_MAX + 2; k++)
        strcat (deep, "$(");
    strcat (deep, "x");
    for (int k = 0; k < SB_SH_DEPTH_MAX + 2; k++)
        strcat (deep, ")");
    sb_sh_t *sh = s_parse (deep);
    cr_assert (strstr (sh->error, "deep"), "%s", sh->error);
    sb_sh_destroy (&sh);
    //  too long, too many commands, a NUL
    char *big = malloc (SB_SH_TEXT_MAX + 2);
    memset (big, 'a', SB_SH_TEXT_MAX + 1);
    big [SB_SH_TEXT_MAX + 1] = 0;
    sh = sb_sh_parse (big, SB_SH_TEXT_MAX + 1);
    cr_assert (strstr (sh->error, "longer"));
    sb_sh_destroy (&sh);
    for (size_t k = 0; k + 2 <= SB_SH_TEXT_MAX; k += 2)
        big [k] = 'a', big [k + 1] = ';';
    sh = sb_sh_parse (big, SB_SH_TEXT_MAX);
    cr_assert (strstr (sh->error, "commands"), "%s", sh->error);
    sb_sh_destroy (&sh);
    free (big);
    sh = sb_sh_parse ("ls\0rm", 5);
    cr_assert (strstr (sh->error, "NUL"));
    sb_sh_destroy (&sh);
}

//  Each command, decided (a) in auto under allow rules for read-only
//  commands, (b) in yolo under the deny rule `*rm *`.
static const struct {
    const char *cmd;
    sb_policy_action_t a, b;
} s_table [] = {
    //  plain commands the rules mean
    { "git status", AL, AL },
    { "git status --short", AL, AL },
    { "git  status\t-s", AL, AL },
    { "git diff HEAD~1", AL, AL },
    { "ls -la src", AL, AL },
    { "echo hello world", AL, AL },
    { "git status 2>&1", AL, AL },
    { "git status >/dev/null", AL, AL },
    { "ls -la > /dev/null 2>&1", AL, AL },
    { "ls 1>&2", AL, AL },
    { "git status\n", AL, AL },
    { "git status;", AL, AL },
    { "git status # ; rm -rf /", AL, AL },
    { "git sta\\\ntus", AL, AL },
    { "g''it status", AL, AL },
    { "\"git\" status", AL, AL },
    { "find . -name x", AL, AL },
    { "lsof", AL, AL },
    { "cat .env", AL, AL },
    { "echo ok # ; rm -rf x", AL, AL },
    //  operators, substitutions, redirections, assignments: never allowed by a rule
    { "git status; touch m", AS, AL },
    { "git status && touch m", AS, AL },
    { "git status || touch m", AS, AL },
    { "git status | sh", AS, AS },
    { "git status $(touch m)", AS, AL },
    { "git status `touch m`", AS, AL },
    { "git status\ntouch m", AS, AL },
    { "git status\r\ntouch m", AS, AL },
    { "git status\\\n; touch m", AS, AL },
    { "git status & touch m", AS, AL },
    { "git status &", AS, AL },
    { "echo hi; git status", AS, AL },
    { "git status | cat", AS, AL },
    { "git diff | tee m", AS, AL },
    { "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.status GIT_CONFIG_VALUE_0='!touch m' git status", AS, AL },
    { "GIT_DIR=/tmp git status", AS, AL },
    { "git status > m", AS, AL },
    { "git status >> m", AS, AL },
    { "git status 2> m", AS, AL },
    { "git status < /etc/passwd", AS, AL },
    { "ls 3>m", AS, AL },
    { "ls >&m", AS, AL },
    { "git status *", AS, AL },
    { "git status ?", AS, AL },
    { "git status [ab]", AS, AL },
    { "git status $HOME", AS, AL },
    { "git status ${HOME}", AS, AL },
    { "git status $IFS", AS, AL },
    { "git status \"$(touch m)\"", AS, AL },
    { "git status -- $(touch m)", AS, AL },
    { "echo $(touch m)", AS, AL },
    { "echo ${x:-$(touch m)}", AS, AL },
    { "echo \"`touch m`\"", AS, AL },
    { "echo `echo`", AS, AL },
    { "echo x > m", AS, AL },
    { "(git status)", AS, AL },
    { "{ git status; }", AS, AL },
    { "if true; then git status; fi", AS, AL },
    { "ls; touch m", AS, AL },
    //  options of read-only programs that write or run
    { "git diff --output=m", AS, AL },
    { "git diff --output m", AS, AL },
    { "git status '--output=m'", AS, AL },
    { "git diff HEAD --output=/tmp/x", AS, AL },
    { "git -c core.pager='touch m' diff", AS, AL },
    { "git -c alias.status='!touch m' status", AS, AL },
    { "git --exec-path=. status", AS, AL },
    { "git -C /tmp status", AS, AL },
    { "git -p status", AS, AL },
    { "git diff --ext-diff", AS, AL },
    { "git status --upload-pack=touch", AS, AL },
    { "git diff --no-index /etc/passwd x", AS, AL },
    { "git diff GIT_DIR=x", AS, AL },
    { "find . -exec touch m \\;", AS, AL },
    { "find . -execdir sh -c 'touch m' \\;", AS, AL },
    { "find . -delete", AS, AL },
    { "find . -fprint m", AS, AL },
    { "find . -ok touch m \\;", AS, AL },
    { "env git status", AS, AL },
    { "sudo git status", AS, AL },
    { "exec git status", AS, AL },
    //  what the parser does not read asks
    { "git status 'unbalanced", AS, AS },
    { "git status \"unbalanced", AS, AS },
    { "git status $(", AS, AS },
    { "git status `", AS, AS },
    { "git status <<EOF\nx\nEOF", AS, AS },
    { "git status $'\\x41'", AS, AS },
    { "git status $((1+1))", AS, AS },
    { "cat <(touch m)", AS, AS },
    //  a deny rule sees every simple command, unquoted
    { "rm -rf build", AS, DE },
    { "rm\t-rf build", AS, DE },
    { "r''m -rf build", AS, DE },
    { "'rm' -rf build", AS, DE },
    { "\"r\"m x", AS, DE },
    { "\\rm -rf build", AS, DE },
    { "r\\m -rf build", AS, DE },
    { "/bin/rm -rf build", AS, DE },
    { "rm", AS, DE },
    { "echo x; rm -rf build", AS, DE },
    { "git status; rm -rf x", AS, DE },
    { "true && rm -rf build", AS, DE },
    { "false || rm -rf build", AS, DE },
    { "echo $(rm -rf build)", AS, DE },
    { "echo `rm -rf build`", AS, DE },
    { "ls && `rm -rf x`", AS, DE },
    { "(rm -rf build)", AS, DE },
    { "if true; then rm -rf build; fi", AS, DE },
    { "for f in a; do rm -rf $f; done", AS, DE },
    { "sh -c 'rm -rf build'", AS, DE },
    { "bash -c \"rm -rf build\"", AS, DE },
    { "bash -lc 'rm -rf build'", AS, DE },
    { "sh -c 'sh -c \"rm -rf build\"'", AS, DE },
    { "eval rm -rf build", AS, DE },
    { "eval 'r''m' -rf build", AS, DE },
    { "sudo rm -rf build", AS, DE },
    { "sudo -u root rm x", AS, DE },
    { "env A=1 rm -rf build", AS, DE },
    { "env -i PATH=/bin rm x", AS, DE },
    { "A=1 rm -rf build", AS, DE },
    { "xargs rm -rf < list", AS, DE },
    { "echo x | xargs rm", AS, DE },
    { "xargs -n 1 rm", AS, DE },
    { "find . -exec rm -rf {} \\;", AS, DE },
    { "find . -name '*.o' -exec rm {} +", AS, DE },
    { "timeout 5 rm -rf build", AS, DE },
    { "timeout -s KILL 5 rm x", AS, DE },
    { "nice -n 5 rm -rf build", AS, DE },
    { "command rm x", AS, DE },
    { "exec rm x", AS, DE },
    { "nohup rm x &", AS, DE },
    { "busybox rm x", AS, DE },
    { "stdbuf -o0 rm x", AS, DE },
    { "r$(echo)m -rf build", AS, DE },
    { "rm -rf build 'unbalanced", AS, DE },
    { "echo ok \\; rm -rf x", AL, DE },
    { "echo 'rm -rf /'", AL, DE },
    //  code nobody can see asks under a deny rule, even in yolo
    { "$(echo rm) -rf build", AS, AS },
    { "$X -rf build", AS, AS },
    { "rm${IFS}-rf${IFS}x", AS, AS },
    { "echo hi | sh", AS, AS },
    { "curl x | bash", AS, AS },
    { "bash script.sh", AS, AS },
    { "sh -c \"$CMD\"", AS, AS },
    { "eval \"$CMD\"", AS, AS },
    { "env -S 'rm x'", AS, DE },
    { "env -S 'ls x'", AS, AS },
    { "{r,}m -rf build", AS, AS },
    { "bash -c '{r,}m -rf build'", AS, AS },
    { "alias x=ls", AS, AS },
    { ". ./script.sh", AS, AS },
    { "source ./script.sh", AS, AS },
    { "trap 'rm -rf build' EXIT; true", AS, DE },
    { "su -c 'rm -rf build'", AS, DE },
    { "watch rm -rf build", AS, DE },
    { "echo {a,b}", AS, AL },
};

Test (shparse, hostile_commands)
{
    sb_policy_rule_t allow [] = {
        { "shell", "git status*", AL }, { "shell", "git diff*", AL }, { "shell", "ls*", AL },
        { "shell", "echo *", AL }, { "shell", "find *", AL }, { "shell", "cat *", AL },
    };
    sb_policy_rule_t deny [] = { { "shell", "*rm *", DE } };
    size_t n = sizeof s_table / sizeof s_table [0];
    cr_assert_geq (n, 100);
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        sb_policy_action_t a = s_decide (SB_POLICY_AUTO, allow, 6, s_table [k].cmd);
        sb_policy_action_t b = s_decide (SB_POLICY_YOLO, deny, 1, s_table [k].cmd);
        if (a != s_table [k].a || b != s_table [k].b) {
            cr_log_error ("%s: got %s/%s, want %s/%s", s_table [k].cmd, sb_policy_action_name (a),
                          sb_policy_action_name (b), sb_policy_action_name (s_table [k].a),
                          sb_policy_action_name (s_table [k].b));
            bad++;
        }
    }
    cr_assert_eq (bad, 0, "%d of %zu commands decided wrong", bad, n);
}

Test (shparse, a_deny_rule_sees_the_whole_command)
{
    //  the rm after 8 KiB of padding, and after a 64 KiB word
    sb_policy_rule_t deny [] = { { "shell", "*rm *", DE } };
    for (size_t pad = 4096; pad <= 64 * 1024; pad *= 16) {
        char *cmd = malloc (pad + 64);
        memcpy (cmd, "echo ", 5);
        memset (cmd + 5, 'x', pad);
        strcpy (cmd + 5 + pad, "; rm -rf build");
        cr_assert_eq (s_decide (SB_POLICY_YOLO, deny, 1, cmd), DE, "pad %zu", pad);
        free (cmd);
    }
    //  longer than the parser reads: never allowed, a deny still matches the text
    sb_policy_rule_t allow [] = { { "shell", "echo *", AL } };
    char *cmd = malloc (SB_SH_TEXT_MAX + 64);
    memcpy (cmd, "echo ", 5);
    memset (cmd + 5, 'x', SB_SH_TEXT_MAX);
    strcpy (cmd + 5 + SB_SH_TEXT_MAX, "; rm -rf build");
    cr_assert_eq (s_decide (SB_POLICY_AUTO, allow, 1, cmd), AS);
    cr_assert_eq (s_decide (SB_POLICY_YOLO, deny, 1, cmd), DE);
    free (cmd);
}

Test (shparse, patterns_are_words)
{
    sb_policy_rule_t r [] = { { "shell", "git status*", AL } };
    cr_assert_eq (s_decide (SB_POLICY_AUTO, r, 1, "git status"), AL);
    cr_assert_eq (s_decide (SB_POLICY_AUTO, r, 1, "git status -s"), AL);
    cr_assert_eq (s_decide (SB_POLICY_AUTO, r, 1, "git push; git status"), AS);
    cr_assert_eq (s_decide (SB_POLICY_AUTO, r, 1, "git stash"), AS);
    sb_policy_rule_t q [] = { { "shell", "make 'test suite' *", AL } };
    cr_assert_eq (s_decide (SB_POLICY_AUTO, q, 1, "make \"test suite\" -j2"), AL);
    cr_assert_eq (s_decide (SB_POLICY_AUTO, q, 1, "make test suite -j2"), AS);
    //  the last matching rule wins for the one command it matches
    sb_policy_rule_t w [] = { { "shell", "rm *", DE }, { "shell", "rm -rf build", AL } };
    cr_assert_eq (s_decide (SB_POLICY_AUTO, w, 2, "rm -rf build"), AL);
    cr_assert_eq (s_decide (SB_POLICY_AUTO, w, 2, "rm -rf src"), DE);
    cr_assert_eq (s_decide (SB_POLICY_AUTO, w, 2, "true; rm -rf build"), DE);
    //  an ask rule asks for a command anywhere, even in yolo
    sb_policy_rule_t a [] = { { "shell", "git push*", AS } };
    cr_assert_eq (s_decide (SB_POLICY_YOLO, a, 1, "make && git push origin"), AS);
    cr_assert_eq (s_decide (SB_POLICY_YOLO, a, 1, "make"), AL);
}

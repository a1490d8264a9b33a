/*  tests/unit/test_policy.c — approval modes, rules, globs and scopes
    (actors/exec/policy.h). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exec/policy.h"

#include <jansson.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALLOW SB_POLICY_ALLOW
#define ASK SB_POLICY_ASK
#define DENY SB_POLICY_DENY

static sb_policy_decision_t
s_decision (sb_policy_mode_t mode, const sb_policy_rule_t *rules, size_t n, const sb_policy_t *st,
            const char *tool, const char *args)
{
    sb_policy_key_t *key = sb_policy_key_new (tool, args, "/ws");
    cr_assert (key);
    sb_policy_decision_t d = sb_policy_decide (mode, rules, n, st, tool, key);
    sb_policy_key_destroy (&key);
    return d;
}

static sb_policy_action_t
s_decide (const char *mode, const sb_policy_rule_t *rules, size_t n, const sb_policy_t *st,
          const char *tool, const char *args)
{
    return s_decision (sb_policy_mode_from_name (mode), rules, n, st, tool, args).action;
}

//  A shell command as the model's arguments.
static char *
s_cmd (const char *command)
{
    json_t *j = json_pack ("{ss}", "command", command);
    char *text = json_dumps (j, JSON_COMPACT);
    json_decref (j);
    cr_assert (text);
    return text;
}

Test (policy, modes)
{
    const char *ro [] = { "read_file", "list_dir", "grep", "git_status", "git_diff", "view_image", "attach_file" };
    const char *rw [] = { "shell", "write_file", "edit_file", "mcp__srv__tool", "no_such_tool", "" };
    for (size_t k = 0; k < sizeof ro / sizeof ro [0]; k++) {
        cr_assert (sb_policy_read_only (ro [k]), "%s", ro [k]);
        cr_assert_eq (s_decide ("yolo", NULL, 0, NULL, ro [k], "{}"), ALLOW);
        cr_assert_eq (s_decide ("auto", NULL, 0, NULL, ro [k], "{}"), ALLOW, "%s", ro [k]);
        cr_assert_eq (s_decide ("interactive", NULL, 0, NULL, ro [k], "{}"), ASK);
    }
    for (size_t k = 0; k < 6; k++) {
        cr_assert_not (sb_policy_read_only (rw [k]), "%s", rw [k]);
        cr_assert_eq (s_decide ("yolo", NULL, 0, NULL, rw [k], "{}"), ALLOW);
        cr_assert_eq (s_decide ("auto", NULL, 0, NULL, rw [k], "{}"), ASK, "%s", rw [k]);
        cr_assert_eq (s_decide ("interactive", NULL, 0, NULL, rw [k], "{}"), ASK);
    }
    cr_assert_not (sb_policy_read_only (NULL));
    //  a session without a policy is auto; an unknown name is no mode
    cr_assert_eq (sb_policy_mode_from_name (NULL), SB_POLICY_AUTO);
    cr_assert_eq (sb_policy_mode_from_name ("YOLO"), SB_POLICY__MODES);
    cr_assert_str_eq (sb_policy_mode_name (SB_POLICY_INTERACTIVE), "interactive");
}

Test (policy, match_keys)
{
    struct { const char *tool, *args, *key; } cases [] = {
        { "shell", "{\"command\":\"git push origin main\"}", "git push origin main" },
        { "shell", "{\"command\":\"ls\",\"timeout_s\":5}", "ls" },
        { "write_file", "{\"path\":\"src/a.c\",\"content\":\"x\"}", "src/a.c" },
        { "write_file", "{\"path\":\"./src//b/../a.c\",\"content\":\"x\"}", "src/a.c" },
        { "edit_file", "{\"path\":\"/ws/src/a.c\",\"old\":\"a\",\"new\":\"b\"}", "src/a.c" },
        { "edit_file", "{\"path\":\"/wsx/a.c\",\"old\":\"a\",\"new\":\"b\"}", "/wsx/a.c" },
        { "read_file", "{\"path\":\"../../etc/passwd\"}", "../../etc/passwd" },
        { "read_file", "{\"path\":\"a/../../b\"}", "../b" },
        { "list_dir", "{}", "." },
        { "list_dir", "{\"path\":\"/ws\"}", "." },
        { "grep", "{\"pattern\":\"x\",\"path\":\"lib\"}", "lib" },
        { "git_status", "{}", "." },
        { "mcp__fs__write", "{\"a\":1}", "{\"a\":1}" },
        { "shell", "not json", "" },
        { "shell", "[1,2]", "" },
        { "shell", NULL, "" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases [0]; k++) {
        sb_policy_key_t *key = sb_policy_key_new (cases [k].tool, cases [k].args, "/ws/");
        cr_assert (key);
        cr_assert_str_eq (key->text, cases [k].key, "%s %s", cases [k].tool, cases [k].args ? cases [k].args : "NULL");
        sb_policy_key_destroy (&key);
    }
    //  a key is the whole command, never a prefix of it
    size_t n = 64 * 1024;
    char *big = malloc (n + 32);
    strcpy (big, "{\"command\":\"");
    memset (big + 12, 'a', n);
    strcpy (big + 12 + n, "\"}");
    sb_policy_key_t *key = sb_policy_key_new ("shell", big, NULL);
    cr_assert_eq (strlen (key->text), n);
    sb_policy_key_destroy (&key);
    free (big);
}

Test (policy, rules_last_match_wins)
{
    sb_policy_rule_t rules [] = {
        { "shell", "*", DENY },
        { "shell", "git *", ALLOW },
        { "shell", "git push*", ASK },
        { "write_file", "src/*", ALLOW },
        { "*", "secrets/*", DENY },
    };
    cr_assert_eq (s_decide ("auto", rules, 5, NULL, "shell", "{\"command\":\"rm -rf /\"}"), DENY);
    cr_assert_eq (s_decide ("auto", rules, 5, NULL, "shell", "{\"command\":\"git status\"}"), ALLOW);
    cr_assert_eq (s_decide ("auto", rules, 5, NULL, "shell", "{\"command\":\"git push origin\"}"), ASK);
    cr_assert_eq (s_decide ("auto", rules, 5, NULL, "write_file", "{\"path\":\"src/x/y.c\"}"), ALLOW);
    cr_assert_eq (s_decide ("auto", rules, 5, NULL, "write_file", "{\"path\":\"README\"}"), ASK);
    cr_assert_eq (s_decide ("auto", rules, 5, NULL, "read_file", "{\"path\":\"secrets/k\"}"), DENY);
    cr_assert_eq (s_decide ("auto", rules, 5, NULL, "read_file", "{\"path\":\"./secrets/../secrets/k\"}"), DENY);
    //  rules override every mode, yolo included, both ways
    cr_assert_eq (s_decide ("yolo", rules, 5, NULL, "shell", "{\"command\":\"make\"}"), DENY);
    cr_assert_eq (s_decide ("interactive", rules, 5, NULL, "write_file", "{\"path\":\"src/a\"}"), ALLOW);
    //  the decision says which rule
    sb_policy_decision_t d = s_decision (SB_POLICY_AUTO, rules, 5, NULL, "shell", "{\"command\":\"git log\"}");
    cr_assert_eq (d.by, SB_POLICY_BY_RULE);
    cr_assert_eq (d.rule, 1);
    d = s_decision (SB_POLICY_AUTO, rules, 5, NULL, "edit_file", "{\"path\":\"a\"}");
    cr_assert_eq (d.by, SB_POLICY_BY_MODE);
    cr_assert_eq (d.rule, -1);
}

Test (policy, tool_globs)
{
    sb_policy_rule_t rules [] = {
        { "mcp__github__*", "*", ALLOW },
        { "mcp__*__delete*", "*", DENY },
        { "*_file", "*.lock", DENY },
    };
    cr_assert_eq (s_decide ("auto", rules, 3, NULL, "mcp__github__list_issues", "{}"), ALLOW);
    cr_assert_eq (s_decide ("auto", rules, 3, NULL, "mcp__github__delete_repo", "{}"), DENY);
    cr_assert_eq (s_decide ("auto", rules, 3, NULL, "mcp__other__read", "{}"), ASK);
    cr_assert_eq (s_decide ("yolo", rules, 3, NULL, "write_file", "{\"path\":\"Cargo.lock\"}"), DENY);
    cr_assert_eq (s_decide ("yolo", rules, 3, NULL, "read_file", "{\"path\":\"x/Cargo.lock\"}"), DENY);
    cr_assert_eq (s_decide ("yolo", rules, 3, NULL, "read_file", "{\"path\":\"Cargo.toml\"}"), ALLOW);
}

Test (policy, rule_checks_and_exact_patterns)
{
    cr_assert_null (sb_policy_rule_check ("shell", "git *", "allow"));
    cr_assert_not_null (sb_policy_rule_check ("", "x", "allow"));
    cr_assert_not_null (sb_policy_rule_check ("shell", "", "allow"));
    cr_assert_not_null (sb_policy_rule_check ("shell", "x", "maybe"));
    cr_assert_not_null (sb_policy_rule_check ("shell", "x", NULL));
    char longp [SB_POLICY_RULE_PATTERN_MAX + 2];
    memset (longp, 'a', sizeof longp - 1);
    longp [sizeof longp - 1] = 0;
    cr_assert_not_null (sb_policy_rule_check ("shell", longp, "deny"));

    //  an exact pattern matches its key and nothing else, globs and all
    const char *path = "{\"path\":\"build/*.o [x] a?b \\\\n\"}";
    sb_policy_key_t *key = sb_policy_key_new ("write_file", path, "/ws");
    char pat [256];
    cr_assert_gt (sb_policy_exact_rule ("write_file", key, pat, sizeof pat), 0);
    sb_policy_rule_t rule = { "write_file", pat, ALLOW };
    cr_assert_eq (s_decide ("auto", &rule, 1, NULL, "write_file", path), ALLOW);
    cr_assert_eq (s_decide ("auto", &rule, 1, NULL, "write_file", "{\"path\":\"build/a.o [x] a?b \\\\n\"}"), ASK);
    cr_assert_eq (s_decide ("auto", &rule, 1, NULL, "write_file", "{\"path\":\"build/*.o x a?b \\\\n\"}"), ASK);
    cr_assert_eq (sb_policy_exact_rule ("write_file", key, pat, 8), -1);
    sb_policy_key_destroy (&key);
    cr_assert_eq (sb_policy_exact_pattern ("", pat, sizeof pat), -1);

    //  for shell: the words, quoted where needed; it allows that command only
    char *cmd = s_cmd ("grep -n 'a b*' \"it's\" src/x.c");
    key = sb_policy_key_new ("shell", cmd, "/ws");
    cr_assert_gt (sb_policy_exact_rule ("shell", key, pat, sizeof pat), 0);
    cr_assert_str_eq (pat, "grep -n 'a b*' 'it'\\''s' src/x.c");
    sb_policy_rule_t srule = { "shell", pat, ALLOW };
    cr_assert_eq (s_decide ("auto", &srule, 1, NULL, "shell", cmd), ALLOW);
    char *other = s_cmd ("grep -n 'a bx' \"it's\" src/x.c");
    cr_assert_eq (s_decide ("auto", &srule, 1, NULL, "shell", other), ASK);
    sb_policy_key_destroy (&key);
    free (cmd);
    free (other);
    //  no allow rule can match a compound command, nor one that writes
    const char *none [] = { "make && make test", "echo a >> made.txt", "git diff --output=x", "ls $(pwd)", "A=1 ls" };
    for (size_t k = 0; k < sizeof none / sizeof none [0]; k++) {
        cmd = s_cmd (none [k]);
        key = sb_policy_key_new ("shell", cmd, "/ws");
        cr_assert_eq (sb_policy_exact_rule ("shell", key, pat, sizeof pat), -1, "%s", none [k]);
        sb_policy_key_destroy (&key);
        free (cmd);
    }
}

//  A tape entry as session.events gives it.
static sb_doc_t *
s_event (const char *kind, const char *run_id, const char *k1, const char *v1, const char *k2, const char *v2,
         const char *k3, const char *v3, const char *k4, const char *v4)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kuint (e, "seq", 1);
    sb_enc_kstr (e, "kind", kind);
    if (run_id)
        sb_enc_kstr (e, "run_id", run_id);
    sb_enc_key (e, "body");
    sb_enc_map_open (e);
    if (k1) sb_enc_kstr (e, k1, v1);
    if (k2) sb_enc_kstr (e, k2, v2);
    if (k3) sb_enc_kstr (e, k3, v3);
    if (k4) sb_enc_kstr (e, k4, v4);
    sb_enc_map_close (e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (b, len, NULL, 0, &err);
    sb_enc_destroy (&e);
    cr_assert (doc);
    return doc;
}

static void
s_feed (sb_policy_t *st, sb_doc_t *doc)
{
    cr_assert_eq (sb_policy_feed (st, sb_doc_root (doc), "/ws"), 0);
    sb_doc_destroy (&doc);
}

static void
s_ask_and_resolve (sb_policy_t *st, const char *ia, const char *tool, const char *args, const char *decision,
                   const char *scope, const char *by)
{
    s_feed (st, s_event ("approval.requested", "R1", "interaction_id", ia, "tool", tool, "arguments", args,
                         "call_id", "c"));
    s_feed (st, s_event ("approval.resolved", "R1", "interaction_id", ia, "decision", decision, "scope", scope,
                         "resolved_by", by));
}

Test (policy, scope_session_rebuilt_from_the_tape)
{
    sb_policy_t *st = sb_policy_new ();
    const char *git = "{\"command\":\"git commit -m x\"}";
    //  once: remembered for nothing
    s_ask_and_resolve (st, "ia_1", "shell", git, "approve", "once", "cli");
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", git), ASK);
    //  session: the identical call is decided, no other
    s_ask_and_resolve (st, "ia_2", "shell", git, "approve", "session", "cli");
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", git), ALLOW);
    cr_assert_eq (s_decide ("interactive", NULL, 0, st, "shell", git), ALLOW);
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", "{\"command\":\"git commit -m y\"}"), ASK);
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "write_file", "{\"path\":\"git commit -m x\"}"), ASK);
    //  the same path spelled another way is the same call
    s_ask_and_resolve (st, "ia_3", "write_file", "{\"path\":\"a/b.txt\",\"content\":\"1\"}", "reject", "session", "t");
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "write_file", "{\"path\":\"./a//b.txt\",\"content\":\"2\"}"), DENY);
    sb_policy_decision_t d = s_decision (SB_POLICY_AUTO, NULL, 0, st, "write_file", "{\"path\":\"a/b.txt\"}");
    cr_assert_eq (d.by, SB_POLICY_BY_SESSION);
    //  a rule still wins over a remembered decision
    sb_policy_rule_t deny = { "shell", "git *", DENY };
    cr_assert_eq (s_decide ("auto", &deny, 1, st, "shell", git), DENY);
    //  a deadline's default covers its own call only
    s_ask_and_resolve (st, "ia_4", "shell", "{\"command\":\"make\"}", "approve", "session", "deadline");
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", "{\"command\":\"make\"}"), ASK);
    //  scope always is a rule where one can say it; where none can (a
    //  compound command), it counts for the session, rebuilt so too
    const char *both = "{\"command\":\"make && make test\"}", *one = "{\"command\":\"make test\"}";
    s_ask_and_resolve (st, "ia_5", "shell", both, "approve", "always", "cli");
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", both), ALLOW);
    s_ask_and_resolve (st, "ia_6", "shell", one, "approve", "always", "cli");
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", one), ASK);
    //  a resolution of an interaction never asked changes nothing
    s_feed (st, s_event ("approval.resolved", "R1", "interaction_id", "ia_x", "decision", "approve", "scope",
                         "session", "resolved_by", "cli"));
    //  a later decision on the same call replaces the earlier
    sb_policy_key_t *gk = sb_policy_key_new ("shell", git, "/ws");
    cr_assert_eq (sb_policy_grant (st, gk, false), 0);
    sb_policy_key_destroy (&gk);
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", git), DENY);
    sb_policy_destroy (&st);
    cr_assert_null (st);
    sb_policy_destroy (&st);
}

//  The key of `shell` running `command`.
static sb_policy_key_t *
s_shell_key (const char *command)
{
    char *args = s_cmd (command);
    sb_policy_key_t *key = sb_policy_key_new ("shell", args, "/ws");
    free (args);
    cr_assert (key);
    return key;
}

Test (policy, grants_are_bounded)
{
    sb_policy_t *st = sb_policy_new ();
    char cmd [32];
    for (int k = 0; k < SB_POLICY_GRANTS_MAX + 10; k++) {
        snprintf (cmd, sizeof cmd, "cmd %d", k);
        sb_policy_key_t *key = s_shell_key (cmd);
        cr_assert_eq (sb_policy_grant (st, key, true), 0);
        sb_policy_key_destroy (&key);
    }
    const char *gone [] = { "cmd 0", "cmd 9" };
    for (int k = 0; k < 2; k++) {
        sb_policy_key_t *key = s_shell_key (gone [k]);
        cr_assert_eq (sb_policy_granted (st, key), -1);
        sb_policy_key_destroy (&key);
    }
    sb_policy_key_t *key = s_shell_key ("cmd 10");
    cr_assert_eq (sb_policy_granted (st, key), 1);
    sb_policy_key_destroy (&key);
    sb_policy_destroy (&st);
}

Test (policy, a_session_grant_covers_the_whole_command_only)
{
    //  two commands of 8 KiB that differ after their first 4 KiB
    size_t n = 8192;
    char *a = malloc (n + 1), *b = malloc (n + 1);
    memset (a, 'x', n);
    a [0] = 'e', a [1] = 'c', a [2] = 'h', a [3] = 'o', a [4] = ' ';
    a [n] = 0;
    memcpy (b, a, n + 1);
    memcpy (b + 5000, "; touch marker", 14);
    sb_policy_t *st = sb_policy_new ();
    sb_policy_key_t *ka = s_shell_key (a), *kb = s_shell_key (b);
    cr_assert_eq (sb_policy_grant (st, ka, true), 0);
    cr_assert_eq (sb_policy_granted (st, ka), 1);
    cr_assert_eq (sb_policy_granted (st, kb), -1);
    char *args = s_cmd (b);
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", args), ASK);
    free (args);
    sb_policy_key_destroy (&ka);
    sb_policy_key_destroy (&kb);
    sb_policy_destroy (&st);
    free (a);
    free (b);
}

Test (policy, unanswered_calls)
{
    sb_policy_t *st = sb_policy_new ();
    s_feed (st, s_event ("tool.call", "R1", "call_id", "a", "name", "shell", "arguments", "{\"command\":\"ls\"}",
                         NULL, NULL));
    s_feed (st, s_event ("tool.call", "R1", "call_id", "b", "name", "write_file", "arguments", "{}", NULL, NULL));
    s_feed (st, s_event ("tool.call", "R2", "call_id", "c", "name", "shell", "arguments", "{}", NULL, NULL));
    s_feed (st, s_event ("tool.result", "R1", "call_id", "a", NULL, NULL, NULL, NULL, NULL, NULL));
    sb_policy_call_t calls [4];
    size_t n = sb_policy_unanswered (st, "R1", calls, 4);
    cr_assert_eq (n, 1);
    cr_assert_str_eq (calls [0].call_id, "b");
    cr_assert_str_eq (calls [0].name, "write_file");
    cr_assert_str_eq (calls [0].run_id, "R1");
    cr_assert_eq (sb_policy_unanswered (st, NULL, calls, 4), 2);
    cr_assert_eq (sb_policy_unanswered (st, "R3", calls, 4), 0);
    //  a result for no call, and entries without a body, change nothing
    s_feed (st, s_event ("tool.result", "R1", "call_id", "zz", NULL, NULL, NULL, NULL, NULL, NULL));
    cr_assert_eq (sb_policy_unanswered (st, NULL, calls, 4), 2);
    //  the bound: the oldest is forgotten
    char id [16];
    for (int k = 0; k < SB_POLICY_PENDING_MAX + 5; k++) {
        snprintf (id, sizeof id, "x%d", k);
        s_feed (st, s_event ("tool.call", "R9", "call_id", id, "name", "shell", "arguments", "{}", NULL, NULL));
    }
    cr_assert_eq (sb_policy_unanswered (st, NULL, calls, 0), SB_POLICY_PENDING_MAX);
    cr_assert_eq (sb_policy_unanswered (st, "R1", calls, 4), 0);
    sb_policy_destroy (&st);
}

static int
s_unlink_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st, (void) flag, (void) ftw;
    return remove (path);
}

//  Removes the test's workspace (symlinks as links, never followed).
static void
s_remove (char *ws)
{
    nftw (ws, s_unlink_one, 16, FTW_DEPTH | FTW_PHYS);
    free (ws);
}

//  A workspace with symlinks that lead elsewhere inside it.
static char *
s_symlinked_workspace (void)
{
    char tmpl [] = "/tmp/sb-policy-XXXXXX";
    char *ws = mkdtemp (tmpl);
    cr_assert (ws);
    char *real = realpath (ws, NULL);
    char p [PATH_MAX];
    const char *dirs [] = { ".git", ".git/hooks", ".git/info", "src" };
    for (size_t k = 0; k < 4; k++) {
        snprintf (p, sizeof p, "%s/%s", real, dirs [k]);
        cr_assert_eq (mkdir (p, 0755), 0);
    }
    snprintf (p, sizeof p, "%s/src/hooks", real);
    cr_assert_eq (symlink ("../.git/hooks", p), 0);
    snprintf (p, sizeof p, "%s/src/up", real);
    cr_assert_eq (symlink ("..", p), 0);
    snprintf (p, sizeof p, "%s/.env", real);
    FILE *f = fopen (p, "w");
    fputs ("KEY=1\n", f);
    fclose (f);
    snprintf (p, sizeof p, "%s/src/env", real);
    cr_assert_eq (symlink ("../.env", p), 0);
    return real;
}

static sb_policy_action_t
s_decide_in (const char *ws, const char *mode, const sb_policy_rule_t *rules, size_t n, const char *tool,
             const char *args)
{
    sb_policy_key_t *key = sb_policy_key_new (tool, args, ws);
    cr_assert (key);
    sb_policy_action_t a = sb_policy_decide (sb_policy_mode_from_name (mode), rules, n, NULL, tool, key).action;
    sb_policy_key_destroy (&key);
    return a;
}

Test (policy, file_rules_see_the_resolved_path)
{
    char *ws = s_symlinked_workspace ();
    sb_policy_key_t *key = sb_policy_key_new ("write_file", "{\"path\":\"src/hooks/pre-commit\"}", ws);
    cr_assert_str_eq (key->text, ".git/hooks/pre-commit");
    cr_assert_str_eq (key->spelled, "src/hooks/pre-commit");
    sb_policy_key_destroy (&key);
    sb_policy_rule_t src [] = { { "write_file", "src/*", ALLOW }, { "edit_file", "*", ALLOW } };
    cr_assert_eq (s_decide_in (ws, "auto", src, 2, "write_file", "{\"path\":\"src/a.c\"}"), ALLOW);
    cr_assert_eq (s_decide_in (ws, "auto", src, 2, "write_file", "{\"path\":\"src/hooks/pre-commit\"}"), ASK);
    cr_assert_eq (s_decide_in (ws, "auto", src, 2, "write_file", "{\"path\":\"src/up/.git/info/exclude\"}"), ASK);
    cr_assert_eq (s_decide_in (ws, "auto", src, 2, "write_file", "{\"path\":\"src/up/README\"}"), ASK);
    //  .git is written through an allow rule only when the rule names it
    cr_assert_eq (s_decide_in (ws, "auto", src, 2, "edit_file", "{\"path\":\".git/config\"}"), ASK);
    cr_assert_eq (s_decide_in (ws, "auto", src, 2, "edit_file", "{\"path\":\"sub/.git/config\"}"), ASK);
    sb_policy_rule_t git [] = { { "write_file", ".git/hooks/*", ALLOW } };
    cr_assert_eq (s_decide_in (ws, "auto", git, 1, "write_file", "{\"path\":\"src/hooks/pre-commit\"}"), ALLOW);
    //  a deny rule sees both spellings
    sb_policy_rule_t deny [] = { { "write_file", "src/*", DENY } };
    cr_assert_eq (s_decide_in (ws, "yolo", deny, 1, "write_file", "{\"path\":\"src/up/README\"}"), DENY);
    cr_assert_eq (s_decide_in (ws, "yolo", deny, 1, "write_file", "{\"path\":\"src/../README\"}"), ALLOW);
    s_remove (ws);
}

Test (policy, a_read_deny_covers_grep_list_dir_and_symlinks)
{
    char *ws = s_symlinked_workspace ();
    sb_policy_rule_t r [] = { { "read_file", ".env", DENY } };
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "read_file", "{\"path\":\".env\"}"), DENY);
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "read_file", "{\"path\":\"src/env\"}"), DENY);
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "grep", "{\"pattern\":\"K\",\"path\":\"src/env\"}"), DENY);
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "list_dir", "{\"path\":\".env\"}"), DENY);
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "git_diff", "{\"path\":\".env\"}"), DENY);
    //  a secret read_file may not read is not attached either
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "attach_file", "{\"path\":\"src/env\"}"), DENY);
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "view_image", "{\"path\":\".env\"}"), DENY);
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "grep", "{\"pattern\":\"K\"}"), ALLOW);
    cr_assert_eq (s_decide_in (ws, "auto", r, 1, "write_file", "{\"path\":\".env\"}"), ASK);
    cr_assert (sb_policy_read_denied (r, 1, ".env"));
    cr_assert_not (sb_policy_read_denied (r, 1, "src/a.c"));
    sb_policy_rule_t later [] = { { "*", "*", DENY }, { "read_file", "*.c", ALLOW } };
    cr_assert_not (sb_policy_read_denied (later, 2, "src/a.c"));
    cr_assert (sb_policy_read_denied (later, 2, "src/a.h"));
    s_remove (ws);
}

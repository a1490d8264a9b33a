/*  tests/unit/test_policy.c — approval modes, rules, globs and scopes
    (actors/exec/policy.h). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exec/policy.h"

#define ALLOW SB_POLICY_ALLOW
#define ASK SB_POLICY_ASK
#define DENY SB_POLICY_DENY

static sb_policy_action_t
s_decide (const char *mode, const sb_policy_rule_t *rules, size_t n, const sb_policy_t *st,
          const char *tool, const char *args)
{
    char *key = sb_policy_match_key (tool, args, "/ws");
    cr_assert (key);
    sb_policy_decision_t d = sb_policy_decide (sb_policy_mode_from_name (mode), rules, n, st, tool, key);
    free (key);
    return d.action;
}

Test (policy, modes)
{
    const char *ro [] = { "read_file", "list_dir", "grep", "git_status", "git_diff" };
    const char *rw [] = { "shell", "write_file", "edit_file", "mcp__srv__tool", "no_such_tool", "" };
    for (size_t k = 0; k < 5; k++) {
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
        char *key = sb_policy_match_key (cases [k].tool, cases [k].args, "/ws/");
        cr_assert (key);
        cr_assert_str_eq (key, cases [k].key, "%s %s", cases [k].tool, cases [k].args ? cases [k].args : "NULL");
        free (key);
    }
    //  a key is bounded
    char *big = malloc (3 * SB_POLICY_KEY_MAX);
    strcpy (big, "{\"command\":\"");
    memset (big + 12, 'a', 2 * SB_POLICY_KEY_MAX);
    strcpy (big + 12 + 2 * SB_POLICY_KEY_MAX, "\"}");
    char *key = sb_policy_match_key ("shell", big, NULL);
    cr_assert_eq (strlen (key), SB_POLICY_KEY_MAX);
    free (key);
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
    sb_policy_decision_t d = sb_policy_decide (SB_POLICY_AUTO, rules, 5, NULL, "shell", "git log");
    cr_assert_eq (d.by, SB_POLICY_BY_RULE);
    cr_assert_eq (d.rule, 1);
    d = sb_policy_decide (SB_POLICY_AUTO, rules, 5, NULL, "edit_file", "a");
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
    const char *key = "rm -rf build/*.o [x] a?b \\n";
    char pat [256];
    cr_assert_gt (sb_policy_exact_pattern (key, pat, sizeof pat), 0);
    sb_policy_rule_t rule = { "shell", pat, ALLOW };
    cr_assert_eq (sb_policy_decide (SB_POLICY_AUTO, &rule, 1, NULL, "shell", key).action, ALLOW);
    cr_assert_eq (sb_policy_decide (SB_POLICY_AUTO, &rule, 1, NULL, "shell", "rm -rf build/a.o [x] a?b \\n").action, ASK);
    cr_assert_eq (sb_policy_decide (SB_POLICY_AUTO, &rule, 1, NULL, "shell", "rm -rf build/*.o x a?b \\n").action, ASK);
    cr_assert_eq (sb_policy_exact_pattern (key, pat, 8), -1);
    cr_assert_eq (sb_policy_exact_pattern ("", pat, sizeof pat), -1);
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
    sb_policy_decision_t d = sb_policy_decide (SB_POLICY_AUTO, NULL, 0, st, "write_file", "a/b.txt");
    cr_assert_eq (d.by, SB_POLICY_BY_SESSION);
    //  a rule still wins over a remembered decision
    sb_policy_rule_t deny = { "shell", "git *", DENY };
    cr_assert_eq (s_decide ("auto", &deny, 1, st, "shell", git), DENY);
    //  a deadline's default covers its own call only
    s_ask_and_resolve (st, "ia_4", "shell", "{\"command\":\"make\"}", "approve", "session", "deadline");
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", "{\"command\":\"make\"}"), ASK);
    //  a resolution of an interaction never asked changes nothing
    s_feed (st, s_event ("approval.resolved", "R1", "interaction_id", "ia_x", "decision", "approve", "scope",
                         "session", "resolved_by", "cli"));
    //  a later decision on the same call replaces the earlier
    cr_assert_eq (sb_policy_grant (st, "shell", "git commit -m x", false), 0);
    cr_assert_eq (s_decide ("auto", NULL, 0, st, "shell", git), DENY);
    sb_policy_destroy (&st);
    cr_assert_null (st);
    sb_policy_destroy (&st);
}

Test (policy, grants_are_bounded)
{
    sb_policy_t *st = sb_policy_new ();
    char key [32];
    for (int k = 0; k < SB_POLICY_GRANTS_MAX + 10; k++) {
        snprintf (key, sizeof key, "cmd %d", k);
        cr_assert_eq (sb_policy_grant (st, "shell", key, true), 0);
    }
    cr_assert_eq (sb_policy_granted (st, "shell", "cmd 0"), -1);
    cr_assert_eq (sb_policy_granted (st, "shell", "cmd 9"), -1);
    cr_assert_eq (sb_policy_granted (st, "shell", "cmd 10"), 1);
    snprintf (key, sizeof key, "cmd %d", SB_POLICY_GRANTS_MAX + 9);
    cr_assert_eq (sb_policy_granted (st, "shell", key), 1);
    sb_policy_destroy (&st);
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

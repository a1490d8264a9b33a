/*  tests/fuzz/fuzz_policy.c — approval decisions and diffs against
    hostile input (actors/exec/policy.h, actors/exec/diff.h).

    Input: one byte choosing the tool (shell, a file tool, an MCP tool,
    an unknown one), then the call's arguments as the model sent them,
    NULs and all, up to a 0xFF byte after which come a rule's glob.
    Whatever the bytes:
    - the match key is a C string, the whole command (never cut);
    - the exact pattern of a key, when it can be made, matches that key;
    - a rule built from the input decides without crashing, and a deny
      rule that matches always denies;
    - the diff of two texts taken from the input is a string.
*/
#include "actors/exec/diff.h"
#include "actors/exec/policy.h"

#include <fnmatch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *s_tools [] = { "shell", "write_file", "edit_file", "read_file", "mcp__srv__do", "x" };

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *tool = s_tools [data [0] % (sizeof s_tools / sizeof s_tools [0])];
    data++, size--;
    const uint8_t *sep = memchr (data, 0xFF, size);
    size_t alen = sep ? (size_t) (sep - data) : size;
    char *args = strndup ((const char *) data, alen);
    char *glob = sep ? strndup ((const char *) sep + 1, size - alen - 1) : strdup ("*");
    if (!args || !glob)
        abort ();
    sb_policy_key_t *key = sb_policy_key_new (tool, args, "/ws");
    if (!key)
        abort ();
    char pattern [SB_POLICY_RULE_PATTERN_MAX + 1];
    if (sb_policy_exact_pattern (key->text, pattern, sizeof pattern) > 0 && fnmatch (pattern, key->text, 0) != 0)
        abort ();
    sb_policy_rule_t rules [] = { { "*", glob, SB_POLICY_ALLOW }, { tool, glob, SB_POLICY_DENY } };
    sb_policy_decision_t d = sb_policy_decide (SB_POLICY_AUTO, rules, 2, NULL, tool, key);
    //  a deny rule that matches the text denies; for shell when the
    //  command cannot be parsed (a parsed one is matched word by word)
    bool parsed = key->sh && !key->sh->error [0];
    if (fnmatch (glob, key->text, 0) == 0 && !parsed && d.action != SB_POLICY_DENY)
        abort ();
    size_t n = strlen (args);           //  strndup stopped at a NUL
    char *diff = sb_diff_unified ("f", args, n / 2, args + n / 2, n - n / 2, 4096);
    if (!diff)
        abort ();
    free (diff);
    sb_policy_key_destroy (&key);
    free (args);
    free (glob);
    return 0;
}

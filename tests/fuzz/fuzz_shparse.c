/*  tests/fuzz/fuzz_shparse.c — the shell parser of the approval rules
    against hostile command lines (common/shparse.h,
    actors/exec/policy_shell.c).

    Input: the command line, any bytes. Whatever they are:
    - the parse ends, within its limits, with an error or with commands
      whose words are C strings no longer than the input;
    - a line that is one plain command has one top-level command and no
      operator;
    - a deny rule `*` denies every line that holds a command, and an
      allow rule `*` allows only a plain one;
    - the exact rule made for a command allows that command (and the
      parse of the rule's own text gives the same words).
*/
#include "actors/exec/policy.h"
#include "common/shparse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static sb_policy_action_t
s_decide (const sb_policy_rule_t *rule, const sb_policy_key_t *key)
{
    return sb_policy_decide (SB_POLICY_AUTO, rule, 1, NULL, "shell", key).action;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    sb_sh_t *sh = sb_sh_parse ((const char *) data, size);
    if (!sh)
        return 0;
    for (size_t k = 0; !sh->error [0] && k < sh->ncmds; k++)
        for (size_t a = 0; a < sh->cmds [k].argc; a++)
            if (strlen (sh->cmds [k].argv [a]) > size)
                abort ();
    if (sh->ncmds > SB_SH_CMDS_MAX)
        abort ();
    const sb_sh_cmd_t *whole = sb_sh_whole (sh);
    if (whole && (sh->compound || sh->ntop != 1 || sh->error [0]))
        abort ();
    bool has_cmd = !sh->error [0] && sh->ncmds > 0;
    sb_sh_destroy (&sh);

    //  through the policy, as the executor decides a call
    char *text = malloc (size + 1);
    if (!text)
        return 0;
    memcpy (text, data, size);
    text [size] = 0;
    sb_policy_key_t key = { .text = text, .sh = sb_sh_parse (text, size) };
    if (!key.sh) {
        free (text);
        return 0;
    }
    sb_policy_rule_t deny = { "shell", "*", SB_POLICY_DENY }, allow = { "shell", "*", SB_POLICY_ALLOW };
    if (has_cmd && s_decide (&deny, &key) != SB_POLICY_DENY)
        abort ();
    if (s_decide (&allow, &key) == SB_POLICY_ALLOW && !sb_sh_whole (key.sh))
        abort ();
    char pattern [SB_POLICY_RULE_PATTERN_MAX + 1];
    if (sb_policy_exact_rule ("shell", &key, pattern, sizeof pattern) > 0) {
        sb_policy_rule_t exact = { "shell", pattern, SB_POLICY_ALLOW };
        if (s_decide (&exact, &key) != SB_POLICY_ALLOW)
            abort ();
        //  the rule's text read as a command is the same command
        sb_sh_t *again = sb_sh_parse (pattern, strlen (pattern));
        const sb_sh_cmd_t *a = again ? sb_sh_whole (again) : NULL, *b = sb_sh_whole (key.sh);
        if (again && (!a || a->argc != b->argc))
            abort ();
        for (size_t w = 0; a && w < a->argc; w++)
            if (strcmp (a->argv [w], b->argv [w]) != 0)
                abort ();
        sb_sh_destroy (&again);
    }
    sb_sh_destroy (&key.sh);
    free (text);
    return 0;
}

/*  actors/exec/policy_shell.c — rules on shell commands
    (actors/exec/policy.h, docs/approvals.md "Shell commands").

    A rule never sees the text the model wrote, only the simple commands
    the shell will run (common/shparse.h):
      - an allow rule matches one plain simple command (no operator,
        substitution, glob, redirection or assignment), word by word, and
        never one that writes or runs something through an option of a
        program that otherwise only reads (git --output, find -exec, ...);
      - a deny or ask rule matches any simple command found anywhere in
        the line: after an operator, in $( ), backquotes, subshells, the
        string of sh -c or eval, behind sudo, env, xargs, timeout,
        find -exec... Word by word, or as a glob over the command's words
        joined by spaces (so `*rm *` still means what it did);
      - a line the parser cannot read is allowed by no rule: a deny rule
        that matches its text denies it, anything else asks (yolo with no
        deny or ask rule for shell still runs it).
*/
#include "actors/exec/policy.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

//  ---------------------------------------------------------------------
//  Patterns as words

//  A pattern split into words: each an fnmatch glob, or "any number of
//  words" (a lone `*`, or what follows a last word that ends in `*`).
typedef struct {
    char **glob;
    bool *any;
    size_t n;
    char *buf;
} s_pattern_t;

static void
s_pattern_free (s_pattern_t *p)
{
    free (p->glob);
    free (p->any);
    free (p->buf);
}

//  Splits `pattern` on unquoted blanks. Inside a word '...' and "..."
//  are literal text (their glob characters escaped), \c is c; the rest
//  is glob. Returns -1 when out of memory.
static int
s_pattern_parse (const char *pattern, s_pattern_t *p)
{
    size_t len = strlen (pattern);
    memset (p, 0, sizeof *p);
    p->buf = malloc (2 * len + 2);
    p->glob = calloc (len + 2, sizeof *p->glob);
    p->any = calloc (len + 2, sizeof *p->any);
    if (!p->buf || !p->glob || !p->any) {
        s_pattern_free (p);
        return -1;
    }
    char *w = p->buf;
    bool star_end = false;
    const char *s = pattern;
    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        char *start = w;
        bool quoted = false;
        star_end = false;
        while (*s && *s != ' ' && *s != '\t') {
            if (*s == '\'' || *s == '"') {
                char q = *s++;
                quoted = true;
                for (; *s && *s != q; s++) {
                    if (strchr ("*?[]\\", *s))
                        *w++ = '\\';
                    *w++ = *s;
                }
                if (*s)
                    s++;
                star_end = false;
            }
            else
            if (*s == '\\' && s [1]) {
                *w++ = '\\';
                *w++ = s [1];
                s += 2;
                star_end = false;
            }
            else {
                star_end = *s == '*';
                *w++ = *s++;
            }
        }
        *w++ = 0;
        p->any [p->n] = !quoted && strcmp (start, "*") == 0;
        p->glob [p->n++] = start;
    }
    //  `git status*`: the last word's glob, then any further words
    if (p->n && star_end && !p->any [p->n - 1])
        p->any [p->n++] = true;
    return 0;
}

//  Whether the parsed pattern matches the words of `cmd`.
static bool
s_words_match (const s_pattern_t *p, const sb_sh_cmd_t *cmd)
{
    //  dp [j]: the first j pattern words match the words read so far
    bool *dp = calloc (p->n + 1, sizeof *dp), *nx = calloc (p->n + 1, sizeof *nx);
    bool match = false;
    if (dp && nx) {
        dp [0] = true;
        for (size_t j = 1; j <= p->n; j++)
            dp [j] = dp [j - 1] && p->any [j - 1];
        for (size_t i = 0; i < cmd->argc; i++) {
            nx [0] = false;
            for (size_t j = 1; j <= p->n; j++)
                nx [j] = p->any [j - 1] ? nx [j - 1] || dp [j]
                                       : dp [j - 1] && fnmatch (p->glob [j - 1], cmd->argv [i], 0) == 0;
            bool *t = dp;
            dp = nx;
            nx = t;
        }
        match = dp [p->n];
    }
    free (dp);
    free (nx);
    return match;
}

bool
sb_policy_shell_match (const char *pattern, const sb_sh_cmd_t *cmd)
{
    s_pattern_t p;
    if (!pattern || !cmd || s_pattern_parse (pattern, &p) != 0)
        return false;
    bool match = s_words_match (&p, cmd);
    s_pattern_free (&p);
    return match;
}

//  The command's assignments and words joined by single spaces: what
//  deny and ask rules also read as a glob. NULL when out of memory.
static char *
s_joined (const sb_sh_cmd_t *cmd)
{
    size_t len = 1;
    for (size_t k = 0; k < cmd->nassigns; k++)
        len += strlen (cmd->assigns [k]) + 1;
    for (size_t k = 0; k < cmd->argc; k++)
        len += strlen (cmd->argv [k]) + 1;
    char *text = malloc (len);
    if (!text)
        return NULL;
    size_t w = 0;
    for (size_t k = 0; k < cmd->nassigns + cmd->argc; k++) {
        const char *word = k < cmd->nassigns ? cmd->assigns [k] : cmd->argv [k - cmd->nassigns];
        if (w)
            text [w++] = ' ';
        memcpy (text + w, word, strlen (word));
        w += strlen (word);
    }
    text [w] = 0;
    return text;
}

//  ---------------------------------------------------------------------
//  Options that write or run

//  Per program: options that make it write a file or run a command.
//  `=` after a long option matches it with a value; a short option
//  (-X) matches alone, with its value attached, or among bundled flags.
static const struct {
    const char *program;
    const char *options [24];
} s_risky [] = {
    { "git", { "-c", "-C", "--config-env", "--exec-path", "--git-dir", "--work-tree", "--output", "--upload-pack",
               "--receive-pack", "--exec", "-O", "--open-files-in-pager", "--ext-diff", "--textconv", "-p",
               "--paginate", "--namespace", "--super-prefix", "--template", "--no-index", NULL } },
    { "find", { "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls", NULL } },
    { "rg", { "--pre", "--pre-glob", "--hostname-bin", NULL } },
    { "fd", { "-x", "--exec", "-X", "--exec-batch", NULL } },
    { "fdfind", { "-x", "--exec", "-X", "--exec-batch", NULL } },
    { "sort", { "-o", "--output", "--compress-program", NULL } },
    { "sed", { "-i", "--in-place", NULL } },
    { "tar", { "--to-command", "--checkpoint-action", "-I", "--use-compress-program", "--info-script", "-F",
               "--new-volume-script", "--rmt-command", "--rsh-command", NULL } },
    { "less", { "-o", "-O", "--log-file", "--LOG-FILE", NULL } },
    { "tee", { NULL } },
    { "curl", { "-o", "-O", "--output", "--remote-name", "--remote-name-all", "-K", "--config", "-T",
                "--upload-file", "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii",
                "--libcurl", "--output-dir", NULL } },
    { "wget", { "-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "-P",
                "--directory-prefix", "-x", "-r", "-N", "-i", "--input-file", "-e", "--execute", NULL } },
    { "diff", { "--to-file", NULL } },
};

//  Options of git that are only risky before the subcommand: -c, -C and
//  -p mean other, harmless things after it (git diff -p, -c).
static bool
s_git_global_only (const char *opt)
{
    return strcmp (opt, "-c") == 0 || strcmp (opt, "-C") == 0 || strcmp (opt, "-p") == 0
        || strcmp (opt, "--paginate") == 0;
}

static bool
s_option_is (const char *word, const char *opt)
{
    size_t n = strlen (opt);
    if (opt [1] == '-')                 //  --long, --long=VALUE
        return strncmp (word, opt, n) == 0 && (word [n] == 0 || word [n] == '=');
    if (word [0] != '-' || word [1] == '-')
        return false;                   //  -X: alone, -Xvalue, or among bundled flags
    if (opt [2])                        //  find's -exec, -delete: whole words
        return strcmp (word, opt) == 0;
    return strchr (word + 1, opt [1]) != NULL;
}

bool
sb_policy_shell_risky (const sb_sh_cmd_t *cmd)
{
    if (!cmd || cmd->argc == 0)
        return false;
    const char *prog = sb_sh_program (cmd);
    bool git = strcmp (prog, "git") == 0;
    bool before_sub = true;
    for (size_t t = 0; t < sizeof s_risky / sizeof s_risky [0]; t++) {
        if (strcmp (prog, s_risky [t].program) != 0)
            continue;
        if (strcmp (prog, "tee") == 0)
            return cmd->argc > 1;       //  tee FILE writes it
        for (size_t a = 1; a < cmd->argc; a++) {
            const char *w = cmd->argv [a];
            if (git && before_sub && w [0] != '-')
                before_sub = false;     //  the subcommand
            //  git's own variables in a word (GIT_DIR=..., GIT_CONFIG_*)
            if (git && strstr (w, "GIT_"))
                return true;
            for (size_t o = 0; s_risky [t].options [o]; o++) {
                const char *opt = s_risky [t].options [o];
                if (git && !before_sub && s_git_global_only (opt))
                    continue;
                if (s_option_is (w, opt))
                    return true;
            }
        }
        return false;
    }
    return false;
}

//  ---------------------------------------------------------------------
//  The decision

static bool
s_rule_for (const sb_policy_rule_t *r, const char *tool)
{
    return r->tool && r->pattern && (unsigned) r->action < SB_POLICY__ACTIONS && fnmatch (r->tool, tool, 0) == 0;
}

//  The last rule that decides `cmd`, or -1. Allow rules only for the
//  whole line's one plain command. `pats` are the rules' patterns read
//  as words, NULL for a rule of another tool.
static int
s_last_rule (const sb_policy_rule_t *rules, const s_pattern_t *const *pats, size_t nrules, const sb_sh_cmd_t *cmd,
             bool whole)
{
    char *joined = NULL;
    int found = -1;
    for (size_t k = nrules; k-- > 0 && found < 0; ) {
        if (!pats [k])
            continue;
        if (rules [k].action == SB_POLICY_ALLOW) {
            if (whole && s_words_match (pats [k], cmd))
                found = (int) k;
            continue;
        }
        if (s_words_match (pats [k], cmd))
            found = (int) k;
        else {
            if (!joined && !(joined = s_joined (cmd)))
                found = (int) k;        //  out of memory: a deny must not slip
            else
            if (fnmatch (rules [k].pattern, joined, 0) == 0)
                found = (int) k;
        }
    }
    free (joined);
    return found;
}

//  Whether any deny or ask rule applies to the tool: then a command that
//  hides what it runs asks, even in yolo.
static bool
s_guarded (const sb_policy_rule_t *rules, size_t nrules, const char *tool)
{
    for (size_t k = 0; k < nrules; k++)
        if (s_rule_for (&rules [k], tool) && rules [k].action != SB_POLICY_ALLOW)
            return true;
    return false;
}

sb_policy_decision_t
sb_policy_shell_decide (sb_policy_mode_t mode, const sb_policy_rule_t *rules, size_t nrules,
                        const char *tool, const sb_policy_key_t *key)
{
    sb_policy_decision_t d = { mode == SB_POLICY_YOLO ? SB_POLICY_ALLOW : SB_POLICY_ASK, SB_POLICY_BY_MODE, -1 };
    const sb_sh_t *sh = key->sh;
    bool guarded = s_guarded (rules, nrules, tool);
    if (sh->error [0]) {
        for (size_t k = nrules; k-- > 0; )
            if (s_rule_for (&rules [k], tool) && rules [k].action == SB_POLICY_DENY
            &&  fnmatch (rules [k].pattern, key->text, 0) == 0)
                return (sb_policy_decision_t) { SB_POLICY_DENY, SB_POLICY_BY_RULE, (int) k };
        if (guarded)
            d.action = SB_POLICY_ASK;
        return d;
    }
    const sb_sh_cmd_t *whole = sb_sh_whole (sh);
    if (whole && sb_policy_shell_risky (whole))
        whole = NULL;
    //  each rule's pattern read once for all the commands
    s_pattern_t *store = calloc (nrules + 1, sizeof *store);
    const s_pattern_t **pats = calloc (nrules + 1, sizeof *pats);
    if (!store || !pats) {
        free (store);
        free (pats);
        return (sb_policy_decision_t) { SB_POLICY_ASK, SB_POLICY_BY_MODE, -1 };
    }
    for (size_t k = 0; k < nrules; k++)
        if (s_rule_for (&rules [k], tool))
            pats [k] = s_pattern_parse (rules [k].pattern, &store [k]) == 0 ? &store [k] : NULL;
    int deny = -1, ask = -1, allow = -1;
    bool unknown = false;
    for (size_t c = 0; c < sh->ncmds; c++) {
        const sb_sh_cmd_t *cmd = &sh->cmds [c];
        unknown |= (cmd->flags & SB_SH_UNKNOWN) != 0;
        int k = s_last_rule (rules, pats, nrules, cmd, cmd == whole);
        if (k < 0)
            continue;
        if (rules [k].action == SB_POLICY_DENY && deny < 0)
            deny = k;
        else
        if (rules [k].action == SB_POLICY_ASK && ask < 0)
            ask = k;
        else
        if (rules [k].action == SB_POLICY_ALLOW)
            allow = k;
    }
    for (size_t k = 0; k < nrules; k++)
        if (pats [k])
            s_pattern_free (&store [k]);
    free (store);
    free (pats);
    if (deny >= 0)
        return (sb_policy_decision_t) { SB_POLICY_DENY, SB_POLICY_BY_RULE, deny };
    if (ask >= 0)
        return (sb_policy_decision_t) { SB_POLICY_ASK, SB_POLICY_BY_RULE, ask };
    if (unknown && guarded)
        return (sb_policy_decision_t) { SB_POLICY_ASK, SB_POLICY_BY_MODE, -1 };
    if (allow >= 0)
        return (sb_policy_decision_t) { SB_POLICY_ALLOW, SB_POLICY_BY_RULE, allow };
    return d;
}

/*  common/shparse.c — a shell command line parsed as POSIX sh reads it
    (common/shparse.h, docs/approvals.md "Shell commands").

    A recursive descent over the bytes: a list is commands between
    operators, a command is words and redirections, a word is quoted and
    unquoted parts and expansions. Command substitutions ($( ), ` `) and
    subshells are lists of their own, parsed in place; the strings of
    `sh -c`, `eval` and the commands that wrappers (sudo, env, xargs,
    timeout, find -exec, ...) run are parsed again as scripts of their
    own, one level deeper. Every level, every command and every byte is
    bounded; what the parser does not read is an error, which the caller
    treats as "unknown".
*/
#include "common/shparse.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  A growing string.
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} s_str_t;

//  One level of reading: a string, where we are, how deep.
typedef struct {
    const char *s;
    size_t n, i;
    int depth;
    unsigned nest;              //  SB_SH_NESTED inside a substitution or a script
    sb_sh_t *out;
} s_lex_t;

//  A command being read.
typedef struct {
    sb_sh_cmd_t c;
    size_t wcap, acap;
} s_build_t;

//  What s_word learned about the word it read.
typedef struct {
    bool got;                   //  a word (perhaps empty: '')
    bool quoted;                //  some of it was quoted: never a keyword
    bool assign;                //  NAME=... with NAME unquoted
    unsigned flags;             //  SB_SH_SUBST, SB_SH_GLOB
} s_winfo_t;

static int s_list (s_lex_t *lx, char term);
static int s_script (sb_sh_t *out, const char *text, size_t len, int depth);
static int s_unwrap (sb_sh_t *out, size_t k, int depth);

static int
s_error (sb_sh_t *out, const char *fmt, ...)
{
    if (!out->error [0]) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (out->error, sizeof out->error, fmt, ap);
        va_end (ap);
    }
    return -1;
}

static void
s_put (s_str_t *w, char c)
{
    if (w->oom)
        return;
    if (w->len + 2 > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        char *p = realloc (w->p, cap);
        if (!p) {
            w->oom = true;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    w->p [w->len++] = c;
    w->p [w->len] = 0;
}

//  The string's text, owned by the caller from now on ("" when empty).
static char *
s_take (s_str_t *w)
{
    char *p = w->p ? w->p : strdup ("");
    memset (w, 0, sizeof *w);
    return p;
}

static bool
s_blank (char c)
{
    return c == ' ' || c == '\t';
}

//  A byte that ends an unquoted word.
static bool
s_ends_word (char c)
{
    return s_blank (c) || c == '\n' || c == ';' || c == '&' || c == '|' || c == '<' || c == '>'
        || c == '(' || c == ')';
}

//  Blanks and backslash-newlines (which join lines) between tokens.
static void
s_skip_blanks (s_lex_t *lx)
{
    while (lx->i < lx->n) {
        if (s_blank (lx->s [lx->i]))
            lx->i++;
        else
        if (lx->s [lx->i] == '\\' && lx->i + 1 < lx->n && lx->s [lx->i + 1] == '\n')
            lx->i += 2;
        else
            break;
    }
}

static int s_dollar (s_lex_t *lx, s_str_t *w, unsigned *wf, bool dq);
static int s_backtick (s_lex_t *lx, unsigned *wf, bool dq);

//  A double-quoted part, from its opening quote; its text goes to w.
static int
s_dquote (s_lex_t *lx, s_str_t *w, unsigned *wf)
{
    lx->i++;
    while (lx->i < lx->n && lx->s [lx->i] != '"') {
        char c = lx->s [lx->i];
        if (c == '\\' && lx->i + 1 < lx->n && strchr ("$`\"\\\n", lx->s [lx->i + 1])) {
            if (lx->s [lx->i + 1] != '\n')
                s_put (w, lx->s [lx->i + 1]);
            lx->i += 2;
        }
        else
        if (c == '$') {
            if (s_dollar (lx, w, wf, true) != 0)
                return -1;
        }
        else
        if (c == '`') {
            if (s_backtick (lx, wf, true) != 0)
                return -1;
        }
        else {
            s_put (w, c);
            lx->i++;
        }
    }
    if (lx->i >= lx->n)
        return s_error (lx->out, "unbalanced double quote");
    lx->i++;
    return 0;
}

//  ${...}, from the byte after the brace: skipped to its closing brace,
//  with the substitutions inside it parsed.
static int
s_braced (s_lex_t *lx, unsigned *wf)
{
    s_str_t scratch = { 0 };
    int rc = 0;
    while (rc == 0 && lx->i < lx->n && lx->s [lx->i] != '}') {
        char c = lx->s [lx->i];
        if (c == '\\')
            lx->i += 2;
        else
        if (c == '\'') {
            const char *q = memchr (lx->s + lx->i + 1, '\'', lx->n - lx->i - 1);
            if (!q)
                rc = s_error (lx->out, "unbalanced single quote");
            else
                lx->i = (size_t) (q - lx->s) + 1;
        }
        else
        if (c == '"')
            rc = s_dquote (lx, &scratch, wf);
        else
        if (c == '$')
            rc = s_dollar (lx, &scratch, wf, false);
        else
        if (c == '`')
            rc = s_backtick (lx, wf, false);
        else
            lx->i++;
    }
    free (scratch.p);
    if (rc != 0)
        return -1;
    if (lx->i >= lx->n)
        return s_error (lx->out, "unbalanced ${");
    lx->i++;
    return 0;
}

//  An expansion at '$'. Only a literal '$' adds text to w: what an
//  expansion gives is unknown, and the word is flagged SB_SH_SUBST.
static int
s_dollar (s_lex_t *lx, s_str_t *w, unsigned *wf, bool dq)
{
    size_t j = lx->i + 1;
    char c = j < lx->n ? lx->s [j] : 0;
    if (c == '(') {
        if (j + 1 < lx->n && lx->s [j + 1] == '(')
            return s_error (lx->out, "arithmetic expansion $(( )) is not read");
        if (lx->depth + 1 > SB_SH_DEPTH_MAX)
            return s_error (lx->out, "nested more than %d levels deep", SB_SH_DEPTH_MAX);
        *wf |= SB_SH_SUBST;
        lx->i = j + 1;
        unsigned nest = lx->nest;
        lx->depth++;
        lx->nest = SB_SH_NESTED;
        int rc = s_list (lx, ')');
        lx->depth--;
        lx->nest = nest;
        return rc;
    }
    if (c == '{') {
        *wf |= SB_SH_SUBST;
        lx->i = j + 1;
        return s_braced (lx, wf);
    }
    if ((c == '\'' || c == '"') && !dq)
        return s_error (lx->out, "bash's $'...' and $\"...\" quoting is not read");
    if (isalpha ((unsigned char) c) || c == '_') {
        *wf |= SB_SH_SUBST;
        while (j < lx->n && (isalnum ((unsigned char) lx->s [j]) || lx->s [j] == '_'))
            j++;
        lx->i = j;
        return 0;
    }
    if (c && (isdigit ((unsigned char) c) || strchr ("@*#?$!-", c))) {
        *wf |= SB_SH_SUBST;
        lx->i = j + 1;
        return 0;
    }
    s_put (w, '$');
    lx->i++;
    return 0;
}

//  A backquoted command substitution: its text unescaped, then parsed as
//  a script one level deeper.
static int
s_backtick (s_lex_t *lx, unsigned *wf, bool dq)
{
    s_str_t body = { 0 };
    lx->i++;
    while (lx->i < lx->n && lx->s [lx->i] != '`') {
        char c = lx->s [lx->i];
        char d = lx->i + 1 < lx->n ? lx->s [lx->i + 1] : 0;
        if (c == '\\' && (d == '`' || d == '\\' || d == '$' || (dq && d == '"'))) {
            s_put (&body, d);
            lx->i += 2;
        }
        else {
            s_put (&body, c);
            lx->i++;
        }
    }
    if (lx->i >= lx->n) {
        free (body.p);
        return s_error (lx->out, "unbalanced backquote");
    }
    lx->i++;
    *wf |= SB_SH_SUBST;
    if (body.oom) {
        free (body.p);
        return s_error (lx->out, "out of memory");
    }
    int rc = s_script (lx->out, body.p ? body.p : "", body.len, lx->depth + 1);
    free (body.p);
    return rc;
}

//  One word, unquoted into w. Stops at an unquoted blank or operator.
static int
s_word (s_lex_t *lx, s_str_t *w, s_winfo_t *info)
{
    memset (info, 0, sizeof *info);
    bool plain = true, lbracket = false, lbrace = false, eq_seen = false;
    while (lx->i < lx->n) {
        char c = lx->s [lx->i];
        if (s_ends_word (c))
            break;
        if (c == '\\' && lx->i + 1 < lx->n && lx->s [lx->i + 1] == '\n') {
            lx->i += 2;                 //  a line continuation joins, adds nothing
            continue;
        }
        info->got = true;
        int rc = 0;
        if (c == '\\') {
            info->quoted = true;
            plain = false;
            s_put (w, lx->i + 1 < lx->n ? lx->s [lx->i + 1] : '\\');
            lx->i += lx->i + 1 < lx->n ? 2 : 1;
        }
        else
        if (c == '\'') {
            info->quoted = true;
            plain = false;
            const char *q = memchr (lx->s + lx->i + 1, '\'', lx->n - lx->i - 1);
            if (!q)
                return s_error (lx->out, "unbalanced single quote");
            for (const char *p = lx->s + lx->i + 1; p < q; p++)
                s_put (w, *p);
            lx->i = (size_t) (q - lx->s) + 1;
        }
        else
        if (c == '"') {
            info->quoted = true;
            plain = false;
            rc = s_dquote (lx, w, &info->flags);
        }
        else
        if (c == '$') {
            plain = false;
            rc = s_dollar (lx, w, &info->flags, false);
        }
        else
        if (c == '`') {
            plain = false;
            rc = s_backtick (lx, &info->flags, false);
        }
        else {
            if (c == '*' || c == '?')
                info->flags |= SB_SH_GLOB;
            if (c == '[')
                lbracket = true;
            if (c == ']' && lbracket)
                info->flags |= SB_SH_GLOB;
            //  bash's brace expansion ({r,}m is rm); a lone { or } is a keyword
            if (c == '{' && lx->i + 1 < lx->n && !s_ends_word (lx->s [lx->i + 1]))
                lbrace = true;
            if (c == '}' && lbrace)
                info->flags |= SB_SH_GLOB;
            if (c == '=' && !eq_seen) {
                eq_seen = true;
                info->assign = plain && w->len > 0;
            }
            else
            if (!eq_seen && !(isalnum ((unsigned char) c) || c == '_'))
                plain = false;
            if (!eq_seen && w->len == 0 && isdigit ((unsigned char) c))
                plain = false;
            s_put (w, c);
            lx->i++;
        }
        if (rc != 0)
            return -1;
    }
    if (w->oom)
        return s_error (lx->out, "out of memory");
    return 0;
}

static const char *s_keywords [] = {
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "in", "!", "{", "}",
};
static const char *s_unread [] = { "case", "esac", "function", "select", "coproc", "[[", "]]" };

static bool
s_in (const char *w, const char *const *set, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp (w, set [k]) == 0)
            return true;
    return false;
}

static int
s_push_word (sb_sh_t *out, s_build_t *b, char *text, unsigned wf)
{
    if (!text)
        return s_error (out, "out of memory");
    if (b->c.argc == b->wcap) {
        size_t cap = b->wcap ? b->wcap * 2 : 8;
        char **a = realloc (b->c.argv, cap * sizeof *a);
        unsigned *f = a ? realloc (b->c.wflags, cap * sizeof *f) : NULL;
        if (a)
            b->c.argv = a;
        if (f)
            b->c.wflags = f;
        if (!a || !f) {
            free (text);
            return s_error (out, "out of memory");
        }
        b->wcap = cap;
    }
    b->c.argv [b->c.argc] = text;
    b->c.wflags [b->c.argc++] = wf;
    b->c.flags |= wf;
    return 0;
}

static int
s_push_assign (sb_sh_t *out, s_build_t *b, char *text, unsigned wf)
{
    if (!text)
        return s_error (out, "out of memory");
    if (b->c.nassigns == b->acap) {
        size_t cap = b->acap ? b->acap * 2 : 4;
        char **a = realloc (b->c.assigns, cap * sizeof *a);
        if (!a) {
            free (text);
            return s_error (out, "out of memory");
        }
        b->c.assigns = a;
        b->acap = cap;
    }
    b->c.assigns [b->c.nassigns++] = text;
    b->c.flags |= wf | SB_SH_ASSIGN;
    return 0;
}

static void
s_cmd_free (sb_sh_cmd_t *c)
{
    for (size_t k = 0; k < c->argc; k++)
        free (c->argv [k]);
    for (size_t k = 0; k < c->nassigns; k++)
        free (c->assigns [k]);
    free (c->argv);
    free (c->wflags);
    free (c->assigns);
    memset (c, 0, sizeof *c);
}

//  Adds a finished command (taking what b holds), then what it runs
//  through a wrapper or a shell.
static int
s_push_cmd (sb_sh_t *out, s_build_t *b, unsigned nest, int depth)
{
    if (out->ncmds >= SB_SH_CMDS_MAX) {
        s_cmd_free (&b->c);
        return s_error (out, "more than %d commands", SB_SH_CMDS_MAX);
    }
    if (out->ncmds == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 8;
        sb_sh_cmd_t *c = realloc (out->cmds, cap * sizeof *c);
        if (!c) {
            s_cmd_free (&b->c);
            return s_error (out, "out of memory");
        }
        out->cmds = c;
        out->cap = cap;
    }
    b->c.flags |= nest;
    if (b->c.argc && (b->c.wflags [0] & (SB_SH_SUBST | SB_SH_GLOB)))
        b->c.flags |= SB_SH_UNKNOWN;    //  which program runs depends on an expansion
    size_t k = out->ncmds++;
    out->cmds [k] = b->c;
    memset (b, 0, sizeof *b);
    if (!nest)
        out->ntop++;
    return s_unwrap (out, k, depth);
}

//  A redirection, at its first byte (an fd number or < or >).
static int
s_redirect (s_lex_t *lx, s_build_t *b)
{
    size_t fd_at = lx->i;
    while (lx->i < lx->n && isdigit ((unsigned char) lx->s [lx->i]))
        lx->i++;
    size_t fd_len = lx->i - fd_at;
    char op [3] = { lx->s [lx->i], 0, 0 };
    char d = lx->i + 1 < lx->n ? lx->s [lx->i + 1] : 0;
    if (op [0] == '<' && d == '<')
        return s_error (lx->out, "here-documents (<<) are not read");
    if ((op [0] == '<' && (d == '&' || d == '>')) || (op [0] == '>' && (d == '>' || d == '&' || d == '|')))
        op [1] = d;
    lx->i += op [1] ? 2 : 1;
    s_skip_blanks (lx);
    s_str_t w = { 0 };
    s_winfo_t info;
    if (s_word (lx, &w, &info) != 0) {
        free (w.p);
        return -1;
    }
    if (!info.got) {
        free (w.p);
        return s_error (lx->out, "a redirection without a target");
    }
    const char *t = w.p ? w.p : "";
    bool std_fd = fd_len == 0 || (fd_len == 1 && (lx->s [fd_at] == '1' || lx->s [fd_at] == '2'));
    bool dup = (strcmp (op, ">&") == 0 || strcmp (op, "<&") == 0)
            && (strcmp (t, "1") == 0 || strcmp (t, "2") == 0 || strcmp (t, "-") == 0);
    bool null = (strcmp (op, ">") == 0 || strcmp (op, ">>") == 0 || strcmp (op, "<") == 0)
             && strcmp (t, "/dev/null") == 0;
    if (!(std_fd && (dup || null) && !info.flags))
        b->c.flags |= SB_SH_REDIR;
    b->c.flags |= info.flags;
    free (w.p);
    return 0;
}

//  Skips a comment to the end of its line (the newline stays).
static void
s_comment (s_lex_t *lx)
{
    const char *nl = memchr (lx->s + lx->i, '\n', lx->n - lx->i);
    lx->i = nl ? (size_t) (nl - lx->s) : lx->n;
}

//  One simple command: assignments, words and redirections up to an
//  operator. Keywords in command position mark the line compound.
static int
s_command (s_lex_t *lx)
{
    s_build_t b = { 0 };
    int rc = 0;
    while (rc == 0) {
        s_skip_blanks (lx);
        if (lx->i >= lx->n)
            break;
        char c = lx->s [lx->i];
        if (c == '(') {
            //  after a keyword (then, do, ...) a subshell starts: the list reads it
            if (b.c.argc || b.c.nassigns)
                rc = s_error (lx->out, "%s", b.c.argc ? "function definitions are not read" : "a ( after an assignment");
            break;
        }
        if (c == '\n' || c == ';' || c == '&' || c == '|' || c == ')')
            break;
        if (c == '#') {
            s_comment (lx);
            continue;
        }
        size_t j = lx->i;
        while (j < lx->n && isdigit ((unsigned char) lx->s [j]))
            j++;
        if (j < lx->n && (lx->s [j] == '<' || lx->s [j] == '>')) {
            rc = s_redirect (lx, &b);
            continue;
        }
        s_str_t w = { 0 };
        s_winfo_t info;
        if (s_word (lx, &w, &info) != 0) {
            free (w.p);
            rc = -1;
            break;
        }
        if (!info.got) {
            free (w.p);
            rc = s_error (lx->out, "unexpected '%c'", c);
            break;
        }
        char *text = s_take (&w);
        bool keyword_spot = b.c.argc == 0 && !info.quoted && !info.flags && text;
        if (keyword_spot && s_in (text, s_unread, sizeof s_unread / sizeof s_unread [0])) {
            rc = s_error (lx->out, "'%s' is not read", text);
            free (text);
        }
        else
        if (keyword_spot && s_in (text, s_keywords, sizeof s_keywords / sizeof s_keywords [0])) {
            lx->out->compound = true;
            free (text);
        }
        else
        if (b.c.argc == 0 && info.assign)
            rc = s_push_assign (lx->out, &b, text, info.flags);
        else
            rc = s_push_word (lx->out, &b, text, info.flags);
    }
    if (rc != 0) {
        s_cmd_free (&b.c);
        return -1;
    }
    if (b.c.argc || b.c.nassigns || b.c.flags)
        return s_push_cmd (lx->out, &b, lx->nest, lx->depth);
    return 0;
}

//  Commands and operators up to `term` (')' for a subshell or $( ), 0
//  for the end of the text).
static int
s_list (s_lex_t *lx, char term)
{
    while (true) {
        s_skip_blanks (lx);
        if (lx->i >= lx->n) {
            if (term)
                return s_error (lx->out, "unbalanced (");
            return 0;
        }
        char c = lx->s [lx->i];
        char d = lx->i + 1 < lx->n ? lx->s [lx->i + 1] : 0;
        if (c == '#')
            s_comment (lx);
        else
        if (c == ';' && d == ';')
            return s_error (lx->out, "case ... ;; is not read");
        else
        if (c == '\n' || c == ';')
            lx->i++;
        else
        if (c == '&' || c == '|') {
            lx->out->compound = true;
            lx->i += d == c ? 2 : 1;
        }
        else
        if (c == ')') {
            if (term != ')')
                return s_error (lx->out, "unbalanced )");
            lx->i++;
            return 0;
        }
        else
        if (c == '(') {
            if (lx->depth + 1 > SB_SH_DEPTH_MAX)
                return s_error (lx->out, "nested more than %d levels deep", SB_SH_DEPTH_MAX);
            lx->out->compound = true;
            lx->i++;
            lx->depth++;
            int rc = s_list (lx, ')');
            lx->depth--;
            if (rc != 0)
                return -1;
        }
        else
        if (s_command (lx) != 0)
            return -1;
    }
}

//  A string a command runs as shell code (sh -c, eval, backquotes),
//  parsed one level deeper, its commands nested.
static int
s_script (sb_sh_t *out, const char *text, size_t len, int depth)
{
    if (depth > SB_SH_DEPTH_MAX)
        return s_error (out, "nested more than %d levels deep", SB_SH_DEPTH_MAX);
    s_lex_t lx = { text, len, 0, depth, SB_SH_NESTED, out };
    return s_list (&lx, 0);
}

//  ---------------------------------------------------------------------
//  What a command runs through another

static const char *s_shells [] = { "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh" };

//  Wrappers: programs that run the command in their operands. `args`
//  are their short options that take a value, `skip` the operands before
//  the command (timeout's duration, chroot's directory).
static const struct {
    const char *name, *args;
    int skip;
} s_wrappers [] = {
    { "env", "uCS", 0 }, { "sudo", "ugpChDrtUT", 0 }, { "doas", "uC", 0 }, { "nice", "n", 0 },
    { "nohup", "", 0 }, { "timeout", "sk", 1 }, { "command", "", 0 }, { "exec", "a", 0 },
    { "builtin", "", 0 }, { "time", "fo", 0 }, { "stdbuf", "ioe", 0 }, { "ionice", "cnp", 0 },
    { "setsid", "", 0 }, { "xargs", "adEILnPs", 0 }, { "busybox", "", 0 }, { "chroot", "", 1 },
    { "taskset", "", 1 }, { "chrt", "", 1 }, { "unshare", "", 0 }, { "nsenter", "tS", 0 },
};

//  Long options of the wrappers that take their value as the next word.
static const char *s_long_args [] = {
    "--user", "--group", "--signal", "--kill-after", "--adjustment", "--max-args", "--max-procs",
    "--delimiter", "--arg-file", "--replace", "--max-lines", "--eof", "--max-chars", "--chdir",
    "--unset", "--prompt", "--close-from", "--host", "--role", "--type", "--other-user", "--class",
    "--classdata", "--output", "--format", "--input", "--error", "--target", "--process-slot-var",
};

const char *
sb_sh_program (const sb_sh_cmd_t *cmd)
{
    if (!cmd || cmd->argc == 0)
        return "";
    const char *slash = strrchr (cmd->argv [0], '/');
    return slash ? slash + 1 : cmd->argv [0];
}

//  A new nested command from words [from, to) of command k.
static int
s_push_words (sb_sh_t *out, size_t k, size_t from, size_t to, int depth)
{
    s_build_t b = { 0 };
    for (size_t a = from; a < to; a++) {
        const sb_sh_cmd_t *c = &out->cmds [k];
        if (s_push_word (out, &b, strdup (c->argv [a]), c->wflags [a]) != 0) {
            s_cmd_free (&b.c);
            return -1;
        }
    }
    if (!b.c.argc)
        return 0;
    if (depth > SB_SH_DEPTH_MAX) {
        s_cmd_free (&b.c);
        return s_error (out, "nested more than %d levels deep", SB_SH_DEPTH_MAX);
    }
    return s_push_cmd (out, &b, SB_SH_NESTED, depth);
}

static bool
s_is_assignment (const char *w)
{
    if (!isalpha ((unsigned char) *w) && *w != '_')
        return false;
    while (isalnum ((unsigned char) *w) || *w == '_')
        w++;
    return *w == '=';
}

//  sh -c STRING: the string is a script; a shell without -c reads stdin
//  or a file, which nobody can see.
static int
s_unwrap_shell (sb_sh_t *out, size_t k, int depth)
{
    const sb_sh_cmd_t *c = &out->cmds [k];
    size_t a = 1;
    bool has_c = false;
    for (; a < c->argc; a++) {
        const char *w = c->argv [a];
        if (strcmp (w, "--") == 0) {
            a++;
            break;
        }
        if (!((w [0] == '-' || w [0] == '+') && w [1]))
            break;
        if (w [0] == '-' && w [1] != '-' && strchr (w + 1, 'c'))
            has_c = true;
        if ((strcmp (w, "-o") == 0 || strcmp (w, "+o") == 0) && a + 1 < c->argc)
            a++;
    }
    if (!has_c || a >= c->argc || (c->wflags [a] & SB_SH_SUBST)) {
        out->cmds [k].flags |= SB_SH_UNKNOWN;
        return 0;
    }
    const char *script = c->argv [a];
    return s_script (out, script, strlen (script), depth + 1);
}

//  eval WORDS: the words joined by spaces are a script.
static int
s_unwrap_eval (sb_sh_t *out, size_t k, int depth)
{
    const sb_sh_cmd_t *c = &out->cmds [k];
    s_str_t text = { 0 };
    for (size_t a = 1; a < c->argc; a++) {
        if (c->wflags [a] & SB_SH_SUBST) {
            free (text.p);
            out->cmds [k].flags |= SB_SH_UNKNOWN;
            return 0;
        }
        if (a > 1)
            s_put (&text, ' ');
        for (const char *p = c->argv [a]; *p; p++)
            s_put (&text, *p);
    }
    if (text.oom) {
        free (text.p);
        return s_error (out, "out of memory");
    }
    int rc = text.p ? s_script (out, text.p, text.len, depth + 1) : 0;
    free (text.p);
    return rc;
}

//  find ... -exec CMD ... ; (or +): each CMD is a command.
static int
s_unwrap_find (sb_sh_t *out, size_t k, int depth)
{
    size_t argc = out->cmds [k].argc;
    for (size_t a = 1; a < argc; a++) {
        const char *w = out->cmds [k].argv [a];
        if (strcmp (w, "-exec") && strcmp (w, "-execdir") && strcmp (w, "-ok") && strcmp (w, "-okdir"))
            continue;
        size_t end = a + 1;
        while (end < argc && strcmp (out->cmds [k].argv [end], ";") && strcmp (out->cmds [k].argv [end], "+"))
            end++;
        if (s_push_words (out, k, a + 1, end, depth + 1) != 0)
            return -1;
        a = end;
    }
    return 0;
}

//  sudo, env, timeout, xargs, ...: the command after their options.
static int
s_unwrap_wrapper (sb_sh_t *out, size_t k, int depth, const char *name, const char *args, int skip)
{
    const sb_sh_cmd_t *c = &out->cmds [k];
    bool env = strcmp (name, "env") == 0;
    size_t a = 1;
    for (; a < c->argc; a++) {
        const char *w = c->argv [a];
        if (strcmp (w, "--") == 0) {
            a++;
            break;
        }
        if (env && s_is_assignment (w))
            continue;
        if (w [0] != '-' || !w [1])
            break;
        if (w [1] == '-') {
            if (env && strncmp (w, "--split-string", 14) == 0) {
                out->cmds [k].flags |= SB_SH_UNKNOWN;
                return 0;
            }
            if (!strchr (w, '=') && s_in (w, s_long_args, sizeof s_long_args / sizeof s_long_args [0]))
                a++;
            continue;
        }
        for (const char *f = w + 1; *f; f++) {
            if (env && *f == 'S') {
                out->cmds [k].flags |= SB_SH_UNKNOWN;
                return 0;
            }
            if (strchr (args, *f)) {
                if (!f [1])
                    a++;                //  the value is the next word
                break;
            }
        }
    }
    a += (size_t) skip;
    return a < c->argc ? s_push_words (out, k, a, c->argc, depth + 1) : 0;
}

//  Programs that change what later names mean or run code from a file:
//  what they run is not in the text.
static const char *s_opaque [] = { "alias", "source", ".", "enable", "hash" };

//  trap CODE SIGNALS, su -c CODE, watch CODE...: a string that is a
//  script, after the options (and for trap the first operand only).
static int
s_unwrap_code (sb_sh_t *out, size_t k, int depth, bool first_only)
{
    const sb_sh_cmd_t *c = &out->cmds [k];
    size_t a = 1;
    while (a < c->argc && c->argv [a][0] == '-' && strcmp (c->argv [a], "-c") != 0)
        a++;
    if (a < c->argc && strcmp (c->argv [a], "-c") == 0)
        a++;
    if (a >= c->argc)
        return 0;
    if (c->wflags [a] & SB_SH_SUBST) {
        out->cmds [k].flags |= SB_SH_UNKNOWN;
        return 0;
    }
    if (first_only)
        return s_script (out, c->argv [a], strlen (c->argv [a]), depth + 1);
    s_str_t text = { 0 };
    for (size_t w = a; w < c->argc; w++) {
        if (w > a)
            s_put (&text, ' ');
        for (const char *p = c->argv [w]; *p; p++)
            s_put (&text, *p);
    }
    int rc = text.oom ? s_error (out, "out of memory") : s_script (out, text.p ? text.p : "", text.len, depth + 1);
    free (text.p);
    return rc;
}

static int
s_unwrap (sb_sh_t *out, size_t k, int depth)
{
    if (out->cmds [k].argc == 0)
        return 0;
    const char *prog = sb_sh_program (&out->cmds [k]);
    if (s_in (prog, s_opaque, sizeof s_opaque / sizeof s_opaque [0])) {
        out->cmds [k].flags |= SB_SH_UNKNOWN;
        return 0;
    }
    if (strcmp (prog, "trap") == 0 || strcmp (prog, "su") == 0)
        return s_unwrap_code (out, k, depth, true);
    if (strcmp (prog, "watch") == 0)
        return s_unwrap_code (out, k, depth, false);
    if (s_in (prog, s_shells, sizeof s_shells / sizeof s_shells [0]))
        return s_unwrap_shell (out, k, depth);
    if (strcmp (prog, "eval") == 0)
        return s_unwrap_eval (out, k, depth);
    if (strcmp (prog, "find") == 0)
        return s_unwrap_find (out, k, depth);
    for (size_t w = 0; w < sizeof s_wrappers / sizeof s_wrappers [0]; w++)
        if (strcmp (prog, s_wrappers [w].name) == 0)
            return s_unwrap_wrapper (out, k, depth, s_wrappers [w].name, s_wrappers [w].args, s_wrappers [w].skip);
    return 0;
}

//  ---------------------------------------------------------------------

sb_sh_t *
sb_sh_parse (const char *text, size_t len)
{
    sb_sh_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    if (!text)
        s_error (self, "no command");
    else
    if (len > SB_SH_TEXT_MAX)
        s_error (self, "longer than %d bytes", SB_SH_TEXT_MAX);
    else
    if (memchr (text, 0, len))
        s_error (self, "a NUL byte");
    else {
        s_lex_t lx = { text, len, 0, 0, 0, self };
        s_list (&lx, 0);
    }
    return self;
}

void
sb_sh_destroy (sb_sh_t **self_p)
{
    sb_sh_t *self = *self_p;
    if (!self)
        return;
    for (size_t k = 0; k < self->ncmds; k++)
        s_cmd_free (&self->cmds [k]);
    free (self->cmds);
    free (self);
    *self_p = NULL;
}

const sb_sh_cmd_t *
sb_sh_whole (const sb_sh_t *self)
{
    if (!self || self->error [0] || self->compound || self->ntop != 1)
        return NULL;
    for (size_t k = 0; k < self->ncmds; k++) {
        const sb_sh_cmd_t *c = &self->cmds [k];
        if (c->flags & SB_SH_NESTED)
            continue;
        if (c->argc == 0 || (c->flags & (SB_SH_SUBST | SB_SH_GLOB | SB_SH_REDIR | SB_SH_ASSIGN | SB_SH_UNKNOWN)))
            return NULL;
        return c;
    }
    return NULL;
}

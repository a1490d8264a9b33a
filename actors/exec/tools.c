/*  actors/exec/tools.c — the agent's tools.

    Each tool is one s_tool_<name> function behind one table. Arguments are
    checked against a small per-tool spec before any tool code runs, so
    every tool can trust their presence and types. Results go through one
    buffer that is cleaned to UTF-8 at the end: file names, file contents
    and process output are bytes, and the model, the tape and the browser
    all need text.
*/
#include "actors/exec/tools.h"
#include "actors/exec/path.h"
#include "actors/exec/spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SB_TOOLS_READ_LIMIT_DEFAULT  2000
#define SB_TOOLS_READ_LIMIT_MAX      100000
#define SB_TOOLS_BINARY_PROBE        8192
#define SB_TOOLS_EDIT_MAX            (16 * 1024 * 1024)
#define SB_TOOLS_LIST_MAX            1000    //  entries shown
#define SB_TOOLS_LIST_DIR_READ_MAX   10000   //  names read from one directory
#define SB_TOOLS_LIST_DEPTH_MAX      5
//  Linux refuses a single argv string of 128 KiB or more (MAX_ARG_STRLEN).
#define SB_TOOLS_COMMAND_MAX         (128 * 1024 - 1)
#define SB_TOOLS_PATTERN_MAX         4096


//  ---------------------------------------------------------------------
//  The table the model sees.

static const sb_tool_def_t s_tools [] = {
    { "shell",
      "Run a shell command (/bin/sh -c) in the workspace. stdout and stderr are "
      "merged; stdin is empty. Long output keeps its first and last 32 KiB. "
      "Background processes are killed when the command exits.",
      "{\"type\":\"object\",\"properties\":{"
        "\"command\":{\"type\":\"string\",\"description\":\"The command line.\"},"
        "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3600,"
          "\"description\":\"Seconds before the command is killed (default 120).\"}},"
      "\"required\":[\"command\"],\"additionalProperties\":false}",
      false },
    { "read_file",
      "Read a text file in the workspace. Returns up to `limit` lines starting at "
      "line `offset` (1-based), at most 64 KiB.",
      "{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\",\"description\":\"Path relative to the workspace.\"},"
        "\"offset\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"First line (default 1).\"},"
        "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,"
          "\"description\":\"Number of lines (default 2000).\"}},"
      "\"required\":[\"path\"],\"additionalProperties\":false}",
      true },
    { "write_file",
      "Create or replace a file in the workspace with the given content, atomically. "
      "Missing parent directories are created.",
      "{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\",\"description\":\"Path relative to the workspace.\"},"
        "\"content\":{\"type\":\"string\",\"description\":\"The complete new content.\"}},"
      "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
      false },
    { "edit_file",
      "Replace one exact occurrence of `old` with `new` in a file. `old` must match "
      "the file exactly once, including whitespace; add surrounding lines to make it unique.",
      "{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\",\"description\":\"Path relative to the workspace.\"},"
        "\"old\":{\"type\":\"string\",\"description\":\"The exact text to replace.\"},"
        "\"new\":{\"type\":\"string\",\"description\":\"The replacement text.\"}},"
      "\"required\":[\"path\",\"old\",\"new\"],\"additionalProperties\":false}",
      false },
    { "list_dir",
      "List a directory of the workspace, sorted, directories marked with a trailing /. "
      "`depth` > 1 lists subdirectories too (not .git). At most 1000 entries.",
      "{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\",\"description\":\"Directory (default: the workspace root).\"},"
        "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5,"
          "\"description\":\"Levels to list (default 1).\"}},"
      "\"additionalProperties\":false}",
      true },
    { "grep",
      "Search files for an extended regular expression (grep -rnE), skipping binary "
      "files and .git. Prints file:line:text.",
      "{\"type\":\"object\",\"properties\":{"
        "\"pattern\":{\"type\":\"string\",\"description\":\"Extended regular expression.\"},"
        "\"path\":{\"type\":\"string\",\"description\":\"File or directory (default: the workspace).\"}},"
      "\"required\":[\"pattern\"],\"additionalProperties\":false}",
      true },
    { "git_status",
      "Show the git status of the workspace (short format, with the branch).",
      "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
      true },
    { "git_diff",
      "Show unstaged changes in the workspace (git diff), optionally for one path.",
      "{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\",\"description\":\"Limit the diff to this path.\"}},"
      "\"additionalProperties\":false}",
      true },
};

#define SB_TOOLS_COUNT (sizeof s_tools / sizeof s_tools [0])

const sb_tool_def_t *
sb_tools_list (size_t *n)
{
    if (n)
        *n = SB_TOOLS_COUNT;
    return s_tools;
}

const sb_tool_def_t *
sb_tools_find (const char *name)
{
    for (size_t i = 0; name && i < SB_TOOLS_COUNT; i++)
        if (strcmp (s_tools [i].name, name) == 0)
            return &s_tools [i];
    return NULL;
}


//  ---------------------------------------------------------------------
//  UTF-8 cleaning.

//  Length of the valid UTF-8 sequence at s (n bytes available), or 0 if
//  the byte at s starts none. NUL counts as invalid: outputs are C strings.
static size_t
s_utf8_seq (const unsigned char *s, size_t n)
{
    unsigned c = s [0];
    if (c < 0x80)
        return c ? 1 : 0;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || n < len)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s [i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s [1] < 0xA0) || (c == 0xED && s [1] > 0x9F)     //  overlong, surrogate
        || (c == 0xF0 && s [1] < 0x90) || (c == 0xF4 && s [1] > 0x8F)) //  overlong, > U+10FFFF
        return 0;
    return len;
}

char *
sb_tools_utf8_clean (const char *data, size_t len, size_t *outlen)
{
    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    char *out = malloc (len * 3 + 1);
    if (!out)
        return NULL;
    const unsigned char *s = (const unsigned char *) data;
    size_t o = 0;
    for (size_t i = 0; i < len; ) {
        size_t k = s_utf8_seq (s + i, len - i);
        if (k) {
            memcpy (out + o, s + i, k);
            o += k;
            i += k;
        }
        else {
            memcpy (out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out [o] = 0;
    if (outlen)
        *outlen = o;
    return out;
}

//  How many bytes at the end of s begin a sequence that more input could
//  still complete; a stream holds them back until the next piece.
static size_t
s_utf8_pending (const char *data, size_t n)
{
    const unsigned char *s = (const unsigned char *) data;
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned c = s [n - back];
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

//  Turns the raw bytes spawn delivers into clean UTF-8 for the caller.
typedef struct {
    sb_tool_output_fn *fn;
    void *arg;
    char pending [4];
    size_t npending;
} s_stream_t;

static void
s_stream_emit (s_stream_t *st, const char *data, size_t len, bool final)
{
    char *joined = malloc (st->npending + len + 1);
    if (!joined)
        return;
    memcpy (joined, st->pending, st->npending);
    memcpy (joined + st->npending, data, len);
    size_t n = st->npending + len;
    size_t hold = final ? 0 : s_utf8_pending (joined, n);
    memcpy (st->pending, joined + n - hold, hold);
    st->npending = hold;
    size_t cl;
    char *clean = n - hold ? sb_tools_utf8_clean (joined, n - hold, &cl) : NULL;
    if (clean && cl)
        st->fn (clean, cl, st->arg);
    free (clean);
    free (joined);
}

static void
s_stream_on_output (const char *data, size_t len, void *arg)
{
    s_stream_emit ((s_stream_t *) arg, data, len, false);
}


//  ---------------------------------------------------------------------
//  Results.

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} s_buf_t;

static void
s_buf_add (s_buf_t *b, const char *data, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        char *np = realloc (b->p, ncap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy (b->p + b->len, data, n);
    b->len += n;
    b->p [b->len] = 0;
}

static void
s_buf_addf (s_buf_t *b, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_buf_addf (s_buf_t *b, const char *fmt, ...)
{
    char tmp [1024];
    va_list ap;
    va_start (ap, fmt);
    int n = vsnprintf (tmp, sizeof tmp, fmt, ap);
    va_end (ap);
    if (n > 0)
        s_buf_add (b, tmp, (size_t) n < sizeof tmp ? (size_t) n : sizeof tmp - 1);
}

static bool
s_buf_ends_with_newline (const s_buf_t *b)
{
    return b->len == 0 || b->p [b->len - 1] == '\n';
}

//  Hands the buffer to the result as clean UTF-8; returns 0 if ok, else -1.
static int
s_finish (sb_tool_result_t *res, bool ok, s_buf_t *b)
{
    res->ok = ok && !b->oom;
    res->output = b->oom ? NULL : sb_tools_utf8_clean (b->p ? b->p : "", b->len, NULL);
    if (!res->output)
        res->ok = false;
    free (b->p);
    memset (b, 0, sizeof *b);
    return res->ok ? 0 : -1;
}

static int
s_error (sb_tool_result_t *res, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static int
s_error (sb_tool_result_t *res, const char *fmt, ...)
{
    char tmp [2048];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (tmp, sizeof tmp, fmt, ap);
    va_end (ap);
    s_buf_t b = { 0 };
    s_buf_add (&b, tmp, strlen (tmp));
    return s_finish (res, false, &b);
}

void
sb_tool_result_clear (sb_tool_result_t *res)
{
    if (!res)
        return;
    free (res->output);
    memset (res, 0, sizeof *res);
}


//  ---------------------------------------------------------------------
//  Arguments.

typedef enum { S_ARG_STR, S_ARG_INT } s_argtype_t;

typedef struct {
    const char *name;
    s_argtype_t type;
    bool required;
} s_arg_t;

//  Checks args against spec: required present, types right, nothing
//  unknown. JSON null counts as absent, since some providers send null for
//  every optional argument.
static int
s_args_check (const char *tool, json_t *args, const s_arg_t *spec, size_t nspec,
              sb_tool_result_t *res)
{
    const char *key;
    json_t *val;
    json_object_foreach (args, key, val) {
        size_t i = 0;
        while (i < nspec && strcmp (spec [i].name, key) != 0)
            i++;
        if (i == nspec) {
            char expected [256] = "";
            for (size_t k = 0; k < nspec; k++)
                snprintf (expected + strlen (expected), sizeof expected - strlen (expected),
                          "%s%s", k ? ", " : "", spec [k].name);
            return s_error (res, "invalid arguments for %s: unknown argument \"%.64s\" "
                            "(expected: %s)", tool, key, nspec ? expected : "none");
        }
    }
    for (size_t i = 0; i < nspec; i++) {
        json_t *v = json_object_get (args, spec [i].name);
        const char *want = spec [i].type == S_ARG_STR ? "a string" : "an integer";
        if (!v || json_is_null (v)) {
            if (spec [i].required)
                return s_error (res, "invalid arguments for %s: missing required argument "
                                "\"%s\" (%s)", tool, spec [i].name, want);
            continue;
        }
        bool good = spec [i].type == S_ARG_STR ? json_is_string (v)
                  : json_is_integer (v);
        if (!good) {
            static const char *names [] = {
                [JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array",
                [JSON_STRING] = "a string", [JSON_INTEGER] = "an integer",
                [JSON_REAL] = "a number", [JSON_TRUE] = "a boolean",
                [JSON_FALSE] = "a boolean", [JSON_NULL] = "null",
            };
            return s_error (res, "invalid arguments for %s: \"%s\" must be %s, not %s",
                            tool, spec [i].name, want, names [json_typeof (v)]);
        }
    }
    return 0;
}

static const char *
s_arg_str (json_t *args, const char *name, size_t *len)
{
    json_t *v = json_object_get (args, name);
    if (len)
        *len = json_is_string (v) ? json_string_length (v) : 0;
    if (!json_is_string (v))
        return NULL;
    return json_string_value (v);
}

static bool
s_arg_int (json_t *args, const char *name, json_int_t *out)
{
    json_t *v = json_object_get (args, name);
    if (!json_is_integer (v))
        return false;
    *out = json_integer_value (v);
    return true;
}

//  Resolves a path argument, or fills res with the refusal.
static int
s_resolve (const sb_tool_ctx_t *ctx, const char *path, size_t len, bool for_write,
           char *out, sb_tool_result_t *res)
{
    char err [1024];
    if (sb_path_resolve_n (ctx->workspace, path, len, for_write, out, PATH_MAX,
                           err, sizeof err) != 0)
        return s_error (res, "%s", err);
    return 0;
}


//  ---------------------------------------------------------------------
//  Process-backed tools: shell, grep, git.

//  The configured default, kept where seconds * 1000 still fits an int.
static int
s_timeout_default (const sb_tool_ctx_t *ctx)
{
    if (ctx->shell_timeout_s <= 0)
        return SB_TOOLS_SHELL_TIMEOUT_S;
    return ctx->shell_timeout_s < INT_MAX / 1000 ? ctx->shell_timeout_s : INT_MAX / 1000;
}

static int
s_run_process (const sb_tool_ctx_t *ctx, const char *const *argv, int timeout_s,
               const char *sandbox, sb_tool_result_t *res, s_buf_t *out)
{
    s_stream_t stream = { .fn = ctx->on_output, .arg = ctx->output_arg };
    sb_spawn_opts_t opts = {
        .argv = argv,
        .cwd = ctx->workspace,
        .env_extra = ctx->env_extra,
        .timeout_ms = timeout_s * 1000,
        .cancel_fd = ctx->cancel_fd,
        .on_output = ctx->on_output ? s_stream_on_output : NULL,
        .output_arg = &stream,
        .sandbox = sandbox,
    };
    sb_spawn_result_t sr;
    char err [1024];
    if (sb_spawn_run (&opts, &sr, err, sizeof err) != 0)
        return s_error (res, "%s", err);
    if (ctx->on_output && stream.npending)
        s_stream_emit (&stream, "", 0, true);
    s_buf_add (out, sr.output, sr.output_len);
    res->exit_code = sr.exit_code;
    res->timed_out = sr.timed_out;
    res->cancelled = sr.cancelled;
    res->truncated = sr.truncated;

    //  Trailers the model needs to read the output right.
    const char *nl = s_buf_ends_with_newline (out) ? "" : "\n";
    if (sr.timed_out)
        s_buf_addf (out, "%s[timed out after %d s; the command and everything it started "
                    "were killed]\n", nl, timeout_s);
    else
    if (sr.cancelled)
        s_buf_addf (out, "%s[cancelled; the command and everything it started were killed]\n",
                    nl);
    else
    if (sr.term_signal)
        s_buf_addf (out, "%s[killed by signal %d (%s)]\n", nl, sr.term_signal,
                    sigabbrev_np (sr.term_signal) ? sigabbrev_np (sr.term_signal) : "?");
    if (sr.leftovers_killed)
        s_buf_addf (out, "%s[%zu background process%s left running by the command %s killed]\n",
                    s_buf_ends_with_newline (out) ? "" : "\n", sr.leftovers_killed,
                    sr.leftovers_killed == 1 ? "" : "es",
                    sr.leftovers_killed == 1 ? "was" : "were");
    sb_spawn_result_clear (&sr);
    return 0;
}

static int
s_tool_shell (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const s_arg_t spec [] = {
        { "command", S_ARG_STR, true }, { "timeout_s", S_ARG_INT, false },
    };
    if (s_args_check ("shell", args, spec, 2, res) != 0)
        return -1;
    size_t len = 0;
    const char *command = s_arg_str (args, "command", &len);
    if (len == 0 || strspn (command, " \t\r\n") == len)
        return s_error (res, "shell: command is empty");
    if (len > SB_TOOLS_COMMAND_MAX || strlen (command) != len)
        return s_error (res, "shell: command too long (%zu bytes; the limit is %d)",
                        len, SB_TOOLS_COMMAND_MAX);
    int timeout_s = s_timeout_default (ctx);
    json_int_t t;
    if (s_arg_int (args, "timeout_s", &t)) {
        //  A model may ask for more time, up to an hour or the operator's
        //  default if that is longer.
        int max = timeout_s > SB_TOOLS_SHELL_TIMEOUT_MAX_S ? timeout_s
                                                           : SB_TOOLS_SHELL_TIMEOUT_MAX_S;
        if (t < 1 || t > max)
            return s_error (res, "shell: timeout_s must be between 1 and %d", max);
        timeout_s = (int) t;
    }
    const char *argv [] = { "/bin/sh", "-c", command, NULL };
    s_buf_t out = { 0 };
    if (s_run_process (ctx, argv, timeout_s, ctx->sandbox, res, &out) != 0)
        return -1;
    if (res->exit_code != 0 && !res->timed_out && !res->cancelled && res->exit_code > 0)
        s_buf_addf (&out, "%s[exit code %d]\n", s_buf_ends_with_newline (&out) ? "" : "\n",
                    res->exit_code);
    if (out.len == 0)
        s_buf_addf (&out, "(no output)\n");
    return s_finish (res, res->exit_code == 0 && !res->timed_out && !res->cancelled, &out);
}

static int
s_tool_grep (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const s_arg_t spec [] = {
        { "pattern", S_ARG_STR, true }, { "path", S_ARG_STR, false },
    };
    if (s_args_check ("grep", args, spec, 2, res) != 0)
        return -1;
    size_t plen = 0, len = 1;
    const char *pattern = s_arg_str (args, "pattern", &plen);
    if (plen == 0)
        return s_error (res, "grep: pattern is empty");
    if (plen > SB_TOOLS_PATTERN_MAX || strlen (pattern) != plen)
        return s_error (res, "grep: pattern too long (%zu bytes; the limit is %d)",
                        plen, SB_TOOLS_PATTERN_MAX);
    const char *path = s_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    if (s_resolve (ctx, path ? path : ".", path ? len : 1, false, resolved, res) != 0)
        return -1;
    //  argv, not a shell: the pattern is one argument after "--", so
    //  neither quotes nor a leading dash can change what runs.
    //  With no file operand grep -r searches "." and prints names without
    //  a "./" prefix.
    const char *rel = sb_path_relative (ctx->workspace, resolved);
    const char *argv [] = {
        "grep", "-rnHIE", "--color=never", "--exclude-dir=.git", "--", pattern,
        strcmp (rel, ".") == 0 ? NULL : rel, NULL,
    };
    int timeout_s = s_timeout_default (ctx);
    s_buf_t out = { 0 };
    if (s_run_process (ctx, argv, timeout_s, NULL, res, &out) != 0)
        return -1;
    if (res->exit_code == 1 && out.len == 0)
        s_buf_addf (&out, "no matches\n");
    else
    if (res->exit_code > 1)
        s_buf_addf (&out, "%s[exit code %d]\n", s_buf_ends_with_newline (&out) ? "" : "\n",
                    res->exit_code);
    bool ok = (res->exit_code == 0 || res->exit_code == 1) && !res->timed_out && !res->cancelled;
    return s_finish (res, ok, &out);
}

//  git on a workspace the model may have written to: nothing in the
//  repository's config may run a program from a read-only tool, and status
//  must not rewrite the index.
static int
s_run_git (const sb_tool_ctx_t *ctx, const char *const *cmd, const char *empty,
           sb_tool_result_t *res)
{
    const char *argv [16] = {
        "git", "--no-pager", "--no-optional-locks", "-c", "core.fsmonitor=false",
        "-c", "core.quotepath=off", "-c", "core.pager=cat",
    };
    size_t n = 9;
    for (size_t i = 0; cmd [i] && n < 15; i++)
        argv [n++] = cmd [i];
    argv [n] = NULL;
    int timeout_s = s_timeout_default (ctx);
    s_buf_t out = { 0 };
    if (s_run_process (ctx, argv, timeout_s, NULL, res, &out) != 0)
        return -1;
    if (res->exit_code > 0)
        s_buf_addf (&out, "%s[exit code %d]\n", s_buf_ends_with_newline (&out) ? "" : "\n",
                    res->exit_code);
    if (out.len == 0)
        s_buf_addf (&out, "%s\n", empty);
    return s_finish (res, res->exit_code == 0 && !res->timed_out && !res->cancelled, &out);
}

static int
s_tool_git_status (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    if (s_args_check ("git_status", args, NULL, 0, res) != 0)
        return -1;
    const char *cmd [] = { "status", "--short", "--branch", NULL };
    return s_run_git (ctx, cmd, "(clean)", res);
}

static int
s_tool_git_diff (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const s_arg_t spec [] = { { "path", S_ARG_STR, false } };
    if (s_args_check ("git_diff", args, spec, 1, res) != 0)
        return -1;
    size_t len = 0;
    const char *path = s_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    const char *cmd [] = {
        "diff", "--no-color", "--no-ext-diff", "--no-textconv", NULL, NULL, NULL,
    };
    if (path) {
        //  A deleted file is a fair thing to diff, so it need not exist.
        if (s_resolve (ctx, path, len, true, resolved, res) != 0)
            return -1;
        cmd [4] = "--";
        cmd [5] = sb_path_relative (ctx->workspace, resolved);
    }
    return s_run_git (ctx, cmd, "(no unstaged changes)", res);
}


//  ---------------------------------------------------------------------
//  File tools.

//  Opens a resolved path for reading as a regular file, or explains why not.
static int
s_open_regular (const sb_tool_ctx_t *ctx, const char *resolved, const char *shown,
                struct stat *st, sb_tool_result_t *res)
{
    //  O_NONBLOCK: a FIFO in the workspace must not hang the tool.
    int fd = sb_path_open (ctx->workspace, resolved, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0) {
        if (errno == ELOOP)
            return s_error (res, "%s changed while being opened (a symlink appeared); refused",
                            shown);
        return s_error (res, "cannot open %s: %s", shown, strerror (errno));
    }
    if (fstat (fd, st) != 0 || !S_ISREG (st->st_mode)) {
        bool dir = S_ISDIR (st->st_mode);
        close (fd);
        if (dir)
            return s_error (res, "%s is a directory; use list_dir", shown);
        return s_error (res, "%s is not a regular file", shown);
    }
    return fd;
}

static int
s_tool_read_file (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const s_arg_t spec [] = {
        { "path", S_ARG_STR, true }, { "offset", S_ARG_INT, false }, { "limit", S_ARG_INT, false },
    };
    if (s_args_check ("read_file", args, spec, 3, res) != 0)
        return -1;
    json_int_t offset = 1, limit = SB_TOOLS_READ_LIMIT_DEFAULT;
    s_arg_int (args, "offset", &offset);
    s_arg_int (args, "limit", &limit);
    if (offset == 0)
        offset = 1;                     //  a common off-by-one; mean the start
    if (offset < 1)
        return s_error (res, "read_file: offset must be 1 or more (lines are numbered from 1)");
    if (limit < 1 || limit > SB_TOOLS_READ_LIMIT_MAX)
        return s_error (res, "read_file: limit must be between 1 and %d",
                        SB_TOOLS_READ_LIMIT_MAX);
    size_t len = 0;
    const char *path = s_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    if (s_resolve (ctx, path, len, false, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    struct stat st;
    int fd = s_open_regular (ctx, resolved, shown, &st, res);
    if (fd < 0)
        return -1;

    //  One pass: count lines, keep those in [offset, offset + limit) until
    //  the output cap, and stop reading as soon as the answer is known.
    s_buf_t out = { 0 };
    char buf [65536];
    json_int_t line = 1, first = 0, last = 0, end = offset + limit;
    size_t line_start = 0;              //  where the current line begins in out
    bool more = false, capped = false, cut = false, partial_line = false, probed = false;
    ssize_t r;
    while (!more && (r = read (fd, buf, sizeof buf)) > 0) {
        if (!probed) {
            probed = true;
            if (memchr (buf, 0, (size_t) r < SB_TOOLS_BINARY_PROBE ? (size_t) r
                                                                   : SB_TOOLS_BINARY_PROBE)) {
                close (fd);
                free (out.p);
                return s_error (res, "%s looks like a binary file (%lld bytes, with NUL bytes); "
                                "read_file shows text only", shown, (long long) st.st_size);
            }
        }
        size_t i = 0;
        while (i < (size_t) r) {
            if (line >= end || capped) {
                more = true;
                break;
            }
            char *nl = memchr (buf + i, '\n', (size_t) r - i);
            size_t seg_end = nl ? (size_t) (nl - buf) + 1 : (size_t) r;
            if (line >= offset) {
                if (!partial_line) {
                    line_start = out.len;
                    if (!first)
                        first = line;
                }
                size_t seg = seg_end - i;
                if (out.len + seg > SB_TOOLS_OUTPUT_MAX) {
                    capped = true;
                    if (line == first) {
                        //  One line longer than the cap: show its start.
                        s_buf_add (&out, buf + i, SB_TOOLS_OUTPUT_MAX - out.len);
                        last = line;
                        cut = true;
                    }
                    else
                        out.len = line_start;
                    if (out.p)
                        out.p [out.len] = 0;
                    more = true;
                    break;
                }
                s_buf_add (&out, buf + i, seg);
                last = line;
            }
            partial_line = !nl;
            i = seg_end;
            if (nl)
                line++;
        }
    }
    int read_errno = errno;
    bool read_failed = !more && r < 0;
    close (fd);
    if (read_failed) {
        free (out.p);
        return s_error (res, "cannot read %s: %s", shown, strerror (read_errno));
    }
    json_int_t total = line - 1 + (partial_line ? 1 : 0);
    if (!first) {
        free (out.p);
        if (total == 0)
            return s_error (res, "%s is empty", shown);
        return s_error (res, "read_file: offset %lld is past the end of %s (%lld lines)",
                        (long long) offset, shown, (long long) total);
    }
    const char *nl = s_buf_ends_with_newline (&out) ? "" : "\n";
    if (cut)
        s_buf_addf (&out, "%s[line %lld is longer than %d bytes and was cut; "
                    "use shell (e.g. cut or fold) to see the rest]\n",
                    nl, (long long) last, SB_TOOLS_OUTPUT_MAX);
    else
    if (more)
        s_buf_addf (&out, "%s[showing lines %lld-%lld%s; more lines follow: "
                    "continue with offset=%lld]\n", nl, (long long) first, (long long) last,
                    capped ? " (output capped at 64 KiB)" : "", (long long) last + 1);
    res->truncated = more;
    return s_finish (res, true, &out);
}

//  Replace the file `name` in directory dirfd with data: a temporary file
//  in the same directory, fsync, rename over, fsync the directory. Readers
//  see the old content or the new, never a mix; a crash leaves at worst a
//  stray temporary file, never a torn target.
static int
s_write_atomic (int dirfd, const char *name, const char *data, size_t len,
                const char *shown, bool *existed, sb_tool_result_t *res)
{
    struct stat st;
    mode_t mode = 0644;
    *existed = false;
    if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR (st.st_mode))
            return s_error (res, "%s is a directory", shown);
        if (!S_ISREG (st.st_mode))
            return s_error (res, "%s is not a regular file; refusing to replace it", shown);
        mode = st.st_mode & 07777;      //  keep an executable script executable
        *existed = true;
    }
    char tmp [64];
    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
        unsigned long long rnd = 0;
        if (getrandom (&rnd, sizeof rnd, 0) != sizeof rnd)
            rnd = (unsigned long long) time (NULL) ^ ((unsigned long long) getpid () << 32)
                ^ (unsigned long long) attempt;
        snprintf (tmp, sizeof tmp, ".sb-write-%016llx.tmp", rnd);
        fd = openat (dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return s_error (res, "cannot create a temporary file next to %s: %s",
                        shown, strerror (errno));
    int e = 0;
    for (size_t off = 0; off < len && !e; ) {
        ssize_t w = write (fd, data + off, len - off);
        if (w > 0)
            off += (size_t) w;
        else
        if (w < 0 && errno != EINTR)
            e = errno;
    }
    if (!e && *existed && fchown (fd, st.st_uid, st.st_gid) != 0) {
        //  Best effort: only root can give a file away, and then it works.
    }
    if (!e && fchmod (fd, mode) != 0)
        e = errno;
    if (!e && fsync (fd) != 0)
        e = errno;
    if (close (fd) != 0 && !e)
        e = errno;
    if (!e && renameat (dirfd, tmp, dirfd, name) != 0)
        e = errno;
    if (e) {
        unlinkat (dirfd, tmp, 0);
        return s_error (res, "cannot write %s: %s", shown, strerror (e));
    }
    fsync (dirfd);
    return 0;
}

//  Splits a resolved path into its directory (opened, created if missing)
//  and its last component.
static int
s_open_parent (const sb_tool_ctx_t *ctx, char *resolved, const char **name,
               sb_tool_result_t *res)
{
    char *slash = strrchr (resolved, '/');
    *name = slash + 1;
    char err [1024];
    *slash = 0;
    int dirfd = sb_path_mkdirs (ctx->workspace, *resolved ? resolved : "/", err, sizeof err);
    *slash = '/';
    if (dirfd < 0)
        return s_error (res, "%s", err);
    return dirfd;
}

static int
s_tool_write_file (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const s_arg_t spec [] = {
        { "path", S_ARG_STR, true }, { "content", S_ARG_STR, true },
    };
    if (s_args_check ("write_file", args, spec, 2, res) != 0)
        return -1;
    size_t len = 0, clen = 0;
    const char *path = s_arg_str (args, "path", &len);
    const char *content = s_arg_str (args, "content", &clen);
    if (len > 0 && path [len - 1] == '/')
        return s_error (res, "write_file: %s names a directory; give a file path", path);
    char resolved [PATH_MAX];
    if (s_resolve (ctx, path, len, true, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    if (strcmp (shown, ".") == 0)
        return s_error (res, "write_file: %s is the workspace directory itself", path);
    const char *name;
    int dirfd = s_open_parent (ctx, resolved, &name, res);
    if (dirfd < 0)
        return -1;
    bool existed;
    int rc = s_write_atomic (dirfd, name, content, clen, shown, &existed, res);
    close (dirfd);
    if (rc != 0)
        return -1;
    s_buf_t out = { 0 };
    s_buf_addf (&out, "wrote %zu bytes to %s (%s)", clen, shown,
                existed ? "replaced" : "new file");
    return s_finish (res, true, &out);
}

static int
s_tool_edit_file (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const s_arg_t spec [] = {
        { "path", S_ARG_STR, true }, { "old", S_ARG_STR, true }, { "new", S_ARG_STR, true },
    };
    if (s_args_check ("edit_file", args, spec, 3, res) != 0)
        return -1;
    size_t len = 0, olen = 0, nlen = 0;
    const char *path = s_arg_str (args, "path", &len);
    const char *old = s_arg_str (args, "old", &olen);
    const char *new = s_arg_str (args, "new", &nlen);
    if (olen == 0)
        return s_error (res, "edit_file: old is empty; to create or overwrite a file use write_file");
    char resolved [PATH_MAX];
    if (s_resolve (ctx, path, len, false, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    struct stat st;
    int fd = s_open_regular (ctx, resolved, shown, &st, res);
    if (fd < 0)
        return -1;
    if (st.st_size > SB_TOOLS_EDIT_MAX) {
        close (fd);
        return s_error (res, "%s is too large to edit (%lld bytes; the limit is %d)",
                        shown, (long long) st.st_size, SB_TOOLS_EDIT_MAX);
    }
    //  Read to EOF rather than trusting st_size: the file may be growing.
    size_t cap = (size_t) st.st_size + 1, n = 0;
    char *text = malloc (cap + 1);
    ssize_t r = 0;
    while (text && n <= SB_TOOLS_EDIT_MAX) {
        if (n == cap) {
            char *nt = realloc (text, cap * 2 + 1);
            if (!nt)
                break;
            text = nt;
            cap *= 2;
        }
        r = read (fd, text + n, cap - n);
        if (r > 0)
            n += (size_t) r;
        else
        if (r == 0 || errno != EINTR)
            break;
    }
    close (fd);
    if (!text || r != 0 || n > SB_TOOLS_EDIT_MAX) {
        free (text);
        return s_error (res, "cannot read %s%s", shown, n > SB_TOOLS_EDIT_MAX ? ": too large" : "");
    }
    if (memchr (text, 0, n)) {
        free (text);
        return s_error (res, "%s looks like a binary file (it contains NUL bytes); "
                        "edit_file edits text only", shown);
    }

    //  Overlapping matches count: "aa" in "aaa" is ambiguous, so refused.
    size_t count = 0, at = 0, lines [5];
    for (const char *p = text; (p = memmem (p, (size_t) (text + n - p), old, olen)); p++) {
        if (count < 5) {
            size_t ln = 1;
            for (const char *q = text; q < p; q++)
                ln += *q == '\n';
            lines [count] = ln;
        }
        if (count++ == 0)
            at = (size_t) (p - text);
    }
    if (count != 1) {
        free (text);
        if (count == 0)
            return s_error (res, "edit_file: old text not found in %s (0 matches); it must match "
                            "the file exactly, including whitespace and indentation "
                            "(read_file shows the current content)", shown);
        char where [128] = "";
        for (size_t i = 0; i < count && i < 5; i++)
            snprintf (where + strlen (where), sizeof where - strlen (where), "%s%zu",
                      i ? ", " : "", lines [i]);
        return s_error (res, "edit_file: old text matches %zu times in %s (at lines %s%s); it "
                        "must match exactly once: include more surrounding lines to make it "
                        "unique", count, shown, where, count > 5 ? ", ..." : "");
    }
    size_t total = n - olen + nlen;
    char *edited = malloc (total + 1);
    if (!edited) {
        free (text);
        return s_error (res, "out of memory");
    }
    memcpy (edited, text, at);
    memcpy (edited + at, new, nlen);
    memcpy (edited + at + nlen, text + at + olen, n - at - olen);
    free (text);

    const char *name;
    int dirfd = s_open_parent (ctx, resolved, &name, res);
    if (dirfd < 0) {
        free (edited);
        return -1;
    }
    bool existed;
    int rc = s_write_atomic (dirfd, name, edited, total, shown, &existed, res);
    close (dirfd);
    free (edited);
    if (rc != 0)
        return -1;
    s_buf_t out = { 0 };
    s_buf_addf (&out, "edited %s: replaced 1 occurrence at line %zu (%zu bytes -> %zu bytes)",
                shown, lines [0], n, total);
    return s_finish (res, true, &out);
}

typedef struct {
    s_buf_t out;
    size_t shown;
    bool stopped;                       //  hit the entry cap
    bool partial_dir;                   //  some directory had too many names
} s_list_t;

static int
s_name_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

//  Lists dirfd (consumed) into lst, `depth` levels deep. Subdirectories are
//  opened with O_NOFOLLOW relative to their parent, so a symlink is listed
//  as a symlink and never entered.
static void
s_list (int dirfd, const char *prefix, int depth, s_list_t *lst)
{
    DIR *d = fdopendir (dirfd);
    if (!d) {
        close (dirfd);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir (d))) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
        if (n == SB_TOOLS_LIST_DIR_READ_MAX) {
            lst->partial_dir = true;
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nn = realloc (names, ncap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            cap = ncap;
        }
        if (!(names [n] = strdup (de->d_name)))
            break;
        n++;
    }
    if (n)
        qsort (names, n, sizeof *names, s_name_cmp);
    for (size_t i = 0; i < n; i++) {
        if (lst->shown >= SB_TOOLS_LIST_MAX) {
            lst->stopped = true;
            break;
        }
        struct stat st;
        if (fstatat (dirfd, names [i], &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;                   //  vanished while listing
        lst->shown++;
        if (S_ISLNK (st.st_mode)) {
            char target [PATH_MAX];
            ssize_t tl = readlinkat (dirfd, names [i], target, sizeof target - 1);
            target [tl > 0 ? tl : 0] = 0;
            s_buf_addf (&lst->out, "%s%s -> %s\n", prefix, names [i], target);
        }
        else
        if (S_ISDIR (st.st_mode)) {
            s_buf_addf (&lst->out, "%s%s/\n", prefix, names [i]);
            if (depth > 1 && strcmp (names [i], ".git") != 0) {
                int sub = openat (dirfd, names [i],
                                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                    char sprefix [PATH_MAX];
                    snprintf (sprefix, sizeof sprefix, "%s%s/", prefix, names [i]);
                    s_list (sub, sprefix, depth - 1, lst);
                }
            }
        }
        else
            s_buf_addf (&lst->out, "%s%s\n", prefix, names [i]);
    }
    for (size_t i = 0; i < n; i++)
        free (names [i]);
    free (names);
    closedir (d);
}

static int
s_tool_list_dir (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const s_arg_t spec [] = {
        { "path", S_ARG_STR, false }, { "depth", S_ARG_INT, false },
    };
    if (s_args_check ("list_dir", args, spec, 2, res) != 0)
        return -1;
    json_int_t depth = 1;
    s_arg_int (args, "depth", &depth);
    if (depth < 1 || depth > SB_TOOLS_LIST_DEPTH_MAX)
        return s_error (res, "list_dir: depth must be between 1 and %d", SB_TOOLS_LIST_DEPTH_MAX);
    size_t len = 1;
    const char *path = s_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    if (s_resolve (ctx, path ? path : ".", path ? len : 1, false, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    int fd = sb_path_open (ctx->workspace, resolved, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        if (errno == ENOTDIR)
            return s_error (res, "%s is not a directory; use read_file", shown);
        return s_error (res, "cannot open %s: %s", shown, strerror (errno));
    }
    s_list_t lst = { 0 };
    s_list (fd, "", (int) depth, &lst);
    if (lst.out.len == 0 && !lst.out.oom)
        s_buf_addf (&lst.out, "(empty directory)\n");
    if (lst.stopped)
        s_buf_addf (&lst.out, "[listing stopped at %d entries; list a subdirectory or lower "
                    "the depth to see the rest]\n", SB_TOOLS_LIST_MAX);
    if (lst.partial_dir)
        s_buf_addf (&lst.out, "[a directory has more than %d entries; only some are listed]\n",
                    SB_TOOLS_LIST_DIR_READ_MAX);
    res->truncated = lst.stopped || lst.partial_dir;
    return s_finish (res, true, &lst.out);
}


//  ---------------------------------------------------------------------
//  Dispatch.

typedef int (s_tool_fn) (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res);

static const struct {
    const char *name;
    s_tool_fn *fn;
} s_dispatch [] = {
    { "shell", s_tool_shell },
    { "read_file", s_tool_read_file },
    { "write_file", s_tool_write_file },
    { "edit_file", s_tool_edit_file },
    { "list_dir", s_tool_list_dir },
    { "grep", s_tool_grep },
    { "git_status", s_tool_git_status },
    { "git_diff", s_tool_git_diff },
};

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool
s_cancel_requested (int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return fd > 0 && poll (&p, 1, 0) > 0;
}

int
sb_tool_run (const sb_tool_ctx_t *ctx, const char *name, const char *args_json,
             sb_tool_result_t *res)
{
    if (!res)
        return -1;
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    int64_t start = s_now_ms ();
    int rc;
    json_t *args = NULL;
    s_tool_fn *fn = NULL;
    for (size_t i = 0; name && i < sizeof s_dispatch / sizeof s_dispatch [0]; i++)
        if (strcmp (s_dispatch [i].name, name) == 0)
            fn = s_dispatch [i].fn;

    size_t alen = args_json ? strnlen (args_json, SB_TOOLS_ARGS_MAX + 1) : 0;
    if (!ctx || !ctx->workspace || ctx->workspace [0] != '/')
        rc = s_error (res, "internal error: the tool context has no workspace");
    else
    if (!fn) {
        char known [256] = "";
        for (size_t i = 0; i < SB_TOOLS_COUNT; i++)
            snprintf (known + strlen (known), sizeof known - strlen (known), "%s%s",
                      i ? ", " : "", s_tools [i].name);
        rc = s_error (res, "unknown tool \"%.64s\" (available: %s)", name ? name : "", known);
    }
    else
    if (alen > SB_TOOLS_ARGS_MAX)
        rc = s_error (res, "arguments for %s are too large (the limit is %u bytes)",
                      name, SB_TOOLS_ARGS_MAX);
    else
    if (s_cancel_requested (ctx->cancel_fd)) {
        res->cancelled = true;
        rc = s_error (res, "[cancelled before it started]");
    }
    else {
        json_error_t jerr;
        args = alen ? json_loadb (args_json, alen, JSON_REJECT_DUPLICATES, &jerr)
                    : json_object ();
        if (!args)
            rc = s_error (res, "invalid JSON arguments for %s: %s (line %d, column %d)",
                          name, jerr.text, jerr.line, jerr.column);
        else
        if (!json_is_object (args))
            rc = s_error (res, "invalid arguments for %s: expected a JSON object", name);
        else
            rc = fn (ctx, args, res);
    }
    json_decref (args);
    res->duration_ms = s_now_ms () - start;
    return rc;
}

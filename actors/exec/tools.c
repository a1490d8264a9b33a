/*  actors/exec/tools.c — the agent's tools.

    Each tool is one sb_tool_<name> function behind one table (the
    process tools in actors/exec/tools_process.c, the file tools in
    actors/exec/tools_file.c). Arguments are
    checked against a small per-tool spec before any tool code runs, so
    every tool can trust their presence and types. Results go through one
    buffer that is cleaned to UTF-8 at the end: file names, file contents
    and process output are bytes, and the model, the tape and the browser
    all need text.
*/
#include "actors/exec/tools_impl.h"
#include "actors/exec/path.h"
#include "sandbox/spawn.h"

#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


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
    { "view_image",
      "Look at an image file in the workspace (PNG, JPEG, GIF or WebP, such as a screenshot "
      "a test wrote): it is shown to you after this call's result.",
      "{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\",\"description\":\"Path relative to the workspace.\"}},"
      "\"required\":[\"path\"],\"additionalProperties\":false}",
      true },
    { "attach_file",
      "Attach a file of the workspace (a report, a patch, a picture you made; any type) to the "
      "session as an artifact the person can see and download. The file is not changed.",
      "{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\",\"description\":\"Path relative to the workspace.\"},"
        "\"name\":{\"type\":\"string\",\"description\":\"The name to show it under (default: the path).\"},"
        "\"description\":{\"type\":\"string\",\"description\":\"One line on what it is.\"}},"
      "\"required\":[\"path\"],\"additionalProperties\":false}",
      true },
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

void
sb_tools_stream_emit (sb_tools_stream_t *st, const char *data, size_t len, bool final)
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

void
sb_tools_stream_on_output (const char *data, size_t len, void *arg)
{
    sb_tools_stream_emit ((sb_tools_stream_t *) arg, data, len, false);
}


//  ---------------------------------------------------------------------
//  Results.

void
sb_tools_buf_add (sb_tools_buf_t *b, const char *data, size_t n)
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

void
sb_tools_buf_addf (sb_tools_buf_t *b, const char *fmt, ...)
{
    char tmp [1024];
    va_list ap;
    va_start (ap, fmt);
    int n = vsnprintf (tmp, sizeof tmp, fmt, ap);
    va_end (ap);
    if (n > 0)
        sb_tools_buf_add (b, tmp, (size_t) n < sizeof tmp ? (size_t) n : sizeof tmp - 1);
}

bool
sb_tools_buf_ends_with_newline (const sb_tools_buf_t *b)
{
    return b->len == 0 || b->p [b->len - 1] == '\n';
}

//  Hands the buffer to the result as clean UTF-8; returns 0 if ok, else -1.
int
sb_tools_finish (sb_tool_result_t *res, bool ok, sb_tools_buf_t *b)
{
    res->ok = ok && !b->oom;
    res->output = b->oom ? NULL : sb_tools_utf8_clean (b->p ? b->p : "", b->len, NULL);
    if (!res->output)
        res->ok = false;
    free (b->p);
    memset (b, 0, sizeof *b);
    return res->ok ? 0 : -1;
}

int
sb_tools_error (sb_tool_result_t *res, const char *fmt, ...)
{
    char tmp [2048];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (tmp, sizeof tmp, fmt, ap);
    va_end (ap);
    sb_tools_buf_t b = { 0 };
    sb_tools_buf_add (&b, tmp, strlen (tmp));
    return sb_tools_finish (res, false, &b);
}

void
sb_tool_result_clear (sb_tool_result_t *res)
{
    if (!res)
        return;
    free (res->output);
    free (res->image);
    memset (res, 0, sizeof *res);
}


//  ---------------------------------------------------------------------
//  Arguments.

//  Checks args against spec: required present, types right, nothing
//  unknown. JSON null counts as absent, since some providers send null for
//  every optional argument.
int
sb_tools_args_check (const char *tool, json_t *args, const sb_tools_arg_t *spec, size_t nspec,
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
            return sb_tools_error (res, "invalid arguments for %s: unknown argument \"%.64s\" "
                            "(expected: %s)", tool, key, nspec ? expected : "none");
        }
    }
    for (size_t i = 0; i < nspec; i++) {
        json_t *v = json_object_get (args, spec [i].name);
        const char *want = spec [i].type == SB_TOOLS_ARG_STR ? "a string" : "an integer";
        if (!v || json_is_null (v)) {
            if (spec [i].required)
                return sb_tools_error (res, "invalid arguments for %s: missing required argument "
                                "\"%s\" (%s)", tool, spec [i].name, want);
            continue;
        }
        bool good = spec [i].type == SB_TOOLS_ARG_STR ? json_is_string (v)
                  : json_is_integer (v);
        if (!good) {
            static const char *names [] = {
                [JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array",
                [JSON_STRING] = "a string", [JSON_INTEGER] = "an integer",
                [JSON_REAL] = "a number", [JSON_TRUE] = "a boolean",
                [JSON_FALSE] = "a boolean", [JSON_NULL] = "null",
            };
            return sb_tools_error (res, "invalid arguments for %s: \"%s\" must be %s, not %s",
                            tool, spec [i].name, want, names [json_typeof (v)]);
        }
    }
    return 0;
}

const char *
sb_tools_arg_str (json_t *args, const char *name, size_t *len)
{
    json_t *v = json_object_get (args, name);
    if (len)
        *len = json_is_string (v) ? json_string_length (v) : 0;
    if (!json_is_string (v))
        return NULL;
    return json_string_value (v);
}

bool
sb_tools_arg_int (json_t *args, const char *name, json_int_t *out)
{
    json_t *v = json_object_get (args, name);
    if (!json_is_integer (v))
        return false;
    *out = json_integer_value (v);
    return true;
}

//  Resolves a path argument, or fills res with the refusal.
int
sb_tools_resolve (const sb_tool_ctx_t *ctx, const char *path, size_t len, bool for_write,
           char *out, sb_tool_result_t *res)
{
    char err [1024];
    if (sb_path_resolve_n (ctx->workspace, path, len, for_write, out, PATH_MAX,
                           err, sizeof err) != 0)
        return sb_tools_error (res, "%s", err);
    //  The data folder (or a key file) inside the workspace: as hidden from
    //  the file tools as from the sandbox (docs/sandbox.md).
    if (sb_spawn_sandbox_hidden (out))
        return sb_tools_error (res, "%.*s is one of the server's secret paths, hidden from tools",
                               (int) (len > 256 ? 256 : len), path);
    return 0;
}


//  ---------------------------------------------------------------------
//  Dispatch.

static const struct {
    const char *name;
    sb_tool_fn *fn;
} s_dispatch [] = {
    { "shell", sb_tool_shell },
    { "read_file", sb_tool_read_file },
    { "write_file", sb_tool_write_file },
    { "edit_file", sb_tool_edit_file },
    { "list_dir", sb_tool_list_dir },
    { "grep", sb_tool_grep },
    { "git_status", sb_tool_git_status },
    { "git_diff", sb_tool_git_diff },
    { "view_image", sb_tool_view_image },
    { "attach_file", sb_tool_attach_file },
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
    sb_tool_fn *fn = NULL;
    for (size_t i = 0; name && i < sizeof s_dispatch / sizeof s_dispatch [0]; i++)
        if (strcmp (s_dispatch [i].name, name) == 0)
            fn = s_dispatch [i].fn;

    size_t alen = args_json ? strnlen (args_json, SB_TOOLS_ARGS_MAX + 1) : 0;
    if (!ctx || !ctx->workspace || ctx->workspace [0] != '/')
        rc = sb_tools_error (res, "internal error: the tool context has no workspace");
    else
    if (!fn) {
        char known [256] = "";
        for (size_t i = 0; i < SB_TOOLS_COUNT; i++)
            snprintf (known + strlen (known), sizeof known - strlen (known), "%s%s",
                      i ? ", " : "", s_tools [i].name);
        rc = sb_tools_error (res, "unknown tool \"%.64s\" (available: %s)", name ? name : "", known);
    }
    else
    if (alen > SB_TOOLS_ARGS_MAX)
        rc = sb_tools_error (res, "arguments for %s are too large (the limit is %u bytes)",
                      name, SB_TOOLS_ARGS_MAX);
    else
    if (s_cancel_requested (ctx->cancel_fd)) {
        res->cancelled = true;
        rc = sb_tools_error (res, "[cancelled before it started]");
    }
    else {
        json_error_t jerr;
        args = alen ? json_loadb (args_json, alen, JSON_REJECT_DUPLICATES, &jerr)
                    : json_object ();
        if (!args)
            rc = sb_tools_error (res, "invalid JSON arguments for %s: %s (line %d, column %d)",
                          name, jerr.text, jerr.line, jerr.column);
        else
        if (!json_is_object (args))
            rc = sb_tools_error (res, "invalid arguments for %s: expected a JSON object", name);
        else
            rc = fn (ctx, args, res);
    }
    json_decref (args);
    res->duration_ms = s_now_ms () - start;
    return rc;
}

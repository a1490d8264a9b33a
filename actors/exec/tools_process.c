/*  actors/exec/tools_process.c — the tools that run a process: shell and
    grep, each through sandbox/spawn.h; git is in
    actors/exec/tools_git.c.
*/
#include "actors/exec/tools_impl.h"
#include "actors/exec/path.h"
#include "sandbox/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  Linux refuses a single argv string of 128 KiB or more (MAX_ARG_STRLEN).
#define SB_TOOLS_COMMAND_MAX         (128 * 1024 - 1)
#define SB_TOOLS_PATTERN_MAX         4096


//  The configured default, kept where seconds * 1000 still fits an int.
int
sb_tools_timeout_default (const sb_tool_ctx_t *ctx)
{
    if (ctx->shell_timeout_s <= 0)
        return SB_TOOLS_SHELL_TIMEOUT_S;
    return ctx->shell_timeout_s < INT_MAX / 1000 ? ctx->shell_timeout_s : INT_MAX / 1000;
}

int
sb_tools_run_process (const sb_tool_ctx_t *ctx, const char *const *argv,
                      const char *const *env_extra, int timeout_s, bool network,
                      sb_tool_result_t *res, sb_tools_buf_t *out)
{
    sb_tools_stream_t stream = { .fn = ctx->on_output, .arg = ctx->output_arg };
    sb_spawn_opts_t opts = {
        .argv = argv,
        .cwd = ctx->workspace,
        .env_extra = env_extra,
        .timeout_ms = timeout_s * 1000,
        .cancel_fd = ctx->cancel_fd,
        .on_output = ctx->on_output ? sb_tools_stream_on_output : NULL,
        .output_arg = &stream,
        .sandbox = ctx->sandbox,
        .network = network,
    };
    sb_spawn_result_t sr;
    char err [1024];
    if (sb_spawn_run (&opts, &sr, err, sizeof err) != 0)
        return sb_tools_error (res, "%s", err);
    if (ctx->on_output && stream.npending)
        sb_tools_stream_emit (&stream, "", 0, true);
    sb_tools_buf_add (out, sr.output, sr.output_len);
    res->exit_code = sr.exit_code;
    res->timed_out = sr.timed_out;
    res->cancelled = sr.cancelled;
    res->truncated = sr.truncated;

    //  Trailers the model needs to read the output right.
    const char *nl = sb_tools_buf_ends_with_newline (out) ? "" : "\n";
    if (sr.timed_out)
        sb_tools_buf_addf (out, "%s[timed out after %d s; the command and everything it started "
                    "were killed]\n", nl, timeout_s);
    else
    if (sr.cancelled)
        sb_tools_buf_addf (out, "%s[cancelled; the command and everything it started were killed]\n",
                    nl);
    else
    if (sr.term_signal)
        sb_tools_buf_addf (out, "%s[killed by signal %d (%s)]\n", nl, sr.term_signal,
                    sigabbrev_np (sr.term_signal) ? sigabbrev_np (sr.term_signal) : "?");
    if (sr.leftovers_killed)
        sb_tools_buf_addf (out, "%s[%zu background process%s left running by the command %s killed: %s]\n",
                    sb_tools_buf_ends_with_newline (out) ? "" : "\n", sr.leftovers_killed,
                    sr.leftovers_killed == 1 ? "" : "es",
                    sr.leftovers_killed == 1 ? "was" : "were", sr.killed);
    else
    if (*sr.killed && (sr.timed_out || sr.cancelled))
        sb_tools_buf_addf (out, "[killed: %s]\n", sr.killed);
    sb_spawn_result_clear (&sr);
    return 0;
}

int
sb_tool_shell (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = {
        { "command", SB_TOOLS_ARG_STR, true }, { "timeout_s", SB_TOOLS_ARG_INT, false },
    };
    if (sb_tools_args_check ("shell", args, spec, 2, res) != 0)
        return -1;
    size_t len = 0;
    const char *command = sb_tools_arg_str (args, "command", &len);
    if (len == 0 || strspn (command, " \t\r\n") == len)
        return sb_tools_error (res, "shell: command is empty");
    if (len > SB_TOOLS_COMMAND_MAX || strlen (command) != len)
        return sb_tools_error (res, "shell: command too long (%zu bytes; the limit is %d)",
                        len, SB_TOOLS_COMMAND_MAX);
    int timeout_s = sb_tools_timeout_default (ctx);
    json_int_t t;
    if (sb_tools_arg_int (args, "timeout_s", &t)) {
        //  A model may ask for more time, up to an hour or the operator's
        //  default if that is longer.
        int max = timeout_s > SB_TOOLS_SHELL_TIMEOUT_MAX_S ? timeout_s
                                                           : SB_TOOLS_SHELL_TIMEOUT_MAX_S;
        if (t < 1 || t > max)
            return sb_tools_error (res, "shell: timeout_s must be between 1 and %d", max);
        timeout_s = (int) t;
    }
    const char *argv [] = { "/bin/sh", "-c", command, NULL };
    sb_tools_buf_t out = { 0 };
    if (sb_tools_run_process (ctx, argv, ctx->env_extra, timeout_s, ctx->network, res, &out) != 0)
        return -1;
    if (res->exit_code != 0 && !res->timed_out && !res->cancelled && res->exit_code > 0)
        sb_tools_buf_addf (&out, "%s[exit code %d]\n", sb_tools_buf_ends_with_newline (&out) ? "" : "\n",
                    res->exit_code);
    if (out.len == 0)
        sb_tools_buf_addf (&out, "(no output)\n");
    return sb_tools_finish (res, res->exit_code == 0 && !res->timed_out && !res->cancelled, &out);
}

//  Whether the session's rules deny reading some path: grep then leaves
//  those files out.
static bool
s_read_guarded (const sb_tool_ctx_t *ctx)
{
    return ctx->read_denied && ctx->read_denied (NULL, ctx->read_denied_arg);
}

//  grep -Z's output ("name\0line:text\n") without the lines of files
//  the rules deny, with ':' for the NUL. Output cut in the middle keeps
//  only its head: past the cut, lines cannot be told apart safely.
static void
s_grep_filter (const sb_tool_ctx_t *ctx, sb_tools_buf_t *out, size_t *hidden)
{
    size_t len = out->len;
    const char *cut = out->p ? strstr (out->p, "\n\n[... output truncated: ") : NULL;
    if (cut)
        len = (size_t) (cut - out->p);
    sb_tools_buf_t kept = { 0 };
    size_t i = 0;
    while (out->p && i < len) {
        const char *nul = memchr (out->p + i, 0, len - i);
        const char *nl = memchr (out->p + i, '\n', len - i);
        size_t end = nl ? (size_t) (nl - out->p) + 1 : len;
        if (!nul || (size_t) (nul - out->p) >= len) {
            sb_tools_buf_add (&kept, out->p + i, end - i);      //  a trailer, not a match
            i = end;
            continue;
        }
        size_t name_end = (size_t) (nul - out->p);
        nl = memchr (nul, '\n', len - name_end);
        end = nl ? (size_t) (nl - out->p) + 1 : len;
        if (ctx->read_denied (out->p + i, ctx->read_denied_arg))
            (*hidden)++;
        else {
            sb_tools_buf_add (&kept, out->p + i, name_end - i);
            sb_tools_buf_add (&kept, ":", 1);
            sb_tools_buf_add (&kept, nul + 1, end - name_end - 1);
        }
        i = end;
    }
    if (cut)
        sb_tools_buf_addf (&kept, "%s[output cut: only its first part is shown; narrow the pattern or the path]\n",
                           sb_tools_buf_ends_with_newline (&kept) ? "" : "\n");
    free (out->p);
    *out = kept;
}

int
sb_tool_grep (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = {
        { "pattern", SB_TOOLS_ARG_STR, true }, { "path", SB_TOOLS_ARG_STR, false },
    };
    if (sb_tools_args_check ("grep", args, spec, 2, res) != 0)
        return -1;
    size_t plen = 0, len = 1;
    const char *pattern = sb_tools_arg_str (args, "pattern", &plen);
    if (plen == 0)
        return sb_tools_error (res, "grep: pattern is empty");
    if (plen > SB_TOOLS_PATTERN_MAX || strlen (pattern) != plen)
        return sb_tools_error (res, "grep: pattern too long (%zu bytes; the limit is %d)",
                        plen, SB_TOOLS_PATTERN_MAX);
    const char *path = sb_tools_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    if (sb_tools_resolve (ctx, path ? path : ".", path ? len : 1, false, resolved, res) != 0)
        return -1;
    //  argv, not a shell: the pattern is one argument after "--", so
    //  neither quotes nor a leading dash can change what runs.
    //  With no file operand grep -r searches "." and prints names without
    //  a "./" prefix.
    const char *rel = sb_path_relative (ctx->workspace, resolved);
    //  with read deny rules: names end in NUL, so that the lines of a
    //  denied file can be told and left out, and nothing streams before
    bool guarded = s_read_guarded (ctx);
    const char *argv [] = {
        "grep", guarded ? "-rnHIEZ" : "-rnHIE", "--color=never", "--exclude-dir=.git", "--", pattern,
        strcmp (rel, ".") == 0 ? NULL : rel, NULL,
    };
    int timeout_s = sb_tools_timeout_default (ctx);
    sb_tools_buf_t out = { 0 };
    sb_tool_ctx_t quiet = *ctx;
    if (guarded)
        quiet.on_output = NULL;
    if (sb_tools_run_process (&quiet, argv, ctx->env_extra, timeout_s, false, res, &out) != 0)
        return -1;
    size_t hidden = 0;
    if (guarded)
        s_grep_filter (ctx, &out, &hidden);
    //  said nowhere, not even as a count: that a denied file matches a
    //  pattern is already a piece of what it holds
    if (hidden && out.len == 0 && res->exit_code == 0)
        res->exit_code = 1;
    if (res->exit_code == 1 && out.len == 0)
        sb_tools_buf_addf (&out, "no matches\n");
    else
    if (res->exit_code > 1)
        sb_tools_buf_addf (&out, "%s[exit code %d]\n", sb_tools_buf_ends_with_newline (&out) ? "" : "\n",
                    res->exit_code);
    bool ok = (res->exit_code == 0 || res->exit_code == 1) && !res->timed_out && !res->cancelled;
    return sb_tools_finish (res, ok, &out);
}

/*  actors/exec/tools_git.c — the read-only git tools, git_status and
    git_diff, run so that no configuration can make them run a program.

    The repository is the model's to write, and git's config names programs
    in many places: filter drivers (clean, smudge, process), diff drivers
    (textconv, command), diff.external, core.fsmonitor, hooks, the pager,
    credential helpers, core.sshCommand and more. A driver's name is free
    (filter.<anything>.clean), and the repository's own config cannot be
    switched off by the environment, so overriding a fixed list of names is
    not enough. Each call therefore first lists the configuration git will
    read (`git config -z --list`: every scope, with include files expanded),
    and passes a `-c` override for every key found there that names a
    program, plus fixed ones for the keys whose defaults run something.
    Command-line overrides take precedence over every config file.

    On top of that, status and diff run with --no-optional-locks (no index
    write, so no post-index-change hook), --no-pager, --no-ext-diff and
    --no-textconv, and --ignore-submodules=all: a submodule would be
    inspected by a child git under its own config, whose driver names this
    listing does not see.

    What is left: the listing and the command are two processes, so a
    writer racing between them (another tool on the same workspace) could
    add a driver the second one honours. The tools of one run are serial;
    docs/operations.md says so.
*/
#include "actors/exec/tools_impl.h"
#include "actors/exec/path.h"
#include "sandbox/spawn.h"
#include "common/git.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  The most config we read, and the most overrides we pass; a config past
//  either is refused rather than half-neutralised.
#define SB_TOOLS_GIT_CONFIG_MAX      (1024 * 1024)
#define SB_TOOLS_GIT_OVERRIDES_MAX   1000
#define SB_TOOLS_GIT_KEY_MAX         1024

typedef struct {
    char **v;
    size_t n, cap;
} s_strv_t;

static int
s_strv_push (s_strv_t *sv, char *s)
{
    if (!s)
        return -1;
    if (sv->n + 1 >= sv->cap) {
        size_t ncap = sv->cap ? sv->cap * 2 : 64;
        char **nv = realloc (sv->v, ncap * sizeof *nv);
        if (!nv) {
            free (s);
            return -1;
        }
        sv->v = nv;
        sv->cap = ncap;
    }
    sv->v [sv->n++] = s;
    sv->v [sv->n] = NULL;
    return 0;
}

static void
s_strv_free (s_strv_t *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free (sv->v [i]);
    free (sv->v);
    memset (sv, 0, sizeof *sv);
}

//  Adds a `-c key=value` for every key in a `git config -z --list`
//  output ("key\nvalue\0" or "key\0" per entry) that names a program.
static int
s_overrides_from_listing (const char *list, size_t len, s_strv_t *argv, sb_tool_result_t *res)
{
    size_t count = 0;
    for (size_t i = 0; i < len; ) {
        const char *entry = list + i;
        size_t elen = strnlen (entry, len - i);
        i += elen + 1;
        const char *nl = memchr (entry, '\n', elen);
        size_t klen = nl ? (size_t) (nl - entry) : elen;
        const char *value = sb_git_neutral_value (entry, klen);
        if (!value)
            continue;
        //  `-c` splits at the first '=', so a key holding one (a quoted
        //  subsection) cannot be overridden: refuse rather than run.
        if (klen > SB_TOOLS_GIT_KEY_MAX || memchr (entry, '=', klen))
            return sb_tools_error (res, "git: the repository's config has a key that names a "
                                   "program and cannot be overridden (%.64s); not run", entry);
        if (++count > SB_TOOLS_GIT_OVERRIDES_MAX)
            return sb_tools_error (res, "git: the repository's config names more than %d programs; "
                                   "not run", SB_TOOLS_GIT_OVERRIDES_MAX);
        char *kv;
        if (s_strv_push (argv, strdup ("-c")) != 0
            || asprintf (&kv, "%.*s=%s", (int) klen, entry, value) < 0
            || s_strv_push (argv, kv) != 0)
            return sb_tools_error (res, "git: out of memory");
    }
    return 0;
}

//  Lists the config git would read in the workspace.
static int
s_list_config (const sb_tool_ctx_t *ctx, s_strv_t *argv, sb_tool_result_t *res)
{
    const char *list_argv [] = { "git", "--no-pager", "config", "-z", "--list", NULL };
    sb_spawn_opts_t opts = {
        .argv = list_argv,
        .cwd = ctx->workspace,
        .env_extra = ctx->env_extra,
        .timeout_ms = sb_tools_timeout_default (ctx) * 1000,
        .cancel_fd = ctx->cancel_fd,
        .cap_head = SB_TOOLS_GIT_CONFIG_MAX,
        .cap_tail = 1,
        .sandbox = ctx->sandbox,
    };
    sb_spawn_result_t sr;
    char err [1024];
    if (sb_spawn_run (&opts, &sr, err, sizeof err) != 0)
        return sb_tools_error (res, "%s", err);
    int rc;
    if (sr.cancelled || sr.timed_out)
        rc = sb_tools_error (res, "git: %s while reading the config",
                             sr.cancelled ? "cancelled" : "timed out");
    else
    if (sr.truncated)
        rc = sb_tools_error (res, "git: the config is over %d bytes; not run",
                             SB_TOOLS_GIT_CONFIG_MAX);
    else
    if (sr.exit_code != 0)
        rc = sb_tools_error (res, "git: cannot read the config (exit code %d): %.512s",
                             sr.exit_code, sr.output);
    else
        rc = s_overrides_from_listing (sr.output, sr.output_len, argv, res);
    sb_spawn_result_clear (&sr);
    return rc;
}

static int
s_run_git (const sb_tool_ctx_t *ctx, const char *const *cmd, const char *empty,
           sb_tool_result_t *res)
{
    s_strv_t argv = { 0 };
    const char *head [] = { "git", "--no-pager", "--no-optional-locks" };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof head / sizeof head [0]; i++)
        rc = s_strv_push (&argv, strdup (head [i]));
    for (size_t i = 0; rc == 0 && sb_git_always [i]; i++)
        if (s_strv_push (&argv, strdup ("-c")) != 0 || s_strv_push (&argv, strdup (sb_git_always [i])) != 0)
            rc = -1;
    if (rc != 0) {
        s_strv_free (&argv);
        return sb_tools_error (res, "git: out of memory");
    }
    if (s_list_config (ctx, &argv, res) != 0) {
        s_strv_free (&argv);
        return -1;
    }
    for (size_t i = 0; rc == 0 && cmd [i]; i++)
        rc = s_strv_push (&argv, strdup (cmd [i]));
    if (rc != 0) {
        s_strv_free (&argv);
        return sb_tools_error (res, "git: out of memory");
    }
    sb_tools_buf_t out = { 0 };
    rc = sb_tools_run_process (ctx, (const char *const *) argv.v, ctx->env_extra,
                               sb_tools_timeout_default (ctx), false, res, &out);
    s_strv_free (&argv);
    if (rc != 0) {
        free (out.p);
        return -1;
    }
    if (res->exit_code > 0)
        sb_tools_buf_addf (&out, "%s[exit code %d]\n", sb_tools_buf_ends_with_newline (&out) ? "" : "\n",
                           res->exit_code);
    if (out.len == 0)
        sb_tools_buf_addf (&out, "%s\n", empty);
    return sb_tools_finish (res, res->exit_code == 0 && !res->timed_out && !res->cancelled, &out);
}

int
sb_tool_git_status (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    if (sb_tools_args_check ("git_status", args, NULL, 0, res) != 0)
        return -1;
    const char *cmd [] = { "status", "--short", "--branch", "--ignore-submodules=all", NULL };
    return s_run_git (ctx, cmd, "(clean)", res);
}

int
sb_tool_git_diff (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = { { "path", SB_TOOLS_ARG_STR, false } };
    if (sb_tools_args_check ("git_diff", args, spec, 1, res) != 0)
        return -1;
    size_t len = 0;
    const char *path = sb_tools_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    const char *cmd [] = {
        "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all",
        NULL, NULL, NULL,
    };
    if (path) {
        //  A deleted file is a fair thing to diff, so it need not exist.
        if (sb_tools_resolve (ctx, path, len, true, resolved, res) != 0)
            return -1;
        cmd [5] = "--";
        cmd [6] = sb_path_relative (ctx->workspace, resolved);
    }
    return s_run_git (ctx, cmd, "(no unstaged changes)", res);
}

/*  common/git.h — running git for the CLI's run summary (cli/changes.c)
    and the exec actor's exec.diff (actors/exec/diff.c).

    A *stage* is the work tree as `git add -A` would stage it, written
    through a temporary copy of the real index (which keeps git's stat
    cache, so only changed files are hashed), without touching the real
    index. A work tree whose untracked files are too many or too big to
    hash is refused (the callers treat it as outside git). */
#ifndef SB_COMMON_GIT_H
#define SB_COMMON_GIT_H

#include <stdbool.h>
#include <stddef.h>

#define SB_GIT_OUT_MAX            (64u << 20)     /* bytes read from one git command */
#define SB_GIT_UNTRACKED_MAX_FILES  5000
#define SB_GIT_UNTRACKED_MAX_BYTES  (256ll << 20)

#define SB_GIT_CONFIG_MAX         (1u << 20)     /* bytes of config listed to neutralise */
#define SB_GIT_OVERRIDES_MAX        1000          /* keys naming a program overridden, at most */

/*  Keys of git's config that name a program: the value that makes `key`
    (klen bytes, as `git config --list` prints it) run nothing, or NULL
    when it runs nothing anyway. */
const char *sb_git_neutral_value (const char *key, size_t klen);
/*  `KEY=VALUE` overrides to pass always (NULL-terminated): keys whose
    default runs something, or that a listing would miss. */
extern const char *const sb_git_always [];

/*  Runs `git -C WS ARGS...` (at most 20 arguments) with
    GIT_INDEX_FILE=index when index is set. Its stdout goes to *out
    (NUL-terminated, caller frees; NULL: discarded), stderr to /dev/null.
    No program the repository's config names runs: every key that names
    one is overridden with `-c` (git's config is listed first), and a
    config that cannot be neutralised is not run (-1).
    Returns git's exit status, or -1. */
int sb_git_run (const char *ws, const char *index, const char *const *args, char **out);

#define SB_GIT_ENV_MAX 8       /* variables sb_git_run_env passes, at most */

/*  As sb_git_run, in an environment of its own: PATH, LC_ALL=C, no system
    or global git config, and `vars` (KEY=VALUE, NULL-terminated, at most
    SB_GIT_ENV_MAX), and nothing of the server's environment. */
int sb_git_run_env (const char *ws, const char *const *vars, const char *const *args, char **out);

/*  The `-c` overrides of one listing of a repository's config, for a
    series of commands on the same repository in the same environment
    that nothing else changes meanwhile (a checkpoint between two steps):
    each git then costs one process instead of two. Zero it to start;
    clear it when done. */
typedef struct {
    char **kv;                  /* KEY=VALUE, NULL-terminated; NULL: none */
    bool ready;                 /* listed */
} sb_git_overrides_t;
/*  As sb_git_run_env, the config listed only by the first call with `ov`
    (NULL: every time). */
int sb_git_run_cached (sb_git_overrides_t *ov, const char *ws, const char *const *vars, const char *const *args,
                       char **out);
void sb_git_overrides_clear (sb_git_overrides_t *ov);

/*  Copies the file `from` to `to` (mode 0600): 0, also when `from` does
    not exist (nothing is written then); -1 on error. */
int sb_git_copy_file (const char *from, const char *to);

typedef struct {
    char workspace [4096];
    char exclude [4200];        /* a pathspec to leave out (":(exclude)DATA"), or "" */
    char tmpdir [64];           /* holds the temporary index */
    char index [128];
} sb_git_stage_t;

/*  Opens a stage on `workspace`: 0, or -1 when it is not inside a git
    work tree, its untracked files are over the caps, or git failed.
    Close it with sb_git_stage_close either way. */
int sb_git_stage_open (sb_git_stage_t *stage, const char *workspace, const char *exclude);
/*  Stages the work tree and writes it as a tree object: its id in `tree`. */
int sb_git_stage_tree (sb_git_stage_t *stage, char *tree, size_t n);
void sb_git_stage_close (sb_git_stage_t *stage);

/*  A baseline: the staged tree of a workspace at one moment, kept by name
    in the repository's own git dir (`switchboard/base-NAME`, a file git
    ignores), so that it lives with the work tree wherever that is.
    NAME is [0-9A-Za-z_-], at most 64 characters. The tree object is
    unreachable, so a `git gc` may prune it after its grace period; a
    baseline whose tree is gone does not load.

    Saves one unless NAME already has one: 0 saved or already there, -1
    outside git, over the stage caps, or on error. */
int sb_git_baseline_save (const char *workspace, const char *exclude, const char *name);
/*  The baseline's tree id in `tree`: 0, or -1 when there is none (or its
    tree object is gone). */
int sb_git_baseline_load (const char *workspace, const char *name, char *tree, size_t n);

#endif

/*  common/git_checkpoint.h — a workspace recorded as a git tree, for the
    executor's checkpoints (actors/exec/checkpoint.c, docs/checkpoints.md).

    A checkpoint is the work tree as `git add -A` would stage it (tracked
    and untracked files, .gitignore honoured) written as a tree object.
    Inside a git work tree it goes to the repository's own object store
    through a private index; elsewhere to a shadow repository
    DIR/<session>.git. The private index (DIR/<session>.index, or inside
    the git dir when there is no DIR) is kept between checkpoints, so git
    hashes only the files whose stat data changed. Each tree is committed
    on the ref refs/switchboard/checkpoints/<session>, a chain that keeps
    them reachable, so `git gc` does not prune them.

    git runs in an environment of its own (sb_git_run_env): nothing of the
    server's or the model's environment reaches it, and no program the
    repository's config names runs. Paths from git are read NUL-separated
    and treated as bytes from outside. Any thread; one checkpoint of a
    session at a time. */
#ifndef SB_COMMON_GIT_CHECKPOINT_H
#define SB_COMMON_GIT_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_CKPT_CHANGED_MAX      256        /* changed paths kept in a checkpoint */
#define SB_CKPT_SKIPPED_MAX      64         /* skipped files listed in a checkpoint */
#define SB_CKPT_PATH_MAX         4096       /* bytes of one path kept */
#define SB_CKPT_FILES_MAX        1000000    /* files a work tree may hold to be recorded */
#define SB_CKPT_MAX_FILE_DEFAULT (16ll << 20)
#define SB_CKPT_MAX_FILE_MIN     1024ll
#define SB_CKPT_MAX_FILE_MAX     (1ll << 40)

#define SB_CKPT_HASHES_MAX_BYTES (1u << 20)  /* the skipped files' hash cache, at most */

typedef struct {
    char *path;
    int64_t size;
    char hash [65];             /* BLAKE2b-256 of its content, hex; "" when it could not be read */
} sb_ckpt_skip_t;

typedef struct {
    char tree [80];             /* the tree object's id */
    char commit [80];           /* its commit on the session's ref */
    bool shadow;                /* in DIR/<session>.git: the workspace is not a git work tree */
    bool first;                 /* the session's first checkpoint: nothing to compare with */
    char **changed;             /* paths that differ from the previous checkpoint, at most SB_CKPT_CHANGED_MAX */
    size_t nchanged;
    size_t changed_total;       /* how many differ in all */
    sb_ckpt_skip_t *skipped;    /* files over max_file, recorded by size only, at most SB_CKPT_SKIPPED_MAX */
    size_t nskipped;
    size_t skipped_total;
} sb_ckpt_t;

/*  Records `workspace` for session `session_id` ([0-9A-Za-z_-], at most 64
    characters). dir: the folder for the private index and the shadow
    repositories (DATA/checkpoints, made if missing), or NULL: then only a
    git work tree is recorded, its index in its git dir. exclude: a
    pathspec to leave out (":(exclude)DATA"), or NULL. Files over max_file
    bytes are left out of the tree and listed in `out->skipped`, with
    their size and hash (hashed again only when their size, mtime or inode
    changed: the last hashes are kept beside the index). message:
    the commit's message. Returns 0 and fills *out (clear it with
    sb_ckpt_clear either way), or -1 with a reason in err. */
int sb_ckpt_take (const char *workspace, const char *dir, const char *session_id, const char *exclude,
                  int64_t max_file, const char *message, sb_ckpt_t *out, char *err, size_t errlen);

void sb_ckpt_clear (sb_ckpt_t *ckpt);

#define SB_CKPT_RESTORE_MAX 256     /* restored and removed paths listed by sb_ckpt_restore */

/*  What sb_ckpt_restore did: the paths it wrote back (changed or deleted
    since the target) and the ones it removed (made since), at most
    SB_CKPT_RESTORE_MAX each, with how many in all. */
typedef struct {
    char **restored;
    size_t nrestored, restored_total;
    char **removed;
    size_t nremoved, removed_total;
    char **refused;             /* paths not removed: a `..`, or a symlink on the way */
    size_t nrefused, refused_total;
    char **left;                /* paths that differ, left as they are: not in `only` */
    size_t nleft, left_total;
} sb_ckpt_restore_t;

/*  Puts the work tree of `workspace` back to the tree `target`, a
    checkpoint of the session, from `now`, the checkpoint just taken (so
    that the restore can be undone by restoring `now`). Files in `now`
    and not in `target` are removed, unless named in `keep` (the target's
    skipped files, NULL-terminated, or NULL); every other file of the
    target is written back. Only the private index is used: the person's
    index and HEAD are untouched. A path is removed by unlinking it
    itself, with every folder on its way opened without following a
    symlink, so nothing outside the workspace is touched; a path with a
    `..` component is refused. `only` (NULL-terminated, sorted here in
    place; NULL: every path) names the paths the restore may touch: any
    other that differs is left as it is and listed in out->left (a rewind
    leaves the person's own edits alone this way). dir and sid as for
    sb_ckpt_take. Returns 0 and fills *out (clear with
    sb_ckpt_restore_clear either way), or -1 with a reason in err. */
int sb_ckpt_restore (const char *workspace, const char *dir, const char *session_id, const char *target,
                     const char *now, const char *const *keep, const char **only, sb_ckpt_restore_t *out,
                     char *err, size_t errlen);

void sb_ckpt_restore_clear (sb_ckpt_restore_t *r);

/*  Makes `dest` (absolute; absent or an empty folder) a work tree holding
    the checkpoint `commit` (its tree `tree`) of session sid: inside git, a
    worktree of the workspace's repository detached at that commit;
    outside git, the checkpoint's files from the shadow repository (dest
    gets no .git). The person's index and HEAD are not touched. out_ws
    receives the folder that stands for the workspace: dest, or below it
    when the workspace is below its repository's top. Returns 0, or -1
    with a reason in err. dir as for sb_ckpt_take. */
int sb_ckpt_materialize (const char *workspace, const char *dir, const char *session_id, const char *commit,
                         const char *tree, const char *dest, char *out_ws, size_t n, char *err, size_t errlen);

/*  Starts session sid's chain of checkpoints at `commit`, a checkpoint
    of session from_sid (a fork: its copied checkpoint entries name the
    source's trees, and its next checkpoint follows that commit). Inside
    git (shadow false) the ref is made in the workspace's repository;
    outside, the source's shadow repository under dir is fetched into
    sid's. Returns 0, or -1 with a reason in err. */
int sb_ckpt_seed (const char *workspace, const char *dir, const char *from_sid, const char *session_id,
                  const char *commit, bool shadow, char *err, size_t errlen);

/*  The tree of the newest checkpoint on session sid's chain whose commit
    message holds `message` (one line), into tree (n bytes): 0, or -1 when
    there is none. A rewind run started again after a crash finds the
    work tree its first attempt found. */
int sb_ckpt_find (const char *workspace, const char *dir, const char *session_id, const char *message, char *tree,
                  size_t n);

/*  Forgets session sid's checkpoints: its ref in the workspace's
    repository (ws may be NULL or gone), the private index and its
    hashes, and the shadow repository under dir (may be NULL). Returns 0,
    or -1 when something could not be removed (what could, was). */
int sb_ckpt_forget (const char *workspace, const char *dir, const char *session_id);

/*  The ref that holds a session's checkpoints, in `ref` (n bytes): 0, or
    -1 when the session id is not a valid name. */
int sb_ckpt_ref (const char *session_id, char *ref, size_t n);

/*  The difference between two checkpoint trees of a session, `from` and
    `to` (hex ids from its checkpoint entries), as git gives it: the
    `diff --numstat -z -M` records in *numstat and the full unified diff
    in *diff (NULL when it is over SB_GIT_OUT_MAX: the files without
    their text). Paths are relative to the repository's top. shadow: the
    trees are in the shadow repository DIR/<session>.git (dir must be
    given), else in the workspace's own object store. Reads only: no
    index, no ref, no work tree is touched. Returns 0 (free both either
    way), -1 with a reason in err, or -2 when a tree is not in the store
    (pruned, or taken on a worker whose repository this is not). */
int sb_ckpt_diff (const char *workspace, const char *dir, const char *session_id, bool shadow, const char *from,
                  const char *to, char **numstat, char **diff, char *err, size_t errlen);

#endif

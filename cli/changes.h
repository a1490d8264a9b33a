/*  cli/changes.h — what a run changed in its workspace, for the one-shot's
    closing lines.

    A snapshot is taken before the run and compared after it, so changes
    that were there before are not claimed. Inside a git work tree the
    snapshot is a tree object written through a temporary index (the
    work tree as `git add -A` would stage it), and the comparison is
    `git diff --numstat` between the two trees, printed as `git diff
    --stat` does. The index copy keeps git's stat cache, so only changed
    files are hashed; their blobs stay in the object store as loose
    objects until git prunes them. A work tree whose untracked files are
    too many or too big to hash is treated as outside git.

    Outside git the snapshot is a bounded list of paths, sizes and
    modification times, and the comparison lists created, modified and
    deleted files. */
#ifndef SB_CLI_CHANGES_H
#define SB_CLI_CHANGES_H

#include <stdio.h>

typedef struct sb_changes sb_changes_t;

/*  Takes the snapshot of `workspace` (an absolute path), leaving out
    data_dir (the server's data folder) when it lies inside. Returns NULL
    on allocation failure; the caller then prints nothing. */
sb_changes_t *sb_changes_new (const char *workspace, const char *data_dir);
void sb_changes_destroy (sb_changes_t **self_p);

/*  Prints what changed since the snapshot to `out`: a heading line, then
    one line per file, then a totals line; or "no changes in the
    workspace". */
void sb_changes_print (sb_changes_t *self, FILE *out);

#endif

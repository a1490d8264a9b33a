/*  cli/changes.h — what a run changed in its workspace, for the one-shot's
    closing lines.

    A snapshot is taken before the run and compared after it, so changes
    that were there before are not claimed. Inside a git work tree the
    snapshot is a tree object written through a temporary index (the
    work tree as `git add -A` would stage it), and the comparison is
    `git diff --numstat` between the two trees, printed as `git diff
    --stat` does. Outside git it is a bounded list of paths, sizes and
    modification times, and the comparison lists created, modified and
    deleted files. */
#ifndef SB_CLI_CHANGES_H
#define SB_CLI_CHANGES_H

#include <stdio.h>

typedef struct sb_changes sb_changes_t;

/*  Takes the snapshot of `workspace` (an absolute path). Returns NULL when
    none could be taken; the caller then prints nothing. */
sb_changes_t *sb_changes_new (const char *workspace);
void sb_changes_destroy (sb_changes_t **self_p);

/*  Prints what changed since the snapshot to `out`: a heading line, then
    one line per file, then a totals line; or "no changes in the
    workspace". */
void sb_changes_print (sb_changes_t *self, FILE *out);

#endif

/*  actors/exec/path.h — confine tool paths to a workspace.

    Every path a model hands to a tool goes through sb_path_resolve first.
    The resolver walks the path one component at a time, expanding symlinks
    itself, and refuses the path the moment any step would leave the
    workspace: a `..` above the root, an absolute path elsewhere, or a
    symlink (anywhere in the chain) whose target lies outside. A symlink that
    leaves and comes back is refused too; the rule the model sees is simple:
    never step outside.

    Resolution happens before the open, so a path could be swapped for a
    symlink in between. The open helpers close that window: sb_path_open
    uses openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) under the workspace
    (falling back to O_NOFOLLOW on old kernels), and sb_path_mkdirs walks
    directories with O_NOFOLLOW at every step.

    All functions are thread-safe and allocate nothing.
*/
#ifndef SB_EXEC_PATH_H
#define SB_EXEC_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*  Resolve `path` against `workspace_real` (an absolute realpath, as the
    caller guarantees). Relative paths start at the workspace; absolute ones
    must lie inside it. With for_write false every component must exist;
    with for_write true missing trailing components are allowed (the file,
    and its parent directories, may be created).

    On success writes the resolved absolute path (no symlinks, no `.`/`..`,
    always the workspace or beneath it) to out and returns 0. On failure
    returns -1 and writes a message for the model to err, for example
    "path escapes the workspace: ../../etc/passwd".                          */
int
    sb_path_resolve (const char *workspace_real, const char *path, bool for_write,
                     char *out, size_t outlen, char *err, size_t errlen);

/*  Same, with an explicit length: bytes from an untrusted source may
    contain NUL, which is refused rather than silently truncating the path. */
int
    sb_path_resolve_n (const char *workspace_real, const char *path, size_t pathlen,
                       bool for_write, char *out, size_t outlen,
                       char *err, size_t errlen);

/*  The part of a resolved path below the workspace: "src/main.c", or "."
    for the workspace itself. Returns a pointer into `resolved` (or to a
    static "."), NULL if resolved is not inside the workspace.              */
const char *
    sb_path_relative (const char *workspace_real, const char *resolved);

/*  Open a path returned by sb_path_resolve. No component may be a symlink
    at open time, and the kernel keeps the lookup beneath the workspace
    where openat2 exists. O_CLOEXEC and O_NOFOLLOW are always added.
    Returns a descriptor, or -1 with errno set (ELOOP: a symlink appeared). */
int
    sb_path_open (const char *workspace_real, const char *resolved, int flags, mode_t mode);

/*  Create the directory `resolved_dir` (a resolved path inside the
    workspace) and any missing parents, refusing to follow a symlink at any
    step. Returns an O_RDONLY|O_DIRECTORY descriptor for it, or -1 with a
    message in err.                                                          */
int
    sb_path_mkdirs (const char *workspace_real, const char *resolved_dir,
                    char *err, size_t errlen);

#endif

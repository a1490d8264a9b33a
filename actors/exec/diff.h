/*  actors/exec/diff.h — the unified diff a write_file or edit_file call
    would make, computed without writing (docs/approvals.md): a person
    asked to approve a change sees the change.

    The diff is one hunk: the lines the two texts share at their start
    and end are context (three of them shown), everything between is
    removed and added. For an edit (one replaced span) that is the
    minimal diff; for a rewrite it is a correct diff, if not always the
    shortest. Thread-safe; reads the file through actors/exec/path.h, so
    a path outside the workspace gives no diff.
*/
#ifndef SB_EXEC_DIFF_H
#define SB_EXEC_DIFF_H

#include <stddef.h>

#define SB_DIFF_MAX          (1u << 20)       //  bytes of diff given to a person
#define SB_DIFF_FILE_MAX     (16u << 20)      //  larger files get no diff
#define SB_DIFF_CONTEXT      3

/*  The unified diff between `old` (olen bytes; NULL: the file is new)
    and `new` for file `path`, at most `max` bytes (cut with a line that
    says so). Returns a malloc'd string ("" when the texts are equal), or
    NULL when out of memory. */
char *sb_diff_unified (const char *path, const char *old, size_t olen, const char *new, size_t nlen,
                       size_t max);

/*  The diff that tool `tool` (write_file or edit_file) with JSON
    `arguments` would make in `workspace` (a realpath): NULL for any other
    tool, for arguments the tool would refuse (the call then fails by
    itself), or for a file too large or unreadable. The caller frees it. */
char *sb_diff_preview (const char *workspace, const char *tool, const char *arguments, size_t max);

#endif

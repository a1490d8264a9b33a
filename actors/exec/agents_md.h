/*  actors/exec/agents_md.h — a project's AGENTS.md files, read at the start
    of each run and added to the model's instructions (docs/agents.md).

    Which files, in this order (the nearest last, so that it reads as the
    one that has the last word):
      1. the personal file, $XDG_CONFIG_HOME/switchboard/AGENTS.md (else
         ~/.config/switchboard/AGENTS.md);
      2. AGENTS.md in the project root: the nearest folder at or above the
         workspace that holds a `.git` (the workspace itself when none
         does), then in each folder below it down to the workspace.

    The project's files are confined to the project root as every tool path
    is to the workspace (actors/exec/path.h): an AGENTS.md that is a
    symlink leading out of it, or that sits under such a symlink, is not
    read. Only regular files are read.

    The text of all of them together is capped at SB_AGENTS_MAX_BYTES; the
    cut is made on a UTF-8 boundary and a note says how much was left out.

    Thread-safe; blocks on file reads only.
*/
#ifndef SB_EXEC_AGENTS_MD_H
#define SB_EXEC_AGENTS_MD_H

#include <stdbool.h>
#include <stddef.h>

#define SB_AGENTS_MAX_BYTES   (32 * 1024)     //  instructions from all files together
#define SB_AGENTS_MAX_FILES   64              //  instructions.loaded paths (schemas/types.c)
#define SB_AGENTS_NAME        "AGENTS.md"

typedef struct {
    char *text;                 //  owned; NULL when no file was read
    size_t bytes;               //  strlen (text)
    char *paths [SB_AGENTS_MAX_FILES];   //  owned; the files read, in order
    size_t npaths;
    bool truncated;             //  the cap cut them
} sb_agents_t;

/*  Reads the files for a run in `workspace_real` (a realpath). `personal`
    is the personal file's path (NULL: from the environment, see above;
    "" for none). Fills `out` (zeroed first) and returns 0, or -1 when out
    of memory (out cleared). A file that cannot be read is skipped. */
int sb_agents_load (const char *workspace_real, const char *personal, sb_agents_t *out);

//  Frees what `a` holds and zeroes it; tolerates NULL.
void sb_agents_clear (sb_agents_t *a);

#endif

/*  common/shparse.h — a shell command line, parsed as a POSIX shell reads
    it, for the approval rules (docs/approvals.md, "Shell commands").

    A rule must see what /bin/sh will run, not the text the model wrote:
    `r''m` is `rm`, a tab separates words like a space, `a; b`, `a && b`,
    `$(b)`, backticks, `( b )`, `sh -c 'b'`, `sudo b`, `xargs b` and
    `find -exec b ;` all run b. The parser reads words, quoting,
    operators, substitutions, redirections and assignments, and lists
    every simple command it finds, each with its words unquoted, with
    flags that say what in it is not plain text.

    What it does not read (here-documents, `case`, functions, arithmetic,
    bash's $'...') and what passes its limits (SB_SH_TEXT_MAX bytes,
    SB_SH_DEPTH_MAX levels of nesting, SB_SH_CMDS_MAX commands) is an
    error, never a partial answer: the caller then knows nothing about the
    command and must ask a person.

    No I/O, no globals: any thread.
*/
#ifndef SB_SHPARSE_H
#define SB_SHPARSE_H

#include <stdbool.h>
#include <stddef.h>

#define SB_SH_TEXT_MAX  (128 * 1024)    //  bytes of a command line (the shell tool's own limit)
#define SB_SH_DEPTH_MAX 16              //  nesting: $( ), ` `, ( ), sh -c, wrappers
#define SB_SH_CMDS_MAX  4096            //  simple commands in one line

//  What a simple command holds besides plain words.
#define SB_SH_SUBST     0x01    //  a word expands: $NAME, ${...}, $( ), ` `
#define SB_SH_GLOB      0x02    //  an unquoted * ? or [...]: the words depend on the files
#define SB_SH_REDIR     0x04    //  a redirection (other than to /dev/null or between fds 1 and 2)
#define SB_SH_ASSIGN    0x08    //  NAME=value before the command
#define SB_SH_NESTED    0x10    //  inside a substitution, a sh -c string, a wrapper or find -exec
#define SB_SH_UNKNOWN   0x20    //  runs code the text does not show: its name expands, a shell
                                //  reads stdin or a file, eval of an expansion

typedef struct {
    char **argv;                //  the words after the assignments, unquoted
    unsigned *wflags;           //  per word: SB_SH_SUBST, SB_SH_GLOB
    size_t argc;
    char **assigns;             //  NAME=value, unquoted
    size_t nassigns;
    unsigned flags;
} sb_sh_cmd_t;

typedef struct {
    sb_sh_cmd_t *cmds;          //  in the order the shell meets their ends
    size_t ncmds, cap;
    size_t ntop;                //  commands at the top level
    bool compound;              //  an operator, a subshell, a keyword: more than one command
    char error [160];           //  "" when parsed
} sb_sh_t;

//  Parses `len` bytes of `text`. Returns NULL only when out of memory;
//  else a parse whose `error` says why it could not be read, if so.
sb_sh_t *sb_sh_parse (const char *text, size_t len);
void sb_sh_destroy (sb_sh_t **self_p);

//  The command itself when the line is one simple command of plain words:
//  no operator, substitution, glob, redirection or assignment, nothing
//  unknown. NULL otherwise (and when the parse failed).
const sb_sh_cmd_t *sb_sh_whole (const sb_sh_t *self);

//  The last component of a command's name: "git" for /usr/bin/git.
const char *sb_sh_program (const sb_sh_cmd_t *cmd);

#endif

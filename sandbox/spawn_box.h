/*  sandbox/spawn_box.h — the sandbox a spawned process runs in;
    internal to sandbox/spawn.c (the public side is in spawn.h).

    Three kinds (docs/sandbox.md):

    - bwrap: the command is started under bubblewrap. The host is mounted
      read-only, the workspace (the spawn's cwd) and the spawn's extra
      writable folders read-write, /tmp is private, every hidden path (the
      data folder, the providers file, ...) is an empty tmpfs or /dev/null,
      /proc is that of a PID namespace of its own, the network is a new
      namespace with nothing but loopback unless the spawn allows it, and
      no capability is left. Under a root server the command runs as the
      workspace's owner when that is not root (setpriv inside the box),
      else as root without capabilities.
    - landlock: where bubblewrap cannot run. The spawning thread restricts
      itself (Landlock, no_new_privs, an empty capability bounding set) and
      the child inherits it: the host readable but for the hidden paths,
      the workspace writable, no TCP unless allowed (ABI 4), no ptrace or
      /proc/PID/mem of anything outside (and no signal, ABI 6).
    - none: the command runs as the server's user, seeing what it sees.
*/
#ifndef SB_SANDBOX_SPAWN_BOX_H
#define SB_SANDBOX_SPAWN_BOX_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { SB_BOX_NONE = 0, SB_BOX_BWRAP, SB_BOX_LANDLOCK } sb_box_kind_t;

#define SB_BOX_HIDE_MAX         32
#define SB_BOX_WRITABLE_MAX     16
#define SB_BOX_SETPRIV_PATH     "/usr/bin/setpriv"

//  One spawn's box.
typedef struct {
    sb_box_kind_t kind;
    const char *bwrap_path;
    const char *cwd;            //  the workspace: writable, and where it starts
    const char *const *writable;    //  NULL-terminated extra writable folders, or NULL
    bool network;               //  keep the host's network
    bool long_lived;            //  an MCP server or hook: not tied to the spawning thread
} sb_box_t;

//  The server's sandbox (sb_spawn_sandbox_init), and its bwrap.
sb_box_kind_t sb_spawn_sandbox_kind (void);
const char *sb_spawn_sandbox_bwrap (void);

//  Parses a --sandbox value: auto (or NULL, ""), bwrap, landlock, none.
//  Returns 0 with *kind set (auto: -1), or -1 for an unknown name.
int sb_box_parse (const char *name, int *kind);

//  The name of a kind: "none", "bwrap", "landlock".
const char *sb_box_name (sb_box_kind_t kind);

//  Adds a path every box hides (stored as its realpath; a path that does
//  not exist yet is stored as given). Returns 0, or -1 when the list is
//  full or the path is not absolute.
int sb_box_hide (const char *path);

//  Whether `path` is one of the hidden paths or lies beneath one.
bool sb_box_is_hidden (const char *path);

//  The argv that runs `prog args...` (args: argv[1..], NULL-terminated)
//  in the box: bubblewrap's options first for bwrap, setpriv where a root
//  server hands the command to the workspace's owner, then the command.
//  malloc'd (one block: free it once). NULL with err on failure.
const char **sb_box_argv (const sb_box_t *box, const char *prog, const char *const *args,
                          char *err, size_t errlen);

//  The HOME of a command the box hands to another user (a root server,
//  a workspace of another owner): that user's home when it is a folder,
//  else /tmp. NULL when the command keeps the server's user.
const char *sb_box_home (const sb_box_t *box, char *buf, size_t len);

//  Whether the box filters the command's system calls (a bwrap tool box:
//  no AF_UNIX socket, see spawn_box.c): its argv then reads the filter
//  from descriptor 3, which the spawn fills with sb_box_filter_fd.
bool sb_box_wants_filter (const sb_box_t *box);

//  A fresh descriptor (10 or above, close-on-exec, at offset 0) holding
//  the filter's program for bwrap --seccomp; -1 on failure.
int sb_box_filter_fd (void);

//  The Landlock ABI the kernel offers, or 0.
int sb_box_landlock_abi (void);

//  Restricts the calling thread for a landlock box: its children inherit
//  it, and it cannot be undone, so only a thread that exits afterwards may
//  call it. Returns 0, or -1 with err.
int sb_box_landlock_apply (const sb_box_t *box, char *err, size_t errlen);

#endif

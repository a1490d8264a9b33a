/*  sandbox/spawn.h — start tool processes without fork().

    The server is threaded and holds LMDB maps and libcurl sockets whose
    descriptors are not close-on-exec, so a fork() would copy all of that
    into the child. sb_spawn_run uses posix_spawn instead, and gives the
    child exactly: stdin on /dev/null, stdout and stderr on one pipe, no
    other descriptor (closefrom 3), the workspace as cwd, its own process
    group, default signal dispositions and mask, and an environment built
    from an allowlist (PATH, HOME, LANG, TERM and configured extras).

    When the command ends, times out or is cancelled, every process it left
    behind is killed and reaped, whatever it did to its session, group or
    environment. Where the machine allows it the child is born in a cgroup
    v2 of its own (sandbox/spawn_cgroup.h), which is killed whole.
    Elsewhere (or with SWITCHBOARD_NO_CGROUP=1) the process tree decides:
    the process group, descendants that moved to a new session, and orphans
    re-parented to the server (which must be a child subreaper, see
    sb_spawn_init_subreaper), told apart by their start time and an
    environment mark SWITCHBOARD_TOOL_ID=<token> (sandbox/spawn.c).
    The result names what was killed.

    Background processes do not outlive their command: tool calls are
    one-shot, and a process that nobody tracks could never be cancelled.

    Every process is started in the server's sandbox (sb_spawn_sandbox_init;
    sandbox/spawn_box.h, docs/sandbox.md): bubblewrap, else Landlock,
    or none only when the person asked for none. Until the server calls
    sb_spawn_sandbox_init the default is none (the unit tests' library use).
*/
#ifndef SB_SANDBOX_SPAWN_H
#define SB_SANDBOX_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_SPAWN_TIMEOUT_MS_DEFAULT   120000
#define SB_SPAWN_CAP_HEAD_DEFAULT     (32 * 1024)
#define SB_SPAWN_CAP_TAIL_DEFAULT     (32 * 1024)
#define SB_SPAWN_BWRAP_PATH           "/usr/bin/bwrap"
#define SB_SPAWN_KILLED_DESC          512

//  Receives output bytes as they arrive, on the thread that called
//  sb_spawn_run. The bytes are raw: they may cut a UTF-8 sequence.
typedef void (sb_spawn_output_fn) (const char *data, size_t len, void *arg);

typedef struct {
    const char *const *argv;    //  argv[0]: an absolute path, or a name looked up in PATH
    const char *cwd;            //  required; the child starts here
    //  NULL-terminated extras for the allowlist. "NAME" passes the server's
    //  value through if set; "NAME=VALUE" sets it.
    const char *const *env_extra;
    int timeout_ms;             //  0: SB_SPAWN_TIMEOUT_MS_DEFAULT
    //  Readable means cancel; never read. -1 or 0 for none: stdin is never
    //  a cancel fd, so a zeroed struct cannot cancel by accident.
    int cancel_fd;
    sb_spawn_output_fn *on_output;
    void *output_arg;
    size_t cap_head;            //  bytes kept from the start; 0: default
    size_t cap_tail;            //  bytes kept from the end; 0: default
    //  NULL, "" or "auto": the server's sandbox; or "bwrap", "landlock",
    //  "none" for this spawn alone
    const char *sandbox;
    const char *bwrap_path;     //  NULL: the server's (SWITCHBOARD_BWRAP, else SB_SPAWN_BWRAP_PATH)
    bool network;               //  the box keeps the host's network (default: loopback only)
    //  NULL-terminated folders writable in the box besides cwd (at most 16)
    const char *const *writable;
} sb_spawn_opts_t;

typedef struct {
    int exit_code;              //  the exit status, or -1 if killed by a signal
    int term_signal;            //  the signal that ended it, or 0
    bool timed_out;
    bool cancelled;
    bool truncated;             //  output holds head + marker + tail
    int64_t duration_ms;
    uint64_t total_bytes;       //  everything the command wrote
    size_t leftovers_killed;    //  processes killed after the command itself exited
    //  What was killed besides the command itself, for the model:
    //  "sleep 604 (pid 123), ..." (cut with "..." when long); "" if nothing.
    char killed [SB_SPAWN_KILLED_DESC];
    char *output;               //  owned, NUL-terminated (raw bytes; may contain NUL)
    size_t output_len;
} sb_spawn_result_t;

/*  Make this process a child subreaper, so that grandchildren orphaned by
    a tool come back to us to be killed and reaped instead of to init, and
    decide whether tool calls get cgroups (killing what a previous server,
    killed mid-call, left in its own). The server calls this once at
    startup, before any tool runs. Returns 0 or -1.                        */
int
    sb_spawn_init_subreaper (void);

/*  Decide the sandbox of every later spawn. want: NULL or "auto" (bwrap
    if it runs here, else Landlock if the kernel has it, else refuse),
    "bwrap", "landlock" or "none". bwrap is tried by running `true` in a
    box. Returns 0, or -1 with err naming what failed and the way out
    (--sandbox none). Call once at startup, before any tool runs.        */
int
    sb_spawn_sandbox_init (const char *want, char *err, size_t errlen);

//  The sandbox in force: "bwrap", "landlock" or "none".
const char *
    sb_spawn_sandbox_name (void);

//  A path no sandboxed process may see (the data folder, a key file):
//  an empty folder or file in its place. At most 32. Returns 0 or -1.
int
    sb_spawn_sandbox_hide (const char *path);

//  Whether a resolved path is a hidden one or lies beneath one: the file
//  tools, which run inside the server, refuse it too.
bool
    sb_spawn_sandbox_hidden (const char *path);

/*  Run a command to completion, timeout or cancel. Returns 0 when res is
    filled: the command ran (even if it failed or was killed), or a cancel
    was already signalled and nothing was started (res->cancelled). Returns
    -1 with a message in err when it could not start: bad options, program
    not found, bwrap missing. On 0 the caller owns res->output: free it with
    sb_spawn_result_clear. Blocks the calling thread; any thread may call.  */
int
    sb_spawn_run (const sb_spawn_opts_t *opts, sb_spawn_result_t *res,
                  char *err, size_t errlen);

//  Frees what a result owns and zeroes it; tolerates NULL.
void
    sb_spawn_result_clear (sb_spawn_result_t *res);

/*  A long-lived process, for a server the executor talks to (an MCP
    server, actors/exec/mcp.c): started like a tool's command (no fork,
    closefrom 3, its own process group or cgroup, the allowlisted
    environment plus opts->env_extra, cwd opts->cwd, the same sandbox
    but not tied to the calling thread), but with stdin,
    stdout and stderr on three pipes of ours, and no timeout: it lives
    until sb_spawn_proc_stop, which kills it and everything it started.
    Only argv, cwd, env_extra, sandbox, network and writable of opts are
    used. Returns NULL with a
    message in err when it cannot start. One owner; any thread.          */
typedef struct sb_spawn_proc sb_spawn_proc_t;

sb_spawn_proc_t *
    sb_spawn_proc_start (const sb_spawn_opts_t *opts, char *err, size_t errlen);

//  The pipes' ends of ours, non-blocking and close-on-exec: stdin to
//  write (-1 once closed), stdout and stderr to read.
int sb_spawn_proc_stdin (const sb_spawn_proc_t *proc);
int sb_spawn_proc_stdout (const sb_spawn_proc_t *proc);
int sb_spawn_proc_stderr (const sb_spawn_proc_t *proc);
int sb_spawn_proc_pid (const sb_spawn_proc_t *proc);
//  A pidfd of the process, readable once it exited; -1 on kernels
//  without pidfds (then poll sb_spawn_proc_exited).
int sb_spawn_proc_pidfd (const sb_spawn_proc_t *proc);

//  Whether the process has exited (it is not reaped until stop).
bool sb_spawn_proc_exited (sb_spawn_proc_t *proc);

//  Closes our end of its stdin: the process reads EOF.
void sb_spawn_proc_close_stdin (sb_spawn_proc_t *proc);

//  Closes its stdin, gives it grace_ms to exit by itself, then kills it
//  and everything it left, reaps, and frees. Returns its exit code, or
//  -N when signal N ended it (-9 when we killed it), -1 for NULL.
int sb_spawn_proc_stop (sb_spawn_proc_t **proc_p, int grace_ms);

/*  Reap zombies among the server's children that no running spawn owns
    (orphans of tools that escaped attribution). Cheap; the exec actor may
    call it from its timer. Returns how many were reaped.                   */
int
    sb_spawn_reap_orphans (void);

#endif

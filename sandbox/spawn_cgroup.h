/*  sandbox/spawn_cgroup.h — a cgroup v2 per tool call; internal to
    sandbox/spawn.c.

    Where the machine lets us create cgroups (a writable cgroup2 mount
    with cgroup.kill, kernel 5.14 or later), each spawn gets its own
    cgroup, next to the server's, and its child is born in it
    (clone3 with CLONE_INTO_CGROUP), so nothing it starts can leave: not by
    a new session, a new group, an empty environment or a double fork.
    When the command ends the cgroup is frozen, listed (to tell the model
    what is killed), killed whole with cgroup.kill, and removed.

    Elsewhere, or with SWITCHBOARD_NO_CGROUP=1, spawn falls back to the
    process-tree rules in sandbox/spawn_tree.c.
*/
#ifndef SB_SANDBOX_SPAWN_CGROUP_H
#define SB_SANDBOX_SPAWN_CGROUP_H

#include "sandbox/spawn_tree.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SB_SPAWN_NO_CGROUP_VAR  "SWITCHBOARD_NO_CGROUP"

typedef struct {
    int dirfd;                  //  -1 when the spawn has no cgroup
    char path [PATH_MAX];
} sb_spawn_cgroup_t;

//  What the child is started with; see sb_spawn_opts_t.
typedef struct {
    const char *prog;
    char *const *argv;
    char *const *envp;
    const char *cwd;
    int out_fd;                 //  becomes stdout and stderr; stdin is /dev/null
    int in_fd;                  //  > 0: becomes stdin instead (a long-lived process)
    int err_fd;                 //  > 0: becomes stderr instead of out_fd
    int fd3;                    //  > 0: becomes descriptor 3 (the sandbox's filter)
} sb_spawn_exec_t;

//  Decides whether cgroups are used here, and kills what a server killed
//  mid-call left in its cgroups. Idempotent; sb_spawn_init_subreaper
//  calls it, and the first spawn otherwise.
void sb_spawn_cgroup_init (void);

//  Creates the spawn's cgroup. Returns 0, or -1 (cg->dirfd == -1) when
//  cgroups are off or unusable here: the caller then falls back.
int sb_spawn_cgroup_new (sb_spawn_cgroup_t *cg, uint64_t serial);

//  Starts the child in the cgroup, in its own process group, with default
//  signal dispositions and an empty mask, and no descriptor but 0-2.
//  Returns its pid with *pidfd set (or -1), or -1 with *err an errno: ENOSYS
//  or EPERM mean clone3 into a cgroup is refused here (fall back); other
//  values are exec's. Call with the registry lock held.
pid_t sb_spawn_cgroup_start (const sb_spawn_cgroup_t *cg, const sb_spawn_exec_t *x, int *pidfd,
                             int *err);

//  Kills everything in the cgroup but `child`, which the caller reaps,
//  collects the pids in `killed` and describes them in desc (see
//  sb_spawn_tree_kill). Returns how many there were.
size_t sb_spawn_cgroup_kill (sb_spawn_cgroup_t *cg, pid_t child, sb_spawn_pidset_t *killed,
                             char *desc, size_t desclen);

//  Kills what is left, removes the cgroup; tolerates a spawn without one.
void sb_spawn_cgroup_destroy (sb_spawn_cgroup_t *cg);

//  Turns the cgroup path off for this process (after clone3 was refused).
void sb_spawn_cgroup_disable (void);

#endif

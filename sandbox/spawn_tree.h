/*  sandbox/spawn_tree.h — the process tree of a spawn and the
    registry of running spawns; internal to sandbox/spawn.c.

    A spawn takes a serial, starts its child and registers it under the
    registry lock (so that no sweep reaps the child before it is known),
    and unregisters it once reaped. The rules for what belongs to a spawn
    are at the top of sandbox/spawn.c.
*/
#ifndef SB_SANDBOX_SPAWN_TREE_H
#define SB_SANDBOX_SPAWN_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SB_SPAWN_TOKEN_VAR      "SWITCHBOARD_TOOL_ID"
#define SB_SPAWN_MAX_PROCS      (1u << 20)

//  A running spawn, linked into the registry for as long as its child may
//  be unreaped. Nodes live on the spawning thread's stack.
typedef struct sb_spawn_active {
    pid_t pid;
    uint64_t serial;
    uint64_t start;             //  the child's start time, in clock ticks since boot
    struct sb_spawn_active *next;
} sb_spawn_active_t;

//  A set of pids, grown as needed.
typedef struct {
    pid_t *pids;
    size_t n, cap;
} sb_spawn_pidset_t;

//  Adds pid to the set; returns 0, or -1 when it cannot grow.
int sb_spawn_pidset_add (sb_spawn_pidset_t *set, pid_t pid);

//  The serial of a new spawn (its environment mark).
uint64_t sb_spawn_tree_next_serial (void);

//  The registry lock: a spawn holds it across posix_spawn and
//  sb_spawn_tree_add.
void sb_spawn_tree_lock (void);
void sb_spawn_tree_unlock (void);
//  Registers a spawn; the caller holds the lock.
void sb_spawn_tree_add (sb_spawn_active_t *node);
//  Unregisters a spawn; takes the lock.
void sb_spawn_tree_remove (sb_spawn_active_t *node);

//  A process's start time in clock ticks since boot, from /proc; 0 if it
//  is gone.
uint64_t sb_spawn_tree_start_of (pid_t pid);

//  Kills every process the spawn (child, serial) left, not the child
//  itself, and collects them in `killed`. Returns how many were still
//  alive, and appends to `desc` (NUL-terminated, of desclen bytes) what
//  they were, as "sleep 604 (pid 123), ...".
size_t sb_spawn_tree_kill (pid_t child, uint64_t serial, sb_spawn_pidset_t *killed,
                           char *desc, size_t desclen);

//  Appends "cmdline (pid N)" for a live process to desc, with ", " between
//  entries and "..." once desc is full; shared with the cgroup path.
void sb_spawn_describe (pid_t pid, char *desc, size_t desclen);

//  Waits until each killed pid is reaped or gone (bounded).
void sb_spawn_tree_reap (sb_spawn_pidset_t *killed);

#endif

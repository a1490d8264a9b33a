/*  actors/exec/host.h — the one run host: what starts exec's runs, stops
    them and reaps them, for the exec actor (actors/exec.c) and for an
    external worker (workers/worker.c) alike.

    Why one host? Both run the same agent loop (actors/exec/agent.c) on a
    thread per run, and a run's start-up and tear-down have many small
    steps: its limits clamped, its eventfds, its runtime taken from the
    cache and given back only when the run can vouch for it, everything it
    owns freed once. A copy of those steps in the worker drifted from the
    actor's (it once leaked each run's AGENTS.md text), so there is one.

    What differs between the two is said once, in the options: the
    worker's own checkout, its final report (run.complete), no runtime
    cache and no MCP servers. Leases, claims and the worker protocol stay
    with the worker; the bus requests (exec.start, exec.cancel) and their
    replies stay with the actor.

    Threads: a host belongs to the one thread that made it (the actor's,
    the worker's main). Runs end on their own threads, which only hand
    the run back; the owner joins and frees it in sb_exec_host_reap.
*/
#ifndef SB_EXEC_HOST_H
#define SB_EXEC_HOST_H

#include "bus/client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sb_exec_host sb_exec_host_t;

typedef struct {
    const char *actor;          //  the log lines' actor ("exec", "worker")
    const char *instance;       //  names each run's sockets: INSTANCE-RUNID8
    const char *endpoint;       //  the command plane
    const char *sub_endpoint;   //  the event plane, where approvals are answered; NULL or "": poll only
    const char *data_dir;       //  the server's DATA, kept out of a session's baseline; or NULL
    uint64_t tool_tape_cap;     //  a tool call's bytes on the tape; 0: SB_EXEC_TOOL_TAPE_DEFAULT
    const void *mcp_config;     //  the sb_mcp_config_t (actors/exec/mcp.h) runs may start, or NULL
    int64_t mcp_idle_ms;        //  a cached session's unused MCP server is stopped after (0: never)
    size_t runtime_cache;       //  sessions whose prepared runtime is kept between runs; 0: none
    const char *workspace;      //  run tools here instead of the session's folder; or NULL
    const char *finish_type;    //  the final report's type; NULL: run.finish
    const char *worker_id;      //  a worker's: its heartbeats name it (a node that never saw the claim grants it so); or NULL
} sb_exec_host_opts_t;

/*  A host with no runs. The strings and the MCP config of `opts` are
    borrowed: they must outlive the host. It makes the process a child
    subreaper (sandbox/spawn.h), so that what a tool orphans comes back to
    be killed and reaped. NULL when out of memory, or when runtime_cache
    is over SB_RUNTIME_CACHE_MAX. */
sb_exec_host_t *sb_exec_host_new (const sb_exec_host_opts_t *opts);

/*  Stops every run without reporting it (as a crash would: recovery
    decides what becomes of it), waits for each to end, and frees the
    host, the cached runtimes and the MCP servers they ran. */
void sb_exec_host_destroy (sb_exec_host_t **host_p);

/*  Starts a run. `start` holds run_id, session_id and fence (exec.start's
    body, or a worker's claim); `config` holds resume_from, kind,
    approval_policy, limits, and what the run made before this start
    (steps, usage), each optional (exec.start's body again, or the claim's
    config). hb_ms: the heartbeat period, 0 for SB_EXEC_HEARTBEAT_MS.
    Returns 0 when started, 1 when the run is already running here (the
    start was repeated), -1 when it could not start (logged). */
int sb_exec_host_start (sb_exec_host_t *host, const sb_val_t *start, const sb_val_t *config, int hb_ms);

/*  Asks a run to stop; it reports itself cancelled. Whether it runs here. */
bool sb_exec_host_cancel (sb_exec_host_t *host, const char *run_id);

//  How many runs have started and not been reaped.
size_t sb_exec_host_size (sb_exec_host_t *host);

/*  Readable when a run has ended: then call sb_exec_host_reap, which
    joins and frees every ended run (a runtime that prepared fully and is
    still ours goes back to the cache). Returns how many it reaped. */
int sb_exec_host_fd (sb_exec_host_t *host);
size_t sb_exec_host_reap (sb_exec_host_t *host);

/*  The host's timer: at most once a second it reaps the zombies that no
    tool call owns (what a tool orphaned while its spawn was deciding
    whose it was) and stops the idle MCP servers of cached sessions.
    Returns the milliseconds until it is due again. */
int64_t sb_exec_host_tick (sb_exec_host_t *host);

/*  For an owner with nothing else to wait on: waits up to timeout_ms for
    a run to end, reaps it, and ticks. Returns the runs still running. */
size_t sb_exec_host_wait (sb_exec_host_t *host, int timeout_ms);

#endif

/*  actors/exec/runtime.h — a session's prepared runtime, and the exec
    actor's LRU cache of them.

    Preparing a run means resolving the session's workspace and provider
    config and building the model's context from its tape. The next run of
    the same session reuses all of it and reads only the tape entries after
    sb_context_last_seq (rt->context). A change of workspace or config
    (config_version) makes a cached runtime stale: sb_runtime_matches says
    so, and the caller prepares a new one.

    A run checks its runtime out with sb_runtime_cache_take, so it is the
    only owner while it runs, and gives it back with sb_runtime_cache_put
    when it ends. A runtime is therefore never half-built in the cache:
    the caller builds a new one outside, puts it only when every step of
    preparation succeeded, and destroys it otherwise. For the same reason
    a run that ends in a state the context cannot vouch for (a refused
    tape entry) destroys its runtime rather than putting it back.

    Threads: only the run host's owner thread (the exec actor's, see
    actors/exec/host.h) touches the cache, so there is no locking. A runtime that is checked out belongs to the one thread
    that took it.
*/
#ifndef SB_EXEC_RUNTIME_H
#define SB_EXEC_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "actors/exec/context.h"

#define SB_RUNTIME_CACHE_DEFAULT  256
#define SB_RUNTIME_CACHE_MAX      (1u << 20)

typedef struct sb_runtime sb_runtime_t;
struct sb_runtime {
    char *session_id;
    char *workspace;            //  realpath: what tools are confined to
    char *workspace_given;      //  as the session record gives it: what matches() compares
    uint64_t config_version;
    char *provider;             //  NULL: the llm actor's default
    char *model;                //  NULL: the provider's default
    char *approval_policy;      //  NULL: the executor's default
    uint32_t max_steps;         //  0: the executor's default
    bool baseline_checked;      //  the changes panel's baseline was saved, or found (exec/changes.h)
    uint64_t cuts_sig;          //  the conversation's cuts the context was built with (agent.c); 0: none
    sb_context_t *context;      //  never NULL; owned
    //  The model's limits (llm.info, asked once per config) and the size
    //  the provider reported for the last call, which calibrates the
    //  estimate of the next (actors/exec/compact.c).
    bool limits_known;
    uint64_t context_window, max_output_tokens;
    uint64_t last_input_tokens; //  0: no calibration (none yet, or compacted since)
    size_t last_bytes;          //  sb_context_bytes when that call was made
    struct sb_policy *policy;   //  approvals and calls from the tape (actors/exec/policy.h); owned
    struct sb_mcp_set *mcp;     //  the session's MCP servers (actors/exec/mcp.h), or NULL; owned

    //  Private to the cache: its LRU list and hash chain.
    sb_runtime_t *lru_prev, *lru_next, *hash_next;
};

//  A new runtime with an empty context and nothing configured. Returns
//  NULL when session_id is NULL or empty, or when out of memory.
sb_runtime_t *sb_runtime_new (const char *session_id);
void sb_runtime_destroy (sb_runtime_t **rt_p);

//  Runtimes alive in the process, cached or checked out (atomic): a
//  gauge for stats, and how tests prove that eviction destroys.
size_t sb_runtime_live (void);

//  Resolves `workspace` with realpath (it must be an existing directory)
//  and records both forms. Returns 0, or -1 with errno (ENOENT, ENOTDIR,
//  ENOMEM, ...) and the runtime unchanged.
int sb_runtime_set_workspace (sb_runtime_t *rt, const char *workspace);

//  Records the session's config; strings are copied, NULL means unset.
//  Returns 0, or -1 (ENOMEM) with the runtime unchanged.
int sb_runtime_set_config (sb_runtime_t *rt, uint64_t config_version,
                           const char *provider, const char *model,
                           const char *approval_policy, uint32_t max_steps);

//  Whether a cached runtime still fits the session's current record: the
//  same workspace (as the record gives it) and the same config version.
bool sb_runtime_matches (const sb_runtime_t *rt, const char *workspace,
                         uint64_t config_version);

//  ---------------------------------------------------------------------------

typedef struct sb_runtime_cache sb_runtime_cache_t;

typedef struct {
    uint64_t hits;              //  take found the session
    uint64_t misses;            //  take did not
    uint64_t stale;             //  take_valid found it but it no longer matched
    uint64_t evictions;         //  put pushed out the least recently used
    size_t size;                //  runtimes held now
    size_t capacity;
} sb_runtime_stats_t;

//  A cache of at most `capacity` runtimes (0: SB_RUNTIME_CACHE_DEFAULT).
//  NULL when capacity is over SB_RUNTIME_CACHE_MAX or out of memory.
sb_runtime_cache_t *sb_runtime_cache_new (size_t capacity);
//  Destroys every runtime it holds.
void sb_runtime_cache_destroy (sb_runtime_cache_t **cache_p);

//  Checks the session's runtime out: removes it from the cache and
//  returns it (the caller owns it), or NULL when there is none.
sb_runtime_t *sb_runtime_cache_take (sb_runtime_cache_t *cache, const char *session_id);

//  Same, but a runtime that no longer matches the record (workspace,
//  config_version) is destroyed and NULL returned: the caller rebuilds.
sb_runtime_t *sb_runtime_cache_take_valid (sb_runtime_cache_t *cache, const char *session_id,
                                           const char *workspace, uint64_t config_version);

//  Gives a runtime to the cache as its most recently used entry, and
//  nulls the caller's pointer. An entry of the same session is replaced
//  (and destroyed); past capacity the least recently used is evicted (and
//  destroyed). A NULL rt_p or *rt_p does nothing; a NULL cache destroys
//  the runtime. Never fails: it allocates nothing.
void sb_runtime_cache_put (sb_runtime_cache_t *cache, sb_runtime_t **rt_p);

void sb_runtime_cache_stats (const sb_runtime_cache_t *cache, sb_runtime_stats_t *stats);

//  Calls fn on each cached runtime, most recently used first (the cache
//  keeps them; fn must not put or take).
void sb_runtime_cache_each (sb_runtime_cache_t *cache, void (*fn) (sb_runtime_t *rt, void *arg), void *arg);

#endif

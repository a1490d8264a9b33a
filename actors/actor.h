/*  actors/actor.h — what every actor is given at start.

    An actor is a czmq zactor: `void <name>_actor (zsock_t *pipe, void *args)`
    with args a sb_actor_args_t *. It signals 0 on its pipe once it is
    registered with the broker and ready, or 1 if it cannot start (having
    logged why), and then honours $TERM. */
#ifndef SB_ACTOR_H
#define SB_ACTOR_H

#include <czmq.h>

/*  The tape's share of one tool call's output, head and tail together
    (serve --tool-output-tape, SWITCHBOARD_TOOL_OUTPUT_TAPE): its default
    and bounds. */
#define SB_EXEC_TOOL_TAPE_DEFAULT ((uint64_t) 1 << 20)
#define SB_EXEC_TOOL_TAPE_MIN 4096
#define SB_EXEC_TOOL_TAPE_MAX ((uint64_t) 1 << 30)

/*  The longest deadline an approval may have (serve --approval-deadline,
    interact.request deadline_s): a week. */
#define SB_APPROVAL_DEADLINE_MAX_S (7 * 24 * 3600)

/*  Server-wide settings from `serve` / `run` / `actor` flags, read by the
    actors that need them. Any field may be NULL (0): use the default. */
typedef struct {
    const char *llm;            /* provider kind for --llm (NULL: demo) */
    const char *llm_url;        /* provider base URL */
    const char *model;          /* default model */
    const char *providers;      /* --providers FILE */
    const char *sandbox;        /* --sandbox as given (auto, bwrap, landlock, none; NULL: auto); serve has applied it */
    int demo_delay_ms;          /* demo model: pause between tokens (-1: default) */
    uint64_t tool_output_tape;  /* --tool-output-tape: bytes of one tool call's output kept on the tape */
    uint64_t session_quota;     /* --session-quota: bytes of tape one session may hold */
    uint64_t context_window;    /* --context-window: tokens, where the providers file says nothing */
    const char *mcp_config;     /* --mcp-config FILE (NULL: DATA/mcp.json when present) */
    const char *hooks;          /* --hooks FILE (NULL: DATA/hooks.json when present) */
    bool approval_deadline_set; /* --approval-deadline was given */
    uint64_t approval_deadline_s;   /* interact: an approval's default deadline (0: none) */
    const char *store;          /* --store URL (postgres://...; NULL: LMDB under DATA) */
    struct _sb_cluster_t *cluster;  /* the node serve is (cluster/cluster.h), with a store URL;
                                       NULL: every session is this process's to write */
} sb_server_config_t;

typedef struct {
    const char *cmd_endpoint;   /* broker command plane */
    const char *pub_endpoint;   /* broker XSUB side, for actors that publish */
    const char *sub_endpoint;   /* broker XPUB side, for actors that subscribe */
    const char *data_dir;       /* DATA, for actors that persist */
    const char *instance;       /* unique instance name */
    const sb_server_config_t *config;   /* never NULL inside serve */
} sb_actor_args_t;

typedef void (sb_actor_fn) (zsock_t *pipe, void *args);

/*  The test service: echo.ping, echo.stream, echo.note. */
void sb_echo_actor (zsock_t *pipe, void *args);
/*  The run coordinator: run.*, leases, fencing, recovery. */
void sb_run_actor (zsock_t *pipe, void *args);
/*  The local executor: exec.start, exec.cancel; the agent loop. */
void sb_exec_actor (zsock_t *pipe, void *args);
/*  Hooks: the person's commands run on tape events (actors/hooks.c). */
void sb_hooks_actor (zsock_t *pipe, void *args);
/*  Durable interactions (approvals): interact.*, deadlines, announcements. */
void sb_interact_actor (zsock_t *pipe, void *args);
/*  The blob store: blob.put, blob.get, blob.stats (actors/blob.c). */
void sb_blob_actor (zsock_t *pipe, void *args);
/*  The model broker: llm.stream, llm.cancel, llm.models. */
void sb_llm_actor (zsock_t *pipe, void *args);

/*  Signals the parent that startup succeeded (0) or failed (1). Use it
    instead of zsock_signal: zactor_new drops the status, and the parent
    reads it back with sb_actor_last_status right after zactor_new. */
void sb_actor_signal (zsock_t *pipe, int status);
int sb_actor_last_status (void);

/*  zactor_new (fn, args), with the thread's OpenSSL state released when
    fn returns (actors/actor.c says why): how serve and `switchboard
    actor` start every actor. */
zactor_t *sb_actor_start (zactor_fn *fn, void *args);

/*  Reads one command from the actor's pipe: true when it is $TERM (or the
    pipe is gone), so the actor should stop. */
bool sb_actor_pipe_term (zsock_t *pipe);

/*  On a node of a cluster (cluster/cluster.h), whether this node holds
    the shard of `session_id` and so may change what belongs to it: true
    with cluster NULL (one host) or session_id NULL or empty; else false
    after answering msg `not_owner`, naming the owner. */
struct _sb_cluster_t;
struct sb_msg;
struct sb_bus;
bool sb_actor_owns (struct sb_bus *bus, struct sb_msg *msg, struct _sb_cluster_t *cluster,
                    const char *session_id);

/*  Registers `bus` for `service` and signals the pipe; returns 0 when
    registered. Shared by every actor's startup. */
struct sb_bus;
int sb_actor_register (zsock_t *pipe, struct sb_bus *bus, const char *service,
                       const char *instance, const uint8_t *caps, size_t caps_len);

/*  A byte limit: `configured` (a flag) when not 0, else the environment
    variable `env` when it holds a number in [min, max], else `def`. A bad
    value in the environment is logged and ignored. */
uint64_t sb_actor_limit (const char *actor, uint64_t configured, const char *env, uint64_t def,
                         uint64_t min, uint64_t max);

/*  Dispatch tables. Each actor dispatches every message type it serves
    from one table of sb_dispatch_t rows, {type, handler}, ended by a row
    whose type is NULL, and exports it as `sb_<actor>_dispatch` so that
    tests/unit/test_dispatch.c holds its type column against the schema
    tables. A handler takes its own actor's self_t, so the row keeps it as
    the generic sb_dispatch_fn (SB_DISPATCH casts it), and the actor casts
    it back to its own handler type to call it: converting a function
    pointer and back is defined C, calling it through another type is
    not. */
typedef void (sb_dispatch_fn) (void);
typedef struct {
    const char *type;
    sb_dispatch_fn *fn;
} sb_dispatch_t;
#define SB_DISPATCH(type, fn) { (type), (sb_dispatch_fn *) (fn) }
#define SB_DISPATCH_END       { NULL, NULL }

/*  The row of `rows` for message type `type`, or NULL when the actor does
    not serve it. */
const sb_dispatch_t *sb_dispatch_find (const sb_dispatch_t *rows, const char *type);

/*  The lookup under it, for a table of another row type whose rows each
    begin with their type (a const char *), `stride` bytes apart, ended by
    a NULL type (the session actor's, actors/session/session_impl.h): the
    index of the row for `type`, or that of the end row. */
size_t sb_dispatch_index (const void *rows, size_t stride, const char *type);

/*  The actors' dispatch tables (see above); the run actor has a second
    one, worker.* (actors/run/workers.c). */
extern const sb_dispatch_t sb_echo_dispatch [];
extern const sb_dispatch_t sb_blob_dispatch [];
extern const sb_dispatch_t sb_run_dispatch [];
extern const sb_dispatch_t sb_worker_dispatch [];
extern const sb_dispatch_t sb_exec_dispatch [];
extern const sb_dispatch_t sb_hooks_dispatch [];
extern const sb_dispatch_t sb_interact_dispatch [];
extern const sb_dispatch_t sb_llm_dispatch [];

#endif

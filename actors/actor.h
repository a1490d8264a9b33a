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
/*  The run actor's dispatch table, type column (see below). */
const char *sb_run_dispatch_type (size_t index);
/*  The run actor's second table: worker.* (actors/run/workers.c). */
const char *sb_worker_dispatch_type (size_t index);
/*  The local executor: exec.start, exec.cancel; the agent loop. */
void sb_exec_actor (zsock_t *pipe, void *args);
/*  The exec actor's dispatch table, type column (see below). */
const char *sb_exec_dispatch_type (size_t index);
/*  Hooks: the person's commands run on tape events (actors/hooks.c). */
void sb_hooks_actor (zsock_t *pipe, void *args);
const char *sb_hooks_dispatch_type (size_t index);
/*  Durable interactions (approvals): interact.*, deadlines, announcements. */
void sb_interact_actor (zsock_t *pipe, void *args);
/*  The interact actor's dispatch table, type column (see below). */
const char *sb_interact_dispatch_type (size_t index);
/*  The model broker: llm.stream, llm.cancel, llm.models. */
void sb_llm_actor (zsock_t *pipe, void *args);
/*  The llm actor's dispatch table, type by type (see below). */
const char *sb_llm_dispatch_type (size_t index);

/*  Signals the parent that startup succeeded (0) or failed (1). Use it
    instead of zsock_signal: zactor_new drops the status, and the parent
    reads it back with sb_actor_last_status right after zactor_new. */
void sb_actor_signal (zsock_t *pipe, int status);
int sb_actor_last_status (void);

/*  Reads one command from the actor's pipe: true when it is $TERM (or the
    pipe is gone), so the actor should stop. */
bool sb_actor_pipe_term (zsock_t *pipe);

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
    from one static table of {type, handler} rows (its handler type takes
    its own self_t), and exports the type column through a function
    `const char *sb_<actor>_dispatch_type (size_t index)` that returns the
    index-th row's type, or NULL past the end. tests/unit/test_dispatch.c
    holds each exported column against the schema tables. */
typedef const char *(sb_dispatch_type_fn) (size_t index);

#endif

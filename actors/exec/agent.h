/*  actors/exec/agent.h — one run of the exec actor, shared by its files.

    The run host (actors/exec/host.c, for the exec actor and the external
    worker) owns the table of runs and fills each in; each run is a
    sb_exec_run_t worked on by a thread of its own (actors/exec/agent.c),
    which writes to the tape through actors/exec/tape.c and asks the model
    through actors/exec/model.c. Only the run thread touches a run's
    fields, except those marked atomic and the eventfds.
*/
#ifndef SB_EXEC_AGENT_H
#define SB_EXEC_AGENT_H

#include "actors/actor.h"
#include "actors/exec/mcp_sample.h"
#include "actors/exec/runtime.h"
#include "actors/exec/tools.h"
#include "bus/client.h"
#include "common/git_checkpoint.h"
#include "common/ring.h"

#include <pthread.h>
#include <stdatomic.h>

#define SB_EXEC_CALL_MS 10000
#define SB_EXEC_HEARTBEAT_MS 2000
#define SB_EXEC_COALESCE_MS 20
#define SB_EXEC_COALESCE_BYTES 512
#define SB_EXEC_TOOL_OUTPUT_BYTES 4096
#define SB_EXEC_TOOL_OUTPUT_MS 100
#define SB_EXEC_STREAM_IDLE_MS (15 * 60 * 1000)
/*  The tail of a tool call's output (SB_EXEC_TOOL_TAPE_*, actors/actor.h)
    is written in entries of at most this many bytes. */
#define SB_EXEC_TOOL_TAPE_TAIL_PIECE (64 * 1024)

typedef struct sb_exec_run sb_exec_run_t;

/*  A run's budgets (actors/exec/budget.c, docs/usage.md), in ia_budget_t
    order: tokens, cost (micro-dollars), steps, minutes. */
typedef struct {
    uint64_t original [4];      /* the session's; 0: no such budget */
    uint64_t limit [4];         /* the current limit: raised by budget.raised */
    bool warned [4][2];         /* budget.warning at 50 % and 80 % written */
    uint64_t cost;              /* micro-dollars of the run's calls */
    bool cost_unknown;          /* a call had no cost: the cost is not known */
    bool tokens_unknown;        /* a call reported no tokens */
    bool asked;                 /* the tape's last word on the run is a budget question */
    uint64_t started_ms;        /* wall ms of the run's first turn.begin; 0: not seen yet */
    int64_t minute_ms;          /* a minute (SWITCHBOARD_BUDGET_MINUTE_MS, for tests) */
} sb_exec_budget_t;

/*  What a coalescing buffer holds: text or thinking deltas, or one tool's
    output. */
typedef struct {
    char kind [16];
    char call_id [129];
    char *buf;
    size_t len, cap;
    int64_t first_ms;
} sb_exec_coalesce_t;

/*  What one tool call's output leaves on the tape: its first cap/2 bytes
    stream through the coalescing buffer as they come; past them only the
    latest bytes are kept, in a ring, and written when the call ends,
    after one entry that says how many bytes were elided. The process is
    drained to its end whatever the tape keeps. */
typedef struct {
    uint64_t cap;               /* head + tail, in bytes */
    uint64_t total;             /* bytes the call printed */
    uint64_t head;              /* of which streamed as the head */
    bool head_full;             /* later bytes go to the ring */
    sb_ring_t tail;             /* the ring, allocated once the head is full */
} sb_exec_tool_tape_t;

/*  One run. The host fills it in before the run thread starts; from
    then on only the run thread writes it, but for the atomics. */
struct sb_exec_run {
    /* called on the run thread as it ends: hands the run back to the
       host's thread, which joins and frees it */
    void (*on_end) (sb_exec_run_t *run);
    void *owner;                /* the host (actors/exec/host.c), for on_end */
    const char *sandbox;        /* NULL: the server's sandbox (sandbox/spawn.h) */
    bool network;               /* the session lets tools reach the network (docs/sandbox.md) */
    bool mcp_sampling;          /* the session lets its MCP servers ask for model calls (docs/mcp.md) */
    unsigned samplings;         /* sampling requests asked in this run: their call ids */
    const char *data_dir;       /* the server's DATA, left out of the session's baseline, or NULL */
    pthread_t thread;
    pthread_t hb_thread;
    bool hb_started;
    char run_id [33];
    char session_id [33];
    char resume_from [33];
    char policy [16];
    char endpoint [4200];
    char sub_endpoint [4200];   /* the event plane, to wait for approvals ("" : poll only) */
    char instance [160];
    uint64_t fence;
    uint64_t max_steps, timeout_s, max_output_tokens;
    int cancel_fd;              /* readable = stop */
    int hb_stop_fd;             /* readable = heartbeat thread ends */
    atomic_bool shutdown;       /* the server is stopping: exit without reporting */
    atomic_bool lost;           /* fenced or no longer ours: exit without reporting */
    atomic_int phase;           /* an sb_run_phase_t (schemas/vocab.h) */
    atomic_uint_fast64_t steps, input_tokens, output_tokens;
    atomic_bool usage_known;    /* a model call reported usage: else the tokens are unknown */
    bool counting;              /* the tape read before the loop: count this run's calls on it */
    uint64_t tape_steps, tape_in, tape_out;  /* what it found */
    sb_runtime_t *runtime;      /* checked out of the cache; returned when done */
    sb_bus_t *bus;              /* the run thread's own socket */
    int64_t deadline;           /* mono ms, from timeout_s */
    sb_exec_coalesce_t text, thinking, tool_out;
    sb_exec_tool_tape_t tool_tape;
    struct sb_exec_approval *approval;  /* the session's rules and deadline (actors/exec/approval.c) */
    const void *mcp_config;     /* the actor's sb_mcp_config_t, or NULL: no MCP servers */
    char *agents_md;            /* AGENTS.md instructions of this run, or NULL (actors/exec/agents_md.c) */
    char status [16];
    char reason [1024];
    /* the options of an external worker's host (workers/worker.c), NULL/0 in exec: */
    const char *workspace;      /* its own checkout instead of the session's folder */
    const char *finish_type;    /* the final report: run.complete (default run.finish) */
    const char *worker_id;      /* the worker whose claim this is: its heartbeats name it (NULL in exec) */
    int hb_ms;                  /* heartbeat period: min(5 s, lease/3) (default SB_EXEC_HEARTBEAT_MS) */
    char kind [16];             /* "" : a prompt's run; "compact": compaction only; "rewind" */
    uint64_t rewind_to;         /* rewind: the seq to go back to (actors/exec/rewind.c) */
    bool undo;                  /* rewind: undo the session's last rewind */
    bool no_code;               /* rewind: leave the work tree alone */
    bool no_conversation;       /* rewind: leave the model's context alone */
    uint64_t ctx_estimate;      /* context tokens estimated for the current call */
    uint64_t compacted_after;   /* tokens_after of the run's last compaction (0: none) */
    bool overflow;              /* this call was retried after context_overflow */
    char overflow_msg [512];    /* what the provider said */
    uint64_t last_seq;          /* the seq of the run's last append (a checkpoint's seq_of) */
    bool touched;               /* a tool that is not read-only ran since the last checkpoint */
    int64_t ckpt_max_file;      /* files over this many bytes are recorded by size (actors/exec/checkpoint.c) */
    sb_exec_budget_t budget;    /* the session's budgets, for this run (actors/exec/budget.c) */
};

//  The tape's bounds on a call's id and name (schemas/types.c, tool.call).
#define SB_EXEC_CALL_ID_MAX 128
#define SB_EXEC_TOOL_NAME_MAX 64

//  One call the model asked for in a step.
typedef struct {
    char call_id [SB_EXEC_CALL_ID_MAX + 1];     /* unique in the session */
    char provider_id [257];     /* the id the provider gave it */
    char name [SB_EXEC_TOOL_NAME_MAX + 1];
    char *arguments;            /* NULL: the provider sent unusable arguments */
} sb_exec_call_t;

//  What a model call's usage chunk said (docs/usage.md): the counts the
//  provider reported (bit k of known: count k, in the order input,
//  output, cached, reasoning), who answered, the cost and the rate-limit
//  headers (-1: unknown). actors/exec/model.c.
typedef struct {
    uint64_t count [4];
    unsigned known;
    char provider [64], model [128];
    int64_t cost_microusd;
    int64_t ratelimit [5];      /* SB_RATELIMIT_KEYS order */
} sb_exec_usage_t;

//  Adds a usage chunk to *u (zeroed before a call's first chunk).
void sb_exec_usage_take (sb_exec_usage_t *u, const sb_val_t *chunk);

//  The usage entry's fields of *u (its map already open).
void sb_exec_usage_encode (const sb_exec_usage_t *u, sb_enc_t *e);

//  What one model call produced.
typedef struct {
    sb_exec_call_t calls [64];
    int ncalls;
    char *text;                 /* full text of this step */
    size_t text_len, text_cap;
    char *states [16];          /* reasoning_state data, in order */
    int nstates;
    uint64_t in_tokens, out_tokens, cached_tokens, reasoning_tokens;
    bool usage;
    sb_exec_usage_t call_usage; /* the usage chunk as the tape entry says it */
    char stop [32];
} sb_exec_step_t;

//  ---------------------------------------------------------------------
//  actors/exec/budget.c: budgets that pause the run and ask (docs/usage.md)

//  The session record's budgets, at the run's start.
void sb_exec_budget_configure (sb_exec_run_t *run, const sb_val_t *session);
//  A tape entry read by the catch-up: the run's warnings, raises, start
//  and pending question.
void sb_exec_budget_feed (sb_exec_run_t *run, const sb_val_t *ev);
//  One model call's usage, as written to the tape (reported: the provider
//  sent counts).
void sb_exec_budget_note (sb_exec_run_t *run, const sb_exec_usage_t *u, bool reported);
//  At a step boundary, before the next model call: writes the warnings
//  due, and when a budget is reached asks a person and waits. Returns 0
//  to go on, -1 when the run stops (status set, or lost).
int sb_exec_budget_check (sb_exec_run_t *run);

//  ---------------------------------------------------------------------
//  actors/exec/checkpoint.c: the work tree recorded as a git tree

//  Records the run's workspace and appends a `checkpoint` entry for the
//  step that ended at run->last_seq (docs/checkpoints.md). A workspace
//  that cannot be recorded is logged and the run goes on.
void sb_exec_checkpoint (sb_exec_run_t *run);
//  SWITCHBOARD_CHECKPOINT_MAX_FILE, in its declared range, or the default.
int64_t sb_exec_checkpoint_max_file (void);
/*  Takes a checkpoint of the run's workspace without appending an entry
    (the rewind's before and after): 0 and *c filled (clear it with
    sb_ckpt_clear either way), or -1 with a reason in err. */
int sb_exec_checkpoint_take (sb_exec_run_t *run, const char *message, sb_ckpt_t *c, char *err, size_t errlen);

//  ---------------------------------------------------------------------
//  actors/exec/tape.c: what a run writes, always with its fence

//  Whether an error reply says the run is no longer ours to write: fenced
//  by a newer owner, taken over, or gone.
bool sb_exec_err_lost (sb_err_t err);

//  Whether the run's cancel eventfd is readable.
bool sb_exec_cancelled (sb_exec_run_t *run);

//  Sets the run's final status and reason; the first call wins.
void sb_exec_finish_with (sb_exec_run_t *run, const char *status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

//  Appends entries (an encoded array) to the tape. Returns 0, or -1 (and
//  marks the run lost when fenced, or finishes it failed).
int sb_exec_append (sb_exec_run_t *run, sb_enc_t *entries);

//  One entry, {kind, body: {...}}: the caller encodes the body's fields
//  between the two.
void sb_exec_entry_open (sb_enc_t *e, const char *kind);
void sb_exec_entry_close (sb_enc_t *e);

//  Appends one entry with at most one string field (key NULL: none).
int sb_exec_append_one (sb_exec_run_t *run, const char *kind, const char *key, const char *text);

//  Adds bytes to a coalescing buffer.
void sb_exec_co_add (sb_exec_coalesce_t *c, const char *data, size_t n);

//  Flushes the text and thinking buffers that are due (all with force).
int sb_exec_flush_deltas (sb_exec_run_t *run, bool force);

//  Milliseconds until the next buffer is due (at most 500).
int64_t sb_exec_flush_wait (sb_exec_run_t *run);

//  One tool call's output to the tape, bounded by run->tool_tape.cap:
//  begin before the call, sb_exec_tool_output as its output callback
//  (arg: the run), end after it (writes the elision entry and the tail).
void sb_exec_tool_output_begin (sb_exec_run_t *run, const char *call_id);
void sb_exec_tool_output (const char *data, size_t len, void *arg);
void sb_exec_tool_output_end (sb_exec_run_t *run);
//  Frees what the tool output path holds.
void sb_exec_tool_output_free (sb_exec_run_t *run);

//  ---------------------------------------------------------------------
//  actors/exec/model.c: one model call

//  Streams one model call into `step`. Returns 0 when the stream ended
//  (step->stop set), -1 on failure (run status set).
int sb_exec_model_call (sb_exec_run_t *run, sb_exec_step_t *step);

//  Records what the model produced in a step, in one batch.
int sb_exec_record_step (sb_exec_run_t *run, sb_exec_step_t *step);

//  Frees what a step holds and zeroes it.
void sb_exec_step_clear (sb_exec_step_t *step);

//  ---------------------------------------------------------------------
//  actors/exec/compact.c: the context window (docs/compaction.md)

typedef enum {
    SB_COMPACT_AUTO,            /* before a call: only past the threshold */
    SB_COMPACT_HARD,            /* the provider said overflow: below the estimate too */
    SB_COMPACT_MANUAL,          /* session.compact: summarize what can be */
} sb_compact_mode_t;

//  A new runtime's context starts from the session's newest summary
//  (compacted_seq of its record) rather than from seq 1. Does nothing
//  when the context is not empty or the entry is not such a summary.
void sb_exec_compact_seed (sb_exec_run_t *run, uint64_t compacted_seq);

//  Learns the model's limits once per runtime (llm.info). Never fails: a
//  model whose limits cannot be asked gets the defaults.
void sb_exec_compact_limits (sb_exec_run_t *run);

//  Compacts the context when `mode` asks for it: appends context.compacted
//  and catches up. Sets run->ctx_estimate. Returns 0 (compacted or not;
//  *did says which), or -1 with the run's status set (a turn that cannot
//  fit, a cancel, a tape that refused).
int sb_exec_compact (sb_exec_run_t *run, sb_compact_mode_t mode, bool *did);

//  After a model call failed with context_overflow: compacts harder, once
//  per call. Returns 0 to retry the call, or -1 with the run failed (a
//  second overflow, or nothing to compact).
int sb_exec_compact_overflow (sb_exec_run_t *run);

//  The whole of a compaction-only run (kind "compact"): a summary of what
//  precedes the newest turn; sets the run's status.
void sb_exec_compact_run (sb_exec_run_t *run);

//  actors/exec/rewind.c: a rewind run puts the work tree back to a
//  checkpoint and appends session.rewound (docs/checkpoints.md)
void sb_exec_rewind_run (sb_exec_run_t *run);

//  Reads the tape after what the context has seen (actors/exec/agent.c).
int sb_exec_catch_up (sb_exec_run_t *run);
//  actors/exec/agents_md.c: the project's AGENTS.md for this run

//  Reads the AGENTS.md files for the run's workspace into run->agents_md
//  and records instructions.loaded on the tape when there are any.
//  Returns 0, or -1 when the append failed (run status set).
int sb_exec_load_instructions (sb_exec_run_t *run);

//  ---------------------------------------------------------------------
//  actors/exec/mcp_exec.c: the session's MCP servers for this run

//  Gives the runtime its MCP set for the session record `rec` (its
//  mcp_servers), when it has none. No I/O.
void sb_exec_mcp_attach (sb_exec_run_t *run, const sb_val_t *rec);
//  Starts the servers not running and lists their tools; a server that
//  cannot start is noted on the tape and the run goes on. Returns 0, or
//  -1 when the note could not be appended (run status set).
int sb_exec_mcp_start (sb_exec_run_t *run);
//  Whether `name` is an MCP tool, and runs one call of it.
bool sb_exec_mcp_is_tool (const char *name);
void sb_exec_mcp_call (sb_exec_run_t *run, const sb_exec_call_t *call, sb_tool_result_t *res);
/*  Installs the executor's elicitor (actors/exec/mcp_elicit.h), once per
    process: a server's elicitation/create during a run's tool call asks
    the person through an interaction of kind elicitation, and the run
    waits for the answer as for an approval. Outside a tool call (a
    server's start) nobody waits: cancel.                                 */
void sb_exec_mcp_elicit_install (void);
//  actors/exec/mcp_sampling.c: a server's sampling/createMessage, asked
//  to a person then answered by the session's model (`arg`: the run). The
//  tool name of its approvals:
#define SB_EXEC_SAMPLING_TOOL "mcp_sampling"
sb_mcp_sample_outcome_t sb_exec_mcp_sample (void *arg, const char *server, const sb_mcp_sample_t *req,
                                            sb_mcp_sample_reply_t *reply);

//  ---------------------------------------------------------------------
//  actors/exec/agent.c: the run thread

//  The thread of one run (arg: the sb_exec_run_t): heartbeats, the agent
//  loop and the report; calls run->on_end as it ends.
void *sb_exec_run_thread (void *arg);

/*  Frees a run that has ended (or never started) and everything it owns:
    its eventfds, runtime, buffers, AGENTS.md text and approval state. The
    run host's one release (actors/exec/host.c), for exec and for a worker
    alike. */
void sb_exec_run_free (sb_exec_run_t **run_p);

//  actors/exec/steer.c: at a step boundary, has the session append the
//  run's pending steers (prompt.steered); returns how many (0 also when
//  the call failed: they stay pending).
uint64_t sb_exec_steer_take (sb_exec_run_t *run);

#endif

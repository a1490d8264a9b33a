/*  actors/exec/approval.h — the executor's side of approvals
    (docs/approvals.md): decide a tool call by the session's policy, and
    when it asks, ask the interact service and wait for a person.

    Runs on a run's own thread (actors/exec/agent.c), with the run's bus
    socket; the waiting subscribes to the session's topic on the event
    plane for approval.resolved, polls interact.get every second in case
    pub/sub dropped it, and watches the cancel eventfd. While it waits the
    run's heartbeats say phase waiting_approval.
*/
#ifndef SB_EXEC_APPROVAL_H
#define SB_EXEC_APPROVAL_H

#include "actors/exec/agent.h"
#include "schemas/vocab.h"

//  How often the wait asks interact.get, in case an event was dropped.
#define SB_APPROVAL_POLL_MS 1000

//  What the gate decided about one call.
typedef enum {
    SB_GATE_RUN,                //  run the tool
    SB_GATE_REFUSE,             //  answer with the refusal below; the run goes on
    SB_GATE_CANCELLED,          //  the run was cancelled while waiting: answer, then stop
    SB_GATE_GONE                //  the run is lost or the server stops: write nothing
} sb_gate_t;

typedef struct {
    sb_gate_t gate;
    char *output;               //  REFUSE, CANCELLED: the text for the model (owned)
    char fix [256];             //  REFUSE: a command that allows the call, or ""
    char interaction_id [64];   //  when a person was asked
} sb_gate_verdict_t;

//  A person's answer to an interaction, as the waiting executor learns
//  it (its approval.resolved, or interact.get).
typedef struct {
    char interaction_id [64];
    char status [16];           //  approved | rejected | expired
    char decision [16];         //  approve | reject
    char scope [16];            //  once | session | always
    char resolved_by [129];
    char *feedback;             //  owned, or NULL
    uint64_t raise;             //  a budget question's raise; 0: none asked
    char action [16];           //  an elicitation's: accept | decline | cancel
    char *content;              //  an elicitation accepted: its values (JSON), owned, or NULL
    sb_err_t code;              //  SB_ASK_FAILED: the request's error
    char error [256];
} sb_exec_answer_t;

typedef enum {
    SB_ASK_RESOLVED,            //  answered (a person or the deadline)
    SB_ASK_CANCELLED,           //  the run was cancelled: the question is resolved rejected by "cancel"
    SB_ASK_GONE,                //  the run is lost or the server stops
    SB_ASK_FAILED               //  interact.request failed (code, error)
} sb_ask_t;

//  A new interact.request of the run about `call_id`, its map open with
//  session_id, run_id, call_id and tool: the caller adds the rest, closes it.
sb_enc_t *sb_exec_ask_request (const sb_exec_run_t *run, const char *call_id, const char *tool);

//  Sends interact.request `request` (an encoded map), and unless it is
//  resolved already waits for its answer in `phase` (its heartbeats say
//  it), on `sub` (subscribed to the session's topic before the request,
//  or NULL: poll only). The same request after a restart finds the same
//  interaction. Clear `o` with sb_exec_answer_clear.
sb_ask_t sb_exec_ask (sb_exec_run_t *run, sb_enc_t *request, sb_sub_t *sub, sb_run_phase_t phase,
                      sb_exec_answer_t *o);
void sb_exec_answer_clear (sb_exec_answer_t *a);
//  A new interact.request body for a question of `kind` (a tool call's
//  approval is asked by the gate itself) of the run: its session, run,
//  call_id, tool, arguments, summary, kind, default_outcome reject and the
//  session's deadline, the map left open for the kind's own fields.
sb_enc_t *sb_exec_ask_open (sb_exec_run_t *run, const char *kind, const char *call_id, const char *tool,
                            const char *arguments, const char *summary);
//  A subscription to the session's topic on the event plane, or NULL.
sb_sub_t *sb_exec_ask_subscribe (sb_exec_run_t *run);

//  The session's approval config, read from its record at each run's
//  start (s_prepare). Returns 0, or -1 when out of memory.
int sb_exec_approval_configure (sb_exec_run_t *run, const sb_val_t *session);

//  The session's approval_deadline_s, or -1: the server's default.
int64_t sb_exec_approval_deadline (const sb_exec_run_t *run);

//  Decides `call` and, when the policy asks, waits for the answer. Fills
//  v (free its output with sb_exec_verdict_clear).
void sb_exec_approval_gate (sb_exec_run_t *run, const sb_exec_call_t *call, sb_gate_verdict_t *v);
void sb_exec_verdict_clear (sb_gate_verdict_t *v);

//  Whether the run's session rules deny reading `path` (relative to the
//  workspace); with path NULL, whether they deny reading anything. The
//  sb_tool_ctx_t read_denied of the run's tools; `arg` is the run.
bool sb_exec_approval_read_denied (const char *path, void *arg);

//  Frees what the run's approval config holds.
void sb_exec_approval_free (sb_exec_run_t *run);

#endif

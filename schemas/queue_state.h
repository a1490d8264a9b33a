/*  schemas/queue_state.h — the states of a prompt in a session's queue and
    the moves between them (docs/queue.md), as run_status.h is for runs
    and interaction.h for interactions.

    A prompt given while the session is busy waits, durably, in one of two
    places of DATA/session's queue dbi: the queue ('Q': it runs as a run of
    its own, in order) or the steers ('W': it joins the running run at its
    next step boundary). It leaves either by one of three final moves, each
    told on the tape: its run started (prompt.dequeued), the run took it
    (prompt.steered), a person removed it (prompt.removed). A steer the run
    did not take goes back to the front of the queue (prompt.queued with a
    reason). The session actor (actors/session/queue.c) checks every move
    against this table before it writes it; a move the table lacks is
    refused and logged, and nothing is written.

    Not states of this table: a queued prompt whose run.request is on its
    way (the actor's memory, sb_session_prompt_starting: it is still
    queued until the answer names its run), and the queue's own pause,
    which holds every queued prompt back and moves none. */
#ifndef SB_QUEUE_STATE_H
#define SB_QUEUE_STATE_H

#include <stdbool.h>

/*  X(name, final, doc) */
#define SB_QUEUE_STATE_TABLE(X) \
    X (new,      false, "being given (session.prompt): not stored yet") \
    X (queued,   false, "waits in the queue ('Q') for a run of its own") \
    X (steer,    false, "waits ('W') to join the running run at its next step") \
    X (dequeued, true,  "its run started (prompt.dequeued)") \
    X (steered,  true,  "the running run took it at a step boundary (prompt.steered)") \
    X (removed,  true,  "a person removed it (session.queue.remove, prompt.removed)")

typedef enum {
#define SB_QUEUE_STATE_ENUM(name, final, doc) SB_QUEUE_##name,
    SB_QUEUE_STATE_TABLE (SB_QUEUE_STATE_ENUM)
#undef SB_QUEUE_STATE_ENUM
    SB_QUEUE__COUNT             /* also: not a state */
} sb_queue_state_t;

/*  The state's name; "?" for SB_QUEUE__COUNT or out of range. */
const char *sb_queue_state_name (sb_queue_state_t state);
/*  Maps a name to its state; SB_QUEUE__COUNT when unknown or NULL. */
sb_queue_state_t sb_queue_state_from_name (const char *name);
/*  True for a state the prompt never leaves (it is out of the queue). */
bool sb_queue_state_is_final (sb_queue_state_t state);
/*  True when the table has the move from -> to. */
bool sb_queue_can_move (sb_queue_state_t from, sb_queue_state_t to);

#endif

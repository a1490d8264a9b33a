/*  schemas/queue_state.c — a queued prompt's states and its move table. */
#include "schemas/queue_state.h"

#include <stddef.h>
#include <string.h>

static const struct {
    const char *name;
    bool final;
} s_states [] = {
#define SB_QUEUE_STATE_ROW(name, final, doc) { #name, final },
    SB_QUEUE_STATE_TABLE (SB_QUEUE_STATE_ROW)
#undef SB_QUEUE_STATE_ROW
};

/*  Every move the session actor may write, and what causes it. A move
    that is not here is refused: the actor logs it and writes nothing.
    Final states have no rows; a prompt given again is a new prompt. */
static const struct {
    sb_queue_state_t from, to;
} s_moves [] = {
    { SB_QUEUE_new,    SB_QUEUE_queued },     /* session.prompt on a busy session (or a steer with no run running) */
    { SB_QUEUE_new,    SB_QUEUE_steer },      /* session.prompt mode steer while a run runs */
    { SB_QUEUE_queued, SB_QUEUE_dequeued },   /* the run coordinator named the run it started */
    { SB_QUEUE_queued, SB_QUEUE_removed },    /* session.queue.remove */
    { SB_QUEUE_steer,  SB_QUEUE_steered },    /* session.steer.take at a step boundary */
    { SB_QUEUE_steer,  SB_QUEUE_queued },     /* the run ended, is cancelling, or the server restarted */
    { SB_QUEUE_steer,  SB_QUEUE_removed },    /* session.queue.remove before the run took it */
};

const char *
sb_queue_state_name (sb_queue_state_t state)
{
    return (unsigned) state < SB_QUEUE__COUNT ? s_states [state].name : "?";
}

sb_queue_state_t
sb_queue_state_from_name (const char *name)
{
    for (int k = 0; name && k < SB_QUEUE__COUNT; k++)
        if (strcmp (name, s_states [k].name) == 0)
            return (sb_queue_state_t) k;
    return SB_QUEUE__COUNT;
}

bool
sb_queue_state_is_final (sb_queue_state_t state)
{
    return (unsigned) state < SB_QUEUE__COUNT && s_states [state].final;
}

bool
sb_queue_can_move (sb_queue_state_t from, sb_queue_state_t to)
{
    for (size_t k = 0; k < sizeof s_moves / sizeof s_moves [0]; k++)
        if (s_moves [k].from == from && s_moves [k].to == to)
            return true;
    return false;
}

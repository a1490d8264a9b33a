/*  tests/unit/test_queue_state.c — a queued prompt's states and their move
    table (schemas/queue_state.h), which actors/session/queue.c checks every
    move against before it writes it. */
#include <criterion/criterion.h>
#include <string.h>

#include "schemas/queue_state.h"

#define NEW SB_QUEUE_new
#define QU SB_QUEUE_queued
#define ST SB_QUEUE_steer
#define DQ SB_QUEUE_dequeued
#define SD SB_QUEUE_steered
#define RM SB_QUEUE_removed

/*  Every move the session actor makes, written out once more here: the
    table must hold each of them, and nothing else. */
static const struct { sb_queue_state_t from, to; const char *why; } s_legal [] = {
    { NEW, QU, "session.prompt on a busy session" },
    { NEW, ST, "session.prompt mode steer while a run runs" },
    { QU, DQ, "its run started" },
    { QU, RM, "session.queue.remove" },
    { ST, SD, "session.steer.take" },
    { ST, QU, "the run ended without taking it" },
    { ST, RM, "session.queue.remove" },
};
#define S_LEGAL (sizeof s_legal / sizeof s_legal [0])

static bool
s_listed (sb_queue_state_t from, sb_queue_state_t to)
{
    for (size_t k = 0; k < S_LEGAL; k++)
        if (s_legal [k].from == from && s_legal [k].to == to)
            return true;
    return false;
}

Test (queue_state, every_legal_move_is_in_the_table)
{
    for (size_t k = 0; k < S_LEGAL; k++)
        cr_assert (sb_queue_can_move (s_legal [k].from, s_legal [k].to), "%s -> %s refused (%s)",
                   sb_queue_state_name (s_legal [k].from), sb_queue_state_name (s_legal [k].to), s_legal [k].why);
}

Test (queue_state, no_illegal_move_is_allowed)
{
    for (int from = 0; from <= SB_QUEUE__COUNT; from++)
        for (int to = 0; to <= SB_QUEUE__COUNT; to++) {
            bool legal = s_listed ((sb_queue_state_t) from, (sb_queue_state_t) to);
            cr_assert_eq (sb_queue_can_move ((sb_queue_state_t) from, (sb_queue_state_t) to), legal,
                          "%s -> %s: the table says %s", sb_queue_state_name ((sb_queue_state_t) from),
                          sb_queue_state_name ((sb_queue_state_t) to), legal ? "no" : "yes");
        }
    /* the ones that matter most, by name */
    cr_assert_not (sb_queue_can_move (QU, SD), "a queued prompt was steered into a run");
    cr_assert_not (sb_queue_can_move (QU, ST), "a queued prompt became a steer");
    cr_assert_not (sb_queue_can_move (DQ, QU), "a started prompt went back to the queue (it would run twice)");
    cr_assert_not (sb_queue_can_move (SD, QU), "a taken steer went back to the queue (it would run twice)");
    cr_assert_not (sb_queue_can_move (NEW, DQ), "a prompt started a run without waiting");
    cr_assert_not (sb_queue_can_move (QU, QU), "a move to the same state");
}

Test (queue_state, final_states_have_no_exit_and_nothing_enters_new)
{
    for (int s = 0; s < SB_QUEUE__COUNT; s++) {
        bool final = sb_queue_state_is_final ((sb_queue_state_t) s);
        cr_assert_eq (final, s == DQ || s == SD || s == RM, "%s", sb_queue_state_name ((sb_queue_state_t) s));
        for (int to = 0; to < SB_QUEUE__COUNT; to++) {
            if (final)
                cr_assert_not (sb_queue_can_move ((sb_queue_state_t) s, (sb_queue_state_t) to), "%s -> %s",
                               sb_queue_state_name ((sb_queue_state_t) s), sb_queue_state_name ((sb_queue_state_t) to));
            cr_assert_not (sb_queue_can_move ((sb_queue_state_t) to, NEW), "%s -> new",
                           sb_queue_state_name ((sb_queue_state_t) to));
        }
    }
}

Test (queue_state, names_both_ways)
{
    for (int s = 0; s < SB_QUEUE__COUNT; s++)
        cr_assert_eq (sb_queue_state_from_name (sb_queue_state_name ((sb_queue_state_t) s)), s);
    cr_assert_str_eq (sb_queue_state_name (ST), "steer");
    cr_assert_str_eq (sb_queue_state_name (SB_QUEUE__COUNT), "?");
    cr_assert_eq (sb_queue_state_from_name ("paused"), SB_QUEUE__COUNT);
    cr_assert_eq (sb_queue_state_from_name (NULL), SB_QUEUE__COUNT);
}

/*  tests/unit/test_run_status.c — the run's state machine
    (schemas/run_status.h): names, final statuses and the transition table
    that actors/run/outbox.c holds every status change against. */
#include <criterion/criterion.h>
#include <string.h>

#include "schemas/run_status.h"

#define Q SB_RUN_queued
#define CL SB_RUN_claimed
#define RU SB_RUN_running
#define CG SB_RUN_cancelling
#define CO SB_RUN_completed
#define FA SB_RUN_failed
#define CA SB_RUN_cancelled
#define EX SB_RUN_expired
#define IN SB_RUN_interrupted

/*  Every move the run actor makes, written out once more here: the table
    must hold each of them, and nothing else. */
static const struct { sb_run_status_t from, to; const char *why; } s_legal [] = {
    { Q,  CL, "exec.start accepted the run" },
    { Q,  CA, "run.cancel of a queued run" },
    { CL, RU, "the first heartbeat" },
    { CL, CG, "run.cancel" }, { RU, CG, "run.cancel" },
    { CL, CO, "run.finish" }, { CL, FA, "run.finish" }, { CL, CA, "run.finish" },
    { RU, CO, "run.finish" }, { RU, FA, "run.finish" }, { RU, CA, "run.finish" },
    { CG, CO, "run.finish racing a cancel" }, { CG, FA, "run.finish racing a cancel" },
    { CG, CA, "run.finish after a cancel, or recovery" },
    { CL, EX, "lease lapsed" }, { RU, EX, "lease lapsed" }, { CG, EX, "lease lapsed" },
    { CL, IN, "recovery" }, { RU, IN, "recovery" },
    { CL, Q, "recovery of a run waiting for an approval" }, { RU, Q, "recovery of a run waiting for an approval" },
};
#define S_LEGAL (sizeof s_legal / sizeof s_legal [0])

static bool
s_listed (sb_run_status_t from, sb_run_status_t to)
{
    for (size_t k = 0; k < S_LEGAL; k++)
        if (s_legal [k].from == from && s_legal [k].to == to)
            return true;
    return false;
}

Test (run_status, names_round_trip)
{
    for (int s = 0; s < SB_RUN__COUNT; s++) {
        const char *name = sb_run_status_name ((sb_run_status_t) s);
        cr_assert_neq (strcmp (name, "?"), 0);
        cr_assert_eq (sb_run_status_from_name (name), (sb_run_status_t) s, "%s", name);
        cr_assert_not_null (strstr (sb_run_status_names (), name), "%s", name);
    }
    cr_assert_eq (sb_run_status_from_name ("bogus"), SB_RUN__COUNT);
    cr_assert_eq (sb_run_status_from_name (NULL), SB_RUN__COUNT);
    cr_assert_eq (sb_run_status_from_name ("Queued"), SB_RUN__COUNT);
    cr_assert_str_eq (sb_run_status_name (SB_RUN__COUNT), "?");
    cr_assert_str_eq (sb_run_status_names (),
                      "queued | claimed | running | cancelling | completed | failed | cancelled | expired | interrupted");
}

Test (run_status, final_statuses)
{
    sb_run_status_t final [] = { CO, FA, CA, EX, IN };
    sb_run_status_t live [] = { Q, CL, RU, CG };
    for (size_t k = 0; k < sizeof final / sizeof final [0]; k++) {
        cr_assert (sb_run_status_is_final (final [k]), "%s", sb_run_status_name (final [k]));
        cr_assert (sb_run_status_final (sb_run_status_name (final [k])));
    }
    for (size_t k = 0; k < sizeof live / sizeof live [0]; k++) {
        cr_assert_not (sb_run_status_is_final (live [k]), "%s", sb_run_status_name (live [k]));
        cr_assert_not (sb_run_status_final (sb_run_status_name (live [k])));
    }
    cr_assert_not (sb_run_status_is_final (SB_RUN__COUNT));
    cr_assert_not (sb_run_status_final ("bogus"));
    cr_assert_not (sb_run_status_final (NULL));
}

Test (run_status, every_legal_transition_is_allowed)
{
    for (size_t k = 0; k < S_LEGAL; k++)
        cr_assert (sb_run_transition_ok (s_legal [k].from, s_legal [k].to), "%s -> %s (%s) refused",
                   sb_run_status_name (s_legal [k].from), sb_run_status_name (s_legal [k].to), s_legal [k].why);
}

/*  The whole square: whatever the list above lacks is refused. */
Test (run_status, nothing_else_is_allowed)
{
    for (int f = 0; f <= SB_RUN__COUNT; f++)
        for (int t = 0; t <= SB_RUN__COUNT; t++)
            cr_assert_eq (sb_run_transition_ok ((sb_run_status_t) f, (sb_run_status_t) t),
                          s_listed ((sb_run_status_t) f, (sb_run_status_t) t), "%s -> %s",
                          sb_run_status_name ((sb_run_status_t) f), sb_run_status_name ((sb_run_status_t) t));
}

Test (run_status, some_illegal_transitions)
{
    cr_assert_not (sb_run_transition_ok (Q, CO), "a run no executor claimed cannot complete");
    cr_assert_not (sb_run_transition_ok (Q, RU), "a queued run is claimed before it runs");
    cr_assert_not (sb_run_transition_ok (Q, EX), "a queued run holds no lease");
    cr_assert_not (sb_run_transition_ok (RU, CL), "no way back to claimed");
    cr_assert_not (sb_run_transition_ok (CG, Q), "a cancelling run is not queued again");
    cr_assert_not (sb_run_transition_ok (EX, Q), "an expired run is resumed, not queued again");
    cr_assert_not (sb_run_transition_ok (CG, RU), "a cancel is not withdrawn");
    cr_assert_not (sb_run_transition_ok (CG, IN), "recovery cancels a cancelling run");
    cr_assert_not (sb_run_transition_ok (RU, RU), "no self-transitions");
}

/*  Resume makes a new run (resume_from); it never reopens the old one, so
    a final status has no exit at all. */
Test (run_status, final_statuses_have_no_exit)
{
    for (int f = 0; f < SB_RUN__COUNT; f++) {
        if (!sb_run_status_is_final ((sb_run_status_t) f))
            continue;
        for (int t = 0; t <= SB_RUN__COUNT; t++)
            cr_assert_not (sb_run_transition_ok ((sb_run_status_t) f, (sb_run_status_t) t), "%s -> %s",
                           sb_run_status_name ((sb_run_status_t) f), sb_run_status_name ((sb_run_status_t) t));
    }
}

/*  Every live status can still end: no run is stuck by the table. */
Test (run_status, every_live_status_reaches_a_final_one)
{
    for (int f = 0; f < SB_RUN__COUNT; f++) {
        if (sb_run_status_is_final ((sb_run_status_t) f))
            continue;
        bool ends = false;
        for (int t = 0; t < SB_RUN__COUNT; t++)
            ends |= sb_run_status_is_final ((sb_run_status_t) t)
                 && sb_run_transition_ok ((sb_run_status_t) f, (sb_run_status_t) t);
        cr_assert (ends, "%s has no way to end", sb_run_status_name ((sb_run_status_t) f));
    }
}

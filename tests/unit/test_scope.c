/*  tests/unit/test_scope.c — the scope column of the type rows.

    The scope of a row is the whole access policy: the gateway and a
    client key pass the public types, a worker key the worker ones, and a
    worker key appends only the tape kinds marked worker (bus/curve.c).
    These tests pin the worker protocol (docs/workers.md) so that a row
    does not join or leave it by accident, and hold the column's other
    rules. */
#include <criterion/criterion.h>
#include <string.h>

#include "schemas/schema.h"

/*  The worker protocol: what a worker key may call (docs/workers.md). */
static const char *s_worker_types [] = {
    "worker.register", "run.claim", "run.heartbeat", "run.complete", "session.append", "session.get",
    "session.events", "session.steer.take", "llm.stream", "llm.cancel", "llm.models", "llm.info",
    "interact.request", "interact.get", "blob.get", "blob.put", "bus.heartbeat", NULL
};

/*  What an executor writes to a tape, all a worker key may append. */
static const char *s_worker_kinds [] = {
    "turn.begin", "turn.end", "text.delta", "text.done", "thinking.delta", "reasoning.state", "tool.call",
    "tool.output", "tool.result", "usage", "note", "context.compacted", "instructions.loaded", "checkpoint",
    "budget.warning", "budget.raised", "session.rewound", NULL
};

static bool
s_listed (const char **list, const char *name)
{
    for (size_t k = 0; list [k]; k++)
        if (strcmp (list [k], name) == 0)
            return true;
    return false;
}

Test (scope, the_worker_types_are_the_worker_protocol)
{
    size_t n;
    const sb_type_t *all = sb_schema_all (&n);
    size_t worker = 0;
    for (size_t k = 0; k < n; k++) {
        bool marked = sb_type_in_scope (&all [k], SB_SCOPE_WORKER);
        worker += marked;
        cr_expect_eq (marked, s_listed (s_worker_types, all [k].name), "%s: worker scope %s", all [k].name,
                      marked ? "set, but it is not of the worker protocol" : "missing");
    }
    cr_expect_eq (worker, sizeof s_worker_types / sizeof s_worker_types [0] - 1);
}

Test (scope, the_worker_kinds_are_what_an_executor_writes)
{
    size_t n;
    const sb_type_t *kinds = sb_schema_tape_all (&n);
    size_t worker = 0;
    for (size_t k = 0; k < n; k++) {
        bool marked = sb_type_in_scope (&kinds [k], SB_SCOPE_WORKER);
        worker += marked;
        cr_expect_eq (marked, s_listed (s_worker_kinds, kinds [k].name), "tape kind %s: worker scope %s",
                      kinds [k].name, marked ? "set, but an executor does not write it" : "missing");
        cr_expect_not (kinds [k].scope & SB_SCOPE_PUBLIC, "tape kind %s is public: no client appends",
                       kinds [k].name);
    }
    cr_expect_eq (worker, sizeof s_worker_kinds / sizeof s_worker_kinds [0] - 1);
}

Test (scope, no_unknown_flags_and_no_public_tape_writer)
{
    size_t n;
    const sb_type_t *all = sb_schema_all (&n);
    for (size_t k = 0; k < n; k++) {
        const sb_type_t *t = &all [k];
        cr_expect_eq (t->scope & ~(unsigned) (SB_SCOPE_PUBLIC | SB_SCOPE_WORKER), 0u, "%s: unknown scope flags",
                      t->name);
    }
    /* what a browser must never send */
    static const char *internal [] = { "session.append", "session.fence", "run.request", "run.heartbeat",
                                       "run.finish", "llm.stream", "llm.cancel", "exec.start", "bus.ready", NULL };
    for (size_t k = 0; internal [k]; k++) {
        const sb_type_t *t = sb_schema_find (internal [k], strlen (internal [k]));
        cr_assert_not_null (t, "%s", internal [k]);
        cr_expect_not (t->scope & SB_SCOPE_PUBLIC, "%s is public", internal [k]);
    }
}

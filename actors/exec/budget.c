/*  actors/exec/budget.c — budgets that pause a run and ask (docs/usage.md).

    A session may set budgets for each of its runs: tokens (input and
    output of every model call, compaction's included), cost (micro-
    dollars, from the price table), steps (model calls) and minutes (wall
    time since the run's turn.begin). The run checks them at a step
    boundary, before each model call and never inside a tool: at 50 % and
    80 % of a budget it writes budget.warning once each; at 100 % it asks
    a person with an interaction of kind budget and waits in phase
    waiting_budget (actors/exec/approval.c's machinery, the same as a tool
    call's approval). Approved, the budget is raised by the answer's raise
    or by its original amount, and the new limit goes on the tape as
    budget.raised; rejected or expired, the run fails with reason
    "budget: ...".

    Everything the check needs after a restart is on the tape: the run's
    usage entries (counted by the catch-up), its warnings, its raises and
    its turn.begin. The question's call_id is "budget:NAME:LIMIT", so an
    executor that asks again after a restart finds the same interaction,
    answered or not, and no model call is made twice: the call comes only
    after the answer.
*/
#include "actors/exec/agent.h"
#include "actors/exec/approval.h"
#include "common/log.h"
#include "schemas/interaction.h"

#include <string.h>

#define ACTOR "exec"
#define S_MINUTE_MS         60000
#define S_MINUTE_MS_MIN     10
#define S_MINUTE_MS_MAX     60000

//  The record's budget fields, in ia_budget_t order.
static const char *s_keys [IA__BUDGETS] = { "tokens", "cost_microusd", "steps", "minutes" };
//  How a person reads each budget's unit.
static const char *s_units [IA__BUDGETS] = { "tokens", "micro-dollars", "model calls", "minutes" };
static const unsigned s_percents [2] = { 50, 80 };

void
sb_exec_budget_configure (sb_exec_run_t *run, const sb_val_t *session)
{
    sb_exec_budget_t *b = &run->budget;
    const sb_val_t *budget = sb_get_map (session, "budget");
    //  a minute, in ms: SWITCHBOARD_BUDGET_MINUTE_MS lets a test make it
    //  short (docs/testing.md)
    b->minute_ms = sb_env_int (ACTOR, "SWITCHBOARD_BUDGET_MINUTE_MS", S_MINUTE_MS_MIN, S_MINUTE_MS_MAX, S_MINUTE_MS);
    for (int k = 0; k < IA__BUDGETS; k++) {
        b->original [k] = sb_get_uint (budget, s_keys [k], 0);
        //  a raise read from the tape already stays
        if (b->limit [k] < b->original [k] || !b->original [k])
            b->limit [k] = b->original [k];
    }
}

void
sb_exec_budget_note (sb_exec_run_t *run, const sb_exec_usage_t *u, bool reported)
{
    sb_exec_budget_t *b = &run->budget;
    if (!reported || (u->known & 3) != 3)
        b->tokens_unknown = true;
    if (!reported || u->cost_microusd < 0)
        b->cost_unknown = true;
    else
        b->cost += (uint64_t) u->cost_microusd;
}

void
sb_exec_budget_feed (sb_exec_run_t *run, const sb_val_t *ev)
{
    const char *kind = sb_get_str (ev, "kind");
    const char *rid = sb_get_str (ev, "run_id");
    if (!kind || !rid || strcmp (rid, run->run_id) != 0)
        return;
    sb_exec_budget_t *b = &run->budget;
    const sb_val_t *body = sb_get_map (ev, "body");
    ia_budget_t which = sb_ia_budget_from_name (sb_get_str (body, "budget"));
    if (strcmp (kind, "turn.begin") == 0) {
        uint64_t ts = sb_get_uint (ev, "ts", 0);
        if (!b->started_ms || (ts && ts < b->started_ms))
            b->started_ms = ts;
    }
    else
    if (strcmp (kind, "budget.warning") == 0 && which != IA__BUDGETS) {
        unsigned pct = (unsigned) sb_get_uint (body, "percent", 0);
        for (int p = 0; p < 2; p++)
            if (pct == s_percents [p])
                b->warned [which][p] = true;
    }
    else
    if (strcmp (kind, "budget.raised") == 0 && which != IA__BUDGETS) {
        uint64_t limit = sb_get_uint (body, "limit", 0);
        if (limit > b->limit [which])
            b->limit [which] = limit;
        b->asked = false;
    }
    else
    if (strcmp (kind, "approval.requested") == 0) {
        const char *ia_kind = sb_get_str (body, "kind");
        if (ia_kind && sb_ia_kind_from_name (ia_kind) == IA_KIND_BUDGET)
            b->asked = true;
    }
    else
    if (strcmp (kind, "usage") == 0 || strcmp (kind, "tool.call") == 0)
        b->asked = false;
}

//  What the run spent of budget k, in its unit; false when it cannot be
//  known (a provider that reports no tokens, a model without a price).
static bool
s_spent (const sb_exec_run_t *run, int k, uint64_t *spent, int64_t *elapsed_ms)
{
    const sb_exec_budget_t *b = &run->budget;
    *elapsed_ms = 0;
    switch (k) {
        case IA_BUDGET_TOKENS:
            *spent = atomic_load (&run->input_tokens) + atomic_load (&run->output_tokens);
            return !b->tokens_unknown;
        case IA_BUDGET_COST:
            *spent = b->cost;
            return !b->cost_unknown;
        case IA_BUDGET_STEPS:
            *spent = atomic_load (&run->steps);
            return true;
        default: {
            uint64_t now = sb_now_ms ();
            *elapsed_ms = b->started_ms && now > b->started_ms ? (int64_t) (now - b->started_ms) : 0;
            *spent = (uint64_t) (*elapsed_ms / b->minute_ms);
            return b->started_ms != 0;
        }
    }
}

//  Whether spent has reached the share pct/100 of limit; minutes by the
//  elapsed ms, so that a minute budget ends at its minute and not a
//  minute later.
static bool
s_reached (const sb_exec_run_t *run, int k, uint64_t spent, int64_t elapsed_ms, uint64_t limit, unsigned pct)
{
    if (k == IA_BUDGET_MINUTES)
        return (unsigned __int128) elapsed_ms * 100 >= (unsigned __int128) limit * pct * run->budget.minute_ms;
    return (unsigned __int128) spent * 100 >= (unsigned __int128) limit * pct;
}

//  Appends budget.warning (pct 50 or 80, of the session's budget) or,
//  with pct 0, budget.raised (the new limit, after interaction_id).
static int
s_note (sb_exec_run_t *run, int k, unsigned pct, uint64_t spent, uint64_t limit, const char *interaction_id)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return -1;
    sb_enc_array_open (e);
    sb_exec_entry_open (e, pct ? "budget.warning" : "budget.raised");
    sb_enc_kstr (e, "budget", sb_ia_budget_name ((ia_budget_t) k));
    if (pct)
        sb_enc_kuint (e, "percent", pct);
    sb_enc_kuint (e, "spent", spent);
    sb_enc_kuint (e, "limit", limit);
    if (interaction_id)
        sb_enc_kstr (e, "interaction_id", interaction_id);
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
    int rc = sb_exec_append (run, e);
    sb_enc_destroy (&e);
    sb_info (ACTOR, "budget %s run=%s budget=%s percent=%u spent=%llu limit=%llu", pct ? "warning" : "raised",
             run->run_id, sb_ia_budget_name ((ia_budget_t) k), pct, (unsigned long long) spent,
             (unsigned long long) limit);
    return rc;
}

//  Asks whether the run goes on past budget k, and waits. 0: approved and
//  raised; -1: the run stops.
static int
s_ask (sb_exec_run_t *run, int k, uint64_t spent)
{
    sb_exec_budget_t *b = &run->budget;
    const char *name = sb_ia_budget_name ((ia_budget_t) k);
    char call_id [64], args [256], summary [256];
    snprintf (call_id, sizeof call_id, "budget:%s:%llu", name, (unsigned long long) b->limit [k]);
    snprintf (args, sizeof args, "{\"budget\":\"%s\",\"spent\":%llu,\"limit\":%llu}", name,
              (unsigned long long) spent, (unsigned long long) b->limit [k]);
    snprintf (summary, sizeof summary, "the run reached its %s budget: %llu of %llu %s; go on?", name,
              (unsigned long long) spent, (unsigned long long) b->limit [k], s_units [k]);
    sb_sub_t *sub = sb_exec_ask_subscribe (run);
    sb_enc_t *e = sb_exec_ask_request (run, call_id, "budget");
    sb_enc_kstr (e, "arguments", args);
    sb_enc_kstr (e, "summary", summary);
    sb_enc_kstr (e, "kind", "budget");
    sb_enc_kstr (e, "budget", name);
    sb_enc_kuint (e, "spent", spent);
    sb_enc_kuint (e, "budget_limit", b->limit [k]);
    sb_enc_kstr (e, "default_outcome", "reject");
    if (sb_exec_approval_deadline (run) >= 0)
        sb_enc_kuint (e, "deadline_s", (uint64_t) sb_exec_approval_deadline (run));
    sb_enc_map_close (e);
    sb_info (ACTOR, "budget reached run=%s budget=%s spent=%llu limit=%llu", run->run_id, name,
             (unsigned long long) spent, (unsigned long long) b->limit [k]);
    sb_exec_answer_t o = { { 0 } };
    sb_ask_t asked = sb_exec_ask (run, e, sub, SB_PHASE_WAITING_BUDGET, &o);
    sb_enc_destroy (&e);
    sb_sub_destroy (&sub);
    int rc = -1;
    if (asked == SB_ASK_FAILED)
        sb_exec_finish_with (run, "failed", "budget: the %s budget (%llu %s) was reached and nobody could be "
                             "asked to raise it (%s: %s)", name, (unsigned long long) b->limit [k], s_units [k],
                             sb_err_name (o.code), o.error);
    else
    if (asked == SB_ASK_CANCELLED)
        sb_exec_finish_with (run, "cancelled", "cancelled while it waited at its %s budget", name);
    else
    if (asked == SB_ASK_RESOLVED && sb_ia_decision_from_name (o.decision) != IA_APPROVE)
        sb_exec_finish_with (run, "failed", "budget: the %s budget (%llu %s) was reached; %s by %s%s%s",
                             name, (unsigned long long) b->limit [k], s_units [k],
                             sb_ia_status_from_name (o.status) == IA_EXPIRED ? "nobody answered, rejected"
                                                                               : "not raised", o.resolved_by,
                             o.feedback ? ": " : "", o.feedback ? o.feedback : "");
    else
    if (asked == SB_ASK_RESOLVED) {
        //  the answer's raise, else the budget's own amount again; minutes
        //  count from the answer, so that a person's thinking is not the
        //  run's time (as timeout_s does)
        uint64_t amount = o.raise ? o.raise : b->original [k];
        uint64_t base = b->limit [k];
        uint64_t now_spent;
        int64_t elapsed_ms;
        if (k == IA_BUDGET_MINUTES && s_spent (run, k, &now_spent, &elapsed_ms) && now_spent > base)
            base = now_spent;
        uint64_t limit = base + amount;
        rc = s_note (run, k, 0, spent, limit, o.interaction_id);
        if (rc == 0)
            b->limit [k] = limit;
    }
    sb_exec_answer_clear (&o);
    return rc;
}

int
sb_exec_budget_check (sb_exec_run_t *run)
{
    sb_exec_budget_t *b = &run->budget;
    //  one answer may leave another budget reached, or this one (a raise
    //  smaller than what was spent past it): ask again, each time at a
    //  higher limit, until none is reached; every round waits for a person
    for (;;) {
        int reached = -1;
        uint64_t reached_spent = 0;
        for (int k = 0; k < IA__BUDGETS; k++) {
            uint64_t spent;
            int64_t elapsed_ms;
            if (!b->limit [k] || !s_spent (run, k, &spent, &elapsed_ms))
                continue;
            //  the warnings are of the session's budget, not of a raise
            for (int p = 0; p < 2; p++)
                if (!b->warned [k][p] && b->limit [k] == b->original [k]
                &&  s_reached (run, k, spent, elapsed_ms, b->original [k], s_percents [p])
                &&  !s_reached (run, k, spent, elapsed_ms, b->original [k], 100)) {
                    if (s_note (run, k, s_percents [p], spent, b->original [k], NULL))
                        return -1;
                    b->warned [k][p] = true;
                }
            if (reached < 0 && s_reached (run, k, spent, elapsed_ms, b->limit [k], 100)) {
                reached = k;
                reached_spent = spent;
            }
        }
        if (reached < 0)
            return 0;
        if (s_ask (run, reached, reached_spent))
            return -1;
    }
}

/*  schemas/interaction.c — an interaction's statuses, their transition
    table, its decisions, scopes and risks (schemas/interaction.h). */
#include "schemas/interaction.h"
#include "schemas/schema.h"

#include <string.h>

const char *const sb_ia_statuses [IA__COUNT + 1] = { "pending", "approved", "rejected", "expired", NULL };
const char *const sb_ia_decisions [IA__DECISIONS + 1] = { "approve", "reject", NULL };
const char *const sb_ia_scopes [IA__SCOPES + 1] = { "once", "session", "always", NULL };
const char *const sb_ia_risks [IA__RISKS + 1] = { "low", "medium", "high", NULL };
const char *const sb_ia_kinds [IA__KINDS + 1] = { "approval", "budget", "elicitation", NULL };
const char *const sb_ia_budgets [IA__BUDGETS + 1] = { "tokens", "cost", "steps", "minutes", NULL };
const char *const sb_ia_actions [IA__ACTIONS + 1] = { "accept", "decline", "cancel", NULL };

/*  The transition table: a pending interaction is resolved once, by a
    person (approved, rejected) or by its deadline (expired); a resolved
    one never moves again, which is what makes the first writer win. */
static const bool s_transitions [IA__COUNT][IA__COUNT] = {
    [IA_PENDING] = { [IA_APPROVED] = true, [IA_REJECTED] = true, [IA_EXPIRED] = true },
};

SB_ENUM_NAME (sb_ia_status_name, ia_status_t, sb_ia_statuses, IA__COUNT, "unknown")
SB_ENUM_FROM (sb_ia_status_from_name, ia_status_t, sb_ia_statuses, IA__COUNT)

bool
sb_ia_transition_ok (ia_status_t from, ia_status_t to)
{
    return (unsigned) from < IA__COUNT && (unsigned) to < IA__COUNT && s_transitions [from][to];
}

SB_ENUM_NAME (sb_ia_decision_name, ia_decision_t, sb_ia_decisions, IA__DECISIONS, "unknown")
SB_ENUM_FROM (sb_ia_decision_from_name, ia_decision_t, sb_ia_decisions, IA__DECISIONS)
SB_ENUM_NAME (sb_ia_scope_name, ia_scope_t, sb_ia_scopes, IA__SCOPES, "unknown")
SB_ENUM_FROM (sb_ia_scope_from_name, ia_scope_t, sb_ia_scopes, IA__SCOPES)
SB_ENUM_FROM (sb_ia_risk_from_name, ia_risk_t, sb_ia_risks, IA__RISKS)
SB_ENUM_NAME (sb_ia_kind_name, ia_kind_t, sb_ia_kinds, IA__KINDS, "unknown")
SB_ENUM_FROM (sb_ia_kind_from_name, ia_kind_t, sb_ia_kinds, IA__KINDS)
SB_ENUM_NAME (sb_ia_budget_name, ia_budget_t, sb_ia_budgets, IA__BUDGETS, "unknown")
SB_ENUM_FROM (sb_ia_budget_from_name, ia_budget_t, sb_ia_budgets, IA__BUDGETS)
SB_ENUM_NAME (sb_ia_action_name, ia_action_t, sb_ia_actions, IA__ACTIONS, "unknown")
SB_ENUM_FROM (sb_ia_action_from_name, ia_action_t, sb_ia_actions, IA__ACTIONS)

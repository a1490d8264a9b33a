/*  schemas/interaction.h — the vocabulary of an interaction (a question
    to a person about a tool call; docs/approvals.md): its statuses and the
    transitions between them, its decisions, scopes and risks.

    The interact actor holds them as these enums and writes only the
    transitions sb_ia_transition_ok allows; the executor and the CLI read
    them by name from records and tape entries. The wire carries the
    names, which the schema tables check (SB_T_ENUM) against the tables
    here. The enums keep the names the interact actor gave them. */
#ifndef SB_SCHEMAS_INTERACTION_H
#define SB_SCHEMAS_INTERACTION_H

#include <stdbool.h>

/*  pending is the only status that moves, and it moves once. */
typedef enum { IA_PENDING, IA_APPROVED, IA_REJECTED, IA_EXPIRED, IA__COUNT } ia_status_t;
typedef enum { IA_APPROVE, IA_REJECT, IA__DECISIONS } ia_decision_t;
typedef enum { IA_ONCE, IA_SESSION, IA_ALWAYS, IA__SCOPES } ia_scope_t;
typedef enum { IA_RISK_LOW, IA_RISK_MEDIUM, IA_RISK_HIGH, IA__RISKS } ia_risk_t;
/*  What is asked: an approval of a tool call, whether a run that
    reached one of its budgets goes on (docs/usage.md), or the values an
    MCP server asks for during a tool call (docs/mcp.md, Elicitation). */
typedef enum { IA_KIND_APPROVAL, IA_KIND_BUDGET, IA_KIND_ELICITATION, IA__KINDS } ia_kind_t;
/*  An elicitation's answer, as MCP names it: accept (with content; the
    decision approve), decline (reject: the person said no) or cancel
    (reject: nobody said anything, the deadline or a restart). */
typedef enum { IA_ACTION_ACCEPT, IA_ACTION_DECLINE, IA_ACTION_CANCEL, IA__ACTIONS } ia_action_t;
/*  The budgets a session may set, in this order everywhere: tokens (input
    and output of every model call), cost (micro-dollars), steps (model
    calls) and minutes (the run's wall time). */
typedef enum { IA_BUDGET_TOKENS, IA_BUDGET_COST, IA_BUDGET_STEPS, IA_BUDGET_MINUTES, IA__BUDGETS } ia_budget_t;
/*  Each budget's largest value (the schemas' ranges): 10^12 tokens, a
    million dollars, the steps a run may take at most, a week. */
#define SB_BUDGET_TOKENS_MAX    1000000000000ll
#define SB_BUDGET_COST_MAX      1000000000000ll     /* micro-dollars */
#define SB_BUDGET_STEPS_MAX     10000
#define SB_BUDGET_MINUTES_MAX   (7 * 24 * 60)

/*  The names, in the enums' order, NULL-terminated (for ENUM rows). */
extern const char *const sb_ia_statuses [];
extern const char *const sb_ia_decisions [];
extern const char *const sb_ia_scopes [];
extern const char *const sb_ia_risks [];
extern const char *const sb_ia_kinds [];
extern const char *const sb_ia_budgets [];
extern const char *const sb_ia_actions [];

const char *sb_ia_status_name (ia_status_t s);
/*  IA__COUNT when unknown or NULL. */
ia_status_t sb_ia_status_from_name (const char *name);
/*  True when the transition table has from -> to. */
bool sb_ia_transition_ok (ia_status_t from, ia_status_t to);
const char *sb_ia_decision_name (ia_decision_t d);
ia_decision_t sb_ia_decision_from_name (const char *name);     /* IA__DECISIONS: unknown */
const char *sb_ia_scope_name (ia_scope_t s);
ia_scope_t sb_ia_scope_from_name (const char *name);           /* IA__SCOPES: unknown */
ia_risk_t sb_ia_risk_from_name (const char *name);             /* IA__RISKS: unknown */
const char *sb_ia_kind_name (ia_kind_t k);
ia_kind_t sb_ia_kind_from_name (const char *name);             /* IA__KINDS: unknown */
const char *sb_ia_budget_name (ia_budget_t b);
ia_budget_t sb_ia_budget_from_name (const char *name);         /* IA__BUDGETS: unknown */
const char *sb_ia_action_name (ia_action_t a);
ia_action_t sb_ia_action_from_name (const char *name);         /* IA__ACTIONS: unknown */

#endif

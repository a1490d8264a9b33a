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

/*  The names, in the enums' order, NULL-terminated (for ENUM rows). */
extern const char *const sb_ia_statuses [];
extern const char *const sb_ia_decisions [];
extern const char *const sb_ia_scopes [];
extern const char *const sb_ia_risks [];

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

#endif

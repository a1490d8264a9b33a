/*  schemas/approval_policy.h — the approval vocabulary of the protocol
    (docs/approvals.md): a session's or run's approval_policy (its mode),
    the actions of its rules, and the check of a rule as a client gives it.

    The schema's ENUM rows name the tables below, so the codec refuses a
    mode or an action outside them before any handler runs; the executor
    decides by the enums (actors/exec/policy.h), the CLI checks its flags
    with the same functions. */
#ifndef SB_SCHEMAS_APPROVAL_POLICY_H
#define SB_SCHEMAS_APPROVAL_POLICY_H

#include <stdbool.h>

#define SB_POLICY_RULES_MAX       256     //  rules on one session
#define SB_POLICY_RULE_TOOL_MAX   128     //  bytes of a rule's tool glob
#define SB_POLICY_RULE_PATTERN_MAX 1024   //  bytes of a rule's pattern glob

typedef enum {
    SB_POLICY_YOLO,
    SB_POLICY_AUTO,
    SB_POLICY_INTERACTIVE,
    SB_POLICY__MODES
} sb_policy_mode_t;

typedef enum {
    SB_POLICY_ALLOW,
    SB_POLICY_ASK,
    SB_POLICY_DENY,
    SB_POLICY__ACTIONS
} sb_policy_action_t;

//  The names of the modes and of the actions, in the enums' order,
//  NULL-terminated: the tables the schema's ENUM rows name.
extern const char *const sb_policy_modes [];
extern const char *const sb_policy_actions [];

//  The mode of a policy name; SB_POLICY__MODES for an unknown one. NULL
//  (or "") is auto, the default of a session without one.
sb_policy_mode_t sb_policy_mode_from_name (const char *name);
const char *sb_policy_mode_name (sb_policy_mode_t mode);
//  Whether `name` is one of the modes' names (yolo, auto, interactive),
//  as the CLI checks --approval. False for NULL and "".
bool sb_policy_mode_ok (const char *name);

//  allow | ask | deny; SB_POLICY__ACTIONS for anything else.
sb_policy_action_t sb_policy_action_from_name (const char *name);
const char *sb_policy_action_name (sb_policy_action_t action);

//  Checks a rule as a client gives it: a tool glob of 1 to
//  SB_POLICY_RULE_TOOL_MAX bytes, a pattern of 1 to
//  SB_POLICY_RULE_PATTERN_MAX bytes, an action. Returns NULL when it is
//  good, else what is wrong (a static string).
const char *sb_policy_rule_check (const char *tool, const char *pattern, const char *action);

#endif

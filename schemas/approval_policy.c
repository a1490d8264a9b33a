/*  schemas/approval_policy.c — approval modes, rule actions and the rule
    check (schemas/approval_policy.h). */
#include "schemas/approval_policy.h"
#include "schemas/schema.h"

#include <stddef.h>
#include <string.h>

const char *const sb_policy_modes [SB_POLICY__MODES + 1] = { "yolo", "auto", "interactive", NULL };
const char *const sb_policy_actions [SB_POLICY__ACTIONS + 1] = { "allow", "ask", "deny", NULL };

sb_policy_mode_t
sb_policy_mode_from_name (const char *name)
{
    if (!name || !*name)
        return SB_POLICY_AUTO;
    return (sb_policy_mode_t) sb_enum_lookup (sb_policy_modes, SB_POLICY__MODES, name);
}

SB_ENUM_NAME (sb_policy_mode_name, sb_policy_mode_t, sb_policy_modes, SB_POLICY__MODES, "?")

//  A mode's name, exactly: what the CLI checks of --approval before it
//  sends it. The server's one check of a client's approval_policy is the
//  schema's ENUM row (sb_policy_modes) of each request that takes one.
bool
sb_policy_mode_ok (const char *name)
{
    return name && *name && sb_policy_mode_from_name (name) != SB_POLICY__MODES;
}

SB_ENUM_FROM (sb_policy_action_from_name, sb_policy_action_t, sb_policy_actions, SB_POLICY__ACTIONS)
SB_ENUM_NAME (sb_policy_action_name, sb_policy_action_t, sb_policy_actions, SB_POLICY__ACTIONS, "?")

//  What session.create and session.update check of each rule; the
//  executor reads only rules that passed it.
const char *
sb_policy_rule_check (const char *tool, const char *pattern, const char *action)
{
    if (!tool || !*tool || strlen (tool) > SB_POLICY_RULE_TOOL_MAX)
        return "tool must be a glob of 1 to 128 bytes (e.g. shell, write_file, mcp__srv__*)";
    if (!pattern || !*pattern || strlen (pattern) > SB_POLICY_RULE_PATTERN_MAX)
        return "pattern must be a glob of 1 to 1024 bytes (e.g. 'git *', 'src/*', '*')";
    if (sb_policy_action_from_name (action) == SB_POLICY__ACTIONS)
        return "action must be allow, ask or deny";
    return NULL;
}

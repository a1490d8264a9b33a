/*  schemas/approval_policy.c — approval modes, rule actions and the rule
    check (schemas/approval_policy.h). */
#include "schemas/approval_policy.h"

#include <stddef.h>
#include <string.h>

const char *const sb_policy_modes [SB_POLICY__MODES + 1] = { "yolo", "auto", "interactive", NULL };
const char *const sb_policy_actions [SB_POLICY__ACTIONS + 1] = { "allow", "ask", "deny", NULL };

sb_policy_mode_t
sb_policy_mode_from_name (const char *name)
{
    if (!name || !*name)
        return SB_POLICY_AUTO;
    for (int k = 0; k < SB_POLICY__MODES; k++)
        if (strcmp (name, sb_policy_modes [k]) == 0)
            return (sb_policy_mode_t) k;
    return SB_POLICY__MODES;
}

const char *
sb_policy_mode_name (sb_policy_mode_t mode)
{
    return (unsigned) mode < SB_POLICY__MODES ? sb_policy_modes [mode] : "?";
}

//  A mode's name, exactly: what the CLI checks of --approval before it
//  sends it. The server's one check of a client's approval_policy is the
//  schema's ENUM row (sb_policy_modes) of each request that takes one.
bool
sb_policy_mode_ok (const char *name)
{
    return name && *name && sb_policy_mode_from_name (name) != SB_POLICY__MODES;
}

sb_policy_action_t
sb_policy_action_from_name (const char *name)
{
    for (int k = 0; name && k < SB_POLICY__ACTIONS; k++)
        if (strcmp (name, sb_policy_actions [k]) == 0)
            return (sb_policy_action_t) k;
    return SB_POLICY__ACTIONS;
}

const char *
sb_policy_action_name (sb_policy_action_t action)
{
    return (unsigned) action < SB_POLICY__ACTIONS ? sb_policy_actions [action] : "?";
}

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

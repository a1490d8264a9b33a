/*  actors/exec/policy.h — which tool calls run, which ask a person, and
    which are denied (docs/approvals.md, "Policies and rules").

    A decision has three inputs:
      - the session's approval mode: yolo allows everything; auto allows
        the read-only tools (sb_policy_read_only) and asks for the rest,
        unknown tools and MCP tools (mcp__<server>__<tool>) included;
        interactive asks for everything;
      - the session's rules [{tool, pattern, action}], the last match
        winning; `tool` and `pattern` are fnmatch(3) globs (no flags: `*`
        matches `/` too), `pattern` matched against the call's match key
        (sb_policy_match_key): the shell command, or the path for the file
        tools. A rule overrides the mode: a deny rule denies even in yolo;
      - the decisions a person gave with scope `session`: an identical
        call (same tool, same match key) is decided as before without
        asking. They are rebuilt from the tape (approval.requested gives
        the call, approval.resolved the decision and scope), so they
        survive a restart: sb_policy_feed is given every tape entry.
    Scope `always` is a rule added to the session (sb_policy_rule_for
    builds its exact pattern); the executor asks session.update for it.

    The state also keeps the tool calls of the tape that have no result
    yet, with their arguments: a run re-dispatched after a restart while
    it waited for an approval finds its call here and asks again.

    Not thread-safe: one owner at a time, like the context it lives beside
    (actors/exec/runtime.h). The decision functions are pure.
*/
#ifndef SB_EXEC_POLICY_H
#define SB_EXEC_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "schemas/codec.h"

#define SB_POLICY_RULES_MAX       256     //  rules on one session
#define SB_POLICY_RULE_TOOL_MAX   128     //  bytes of a rule's tool glob
#define SB_POLICY_RULE_PATTERN_MAX 1024   //  bytes of a rule's pattern glob
#define SB_POLICY_GRANTS_MAX      4096    //  session-scope decisions remembered
#define SB_POLICY_ASKED_MAX       1024    //  pending approval.requested remembered
#define SB_POLICY_PENDING_MAX     256     //  tool calls without a result remembered
#define SB_POLICY_KEY_MAX         4096    //  bytes of a match key kept

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

//  Why a decision was made.
typedef enum {
    SB_POLICY_BY_MODE,          //  the mode's default
    SB_POLICY_BY_RULE,          //  rule number `rule` (from 0)
    SB_POLICY_BY_SESSION        //  a person's earlier decision with scope session
} sb_policy_by_t;

typedef struct {
    const char *tool;           //  glob over tool names
    const char *pattern;        //  glob over the match key
    sb_policy_action_t action;
} sb_policy_rule_t;

typedef struct {
    sb_policy_action_t action;
    sb_policy_by_t by;
    int rule;                   //  by rule: its index
} sb_policy_decision_t;

typedef struct sb_policy sb_policy_t;

//  The mode of a policy name; SB_POLICY__MODES for an unknown one. NULL
//  is auto, the default of a session without one.
sb_policy_mode_t sb_policy_mode_from_name (const char *name);
const char *sb_policy_mode_name (sb_policy_mode_t mode);
//  allow | ask | deny; SB_POLICY__ACTIONS for anything else.
sb_policy_action_t sb_policy_action_from_name (const char *name);
const char *sb_policy_action_name (sb_policy_action_t action);

//  Whether `tool` is one of the read-only tools that auto allows:
//  read_file, list_dir, grep, git_status, git_diff. Everything else (the
//  tools that write or run commands, unknown tools, mcp__* tools) is not.
bool sb_policy_read_only (const char *tool);

//  The string a rule's pattern is matched against: for shell the command;
//  for read_file, write_file, edit_file, list_dir and grep the path (".")
//  when absent), made relative to `workspace` when it is inside it, with
//  "./", "//" and "dir/.." folded away lexically; for git_status and
//  git_diff the path or "."; for any other tool the arguments as given.
//  Returns a malloc'd string (the caller frees it), cut at
//  SB_POLICY_KEY_MAX bytes; "" for unparsable arguments; NULL when out
//  of memory.
char *sb_policy_match_key (const char *tool, const char *arguments, const char *workspace);

//  Checks a rule as a client gives it: a tool glob of 1 to
//  SB_POLICY_RULE_TOOL_MAX bytes, a pattern of 1 to
//  SB_POLICY_RULE_PATTERN_MAX bytes, an action. Returns NULL when it is
//  good, else what is wrong (a static string).
const char *sb_policy_rule_check (const char *tool, const char *pattern, const char *action);

//  The pattern that matches exactly `key` and nothing else: its glob
//  characters escaped. Writes at most `size` bytes; returns -1 when it
//  does not fit (the rule cannot be made), else its length.
int sb_policy_exact_pattern (const char *key, char *out, size_t size);

//  Decides a call of `tool` whose match key is `key`: the last rule that
//  matches, else the mode's default; an `ask` becomes the person's
//  earlier session-scope decision when `state` has one for this call
//  (state may be NULL).
sb_policy_decision_t sb_policy_decide (sb_policy_mode_t mode, const sb_policy_rule_t *rules, size_t nrules,
                                       const sb_policy_t *state, const char *tool, const char *key);

//  ---------------------------------------------------------------------
//  The state rebuilt from the tape

//  A new, empty state. NULL when out of memory.
sb_policy_t *sb_policy_new (void);
void sb_policy_destroy (sb_policy_t **self_p);

//  Feeds one tape entry ({seq, run_id?, kind, body}); kinds other than
//  tool.call, tool.result, approval.requested and approval.resolved are
//  ignored. `workspace` turns approval.requested's arguments into a match
//  key as sb_policy_match_key does. Returns 0, or -1 when out of memory
//  (the state then misses that entry: at worst a person is asked again).
int sb_policy_feed (sb_policy_t *self, const sb_val_t *event, const char *workspace);

//  Remembers a decision with scope session for (tool, key) at once (the
//  tape will say so too; feeding it again changes nothing).
int sb_policy_grant (sb_policy_t *self, const char *tool, const char *key, bool approve);

//  The session-scope decision for (tool, key): 1 approve, 0 reject, -1
//  none.
int sb_policy_granted (const sb_policy_t *self, const char *tool, const char *key);

//  A tool call of the tape without its result.
typedef struct {
    const char *call_id;
    const char *name;
    const char *arguments;
    const char *run_id;         //  "" when the entry had none
} sb_policy_call_t;

//  The calls of run `run_id` that have no result yet, oldest first: fills
//  up to `max` and returns how many there are. The strings belong to the
//  state and stay valid until the next sb_policy_feed.
size_t sb_policy_unanswered (const sb_policy_t *self, const char *run_id, sb_policy_call_t *calls, size_t max);

#endif

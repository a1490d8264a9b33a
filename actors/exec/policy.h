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
        (sb_policy_key_new): the shell command, parsed, or the resolved
        path for the file tools. A rule overrides the mode: a deny rule
        denies even in yolo;
      - the decisions a person gave with scope `session`: an identical
        call (same tool, same whole key, by digest) is decided as before without
        asking. They are rebuilt from the tape (approval.requested gives
        the call, approval.resolved the decision and scope), so they
        survive a restart: sb_policy_feed is given every tape entry.
    Scope `always` is a rule added to the session (sb_policy_exact_rule
    builds its exact pattern); the executor asks session.update for it.
    When no rule can say it (a compound shell command), it counts for
    the session.

    The state also keeps the tool calls of the tape that have no result
    yet, with their arguments: a run re-dispatched after a restart while
    it waited for an approval finds its call here and asks again.

    Not thread-safe: one owner at a time, like the context it lives beside
    (actors/exec/runtime.h). The decision functions are pure; making a
    key for a path reads the filesystem (it resolves symlinks).
*/
#ifndef SB_EXEC_POLICY_H
#define SB_EXEC_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/digest.h"
#include "common/shparse.h"
#include "schemas/approval_policy.h"
#include "schemas/codec.h"

#define SB_POLICY_GRANTS_MAX      4096    //  session-scope decisions remembered
#define SB_POLICY_ASKED_MAX       1024    //  pending approval.requested remembered
#define SB_POLICY_PENDING_MAX     256     //  tool calls without a result remembered

//  The modes, the actions and the rule check: schemas/approval_policy.h.

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

//  Whether `tool` is one of the read-only tools that auto allows:
//  read_file, list_dir, grep, git_status, git_diff. Everything else (the
//  tools that write or run commands, unknown tools, mcp__* tools) is not.
bool sb_policy_read_only (const char *tool);

//  What a rule's pattern is matched against: the call's match key.
//    - shell: the whole command (never a prefix of it), and its parse
//      (common/shparse.h): allow rules compare the words of a single
//      simple command, deny and ask rules every simple command in it;
//    - read_file, write_file, edit_file, list_dir, grep, git_diff,
//      git_status: the path (".") when absent) after its symlinks
//      resolve, relative to the workspace, as the tool will open it;
//      `spelled` is the path as the call spells it, folded lexically
//      ("./", "//", "dir/.."), when that differs (deny and ask rules see
//      both spellings; allow rules only where the tool writes or reads);
//      a path the workspace does not hold keeps its spelling;
//    - any other tool: its JSON arguments as given.
//  `digest` is BLAKE2b of the tool and the whole key: what a person's
//  decision with scope session is remembered by.
typedef struct {
    char *text;
    char *spelled;              //  NULL unless it differs from text
    sb_sh_t *sh;                //  shell only
    uint8_t digest [SB_DIGEST_LEN];
} sb_policy_key_t;

//  The match key of a call ("" for unparsable arguments). Resolving a
//  path reads the filesystem (lstat, readlink) under `workspace`, an
//  absolute realpath, or NULL for none. NULL when out of memory.
sb_policy_key_t *sb_policy_key_new (const char *tool, const char *arguments, const char *workspace);
void sb_policy_key_destroy (sb_policy_key_t **self_p);

//  The pattern that matches exactly `key` and nothing else: its glob
//  characters escaped. Writes at most `size` bytes; returns -1 when it
//  does not fit (the rule cannot be made), else its length.
int sb_policy_exact_pattern (const char *key, char *out, size_t size);

//  The pattern of an allow rule for exactly this call: for shell the
//  command's words, each quoted as needed, and -1 when no allow rule can
//  match the command (it is not one plain simple command, or it writes or
//  runs something through an option); for the others the escaped key.
int sb_policy_exact_rule (const char *tool, const sb_policy_key_t *key, char *out, size_t size);

//  Decides a call of `tool` whose match key is `key`: the last rule that
//  matches, else the mode's default; an `ask` becomes the person's
//  earlier session-scope decision when `state` has one for this call
//  (state may be NULL). For shell, see docs/approvals.md "Shell
//  commands": an allow rule matches only one plain simple command, word
//  by word; a deny or ask rule any simple command anywhere in the line; a
//  line that cannot be parsed is never allowed by a rule. A deny rule for
//  read_file also denies grep, list_dir and git_diff on the paths it
//  names; write_file and edit_file never write in a .git folder through
//  an allow rule whose pattern does not say ".git".
sb_policy_decision_t sb_policy_decide (sb_policy_mode_t mode, const sb_policy_rule_t *rules, size_t nrules,
                                       const sb_policy_t *state, const char *tool, const sb_policy_key_t *key);

//  Whether the rules deny reading `path` (relative to the workspace, as
//  a tool found it): what grep and list_dir leave out of what they show.
bool sb_policy_read_denied (const sb_policy_rule_t *rules, size_t nrules, const char *path);

//  Shell decisions (actors/exec/policy_shell.c), for sb_policy_decide.
sb_policy_decision_t sb_policy_shell_decide (sb_policy_mode_t mode, const sb_policy_rule_t *rules, size_t nrules,
                                             const char *tool, const sb_policy_key_t *key);
//  Whether a simple command writes or runs something through an option
//  of a program that otherwise only reads (git --output, -c, find
//  -exec, ...): an allow rule never matches it.
bool sb_policy_shell_risky (const sb_sh_cmd_t *cmd);
//  Whether `pattern`, read as words, matches the words of `cmd`.
bool sb_policy_shell_match (const char *pattern, const sb_sh_cmd_t *cmd);

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

//  Remembers a decision with scope session for the call whose key is
//  `key` (its digest: tool and whole key) at once (the tape will say so
//  too; feeding it again changes nothing).
int sb_policy_grant (sb_policy_t *self, const sb_policy_key_t *key, bool approve);

//  The session-scope decision for that call: 1 approve, 0 reject, -1
//  none.
int sb_policy_granted (const sb_policy_t *self, const sb_policy_key_t *key);

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

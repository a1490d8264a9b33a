/*  cli/interactions.h — approvals as the CLI shows and answers them:
    `interactions`, `interaction ID`, `resolve ID` (cli/interactions.c),
    and the pieces `chat` shares with them. docs/approvals.md. */
#ifndef SB_CLI_INTERACTIONS_H
#define SB_CLI_INTERACTIONS_H

#include <stdio.h>
#include "bus/client.h"

/*  "cli:<user>@<host>" (or "<what>:<user>@<host>") into out: who answers,
    as resolved_by records it. */
void sb_interaction_who (const char *what, char *out, size_t n);

/*  Prints what a person needs to judge a tool call: its tool, the shell
    command or the path, the diff a file tool would make, or else the
    arguments, pretty-printed. `ia` is an interaction record or the body
    of an approval.requested entry. */
void sb_interaction_print_call (FILE *out, const sb_val_t *ia);

/*  Asks the server to resolve `id`: decision "approve" or "reject", scope
    and feedback may be NULL; raise is a budget question's (0: none);
    action (accept, decline, cancel) and content (JSON values) an
    elicitation's, or NULL. Returns the reply (.ok or error; the caller
    destroys it), or NULL when no reply came in time. */
sb_msg_t *sb_interaction_resolve (sb_bus_t *bus, const char *id, const char *decision, const char *scope,
                                  const char *feedback, const char *resolved_by, const char *command_id, uint64_t raise,
                                  const char *action, const char *content);
/*  Whether an interaction (a record or its approval.requested body) is a
    budget question (docs/usage.md). */
//  Whether `ia` (a record or an approval.requested body) is an MCP
//  server's elicitation (its schema in `schema`, its message in summary).
bool sb_interaction_is_elicitation (const sb_val_t *ia);
bool sb_interaction_is_budget (const sb_val_t *ia);

/*  One line for a conflict reply: "ia_... was already approved by X". */
void sb_interaction_conflict_line (const sb_msg_t *reply, char *out, size_t n);

int sb_cmd_interactions (int argc, char **argv);
int sb_cmd_interaction (int argc, char **argv);
int sb_cmd_resolve (int argc, char **argv);

#endif

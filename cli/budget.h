/*  cli/budget.h — the --budget-* options of sessions new|update and run,
    and how a budget's amounts are read and shown (docs/usage.md).

    A budget is given in its own unit: tokens, dollars (--budget-usd 2.50,
    exact to the micro-dollar), steps (model calls), minutes. On the bus
    the cost is in micro-dollars (the record's budget.cost_microusd). */
#ifndef SB_CLI_BUDGET_H
#define SB_CLI_BUDGET_H

#include "schemas/codec.h"
#include "schemas/interaction.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    uint64_t value [IA__BUDGETS];   //  in ia_budget_t order; cost in micro-dollars
    bool given [IA__BUDGETS];
} sb_cli_budget_t;

//  The getopt_long rows of the four options, their vals from `base` on
//  (base + ia_budget_t), for a command's table.
#define SB_CLI_BUDGET_OPTS(base) \
    { "budget-tokens", required_argument, 0, (base) + IA_BUDGET_TOKENS }, \
    { "budget-usd", required_argument, 0, (base) + IA_BUDGET_COST }, \
    { "budget-steps", required_argument, 0, (base) + IA_BUDGET_STEPS }, \
    { "budget-minutes", required_argument, 0, (base) + IA_BUDGET_MINUTES }

//  The options' help lines.
#define SB_CLI_BUDGET_HELP \
    "  --budget-tokens N  per run: input + output tokens of its model calls\n" \
    "                     (compaction's included), 1 to 10^12 (0 removes it, update)\n" \
    "  --budget-usd X     per run: its cost in dollars, e.g. 2.50 (needs prices;\n" \
    "                     docs/usage.md), up to 1000000 (0 removes it)\n" \
    "  --budget-steps N   per run: its model calls, 1 to 10000 (0 removes it)\n" \
    "  --budget-minutes N per run: its wall time, 1 to 10080 (0 removes it)\n" \
    "                     A run that reaches a budget stops before its next model\n" \
    "                     call and asks (switchboard interactions, resolve --raise)\n"

//  An amount of budget `b` as people write it (dollars for the cost) into
//  *out in the bus's unit. 0 or the exit code of a usage error naming
//  `cmd` and `opt`.
int sb_cli_budget_parse (const char *cmd, const char *opt, ia_budget_t b, const char *text, uint64_t *out);
//  Takes option `b` (base + its ia_budget_t) into *budget: 0 or the exit code.
int sb_cli_budget_opt (const char *cmd, int b, const char *text, sb_cli_budget_t *budget);
bool sb_cli_budget_any (const sb_cli_budget_t *budget);
//  The "budget" field of session.create / session.update, when any was given.
void sb_cli_budget_encode (sb_enc_t *e, const sb_cli_budget_t *budget);
//  An amount of budget b for people: "1200 tokens", "$2.500000", "3 steps".
void sb_cli_budget_format (ia_budget_t b, uint64_t v, char *out, size_t n);
//  The record's budgets in one line ("1000 tokens, $2.000000"), or "-".
void sb_cli_budget_line (const sb_val_t *record, char *out, size_t n);
//  sessions show's budget line, and the notice of one not enforced.
void sb_cli_budget_print (const sb_val_t *record);

#endif

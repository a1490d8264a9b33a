/*  cli/budget.c — see budget.h. */
#include "cli/budget.h"
#include "cli/cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_keys [IA__BUDGETS] = { "tokens", "cost_microusd", "steps", "minutes" };
static const uint64_t s_max [IA__BUDGETS] = {
    SB_BUDGET_TOKENS_MAX, SB_BUDGET_COST_MAX, SB_BUDGET_STEPS_MAX, SB_BUDGET_MINUTES_MAX
};

//  Dollars with at most six decimals into micro-dollars, exactly (no
//  binary floating point on the way): false when it is not such a number.
static bool
s_dollars (const char *text, uint64_t *out)
{
    const char *p = text;
    uint64_t whole = 0, frac = 0;
    int digits = 0, decimals = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (whole > SB_BUDGET_COST_MAX / 1000000)
            return false;
        whole = whole * 10 + (uint64_t) (*p - '0');
    }
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, decimals++) {
            if (decimals == 6)
                return false;   //  finer than a micro-dollar
            frac = frac * 10 + (uint64_t) (*p - '0');
        }
    if (*p || (!digits && !decimals))
        return false;
    for (int k = decimals; k < 6; k++)
        frac *= 10;
    *out = whole * 1000000 + frac;
    return true;
}

int
sb_cli_budget_parse (const char *cmd, const char *opt, ia_budget_t b, const char *text, uint64_t *out)
{
    if (b == IA_BUDGET_COST) {
        if (!s_dollars (text, out) || *out > SB_BUDGET_COST_MAX)
            return sb_cli_usage (cmd, "%s takes dollars from 0 to 1000000 with at most 6 decimals (e.g. 2.50), "
                                 "not '%s'", opt, text);
        return 0;
    }
    unsigned long long v;
    if (sb_cli_parse_uint (cmd, opt, text, s_max [b], &v))
        return 2;
    *out = v;
    return 0;
}

int
sb_cli_budget_opt (const char *cmd, int b, const char *text, sb_cli_budget_t *budget)
{
    static const char *opts [IA__BUDGETS] = { "--budget-tokens", "--budget-usd", "--budget-steps",
                                              "--budget-minutes" };
    if (b < 0 || b >= IA__BUDGETS)
        return sb_cli_usage (cmd, "unknown budget option");
    if (sb_cli_budget_parse (cmd, opts [b], (ia_budget_t) b, text, &budget->value [b]))
        return 2;
    budget->given [b] = true;
    return 0;
}

bool
sb_cli_budget_any (const sb_cli_budget_t *budget)
{
    for (int k = 0; k < IA__BUDGETS; k++)
        if (budget->given [k])
            return true;
    return false;
}

void
sb_cli_budget_encode (sb_enc_t *e, const sb_cli_budget_t *budget)
{
    if (!sb_cli_budget_any (budget))
        return;
    sb_enc_key (e, "budget");
    sb_enc_map_open (e);
    for (int k = 0; k < IA__BUDGETS; k++)
        if (budget->given [k])
            sb_enc_kuint (e, s_keys [k], budget->value [k]);
    sb_enc_map_close (e);
}

void
sb_cli_budget_format (ia_budget_t b, uint64_t v, char *out, size_t n)
{
    if (b == IA_BUDGET_COST)
        snprintf (out, n, "$%" PRIu64 ".%06" PRIu64, v / 1000000, v % 1000000);
    else
        snprintf (out, n, "%" PRIu64 " %s", v, b < IA__BUDGETS ? sb_ia_budget_name (b) : "");
}

void
sb_cli_budget_line (const sb_val_t *record, char *out, size_t n)
{
    const sb_val_t *budget = sb_get_map (record, "budget");
    size_t at = 0;
    out [0] = 0;
    for (int k = 0; budget && k < IA__BUDGETS && at < n; k++) {
        if (!sb_get (budget, s_keys [k]))
            continue;
        char amount [64];
        sb_cli_budget_format ((ia_budget_t) k, sb_get_uint (budget, s_keys [k], 0), amount, sizeof amount);
        int w = snprintf (out + at, n - at, "%s%s", at ? ", " : "", amount);
        at = w > 0 && at + (size_t) w < n ? at + (size_t) w : n;
    }
    if (!out [0])
        snprintf (out, n, "-");
}

void
sb_cli_budget_print (const sb_val_t *record)
{
    char line [256];
    sb_cli_budget_line (record, line, sizeof line);
    printf ("budget     %s (per run)\n", line);
    if (sb_get_str (record, "budget_notice"))
        printf ("           NOT ENFORCED: %s\n", sb_get_str (record, "budget_notice"));
}

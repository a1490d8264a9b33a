/*  cli/usage.c — `switchboard usage`: tokens and cost, from session.usage
    (docs/usage.md). */
#include "cli/cli.h"
#include "schemas/codec.h"
#include "schemas/json.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_fields [] = { "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens" };
#define NFIELDS (sizeof s_fields / sizeof s_fields [0])

//  Micro-dollars as dollars, exactly: "0.001234".
static void
s_dollars (uint64_t micro, char *out, size_t n)
{
    snprintf (out, n, "%" PRIu64 ".%06" PRIu64, micro / 1000000, micro % 1000000);
}

static void
s_json_totals (const sb_val_t *t)
{
    printf ("\"calls\":%" PRIu64, sb_get_uint (t, "calls", 0));
    for (size_t k = 0; k < NFIELDS; k++)
        if (sb_get (t, s_fields [k]))
            printf (",\"%s\":%" PRIu64, s_fields [k], sb_get_uint (t, s_fields [k], 0));
        else
            printf (",\"%s\":null", s_fields [k]);
    char d [40];
    if (sb_get (t, "cost_microusd")) {
        s_dollars (sb_get_uint (t, "cost_microusd", 0), d, sizeof d);
        printf (",\"cost_usd\":%s", d);
    }
    else
        printf (",\"cost_usd\":null");
}

static void
s_json_list (const sb_val_t *list, const char *name, const char *id)
{
    printf (",\"%s\":[", name);
    for (uint32_t k = 0; list && k < list->len; k++) {
        const sb_val_t *item = sb_array_at (list, k);
        const char *v = sb_get_str (item, id);
        printf ("%s{\"%s\":\"%s\",", k ? "," : "", id, v ? v : "");
        s_json_totals (sb_get_map (item, "totals"));
        printf ("}");
    }
    printf ("]");
}

static void
s_print_json (const sb_val_t *body)
{
    const char *sid = sb_get_str (body, "session_id"), *since = sb_get_str (body, "since");
    printf ("{");
    if (sid)
        printf ("\"session_id\":\"%s\",", sid);
    if (since)
        printf ("\"since\":\"%s\",", since);
    s_json_totals (sb_get_map (body, "totals"));
    if (sb_get_array (body, "runs"))
        s_json_list (sb_get_array (body, "runs"), "runs", "run_id");
    s_json_list (sb_get_array (body, "days"), "days", "day");
    //  a budget of the session its calls cannot be measured against
    char *notice = sb_get (body, "budget_notice") ? sb_json_dump (sb_get (body, "budget_notice")) : NULL;
    if (notice)
        printf (",\"budget_notice\":%s", notice);
    free (notice);
    printf ("}\n");
}

//  One cell: the number, or "unknown".
static void
s_cell (const sb_val_t *t, const char *key, char *out, size_t n)
{
    if (!sb_get (t, key))
        snprintf (out, n, "unknown");
    else
    if (strcmp (key, "cost_microusd") == 0)
        s_dollars (sb_get_uint (t, key, 0), out, n);
    else
        snprintf (out, n, "%" PRIu64, sb_get_uint (t, key, 0));
}

static void
s_print_text (const sb_val_t *body)
{
    const char *sid = sb_get_str (body, "session_id"), *since = sb_get_str (body, "since");
    const sb_val_t *t = sb_get_map (body, "totals");
    printf ("%-20s %s\n", "session", sid ? sid : "all sessions");
    if (since)
        printf ("%-20s %s\n", "since", since);
    printf ("%-20s %" PRIu64 "\n", "calls", sb_get_uint (t, "calls", 0));
    char cell [40];
    for (size_t k = 0; k < NFIELDS; k++) {
        s_cell (t, s_fields [k], cell, sizeof cell);
        printf ("%-20s %s\n", s_fields [k], cell);
    }
    s_cell (t, "cost_microusd", cell, sizeof cell);
    printf ("%-20s %s\n", "cost_usd", cell);
    if (sb_get_str (body, "budget_notice"))
        printf ("%-20s NOT ENFORCED: %s\n", "budget", sb_get_str (body, "budget_notice"));
    const sb_val_t *runs = sb_get_array (body, "runs");
    if (runs && runs->len) {
        printf ("\n%-26s  %5s  %12s  %12s  %12s\n", "RUN", "CALLS", "INPUT", "OUTPUT", "COST_USD");
        for (uint32_t k = 0; k < runs->len; k++) {
            const sb_val_t *r = sb_array_at (runs, k), *rt = sb_get_map (r, "totals");
            char in [32], out [32], cost [40];
            s_cell (rt, "input_tokens", in, sizeof in);
            s_cell (rt, "output_tokens", out, sizeof out);
            s_cell (rt, "cost_microusd", cost, sizeof cost);
            printf ("%-26s  %5" PRIu64 "  %12s  %12s  %12s\n", sb_get_str (r, "run_id") ? sb_get_str (r, "run_id") : "?",
                    sb_get_uint (rt, "calls", 0), in, out, cost);
        }
    }
}

int
sb_cmd_usage (int argc, char **argv)
{
    static const char *usage =
        "usage: switchboard usage [SESSION] [--since YYYY-MM-DD] [--json] [--data DIR] [--connect EP]\n\n"
        "Tokens and cost of the model calls of one session (with its runs) or of all sessions,\n"
        "from the totals the server keeps as usage entries are written (docs/usage.md).\n"
        "  SESSION       a session id, a unique prefix of one, or `last` (default: all sessions)\n"
        "  --since DATE  only calls from this UTC day on\n"
        "  --json        one JSON object: calls, input_tokens, output_tokens, cached_input_tokens,\n"
        "                reasoning_tokens, cost_usd (null: unknown), runs, days\n"
        "A total is \"unknown\" when some call did not report it, or when some model had no price.\n"
        "With a SESSION whose budget cannot be enforced (no token counts, no price), a budget\n"
        "line (--json: budget_notice) says so.\n"
        "Exit status: 0 success, 1 the operation failed, 2 usage error.\n";
    static struct option longopts [] = {
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "json", no_argument, 0, 'j' },
        { "since", required_argument, 0, 's' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *connect = NULL, *data = NULL, *since = NULL;
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1)
        switch (c) {
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 'j': json = true; break;
            case 's': since = optarg; break;
            case 'h': fputs (usage, stdout); return 0;
            default: return sb_cli_usage ("usage", "unknown option or missing value: %s", argv [optind - 1]);
        }
    if (argc - optind > 1)
        return sb_cli_usage ("usage", "unexpected argument '%s'", argv [optind + 1]);
    const char *arg = optind < argc ? argv [optind] : NULL;
    int rc;
    if (arg && (rc = sb_cli_id_check ("usage", SB_CLI_SESSION, arg)) != 0)
        return rc;
    sb_bus_t *bus = sb_cli_connect ("usage", connect, data);
    if (!bus)
        return 1;
    char sid [SB_ULID_LEN + 1];
    if (arg && (rc = sb_cli_resolve ("usage", bus, SB_CLI_SESSION, arg, sid)) != 0) {
        sb_bus_destroy (&bus);
        return rc;
    }
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    if (arg)
        sb_enc_kstr (e, "session_id", sid);
    sb_enc_kstr_opt (e, "since", since);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("usage", bus, "session.usage", b, len, 15000);
    rc = 1;
    if (reply) {
        if (json)
            s_print_json (reply->body);
        else
            s_print_text (reply->body);
        rc = 0;
        sb_msg_destroy (&reply);
    }
    sb_enc_destroy (&e);
    sb_bus_destroy (&bus);
    return rc;
}

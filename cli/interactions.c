/*  cli/interactions.c — `interactions`, `interaction ID` and `resolve ID`:
    the approvals that runs wait for, listed, shown and answered
    (docs/approvals.md). */
#include "cli/budget.h"
#include "cli/cli.h"
#include "cli/interactions.h"
#include "common/log.h"
#include "schemas/json.h"
#include "schemas/interaction.h"

#include <ctype.h>
#include <getopt.h>
#include <jansson.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IA_ID_LEN (3 + SB_ULID_LEN)
#define CALL_MS 15000
/*  Ids an ambiguous prefix lists. */
#define MATCHES_SHOWN 10

/* ------------------------------------------------------------------ */
/*  Shared with chat */

void
sb_interaction_who (const char *what, char *out, size_t n)
{
    char host [256] = "";
    if (gethostname (host, sizeof host - 1) != 0)
        snprintf (host, sizeof host, "localhost");
    host [sizeof host - 1] = 0;
    const char *user = getenv ("USER");
    struct passwd *pw = getpwuid (getuid ());
    if (pw && pw->pw_name && *pw->pw_name)
        user = pw->pw_name;
    snprintf (out, n, "%s:%s@%s", what, user && *user ? user : "unknown", host);
}

static const char *
s_jstr (json_t *o, const char *key)
{
    json_t *v = json_is_object (o) ? json_object_get (o, key) : NULL;
    return json_is_string (v) ? json_string_value (v) : NULL;
}

/*  Prints `text` line by line under `prefix`, stopping after max_lines
    (0: all) with a count of what was left out. */
static void
s_lines (FILE *out, const char *prefix, const char *text, int max_lines)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        size_t len = strcspn (p, "\n");
        if (max_lines && n == max_lines) {
            int rest = 0;
            for (const char *q = p; *q; q++)
                rest += *q == '\n';
            fprintf (out, "%s... (%d more line%s)\n", prefix, rest + 1, rest ? "s" : "");
            return;
        }
        fprintf (out, "%s%.*s\n", prefix, (int) len, p);
        n++;
        p += len + (p [len] == '\n');
    }
}

/*  A budget question: which budget, what was spent, its limit. */
static void
s_print_budget (FILE *out, const sb_val_t *ia)
{
    ia_budget_t b = sb_ia_budget_from_name (sb_get_str (ia, "budget"));
    char spent [64], limit [64];
    sb_cli_budget_format (b, sb_get_uint (ia, "spent", 0), spent, sizeof spent);
    sb_cli_budget_format (b, sb_get_uint (ia, "limit", 0), limit, sizeof limit);
    fprintf (out, "  budget    %s: the run spent %s of its %s; it waits before its next model call\n",
             b < IA__BUDGETS ? sb_ia_budget_name (b) : "?", spent, limit);
    fprintf (out, "  approve to go on (the budget is raised by its amount, or by --raise),\n"
                  "  reject to end the run (reason budget; the session's queue pauses)\n");
}

/*  An elicitation: the server's message and each field it asks for, its
    type, choices, default and whether it is required. */
static void
s_print_elicitation (FILE *out, const sb_val_t *ia)
{
    const char *text = sb_get_str (ia, "schema");
    json_t *schema = text ? json_loads (text, 0, NULL) : NULL;
    json_t *req = json_object_get (schema, "required");
    fprintf (out, "  tool      %s asks the person (MCP elicitation):\n", sb_get_str (ia, "tool"));
    s_lines (out, "    ", sb_get_str (ia, "summary") ? sb_get_str (ia, "summary") : "", 0);
    const char *name;
    json_t *p;
    json_object_foreach (json_object_get (schema, "properties"), name, p) {
        bool required = false;
        size_t k;
        json_t *r;
        json_array_foreach (req, k, r)
            required = required || (json_is_string (r) && strcmp (json_string_value (r), name) == 0);
        char *def = json_object_get (p, "default") ? json_dumps (json_object_get (p, "default"), JSON_ENCODE_ANY)
                                                    : NULL;
        char *choices = json_object_get (p, "enum") ? json_dumps (json_object_get (p, "enum"), JSON_COMPACT) : NULL;
        const char *title = s_jstr (p, "title") ? s_jstr (p, "title") : s_jstr (p, "description");
        fprintf (out, "  field     %s: %s%s%s%s%s%s%s%s\n", name, s_jstr (p, "type"), required ? ", required" : "",
                 choices ? ", one of " : "", choices ? choices : "", def ? ", default " : "", def ? def : "",
                 title ? " — " : "", title ? title : "");
        free (def);
        free (choices);
    }
    json_decref (schema);
}

bool
sb_interaction_is_elicitation (const sb_val_t *ia)
{
    const char *kind = sb_get_str (ia, "kind");
    return kind && sb_ia_kind_from_name (kind) == IA_KIND_ELICITATION;
}

bool
sb_interaction_is_budget (const sb_val_t *ia)
{
    const char *kind = sb_get_str (ia, "kind");
    return kind && sb_ia_kind_from_name (kind) == IA_KIND_BUDGET;
}

void
sb_interaction_print_call (FILE *out, const sb_val_t *ia)
{
    if (sb_interaction_is_budget (ia)) {
        s_print_budget (out, ia);
        return;
    }
    if (sb_interaction_is_elicitation (ia)) {
        s_print_elicitation (out, ia);
        return;
    }
    const char *tool = sb_get_str (ia, "tool");
    const char *args = sb_get_str (ia, "arguments");
    const char *diff = sb_get_str (ia, "diff");
    const char *summary = sb_get_str (ia, "summary");
    json_t *j = args ? json_loads (args, JSON_DECODE_ANY, NULL) : NULL;
    fprintf (out, "  tool      %s\n", tool ? tool : "-");
    const char *command = tool && strcmp (tool, "shell") == 0 ? s_jstr (j, "command") : NULL;
    const char *path = s_jstr (j, "path");
    if (command)
        s_lines (out, "  $ ", command, 0);
    else
    if (path)
        fprintf (out, "  path      %s\n", path);
    else
    if (summary)
        fprintf (out, "  summary   %s\n", summary);
    if (diff && *diff)
        s_lines (out, "  ", diff, 0);
    else
    if (tool && strcmp (tool, "write_file") == 0 && s_jstr (j, "content"))
        s_lines (out, "  + ", s_jstr (j, "content"), 0);
    else
    if (tool && strcmp (tool, "edit_file") == 0 && s_jstr (j, "old") && s_jstr (j, "new")) {
        s_lines (out, "  - ", s_jstr (j, "old"), 0);
        s_lines (out, "  + ", s_jstr (j, "new"), 0);
    }
    else
    if (!command) {
        /* another tool (an MCP tool, say): its arguments as they came */
        char *pretty = j ? json_dumps (j, JSON_INDENT (2) | JSON_SORT_KEYS) : NULL;
        fprintf (out, "  arguments\n");
        s_lines (out, "    ", pretty ? pretty : args ? args : "", 0);
        free (pretty);
    }
    json_decref (j);
}

sb_msg_t *
sb_interaction_resolve (sb_bus_t *bus, const char *id, const char *decision, const char *scope,
                        const char *feedback, const char *resolved_by, const char *command_id, uint64_t raise,
                        const char *action, const char *content)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return NULL;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "interaction_id", id);
    sb_enc_kstr (e, "decision", decision);
    sb_enc_kstr_opt (e, "scope", scope);
    if (feedback && *feedback)
        sb_enc_kstr (e, "feedback", feedback);
    sb_enc_kstr_opt (e, "resolved_by", resolved_by);
    sb_enc_kstr_opt (e, "command_id", command_id);
    if (raise)
        sb_enc_kuint (e, "raise", raise);
    sb_enc_kstr_opt (e, "action", action);
    sb_enc_kstr_opt (e, "content", content);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (bus, "interact.resolve", NULL, b, len, CALL_MS);
    sb_enc_destroy (&e);
    return reply;
}

void
sb_interaction_conflict_line (const sb_msg_t *reply, char *out, size_t n)
{
    const sb_val_t *d = sb_get_map (reply->body, "detail");
    const char *status = sb_get_str (d, "status");
    const char *by = sb_get_str (d, "resolved_by");
    if (!status || !by) {
        snprintf (out, n, "%s", sb_msg_error_message (reply));
        return;
    }
    char when [32];
    sb_cli_time_cell (sb_get_uint (d, "resolved_at", 0), when, sizeof when);
    snprintf (out, n, "%s was already %s by %s at %s%s%s", sb_get_str (d, "interaction_id"), status, by, when,
              sb_ia_status_from_name (status) == IA_EXPIRED ? ", decision " : "",
              sb_ia_status_from_name (status) == IA_EXPIRED ? sb_get_str (d, "decision") : "");
}

/* ------------------------------------------------------------------ */
/*  Options */

typedef struct {
    const char *connect, *data;
    const char *session, *run, *status;
    const char *decision, *feedback, *scope;
    const char *raise;          //  --raise AMOUNT, read once the budget is known
    const char *action;         //  an elicitation: --decline, --cancel, --json CONTENT (accept)
    const char *content;        //  --json '{...}': an elicitation's values
    long long limit;
    bool json;
} opts_t;

enum { OPT_FILTERS = 1, OPT_RESOLVE = 2 };

static int
s_parse (const char *cmd, int argc, char **argv, opts_t *o, const char *usage, int takes, int *rest)
{
    static struct option longopts [] = {
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "json", no_argument, 0, 'j' },
        { "session", required_argument, 0, 's' },
        { "run", required_argument, 0, 'r' },
        { "status", required_argument, 0, 'S' },
        { "limit", required_argument, 0, 'n' },
        { "approve", no_argument, 0, 'y' },
        { "reject", no_argument, 0, 'N' },
        { "feedback", required_argument, 0, 'f' },
        { "scope", required_argument, 0, 'o' },
        { "raise", required_argument, 0, 'R' },
        { "decline", no_argument, 0, 'D' },
        { "cancel", no_argument, 0, 'C' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    memset (o, 0, sizeof *o);
    o->limit = -1;
    int c;
    optind = 1;
    bool filter = false, answer = false;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'c': o->connect = optarg; break;
            case 'd': o->data = optarg; break;
            case 'j': o->json = true; break;
            case 's': o->session = optarg; filter = true; break;
            case 'r': o->run = optarg; filter = true; break;
            case 'S': o->status = optarg; filter = true; break;
            case 'n': {
                char *end;
                long long v = strtoll (optarg, &end, 10);
                if (!*optarg || *end || v < 1)
                    return sb_cli_usage (cmd, "--limit takes a number from 1, not '%s'", optarg);
                o->limit = v;
                filter = true;
                break;
            }
            case 'y':
            case 'N':
            case 'D':
            case 'C': {
                const char *d = c == 'y' ? "approve" : "reject";
                const char *a = c == 'D' ? "decline" : c == 'C' ? "cancel" : NULL;
                if ((o->decision && strcmp (o->decision, d) != 0) || (o->action && a && strcmp (o->action, a) != 0))
                    return sb_cli_usage (cmd, "give one answer: --approve, --reject, --decline or --cancel");
                o->decision = d;
                if (a)
                    o->action = a;
                answer = true;
                break;
            }
            case 'f': o->feedback = optarg; answer = true; break;
            case 'o': o->scope = optarg; answer = true; break;
            case 'R': o->raise = optarg; answer = true; break;
            case 'h': fputs (usage, stdout); return -1;
            default: return sb_cli_usage (cmd, "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (filter && !(takes & OPT_FILTERS))
        return sb_cli_usage (cmd, "--session, --run, --status and --limit go with 'interactions'");
    if (answer && !(takes & OPT_RESOLVE))
        return sb_cli_usage (cmd, "--approve, --reject, --decline, --cancel, --feedback, --scope and --raise go "
                             "with 'resolve'");
    if (o->raise && o->decision && sb_ia_decision_from_name (o->decision) != IA_APPROVE)
        return sb_cli_usage (cmd, "--raise goes with --approve (a rejected budget is not raised)");
    if (o->status && sb_ia_status_from_name (o->status) == IA__COUNT)
        return sb_cli_usage (cmd, "--status takes pending, approved, rejected or expired, not '%s'", o->status);
    if (o->scope && sb_ia_scope_from_name (o->scope) == IA__SCOPES)
        return sb_cli_usage (cmd, "--scope takes once, session or always, not '%s'", o->scope);
    int rc;
    if (o->session && (rc = sb_cli_id_check (cmd, SB_CLI_SESSION, o->session)) != 0)
        return rc;
    if (o->run && (rc = sb_cli_id_check (cmd, SB_CLI_RUN, o->run)) != 0)
        return rc;
    *rest = optind;
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Ids */

static sb_msg_t *
s_call (const char *cmd, sb_bus_t *bus, const char *type, sb_enc_t *e)
{
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    return sb_cli_call (cmd, bus, type, b, len, CALL_MS);
}

/*  interact.get of `id`: the reply, or NULL (the error said). */
static sb_msg_t *
s_get (const char *cmd, sb_bus_t *bus, const char *id)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "interaction_id", id);
    sb_enc_map_close (e);
    sb_msg_t *reply = s_call (cmd, bus, "interact.get", e);
    sb_enc_destroy (&e);
    return reply;
}

/*  An interaction as people name it, into out: the full id (used as it
    is, whatever it holds: the server says whether it exists), any unique
    prefix of one, with or without "ia_", in either case, or `last` (the
    newest). Returns 0; 1 when none matches or the call failed; 2 when a
    prefix is ambiguous (the matches are listed). */
static int
s_resolve_id (const char *cmd, sb_bus_t *bus, const char *arg, char *out, size_t n)
{
    bool last = strcmp (arg, "last") == 0;
    char upper [64];
    const char *u = strncasecmp (arg, "ia_", 3) == 0 ? arg + 3 : arg;
    size_t k = 0;
    for (; u [k] && k + 1 < sizeof upper; k++)
        upper [k] = (char) toupper ((unsigned char) u [k]);
    upper [k] = 0;
    bool prefix = !last && k < SB_ULID_LEN && k > 0 && sb_ulid_prefix_valid (upper);
    if (!last && !prefix) {
        /* a whole id, or something that is no id: the server answers */
        if (k == SB_ULID_LEN && sb_ulid_valid (upper))
            snprintf (out, n, "ia_%s", upper);
        else
            snprintf (out, n, "%s", arg);
        return 0;
    }
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    if (prefix)
        sb_enc_kstr (e, "id_prefix", upper);
    sb_enc_kuint (e, "limit", last ? 1 : MATCHES_SHOWN + 1);
    sb_enc_map_close (e);
    sb_msg_t *reply = s_call (cmd, bus, "interact.list", e);
    sb_enc_destroy (&e);
    if (!reply)
        return 1;
    const sb_val_t *list = sb_get_array (reply->body, "interactions");
    uint32_t count = list ? list->len : 0;
    int rc = 0;
    if (count == 0)
        rc = last ? sb_cli_fail_code (cmd, "not_found", "there is no interaction yet, so 'last' names none")
                  : sb_cli_fail_code (cmd, "not_found", "no interaction id starts with ia_%s", upper);
    else
    if (count == 1 || last)
        snprintf (out, n, "%s", sb_get_str (sb_array_at (list, 0), "interaction_id"));
    else {
        char msg [4096];
        size_t w = (size_t) snprintf (msg, sizeof msg, "interaction id prefix ia_%s is ambiguous; it matches:", upper);
        for (uint32_t i = 0; i < count && i < MATCHES_SHOWN && w < sizeof msg; i++) {
            const sb_val_t *r = sb_array_at (list, i);
            w += (size_t) snprintf (msg + w, sizeof msg - w, "\n  %s  %-8s  %s", sb_get_str (r, "interaction_id"),
                                    sb_get_str (r, "status"), sb_get_str (r, "tool"));
        }
        if (count > MATCHES_SHOWN && w < sizeof msg)
            snprintf (msg + w, sizeof msg - w, "\n  ... and more");
        sb_cli_fail_code (cmd, "usage", "%s", msg);
        rc = 2;
    }
    sb_msg_destroy (&reply);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Printing */

/*  "in 14m 3s" / "3s ago" for a deadline. */
static void
s_relative (uint64_t at, char *out, size_t n)
{
    int64_t d = ((int64_t) at - (int64_t) sb_now_ms ()) / 1000;
    int64_t a = d < 0 ? -d : d;
    char span [48];
    if (a >= 3600)
        snprintf (span, sizeof span, "%lldh %lldm", (long long) (a / 3600), (long long) (a % 3600 / 60));
    else
    if (a >= 60)
        snprintf (span, sizeof span, "%lldm %llds", (long long) (a / 60), (long long) (a % 60));
    else
        snprintf (span, sizeof span, "%llds", (long long) a);
    snprintf (out, n, d >= 0 ? "in %s" : "%s ago", span);
}

#define ROW_FORMAT "%-29s  %-8s  %-12s  %-26s  %-16s  %s\n"

static void
s_print_row (const sb_val_t *ia)
{
    char created [32], text [256], what [512];
    sb_cli_time_cell (sb_get_uint (ia, "created_at", 0), created, sizeof created);
    const char *status = sb_get_str (ia, "status");
    const char *summary = sb_get_str (ia, "summary");
    if (status && sb_ia_status_from_name (status) != IA_PENDING)
        snprintf (what, sizeof what, "%s by %s%s%s", status, sb_get_str (ia, "resolved_by"),
                  summary ? ": " : "", summary ? summary : "");
    else
        snprintf (what, sizeof what, "%s", summary ? summary : sb_get_str (ia, "arguments"));
    /* an elicitation: the fields it asks for, after its message */
    json_t *schema = sb_interaction_is_elicitation (ia) && sb_get_str (ia, "schema")
                   ? json_loads (sb_get_str (ia, "schema"), 0, NULL) : NULL;
    const char *name, *sep = " [";
    json_t *p;
    size_t n = strlen (what);
    json_object_foreach (json_object_get (schema, "properties"), name, p) {
        if (n >= sizeof what)
            break;
        n += (size_t) snprintf (what + n, sizeof what - n, "%s%s", sep, name);
        sep = ", ";
    }
    if (schema && n < sizeof what)
        snprintf (what + n, sizeof what - n, "]");
    json_decref (schema);
    sb_cli_text_cell (what, 70, text, sizeof text);
    printf (ROW_FORMAT, sb_get_str (ia, "interaction_id"), status, sb_get_str (ia, "tool"),
            sb_get_str (ia, "session_id"), created, text);
}

static void
s_print_one (const sb_val_t *ia)
{
    char when [32], rel [64];
    const char *status = sb_get_str (ia, "status");
    if (!status)
        status = "-";
    bool pending = sb_ia_status_from_name (status) == IA_PENDING;
    uint64_t deadline = sb_get_uint (ia, "deadline_at", 0);
    printf ("interaction %s\n", sb_get_str (ia, "interaction_id"));
    printf ("status      %s\n", status);
    if (pending) {
        if (deadline) {
            s_relative (deadline, rel, sizeof rel);
            sb_cli_time_cell (deadline, when, sizeof when);
            printf ("deadline    %s (%s), then %s\n", when, rel, sb_get_str (ia, "default_outcome"));
        }
        else
            printf ("deadline    none\n");
    }
    else {
        sb_cli_time_cell (sb_get_uint (ia, "resolved_at", 0), when, sizeof when);
        printf ("decision    %s (scope %s)\n", sb_get_str (ia, "decision"), sb_get_str (ia, "scope"));
        if (sb_get_str (ia, "action"))
            printf ("action      %s%s%s\n", sb_get_str (ia, "action"), sb_get_str (ia, "content") ? " " : "",
                    sb_get_str (ia, "content") ? sb_get_str (ia, "content") : "");
        printf ("resolved by %s at %s\n", sb_get_str (ia, "resolved_by"), when);
        if (sb_get_str (ia, "feedback"))
            printf ("feedback    %s\n", sb_get_str (ia, "feedback"));
    }
    printf ("session     %s\nrun         %s\ncall        %s\n", sb_get_str (ia, "session_id"),
            sb_get_str (ia, "run_id"), sb_get_str (ia, "call_id"));
    sb_cli_time_cell (sb_get_uint (ia, "created_at", 0), when, sizeof when);
    printf ("asked       %s\n", when);
    if (sb_get_str (ia, "risk"))
        printf ("risk        %s\n", sb_get_str (ia, "risk"));
    if (sb_get_str (ia, "summary"))
        printf ("summary     %s\n", sb_get_str (ia, "summary"));
    printf ("\n");
    sb_interaction_print_call (stdout, ia);
    if (pending && sb_interaction_is_elicitation (ia))
        printf ("\nanswer with: switchboard resolve %s --json '{\"FIELD\": VALUE, ...}'|--decline|--cancel\n",
                sb_get_str (ia, "interaction_id"));
    else
    if (pending)
        printf ("\nanswer with: switchboard resolve %s --approve|--reject [--feedback TEXT]%s\n",
                sb_get_str (ia, "interaction_id"), sb_interaction_is_budget (ia) ? " [--raise AMOUNT]" : "");
}

/* ------------------------------------------------------------------ */
/*  Commands */

#define COMMON_HELP \
    "  --connect EP  the server's bus (default: ipc in the data folder)\n" \
    "  --data DIR    the data folder\n" \
    "\n" \
    "Exit status: 0 success, 1 the operation failed (not found, conflict, no\n" \
    "server), 2 usage error.\n"

#define ID_HELP \
    "ID is an interaction id (ia_ and a ULID), any unique prefix of one (with or\n" \
    "without ia_), or 'last' (the newest).\n"

int
sb_cmd_interactions (int argc, char **argv)
{
    static const char *usage =
        "usage: switchboard interactions [--session S] [--run R]\n"
        "                                [--status pending|approved|rejected|expired]\n"
        "                                [--limit N] [--json] [--connect EP] [--data DIR]\n\n"
        "Lists interactions (the approvals runs ask for), newest first; --json prints\n"
        "one JSON object per line.\n"
        "\n"
        "  --session S   only that session's: an id, a unique prefix, or 'last'\n"
        "  --run R       only that run's: an id, a unique prefix, or 'last'\n"
        "  --status X    only those in status X\n"
        "  --limit N     at most N (default: all)\n"
        COMMON_HELP;
    opts_t o;
    int rest, rc = s_parse ("interactions", argc, argv, &o, usage, OPT_FILTERS, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (rest < argc)
        return sb_cli_usage ("interactions", "unexpected argument '%s'", argv [rest]);
    sb_bus_t *bus = sb_cli_connect ("interactions", o.connect, o.data);
    if (!bus)
        return 1;
    char sid [SB_ULID_LEN + 1], rid [SB_ULID_LEN + 1];
    if ((o.session && (rc = sb_cli_resolve ("interactions", bus, SB_CLI_SESSION, o.session, sid)) != 0)
    ||  (o.run && (rc = sb_cli_resolve ("interactions", bus, SB_CLI_RUN, o.run, rid)) != 0)) {
        sb_bus_destroy (&bus);
        return rc;
    }
    sb_enc_t *e = sb_enc_new ();
    uint32_t page = sb_cli_page_max ("interact.list");
    char cursor [64] = "";
    long long printed = 0;
    rc = 0;
    do {
        sb_enc_reset (e);
        sb_enc_map_open (e);
        if (o.session)
            sb_enc_kstr (e, "session_id", sid);
        if (o.run)
            sb_enc_kstr (e, "run_id", rid);
        sb_enc_kstr_opt (e, "status", o.status);
        if (page)
            sb_enc_kuint (e, "limit", o.limit > 0 && o.limit - printed < page ? (uint64_t) (o.limit - printed) : page);
        if (cursor [0])
            sb_enc_kstr (e, "cursor", cursor);
        sb_enc_map_close (e);
        sb_msg_t *reply = s_call ("interactions", bus, "interact.list", e);
        if (!reply) {
            rc = 1;
            break;
        }
        const sb_val_t *list = sb_get_array (reply->body, "interactions");
        for (uint32_t k = 0; list && k < list->len && (o.limit < 0 || printed < o.limit); k++) {
            if (o.json)
                sb_cli_print_json (sb_array_at (list, k));
            else {
                if (printed == 0)
                    printf (ROW_FORMAT, "INTERACTION", "STATUS", "TOOL", "SESSION", "ASKED", "CALL OR ANSWER");
                s_print_row (sb_array_at (list, k));
            }
            printed++;
        }
        const char *next = sb_get_str (reply->body, "next_cursor");
        snprintf (cursor, sizeof cursor, "%s", next ? next : "");
        sb_msg_destroy (&reply);
    } while (cursor [0] && (o.limit < 0 || printed < o.limit));
    sb_enc_destroy (&e);
    sb_bus_destroy (&bus);
    if (rc == 0 && printed == 0 && !o.json)
        fprintf (stderr, "no interactions%s%s\n", o.status ? " with status " : "", o.status ? o.status : "");
    fflush (stdout);
    return rc;
}

int
sb_cmd_interaction (int argc, char **argv)
{
    static const char *usage =
        "usage: switchboard interaction ID [--json] [--connect EP] [--data DIR]\n\n"
        "Shows one interaction: its status, who answered it and when, its deadline,\n"
        "and the tool call it is about (the shell command, or the diff a file tool\n"
        "would make). --json prints the record as one JSON document.\n"
        ID_HELP
        COMMON_HELP;
    opts_t o;
    int rest, rc = s_parse ("interaction", argc, argv, &o, usage, 0, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (argc - rest != 1)
        return sb_cli_usage ("interaction", "give one interaction ID");
    sb_bus_t *bus = sb_cli_connect ("interaction", o.connect, o.data);
    if (!bus)
        return 1;
    char id [160];
    if ((rc = s_resolve_id ("interaction", bus, argv [rest], id, sizeof id)) != 0) {
        sb_bus_destroy (&bus);
        return rc;
    }
    sb_msg_t *reply = s_get ("interaction", bus, id);
    rc = 1;
    if (reply) {
        const sb_val_t *ia = sb_get_map (reply->body, "interaction");
        if (o.json)
            sb_cli_print_json (ia);
        else
            s_print_one (ia);
        rc = 0;
        sb_msg_destroy (&reply);
    }
    sb_bus_destroy (&bus);
    return rc;
}

/*  A conflict under --json: the error object carries the detail too, so
    a script learns who answered first. */
static void
s_print_conflict (const sb_msg_t *reply)
{
    if (!sb_cli_json_errors) {
        char line [1024];
        sb_interaction_conflict_line (reply, line, sizeof line);
        fprintf (stderr, "switchboard resolve: conflict: %s\n", line);
        return;
    }
    json_t *detail = sb_json_from_val (sb_get (reply->body, "detail"));
    json_t *o = json_pack ("{s:{s:s,s:s,s:o*}}", "error", "code", "conflict", "message",
                           sb_msg_error_message (reply), "detail", detail);
    char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
    fprintf (stderr, "%s\n", text ? text : "{\"error\":{\"code\":\"conflict\",\"message\":\"\"}}");
    free (text);
    json_decref (o);
}

/*  --raise AMOUNT in the unit of the budget interaction `id` asks about
    (interact.get tells which), into *out. 0, or the exit code. */
static int
s_raise_amount (sb_bus_t *bus, const char *id, const char *text, uint64_t *out)
{
    sb_msg_t *reply = s_get ("resolve", bus, id);
    if (!reply)
        return 1;
    const sb_val_t *ia = sb_get_map (reply->body, "interaction");
    int rc = 0;
    if (!sb_interaction_is_budget (ia))
        rc = sb_cli_usage ("resolve", "--raise answers a budget question; %s asks about a %s call", id,
                           sb_get_str (ia, "tool") ? sb_get_str (ia, "tool") : "tool");
    else
    if (sb_cli_budget_parse ("resolve", "--raise", sb_ia_budget_from_name (sb_get_str (ia, "budget")), text, out))
        rc = 2;
    else
    if (*out == 0)
        rc = sb_cli_usage ("resolve", "--raise takes an amount above 0");
    sb_msg_destroy (&reply);
    return rc;
}

int
sb_cmd_resolve (int argc, char **argv)
{
    static const char *usage =
        "usage: switchboard resolve ID --approve|--reject [--feedback TEXT] [--raise AMOUNT]\n"
        "                          [--scope once|session|always] [--json] [--connect EP] [--data DIR]\n"
        "       switchboard resolve ID --json '{...}'|--decline|--cancel   (an elicitation)\n\n"
        "Answers an interaction that a run waits for. The first answer wins: when\n"
        "someone (another terminal, a browser, the deadline) answered first, this\n"
        "prints who did and exits 1 (conflict). The answer is signed cli:USER@HOST.\n"
        ID_HELP
        "\n"
        "  --approve        let the tool call run (a budget question: the run goes on)\n"
        "  --reject         refuse it; the model is told, with the feedback (a budget\n"
        "                   question: the run ends, reason budget)\n"
        "  --raise AMOUNT   a budget question approved: raise the budget by AMOUNT in\n"
        "                   its unit (tokens, dollars such as 2.50, steps, minutes;\n"
        "                   default: the budget's own amount again)\n"
        "  --json '{...}'   an elicitation (an MCP server asks for values): accept with\n"
        "                   these values, checked against its schema, whose defaults\n"
        "                   fill the rest (--approve alone: every default)\n"
        "  --decline        an elicitation: say no to the server\n"
        "  --cancel         an elicitation: answer nothing (the server hears cancel)\n"
        "  --feedback TEXT  words for the model (why, or what to do instead)\n"
        "  --scope S        once (default): this call only; session: identical calls\n"
        "                   in this session too; always: stored as a rule on the session\n"
        "  --json           print the resolved interaction as one JSON document\n"
        COMMON_HELP;
    /* --json '{...}': an elicitation's values (and the reply in JSON);
       moved past the arguments the options are read from, --json alone
       taking none (moved, not dropped: the caller frees every string of
       the array it gave) */
    char *content = NULL;
    for (int k = 1; k + 1 < argc; k++)
        if (strcmp (argv [k], "--json") == 0 && argv [k + 1][0] == '{') {
            content = argv [k + 1];
            memmove (argv + k + 1, argv + k + 2, (size_t) (argc - k - 2) * sizeof *argv);
            argv [--argc] = content;
            break;
        }
    opts_t o;
    int rest, rc = s_parse ("resolve", argc, argv, &o, usage, OPT_RESOLVE, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (argc - rest != 1)
        return sb_cli_usage ("resolve", "give one interaction ID");
    if (content && o.decision && sb_ia_decision_from_name (o.decision) != IA_APPROVE)
        return sb_cli_usage ("resolve", "--json '{...}' accepts an elicitation: not with --reject, --decline or "
                             "--cancel");
    if (content) {
        o.decision = "approve";
        o.action = "accept";
        o.content = content;
    }
    if (!o.decision)
        return sb_cli_usage ("resolve", "give --approve or --reject (an elicitation: --json '{...}', --decline "
                             "or --cancel)");
    sb_bus_t *bus = sb_cli_connect ("resolve", o.connect, o.data);
    if (!bus)
        return 1;
    char id [160];
    if ((rc = s_resolve_id ("resolve", bus, argv [rest], id, sizeof id)) != 0) {
        sb_bus_destroy (&bus);
        return rc;
    }
    char who [400], cmd_id [40];
    sb_interaction_who ("cli", who, sizeof who);
    char ulid [SB_ULID_LEN + 1];
    sb_ulid_new (ulid);
    snprintf (cmd_id, sizeof cmd_id, "cli-%s", ulid);
    uint64_t raise = 0;
    if (o.raise && (rc = s_raise_amount (bus, id, o.raise, &raise)) != 0) {
        sb_bus_destroy (&bus);
        return rc;
    }
    sb_msg_t *reply = sb_interaction_resolve (bus, id, o.decision, o.scope, o.feedback, who, cmd_id, raise, o.action,
                                              o.content);
    rc = 1;
    if (!reply)
        sb_cli_fail_code ("resolve", "timeout", "no reply to interact.resolve within %d ms: is the server running?",
                          CALL_MS);
    else
    if (sb_msg_is_error (reply) && sb_err_from_name (sb_msg_error_code (reply)) == SB_E_conflict)
        s_print_conflict (reply);
    else
    if (sb_msg_is_error (reply))
        sb_cli_print_error ("resolve", reply);
    else {
        const sb_val_t *ia = sb_get_map (reply->body, "interaction");
        if (o.json)
            sb_cli_print_json (ia);
        else {
            const char *fb = sb_get_str (ia, "feedback");
            printf ("%s %s (scope %s)%s%s\n", sb_get_str (ia, "status"), sb_get_str (ia, "interaction_id"),
                    sb_get_str (ia, "scope"), fb ? ": " : "", fb ? fb : "");
        }
        rc = 0;
    }
    sb_msg_destroy (&reply);
    sb_bus_destroy (&bus);
    return rc;
}

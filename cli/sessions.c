/*  cli/sessions.c — `switchboard sessions` and `switchboard events`.

    sessions: list, show, new, update, close and delete sessions through
    the session service. events: print a session's tape from a cursor, and
    with --follow keep printing it live.

    --follow must print every entry exactly once, in order, although
    pub/sub can drop (at the high-water mark, and before a subscription has
    propagated). So it subscribes first, then replays the tape, and from
    then on trusts only seq: an event at or below the last printed seq is
    dropped, an event past the next one means a gap, filled from the tape,
    and a quiet second asks the tape too, in case the last events of a
    burst were the ones dropped. */
#include "cli/budget.h"
#include "cli/cli.h"
#include "cli/models.h"
#include "cli/transcript.h"
#include "common/log.h"
#include "schemas/json.h"
#include "schemas/approval_policy.h"
#include "schemas/vocab.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CALL_TIMEOUT_MS 10000
#define S_OPT_BUDGET    1000    //  --budget-*'s getopt vals (cli/budget.h)
#define CALL_TRIES      3

static const char *s_sessions_usage =
    "usage: switchboard sessions [list] [--status active|closed] [--limit N] [--json]\n"
    "       switchboard sessions show ID [--json]\n"
    "       switchboard sessions new [--workspace DIR] [--title T] [--provider P] [--model M]\n"
    "                                [--approval yolo|auto|interactive] [--max-steps N] [--mcp A,B]\n"
    "                                [--rule TOOL:PATTERN:ACTION]... [--approval-deadline S]\n"
    "                                [--target local|worker:POOL] [--network|--mcp-sampling on|off]\n"
    "                                [--budget-tokens|-usd|-steps|-minutes N]... [--json]\n"
    "       switchboard sessions update ID [--title T] [--provider P] [--model M]\n"
    "                                [--approval P] [--max-steps N] [--workspace DIR] [--mcp A,B]\n"
    "                                [--clear-rules] [--rule TOOL:PATTERN:ACTION]...\n"
    "                                [--approval-deadline S] [--target local|worker:POOL]\n"
    "                                [--network|--mcp-sampling on|off]\n"
    "                                [--budget-tokens|-usd|-steps|-minutes N]... [--json]\n"
    "       switchboard sessions close ID [--json]\n"
    "       switchboard sessions delete ID [--json]\n"
    "\n"
    "Lists, shows, creates, changes, closes and deletes sessions. A session is a\n"
    "workspace folder with its config and its tape (see 'switchboard events').\n"
    "The list is newest first: model, approval policy, last activity and the\n"
    "first line of the last prompt tell sessions on one folder apart.\n"
    "\n"
    "ID is a session id, any unique prefix of one (as with git hashes), or\n"
    "'last' for the newest session.\n"
    "\n"
    "  --status S        list only active or only closed sessions\n"
    "  --limit N         list at most N sessions, the newest (default: all)\n"
    "  --workspace DIR   an existing folder, stored as its real path\n"
    "                    (new: default the current folder)\n"
    "  --title T         a title (empty clears it, in update)\n"
    "  --provider P      an LLM provider the server has configured\n"
    "  --model M         the model name\n"
    "  --approval P      approval policy: yolo, auto or interactive\n"
    "  --max-steps N     step limit per run, 1 to 10000\n"
    "  --rule T:P:A      an approval rule, appended to the session's (repeatable):\n"
    "                    tool glob T, pattern glob P over the file path (symlinks\n"
    "                    resolved) or the shell command's words (an allow rule\n"
    "                    matches only one plain command; a deny rule any command\n"
    "                    in the line: docs/approvals.md), action A allow, ask or\n"
    "                    deny; the last match wins.\n"
    "                    e.g. --rule 'shell:git *:allow' --rule 'write_file:*.lock:deny'\n"
    "  --clear-rules     update: remove every rule first\n"
    "  --approval-deadline S  seconds a tool call waits for approval before its\n"
    "                    default outcome (reject); 0 waits forever (default: the\n"
    "                    server's, serve --approval-deadline)\n"
    "  --mcp A,B         the MCP servers the session uses, by name (default: all the\n"
    "                    server configures; 'none' for none, 'all' for all again)\n"
    "  --target T        where its runs go: local (this server's exec) or\n"
    "                    worker:POOL (a worker of POOL claims them; docs/workers.md)\n"
    "  --network on|off  whether its tools may reach the network from the sandbox\n"
    "                    (default off: loopback only; docs/sandbox.md)\n"
    "  --mcp-sampling on|off  whether its MCP servers may call its model, each call\n"
    "                    approved by a person first (default off; docs/mcp.md)\n"
    SB_CLI_BUDGET_HELP
    "  --json            one JSON document (list: one JSON object per line)\n"
    "  --connect EP      the server's command endpoint (default: ipc in DATA)\n"
    "  --data DIR        the server's data folder\n"
    "  -h, --help        this help\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed, 2 usage error. With --json\n"
    "an error is {\"error\":{\"code\",\"message\"}} on stderr.\n";

static const char *s_events_usage =
    "usage: switchboard events --session ID [--after N] [--follow] [--json | --text]\n"
    "                          [--connect EP] [--data DIR]\n"
    "\n"
    "Prints a session's tape, one entry per line: seq, time, kind, run and a\n"
    "summary of the body. With --follow it then keeps printing new entries as\n"
    "they are committed, each exactly once and in order, until interrupted.\n"
    "\n"
    "  --session ID      the session: an id, a unique prefix of one, or 'last'\n"
    "  --after N         start after seq N (default 0: from the beginning)\n"
    "  --follow          keep streaming live entries\n"
    "  --json            one JSON object per entry and line\n"
    "  --text            the transcript instead: prompts, the model's text with its\n"
    "                    deltas merged, thinking, tool calls and their results, run\n"
    "                    status, refusals with the command that allows them\n"
    "  --connect EP      the server's command endpoint (default: ipc in DATA)\n"
    "  --data DIR        the server's data folder\n"
    "  -h, --help        this help\n"
    "\n"
    "Exit status: 0 success (or interrupted while following), 1 failure, 2 usage error.\n";

//  --------------------------------------------------------------------------
//  Calls

//  Calls `type` with the encoded body, retrying an `unavailable` answer or
//  a timeout: writes carry a command_id, so a retry never applies twice.
//  Prints one line and returns NULL on failure.
static sb_msg_t *
s_call (const char *cmd, sb_bus_t *bus, const char *type, sb_enc_t *enc)
{
    size_t len;
    const uint8_t *body = sb_enc_data (enc, &len);
    for (int attempt = 1; ; attempt++) {
        sb_msg_t *reply = sb_bus_call (bus, type, NULL, body, len, CALL_TIMEOUT_MS);
        bool retry = !reply || (sb_msg_is_error (reply)
                                && sb_err_from_name (sb_msg_error_code (reply)) == SB_E_unavailable);
        if (retry && attempt < CALL_TRIES) {
            sb_msg_destroy (&reply);
            continue;
        }
        if (!reply) {
            sb_cli_fail_code (cmd, "timeout", "no reply to %s within %d s: is the server running?",
                              type, CALL_TIMEOUT_MS / 1000);
            return NULL;
        }
        if (sb_msg_is_error (reply)) {
            sb_cli_print_error (cmd, reply);
            sb_msg_destroy (&reply);
            return NULL;
        }
        return reply;
    }
}

static void
s_command_id (sb_enc_t *enc)
{
    char id [SB_ULID_LEN + 1];
    sb_ulid_new (id);
    sb_enc_kstr (enc, "command_id", id);
}

//  --------------------------------------------------------------------------
//  Human output

static void
s_time (uint64_t ms, char *out, size_t n, bool with_ms)
{
    time_t t = (time_t) (ms / 1000);
    struct tm tm;
    localtime_r (&t, &tm);
    size_t w = strftime (out, n, with_ms? "%m-%d %H:%M:%S": "%Y-%m-%d %H:%M:%S", &tm);
    if (with_ms && w + 5 <= n)
        snprintf (out + w, n - w, ".%03u", (unsigned) (ms % 1000));
}

static const char *
s_or_dash (const char *s)
{
    return s && *s? s: "-";
}

//  Copies `s` into out as one line: control characters shown as escapes,
//  cut at `max` bytes with an ellipsis.
static void
s_oneline (const char *s, size_t max, char *out, size_t n)
{
    size_t w = 0;
    for (; s && *s && w + 8 < n; s++) {
        if (w >= max) {
            memcpy (out + w, "...", 3);
            w += 3;
            break;
        }
        unsigned char c = (unsigned char) *s;
        if (c == '\n') { out [w++] = '\\'; out [w++] = 'n'; }
        else if (c == '\t') { out [w++] = '\\'; out [w++] = 't'; }
        else if (c == '\r') { out [w++] = '\\'; out [w++] = 'r'; }
        else if (c < 0x20) w += (size_t) snprintf (out + w, n - w, "\\x%02x", c);
        else out [w++] = (char) c;
    }
    out [w] = 0;
}

static void
s_print_record (const sb_val_t *r, const sb_cli_models_t *m)
{
    char created [32], updated [32];
    s_time (sb_get_uint (r, "created_at", 0), created, sizeof created, false);
    s_time (sb_get_uint (r, "updated_at", 0), updated, sizeof updated, false);
    printf ("session    %s\n", s_or_dash (sb_get_str (r, "session_id")));
    printf ("status     %s\n", s_or_dash (sb_get_str (r, "status")));
    printf ("title      %s\n", s_or_dash (sb_get_str (r, "title")));
    printf ("workspace  %s\n", s_or_dash (sb_get_str (r, "workspace")));
    sb_cli_models_print (m, r);
    printf ("approval   %s\n", s_or_dash (sb_get_str (r, "approval_policy")));
    printf ("target     %s\n", sb_get_str (r, "target")? sb_get_str (r, "target"): "local");
    printf ("network    %s\nsampling   %s\n", sb_get_bool (r, "network", false)? "on": "off",
            sb_get_bool (r, "mcp_sampling", false)? "on": "off");
    if (sb_get (r, "max_steps"))
        printf ("max_steps  %llu\n", (unsigned long long) sb_get_uint (r, "max_steps", 0));
    else
        printf ("max_steps  -\n");
    sb_cli_budget_print (r);
    const sb_val_t *labels = sb_get_map (r, "labels");
    const sb_val_t *mcp = sb_get_array (r, "mcp_servers");
    printf ("mcp        %s", mcp ? "" : "all");
    for (uint32_t k = 0; mcp && k < mcp->len; k++)
        printf ("%s%s", k ? ", " : "", sb_array_at (mcp, k)->type == SB_V_STR ? sb_array_at (mcp, k)->v.s : "?");
    printf ("%s\n", mcp && !mcp->len ? "none" : "");
    printf ("labels     ");
    for (uint32_t k = 0; labels && k < labels->len; k++) {
        const sb_val_t *key = sb_map_key (labels, k), *val = sb_map_val (labels, k);
        printf ("%s%s=%s", k? ", ": "", key->type == SB_V_STR? key->v.s: "?",
                val->type == SB_V_STR? val->v.s: "?");
    }
    printf ("%s\n", labels && labels->len? "": "-");
    const sb_val_t *rules = sb_get_array (r, "rules");
    printf ("rules%s\n", rules && rules->len? "": "      -");
    for (uint32_t k = 0; rules && k < rules->len; k++) {
        const sb_val_t *rule = sb_array_at (rules, k);
        char pattern [256];
        s_oneline (sb_get_str (rule, "pattern"), 200, pattern, sizeof pattern);
        printf ("  %3u  %-5s  %-16s  %s\n", k + 1, s_or_dash (sb_get_str (rule, "action")),
                s_or_dash (sb_get_str (rule, "tool")), pattern);
    }
    if (sb_get (r, "approval_deadline_s")) {
        uint64_t d = sb_get_uint (r, "approval_deadline_s", 0);
        if (d)
            printf ("deadline   %llu s (approvals)\n", (unsigned long long) d);
        else
            printf ("deadline   none (approvals wait until answered)\n");
    }
    else
        printf ("deadline   the server's (approvals)\n");
    printf ("last_seq   %llu\n", (unsigned long long) sb_get_uint (r, "last_seq", 0));
    printf ("last_run   %s\n", s_or_dash (sb_get_str (r, "last_run_id")));
    printf ("turn       %s\n", s_or_dash (sb_get_str (r, "turn_status")));
    printf ("created    %s\n", created);
    printf ("updated    %s\n", updated);
}

//  One list row; the columns match `switchboard runs`. The model is the
//  effective PROVIDER/MODEL (cli/models.h).
static void
s_print_row (const sb_val_t *r, int ws_width, const sb_cli_models_t *m)
{
    char activity [32], model [40], prompt [256];
    uint64_t at = sb_get_uint (r, "last_activity_at", 0);
    sb_cli_time_cell (at, activity, sizeof activity);
    sb_cli_models_cell (m, r, 24, model, sizeof model);
    sb_cli_text_cell (sb_get_str (r, "last_prompt"), 60, prompt, sizeof prompt);
    printf ("%-26s  %-6s  %-24s  %-11s  %-16s  %-*s  %s\n", s_or_dash (sb_get_str (r, "session_id")),
            s_or_dash (sb_get_str (r, "status")), model, s_or_dash (sb_get_str (r, "approval_policy")),
            activity, ws_width, s_or_dash (sb_get_str (r, "workspace")), prompt);
}

//  A few words about an entry's body, by kind.
static void
s_summary (const char *kind, const sb_val_t *body, char *out, size_t n)
{
    char a [256], b [256];
    const char *text = sb_get_str (body, "text");
    if (strcmp (kind, "session.created") == 0 || strcmp (kind, "session.updated") == 0
    ||  strcmp (kind, "session.forked") == 0) {
        const sb_val_t *s = sb_get_map (body, "session");
        const sb_val_t *changed = sb_get_array (body, "changed");
        size_t w = (size_t) snprintf (out, n, "%s", changed? "changed": "");
        for (uint32_t k = 0; changed && k < changed->len && w < n; k++) {
            const sb_val_t *c = sb_array_at (changed, k);
            w += (size_t) snprintf (out + w, n - w, "%s%s", k? ",": " ",
                                    c->type == SB_V_STR? c->v.s: "?");
        }
        s_oneline (s_or_dash (sb_get_str (s, "title")), 60, a, sizeof a);
        if (w < n)
            snprintf (out + w, n - w, "%sstatus=%s title=%s workspace=%s", w? "; ": "",
                      s_or_dash (sb_get_str (s, "status")), a, s_or_dash (sb_get_str (s, "workspace")));
    }
    else
    if (strcmp (kind, "tool.call") == 0) {
        s_oneline (sb_get_str (body, "arguments"), 100, a, sizeof a);
        snprintf (out, n, "%s %s", s_or_dash (sb_get_str (body, "name")), a);
    }
    else
    if (strcmp (kind, "tool.result") == 0) {
        s_oneline (sb_get_str (body, "output"), 100, a, sizeof a);
        snprintf (out, n, "%s exit=%lld %s", sb_get_bool (body, "ok", false)? "ok": "failed",
                  (long long) sb_get_int (body, "exit_code", 0), a);
    }
    else
    if (strcmp (kind, "run.status") == 0) {
        s_oneline (sb_get_str (body, "reason"), 100, a, sizeof a);
        snprintf (out, n, "%s%s%s", s_or_dash (sb_get_str (body, "status")), *a? " ": "", a);
    }
    else
    if (strcmp (kind, "error") == 0) {
        s_oneline (sb_get_str (body, "message"), 120, a, sizeof a);
        snprintf (out, n, "%s: %s", s_or_dash (sb_get_str (body, "code")), a);
    }
    else
    if (strcmp (kind, "usage") == 0)
        snprintf (out, n, "in=%llu out=%llu", (unsigned long long) sb_get_uint (body, "input_tokens", 0),
                  (unsigned long long) sb_get_uint (body, "output_tokens", 0));
    else
    if (text) {
        s_oneline (text, 120, b, sizeof b);
        snprintf (out, n, "%s", b);
    }
    else {
        char *j = body? sb_json_dump (body): NULL;
        s_oneline (j? j: "", 120, b, sizeof b);
        snprintf (out, n, "%s", b);
        free (j);
    }
}

//  events --text: the transcript that entries are fed to instead.
static sb_transcript_t *s_transcript;

static void
s_print_event (const sb_val_t *e, bool json)
{
    if (s_transcript) {
        sb_transcript_feed (s_transcript, e);
        return;
    }
    if (json) {
        sb_cli_print_json (e);
        return;
    }
    char when [32], summary [512];
    const char *kind = s_or_dash (sb_get_str (e, "kind"));
    s_time (sb_get_uint (e, "ts", 0), when, sizeof when, true);
    s_summary (kind, sb_get_map (e, "body"), summary, sizeof summary);
    printf ("%6llu  %s  %-18s  %-26s  %s\n", (unsigned long long) sb_get_uint (e, "seq", 0), when,
            kind, s_or_dash (sb_get_str (e, "run_id")), summary);
    fflush (stdout);
}

//  --------------------------------------------------------------------------
//  sessions

typedef struct {
    const char *connect, *data;
    const char *status, *workspace, *title, *provider, *model, *approval, *target;
    const char *mcp;            //  --mcp A,B | none | all
    const char *network, *sampling;     //  --network, --mcp-sampling: on|off
    long long limit;
    unsigned long long max_steps;
    bool json;
    bool has_max_steps;
    bool clear_rules;
    bool has_deadline;
    unsigned long long deadline;
    zlistx_t *rules;            //  --rule values, as given
    sb_cli_budget_t budget;     //  --budget-*
    int config_opts;            //  how many new/update options were given
} opts_t;

//  The workspace as the server will see it: a relative path is made
//  absolute here, because the server's working folder is not ours.
static int
s_absolute (const char *path, char *out, size_t n)
{
    if (path [0] == '/')
        return snprintf (out, n, "%s", path) < (int) n? 0: -1;
    char cwd [PATH_MAX];
    if (!getcwd (cwd, sizeof cwd))
        return -1;
    return snprintf (out, n, "%s/%s", cwd, path) < (int) n? 0: -1;
}

//  Splits TOOL:PATTERN:ACTION: the tool ends at the first colon, the
//  action starts after the last, the pattern (which may hold colons, as
//  a command does) is what lies between.
static int
s_split_rule (const char *text, char *tool, size_t tn, char *pattern, size_t pn, char *action, size_t an)
{
    const char *a = strchr (text, ':'), *b = strrchr (text, ':');
    if (!a || a == b)
        return -1;
    if ((size_t) (a - text) >= tn || (size_t) (b - a - 1) >= pn || strlen (b + 1) >= an)
        return -1;
    snprintf (tool, tn, "%.*s", (int) (a - text), text);
    snprintf (pattern, pn, "%.*s", (int) (b - a - 1), a + 1);
    snprintf (action, an, "%s", b + 1);
    return 0;
}

static int
s_check_rule (const char *text)
{
    char tool [200], pattern [1100], action [32];
    if (s_split_rule (text, tool, sizeof tool, pattern, sizeof pattern, action, sizeof action) != 0)
        return sb_cli_usage ("sessions", "--rule takes TOOL:PATTERN:ACTION (e.g. 'shell:git *:allow'), not '%s'",
                             text);
    //  the server checks the globs' lengths (docs/approvals.md)
    if (!*tool || !*pattern)
        return sb_cli_usage ("sessions", "--rule '%s': the tool and the pattern must not be empty", text);
    if (sb_policy_action_from_name (action) == SB_POLICY__ACTIONS)
        return sb_cli_usage ("sessions", "--rule '%s': the action must be allow, ask or deny", text);
    return 0;
}

static void
s_enc_rules (sb_enc_t *enc, const opts_t *o, bool create)
{
    if (o->clear_rules && !create) {
        sb_enc_key (enc, "rules");
        sb_enc_array_open (enc);
        sb_enc_array_close (enc);
    }
    if (!o->rules || zlistx_size (o->rules) == 0)
        return;
    sb_enc_key (enc, create? "rules": "add_rules");
    sb_enc_array_open (enc);
    for (const char *text = zlistx_first (o->rules); text; text = zlistx_next (o->rules)) {
        char tool [200], pattern [1100], action [32];
        if (s_split_rule (text, tool, sizeof tool, pattern, sizeof pattern, action, sizeof action) != 0)
            continue;           //  checked when parsed
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "tool", tool);
        sb_enc_kstr (enc, "pattern", pattern);
        sb_enc_kstr (enc, "action", action);
        sb_enc_map_close (enc);
    }
    sb_enc_array_close (enc);
}

static void
s_enc_config (sb_enc_t *enc, const opts_t *o, const char *workspace)
{
    sb_enc_kstr_opt (enc, "workspace", workspace);
    sb_enc_kstr_opt (enc, "title", o->title);
    sb_enc_kstr_opt (enc, "provider", o->provider);
    sb_enc_kstr_opt (enc, "model", o->model);
    sb_enc_kstr_opt (enc, "approval_policy", o->approval);
    sb_enc_kstr_opt (enc, "target", o->target);
    if (o->has_max_steps)
        sb_enc_kuint (enc, "max_steps", o->max_steps);
    if (o->has_deadline)
        sb_enc_kuint (enc, "approval_deadline_s", o->deadline);
    if (o->network) sb_enc_kbool (enc, "network", strcmp (o->network, "on") == 0);
    if (o->sampling) sb_enc_kbool (enc, "mcp_sampling", strcmp (o->sampling, "on") == 0);
    sb_cli_budget_encode (enc, &o->budget);
    if (o->mcp) {
        //  "all" is ["*"] on the wire, "none" an empty list
        sb_enc_key (enc, "mcp_servers");
        sb_enc_array_open (enc);
        if (strcmp (o->mcp, "all") == 0)
            sb_enc_str (enc, "*");
        else
        if (strcmp (o->mcp, "none") != 0)
            for (const char *p = o->mcp; *p; ) {
                size_t n = strcspn (p, ",");
                if (n)
                    sb_enc_strn (enc, p, n);
                p += n + (p [n] == ',');
            }
        sb_enc_array_close (enc);
    }
}

//  Newest first, and --limit N the newest N: session.list pages newest
//  first, so only the pages needed are fetched. They are all in hand
//  before the first row is printed, to size the workspace column.
static int
s_sessions_list (sb_bus_t *bus, const opts_t *o)
{
    zlistx_t *pages = zlistx_new ();
    zlistx_set_destructor (pages, (czmq_destructor *) sb_msg_destroy);
    sb_enc_t *enc = sb_enc_new ();
    uint32_t page = sb_cli_page_max ("session.list");
    char cursor [SB_ULID_LEN + 1] = "";
    size_t count = 0;
    int rc = 0;
    do {
        sb_enc_reset (enc);
        sb_enc_map_open (enc);
        sb_enc_kstr_opt (enc, "status", o->status);
        if (page)
            sb_enc_kuint (enc, "limit", page);
        if (cursor [0])
            sb_enc_kstr (enc, "cursor", cursor);
        sb_enc_map_close (enc);
        sb_msg_t *reply = s_call ("sessions", bus, "session.list", enc);
        if (!reply) {
            rc = 1;
            break;
        }
        const char *next = sb_get_str (reply->body, "next_cursor");
        const sb_val_t *list = sb_get_array (reply->body, "sessions");
        snprintf (cursor, sizeof cursor, "%s", next? next: "");
        count += list? list->len: 0;
        zlistx_add_end (pages, reply);
    } while (cursor [0] && (o->limit < 0 || count < (size_t) o->limit));
    sb_enc_destroy (&enc);

    size_t n = 0;
    const sb_val_t **all = calloc (count? count: 1, sizeof *all);
    if (!all)
        rc = sb_cli_fail ("sessions", "out of memory");
    for (sb_msg_t *reply = zlistx_first (pages); all && reply; reply = zlistx_next (pages)) {
        const sb_val_t *list = sb_get_array (reply->body, "sessions");
        for (uint32_t k = 0; list && k < list->len; k++)
            all [n++] = sb_array_at (list, k);
    }
    //  The workspace column is as wide as the widest path listed, so that
    //  the prompts line up.
    int ws_width = (int) strlen ("WORKSPACE");
    for (size_t k = 0; k < n && (o->limit < 0 || (long long) k < o->limit); k++) {
        const char *ws = sb_get_str (all [k], "workspace");
        if (ws && (int) strlen (ws) > ws_width)
            ws_width = (int) strlen (ws);
    }
    sb_cli_models_t models = { .known = false };
    if (!o->json)
        sb_cli_models_load (bus, &models, 3000);
    long long printed = 0;
    for (size_t k = 0; rc == 0 && k < n && (o->limit < 0 || printed < o->limit); k++) {
        if (o->json)
            sb_cli_print_json (all [k]);
        else {
            if (printed == 0)
                printf ("%-26s  %-6s  %-24s  %-11s  %-16s  %-*s  %s\n", "SESSION", "STATUS", "MODEL",
                        "POLICY", "LAST ACTIVITY", ws_width, "WORKSPACE", "LAST PROMPT");
            s_print_row (all [k], ws_width, &models);
        }
        printed++;
    }
    free (all);
    zlistx_destroy (&pages);
    if (rc == 0 && printed == 0 && !o->json)
        fprintf (stderr, "no sessions%s%s\n", o->status? " with status ": "", o->status? o->status: "");
    fflush (stdout);
    return rc;
}

//  A provider the server has not configured would fail only at the first
//  prompt, far from the command that named it: llm.models tells now.
static int
s_check_provider (sb_bus_t *bus, const char *provider)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "provider", provider);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *body = sb_enc_data (enc, &len);
    sb_msg_t *reply = sb_bus_call (bus, "llm.models", NULL, body, len, CALL_TIMEOUT_MS);
    int rc = 0;
    if (reply && sb_msg_is_error (reply)
    &&  sb_err_from_name (sb_msg_error_code (reply)) == SB_E_not_found) {
        //  The server's message lists the providers it has configured.
        rc = sb_cli_fail_code ("sessions", "not_found", "%s (serve --llm or --providers FILE configures "
                               "providers; see docs/llm.md)", sb_msg_error_message (reply));
    }
    //  Any other answer (the provider's own error, no llm service to ask)
    //  means the name is known or cannot be checked: the prompt will tell.
    sb_msg_destroy (&reply);
    sb_enc_destroy (&enc);
    return rc;
}

//  show, new, update, close, delete: one call, one object printed.
static int
s_sessions_one (sb_bus_t *bus, const char *sub, const char *arg, const opts_t *o)
{
    char workspace [PATH_MAX + 1];
    if (o->workspace && s_absolute (o->workspace, workspace, sizeof workspace) != 0)
        return sb_cli_fail ("sessions", "workspace %s: path too long", o->workspace);
    if (!o->workspace && strcmp (sub, "new") == 0 && !getcwd (workspace, sizeof workspace))
        return sb_cli_fail ("sessions", "cannot read the current folder: %s", strerror (errno));
    bool create = strcmp (sub, "new") == 0;
    char id [SB_ULID_LEN + 1];
    int rc;
    if (arg && (rc = sb_cli_resolve ("sessions", bus, SB_CLI_SESSION, arg, id)) != 0)
        return rc;
    if (o->provider && *o->provider && (rc = s_check_provider (bus, o->provider)) != 0)
        return rc;
    const char *type = strcmp (sub, "show") == 0? "session.get":
                       create? "session.create":
                       strcmp (sub, "update") == 0? "session.update":
                       strcmp (sub, "close") == 0? "session.close": "session.delete";
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    if (arg)
        sb_enc_kstr (enc, "session_id", id);
    if (create || strcmp (sub, "update") == 0) {
        s_enc_config (enc, o, o->workspace || create? workspace: NULL);
        s_enc_rules (enc, o, create);
    }
    if (strcmp (sub, "show") != 0)
        s_command_id (enc);
    sb_enc_map_close (enc);
    sb_msg_t *reply = s_call ("sessions", bus, type, enc);
    sb_enc_destroy (&enc);
    if (!reply)
        return 1;
    const sb_val_t *r = sb_get_map (reply->body, "session");
    if (o->json)
        sb_cli_print_json (r? r: reply->body);
    else
    if (strcmp (sub, "delete") == 0)
        printf ("deleted session %s and its %llu events\n", id,
                (unsigned long long) sb_get_uint (reply->body, "deleted_events", 0));
    else
    if (strcmp (sub, "close") == 0)
        printf ("closed session %s at seq %llu\n", id, (unsigned long long) sb_get_uint (r, "last_seq", 0));
    else {
        sb_cli_models_t models;
        sb_cli_models_load (bus, &models, 3000);
        s_print_record (r, &models);
    }
    fflush (stdout);
    sb_msg_destroy (&reply);
    return 0;
}

//  The options of sessions into *o. Returns -1 to go on, or the exit code
//  (0 after --help).
static int
s_sessions_parse (int argc, char **argv, opts_t *o)
{
    static struct option longopts [] = {
        { "status", required_argument, 0, 's' },
        { "limit", required_argument, 0, 'n' },
        { "workspace", required_argument, 0, 'w' },
        { "title", required_argument, 0, 't' },
        { "provider", required_argument, 0, 'p' },
        { "model", required_argument, 0, 'm' },
        { "approval", required_argument, 0, 'a' },
        { "max-steps", required_argument, 0, 'x' },
        { "target", required_argument, 0, 'T' },
        { "rule", required_argument, 0, 'r' },
        { "clear-rules", no_argument, 0, 'R' },
        { "approval-deadline", required_argument, 0, 'D' },
        { "mcp", required_argument, 0, 'M' },
        { "network", required_argument, 0, 'N' },
        { "mcp-sampling", required_argument, 0, 'S' },
        SB_CLI_BUDGET_OPTS (S_OPT_BUDGET),
        { "json", no_argument, 0, 'j' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    unsigned long long v;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        if (c >= S_OPT_BUDGET && c < S_OPT_BUDGET + IA__BUDGETS) {
            if (sb_cli_budget_opt ("sessions", c - S_OPT_BUDGET, optarg, &o->budget))
                return 2;
            o->config_opts++;
            continue;
        }
        switch (c) {
            case 's': o->status = optarg; break;
            case 'n':
                if (sb_cli_parse_uint ("sessions", "--limit", optarg, LLONG_MAX, &v))
                    return 2;
                o->limit = (long long) v;
                break;
            case 'w': o->workspace = optarg; o->config_opts++; break;
            case 't': o->title = optarg; o->config_opts++; break;
            case 'p': o->provider = optarg; o->config_opts++; break;
            case 'm': o->model = optarg; o->config_opts++; break;
            case 'a': o->approval = optarg; o->config_opts++; break;
            case 'T': o->target = optarg; o->config_opts++; break;
            case 'x':
                if (sb_cli_parse_uint ("sessions", "--max-steps", optarg, 10000, &o->max_steps))
                    return 2;
                o->has_max_steps = true;
                o->config_opts++;
                break;
            case 'r':
                if (s_check_rule (optarg))
                    return 2;
                zlistx_add_end (o->rules, optarg);
                o->config_opts++;
                break;
            case 'R': o->clear_rules = true; o->config_opts++; break;
            case 'D':
                if (sb_cli_parse_uint ("sessions", "--approval-deadline", optarg, 604800, &o->deadline))
                    return 2;
                o->has_deadline = true;
                o->config_opts++;
                break;
            case 'M':
                if (sb_cli_mcp_names_check ("sessions", optarg))
                    return 2;
                o->mcp = optarg;
                o->config_opts++;
                break;
            case 'N':
            case 'S':
                if (strcmp (optarg, "on") != 0 && strcmp (optarg, "off") != 0)
                    return sb_cli_usage ("sessions", "--%s takes on or off, not '%s'",
                                         c == 'N' ? "network" : "mcp-sampling", optarg);
                *(c == 'N' ? &o->network : &o->sampling) = optarg;
                o->config_opts++;
                break;
            case 'j': o->json = true; break;
            case 'c': o->connect = optarg; break;
            case 'd': o->data = optarg; break;
            case 'h': fputs (s_sessions_usage, stdout); return 0;
            default: return sb_cli_usage ("sessions", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    return -1;
}

//  Whether the options go with the subcommand `sub` and hold values it
//  takes (`id` the session it names, or NULL). Returns 0, or the exit code.
static int
s_sessions_check (const opts_t *o, const char *sub, const char *id)
{
    bool list = strcmp (sub, "list") == 0, create = strcmp (sub, "new") == 0;
    bool update = strcmp (sub, "update") == 0;
    if (!list && (o->status || o->limit >= 0))
        return sb_cli_usage ("sessions", "--status and --limit go with list only");
    if (o->status && sb_session_status_from_name (o->status) == SB_SESSION__COUNT)
        return sb_cli_usage ("sessions", "--status takes active or closed, not '%s'", o->status);
    if (!create && !update && o->config_opts)
        return sb_cli_usage ("sessions", "--workspace, --title, --provider, --model, --approval, "
                             "--max-steps, --mcp, --rule, --clear-rules, --approval-deadline, --target, "
                             "--network, --mcp-sampling and --budget-* go with new and update only");
    if (create && o->clear_rules)
        return sb_cli_usage ("sessions", "--clear-rules goes with update (a new session has no rules)");
    if (o->target && strcmp (o->target, "local") != 0 && (strncmp (o->target, "worker:", 7) != 0 || !o->target [7]))
        return sb_cli_usage ("sessions", "--target takes local or worker:POOL, not '%s'", o->target);
    //  In update, an empty value clears the field, as for every string.
    if (o->approval && !(update && !*o->approval) && !sb_policy_mode_ok (o->approval))
        return sb_cli_usage ("sessions", "--approval takes yolo, auto or interactive, not '%s'", o->approval);
    int rc;
    if (id && (rc = sb_cli_id_check ("sessions", SB_CLI_SESSION, id)) != 0)
        return rc;
    if (update && o->config_opts == 0)
        return sb_cli_usage ("sessions", "update needs at least one of --title, --provider, --model, "
                             "--approval, --max-steps, --workspace, --mcp, --rule, --clear-rules, "
                             "--approval-deadline, --target, --network, --mcp-sampling, --budget-*");
    if (o->has_max_steps && o->max_steps == 0)
        return sb_cli_usage ("sessions", "--max-steps takes a number from 1 to 10000");
    return 0;
}

//  sessions, with `rules` to hold the --rule values (the caller frees it).
static int
s_sessions (int argc, char **argv, zlistx_t *rules)
{
    opts_t o = { .limit = -1, .rules = rules };
    int rc = s_sessions_parse (argc, argv, &o);
    if (rc >= 0)
        return rc;
    const char *sub = optind < argc? argv [optind++]: "list";
    static const char *const subs [] = { "list", "show", "new", "update", "close", "delete" };
    bool known = false;
    for (size_t k = 0; k < sizeof subs / sizeof subs [0]; k++)
        known |= strcmp (sub, subs [k]) == 0;
    if (!known)
        return sb_cli_usage ("sessions", "unknown subcommand '%s' (list, show, new, update, close, delete)",
                             sub);
    bool list = strcmp (sub, "list") == 0;
    const char *id = NULL;
    if (!list && strcmp (sub, "new") != 0) {
        if (optind >= argc)
            return sb_cli_usage ("sessions", "%s needs a session id", sub);
        id = argv [optind++];
    }
    if (optind < argc)
        return sb_cli_usage ("sessions", "unexpected argument '%s'", argv [optind]);
    if ((rc = s_sessions_check (&o, sub, id)) != 0)
        return rc;

    sb_bus_t *bus = sb_cli_connect ("sessions", o.connect, o.data);
    if (!bus)
        return 1;
    rc = list? s_sessions_list (bus, &o): s_sessions_one (bus, sub, id, &o);
    sb_bus_destroy (&bus);
    return rc;
}

int
sb_cmd_sessions (int argc, char **argv)
{
    zlistx_t *rules = zlistx_new ();
    if (!rules)
        return sb_cli_fail ("sessions", "out of memory");
    int rc = s_sessions (argc, argv, rules);
    zlistx_destroy (&rules);
    return rc;
}

//  --------------------------------------------------------------------------
//  events

static volatile sig_atomic_t s_stop;

static void
s_on_signal (int sig)
{
    (void) sig;
    s_stop = 1;
}

//  Prints the tape after *last, page by page, until the head. Entries at
//  or below *last are dropped. Returns 0, or 1 after printing the error.
static int
s_catch_up (sb_bus_t *bus, const char *sid, uint64_t *last, bool json)
{
    sb_enc_t *enc = sb_enc_new ();
    uint32_t page = sb_cli_page_max ("session.events");
    int rc = 0;
    bool more = true;
    while (more && !s_stop) {
        sb_enc_reset (enc);
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "session_id", sid);
        sb_enc_kuint (enc, "after_seq", *last);
        if (page)
            sb_enc_kuint (enc, "limit", page);
        sb_enc_map_close (enc);
        sb_msg_t *reply = s_call ("events", bus, "session.events", enc);
        if (!reply) {
            rc = 1;
            break;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        for (uint32_t k = 0; events && k < events->len; k++) {
            const sb_val_t *e = sb_array_at (events, k);
            uint64_t seq = sb_get_uint (e, "seq", 0);
            if (seq <= *last)
                continue;
            s_print_event (e, json);
            *last = seq;
        }
        more = sb_get_bool (reply->body, "more", false) && events && events->len > 0;
        sb_msg_destroy (&reply);
    }
    sb_enc_destroy (&enc);
    return rc;
}

//  Streams live events after the replay. Returns the exit code.
static int
s_follow (sb_bus_t *bus, sb_sub_t *sub, const char *sid, uint64_t last, bool json)
{
    char topic [SB_ULID_LEN + 16];
    snprintf (topic, sizeof topic, "session/%s", sid);
    while (!s_stop) {
        sb_msg_t *msg = sb_sub_recv (sub, 1000);
        if (!msg) {
            //  Quiet: the tail of a burst may have been dropped, and no
            //  later event would show the gap.
            uint64_t before = last;
            if (!s_stop && s_catch_up (bus, sid, &last, json) != 0)
                return 1;
            if (last > before)
                sb_debug ("events", "filled a dropped tail from the tape session=%s after=%llu to=%llu",
                          sid, (unsigned long long) before, (unsigned long long) last);
            continue;
        }
        uint64_t seq = sb_get_uint (msg->body, "seq", 0);
        if (strcmp (msg->topic, topic) == 0 && strcmp (msg->h.type, "session.event") == 0
        &&  seq > last) {
            if (seq > last + 1) {
                sb_debug ("events", "gap in the live stream session=%s after=%llu got=%llu; "
                          "filling it from the tape", sid, (unsigned long long) last,
                          (unsigned long long) seq);
                if (s_catch_up (bus, sid, &last, json) != 0) {
                    sb_msg_destroy (&msg);
                    return 1;
                }
            }
            if (seq == last + 1) {
                s_print_event (msg->body, json);
                last = seq;
            }
        }
        sb_msg_destroy (&msg);
    }
    return 0;
}

int
sb_cmd_events (int argc, char **argv)
{
    static struct option longopts [] = {
        { "session", required_argument, 0, 's' },
        { "after", required_argument, 0, 'a' },
        { "follow", no_argument, 0, 'f' },
        { "json", no_argument, 0, 'j' },
        { "text", no_argument, 0, 't' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *sid = NULL, *connect = NULL, *data = NULL;
    unsigned long long after = 0;
    bool follow = false, json = false, text = false;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "hf", longopts, NULL)) != -1) {
        switch (c) {
            case 's': sid = optarg; break;
            case 'a':
                if (sb_cli_parse_uint ("events", "--after", optarg, UINT64_MAX, &after))
                    return 2;
                break;
            case 'f': follow = true; break;
            case 'j': json = true; break;
            case 't': text = true; break;
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 'h': fputs (s_events_usage, stdout); return 0;
            default: return sb_cli_usage ("events", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (optind < argc)
        return sb_cli_usage ("events", "unexpected argument '%s'", argv [optind]);
    if (!sid)
        return sb_cli_usage ("events", "which session? (--session ID)");
    if (json && text)
        return sb_cli_usage ("events", "--json and --text do not go together");
    int rc = sb_cli_id_check ("events", SB_CLI_SESSION, sid);
    if (rc)
        return rc;
    sb_bus_t *bus = sb_cli_connect ("events", connect, data);
    if (!bus)
        return 1;
    char full [SB_ULID_LEN + 1];
    if ((rc = sb_cli_resolve ("events", bus, SB_CLI_SESSION, sid, full)) != 0) {
        sb_bus_destroy (&bus);
        return rc;
    }
    sid = full;

    //  czmq's own handler would swallow Ctrl-C; ours ends the loop cleanly.
    zsys_handler_set (NULL);
    struct sigaction sa = { .sa_handler = s_on_signal };
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);

    sb_sub_t *sub = NULL;
    if (follow) {
        //  Subscribe before the replay, so that nothing committed after
        //  the replay's last page can slip between the two.
        char ep [4200], err [512];
        if (sb_cli_endpoint (connect, data, "pub", ep, sizeof ep, err, sizeof err)) {
            sb_bus_destroy (&bus);
            return sb_cli_fail ("events", "%s", err);
        }
        sub = sb_sub_new (ep);
        if (!sub) {
            sb_bus_destroy (&bus);
            return sb_cli_fail ("events", "cannot subscribe at %s", ep);
        }
        char topic [SB_ULID_LEN + 16];
        snprintf (topic, sizeof topic, "session/%s", sid);
        sb_sub_subscribe (sub, topic);
    }
    if (text) {
        //  no status line: this loop wakes once a second at most
        sb_transcript_opts_t topts;
        sb_transcript_opts_stdout (&topts, NULL);
        topts.live = false;
        s_transcript = sb_transcript_new (&topts);
    }
    uint64_t last = after;
    rc = s_catch_up (bus, sid, &last, json);
    if (rc == 0 && follow)
        rc = s_follow (bus, sub, sid, last, json);
    if (s_transcript)
        sb_transcript_flush (s_transcript);
    sb_transcript_destroy (&s_transcript);
    sb_sub_destroy (&sub);
    sb_bus_destroy (&bus);
    return rc;
}

/*  actors/exec/approval.c — the executor's side of approvals
    (actors/exec/approval.h, docs/approvals.md).

    A call the policy asks about becomes an interaction: interact.request
    (idempotent by run and call, so an executor that comes back after a
    restart waits on the same one), then a wait for its resolution. The
    event plane brings approval.resolved within a millisecond or two; the
    poll of interact.get every second covers a dropped event or a
    subscription that had not propagated yet. A cancel while waiting
    resolves the interaction as rejected by "cancel", so nobody is left
    answering a question no run is waiting for.

    Scopes: `session` is remembered in the runtime's policy state (and
    rebuilt from approval.resolved on the tape later); `always` becomes a
    rule on the session, through session.update add_rules, whose pattern
    matches exactly this call.
*/
#include "actors/exec/mcp.h"
#include "actors/exec/approval.h"
#include "actors/exec/diff.h"
#include "actors/exec/policy.h"
#include "actors/exec/tools.h"
#include "common/log.h"
#include "schemas/interaction.h"
#include "schemas/vocab.h"

#include <fnmatch.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/eventfd.h>

#define ACTOR "exec"
#define S_SUMMARY_MAX   4000            //  approval.requested summary: 4 KiB
#define S_DIFF_MAX      (256u * 1024)   //  of the diff shown to a person
#define S_CALL_TRIES    3

struct sb_exec_approval {
    sb_policy_rule_t *rules;    //  strings owned
    size_t nrules, cap;
    bool has_deadline;
    uint64_t deadline_s;
};

//  ---------------------------------------------------------------------
//  Config

static void
s_rules_free (struct sb_exec_approval *a)
{
    for (size_t k = 0; k < a->nrules; k++) {
        free ((char *) a->rules [k].tool);
        free ((char *) a->rules [k].pattern);
    }
    a->nrules = 0;
}

void
sb_exec_approval_free (sb_exec_run_t *run)
{
    if (!run->approval)
        return;
    s_rules_free (run->approval);
    free (run->approval->rules);
    free (run->approval);
    run->approval = NULL;
}

static int
s_rule_add (struct sb_exec_approval *a, const char *tool, const char *pattern, sb_policy_action_t action)
{
    if (a->nrules == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        sb_policy_rule_t *r = realloc (a->rules, cap * sizeof *r);
        if (!r)
            return -1;
        a->rules = r;
        a->cap = cap;
    }
    sb_policy_rule_t r = { strdup (tool), strdup (pattern), action };
    if (!r.tool || !r.pattern) {
        free ((char *) r.tool);
        free ((char *) r.pattern);
        return -1;
    }
    a->rules [a->nrules++] = r;
    return 0;
}

int
sb_exec_approval_configure (sb_exec_run_t *run, const sb_val_t *session)
{
    if (!run->approval && !(run->approval = calloc (1, sizeof *run->approval)))
        return -1;
    struct sb_exec_approval *a = run->approval;
    s_rules_free (a);
    const sb_val_t *rules = sb_get_array (session, "rules");
    for (uint32_t k = 0; rules && k < rules->len; k++) {
        const sb_val_t *r = sb_array_at (rules, k);
        const char *tool = sb_get_str (r, "tool"), *pattern = sb_get_str (r, "pattern");
        sb_policy_action_t action = sb_policy_action_from_name (sb_get_str (r, "action"));
        //  the session actor checked them; a rule that is not whole is
        //  skipped rather than read as something it does not say
        if (tool && pattern && action != SB_POLICY__ACTIONS && s_rule_add (a, tool, pattern, action) != 0)
            return -1;
    }
    a->has_deadline = sb_get (session, "approval_deadline_s") != NULL;
    a->deadline_s = sb_get_uint (session, "approval_deadline_s", 0);
    return 0;
}

int64_t
sb_exec_approval_deadline (const sb_exec_run_t *run)
{
    return run->approval && run->approval->has_deadline ? (int64_t) run->approval->deadline_s : -1;
}

bool
sb_exec_approval_read_denied (const char *path, void *arg)
{
    const sb_exec_run_t *run = arg;
    const struct sb_exec_approval *a = run ? run->approval : NULL;
    if (!a)
        return false;
    if (path)
        return sb_policy_read_denied (a->rules, a->nrules, path);
    for (size_t k = 0; k < a->nrules; k++)
        if (a->rules [k].action == SB_POLICY_DENY && fnmatch (a->rules [k].tool, "read_file", 0) == 0)
            return true;
    return false;
}

void
sb_exec_verdict_clear (sb_gate_verdict_t *v)
{
    free (v->output);
    memset (v, 0, sizeof *v);
}

//  ---------------------------------------------------------------------
//  Helpers

static void
s_refuse (sb_gate_verdict_t *v, sb_gate_t gate, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *text = NULL;
    if (vasprintf (&text, fmt, ap) < 0)
        text = NULL;
    va_end (ap);
    free (v->output);
    v->output = text ? text : strdup ("not run: out of memory");
    v->gate = gate;
}

//  At most `max` bytes of s, cut on a UTF-8 boundary, into a new string.
static char *
s_cut (const char *s, size_t max)
{
    size_t n = strlen (s);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char) s [n] & 0xC0) == 0x80)
            n--;
    }
    return strndup (s, n);
}

//  `text` in single quotes for a POSIX shell.
static void
s_shell_quote (const char *text, char *out, size_t size)
{
    size_t w = 0;
    if (size < 3) {
        if (size)
            out [0] = 0;
        return;
    }
    out [w++] = '\'';
    for (const char *p = text; *p && w + 6 < size; p++) {
        if (*p == '\'') {
            memcpy (out + w, "'\\''", 4);
            w += 4;
        }
        else
            out [w++] = *p;
    }
    out [w++] = '\'';
    out [w] = 0;
}

//  The command that adds a rule allowing exactly this call, or "" when it
//  would not fit the tape's fix field.
static void
s_allow_fix (const sb_exec_run_t *run, const char *tool, const sb_policy_key_t *key, char *fix, size_t size)
{
    fix [0] = 0;
    char pattern [SB_POLICY_RULE_PATTERN_MAX + 1], rule [SB_POLICY_RULE_PATTERN_MAX + 256], quoted [sizeof rule * 2];
    if (sb_policy_exact_rule (tool, key, pattern, sizeof pattern) < 0)
        return;
    snprintf (rule, sizeof rule, "%s:%s:allow", tool, pattern);
    s_shell_quote (rule, quoted, sizeof quoted);
    int n = snprintf (fix, size, "switchboard sessions update %s --rule %s", run->session_id, quoted);
    if (n < 0 || (size_t) n >= size)
        fix [0] = 0;
}

//  A call on the run's socket, retried when nobody answered in time or
//  the service was briefly unavailable.
static sb_msg_t *
s_call (sb_exec_run_t *run, const char *type, sb_enc_t *e)
{
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = NULL;
    for (int attempt = 0; attempt < S_CALL_TRIES; attempt++) {
        sb_msg_destroy (&reply);
        reply = sb_bus_call (run->bus, type, run->session_id, b, len, SB_EXEC_CALL_MS);
        if (reply && !(sb_msg_is_error (reply)
                       && sb_err_from_name (sb_msg_error_code (reply)) == SB_E_unavailable))
            break;
        if (atomic_load (&run->shutdown) || atomic_load (&run->lost))
            break;
    }
    return reply;
}

//  ---------------------------------------------------------------------
//  Deny

static void
s_denied (sb_exec_run_t *run, const sb_exec_call_t *call, const sb_policy_key_t *key, sb_policy_decision_t d,
          sb_gate_verdict_t *v)
{
    if (d.by == SB_POLICY_BY_SESSION) {
        s_refuse (v, SB_GATE_REFUSE,
                  "not run: a person rejected this same %s call earlier in this session (scope session), "
                  "so it is rejected again without asking. Do not retry it unchanged; take another approach "
                  "or ask the person.", call->name);
        return;
    }
    const sb_policy_rule_t *r = &run->approval->rules [d.rule];
    s_allow_fix (run, call->name, key, v->fix, sizeof v->fix);
    char *shown = s_cut (key->text, 300);
    s_refuse (v, SB_GATE_REFUSE,
              "not run: the session's rule #%d (%s:%s:deny) denies %s on '%s'. Tell the person; to allow it "
              "they can run: %s", d.rule + 1, r->tool, r->pattern, call->name, shown ? shown : "",
              v->fix [0] ? v->fix : "switchboard sessions update SESSION --clear-rules");
    free (shown);
}

//  ---------------------------------------------------------------------
//  Ask and wait

static void
s_outcome_take (sb_exec_answer_t *o, const sb_val_t *m)
{
    snprintf (o->status, sizeof o->status, "%s", sb_get_str (m, "status") ? sb_get_str (m, "status") : "");
    snprintf (o->decision, sizeof o->decision, "%s", sb_get_str (m, "decision") ? sb_get_str (m, "decision") : "");
    snprintf (o->scope, sizeof o->scope, "%s", sb_get_str (m, "scope") ? sb_get_str (m, "scope") : "once");
    snprintf (o->resolved_by, sizeof o->resolved_by, "%s",
              sb_get_str (m, "resolved_by") ? sb_get_str (m, "resolved_by") : "?");
    free (o->feedback);
    const char *fb = sb_get_str (m, "feedback");
    o->feedback = fb && *fb ? strdup (fb) : NULL;
    o->raise = sb_get_uint (m, "raise", 0);
    snprintf (o->action, sizeof o->action, "%s", sb_get_str (m, "action") ? sb_get_str (m, "action") : "");
    free (o->content);
    o->content = sb_get_str (m, "content") ? strdup (sb_get_str (m, "content")) : NULL;
}

void
sb_exec_answer_clear (sb_exec_answer_t *a)
{
    free (a->feedback);
    free (a->content);
    memset (a, 0, sizeof *a);
}

static bool
s_resolved (const sb_exec_answer_t *o)
{
    return o->status [0] && sb_ia_status_from_name (o->status) != IA_PENDING;
}

//  interact.get: fills o when the interaction is resolved.
static void
s_poll (sb_exec_run_t *run, const char *id, sb_exec_answer_t *o)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "interaction_id", id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "interact.get", run->session_id, b, len, SB_EXEC_CALL_MS);
    if (reply && !sb_msg_is_error (reply)) {
        const sb_val_t *ia = sb_get_map (reply->body, "interaction");
        const char *status = sb_get_str (ia, "status");
        if (status && sb_ia_status_from_name (status) != IA_PENDING)
            s_outcome_take (o, ia);
    }
    sb_msg_destroy (&reply);
    sb_enc_destroy (&e);
}

typedef enum { S_WAIT_RESOLVED, S_WAIT_CANCELLED, S_WAIT_GONE } s_wait_t;

static s_wait_t
s_wait (sb_exec_run_t *run, sb_sub_t *sub, const char *id, sb_exec_answer_t *o)
{
    int64_t next_poll = sb_mono_ms () + SB_APPROVAL_POLL_MS;
    while (!s_resolved (o)) {
        if (atomic_load (&run->shutdown) || atomic_load (&run->lost))
            return S_WAIT_GONE;
        zmq_pollitem_t items [] = {
            { NULL, run->cancel_fd, ZMQ_POLLIN, 0 },
            { sub ? sb_sub_socket (sub) : NULL, 0, ZMQ_POLLIN, 0 },
        };
        int64_t wait = next_poll - sb_mono_ms ();
        if (zmq_poll (items, sub ? 2 : 1, wait > 0 ? (long) wait : 0) < 0 && errno != EINTR)
            return S_WAIT_GONE;
        if (items [0].revents & ZMQ_POLLIN)
            return atomic_load (&run->shutdown) || atomic_load (&run->lost) ? S_WAIT_GONE : S_WAIT_CANCELLED;
        sb_msg_t *msg;
        while (sub && !s_resolved (o) && (msg = sb_sub_recv (sub, 0))) {
            const sb_val_t *body = sb_get_map (msg->body, "body");
            const char *kind = sb_get_str (msg->body, "kind");
            const char *ia = sb_get_str (body, "interaction_id");
            if (strcmp (msg->h.type, "session.event") == 0 && kind && strcmp (kind, "approval.resolved") == 0
            &&  ia && strcmp (ia, id) == 0)
                s_outcome_take (o, body);
            sb_msg_destroy (&msg);
        }
        if (!s_resolved (o) && sb_mono_ms () >= next_poll) {
            s_poll (run, id, o);
            next_poll = sb_mono_ms () + SB_APPROVAL_POLL_MS;
        }
    }
    return S_WAIT_RESOLVED;
}

//  A cancel answers the question nobody waits for any more. A person who
//  answered first wins; either way the tool does not run.
static void
s_resolve_cancelled (sb_exec_run_t *run, const char *id, bool elicitation)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "interaction_id", id);
    sb_enc_kstr (e, "decision", "reject");
    //  an MCP server's question: nobody decided, which MCP calls cancel
    if (elicitation)
        sb_enc_kstr (e, "action", "cancel");
    sb_enc_kstr (e, "resolved_by", "cancel");
    sb_enc_kstr (e, "feedback", "the run was cancelled while it waited for this answer");
    char cmd [80];
    snprintf (cmd, sizeof cmd, "cancel-%s", id);
    sb_enc_kstr (e, "command_id", cmd);
    sb_enc_map_close (e);
    sb_msg_t *reply = s_call (run, "interact.resolve", e);
    if (!reply || (sb_msg_is_error (reply) && sb_err_from_name (sb_msg_error_code (reply)) != SB_E_conflict))
        sb_warn (ACTOR, "cannot resolve the interaction of a cancelled run run=%s interaction=%s code=%s", run->run_id,
                 id, reply ? sb_msg_error_code (reply) : "timeout");
    sb_msg_destroy (&reply);
    sb_enc_destroy (&e);
}

sb_enc_t *
sb_exec_ask_open (sb_exec_run_t *run, const char *kind, const char *call_id, const char *tool, const char *arguments,
                  const char *summary)
{
    sb_enc_t *e = sb_exec_ask_request (run, call_id, tool);
    if (!e)
        return NULL;
    sb_enc_kstr (e, "arguments", arguments);
    sb_enc_kstr (e, "summary", summary);
    sb_enc_kstr (e, "kind", kind);
    sb_enc_kstr (e, "default_outcome", "reject");
    if (sb_exec_approval_deadline (run) >= 0)
        sb_enc_kuint (e, "deadline_s", (uint64_t) sb_exec_approval_deadline (run));
    return e;
}

sb_sub_t *
sb_exec_ask_subscribe (sb_exec_run_t *run)
{
    sb_sub_t *sub = run->sub_endpoint [0] ? sb_sub_new (run->sub_endpoint) : NULL;
    if (sub) {
        char topic [64];
        snprintf (topic, sizeof topic, "session/%s", run->session_id);
        sb_sub_subscribe (sub, topic);
    }
    return sub;
}

sb_enc_t *
sb_exec_ask_request (const sb_exec_run_t *run, const char *call_id, const char *tool)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return NULL;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kstr (e, "call_id", call_id);
    sb_enc_kstr (e, "tool", tool);
    return e;
}

sb_ask_t
sb_exec_ask (sb_exec_run_t *run, sb_enc_t *request, sb_sub_t *sub, sb_run_phase_t phase, sb_exec_answer_t *o)
{
    sb_msg_t *reply = s_call (run, "interact.request", request);
    if (!reply || sb_msg_is_error (reply)) {
        o->code = reply ? sb_err_from_name (sb_msg_error_code (reply)) : SB_E_timeout;
        snprintf (o->error, sizeof o->error, "%s", reply ? sb_msg_error_message (reply) : "no reply");
        sb_msg_destroy (&reply);
        return atomic_load (&run->shutdown) || atomic_load (&run->lost) ? SB_ASK_GONE : SB_ASK_FAILED;
    }
    const char *id = sb_get_str (reply->body, "interaction_id");
    snprintf (o->interaction_id, sizeof o->interaction_id, "%s", id ? id : "");
    const sb_val_t *ia = sb_get_map (reply->body, "interaction");
    const char *status = sb_get_str (ia, "status");
    const char *kind = sb_get_str (ia, "kind");
    bool elicitation = kind && sb_ia_kind_from_name (kind) == IA_KIND_ELICITATION;
    if (status && sb_ia_status_from_name (status) != IA_PENDING)
        s_outcome_take (o, ia);
    sb_msg_destroy (&reply);
    s_wait_t w = S_WAIT_RESOLVED;
    if (!s_resolved (o)) {
        sb_info (ACTOR, "waiting for a person run=%s interaction=%s phase=%s", run->run_id, o->interaction_id,
                 sb_run_phase_name (phase));
        int64_t t0 = sb_mono_ms ();
        atomic_store (&run->phase, phase);
        w = s_wait (run, sub, o->interaction_id, o);
        atomic_store (&run->phase, SB_PHASE_IDLE);
        //  the run's timeout_s limits its work, not a person's thinking
        run->deadline += sb_mono_ms () - t0;
    }
    if (w == S_WAIT_GONE)
        return SB_ASK_GONE;
    if (w == S_WAIT_CANCELLED) {
        s_resolve_cancelled (run, o->interaction_id, elicitation);
        return SB_ASK_CANCELLED;
    }
    return SB_ASK_RESOLVED;
}

//  Scope always: a rule on the session that matches exactly this call.
//  Its command_id comes from the interaction, so a retry adds it once.
static void
s_remember_always (sb_exec_run_t *run, const char *tool, const sb_policy_key_t *key, bool approve, const char *id)
{
    char pattern [SB_POLICY_RULE_PATTERN_MAX + 1];
    sb_policy_action_t action = approve ? SB_POLICY_ALLOW : SB_POLICY_DENY;
    if (sb_policy_exact_rule (tool, key, pattern, sizeof pattern) < 0) {
        //  a call no rule can say (too long, or a compound shell command
        //  that no allow rule matches): it counts for this session
        sb_warn (ACTOR, "scope always: no rule can match exactly this call; remembered for the session only run=%s",
                 run->run_id);
        sb_policy_grant (run->runtime->policy, key, approve);
        return;
    }
    s_rule_add (run->approval, tool, pattern, action);
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_key (e, "add_rules");
    sb_enc_array_open (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "tool", tool);
    sb_enc_kstr (e, "pattern", pattern);
    sb_enc_kstr (e, "action", sb_policy_action_name (action));
    sb_enc_map_close (e);
    sb_enc_array_close (e);
    char cmd [80];
    snprintf (cmd, sizeof cmd, "always-%s", id);
    sb_enc_kstr (e, "command_id", cmd);
    sb_enc_map_close (e);
    sb_msg_t *reply = s_call (run, "session.update", e);
    if (!reply || sb_msg_is_error (reply))
        sb_warn (ACTOR, "scope always: session.update refused the rule run=%s code=%s message=\"%s\"", run->run_id,
                 reply ? sb_msg_error_code (reply) : "timeout", reply ? sb_msg_error_message (reply) : "");
    sb_msg_destroy (&reply);
    sb_enc_destroy (&e);
}

static const char *
s_risk (const char *tool)
{
    if (strcmp (tool, "shell") == 0)
        return "high";
    return sb_policy_read_only (tool) ? "low" : "medium";
}

//  What a person sees as the one line of the request.
static char *
s_summary (const sb_exec_run_t *run, const sb_exec_call_t *call, const sb_policy_key_t *key)
{
    if (strcmp (call->name, "shell") == 0 || sb_tools_find (call->name)) {
        size_t n = strlen (key->text);
        if (n <= S_SUMMARY_MAX)
            return strdup (key->text);
        //  a person must know there is more than they see: the rest of a
        //  long command is where a trick would hide
        char *head = s_cut (key->text, S_SUMMARY_MAX - 80), *line = NULL;
        if (head && asprintf (&line, "%s ... [%zu more bytes not shown here: read the whole command in the "
                              "arguments]", head, n - strlen (head)) < 0)
            line = NULL;
        free (head);
        return line;
    }
    //  an MCP server's readOnlyHint is for the person to weigh, never trusted
    const char *hint = sb_mcp_set_read_only_hint (run->runtime->mcp, call->name) == 1
                     ? " (its MCP server says it is read-only)" : "";
    char *line = NULL;
    if (asprintf (&line, "%s %s%s", call->name, call->arguments, hint) < 0)
        return NULL;
    char *cut = s_cut (line, S_SUMMARY_MAX);
    free (line);
    return cut;
}

static void
s_ask (sb_exec_run_t *run, const sb_exec_call_t *call, const sb_policy_key_t *key, sb_gate_verdict_t *v)
{
    //  subscribed before asking, so the resolution cannot slip past
    sb_sub_t *sub = sb_exec_ask_subscribe (run);
    char *summary = s_summary (run, call, key);
    //  what allows this call from now on, should it be refused
    s_allow_fix (run, call->name, key, v->fix, sizeof v->fix);
    if (!v->fix [0])
        snprintf (v->fix, sizeof v->fix, "switchboard sessions update %s --approval yolo", run->session_id);
    char *diff = sb_diff_preview (run->runtime->workspace, call->name, call->arguments, S_DIFF_MAX);
    sb_enc_t *e = sb_exec_ask_request (run, call->call_id, call->name);
    sb_enc_kstr (e, "arguments", call->arguments);
    sb_enc_kstr_opt (e, "summary", summary);
    if (diff && *diff)
        sb_enc_kstr (e, "diff", diff);
    sb_enc_kstr (e, "risk", s_risk (call->name));
    if (run->approval && run->approval->has_deadline)
        sb_enc_kuint (e, "deadline_s", run->approval->deadline_s);
    sb_enc_map_close (e);
    free (summary);
    free (diff);
    sb_exec_answer_t o = { { 0 } };
    sb_ask_t asked = sb_exec_ask (run, e, sub, SB_PHASE_WAITING_APPROVAL, &o);
    sb_enc_destroy (&e);
    sb_sub_destroy (&sub);
    snprintf (v->interaction_id, sizeof v->interaction_id, "%s", o.interaction_id);
    if (asked == SB_ASK_FAILED) {
        if (o.code == SB_E_no_service || o.code == SB_E_unknown_type)
            s_refuse (v, SB_GATE_REFUSE,
                      "not run: the approval policy '%s' asks a person before %s runs, but no approval "
                      "service (interact) is running to ask. Tell the person; to allow it they can run: %s",
                      run->policy, call->name, v->fix);
        else
            s_refuse (v, SB_GATE_REFUSE, "not run: the approval policy '%s' asks a person before %s runs, and "
                      "the request failed (%s: %s). Tell the person; to allow it they can run: %s", run->policy,
                      call->name, sb_err_name (o.code), o.error, v->fix);
        sb_exec_answer_clear (&o);
        return;
    }
    if (asked == SB_ASK_GONE) {
        v->gate = SB_GATE_GONE;
        sb_exec_answer_clear (&o);
        return;
    }
    if (asked == SB_ASK_CANCELLED) {
        s_refuse (v, SB_GATE_CANCELLED, "not run: the run was cancelled while this call waited for approval");
        sb_exec_answer_clear (&o);
        return;
    }
    bool approve = sb_ia_decision_from_name (o.decision) == IA_APPROVE;
    ia_scope_t scope = sb_ia_scope_from_name (o.scope);
    if (scope == IA_SESSION && strcmp (o.resolved_by, "deadline") != 0)
        sb_policy_grant (run->runtime->policy, key, approve);
    else
    if (scope == IA_ALWAYS && strcmp (o.resolved_by, "deadline") != 0)
        s_remember_always (run, call->name, key, approve, v->interaction_id);
    if (approve)
        v->gate = SB_GATE_RUN;
    else
    if (sb_ia_status_from_name (o.status) == IA_EXPIRED)
        s_refuse (v, SB_GATE_REFUSE,
                  "not run: the approval policy '%s' asks a person before %s runs; nobody answered before the "
                  "deadline, so the request expired and was rejected by default (resolved_by %s).%s%s Do not "
                  "retry it unchanged. Tell the person; to allow it they can run: %s", run->policy, call->name,
                  o.resolved_by, o.feedback ? " Note: " : "", o.feedback ? o.feedback : "", v->fix);
    else
        s_refuse (v, SB_GATE_REFUSE,
                  "not run: the approval policy '%s' asked a person, and this %s call was rejected by %s. "
                  "%s%s%s Do not retry it unchanged; follow the feedback, or ask the person what they want.",
                  run->policy, call->name, o.resolved_by,
                  o.feedback ? "Their feedback: \"" : "They gave no feedback.", o.feedback ? o.feedback : "",
                  o.feedback ? "\"." : "");
    sb_exec_answer_clear (&o);
}

//  ---------------------------------------------------------------------

//  Reads the session's rules again: a person who answers the same
//  question twice tends to add a rule meanwhile (sessions update --rule),
//  and the next call of the running run should obey it. Done only before
//  asking, where a round trip is nothing next to a person's answer.
static void
s_refresh (sb_exec_run_t *run)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "session.get", run->session_id, b, len, SB_EXEC_CALL_MS);
    if (reply && !sb_msg_is_error (reply))
        sb_exec_approval_configure (run, sb_get_map (reply->body, "session"));
    sb_msg_destroy (&reply);
    sb_enc_destroy (&e);
}

void
sb_exec_approval_gate (sb_exec_run_t *run, const sb_exec_call_t *call, sb_gate_verdict_t *v)
{
    memset (v, 0, sizeof *v);
    v->gate = SB_GATE_RUN;
    sb_runtime_t *rt = run->runtime;
    sb_policy_mode_t mode = sb_policy_mode_from_name (run->policy);
    if (mode == SB_POLICY__MODES)
        mode = SB_POLICY_INTERACTIVE;       //  a name we do not know asks: never allow by mistake
    sb_policy_key_t *key = sb_policy_key_new (call->name, call->arguments, rt->workspace);
    if (!key) {
        s_refuse (v, SB_GATE_REFUSE, "not run: out of memory");
        return;
    }
    struct sb_exec_approval *a = run->approval;
    sb_policy_decision_t d = sb_policy_decide (mode, a ? a->rules : NULL, a ? a->nrules : 0, rt->policy,
                                               call->name, key);
    if (d.action == SB_POLICY_ASK) {
        s_refresh (run);
        a = run->approval;
        d = sb_policy_decide (mode, a ? a->rules : NULL, a ? a->nrules : 0, rt->policy, call->name, key);
    }
    if (d.action == SB_POLICY_DENY)
        s_denied (run, call, key, d, v);
    else
    if (d.action == SB_POLICY_ASK)
        s_ask (run, call, key, v);
    sb_policy_key_destroy (&key);
}

/*  actors/run/recover.c — what a run found unfinished at startup becomes
    (docs/approvals.md, "Restarts"; docs/architecture.md).

    A run that was waiting for a person when the server stopped did
    nothing that a restart could double: its tool never started. It is
    re-queued with a new fence, and the executor that takes it asks for
    the same interaction again and waits. Every other run that was
    claimed or running may have been inside a tool, and side effects are
    never replayed: it becomes interrupted.

    Which it was is read from the tape, the one record of what the run
    did: the first of the run's tool calls without a tool.result is the
    one it was busy with (calls run in order). When that call has an
    approval.requested and no approval.resolved, or one that rejected it,
    the tool never ran. The run's entries are at the end of its session's
    tape, so the scan reads a window at the tail, widened until it holds
    the run's start (its prompt or turn.begin).

    One exception: an MCP tool call whose server's question (an
    elicitation, call_id "elicit:CALL:N:DIGEST") waited for a person when
    the server stopped. The server was waiting for the answer, so it had
    done nothing past the question that the answer decides; the run is
    re-queued, its executor calls the tool again, and the same question
    finds the same interaction (actors/exec/mcp_exec.c), answered before
    or after the restart (docs/approvals.md, "Restarts"). A question
    answered before the stop is not: the server went on with the answer,
    and the call is interrupted as any other. One answered on the tape
    after the stop (the answer came right after the start, or the
    deadline passed while the server was down) was never delivered, and
    counts as waiting: `after_ms` is this process's start, or the
    takeover's moment for a shard taken from a node that died. */
#include "actors/run/run_impl.h"
#include "schemas/interaction.h"

#define S_WINDOW_FIRST  1000    //  tape entries read first, back from the head
#define S_WINDOW_GROWTH 8
#define S_PAGE          5000    //  session.events limit
#define S_CALLS_MAX     256     //  calls of one run tracked; past it: interrupted

typedef struct {
    char call_id [129];
    char interaction_id [64];
    bool answered, asked, resolved, rejected;
    bool eliciting;             //  a server's question about it waits (the last asked was not resolved)
    char question [64];         //  that question's interaction
} s_call_t;

typedef struct {
    s_call_t calls [S_CALLS_MAX];
    size_t n;
    bool overflow;
    //  the run's last word is a budget question (actors/exec/budget.c):
    //  it stopped before its next model call, which it has not made
    bool budget_asked;
    char budget_interaction [64];
    bool started;               //  the window holds the run's prompt or turn.begin
    uint64_t after_ms;          //  a question answered on the tape from then on was never delivered
} s_scan_t;

static s_call_t *
s_find (s_scan_t *s, const char *call_id, const char *interaction_id, bool unanswered)
{
    for (size_t k = 0; k < s->n; k++) {
        s_call_t *c = &s->calls [k];
        if (unanswered && c->answered)
            continue;
        if ((call_id && strcmp (c->call_id, call_id) == 0)
        ||  (interaction_id && c->interaction_id [0] && strcmp (c->interaction_id, interaction_id) == 0))
            return c;
    }
    return NULL;
}

/*  The unanswered call an elicitation's call_id ("elicit:CALL:N:DIGEST")
    names, or NULL: CALL is the tool call's id, cut at 80 bytes. */
static s_call_t *
s_elicited (s_scan_t *s, const char *call_id)
{
    if (!call_id || strncmp (call_id, "elicit:", 7) != 0)
        return NULL;
    const char *id = call_id + 7;
    const char *end = strrchr (id, ':');
    while (end && end > id && end [-1] != ':')
        end--;                  //  back over N to the colon before it
    if (!end || end <= id)
        return NULL;
    size_t n = (size_t) (end - 1 - id);
    for (size_t k = 0; k < s->n; k++) {
        s_call_t *c = &s->calls [k];
        size_t cn = strlen (c->call_id);
        if (!c->answered && (cn > 80 ? 80 : cn) == n && strncmp (c->call_id, id, n) == 0)
            return c;
    }
    return NULL;
}

static void
s_entry (s_scan_t *s, const sb_val_t *ev)
{
    const char *kind = sb_get_str (ev, "kind");
    const sb_val_t *body = sb_get_map (ev, "body");
    if (!kind)
        return;
    if (strcmp (kind, "turn.begin") == 0 || strcmp (kind, "prompt") == 0)
        s->started = true;
    //  a budget question stays the run's last word until its next model
    //  call, tool call or raise
    if (strcmp (kind, "usage") == 0 || strcmp (kind, "tool.call") == 0 || strcmp (kind, "budget.raised") == 0)
        s->budget_asked = false;
    if (strcmp (kind, "approval.requested") == 0 && sb_get_str (body, "kind")
    &&  sb_ia_kind_from_name (sb_get_str (body, "kind")) == IA_KIND_BUDGET) {
        s->budget_asked = true;
        s_copy (s->budget_interaction, sizeof s->budget_interaction, sb_get_str (body, "interaction_id"));
        return;
    }
    if (strcmp (kind, "tool.call") == 0) {
        if (s->n == S_CALLS_MAX) {
            s->overflow = true;
            return;
        }
        s_call_t *c = &s->calls [s->n++];
        memset (c, 0, sizeof *c);
        s_copy (c->call_id, sizeof c->call_id, sb_get_str (body, "call_id"));
    }
    else
    if (strcmp (kind, "tool.result") == 0) {
        s_call_t *c = s_find (s, sb_get_str (body, "call_id"), NULL, true);
        if (c)
            c->answered = true;
    }
    else
    if (strcmp (kind, "approval.requested") == 0 && s_elicited (s, sb_get_str (body, "call_id"))) {
        s_call_t *c = s_elicited (s, sb_get_str (body, "call_id"));
        c->eliciting = true;
        s_copy (c->question, sizeof c->question, sb_get_str (body, "interaction_id"));
    }
    else
    if (strcmp (kind, "approval.resolved") == 0 && s_elicited (s, sb_get_str (body, "call_id"))) {
        s_call_t *c = s_elicited (s, sb_get_str (body, "call_id"));
        const char *ia = sb_get_str (body, "interaction_id");
        //  answered (or expired) after the stop: the server never heard it
        if (ia && strcmp (ia, c->question) == 0 && sb_get_uint (ev, "ts", 0) < s->after_ms)
            c->eliciting = false;
    }
    else
    if (strcmp (kind, "approval.requested") == 0) {
        s_call_t *c = s_find (s, sb_get_str (body, "call_id"), NULL, true);
        if (c) {
            c->asked = true;
            s_copy (c->interaction_id, sizeof c->interaction_id, sb_get_str (body, "interaction_id"));
        }
    }
    else
    if (strcmp (kind, "approval.resolved") == 0) {
        s_call_t *c = s_find (s, sb_get_str (body, "call_id"), sb_get_str (body, "interaction_id"), true);
        const char *decision = sb_get_str (body, "decision");
        if (c) {
            c->resolved = true;
            c->rejected = sb_ia_decision_from_name (decision) == IA_REJECT;
        }
    }
}

//  Reads the tape after `after` to its head into s: the run's entries
//  only. Returns 0, or -1 when the session actor did not answer.
static int
s_read (self_t *self, const run_t *r, uint64_t after, s_scan_t *s)
{
    while (true) {
        sb_enc_t *e = sb_enc_new ();
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", r->session_id);
        sb_enc_kuint (e, "after_seq", after);
        sb_enc_kuint (e, "limit", S_PAGE);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *reply = sb_bus_call (self->bus, "session.events", r->session_id, b, len, CALL_MS);
        sb_enc_destroy (&e);
        if (!reply || sb_msg_is_error (reply)) {
            sb_msg_destroy (&reply);
            return -1;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        for (uint32_t k = 0; events && k < events->len; k++) {
            const sb_val_t *ev = sb_array_at (events, k);
            //  approvals are matched to the run's calls by call_id, so
            //  one appended without the entry's run_id still counts
            const char *run_id = sb_get_str (ev, "run_id");
            const char *kind = sb_get_str (ev, "kind");
            bool ours = run_id && strcmp (run_id, r->run_id) == 0;
            bool approval = kind && strncmp (kind, "approval.", 9) == 0;
            //  a budget question is always the run's own (run_id set)
            const char *ia_kind = sb_get_str (sb_get_map (ev, "body"), "kind");
            bool budget = approval && ia_kind && sb_ia_kind_from_name (ia_kind) == IA_KIND_BUDGET;
            if (ours || (approval && !budget))
                s_entry (s, ev);
        }
        bool more = sb_get_bool (reply->body, "more", false) && events && events->len;
        after = sb_get_uint (reply->body, "next_after", after);
        sb_msg_destroy (&reply);
        if (!more)
            return 0;
    }
}

static uint64_t
s_head (self_t *self, const run_t *r)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", r->session_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (self->bus, "session.get", r->session_id, b, len, CALL_MS);
    sb_enc_destroy (&e);
    uint64_t head = reply && !sb_msg_is_error (reply)
                  ? sb_get_uint (sb_get_map (reply->body, "session"), "last_seq", 0) : 0;
    sb_msg_destroy (&reply);
    return head;
}

bool
sb_run_recover_waiting (self_t *self, const run_t *r, uint64_t after_ms, char *interaction_id, size_t size)
{
    uint64_t head = s_head (self, r);
    if (!head)
        return false;
    s_scan_t *s = malloc (sizeof *s);
    if (!s)
        return false;
    bool waiting = false;
    for (uint64_t window = S_WINDOW_FIRST; ; window *= S_WINDOW_GROWTH) {
        memset (s, 0, sizeof *s);
        uint64_t from = head > window ? head - window : 0;
        s->after_ms = after_ms;
        if (s_read (self, r, from, s) != 0)
            break;
        if (!s->started && from > 0)
            continue;
        //  a run stopped at a budget question, every call answered
        bool open_call = false;
        for (size_t k = 0; k < s->n; k++)
            open_call |= !s->calls [k].answered;
        if (s->budget_asked && !open_call && !s->overflow) {
            s_copy (interaction_id, size, s->budget_interaction);
            waiting = true;
            break;
        }
        //  the first call without a result is the one the run was in
        for (size_t k = 0; k < s->n && !s->overflow; k++) {
            const s_call_t *c = &s->calls [k];
            if (c->answered)
                continue;
            waiting = (c->asked && (!c->resolved || c->rejected)) || c->eliciting;
            if (waiting)
                s_copy (interaction_id, size, c->eliciting ? c->question : c->interaction_id);
            break;
        }
        break;
    }
    free (s);
    return waiting;
}

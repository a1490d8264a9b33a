/*  actors/interact.c — durable interactions (approvals), docs/approvals.md.
    LMDB at DATA/interact.

    An executor asks (interact.request) before a tool call that its policy
    does not allow by itself; a person answers (interact.resolve) from a
    terminal, the CLI or a browser; or the interaction's deadline answers
    for them with its declared default. Every interaction is committed
    before anyone hears of it, the first answer wins and every later one
    is told who gave it, and every change reaches the session's tape as
    approval.requested or approval.resolved through an outbox
    (actors/interact/outbox.c). The executor learns of the answer from the
    tape, on the session's topic.

    This file is the actor and its requests; actors/interact/interact_impl.h
    says which seam each of the other files holds. */
#include "actors/interact/interact_impl.h"
#include "schemas/elicit.h"
#include "store/cmdid.h"

#include <stdlib.h>
#include <strings.h>

static const char *s_dbis [] = { "interactions", "bycall", "index", "deadlines", "outbox", "commands", NULL };

/* ------------------------------------------------------------------ */
/*  Replies */

/*  The body of a reply about one interaction, in self->enc. */
static const uint8_t *
s_encode_one (self_t *self, const ia_t *ia, bool with_id, size_t *len)
{
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    if (with_id)
        sb_enc_kstr (e, "interaction_id", ia->interaction_id);
    sb_enc_key (e, "interaction");
    sb_ia_encode (ia, e);
    sb_enc_map_close (e);
    return sb_enc_data (e, len);
}

static void
s_reply_one (self_t *self, const sb_msg_t *msg, const ia_t *ia, bool with_id)
{
    size_t len;
    const uint8_t *b = s_encode_one (self, ia, with_id, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

/*  A retry of the resolve that won, by its command_id: SB_CMDID_REPLAY
    when it got that resolve's reply again (store/cmdid.h). Another
    request under the same id is not a retry: it is told who won, as any
    later answer is. SB_CMDID_NEW when the id is not remembered. */
static sb_cmdid_verdict_t
s_replay (self_t *self, const sb_msg_t *msg, const char *id, const uint8_t digest [SB_DIGEST_LEN])
{
    sb_key_t k;
    sb_ia_command_key (&k, id, sb_get_str (msg->body, "command_id"));
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0)
        return SB_CMDID_NEW;
    sb_cmdid_found_t f;
    sb_cmdid_verdict_t verdict = sb_cmdid_find (&txn, DBI_COMMANDS, DBI_COMMANDS, &k, msg->h.type, digest,
                                                sb_now_ms (), &f);
    if (verdict == SB_CMDID_REPLAY)
        sb_bus_reply (self->bus, msg, f.reply, f.reply_len);
    sb_cmdid_found_done (&f);
    sb_txn_abort (&txn);
    return verdict;
}

/*  `conflict` for an answer that came second, with the one that won in
    detail {interaction_id, status, decision, resolved_by, resolved_at},
    so the loser can tell the person who answered first. */
static void
s_reply_conflict (self_t *self, const sb_msg_t *msg, const ia_t *ia)
{
    char message [512];
    snprintf (message, sizeof message, "interaction %s was already %s: %s by %s", ia->interaction_id,
              sb_ia_status_name (ia->status), sb_ia_decision_name (ia->decision), ia->resolved_by);
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_error_open (e, SB_E_conflict, message, false);
    sb_enc_key (e, "detail");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "interaction_id", ia->interaction_id);
    sb_enc_kstr (e, "status", sb_ia_status_name (ia->status));
    sb_enc_kstr (e, "decision", sb_ia_decision_name (ia->decision));
    sb_enc_kstr (e, "resolved_by", ia->resolved_by);
    sb_enc_kuint (e, "resolved_at", ia->resolved_at);
    sb_enc_map_close (e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply_to (self->bus, msg->route, msg->route_len, &msg->h, "error", 0, b, len);
}

static void
s_not_found (self_t *self, const sb_msg_t *msg, const char *id)
{
    sb_bus_error (self->bus, msg, SB_E_not_found, "no interaction '%.64s'%s", id ? id : "",
                  sb_ia_id_valid (id) ? "" : " (an interaction id is ia_ and a 26-character ULID)");
}

/*  The answer on the record: its status, decision, scope, an
    elicitation's action, who gave it and when. */
static void
s_settle (ia_t *ia, ia_status_t to, ia_decision_t d, ia_scope_t sc, ia_action_t act, const char *by, uint64_t at)
{
    ia->status = to;
    ia->decision = d;
    ia->scope = sc;
    ia->action = act;
    ia->resolved_at = at;
    s_copy (ia->resolved_by, sizeof ia->resolved_by, by);
}

/* ------------------------------------------------------------------ */
/*  Deadlines */

/*  The earliest deadline of a pending interaction (ms since epoch), 0
    when none has one. */
static uint64_t
s_next_deadline (self_t *self)
{
    uint64_t at = 0;
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0)
        return 0;
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_txn_iter_begin (&txn, &it, DBI_DEADLINES, "D", 1, NULL, 0);
    if (sb_txn_iter_next (&it, &k, &v))
        at = sb_key_read_u64 (&k, 1);
    sb_txn_iter_end (&it);
    sb_txn_abort (&txn);
    return at;
}

/*  The first due deadline's interaction id into out; false when none is
    due at `now`. */
static bool
s_first_due (self_t *self, uint64_t now, char out [IA_ID_LEN + 1])
{
    bool due = false;
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0)
        return false;
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_txn_iter_begin (&txn, &it, DBI_DEADLINES, "D", 1, NULL, 0);
    if (sb_txn_iter_next (&it, &k, &v) && k.size == 1 + 8 + IA_ID_LEN + 1
    &&  sb_key_read_u64 (&k, 1) <= now) {
        memcpy (out, (const char *) k.data + 9, IA_ID_LEN);
        out [IA_ID_LEN] = 0;
        due = true;
    }
    sb_txn_iter_end (&it);
    sb_txn_abort (&txn);
    return due;
}

/*  Resolves every pending interaction whose deadline has passed to its
    default outcome, with status expired and resolved_by "deadline". Runs
    at startup, before the server binds (so an interaction whose deadline
    passed while the server was down is expired before anyone can ask),
    and from the loop's timer. */
static void
s_expire_due (self_t *self)
{
    uint64_t now = sb_now_ms ();
    char id [IA_ID_LEN + 1];
    while (s_first_due (self, now, id)) {
        ia_t ia;
        memset (&ia, 0, sizeof ia);
        int loaded = sb_ia_load (self, id, &ia);
        if (loaded != 0 || ia.status != IA_PENDING) {
            /* an index entry without its pending record: drop it, or the
               timer would find it again forever */
            if (loaded == 0)
                sb_ia_free (&ia);
            sb_warn (ACTOR, "stale deadline entry dropped id=%s", id);
            sb_txn_t txn;
            if (sb_txn_begin (self->store, &txn, true) == 0) {
                sb_txn_iter_t it;
                sb_datum_t k, v;
                sb_txn_iter_begin (&txn, &it, DBI_DEADLINES, "D", 1, NULL, 0);
                if (sb_txn_iter_next (&it, &k, &v))
                    sb_txn_iter_del (&it);
                sb_txn_iter_end (&it);
                if (sb_txn_commit (&txn) != 0)
                    break;
            }
            continue;
        }
        /* an elicitation nobody answered: cancel */
        s_settle (&ia, IA_EXPIRED, ia.default_outcome, IA_ONCE, IA_ACTION_CANCEL, "deadline", now);
        int rc = sb_ia_save (self, &ia, false, IA_PENDING);
        if (rc == 0) {
            self->expired++;
            sb_info (ACTOR, "interaction expired id=%s session=%s run=%s decision=%s late_ms=%lld",
                     ia.interaction_id, ia.session_id, ia.run_id, sb_ia_decision_name (ia.decision),
                     (long long) (now - ia.deadline_at));
        }
        sb_ia_free (&ia);
        if (rc)
            break;              /* the store is failing: try again on the next tick */
    }
    self->next_deadline = s_next_deadline (self);
}

/*  The interaction id of an index key whose inverted ULID starts at `at`
    (interact_impl.h). */
static void
s_id_of_key (const sb_datum_t *k, size_t at, char id [IA_ID_LEN + 1])
{
    memcpy (id, IA_PREFIX, IA_PREFIX_LEN);
    const uint8_t *inv = (const uint8_t *) k->data + at;
    for (size_t i = 0; i < SB_ULID_LEN; i++)
        id [IA_PREFIX_LEN + i] = (char) (255 - inv [i]);
    id [IA_ID_LEN] = 0;
}

/* ------------------------------------------------------------------ */
/*  Requests */

/*  The interaction already asked for (run_id, call_id), into *ia: 0, or
    -1 when there is none. */
static int
s_by_call (self_t *self, const char *run_id, const char *call_id, ia_t *ia)
{
    sb_key_t k;
    sb_key_init (&k, 'K');
    sb_key_str (&k, run_id);
    sb_key_str (&k, call_id);
    sb_txn_t txn;
    if (!sb_key_valid (&k) || sb_txn_begin (self->store, &txn, false) != 0)
        return -1;
    sb_datum_t v;
    int rc = -1;
    if (sb_txn_get (&txn, DBI_BYCALL, k.buf, k.len, &v) == 0 && v.size == IA_ID_LEN) {
        char id [IA_ID_LEN + 1];
        memcpy (id, v.data, IA_ID_LEN);
        id [IA_ID_LEN] = 0;
        rc = sb_ia_load_txn (&txn, id, ia);
    }
    sb_txn_abort (&txn);
    return rc;
}

/*  An elicitation's request: a schema within the restriction of
    schemas/elicit.h, and no accept at the deadline (nobody answered: the
    server is told cancel). 0, or -1 with the error sent. */
static int
s_elicit_request_check (self_t *self, const sb_msg_t *msg, const char *schema, const char *outcome)
{
    if (outcome && sb_ia_decision_from_name (outcome) != IA_REJECT) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "an elicitation's default_outcome is reject (cancel)");
        return -1;
    }
    if (!schema) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "an interaction of kind elicitation needs its schema");
        return -1;
    }
    /* the schema's row bounded its length; the depth is bounded here */
    json_error_t jerr;
    json_t *j = json_loads (schema, JSON_REJECT_DUPLICATES, &jerr);
    char err [256] = "not JSON";
    int rc = j ? sb_elicit_schema_check (j, err, sizeof err) : -1;
    json_decref (j);
    if (rc != 0)
        sb_bus_error (self->bus, msg, SB_E_invalid, "schema: %s", err);
    return rc;
}

static void
s_handle_request (self_t *self, sb_msg_t *msg)
{
    const sb_val_t *b = msg->body;
    const char *sid = sb_get_str (b, "session_id");
    const char *rid = sb_get_str (b, "run_id");
    const char *call_id = sb_get_str (b, "call_id");
    const char *tool = sb_get_str (b, "tool");
    const char *outcome = sb_get_str (b, "default_outcome");
    const char *risk = sb_get_str (b, "risk");
    if (!sb_ulid_valid (sid) || !sb_ulid_valid (rid)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "session_id and run_id must be ids (26-character ULIDs)");
        return;
    }
    /* strings are NUL-free only when their length says so: a key with a
       NUL inside would name another call */
    const sb_val_t *cv = sb_get (b, "call_id");
    if (!*call_id || strlen (call_id) != cv->len || !*tool) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "call_id and tool must be non-empty strings without NUL bytes");
        return;
    }
    /* default_outcome and risk are names of their tables: the schema's
       ENUM rows refused any other before this ran */
    ia_decision_t dflt = outcome ? sb_ia_decision_from_name (outcome) : IA_REJECT;
    /* a budget question names its budget and limit (docs/usage.md) */
    ia_kind_t kind = sb_get_str (b, "kind") ? sb_ia_kind_from_name (sb_get_str (b, "kind")) : IA_KIND_APPROVAL;
    if (kind == IA_KIND_BUDGET
    &&  (!sb_get_str (b, "budget") || !sb_get (b, "budget_limit") || !sb_get (b, "spent"))) {
        sb_bus_error (self->bus, msg, SB_E_invalid,
                      "an interaction of kind budget needs budget, spent and budget_limit");
        return;
    }
    /* an elicitation carries the server's schema, checked here too: what
       a person is shown and answers against must be one we can check */
    const char *schema = sb_get_str (b, "schema");
    if (kind == IA_KIND_ELICITATION && s_elicit_request_check (self, msg, schema, outcome) != 0)
        return;
    if (kind != IA_KIND_ELICITATION && schema) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "schema belongs to an interaction of kind elicitation");
        return;
    }
    ia_t ia;
    /* idempotent by (run, call): an executor that restarts asks again and
       waits for the same interaction, whatever it has become */
    if (s_by_call (self, rid, call_id, &ia) == 0) {
        if (strcmp (ia.session_id, sid) != 0)
            sb_bus_error (self->bus, msg, SB_E_conflict, "run %s call %s is interaction %s of session %s, not %s",
                          rid, call_id, ia.interaction_id, ia.session_id, sid);
        else
            s_reply_one (self, msg, &ia, true);
        sb_ia_free (&ia);
        return;
    }
    memset (&ia, 0, sizeof ia);
    char ulid [SB_ULID_LEN + 1];
    sb_ulid_new (ulid);
    snprintf (ia.interaction_id, sizeof ia.interaction_id, IA_PREFIX "%s", ulid);
    s_copy (ia.session_id, sizeof ia.session_id, sid);
    s_copy (ia.run_id, sizeof ia.run_id, rid);
    s_copy (ia.call_id, sizeof ia.call_id, call_id);
    s_copy (ia.tool, sizeof ia.tool, tool);
    s_copy (ia.risk, sizeof ia.risk, risk);
    ia.arguments = strdup (sb_get_str (b, "arguments"));
    ia.summary = sb_get_str (b, "summary") ? strdup (sb_get_str (b, "summary")) : NULL;
    ia.diff = sb_get_str (b, "diff") ? strdup (sb_get_str (b, "diff")) : NULL;
    if (!ia.arguments || (sb_get_str (b, "summary") && !ia.summary) || (sb_get_str (b, "diff") && !ia.diff)) {
        sb_ia_free (&ia);
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return;
    }
    ia.status = IA_PENDING;
    ia.default_outcome = dflt;
    ia.kind = kind;
    if (kind == IA_KIND_BUDGET) {
        ia.budget = sb_ia_budget_from_name (sb_get_str (b, "budget"));
        ia.spent = sb_get_uint (b, "spent", 0);
        ia.limit = sb_get_uint (b, "budget_limit", 0);
    }
    if (kind == IA_KIND_ELICITATION && !(ia.schema = strdup (schema))) {
        sb_ia_free (&ia);
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return;
    }
    ia.created_at = sb_now_ms ();
    /* the schema's range already refused a deadline past a week */
    uint64_t deadline_s = sb_get (b, "deadline_s") ? sb_get_uint (b, "deadline_s", 0) : self->deadline_s;
    if (deadline_s)
        ia.deadline_at = ia.created_at + deadline_s * 1000;
    if (sb_ia_save (self, &ia, true, IA_PENDING) != 0) {
        sb_bus_error (self->bus, msg, SB_E_internal, "cannot store the interaction");
        sb_ia_free (&ia);
        return;
    }
    self->requested++;
    sb_info (ACTOR, "interaction requested id=%s session=%s run=%s call=%s tool=%s deadline_s=%llu",
             ia.interaction_id, sid, rid, call_id, tool, (unsigned long long) deadline_s);
    if (ia.deadline_at && (!self->next_deadline || ia.deadline_at < self->next_deadline))
        self->next_deadline = ia.deadline_at;
    s_reply_one (self, msg, &ia, true);
    sb_ia_free (&ia);
    sb_ia_outbox_pump (self);
}

static void
s_handle_get (self_t *self, sb_msg_t *msg)
{
    const char *id = sb_get_str (msg->body, "interaction_id");
    ia_t ia;
    if (sb_ia_load (self, id, &ia) != 0) {
        s_not_found (self, msg, id);
        return;
    }
    s_reply_one (self, msg, &ia, false);
    sb_ia_free (&ia);
}

/*  The digest of a resolve as it is answered: its decision, scope, signer
    and feedback (and a budget question's raise), in that order, whatever
    the order of the body's fields (a retry may well encode its map in
    another order). */
static int
s_resolve_digest (const sb_val_t *b, ia_decision_t d, ia_scope_t sc, uint8_t out [SB_DIGEST_LEN])
{
    sb_digest_t *digest = sb_digest_new ();
    if (!digest)
        return -1;
    const char *by = sb_get_str (b, "resolved_by");
    const char *feedback = sb_get_str (b, "feedback");
    const char *fields [] = { sb_ia_decision_name (d), sb_ia_scope_name (sc), by ? by : "api",
                              feedback ? feedback : "" };
    for (size_t i = 0; i < sizeof fields / sizeof fields [0]; i++)
        sb_digest_update (digest, fields [i], strlen (fields [i]) + 1);
    /* a budget question's raise is part of the answer (absent: as before) */
    char raise [32];
    if (sb_get (b, "raise")) {
        snprintf (raise, sizeof raise, "raise=%llu", (unsigned long long) sb_get_uint (b, "raise", 0));
        sb_digest_update (digest, raise, strlen (raise) + 1);
    }
    /* an elicitation's action and content too */
    const char *more [] = { "action", "content" };
    for (size_t i = 0; i < 2; i++) {
        const char *v = sb_get_str (b, more [i]);
        if (v) {
            sb_digest_update (digest, more [i], strlen (more [i]) + 1);
            sb_digest_update (digest, v, strlen (v) + 1);
        }
    }
    sb_digest_final (digest, out);
    sb_digest_destroy (&digest);
    return 0;
}

/*  An answer to an elicitation: the action that goes with the decision
    (absent: approve accepts, reject declines), scope once, and content
    only with accept. The action into *act; 0, or -1 with the error sent.
    For any other kind, refuses action and content. */
static int
s_elicit_answer_check (self_t *self, const sb_msg_t *msg, const ia_t *ia, ia_decision_t d, ia_scope_t sc,
                       ia_action_t *act)
{
    const char *action = sb_get_str (msg->body, "action");
    const char *content = sb_get_str (msg->body, "content");
    if (ia->kind != IA_KIND_ELICITATION) {
        if (action || content)
            sb_bus_error (self->bus, msg, SB_E_invalid, "action and content answer an elicitation; %s is of kind %s",
                          ia->interaction_id, sb_ia_kind_name (ia->kind));
        return action || content ? -1 : 0;
    }
    /* the schema's ENUM row took only names of the table */
    *act = action ? sb_ia_action_from_name (action) : d == IA_APPROVE ? IA_ACTION_ACCEPT : IA_ACTION_DECLINE;
    const char *why = (*act == IA_ACTION_ACCEPT) != (d == IA_APPROVE)
                    ? "action accept goes with decision approve, decline and cancel with reject"
                    : content && *act != IA_ACTION_ACCEPT ? "content answers an accepted elicitation only"
                    : sc != IA_ONCE ? "an elicitation is answered once (scope once)" : NULL;
    if (why)
        sb_bus_error (self->bus, msg, SB_E_invalid, "%s", why);
    return why ? -1 : 0;
}

/*  The content an accepted elicitation sends: the person's values (absent:
    none) checked against the stored schema, its defaults filled in, as
    JSON text into *out. 0, or -1 with `invalid` naming the field sent. */
static int
s_elicit_content (self_t *self, const sb_msg_t *msg, const ia_t *ia, char **out)
{
    const char *given = sb_get_str (msg->body, "content");
    json_error_t jerr;
    json_t *schema = json_loads (ia->schema, JSON_REJECT_DUPLICATES, &jerr);
    json_t *g = json_loads (given ? given : "{}", JSON_REJECT_DUPLICATES, &jerr);
    char err [256] = "not a JSON object";
    json_t *content = schema && g ? sb_elicit_content (schema, g, err, sizeof err) : NULL;
    *out = content ? json_dumps (content, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref (schema);
    json_decref (g);
    json_decref (content);
    if (!*out)
        sb_bus_error (self->bus, msg, SB_E_invalid, "content: %s (the fields: interact.get %s's schema)",
                      content ? "out of memory" : err, ia->interaction_id);
    return *out ? 0 : -1;
}

static void
s_handle_resolve (self_t *self, sb_msg_t *msg)
{
    const sb_val_t *b = msg->body;
    const char *id = sb_get_str (b, "interaction_id");
    const char *decision = sb_get_str (b, "decision");
    const char *scope = sb_get_str (b, "scope");
    const char *by = sb_get_str (b, "resolved_by");
    const char *cmd = sb_get_str (b, "command_id");
    /* the schema's ENUM rows took only names of the tables */
    ia_decision_t d = sb_ia_decision_from_name (decision);
    ia_scope_t sc = scope ? sb_ia_scope_from_name (scope) : IA_ONCE;
    /* "deadline" says the server answered: no person may sign so */
    if (by && (!*by || strcmp (by, "deadline") == 0)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "resolved_by must name who answers%s",
                      *by ? " ('deadline' is the server's own)" : "");
        return;
    }
    if (cmd && !*cmd) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "command_id must not be empty");
        return;
    }
    ia_t ia;
    if (sb_ia_load (self, id, &ia) != 0) {
        s_not_found (self, msg, id);
        return;
    }
    ia_status_t to = d == IA_APPROVE ? IA_APPROVED : IA_REJECTED;
    /* a raise is an answer to a budget question, and only a yes */
    uint64_t raise = sb_get_uint (b, "raise", 0);
    if (sb_get (b, "raise") && (ia.kind != IA_KIND_BUDGET || d != IA_APPROVE)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "raise answers an approved budget question; %s is %s",
                      ia.interaction_id, ia.kind != IA_KIND_BUDGET ? "a tool call's approval" : "rejected by this answer");
        sb_ia_free (&ia);
        return;
    }
    ia_action_t act = IA__ACTIONS;
    if (s_elicit_answer_check (self, msg, &ia, d, sc, &act) != 0) {
        sb_ia_free (&ia);
        return;
    }
    uint8_t digest [SB_DIGEST_LEN];
    if (cmd && s_resolve_digest (b, d, sc, digest) != 0) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        sb_ia_free (&ia);
        return;
    }
    if (!sb_ia_transition_ok (ia.status, to)) {
        /* a retry of the answer that won gets that answer again; one
           resolved before the ids were remembered apart (its id only in
           the record) is judged by the record: the same answer */
        sb_cmdid_verdict_t v = cmd ? s_replay (self, msg, ia.interaction_id, digest) : SB_CMDID_NEW;
        if (v == SB_CMDID_REPLAY)
            ;
        else
        if (v == SB_CMDID_NEW && cmd && strcmp (cmd, ia.command_id) == 0 && ia.decision == d && ia.scope == sc)
            s_reply_one (self, msg, &ia, false);
        else
            s_reply_conflict (self, msg, &ia);
        sb_ia_free (&ia);
        return;
    }
    if (act == IA_ACTION_ACCEPT && s_elicit_content (self, msg, &ia, &ia.content) != 0) {
        sb_ia_free (&ia);
        return;
    }
    s_settle (&ia, to, d, sc, act, by ? by : "api", sb_now_ms ());
    s_copy (ia.command_id, sizeof ia.command_id, cmd);
    ia.raise = raise;
    const char *feedback = sb_get_str (b, "feedback");
    if (feedback && *feedback && !(ia.feedback = strdup (feedback))) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        sb_ia_free (&ia);
        return;
    }
    /* the reply is remembered with the answer, under the command_id */
    ia_command_t c = { .type = msg->h.type, .cmd = cmd, .digest = digest };
    c.reply = s_encode_one (self, &ia, false, &c.reply_len);
    if (sb_ia_save_command (self, &ia, IA_PENDING, cmd ? &c : NULL) != 0) {
        sb_bus_error (self->bus, msg, SB_E_internal, "cannot store the answer");
        sb_ia_free (&ia);
        return;
    }
    self->resolved++;
    sb_info (ACTOR, "interaction resolved id=%s session=%s run=%s status=%s scope=%s by=%s",
             ia.interaction_id, ia.session_id, ia.run_id, sb_ia_status_name (ia.status),
             sb_ia_scope_name (ia.scope), ia.resolved_by);
    sb_bus_reply (self->bus, msg, c.reply, c.reply_len);
    sb_ia_free (&ia);
    sb_ia_outbox_pump (self);
}

/* ------------------------------------------------------------------ */
/*  interact.list */

typedef struct {
    const char *session_id, *run_id, *id_prefix;
    ia_status_t status;         /* IA__COUNT: any */
} filter_t;

static bool
s_matches (const filter_t *f, const ia_t *ia)
{
    return (!f->session_id || strcmp (f->session_id, ia->session_id) == 0)
        && (!f->run_id || strcmp (f->run_id, ia->run_id) == 0)
        && (f->status == IA__COUNT || f->status == ia->status)
        && (!f->id_prefix || strncmp (ia->interaction_id, f->id_prefix, strlen (f->id_prefix)) == 0);
}

/*  An id prefix as people give it: "ia_" and the start of a ULID, or the
    start of a ULID alone, in either case. Its ULID part, upper case, into
    out; false when it cannot begin an interaction id. */
bool
sb_ia_id_prefix (const char *p, char out [SB_ULID_LEN + 1])
{
    if (strncasecmp (p, IA_PREFIX, IA_PREFIX_LEN) == 0)
        p += IA_PREFIX_LEN;
    size_t n = strlen (p);
    if (n > SB_ULID_LEN)
        return false;
    for (size_t k = 0; k <= n; k++)
        out [k] = (char) (p [k] >= 'a' && p [k] <= 'z' ? p [k] - 32 : p [k]);
    return n == 0 || sb_ulid_prefix_valid (out);
}

static void
s_handle_list (self_t *self, sb_msg_t *msg)
{
    const sb_val_t *b = msg->body;
    filter_t f = { sb_get_str (b, "session_id"), sb_get_str (b, "run_id"), NULL, IA__COUNT };
    const char *status = sb_get_str (b, "status");
    const char *cursor = sb_get_str (b, "cursor");
    const char *prefix = sb_get_str (b, "id_prefix");
    char upper [SB_ULID_LEN + 1] = "";
    if (status)                 /* a status's name: the schema's ENUM row */
        f.status = sb_ia_status_from_name (status);
    if ((f.session_id && !sb_ulid_valid (f.session_id)) || (f.run_id && !sb_ulid_valid (f.run_id))) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "session_id and run_id must be ids (26-character ULIDs)");
        return;
    }
    if (cursor && !sb_ia_id_valid (cursor)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "cursor must be the next_cursor of a page (an interaction id)");
        return;
    }
    if (prefix && !sb_ia_id_prefix (prefix, upper)) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "id_prefix must be the start of an interaction id");
        return;
    }
    uint64_t limit = sb_get_uint (b, "limit", (uint64_t) sb_schema_default ("interact.list", "limit"));
    /* the most selective index: a run's, a session's, a status's, or all;
       the other filters are checked on each record */
    sb_key_t p;
    if (f.run_id) {
        sb_key_init (&p, 'R');
        sb_key_str (&p, f.run_id);
    }
    else
    if (f.session_id) {
        sb_key_init (&p, 'S');
        sb_key_str (&p, f.session_id);
    }
    else
    if (f.status != IA__COUNT) {
        sb_key_init (&p, 'T');
        sb_key_str (&p, status);
    }
    else
        sb_key_init (&p, 'A');
    size_t ulid_at = p.len;
    /* on the all-index an id prefix is a key range (interact_impl.h);
       elsewhere it is a filter */
    char want_prefix [IA_ID_LEN + 1];
    snprintf (want_prefix, sizeof want_prefix, IA_PREFIX "%s", upper);
    if (*upper) {
        if (p.buf [0] == 'A')
            sb_ia_key_inverted (&p, upper, strlen (upper));
        else
            f.id_prefix = want_prefix;
    }
    sb_key_t start = p;
    if (cursor) {
        start.len = ulid_at;
        sb_ia_key_inverted (&start, cursor + IA_PREFIX_LEN, SB_ULID_LEN);
    }
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0) {
        sb_bus_error (self->bus, msg, SB_E_internal, "store unavailable");
        return;
    }
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_key (e, "interactions");
    sb_enc_array_open (e);
    uint64_t n = 0;
    char last [IA_ID_LEN + 1] = "";
    bool more = false;
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_txn_iter_begin (&txn, &it, DBI_INDEX, p.buf, p.len, cursor ? start.buf : NULL, cursor ? start.len : 0);
    while (sb_txn_iter_next (&it, &k, &v)) {
        if (k.size != ulid_at + SB_ULID_LEN)
            continue;
        char id [IA_ID_LEN + 1];
        s_id_of_key (&k, ulid_at, id);
        if (cursor && strcmp (id, cursor) == 0)
            continue;
        ia_t ia;
        if (sb_ia_load_txn (&txn, id, &ia) != 0)
            continue;
        bool match = s_matches (&f, &ia);
        size_t size;
        sb_enc_data (e, &size);
        if (match && (n == limit || (n > 0 && size > IA_LIST_BYTES_MAX))) {
            more = true;
            sb_ia_free (&ia);
            sb_txn_iter_end (&it);
            break;
        }
        if (match) {
            sb_ia_encode (&ia, e);
            s_copy (last, sizeof last, id);
            n++;
        }
        sb_ia_free (&ia);
    }
    sb_txn_abort (&txn);
    sb_enc_array_close (e);
    if (more)
        sb_enc_kstr (e, "next_cursor", last);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *out = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, msg, out, len);
}

/* ------------------------------------------------------------------ */
/*  Dispatch: every request type the actor serves, and its handler
    (actors/actor.h; tests/unit/test_dispatch.c holds the type column
    against the schemas). */

typedef void (s_handler_fn) (self_t *self, sb_msg_t *msg);

const sb_dispatch_t sb_interact_dispatch [] = {
    SB_DISPATCH ("interact.request", s_handle_request),
    SB_DISPATCH ("interact.get",     s_handle_get),
    SB_DISPATCH ("interact.list",    s_handle_list),
    SB_DISPATCH ("interact.resolve", s_handle_resolve),
    SB_DISPATCH_END
};

/*  On a node of a cluster, an interaction is asked for and resolved only
    on the node that holds its session's shard: elsewhere the request is
    forwarded to the owner (cluster/forward.c), or refused not_owner when
    no bus to it can be made; get and list read the database. So two
    nodes resolving one approval reach one writer, whose first resolve
    wins. False when it took *msg_p. */
static bool
s_owned (self_t *self, sb_msg_t **msg_p, size_t row)
{
    sb_msg_t *msg = *msg_p;
    if (!self->cluster || strcmp (msg->h.type, "interact.get") == 0 || strcmp (msg->h.type, "interact.list") == 0)
        return true;
    char sid [64] = "";
    const char *s = sb_get_str (msg->body, "session_id");
    const char *id = sb_get_str (msg->body, "interaction_id");
    ia_t ia;
    if (s)
        snprintf (sid, sizeof sid, "%s", s);
    else
    if (id && sb_ia_load (self, id, &ia) == 0) {
        snprintf (sid, sizeof sid, "%s", ia.session_id);
        sb_ia_free (&ia);
    }
    if (sb_forward (self->fwd, self->bus, msg_p, sid, (int) row))
        return false;
    return sb_actor_owns (self->bus, msg, self->cluster, sid);
}

/*  A forward taken here after all (its shard came to this node). */
static void
s_take_forwarded (void *arg, sb_msg_t **msg_p, int row)
{
    ((s_handler_fn *) sb_interact_dispatch [row].fn) ((self_t *) arg, *msg_p);
}

static void
s_handle_bus (self_t *self)
{
    sb_msg_t *msg;
    while ((msg = sb_bus_recv (self->bus, 0))) {
        if (msg->route) {
            size_t k = sb_dispatch_index (sb_interact_dispatch, sizeof sb_interact_dispatch [0], msg->h.type);
            const sb_dispatch_t *row = sb_interact_dispatch [k].type ? &sb_interact_dispatch [k] : NULL;
            if (row && !s_owned (self, &msg, k))
                ;
            else
            if (row)
                ((s_handler_fn *) row->fn) (self, msg);
            else
                sb_bus_error (self->bus, msg, SB_E_unknown_type, "interact does not serve %s", msg->h.type);
        }
        else
        if (!sb_ia_outbox_reply (self, msg))
            sb_debug (ACTOR, "unexpected reply type=%s corr=%s", msg->h.type, msg->h.corr);
        sb_msg_destroy (&msg);
    }
}

/* ------------------------------------------------------------------ */

static void
s_self_destroy (self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    sb_forward_destroy (&self->fwd);
    sb_bus_destroy (&self->bus);
    sb_outbox_destroy (&self->outbox);
    sb_store_destroy (&self->store);
    sb_enc_destroy (&self->enc);
    free (self);
    *self_p = NULL;
}

/*  The server's default deadline: serve --approval-deadline S, else
    $SWITCHBOARD_APPROVAL_DEADLINE, else IA_DEADLINE_DEFAULT_S. 0 means no
    deadline. A bad value in the environment is logged and ignored. */
static uint64_t
s_default_deadline (const sb_server_config_t *cfg)
{
    if (cfg && cfg->approval_deadline_set)
        return cfg->approval_deadline_s;
    const char *env = getenv ("SWITCHBOARD_APPROVAL_DEADLINE");
    if (env && *env) {
        char *end;
        unsigned long long v = strtoull (env, &end, 10);
        if (*end == 0 && *env != '-' && v <= IA_DEADLINE_MAX_S)
            return v;
        sb_warn (ACTOR, "SWITCHBOARD_APPROVAL_DEADLINE='%s' is not a number of seconds from 0 to %d; "
                 "using %d", env, IA_DEADLINE_MAX_S, IA_DEADLINE_DEFAULT_S);
    }
    return IA_DEADLINE_DEFAULT_S;
}

static self_t *
s_self_new (zsock_t *pipe, const sb_actor_args_t *args)
{
    self_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "interact");
    char dir [4200], err [512];
    const char *url = args->config ? args->config->store : NULL;
    if (sb_store_locate (url, args->data_dir, "interact", dir, sizeof dir, err, sizeof err) == 0)
        self->store = sb_store_open (dir, s_dbis, IA_SCHEMA_VERSION, 0, err, sizeof err);
    else
        self->store = NULL;
    if (!self->store) {
        sb_error (ACTOR, "cannot open the interact store: %s", err);
        s_self_destroy (&self);
        return NULL;
    }
    self->cluster = args->config ? args->config->cluster : NULL;
    if (self->cluster && !(self->fwd = sb_forward_new (self->cluster, ACTOR, args->data_dir, self->instance,
                                                       s_take_forwarded, self))) {
        s_self_destroy (&self);
        return NULL;
    }
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    if (!self->bus || !self->enc) {
        s_self_destroy (&self);
        return NULL;
    }
    self->deadline_s = s_default_deadline (args->config);
    self->command_ttl_ms = sb_cmdid_ttl_ms (ACTOR);
    /* the outbox numbering continues after the last entry */
    self->outbox_next = sb_ia_outbox_last (self) + 1;
    if (sb_ia_outbox_open (self) != 0) {
        s_self_destroy (&self);
        return NULL;
    }
    return self;
}

void
sb_interact_actor (zsock_t *pipe, void *args)
{
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    sb_verr_t err;
    if (sb_bus_register (self->bus, "interact", self->instance, NULL, 0, 5000, &err)) {
        sb_error (ACTOR, "cannot register: %s", err.message);
        s_self_destroy (&self);
        sb_actor_signal (pipe, 1);
        return;
    }
    /* recovery before the server opens to clients (docs/architecture.md):
       deadlines that passed while the server was down */
    s_expire_due (self);
    /* a pending elicitation stays pending, as an approval does: its run
       is re-queued and asks it again (actors/run/recover.c) */
    sb_actor_signal (pipe, 0);
    sb_info (ACTOR, "ready deadline_s=%llu outbox=%llu", (unsigned long long) self->deadline_s,
             (unsigned long long) (self->outbox_next - 1));
    while (!self->terminated) {
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
        };
        int64_t wait = sb_bus_tick (self->bus);
        int64_t out = sb_ia_outbox_wait (self);
        if (out >= 0 && out < wait)
            wait = out;
        if (self->next_deadline) {
            /* to the deadline, but at least every IA_TIMER_MS: the wall
               clock may step while the loop sleeps */
            int64_t left = (int64_t) self->next_deadline - (int64_t) sb_now_ms ();
            if (left > IA_TIMER_MS)
                left = IA_TIMER_MS;
            if (left < wait)
                wait = left;
        }
        if (sb_forward_wait (self->fwd) < wait)
            wait = sb_forward_wait (self->fwd);
        if (sb_bus_has_queued (self->bus) || wait < 0)
            wait = 0;
        if (zmq_poll (items, 2, (long) wait) < 0 && errno != EINTR)
            break;
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        s_handle_bus (self);
        sb_forward_poll (self->fwd, self->bus);
        if (self->next_deadline && sb_now_ms () >= self->next_deadline)
            s_expire_due (self);
        sb_ia_outbox_pump (self);
    }
    sb_info (ACTOR, "stopping requested=%llu resolved=%llu expired=%llu appended=%llu",
             (unsigned long long) self->requested, (unsigned long long) self->resolved,
             (unsigned long long) self->expired, (unsigned long long) self->appended);
    s_self_destroy (&self);
}

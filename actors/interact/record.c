/*  actors/interact/record.c — the interaction record (its statuses,
    decisions and scopes are schemas/interaction.h's): its encoding, reads
    of DATA/interact, and the one write that keeps the record, its indexes and its tape
    announcement in step (interact_impl.h has the layout). */
#include "common/digest.h"
#include "actors/interact/interact_impl.h"
#include "store/cmdid.h"

#include <errno.h>

bool
sb_ia_id_valid (const char *id)
{
    return id && strlen (id) == IA_ID_LEN && strncmp (id, IA_PREFIX, IA_PREFIX_LEN) == 0
        && sb_ulid_valid (id + IA_PREFIX_LEN);
}

void
sb_ia_free (ia_t *ia)
{
    free (ia->arguments);
    free (ia->summary);
    free (ia->diff);
    free (ia->feedback);
    free (ia->schema);
    free (ia->content);
    ia->arguments = ia->summary = ia->diff = ia->feedback = ia->schema = ia->content = NULL;
}

void
sb_ia_key_inverted (sb_key_t *k, const char *ulid, size_t n)
{
    uint8_t inv [SB_ULID_LEN];
    if (n > sizeof inv)
        n = sizeof inv;
    for (size_t i = 0; i < n; i++)
        inv [i] = (uint8_t) (255 - (uint8_t) ulid [i]);
    sb_key_bytes (k, inv, n);
}

/* ------------------------------------------------------------------ */
/*  Encoding */

/*  An elicitation's own fields: its kind and schema while asked (with
    the schema), its action and content once answered. */
static void
s_encode_elicitation (const ia_t *ia, sb_enc_t *e, bool with_schema)
{
    sb_enc_kstr (e, "kind", sb_ia_kind_name (ia->kind));
    if (with_schema)
        sb_enc_kstr (e, "schema", ia->schema ? ia->schema : "{}");
    if (ia->status != IA_PENDING) {
        sb_enc_kstr (e, "action", sb_ia_action_name (ia->action));
        sb_enc_kstr_opt (e, "content", ia->content);
    }
}

static void
s_encode (const ia_t *ia, sb_enc_t *e, bool stored)
{
    bool resolved = ia->status != IA_PENDING;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "interaction_id", ia->interaction_id);
    sb_enc_kstr (e, "session_id", ia->session_id);
    sb_enc_kstr (e, "run_id", ia->run_id);
    sb_enc_kstr (e, "call_id", ia->call_id);
    sb_enc_kstr (e, "tool", ia->tool);
    sb_enc_kstr (e, "arguments", ia->arguments ? ia->arguments : "");
    sb_enc_kstr_opt (e, "summary", ia->summary);
    sb_enc_kstr_opt (e, "diff", ia->diff);
    if (ia->risk [0])
        sb_enc_kstr (e, "risk", ia->risk);
    sb_enc_kstr (e, "status", sb_ia_status_name (ia->status));
    if (resolved) {
        sb_enc_kstr (e, "decision", sb_ia_decision_name (ia->decision));
        sb_enc_kstr (e, "scope", sb_ia_scope_name (ia->scope));
        sb_enc_kstr_opt (e, "feedback", ia->feedback);
        sb_enc_kstr (e, "resolved_by", ia->resolved_by);
        sb_enc_kuint (e, "resolved_at", ia->resolved_at);
    }
    sb_enc_kuint (e, "created_at", ia->created_at);
    if (ia->deadline_at)
        sb_enc_kuint (e, "deadline_at", ia->deadline_at);
    sb_enc_kstr (e, "default_outcome", sb_ia_decision_name (ia->default_outcome));
    if (ia->kind == IA_KIND_BUDGET) {
        sb_enc_kstr (e, "kind", sb_ia_kind_name (ia->kind));
        sb_enc_kstr (e, "budget", sb_ia_budget_name (ia->budget));
        sb_enc_kuint (e, "spent", ia->spent);
        sb_enc_kuint (e, "limit", ia->limit);
        if (ia->raise)
            sb_enc_kuint (e, "raise", ia->raise);
    }
    if (ia->kind == IA_KIND_ELICITATION)
        s_encode_elicitation (ia, e, true);
    if (stored && ia->command_id [0])
        sb_enc_kstr (e, "command_id", ia->command_id);
    sb_enc_map_close (e);
}

void
sb_ia_encode (const ia_t *ia, sb_enc_t *e)
{
    s_encode (ia, e, false);
}

static char *
s_dup (const char *s)
{
    return s ? strdup (s) : NULL;
}

/*  A stored record back into *ia. The store holds only what this actor
    wrote, but a record it cannot read is reported, never guessed at. */
static int
s_decode (const char *id, const void *data, size_t len, ia_t *ia)
{
    memset (ia, 0, sizeof *ia);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, NULL, 64u << 20, &err);
    const sb_val_t *m = sb_doc_root (doc);
    if (!m) {
        sb_error (ACTOR, "unreadable interaction record id=%s: %s", id, err.message);
        return -1;
    }
    s_copy (ia->interaction_id, sizeof ia->interaction_id, sb_get_str (m, "interaction_id"));
    s_copy (ia->session_id, sizeof ia->session_id, sb_get_str (m, "session_id"));
    s_copy (ia->run_id, sizeof ia->run_id, sb_get_str (m, "run_id"));
    s_copy (ia->call_id, sizeof ia->call_id, sb_get_str (m, "call_id"));
    s_copy (ia->tool, sizeof ia->tool, sb_get_str (m, "tool"));
    s_copy (ia->risk, sizeof ia->risk, sb_get_str (m, "risk"));
    s_copy (ia->resolved_by, sizeof ia->resolved_by, sb_get_str (m, "resolved_by"));
    s_copy (ia->command_id, sizeof ia->command_id, sb_get_str (m, "command_id"));
    ia->arguments = strdup (sb_get_str (m, "arguments") ? sb_get_str (m, "arguments") : "");
    ia->summary = s_dup (sb_get_str (m, "summary"));
    ia->diff = s_dup (sb_get_str (m, "diff"));
    ia->feedback = s_dup (sb_get_str (m, "feedback"));
    ia->status = sb_ia_status_from_name (sb_get_str (m, "status"));
    ia->decision = sb_ia_decision_from_name (sb_get_str (m, "decision"));
    ia->scope = sb_ia_scope_from_name (sb_get_str (m, "scope"));
    ia->default_outcome = sb_ia_decision_from_name (sb_get_str (m, "default_outcome"));
    ia->created_at = sb_get_uint (m, "created_at", 0);
    ia->resolved_at = sb_get_uint (m, "resolved_at", 0);
    ia->deadline_at = sb_get_uint (m, "deadline_at", 0);
    ia->kind = sb_get_str (m, "kind") ? sb_ia_kind_from_name (sb_get_str (m, "kind")) : IA_KIND_APPROVAL;
    ia->budget = sb_ia_budget_from_name (sb_get_str (m, "budget"));
    ia->spent = sb_get_uint (m, "spent", 0);
    ia->limit = sb_get_uint (m, "limit", 0);
    ia->raise = sb_get_uint (m, "raise", 0);
    ia->schema = s_dup (sb_get_str (m, "schema"));
    ia->content = s_dup (sb_get_str (m, "content"));
    ia->action = sb_get_str (m, "action") ? sb_ia_action_from_name (sb_get_str (m, "action")) : IA_ACTION_CANCEL;
    sb_doc_destroy (&doc);
    if (ia->kind == IA__KINDS || (ia->kind == IA_KIND_BUDGET && ia->budget == IA__BUDGETS)
    ||  (ia->kind == IA_KIND_ELICITATION && (!ia->schema || ia->action == IA__ACTIONS))) {
        sb_error (ACTOR, "interaction record id=%s has an unknown kind, budget or action", id);
        sb_ia_free (ia);
        return -1;
    }
    if (!ia->arguments || strcmp (ia->interaction_id, id) != 0 || ia->status == IA__COUNT
    ||  ia->default_outcome == IA__DECISIONS
    ||  (ia->status != IA_PENDING && (ia->decision == IA__DECISIONS || ia->scope == IA__SCOPES))) {
        sb_error (ACTOR, "interaction record id=%s is incomplete", id);
        sb_ia_free (ia);
        return -1;
    }
    return 0;
}

int
sb_ia_load_txn (sb_txn_t *txn, const char *id, ia_t *ia)
{
    if (!sb_ia_id_valid (id))
        return -1;
    sb_key_t k;
    sb_key_init (&k, 'I');
    sb_key_str (&k, id);
    sb_datum_t v;
    if (sb_txn_get (txn, DBI_INTERACTIONS, k.buf, k.len, &v) != 0)
        return -1;
    return s_decode (id, v.data, v.size, ia);
}

int
sb_ia_load (self_t *self, const char *id, ia_t *ia)
{
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0)
        return -1;
    int rc = sb_ia_load_txn (&txn, id, ia);
    sb_txn_abort (&txn);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  The write */

/*  The command_id of an announcement: "ia:" + the interaction's ULID + ":"
    + 128 random bits, drawn when the entry is written and stored with it,
    as actors/run/outbox.c does. A resend after a crash sends the stored
    entry, id and all, and the session actor recognises it; an id others
    could predict from the tape would let any client append under it first
    and have the real announcement dropped as a duplicate. 3 + 26 + 1 + 32
    = 62 bytes, within the schema's 64.
    (common/digest.h gives the random part.) */
static void
s_command_id (const ia_t *ia, char *out, size_t n)
{
    char hex [SB_NONCE_HEX + 1];
    sb_nonce_hex (hex);
    snprintf (out, n, "ia:%s:%s", ia->interaction_id + IA_PREFIX_LEN, hex);
}

/*  The session.append body that announces the record's current state. */
static void
s_encode_announcement (const ia_t *ia, sb_enc_t *e)
{
    char cmd [80];
    s_command_id (ia, cmd, sizeof cmd);
    bool requested = ia->status == IA_PENDING;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", ia->session_id);
    sb_enc_kstr (e, "run_id", ia->run_id);
    sb_enc_kstr (e, "command_id", cmd);
    sb_enc_kstr (e, "kind", requested ? "approval.requested" : "approval.resolved");
    sb_enc_key (e, "body");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "interaction_id", ia->interaction_id);
    sb_enc_kstr (e, "call_id", ia->call_id);
    if (requested) {
        sb_enc_kstr (e, "tool", ia->tool);
        sb_enc_kstr (e, "arguments", ia->arguments);
        sb_enc_kstr_opt (e, "summary", ia->summary);
        sb_enc_kstr_opt (e, "diff", ia->diff);
        if (ia->risk [0])
            sb_enc_kstr (e, "risk", ia->risk);
        if (ia->deadline_at)
            sb_enc_kuint (e, "deadline_at", ia->deadline_at);
        sb_enc_kstr (e, "default_outcome", sb_ia_decision_name (ia->default_outcome));
        if (ia->kind == IA_KIND_BUDGET) {
            sb_enc_kstr (e, "kind", sb_ia_kind_name (ia->kind));
            sb_enc_kstr (e, "budget", sb_ia_budget_name (ia->budget));
            sb_enc_kuint (e, "spent", ia->spent);
            sb_enc_kuint (e, "limit", ia->limit);
        }
        if (ia->kind == IA_KIND_ELICITATION)
            s_encode_elicitation (ia, e, true);
    }
    else {
        sb_enc_kstr (e, "status", sb_ia_status_name (ia->status));
        sb_enc_kstr (e, "decision", sb_ia_decision_name (ia->decision));
        sb_enc_kstr (e, "scope", sb_ia_scope_name (ia->scope));
        sb_enc_kstr (e, "resolved_by", ia->resolved_by);
        sb_enc_kstr_opt (e, "feedback", ia->feedback);
        if (ia->kind == IA_KIND_BUDGET) {
            sb_enc_kstr (e, "kind", sb_ia_kind_name (ia->kind));
            if (ia->raise)
                sb_enc_kuint (e, "raise", ia->raise);
        }
        if (ia->kind == IA_KIND_ELICITATION)
            s_encode_elicitation (ia, e, false);
    }
    sb_enc_map_close (e);
    sb_enc_map_close (e);
}

typedef struct {
    self_t *self;
    const ia_t *ia;
    bool is_new;
    ia_status_t old_status;
    const ia_command_t *cmd;
    uint64_t now;
    uint64_t outbox_n;
} write_ctx_t;

/*  Expired command_ids swept by one save. Each resolve remembers one, so
    a few more than one keeps the table at what the TTL holds. */
#define IA_SWEEP_MAX 16

void
sb_ia_command_key (sb_key_t *k, const char *id, const char *cmd)
{
    sb_cmdid_key (k, &id, 1, cmd);
}

static void
s_index_key (sb_key_t *k, char tag, const char *field, const ia_t *ia)
{
    sb_key_init (k, tag);
    if (field)
        sb_key_str (k, field);
    sb_ia_key_inverted (k, ia->interaction_id + IA_PREFIX_LEN, SB_ULID_LEN);
}

static void
s_deadline_key (sb_key_t *k, const ia_t *ia)
{
    sb_key_init (k, 'D');
    sb_key_u64 (k, ia->deadline_at);
    sb_key_str (k, ia->interaction_id);
}

/*  Re-runnable (sb_store_write): everything comes from ctx and the txn. */
static int
s_write_fn (sb_txn_t *txn, void *arg)
{
    write_ctx_t *w = arg;
    const ia_t *ia = w->ia;
    /* the fence: the session's shard must still be this node's */
    if (sb_cluster_fence (w->self->cluster, txn, sb_cluster_shard_bit (ia->session_id)) != 0)
        return txn->ret;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return -1;
    s_encode (ia, e, true);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_key_t k;
    sb_key_init (&k, 'I');
    sb_key_str (&k, ia->interaction_id);
    sb_txn_put (txn, DBI_INTERACTIONS, k.buf, k.len, data, len);
    if (w->is_new) {
        sb_key_init (&k, 'K');
        sb_key_str (&k, ia->run_id);
        sb_key_str (&k, ia->call_id);
        sb_txn_put (txn, DBI_BYCALL, k.buf, k.len, ia->interaction_id, strlen (ia->interaction_id));
        s_index_key (&k, 'A', NULL, ia);
        sb_txn_put (txn, DBI_INDEX, k.buf, k.len, "", 0);
        s_index_key (&k, 'S', ia->session_id, ia);
        sb_txn_put (txn, DBI_INDEX, k.buf, k.len, "", 0);
        s_index_key (&k, 'R', ia->run_id, ia);
        sb_txn_put (txn, DBI_INDEX, k.buf, k.len, "", 0);
    }
    else {
        s_index_key (&k, 'T', sb_ia_status_name (w->old_status), ia);
        if (sb_txn_del (txn, DBI_INDEX, k.buf, k.len) == SB_STORE_NOTFOUND)
            sb_warn (ACTOR, "status index entry missing id=%s", ia->interaction_id);
    }
    s_index_key (&k, 'T', sb_ia_status_name (ia->status), ia);
    sb_txn_put (txn, DBI_INDEX, k.buf, k.len, "", 0);
    if (ia->deadline_at) {
        s_deadline_key (&k, ia);
        if (ia->status == IA_PENDING)
            sb_txn_put (txn, DBI_DEADLINES, k.buf, k.len, "", 0);
        else
            sb_txn_del (txn, DBI_DEADLINES, k.buf, k.len);
    }
    /* the announcement, sent after the commit (outbox.c) */
    sb_enc_reset (e);
    s_encode_announcement (ia, e);
    data = sb_enc_data (e, &len);
    w->outbox_n = w->self->outbox_next;
    sb_outbox_key (&k, w->outbox_n);
    sb_txn_put (txn, DBI_OUTBOX, k.buf, k.len, data, len);
    if (w->cmd) {
        const ia_command_t *c = w->cmd;
        sb_ia_command_key (&k, ia->interaction_id, c->cmd);
        if (sb_key_valid (&k))
            sb_cmdid_remember (txn, DBI_COMMANDS, DBI_COMMANDS, &k, c->type, c->digest, c->reply,
                               c->reply_len, w->now + w->self->command_ttl_ms, e);
        uint64_t next;
        sb_cmdid_sweep (txn, DBI_COMMANDS, DBI_COMMANDS, w->now, IA_SWEEP_MAX, &next);
    }
    sb_enc_destroy (&e);
    return txn->ret;
}

static int
s_save (self_t *self, write_ctx_t *w)
{
    int rc = sb_store_write (self->store, s_write_fn, w);
    if (rc) {
        sb_error (ACTOR, "cannot save interaction %s: %s", w->ia->interaction_id, sb_store_strerror (rc));
        return rc;
    }
    self->outbox_next = w->outbox_n + 1;
    if (self->outbox)
        sb_outbox_durable (self->outbox, w->outbox_n);
    return 0;
}

int
sb_ia_save (self_t *self, ia_t *ia, bool is_new, ia_status_t old_status)
{
    write_ctx_t w = { .self = self, .ia = ia, .is_new = is_new, .old_status = old_status };
    return s_save (self, &w);
}

int
sb_ia_save_command (self_t *self, ia_t *ia, ia_status_t old_status, const ia_command_t *cmd)
{
    write_ctx_t w = { .self = self, .ia = ia, .old_status = old_status, .cmd = cmd, .now = sb_now_ms () };
    return s_save (self, &w);
}

/*  actors/session/requests.c — the session service's requests, one by one.

    Each request goes through up to three steps (actors/session.c runs
    them for a whole drain):
      1. sb_session_prepare: the checks that need no store (field values,
         the workspace, each tape entry against its kind's schema); a
         failure here is final;
      2. writes (create, update, close, delete, fence, append) inside the
         drain's one transaction, through sb_session_drain_fn, which must
         be re-runnable: it produces replies and entries into buffers that
         each run resets, and sends nothing;
      3. reads (get, list, events), from a read transaction after the
         commit: actors/session/reads.c.
    Each request type's row in sb_session_ops (actors/session.c) names
    the functions of its steps. */
#include "actors/session/session_impl.h"
#include "schemas/types.h"
#include "schemas/run_status.h"
#include "schemas/approval_policy.h"
#include "schemas/vocab.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <sys/stat.h>

/*  A session's run target: "local", or "worker:POOL" with a pool name
    of 1 to 64 bytes of [A-Za-z0-9._-] (docs/workers.md). */
static bool
s_target_ok (const char *t)
{
    if (strcmp (t, "local") == 0)
        return true;
    if (strncmp (t, "worker:", 7) != 0)
        return false;
    size_t n = strlen (t + 7);
    if (n < 1 || n > 64)
        return false;
    for (const char *c = t + 7; *c; c++)
        if (!isalnum ((unsigned char) *c) && *c != '.' && *c != '_' && *c != '-')
            return false;
    return true;
}

//  A string field, checked for embedded NUL bytes: a key built from it
//  must name exactly what the client sent.
static const char *
s_clean_str (const sb_val_t *body, const char *name, bool *bad)
{
    const sb_val_t *v = sb_get (body, name);
    if (!v || v->type != SB_V_STR)
        return NULL;
    if (strlen (v->v.s) != v->len)
        *bad = true;
    return v->v.s;
}

//  --------------------------------------------------------------------------
//  Checks made before the transaction

//  Approval rules (docs/approvals.md): the schema bounds their sizes;
//  the action and the globs' lengths are checked here, as exec reads them.
static int
s_prepare_rules (req_t *req, const char *field)
{
    const sb_val_t *rules = sb_get_array (req->msg->body, field);
    for (uint32_t k = 0; rules && k < rules->len; k++) {
        const sb_val_t *r = sb_array_at (rules, k);
        const char *why = sb_policy_rule_check (sb_get_str (r, "tool"), sb_get_str (r, "pattern"),
                                                sb_get_str (r, "action"));
        if (why) {
            sb_session_fail (req, SB_E_invalid, "%s[%u]: %s", field, k, why);
            return -1;
        }
    }
    return 0;
}

static bool
s_rule_same (const sb_val_t *a, const sb_val_t *b)
{
    static const char *const f [] = { "tool", "pattern", "action" };
    for (int k = 0; k < 3; k++) {
        const char *x = sb_get_str (a, f [k]), *y = sb_get_str (b, f [k]);
        if (!x || !y || strcmp (x, y) != 0)
            return false;
    }
    return true;
}

//  The rules after an update: `rules` replaces the list, then each of
//  `add_rules` is appended (an identical rule already there moves to the
//  end, where it wins). The new array lives in the drain's arena; its
//  items are the maps of the record and the request, which outlive the
//  drain's replies. Returns 1 when the rules changed, 0 when not, -1 with
//  req failed.
static int
s_update_rules (self_t *self, req_t *req, record_t *r)
{
    const sb_val_t *b = req->msg->body;
    const sb_val_t *set = sb_get_array (b, "rules"), *add = sb_get_array (b, "add_rules");
    if (!set && !add)
        return 0;
    const sb_val_t *base = set? set: r->rules;
    size_t nbase = base? base->len: 0, nadd = add? add->len: 0;
    sb_val_t *items = sb_session_alloc (self, (nbase + nadd + 1) * sizeof *items);
    sb_val_t *arr = sb_session_alloc (self, sizeof *arr);
    if (!items || !arr) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return -1;
    }
    size_t n = 0;
    for (size_t k = 0; k < nbase; k++)
        items [n++] = *sb_array_at (base, (uint32_t) k);
    for (size_t k = 0; k < nadd; k++) {
        const sb_val_t *rule = sb_array_at (add, (uint32_t) k);
        for (size_t j = 0; j < n; j++)
            if (s_rule_same (&items [j], rule)) {
                memmove (&items [j], &items [j + 1], (n - j - 1) * sizeof *items);
                n--;
                break;
            }
        items [n++] = *rule;
    }
    if (n > SB_POLICY_RULES_MAX) {
        sb_session_fail (req, SB_E_invalid, "a session holds at most %d rules; this update would make %zu "
                         "(--clear-rules starts again)", SB_POLICY_RULES_MAX, n);
        return -1;
    }
    bool same = (r->rules? r->rules->len: 0) == n;
    for (size_t k = 0; same && k < n; k++)
        same = s_rule_same (sb_array_at (r->rules, (uint32_t) k), &items [k]);
    if (same)
        return 0;
    *arr = (sb_val_t) { .type = SB_V_ARRAY, .len = (uint32_t) n, .v.a = items };
    r->rules = n? arr: NULL;
    return 1;
}

//  The config fields of create and update. An empty string in an update
//  clears an optional field.
static void
s_prepare_config (self_t *self, req_t *req, bool creating)
{
    const sb_val_t *b = req->msg->body;
    const char *ws = sb_get_str (b, "workspace");
    if (ws) {
        char real [PATH_MAX];
        struct stat st;
        if (!*ws) {
            sb_session_fail (req, SB_E_invalid, "workspace must not be empty");
            return;
        }
        if (!realpath (ws, real)) {
            sb_session_fail (req, SB_E_invalid, "workspace %s: %s", ws, strerror (errno));
            return;
        }
        if (stat (real, &st) != 0 || !S_ISDIR (st.st_mode)) {
            sb_session_fail (req, SB_E_invalid, "workspace %s is not a directory", real);
            return;
        }
        if (!(req->workspace = sb_session_strdup (self, real))) {
            sb_session_fail (req, SB_E_internal, "out of memory");
            return;
        }
    }
    else
    if (creating) {
        sb_session_fail (req, SB_E_invalid, "workspace is required");
        return;
    }

    //  approval_policy is "" or a mode: the schema's ENUM row checked it.
    const char *target = sb_get_str (b, "target");
    if (target && *target && !s_target_ok (target)) {
        sb_session_fail (req, SB_E_invalid, "target must be local or worker:POOL, not '%.72s'", target);
        return;
    }
    const sb_val_t *steps = sb_get (b, "max_steps");
    if (steps && (steps->v.u < 1 || steps->v.u > MAX_STEPS_MAX)) {
        sb_session_fail (req, SB_E_invalid, "max_steps must be between 1 and %d", MAX_STEPS_MAX);
        return;
    }
    if (s_prepare_rules (req, "rules") || s_prepare_rules (req, "add_rules")
    ||  !sb_session_mcp_servers_ok (req, sb_get_array (b, "mcp_servers")))
        return;
    const sb_val_t *labels = sb_get_map (b, "labels");
    for (uint32_t k = 0; labels && k < labels->len; k++) {
        const sb_val_t *key = sb_map_key (labels, k), *val = sb_map_val (labels, k);
        if (key->type != SB_V_STR || key->len == 0 || key->len > LABEL_KEY_MAX) {
            sb_session_fail (req, SB_E_invalid, "labels: keys must be strings of 1 to %d bytes",
                             LABEL_KEY_MAX);
            return;
        }
        if (val->type != SB_V_STR || val->len > LABEL_VALUE_MAX) {
            sb_session_fail (req, SB_E_invalid, "labels.%s must be a string of at most %d bytes",
                             key->v.s, LABEL_VALUE_MAX);
            return;
        }
    }
}

//  Checks one entry against its kind's schema and encodes its body into
//  self->prep. index < 0: the single form.
static void
s_prepare_entry (self_t *self, req_t *req, long index, const char *kind, const sb_val_t *body)
{
    char where [32] = "";
    if (index >= 0)
        snprintf (where, sizeof where, "entries[%ld].", index);
    const sb_type_t *t = kind? sb_schema_tape_kind (kind): NULL;
    if (!kind) {
        sb_session_fail (req, SB_E_invalid, "%skind is required", where);
        return;
    }
    if (!t) {
        sb_session_fail (req, SB_E_invalid, "%skind: unknown tape entry kind '%.40s'", where, kind);
        return;
    }
    //  The session's own entries are its record's history; nobody else
    //  may write them. session.rewound is not: the executor that put the
    //  work tree back writes it (actors/exec/rewind.c), and its scope
    //  keeps it from a worker's key.
    if ((strncmp (kind, "session.", 8) == 0 && strcmp (kind, "session.rewound") != 0)
    ||  strcmp (kind, "tape.quota") == 0) {
        sb_session_fail (req, SB_E_invalid, "%skind: %s entries are written by the session service only",
                         where, kind);
        return;
    }
    size_t off, end;
    sb_enc_data (self->prep, &off);
    if (body)
        sb_enc_val (self->prep, body);
    else {
        sb_enc_map_open (self->prep);
        sb_enc_map_close (self->prep);
    }
    const uint8_t *data = sb_enc_data (self->prep, &end);
    sb_verr_t verr;
    if (sb_validate (data + off, end - off, t->fields, t->max_bytes? t->max_bytes: ENTRY_BYTES_MAX,
                     NULL, &verr) != 0) {
        sb_session_fail (req, SB_E_invalid, "%sbody of %s: %s", where, kind, verr.message);
        return;
    }
    if (!sb_session_reserve ((void **) &self->spans, &self->spans_cap, self->nspans, sizeof (span_t))) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    self->spans [self->nspans++] = (span_t) { kind, body, off, end - off };
    req->nspans++;
}

void
sb_session_prepare_append (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    const char *kind = sb_get_str (b, "kind");
    const sb_val_t *body = sb_get_map (b, "body");
    const sb_val_t *entries = sb_get_array (b, "entries");
    bool bad = false;
    req->run_id = s_clean_str (b, "run_id", &bad);
    if (bad) {
        sb_session_fail (req, SB_E_invalid, "run_id must not contain NUL bytes");
        return;
    }
    const sb_val_t *fence = sb_get (b, "fence");
    req->has_fence = fence != NULL;
    req->fence = fence? fence->v.u: 0;
    if (entries && (kind || body)) {
        sb_session_fail (req, SB_E_invalid, "give kind and body, or entries, not both");
        return;
    }
    if (!entries && !kind) {
        sb_session_fail (req, SB_E_invalid, "kind is required (or entries, for a batch)");
        return;
    }
    if (entries && entries->len == 0) {
        sb_session_fail (req, SB_E_invalid, "entries is empty");
        return;
    }
    req->span0 = self->nspans;
    req->batch_form = entries != NULL;
    if (!entries) {
        s_prepare_entry (self, req, -1, kind, body);
        return;
    }
    for (uint32_t k = 0; k < entries->len && !req->prep_err && !req->err; k++) {
        const sb_val_t *e = sb_array_at (entries, k);
        s_prepare_entry (self, req, (long) k, sb_get_str (e, "kind"), sb_get_map (e, "body"));
    }
}

//  Where req's command_id is remembered, and the digest of its body: a
//  retry is the same request only when it repeats the body, so an id
//  reused for something else is refused instead of answered with what it
//  named before (store.c, sb_session_command_replay).
static void
s_prepare_command (self_t *self, req_t *req)
{
    if (req->op == OP_CREATE) {
        req->cmd_sid = "";
        req->cmd_from = req->msg->h.from;
    }
    else {
        req->cmd_sid = req->sid;
        req->cmd_from = "";
    }
    sb_digest_t *digest = sb_digest_new ();
    if (!digest) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    if (req->op == OP_APPEND) {
        //  An append is digested as it will be written: its form, run_id,
        //  fence and each entry's kind and encoded body (a missing body is
        //  the empty map it is stored as). No second encoding of a large
        //  body is needed: the prepared bodies are in self->prep.
        uint8_t head [11] = { req->batch_form, req->has_fence, req->run_id != NULL };
        for (int i = 0; i < 8; i++)
            head [3 + i] = (uint8_t) (req->fence >> (56 - 8 * i));
        sb_digest_update (digest, head, sizeof head);
        if (req->run_id)
            sb_digest_update (digest, (const uint8_t *) req->run_id, strlen (req->run_id) + 1);
        const uint8_t *prep = sb_enc_data (self->prep, &(size_t) { 0 });
        for (size_t k = 0; k < req->nspans; k++) {
            const span_t *sp = &self->spans [req->span0 + k];
            uint8_t len [8];
            for (int i = 0; i < 8; i++)
                len [i] = (uint8_t) ((uint64_t) sp->len >> (56 - 8 * i));
            sb_digest_update (digest, (const uint8_t *) sp->kind, strlen (sp->kind) + 1);
            sb_digest_update (digest, len, sizeof len);
            sb_digest_update (digest, prep + sp->off, sp->len);
        }
    }
    else {
        sb_enc_reset (self->scratch);
        sb_enc_val (self->scratch, req->msg->body);
        size_t len;
        const uint8_t *data = sb_enc_data (self->scratch, &len);
        sb_digest_update (digest, data, len);
    }
    sb_digest_final (digest, req->cmd_digest);
    sb_digest_destroy (&digest);
}

//  A new session's id into `id`: on a node of a cluster, one of a shard
//  this node holds, so that its creator can go on writing it (a ULID's
//  random part is drawn again; a node holds at least one shard whenever
//  it serves, so this ends, 64 draws at most on average). False, with the
//  request failed, when the node holds no shard yet. session.create and
//  session.fork both make one.
bool
sb_session_new_id (self_t *self, req_t *req, char id [SB_ULID_LEN + 1])
{
    sb_ulid_new (id);
    for (int k = 0; k < 4096 && !sb_cluster_holds (self->cluster, id); k++)
        sb_ulid_new (id);
    if (sb_cluster_holds (self->cluster, id))
        return true;
    sb_session_fail (req, SB_E_not_owner, "this node holds no shard of the cluster yet; retry");
    return false;
}

//  session.create: a new id, and the config as given.
void
sb_session_prepare_create (self_t *self, req_t *req)
{
    char id [SB_ULID_LEN + 1];
    if (!sb_session_new_id (self, req, id))
        return;
    if (!(req->sid = sb_session_strdup (self, id)))
        sb_session_fail (req, SB_E_internal, "out of memory");
    else
        s_prepare_config (self, req, true);
}

//  session.update: the fields it changes.
void
sb_session_prepare_update (self_t *self, req_t *req)
{
    s_prepare_config (self, req, false);
}

//  On a node of a cluster, a write of a session whose shard another node
//  holds is refused before the transaction (the fence in the drain would
//  refuse the whole drain with it), naming the owner. Reads are served
//  from the database, whoever owns the session.
static bool
s_holds (self_t *self, req_t *req)
{
    if (sb_cluster_holds (self->cluster, req->sid))
        return true;
    char line [256];
    sb_cluster_owner_line (self->cluster, req->sid, line, sizeof line);
    sb_session_fail (req, SB_E_not_owner, "%s", line);
    return false;
}

//  Everything about a request that does not depend on the store: the
//  checks every request has, then its row's (sb_session_ops). The
//  failures found here are final: the write function skips the request.
void
sb_session_prepare (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    bool bad = false;
    req->cmd = s_clean_str (b, "command_id", &bad);
    if (bad || (req->cmd && !*req->cmd))
        sb_session_fail (req, SB_E_invalid, "command_id must be a non-empty string without NUL bytes");
    else
    if (req->addressed) {
        const sb_val_t *v = sb_get (b, "session_id");
        if (!v || v->type != SB_V_STR || v->len != SB_ULID_LEN || !sb_ulid_valid (v->v.s))
            sb_session_fail (req, SB_E_invalid,
                             "session_id '%.40s' is not a session id (a 26-character ULID)",
                             v && v->type == SB_V_STR? v->v.s: "");
        else
            req->sid = v->v.s;
    }
    if (!req->err && req->write && req->sid && !s_holds (self, req))
        ;
    else
    if (!req->err && sb_session_ops [req->op].prepare)
        sb_session_ops [req->op].prepare (self, req);
    //  The actor's own requests carry their command's digest already.
    if (!req->err && req->cmd && req->write && !req->internal)
        s_prepare_command (self, req);
    req->prep_err = req->err;
}

//  --------------------------------------------------------------------------
//  Writes, inside the drain's transaction

static bool
s_record_closed (const record_t *r)
{
    return sb_session_status_from_name (r->status) == SB_SESSION_CLOSED;
}

static void
s_reply_record (self_t *self, req_t *req, const record_t *r)
{
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    sb_enc_key (self->replies, "session");
    sb_session_record_encode (self->replies, r);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

static void
s_put_status (sb_txn_t *txn, const char *status, const char *sid, bool add)
{
    sb_key_t k;
    s_key_status (&k, status, sid);
    if (add)
        sb_txn_put (txn, DBI_STATUS, k.buf, k.len, NULL, 0);
    else
        sb_txn_del (txn, DBI_STATUS, k.buf, k.len);
}

void
sb_session_write_create (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    record_t *r = sb_session_record_new (self, req->sid);
    if (!r) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    const char *s;
    r->created_at = r->updated_at = self->now;
    r->status = "active";
    r->turn_status = "idle";
    r->workspace = req->workspace;
    r->title = (s = sb_get_str (b, "title")) && *s? s: NULL;
    r->provider = (s = sb_get_str (b, "provider")) && *s? s: NULL;
    r->model = (s = sb_get_str (b, "model")) && *s? s: NULL;
    r->approval_policy = (s = sb_get_str (b, "approval_policy")) && *s? s: NULL;
    r->target = (s = sb_get_str (b, "target")) && *s? s: NULL;
    r->max_steps = sb_get_uint (b, "max_steps", 0);
    r->labels = sb_get_map (b, "labels");
    const sb_val_t *rules = sb_get_array (b, "rules");
    r->rules = rules && rules->len? rules: NULL;
    const sb_val_t *deadline = sb_get (b, "approval_deadline_s");
    r->has_deadline = deadline != NULL;
    r->approval_deadline_s = deadline? deadline->v.u: 0;
    r->mcp_servers = sb_session_mcp_servers (sb_get_array (b, "mcp_servers"));
    r->network = sb_get_bool (b, "network", false);
    r->mcp_sampling = sb_get_bool (b, "mcp_sampling", false);
    sb_session_budget_take (r, sb_get_map (b, "budget"));
    r->config_version = 1;
    r->last_activity_at = self->now;
    s_put_status (txn, "active", r->session_id, true);
    sb_session_tape_put_record (self, txn, req, r, "session.created", NULL, 0);
    s_reply_record (self, req, r);
}

//  Sets *field from the request when present; "" clears it. Returns true
//  when the value changed.
static bool
s_update_str (const sb_val_t *b, const char *name, const char **field)
{
    const char *s = sb_get_str (b, name);
    if (!s)
        return false;
    const char *now = *s? s: NULL;
    if ((now == NULL) == (*field == NULL) && (!now || strcmp (now, *field) == 0))
        return false;
    *field = now;
    return true;
}

void
sb_session_write_update (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    record_t *r = sb_session_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    if (s_record_closed (r)) {
        sb_session_fail (req, SB_E_conflict, "session %s is closed", req->sid);
        return;
    }
    //  Each update writes a session.updated entry, so updates count
    //  against the quota as appends do: a client that sends them in a
    //  loop fills nothing past it (one entry's worth at most).
    if (r->tape_bytes >= self->tape_quota) {
        sb_session_fail (req, SB_E_too_large,
                         "session %s reached its tape quota of %llu bytes (%llu used); raise it with "
                         "serve --session-quota BYTES or SWITCHBOARD_SESSION_QUOTA", req->sid,
                         (unsigned long long) self->tape_quota, (unsigned long long) r->tape_bytes);
        return;
    }
    //  The one change that can fail goes first, so that a refused
    //  update leaves the cached record as it was.
    int rules = s_update_rules (self, req, r);
    if (rules < 0)
        return;
    const char *changed [16];
    size_t n = 0;
    if (s_update_str (b, "title", &r->title))
        changed [n++] = "title";
    if (req->workspace && strcmp (req->workspace, r->workspace) != 0) {
        r->workspace = req->workspace;
        changed [n++] = "workspace";
    }
    if (s_update_str (b, "provider", &r->provider))
        changed [n++] = "provider";
    if (s_update_str (b, "model", &r->model))
        changed [n++] = "model";
    if (s_update_str (b, "approval_policy", &r->approval_policy))
        changed [n++] = "approval_policy";
    if (s_update_str (b, "target", &r->target))
        changed [n++] = "target";
    uint64_t steps = sb_get_uint (b, "max_steps", 0);
    if (steps && steps != r->max_steps) {
        r->max_steps = steps;
        changed [n++] = "max_steps";
    }
    const sb_val_t *labels = sb_get_map (b, "labels");
    if (labels) {
        r->labels = labels->len? labels: NULL;
        changed [n++] = "labels";
    }
    if (rules)
        changed [n++] = "rules";
    const sb_val_t *deadline = sb_get (b, "approval_deadline_s");
    if (deadline && (!r->has_deadline || r->approval_deadline_s != deadline->v.u)) {
        r->has_deadline = true;
        r->approval_deadline_s = deadline->v.u;
        changed [n++] = "approval_deadline_s";
    }
    if (sb_get_array (b, "mcp_servers")) {
        r->mcp_servers = sb_session_mcp_servers (sb_get_array (b, "mcp_servers"));
        changed [n++] = "mcp_servers";
    }
    const sb_val_t *net = sb_get (b, "network");
    if (net && sb_get_bool (b, "network", false) != r->network) {
        r->network = !r->network;
        changed [n++] = "network";
    }
    if (sb_get (b, "mcp_sampling") && sb_get_bool (b, "mcp_sampling", false) != r->mcp_sampling) {
        r->mcp_sampling = !r->mcp_sampling;
        changed [n++] = "mcp_sampling";
    }
    if (sb_session_budget_take (r, sb_get_map (b, "budget"))) {
        r->budget_notice = NULL;    //  judged again by the next call
        changed [n++] = "budget";
    }
    //  An update that changes nothing writes nothing.
    if (n) {
        r->updated_at = self->now;
        r->config_version++;
        req->changed = true;
        sb_session_tape_put_record (self, txn, req, r, "session.updated", changed, n);
    }
    s_reply_record (self, req, r);
}

void
sb_session_write_close (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = sb_session_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    //  Closing a closed session changes nothing and is no error.
    if (!s_record_closed (r)) {
        static const char *const changed [] = { "status" };
        s_put_status (txn, r->status, r->session_id, false);
        r->status = "closed";
        r->turn_status = "idle";
        r->updated_at = self->now;
        s_put_status (txn, r->status, r->session_id, true);
        req->changed = true;
        sb_session_tape_put_record (self, txn, req, r, "session.updated", changed, 1);
    }
    s_reply_record (self, req, r);
}

void
sb_session_write_delete (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = sb_session_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    sb_key_t k;
    s_key_session (&k, r->session_id);
    sb_txn_del (txn, DBI_SESSIONS, k.buf, k.len);
    s_put_status (txn, r->status, r->session_id, false);
    //  A long tape is removed in chunks after this commit, so that one
    //  delete never makes a transaction too large for LMDB or stalls the
    //  actor; its record is gone now, so the session is gone for readers.
    bool done;
    sb_session_tape_purge (txn, r->session_id, PURGE_CHUNK, &done);
    if (!done && txn->ret == 0) {
        s_key_purge (&k, r->session_id);
        sb_txn_put (txn, DBI_PURGE, k.buf, k.len, NULL, 0);
        self->drain_purge = true;
    }
    sb_session_queue_drop (txn, r->session_id);
    r->deleted = true;
    //  Its checkpoints are forgotten after the commit (session.c); a
    //  worker's are on the worker.
    req->workspace = r->target && strncmp (r->target, "worker:", 7) == 0? NULL: r->workspace;
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    sb_enc_kstr (self->replies, "session_id", r->session_id);
    sb_enc_kuint (self->replies, "deleted_events", r->last_seq);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
    req->last_seq = r->last_seq;
}

//  The run actor raises a session's fence before it hands a run to an
//  executor and before it announces a lapsed lease; from then on an
//  append that carries an older fence is refused. Fences only go up.
void
sb_session_write_fence (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = sb_session_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    uint64_t fence = sb_get_uint (req->msg->body, "fence", 0);
    if (fence > r->fence) {
        r->fence = fence;
        r->dirty = true;
        req->changed = true;
    }
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    sb_enc_kuint (self->replies, "fence", r->fence);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

//  What a run.status entry means for the session's turn_status.
static const char *
s_turn_status (const char *run_status, const char *current)
{
    if (!run_status)
        return current;
    switch (sb_run_status_from_name (run_status)) {
        case SB_RUN_queued:
        case SB_RUN_claimed:
        case SB_RUN_running:    return "running";
        case SB_RUN_cancelling: return "cancelling";
        default:                return "idle";
    }
}

//  The first line of a prompt, for lists that must tell sessions apart:
//  leading blank lines skipped, at most LAST_PROMPT_MAX bytes, and never
//  cut inside a UTF-8 sequence. From the drain's arena; NULL when out of
//  memory.
static const char *
s_first_line (self_t *self, const char *text)
{
    while (*text == '\n' || *text == '\r' || *text == ' ' || *text == '\t')
        text++;
    size_t n = strcspn (text, "\r\n");
    if (n > LAST_PROMPT_MAX) {
        n = LAST_PROMPT_MAX;
        //  Back up over continuation bytes (10xxxxxx) to the start of the
        //  sequence that does not fit.
        while (n > 0 && ((uint8_t) text [n] & 0xC0) == 0x80)
            n--;
    }
    char *line = sb_session_alloc (self, n + 1);
    if (line) {
        memcpy (line, text, n);
        line [n] = 0;
    }
    return line;
}

//  What one appended entry changes in its session's record. A prompt and
//  each status of a run are the session's activity, which lists show; the
//  record is written in the append's own transaction, at no extra cost.
void
sb_session_note_entry (self_t *self, record_t *r, const char *kind, const sb_val_t *body)
{
    if (strcmp (kind, "run.status") == 0) {
        r->turn_status = s_turn_status (sb_get_str (body, "status"), r->turn_status);
        r->last_activity_at = self->now;
    }
    else
    if (strcmp (kind, "prompt") == 0) {
        const char *text = sb_get_str (body, "text");
        const char *line = text? s_first_line (self, text): NULL;
        if (line)
            r->last_prompt = *line? line: NULL;
        r->last_activity_at = self->now;
    }
    else
    //  An executor rebuilding the model's context starts from the newest
    //  summary rather than from seq 1 (docs/compaction.md).
    if (strcmp (kind, "context.compacted") == 0) {
        const char *method = sb_get_str (body, "method");
        if (sb_compact_method_from_name (method) == SB_COMPACT_SUMMARY)
            r->compacted_seq = r->last_seq;
    }
    else
    //  A rewind of the conversation: the model's context skips what came
    //  after to_seq, up to this entry; its undo lifts the newest cut
    //  (the exec marks an undo with conversation only when the rewind it
    //  undid made one). A summary made after the cut's seq summarized
    //  what is now cut: the context is rebuilt from seq 1 instead.
    if (strcmp (kind, "session.rewound") == 0 && sb_get_bool (body, "conversation", false)) {
        if (sb_get_bool (body, "undo", false)) {
            if (r->ncuts)
                r->ncuts--;
        }
        else
        if (r->ncuts < SB_SESSION_CUTS_MAX) {
            uint64_t to = sb_get_uint (body, "to_seq", 0);
            r->cut_after [r->ncuts] = to;
            r->cut_before [r->ncuts++] = r->last_seq;
            if (r->compacted_seq > to)
                r->compacted_seq = 0;
        }
        else
            sb_warn (ACTOR, "session=%s has %d conversation cuts already; the one at seq %llu is not kept",
                     r->session_id, SB_SESSION_CUTS_MAX, (unsigned long long) r->last_seq);
    }
}

//  Whether the append fits the session's tape quota. A run that reached
//  it must still be able to say how it ended, so run.status and turn.end
//  entries may use a small reserve past it; nothing else may. The first
//  refusal for a given quota writes one tape.quota entry, so watchers see
//  why the session stopped growing, and from then on the session is full
//  (until the quota is raised): a later run fails at its first entry
//  instead of creeping up to the quota in small ones.
static bool
s_within_quota (self_t *self, sb_txn_t *txn, req_t *req, record_t *r)
{
    //  The session's own entries (its record's history, tape.quota) are
    //  few and small: only what appends bring is held against the quota.
    uint64_t bytes = 0;
    bool ending = true;
    for (size_t k = 0; k < req->nspans; k++) {
        const span_t *sp = &self->spans [req->span0 + k];
        bytes += sp->len;
        ending = ending && (strcmp (sp->kind, "run.status") == 0 || strcmp (sp->kind, "turn.end") == 0);
    }
    bool full = r->quota_noted == self->tape_quota;
    uint64_t limit = self->tape_quota + (ending? QUOTA_RESERVE: 0);
    if (r->tape_bytes + bytes <= limit && (ending || !full))
        return true;
    sb_session_fail (req, SB_E_too_large,
                     "session %s reached its tape quota of %llu bytes (%llu used, this append %llu more); "
                     "raise it with serve --session-quota BYTES or SWITCHBOARD_SESSION_QUOTA",
                     req->sid, (unsigned long long) self->tape_quota, (unsigned long long) r->tape_bytes,
                     (unsigned long long) bytes);
    if (full)
        return false;
    r->quota_noted = self->tape_quota;
    sb_enc_reset (self->scratch);
    sb_enc_map_open (self->scratch);
    sb_enc_kuint (self->scratch, "quota", self->tape_quota);
    sb_enc_kuint (self->scratch, "used", r->tape_bytes);
    sb_enc_kuint (self->scratch, "refused", bytes);
    sb_enc_kstr (self->scratch, "message", req->errmsg);
    sb_enc_map_close (self->scratch);
    size_t len;
    const uint8_t *body = sb_enc_data (self->scratch, &len);
    sb_session_tape_put (self, txn, req, r, ++r->last_seq, "tape.quota", body, len);
    return false;
}

void
sb_session_write_append (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r = sb_session_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    if (s_record_closed (r)) {
        sb_session_fail (req, SB_E_conflict, "session %s is closed; it takes no more entries", req->sid);
        return;
    }
    //  A fence other than the session's is refused: an older one is a
    //  writer whose lease lapsed, a newer one was never handed out (a
    //  lapsed writer guessing ahead must not get back in; docs/workers.md).
    if (req->has_fence && req->fence != r->fence) {
        sb_session_fail (req, SB_E_fenced, "fence %llu is %s the session's fence %llu",
                         (unsigned long long) req->fence, req->fence < r->fence? "older than": "not",
                         (unsigned long long) r->fence);
        return;
    }
    if (!s_within_quota (self, txn, req, r))
        return;
    const uint8_t *prep = sb_enc_data (self->prep, &(size_t) { 0 });
    for (size_t k = 0; k < req->nspans && txn->ret == 0; k++) {
        const span_t *sp = &self->spans [req->span0 + k];
        sb_session_tape_put (self, txn, req, r, ++r->last_seq, sp->kind, prep + sp->off, sp->len);
        sb_session_note_entry (self, r, sp->kind, sp->body);
        if (strcmp (sp->kind, "usage") == 0) {
            sb_session_usage_note (self, txn, req->sid, req->run_id, sp->body);
            sb_session_usage_budget_check (self, r, sp->body);
        }
        //  Counted with the entries, so the record written in the same
        //  transaction holds the tape's count.
        r->tape_bytes += sp->len;
    }
    if (req->run_id)
        r->last_run_id = req->run_id;
    sb_session_queue_on_append (self, txn, req, r);
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    if (req->batch_form) {
        sb_enc_kuint (self->replies, "first_seq", req->first_seq);
        sb_enc_kuint (self->replies, "last_seq", req->last_seq);
    }
    else
        sb_enc_kuint (self->replies, "seq", req->first_seq);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

int
sb_session_drain_fn (sb_txn_t *txn, void *arg)
{
    self_t *self = (self_t *) arg;
    int64_t t0 = sb_mono_us ();
    //  Each run starts from scratch: a re-run after a map grow must not
    //  see what the aborted run produced.
    sb_session_cache_reset (self);
    sb_enc_reset (self->tape);
    sb_enc_reset (self->replies);
    self->npubs = 0;
    self->drain_min_expiry = 0;
    self->drain_purge = false;
    //  The fence: every shard the drain writes must still be this node's,
    //  at the epoch it took it, in this very transaction.
    uint64_t shards = 0;
    for (size_t i = 0; i < self->nreqs; i++)
        if (self->reqs [i].write && !self->reqs [i].prep_err) {
            if (self->reqs [i].sid)
                shards |= sb_cluster_shard_bit (self->reqs [i].sid);
            if (self->reqs [i].fork_sid)
                shards |= sb_cluster_shard_bit (self->reqs [i].fork_sid);
        }
    if (sb_cluster_fence (self->cluster, txn, shards) != 0)
        return txn->ret;
    for (size_t i = 0; i < self->nreqs && txn->ret == 0; i++) {
        req_t *req = &self->reqs [i];
        if (!req->write || req->prep_err)
            continue;
        req->err = SB_OK;
        req->errmsg [0] = 0;
        req->reply_off = req->reply_len = 0;
        req->pub0 = self->npubs;
        req->npubs = 0;
        req->first_seq = req->last_seq = 0;
        req->replayed = req->changed = req->q_forward = false;
        if (req->cmd && sb_session_command_replay (self, txn, req))
            continue;
        //  req->write: its row names a write function (sb_session_ops).
        sb_session_ops [req->op].write (self, txn, req);
        //  A prompt that starts a run is remembered once the run
        //  coordinator has answered (actors/session/prompt.c).
        if (!req->err && req->cmd && !req->q_forward && txn->ret == 0)
            sb_session_command_remember (self, txn, req);
    }
    if (txn->ret == 0)
        sb_session_cache_flush (self, txn);
    self->drain_fn_us = sb_mono_us () - t0;
    return 0;
}

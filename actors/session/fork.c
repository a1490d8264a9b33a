/*  actors/session/fork.c — session.fork: a new session whose history is
    another's up to a seq (docs/checkpoints.md).

    The fork's tape is a copy, not a reference: it begins with a
    session.forked entry at seq 1, in place of the source's
    session.created, and then holds the source's entries 2..at at the
    same seqs, with their times and runs. Keeping the seqs means that
    everything inside the entries that names a seq (a checkpoint's
    seq_of, a compaction's through_seq, a rewind's to_seq) still means
    the same entry, so the fork's model context, its checkpoints and its
    own rewinds need nothing translated; and a copy stays whole when the
    source is deleted. The copy is one transaction, so it is bounded
    (FORK_ENTRIES_MAX entries, FORK_BYTES_MAX bytes): a longer history is
    refused with too_large.

    A cut is made only at a step boundary: after it no tool call waits
    for its result, no approval is pending and no model call is half
    streamed. Anything else is refused with invalid and the nearest seqs
    that are boundaries (the error's detail {valid_before, valid_after}).

    Before the request enters the drain, the fork's chain of checkpoints
    is started at the checkpoint of `at` (sb_ckpt_seed) and, with a
    workspace, the work tree there is made (sb_ckpt_materialize): git
    runs on the actor's thread, once for a fork, never inside a
    transaction, which may run more than once. */
#include "actors/session/session_impl.h"
#include "common/git_checkpoint.h"
#include "schemas/run_status.h"
#include "schemas/types.h"
#include "schemas/vocab.h"

#include <string.h>

//  --------------------------------------------------------------------------
//  Step boundaries

//  The state after one entry: what is open.
typedef struct {
    uint64_t calls;             //  tool calls without their result
    uint64_t approvals;         //  approvals asked and not answered
    bool streaming;             //  a model call's text came, its usage not yet
} s_open_t;

static bool
s_is (const char *kind, const char *name)
{
    return strcmp (kind, name) == 0;
}

static void
s_open_feed (s_open_t *o, const char *kind, const sb_val_t *body)
{
    if (s_is (kind, "tool.call"))
        o->calls++;
    else
    if (s_is (kind, "tool.result") && o->calls)
        o->calls--;
    else
    if (s_is (kind, "approval.requested"))
        o->approvals++;
    else
    if (s_is (kind, "approval.resolved") && o->approvals)
        o->approvals--;
    else
    if (s_is (kind, "text.delta") || s_is (kind, "thinking.delta") || s_is (kind, "text.done")
    ||  s_is (kind, "reasoning.state"))
        o->streaming = true;
    else
    if (s_is (kind, "usage"))
        o->streaming = false;
    else
    //  A run that ended closes everything it left open: its calls are
    //  answered as interrupted, its approvals went with it.
    if (s_is (kind, "turn.end") || (s_is (kind, "run.status") && sb_run_status_final (sb_get_str (body, "status"))))
        *o = (s_open_t) { 0 };
}

static const char *
s_open_what (const s_open_t *o)
{
    return o->approvals ? "an approval is pending there"
         : o->calls ? "it is inside a tool call (the call is made, its result not yet)"
         : o->streaming ? "it is inside a model step (its text came, its usage not yet)" : NULL;
}

static void
s_take_checkpoint (sb_session_cut_t *cut, const sb_val_t *body, uint64_t at)
{
    uint64_t seq_of = sb_get_uint (body, "seq_of", 0);
    if (!cut->first_ckpt || seq_of < cut->first_ckpt)
        cut->first_ckpt = seq_of;
    const char *commit = sb_get_str (body, "commit"), *tree = sb_get_str (body, "tree");
    if (seq_of > at || seq_of < cut->ckpt_seq || !tree)
        return;
    cut->ckpt_seq = seq_of;
    snprintf (cut->commit, sizeof cut->commit, "%s", commit ? commit : "");
    snprintf (cut->tree, sizeof cut->tree, "%s", tree);
    cut->shadow = sb_ckpt_store_from_name (sb_get_str (body, "store")) == SB_CKPT_SHADOW;
}

void
sb_session_cut_scan (sb_txn_t *txn, const char *sid, uint64_t at, sb_session_cut_t *cut)
{
    memset (cut, 0, sizeof *cut);
    s_open_t open = { 0 };
    sb_key_t prefix;
    s_key_tape (&prefix, sid, 0, false);
    sb_txn_iter_t it;
    if (sb_txn_iter_begin (txn, &it, DBI_TAPE, prefix.buf, prefix.len, NULL, 0) != 0)
        return;
    sb_datum_t k, v;
    while (sb_txn_iter_next (&it, &k, &v)) {
        uint64_t seq = sb_key_read_u64 (&k, prefix.len);
        sb_verr_t verr;
        sb_doc_t *doc = sb_decode (v.data, v.size, NULL, 16u << 20, &verr);
        const sb_val_t *ev = doc ? sb_doc_root (doc) : NULL;
        const char *kind = sb_get_str (ev, "kind");
        //  Past `at`, only the checkpoints of the step `at` ends (they
        //  follow it) are still wanted, the next boundary when `at` is
        //  not one, and the first checkpoint when none came before.
        bool done = seq > at && (cut->valid || cut->valid_after) && cut->first_ckpt
                 && !(kind && s_is (kind, "checkpoint"));
        if (kind && !done) {
            if (s_is (kind, "checkpoint"))
                s_take_checkpoint (cut, sb_get_map (ev, "body"), at);
            else
                s_open_feed (&open, kind, sb_get_map (ev, "body"));
        }
        sb_doc_destroy (&doc);
        if (done) {
            sb_txn_iter_end (&it);
            return;
        }
        const char *what = s_open_what (&open);
        if (seq < at && !what)
            cut->valid_before = seq;
        else
        if (seq == at) {
            cut->valid = !what;
            cut->inside = what;
        }
        else
        if (seq > at && !what && !cut->valid && !cut->valid_after)
            cut->valid_after = seq;
    }
}

//  --------------------------------------------------------------------------
//  The refusal

void
sb_session_fork_refuse (self_t *self, const sb_msg_t *msg, const char *message, uint64_t before, uint64_t after)
{
    sb_enc_t *e = self->scratch;
    sb_enc_reset (e);
    sb_enc_error_open (e, SB_E_invalid, message, false);
    sb_enc_key (e, "detail");
    sb_enc_map_open (e);
    if (before)
        sb_enc_kuint (e, "valid_before", before);
    if (after)
        sb_enc_kuint (e, "valid_after", after);
    sb_enc_map_close (e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply_to (self->bus, msg->route, msg->route_len, &msg->h, "error", 0, b, len);
}

//  Checks `at` against the source's tape: 0, or req failed (with the
//  nearest boundaries for a cut inside a step).
static int
s_check_cut (sb_txn_t *txn, req_t *req, uint64_t last_seq, uint64_t at, sb_session_cut_t *cut)
{
    if (at > last_seq) {
        sb_session_fail (req, SB_E_invalid, "at %llu is beyond the tape of session %s: its last seq is %llu",
                         (unsigned long long) at, req->sid, (unsigned long long) last_seq);
        return -1;
    }
    sb_session_cut_scan (txn, req->sid, at, cut);
    if (txn->ret)
        return -1;
    if (cut->valid)
        return 0;
    char before [40] = "none", after [40] = "none";
    if (cut->valid_before)
        snprintf (before, sizeof before, "%llu", (unsigned long long) cut->valid_before);
    if (cut->valid_after)
        snprintf (after, sizeof after, "%llu", (unsigned long long) cut->valid_after);
    sb_session_fail (req, SB_E_invalid, "at %llu is not a step boundary: %s; the nearest valid seqs are %s "
                     "(before) and %s (after)", (unsigned long long) at, cut->inside ? cut->inside : "?",
                     before, after);
    req->cut_refused = true;
    req->valid_before = cut->valid_before;
    req->valid_after = cut->valid_after;
    return -1;
}

//  --------------------------------------------------------------------------
//  The request

void
sb_session_prepare_fork (self_t *self, req_t *req)
{
    //  The take may have prepared it already (a fork with a workspace).
    if (req->fork_sid)
        return;
    char id [SB_ULID_LEN + 1];
    if (!sb_session_new_id (self, req, id))
        return;
    if (!(req->fork_sid = sb_session_strdup (self, id)))
        sb_session_fail (req, SB_E_internal, "out of memory");
}

//  The git side of a fork, before the drain runs it: its chain of
//  checkpoints starts at the checkpoint of `at` (sb_ckpt_seed), so the
//  checkpoints it copies stay reachable and its own follow them, and with
//  a workspace the work tree there is made. A retry of a fork that was
//  made (its command_id remembered) does nothing: the drain answers it
//  with the first reply. Nothing here is done for a worker's session:
//  its work tree is on the worker.
static void
s_fork_git (self_t *self, req_t *req, const char *dest)
{
    sb_txn_t txn;
    sb_txn_begin (self->store, &txn, false);
    if (req->cmd) {
        bool known = sb_session_command_replay (self, &txn, req);
        //  The drain decides again, in its own transaction.
        req->err = SB_OK;
        req->errmsg [0] = 0;
        req->replayed = false;
        if (known) {
            sb_txn_commit (&txn);
            return;
        }
    }
    sb_datum_t v;
    sb_verr_t verr;
    sb_doc_t *doc = NULL;
    if (sb_session_record_load (&txn, req, req->sid, &v)
    && !(doc = sb_decode (v.data, v.size, sb_session_record_fields, 0, &verr)))
        sb_session_fail (req, SB_E_internal, "the record of session %s cannot be read", req->sid);
    const sb_val_t *rec = doc ? sb_doc_root (doc) : NULL;
    const char *target = sb_get_str (rec, "target"), *ws = sb_get_str (rec, "workspace");
    bool worker = target && strncmp (target, "worker:", 7) == 0;
    uint64_t at = sb_get_uint (req->msg->body, "at", 0);
    sb_session_cut_t cut;
    char dir [4200] = "", err [256] = "";
    if (self->data_dir [0])
        snprintf (dir, sizeof dir, "%s/checkpoints", self->data_dir);
    if (!rec || (worker && !dest))
        ;
    else
    if (worker)
        sb_session_fail (req, SB_E_invalid, "session %s runs on a worker (%s): its work tree is there, so a fork "
                         "with a workspace cannot be made here; fork it without one", req->sid, target);
    else
    if (s_check_cut (&txn, req, sb_get_uint (rec, "last_seq", 0), at, &cut) != 0)
        ;
    else
    if (dest && (!cut.ckpt_seq || !cut.commit [0])) {
        if (cut.first_ckpt)
            sb_session_fail (req, SB_E_invalid, "no checkpoint of the work tree at or before seq %llu to make "
                             "the fork's workspace from: the first is at seq %llu", (unsigned long long) at,
                             (unsigned long long) cut.first_ckpt);
        else
            sb_session_fail (req, SB_E_invalid, "session %s has no checkpoint of its work tree to make the "
                             "fork's workspace from (fork it without --workspace)", req->sid);
    }
    else
    if (dest) {
        char made [SB_CKPT_PATH_MAX + 2];
        int64_t t0 = sb_mono_ms ();
        if (sb_ckpt_materialize (ws, dir [0] ? dir : NULL, req->sid, cut.commit, cut.tree, dest, made,
                                 sizeof made, err, sizeof err) != 0)
            sb_session_fail (req, SB_E_invalid, "cannot make the fork's workspace %s: %s", dest, err);
        else
        if (!(req->workspace = sb_session_strdup (self, made)))
            sb_session_fail (req, SB_E_internal, "out of memory");
        else
            sb_info (ACTOR, "fork workspace=%s session=%s checkpoint_seq=%llu duration_ms=%lld", made, req->sid,
                     (unsigned long long) cut.ckpt_seq, (long long) (sb_mono_ms () - t0));
    }
    if (!req->err && rec && !worker && cut.commit [0]
    &&  sb_ckpt_seed (ws, dir [0] ? dir : NULL, req->sid, req->fork_sid, cut.commit, cut.shadow, err,
                      sizeof err) != 0)
        //  The fork works all the same; a rewind of it to a copied
        //  checkpoint may then find its tree gone after a git gc.
        sb_warn (ACTOR, "fork session=%s cannot start its checkpoint chain at %s: %s", req->fork_sid,
                 cut.commit, err);
    sb_doc_destroy (&doc);
    sb_txn_commit (&txn);
}

void
sb_session_fork_take (self_t *self, sb_msg_t **msg_p)
{
    const char *dest = sb_get_str ((*msg_p)->body, "workspace");
    req_t *req = sb_session_take (self, msg_p, OP_FORK);
    if (!req)
        return;
    sb_session_prepare (self, req);
    if (req->err)
        return;
    s_fork_git (self, req, dest);
    req->prep_err = req->err;
}

//  The bytes of the source's entries 2..at, without decoding them.
static size_t
s_copy_bytes (sb_txn_t *txn, const char *sid, uint64_t at)
{
    sb_key_t prefix, start;
    s_key_tape (&prefix, sid, 0, false);
    s_key_tape (&start, sid, 2, true);
    sb_txn_iter_t it;
    if (sb_txn_iter_begin (txn, &it, DBI_TAPE, prefix.buf, prefix.len, start.buf, start.len) != 0)
        return 0;
    sb_datum_t k, v;
    size_t bytes = 0;
    while (sb_txn_iter_next (&it, &k, &v)) {
        if (sb_key_read_u64 (&k, prefix.len) > at || bytes > FORK_BYTES_MAX) {
            sb_txn_iter_end (&it);
            break;
        }
        bytes += v.size;
    }
    return bytes;
}

//  Copies the source's entries 2..at to the fork, at the same seqs, and
//  notes each in the fork's record as an append would.
static void
s_copy_tape (self_t *self, sb_txn_t *txn, req_t *req, record_t *src, record_t *r, uint64_t at)
{
    sb_key_t prefix, start;
    s_key_tape (&prefix, src->session_id, 0, false);
    s_key_tape (&start, src->session_id, 2, true);
    sb_txn_iter_t it;
    if (sb_txn_iter_begin (txn, &it, DBI_TAPE, prefix.buf, prefix.len, start.buf, start.len) != 0)
        return;
    sb_datum_t k, v;
    while (sb_txn_iter_next (&it, &k, &v)) {
        uint64_t seq = sb_key_read_u64 (&k, prefix.len);
        if (seq > at) {
            sb_txn_iter_end (&it);
            break;
        }
        sb_verr_t verr;
        sb_doc_t *doc = sb_decode (v.data, v.size, NULL, 16u << 20, &verr);
        const sb_val_t *ev = doc ? sb_doc_root (doc) : NULL;
        const char *kind = sb_get_str (ev, "kind");
        const sb_val_t *body = sb_get_map (ev, "body");
        if (!kind) {
            //  A fork half copied must not commit: the drain fails as a
            //  whole, and its other requests are told nothing was written.
            sb_doc_destroy (&doc);
            sb_txn_iter_end (&it);
            sb_session_fail (req, SB_E_internal, "entry %llu of session %s cannot be read",
                             (unsigned long long) seq, src->session_id);
            txn->ret = SB_STORE_ORDER;
            return;
        }
        //  The entry as stored, its session the fork's.
        size_t off;
        sb_enc_data (self->tape, &off);
        sb_enc_map_open (self->tape);
        sb_enc_kstr (self->tape, "session_id", r->session_id);
        sb_enc_kuint (self->tape, "seq", seq);
        sb_enc_kuint (self->tape, "ts", sb_get_uint (ev, "ts", self->now));
        sb_enc_kstr_opt (self->tape, "run_id", sb_get_str (ev, "run_id"));
        sb_enc_kstr (self->tape, "kind", kind);
        sb_enc_key (self->tape, "body");
        size_t body_off, body_end;
        sb_enc_data (self->tape, &body_off);
        if (body)
            sb_enc_val (self->tape, body);
        else {
            sb_enc_map_open (self->tape);
            sb_enc_map_close (self->tape);
        }
        sb_enc_data (self->tape, &body_end);
        sb_enc_map_close (self->tape);
        r->last_seq = seq;
        r->tape_bytes += body_end - body_off;
        //  Strings the record keeps (last_prompt) are copied by the note.
        sb_session_note_entry (self, r, kind, body);
        sb_doc_destroy (&doc);
        if (sb_session_tape_put_raw (self, txn, req, r, seq, off) != 0) {
            sb_txn_iter_end (&it);
            return;
        }
    }
}

//  The forked_from field, in the session.forked entry and the reply.
static void
s_forked_from (sb_enc_t *e, const char *sid, uint64_t at)
{
    sb_enc_key (e, "forked_from");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sid);
    sb_enc_kuint (e, "seq", at);
    sb_enc_map_close (e);
}

void
sb_session_write_fork (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    uint64_t at = sb_get_uint (b, "at", 0);
    record_t *src = sb_session_record_get (self, txn, req, req->sid);
    if (!src)
        return;
    sb_session_cut_t cut;
    if (s_check_cut (txn, req, src->last_seq, at, &cut) != 0)
        return;
    if (at > FORK_ENTRIES_MAX) {
        sb_session_fail (req, SB_E_too_large, "a fork copies at most %u entries in one transaction; at %llu is "
                         "past that: fork at an earlier seq", (unsigned) FORK_ENTRIES_MAX, (unsigned long long) at);
        return;
    }
    size_t bytes = s_copy_bytes (txn, src->session_id, at);
    if (bytes > FORK_BYTES_MAX) {
        sb_session_fail (req, SB_E_too_large, "the history up to seq %llu is more than %u MiB: a fork copies "
                         "it in one transaction; fork at an earlier seq", (unsigned long long) at,
                         (unsigned) (FORK_BYTES_MAX >> 20));
        return;
    }
    if (sb_get_str (b, "workspace") && !req->workspace) {
        sb_session_fail (req, SB_E_internal, "the fork's workspace was not made");
        return;
    }
    record_t *r = sb_session_record_new (self, req->fork_sid);
    if (!r) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    //  The source's config; nothing of its activity: the fork is idle,
    //  its queue empty, its fence and usage zero.
    r->created_at = r->updated_at = r->last_activity_at = self->now;
    r->status = "active";
    r->turn_status = "idle";
    r->workspace = req->workspace ? req->workspace : src->workspace;
    r->title = src->title;
    r->provider = src->provider;
    r->model = src->model;
    r->approval_policy = src->approval_policy;
    r->target = src->target;
    r->max_steps = src->max_steps;
    memcpy (r->budget, src->budget, sizeof r->budget);
    r->labels = src->labels;
    r->rules = src->rules;
    r->has_deadline = src->has_deadline;
    r->approval_deadline_s = src->approval_deadline_s;
    r->mcp_servers = src->mcp_servers;
    r->network = src->network;
    r->mcp_sampling = src->mcp_sampling;
    r->config_version = 1;
    r->forked_sid = src->session_id;
    r->forked_seq = at;
    //  The source's cuts within the copy come back as its session.rewound
    //  entries are copied (sb_session_note_entry), as its summary does.
    sb_key_t key;
    s_key_status (&key, "active", r->session_id);
    sb_txn_put (txn, DBI_STATUS, key.buf, key.len, NULL, 0);

    //  seq 1: session.forked, the record as made and where it came from
    sb_enc_reset (self->scratch);
    sb_enc_map_open (self->scratch);
    r->last_seq = 1;
    sb_enc_key (self->scratch, "session");
    sb_session_record_encode (self->scratch, r);
    s_forked_from (self->scratch, src->session_id, at);
    sb_enc_map_close (self->scratch);
    size_t len;
    const uint8_t *body = sb_enc_data (self->scratch, &len);
    sb_session_tape_put (self, txn, req, r, 1, "session.forked", body, len);
    if (txn->ret == 0)
        s_copy_tape (self, txn, req, src, r, at);
    if (req->err || txn->ret)
        return;
    //  What the copied entries said of runs is the source's.
    r->turn_status = "idle";
    r->last_activity_at = self->now;
    r->dirty = true;

    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
    sb_enc_key (self->replies, "session");
    sb_session_record_encode (self->replies, r);
    s_forked_from (self->replies, src->session_id, at);
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

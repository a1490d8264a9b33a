/*  actors/session/compact.c — session.compact: compacting a session's
    model context on request (docs/compaction.md).

    A compaction is a run of its own kind, "compact", so that it reuses
    everything a run has: the coordinator refuses it while another run of
    the session is active (one run at a time), it holds a lease and a
    fence, `cancel` stops it, and its status is on the tape. The session
    actor therefore forwards session.compact as run.request {kind:
    "compact"} and relays the answer, never blocking on it, as it does
    with session.prompt (actors/session/prompt.c).

    session.rewind goes the same way, as a run of kind rewind: the
    executor that holds the workspace puts it back between no two steps
    of another run, because there is none (docs/checkpoints.md). */
#include "actors/session/session_impl.h"

#include <string.h>
#include "schemas/types.h"

#define COMPACT_TTL_MS 20000

typedef struct {
    uint8_t *route;
    size_t route_len;
    sb_header_t req;            /* the session.compact or session.rewind request, to answer */
    bool rewind;
    int64_t expires;            /* mono ms */
} compact_fwd_t;

static void
s_fwd_free (void **item)
{
    compact_fwd_t *f = *item;
    if (f) {
        free (f->route);
        free (f);
        *item = NULL;
    }
}

zhashx_t *
sb_session_compacts_new (void)
{
    zhashx_t *table = zhashx_new ();
    if (table)
        zhashx_set_destructor (table, s_fwd_free);
    return table;
}

/*  Whether a session.rewind may start its run: a seq the tape cannot hold
    is refused here, with the reason, rather than by a run that fails (the
    session's tape is this actor's to read). What only the executor can
    tell (whether an undo has anything to undo, a prompt since) it tells
    by failing the run. Answers the refusal itself. */
static bool
s_rewind_ok (self_t *self, const sb_msg_t *msg)
{
    const sb_val_t *b = msg->body;
    const char *sid = sb_get_str (b, "session_id");
    bool undo = sb_get_bool (b, "undo", false), code = sb_get_bool (b, "code", true);
    bool conversation = sb_get_bool (b, "conversation", true);
    uint64_t to = sb_get_uint (b, "to_seq", 0);
    const char *why = !undo && !sb_get (b, "to_seq") ? "to_seq is required (or undo)"
                    : undo && sb_get (b, "to_seq") ? "undo takes no to_seq"
                    : undo && (sb_get (b, "code") || sb_get (b, "conversation"))
                      ? "undo undoes what the last rewind did: it takes no code or conversation"
                    : !undo && !code && !conversation ? "code and conversation are both false: nothing to rewind"
                    : !undo && to == 0 ? "to_seq must be at least 1" : NULL;
    if (why) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "%s", why);
        return false;
    }
    if (undo)
        return true;
    sb_txn_t txn;
    sb_txn_begin (self->store, &txn, false);
    req_t req = { .msg = (sb_msg_t *) msg, .sid = sid };
    sb_datum_t v;
    sb_verr_t verr;
    sb_doc_t *doc = NULL;
    if (sb_session_record_load (&txn, &req, sid, &v)
    && !(doc = sb_decode (v.data, v.size, sb_session_record_fields, 0, &verr)))
        sb_session_fail (&req, SB_E_internal, "the record of session %s cannot be read", sid);
    const sb_val_t *rec = doc ? sb_doc_root (doc) : NULL;
    uint64_t last = sb_get_uint (rec, "last_seq", 0);
    const sb_val_t *cuts = sb_get_array (rec, "context_cuts");
    sb_session_cut_t cut = { 0 };
    if (!rec)
        ;
    else
    if (to > last)
        sb_session_fail (&req, SB_E_invalid, "to_seq %llu is beyond the tape of session %s: its last seq is %llu",
                         (unsigned long long) to, sid, (unsigned long long) last);
    else
    if (conversation && cuts && cuts->len >= SB_SESSION_CUTS_MAX)
        sb_session_fail (&req, SB_E_invalid, "session %s has %d rewinds of its conversation in force, the most "
                         "it keeps: fork it at seq %llu instead (switchboard fork)", sid, SB_SESSION_CUTS_MAX,
                         (unsigned long long) to);
    else
    if (code) {
        sb_session_cut_scan (&txn, sid, to, &cut);
        if (!cut.first_ckpt)
            sb_session_fail (&req, SB_E_invalid, "session %s has no checkpoint of its work tree to rewind to "
                             "(rewind the conversation only: --conversation)", sid);
        else
        if (!cut.ckpt_seq)
            sb_session_fail (&req, SB_E_invalid, "to_seq %llu is before the session's first checkpoint; the first "
                             "valid seq is %llu", (unsigned long long) to, (unsigned long long) cut.first_ckpt);
    }
    if (!req.err && txn.ret)
        sb_session_fail (&req, SB_E_internal, "the store failed: %s", sb_store_strerror (txn.ret));
    sb_doc_destroy (&doc);
    sb_txn_commit (&txn);
    if (req.err)
        sb_bus_error (self->bus, msg, req.err, "%s", req.errmsg);
    return !req.err;
}

/*  Forwards one session.compact or session.rewind; takes the message. */
void
sb_session_compact (self_t *self, sb_msg_t **msg_p)
{
    sb_msg_t *msg = *msg_p;
    bool rewind = strcmp (msg->h.type, "session.rewind") == 0;
    bool undo = rewind && sb_get_bool (msg->body, "undo", false);
    if (rewind && !s_rewind_ok (self, msg)) {
        sb_msg_destroy (msg_p);
        return;
    }
    compact_fwd_t *f = calloc (1, sizeof *f);
    sb_enc_t *e = sb_enc_new ();
    if (!f || !e || !(f->route = malloc (msg->route_len ? msg->route_len : 1))) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        free (f);
        sb_enc_destroy (&e);
        sb_msg_destroy (msg_p);
        return;
    }
    memcpy (f->route, msg->route, msg->route_len);
    f->route_len = msg->route_len;
    f->req = msg->h;
    f->rewind = rewind;
    f->expires = sb_mono_ms () + COMPACT_TTL_MS;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sb_get_str (msg->body, "session_id"));
    sb_enc_kstr (e, "kind", rewind ? "rewind" : "compact");
    if (rewind && !undo)
        sb_enc_kuint (e, "rewind_to", sb_get_uint (msg->body, "to_seq", 0));
    if (undo)
        sb_enc_kbool (e, "undo", true);
    if (rewind && !undo && !sb_get_bool (msg->body, "code", true))
        sb_enc_kbool (e, "code", false);
    if (rewind && !undo && !sb_get_bool (msg->body, "conversation", true))
        sb_enc_kbool (e, "conversation", false);
    sb_enc_kstr_opt (e, "command_id", sb_get_str (msg->body, "command_id"));
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    char id [SB_ULID_LEN + 1];
    if (sb_bus_send (self->bus, "run.request", msg->h.key [0] ? msg->h.key : NULL, NULL, b, len,
                     sb_now_ms () + COMPACT_TTL_MS, id) != 0) {
        sb_bus_error (self->bus, msg, SB_E_unavailable, "cannot reach the run coordinator");
        s_fwd_free ((void **) &f);
    }
    else
        zhashx_insert (self->compacts, id, f);
    sb_enc_destroy (&e);
    sb_msg_destroy (msg_p);
}

/*  A reply to one of our forwards: relay it. Returns true when it was one. */
bool
sb_session_compact_reply (self_t *self, const sb_msg_t *reply)
{
    compact_fwd_t *f = zhashx_lookup (self->compacts, reply->h.corr);
    if (!f)
        return false;
    sb_enc_t *e = sb_enc_new ();
    if (e) {
        const char *type = "error";
        if (sb_msg_is_error (reply))
            sb_enc_val (e, reply->body);
        else {
            const sb_val_t *run = sb_get_map (reply->body, "run");
            sb_enc_map_open (e);
            sb_enc_kstr (e, "run_id", sb_get_str (run, "run_id"));
            sb_enc_kval (e, "run", run);
            sb_enc_map_close (e);
            type = f->rewind ? "session.rewind.ok" : "session.compact.ok";
        }
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_bus_reply_to (self->bus, f->route, f->route_len, &f->req, type, 0, b, len);
        sb_enc_destroy (&e);
    }
    zhashx_delete (self->compacts, reply->h.corr);
    return true;
}

/*  Answers forwards that got nothing back in time. */
void
sb_session_compact_expire (self_t *self)
{
    if (!zhashx_size (self->compacts))
        return;
    int64_t now = sb_mono_ms ();
    zlistx_t *keys = zhashx_keys (self->compacts);
    for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
        compact_fwd_t *f = zhashx_lookup (self->compacts, k);
        if (f && f->expires < now) {
            sb_msg_t fake = { .h = f->req, .route = f->route, .route_len = f->route_len };
            sb_bus_error (self->bus, &fake, SB_E_timeout, "the run coordinator did not answer in %d s",
                          COMPACT_TTL_MS / 1000);
            zhashx_delete (self->compacts, k);
        }
    }
    zlistx_destroy (&keys);
}

/*  actors/session/queue.c — the prompts that wait for a session's run: the
    queue (the next runs) and the steers (joining the running run at its
    next step boundary). docs/queue.md says what a person sees.

    The layout, in DATA/session's `queue` dbi:
      'M' sid         -> {paused, reason?, head, tail, count, bytes,
                          steer_next, steers}: the session's queue state
      'Q' sid pos     -> {prompt_id, text, mode, created_at, approval_policy?}
                          the queue, in order (pos from 2^62: a steer put
                          back goes before the head, a new prompt after
                          the tail)
      'W' sid n       -> {prompt_id, text, mode, created_at, run_id}: the
                          pending steers, in order, for run_id
    Every change is written in the drain's transaction with the tape
    entries that tell it (prompt.queued, prompt.dequeued, prompt.removed,
    prompt.steered, queue.paused, queue.resumed), so the tape and the
    queue never disagree.

    What moves the queue:
      - session.prompt on a busy session (a run active, or starting, or a
        queue waiting) queues the prompt, or holds it as a steer of the
        running run;
      - every run.status appended to the tape (the session actor is the
        tape's writer, so it sees them all): a run that ends gives its
        untaken steers back to the front of the queue; completed lets the
        queue start its next prompt; cancelling (the steers first),
        failed, cancelled, expired and interrupted pause it;
      - a restart pauses every queue that holds something, and gives
        steers back (sb_session_queue_recover);
      - session.queue.resume lets it go again;
      - session.steer.take, from the executor at each step boundary, turns
        the run's steers into prompt.steered entries.
    Starting the next prompt is a run.request (actors/session/prompt.c)
    whose command_id is derived from the prompt_id, sent once the session
    is idle (actors/session/queue_store.c); the prompt leaves the queue
    when the answer names its run. This file holds the requests and the
    writes; queue_store.c the layout, the reads, the start and startup. */
#include "actors/session/queue_impl.h"
#include "schemas/queue_state.h"
#include "schemas/vocab.h"
#include "schemas/run_status.h"
#include "schemas/types.h"
#include "common/blob_ref.h"

#include <errno.h>
#include <string.h>

//  Appends one entry of the queue's to r's tape, as `run_id`'s (or the
//  request's run when NULL).
static void
s_entry (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, const char *run_id, const char *kind,
         sb_enc_t *body)
{
    sb_enc_map_close (body);
    size_t len;
    const uint8_t *b = sb_enc_data (body, &len);
    const char *saved = req->run_id;
    if (run_id)
        req->run_id = run_id;
    sb_session_tape_put (self, txn, req, r, ++r->last_seq, kind, b, len);
    req->run_id = saved;
    r->tape_bytes += len;
    r->last_activity_at = self->now;
    sb_enc_reset (body);
    sb_enc_map_open (body);
}

static void
s_reply_open (self_t *self, req_t *req)
{
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_map_open (self->replies);
}

static void
s_reply_close (self_t *self, req_t *req)
{
    sb_enc_map_close (self->replies);
    size_t end;
    sb_enc_data (self->replies, &end);
    req->reply_len = end - req->reply_off;
}

//  Every move of a prompt between the queue's states is checked against
//  the table (schemas/queue_state.h) before anything of it is written: a
//  move the table lacks is a bug, logged here, and the caller writes
//  nothing of it, as the run actor does with a run's illegal transition.
static bool
s_move (const char *sid, const char *prompt_id, sb_queue_state_t from, sb_queue_state_t to)
{
    if (sb_queue_can_move (from, to))
        return true;
    sb_error (ACTOR, "illegal queue move refused session=%s prompt=%s from=%s to=%s", sid,
              prompt_id ? prompt_id : "-", sb_queue_state_name (from), sb_queue_state_name (to));
    return false;
}

//  The same for a request's move: it fails, and writes nothing.
static bool
s_req_move (req_t *req, const char *prompt_id, sb_queue_state_t from, sb_queue_state_t to)
{
    if (s_move (req->sid, prompt_id, from, to))
        return true;
    sb_session_fail (req, SB_E_internal, "a prompt cannot move from %s to %s", sb_queue_state_name (from),
                     sb_queue_state_name (to));
    return false;
}

//  Pauses a queue that holds something; a paused one keeps its reason.
static void
s_pause (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, qmeta_t *m, const char *reason, sb_enc_t *e)
{
    if (m->paused || !m->count)
        return;
    m->paused = true;
    snprintf (m->reason, sizeof m->reason, "%s", reason);
    sb_enc_kstr (e, "reason", reason);
    sb_enc_kuint (e, "queued", m->count);
    s_entry (self, txn, req, r, NULL, "queue.paused", e);
    sb_info (ACTOR, "queue paused session=%s queued=%llu reason=\"%s\"", r->session_id,
             (unsigned long long) m->count, reason);
}

//  Gives every pending steer back to the front of the queue, in the order
//  they were given: the run they were for has ended, or is being
//  cancelled, without taking them. Each becomes a queued prompt again
//  (prompt.queued with its new position), never lost and never run twice.
static void
s_steers_back (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, qmeta_t *m, const char *why,
               sb_enc_t *e)
{
    if (!m->steers || !s_move (r->session_id, NULL, SB_QUEUE_steer, SB_QUEUE_queued))
        return;
    qitem_t *list = NULL;
    size_t n = 0, cap = 0;
    sb_key_t prefix;
    sb_queue_key (&prefix, 'W', r->session_id);
    sb_txn_iter_t it;
    sb_datum_t k, v;
    sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v)) {
        if (!sb_session_reserve ((void **) &list, &cap, n, sizeof *list)) {
            txn->ret = -ENOMEM;
            sb_txn_iter_end (&it);
            break;
        }
        if (sb_queue_item_read (self, &v, &list [n]))
            n++;
        sb_txn_iter_del (&it);
    }
    if (txn->ret) {
        free (list);
        return;
    }
    if (!m->count)
        m->head = m->tail = Q_BASE;
    m->head -= n;
    for (size_t i = 0; i < n; i++) {
        list [i].mode = "steer";
        list [i].run_id = NULL;
        sb_queue_item_put (txn, 'Q', r->session_id, m->head + i, &list [i]);
    }
    m->count += n;
    m->steers = 0;
    for (size_t i = 0; i < n && txn->ret == 0; i++) {
        sb_enc_kstr (e, "prompt_id", list [i].prompt_id);
        sb_enc_kstr (e, "text", list [i].text);
        sb_enc_kstr (e, "mode", "queue");
        sb_enc_kuint (e, "position", i + 1);
        sb_enc_kstr (e, "reason", why);
        sb_queue_item_images (e, &list [i]);
        s_entry (self, txn, req, r, NULL, "prompt.queued", e);
    }
    free (list);
}

//  --------------------------------------------------------------------------
//  Before the transaction

static bool
s_clean (const sb_val_t *body, const char *name)
{
    const sb_val_t *v = sb_get (body, name);
    return !v || v->type != SB_V_STR || strlen (v->v.s) == v->len;
}

void
sb_session_queue_prepare_prompt (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    //  mode and approval_policy are names of their tables: the schema's
    //  ENUM rows refused anything else.
    const char *text = sb_get_str (b, "text");
    if (!text || !*text)
        sb_session_fail (req, SB_E_invalid, "text must not be empty");
    else
    if (!s_clean (b, "text"))
        sb_session_fail (req, SB_E_invalid, "text must not contain NUL bytes");
    else
        sb_session_prompt_check_images (self, req);
}

void
sb_session_queue_prepare_remove (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    const char *id = sb_get_str (b, "prompt_id");
    if (!id || !*id || !s_clean (b, "prompt_id") || strlen (id) > PROMPT_ID_MAX)
        sb_session_fail (req, SB_E_invalid, "prompt_id must be a prompt id (from session.queue.list)");
}

void
sb_session_queue_prepare_steer_take (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    const sb_val_t *fence = sb_get (b, "fence");
    if (!s_clean (b, "run_id"))
        sb_session_fail (req, SB_E_invalid, "run_id must not contain NUL bytes");
    req->run_id = sb_get_str (b, "run_id");
    req->has_fence = fence != NULL;
    req->fence = fence? fence->v.u: 0;
}

//  The answer the run coordinator gave a session.prompt, to remember
//  under its command_id (actors/session/prompt.c).
void
sb_session_queue_prepare_remember (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    size_t dlen = 0;
    const char *digest = sb_get_bin (b, "digest", &dlen);
    req->cmd = sb_get_str (b, "command_id");
    req->cmd_sid = req->sid;
    req->cmd_from = "";
    if (!req->cmd || !digest || dlen != SB_DIGEST_LEN || !sb_get_bin (b, "reply", &dlen))
        sb_session_fail (req, SB_E_internal, "a malformed command to remember");
    else
        memcpy (req->cmd_digest, digest, SB_DIGEST_LEN);
}

//  --------------------------------------------------------------------------
//  Writes, inside the drain's transaction

//  The references of a session.prompt's images, as the tape keeps them
//  (with `sent`, the downscaled copy), into refs->images in the drain's
//  arena; none when it has no images. False with req failed.
static bool
s_item_refs (self_t *self, req_t *req, qitem_t *refs)
{
    const sb_val_t *images = sb_get (req->msg->body, "images");
    if (!images || images->type != SB_V_ARRAY || !images->len)
        return true;
    sb_enc_t *e = sb_enc_new ();
    char err [512] = "out of memory";
    bool ok = e && sb_blob_encode_image_array (e, self->blob_dir, req->sid, images, err, sizeof err) == 0;
    if (ok) {
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        uint8_t *copy = sb_session_alloc (self, len);
        if ((ok = copy != NULL)) {
            memcpy (copy, b, len);
            refs->images = copy;
            refs->images_len = len;
        }
    }
    sb_enc_destroy (&e);
    if (!ok)
        sb_session_fail (req, SB_E_invalid, "%s", err);
    return ok;
}

//  What a queue write starts with: the session's record, and an encoder
//  opened for the bodies of the entries it appends (s_entry reopens it
//  after each). That is self->enc, the drain's own (swapped with it,
//  actors/session.c): within the transaction nothing else uses it, and
//  the drain's reads reset it after the commit. NULL with req failed or
//  the txn's error set.
static sb_enc_t *
s_write_begin (self_t *self, sb_txn_t *txn, req_t *req, record_t **r)
{
    if (!(*r = sb_session_record_get (self, txn, req, req->sid)))
        return NULL;
    if (!self->enc) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return NULL;
    }
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    return self->enc;
}

void
sb_session_queue_write_prompt (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r;
    sb_enc_t *e = s_write_begin (self, txn, req, &r);
    if (!e)
        return;
    const sb_val_t *b = req->msg->body;
    if (sb_session_status_from_name (r->status) == SB_SESSION_CLOSED) {
        sb_session_fail (req, SB_E_conflict, "session %s is closed; it takes no more prompts", req->sid);
        return;
    }
    qmeta_t m;
    sb_queue_meta_load (txn, req->sid, &m);
    bool idle = sb_turn_status_from_name (r->turn_status) == SB_TURN_IDLE;
    bool starting = zhashx_lookup (self->starting, req->sid) != NULL;
    //  Nothing in the way: the prompt starts a run as it always did. A
    //  paused queue is not in the way: a person who prompts an idle
    //  session wants an answer now, and the queue waits for its resume.
    if (!req->q_force_busy && idle && !starting && !r->q_forward && !(m.count && !m.paused)) {
        r->q_forward = req->q_forward = true;
        return;
    }
    //  The retry of a prompt whose run is being started: the run
    //  coordinator answers it with the same run.
    if (!req->q_force_busy && req->cmd && sb_session_prompt_in_flight (self, req->sid, req->cmd)) {
        req->q_forward = true;
        return;
    }
    //  The prompt waits with its images' references (checked before the
    //  transaction), as the tape's `prompt` will carry them: its run's
    //  request, or the steer's prompt.steered, names the same blobs.
    qitem_t refs = { 0 };
    if (!s_item_refs (self, req, &refs))
        return;
    const sb_val_t *textv = sb_get (b, "text");
    size_t need = textv->len + refs.images_len;
    const char *mode = sb_get_str (b, "mode");
    bool steer = sb_prompt_mode_from_name (mode) == SB_PROMPT_STEER
              && sb_turn_status_from_name (r->turn_status) == SB_TURN_RUNNING && r->last_run_id;
    if (r->tape_bytes + need > self->tape_quota) {
        sb_session_fail (req, SB_E_too_large, "session %s reached its tape quota of %llu bytes", req->sid,
                         (unsigned long long) self->tape_quota);
        return;
    }
    if (m.bytes + need > self->queue_bytes) {
        sb_session_fail (req, SB_E_overloaded, "the queue of session %s holds %llu bytes of prompts and image "
                         "references; at most %llu may wait (SWITCHBOARD_QUEUE_BYTES)", req->sid,
                         (unsigned long long) m.bytes, (unsigned long long) self->queue_bytes);
        return;
    }
    if (steer ? m.steers >= self->steers_max : m.count >= self->queue_max) {
        sb_session_fail (req, SB_E_overloaded, "session %s already has %llu %s waiting; at most %llu may "
                         "(SWITCHBOARD_QUEUE_%s)", req->sid,
                         (unsigned long long) (steer? m.steers: m.count), steer? "steers": "queued prompts",
                         (unsigned long long) (steer? self->steers_max: self->queue_max),
                         steer? "STEERS": "MAX");
        return;
    }
    char id [PROMPT_ID_MAX], ulid [SB_ULID_LEN + 1];
    sb_ulid_new (ulid);
    snprintf (id, sizeof id, "pr_%s", ulid);
    qitem_t it = {
        .prompt_id = sb_session_strdup (self, id), .text = textv->v.s, .len = need,
        .images = refs.images, .images_len = refs.images_len,
        .mode = steer? "steer": mode? mode: "queue", .policy = sb_get_str (b, "approval_policy"),
        .created_at = self->now, .run_id = steer? r->last_run_id: NULL,
    };
    if (!it.prompt_id) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    if (!s_req_move (req, it.prompt_id, SB_QUEUE_new, steer ? SB_QUEUE_steer : SB_QUEUE_queued))
        return;
    uint64_t position = 0;
    if (steer) {
        sb_queue_item_put (txn, 'W', req->sid, m.steer_next++, &it);
        m.steers++;
    }
    else {
        if (!m.count)
            m.head = m.tail = Q_BASE;
        sb_queue_item_put (txn, 'Q', req->sid, m.tail++, &it);
        position = ++m.count;
    }
    m.bytes += need;
    sb_queue_meta_save (txn, req->sid, &m);
    //  An idle session with a queue that goes (a start that could not be
    //  sent, say) tries again now.
    if (idle && !steer && !req->q_force_busy)
        sb_session_queue_check (self, req->sid);
    sb_enc_kstr (e, "prompt_id", it.prompt_id);
    sb_enc_kstr (e, "text", it.text);
    sb_enc_kstr (e, "mode", steer? "steer": "queue");
    if (!steer)
        sb_enc_kuint (e, "position", position);
    sb_queue_item_images (e, &it);
    s_entry (self, txn, req, r, it.run_id, "prompt.queued", e);
    s_reply_open (self, req);
    sb_enc_kstr (self->replies, "prompt_id", it.prompt_id);
    sb_enc_kuint (self->replies, "seq", r->last_seq);
    if (steer)
        sb_enc_kbool (self->replies, "steered", true);
    else
        sb_enc_kuint (self->replies, "queued", position);
    s_reply_close (self, req);
}

void
sb_session_queue_write_remove (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r;
    sb_enc_t *e = s_write_begin (self, txn, req, &r);
    if (!e)
        return;
    const char *id = sb_get_str (req->msg->body, "prompt_id");
    if (sb_session_prompt_starting (self, req->sid, id)) {
        sb_session_fail (req, SB_E_conflict, "prompt %s is starting its run now; cancel the run instead", id);
        return;
    }
    qmeta_t m;
    sb_queue_meta_load (txn, req->sid, &m);
    qitem_t it;
    bool queued = m.count && s_req_move (req, id, SB_QUEUE_queued, SB_QUEUE_removed)
               && sb_queue_item_take (self, txn, 'Q', req->sid, id, &it);
    bool steer = !queued && !req->err && m.steers && s_req_move (req, id, SB_QUEUE_steer, SB_QUEUE_removed)
              && sb_queue_item_take (self, txn, 'W', req->sid, id, &it);
    if (txn->ret || req->err)
        return;
    if (!queued && !steer) {
        sb_session_fail (req, SB_E_not_found, "no prompt %s waits in session %s", id, req->sid);
        return;
    }
    if (queued)
        m.count--;
    else
        m.steers--;
    m.bytes = m.bytes > it.len? m.bytes - it.len: 0;
    sb_enc_kstr (e, "prompt_id", id);
    sb_enc_kstr (e, "reason", steer? "removed before the run took the steer": "removed from the queue");
    s_entry (self, txn, req, r, NULL, "prompt.removed", e);
    //  A pause holds prompts back; with none left, nothing is held.
    if (m.paused && !m.count) {
        m.paused = false;
        sb_enc_kstr (e, "reason", "the queue is empty");
        sb_enc_kuint (e, "queued", 0);
        s_entry (self, txn, req, r, NULL, "queue.resumed", e);
    }
    sb_queue_meta_save (txn, req->sid, &m);
    s_reply_open (self, req);
    sb_enc_kuint (self->replies, "queued", m.count);
    sb_enc_kbool (self->replies, "paused", m.paused);
    sb_enc_kstr (self->replies, "prompt_id", id);
    s_reply_close (self, req);
}

void
sb_session_queue_write_resume (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r;
    sb_enc_t *e = s_write_begin (self, txn, req, &r);
    if (!e)
        return;
    qmeta_t m;
    sb_queue_meta_load (txn, req->sid, &m);
    if (m.paused) {
        m.paused = false;
        m.reason [0] = 0;
        sb_enc_kuint (e, "queued", m.count);
        s_entry (self, txn, req, r, NULL, "queue.resumed", e);
        sb_queue_meta_save (txn, req->sid, &m);
        sb_info (ACTOR, "queue resumed session=%s queued=%llu", req->sid, (unsigned long long) m.count);
    }
    sb_session_queue_check (self, req->sid);
    s_reply_open (self, req);
    sb_enc_kuint (self->replies, "queued", m.count);
    sb_enc_kbool (self->replies, "paused", false);
    s_reply_close (self, req);
}

//  The executor is at a step boundary of run_id: every steer pending for
//  that run joins it now, as prompt.steered entries (its context builder
//  makes each a user message), and leaves the session's steers in the
//  same transaction.
void
sb_session_queue_write_steer_take (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r;
    sb_enc_t *e = s_write_begin (self, txn, req, &r);
    if (!e)
        return;
    if (req->has_fence && req->fence < r->fence) {
        sb_session_fail (req, SB_E_fenced, "fence %llu is older than the session's fence %llu",
                         (unsigned long long) req->fence, (unsigned long long) r->fence);
        return;
    }
    uint64_t step = sb_get_uint (req->msg->body, "step", 1);
    qmeta_t m;
    sb_queue_meta_load (txn, req->sid, &m);
    size_t taken = 0;
    if (m.steers && !s_req_move (req, NULL, SB_QUEUE_steer, SB_QUEUE_steered))
        return;
    if (m.steers) {
        qitem_t *list = NULL;
        size_t cap = 0;
        sb_key_t prefix;
        sb_queue_key (&prefix, 'W', req->sid);
        sb_txn_iter_t it;
        sb_datum_t k, v;
        sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
        while (sb_txn_iter_next (&it, &k, &v)) {
            qitem_t item;
            if (!sb_queue_item_read (self, &v, &item) || !item.run_id || strcmp (item.run_id, req->run_id) != 0)
                continue;
            if (!sb_session_reserve ((void **) &list, &cap, taken, sizeof *list)) {
                txn->ret = -ENOMEM;
                sb_txn_iter_end (&it);
                break;
            }
            list [taken++] = item;
            sb_txn_iter_del (&it);
        }
        for (size_t i = 0; i < taken && txn->ret == 0; i++) {
            m.steers--;
            m.bytes = m.bytes > list [i].len? m.bytes - list [i].len: 0;
            sb_enc_kstr (e, "prompt_id", list [i].prompt_id);
            sb_enc_kstr (e, "text", list [i].text);
            sb_enc_kuint (e, "step", step);
            //  the context builder shows them with the steer's text
            //  (actors/exec/context.c), as it does a prompt's
            sb_queue_item_images (e, &list [i]);
            s_entry (self, txn, req, r, req->run_id, "prompt.steered", e);
        }
        free (list);
        if (taken)
            sb_queue_meta_save (txn, req->sid, &m);
    }
    s_reply_open (self, req);
    sb_enc_kuint (self->replies, "taken", taken);
    s_reply_close (self, req);
}

//  The run coordinator made the run of the queue's head: it leaves the
//  queue (prompt.dequeued, with the run).
void
sb_session_queue_write_dequeue (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r;
    sb_enc_t *e = s_write_begin (self, txn, req, &r);
    if (!e)
        return;
    const char *id = sb_get_str (req->msg->body, "prompt_id");
    const char *run_id = sb_get_str (req->msg->body, "run_id");
    qmeta_t m;
    sb_queue_meta_load (txn, req->sid, &m);
    qitem_t it;
    if (!s_move (req->sid, id, SB_QUEUE_queued, SB_QUEUE_dequeued))
        return;
    if (!m.count || !sb_queue_item_take (self, txn, 'Q', req->sid, id, &it)) {
        if (txn->ret == 0)
            sb_warn (ACTOR, "started prompt no longer queued session=%s prompt=%s run=%s", req->sid, id,
                     run_id? run_id: "-");
        return;
    }
    m.count--;
    m.bytes = m.bytes > it.len? m.bytes - it.len: 0;
    sb_queue_meta_save (txn, req->sid, &m);
    sb_enc_kstr (e, "prompt_id", id);
    sb_enc_kstr_opt (e, "run_id", run_id);
    s_entry (self, txn, req, r, run_id, "prompt.dequeued", e);
    sb_session_queue_check (self, req->sid);
}

//  The queue's head could not start. When the session is idle, nothing
//  else will move the queue: pause it with the reason, for a person to
//  see and resume. (When a run is active, its end tries again.)
void
sb_session_queue_write_start_failed (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r;
    sb_enc_t *e = s_write_begin (self, txn, req, &r);
    if (!e)
        return;
    //  conflict: the run coordinator has a run of this session active,
    //  whose statuses are on their way to the tape; its end starts the
    //  head again.
    const char *code = sb_get_str (req->msg->body, "code");
    if (sb_turn_status_from_name (r->turn_status) != SB_TURN_IDLE || (code && sb_err_from_name (code) == SB_E_conflict))
        return;
    qmeta_t m;
    sb_queue_meta_load (txn, req->sid, &m);
    const char *reason = sb_get_str (req->msg->body, "reason");
    s_pause (self, txn, req, r, &m, reason? reason: "could not start the next prompt", e);
    sb_queue_meta_save (txn, req->sid, &m);
}

//  A restart: whatever was running stopped, so the steers go back to the
//  queue, and the queue waits for a person (a run the restart interrupted
//  is not followed by surprise by the next prompt).
void
sb_session_queue_write_restart (self_t *self, sb_txn_t *txn, req_t *req)
{
    record_t *r;
    sb_enc_t *e = s_write_begin (self, txn, req, &r);
    if (!e)
        return;
    qmeta_t m;
    sb_queue_meta_load (txn, req->sid, &m);
    s_steers_back (self, txn, req, r, &m, "server_restart: the run ended before taking the steer", e);
    s_pause (self, txn, req, r, &m, "server_restart", e);
    sb_queue_meta_save (txn, req->sid, &m);
}

//  The answer the run coordinator gave, remembered under the prompt's
//  command_id by the drain (sb_session_command_remember).
void
sb_session_queue_write_remember (self_t *self, sb_txn_t *txn, req_t *req)
{
    size_t len = 0;
    const char *reply = sb_get_bin (req->msg->body, "reply", &len);
    sb_enc_data (self->replies, &req->reply_off);
    sb_enc_raw (self->replies, (const uint8_t *) reply, len);
    req->reply_len = len;
}

void
sb_session_queue_on_append (self_t *self, sb_txn_t *txn, req_t *req, record_t *r)
{
    const span_t *first = &self->spans [req->span0];
    bool any = false;
    for (size_t k = 0; k < req->nspans && !any; k++)
        any = strcmp (first [k].kind, "run.status") == 0;
    if (!any || txn->ret)
        return;
    //  The append's reply names its own entries only.
    uint64_t last = req->last_seq;
    qmeta_t m, before;
    sb_queue_meta_load (txn, req->sid, &m);
    before = m;
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        txn->ret = -ENOMEM;
        return;
    }
    sb_enc_map_open (e);
    for (size_t k = 0; k < req->nspans && txn->ret == 0; k++) {
        if (strcmp (first [k].kind, "run.status") != 0)
            continue;
        const char *status = sb_get_str (first [k].body, "status");
        const char *why = sb_get_str (first [k].body, "reason");
        sb_run_status_t st = sb_run_status_from_name (status);
        if (st == SB_RUN_cancelling) {
            //  A cancel takes the steers back first: the run being
            //  cancelled must not take them on its way out.
            s_steers_back (self, txn, req, r, &m, "cancelled before the run took the steer", e);
            s_pause (self, txn, req, r, &m, "cancelled", e);
        }
        else
        if (st == SB_RUN_completed) {
            s_steers_back (self, txn, req, r, &m, "the run completed before taking the steer", e);
            sb_session_queue_check (self, req->sid);
        }
        else
        if (st < SB_RUN__COUNT && sb_run_status_is_final (st)) {
            char reason [REASON_MAX];
            snprintf (reason, sizeof reason, "the run ended %s before taking the steer", status);
            s_steers_back (self, txn, req, r, &m, reason, e);
            //  a run a person did not let past its budget pauses with
            //  that reason (docs/usage.md)
            const char *pause = why && strcmp (why, "server_restart") == 0? why: status;
            if (why && strncmp (why, "budget:", 7) == 0)
                pause = "budget";
            s_pause (self, txn, req, r, &m, pause, e);
        }
    }
    sb_enc_destroy (&e);
    if (memcmp (&m, &before, sizeof m) != 0)
        sb_queue_meta_save (txn, req->sid, &m);
    req->last_seq = last;
}

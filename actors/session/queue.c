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
    is idle; the prompt leaves the queue when the answer names its run. */
#include "actors/session/session_impl.h"
#include "schemas/run_status.h"
#include "schemas/types.h"

#include <errno.h>
#include <string.h>

#define Q_BASE          ((uint64_t) 1 << 62)
#define REASON_MAX      1000
#define PROMPT_ID_MAX   40

typedef struct {
    bool paused;
    char reason [REASON_MAX + 1];
    uint64_t head, tail;        //  queue positions in use: [head, tail)
    uint64_t count;             //  prompts in the queue
    uint64_t bytes;             //  bytes of text in the queue and the steers
    uint64_t steer_next, steers;
} qmeta_t;

//  One prompt read out of the store, its strings in the drain's arena.
typedef struct {
    const char *prompt_id, *text, *mode, *policy, *run_id;
    uint64_t created_at;
    size_t len;
} qitem_t;

//  --------------------------------------------------------------------------
//  Keys and records

static void
s_key (sb_key_t *k, char tag, const char *sid)
{
    sb_key_init (k, tag);
    sb_key_str (k, sid);
}

static void
s_meta_load (sb_txn_t *txn, const char *sid, qmeta_t *m)
{
    memset (m, 0, sizeof *m);
    m->head = m->tail = Q_BASE;
    m->steer_next = 1;
    sb_key_t k;
    s_key (&k, 'M', sid);
    MDB_val v;
    if (sb_txn_get (txn, DBI_QUEUE, k.buf, k.len, &v) != 0)
        return;
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (v.mv_data, v.mv_size, NULL, 0, &verr);
    const sb_val_t *d = sb_doc_root (doc);
    if (d) {
        const char *reason = sb_get_str (d, "reason");
        m->paused = sb_get_bool (d, "paused", false);
        snprintf (m->reason, sizeof m->reason, "%s", reason? reason: "");
        m->head = sb_get_uint (d, "head", Q_BASE);
        m->tail = sb_get_uint (d, "tail", Q_BASE);
        m->count = sb_get_uint (d, "count", 0);
        m->bytes = sb_get_uint (d, "bytes", 0);
        m->steer_next = sb_get_uint (d, "steer_next", 1);
        m->steers = sb_get_uint (d, "steers", 0);
    }
    sb_doc_destroy (&doc);
}

static void
s_meta_save (sb_txn_t *txn, const char *sid, const qmeta_t *m)
{
    sb_key_t k;
    s_key (&k, 'M', sid);
    //  An empty queue that is not paused needs no record.
    if (!m->count && !m->steers && !m->paused) {
        sb_txn_del (txn, DBI_QUEUE, k.buf, k.len);
        return;
    }
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        txn->ret = -ENOMEM;
        return;
    }
    sb_enc_map_open (e);
    sb_enc_kbool (e, "paused", m->paused);
    if (m->paused && m->reason [0])
        sb_enc_kstr (e, "reason", m->reason);
    sb_enc_kuint (e, "head", m->head);
    sb_enc_kuint (e, "tail", m->tail);
    sb_enc_kuint (e, "count", m->count);
    sb_enc_kuint (e, "bytes", m->bytes);
    sb_enc_kuint (e, "steer_next", m->steer_next);
    sb_enc_kuint (e, "steers", m->steers);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_txn_put (txn, DBI_QUEUE, k.buf, k.len, data, len);
    sb_enc_destroy (&e);
}

static void
s_item_put (sb_txn_t *txn, char tag, const char *sid, uint64_t pos, const qitem_t *it)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        txn->ret = -ENOMEM;
        return;
    }
    sb_enc_map_open (e);
    sb_enc_kstr (e, "prompt_id", it->prompt_id);
    sb_enc_kstr (e, "text", it->text);
    sb_enc_kstr (e, "mode", it->mode);
    sb_enc_kuint (e, "created_at", it->created_at);
    sb_enc_kstr_opt (e, "approval_policy", it->policy);
    sb_enc_kstr_opt (e, "run_id", it->run_id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_key_t k;
    s_key (&k, tag, sid);
    sb_key_u64 (&k, pos);
    sb_txn_put (txn, DBI_QUEUE, k.buf, k.len, data, len);
    sb_enc_destroy (&e);
}

//  A stored prompt into *it, its strings copied into the drain's arena
//  (the store's pages move under a write transaction). False when it
//  does not decode.
static bool
s_item_read (self_t *self, const MDB_val *v, qitem_t *it)
{
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (v->mv_data, v->mv_size, NULL, 0, &verr);
    const sb_val_t *d = sb_doc_root (doc);
    const sb_val_t *text = d? sb_get (d, "text"): NULL;
    const char *id = d? sb_get_str (d, "prompt_id"): NULL;
    memset (it, 0, sizeof *it);
    bool ok = id && text && text->type == SB_V_STR;
    if (ok) {
        const char *mode = sb_get_str (d, "mode"), *policy = sb_get_str (d, "approval_policy");
        const char *run = sb_get_str (d, "run_id");
        it->prompt_id = sb_session_strdup (self, id);
        it->text = sb_session_strdup (self, text->v.s);
        it->len = text->len;
        it->mode = sb_session_strdup (self, mode? mode: "queue");
        it->policy = policy? sb_session_strdup (self, policy): NULL;
        it->run_id = run? sb_session_strdup (self, run): NULL;
        it->created_at = sb_get_uint (d, "created_at", 0);
        ok = it->prompt_id && it->text && it->mode && (!policy || it->policy) && (!run || it->run_id);
    }
    sb_doc_destroy (&doc);
    return ok;
}

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
    if (!m->steers)
        return;
    qitem_t *list = NULL;
    size_t n = 0, cap = 0;
    sb_key_t prefix;
    s_key (&prefix, 'W', r->session_id);
    sb_txn_iter_t it;
    MDB_val k, v;
    sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v)) {
        if (!sb_session_reserve ((void **) &list, &cap, n, sizeof *list)) {
            txn->ret = -ENOMEM;
            sb_txn_iter_end (&it);
            break;
        }
        if (s_item_read (self, &v, &list [n]))
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
        s_item_put (txn, 'Q', r->session_id, m->head + i, &list [i]);
    }
    m->count += n;
    m->steers = 0;
    for (size_t i = 0; i < n && txn->ret == 0; i++) {
        sb_enc_kstr (e, "prompt_id", list [i].prompt_id);
        sb_enc_kstr (e, "text", list [i].text);
        sb_enc_kstr (e, "mode", "queue");
        sb_enc_kuint (e, "position", i + 1);
        sb_enc_kstr (e, "reason", why);
        s_entry (self, txn, req, r, NULL, "prompt.queued", e);
    }
    free (list);
}

//  Finds prompt `id` under `tag` and removes it: true with *out filled.
static bool
s_take_item (self_t *self, sb_txn_t *txn, char tag, const char *sid, const char *id, qitem_t *out)
{
    sb_key_t prefix;
    s_key (&prefix, tag, sid);
    sb_txn_iter_t it;
    MDB_val k, v;
    sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v)) {
        qitem_t item;
        if (!s_item_read (self, &v, &item) || strcmp (item.prompt_id, id) != 0)
            continue;
        sb_txn_iter_del (&it);
        sb_txn_iter_end (&it);
        *out = item;
        return txn->ret == 0;
    }
    return false;
}

//  --------------------------------------------------------------------------
//  Before the transaction

static bool
s_policy_ok (const char *p)
{
    return strcmp (p, "yolo") == 0 || strcmp (p, "auto") == 0 || strcmp (p, "interactive") == 0;
}

static bool
s_clean (const sb_val_t *body, const char *name)
{
    const sb_val_t *v = sb_get (body, name);
    return !v || v->type != SB_V_STR || strlen (v->v.s) == v->len;
}

void
sb_session_queue_prepare (self_t *self, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    if (req->op == OP_PROMPT) {
        const char *mode = sb_get_str (b, "mode");
        const char *text = sb_get_str (b, "text");
        const char *policy = sb_get_str (b, "approval_policy");
        if (mode && strcmp (mode, "queue") != 0 && strcmp (mode, "steer") != 0)
            sb_session_fail (req, SB_E_invalid, "mode must be queue or steer, not '%.20s'", mode);
        else
        if (!text || !*text)
            sb_session_fail (req, SB_E_invalid, "text must not be empty");
        else
        if (!s_clean (b, "text"))
            sb_session_fail (req, SB_E_invalid, "text must not contain NUL bytes");
        else
        if (policy && !s_policy_ok (policy))
            sb_session_fail (req, SB_E_invalid, "approval_policy must be yolo, auto or interactive, not '%.20s'",
                             policy);
    }
    else
    if (req->op == OP_Q_REMOVE) {
        const char *id = sb_get_str (b, "prompt_id");
        if (!id || !*id || !s_clean (b, "prompt_id") || strlen (id) > PROMPT_ID_MAX)
            sb_session_fail (req, SB_E_invalid, "prompt_id must be a prompt id (from session.queue.list)");
    }
    else
    if (req->op == OP_STEER_TAKE) {
        const sb_val_t *fence = sb_get (b, "fence");
        if (!s_clean (b, "run_id"))
            sb_session_fail (req, SB_E_invalid, "run_id must not contain NUL bytes");
        req->run_id = sb_get_str (b, "run_id");
        req->has_fence = fence != NULL;
        req->fence = fence? fence->v.u: 0;
    }
    else
    if (req->op == OP_Q_REMEMBER) {
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
    (void) self;
}

//  --------------------------------------------------------------------------
//  Writes, inside the drain's transaction

static void
s_write_prompt (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, sb_enc_t *e)
{
    const sb_val_t *b = req->msg->body;
    if (strcmp (r->status, "closed") == 0) {
        sb_session_fail (req, SB_E_conflict, "session %s is closed; it takes no more prompts", req->sid);
        return;
    }
    qmeta_t m;
    s_meta_load (txn, req->sid, &m);
    bool idle = strcmp (r->turn_status, "idle") == 0;
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
    const sb_val_t *textv = sb_get (b, "text");
    const char *mode = sb_get_str (b, "mode");
    bool steer = mode && strcmp (mode, "steer") == 0
              && strcmp (r->turn_status, "running") == 0 && r->last_run_id;
    if (r->tape_bytes + textv->len > self->tape_quota) {
        sb_session_fail (req, SB_E_too_large, "session %s reached its tape quota of %llu bytes", req->sid,
                         (unsigned long long) self->tape_quota);
        return;
    }
    if (m.bytes + textv->len > self->queue_bytes) {
        sb_session_fail (req, SB_E_overloaded, "the queue of session %s holds %llu bytes of prompts; "
                         "at most %llu may wait (SWITCHBOARD_QUEUE_BYTES)", req->sid,
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
        .prompt_id = sb_session_strdup (self, id), .text = textv->v.s, .len = textv->len,
        .mode = steer? "steer": mode? mode: "queue", .policy = sb_get_str (b, "approval_policy"),
        .created_at = self->now, .run_id = steer? r->last_run_id: NULL,
    };
    if (!it.prompt_id) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    uint64_t position = 0;
    if (steer) {
        s_item_put (txn, 'W', req->sid, m.steer_next++, &it);
        m.steers++;
    }
    else {
        if (!m.count)
            m.head = m.tail = Q_BASE;
        s_item_put (txn, 'Q', req->sid, m.tail++, &it);
        position = ++m.count;
    }
    m.bytes += textv->len;
    s_meta_save (txn, req->sid, &m);
    //  An idle session with a queue that goes (a start that could not be
    //  sent, say) tries again now.
    if (idle && !steer && !req->q_force_busy)
        sb_session_queue_check (self, req->sid);
    sb_enc_kstr (e, "prompt_id", it.prompt_id);
    sb_enc_kstr (e, "text", it.text);
    sb_enc_kstr (e, "mode", steer? "steer": "queue");
    if (!steer)
        sb_enc_kuint (e, "position", position);
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

static void
s_write_remove (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, sb_enc_t *e)
{
    const char *id = sb_get_str (req->msg->body, "prompt_id");
    if (sb_session_prompt_starting (self, req->sid, id)) {
        sb_session_fail (req, SB_E_conflict, "prompt %s is starting its run now; cancel the run instead", id);
        return;
    }
    qmeta_t m;
    s_meta_load (txn, req->sid, &m);
    qitem_t it;
    bool queued = m.count && s_take_item (self, txn, 'Q', req->sid, id, &it);
    bool steer = !queued && m.steers && s_take_item (self, txn, 'W', req->sid, id, &it);
    if (txn->ret)
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
    s_meta_save (txn, req->sid, &m);
    s_reply_open (self, req);
    sb_enc_kuint (self->replies, "queued", m.count);
    sb_enc_kbool (self->replies, "paused", m.paused);
    sb_enc_kstr (self->replies, "prompt_id", id);
    s_reply_close (self, req);
}

static void
s_write_resume (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, sb_enc_t *e)
{
    qmeta_t m;
    s_meta_load (txn, req->sid, &m);
    if (m.paused) {
        m.paused = false;
        m.reason [0] = 0;
        sb_enc_kuint (e, "queued", m.count);
        s_entry (self, txn, req, r, NULL, "queue.resumed", e);
        s_meta_save (txn, req->sid, &m);
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
static void
s_write_steer_take (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, sb_enc_t *e)
{
    if (req->has_fence && req->fence < r->fence) {
        sb_session_fail (req, SB_E_fenced, "fence %llu is older than the session's fence %llu",
                         (unsigned long long) req->fence, (unsigned long long) r->fence);
        return;
    }
    uint64_t step = sb_get_uint (req->msg->body, "step", 1);
    qmeta_t m;
    s_meta_load (txn, req->sid, &m);
    size_t taken = 0;
    if (m.steers) {
        qitem_t *list = NULL;
        size_t cap = 0;
        sb_key_t prefix;
        s_key (&prefix, 'W', req->sid);
        sb_txn_iter_t it;
        MDB_val k, v;
        sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
        while (sb_txn_iter_next (&it, &k, &v)) {
            qitem_t item;
            if (!s_item_read (self, &v, &item) || !item.run_id || strcmp (item.run_id, req->run_id) != 0)
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
            s_entry (self, txn, req, r, req->run_id, "prompt.steered", e);
        }
        free (list);
        if (taken)
            s_meta_save (txn, req->sid, &m);
    }
    s_reply_open (self, req);
    sb_enc_kuint (self->replies, "taken", taken);
    s_reply_close (self, req);
}

//  The run coordinator made the run of the queue's head: it leaves the
//  queue (prompt.dequeued, with the run).
static void
s_write_dequeue (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, sb_enc_t *e)
{
    const char *id = sb_get_str (req->msg->body, "prompt_id");
    const char *run_id = sb_get_str (req->msg->body, "run_id");
    qmeta_t m;
    s_meta_load (txn, req->sid, &m);
    qitem_t it;
    if (!m.count || !s_take_item (self, txn, 'Q', req->sid, id, &it)) {
        if (txn->ret == 0)
            sb_warn (ACTOR, "started prompt no longer queued session=%s prompt=%s run=%s", req->sid, id,
                     run_id? run_id: "-");
        return;
    }
    m.count--;
    m.bytes = m.bytes > it.len? m.bytes - it.len: 0;
    s_meta_save (txn, req->sid, &m);
    sb_enc_kstr (e, "prompt_id", id);
    sb_enc_kstr_opt (e, "run_id", run_id);
    s_entry (self, txn, req, r, run_id, "prompt.dequeued", e);
    sb_session_queue_check (self, req->sid);
}

//  The queue's head could not start. When the session is idle, nothing
//  else will move the queue: pause it with the reason, for a person to
//  see and resume. (When a run is active, its end tries again.)
static void
s_write_start_failed (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, sb_enc_t *e)
{
    //  conflict: the run coordinator has a run of this session active,
    //  whose statuses are on their way to the tape; its end starts the
    //  head again.
    const char *code = sb_get_str (req->msg->body, "code");
    if (strcmp (r->turn_status, "idle") != 0 || (code && strcmp (code, "conflict") == 0))
        return;
    qmeta_t m;
    s_meta_load (txn, req->sid, &m);
    const char *reason = sb_get_str (req->msg->body, "reason");
    s_pause (self, txn, req, r, &m, reason? reason: "could not start the next prompt", e);
    s_meta_save (txn, req->sid, &m);
}

//  A restart: whatever was running stopped, so the steers go back to the
//  queue, and the queue waits for a person (a run the restart interrupted
//  is not followed by surprise by the next prompt).
static void
s_write_restart (self_t *self, sb_txn_t *txn, req_t *req, record_t *r, sb_enc_t *e)
{
    qmeta_t m;
    s_meta_load (txn, req->sid, &m);
    s_steers_back (self, txn, req, r, &m, "server_restart: the run ended before taking the steer", e);
    s_pause (self, txn, req, r, &m, "server_restart", e);
    s_meta_save (txn, req->sid, &m);
}

void
sb_session_queue_write (self_t *self, sb_txn_t *txn, req_t *req)
{
    if (req->op == OP_Q_REMEMBER) {
        //  The answer the run coordinator gave, remembered under the
        //  prompt's command_id by the drain (sb_session_command_remember).
        size_t len = 0;
        const char *reply = sb_get_bin (req->msg->body, "reply", &len);
        sb_enc_data (self->replies, &req->reply_off);
        sb_enc_raw (self->replies, (const uint8_t *) reply, len);
        req->reply_len = len;
        return;
    }
    record_t *r = sb_session_record_get (self, txn, req, req->sid);
    if (!r)
        return;
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    sb_enc_map_open (e);
    switch (req->op) {
        case OP_PROMPT:         s_write_prompt (self, txn, req, r, e); break;
        case OP_Q_REMOVE:       s_write_remove (self, txn, req, r, e); break;
        case OP_Q_RESUME:       s_write_resume (self, txn, req, r, e); break;
        case OP_STEER_TAKE:     s_write_steer_take (self, txn, req, r, e); break;
        case OP_Q_DEQUEUE:      s_write_dequeue (self, txn, req, r, e); break;
        case OP_Q_START_FAILED: s_write_start_failed (self, txn, req, r, e); break;
        case OP_Q_RESTART:      s_write_restart (self, txn, req, r, e); break;
        default: break;
    }
    sb_enc_destroy (&e);
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
    s_meta_load (txn, req->sid, &m);
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
            s_pause (self, txn, req, r, &m, why && strcmp (why, "server_restart") == 0? why: status, e);
        }
    }
    sb_enc_destroy (&e);
    if (memcmp (&m, &before, sizeof m) != 0)
        s_meta_save (txn, req->sid, &m);
    req->last_seq = last;
}

void
sb_session_queue_drop (sb_txn_t *txn, const char *sid)
{
    const char tags [] = { 'Q', 'W' };
    for (size_t t = 0; t < sizeof tags; t++) {
        sb_key_t prefix;
        s_key (&prefix, tags [t], sid);
        sb_txn_iter_t it;
        MDB_val k, v;
        sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
        while (sb_txn_iter_next (&it, &k, &v))
            sb_txn_iter_del (&it);
    }
    sb_key_t k;
    s_key (&k, 'M', sid);
    sb_txn_del (txn, DBI_QUEUE, k.buf, k.len);
}

//  --------------------------------------------------------------------------
//  Reads

static void
s_read_items (sb_txn_t *txn, sb_enc_t *enc, char tag, const char *sid)
{
    sb_key_t prefix;
    s_key (&prefix, tag, sid);
    sb_txn_iter_t it;
    MDB_val k, v;
    sb_enc_array_open (enc);
    sb_txn_iter_begin (txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
    while (sb_txn_iter_next (&it, &k, &v))
        sb_enc_raw (enc, v.mv_data, v.mv_size);
    sb_enc_array_close (enc);
}

void
sb_session_queue_read (self_t *self, sb_txn_t *txn, req_t *req)
{
    MDB_val v;
    if (!sb_session_record_load (txn, req, req->sid, &v))
        return;
    qmeta_t m;
    s_meta_load (txn, req->sid, &m);
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_key (self->enc, "prompts");
    s_read_items (txn, self->enc, 'Q', req->sid);
    sb_enc_key (self->enc, "steers");
    s_read_items (txn, self->enc, 'W', req->sid);
    sb_enc_kbool (self->enc, "paused", m.paused);
    if (m.paused && m.reason [0])
        sb_enc_kstr (self->enc, "reason", m.reason);
    sb_enc_map_close (self->enc);
    if (txn->ret)
        return;
    size_t len;
    const uint8_t *data = sb_enc_data (self->enc, &len);
    sb_bus_reply (self->bus, req->msg, data, len);
}

//  --------------------------------------------------------------------------
//  Starting the next prompt

void
sb_session_queue_check (self_t *self, const char *sid)
{
    zlistx_add_end (self->q_pump, (void *) sid);
}

void
sb_session_queue_pump (self_t *self)
{
    if (!zlistx_size (self->q_pump))
        return;
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0) {
        zlistx_purge (self->q_pump);
        return;
    }
    for (const char *sid = zlistx_first (self->q_pump); sid; sid = zlistx_next (self->q_pump)) {
        if (zhashx_lookup (self->starting, sid))
            continue;
        sb_key_t rk;
        MDB_val v;
        sb_key_init (&rk, 'S');
        sb_key_str (&rk, sid);
        if (sb_txn_get (&txn, DBI_SESSIONS, rk.buf, rk.len, &v) != 0)
            continue;
        sb_verr_t verr;
        sb_doc_t *doc = sb_decode (v.mv_data, v.mv_size, sb_session_record_fields, 0, &verr);
        const sb_val_t *rec = sb_doc_root (doc);
        const char *status = sb_get_str (rec, "status"), *turn = sb_get_str (rec, "turn_status");
        bool ready = status && turn && strcmp (status, "active") == 0 && strcmp (turn, "idle") == 0;
        sb_doc_destroy (&doc);
        qmeta_t m;
        if (!ready || (s_meta_load (&txn, sid, &m), m.paused || !m.count))
            continue;
        sb_key_t prefix;
        s_key (&prefix, 'Q', sid);
        sb_txn_iter_t it;
        MDB_val k;
        sb_txn_iter_begin (&txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
        if (!sb_txn_iter_next (&it, &k, &v))
            continue;
        sb_txn_iter_end (&it);
        doc = sb_decode (v.mv_data, v.mv_size, NULL, 0, &verr);
        const sb_val_t *item = sb_doc_root (doc);
        const char *id = sb_get_str (item, "prompt_id"), *text = sb_get_str (item, "text");
        if (id && text && !sb_session_prompt_start (self, sid, id, text, sb_get_str (item, "approval_policy")))
            sb_warn (ACTOR, "cannot send run.request for queued prompt session=%s prompt=%s", sid, id);
        sb_doc_destroy (&doc);
    }
    sb_txn_abort (&txn);
    zlistx_purge (self->q_pump);
}

//  --------------------------------------------------------------------------
//  Internal requests and startup

sb_msg_t *
sb_session_queue_msg (const char *type, const uint8_t *body, size_t len)
{
    sb_msg_t *msg = calloc (1, sizeof *msg);
    if (!msg)
        return NULL;
    sb_verr_t verr;
    msg->doc = sb_decode (body, len, NULL, 0, &verr);
    if (!msg->doc) {
        free (msg);
        return NULL;
    }
    msg->body = sb_doc_root (msg->doc);
    snprintf (msg->h.type, sizeof msg->h.type, "%s", type);
    snprintf (msg->h.from, sizeof msg->h.from, "%s", ACTOR);
    msg->h.ts = sb_now_ms ();
    return msg;
}

size_t
sb_session_queue_recover (self_t *self)
{
    zlistx_t *sids = zlistx_new ();
    if (!sids)
        return 0;
    zlistx_set_destructor (sids, (czmq_destructor *) zstr_free);
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) == 0) {
        sb_key_t prefix;
        sb_key_init (&prefix, 'M');
        sb_txn_iter_t it;
        MDB_val k, v;
        sb_txn_iter_begin (&txn, &it, DBI_QUEUE, prefix.buf, prefix.len, NULL, 0);
        while (sb_txn_iter_next (&it, &k, &v))
            if (k.mv_size >= 2 && ((const char *) k.mv_data) [k.mv_size - 1] == 0)
                zlistx_add_end (sids, strndup ((const char *) k.mv_data + 1, k.mv_size - 2));
        sb_txn_abort (&txn);
    }
    size_t n = 0;
    for (const char *sid = zlistx_first (sids); sid; sid = zlistx_next (sids)) {
        sb_enc_t *e = sb_enc_new ();
        if (!e)
            break;
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", sid);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *msg = sb_session_queue_msg ("session.queue.restart", b, len);
        sb_enc_destroy (&e);
        if (msg && sb_session_take (self, &msg, OP_Q_RESTART, true, true))
            n++;
        sb_msg_destroy (&msg);
    }
    zlistx_destroy (&sids);
    if (n)
        sb_info (ACTOR, "queues held at restart sessions=%zu", n);
    return n;
}

//  session.steer.take comes before every model call of every run, and
//  nearly always finds nothing: then it is answered at once from a read
//  transaction, without waiting for a drain's commit. A steer that is
//  being written meanwhile is taken at the next boundary. True when
//  answered.
bool
sb_session_queue_take_none (self_t *self, const sb_msg_t *msg)
{
    const char *sid = sb_get_str (msg->body, "session_id");
    if (!sid || strlen (sid) != SB_ULID_LEN || !sb_ulid_valid (sid))
        return false;           //  the drain refuses it, saying why
    sb_txn_t txn;
    if (sb_txn_begin (self->store, &txn, false) != 0)
        return false;
    qmeta_t m;
    s_meta_load (&txn, sid, &m);
    sb_key_t k;
    s_key (&k, 'S', sid);
    MDB_val v;
    bool known = sb_txn_get (&txn, DBI_SESSIONS, k.buf, k.len, &v) == 0;
    sb_txn_abort (&txn);
    if (!known || m.steers)
        return false;
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_kuint (self->enc, "taken", 0);
    sb_enc_map_close (self->enc);
    size_t len;
    const uint8_t *b = sb_enc_data (self->enc, &len);
    sb_bus_reply (self->bus, msg, b, len);
    return true;
}

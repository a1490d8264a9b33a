/*  actors/session/prompt.c — run.request on behalf of session.prompt and of
    the queue, and what their answers mean.

    A prompt and its run are one decision of the run coordinator: it
    appends the `prompt` entry together with the run's first `run.status`
    (one batch, through its outbox), so the tape never shows a prompt
    without its run. The session actor therefore sends run.request and
    relays or records the answer; it never blocks on it, so the tape keeps
    flowing meanwhile (the run coordinator itself calls session.get and
    session.append while it decides).

    Two kinds of request go out:
      - a session.prompt the drain found nothing in the way of (no run,
        no queue waiting: actors/session/queue.c). Its answer is relayed;
        its command_id, if any, is remembered with that answer. When the
        run coordinator answers `conflict` (a run became active that the
        session had not heard of yet), the prompt goes back into the drain
        to be queued, or to steer, like any prompt of a busy session.
      - the queue's next prompt, with the command_id "queue:<prompt_id>".
        The run coordinator remembers it, so sending it again (after a
        crash, or a timeout) gives back the run it made the first time and
        never a second one. The prompt leaves the queue (prompt.dequeued)
        when the answer names its run.
    While either is in flight for a session, that session counts as busy
    (self->starting). */
#include "actors/session/session_impl.h"
#include "common/blob_ref.h"

#include <string.h>

#define FORWARD_TTL_MS 20000

typedef enum { FWD_PROMPT, FWD_QUEUE } fwd_kind_t;

typedef struct {
    fwd_kind_t kind;
    sb_msg_t *msg;              //  FWD_PROMPT: the session.prompt to answer
    char id [SB_ULID_LEN + 1];  //  the run.request's id
    char sid [SB_ULID_LEN + 1];
    char prompt_id [40];        //  FWD_QUEUE
    char cmd [65];              //  FWD_PROMPT: its command_id, or ""
    uint8_t digest [SB_DIGEST_LEN];
    int64_t expires;            //  mono ms
} forward_t;

static void
s_forward_free (void **item)
{
    forward_t *f = *item;
    if (f) {
        sb_msg_destroy (&f->msg);
        free (f);
        *item = NULL;
    }
}

zhashx_t *
sb_session_forwards_new (void)
{
    zhashx_t *table = zhashx_new ();
    if (table)
        zhashx_set_destructor (table, s_forward_free);
    return table;
}

//  Sends run.request; registers f under its id (the table owns f then),
//  and the session as starting. False when it cannot be sent (f is the
//  caller's still); when an image is the reason, err says which.
static bool
s_send (self_t *self, forward_t *f, const char *text, const sb_val_t *images, const char *policy, const char *cmd,
        char *err, size_t errlen)
{
    err [0] = 0;
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return false;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", f->sid);
    sb_enc_kstr (e, "input", text);
    //  Checked when the prompt was taken. A queued prompt's are checked
    //  again: its session holds them while it waits (removing it lets
    //  them go only when nothing else names them), so this fails only on
    //  a store changed under the server.
    if (sb_blob_encode_images (e, self->blob_dir, f->sid, images, err, errlen)) {
        sb_warn (ACTOR, "prompt images session=%s error=\"%s\"", f->sid, err);
        sb_enc_destroy (&e);
        return false;
    }
    sb_enc_kstr_opt (e, "approval_policy", policy);
    sb_enc_kstr_opt (e, "command_id", cmd);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    f->expires = sb_mono_ms () + FORWARD_TTL_MS;
    int rc = sb_bus_send (self->bus, "run.request", f->sid, NULL, b, len, sb_now_ms () + FORWARD_TTL_MS, f->id);
    sb_enc_destroy (&e);
    if (rc != 0)
        return false;
    zhashx_update (self->forwards, f->id, f);
    zhashx_update (self->starting, f->sid, f);
    return true;
}

/*  Refuses (invalid) a session.prompt whose images the session does not
    hold, are not images, or cannot be sent to a model (common/blob_ref.h). */
void
sb_session_prompt_check_images (self_t *self, req_t *req)
{
    const sb_val_t *images = sb_get (req->msg->body, "images");
    if (!images || !images->len)
        return;
    sb_enc_t *e = sb_enc_new ();
    if (!e) {
        sb_session_fail (req, SB_E_internal, "out of memory");
        return;
    }
    char err [512];
    sb_enc_map_open (e);
    if (sb_blob_encode_images (e, self->blob_dir, req->sid, images, err, sizeof err))
        sb_session_fail (req, SB_E_invalid, "%s", err);
    sb_enc_destroy (&e);
}

void
sb_session_prompt_forward (self_t *self, req_t *req)
{
    forward_t *f = calloc (1, sizeof *f);
    sb_msg_t *msg = req->msg;
    if (!f) {
        sb_bus_error (self->bus, msg, SB_E_internal, "out of memory");
        return;
    }
    f->kind = FWD_PROMPT;
    snprintf (f->sid, sizeof f->sid, "%s", req->sid);
    if (req->cmd) {
        snprintf (f->cmd, sizeof f->cmd, "%s", req->cmd);
        memcpy (f->digest, req->cmd_digest, SB_DIGEST_LEN);
    }
    //  The prompt is answered later: the forward owns its message now.
    f->msg = msg;
    req->msg = NULL;
    const sb_val_t *b = msg->body;
    //  The retry of a prompt is the retry of its run request.
    char err [512];
    if (!s_send (self, f, sb_get_str (b, "text"), sb_get (b, "images"), sb_get_str (b, "approval_policy"), req->cmd,
                 err, sizeof err)) {
        sb_bus_error (self->bus, msg, SB_E_unavailable, "cannot reach the run coordinator");
        s_forward_free ((void **) &f);
    }
}

static void s_queue_answered (self_t *self, forward_t *f, const sb_msg_t *reply, const char *why);

bool
sb_session_prompt_start (self_t *self, const char *sid, const char *prompt_id, const char *text,
                         const sb_val_t *images, const char *policy)
{
    forward_t *f = calloc (1, sizeof *f);
    if (!f)
        return false;
    f->kind = FWD_QUEUE;
    snprintf (f->sid, sizeof f->sid, "%s", sid);
    snprintf (f->prompt_id, sizeof f->prompt_id, "%s", prompt_id);
    char cmd [64];
    snprintf (cmd, sizeof cmd, "queue:%s", prompt_id);
    char err [512];
    if (!s_send (self, f, text, images, policy, cmd, err, sizeof err)) {
        //  An image it names is gone: nothing will bring it back, so the
        //  queue pauses saying which (a person removes the prompt).
        if (err [0])
            s_queue_answered (self, f, NULL, err);
        s_forward_free ((void **) &f);
        return err [0] != 0;
    }
    sb_info (ACTOR, "starting queued prompt session=%s prompt=%s", sid, prompt_id);
    return true;
}

//  An internal request about session `sid`: the body is the map `e` holds
//  (opened by the caller, closed here).
static void
s_internal (self_t *self, op_t op, const char *type, sb_enc_t *e)
{
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *msg = sb_session_queue_msg (type, b, len);
    if (!msg) {
        sb_error (ACTOR, "out of memory for an internal %s", type);
        return;
    }
    sb_session_take (self, &msg, op);
}

//  A relayed error: the run coordinator's, as it said it.
static void
s_relay_error (self_t *self, const forward_t *f, const sb_msg_t *reply)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    sb_enc_val (e, reply->body);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply_to (self->bus, f->msg->route, f->msg->route_len, &f->msg->h, "error", 0, b, len);
    sb_enc_destroy (&e);
}

//  The answer to a forwarded session.prompt.
static void
s_prompt_answered (self_t *self, forward_t *f, const sb_msg_t *reply)
{
    if (sb_msg_is_error (reply)) {
        if (sb_err_from_name (sb_msg_error_code (reply)) == SB_E_conflict) {
            //  A run is active after all: the prompt waits like any other.
            req_t *req = sb_session_take (self, &f->msg, OP_PROMPT);
            if (req)
                req->q_force_busy = true;
        }
        else {
            s_relay_error (self, f, reply);
            //  prompts queued behind this one while it was in flight
            sb_session_queue_check (self, f->sid);
        }
        return;
    }
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    const sb_val_t *run = sb_get_map (reply->body, "run");
    sb_enc_map_open (e);
    sb_enc_kstr (e, "run_id", sb_get_str (run, "run_id"));
    sb_enc_kval (e, "run", run);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, f->msg, b, len);
    if (f->cmd [0]) {
        //  Remembered like the session's other commands, so that a retry
        //  that comes while the run is active gets this answer again
        //  instead of being queued.
        sb_enc_t *m = sb_enc_new ();
        if (m) {
            sb_enc_map_open (m);
            sb_enc_kstr (m, "session_id", f->sid);
            sb_enc_kstr (m, "command_id", f->cmd);
            sb_enc_key (m, "digest");
            sb_enc_bin (m, f->digest, SB_DIGEST_LEN);
            sb_enc_key (m, "reply");
            sb_enc_bin (m, b, len);
            s_internal (self, OP_Q_REMEMBER, "session.prompt", m);
            sb_enc_destroy (&m);
        }
    }
    sb_enc_destroy (&e);
}

//  The answer to the start of the queue's next prompt (NULL: none came,
//  or `why` it could not be sent).
static void
s_queue_answered (self_t *self, forward_t *f, const sb_msg_t *reply, const char *why_not)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", f->sid);
    sb_enc_kstr (e, "prompt_id", f->prompt_id);
    if (!reply || sb_msg_is_error (reply)) {
        char why [512];
        snprintf (why, sizeof why, "could not start queued prompt %s: %s", f->prompt_id,
                  reply? sb_msg_error_message (reply): why_not? why_not: "the run coordinator did not answer");
        sb_enc_kstr (e, "reason", why);
        sb_enc_kstr (e, "code", reply? sb_msg_error_code (reply): why_not? "invalid": "timeout");
        s_internal (self, OP_Q_START_FAILED, "session.queue.start_failed", e);
    }
    else {
        sb_enc_kstr (e, "run_id", sb_get_str (sb_get_map (reply->body, "run"), "run_id"));
        s_internal (self, OP_Q_DEQUEUE, "session.queue.dequeue", e);
    }
    sb_enc_destroy (&e);
}

static void
s_forward_done (self_t *self, forward_t *f)
{
    if (zhashx_lookup (self->starting, f->sid) == f)
        zhashx_delete (self->starting, f->sid);
    zhashx_delete (self->forwards, f->id);
}

/*  A reply to one of our requests. Returns true when it was one. */
bool
sb_session_prompt_reply (self_t *self, sb_msg_t **reply_p)
{
    sb_msg_t *reply = *reply_p;
    forward_t *f = zhashx_lookup (self->forwards, reply->h.corr);
    if (!f)
        return false;
    if (zhashx_lookup (self->starting, f->sid) == f)
        zhashx_delete (self->starting, f->sid);
    if (f->kind == FWD_PROMPT)
        s_prompt_answered (self, f, reply);
    else
        s_queue_answered (self, f, reply, NULL);
    s_forward_done (self, f);
    return true;
}

/*  Answers forwards that got nothing back in time. A queued prompt whose
    start timed out stays at the head of its queue, which pauses: the
    run coordinator may have made its run, and the same command_id gets
    that run back when the queue resumes. */
void
sb_session_prompt_expire (self_t *self)
{
    if (!zhashx_size (self->forwards))
        return;
    int64_t now = sb_mono_ms ();
    zlistx_t *keys = zhashx_keys (self->forwards);
    for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
        forward_t *f = zhashx_lookup (self->forwards, k);
        if (!f || f->expires >= now)
            continue;
        if (f->kind == FWD_PROMPT && f->msg)
            sb_bus_error (self->bus, f->msg, SB_E_timeout, "the run coordinator did not answer in %d s",
                          FORWARD_TTL_MS / 1000);
        else
        if (f->kind == FWD_QUEUE)
            s_queue_answered (self, f, NULL, NULL);
        s_forward_done (self, f);
    }
    zlistx_destroy (&keys);
}

bool
sb_session_prompt_in_flight (self_t *self, const char *sid, const char *cmd)
{
    const forward_t *f = zhashx_lookup (self->starting, sid);
    return f && f->kind == FWD_PROMPT && cmd && strcmp (f->cmd, cmd) == 0;
}

bool
sb_session_prompt_starting (self_t *self, const char *sid, const char *prompt_id)
{
    const forward_t *f = zhashx_lookup (self->starting, sid);
    return f && f->kind == FWD_QUEUE && prompt_id && strcmp (f->prompt_id, prompt_id) == 0;
}

bool
sb_session_prompt_due (self_t *self)
{
    int64_t now = sb_mono_ms ();
    for (forward_t *f = zhashx_first (self->forwards); f; f = zhashx_next (self->forwards))
        if (f->expires < now)
            return true;
    return false;
}

/*  actors/session/prompt.c — session.prompt, the user-facing way to give a
    session a prompt.

    The prompt and its run are one decision of the run coordinator: it
    refuses a second run of a busy session, and it appends the `prompt`
    entry together with the run's first `run.status` (one batch, through
    its outbox), so the tape never shows a prompt without its run. The
    session actor therefore forwards session.prompt as run.request and
    relays the answer; it never blocks on it, so the tape keeps flowing
    meanwhile. */
#include "actors/session/session_impl.h"

#include <string.h>

#define FORWARD_TTL_MS 20000

typedef struct {
    uint8_t *route;
    size_t route_len;
    sb_header_t req;            /* the session.prompt request, to answer */
    int64_t expires;            /* mono ms */
} forward_t;

static void
s_forward_free (void **item)
{
    forward_t *f = *item;
    if (f) {
        free (f->route);
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

/*  Forwards one session.prompt; takes the message. */
void
sb_session_prompt (self_t *self, sb_msg_t **msg_p)
{
    sb_msg_t *msg = *msg_p;
    forward_t *f = calloc (1, sizeof *f);
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
    f->expires = sb_mono_ms () + FORWARD_TTL_MS;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sb_get_str (msg->body, "session_id"));
    sb_enc_kstr (e, "input", sb_get_str (msg->body, "text"));
    sb_enc_kstr_opt (e, "approval_policy", sb_get_str (msg->body, "approval_policy"));
    /* the retry of a prompt is the retry of its run request */
    sb_enc_kstr_opt (e, "command_id", sb_get_str (msg->body, "command_id"));
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    char id [SB_ULID_LEN + 1];
    if (sb_bus_send (self->bus, "run.request", msg->h.key [0] ? msg->h.key : NULL, NULL, b, len,
                     sb_now_ms () + FORWARD_TTL_MS, id) != 0) {
        sb_bus_error (self->bus, msg, SB_E_unavailable, "cannot reach the run coordinator");
        s_forward_free ((void **) &f);
    }
    else
        zhashx_insert (self->forwards, id, f);
    sb_enc_destroy (&e);
    sb_msg_destroy (msg_p);
}

/*  A reply to one of our forwards: relay it. Returns true when it was one. */
bool
sb_session_prompt_reply (self_t *self, const sb_msg_t *reply)
{
    forward_t *f = zhashx_lookup (self->forwards, reply->h.corr);
    if (!f)
        return false;
    if (sb_msg_is_error (reply)) {
        sb_enc_t *e = sb_enc_new ();
        if (e) {
            sb_enc_val (e, reply->body);
            size_t len;
            const uint8_t *b = sb_enc_data (e, &len);
            sb_bus_reply_to (self->bus, f->route, f->route_len, &f->req, "error", 0, b, len);
            sb_enc_destroy (&e);
        }
    }
    else {
        sb_enc_t *e = sb_enc_new ();
        if (e) {
            const sb_val_t *run = sb_get_map (reply->body, "run");
            sb_enc_map_open (e);
            sb_enc_kstr (e, "run_id", sb_get_str (run, "run_id"));
            sb_enc_kval (e, "run", run);
            sb_enc_map_close (e);
            size_t len;
            const uint8_t *b = sb_enc_data (e, &len);
            sb_bus_reply_to (self->bus, f->route, f->route_len, &f->req, "session.prompt.ok", 0, b, len);
            sb_enc_destroy (&e);
        }
    }
    zhashx_delete (self->forwards, reply->h.corr);
    return true;
}

/*  Answers forwards that got nothing back in time. */
void
sb_session_prompt_expire (self_t *self)
{
    if (!zhashx_size (self->forwards))
        return;
    int64_t now = sb_mono_ms ();
    zlistx_t *keys = zhashx_keys (self->forwards);
    for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys)) {
        forward_t *f = zhashx_lookup (self->forwards, k);
        if (f && f->expires < now) {
            sb_msg_t fake = { .h = f->req, .route = f->route, .route_len = f->route_len };
            sb_bus_error (self->bus, &fake, SB_E_timeout, "the run coordinator did not answer in %d s",
                          FORWARD_TTL_MS / 1000);
            zhashx_delete (self->forwards, k);
        }
    }
    zlistx_destroy (&keys);
}

/*  gateway/bridge.c — the gateway's bus thread: one DEALER for calls, one
    SUB for the session topics, and every subscription's cursor.

    Subscribe (docs/gateway.md): the live topic is subscribed first, then
    the tape is replayed after the client's cursor with session.events, a
    page at a time (the next page is read only once the client's
    connection has written the last event of this one). Live events that
    arrive meanwhile are buffered (bounded); when the replay is done they
    are delivered after the cursor, and a gap in them, or a buffer that
    overflowed, means one more replay. From then on each live event with
    seq = cursor + 1 is delivered, one that skips ahead starts a replay,
    one at or below the cursor is dropped. Every seq reaches the client
    once and in order, whatever pub/sub drops.

    A live event is turned into JSON once and shared by every connection
    that watches the session. Everything here runs on the bridge thread;
    only the queues in gateway_impl.h cross to the lws thread. */
#include "gateway/bridge_impl.h"
#include "bus/broker.h"
#include "bus/client.h"
#include "bus/envelope.h"
#include "bus/tap.h"
#include "common/log.h"
#include "schemas/json.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/*  Output */

//  A new item for the lws thread, holding buf (NULL, buf released: out of
//  memory, or no buf).
static gw_out_t *
s_out_new (gw_out_kind_t kind, uint64_t conn, gw_buf_t *buf)
{
    gw_out_t *out = buf ? calloc (1, sizeof *out) : NULL;
    if (!out) {
        gw_buf_unref (&buf);
        return NULL;
    }
    out->kind = kind;
    out->conn = conn;
    out->buf = buf;
    return out;
}

void
gw_bridge_out_ws (gw_bridge_t *self, uint64_t conn, uint32_t sub_id, gw_buf_t *buf, bool live, bool page_end)
{
    gw_out_t *out = s_out_new (GW_OUT_WS, conn, buf);
    if (!out)
        return;
    out->sub_id = sub_id;
    out->live = live;
    out->page_end = page_end;
    gw_to_lws (self->gw, out);
}

static void
s_out_http (gw_bridge_t *self, uint64_t conn, int status, const char *ctype, gw_buf_t *buf)
{
    static const char full [] = "{\"error\":{\"code\":\"overloaded\",\"message\":\"the gateway's outbound "
                                "bytes are at their bound (--http-out-total): ask again later\"}}";
    gw_out_t *out = s_out_new (GW_OUT_HTTP, conn, buf ? buf : gw_buf_new ("", 0));
    if (!out)
        return;
    out->status = status;
    out->ctype = ctype;
    if (!gw_handoff_charge (self->gw, out)) {
        gw_buf_unref (&out->buf);
        out->buf = gw_buf_new (full, sizeof full - 1);
        out->status = 503;
        out->ctype = "application/json";
    }
    gw_to_lws (self->gw, out);
}

//  Hands the lws thread the answer to a WebSocket call. An answer that
//  would take the handoff past its bound (the lws thread is behind) is
//  `overloaded` in its place, so that a bridge faster than the lws thread
//  cannot pile replies up between them.
static void
s_out_reply (gw_bridge_t *self, uint64_t conn, const char *tx, gw_buf_t *buf)
{
    gw_out_t *out = s_out_new (GW_OUT_WS, conn, buf);
    if (!out)
        return;
    out->reply = true;
    out->tx = strdup (tx ? tx : "null");
    if (!out->tx) {
        gw_out_free (out);
        return;
    }
    if (!gw_handoff_charge (self->gw, out)) {
        atomic_fetch_add (&self->gw->stats.ws_replies_dropped, 1);
        char message [256];
        snprintf (message, sizeof message, "a reply of %zu bytes was dropped: the gateway has %" PRIu64
                  " bytes of answers on their way to its connections (bound %" PRIu64 "); ask again",
                  buf->len, (uint64_t) atomic_load (&self->gw->stats.handoff_bytes), self->gw->out_total);
        gw_buf_unref (&out->buf);
        out->buf = gw_error_json (tx, false, "overloaded", message, true, NULL);
        if (!out->buf) {
            gw_out_free (out);
            return;
        }
    }
    gw_to_lws (self->gw, out);
}

/* ------------------------------------------------------------------ */
/*  Subscriptions */

static void
s_held_clear (bsub_t *s)
{
    for (size_t k = 0; k < s->nheld; k++)
        gw_buf_unref (&s->held [k]);
    s->nheld = 0;
    s->held_bytes = 0;
}

static void
s_sub_free (gw_bridge_t *self, bsub_t *s)
{
    s_held_clear (s);
    free (s->held);
    free (s->held_seq);
    free (s->tx);
    if (s->watch) {
        void *h = zlistx_find (s->watch->subs, s);
        if (h)
            zlistx_delete (s->watch->subs, h);
        if (zlistx_size (s->watch->subs) == 0) {
            char topic [64];
            snprintf (topic, sizeof topic, "session/%s", s->watch->sid);
            zmq_setsockopt (sb_sub_socket (self->sub), ZMQ_UNSUBSCRIBE, topic, strlen (topic));
            zhashx_delete (self->watches, s->watch->sid);
        }
    }
    free (s);
}

static void
s_sub_remove (gw_bridge_t *self, bsub_t *s)
{
    char key [40];
    snprintf (key, sizeof key, "%s", s->key);
    s_sub_free (self, s);
    zhashx_delete (self->subs, key);
}

static void
s_replay (gw_bridge_t *self, bsub_t *s)
{
    s->state = S_REPLAYING;
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_kstr (self->enc, "session_id", s->sid);
    sb_enc_kuint (self->enc, "after_seq", s->last);
    sb_enc_kuint (self->enc, "limit", REPLAY_PAGE);
    sb_enc_map_close (self->enc);
    size_t len;
    const uint8_t *body = sb_enc_data (self->enc, &len);
    char id [40];
    pending_t *p = calloc (1, sizeof *p);
    if (!p || sb_bus_send (self->bus, "session.events", s->sid, NULL, body, len,
                           sb_now_ms () + SB_GW_CALL_TIMEOUT_MS, id) != 0) {
        free (p);
        /* the bus refused at once: tell the client to come back */
        gw_bridge_out_ws (self, s->conn, s->sub_id, gw_error_json (s->tx, false, "unavailable",
                  "the bus did not take the replay; subscribe again", true, NULL), false, false);
        return;
    }
    p->kind = P_REPLAY;
    p->conn = s->conn;
    p->sub_id = s->sub_id;
    p->deadline = sb_mono_ms () + SB_GW_CALL_TIMEOUT_MS + 5000;
    zhashx_insert (self->pending, id, p);
    atomic_fetch_add (&self->gw->stats.replays, 1);
}

//  A stream the bridge cannot go on with: the client hears why, and
//  resubscribes from its cursor when it wants to.
static void
s_sub_fail (gw_bridge_t *self, bsub_t *s, const char *code, const char *message)
{
    gw_buf_t *buf = NULL;
    if (s->tx)
        buf = gw_error_json (s->tx, false, code, message, false, NULL);
    else {
        json_t *j = json_pack ("{s:s,s:s,s:s}", "op", "resync", "session_id", s->sid, "reason", code);
        char *text = j ? json_dumps (j, JSON_COMPACT) : NULL;
        json_decref (j);
        buf = text ? gw_buf_new (text, strlen (text)) : NULL;
        free (text);
    }
    gw_out_t *out = buf ? calloc (1, sizeof *out) : NULL;
    if (out) {
        /* the lws side forgets the subscription when it queues this */
        out->kind = GW_OUT_WS;
        out->conn = s->conn;
        out->sub_id = s->sub_id;
        out->buf = buf;
        out->end_sub = true;
        gw_to_lws (self->gw, out);
    }
    else
        gw_buf_unref (&buf);
    s_sub_remove (self, s);
}

//  The replay has reached the head (no more pages): deliver what was
//  held, then go live, or replay again.
static void
s_caught_up (gw_bridge_t *self, bsub_t *s)
{
    for (size_t k = 0; k < s->nheld; k++) {
        uint64_t seq = s->held_seq [k];
        if (seq <= s->last)
            continue;
        if (seq != s->last + 1) {
            s_held_clear (s);
            s_replay (self, s);
            return;
        }
        gw_bridge_out_ws (self, s->conn, s->sub_id, gw_buf_ref (s->held [k]), true, false);
        s->last = seq;
    }
    s_held_clear (s);
    if (s->overflow) {
        s->overflow = false;
        s_replay (self, s);
        return;
    }
    s->state = S_LIVE;
}

static void
s_on_page (gw_bridge_t *self, bsub_t *s, sb_msg_t *reply)
{
    if (sb_msg_is_error (reply)) {
        s_sub_fail (self, s, sb_msg_error_code (reply), sb_msg_error_message (reply));
        return;
    }
    if (s->tx) {
        json_t *b = json_pack ("{s:s,s:I,s:I}", "session_id", s->sid, "after_seq", (json_int_t) s->after,
                               "last_seq", (json_int_t) sb_get_uint (reply->body, "last_seq", 0));
        char *text = b ? json_dumps (b, JSON_COMPACT) : NULL;
        json_decref (b);
        if (text) {
            size_t n = strlen (text) + strlen (s->tx) + 64;
            gw_buf_t *buf = gw_buf_alloc (n);
            if (buf)
                buf->len = (size_t) snprintf (gw_buf_text (buf), n + 1,
                                              "{\"op\":\"reply\",\"tx\":%s,\"type\":\"subscribed\",\"body\":%s}",
                                              s->tx, text);
            gw_bridge_out_ws (self, s->conn, s->sub_id, buf, false, false);
        }
        free (text);
        free (s->tx);
        s->tx = NULL;
    }
    const sb_val_t *events = sb_get_array (reply->body, "events");
    bool more = sb_get_bool (reply->body, "more", false);
    uint32_t n = events ? events->len : 0;
    uint32_t last_index = UINT32_MAX;
    for (uint32_t k = 0; k < n; k++)
        if (sb_get_uint (sb_array_at (events, k), "seq", 0) > s->last)
            last_index = k;
    for (uint32_t k = 0; k < n; k++) {
        const sb_val_t *ev = sb_array_at (events, k);
        uint64_t seq = sb_get_uint (ev, "seq", 0);
        if (seq <= s->last)
            continue;
        gw_bridge_out_ws (self, s->conn, s->sub_id, gw_event_frame (ev), false, more && k == last_index);
        s->last = seq;
    }
    if (more && last_index != UINT32_MAX) {
        s->state = S_PAGE_WAIT;
        s->more = true;
        return;
    }
    if (more)
        s_replay (self, s);
    else
        s_caught_up (self, s);
}

/*  Appends a live frame for (conn, sub_id) to the chain handed to the lws
    thread in one go; false when out of memory. */
bool
gw_bridge_chain_live (gw_out_t **head, gw_out_t **tail, size_t *n, uint64_t conn, uint32_t sub_id, gw_buf_t *buf)
{
    gw_out_t *out = calloc (1, sizeof *out);
    if (!out)
        return false;
    out->kind = GW_OUT_WS;
    out->conn = conn;
    out->sub_id = sub_id;
    out->buf = gw_buf_ref (buf);
    out->live = true;
    if (*tail)
        (*tail)->next = out;
    else
        *head = out;
    *tail = out;
    (*n)++;
    return true;
}

static void
s_hold (gw_bridge_t *self, bsub_t *s, uint64_t seq, gw_buf_t *buf)
{
    if (s->overflow || seq <= s->last)
        return;
    if (s->nheld >= LIVE_BUFFER_MAX || s->held_bytes + buf->len > self->gw->out_max) {
        /* the tape has them: drop the buffer and read them back later */
        s_held_clear (s);
        s->overflow = true;
        return;
    }
    if (!s->held) {
        s->held = calloc (LIVE_BUFFER_MAX, sizeof *s->held);
        s->held_seq = calloc (LIVE_BUFFER_MAX, sizeof *s->held_seq);
        if (!s->held || !s->held_seq) {
            s->overflow = true;
            return;
        }
    }
    s->held [s->nheld] = gw_buf_ref (buf);
    s->held_seq [s->nheld++] = seq;
    s->held_bytes += buf->len;
}

static void
s_on_event (gw_bridge_t *self, sb_msg_t *msg)
{
    atomic_fetch_add (&self->gw->stats.events_in, 1);
    if (strncmp (msg->topic, "session/", 8) != 0)
        return;
    watch_t *w = zhashx_lookup (self->watches, msg->topic + 8);
    if (!w)
        return;
    uint64_t seq = sb_get_uint (msg->body, "seq", 0);
    gw_buf_t *buf = NULL;
    /* the frames for every live watcher go over in one chain */
    gw_out_t *head = NULL, *tail = NULL;
    size_t n = 0;
    for (bsub_t *s = zlistx_first (w->subs); s; s = zlistx_next (w->subs)) {
        if (seq <= s->last)
            continue;
        if (!buf && !(buf = gw_event_frame (msg->body)))
            break;
        if (s->state != S_LIVE)
            s_hold (self, s, seq, buf);
        else
        if (seq == s->last + 1) {
            if (!gw_bridge_chain_live (&head, &tail, &n, s->conn, s->sub_id, buf))
                continue;       /* the next event shows the gap; the tape fills it */
            s->last = seq;
        }
        else {
            /* pub/sub dropped something: fill the gap from the tape */
            s_hold (self, s, seq, buf);
            s_replay (self, s);
        }
    }
    gw_to_lws_chain (self->gw, head, tail, n);
    gw_buf_unref (&buf);
}

static void
s_subscribe (gw_bridge_t *self, gw_in_t *in)
{
    bsub_t *s = calloc (1, sizeof *s);
    if (!s)
        return;
    snprintf (s->key, sizeof s->key, "%" PRIx64 ":%u", in->conn, in->sub_id);
    s->conn = in->conn;
    s->sub_id = in->sub_id;
    snprintf (s->sid, sizeof s->sid, "%s", in->sid);
    s->tx = in->tx;
    in->tx = NULL;
    s->after = s->last = in->after;
    watch_t *w = zhashx_lookup (self->watches, s->sid);
    if (!w) {
        w = calloc (1, sizeof *w);
        if (!w || !(w->subs = zlistx_new ())) {
            free (w);
            free (s->tx);
            free (s);
            return;
        }
        snprintf (w->sid, sizeof w->sid, "%s", s->sid);
        zhashx_insert (self->watches, w->sid, w);
        char topic [64];
        snprintf (topic, sizeof topic, "session/%s", s->sid);
        sb_sub_subscribe (self->sub, topic);
        /* the subscription travels to the publisher asynchronously: an
           event published before it arrived is on the tape but was never
           sent to us, and no later event may come to reveal the gap */
        s->verify_at = sb_mono_ms () + VERIFY_AFTER_MS;
    }
    s->watch = w;
    zlistx_add_end (w->subs, s);
    zhashx_update (self->subs, s->key, s);
    s_replay (self, s);
}

static bsub_t *
s_sub_find (gw_bridge_t *self, uint64_t conn, uint32_t sub_id)
{
    char key [40];
    snprintf (key, sizeof key, "%" PRIx64 ":%u", conn, sub_id);
    return zhashx_lookup (self->subs, key);
}

static void
s_close_conn (gw_bridge_t *self, uint64_t conn)
{
    char prefix [24];
    int plen = snprintf (prefix, sizeof prefix, "%" PRIx64 ":", conn);
    zlistx_t *gone = zlistx_new ();
    for (bsub_t *s = zhashx_first (self->subs); s; s = zhashx_next (self->subs))
        if (strncmp (s->key, prefix, (size_t) plen) == 0)
            zlistx_add_end (gone, s);
    for (bsub_t *s = zlistx_first (gone); s; s = zlistx_next (gone))
        s_sub_remove (self, s);
    zlistx_destroy (&gone);
}

/* ------------------------------------------------------------------ */
/*  Calls */

static void
s_answer_error (gw_bridge_t *self, pending_t *p, const char *code, const char *message, bool retryable,
                const sb_val_t *detail)
{
    if (p->http)
        s_out_http (self, p->conn, gw_http_status (code), "application/json",
                    gw_error_json (NULL, true, code, message, retryable, detail));
    else
        s_out_reply (self, p->conn, p->tx, gw_error_json (p->tx, false, code, message, retryable, detail));
}

static void
s_call (gw_bridge_t *self, gw_in_t *in)
{
    pending_t *p = calloc (1, sizeof *p);
    if (!p)
        return;
    p->kind = in->blob ? P_BLOB : P_CALL;
    p->conn = in->conn;
    p->http = in->http;
    p->tx = in->tx;
    in->tx = NULL;
    char id [40];
    if (zhashx_size (self->pending) >= PENDING_MAX) {
        s_answer_error (self, p, "overloaded", "too many calls in flight in the gateway", true, NULL);
        free (p->tx);
        free (p);
        return;
    }
    if (sb_bus_send (self->bus, in->type, NULL, NULL, in->body, in->body_len,
                     sb_now_ms () + SB_GW_CALL_TIMEOUT_MS, id) != 0) {
        s_answer_error (self, p, "unavailable", "the bus did not take the request", true, NULL);
        free (p->tx);
        free (p);
        return;
    }
    p->deadline = sb_mono_ms () + SB_GW_CALL_TIMEOUT_MS + 5000;
    zhashx_insert (self->pending, id, p);
}

/*  Sends `type`, with an empty body, for the scrape p: false when the bus
    did not take it. */
static bool
s_metrics_send (gw_bridge_t *self, pending_t *p, const char *type)
{
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_map_close (self->enc);
    size_t len;
    const uint8_t *body = sb_enc_data (self->enc, &len);
    char id [40];
    if (sb_bus_send (self->bus, type, NULL, NULL, body, len, sb_now_ms () + 5000, id) != 0)
        return false;
    p->deadline = sb_mono_ms () + 10000;
    zhashx_insert (self->pending, id, p);
    return true;
}

static void
s_metrics_request (gw_bridge_t *self, gw_in_t *in)
{
    pending_t *p = calloc (1, sizeof *p);
    if (!p)
        return;
    *p = (pending_t) { .kind = P_METRICS, .conn = in->conn, .http = true };
    if (!s_metrics_send (self, p, "bus.stats")) {
        s_answer_error (self, p, "unavailable", "the broker did not take bus.stats", true, NULL);
        free (p);
    }
}

static void
s_metrics_answer (gw_bridge_t *self, pending_t *p, sb_msg_t *llm)
{
    gw_buf_t *buf = gw_metrics_render (self->gw, p->stats, llm);
    if (buf)
        s_out_http (self, p->conn, 200, "text/plain; version=0.0.4", buf);
}

/*  bus.stats answered: keeps the answer and asks llm.info, whose rate
    limits the page adds; answers at once when the bus does not take it. */
static void
s_metrics_llm (gw_bridge_t *self, pending_t *p, sb_msg_t **stats_p)
{
    p->stats = *stats_p;
    *stats_p = NULL;
    p->kind = P_METRICS_LLM;
    if (!s_metrics_send (self, p, "llm.info")) {
        s_metrics_answer (self, p, NULL);
        sb_msg_destroy (&p->stats);
        free (p);
    }
}

static void
s_on_reply (gw_bridge_t *self, sb_msg_t **msg_p)
{
    sb_msg_t *msg = *msg_p;
    if (sb_type_has_suffix (msg->h.type, ".chunk"))
        return;                 /* no public type streams; a stream's end is its reply */
    pending_t *p = zhashx_lookup (self->pending, msg->h.corr);
    if (!p)
        return;
    zhashx_freefn (self->pending, msg->h.corr, NULL);
    zhashx_delete (self->pending, msg->h.corr);
    if (p->kind == P_REPLAY) {
        bsub_t *s = s_sub_find (self, p->conn, p->sub_id);
        if (s && s->state == S_REPLAYING)
            s_on_page (self, s, msg);
    }
    else
    if (p->kind == P_METRICS) {
        s_metrics_llm (self, p, msg_p);
        return;
    }
    else
    if (p->kind == P_METRICS_LLM)
        s_metrics_answer (self, p, msg);
    else
    if (sb_msg_is_error (msg))
        s_answer_error (self, p, sb_msg_error_code (msg), sb_msg_error_message (msg),
                        sb_get_bool (msg->body, "retryable", false), sb_get (msg->body, "detail"));
    else
    if (p->kind == P_BLOB) {
        if (!gw_blob_answer (self->gw, p->conn, msg))
            s_answer_error (self, p, "overloaded", "the gateway's outbound bytes are at their bound", true, NULL);
    }
    else
    if (p->http) {
        char *text = sb_json_dump (msg->body);
        s_out_http (self, p->conn, 200, "application/json", text ? gw_buf_new (text, strlen (text)) : NULL);
        free (text);
    }
    else
        s_out_reply (self, p->conn, p->tx, gw_reply_frame (p->tx, msg->h.type, msg->body));
    sb_msg_destroy (&p->stats);
    free (p->tx);
    free (p);
}

//  Calls the bus never answered, and subscriptions due a verification.
static void
s_tick (gw_bridge_t *self)
{
    int64_t now = sb_mono_ms ();
    if (!self->tap_live && zlistx_size (self->taps) > 0 && now - self->tap_since >= SB_GW_TAP_ACK_MS)
        gw_bridge_tap_confirm (self);
    zlistx_t *late = NULL;
    for (pending_t *p = zhashx_first (self->pending); p; p = zhashx_next (self->pending))
        if (now >= p->deadline) {
            if (!late)
                late = zlistx_new ();
            zlistx_add_end (late, (void *) zhashx_cursor (self->pending));
        }
    for (const char *id = late ? zlistx_first (late) : NULL; id; id = zlistx_next (late)) {
        char key [40];
        snprintf (key, sizeof key, "%s", id);
        pending_t *p = zhashx_lookup (self->pending, key);
        zhashx_delete (self->pending, key);
        atomic_fetch_add (&self->gw->stats.call_timeouts, 1);
        if (p->kind == P_REPLAY) {
            bsub_t *s = s_sub_find (self, p->conn, p->sub_id);
            if (s && s->state == S_REPLAYING)
                s_sub_fail (self, s, "timeout", "the tape did not answer in time");
        }
        else
        if (p->kind == P_METRICS || p->kind == P_METRICS_LLM)
            s_metrics_answer (self, p, NULL);
        else
            s_answer_error (self, p, "timeout", "no reply in time", true, NULL);
        sb_msg_destroy (&p->stats);
        free (p->tx);
        free (p);
    }
    zlistx_destroy (&late);
    for (bsub_t *s = zhashx_first (self->subs); s; s = zhashx_next (self->subs))
        if (s->verify_at && now >= s->verify_at && s->state == S_LIVE) {
            s->verify_at = 0;
            s_replay (self, s);
        }
}

static void
s_take_in (gw_bridge_t *self)
{
    uint64_t n;
    if (read (self->gw->in_fd, &n, sizeof n) < 0) {
        /* EAGAIN: nothing was pushed since the last read */
    }
    for (gw_in_t *in = gw_queue_take (&self->gw->in); in; ) {
        gw_in_t *next = in->next;
        switch (in->kind) {
            case GW_IN_CALL: s_call (self, in); break;
            case GW_IN_SUB: s_subscribe (self, in); break;
            case GW_IN_UNSUB: {
                bsub_t *s = s_sub_find (self, in->conn, in->sub_id);
                if (s)
                    s_sub_remove (self, s);
                break;
            }
            case GW_IN_PAGE_DONE: {
                bsub_t *s = s_sub_find (self, in->conn, in->sub_id);
                if (s && s->state == S_PAGE_WAIT) {
                    s->more = false;
                    s_replay (self, s);
                }
                break;
            }
            case GW_IN_CLOSE:
                s_close_conn (self, in->conn);
                gw_bridge_tap_remove (self, in->conn, 0);
                break;
            case GW_IN_TAP: gw_bridge_tap_add (self, in); break;
            case GW_IN_UNTAP: gw_bridge_tap_remove (self, in->conn, in->sub_id); break;
            case GW_IN_METRICS: s_metrics_request (self, in); break;
        }
        gw_in_free (in);
        in = next;
    }
}

static void *
s_main (void *arg)
{
    gw_bridge_t *self = arg;
    int64_t next_tick = sb_mono_ms () + 100;
    while (!atomic_load (&self->stop)) {
        zmq_pollitem_t items [] = {
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
            { sb_sub_socket (self->sub), 0, ZMQ_POLLIN, 0 },
            { NULL, self->gw->in_fd, ZMQ_POLLIN, 0 },
            { zsock_resolve (self->tap), 0, ZMQ_POLLIN, 0 },
        };
        int64_t wait = next_tick - sb_mono_ms ();
        if (sb_bus_has_queued (self->bus))
            wait = 0;
        if (zmq_poll (items, 4, wait < 0 ? 0 : (long) wait) < 0 && errno != EINTR)
            break;
        if (items [2].revents & ZMQ_POLLIN)
            s_take_in (self);
        /* bounded batches, so one busy source cannot starve the others */
        for (int k = 0; k < 1000; k++) {
            sb_msg_t *msg = sb_bus_recv (self->bus, 0);
            if (!msg)
                break;
            if (msg->h.corr [0])
                s_on_reply (self, &msg);
            sb_msg_destroy (&msg);
        }
        for (int k = 0; k < 1000; k++) {
            sb_msg_t *msg = sb_sub_recv (self->sub, 0);
            if (!msg)
                break;
            s_on_event (self, msg);
            sb_msg_destroy (&msg);
        }
        for (int k = 0; k < 1000 && (items [3].revents & ZMQ_POLLIN); k++) {
            zmsg_t *msg = zmsg_recv (self->tap);        /* rcvtimeo 0: never waits */
            if (!msg)
                break;
            gw_bridge_on_tap (self, msg);
            zmsg_destroy (&msg);
        }
        if (sb_mono_ms () >= next_tick) {
            sb_bus_tick (self->bus);
            s_tick (self);
            next_tick = sb_mono_ms () + 100;
        }
    }
    return NULL;
}

static void
s_pending_free (void **item)
{
    pending_t *p = *item;
    if (p) {
        sb_msg_destroy (&p->stats);
        free (p->tx);
        free (p);
        *item = NULL;
    }
}

static void
s_watch_free (void **item)
{
    watch_t *w = *item;
    if (w) {
        zlistx_destroy (&w->subs);
        free (w);
        *item = NULL;
    }
}

gw_bridge_t *
gw_bridge_start (sb_gateway_t *gw, char *err, size_t err_len)
{
    gw_bridge_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_len, "out of memory");
        return NULL;
    }
    self->gw = gw;
    atomic_init (&self->stop, false);
    char name [64];
    snprintf (name, sizeof name, "gateway-%d", (int) getpid ());
    self->bus = sb_bus_new (gw->cfg.cmd_endpoint, name);
    self->sub = sb_sub_new (gw->cfg.sub_endpoint);
    self->pending = zhashx_new ();
    self->subs = zhashx_new ();
    self->watches = zhashx_new ();
    self->enc = sb_enc_new ();
    self->taps = zlistx_new ();
    self->tap = zsock_new (ZMQ_SUB);
    /* the tap's endpoint sits beside the command plane's */
    char tap_ep [4200];
    const char *cmd = gw->cfg.cmd_endpoint, *slash = strrchr (cmd, '/');
    if (strcmp (cmd, SB_INPROC_CMD) == 0)
        snprintf (tap_ep, sizeof tap_ep, "%s", SB_INPROC_TAP);
    else
    if (strncmp (cmd, "ipc://", 6) == 0 && slash && strcmp (slash, "/bus-cmd") == 0)
        snprintf (tap_ep, sizeof tap_ep, "%.*s/bus-tap", (int) (slash - cmd), cmd);
    else
        snprintf (tap_ep, sizeof tap_ep, "ipc://%s/bus-tap", gw->data_dir);
    if (self->tap) {
        zsock_set_rcvhwm (self->tap, 10000);
        zsock_set_linger (self->tap, 0);
        zsock_set_rcvtimeo (self->tap, 0);
    }
    if (!self->bus || !self->sub || !self->pending || !self->subs || !self->watches || !self->enc
    ||  !self->taps || !self->tap || zsock_connect (self->tap, "%s", tap_ep) != 0) {
        snprintf (err, err_len, "the gateway cannot reach the bus at %s", gw->cfg.cmd_endpoint);
        gw_bridge_stop (&self);
        return NULL;
    }
    zhashx_set_destructor (self->watches, s_watch_free);
    if (pthread_create (&self->thread, NULL, s_main, self) != 0) {
        snprintf (err, err_len, "cannot start the gateway's bus thread");
        gw_bridge_stop (&self);
        return NULL;
    }
    self->started = true;
    return self;
}

void
gw_bridge_stop (gw_bridge_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gw_bridge_t *self = *self_p;
    atomic_store (&self->stop, true);
    if (self->started) {
        uint64_t one = 1;
        if (write (self->gw->in_fd, &one, sizeof one) != sizeof one) {
            /* already signalled */
        }
        pthread_join (self->thread, NULL);
    }
    if (self->subs) {
        for (bsub_t *s = zhashx_first (self->subs); s; s = zhashx_next (self->subs)) {
            s->watch = NULL;
            s_held_clear (s);
            free (s->held);
            free (s->held_seq);
            free (s->tx);
            free (s);
        }
        zhashx_destroy (&self->subs);
    }
    zhashx_destroy (&self->watches);
    if (self->pending) {
        for (pending_t *p = zhashx_first (self->pending); p; p = zhashx_next (self->pending)) {
            void *item = p;
            s_pending_free (&item);
        }
        zhashx_destroy (&self->pending);
    }
    if (self->taps) {
        for (btap_t *t = zlistx_first (self->taps); t; t = zlistx_next (self->taps)) {
            gw_buf_unref (&t->ack);
            free (t);
        }
        zlistx_destroy (&self->taps);
    }
    zsock_destroy (&self->tap);
    sb_enc_destroy (&self->enc);
    sb_sub_destroy (&self->sub);
    sb_bus_destroy (&self->bus);
    free (self);
    *self_p = NULL;
}

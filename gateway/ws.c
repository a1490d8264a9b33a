/*  gateway/ws.c — the WebSocket protocol on the lws thread (docs/gateway.md):
    reads JSON text frames, answers what it can at once (ping, bad
    frames, forbidden types), hands calls and subscriptions to the bridge,
    and keeps each connection's outbound queue within its bound. Every
    function here runs on the lws thread. */
#include "gateway/gateway_impl.h"
#include "bus/envelope.h"
#include "common/log.h"
#include "schemas/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RX_KEEP   (64u << 10)   /* a receive buffer past this is freed after use */
#define TX_MAX    256           /* bytes of a client's tx we echo */

/* ------------------------------------------------------------------ */
/*  The outbound queue */

static void
s_pause (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    if (!pss->rx_paused) {
        pss->rx_paused = true;
        atomic_fetch_add (&gw->stats.ws_flow_paused, 1);
        lws_rx_flow_control (wsi, 0);
    }
}

//  Reading resumes once the client has taken most of what it asked for.
static void
s_maybe_resume (struct lws *wsi, gw_pss_t *pss, uint64_t out_max)
{
    if (pss->rx_paused && pss->inflight < SB_GW_MAX_INFLIGHT / 2 && pss->q_bytes < out_max / 2) {
        pss->rx_paused = false;
        lws_rx_flow_control (wsi, 1);
    }
}

//  Whether `len` more bytes fit this connection's queue and the total of
//  every connection's. One frame always fits an empty queue when the
//  total has room for it, so a reply larger than the bound still reaches
//  a client that reads.
static bool
s_fits (sb_gateway_t *gw, gw_pss_t *pss, size_t len)
{
    if (pss->q_count > 0 && (pss->q_bytes > gw->out_max || len > gw->out_max - pss->q_bytes))
        return false;
    return gw->q_total <= gw->out_total && len <= gw->out_total - gw->q_total;
}

//  Whether `len` more bytes fit the total of every connection's queue.
static bool
s_fits_total (sb_gateway_t *gw, size_t len)
{
    return gw->q_total <= gw->out_total && len <= gw->out_total - gw->q_total;
}

bool
gw_total_fits (sb_gateway_t *gw, size_t len)
{
    return s_fits_total (gw, len);
}

void
gw_queued (sb_gateway_t *gw, size_t len, bool add)
{
    if (add)
        gw->q_total += len;
    else
        gw->q_total -= len;
    atomic_store (&gw->stats.ws_queued_bytes, (int_fast64_t) gw->q_total);
}

//  The same for a reply, an event or a tap frame, with room left for the
//  small frames that may follow it (an error per call in flight, a
//  resync), so that those still fit the bound and are not a close.
static bool
s_fits_data (sb_gateway_t *gw, gw_pss_t *pss, size_t len)
{
    size_t reserve = 2 * SB_GW_MAX_INFLIGHT * 1024;
    if (reserve > gw->out_max / 4)
        reserve = (size_t) gw->out_max / 4;
    return s_fits (gw, pss, len + reserve);
}

static void
s_count (sb_gateway_t *gw, gw_pss_t *pss, size_t len, bool add)
{
    if (add)
        pss->q_bytes += len;
    else
        pss->q_bytes -= len;
    gw_queued (gw, len, add);
}

//  A frame that did not fit even as an error: the connection is closed
//  (1008) in its next WRITEABLE, and the queue stops growing now.
static void
s_kill (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    if (!pss->kill) {
        pss->kill = true;
        atomic_fetch_add (&gw->stats.ws_overflow_closed, 1);
    }
    lws_callback_on_writable (wsi);
}

//  Queues a frame the caller found fits its bound (`fits`); else frees it,
//  has the connection closed and returns false. Every byte queued goes
//  through here and is counted.
static bool
s_enqueue (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, gw_out_t *out, bool fits)
{
    if (pss->kill || !fits) {
        gw_out_free (out);
        s_kill (gw, wsi, pss);
        return false;
    }
    out->next = NULL;
    bool was_empty = pss->q_head == NULL;
    if (pss->q_tail)
        pss->q_tail->next = out;
    else
        pss->q_head = out;
    pss->q_tail = out;
    s_count (gw, pss, out->buf->len, true);
    pss->q_count++;
    /* answers to a client that asks faster than it reads: stop reading
       from it rather than queue without end (never a resync: a reply
       cannot be fetched again) */
    if (!out->live && pss->q_bytes > gw->out_max / 2)
        s_pause (gw, wsi, pss);
    /* a queue that had frames already asked: WRITEABLE asks again while
       frames remain */
    if (was_empty)
        lws_callback_on_writable (wsi);
    return true;
}

static void
s_send (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, gw_buf_t *buf)
{
    if (!buf)
        return;
    gw_out_t *out = calloc (1, sizeof *out);
    if (!out) {
        gw_buf_unref (&buf);
        return;
    }
    out->kind = GW_OUT_WS;
    out->conn = pss->conn;
    out->buf = buf;
    /* the gateway's own frames answer what the client sent: one that
       does not fit means it sends and does not read */
    s_enqueue (gw, wsi, pss, out, s_fits (gw, pss, buf->len));
}

static void
s_send_json (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, json_t *j)
{
    char *text = j ? json_dumps (j, JSON_COMPACT) : NULL;
    json_decref (j);
    if (text)
        s_send (gw, wsi, pss, gw_buf_new (text, strlen (text)));
    free (text);
}

static void
s_error (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *tx, const char *code,
         const char *message)
{
    s_send (gw, wsi, pss, gw_error_frame (tx, code, message));
}

//  {op:"reply", tx, type, body} for the ops answered here.
static void
s_reply (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *tx, const char *type, json_t *body)
{
    json_t *j = json_object ();
    json_t *txv = json_loads (tx, JSON_DECODE_ANY, NULL);
    json_object_set_new (j, "op", json_string ("reply"));
    json_object_set_new (j, "tx", txv ? txv : json_null ());
    json_object_set_new (j, "type", json_string (type));
    json_object_set_new (j, "body", body ? body : json_object ());
    s_send_json (gw, wsi, pss, j);
}

/* ------------------------------------------------------------------ */
/*  Subscriptions, as this connection knows them */

static gw_sub_t *
s_sub_by_id (gw_pss_t *pss, uint32_t id)
{
    for (size_t k = 0; k < pss->nsubs; k++)
        if (pss->subs [k].id == id)
            return &pss->subs [k];
    return NULL;
}

static gw_sub_t *
s_sub_by_sid (gw_pss_t *pss, const char *sid)
{
    for (size_t k = 0; k < pss->nsubs; k++)
        if (strcmp (pss->subs [k].sid, sid) == 0)
            return &pss->subs [k];
    return NULL;
}

//  Forgets a subscription here and at the bridge; what is already queued
//  for it still goes out (it is in order, and the client's cursor covers it).
static void
s_sub_drop (sb_gateway_t *gw, gw_pss_t *pss, gw_sub_t *sub)
{
    gw_in_t *in = calloc (1, sizeof *in);
    if (in) {
        in->kind = GW_IN_UNSUB;
        in->conn = pss->conn;
        in->sub_id = sub->id;
        gw_to_bridge (gw, in);
    }
    *sub = pss->subs [--pss->nsubs];
    atomic_fetch_sub (&gw->stats.subs_open, 1);
}

static void
s_resync (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, gw_sub_t *sub, const char *reason)
{
    char sid [32];
    snprintf (sid, sizeof sid, "%s", sub->sid);
    s_sub_drop (gw, pss, sub);
    atomic_fetch_add (&gw->stats.ws_resyncs, 1);
    s_send_json (gw, wsi, pss, json_pack ("{s:s,s:s,s:s}", "op", "resync", "session_id", sid, "reason", reason));
}

/* ------------------------------------------------------------------ */
/*  Ops */

static void
s_op_call (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *tx, json_t *msg)
{
    const char *type = json_string_value (json_object_get (msg, "type"));
    json_t *body = json_object_get (msg, "body");
    char code [32], message [256];
    if (!type) {
        s_error (gw, wsi, pss, tx, "invalid", "call needs a string `type`");
        return;
    }
    if (body && json_is_null (body))
        body = NULL;
    uint8_t *mp;
    size_t mp_len;
    if (gw_translate (type, body, &mp, &mp_len, code, sizeof code, message, sizeof message)) {
        if (sb_err_from_name (code) == SB_E_forbidden)
            atomic_fetch_add (&gw->stats.ws_forbidden, 1);
        s_error (gw, wsi, pss, tx, code, message);
        return;
    }
    /* frames lws had already read when reading was paused still come in:
       past twice the bound they are refused, not queued */
    if (pss->inflight >= 2 * SB_GW_MAX_INFLIGHT) {
        free (mp);
        s_error (gw, wsi, pss, tx, "overloaded", "too many calls waiting on this connection");
        return;
    }
    gw_in_t *in = calloc (1, sizeof *in);
    char *txc = strdup (tx);
    if (!in || !txc) {
        free (in);
        free (txc);
        free (mp);
        s_error (gw, wsi, pss, tx, "internal", "out of memory");
        return;
    }
    in->kind = GW_IN_CALL;
    in->conn = pss->conn;
    in->tx = txc;
    snprintf (in->type, sizeof in->type, "%s", type);
    in->body = mp;
    in->body_len = mp_len;
    atomic_fetch_add (&gw->stats.calls, 1);
    if (++pss->inflight >= SB_GW_MAX_INFLIGHT)
        s_pause (gw, wsi, pss);
    gw_to_bridge (gw, in);
}

static const char *
s_sid (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *tx, json_t *msg)
{
    const char *sid = json_string_value (json_object_get (msg, "session_id"));
    if (!sid || !sb_ulid_valid (sid)) {
        s_error (gw, wsi, pss, tx, "invalid", "session_id: a session id (26 characters) is needed");
        return NULL;
    }
    return sid;
}

static void
s_op_subscribe (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *tx, json_t *msg)
{
    const char *sid = s_sid (gw, wsi, pss, tx, msg);
    if (!sid)
        return;
    json_t *after_v = json_object_get (msg, "after_seq");
    uint64_t after = 0;
    if (json_is_integer (after_v) && json_integer_value (after_v) >= 0
    &&  json_integer_value (after_v) <= SB_COUNT_MAX)
        after = (uint64_t) json_integer_value (after_v);
    else
    if (json_is_string (after_v)) {
        const char *s = json_string_value (after_v);
        char *end;
        unsigned long long n = strtoull (s, &end, 10);
        if (!*s || *end || *s == '-' || n > SB_COUNT_MAX) {
            s_error (gw, wsi, pss, tx, "invalid", "after_seq: a seq (an integer from 0) is needed");
            return;
        }
        after = n;
    }
    else
    if (after_v && !json_is_null (after_v)) {
        s_error (gw, wsi, pss, tx, "invalid", "after_seq: a seq (an integer from 0) is needed");
        return;
    }
    /* subscribing again to the same session starts over from the new
       cursor: the old stream is dropped first */
    gw_sub_t *old = s_sub_by_sid (pss, sid);
    if (old)
        s_sub_drop (gw, pss, old);
    if (pss->nsubs >= SB_GW_MAX_SUBS) {
        s_error (gw, wsi, pss, tx, "overloaded", "this connection watches too many sessions (at most 256)");
        return;
    }
    if (pss->nsubs == pss->subs_cap) {
        size_t cap = pss->subs_cap ? pss->subs_cap * 2 : 4;
        gw_sub_t *grown = realloc (pss->subs, cap * sizeof *grown);
        if (!grown) {
            s_error (gw, wsi, pss, tx, "internal", "out of memory");
            return;
        }
        pss->subs = grown;
        pss->subs_cap = cap;
    }
    gw_in_t *in = calloc (1, sizeof *in);
    char *txc = strdup (tx);
    if (!in || !txc) {
        free (in);
        free (txc);
        s_error (gw, wsi, pss, tx, "internal", "out of memory");
        return;
    }
    gw_sub_t *sub = &pss->subs [pss->nsubs++];
    sub->id = ++pss->next_sub;
    snprintf (sub->sid, sizeof sub->sid, "%s", sid);
    atomic_fetch_add (&gw->stats.subs_open, 1);
    in->kind = GW_IN_SUB;
    in->conn = pss->conn;
    in->sub_id = sub->id;
    in->tx = txc;
    in->after = after;
    snprintf (in->sid, sizeof in->sid, "%s", sid);
    gw_to_bridge (gw, in);
}

static void
s_op_unsubscribe (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *tx, json_t *msg)
{
    const char *sid = s_sid (gw, wsi, pss, tx, msg);
    if (!sid)
        return;
    gw_sub_t *sub = s_sub_by_sid (pss, sid);
    bool was = sub != NULL;
    if (sub)
        s_sub_drop (gw, pss, sub);
    s_reply (gw, wsi, pss, tx, "unsubscribed", json_pack ("{s:s,s:b}", "session_id", sid, "was_subscribed", was));
}

//  The bus tap (docs/gateway.md): one per connection; the bridge renders
//  each message and sends it as a live frame with the tap's stream id.
static void
s_tap_stop (sb_gateway_t *gw, gw_pss_t *pss)
{
    if (!pss->tap_id)
        return;
    gw_in_t *in = calloc (1, sizeof *in);
    if (in) {
        in->kind = GW_IN_UNTAP;
        in->conn = pss->conn;
        in->sub_id = pss->tap_id;
        gw_to_bridge (gw, in);
    }
    pss->tap_id = 0;
}

static void
s_op_tap (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *tx, json_t *msg)
{
    json_t *fv = json_object_get (msg, "filter");
    const char *filter = json_is_string (fv) ? json_string_value (fv) : "";
    if ((fv && !json_is_null (fv) && !json_is_string (fv)) || strlen (filter) > 64) {
        s_error (gw, wsi, pss, tx, "invalid", "filter: a type or topic prefix (at most 64 bytes) is needed");
        return;
    }
    gw_in_t *in = calloc (1, sizeof *in);
    if (!in) {
        s_error (gw, wsi, pss, tx, "internal", "out of memory");
        return;
    }
    /* tapping again replaces the filter: the old stream ends first */
    s_tap_stop (gw, pss);
    pss->tap_id = ++pss->next_sub;
    in->kind = GW_IN_TAP;
    in->conn = pss->conn;
    in->sub_id = pss->tap_id;
    snprintf (in->type, sizeof in->type, "%s", filter);
    in->tx = strdup (tx);
    if (!in->tx) {
        gw_in_free (in);
        s_error (gw, wsi, pss, tx, "internal", "out of memory");
        return;
    }
    /* the bridge says `tapping` once its subscription is in force */
    gw_to_bridge (gw, in);
}

static void
s_op_untap (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *tx)
{
    bool was = pss->tap_id != 0;
    s_tap_stop (gw, pss);
    s_reply (gw, wsi, pss, tx, "untapped", json_pack ("{s:b}", "was_tapping", was));
}

static void
s_handle (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const char *buf, size_t len)
{
    atomic_fetch_add (&gw->stats.ws_rx_frames, 1);
    if (pss->rx_binary) {
        atomic_fetch_add (&gw->stats.ws_bad_frames, 1);
        s_error (gw, wsi, pss, "null", "invalid", "binary frames are not read: send JSON text frames");
        return;
    }
    sb_verr_t err;
    json_t *msg = sb_json_parse (buf, len, SB_GW_MAX_FRAME, SB_GW_MAX_DEPTH, &err);
    if (!msg || !json_is_object (msg)) {
        atomic_fetch_add (&gw->stats.ws_bad_frames, 1);
        s_error (gw, wsi, pss, "null", msg ? "invalid" : sb_err_name (err.code),
                 msg ? "a frame is a JSON object: {op, tx, ...}" : err.message);
        json_decref (msg);
        return;
    }
    json_t *txv = json_object_get (msg, "tx");
    char *tx = NULL;
    if (txv && !json_is_string (txv) && !json_is_number (txv) && !json_is_null (txv)) {
        atomic_fetch_add (&gw->stats.ws_bad_frames, 1);
        s_error (gw, wsi, pss, "null", "invalid", "tx: a string or a number is needed");
        json_decref (msg);
        return;
    }
    tx = txv ? json_dumps (txv, JSON_COMPACT | JSON_ENCODE_ANY) : strdup ("null");
    if (!tx || strlen (tx) > TX_MAX) {
        atomic_fetch_add (&gw->stats.ws_bad_frames, 1);
        s_error (gw, wsi, pss, "null", "invalid", "tx: at most 256 bytes");
        free (tx);
        json_decref (msg);
        return;
    }
    const char *op = json_string_value (json_object_get (msg, "op"));
    if (!op) {
        atomic_fetch_add (&gw->stats.ws_bad_frames, 1);
        s_error (gw, wsi, pss, tx, "invalid", "op: call, subscribe, unsubscribe, tap, untap or ping is needed");
    }
    else
    if (strcmp (op, "call") == 0)
        s_op_call (gw, wsi, pss, tx, msg);
    else
    if (strcmp (op, "subscribe") == 0)
        s_op_subscribe (gw, wsi, pss, tx, msg);
    else
    if (strcmp (op, "unsubscribe") == 0)
        s_op_unsubscribe (gw, wsi, pss, tx, msg);
    else
    if (strcmp (op, "tap") == 0)
        s_op_tap (gw, wsi, pss, tx, msg);
    else
    if (strcmp (op, "untap") == 0)
        s_op_untap (gw, wsi, pss, tx);
    else
    if (strcmp (op, "ping") == 0)
        s_reply (gw, wsi, pss, tx, "pong", json_pack ("{s:I}", "ts", (json_int_t) sb_now_ms ()));
    else {
        atomic_fetch_add (&gw->stats.ws_bad_frames, 1);
        s_error (gw, wsi, pss, tx, "invalid", "op: call, subscribe, unsubscribe, tap, untap or ping is needed");
    }
    free (tx);
    json_decref (msg);
}

/* ------------------------------------------------------------------ */
/*  lws callbacks */

void
gw_ws_established (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    pss->q_head = pss->q_tail = NULL;
    pss->q_bytes = pss->q_count = 0;
    pss->rx = NULL;
    pss->rx_len = pss->rx_cap = 0;
    pss->inflight = 0;
    pss->rx_paused = false;
    pss->kill = false;
    pss->subs = NULL;
    pss->nsubs = pss->subs_cap = 0;
    pss->next_sub = 0;
}

int
gw_ws_receive (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, const void *in, size_t len)
{
    if (pss->rx_len == 0 && lws_is_first_fragment (wsi))
        pss->rx_binary = lws_frame_is_binary (wsi);
    size_t remaining = lws_remaining_packet_payload (wsi);
    /* a message over the bound is a framing violation: close at once,
       before its bytes are buffered */
    if (pss->rx_len + len + remaining > SB_GW_MAX_FRAME) {
        atomic_fetch_add (&gw->stats.ws_too_large, 1);
        static const char why [] = "a message may be at most 1 MiB";
        lws_close_reason (wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, (unsigned char *) why, sizeof why - 1);
        return -1;
    }
    if (pss->rx_len + len + 1 > pss->rx_cap) {
        size_t cap = pss->rx_cap ? pss->rx_cap : 4096;
        while (cap < pss->rx_len + len + remaining + 1)
            cap *= 2;
        if (cap > SB_GW_MAX_FRAME + 1)
            cap = SB_GW_MAX_FRAME + 1;
        char *grown = realloc (pss->rx, cap);
        if (!grown)
            return -1;
        pss->rx = grown;
        pss->rx_cap = cap;
    }
    memcpy (pss->rx + pss->rx_len, in, len);
    pss->rx_len += len;
    if (!lws_is_final_fragment (wsi) || remaining > 0)
        return 0;
    pss->rx [pss->rx_len] = 0;
    s_handle (gw, wsi, pss, pss->rx, pss->rx_len);
    pss->rx_len = 0;
    if (pss->rx_cap > RX_KEEP) {
        free (pss->rx);
        pss->rx = NULL;
        pss->rx_cap = 0;
    }
    return 0;
}

//  The header lws_write (LWS_WRITE_TEXT) puts before a server's frame:
//  final, text, unmasked, and the length in 7, 16 or 64 bits (RFC 6455
//  section 5.2). Returns its size.
static size_t
s_frame_header (unsigned char *h, size_t len)
{
    h [0] = 0x81;
    if (len < 126) {
        h [1] = (unsigned char) len;
        return 2;
    }
    if (len <= 0xffff) {
        h [1] = 126;
        h [2] = (unsigned char) (len >> 8);
        h [3] = (unsigned char) len;
        return 4;
    }
    h [1] = 127;
    for (int k = 0; k < 8; k++)
        h [2 + k] = (unsigned char) ((uint64_t) len >> (56 - 8 * k));
    return 10;
}

static size_t
s_frame_size (size_t len)
{
    return len + (len < 126 ? 2 : len <= 0xffff ? 4 : 10);
}

//  Takes the oldest frame off the queue, as handed to lws: counted, and
//  the bridge hears when the last event of a replay page has gone (it
//  reads the next page only then: a replay never outruns the client).
//  The caller frees it.
static gw_out_t *
s_dequeue (sb_gateway_t *gw, gw_pss_t *pss)
{
    gw_out_t *out = pss->q_head;
    pss->q_head = out->next;
    if (!pss->q_head)
        pss->q_tail = NULL;
    s_count (gw, pss, out->buf->len, false);
    pss->q_count--;
    atomic_fetch_add (&gw->stats.ws_tx_frames, 1);
    atomic_fetch_add (&gw->stats.ws_tx_bytes, out->buf->len);
    if (out->page_end && s_sub_by_id (pss, out->sub_id)) {
        gw_in_t *in = calloc (1, sizeof *in);
        if (in) {
            in->kind = GW_IN_PAGE_DONE;
            in->conn = pss->conn;
            in->sub_id = out->sub_id;
            gw_to_bridge (gw, in);
        }
    }
    return out;
}

/*  One send per WRITEABLE, as lws wants it, but not one frame: the frames
    waiting (up to SB_GW_TX_BATCH bytes) are framed here, as lws would
    frame them, and go in one send. A client behind by many events costs
    one system call and one poll round for all of them instead of one
    each; at 1,000 clients that was most of the gateway's CPU
    (docs/gateway.md). lws writes the bytes as they are (LWS_WRITE_HTTP
    skips its framing on a WebSocket) and keeps what the socket did not
    take, sending it before anything else, its own pings included, so
    frames never interleave. A lone frame, or one too big for a batch,
    goes through lws_write as a text frame without a copy. */
int
gw_ws_writeable (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss)
{
    if (pss->kill) {
        static const char reason [] = "outbound queue over its bound: read what you ask for";
        lws_close_reason (wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION, (unsigned char *) reason, sizeof reason - 1);
        return -1;
    }
    gw_out_t *out = pss->q_head;
    if (!out)
        return 0;
    if (out->next && s_frame_size (out->buf->len) <= SB_GW_TX_BATCH) {
        unsigned char *start = gw->tx_batch + LWS_PRE, *p = start;
        size_t room = SB_GW_TX_BATCH;
        while (pss->q_head && s_frame_size (pss->q_head->buf->len) <= room) {
            out = s_dequeue (gw, pss);
            size_t h = s_frame_header (p, out->buf->len);
            memcpy (p + h, out->buf->data + LWS_PRE, out->buf->len);
            p += h + out->buf->len;
            room -= h + out->buf->len;
            gw_out_free (out);
        }
        size_t total = (size_t) (p - start);
        if (lws_write (wsi, start, total, LWS_WRITE_HTTP) < (int) total)
            return -1;
    }
    else {
        out = s_dequeue (gw, pss);
        int n = lws_write (wsi, out->buf->data + LWS_PRE, out->buf->len, LWS_WRITE_TEXT);
        bool bad = n < (int) out->buf->len;
        gw_out_free (out);
        if (bad)
            return -1;
    }
    atomic_fetch_add (&gw->stats.ws_tx_sends, 1);
    s_maybe_resume (wsi, pss, gw->out_max);
    if (pss->q_head)
        lws_callback_on_writable (wsi);
    return 0;
}

void
gw_ws_closed (sb_gateway_t *gw, gw_pss_t *pss)
{
    gw_in_t *in = calloc (1, sizeof *in);
    if (in) {
        in->kind = GW_IN_CLOSE;
        in->conn = pss->conn;
        gw_to_bridge (gw, in);
    }
    while (pss->q_head) {
        gw_out_t *next = pss->q_head->next;
        s_count (gw, pss, pss->q_head->buf->len, false);
        gw_out_free (pss->q_head);
        pss->q_head = next;
    }
    pss->q_tail = NULL;
    pss->q_count = 0;
    atomic_fetch_sub (&gw->stats.subs_open, (int_fast64_t) pss->nsubs);
    free (pss->subs);
    pss->subs = NULL;
    pss->nsubs = pss->subs_cap = 0;
    free (pss->rx);
    pss->rx = NULL;
    pss->rx_len = pss->rx_cap = 0;
}

//  The reply in `out` is over a bound: the client gets an `overloaded`
//  error for its call instead, with the reply's size. The tx is read
//  back from the reply's JSON.
static void
s_reply_dropped (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, gw_out_t *out)
{
    atomic_fetch_add (&gw->stats.ws_replies_dropped, 1);
    char message [256];
    snprintf (message, sizeof message, "a reply of %zu bytes was dropped: %zu bytes are queued for this "
              "connection (bound %" PRIu64 ") and %zu for all (bound %" PRIu64 "); read, then ask again",
              out->buf->len, pss->q_bytes, gw->out_max, gw->q_total, gw->out_total);
    s_error (gw, wsi, pss, out->tx ? out->tx : "null", "overloaded", message);
    gw_out_free (out);
}

void
gw_ws_deliver (sb_gateway_t *gw, struct lws *wsi, gw_pss_t *pss, gw_out_t *out)
{
    if (out->reply && pss->inflight > 0) {
        pss->inflight--;
        s_maybe_resume (wsi, pss, gw->out_max);
    }
    if (out->reply && !s_fits_data (gw, pss, out->buf->len)) {
        /* a reply is never fetched again, so it is not dropped silently:
           the call gets `overloaded` in its place */
        s_reply_dropped (gw, wsi, pss, out);
        return;
    }
    if (out->sub_id && out->sub_id == pss->tap_id) {
        /* the tap is live only: a reader too slow for it loses it */
        if (!s_fits_data (gw, pss, out->buf->len)) {
            gw_out_free (out);
            s_tap_stop (gw, pss);
            atomic_fetch_add (&gw->stats.ws_resyncs, 1);
            s_send_json (gw, wsi, pss, json_pack ("{s:s,s:s,s:b}", "op", "resync", "reason", "slow_reader",
                                                  "tap", true));
            return;
        }
        out->sub_id = 0;
        s_enqueue (gw, wsi, pss, out, true);
        return;
    }
    gw_sub_t *sub = out->sub_id ? s_sub_by_id (pss, out->sub_id) : NULL;
    if (out->sub_id && !sub) {
        gw_out_free (out);          /* for a stream the client has left */
        return;
    }
    /* a live event that would take the queue past its bound: the client
       is too slow for this stream. It is told to resubscribe from its
       cursor, and the queue stops growing. A replay page is paced by the
       bridge (the next one is read once this one is written) and comes
       as a burst, so it is held to the total only. */
    bool fits = out->live ? s_fits_data (gw, pss, out->buf->len) : s_fits_total (gw, out->buf->len + 65536);
    if (sub && !out->end_sub && !fits) {
        gw_out_free (out);
        s_resync (gw, wsi, pss, sub, "slow_reader");
        return;
    }
    if (out->end_sub && sub) {
        *sub = pss->subs [--pss->nsubs];
        atomic_fetch_sub (&gw->stats.subs_open, 1);
        out->sub_id = 0;
    }
    else
    if (out->sub_id)
        atomic_fetch_add (&gw->stats.events_out, 1);
    /* checked above: a reply, a live event or a page's; else (the end of
       a stream) the bound itself, and what does not fit closes */
    s_enqueue (gw, wsi, pss, out, out->reply || (sub && !out->end_sub) || s_fits (gw, pss, out->buf->len));
}

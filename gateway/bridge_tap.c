/*  gateway/bridge_tap.c — the bridge's bus tap (gateway/bridge_impl.h):
    every message on both planes, rendered as `switchboard tap --json`
    renders it, for the connections that asked with op tap. */
#include "gateway/bridge_impl.h"
#include "bus/tap.h"
#include "common/log.h"
#include "schemas/json.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

//  Sends t's `tapping` reply, if it still has one.
static void
s_tap_ack (gw_bridge_t *self, btap_t *t)
{
    if (t->ack) {
        gw_bridge_out_ws (self, t->conn, 0, t->ack, false, false);
        t->ack = NULL;
    }
}

//  The tap is live: every reply held for it goes.
void
gw_bridge_tap_confirm (gw_bridge_t *self)
{
    self->tap_live = true;
    for (btap_t *t = zlistx_first (self->taps); t; t = zlistx_next (self->taps))
        s_tap_ack (self, t);
}

void
gw_bridge_tap_add (gw_bridge_t *self, gw_in_t *in)
{
    btap_t *t = calloc (1, sizeof *t);
    json_t *txv = in->tx ? json_loads (in->tx, JSON_DECODE_ANY, NULL) : NULL;
    json_t *j = t ? json_pack ("{s:s,s:o,s:s,s:{s:s}}", "op", "reply", "tx", txv ? txv : json_null (),
                               "type", "tapping", "body", "filter", in->type) : NULL;
    if (!j)
        json_decref (txv);
    char *text = j ? json_dumps (j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref (j);
    if (!text) {
        free (t);
        return;
    }
    t->ack = gw_buf_new (text, strlen (text));
    free (text);
    t->conn = in->conn;
    t->id = in->sub_id;
    snprintf (t->filter, sizeof t->filter, "%s", in->type);
    if (zlistx_size (self->taps) == 0) {
        zsock_set_subscribe (self->tap, "");
        self->tap_live = false;
        self->tap_since = sb_mono_ms ();
    }
    zlistx_add_end (self->taps, t);
    if (self->tap_live)
        s_tap_ack (self, t);
}

//  Drops conn's tap `id`, or all of conn's taps when id is 0 (a reply
//  still held goes first: every op is answered).
void
gw_bridge_tap_remove (gw_bridge_t *self, uint64_t conn, uint32_t id)
{
    size_t before = zlistx_size (self->taps);
    bool again = true;
    while (again) {
        again = false;
        for (btap_t *t = zlistx_first (self->taps); t; t = zlistx_next (self->taps))
            if (t->conn == conn && (id == 0 || t->id == id)) {
                s_tap_ack (self, t);
                zlistx_delete (self->taps, zlistx_cursor (self->taps));
                free (t);
                again = true;
                break;
            }
    }
    if (before > 0 && zlistx_size (self->taps) == 0) {
        zsock_set_unsubscribe (self->tap, "");
        self->tap_live = false;
    }
}

void
gw_bridge_on_tap (gw_bridge_t *self, zmsg_t *msg)
{
    sb_tap_msg_t tm;
    if (zlistx_size (self->taps) == 0)
        return;
    if (!self->tap_live)
        gw_bridge_tap_confirm (self);
    if (sb_tap_parse (msg, &tm) || sb_tap_is_heartbeat (tm.h.type))
        return;
    gw_buf_t *buf = NULL;
    gw_out_t *head = NULL, *tail = NULL;
    size_t n = 0;
    for (btap_t *t = zlistx_first (self->taps); t; t = zlistx_next (self->taps)) {
        if (t->filter [0] && !sb_tap_matches (&tm, t->filter))
            continue;
        if (!buf) {
            json_t *extra = json_pack ("{s:s,s:I,s:I}", "op", "tap", "size", (json_int_t) zframe_size (tm.body),
                                       "ts", (json_int_t) zclock_time ());
            char *line = extra ? sb_tap_json (&tm, extra) : NULL;
            json_decref (extra);
            size_t len = line ? strlen (line) : 0;
            buf = line ? gw_buf_alloc (len) : NULL;
            if (buf) {
                memcpy (gw_buf_text (buf), line, len);
                buf->len = len;
            }
            free (line);
            if (!buf)
                break;
        }
        gw_bridge_chain_live (&head, &tail, &n, t->conn, t->id, buf);
    }
    gw_to_lws_chain (self->gw, head, tail, n);
    gw_buf_unref (&buf);
}


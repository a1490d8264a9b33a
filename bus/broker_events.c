/*  bus/broker_events.c — the event plane's proxy (XSUB to XPUB), each
    event's body charged to the plane's byte account (bus/outq.h), and the
    subscriptions of the event plane and the tap. On the broker's thread. */
#include "bus/broker_impl.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/*  Event plane */

void
brk_handle_xsub (self_t *self)
{
    void *x = zsock_resolve (self->xsub);
    void *out = zsock_resolve (self->xpub);
    for (int budget = 0; budget < 1000; budget++) {
        zmq_msg_t f [MAX_FRAMES];
        int n = brk_read (x, f);
        if (n == 0)
            return;
        self->plane_evt_in++;
        if (n != 3) {
            brk_bad (self, M_EVT_FRAMES, (const uint8_t *) "", 0, "event frame count");
            brk_read_frames_close (f, n);
            continue;
        }
        sb_header_t h;
        sb_verr_t err;
        if (sb_header_parse (zmq_msg_data (&f [1]), zmq_msg_size (&f [1]), &h, &err)) {
            brk_bad (self, M_EVT_HEADER, zmq_msg_data (&f [0]), zmq_msg_size (&f [0]) > 32 ? 32 : zmq_msg_size (&f [0]), err.message);
            brk_read_frames_close (f, n);
            continue;
        }
        const sb_type_t *t = sb_schema_find (h.type, strlen (h.type));
        if (!t || t->kind != SB_KIND_EVENT
        ||  sb_validate (zmq_msg_data (&f [2]), zmq_msg_size (&f [2]), t->fields, t->max_bytes, NULL, &err)) {
            brk_bad (self, M_EVT_BODY, zmq_msg_data (&f [0]), zmq_msg_size (&f [0]) > 32 ? 32 : zmq_msg_size (&f [0]),
                   t ? (t->kind != SB_KIND_EVENT ? "not an event type" : err.message) : "unknown type");
            brk_read_frames_close (f, n);
            continue;
        }
        brk_count_type (self, t);
        if (brk_tap_active (self))
            brk_tap_copy (self, "evt", zmq_msg_data (&f [0]), zmq_msg_size (&f [0]),
                        zmq_msg_data (&f [1]), zmq_msg_size (&f [1]),
                        zmq_msg_data (&f [2]), zmq_msg_size (&f [2]));
        /* One copy serves every subscriber, so the plane has one
           account: what the slowest subscribers still pin. A subscriber
           that misses events refills from the tape by seq. */
        size_t blen = zmq_msg_size (&f [2]);
        size_t charge = zmq_msg_size (&f [0]) + zmq_msg_size (&f [1]) + blen + SB_OUTQ_MSG_OVERHEAD;
        zmq_msg_t bm;
        if (blen <= SB_BROKER_SMALL_BODY) {
            /* small: moved as received, bounded by the XPUB's HWM */
            if (zmq_msg_send (&f [0], out, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
                self->drop_hwm++;
            else {
                zmq_msg_send (&f [1], out, ZMQ_SNDMORE);
                zmq_msg_send (&f [2], out, 0);
                self->plane_evt_out++;
            }
        }
        else
        if (!sb_outq_fits (self->evt_q, charge, self->queue_bytes)
        ||  sb_outq_msg_ref (self->evt_q, &bm, &f [2], charge)) {
            self->drop_evt++;
            self->drop_evt_bytes += charge;
        }
        else
        if (zmq_msg_send (&f [0], out, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&bm);
            self->drop_hwm++;
        }
        else {
            zmq_msg_send (&f [1], out, ZMQ_SNDMORE);
            if (zmq_msg_send (&bm, out, 0) < 0)
                zmq_msg_close (&bm);
            self->plane_evt_out++;
        }
        brk_read_frames_close (f, n);
    }
}

/*  Subscription messages on an XPUB: 1 = subscribe, 0 = unsubscribe. For
    the tap they tell whether anyone watches, so an unwatched tap costs
    nothing. */
void
brk_handle_subs (self_t *self, zsock_t *sock, bool track)
{
    void *s = zsock_resolve (sock);
    for (int budget = 0; budget < 1000; budget++) {
        zmq_msg_t f [MAX_FRAMES];
        int n = brk_read (s, f);
        if (n == 0)
            return;
        if (track && zmq_msg_size (&f [0]) >= 1) {
            const uint8_t *p = zmq_msg_data (&f [0]);
            char prefix [256];
            size_t plen = zmq_msg_size (&f [0]) - 1;
            if (plen > 250)
                plen = 250;
            /* hex so any prefix bytes make a valid key */
            brk_hex (p + 1, plen / 2 > 120 ? 120 : plen, prefix);
            if (p [0] == 1)
                zhashx_update (self->tap_subs, prefix, (void *) 1);
            else
            if (p [0] == 0)
                zhashx_delete (self->tap_subs, prefix);
        }
        brk_read_frames_close (f, n);
    }
}

/*  cli/follow.c — see follow.h. */
#include "cli/follow.h"
#include "common/log.h"

#include <stdio.h>
#include <string.h>

/*  Replays the tape after *last; returns 1 when fn asked to stop, 0 when
    caught up, -1 on error. */
static int
s_replay (sb_bus_t *bus, const char *sid, uint64_t *last, sb_follow_fn *fn, void *arg)
{
    sb_enc_t *e = sb_enc_new ();
    int rc = 0;
    while (e) {
        sb_enc_reset (e);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", sid);
        sb_enc_kuint (e, "after_seq", *last);
        sb_enc_kuint (e, "limit", 1000);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *reply = sb_bus_call (bus, "session.events", sid, b, len, 10000);
        if (!reply || sb_msg_is_error (reply)) {
            fprintf (stderr, "switchboard: cannot read the tape of %s: %s\n", sid,
                     reply ? sb_msg_error_message (reply) : "no reply from the server");
            sb_msg_destroy (&reply);
            rc = -1;
            break;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        for (uint32_t k = 0; events && k < events->len && rc == 0; k++) {
            const sb_val_t *ev = sb_array_at (events, k);
            uint64_t seq = sb_get_uint (ev, "seq", 0);
            if (seq <= *last)
                continue;
            *last = seq;
            if (fn (ev, arg))
                rc = 1;
        }
        bool more = sb_get_bool (reply->body, "more", false);
        sb_msg_destroy (&reply);
        if (rc || !more)
            break;
    }
    sb_enc_destroy (&e);
    return rc;
}

int
sb_follow (sb_bus_t *bus, const char *sub_endpoint, const char *sid, uint64_t after, bool live,
           sb_follow_fn *fn, sb_follow_idle_fn *idle, void *arg)
{
    sb_sub_t *sub = NULL;
    if (live) {
        sub = sb_sub_new (sub_endpoint);
        if (!sub) {
            fprintf (stderr, "switchboard: cannot subscribe at %s\n", sub_endpoint);
            return -1;
        }
        char topic [64];
        snprintf (topic, sizeof topic, "session/%s", sid);
        sb_sub_subscribe (sub, topic);
    }
    uint64_t last = after;
    int rc = s_replay (bus, sid, &last, fn, arg);
    int64_t quiet_since = sb_mono_ms ();
    while (live && rc == 0) {
        sb_msg_t *msg = sb_sub_recv (sub, 200);
        if (msg) {
            uint64_t seq = sb_get_uint (msg->body, "seq", 0);
            if (seq == last + 1) {
                last = seq;
                if (fn (msg->body, arg))
                    rc = 1;
            }
            else
            if (seq > last + 1)
                rc = s_replay (bus, sid, &last, fn, arg);   /* a gap: fill it from the tape */
            sb_msg_destroy (&msg);
            quiet_since = sb_mono_ms ();
        }
        else
        if (sb_mono_ms () - quiet_since >= 1000) {
            rc = s_replay (bus, sid, &last, fn, arg);
            quiet_since = sb_mono_ms ();
        }
        if (rc == 0 && idle && idle (arg))
            rc = 1;
    }
    sb_sub_destroy (&sub);
    return rc < 0 ? -1 : 0;
}

/*  actors/exec/stream.c — one llm.stream request of a run: sent, its
    chunks checked for order and handed on, and cancelled at the llm
    instance that holds it when the run is cancelled or out of time.
*/
#include "actors/exec/stream.h"
#include "common/log.h"
#include "schemas/vocab.h"

#include <stdlib.h>
#include <string.h>

//  Where a stream is: the request's id, the instance and stream that
//  serve it, the next chunk's seq, and the cancel once sent.
typedef struct {
    char id [SB_ULID_LEN + 1];
    char llm_instance [129];
    char stream_id [33];
    uint64_t expect;
    int64_t last_rx;
    bool cancel_sent;
    int64_t cancel_at;
} s_state_t;

//  Asks the instance that holds the stream to cancel it (nothing to ask
//  before it said which stream it opened).
static void
s_send_cancel (sb_exec_run_t *run, const s_state_t *st)
{
    if (!st->stream_id [0])
        return;
    sb_enc_t *c = sb_enc_new ();
    sb_enc_map_open (c);
    sb_enc_kstr (c, "stream_id", st->stream_id);
    sb_enc_map_close (c);
    size_t cl;
    const uint8_t *cb = sb_enc_data (c, &cl);
    sb_bus_send (run->bus, "llm.cancel", run->session_id, st->llm_instance, cb, cl, 0, NULL);
    sb_enc_destroy (&c);
}

//  Waits for the next message, the cancel or the next due flush, and
//  sends llm.cancel once when the run is cancelled or past its deadline.
//  Returns whether the stream is to stop as cancelled now: at once when
//  no stream was opened or the caller gives no grace, else after it.
static bool
s_wait (sb_exec_run_t *run, sb_exec_stream_t *s, s_state_t *st)
{
    zmq_pollitem_t items [] = {
        { sb_bus_socket (run->bus), 0, ZMQ_POLLIN, 0 },
        { NULL, run->cancel_fd, ZMQ_POLLIN, 0 },
    };
    long wait = (long) sb_exec_flush_wait (run);
    if (sb_bus_has_queued (run->bus))
        wait = 0;
    zmq_poll (items, st->cancel_sent ? 1 : 2, wait);
    if (!st->cancel_sent && (items [1].revents & ZMQ_POLLIN || sb_mono_ms () > run->deadline)) {
        s->timed_out = sb_mono_ms () > run->deadline;
        s_send_cancel (run, st);
        st->cancel_sent = true;
        st->cancel_at = sb_mono_ms ();
    }
    return st->cancel_sent
        && (!st->stream_id [0] || s->grace_ms == 0 || sb_mono_ms () - st->cancel_at > s->grace_ms);
}

//  One chunk: in order, else the stream fails (a partial stream is not
//  used); the open chunk names the stream, the others go to on_chunk.
static int
s_chunk (sb_exec_run_t *run, sb_exec_stream_t *s, s_state_t *st, const sb_msg_t *msg)
{
    if (msg->h.seq != st->expect) {
        sb_exec_finish_with (run, "failed", "the %s stream lost a chunk (expected %llu, got %llu)", s->what,
                             (unsigned long long) st->expect, (unsigned long long) msg->h.seq);
        return SB_EXEC_STREAM_FAILED;
    }
    st->expect++;
    const char *kind = sb_get_str (msg->body, "kind");
    if (kind && strcmp (kind, "open") == 0) {
        snprintf (st->stream_id, sizeof st->stream_id, "%s", sb_get_str (msg->body, "stream_id"));
        snprintf (st->llm_instance, sizeof st->llm_instance, "%s", msg->h.from);
        return 1;
    }
    return s->on_chunk (s->arg, msg->body) ? SB_EXEC_STREAM_FAILED : 1;
}

//  The error reply: a context overflow the caller may retry smaller
//  (actors/exec/compact.c), anything else fails the run. What the chunks
//  before it produced goes on the tape first.
static int
s_error (sb_exec_run_t *run, sb_exec_stream_t *s, const sb_msg_t *msg)
{
    sb_exec_flush_deltas (run, true);
    if (sb_err_from_name (sb_msg_error_code (msg)) == SB_E_context_overflow) {
        snprintf (run->overflow_msg, sizeof run->overflow_msg, "%s", sb_msg_error_message (msg));
        return SB_EXEC_STREAM_OVERFLOW;
    }
    if (s->refused && sb_err_from_name (sb_msg_error_code (msg)) == SB_E_invalid) {
        snprintf (s->refused, s->refused_size, "%s", sb_msg_error_message (msg));
        return SB_EXEC_STREAM_REFUSED;
    }
    sb_exec_finish_with (run, "failed", "%s: %s: %s", s->fail, sb_msg_error_code (msg), sb_msg_error_message (msg));
    return SB_EXEC_STREAM_FAILED;
}

//  Takes every queued message of this stream: 1 while it goes on, else
//  how it ended (the final reply: ENDED, with its stop reason).
static int
s_receive (sb_exec_run_t *run, sb_exec_stream_t *s, s_state_t *st)
{
    int rc = 1;
    sb_msg_t *msg;
    while (rc == 1 && (msg = sb_bus_recv (run->bus, 0))) {
        if (strcmp (msg->h.corr, st->id) == 0) {
            st->last_rx = sb_mono_ms ();
            if (sb_type_has_suffix (msg->h.type, ".chunk"))
                rc = s_chunk (run, s, st, msg);
            else
            if (sb_msg_is_error (msg))
                rc = s_error (run, s, msg);
            else {
                snprintf (s->stop, sizeof s->stop, "%s", sb_get_str (msg->body, "stop_reason"));
                rc = SB_EXEC_STREAM_ENDED;
            }
        }
        sb_msg_destroy (&msg);
    }
    return rc;
}

int
sb_exec_stream (sb_exec_run_t *run, const uint8_t *body, size_t len, sb_exec_stream_t *s)
{
    s_state_t st = { .expect = 1 };
    s->stop [0] = 0;
    s->timed_out = false;
    if (sb_bus_send (run->bus, "llm.stream", run->session_id, NULL, body, len, 0, st.id)) {
        sb_exec_finish_with (run, "failed", "cannot send the %s request", s->what);
        return SB_EXEC_STREAM_FAILED;
    }
    atomic_store (&run->phase, SB_PHASE_MODEL);
    st.last_rx = sb_mono_ms ();
    while (true) {
        if (s_wait (run, s, &st)) {
            sb_exec_flush_deltas (run, true);
            return SB_EXEC_STREAM_CANCELLED;
        }
        int rc = s_receive (run, s, &st);
        if (rc < 0)
            return rc;
        if (sb_exec_flush_deltas (run, rc == SB_EXEC_STREAM_ENDED) != 0)
            return SB_EXEC_STREAM_FAILED;
        if (rc == SB_EXEC_STREAM_ENDED)
            return st.cancel_sent ? SB_EXEC_STREAM_CANCELLED : SB_EXEC_STREAM_ENDED;
        if (sb_mono_ms () - st.last_rx > SB_EXEC_STREAM_IDLE_MS) {
            sb_exec_finish_with (run, "failed", "the %s stream went silent", s->what);
            return SB_EXEC_STREAM_FAILED;
        }
    }
}


/* ------------------------------------------------------------------ */
/*  A one-off call's text */

//  What a one-off stream gathers: its text, bounded, and its usage.
typedef struct {
    sb_exec_run_t *run;
    char *out;
    size_t len, cap;
    sb_exec_text_usage_t *usage;
} s_gather_t;

//  One chunk (sb_exec_stream's hook): usage is counted, text appended.
//  Returns 0, or -1 out of memory.
static int
s_gather_chunk (void *arg, const sb_val_t *chunk)
{
    s_gather_t *g = arg;
    const char *kind = sb_get_str (chunk, "kind");
    const char *text = sb_get_str (chunk, "text");
    if (kind && strcmp (kind, "usage") == 0) {
        g->usage->known = true;
        sb_exec_usage_take (&g->usage->call, chunk);
        g->usage->in = g->usage->call.count [0];
        g->usage->out = g->usage->call.count [1];
        return 0;
    }
    if (!kind || strcmp (kind, "text") != 0 || !text || !*text)
        return 0;
    size_t n = strlen (text);
    if (g->len + n >= SB_EXEC_TEXT_MAX)
        return 0;
    if (g->len + n + 1 > g->cap) {
        size_t ncap = g->cap ? g->cap * 2 : 4096;
        while (ncap < g->len + n + 1)
            ncap *= 2;
        char *nb = realloc (g->out, ncap);
        if (!nb) {
            sb_exec_finish_with (g->run, "failed", "out of memory");
            return -1;
        }
        g->out = nb;
        g->cap = ncap;
    }
    memcpy (g->out + g->len, text, n);
    g->len += n;
    g->out [g->len] = 0;
    return 0;
}

int
sb_exec_stream_text (sb_exec_run_t *run, const uint8_t *body, size_t len, sb_exec_stream_t *s, char **out,
                     size_t *outlen, sb_exec_text_usage_t *usage)
{
    s_gather_t g = { run, NULL, 0, 0, usage };
    s->on_chunk = s_gather_chunk;
    s->arg = &g;
    int rc = sb_exec_stream (run, body, len, s);
    atomic_store (&run->phase, SB_PHASE_IDLE);
    if (rc != SB_EXEC_STREAM_ENDED) {
        free (g.out);
        g.out = NULL;
        g.len = 0;
    }
    *out = g.out;
    *outlen = g.len;
    return rc;
}

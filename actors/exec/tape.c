/*  actors/exec/tape.c — what a run writes to its session's tape.

    Every append carries the run's fence, so an executor whose lease lapsed
    cannot write: the session actor refuses it. Text and thinking deltas
    are coalesced, so the tape grows with the text and not with the token
    count.
*/
#include "actors/exec/agent.h"
#include "actors/exec/tools.h"
#include "common/log.h"

#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>

#define ACTOR "exec"

/* ------------------------------------------------------------------ */
/*  Small helpers */

bool
sb_exec_cancelled (sb_exec_run_t *run)
{
    uint64_t v;
    struct pollfd p = { run->cancel_fd, POLLIN, 0 };
    (void) v;
    return poll (&p, 1, 0) > 0;
}

void
sb_exec_finish_with (sb_exec_run_t *run, const char *status, const char *fmt, ...)
{
    if (run->status [0])
        return;                 /* the first reason wins */
    snprintf (run->status, sizeof run->status, "%s", status);
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (run->reason, sizeof run->reason, fmt, ap);
    va_end (ap);
}

bool
sb_exec_err_lost (sb_err_t err)
{
    return err == SB_E_fenced || err == SB_E_conflict || err == SB_E_not_found;
}

/*  Appends entries (an encoded array in `entries`) to the tape with the
    run's fence. Returns 0, or -1 (and marks the run lost when fenced). */
int
sb_exec_append (sb_exec_run_t *run, sb_enc_t *entries)
{
    size_t elen;
    const uint8_t *edata = sb_enc_data (entries, &elen);
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kuint (e, "fence", run->fence);
    sb_enc_key (e, "entries");
    sb_enc_raw (e, edata, elen);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "session.append", run->session_id, b, len, SB_EXEC_CALL_MS);
    sb_enc_destroy (&e);
    int rc = 0;
    if (!reply || sb_msg_is_error (reply)) {
        const char *code = reply ? sb_msg_error_code (reply) : "timeout";
        if (sb_exec_err_lost (sb_err_from_name (code))) {
            atomic_store (&run->lost, true);
            sb_warn (ACTOR, "run lost its right to write run=%s code=%s", run->run_id, code);
        }
        else
            sb_exec_finish_with (run, "failed", "cannot append to the tape: %s %s", code,
                           reply ? sb_msg_error_message (reply) : "");
        rc = -1;
    }
    else {
        uint64_t seq = sb_get_uint (reply->body, "last_seq", sb_get_uint (reply->body, "seq", 0));
        if (seq > run->last_seq)
            run->last_seq = seq;
    }
    sb_msg_destroy (&reply);
    return rc;
}

/*  One entry: {kind, body: {...}} built by the caller between
    sb_exec_entry_open and sb_exec_entry_close. */
void
sb_exec_entry_open (sb_enc_t *e, const char *kind)
{
    sb_enc_map_open (e);
    sb_enc_kstr (e, "kind", kind);
    sb_enc_key (e, "body");
    sb_enc_map_open (e);
}

void
sb_exec_entry_close (sb_enc_t *e)
{
    sb_enc_map_close (e);
    sb_enc_map_close (e);
}

int
sb_exec_append_one (sb_exec_run_t *run, const char *kind, const char *key, const char *text)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    sb_exec_entry_open (e, kind);
    if (key)
        sb_enc_kstr (e, key, text);
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
    int rc = sb_exec_append (run, e);
    sb_enc_destroy (&e);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Coalescing: the tape grows with the text, not with the token count */

void
sb_exec_co_add (sb_exec_coalesce_t *c, const char *data, size_t n)
{
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        while (cap < c->len + n + 1)
            cap *= 2;
        char *nb = realloc (c->buf, cap);
        if (!nb)
            return;
        c->buf = nb;
        c->cap = cap;
    }
    if (c->len == 0)
        c->first_ms = sb_mono_ms ();
    memcpy (c->buf + c->len, data, n);
    c->len += n;
    c->buf [c->len] = 0;
}

static void
s_co_encode (sb_exec_coalesce_t *c, sb_enc_t *e)
{
    if (!c->len)
        return;
    sb_exec_entry_open (e, c->kind);
    if (c->call_id [0])
        sb_enc_kstr (e, "call_id", c->call_id);
    sb_enc_key (e, "text");
    sb_enc_strn (e, c->buf, c->len);
    sb_exec_entry_close (e);
    c->len = 0;
}

/*  Flushes the delta buffers that are due (or all with force). */
int
sb_exec_flush_deltas (sb_exec_run_t *run, bool force)
{
    int64_t now = sb_mono_ms ();
    bool text_due = run->text.len && (force || run->text.len >= SB_EXEC_COALESCE_BYTES || now - run->text.first_ms >= SB_EXEC_COALESCE_MS);
    bool think_due = run->thinking.len && (force || run->thinking.len >= SB_EXEC_COALESCE_BYTES || now - run->thinking.first_ms >= SB_EXEC_COALESCE_MS);
    if (!text_due && !think_due)
        return 0;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    /* thinking precedes the text it led to */
    if (think_due || (text_due && run->thinking.len))
        s_co_encode (&run->thinking, e);
    if (text_due)
        s_co_encode (&run->text, e);
    sb_enc_array_close (e);
    int rc = sb_exec_append (run, e);
    sb_enc_destroy (&e);
    return rc;
}

int64_t
sb_exec_flush_wait (sb_exec_run_t *run)
{
    int64_t now = sb_mono_ms (), wait = 500;
    if (run->text.len && run->text.first_ms + SB_EXEC_COALESCE_MS - now < wait)
        wait = run->text.first_ms + SB_EXEC_COALESCE_MS - now;
    if (run->thinking.len && run->thinking.first_ms + SB_EXEC_COALESCE_MS - now < wait)
        wait = run->thinking.first_ms + SB_EXEC_COALESCE_MS - now;
    return wait < 0 ? 0 : wait;
}

/* ------------------------------------------------------------------ */
/*  Tool output: bounded per call, head and tail                      */

/*  Whether the run may still write: once it failed (a refused append,
    say) or lost its fence, the output is drained but goes nowhere. */
static bool
s_may_write (sb_exec_run_t *run)
{
    return !run->status [0] && !atomic_load (&run->lost);
}

/*  One tool.output entry with `text`, and `elided` when it is the entry
    that stands for the bytes the tape did not keep. */
static void
s_tool_entry (sb_exec_run_t *run, const char *text, size_t len, uint64_t elided)
{
    if (!s_may_write (run))
        return;
    /* the tape takes text: make the bytes valid UTF-8 first */
    size_t clean_len;
    char *clean = sb_tools_utf8_clean (text, len, &clean_len);
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    sb_exec_entry_open (e, "tool.output");
    sb_enc_kstr (e, "call_id", run->tool_out.call_id);
    sb_enc_key (e, "text");
    sb_enc_strn (e, clean ? clean : "", clean ? clean_len : 0);
    if (elided)
        sb_enc_kuint (e, "elided", elided);
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
    free (clean);
    /* a run that cannot write (the session's quota, say) has failed: its
       command is stopped now rather than left to print into nowhere */
    if (sb_exec_append (run, e) != 0)
        eventfd_write (run->cancel_fd, 1);
    sb_enc_destroy (&e);
}

static void
s_tool_flush (sb_exec_run_t *run)
{
    if (run->tool_out.len)
        s_tool_entry (run, run->tool_out.buf, run->tool_out.len, 0);
    run->tool_out.len = 0;
}

void
sb_exec_tool_output_begin (sb_exec_run_t *run, const char *call_id)
{
    sb_exec_tool_tape_t *tt = &run->tool_tape;
    snprintf (run->tool_out.kind, sizeof run->tool_out.kind, "tool.output");
    snprintf (run->tool_out.call_id, sizeof run->tool_out.call_id, "%s", call_id);
    run->tool_out.len = 0;
    if (!tt->cap)
        tt->cap = SB_EXEC_TOOL_TAPE_DEFAULT;
    tt->total = tt->head = 0;
    tt->head_full = false;
    sb_ring_reset (&tt->tail);
}

/*  The output callback of a tool call, on the run thread. Bytes arrive
    as whole UTF-8 sequences (actors/exec/tools.c cleans them), so the
    head is cut on a sequence boundary. */
void
sb_exec_tool_output (const char *data, size_t len, void *arg)
{
    sb_exec_run_t *run = arg;
    sb_exec_tool_tape_t *tt = &run->tool_tape;
    tt->total += len;
    uint64_t head_cap = tt->cap / 2;
    if (!tt->head_full) {
        size_t take = len;
        if (tt->head + take > head_cap) {
            take = (size_t) (head_cap - tt->head);
            while (take > 0 && ((unsigned char) data [take] & 0xC0) == 0x80)
                take--;
            tt->head_full = true;
        }
        if (take) {
            sb_exec_co_add (&run->tool_out, data, take);
            tt->head += take;
        }
        data += take;
        len -= take;
        if (run->tool_out.len >= SB_EXEC_TOOL_OUTPUT_BYTES || tt->head_full
        ||  sb_mono_ms () - run->tool_out.first_ms >= SB_EXEC_TOOL_OUTPUT_MS)
            s_tool_flush (run);
    }
    if (!len)
        return;
    /* the ring is sized by the configured cap, never by the output */
    if (!tt->tail.buf && sb_ring_init (&tt->tail, (size_t) (tt->cap - head_cap)) != 0)
        return;                 /* everything past the head is elided */
    sb_ring_add (&tt->tail, data, len);
}

void
sb_exec_tool_output_end (sb_exec_run_t *run)
{
    sb_exec_tool_tape_t *tt = &run->tool_tape;
    s_tool_flush (run);
    if (!tt->head_full)
        return;
    /* the ring in order, less the continuation bytes of a sequence whose
       start was overwritten */
    size_t skip = sb_ring_utf8_skip (&tt->tail);
    size_t kept = tt->tail.len - skip;
    uint64_t elided = tt->total - tt->head - kept;
    if (elided) {
        char note [160];
        int n = snprintf (note, sizeof note, "\n[... %llu bytes of output elided from the tape ...]\n",
                          (unsigned long long) elided);
        s_tool_entry (run, note, (size_t) n, elided);
    }
    char *piece = kept ? malloc (SB_EXEC_TOOL_TAPE_TAIL_PIECE) : NULL;
    for (size_t at = 0; piece && at < kept; ) {
        size_t n = kept - at < SB_EXEC_TOOL_TAPE_TAIL_PIECE ? kept - at : SB_EXEC_TOOL_TAPE_TAIL_PIECE;
        sb_ring_copy (&tt->tail, skip + at, piece, n);
        /* a piece ends on a sequence boundary, but for the last */
        size_t cut = n;
        if (at + n < kept)
            while (cut > 1 && ((unsigned char) sb_ring_at (&tt->tail, skip + at + cut) & 0xC0) == 0x80)
                cut--;
        s_tool_entry (run, piece, cut, 0);
        at += cut;
    }
    free (piece);
    sb_exec_tool_output_free (run);
}

void
sb_exec_tool_output_free (sb_exec_run_t *run)
{
    sb_ring_free (&run->tool_tape.tail);
}

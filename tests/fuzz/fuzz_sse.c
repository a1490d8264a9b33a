/*  tests/fuzz/fuzz_sse.c — the SSE parser on arbitrary bytes, split anywhere.

    Input: byte 0 gives the number of split points (low 3 bits), the next
    two bytes per split give its offset, and the rest is the stream. The
    stream is parsed twice, whole and split, and both parses must give the
    same events and the same outcome: a parser that depends on where the
    transport cut the bytes is wrong, which no crash would reveal.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/llm/sse.h"
#include "tests/common/record.h"

static int
s_on_event (const char *event, const char *data, size_t len, const char *id, void *ctx)
{
    sb_test_rec_t *r = ctx;
    if (data [len] != 0 || !*event)
        abort ();
    sb_test_rec_put_str (r, event, strlen (event));
    sb_test_rec_put_str (r, data, len);
    sb_test_rec_put_str (r, id, strlen (id));
    return 0;
}

//  A small limit, so that inputs of a few KB reach the size checks too.
#define MAX_EVENT 512

int
LLVMFuzzerTestOneInput (const uint8_t *buf, size_t size)
{
    if (size < 1)
        return 0;
    size_t nsplit = buf [0] & 7;
    if (size < 1 + nsplit * 2)
        return 0;
    size_t cuts [8];
    for (size_t i = 0; i < nsplit; i++)
        cuts [i] = (size_t) buf [1 + 2 * i] | ((size_t) buf [2 + 2 * i] << 8);
    const char *in = (const char *) buf + 1 + nsplit * 2;
    size_t len = size - 1 - nsplit * 2;

    sb_test_rec_t whole = { 0 }, parts = { 0 };
    sb_sse_t *a = sb_sse_new (MAX_EVENT);
    sb_sse_t *b = sb_sse_new (MAX_EVENT);
    if (!a || !b)
        abort ();
    int rc_a = sb_sse_feed (a, in, len, s_on_event, &whole);
    int rc_b = 0;
    size_t off = 0;
    for (size_t i = 0; i <= nsplit; i++) {
        size_t end = i < nsplit? cuts [i] % (len + 1): len;
        if (end < off)
            end = off;
        int rc = sb_sse_feed (b, in + off, end - off, s_on_event, &parts);
        if (rc)
            rc_b = rc;
        off = end;
    }
    //  Both or neither hit the limit, with the same events before it.
    if (rc_a != rc_b || sb_sse_finish (a) != sb_sse_finish (b)
    ||  !sb_test_rec_equal (&whole, &parts))
        abort ();
    if (sb_sse_events (a) != sb_sse_events (b) || strcmp (sb_sse_last_id (a), sb_sse_last_id (b))
    ||  sb_sse_retry_ms (a) != sb_sse_retry_ms (b))
        abort ();
    sb_sse_destroy (&a);
    sb_sse_destroy (&b);
    sb_test_rec_free (&whole);
    sb_test_rec_free (&parts);
    return 0;
}

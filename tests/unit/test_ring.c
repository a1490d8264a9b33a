/*  tests/unit/test_ring.c — the ring of a stream's last bytes
    (common/ring.h) that the sandbox's capture and the executor's tool
    tape keep their tails in: what it holds is always the stream's last
    cap bytes, in order, whatever the sizes of the writes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/ring.h"

//  Reads the whole ring, the oldest byte first, both ways it can be read.
static void
s_read (const sb_ring_t *r, char *out)
{
    sb_ring_copy (r, 0, out, r->len);
    for (size_t i = 0; i < r->len; i++)
        cr_assert_eq (sb_ring_at (r, i), out [i], "byte %zu: at and copy differ", i);
}

Test (ring, keeps_the_last_cap_bytes_of_any_writes)
{
    enum { STREAM = 20000 };
    char *stream = malloc (STREAM), *got = malloc (STREAM);
    cr_assert (stream && got);
    for (size_t i = 0; i < STREAM; i++)
        stream [i] = (char) ('a' + (i * 7 + i / 13) % 26);
    size_t caps [] = { 1, 2, 7, 64, 1000 };
    srand (22);
    for (size_t c = 0; c < sizeof caps / sizeof caps [0]; c++) {
        sb_ring_t r;
        cr_assert_eq (sb_ring_init (&r, caps [c]), 0);
        size_t total = 0;
        while (total < STREAM) {
            //  sizes below, at and above the capacity
            size_t n = (size_t) rand () % (caps [c] * 3 + 2);
            if (n > STREAM - total)
                n = STREAM - total;
            sb_ring_add (&r, stream + total, n);
            total += n;
            size_t want = total < caps [c] ? total : caps [c];
            cr_assert_eq (r.len, want, "cap %zu after %zu bytes: holds %zu", caps [c], total, r.len);
            s_read (&r, got);
            cr_assert (memcmp (got, stream + total - want, want) == 0,
                       "cap %zu after %zu bytes: not the last %zu", caps [c], total, want);
            if (want > 2) {
                //  a copy from the middle, across the wrap when there is one
                char part [1000];
                sb_ring_copy (&r, 1, part, want - 2);
                cr_assert (memcmp (part, stream + total - want + 1, want - 2) == 0);
            }
        }
        sb_ring_free (&r);
        cr_assert_null (r.buf);
        cr_assert_eq (r.cap, 0);
    }
    free (stream);
    free (got);
}

Test (ring, reset_empties_and_keeps_the_buffer)
{
    sb_ring_t r;
    cr_assert_eq (sb_ring_init (&r, 4), 0);
    sb_ring_add (&r, "abcdef", 6);
    char *buf = r.buf;
    sb_ring_reset (&r);
    cr_assert_eq (r.len, 0);
    cr_assert_eq (r.buf, buf);
    sb_ring_add (&r, "xy", 2);
    char got [4];
    s_read (&r, got);
    cr_assert_eq (r.len, 2);
    cr_assert (memcmp (got, "xy", 2) == 0);
    sb_ring_free (&r);
}

Test (ring, zero_capacity_keeps_nothing)
{
    sb_ring_t r;
    cr_assert_eq (sb_ring_init (&r, 0), 0);
    sb_ring_add (&r, "abc", 3);
    cr_assert_eq (r.len, 0);
    cr_assert_eq (sb_ring_utf8_skip (&r), 0);
    char got [1];
    sb_ring_copy (&r, 0, got, 0);
    sb_ring_free (&r);
    sb_ring_free (&r);          //  twice: an empty ring is freed too
}

Test (ring, utf8_skip_drops_a_sequence_cut_at_the_start)
{
    sb_ring_t r;
    cr_assert_eq (sb_ring_init (&r, 5), 0);
    //  "€abc": the ring's 5 bytes start with the last 2 of € (E2 82 AC)
    sb_ring_add (&r, "\xe2\x82\xac" "abc", 6);
    cr_assert_eq (r.len, 5);
    cr_assert_eq (sb_ring_utf8_skip (&r), 2);
    //  a whole sequence at the start is kept
    sb_ring_add (&r, "\xe2\x82\xac" "cd", 5);
    cr_assert_eq (sb_ring_utf8_skip (&r), 0);
    //  never more than 3, even over bytes that are all continuations
    sb_ring_add (&r, "\x80\x80\x80\x80\x80", 5);
    cr_assert_eq (sb_ring_utf8_skip (&r), 3);
    sb_ring_free (&r);
}

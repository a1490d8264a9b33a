/*  common/ring.c — a ring of the last bytes of a stream (common/ring.h). */
#include "common/ring.h"

#include <stdlib.h>
#include <string.h>

int
sb_ring_init (sb_ring_t *ring, size_t cap)
{
    *ring = (sb_ring_t) { .buf = cap ? malloc (cap) : NULL, .cap = cap };
    if (cap && !ring->buf) {
        ring->cap = 0;
        return -1;
    }
    return 0;
}

void
sb_ring_free (sb_ring_t *ring)
{
    free (ring->buf);
    *ring = (sb_ring_t) { 0 };
}

void
sb_ring_reset (sb_ring_t *ring)
{
    ring->len = ring->pos = 0;
}

//  At most two copies whatever n is: a write as large as the ring
//  replaces all of it.
void
sb_ring_add (sb_ring_t *ring, const char *data, size_t n)
{
    if (n == 0 || ring->cap == 0)
        return;
    if (n >= ring->cap) {
        memcpy (ring->buf, data + n - ring->cap, ring->cap);
        ring->pos = 0;
        ring->len = ring->cap;
        return;
    }
    size_t first = ring->cap - ring->pos;
    if (first > n)
        first = n;
    memcpy (ring->buf + ring->pos, data, first);
    memcpy (ring->buf, data + first, n - first);
    ring->pos = (ring->pos + n) % ring->cap;
    ring->len = ring->len + n > ring->cap ? ring->cap : ring->len + n;
}

//  The oldest byte is at pos once the ring has wrapped, else at 0.
static size_t
s_start (const sb_ring_t *ring)
{
    return ring->len == ring->cap ? ring->pos : 0;
}

char
sb_ring_at (const sb_ring_t *ring, size_t i)
{
    return ring->buf [(s_start (ring) + i) % ring->cap];
}

void
sb_ring_copy (const sb_ring_t *ring, size_t from, char *out, size_t n)
{
    size_t at = (s_start (ring) + from) % (ring->cap ? ring->cap : 1);
    size_t first = ring->cap - at;
    if (first > n)
        first = n;
    if (first)
        memcpy (out, ring->buf + at, first);
    if (n > first)
        memcpy (out + first, ring->buf, n - first);
}

size_t
sb_ring_utf8_skip (const sb_ring_t *ring)
{
    size_t skip = 0;
    while (skip < 3 && skip < ring->len && ((unsigned char) sb_ring_at (ring, skip) & 0xC0) == 0x80)
        skip++;
    return skip;
}

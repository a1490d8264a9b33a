/*  common/ring.h — a ring of the last bytes of a stream.

    A tool's output is kept as its first bytes and its last ones, so that
    a command that prints without end costs a fixed amount of memory: the
    sandbox's capture (sandbox/spawn.c) and the executor's share of the
    tape (actors/exec/tape.c) keep their tails in one of these. The ring
    holds at most `cap` bytes; adding more overwrites the oldest. Not
    thread-safe: one owner at a time. */
#ifndef SB_RING_H
#define SB_RING_H

#include <stddef.h>

typedef struct {
    char *buf;                  //  cap bytes, or NULL
    size_t cap;                 //  0: the ring keeps nothing
    size_t len;                 //  bytes held, at most cap
    size_t pos;                 //  where the next byte goes
} sb_ring_t;

//  Allocates a ring of `cap` bytes, empty. Returns 0, or -1 when out of
//  memory (the ring is then empty with cap 0, and keeps nothing).
int sb_ring_init (sb_ring_t *ring, size_t cap);
//  Frees the bytes; the ring is empty with cap 0. Tolerates an empty one.
void sb_ring_free (sb_ring_t *ring);
//  Forgets what it holds, keeping its bytes for the next stream.
void sb_ring_reset (sb_ring_t *ring);

//  Keeps the last bytes of data: what it held before and data together,
//  the last cap of them.
void sb_ring_add (sb_ring_t *ring, const char *data, size_t n);
//  The i-th byte held, the oldest first (i < len).
char sb_ring_at (const sb_ring_t *ring, size_t i);
//  Copies n bytes held from the `from`-th, the oldest first
//  (from + n <= len).
void sb_ring_copy (const sb_ring_t *ring, size_t from, char *out, size_t n);
//  How many of the oldest bytes (at most 3) are UTF-8 continuation bytes
//  of a sequence whose start was overwritten: where whole text begins.
size_t sb_ring_utf8_skip (const sb_ring_t *ring);

#endif

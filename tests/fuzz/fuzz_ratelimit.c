/*  tests/fuzz/fuzz_ratelimit.c — the rate-limit header reader on
    arbitrary header lines (actors/llm/usage.c).

    Input: header lines as libcurl hands them, split at '\n'. Each line is
    read into one set of fields; every field must then be unknown (-1) or
    an integer within its declared range, whatever the bytes were. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "actors/llm/usage.h"

int
LLVMFuzzerTestOneInput (const uint8_t *buf, size_t size)
{
    sb_limits_seen_t rl;
    sb_limits_seen_clear (&rl);
    const char *p = (const char *) buf, *end = p + size;
    while (p < end) {
        const char *nl = memchr (p, '\n', (size_t) (end - p));
        size_t n = nl ? (size_t) (nl - p) + 1 : (size_t) (end - p);
        //  a copy of exactly n bytes, so that a read past the line is caught
        char *line = malloc (n ? n : 1);
        if (!line)
            return 0;
        memcpy (line, p, n);
        sb_limits_seen_header (&rl, line, n);
        free (line);
        p += n;
    }
    for (int k = 0; k < SB_RL_COUNT; k++)
        if (rl.v [k] < -1 || rl.v [k] > SB_RL_MAX)
            abort ();
    return 0;
}

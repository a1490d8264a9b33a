/*  tests/common/record.h — a growing byte record, for tests that compare two
    runs of a parser (whole and split, or LF and CRLF) as one byte string.

    Header-only (static inline). Out of memory aborts: these are test and
    fuzz binaries, where there is nothing better to do.
*/
#ifndef SB_TESTS_COMMON_RECORD_H
#define SB_TESTS_COMMON_RECORD_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t len;
    size_t cap;
} sb_test_rec_t;

//  Appends n bytes and keeps the record NUL-terminated, so that a test can
//  also print it or compare it as a string.
static inline void
sb_test_rec_put (sb_test_rec_t *r, const void *src, size_t n)
{
    if (r->len + n + 1 > r->cap) {
        r->cap = (r->len + n + 1) * 2 + 64;
        r->p = realloc (r->p, r->cap);
        if (!r->p)
            abort ();
    }
    if (n)
        memcpy (r->p + r->len, src, n);
    r->len += n;
    r->p [r->len] = 0;
}

//  A length-prefixed string: two records are equal only if their strings
//  split the same way.
static inline void
sb_test_rec_put_str (sb_test_rec_t *r, const char *s, size_t n)
{
    sb_test_rec_put (r, &n, sizeof n);
    sb_test_rec_put (r, s, n);
}

static inline bool
sb_test_rec_equal (const sb_test_rec_t *a, const sb_test_rec_t *b)
{
    return a->len == b->len && (a->len == 0 || memcmp (a->p, b->p, a->len) == 0);
}

static inline void
sb_test_rec_free (sb_test_rec_t *r)
{
    free (r->p);
    memset (r, 0, sizeof *r);
}

#endif

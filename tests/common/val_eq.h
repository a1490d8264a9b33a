/*  tests/common/val_eq.h — deep equality of decoded msgpack trees, for the
    codec's unit tests and its fuzz target.

    Header-only (static inline). Floats compare by bit pattern, so that NaN
    equals itself; strings and binaries must also be NUL-terminated, as the
    decoder promises.
*/
#ifndef SB_TESTS_COMMON_VAL_EQ_H
#define SB_TESTS_COMMON_VAL_EQ_H

#include <stdbool.h>
#include <string.h>

#include "schemas/codec.h"

static inline bool
sb_test_val_eq (const sb_val_t *a, const sb_val_t *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
        case SB_V_NIL: return true;
        case SB_V_BOOL: return a->v.b == b->v.b;
        case SB_V_INT: return a->v.i == b->v.i;
        case SB_V_UINT: return a->v.u == b->v.u;
        case SB_V_FLOAT: return memcmp (&a->v.f, &b->v.f, sizeof (double)) == 0;
        case SB_V_STR:
        case SB_V_BIN:
            return a->len == b->len && memcmp (a->v.s, b->v.s, a->len) == 0
                && a->v.s [a->len] == 0 && b->v.s [b->len] == 0;
        case SB_V_ARRAY:
        case SB_V_MAP: {
            if (a->len != b->len)
                return false;
            size_t n = a->type == SB_V_MAP ? 2 * (size_t) a->len : a->len;
            for (size_t k = 0; k < n; k++)
                if (!sb_test_val_eq (&a->v.a [k], &b->v.a [k]))
                    return false;
            return true;
        }
    }
    return false;
}

#endif

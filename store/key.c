/*  store/key.c — the key builder: a table tag, then big-endian
    integers and NUL-terminated strings, so byte order is numeric order
    (store/store.h). */
#include "store/store_impl.h"

#include <string.h>

//  --------------------------------------------------------------------------
//  Key builder

static uint8_t *
s_key_room (sb_key_t *k, size_t n)
{
    if (k->overflow)
        return NULL;
    if (n > SB_STORE_KEY_MAX - k->len) {
        k->overflow = true;
        k->len = 0;
        return NULL;
    }
    uint8_t *p = k->buf + k->len;
    k->len += n;
    return p;
}

void
sb_key_init (sb_key_t *k, char tag)
{
    k->overflow = false;
    k->buf [0] = (uint8_t) tag;
    k->len = 1;
}

void
sb_key_u8 (sb_key_t *k, uint8_t v)
{
    uint8_t *p = s_key_room (k, 1);
    if (p)
        p [0] = v;
}

void
sb_key_u32 (sb_key_t *k, uint32_t v)
{
    uint8_t *p = s_key_room (k, 4);
    if (p)
        for (int i = 3; i >= 0; i--, v >>= 8)
            p [i] = (uint8_t) v;
}

void
sb_key_u64 (sb_key_t *k, uint64_t v)
{
    uint8_t *p = s_key_room (k, 8);
    if (p)
        for (int i = 7; i >= 0; i--, v >>= 8)
            p [i] = (uint8_t) v;
}

void
sb_key_strn (sb_key_t *k, const char *s, size_t n)
{
    //  An embedded 0 would end the field early and make two different
    //  strings share a key.
    if (!s || memchr (s, 0, n)) {
        k->overflow = true;
        k->len = 0;
        return;
    }
    uint8_t *p = s_key_room (k, n + 1);
    if (p) {
        memcpy (p, s, n);
        p [n] = 0;
    }
}

void
sb_key_str (sb_key_t *k, const char *s)
{
    sb_key_strn (k, s, s? strlen (s): 0);
}

void
sb_key_bytes (sb_key_t *k, const void *data, size_t n)
{
    if (!data && n > 0) {
        k->overflow = true;
        k->len = 0;
        return;
    }
    uint8_t *p = s_key_room (k, n);
    if (p && n > 0)
        memcpy (p, data, n);
}

bool
sb_key_valid (const sb_key_t *k)
{
    return k && !k->overflow && k->len > 0;
}

uint64_t
sb_key_read_u64 (const sb_datum_t *key, size_t offset)
{
    if (!key || offset > key->size || key->size - offset < 8)
        return 0;
    const uint8_t *p = (const uint8_t *) key->data + offset;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p [i];
    return v;
}

uint32_t
sb_key_read_u32 (const sb_datum_t *key, size_t offset)
{
    if (!key || offset > key->size || key->size - offset < 4)
        return 0;
    const uint8_t *p = (const uint8_t *) key->data + offset;
    return (uint32_t) p [0] << 24 | (uint32_t) p [1] << 16
         | (uint32_t) p [2] << 8 | p [3];
}

/*  common/digest.c — BLAKE2b-256 through libsodium's crypto_generichash. */
#include "common/digest.h"

#include <sodium.h>
#include <stdlib.h>

struct sb_digest {
    crypto_generichash_state state;
};

sb_digest_t *
sb_digest_new (void)
{
    //  Picks the CPU's fastest implementation; safe to call again, and
    //  from any thread. Without it the portable one is used, which is
    //  still correct.
    if (sodium_init () < 0)
        return NULL;
    //  The state must be 64-byte aligned; a size rounded up to it, as
    //  aligned_alloc wants.
    sb_digest_t *self = aligned_alloc (64, (sizeof *self + 63) & ~(size_t) 63);
    if (!self)
        return NULL;
    crypto_generichash_init (&self->state, NULL, 0, SB_DIGEST_LEN);
    return self;
}

void
sb_digest_destroy (sb_digest_t **self_p)
{
    if (!*self_p)
        return;
    free (*self_p);
    *self_p = NULL;
}

void
sb_digest_update (sb_digest_t *self, const void *data, size_t len)
{
    crypto_generichash_update (&self->state, data, len);
}

void
sb_digest_final (sb_digest_t *self, uint8_t out [SB_DIGEST_LEN])
{
    crypto_generichash_final (&self->state, out, SB_DIGEST_LEN);
}

int
sb_digest_of (const void *data, size_t len, uint8_t out [SB_DIGEST_LEN])
{
    if (sodium_init () < 0)
        return -1;
    return crypto_generichash (out, SB_DIGEST_LEN, data, len, NULL, 0) == 0? 0: -1;
}

void
sb_nonce_hex (char out [SB_NONCE_HEX + 1])
{
    uint8_t rnd [SB_NONCE_HEX / 2];
    //  idempotent and thread-safe; randombytes_buf then never fails
    if (sodium_init () < 0)
        abort ();
    randombytes_buf (rnd, sizeof rnd);
    sodium_bin2hex (out, SB_NONCE_HEX + 1, rnd, sizeof rnd);
}

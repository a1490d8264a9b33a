/*  common/digest.c — SHA-256 through OpenSSL's EVP interface. */
#include "common/digest.h"

#include <openssl/evp.h>
#include <stdlib.h>

struct sb_digest {
    EVP_MD_CTX *ctx;
};

sb_digest_t *
sb_digest_new (void)
{
    sb_digest_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->ctx = EVP_MD_CTX_new ();
    if (!self->ctx || EVP_DigestInit_ex (self->ctx, EVP_sha256 (), NULL) != 1)
        sb_digest_destroy (&self);
    return self;
}

void
sb_digest_destroy (sb_digest_t **self_p)
{
    if (!*self_p)
        return;
    EVP_MD_CTX_free ((*self_p)->ctx);
    free (*self_p);
    *self_p = NULL;
}

void
sb_digest_update (sb_digest_t *self, const void *data, size_t len)
{
    EVP_DigestUpdate (self->ctx, data, len);
}

void
sb_digest_final (sb_digest_t *self, uint8_t out [SB_DIGEST_LEN])
{
    unsigned int n = SB_DIGEST_LEN;
    EVP_DigestFinal_ex (self->ctx, out, &n);
}

int
sb_digest_of (const void *data, size_t len, uint8_t out [SB_DIGEST_LEN])
{
    sb_digest_t *d = sb_digest_new ();
    if (!d)
        return -1;
    sb_digest_update (d, data, len);
    sb_digest_final (d, out);
    sb_digest_destroy (&d);
    return 0;
}

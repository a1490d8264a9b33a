/*  common/digest.h — SHA-256 of a request, for idempotency.

    A remembered command_id keeps the digest of the request it named, so
    that a retry (the same request again) is told from a reuse of the id
    for another request (docs/sessions.md, "Idempotency"). SHA-256, not a
    fast non-cryptographic hash: a client that knows a command_id must not
    be able to make another body pass for the one it names. It is
    OpenSSL's (libcrypto, which libcurl brings already), which uses the
    CPU's SHA instructions where there are some: about 1 ms per MiB.
    Any thread; a digest is used by one thread at a time. */
#ifndef SB_DIGEST_H
#define SB_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define SB_DIGEST_LEN 32

typedef struct sb_digest sb_digest_t;

/*  A new digest; NULL when out of memory. */
sb_digest_t *sb_digest_new (void);
/*  Tolerates NULL, and nulls the caller's pointer. */
void sb_digest_destroy (sb_digest_t **self_p);
void sb_digest_update (sb_digest_t *self, const void *data, size_t len);
/*  Writes the digest of everything given so far; the digest is spent. */
void sb_digest_final (sb_digest_t *self, uint8_t out [SB_DIGEST_LEN]);
/*  The digest of one buffer; -1 when out of memory. */
int sb_digest_of (const void *data, size_t len, uint8_t out [SB_DIGEST_LEN]);

#endif

/*  common/digest.h — a request's digest, for idempotency.

    A remembered command_id keeps the digest of the request it named, so
    that a retry (the same request again) is told from a reuse of the id
    for another request (docs/sessions.md, "Idempotency"). A cryptographic
    hash, not a fast non-cryptographic one: a client that knows a
    command_id must not be able to make another body pass for the one it
    names. BLAKE2b-256 from libsodium (which libzmq brings already): about
    2 ms of CPU per MiB (czmq's SHA-1 takes 2.8). OpenSSL's SHA-256 is
    faster where the CPU has SHA instructions, but it keeps per-thread
    state that outlives an actor's thread. Any thread; a digest is used
    by one thread at a time. */
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

/*  SB_NONCE_HEX hex digits of 16 random bytes and a NUL: the unguessable
    part of an outbox entry's command_id (actors/run/outbox.c,
    actors/interact/record.c). Never fails: libsodium's generator. */
#define SB_NONCE_HEX 32
void sb_nonce_hex (char out [SB_NONCE_HEX + 1]);

#endif

/*  store/cmdid.h — remembered command_ids: remember and replay a
    request by its command_id (docs/sessions.md, "Idempotency").

    A stateful actor that takes a command_id remembers, in the same
    transaction as the change the request made, what the request was (its
    type and the digest of its body, common/digest.h), what it answered
    (the reply: opaque bytes, the caller's to choose), and until when
    (expires, ms since the epoch). A later request under the same id, in
    the same scope, is then judged:
      - the same type and digest: a retry; it gets the remembered reply;
      - another type, or another body: a reuse of the id; the caller
        answers `conflict` (never with another request's reply);
      - nothing remembered, an entry past its `expires`, or one that
        cannot be read: a new request, carried out.

    Layout, in the caller's dbis:
      commands  'C' scope... command_id -> {type, expires, digest, reply}
      expiry    'E' expires scope... command_id -> ""
    The scope is one or more strings chosen by the caller (a session id,
    a requester's name) so that an id names a request within its scope
    only. The expiry row holds the command's key after its tag, so the
    sweep rebuilds the command's key from it whatever the scope's shape,
    and walks expiries in time order: a bounded sweep, a chunk at a time.
    The expiry rows may live in the commands dbi itself (their tag tells
    them apart) or in a dbi of their own.

    One TTL for every actor: SWITCHBOARD_COMMAND_TTL_S (sb_cmdid_ttl_ms).

    The judging (sb_cmdid_judge) works on a value's bytes, so that an actor
    whose reads go through its own layer (the run actor's pending writes)
    uses it as well as one that holds a transaction (sb_cmdid_find). */
#ifndef SB_STORE_CMDID_H
#define SB_STORE_CMDID_H

#include "store/store.h"
#include "common/digest.h"
#include "schemas/codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

//  How long a command_id is remembered, 24 h unless
//  SWITCHBOARD_COMMAND_TTL_S says otherwise (1 s to 365 days; another value is
//  ignored, with a warning in `actor`'s name).
#define SB_CMDID_TTL_S_DEFAULT  (24 * 3600)
#define SB_CMDID_TTL_S_MAX      (365 * 24 * 3600)
uint64_t sb_cmdid_ttl_ms (const char *actor);

typedef enum {
    SB_CMDID_NEW,           //  not remembered, expired or unreadable: carry it out
    SB_CMDID_REPLAY,        //  the same request: answer with the remembered reply
    SB_CMDID_OTHER_TYPE,    //  the id named a request of another type
    SB_CMDID_OTHER_BODY,    //  the id named another request of this type
} sb_cmdid_verdict_t;

//  What sb_cmdid_judge found. `reply` lives until sb_cmdid_found_done,
//  which every caller of sb_cmdid_judge or sb_cmdid_find calls once done.
typedef struct {
    char type [65];         //  the remembered request's type; "" when none
    const uint8_t *reply;
    size_t reply_len;
    uint64_t expires;       //  0 when nothing readable was found
    bool expired;           //  found, but past its time
    bool unreadable;        //  found, but not a remembered command
    sb_doc_t *doc;          //  holds the reply
} sb_cmdid_found_t;

void sb_cmdid_found_done (sb_cmdid_found_t *found);

//  The key of a remembered command: 'C', each of the `nscope` scope
//  strings, then the command_id. An invalid key (too long) is refused by
//  every txn operation (sb_key_valid).
void sb_cmdid_key (sb_key_t *k, const char *const *scope, size_t nscope, const char *cmd);

//  The digest of a request's body as the codec encodes it; -1 when out of
//  memory.
int sb_cmdid_digest_body (const sb_val_t *body, uint8_t out [SB_DIGEST_LEN]);

//  Encodes a remembered command's value into `e` (which is reset first).
void sb_cmdid_encode (sb_enc_t *e, const char *type, const uint8_t digest [SB_DIGEST_LEN],
                      const void *reply, size_t reply_len, uint64_t expires);

//  Judges a request (its type and digest) against the value remembered
//  under its command_id, at time `now` (ms since the epoch).
sb_cmdid_verdict_t sb_cmdid_judge (const void *val, size_t vlen, const char *type,
                                   const uint8_t digest [SB_DIGEST_LEN], uint64_t now,
                                   sb_cmdid_found_t *found);

//  The expiry row of command key `ckey` (as made by sb_cmdid_key).
void sb_cmdid_expiry_key (sb_key_t *k, uint64_t expires, const sb_key_t *ckey);

//  --------------------------------------------------------------------------
//  In a transaction

//  Looks `ckey` up in dbi `dbi` and judges it. An entry found expired is
//  deleted, with its expiry row in `dbi_expiry`, when the txn is a write
//  txn. Returns the verdict; `found` as sb_cmdid_judge's.
sb_cmdid_verdict_t sb_cmdid_find (sb_txn_t *txn, unsigned dbi, unsigned dbi_expiry,
                                  const sb_key_t *ckey, const char *type,
                                  const uint8_t digest [SB_DIGEST_LEN], uint64_t now,
                                  sb_cmdid_found_t *found);

//  Remembers a command under `ckey` until `expires`, with its expiry row.
//  `scratch` is an encoder the caller lends (reset here). Returns txn->ret.
int sb_cmdid_remember (sb_txn_t *txn, unsigned dbi, unsigned dbi_expiry, const sb_key_t *ckey,
                       const char *type, const uint8_t digest [SB_DIGEST_LEN],
                       const void *reply, size_t reply_len, uint64_t expires, sb_enc_t *scratch);

//  Calls `fn` with the command key and the expiry key of each row of
//  `dbi_expiry` that expired at or before `now`, oldest first, at most
//  `max` of them. Sets *next to the earliest expiry left after them (0:
//  none). Returns how many were passed to `fn`; a txn error stays sticky.
//  `ckey` is invalid (length 0) for an expiry row that names no command.
//  `fn` must not write to `dbi_expiry` (a cursor is open on it): collect
//  the keys, and delete them after the walk (sb_cmdid_sweep does).
typedef void (sb_cmdid_expired_fn) (const sb_key_t *ckey, const sb_datum_t *ekey, void *ctx);
size_t sb_cmdid_expired (sb_txn_t *txn, unsigned dbi_expiry, uint64_t now, size_t max,
                         uint64_t *next, sb_cmdid_expired_fn *fn, void *ctx);

//  The sweep in a write txn: deletes at most `max` expired commands and
//  their expiry rows (`dbi_expiry` may be `dbi`). Returns how many; *next
//  as sb_cmdid_expired's, or when the sweep stopped at `max`, the expiry
//  of the first row left.
size_t sb_cmdid_sweep (sb_txn_t *txn, unsigned dbi, unsigned dbi_expiry, uint64_t now, size_t max,
                       uint64_t *next);

#endif

/*  bus/outq.h — byte accounts of what ZeroMQ still holds for a peer.

    ZeroMQ's high-water marks count messages, not bytes, so a peer that
    never reads can pin HWM times the largest message (docs/operations.md,
    bounded queues). The broker hands every outgoing body to ZeroMQ as a
    zero-copy message whose free callback credits an account: ZeroMQ calls
    it once the bytes are written to the kernel, or when the peer's pipe
    is torn down because the peer went away. So an account's `held` is
    exactly what ZeroMQ keeps in memory for that peer, and the broker
    checks it before it sends.

    Threads: accounts are created, looked up and swept only on the
    broker's thread. The free callback runs on a ZeroMQ I/O thread (or on
    the receiving actor's thread for inproc peers); it touches only the
    account's atomics, and the account lives until its last message is
    released. */
#ifndef SB_BUS_OUTQ_H
#define SB_BUS_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <zmq.h>

/*  Charged per message on top of its frames: ZeroMQ's own bookkeeping
    (the pipe's slots and the shared content block). */
#define SB_OUTQ_MSG_OVERHEAD 256

typedef struct sb_outq sb_outq_t;
typedef struct sb_outq_acct sb_outq_acct_t;

/*  A table of accounts keyed by a string (the peer's routing id in hex).
    Returns NULL on failure. */
sb_outq_t *sb_outq_new (void);
/*  Accounts still charged outlive the table: their last release frees
    them. */
void sb_outq_destroy (sb_outq_t **outq_p);

/*  The account for `key`, created on first use; NULL when out of memory.
    Owned by the table. */
sb_outq_acct_t *sb_outq_get (sb_outq_t *outq, const char *key);
/*  Forgets accounts that hold nothing (their peers drained or left).
    Returns how many remain. */
size_t sb_outq_sweep (sb_outq_t *outq);
/*  Bytes held over every account of the table (kept as the accounts are
    charged: no walk). */
size_t sb_outq_held_total (sb_outq_t *outq);
/*  True when `charge` more bytes stay within `limit` for the table as a
    whole (sb_outq_fits of its sum): the bound across all peers. */
bool sb_outq_fits_total (sb_outq_t *outq, size_t charge, size_t limit);

/*  A stand-alone account (the event plane's and the tap's, which fan out
    one message to every subscriber, so are one account each). Returns
    NULL on failure; destroy drops the caller's reference. */
sb_outq_acct_t *sb_outq_acct_new (void);
void sb_outq_acct_destroy (sb_outq_acct_t **acct_p);

/*  Bytes ZeroMQ holds for the account now. */
size_t sb_outq_held (const sb_outq_acct_t *acct);

/*  True when `charge` more bytes stay within `limit`. An account that
    holds nothing always takes one message, so the largest message the
    schemas allow still goes to an idle peer. */
bool sb_outq_fits (const sb_outq_acct_t *acct, size_t charge, size_t limit);

/*  Initialises msg with a copy of data[0..len), charges `charge` bytes
    (len plus whatever else goes with it) to acct until ZeroMQ releases the
    message. The caller sends msg or closes it; either way the charge is
    returned exactly once. Returns 0, or -1 when out of memory (msg is then
    not initialised and nothing is charged). */
int sb_outq_msg (sb_outq_acct_t *acct, zmq_msg_t *msg, const void *data, size_t len, size_t charge);

/*  The same for a frame the broker received: msg shares src's content
    (ZeroMQ's reference count, no copy of the bytes) and charges `charge`
    until ZeroMQ releases msg; src stays the caller's. Returns 0, or -1
    when out of memory (msg not initialised, nothing charged). */
int sb_outq_msg_ref (sb_outq_acct_t *acct, zmq_msg_t *msg, zmq_msg_t *src, size_t charge);

#endif

/*  bus/envelope.h — the message header (docs/protocol.md) and ULID ids.

    The header is a msgpack map; sb_header_t holds it in fixed buffers so a
    parsed header can be copied, kept and answered without allocating. */
#ifndef SB_ENVELOPE_H
#define SB_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "schemas/codec.h"

#define SB_ULID_LEN 26

/*  Heartbeats go both ways every second; 3 missed ones mean dead. */
#define SB_HEARTBEAT_MS     1000
#define SB_HEARTBEAT_MISSES 3

typedef struct {
    char type [65];
    char id [33];
    char corr [33];
    char from [129];
    char key [129];
    char trace [129];
    char to [129];
    uint64_t ts;
    uint64_t deadline;
    uint64_t seq;
} sb_header_t;

/*  Writes a new ULID (26 characters + NUL). Monotonic within a thread. */
void sb_ulid_new (char out [SB_ULID_LEN + 1]);
/*  True when s is 26 Crockford base32 characters. */
bool sb_ulid_valid (const char *s);
/*  True when s is 1 to 26 Crockford base32 characters that can begin a
    ULID: the id_prefix filter of session.list and run.list. */
bool sb_ulid_prefix_valid (const char *s);

/*  Fills a header for a new message: type, fresh id, ts, from. */
void sb_header_init (sb_header_t *h, const char *type, const char *from);

/*  Encodes the header as a msgpack map into enc (which it resets first). */
void sb_header_encode (const sb_header_t *h, sb_enc_t *enc);

/*  Validates and parses header bytes. Allocates nothing. */
int sb_header_parse (const uint8_t *buf, size_t len, sb_header_t *h, sb_verr_t *err);

/*  The service of a type: its prefix before the first dot. Returns the
    prefix length (0 when the type has no dot). */
size_t sb_type_service (const char *type, const char **service);

/*  True when type ends with suffix (".ok", ".chunk"). */
bool sb_type_has_suffix (const char *type, const char *suffix);

#endif

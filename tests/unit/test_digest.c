/*  tests/unit/test_digest.c — the request digest behind command_id
    idempotency (common/digest.h): BLAKE2b-256, the same in pieces as in
    one. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/digest.h"

static void
s_hex (const uint8_t *d, char *out)
{
    for (int i = 0; i < SB_DIGEST_LEN; i++)
        sprintf (out + 2 * i, "%02x", d [i]);
}

Test (digest, known_vectors)
{
    uint8_t d [SB_DIGEST_LEN];
    char hex [2 * SB_DIGEST_LEN + 1];
    cr_assert_eq (sb_digest_of ("abc", 3, d), 0);
    s_hex (d, hex);
    cr_assert_str_eq (hex, "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319");
    cr_assert_eq (sb_digest_of ("", 0, d), 0);
    s_hex (d, hex);
    cr_assert_str_eq (hex, "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
}

Test (digest, pieces_equal_one_buffer)
{
    static uint8_t buf [100000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf [i] = (uint8_t) (i * 7);
    uint8_t one [SB_DIGEST_LEN], parts [SB_DIGEST_LEN];
    cr_assert_eq (sb_digest_of (buf, sizeof buf, one), 0);
    sb_digest_t *d = sb_digest_new ();
    cr_assert_not_null (d);
    sb_digest_update (d, buf, 1);
    sb_digest_update (d, buf + 1, 4095);
    sb_digest_update (d, buf + 4096, sizeof buf - 4096);
    sb_digest_final (d, parts);
    sb_digest_destroy (&d);
    cr_assert_null (d);
    sb_digest_destroy (&d);
    cr_assert_eq (memcmp (one, parts, sizeof one), 0);
}

//  An outbox command_id's random part: 32 lowercase hex digits, never the
//  same twice.
Test (digest, nonce_is_hex_and_fresh)
{
    char a [SB_NONCE_HEX + 1], b [SB_NONCE_HEX + 1];
    sb_nonce_hex (a);
    sb_nonce_hex (b);
    cr_assert_eq (strlen (a), SB_NONCE_HEX);
    cr_assert_eq (strspn (a, "0123456789abcdef"), SB_NONCE_HEX);
    cr_assert_str_neq (a, b);
}

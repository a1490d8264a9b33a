/*  tests/unit/test_cmdid.c — remembered command_ids (store/cmdid.h),
    against real LMDB in a mkdtemp folder: remember and replay, the two
    kinds of reuse, expiry, and the bounded sweep with the expiry rows in
    their own dbi and in the commands' dbi. */
#include "store/cmdid.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DBI_C, DBI_E };

static sb_store_t *
s_open (char *dir)
{
    cr_assert_not_null (mkdtemp (dir));
    static const char *dbis [] = { "commands", "expiry", NULL };
    char err [256];
    sb_store_t *store = sb_store_open (dir, dbis, 1, 0, err, sizeof err);
    cr_assert_not_null (store, "%s", err);
    return store;
}

typedef struct {
    const sb_key_t *key;
    const uint8_t *digest;
    const char *reply;
    uint64_t expires;
    unsigned dbi_e;
} put_t;

static int
s_put_fn (sb_txn_t *txn, void *arg)
{
    put_t *p = arg;
    sb_enc_t *e = sb_enc_new ();
    int rc = sb_cmdid_remember (txn, DBI_C, p->dbi_e, p->key, "session.create", p->digest, p->reply,
                                strlen (p->reply), p->expires, e);
    sb_enc_destroy (&e);
    return rc;
}

static sb_cmdid_verdict_t
s_find (sb_store_t *store, const sb_key_t *k, const char *type, const uint8_t *digest, uint64_t now,
        char *reply, size_t n)
{
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (store, &txn, false), 0);
    sb_cmdid_found_t f;
    sb_cmdid_verdict_t v = sb_cmdid_find (&txn, DBI_C, DBI_E, k, type, digest, now, &f);
    if (reply)
        snprintf (reply, n, "%.*s", (int) f.reply_len, f.reply ? (const char *) f.reply : "");
    sb_cmdid_found_done (&f);
    sb_txn_abort (&txn);
    return v;
}

Test (cmdid, remember_and_judge)
{
    char dir [] = "/tmp/sbcmdXXXXXX";
    sb_store_t *store = s_open (dir);
    const char *scope [] = { "S1", "" };
    sb_key_t k, other;
    sb_cmdid_key (&k, scope, 2, "cmd-1");
    sb_cmdid_key (&other, scope, 1, "cmd-1");
    uint8_t d1 [SB_DIGEST_LEN], d2 [SB_DIGEST_LEN];
    cr_assert_eq (sb_digest_of ("one", 3, d1), 0);
    cr_assert_eq (sb_digest_of ("two", 3, d2), 0);
    put_t p = { &k, d1, "the reply", 5000, DBI_E };
    cr_assert_eq (sb_store_write (store, s_put_fn, &p), 0);

    char reply [64];
    cr_assert_eq (s_find (store, &k, "session.create", d1, 1000, reply, sizeof reply), SB_CMDID_REPLAY);
    cr_assert_str_eq (reply, "the reply");
    cr_assert_eq (s_find (store, &k, "session.create", d2, 1000, NULL, 0), SB_CMDID_OTHER_BODY);
    cr_assert_eq (s_find (store, &k, "session.update", d1, 1000, NULL, 0), SB_CMDID_OTHER_TYPE);
    //  another scope is another command; past its time it is forgotten
    cr_assert_eq (s_find (store, &other, "session.create", d1, 1000, NULL, 0), SB_CMDID_NEW);
    cr_assert_eq (s_find (store, &k, "session.create", d1, 5000, NULL, 0), SB_CMDID_NEW);
    sb_store_destroy (&store);
}

typedef struct {
    unsigned dbi_e;
    uint64_t now;
    size_t max, removed;
    uint64_t next;
} sweep_t;

static int
s_sweep_fn (sb_txn_t *txn, void *arg)
{
    sweep_t *sw = arg;
    sw->removed = sb_cmdid_sweep (txn, DBI_C, sw->dbi_e, sw->now, sw->max, &sw->next);
    return 0;
}

static void
s_sweep_case (unsigned dbi_e)
{
    char dir [] = "/tmp/sbcmdXXXXXX";
    sb_store_t *store = s_open (dir);
    uint8_t d [SB_DIGEST_LEN];
    cr_assert_eq (sb_digest_of ("one", 3, d), 0);
    //  100 commands, expiring at 1000, 1001, ... 1099
    for (int i = 0; i < 100; i++) {
        char cmd [16];
        snprintf (cmd, sizeof cmd, "cmd-%d", i);
        const char *scope [] = { "S1" };
        sb_key_t k;
        sb_cmdid_key (&k, scope, 1, cmd);
        put_t p = { &k, d, "r", 1000 + (uint64_t) i, dbi_e };
        cr_assert_eq (sb_store_write (store, s_put_fn, &p), 0);
    }
    //  bounded: 40 of the 50 expired by 1050, then the other 10
    sweep_t sw = { dbi_e, 1049, 40, 0, 0 };
    cr_assert_eq (sb_store_write (store, s_sweep_fn, &sw), 0);
    cr_assert_eq (sw.removed, 40);
    cr_assert_eq (sw.next, 1040);
    sw.max = 1000;
    cr_assert_eq (sb_store_write (store, s_sweep_fn, &sw), 0);
    cr_assert_eq (sw.removed, 10);
    cr_assert_eq (sw.next, 1050);
    sb_store_info_t info;
    cr_assert_eq (sb_store_info (store, &info), 0);
    if (dbi_e == DBI_E)
        cr_assert (info.entries [DBI_C] == 50 && info.entries [DBI_E] == 50);
    else
        cr_assert_eq (info.entries [DBI_C], 100);
    //  what is left is still there, the swept ones are gone
    const char *scope [] = { "S1" };
    sb_key_t k;
    sb_cmdid_key (&k, scope, 1, "cmd-60");
    cr_assert_eq (s_find (store, &k, "session.create", d, 1049, NULL, 0), SB_CMDID_REPLAY);
    sb_cmdid_key (&k, scope, 1, "cmd-10");
    cr_assert_eq (s_find (store, &k, "session.create", d, 0, NULL, 0), SB_CMDID_NEW);
    sw.now = 5000;
    cr_assert_eq (sb_store_write (store, s_sweep_fn, &sw), 0);
    cr_assert_eq (sw.removed, 50);
    cr_assert_eq (sw.next, 0);
    cr_assert_eq (sb_store_info (store, &info), 0);
    cr_assert_eq (info.entries [DBI_C] + info.entries [DBI_E], 0);
    sb_store_destroy (&store);
}

Test (cmdid, sweep_own_dbi)
{
    s_sweep_case (DBI_E);
}

Test (cmdid, sweep_shared_dbi)
{
    s_sweep_case (DBI_C);
}

//  SWITCHBOARD_COMMAND_TTL_S has a declared range: 1 s to 365 days; a value
//  outside it, or not a number, leaves the default.
Test (cmdid, ttl_has_a_declared_range)
{
    const uint64_t def = (uint64_t) SB_CMDID_TTL_S_DEFAULT * 1000;
    unsetenv ("SWITCHBOARD_COMMAND_TTL_S");
    cr_assert_eq (sb_cmdid_ttl_ms ("test"), def);
    setenv ("SWITCHBOARD_COMMAND_TTL_S", "60", 1);
    cr_assert_eq (sb_cmdid_ttl_ms ("test"), 60000);
    setenv ("SWITCHBOARD_COMMAND_TTL_S", "31536000", 1);
    cr_assert_eq (sb_cmdid_ttl_ms ("test"), 31536000ull * 1000);
    const char *bad [] = { "0", "-5", "31536001", "99999999999999999999", "12x", " 7" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        setenv ("SWITCHBOARD_COMMAND_TTL_S", bad [i], 1);
        cr_assert_eq (sb_cmdid_ttl_ms ("test"), def, "%s", bad [i]);
    }
    unsetenv ("SWITCHBOARD_COMMAND_TTL_S");
}

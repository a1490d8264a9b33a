/*  tests/unit/test_outbox.c — the outbox's book (store/outbox.h),
    against real LMDB in a mkdtemp folder: one append in flight per
    session, `acked` past the entries that landed, retries and drops, the
    in-flight cap, and what a `fenced` refusal means. */
#include "store/outbox.h"
#include "schemas/codec.h"
#include "schemas/errors.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t n;
    const char *session;
} put_t;

static int
s_put_fn (sb_txn_t *txn, void *arg)
{
    put_t *p = arg;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", p->session);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_key_t k;
    sb_outbox_key (&k, p->n);
    sb_txn_put (txn, 0, k.buf, k.len, data, len);
    sb_enc_destroy (&e);
    return txn->ret;
}

static sb_store_t *
s_open (char *dir, const char *const *sessions, size_t n)
{
    cr_assert_not_null (mkdtemp (dir));
    static const char *dbis [] = { "outbox", NULL };
    char err [256];
    sb_store_t *store = sb_store_open (dir, dbis, 1, 0, err, sizeof err);
    cr_assert_not_null (store, "%s", err);
    for (size_t i = 0; i < n; i++) {
        put_t p = { i + 1, sessions [i] };
        cr_assert_eq (sb_store_write (store, s_put_fn, &p), 0);
    }
    return store;
}

static size_t
s_take (sb_outbox_t *ob, uint64_t *ns, size_t max)
{
    sb_outbox_entry_t out [8];
    size_t n = sb_outbox_take (ob, out, max);
    for (size_t i = 0; i < n; i++) {
        ns [i] = out [i].n;
        free (out [i].body);
    }
    return n;
}

Test (outbox, one_per_session_and_acked)
{
    char dir [] = "/tmp/sbobXXXXXX";
    const char *sessions [] = { "A", "A", "B" };
    sb_store_t *store = s_open (dir, sessions, 3);
    cr_assert_eq (sb_outbox_last_stored (store, 0), 3);
    sb_outbox_t *ob = sb_outbox_new (store, 0, 32, false);
    sb_outbox_durable (ob, 3);
    uint64_t ns [8];
    //  1 and 3 go; 2 waits for 1, of the same session
    cr_assert_eq (s_take (ob, ns, 8), 2);
    cr_assert (ns [0] == 1 && ns [1] == 3);
    cr_assert_eq (sb_outbox_inflight (ob), 2);
    cr_assert_eq (sb_outbox_answered (ob, 3, true, SB_OK), SB_OUTBOX_LANDED);
    cr_assert_eq (s_take (ob, ns, 8), 0);
    cr_assert_eq (sb_outbox_acked (ob), 0, "1 has not landed");
    //  a retryable refusal sends 1 again; a final one drops it
    cr_assert_eq (sb_outbox_answered (ob, 1, true, SB_E_internal), SB_OUTBOX_RETRY);
    cr_assert_eq (s_take (ob, ns, 8), 1);
    cr_assert_eq (ns [0], 1);
    cr_assert_eq (sb_outbox_answered (ob, 1, true, SB_E_not_found), SB_OUTBOX_DROPPED);
    cr_assert_eq (sb_outbox_delete (ob, 1), 0);
    cr_assert_eq (s_take (ob, ns, 8), 1);
    cr_assert_eq (ns [0], 2);
    cr_assert_eq (sb_outbox_acked (ob), 1);
    //  no answer: sent again
    cr_assert_eq (sb_outbox_answered (ob, 2, false, 0), SB_OUTBOX_RETRY);
    cr_assert_eq (s_take (ob, ns, 8), 1);
    cr_assert_eq (sb_outbox_answered (ob, 2, true, SB_OK), SB_OUTBOX_LANDED);
    //  landed but not yet deleted: acked moves past both all the same
    cr_assert_eq (s_take (ob, ns, 8), 0);
    cr_assert_eq (sb_outbox_acked (ob), 3);
    cr_assert_not (sb_outbox_idle (ob));
    cr_assert_eq (sb_outbox_delete (ob, 2), 0);
    cr_assert_eq (sb_outbox_delete (ob, 3), 0);
    cr_assert_eq (s_take (ob, ns, 8), 0);
    cr_assert (sb_outbox_idle (ob));
    sb_outbox_durable (ob, 4);
    cr_assert_not (sb_outbox_idle (ob));
    sb_outbox_destroy (&ob);
    sb_store_destroy (&store);
}

Test (outbox, one_in_flight_and_fenced)
{
    char dir [] = "/tmp/sbobXXXXXX";
    const char *sessions [] = { "A", "B" };
    sb_store_t *store = s_open (dir, sessions, 2);
    sb_outbox_t *ob = sb_outbox_new (store, 0, 1, true);
    uint64_t ns [8];
    //  oldest first, one at a time, whatever the sessions
    cr_assert_eq (s_take (ob, ns, 8), 1);
    cr_assert_eq (ns [0], 1);
    cr_assert_eq (s_take (ob, ns, 8), 0);
    cr_assert_eq (sb_outbox_answered (ob, 1, true, SB_E_fenced), SB_OUTBOX_DROPPED);
    cr_assert_eq (s_take (ob, ns, 8), 1);
    cr_assert_eq (ns [0], 2);
    sb_outbox_destroy (&ob);
    //  without fenced_final, fenced is retried
    ob = sb_outbox_new (store, 0, 1, false);
    cr_assert_eq (s_take (ob, ns, 8), 1);
    cr_assert_eq (sb_outbox_answered (ob, ns [0], true, SB_E_fenced), SB_OUTBOX_RETRY);
    sb_outbox_destroy (&ob);
    sb_store_destroy (&store);
}

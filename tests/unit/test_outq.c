/*  tests/unit/test_outq.c — byte accounts of what ZeroMQ holds for a peer
    (bus/outq.h): a charge lasts exactly as long as ZeroMQ keeps the
    message, whether it is delivered, never sent, or dropped with its
    peer; an idle account always takes one message; the table forgets
    idle accounts, and a charged one outlives the table. */
#include <criterion/criterion.h>
#include <czmq.h>
#include <string.h>

#include "bus/outq.h"

Test (outq, charge_lasts_until_the_message_is_released)
{
    sb_outq_acct_t *a = sb_outq_acct_new ();
    cr_assert_not_null (a);
    zmq_msg_t m;
    cr_assert_eq (sb_outq_msg (a, &m, "hello", 5, 5 + SB_OUTQ_MSG_OVERHEAD), 0);
    cr_assert_eq (zmq_msg_size (&m), 5);
    cr_assert_eq (memcmp (zmq_msg_data (&m), "hello", 5), 0);
    cr_assert_eq (sb_outq_held (a), 5 + SB_OUTQ_MSG_OVERHEAD);
    /* a copy shares the content: the charge stays until both are gone */
    zmq_msg_t c;
    zmq_msg_init (&c);
    zmq_msg_copy (&c, &m);
    zmq_msg_close (&m);
    cr_assert_eq (sb_outq_held (a), 5 + SB_OUTQ_MSG_OVERHEAD);
    zmq_msg_close (&c);
    cr_assert_eq (sb_outq_held (a), 0);
    sb_outq_acct_destroy (&a);
    cr_assert_null (a);
}

Test (outq, fits_within_the_limit_and_an_idle_account_takes_one)
{
    sb_outq_acct_t *a = sb_outq_acct_new ();
    /* idle: even a message larger than the limit goes */
    cr_assert (sb_outq_fits (a, 10000, 1000));
    zmq_msg_t m;
    cr_assert_eq (sb_outq_msg (a, &m, "x", 1, 600), 0);
    cr_assert (sb_outq_fits (a, 400, 1000));
    cr_assert_not (sb_outq_fits (a, 401, 1000));
    cr_assert_not (sb_outq_fits (a, (size_t) -1, 1000));
    zmq_msg_close (&m);
    cr_assert (sb_outq_fits (a, 401, 1000));
    sb_outq_acct_destroy (&a);
}

Test (outq, delivered_over_inproc_and_released_by_the_reader)
{
    zsock_t *out = zsock_new_pair ("@inproc://outq-test");
    zsock_t *in = zsock_new_pair (">inproc://outq-test");
    cr_assert (out && in);
    sb_outq_acct_t *a = sb_outq_acct_new ();
    char body [4096];
    memset (body, 'b', sizeof body);
    for (int k = 0; k < 10; k++) {
        zmq_msg_t m;
        cr_assert_eq (sb_outq_msg (a, &m, body, sizeof body, sizeof body), 0);
        cr_assert_eq (zmq_msg_send (&m, zsock_resolve (out), 0), (int) sizeof body);
    }
    cr_assert_eq (sb_outq_held (a), 10 * sizeof body);
    for (int k = 0; k < 10; k++) {
        zmq_msg_t m;
        zmq_msg_init (&m);
        cr_assert_eq (zmq_msg_recv (&m, zsock_resolve (in), 0), (int) sizeof body);
        zmq_msg_close (&m);
        cr_assert_eq (sb_outq_held (a), (size_t) (9 - k) * sizeof body);
    }
    sb_outq_acct_destroy (&a);
    zsock_destroy (&in);
    zsock_destroy (&out);
}

Test (outq, a_dropped_peer_returns_its_bytes)
{
    zsock_t *out = zsock_new_pair ("@inproc://outq-drop");
    zsock_t *in = zsock_new_pair (">inproc://outq-drop");
    sb_outq_acct_t *a = sb_outq_acct_new ();
    zmq_msg_t m;
    cr_assert_eq (sb_outq_msg (a, &m, "unread", 6, 100), 0);
    cr_assert_eq (zmq_msg_send (&m, zsock_resolve (out), 0), 6);
    cr_assert_eq (sb_outq_held (a), 100);
    /* the account outlives its owner's reference while ZeroMQ holds bytes */
    sb_outq_acct_destroy (&a);
    zsock_destroy (&in);
    zsock_destroy (&out);       /* libzmq frees the unread message: no leak under ASan */
}

Test (outq, the_table_forgets_idle_accounts_and_charged_ones_outlive_it)
{
    sb_outq_t *q = sb_outq_new ();
    cr_assert_not_null (q);
    sb_outq_acct_t *a = sb_outq_get (q, "aa");
    sb_outq_acct_t *b = sb_outq_get (q, "bb");
    cr_assert (a && b && a != b);
    cr_assert_eq (sb_outq_get (q, "aa"), a);
    zmq_msg_t m;
    cr_assert_eq (sb_outq_msg (a, &m, "x", 1, 50), 0);
    cr_assert_eq (sb_outq_held_total (q), 50);
    cr_assert_eq (sb_outq_sweep (q), 1);        /* bb was idle */
    cr_assert_eq (sb_outq_get (q, "aa"), a);
    sb_outq_destroy (&q);
    cr_assert_null (q);
    /* a is still alive for the message ZeroMQ holds */
    cr_assert_eq (sb_outq_held (a), 50);
    zmq_msg_close (&m);         /* frees a: ASan reports a leak or a use after free otherwise */
}

Test (outq, the_table_sums_its_accounts_and_bounds_their_total)
{
    sb_outq_t *q = sb_outq_new ();
    cr_assert_not_null (q);
    sb_outq_acct_t *a = sb_outq_get (q, "aa");
    sb_outq_acct_t *b = sb_outq_get (q, "bb");
    zmq_msg_t ma, mb;
    cr_assert_eq (sb_outq_msg (a, &ma, "x", 1, 600), 0);
    cr_assert_eq (sb_outq_msg (b, &mb, "y", 1, 300), 0);
    cr_assert_eq (sb_outq_held_total (q), 900);
    /* each account is within a bound of 1,000, their sum is not */
    cr_assert (sb_outq_fits (b, 200, 1000));
    cr_assert_not (sb_outq_fits_total (q, 200, 1000));
    cr_assert (sb_outq_fits_total (q, 100, 1000));
    zmq_msg_close (&ma);
    cr_assert_eq (sb_outq_held_total (q), 300);
    cr_assert (sb_outq_fits_total (q, 200, 1000));
    /* the sum outlives the table while an account still holds bytes */
    sb_outq_destroy (&q);
    cr_assert_eq (sb_outq_held (b), 300);
    zmq_msg_close (&mb);        /* frees b, then the sum: ASan reports a leak otherwise */
}

/*  bus/outq.c — byte accounts of what ZeroMQ still holds for a peer
    (see bus/outq.h for the threads that reach this file). */
#include "bus/outq.h"

#include <czmq.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct sb_outq_acct {
    atomic_size_t held;         /* bytes charged and not yet released */
    atomic_size_t refs;         /* the table's or owner's, plus one per message */
    struct sb_outq_acct *sum;   /* a table's account: the table's sum, charged too
                                   (one reference, dropped with the last of ours) */
};

struct sb_outq {
    zhashx_t *accts;            /* key -> sb_outq_acct_t * (one reference each) */
    sb_outq_acct_t *sum;        /* what every account of the table holds */
};

/*  The block behind one message's body: the token, then the bytes. The
    token is what the free callback gets as its hint. */
typedef struct {
    sb_outq_acct_t *acct;
    size_t charge;
    max_align_t align [];       /* the body starts here, aligned */
} s_token_t;

/*  A message that shares a received frame's content instead of copying
    it: the token holds a reference to the frame until ZeroMQ releases
    the message. */
typedef struct {
    sb_outq_acct_t *acct;
    size_t charge;
    zmq_msg_t held;
} s_ref_t;

static void
s_acct_unref (sb_outq_acct_t *acct)
{
    if (acct && atomic_fetch_sub_explicit (&acct->refs, 1, memory_order_acq_rel) == 1) {
        s_acct_unref (acct->sum);
        free (acct);
    }
}

//  Charges (or, negative, releases) bytes on an account and its table's sum.
static void
s_charge (sb_outq_acct_t *acct, size_t charge, bool add)
{
    for (sb_outq_acct_t *a = acct; a; a = a->sum)
        if (add)
            atomic_fetch_add_explicit (&a->held, charge, memory_order_relaxed);
        else
            atomic_fetch_sub_explicit (&a->held, charge, memory_order_relaxed);
}

static void
s_acct_destructor (void **item)
{
    s_acct_unref (*item);
    *item = NULL;
}

sb_outq_acct_t *
sb_outq_acct_new (void)
{
    sb_outq_acct_t *acct = calloc (1, sizeof *acct);
    if (acct) {
        atomic_init (&acct->held, 0);
        atomic_init (&acct->refs, 1);
    }
    return acct;
}

void
sb_outq_acct_destroy (sb_outq_acct_t **acct_p)
{
    if (acct_p && *acct_p) {
        s_acct_unref (*acct_p);
        *acct_p = NULL;
    }
}

sb_outq_t *
sb_outq_new (void)
{
    sb_outq_t *outq = calloc (1, sizeof *outq);
    if (!outq)
        return NULL;
    outq->accts = zhashx_new ();
    outq->sum = sb_outq_acct_new ();
    if (!outq->accts || !outq->sum) {
        zhashx_destroy (&outq->accts);
        s_acct_unref (outq->sum);
        free (outq);
        return NULL;
    }
    zhashx_set_destructor (outq->accts, s_acct_destructor);
    return outq;
}

void
sb_outq_destroy (sb_outq_t **outq_p)
{
    if (outq_p && *outq_p) {
        zhashx_destroy (&(*outq_p)->accts);
        s_acct_unref ((*outq_p)->sum);
        free (*outq_p);
        *outq_p = NULL;
    }
}

sb_outq_acct_t *
sb_outq_get (sb_outq_t *outq, const char *key)
{
    sb_outq_acct_t *acct = zhashx_lookup (outq->accts, key);
    if (acct)
        return acct;
    acct = sb_outq_acct_new ();
    if (acct) {
        acct->sum = outq->sum;
        atomic_fetch_add_explicit (&outq->sum->refs, 1, memory_order_relaxed);
    }
    if (acct && zhashx_insert (outq->accts, key, acct) != 0) {
        s_acct_unref (acct);
        acct = NULL;
    }
    return acct;
}

size_t
sb_outq_sweep (sb_outq_t *outq)
{
    zlistx_t *idle = zlistx_new ();
    if (!idle)
        return zhashx_size (outq->accts);
    for (sb_outq_acct_t *a = zhashx_first (outq->accts); a; a = zhashx_next (outq->accts))
        if (atomic_load_explicit (&a->held, memory_order_relaxed) == 0)
            zlistx_add_end (idle, (void *) zhashx_cursor (outq->accts));
    for (const char *key = zlistx_first (idle); key; key = zlistx_next (idle))
        zhashx_delete (outq->accts, key);
    zlistx_destroy (&idle);
    return zhashx_size (outq->accts);
}

size_t
sb_outq_held_total (sb_outq_t *outq)
{
    return sb_outq_held (outq->sum);
}

bool
sb_outq_fits_total (sb_outq_t *outq, size_t charge, size_t limit)
{
    return sb_outq_fits (outq->sum, charge, limit);
}

size_t
sb_outq_held (const sb_outq_acct_t *acct)
{
    return atomic_load_explicit (&((sb_outq_acct_t *) acct)->held, memory_order_relaxed);
}

bool
sb_outq_fits (const sb_outq_acct_t *acct, size_t charge, size_t limit)
{
    size_t held = sb_outq_held (acct);
    return held == 0 || (charge <= limit && held <= limit - charge);
}

/*  ZeroMQ's free callback: on an I/O thread, or the thread that closed
    the message. Touches only the account's atomics. */
static void
s_release (void *data, void *hint)
{
    (void) data;
    s_token_t *token = hint;
    s_charge (token->acct, token->charge, false);
    s_acct_unref (token->acct);
    free (token);
}

int
sb_outq_msg (sb_outq_acct_t *acct, zmq_msg_t *msg, const void *data, size_t len, size_t charge)
{
    s_token_t *token = malloc (sizeof *token + (len ? len : 1));
    if (!token)
        return -1;
    token->acct = acct;
    token->charge = charge;
    uint8_t *body = (uint8_t *) token->align;
    if (len)
        memcpy (body, data, len);
    atomic_fetch_add_explicit (&acct->refs, 1, memory_order_relaxed);
    s_charge (acct, charge, true);
    if (zmq_msg_init_data (msg, body, len, s_release, token) != 0) {
        s_charge (acct, charge, false);
        s_acct_unref (acct);
        free (token);
        return -1;
    }
    return 0;
}

/*  The free callback of a shared frame: returns the charge and drops the
    reference (an atomic decrement on ZeroMQ's content block, which frees
    it with the last one). */
static void
s_release_ref (void *data, void *hint)
{
    (void) data;
    s_ref_t *ref = hint;
    s_charge (ref->acct, ref->charge, false);
    s_acct_unref (ref->acct);
    zmq_msg_close (&ref->held);
    free (ref);
}

int
sb_outq_msg_ref (sb_outq_acct_t *acct, zmq_msg_t *msg, zmq_msg_t *src, size_t charge)
{
    s_ref_t *ref = malloc (sizeof *ref);
    if (!ref)
        return -1;
    ref->acct = acct;
    ref->charge = charge;
    zmq_msg_init (&ref->held);
    if (zmq_msg_copy (&ref->held, src) != 0) {
        zmq_msg_close (&ref->held);
        free (ref);
        return -1;
    }
    atomic_fetch_add_explicit (&acct->refs, 1, memory_order_relaxed);
    s_charge (acct, charge, true);
    if (zmq_msg_init_data (msg, zmq_msg_data (&ref->held), zmq_msg_size (&ref->held), s_release_ref, ref) != 0) {
        s_charge (acct, charge, false);
        s_acct_unref (acct);
        zmq_msg_close (&ref->held);
        free (ref);
        return -1;
    }
    return 0;
}

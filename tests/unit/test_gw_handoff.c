/*  tests/unit/test_gw_handoff.c — the bound on the answers between the
    gateway's bus thread and its connections' thread (gateway/gateway.c,
    gw_handoff_charge): what is on its way never passes --http-out-total,
    a small answer (an error) always goes, and what the connections'
    thread takes is counted out to the byte. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gateway_impl.h"

static gw_out_t *
s_answer (size_t len)
{
    char *text = malloc (len);
    cr_assert (text);
    memset (text, 'x', len);
    gw_out_t *out = calloc (1, sizeof *out);
    cr_assert (out);
    out->buf = gw_buf_new (text, len);
    free (text);
    return out;
}

Test (gw_handoff, holds_the_answers_on_their_way_to_the_bound)
{
    static sb_gateway_t gw;         /* big: not on the stack */
    gw.out_total = 100000;
    gw_out_t *outs [8];
    int taken = 0;
    for (int k = 0; k < 8; k++) {
        outs [k] = s_answer (30000);
        if (gw_handoff_charge (&gw, outs [k]))
            taken++;
    }
    cr_assert_eq (taken, 3, "%d answers of 30000 bytes charged under a bound of 100000", taken);
    cr_assert_eq (atomic_load (&gw.stats.handoff_bytes), 90000);
    cr_assert_eq (atomic_load (&gw.stats.handoff_peak), 90000);
    /* a small answer always goes, and is not counted */
    gw_out_t *err = s_answer (SB_GW_HANDOFF_SMALL);
    cr_assert (gw_handoff_charge (&gw, err));
    cr_assert_eq (atomic_load (&gw.stats.handoff_bytes), 90000);
    /* taken by the connections' thread: counted out, once */
    for (int k = 0; k < 8; k++) {
        gw_handoff_release (&gw, outs [k]);
        gw_handoff_release (&gw, outs [k]);
    }
    gw_handoff_release (&gw, err);
    cr_assert_eq (atomic_load (&gw.stats.handoff_bytes), 0);
    cr_assert_eq (atomic_load (&gw.stats.handoff_peak), 90000, "the peak is kept");
    /* room again */
    cr_assert (gw_handoff_charge (&gw, outs [0]));
    gw_handoff_release (&gw, outs [0]);
    for (int k = 0; k < 8; k++)
        gw_out_free (outs [k]);
    gw_out_free (err);
}

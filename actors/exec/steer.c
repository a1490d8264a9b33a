/*  actors/exec/steer.c — steers join a running run at its step boundaries.

    Before each model call (after the tape catch-up) the run asks the
    session actor for the steers a person sent it (session.steer.take).
    The session actor appends one prompt.steered entry per steer, in one
    transaction with their removal from the session's pending steers, and
    answers after its commit; the run then catches up again and its
    context builder makes each prompt.steered a user message
    (actors/exec/context.c). docs/queue.md tells the whole story. */
#include "actors/exec/agent.h"
#include "common/log.h"

#define ACTOR "exec"

uint64_t
sb_exec_steer_take (sb_exec_run_t *run)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return 0;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", run->session_id);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kuint (e, "fence", run->fence);
    //  the model call the steers join, counted from 1
    sb_enc_kuint (e, "step", atomic_load (&run->steps) + 1);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (run->bus, "session.steer.take", run->session_id, b, len, SB_EXEC_CALL_MS);
    sb_enc_destroy (&e);
    uint64_t taken = 0;
    //  A steer not taken now stays pending: the next boundary takes it,
    //  or the run's end gives it back to the queue. So a failure here
    //  costs the run nothing; a fenced run is stopped by its own appends.
    if (!reply || sb_msg_is_error (reply))
        sb_warn (ACTOR, "session.steer.take failed run=%s error=\"%s\"", run->run_id,
                 reply? sb_msg_error_message (reply): "no reply");
    else
        taken = sb_get_uint (reply->body, "taken", 0);
    sb_msg_destroy (&reply);
    if (taken)
        sb_info (ACTOR, "steered run=%s steers=%llu step=%llu", run->run_id, (unsigned long long) taken,
                 (unsigned long long) atomic_load (&run->steps) + 1);
    return taken;
}

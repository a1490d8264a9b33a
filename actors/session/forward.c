/*  actors/session/forward.c — a request for a session of a shard another
    node owns, forwarded to that node and its reply relayed
    (cluster/forward.c; docs/scale-out.md, "Forwarding").

    Every addressed row but the reads is forwarded: a request that changes
    a session. Reads (get, list, events...) are answered here, from the
    database. */
#include "actors/session/session_impl.h"

//  A forward taken here after all: as the actor's dispatch takes it.
static void
s_take (void *arg, sb_msg_t **msg_p, int tag)
{
    self_t *self = arg;
    if (sb_session_ops [tag].take)
        sb_session_ops [tag].take (self, msg_p);
    else
        sb_session_take (self, msg_p, (op_t) tag);
}

bool
sb_session_forward (self_t *self, sb_msg_t **msg_p, op_t op)
{
    const op_row_t *row = &sb_session_ops [op];
    if (!self->cluster || !(*msg_p)->route || !row->addressed || row->read)
        return false;
    if (!self->fwd)
        self->fwd = sb_forward_new (self->cluster, ACTOR, self->data_dir, self->instance, s_take, self);
    return sb_forward (self->fwd, self->bus, msg_p, sb_get_str ((*msg_p)->body, "session_id"), (int) op);
}

/*  cli/queue.h — `queue`, and `prompt` when its prompt waits (cli/queue.c). */
#ifndef SB_CLI_QUEUE_H
#define SB_CLI_QUEUE_H

#include "bus/client.h"

int sb_cmd_queue (int argc, char **argv);

/*  Prints a session.prompt.ok that started no run (queued, or a steer);
    with follow, waits until the prompt starts its run (or the steer joins
    the running one) and follows that run as `prompt --follow` does.
    Returns the exit code. */
int sb_queue_prompt_waits (sb_bus_t *bus, const char *connect, const char *data, bool json, bool follow,
                           const char *sid, const sb_val_t *reply);

#endif

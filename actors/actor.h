/*  actors/actor.h — what every actor is given at start.

    An actor is a czmq zactor: `void <name>_actor (zsock_t *pipe, void *args)`
    with args a sb_actor_args_t *. It signals 0 on its pipe once it is
    registered with the broker and ready, or 1 if it cannot start (having
    logged why), and then honours $TERM. */
#ifndef SB_ACTOR_H
#define SB_ACTOR_H

#include <czmq.h>

typedef struct {
    const char *cmd_endpoint;   /* broker command plane */
    const char *pub_endpoint;   /* broker XSUB side, for actors that publish */
    const char *sub_endpoint;   /* broker XPUB side, for actors that subscribe */
    const char *data_dir;       /* DATA, for actors that persist */
    const char *instance;       /* unique instance name */
    const void *config;         /* actor-specific configuration, or NULL */
} sb_actor_args_t;

typedef void (sb_actor_fn) (zsock_t *pipe, void *args);

/*  The test service: echo.ping, echo.stream, echo.note. */
void sb_echo_actor (zsock_t *pipe, void *args);

/*  Registers `bus` for `service` and signals the pipe; returns 0 when
    registered. Shared by every actor's startup. */
struct sb_bus;
int sb_actor_register (zsock_t *pipe, struct sb_bus *bus, const char *service,
                       const char *instance, const uint8_t *caps, size_t caps_len);

#endif

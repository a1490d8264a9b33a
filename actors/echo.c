/*  actors/echo.c — the test service: answers echo.ping, streams
    echo.stream, counts echo.note. Used by the bus tests and benchmarks. */
#include "actors/actor.h"
#include "bus/client.h"
#include "common/log.h"

#include <string.h>

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_enc_t *enc;
    char instance [129];
    uint64_t notes;
    bool terminated;
} self_t;

static self_t *
s_self_new (zsock_t *pipe, const sb_actor_args_t *args)
{
    self_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    snprintf (self->instance, sizeof self->instance, "%s", args->instance ? args->instance : "echo");
    self->bus = sb_bus_new (args->cmd_endpoint, self->instance);
    self->enc = sb_enc_new ();
    if (!self->bus || !self->enc) {
        sb_bus_destroy (&self->bus);
        sb_enc_destroy (&self->enc);
        free (self);
        return NULL;
    }
    return self;
}

static void
s_self_destroy (self_t **self_p)
{
    if (*self_p) {
        sb_bus_destroy (&(*self_p)->bus);
        sb_enc_destroy (&(*self_p)->enc);
        free (*self_p);
        *self_p = NULL;
    }
}

static void
s_handle_note (self_t *self, sb_msg_t *msg)
{
    self->notes++;
}

static void
s_handle_ping (self_t *self, sb_msg_t *msg)
{
    const char *text = sb_get_str (msg->body, "text");
    uint64_t sleep_ms = sb_get_uint (msg->body, "sleep_ms", 0);
    if (sleep_ms)
        zclock_sleep ((int) (sleep_ms > 10000 ? 10000 : sleep_ms));
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_kstr_opt (self->enc, "text", text);
    sb_enc_kstr (self->enc, "instance", self->instance);
    sb_enc_map_close (self->enc);
    size_t len;
    const uint8_t *b = sb_enc_data (self->enc, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

static void
s_handle_stream (self_t *self, sb_msg_t *msg)
{
    const char *text = sb_get_str (msg->body, "text");
    uint64_t count = sb_get_uint (msg->body, "count", 0);
    if (count > 100000) {
        sb_bus_error (self->bus, msg, SB_E_invalid, "count %llu is over 100000",
                      (unsigned long long) count);
        return;
    }
    for (uint64_t k = 0; k < count; k++) {
        sb_enc_reset (self->enc);
        sb_enc_map_open (self->enc);
        sb_enc_kuint (self->enc, "index", k);
        sb_enc_kstr_opt (self->enc, "text", text);
        sb_enc_map_close (self->enc);
        size_t len;
        const uint8_t *b = sb_enc_data (self->enc, &len);
        sb_bus_chunk (self->bus, msg, k + 1, b, len);
    }
    sb_enc_reset (self->enc);
    sb_enc_map_open (self->enc);
    sb_enc_kuint (self->enc, "count", count);
    sb_enc_map_close (self->enc);
    size_t len;
    const uint8_t *b = sb_enc_data (self->enc, &len);
    sb_bus_reply (self->bus, msg, b, len);
}

typedef void (s_handler_fn) (self_t *self, sb_msg_t *msg);

const sb_dispatch_t sb_echo_dispatch [] = {
    SB_DISPATCH ("echo.ping", s_handle_ping),
    SB_DISPATCH ("echo.stream", s_handle_stream),
    SB_DISPATCH ("echo.note", s_handle_note),
    SB_DISPATCH_END
};

static void
s_handle_request (self_t *self, sb_msg_t *msg)
{
    const sb_dispatch_t *row = sb_dispatch_find (sb_echo_dispatch, msg->h.type);
    if (row)
        ((s_handler_fn *) row->fn) (self, msg);
    else
        sb_bus_error (self->bus, msg, SB_E_unknown_type, "echo does not serve %s", msg->h.type);
}

void
sb_echo_actor (zsock_t *pipe, void *args)
{
    self_t *self = s_self_new (pipe, args);
    if (!self) {
        sb_actor_signal (pipe, 1);
        return;
    }
    if (sb_actor_register (pipe, self->bus, "echo", self->instance, NULL, 0)) {
        s_self_destroy (&self);
        return;
    }
    while (!self->terminated) {
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { sb_bus_socket (self->bus), 0, ZMQ_POLLIN, 0 },
        };
        long wait = sb_bus_has_queued (self->bus) ? 0 : (long) sb_bus_tick (self->bus);
        if (zmq_poll (items, 2, wait) < 0 && errno != EINTR)
            break;
        if ((items [0].revents & ZMQ_POLLIN) && sb_actor_pipe_term (pipe))
            self->terminated = true;
        sb_msg_t *msg;
        while ((msg = sb_bus_recv (self->bus, 0))) {
            if (msg->route)
                s_handle_request (self, msg);
            sb_msg_destroy (&msg);
        }
    }
    s_self_destroy (&self);
}


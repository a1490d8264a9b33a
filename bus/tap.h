/*  bus/tap.h — reading the broker's tap feed: each message on both planes
    as four frames [plane]["peer" or topic][header][body] (docs/architecture.md).
    Shared by `switchboard tap` and the gateway's bus inspector, so both
    show a message the same way. */
#ifndef SB_BUS_TAP_H
#define SB_BUS_TAP_H

#include "bus/envelope.h"

#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>

typedef struct {
    sb_header_t h;              //  the message's header, validated
    bool evt;                   //  the event plane (else the command plane)
    char who [300];             //  evt: the topic; cmd: the peer's routing id in hex, or "broker"
    zframe_t *header, *body;    //  the frames, owned by the message
} sb_tap_msg_t;

/*  Reads one tap message. 0, or -1 when it is not four frames or its
    header does not validate (the message is then not a tap message). */
int sb_tap_parse (zmsg_t *msg, sb_tap_msg_t *t);

/*  Whether the type is a heartbeat: any type with a `heartbeat` part
    (bus.heartbeat, run.heartbeat, run.heartbeat.ok). */
bool sb_tap_is_heartbeat (const char *type);

/*  Whether the message's type, or its topic, starts with prefix. */
bool sb_tap_matches (const sb_tap_msg_t *t, const char *prefix);

/*  The message as one JSON object: {<extra members>"plane","peer"|"topic",
    "header","body"}, with the header and body decoded against the schema
    (null when they do not decode). `extra` is a JSON object whose members
    come first, or NULL. Returns a malloc'd string, or NULL. */
char *sb_tap_json (const sb_tap_msg_t *t, json_t *extra);

/*  The body decoded against its schema as JSON, or NULL. */
char *sb_tap_body_json (const sb_tap_msg_t *t);

#endif

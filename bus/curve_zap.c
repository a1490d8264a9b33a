/*  bus/curve_zap.c — the ZAP handler of the bus's CURVE endpoints: who
    may connect to which plane (bus/curve.h, sb_curve_zap_new). */
#include "bus/curve.h"
#include "common/log.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/*  The ZAP handler (RFC 27): one REP socket at inproc://zeromq.zap.01 */

/*  Which planes a role may connect to: a worker key the command plane
    only (the event plane and the tap show every session). */
static bool
s_domain_allows (const char *role, const char *domain)
{
    if (strcmp (role, "worker") != 0)
        return true;
    return strcmp (domain, SB_CURVE_DOMAIN_CMD) == 0;
}

static void
s_zap_answer (zsock_t *rep, sb_curve_ids_t *ids)
{
    zmsg_t *req = zmsg_recv (rep);
    if (!req)
        return;
    char *version = zmsg_popstr (req);
    char *request_id = zmsg_popstr (req);
    char *domain = zmsg_popstr (req);
    char *address = zmsg_popstr (req);
    zframe_t *identity = zmsg_pop (req);
    char *mechanism = zmsg_popstr (req);
    zframe_t *key = zmsg_pop (req);
    const char *status = "400", *text = "no access";
    char user_id [41] = "";
    if (version && strcmp (version, "1.0") == 0 && mechanism && strcmp (mechanism, "CURVE") == 0
    &&  key && zframe_size (key) == 32 && domain) {
        zmq_z85_encode (user_id, zframe_data (key), 32);
        const char *role = sb_curve_ids_role (ids, user_id);
        if (!role)
            text = "unknown key";
        else
        if (!s_domain_allows (role, domain))
            text = "a worker key may use the command plane only";
        else {
            status = "200";
            text = "OK";
        }
    }
    if (strcmp (status, "200") != 0)
        sb_warn ("broker", "CURVE: refused a peer address=%s plane=%s key=%s why=\"%s\"", address ? address : "?",
                 domain ? domain : "?", user_id [0] ? user_id : "?", text);
    zmsg_t *reply = zmsg_new ();
    zmsg_addstr (reply, "1.0");
    zmsg_addstr (reply, request_id ? request_id : "");
    zmsg_addstr (reply, status);
    zmsg_addstr (reply, text);
    zmsg_addstr (reply, strcmp (status, "200") == 0 ? user_id : "");
    zmsg_addmem (reply, NULL, 0);
    zmsg_send (&reply, rep);
    free (version);
    free (request_id);
    free (domain);
    free (address);
    free (mechanism);
    zframe_destroy (&identity);
    zframe_destroy (&key);
    zmsg_destroy (&req);
}

typedef struct {
    char data_dir [4200];
    bool ok;                    /* set by the actor before it signals */
} s_zap_args_t;

static void
s_zap_actor (zsock_t *pipe, void *args)
{
    s_zap_args_t *a = args;
    sb_curve_ids_t *ids = sb_curve_ids_new (a->data_dir);
    zsock_t *rep = zsock_new (ZMQ_REP);
    bool ok = ids && rep && zsock_bind (rep, "inproc://zeromq.zap.01") == 0;
    /* a lives in the caller's frame only until the signal */
    a->ok = ok;
    zsock_signal (pipe, 0);
    zpoller_t *poller = ok ? zpoller_new (pipe, rep, NULL) : NULL;
    while (poller) {
        void *which = zpoller_wait (poller, -1);
        if (which == rep)
            s_zap_answer (rep, ids);
        else
            break;              /* $TERM, or the context is going */
    }
    zpoller_destroy (&poller);
    zsock_destroy (&rep);
    sb_curve_ids_destroy (&ids);
}

zactor_t *
sb_curve_zap_new (const char *data_dir)
{
    s_zap_args_t args;
    snprintf (args.data_dir, sizeof args.data_dir, "%s", data_dir);
    args.ok = false;
    /* zactor_new returns once the actor signalled, after it set ok */
    zactor_t *actor = zactor_new (s_zap_actor, &args);
    if (actor && !args.ok)
        zactor_destroy (&actor);
    return actor;
}

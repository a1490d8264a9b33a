/*  bus/broker_members.c — the broker's members (docs/architecture.md):
    instances and the services they make up, registration (bus.ready),
    the broker's own requests (bus.stats, ...), heartbeats both ways and
    the expiry of instances that went quiet. On the broker's thread. */
#include "bus/broker_impl.h"

#include <stdlib.h>
#include <string.h>

static const char *s_singletons [] = { "session", "run", "interact", "worker", NULL };

/* ------------------------------------------------------------------ */
/*  Instances and services */

static service_t *
s_service_require (self_t *self, const char *name)
{
    service_t *svc = zhashx_lookup (self->services, name);
    if (svc)
        return svc;
    svc = calloc (1, sizeof *svc);
    if (!svc)
        return NULL;
    snprintf (svc->name, sizeof svc->name, "%s", name);
    svc->lru = zlistx_new ();
    for (int k = 0; s_singletons [k]; k++)
        if (strcmp (s_singletons [k], name) == 0)
            svc->singleton = true;
    zhashx_insert (self->services, name, svc);
    return svc;
}

/*  Fails every request in flight to `inst` with `unavailable`, then
    forgets the instance. */
static void
s_instance_remove (self_t *self, instance_t *inst, const char *why)
{
    zlistx_t *keys = zhashx_keys (self->pending);
    for (const char *key = zlistx_first (keys); key; key = zlistx_next (keys)) {
        pending_t *p = zhashx_lookup (self->pending, key);
        if (p && p->inst == inst) {
            sb_header_t req;
            memset (&req, 0, sizeof req);
            memcpy (req.id, p->id, sizeof req.id);
            brk_reply_error (self, p->route, p->route_len, &req, SB_E_unavailable,
                           "instance %s of %s went away during %s; retry with the same command_id",
                           inst->instance, inst->service ? inst->service->name : "?", p->type);
            zhashx_delete (self->pending, key);
        }
    }
    zlistx_destroy (&keys);
    sb_info (ACTOR, "instance removed service=%s instance=%s reason=%s",
             inst->service ? inst->service->name : "-", inst->instance, why);
    if (inst->service && inst->handle)
        zlistx_delete (inst->service->lru, inst->handle);
    zhashx_delete (self->instances, inst->key);
}

static void
s_handle_ready (self_t *self, const uint8_t *sid, size_t sidlen, const char *skey,
                const sb_header_t *h, const sb_val_t *body)
{
    const char *service = sb_get_str (body, "service");
    const char *instance = sb_get_str (body, "instance");
    uint64_t protocol = sb_get_uint (body, "protocol", 0);
    if (protocol != SB_PROTOCOL_VERSION) {
        brk_reply_error (self, sid, sidlen, h, SB_E_version,
                       "protocol %llu is not supported; this broker speaks %d",
                       (unsigned long long) protocol, SB_PROTOCOL_VERSION);
        return;
    }
    if (!service [0] || strcmp (service, "bus") == 0 || strchr (service, '.')) {
        brk_reply_error (self, sid, sidlen, h, SB_E_invalid, "service name '%s' is not allowed", service);
        return;
    }
    service_t *svc = s_service_require (self, service);
    if (!svc) {
        brk_reply_error (self, sid, sidlen, h, SB_E_internal, "out of memory");
        return;
    }
    instance_t *existing = zhashx_lookup (self->instances, skey);
    if (existing) {
        /* the same peer registering again: refresh */
        existing->expires = sb_mono_ms () + SB_HEARTBEAT_MS * SB_HEARTBEAT_MISSES;
    }
    else {
        /* An instance that reconnected under a new identity replaces its
           old registration of the same name. */
        for (instance_t *o = zlistx_first (svc->lru); o; o = zlistx_next (svc->lru))
            if (strcmp (o->instance, instance) == 0) {
                s_instance_remove (self, o, "replaced");
                break;
            }
        if (svc->singleton && zlistx_size (svc->lru) > 0) {
            instance_t *live = zlistx_first (svc->lru);
            brk_reply_error (self, sid, sidlen, h, SB_E_conflict,
                           "service %s is a singleton and instance %s already serves it",
                           service, live->instance);
            return;
        }
        instance_t *inst = calloc (1, sizeof *inst);
        if (!inst) {
            brk_reply_error (self, sid, sidlen, h, SB_E_internal, "out of memory");
            return;
        }
        memcpy (inst->id, sid, sidlen);
        inst->idlen = sidlen;
        snprintf (inst->key, sizeof inst->key, "%s", skey);
        snprintf (inst->instance, sizeof inst->instance, "%s", instance);
        inst->service = svc;
        inst->expires = sb_mono_ms () + SB_HEARTBEAT_MS * SB_HEARTBEAT_MISSES;
        inst->handle = zlistx_add_end (svc->lru, inst);
        zhashx_insert (self->instances, skey, inst);
        sb_info (ACTOR, "instance ready service=%s instance=%s", service, instance);
    }
    sb_enc_reset (self->body_enc);
    sb_enc_map_open (self->body_enc);
    sb_enc_kuint (self->body_enc, "heartbeat_ms", SB_HEARTBEAT_MS);
    sb_enc_kstr (self->body_enc, "broker", ACTOR);
    sb_enc_map_close (self->body_enc);
    size_t blen;
    const uint8_t *b = sb_enc_data (self->body_enc, &blen);
    brk_reply (self, sid, sidlen, h, "bus.ready.ok", b, blen);
}

static void
s_enc_stats (self_t *self, sb_enc_t *e)
{
    sb_enc_map_open (e);
    sb_enc_kuint (e, "uptime_ms", (uint64_t) (sb_mono_ms () - self->started));
    sb_enc_key (e, "planes");
    sb_enc_map_open (e);
    sb_enc_kuint (e, "cmd_in", self->plane_cmd_in);
    sb_enc_kuint (e, "cmd_out", self->plane_cmd_out);
    sb_enc_kuint (e, "evt_in", self->plane_evt_in);
    sb_enc_kuint (e, "evt_out", self->plane_evt_out);
    sb_enc_kuint (e, "tap_out", self->plane_tap_out);
    sb_enc_map_close (e);
    sb_enc_key (e, "types");
    sb_enc_map_open (e);
    size_t n;
    const sb_type_t *types = sb_schema_all (&n);
    for (size_t k = 0; k < n; k++)
        if (self->type_counts [k])
            sb_enc_kuint (e, types [k].name, self->type_counts [k]);
    sb_enc_map_close (e);
    sb_enc_key (e, "services");
    sb_enc_map_open (e);
    for (service_t *svc = zhashx_first (self->services); svc; svc = zhashx_next (self->services)) {
        sb_enc_key (e, svc->name);
        sb_enc_map_open (e);
        sb_enc_kuint (e, "live", zlistx_size (svc->lru));
        sb_enc_key (e, "instances");
        sb_enc_array_open (e);
        for (instance_t *i = zlistx_first (svc->lru); i; i = zlistx_next (svc->lru))
            sb_enc_str (e, i->instance);
        sb_enc_array_close (e);
        sb_enc_map_close (e);
    }
    sb_enc_map_close (e);
    sb_enc_key (e, "malformed");
    sb_enc_map_open (e);
    uint64_t total = 0;
    for (int k = 0; k < M_COUNT; k++) {
        sb_enc_kuint (e, brk_malformed_names [k], self->malformed [k]);
        total += self->malformed [k];
    }
    sb_enc_kuint (e, "total", total);
    sb_enc_map_close (e);
    sb_enc_key (e, "queues");
    sb_enc_map_open (e);
    sb_enc_kuint (e, "pending_requests", zhashx_size (self->pending));
    sb_enc_kuint (e, "pending_limit", SB_BROKER_MAX_PENDING);
    sb_enc_kuint (e, "instances", zhashx_size (self->instances));
    sb_enc_kuint (e, "tap_subscriptions", zhashx_size (self->tap_subs));
    sb_enc_kuint (e, "dropped_unroutable", self->drop_unroutable);
    sb_enc_kuint (e, "dropped_hwm", self->drop_hwm);
    sb_enc_kuint (e, "no_service", self->no_service);
    sb_enc_kuint (e, "expired_instances", self->expired_instances);
    sb_enc_kuint (e, "expired_requests", self->expired_pending);
    sb_enc_kuint (e, "router_hwm", SB_BROKER_ROUTER_HWM);
    sb_enc_kuint (e, "pub_hwm", SB_BROKER_PUB_HWM);
    sb_enc_kuint (e, "tap_hwm", SB_BROKER_TAP_HWM);
    sb_enc_kuint (e, "queue_bytes_limit", self->queue_bytes);
    sb_enc_kuint (e, "queue_total_limit", self->queue_total);
    sb_enc_kuint (e, "cmd_queued_bytes", sb_outq_held_total (self->cmd_q));
    sb_enc_kuint (e, "evt_queued_bytes", sb_outq_held (self->evt_q));
    sb_enc_kuint (e, "tap_queued_bytes", sb_outq_held (self->tap_q));
    sb_enc_map_close (e);
    /* what the byte bounds dropped, per plane */
    sb_enc_key (e, "dropped");
    sb_enc_map_open (e);
    sb_enc_kuint (e, "cmd", self->drop_cmd);
    sb_enc_kuint (e, "cmd_bytes", self->drop_cmd_bytes);
    sb_enc_kuint (e, "evt", self->drop_evt);
    sb_enc_kuint (e, "evt_bytes", self->drop_evt_bytes);
    sb_enc_kuint (e, "tap", self->drop_tap);
    sb_enc_kuint (e, "tap_bytes", self->drop_tap_bytes);
    sb_enc_map_close (e);
    if (self->stats_extra)
        self->stats_extra (e);
    sb_enc_map_close (e);
}

void
brk_handle_bus (self_t *self, const uint8_t *sid, size_t sidlen, const char *skey,
              const sb_header_t *h, const sb_val_t *body)
{
    instance_t *inst = zhashx_lookup (self->instances, skey);
    if (strcmp (h->type, "bus.ready") == 0)
        s_handle_ready (self, sid, sidlen, skey, h, body);
    else
    if (strcmp (h->type, "bus.heartbeat") == 0) {
        if (!inst)
            brk_reply_error (self, sid, sidlen, h, SB_E_not_registered,
                           "unknown instance; send bus.ready again");
    }
    else
    if (strcmp (h->type, "bus.bye") == 0) {
        if (inst)
            s_instance_remove (self, inst, "bye");
    }
    else
    if (strcmp (h->type, "bus.stats") == 0) {
        sb_enc_t *e = sb_enc_new ();
        if (!e)
            return;
        s_enc_stats (self, e);
        size_t blen;
        const uint8_t *b = sb_enc_data (e, &blen);
        brk_reply (self, sid, sidlen, h, "bus.stats.ok", b, blen);
        sb_enc_destroy (&e);
    }
    else
        brk_reply_error (self, sid, sidlen, h, SB_E_forbidden, "%s is not a request", h->type);
}

/* ------------------------------------------------------------------ */
/*  Timers */

/*  Forgets instances that missed 3 heartbeats. Checked often, so a dead
    instance is gone within 3 s of its last word, not up to 4. */
void
brk_expire_instances (self_t *self)
{
    int64_t now = sb_mono_ms ();
    zlistx_t *dead = zlistx_new ();
    for (instance_t *i = zhashx_first (self->instances); i; i = zhashx_next (self->instances))
        if (i->expires < now)
            zlistx_add_end (dead, i);
    for (instance_t *i = zlistx_first (dead); i; i = zlistx_next (dead)) {
        self->expired_instances++;
        s_instance_remove (self, i, "missed heartbeats");
    }
    zlistx_destroy (&dead);
    self->next_expiry = now + SB_EXPIRY_CHECK_MS;
}

void
brk_heartbeat (self_t *self)
{
    int64_t now = sb_mono_ms ();
    /* forget requests past their deadline */
    zlistx_t *keys = zhashx_keys (self->pending);
    for (const char *key = zlistx_first (keys); key; key = zlistx_next (keys)) {
        pending_t *p = zhashx_lookup (self->pending, key);
        if (p && p->expires < now) {
            self->expired_pending++;
            zhashx_delete (self->pending, key);
        }
    }
    zlistx_destroy (&keys);
    /* forget the accounts of peers that drained or left */
    sb_outq_sweep (self->cmd_q);
    /* heartbeat every live instance */
    sb_header_t h;
    for (instance_t *i = zhashx_first (self->instances); i; i = zhashx_next (self->instances)) {
        sb_header_init (&h, "bus.heartbeat", ACTOR);
        brk_send_made (self, i->id, i->idlen, NULL, 0, &h, (const uint8_t *) "\x80", 1);
    }
    self->next_heartbeat = now + SB_HEARTBEAT_MS;
}

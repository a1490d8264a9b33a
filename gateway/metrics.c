/*  gateway/metrics.c — /metrics in Prometheus text (docs/gateway.md): the
    gateway's counters and gauges, then every number of bus.stats as
    sb_bus_<field>{key="..."}. Rendered on the bridge thread, which has
    the bus.stats reply; the counters are atomics. */
#include "gateway/gateway_impl.h"
#include "bus/client.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  sb_bus_A[_B] with every character Prometheus does not take as '_'.
static void
s_metric_name (char *out, size_t n, const char *a, const char *b)
{
    size_t w = (size_t) snprintf (out, n, "sb_bus_%s%s%s", a, b ? "_" : "", b ? b : "");
    for (size_t k = 7; k < w && k < n; k++)
        if (!isalnum ((unsigned char) out [k]) && out [k] != '_')
            out [k] = '_';
}

static void
s_metrics_bus (FILE *f, const char *field, const sb_val_t *v, const char *label)
{
    char name [160];
    if (v->type == SB_V_UINT || v->type == SB_V_INT || v->type == SB_V_FLOAT) {
        double d = v->type == SB_V_UINT ? (double) v->v.u : v->type == SB_V_INT ? (double) v->v.i : v->v.f;
        s_metric_name (name, sizeof name, field, NULL);
        if (label)
            fprintf (f, "%s{key=\"%s\"} %.17g\n", name, label, d);
        else
            fprintf (f, "%s %.17g\n", name, d);
        return;
    }
    if (v->type != SB_V_MAP)
        return;
    for (uint32_t k = 0; k < v->len; k++) {
        const sb_val_t *key = sb_map_key (v, k), *val = sb_map_val (v, k);
        if (key->type != SB_V_STR)
            continue;
        char clean [96];
        size_t i = 0;
        for (const char *s = key->v.s; *s && i < sizeof clean - 1; s++)
            if (*s != '"' && *s != '\\' && *s != '\n')
                clean [i++] = *s;
        clean [i] = 0;
        if (val->type == SB_V_MAP) {
            /* {key: {a: 1, b: 2}} -> field_a{key}, field_b{key} */
            for (uint32_t j = 0; j < val->len; j++) {
                const sb_val_t *k2 = sb_map_key (val, j), *v2 = sb_map_val (val, j);
                if (k2->type != SB_V_STR || v2->type == SB_V_MAP)
                    continue;
                char sub [160];
                s_metric_name (sub, sizeof sub, field, k2->v.s);
                s_metrics_bus (f, sub + 7, v2, label ? label : clean);
            }
        }
        else
        if (label) {
            char sub [160];
            s_metric_name (sub, sizeof sub, field, clean);
            s_metrics_bus (f, sub + 7, val, label);
        }
        else
            s_metrics_bus (f, field, val, clean);
    }
}

//  The one string of bus.stats that Prometheus needs: each store's backend,
//  as a label of a gauge that is always 1 (the numbers of the "store"
//  section come out as sb_bus_store_*{key="session"} above).
static void
s_metrics_store_backend (FILE *f, const sb_val_t *stores)
{
    for (uint32_t k = 0; stores && k < stores->len; k++) {
        const sb_val_t *key = sb_map_key (stores, k), *val = sb_map_val (stores, k);
        const char *backend = sb_get_str (val, "backend");
        if (key->type != SB_V_STR || !backend)
            continue;
        bool plain = true;
        for (const char *s = key->v.s; *s; s++)
            plain &= isalnum ((unsigned char) *s) || *s == '_';
        for (const char *s = backend; *s; s++)
            plain &= isalnum ((unsigned char) *s) || *s == '_';
        if (plain)
            fprintf (f, "sb_store_backend{key=\"%s\",backend=\"%s\"} 1\n", key->v.s, backend);
    }
}

//  A label value Prometheus reads as it is: no quote, backslash or
//  newline to escape (a provider's name is configured, but not checked).
static bool
s_label_ok (const sb_val_t *v)
{
    if (!v || v->type != SB_V_STR || !v->len || v->len > 64)
        return false;
    for (uint32_t i = 0; i < v->len; i++)
        if (!isalnum ((unsigned char) v->v.s [i]) && !strchr ("_-.:", v->v.s [i]))
            return false;
    return true;
}

//  The latest rate-limit headers of each provider, from llm.info's
//  providers (docs/usage.md).
static void
s_metrics_ratelimits (FILE *f, const struct sb_msg *llm)
{
    if (!llm || sb_msg_is_error (llm)) {
        fprintf (f, "# llm.info did not answer: %s\n", llm ? sb_msg_error_message (llm) : "timeout");
        return;
    }
    const sb_val_t *provs = sb_get_array (llm->body, "providers");
    fprintf (f, "# HELP sb_llm_ratelimit the latest rate-limit header values a provider sent (docs/usage.md)\n"
                "# TYPE sb_llm_ratelimit gauge\n");
    for (uint32_t k = 0; provs && k < provs->len; k++) {
        const sb_val_t *p = sb_array_at (provs, k);
        const sb_val_t *rl = sb_get_map (p, "ratelimit");
        if (!rl || !s_label_ok (sb_get (p, "provider")))
            continue;
        for (uint32_t i = 0; i < rl->len; i++) {
            const sb_val_t *key = sb_map_key (rl, i), *val = sb_map_val (rl, i);
            if (s_label_ok (key) && val->type == SB_V_UINT)
                fprintf (f, "sb_llm_ratelimit{provider=\"%s\",field=\"%s\"} %" PRIu64 "\n",
                         sb_get_str (p, "provider"), key->v.s, val->v.u);
        }
    }
}

//  The node's role (standalone on LMDB, member of a cluster on
//  PostgreSQL) and its id, as labels of a gauge that is always 1; its
//  numbers (shards held, beats...) come out as sb_bus_node_* above. A
//  node id is [A-Za-z0-9._:-] (cluster/cluster.h): nothing to escape.
static void
s_metrics_node (FILE *f, const sb_val_t *node)
{
    const char *role = sb_get_str (node, "role"), *id = sb_get_str (node, "node_id");
    if (!role)
        return;
    fprintf (f, "# HELP sb_node_role this process's role: standalone (LMDB) or member (a cluster on "
             "PostgreSQL)\n# TYPE sb_node_role gauge\n");
    bool plain = true;
    for (const char *s = id ? id : ""; *s; s++)
        plain &= isalnum ((unsigned char) *s) || strchr ("._:-", *s) != NULL;
    if (id && plain)
        fprintf (f, "sb_node_role{role=\"%s\",node=\"%s\"} 1\n", strcmp (role, "member") ? "standalone"
                 : "member", id);
    else
        fprintf (f, "sb_node_role{role=\"%s\"} 1\n", strcmp (role, "member") ? "standalone" : "member");
}

gw_buf_t *
gw_metrics_render (sb_gateway_t *gw, const struct sb_msg *reply, const struct sb_msg *llm)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&text, &len);
    if (!f)
        return NULL;
    gw_stats_t *st = &gw->stats;
    struct { const char *name, *help; uint64_t v; bool gauge; } rows [] = {
        { "http_requests_total", "HTTP requests", atomic_load (&st->http_requests), false },
        { "http_errors_total", "HTTP responses with a status of 400 or more", atomic_load (&st->http_errors), false },
        { "ws_opened_total", "WebSocket connections accepted", atomic_load (&st->ws_opened), false },
        { "ws_closed_total", "WebSocket connections closed", atomic_load (&st->ws_closed), false },
        { "ws_connections", "WebSocket connections open", (uint64_t) atomic_load (&st->ws_open), true },
        { "ws_subscriptions", "session subscriptions open", (uint64_t) atomic_load (&st->subs_open), true },
        { "ws_rx_frames_total", "WebSocket messages received", atomic_load (&st->ws_rx_frames), false },
        { "ws_tx_frames_total", "WebSocket messages sent", atomic_load (&st->ws_tx_frames), false },
        { "ws_tx_bytes_total", "WebSocket payload bytes sent", atomic_load (&st->ws_tx_bytes), false },
        { "ws_tx_sends_total", "WebSocket writes to a socket (frames waiting go in one)", atomic_load (&st->ws_tx_sends), false },
        { "ws_bad_frames_total", "messages answered with an error before any call", atomic_load (&st->ws_bad_frames), false },
        { "ws_too_large_total", "connections closed for a message over 1 MiB", atomic_load (&st->ws_too_large), false },
        { "forbidden_total", "calls of internal types refused", atomic_load (&st->ws_forbidden), false },
        { "ws_resyncs_total", "streams dropped with resync (slow readers)", atomic_load (&st->ws_resyncs), false },
        { "ws_flow_paused_total", "times reading from a client was paused", atomic_load (&st->ws_flow_paused), false },
        { "ws_replies_dropped_total", "replies over the outbound bounds, answered overloaded", atomic_load (&st->ws_replies_dropped), false },
        { "ws_overflow_closed_total", "WebSockets closed: not even an error frame fitted their bound", atomic_load (&st->ws_overflow_closed), false },
        { "ws_queued_bytes", "bytes queued for every connection (WebSocket frames, HTTP answers)", (uint64_t) atomic_load (&st->ws_queued_bytes), true },
        { "handoff_bytes", "bytes of answers on their way from the bus thread to the connections' thread", (uint64_t) atomic_load (&st->handoff_bytes), true },
        { "handoff_peak_bytes", "the most handoff_bytes has been (bound: --http-out-total)", (uint64_t) atomic_load (&st->handoff_peak), true },
        { "auth_failures_total", "requests without the right token", atomic_load (&st->auth_failures), false },
        { "host_refused_total", "requests with a Host not served", atomic_load (&st->host_refused), false },
        { "origin_refused_total", "requests and WebSocket upgrades from another origin", atomic_load (&st->origin_refused), false },
        { "csrf_refused_total", "cookie-only writes without the X-Switchboard header", atomic_load (&st->csrf_refused), false },
        { "conn_refused_total", "WebSocket upgrades past a connection limit", atomic_load (&st->conn_refused), false },
        { "fd_refused_total", "connections closed at accept to keep serve's file descriptors", atomic_load (&st->fd_refused), false },
        { "body_timeouts_total", "requests closed for a body slower than 30 s", atomic_load (&st->body_timeouts), false },
        { "calls_total", "WebSocket calls sent to the bus", atomic_load (&st->calls), false },
        { "call_timeouts_total", "calls answered with timeout by the gateway", atomic_load (&st->call_timeouts), false },
        { "events_in_total", "live events received from the event plane", atomic_load (&st->events_in), false },
        { "events_out_total", "event frames queued to clients", atomic_load (&st->events_out), false },
        { "replays_total", "tape pages read for subscribers", atomic_load (&st->replays), false },
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows [0]; k++)
        fprintf (f, "# HELP sb_gateway_%s %s\n# TYPE sb_gateway_%s %s\nsb_gateway_%s %" PRIu64 "\n",
                 rows [k].name, rows [k].help, rows [k].name, rows [k].gauge ? "gauge" : "counter",
                 rows [k].name, rows [k].v);
    if (reply && !sb_msg_is_error (reply)) {
        const sb_val_t *b = reply->body;
        for (uint32_t k = 0; k < b->len; k++) {
            const sb_val_t *key = sb_map_key (b, k);
            if (key->type == SB_V_STR)
                s_metrics_bus (f, key->v.s, sb_map_val (b, k), NULL);
        }
        s_metrics_store_backend (f, sb_get_map (b, "store"));
        s_metrics_node (f, sb_get_map (b, "node"));
    }
    else
        fprintf (f, "# bus.stats did not answer: %s\n", reply ? sb_msg_error_message (reply) : "timeout");
    s_metrics_ratelimits (f, llm);
    fclose (f);
    gw_buf_t *buf = gw_buf_new (text, len);
    free (text);
    return buf;
}

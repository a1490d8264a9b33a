/*  actors/exec/mcp_status.c — what `switchboard mcp list` shows of the MCP
    servers: one process-wide table, by server name, that the run threads
    update at each state change of a server (actors/exec/mcp_impl.h).
*/
#include "actors/exec/mcp_impl.h"

#include <sodium.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *s_state_names [] = { "not started", "ready", "failed" };

typedef struct {
    char name [SB_MCP_NAME_MAX + 1];
    s_state_t state;
    int sessions;               //  sessions whose server is ready now
    char tools [4096];          //  "name\tdescription\n"..., cut
    size_t ntools;
    char error [512];           //  redacted
    int64_t updated;            //  ms since the epoch
} s_status_t;

static pthread_mutex_t s_status_lock = PTHREAD_MUTEX_INITIALIZER;
static s_status_t s_status [SB_MCP_MAX_SERVERS];
static size_t s_nstatus;

static s_status_t *
s_status_find (const char *name, bool add)
{
    for (size_t k = 0; k < s_nstatus; k++)
        if (strcmp (s_status [k].name, name) == 0)
            return &s_status [k];
    if (!add || s_nstatus >= SB_MCP_MAX_SERVERS)
        return NULL;
    s_status_t *st = &s_status [s_nstatus++];
    memset (st, 0, sizeof *st);
    snprintf (st->name, sizeof st->name, "%s", name);
    return st;
}

void
sb_mcp_status_note (const s_server_t *c_srv)
{
    s_server_t *srv = (s_server_t *) c_srv;
    pthread_mutex_lock (&s_status_lock);
    s_status_t *st = s_status_find (srv->conf->name, true);
    if (st) {
        bool ready = srv->state == S_READY;
        if (ready && !srv->counted)
            st->sessions++;
        if (!ready && srv->counted)
            st->sessions--;
        srv->counted = ready;
        st->state = srv->state;
        struct timespec ts;
        clock_gettime (CLOCK_REALTIME, &ts);
        st->updated = (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        if (srv->state == S_FAILED) {
            char *red = sb_mcp_redact (srv->cfg, srv->error);
            snprintf (st->error, sizeof st->error, "%s", red ? red : "");
            free (red);
        }
        if (ready) {
            st->error [0] = 0;
            st->tools [0] = 0;
            st->ntools = srv->ntools;
            size_t used = 0;
            for (size_t k = 0; k < srv->ntools && used < sizeof st->tools; k++) {
                char d [201];
                size_t dl = strlen (srv->tools [k].description);
                if (dl > 200) {
                    dl = 200;
                    while (dl > 0 && ((unsigned char) srv->tools [k].description [dl] & 0xC0) == 0x80)
                        dl--;
                }
                memcpy (d, srv->tools [k].description, dl);
                d [dl] = 0;
                for (char *q = d; *q; q++)
                    if (*q == '\t' || *q == '\n' || *q == '\r')
                        *q = ' ';
                int n = snprintf (st->tools + used, sizeof st->tools - used, "%s\t%c%s\n", srv->tools [k].exposed,
                                  srv->tools [k].read_only_hint ? 'R' : '-', d);
                if (n < 0 || (size_t) n >= sizeof st->tools - used) {
                    st->tools [used] = 0;
                    break;
                }
                used += (size_t) n;
            }
        }
    }
    pthread_mutex_unlock (&s_status_lock);
}

void
sb_mcp_status_encode (const sb_mcp_config_t *cfg, sb_enc_t *e)
{
    sb_enc_kstr (e, "config", cfg && cfg->source ? cfg->source : "");
    sb_enc_key (e, "servers");
    sb_enc_array_open (e);
    pthread_mutex_lock (&s_status_lock);
    for (size_t k = 0; cfg && k < cfg->n; k++) {
        const sb_mcp_server_conf_t *c = &cfg->servers [k];
        const s_status_t *st = s_status_find (c->name, false);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "name", c->name);
        sb_enc_kstr (e, "transport", c->argv ? "stdio" : "http");
        if (c->argv)
            sb_enc_kstr (e, "command", c->argv [0]);
        else {
            //  The URL without its query, which may hold a token.
            char url [4200];
            snprintf (url, sizeof url, "%s", c->url);
            url [strcspn (url, "?#")] = 0;
            sb_enc_kstr (e, "url", url);
            //  Whether mcp login left tokens (they open with the key).
            char *doc = cfg->data_dir ? sb_mcp_oauth_store_load (cfg->data_dir, c->name, c->url) : NULL;
            sb_enc_kbool (e, "authorized", doc != NULL);
            json_t *j = doc ? json_loads (doc, 0, NULL) : NULL;
            json_int_t at = json_integer_value (json_object_get (j, "saved_at"));
            if (at > 0)
                sb_enc_kuint (e, "authorized_at", (uint64_t) at);
            json_decref (j);
            if (doc) {
                sodium_memzero (doc, strlen (doc));
                free (doc);
            }
        }
        const char *state = !st ? "not started" : st->sessions > 0 ? "running" : s_state_names [st->state];
        sb_enc_kstr (e, "state", state);
        sb_enc_kuint (e, "sessions", st && st->sessions > 0 ? (uint64_t) st->sessions : 0);
        if (st && st->error [0])
            sb_enc_kstr (e, "error", st->error);
        if (st && st->updated)
            sb_enc_kuint (e, "updated_at", (uint64_t) st->updated);
        sb_enc_key (e, "tools");
        sb_enc_array_open (e);
        for (const char *p = st ? st->tools : ""; *p; ) {
            const char *tab = strchr (p, '\t'), *nl = strchr (p, '\n');
            if (!tab || !nl || tab > nl)
                break;
            sb_enc_map_open (e);
            sb_enc_key (e, "name");
            sb_enc_strn (e, p, (size_t) (tab - p));
            sb_enc_key (e, "description");
            sb_enc_strn (e, tab + 2, (size_t) (nl - tab - 2));
            sb_enc_kbool (e, "read_only_hint", tab [1] == 'R');
            sb_enc_map_close (e);
            p = nl + 1;
        }
        sb_enc_array_close (e);
        sb_enc_map_close (e);
    }
    pthread_mutex_unlock (&s_status_lock);
    sb_enc_array_close (e);
}

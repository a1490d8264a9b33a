/*  cli/models.c — the provider and model a session runs with (cli/models.h). */
#include "cli/models.h"
#include "cli/cli.h"
#include "schemas/codec.h"

#include <stdio.h>
#include <string.h>

void
sb_cli_models_load (sb_bus_t *bus, sb_cli_models_t *m, int timeout_ms)
{
    memset (m, 0, sizeof *m);
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return;
    sb_enc_map_open (e);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_bus_call (bus, "llm.info", NULL, b, len, timeout_ms);
    sb_enc_destroy (&e);
    if (reply && !sb_msg_is_error (reply)) {
        const char *dflt = sb_get_str (reply->body, "provider");
        snprintf (m->dflt, sizeof m->dflt, "%s", dflt ? dflt : "");
        const sb_val_t *list = sb_get_array (reply->body, "providers");
        for (uint32_t k = 0; list && k < list->len && m->count < SB_CLI_PROVIDERS_MAX; k++) {
            const sb_val_t *p = sb_array_at (list, k);
            const char *name = sb_get_str (p, "provider");
            if (!name)
                continue;
            sb_cli_provider_t *to = &m->list [m->count++];
            snprintf (to->provider, sizeof to->provider, "%s", name);
            snprintf (to->model, sizeof to->model, "%s", sb_get_str (p, "model") ? sb_get_str (p, "model") : "");
        }
        /* an older server: no list, but its default and that one's model */
        if (!list && dflt && m->count == 0) {
            snprintf (m->list [0].provider, sizeof m->list [0].provider, "%s", dflt);
            snprintf (m->list [0].model, sizeof m->list [0].model, "%s",
                      sb_get_str (reply->body, "model") ? sb_get_str (reply->body, "model") : "");
            m->count = 1;
        }
        m->known = m->dflt [0] != 0;
    }
    sb_msg_destroy (&reply);
}

void
sb_cli_models_effective (const sb_cli_models_t *m, const sb_val_t *session, char *provider, size_t pn,
                         char *model, size_t mn, bool *own_provider, bool *own_model)
{
    const char *sp = sb_get_str (session, "provider");
    const char *sm = sb_get_str (session, "model");
    bool has_p = sp && *sp, has_m = sm && *sm;
    if (own_provider)
        *own_provider = has_p;
    if (own_model)
        *own_model = has_m;
    const char *p = has_p ? sp : m->known ? m->dflt : "?";
    snprintf (provider, pn, "%s", p);
    if (has_m) {
        snprintf (model, mn, "%s", sm);
        return;
    }
    /* resolved by name: the provider's own default model */
    for (int k = 0; k < m->count; k++)
        if (strcmp (m->list [k].provider, p) == 0 && m->list [k].model [0]) {
            snprintf (model, mn, "%s", m->list [k].model);
            return;
        }
    snprintf (model, mn, "?");
}

void
sb_cli_models_cell (const sb_cli_models_t *m, const sb_val_t *session, size_t max, char *out, size_t n)
{
    char provider [64], model [256], both [330];
    sb_cli_models_effective (m, session, provider, sizeof provider, model, sizeof model, NULL, NULL);
    snprintf (both, sizeof both, "%s/%s", provider, model);
    sb_cli_text_cell (both, max, out, n);
}

void
sb_cli_models_print (const sb_cli_models_t *m, const sb_val_t *session)
{
    char provider [64], model [256];
    bool own_p, own_m;
    sb_cli_models_effective (m, session, provider, sizeof provider, model, sizeof model, &own_p, &own_m);
    printf ("provider   %s%s\n", provider, own_p ? "" : " (the server's default)");
    printf ("model      %s%s\n", model, own_m ? "" : own_p ? " (the provider's default)" : " (the server's default)");
}

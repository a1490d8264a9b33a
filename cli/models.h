/*  cli/models.h — the provider and model a session runs with, as the CLI
    shows them (`sessions`, `sessions show`, `chat`).

    A session may name its own provider and model; when it does not, its
    runs use the server's default provider and that provider's default
    model. The server says which those are (llm.info, whose `providers`
    lists every configured provider with its default model), so that the
    CLI shows the effective pair, not a dash. */
#ifndef SB_CLI_MODELS_H
#define SB_CLI_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include "bus/client.h"

#define SB_CLI_PROVIDERS_MAX 32

typedef struct {
    char provider [64];
    char model [256];
} sb_cli_provider_t;

typedef struct {
    bool known;                 /* the server answered llm.info */
    char dflt [64];             /* its default provider */
    sb_cli_provider_t list [SB_CLI_PROVIDERS_MAX];
    int count;
} sb_cli_models_t;

/*  Asks the server once. Without an answer within timeout_ms (no llm
    actor), m->known is false and only what sessions name is shown. */
void sb_cli_models_load (sb_bus_t *bus, sb_cli_models_t *m, int timeout_ms);

/*  The effective provider and model of a session record (its own, else
    the server's default provider, else that provider's default model):
    "?" for what cannot be told. *own_provider and *own_model (each may be
    NULL) say whether the session named them itself. */
void sb_cli_models_effective (const sb_cli_models_t *m, const sb_val_t *session, char *provider, size_t pn,
                              char *model, size_t mn, bool *own_provider, bool *own_model);

/*  The list's cell: "PROVIDER/MODEL", cut to max columns (sb_cli_text_cell). */
void sb_cli_models_cell (const sb_cli_models_t *m, const sb_val_t *session, size_t max, char *out, size_t n);

/*  `sessions show`'s two lines, "provider   P" and "model      M", each with
    "(the server's default)" or "(the provider's default)" when the session
    does not name its own. */
void sb_cli_models_print (const sb_cli_models_t *m, const sb_val_t *session);

#endif

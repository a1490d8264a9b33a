/*  actors/llm/config.h — provider configuration of the llm actor.

    Providers come from flags (--llm KIND --llm-url BASE --model M) or from a
    JSON file (--providers FILE). Keys come only from the environment or a
    0600 key file, are held by the llm actor alone, and are never logged,
    put on the bus, or written to the tape. */
#ifndef SB_LLM_CONFIG_H
#define SB_LLM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include "actors/llm/provider.h"

#define SB_LLM_MAX_PROVIDERS 32

typedef struct {
    char name [64];
    sb_provider_kind_t kind;
    bool demo;                  /* the built-in demo model (responses wire format) */
    char base_url [1024];       /* includes the version path, e.g. https://api.openai.com/v1 */
    char model [128];           /* default model */
    char models [16][128];      /* configured model list (llm.models fallback) */
    int nmodels;
    char *api_key;              /* secret: never log it */
    char key_env [64];          /* the variable the key is read from (named when it is missing) */
    char token_file [1024];     /* codex: OAuth token file */
    char token_url [1024];      /* codex: where to refresh */
    char client_id [128];       /* codex: OAuth client id sent on refresh */
    int max_attempts;           /* HTTP attempts per stream */
    int idle_timeout_s;         /* between bytes */
    int connect_timeout_ms;
    int backoff_base_ms;        /* first retry delay without a server hint */
} sb_llm_provider_t;

typedef struct {
    sb_llm_provider_t providers [SB_LLM_MAX_PROVIDERS];
    int count;
    int dflt;                   /* index of the default provider */
} sb_llm_config_t;

/*  Builds the configuration. kind: --llm (NULL: demo unless --providers),
    url: --llm-url, model: --model, file: --providers. Reads keys from the
    environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, SWITCHBOARD_LLM_KEY,
    SWITCHBOARD_LLM_KEY_FILE) and per-provider key_env / key_file. Returns
    0, or -1 with a clear message in err. */
int sb_llm_config_load (sb_llm_config_t *cfg, const char *kind, const char *url,
                        const char *model, const char *file, char *err, size_t errlen);

/*  Frees the keys (wiping them first). */
void sb_llm_config_clear (sb_llm_config_t *cfg);

/*  Finds a provider by name; NULL name gives the default. */
sb_llm_provider_t *sb_llm_config_find (sb_llm_config_t *cfg, const char *name);

/*  When the provider needs a key (or, for codex, a token file) and has
    none, the variable a person sets to give it one; NULL otherwise. A
    responses or chat provider on a loopback address needs none: local
    servers (Ollama, llama.cpp, vLLM) take no key. */
const char *sb_llm_config_missing_key (const sb_llm_provider_t *p);

/*  Reads a secret from a file that must be private (mode 0600 or stricter):
    malloc'd, trailing whitespace trimmed, or NULL with err set. */
char *sb_llm_read_key_file (const char *path, char *err, size_t errlen);

#endif

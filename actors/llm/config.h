/*  actors/llm/config.h — provider configuration of the llm actor.

    Providers come from flags (--llm KIND --llm-url BASE --model M) or from a
    JSON file (--providers FILE). Keys come only from the environment or a
    0600 key file, are held by the llm actor alone, and are never logged,
    put on the bus, or written to the tape. */
#ifndef SB_LLM_CONFIG_H
#define SB_LLM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "actors/llm/provider.h"
#include "actors/llm/usage.h"

#define SB_LLM_MAX_PROVIDERS 32
#define SB_LLM_MAX_MODELS 16

/*  A model's context window and output reserve, in tokens: the executor
    compacts the context before it outgrows them (docs/compaction.md).
    Bounds of every value read from a file or a flag. */
#define SB_LLM_WINDOW_MIN 1024
#define SB_LLM_WINDOW_MAX 100000000ull

typedef struct {
    char name [64];
    sb_provider_kind_t kind;
    bool demo;                  /* the built-in demo model (responses wire format) */
    char base_url [1024];       /* includes the version path, e.g. https://api.openai.com/v1 */
    char model [128];           /* default model */
    char models [SB_LLM_MAX_MODELS][128];   /* configured model list (llm.models fallback) */
    uint64_t model_window [SB_LLM_MAX_MODELS];  /* per model: context window (0: not set) */
    uint64_t model_output [SB_LLM_MAX_MODELS];  /* per model: max output tokens (0: not set) */
    sb_price_t model_price [SB_LLM_MAX_MODELS]; /* per model: "prices" (set false: not given) */
    bool model_no_images [SB_LLM_MAX_MODELS];   /* per model: "images": false (docs/images.md) */
    bool no_images;             /* "images": false: no model of this provider takes images */
    int nmodels;
    sb_price_t price;           /* "prices" of the provider: any model of it */
    uint64_t context_window;    /* for any model of this provider (0: not set) */
    uint64_t max_output_tokens; /* same, output reserve */
    char *api_key;              /* secret: never log it */
    char key_env [64];          /* the variable the key is read from (named when it is missing) */
    char token_file [1024];     /* codex: OAuth token file */
    char token_url [1024];      /* codex: where to refresh */
    char client_id [128];       /* codex: OAuth client id sent on refresh */
    int max_attempts;           /* HTTP attempts per stream */
    int idle_timeout_s;         /* between bytes */
    int connect_timeout_ms;
    int backoff_base_ms;        /* first retry delay without a server hint */
    sb_limits_seen_t ratelimit;   /* the latest rate-limit headers it sent (llm.info) */
} sb_llm_provider_t;

typedef struct {
    sb_llm_provider_t providers [SB_LLM_MAX_PROVIDERS];
    int count;
    int dflt;                   /* index of the default provider */
    uint64_t context_window;    /* --context-window: where nothing closer says (0: not set) */
} sb_llm_config_t;

/*  A model's limits and where they came from. */
typedef struct {
    uint64_t context_window;    /* tokens the model takes, input and output */
    uint64_t max_output_tokens; /* tokens it may write in one answer */
    const char *source;         /* "configured" (providers file), "flag" (--context-window),
                                   "family" (known model family), "default" */
} sb_llm_limits_t;

/*  The limits of `model` at provider p (model NULL or empty: p's default
    model). The providers file wins (the model's row, then the provider's),
    then --context-window, then the defaults of the model's family, then
    SB_LLM_DEFAULT_WINDOW. max_output_tokens comes from the file, else the
    family, else SB_LLM_DEFAULT_OUTPUT, and never exceeds the window. */
#define SB_LLM_DEFAULT_WINDOW 128000
#define SB_LLM_DEFAULT_OUTPUT 16384
void sb_llm_model_limits (const sb_llm_config_t *cfg, const sb_llm_provider_t *p,
                          const char *model, sb_llm_limits_t *out);

/*  The price of `model` at provider p (NULL or empty: p's default model):
    the model's row in the providers file, then the provider's "prices",
    then the table of well-known models (usage.c). false: no price, so the
    call's cost is unknown. */
bool sb_llm_model_price (const sb_llm_provider_t *p, const char *model, sb_price_t *out);

/*  Whether `model` at provider p takes images: not when the providers
    file says "images": false on the model's row, or on the provider's
    (the demo model takes none: it reads only text). */
bool sb_llm_model_takes_images (const sb_llm_provider_t *p, const char *model);

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

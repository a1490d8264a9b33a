/*  actors/llm/config.c — providers from flags, a JSON file and the
    environment. */
#include "actors/llm/config.h"
#include "actors/llm/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

char *
sb_llm_read_key_file (const char *path, char *err, size_t errlen)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf (err, errlen, "cannot open key file %s: %s", path, strerror (errno));
        return NULL;
    }
    struct stat st;
    if (fstat (fd, &st) != 0 || (st.st_mode & 077)) {
        snprintf (err, errlen, "key file %s must not be readable by group or others (chmod 600)", path);
        close (fd);
        return NULL;
    }
    if (st.st_size > 16384) {
        snprintf (err, errlen, "key file %s is larger than 16 KiB", path);
        close (fd);
        return NULL;
    }
    char *key = calloc (1, (size_t) st.st_size + 1);
    ssize_t n = key ? read (fd, key, (size_t) st.st_size) : -1;
    close (fd);
    if (n < 0) {
        free (key);
        snprintf (err, errlen, "cannot read key file %s", path);
        return NULL;
    }
    key [n] = 0;
    while (n > 0 && (key [n - 1] == '\n' || key [n - 1] == '\r' || key [n - 1] == ' '))
        key [--n] = 0;
    return key;
}

static void
s_defaults (sb_llm_provider_t *p)
{
    p->max_attempts = 4;
    p->idle_timeout_s = 300;
    p->connect_timeout_ms = 10000;
    p->backoff_base_ms = 500;
    sb_limits_seen_clear (&p->ratelimit);
    const char *idle = getenv ("SWITCHBOARD_LLM_IDLE_TIMEOUT_S");
    if (idle && atoi (idle) > 0)
        p->idle_timeout_s = atoi (idle);
    const char *att = getenv ("SWITCHBOARD_LLM_MAX_ATTEMPTS");
    if (att && atoi (att) > 0)
        p->max_attempts = atoi (att);
    const char *bo = getenv ("SWITCHBOARD_LLM_BACKOFF_MS");
    if (bo && atoi (bo) > 0)
        p->backoff_base_ms = atoi (bo);
}

static int
s_set_kind (sb_llm_provider_t *p, const char *kind, char *err, size_t errlen)
{
    if (strcmp (kind, "demo") == 0) {
        p->demo = true;
        p->kind = SB_PROVIDER_RESPONSES;
        return 0;
    }
    if (sb_provider_kind_parse (kind, &p->kind) != 0) {
        snprintf (err, errlen, "unknown provider kind '%s' (responses, chat, anthropic, codex, demo)", kind);
        return -1;
    }
    return 0;
}

static void
s_copy (char *dst, size_t n, const char *src)
{
    snprintf (dst, n, "%s", src ? src : "");
}

/*  The key for a provider: its key_file, else its key_env, else the
    conventional variable of its kind. A missing key is not an error here:
    local servers (Ollama, llama.cpp) need none. */
static int
s_load_key (sb_llm_provider_t *p, const char *key_env, const char *key_file, char *err, size_t errlen)
{
    const char *file = key_file ? key_file : sb_llm_keys_getenv ("SWITCHBOARD_LLM_KEY_FILE");
    if (file && *file) {
        p->api_key = sb_llm_read_key_file (file, err, errlen);
        return p->api_key ? 0 : -1;
    }
    s_copy (p->key_env, sizeof p->key_env, key_env ? key_env
            : p->kind == SB_PROVIDER_ANTHROPIC ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
    /* An empty variable counts as unset, so that `OPENAI_API_KEY=` in a
       shell does not hide the next one in line. */
    const char *env = key_env ? sb_llm_keys_getenv (key_env) : NULL;
    if (!env || !*env)
        env = sb_llm_keys_getenv ("SWITCHBOARD_LLM_KEY");
    if (!env || !*env)
        env = sb_llm_keys_getenv (p->kind == SB_PROVIDER_ANTHROPIC ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
    if (env && *env)
        p->api_key = strdup (env);
    return 0;
}

static const char *
s_default_url (const sb_llm_provider_t *p)
{
    switch (p->kind) {
        case SB_PROVIDER_ANTHROPIC: return "https://api.anthropic.com/v1";
        case SB_PROVIDER_CHAT: return "http://localhost:11434/v1";
        case SB_PROVIDER_CODEX: return "https://chatgpt.com/backend-api/codex";
        default: return "https://api.openai.com/v1";
    }
}

/*  context_window and max_output_tokens of a provider or model object:
    both optional, each within its bounds. */
static int
s_limits_from_json (json_t *o, uint64_t *window, uint64_t *output, char *err, size_t errlen)
{
    json_t *w = json_object_get (o, "context_window");
    json_t *m = json_object_get (o, "max_output_tokens");
    if (w && (!json_is_integer (w) || json_integer_value (w) < SB_LLM_WINDOW_MIN
              || (uint64_t) json_integer_value (w) > SB_LLM_WINDOW_MAX)) {
        snprintf (err, errlen, "context_window must be an integer from %d to %llu tokens",
                  SB_LLM_WINDOW_MIN, (unsigned long long) SB_LLM_WINDOW_MAX);
        return -1;
    }
    if (m && (!json_is_integer (m) || json_integer_value (m) < 1
              || (uint64_t) json_integer_value (m) > SB_LLM_WINDOW_MAX)) {
        snprintf (err, errlen, "max_output_tokens must be an integer from 1 to %llu",
                  (unsigned long long) SB_LLM_WINDOW_MAX);
        return -1;
    }
    if (w)
        *window = (uint64_t) json_integer_value (w);
    if (m)
        *output = (uint64_t) json_integer_value (m);
    return 0;
}

bool
sb_llm_model_takes_images (const sb_llm_provider_t *p, const char *model)
{
    if (p->demo || p->no_images)
        return false;
    const char *m = model && *model ? model : p->model;
    for (int k = 0; k < p->nmodels; k++)
        if (strcmp (p->models [k], m) == 0)
            return !p->model_no_images [k];
    return true;
}

/*  What is wrong with a providers file, in the form docs/llm.md promises:
    the file, the entry when there is one (its name, else its index), then
    err's own words ("bad provider configuration in FILE, entry NAME:
    unknown provider kind 'chatt' ..."). */
static void
s_file_error (const char *file, const char *entry, char *err, size_t errlen)
{
    char what [512];
    snprintf (what, sizeof what, "%s", err);
    snprintf (err, errlen, "bad provider configuration in %s%s%s: %s", file, entry ? ", entry " : "",
              entry ? entry : "", what);
}

static int s_entries_from_json (sb_llm_config_t *cfg, json_t *list, char *entry, size_t entrylen,
                                char *err, size_t errlen);

static int
s_from_json (sb_llm_config_t *cfg, const char *file, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_load_file (file, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf (err, errlen, "line %d: %s", jerr.line, jerr.text);
        s_file_error (file, NULL, err, errlen);
        return -1;
    }
    json_t *list = json_object_get (root, "providers");
    if (!json_is_array (list) || json_array_size (list) == 0
    ||  json_array_size (list) > SB_LLM_MAX_PROVIDERS) {
        snprintf (err, errlen, "\"providers\" must be an array of 1 to %d providers", SB_LLM_MAX_PROVIDERS);
        s_file_error (file, NULL, err, errlen);
        json_decref (root);
        return -1;
    }
    char entry [80] = "";
    int rc = s_entries_from_json (cfg, list, entry, sizeof entry, err, errlen);
    if (rc)
        s_file_error (file, entry, err, errlen);
    const char *dflt = json_string_value (json_object_get (root, "default"));
    if (rc == 0 && dflt) {
        cfg->dflt = -1;
        for (int i = 0; i < cfg->count; i++)
            if (strcmp (cfg->providers [i].name, dflt) == 0)
                cfg->dflt = i;
        if (cfg->dflt < 0) {
            snprintf (err, errlen, "default provider '%.64s' is not defined", dflt);
            s_file_error (file, NULL, err, errlen);
            rc = -1;
        }
    }
    json_decref (root);
    return rc;
}

/*  The entries of "providers", each checked; on the first that breaks a
    rule, -1 with its label (name, else "providers[K]") in entry and the
    rule in err. */
static int
s_entries_from_json (sb_llm_config_t *cfg, json_t *list, char *entry, size_t entrylen, char *err, size_t errlen)
{
    size_t k;
    json_t *o;
    int rc = 0;
    json_array_foreach (list, k, o) {
        snprintf (entry, entrylen, "providers[%zu]", k);
        sb_llm_provider_t *p = &cfg->providers [cfg->count];
        memset (p, 0, sizeof *p);
        s_defaults (p);
        const char *name = json_string_value (json_object_get (o, "name"));
        const char *kind = json_string_value (json_object_get (o, "kind"));
        if (!name || !*name || strlen (name) >= sizeof p->name || !kind) {
            snprintf (err, errlen, "an entry needs a \"name\" (< 64 chars) and a \"kind\"");
            rc = -1;
            break;
        }
        snprintf (entry, entrylen, "%s", name);
        s_copy (p->name, sizeof p->name, name);
        if ((rc = s_set_kind (p, kind, err, errlen)))
            break;
        const char *url = json_string_value (json_object_get (o, "base_url"));
        s_copy (p->base_url, sizeof p->base_url, url ? url : p->demo ? "" : s_default_url (p));
        s_copy (p->model, sizeof p->model, json_string_value (json_object_get (o, "model")));
        s_copy (p->token_file, sizeof p->token_file, json_string_value (json_object_get (o, "token_file")));
        s_copy (p->token_url, sizeof p->token_url, json_string_value (json_object_get (o, "token_url")));
        s_copy (p->client_id, sizeof p->client_id, json_string_value (json_object_get (o, "client_id")));
        if ((rc = s_limits_from_json (o, &p->context_window, &p->max_output_tokens, err, errlen)))
            break;
        p->no_images = json_is_false (json_object_get (o, "images"));
        if (json_object_get (o, "prices")
        &&  (rc = sb_price_from_json (json_object_get (o, "prices"), &p->price, err, errlen)))
            break;
        json_t *models = json_object_get (o, "models");
        size_t m;
        json_t *mv;
        json_array_foreach (models, m, mv) {
            if (p->nmodels >= SB_LLM_MAX_MODELS)
                break;
            //  A model is a name, or {"name", "context_window"?, "max_output_tokens"?, "prices"?}.
            const char *id = json_is_string (mv) ? json_string_value (mv)
                           : json_string_value (json_object_get (mv, "name"));
            if (!id) {
                snprintf (err, errlen, "models[%zu] must be a name or "
                          "{\"name\", \"context_window\", \"max_output_tokens\", \"prices\"}", m);
                rc = -1;
                break;
            }
            int i = p->nmodels;
            s_copy (p->models [i], sizeof p->models [0], id);
            p->model_no_images [i] = json_is_object (mv) && json_is_false (json_object_get (mv, "images"));
            if (json_is_object (mv)
            &&  (rc = s_limits_from_json (mv, &p->model_window [i], &p->model_output [i], err, errlen)))
                break;
            if (json_object_get (mv, "prices")
            &&  (rc = sb_price_from_json (json_object_get (mv, "prices"), &p->model_price [i], err, errlen))) {
                char what [300];
                snprintf (what, sizeof what, "%s", err);
                snprintf (err, errlen, "model %.128s: %s", id, what);
                break;
            }
            p->nmodels++;
        }
        if (rc)
            break;
        if (json_is_integer (json_object_get (o, "max_attempts")))
            p->max_attempts = (int) json_integer_value (json_object_get (o, "max_attempts"));
        if (json_is_integer (json_object_get (o, "idle_timeout_s")))
            p->idle_timeout_s = (int) json_integer_value (json_object_get (o, "idle_timeout_s"));
        if (json_is_integer (json_object_get (o, "connect_timeout_ms")))
            p->connect_timeout_ms = (int) json_integer_value (json_object_get (o, "connect_timeout_ms"));
        if (json_is_integer (json_object_get (o, "backoff_base_ms")))
            p->backoff_base_ms = (int) json_integer_value (json_object_get (o, "backoff_base_ms"));
        if (p->max_attempts < 1 || p->max_attempts > 20 || p->idle_timeout_s < 1) {
            snprintf (err, errlen, "max_attempts must be 1..20 and idle_timeout_s >= 1");
            rc = -1;
            break;
        }
        if (p->kind == SB_PROVIDER_CODEX && !p->token_file [0]) {
            snprintf (err, errlen, "a codex provider needs \"token_file\"");
            rc = -1;
            break;
        }
        if (p->kind != SB_PROVIDER_CODEX && !p->demo
        &&  (rc = s_load_key (p, json_string_value (json_object_get (o, "key_env")),
                              json_string_value (json_object_get (o, "key_file")), err, errlen)))
            break;
        cfg->count++;
    }
    return rc;
}

int
sb_llm_config_load (sb_llm_config_t *cfg, const char *kind, const char *url, const char *model,
                    const char *file, char *err, size_t errlen)
{
    memset (cfg, 0, sizeof *cfg);
    if (file) {
        if (s_from_json (cfg, file, err, errlen)) {
            sb_llm_config_clear (cfg);
            return -1;
        }
        if (!kind)
            return 0;
    }
    if (cfg->count >= SB_LLM_MAX_PROVIDERS) {
        snprintf (err, errlen, "too many providers");
        return -1;
    }
    sb_llm_provider_t *p = &cfg->providers [cfg->count];
    memset (p, 0, sizeof *p);
    s_defaults (p);
    if (s_set_kind (p, kind ? kind : "demo", err, errlen))
        return -1;
    s_copy (p->name, sizeof p->name, kind ? kind : "demo");
    s_copy (p->base_url, sizeof p->base_url, url ? url : p->demo ? "" : s_default_url (p));
    s_copy (p->model, sizeof p->model, model ? model : p->demo ? "demo" : "");
    if (p->kind == SB_PROVIDER_CODEX) {
        const char *tf = getenv ("SWITCHBOARD_CODEX_TOKEN_FILE");
        const char *tu = getenv ("SWITCHBOARD_CODEX_TOKEN_URL");
        if (!tf) {
            snprintf (err, errlen, "--llm codex needs SWITCHBOARD_CODEX_TOKEN_FILE (or a --providers file)");
            return -1;
        }
        s_copy (p->token_file, sizeof p->token_file, tf);
        s_copy (p->token_url, sizeof p->token_url, tu ? tu : "https://auth.openai.com/oauth/token");
    }
    else
    if (!p->demo && s_load_key (p, NULL, NULL, err, errlen))
        return -1;
    if (!p->model [0] && !p->demo) {
        snprintf (err, errlen, "--llm %s needs --model", p->name);
        sb_llm_config_clear (cfg);
        return -1;
    }
    cfg->dflt = cfg->count;
    cfg->count++;
    return 0;
}

void
sb_llm_config_clear (sb_llm_config_t *cfg)
{
    for (int i = 0; i < SB_LLM_MAX_PROVIDERS; i++) {
        char *key = cfg->providers [i].api_key;
        if (key) {
            explicit_bzero (key, strlen (key));
            free (key);
            cfg->providers [i].api_key = NULL;
        }
    }
    cfg->count = 0;
}

sb_llm_provider_t *
sb_llm_config_find (sb_llm_config_t *cfg, const char *name)
{
    if (!name || !*name)
        return cfg->count ? &cfg->providers [cfg->dflt] : NULL;
    for (int i = 0; i < cfg->count; i++)
        if (strcmp (cfg->providers [i].name, name) == 0)
            return &cfg->providers [i];
    return NULL;
}

/*  True when the URL's host is a loopback address: 127.0.0.0/8, ::1 or
    localhost. */
static bool
s_loopback (const char *url)
{
    const char *host = strstr (url, "://");
    host = host ? host + 3 : url;
    const char *end = host + strcspn (host, "/?#");
    const char *at = memchr (host, '@', (size_t) (end - host));
    if (at)
        host = at + 1;
    size_t n;
    if (*host == '[')
        n = strcspn (host, "]") + 1;
    else
        n = strcspn (host, ":/?#");
    if ((n == 9 && strncasecmp (host, "localhost", 9) == 0) || (n == 5 && strncmp (host, "[::1]", 5) == 0))
        return true;
    /* 127.x.y.z, and not a name such as 127.example.com */
    if (n < 7 || strncmp (host, "127.", 4) != 0)
        return false;
    for (size_t k = 0; k < n; k++)
        if (!(host [k] == '.' || (host [k] >= '0' && host [k] <= '9')))
            return false;
    return true;
}

const char *
sb_llm_config_missing_key (const sb_llm_provider_t *p)
{
    if (p->demo)
        return NULL;
    if (p->kind == SB_PROVIDER_CODEX)
        return access (p->token_file, R_OK) == 0 ? NULL : "SWITCHBOARD_CODEX_TOKEN_FILE";
    if (p->api_key)
        return NULL;
    if (p->kind != SB_PROVIDER_ANTHROPIC && s_loopback (p->base_url))
        return NULL;
    return p->key_env [0] ? p->key_env : "OPENAI_API_KEY";
}

/*  Known model families, by name prefix, longest first where one prefix
    holds another. Figures are the providers' published limits, rounded
    down where a family varies; a providers file overrides them. */
static const struct {
    const char *prefix;
    uint64_t window, output;
} s_families [] = {
    { "gpt-5", 400000, 128000 },
    { "gpt-4.1", 1047576, 32768 },
    { "gpt-4o", 128000, 16384 },
    { "gpt-4-turbo", 128000, 4096 },
    { "gpt-4", 8192, 4096 },
    { "o1", 200000, 100000 },
    { "o3", 200000, 100000 },
    { "o4", 200000, 100000 },
    { "codex", 400000, 128000 },
    { "claude-opus-4", 200000, 32000 },
    { "claude-sonnet-4", 200000, 64000 },
    { "claude-haiku-4", 200000, 64000 },
    { "claude-3-7", 200000, 64000 },
    { "claude-3-5", 200000, 8192 },
    { "claude", 200000, 8192 },
    { "qwen3", 32768, 8192 },
    { "qwen2.5", 32768, 8192 },
    { "llama3", 131072, 8192 },
    { "mistral", 32768, 8192 },
    { "gemma", 8192, 4096 },
    { "demo", 1000000, 16384 },
};

void
sb_llm_model_limits (const sb_llm_config_t *cfg, const sb_llm_provider_t *p, const char *model,
                     sb_llm_limits_t *out)
{
    memset (out, 0, sizeof *out);
    if (!model || !*model)
        model = p ? p->model : "";
    uint64_t fam_window = 0, fam_output = 0;
    //  An id such as "openai/gpt-5" or "library/qwen3:8b" names its family
    //  after the last slash.
    const char *base = strrchr (model, '/');
    base = base ? base + 1 : model;
    for (size_t k = 0; k < sizeof s_families / sizeof s_families [0]; k++)
        if (strncasecmp (base, s_families [k].prefix, strlen (s_families [k].prefix)) == 0) {
            fam_window = s_families [k].window;
            fam_output = s_families [k].output;
            break;
        }
    uint64_t m_window = 0, m_output = 0;
    for (int i = 0; p && i < p->nmodels; i++)
        if (strcmp (p->models [i], model) == 0) {
            m_window = p->model_window [i];
            m_output = p->model_output [i];
            break;
        }
    if (m_window || (p && p->context_window)) {
        out->context_window = m_window ? m_window : p->context_window;
        out->source = "configured";
    }
    else
    if (cfg && cfg->context_window) {
        out->context_window = cfg->context_window;
        out->source = "flag";
    }
    else
    if (fam_window) {
        out->context_window = fam_window;
        out->source = "family";
    }
    else {
        out->context_window = SB_LLM_DEFAULT_WINDOW;
        out->source = "default";
    }
    out->max_output_tokens = m_output ? m_output : p && p->max_output_tokens ? p->max_output_tokens
                           : fam_output ? fam_output : SB_LLM_DEFAULT_OUTPUT;
    if (out->max_output_tokens > out->context_window)
        out->max_output_tokens = out->context_window;
}

bool
sb_llm_model_price (const sb_llm_provider_t *p, const char *model, sb_price_t *out)
{
    if ((!model || !*model) && p)
        model = p->model;
    if (p && model)
        for (int i = 0; i < p->nmodels; i++)
            if (p->model_price [i].set && strcmp (p->models [i], model) == 0) {
                *out = p->model_price [i];
                return true;
            }
    if (p && p->price.set) {
        *out = p->price;
        return true;
    }
    return sb_price_default (model, out);
}

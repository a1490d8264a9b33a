/*  tests/unit/test_llm_config.c — the llm actor's provider configuration:
    which providers need a key, and which variable names it when it is
    missing (serve warns with it at start). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/llm/config.h"

static sb_llm_provider_t
s_provider (sb_provider_kind_t kind, const char *url, const char *key_env, char *key)
{
    sb_llm_provider_t p;
    memset (&p, 0, sizeof p);
    p.kind = kind;
    snprintf (p.base_url, sizeof p.base_url, "%s", url);
    snprintf (p.key_env, sizeof p.key_env, "%s", key_env);
    p.api_key = key;
    return p;
}

Test (llm_config, a_cloud_provider_without_a_key_names_its_variable)
{
    sb_llm_provider_t p = s_provider (SB_PROVIDER_RESPONSES, "https://api.openai.com/v1", "OPENAI_API_KEY", NULL);
    cr_assert_str_eq (sb_llm_config_missing_key (&p), "OPENAI_API_KEY");
    p = s_provider (SB_PROVIDER_CHAT, "http://gpu-box:8000/v1", "MY_KEY", NULL);
    cr_assert_str_eq (sb_llm_config_missing_key (&p), "MY_KEY");
    //  a name that merely starts like a loopback address is not one
    p = s_provider (SB_PROVIDER_CHAT, "http://127.example.com/v1", "OPENAI_API_KEY", NULL);
    cr_assert_str_eq (sb_llm_config_missing_key (&p), "OPENAI_API_KEY");
    p = s_provider (SB_PROVIDER_CHAT, "http://localhost.example.com/v1", "OPENAI_API_KEY", NULL);
    cr_assert_str_eq (sb_llm_config_missing_key (&p), "OPENAI_API_KEY");
}

Test (llm_config, a_loopback_server_needs_no_key)
{
    const char *urls [] = {
        "http://localhost:11434/v1", "http://LOCALHOST/v1", "http://127.0.0.1:8080/v1",
        "http://127.1.2.3/v1", "http://[::1]:8080/v1", "http://user@127.0.0.1:9/v1",
    };
    for (size_t k = 0; k < sizeof urls / sizeof urls [0]; k++) {
        sb_llm_provider_t p = s_provider (SB_PROVIDER_CHAT, urls [k], "OPENAI_API_KEY", NULL);
        cr_assert_null (sb_llm_config_missing_key (&p), "%s", urls [k]);
        p.kind = SB_PROVIDER_RESPONSES;
        cr_assert_null (sb_llm_config_missing_key (&p), "%s", urls [k]);
    }
}

Test (llm_config, anthropic_always_needs_a_key)
{
    sb_llm_provider_t p = s_provider (SB_PROVIDER_ANTHROPIC, "http://127.0.0.1:9/v1", "ANTHROPIC_API_KEY", NULL);
    cr_assert_str_eq (sb_llm_config_missing_key (&p), "ANTHROPIC_API_KEY");
    char key [] = "sk-ant-x";
    p.api_key = key;
    cr_assert_null (sb_llm_config_missing_key (&p));
}

Test (llm_config, codex_needs_a_readable_token_file)
{
    sb_llm_provider_t p = s_provider (SB_PROVIDER_CODEX, "https://chatgpt.com/backend-api/codex", "", NULL);
    snprintf (p.token_file, sizeof p.token_file, "/nonexistent/switchboard/auth.json");
    cr_assert_str_eq (sb_llm_config_missing_key (&p), "SWITCHBOARD_CODEX_TOKEN_FILE");
    char path [] = "/tmp/sb-test-codex-XXXXXX";
    int fd = mkstemp (path);
    cr_assert_geq (fd, 0);
    snprintf (p.token_file, sizeof p.token_file, "%s", path);
    cr_assert_null (sb_llm_config_missing_key (&p));
    unlink (path);
}

Test (llm_config, the_demo_needs_nothing)
{
    sb_llm_provider_t p = s_provider (SB_PROVIDER_RESPONSES, "", "", NULL);
    p.demo = true;
    cr_assert_null (sb_llm_config_missing_key (&p));
}

Test (llm_config, an_empty_key_variable_counts_as_unset)
{
    setenv ("SWITCHBOARD_LLM_KEY", "", 1);
    setenv ("OPENAI_API_KEY", "sk-fallback-1", 1);
    unsetenv ("SWITCHBOARD_LLM_KEY_FILE");
    sb_llm_config_t cfg;
    char err [256];
    cr_assert_eq (sb_llm_config_load (&cfg, "responses", "https://api.openai.com/v1", "m", NULL,
                                      err, sizeof err), 0, "%s", err);
    cr_assert_not_null (cfg.providers [0].api_key);
    cr_assert_str_eq (cfg.providers [0].api_key, "sk-fallback-1");
    cr_assert_null (sb_llm_config_missing_key (&cfg.providers [0]));
    sb_llm_config_clear (&cfg);
    setenv ("OPENAI_API_KEY", "", 1);
    cr_assert_eq (sb_llm_config_load (&cfg, "responses", "https://api.openai.com/v1", "m", NULL,
                                      err, sizeof err), 0, "%s", err);
    cr_assert_null (cfg.providers [0].api_key);
    cr_assert_str_eq (sb_llm_config_missing_key (&cfg.providers [0]), "OPENAI_API_KEY");
    sb_llm_config_clear (&cfg);
}

//  A providers file in a temporary path; the caller unlinks it.
static void
s_file (char *path, const char *json)
{
    int fd = mkstemp (path);
    cr_assert_geq (fd, 0);
    cr_assert_eq (write (fd, json, strlen (json)), (ssize_t) strlen (json));
    close (fd);
}

Test (llm_config, model_limits_come_from_the_file_the_flag_the_family_or_the_default)
{
    setenv ("OPENAI_API_KEY", "sk-limits-1", 1);
    char path [] = "/tmp/sb-test-providers-XXXXXX";
    s_file (path, "{\"providers\": [{\"name\": \"p\", \"kind\": \"responses\", \"model\": \"local-a\","
                  " \"max_output_tokens\": 2000,"
                  " \"models\": [\"gpt-5.1\", {\"name\": \"local-a\", \"context_window\": 32768},"
                  "              {\"name\": \"local-b\"}]},"
                  " {\"name\": \"q\", \"kind\": \"chat\", \"base_url\": \"http://127.0.0.1:9/v1\","
                  "  \"model\": \"x\", \"context_window\": 9000}]}");
    sb_llm_config_t cfg;
    char err [512];
    cr_assert_eq (sb_llm_config_load (&cfg, NULL, NULL, NULL, path, err, sizeof err), 0, "%s", err);
    unlink (path);
    sb_llm_limits_t l;
    sb_llm_provider_t *p = sb_llm_config_find (&cfg, "p");
    //  the model's row in the file, the provider's output reserve
    sb_llm_model_limits (&cfg, p, NULL, &l);
    cr_assert_eq (l.context_window, 32768);
    cr_assert_eq (l.max_output_tokens, 2000);
    cr_assert_str_eq (l.source, "configured");
    //  a known family, with the file's output reserve still
    sb_llm_model_limits (&cfg, p, "gpt-5.1", &l);
    cr_assert_eq (l.context_window, 400000);
    cr_assert_str_eq (l.source, "family");
    //  the flag where the file says nothing; an unknown model gets the default
    sb_llm_model_limits (&cfg, p, "local-b", &l);
    cr_assert_eq (l.context_window, SB_LLM_DEFAULT_WINDOW);
    cr_assert_str_eq (l.source, "default");
    cfg.context_window = 50000;
    sb_llm_model_limits (&cfg, p, "local-b", &l);
    cr_assert_eq (l.context_window, 50000);
    cr_assert_str_eq (l.source, "flag");
    sb_llm_model_limits (&cfg, p, "gpt-5.1", &l);
    cr_assert_str_eq (l.source, "flag");
    //  the provider's own window beats the flag; its output never exceeds it
    sb_llm_model_limits (&cfg, sb_llm_config_find (&cfg, "q"), "anything", &l);
    cr_assert_eq (l.context_window, 9000);
    cr_assert_leq (l.max_output_tokens, 9000);
    cr_assert_str_eq (l.source, "configured");
    //  a family after a vendor's path
    sb_llm_model_limits (NULL, NULL, "anthropic/claude-sonnet-4-5", &l);
    cr_assert_eq (l.context_window, 200000);
    cr_assert_eq (l.max_output_tokens, 64000);
    sb_llm_config_clear (&cfg);
}

Test (llm_config, window_values_out_of_range_are_refused)
{
    setenv ("OPENAI_API_KEY", "sk-limits-2", 1);
    const char *bad [] = {
        "{\"providers\": [{\"name\": \"p\", \"kind\": \"responses\", \"model\": \"m\", \"context_window\": 10}]}",
        "{\"providers\": [{\"name\": \"p\", \"kind\": \"responses\", \"model\": \"m\", \"context_window\": \"big\"}]}",
        "{\"providers\": [{\"name\": \"p\", \"kind\": \"responses\", \"model\": \"m\","
        " \"models\": [{\"name\": \"m\", \"max_output_tokens\": 0}]}]}",
        "{\"providers\": [{\"name\": \"p\", \"kind\": \"responses\", \"model\": \"m\", \"models\": [7]}]}",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        char path [] = "/tmp/sb-test-providers-XXXXXX";
        s_file (path, bad [k]);
        sb_llm_config_t cfg;
        char err [512] = "";
        cr_assert_eq (sb_llm_config_load (&cfg, NULL, NULL, NULL, path, err, sizeof err), -1, "%s", bad [k]);
        cr_assert (strstr (err, "context_window") || strstr (err, "max_output_tokens") || strstr (err, "models["),
                   "%s", err);
        unlink (path);
    }
}

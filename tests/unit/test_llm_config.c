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

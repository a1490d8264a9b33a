/*  actors/llm/keys.h — provider keys taken out of the process environment.

    A key read from the environment stays readable for as long as the
    process lives: /proc/PID/environ shows the initial environment block
    (between the kernel's env_start and env_end), and unsetenv does not
    touch it. A tool started by the server reads it as
    `tr '\0' '\n' < /proc/$PPID/environ`. So the variables a key may come
    from are copied once at start, before any thread exists, and their
    values are overwritten where they were (docs/llm.md). */
#ifndef SB_LLM_KEYS_H
#define SB_LLM_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#define SB_LLM_KEYS_MAX 64

/*  True when a variable of that name may hold a provider key whatever the
    configuration: OPENAI_API_KEY, ANTHROPIC_API_KEY and SWITCHBOARD_LLM_KEY*. */
bool sb_llm_keys_known_name (const char *name, size_t len);

/*  Copies the value of every variable the llm configuration may read a
    key from (the known names, and each "key_env" of the providers file,
    NULL for none), then wipes it: the value is overwritten in the initial
    environment block and in environ, and the variable is unset. Call it
    from main before any thread starts, as it changes environ. A providers
    file that cannot be read is left to the configuration to report.
    Returns the number of variables taken. */
int sb_llm_keys_take (const char *providers_file);

/*  The value of a variable the llm configuration reads: the copy taken,
    else getenv. Safe from any thread once sb_llm_keys_take has returned. */
const char *sb_llm_keys_getenv (const char *name);

#endif

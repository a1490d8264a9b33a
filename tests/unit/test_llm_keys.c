/*  tests/unit/test_llm_keys.c — provider keys leave the environment
    (issue 9 item 4): sb_llm_keys_take copies every variable a key may come
    from, wipes its value where it was, in the initial block that
    /proc/self/environ shows too, and unsets it; other variables stay. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/llm/keys.h"

#define BLOCK_KEY "sk-unit-BLOCK-4242"

extern char **environ;

static char *
s_read (const char *path, size_t *len)
{
    FILE *f = fopen (path, "rb");
    cr_assert_not_null (f, "%s", path);
    static char buf [1 << 20];
    *len = fread (buf, 1, sizeof buf, f);
    fclose (f);
    return buf;
}

static bool
s_holds (const char *buf, size_t len, const char *s)
{
    return memmem (buf, len, s, strlen (s)) != NULL;
}

Test (llm_keys, known_names)
{
    cr_assert (sb_llm_keys_known_name ("OPENAI_API_KEY", 14));
    cr_assert (sb_llm_keys_known_name ("ANTHROPIC_API_KEY", 17));
    cr_assert (sb_llm_keys_known_name ("SWITCHBOARD_LLM_KEY", 19));
    cr_assert (sb_llm_keys_known_name ("SWITCHBOARD_LLM_KEY_FILE", 24));
    cr_assert (sb_llm_keys_known_name ("SWITCHBOARD_LLM_KEY2", 20));
    cr_assert_not (sb_llm_keys_known_name ("OPENAI_API_KEY_X", 16));
    cr_assert_not (sb_llm_keys_known_name ("OPENAI_API", 10));
    cr_assert_not (sb_llm_keys_known_name ("SWITCHBOARD_LLM_MAX_ATTEMPTS", 28));
}

Test (llm_keys, taken_values_are_copied_wiped_and_unset)
{
    char path [] = "/tmp/sb-keys-XXXXXX";
    int fd = mkstemp (path);
    cr_assert (fd >= 0);
    const char *doc = "{\"providers\": [{\"name\": \"a\", \"kind\": \"chat\", \"key_env\": \"MY_UNIT_KEY\"},"
                      " {\"name\": \"b\", \"kind\": \"chat\", \"key_env\": \"BAD=NAME\"}]}";
    cr_assert_eq (write (fd, doc, strlen (doc)), (ssize_t) strlen (doc));
    close (fd);
    setenv ("OPENAI_API_KEY", "sk-unit-openai", 1);
    setenv ("SWITCHBOARD_LLM_KEY_EXTRA", "sk-unit-extra", 1);
    setenv ("MY_UNIT_KEY", "sk-unit-named", 1);
    setenv ("SWITCHBOARD_LLM_MAX_ATTEMPTS", "3", 1);
    const char *openai = getenv ("OPENAI_API_KEY");
    const char *named = getenv ("MY_UNIT_KEY");

    cr_assert_geq (sb_llm_keys_take (path), 3);
    unlink (path);
    cr_assert_str_eq (sb_llm_keys_getenv ("OPENAI_API_KEY"), "sk-unit-openai");
    cr_assert_str_eq (sb_llm_keys_getenv ("SWITCHBOARD_LLM_KEY_EXTRA"), "sk-unit-extra");
    cr_assert_str_eq (sb_llm_keys_getenv ("MY_UNIT_KEY"), "sk-unit-named");
    //  gone from the environment, and wiped where they were
    cr_assert_null (getenv ("OPENAI_API_KEY"));
    cr_assert_null (getenv ("SWITCHBOARD_LLM_KEY_EXTRA"));
    cr_assert_null (getenv ("MY_UNIT_KEY"));
    cr_assert_null (strstr (openai, "sk-unit"));
    cr_assert_null (strstr (named, "sk-unit"));
    for (char **e = environ; *e; e++)
        cr_assert_null (strstr (*e, "sk-unit"), "%s", *e);
    //  what is not a key stays, and reads through
    cr_assert_str_eq (getenv ("SWITCHBOARD_LLM_MAX_ATTEMPTS"), "3");
    cr_assert_str_eq (sb_llm_keys_getenv ("SWITCHBOARD_LLM_MAX_ATTEMPTS"), "3");
    cr_assert_null (sb_llm_keys_getenv ("NOT_SET_ANYWHERE_42"));
}

//  The initial block: only a process started with the key in its
//  environment has one that holds it, so the test starts this binary
//  again on itself with OPENAI_API_KEY set, and that run checks
//  /proc/self/environ before and after, with the variable set again in
//  between so that environ no longer points into the block.
Test (llm_keys, the_initial_block_that_proc_shows_is_wiped)
{
    const char *mine = getenv ("OPENAI_API_KEY");
    if (!mine || strcmp (mine, BLOCK_KEY) != 0) {
        pid_t pid = fork ();
        cr_assert (pid >= 0);
        if (pid == 0) {
            char *argv [] = { "test_llm_keys", "--jobs", "1",
                              "--filter", "llm_keys/the_initial_block_that_proc_shows_is_wiped", NULL };
            char *envp [] = { "OPENAI_API_KEY=" BLOCK_KEY, "PATH=/usr/bin:/bin", NULL };
            execve ("/proc/self/exe", argv, envp);
            _exit (127);
        }
        int status;
        cr_assert_eq (waitpid (pid, &status, 0), pid);
        cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0,
                   "the run with the key in its environment failed (status %d)", status);
        return;
    }
    size_t len;
    char *buf = s_read ("/proc/self/environ", &len);
    cr_assert (s_holds (buf, len, BLOCK_KEY), "the block does not hold the key to start with");
    //  Once set again, environ points elsewhere: the block is found from
    //  the kernel's env_start and env_end, not through environ.
    setenv ("OPENAI_API_KEY", "sk-unit-replaced", 1);
    cr_assert_eq (sb_llm_keys_take (NULL), 1);
    cr_assert_str_eq (sb_llm_keys_getenv ("OPENAI_API_KEY"), "sk-unit-replaced");
    buf = s_read ("/proc/self/environ", &len);
    cr_assert_not (s_holds (buf, len, BLOCK_KEY), "/proc/self/environ still holds the key");
    //  the name stays, so a reader sees the value was taken
    cr_assert (s_holds (buf, len, "OPENAI_API_KEY="));
    cr_assert (s_holds (buf, len, "PATH=/usr/bin:/bin"));
}

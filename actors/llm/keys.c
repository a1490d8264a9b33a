/*  actors/llm/keys.c — provider keys taken out of the process environment
    (see keys.h). */
#include "actors/llm/keys.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

typedef struct {
    char *name;
    char *value;
} s_key_t;

//  Written only by sb_llm_keys_take, before any thread starts; read-only
//  afterwards, so readers need no lock.
static s_key_t s_keys [SB_LLM_KEYS_MAX];
static int s_nkeys;

//  The variables a providers file names (key_env), and how many.
typedef struct {
    char names [SB_LLM_KEYS_MAX][128];
    int count;
} s_names_t;

bool
sb_llm_keys_known_name (const char *name, size_t len)
{
    static const char prefix [] = "SWITCHBOARD_LLM_KEY";
    if ((len == 14 && strncmp (name, "OPENAI_API_KEY", 14) == 0)
    ||  (len == 17 && strncmp (name, "ANTHROPIC_API_KEY", 17) == 0))
        return true;
    return len >= sizeof prefix - 1 && strncmp (name, prefix, sizeof prefix - 1) == 0;
}

static bool
s_wanted (const s_names_t *extra, const char *name, size_t len)
{
    if (sb_llm_keys_known_name (name, len))
        return true;
    for (int k = 0; k < extra->count; k++)
        if (strlen (extra->names [k]) == len && strncmp (extra->names [k], name, len) == 0)
            return true;
    return false;
}

//  Every key_env of the providers file. The file is parsed again, and
//  checked, by the configuration; here a bad one only names nothing.
static void
s_file_names (const char *file, s_names_t *out)
{
    json_t *root = file ? json_load_file (file, 0, NULL) : NULL;
    json_t *list = json_object_get (root, "providers");
    size_t k;
    json_t *o;
    json_array_foreach (list, k, o) {
        const char *name = json_string_value (json_object_get (o, "key_env"));
        if (out->count < SB_LLM_KEYS_MAX && name && *name && strlen (name) < sizeof out->names [0]
        &&  !strchr (name, '='))
            snprintf (out->names [out->count++], sizeof out->names [0], "%s", name);
    }
    json_decref (root);
}

//  The initial environment block, [env_start, env_end) of /proc/self/stat
//  (fields 50 and 51): what /proc/PID/environ reads, whatever environ
//  points to now.
static bool
s_env_block (char **start, char **end)
{
    FILE *f = fopen ("/proc/self/stat", "re");
    if (!f)
        return false;
    char buf [2048];
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf [n] = 0;
    //  the command name (field 2) may hold spaces and parentheses: count
    //  fields from the last ')'
    char *p = strrchr (buf, ')');
    if (!p)
        return false;
    unsigned long long v [2] = { 0, 0 };
    int field = 2;
    for (p = p + 1; *p && field < 51; ) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        field++;
        if (field >= 50)
            v [field - 50] = strtoull (p, NULL, 10);
        p += strcspn (p, " ");
    }
    if (field != 51 || v [0] == 0 || v [1] <= v [0])
        return false;
    *start = (char *) (uintptr_t) v [0];
    *end = (char *) (uintptr_t) v [1];
    return true;
}

//  Overwrites the value of a wanted NAME=value string in place.
static void
s_wipe (const s_names_t *extra, char *entry, size_t len)
{
    char *eq = memchr (entry, '=', len);
    if (eq && s_wanted (extra, entry, (size_t) (eq - entry)))
        explicit_bzero (eq + 1, len - (size_t) (eq + 1 - entry));
}

int
sb_llm_keys_take (const char *providers_file)
{
    s_names_t *extra = calloc (1, sizeof *extra);
    if (!extra)
        return 0;
    s_file_names (providers_file, extra);
    //  Copy first: getenv answers with the first of two same-named
    //  variables, and so does sb_llm_keys_getenv.
    for (char **e = environ; e && *e; e++) {
        char *eq = strchr (*e, '=');
        if (!eq || !s_wanted (extra, *e, (size_t) (eq - *e)) || s_nkeys >= SB_LLM_KEYS_MAX)
            continue;
        size_t len = (size_t) (eq - *e);
        bool seen = false;
        for (int k = 0; k < s_nkeys && !seen; k++)
            seen = strlen (s_keys [k].name) == len && strncmp (s_keys [k].name, *e, len) == 0;
        if (seen)
            continue;
        s_keys [s_nkeys].name = strndup (*e, len);
        s_keys [s_nkeys].value = strdup (eq + 1);
        if (!s_keys [s_nkeys].name || !s_keys [s_nkeys].value) {
            free (s_keys [s_nkeys].name);
            free (s_keys [s_nkeys].value);
            continue;
        }
        s_nkeys++;
    }
    //  Then wipe: the initial block that /proc/PID/environ shows, and
    //  every string environ points to (a variable set before main lives
    //  elsewhere). The names stay, so a reader sees the value is gone.
    char *start, *end;
    if (s_env_block (&start, &end))
        for (char *q = start; q < end; ) {
            size_t n = strnlen (q, (size_t) (end - q));
            s_wipe (extra, q, n);
            q += n + 1;
        }
    for (char **e = environ; e && *e; e++)
        s_wipe (extra, *e, strlen (*e));
    //  Children the server starts build their environment from an
    //  allowlist, but nothing should find the emptied names either.
    for (int k = 0; k < s_nkeys; k++)
        unsetenv (s_keys [k].name);
    free (extra);
    return s_nkeys;
}

const char *
sb_llm_keys_getenv (const char *name)
{
    for (int k = 0; k < s_nkeys; k++)
        if (strcmp (s_keys [k].name, name) == 0)
            return s_keys [k].value;
    return getenv (name);
}

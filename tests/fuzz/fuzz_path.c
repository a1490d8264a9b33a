/*  tests/fuzz/fuzz_path.c — tool path resolution against hostile input.

    Input: one flag byte (bit 0: resolve for writing; bit 1: prefix the
    path with the workspace, so absolute paths inside get explored too),
    then the path bytes, NULs and all. The workspace is a fixed temporary tree with symlinks that
    stay inside, leave, climb out and loop. An accepted path must:
    - be the workspace or lie below it;
    - be normalized (no `.`, `..` or empty components, no trailing slash);
    - for reads, be exactly what the kernel resolves it to, i.e. contain no
      symlink, so opening it cannot land anywhere else.
*/
#include "actors/exec/path.h"

#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_ws [PATH_MAX];

static int
s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    return remove (path);
}

static void
s_cleanup (void)
{
    if (s_ws [0])
        nftw (s_ws, s_rm, 16, FTW_DEPTH | FTW_PHYS);
}

static void
s_link (const char *target, const char *name)
{
    char p [PATH_MAX];
    snprintf (p, sizeof p, "%s/%s", s_ws, name);
    if (symlink (target, p) != 0)
        abort ();
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc; (void) argv;
    char tmpl [] = "/tmp/sbfuzz-path-XXXXXX";
    if (!mkdtemp (tmpl) || !realpath (tmpl, s_ws))
        abort ();
    atexit (s_cleanup);
    char p [PATH_MAX];
    snprintf (p, sizeof p, "%s/sub", s_ws);
    mkdir (p, 0755);
    snprintf (p, sizeof p, "%s/sub/deeper", s_ws);
    mkdir (p, 0755);
    snprintf (p, sizeof p, "%s/sub/file.txt", s_ws);
    FILE *f = fopen (p, "w");
    if (f)
        fclose (f);
    snprintf (p, sizeof p, "%s/sub", s_ws);
    s_link ("sub", "in");                       //  relative, inside
    s_link (p, "abs_in");                       //  absolute, inside
    s_link ("sub/file.txt", "file_link");
    s_link ("/etc", "out");                     //  absolute, outside
    s_link ("..", "up");                        //  relative, outside
    s_link ("sub/../..", "up2");
    s_link ("loop", "loop");                    //  a loop
    s_link ("missing/target", "dangling");
    s_link ("../in", "sub/back");               //  inside, via a parent
    return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool for_write = data [0] & 1;
    char path [2 * PATH_MAX];
    size_t len = 0;
    if (data [0] & 2) {
        len = strlen (s_ws);
        memcpy (path, s_ws, len);
    }
    if (size - 1 > sizeof path - len)
        return 0;
    memcpy (path + len, data + 1, size - 1);
    len += size - 1;
    char out [PATH_MAX], err [512];
    if (sb_path_resolve_n (s_ws, path, len, for_write, out, sizeof out, err, sizeof err) != 0) {
        if (err [0] == 0)
            abort ();                           //  a refusal always says why
        return 0;
    }
    size_t wl = strlen (s_ws), ol = strlen (out);
    if (ol >= PATH_MAX || strncmp (out, s_ws, wl) != 0 || (out [wl] != 0 && out [wl] != '/'))
        abort ();
    if (ol > 1 && out [ol - 1] == '/')
        abort ();
    if (strstr (out, "//") || strstr (out, "/./") || strstr (out, "/../"))
        abort ();
    if (ol >= 2 && strcmp (out + ol - 2, "/.") == 0)
        abort ();
    if (ol >= 3 && strcmp (out + ol - 3, "/..") == 0)
        abort ();
    if (!sb_path_relative (s_ws, out))
        abort ();
    if (!for_write) {
        char real [PATH_MAX];
        if (!realpath (out, real) || strcmp (real, out) != 0)
            abort ();
    }
    return 0;
}

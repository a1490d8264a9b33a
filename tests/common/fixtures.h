/*  tests/common/fixtures.h — the SSE transcripts in tests/fixtures/llm, for
    the unit tests and the fuzz targets alike.

    Header-only (static inline), since each test binary is one translation
    unit. The helpers return NULL rather than assert, so that a Criterion
    test and a libFuzzer target can both use them; the caller says what
    went wrong in its own way.
*/
#ifndef SB_TESTS_COMMON_FIXTURES_H
#define SB_TESTS_COMMON_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  The Makefile passes the absolute path of the tree's fixtures, so a test
//  binary finds them from any working directory; without it, the path is
//  relative to the repository root, where tests/run_all.sh runs.
#ifndef SB_FIXTURES_DIR
#   define SB_FIXTURES_DIR "tests/fixtures/llm"
#endif

//  $SB_FIXTURES when set and not empty, else the tree's own transcripts.
static inline const char *
sb_test_fixtures_dir (void)
{
    const char *dir = getenv ("SB_FIXTURES");
    return dir && *dir? dir: SB_FIXTURES_DIR;
}

//  The whole file, NUL-terminated, in a buffer the caller frees; its
//  length in *len. NULL when it cannot be opened or read.
static inline char *
sb_test_read_file (const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen (path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek (f, 0, SEEK_END) == 0 && (n = ftell (f)) >= 0 && fseek (f, 0, SEEK_SET) == 0)
        buf = malloc ((size_t) n + 1);
    if (buf && fread (buf, 1, (size_t) n, f) != (size_t) n) {
        free (buf);
        buf = NULL;
    }
    fclose (f);
    if (!buf)
        return NULL;
    buf [n] = 0;
    *len = (size_t) n;
    return buf;
}

//  A fixture by file name, from sb_test_fixtures_dir ().
static inline char *
sb_test_read_fixture (const char *name, size_t *len)
{
    char path [1024];
    snprintf (path, sizeof path, "%s/%s", sb_test_fixtures_dir (), name);
    return sb_test_read_file (path, len);
}

//  A copy with every LF turned into `eol` ("\r\n" or "\r"): the fixtures
//  are written with LF only, and the parser must read all three alike.
static inline char *
sb_test_convert_eol (const char *in, size_t len, const char *eol, size_t *out_len)
{
    *out_len = 0;
    size_t eol_len = strlen (eol);
    char *out = malloc (len * eol_len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++)
        if (in [i] == '\n') {
            memcpy (out + o, eol, eol_len);
            o += eol_len;
        }
        else
            out [o++] = in [i];
    out [o] = 0;
    *out_len = o;
    return out;
}

#endif

/*  tests/unit/test_diff.c — the diff a write_file or edit_file would make,
    before it is made (actors/exec/diff.h). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/exec/diff.h"

static char *
s_diff (const char *old, const char *new)
{
    char *d = sb_diff_unified ("f.txt", old, old ? strlen (old) : 0, new, strlen (new), 0);
    cr_assert (d);
    return d;
}

Test (diff, one_changed_line_with_context)
{
    char *d = s_diff ("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n");
    cr_assert_str_eq (d, "--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
    free (d);
}

Test (diff, new_file_equal_and_no_newline)
{
    char *d = s_diff (NULL, "a\nb\n");
    cr_assert_str_eq (d, "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n");
    free (d);
    d = s_diff ("same\n", "same\n");
    cr_assert_str_eq (d, "");
    free (d);
    d = s_diff ("x\n", "x");
    cr_assert_str_eq (d, "--- a/f.txt\n+++ b/f.txt\n@@ -1,1 +1,1 @@\n-x\n+x\n\\ No newline at end of file\n");
    free (d);
    //  everything removed
    d = s_diff ("a\nb\n", "");
    cr_assert_str_eq (d, "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +0,0 @@\n-a\n-b\n");
    free (d);
}

Test (diff, cut_at_max)
{
    char big [20000];
    for (size_t k = 0; k < sizeof big - 1; k++)
        big [k] = k % 10 == 9 ? '\n' : 'a';
    big [sizeof big - 1] = 0;
    char *d = sb_diff_unified ("f", NULL, 0, big, strlen (big), 1000);
    cr_assert (d);
    cr_assert_lt (strlen (d), 1200);
    cr_assert (strstr (d, "[diff cut at 1000 bytes]"));
    free (d);
}

Test (diff, preview_of_write_and_edit_without_writing)
{
    char ws [] = "/tmp/sb-diff-XXXXXX";
    cr_assert (mkdtemp (ws));
    char real [4096];
    cr_assert (realpath (ws, real));
    char path [4200];
    snprintf (path, sizeof path, "%s/a.txt", real);
    FILE *f = fopen (path, "w");
    fputs ("one\ntwo\nthree\n", f);
    fclose (f);

    char *d = sb_diff_preview (real, "edit_file", "{\"path\":\"a.txt\",\"old\":\"two\",\"new\":\"2\"}", 0);
    cr_assert (d);
    cr_assert (strstr (d, "-two\n+2\n"), "%s", d);
    free (d);
    d = sb_diff_preview (real, "write_file", "{\"path\":\"./a.txt\",\"content\":\"one\\n\"}", 0);
    cr_assert (d && strstr (d, "--- a/a.txt") && strstr (d, "-two\n-three\n"), "%s", d);
    free (d);
    d = sb_diff_preview (real, "write_file", "{\"path\":\"sub/new.txt\",\"content\":\"n\\n\"}", 0);
    cr_assert (d && strstr (d, "--- /dev/null\n+++ b/sub/new.txt"), "%s", d);
    free (d);
    //  nothing was written
    struct stat st;
    cr_assert_neq (stat (ws, &st), -1);
    snprintf (path, sizeof path, "%s/sub", real);
    cr_assert_eq (stat (path, &st), -1);
    snprintf (path, sizeof path, "%s/a.txt", real);
    f = fopen (path, "r");
    char buf [64] = "";
    cr_assert (f && fread (buf, 1, sizeof buf - 1, f) > 0);
    fclose (f);
    cr_assert_str_eq (buf, "one\ntwo\nthree\n");

    //  no diff: an edit that does not match once, a path outside, another tool
    cr_assert_null (sb_diff_preview (real, "edit_file", "{\"path\":\"a.txt\",\"old\":\"zzz\",\"new\":\"2\"}", 0));
    cr_assert_null (sb_diff_preview (real, "edit_file", "{\"path\":\"a.txt\",\"old\":\"\\n\",\"new\":\"2\"}", 0));
    cr_assert_null (sb_diff_preview (real, "write_file", "{\"path\":\"../x\",\"content\":\"x\"}", 0));
    cr_assert_null (sb_diff_preview (real, "shell", "{\"command\":\"ls\"}", 0));
    cr_assert_null (sb_diff_preview (real, "write_file", "not json", 0));
    snprintf (path, sizeof path, "%s/a.txt", real);
    unlink (path);
    rmdir (real);
}

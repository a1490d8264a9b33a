/*  tests/unit/test_tools.c — the agent's tools: path confinement, file
    tools, process spawning (timeouts, cancel, orphans, descriptors,
    environment) and argument validation. Each test runs in its own mkdtemp
    workspace, with a sibling directory standing for "outside".
*/
#include "actors/exec/path.h"
#include "sandbox/spawn.h"
#include "actors/exec/tools.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char ws [PATH_MAX];             //  the workspace (a realpath)
static char outside [PATH_MAX];        //  a directory next to it
static sb_tool_ctx_t ctx;

static int
s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    return remove (path);
}

static void
s_setup (void)
{
    char tmpl [] = "/tmp/sbtools-ws-XXXXXX";
    char tmpl2 [] = "/tmp/sbtools-out-XXXXXX";
    cr_assert (mkdtemp (tmpl) && mkdtemp (tmpl2));
    cr_assert (realpath (tmpl, ws) && realpath (tmpl2, outside));
    cr_assert_eq (sb_spawn_init_subreaper (), 0);
    memset (&ctx, 0, sizeof ctx);
    ctx.workspace = ws;
    ctx.cancel_fd = -1;
}

static void
s_teardown (void)
{
    nftw (ws, s_rm, 16, FTW_DEPTH | FTW_PHYS);
    nftw (outside, s_rm, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite (tools, .init = s_setup, .fini = s_teardown, .timeout = 30);

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

//  A path in the workspace; a few rotating buffers so calls can nest.
static const char *
s_at (const char *rel)
{
    static char bufs [4][PATH_MAX];
    static int next;
    char *b = bufs [next++ % 4];
    snprintf (b, PATH_MAX, "%s/%s", ws, rel);
    return b;
}

//  Waits until pid is a zombie (it exited, nobody reaped it yet).
static bool
s_wait_zombie (pid_t pid, int64_t within_ms)
{
    int64_t deadline = s_now_ms () + within_ms;
    char path [64], buf [512];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    while (s_now_ms () < deadline) {
        FILE *f = fopen (path, "r");
        if (!f)
            return false;
        size_t n = fread (buf, 1, sizeof buf - 1, f);
        fclose (f);
        buf [n] = 0;
        char *rp = strrchr (buf, ')');
        if (rp && rp [1] == ' ' && rp [2] == 'Z')
            return true;
        struct timespec ts = { 0, 1000000 };
        nanosleep (&ts, NULL);
    }
    return false;
}

static void
s_write (const char *dir, const char *rel, const char *content)
{
    char p [PATH_MAX];
    snprintf (p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen (p, "w");
    cr_assert (f, "fopen %s", p);
    fputs (content, f);
    fclose (f);
}

static char *
s_slurp (const char *dir, const char *rel)
{
    char p [PATH_MAX];
    snprintf (p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen (p, "r");
    if (!f)
        return NULL;
    static char buf [1 << 16];
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    buf [n] = 0;
    fclose (f);
    return buf;
}

static void
s_symlink (const char *target, const char *rel)
{
    char p [PATH_MAX];
    snprintf (p, sizeof p, "%s/%s", ws, rel);
    cr_assert_eq (symlink (target, p), 0, "symlink %s: %s", p, strerror (errno));
}

//  Runs a tool; the result must be cleared by the caller.
static sb_tool_result_t
s_run (const char *name, const char *fmt, ...)
{
    char args [8192];
    if (fmt) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (args, sizeof args, fmt, ap);
        va_end (ap);
    }
    sb_tool_result_t res;
    int rc = sb_tool_run (&ctx, name, fmt ? args : NULL, &res);
    cr_assert_not_null (res.output, "%s produced no output", name);
    cr_assert_eq (rc, res.ok ? 0 : -1);
    return res;
}

static void
s_expect_refused (sb_tool_result_t res, const char *needle)
{
    cr_assert_not (res.ok, "expected a refusal, got: %s", res.output);
    cr_assert (strstr (res.output, needle), "expected \"%s\" in: %s", needle, res.output);
    sb_tool_result_clear (&res);
}

static bool
s_gone (pid_t pid)
{
    return kill (pid, 0) == -1 && errno == ESRCH;
}

//  /proc/<pid>/stat, for a failure message.
static const char *
s_describe (pid_t pid)
{
    static char buf [512];
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *f = fopen (path, "r");
    if (!f)
        return "(gone)";
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf [n] = 0;
    return buf;
}

//  Every "NAME=<pid>" the command printed.
static size_t
s_pids (const char *out, pid_t *pids, size_t max)
{
    size_t n = 0;
    for (const char *p = out; (p = strchr (p, '=')) && n < max; p++) {
        char *end;
        long v = strtol (p + 1, &end, 10);
        if (end != p + 1 && v > 1)
            pids [n++] = (pid_t) v;
    }
    return n;
}


//  ---------------------------------------------------------------------
//  Confinement

Test (tools, refuses_dotdot_escape)
{
    s_expect_refused (s_run ("read_file", "{\"path\":\"../../etc/passwd\"}"),
                      "path escapes the workspace: ../../etc/passwd");
    s_expect_refused (s_run ("write_file", "{\"path\":\"sub/../../x\",\"content\":\"x\"}"),
                      "path escapes the workspace");
    s_expect_refused (s_run ("list_dir", "{\"path\":\"..\"}"), "path escapes the workspace");
    s_expect_refused (s_run ("grep", "{\"pattern\":\"root\",\"path\":\"../..\"}"),
                      "path escapes the workspace");
}

Test (tools, refuses_absolute_outside)
{
    s_expect_refused (s_run ("read_file", "{\"path\":\"/etc/passwd\"}"),
                      "path escapes the workspace: /etc/passwd");
    s_write (outside, "target.txt", "keep");
    s_expect_refused (s_run ("write_file", "{\"path\":\"%s/target.txt\",\"content\":\"x\"}",
                             outside), "path escapes the workspace");
    cr_assert_str_eq (s_slurp (outside, "target.txt"), "keep");
    //  A sibling whose name starts with the workspace's is not inside it.
    s_expect_refused (s_run ("write_file", "{\"path\":\"%sx/f\",\"content\":\"x\"}", ws),
                      "path escapes the workspace");
    //  `..` through the workspace's own name is refused, not normalized.
    s_expect_refused (s_run ("read_file", "{\"path\":\"%s/../%s/a\"}", ws, strrchr (ws, '/') + 1),
                      "path escapes the workspace");
}

Test (tools, refuses_symlink_out)
{
    s_write (outside, "secret.txt", "secret");
    char target [PATH_MAX];
    snprintf (target, sizeof target, "%s/secret.txt", outside);
    s_symlink (target, "out");
    s_symlink ("/etc/passwd", "passwd");
    s_expect_refused (s_run ("read_file", "{\"path\":\"out\"}"),
                      "through the symlink out -> ");
    s_expect_refused (s_run ("read_file", "{\"path\":\"passwd\"}"), "path escapes the workspace");
    s_expect_refused (s_run ("write_file", "{\"path\":\"out\",\"content\":\"pwned\"}"),
                      "path escapes the workspace");
    s_expect_refused (s_run ("edit_file", "{\"path\":\"out\",\"old\":\"secret\",\"new\":\"x\"}"),
                      "path escapes the workspace");
    cr_assert_str_eq (s_slurp (outside, "secret.txt"), "secret");
    //  A relative symlink that climbs out.
    s_symlink ("../../../../../../../../etc", "etc");
    s_expect_refused (s_run ("read_file", "{\"path\":\"etc/passwd\"}"),
                      "path escapes the workspace");
}

Test (tools, refuses_symlinked_parent_dir)
{
    s_symlink (outside, "linkdir");
    s_write (outside, "secret.txt", "secret");
    s_expect_refused (s_run ("write_file", "{\"path\":\"linkdir/new.txt\",\"content\":\"x\"}"),
                      "path escapes the workspace");
    s_expect_refused (s_run ("write_file", "{\"path\":\"linkdir/deep/er/new.txt\",\"content\":\"x\"}"),
                      "path escapes the workspace");
    s_expect_refused (s_run ("read_file", "{\"path\":\"linkdir/secret.txt\"}"),
                      "path escapes the workspace");
    s_expect_refused (s_run ("list_dir", "{\"path\":\"linkdir\"}"), "path escapes the workspace");
    cr_assert_null (s_slurp (outside, "new.txt"));
    struct stat st;
    char p [PATH_MAX];
    snprintf (p, sizeof p, "%s/deep", outside);
    cr_assert_neq (stat (p, &st), 0, "a directory was created outside");
}

Test (tools, refuses_symlink_that_leaves_and_returns)
{
    //  Even if it lands back inside, a path that steps outside is refused.
    mkdir (s_at ("sub"), 0755);
    char target [PATH_MAX];
    snprintf (target, sizeof target, "../%s/sub", strrchr (ws, '/') + 1);
    s_symlink (target, "roundtrip");
    s_expect_refused (s_run ("list_dir", "{\"path\":\"roundtrip\"}"), "path escapes the workspace");
}

Test (tools, accepts_paths_inside)
{
    sb_tool_result_t r = s_run ("write_file", "{\"path\":\"%s/abs.txt\",\"content\":\"A\"}", ws);
    cr_assert (r.ok, "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("read_file", "{\"path\":\"%s//./abs.txt\"}", ws);
    cr_assert (r.ok, "%s", r.output);
    cr_assert_str_eq (r.output, "A");
    sb_tool_result_clear (&r);
    //  Symlinks that stay inside are followed, relative or absolute.
    s_symlink ("abs.txt", "rel-alias");
    char target [PATH_MAX];
    snprintf (target, sizeof target, "%s/abs.txt", ws);
    s_symlink (target, "abs-alias");
    r = s_run ("read_file", "{\"path\":\"rel-alias\"}");
    cr_assert (r.ok, "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("read_file", "{\"path\":\"abs-alias\"}");
    cr_assert (r.ok, "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("read_file", "{\"path\":\"sub/../abs.txt\"}");
    cr_assert_not (r.ok);               //  sub does not exist: a read needs every step
    sb_tool_result_clear (&r);
}

Test (tools, path_resolver_edges)
{
    char out [PATH_MAX], err [512], expect [PATH_MAX];
    cr_assert_eq (sb_path_resolve (ws, "a/../b/./c", true, out, sizeof out, err, sizeof err), 0, "%s", err);
    snprintf (expect, sizeof expect, "%s/b/c", ws);
    cr_assert_str_eq (out, expect);
    cr_assert_eq (sb_path_resolve (ws, ".", false, out, sizeof out, err, sizeof err), 0);
    cr_assert_str_eq (out, ws);
    cr_assert_str_eq (sb_path_relative (ws, out), ".");

    cr_assert_eq (sb_path_resolve (ws, "", false, out, sizeof out, err, sizeof err), -1);
    cr_assert (strstr (err, "empty"));
    cr_assert_eq (sb_path_resolve_n (ws, "a\0b", 3, true, out, sizeof out, err, sizeof err), -1);
    cr_assert (strstr (err, "NUL"), "%s", err);
    static char longp [PATH_MAX + 10];
    memset (longp, 'a', sizeof longp - 1);
    cr_assert_eq (sb_path_resolve (ws, longp, true, out, sizeof out, err, sizeof err), -1);
    cr_assert (strstr (err, "too long"), "%s", err);

    s_symlink ("loop2", "loop1");
    s_symlink ("loop1", "loop2");
    cr_assert_eq (sb_path_resolve (ws, "loop1", false, out, sizeof out, err, sizeof err), -1);
    cr_assert (strstr (err, "too many levels"), "%s", err);
    s_write (ws, "file", "x");
    cr_assert_eq (sb_path_resolve (ws, "file/x", true, out, sizeof out, err, sizeof err), -1);
    cr_assert (strstr (err, "not a directory"), "%s", err);
    cr_assert_eq (sb_path_resolve (ws, "missing", false, out, sizeof out, err, sizeof err), -1);
    cr_assert (strstr (err, "no such file"), "%s", err);

    //  A workspace of "/" contains everything but still has a top.
    cr_assert_eq (sb_path_resolve ("/", "etc/../etc", false, out, sizeof out, err, sizeof err), 0);
    cr_assert_str_eq (out, "/etc");
    cr_assert_eq (sb_path_resolve ("/", "..", false, out, sizeof out, err, sizeof err), -1);
    cr_assert_null (sb_path_relative (ws, "/etc"));
}

Test (tools, open_refuses_a_symlink_swapped_in_after_resolution)
{
    //  Resolve, then swap a directory for a symlink out, as a racing
    //  process could: the open and the mkdirs must not follow it.
    mkdir (s_at ("d"), 0755);
    s_write (ws, "d/f", "inside");
    s_write (outside, "f", "outside");
    char out [PATH_MAX], err [512];
    cr_assert_eq (sb_path_resolve (ws, "d/f", false, out, sizeof out, err, sizeof err), 0);
    char dnew [PATH_MAX];
    cr_assert_eq (sb_path_resolve (ws, "d/new/sub", true, dnew, sizeof dnew, err, sizeof err), 0);
    int fd = sb_path_open (ws, out, O_RDONLY, 0);
    cr_assert_geq (fd, 0);
    close (fd);
    cr_assert_eq (rename (s_at ("d"), s_at ("d.old")), 0);
    s_symlink (outside, "d");
    errno = 0;
    fd = sb_path_open (ws, out, O_RDONLY, 0);
    cr_assert_lt (fd, 0, "opened a path through a symlink planted after resolution");
    cr_assert_eq (errno, ELOOP);
    cr_assert_lt (sb_path_mkdirs (ws, dnew, err, sizeof err), 0);
    cr_assert (strstr (err, "a file or symlink is in the way"), "%s", err);
    struct stat st;
    char p [PATH_MAX];
    snprintf (p, sizeof p, "%s/new", outside);
    cr_assert_neq (stat (p, &st), 0, "mkdirs created a directory outside");
    cr_assert_lt (sb_path_open (ws, "/etc/passwd", O_RDONLY, 0), 0);
}


//  ---------------------------------------------------------------------
//  File tools

Test (tools, write_read_edit_round_trip)
{
    sb_tool_result_t r = s_run ("write_file",
                                "{\"path\":\"src/deep/hello.c\",\"content\":\"int a = 1;\\nint b = 2;\\n\"}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert (strstr (r.output, "new file"), "%s", r.output);
    sb_tool_result_clear (&r);
    cr_assert_str_eq (s_slurp (ws, "src/deep/hello.c"), "int a = 1;\nint b = 2;\n");

    r = s_run ("edit_file", "{\"path\":\"src/deep/hello.c\",\"old\":\"b = 2\",\"new\":\"b = 3\"}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert (strstr (r.output, "line 2"), "%s", r.output);
    sb_tool_result_clear (&r);

    r = s_run ("read_file", "{\"path\":\"src/deep/hello.c\"}");
    cr_assert (r.ok);
    cr_assert_str_eq (r.output, "int a = 1;\nint b = 3;\n");
    sb_tool_result_clear (&r);

    r = s_run ("write_file", "{\"path\":\"src/deep/hello.c\",\"content\":\"\\u00e9t\\u00e9\"}");
    cr_assert (r.ok);
    cr_assert (strstr (r.output, "replaced"), "%s", r.output);
    sb_tool_result_clear (&r);
    cr_assert_str_eq (s_slurp (ws, "src/deep/hello.c"), "été");
}

Test (tools, edit_needs_exactly_one_match)
{
    s_write (ws, "f.txt", "x = 1\ny = 1\nx = 1\n");
    s_expect_refused (s_run ("edit_file", "{\"path\":\"f.txt\",\"old\":\"z = 1\",\"new\":\"q\"}"),
                      "0 matches");
    s_expect_refused (s_run ("edit_file", "{\"path\":\"f.txt\",\"old\":\"x = 1\",\"new\":\"q\"}"),
                      "matches 2 times in f.txt (at lines 1, 3)");
    s_expect_refused (s_run ("edit_file", "{\"path\":\"f.txt\",\"old\":\"\",\"new\":\"q\"}"),
                      "old is empty");
    cr_assert_str_eq (s_slurp (ws, "f.txt"), "x = 1\ny = 1\nx = 1\n");
    //  Overlapping occurrences are ambiguous too.
    s_write (ws, "g.txt", "aaa");
    s_expect_refused (s_run ("edit_file", "{\"path\":\"g.txt\",\"old\":\"aa\",\"new\":\"b\"}"),
                      "matches 2 times");
}

Test (tools, atomic_write_leaves_no_temp_files)
{
    s_write (ws, "run.sh", "#!/bin/sh\necho old\n");
    char p [PATH_MAX];
    snprintf (p, sizeof p, "%s/run.sh", ws);
    cr_assert_eq (chmod (p, 0755), 0);
    for (int i = 0; i < 5; i++) {
        sb_tool_result_t r = s_run ("write_file",
                                    "{\"path\":\"run.sh\",\"content\":\"#!/bin/sh\\necho %d\\n\"}", i);
        cr_assert (r.ok, "%s", r.output);
        sb_tool_result_clear (&r);
    }
    sb_tool_result_t r = s_run ("edit_file", "{\"path\":\"run.sh\",\"old\":\"echo 4\",\"new\":\"echo new\"}");
    cr_assert (r.ok, "%s", r.output);
    sb_tool_result_clear (&r);
    //  Only the target is there, and it kept its executable mode.
    r = s_run ("list_dir", "{}");
    cr_assert_str_eq (r.output, "run.sh\n");
    sb_tool_result_clear (&r);
    struct stat st;
    cr_assert_eq (stat (p, &st), 0);
    cr_assert_eq (st.st_mode & 0777, 0755);
    r = s_run ("shell", "{\"command\":\"./run.sh\"}");
    cr_assert_str_eq (r.output, "new\n");
    sb_tool_result_clear (&r);
}

Test (tools, write_refuses_directories)
{
    mkdir (s_at ("d"), 0755);
    s_expect_refused (s_run ("write_file", "{\"path\":\"d\",\"content\":\"x\"}"), "is a directory");
    s_expect_refused (s_run ("write_file", "{\"path\":\"e/\",\"content\":\"x\"}"), "names a directory");
    s_expect_refused (s_run ("write_file", "{\"path\":\".\",\"content\":\"x\"}"), "workspace directory");
    s_write (ws, "plain", "x");
    s_expect_refused (s_run ("write_file", "{\"path\":\"plain/child\",\"content\":\"x\"}"),
                      "not a directory");
}

Test (tools, read_file_ranges_and_refusals)
{
    FILE *f = fopen (s_at ("lines.txt"), "w");
    for (int i = 1; i <= 100; i++)
        fprintf (f, "line %d\n", i);
    fclose (f);
    sb_tool_result_t r = s_run ("read_file", "{\"path\":\"lines.txt\",\"offset\":10,\"limit\":3}");
    cr_assert (r.ok);
    cr_assert (strncmp (r.output, "line 10\nline 11\nline 12\n[showing lines 10-12", 44) == 0,
               "%s", r.output);
    cr_assert (strstr (r.output, "offset=13"), "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("read_file", "{\"path\":\"lines.txt\",\"offset\":99,\"limit\":null}");
    cr_assert_str_eq (r.output, "line 99\nline 100\n");
    sb_tool_result_clear (&r);
    s_expect_refused (s_run ("read_file", "{\"path\":\"lines.txt\",\"offset\":500}"),
                      "past the end of lines.txt (100 lines)");

    //  The 64 KiB cap ends on a whole line and says where to continue.
    f = fopen (s_at ("big.txt"), "w");
    for (int i = 1; i <= 20000; i++)
        fprintf (f, "%06d abcdefghijklmnopqrstuvwxyz\n", i);
    fclose (f);
    r = s_run ("read_file", "{\"path\":\"big.txt\"}");
    cr_assert (r.ok && r.truncated);
    cr_assert_lt (strlen (r.output), 66 * 1024);
    cr_assert (strstr (r.output, "output capped at 64 KiB"), "%s", r.output + strlen (r.output) - 200);
    sb_tool_result_clear (&r);

    s_write (ws, "bin", "");
    f = fopen (s_at ("bin"), "w");
    fwrite ("\x7f" "ELF\0\0\0", 1, 7, f);
    fclose (f);
    s_expect_refused (s_run ("read_file", "{\"path\":\"bin\"}"), "binary");
    mkdir (s_at ("dir"), 0755);
    s_expect_refused (s_run ("read_file", "{\"path\":\"dir\"}"), "is a directory; use list_dir");
    s_expect_refused (s_run ("read_file", "{\"path\":\"nope.txt\"}"), "no such file");
    char fifo [PATH_MAX];
    snprintf (fifo, sizeof fifo, "%s/fifo", ws);
    cr_assert_eq (mkfifo (fifo, 0644), 0);
    s_expect_refused (s_run ("read_file", "{\"path\":\"fifo\"}"), "not a regular file");

    //  Invalid UTF-8 is shown, replaced, never passed on raw.
    s_write (ws, "latin1.txt", "caf\xe9\n");
    r = s_run ("read_file", "{\"path\":\"latin1.txt\"}");
    cr_assert_str_eq (r.output, "caf\xEF\xBF\xBD\n");
    sb_tool_result_clear (&r);
}

Test (tools, list_dir_sorted_and_bounded)
{
    mkdir (s_at ("b"), 0755);
    mkdir (s_at (".git"), 0755);
    s_write (ws, "c.txt", "");
    s_write (ws, "a.txt", "");
    s_write (ws, "b/inner.txt", "");
    s_write (ws, ".git/HEAD", "");
    s_symlink ("a.txt", "link");
    sb_tool_result_t r = s_run ("list_dir", "{}");
    cr_assert_str_eq (r.output, ".git/\na.txt\nb/\nc.txt\nlink -> a.txt\n");
    sb_tool_result_clear (&r);
    r = s_run ("list_dir", "{\"depth\":2}");
    cr_assert_str_eq (r.output, ".git/\na.txt\nb/\nb/inner.txt\nc.txt\nlink -> a.txt\n");
    sb_tool_result_clear (&r);
    r = s_run ("list_dir", "{\"path\":\"b\"}");
    cr_assert_str_eq (r.output, "inner.txt\n");
    sb_tool_result_clear (&r);
    s_expect_refused (s_run ("list_dir", "{\"depth\":9}"), "depth must be between 1 and 5");
    s_expect_refused (s_run ("list_dir", "{\"path\":\"a.txt\"}"), "not a directory");

    mkdir (s_at ("many"), 0755);
    for (int i = 0; i < 1100; i++) {
        char name [64];
        snprintf (name, sizeof name, "many/f%04d", i);
        s_write (ws, name, "");
    }
    r = s_run ("list_dir", "{\"path\":\"many\"}");
    cr_assert (r.ok && r.truncated);
    cr_assert (strncmp (r.output, "f0000\nf0001\n", 12) == 0);
    cr_assert (strstr (r.output, "f0999\n[listing stopped at 1000 entries"), "%s",
               r.output + strlen (r.output) - 100);
    cr_assert_null (strstr (r.output, "f1000"));
    sb_tool_result_clear (&r);
}

Test (tools, grep_uses_argv_not_a_shell)
{
    s_write (ws, "a.txt", "alpha\n-rf danger\nbeta $(touch pwned)\n");
    mkdir (s_at ("sub"), 0755);
    s_write (ws, "sub/b.txt", "gamma alpha\n");
    sb_tool_result_t r = s_run ("grep", "{\"pattern\":\"alpha\"}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert (strstr (r.output, "a.txt:1:alpha\n"), "%s", r.output);
    cr_assert_null (strstr (r.output, "./"), "%s", r.output);
    cr_assert (strstr (r.output, "sub/b.txt:1:gamma alpha"), "%s", r.output);
    cr_assert_eq (r.exit_code, 0);
    sb_tool_result_clear (&r);
    //  A leading dash is a pattern, not an option.
    r = s_run ("grep", "{\"pattern\":\"-rf\",\"path\":\"a.txt\"}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert (strstr (r.output, "a.txt:2:-rf danger"), "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("grep", "{\"pattern\":\"$(touch pwned2)|x'\\\"\"}");
    sb_tool_result_clear (&r);
    cr_assert (access (s_at ("pwned2"), F_OK) != 0);
    r = s_run ("grep", "{\"pattern\":\"nothing-here\"}");
    cr_assert (r.ok);
    cr_assert_eq (r.exit_code, 1);
    cr_assert_str_eq (r.output, "no matches\n");
    sb_tool_result_clear (&r);
    s_expect_refused (s_run ("grep", "{\"pattern\":\"(\"}"), "[exit code 2]");
    s_expect_refused (s_run ("grep", "{\"pattern\":\"\"}"), "pattern is empty");
}

Test (tools, git_status_and_diff)
{
    sb_tool_result_t r = s_run ("git_status", "{}");
    cr_assert_not (r.ok);
    cr_assert (strstr (r.output, "not a git repository"), "%s", r.output);
    sb_tool_result_clear (&r);
    s_write (ws, "a.txt", "old\n");
    r = s_run ("shell", "{\"command\":\"git init -q . && git add a.txt && "
                        "git -c user.name=t -c user.email=t@example.com commit -qm init\"}");
    cr_assert (r.ok, "%s", r.output);
    sb_tool_result_clear (&r);
    s_write (ws, "a.txt", "new\n");
    s_write (ws, "b.txt", "untracked\n");
    r = s_run ("git_status", NULL);
    cr_assert (r.ok, "%s", r.output);
    cr_assert (strstr (r.output, " M a.txt"), "%s", r.output);
    cr_assert (strstr (r.output, "?? b.txt"), "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("git_diff", "{}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert (strstr (r.output, "-old\n+new\n"), "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("git_diff", "{\"path\":\"b.txt\"}");
    cr_assert_str_eq (r.output, "(no unstaged changes)\n");
    sb_tool_result_clear (&r);
    s_expect_refused (s_run ("git_diff", "{\"path\":\"../x\"}"), "path escapes the workspace");
}

//  Issue 9, item 6: a repository's config names programs under free driver
//  names (filter.<any>.clean, diff.<any>.textconv, an included file); the
//  read-only git tools must run none of them. Each writes a marker outside
//  the workspace if run.
Test (tools, git_tools_run_no_program_from_the_config)
{
    s_write (ws, "a.txt", "old\n");
    s_write (outside, "inc.cfg", "");
    char cfg [4 * PATH_MAX + 1024];
    snprintf (cfg, sizeof cfg,
              "git init -q . && git add a.txt && "
              "git -c user.name=t -c user.email=t@example.com commit -qm init && "
              "git config filter.Some-Name.clean 'touch %s/clean; cat' && "
              "git config filter.Some-Name.required true && "
              "git config diff.other.textconv 'touch %s/textconv; cat' && "
              "git config include.path %s/inc.cfg && "
              "printf '[filter \"inc\"]\\n\\tprocess = touch %s/process\\n' > %s/inc.cfg && "
              "printf '*.txt filter=Some-Name diff=other\\n*.inc filter=inc\\n' > .gitattributes && "
              "echo new > a.txt && echo x > b.inc && touch -r .git/index a.txt b.inc",
              outside, outside, outside, outside, outside);
    json_t *args = json_pack ("{s:s}", "command", cfg);
    char *json = json_dumps (args, 0);
    json_decref (args);
    sb_tool_result_t r;
    sb_tool_run (&ctx, "shell", json, &r);
    free (json);
    cr_assert (r.ok, "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("git_status", NULL);
    cr_assert (r.ok && strstr (r.output, " M a.txt"), "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("git_diff", "{}");
    cr_assert (r.ok && strstr (r.output, "-old\n+new\n"), "%s", r.output);
    sb_tool_result_clear (&r);
    r = s_run ("git_diff", "{\"path\":\"a.txt\"}");
    cr_assert (r.ok && strstr (r.output, "+new\n"), "%s", r.output);
    sb_tool_result_clear (&r);
    char marker [PATH_MAX + 16];
    const char *names [] = { "clean", "textconv", "process" };
    for (size_t i = 0; i < 3; i++) {
        snprintf (marker, sizeof marker, "%s/%s", outside, names [i]);
        cr_assert (access (marker, F_OK) != 0, "git ran the config's %s program", names [i]);
    }
}


//  ---------------------------------------------------------------------
//  Argument validation

Test (tools, validates_arguments)
{
    s_expect_refused (s_run ("rm_rf", "{}"), "unknown tool \"rm_rf\" (available: shell, ");
    s_expect_refused (s_run ("read_file", "{}"),
                      "missing required argument \"path\" (a string)");
    s_expect_refused (s_run ("read_file", "{\"path\":3}"), "\"path\" must be a string, not an integer");
    s_expect_refused (s_run ("read_file", "{\"path\":\"a\",\"offset\":\"2\"}"),
                      "\"offset\" must be an integer, not a string");
    s_expect_refused (s_run ("read_file", "{\"path\":\"a\",\"mode\":1}"),
                      "unknown argument \"mode\" (expected: path, offset, limit)");
    s_expect_refused (s_run ("shell", "{\"command\":"), "invalid JSON arguments for shell");
    s_expect_refused (s_run ("shell", "[1]"), "expected a JSON object");
    s_expect_refused (s_run ("shell", "{\"command\":\"true\",\"timeout_s\":0}"),
                      "timeout_s must be between 1 and 3600");
    s_expect_refused (s_run ("git_status", "{\"x\":1}"), "unknown argument \"x\" (expected: none)");
    s_expect_refused (s_run ("read_file", "{\"path\":\"a\\u0000b\"}"), "invalid JSON");

    size_t n;
    const sb_tool_def_t *defs = sb_tools_list (&n);
    cr_assert_eq (n, 10);
    for (size_t i = 0; i < n; i++) {
        cr_assert (defs [i].parameters [0] == '{');
        cr_assert_not_null (sb_tools_find (defs [i].name));
    }
    cr_assert (sb_tools_find ("read_file")->read_only);
    cr_assert (sb_tools_find ("view_image")->read_only);
    //  view_image: read_file's confinement, and images only
    s_expect_refused (s_run ("view_image", "{\"path\":\"../../etc/passwd\"}"), "path escapes the workspace");
    s_expect_refused (s_run ("view_image", "{}"), "missing required argument \"path\"");
    //  attach_file: the same confinement, any type, read-only for the policy
    cr_assert (sb_tools_find ("attach_file")->read_only);
    s_expect_refused (s_run ("attach_file", "{\"path\":\"../../etc/passwd\"}"), "path escapes the workspace");
    cr_assert_not (sb_tools_find ("shell")->read_only);
    cr_assert_null (sb_tools_find ("nope"));
}


//  ---------------------------------------------------------------------
//  shell and spawn

Test (tools, shell_exit_codes)
{
    sb_tool_result_t r = s_run ("shell", "{\"command\":\"echo hi; echo err >&2\"}");
    cr_assert (r.ok);
    cr_assert_eq (r.exit_code, 0);
    cr_assert_str_eq (r.output, "hi\nerr\n");
    sb_tool_result_clear (&r);
    r = s_run ("shell", "{\"command\":\"pwd; exit 3\"}");
    cr_assert_not (r.ok);
    cr_assert_eq (r.exit_code, 3);
    char expect [PATH_MAX + 32];
    snprintf (expect, sizeof expect, "%s\n[exit code 3]\n", ws);
    cr_assert_str_eq (r.output, expect);
    sb_tool_result_clear (&r);
    r = s_run ("shell", "{\"command\":\"true\"}");
    cr_assert_str_eq (r.output, "(no output)\n");
    sb_tool_result_clear (&r);
    r = s_run ("shell", "{\"command\":\"kill -TERM $$\"}");
    cr_assert_not (r.ok);
    cr_assert (strstr (r.output, "[killed by signal 15 (TERM)]"), "%s", r.output);
    sb_tool_result_clear (&r);
    //  stdin is /dev/null: a read does not hang.
    r = s_run ("shell", "{\"command\":\"cat; echo done\"}");
    cr_assert_str_eq (r.output, "done\n");
    sb_tool_result_clear (&r);
    //  Non-UTF-8 and NUL bytes are replaced.
    r = s_run ("shell", "{\"command\":\"printf 'a\\\\377\\\\000b'\"}");
    cr_assert_str_eq (r.output, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
    sb_tool_result_clear (&r);
}

Test (tools, shell_timeout_kills_group_and_escapees)
{
    //  A background job in the group, a setsid child of the shell, and a
    //  setsid grandchild whose parent exits at once (re-parented to us).
    int64_t t0 = s_now_ms ();
    sb_tool_result_t r = s_run ("shell", "{\"timeout_s\":1,\"command\":"
        "\"sleep 600 & echo BG=$!; setsid sleep 600 & echo SS=$!; "
        "sh -c 'setsid sleep 600 & echo ESC=$!'; echo SH=$$; sleep 600\"}");
    int64_t took = s_now_ms () - t0;
    cr_assert_not (r.ok);
    cr_assert (r.timed_out);
    cr_assert_lt (took, 4000, "took %lld ms", (long long) took);
    cr_assert (strstr (r.output, "[timed out after 1 s"), "%s", r.output);
    pid_t pids [8];
    size_t n = s_pids (r.output, pids, 8);
    cr_assert_eq (n, 4, "expected 4 pids in: %s", r.output);
    for (size_t i = 0; i < n; i++)
        cr_assert (s_gone (pids [i]), "pid %d is still there: %s", (int) pids [i],
                   s_describe (pids [i]));
    sb_tool_result_clear (&r);
}

Test (tools, background_processes_do_not_outlive_the_command)
{
    int64_t t0 = s_now_ms ();
    sb_tool_result_t r = s_run ("shell", "{\"command\":\"sleep 600 & echo BG=$!; "
                                         "sh -c 'setsid sleep 600 >/dev/null 2>&1 & echo ESC=$!'\"}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert_lt (s_now_ms () - t0, 2000);
    cr_assert (strstr (r.output, "[2 background processes left running by the command were killed: "),
               "%s", r.output);
    pid_t pids [4];
    cr_assert_eq (s_pids (r.output, pids, 4), 2);
    cr_assert (s_gone (pids [0]) && s_gone (pids [1]));
    sb_tool_result_clear (&r);
}

Test (tools, orphan_with_no_environment_dies_with_its_command)
{
    //  Issue 9, item 7: a process that clears its environment and leaves
    //  the session and the tree carries no mark, but it was born while this
    //  command ran and no other spawn was running then: it is the command's,
    //  and dies with it. The sweep stops it to read its environment; it
    //  must end killed, not left stopped. The command waits until the
    //  orphan has left the group and exec'd sleep.
    sb_tool_result_t r = s_run ("shell", "{\"command\": \"sh -c 'env -i setsid /bin/sleep 600 "
                                ">/dev/null 2>&1 & echo $! > esc.pid'; p=$(cat esc.pid); "
                                "until [ \\\"$(cat /proc/$p/comm)\\\" = sleep ]; do :; done; "
                                "echo ESC=$p\"}");
    cr_assert (r.ok, "%s", r.output);
    pid_t pid;
    cr_assert_eq (s_pids (r.output, &pid, 1), 1, "%s", r.output);
    char want [64];
    snprintf (want, sizeof want, "were killed: /bin/sleep 600 (pid %d)]", (int) pid);
    bool named = strstr (r.output, want) != NULL;
    if (!named)
        snprintf (want, sizeof want, "was killed: /bin/sleep 600 (pid %d)]", (int) pid);
    cr_assert (named || strstr (r.output, want), "the model is not told what was killed: %s", r.output);
    sb_tool_result_clear (&r);
    bool gone = s_gone (pid);
    if (!gone) {
        kill (pid, SIGKILL);
        waitpid (pid, NULL, 0);
    }
    cr_assert (gone, "the orphan outlived its command: %s", s_describe (pid));
}

typedef struct {
    int efd;
    char seen [4096];
    size_t len;
    int64_t cancelled_at;
} s_cancel_probe_t;

static void
s_cancel_on_ready (const char *data, size_t len, void *arg)
{
    s_cancel_probe_t *p = arg;
    if (p->len + len < sizeof p->seen) {
        memcpy (p->seen + p->len, data, len);
        p->len += len;
        p->seen [p->len] = 0;
    }
    if (!p->cancelled_at && strstr (p->seen, "ready")) {
        p->cancelled_at = s_now_ms ();
        uint64_t one = 1;
        cr_assert_eq (write (p->efd, &one, sizeof one), sizeof one);
    }
}

Test (tools, cancel_fd_stops_sleep_within_a_second)
{
    s_cancel_probe_t probe = { .efd = eventfd (0, EFD_CLOEXEC) };
    ctx.cancel_fd = probe.efd;
    ctx.on_output = s_cancel_on_ready;
    ctx.output_arg = &probe;
    sb_tool_result_t r = s_run ("shell", "{\"command\":\"sh -c 'setsid sleep 600 & echo ESC=$!'; "
                                         "echo SH=$$; echo ready; sleep 600\"}");
    int64_t latency = s_now_ms () - probe.cancelled_at;
    cr_assert (probe.cancelled_at, "the command never said ready: %s", r.output);
    cr_assert (r.cancelled);
    cr_assert_not (r.ok);
    cr_assert_lt (latency, 1000, "cancel took %lld ms", (long long) latency);
    cr_assert (strstr (r.output, "[cancelled"), "%s", r.output);
    pid_t pids [4];
    cr_assert_eq (s_pids (r.output, pids, 4), 2);
    for (int i = 0; i < 2; i++)
        cr_assert (s_gone (pids [i]), "pid %d is still there: %s", (int) pids [i],
                   s_describe (pids [i]));
    sb_tool_result_clear (&r);

    //  A cancel already signalled starts nothing.
    r = s_run ("shell", "{\"command\":\"touch started\"}");
    cr_assert (r.cancelled);
    cr_assert (access (s_at ("started"), F_OK) != 0);
    sb_tool_result_clear (&r);
    close (probe.efd);
}

Test (tools, output_over_the_cap_is_truncated)
{
    sb_tool_result_t r = s_run ("shell", "{\"command\":\"head -c 200000 /dev/zero | tr '\\\\0' a; "
                                         "printf END\"}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert (r.truncated);
    size_t len = strlen (r.output);
    cr_assert_lt (len, 64 * 1024 + 300);
    cr_assert_gt (len, 64 * 1024);
    cr_assert (strncmp (r.output, "aaaa", 4) == 0);
    cr_assert (strstr (r.output, "output truncated: 200003 bytes in total"), "no size note");
    cr_assert_str_eq (r.output + len - 4, "aEND");
    sb_tool_result_clear (&r);
}

typedef struct {
    char buf [256];
    size_t len;
    bool bad;
} s_stream_probe_t;

static void
s_collect (const char *data, size_t len, void *arg)
{
    s_stream_probe_t *p = arg;
    char *clean = sb_tools_utf8_clean (data, len, NULL);
    p->bad |= strlen (clean) != len || memcmp (clean, data, len) != 0;
    free (clean);
    if (p->len + len < sizeof p->buf) {
        memcpy (p->buf + p->len, data, len);
        p->len += len;
    }
}

Test (tools, streaming_output_is_whole_utf8)
{
    //  é split across two writes reaches the callback whole.
    s_stream_probe_t probe = { 0 };
    ctx.on_output = s_collect;
    ctx.output_arg = &probe;
    sb_tool_result_t r = s_run ("shell", "{\"command\":\"printf 'a\\\\303'; sleep 0.05; "
                                         "printf '\\\\251b'\"}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert_not (probe.bad, "a callback got invalid UTF-8");
    cr_assert_eq (probe.len, 4);
    cr_assert (memcmp (probe.buf, "a\xC3\xA9" "b", 4) == 0);
    sb_tool_result_clear (&r);
}

Test (tools, environment_is_an_allowlist)
{
    setenv ("OPENAI_API_KEY", "sk-test-secret", 1);
    setenv ("SB_TEST_PASS", "passed-through", 1);
    const char *extra [] = { "SB_TEST_PASS", "SB_TEST_SET=set-here", "SB_NOT_SET", NULL };
    ctx.env_extra = extra;
    sb_tool_result_t r = s_run ("shell", "{\"command\":\"env\"}");
    cr_assert (r.ok);
    cr_assert_null (strstr (r.output, "OPENAI_API_KEY"), "%s", r.output);
    cr_assert_null (strstr (r.output, "sk-test-secret"));
    cr_assert (strstr (r.output, "PATH="), "%s", r.output);
    cr_assert (strstr (r.output, "SB_TEST_PASS=passed-through\n"), "%s", r.output);
    cr_assert (strstr (r.output, "SB_TEST_SET=set-here\n"), "%s", r.output);
    cr_assert_null (strstr (r.output, "SB_NOT_SET"));
    sb_tool_result_clear (&r);
    const char *bad [] = { "NOT-A-NAME", NULL };
    ctx.env_extra = bad;
    s_expect_refused (s_run ("shell", "{\"command\":\"true\"}"), "invalid environment extra");
}

Test (tools, server_descriptors_are_invisible)
{
    //  What the server holds: an LMDB environment, a socket, a plain file,
    //  all without close-on-exec.
    char dbdir [PATH_MAX];
    snprintf (dbdir, sizeof dbdir, "%s/db", outside);
    cr_assert_eq (mkdir (dbdir, 0700), 0);
    MDB_env *env;
    cr_assert_eq (mdb_env_create (&env), 0);
    cr_assert_eq (mdb_env_open (env, dbdir, 0, 0600), 0);
    int sock = socket (AF_INET, SOCK_STREAM, 0);
    char fpath [PATH_MAX];
    snprintf (fpath, sizeof fpath, "%s/data.mdb", dbdir);
    int fd = open (fpath, O_RDWR);
    cr_assert (sock >= 0 && fd >= 0);
    cr_assert_eq (fcntl (sock, F_GETFD) & FD_CLOEXEC, 0);
    cr_assert_eq (fcntl (fd, F_GETFD) & FD_CLOEXEC, 0);

    sb_tool_result_t r = s_run ("shell", "{\"command\":\"ls /proc/self/fd\"}");
    cr_assert (r.ok, "%s", r.output);
    //  ls's own directory descriptor is 3; nothing else may appear.
    cr_assert_str_eq (r.output, "0\n1\n2\n3\n");
    sb_tool_result_clear (&r);
    close (fd);
    close (sock);
    mdb_env_close (env);
}

typedef struct {
    char fifo1 [PATH_MAX], fifo2 [PATH_MAX];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char seen [1024];
    size_t len;
    sb_tool_result_t res;
} s_pair_t;

static void
s_pair_output (const char *data, size_t len, void *arg)
{
    s_pair_t *p = arg;
    pthread_mutex_lock (&p->mu);
    if (p->len + len < sizeof p->seen) {
        memcpy (p->seen + p->len, data, len);
        p->len += len;
        p->seen [p->len] = 0;
    }
    pthread_cond_broadcast (&p->cv);
    pthread_mutex_unlock (&p->mu);
}

static void *
s_pair_thread (void *arg)
{
    s_pair_t *p = arg;
    sb_tool_ctx_t c = ctx;
    c.on_output = s_pair_output;
    c.output_arg = p;
    char args [4 * PATH_MAX];
    snprintf (args, sizeof args, "{\"command\":\"sh -c 'setsid cat %s > got & echo ORPHAN=$!'; "
              "echo started; cat %s\"}", p->fifo1, p->fifo2);
    sb_tool_run (&c, "shell", args, &p->res);
    return NULL;
}

Test (tools, concurrent_spawns_keep_their_own_processes)
{
    //  B leaves an orphan (re-parented to us) and blocks; A runs and cleans
    //  up its own leftovers meanwhile. B's orphan must survive A's sweep.
    s_pair_t pair = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
    snprintf (pair.fifo1, sizeof pair.fifo1, "%s/fifo1", outside);
    snprintf (pair.fifo2, sizeof pair.fifo2, "%s/fifo2", outside);
    cr_assert_eq (mkfifo (pair.fifo1, 0600), 0);
    cr_assert_eq (mkfifo (pair.fifo2, 0600), 0);
    pthread_t th;
    cr_assert_eq (pthread_create (&th, NULL, s_pair_thread, &pair), 0);
    pthread_mutex_lock (&pair.mu);
    while (!strstr (pair.seen, "started"))
        pthread_cond_wait (&pair.cv, &pair.mu);
    pthread_mutex_unlock (&pair.mu);
    pid_t orphan;
    cr_assert_eq (s_pids (pair.seen, &orphan, 1), 1, "%s", pair.seen);

    sb_tool_result_t a = s_run ("shell", "{\"command\":\"sleep 600 & "
                                         "sh -c 'setsid sleep 600 >/dev/null 2>&1 &'\"}");
    cr_assert (a.ok, "%s", a.output);
    cr_assert (strstr (a.output, "2 background processes"), "%s", a.output);
    sb_tool_result_clear (&a);
    cr_assert_eq (kill (orphan, 0), 0, "A's sweep killed B's orphan");

    //  Release B: feed its orphan, then its main command.
    int w1 = open (pair.fifo1, O_WRONLY);
    cr_assert_eq (write (w1, "x", 1), 1);
    close (w1);
    //  The orphan exits on its own; B's clean-up must still reap it.
    cr_assert (s_wait_zombie (orphan, 5000));
    int w2 = open (pair.fifo2, O_WRONLY);
    cr_assert_eq (write (w2, "done\n", 5), 5);
    close (w2);
    pthread_join (th, NULL);
    cr_assert (pair.res.ok, "%s", pair.res.output);
    cr_assert (strstr (pair.res.output, "done\n"), "%s", pair.res.output);
    cr_assert (s_gone (orphan));
    sb_tool_result_clear (&pair.res);
    cr_assert_str_eq (s_slurp (ws, "got"), "x");
}


//  ---------------------------------------------------------------------
//  Sandbox

Test (tools, sandbox_refuses_when_bwrap_missing)
{
    const char *argv [] = { "/bin/true", NULL };
    sb_spawn_opts_t opts = {
        .argv = argv, .cwd = ws, .cancel_fd = -1,
        .sandbox = "bwrap", .bwrap_path = "/nonexistent/bwrap",
    };
    sb_spawn_result_t sr;
    char err [512];
    cr_assert_eq (sb_spawn_run (&opts, &sr, err, sizeof err), -1);
    cr_assert (strstr (err, "/nonexistent/bwrap is not available"), "%s", err);
    cr_assert (strstr (err, "not run"), "%s", err);
    ctx.sandbox = "docker";
    s_expect_refused (s_run ("shell", "{\"command\":\"true\"}"), "unknown sandbox");
}

Test (tools, sandbox_bwrap)
{
    const char *argv [] = { "/bin/true", NULL };
    sb_spawn_opts_t opts = { .argv = argv, .cwd = ws, .cancel_fd = -1, .sandbox = "bwrap" };
    sb_spawn_result_t sr;
    char err [512];
    if (access (SB_SPAWN_BWRAP_PATH, X_OK) != 0)
        cr_skip_test ("bwrap is not installed");
    if (sb_spawn_run (&opts, &sr, err, sizeof err) != 0 || sr.exit_code != 0) {
        fprintf (stderr, "skipping sandbox_bwrap: bwrap does not work here: %s%s\n",
                 err, sr.output ? sr.output : "");
        sb_spawn_result_clear (&sr);
        cr_skip_test ("bwrap does not work in this environment");
    }
    sb_spawn_result_clear (&sr);

    ctx.sandbox = "bwrap";
    sb_tool_result_t r = s_run ("shell", "{\"command\":\"echo hi > inside.txt && cat inside.txt; "
                                         "touch /usr/sb-bwrap-probe 2>/dev/null && echo WROTE_ROOT; "
                                         "echo NETDEVS=$(tail -n +3 /proc/net/dev | wc -l)\"}");
    cr_assert (r.ok, "%s", r.output);
    cr_assert (strstr (r.output, "hi\n"), "%s", r.output);
    cr_assert_null (strstr (r.output, "WROTE_ROOT"), "%s", r.output);
    cr_assert (strstr (r.output, "NETDEVS=1\n"), "only lo expected: %s", r.output);
    cr_assert_str_eq (s_slurp (ws, "inside.txt"), "hi\n");
    cr_assert (access ("/usr/sb-bwrap-probe", F_OK) != 0);
    sb_tool_result_clear (&r);

    int64_t t0 = s_now_ms ();
    r = s_run ("shell", "{\"timeout_s\":1,\"command\":\"setsid sleep 600 & sleep 600\"}");
    cr_assert (r.timed_out, "%s", r.output);
    cr_assert_lt (s_now_ms () - t0, 4000);
    sb_tool_result_clear (&r);
}

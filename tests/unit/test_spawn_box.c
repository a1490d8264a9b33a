/*  tests/unit/test_spawn_box.c — the sandbox's argv and hidden paths
    (sandbox/spawn_box.c), and a real spawn in each box this machine
    can run: a hidden folder is empty, the network is loopback only unless
    asked, the workspace is writable and the host is not.
*/
#include "sandbox/spawn.h"
#include "sandbox/spawn_box.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base [] = "/tmp/sb-box-XXXXXX";
static char ws [PATH_MAX], secret [PATH_MAX], inner [PATH_MAX];

//  A workspace, a secret folder beside it with a file, and a secret
//  folder that holds a second workspace.
static void
s_setup (void)
{
    static bool done;
    if (done)
        return;
    cr_assert_not_null (mkdtemp (base));
    snprintf (ws, sizeof ws, "%s/ws", base);
    snprintf (secret, sizeof secret, "%s/data", base);
    snprintf (inner, sizeof inner, "%s/data/ws2", base);
    cr_assert_eq (mkdir (ws, 0755), 0);
    cr_assert_eq (mkdir (secret, 0700), 0);
    cr_assert_eq (mkdir (inner, 0755), 0);
    char f [PATH_MAX + 8];
    snprintf (f, sizeof f, "%s/token", secret);
    FILE *fp = fopen (f, "w");
    cr_assert_not_null (fp);
    fputs ("s3cret-token\n", fp);
    fclose (fp);
    cr_assert_eq (sb_spawn_sandbox_hide (secret), 0);
    done = true;
}

static int
s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    return remove (path);
}

static void
s_teardown (void)
{
    if (strstr (base, "XXXXXX") == NULL)
        nftw (base, s_rm, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite (box, .init = s_setup, .fini = s_teardown);

//  The index of `s` in argv, or -1.
static int
s_at (const char **argv, const char *s)
{
    for (int i = 0; argv [i]; i++)
        if (strcmp (argv [i], s) == 0)
            return i;
    return -1;
}

//  The index of the pair `a b` in argv, or -1.
static int
s_pair (const char **argv, const char *a, const char *b)
{
    for (int i = 0; argv [i] && argv [i + 1]; i++)
        if (strcmp (argv [i], a) == 0 && strcmp (argv [i + 1], b) == 0)
            return i;
    return -1;
}

Test (box, parse_and_names)
{
    int k = 7;
    cr_assert_eq (sb_box_parse (NULL, &k), 0);
    cr_assert_eq (k, -1);
    cr_assert_eq (sb_box_parse ("auto", &k), 0);
    cr_assert_eq (k, -1);
    cr_assert_eq (sb_box_parse ("bwrap", &k), 0);
    cr_assert_eq (k, SB_BOX_BWRAP);
    cr_assert_eq (sb_box_parse ("landlock", &k), 0);
    cr_assert_eq (k, SB_BOX_LANDLOCK);
    cr_assert_eq (sb_box_parse ("none", &k), 0);
    cr_assert_eq (k, SB_BOX_NONE);
    cr_assert_eq (sb_box_parse ("docker", &k), -1);
    cr_assert_str_eq (sb_box_name (SB_BOX_LANDLOCK), "landlock");
    char err [256];
    cr_assert_eq (sb_spawn_sandbox_init ("docker", err, sizeof err), -1);
    cr_assert (strstr (err, "docker"), "%s", err);
}

Test (box, hidden_is_the_path_and_beneath_only)
{
    char p [PATH_MAX + 16];
    cr_assert (sb_box_is_hidden (secret));
    snprintf (p, sizeof p, "%s/token", secret);
    cr_assert (sb_box_is_hidden (p));
    snprintf (p, sizeof p, "%s2", secret);        //  ".../data2": a sibling, not beneath
    cr_assert_not (sb_box_is_hidden (p));
    cr_assert_not (sb_box_is_hidden (ws));
    cr_assert_not (sb_box_is_hidden (base));
    cr_assert_eq (sb_box_hide ("relative/path"), -1);
}

Test (box, bwrap_argv)
{
    const char *args [] = { "/bin/sh", "-c", "true", NULL };
    char err [256];
    sb_box_t box = { .kind = SB_BOX_BWRAP, .bwrap_path = "/usr/bin/bwrap", .cwd = ws };
    const char **a = sb_box_argv (&box, "/bin/sh", args, err, sizeof err);
    cr_assert_not_null (a, "%s", err);
    cr_assert_str_eq (a [0], "/usr/bin/bwrap");
    cr_assert_geq (s_at (a, "--unshare-net"), 0);
    cr_assert_geq (s_at (a, "--unshare-pid"), 0);
    cr_assert_geq (s_at (a, "--die-with-parent"), 0);
    int ro = s_pair (a, "--ro-bind", "/"), hide = s_pair (a, "--tmpfs", secret);
    int bind = s_pair (a, "--bind", ws), dash = s_at (a, "--");
    cr_assert (ro >= 0 && hide > ro && bind > ro, "ro %d hide %d bind %d", ro, hide, bind);
    //  a secret that does not hold the workspace is mounted last: it wins
    cr_assert_gt (hide, bind);
    cr_assert_gt (dash, hide);
    cr_assert_str_eq (a [dash + 1], "/bin/sh");
    cr_assert_str_eq (a [dash + 3], "true");
    cr_assert_null (a [dash + 4]);
    free (a);

    //  network on, long-lived, a workspace inside the secret: the secret
    //  first, so the workspace shows through
    box = (sb_box_t) { .kind = SB_BOX_BWRAP, .bwrap_path = "/usr/bin/bwrap", .cwd = inner,
                       .network = true, .long_lived = true };
    a = sb_box_argv (&box, "/bin/sh", args, err, sizeof err);
    cr_assert_not_null (a, "%s", err);
    cr_assert_eq (s_at (a, "--unshare-net"), -1);
    cr_assert_eq (s_at (a, "--die-with-parent"), -1);
    hide = s_pair (a, "--tmpfs", secret);
    bind = s_pair (a, "--bind", inner);
    cr_assert (hide >= 0 && bind > hide, "hide %d bind %d", hide, bind);
    free (a);

    //  no box: the command alone
    box = (sb_box_t) { .kind = SB_BOX_NONE, .cwd = ws };
    a = sb_box_argv (&box, "/bin/sh", args, err, sizeof err);
    cr_assert_not_null (a);
    cr_assert_str_eq (a [0], "/bin/sh");
    cr_assert_null (a [3]);
    free (a);
}

//  Runs a shell command in `kind`'s box (network as given) in ws; returns
//  its output (static), or NULL when that box cannot run here.
static const char *
s_sh (const char *kind, bool network, const char *cmd)
{
    static char out [8192];
    const char *argv [] = { "/bin/sh", "-c", cmd, NULL };
    sb_spawn_opts_t o = { .argv = argv, .cwd = ws, .cancel_fd = -1, .sandbox = kind,
                          .network = network };
    sb_spawn_result_t r;
    char err [512];
    if (sb_spawn_run (&o, &r, err, sizeof err) != 0)
        return NULL;
    snprintf (out, sizeof out, "%s", r.output ? r.output : "");
    sb_spawn_result_clear (&r);
    return out;
}

static void
s_check_box (const char *kind)
{
    char cmd [PATH_MAX * 2];
    snprintf (cmd, sizeof cmd, "cat %s/token 2>/dev/null || echo HIDDEN; echo w > made && echo WROTE; "
              "touch /usr/sb-box-probe 2>/dev/null && echo HOST_WRITABLE; "
              "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), timeout=1)' "
              "2>/dev/null && echo ONLINE; "
              "python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>/dev/null && echo UNIX_SOCKET; "
              "python3 -c 'import socket; socket.socketpair()' && echo PAIR_OK; true", secret);
    const char *out = s_sh (kind, false, cmd);
    if (!out)
        cr_skip_test ("the %s sandbox cannot run here", kind);
    cr_assert (strstr (out, "HIDDEN") && !strstr (out, "s3cret"), "%s: %s", kind, out);
    cr_assert (strstr (out, "WROTE"), "%s: %s", kind, out);
    cr_assert_null (strstr (out, "HOST_WRITABLE"), "%s: %s", kind, out);
    cr_assert_null (strstr (out, "ONLINE"), "%s: %s", kind, out);
    cr_assert_null (strstr (out, "UNIX_SOCKET"), "%s: a tool made a Unix socket: %s", kind, out);
    cr_assert (strstr (out, "PAIR_OK"), "%s: socketpair failed: %s", kind, out);
    cr_assert_neq (access ("/usr/sb-box-probe", F_OK), 0);
}

Test (box, bwrap_hides_and_confines)
{
    if (access (SB_SPAWN_BWRAP_PATH, X_OK) != 0)
        cr_skip_test ("bwrap is not installed");
    s_check_box ("bwrap");
    //  loopback only without the network: one interface
    const char *out = s_sh ("bwrap", false, "tail -n +3 /proc/net/dev | wc -l");
    cr_assert (out && strcmp (out, "1\n") == 0, "%s", out ? out : "(none)");
    //  with it: the host's interfaces
    FILE *f = fopen ("/proc/net/dev", "r");
    cr_assert_not_null (f);
    int lines = 0;
    for (int c; (c = fgetc (f)) != EOF; )
        lines += c == '\n';
    fclose (f);
    char want [32];
    snprintf (want, sizeof want, "%d\n", lines - 2);
    out = s_sh ("bwrap", true, "tail -n +3 /proc/net/dev | wc -l");
    cr_assert (out && strcmp (out, want) == 0, "the network was not kept: %s (want %s)", out ? out : "(none)",
               want);
}

Test (box, landlock_hides_and_confines)
{
    if (sb_box_landlock_abi () < 4)
        cr_skip_test ("no Landlock with network rules (ABI 4) here");
    s_check_box ("landlock");
}

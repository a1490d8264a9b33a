/*  sandbox/spawn_box.c — the sandbox of a spawn: bubblewrap's
    options, the hidden paths, the root server's choice of user, and the
    Landlock fallback. See spawn_box.h.
*/
#include "sandbox/spawn_box.h"
#include "common/log.h"
#include "sandbox/spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define S_ARGS_MAX      4096

int
sb_box_parse (const char *name, int *kind)
{
    if (!name || !*name || strcmp (name, "auto") == 0)
        *kind = -1;
    else
    if (strcmp (name, "bwrap") == 0)
        *kind = SB_BOX_BWRAP;
    else
    if (strcmp (name, "landlock") == 0)
        *kind = SB_BOX_LANDLOCK;
    else
    if (strcmp (name, "none") == 0)
        *kind = SB_BOX_NONE;
    else
        return -1;
    return 0;
}

const char *
sb_box_name (sb_box_kind_t kind)
{
    return kind == SB_BOX_BWRAP ? "bwrap" : kind == SB_BOX_LANDLOCK ? "landlock" : "none";
}


//  ---------------------------------------------------------------------
//  Hidden paths: set at startup (before any tool runs), read by every
//  spawn. The lock only guards against a late sb_box_hide.

static pthread_mutex_t s_hide_lock = PTHREAD_MUTEX_INITIALIZER;
static char *s_hidden [SB_BOX_HIDE_MAX];
static size_t s_nhidden;

int
sb_box_hide (const char *path)
{
    if (!path || path [0] != '/' || strlen (path) >= PATH_MAX)
        return -1;
    char real [PATH_MAX];
    const char *p = realpath (path, real) ? real : path;
    pthread_mutex_lock (&s_hide_lock);
    int rc = 0;
    bool known = false;
    for (size_t i = 0; i < s_nhidden; i++)
        known |= strcmp (s_hidden [i], p) == 0;
    if (!known) {
        if (s_nhidden < SB_BOX_HIDE_MAX && (s_hidden [s_nhidden] = strdup (p)))
            s_nhidden++;
        else
            rc = -1;
    }
    pthread_mutex_unlock (&s_hide_lock);
    return rc;
}

//  Whether `path` is `dir` or lies beneath it.
static bool
s_under (const char *path, const char *dir)
{
    size_t n = strlen (dir);
    if (n == 1 && dir [0] == '/')
        return true;
    return strncmp (path, dir, n) == 0 && (path [n] == 0 || path [n] == '/');
}

bool
sb_box_is_hidden (const char *path)
{
    pthread_mutex_lock (&s_hide_lock);
    bool hidden = false;
    for (size_t i = 0; i < s_nhidden && !hidden; i++)
        hidden = s_under (path, s_hidden [i]);
    pthread_mutex_unlock (&s_hide_lock);
    return hidden;
}


//  ---------------------------------------------------------------------
//  bubblewrap's argv.

typedef struct {
    const char **argv;
    size_t n, cap;
    char ids [2][48];           //  setpriv's --reuid= and --regid=
} s_argv_t;

static void
s_push (s_argv_t *a, const char *s)
{
    if (a->n + 1 < a->cap)
        a->argv [a->n++] = s;
}

/*  Where a root server hands the command to another user: the workspace's
    owner, when that is not root and setpriv is there to switch. A root-
    owned workspace (or none) keeps root, without capabilities.         */
static bool
s_switch_user (const sb_box_t *box, uid_t *uid, gid_t *gid)
{
    struct stat st;
    if (geteuid () != 0 || !box->cwd || strcmp (box->cwd, "/") == 0
        || stat (box->cwd, &st) != 0 || st.st_uid == 0
        || access (SB_BOX_SETPRIV_PATH, X_OK) != 0)
        return false;
    *uid = st.st_uid;
    *gid = st.st_gid;
    return true;
}

const char *
sb_box_home (const sb_box_t *box, char *buf, size_t len)
{
    uid_t uid;
    gid_t gid;
    if (!box || box->kind == SB_BOX_NONE || !s_switch_user (box, &uid, &gid))
        return NULL;
    struct passwd pw, *found = NULL;
    char pwbuf [4096];
    struct stat st;
    if (getpwuid_r (uid, &pw, pwbuf, sizeof pwbuf, &found) == 0 && found && found->pw_dir
    &&  stat (found->pw_dir, &st) == 0 && S_ISDIR (st.st_mode) && !sb_box_is_hidden (found->pw_dir))
        snprintf (buf, len, "%s", found->pw_dir);
    else
        snprintf (buf, len, "/tmp");
    return buf;
}

//  Hides each hidden path that exists: a folder behind an empty tmpfs, a
//  file behind /dev/null. `before`: only those that contain the
//  workspace or a writable folder (mounted first, so that the binds show
//  through); else only the others (mounted last, so that they win).
static void
s_push_hides (s_argv_t *a, const sb_box_t *box, bool before)
{
    pthread_mutex_lock (&s_hide_lock);
    for (size_t i = 0; i < s_nhidden; i++) {
        const char *h = s_hidden [i];
        bool contains = box->cwd && s_under (box->cwd, h);
        for (size_t k = 0; box->writable && box->writable [k]; k++)
            contains |= s_under (box->writable [k], h);
        struct stat st;
        if (contains != before || lstat (h, &st) != 0)
            continue;
        if (S_ISDIR (st.st_mode)) {
            s_push (a, "--tmpfs");
            s_push (a, h);
        }
        else {
            s_push (a, "--ro-bind");
            s_push (a, "/dev/null");
            s_push (a, h);
        }
    }
    pthread_mutex_unlock (&s_hide_lock);
}

static void
s_push_bwrap (s_argv_t *a, const sb_box_t *box, bool switching)
{
    s_push (a, box->bwrap_path);
    if (!box->long_lived)
        s_push (a, "--die-with-parent");
    s_push (a, "--new-session");
    s_push (a, "--unshare-pid");
    s_push (a, "--unshare-ipc");
    s_push (a, "--unshare-uts");
    s_push (a, "--unshare-cgroup-try");
    if (!box->network)
        s_push (a, "--unshare-net");
    //  the filter's program on descriptor 3 (the spawn puts it there)
    if (sb_box_wants_filter (box)) {
        s_push (a, "--seccomp");
        s_push (a, "3");
    }
    //  setpriv needs CAP_SETUID to switch; it drops everything itself.
    if (!switching) {
        s_push (a, "--cap-drop");
        s_push (a, "ALL");
    }
    static const char *const base [] = {
        "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
    };
    for (size_t i = 0; i < sizeof base / sizeof base [0]; i++)
        s_push (a, base [i]);
    //  A tool gets a /tmp of its own. An MCP server or a hook is the
    //  person's own program, which may live or keep its files in /tmp
    //  (a checkout there, npx's cache): it sees the host's, with the
    //  hidden paths hidden there as everywhere.
    if (box->long_lived) {
        s_push (a, "--bind");
        s_push (a, "/tmp");
        s_push (a, "/tmp");
    }
    else {
        s_push (a, "--tmpfs");
        s_push (a, "/tmp");
    }
    s_push_hides (a, box, true);
    bool bind_cwd = box->cwd && strcmp (box->cwd, "/") != 0;
    if (bind_cwd) {
        s_push (a, "--bind");
        s_push (a, box->cwd);
        s_push (a, box->cwd);
    }
    for (size_t k = 0; box->writable && box->writable [k]; k++) {
        s_push (a, "--bind");
        s_push (a, box->writable [k]);
        s_push (a, box->writable [k]);
    }
    s_push_hides (a, box, false);
    s_push (a, "--chdir");
    s_push (a, bind_cwd ? box->cwd : "/");
    s_push (a, "--");
}

const char **
sb_box_argv (const sb_box_t *box, const char *prog, const char *const *args,
             char *err, size_t errlen)
{
    size_t argc = 0;
    while (args && args [argc])
        if (++argc > S_ARGS_MAX) {
            sb_fail (err, errlen, "too many arguments");
            return NULL;
        }
    size_t nw = 0;
    while (box->writable && box->writable [nw])
        if (++nw > SB_BOX_WRITABLE_MAX) {
            sb_fail (err, errlen, "too many writable folders");
            return NULL;
        }
    s_argv_t a = { .cap = 40 + 3 * SB_BOX_HIDE_MAX + 3 * nw + 12 + argc + 2 };
    //  One block: the pointers, then the struct that holds the id strings.
    a.argv = calloc (1, a.cap * sizeof *a.argv + sizeof a.ids);
    if (!a.argv) {
        sb_fail (err, errlen, "out of memory");
        return NULL;
    }
    char (*ids) [48] = (char (*) [48]) (void *) (a.argv + a.cap);
    uid_t uid = 0;
    gid_t gid = 0;
    bool switching = box->kind != SB_BOX_NONE && s_switch_user (box, &uid, &gid);
    if (box->kind == SB_BOX_BWRAP)
        s_push_bwrap (&a, box, switching);
    if (switching) {
        snprintf (ids [0], sizeof ids [0], "--reuid=%u", (unsigned) uid);
        snprintf (ids [1], sizeof ids [1], "--regid=%u", (unsigned) gid);
        static const char *const sp [] = {
            "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
        };
        s_push (&a, SB_BOX_SETPRIV_PATH);
        s_push (&a, ids [0]);
        s_push (&a, ids [1]);
        for (size_t i = 0; i < sizeof sp / sizeof sp [0]; i++)
            s_push (&a, sp [i]);
    }
    s_push (&a, prog);
    for (size_t i = 1; i < argc; i++)
        s_push (&a, args [i]);
    a.argv [a.n] = NULL;
    return a.argv;
}


//  ---------------------------------------------------------------------
//  Landlock.

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER        (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE     (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV    (1ULL << 15)
#endif
#define S_LL_NET_BIND       (1ULL << 0)     //  LANDLOCK_ACCESS_NET_BIND_TCP
#define S_LL_NET_CONNECT    (1ULL << 1)     //  LANDLOCK_ACCESS_NET_CONNECT_TCP
#define S_LL_SCOPE_UNIX     (1ULL << 0)     //  LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define S_LL_SCOPE_SIGNAL   (1ULL << 1)     //  LANDLOCK_SCOPE_SIGNAL
#define S_LL_FILE_RIGHTS    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE \
                             | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE \
                             | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define S_LL_READ           (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE \
                             | LANDLOCK_ACCESS_FS_READ_DIR)
#define S_LL_DEPTH_MAX      32

//  The ruleset attributes of the newest ABI we know (v6), cut to what
//  the kernel's ABI takes.
struct s_ll_attr {
    uint64_t handled_access_fs, handled_access_net, scoped;
};

//  SWITCHBOARD_NO_LANDLOCK=1 pretends the kernel has none (tests use it
//  to reach the refusal).
int
sb_box_landlock_abi (void)
{
    const char *no = getenv ("SWITCHBOARD_NO_LANDLOCK");
    if (no && strcmp (no, "1") == 0)
        return 0;
    long abi = syscall (SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi > 0 ? (int) abi : 0;
}

//  Every filesystem right the ABI knows.
static uint64_t
s_ll_fs_all (int abi)
{
    uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;     //  ABI 1: bits 0-12
    if (abi >= 2)
        all |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        all |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return all;
}

static void
s_ll_rule (int rs, int fd, uint64_t access)
{
    struct landlock_path_beneath_attr pb = { .allowed_access = access, .parent_fd = fd };
    syscall (SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
}

/*  Grants `access` beneath `path` but not to any hidden path: where one
    lies below, the grant goes to each entry of the folder instead,
    recursively, skipping the hidden one (and symlinks, whose targets are
    granted where they lie). The top (depth 0) is granted even inside a
    hidden folder: it is a workspace the person chose.                    */
static void
s_ll_grant (int rs, const char *path, uint64_t access, uint64_t handled, int depth)
{
    if (depth > 0 && sb_box_is_hidden (path))
        return;
    bool below = false;
    pthread_mutex_lock (&s_hide_lock);
    for (size_t i = 0; i < s_nhidden && !below; i++)
        below = strcmp (s_hidden [i], path) != 0 && s_under (s_hidden [i], path);
    pthread_mutex_unlock (&s_hide_lock);
    int fd = open (path, O_PATH | O_CLOEXEC | (depth ? O_NOFOLLOW : 0));
    if (fd < 0)
        return;
    struct stat st;
    if (fstat (fd, &st) != 0 || S_ISLNK (st.st_mode)) {
        close (fd);
        return;
    }
    uint64_t a = (S_ISDIR (st.st_mode) ? access : access & S_LL_FILE_RIGHTS) & handled;
    if (!below || !S_ISDIR (st.st_mode) || depth >= S_LL_DEPTH_MAX) {
        if (!below)
            s_ll_rule (rs, fd, a);
        close (fd);
        return;
    }
    close (fd);
    DIR *d = opendir (path);
    if (!d)
        return;
    struct dirent *de;
    char child [PATH_MAX];
    while ((de = readdir (d)))
        if (strcmp (de->d_name, ".") && strcmp (de->d_name, "..")
            && snprintf (child, sizeof child, "%s/%s", strcmp (path, "/") ? path : "",
                         de->d_name) < (int) sizeof child)
            s_ll_grant (rs, child, access, handled, depth + 1);
    closedir (d);
}

//  Empties the calling thread's capability bounding set: what it
//  executes as root gets no capability.
static void
s_drop_bounding (void)
{
    for (int cap = 0; cap <= 63; cap++)
        if (prctl (PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
            prctl (PR_CAPBSET_DROP, cap, 0, 0, 0);
}

#if defined (__x86_64__)
#   define S_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined (__aarch64__)
#   define S_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/*  A tool may create no AF_UNIX socket (seccomp; a call of another ABI
    than the native one is refused whole, so that the i386 socketcall and
    x32 cannot go around it). A read-only mount does not stop a connect()
    to a socket, and the host has sockets that obey uid 0 whatever its
    capabilities (systemd's, D-Bus's system bus, docker's): a root tool
    could have them start anything. Landlock does not govern connect() by
    path either, and the bus's ipc sockets are in the data folder. Socket
    pairs stay allowed. Returns 0, or -1 where the architecture is not
    known here.                                                           */
#define S_FILTER_LEN 11

//  The filter's program: fills f (S_FILTER_LEN entries); 0, or -1 where
//  the architecture is not known here.
static int
s_unix_filter (struct sock_filter *out)
{
#ifdef S_AUDIT_ARCH
    struct sock_filter f [S_FILTER_LEN] = {
        BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, arch)),
        BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, S_AUDIT_ARCH, 1, 0),
        BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, nr)),
        BPF_JUMP (BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),       //  x32
        BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 3),
        BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, args [0])),
        BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1),
        BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    memcpy (out, f, sizeof f);
    return 0;
#else
    (void) out;
    return -1;
#endif
}

static int
s_no_unix_sockets (void)
{
    struct sock_filter f [S_FILTER_LEN];
    if (s_unix_filter (f) != 0)
        return -1;
    struct sock_fprog prog = { .len = S_FILTER_LEN, .filter = f };
    return prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0 ? 0 : -1;
}

bool
sb_box_wants_filter (const sb_box_t *box)
{
    struct sock_filter f [S_FILTER_LEN];
    return box && box->kind == SB_BOX_BWRAP && !box->long_lived && s_unix_filter (f) == 0;
}

int
sb_box_filter_fd (void)
{
    struct sock_filter f [S_FILTER_LEN];
    if (s_unix_filter (f) != 0)
        return -1;
    int fd = memfd_create ("switchboard-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    int high = fcntl (fd, F_DUPFD_CLOEXEC, 10);
    close (fd);
    if (high < 0 || write (high, f, sizeof f) != (ssize_t) sizeof f || lseek (high, 0, SEEK_SET) != 0) {
        if (high >= 0)
            close (high);
        return -1;
    }
    return high;
}

int
sb_box_landlock_apply (const sb_box_t *box, char *err, size_t errlen)
{
    int abi = sb_box_landlock_abi ();
    if (abi < 1)
        return sb_fail (err, errlen, "Landlock is not available in this kernel");
    struct s_ll_attr attr = { .handled_access_fs = s_ll_fs_all (abi) };
    size_t size = sizeof (uint64_t);
    if (abi >= 4) {
        attr.handled_access_net = box->network ? 0 : S_LL_NET_BIND | S_LL_NET_CONNECT;
        size = 2 * sizeof (uint64_t);
    }
    if (abi >= 6) {
        attr.scoped = S_LL_SCOPE_SIGNAL | (box->network ? 0 : S_LL_SCOPE_UNIX);
        size = 3 * sizeof (uint64_t);
    }
    int rs = (int) syscall (SYS_landlock_create_ruleset, &attr, size, 0);
    if (rs < 0)
        return sb_fail (err, errlen, "cannot create a Landlock ruleset: %s", strerror (errno));
    uint64_t all = attr.handled_access_fs;
    s_ll_grant (rs, "/", S_LL_READ, all, 0);
    static const char *const devs [] = { "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/tmp" };
    for (size_t i = 0; i < sizeof devs / sizeof devs [0]; i++)
        s_ll_grant (rs, devs [i], all, all, 0);
    if (box->cwd && strcmp (box->cwd, "/") != 0)
        s_ll_grant (rs, box->cwd, all, all, 0);
    for (size_t k = 0; box->writable && box->writable [k]; k++)
        s_ll_grant (rs, box->writable [k], all, all, 0);
    uid_t uid;
    gid_t gid;
    //  setpriv needs the bounding set to switch user; it empties it itself.
    if (geteuid () == 0 && !s_switch_user (box, &uid, &gid))
        s_drop_bounding ();
    int rc = 0;
    if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        || syscall (SYS_landlock_restrict_self, rs, 0) != 0)
        rc = sb_fail (err, errlen, "cannot enter the Landlock sandbox: %s", strerror (errno));
    else
    if (!box->long_lived && s_no_unix_sockets () != 0)
        rc = sb_fail (err, errlen, "cannot forbid Unix sockets in the Landlock sandbox: %s",
                     strerror (errno));
    close (rs);
    return rc;
}


//  ---------------------------------------------------------------------
//  The server's sandbox.

static sb_box_kind_t s_kind = SB_BOX_NONE;

sb_box_kind_t
sb_spawn_sandbox_kind (void)
{
    return __atomic_load_n (&s_kind, __ATOMIC_ACQUIRE);
}

//  SWITCHBOARD_BWRAP names another bubblewrap (tests use it to make
//  bubblewrap fail, and so exercise the fallback).
const char *
sb_spawn_sandbox_bwrap (void)
{
    const char *p = getenv ("SWITCHBOARD_BWRAP");
    return p && p [0] == '/' ? p : SB_SPAWN_BWRAP_PATH;
}

const char *
sb_spawn_sandbox_name (void)
{
    return sb_box_name (sb_spawn_sandbox_kind ());
}

int
sb_spawn_sandbox_hide (const char *path)
{
    return sb_box_hide (path);
}

bool
sb_spawn_sandbox_hidden (const char *path)
{
    return path && sb_box_is_hidden (path);
}

//  Whether bubblewrap runs here: `true` in a box, as a tool would be.
static int
s_probe_bwrap (char *why, size_t whylen)
{
    const char *argv [] = { "true", NULL };
    sb_spawn_opts_t o = { .argv = argv, .cwd = "/", .cancel_fd = -1, .sandbox = "bwrap",
                          .timeout_ms = 30000 };
    sb_spawn_result_t r;
    if (sb_spawn_run (&o, &r, why, whylen) != 0)
        return -1;
    int rc = r.exit_code == 0 ? 0 : -1;
    if (rc)
        snprintf (why, whylen, "%s --ro-bind / / ... true exited with %d: %.200s",
                  sb_spawn_sandbox_bwrap (), r.exit_code, r.output ? r.output : "");
    sb_spawn_result_clear (&r);
    return rc;
}

int
sb_spawn_sandbox_init (const char *want, char *err, size_t errlen)
{
    int kind;
    if (sb_box_parse (want, &kind) != 0)
        return sb_fail (err, errlen, "--sandbox takes auto, bwrap, landlock or none, not '%.32s'", want);
    char why [512] = "";
    if (kind == SB_BOX_NONE || (kind == SB_BOX_LANDLOCK && sb_box_landlock_abi () > 0)) {
        __atomic_store_n (&s_kind, (sb_box_kind_t) kind, __ATOMIC_RELEASE);
        return 0;
    }
    if (kind == SB_BOX_LANDLOCK)
        return sb_fail (err, errlen, "--sandbox landlock: this kernel has no Landlock");
    if (s_probe_bwrap (why, sizeof why) == 0) {
        __atomic_store_n (&s_kind, SB_BOX_BWRAP, __ATOMIC_RELEASE);
        return 0;
    }
    if (kind == SB_BOX_BWRAP)
        return sb_fail (err, errlen, "--sandbox bwrap: bubblewrap cannot run here: %s", why);
    if (sb_box_landlock_abi () > 0) {
        __atomic_store_n (&s_kind, SB_BOX_LANDLOCK, __ATOMIC_RELEASE);
        return 0;
    }
    return sb_fail (err, errlen, "no sandbox can run here: bubblewrap cannot (%s), and the kernel "
                   "has no Landlock. Tools would run as this server's user, seeing all it sees: "
                   "pass --sandbox none to accept that", why);
}

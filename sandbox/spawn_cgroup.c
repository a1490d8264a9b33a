/*  sandbox/spawn_cgroup.c — a cgroup v2 per tool call: find where we
    may create one, start the child inside it, kill it whole.

    Why clone3 and not posix_spawn followed by a write to cgroup.procs: the
    child could fork before it is moved, and that grandchild would stay
    outside. CLONE_INTO_CGROUP makes the child born inside. The child is a
    copy of a threaded process, so between clone3 and execve it makes only
    system calls (no malloc, no locks), as posix_spawn's child does.
    CLONE_VFORK keeps the parent until the exec, so an exec failure is
    known when clone3 returns, through a close-on-exec pipe.
*/
#include "sandbox/spawn_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SB_CGROUP_FREEZE_MS     1000
#define SB_CGROUP_EMPTY_MS      3000
#define SB_CGROUP_MAX_PROCS     4096

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static char s_base [PATH_MAX];          //  where per-call cgroups go; "" if none
static volatile int s_disabled;

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_sleep_ms (int ms)
{
    struct timespec ts = { 0, (long) ms * 1000000 };
    nanosleep (&ts, NULL);
}

//  Our own cgroup v2 directory: the "0::" line of /proc/self/cgroup under
//  the cgroup2 mount. Returns 0 with it in out.
static int
s_own_cgroup (char *out, size_t outlen)
{
    char line [PATH_MAX + 64], path [PATH_MAX] = "";
    FILE *f = fopen ("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    while (fgets (line, sizeof line, f))
        if (strncmp (line, "0::", 3) == 0) {
            line [strcspn (line, "\n")] = 0;
            snprintf (path, sizeof path, "%s", line + 3);
        }
    fclose (f);
    if (!*path)
        return -1;
    f = fopen ("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    int rc = -1;
    char l [4 * PATH_MAX];
    while (rc != 0 && fgets (l, sizeof l, f)) {
        //  "id parent maj:min root mountpoint options ... - fstype source ..."
        char root [PATH_MAX], mnt [PATH_MAX];
        const char *dash = strstr (l, " - ");
        if (!dash || strncmp (dash, " - cgroup2 ", 11) != 0)
            continue;
        if (sscanf (l, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 || strchr (mnt, '\\'))
            continue;               //  an escaped (octal) path: not worth decoding
        //  Our path is relative to the cgroup namespace root, which is
        //  the mount's root when it was mounted in our namespace.
        const char *rel = path;
        size_t rl = strlen (root);
        if (strcmp (root, "/") != 0) {
            if (strncmp (path, root, rl) != 0 || (path [rl] && path [rl] != '/'))
                continue;
            rel = path + rl;
        }
        if ((size_t) snprintf (out, outlen, "%s%s", mnt, strcmp (rel, "/") == 0 ? "" : rel) < outlen)
            rc = 0;
    }
    fclose (f);
    return rc;
}

//  Kills and removes the cgroups that a server killed mid-call left
//  behind (switchboard-<pid>-<n> whose pid is gone): what ran in them
//  would otherwise run on with nobody to stop it.
static void
s_sweep_stale (const char *base)
{
    DIR *dir = opendir (base);
    if (!dir)
        return;
    struct dirent *de;
    while ((de = readdir (dir))) {
        int pid;
        unsigned long long n;
        char tail;
        if (sscanf (de->d_name, "switchboard-%d-%llu%c", &pid, &n, &tail) != 2 || pid <= 0
            || pid == (int) getpid () || kill (pid, 0) == 0 || errno != ESRCH)
            continue;
        sb_spawn_cgroup_t cg = { .dirfd = -1 };
        if ((size_t) snprintf (cg.path, sizeof cg.path, "%s/%s", base, de->d_name) >= sizeof cg.path)
            continue;
        cg.dirfd = open (cg.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg.dirfd >= 0)
            sb_spawn_cgroup_destroy (&cg);
    }
    closedir (dir);
}

//  Decides once whether cgroups are used: not if switched off, and not
//  unless a child cgroup with cgroup.kill and cgroup.freeze can be made.
static void
s_detect (void)
{
    const char *off = getenv (SB_SPAWN_NO_CGROUP_VAR);
    if (off && *off && strcmp (off, "0") != 0)
        return;
    char base [PATH_MAX], probe [PATH_MAX + 64], file [PATH_MAX + 96];
    if (s_own_cgroup (base, sizeof base) != 0)
        return;
    snprintf (probe, sizeof probe, "%s/switchboard-%d-probe", base, (int) getpid ());
    if (mkdir (probe, 0755) != 0 && errno != EEXIST)
        return;
    snprintf (file, sizeof file, "%s/cgroup.kill", probe);
    bool ok = access (file, W_OK) == 0;
    snprintf (file, sizeof file, "%s/cgroup.freeze", probe);
    ok = ok && access (file, W_OK) == 0;
    rmdir (probe);
    if (ok) {
        snprintf (s_base, sizeof s_base, "%s", base);
        s_sweep_stale (base);
    }
}

void
sb_spawn_cgroup_init (void)
{
    pthread_once (&s_once, s_detect);
}

void
sb_spawn_cgroup_disable (void)
{
    s_disabled = 1;
}

int
sb_spawn_cgroup_new (sb_spawn_cgroup_t *cg, uint64_t serial)
{
    cg->dirfd = -1;
    cg->path [0] = 0;
    pthread_once (&s_once, s_detect);
    if (s_disabled || !*s_base)
        return -1;
    if ((size_t) snprintf (cg->path, sizeof cg->path, "%s/switchboard-%d-%llu", s_base,
                           (int) getpid (), (unsigned long long) serial) >= sizeof cg->path)
        return -1;
    if (mkdir (cg->path, 0755) != 0 && errno != EEXIST) {
        cg->path [0] = 0;
        return -1;
    }
    cg->dirfd = open (cg->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cg->dirfd < 0) {
        rmdir (cg->path);
        cg->path [0] = 0;
        return -1;
    }
    return 0;
}

//  In the child, between clone3 and execve: system calls only.
static void
s_child (const sb_spawn_exec_t *x, int errfd)
{
    struct sigaction dfl;
    memset (&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < _NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction (sig, &dfl, NULL);    //  glibc's own signals say EINVAL: fine
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    int e = 0;
    if (setpgid (0, 0) != 0)
        e = errno;
    int nul = x->in_fd > 0 ? x->in_fd : open ("/dev/null", O_RDONLY);
    if (!e && (nul < 0 || (nul != 0 && dup2 (nul, 0) < 0)))
        e = errno;
    if (!e && (dup2 (x->out_fd, 1) < 0 || dup2 (x->err_fd > 0 ? x->err_fd : x->out_fd, 2) < 0))
        e = errno;
    //  errfd moves out of the way of descriptor 3 first
    if (!e && x->fd3 > 0 && errfd == 3 && (errfd = fcntl (errfd, F_DUPFD_CLOEXEC, 4)) < 0)
        e = errno;
    if (!e && x->fd3 > 0 && dup2 (x->fd3, 3) < 0)
        e = errno;
    //  Close-on-exec rather than close: errfd must stay open until exec.
    if (!e && syscall (SYS_close_range, x->fd3 > 0 ? 4u : 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0)
        e = errno;
    if (!e && chdir (x->cwd) != 0)
        e = errno;
    if (!e) {
        execve (x->prog, x->argv, x->envp);
        e = errno;
    }
    while (write (errfd, &e, sizeof e) < 0 && errno == EINTR)
        ;
    _exit (127);
}

pid_t
sb_spawn_cgroup_start (const sb_spawn_cgroup_t *cg, const sb_spawn_exec_t *x, int *pidfd, int *err)
{
    *pidfd = -1;
    int ep [2];
    if (pipe2 (ep, O_CLOEXEC) != 0) {
        *err = errno;
        return -1;
    }
    int pfd = -1;
    struct clone_args ca;
    memset (&ca, 0, sizeof ca);
    ca.flags = CLONE_VFORK | CLONE_INTO_CGROUP | CLONE_PIDFD;
    ca.pidfd = (uint64_t) (uintptr_t) &pfd;
    ca.exit_signal = SIGCHLD;
    ca.cgroup = (uint64_t) cg->dirfd;
    long pid = syscall (SYS_clone3, &ca, sizeof ca);
    if (pid == 0) {
        close (ep [0]);
        s_child (x, ep [1]);
    }
    int e = errno;
    close (ep [1]);
    if (pid < 0) {
        close (ep [0]);
        *err = e;
        return -1;
    }
    //  CLONE_VFORK: the child has exec'd or failed by now. EOF is success.
    int child_err = 0;
    ssize_t r;
    while ((r = read (ep [0], &child_err, sizeof child_err)) < 0 && errno == EINTR)
        ;
    close (ep [0]);
    if (r == (ssize_t) sizeof child_err) {
        while (waitpid ((pid_t) pid, NULL, 0) < 0 && errno == EINTR)
            ;
        if (pfd >= 0)
            close (pfd);
        *err = child_err ? child_err : EIO;
        //  Not a refusal of clone3: keep ENOSYS and EPERM for that.
        if (*err == ENOSYS || *err == EPERM)
            *err = EACCES;
        return -1;
    }
    *pidfd = pfd;
    return (pid_t) pid;
}

//  Writes a short string to a file of the cgroup.
static int
s_write (const sb_spawn_cgroup_t *cg, const char *file, const char *value)
{
    int fd = openat (cg->dirfd, file, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = write (fd, value, strlen (value));
    close (fd);
    return w == (ssize_t) strlen (value) ? 0 : -1;
}

//  Whether cgroup.events says "key 1".
static bool
s_event (const sb_spawn_cgroup_t *cg, const char *key)
{
    char buf [256];
    int fd = openat (cg->dirfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t r = read (fd, buf, sizeof buf - 1);
    close (fd);
    if (r <= 0)
        return false;
    buf [r] = 0;
    char want [64];
    snprintf (want, sizeof want, "%s 1", key);
    const char *at = strstr (buf, want);
    return at && (at == buf || at [-1] == '\n');
}

static bool
s_wait_event (const sb_spawn_cgroup_t *cg, const char *key, bool value, int ms)
{
    int64_t deadline = s_now_ms () + ms;
    while (s_event (cg, key) != value) {
        if (s_now_ms () >= deadline)
            return false;
        s_sleep_ms (1);
    }
    return true;
}

size_t
sb_spawn_cgroup_kill (sb_spawn_cgroup_t *cg, pid_t child, sb_spawn_pidset_t *killed,
                      char *desc, size_t desclen)
{
    if (cg->dirfd < 0)
        return 0;
    //  The common case: the command exited and left nothing (a zombie is
    //  out of its cgroup already).
    if (!s_event (cg, "populated"))
        return 0;
    //  Frozen, nothing in it can fork while we list it, so the list (and
    //  what the model is told) is exact. A fatal signal still ends a
    //  frozen process.
    if (s_write (cg, "cgroup.freeze", "1") == 0)
        s_wait_event (cg, "frozen", true, SB_CGROUP_FREEZE_MS);
    size_t count = 0;
    int fd = openat (cg->dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen (fd, "re") : NULL;
    if (!f && fd >= 0)
        close (fd);
    int pid;
    while (f && count < SB_CGROUP_MAX_PROCS && fscanf (f, "%d", &pid) == 1) {
        if (pid == child || pid <= 0)
            continue;
        //  A pid the set cannot hold is left to the orphan sweep to reap.
        if (killed->n < SB_CGROUP_MAX_PROCS)
            sb_spawn_pidset_add (killed, (pid_t) pid);
        count++;
        if (desc)
            sb_spawn_describe ((pid_t) pid, desc, desclen);
    }
    if (f)
        fclose (f);
    s_write (cg, "cgroup.kill", "1");
    s_wait_event (cg, "populated", false, SB_CGROUP_EMPTY_MS);
    return count;
}

void
sb_spawn_cgroup_destroy (sb_spawn_cgroup_t *cg)
{
    if (!cg || cg->dirfd < 0)
        return;
    if (s_event (cg, "populated")) {
        s_write (cg, "cgroup.kill", "1");
        s_wait_event (cg, "populated", false, SB_CGROUP_EMPTY_MS);
    }
    close (cg->dirfd);
    cg->dirfd = -1;
    rmdir (cg->path);
    cg->path [0] = 0;
}

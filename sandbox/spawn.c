/*  sandbox/spawn.c — start tool processes without fork(), and leave
    nothing behind.

    Which processes belong to a spawn? With a cgroup per spawn
    (sandbox/spawn_cgroup.c), whatever is in it. Without one, when the
    command ends we kill its process group and scan /proc for what the
    group kill missed:

    - anything still in the child's process group;
    - anything whose parent chain passes through our child (a descendant
      that moved to its own session or group);
    - anything whose chain reaches the server without passing through some
      spawn's child: an orphan the subreaper inherited. Those carry the
      environment mark SWITCHBOARD_TOOL_ID=<server pid>.<n>. Ours if n is
      our own; left alone if n belongs to a spawn still running that had
      started when the orphan was born; killed if n is a spawn that already
      ended (a leak). An orphan with no mark (env -i), or a mark that does
      not fit, is ours unless another running spawn had started by its
      birth; that one kills it when it ends. The registry is read after the
      /proc scan, so every spawn that could own a scanned process is in it.
      One caught inside execve reads as having no environment at all, so a
      process that reads empty is stopped, read again, and continued.

    Killing repeats until a scan finds nothing new, because a process can
    fork between the scan and the kill; SIGKILL stops that, so it converges.
    Everything killed is then reaped: as the subreaper we inherit each one
    once its parent dies.

    Reaping is only ever by pid, never waitpid(-1), and a spawn's own child
    is registered (under the registry lock, across posix_spawn) so that no other
    thread's sweep reaps it and steals its exit status.
*/
#include "common/log.h"
#include "sandbox/spawn.h"
#include "sandbox/spawn_box.h"
#include "sandbox/spawn_cgroup.h"
#include "sandbox/spawn_tree.h"
#include "common/ring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SB_SPAWN_MAX_EXTRA      64
#define SB_SPAWN_MAX_CAP        (16u * 1024 * 1024)
#define SB_SPAWN_MAX_VALUE      (32 * 1024)
#define SB_SPAWN_DRAIN_MS       500
#define SB_SPAWN_DEFAULT_PATH   "/usr/local/bin:/usr/bin:/bin"

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
sb_spawn_init_subreaper (void)
{
    sb_spawn_cgroup_init ();
    return prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -1;
}

void
sb_spawn_result_clear (sb_spawn_result_t *res)
{
    if (!res)
        return;
    free (res->output);
    memset (res, 0, sizeof *res);
}


//  ---------------------------------------------------------------------
//  The environment: an allowlist, never the server's own.

typedef struct {
    char *strings [4 + SB_SPAWN_MAX_EXTRA + 2];
    char *envp [4 + SB_SPAWN_MAX_EXTRA + 2];
    size_t count;
} s_env_t;

static bool
s_env_name_ok (const char *s, size_t n)
{
    if (n == 0 || n > 255 || !(s [0] == '_' || ((s [0] | 32) >= 'a' && (s [0] | 32) <= 'z')))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(s [i] == '_' || (s [i] >= '0' && s [i] <= '9')
              || ((s [i] | 32) >= 'a' && (s [i] | 32) <= 'z')))
            return false;
    return true;
}

//  Sets NAME to value, replacing an earlier entry of the same name.
static int
s_env_set (s_env_t *env, const char *name, size_t nlen, const char *value)
{
    size_t vlen = strlen (value);
    if (vlen > SB_SPAWN_MAX_VALUE)
        return -1;
    char *s = malloc (nlen + vlen + 2);
    if (!s)
        return -1;
    memcpy (s, name, nlen);
    s [nlen] = '=';
    memcpy (s + nlen + 1, value, vlen + 1);
    for (size_t i = 0; i < env->count; i++)
        if (strncmp (env->strings [i], name, nlen) == 0 && env->strings [i][nlen] == '=') {
            free (env->strings [i]);
            env->strings [i] = s;
            return 0;
        }
    if (env->count + 1 >= sizeof env->strings / sizeof env->strings [0]) {
        free (s);
        return -1;
    }
    env->strings [env->count++] = s;
    return 0;
}

static const char *
s_env_get (const s_env_t *env, const char *name)
{
    size_t n = strlen (name);
    for (size_t i = 0; i < env->count; i++)
        if (strncmp (env->strings [i], name, n) == 0 && env->strings [i][n] == '=')
            return env->strings [i] + n + 1;
    return NULL;
}

static void
s_env_clear (s_env_t *env)
{
    for (size_t i = 0; i < env->count; i++)
        free (env->strings [i]);
    env->count = 0;
}

static int
s_env_build (s_env_t *env, const char *const *extra, uint64_t serial, const sb_box_t *box,
             char *err, size_t errlen)
{
    memset (env, 0, sizeof *env);
    //  Defaults that keep common tools sane when the server has none.
    static const struct { const char *name, *fallback; } allow [] = {
        { "PATH", SB_SPAWN_DEFAULT_PATH },
        { "HOME", NULL },
        { "LANG", "C.UTF-8" },
        { "TERM", "dumb" },
    };
    for (size_t i = 0; i < sizeof allow / sizeof allow [0]; i++) {
        const char *v = getenv (allow [i].name);
        if (!v)
            v = allow [i].fallback;
        if (v && s_env_set (env, allow [i].name, strlen (allow [i].name), v) != 0)
            goto fail;
    }
    for (size_t i = 0; extra && extra [i]; i++) {
        const char *eq = strchr (extra [i], '=');
        size_t nlen = eq ? (size_t) (eq - extra [i]) : strlen (extra [i]);
        if (!s_env_name_ok (extra [i], nlen)) {
            s_env_clear (env);
            return sb_fail (err, errlen, "invalid environment extra: %.64s", extra [i]);
        }
        if (strncmp (extra [i], SB_SPAWN_TOKEN_VAR, nlen) == 0
            && nlen == strlen (SB_SPAWN_TOKEN_VAR))
            continue;                   //  the mark is ours to set
        const char *v = eq ? eq + 1 : getenv (extra [i]);
        if (v && s_env_set (env, extra [i], nlen, v) != 0) {
            s_env_clear (env);
            return sb_fail (err, errlen, "too many environment extras, or a value too long");
        }
    }
    //  A command the box hands to another user gets that user's home.
    char home [PATH_MAX];
    if (sb_box_home (box, home, sizeof home) && s_env_set (env, "HOME", 4, home) != 0)
        goto fail;
    char token [64];
    snprintf (token, sizeof token, "%d.%" PRIu64, (int) getpid (), serial);
    if (s_env_set (env, SB_SPAWN_TOKEN_VAR, strlen (SB_SPAWN_TOKEN_VAR), token) != 0)
        goto fail;
    for (size_t i = 0; i < env->count; i++)
        env->envp [i] = env->strings [i];
    env->envp [env->count] = NULL;
    return 0;
fail:
    s_env_clear (env);
    return sb_fail (err, errlen, "out of memory building the environment");
}

//  Look a program up in the child's PATH, not the server's.
static int
s_find_program (const char *name, const char *path, char *out, size_t outlen)
{
    if (strchr (name, '/')) {
        if (strlen (name) >= outlen || access (name, X_OK) != 0)
            return -1;
        strcpy (out, name);
        return 0;
    }
    const char *p = path ? path : SB_SPAWN_DEFAULT_PATH;
    while (*p) {
        const char *end = strchrnul (p, ':');
        size_t dl = (size_t) (end - p);
        if (dl > 0 && dl + 1 + strlen (name) < outlen) {
            memcpy (out, p, dl);
            out [dl] = '/';
            strcpy (out + dl + 1, name);
            if (access (out, X_OK) == 0)
                return 0;
        }
        p = *end ? end + 1 : end;
    }
    return -1;
}


//  ---------------------------------------------------------------------
//  Output capture: the first cap_head bytes, and a ring of the last
//  cap_tail bytes (common/ring.h).

typedef struct {
    char *head;
    size_t head_cap, head_len;
    sb_ring_t tail;
    uint64_t total;
} s_capture_t;

static void
s_capture_add (s_capture_t *cap, const char *data, size_t n)
{
    cap->total += n;
    size_t h = cap->head_cap - cap->head_len;
    if (h > n)
        h = n;
    memcpy (cap->head + cap->head_len, data, h);
    cap->head_len += h;
    sb_ring_add (&cap->tail, data + h, n - h);
}

//  Length of s without a UTF-8 sequence cut at its end.
static size_t
s_utf8_trim_end (const char *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = (unsigned char) s [n - back];
        if ((c & 0xC0) == 0x80)
            continue;                   //  continuation: keep looking for the lead
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

static int
s_capture_finish (s_capture_t *cap, sb_spawn_result_t *res)
{
    bool truncated = cap->total > cap->head_cap + cap->tail.cap;
    char marker [200] = "";
    size_t head_len = cap->head_len, skip = 0;
    if (truncated) {
        //  Cut on character boundaries so the marker sits between whole text.
        head_len = s_utf8_trim_end (cap->head, cap->head_len);
        skip = sb_ring_utf8_skip (&cap->tail);
        snprintf (marker, sizeof marker,
                  "\n\n[... output truncated: %" PRIu64 " bytes in total; "
                  "the first %zu and the last %zu bytes are shown ...]\n\n",
                  cap->total, head_len, cap->tail.len - skip);
    }
    size_t ml = strlen (marker);
    size_t len = head_len + ml + cap->tail.len - skip;
    char *out = malloc (len + 1);
    if (!out)
        return -1;
    memcpy (out, cap->head, head_len);
    memcpy (out + head_len, marker, ml);
    sb_ring_copy (&cap->tail, skip, out + head_len + ml, cap->tail.len - skip);
    out [len] = 0;
    res->output = out;
    res->output_len = len;
    res->truncated = truncated;
    res->total_bytes = cap->total;
    return 0;
}


//  ---------------------------------------------------------------------
//  Running a command.

static bool
s_readable (int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll (&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

//  Reads what the pipe holds now. Returns false at EOF or error.
static bool
s_drain (int fd, s_capture_t *cap, const sb_spawn_opts_t *opts)
{
    char buf [16384];
    //  Bounded per call so a flood cannot starve the cancel check.
    for (int i = 0; i < 64; i++) {
        ssize_t r = read (fd, buf, sizeof buf);
        if (r > 0) {
            s_capture_add (cap, buf, (size_t) r);
            if (opts->on_output)
                opts->on_output (buf, (size_t) r, opts->output_arg);
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        return r < 0 && errno == EAGAIN;
    }
    return true;
}

//  Whether the child has exited, without reaping it: the zombie keeps its
//  pid, and so its process group id, from being reused while we kill.
static bool
s_child_exited (pid_t child)
{
    siginfo_t si = { 0 };
    return waitid (P_PID, (id_t) child, &si, WEXITED | WNOHANG | WNOWAIT) == 0
        && si.si_pid == child;
}

static int
s_pipe_above_stdio (int fds [2])
{
    if (pipe2 (fds, O_CLOEXEC) != 0)
        return -1;
    //  If the server runs with 0-2 closed the pipe could land there, and
    //  the dup2 file actions would then clobber it.
    for (int i = 0; i < 2; i++)
        if (fds [i] < 3) {
            int nfd = fcntl (fds [i], F_DUPFD_CLOEXEC, 3);
            if (nfd < 0) {
                close (fds [0]);
                close (fds [1]);
                return -1;
            }
            close (fds [i]);
            fds [i] = nfd;
        }
    return 0;
}

//  The argv to start: the command itself, or the command in its box.
static const char **
s_build_argv (const sb_spawn_opts_t *opts, const char *prog, const sb_box_t *box,
              char *err, size_t errlen)
{
    sb_box_t plain = { .kind = SB_BOX_NONE };
    return sb_box_argv (box ? box : &plain, prog, opts->argv, err, errlen);
}

//  One spawn, from its options to its result: what each step below
//  fills in and the next one uses, and what s_release frees.
typedef struct {
    const sb_spawn_opts_t *opts;
    sb_spawn_result_t *res;
    char *err;
    size_t errlen;
    sb_box_t box;
    size_t cap_head, cap_tail;
    uint64_t serial;
    s_env_t env;
    char prog [PATH_MAX];       //  the program found; argv points into it
    const char **argv;
    s_capture_t cap;
    int fds [2];
    int filter_fd;              //  the box's system call filter, for bwrap's descriptor 3; or -1
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_init, attr_init;
    pid_t child;
    int pidfd;
    sb_spawn_active_t node;
    sb_spawn_cgroup_t cg;       //  cg.dirfd -1: no cgroup, the tree rules apply
    int64_t start;
    bool pipe_open, exited;
} s_spawn_t;

/*  The box a spawn runs in: opts->sandbox when named, else the server's
    (sb_spawn_sandbox_init). Never falls back to no sandbox: a user who
    asked for one must not get an unsandboxed command because a package
    is missing.                                                          */
static int
s_box_of (const sb_spawn_opts_t *opts, bool long_lived, sb_box_t *box, char *err, size_t errlen)
{
    int kind;
    if (sb_box_parse (opts->sandbox, &kind) != 0)
        return sb_fail (err, errlen, "unknown sandbox \"%.32s\" (known: auto, bwrap, landlock, none)",
                       opts->sandbox);
    *box = (sb_box_t) {
        .kind = kind < 0 ? sb_spawn_sandbox_kind () : (sb_box_kind_t) kind,
        .bwrap_path = opts->bwrap_path ? opts->bwrap_path : sb_spawn_sandbox_bwrap (),
        .cwd = opts->cwd, .writable = opts->writable, .network = opts->network,
        .long_lived = long_lived,
    };
    if (box->kind == SB_BOX_BWRAP && access (box->bwrap_path, X_OK) != 0)
        return sb_fail (err, errlen, "sandbox \"bwrap\" requested but %s is not available (%s); "
                       "install bubblewrap. The command was not run.", box->bwrap_path, strerror (errno));
    return 0;
}

//  The options: caps, timeout and sandbox.
static int
s_check_opts (s_spawn_t *sp)
{
    const sb_spawn_opts_t *opts = sp->opts;
    if (opts->timeout_ms < 0)
        return sb_fail (sp->err, sp->errlen, "invalid timeout");
    sp->cap_head = opts->cap_head ? opts->cap_head : SB_SPAWN_CAP_HEAD_DEFAULT;
    sp->cap_tail = opts->cap_tail ? opts->cap_tail : SB_SPAWN_CAP_TAIL_DEFAULT;
    if (sp->cap_head > SB_SPAWN_MAX_CAP || sp->cap_tail > SB_SPAWN_MAX_CAP)
        return sb_fail (sp->err, sp->errlen, "output cap too large");
    return s_box_of (opts, false, &sp->box, sp->err, sp->errlen);
}

//  Everything the child is started with: environment, program, argv,
//  capture buffers, the output pipe, file actions and attributes.
static int
s_prepare (s_spawn_t *sp)
{
    const sb_spawn_opts_t *opts = sp->opts;
    sp->serial = sb_spawn_tree_next_serial ();
    if (s_env_build (&sp->env, opts->env_extra, sp->serial, &sp->box, sp->err, sp->errlen) != 0)
        return -1;
    if (s_find_program (opts->argv [0], s_env_get (&sp->env, "PATH"), sp->prog, sizeof sp->prog) != 0)
        return sb_fail (sp->err, sp->errlen, "%.128s: command not found", opts->argv [0]);
    sp->argv = s_build_argv (opts, sp->prog, &sp->box, sp->err, sp->errlen);
    if (!sp->argv)
        return -1;
    sp->cap = (s_capture_t) { .head_cap = sp->cap_head };
    sp->cap.head = malloc (sp->cap_head);
    if (!sp->cap.head || sb_ring_init (&sp->cap.tail, sp->cap_tail) != 0)
        return sb_fail (sp->err, sp->errlen, "out of memory");
    if (s_pipe_above_stdio (sp->fds) != 0)
        return sb_fail (sp->err, sp->errlen, "cannot create a pipe: %s", strerror (errno));
    fcntl (sp->fds [0], F_SETFL, O_NONBLOCK);

    //  adddup2 clears close-on-exec on the copies; closefrom(3) then drops
    //  every descriptor the server holds, including both pipe ends.
    posix_spawn_file_actions_init (&sp->fa);
    sp->fa_init = true;
    posix_spawnattr_init (&sp->attr);
    sp->attr_init = true;
    sigset_t none, all;
    sigemptyset (&none);
    sigfillset (&all);
    sigdelset (&all, SIGKILL);
    sigdelset (&all, SIGSTOP);
    if (sb_box_wants_filter (&sp->box) && (sp->filter_fd = sb_box_filter_fd ()) < 0)
        return sb_fail (sp->err, sp->errlen, "cannot prepare the sandbox's filter: %s", strerror (errno));
    if (posix_spawn_file_actions_adddup2 (&sp->fa, sp->fds [1], 1)
        || posix_spawn_file_actions_adddup2 (&sp->fa, sp->fds [1], 2)
        || posix_spawn_file_actions_addopen (&sp->fa, 0, "/dev/null", O_RDONLY, 0)
        || (sp->filter_fd >= 0 && posix_spawn_file_actions_adddup2 (&sp->fa, sp->filter_fd, 3))
        || posix_spawn_file_actions_addclosefrom_np (&sp->fa, sp->filter_fd >= 0 ? 4 : 3)
        || posix_spawn_file_actions_addchdir_np (&sp->fa, opts->cwd)
        || posix_spawnattr_setflags (&sp->attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK
                                                | POSIX_SPAWN_SETSIGDEF)
        || posix_spawnattr_setpgroup (&sp->attr, 0)
        || posix_spawnattr_setsigmask (&sp->attr, &none)
        || posix_spawnattr_setsigdefault (&sp->attr, &all))
        return sb_fail (sp->err, sp->errlen, "cannot prepare the spawn");
    sb_spawn_cgroup_new (&sp->cg, sp->serial);      //  else the tree rules
    return 0;
}

//  What starting a child needs, and what it gives back.
typedef struct {
    sb_spawn_exec_t x;
    posix_spawn_file_actions_t *fa;
    posix_spawnattr_t *attr;
    sb_spawn_cgroup_t *cg;
    const sb_box_t *box;
    pid_t child;
    int pidfd;
    int e;                      //  0, or an errno
    char box_err [256];         //  why the Landlock box could not be entered
} s_launch_t;

//  Starts the child in its cgroup, or with posix_spawn where there is
//  none (or clone3 into a cgroup is refused here: then the tree rules,
//  for this spawn and every later one).
static void
s_launch_here (s_launch_t *l)
{
    int e = -1;
    if (l->cg->dirfd >= 0) {
        l->child = sb_spawn_cgroup_start (l->cg, &l->x, &l->pidfd, &e);
        if (l->child > 0)
            e = 0;
        else
        if (e == ENOSYS || e == EPERM || e == EINVAL || e == EBUSY || e == EOPNOTSUPP) {
            sb_spawn_cgroup_disable ();
            sb_spawn_cgroup_destroy (l->cg);
            e = -1;
        }
    }
    if (e == -1)
        e = posix_spawn (&l->child, l->x.prog, l->fa, l->attr, l->x.argv, l->x.envp);
    l->e = e;
}

//  A thread that enters the Landlock box and starts the child in it; the
//  box cannot be left, so the thread ends with the start.
static void *
s_launch_boxed (void *arg)
{
    s_launch_t *l = arg;
    if (sb_box_landlock_apply (l->box, l->box_err, sizeof l->box_err) != 0)
        l->e = EPERM;
    else
        s_launch_here (l);
    return NULL;
}

//  Starts the child, and registers it under the registry lock: no sweep
//  may see it as an unowned zombie and reap it before it is registered.
static int
s_launch (s_launch_t *l, sb_spawn_active_t *node, uint64_t serial)
{
    l->child = -1;
    l->e = -1;
    sb_spawn_tree_lock ();
    if (l->box->kind == SB_BOX_LANDLOCK) {
        pthread_t t;
        if ((l->e = pthread_create (&t, NULL, s_launch_boxed, l)) == 0)
            pthread_join (t, NULL);
    }
    else
        s_launch_here (l);
    if (l->e == 0) {
        node->pid = l->child;
        node->serial = serial;
        node->start = sb_spawn_tree_start_of (l->child);
        sb_spawn_tree_add (node);
    }
    sb_spawn_tree_unlock ();
    if (l->e != 0)
        l->child = -1;
    else
    if (l->pidfd < 0)
        l->pidfd = (int) syscall (SYS_pidfd_open, l->child, 0);
    return l->e == 0 ? 0 : -1;
}

static int
s_start (s_spawn_t *sp)
{
    sp->start = s_now_ms ();
    s_launch_t l = {
        .x = { .prog = sp->argv [0], .argv = (char *const *) sp->argv, .envp = sp->env.envp,
               .cwd = sp->opts->cwd, .out_fd = sp->fds [1], .fd3 = sp->filter_fd },
        .fa = &sp->fa, .attr = &sp->attr, .cg = &sp->cg, .box = &sp->box, .pidfd = -1,
    };
    int rc = s_launch (&l, &sp->node, sp->serial);
    close (sp->fds [1]);
    sp->fds [1] = -1;
    sp->child = l.child;
    sp->pidfd = l.pidfd;
    if (rc != 0)
        return sb_fail (sp->err, sp->errlen, "cannot start %.128s in %.256s: %s", sp->argv [0],
                       sp->opts->cwd, l.box_err [0] ? l.box_err : strerror (l.e));
    return 0;
}

//  Captures output until the child exits, the timeout passes or a cancel
//  arrives.
static void
s_wait (s_spawn_t *sp)
{
    const sb_spawn_opts_t *opts = sp->opts;
    int64_t deadline = sp->start + (opts->timeout_ms ? opts->timeout_ms
                                                     : SB_SPAWN_TIMEOUT_MS_DEFAULT);
    sp->pipe_open = true;
    while (!sp->exited) {
        struct pollfd pfd [3];
        int np = 0, ipipe = -1, ipid = -1, icancel = -1;
        if (sp->pipe_open) {
            ipipe = np;
            pfd [np++] = (struct pollfd) { .fd = sp->fds [0], .events = POLLIN };
        }
        if (sp->pidfd >= 0) {
            ipid = np;
            pfd [np++] = (struct pollfd) { .fd = sp->pidfd, .events = POLLIN };
        }
        if (opts->cancel_fd > 0) {
            icancel = np;
            pfd [np++] = (struct pollfd) { .fd = opts->cancel_fd, .events = POLLIN };
        }
        int64_t wait = deadline - s_now_ms ();
        if (wait <= 0) {
            sp->res->timed_out = true;
            break;
        }
        //  Without a pidfd (kernels before 5.3) the exit is polled for.
        if (sp->pidfd < 0 && wait > 10)
            wait = 10;
        int pr = poll (pfd, (nfds_t) np, (int) (wait > INT_MAX ? INT_MAX : wait));
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0) {
            if (sp->pidfd < 0 && s_child_exited (sp->child))
                sp->exited = true;
            continue;
        }
        if (icancel >= 0 && pfd [icancel].revents) {
            sp->res->cancelled = true;
            break;
        }
        if (ipipe >= 0 && pfd [ipipe].revents)
            sp->pipe_open = s_drain (sp->fds [0], &sp->cap, opts);
        if ((ipid >= 0 && pfd [ipid].revents) || (sp->pidfd < 0 && s_child_exited (sp->child)))
            sp->exited = true;
    }
    if (sp->exited && sp->pipe_open)
        sp->pipe_open = s_drain (sp->fds [0], &sp->cap, opts);
}

//  Kills what the command left, reaps the child (its exit status goes to
//  the result) and everything killed, and reads the end of the output.
static void
s_clean_up (s_spawn_t *sp)
{
    sb_spawn_result_t *res = sp->res;
    pid_t child = sp->child;
    //  The child is alive or a zombie, never reaped yet, so its pid is
    //  still its group's id: the group kill cannot hit a stranger. A live
    //  child goes first, or it could keep forking while we scan. After a
    //  normal exit the scan goes first, so that it counts what was left
    //  running before the group kill turns it into zombies. A cgroup is
    //  frozen before it is listed, so nothing goes first there, and the
    //  model is told about everything the kill ended.
    bool in_cgroup = sp->cg.dirfd >= 0;
    if (!sp->exited && !in_cgroup)
        kill (-child, SIGKILL);
    sb_spawn_pidset_t killed = { 0 };
    size_t alive = sp->cg.dirfd >= 0
                 ? sb_spawn_cgroup_kill (&sp->cg, child, &killed, res->killed, sizeof res->killed)
                 : sb_spawn_tree_kill (child, sp->serial, &killed, res->killed, sizeof res->killed);
    kill (-child, SIGKILL);
    if (sp->exited)
        res->leftovers_killed = alive;

    int status = 0;
    pid_t w;
    while ((w = waitpid (child, &status, 0)) < 0 && errno == EINTR)
        ;
    sb_spawn_tree_remove (&sp->node);
    if (w == child && WIFEXITED (status))
        res->exit_code = WEXITSTATUS (status);
    else
    if (w == child && WIFSIGNALED (status))
        res->term_signal = WTERMSIG (status);
    sb_spawn_tree_reap (&killed);
    //  What exited before the listing, under a parent that has exited or
    //  that the kill ended, is a zombie of ours now (the listed ones are
    //  reaped, so their children have been handed over).
    if (in_cgroup)
        sb_spawn_reap_orphans ();
    free (killed.pids);

    //  Every writer is dead now; what is left in the pipe is the end of the
    //  output. Bounded, in case something unattributed still holds it.
    int64_t drain_deadline = s_now_ms () + SB_SPAWN_DRAIN_MS;
    while (sp->pipe_open && !res->cancelled) {
        int64_t wait = drain_deadline - s_now_ms ();
        if (wait <= 0)
            break;
        struct pollfd p = { .fd = sp->fds [0], .events = POLLIN };
        if (poll (&p, 1, (int) wait) > 0)
            sp->pipe_open = s_drain (sp->fds [0], &sp->cap, sp->opts);
    }
    res->duration_ms = s_now_ms () - sp->start;
}

static void
s_release (s_spawn_t *sp)
{
    sb_spawn_cgroup_destroy (&sp->cg);
    if (sp->pidfd >= 0)
        close (sp->pidfd);
    if (sp->fds [0] >= 0)
        close (sp->fds [0]);
    if (sp->fds [1] >= 0)
        close (sp->fds [1]);
    if (sp->filter_fd >= 0)
        close (sp->filter_fd);
    if (sp->fa_init)
        posix_spawn_file_actions_destroy (&sp->fa);
    if (sp->attr_init)
        posix_spawnattr_destroy (&sp->attr);
    free (sp->argv);
    free (sp->cap.head);
    sb_ring_free (&sp->cap.tail);
    s_env_clear (&sp->env);
}

int
sb_spawn_run (const sb_spawn_opts_t *opts, sb_spawn_result_t *res, char *err, size_t errlen)
{
    if (!opts || !res || !opts->argv || !opts->argv [0] || !opts->cwd)
        return sb_fail (err, errlen, "internal error: missing spawn options");
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    s_spawn_t sp = {
        .opts = opts, .res = res, .err = err, .errlen = errlen,
        .fds = { -1, -1 }, .filter_fd = -1, .child = -1, .pidfd = -1, .cg = { .dirfd = -1 },
    };
    if (s_check_opts (&sp) != 0)
        return -1;
    //  A cancel that arrived before we started: start nothing.
    if (opts->cancel_fd > 0 && s_readable (opts->cancel_fd)) {
        res->cancelled = true;
        res->output = strdup ("");
        return res->output ? 0 : sb_fail (err, errlen, "out of memory");
    }
    int rc = -1;
    if (s_prepare (&sp) == 0 && s_start (&sp) == 0) {
        s_wait (&sp);
        s_clean_up (&sp);
        rc = s_capture_finish (&sp.cap, res) == 0 ? 0 : sb_fail (err, errlen, "out of memory");
    }
    s_release (&sp);
    if (rc != 0)
        sb_spawn_result_clear (res);
    return rc;
}


//  ---------------------------------------------------------------------
//  A long-lived process: the same start, three pipes, no timeout.

struct sb_spawn_proc {
    pid_t child;
    int pidfd;
    int in_fd, out_fd, err_fd;  //  our ends
    uint64_t serial;
    sb_spawn_active_t node;
    sb_spawn_cgroup_t cg;
    bool exited;
};

int sb_spawn_proc_stdin (const sb_spawn_proc_t *p) { return p->in_fd; }
int sb_spawn_proc_stdout (const sb_spawn_proc_t *p) { return p->out_fd; }
int sb_spawn_proc_stderr (const sb_spawn_proc_t *p) { return p->err_fd; }
int sb_spawn_proc_pid (const sb_spawn_proc_t *p) { return (int) p->child; }
int sb_spawn_proc_pidfd (const sb_spawn_proc_t *p) { return p->pidfd; }

bool
sb_spawn_proc_exited (sb_spawn_proc_t *p)
{
    if (!p->exited && s_child_exited (p->child))
        p->exited = true;
    return p->exited;
}

static void
s_close_pair (int fds [2])
{
    for (int i = 0; i < 2; i++)
        if (fds [i] >= 0)
            close (fds [i]);
}

sb_spawn_proc_t *
sb_spawn_proc_start (const sb_spawn_opts_t *opts, char *err, size_t errlen)
{
    if (!opts || !opts->argv || !opts->argv [0] || !opts->cwd) {
        sb_fail (err, errlen, "internal error: missing spawn options");
        return NULL;
    }
    sb_spawn_proc_t *p = calloc (1, sizeof *p);
    if (!p) {
        sb_fail (err, errlen, "out of memory");
        return NULL;
    }
    p->child = -1;
    p->pidfd = p->in_fd = p->out_fd = p->err_fd = -1;
    p->cg.dirfd = -1;
    int in [2] = { -1, -1 }, out [2] = { -1, -1 }, er [2] = { -1, -1 };
    s_env_t env = { 0 };
    char prog [PATH_MAX];
    const char **argv = NULL;
    sb_box_t box;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_init = false, attr_init = false;
    p->serial = sb_spawn_tree_next_serial ();
    if (s_box_of (opts, true, &box, err, errlen) != 0)
        goto fail;
    if (s_env_build (&env, opts->env_extra, p->serial, &box, err, errlen) != 0)
        goto fail;
    if (s_find_program (opts->argv [0], s_env_get (&env, "PATH"), prog, sizeof prog) != 0) {
        sb_fail (err, errlen, "%.128s: command not found", opts->argv [0]);
        goto fail;
    }
    argv = s_build_argv (opts, prog, &box, err, errlen);
    if (!argv)
        goto fail;
    if (s_pipe_above_stdio (in) || s_pipe_above_stdio (out) || s_pipe_above_stdio (er)) {
        sb_fail (err, errlen, "cannot create a pipe: %s", strerror (errno));
        goto fail;
    }
    fcntl (in [1], F_SETFL, O_NONBLOCK);
    fcntl (out [0], F_SETFL, O_NONBLOCK);
    fcntl (er [0], F_SETFL, O_NONBLOCK);
    posix_spawn_file_actions_init (&fa);
    fa_init = true;
    posix_spawnattr_init (&attr);
    attr_init = true;
    sigset_t none, all;
    sigemptyset (&none);
    sigfillset (&all);
    sigdelset (&all, SIGKILL);
    sigdelset (&all, SIGSTOP);
    if (posix_spawn_file_actions_adddup2 (&fa, in [0], 0)
        || posix_spawn_file_actions_adddup2 (&fa, out [1], 1)
        || posix_spawn_file_actions_adddup2 (&fa, er [1], 2)
        || posix_spawn_file_actions_addclosefrom_np (&fa, 3)
        || posix_spawn_file_actions_addchdir_np (&fa, opts->cwd)
        || posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK
                                            | POSIX_SPAWN_SETSIGDEF)
        || posix_spawnattr_setpgroup (&attr, 0)
        || posix_spawnattr_setsigmask (&attr, &none)
        || posix_spawnattr_setsigdefault (&attr, &all)) {
        sb_fail (err, errlen, "cannot prepare the spawn");
        goto fail;
    }
    sb_spawn_cgroup_new (&p->cg, p->serial);
    s_launch_t l = {
        .x = { .prog = argv [0], .argv = (char *const *) argv, .envp = env.envp,
               .cwd = opts->cwd, .out_fd = out [1], .in_fd = in [0], .err_fd = er [1] },
        .fa = &fa, .attr = &attr, .cg = &p->cg, .box = &box, .pidfd = -1,
    };
    if (s_launch (&l, &p->node, p->serial) != 0) {
        sb_fail (err, errlen, "cannot start %.128s in %.256s: %s", argv [0], opts->cwd,
                l.box_err [0] ? l.box_err : strerror (l.e));
        goto fail;
    }
    p->child = l.child;
    p->pidfd = l.pidfd;
    close (in [0]);
    close (out [1]);
    close (er [1]);
    p->in_fd = in [1];
    p->out_fd = out [0];
    p->err_fd = er [0];
    posix_spawn_file_actions_destroy (&fa);
    posix_spawnattr_destroy (&attr);
    free (argv);
    s_env_clear (&env);
    return p;
fail:
    s_close_pair (in);
    s_close_pair (out);
    s_close_pair (er);
    if (fa_init)
        posix_spawn_file_actions_destroy (&fa);
    if (attr_init)
        posix_spawnattr_destroy (&attr);
    free (argv);
    s_env_clear (&env);
    sb_spawn_cgroup_destroy (&p->cg);
    free (p);
    return NULL;
}

void
sb_spawn_proc_close_stdin (sb_spawn_proc_t *p)
{
    if (p && p->in_fd >= 0) {
        close (p->in_fd);
        p->in_fd = -1;
    }
}

int
sb_spawn_proc_stop (sb_spawn_proc_t **proc_p, int grace_ms)
{
    sb_spawn_proc_t *p = proc_p ? *proc_p : NULL;
    if (!p)
        return -1;
    *proc_p = NULL;
    //  A server that reads EOF on stdin ends by itself (the MCP way to
    //  stop a stdio server); one that does not is killed.
    if (p->in_fd >= 0)
        close (p->in_fd);
    int64_t until = s_now_ms () + (grace_ms > 0 ? grace_ms : 0);
    while (!sb_spawn_proc_exited (p) && s_now_ms () < until) {
        struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };
        if (p->pidfd >= 0)
            poll (&pf, 1, (int) (until - s_now_ms () > 0 ? until - s_now_ms () : 0));
        else
            usleep (5000);
    }
    bool in_cgroup = p->cg.dirfd >= 0;
    if (!p->exited && !in_cgroup)
        kill (-p->child, SIGKILL);
    sb_spawn_pidset_t killed = { 0 };
    char desc [SB_SPAWN_KILLED_DESC] = "";
    if (in_cgroup)
        sb_spawn_cgroup_kill (&p->cg, p->child, &killed, desc, sizeof desc);
    else
        sb_spawn_tree_kill (p->child, p->serial, &killed, desc, sizeof desc);
    kill (-p->child, SIGKILL);
    kill (p->child, SIGKILL);
    int status = 0, code = -1;
    pid_t w;
    while ((w = waitpid (p->child, &status, 0)) < 0 && errno == EINTR)
        ;
    if (w == p->child)
        code = WIFEXITED (status) ? WEXITSTATUS (status) : WIFSIGNALED (status) ? -WTERMSIG (status) : -1;
    sb_spawn_tree_remove (&p->node);
    sb_spawn_tree_reap (&killed);
    if (in_cgroup)
        sb_spawn_reap_orphans ();
    free (killed.pids);
    sb_spawn_cgroup_destroy (&p->cg);
    if (p->pidfd >= 0)
        close (p->pidfd);
    if (p->out_fd >= 0)
        close (p->out_fd);
    if (p->err_fd >= 0)
        close (p->err_fd);
    free (p);
    return code;
}

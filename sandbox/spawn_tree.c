/*  sandbox/spawn_tree.c — the process tree of a spawn: find, kill and
    reap what it left behind, by the rules at the top of
    sandbox/spawn.c, and the registry of running spawns those rules
    read.
*/
#include "sandbox/spawn_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SB_SPAWN_KILL_ROUNDS    100
#define SB_SPAWN_SETTLE_MS      1000
#define SB_SPAWN_REAP_MS        3000
#define SB_SPAWN_DESC_CMD       80      //  bytes of a command line in a description

//  The registry of running spawns.

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static sb_spawn_active_t *s_active_list;
static uint64_t s_serial;

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
sb_spawn_tree_next_serial (void)
{
    pthread_mutex_lock (&s_lock);
    uint64_t serial = ++s_serial;
    pthread_mutex_unlock (&s_lock);
    return serial;
}

void
sb_spawn_tree_lock (void)
{
    pthread_mutex_lock (&s_lock);
}

void
sb_spawn_tree_unlock (void)
{
    pthread_mutex_unlock (&s_lock);
}

void
sb_spawn_tree_add (sb_spawn_active_t *node)
{
    node->next = s_active_list;
    s_active_list = node;
}

void
sb_spawn_tree_remove (sb_spawn_active_t *node)
{
    pthread_mutex_lock (&s_lock);
    for (sb_spawn_active_t **pp = &s_active_list; *pp; pp = &(*pp)->next)
        if (*pp == node) {
            *pp = node->next;
            break;
        }
    pthread_mutex_unlock (&s_lock);
}

//  ---------------------------------------------------------------------
//  Scanning /proc.

typedef struct {
    pid_t pid, ppid, pgid;
    char state;
    uint64_t start;             //  clock ticks since boot
} s_proc_t;

static int
s_proc_cmp (const void *a, const void *b)
{
    pid_t x = ((const s_proc_t *) a)->pid, y = ((const s_proc_t *) b)->pid;
    return (x > y) - (x < y);
}

//  Every process in /proc, sorted by pid. Returns the count, -1 on error;
//  the caller frees *procs.
static ssize_t
s_proc_scan (s_proc_t **procs)
{
    *procs = NULL;
    DIR *dir = opendir ("/proc");
    if (!dir)
        return -1;
    size_t n = 0, cap = 0;
    s_proc_t *v = NULL;
    struct dirent *de;
    while ((de = readdir (dir))) {
        if (de->d_name [0] < '1' || de->d_name [0] > '9')
            continue;
        char path [64], buf [512];
        snprintf (path, sizeof path, "/proc/%s/stat", de->d_name);
        int fd = open (path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;                   //  gone since readdir
        ssize_t r = read (fd, buf, sizeof buf - 1);
        close (fd);
        if (r <= 0)
            continue;
        buf [r] = 0;
        //  "pid (comm) S ppid ...": comm may hold spaces and parentheses.
        char *rp = strrchr (buf, ')');
        int ppid, pgid;
        char state;
        unsigned long long start;
        if (!rp || sscanf (rp + 1, " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                                   "%*d %*d %*d %*d %llu", &state, &ppid, &pgid, &start) != 4)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            if (ncap > SB_SPAWN_MAX_PROCS)
                break;
            s_proc_t *nv = realloc (v, ncap * sizeof *v);
            if (!nv)
                break;
            v = nv;
            cap = ncap;
        }
        v [n++] = (s_proc_t) { (pid_t) atoi (de->d_name), (pid_t) ppid, (pid_t) pgid, state,
                               (uint64_t) start };
    }
    closedir (dir);
    if (n)
        qsort (v, n, sizeof *v, s_proc_cmp);
    *procs = v;
    return (ssize_t) n;
}

static const s_proc_t *
s_proc_find (const s_proc_t *v, size_t n, pid_t pid)
{
    s_proc_t key = { .pid = pid };
    return bsearch (&key, v, n, sizeof *v, s_proc_cmp);
}

typedef enum { S_MARK_NONE, S_MARK_FOUND, S_MARK_UNKNOWN } s_mark_t;

//  What follows the command name in /proc/<pid>/stat (after its last
//  ')', which the name itself may contain), in buf; NULL if it is gone.
static const char *
s_proc_stat_tail (pid_t pid, char *buf, size_t size)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t r = read (fd, buf, size - 1);
    close (fd);
    if (r <= 0)
        return NULL;
    buf [r] = 0;
    return strrchr (buf, ')');
}

//  A process's state letter from /proc/<pid>/stat, or 0 if it is gone.
static char
s_proc_state (pid_t pid)
{
    char buf [512];
    const char *rp = s_proc_stat_tail (pid, buf, sizeof buf);
    return rp && rp [1] == ' ' ? rp [2] : 0;
}

uint64_t
sb_spawn_tree_start_of (pid_t pid)
{
    char buf [512];
    const char *rp = s_proc_stat_tail (pid, buf, sizeof buf);
    unsigned long long start;
    if (!rp || sscanf (rp + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                               "%*d %*d %*d %*d %llu", &start) != 1)
        return 0;
    return (uint64_t) start;
}

void
sb_spawn_describe (pid_t pid, char *desc, size_t desclen)
{
    size_t used = strnlen (desc, desclen);
    if (desclen < 8 || used + 4 >= desclen)
        return;
    if (used > 0 && strcmp (desc + used - 3, "...") == 0)
        return;                         //  already full
    char path [64], cmd [SB_SPAWN_DESC_CMD + 1];
    snprintf (path, sizeof path, "/proc/%d/cmdline", (int) pid);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read (fd, cmd, sizeof cmd - 1) : -1;
    if (fd >= 0)
        close (fd);
    if (r <= 0) {
        //  No command line (a kernel thread, or exiting): the name will do.
        snprintf (path, sizeof path, "/proc/%d/comm", (int) pid);
        fd = open (path, O_RDONLY | O_CLOEXEC);
        r = fd >= 0 ? read (fd, cmd, sizeof cmd - 1) : -1;
        if (fd >= 0)
            close (fd);
        if (r > 0 && cmd [r - 1] == '\n')
            r--;
    }
    if (r <= 0)
        r = snprintf (cmd, sizeof cmd, "?");
    //  Arguments are NUL-separated; the model reads them space-separated,
    //  and nothing unprintable.
    while (r > 0 && cmd [r - 1] == 0)
        r--;
    for (ssize_t i = 0; i < r; i++)
        if ((unsigned char) cmd [i] < 0x20 || cmd [i] == 0x7f)
            cmd [i] = cmd [i] ? '?' : ' ';
    cmd [r] = 0;
    char item [SB_SPAWN_DESC_CMD + 64];
    int il = snprintf (item, sizeof item, "%s%s%s (pid %d)", used ? ", " : "", cmd,
                       r == SB_SPAWN_DESC_CMD ? "..." : "", (int) pid);
    if (il > 0 && used + (size_t) il + 4 < desclen)
        memcpy (desc + used, item, (size_t) il + 1);
    else
        snprintf (desc + used, desclen - used, "%s...", used ? ", " : "");
}

//  The serial in a process's SWITCHBOARD_TOOL_ID mark, if it carries one
//  made by this server process. UNKNOWN when the environment reads empty,
//  which is either a real empty environment (env -i) or a process caught
//  inside execve, whose new image has no environment yet.
static s_mark_t
s_proc_mark (pid_t pid, uint64_t *serial)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/environ", (int) pid);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return S_MARK_NONE;
    //  The mark is set last but environments are small; 64 KiB is plenty
    //  for any the spawn built, and a bigger one was not built by us.
    static const size_t cap = 64 * 1024;
    char *buf = malloc (cap + 1);
    if (!buf) {
        close (fd);
        return S_MARK_UNKNOWN;
    }
    size_t len = 0;
    ssize_t r;
    while (len < cap && (r = read (fd, buf + len, cap - len)) > 0)
        len += (size_t) r;
    close (fd);
    buf [len] = 0;
    if (len == 0) {
        free (buf);
        return S_MARK_UNKNOWN;
    }

    char prefix [64];
    int pl = snprintf (prefix, sizeof prefix, SB_SPAWN_TOKEN_VAR "=%d.", (int) getpid ());
    bool found = false;
    for (size_t i = 0; i < len; i += strlen (buf + i) + 1)
        if (strncmp (buf + i, prefix, (size_t) pl) == 0) {
            char *end;
            *serial = strtoull (buf + i + pl, &end, 10);
            found = *end == 0;
            break;
        }
    free (buf);
    return found ? S_MARK_FOUND : S_MARK_NONE;
}

//  The mark, settled: a process that reads UNKNOWN is stopped first. A
//  stop takes effect only on the way back to user space, so once it shows
//  as stopped any execve has finished and its environment is final. It is
//  continued afterwards; if it turns out to be ours it is killed anyway.
static s_mark_t
s_proc_mark_settled (pid_t pid, char state, uint64_t *serial)
{
    s_mark_t m = s_proc_mark (pid, serial);
    if (m != S_MARK_UNKNOWN || state == 'Z' || state == 'X')
        return m == S_MARK_UNKNOWN ? S_MARK_NONE : m;
    bool stopped_by_us = state != 'T' && state != 't';
    if (stopped_by_us && kill (pid, SIGSTOP) != 0)
        return S_MARK_NONE;             //  gone
    int64_t deadline = s_now_ms () + SB_SPAWN_SETTLE_MS;
    char st;
    while ((st = s_proc_state (pid)) && st != 'T' && st != 't' && st != 'Z' && st != 'X'
           && s_now_ms () < deadline) {
        struct timespec ts = { 0, 500000 };
        nanosleep (&ts, NULL);
    }
    m = s_proc_mark (pid, serial);
    if (stopped_by_us)
        kill (pid, SIGCONT);
    return m == S_MARK_UNKNOWN ? S_MARK_NONE : m;
}

static bool
s_pidset_has (const sb_spawn_pidset_t *set, pid_t pid)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->pids [i] == pid)
            return true;
    return false;
}

int
sb_spawn_pidset_add (sb_spawn_pidset_t *set, pid_t pid)
{
    if (set->n == set->cap) {
        size_t ncap = set->cap ? set->cap * 2 : 16;
        if (ncap > SB_SPAWN_MAX_PROCS)
            return -1;
        pid_t *np = realloc (set->pids, ncap * sizeof *np);
        if (!np)
            return -1;
        set->pids = np;
        set->cap = ncap;
    }
    set->pids [set->n++] = pid;
    return 0;
}

//  The spawns running once the scan is done: their children, serials and
//  start times, and the serial counter then. Taken after the scan, so that
//  every spawn that could have started a scanned process is in it (or has
//  ended); copied so the decisions run without the lock.
typedef struct {
    sb_spawn_pidset_t children;
    uint64_t *serials;
    uint64_t *starts;
    size_t nserials;
    uint64_t serial_now;
} s_snapshot_t;

static int
s_snapshot_take (s_snapshot_t *snap)
{
    memset (snap, 0, sizeof *snap);
    pthread_mutex_lock (&s_lock);
    size_t n = 0;
    for (sb_spawn_active_t *a = s_active_list; a; a = a->next)
        n++;
    snap->serials = n ? malloc (n * sizeof *snap->serials) : NULL;
    snap->starts = n ? malloc (n * sizeof *snap->starts) : NULL;
    int rc = (n && (!snap->serials || !snap->starts)) ? -1 : 0;
    for (sb_spawn_active_t *a = s_active_list; a && rc == 0; a = a->next) {
        snap->serials [snap->nserials] = a->serial;
        snap->starts [snap->nserials++] = a->start;
        if (sb_spawn_pidset_add (&snap->children, a->pid) != 0)
            rc = -1;
    }
    snap->serial_now = s_serial;
    pthread_mutex_unlock (&s_lock);
    return rc;
}

static void
s_snapshot_free (s_snapshot_t *snap)
{
    free (snap->children.pids);
    free (snap->serials);
    free (snap->starts);
    memset (snap, 0, sizeof *snap);
}

//  Whether process p belongs to the spawn (child, serial), per the rules
//  at the top of this file.
static bool
s_belongs (const s_proc_t *v, size_t n, const s_proc_t *p, pid_t self, pid_t child,
           uint64_t serial, const s_snapshot_t *snap)
{
    //  Still in the child's group: ours whatever its parentage. Nobody else
    //  can hold that group id while the child is unreaped.
    if (p->pgid == child)
        return true;
    const s_proc_t *cur = p;
    for (int depth = 0; cur && depth < 4096; depth++) {
        if (cur->pid == child)
            return true;
        if (s_pidset_has (&snap->children, cur->pid))
            return false;               //  another spawn's tree
        if (cur->ppid == self)
            break;                      //  an orphan we inherited, or its descendant
        if (cur->ppid <= 1)
            return false;               //  not a descendant of the server
        cur = s_proc_find (v, n, cur->ppid);
    }
    if (!cur || cur->ppid != self)
        return false;
    //  An orphan we inherited. Its mark says whose it is, but a process may
    //  clear or forge its environment, so a mark is believed only where
    //  the start times agree, and anything else is ours unless another
    //  running spawn had started when it was born (that one will kill it).
    uint64_t mark;
    s_mark_t m = s_proc_mark_settled (p->pid, p->state, &mark);
    if (m == S_MARK_FOUND && mark == serial)
        return true;
    if (m == S_MARK_FOUND && mark <= snap->serial_now) {
        bool running = false;
        for (size_t i = 0; i < snap->nserials; i++)
            if (snap->serials [i] == mark) {
                running = true;
                if (snap->starts [i] <= cur->start)
                    return false;       //  a spawn still running
            }
        if (!running)
            return true;                //  a spawn that ended: a leak
    }
    for (size_t i = 0; i < snap->nserials; i++)
        if (snap->serials [i] != serial && snap->starts [i] <= cur->start)
            return false;               //  may be another running spawn's
    return true;
}

static bool
s_is_registered (pid_t pid)
{
    for (sb_spawn_active_t *a = s_active_list; a; a = a->next)
        if (a->pid == pid)
            return true;
    return false;
}

//  Reap a zombie child of ours unless a running spawn owns it. The check
//  and the wait happen under the lock, so a spawn that registered after
//  our scan is still safe.
static bool
s_reap_unowned_zombie (pid_t pid)
{
    bool reaped = false;
    pthread_mutex_lock (&s_lock);
    if (!s_is_registered (pid))
        reaped = waitpid (pid, NULL, WNOHANG) == pid;
    pthread_mutex_unlock (&s_lock);
    return reaped;
}

//  Kill every process the spawn left (not the child itself, which the
//  caller reaps) and collect them in `killed`. Returns how many were still
//  alive, i.e. had not already exited on their own.
size_t
sb_spawn_tree_kill (pid_t child, uint64_t serial, sb_spawn_pidset_t *killed,
                    char *desc, size_t desclen)
{
    pid_t self = getpid ();
    size_t alive = 0;
    for (int round = 0; round < SB_SPAWN_KILL_ROUNDS; round++) {
        s_snapshot_t snap;
        s_proc_t *v;
        ssize_t n = s_proc_scan (&v);
        if (s_snapshot_take (&snap) != 0) {
            s_snapshot_free (&snap);
            free (v);
            break;
        }
        bool fresh = false;
        for (ssize_t i = 0; i < n; i++) {
            const s_proc_t *p = &v [i];
            if (p->pid == self || p->pid == child)
                continue;
            if (!s_belongs (v, (size_t) n, p, self, child, serial, &snap)) {
                //  A zombie we inherited that nobody owns: reap it in passing.
                if (p->ppid == self && p->state == 'Z')
                    s_reap_unowned_zombie (p->pid);
                continue;
            }
            if (!s_pidset_has (killed, p->pid)) {
                if (sb_spawn_pidset_add (killed, p->pid) != 0)
                    continue;
                if (p->state != 'Z') {
                    alive++;
                    fresh = true;
                    if (desc)
                        sb_spawn_describe (p->pid, desc, desclen);
                }
            }
            if (p->state != 'Z')
                kill (p->pid, SIGKILL);
        }
        free (v);
        s_snapshot_free (&snap);
        if (!fresh)
            break;
    }
    return alive;
}

//  Wait until each killed pid is reaped by us or gone. A process whose
//  parent is still dying is not our child yet (ECHILD) until the kernel
//  re-parents it to us, the subreaper; that takes a moment, hence the poll.
void
sb_spawn_tree_reap (sb_spawn_pidset_t *killed)
{
    int64_t deadline = s_now_ms () + SB_SPAWN_REAP_MS;
    size_t left = killed->n;
    while (left > 0) {
        left = 0;
        for (size_t i = 0; i < killed->n; i++) {
            pid_t pid = killed->pids [i];
            if (pid == 0)
                continue;
            pid_t r = waitpid (pid, NULL, WNOHANG);
            if (r == pid || (r < 0 && errno == ECHILD && kill (pid, 0) != 0 && errno == ESRCH))
                killed->pids [i] = 0;
            else
                left++;
        }
        if (left == 0 || s_now_ms () >= deadline)
            break;
        struct timespec ts = { 0, 1000000 };
        nanosleep (&ts, NULL);
    }
}

int
sb_spawn_reap_orphans (void)
{
    //  The common case, without reading /proc: peek at our zombies one by
    //  one and reap each that no running spawn owns. Only a zombie that a
    //  spawn owns (its exit status is that spawn's) blocks the peek, and
    //  then the scan below finds the others.
    int reaped = 0;
    for (;;) {
        siginfo_t si;
        memset (&si, 0, sizeof si);
        pthread_mutex_lock (&s_lock);
        bool more = waitid (P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid > 0;
        bool owned = more && s_is_registered (si.si_pid);
        if (more && !owned && waitpid (si.si_pid, NULL, WNOHANG) == si.si_pid)
            reaped++;
        pthread_mutex_unlock (&s_lock);
        if (!more)
            return reaped;
        if (owned)
            break;
    }
    s_proc_t *v;
    ssize_t n = s_proc_scan (&v);
    pid_t self = getpid ();
    for (ssize_t i = 0; i < n; i++)
        if (v [i].ppid == self && v [i].state == 'Z' && s_reap_unowned_zombie (v [i].pid))
            reaped++;
    free (v);
    return reaped;
}

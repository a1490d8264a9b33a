/*  actors/exec/path.c — confine tool paths to a workspace.

    Why not realpath(3) and a prefix check? realpath fails on paths that
    do not exist yet (write_file creates them), and it says nothing about
    *where* a path went wrong. Walking the components ourselves lets us keep
    one invariant — the part resolved so far is always the workspace or
    beneath it — and name the offending `..` or symlink in the message the
    model reads.
*/
#include "actors/exec/path.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

//  Linux's own limit; the kernel gives up at the same depth.
#define SB_PATH_MAX_LINKS 40

//  Messages quote the model's path. It can be up to PATH_MAX bytes of
//  anything, so quote a bounded, printable prefix.
#define SB_PATH_QUOTE_MAX 200

static void
s_quote (const char *src, size_t len, char *dst, size_t dstlen)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < dstlen; i++) {
        if (i == SB_PATH_QUOTE_MAX) {
            memcpy (dst + o, "...", 3);
            o += 3;
            break;
        }
        unsigned char c = (unsigned char) src [i];
        dst [o++] = (c < 0x20 || c == 0x7f) ? '?' : (char) c;
    }
    if (dstlen)
        dst [o < dstlen ? o : dstlen - 1] = 0;
}

//  The next component of s from *pos: returns its length and start, or 0
//  at the end. Empty components (repeated slashes) are skipped.
static size_t
s_next (const char *s, size_t *pos, const char **comp)
{
    size_t i = *pos;
    while (s [i] == '/')
        i++;
    size_t start = i;
    while (s [i] && s [i] != '/')
        i++;
    *comp = s + start;
    *pos = i;
    return i - start;
}

static bool
s_is_dot (const char *c, size_t n)
{
    return n == 1 && c [0] == '.';
}

static bool
s_is_dotdot (const char *c, size_t n)
{
    return n == 2 && c [0] == '.' && c [1] == '.';
}

//  If the absolute path `abs` names the workspace or something below it,
//  lexically (only `.` and repeated slashes are collapsed), return what
//  follows the workspace part; else NULL. A `..` never matches a component
//  of a realpath, so `/ws/../etc` is outside here as it should be.
static const char *
s_below_workspace (const char *ws, const char *abs)
{
    size_t wpos = 0, apos = 0;
    while (true) {
        const char *wc, *ac;
        size_t wn = s_next (ws, &wpos, &wc);
        if (wn == 0)
            return abs + apos;
        size_t an;
        do
            an = s_next (abs, &apos, &ac);
        while (an && s_is_dot (ac, an));
        if (an != wn || memcmp (wc, ac, wn) != 0)
            return NULL;
    }
}

static bool
s_inside (const char *ws, size_t wl, const char *p)
{
    if (wl == 1)                    //  the workspace is "/"
        return p [0] == '/';
    return strncmp (p, ws, wl) == 0 && (p [wl] == 0 || p [wl] == '/');
}

const char *
sb_path_relative (const char *workspace_real, const char *resolved)
{
    if (!workspace_real || !resolved)
        return NULL;
    size_t wl = strlen (workspace_real);
    if (!s_inside (workspace_real, wl, resolved))
        return NULL;
    const char *rel = resolved + (wl == 1 ? 1 : wl);
    while (*rel == '/')
        rel++;
    return *rel ? rel : ".";
}

//  Replace the unprocessed tail of `rest` (from pos) with `head` + "/" +
//  tail. Used to splice a symlink's target in front of what remains.
static int
s_splice (char *rest, size_t pos, const char *head)
{
    char tmp [PATH_MAX];
    int n = snprintf (tmp, sizeof tmp, "%s/%s", head, rest + pos);
    if (n < 0 || (size_t) n >= sizeof tmp)
        return -1;
    memcpy (rest, tmp, (size_t) n + 1);
    return 0;
}

//  A walk in progress: what remains of the model's path (rest, from pos)
//  and the part resolved so far (res, rl bytes). Invariant: res is a
//  symlink-free path, the workspace or below it.
typedef struct {
    const char *ws;
    size_t wl;
    bool for_write;
    char rest [PATH_MAX];
    size_t pos;
    char res [PATH_MAX];
    size_t rl;
    int links;
    char last_link [PATH_MAX];          //  last symlink followed, for messages
    char quoted [SB_PATH_QUOTE_MAX + 8];
    char *err;
    size_t errlen;
} s_walk_t;

//  Every check on the input, before any work on it; then the walk starts
//  at the workspace with the path in rest (an absolute path from below
//  the workspace part). Returns 0, or -1 with err set.
static int
s_walk_start (s_walk_t *w, const char *ws, const char *path, size_t pathlen, char *err, size_t errlen)
{
    if (!ws || ws [0] != '/')
        return sb_fail (err, errlen, "internal error: workspace is not an absolute path");
    size_t wl = strnlen (ws, PATH_MAX);
    if (wl >= PATH_MAX)
        return sb_fail (err, errlen, "internal error: workspace path too long");
    if (!path || pathlen == 0)
        return sb_fail (err, errlen, "path is empty");
    if (pathlen >= PATH_MAX)
        return sb_fail (err, errlen, "path too long (%zu bytes; the limit is %d)",
                       pathlen, PATH_MAX - 1);
    s_quote (path, pathlen, w->quoted, sizeof w->quoted);
    if (memchr (path, 0, pathlen))
        return sb_fail (err, errlen, "path contains a NUL byte: %s", w->quoted);

    w->ws = ws;
    w->wl = wl;
    w->err = err;
    w->errlen = errlen;
    memcpy (w->rest, path, pathlen);
    w->rest [pathlen] = 0;
    w->pos = 0;
    if (w->rest [0] == '/') {
        const char *below = s_below_workspace (ws, w->rest);
        if (!below)
            return sb_fail (err, errlen,
                           "path escapes the workspace: %s (absolute paths must lie inside %s)",
                           w->quoted, ws);
        w->pos = (size_t) (below - w->rest);
    }
    memcpy (w->res, ws, wl + 1);
    w->rl = wl;
    w->links = 0;
    w->last_link [0] = 0;
    return 0;
}

//  A `..`: up one level, never above the workspace.
static int
s_walk_up (s_walk_t *w)
{
    if (w->rl == w->wl) {
        if (w->last_link [0])
            return sb_fail (w->err, w->errlen, "path escapes the workspace: %s (through the symlink %s)",
                           w->quoted, w->last_link);
        return sb_fail (w->err, w->errlen, "path escapes the workspace: %s", w->quoted);
    }
    while (w->rl > 0 && w->res [w->rl - 1] != '/')
        w->rl--;
    if (w->rl > 1)
        w->rl--;                        //  drop the slash, except the root's
    w->res [w->rl] = 0;
    return 0;
}

//  Why lstat failed on the candidate, in the model's words.
static int
s_walk_lstat_fail (s_walk_t *w, int e)
{
    if (e == ENOENT)
        return sb_fail (w->err, w->errlen, "no such file or directory: %s", w->quoted);
    if (e == ENOTDIR)
        return sb_fail (w->err, w->errlen, "not a directory: %s", w->quoted);
    if (e == ENAMETOOLONG)
        return sb_fail (w->err, w->errlen, "file name too long: %s", w->quoted);
    return sb_fail (w->err, w->errlen, "cannot access %s: %s", w->quoted, strerror (e));
}

//  The candidate in res is a symlink: its target goes in front of what
//  remains, and the walk goes on from the link's directory (from the
//  workspace for an absolute target, which must lie inside it).
static int
s_walk_follow (s_walk_t *w)
{
    if (++w->links > SB_PATH_MAX_LINKS)
        return sb_fail (w->err, w->errlen, "too many levels of symbolic links: %s", w->quoted);
    char target [PATH_MAX];
    ssize_t tl = readlink (w->res, target, sizeof target - 1);
    if (tl < 0)
        return sb_fail (w->err, w->errlen, "cannot read symlink in %s: %s", w->quoted, strerror (errno));
    target [tl] = 0;
    snprintf (w->last_link, sizeof w->last_link, "%s -> %s", sb_path_relative (w->ws, w->res), target);
    w->res [w->rl] = 0;                 //  back to the link's directory
    const char *head = target;
    if (target [0] == '/') {
        head = s_below_workspace (w->ws, target);
        if (!head)
            return sb_fail (w->err, w->errlen, "path escapes the workspace: %s (through the symlink %s)",
                           w->quoted, w->last_link);
        memcpy (w->res, w->ws, w->wl + 1);
        w->rl = w->wl;
    }
    if (s_splice (w->rest, w->pos, head) != 0)
        return sb_fail (w->err, w->errlen, "path too long after following symlinks: %s", w->quoted);
    w->pos = 0;
    return 0;
}

//  One component `c` (n bytes, neither `.` nor `..`): appended to res
//  when it exists as a directory (or a file at the end), followed when it
//  is a symlink, kept when it is missing and the path is for writing.
static int
s_walk_component (s_walk_t *w, const char *c, size_t n)
{
    size_t sep = (w->rl == 1) ? 0 : 1;
    if (w->rl + sep + n >= sizeof w->res)
        return sb_fail (w->err, w->errlen, "path too long: %s", w->quoted);
    if (sep)
        w->res [w->rl] = '/';
    memcpy (w->res + w->rl + sep, c, n);
    size_t cand_len = w->rl + sep + n;
    w->res [cand_len] = 0;

    struct stat st;
    if (lstat (w->res, &st) != 0) {
        int e = errno;
        if (e == ENOENT && w->for_write) {
            w->rl = cand_len;           //  to be created; stays inside
            return 0;
        }
        return s_walk_lstat_fail (w, e);
    }
    if (S_ISLNK (st.st_mode))
        return s_walk_follow (w);
    w->rl = cand_len;
    if (!S_ISDIR (st.st_mode)) {
        //  A file in the middle of a path: the kernel would say ENOTDIR.
        size_t peek = w->pos;
        const char *nc;
        if (s_next (w->rest, &peek, &nc) != 0)
            return sb_fail (w->err, w->errlen, "not a directory: %s", w->quoted);
    }
    return 0;
}

int
sb_path_resolve_n (const char *ws, const char *path, size_t pathlen, bool for_write,
                   char *out, size_t outlen, char *err, size_t errlen)
{
    s_walk_t w;
    w.for_write = for_write;
    if (s_walk_start (&w, ws, path, pathlen, err, errlen) != 0)
        return -1;
    while (true) {
        const char *c;
        size_t n = s_next (w.rest, &w.pos, &c);
        if (n == 0)
            break;
        if (s_is_dot (c, n))
            continue;
        if ((s_is_dotdot (c, n) ? s_walk_up (&w) : s_walk_component (&w, c, n)) != 0)
            return -1;
    }
    //  The walk keeps the invariant; check it anyway, it is what we promise.
    if (!s_inside (w.ws, w.wl, w.res))
        return sb_fail (err, errlen, "path escapes the workspace: %s", w.quoted);
    if (w.rl >= outlen)
        return sb_fail (err, errlen, "path too long: %s", w.quoted);
    memcpy (out, w.res, w.rl + 1);
    return 0;
}

int
sb_path_resolve (const char *workspace_real, const char *path, bool for_write,
                 char *out, size_t outlen, char *err, size_t errlen)
{
    //  strnlen: a path at or over PATH_MAX is refused by the _n variant
    //  without reading an unbounded string.
    size_t len = path ? strnlen (path, PATH_MAX) : 0;
    return sb_path_resolve_n (workspace_real, path, len, for_write, out, outlen, err, errlen);
}

int
sb_path_open (const char *workspace_real, const char *resolved, int flags, mode_t mode)
{
    const char *rel = sb_path_relative (workspace_real, resolved);
    if (!rel) {
        errno = EXDEV;
        return -1;
    }
    if (!(flags & (O_CREAT | O_TMPFILE)))
        mode = 0;                       //  openat2 insists

    int wsfd = open (workspace_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (wsfd < 0)
        return -1;
    struct open_how how = {
        .flags = (unsigned) (flags | O_CLOEXEC | O_NOFOLLOW),
        .mode = mode,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int) syscall (SYS_openat2, wsfd, rel, &how, sizeof how);
    int e = errno;
    close (wsfd);
    if (fd >= 0)
        return fd;
    //  Kernels before 5.6, or a seccomp filter that does not know openat2:
    //  the resolved path has no symlinks, so O_NOFOLLOW still guards the
    //  final component, which is the one most easily swapped.
    if (e != ENOSYS && e != EPERM) {
        errno = e;
        return -1;
    }
    return open (resolved, flags | O_CLOEXEC | O_NOFOLLOW, mode);
}

int
sb_path_mkdirs (const char *workspace_real, const char *resolved_dir, char *err, size_t errlen)
{
    const char *rel = sb_path_relative (workspace_real, resolved_dir);
    if (!rel)
        return sb_fail (err, errlen, "directory is outside the workspace");
    int fd = open (workspace_real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return sb_fail (err, errlen, "cannot open the workspace: %s", strerror (errno));
    if (strcmp (rel, ".") == 0)
        return fd;

    size_t pos = 0;
    const char *c;
    size_t n;
    while ((n = s_next (rel, &pos, &c)) != 0) {
        char name [NAME_MAX + 1];
        if (n > NAME_MAX || s_is_dot (c, n) || s_is_dotdot (c, n)) {
            close (fd);
            return sb_fail (err, errlen, "invalid directory name in %s", rel);
        }
        memcpy (name, c, n);
        name [n] = 0;
        bool made = mkdirat (fd, name, 0777) == 0;
        if (!made && errno != EEXIST) {
            int e = errno;
            close (fd);
            return sb_fail (err, errlen, "cannot create directory %.*s: %s",
                           (int) (c - rel + n), rel, strerror (e));
        }
        //  A folder made for a tool belongs to its parent's owner (the
        //  workspace's, whom a root server's sandbox runs tools as);
        //  best effort: only root can give it away.
        struct stat pst;
        if (made && fstat (fd, &pst) == 0
        &&  fchownat (fd, name, pst.st_uid, pst.st_gid, AT_SYMLINK_NOFOLLOW) != 0) {
            //  not root: it is ours
        }
        //  O_NOFOLLOW at each step: a symlink planted since resolution
        //  makes this fail instead of leading us out of the workspace.
        int next = openat (fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close (fd);
        if (next < 0) {
            if (e == ELOOP || e == ENOTDIR)
                return sb_fail (err, errlen, "cannot create directory %.*s: "
                               "a file or symlink is in the way",
                               (int) (c - rel + n), rel);
            return sb_fail (err, errlen, "cannot open directory %.*s: %s",
                           (int) (c - rel + n), rel, strerror (e));
        }
        fd = next;
    }
    return fd;
}

/*  actors/exec/tools_file.c — the file tools: read_file, write_file,
    edit_file and list_dir, every path confined by actors/exec/path.h.
*/
#include "actors/exec/tools_impl.h"
#include "actors/exec/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SB_TOOLS_READ_LIMIT_DEFAULT  2000
#define SB_TOOLS_READ_LIMIT_MAX      100000
#define SB_TOOLS_BINARY_PROBE        8192
#define SB_TOOLS_EDIT_MAX            (16 * 1024 * 1024)
#define SB_TOOLS_LIST_MAX            1000    //  entries shown
#define SB_TOOLS_LIST_DIR_READ_MAX   10000   //  names read from one directory
#define SB_TOOLS_LIST_DEPTH_MAX      5


//  Opens a resolved path for reading as a regular file, or explains why not.
int
sb_tools_open_regular (const sb_tool_ctx_t *ctx, const char *resolved, const char *shown,
                       struct stat *st, sb_tool_result_t *res)
{
    //  O_NONBLOCK: a FIFO in the workspace must not hang the tool.
    int fd = sb_path_open (ctx->workspace, resolved, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0) {
        if (errno == ELOOP)
            return sb_tools_error (res, "%s changed while being opened (a symlink appeared); refused",
                            shown);
        return sb_tools_error (res, "cannot open %s: %s", shown, strerror (errno));
    }
    if (fstat (fd, st) != 0 || !S_ISREG (st->st_mode)) {
        bool dir = S_ISDIR (st->st_mode);
        close (fd);
        if (dir)
            return sb_tools_error (res, "%s is a directory; use list_dir", shown);
        return sb_tools_error (res, "%s is not a regular file", shown);
    }
    return fd;
}

int
sb_tool_read_file (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = {
        { "path", SB_TOOLS_ARG_STR, true }, { "offset", SB_TOOLS_ARG_INT, false }, { "limit", SB_TOOLS_ARG_INT, false },
    };
    if (sb_tools_args_check ("read_file", args, spec, 3, res) != 0)
        return -1;
    json_int_t offset = 1, limit = SB_TOOLS_READ_LIMIT_DEFAULT;
    sb_tools_arg_int (args, "offset", &offset);
    sb_tools_arg_int (args, "limit", &limit);
    if (offset == 0)
        offset = 1;                     //  a common off-by-one; mean the start
    if (offset < 1)
        return sb_tools_error (res, "read_file: offset must be 1 or more (lines are numbered from 1)");
    if (limit < 1 || limit > SB_TOOLS_READ_LIMIT_MAX)
        return sb_tools_error (res, "read_file: limit must be between 1 and %d",
                        SB_TOOLS_READ_LIMIT_MAX);
    size_t len = 0;
    const char *path = sb_tools_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    if (sb_tools_resolve (ctx, path, len, false, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    struct stat st;
    int fd = sb_tools_open_regular (ctx, resolved, shown, &st, res);
    if (fd < 0)
        return -1;

    //  One pass: count lines, keep those in [offset, offset + limit) until
    //  the output cap, and stop reading as soon as the answer is known.
    sb_tools_buf_t out = { 0 };
    char buf [65536];
    json_int_t line = 1, first = 0, last = 0, end = offset + limit;
    size_t line_start = 0;              //  where the current line begins in out
    bool more = false, capped = false, cut = false, partial_line = false, probed = false;
    ssize_t r;
    while (!more && (r = read (fd, buf, sizeof buf)) > 0) {
        if (!probed) {
            probed = true;
            if (memchr (buf, 0, (size_t) r < SB_TOOLS_BINARY_PROBE ? (size_t) r
                                                                   : SB_TOOLS_BINARY_PROBE)) {
                close (fd);
                free (out.p);
                return sb_tools_error (res, "%s looks like a binary file (%lld bytes, with NUL bytes); "
                                "read_file shows text only", shown, (long long) st.st_size);
            }
        }
        size_t i = 0;
        while (i < (size_t) r) {
            if (line >= end || capped) {
                more = true;
                break;
            }
            char *nl = memchr (buf + i, '\n', (size_t) r - i);
            size_t seg_end = nl ? (size_t) (nl - buf) + 1 : (size_t) r;
            if (line >= offset) {
                if (!partial_line) {
                    line_start = out.len;
                    if (!first)
                        first = line;
                }
                size_t seg = seg_end - i;
                if (out.len + seg > SB_TOOLS_OUTPUT_MAX) {
                    capped = true;
                    if (line == first) {
                        //  One line longer than the cap: show its start.
                        sb_tools_buf_add (&out, buf + i, SB_TOOLS_OUTPUT_MAX - out.len);
                        last = line;
                        cut = true;
                    }
                    else
                        out.len = line_start;
                    if (out.p)
                        out.p [out.len] = 0;
                    more = true;
                    break;
                }
                sb_tools_buf_add (&out, buf + i, seg);
                last = line;
            }
            partial_line = !nl;
            i = seg_end;
            if (nl)
                line++;
        }
    }
    int read_errno = errno;
    bool read_failed = !more && r < 0;
    close (fd);
    if (read_failed) {
        free (out.p);
        return sb_tools_error (res, "cannot read %s: %s", shown, strerror (read_errno));
    }
    json_int_t total = line - 1 + (partial_line ? 1 : 0);
    if (!first) {
        free (out.p);
        if (total == 0)
            return sb_tools_error (res, "%s is empty", shown);
        return sb_tools_error (res, "read_file: offset %lld is past the end of %s (%lld lines)",
                        (long long) offset, shown, (long long) total);
    }
    const char *nl = sb_tools_buf_ends_with_newline (&out) ? "" : "\n";
    if (cut)
        sb_tools_buf_addf (&out, "%s[line %lld is longer than %d bytes and was cut; "
                    "use shell (e.g. cut or fold) to see the rest]\n",
                    nl, (long long) last, SB_TOOLS_OUTPUT_MAX);
    else
    if (more)
        sb_tools_buf_addf (&out, "%s[showing lines %lld-%lld%s; more lines follow: "
                    "continue with offset=%lld]\n", nl, (long long) first, (long long) last,
                    capped ? " (output capped at 64 KiB)" : "", (long long) last + 1);
    res->truncated = more;
    return sb_tools_finish (res, true, &out);
}

//  Replace the file `name` in directory dirfd with data: a temporary file
//  in the same directory, fsync, rename over, fsync the directory. Readers
//  see the old content or the new, never a mix; a crash leaves at worst a
//  stray temporary file, never a torn target.
static int
s_write_atomic (int dirfd, const char *name, const char *data, size_t len,
                const char *shown, bool *existed, sb_tool_result_t *res)
{
    struct stat st;
    mode_t mode = 0644;
    *existed = false;
    if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR (st.st_mode))
            return sb_tools_error (res, "%s is a directory", shown);
        if (!S_ISREG (st.st_mode))
            return sb_tools_error (res, "%s is not a regular file; refusing to replace it", shown);
        mode = st.st_mode & 07777;      //  keep an executable script executable
        *existed = true;
    }
    char tmp [64];
    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
        unsigned long long rnd = 0;
        if (getrandom (&rnd, sizeof rnd, 0) != sizeof rnd)
            rnd = (unsigned long long) time (NULL) ^ ((unsigned long long) getpid () << 32)
                ^ (unsigned long long) attempt;
        snprintf (tmp, sizeof tmp, ".sb-write-%016llx.tmp", rnd);
        fd = openat (dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return sb_tools_error (res, "cannot create a temporary file next to %s: %s",
                        shown, strerror (errno));
    int e = 0;
    for (size_t off = 0; off < len && !e; ) {
        ssize_t w = write (fd, data + off, len - off);
        if (w > 0)
            off += (size_t) w;
        else
        if (w < 0 && errno != EINTR)
            e = errno;
    }
    //  Best effort: only root can give a file away, and then it works. A
    //  new file belongs to its folder's owner, as it would were the
    //  sandboxed shell (run as the workspace's owner) to make it.
    struct stat dst;
    if (!e && !*existed && fstat (dirfd, &dst) == 0) {
        st.st_uid = dst.st_uid;
        st.st_gid = dst.st_gid;
    }
    if (!e && fchown (fd, st.st_uid, st.st_gid) != 0) {
        //  not root: the file is ours, which is what we can do
    }
    if (!e && fchmod (fd, mode) != 0)
        e = errno;
    if (!e && fsync (fd) != 0)
        e = errno;
    if (close (fd) != 0 && !e)
        e = errno;
    if (!e && renameat (dirfd, tmp, dirfd, name) != 0)
        e = errno;
    if (e) {
        unlinkat (dirfd, tmp, 0);
        return sb_tools_error (res, "cannot write %s: %s", shown, strerror (e));
    }
    fsync (dirfd);
    return 0;
}

//  Splits a resolved path into its directory (opened, created if missing)
//  and its last component.
static int
s_open_parent (const sb_tool_ctx_t *ctx, char *resolved, const char **name,
               sb_tool_result_t *res)
{
    char *slash = strrchr (resolved, '/');
    *name = slash + 1;
    char err [1024];
    *slash = 0;
    int dirfd = sb_path_mkdirs (ctx->workspace, *resolved ? resolved : "/", err, sizeof err);
    *slash = '/';
    if (dirfd < 0)
        return sb_tools_error (res, "%s", err);
    return dirfd;
}

int
sb_tool_write_file (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = {
        { "path", SB_TOOLS_ARG_STR, true }, { "content", SB_TOOLS_ARG_STR, true },
    };
    if (sb_tools_args_check ("write_file", args, spec, 2, res) != 0)
        return -1;
    size_t len = 0, clen = 0;
    const char *path = sb_tools_arg_str (args, "path", &len);
    const char *content = sb_tools_arg_str (args, "content", &clen);
    if (len > 0 && path [len - 1] == '/')
        return sb_tools_error (res, "write_file: %s names a directory; give a file path", path);
    char resolved [PATH_MAX];
    if (sb_tools_resolve (ctx, path, len, true, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    if (strcmp (shown, ".") == 0)
        return sb_tools_error (res, "write_file: %s is the workspace directory itself", path);
    const char *name;
    int dirfd = s_open_parent (ctx, resolved, &name, res);
    if (dirfd < 0)
        return -1;
    bool existed;
    int rc = s_write_atomic (dirfd, name, content, clen, shown, &existed, res);
    close (dirfd);
    if (rc != 0)
        return -1;
    sb_tools_buf_t out = { 0 };
    sb_tools_buf_addf (&out, "wrote %zu bytes to %s (%s)", clen, shown,
                existed ? "replaced" : "new file");
    return sb_tools_finish (res, true, &out);
}

int
sb_tool_edit_file (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = {
        { "path", SB_TOOLS_ARG_STR, true }, { "old", SB_TOOLS_ARG_STR, true }, { "new", SB_TOOLS_ARG_STR, true },
    };
    if (sb_tools_args_check ("edit_file", args, spec, 3, res) != 0)
        return -1;
    size_t len = 0, olen = 0, nlen = 0;
    const char *path = sb_tools_arg_str (args, "path", &len);
    const char *old = sb_tools_arg_str (args, "old", &olen);
    const char *new = sb_tools_arg_str (args, "new", &nlen);
    if (olen == 0)
        return sb_tools_error (res, "edit_file: old is empty; to create or overwrite a file use write_file");
    char resolved [PATH_MAX];
    if (sb_tools_resolve (ctx, path, len, false, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    struct stat st;
    int fd = sb_tools_open_regular (ctx, resolved, shown, &st, res);
    if (fd < 0)
        return -1;
    if (st.st_size > SB_TOOLS_EDIT_MAX) {
        close (fd);
        return sb_tools_error (res, "%s is too large to edit (%lld bytes; the limit is %d)",
                        shown, (long long) st.st_size, SB_TOOLS_EDIT_MAX);
    }
    //  Read to EOF rather than trusting st_size: the file may be growing.
    size_t cap = (size_t) st.st_size + 1, n = 0;
    char *text = malloc (cap + 1);
    ssize_t r = 0;
    while (text && n <= SB_TOOLS_EDIT_MAX) {
        if (n == cap) {
            char *nt = realloc (text, cap * 2 + 1);
            if (!nt)
                break;
            text = nt;
            cap *= 2;
        }
        r = read (fd, text + n, cap - n);
        if (r > 0)
            n += (size_t) r;
        else
        if (r == 0 || errno != EINTR)
            break;
    }
    close (fd);
    if (!text || r != 0 || n > SB_TOOLS_EDIT_MAX) {
        free (text);
        return sb_tools_error (res, "cannot read %s%s", shown, n > SB_TOOLS_EDIT_MAX ? ": too large" : "");
    }
    if (memchr (text, 0, n)) {
        free (text);
        return sb_tools_error (res, "%s looks like a binary file (it contains NUL bytes); "
                        "edit_file edits text only", shown);
    }

    //  Overlapping matches count: "aa" in "aaa" is ambiguous, so refused.
    size_t count = 0, at = 0, lines [5];
    for (const char *p = text; (p = memmem (p, (size_t) (text + n - p), old, olen)); p++) {
        if (count < 5) {
            size_t ln = 1;
            for (const char *q = text; q < p; q++)
                ln += *q == '\n';
            lines [count] = ln;
        }
        if (count++ == 0)
            at = (size_t) (p - text);
    }
    if (count != 1) {
        free (text);
        if (count == 0)
            return sb_tools_error (res, "edit_file: old text not found in %s (0 matches); it must match "
                            "the file exactly, including whitespace and indentation "
                            "(read_file shows the current content)", shown);
        char where [128] = "";
        for (size_t i = 0; i < count && i < 5; i++)
            snprintf (where + strlen (where), sizeof where - strlen (where), "%s%zu",
                      i ? ", " : "", lines [i]);
        return sb_tools_error (res, "edit_file: old text matches %zu times in %s (at lines %s%s); it "
                        "must match exactly once: include more surrounding lines to make it "
                        "unique", count, shown, where, count > 5 ? ", ..." : "");
    }
    size_t total = n - olen + nlen;
    char *edited = malloc (total + 1);
    if (!edited) {
        free (text);
        return sb_tools_error (res, "out of memory");
    }
    memcpy (edited, text, at);
    memcpy (edited + at, new, nlen);
    memcpy (edited + at + nlen, text + at + olen, n - at - olen);
    free (text);

    const char *name;
    int dirfd = s_open_parent (ctx, resolved, &name, res);
    if (dirfd < 0) {
        free (edited);
        return -1;
    }
    bool existed;
    int rc = s_write_atomic (dirfd, name, edited, total, shown, &existed, res);
    close (dirfd);
    free (edited);
    if (rc != 0)
        return -1;
    sb_tools_buf_t out = { 0 };
    sb_tools_buf_addf (&out, "edited %s: replaced 1 occurrence at line %zu (%zu bytes -> %zu bytes)",
                shown, lines [0], n, total);
    return sb_tools_finish (res, true, &out);
}

typedef struct {
    const sb_tool_ctx_t *ctx;
    const char *base;                   //  the listed directory, relative to the workspace
    sb_tools_buf_t out;
    size_t shown;
    bool stopped;                       //  hit the entry cap
    bool partial_dir;                   //  some directory had too many names
} s_list_t;

static int
s_name_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

//  Whether the session's rules deny reading entry `name` under `prefix`,
//  or, for a symlink, what it leads to: it is then not listed (nor
//  entered), as if it were not there.
static bool
s_list_denied (const s_list_t *lst, const char *prefix, const char *name, bool link)
{
    const sb_tool_ctx_t *ctx = lst->ctx;
    if (!ctx->read_denied)
        return false;
    char rel [PATH_MAX], real [PATH_MAX], err [16];
    bool top = strcmp (lst->base, ".") == 0;
    int n = snprintf (rel, sizeof rel, "%s%s%s%s", top ? "" : lst->base, top ? "" : "/", prefix, name);
    if (n < 0 || (size_t) n >= sizeof rel || ctx->read_denied (rel, ctx->read_denied_arg))
        return true;
    if (!link || sb_path_resolve (ctx->workspace, rel, false, real, sizeof real, err, sizeof err) != 0)
        return false;
    const char *to = sb_path_relative (ctx->workspace, real);
    return to && ctx->read_denied (to, ctx->read_denied_arg);
}

//  Lists dirfd (consumed) into lst, `depth` levels deep. Subdirectories are
//  opened with O_NOFOLLOW relative to their parent, so a symlink is listed
//  as a symlink and never entered.
static void
s_list (int dirfd, const char *prefix, int depth, s_list_t *lst)
{
    DIR *d = fdopendir (dirfd);
    if (!d) {
        close (dirfd);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir (d))) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
        if (n == SB_TOOLS_LIST_DIR_READ_MAX) {
            lst->partial_dir = true;
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nn = realloc (names, ncap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            cap = ncap;
        }
        if (!(names [n] = strdup (de->d_name)))
            break;
        n++;
    }
    if (n)
        qsort (names, n, sizeof *names, s_name_cmp);
    for (size_t i = 0; i < n; i++) {
        if (lst->shown >= SB_TOOLS_LIST_MAX) {
            lst->stopped = true;
            break;
        }
        struct stat st;
        if (fstatat (dirfd, names [i], &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;                   //  vanished while listing
        if (s_list_denied (lst, prefix, names [i], S_ISLNK (st.st_mode)))
            continue;
        lst->shown++;
        if (S_ISLNK (st.st_mode)) {
            char target [PATH_MAX];
            ssize_t tl = readlinkat (dirfd, names [i], target, sizeof target - 1);
            target [tl > 0 ? tl : 0] = 0;
            sb_tools_buf_addf (&lst->out, "%s%s -> %s\n", prefix, names [i], target);
        }
        else
        if (S_ISDIR (st.st_mode)) {
            sb_tools_buf_addf (&lst->out, "%s%s/\n", prefix, names [i]);
            if (depth > 1 && strcmp (names [i], ".git") != 0) {
                int sub = openat (dirfd, names [i],
                                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                    char sprefix [PATH_MAX];
                    snprintf (sprefix, sizeof sprefix, "%s%s/", prefix, names [i]);
                    s_list (sub, sprefix, depth - 1, lst);
                }
            }
        }
        else
            sb_tools_buf_addf (&lst->out, "%s%s\n", prefix, names [i]);
    }
    for (size_t i = 0; i < n; i++)
        free (names [i]);
    free (names);
    closedir (d);
}

int
sb_tool_list_dir (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = {
        { "path", SB_TOOLS_ARG_STR, false }, { "depth", SB_TOOLS_ARG_INT, false },
    };
    if (sb_tools_args_check ("list_dir", args, spec, 2, res) != 0)
        return -1;
    json_int_t depth = 1;
    sb_tools_arg_int (args, "depth", &depth);
    if (depth < 1 || depth > SB_TOOLS_LIST_DEPTH_MAX)
        return sb_tools_error (res, "list_dir: depth must be between 1 and %d", SB_TOOLS_LIST_DEPTH_MAX);
    size_t len = 1;
    const char *path = sb_tools_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    if (sb_tools_resolve (ctx, path ? path : ".", path ? len : 1, false, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    int fd = sb_path_open (ctx->workspace, resolved, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        if (errno == ENOTDIR)
            return sb_tools_error (res, "%s is not a directory; use read_file", shown);
        return sb_tools_error (res, "cannot open %s: %s", shown, strerror (errno));
    }
    s_list_t lst = { .ctx = ctx, .base = shown };
    s_list (fd, "", (int) depth, &lst);
    if (lst.out.len == 0 && !lst.out.oom)
        sb_tools_buf_addf (&lst.out, "(empty directory)\n");
    if (lst.stopped)
        sb_tools_buf_addf (&lst.out, "[listing stopped at %d entries; list a subdirectory or lower "
                    "the depth to see the rest]\n", SB_TOOLS_LIST_MAX);
    if (lst.partial_dir)
        sb_tools_buf_addf (&lst.out, "[a directory has more than %d entries; only some are listed]\n",
                    SB_TOOLS_LIST_DIR_READ_MAX);
    res->truncated = lst.stopped || lst.partial_dir;
    return sb_tools_finish (res, true, &lst.out);
}

/*  common/git_checkpoint.c — see git_checkpoint.h. */
#include "common/git_checkpoint.h"
#include "common/digest.h"
#include "common/git.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

//  Where one checkpoint's git runs: the work tree, and the variables that
//  point git at the private index (and the shadow repository).
typedef struct {
    const char *ws;
    char index_var [4300];
    char dir_var [4300];
    char tree_var [4200];
    const char *vars [SB_GIT_ENV_MAX + 1];
    char index [4200];
    char pathspec [4300];       //  the pathspec file when files are skipped
    sb_git_overrides_t ov;      //  the config is listed once a checkpoint
    char *hashes;               //  the last checkpoint's skipped files: records "HEX SIZE MTIME INO\0PATH\0"
    size_t hashes_len;
    const char *const *only;    //  a restore: the paths it may touch, sorted (NULL: all)
    size_t nonly;
} s_ctx_t;

static const char *const s_identity [] = {
    "GIT_AUTHOR_NAME=switchboard", "GIT_AUTHOR_EMAIL=switchboard@localhost",
    "GIT_COMMITTER_NAME=switchboard", "GIT_COMMITTER_EMAIL=switchboard@localhost",
};

static int
s_fail (char *err, size_t n, const char *what)
{
    snprintf (err, n, "%s", what);
    return -1;
}

int
sb_ckpt_ref (const char *sid, char *ref, size_t n)
{
    size_t len = sid ? strlen (sid) : 0;
    if (len == 0 || len > 64)
        return -1;
    for (size_t k = 0; k < len; k++) {
        char c = sid [k];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-'))
            return -1;
    }
    int w = snprintf (ref, n, "refs/switchboard/checkpoints/%s", sid);
    return w > 0 && (size_t) w < n ? 0 : -1;
}

static int
s_git (s_ctx_t *self, const char *const *args, char **out)
{
    return sb_git_run_cached (&self->ov, self->ws, self->vars, args, out);
}

//  The first line of a git command's output, in `id` (an object id).
static int
s_git_id (s_ctx_t *self, const char *const *args, char *id, size_t n)
{
    char *out = NULL;
    int rc = s_git (self, args, &out);
    if (rc == 0) {
        out [strcspn (out, "\n")] = 0;
        size_t len = strlen (out);
        rc = (len == 40 || len == 64) && strspn (out, "0123456789abcdef") == len ? 0 : -1;
        if (rc == 0)
            snprintf (id, n, "%s", out);
    }
    free (out);
    return rc;
}

/*  Points the context at the private index and, outside git, at the
    shadow repository (made on first use). */
static int
s_open (s_ctx_t *self, const char *ws, const char *dir, const char *sid, char *err, size_t errlen)
{
    static const char *inside [] = { "rev-parse", "--is-inside-work-tree", NULL };
    memset (self, 0, sizeof *self);
    self->ws = ws;
    size_t nv = 0;
    char *out = NULL;
    bool git = s_git (self, inside, &out) == 0 && strncmp (out, "true", 4) == 0;
    free (out);
    out = NULL;
    if (dir && mkdir (dir, 0700) != 0 && errno != EEXIST)
        return s_fail (err, errlen, "cannot make the checkpoints folder");
    if (dir)
        snprintf (self->index, sizeof self->index, "%s/%s.index", dir, sid);
    else
    if (git) {
        char rel [128];
        snprintf (rel, sizeof rel, "switchboard/checkpoints-%s.index", sid);
        const char *args [] = { "rev-parse", "--git-path", rel, NULL };
        if (s_git (self, args, &out) != 0) {
            free (out);
            return s_fail (err, errlen, "git rev-parse failed");
        }
        out [strcspn (out, "\n")] = 0;
        int w = out [0] == '/' ? snprintf (self->index, sizeof self->index, "%s", out)
                               : snprintf (self->index, sizeof self->index, "%s/%s", ws, out);
        free (out);
        out = NULL;
        if (w <= 0 || (size_t) w >= sizeof self->index)
            return s_fail (err, errlen, "the git dir's path is too long");
        char *slash = strrchr (self->index, '/');
        *slash = 0;
        if (mkdir (self->index, 0700) != 0 && errno != EEXIST)
            return s_fail (err, errlen, "cannot make the git dir's switchboard folder");
        *slash = '/';
    }
    else
        return s_fail (err, errlen, "not a git work tree, and no data folder for a shadow repository");
    snprintf (self->index_var, sizeof self->index_var, "GIT_INDEX_FILE=%s", self->index);
    self->vars [nv++] = self->index_var;
    if (!git) {
        char repo [4200];
        snprintf (repo, sizeof repo, "%s/%s.git", dir, sid);
        struct stat st;
        if (stat (repo, &st) != 0) {
            const char *init [] = { "init", "-q", "--bare", repo, NULL };
            s_ctx_t bare = { .ws = dir, .vars = { NULL } };
            int rc = s_git (&bare, init, NULL);
            sb_git_overrides_clear (&bare.ov);
            if (rc != 0)
                return s_fail (err, errlen, "cannot make the shadow repository");
        }
        snprintf (self->dir_var, sizeof self->dir_var, "GIT_DIR=%s", repo);
        snprintf (self->tree_var, sizeof self->tree_var, "GIT_WORK_TREE=%s", ws);
        self->vars [nv++] = self->dir_var;
        self->vars [nv++] = self->tree_var;
        /* listed again with GIT_DIR set: the shadow's config is the one */
        sb_git_overrides_clear (&self->ov);
    }
    else {
        /* the first checkpoint starts from a copy of the real index, whose
           stat cache spares hashing the files nobody touched */
        struct stat st;
        static const char *real [] = { "rev-parse", "--git-path", "index", NULL };
        if (stat (self->index, &st) != 0 && s_git (self, real, &out) == 0) {
            out [strcspn (out, "\n")] = 0;
            char path [8300];
            snprintf (path, sizeof path, out [0] == '/' ? "%s%s" : "%s/%s", out [0] == '/' ? "" : ws, out);
            sb_git_copy_file (path, self->index);
        }
        free (out);
    }
    for (size_t k = 0; k < sizeof s_identity / sizeof s_identity [0]; k++)
        self->vars [nv++] = s_identity [k];
    self->vars [nv] = NULL;
    /* one checkpoint of a session at a time: a lock left behind is a
       crash's */
    char lock [4300];
    snprintf (lock, sizeof lock, "%s.lock", self->index);
    unlink (lock);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  The skipped files' hashes: a large file is hashed again only when its
    stat data changed since the last checkpoint, as git's index spares
    the files it tracks. The cache is our own file under DATA (or the git
    dir), still read as bytes from outside: bounded and validated. */

static void
s_hashes_path (const s_ctx_t *self, char *path, size_t n)
{
    snprintf (path, n, "%s.hashes", self->index);
}

static void
s_hashes_load (s_ctx_t *self)
{
    char path [4400];
    s_hashes_path (self, path, sizeof path);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return;
    if (fstat (fd, &st) == 0 && st.st_size > 0 && st.st_size <= SB_CKPT_HASHES_MAX_BYTES
    &&  (self->hashes = malloc ((size_t) st.st_size + 2))) {
        ssize_t r = read (fd, self->hashes, (size_t) st.st_size);
        self->hashes_len = r == st.st_size ? (size_t) r : 0;
        self->hashes [self->hashes_len] = self->hashes [self->hashes_len + 1] = 0;
    }
    close (fd);
}

//  The cached hash of `p` when its stat data are those of `st`.
static bool
s_hashes_find (const s_ctx_t *self, const char *p, const struct stat *st, char hash [65])
{
    const char *end = self->hashes ? self->hashes + self->hashes_len : NULL;
    for (const char *r = self->hashes; r && r < end; ) {
        const char *rp = r + strnlen (r, (size_t) (end - r)) + 1;
        if (rp >= end)
            break;
        size_t plen = strnlen (rp, (size_t) (end - rp));
        char hex [65];
        int64_t size, mtime;
        uint64_t ino;
        if (sscanf (r, "%64[0-9a-f] %" SCNd64 " %" SCNd64 " %" SCNu64, hex, &size, &mtime, &ino) == 4
        &&  strlen (hex) == 64 && strcmp (rp, p) == 0 && size == st->st_size && ino == (uint64_t) st->st_ino
        &&  mtime == (int64_t) st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec) {
            memcpy (hash, hex, 65);
            return true;
        }
        r = rp + plen + 1;
    }
    return false;
}

static void
s_hash_file (int dirfd, const char *p, char hash [65])
{
    hash [0] = 0;
    int fd = openat (dirfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    enum { CHUNK = 1 << 16 };
    uint8_t *buf = fd >= 0 ? malloc (CHUNK) : NULL;
    sb_digest_t *d = buf ? sb_digest_new () : NULL;
    ssize_t r = d ? 0 : -1;
    while (d && (r = read (fd, buf, CHUNK)) > 0)
        sb_digest_update (d, buf, (size_t) r);
    if (d && r == 0) {
        uint8_t out [SB_DIGEST_LEN];
        sb_digest_final (d, out);
        for (int k = 0; k < SB_DIGEST_LEN; k++)
            snprintf (hash + 2 * k, 3, "%02x", out [k]);
    }
    sb_digest_destroy (&d);
    free (buf);
    if (fd >= 0)
        close (fd);
}

//  Writes this checkpoint's skipped files as the next one's cache.
static void
s_hashes_save (const s_ctx_t *self, int dirfd, const sb_ckpt_t *out)
{
    char path [4400], tmp [4500];
    s_hashes_path (self, path, sizeof path);
    if (out->nskipped == 0) {
        unlink (path);
        return;
    }
    snprintf (tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen (tmp, "we");
    bool ok = f != NULL;
    for (size_t k = 0; ok && k < out->nskipped; k++) {
        const sb_ckpt_skip_t *s = &out->skipped [k];
        struct stat st;
        if (!s->hash [0] || fstatat (dirfd, s->path, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        ok = fprintf (f, "%s %" PRId64 " %" PRId64 " %" PRIu64, s->hash, (int64_t) st.st_size,
                      (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, (uint64_t) st.st_ino) > 0
          && fputc (0, f) == 0 && fwrite (s->path, 1, strlen (s->path) + 1, f) == strlen (s->path) + 1;
    }
    if (f && fclose (f) != 0)
        ok = false;
    if (!ok || rename (tmp, path) != 0)
        unlink (tmp);
}

//  Appends `magic`, `s` and a NUL to the pathspec file.
static bool
s_spec (FILE *f, const char *magic, const char *s)
{
    return fputs (magic, f) >= 0 && fwrite (s, 1, strlen (s) + 1, f) == strlen (s) + 1;
}

/*  Lists the files over max_file (tracked in the private index, or
    untracked and not ignored) into out->skipped, and when there are any
    writes the pathspec file that leaves them out. */
static int
s_find_large (s_ctx_t *self, const char *exclude, int64_t max_file, sb_ckpt_t *out, char *err, size_t errlen)
{
    const char *ls [] = { "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".", exclude, NULL };
    char *list = NULL;
    if (s_git (self, ls, &list) != 0) {
        free (list);
        return s_fail (err, errlen, "git ls-files failed");
    }
    int dirfd = open (self->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FILE *spec = NULL;
    size_t files = 0;
    int rc = dirfd < 0 ? s_fail (err, errlen, "cannot open the workspace") : 0;
    s_hashes_load (self);
    for (char *p = list; rc == 0 && *p; p += strlen (p) + 1) {
        if (++files > SB_CKPT_FILES_MAX) {
            rc = s_fail (err, errlen, "the work tree holds too many files to record");
            break;
        }
        struct stat st;
        if (fstatat (dirfd, p, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG (st.st_mode) || st.st_size <= max_file)
            continue;
        if (!spec) {
            snprintf (self->pathspec, sizeof self->pathspec, "%s.skip", self->index);
            spec = fopen (self->pathspec, "we");
            if (!spec || !s_spec (spec, "", ".") || (exclude && !s_spec (spec, "", exclude))) {
                rc = s_fail (err, errlen, "cannot write the pathspec file");
                break;
            }
        }
        if (!s_spec (spec, ":(exclude,literal)", p)) {
            rc = s_fail (err, errlen, "cannot write the pathspec file");
            break;
        }
        out->skipped_total++;
        if (out->nskipped < SB_CKPT_SKIPPED_MAX && strlen (p) <= SB_CKPT_PATH_MAX) {
            if (!out->skipped && !(out->skipped = calloc (SB_CKPT_SKIPPED_MAX, sizeof *out->skipped))) {
                rc = s_fail (err, errlen, "out of memory");
                break;
            }
            sb_ckpt_skip_t *s = &out->skipped [out->nskipped];
            if (!(s->path = strdup (p))) {
                rc = s_fail (err, errlen, "out of memory");
                break;
            }
            s->size = st.st_size;
            if (!s_hashes_find (self, p, &st, s->hash))
                s_hash_file (dirfd, p, s->hash);
            out->nskipped++;
        }
    }
    if (spec && fclose (spec) != 0 && rc == 0)
        rc = s_fail (err, errlen, "cannot write the pathspec file");
    if (rc == 0 && dirfd >= 0)
        s_hashes_save (self, dirfd, out);
    if (dirfd >= 0)
        close (dirfd);
    free (list);
    return rc;
}

/*  Stages the work tree into the private index and writes the tree. A
    skipped file is also dropped from the index, where an earlier
    checkpoint or the real index may have it. */
static int
s_stage (s_ctx_t *self, const char *exclude, sb_ckpt_t *out, char *err, size_t errlen)
{
    char from [4400];
    snprintf (from, sizeof from, "--pathspec-from-file=%s", self->pathspec);
    const char *add_all [] = { "add", "-A", "--", ".", exclude, NULL };
    const char *add_some [] = { "add", "-A", from, "--pathspec-file-nul", NULL };
    if (s_git (self, self->pathspec [0] ? add_some : add_all, NULL) != 0)
        return s_fail (err, errlen, "git add failed");
    for (size_t k = 0; k < out->nskipped; k++) {
        char lit [SB_CKPT_PATH_MAX + 16];
        snprintf (lit, sizeof lit, ":(literal)%s", out->skipped [k].path);
        const char *rm [] = { "rm", "-q", "--cached", "--ignore-unmatch", "--", lit, NULL };
        if (s_git (self, rm, NULL) != 0)
            return s_fail (err, errlen, "git rm --cached failed");
    }
    static const char *write_tree [] = { "write-tree", NULL };
    if (s_git_id (self, write_tree, out->tree, sizeof out->tree) != 0)
        return s_fail (err, errlen, "git write-tree failed");
    return 0;
}

//  The paths that differ between the trees `a` and `b`, NUL-separated.
static int
s_changed (s_ctx_t *self, const char *a, const char *b, sb_ckpt_t *out, char *err, size_t errlen)
{
    const char *diff [] = { "diff-tree", "-r", "-z", "--name-only", "--no-renames", a, b, NULL };
    char *list = NULL;
    if (s_git (self, diff, &list) != 0) {
        free (list);
        return s_fail (err, errlen, "git diff-tree failed");
    }
    int rc = 0;
    for (char *p = list; *p; p += strlen (p) + 1) {
        out->changed_total++;
        if (out->nchanged >= SB_CKPT_CHANGED_MAX || strlen (p) > SB_CKPT_PATH_MAX)
            continue;
        if (!out->changed && !(out->changed = calloc (SB_CKPT_CHANGED_MAX, sizeof *out->changed))) {
            rc = s_fail (err, errlen, "out of memory");
            break;
        }
        if (!(out->changed [out->nchanged] = strdup (p))) {
            rc = s_fail (err, errlen, "out of memory");
            break;
        }
        out->nchanged++;
    }
    free (list);
    return rc;
}

static int s_record (s_ctx_t *ctx, const char *ref, const char *message, sb_ckpt_t *out, char *err,
                     size_t errlen);

int
sb_ckpt_take (const char *ws, const char *dir, const char *sid, const char *exclude, int64_t max_file,
              const char *message, sb_ckpt_t *out, char *err, size_t errlen)
{
    memset (out, 0, sizeof *out);
    char ref [128];
    if (sb_ckpt_ref (sid, ref, sizeof ref) != 0)
        return s_fail (err, errlen, "not a valid session id");
    if (exclude && !exclude [0])
        exclude = NULL;
    s_ctx_t *ctx = calloc (1, sizeof *ctx);
    if (!ctx)
        return s_fail (err, errlen, "out of memory");
    int rc = s_open (ctx, ws, dir, sid, err, errlen);
    if (rc == 0) {
        out->shadow = ctx->dir_var [0] != 0;
        rc = s_find_large (ctx, exclude, max_file, out, err, errlen);
    }
    if (rc == 0)
        rc = s_stage (ctx, exclude, out, err, errlen);
    if (ctx->pathspec [0])
        unlink (ctx->pathspec);
    if (rc == 0)
        rc = s_record (ctx, ref, message, out, err, errlen);
    sb_git_overrides_clear (&ctx->ov);
    free (ctx->hashes);
    free (ctx);
    return rc;
}

/*  Commits the tree on the session's chain and lists what changed since
    the chain's last one. */
static int
s_record (s_ctx_t *ctx, const char *ref, const char *message, sb_ckpt_t *out, char *err, size_t errlen)
{
    /* the previous checkpoint: its commit and its tree */
    char fmt [] = "--format=%(objectname) %(tree)";
    const char *head [] = { "for-each-ref", fmt, ref, NULL };
    char *line = NULL, parent [80] = "", prev [80] = "";
    if (s_git (ctx, head, &line) != 0) {
        free (line);
        return s_fail (err, errlen, "git for-each-ref failed");
    }
    if (sscanf (line, "%79[0-9a-f] %79[0-9a-f]", parent, prev) != 2)
        parent [0] = prev [0] = 0;
    free (line);
    out->first = !parent [0];
    if (!out->first && s_changed (ctx, prev, out->tree, out, err, errlen) != 0)
        return -1;

    const char *commit_first [] = { "commit-tree", out->tree, "-m", message, NULL };
    const char *commit_next [] = { "commit-tree", out->tree, "-p", parent, "-m", message, NULL };
    if (s_git_id (ctx, out->first ? commit_first : commit_next, out->commit, sizeof out->commit) != 0)
        return s_fail (err, errlen, "git commit-tree failed");
    /* the old value given: two writers cannot both move the chain */
    const char *update [] = { "update-ref", ref, out->commit, parent, NULL };
    if (s_git (ctx, update, NULL) != 0)
        return s_fail (err, errlen, "git update-ref failed");
    return 0;
}

void
sb_ckpt_clear (sb_ckpt_t *self)
{
    for (size_t k = 0; k < self->nchanged; k++)
        free (self->changed [k]);
    free (self->changed);
    for (size_t k = 0; k < self->nskipped; k++)
        free (self->skipped [k].path);
    free (self->skipped);
    memset (self, 0, sizeof *self);
}

/* ------------------------------------------------------------------ */
/*  Restoring a checkpoint (the rewind) */

#define S_DEPTH_MAX 256         /* folders on one removed path's way, at most */

//  Appends a path to a bounded list: the total always counts.
static int
s_list_add (char ***list, size_t *n, size_t *total, const char *p)
{
    (*total)++;
    if (*n >= SB_CKPT_RESTORE_MAX || strlen (p) > SB_CKPT_PATH_MAX)
        return 0;
    if (!*list && !(*list = calloc (SB_CKPT_RESTORE_MAX, sizeof **list)))
        return -1;
    if (!((*list) [*n] = strdup (p)))
        return -1;
    (*n)++;
    return 0;
}

/*  Unlinks `rel` (relative to the folder wsfd) itself. Every folder on
    the way is opened with O_NOFOLLOW, so a symlink the model planted
    (`dir -> /elsewhere`) stops the walk instead of leading out of the
    workspace; a component `..` or `.` is refused. The folders emptied
    by the removal go too. 0 removed or already gone, -1 refused. */
static int
s_remove_beneath (int wsfd, const char *rel)
{
    char buf [SB_CKPT_PATH_MAX + 1];
    size_t len = strlen (rel);
    if (len == 0 || len > SB_CKPT_PATH_MAX || rel [0] == '/')
        return -1;
    memcpy (buf, rel, len + 1);
    char *comp [S_DEPTH_MAX + 1];
    size_t n = 0;
    for (char *p = buf, *save = NULL, *c = strtok_r (p, "/", &save); c; c = strtok_r (NULL, "/", &save)) {
        if (strcmp (c, "..") == 0 || strcmp (c, ".") == 0 || n >= S_DEPTH_MAX)
            return -1;
        comp [n++] = c;
    }
    if (n == 0)
        return -1;
    int fds [S_DEPTH_MAX + 1];
    fds [0] = wsfd;
    size_t opened = 0, k;
    int rc = 0;
    for (k = 0; k + 1 < n; k++) {
        int fd = openat (fds [k], comp [k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            rc = errno == ENOENT ? 0 : -1;
            break;
        }
        fds [k + 1] = fd;
        opened++;
    }
    if (k + 1 == n) {
        if (unlinkat (fds [k], comp [k], 0) != 0 && errno != ENOENT)
            rc = -1;
        /* the folders it leaves empty, deepest first; one that is not
           empty stops it */
        while (rc == 0 && k > 0 && unlinkat (fds [k - 1], comp [k - 1], AT_REMOVEDIR) == 0)
            k--;
    }
    for (size_t j = 1; j <= opened; j++)
        close (fds [j]);
    return rc;
}

static int
s_cmp_path (const void *a, const void *b)
{
    return strcmp (*(const char *const *) a, *(const char *const *) b);
}

//  Whether a restore may touch path p: a path outside `only` is the
//  person's, and is left as it is (listed in out->left).
static bool
s_wanted (s_ctx_t *ctx, const char *p, sb_ckpt_restore_t *out, int *rc, char *err, size_t errlen)
{
    if (!ctx->only || bsearch (&p, ctx->only, ctx->nonly, sizeof *ctx->only, s_cmp_path))
        return true;
    if (s_list_add (&out->left, &out->nleft, &out->left_total, p) != 0)
        *rc = s_fail (err, errlen, "out of memory");
    return false;
}

static bool
s_kept (const char *const *keep, const char *p)
{
    for (size_t k = 0; keep && keep [k]; k++)
        if (strcmp (keep [k], p) == 0)
            return true;
    return false;
}

//  Removes the paths in `now` and not in `target` (the workspace's own
//  part of them: paths are relative to the repository's top).
static int
s_remove_added (s_ctx_t *ctx, const char *prefix, const char *target, const char *now, const char *const *keep,
                sb_ckpt_restore_t *out, char *err, size_t errlen)
{
    const char *diff [] = { "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--diff-filter=A",
                            target, now, NULL };
    char *list = NULL;
    if (s_git (ctx, diff, &list) != 0) {
        free (list);
        return s_fail (err, errlen, "git diff-tree failed");
    }
    int wsfd = open (ctx->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = wsfd < 0 ? s_fail (err, errlen, "cannot open the workspace") : 0;
    size_t plen = strlen (prefix);
    for (char *p = list; rc == 0 && *p; p += strlen (p) + 1) {
        if (strncmp (p, prefix, plen) != 0 || s_kept (keep, p) || !s_wanted (ctx, p, out, &rc, err, errlen))
            continue;
        bool gone = s_remove_beneath (wsfd, p + plen) == 0;
        if (gone ? s_list_add (&out->removed, &out->nremoved, &out->removed_total, p)
                 : s_list_add (&out->refused, &out->nrefused, &out->refused_total, p))
            rc = s_fail (err, errlen, "out of memory");
    }
    if (wsfd >= 0)
        close (wsfd);
    free (list);
    return rc;
}

//  The workspace's folder below its repository's top ("" at the top, else
//  ending in '/'), as git names paths in trees.
static int
s_prefix (s_ctx_t *ctx, char *prefix, size_t n, char *err, size_t errlen)
{
    static const char *show [] = { "rev-parse", "--show-prefix", NULL };
    char *p = NULL;
    int rc = 0;
    prefix [0] = 0;
    if (s_git (ctx, show, &p) != 0 || strlen (p) > SB_CKPT_PATH_MAX || strlen (p) >= n)
        rc = s_fail (err, errlen, "git rev-parse failed");
    else {
        p [strcspn (p, "\n")] = 0;
        snprintf (prefix, n, "%s", p);
    }
    free (p);
    return rc;
}

int
sb_ckpt_restore (const char *ws, const char *dir, const char *sid, const char *target, const char *now,
                 const char *const *keep, const char **only, sb_ckpt_restore_t *out, char *err, size_t errlen)
{
    memset (out, 0, sizeof *out);
    char ref [128];
    if (sb_ckpt_ref (sid, ref, sizeof ref) != 0)
        return s_fail (err, errlen, "not a valid session id");
    size_t tl = target ? strlen (target) : 0, nl = now ? strlen (now) : 0;
    if ((tl != 40 && tl != 64) || strspn (target, "0123456789abcdef") != tl
    ||  (nl != 40 && nl != 64) || strspn (now, "0123456789abcdef") != nl)
        return s_fail (err, errlen, "not a tree id");
    s_ctx_t *ctx = calloc (1, sizeof *ctx);
    if (!ctx)
        return s_fail (err, errlen, "out of memory");
    int rc = s_open (ctx, ws, dir, sid, err, errlen);
    if (only) {
        while (only [ctx->nonly])
            ctx->nonly++;
        qsort (only, ctx->nonly, sizeof *only, s_cmp_path);
        ctx->only = only;
    }
    char prefix [SB_CKPT_PATH_MAX + 2] = "";
    if (rc == 0 && !ctx->dir_var [0])
        rc = s_prefix (ctx, prefix, sizeof prefix, err, errlen);
    const char *cat [] = { "cat-file", "-e", target, NULL };
    if (rc == 0 && s_git (ctx, cat, NULL) != 0)
        rc = s_fail (err, errlen, "the checkpoint's tree is gone from the object store");
    /* what comes back: changed or deleted since the target */
    const char *diff [] = { "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--diff-filter=DMT",
                            target, now, NULL };
    char *list = NULL;
    if (rc == 0 && s_git (ctx, diff, &list) != 0)
        rc = s_fail (err, errlen, "git diff-tree failed");
    /* those paths, within the workspace, as a pathspec file: only they
       are written back, every other file holds the target's content
       already (and keeps its stat data in the private index, so the
       checkpoint after costs what any does) */
    size_t plen = strlen (prefix);
    snprintf (ctx->pathspec, sizeof ctx->pathspec, "%s.restore", ctx->index);
    FILE *spec = rc == 0 ? fopen (ctx->pathspec, "we") : NULL;
    if (rc == 0 && !spec)
        rc = s_fail (err, errlen, "cannot write the pathspec file");
    for (char *p = list; rc == 0 && *p; p += strlen (p) + 1) {
        if (strncmp (p, prefix, plen) != 0 || !s_wanted (ctx, p, out, &rc, err, errlen))
            continue;
        if (s_list_add (&out->restored, &out->nrestored, &out->restored_total, p) != 0)
            rc = s_fail (err, errlen, "out of memory");
        else
        if (!s_spec (spec, ":(top,literal)", p))
            rc = s_fail (err, errlen, "cannot write the pathspec file");
    }
    free (list);
    if (spec && fclose (spec) != 0 && rc == 0)
        rc = s_fail (err, errlen, "cannot write the pathspec file");
    if (rc == 0)
        rc = s_remove_added (ctx, prefix, target, now, keep, out, err, errlen);
    /* the target's version of each, into the private index and the work
       tree (git checkout TREE -- PATHS: it adds and updates, removes
       nothing; the removals were made above) */
    char from [4400];
    snprintf (from, sizeof from, "--pathspec-from-file=%s", ctx->pathspec);
    const char *checkout [] = { "checkout", "-q", "-f", target, from, "--pathspec-file-nul", NULL };
    if (rc == 0 && out->restored_total && s_git (ctx, checkout, NULL) != 0)
        rc = s_fail (err, errlen, "git checkout of the target's files failed");
    if (ctx->pathspec [0])
        unlink (ctx->pathspec);
    sb_git_overrides_clear (&ctx->ov);
    free (ctx->hashes);
    free (ctx);
    return rc;
}

void
sb_ckpt_restore_clear (sb_ckpt_restore_t *self)
{
    for (size_t k = 0; k < self->nrestored; k++)
        free (self->restored [k]);
    free (self->restored);
    for (size_t k = 0; k < self->nremoved; k++)
        free (self->removed [k]);
    free (self->removed);
    for (size_t k = 0; k < self->nrefused; k++)
        free (self->refused [k]);
    free (self->refused);
    for (size_t k = 0; k < self->nleft; k++)
        free (self->left [k]);
    free (self->left);
    memset (self, 0, sizeof *self);
}

/* ------------------------------------------------------------------ */
/*  The diff between two checkpoints */

static bool
s_tree_id (const char *id)
{
    size_t n = id ? strlen (id) : 0;
    return (n == 40 || n == 64) && strspn (id, "0123456789abcdef") == n;
}

int
sb_ckpt_diff (const char *ws, const char *dir, const char *sid, bool shadow, const char *from, const char *to,
              char **numstat, char **diff, char *err, size_t errlen)
{
    *numstat = *diff = NULL;
    char ref [128], repo [4300], dir_var [4400];
    if (sb_ckpt_ref (sid, ref, sizeof ref) != 0)
        return s_fail (err, errlen, "not a session id");
    if (!s_tree_id (from) || !s_tree_id (to))
        return s_fail (err, errlen, "a checkpoint entry names no valid tree");
    s_ctx_t ctx = { .ws = ws, .vars = { NULL } };
    if (shadow) {
        if (!dir)
            return s_fail (err, errlen, "a shadow repository needs the data folder (a worker has none)");
        snprintf (repo, sizeof repo, "%s/%s.git", dir, sid);
        snprintf (dir_var, sizeof dir_var, "GIT_DIR=%s", repo);
        ctx.ws = dir;
        ctx.vars [0] = dir_var;
        ctx.vars [1] = NULL;
    }
    int rc = 0;
    const char *trees [] = { from, to };
    for (size_t k = 0; k < 2 && rc == 0; k++) {
        char spec [96];
        snprintf (spec, sizeof spec, "%s^{tree}", trees [k]);
        const char *exists [] = { "cat-file", "-e", spec, NULL };
        if (s_git (&ctx, exists, NULL) != 0) {
            snprintf (err, errlen, "tree %s is not in the %s's object store (pruned, or taken on a worker)",
                      trees [k], shadow ? "shadow repository" : "workspace repository");
            rc = -2;
        }
    }
    const char *ns [] = { "diff", "--numstat", "-z", "-M", from, to, NULL };
    const char *df [] = { "diff", "--no-color", "--no-ext-diff", "-M", from, to, NULL };
    if (rc == 0 && s_git (&ctx, ns, numstat) != 0)
        rc = s_fail (err, errlen, "git diff failed");
    if (rc == 0 && s_git (&ctx, df, diff) != 0) {
        free (*diff);
        *diff = NULL;           /* over SB_GIT_OUT_MAX: the files without their text */
    }
    sb_git_overrides_clear (&ctx.ov);
    if (rc != 0) {
        free (*numstat);
        *numstat = NULL;
    }
    return rc;
}

/* ------------------------------------------------------------------ */
/*  A checkpoint made into a new work tree (a fork's --workspace) */

//  Whether `dest` is absent or an empty folder: a fork never writes
//  over anything a person has.
static bool
s_dest_free (const char *dest)
{
    struct stat st;
    if (lstat (dest, &st) != 0)
        return errno == ENOENT;
    if (!S_ISDIR (st.st_mode))
        return false;
    int fd = open (dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0)
        return false;
    DIR *d = fdopendir (fd);
    if (!d) {
        close (fd);
        return false;
    }
    bool empty = true;
    struct dirent *e;
    while (empty && (e = readdir (d)))
        empty = strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0;
    closedir (d);
    return empty;
}

int
sb_ckpt_materialize (const char *ws, const char *dir, const char *sid, const char *commit, const char *tree,
                     const char *dest, char *out_ws, size_t n, char *err, size_t errlen)
{
    size_t cl = commit ? strlen (commit) : 0, tl = tree ? strlen (tree) : 0;
    if ((cl != 40 && cl != 64) || strspn (commit, "0123456789abcdef") != cl
    ||  (tl != 40 && tl != 64) || strspn (tree, "0123456789abcdef") != tl)
        return s_fail (err, errlen, "the checkpoint names no commit and tree");
    if (!dest || dest [0] != '/' || strlen (dest) > SB_CKPT_PATH_MAX)
        return s_fail (err, errlen, "the new workspace must be an absolute path");
    if (!s_dest_free (dest))
        return s_fail (err, errlen, "the new workspace exists and is not an empty folder");
    s_ctx_t *ctx = calloc (1, sizeof *ctx);
    if (!ctx)
        return s_fail (err, errlen, "out of memory");
    int rc = s_open (ctx, ws, dir, sid, err, errlen);
    if (rc == 0 && !ctx->dir_var [0]) {
        //  Inside git: a worktree of the same repository, detached at the
        //  checkpoint's commit, whose tree is the work tree as recorded
        //  (untracked files included). A workspace below the top of the
        //  repository is the same folder below the new worktree's top.
        char p [SB_CKPT_PATH_MAX + 2];
        rc = s_prefix (ctx, p, sizeof p, err, errlen);
        int w = snprintf (out_ws, n, "%s%s%s", dest, *p ? "/" : "", p);
        if (rc == 0 && (w <= 0 || (size_t) w >= n))
            rc = s_fail (err, errlen, "the new workspace's path is too long");
        size_t len = strlen (out_ws);
        if (rc == 0 && len > 1 && out_ws [len - 1] == '/')
            out_ws [len - 1] = 0;
        /* the person's own index is not used: worktree add checks out
           into the new worktree's own */
        const char *vars [SB_GIT_ENV_MAX + 1] = { NULL };
        for (size_t k = 0, j = 0; ctx->vars [k]; k++)
            if (strncmp (ctx->vars [k], "GIT_INDEX_FILE=", 15) != 0)
                vars [j++] = ctx->vars [k];
        const char *add [] = { "worktree", "add", "-q", "--detach", dest, commit, NULL };
        if (rc == 0 && sb_git_run_cached (&ctx->ov, ws, vars, add, NULL) != 0)
            rc = s_fail (err, errlen, "git worktree add failed");
    }
    else
    if (rc == 0) {
        //  Outside git: the checkpoint's files are written into dest from
        //  the shadow repository through an index of their own, removed
        //  after; dest gets no .git.
        if (mkdir (dest, 0755) != 0 && errno != EEXIST)
            rc = s_fail (err, errlen, "cannot make the new workspace");
        int w = snprintf (out_ws, n, "%s", dest);
        if (rc == 0 && (w <= 0 || (size_t) w >= n))
            rc = s_fail (err, errlen, "the new workspace's path is too long");
        char index [4300], index_var [4400], tree_var [4400];
        snprintf (index, sizeof index, "%s.fork-%ld", ctx->index, (long) getpid ());
        snprintf (index_var, sizeof index_var, "GIT_INDEX_FILE=%s", index);
        snprintf (tree_var, sizeof tree_var, "GIT_WORK_TREE=%s", dest);
        const char *vars [SB_GIT_ENV_MAX + 1] = { index_var, ctx->dir_var, tree_var, NULL };
        const char *read [] = { "read-tree", tree, NULL };
        const char *checkout [] = { "checkout-index", "-a", "-f", NULL };
        if (rc == 0 && sb_git_run_cached (&ctx->ov, dest, vars, read, NULL) != 0)
            rc = s_fail (err, errlen, "git read-tree failed (is the checkpoint's tree gone?)");
        if (rc == 0 && sb_git_run_cached (&ctx->ov, dest, vars, checkout, NULL) != 0)
            rc = s_fail (err, errlen, "git checkout-index failed");
        unlink (index);
    }
    sb_git_overrides_clear (&ctx->ov);
    free (ctx->hashes);
    free (ctx);
    return rc;
}

static int
s_unlink_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st, (void) ftw;
    return flag == FTW_DP ? rmdir (path) : unlink (path);
}

int
sb_ckpt_forget (const char *ws, const char *dir, const char *sid)
{
    char ref [128];
    if (sb_ckpt_ref (sid, ref, sizeof ref) != 0)
        return -1;
    int rc = 0;
    //  The ref, in the workspace's repository: its trees become
    //  unreachable and git gc prunes them in time.
    if (ws) {
        static const char *inside [] = { "rev-parse", "--is-inside-work-tree", NULL };
        char *out = NULL;
        bool git = sb_git_run_env (ws, NULL, inside, &out) == 0 && strncmp (out, "true", 4) == 0;
        free (out);
        const char *del [] = { "update-ref", "-d", ref, NULL };
        if (git && sb_git_run_env (ws, NULL, del, NULL) != 0)
            rc = -1;
        //  A worker's private index is in the git dir.
        char rel [128];
        snprintf (rel, sizeof rel, "switchboard/checkpoints-%s.index", sid);
        const char *path [] = { "rev-parse", "--git-path", rel, NULL };
        out = NULL;
        if (git && sb_git_run_env (ws, NULL, path, &out) == 0) {
            out [strcspn (out, "\n")] = 0;
            char file [8400];
            snprintf (file, sizeof file, out [0] == '/' ? "%s%s" : "%s/%s", out [0] == '/' ? "" : ws, out);
            unlink (file);
            strncat (file, ".hashes", sizeof file - strlen (file) - 1);
            unlink (file);
        }
        free (out);
    }
    //  The private index, its hashes and the shadow repository under DATA.
    if (dir) {
        char path [4400];
        const char *tails [] = { ".index", ".index.hashes", ".index.lock" };
        for (size_t k = 0; k < sizeof tails / sizeof tails [0]; k++) {
            snprintf (path, sizeof path, "%s/%s%s", dir, sid, tails [k]);
            if (unlink (path) != 0 && errno != ENOENT)
                rc = -1;
        }
        snprintf (path, sizeof path, "%s/%s.git", dir, sid);
        struct stat st;
        if (lstat (path, &st) == 0 && nftw (path, s_unlink_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
            rc = -1;
    }
    return rc;
}

int
sb_ckpt_seed (const char *ws, const char *dir, const char *from_sid, const char *sid, const char *commit,
              bool shadow, char *err, size_t errlen)
{
    char ref [128], from [128];
    size_t cl = commit ? strlen (commit) : 0;
    if (sb_ckpt_ref (sid, ref, sizeof ref) != 0 || sb_ckpt_ref (from_sid, from, sizeof from) != 0)
        return s_fail (err, errlen, "not a valid session id");
    if ((cl != 40 && cl != 64) || strspn (commit, "0123456789abcdef") != cl)
        return s_fail (err, errlen, "not a commit id");
    if (!shadow) {
        //  One object store: the new ref is enough to keep the trees.
        const char *upd [] = { "update-ref", ref, commit, "", NULL };
        return sb_git_run_env (ws, NULL, upd, NULL) == 0 ? 0 : s_fail (err, errlen, "git update-ref failed");
    }
    if (!dir)
        return s_fail (err, errlen, "no data folder for a shadow repository");
    //  Outside git each session has a shadow repository of its own: the
    //  source's chain is fetched into the new one (git copies its
    //  objects), and the new ref set to the commit.
    char repo [4200], src [4200], git_dir [4300], spec [300];
    snprintf (repo, sizeof repo, "%s/%s.git", dir, sid);
    snprintf (src, sizeof src, "%s/%s.git", dir, from_sid);
    snprintf (git_dir, sizeof git_dir, "GIT_DIR=%s", repo);
    snprintf (spec, sizeof spec, "%s:%s", from, ref);
    const char *vars [] = { git_dir, NULL };
    const char *init [] = { "init", "-q", "--bare", repo, NULL };
    const char *fetch [] = { "fetch", "-q", "--no-tags", src, spec, NULL };
    const char *upd [] = { "update-ref", ref, commit, NULL };
    if (sb_git_run_env (dir, NULL, init, NULL) != 0)
        return s_fail (err, errlen, "cannot make the shadow repository");
    if (sb_git_run_env (dir, vars, fetch, NULL) != 0)
        return s_fail (err, errlen, "git fetch from the source's shadow repository failed");
    if (sb_git_run_env (dir, vars, upd, NULL) != 0)
        return s_fail (err, errlen, "git update-ref failed");
    return 0;
}

int
sb_ckpt_find (const char *ws, const char *dir, const char *sid, const char *message, char *tree, size_t n)
{
    char ref [128];
    tree [0] = 0;
    if (sb_ckpt_ref (sid, ref, sizeof ref) != 0 || !message || strchr (message, '\n'))
        return -1;
    s_ctx_t *ctx = calloc (1, sizeof *ctx);
    if (!ctx)
        return -1;
    char err [256], grep [400];
    snprintf (grep, sizeof grep, "--grep=%s", message);
    int rc = s_open (ctx, ws, dir, sid, err, sizeof err);
    //  The newest commit of the chain whose message holds it (a fixed
    //  string): a rewind run looks for its own.
    const char *args [] = { "log", "-F", grep, "--format=%T", "-n", "1", ref, NULL };
    char *out = NULL;
    if (rc == 0)
        rc = s_git (ctx, args, &out) == 0 ? 0 : -1;
    if (rc == 0) {
        out [strcspn (out, "\n")] = 0;
        size_t len = strlen (out);
        if ((len == 40 || len == 64) && strspn (out, "0123456789abcdef") == len && len < n)
            memcpy (tree, out, len + 1);
        else
            rc = -1;
    }
    free (out);
    sb_git_overrides_clear (&ctx->ov);
    free (ctx->hashes);
    free (ctx);
    return rc;
}

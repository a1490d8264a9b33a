/*  cli/changes.c — see changes.h. Runs on the CLI's main thread; git is
    started with posix_spawn because the embedded server's threads are
    running (a fork would copy their locks). */
#include "cli/changes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define GIT_OUT_MAX     (64u << 20)     /* bytes read from one git command */
#define WALK_MAX_FILES  20000           /* outside git: files in a snapshot */
#define WALK_MAX_DEPTH  64
#define SHOW_MAX        100             /* lines printed, then "… and N more" */
#define BAR_WIDTH       40              /* the +/- bar of a stat line */
/*  Staging writes a blob for each untracked file: past these, a work tree
    (a home folder under a dotfiles repo) is listed as outside git instead. */
#define GIT_UNTRACKED_MAX_FILES  5000
#define GIT_UNTRACKED_MAX_BYTES  (256ll << 20)

typedef struct {
    char *path;                 /* relative to the workspace */
    off_t size;
    struct timespec mtime;
} file_t;

typedef struct {
    const char *skip;           /* a path not to list (the data folder) */
    file_t *files;
    size_t n, cap;
    bool overflow;              /* more than WALK_MAX_FILES: not compared */
} listing_t;

struct sb_changes {
    char workspace [4096];
    char exclude [4200];        /* ":(exclude)DATA" when the data folder is inside */
    char skip [4096];           /* the same, relative, for the walk outside git */
    bool git;
    char tmpdir [64];           /* holds the temporary index */
    char index [128];
    char tree [64];             /* the work tree before the run */
    listing_t before;
};

/* ------------------------------------------------------------------ */
/*  git */

/*  Runs `git -C WS ARGS...` with GIT_INDEX_FILE=index when index is set.
    Its stdout goes to *out (NUL-terminated, caller frees), stderr to
    /dev/null. Returns git's exit status, or -1. */
static int
s_git (const char *ws, const char *index, const char *const *args, char **out)
{
    const char *argv [24] = { "git", "-C", ws };
    int argc = 3;
    for (int k = 0; args [k] && argc < 23; k++)
        argv [argc++] = args [k];
    argv [argc] = NULL;

    size_t nenv = 0;
    while (environ [nenv])
        nenv++;
    char **envp = calloc (nenv + 2, sizeof *envp);
    char index_var [160];
    if (!envp)
        return -1;
    size_t w = 0;
    for (size_t k = 0; k < nenv; k++)
        if (strncmp (environ [k], "GIT_INDEX_FILE=", 15) != 0)
            envp [w++] = environ [k];
    if (index) {
        snprintf (index_var, sizeof index_var, "GIT_INDEX_FILE=%s", index);
        envp [w++] = index_var;
    }
    envp [w] = NULL;

    int pipefd [2];
    if (pipe2 (pipefd, O_CLOEXEC) != 0) {
        free (envp);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_adddup2 (&fa, pipefd [1], 1);
    posix_spawn_file_actions_addopen (&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
    /* the caller blocks SIGINT to take it with sigtimedwait; git must not
       inherit that */
    posix_spawnattr_t attr;
    posix_spawnattr_init (&attr);
    sigset_t none;
    sigemptyset (&none);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int rc = posix_spawnp (&pid, "git", &fa, &attr, (char *const *) argv, envp);
    posix_spawn_file_actions_destroy (&fa);
    posix_spawnattr_destroy (&attr);
    free (envp);
    close (pipefd [1]);
    if (rc != 0) {
        close (pipefd [0]);
        return -1;
    }
    size_t len = 0, cap = 4096;
    char *buf = malloc (cap);
    while (buf) {
        if (len + 1 == cap) {
            char *nb = cap < GIT_OUT_MAX ? realloc (buf, cap * 2) : NULL;
            if (!nb) {
                free (buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read (pipefd [0], buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t) r;
    }
    close (pipefd [0]);
    int status;
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!buf)
        return -1;
    buf [len] = 0;
    if (out)
        *out = buf;
    else
        free (buf);
    return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/*  Stages the work tree (under the workspace) into the temporary index and
    writes it as a tree: the state of the files, pre-existing edits and
    untracked files included, without touching the real index. */
static int
s_git_tree (sb_changes_t *self, char *tree, size_t n)
{
    const char *add [] = { "add", "-A", "--", ".", self->exclude [0] ? self->exclude : NULL, NULL };
    static const char *write_tree [] = { "write-tree", NULL };
    char *out = NULL;
    if (s_git (self->workspace, self->index, add, NULL) != 0
    ||  s_git (self->workspace, self->index, write_tree, &out) != 0) {
        free (out);
        return -1;
    }
    out [strcspn (out, "\n")] = 0;
    snprintf (tree, n, "%s", out);
    free (out);
    return tree [0] ? 0 : -1;
}

static int
s_copy (const char *from, const char *to)
{
    int in = open (from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return errno == ENOENT ? 0 : -1;    /* no index yet: git makes one */
    int outfd = open (to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = outfd < 0 ? -1 : 0;
    char buf [65536];
    ssize_t r;
    while (rc == 0 && (r = read (in, buf, sizeof buf)) > 0)
        if (write (outfd, buf, (size_t) r) != r)
            rc = -1;
    close (in);
    if (outfd >= 0)
        close (outfd);
    return rc;
}

/*  True when staging the untracked files would hash more than the caps. */
static bool
s_git_too_big (sb_changes_t *self)
{
    const char *others [] = { "ls-files", "--others", "--exclude-standard", "-z", "--", ".",
                              self->exclude [0] ? self->exclude : NULL, NULL };
    char *out = NULL;
    if (s_git (self->workspace, NULL, others, &out) != 0) {
        free (out);
        return true;
    }
    int dir = open (self->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t files = 0;
    long long bytes = 0;
    for (char *p = out; *p && dir >= 0; p += strlen (p) + 1) {
        struct stat st;
        if (fstatat (dir, p, &st, AT_SYMLINK_NOFOLLOW) == 0)
            bytes += st.st_size;
        if (++files > GIT_UNTRACKED_MAX_FILES || bytes > GIT_UNTRACKED_MAX_BYTES)
            break;
    }
    if (dir >= 0)
        close (dir);
    free (out);
    return dir < 0 || files > GIT_UNTRACKED_MAX_FILES || bytes > GIT_UNTRACKED_MAX_BYTES;
}

static int
s_git_snapshot (sb_changes_t *self)
{
    static const char *inside [] = { "rev-parse", "--is-inside-work-tree", NULL };
    static const char *index_path [] = { "rev-parse", "--git-path", "index", NULL };
    char *out = NULL;
    if (s_git (self->workspace, NULL, inside, &out) != 0 || strncmp (out, "true", 4) != 0) {
        free (out);
        return -1;
    }
    free (out);
    out = NULL;
    if (s_git_too_big (self))
        return -1;
    if (s_git (self->workspace, NULL, index_path, &out) != 0) {
        free (out);
        return -1;
    }
    out [strcspn (out, "\n")] = 0;
    char real [8192];
    if (out [0] == '/')
        snprintf (real, sizeof real, "%s", out);
    else
        snprintf (real, sizeof real, "%s/%s", self->workspace, out);
    free (out);
    /* a copy of the real index keeps its stat cache, so only changed
       files are hashed */
    snprintf (self->tmpdir, sizeof self->tmpdir, "/tmp/switchboard-changes-XXXXXX");
    if (!mkdtemp (self->tmpdir)) {
        self->tmpdir [0] = 0;
        return -1;
    }
    snprintf (self->index, sizeof self->index, "%s/index", self->tmpdir);
    if (s_copy (real, self->index) != 0 || s_git_tree (self, self->tree, sizeof self->tree) != 0)
        return -1;
    self->git = true;
    return 0;
}

/*  " name | 12 ++++----", the width of git diff --stat. */
static void
s_git_print (sb_changes_t *self, FILE *f)
{
    char after [64];
    if (s_git_tree (self, after, sizeof after) != 0) {
        fprintf (f, "cannot compare the workspace with its state before the run (git failed)\n");
        return;
    }
    const char *diff [] = { "diff", "--numstat", "-z", "--no-renames", "--relative", self->tree, after,
                            "--", ".", NULL };
    char *out = NULL;
    if (s_git (self->workspace, NULL, diff, &out) != 0) {
        free (out);
        fprintf (f, "cannot compare the workspace with its state before the run (git diff failed)\n");
        return;
    }
    /* records: "ADDED\tREMOVED\tPATH\0", "-\t-\tPATH\0" for binary files */
    size_t files = 0, name_w = 0, max_change = 0, num_w = 1;
    bool binary = false;
    unsigned long long ins = 0, del = 0;
    for (char *p = out; *p; p += strlen (p) + 1) {
        char *path = strchr (p, '\t') ? strchr (strchr (p, '\t') + 1, '\t') : NULL;
        if (!path)
            break;
        size_t plen = strlen (path + 1);
        name_w = plen > name_w ? plen : name_w;
        unsigned long long a = strtoull (p, NULL, 10), d = strtoull (strchr (p, '\t') + 1, NULL, 10);
        binary |= p [0] == '-';
        max_change = a + d > max_change ? a + d : max_change;
        ins += a;
        del += d;
        files++;
    }
    if (files == 0) {
        fprintf (f, "no changes in the workspace\n");
        free (out);
        return;
    }
    for (size_t m = max_change; m >= 10; m /= 10)
        num_w++;
    if (binary && num_w < 3)
        num_w = 3;              /* "Bin" */
    name_w = name_w > 50 ? 50 : name_w;
    fprintf (f, "changed in the workspace:\n");
    size_t shown = 0;
    for (char *p = out; *p && shown < SHOW_MAX; p += strlen (p) + 1, shown++) {
        char *tab1 = strchr (p, '\t'), *tab2 = tab1 ? strchr (tab1 + 1, '\t') : NULL;
        if (!tab2)
            break;
        const char *name = tab2 + 1;
        size_t nlen = strlen (name);
        char shown_name [64];
        if (nlen > name_w)
            snprintf (shown_name, sizeof shown_name, "...%s", name + nlen - (name_w - 3));
        else
            snprintf (shown_name, sizeof shown_name, "%s", name);
        if (p [0] == '-') {
            fprintf (f, " %-*s | %*s\n", (int) name_w, shown_name, (int) num_w, "Bin");
            continue;
        }
        unsigned long long a = strtoull (p, NULL, 10), d = strtoull (tab1 + 1, NULL, 10);
        size_t pa = a, pd = d;
        if (max_change > BAR_WIDTH) {
            pa = a ? (size_t) ((a * BAR_WIDTH + max_change - 1) / max_change) : 0;
            pd = d ? (size_t) ((d * BAR_WIDTH + max_change - 1) / max_change) : 0;
        }
        fprintf (f, " %-*s | %*llu ", (int) name_w, shown_name, (int) num_w, a + d);
        for (size_t k = 0; k < pa; k++)
            fputc ('+', f);
        for (size_t k = 0; k < pd; k++)
            fputc ('-', f);
        fputc ('\n', f);
    }
    if (files > shown)
        fprintf (f, " … and %zu more\n", files - shown);
    fprintf (f, " %zu file%s changed", files, files == 1 ? "" : "s");
    if (ins || del == 0)
        fprintf (f, ", %llu insertion%s(+)", ins, ins == 1 ? "" : "s");
    if (del || ins == 0)
        fprintf (f, ", %llu deletion%s(-)", del, del == 1 ? "" : "s");
    fputc ('\n', f);
    free (out);
}

/* ------------------------------------------------------------------ */
/*  Outside git: paths, sizes and modification times */

static void
s_listing_clear (listing_t *l)
{
    for (size_t k = 0; k < l->n; k++)
        free (l->files [k].path);
    free (l->files);
    memset (l, 0, sizeof *l);
}

static int
s_listing_add (listing_t *l, const char *path, const struct stat *st)
{
    if (l->n == WALK_MAX_FILES) {
        l->overflow = true;
        return -1;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        file_t *nf = realloc (l->files, cap * sizeof *nf);
        if (!nf)
            return -1;
        l->files = nf;
        l->cap = cap;
    }
    char *p = strdup (path);
    if (!p)
        return -1;
    l->files [l->n++] = (file_t) { p, st->st_size, st->st_mtim };
    return 0;
}

/*  Walks dir (rel: its path under the workspace, "" at the top) without
    following symbolic links. Returns -1 once the listing is full. */
static int
s_walk (listing_t *l, int fd_dir, const char *rel, int depth)
{
    DIR *d = fdopendir (fd_dir);
    if (!d) {
        close (fd_dir);
        return 0;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir (d))) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
        char path [4096];
        if (snprintf (path, sizeof path, "%s%s%s", rel, rel [0] ? "/" : "", de->d_name) >= (int) sizeof path)
            continue;
        struct stat st;
        if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (l->skip && strcmp (path, l->skip) == 0)
            continue;
        if (S_ISDIR (st.st_mode)) {
            if (depth >= WALK_MAX_DEPTH)
                continue;
            int fd = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0)
                rc = s_walk (l, fd, path, depth + 1);
        }
        else
            rc = s_listing_add (l, path, &st);
    }
    closedir (d);
    return rc;
}

static int
s_by_path (const void *a, const void *b)
{
    return strcmp (((const file_t *) a)->path, ((const file_t *) b)->path);
}

static void
s_list (const char *workspace, const char *skip, listing_t *l)
{
    l->skip = skip [0] ? skip : NULL;
    int fd = open (workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        s_walk (l, fd, "", 0);
    if (l->n)
        qsort (l->files, l->n, sizeof l->files [0], s_by_path);
}

static void
s_files_print (sb_changes_t *self, FILE *f)
{
    listing_t now = { 0 };
    s_list (self->workspace, self->skip, &now);
    if (self->before.overflow || now.overflow) {
        fprintf (f, "the workspace holds more than %d files: changes are not listed\n", WALK_MAX_FILES);
        s_listing_clear (&now);
        return;
    }
    size_t i = 0, j = 0, created = 0, modified = 0, deleted = 0, shown = 0;
    const listing_t *b = &self->before;
    while (i < b->n || j < now.n) {
        int cmp = i == b->n ? 1 : j == now.n ? -1 : strcmp (b->files [i].path, now.files [j].path);
        const char *what = NULL, *path = NULL;
        if (cmp < 0) {
            what = "deleted ";
            path = b->files [i++].path;
            deleted++;
        }
        else
        if (cmp > 0) {
            what = "created ";
            path = now.files [j++].path;
            created++;
        }
        else {
            const file_t *x = &b->files [i++], *y = &now.files [j++];
            if (x->size != y->size || x->mtime.tv_sec != y->mtime.tv_sec || x->mtime.tv_nsec != y->mtime.tv_nsec) {
                what = "modified";
                path = y->path;
                modified++;
            }
        }
        if (!what)
            continue;
        if (shown == 0)
            fprintf (f, "changed in the workspace (not a git work tree):\n");
        if (shown++ < SHOW_MAX)
            fprintf (f, " %s  %s\n", what, path);
    }
    if (shown == 0)
        fprintf (f, "no changes in the workspace\n");
    else {
        if (shown > SHOW_MAX)
            fprintf (f, " … and %zu more\n", shown - SHOW_MAX);
        fprintf (f, " %zu file%s changed: %zu created, %zu modified, %zu deleted\n", shown, shown == 1 ? "" : "s",
                 created, modified, deleted);
    }
    s_listing_clear (&now);
}

/* ------------------------------------------------------------------ */

sb_changes_t *
sb_changes_new (const char *workspace, const char *data_dir)
{
    sb_changes_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    snprintf (self->workspace, sizeof self->workspace, "%s", workspace);
    /* the server's own files are not the run's changes */
    size_t wl = strlen (workspace);
    if (data_dir && strncmp (data_dir, workspace, wl) == 0 && data_dir [wl] == '/' && data_dir [wl + 1]) {
        snprintf (self->skip, sizeof self->skip, "%s", data_dir + wl + 1);
        snprintf (self->exclude, sizeof self->exclude, ":(exclude)%s", self->skip);
    }
    if (s_git_snapshot (self) != 0) {
        self->git = false;
        s_list (workspace, self->skip, &self->before);
    }
    return self;
}

void
sb_changes_destroy (sb_changes_t **self_p)
{
    sb_changes_t *self = *self_p;
    if (!self)
        return;
    s_listing_clear (&self->before);
    if (self->tmpdir [0]) {
        char lock [160];
        snprintf (lock, sizeof lock, "%s.lock", self->index);
        unlink (lock);
        unlink (self->index);
        rmdir (self->tmpdir);
    }
    free (self);
    *self_p = NULL;
}

void
sb_changes_print (sb_changes_t *self, FILE *f)
{
    if (self->git)
        s_git_print (self, f);
    else
        s_files_print (self, f);
    fflush (f);
}

/*  cli/changes.c — see changes.h. Runs on the CLI's main thread; git is
    started with posix_spawn because the embedded server's threads are
    running (a fork would copy their locks). */
#include "cli/changes.h"
#include "common/git.h"

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

#define WALK_MAX_FILES  20000           /* outside git: files in a snapshot */
#define WALK_MAX_DEPTH  64
#define SHOW_MAX        100             /* lines printed, then "… and N more" */
#define BAR_WIDTH       40              /* the +/- bar of a stat line */

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
    sb_git_stage_t stage;       /* the temporary index */
    char tree [64];             /* the work tree before the run */
    listing_t before;
};

/* ------------------------------------------------------------------ */
/*  git */

/*  The snapshot: the stage's tree before the run. */
static int
s_git_snapshot (sb_changes_t *self)
{
    if (sb_git_stage_open (&self->stage, self->workspace, self->exclude) != 0
    ||  sb_git_stage_tree (&self->stage, self->tree, sizeof self->tree) != 0)
        return -1;
    self->git = true;
    return 0;
}

/*  " name | 12 ++++----", the width of git diff --stat. */
static void
s_git_print (sb_changes_t *self, FILE *f)
{
    char after [64];
    if (sb_git_stage_tree (&self->stage, after, sizeof after) != 0) {
        fprintf (f, "cannot compare the workspace with its state before the run (git failed)\n");
        return;
    }
    const char *diff [] = { "diff", "--numstat", "-z", "--no-renames", "--relative", self->tree, after,
                            "--", ".", NULL };
    char *out = NULL;
    if (sb_git_run (self->workspace, NULL, diff, &out) != 0) {
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
        sb_git_stage_close (&self->stage);
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
    sb_git_stage_close (&self->stage);
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

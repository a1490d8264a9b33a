/*  common/git.c — see git.h. git is started with posix_spawn because the
    server's threads are running (a fork would copy their locks). */
#include "common/git.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ------------------------------------------------------------------ */
/*  Running no program the repository names: the work tree is the model's
    to write, its .git included, and git's config names programs in many
    places (filter drivers run by `git add`, core.fsmonitor run by any
    index refresh, textconv by diff, hooks). Every git started here first
    lists the config git will read and overrides each such key on the
    command line, which takes precedence over every config file; the
    read-only git tools do the same (actors/exec/tools_git.c). */

//  Keys that name a program, as git lists them (section and name lower
//  case), and the value that makes each run nothing. A NULL section
//  matches any section; a NULL name any name.
static const struct {
    const char *section, *name, *value;
} s_neutral [] = {
    { "filter", "clean", "" },
    { "filter", "smudge", "" },
    { "filter", "process", "" },
    { "filter", "required", "false" },
    { "diff", "textconv", "" },
    { "diff", "command", "" },
    { "diff", "external", "" },
    { "core", "fsmonitor", "false" },
    { "core", "hookspath", "/dev/null" },
    { "core", "pager", "cat" },
    { "core", "editor", ":" },
    { "core", "sshcommand", "" },
    { "core", "gitproxy", "" },
    { "core", "askpass", "" },
    { "core", "alternaterefscommand", "" },
    { "sequence", "editor", ":" },
    { "pager", NULL, "false" },
    { "merge", "driver", "" },
    { "uploadpack", "packobjectshook", "" },
    { "remote", "uploadpack", "" },
    { "remote", "receivepack", "" },
    //  Whatever the section: credential.<url>.helper, gpg.<fmt>.program,
    //  hook.<name>.command (newer git), and the like.
    { NULL, "helper", "" },
    { NULL, "program", "" },
    { NULL, "command", "" },
    { NULL, "textconv", "" },
    { NULL, "cmd", "" },
};

//  Set whatever the listing says, for keys whose default runs something
//  or that a listing would miss (a value-less multi-valued key).
const char *const sb_git_always [] = {
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.pager=cat",
    "diff.external=", "credential.helper=", "core.sshCommand=", "core.editor=:",
    "core.quotepath=off", NULL,
};


const char *
sb_git_neutral_value (const char *key, size_t klen)
{
    const char *dot1 = memchr (key, '.', klen);
    if (!dot1)
        return NULL;
    const char *dot2 = dot1;
    for (const char *p = key + klen; p > dot1; p--)
        if (p [-1] == '.') {
            dot2 = p - 1;
            break;
        }
    size_t slen = (size_t) (dot1 - key);
    const char *name = dot2 + 1;
    size_t nlen = (size_t) (key + klen - name);
    for (size_t i = 0; i < sizeof s_neutral / sizeof s_neutral [0]; i++) {
        const char *s = s_neutral [i].section, *n = s_neutral [i].name;
        if (s && !(strlen (s) == slen && strncmp (s, key, slen) == 0))
            continue;
        if (n && !(strlen (n) == nlen && strncmp (n, name, nlen) == 0))
            continue;
        return s_neutral [i].value;
    }
    return NULL;
}


/*  Runs argv with envp: stdout to *out (NUL-terminated, caller frees;
    NULL: discarded, at most `max` bytes kept, else -1), stderr to
    /dev/null. Returns the exit status, or -1. */
static int s_capture (const char *const *argv, char **envp, size_t max, char **out, size_t *outlen);

/*  `git -C WS config -z --list`, as `-c KEY=VALUE` overrides for every
    key that names a program, appended to argv (from *argc, at most cap
    entries). -1 when the config cannot be read or neutralised. */
static int
s_neutralise (const char *ws, char **envp, const char **argv, int *argc, int cap, char ***owned)
{
    const char *list_argv [] = { "git", "-C", ws, "--no-pager", "config", "-z", "--list", NULL };
    char *list = NULL;
    size_t len = 0, n = 0;
    if (s_capture (list_argv, envp, SB_GIT_CONFIG_MAX, &list, &len) != 0) {
        free (list);
        return -1;
    }
    int rc = 0;
    char **kept = NULL;
    for (size_t i = 0; rc == 0 && i < len; ) {
        const char *entry = list + i;
        size_t elen = strnlen (entry, len - i);
        i += elen + 1;
        const char *nl = memchr (entry, '\n', elen);
        size_t klen = nl ? (size_t) (nl - entry) : elen;
        const char *value = sb_git_neutral_value (entry, klen);
        if (!value)
            continue;
        /* `-c` splits at the first '=': such a key cannot be overridden */
        char *kv = NULL;
        char **nk = memchr (entry, '=', klen) || *argc + 2 >= cap ? NULL
                  : realloc (kept, (n + 2) * sizeof *kept);
        if (!nk || asprintf (&kv, "%.*s=%s", (int) klen, entry, value) < 0) {
            if (nk)
                kept = nk;
            rc = -1;
            break;
        }
        kept = nk;
        kept [n++] = kv;
        kept [n] = NULL;
        argv [(*argc)++] = "-c";
        argv [(*argc)++] = kv;
    }
    free (list);
    *owned = kept;
    return rc;
}

/*  Runs `git -C WS ARGS...` with envp, the repository's programs
    neutralised first: listed now, or the overrides `ov` holds (listed
    by its first use). */
static int
s_git_exec (const char *ws, char **envp, const char *const *args, char **out, sb_git_overrides_t *ov)
{
    enum { CAP = 3 + 2 * SB_GIT_OVERRIDES_MAX + 24 };
    const char **argv = calloc (CAP, sizeof *argv);
    char **owned = NULL;
    int argc = 0, rc = -1;
    if (argv) {
        argv [argc++] = "git";
        argv [argc++] = "-C";
        argv [argc++] = ws;
        argv [argc++] = "--no-pager";
        for (int k = 0; sb_git_always [k]; k++) {
            argv [argc++] = "-c";
            argv [argc++] = sb_git_always [k];
        }
        int nrc = 0;
        if (ov && ov->ready)
            for (size_t k = 0; ov->kv && ov->kv [k] && argc < CAP - 26; k++) {
                argv [argc++] = "-c";
                argv [argc++] = ov->kv [k];
            }
        else {
            nrc = s_neutralise (ws, envp, argv, &argc, CAP - 24, &owned);
            if (nrc == 0 && ov) {
                ov->kv = owned;         /* the overrides' now */
                ov->ready = true;
                owned = NULL;
            }
        }
        if (nrc == 0) {
            for (int k = 0; args [k] && argc < CAP - 1; k++)
                argv [argc++] = args [k];
            argv [argc] = NULL;
            rc = s_capture (argv, envp, SB_GIT_OUT_MAX, out, NULL);
        }
    }
    for (size_t k = 0; owned && owned [k]; k++)
        free (owned [k]);
    free (owned);
    free (argv);
    return rc;
}

/*  Runs `git -C WS ARGS...` with GIT_INDEX_FILE=index when index is set.
    Its stdout goes to *out (NUL-terminated, caller frees), stderr to
    /dev/null. Returns git's exit status, or -1. */
int
sb_git_run (const char *ws, const char *index, const char *const *args, char **out)
{
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
    int rc = s_git_exec (ws, envp, args, out, NULL);
    free (envp);
    return rc;
}

/*  The server's environment holds its keys (provider API keys, a
    PostgreSQL URL), and a tool's environment is the model's to shape:
    neither reaches this git. It sees PATH, a fixed locale, no system or
    global config, and the caller's `vars`. */
int
sb_git_run_env (const char *ws, const char *const *vars, const char *const *args, char **out)
{
    return sb_git_run_cached (NULL, ws, vars, args, out);
}

void
sb_git_overrides_clear (sb_git_overrides_t *self)
{
    for (size_t k = 0; self->kv && self->kv [k]; k++)
        free (self->kv [k]);
    free (self->kv);
    self->kv = NULL;
    self->ready = false;
}

int
sb_git_run_cached (sb_git_overrides_t *ov, const char *ws, const char *const *vars, const char *const *args,
                   char **out)
{
    enum { BASE = 5 };
    const char *envp [BASE + SB_GIT_ENV_MAX + 1];
    size_t w = 0;
    const char *path = getenv ("PATH");
    char path_var [4200];
    snprintf (path_var, sizeof path_var, "PATH=%s", path && strlen (path) < 4000 ? path : "/usr/bin:/bin");
    envp [w++] = path_var;
    envp [w++] = "LC_ALL=C";
    envp [w++] = "GIT_CONFIG_NOSYSTEM=1";
    envp [w++] = "GIT_CONFIG_GLOBAL=/dev/null";
    envp [w++] = "GIT_TERMINAL_PROMPT=0";
    for (size_t k = 0; vars && vars [k]; k++) {
        if (k >= SB_GIT_ENV_MAX)
            return -1;
        envp [w++] = vars [k];
    }
    envp [w] = NULL;
    return s_git_exec (ws, (char **) envp, args, out, ov);
}

static int
s_capture (const char *const *argv, char **envp, size_t max, char **out, size_t *outlen)
{
    int pipefd [2];
    if (pipe2 (pipefd, O_CLOEXEC) != 0)
        return -1;
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
    close (pipefd [1]);
    if (rc != 0) {
        close (pipefd [0]);
        return -1;
    }
    size_t len = 0, cap = 4096;
    char *buf = malloc (cap);
    while (buf) {
        if (len + 1 == cap) {
            char *nb = cap < max ? realloc (buf, cap * 2) : NULL;
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
    if (outlen)
        *outlen = len;
    if (out)
        *out = buf;
    else
        free (buf);
    return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/*  Stages the work tree (under the workspace) into the temporary index and
    writes it as a tree: the state of the files, pre-existing edits and
    untracked files included, without touching the real index. */
int
sb_git_stage_tree (sb_git_stage_t *self, char *tree, size_t n)
{
    const char *add [] = { "add", "-A", "--", ".", self->exclude [0] ? self->exclude : NULL, NULL };
    static const char *write_tree [] = { "write-tree", NULL };
    char *out = NULL;
    if (sb_git_run (self->workspace, self->index, add, NULL) != 0
    ||  sb_git_run (self->workspace, self->index, write_tree, &out) != 0) {
        free (out);
        return -1;
    }
    out [strcspn (out, "\n")] = 0;
    snprintf (tree, n, "%s", out);
    free (out);
    return tree [0] ? 0 : -1;
}

int
sb_git_copy_file (const char *from, const char *to)
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
s_git_too_big (sb_git_stage_t *self)
{
    const char *others [] = { "ls-files", "--others", "--exclude-standard", "-z", "--", ".",
                              self->exclude [0] ? self->exclude : NULL, NULL };
    char *out = NULL;
    if (sb_git_run (self->workspace, NULL, others, &out) != 0) {
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
        if (++files > SB_GIT_UNTRACKED_MAX_FILES || bytes > SB_GIT_UNTRACKED_MAX_BYTES)
            break;
    }
    if (dir >= 0)
        close (dir);
    free (out);
    return dir < 0 || files > SB_GIT_UNTRACKED_MAX_FILES || bytes > SB_GIT_UNTRACKED_MAX_BYTES;
}

int
sb_git_stage_open (sb_git_stage_t *self, const char *workspace, const char *exclude)
{
    static const char *inside [] = { "rev-parse", "--is-inside-work-tree", NULL };
    memset (self, 0, sizeof *self);
    snprintf (self->workspace, sizeof self->workspace, "%s", workspace);
    snprintf (self->exclude, sizeof self->exclude, "%s", exclude ? exclude : "");
    static const char *index_path [] = { "rev-parse", "--git-path", "index", NULL };
    char *out = NULL;
    if (sb_git_run (self->workspace, NULL, inside, &out) != 0 || strncmp (out, "true", 4) != 0) {
        free (out);
        return -1;
    }
    free (out);
    out = NULL;
    if (s_git_too_big (self))
        return -1;
    if (sb_git_run (self->workspace, NULL, index_path, &out) != 0) {
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
    snprintf (self->tmpdir, sizeof self->tmpdir, "/tmp/switchboard-git-XXXXXX");
    if (!mkdtemp (self->tmpdir)) {
        self->tmpdir [0] = 0;
        return -1;
    }
    snprintf (self->index, sizeof self->index, "%s/index", self->tmpdir);
    return sb_git_copy_file (real, self->index);
}

void
sb_git_stage_close (sb_git_stage_t *self)
{
    if (self->tmpdir [0]) {
        char lock [160];
        snprintf (lock, sizeof lock, "%s.lock", self->index);
        unlink (lock);
        unlink (self->index);
        rmdir (self->tmpdir);
        self->tmpdir [0] = 0;
    }
}


/* ------------------------------------------------------------------ */
/*  Baselines */

static bool
s_name_ok (const char *name)
{
    size_t n = strlen (name);
    if (n == 0 || n > 64)
        return false;
    for (size_t k = 0; k < n; k++) {
        char c = name [k];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

//  The baseline file's path: git's own answer for a path inside its git
//  dir (a linked worktree has its own), made absolute.
static int
s_baseline_path (const char *workspace, const char *name, char *path, size_t n)
{
    if (!s_name_ok (name))
        return -1;
    char rel [128];
    snprintf (rel, sizeof rel, "switchboard/base-%s", name);
    const char *args [] = { "rev-parse", "--git-path", rel, NULL };
    char *out = NULL;
    if (sb_git_run (workspace, NULL, args, &out) != 0) {
        free (out);
        return -1;
    }
    out [strcspn (out, "\n")] = 0;
    int w = out [0] == '/' ? snprintf (path, n, "%s", out) : snprintf (path, n, "%s/%s", workspace, out);
    free (out);
    return w > 0 && (size_t) w < n ? 0 : -1;
}

static bool
s_tree_id_ok (const char *id)
{
    size_t n = strlen (id);
    if (n != 40 && n != 64)
        return false;
    for (size_t k = 0; k < n; k++)
        if (!((id [k] >= '0' && id [k] <= '9') || (id [k] >= 'a' && id [k] <= 'f')))
            return false;
    return true;
}

int
sb_git_baseline_load (const char *workspace, const char *name, char *tree, size_t n)
{
    char path [8192];
    if (s_baseline_path (workspace, name, path, sizeof path) != 0)
        return -1;
    char id [80] = "";
    FILE *f = fopen (path, "re");
    if (!f)
        return -1;
    bool got = fgets (id, sizeof id, f) != NULL;
    fclose (f);
    id [strcspn (id, "\n")] = 0;
    if (!got || !s_tree_id_ok (id))
        return -1;
    char spec [96];
    snprintf (spec, sizeof spec, "%s^{tree}", id);
    const char *check [] = { "cat-file", "-e", spec, NULL };
    if (sb_git_run (workspace, NULL, check, NULL) != 0)
        return -1;              /* pruned by a gc */
    snprintf (tree, n, "%s", id);
    return 0;
}

int
sb_git_baseline_save (const char *workspace, const char *exclude, const char *name)
{
    char path [8192], tmp [8300], tree [128];
    if (s_baseline_path (workspace, name, path, sizeof path) != 0)
        return -1;
    struct stat st;
    if (stat (path, &st) == 0)
        return 0;
    sb_git_stage_t stage;
    int rc = sb_git_stage_open (&stage, workspace, exclude) == 0
          && sb_git_stage_tree (&stage, tree, sizeof tree) == 0 ? 0 : -1;
    sb_git_stage_close (&stage);
    if (rc != 0 || !s_tree_id_ok (tree))
        return -1;
    char *slash = strrchr (path, '/');
    *slash = 0;
    if (mkdir (path, 0700) != 0 && errno != EEXIST)
        return -1;
    *slash = '/';
    /* written whole, then renamed: a crash leaves no half id */
    snprintf (tmp, sizeof tmp, "%s.%d.tmp", path, (int) getpid ());
    int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    char line [80];
    int len = snprintf (line, sizeof line, "%s\n", tree);
    bool ok = write (fd, line, (size_t) len) == len && fsync (fd) == 0;
    close (fd);
    /* link, not rename: of two runs saving at once, the first one wins */
    ok = ok && (link (tmp, path) == 0 || errno == EEXIST);
    unlink (tmp);
    return ok ? 0 : -1;
}

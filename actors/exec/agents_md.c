/*  actors/exec/agents_md.c — a project's AGENTS.md files for the model's
    instructions; see actors/exec/agents_md.h and docs/agents.md.

    Why the project root and not only the workspace? A session is often
    opened on a folder inside a repository, and the repository's own
    AGENTS.md (at its root) is the one that says how to build and test:
    every agent that reads AGENTS.md walks from the root down. Files are
    still confined, to that root, with the same resolver as every tool.
*/
#include "actors/exec/agents_md.h"
#include "actors/exec/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_INTRO \
    "The person keeps instructions for agents in AGENTS.md files. They follow, the personal one " \
    "first, then the project's from its root down to the working folder; where they disagree, " \
    "the later (nearer) one wins.\n"

typedef struct {
    char *buf;
    size_t len, cap;
    size_t left;                //  bytes of SB_AGENTS_MAX_BYTES not yet used
    uint64_t dropped;           //  bytes the cap left out
    bool oom;
} s_text_t;

static void
s_put (s_text_t *t, const char *data, size_t n)
{
    if (t->oom)
        return;
    if (n > t->left) {
        //  Cut on a character boundary so the model never sees half of one.
        size_t keep = t->left;
        while (keep > 0 && ((unsigned char) data [keep] & 0xC0) == 0x80)
            keep--;
        t->dropped += n - keep;
        n = keep;
    }
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *nb = realloc (t->buf, cap);
        if (!nb) {
            t->oom = true;
            return;
        }
        t->buf = nb;
        t->cap = cap;
    }
    memcpy (t->buf + t->len, data, n);
    t->len += n;
    t->buf [t->len] = 0;
    t->left -= n;
}

//  Adds one open file to the text (closes fd). A file that is not a
//  regular file, or that cannot be read, adds nothing and returns false.
static bool
s_add_file (s_text_t *t, int fd, const char *path)
{
    struct stat st;
    if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode)) {
        close (fd);
        return false;
    }
    char head [PATH_MAX + 32];
    int hl = snprintf (head, sizeof head, "\n--- %s ---\n", path);
    s_put (t, head, (size_t) hl);
    char buf [8192];
    bool any = false;
    while (true) {
        ssize_t r = read (fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        any = true;
        if (t->left == 0) {
            //  Past the cap only the count matters: the note says it.
            t->dropped += (uint64_t) r;
            continue;
        }
        s_put (t, buf, (size_t) r);
    }
    if (any && t->len && t->buf [t->len - 1] != '\n')
        s_put (t, "\n", 1);
    close (fd);
    return true;
}

static int
s_add_path (sb_agents_t *out, const char *path)
{
    for (size_t k = 0; k < out->npaths; k++)
        if (strcmp (out->paths [k], path) == 0)
            return 1;           //  the same file reached twice (a symlink inside)
    if (out->npaths >= SB_AGENTS_MAX_FILES)
        return 1;
    out->paths [out->npaths] = strdup (path);
    if (!out->paths [out->npaths])
        return -1;
    out->npaths++;
    return 0;
}

//  The nearest folder at or above `ws` that holds .git; `ws` when none.
//  As git's safe.directory does, the walk trusts only what the
//  workspace's owner (`uid`) owns: it stops below a folder of another
//  user, and a .git of another user does not make a root. Otherwise a
//  folder above the workspace that someone else controls (a shared /tmp,
//  another user's home) could put its AGENTS.md in the model's
//  instructions.
static void
s_project_root (const char *ws, uid_t uid, char *root, size_t size)
{
    char dir [PATH_MAX];
    snprintf (dir, sizeof dir, "%s", ws);
    while (true) {
        char probe [PATH_MAX + 8];
        struct stat st;
        if (strcmp (dir, ws) != 0 && (lstat (dir, &st) != 0 || st.st_uid != uid))
            break;
        snprintf (probe, sizeof probe, "%s/.git", strcmp (dir, "/") == 0 ? "" : dir);
        if (lstat (probe, &st) == 0 && st.st_uid == uid) {
            snprintf (root, size, "%s", dir);
            return;
        }
        char *slash = strrchr (dir, '/');
        if (!slash || strcmp (dir, "/") == 0)
            break;
        if (slash == dir)
            dir [1] = 0;
        else
            *slash = 0;
    }
    snprintf (root, size, "%s", ws);
}

static void
s_personal_path (char *out, size_t size)
{
    const char *xdg = getenv ("XDG_CONFIG_HOME");
    const char *home = getenv ("HOME");
    if (xdg && xdg [0] == '/')
        snprintf (out, size, "%s/switchboard/%s", xdg, SB_AGENTS_NAME);
    else
    if (home && home [0] == '/')
        snprintf (out, size, "%s/.config/switchboard/%s", home, SB_AGENTS_NAME);
    else
        out [0] = 0;
}

//  Reads `rel` (a path below the project root) when it resolves inside it
//  and is a regular file of the workspace's owner `uid`. It is opened
//  without blocking (a FIFO would hang the run, and the cancel with it),
//  and s_add_file checks the open file again.
static int
s_add_project_file (sb_agents_t *out, s_text_t *t, const char *root, uid_t uid, const char *rel)
{
    char resolved [PATH_MAX], err [256];
    if (sb_path_resolve (root, rel, false, resolved, sizeof resolved, err, sizeof err) != 0)
        return 0;               //  absent, or leading out of the project: not read
    struct stat st;
    if (lstat (resolved, &st) != 0 || !S_ISREG (st.st_mode) || st.st_uid != uid)
        return 0;
    int fd = sb_path_open (root, resolved, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0)
        return 0;
    if (fstat (fd, &st) != 0 || st.st_uid != uid) {
        close (fd);
        return 0;
    }
    for (size_t k = 0; k < out->npaths; k++)
        if (strcmp (out->paths [k], resolved) == 0) {
            close (fd);
            return 0;
        }
    if (!s_add_file (t, fd, resolved))
        return 0;
    return s_add_path (out, resolved) < 0 ? -1 : 0;
}

int
sb_agents_load (const char *workspace_real, const char *personal, sb_agents_t *out)
{
    memset (out, 0, sizeof *out);
    if (!workspace_real || workspace_real [0] != '/')
        return 0;
    s_text_t t = { .left = SB_AGENTS_MAX_BYTES };
    s_put (&t, S_INTRO, strlen (S_INTRO));
    size_t intro = t.len;

    char ppath [PATH_MAX];
    if (personal)
        snprintf (ppath, sizeof ppath, "%s", personal);
    else
        s_personal_path (ppath, sizeof ppath);
    if (ppath [0]) {
        int fd = open (ppath, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd >= 0 && s_add_file (&t, fd, ppath) && s_add_path (out, ppath) < 0)
            t.oom = true;
    }

    char root [PATH_MAX];
    struct stat wst;
    if (stat (workspace_real, &wst) != 0)
        wst.st_uid = geteuid ();
    s_project_root (workspace_real, wst.st_uid, root, sizeof root);
    const char *below = sb_path_relative (root, workspace_real);
    char rel [PATH_MAX];
    rel [0] = 0;
    //  The root's own file, then one per component of the way down.
    if (s_add_project_file (out, &t, root, wst.st_uid, SB_AGENTS_NAME) < 0)
        t.oom = true;
    if (below && strcmp (below, ".") != 0) {
        const char *p = below;
        while (*p && !t.oom) {
            const char *slash = strchrnul (p, '/');
            size_t n = (size_t) (slash - p);
            size_t rl = strlen (rel);
            if (rl + n + 2 + sizeof SB_AGENTS_NAME > sizeof rel)
                break;
            memcpy (rel + rl, p, n);
            rel [rl + n] = 0;
            char cand [PATH_MAX];
            snprintf (cand, sizeof cand, "%s/%s", rel, SB_AGENTS_NAME);
            if (s_add_project_file (out, &t, root, wst.st_uid, cand) < 0)
                t.oom = true;
            strcat (rel, "/");
            p = *slash ? slash + 1 : slash;
        }
    }
    if (t.oom) {
        free (t.buf);
        sb_agents_clear (out);
        return -1;
    }
    if (out->npaths == 0 || t.len == intro) {
        free (t.buf);
        sb_agents_clear (out);
        return 0;
    }
    if (t.dropped) {
        //  The note goes past the cap by its own few bytes: the model must
        //  know that it did not see everything.
        char note [200];
        int nl = snprintf (note, sizeof note,
                           "\n[... AGENTS.md instructions cut at %d KiB: %llu more bytes were not included ...]\n",
                           SB_AGENTS_MAX_BYTES / 1024, (unsigned long long) t.dropped);
        t.left = (size_t) nl;
        s_put (&t, note, (size_t) nl);
        out->truncated = true;
    }
    if (t.oom) {
        free (t.buf);
        sb_agents_clear (out);
        return -1;
    }
    out->text = t.buf;
    out->bytes = t.len;
    return 0;
}

void
sb_agents_clear (sb_agents_t *a)
{
    if (!a)
        return;
    free (a->text);
    for (size_t k = 0; k < a->npaths; k++)
        free (a->paths [k]);
    memset (a, 0, sizeof *a);
}


/* ------------------------------------------------------------------ */
/*  For a run of the exec actor (actors/exec/agent.h) */

#include "actors/exec/agent.h"
#include "common/log.h"
#include "schemas/vocab.h"

int
sb_exec_load_instructions (sb_exec_run_t *run)
{
    free (run->agents_md);
    run->agents_md = NULL;
    if (sb_run_kind_from_name (run->kind) == SB_RUN_KIND_COMPACT)
        return 0;               /* a summary of the conversation needs none */
    sb_agents_t a;
    if (sb_agents_load (run->runtime->workspace, NULL, &a) != 0) {
        sb_warn ("exec", "run=%s: out of memory reading AGENTS.md; the run goes on without it", run->run_id);
        return 0;
    }
    if (!a.npaths)
        return 0;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    sb_exec_entry_open (e, "instructions.loaded");
    sb_enc_key (e, "paths");
    sb_enc_array_open (e);
    for (size_t k = 0; k < a.npaths; k++)
        sb_enc_str (e, a.paths [k]);
    sb_enc_array_close (e);
    sb_enc_kuint (e, "bytes", a.bytes);
    if (a.truncated)
        sb_enc_kbool (e, "truncated", true);
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
    int rc = sb_exec_append (run, e);
    sb_enc_destroy (&e);
    run->agents_md = a.text;
    a.text = NULL;
    sb_agents_clear (&a);
    return rc;
}

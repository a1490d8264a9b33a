/*  tests/unit/test_git_checkpoint.c — the work tree recorded as a git tree
    (common/git_checkpoint.h): hostile file names, the bounds, files over
    the size cap, and git's environment kept apart from ours. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/git_checkpoint.h"

static void
s_write (const char *dir, const char *name, const char *text)
{
    char path [8192];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen (path, "w");
    cr_assert (f, "cannot write %s", path);
    fputs (text, f);
    fclose (f);
}

static char *
s_tmpdir (char *buf, size_t n, const char *tag)
{
    snprintf (buf, n, "/tmp/sb-ckpt-%s-XXXXXX", tag);
    cr_assert (mkdtemp (buf));
    return buf;
}

static void
s_rmrf (const char *dir)
{
    char cmd [8300];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert (system (cmd) == 0);
}

static bool
s_has (const sb_ckpt_t *c, const char *path)
{
    for (size_t k = 0; k < c->nchanged; k++)
        if (strcmp (c->changed [k], path) == 0)
            return true;
    return false;
}

static void
s_take (const char *ws, const char *dir, int64_t max, sb_ckpt_t *c)
{
    char err [256] = "";
    int rc = sb_ckpt_take (ws, dir, "sess_1", NULL, max, "test", c, err, sizeof err);
    cr_assert_eq (rc, 0, "take: %s", err);
    cr_assert_eq (strlen (c->tree), 40);
    cr_assert_eq (strlen (c->commit), 40);
}

Test (git_checkpoint, hostile_names_come_back_exactly)
{
    char ws [64], data [64];
    s_tmpdir (ws, sizeof ws, "ws");
    s_tmpdir (data, sizeof data, "data");
    s_write (ws, "plain.txt", "p\n");
    sb_ckpt_t c;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &c);
    cr_assert (c.first && c.shadow && c.nchanged == 0);
    sb_ckpt_clear (&c);
    const char *hostile [] = { "new\nline", "-dash", "sp ace", "quo\"te", "star*", "\xff\xfe", ":(exclude)x" };
    for (size_t k = 0; k < sizeof hostile / sizeof hostile [0]; k++)
        s_write (ws, hostile [k], "h\n");
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &c);
    cr_assert (!c.first);
    cr_assert_eq (c.changed_total, sizeof hostile / sizeof hostile [0]);
    for (size_t k = 0; k < sizeof hostile / sizeof hostile [0]; k++)
        cr_assert (s_has (&c, hostile [k]), "missing %s", hostile [k]);
    sb_ckpt_clear (&c);
    s_rmrf (ws);
    s_rmrf (data);
}

Test (git_checkpoint, changed_paths_are_bounded)
{
    char ws [64], data [64];
    s_tmpdir (ws, sizeof ws, "ws");
    s_tmpdir (data, sizeof data, "data");
    sb_ckpt_t c;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &c);
    sb_ckpt_clear (&c);
    for (int k = 0; k < SB_CKPT_CHANGED_MAX + 44; k++) {
        char name [32];
        snprintf (name, sizeof name, "f%03d", k);
        s_write (ws, name, name);
    }
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &c);
    cr_assert_eq (c.nchanged, SB_CKPT_CHANGED_MAX);
    cr_assert_eq (c.changed_total, SB_CKPT_CHANGED_MAX + 44);
    sb_ckpt_clear (&c);
    s_rmrf (ws);
    s_rmrf (data);
}

Test (git_checkpoint, a_file_over_the_cap_is_listed_not_stored)
{
    char ws [64], data [64];
    s_tmpdir (ws, sizeof ws, "ws");
    s_tmpdir (data, sizeof data, "data");
    char big [5000];
    memset (big, 'b', sizeof big - 1);
    big [sizeof big - 1] = 0;
    s_write (ws, "big*.bin", big);
    s_write (ws, "bigger.bin", big);
    sb_ckpt_t c;
    s_take (ws, data, 4096, &c);
    cr_assert_eq (c.nskipped, 2);
    cr_assert_eq (c.skipped [0].size, 4999);
    cr_assert_eq (strlen (c.skipped [0].hash), 64);
    char first [65];
    memcpy (first, c.skipped [1].hash, 65);
    cr_assert_str_eq (c.skipped [0].hash, first, "the same bytes, the same hash");
    sb_ckpt_clear (&c);
    //  unchanged: the cached hash; rewritten with other bytes of the same
    //  size (another inode, as an editor's rename makes): hashed again
    s_take (ws, data, 4096, &c);
    cr_assert_str_eq (c.skipped [1].hash, first);
    sb_ckpt_clear (&c);
    char path [200], tmp [210];
    snprintf (path, sizeof path, "%s/bigger.bin", ws);
    snprintf (tmp, sizeof tmp, "%s/bigger.tmp", ws);
    big [0] = 'c';
    s_write (ws, "bigger.tmp", big);
    cr_assert_eq (rename (tmp, path), 0);
    s_take (ws, data, 4096, &c);
    cr_assert_str_eq (c.skipped [1].path, "bigger.bin");
    cr_assert_str_neq (c.skipped [1].hash, first);
    sb_ckpt_clear (&c);
    //  shrunk under the cap, it is recorded again (and only it: the
    //  literal pathspec of "big*.bin" did not leave "bigger.bin" out)
    s_write (ws, "big*.bin", "small\n");
    s_take (ws, data, 4096, &c);
    cr_assert_eq (c.nskipped, 1);
    cr_assert_str_eq (c.skipped [0].path, "bigger.bin");
    cr_assert (c.nchanged == 1 && strcmp (c.changed [0], "big*.bin") == 0);
    sb_ckpt_clear (&c);
    s_rmrf (ws);
    s_rmrf (data);
}

Test (git_checkpoint, our_git_variables_do_not_reach_git)
{
    char ws [64], data [64];
    s_tmpdir (ws, sizeof ws, "ws");
    s_tmpdir (data, sizeof data, "data");
    s_write (ws, "a.txt", "a\n");
    //  were they passed on, git would write elsewhere or fail
    setenv ("GIT_DIR", "/nonexistent/git", 1);
    setenv ("GIT_INDEX_FILE", "/nonexistent/index", 1);
    setenv ("GIT_WORK_TREE", "/", 1);
    sb_ckpt_t c;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &c);
    unsetenv ("GIT_DIR");
    unsetenv ("GIT_INDEX_FILE");
    unsetenv ("GIT_WORK_TREE");
    cr_assert (c.shadow);
    sb_ckpt_clear (&c);
    char path [200];
    snprintf (path, sizeof path, "%s/sess_1.git/HEAD", data);
    cr_assert_eq (access (path, F_OK), 0);
    s_rmrf (ws);
    s_rmrf (data);
}

Test (git_checkpoint, a_session_id_is_a_name)
{
    char ref [128], err [256];
    sb_ckpt_t c;
    cr_assert_eq (sb_ckpt_ref ("../x", ref, sizeof ref), -1);
    cr_assert_eq (sb_ckpt_ref ("", ref, sizeof ref), -1);
    cr_assert_eq (sb_ckpt_ref ("s_01", ref, sizeof ref), 0);
    cr_assert_str_eq (ref, "refs/switchboard/checkpoints/s_01");
    cr_assert_eq (sb_ckpt_take ("/tmp", "/tmp", "a/b", NULL, 1 << 20, "m", &c, err, sizeof err), -1);
    sb_ckpt_clear (&c);
}

Test (git_checkpoint, in_git_without_a_data_folder_the_index_is_in_the_git_dir)
{
    char ws [64];
    s_tmpdir (ws, sizeof ws, "repo");
    char cmd [300];
    snprintf (cmd, sizeof cmd, "git -C '%s' init -q", ws);
    cr_assert (system (cmd) == 0);
    s_write (ws, "a.txt", "a\n");
    sb_ckpt_t c;
    s_take (ws, NULL, SB_CKPT_MAX_FILE_DEFAULT, &c);
    cr_assert (!c.shadow && c.first);
    sb_ckpt_clear (&c);
    char path [200];
    snprintf (path, sizeof path, "%s/.git/switchboard/checkpoints-sess_1.index", ws);
    cr_assert_eq (access (path, F_OK), 0);
    snprintf (path, sizeof path, "%s/.git/refs/switchboard/checkpoints/sess_1", ws);
    cr_assert_eq (access (path, F_OK), 0);
    s_rmrf (ws);
}

static bool
s_in (char *const *list, size_t n, const char *path)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp (list [k], path) == 0)
            return true;
    return false;
}

static char *
s_read (const char *dir, const char *name, char *buf, size_t n)
{
    char path [8192];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen (path, "r");
    if (!f)
        return NULL;
    size_t got = fread (buf, 1, n - 1, f);
    buf [got] = 0;
    fclose (f);
    return buf;
}

//  Written, edited, deleted and made after a checkpoint: the restore puts
//  back what it held, removes what came after, and leaves a planted
//  symlink's target outside the workspace alone.
static void
s_restore_case (bool in_git)
{
    char ws [64], data [64], out [64], cmd [400], buf [64], err [256] = "";
    s_tmpdir (ws, sizeof ws, "rws");
    s_tmpdir (data, sizeof data, "rdata");
    s_tmpdir (out, sizeof out, "rout");
    if (in_git) {
        snprintf (cmd, sizeof cmd, "git -C '%s' init -q", ws);
        cr_assert (system (cmd) == 0);
    }
    s_write (ws, "keep.txt", "keep\n");
    s_write (ws, "edit.txt", "before\n");
    s_write (ws, "gone.txt", "gone\n");
    s_write (out, "victim.txt", "outside\n");
    sb_ckpt_t then, now;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &then);
    s_write (ws, "edit.txt", "after\n");
    snprintf (cmd, sizeof cmd, "%s/gone.txt", ws);
    cr_assert_eq (unlink (cmd), 0);
    snprintf (cmd, sizeof cmd, "%s/sub", ws);
    cr_assert_eq (mkdir (cmd, 0700), 0);
    s_write (ws, "sub/new.txt", "new\n");
    //  a link out of the workspace: the link goes, not what it points at
    snprintf (cmd, sizeof cmd, "%s/escape", ws);
    cr_assert_eq (symlink (out, cmd), 0);
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &now);
    sb_ckpt_restore_t r;
    int rc = sb_ckpt_restore (ws, data, "sess_1", then.tree, now.tree, NULL, NULL, &r, err, sizeof err);
    cr_assert_eq (rc, 0, "restore: %s", err);
    cr_assert_str_eq (s_read (ws, "edit.txt", buf, sizeof buf), "before\n");
    cr_assert_str_eq (s_read (ws, "gone.txt", buf, sizeof buf), "gone\n");
    cr_assert_str_eq (s_read (ws, "keep.txt", buf, sizeof buf), "keep\n");
    cr_assert_null (s_read (ws, "sub/new.txt", buf, sizeof buf));
    snprintf (cmd, sizeof cmd, "%s/sub", ws);
    cr_assert_neq (access (cmd, F_OK), 0, "the emptied folder goes too");
    struct stat st;
    snprintf (cmd, sizeof cmd, "%s/escape", ws);
    cr_assert_neq (lstat (cmd, &st), 0);
    cr_assert_str_eq (s_read (out, "victim.txt", buf, sizeof buf), "outside\n");
    cr_assert (s_in (r.restored, r.nrestored, "edit.txt") && s_in (r.restored, r.nrestored, "gone.txt"));
    cr_assert_eq (r.restored_total, 2);
    cr_assert (s_in (r.removed, r.nremoved, "sub/new.txt") && s_in (r.removed, r.nremoved, "escape"));
    cr_assert_eq (r.removed_total, 2);
    sb_ckpt_restore_clear (&r);
    //  and back: the restore of `now` undoes it
    rc = sb_ckpt_restore (ws, data, "sess_1", now.tree, then.tree, NULL, NULL, &r, err, sizeof err);
    cr_assert_eq (rc, 0, "undo: %s", err);
    cr_assert_str_eq (s_read (ws, "sub/new.txt", buf, sizeof buf), "new\n");
    cr_assert_str_eq (s_read (ws, "edit.txt", buf, sizeof buf), "after\n");
    cr_assert_null (s_read (ws, "gone.txt", buf, sizeof buf));
    snprintf (cmd, sizeof cmd, "%s/escape", ws);
    cr_assert_eq (lstat (cmd, &st), 0);
    cr_assert (S_ISLNK (st.st_mode));
    sb_ckpt_restore_clear (&r);
    sb_ckpt_clear (&then);
    sb_ckpt_clear (&now);
    s_rmrf (ws);
    s_rmrf (data);
    s_rmrf (out);
}

Test (git_checkpoint, a_restore_puts_the_tree_back_in_a_shadow)
{
    s_restore_case (false);
}

Test (git_checkpoint, a_restore_puts_the_tree_back_in_git)
{
    s_restore_case (true);
}

//  A path under a folder the model replaced with a symlink is refused:
//  the walk does not follow it out of the workspace.
Test (git_checkpoint, a_removal_does_not_follow_a_symlinked_folder)
{
    char ws [64], data [64], out [64], path [300], buf [64], err [256] = "";
    s_tmpdir (ws, sizeof ws, "lws");
    s_tmpdir (data, sizeof data, "ldata");
    s_tmpdir (out, sizeof out, "lout");
    s_write (ws, "a.txt", "a\n");
    s_write (out, "x.txt", "outside\n");
    sb_ckpt_t then, now;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &then);
    snprintf (path, sizeof path, "%s/d", ws);
    cr_assert_eq (mkdir (path, 0700), 0);
    s_write (ws, "d/x.txt", "inside\n");
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &now);
    //  after the checkpoint of now, d becomes a link to the outside
    s_write (ws, "d/x.txt", "");
    snprintf (path, sizeof path, "%s/d/x.txt", ws);
    cr_assert_eq (unlink (path), 0);
    snprintf (path, sizeof path, "%s/d", ws);
    cr_assert_eq (rmdir (path), 0);
    cr_assert_eq (symlink (out, path), 0);
    sb_ckpt_restore_t r;
    int rc = sb_ckpt_restore (ws, data, "sess_1", then.tree, now.tree, NULL, NULL, &r, err, sizeof err);
    cr_assert_eq (rc, 0, "restore: %s", err);
    cr_assert_str_eq (s_read (out, "x.txt", buf, sizeof buf), "outside\n");
    cr_assert (r.nrefused == 1 && strcmp (r.refused [0], "d/x.txt") == 0);
    cr_assert_eq (r.nremoved, 0);
    sb_ckpt_restore_clear (&r);
    cr_assert_eq (sb_ckpt_restore (ws, data, "sess_1", "../x", now.tree, NULL, NULL, &r, err, sizeof err), -1);
    sb_ckpt_restore_clear (&r);
    sb_ckpt_clear (&then);
    sb_ckpt_clear (&now);
    s_rmrf (ws);
    s_rmrf (data);
    s_rmrf (out);
}

//  A folder of the checkpoint that the model replaced with a symlink out
//  of the workspace: git writes the folder back, never through the link.
Test (git_checkpoint, a_restore_does_not_write_through_a_symlinked_folder)
{
    char ws [64], data [64], out [64], path [300], buf [64], err [256] = "";
    s_tmpdir (ws, sizeof ws, "wws");
    s_tmpdir (data, sizeof data, "wdata");
    s_tmpdir (out, sizeof out, "wout");
    snprintf (path, sizeof path, "%s/d", ws);
    cr_assert_eq (mkdir (path, 0700), 0);
    s_write (ws, "d/x.txt", "inside\n");
    sb_ckpt_t then, now;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &then);
    snprintf (path, sizeof path, "%s/d/x.txt", ws);
    cr_assert_eq (unlink (path), 0);
    snprintf (path, sizeof path, "%s/d", ws);
    cr_assert_eq (rmdir (path), 0);
    cr_assert_eq (symlink (out, path), 0);
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &now);
    sb_ckpt_restore_t r;
    int rc = sb_ckpt_restore (ws, data, "sess_1", then.tree, now.tree, NULL, NULL, &r, err, sizeof err);
    cr_assert_eq (rc, 0, "restore: %s", err);
    cr_assert_null (s_read (out, "x.txt", buf, sizeof buf), "written through the link");
    cr_assert_str_eq (s_read (ws, "d/x.txt", buf, sizeof buf), "inside\n");
    struct stat st;
    cr_assert (lstat (path, &st) == 0 && S_ISDIR (st.st_mode));
    sb_ckpt_restore_clear (&r);
    sb_ckpt_clear (&then);
    sb_ckpt_clear (&now);
    s_rmrf (ws);
    s_rmrf (data);
    s_rmrf (out);
}

//  A workspace that is a folder of a repository: the files of the
//  repository outside it are neither written nor removed.
Test (git_checkpoint, a_restore_stays_inside_a_workspace_below_the_top)
{
    char top [64], ws [128], data [64], cmd [400], buf [64], err [256] = "";
    s_tmpdir (top, sizeof top, "top");
    s_tmpdir (data, sizeof data, "tdata");
    snprintf (cmd, sizeof cmd, "git -C '%s' init -q", top);
    cr_assert (system (cmd) == 0);
    snprintf (ws, sizeof ws, "%s/w", top);
    cr_assert_eq (mkdir (ws, 0700), 0);
    s_write (top, "outer.txt", "outer one\n");
    s_write (ws, "in.txt", "in one\n");
    //  tracked: in the index the private one starts from, so in every
    //  tree, and a checkout of the whole index would write it back
    snprintf (cmd, sizeof cmd, "git -C '%s' add outer.txt", top);
    cr_assert (system (cmd) == 0);
    sb_ckpt_t then, now;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &then);
    s_write (top, "outer.txt", "outer two\n");
    s_write (top, "outer_new.txt", "new outside\n");
    s_write (ws, "in.txt", "in two\n");
    s_write (ws, "in_new.txt", "new inside\n");
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &now);
    sb_ckpt_restore_t r;
    int rc = sb_ckpt_restore (ws, data, "sess_1", then.tree, now.tree, NULL, NULL, &r, err, sizeof err);
    cr_assert_eq (rc, 0, "restore: %s", err);
    cr_assert_str_eq (s_read (ws, "in.txt", buf, sizeof buf), "in one\n");
    cr_assert_null (s_read (ws, "in_new.txt", buf, sizeof buf));
    cr_assert_str_eq (s_read (top, "outer.txt", buf, sizeof buf), "outer two\n");
    cr_assert_str_eq (s_read (top, "outer_new.txt", buf, sizeof buf), "new outside\n");
    sb_ckpt_restore_clear (&r);
    sb_ckpt_clear (&then);
    sb_ckpt_clear (&now);
    s_rmrf (top);
    s_rmrf (data);
}

Test (git_checkpoint, the_diff_between_two_checkpoints_reads_only)
{
    char ws [64], data [64], err [256] = "";
    s_tmpdir (ws, sizeof ws, "ws");
    s_tmpdir (data, sizeof data, "data");
    s_write (ws, "keep.txt", "one\n");
    s_write (ws, "gone.txt", "bye\n");
    sb_ckpt_t a, b;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &a);
    s_write (ws, "keep.txt", "two\n");
    s_write (ws, "new\nline", "n\n");
    char gone [128];
    snprintf (gone, sizeof gone, "%s/gone.txt", ws);
    cr_assert (unlink (gone) == 0);
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &b);
    char *numstat = NULL, *diff = NULL;
    int rc = sb_ckpt_diff (ws, data, "sess_1", true, a.tree, b.tree, &numstat, &diff, err, sizeof err);
    cr_assert_eq (rc, 0, "diff: %s", err);
    //  numstat -z: "A\tD\tPATH\0", the hostile name whole
    size_t n = 0;
    bool keep = false, line = false, bye = false;
    for (const char *p = numstat; p && *p; p += strlen (p) + 1, n++) {
        keep = keep || strcmp (p, "1\t1\tkeep.txt") == 0;
        line = line || strcmp (p, "1\t0\tnew\nline") == 0;
        bye = bye || strcmp (p, "0\t1\tgone.txt") == 0;
    }
    cr_assert (n == 3 && keep && line && bye, "numstat: %zu records", n);
    cr_assert (diff && strstr (diff, "-one\n+two\n") && strstr (diff, "deleted file mode"), "diff: %s", diff);
    free (numstat);
    free (diff);

    //  reads only: the work tree is as it was, the chain did not move
    sb_ckpt_t c;
    s_take (ws, data, SB_CKPT_MAX_FILE_DEFAULT, &c);
    cr_assert (c.nchanged == 0 && strcmp (c.tree, b.tree) == 0);
    sb_ckpt_clear (&c);

    //  bad ids, no data folder for a shadow, a tree not in the store
    cr_assert_eq (sb_ckpt_diff (ws, data, "sess_1", true, "HEAD", b.tree, &numstat, &diff, err, sizeof err), -1);
    cr_assert_eq (sb_ckpt_diff (ws, data, "../x", true, a.tree, b.tree, &numstat, &diff, err, sizeof err), -1);
    cr_assert_eq (sb_ckpt_diff (ws, NULL, "sess_1", true, a.tree, b.tree, &numstat, &diff, err, sizeof err), -1);
    const char *absent = "0123456789abcdef0123456789abcdef01234567";
    rc = sb_ckpt_diff (ws, data, "sess_1", true, a.tree, absent, &numstat, &diff, err, sizeof err);
    cr_assert (rc == -2 && strstr (err, absent), "absent tree: %d %s", rc, err);
    cr_assert (!numstat && !diff);
    sb_ckpt_clear (&a);
    sb_ckpt_clear (&b);
    s_rmrf (ws);
    s_rmrf (data);
}

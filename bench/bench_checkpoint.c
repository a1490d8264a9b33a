/*  bench/bench_checkpoint.c — what a checkpoint costs a step.

    A checkpoint (common/git_checkpoint.h, docs/checkpoints.md) is taken by
    sb_ckpt_take, the very function the executor calls after a step. This
    builds a work tree of 10,000 files (100 folders of 100 files of about
    200 bytes), committed in git, then times rounds of: change N files,
    take a checkpoint; for N = 0, 1 and 100, in the repository's own object
    store and again in a shadow repository (the same tree, outside git).
    Each figure is the median wall time of one checkpoint over the rounds,
    with its p99; the baseline is the checkpoint of an unchanged tree:

        {"bench":"checkpoint.git.changed1","value":MEDIAN,"unit":"ms","p99":P99,
         "baseline":UNCHANGED_MEDIAN,"ratio":MEDIAN/UNCHANGED_MEDIAN,"files":10000,"runs":R}

    The first checkpoint of a session (no private index yet: it starts from
    a copy of the repository's index, or hashes everything in a shadow) is
    printed once as checkpoint.*.first.

    Then the rewind: rounds of take a checkpoint, change 100 files (50
    edited, 25 deleted, 25 made, one per folder), and put the checkpoint
    back as a rewind run does: a checkpoint of the tree as it is
    (tree_before), sb_ckpt_restore, a checkpoint of the result
    (tree_after). Its median and p99, with the restore alone beside:

        {"bench":"checkpoint.git.rewind100","value":MEDIAN,"unit":"ms","p99":P99,
         "restore":RESTORE_MEDIAN,"restore_p99":P99,"files":10000,"changed":100,"runs":R}

    usage: bench_checkpoint [ROUNDS]   (default 40)
*/
#include "bench/bench_util.h"
#include "common/git_checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FOLDERS 100
#define PER_FOLDER 100

static double
s_now_ms (void)
{
    return sb_bench_now_us () / 1e3;
}

static int
s_write (const char *ws, int folder, int file, unsigned round)
{
    char path [4200];
    snprintf (path, sizeof path, "%s/d%03d/f%03d.txt", ws, folder, file);
    FILE *f = fopen (path, "w");
    if (!f)
        return -1;
    fprintf (f, "folder %d file %d round %u\n", folder, file, round);
    for (int k = 0; k < 4; k++)
        fprintf (f, "the quick brown fox jumps over the lazy dog %d %d\n", k, file);
    return fclose (f);
}

static int
s_tree (const char *ws, bool git)
{
    for (int d = 0; d < FOLDERS; d++) {
        char dir [4200];
        snprintf (dir, sizeof dir, "%s/d%03d", ws, d);
        if (mkdir (dir, 0755) != 0)
            return -1;
        for (int f = 0; f < PER_FOLDER; f++)
            if (s_write (ws, d, f, 0) != 0)
                return -1;
    }
    if (!git)
        return 0;
    char cmd [4400];
    snprintf (cmd, sizeof cmd, "cd '%s' && git init -q && git add -A && GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b "
              "GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b git commit -qm tree", ws);
    return system (cmd) == 0 ? 0 : -1;
}

static int
s_take (const char *ws, const char *data, double *ms)
{
    sb_ckpt_t c;
    char err [256] = "";
    double t0 = s_now_ms ();
    int rc = sb_ckpt_take (ws, data, "bench", NULL, SB_CKPT_MAX_FILE_DEFAULT, "bench", &c, err, sizeof err);
    *ms = s_now_ms () - t0;
    sb_ckpt_clear (&c);
    if (rc != 0)
        fprintf (stderr, "bench_checkpoint: %s\n", err);
    return rc;
}

//  Changes 100 files of the tree, one per folder: k % 4 == 0 deleted,
//  k % 4 == 1 a new file beside, the rest edited.
static int
s_change100 (const char *ws, unsigned round)
{
    for (int k = 0; k < 100; k++) {
        int file = (int) (round % PER_FOLDER);
        char path [4200];
        if (k % 4 == 0) {
            snprintf (path, sizeof path, "%s/d%03d/f%03d.txt", ws, k, file);
            if (unlink (path) != 0)
                return -1;
        }
        else
        if (k % 4 == 1) {
            snprintf (path, sizeof path, "%s/d%03d/new%u.txt", ws, k, round);
            FILE *f = fopen (path, "w");
            if (!f || fputs ("new\n", f) < 0 || fclose (f) != 0)
                return -1;
        }
        else
        if (s_write (ws, k, file, round) != 0)
            return -1;
    }
    return 0;
}

//  What a rewind run does to the work tree, timed (actors/exec/rewind.c).
static int
s_rewind (const char *ws, const char *data, const char *store, int rounds, unsigned round)
{
    double *t = calloc ((size_t) rounds, sizeof *t), *tr = calloc ((size_t) rounds, sizeof *tr);
    int rc = t && tr ? 0 : -1;
    for (int r = 0; rc == 0 && r < rounds; r++, round++) {
        sb_ckpt_t target, now, after;
        char err [256] = "", tree [80];
        rc = sb_ckpt_take (ws, data, "bench", NULL, SB_CKPT_MAX_FILE_DEFAULT, "target", &target, err, sizeof err);
        snprintf (tree, sizeof tree, "%s", target.tree);
        sb_ckpt_clear (&target);
        if (rc == 0)
            rc = s_change100 (ws, round);
        double t0 = s_now_ms ();
        if (rc == 0)
            rc = sb_ckpt_take (ws, data, "bench", NULL, SB_CKPT_MAX_FILE_DEFAULT, "before", &now, err, sizeof err);
        double t1 = s_now_ms ();
        sb_ckpt_restore_t res = { 0 };
        if (rc == 0)
            rc = sb_ckpt_restore (ws, data, "bench", tree, now.tree, NULL, NULL, &res, err, sizeof err);
        double t2 = s_now_ms ();
        if (rc == 0)
            rc = sb_ckpt_take (ws, data, "bench", NULL, SB_CKPT_MAX_FILE_DEFAULT, "after", &after, err, sizeof err);
        t [r] = s_now_ms () - t0;
        tr [r] = t2 - t1;
        if (rc == 0 && (strcmp (after.tree, tree) != 0 || res.restored_total + res.removed_total != 100)) {
            snprintf (err, sizeof err, "the rewind put back %zu and removed %zu files, tree %s, not 100 and %s",
                      res.restored_total, res.removed_total, after.tree, tree);
            rc = -1;
        }
        if (rc == 0)
            sb_ckpt_clear (&after);
        sb_ckpt_clear (&now);
        sb_ckpt_restore_clear (&res);
        if (rc != 0)
            fprintf (stderr, "bench_checkpoint: rewind: %s\n", err);
    }
    if (rc == 0)
        printf ("{\"bench\":\"checkpoint.%s.rewind100\",\"value\":%.1f,\"unit\":\"ms\",\"p99\":%.1f,"
                "\"restore\":%.1f,\"restore_p99\":%.1f,\"files\":%d,\"changed\":100,\"runs\":%d,"
                "\"load\":%.2f}\n", store, sb_bench_pct (t, rounds, 0.5), sb_bench_pct (t, rounds, 0.99),
                sb_bench_pct (tr, rounds, 0.5), sb_bench_pct (tr, rounds, 0.99), FOLDERS * PER_FOLDER, rounds,
                sb_bench_load ());
    free (t);
    free (tr);
    return rc;
}

static int
s_store (const char *root, const char *store, bool git, int rounds)
{
    char ws [4200], data [4200];
    snprintf (ws, sizeof ws, "%s/%s-ws", root, store);
    snprintf (data, sizeof data, "%s/%s-data", root, store);
    if (mkdir (ws, 0755) != 0 || mkdir (data, 0755) != 0 || s_tree (ws, git) != 0) {
        fprintf (stderr, "bench_checkpoint: cannot build the tree in %s\n", ws);
        return -1;
    }
    double first;
    if (s_take (ws, data, &first) != 0)
        return -1;
    printf ("{\"bench\":\"checkpoint.%s.first\",\"value\":%.1f,\"unit\":\"ms\",\"files\":%d,\"load\":%.2f}\n",
            store, first, FOLDERS * PER_FOLDER, sb_bench_load ());
    static const int changed [] = { 0, 1, 100 };
    double base = 0, *t = calloc ((size_t) rounds, sizeof *t);
    unsigned round = 1;
    for (size_t c = 0; t && c < sizeof changed / sizeof changed [0]; c++) {
        for (int r = 0; r < rounds; r++, round++) {
            //  spread over the folders, as a step's edits are
            for (int k = 0; k < changed [c]; k++)
                if (s_write (ws, (k * 37 + r) % FOLDERS, (k * 11 + r) % PER_FOLDER, round) != 0)
                    return -1;
            if (s_take (ws, data, &t [r]) != 0)
                return -1;
        }
        double p99 = sb_bench_pct (t, rounds, 0.99), med = sb_bench_pct (t, rounds, 0.5);
        if (changed [c] == 0)
            base = med;
        printf ("{\"bench\":\"checkpoint.%s.changed%d\",\"value\":%.1f,\"unit\":\"ms\",\"p99\":%.1f,"
                "\"baseline\":%.1f,\"ratio\":%.2f,\"files\":%d,\"runs\":%d,\"load\":%.2f}\n",
                store, changed [c], med, p99, base, base > 0 ? med / base : 0, FOLDERS * PER_FOLDER, rounds,
                sb_bench_load ());
        fflush (stdout);
    }
    free (t);
    return s_rewind (ws, data, store, rounds, round);
}

int
main (int argc, char **argv)
{
    int rounds = argc > 1 ? atoi (argv [1]) : 40;
    if (rounds < 1 || rounds > 100000) {
        fprintf (stderr, "usage: bench_checkpoint [ROUNDS]\n");
        return 2;
    }
    char root [] = "/tmp/sb-bench-ckpt-XXXXXX";
    if (!mkdtemp (root))
        return 1;
    int rc = s_store (root, "git", true, rounds) == 0 && s_store (root, "shadow", false, rounds) == 0 ? 0 : 1;
    char cmd [200];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system (cmd) != 0)
        rc = 1;
    return rc;
}

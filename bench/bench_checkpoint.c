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
    return 0;
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

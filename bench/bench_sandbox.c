/*  bench/bench_sandbox.c — what the sandbox costs a tool call.

    A tool call's process is started by sb_spawn_run (sandbox/spawn.h),
    the very function the shell tool uses. This runs `true` through it 200
    times in each sandbox this machine can run — none (the baseline),
    bwrap, landlock — with a data folder hidden as serve hides one, and
    prints the median and p90 wall time of one call, start to reaped:

        {"bench":"sandbox.spawn.bwrap","value":MEDIAN,"unit":"us","p90":P90,
         "baseline":NONE_MEDIAN,"ratio":MEDIAN/NONE_MEDIAN,"runs":200}

    usage: bench_sandbox [RUNS]   (default 200)
*/
#include "bench/bench_util.h"
#include "sandbox/spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

//  The median and p90 of `runs` calls of `true` in the sandbox `kind`;
//  -1 when that sandbox cannot run here.
static int
s_measure (const char *kind, const char *ws, int runs, double *median, double *p90)
{
    char err [1024];
    if (sb_spawn_sandbox_init (kind, err, sizeof err) != 0) {
        fprintf (stderr, "bench_sandbox: %s: %s\n", kind, err);
        return -1;
    }
    double *t = calloc ((size_t) runs, sizeof *t);
    if (!t)
        return -1;
    const char *argv [] = { "true", NULL };
    sb_spawn_opts_t o = { .argv = argv, .cwd = ws, .cancel_fd = -1 };
    for (int i = 0; i < runs; i++) {
        sb_spawn_result_t r;
        double t0 = sb_bench_now_us ();
        if (sb_spawn_run (&o, &r, err, sizeof err) != 0 || r.exit_code != 0) {
            fprintf (stderr, "bench_sandbox: %s: run %d failed: %s (exit %d)\n", kind, i, err, r.exit_code);
            sb_spawn_result_clear (&r);
            free (t);
            return -1;
        }
        t [i] = sb_bench_now_us () - t0;
        sb_spawn_result_clear (&r);
    }
    qsort (t, (size_t) runs, sizeof *t, sb_bench_cmp);
    *median = t [runs / 2];
    *p90 = t [runs * 9 / 10];
    free (t);
    return 0;
}

int
main (int argc, char **argv)
{
    int runs = argc > 1 ? atoi (argv [1]) : 200;
    if (runs < 1 || runs > 100000)
        runs = 200;
    char base [] = "/tmp/sb-bench-sandbox-XXXXXX";
    if (!mkdtemp (base))
        return 1;
    char ws [sizeof base + 8], data [sizeof base + 8];
    snprintf (ws, sizeof ws, "%s/ws", base);
    snprintf (data, sizeof data, "%s/data", base);
    mkdir (ws, 0755);
    mkdir (data, 0700);
    sb_spawn_init_subreaper ();
    sb_spawn_sandbox_hide (data);
    double none = 0, p90 = 0;
    int rc = 0;
    if (s_measure ("none", ws, runs, &none, &p90) != 0)
        rc = 1;
    else
        printf ("{\"bench\":\"sandbox.spawn.none\",\"value\":%.0f,\"unit\":\"us\",\"p90\":%.0f,\"runs\":%d,"
                "\"load1\":%.2f}\n", none, p90, runs, sb_bench_load ());
    const char *kinds [] = { "bwrap", "landlock" };
    for (size_t k = 0; k < 2 && rc == 0; k++) {
        double med;
        if (s_measure (kinds [k], ws, runs, &med, &p90) != 0)
            continue;               //  not available here: said on stderr
        printf ("{\"bench\":\"sandbox.spawn.%s\",\"value\":%.0f,\"unit\":\"us\",\"p90\":%.0f,"
                "\"baseline\":%.0f,\"ratio\":%.2f,\"runs\":%d,\"load1\":%.2f}\n",
                kinds [k], med, p90, none, none > 0 ? med / none : 0, runs, sb_bench_load ());
        fflush (stdout);
    }
    rmdir (ws);
    rmdir (data);
    rmdir (base);
    return rc;
}

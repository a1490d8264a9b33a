/*  bench/bench_util.h — what the C benchmarks share: the clock, the
    machine's load (the figures depend on it) and percentiles. */
#ifndef SB_BENCH_UTIL_H_INCLUDED
#define SB_BENCH_UTIL_H_INCLUDED
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

//  The monotonic clock, in microseconds.
static inline double
sb_bench_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

//  The machine's 1-minute load, -1 when it cannot be read.
static inline double
sb_bench_load (void)
{
    double l = -1;
    FILE *f = fopen ("/proc/loadavg", "r");
    if (f) {
        if (fscanf (f, "%lf", &l) != 1)
            l = -1;
        fclose (f);
    }
    return l;
}

//  qsort's order for doubles.
static inline int
sb_bench_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

//  The p-quantile (0..1) of v [0..n), which it sorts.
static inline double
sb_bench_pct (double *v, int n, double p)
{
    qsort (v, (size_t) n, sizeof *v, sb_bench_cmp);
    int k = (int) (p * (n - 1) + 0.5);
    return v [k < n ? k : n - 1];
}
#endif

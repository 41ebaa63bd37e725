/* Timing, a cheap random generator (and buffers filled from it) and medians
 * shared by the C benchmarks. */
#ifndef CRPM_BENCH_UTIL_H
#define CRPM_BENCH_UTIL_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static inline uint64_t rnd(void)
{
    rng ^= rng << 13; /* xorshift64 */
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* n bytes of rnd() output (incompressible, never all zero). */
static inline void fill_random(void *p, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd();
        memcpy((char *)p + i, &v, n - i < 8 ? n - i : 8);
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
#endif

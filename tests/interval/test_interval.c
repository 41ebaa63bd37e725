/* Automatic checkpoint interval (lib/mpi/interval.c), without MPI:
 *  - the formula against Young's sqrt(2CM) and against a numerical minimum of
 *    the expected run time of Daly's failure model;
 *  - a synthetic workload on a virtual clock (fixed-length iterations, noisy
 *    checkpoint costs, expensive first checkpoints) driven exactly as
 *    crpm_snapshot drives the module: the intervals it produces converge to
 *    the formula's value for the true mean cost, and follow a change of cost;
 *  - bad samples are ignored. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "interval.h"

static int checks, failures;
#define CHECK(cond, ...)                                   \
    do {                                                   \
        checks++;                                          \
        if (!(cond)) {                                     \
            failures++;                                    \
            fprintf(stderr, "FAIL line %d: %s: ", __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                  \
            fputc('\n', stderr);                           \
        }                                                  \
    } while (0)

static double rel(double a, double b) { return fabs(a - b) / fabs(b); }

/* Daly's expected wall time to complete `work` seconds of computation with
 * compute interval tau, checkpoint cost c, restart cost r and exponentially
 * distributed failures of mean m. */
static double expected_time(double tau, double c, double r, double m, double work)
{
    return m * exp(r / m) * (exp((tau + c) / m) - 1) * work / tau;
}

/* Golden-section search of the interval minimising expected_time. */
static double numeric_optimum(double c, double r, double m)
{
    double lo = 1e-6 * m, hi = 3 * m, g = (sqrt(5) - 1) / 2;
    for (int i = 0; i < 300; i++) {
        double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
        if (expected_time(a, c, r, m, 1) < expected_time(b, c, r, m, 1))
            hi = b;
        else
            lo = a;
    }
    return (lo + hi) / 2;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

typedef struct workload {
    double dt;       /* one iteration of computation */
    double cost;     /* mean checkpoint cost */
    double noise;    /* relative spread of a cost (uniform +-) */
    int slow_first;  /* the first checkpoints cost 4x (containers being filled) */
} workload;

/* Runs `iters` iterations on a virtual clock with crpm_snapshot's logic and
 * returns the mean compute time between the checkpoints after the first
 * `skip` ones. */
static double simulate(crpm_interval *iv, const workload *w, long iters, int skip, int *nckpt)
{
    double t = 0, last_end = 0, sum = 0;
    int n = 0, counted = 0;
    for (long i = 0; i < iters; i++) {
        t += w->dt;
        if (!crpm_interval_due(iv, t - last_end))
            continue;
        double interval = t - last_end;
        double c = w->cost * (1 + w->noise * (2 * uniform() - 1));
        if (n < w->slow_first)
            c *= 4;
        t += c;
        crpm_interval_update(iv, c);
        last_end = t;
        if (n++ > skip) { /* intervals chosen from settled costs */
            sum += interval;
            counted++;
        }
    }
    *nckpt = n;
    return counted ? sum / counted : 0;
}

int main(void)
{
    /* ---- the formula ---- */
    const double M = 3600;
    double small = crpm_interval_daly(0.01, M);
    CHECK(rel(small, sqrt(2 * 0.01 * M)) < 2e-3, "C << M: %g vs Young %g", small, sqrt(2 * 0.01 * M));
    CHECK(crpm_interval_daly(0, M) == 0 && crpm_interval_daly(1, 0) == 0, "degenerate inputs give 0");
    CHECK(crpm_interval_daly(2 * M, M) == M && crpm_interval_daly(10 * M, M) == M, "C >= 2M gives M");
    const double costs[] = {0.001, 0.1, 5, 60, 300};
    for (size_t i = 0; i < sizeof costs / sizeof costs[0]; i++) {
        double c = costs[i], t = crpm_interval_daly(c, M), opt = numeric_optimum(c, 0, M);
        /* Daly's estimate is within a few per cent of the true optimum, and
         * the run time it gives within 0.1 % of the minimum. */
        CHECK(rel(t, opt) < 0.03, "C = %g: interval %g, numerical optimum %g", c, t, opt);
        CHECK(rel(expected_time(t, c, 0, M, 1), expected_time(opt, c, 0, M, 1)) < 1e-3,
              "C = %g: expected time %g vs minimum %g", c, expected_time(t, c, 0, M, 1),
              expected_time(opt, c, 0, M, 1));
    }

    /* ---- first checkpoint at the first chance, then from the cost ---- */
    crpm_interval iv;
    crpm_interval_init(&iv, 100);
    CHECK(iv.interval_s == 0 && crpm_interval_due(&iv, 0), "no sample: due at once");
    CHECK(crpm_interval_update(&iv, 0.5) == crpm_interval_daly(0.5, 100), "first sample taken as is");
    CHECK(!crpm_interval_due(&iv, iv.interval_s * 0.99) && crpm_interval_due(&iv, iv.interval_s), "due at interval");
    double before = iv.interval_s;
    crpm_interval_update(&iv, -1);
    crpm_interval_update(&iv, NAN);
    crpm_interval_update(&iv, INFINITY);
    CHECK(iv.interval_s == before && iv.nsamples == 1, "bad samples ignored (%g, %lu)", iv.interval_s, iv.nsamples);

    /* ---- synthetic workload: converges to the formula's value ---- */
    workload w = {.dt = 0.002, .cost = 0.05, .noise = 0.3, .slow_first = 2};
    const double mtbf = 600;
    crpm_interval_init(&iv, mtbf);
    int n = 0;
    double want = crpm_interval_daly(w.cost, mtbf);
    double got = simulate(&iv, &w, 20000000, 20, &n);
    printf("synthetic: %d checkpoints, mean interval %.4f s, formula %.4f s (cost %.3f s, MTBF %.0f s), "
           "last interval %.4f s\n", n, got, want, w.cost, mtbf, iv.interval_s);
    CHECK(n > 100, "only %d checkpoints", n);
    CHECK(rel(got, want) < 0.02, "mean interval %g, formula %g", got, want);
    CHECK(rel(iv.cost_s, w.cost) < 0.15, "smoothed cost %g, true %g", iv.cost_s, w.cost);

    /* ---- the cost changes: the interval follows ---- */
    w.cost = 0.2;
    w.slow_first = 0;
    want = crpm_interval_daly(w.cost, mtbf);
    got = simulate(&iv, &w, 20000000, 20, &n);
    printf("cost x4: %d checkpoints, mean interval %.4f s, formula %.4f s\n", n, got, want);
    CHECK(rel(got, want) < 0.02, "after the change: mean interval %g, formula %g", got, want);

    /* Without noise, the interval settles on the formula exactly. */
    crpm_interval_init(&iv, mtbf);
    for (int i = 0; i < 200; i++)
        crpm_interval_update(&iv, i < 2 ? 1.0 : 0.1);
    CHECK(rel(iv.interval_s, crpm_interval_daly(0.1, mtbf)) < 1e-9, "settled %g vs %g", iv.interval_s,
          crpm_interval_daly(0.1, mtbf));

    printf("interval_test: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}

/* What the run log costs a checkpoint (bench/runlog/run.py): each rank owns
 * M MiB, rewrites a fraction F of it between checkpoints, and times every
 * crpm_checkpoint call; the configuration says whether the log is on.
 *
 *   bench_runlog --crpm cfg.ini [--alt cfg2.ini --cycles N] [--mib M] [--dirty F] [--ckpts K]
 *                [--levels 1,2] [--compute-ms C]
 *
 * With --alt the process runs N cycles of two segments, one per
 * configuration (their order swapped every cycle): crpm_init, K checkpoints,
 * crpm_finalize; the two configurations then meet the machine's load alike.
 * C: milliseconds of computing between checkpoints.  A relaunch recovers and
 * goes on from the checkpoint it finds.
 *
 * Rank 0 prints one line "bench {json}": per call [configuration (0: --crpm,
 * 1: --alt), its place in the segment, level, seconds (the slowest rank's)]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "crpm.h"

static int rank;

static void check(int rc, const char *what)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "bench_runlog rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static double mib = 16, dirty = 0.05, compute_ms = 0;
static int ckpts = 100, levels[16] = {1}, nlev = 1;

/* One segment: init with cfg, its checkpoints, finalize; rank 0 prints its
 * calls (the first with `first`). */
static void segment(const char *cfg, int which, double *a, size_t n, double *t, double *tmax, int first)
{
    size_t w = (size_t)((double)n * dirty);
    check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init");
    int k0 = 0;
    check(crpm_protect(0, &k0, 1, CRPM_INT), "crpm_protect");
    check(crpm_protect(1, a, (int64_t)n, CRPM_DOUBLE), "crpm_protect");
    int st = crpm_status();
    check(st, "crpm_status");
    if (st > 0) /* the example run's relaunch (run.py) */
        check(crpm_recover(), "crpm_recover");
    for (int k = 0; k < ckpts; k++)
        t[k] = 0;
    for (int k = k0; k < ckpts; k++) {
        size_t w0 = ((size_t)k * w) % n;
        for (size_t j = 0; j < w; j++)
            a[(w0 + j) % n] += 1.0;
        k0 = k + 1; /* the iteration a relaunch resumes at */
        MPI_Barrier(MPI_COMM_WORLD); /* every call starts together: its time is the checkpoint's */
        double t0 = MPI_Wtime();
        check(crpm_checkpoint(k + 1, levels[k % nlev]), "crpm_checkpoint");
        t[k] = MPI_Wtime() - t0;
        if (compute_ms > 0) { /* the application's time between checkpoints */
            double until = MPI_Wtime() + compute_ms / 1000.0;
            while (MPI_Wtime() < until)
                a[k % n] += 1e-9;
        }
    }
    check(crpm_finalize(), "crpm_finalize");
    MPI_Reduce(t, tmax, ckpts, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int k = 0; k < ckpts; k++)
            printf("%s[%d,%d,%d,%.9g]", first && !k ? "" : ",", which, k, levels[k % nlev], tmax[k]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *cfg = NULL, *alt = NULL;
    int cycles = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--crpm"))
            cfg = argv[i + 1];
        else if (!strcmp(argv[i], "--alt"))
            alt = argv[i + 1];
        else if (!strcmp(argv[i], "--cycles"))
            cycles = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mib"))
            mib = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--dirty"))
            dirty = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--compute-ms"))
            compute_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--ckpts"))
            ckpts = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--levels")) {
            nlev = 0;
            for (char *s = argv[i + 1], *e; *s && nlev < 16; s = *e ? e + 1 : e) {
                levels[nlev++] = (int)strtol(s, &e, 10);
                if (e == s)
                    break;
            }
        }
    }
    size_t n = (size_t)(mib * 1024 * 1024 / sizeof(double));
    double *a = malloc(n * sizeof *a), *t = malloc((size_t)ckpts * sizeof *t), *tmax = malloc((size_t)ckpts * sizeof *t);
    if (!cfg || !a || !t || !tmax || nlev < 1 || ckpts < 1 || cycles < 1) {
        fprintf(stderr, "bench_runlog: need --crpm and sane sizes\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t j = 0; j < n; j++)
        a[j] = (double)j;
    if (rank == 0)
        printf("bench {\"calls\":[");
    for (int c = 0; c < cycles; c++)
        for (int s = 0; s < (alt ? 2 : 1); s++) {
            int which = alt ? (s + c) % 2 : 0; /* the order swapped every cycle */
            segment(which ? alt : cfg, which, a, n, t, tmax, c == 0 && s == 0);
        }
    if (rank == 0) {
        printf("]}\n");
        fflush(stdout);
    }
    free(a);
    free(t);
    free(tmax);
    MPI_Finalize();
    return 0;
}

/* The C side of the Python binding's overhead benchmark (run.py): protects
 * K double arrays of M MiB in all per rank, and N times writes the same
 * fraction of their 256-byte blocks (the first double of every step-th
 * block) and takes a level-1 checkpoint, timing each crpm_checkpoint call
 * as the program sees it.  bench_ckpt.py does exactly the same through the
 * Python package.
 *
 *   mpirun -n NP bench_ckpt --crpm cfg.ini [--mib M] [--arrays K]
 *                          [--fraction F] [--iters N]
 *
 * Prints one line "times <t1> <t2> ..." on rank 0: per checkpoint, the
 * slowest rank's seconds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "crpm.h"

static void die(int rc, const char *what)
{
    fprintf(stderr, "bench_ckpt: %s: %s: %s\n", what, crpm_strerror(rc), crpm_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *cfg = NULL;
    double mib = 64, fraction = 0.1;
    int arrays = 8, iters = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--crpm") == 0)
            cfg = argv[i + 1];
        else if (strcmp(argv[i], "--mib") == 0)
            mib = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--arrays") == 0)
            arrays = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--fraction") == 0)
            fraction = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    }
    if (!cfg || mib <= 0 || arrays < 1 || fraction <= 0 || fraction > 1 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: bench_ckpt --crpm cfg.ini [--mib M] [--arrays K] [--fraction F] [--iters N]\n");
        MPI_Finalize();
        return 2;
    }
    size_t n = (size_t)(mib * 1048576.0 / 8.0 / arrays);
    size_t step = (size_t)llround(32.0 / fraction); /* 32 doubles = one 256-byte block */
    double **a = malloc(sizeof *a * (size_t)arrays);
    int rc = crpm_init(cfg, MPI_COMM_WORLD);
    if (rc)
        die(rc, "crpm_init");
    for (int k = 0; k < arrays; k++) {
        a[k] = calloc(n, sizeof **a);
        if (!a[k])
            die(CRPM_ERR_NOMEM, "calloc");
        for (size_t j = 0; j < n; j++)
            a[k][j] = (double)j;
        if ((rc = crpm_protect(k, a[k], (int64_t)n, CRPM_DOUBLE)))
            die(rc, "crpm_protect");
    }
    double *t = malloc(sizeof *t * (size_t)iters);
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < arrays; k++)
            for (size_t j = (size_t)i % step; j < n; j += step)
                a[k][j] = (double)(1000 * i + k);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if ((rc = crpm_checkpoint(i + 1, CRPM_L1)))
            die(rc, "crpm_checkpoint");
        double dt = MPI_Wtime() - t0;
        MPI_Reduce(&dt, &t[i], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    }
    if (rank == 0) {
        printf("times");
        for (int i = 0; i < iters; i++)
            printf(" %.9f", t[i]);
        printf("\n");
        fflush(stdout);
    }
    if ((rc = crpm_finalize()))
        die(rc, "crpm_finalize");
    for (int k = 0; k < arrays; k++)
        free(a[k]);
    free(a);
    free(t);
    MPI_Finalize();
    return 0;
}

/* Consumer program of the installed libcrpm (tests/consumers): an iterative
 * computation on every rank, coupled by an MPI_Allreduce, checkpointed every
 * 5 steps after the step counter has advanced.  Prints "restarted at step N"
 * after a recovery and "result <bits>" (the final global sum, bit for bit)
 * at the end.  The update keeps a memory of the past (no fast contraction),
 * so a restart from a wrong state changes the result.  Valid C99 and C++
 * (the C++-only consumer compiles it too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <crpm.h>

static void check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "app: %s: %s\n", what, crpm_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static double global_sum(const double *x, int n)
{
    double local = 0, global = 0;
    for (int i = 0; i < n; i++)
        local += x[i];
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return global;
}

int main(int argc, char **argv)
{
    const int n = 4096, steps = 400;
    int rank, step = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2) {
        fprintf(stderr, "usage: app CONFIG\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double *x = (double *)malloc(n * sizeof *x);
    if (!x)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < n; i++)
        x[i] = rank + i * 1e-3;

    check(crpm_init(argv[1], MPI_COMM_WORLD), "crpm_init");
    check(crpm_protect(0, &step, 1, CRPM_INT), "crpm_protect");
    check(crpm_protect(1, x, n, CRPM_DOUBLE), "crpm_protect");
    int st = crpm_status();
    check(st, "crpm_status");
    if (st > 0) {
        check(crpm_recover(), "crpm_recover");
        if (rank == 0)
            printf("restarted at step %d\n", step);
    }
    while (step < steps) {
        double g = global_sum(x, n);
        for (int i = 0; i < n; i++)
            x[i] = 0.9999 * x[i] + 1e-7 * g + (double)((i * 7 + step) % 13);
        step++;
        if (step % 5 == 0)
            check(crpm_checkpoint(step, CRPM_L1), "crpm_checkpoint");
    }
    double g = global_sum(x, n);
    uint64_t bits;
    memcpy(&bits, &g, sizeof bits);
    if (rank == 0)
        printf("result %016llx\n", (unsigned long long)bits);
    check(crpm_finalize(), "crpm_finalize");
    free(x);
    MPI_Finalize();
    return 0;
}

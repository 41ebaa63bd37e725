/* Test program of restart on another number of ranks (rs_scenarios.py):
 * a 2-D global dataset of doubles split by rows, a replicated counter, and
 * on request a per-rank array or another definition of the dataset.
 *
 *   rs_app --crpm cfg [--per-rank] [--ny N] [--float] [--level L]
 *
 * Fresh start: fills the dataset with f(global index), takes one checkpoint
 * at level L (default 1), finalizes.  Restart: protects this run's boxes,
 * recovers, checks every element against f and prints "rs_app: data ok".
 * Every failure is printed by each rank as "rs_app rank R: <call> failed:
 * <code text>: <message>" (the scripts check that every rank reports it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "crpm.h"
#include "mpi_app.h"

static int rank, nranks;

static int fail(int rc, const char *what)
{
    if (rc >= 0)
        return 0;
    printf("rs_app rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stdout);
    return 1;
}

static double f(long gi) { return 0.5 * (double)gi + 1.0 / (1.0 + (double)(gi % 97)); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *cfg = NULL;
    int per_rank = 0, as_float = 0, level = CRPM_L1;
    long ny = 64, nx = 48;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--crpm") == 0 && i + 1 < argc)
            cfg = argv[++i];
        else if (strcmp(argv[i], "--per-rank") == 0)
            per_rank = 1;
        else if (strcmp(argv[i], "--float") == 0)
            as_float = 1;
        else if (strcmp(argv[i], "--ny") == 0 && i + 1 < argc)
            ny = atol(argv[++i]);
        else if (strcmp(argv[i], "--level") == 0 && i + 1 < argc)
            level = atoi(argv[++i]);
    }
    if (!cfg || fail(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init")) {
        MPI_Finalize();
        return 1;
    }
    int st = crpm_status();
    app_status_agreed("rs_app", st);
    if (rank == 0)
        printf("rs_app: restart %s\n", st == CRPM_STATUS_RESHAPED ? "reshaped" : st == CRPM_STATUS_L4 ? "l4"
                                       : st == CRPM_STATUS_FRESH ? "fresh" : "same rank count");
    long r0 = rank * (ny / nranks) + (rank < ny % nranks ? rank : ny % nranks);
    long rows = ny / nranks + (rank < ny % nranks);
    size_t n = (size_t)(rows * nx);
    double *u = calloc(n + 1, sizeof *u);
    float *uf = calloc(n + 1, sizeof *uf);
    int counter = 0, mine = 1000 + rank, rc = 0;
    int64_t dims[2] = {ny, nx}, off[2] = {r0, 0}, cnt[2] = {rows, nx};
    rc |= fail(crpm_define_global(3, 2, dims, as_float ? CRPM_FLOAT : CRPM_DOUBLE, "field"), "crpm_define_global");
    rc |= fail(crpm_protect_replicated(0, &counter, 1, CRPM_INT), "crpm_protect_replicated");
    if (as_float)
        rc |= fail(crpm_protect(1, uf, (int64_t)n, CRPM_FLOAT), "crpm_protect");
    else
        rc |= fail(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect");
    rc |= fail(crpm_add_subset(3, 1, off, cnt), "crpm_add_subset");
    if (per_rank)
        rc |= fail(crpm_protect(7, &mine, 1, CRPM_INT), "crpm_protect");
    if (rc)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (st > 0) {
        if (fail(crpm_recover(), "crpm_recover")) {
            MPI_Finalize();
            return 1;
        }
        long bad = 0, all = 0;
        for (long i = 0; i < rows; i++)
            for (long j = 0; j < nx; j++)
                bad += u[i * nx + j] != f((r0 + i) * nx + j);
        bad += counter != 17;
        MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            printf(all ? "rs_app: %ld wrong elements\n" : "rs_app: data ok%.0ld\n", all);
    } else {
        for (long i = 0; i < rows; i++)
            for (long j = 0; j < nx; j++)
                u[i * nx + j] = f((r0 + i) * nx + j);
        counter = 17;
        if (fail(crpm_checkpoint(1, level), "crpm_checkpoint")) {
            MPI_Finalize();
            return 1;
        }
        if (rank == 0)
            printf("rs_app: checkpointed\n");
    }
    fflush(stdout);
    rc = fail(crpm_finalize(), "crpm_finalize");
    free(u);
    free(uf);
    MPI_Finalize();
    return rc;
}

/* FTI's global datasets through libcrpm's FTI layer (rs_scenarios.py):
 *
 *   fti_vpr config.fti L
 *
 * Fresh start: a 40 x 36 global dataset of doubles split by rows, filled
 * with f(global index), one checkpoint at level L, FTI_Finalize (the
 * configuration keeps it).  Restart (on any number of ranks): FTI_Status()
 * is 3 when the rank count changed, FTI_RecoverDatasetDimension gives the
 * saved shape, each rank adds its new rows and FTI_Recover fills them;
 * prints "fti_vpr: data ok" when every element is f(index). */
#include <stdio.h>
#include <stdlib.h>
#include <fti.h>

static double f(long gi) { return 3.0 * (double)gi - 1.0 / (2.0 + (double)(gi % 13)); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 3 || FTI_Init(argv[1], MPI_COMM_WORLD) != FTI_SCES) {
        MPI_Finalize();
        return 1;
    }
    int rank, size, level = atoi(argv[2]);
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    FTIT_hsize_t dims[2] = {40, 36};
    if (FTI_DefineGlobalDataset(0, 2, dims, "field", NULL, FTI_DBLE) != FTI_SCES)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int st = FTI_Status();
    if (rank == 0)
        printf("fti_vpr: status %d on %d ranks\n", st, size);
    if (st != 0) {
        if (FTI_RecoverDatasetDimension(0) != FTI_SCES || FTI_GetDatasetRank(0) != 2)
            MPI_Abort(MPI_COMM_WORLD, 1);
        FTIT_hsize_t *span = FTI_GetDatasetSpan(0, 2);
        if (!span)
            MPI_Abort(MPI_COMM_WORLD, 1);
        dims[0] = span[0];
        dims[1] = span[1];
    }
    long ny = (long)dims[0], nx = (long)dims[1];
    long r0 = rank * (ny / size) + (rank < ny % size ? rank : ny % size), rows = ny / size + (rank < ny % size);
    double *u = calloc((size_t)(rows * nx) + 1, sizeof *u);
    FTIT_hsize_t off[2] = {(FTIT_hsize_t)r0, 0}, cnt[2] = {(FTIT_hsize_t)rows, (FTIT_hsize_t)nx};
    if (FTI_Protect(1, u, rows * nx, FTI_DBLE) != FTI_SCES || FTI_AddSubset(1, 2, off, cnt, 0) != FTI_SCES)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int rc = 0;
    if (st != 0) {
        rc = FTI_Recover() != FTI_SCES;
        long bad = 0, all = 0;
        for (long i = 0; !rc && i < rows * nx; i++)
            bad += u[i] != f(r0 * nx + i);
        MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, FTI_COMM_WORLD);
        if (rank == 0 && !rc)
            printf(all ? "fti_vpr: %ld wrong elements\n" : "fti_vpr: data ok%.0ld\n", all);
    } else {
        for (long i = 0; i < rows * nx; i++)
            u[i] = f(r0 * nx + i);
        rc = FTI_Checkpoint(1, level) != FTI_DONE;
        if (rank == 0 && !rc)
            printf("fti_vpr: checkpointed at level %d\n", level);
    }
    fflush(stdout);
    FTI_Finalize();
    free(u);
    MPI_Finalize();
    return rc;
}

/* 2-D heat diffusion written the way FTI users write it: FTI_Snapshot once
 * per step decides about recovery and checkpoints.  Rows are split over the
 * ranks; the top edge of the plate is held hot.
 * Usage: heat_snapshot CONFIG [STEPS] */
#include <fti.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_app.h"

#define NX 256
#define ROWS 48

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONFIG [STEPS]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int steps = argc > 2 ? atoi(argv[2]) : 3000;
    if (FTI_Init(argv[1], MPI_COMM_WORLD) != FTI_SCES) {
        MPI_Finalize();
        return 1;
    }
    int rank, nprocs;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &nprocs);

    double *g = calloc((ROWS + 2) * NX, sizeof *g), *h = calloc((ROWS + 2) * NX, sizeof *h);
    if (rank == 0)
        for (int x = 0; x < NX; x++)
            g[x] = 100.0;
    int step = 0, restarted = FTI_Status() != 0;
    FTI_Protect(0, &step, 1, FTI_INTG);
    FTI_Protect(1, g, (ROWS + 2) * NX, FTI_DBLE);

    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < nprocs - 1 ? rank + 1 : MPI_PROC_NULL;
    for (; step < steps; step++) {
        if (FTI_Snapshot() == FTI_SCES && restarted && rank == 0)
            printf("recovered at step %d\n", step);
        restarted = 0;
        MPI_Sendrecv(&g[NX], NX, MPI_DOUBLE, up, 1, &g[(ROWS + 1) * NX], NX, MPI_DOUBLE, down, 1, FTI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&g[ROWS * NX], NX, MPI_DOUBLE, down, 2, &g[0], NX, MPI_DOUBLE, up, 2, FTI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        double diff = 0;
        for (int y = 1; y <= ROWS; y++)
            for (int x = 0; x < NX; x++) {
                double l = x > 0 ? g[y * NX + x - 1] : 0, r = x < NX - 1 ? g[y * NX + x + 1] : 0;
                double v = 0.25 * (g[(y - 1) * NX + x] + g[(y + 1) * NX + x] + l + r);
                diff = diff > v - g[y * NX + x] ? diff : v - g[y * NX + x];
                h[y * NX + x] = v;
            }
        memcpy(&g[NX], &h[NX], ROWS * NX * sizeof *g);
        if (rank == 0) /* the hot edge */
            for (int x = 0; x < NX; x++)
                g[x] = 100.0;
        if (step % 250 == 0) {
            double all;
            MPI_Allreduce(&diff, &all, 1, MPI_DOUBLE, MPI_MAX, FTI_COMM_WORLD);
            if (rank == 0)
                printf("step %d max change %a\n", step, all);
            fflush(stdout);
        }
    }
    uint64_t mine = app_fnv1a(APP_FNV_SEED, &g[NX], ROWS * NX * sizeof *g), *all = NULL;
    if (rank == 0)
        all = malloc(sizeof *all * (size_t)nprocs);
    MPI_Gather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, FTI_COMM_WORLD);
    if (rank == 0) {
        printf("checksum %016llx\n", (unsigned long long)app_fnv1a(1, all, sizeof *all * (size_t)nprocs));
        free(all);
    }
    FTI_Finalize();
    free(g);
    free(h);
    MPI_Finalize();
    return 0;
}

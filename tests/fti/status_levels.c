/* FTI_Status / FTI_Recover / FTI_Checkpoint, cycling through levels 1 to 4,
 * the way FTI users write it.  The status is checked at every iteration: a
 * program that recovers whenever FTI_Status() != 0 must recover once.
 * Usage: status_levels CONFIG [ITERS] */
#include <fti.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 40000
#define EVERY 20

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONFIG [ITERS]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int iters = argc > 2 ? atoi(argv[2]) : 2000;
    if (FTI_Init(argv[1], MPI_COMM_WORLD) != FTI_SCES) {
        MPI_Finalize();
        return 1;
    }
    int rank;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    int iter = 0, recoveries = 0;
    uint64_t *state = malloc(N * sizeof *state);
    double sum = 0;
    for (int i = 0; i < N; i++)
        state[i] = (uint64_t)rank * 1000003u + (uint64_t)i;
    FTI_Protect(0, &iter, 1, FTI_INTG);
    FTI_Protect(1, state, N, FTI_ULNG);
    FTI_Protect(2, &sum, 1, FTI_DBLE);

    while (iter < iters) {
        if (FTI_Status() != 0) {
            if (FTI_Recover() != FTI_SCES) {
                fprintf(stderr, "rank %d: recovery failed\n", rank);
                MPI_Abort(FTI_COMM_WORLD, 1);
            }
            recoveries++;
            if (rank == 0)
                printf("recovered at iteration %d\n", iter);
            if (FTI_Status() != 0) {
                fprintf(stderr, "rank %d: FTI_Status() is not 0 after a recovery\n", rank);
                MPI_Abort(FTI_COMM_WORLD, 1);
            }
        }
        /* some work: a xorshift step on every element, and a global sum */
        double local = 0, all = 0;
        for (int i = 0; i < N; i++) {
            uint64_t x = state[i];
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            state[i] = x;
            local += (double)(x >> 40);
        }
        MPI_Allreduce(&local, &all, 1, MPI_DOUBLE, MPI_MAX, FTI_COMM_WORLD);
        sum += all;
        iter++;
        if (iter % EVERY == 0) {
            int level = (iter / EVERY) % 4 + 1;
            if (FTI_Checkpoint(iter / EVERY, level) != FTI_DONE) {
                fprintf(stderr, "rank %d: checkpoint %d at level %d failed\n", rank, iter / EVERY, level);
                MPI_Abort(FTI_COMM_WORLD, 1);
            }
        }
        if (rank == 0 && iter % 100 == 0) {
            printf("iter %d sum %a\n", iter, sum);
            fflush(stdout);
        }
    }
    uint64_t h = 0xcbf29ce484222325ULL, *all = NULL;
    for (int i = 0; i < N; i++)
        h = (h ^ state[i]) * 0x100000001b3ULL;
    int nprocs;
    MPI_Comm_size(FTI_COMM_WORLD, &nprocs);
    if (rank == 0)
        all = malloc(sizeof *all * (size_t)nprocs);
    MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, FTI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 1; r < nprocs; r++)
            all[0] = (all[0] ^ all[r]) * 0x100000001b3ULL;
        printf("checksum %016llx sum %a\n", (unsigned long long)all[0], sum);
        printf("recoveries on rank 0: %d\n", recoveries);
        free(all);
    }
    FTI_Finalize();
    free(state);
    MPI_Finalize();
    return 0;
}

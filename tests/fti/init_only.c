/* FTI_Init on the given configuration, one protected variable, one
 * checkpoint at LEVEL (default 1), FTI_Finalize; prints what FTI_Init
 * returned.
 * Usage: init_only CONFIG [LEVEL] */
#include <fti.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, x = 42;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rc = FTI_Init(argc > 1 ? argv[1] : NULL, MPI_COMM_WORLD);
    if (rank == 0)
        printf("FTI_Init returned %d\n", rc);
    if (rc == FTI_SCES) {
        FTI_Protect(0, &x, 1, FTI_INTG);
        if (FTI_Status() != 0)
            FTI_Recover();
        rc = FTI_Checkpoint(1, argc > 2 ? atoi(argv[2]) : 1) == FTI_DONE ? FTI_Finalize() : FTI_NSCS;
    }
    MPI_Finalize();
    return rc == FTI_SCES ? 0 : 1;
}

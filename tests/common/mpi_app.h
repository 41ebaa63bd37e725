/* Pieces shared by the MPI test applications driven by the crash scripts
 * (tests/l2/l2_app.c, tests/l3/l3_shapes.c, tests/fti/heat_snapshot.c):
 * the FNV-1a digest of their results and the check that every rank sees
 * the same restart status.  Header-only. */
#ifndef CRPM_TEST_MPI_APP_H
#define CRPM_TEST_MPI_APP_H
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define APP_FNV_SEED 0xcbf29ce484222325ULL

static inline uint64_t app_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* Collective: rank 0 prints "<name>: status <st>" (what the scripts parse),
 * or the range when ranks disagree; 1 when all ranks hold the same status. */
static inline int app_status_agreed(const char *name, int st)
{
    int lo, hi, rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&st, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&st, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        if (lo != hi)
            printf("%s: status differs across ranks: %d..%d\n", name, lo, hi);
        else
            printf("%s: status %d\n", name, st);
        fflush(stdout);
    }
    return lo == hi;
}

#endif

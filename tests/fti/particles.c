/* Particles in a user-defined struct, described to FTI as a composite type.
 * Every rank's particle count grows during the run, so after a restart the
 * program asks FTI for the stored size, reallocates with FTI_Realloc and
 * recovers variable by variable with FTI_RecoverVar.
 * Usage: particles CONFIG [STEPS] */
#include <fti.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct particle {
    double pos[3];
    double vel[3];
    int32_t id;
    int32_t hits;
} particle;

static double wall(double x, double *v, int32_t *hits)
{
    if (x < 0 || x > 1) {
        *v = -*v;
        (*hits)++;
        x = x < 0 ? -x : 2 - x;
    }
    return x;
}

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
    int rank;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);

    fti_id_t vec3 = FTI_InitCompositeType("vec3", 3 * sizeof(double), NULL);
    int64_t three = 3;
    FTI_AddVectorField(vec3, "xyz", FTI_DBLE, 0, 1, &three);
    fti_id_t ptype = FTI_InitCompositeType("particle", sizeof(particle), NULL);
    FTI_AddScalarField(ptype, "pos", vec3, offsetof(particle, pos));
    FTI_AddScalarField(ptype, "vel", vec3, offsetof(particle, vel));
    FTI_AddScalarField(ptype, "id", FTI_INTG, offsetof(particle, id));
    FTI_AddScalarField(ptype, "hits", FTI_INTG, offsetof(particle, hits));

    int counts[2] = {0, 0}; /* step, particles */
    int n = 2000 + 16 * rank;
    particle *p = malloc(sizeof *p * (size_t)n);
    for (int i = 0; i < n; i++)
        p[i] = (particle){{0.5, 0.5, 0.5}, {0.001 * (i % 7 + 1), 0.0007 * (i % 5 + 1), 0.0003 * (rank + 1)},
                          rank * 100000 + i, 0};
    counts[1] = n;
    int cid = FTI_setIDFromString("counters"), pid = FTI_setIDFromString("particles");
    FTI_Protect(cid, counts, 2, FTI_INTG);
    FTI_Protect(pid, p, n, ptype);
    FTIT_attribute att = {.name = "particles"};
    FTI_SetAttribute(pid, att, FTI_ATTRIBUTE_NAME);

    if (FTI_Status() != 0) {
        if (FTI_RecoverVarInit() != FTI_SCES || FTI_RecoverVar(cid) != FTI_SCES) {
            fprintf(stderr, "rank %d: cannot recover the counters\n", rank);
            MPI_Abort(FTI_COMM_WORLD, 1);
        }
        int64_t stored = FTI_GetStoredSize(pid);
        if (stored != (int64_t)sizeof(particle) * counts[1]) {
            fprintf(stderr, "rank %d: stored size %lld, expected %d particles\n", rank, (long long)stored,
                    counts[1]);
            MPI_Abort(FTI_COMM_WORLD, 1);
        }
        p = FTI_Realloc(pid, p);
        if (!p || FTI_RecoverVar(pid) != FTI_SCES || FTI_RecoverVarFinalize() != FTI_SCES) {
            fprintf(stderr, "rank %d: cannot recover the particles\n", rank);
            MPI_Abort(FTI_COMM_WORLD, 1);
        }
        n = counts[1];
        if (rank == 0)
            printf("recovered at step %d with %d particles\n", counts[0], n);
        if (FTI_Status() != 0) {
            fprintf(stderr, "rank %d: FTI_Status() is not 0 after the recovery\n", rank);
            MPI_Abort(FTI_COMM_WORLD, 1);
        }
    }

    for (; counts[0] < steps;) {
        for (int i = 0; i < n; i++)
            for (int d = 0; d < 3; d++) {
                p[i].pos[d] += p[i].vel[d];
                p[i].pos[d] = wall(p[i].pos[d], &p[i].vel[d], &p[i].hits);
            }
        counts[0]++;
        if (counts[0] % 97 == 0) { /* a new particle is born on every rank */
            particle *q = realloc(p, sizeof *q * (size_t)(n + 1));
            if (!q)
                MPI_Abort(FTI_COMM_WORLD, 1);
            p = q;
            p[n] = (particle){{0.25, 0.75, 0.5}, {0.0011, -0.0009, 0.0004 * (rank + 1)},
                              rank * 100000 + n, 0};
            n++;
            counts[1] = n;
            FTI_Protect(pid, p, n, ptype);
        }
        if (counts[0] % 25 == 0 && FTI_Checkpoint(counts[0] / 25, 1) != FTI_DONE)
            MPI_Abort(FTI_COMM_WORLD, 1);
        if (counts[0] % 500 == 0) {
            long long hits = 0, all = 0;
            for (int i = 0; i < n; i++)
                hits += p[i].hits;
            MPI_Reduce(&hits, &all, 1, MPI_LONG_LONG, MPI_SUM, 0, FTI_COMM_WORLD);
            if (rank == 0)
                printf("step %d wall hits %lld\n", counts[0], all);
            fflush(stdout);
        }
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < sizeof *p * (size_t)n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    uint64_t x = 0;
    MPI_Reduce(&h, &x, 1, MPI_UINT64_T, MPI_BXOR, 0, FTI_COMM_WORLD);
    if (rank == 0)
        printf("checksum %016llx particles on rank 0: %d\n", (unsigned long long)x, n);
    FTI_Finalize();
    free(p);
    MPI_Finalize();
    return 0;
}

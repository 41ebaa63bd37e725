/* A level-2 whole-file sync never copies damaged data over an intact
 * partner copy.  4 ranks as 4 nodes:
 *
 *   sync_guard <damage_tool> <dir>
 *
 * Checkpoint 1 at level 2, then three at level 1: the partner copies fall
 * three epochs behind, so the next level-2 checkpoint syncs whole files.
 * Between them a CRC entry in every data segment of rank 3's container is
 * damaged (media failing during the run: the data still equals the arrays,
 * so the checkpoint keeps those copies committed).  The level-2 checkpoint must fail on every rank (rank 3 saying
 * it does not copy its container, no rank hanging) and rank 3's partner copy
 * must be exactly what it was.  The next launch finds rank 3's container
 * damaged at every epoch and its copy three epochs behind the others:
 * CRPM_ERR_CORRUPT on every rank naming rank 3, the copy unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "check.h"
#include "crpm.h"

#define N 16384 /* doubles: 128 KiB, eight 16-KiB segments */

static int rank;

static void fill(double *a, int j)
{
    for (int i = 0; i < N; i++)
        a[i] = rank * 1e6 + i + (i < 64 ? j * 0.5 : 0); /* checkpoints change the first block only */
}

static uint64_t file_digest(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint64_t h = 1469598103934665603ull;
    int c;
    REQUIRE(f, "cannot read %s", path);
    while ((c = getc(f)) != EOF)
        h = (h ^ (unsigned char)c) * 0x100000001b3ull;
    fclose(f);
    return h;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    check_set_rank(rank);
    check_set_note(crpm_last_error);
    REQUIRE(argc == 3 && np == 4, "usage: mpiexec -np 4 sync_guard <damage_tool> <dir>");
    char cfg[1024], cmd[2048], copy[1024];
    snprintf(cfg, sizeof cfg, "[basic]\nckpt_dir = %s/node%%n\njob_name = sg\nnode_size = 1\nkeep_last_ckpt = 1\n"
             "verbosity = 0\n[advanced]\nsegment_size = 16K\n", argv[2]);
    snprintf(copy, sizeof copy, "%s/node0/sg/partner-3.crpm", argv[2]);
    if (rank == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", argv[2], argv[2]);
        REQUIRE(system(cmd) == 0, "%s", cmd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double *a = malloc(N * sizeof *a);
    int ck = 0;
    REQUIRE(crpm_init_text(cfg, "sync_guard", MPI_COMM_WORLD) == 0, "init");
    REQUIRE(crpm_protect(0, &ck, 1, CRPM_INT) == 0 && crpm_protect(1, a, N, CRPM_DOUBLE) == 0, "protect");
    for (int j = 1; j <= 4; j++) {
        fill(a, j);
        ck = j;
        REQUIRE(crpm_checkpoint(j, j == 1 ? CRPM_L2 : CRPM_L1) == 0, "checkpoint %d", j);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t before = 0;
    if (rank == 0) {
        before = file_digest(copy);
        snprintf(cmd, sizeof cmd, "'%s' '%s/node3/sg/rank-3.crpm' crcs 3 >/dev/null", argv[1], argv[2]);
        REQUIRE(system(cmd) == 0, "%s", cmd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    fill(a, 5);
    ck = 5;
    int rc = crpm_checkpoint(5, CRPM_L2);
    CHECK(rc != 0, "a level-2 checkpoint synced a damaged container");
    if (rank == 3)
        CHECK(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), "not copying"), "rank 3: %d: %s", rc, crpm_last_error());
    CHECK(crpm_finalize() == 0, "finalize");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        CHECK(file_digest(copy) == before, "rank 3's partner copy was overwritten");
    MPI_Barrier(MPI_COMM_WORLD);
    /* rank 3's container is damaged at every epoch it holds and its copy is
     * three epochs behind the others: no common epoch, a clear error, no change */
    uint64_t all_before = rank == 0 ? file_digest(copy) : 0;
    MPI_Barrier(MPI_COMM_WORLD);
    rc = crpm_init_text(cfg, "sync_guard", MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), "container of rank(s) 3 ") &&
              strstr(crpm_last_error(), "is corrupt"), "restart: %d", rc);
    if (rc == 0)
        crpm_finalize();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        CHECK(file_digest(copy) == all_before, "the refused restart changed rank 3's partner copy");
    free(a);
    int bad = check_summary("sync_guard");
    MPI_Finalize();
    return bad;
}

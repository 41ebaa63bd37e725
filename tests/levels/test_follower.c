/* A new follower level is one file plus one row (issue 34): the copy level
 * (copy_level.c), added to the level table through the test builds' hook,
 * with lib/api.c and lib/mpi/restart.c as they are.  4 ranks, 2 simulated
 * nodes:
 *   1. checkpoints 1-3 at the copy level, 4 at level 1 only (no copy taken);
 *   2. rank 1's container lost: the restart brings it back from its copy
 *      (epoch 3, crpm_status() == COPY_LEVEL), the other ranks roll back to
 *      it, every array holds iteration 3's values;
 *   3. rank 1's container and its copy lost: the restart refuses
 *      (CRPM_ERR_MISSING on every rank), nothing is changed;
 *   4. finalize without keep_last_ckpt removes the copies too.
 * Usage: test_follower <dir> (a fresh directory is made inside it). */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <mpi.h>
#include "check.h"
#include "copy_level.h"
#include "crpm.h"

#define N 4096

static int rank, nranks;
static char dir[1024], copies[1200];
static int data[N];

static void fill(int iter)
{
    for (int i = 0; i < N; i++)
        data[i] = rank * 1000000 + iter * 1000 + i % 997;
}

static int holds(int iter)
{
    for (int i = 0; i < N; i++)
        if (data[i] != rank * 1000000 + iter * 1000 + i % 997)
            return 0;
    return 1;
}

static int init(int keep)
{
    char text[2048];
    snprintf(text, sizeof text,
             "[basic]\njob_name = follow\nckpt_dir = %s/node%%n\nnode_size = 2\nkeep_last_ckpt = %d\nverbosity = 1\n",
             dir, keep);
    int rc = crpm_init_text(text, "test_follower", MPI_COMM_WORLD);
    if (rc == 0)
        REQUIRE(crpm_protect(0, data, N, CRPM_INT) == 0);
    return rc;
}

static void rm_file(const char *path)
{
    if (rank == 1)
        CHECK(unlink(path) == 0, "unlink %s", path);
    MPI_Barrier(MPI_COMM_WORLD);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_set_rank(rank);
    check_set_note(crpm_last_error);
    REQUIRE(argc == 2 && nranks == 4, "usage: mpiexec -n 4 test_follower <dir>");
    if (rank == 0) {
        snprintf(dir, sizeof dir, "%s/crpm-follower-XXXXXX", argv[1]);
        REQUIRE(mkdtemp(dir) != NULL, "mkdtemp in %s", argv[1]);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(copies, sizeof copies, "%s/copies", dir);
    if (rank == 0)
        REQUIRE(mkdir(copies, 0755) == 0);
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE(copy_level_register(copies) == 0);
    char container[1400], copy[1400];
    snprintf(container, sizeof container, "%s/node0/follow/rank-1.crpm", dir);
    snprintf(copy, sizeof copy, "%s/rank-1.copy", copies);

    /* 1. checkpoints at the copy level, then one at level 1 alone */
    REQUIRE(init(1) == 0);
    CHECK(crpm_status() == CRPM_STATUS_FRESH);
    for (int it = 1; it <= 4; it++) {
        fill(it);
        CHECK(crpm_checkpoint(it, it < 4 ? COPY_LEVEL : CRPM_L1) == 0, "checkpoint %d", it);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(exists(copy), "rank 1's copy exists");
    CHECK(crpm_checkpoint(5, 6) == CRPM_ERR_INVAL, "a level nobody registered");
    CHECK(crpm_finalize() == 0);

    /* 2. rank 1's container lost: back from its copy, at the copy's epoch */
    rm_file(container);
    memset(data, 0, sizeof data);
    REQUIRE(init(1) == 0, "restart from the copy");
    CHECK(crpm_status() == COPY_LEVEL, "status %d", crpm_status());
    CHECK(crpm_recover() == 0);
    CHECK(holds(3), "iteration 3's values after the restart");
    CHECK(exists(container), "rank 1's container is back");
    CHECK(crpm_finalize() == 0);

    /* 3. container and copy lost: nothing can bring rank 1 back */
    rm_file(container);
    rm_file(copy);
    CHECK(init(1) == CRPM_ERR_MISSING, "no copy: the restart refuses");

    /* 4. a fresh run: finalize without keep removes the copies too */
    if (rank == 0)
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        REQUIRE(mkdir(dir, 0755) == 0 && mkdir(copies, 0755) == 0);
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE(init(0) == 0);
    fill(1);
    CHECK(crpm_checkpoint(1, COPY_LEVEL) == 0);
    MPI_Barrier(MPI_COMM_WORLD); /* rank 1 renamed its copy into place */
    CHECK(exists(copy), "rank 1's copy exists");
    CHECK(crpm_finalize() == 0);
    CHECK(!exists(copy), "finalize removed the copy");

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    int failures = check_failures(), all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_follower: %s (%d checks on rank 0)\n", all ? "FAILED" : "ok", check_count());
    MPI_Finalize();
    return all != 0;
}

/* The least a level-2 checkpoint can add to level 1 on this machine: every
 * rank sends B bytes to its partner (the same local rank on the next node,
 * nodes of N consecutive ranks) and receives B bytes from the rank it is
 * the partner of, between mapped files in D (tmpfs or NVM, like the
 * containers), whose pages are already there as a container's are after
 * its first checkpoints.  All ranks start together after a barrier; no
 * checkpoint logic, no staggered arrival, no commit.  bench/l2/run.py runs
 * it with each application's bytes sent per level-2 checkpoint, so its
 * L2 / L1 ratio can be read against (L1 + this) / L1.
 *
 *   transfer_floor --bytes B --node-size N --dir D [--reps R]
 *
 * Prints "transfer_floor: B bytes per rank, R reps: median S s, best S s"
 * (the slowest rank's time of each repetition). */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "../common/bench_util.h"

#define BATCH (64u << 20) /* bytes per message, as level 2's transport */

static char *map_file(const char *dir, const char *what, int rank, size_t n, char *path, size_t cap)
{
    snprintf(path, cap, "%s/transfer_floor.%s.%d.%ld", dir, what, rank, (long)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0) {
        perror(path);
        return NULL;
    }
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        perror("mmap");
        return NULL;
    }
    fill_random(p, n); /* every page there, and not zero */
    return p;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    size_t bytes = 0;
    int node = 0, reps = 20;
    const char *dir = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes"))
            bytes = (size_t)strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--node-size"))
            node = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    if (!bytes || node <= 0 || np % node || np / node < 2 || !dir || reps <= 0) {
        if (!rank)
            fprintf(stderr, "usage: transfer_floor --bytes B --node-size N --dir D [--reps R] "
                            "(at least two nodes of N ranks)\n");
        MPI_Finalize();
        return 2;
    }
    rng ^= (uint64_t)rank * 0x9e3779b97f4a7c15ull;
    char sp[4096], dp[4096];
    char *src = map_file(dir, "src", rank, bytes, sp, sizeof sp), *dst = map_file(dir, "dst", rank, bytes, dp, sizeof dp);
    int ok = src && dst, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int to = (rank + node) % np, from = (rank - node + np) % np, nmsg = (int)((bytes + BATCH - 1) / BATCH);
    MPI_Request *rq = malloc(sizeof *rq * 2 * (size_t)nmsg);
    double *t = malloc(sizeof *t * (size_t)reps);
    if (!rq || !t)
        all = 0;
    /* one warm-up repetition: MPI's first transfer between two ranks sets them up */
    for (int r = -1; all && r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        for (int m = 0; m < nmsg; m++) {
            size_t off = (size_t)m * BATCH, n = bytes - off < BATCH ? bytes - off : BATCH;
            MPI_Irecv(dst + off, (int)n, MPI_BYTE, from, m, MPI_COMM_WORLD, &rq[2 * m]);
            MPI_Isend(src + off, (int)n, MPI_BYTE, to, m, MPI_COMM_WORLD, &rq[2 * m + 1]);
        }
        MPI_Waitall(2 * nmsg, rq, MPI_STATUSES_IGNORE);
        double mine = now() - t0, slowest = 0;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 0)
            t[r] = slowest;
    }
    if (all && !rank) {
        double best = t[0];
        for (int r = 1; r < reps; r++)
            best = t[r] < best ? t[r] : best;
        printf("transfer_floor: %zu bytes per rank, %d reps: median %.6f s, best %.6f s\n", bytes, reps,
               median(t, reps), best);
    }
    if (src)
        munmap(src, bytes);
    if (dst)
        munmap(dst, bytes);
    unlink(sp);
    unlink(dp);
    free(rq);
    free(t);
    MPI_Finalize();
    return all ? 0 : 1;
}

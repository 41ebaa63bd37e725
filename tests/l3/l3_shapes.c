/* Level-3 test program: arrays of shapes that stress the rebuild of a lost
 * rank from parity (tests/l3/l3_scenarios.py).
 *
 *   l3_shapes --crpm cfg.ini --shape mixed|tiny [--tiny N] [--iters I] [--ckpt-every K]
 *
 * mixed  each rank protects 4 to 7 byte arrays of sizes that differ from
 *        rank to rank (1 byte to ~80 KB, some a whole number of 4-KiB
 *        segments, most not) and a double array of 7 + rank elements, so
 *        the units of one parity row define different widths
 * tiny   N + 13 * rank arrays of 1 to 9 bytes: a meta area (24 bytes per
 *        array) longer than the rebuild's first read, and of a length that
 *        differs between ranks
 *
 * Every iteration rewrites every byte of every array with a pattern of
 * (rank, array, byte, iteration) and checkpoints every K-th at level 3.
 * After crpm_recover each rank compares every byte with the pattern of the
 * iteration it resumed from; rank 0 prints
 *   "l3_shapes: status S"                      crpm_status (equal everywhere)
 *   "l3_shapes: verified A arrays, B bytes after restart from iteration I"  (all ranks)
 *   "result <hex> iterations I"                digest of every rank's arrays
 * A rank whose data differ prints "l3_shapes rank R: array ID differs at
 * byte J" and the job exits 1. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "crpm.h"
#include "mpi_app.h"

static int rank;

static void check(int rc, const char *what)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "l3_shapes rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stderr);
    MPI_Finalize(); /* the calls checked here fail on every rank alike */
    exit(1);
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void fill(unsigned char *p, size_t n, int id, int iter)
{
    uint64_t base = mix(((uint64_t)rank << 40) ^ ((uint64_t)id << 20) ^ (uint64_t)iter);
    for (size_t j = 0; j < n; j++)
        p[j] = (unsigned char)(mix(base + j) >> 17);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *cfg = NULL, *shape = "mixed";
    long tiny = 1000, iters = 10, every = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--crpm"))
            cfg = argv[i + 1];
        else if (!strcmp(argv[i], "--shape"))
            shape = argv[i + 1];
        else if (!strcmp(argv[i], "--tiny"))
            tiny = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--ckpt-every"))
            every = atol(argv[i + 1]);
        else
            cfg = NULL, i = argc;
    }
    int is_tiny = !strcmp(shape, "tiny");
    if (!cfg || (!is_tiny && strcmp(shape, "mixed")) || tiny < 1 || every < 1 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: l3_shapes --crpm cfg.ini --shape mixed|tiny [--tiny N] [--iters I] "
                            "[--ckpt-every K]\n");
        MPI_Finalize();
        return 2;
    }
    /* the arrays of this rank: byte arrays, and (mixed) one double array */
    const long mixed[] = {1 + rank, 12288 + 5 + 111 * rank, 50000 + 4000 * rank, 4096, 123 + rank * rank,
                          20000 - 2300 * rank, 9000 * (rank % 3 + 1)};
    int n = is_tiny ? (int)tiny + 13 * rank : 4 + rank % 4;
    size_t *len = malloc(sizeof *len * (size_t)(n + 1));
    unsigned char **arr = malloc(sizeof *arr * (size_t)(n + 1));
    if (!len || !arr)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int a = 0; a <= n; a++) {
        len[a] = a == n ? (is_tiny ? 0 : sizeof(double) * (size_t)(7 + rank))
                        : (size_t)(is_tiny ? 1 + (a * 7 + rank) % 9 : mixed[a]);
        if (!(arr[a] = malloc(len[a] ? len[a] : 1)))
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int iter = 0;
    check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init");
    check(crpm_protect(0, &iter, 1, CRPM_INT), "crpm_protect");
    for (int a = 0; a < n; a++)
        check(crpm_protect(1 + a, arr[a], (int64_t)len[a], CRPM_BYTE), "crpm_protect");
    if (len[n])
        check(crpm_protect(1 + n, arr[n], (int64_t)(len[n] / sizeof(double)), CRPM_DOUBLE), "crpm_protect");
    int st = crpm_status();
    check(st, "crpm_status");
    if (!app_status_agreed("l3_shapes", st)) {
        MPI_Finalize();
        return 1;
    }
    if (st > 0) {
        check(crpm_recover(), "crpm_recover");
        long bad = 0, bytes = 0, narr = len[n] ? n + 1 : n, all_bad = 0, all_bytes = 0;
        unsigned char *want = malloc(100000);
        for (int a = 0; a <= n && want; a++) {
            if (!len[a])
                continue;
            fill(want, len[a], 1 + a, iter);
            bytes += (long)len[a];
            for (size_t j = 0; j < len[a]; j++)
                if (arr[a][j] != want[j]) {
                    if (!bad)
                        fprintf(stderr, "l3_shapes rank %d: array %d differs at byte %zu of %zu\n", rank, 1 + a, j,
                                len[a]);
                    bad++;
                    break;
                }
        }
        if (!want)
            bad = 1;
        free(want);
        MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(&bytes, &all_bytes, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &narr, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (all_bad) {
            if (rank == 0)
                printf("l3_shapes: %ld arrays differ after restart from iteration %d\n", all_bad, iter);
            fflush(stdout);
            MPI_Finalize();
            return 1;
        }
        if (rank == 0)
            printf("l3_shapes: verified %ld arrays, %ld bytes after restart from iteration %d\n", narr, all_bytes,
                   iter);
        fflush(stdout);
    }
    while (iter < iters) {
        iter++;
        for (int a = 0; a <= n; a++)
            fill(arr[a], len[a], 1 + a, iter);
        if (iter % every == 0)
            check(crpm_checkpoint(iter, CRPM_L3), "crpm_checkpoint");
    }
    uint64_t h = APP_FNV_SEED, all = h;
    for (int a = 0; a <= n; a++)
        h = app_fnv1a(h, arr[a], len[a]);
    int nranks;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    uint64_t *hs = rank == 0 ? malloc(sizeof *hs * (size_t)nranks) : NULL;
    MPI_Gather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < nranks; r++)
            all = app_fnv1a(all, &hs[r], sizeof hs[r]);
        printf("result %016" PRIx64 " iterations %d\n", all, iter);
        fflush(stdout);
    }
    free(hs);
    check(crpm_finalize(), "crpm_finalize");
    for (int a = 0; a <= n; a++)
        free(arr[a]);
    free(arr);
    free(len);
    MPI_Finalize();
    return 0;
}

/* Level-2 test program: a deterministic computation that checkpoints at a
 * chosen level and reports what the driver (l2_scenarios.py) checks.
 *
 *   l2_app --crpm cfg.ini [--n N] [--window W] [--iters I] [--ckpt-every K]
 *          [--level L] [--l4-every M] [--delay-ms D]
 *
 * Each rank owns N doubles; iteration i rewrites W of them (a window that
 * slides through the array), so a checkpoint changes a known number of bytes
 * (W * 8, block-aligned when W is a multiple of 32).  After iteration i, when
 * i % K == 0, it calls crpm_checkpoint(i, L), or CRPM_L4 for every M-th
 * checkpoint.  Rank 0 prints
 *   "l2_app: status S"                    crpm_status() (equal on all ranks)
 *   "l2_app: restarted from iteration I"  after crpm_recover
 *   "l2_app: sent ..."                    the statistics (bytes_sent)
 *   "result <hex>"                         digest of every rank's array
 * Library errors: "l2_app rank R: <call> failed: <strerror>: <last error>"
 * on every rank that sees them, exit 1. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "crpm.h"
#include "mpi_app.h"

static int rank, nranks;

static void check(int rc, const char *what, int collective)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "l2_app rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stderr);
    /* Collective calls fail on every rank alike, so all ranks get here. */
    if (!collective)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    exit(1);
}

static long arg(int argc, char **argv, int *i)
{
    char *end;
    long v = *i + 1 < argc ? strtol(argv[*i + 1], &end, 10) : -1;
    if (*i + 1 >= argc || *end || v < 0) {
        if (rank == 0)
            fprintf(stderr, "l2_app: bad or missing value for %s\n", argv[*i]);
        MPI_Finalize();
        exit(2);
    }
    ++*i;
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long n = 65536, window = 4096, iters = 40, every = 1, level = CRPM_L2, l4_every = 0, delay_ms = 0;
    const char *cfg = NULL, *schedule = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n"))
            n = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--window"))
            window = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--iters"))
            iters = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--ckpt-every"))
            every = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--level"))
            level = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--l4-every"))
            l4_every = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--delay-ms"))
            delay_ms = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--crpm") && i + 1 < argc)
            cfg = argv[++i];
        else if (!strcmp(argv[i], "--schedule") && i + 1 < argc)
            schedule = argv[++i]; /* digits: the level of checkpoint 1, 2, ... (cycled), e.g. "231" */
        else {
            if (rank == 0)
                fprintf(stderr, "l2_app: unknown argument %s\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    if (!cfg || n < 1 || window < 1 || window > n || every < 1) {
        if (rank == 0)
            fprintf(stderr, "l2_app: need --crpm, 1 <= window <= n, ckpt-every >= 1\n");
        MPI_Finalize();
        return 2;
    }
    double *a = malloc((size_t)n * sizeof *a);
    if (!a)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (long j = 0; j < n; j++)
        a[j] = (double)(rank * n + j);
    int iter = 0;

    check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init", 1);
    check(crpm_protect(0, &iter, 1, CRPM_INT), "crpm_protect", 0);
    check(crpm_protect(1, a, n, CRPM_DOUBLE), "crpm_protect", 0);
    int st = crpm_status();
    check(st, "crpm_status", 0);
    if (!app_status_agreed("l2_app", st)) {
        MPI_Finalize();
        return 1;
    }
    if (st > 0) {
        check(crpm_recover(), "crpm_recover", 1);
        if (rank == 0)
            printf("l2_app: restarted from iteration %d\n", iter);
        fflush(stdout);
    }

    long nckpt = iter / every;
    while (iter < iters) {
        long w0 = ((long)iter * window) % n;
        for (long k = 0; k < window; k++) {
            long j = (w0 + k) % n;
            a[j] = 0.5 * a[j] + (double)(iter + 1) * (double)(rank + 1) + 1e-3 * (double)j;
        }
        iter++;
        if (delay_ms > 0) {
            struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (iter % every == 0) {
            nckpt++;
            int l = l4_every > 0 && nckpt % l4_every == 0 ? CRPM_L4 : (int)level;
            if (schedule && schedule[0])
                l = schedule[(nckpt - 1) % (long)strlen(schedule)] - '0';
            check(crpm_checkpoint(iter, l), "crpm_checkpoint", 1);
        }
    }

    uint64_t h = app_fnv1a(APP_FNV_SEED, a, (size_t)n * sizeof *a), all = APP_FNV_SEED;
    uint64_t *hs = rank == 0 ? malloc((size_t)nranks * sizeof *hs) : NULL;
    MPI_Gather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    crpm_stats_t last, tot;
    check(crpm_get_stats(&last, &tot), "crpm_get_stats", 0);
    /* Per rank: bytes sent at the last checkpoint (min and max over ranks),
     * bytes written and protected there; all ranks' total bytes sent. */
    unsigned long long mine[4] = {last.bytes_sent, ~(unsigned long long)last.bytes_sent, last.bytes_written,
                                  last.protected_bytes},
                       mx[4], sent = tot.bytes_sent, sent_all;
    MPI_Reduce(mine, mx, 4, MPI_UNSIGNED_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sent, &sent_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < nranks; r++)
            all = app_fnv1a(all, &hs[r], sizeof hs[r]);
        printf("l2_app: sent total %llu; last checkpoint: sent max %llu min %llu, written max %llu, "
               "protected %llu per rank; %llu checkpoints\n",
               sent_all, mx[0], ~mx[1], mx[2], mx[3], (unsigned long long)tot.checkpoints);
        printf("result %016" PRIx64 " iterations %d\n", all, iter);
        fflush(stdout);
    }
    free(hs);
    check(crpm_finalize(), "crpm_finalize", 1);
    free(a);
    MPI_Finalize();
    return 0;
}

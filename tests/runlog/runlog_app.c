/* Run-log test program: checkpoints at a cycle of levels and prints what
 * the driver (runlog_test.py) compares with the run log.
 *
 *   runlog_app --crpm cfg.ini [--n N] [--window W] [--iters I] [--levels 1,2,1,3]
 *              [--snapshot] [--async-wait] [--mt]
 *
 * Each rank owns N doubles; iteration i rewrites W of them.  After every
 * iteration it calls crpm_checkpoint(i, L) with L the next level of the cycle
 * (or, with --snapshot, crpm_snapshot: the configuration's schedule), and
 * with --async-wait crpm_wait before finalize.  Rank 0 prints
 *   "runlog_app: status S"
 *   "runlog_app: restarted from iteration I"
 *   "stats {json}"   every rank's crpm_get_stats totals, in rank order
 *   "result <hex>"
 * Errors: "runlog_app rank R: <call> failed: ...", exit 1. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "crpm.h"
#include "mpi_app.h"

static int rank, nranks;

static void check(int rc, const char *what)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "runlog_app rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stderr);
    MPI_Finalize();
    exit(1);
}

int main(int argc, char **argv)
{
    int mt = 0, prov = 0; /* --mt: MPI_THREAD_MULTIPLE, which async = 1 needs */
    for (int i = 1; i < argc; i++)
        mt |= !strcmp(argv[i], "--mt");
    if (mt)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long n = 65536, window = 4096, iters = 12;
    int levels[64] = {1}, nlev = 1, snapshot = 0, async_wait = 0;
    const char *cfg = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--window") && i + 1 < argc)
            window = atol(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atol(argv[++i]);
        else if (!strcmp(argv[i], "--levels") && i + 1 < argc) {
            nlev = 0;
            for (char *s = argv[++i], *e; *s && nlev < 64; s = *e ? e + 1 : e) {
                levels[nlev++] = (int)strtol(s, &e, 10);
                if (e == s)
                    break;
            }
        } else if (!strcmp(argv[i], "--snapshot"))
            snapshot = 1;
        else if (!strcmp(argv[i], "--mt"))
            continue;
        else if (!strcmp(argv[i], "--async-wait"))
            async_wait = 1;
        else if (!strcmp(argv[i], "--crpm") && i + 1 < argc)
            cfg = argv[++i];
        else {
            if (rank == 0)
                fprintf(stderr, "runlog_app: unknown argument %s\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    if (!cfg || n < 1 || window < 1 || window > n || nlev < 1) {
        if (rank == 0)
            fprintf(stderr, "runlog_app: need --crpm, 1 <= window <= n, a level list\n");
        MPI_Finalize();
        return 2;
    }
    double *a = malloc((size_t)n * sizeof *a);
    if (!a)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (long j = 0; j < n; j++)
        a[j] = (double)(rank * n + j);
    int iter = 0;
    check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init");
    check(crpm_protect(0, &iter, 1, CRPM_INT), "crpm_protect");
    check(crpm_protect(1, a, n, CRPM_DOUBLE), "crpm_protect");
    int st = crpm_status();
    check(st, "crpm_status");
    if (!app_status_agreed("runlog_app", st)) {
        MPI_Finalize();
        return 1;
    }
    if (st > 0 && !snapshot) {
        check(crpm_recover(), "crpm_recover");
        if (rank == 0)
            printf("runlog_app: restarted from iteration %d\n", iter);
        fflush(stdout);
    }
    while (iter < iters) {
        if (snapshot) {
            int s = crpm_snapshot();
            check(s, "crpm_snapshot");
            if (s == CRPM_SNAP_RECOVERED && rank == 0)
                printf("runlog_app: restarted from iteration %d\n", iter);
            if (s == CRPM_SNAP_EXIT)
                break;
        }
        long w0 = ((long)iter * window) % n;
        for (long k = 0; k < window; k++) {
            long j = (w0 + k) % n;
            a[j] = 0.5 * a[j] + (double)(iter + 1) * (double)(rank + 1) + 1e-3 * (double)j;
        }
        iter++;
        if (!snapshot)
            check(crpm_checkpoint(iter, levels[(iter - 1) % nlev]), "crpm_checkpoint");
    }
    if (async_wait)
        check(crpm_wait(), "crpm_wait");

    crpm_stats_t last, tot;
    check(crpm_get_stats(&last, &tot), "crpm_get_stats");
    double mine[6] = {(double)tot.checkpoints, (double)tot.bytes_written, (double)tot.bytes_sent, tot.seconds,
                      (double)tot.protected_bytes, (double)tot.bytes_compared};
    double *all = rank == 0 ? malloc(sizeof mine * (size_t)nranks) : NULL;
    MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    uint64_t h = app_fnv1a(APP_FNV_SEED, a, (size_t)n * sizeof *a), hall = 0;
    MPI_Reduce(&h, &hall, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        static const char *f[6] = {"checkpoints", "bytes_written", "bytes_sent", "seconds", "protected_bytes",
                                   "bytes_compared"};
        printf("stats {");
        for (int k = 0; k < 6; k++) {
            printf("%s\"%s\":[", k ? "," : "", f[k]);
            for (int r = 0; r < nranks; r++)
                printf(k == 3 ? "%s%.9g" : "%s%.0f", r ? "," : "", all[(size_t)r * 6 + (size_t)k]);
            printf("]");
        }
        printf("}\nresult %016" PRIx64 "\n", hall);
        fflush(stdout);
    }
    free(all);
    check(crpm_finalize(), "crpm_finalize");
    free(a);
    MPI_Finalize();
    return 0;
}

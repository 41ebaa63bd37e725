/* 2-D heat diffusion (Jacobi iteration) with libcrpm checkpoint/restart.
 *
 * The global ny x nx grid is split into blocks of rows, one per rank, each
 * with a ghost row above and below.  Edges are held at fixed temperatures.
 * Every printed number is computed in a fixed order (per-rank values gathered
 * to rank 0 and combined by rank), so a run restarted from a checkpoint must
 * print exactly what a failure-free run prints.
 *
 *   heat [--nx N] [--ny N] [--iters N] [--print-every N] [--delay-us N]
 *        [--crpm cfg.ini [--ckpt-every N [--check-exit]]]
 *
 * --delay-us makes each iteration sleep that long: a longer computation at
 * a steady pace, for tests that need one.
 *
 * With --crpm and --ckpt-every N the program calls crpm_checkpoint every N
 * iterations; with --crpm and no --ckpt-every it calls crpm_snapshot() every
 * iteration and the configuration's ckpt_interval / ckpt_interval_s decide.
 * When the job is asked to stop (end of the allocation, exit_signal, a HALT
 * file) it stops after the final checkpoint: crpm_snapshot says so, or, with
 * --ckpt-every and --check-exit, crpm_should_exit every iteration. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "crpm.h"

static int rank, nranks;

static void crpm_check(int rc, const char *what, int collective)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "heat rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stderr);
    /* The library agrees on failures of collective calls, so every rank is
     * here and a clean exit cannot hang; a local failure must abort. */
    if (!collective)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    exit(1);
}

/* The level whose data the restart used: level 1's containers, rebuilt from
 * level-2 copies or level-3 parity when nodes were lost, or level 4
 * (CRPM_STATUS_Ln == n). */
static int restart_level(int status)
{
    return status >= CRPM_STATUS_L1 && status <= CRPM_STATUS_L4 ? status : 1;
}

static long parse_arg(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        if (rank == 0)
            fprintf(stderr, "heat: %s needs a value\n", argv[*i]);
        MPI_Finalize();
        exit(2);
    }
    char *end;
    long v = strtol(argv[++*i], &end, 10);
    if (*end || v < 0) {
        if (rank == 0)
            fprintf(stderr, "heat: bad value '%s' for %s\n", argv[*i], argv[*i - 1]);
        MPI_Finalize();
        exit(2);
    }
    return v;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* Rank 0 prints the FNV-1a digest of every rank's rows (combined in rank
 * order) and their sum: equal only if the grids are bitwise equal. */
static void print_checksum(const double *u, long rows, long nx)
{
    uint64_t h = fnv1a(0xcbf29ce484222325ULL, u + nx, (size_t)rows * (size_t)nx * sizeof *u);
    double sum = 0;
    for (long i = nx; i < (rows + 1) * nx; i++)
        sum += u[i];
    uint64_t *hs = rank == 0 ? malloc(sizeof *hs * (size_t)nranks) : NULL;
    double *ss = rank == 0 ? malloc(sizeof *ss * (size_t)nranks) : NULL;
    MPI_Gather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Gather(&sum, 1, MPI_DOUBLE, ss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        uint64_t all = 0xcbf29ce484222325ULL;
        double total = 0;
        for (int r = 0; r < nranks; r++) {
            all = fnv1a(all, &hs[r], sizeof hs[r]);
            total += ss[r];
        }
        printf("checksum %016" PRIx64 " sum %.17g\n", all, total);
        fflush(stdout);
    }
    free(hs);
    free(ss);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    long nx = 256, ny = 256, iters = 1000, ckpt_every = 0, print_every = -1, delay_us = 0;
    int check_exit = 0;
    const char *cfg = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--nx") == 0)
            nx = parse_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--ny") == 0)
            ny = parse_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = parse_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--ckpt-every") == 0)
            ckpt_every = parse_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--print-every") == 0)
            print_every = parse_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--crpm") == 0 && i + 1 < argc)
            cfg = argv[++i];
        else if (strcmp(argv[i], "--delay-us") == 0)
            delay_us = parse_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--check-exit") == 0)
            check_exit = 1;
        else {
            if (rank == 0)
                fprintf(stderr,
                        "usage: heat [--nx N] [--ny N] [--iters N] [--print-every N] [--delay-us N] "
                        "[--crpm cfg.ini [--ckpt-every N [--check-exit]]]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (nx < 3 || ny < nranks || iters > INT32_MAX) {
        if (rank == 0)
            fprintf(stderr, "heat: need nx >= 3, ny >= number of ranks, iters < 2^31\n");
        MPI_Finalize();
        return 2;
    }
    if (print_every < 0)
        print_every = iters >= 10 ? iters / 10 : 1;

    /* Rows [row0, row0 + rows) of the global grid live on this rank. */
    long rows = ny / nranks + (rank < ny % nranks);
    long row0 = rank * (ny / nranks) + (rank < ny % nranks ? rank : ny % nranks);
    size_t n = (size_t)(rows + 2) * (size_t)nx;
    double *u = calloc(n, sizeof *u), *v = calloc(n, sizeof *v);
    if (!u || !v) {
        fprintf(stderr, "heat rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Fixed edges: top 100, bottom 25, left 50 (right stays 0).  Both
     * buffers carry them since the update never writes edge cells. */
    for (long r = 0; r < rows + 2; r++) {
        long gr = row0 + r - 1;
        for (long c = 0; c < nx; c++) {
            double t = 0;
            if (gr <= 0)
                t = 100;
            else if (gr >= ny - 1)
                t = 25;
            else if (c == 0)
                t = 50;
            u[r * nx + c] = v[r * nx + c] = t;
        }
    }
    int iter = 0;

    if (cfg) {
        crpm_check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init", 1);
        crpm_check(crpm_protect(0, &iter, 1, CRPM_INT), "crpm_protect", 0);
        crpm_check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect", 0);
        int st = crpm_status();
        crpm_check(st, "crpm_status", 0);
        if (st > 0 && ckpt_every > 0) {
            crpm_check(crpm_recover(), "crpm_recover", 1);
            if (rank == 0)
                printf("heat: restarted from iteration %d (level %d)\n", iter, restart_level(st));
            fflush(stdout);
        }
    }
    if (rank == 0)
        printf("heat: %ld x %ld grid, %ld iterations, %d ranks\n", ny, nx, iters, nranks);
    fflush(stdout);

    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < nranks - 1 ? rank + 1 : MPI_PROC_NULL;
    /* Interior rows: global rows 1 .. ny-2. */
    long r_lo = row0 == 0 ? 2 : 1, r_hi = row0 + rows == ny ? rows - 1 : rows;
    int start = iter, stop = 0;
    for (;;) {
        int exit_now = 0;
        if (cfg && ckpt_every > 0 && check_exit && iter < iters) {
            exit_now = crpm_should_exit();
            crpm_check(exit_now, "crpm_should_exit", 1);
        }
        if (cfg && ckpt_every > 0 && iter > start && (iter % ckpt_every == 0 || exit_now)) {
            crpm_check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect", 0);
            crpm_check(crpm_checkpoint(iter, CRPM_L1), "crpm_checkpoint", 1);
        } else if (cfg && ckpt_every == 0) {
            crpm_check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect", 0);
            int s = crpm_snapshot();
            crpm_check(s, "crpm_snapshot", 1);
            if (s == CRPM_SNAP_RECOVERED && rank == 0) {
                printf("heat: restarted from iteration %d (level %d)\n", iter, restart_level(crpm_status()));
                fflush(stdout);
            }
            exit_now = s == CRPM_SNAP_EXIT;
        }
        if (exit_now) {
            /* Every rank stops at the same iteration: the library agreed. */
            int lo, hi;
            MPI_Allreduce(&iter, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            MPI_Allreduce(&iter, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (rank == 0 && lo == hi)
                printf("heat: stopped at iteration %d on every rank; a relaunch resumes\n", iter);
            else if (rank == 0)
                printf("heat: ranks stopped at different iterations %d..%d\n", lo, hi);
            fflush(stdout);
            stop = 1;
            break;
        }
        if (iter >= iters)
            break;

        MPI_Sendrecv(u + nx, (int)nx, MPI_DOUBLE, up, 0, u + (rows + 1) * nx, (int)nx, MPI_DOUBLE, down, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(u + rows * nx, (int)nx, MPI_DOUBLE, down, 1, u, (int)nx, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        double diff = 0;
        for (long r = r_lo; r <= r_hi; r++) {
            const double *a = u + r * nx;
            double *b = v + r * nx;
            for (long c = 1; c < nx - 1; c++) {
                b[c] = 0.25 * (a[c - nx] + a[c + nx] + a[c - 1] + a[c + 1]);
                double d = b[c] > a[c] ? b[c] - a[c] : a[c] - b[c];
                if (d > diff)
                    diff = d;
            }
        }
        double *t = u;
        u = v;
        v = t;
        iter++;
        if (delay_us > 0) {
            struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        if (iter % print_every == 0) {
            double gdiff; /* a max is exact in any reduction order */
            MPI_Allreduce(&diff, &gdiff, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("iter %d residual %.17g\n", iter, gdiff);
                fflush(stdout);
            }
        }
    }

    if (!stop)
        print_checksum(u, rows, nx);
    if (cfg) {
        crpm_stats_t tot;
        crpm_check(crpm_get_stats(NULL, &tot), "crpm_get_stats", 0);
        if (rank == 0)
            printf("heat: rank 0 took %llu checkpoints in this run: %.3f s, %.1f MiB written\n",
                   (unsigned long long)tot.checkpoints, tot.seconds, (double)tot.bytes_written / 1048576.0);
        crpm_check(crpm_finalize(), "crpm_finalize", 1);
    }
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}

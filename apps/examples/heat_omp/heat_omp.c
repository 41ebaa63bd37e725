/* 2-D heat diffusion (Jacobi) with MPI ranks and OpenMP threads in each,
 * checkpointed with team calls (docs/threads.md).
 *
 * One parallel region spans the whole run.  The master thread exchanges the
 * ghost rows (MPI_THREAD_FUNNELED); all threads update the rows; every
 * --ckpt-every iterations every thread calls crpm_checkpoint_team, so the
 * team shares the checkpoint's work, and after a restart crpm_recover_team
 * fills the (never touched) grid from the threads that compute on it.  Each
 * cell is computed the same way whatever the number of threads, so a
 * restarted run prints exactly what a failure-free run prints.
 *
 *   heat_omp [--nx N] [--ny N] [--iters N] [--print-every N] [--threads N]
 *            [--crpm cfg.ini --ckpt-every N] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <omp.h>

#include "crpm.h"

static int rank, nranks;

static void check(int rc, const char *what)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "heat_omp rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static long arg(int argc, char **argv, int *i)
{
    char *end;
    long v = *i + 1 < argc ? strtol(argv[++*i], &end, 10) : -1;
    if (v < 0 || *end) {
        if (rank == 0)
            fprintf(stderr, "heat_omp: bad value for %s\n", argv[*i - 1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
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

/* The digest of every rank's rows, combined in rank order on rank 0. */
static void print_checksum(const double *u, long rows, long nx)
{
    uint64_t h = fnv1a(0xcbf29ce484222325ULL, u + nx, (size_t)rows * (size_t)nx * sizeof *u), all = 0;
    uint64_t *hs = rank == 0 ? malloc(sizeof *hs * (size_t)nranks) : NULL;
    MPI_Gather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        all = 0xcbf29ce484222325ULL;
        for (int r = 0; r < nranks; r++)
            all = fnv1a(all, &hs[r], sizeof hs[r]);
        printf("checksum %016" PRIx64 "\n", all);
        fflush(stdout);
    }
    free(hs);
}

/* Fixed edges: top 100, bottom 25, left 50, elsewhere 0 at the start. */
static double initial(long gr, long c, long ny)
{
    return gr <= 0 ? 100 : gr >= ny - 1 ? 25 : c == 0 ? 50 : 0;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long nx = 512, ny = 512, iters = 500, ckpt_every = 0, print_every = 50, threads = 4;
    const char *cfg = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--nx") == 0)
            nx = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--ny") == 0)
            ny = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--ckpt-every") == 0)
            ckpt_every = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--print-every") == 0)
            print_every = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--crpm") == 0 && i + 1 < argc)
            cfg = argv[++i];
        else {
            if (rank == 0)
                fprintf(stderr, "usage: heat_omp [--nx N] [--ny N] [--iters N] [--print-every N] [--threads N] "
                                "[--crpm cfg.ini --ckpt-every N]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nx < 3 || ny < 3 * nranks || threads < 1 || print_every < 1 || iters > INT32_MAX) {
        if (rank == 0)
            fprintf(stderr, "heat_omp: need nx >= 3, ny >= 3 x ranks, threads >= 1, print-every >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    omp_set_num_threads((int)threads);
    long rows = ny / nranks + (rank < ny % nranks);
    long row0 = rank * (ny / nranks) + (rank < ny % nranks ? rank : ny % nranks);
    size_t n = (size_t)(rows + 2) * (size_t)nx;
    /* not touched here: the threads touch their rows first (or recovery does) */
    double *u = malloc(n * sizeof *u), *v = malloc(n * sizeof *v);
    if (!u || !v)
        check(-1, "malloc");
    int iter = 0, status = 0;
    if (cfg) {
        check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init");
        check(crpm_protect(0, &iter, 1, CRPM_INT), "crpm_protect");
        check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect");
        check(status = crpm_status(), "crpm_status");
    }
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < nranks - 1 ? rank + 1 : MPI_PROC_NULL;
    long r_lo = row0 == 0 ? 2 : 1, r_hi = row0 + rows == ny ? rows - 1 : rows;
    int start = 0, ck = 0, rc = 0;
    double diff = 0;
#pragma omp parallel
    {
        if (cfg && status > 0 && ckpt_every > 0) {
            int r = crpm_recover_team(); /* every thread: the pages land near the threads */
#pragma omp master
            rc = r;
        } else {
#pragma omp for
            for (long r = 0; r < rows + 2; r++)
                for (long c = 0; c < nx; c++)
                    u[r * nx + c] = initial(row0 + r - 1, c, ny);
        }
#pragma omp master
        {
            check(rc, "crpm_recover_team");
            start = iter;
            if (iter > 0 && rank == 0)
                printf("heat_omp: restarted from iteration %d\n", iter);
            if (rank == 0)
                printf("heat_omp: %ld x %ld grid, %ld iterations, %d ranks x %d threads\n", ny, nx, iters, nranks,
                       omp_get_num_threads());
            fflush(stdout);
        }
#pragma omp barrier
#pragma omp for
        for (long r = 0; r < rows + 2; r++) /* v's edges (never written by the update) */
            for (long c = 0; c < nx; c++)
                v[r * nx + c] = u[r * nx + c];
        for (;;) {
#pragma omp master
            {
                MPI_Sendrecv(u + nx, (int)nx, MPI_DOUBLE, up, 0, u + (rows + 1) * nx, (int)nx, MPI_DOUBLE, down, 0,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Sendrecv(u + rows * nx, (int)nx, MPI_DOUBLE, down, 1, u, (int)nx, MPI_DOUBLE, up, 1,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                diff = 0;
            }
#pragma omp barrier
            if (iter >= iters)
                break;
#pragma omp for reduction(max : diff)
            for (long r = r_lo; r <= r_hi; r++) {
                const double *a = u + r * nx;
                double *b = v + r * nx;
                for (long c = 1; c < nx - 1; c++) {
                    b[c] = 0.25 * (a[c - nx] + a[c + nx] + a[c - 1] + a[c + 1]);
                    double d = b[c] > a[c] ? b[c] - a[c] : a[c] - b[c];
                    diff = d > diff ? d : diff;
                }
            }
#pragma omp master
            {
                double *t = u;
                u = v;
                v = t;
                iter++;
                if (iter % print_every == 0) {
                    double g; /* a max is exact in any order */
                    MPI_Allreduce(&diff, &g, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                    if (rank == 0)
                        printf("iter %d residual %.17g\n", iter, g);
                    fflush(stdout);
                }
                ck = cfg && ckpt_every > 0 && iter > start && iter % ckpt_every == 0;
                if (ck) /* the grid is the other buffer now */
                    check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect");
            }
#pragma omp barrier
            if (ck) {
                int r = crpm_checkpoint_team(iter, CRPM_L1); /* every thread, the same result */
                if (omp_get_thread_num() == 0) /* the others stop with the process */
                    check(r, "crpm_checkpoint_team");
            }
        }
    }
    print_checksum(u, rows, nx);
    if (cfg)
        check(crpm_finalize(), "crpm_finalize");
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}

/* 2-D heat diffusion (Jacobi) on a 2-D block decomposition that restarts on
 * any number of ranks (docs/reshape.md).
 *
 * The ny x nx grid is one global dataset; each rank holds one block of it
 * (MPI_Dims_create picks the process grid) as a protected array that is
 * exactly its box, with separate halo buffers.  The iteration counter is
 * replicated.  Every update is a local stencil, so the grid after n
 * iterations is bitwise the same on any number of ranks, and so is the
 * digest printed at the end (FNV-1a of the whole grid in global row-major
 * order, gathered on rank 0).  After a restart on another number of ranks
 * the program protects its new block and crpm_recover() fills it.
 *
 *   heat2d [--nx N] [--ny N] [--iters N] [--print-every N]
 *          [--crpm cfg.ini [--ckpt-every N [--level L]]] [--delay-ms N]
 *
 * With --crpm and no --ckpt-every it calls crpm_snapshot() every iteration.
 * --delay-ms sleeps after each iteration (tests kill it at random). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "crpm.h"

static int rank, nranks;

static void check(int rc, const char *what, int collective)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "heat2d rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stderr);
    if (!collective)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    exit(1);
}

static long arg(int argc, char **argv, int *i)
{
    char *end;
    long v = *i + 1 < argc ? strtol(argv[++*i], &end, 10) : -1;
    if (v < 0 || *end) {
        if (rank == 0)
            fprintf(stderr, "heat2d: bad value for %s\n", argv[*i - 1]);
        MPI_Finalize();
        exit(2);
    }
    return v;
}

static const char *status_name(int st)
{
    return st == CRPM_STATUS_RESHAPED ? "reshaped" : st == CRPM_STATUS_L4 ? "level 4" : st == CRPM_STATUS_L3 ? "level 3"
           : st == CRPM_STATUS_L2 ? "level 2" : "level 1";
}

/* Block k of n over len cells: first cell and count. */
static void block(long len, int n, int k, long *first, long *count)
{
    *count = len / n + (k < len % n);
    *first = k * (len / n) + (k < len % n ? k : len % n);
}

static double edge(long gr, long gc, long ny, long nx)
{
    (void)nx;
    return gr == 0 ? 100 : gr == ny - 1 ? 25 : gc == 0 ? 50 : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long nx = 192, ny = 160, iters = 600, ckpt_every = 0, print_every = -1, level = CRPM_L1, delay_ms = 0;
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
        else if (strcmp(argv[i], "--level") == 0)
            level = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--print-every") == 0)
            print_every = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--delay-ms") == 0)
            delay_ms = arg(argc, argv, &i);
        else if (strcmp(argv[i], "--crpm") == 0 && i + 1 < argc)
            cfg = argv[++i];
        else {
            if (rank == 0)
                fprintf(stderr, "usage: heat2d [--nx N] [--ny N] [--iters N] [--print-every N] [--crpm cfg.ini "
                                "[--ckpt-every N [--level L]]] [--delay-ms N]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (print_every <= 0)
        print_every = iters >= 10 ? iters / 10 : 1;
    int st = 0;
    if (cfg) {
        check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init", 1);
        st = crpm_status();
        check(st, "crpm_status", 0);
        if (st == CRPM_STATUS_RESHAPED) { /* the saved grid's size wins over the arguments */
            int64_t d[CRPM_MAX_DIMS];
            check(crpm_global_dims(0, d) == 2 ? 0 : CRPM_ERR_MISMATCH, "crpm_global_dims", 0);
            ny = (long)d[0];
            nx = (long)d[1];
        }
    }
    int pdims[2] = {0, 0}, per[2] = {0, 0}, coords[2];
    MPI_Dims_create(nranks, 2, pdims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, pdims, per, 0, &cart);
    MPI_Cart_coords(cart, rank, 2, coords);
    int up, down, left, right;
    MPI_Cart_shift(cart, 0, 1, &up, &down);
    MPI_Cart_shift(cart, 1, 1, &left, &right);
    long r0, rows, c0, cols;
    block(ny, pdims[0], coords[0], &r0, &rows);
    block(nx, pdims[1], coords[1], &c0, &cols);
    if (rows < 1 || cols < 1) {
        if (rank == 0)
            fprintf(stderr, "heat2d: a %ld x %ld grid is too small for %d x %d ranks\n", ny, nx, pdims[0], pdims[1]);
        MPI_Finalize();
        return 2;
    }
    size_t n = (size_t)rows * (size_t)cols;
    double *u = malloc(n * sizeof *u), *v = malloc(n * sizeof *v);
    double *hu = calloc((size_t)cols, sizeof *hu), *hd = calloc((size_t)cols, sizeof *hd);
    double *hl = calloc((size_t)rows, sizeof *hl), *hr = calloc((size_t)rows, sizeof *hr);
    double *sl = calloc((size_t)rows, sizeof *sl), *sr = calloc((size_t)rows, sizeof *sr);
    if (!u || !v || !hu || !hd || !hl || !hr || !sl || !sr)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < cols; j++)
            u[i * cols + j] = v[i * cols + j] = edge(r0 + i, c0 + j, ny, nx);
    int iter = 0;
    if (cfg) {
        int64_t dims[2] = {ny, nx}, off[2] = {r0, c0}, cnt[2] = {rows, cols};
        check(crpm_define_global(0, 2, dims, CRPM_DOUBLE, "temperature"), "crpm_define_global", 0);
        check(crpm_protect_replicated(0, &iter, 1, CRPM_INT), "crpm_protect_replicated", 0);
        check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect", 0);
        check(crpm_add_subset(0, 1, off, cnt), "crpm_add_subset", 0);
        if (st > 0 && ckpt_every > 0) {
            check(crpm_recover(), "crpm_recover", 1);
            if (rank == 0)
                printf("heat2d: restarted from iteration %d (%s) on %d ranks\n", iter, status_name(st), nranks);
        }
    }
    if (rank == 0)
        printf("heat2d: %ld x %ld grid, %ld iterations, %d ranks as %d x %d\n", ny, nx, iters, nranks, pdims[0],
               pdims[1]);
    fflush(stdout);
    int start = iter;
    for (;;) {
        if (cfg && ckpt_every > 0 && iter > start && iter % ckpt_every == 0) {
            check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect", 0);
            check(crpm_checkpoint(iter, (int)level), "crpm_checkpoint", 1);
        } else if (cfg && ckpt_every == 0) {
            check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect", 0);
            int s = crpm_snapshot();
            check(s, "crpm_snapshot", 1);
            if (s == CRPM_SNAP_RECOVERED && rank == 0)
                printf("heat2d: restarted from iteration %d (%s) on %d ranks\n", iter, status_name(crpm_status()),
                       nranks);
        }
        if (iter >= iters)
            break;
        for (long i = 0; i < rows; i++) {
            sl[i] = u[i * cols];
            sr[i] = u[i * cols + cols - 1];
        }
        MPI_Sendrecv(u, (int)cols, MPI_DOUBLE, up, 0, hd, (int)cols, MPI_DOUBLE, down, 0, cart, MPI_STATUS_IGNORE);
        MPI_Sendrecv(u + (rows - 1) * cols, (int)cols, MPI_DOUBLE, down, 1, hu, (int)cols, MPI_DOUBLE, up, 1, cart,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(sl, (int)rows, MPI_DOUBLE, left, 2, hr, (int)rows, MPI_DOUBLE, right, 2, cart, MPI_STATUS_IGNORE);
        MPI_Sendrecv(sr, (int)rows, MPI_DOUBLE, right, 3, hl, (int)rows, MPI_DOUBLE, left, 3, cart, MPI_STATUS_IGNORE);
        double diff = 0;
        for (long i = 0; i < rows; i++) {
            long gr = r0 + i;
            for (long j = 0; j < cols; j++) {
                long gc = c0 + j;
                double *out = &v[i * cols + j], c = u[i * cols + j];
                if (gr == 0 || gr == ny - 1 || gc == 0 || gc == nx - 1) {
                    *out = c;
                    continue;
                }
                double nn = i > 0 ? u[(i - 1) * cols + j] : hu[j];
                double ss = i < rows - 1 ? u[(i + 1) * cols + j] : hd[j];
                double ww = j > 0 ? u[i * cols + j - 1] : hl[i];
                double ee = j < cols - 1 ? u[i * cols + j + 1] : hr[i];
                *out = 0.25 * (nn + ss + ww + ee);
                double d = *out > c ? *out - c : c - *out;
                diff = d > diff ? d : diff;
            }
        }
        double *t = u;
        u = v;
        v = t;
        iter++;
        if (iter % print_every == 0) {
            double g;
            MPI_Allreduce(&diff, &g, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (rank == 0)
                printf("iter %d residual %.17g\n", iter, g);
            fflush(stdout);
        }
        if (delay_ms) {
            struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    /* the digest of the whole grid, in global order, whatever the decomposition */
    long box[4] = {r0, rows, c0, cols}, *boxes = rank == 0 ? malloc(sizeof *boxes * 4 * (size_t)nranks) : NULL;
    int *cnts = rank == 0 ? malloc(sizeof *cnts * (size_t)nranks) : NULL;
    int *dsp = rank == 0 ? malloc(sizeof *dsp * (size_t)nranks) : NULL;
    MPI_Gather(box, 4, MPI_LONG, boxes, 4, MPI_LONG, 0, MPI_COMM_WORLD);
    double *all = NULL, *grid = NULL;
    if (rank == 0) {
        long tot = 0;
        for (int r = 0; r < nranks; r++) {
            cnts[r] = (int)(boxes[4 * r + 1] * boxes[4 * r + 3]);
            dsp[r] = (int)tot;
            tot += cnts[r];
        }
        all = malloc(sizeof *all * (size_t)tot);
        grid = malloc(sizeof *grid * (size_t)(nx * ny));
    }
    MPI_Gatherv(u, (int)n, MPI_DOUBLE, all, cnts, dsp, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < nranks; r++)
            for (long i = 0; i < boxes[4 * r + 1]; i++)
                memcpy(grid + (boxes[4 * r] + i) * nx + boxes[4 * r + 2], all + dsp[r] + i * boxes[4 * r + 3],
                       sizeof *grid * (size_t)boxes[4 * r + 3]);
        uint64_t h = 0xcbf29ce484222325ULL;
        const unsigned char *b = (const unsigned char *)grid;
        for (size_t i = 0; i < sizeof *grid * (size_t)(nx * ny); i++)
            h = (h ^ b[i]) * 0x100000001b3ULL;
        printf("digest %016" PRIx64 " after %d iterations\n", h, iter);
        fflush(stdout);
    }
    free(all);
    free(grid);
    free(boxes);
    free(cnts);
    free(dsp);
    if (cfg)
        check(crpm_finalize(), "crpm_finalize", 1);
    free(u);
    free(v);
    free(hu);
    free(hd);
    free(hl);
    free(hr);
    free(sl);
    free(sr);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}

/* Small MPI application for the level-4 end-to-end tests: 1-D diffusion with
 * halo exchange plus a few arrays of other types (int64 counters, complex
 * phases, a user-type particle array), checkpointed through the public API.
 *
 *   l4_app [--n N] [--iters N] [--print-every N] [--sleep-ms MS]
 *          [--crpm cfg.ini [--ckpt-every N [--l4-every M]] [--snapshot]]
 *
 * --ckpt-every N: crpm_checkpoint(iter, level) every N iterations, where
 *   every M-th of them (iter / N divisible by M) is CRPM_L4.
 * --snapshot: crpm_snapshot() every iteration instead (the configuration's
 *   ckpt_interval / ckpt_interval_l4 decide).
 * Prints PROGRESS lines, a CKPT line per rank and checkpoint (sum of that
 * rank's field, for comparison with the HDF5 file), and RESULT lines. */
#include "crpm.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct particle {
    double x, v;
    int32_t cell;
    int32_t bounces;
} particle;

enum { NPART = 8, NSTAT = 4, NPHASE = 4 };

static int rank, nranks;

static void die(const char *what, int rc)
{
    fprintf(stderr, "l4_app rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static long arg_long(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "l4_app: %s needs a value\n", argv[*i]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *end;
    long v = strtol(argv[++*i], &end, 10);
    if (*end || v < 0) {
        fprintf(stderr, "l4_app: bad value '%s' for %s\n", argv[*i], argv[*i - 1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return v;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static double local_sum(const double *u, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++)
        s += u[i];
    return s;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long n = 2000, iters = 60, ckpt_every = 0, l4_every = 0, print_every = 10, sleep_ms = 0;
    int snapshot = 0;
    const char *cfg = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n"))
            n = arg_long(argc, argv, &i);
        else if (!strcmp(argv[i], "--iters"))
            iters = arg_long(argc, argv, &i);
        else if (!strcmp(argv[i], "--ckpt-every"))
            ckpt_every = arg_long(argc, argv, &i);
        else if (!strcmp(argv[i], "--l4-every"))
            l4_every = arg_long(argc, argv, &i);
        else if (!strcmp(argv[i], "--print-every"))
            print_every = arg_long(argc, argv, &i);
        else if (!strcmp(argv[i], "--sleep-ms"))
            sleep_ms = arg_long(argc, argv, &i);
        else if (!strcmp(argv[i], "--snapshot"))
            snapshot = 1;
        else if (!strcmp(argv[i], "--crpm") && i + 1 < argc)
            cfg = argv[++i];
        else {
            if (rank == 0)
                fprintf(stderr, "usage: l4_app [--n N] [--iters N] [--print-every N] [--sleep-ms MS] "
                                "[--crpm cfg.ini [--ckpt-every N [--l4-every M]] [--snapshot]]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (n < 2 || iters > INT32_MAX || print_every == 0) {
        if (rank == 0)
            fprintf(stderr, "l4_app: need n >= 2, iters < 2^31, print-every > 0\n");
        MPI_Finalize();
        return 2;
    }

    /* Ranks own different sizes so the file's per-rank datasets differ. */
    long nloc = n + 3 * rank;
    double *u = malloc((size_t)(nloc + 2) * sizeof *u);
    int64_t stats[NSTAT] = { 0, 0, 0, 0 };
    double phase[NPHASE][2];
    particle part[NPART];
    int iter = 0;
    if (!u) {
        fprintf(stderr, "l4_app: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < nloc; i++)
        u[i + 1] = sin(0.001 * (double)(i + rank * n)) + (rank == 0 && i == nloc / 2 ? 10.0 : 0.0);
    for (int k = 0; k < NPHASE; k++) {
        phase[k][0] = 1.0;
        phase[k][1] = 0.0;
    }
    for (int k = 0; k < NPART; k++)
        part[k] = (particle){ (k + 0.5) / NPART, 0.01 * (k + 1 + rank), 0, 0 };

    if (cfg) {
        int rc = crpm_init(cfg, MPI_COMM_WORLD);
        if (rc)
            die("crpm_init", rc);
        crpm_type_t ptype, ctype = { CRPM_TC_COMPLEX_DOUBLE, 0, 2 * sizeof(double) };
        if ((rc = crpm_init_type(&ptype, sizeof(particle))) ||
            (rc = crpm_protect(0, &iter, 1, CRPM_INT)) ||
            (rc = crpm_protect(1, u + 1, nloc, CRPM_DOUBLE)) ||
            (rc = crpm_protect(2, stats, NSTAT, (crpm_type_t){ CRPM_TC_INT64, 0, 8 })) ||
            (rc = crpm_protect(3, phase, NPHASE, ctype)) ||
            (rc = crpm_protect(4, part, NPART, ptype)))
            die("crpm_protect", rc);
        int st = crpm_status();
        if (st < 0)
            die("crpm_status", st);
        if (st > 0 && !snapshot) {
            if ((rc = crpm_recover()))
                die("crpm_recover", rc);
            if (rank == 0)
                printf("RESTART level %d iter %d\n", st == CRPM_STATUS_L4 ? 4 : 1, iter);
        }
    }
    if (rank == 0) {
        printf("l4_app: %d ranks, %ld cells per rank, %ld iterations\n", nranks, n, iters);
        fflush(stdout);
    }

    int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
    double *un = malloc((size_t)(nloc + 2) * sizeof *un);
    if (!un)
        MPI_Abort(MPI_COMM_WORLD, 1);
    while (iter < iters) {
        if (cfg && snapshot) {
            int rc = crpm_snapshot();
            if (rc < 0)
                die("crpm_snapshot", rc);
            if (rc == CRPM_SNAP_RECOVERED && rank == 0)
                printf("RESTART level %d iter %d\n", crpm_status() == CRPM_STATUS_L4 ? 4 : 1, iter);
        }
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[nloc + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[nloc], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (long i = 1; i <= nloc; i++)
            un[i] = u[i] + 0.2 * (u[i - 1] - 2 * u[i] + u[i + 1]) + 1e-4 * sin(0.01 * iter + 0.1 * (double)i);
        memcpy(u + 1, un + 1, (size_t)nloc * sizeof *u);
        for (int k = 0; k < NPHASE; k++) {
            double a = 0.01 * (k + 1) * (1 + rank), re = phase[k][0], im = phase[k][1];
            phase[k][0] = re * cos(a) - im * sin(a);
            phase[k][1] = re * sin(a) + im * cos(a);
        }
        for (int k = 0; k < NPART; k++) {
            particle *p = &part[k];
            p->x += p->v;
            if (p->x < 0 || p->x > 1) {
                p->v = -p->v;
                p->x = p->x < 0 ? -p->x : 2 - p->x;
                p->bounces++;
            }
            p->cell = (int32_t)(p->x * (double)nloc);
        }
        stats[0]++;
        stats[1] += (int64_t)(u[1 + nloc / 2] * 1000);
        stats[2] ^= (int64_t)fnv(14695981039346656037ull, &u[1], sizeof(double));
        stats[3] += part[0].bounces;
        iter++;
        if (sleep_ms) {
            struct timespec ts = { sleep_ms / 1000, (sleep_ms % 1000) * 1000000L };
            nanosleep(&ts, NULL);
        }
        if (iter % print_every == 0) {
            double s = local_sum(u + 1, nloc), g = 0;
            MPI_Allreduce(&s, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("PROGRESS iter %d sum %.17g\n", iter, g);
                fflush(stdout);
            }
        }
        if (cfg && !snapshot && ckpt_every && iter % ckpt_every == 0) {
            int level = l4_every && (iter / ckpt_every) % l4_every == 0 ? CRPM_L4 : CRPM_L1;
            int rc = crpm_checkpoint(iter, level);
            if (rc)
                die("crpm_checkpoint", rc);
            printf("CKPT id %d level %d rank %d n %ld sum %.17g\n", iter, level, rank, nloc, local_sum(u + 1, nloc));
            fflush(stdout);
        }
    }

    /* Results: global sum and an order-fixed hash of every rank's state. */
    uint64_t h = 14695981039346656037ull;
    h = fnv(h, u + 1, (size_t)nloc * sizeof *u);
    h = fnv(h, stats, sizeof stats);
    h = fnv(h, phase, sizeof phase);
    for (int k = 0; k < NPART; k++) {
        h = fnv(h, &part[k].x, sizeof part[k].x);
        h = fnv(h, &part[k].v, sizeof part[k].v);
        h = fnv(h, &part[k].cell, sizeof part[k].cell);
        h = fnv(h, &part[k].bounces, sizeof part[k].bounces);
    }
    uint64_t *all = rank == 0 ? malloc((size_t)nranks * sizeof *all) : NULL;
    MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    double s = local_sum(u + 1, nloc), g = 0;
    MPI_Reduce(&s, &g, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        uint64_t t = 14695981039346656037ull;
        for (int r = 0; r < nranks; r++)
            t = fnv(t, &all[r], sizeof all[r]);
        printf("RESULT iter %d sum %.17g\n", iter, g);
        printf("RESULT hash %016" PRIx64 "\n", t);
        fflush(stdout);
        free(all);
    }
    if (cfg) {
        int rc = crpm_finalize();
        if (rc)
            die("crpm_finalize", rc);
    }
    free(u);
    free(un);
    MPI_Finalize();
    return 0;
}

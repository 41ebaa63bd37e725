/* The fault campaign's program (tests/campaign/run.py): a deterministic
 * computation that checkpoints at the levels of a schedule and reports what
 * the campaign's oracle checks.
 *
 *   campaign_app --crpm cfg.ini --sched LEVELS [--n N] [--snapshot] [--fill-at K --fill-file PATH]
 *
 * LEVELS holds one character per iteration i = 1, 2, ...: '1'..'4' makes
 * iteration i end with crpm_checkpoint(i, level), '0' takes none; the run
 * has strlen(LEVELS) iterations.  --snapshot: every iteration ends with
 * crpm_snapshot instead (the configuration's ckpt_interval = 1 and
 * ckpt_interval_l2/_l3/_l4 choose the levels; LEVELS gives only the count),
 * and a restart recovers through it.  The state after
 * iteration i is a function of i alone: each rank owns N 64-bit words (by
 * default enough for several 64-KiB units, so that level 3 spreads every
 * rank over all codewords) and iteration i rewrites 16 of them spread over
 * the array, so a checkpoint changes little but touches many segments.
 * --fill-at K: before the checkpoint of iteration K, rank 0 fills the file
 * system holding PATH with a file of that name (the driver mounted a small
 * file system there), so that checkpoint meets a full file system.
 *
 * Rank 0 prints (one line each, flushed):
 *   "campaign: status S"                   crpm_status(), after crpm_init
 *   "campaign: restarted from I state H"   after crpm_recover: the iteration
 *                                          recovered and the digest of every
 *                                          rank's state there
 *   "campaign: ckpt I level L state H"     after each checkpoint returned
 *                                          (level 0: taken by crpm_snapshot)
 *   "result H"                             the digest at the end
 * A failing call prints on every rank that sees it
 *   "campaign rank R: <call> failed: <code name> (<code>): <last error>"
 * and the program exits 1 (collective calls fail on every rank alike). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "crpm.h"

static int rank, nranks;

static void fail(int rc, const char *what)
{
    fprintf(stderr, "campaign rank %d: %s failed: %s (%d): %s\n", rank, what, crpm_strerror(rc), rc,
            crpm_last_error());
    fflush(stderr);
    MPI_Finalize();
    exit(1);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dULL;
    x ^= x >> 33;
    return x;
}

/* iteration i's change of rank r's words */
static void step(uint64_t *w, int64_t n, int64_t i)
{
    for (int k = 0; k < 16; k++) {
        int64_t j = (int64_t)(mix((uint64_t)i * 16 + (uint64_t)k) % (uint64_t)n);
        w[j] = mix(w[j] ^ ((uint64_t)i << 20) ^ (uint64_t)k ^ ((uint64_t)rank << 40));
    }
}

/* digest of every rank's words and iteration, the same on every rank */
static uint64_t digest(const uint64_t *w, int64_t n, int64_t iter)
{
    uint64_t h = mix((uint64_t)iter + 0x9e3779b97f4a7c15ULL * (uint64_t)(rank + 1));
    for (int64_t j = 0; j < n; j++)
        h = mix(h ^ w[j]) + (uint64_t)j;
    uint64_t *all = malloc(sizeof(uint64_t) * (size_t)nranks);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    uint64_t d = 0;
    for (int r = 0; r < nranks; r++)
        d = mix(d ^ all[r]);
    free(all);
    return d;
}

/* Writes PATH until the file system is full (rank 0), keeps the file. */
static void fill(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        fprintf(stderr, "campaign: cannot create %s: %s\n", path, strerror(errno));
        return;
    }
    static char buf[65536];
    memset(buf, 0xee, sizeof buf);
    size_t chunk = sizeof buf;
    while (chunk > 0) {
        ssize_t k = write(fd, buf, chunk);
        if (k < 0 && errno == ENOSPC)
            chunk /= 2; /* fill to the last page */
        else if (k < 0)
            break;
    }
    close(fd);
    printf("campaign: filled %s\n", path);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *cfg = NULL, *sched = NULL, *fill_file = NULL;
    int64_t n = 5 * 8192 + 77; /* 5 units of 64 KiB and a bit */
    long fill_at = -1;
    int snapshot = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--crpm") && i + 1 < argc)
            cfg = argv[++i];
        else if (!strcmp(argv[i], "--sched") && i + 1 < argc)
            sched = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--snapshot"))
            snapshot = 1;
        else if (!strcmp(argv[i], "--fill-at") && i + 1 < argc)
            fill_at = atol(argv[++i]);
        else if (!strcmp(argv[i], "--fill-file") && i + 1 < argc)
            fill_file = argv[++i];
        else {
            if (rank == 0)
                fprintf(stderr, "campaign_app: bad argument %s\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    if (!cfg || !sched || n < 1 || strspn(sched, "01234") != strlen(sched)) {
        if (rank == 0)
            fprintf(stderr, "usage: campaign_app --crpm cfg.ini --sched LEVELS [--n N] [--snapshot] [--fill-at K --fill-file PATH]\n");
        MPI_Finalize();
        return 2;
    }
    const int64_t iters = (int64_t)strlen(sched);

    int rc = crpm_init(cfg, MPI_COMM_WORLD);
    if (rc != CRPM_SUCCESS)
        fail(rc, "crpm_init");
    uint64_t *w = malloc(sizeof(uint64_t) * (size_t)n);
    long long iter = 0; /* CRPM_LLONG */
    for (int64_t j = 0; j < n; j++)
        w[j] = mix((uint64_t)j ^ ((uint64_t)rank << 48));
    if ((rc = crpm_protect(0, &iter, 1, CRPM_LLONG)) != CRPM_SUCCESS)
        fail(rc, "crpm_protect(0)");
    if ((rc = crpm_protect(1, w, n, CRPM_ULONG)) != CRPM_SUCCESS)
        fail(rc, "crpm_protect(1)");
    int st = crpm_status();
    if (rank == 0) {
        printf("campaign: status %d\n", st);
        fflush(stdout);
    }
    if (st < 0)
        fail(st, "crpm_status");
    if (st > 0 && snapshot) {
        if ((rc = crpm_snapshot()) != CRPM_SNAP_RECOVERED)
            fail(rc < 0 ? rc : CRPM_ERR_STATE, "crpm_snapshot (recovery)");
    } else if (st > 0 && (rc = crpm_recover()) != CRPM_SUCCESS)
        fail(rc, "crpm_recover");
    if (st > 0) {
        uint64_t d = digest(w, n, iter);
        if (rank == 0) {
            printf("campaign: restarted from %lld state %016" PRIx64 "\n", iter, d);
            fflush(stdout);
        }
    }
    while (iter < iters) {
        iter++;
        step(w, n, iter);
        int level = snapshot ? 0 : sched[iter - 1] - '0';
        if (iter == fill_at && fill_file) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0)
                fill(fill_file);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        if (snapshot) {
            /* its checkpoint ids follow the last one: the iteration */
            if ((rc = crpm_snapshot()) < 0)
                fail(rc, "crpm_snapshot");
        } else if (level > 0 && (rc = crpm_checkpoint((int)iter, level)) != CRPM_SUCCESS)
            fail(rc, "crpm_checkpoint");
        if (level > 0 || (snapshot && rc == CRPM_SNAP_CHECKPOINTED)) {
            uint64_t d = digest(w, n, iter);
            if (rank == 0) {
                printf("campaign: ckpt %lld level %d state %016" PRIx64 "\n", iter, level, d);
                fflush(stdout);
            }
        }
    }
    if ((rc = crpm_wait()) != CRPM_SUCCESS)
        fail(rc, "crpm_wait");
    uint64_t d = digest(w, n, iter);
    if ((rc = crpm_finalize()) != CRPM_SUCCESS)
        fail(rc, "crpm_finalize");
    if (rank == 0) {
        printf("result %016" PRIx64 "\n", d);
        fflush(stdout);
    }
    free(w);
    MPI_Finalize();
    return 0;
}

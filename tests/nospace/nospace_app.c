/* A full file system during checkpoints and restarts (issue 38, item 5):
 * the job must get CRPM_ERR_IO (CRPM_ERR_REMOTE on the other ranks) naming
 * the cause, the file and the checkpoint, never a signal or a hang, and the
 * last committed checkpoint must survive.  nospace_scenarios.py mounts the
 * small tmpfs and drives this program.
 *
 *   nospace_app --crpm cfg.ini --levels L1,L2,... [--fill DIR --fill-after K]
 *               [--grow-at K] [--heap] [--n N] [--recover --expect E]
 *               [--expect-init-fail] [--then-free] [--leave BYTES]
 *
 * Checkpoint k (1-based) is taken at the k-th level of --levels.  Before
 * checkpoint k every rank rewrites its data as a function of (k, rank): an
 * array of N doubles (from --grow-at on, 4 N: the container must grow), or
 * with --heap blocks allocated with crpm_malloc (from --grow-at on, one more
 * large block: the heap's extent grows).  After checkpoint K succeeded rank 0
 * fills the file system of DIR (a file taking all its free space), so the
 * next checkpoint must fail; its error is checked on every rank and the run
 * stops there (crpm_finalize keeps the checkpoints; keep_last_ckpt = 1).
 * --leave: about that much space is left free (part of what the next
 * checkpoint needs).  --then-free: rank 0 removes that file first and the failed checkpoint is
 * taken again, which must succeed in the same run.
 * Prints "committed E": the checkpoint a restart must return.
 *
 * --recover: crpm_init must find a checkpoint; it is recovered and compared
 * bit for bit with checkpoint E regenerated; then one more checkpoint at the
 * last level of --levels must succeed.  --expect-init-fail: crpm_init must
 * fail for want of space (checked like a checkpoint's error). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <mpi.h>

#include "crpm.h"

static int rank, nranks;

#define DIE(...)                                                                                                   \
    do {                                                                                                           \
        fprintf(stderr, "nospace_app rank %d: ", rank);                                                            \
        fprintf(stderr, __VA_ARGS__);                                                                              \
        fprintf(stderr, "\n");                                                                                     \
        fflush(stderr);                                                                                            \
        MPI_Abort(MPI_COMM_WORLD, 3);                                                                              \
    } while (0)

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* The bytes of checkpoint k on this rank: the first word says k. */
static void gen(double *p, size_t n, int k, int salt)
{
    uint64_t *w = (uint64_t *)p;
    for (size_t i = 0; i < n; i++)
        w[i] = mix(((uint64_t)k << 40) ^ ((uint64_t)rank << 32) ^ ((uint64_t)salt << 28) ^ i);
    w[0] = (uint64_t)k;
}

static int check_gen(const double *p, size_t n, int k, int salt)
{
    const uint64_t *w = (const uint64_t *)p;
    if (w[0] != (uint64_t)k)
        return 0;
    for (size_t i = 1; i < n; i++)
        if (w[i] != mix(((uint64_t)k << 40) ^ ((uint64_t)rank << 32) ^ ((uint64_t)salt << 28) ^ i))
            return 0;
    return 1;
}

/* Takes all free space of the file system holding dir but about `leave`
 * bytes (a checkpoint may then get part of what it needs). */
static void fill_fs(const char *dir, long leave)
{
    char path[4096];
    struct statvfs sv;
    snprintf(path, sizeof path, "%s/filler", dir);
    if (statvfs(dir, &sv) != 0)
        DIE("statvfs %s: %s", dir, strerror(errno));
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        DIE("cannot create %s: %s", path, strerror(errno));
    off_t have = lseek(fd, 0, SEEK_END);
    off_t len = (off_t)((uint64_t)sv.f_bavail * sv.f_frsize) - (off_t)leave;
    /* page by page from the end: what one call cannot get, a smaller one may */
    if (leave && len > 0 && posix_fallocate(fd, have, len) == 0)
        have += len;
    for (off_t step = len; !leave && step >= 4096; step /= 2)
        while (posix_fallocate(fd, have, step) == 0)
            have += step;
    close(fd);
    if (statvfs(dir, &sv) != 0 || (!leave && sv.f_bavail != 0))
        DIE("%s still has %llu free blocks", dir, (unsigned long long)sv.f_bavail);
    printf("nospace_app: filled %s (%lld bytes)\n", dir, (long long)have);
    fflush(stdout);
}

/* The error of a call that ran out of space, on every rank: CRPM_ERR_IO on
 * the rank that ran out (CRPM_ERR_REMOTE on the others, or CRPM_ERR_IO too),
 * "No space left on device", a path under where, and checkpoint k. */
static void check_nospace(int rc, const char *call, const char *where, int k)
{
    const char *msg = crpm_last_error();
    printf("nospace_app rank %d: %s returned %s: %s\n", rank, call, crpm_strerror(rc), msg);
    fflush(stdout);
    char id[64];
    snprintf(id, sizeof id, "checkpoint %d", k);
    int io = rc == CRPM_ERR_IO;
    if (rc != CRPM_ERR_IO && rc != CRPM_ERR_REMOTE)
        DIE("%s: expected CRPM_ERR_IO or CRPM_ERR_REMOTE, got %s", call, crpm_strerror(rc));
    if (!strcasestr(msg, "no space"))
        DIE("%s: the message does not say \"no space\"", call);
    if (where && !strstr(msg, where))
        DIE("%s: the message does not name a file under %s", call, where);
    if (k > 0 && !strstr(msg, id))
        DIE("%s: the message does not name %s", call, id);
    int any = 0;
    MPI_Allreduce(&io, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any)
        DIE("%s: no rank returned CRPM_ERR_IO", call);
}

/* The data of one rank: an array, or blocks of the heap found from root 0. */
typedef struct heap_root {
    int k;
    int nblocks;
    double *blk[2];
    size_t len[2];
} heap_root;

static size_t n = 32768;
static int heap, grow_at = 0;
static double *arr;
static size_t arr_n;

static size_t size_for(int k) { return grow_at && k >= grow_at ? 4 * n : n; }

static void make_data(int k)
{
    if (!heap) {
        size_t want = size_for(k);
        if (want != arr_n) {
            free(arr);
            arr = malloc(want * sizeof *arr);
            if (!arr)
                DIE("out of memory");
            arr_n = want;
            int rc = crpm_protect(1, arr, (int64_t)arr_n, CRPM_DOUBLE);
            if (rc != 0)
                DIE("crpm_protect: %s: %s", crpm_strerror(rc), crpm_last_error());
        }
        gen(arr, arr_n, k, 0);
        return;
    }
    heap_root *r = crpm_get_root(0);
    if (!r) {
        r = crpm_calloc(1, sizeof *r);
        if (!r || crpm_set_root(0, r) != 0)
            DIE("heap: %s", crpm_last_error());
    }
    int want = grow_at && k >= grow_at ? 2 : 1;
    while (r->nblocks < want) {
        size_t len = r->nblocks ? 8 * n : n;
        if (!(r->blk[r->nblocks] = crpm_malloc(len * sizeof(double))))
            DIE("crpm_malloc: %s", crpm_last_error());
        r->len[r->nblocks++] = len;
    }
    r->k = k;
    for (int b = 0; b < r->nblocks; b++)
        gen(r->blk[b], r->len[b], k, b + 1);
}

static int data_is(int k)
{
    if (!heap)
        return check_gen(arr, arr_n, k, 0);
    heap_root *r = crpm_get_root(0);
    if (!r || r->k != k || r->nblocks != (grow_at && k >= grow_at ? 2 : 1))
        return 0;
    for (int b = 0; b < r->nblocks; b++)
        if (!check_gen(r->blk[b], r->len[b], k, b + 1))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *cfg = NULL, *fill = NULL, *where = NULL;
    long leave = 0;
    int levels[64], nlev = 0, fill_after = 0, recover = 0, expect = -1, init_fail = 0, then_free = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--crpm") && v)
            cfg = argv[++i];
        else if (!strcmp(a, "--levels") && v) {
            for (char *s = argv[++i], *e; *s && nlev < 64; s = *e ? e + 1 : e)
                levels[nlev++] = (int)strtol(s, &e, 10);
        } else if (!strcmp(a, "--fill") && v)
            fill = argv[++i];
        else if (!strcmp(a, "--where") && v)
            where = argv[++i];
        else if (!strcmp(a, "--fill-after") && v)
            fill_after = atoi(argv[++i]);
        else if (!strcmp(a, "--grow-at") && v)
            grow_at = atoi(argv[++i]);
        else if (!strcmp(a, "--n") && v)
            n = (size_t)atol(argv[++i]);
        else if (!strcmp(a, "--expect") && v)
            expect = atoi(argv[++i]);
        else if (!strcmp(a, "--heap"))
            heap = 1;
        else if (!strcmp(a, "--recover"))
            recover = 1;
        else if (!strcmp(a, "--expect-init-fail"))
            init_fail = 1;
        else if (!strcmp(a, "--leave") && v)
            leave = atol(argv[++i]);
        else if (!strcmp(a, "--then-free"))
            then_free = 1;
        else
            DIE("unknown argument %s", a);
    }
    if (!cfg || !nlev)
        DIE("usage: nospace_app --crpm cfg --levels L,... (see the source)");
    if (!where)
        where = fill;

    int rc = crpm_init(cfg, MPI_COMM_WORLD);
    if (init_fail) {
        if (rc == 0)
            DIE("crpm_init succeeded on a full file system");
        check_nospace(rc, "crpm_init", where, expect);
        if (rank == 0)
            printf("nospace_app: init failed as expected\n");
        MPI_Finalize();
        return 0;
    }
    if (rc != 0)
        DIE("crpm_init: %s: %s", crpm_strerror(rc), crpm_last_error());

    if (recover) {
        if (crpm_status() == CRPM_STATUS_FRESH)
            DIE("no checkpoint found (expected %d)", expect);
        if (!heap) {
            int64_t bytes = 0;
            if ((rc = crpm_stored_size(1, &bytes)) != 0)
                DIE("crpm_stored_size: %s", crpm_last_error());
            arr_n = (size_t)bytes / sizeof(double);
            if (!(arr = malloc(arr_n * sizeof *arr)))
                DIE("out of memory");
            if ((rc = crpm_protect(1, arr, (int64_t)arr_n, CRPM_DOUBLE)) != 0)
                DIE("crpm_protect: %s", crpm_last_error());
        }
        if ((rc = crpm_recover()) != 0)
            DIE("crpm_recover: %s: %s", crpm_strerror(rc), crpm_last_error());
        if (!data_is(expect))
            DIE("the recovered data is not checkpoint %d's", expect);
        if (rank == 0)
            printf("nospace_app: recovered checkpoint %d bit for bit (status %d)\n", expect, crpm_status());
        int k = expect + 1, lv = levels[nlev - 1];
        make_data(k);
        if ((rc = crpm_checkpoint(k, lv)) != 0 || (rc = crpm_wait()) != 0)
            DIE("checkpoint %d (L%d) after space was freed: %s: %s", k, lv, crpm_strerror(rc), crpm_last_error());
        if (rank == 0)
            printf("nospace_app: checkpoint %d (L%d) after the restart: ok\ncommitted %d\n", k, lv, k);
        if ((rc = crpm_finalize()) != 0)
            DIE("crpm_finalize: %s", crpm_last_error());
        MPI_Finalize();
        return 0;
    }

    int committed = 0, failed = 0;
    for (int k = 1; k <= nlev && !failed; k++) {
        make_data(k);
        rc = crpm_checkpoint(k, levels[k - 1]);
        const char *call = "crpm_checkpoint";
        int l1_committed = rc == 0;
        if (rc == 0) {
            rc = crpm_wait(); /* async: the level written in the background */
            call = "crpm_wait";
        }
        if (rc != 0) {
            if (!fill || k <= fill_after)
                DIE("checkpoint %d (L%d): %s: %s", k, levels[k - 1], crpm_strerror(rc), crpm_last_error());
            check_nospace(rc, call, where, k);
            failed = k;
            /* in the background only the level failed: level 1 committed k */
            if (l1_committed)
                committed = k;
            break;
        }
        committed = k;
        if (fill && k == fill_after) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0)
                fill_fs(fill, leave);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    if (fill && !failed)
        DIE("no checkpoint failed on the full file system");
    if (failed && then_free) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/filler", fill);
            if (unlink(path) != 0)
                DIE("cannot remove %s: %s", path, strerror(errno));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        /* the same data again under the next id: the run goes on */
        int k = failed + 1;
        make_data(k);
        if ((rc = crpm_checkpoint(k, levels[failed - 1])) != 0 || (rc = crpm_wait()) != 0)
            DIE("checkpoint %d (L%d) after space was freed: %s: %s", k, levels[failed - 1], crpm_strerror(rc),
                crpm_last_error());
        committed = k;
        if (rank == 0)
            printf("nospace_app: checkpoint %d (L%d) after space was freed in the same run: ok\n", k,
                   levels[failed - 1]);
    }
    if (rank == 0) {
        if (failed)
            printf("nospace_app: checkpoint %d failed for want of space on every rank\n", failed);
        printf("committed %d\n", committed);
        fflush(stdout);
    }
    if ((rc = crpm_finalize()) != 0)
        DIE("crpm_finalize: %s: %s", crpm_strerror(rc), crpm_last_error());
    MPI_Finalize();
    return 0;
}

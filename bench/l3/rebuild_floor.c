/* The least a level-3 rebuild can cost on this machine: the bytes any
 * decode from k sources must move, moved by MPI alone, with no coding and
 * no order between messages.  Ranks 0..G-1 are a group of G nodes (one rank
 * each) of which rank 1 is lost; its k = G - M sources each hold B bytes in
 * a file in D, mapped afresh each repetition (as a container after a
 * restart).  Every one of those bytes has to leave its source once (each
 * lost byte is a sum over the k sources), and B bytes have to arrive in
 * fresh memory on the lost rank:
 *
 *   move  each source sends its B bytes in U-byte messages: 1/k of them to
 *         the lost rank (its part of the image), the rest to the next
 *         source, which receives them into a reused window of W bytes (the
 *         partial sums of a chain); the lost rank receives B
 *   copy  the lost rank receives B bytes, 1/k from each source, and nothing
 *         else moves (what copying a replica costs: level 2's floor)
 *
 * Ranks outside the group wait as the library's idle ranks do (a test and
 * a 20-us nap), and so do all waits here.  Times are the slowest rank's,
 * from a barrier to the last message.
 *
 *   rebuild_floor --bytes B --dir D [--group G] [--parity M] [--unit U]
 *                 [--window W] [--reps R]
 *
 * Prints "rebuild_floor: B bytes per lost rank, k K, R reps: move median S s
 * (X GB/s), best S s; copy median S s (X GB/s), best S s". */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "../common/bench_util.h"
#include "mpi_wait.h"

#define LOST 1

typedef struct opts {
    size_t bytes, unit, window;
    int group, parity, reps;
    const char *dir;
} opts;

static int write_file(const char *path, size_t n)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    char *b = malloc(1u << 20);
    int ok = b != NULL;
    for (size_t off = 0; ok && off < n; off += 1u << 20) {
        size_t len = n - off < (1u << 20) ? n - off : (1u << 20);
        fill_random(b, len);
        ok = write(fd, b, len) == (ssize_t)len;
    }
    free(b);
    close(fd);
    return ok ? 0 : -1;
}

/* Rank of source i (the sources are the group's ranks but the lost one). */
static int src_rank(int i) { return i < LOST ? i : i + 1; }

/* One repetition by source `me` (-1: not a source), source file fd;
 * returns this rank's time, < 0 on an error (on every rank: the ranks agree
 * on their buffers before any message, so none waits for one never sent).
 * The image is allocated and the file mapped before the clock starts; their
 * pages are first touched inside it, as in a rebuild. */
static double one(const opts *o, int rank, int me, int move, int fd, char *win, MPI_Request *rq)
{
    int k = o->group - o->parity, next = src_rank((me + 1) % k), prev = (me + k - 1) % k;
    size_t units = (o->bytes + o->unit - 1) / o->unit, wu = o->window / o->unit;
    char *img = rank == LOST ? malloc(o->bytes) : NULL, *data = NULL;
    if (me >= 0 && (data = mmap(NULL, o->bytes, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
        data = NULL;
    int ok = (rank != LOST || img) && (me < 0 || data), all = 0, mrc = MPI_SUCCESS;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    double t0 = now();
    if (!all) {
        mrc = MPI_ERR_OTHER;
    } else if (rank == LOST) {
        size_t n = 0;
        for (size_t j = 0; j < units; j++) {
            size_t len = o->bytes - j * o->unit < o->unit ? o->bytes - j * o->unit : o->unit;
            MPI_Irecv(img + j * o->unit, (int)len, MPI_BYTE, src_rank((int)(j % (size_t)k)), (int)j, MPI_COMM_WORLD,
                      &rq[n++]);
        }
        mrc = crpm_mpi_idle_wait((int)n, rq, MPI_STATUSES_IGNORE);
    } else if (me >= 0) {
        /* in windows of wu units: what goes to the lost rank, what goes to
         * the next source, and what comes from the previous one */
        for (size_t w0 = 0; w0 < units; w0 += wu) {
            size_t w1 = w0 + wu < units ? w0 + wu : units, n = 0;
            for (size_t j = w0; j < w1; j++) {
                size_t len = o->bytes - j * o->unit < o->unit ? o->bytes - j * o->unit : o->unit;
                int mine = j % (size_t)k == (size_t)me;
                if (mine)
                    MPI_Isend(data + j * o->unit, (int)len, MPI_BYTE, LOST, (int)j, MPI_COMM_WORLD, &rq[n++]);
                else if (move)
                    MPI_Isend(data + j * o->unit, (int)len, MPI_BYTE, next, (int)j, MPI_COMM_WORLD, &rq[n++]);
                /* the previous source sends us every unit that is not its own */
                if (move && j % (size_t)k != (size_t)prev)
                    MPI_Irecv(win + (j - w0) * o->unit, (int)len, MPI_BYTE, src_rank(prev), (int)j, MPI_COMM_WORLD,
                              &rq[n++]);
            }
            if ((mrc = crpm_mpi_idle_wait((int)n, rq, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
                break;
        }
    }
    if (all) /* everyone, the idle ranks from the start: they wait as the library's do */
        mrc = mrc != MPI_SUCCESS ? mrc : crpm_mpi_idle_barrier(MPI_COMM_WORLD);
    double t = now() - t0;
    free(img);
    if (data)
        munmap(data, o->bytes);
    return mrc == MPI_SUCCESS ? t : -1;
}

static double best_of(const double *v, int n)
{
    double b = v[0];
    for (int i = 1; i < n; i++)
        b = v[i] < b ? v[i] : b;
    return b;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    opts o = {.unit = 64u << 10, .window = 8u << 20, .group = 4, .parity = 1, .reps = 5};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes"))
            o.bytes = (size_t)strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dir"))
            o.dir = argv[i + 1];
        else if (!strcmp(argv[i], "--group"))
            o.group = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--parity"))
            o.parity = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--unit"))
            o.unit = (size_t)strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--window"))
            o.window = (size_t)strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            o.reps = atoi(argv[i + 1]);
    }
    if (!o.bytes || !o.dir || o.group < 3 || o.group > np || o.parity < 1 || 2 * o.parity > o.group ||
        o.group - o.parity < 2 || !o.unit || o.window < o.unit || o.reps <= 0 || o.unit > (1u << 30)) {
        if (!rank)
            fprintf(stderr, "usage: rebuild_floor --bytes B --dir D [--group G] [--parity M] [--unit U] "
                            "[--window W] [--reps R] (G ranks at least)\n");
        MPI_Finalize();
        return 2;
    }
    o.window = o.window / o.unit * o.unit;
    int k = o.group - o.parity, me = rank == LOST || rank >= o.group ? -1 : rank < LOST ? rank : rank - 1;
    me = me < k ? me : -1; /* beyond k: a member the decode does not need */
    int src = me >= 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/rebuild_floor.%d.%ld", o.dir, rank, (long)getpid());
    rng ^= (uint64_t)rank * 0x9e3779b97f4a7c15ull;
    size_t units = (o.bytes + o.unit - 1) / o.unit, wu = o.window / o.unit, nrq = units > 2 * wu ? units : 2 * wu;
    char *win = src ? malloc(o.window) : NULL;
    MPI_Request *rq = malloc(sizeof *rq * nrq);
    double *t[2] = {malloc(sizeof(double) * (size_t)o.reps), malloc(sizeof(double) * (size_t)o.reps)};
    int fd = src && win && write_file(path, o.bytes) == 0 ? open(path, O_RDONLY) : -1;
    int ok = rq && t[0] && t[1] && (!src || fd >= 0), all = 0;
    if (!ok)
        perror("rebuild_floor");
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    /* a warm-up repetition of each: MPI's first transfer between two ranks sets them up */
    for (int r = -1; all && r < o.reps; r++)
        for (int move = 1; all && move >= 0; move--) {
            double mine = one(&o, rank, me, move, fd, win, rq), slowest = 0;
            if (mine < 0)
                mine = 1e30;
            MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            all = slowest < 1e29;
            if (r >= 0)
                t[move][r] = slowest;
        }
    if (all && !rank) {
        double bm = best_of(t[1], o.reps), bc = best_of(t[0], o.reps);
        double mm = median(t[1], o.reps), mc = median(t[0], o.reps);
        printf("rebuild_floor: %zu bytes per lost rank, k %d, %d reps: move median %.6f s (%.2f GB/s), best %.6f s; "
               "copy median %.6f s (%.2f GB/s), best %.6f s\n",
               o.bytes, k, o.reps, mm, (double)o.bytes / mm / 1e9, bm, mc, (double)o.bytes / mc / 1e9, bc);
    }
    if (fd >= 0)
        close(fd);
    if (src)
        unlink(path);
    free(win);
    free(rq);
    free(t[0]);
    free(t[1]);
    MPI_Finalize();
    return all ? 0 : 1;
}

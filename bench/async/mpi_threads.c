/* The price of MPI_THREAD_MULTIPLE, which async = 1 needs (docs/async.md):
 * ping-pong latency and bandwidth between ranks 0 and 1 and an 8-byte
 * MPI_Allreduce over every rank, with MPI initialised at the thread level
 * given (single or multiple).  bench/async/run.py runs both side by side.
 *
 *   mpi_threads single|multiple [REPS]
 *
 * Prints "threads <level> pingpong <bytes> <us per round trip> <MB/s>" and
 * "threads <level> allreduce 8 <us>" (rank 0; the median of 5 batches). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median5(double *v)
{
    qsort(v, 5, sizeof *v, cmp);
    return v[2];
}

static double pingpong(int rank, char *buf, int bytes, int reps)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) / reps;
}

int main(int argc, char **argv)
{
    int want = argc > 1 && strcmp(argv[1], "multiple") == 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, got, rank;
    int reps = argc > 2 ? atoi(argv[2]) : 2000;
    MPI_Init_thread(&argc, &argv, want, &got);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *name = got == MPI_THREAD_MULTIPLE ? "multiple" : got == MPI_THREAD_SINGLE ? "single" : "other";
    static const int sizes[] = {8, 65536, 4 << 20};
    char *buf = calloc(4 << 20, 1);
    for (int s = 0; s < 3; s++) {
        int n = sizes[s] >= (1 << 20) ? reps / 50 + 1 : sizes[s] >= 4096 ? reps / 4 + 1 : reps;
        double t[5];
        for (int k = 0; k < 5; k++)
            t[k] = pingpong(rank, buf, sizes[s], n);
        double m = median5(t);
        if (rank == 0)
            printf("threads %s pingpong %d %.3f %.1f\n", name, sizes[s], m * 1e6, 2.0 * sizes[s] / m / 1e6);
    }
    double t[5], x = rank, y;
    for (int k = 0; k < 5; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < reps; i++)
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        t[k] = (MPI_Wtime() - t0) / reps;
    }
    double m = median5(t);
    if (rank == 0)
        printf("threads %s allreduce 8 %.3f\n", name, m * 1e6);
    free(buf);
    MPI_Finalize();
    return 0;
}

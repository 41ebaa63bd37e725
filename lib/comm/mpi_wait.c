/* Waiting on MPI without holding a core (mpi_wait.h). */
#include <time.h>
#include "mpi_wait.h"

int crpm_mpi_idle_wait(int n, MPI_Request *rq, MPI_Status *st)
{
    /* 20 us: far below a rebuild's or a transfer's time, long enough for
     * the scheduler to run a working rank on the core */
    const struct timespec nap = {0, 20000};
    for (;;) {
        int done = 0, mrc = MPI_Testall(n, rq, &done, st);
        if (mrc != MPI_SUCCESS || done)
            return mrc;
        nanosleep(&nap, NULL);
    }
}

int crpm_mpi_idle_barrier(MPI_Comm comm)
{
    MPI_Request r;
    int mrc = MPI_Ibarrier(comm, &r);
    return mrc == MPI_SUCCESS ? crpm_mpi_idle_wait(1, &r, MPI_STATUSES_IGNORE) : mrc;
}

static _Thread_local int idle_thread;

void crpm_mpi_idle_thread(int on) { idle_thread = on; }

int crpm_mpi_idle_here(void) { return idle_thread; }

int crpm_mpi_recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm)
{
    if (!idle_thread)
        return MPI_Recv(buf, count, type, src, tag, comm, MPI_STATUS_IGNORE);
    MPI_Request r;
    int mrc = MPI_Irecv(buf, count, type, src, tag, comm, &r);
    return mrc == MPI_SUCCESS ? crpm_mpi_idle_wait(1, &r, MPI_STATUSES_IGNORE) : mrc;
}

int crpm_mpi_waitall(int n, MPI_Request *rq, MPI_Status *st)
{
    return idle_thread ? crpm_mpi_idle_wait(n, rq, st) : MPI_Waitall(n, rq, st);
}

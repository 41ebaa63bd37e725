/* Waiting on MPI without holding a core.  MPI's blocking calls poll; with
 * several ranks per core (oversubscribed test nodes, or ranks idle while
 * others rebuild) the pollers take the cycles the working ranks need.  For
 * the waits of unbalanced phases (rebuilds, transfers), not for the short
 * agreements of every checkpoint. */
#ifndef CRPM_COMM_MPI_WAIT_H
#define CRPM_COMM_MPI_WAIT_H
#include <mpi.h>

/* MPI_Waitall, sleeping briefly between tests: returns MPI's code.  st:
 * n statuses, or MPI_STATUSES_IGNORE. */
int crpm_mpi_idle_wait(int n, MPI_Request *rq, MPI_Status *st);

/* A barrier over comm waited for that way: returns MPI's code. */
int crpm_mpi_idle_barrier(MPI_Comm comm);

/* A thread that shares the cores with the application's own work (the
 * background levels' thread, lib/mpi/background.c) marks itself (on = 1):
 * its receives and waits below, and its agreements (agree.h), then sleep
 * between tests instead of polling inside MPI.  Other threads are unchanged. */
void crpm_mpi_idle_thread(int on);
int crpm_mpi_idle_here(void);
/* MPI_Recv and MPI_Waitall, waited for idly in a marked thread: MPI's code. */
int crpm_mpi_recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm);
int crpm_mpi_waitall(int n, MPI_Request *rq, MPI_Status *st);

#endif

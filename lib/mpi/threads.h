/* The number of workers of a rank's engine ([advanced] threads; docs/threads.md). */
#ifndef CRPM_MPI_THREADS_H
#define CRPM_MPI_THREADS_H
#include <mpi.h>
#include <sched.h>
#include "config.h"

/* Collective over comm: `configured` (> 0, used as given: oversubscription
 * is the user's choice), else OMP_NUM_THREADS when set, else the cores of
 * this rank's affinity mask shared among the ranks of its shared-memory node
 * whose masks meet it.  Both automatic rules are scaled down so that the
 * node's ranks together never have more workers than the node has cores (at
 * least 1 each).  *why names the rule that decided.  CRPM_ERR_MPI,
 * CRPM_ERR_NOMEM. */
int crpm_threads_for(MPI_Comm comm, int configured, int *out, const char **why);
/* The affinity rule alone: rank `me` of n ranks with these masks (pure). */
int crpm_threads_share(const cpu_set_t *masks, int n, int me);
/* The node's cores (the union of the masks) per rank, at least 1 (pure). */
int crpm_threads_cap(const cpu_set_t *masks, int n);

#endif

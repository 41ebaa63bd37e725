/* Collective agreement on failure: one rank's error becomes an error on
 * every rank, never a hang.  Every level and the MPI layer agree through
 * these; none writes its own. */
#ifndef CRPM_COMM_AGREE_H
#define CRPM_COMM_AGREE_H
#include <mpi.h>
#include <stdint.h>
#include "mpi_error.h" /* crpm_mpi_fail */

/* Returns 0 only if rc == 0 on every rank of comm.  A rank that did not fail
 * itself gets CRPM_ERR_REMOTE with the first failing rank's message.
 * `extra` (may be NULL) are values reduced with MIN in the same round trip
 * (pass x and -x to learn min and max); at most 6. */
int crpm_agree_ext(MPI_Comm comm, int rank, int rc, const char *what, int64_t *extra, int nextra);
int crpm_agree(MPI_Comm comm, int rank, int rc, const char *what);
/* crpm_agree for the end of an unbalanced phase (a rebuild, a transfer):
 * the ranks that arrive early wait without holding a core (mpi_wait.h). */
int crpm_agree_idle(MPI_Comm comm, int rank, int rc, const char *what);

#endif

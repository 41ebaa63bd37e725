/* Collective agreement (agree.h). */
#include <stdio.h>
#include "agree.h"
#include "error.h"

int crpm_agree_ext(MPI_Comm comm, int rank, int rc, const char *what, int64_t *extra, int nextra)
{
    int64_t in[8], out[8];
    if (nextra > 6)
        return crpm_error(CRPM_ERR_INVAL, "%s: too many values to agree on", what);
    in[0] = rc;
    in[1] = rc < 0 ? rank : INT64_MAX;
    for (int i = 0; i < nextra; i++)
        in[2 + i] = extra[i];
    int mrc = MPI_Allreduce(in, out, 2 + nextra, MPI_INT64_T, MPI_MIN, comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, what);
    for (int i = 0; i < nextra; i++)
        extra[i] = out[2 + i];
    if (out[0] >= 0)
        return CRPM_SUCCESS;
    int root = (int)out[1];
    char msg[3 * 4096]; /* a message may carry a long path: its reason must survive */
    if (rank == root)
        snprintf(msg, sizeof msg, "%s: %s", crpm_strerror(rc), crpm_last_error());
    mrc = MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, root, comm);
    if (rc < 0)
        return rc;
    if (mrc != MPI_SUCCESS)
        return crpm_error(CRPM_ERR_REMOTE, "%s failed on rank %d", what, root);
    msg[sizeof msg - 1] = '\0';
    return crpm_error(CRPM_ERR_REMOTE, "%s failed on rank %d: %s", what, root, msg);
}

int crpm_agree(MPI_Comm comm, int rank, int rc, const char *what)
{
    return crpm_agree_ext(comm, rank, rc, what, NULL, 0);
}

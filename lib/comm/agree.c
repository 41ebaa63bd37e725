/* Collective agreement (agree.h). */
#include <stdio.h>
#include "agree.h"
#include "error.h"
#include "mpi_wait.h"

static int reduce_min(const int64_t *in, int64_t *out, int n, MPI_Comm comm, int idle)
{
    if (!idle && !crpm_mpi_idle_here())
        return MPI_Allreduce(in, out, n, MPI_INT64_T, MPI_MIN, comm);
    MPI_Request r;
    int mrc = MPI_Iallreduce(in, out, n, MPI_INT64_T, MPI_MIN, comm, &r);
    return mrc == MPI_SUCCESS ? crpm_mpi_idle_wait(1, &r, MPI_STATUSES_IGNORE) : mrc;
}

static int agree(MPI_Comm comm, int rank, int rc, const char *what, int64_t *extra, int nextra, int idle)
{
    int64_t in[8], out[8];
    if (nextra > 6)
        return crpm_error(CRPM_ERR_INVAL, "%s: too many values to agree on", what);
    in[0] = rc;
    in[1] = rc < 0 ? rank : INT64_MAX;
    for (int i = 0; i < nextra; i++)
        in[2 + i] = extra[i];
    int mrc = reduce_min(in, out, 2 + nextra, comm, idle);
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

int crpm_agree_ext(MPI_Comm comm, int rank, int rc, const char *what, int64_t *extra, int nextra)
{
    return agree(comm, rank, rc, what, extra, nextra, 0);
}

int crpm_agree(MPI_Comm comm, int rank, int rc, const char *what)
{
    return agree(comm, rank, rc, what, NULL, 0, 0);
}

int crpm_agree_idle(MPI_Comm comm, int rank, int rc, const char *what)
{
    return agree(comm, rank, rc, what, NULL, 0, 1);
}

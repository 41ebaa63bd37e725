/* MPI errors (mpi_error.h). */
#include <mpi.h>
#include <stdio.h>
#include "error.h"
#include "mpi_error.h"

int crpm_mpi_fail(int mrc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", mrc);
    return crpm_error(CRPM_ERR_MPI, "%s failed: %s", what, s);
}

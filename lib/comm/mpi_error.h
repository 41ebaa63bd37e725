/* MPI errors as libcrpm errors, in the communication layer below the levels,
 * so the levels and the MPI layer report them alike. */
#ifndef CRPM_COMM_MPI_ERROR_H
#define CRPM_COMM_MPI_ERROR_H

/* CRPM_ERR_MPI with MPI's text for mrc: "<what> failed: <text>". */
int crpm_mpi_fail(int mrc, const char *what);

#endif

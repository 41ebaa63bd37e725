/* MPI errors as libcrpm errors: the lowest layer that speaks MPI (levels)
 * owns it, so the levels and the MPI layer report them alike. */
#ifndef CRPM_LEVELS_MPI_ERROR_H
#define CRPM_LEVELS_MPI_ERROR_H

/* CRPM_ERR_MPI with MPI's text for mrc: "<what> failed: <text>". */
int crpm_mpi_fail(int mrc, const char *what);

#endif

/* C side of the Fortran bindings: only what standard Fortran cannot reach
 * directly through ISO_C_BINDING (MPI_Comm_f2c is a macro or an MPI-internal
 * function, and the element length of an assumed-type object lives only in
 * its descriptor). */
#include <ISO_Fortran_binding.h>
#include <stddef.h>

#include "crpm.h"

int crpm_f_init(const char *config_file, MPI_Fint comm);
size_t crpm_f_elem_len(const CFI_cdesc_t *a);

/* Fortran has no null string: a blank name stands for "no file", which the
 * library reports as such instead of failing to open "". */
int crpm_f_init(const char *config_file, MPI_Fint comm)
{
    const char *cfg = (config_file && config_file[0]) ? config_file : NULL;
    return crpm_init(cfg, MPI_Comm_f2c(comm));
}

size_t crpm_f_elem_len(const CFI_cdesc_t *a)
{
    return a ? a->elem_len : 0;
}

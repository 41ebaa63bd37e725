/* C side of the Fortran bindings: only what standard Fortran cannot reach
 * directly through ISO_C_BINDING (MPI_Comm_f2c is a macro or an MPI-internal
 * function, and the element length of an assumed-type object lives only in
 * its descriptor). */
#include <ISO_Fortran_binding.h>
#include <stddef.h>
#include <stdint.h>

#include "crpm.h"

int crpm_f_init(const char *config_file, MPI_Fint comm);
size_t crpm_f_elem_len(const CFI_cdesc_t *a);
int crpm_f_define_global(int gid, int ndims, const int64_t *dims, const CFI_cdesc_t *mold, const char *name);
int crpm_f_protect_replicated(int id, const CFI_cdesc_t *a);

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

/* The libcrpm type of a Fortran object, as crpm_protect's specifics choose
 * it (anything else: records of its element size, as crpm_protect_bytes). */
static crpm_type_t f_type(const CFI_cdesc_t *a)
{
    crpm_type_t t = {CRPM_TC_BYTE, 0, (int64_t)a->elem_len};
    CFI_type_t c = a->type;
    if (c == CFI_type_int8_t)
        t.code = CRPM_TC_INT8;
    else if (c == CFI_type_int16_t)
        t.code = CRPM_TC_INT16;
    else if (c == CFI_type_int32_t || (c == CFI_type_int && a->elem_len == 4))
        t.code = CRPM_TC_INT32;
    else if (c == CFI_type_int64_t || ((c == CFI_type_long || c == CFI_type_long_long) && a->elem_len == 8))
        t.code = CRPM_TC_INT64;
    else if (c == CFI_type_float)
        t.code = CRPM_TC_FLOAT;
    else if (c == CFI_type_double)
        t.code = CRPM_TC_DOUBLE;
    else if (c == CFI_type_float_Complex)
        t.code = CRPM_TC_COMPLEX_FLOAT;
    else if (c == CFI_type_double_Complex)
        t.code = CRPM_TC_COMPLEX_DOUBLE;
    else if (c == CFI_type_Bool)
        t.code = CRPM_TC_LOGICAL;
    else
        crpm_init_type(&t, a->elem_len);
    return t;
}

/* dims arrive in C order (the module reversed them); a blank name is none. */
int crpm_f_define_global(int gid, int ndims, const int64_t *dims, const CFI_cdesc_t *mold, const char *name)
{
    return crpm_define_global(gid, ndims, dims, f_type(mold), name && name[0] ? name : NULL);
}

/* The module checked contiguity: the object is elements at base_addr. */
int crpm_f_protect_replicated(int id, const CFI_cdesc_t *a)
{
    int64_t n = 1;
    for (int k = 0; k < a->rank; k++)
        n *= (int64_t)a->dim[k].extent;
    return crpm_protect_replicated(id, n ? a->base_addr : NULL, n, f_type(a));
}

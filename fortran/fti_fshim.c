/* C side of module fti (fti.F90): what ISO_C_BINDING cannot reach directly
 * in the C layer's fti.h -- MPI_Comm_f2c/c2f (macros or MPI-internal
 * functions) and the FTI_COMM_WORLD and predefined type variables.  The
 * other calls pass through, so the module never depends on how fti.h
 * declares them beyond their C types. */
#include <stdint.h>

#include <mpi.h>

#include "fti.h"

/* Families of ftif_type(); must match FAM_* in fti.F90. */
enum { FAM_OPAQUE = 0, FAM_INT = 1, FAM_FLOAT = 2, FAM_CHAR = 3 };

int ftif_init(const char *config_file, MPI_Fint *comm);
int ftif_type(int family, int size, int *id);
int ftif_protect(int id, void *ptr, int64_t count, int tid);
int64_t ftif_stored_size(int id);
void *ftif_realloc(int id, void *ptr);
int ftif_status(void);
int ftif_checkpoint(int id, int level);
int ftif_recover(void);
int ftif_recover_var(int id);
int ftif_snapshot(void);
int ftif_finalize(void);
int ftif_composite(const char *name, size_t size);
int ftif_add_field(int tid, const char *name, int fid, size_t offset, int ndims, int64_t *dims);

int ftif_init(const char *config_file, MPI_Fint *comm)
{
    int rc = FTI_Init(config_file, MPI_Comm_f2c(*comm));
    if (rc == FTI_SCES)
        *comm = MPI_Comm_c2f(FTI_COMM_WORLD);
    return rc;
}

/* A predefined C type of the same size keeps a native type in level-4 files;
 * complex, logical and odd sizes become opaque records. */
int ftif_type(int family, int size, int *id)
{
    if (family == FAM_CHAR && size == 1) {
        *id = FTI_CHAR;
        return FTI_SCES;
    }
    if (family == FAM_INT) {
        if (size == 1) { *id = FTI_CHAR; return FTI_SCES; }
        if (size == (int)sizeof(short)) { *id = FTI_SHRT; return FTI_SCES; }
        if (size == (int)sizeof(int)) { *id = FTI_INTG; return FTI_SCES; }
        if (size == (int)sizeof(long)) { *id = FTI_LONG; return FTI_SCES; }
    }
    if (family == FAM_FLOAT) {
        if (size == (int)sizeof(float)) { *id = FTI_SFLT; return FTI_SCES; }
        if (size == (int)sizeof(double)) { *id = FTI_DBLE; return FTI_SCES; }
    }
    fti_id_t t;
    int rc = FTI_InitType(&t, size);
    if (rc == FTI_SCES)
        *id = (int)t;
    return rc;
}

int ftif_protect(int id, void *ptr, int64_t count, int tid)
{
    return FTI_Protect(id, ptr, count, (fti_id_t)tid);
}

int64_t ftif_stored_size(int id)
{
    return (int64_t)FTI_GetStoredSize(id);
}

void *ftif_realloc(int id, void *ptr)
{
    return FTI_Realloc(id, ptr);
}

int ftif_status(void) { return FTI_Status(); }
int ftif_checkpoint(int id, int level) { return FTI_Checkpoint(id, level); }
int ftif_recover(void) { return FTI_Recover(); }
int ftif_recover_var(int id) { return FTI_RecoverVar(id); }
int ftif_snapshot(void) { return FTI_Snapshot(); }
int ftif_finalize(void) { return FTI_Finalize(); }

int ftif_composite(const char *name, size_t size)
{
    return (int)FTI_InitCompositeType(name, size, NULL);
}

/* ndims 0: a scalar field (dims not read). */
int ftif_add_field(int tid, const char *name, int fid, size_t offset, int ndims, int64_t *dims)
{
    if (ndims == 0)
        return FTI_AddScalarField((fti_id_t)tid, name, (fti_id_t)fid, offset);
    return FTI_AddVectorField((fti_id_t)tid, name, (fti_id_t)fid, offset, ndims, dims);
}

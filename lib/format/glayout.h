/* The global layout of a job (restart on another rank count): the global
 * N-D datasets the application declared (crpm_define_global), which box of
 * which dataset each of this rank's protected arrays holds
 * (crpm_add_subset), and the arrays that are equal on every rank
 * (crpm_protect_replicated).  Boxes are row-major (C order), offsets and
 * counts in elements.
 *
 * Each rank's layout travels with its checkpoint as the region CRPM_ID_GLAYOUT
 * (util/reserved_ids.h) in its serialized form below, so every level stores
 * it with the data (levels 2 and 3 copy the container, level 4 writes it as
 * the rank's dataset id_<CRPM_ID_GLAYOUT>).  Serialized form (little-endian):
 *
 *   "CRPMLAYT", u32 version (1), u32 ndatasets, u32 nsubsets, u32 nreplicated,
 *   u32 crc (CRC32C of the whole blob with this field 0), u32 0, then
 *   per dataset: i32 gid, i32 ndims, i32 type_code, i32 name_len,
 *                u64 elem_size, u64 dims[ndims], name (name_len bytes, padded to 8)
 *   per subset:  i32 array id, i32 gid, i32 ndims, i32 0, u64 offset[ndims], u64 count[ndims]
 *   replicated:  i32 ids[nreplicated], padded to 8
 *
 * No MPI here: lib/mpi/reshape.c gathers the layouts of all ranks. */
#ifndef CRPM_FORMAT_LAYOUT_H
#define CRPM_FORMAT_LAYOUT_H
#include <stddef.h>
#include <stdint.h>

#define CRPM_GLAYOUT_MAX_DIMS 32
#define CRPM_GLAYOUT_NAME_MAX 256
#define CRPM_GLAYOUT_MAGIC "CRPMLAYT"
#define CRPM_GLAYOUT_VERSION 1u

typedef struct crpm_gds {
    int32_t gid;
    int32_t ndims;
    int32_t type_code;
    uint64_t elem_size;
    uint64_t dims[CRPM_GLAYOUT_MAX_DIMS];
    char name[CRPM_GLAYOUT_NAME_MAX];   /* "" = none given */
} crpm_gds;

typedef struct crpm_subset {
    int32_t id;                         /* the protected array holding the box */
    int32_t gid;
    int32_t ndims;
    uint64_t off[CRPM_GLAYOUT_MAX_DIMS];
    uint64_t cnt[CRPM_GLAYOUT_MAX_DIMS];
} crpm_subset;

typedef struct crpm_glayout {
    crpm_gds *ds;
    int nds, cap_ds;
    crpm_subset *sub;
    int nsub, cap_sub;
    int32_t *repl;
    int nrepl, cap_repl;
} crpm_glayout;

void crpm_glayout_free(crpm_glayout *l);
int crpm_glayout_empty(const crpm_glayout *l);
const crpm_gds *crpm_glayout_dataset(const crpm_glayout *l, int32_t gid);
const crpm_subset *crpm_glayout_subset(const crpm_glayout *l, int32_t id);
int crpm_glayout_replicated(const crpm_glayout *l, int32_t id);

/* Declares (or redefines) dataset gid; checks the arguments.  name may be
 * NULL.  CRPM_ERR_INVAL / CRPM_ERR_RANGE / CRPM_ERR_NOMEM with a message. */
int crpm_glayout_define(crpm_glayout *l, int32_t gid, int ndims, const int64_t *dims, int32_t type_code,
                       uint64_t elem_size, const char *name);
/* Array id holds box off..off+cnt of dataset gid (it replaces an earlier
 * subset or replicated mark of id).  The box must lie inside the dataset. */
int crpm_glayout_add_subset(crpm_glayout *l, int32_t gid, int32_t id, const int64_t *off, const int64_t *cnt);
/* Array id is equal on every rank (replaces a subset of id). */
int crpm_glayout_add_replicated(crpm_glayout *l, int32_t id);

/* Serialized size of l; writes it into buf when cap is large enough. */
size_t crpm_glayout_serialize(const crpm_glayout *l, void *buf, size_t cap);
/* Parses a blob (CRPM_ERR_CORRUPT naming `where` when it does not check). */
int crpm_glayout_parse(const void *buf, size_t len, crpm_glayout *out, const char *where);
/* 1 when a and b describe the same dataset (gid, ndims, dims, type). */
int crpm_gds_same(const crpm_gds *a, const crpm_gds *b);

/* Boxes. */
uint64_t crpm_box_volume(int nd, const uint64_t *cnt);
/* Intersection of boxes a and b into (oi, ci); returns its volume (0: none). */
uint64_t crpm_box_intersect(int nd, const uint64_t *oa, const uint64_t *ca, const uint64_t *ob, const uint64_t *cb,
                            uint64_t *oi, uint64_t *ci);

#endif

/* Level 4 and the global layout (restart on another number of ranks,
 * docs/reshape.md).
 *
 * A level-4 file of a job that declared global datasets holds, besides the
 * rank groups of level4.h (which then hold only the arrays that are no box
 * of a global dataset, and the layout region id_<CRPM_ID_GLAYOUT>):
 *
 *   /<name> or /global_<gid>   each global dataset, N-D, its global shape and
 *                              type; attributes crpm_gid (int32), type_code
 *                              (int32), elem_size (uint64), crc_piece (uint64:
 *                              elements per checksum piece)
 *   /crpm_global/crc           uint32: rank 0's pieces, then rank 1's, ...: for
 *                              each box in the order of the rank's layout
 *                              region, the zlib CRC-32 of each crc_piece
 *                              elements of the box in C order
 *   /crpm_global/crc_index     int64 [nranks + 1]: where each rank's pieces start
 *   root attributes            crpm_glayout (int32 1), time_ns (int64), run_id
 *                              (32 hex digits)
 *
 * h5dump and h5py read each global dataset with its global shape. */
#ifndef CRPM_LEVELS_L4_GLOBAL_H
#define CRPM_LEVELS_L4_GLOBAL_H
#include <mpi.h>
#include <stdint.h>
#include "array.h"
#include "glayout.h"

/* Bytes per checksum piece (and per redistribution window) of a box. */
#define CRPM_L4G_PIECE_BYTES ((uint64_t)4 << 20)

/* 1 when array id is a box of a global dataset (it is not in the rank group). */
int crpm_l4g_is_box(const crpm_glayout *lay, int32_t id);

/* Collective, agreed: writes the global datasets into the level-4 file at
 * path (created by level4.c, not yet renamed into place).  No-op when no
 * rank has a layout. */
int crpm_l4g_write(MPI_Comm comm, const char *path, const crpm_glayout *lay, int n, const crpm_array *a,
                   const uint8_t *run_id, int64_t time_ns);

/* A level-4 file of the job as a reshaped restart sees it. */
typedef struct crpm_l4g_file {
    int32_t nranks, ckpt_id;
    int32_t layout;    /* holds a global layout */
    int32_t pad;
    uint64_t seq;
    int64_t time_ns;
    char name[64];
} crpm_l4g_file;

/* Collective: the job's level-4 files, newest first (rank 0 reads the
 * directory; the list is broadcast).  *out is malloc'ed. */
int crpm_l4g_list(MPI_Comm comm, const char *glbl_dir, const char *job, crpm_l4g_file **out, int *n);

typedef struct crpm_l4g crpm_l4g;
/* Collective open (read-only) of a level-4 file; checks the job name. */
int crpm_l4g_open(MPI_Comm comm, const char *path, const char *job, crpm_l4g **out);
void crpm_l4g_close(crpm_l4g *h);
/* Rank count, id and epoch the file was written with. */
int crpm_l4g_nranks(const crpm_l4g *h);
int32_t crpm_l4g_ckpt_id(const crpm_l4g *h);
/* Old rank q's saved arrays (ptr NULL; *arr malloc'ed), every dataset of
 * its group checked against its CRC-32. */
int crpm_l4g_rank_arrays(crpm_l4g *h, int q, crpm_array **arr, int *n);
/* Old rank q's array id (a dataset of its group) into dst (bytes long), checked. */
int crpm_l4g_rank_read(crpm_l4g *h, int q, int32_t id, void *dst, uint64_t bytes);
/* Elements per piece of dataset gid's checksums (0: not in the file). */
uint64_t crpm_l4g_piece(crpm_l4g *h, int32_t gid);
/* Old rank q (its layout lay_q): checks every piece of its boxes. */
int crpm_l4g_verify_boxes(crpm_l4g *h, int q, const crpm_glayout *lay_q);
/* Elements [e0, e1) of box k of old rank q (C order) into dst, every piece
 * checked; e0 and e1 on piece boundaries (or e1 the box's end). */
int crpm_l4g_read_box(crpm_l4g *h, int q, const crpm_glayout *lay_q, int k, uint64_t e0, uint64_t e1, void *dst);

#endif

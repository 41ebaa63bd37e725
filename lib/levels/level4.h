/* Level 4: global checkpoints in one parallel-HDF5 file per checkpoint.
 *
 * File layout (also written by crpm-export, so either can be read by h5dump,
 * h5py or crpm_l4_read):
 *
 *   /                      attributes: crpm_format (int32 = CRPM_L4_FORMAT),
 *                          ckpt_id (int32), epoch (uint64), nranks (int32),
 *                          job_name (string), sequence (uint64)
 *   /rank_<r>              one group per rank; attributes rank, nregions
 *   /rank_<r>/id_<id>      one dataset per protected array, 1-D, `count`
 *                          elements of the native HDF5 type of its type code;
 *                          contiguous; attribute crc32 holds the checksum of its data;
 *                          attributes type_code (int32), elem_size (uint64)
 *
 * Types: C codes map to H5T_NATIVE_*, complex to a compound {r, i} (the
 * field names h5py reads as complex), LOGICAL to a signed integer of its
 * size, user types (and any code whose size differs from the native type) to
 * H5T_OPAQUE of elem_size bytes.
 *
 * `sequence` orders the files of a job independently of the caller's epoch:
 * each write takes one more than the largest sequence already in the
 * directory, so the newest file stays newest even if epochs restart.
 *
 * Every function returns CRPM_SUCCESS or a negative CRPM_ERR_* code with a
 * message set through crpm_error().  The MPI functions are collective and
 * agree on the result: a rank that did not fail itself returns
 * CRPM_ERR_REMOTE with the failing rank's message. */
#ifndef CRPM_LEVEL4_H
#define CRPM_LEVEL4_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "array.h"

#define CRPM_L4_FORMAT 1

/* Collective; writes <glbl_dir>/<job>/l4-<ckpt_id>.h5 via a temp name +
 * rename; keeps the newest `keep` files (at least the one just written). */
int crpm_l4_write(MPI_Comm comm, const char *glbl_dir, const char *job, int ckpt_id, uint64_t epoch,
                  int nregions, const crpm_array *regions, int keep);

/* crpm_l4_write plus the global datasets of a layout (l4_global.h): boxes
 * of global datasets are written into those instead of the rank groups.
 * g may be NULL (crpm_l4_write). */
typedef struct crpm_l4_global {
    const struct crpm_glayout *glayout;
    const uint8_t *run_id;     /* 16 bytes, recorded as root attribute run_id */
    int64_t time_ns;           /* recorded as root attribute time_ns */
} crpm_l4_global;
int crpm_l4_write_global(MPI_Comm comm, const char *glbl_dir, const char *job, int ckpt_id, uint64_t epoch,
                         int nregions, const crpm_array *regions, int keep, const crpm_l4_global *g);

/* Collective; newest valid file (structure and every data checksum checked)
 * for this job and rank count, with the run that wrote it (*has_run 0: a
 * file from before runs were recorded); CRPM_ERR_NOCKPT if none, CRPM_ERR_CORRUPT if
 * the job has files but none of them is valid.  Newer files that
 * fail the check are skipped with a warning on stderr (rank 0). */
int crpm_l4_find_latest(MPI_Comm comm, const char *glbl_dir, const char *job, char *path, size_t pathlen,
                        int *ckpt_id, uint64_t *epoch, uint64_t run[2], int *has_run);

/* Collective; reads this rank's datasets into regions[i].ptr; checks ids and
 * sizes (the saved set must equal the given set). */
int crpm_l4_read(MPI_Comm comm, const char *path, int nregions, const crpm_array *regions);

/* ---- serial helpers (tools; no MPI needed) ----------------------------- */

/* The shape of rank `rank`'s array `id` in the file (ptr NULL);
 * CRPM_ERR_MISMATCH when it has none. */
int crpm_l4_stored(const char *path, int rank, int32_t id, crpm_array *shape);

/* One rank's regions for crpm_l4_export(); ptr of the regions is unused. */
typedef struct crpm_l4_rank {
    int32_t rank;
    int nregions;
    const crpm_array *regions;
} crpm_l4_rank;

/* Fills dst (elem_size * count bytes) with region `idx` of entry `entry`. */
typedef int (*crpm_l4_fetch_fn)(void *arg, int entry, int idx, void *dst);

/* Serially writes `path` (temp name + rename) in the level-4 layout with a
 * group for each of the nentries ranks, data obtained through fetch. */
int crpm_l4_export(const char *path, const char *job, int ckpt_id, uint64_t epoch, int nranks,
                   int nentries, const crpm_l4_rank *entries, crpm_l4_fetch_fn fetch, void *arg);

/* Serially checks a level-4 file: attributes, every rank group present and
 * every dataset's checksum; prints a report to out (may be NULL).  Returns
 * CRPM_SUCCESS or the code of the first failed check. */
int crpm_l4_verify_file(const char *path, FILE *out);

#endif

/* Full checkpoints, written the way FTI level 1 writes them: a new file per
 * rank and checkpoint, write() of every protected array, fsync, then removal
 * of the previous file.  Selected with [advanced] method = full; it exists as
 * the baseline the differential engine is measured against, and it restarts
 * like any checkpoint. */
#ifndef CRPM_FULL_H
#define CRPM_FULL_H
#include <stdint.h>
#include <stddef.h>
#include "array.h"


/* Writes <dir>/full-<id>.rank-<rank>; *bytes gets the bytes written.  The
 * caller removes older files (crpm_full_prune) once every rank has written. */
int crpm_full_write(const char *dir, int rank, uint64_t id, int nregions, const crpm_array *r,
                    uint64_t *bytes);
/* The two newest complete checkpoint ids of this rank, newest first; -1
 * where there is none. */
void crpm_full_newest(const char *dir, int rank, int64_t ids[2]);
/* Removes this rank's files other than checkpoint `keep`. */
void crpm_full_prune(const char *dir, int rank, uint64_t keep);
/* Reads checkpoint `id` into the arrays; ids and sizes must match. */
int crpm_full_read(const char *dir, int rank, uint64_t id, int nregions, const crpm_array *r);
/* The shape of array `want` in checkpoint `id` (ptr NULL; the file's
 * checksum is checked by the read); CRPM_ERR_MISMATCH when it has none. */
int crpm_full_stored(const char *dir, int rank, uint64_t id, int32_t want, crpm_array *shape);
/* Removes all of this rank's full checkpoint files. */
void crpm_full_remove(const char *dir, int rank);
#endif

/*
 * libcrpm -- crash-consistent differential checkpoint/restart for MPI
 * applications on persistent memory.
 *
 * Typical use (FTI-like):
 *
 *   crpm_init("crpm.ini", MPI_COMM_WORLD);
 *   crpm_protect(0, &iter, 1, CRPM_INT);
 *   crpm_protect(1, grid, n, CRPM_DOUBLE);
 *   if (crpm_status() != 0) crpm_recover();
 *   for (; iter < niter; iter++) {
 *       ...compute...
 *       if (iter % 10 == 0) crpm_checkpoint(iter, CRPM_L1);
 *   }
 *   crpm_finalize();
 *
 * Every function returns CRPM_SUCCESS (0) or a negative CRPM_ERR_* code;
 * crpm_strerror() turns a code into text and crpm_last_error() gives the
 * detailed message of the most recent failure on this rank.  Collective
 * functions agree on failure: when one rank fails, every rank returns an error
 * (CRPM_ERR_REMOTE on the ranks that did not fail themselves).
 */
#ifndef CRPM_H
#define CRPM_H

#include <mpi.h>
#include "crpm_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- API ---------------------------------------------------------------- */

/* Collective over comm.  Reads the INI config (see config/ and README),
 * opens or creates this rank's container under ckpt_dir/job_name/ and
 * decides, with every rank, whether a restart is possible.  The environment
 * variables CRPM_CKPT_DIR and CRPM_JOB_NAME override the file. */
CRPM_API int crpm_init(const char *config_file, MPI_Comm comm);

/* Register (or re-register with a new pointer or count) array `id`. Local.
 * Arrays must stay valid until the next protect of that id or finalize. */
CRPM_API int crpm_protect(int id, void *ptr, int64_t count, crpm_type_t type);

/* CRPM_STATUS_FRESH, CRPM_STATUS_L1 or CRPM_STATUS_L4 (negative on error). */
CRPM_API int crpm_status(void);

/* Collective: restore every protected array from the checkpoint all ranks
 * agreed on at init.  The protected ids and sizes must match what was saved. */
CRPM_API int crpm_recover(void);

/* Collective: take checkpoint `id` at `level` (CRPM_L1 or CRPM_L4).
 * Returns after every rank has committed it. */
CRPM_API int crpm_checkpoint(int id, int level);

/* Call once per iteration.  On the first call after a restart it recovers
 * (CRPM_SNAP_RECOVERED); otherwise it checkpoints when the configured
 * interval (ckpt_interval iterations or ckpt_interval_s seconds, the latter
 * agreed collectively) has elapsed (CRPM_SNAP_CHECKPOINTED), else returns
 * CRPM_SNAP_NONE.  Collective.  Negative on error. */
CRPM_API int crpm_snapshot(void);

/* Collective: close the containers; removes this job's checkpoints unless
 * keep_last_ckpt = 1. */
CRPM_API int crpm_finalize(void);

#ifdef __cplusplus
}
#endif
#endif /* CRPM_H */

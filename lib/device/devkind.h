/* GPU memory kinds (util/memkind.h) for CUDA device and managed memory
 * (docs/gpu.md).
 *
 *   crpm_dev_kind_diff  (CRPM_DEVICE_DIFF, the default) keeps a copy of the
 *                       committed state on the device; a kernel compares
 *                       blocks there and only the changed ones are packed
 *                       and copied to the host
 *   crpm_dev_kind_fp    (CRPM_DEVICE_FINGERPRINT) keeps a 128-bit fingerprint
 *                       per block instead of the copy (1/16 of the array for
 *                       256-byte blocks)
 *   crpm_dev_kind_full  (CRPM_DEVICE_FULL) copies every byte out at each
 *                       checkpoint and the engine compares on the host: the
 *                       FTI-style baseline
 *
 * Each checkpoint first waits for the device (every stream of the array's
 * device), so kernels the application launched before crpm_checkpoint are
 * seen.  All three copy in and out through pinned, double-buffered staging.
 * The kinds' calls are safe on disjoint ranges of one array and on
 * different arrays at the same time (per-array lock; the staging pool has
 * its own). */
#ifndef CRPM_DEVICE_DEVKIND_H
#define CRPM_DEVICE_DEVKIND_H
#include <stdint.h>
#include "memkind.h"

extern const crpm_mem_kind crpm_dev_kind_diff, crpm_dev_kind_fp, crpm_dev_kind_full;

/* The kind of a CRPM_DEVICE_* mode (DIFF, FINGERPRINT, FULL), NULL for others. */
const crpm_mem_kind *crpm_dev_kind(int mode);

/* What memory ptr is, for protecting it as array `id` (messages name fn):
 * *kind = NULL for host memory, else the kind of `mode` (DIFF, FINGERPRINT
 * or FULL) for device or managed memory (*managed says which).  With
 * `explicit_` (crpm_protect_device), memory that is not device or managed
 * memory is an error.  Errors: CRPM_ERR_NOTSUP (device memory, library
 * without CUDA), CRPM_ERR_DEVICE (explicit, and no CUDA driver or device),
 * CRPM_ERR_INVAL (explicit, host memory). */
int crpm_dev_classify(const void *ptr, int mode, int explicit_, int id, const char *fn,
                      const crpm_mem_kind **kind, int *managed);

/* Frees the staging buffers no array holds (also done when the last array
 * is detached). */
void crpm_dev_trim(void);

/* Staging: per-array windows of this many bytes (rounded to whole ranges),
 * this many in flight; both are tunables for the benchmark, through
 * CRPM_DEVICE_WINDOW_MB and CRPM_DEVICE_DEPTH. */
#define CRPM_DEV_WINDOW_DEFAULT (16ull << 20)
#define CRPM_DEV_DEPTH_DEFAULT 3

#endif

/* Checkpoint engine: failure-atomic differential checkpoints of the
 * protected arrays into one container per process (buffered mode: the
 * arrays are the DRAM working copy).  No MPI here: the levels and the MPI
 * layer coordinate ranks on top of it. */
#ifndef CRPM_ENGINE_H
#define CRPM_ENGINE_H

#include "container.h"

/* Opens (or creates) the container, with change tracking when asked for.
 * *created tells which (may be NULL). */
int crpm_container_open(const crpm_open_opts *o, crpm_container **out, int *created);
int crpm_container_close(crpm_container *c);

/* Array a->id is a->count elements at a->ptr in memory of a->kind
 * (util/memkind.h; NULL: host memory) from now on: the next checkpoint
 * saves it, recovery fills it.  Protecting an id again replaces its
 * description (name not kept). */
int crpm_container_protect_array(crpm_container *c, const crpm_array *a);
/* The same for host memory. */
int crpm_container_protect(crpm_container *c, int32_t id, void *ptr, uint64_t count,
                           int32_t type_code, uint64_t elem_size);
int crpm_container_unprotect(crpm_container *c, int32_t id);

/* Array id (protected) reports its own writes from now on: a checkpoint
 * compares only the blocks reported since the last commit (and those where
 * the two copies may differ), not every block.  For containers whose owner
 * knows exactly what it changed (level-3 parity).  A write not reported is a
 * write lost, so re-protecting it elsewhere or resizing it compares all. */
int crpm_container_declare_writes(crpm_container *c, int32_t id);
/* Bytes [off, off+len) of array id changed (clipped to the array). */
void crpm_container_written(crpm_container *c, int32_t id, uint64_t off, uint64_t len);

/* With change_tracking = instrumented: array id (protected) is written by
 * code the pass did not compile (on = 1), so every checkpoint compares it
 * whole; on = 0 follows its marks again (the next checkpoint compares it
 * whole once). */
int crpm_container_uninstrumented(crpm_container *c, int32_t id, int on);

/* Commit epoch+1 holding the protected arrays. */
int crpm_container_checkpoint(crpm_container *c, uint64_t user_id, crpm_stats_t *st);
/* Copy the committed epoch into the protected arrays; the protected set must
 * match the saved one (ids, element sizes, counts). */
int crpm_container_recover(crpm_container *c);

/* NULL: change tracking not asked for; "pagemap", "instrumented" or
 * "instrumented-verify": active; otherwise the
 * reason it is not available (every block is compared instead). */
const char *crpm_container_tracking(const crpm_container *c);
/* With change tracking asked for: why array id is compared whole instead of
 * tracked (its memory kind, see crpm_tracker_memory_check, or why tracking
 * is not available at all); NULL when it is tracked, when tracking was not
 * asked for (except for memory kinds that find their own changes, e.g. GPU
 * memory whose device copy could not be made), or when id is not protected. */
const char *crpm_container_untracked_reason(const crpm_container *c, int32_t id);

/* The data passes of checkpoint and recovery (compare, copy, CRCs, first
 * touch of the arrays) run on the workers of `pool` (util/pool.h; NULL: on
 * the calling thread alone).  The pool is the caller's and must outlive
 * its use here.  The container's bytes do not depend on the number of
 * workers. */
struct crpm_pool;
void crpm_container_set_pool(crpm_container *c, struct crpm_pool *pool);

/* engine internals: the region of id, NULL when it was never protected */
crpm_region *crpm_region_find(crpm_container *c, int32_t id);

#endif

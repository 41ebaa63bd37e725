/*
 * libcrpm -- crash-consistent differential checkpoint/restart for MPI
 * applications on persistent memory.
 *
 * Typical use (FTI-like; needs <stdlib.h> for calloc):
 *
 *   int iter = 0;
 *   double *grid = calloc(n, sizeof *grid);
 *   crpm_init("crpm.ini", MPI_COMM_WORLD);
 *   crpm_protect(0, &iter, 1, CRPM_INT);
 *   crpm_protect(1, grid, n, CRPM_DOUBLE);
 *   if (crpm_status() > 0)          // a checkpoint exists; < 0 is an error
 *       crpm_recover();
 *   while (iter < niter) {
 *       ...compute iteration `iter`...
 *       iter++;                     // the arrays now hold `iter` iterations
 *       if (iter % 10 == 0)         // saved with the counter that matches them,
 *           crpm_checkpoint(iter, CRPM_L1); // so a restart is bitwise identical
 *   }
 *   crpm_finalize();
 *
 * Every function returns CRPM_SUCCESS (0) or a negative CRPM_ERR_* code;
 * crpm_strerror() turns a code into text and crpm_last_error() gives the
 * detailed message of the most recent failure on this rank.  Collective
 * functions agree on failure: when one rank fails, every rank returns an error
 * (CRPM_ERR_REMOTE on the ranks that did not fail themselves).  The library
 * does not print the errors it returns (only at verbosity 3, for debugging):
 * the application prints crpm_last_error() once.
 */
#ifndef CRPM_H
#define CRPM_H

#include <mpi.h>
#include "crpm_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- API ----------------------------------------------------------------
 * Each function lists the codes it can return besides CRPM_SUCCESS.  Every
 * collective function can also return CRPM_ERR_MPI (an MPI call failed) and
 * CRPM_ERR_REMOTE (the call failed on another rank; crpm_last_error() then
 * quotes that rank's message), and never leaves a rank waiting. */

/* Collective over comm.  Reads the INI config (config/crpm.ini, docs/configuration.md),
 * opens or creates this rank's container under ckpt_dir/job_name/ and
 * decides, with every rank, whether a restart is possible.  The environment
 * variables CRPM_CKPT_DIR and CRPM_JOB_NAME override the file.
 * Errors: CRPM_ERR_STATE (MPI not initialised, or already initialised),
 *   CRPM_ERR_INVAL (no file, MPI_COMM_NULL), CRPM_ERR_CONFIG (bad or missing
 *   key, unreadable file; or node_size, the number of nodes, a rank's node,
 *   group_size or l3_parity differ from what the checkpoint files record:
 *   the message names the key and both values), CRPM_ERR_NOTSUP (a feature
 *   this build lacks), CRPM_ERR_NOMEM, CRPM_ERR_IO; from existing
 *   checkpoints: CRPM_ERR_CORRUPT, CRPM_ERR_VERSION, CRPM_ERR_FORMAT,
 *   CRPM_ERR_TRUNCATED, CRPM_ERR_GEOMETRY (segment/block size differ from the
 *   config), CRPM_ERR_IDENTITY (another job's container, or a parity
 *   container under a container's name), CRPM_ERR_NRANKS (written by another rank count and
 *   holding per-rank state: arrays outside any global dataset),
 *   CRPM_ERR_MISSING (some ranks' containers are gone), CRPM_ERR_EPOCH (ranks
 *   hold checkpoints that cannot be reconciled), CRPM_ERR_HDF5 (level 4). */
CRPM_API int crpm_init(const char *config_file, MPI_Comm comm);

/* Register (or re-register with a new pointer or count) array `id`: `count`
 * elements of `type` at `ptr`.  Local.  Arrays must stay valid until the next
 * protect of that id or finalize.  CUDA device and managed memory is
 * recognised and checkpointed on the GPU in the configuration's device_mode
 * (docs/gpu.md).
 * Errors: CRPM_ERR_STATE (before init), CRPM_ERR_INVAL (NULL pointer with a
 *   count, negative count, unknown type), CRPM_ERR_RANGE (size overflows),
 *   CRPM_ERR_NOMEM, CRPM_ERR_NOTSUP (GPU memory, library built without
 *   CUDA), CRPM_ERR_DEVICE (the CUDA runtime failed). */
CRPM_API int crpm_protect(int id, void *ptr, int64_t count, crpm_type_t type);

/* crpm_protect for CUDA device or managed memory, in `mode`:
 * CRPM_DEVICE_DIFF (a copy of the committed state on the GPU),
 * CRPM_DEVICE_FINGERPRINT (a 128-bit fingerprint per block instead),
 * CRPM_DEVICE_FULL (every byte copied out each checkpoint) or
 * CRPM_DEVICE_DEFAULT (device_mode of the configuration).  Local.  A later
 * crpm_protect of the id goes back to the configured mode.
 * Errors: those of crpm_protect; CRPM_ERR_INVAL (host memory, unknown mode),
 *   CRPM_ERR_NOTSUP (library built without CUDA), CRPM_ERR_DEVICE (no CUDA
 *   driver or device in this process). */
CRPM_API int crpm_protect_device(int id, void *ptr, int64_t count, crpm_type_t type, int mode);

/* Local: CRPM_STATUS_FRESH, CRPM_STATUS_L1, CRPM_STATUS_L2 (level 1 rebuilt
 * from partner copies), CRPM_STATUS_L3 (rebuilt from level-3 parity),
 * CRPM_STATUS_L4 (CRPM_STATUS_Ln is n, the level the restart comes from) or
 * CRPM_STATUS_RESHAPED (written by another number of ranks: protect and
 * describe this run's boxes, then recover; see crpm_define_global), decided
 * at init and the same on every rank.  Recover only when the result is > 0.
 * Errors: CRPM_ERR_STATE (before init). */
CRPM_API int crpm_status(void);

/* Collective: restore every protected array from the checkpoint all ranks
 * agreed on at init (or the last one taken since).  After a restart on
 * another number of ranks, the boxes this run declared are filled from the
 * saved ones over MPI and replicated arrays from old rank 0's.
 * Errors: CRPM_ERR_STATE (before init, or after a failed checkpoint left the
 *   container in an unknown state), CRPM_ERR_NOCKPT (fresh start),
 *   CRPM_ERR_MISMATCH (protected ids, element sizes or counts differ from the
 *   saved ones; another global layout, or boxes the saved ones do not cover
 *   exactly), CRPM_ERR_CORRUPT, CRPM_ERR_IO, CRPM_ERR_HDF5 (level 4). */
CRPM_API int crpm_recover(void);

/* Collective: take a checkpoint at `level` (CRPM_L1, CRPM_L2, CRPM_L3 or
 * CRPM_L4, see crpm_types.h) and return after every rank has committed it
 * (with level 2 or 3 the partner copies or the parity too).  `id` is the
 * application's label of the checkpoint (an iteration number, say): it is
 * stored with the checkpoint, must be equal on all ranks, and crpm_snapshot
 * numbers its own checkpoints from the last one; the library orders
 * checkpoints by its own epochs, not by id.  With method = full ids must be >= 0.  On failure every
 * rank is back on the previous checkpoint.
 * Errors: CRPM_ERR_STATE (before init, or a failed undo earlier),
 *   CRPM_ERR_INVAL (bad level, ranks passed different ids or levels),
 *   CRPM_ERR_CONFIG (level 2 on one node, level 3 without whole groups of
 *   group_size nodes, level 4 without glbl_dir), CRPM_ERR_NOTSUP (level 4 in a
 *   build without HDF5), CRPM_ERR_RANGE, CRPM_ERR_NOMEM, CRPM_ERR_IO (e.g. the
 *   file system is full), CRPM_ERR_HDF5, CRPM_ERR_MISMATCH (a box of a global
 *   dataset whose array is not protected with the box's count and type).
 * With async = 1 ([basic], docs/async.md; needs MPI_THREAD_MULTIPLE) a
 * checkpoint at level 2, 3 or 4 returns once level 1 committed on every rank;
 * the level is written in the background from that committed copy (the
 * arrays may be changed at once).  The next checkpoint, at any level, first
 * waits for it; if it failed, that next call returns its error on every rank
 * and takes no checkpoint. */
CRPM_API int crpm_checkpoint(int id, int level);

/* Collective: waits until every level running in the background (async = 1)
 * committed; returns its result, the same on every rank (CRPM_SUCCESS when
 * nothing runs or async is off).  A failure is returned once: by this call,
 * the next crpm_checkpoint or crpm_finalize, whichever comes first. */
CRPM_API int crpm_wait(void);

/* Local, non-blocking: *done = 1 when no level runs in the background, 0
 * while one does.  Returns a finished background level's failure (without
 * consuming it: the next crpm_checkpoint, crpm_wait or crpm_finalize
 * returns it too).  Errors: CRPM_ERR_STATE (before init), CRPM_ERR_INVAL. */
CRPM_API int crpm_test(int *done);

/* Collective; call once per iteration.  On the first call after a restart it
 * recovers (CRPM_SNAP_RECOVERED); otherwise it checkpoints when the
 * configured interval (ckpt_interval iterations or ckpt_interval_s seconds,
 * the latter agreed collectively) has elapsed (CRPM_SNAP_CHECKPOINTED), else
 * returns CRPM_SNAP_NONE.  Every ckpt_interval_l2/_l3/_l4-th of its
 * checkpoints is taken at that level; when several are due, L4 > L3 > L2.
 * When the job is asked to stop (see crpm_should_exit) it takes a final
 * checkpoint at the highest configured level (level 4 when glbl_dir is set)
 * and returns CRPM_SNAP_EXIT on every rank: save results, crpm_finalize (which
 * then keeps the checkpoints) and exit; a relaunch resumes from it.  With an
 * end time known and no checkpoint at that level measured yet, it takes one
 * once half the time to the end has passed, to learn its cost.
 * Errors: those of crpm_recover and crpm_checkpoint. */
CRPM_API int crpm_snapshot(void);

/* Collective: 1 when the job should stop now, 0 when it may go on, the same
 * on every rank (any rank that sees a reason decides for all).  Reasons: the
 * end of the allocation (end_time or CRPM_END_TIME, or the scheduler's
 * SLURM_JOB_END_TIME; the earliest) is closer than end_time_safety times the
 * measured cost of the final checkpoint plus the time to the next call;
 * exit_signal was received by any rank; a file HALT is in the job directory
 * (crpm-halt).  Once 1, it stays 1 until finalize, which then keeps the
 * checkpoints.  The application checkpoints (crpm_checkpoint) and exits;
 * crpm_snapshot does both for it (CRPM_SNAP_EXIT).
 * Errors: CRPM_ERR_STATE (before init). */
CRPM_API int crpm_should_exit(void);

/* Collective: waits for the levels running in the background (returning
 * their failure, if any), closes the containers; removes this job's
 * checkpoints unless keep_last_ckpt = 1.  The library is uninitialised afterwards, even on error.
 * Errors: CRPM_ERR_STATE (before init), CRPM_ERR_IO (a file could not be
 *   removed or a directory not synced). */
CRPM_API int crpm_finalize(void);

/* crpm_init with the INI text itself instead of a file name.  Collective;
 * rank 0's text is the one used (the others may pass the same text).
 * `origin` names the configuration in messages (may be NULL).  The
 * environment overrides of crpm_init apply.  Errors: as crpm_init. */
CRPM_API int crpm_init_text(const char *ini_text, const char *origin, MPI_Comm comm);

/* crpm_init with the communicator's Fortran handle (MPI_Comm_c2f; mpi4py's
 * comm.py2f()): for bindings that reach C through a foreign-function
 * interface and cannot name an MPI_Comm (the Python package uses it).
 * Errors: as crpm_init. */
CRPM_API int crpm_init_fcomm(const char *config_file, MPI_Fint comm);

/* Longest array name accepted by crpm_set_name, with the terminating NUL. */
#define CRPM_NAME_MAX 256

/* Local: copy array `id` of the checkpoint crpm_recover would read (the one
 * agreed at init, or the newest taken since) into its protected memory.  The
 * array must be protected with the saved element size and count (see
 * crpm_stored_size).  Does not count as a recovery for crpm_snapshot.
 * Errors: CRPM_ERR_STATE, CRPM_ERR_NOCKPT (nothing to recover),
 *   CRPM_ERR_INVAL (id not protected), CRPM_ERR_MISMATCH (id not saved, or
 *   another size), CRPM_ERR_NOTSUP (the checkpoint is level 4 or method = full:
 *   only crpm_recover reads those), CRPM_ERR_CORRUPT. */
CRPM_API int crpm_recover_var(int id);

/* Local: *bytes = size of array `id` in that same checkpoint (0 on error).
 * Errors: as crpm_recover_var, except that `id` need not be protected and
 * that level-4 and method = full checkpoints answer too. */
CRPM_API int crpm_stored_size(int id, int64_t *bytes);

/* Local: a name for array `id`, kept until finalize with the array's
 * description (level-4 files do not record it yet).
 * Errors: CRPM_ERR_STATE, CRPM_ERR_INVAL (empty or >= CRPM_NAME_MAX chars),
 *   CRPM_ERR_NOMEM. */
CRPM_API int crpm_set_name(int id, const char *name);

/* ---- restart on another number of ranks (docs/reshape.md) -------------------
 * The application describes its distributed state as global N-D datasets
 * and says which box of which dataset each protected array holds; arrays
 * equal on every rank are marked replicated.  A checkpoint then carries
 * this layout at every level, level-4 files hold each dataset as one N-D
 * HDF5 dataset of its global shape, and crpm_init on another number of
 * ranks finds the checkpoint: crpm_status() returns CRPM_STATUS_RESHAPED,
 * the application protects and describes its new boxes (sizes from
 * crpm_global_dims) and crpm_recover() fills them, moving the data between
 * ranks over MPI.  Boxes are row-major (C order); offsets and counts are in
 * elements.  Array ids from INT32_MIN to INT32_MIN + 65535 are reserved
 * for the library. */

/* Most dimensions of a global dataset. */
#define CRPM_MAX_DIMS 32
/* Longest global dataset name, with the terminating NUL. */
#define CRPM_GLOBAL_NAME_MAX 256

/* Local; the same call on every rank.  Declares global dataset `gid` of
 * `ndims` dimensions dims[0..ndims) (C order: dims[ndims-1] varies fastest)
 * and element type `type`; `name` (may be NULL: "global_<gid>") names its
 * HDF5 dataset in level-4 files (no '/', not starting with "rank_" or
 * "crpm_").  Calling it again for gid redefines it.
 * Errors: CRPM_ERR_STATE (before init), CRPM_ERR_INVAL (ndims outside
 *   1..CRPM_MAX_DIMS, a negative size, a bad or duplicate name, bad type),
 *   CRPM_ERR_RANGE (the size overflows), CRPM_ERR_NOMEM. */
CRPM_API int crpm_define_global(int gid, int ndims, const int64_t dims[], crpm_type_t type, const char *name);

/* Local: protected array `id` of this rank holds the box offset[k] ..
 * offset[k] + count[k] of dataset gid, in C order (its element count must be
 * the box's volume and its type the dataset's when it is checkpointed or
 * recovered).  A rank may hold any number of boxes, also none; the boxes of
 * all ranks should tile the dataset.  Calling it again for `id` replaces its
 * box.
 * Errors: CRPM_ERR_STATE, CRPM_ERR_INVAL (gid not defined, reserved id),
 *   CRPM_ERR_RANGE (the box leaves the dataset), CRPM_ERR_NOMEM. */
CRPM_API int crpm_add_subset(int gid, int id, const int64_t offset[], const int64_t count[]);

/* Local: crpm_protect for an array that holds the same value on every rank
 * (an iteration counter, parameters); a restart on another rank count
 * restores it on every rank from rank 0's copy.
 * Errors: those of crpm_protect. */
CRPM_API int crpm_protect_replicated(int id, void *ptr, int64_t count, crpm_type_t type);

/* Local: the dimensions of dataset gid into dims[0..ndims) and ndims as the
 * result: after a restart, as the checkpoint saved them (so a program can
 * size its boxes before defining anything); otherwise as defined.
 * Errors: CRPM_ERR_STATE, CRPM_ERR_INVAL (dims NULL, gid neither saved nor
 *   defined). */
CRPM_API int crpm_global_dims(int gid, int64_t dims[]);

/* ---- persistent heap (docs/heap.md) ------------------------------------------
 * Memory saved by every checkpoint and restored by crpm_recover at the same
 * address, so pointer-based structures (trees, hash tables, linked cells)
 * come back with their pointers valid.  Needs heap_size in [basic] (address
 * range reserved at crpm_init at heap_base in [advanced], memory committed as
 * used); the heap and every pointer into it end with crpm_finalize.  Keep a
 * pointer to each structure in a root: after crpm_recover the heap is the
 * checkpoint's, and blocks allocated before it are gone.  Store no pointers
 * to memory outside the heap, no file descriptors, no objects with virtual
 * functions a rebuilt binary may move.  Local calls, safe from several
 * threads at once (one lock per heap; checkpoints must not overlap heap use
 * by other threads).  Allocation failures return NULL (or an error code)
 * with the reason in crpm_last_error(): before crpm_init, without a heap, or
 * when heap_size is used up.  Blocks are 16-byte aligned (large ones 4 KiB). */
#define CRPM_ROOTS 64

CRPM_API void *crpm_malloc(size_t size);
CRPM_API void *crpm_calloc(size_t n, size_t size);
/* p NULL: crpm_malloc; size 0: frees p and returns NULL; on failure NULL
 * and p untouched. */
CRPM_API void *crpm_realloc(void *p, size_t size);
/* alignment: a power of two up to 4096.  With alignment 8 (or less),
 * blocks of up to 56 bytes may be only 8-byte aligned and waste less
 * (crpm::allocator asks so for types aligned to 8 bytes or less). */
CRPM_API void *crpm_aligned_alloc(size_t alignment, size_t size);
/* NULL is ignored; a pointer that is not a live block of the heap is not
 * freed (crpm_last_error says so). */
CRPM_API void crpm_free(void *p);
/* Bytes usable at p (at least what was asked for); 0 if p is not a block. */
CRPM_API size_t crpm_malloc_usable_size(const void *p);
/* Roots 0 .. CRPM_ROOTS-1 hold NULL or a pointer into the heap; saved and
 * restored with it.  Errors: CRPM_ERR_RANGE (idx), CRPM_ERR_INVAL (p not in
 * the heap), CRPM_ERR_STATE (no heap), CRPM_ERR_NOMEM. */
CRPM_API int crpm_set_root(int idx, void *p);
/* NULL when unset, out of range, or without a heap. */
CRPM_API void *crpm_get_root(int idx);
/* Usable bytes of the live blocks (0 without a heap). */
CRPM_API size_t crpm_heap_used(void);

/* ---- threads (docs/threads.md) ----------------------------------------------
 * Thread safety.  The library keeps one state per process (rank).
 * - Collective calls (crpm_init*, crpm_recover, crpm_recover_var,
 *   crpm_checkpoint, crpm_snapshot, crpm_should_exit, crpm_wait,
 *   crpm_finalize) are
 *   made by one thread of the rank at a time, while the others compute or
 *   wait (OpenMP `master` or `single` followed by a barrier).  A second
 *   thread calling any function of the library meanwhile gets
 *   CRPM_ERR_STATE (its call does nothing; the first one is unharmed).
 * - Local calls (crpm_protect, crpm_protect_device, crpm_test, crpm_set_name,
 *   crpm_status, crpm_stored_size,
 *   crpm_get_stats, crpm_define_global, crpm_add_subset,
 *   crpm_protect_replicated, crpm_global_dims) may be made from several
 *   threads at once (they take turns): e.g. each thread protects its own
 *   ids.  They fail with CRPM_ERR_STATE while another thread is in a
 *   collective call.  Arrays must not be written while a checkpoint reads
 *   them (or read while crpm_recover writes them): a checkpoint saves what
 *   the arrays hold during the call.
 * - crpm_strerror and crpm_last_error are per thread; crpm_version may be
 *   called at any time; the heap's calls are described above.
 * - MPI thread level: the thread that makes collective calls calls MPI, so
 *   it needs MPI_THREAD_FUNNELED when it is the thread that initialised MPI
 *   (OpenMP `master`), MPI_THREAD_SERIALIZED otherwise (`single`, or a team
 *   call led by another thread, below).  The library's own workers
 *   ([advanced] threads) never call MPI; its background thread (async = 1)
 *   does, on a communicator of its own, and needs MPI_THREAD_MULTIPLE.
 *
 * Team calls: restart points that every thread of a team reaches.  Each
 * thread of the team calls crpm_checkpoint_team (or crpm_recover_team) at
 * the same point; one of them (the leader: the first to arrive with
 * MPI_THREAD_SERIALIZED or MULTIPLE, else the thread that called
 * crpm_init, which must then be in the team) takes the checkpoint, the
 * others serve as its workers (compare, copy, checksums; for recovery the
 * first touch of the arrays, so pages land near the threads), and all
 * return together with the same result.  The team is
 * the enclosing OpenMP parallel region (found at run time: the library
 * does not link an OpenMP runtime), or, for pthreads or anything else, the
 * n threads named by crpm_team_begin(n), called before the team's calls
 * by any one thread.  Outside a parallel region and without
 * crpm_team_begin a team is one thread (the plain call).  A team call is
 * collective: every rank makes the same team call (teams of any size).
 * The leader waits for all members and checks, before any other
 * collective, that they make the same call with the same arguments and
 * team size, and that the ranks do: otherwise every member of every rank
 * gets CRPM_ERR_STATE, nothing is done, and later calls work.  A member
 * that never arrives makes the others wait.
 * One team calls at a time per process (not two nested regions at once). */
CRPM_API int crpm_checkpoint_team(int id, int level);
CRPM_API int crpm_recover_team(void);
/* The team of the following team calls has nthreads threads (1 .. 1024);
 * crpm_team_end returns to OpenMP's team (or none).  Errors: CRPM_ERR_INVAL,
 * CRPM_ERR_STATE (a team call is in progress). */
CRPM_API int crpm_team_begin(int nthreads);
CRPM_API int crpm_team_end(void);

#ifdef __cplusplus
}
#endif
#endif /* CRPM_H */

/* Asynchronous levels (async = 1, docs/async.md): one progress thread per
 * rank runs the followers of a checkpoint at level 2, 3 or 4 after the
 * primary (level 1) committed on every rank, so crpm_checkpoint returns
 * then.  The thread talks over a communicator of its own (a duplicate of the
 * library's), which needs MPI_THREAD_MULTIPLE; with less, the levels stay
 * synchronous and rank 0 says so once.
 *
 * One drain is in flight at a time and it reads only the primary's committed
 * epoch from NVM (level 4 and the level-2 full-copy baseline get the arrays
 * read back from the container, CRC-checked, never the application's DRAM).
 * Nothing else touches the container or the followers while it runs: every
 * entry point that would (the next checkpoint at any level, protect, recover,
 * finalize) first waits for it (the backpressure: the wait is timed and
 * printed at verbosity 2).  The drain ends with an agreement on its own
 * communicator, so its result is the same on every rank; the next collective
 * call (crpm_checkpoint, crpm_wait, crpm_finalize) returns a failure. */
#ifndef CRPM_MPI_BACKGROUND_H
#define CRPM_MPI_BACKGROUND_H
#include "context.h"

/* Collective, at the end of crpm_init: with cfg.async, the thread and its
 * communicator (the followers' env.comm from now on).  A job whose MPI
 * lacks MPI_THREAD_MULTIPLE keeps the levels synchronous (a warning on rank
 * 0 at verbosity >= 1); ctx->bg stays NULL then. */
int crpm_bg_start(crpm_ctx *ctx);
/* Whether a checkpoint at `level` goes to the background (the thread runs
 * and the level has followers open). */
int crpm_bg_takes(const crpm_ctx *ctx, int level);
/* Hands the followers of `level` over for checkpoint `id` (the primary
 * committed it on every rank, the drain before it collected).  Local. */
void crpm_bg_post(crpm_ctx *ctx, int64_t id, int level);
/* Waits until no drain is in flight; returns its result (the same on every
 * rank), consumed: a later call returns success.  *waited: seconds spent
 * waiting (may be NULL).  Local, but only ever blocks on other ranks' drains
 * of the same checkpoint, which need no call of theirs. */
int crpm_bg_collect(crpm_ctx *ctx, double *waited);
/* Waits until no drain is in flight, keeping its result for the next
 * collect (the local calls that touch the arrays or the container). */
void crpm_bg_idle(crpm_ctx *ctx);
/* Local, non-blocking: *done = no drain in flight; returns the result of a
 * finished one without consuming it. */
int crpm_bg_test(crpm_ctx *ctx, int *done);
/* Collective over the library's communicator: *busy = some rank's drain
 * is still in flight (the same on every rank). */
int crpm_bg_busy(crpm_ctx *ctx, int *busy);
/* Seconds from the hand-off of the last drain at `level` that committed to
 * its end (the time a checkpoint at that level is not yet safe at it; the
 * automatic level-4 interval's cost), -1 when none did yet. */
double crpm_bg_lag(crpm_ctx *ctx, int level);
/* Waits, stops the thread, gives the followers the library's communicator
 * back and frees the thread's.  Returns the last drain's result. */
int crpm_bg_stop(crpm_ctx *ctx);

#endif

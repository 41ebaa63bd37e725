/* Asynchronous levels (async = 1, docs/async.md): one progress thread per
 * rank runs the followers of a checkpoint at level 2, 3 or 4 after the
 * primary (level 1) committed on every rank, so crpm_checkpoint returns
 * then.  The thread talks over a communicator of its own (a duplicate of the
 * library's), which needs MPI_THREAD_MULTIPLE; with less, the levels stay
 * synchronous and rank 0 says so once.
 *
 * A drain of epoch e reads only e's copies and slot in the level-1
 * container (the arrays through a view of e, format/container.h; level 2
 * the ranges e wrote; level 3 also e-1's copies, its delta's "old"), never
 * the application's DRAM.  Level 1 of e+1 writes the other copies and slot,
 * so it runs while drain(e) does, once the drain released the container
 * (the follower says so, level.h crpm_level_release: level 2 after the
 * state exchange when it sends one stage, level 3 after its exchange, level
 * 4 at once; a whole-file sync or two stages hold it to the end).  Level 1
 * of e+2 overwrites e's copies: it waits for drain(e) (the backpressure,
 * timed and printed at verbosity 2).  Ownership: the thread owns the
 * followers' write state and their env (bg.env: its communicator, the
 * drain's epoch); the events the primary's commits send the followers run
 * on the main thread and touch only the state a write takes before it
 * releases (level 2's pending logs).  Drains queue one deep (e+1 behind e).
 * Everything else that touches the container or the followers (protect with
 * a new shape, recover, the global layout, the pool growing: a remap hook)
 * waits for every drain.  A drain ends with an agreement on its own
 * communicator, so its result is the same on every rank; the next
 * checkpoint agrees on the failures any rank has seen (crpm_bg_report), and
 * crpm_wait and crpm_finalize wait and return them. */
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
 * committed it on every rank).  Local. */
void crpm_bg_post(crpm_ctx *ctx, int64_t id, int level);
/* Before a checkpoint's level 1: waits until no drain reads what it
 * overwrites (see above).  Local; *waited: seconds waited; returns the id
 * of the checkpoint whose drain it found in the way, -1 when none was. */
int64_t crpm_bg_before_l1(crpm_ctx *ctx, double *waited);
/* Collective over the library's communicator: the failure of a finished
 * drain that some rank has not reported yet becomes an error on every rank
 * (once: consumed). */
int crpm_bg_report(crpm_ctx *ctx);
/* Waits until no drain is in flight; returns their unreported failure (the
 * same on every rank), consumed.  *waited: seconds spent waiting (may be
 * NULL).  Local, but only ever blocks on other ranks' drains, which need no
 * call of theirs. */
int crpm_bg_collect(crpm_ctx *ctx, double *waited);
/* Waits until no drain is in flight, keeping the results for later (the
 * local calls that touch the arrays' shapes or the container). */
void crpm_bg_idle(crpm_ctx *ctx);
/* Local, non-blocking: *done = no drain in flight; returns an unreported
 * failure without consuming it. */
int crpm_bg_test(crpm_ctx *ctx, int *done);
/* Collective over the library's communicator: *busy = some rank's next
 * level 1 would have to wait for a drain (crpm_bg_before_l1; the same on
 * every rank): async_backpressure = skip. */
int crpm_bg_busy(crpm_ctx *ctx, int *busy);
/* Seconds from the hand-off of the last drain at `level` that committed to
 * its end (the time a checkpoint at that level is not yet safe at it; the
 * automatic level-4 interval's cost), -1 when none did yet. */
double crpm_bg_lag(crpm_ctx *ctx, int level);
/* Waits, stops the thread, gives the followers the library's communicator
 * back and frees the thread's.  Returns the last drain's result. */
int crpm_bg_stop(crpm_ctx *ctx);

#endif

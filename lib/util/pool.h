/* A small fork-join worker pool (pthreads): the engine splits a checkpoint's
 * and a recovery's data pass into tasks and runs them on it.  The caller of
 * crpm_pool_run works too, as worker 0; the others are the pool's own
 * threads, or, while a team of application threads lends itself
 * (crpm_checkpoint_team), those threads instead.
 *
 * Why our own: the library must not depend on OpenMP (the application may
 * use another runtime, or none), and Debian's task libraries (TBB, libuv's
 * pool, libdispatch) have no fork-join run that borrows the caller's own
 * threads as workers.  Threads sleep on condition variables between runs:
 * an idle pool costs no CPU.  Own threads are started by the first run that
 * needs them, with every signal blocked (the application's handlers run on
 * its own threads). */
#ifndef CRPM_UTIL_POOL_H
#define CRPM_UTIL_POOL_H
#include <stdint.h>

typedef struct crpm_pool crpm_pool;

/* Task `task` of a run, on worker `worker` (0 .. crpm_pool_width - 1: one
 * worker never runs two tasks at once, so per-worker scratch indexed by it
 * needs no lock). */
typedef void (*crpm_pool_fn)(void *arg, uint64_t task, int worker);

/* A pool of `threads` workers in all, the caller counted (threads - 1 own
 * threads).  threads <= 1: no threads, runs are serial.  CRPM_ERR_NOMEM. */
int crpm_pool_create(int threads, crpm_pool **out);
void crpm_pool_free(crpm_pool *p);
/* Workers the next run has: 1 + own threads, or 1 + guests while a team
 * lends its threads.  1 for a NULL pool. */
int crpm_pool_width(const crpm_pool *p);
/* Runs fn for tasks 0 .. ntasks-1, in any order and on any worker, and
 * returns when all have returned.  A NULL pool runs them in order on the
 * caller.  One run at a time per pool; fn must not start another. */
void crpm_pool_run(crpm_pool *p, uint64_t ntasks, crpm_pool_fn fn, void *arg);

/* Teams.  crpm_pool_guests(p, n): from now on n guest threads serve the
 * runs instead of the pool's own (call it before the runs that should use
 * them; they join each run as they arrive, so a late one only misses
 * tasks).  Each guest calls crpm_pool_serve, which runs tasks of the runs
 * until crpm_pool_dismiss; dismiss returns after every guest has left
 * serve, and the pool's own threads serve again. */
void crpm_pool_guests(crpm_pool *p, int n);
void crpm_pool_serve(crpm_pool *p);
void crpm_pool_dismiss(crpm_pool *p);

#endif

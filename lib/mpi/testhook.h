/* Internal test and benchmark hooks, compiled into builds configured with
 * -DCRPM_TEST_HOOKS=ON only (the test suites; off in a shipped library, where
 * these calls are empty and the environment below is never read):
 *  - CRPM_TEST_KILL=<rank>:<point>:<n>[,...] makes that rank SIGKILL itself at
 *    a point (before_data, after_data, after_commit; level 2: l2_sent = the
 *    owner's data posted to its partner, l2_applied = a partner copy's data
 *    written but not committed, l2_committed = the copies committed, before
 *    the job agreed; level 3: l3_sent, l3_applied, l3_committed; reshape_removing: the files of an older
 *    rank count about to be removed; reshape_rebuilt: its n-th container rebuilt from level 3 for a
 *    restart on another rank count, written under its temporary name; async = 1 (background.c):
 *    drain_start = the background thread took the checkpoint's levels, nothing written yet,
 *    drain_committed = every rank committed them, the application not yet told; the level points fire
 *    in the background thread then) of its n-th checkpoint, so tests can leave ranks and copies on
 *    different epochs;
 *  - CRPM_TEST_L3_VERIFY=1 checks the parity against a full re-encode after
 *    every level-3 checkpoint;
 *  - CRPM_BENCH_BASELINE=<name>[,...] selects the benchmarks' baselines:
 *    l2_full_copy (level 2 sends whole containers, as FTI, SCR and VeloC do),
 *    l3_full_encode (level 3 re-encodes everything every time).  Rank 0 says
 *    so at init, so a benchmark can tell that the baseline is in effect. */
#ifndef CRPM_MPI_TESTHOOK_H
#define CRPM_MPI_TESTHOOK_H
#include "context.h"

#ifdef CRPM_TEST_HOOKS
/* Reads CRPM_TEST_KILL and CRPM_BENCH_BASELINE (CRPM_ERR_CONFIG if malformed). */
int crpm_testhook_parse(crpm_ctx *ctx);
/* Installs the kill hook on a container when ctx asks for kills. */
void crpm_testhook_attach(crpm_ctx *ctx, crpm_container *c);
/* A follower level's kill points (l<level>_sent, _applied, _committed: its
 * hook's points 1, 2, 3): *hook and *arg for its options when ctx asks for
 * kills. */
void crpm_testhook_level(crpm_ctx *ctx, int level, void (**hook)(void *arg, int point), void **arg);
/* Whether CRPM_BENCH_BASELINE names this baseline. */
int crpm_testhook_baseline(const char *name);
/* Whether the environment variable is set and not "0" (CRPM_TEST_L3_VERIFY). */
int crpm_testhook_env(const char *var);
/* CRPM_TEST_SKIP_DATA_CHECK=1: restart does not check the containers' data
 * before deciding, so that tests reach the checks made where data is used
 * (a level-3 survivor's units). */
int crpm_testhook_skip_data_check(void);
/* CRPM_TEST_DRAIN_DELAY_MS=<ms>: the background thread sleeps that long
 * before each drain, so tests find a drain in flight (background.c). */
int crpm_testhook_drain_delay_ms(void);
/* CRPM_TEST_PAUSE=<point>:<dir> holds every rank that reaches `point`
 * (init_lock: the job directory made, its lock not yet taken;
 * finalize_marker: the finished-run marker written, nothing removed;
 * finalize_unlock: every file removed, the locks still held;
 * finalize_rmdir: the locks released, the directory not yet removed): the
 * rank creates <dir>/<point>.<rank> and waits until <dir>/<point>.go exists
 * (at most 120 s), so a test can start another launch inside that window. */
void crpm_testhook_pause(const char *point, int rank);
/* Kill points outside the levels: reshape_removing (the files of an older
 * rank count about to be removed after this job's checkpoint committed),
 * reshape_rebuilt (a container rebuilt from level 3, not yet renamed), drain_start and
 * drain_committed (background.c). */
void crpm_testhook_point(crpm_ctx *ctx, const char *point);
#else
static inline int crpm_testhook_parse(crpm_ctx *ctx) { (void)ctx; return 0; }
static inline void crpm_testhook_attach(crpm_ctx *ctx, crpm_container *c) { (void)ctx; (void)c; }
static inline void crpm_testhook_level(crpm_ctx *ctx, int level, void (**hook)(void *arg, int point), void **arg)
{
    (void)ctx;
    (void)level;
    (void)hook;
    (void)arg;
}
/* macros, so that no hook's name is left in a shipped library */
#define crpm_testhook_baseline(name) 0
#define crpm_testhook_env(var) 0
static inline void crpm_testhook_pause(const char *point, int rank) { (void)point; (void)rank; }
static inline int crpm_testhook_skip_data_check(void) { return 0; }
static inline int crpm_testhook_drain_delay_ms(void) { return 0; }
static inline void crpm_testhook_point(crpm_ctx *ctx, const char *point) { (void)ctx; (void)point; }
#endif

#endif

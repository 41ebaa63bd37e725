/* The run log ([advanced] log_file, docs/tools.md): one JSON object per line
 * per event of the run -- checkpoints with their phases and bytes per level,
 * background drains, the restart (which level brought each rank back),
 * recovery, the automatic interval, a stop, failures, the end -- written by
 * rank 0 from values gathered over the ranks (min, median, max, sum).  Lines
 * are appended whole with one write() to a file opened O_APPEND, so a crash
 * leaves at most a torn last line, which crpm-report ignores.
 *
 * Every call is cheap when the log is off (ctx->runlog NULL).  The calls
 * named collective are made by every rank of the communicator they use, with
 * the agreed result of the step they follow; the others write from rank 0's
 * agreed values alone. */
#ifndef CRPM_MPI_RUNLOG_H
#define CRPM_MPI_RUNLOG_H
#include <stdint.h>
#include <mpi.h>

#include "context.h"

/* Parts of one checkpoint whose time and bytes are logged: level 1's data
 * pass and commit (the primary), the commit agreement, then each follower
 * level's write (CRPM_RL_LEVEL + 2, 3, 4: the index is the level). */
enum { CRPM_RL_DATA = 0, CRPM_RL_AGREE = 1, CRPM_RL_NPARTS = 5 };

/* Init, after the configuration and the job directory (collective through
 * init's agreement: the returned error is rank 0's, which cannot open the
 * file).  t_begin: crpm_now() when init began. */
int crpm_runlog_open(crpm_ctx *ctx, double t_begin);
void crpm_runlog_close(crpm_ctx *ctx);

/* A part of the checkpoint in progress: seconds, and the bytes it wrote and
 * sent (parts: CRPM_RL_DATA, CRPM_RL_AGREE, or a follower's level). */
void crpm_runlog_part(crpm_ctx *ctx, int part, double secs, uint64_t written, uint64_t sent);

/* The start of a checkpoint call: the previous checkpoint's line, whose
 * values were gathered without blocking (MPI_Igather) since, is written now
 * (so a crash during the computing between two checkpoints loses at most
 * that one line; any other line of rank 0 writes it first too). */
void crpm_runlog_begin(crpm_ctx *ctx);
/* Collective: the checkpoint's line (rc: the call's agreed result, after
 * the commit), its parts, the call's seconds and the wait for an earlier
 * drain.  Before the commit a failure is only crpm_runlog_failure. */
void crpm_runlog_checkpoint(crpm_ctx *ctx, int id, int level, int rc, const crpm_stats_t *st, double secs,
                            double waited);
/* Collective on the background thread's communicator: a drain's line. */
void crpm_runlog_drain(crpm_ctx *ctx, MPI_Comm comm, int64_t id, int level, int rc, const crpm_stats_t *st,
                       double run_s, double lag_s);
/* Collective, at the end of crpm_restart: the restart's line, or (rc != 0
 * on any rank) a failure. */
void crpm_runlog_restart(crpm_ctx *ctx, int rc);
/* Collective, after crpm_recover read the checkpoint. */
void crpm_runlog_recover(crpm_ctx *ctx, double secs, double bytes);
/* Rank 0: an automatic interval's inputs and result (level 1 or 4). */
void crpm_runlog_interval(crpm_ctx *ctx, int level, double cost, const crpm_interval *iv);
/* Rank 0: the job stops (reason bits and text; seconds left and the margin,
 * < 0 when no end time is known). */
void crpm_runlog_stop(crpm_ctx *ctx, int reason, double left, double margin);
/* Rank 0: an agreed failure (the message is crpm_last_error()). */
void crpm_runlog_failure(crpm_ctx *ctx, const char *where, int id, int level, int rc);
/* Collective, at finalize: the run's totals. */
void crpm_runlog_end(crpm_ctx *ctx);

#endif

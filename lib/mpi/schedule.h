/* When crpm_snapshot checkpoints, and at which level: fixed intervals in
 * iterations or seconds, or automatic ones (Young/Daly, interval.h) from the
 * measured cost of recent checkpoints.  Decisions are collective, so every
 * rank takes the same one whatever its clock. */
#ifndef CRPM_MPI_SCHEDULE_H
#define CRPM_MPI_SCHEDULE_H
#include "context.h"

/* Starts the clocks and the automatic intervals (end of init). */
void crpm_schedule_start(crpm_ctx *ctx);
/* Collective, once per crpm_snapshot: *level = 0 (not due) or the CRPM_L* to take. */
int crpm_schedule_due(crpm_ctx *ctx, int *level);
/* Collective, after a snapshot's checkpoint at `level`: updates automatic intervals. */
int crpm_schedule_taken(crpm_ctx *ctx, int level);
/* Three significant digits in a unit that fits: 12.3 us, 4.56 ms, 1.23 s. */
void crpm_fmt_secs(char *buf, size_t n, double s);

#endif

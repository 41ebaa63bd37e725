/* Stopping before the scheduler ends the job (crpm_should_exit, and
 * crpm_snapshot's CRPM_SNAP_EXIT).  Three reasons: the end of the allocation
 * is near (end_time, CRPM_END_TIME or the scheduler's SLURM_JOB_END_TIME,
 * judged against the measured cost of the final checkpoint, so the job stops
 * just in time rather than a fixed margin early), a signal (exit_signal,
 * whose handler only sets a flag), or a halt request (a file HALT in the job
 * directory, see crpm-halt).  The decision is collective: every rank stops at
 * the same call, whichever rank saw the reason. */
#ifndef CRPM_MPI_STOP_H
#define CRPM_MPI_STOP_H
#include <stddef.h>

/* Reasons, as bits of crpm_stop.reason. */
enum { CRPM_STOP_END_TIME = 1, CRPM_STOP_SIGNAL = 2, CRPM_STOP_HALT = 4 };

/* The halt request a user (or crpm-halt) leaves in the job directory. */
#define CRPM_HALT_FILE "HALT"
/* Left by the finalize of a run that stopped early (the launch loop reads
 * it); holds the reason. */
#define CRPM_STOPPED_FILE ".crpm-stopped"

/* Recent checkpoints per level whose cost is kept. */
#define CRPM_STOP_COSTS 4

typedef struct crpm_stop {
    double end[3];                    /* this rank's end times (Unix seconds; 0: not given) from end_time,
                                         CRPM_END_TIME and SLURM_JOB_END_TIME */
    double end_time;                  /* agreed: the earliest end of any rank and source; 0: none */
    int end_src;                      /* which source gave it (index of end[]) */
    double cost[5][CRPM_STOP_COSTS];  /* this rank's seconds of recent checkpoints, by level */
    unsigned ncost[5];
    double last_poll;                 /* monotonic time of the previous check; 0: none yet */
    double step_s;                    /* agreed seconds between two calls; 0: not measured */
    double gap[4];                    /* agreed seconds between recent checks */
    unsigned ngap;
    double first_left;                /* seconds left at the first check that knew the end; 0: none yet */
    long calls, every;                /* calls since the last check; check every `every` calls */
    int reason;                       /* agreed CRPM_STOP_* bits; 0: keep going */
    double margin_logged;             /* margin last printed at verbosity 2 */
    int handler;                      /* 1: exit_signal's handler is installed */
} crpm_stop;

struct crpm_ctx;

/* The latest end time accepted: 9999-12-31T23:59:59Z. */
#define CRPM_STOP_TIME_MAX 253402300799.0
/* Unix seconds ("1718112600", "1718112600.5") or ISO 8601
 * ("2024-06-11T14:30:00Z", "...+02:00", "2024-06-11 14:30" in local time),
 * after 1970-01-01T00:00:00Z and at most CRPM_STOP_TIME_MAX.  0, or -1 when
 * s is none of these. */
int crpm_stop_parse_time(const char *s, double *out);
/* A catchable signal by name ("USR1", "SIGUSR1") or number: 0 and *signo, or -1. */
int crpm_stop_parse_signal(const char *s, int *signo);
/* What a value crpm_stop_parse_signal refused should have been (for
 * "expected ..." in messages): says why for SIGKILL and SIGSTOP, by name or
 * number alike. */
const char *crpm_stop_signal_expected(const char *s);
/* Its name without "SIG" ("USR1"), or "?". */
const char *crpm_stop_signal_name(int signo);

/* End of init: the end time (configuration or CRPM_END_TIME, and the
 * scheduler's), exit_signal's handler, a stale marker of an earlier run. */
int crpm_stop_start(struct crpm_ctx *ctx);
/* Finalize (or a failed init): restores the replaced signal handler. */
void crpm_stop_end(struct crpm_ctx *ctx);
/* After each checkpoint: its cost on this rank. */
void crpm_stop_record(struct crpm_ctx *ctx, int level, double seconds);
/* The level of the final checkpoint: the highest configured (level 4 when
 * glbl_dir is set, else level 3 or 2 when snapshots take them, else 1). */
int crpm_stop_level(const struct crpm_ctx *ctx);
/* Collective.  *stop = 1 when the job must stop (agreed, and sticky).  The
 * check itself runs on every call with `every_call`, else about every
 * 0.1 s of calls (counted in calls, so all ranks check at the same one).
 * *measure (may be NULL) = 1 when an end time is known, no checkpoint at the
 * final level was measured yet and half the time from the first check to
 * the end has passed: the caller takes one now, to learn its cost. */
int crpm_stop_poll(struct crpm_ctx *ctx, int every_call, int *stop, int *measure);
/* Collective, at finalize of a run that stopped: rank 0 writes
 * CRPM_STOPPED_FILE with the reason; the checkpoints stay. */
int crpm_stop_mark(struct crpm_ctx *ctx);
/* The reason in words ("signal USR1", "halt requested", ...). */
void crpm_stop_reason_text(const struct crpm_ctx *ctx, char *buf, size_t n);

#endif

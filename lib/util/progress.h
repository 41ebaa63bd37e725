/* Progress of long work (a restart's level-2 restore, level-3 rebuild,
 * restart on another rank count): bytes done of a total, the rate and the
 * time left, printed by rank 0 at verbosity >= 2 every few seconds once the
 * work took that long, and handed to the application's callback
 * (crpm_set_progress) on every rank.  No MPI: the callers say their rank.
 *
 * One phase at a time per thread: crpm_progress_begin makes it the thread's
 * current phase, so the loops below it (a transport's per-range loop) add
 * bytes with crpm_progress_tick without knowing who asked; with no current
 * phase a tick does nothing.  Finished phases are also counted per kind
 * (crpm_progress_take), for the restart's line of the run log. */
#ifndef CRPM_UTIL_PROGRESS_H
#define CRPM_UTIL_PROGRESS_H
#include <stdint.h>

/* The kinds of work whose totals the run log reports. */
enum { CRPM_PG_L2, CRPM_PG_L3, CRPM_PG_RESHAPE, CRPM_PG_KINDS };

typedef struct crpm_progress {
    const char *what;    /* "level-3 rebuild" (a literal) */
    int kind, rank;
    uint64_t total, done;
    double t0, next;     /* start; when the next report is due */
    int printed;         /* a line went out: the end prints one too */
    struct crpm_progress *outer;
} crpm_progress;

/* The application's callback (every rank): what, bytes done, total, bytes
 * per second, seconds left (-1: unknown); done == total at the end. */
typedef void (*crpm_progress_cb)(const char *what, uint64_t done, uint64_t total, double rate, double left,
                                 void *user);

/* Process-wide: print at verbosity >= 2; the callback and its period
 * (seconds between reports; 0: at every tick; < 0: the default, 3 s). */
void crpm_progress_setup(int verbosity);
void crpm_progress_set_cb(crpm_progress_cb cb, void *user, double every_s);

/* Starts phase p on this thread (total may grow with crpm_progress_total). */
void crpm_progress_begin(crpm_progress *p, int kind, const char *what, uint64_t total, int rank);
void crpm_progress_total(uint64_t more);
/* Adds bytes done to this thread's current phase, if any; reports when due. */
void crpm_progress_tick(uint64_t bytes);
/* Ends p (the thread's current phase): a last report if one went out, its
 * bytes and seconds counted for its kind. */
void crpm_progress_end(crpm_progress *p);

/* The finished phases' bytes and seconds per kind since the last call,
 * counted from zero again. */
void crpm_progress_take(double bytes[CRPM_PG_KINDS], double secs[CRPM_PG_KINDS]);

#endif

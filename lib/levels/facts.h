/* The restart's facts: one row of int64 per rank about its own container,
 * gathered from every rank at init (lib/mpi/restart.c) and judged by the pure
 * decision (lib/mpi/decide.c).  A follower level reports facts of its own
 * (ops->nfacts columns per rank, its facts op) and answers the decision's
 * questions through its plan op (level.h); no level has columns here. */
#ifndef CRPM_LEVELS_FACTS_H
#define CRPM_LEVELS_FACTS_H
#include <stdint.h>
#include "crpm_types.h"

/* One row of facts per rank. */
enum crpm_fact {
    CRPM_F_EXISTS,   /* its container file exists */
    CRPM_F_RC,       /* 0, or the error opening it gave */
    CRPM_F_NRANKS,   /* 1: it was written by a run with another rank count */
    CRPM_F_EPOCH,    /* committed epoch (when opened) */
    CRPM_F_PREV,     /* 1: epoch-1 is still recoverable (and its data intact) */
    CRPM_F_EXTRA,    /* node leaders: highest container rank >= nranks in the job directory, else -1 */
    CRPM_F_FULL0,    /* method = full: newest and second newest checkpoint ids, -1 = none */
    CRPM_F_FULL1,
    CRPM_F_RUN0,     /* run identity of its container (two words; when opened) */
    CRPM_F_RUN1,
    /* data checks (restart.c, before anything is decided) */
    CRPM_F_BAD,      /* its container opened but the committed epoch's data fails its CRCs
                        (then RC = CRPM_ERR_CORRUPT, EPOCH and PREV still describe it) */
    CRPM_F_PREV_BAD, /* ... epoch-1 was recoverable but its data fails (PREV is then 0) */
    CRPM_F_UID,      /* checkpoint id of the committed epoch (when opened) */
    CRPM_F_LEVELS,   /* the levels its run wrote checkpoints at (crpm_container_levels; when opened) */
    CRPM_F_N
};

/* Open errors that mean damage or loss (another level may take over), as
 * against a configuration that does not match the containers.  A file at a
 * container's path that is not a container at all (its magic overwritten)
 * is damage too: nothing else writes there. */
static inline int crpm_fact_damage(int64_t rc)
{
    return rc == CRPM_ERR_CORRUPT || rc == CRPM_ERR_TRUNCATED || rc == CRPM_ERR_IO || rc == CRPM_ERR_FORMAT;
}

/* The first rank whose container opened with a committed checkpoint: its
 * run identity is the one the usable containers hold (NULL: none). */
static inline const int64_t *crpm_fact_reference(const int64_t *rows, int nranks)
{
    for (int r = 0; r < nranks; r++) {
        const int64_t *x = rows + (size_t)r * CRPM_F_N;
        if (x[CRPM_F_EXISTS] && x[CRPM_F_RC] == 0 && x[CRPM_F_EPOCH] > 0)
            return x;
    }
    return NULL;
}

/* The run identity of the checkpoints being restored: that of the first
 * container that opened with a committed checkpoint, its data intact or
 * not, else of an empty one (a run started anew, e.g. after a restart from
 * level 4, whose partner copies and parity of the run before must not
 * serve); run: 2 words; 0 when no container opened. */
static inline int crpm_fact_run(const int64_t *rows, int nranks, int64_t run[2])
{
    const int64_t *x = crpm_fact_reference(rows, nranks);
    for (int r = 0; !x && r < nranks; r++) {
        const int64_t *y = rows + (size_t)r * CRPM_F_N;
        if (y[CRPM_F_EXISTS] && y[CRPM_F_BAD] && y[CRPM_F_EPOCH] > 0)
            x = y;
    }
    for (int r = 0; !x && r < nranks; r++) {
        const int64_t *y = rows + (size_t)r * CRPM_F_N;
        if (y[CRPM_F_EXISTS] && y[CRPM_F_RC] == 0 && !y[CRPM_F_NRANKS])
            x = y;
    }
    if (x) {
        run[0] = x[CRPM_F_RUN0];
        run[1] = x[CRPM_F_RUN1];
    }
    return x != NULL;
}

/* Whether a container (a rank's own, or a copy of it: the facts of a
 * container that opened and verified) committed at `epoch` or at epoch+1
 * with epoch still recoverable brings `epoch` back, for the run `run` (two
 * words, NULL: any).  committed_ok: its committed epoch's data is intact. */
static inline int crpm_fact_copy_holds(int committed_ok, int64_t committed, int prev_ok, int64_t run0, int64_t run1,
                                       const int64_t *run, int64_t epoch)
{
    if (epoch < 1 || (run && (run0 != run[0] || run1 != run[1])))
        return 0;
    return (committed_ok && committed == epoch) || (prev_ok && committed == epoch + 1);
}

/* The rank's own container brings `epoch` of run `run` back. */
static inline int crpm_fact_holds(const int64_t *x, const int64_t *run, int64_t epoch)
{
    if (!x[CRPM_F_EXISTS] || x[CRPM_F_NRANKS] || !(x[CRPM_F_RC] == 0 || x[CRPM_F_BAD]))
        return 0;
    return crpm_fact_copy_holds(x[CRPM_F_RC] == 0, x[CRPM_F_EPOCH], x[CRPM_F_PREV] != 0, x[CRPM_F_RUN0],
                                x[CRPM_F_RUN1], run, epoch);
}

#endif

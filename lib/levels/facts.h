/* The restart's facts: one row of int64 per rank, gathered from every rank
 * at init (lib/mpi/restart.c), patched by the levels that can bring a rank's
 * container back (each level's plan op) and judged by the pure decision
 * (lib/mpi/decide.c).  Levels 2 and 3 fill their columns here; a level with
 * facts of its own declares them in its ops (nfacts) instead. */
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
    CRPM_F_PREV,     /* 1: epoch-1 is still recoverable */
    CRPM_F_EXTRA,    /* node leaders: highest container rank >= nranks in the job directory, else -1 */
    CRPM_F_FULL0,    /* method = full: newest and second newest checkpoint ids, -1 = none */
    CRPM_F_FULL1,
    CRPM_F_RUN0,     /* run identity of its container (two words; when opened) */
    CRPM_F_RUN1,
    CRPM_F_REP_FILE, /* level 2: its partner copy's file exists */
    CRPM_F_REP_OK,   /* ... and opened */
    CRPM_F_REP_EPOCH,
    CRPM_F_REP_PREV,
    CRPM_F_REP_RUN0,
    CRPM_F_REP_RUN1,
    CRPM_F_PAR_OK,   /* level 3: its parity container opened */
    CRPM_F_PAR_EPOCH,/* ... job epoch its committed parity describes */
    CRPM_F_PAR_PREV, /* ... and its previous one (-1 = none) */
    CRPM_F_PAR_RUN0,
    CRPM_F_PAR_RUN1,
    /* data checks (restart.c, before anything is decided) */
    CRPM_F_BAD,      /* its container opened but the committed epoch's data fails its CRCs
                        (then RC = CRPM_ERR_CORRUPT, EPOCH and PREV still describe it; a patch
                        that replaces the row keeps BAD, for the error text) */
    CRPM_F_PREV_BAD, /* ... epoch-1 was recoverable but its data fails (PREV is then 0) */
    CRPM_F_UID,      /* checkpoint id of the committed epoch (when opened) */
    CRPM_F_REP_BAD,  /* level 2: its partner copy fails its checksums, metadata or data (REP_OK 0) */
    CRPM_F_PAR_BAD,  /* level 3: its parity container fails its checksums (PAR_OK -1) */
    CRPM_F_N
};

/* Open errors that mean damage or loss (another level may take over), as
 * against a configuration that does not match the containers. */
static inline int crpm_fact_damage(int64_t rc)
{
    return rc == CRPM_ERR_CORRUPT || rc == CRPM_ERR_TRUNCATED || rc == CRPM_ERR_IO;
}

/* The rank's container is missing or damaged (not mismatched): a level that
 * holds its data may bring it back. */
static inline int crpm_fact_lost(const int64_t *x)
{
    return !x[CRPM_F_EXISTS] || (x[CRPM_F_RC] < 0 && crpm_fact_damage(x[CRPM_F_RC]));
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

/* The levels' patches (their plan ops call them; pure, so the decision's
 * tests call them too).
 *
 * Level 2 (l2_restart.c), before crpm_decide_restart: a rank whose container
 * is missing or damaged (not mismatched) and whose partner copy opened, from
 * the same run as the usable containers, takes the copy's facts in its row
 * (rows are changed) and restore[rank] = 1.  Returns how many ranks that is. */
int crpm_decide_l2_patch(int64_t *rows, int nranks, int64_t *restore);

/* Level 3 (l3_restart.c), after the level-2 patch: in each group (groups[r],
 * members[r]: group and member index of rank r; K members, M parity units)
 * that lost at most M containers (missing or damaged, not mismatched), the
 * lost ranks take the facts of a container at the epoch E the survivors and
 * enough parity of every affected codeword describe (the survivors' lowest
 * epoch, else the one before), one E for the whole job; rebuild[r] = 1 for
 * them.  Returns how many ranks that is. */
int crpm_decide_l3_patch(int64_t *rows, int nranks, const int *groups, const int *members, int K, int M,
                         int64_t *rebuild);

#endif

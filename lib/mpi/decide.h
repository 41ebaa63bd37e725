/* The restart decision: a pure function from the facts every rank gathered
 * at init (facts.h) and the levels' answers to a verdict that every rank
 * computes identically.  No MPI, no files: restart.c gathers the facts and
 * applies the verdict; the levels answer through the sources below (the
 * coordinator makes one of each follower's plan op), never by name.
 *
 * The rule: every epoch some rank's container or some level holds is a
 * candidate, newest first; an epoch serves when every rank can bring it
 * back, from its own container (committed, or the previous epoch while
 * that is recoverable) or else from the first level, in table order, that
 * can (a level asked later may count on the ranks an earlier one brings
 * back).  The newest epoch that serves is taken.  A level with a checkpoint
 * of its own (lookup: level 4) is asked when the newest epoch that serves
 * is older than the newest any rank committed, or when none serves; its
 * checkpoint is taken when it is newer. */
#ifndef CRPM_MPI_DECIDE_H
#define CRPM_MPI_DECIDE_H
#include <stddef.h>
#include <stdint.h>
#include "facts.h" /* the rows of facts */

/* A level that can bring ranks' containers back (a follower's plan). */
typedef struct crpm_decide_src {
    int level;             /* its checkpoint level, for messages */
    const char *holding;   /* what it holds of a rank ("level-2 partner copy"), for messages */
    void *arg;
    /* the epochs it holds data of some rank at (at most max); returns how many */
    int (*offers)(void *arg, int64_t *epochs, int max);
    /* of the ranks flagged in need, those it brings back at epoch for run
     * (2 words, NULL: any): flags in repair; returns how many */
    int (*can)(void *arg, int64_t epoch, const int64_t *need, const int64_t *run, int64_t *repair);
    /* what it holds of rank r (need: the ranks lacking the epoch in question,
     * or NULL); returns 1 when that is damaged */
    int (*describe)(void *arg, int r, const int64_t *need, char *buf, size_t n);
    int64_t *repair;       /* out: nranks flags, the ranks it brings back at the verdict's epoch */
    int nrepair;           /* out */
} crpm_decide_src;

typedef struct crpm_restart_facts {
    int nranks;
    const int64_t *rank;   /* nranks rows of CRPM_F_N */
    int nsrc;              /* the levels that bring containers back, in table order */
    crpm_decide_src *src;
    int method;            /* CRPM_METHOD_* */
    int l1_rejected;       /* applying a level-1 verdict failed (ranks hold different checkpoints) */
    int unrecoverable_fresh; /* on_unrecoverable = fresh: start anew rather than fail */
    int asked;             /* the levels with checkpoints of their own were looked at ... */
    int found;             /* ... and one holds a valid checkpoint */
    int found_damaged;     /* ... or only files of the job of which none is valid */
    int64_t found_epoch, found_id; /* found: the job epoch and checkpoint id of that checkpoint */
    int found_has_run;     /* found: it records its run ... */
    int64_t found_run[2];  /* ... this one */
} crpm_restart_facts;

enum crpm_verdict_kind {
    CRPM_V_FRESH,   /* no checkpoint: start fresh (empty containers where needed;
                       with set_aside, containers that hold data are kept under another name) */
    CRPM_V_L1,      /* resume the containers at `epoch`, the sources bringing back the ranks in
                       their repair flags first; ranks at epoch+1 roll back */
    CRPM_V_ASK,     /* look for a level's own checkpoint (lookup), then decide again */
    CRPM_V_FOUND,   /* resume from that checkpoint (containers made anew, the old ones set aside) */
    CRPM_V_FULL,    /* method = full: resume file `full_id` */
    CRPM_V_ERROR    /* refuse, on every rank: `code`, text by crpm_verdict_error */
};

/* Why the containers alone cannot serve (for the error text). */
enum crpm_l1_state { CRPM_L1S_FRESH, CRPM_L1S_USABLE, CRPM_L1S_NRANKS, CRPM_L1S_MISSING, CRPM_L1S_OPEN,
                     CRPM_L1S_EPOCH, CRPM_L1S_FULL_ON_DIFF, CRPM_L1S_FULL_NOCOMMON, CRPM_L1S_FOUND_CORRUPT,
                     CRPM_L1S_MIXED, CRPM_L1S_CORRUPT };

typedef struct crpm_verdict {
    int kind;
    int code;              /* CRPM_V_ERROR: the CRPM_ERR_* code */
    int l1;                /* enum crpm_l1_state */
    int64_t epoch;         /* CRPM_V_L1 */
    int64_t full_id;       /* CRPM_V_FULL */
    int64_t emin, emax;    /* committed epochs over the opened containers (-1 = none) */
    int64_t top;           /* the newest epoch any rank's container committed (-1 = none) */
    int64_t want;          /* no epoch serves: the newest candidate (for the text), else -1 */
    int n_exist, n_fail, extra, bad_prev;
    int repaired;          /* ranks the sources bring back */
    int fallback;          /* CRPM_V_L1 older than an epoch some rank committed intact (not a rank ahead) */
    int damaged;           /* the containers are unusable through damage or loss, not a mismatch */
    int set_aside;         /* containers holding data are renamed, never overwritten */
} crpm_verdict;

crpm_verdict crpm_decide_restart(const crpm_restart_facts *f);

/* The ranks (at most max) whose container files an error verdict's text
 * names, identical on every rank; returns how many. */
int crpm_verdict_named(const crpm_restart_facts *f, const crpm_verdict *v, int *ranks, int max);

/* Sets the message of an error verdict for rank `me` (own_msg: its own open
 * or rollback error text, may be ""; paths: nranks entries, the container
 * files of the ranks crpm_verdict_named gave, others NULL, or NULL) and
 * returns the code. */
int crpm_verdict_error(const crpm_restart_facts *f, const crpm_verdict *v, int me, const char *own_msg,
                       const char *const *paths, const char *job_dir, const char *job_name);

#endif

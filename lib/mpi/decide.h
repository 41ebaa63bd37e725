/* The restart decision: a pure function from the facts every rank gathered
 * at init (facts.h), as the levels' plans patched them, to a verdict that
 * every rank computes identically.  No MPI, no files: restart.c gathers the
 * facts and applies the verdict. */
#ifndef CRPM_MPI_DECIDE_H
#define CRPM_MPI_DECIDE_H
#include <stdint.h>
#include "facts.h" /* the rows of facts, and the levels' patches */

typedef struct crpm_restart_facts {
    int nranks;
    const int64_t *rank;   /* nranks rows of CRPM_F_N */
    int method;            /* CRPM_METHOD_* */
    int l1_rejected;       /* applying a level-1 verdict failed (ranks hold different checkpoints) */
    int l4_known;          /* level 4 was looked at ... */
    int l4_found;          /* ... and holds a valid checkpoint */
    int l4_damaged;        /* ... or holds files of the job of which none is valid */
    int unrecoverable_fresh; /* on_unrecoverable = fresh: start anew rather than fail */
    int64_t l4_epoch, l4_id; /* l4_found: the job epoch and checkpoint id of that file */
    /* the levels' patches (facts.h) repaired some rank and the result is older than the
     * newest committed epoch (top, with its checkpoint id): a level-4 file of
     * that epoch is then preferred (crpm_decide_top) */
    int repaired;
    int64_t top_epoch, top_uid;
} crpm_restart_facts;

enum crpm_verdict_kind {
    CRPM_V_FRESH,   /* no checkpoint: start fresh (empty containers where needed;
                       with set_aside, containers that hold data are kept under another name) */
    CRPM_V_L1,      /* resume level 1 at `epoch`; ranks at epoch+1 roll back first */
    CRPM_V_ASK_L4,  /* level 1 cannot serve: look for level 4, then decide again */
    CRPM_V_L4,      /* resume level 4 (containers made anew, the old ones set aside) */
    CRPM_V_FULL,    /* method = full: resume file `full_id` */
    CRPM_V_ERROR    /* refuse, on every rank: `code`, text by crpm_verdict_error */
};

/* Why level 1 cannot serve (for the error text). */
enum crpm_l1_state { CRPM_L1S_FRESH, CRPM_L1S_USABLE, CRPM_L1S_NRANKS, CRPM_L1S_MISSING, CRPM_L1S_OPEN,
                     CRPM_L1S_EPOCH, CRPM_L1S_FULL_ON_DIFF, CRPM_L1S_FULL_NOCOMMON, CRPM_L1S_L4_CORRUPT,
                     CRPM_L1S_MIXED, CRPM_L1S_CORRUPT };

typedef struct crpm_verdict {
    int kind;
    int code;              /* CRPM_V_ERROR: the CRPM_ERR_* code */
    int l1;                /* enum crpm_l1_state */
    int64_t epoch;         /* CRPM_V_L1 */
    int64_t full_id;       /* CRPM_V_FULL */
    int64_t emin, emax;    /* committed epochs over the opened containers (-1 = none) */
    int n_exist, n_fail, extra, bad_prev;
    int damaged;           /* level 1 is unusable through damage or loss, not a mismatch */
    int set_aside;         /* containers holding data are renamed, never overwritten */
} crpm_verdict;

crpm_verdict crpm_decide_restart(const crpm_restart_facts *f);

/* Before the patches: the newest epoch a container that opened commits
 * (intact or not) and its checkpoint id; -1 when none. */
void crpm_decide_top(const int64_t *rows, int nranks, int64_t *epoch, int64_t *uid);

/* After the level-2 and level-3 patches: ranks whose committed epoch fails
 * its data check and that nothing else repaired fall back to their intact
 * previous epoch (their rows then describe it: the verdict rolls their
 * containers back), but only when every rank then agrees on one epoch
 * (level 1 usable); rows are left unchanged otherwise.  Never to epoch 0 (a
 * fresh start).  Returns how many ranks fall back. */
int crpm_decide_prev_patch(int64_t *rows, int nranks);

/* Sets the message of an error verdict for rank `me` (own_msg: its own open
 * or rollback error text, may be "") and returns the code. */
int crpm_verdict_error(const crpm_restart_facts *f, const crpm_verdict *v, int me, const char *own_msg,
                       const char *job_dir, const char *job_name);

#endif

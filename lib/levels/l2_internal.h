/* Level 2's parts (level_l2.c: the checkpoint half, l2_restart.c: the
 * restart half) share this: the state of the level.  Not for use outside
 * level 2. */
#ifndef CRPM_LEVELS_L2_INTERNAL_H
#define CRPM_LEVELS_L2_INTERNAL_H

#include <stdint.h>
#include "level.h"

#define TAG_INFO_O 7311
#define TAG_INFO_H 7312
#define TAG_STAGE 7313
#define TAG_FULL 7314

typedef struct pend_epoch {
    uint64_t epoch;
    crpm_wlog log;
} pend_epoch;

typedef struct held {
    int owner;
    char path[CRPM_PATH_MAX];
    char lock[CRPM_PATH_MAX + 8];
    int lock_fd;
    crpm_container *r;         /* NULL: missing or unusable */
    char why[256];             /* why r is NULL */
    int bad;                   /* failed its data check: not opened again until a sync rewrote it */
    int prev_bad;              /* its previous epoch failed its data check */
    int committed;             /* the last ship committed it */
    int mode;                  /* of the transfer in progress */
} held;

typedef struct l2_state {
    crpm_l2_opts o;
    crpm_container *own;
    /* the events' side (the primary's thread) */
    crpm_wlog live;            /* the own container's stores not yet in pend */
    pend_epoch pend[2];
    int npend;
    int unknown;               /* the partner copy's state is not known */
    /* the write's side: what a write sends, taken from the events' side when
     * it starts (with async = 1 the next checkpoint's events run meanwhile,
     * level.h crpm_level_release) */
    pend_epoch wpend[2];
    int nwpend, wunknown;
    uint64_t wepoch, wsize;    /* the own container's epoch and file size at the take */
    int dirty;                 /* a background write failed: the epochs it took are gone, sync next time */
    held *held;
} l2_state;

static inline l2_state *l2_of(crpm_level *lv) { return lv->state; }

static inline const crpm_backend *l2_backend(const l2_state *s)
{
    return s->o.backend ? s->o.backend : crpm_backend_for(s->o.persistence);
}

void l2_close_held(held *h);
/* Opens the copies this rank holds that are not open (missing or unusable
 * ones stay closed, with the reason; a copy found bad stays closed until a
 * sync rewrote it). */
void l2_open_copies(crpm_level *lv);

/* The restart half (l2_restart.c): the ops.  What a partner copy's holder
 * tells its owner at restart, the level's own facts per rank (L2_FILE: the
 * copy's file exists, usable or not). */
enum { CRPM_L2F_OWNER, CRPM_L2F_OK, CRPM_L2F_EPOCH, CRPM_L2F_PREV, CRPM_L2F_RUN0, CRPM_L2F_RUN1, CRPM_L2F_BAD,
       CRPM_L2F_N, L2_FILE = CRPM_L2F_N, L2_NFACTS };
int l2_facts(crpm_level *lv, const int64_t *row, int64_t *own);
int l2_offers(crpm_level *lv, const crpm_plan *p, int64_t *epochs, int max);
void l2_plan(crpm_level *lv, crpm_plan *p);
int l2_describe(crpm_level *lv, const crpm_plan *p, int r, char *buf, size_t n);
int l2_restore(crpm_level *lv, const crpm_restart_io *io);
int l2_resync(crpm_level *lv, const crpm_plan *p, int resumed, int64_t epoch);

#endif

/* Level 3's parts (level_l3.c, l3_encode.c, l3_rebuild.c, l3_restart.c and,
 * in test builds, l3_verify.c) share this: the state of the level and the
 * image of a committed epoch it codes.  Not for use outside level 3. */
#ifndef CRPM_LEVELS_L3_INTERNAL_H
#define CRPM_LEVELS_L3_INTERNAL_H

#include <stdint.h>
#include <string.h>
#include "l3_code.h"
#include "level.h"

#define TAG_L3 7400            /* + codeword (< 256) */
#define ROUND_BYTES (64ull << 20)
#define META_MAGIC "CRPML3M2"
/* The code's granule: images are cut into units of this size (at least a
 * block, at most a segment).  Each array pads only its last unit, so parity
 * stays near 1/k of the data even for many arrays smaller than a segment. */
#define UNIT_BYTES (64u << 10)
#define META_REC 24u

typedef struct img_reg {
    int32_t id, type;
    uint64_t elem, count, nsegs; /* nsegs: container segments */
    uint64_t first, nunits;      /* its image units */
    crpm_seg *segs;
    uint64_t base;               /* where its bytes start in segs' copies (packed arrays: crpm_region_segs) */
    uint64_t span;               /* packed arrays: the bytes its pack's CRC table covers (0: not packed) */
} img_reg;

/* A rank's image of one committed epoch: the meta area, then each array,
 * each starting on a unit.  Bytes are read through the container's mapping
 * (phys indices, not pointers: the mapping moves). */
typedef struct image {
    unsigned char *meta;
    uint64_t unit, meta_len, meta_units;
    img_reg *reg;
    int nreg;
    uint64_t nunits;
} image;

typedef struct l3_state {
    crpm_l3_opts o;
    int *grp;                  /* ranks of this group by member index */
    int *groups, *members;     /* every rank's group and member index (the restart's plan) */
    int g, k;                  /* member index, data units per codeword */
    crpm_l3_layout lay;
    crpm_l3_code code;
    crpm_container *own;
    uint64_t segsize, blksize, unit; /* unit: see UNIT_BYTES */
    /* data side: the image the parity was last built from */
    image base;
    int have_base;
    uint64_t base_epoch;
    image cur;                 /* the image of the checkpoint being written */
    uint64_t cur_epoch;        /* its epoch (the container may be ahead once the write released it) */
    /* holder side */
    char ppath[CRPM_PATH_MAX], plock[CRPM_PATH_MAX + 8];
    int plock_fd;
    crpm_container *pc;        /* NULL: missing or unusable (pwhy) */
    char pwhy[256];
    int pfile;                 /* its file existed at open */
    int pbad, pprev_bad;       /* it, or its previous epoch, failed the restart's data check */
    unsigned char **par;       /* M buffers of plen bytes: parity of codeword (g - h) mod K, row h */
    uint64_t plen;
    uint64_t par_epoch;        /* job epoch par and pc's committed state describe; 0 = none */
    int par_committed;         /* this write committed pc */
} l3_state;

static inline l3_state *l3_of(crpm_level *lv) { return lv->state; }

/* The codeword whose parity row h this rank holds. */
static inline int l3_held_codeword(const l3_state *s, int h) { return ((s->g - h) % s->lay.K + s->lay.K) % s->lay.K; }

static inline void l3_put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint64_t l3_get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- images and their exchange (l3_encode.c) ---- */
uint64_t l3_unit_for(uint64_t seg, uint64_t blk);
void l3_image_free(image *im);
/* The committed epoch of c as an image cut into units of `unit` bytes. */
int l3_image_of(crpm_container *c, uint64_t unit, image *im);
int l3_same_layout(const image *a, const image *b);
/* Image unit s: its bytes (NULL: zeros), how many are defined (the rest
 * are zero) and the physical segment holding them (CRPM_NO_PHYS: none). */
const char *l3_unit_bytes(crpm_container *c, const image *im, uint64_t s, uint64_t *len, uint32_t *phys,
                          uint64_t *covered);
/* Collective: every rank sends the difference between image nw and old
 * (NULL: zeros) to the holders, which add it into target (M buffers of
 * plen bytes; psegs parity segments).  *sent adds the payload. */
int l3_exchange(crpm_level *lv, const image *nw, const image *old, uint64_t psegs, unsigned char **target,
                uint64_t *sent, int hook);

/* ---- the parity container and the checkpoint (level_l3.c) ---- */
/* Parity buffers of at least `bytes` each, protected in pc. */
int l3_size_parity(l3_state *s, uint64_t bytes, int zero);
/* Collective: the committed epoch's image into the parity (a delta when
 * want_delta and every rank can), committed in the parity container. */
int l3_encode(crpm_level *lv, int want_delta, uint64_t *sent, int hook);
/* Every rank committed: the parity describes this epoch's images. */
int l3_committed(crpm_level *lv, int64_t id);

/* ---- the restart half (l3_restart.c, l3_rebuild.c) ---- */
/* The level's own facts per rank (l3_facts). */
enum { L3F_OK, L3F_EPOCH, L3F_PREV, L3F_RUN0, L3F_RUN1, L3F_BAD, L3F_N };
int l3_facts(crpm_level *lv, const int64_t *row, int64_t *own);
int l3_offers(crpm_level *lv, const crpm_plan *p, int64_t *epochs, int max);
void l3_plan(crpm_level *lv, crpm_plan *p);
int l3_describe(crpm_level *lv, const crpm_plan *p, int r, char *buf, size_t n);
/* Pure: of the ranks flagged in need (every other rank holds epoch), those
 * whose groups' survivors and parity (own: L3F_N columns per rank) rebuild
 * them at epoch (rebuild: nranks flags); returns how many. */
int crpm_l3_can_rebuild(const int64_t *own, int nranks, const int *groups, const int *members, int K, int M,
                        const int64_t *run, int64_t epoch, const int64_t *need, int64_t *rebuild);
int l3_restore(crpm_level *lv, const crpm_restart_io *io);
int l3_resync(crpm_level *lv, const crpm_plan *p, int resumed, int64_t epoch);
/* The parity goes to the job's agreed epoch (rolled back when one ahead);
 * *usable = 0 when it does not describe that epoch. */
int l3_at(crpm_level *lv, uint64_t epoch, int *usable);
/* Collective: every parity container is re-encoded from the containers
 * unless all already describe the committed epoch (force: re-encode). */
int l3_sync(crpm_level *lv, int force, uint64_t *sent);
/* A lost rank's checkpoint as rebuilt: its regions (ptr into buf, which
 * holds their bytes alone) and user id. */
typedef struct l3_image {
    char *buf;
    crpm_array *regions;
    int nregions;
    uint64_t user_id;
} l3_image;
void l3_image_release(l3_image *img);
/* Collective: lost[r] != 0 for ranks whose container is rebuilt from the
 * survivors of their group (their containers at the agreed epoch) and the
 * parity of ranks with usable[r] != 0.  On a lost rank, *img gets its
 * checkpoint.  Only the regions' defined bytes are moved and decoded.
 * *seconds: this rank's time in the reconstruction proper (after the
 * agreement that every rank can take part). */
int l3_rebuild(crpm_level *lv, const int64_t *lost, const int64_t *usable, l3_image *img, uint64_t *sent,
               double *seconds);

/* ---- the test-only parity check (l3_verify.c, CRPM_TEST_HOOKS builds) ---- */
#ifdef CRPM_TEST_HOOKS
/* Collective: the parity compared with a full re-encode of every rank's image. */
int l3_verify_parity(crpm_level *lv, const image *im, uint64_t psegs);
#endif

#endif

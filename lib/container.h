/* Container layer internals shared by container.c (format, open, commit) and
 * checkpoint.c (the engine). */
#ifndef CRPM_CONTAINER_H
#define CRPM_CONTAINER_H
#include "engine.h"
#include "format.h"

typedef struct crpm_seg {
    uint32_t phys[2];
    uint32_t state;
} crpm_seg;

typedef struct crpm_region {
    /* as saved in the committed epoch (saved == 0: not in it) */
    int saved;
    int32_t id;
    int32_t type_code;
    uint64_t elem_size;
    uint64_t count;
    uint64_t nsegs;
    crpm_seg *segs;
    /* as protected now */
    void *ptr;
    int32_t p_type_code;
    uint64_t p_elem_size;
    uint64_t p_count;
    /* change tracking (volatile, only with a tracker) */
    int tracked;             /* ptr..ptr+bytes is registered with the tracker */
    int stale_valid;         /* stale describes the two copies */
    int rescan_all;          /* a scan's report was lost: treat every block as written */
    int scanned;             /* wbits holds this checkpoint's scan */
    uint64_t *wbits;         /* blocks reported written by this checkpoint's scan */
    uint64_t *stale;         /* blocks where the two NVM copies may differ */
    uint64_t bits_cap;       /* words in wbits and stale */
    uint64_t wbytes;         /* bytes on pages this checkpoint's scan reported written */
    int hot_left;            /* checkpoints left that compare it whole, unscanned (densely written) */
    int hot_len;             /* length of its next hot period */
    int report_fresh;        /* the next scan reports one epoch's writes (not a hot period's) */
} crpm_region;

struct crpm_container {
    crpm_media media;
    char *path;
    struct crpm_super sb;
    uint64_t epoch;          /* committed */
    int in_progress;         /* commit word's flag */
    int prev_ok;
    uint64_t user_id;
    uint64_t nphys;          /* segments the pool holds (file extent) */
    crpm_region *regions;
    int nregions, cap_regions;
    uint8_t *used;           /* per physical segment: referenced or allocated */
    uint64_t used_cap;
    uint32_t *reserved;      /* per physical segment: bytes known to have storage */
    uint64_t hint;           /* where the next free-segment search starts */
    struct crpm_tracker *trk; /* NULL: compare every block */
    int want_tracking;
    char track_msg[256];      /* why tracking was not available */
    crpm_hook_fn hook;
    void *hook_arg;
};

/* container.c */
uint64_t crpm_commit_word(uint64_t nonce, uint64_t epoch, int in_progress);
int crpm_write_commit(crpm_container *c, uint64_t epoch, int in_progress);
int crpm_write_slot(crpm_container *c, uint64_t epoch, uint64_t user_id, uint64_t nphys,
                    crpm_region *regs, int nregs, crpm_seg **segs);
int crpm_load_slot(crpm_container *c, uint64_t epoch);
int crpm_grow_pool(crpm_container *c, uint64_t min_nphys);
int crpm_reserve_seg(crpm_container *c, uint32_t phys, uint64_t len);
void crpm_mark_used(crpm_container *c);
char *crpm_seg_addr(crpm_container *c, uint32_t phys);
void crpm_free_regions(crpm_container *c);
int crpm_copy_saved(crpm_container *c, const crpm_region *r, void *dst);
#endif

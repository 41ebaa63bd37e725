/* Engine internals shared by its files (the engine's API is engine.h).
 *
 *   engine.c         open and close: the engine's state of a container
 *   regions.c        protect, unprotect, recovery
 *   checkpoint.c     one checkpoint: the new epoch's tables, the data pass, commit
 *   segment.c        bringing the other copy of one segment up to date
 *   tracking.c       change tracking: choosing the ops of a region; compare
 *                    everything; writes declared by the owner
 *   track_pagemap.c  change tracking by the kernel's page tracker (track.c)
 *   track_kind.c     change tracking by the array's memory kind (memkind.h:
 *                    kinds that stage their changed blocks, e.g. GPU memory)
 *   track_instr.c    change tracking by the marks of code compiled with the
 *                    pass plugin (util/marks.c: the process's table of ranges)
 *   pack.c           small arrays sharing segments (packs, format.h)
 *   par.c            the data passes of checkpoint and recovery split into
 *                    tasks for the worker pool (util/pool.h)
 *
 * Change tracking is how a checkpoint learns which blocks of a region may
 * have changed since the last commit.  Each protected region uses one ops
 * table, chosen when it is protected or declared (crpm_track_choose), and
 * keeps its tracking state in a crpm_eregion that the engine owns (the format
 * layer only carries the pointer along).  All of it is volatile: a reload of
 * the committed state (open, rollback, renumber: the container's generation)
 * voids what the engine knew about the two copies. */
#ifndef CRPM_ENGINE_INT_H
#define CRPM_ENGINE_INT_H

#include "engine.h"
#include "track.h"

typedef struct crpm_wscratch crpm_wscratch;

/* One worker's part of a checkpoint's data pass (par.c): its counters, the
 * media it stores through (the container's, or its own view of it,
 * persist.h), its scratch, and whether a copy a segment lacks is allocated
 * after the pass instead of at once (defer: the segment steps then return
 * CRPM_DEFERRED, see crpm_seg_fill), or was allocated before (fresh). */
typedef struct crpm_ck_stats {
    uint64_t compared, written, blocks;
    crpm_media *m;
    crpm_wscratch *ws;
    int defer;
    int fresh;               /* the segment's other copy was allocated for it before the pass (memory
                                not in host memory: read once, so not deferred) and holds nothing yet */
} crpm_ck_stats;

/* A segment step's answer: its other copy must be allocated first (not an
 * error; the segment is filled in the pass after the allocation). */
#define CRPM_DEFERRED 1

/* A worker's scratch: a segment of host bytes (arrays not in host memory
 * are read or staged into it, packs gathered), a segment's bitmap of staged
 * blocks, its view of the media and its write log. */
struct crpm_wscratch {
    char *buf;
    uint64_t buf_cap;
    uint64_t *chg;
    uint64_t chg_words;
    crpm_media view;
    crpm_wlog log;
    int viewing;
    crpm_ck_stats st;
};

typedef struct crpm_track_ops {
    const char *name;
    /* r was protected (again: its pointer, size or declaration may have
     * changed).  Returns NULL when its changes are followed, otherwise why it
     * is compared whole (a static string). */
    const char *(*attach)(crpm_container *c, crpm_region *r);
    /* Before the data pass, once per checkpoint for all the regions that use
     * these ops (a page scan must cover them together: arrays may share
     * pages).  May be NULL. */
    void (*prepare)(crpm_container *c);
    /* Brings segment [off, off + len) of r into the copy of s that does not
     * hold the committed state, when it changed (s: its entry in the new
     * epoch's table; resized: its committed copy holds another length). */
    int (*segment)(crpm_container *c, crpm_region *r, crpm_seg *s, uint64_t off, uint64_t len, int resized,
                   crpm_ck_stats *st);
    /* The checkpoint committed (ok = 1) or failed (ok = 0). */
    void (*finish)(crpm_container *c, crpm_region *r, int ok);
} crpm_track_ops;

extern const crpm_track_ops crpm_track_compare;  /* every block compared */
extern const crpm_track_ops crpm_track_pagemap;  /* pages the kernel saw written */
extern const crpm_track_ops crpm_track_declared; /* blocks the owner reported */
extern const crpm_track_ops crpm_track_kind;     /* blocks the memory kind staged */
extern const crpm_track_ops crpm_track_packed;   /* small: compared with its pack (pack.c) */
extern const crpm_track_ops crpm_track_instr;    /* blocks instrumented code marked (track_instr.c) */

/* The engine's state of one protected region. */
typedef struct crpm_eregion {
    const crpm_track_ops *ops;
    const char *why;         /* with tracking asked for: why it is compared whole (static text) */
    int declared;            /* the owner reports its writes (crpm_container_written) */
    int stale_valid;         /* stale describes the two copies */
    int rescan_all;          /* a report was lost: treat every block as written */
    int scanned;             /* wbits holds this checkpoint's report */
    int stale_ready;         /* stale is exact for this checkpoint (compared whole or not) */
    uint64_t *wbits;         /* blocks reported written by this checkpoint's scan (declared:
                                since the last commit) */
    uint64_t *stale;         /* blocks where the two copies may differ */
    uint64_t bits_cap;       /* words in wbits and stale */
    uint64_t wbytes;         /* bytes on pages this checkpoint's scan reported written */
    int hot_left;            /* checkpoints left that compare it whole, unscanned (densely written) */
    int hot_len;             /* length of its next hot period */
    int report_fresh;        /* the next scan reports one epoch's writes (not a hot period's) */
    void *kstate;            /* the memory kind's state (attach), kinds that stage */
    int synced;              /* the kind's copy is the committed state */
    int staged;              /* the kind staged this checkpoint */
    int uninstr;             /* written by code the pass did not compile: compared whole */
    int mark_h;              /* its range in the marks table + 1 (0: none) */
    uintptr_t mark_base;     /* the range marked */
    uint64_t mark_len;
} crpm_eregion;

/* The engine's state of one container. */
typedef struct crpm_engine crpm_engine;
struct crpm_engine {
    crpm_tracker *trk;       /* NULL: no page tracker */
    int want_tracking;       /* crpm_open_opts.change_tracking (CRPM_TRACK_*) */
    int instr;               /* instrumented (or -verify): regions follow the marks */
    int verify;              /* instrumented-verify: every block compared, an unmarked change fails */
    char track_msg[256];     /* why tracking was not available */
    int any_declared;        /* some region reports its writes (sticky) */
    uint64_t generation;     /* the container's generation the regions' states describe */
    struct crpm_pool *pool;  /* workers of the data passes (NULL: the caller alone) */
    crpm_wscratch *ws;       /* per worker */
    int nws;
};

/* engine.c: the engine's state, made on first use (NULL: out of memory). */
crpm_engine *crpm_engine_of(crpm_container *c);
/* Brings the regions' tracking state up to the container's generation. */
void crpm_engine_sync(crpm_container *c);
/* The scratch of n workers (CRPM_ERR_NOMEM). */
int crpm_engine_scratch(crpm_engine *e, int n);
/* A worker's segment buffer (at least len bytes) and a zeroed bitmap of
 * nbits; NULL after crpm_error when out of memory. */
char *crpm_scratch_buf(crpm_wscratch *w, uint64_t len);
uint64_t *crpm_scratch_chg(crpm_wscratch *w, uint64_t nbits);

static inline uint64_t crpm_region_pbytes(const crpm_region *r) { return r->prot.count * r->prot.elem_size; }
/* Bytes [off, off + len) of r as protected now, readable by the CPU: in place
 * for host memory, otherwise copied out into the worker's buffer (valid
 * until its next call).  NULL with *rc set on an error. */
const char *crpm_region_read(const crpm_region *r, uint64_t off, uint64_t len, crpm_ck_stats *st, int *rc);
static inline const char *crpm_region_src(const crpm_region *r, uint64_t off, uint64_t len, crpm_ck_stats *st,
                                          int *rc)
{
    const char *p = (const char *)crpm_array_host(&r->prot);
    return p ? p + off : crpm_region_read(r, off, len, st, rc);
}

/* tracking.c */
/* Chooses r's ops (tracking asked for, memory, declaration) and attaches it;
 * makes its state.  CRPM_ERR_NOMEM when the state cannot be made. */
int crpm_track_choose(crpm_container *c, crpm_region *r);
/* Frees r's state (unprotected, or the region leaves the table). */
void crpm_track_drop(crpm_region *r);
/* The memory kind's state of r goes (r's address, size or kind change). */
void crpm_track_detach_kind(crpm_region *r);
/* Recovery filled the arrays with the committed state (kinds may sync). */
void crpm_track_recovered(crpm_container *c);
/* Every region's knowledge of the copies void (the container was reloaded). */
void crpm_track_reset(crpm_container *c);
/* wbits and stale cover r's protected blocks; 0 when out of memory. */
int crpm_track_bits(crpm_eregion *e, uint64_t bytes, uint64_t blk);
/* Readies r's stale bitmap for this checkpoint (all blocks when the copies
 * are not known) and sets e->stale_ready; 0 when out of memory. */
int crpm_track_stale(crpm_eregion *e, uint64_t bytes, uint64_t blk);
/* The segment step of the ops whose report fills wbits (pagemap, declared). */
int crpm_track_bits_segment(crpm_container *c, crpm_region *r, crpm_seg *s, uint64_t off, uint64_t len,
                            int resized, crpm_ck_stats *st);

/* track_instr.c: r's range leaves the marks table. */
void crpm_track_instr_release(crpm_eregion *e);

/* pack.c */
/* The largest array packed (0: the container has no packs). */
uint64_t crpm_pack_max(const crpm_container *c);
/* The members of each pack of a plan: regions members[first[k] ..
 * first[k + 1]) lie in pack k, which continues pack origin[k] of the
 * committed epoch (CRPM_NO_PACK: a new pack). */
typedef struct crpm_packing {
    uint32_t *first, *members, *origin;
} crpm_packing;
/* Fills lay's pack, pack_off and packs for the protected regions whose ops
 * are crpm_track_packed; *fresh counts the new packs. */
int crpm_pack_plan(crpm_container *c, crpm_seg_plan *lay, crpm_packing *pk, uint64_t *fresh);
/* Gathers pack k of the plan into buf (its len bytes). */
int crpm_pack_gather(crpm_container *c, const crpm_seg_plan *lay, const crpm_packing *pk, uint32_t k, char *buf);
/* Gathers pack k and brings its other copy up to date. */
int crpm_pack_write_one(crpm_container *c, const crpm_seg_plan *lay, const crpm_packing *pk, uint32_t k,
                        crpm_ck_stats *st);
void crpm_packing_free(crpm_packing *pk);

/* segment.c */
/* Compares segment src (len bytes) with its committed copy and, when they
 * differ (or resized, or new), brings the other copy up to date. */
int crpm_seg_compare(crpm_container *c, crpm_seg *s, const char *src, uint64_t len, int resized, crpm_ck_stats *st);
/* The same in one pass, keeping S (the blocks where the two copies may
 * differ, bits b0.. of the segment; NULL: not known) exact: see segment.c. */
int crpm_seg_whole(crpm_container *c, uint64_t *S, crpm_seg *s, const char *src, uint64_t len, int resized,
                   uint64_t b0, crpm_ck_stats *st);
/* Brings the copy that does not hold the committed state up to date,
 * comparing every block (allocates it when missing, or with st->defer
 * returns CRPM_DEFERRED). */
int crpm_seg_write(crpm_container *c, crpm_seg *s, const char *src, uint64_t len, crpm_ck_stats *st);
/* Writes src whole into the other copy of s, which is allocated but holds
 * nothing of s (a new segment, or a copy allocated after CRPM_DEFERRED). */
int crpm_seg_fill(crpm_container *c, crpm_seg *s, const char *src, uint64_t len, crpm_ck_stats *st);
/* A tracked segment with a committed copy: see segment.c. */
int crpm_seg_tracked(crpm_container *c, crpm_eregion *e, crpm_seg *s, const char *src, uint64_t len, uint64_t b0,
                     uint64_t b1, crpm_ck_stats *st);
/* A segment whose changed blocks a memory kind staged: W (e->wbits) holds
 * them, stage their bytes (segment-relative); see segment.c. */
int crpm_seg_staged(crpm_container *c, crpm_eregion *e, crpm_seg *s, const char *stage, uint64_t len, uint64_t b0,
                    uint64_t b1, crpm_ck_stats *st);
/* Physical segments: one for the new epoch, and room for n more. */
int crpm_phys_alloc(crpm_container *c, uint32_t *out);
int crpm_phys_reserve(crpm_container *c, uint64_t n);

/* par.c */
/* The data pass of a checkpoint: every region's segments, then the packs,
 * split into tasks over the engine's workers; new segments get their
 * copies first, copies a changed segment lacks are allocated after the
 * comparisons, in the order of the segments, whatever the number of
 * workers (the file is the same for any number), then filled. */
int crpm_par_write(crpm_container *c, crpm_seg_plan *lay, const crpm_packing *pk, crpm_ck_stats *st);
/* Recovery's copies, split over the workers: the first error in array
 * order is returned. */
int crpm_par_recover(crpm_container *c);

#endif

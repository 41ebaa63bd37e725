/* Change tracking (engine_int.h): which ops a region uses, and the two
 * simplest ones.
 *
 *   compare   every block of the region is compared with the committed copy:
 *             always exact, for memory nothing can follow
 *   declared  the owner reports the bytes it wrote (crpm_container_written,
 *             level-3 parity); only those blocks, and the blocks where the
 *             two copies may differ, are compared
 *   pagemap   track_pagemap.c: the pages the kernel saw written
 *   kind      track_kind.c: the blocks the array's memory kind staged
 *   instrumented  track_instr.c: the blocks code compiled with the pass marked
 *   packed    small arrays, compared with the other arrays of their pack
 *
 * The ops that fill a region's wbits share the segment step
 * (crpm_track_bits_segment) and its commit bookkeeping. */
#include <stdlib.h>
#include <string.h>
#include "engine_int.h"
#include "bits.h"
#include "marks.h"
#include "reserved_ids.h"

/* ---- compare everything ------------------------------------------------------ */

/* Compared whole, each segment in one pass with its committed copy: the
 * stale bitmap (blocks where the two copies may differ) spares reading the
 * other copy elsewhere, and the pass keeps it exact. */
static void compare_prepare(crpm_container *c)
{
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        if (r->eng && r->eng->ops == &crpm_track_compare)
            crpm_track_stale(r->eng, crpm_region_pbytes(r), c->sb.block_size);
    }
}

static int compare_segment(crpm_container *c, crpm_region *r, crpm_seg *s, uint64_t off, uint64_t len, int resized,
                           crpm_ck_stats *st)
{
    int rc = CRPM_SUCCESS;
    const char *src = crpm_region_src(r, off, len, st, &rc);
    crpm_eregion *e = r->eng;
    return src ? crpm_seg_whole(c, e->stale_ready ? e->stale : NULL, s, src, len, resized, off / c->sb.block_size, st)
               : rc;
}

static void compare_finish(crpm_container *c, crpm_region *r, int ok)
{
    (void)c;
    r->eng->stale_valid = ok && r->eng->stale_ready; /* a failed pass left the other copies partly rewritten */
    r->eng->stale_ready = 0;
}

const crpm_track_ops crpm_track_compare = {"compare", NULL, compare_prepare, compare_segment, compare_finish};

/* Packed arrays have no segments of their own: their pack is gathered and
 * compared whole (pack.c), so no segment step and no stale bitmap. */
const crpm_track_ops crpm_track_packed = {"packed", NULL, NULL, NULL, compare_finish};

/* ---- ops that report into wbits ------------------------------------------------ */

int crpm_track_bits(crpm_eregion *e, uint64_t bytes, uint64_t blk)
{
    uint64_t words = ((bytes + blk - 1) / blk + 63) / 64;
    if (words <= e->bits_cap)
        return 1;
    uint64_t *w = realloc(e->wbits, words * 8), *st;
    if (w) e->wbits = w;
    st = w ? realloc(e->stale, words * 8) : NULL;
    if (st) e->stale = st;
    if (!w || !st)
        return 0;
    memset(w + e->bits_cap, 0, (words - e->bits_cap) * 8);
    e->bits_cap = words;
    e->stale_valid = 0;
    return 1;
}

int crpm_track_stale(crpm_eregion *e, uint64_t bytes, uint64_t blk)
{
    e->stale_ready = 0;
    if (!crpm_track_bits(e, bytes, blk))
        return 0;
    if (!e->stale_valid && e->stale) /* an empty region has no bitmap (memset of NULL is undefined) */
        memset(e->stale, 0xff, ((bytes + blk - 1) / blk + 63) / 64 * 8);
    e->stale_ready = 1;
    return 1;
}

int crpm_track_bits_segment(crpm_container *c, crpm_region *r, crpm_seg *s, uint64_t off, uint64_t len,
                            int resized, crpm_ck_stats *st)
{
    crpm_eregion *e = r->eng;
    int rc = CRPM_SUCCESS;
    const char *src = crpm_region_src(r, off, len, st, &rc);
    if (!src)
        return rc;
    uint64_t blk = c->sb.block_size, b0 = off / blk, b1 = b0 + (len + blk - 1) / blk;
    if (!e->scanned) /* no report this time (hot, or no memory for bitmaps): compared whole */
        return crpm_seg_whole(c, e->stale_ready ? e->stale : NULL, s, src, len, resized, b0, st);
    if (s->state && !resized)
        return crpm_seg_tracked(c, e, s, src, len, b0, b1, st);
    /* a segment whose length changed is rewritten: the committed copy's
     * last CRC describes its old length */
    rc = crpm_seg_write(c, s, src, len, st);
    crpm_set_bits(e->stale, b0, b1, 1); /* only one copy, or unknown */
    return rc;
}

/* ---- declared writes ------------------------------------------------------------ */

static void declared_prepare(crpm_container *c)
{
    uint64_t blk = c->sb.block_size;
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        crpm_eregion *e = r->eng;
        if (!e || e->ops != &crpm_track_declared)
            continue;
        uint64_t words = ((crpm_region_pbytes(r) + blk - 1) / blk + 63) / 64;
        e->scanned = 0;
        if (!crpm_track_stale(e, crpm_region_pbytes(r), blk))
            continue; /* no memory for bitmaps: this region is compared whole */
        if (e->rescan_all)
            memset(e->wbits, 0xff, words * 8);
        e->rescan_all = 1; /* the reports are kept until this checkpoint commits */
        e->scanned = 1;
    }
}

static void declared_finish(crpm_container *c, crpm_region *r, int ok)
{
    (void)c;
    crpm_eregion *e = r->eng;
    e->stale_valid = ok && e->stale_ready;
    e->stale_ready = 0;
    if (!ok)
        return;
    e->rescan_all = !e->scanned; /* reports not kept: compare all next time */
    if (e->scanned)
        memset(e->wbits, 0, e->bits_cap * 8); /* the reported writes are in the commit */
}

const crpm_track_ops crpm_track_declared = {"declared", NULL, declared_prepare, crpm_track_bits_segment,
                                            declared_finish};

int crpm_container_declare_writes(crpm_container *c, int32_t id)
{
    crpm_region *r = crpm_region_find(c, id);
    if (!r || !r->prot.elem_size || !r->eng)
        return crpm_error(CRPM_ERR_INVAL, "declare writes: id %d is not protected", id);
    crpm_engine *e = crpm_engine_of(c);
    if (!e)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    if (!r->eng->declared)
        r->eng->rescan_all = 1; /* what was written before went unreported */
    r->eng->declared = 1;
    e->any_declared = 1;
    return crpm_track_choose(c, r);
}

void crpm_container_written(crpm_container *c, int32_t id, uint64_t off, uint64_t len)
{
    crpm_region *r = crpm_region_find(c, id);
    crpm_eregion *e = r ? r->eng : NULL;
    uint64_t bytes = r ? crpm_region_pbytes(r) : 0, blk = c->sb.block_size;
    if (!e || e->ops != &crpm_track_declared || off >= bytes || !len)
        return;
    if (!crpm_track_bits(e, bytes, blk)) {
        e->rescan_all = 1; /* no bitmap to report into: compare all */
        return;
    }
    uint64_t end = len > bytes - off ? bytes : off + len;
    crpm_set_bits(e->wbits, off / blk, (end + blk - 1) / blk, 1);
}

/* ---- choosing ------------------------------------------------------------------- */

/* Why memory of r's kind is compared whole although tracking was asked for. */
static const char *untrackable(const crpm_mem_kind *k)
{
    return k->flags & CRPM_MEM_HOST ? "its memory kind is not followed by the kernel's page tracker"
                                    : "not host memory: compared through its memory kind";
}

int crpm_track_choose(crpm_container *c, crpm_region *r)
{
    crpm_engine *eng = crpm_engine_of(c);
    if (!r->eng && !(r->eng = calloc(1, sizeof *r->eng)))
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    if (!eng)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    crpm_eregion *e = r->eng;
    const crpm_mem_kind *k = crpm_array_kind(&r->prot);
    if (!e->ops)
        e->rescan_all = 1; /* nothing is known about the copies yet */
    const crpm_track_ops *ops = &crpm_track_compare;
    const char *why = eng->want_tracking && !eng->trk ? eng->track_msg : NULL;
    uint64_t bytes = crpm_region_pbytes(r);
    if (!bytes) {
        why = NULL; /* nothing to follow */
    } else if (bytes <= crpm_pack_max(c) && !e->declared) {
        ops = &crpm_track_packed;
        why = eng->want_tracking ? "small: packed with other small arrays and compared with them" : NULL;
    } else if (k->stage) {
        why = crpm_track_kind.attach(c, r); /* the kind finds its changes, tracking asked for or not */
        ops = why ? &crpm_track_compare : &crpm_track_kind;
    } else if (e->declared) {
        ops = &crpm_track_declared;
        why = NULL;
    } else if (eng->instr && e->uninstr) {
        why = "marked as written by uninstrumented code: compared whole";
    } else if (eng->instr && r->id == CRPM_ID_HEAP && !crpm_marks_heap_instrumented()) {
        why = "the persistent heap's allocator was not compiled with the pass (a build without clang-14): "
              "compared whole";
    } else if (eng->instr && (k->flags & CRPM_MEM_HOST)) {
        why = crpm_track_instr.attach(c, r);
        ops = why ? &crpm_track_compare : &crpm_track_instr;
    } else if (eng->instr) {
        why = untrackable(k);
    } else if (eng->trk && (k->flags & CRPM_MEM_TRACKABLE) && (k->flags & CRPM_MEM_HOST)) {
        why = crpm_track_pagemap.attach(c, r);
        ops = why ? &crpm_track_compare : &crpm_track_pagemap;
    } else if (eng->trk) {
        why = untrackable(k);
    }
    if (ops != &crpm_track_instr)
        crpm_track_instr_release(e); /* its stores need no marks now */
    e->ops = ops;
    e->why = why;
    return CRPM_SUCCESS;
}

int crpm_container_uninstrumented(crpm_container *c, int32_t id, int on)
{
    crpm_region *r = crpm_region_find(c, id);
    if (!r || !r->prot.elem_size || !r->eng)
        return crpm_error(CRPM_ERR_INVAL, "uninstrumented writer: id %d is not protected", id);
    if (r->eng->uninstr && !on)
        r->eng->rescan_all = 1; /* what it wrote unmarked is compared once more */
    r->eng->uninstr = on != 0;
    return crpm_track_choose(c, r);
}

void crpm_track_detach_kind(crpm_region *r)
{
    crpm_eregion *e = r->eng;
    if (!e || !e->kstate)
        return;
    crpm_array_kind(&r->prot)->detach(e->kstate);
    e->kstate = NULL;
    e->synced = e->staged = 0;
}

void crpm_track_drop(crpm_region *r)
{
    if (!r->eng)
        return;
    crpm_track_detach_kind(r);
    crpm_track_instr_release(r->eng);
    free(r->eng->wbits);
    free(r->eng->stale);
    free(r->eng);
    r->eng = NULL;
}

void crpm_track_reset(crpm_container *c)
{
    for (int i = 0; i < c->nregions; i++)
        if (c->regions[i].eng) {
            c->regions[i].eng->stale_valid = 0;
            c->regions[i].eng->rescan_all = 1;
            c->regions[i].eng->synced = 0;
        }
}

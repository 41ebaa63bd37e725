/* Change tracking by marks of instrumented code (change_tracking =
 * instrumented; marks.h, include/crpm_instrument.h): code compiled with the
 * pass marks the blocks it stores into, and a checkpoint compares only the
 * marked blocks (and those where the two copies may differ), in the segment
 * step the pagemap and declared ops share (tracking.c).
 *
 * The marks are taken into wbits at each checkpoint and kept there until one
 * commits (as declared writes are); a failed checkpoint makes the next one
 * compare everything.  instrumented-verify compares every block besides and
 * fails the checkpoint, naming the array and the offset, at the first change
 * no mark covered: for tests, and for adopting the pass. */
#include <stdlib.h>
#include <string.h>
#include "engine_int.h"
#include "bits.h"
#include "marks.h"
#include "crpm_instrument.h"
#include "reserved_ids.h"

void crpm_track_instr_release(crpm_eregion *e)
{
    if (e->mark_h) {
        crpm_marks_remove(e->mark_h - 1);
        e->mark_h = 0;
    }
}

static const char *instr_attach(crpm_container *c, crpm_region *r)
{
    (void)c;
    crpm_eregion *e = r->eng;
    uintptr_t base = (uintptr_t)r->prot.ptr;
    uint64_t len = crpm_region_pbytes(r);
    if (e->mark_h && e->mark_base == base && e->mark_len == len)
        return NULL; /* the same range: its marks go on */
    crpm_track_instr_release(e);
    if (!crpm_marks_modules())
        return "no code compiled with the libcrpm pass plugin is loaded (instrumented tracking would miss every "
               "write): compared instead";
    const char *why = NULL;
    int h = crpm_marks_add(base, len, &why);
    if (h < 0)
        return why;
    e->mark_h = h + 1;
    e->mark_base = base;
    e->mark_len = len;
    e->rescan_all = 1; /* stores before the range was marked went unseen */
    return NULL;
}

typedef struct ireg {
    crpm_region *r;
    uintptr_t lo, hi;
} ireg;

static int cmp_ireg(const void *x, const void *y)
{
    const ireg *a = x, *b = y;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* Region g's blocks that granules [k0, k1] of gbits (granule gb + k) touch. */
static void granules_to_blocks(const ireg *g, uint64_t blk, const uint64_t *gbits, uintptr_t gb)
{
    uintptr_t k0 = (g->lo >> CRPM_INSTR_GRANULE_SHIFT) - gb, k1 = ((g->hi - 1) >> CRPM_INSTR_GRANULE_SHIFT) - gb;
    uint64_t *W = g->r->eng->wbits;
    for (uintptr_t k = crpm_next_set(gbits, k0, k1 + 1); k <= k1; k = crpm_next_set(gbits, k + 1, k1 + 1)) {
        uintptr_t a = (gb + k) << CRPM_INSTR_GRANULE_SHIFT, z = a + (1u << CRPM_INSTR_GRANULE_SHIFT);
        if (a < g->lo) a = g->lo;
        if (z > g->hi) z = g->hi;
        crpm_set_bits(W, (a - g->lo) / blk, (z - 1 - g->lo) / blk + 1, 1);
    }
}

/* Takes the marks of the instrumented regions into their wbits.  The marks
 * are per granule of the address space, and a take clears them, so regions
 * that share granules (overlapping or adjacent arrays) are taken together,
 * span by span. */
static void instr_prepare(crpm_container *c)
{
    uint64_t blk = c->sb.block_size;
    int n = 0;
    for (int i = 0; i < c->nregions; i++)
        n += c->regions[i].eng && c->regions[i].eng->ops == &crpm_track_instr;
    ireg *g = n ? malloc((size_t)n * sizeof *g) : NULL;
    int m = 0;
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        crpm_eregion *e = r->eng;
        if (!e || e->ops != &crpm_track_instr)
            continue;
        uint64_t bytes = crpm_region_pbytes(r);
        e->scanned = 0;
        if (!g || !crpm_track_stale(e, bytes, blk))
            continue; /* no memory: compared whole (its marks stay for the next time) */
        e->scanned = 1;
        g[m++] = (ireg){r, (uintptr_t)r->prot.ptr, (uintptr_t)r->prot.ptr + bytes};
    }
    qsort(g, (size_t)m, sizeof *g, cmp_ireg);
    for (int i = 0; i < m;) {
        /* a span: regions whose granules touch */
        uintptr_t g0 = g[i].lo >> CRPM_INSTR_GRANULE_SHIFT, g1 = (g[i].hi - 1) >> CRPM_INSTR_GRANULE_SHIFT;
        int j = i + 1;
        for (; j < m && (g[j].lo >> CRPM_INSTR_GRANULE_SHIFT) <= g1 + 1; j++)
            if (((g[j].hi - 1) >> CRPM_INSTR_GRANULE_SHIFT) > g1)
                g1 = (g[j].hi - 1) >> CRPM_INSTR_GRANULE_SHIFT;
        uint64_t *gbits = calloc((g1 - g0 + 1 + 63) / 64, 8);
        if (gbits)
            crpm_marks_take(g0 << CRPM_INSTR_GRANULE_SHIFT, (g1 - g0 + 1) << CRPM_INSTR_GRANULE_SHIFT, gbits);
        for (int k = i; k < j; k++) {
            crpm_eregion *e = g[k].r->eng;
            uint64_t nb = (g[k].hi - g[k].lo + blk - 1) / blk;
            if (!gbits || e->rescan_all)
                crpm_set_bits(e->wbits, 0, nb, 1); /* (no memory: the marks stay for the next time too) */
            else
                granules_to_blocks(&g[k], blk, gbits, g0);
            e->rescan_all = 1; /* the marks taken live in wbits until this checkpoint commits */
        }
        free(gbits);
        i = j;
    }
    free(g);
    if (m)
        crpm_marks_fence(); /* a store whose mark found its byte already set is visible from here on */
}

/* First byte of [o, o + n) where a and b differ, or n. */
static uint64_t first_diff(const char *a, const char *b, uint64_t n)
{
    uint64_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

static int verify_segment(crpm_container *c, crpm_region *r, crpm_seg *s, uint64_t off, uint64_t len,
                          const char *src, uint64_t b0, uint64_t b1)
{
    uint64_t blk = c->sb.block_size;
    const char *cur = crpm_seg_addr(c, s->phys[s->state - 1]);
    const uint64_t *W = r->eng->wbits;
    for (uint64_t b = b0; b < b1; b++) {
        if (W[b / 64] >> (b % 64) & 1)
            continue;
        uint64_t o = (b - b0) * blk, n = len - o < blk ? len - o : blk;
        if (memcmp(src + o, cur + o, n) == 0)
            continue;
        uint64_t at = off + o + first_diff(src + o, cur + o, n);
        if (r->id == CRPM_ID_HEAP)
            return crpm_error(CRPM_ERR_MISMATCH, "change_tracking = instrumented-verify: the persistent heap changed "
                              "at byte offset %llu (address %p) with no mark: written by code the pass did not "
                              "instrument", (unsigned long long)at, (void *)((char *)r->prot.ptr + at));
        return crpm_error(CRPM_ERR_MISMATCH, "change_tracking = instrumented-verify: array %d changed at byte offset "
                          "%llu (element %llu) with no mark: written by code the pass did not instrument (mark "
                          "the array as written by uninstrumented code, or call crpm_instr_written)", r->id,
                          (unsigned long long)at, (unsigned long long)(at / r->prot.elem_size));
    }
    return CRPM_SUCCESS;
}

static int instr_segment(crpm_container *c, crpm_region *r, crpm_seg *s, uint64_t off, uint64_t len, int resized,
                         crpm_ck_stats *st)
{
    if (c->eng->verify && r->eng->scanned && s->state && !resized) {
        int rc = CRPM_SUCCESS;
        const char *src = crpm_region_src(r, off, len, st, &rc);
        uint64_t blk = c->sb.block_size;
        if (!src)
            return rc;
        if ((rc = verify_segment(c, r, s, off, len, src, off / blk, off / blk + (len + blk - 1) / blk)) != 0)
            return rc;
    }
    return crpm_track_bits_segment(c, r, s, off, len, resized, st);
}

static void instr_finish(crpm_container *c, crpm_region *r, int ok)
{
    (void)c;
    crpm_eregion *e = r->eng;
    e->stale_valid = ok && e->stale_ready;
    e->stale_ready = 0;
    if (!ok)
        return;
    e->rescan_all = !e->scanned;
    if (e->scanned)
        memset(e->wbits, 0, e->bits_cap * 8); /* the marked writes are in the commit */
}

const crpm_track_ops crpm_track_instr = {"instrumented", instr_attach, instr_prepare, instr_segment, instr_finish};

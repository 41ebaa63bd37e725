/* Change tracking by the array's memory kind (memkind.h): a kind that keeps
 * its own copy of the committed state (GPU memory: on the device) compares
 * there and stages the changed blocks of each segment into the engine's
 * host buffer; the engine writes them, and the blocks where the two
 * container copies may differ, into the copy that does not hold the
 * committed state (crpm_seg_staged), then tells the kind whether the
 * checkpoint committed.
 *
 * The kind's report is trusted only while its copy is known to be the
 * committed state (synced: after a committed checkpoint that staged the
 * whole region, or after recovery filled the array); otherwise, and for new
 * or resized segments, it stages everything and the segment is compared on
 * the host like any other. */
#include <string.h>
#include "engine_int.h"
#include "bits.h"

static const char *kind_attach(crpm_container *c, crpm_region *r)
{
    crpm_eregion *e = r->eng;
    if (e->kstate)
        return NULL;
    if (crpm_array_kind(&r->prot)->attach(&r->prot, c->sb.block_size, &e->kstate) != 0) {
        e->kstate = NULL;
        crpm_error_clear();
        return "its memory kind cannot follow it (compared through copies instead)";
    }
    e->synced = e->staged = 0;
    return NULL;
}

static void kind_prepare(crpm_container *c)
{
    uint64_t blk = c->sb.block_size;
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        crpm_eregion *e = r->eng;
        if (!e || e->ops != &crpm_track_kind)
            continue;
        /* from here on the kind holds what its segments stage until the event
         * (set here, not by the workers that stage them concurrently) */
        e->staged = 1;
        e->scanned = crpm_track_bits(e, crpm_region_pbytes(r), blk); /* else: no stale map, stage all */
        if (e->scanned && !e->stale_valid)
            memset(e->stale, 0xff, ((crpm_region_pbytes(r) + blk - 1) / blk + 63) / 64 * 8);
    }
}

static int kind_segment(crpm_container *c, crpm_region *r, crpm_seg *s, uint64_t off, uint64_t len, int resized,
                        crpm_ck_stats *st)
{
    crpm_eregion *e = r->eng;
    uint64_t blk = c->sb.block_size, b0 = off / blk, nb = (len + blk - 1) / blk, b1 = b0 + nb;
    int all = !e->synced || !e->scanned || !s->state || resized;
    char *buf = crpm_scratch_buf(st->ws, c->sb.segment_size);
    uint64_t *chg = buf ? crpm_scratch_chg(st->ws, nb) : NULL;
    if (!chg)
        return CRPM_ERR_NOMEM;
    int rc = crpm_array_kind(&r->prot)->stage(e->kstate, &r->prot, off, len, all, chg, buf);
    if (rc)
        return rc;
    if (all) {
        rc = crpm_seg_compare(c, s, buf, len, resized, st);
        if (e->scanned)
            crpm_set_bits(e->stale, b0, b1, 1); /* only one copy, or unknown */
        return rc;
    }
    crpm_set_bits(e->wbits, b0, b1, 0); /* the report, region-relative */
    for (uint64_t w = 0; w < (nb + 63) / 64; w++)
        for (uint64_t x = chg[w] & crpm_word_mask(w, 0, nb); x; x &= x - 1) {
            uint64_t b = b0 + w * 64 + (uint64_t)__builtin_ctzll(x);
            e->wbits[b / 64] |= 1ull << (b % 64);
        }
    return crpm_seg_staged(c, e, s, buf, len, b0, b1, st);
}

static void kind_finish(crpm_container *c, crpm_region *r, int ok)
{
    (void)c;
    crpm_eregion *e = r->eng;
    if (e->staged && e->kstate)
        crpm_array_kind(&r->prot)->event(e->kstate, &r->prot, ok ? CRPM_MEM_COMMITTED : CRPM_MEM_ABORTED);
    /* every segment was staged: the kind's copy is what was committed */
    e->synced = ok && e->staged;
    e->stale_valid = ok && e->scanned;
    e->staged = 0;
}

const crpm_track_ops crpm_track_kind = {"kind", kind_attach, kind_prepare, kind_segment, kind_finish};

void crpm_track_recovered(crpm_container *c)
{
    crpm_engine_sync(c); /* a rollback before the recovery voids what was known */
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        crpm_eregion *e = r->eng;
        if (!e || e->ops != &crpm_track_kind || !e->kstate)
            continue;
        crpm_array_kind(&r->prot)->event(e->kstate, &r->prot, CRPM_MEM_SYNCED);
        e->synced = 1;
    }
}

/* Checkpoint engine: differential checkpoint, commit and recovery.
 *
 * Each segment of a protected array has up to two NVM copies; the committed
 * epoch names the one that holds its state.  A checkpoint compares the DRAM
 * working copy with the committed copy; an unchanged segment keeps it.  A
 * changed segment is written into the OTHER copy, block by block where that
 * copy differs, so the committed copy is never touched however long the
 * segment stayed clean.  Data and the next metadata slot are persisted with
 * one fence, then the commit word flips the epoch with a second one.
 *
 * With a page-write tracker (change_tracking = pagemap) only blocks on pages
 * the kernel saw written, and blocks where the two copies may differ (the
 * `stale` bitmap), are read: see crpm_seg_tracked (segment.c).  How a region
 * learns what changed is its change-tracking ops (engine_int.h).  The data
 * pass runs on the engine's workers (par.c); everything before and after it
 * (commit word, slot, fences) on the calling thread. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "engine_int.h"

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Segment tables of the epoch being written: each protected region with
 * segments of its own keeps its committed ones and gets empty ones where it
 * grew (*fresh counts them); packed regions get none (pack.c). */
static int new_seg_tables(crpm_container *c, crpm_seg_plan *lay, uint64_t *protected_bytes, uint64_t *fresh)
{
    uint64_t seg = c->sb.segment_size;
    lay->segs = calloc((size_t)c->nregions + 1, sizeof *lay->segs);
    if (!lay->segs)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        if (!r->prot.elem_size)
            continue;
        uint64_t bytes = crpm_region_pbytes(r), ns = (bytes + seg - 1) / seg;
        *protected_bytes += bytes;
        if (r->eng->ops == &crpm_track_packed)
            continue;
        lay->segs[i] = malloc((ns ? ns : 1) * sizeof(crpm_seg));
        if (!lay->segs[i])
            return crpm_error(CRPM_ERR_NOMEM, "out of memory");
        for (uint64_t k = 0; k < ns; k++) {
            if (r->saved && k < r->nsegs) {
                lay->segs[i][k] = r->segs[k];
            } else {
                lay->segs[i][k] = (crpm_seg){{CRPM_NO_PHYS, CRPM_NO_PHYS}, 0};
                (*fresh)++;
            }
        }
    }
    return CRPM_SUCCESS;
}

/* Committed: the protected set becomes the saved set (unprotected regions
 * leave it), laid out as lay says. */
static void adopt_saved(crpm_container *c, crpm_seg_plan *lay)
{
    uint64_t seg = c->sb.segment_size;
    int m = 0;
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        free(r->segs);
        r->segs = NULL;
        if (!r->prot.elem_size) {
            free(lay->segs[i]);
            crpm_track_drop(r);
            continue;
        }
        r->saved = 1;
        r->segs = lay->segs[i];
        r->pack = lay->pack[i];
        r->pack_off = lay->pack_off[i];
        r->eng->ops->finish(c, r, 1);
        r->type_code = r->prot.type_code;
        r->elem_size = r->prot.elem_size;
        r->count = r->prot.count;
        r->nsegs = r->pack == CRPM_NO_PACK ? (r->count * r->elem_size + seg - 1) / seg : 0;
        c->regions[m++] = *r;
    }
    c->nregions = m;
    free(c->packs);
    c->packs = lay->packs;
    c->npacks = lay->npacks;
    free(lay->segs);
    free(lay->pack);
    free(lay->pack_off);
    memset(lay, 0, sizeof *lay);
    crpm_mark_used(c);
}

/* The data pass: every region with segments of its own, then the packs. */
static int write_data(crpm_container *c, crpm_seg_plan *lay, const crpm_packing *pk, crpm_ck_stats *st)
{
    crpm_engine *e = c->eng;
    crpm_engine_sync(c);
    if (e->trk)
        crpm_track_pagemap.prepare(c);
    if (e->any_declared)
        crpm_track_declared.prepare(c);
    if (e->instr)
        crpm_track_instr.prepare(c);
    crpm_track_kind.prepare(c);
    crpm_track_compare.prepare(c);
    return crpm_par_write(c, lay, pk, st); /* over the engine's workers (par.c) */
}

int crpm_container_checkpoint(crpm_container *c, uint64_t user_id, crpm_stats_t *out)
{
    if (c->read_only)
        return crpm_error(CRPM_ERR_STATE, "%s is open read-only", c->path);
    if (!crpm_engine_of(c))
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    double t0 = mono();
    uint64_t drains0 = c->media.drains;
    uint64_t protected_bytes = 0;
    int rc = CRPM_SUCCESS;
    if (c->hook)
        c->hook(c->hook_arg, CRPM_HOOK_BEFORE_DATA, c->epoch + 1);
    /* From here on the copies epoch-1 relies on may be overwritten. */
    if (!c->in_progress && (rc = crpm_write_commit(c, c->epoch, 1)) != 0)
        return rc;
    c->prev_ok = 0;

    uint64_t fresh = 0;
    crpm_seg_plan lay = {0};
    crpm_packing pk = {0};
    rc = new_seg_tables(c, &lay, &protected_bytes, &fresh);
    if (rc == 0)
        rc = crpm_pack_plan(c, &lay, &pk, &fresh);
    /* one pool growth for all new segments instead of one per segment */
    if (rc == 0 && fresh)
        rc = crpm_phys_reserve(c, fresh);
    crpm_ck_stats st = {0, 0, 0, NULL, NULL, 0, 0};
    if (rc == 0)
        rc = write_data(c, &lay, &pk, &st);
    crpm_packing_free(&pk);
    if (rc == 0)
        rc = crpm_write_slot(c, c->epoch + 1, user_id, c->nphys, c->regions, c->nregions, &lay);
    if (rc == 0) {
        crpm_persist_drain(&c->media);
        if (c->hook)
            c->hook(c->hook_arg, CRPM_HOOK_AFTER_DATA, c->epoch + 1);
        rc = crpm_write_commit(c, c->epoch + 1, 0);
    }
    if (rc) {
        crpm_seg_plan_free(&lay, c->nregions);
        crpm_mark_used(c); /* forget allocations of the failed attempt */
        crpm_crc_trust_committed(c); /* the other copies' tables were partly rewritten */
        for (int i = 0; i < c->nregions; i++)
            if (c->regions[i].eng)
                c->regions[i].eng->ops->finish(c, &c->regions[i], 0); /* the other copies were partly rewritten */
        return rc;
    }

    adopt_saved(c, &lay);
    c->user_id = user_id;
    c->levels |= c->levels_add;
    c->levels_add = 0;
    c->prev_ok = 1;

    double dt = mono() - t0;
    crpm_stats_t s = {1, protected_bytes, st.compared, st.written, st.blocks, c->media.drains - drains0, dt, 0};
    if (out)
        *out = s;
    if (c->hook)
        c->hook(c->hook_arg, CRPM_HOOK_AFTER_COMMIT, c->epoch);
    return CRPM_SUCCESS;
}

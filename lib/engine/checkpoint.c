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
 * learns what changed is its change-tracking ops (engine_int.h). */
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

static int checkpoint_region(crpm_container *c, crpm_region *r, crpm_seg *segs, crpm_ck_stats *st)
{
    uint64_t seg = c->sb.segment_size, bytes = crpm_region_pbytes(r);
    const crpm_track_ops *ops = r->eng->ops;
    for (uint64_t k = 0, off = 0; off < bytes; k++, off += seg) {
        uint64_t len = bytes - off < seg ? bytes - off : seg;
        /* a segment whose length changed is rewritten: the committed copy's
         * last CRC describes its old length */
        uint64_t saved_len = r->saved && k < r->nsegs ? r->count * r->elem_size - off : 0;
        int resized = (saved_len < seg ? saved_len : seg) != len;
        int rc = ops->segment(c, r, &segs[k], off, len, resized, st);
        if (rc)
            return rc;
    }
    return CRPM_SUCCESS;
}

/* Segment tables of the epoch being written: each protected region keeps
 * its committed segments and gets empty ones where it grew (*fresh counts
 * them).  NULL with *rc set when out of memory. */
static crpm_seg **new_seg_tables(crpm_container *c, uint64_t *protected_bytes, uint64_t *fresh, int *rc)
{
    uint64_t seg = c->sb.segment_size;
    crpm_seg **segs = calloc((size_t)c->nregions + 1, sizeof *segs);
    if (!segs) {
        *rc = crpm_error(CRPM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        if (!r->prot.elem_size)
            continue;
        uint64_t bytes = r->prot.count * r->prot.elem_size;
        uint64_t ns = (bytes + seg - 1) / seg;
        *protected_bytes += bytes;
        segs[i] = malloc((ns ? ns : 1) * sizeof(crpm_seg));
        if (!segs[i]) {
            for (int j = 0; j < i; j++)
                free(segs[j]);
            free(segs);
            *rc = crpm_error(CRPM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        for (uint64_t k = 0; k < ns; k++) {
            if (r->saved && k < r->nsegs) {
                segs[i][k] = r->segs[k];
            } else {
                segs[i][k] = (crpm_seg){{CRPM_NO_PHYS, CRPM_NO_PHYS}, 0};
                (*fresh)++;
            }
        }
    }
    return segs;
}

/* Committed: the protected set becomes the saved set (unprotected regions
 * leave it), with the new segment tables. */
static void adopt_saved(crpm_container *c, crpm_seg **segs)
{
    uint64_t seg = c->sb.segment_size;
    int m = 0;
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        free(r->segs);
        r->segs = NULL;
        if (!r->prot.elem_size) {
            free(segs[i]);
            crpm_track_drop(r);
            continue;
        }
        r->saved = 1;
        r->segs = segs[i];
        r->eng->ops->finish(c, r, 1);
        r->type_code = r->prot.type_code;
        r->elem_size = r->prot.elem_size;
        r->count = r->prot.count;
        r->nsegs = (r->count * r->elem_size + seg - 1) / seg;
        c->regions[m++] = *r;
    }
    c->nregions = m;
    free(segs);
    crpm_mark_used(c);
}

int crpm_container_checkpoint(crpm_container *c, uint64_t user_id, crpm_stats_t *out)
{
    if (c->read_only)
        return crpm_error(CRPM_ERR_STATE, "%s is open read-only", c->path);
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
    crpm_seg **segs = new_seg_tables(c, &protected_bytes, &fresh, &rc);
    if (!segs)
        return rc;
    /* one pool growth for all new segments instead of one per segment */
    if (rc == 0 && fresh)
        rc = crpm_phys_reserve(c, fresh);
    crpm_ck_stats st = {0, 0, 0};
    crpm_engine *e = crpm_engine_of(c);
    if (!e && rc == 0)
        rc = crpm_error(CRPM_ERR_NOMEM, "out of memory");
    if (rc == 0) {
        crpm_engine_sync(c);
        if (e->trk)
            crpm_track_pagemap.prepare(c);
        if (e->any_declared)
            crpm_track_declared.prepare(c);
        crpm_track_kind.prepare(c);
    }
    for (int i = 0; i < c->nregions && rc == 0; i++)
        if (c->regions[i].prot.elem_size)
            rc = checkpoint_region(c, &c->regions[i], segs[i], &st);
    if (rc == 0)
        rc = crpm_write_slot(c, c->epoch + 1, user_id, c->nphys, c->regions, c->nregions, segs);
    if (rc == 0) {
        crpm_persist_drain(&c->media);
        if (c->hook)
            c->hook(c->hook_arg, CRPM_HOOK_AFTER_DATA, c->epoch + 1);
        rc = crpm_write_commit(c, c->epoch + 1, 0);
    }
    if (rc) {
        for (int i = 0; i < c->nregions; i++)
            free(segs[i]);
        free(segs);
        crpm_mark_used(c); /* forget allocations of the failed attempt */
        crpm_crc_trust_committed(c); /* the other copies' tables were partly rewritten */
        for (int i = 0; i < c->nregions; i++)
            if (c->regions[i].eng)
                c->regions[i].eng->ops->finish(c, &c->regions[i], 0); /* the other copies were partly rewritten */
        return rc;
    }

    adopt_saved(c, segs);
    c->user_id = user_id;
    c->prev_ok = 1;

    double dt = mono() - t0;
    crpm_stats_t s = {1, protected_bytes, st.compared, st.written, st.blocks, c->media.drains - drains0, dt, 0};
    if (out)
        *out = s;
    if (c->hook)
        c->hook(c->hook_arg, CRPM_HOOK_AFTER_COMMIT, c->epoch);
    return CRPM_SUCCESS;
}

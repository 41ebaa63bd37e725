/* Change tracking by the kernel's page tracker (track.h): a checkpoint
 * compares only the blocks on pages written since the last one (and those
 * where the two copies may differ), in the segment step the declared ops
 * share (tracking.c). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine_int.h"
#include "bits.h"

typedef struct span {
    uintptr_t lo, hi;
} span;

typedef struct span_list {
    span *v;
    size_t n, cap;
    int oom;
} span_list;

/* appends without coalescing (the list is sorted afterwards) */
static void span_push(span_list *l, uintptr_t lo, uintptr_t hi)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        span *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (span){lo, hi};
}

/* appends; spans arrive in increasing order, so touching ones coalesce */
static void span_add(span_list *l, uintptr_t lo, uintptr_t hi)
{
    if (l->n && l->v[l->n - 1].hi >= lo) {
        if (hi > l->v[l->n - 1].hi) l->v[l->n - 1].hi = hi;
        return;
    }
    span_push(l, lo, hi);
}

typedef struct scan_ctx {
    span_list *out;
    uintptr_t base;
} scan_ctx;

static void on_written(void *arg, size_t off, size_t len)
{
    scan_ctx *x = arg;
    span_add(x->out, x->base + off, x->base + off + len);
}

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Adaptive tracking.  A write fault costs about as much as comparing ~2 pages
 * as one stream (the written pages are compared too, and pages read in runs
 * stream about as fast as the whole array), so once more than 1/HOT_SHARE of
 * an array's pages are written in an epoch, comparing it whole is cheaper
 * than tracking it.  Such an array
 * is left out of the scans, so its pages stay writable (no faults) and it is
 * compared whole, for HOT_MIN checkpoints, doubling up to HOT_MAX while it
 * stays dense.  Then it is scanned again: that scan reports every page written
 * during the hot period (a superset of this epoch's, so still safe), and the
 * one after it measures a single epoch again. */
#define HOT_SHARE 3
#define HOT_MIN 4
#define HOT_MAX 64

static int scanned_now(const crpm_region *r)
{
    return r->eng && r->eng->ops == &crpm_track_pagemap && r->eng->hot_left == 0;
}

static const char *pagemap_attach(crpm_container *c, crpm_region *r)
{
    crpm_tracker *t = c->eng->trk;
    const char *why = crpm_tracker_memory_check(t, r->prot.ptr, crpm_region_pbytes(r));
    if (!why && crpm_tracker_add(t, r->prot.ptr, crpm_region_pbytes(r)) != 0)
        why = "the kernel refused to write-protect it";
    crpm_error_clear();
    return why;
}

/* The page ranges to scan: every scanned region's pages, merged. */
static void wanted(crpm_container *c, uintptr_t pg, span_list *want)
{
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        if (!scanned_now(r))
            continue;
        uintptr_t lo = (uintptr_t)r->prot.ptr & ~(pg - 1);
        uintptr_t hi = ((uintptr_t)r->prot.ptr + crpm_region_pbytes(r) + pg - 1) & ~(pg - 1);
        span_push(want, lo, hi);
    }
    if (!want->n)
        return;
    qsort(want->v, want->n, sizeof *want->v, cmp_span);
    size_t m = 0; /* merge overlapping page ranges */
    for (size_t i = 1; i < want->n; i++) {
        if (want->v[i].lo <= want->v[m].hi) {
            if (want->v[i].hi > want->v[m].hi) want->v[m].hi = want->v[i].hi;
        } else {
            want->v[++m] = want->v[i];
        }
    }
    want->n = m + 1;
}

/* Region r's report: the blocks of its pages among got (sorted). */
static void report(crpm_region *r, uint64_t blk, const span_list *got, int all)
{
    crpm_eregion *e = r->eng;
    uint64_t bytes = crpm_region_pbytes(r), words = ((bytes + blk - 1) / blk + 63) / 64;
    uintptr_t lo = (uintptr_t)r->prot.ptr, hi = lo + bytes;
    memset(e->wbits, all ? 0xff : 0, words * 8);
    e->wbytes = all ? bytes : 0;
    size_t a = 0, b = all ? 0 : got->n; /* first span ending after lo */
    while (a < b) {
        size_t mid = (a + b) / 2;
        if (got->v[mid].hi <= lo) a = mid + 1; else b = mid;
    }
    for (size_t k = a; !all && k < got->n && got->v[k].lo < hi; k++) {
        uintptr_t s0 = got->v[k].lo > lo ? got->v[k].lo : lo, s1 = got->v[k].hi < hi ? got->v[k].hi : hi;
        crpm_set_bits(e->wbits, (s0 - lo) / blk, (s1 - lo + blk - 1) / blk, 1);
        e->wbytes += s1 - s0;
    }
}

/* One scan over the union of all scanned arrays: arrays may share pages, and
 * a scan clears the pages it reports, so scanning array by array would let
 * the first array's scan swallow writes to the second.  Fills every scanned
 * region's wbits (blocks written since the last checkpoint). */
static void pagemap_prepare(crpm_container *c)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    span_list want = {0}, got = {0};
    wanted(c, pg, &want);
    for (size_t i = 0; i < want.n && !want.oom; i++) {
        scan_ctx x = {&got, want.v[i].lo};
        if (crpm_tracker_scan(c->eng->trk, (void *)want.v[i].lo, want.v[i].hi - want.v[i].lo, on_written, &x) != 0)
            span_add(&got, want.v[i].lo, want.v[i].hi); /* the tracker's advice: all of it */
    }
    crpm_error(0, "%s", "");
    uint64_t blk = c->sb.block_size;
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        crpm_eregion *e = r->eng;
        if (!e || e->ops != &crpm_track_pagemap)
            continue;
        e->scanned = 0;
        if (!crpm_track_stale(e, crpm_region_pbytes(r), blk) || !scanned_now(r))
            continue; /* no memory for bitmaps, or not scanned now (hot): this region is compared whole */
        e->scanned = 1;
        report(r, blk, &got, e->rescan_all || want.oom || got.oom);
        e->rescan_all = 1; /* until this checkpoint commits, the report is in flight */
    }
    free(want.v);
    free(got.v);
}

/* After a committed checkpoint: the next hot/cold decision for the region. */
static void update_hotness(crpm_eregion *e, uint64_t bytes)
{
    if (!e->scanned) {
        if (e->hot_left > 0 && --e->hot_left == 0)
            e->report_fresh = 0;
        return;
    }
    if (e->report_fresh) {
        if (e->wbytes * HOT_SHARE > bytes) {
            if (e->hot_len < HOT_MIN) e->hot_len = HOT_MIN;
            e->hot_left = e->hot_len;
            e->hot_len = e->hot_len < HOT_MAX ? 2 * e->hot_len : HOT_MAX;
        } else {
            e->hot_len = HOT_MIN;
        }
    }
    e->report_fresh = 1;
}

static void pagemap_finish(crpm_container *c, crpm_region *r, int ok)
{
    (void)c;
    crpm_eregion *e = r->eng;
    /* compared whole or not, the pass kept stale exact; a failed one left the other copies partly rewritten */
    e->stale_valid = ok && e->stale_ready;
    e->stale_ready = 0;
    if (!ok)
        return;
    e->rescan_all = 0;
    update_hotness(e, crpm_region_pbytes(r));
}

const crpm_track_ops crpm_track_pagemap = {"pagemap", pagemap_attach, pagemap_prepare, crpm_track_bits_segment,
                                           pagemap_finish};

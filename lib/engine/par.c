/* The engine's data passes split over workers (util/pool.h).
 *
 * A checkpoint's data pass is cut into tasks: runs of consecutive segments
 * of one region (long enough that two tasks never share a word of the
 * region's block bitmaps, and about a MiB or more), and one task per pack.
 * Workers compare, copy and checksum in any order; nothing they do decides
 * where anything goes, so the container is the same whatever the number of
 * workers and whichever ran what:
 *
 *   1. (serial) every new segment gets its copy, in segment order, and so
 *      does every segment of an array not in host memory whose other copy
 *      does not exist yet (its bytes are read once, through its kind, so
 *      they must be written when read; a copy left unused goes back);
 *   2. (workers) every segment is brought up to date; one of host memory
 *      whose other copy does not exist yet is only judged (changed or not)
 *      and marked;
 *   3. (serial) the unused copies of step 1 go back, then the marked
 *      segments get their copies, in segment order (the pool of physical
 *      segments may grow: the mapping may move, so no worker runs
 *      meanwhile);
 *   4. (workers) the marked segments are written whole, read again from
 *      the arrays.
 *
 * Each worker stores through its own view of the media (persist.h: its own
 * write log for level 2, its own msync list) and its own scratch.  The
 * fences and the commit word stay in checkpoint.c, after every worker has
 * finished.  Recovery's copies are split the same way; the error reported
 * is the first in array order, as the serial copy would have met it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine_int.h"
#include "pool.h"

#define TASK_BYTES (1u << 20)
enum { MARKED = 1, EARLY = 2 };

/* A pass's failure: the failed task first in order, its code and message
 * (the message is per thread: it is copied here), so that the error does not
 * depend on the workers' timing; the other tasks stop early. */
typedef struct par_err {
    atomic_int failed;
    pthread_mutex_t mu;
    uint64_t task;
    int rc;
    char msg[1024];
} par_err;

static void err_init(par_err *e)
{
    atomic_init(&e->failed, 0);
    pthread_mutex_init(&e->mu, NULL);
    e->rc = 0;
}

static void err_note(par_err *e, uint64_t t, int rc)
{
    pthread_mutex_lock(&e->mu);
    if (!e->rc || t < e->task) {
        e->task = t;
        e->rc = rc;
        snprintf(e->msg, sizeof e->msg, "%s", crpm_last_error());
    }
    pthread_mutex_unlock(&e->mu);
    atomic_store(&e->failed, 1);
}

static int err_failed(par_err *e)
{
    return atomic_load_explicit(&e->failed, memory_order_relaxed);
}

/* rc, or the pass's failure as this thread's error; releases the record. */
static int err_end(par_err *e, int rc)
{
    if (rc == 0 && e->rc)
        rc = crpm_error(e->rc, "%s", e->msg);
    pthread_mutex_destroy(&e->mu);
    return rc;
}

typedef struct task {
    int region;                /* region index, or -1: packs [k0, k1) */
    uint64_t k0, k1;           /* its segments (or packs) */
    uint64_t u0;               /* unit of its first segment */
} task;

typedef struct par {
    crpm_container *c;
    crpm_seg_plan *lay;
    const crpm_packing *pk;
    task *t;
    uint64_t nt;
    uint8_t *marked;           /* per unit: MARKED (its other copy is allocated in step 3) or
                                  EARLY | state << 2 (allocated in step 1 although the segment had a
                                  copy, which `state` named) */
    uint64_t nunits;
    int phase;                 /* 2 or 4 */
    par_err err;
} par;

/* Segments per task of a region of `bytes`: a whole number of bitmap words
 * of blocks, about TASK_BYTES, less when that leaves fewer than four tasks
 * per worker.  Any split gives the same container. */
static uint64_t segs_per_task(const crpm_container *c, uint64_t bytes, int width)
{
    uint64_t seg = c->sb.segment_size, bps = seg / c->sb.block_size, g = 1;
    uint64_t want = bytes / (4 * (uint64_t)width);
    if (want > TASK_BYTES)
        want = TASK_BYTES;
    while (g * bps < 64 || g * seg < want)
        g *= 2;
    return g;
}

static int make_tasks(par *x, int width)
{
    crpm_container *c = x->c;
    uint64_t seg = c->sb.segment_size, n = 0, units = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = units = 0;
        for (int i = 0; i < c->nregions; i++) {
            if (!x->lay->segs[i])
                continue;
            uint64_t bytes = crpm_region_pbytes(&c->regions[i]), ns = (bytes + seg - 1) / seg;
            uint64_t g = segs_per_task(c, bytes, width);
            for (uint64_t k = 0; k < ns; k += g, n++)
                if (pass)
                    x->t[n] = (task){i, k, k + g < ns ? k + g : ns, units + k};
            units += ns;
        }
        for (uint32_t k = 0; k < x->lay->npacks; k++, n++)
            if (pass)
                x->t[n] = (task){-1, k, k + 1, units + k};
        units += x->lay->npacks;
        if (!pass && (!(x->t = malloc((n ? n : 1) * sizeof *x->t)) || !(x->marked = calloc(units ? units : 1, 1))))
            return crpm_error(CRPM_ERR_NOMEM, "out of memory for the checkpoint's tasks");
    }
    x->nt = n;
    x->nunits = units;
    return CRPM_SUCCESS;
}

/* The entry of unit u in the new epoch's tables. */
static crpm_seg *unit_seg(par *x, const task *t, uint64_t k)
{
    return t->region < 0 ? &x->lay->packs[k].seg : &x->lay->segs[t->region][k];
}

/* Step 1 for segment k of task t: 1 when it gets a copy now. */
static int needs_early(par *x, const task *t, uint64_t k)
{
    crpm_seg *s = unit_seg(x, t, k);
    if (!s->state)
        return s->phys[0] == CRPM_NO_PHYS;
    return t->region >= 0 && !crpm_array_host(&x->c->regions[t->region].prot) &&
           s->phys[s->state == 1 ? 1 : 0] == CRPM_NO_PHYS;
}

/* Step 1 (deterministic: serial, in order). */
static int alloc_early(par *x)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < x->nt; i++)
        for (uint64_t k = x->t[i].k0; k < x->t[i].k1; k++)
            n += (uint64_t)needs_early(x, &x->t[i], k);
    int rc = n ? crpm_phys_reserve(x->c, n) : CRPM_SUCCESS; /* one growth for all */
    for (uint64_t i = 0; rc == 0 && i < x->nt; i++)
        for (uint64_t k = x->t[i].k0; rc == 0 && k < x->t[i].k1; k++) {
            if (!needs_early(x, &x->t[i], k))
                continue;
            crpm_seg *s = unit_seg(x, &x->t[i], k);
            if (s->state) /* and the state it had, to tell later whether it was written */
                x->marked[x->t[i].u0 + k - x->t[i].k0] = (uint8_t)(EARLY | s->state << 2);
            rc = crpm_phys_alloc(x->c, &s->phys[s->state == 1 ? 1 : 0]);
        }
    return rc;
}

/* Step 3: early copies the segment did not use go back, then the marked
 * segments get their other copy, in order. */
static int alloc_marked(par *x)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < x->nt; i++)
        for (uint64_t k = x->t[i].k0; k < x->t[i].k1; k++) {
            uint8_t m = x->marked[x->t[i].u0 + k - x->t[i].k0];
            crpm_seg *s = unit_seg(x, &x->t[i], k);
            n += m == MARKED;
            if ((m & 3) == EARLY && s->state == (uint32_t)(m >> 2)) {
                int other = s->state == 1 ? 1 : 0; /* not written: still names the committed copy */
                x->c->used[s->phys[other]] = 0;
                s->phys[other] = CRPM_NO_PHYS;
            }
        }
    int rc = n ? crpm_phys_reserve(x->c, n) : CRPM_SUCCESS; /* one growth for all */
    for (uint64_t i = 0; rc == 0 && i < x->nt; i++)
        for (uint64_t k = x->t[i].k0; rc == 0 && k < x->t[i].k1; k++) {
            if (x->marked[x->t[i].u0 + k - x->t[i].k0] != MARKED)
                continue;
            crpm_seg *s = unit_seg(x, &x->t[i], k);
            rc = crpm_phys_alloc(x->c, &s->phys[s->state == 1 ? 1 : 0]);
        }
    return rc;
}

/* One segment of a region in step 2 or 4. */
static int region_seg(par *x, crpm_region *r, uint64_t k, int phase, crpm_ck_stats *st)
{
    crpm_container *c = x->c;
    uint64_t seg = c->sb.segment_size, bytes = crpm_region_pbytes(r), off = k * seg;
    uint64_t len = bytes - off < seg ? bytes - off : seg;
    crpm_seg *s = &x->lay->segs[r - c->regions][k];
    if (phase == 4) {
        int rc = CRPM_SUCCESS;
        const char *src = crpm_region_src(r, off, len, st, &rc);
        return src ? crpm_seg_fill(c, s, src, len, st) : rc;
    }
    /* a segment whose length changed is rewritten: the committed copy's
     * last CRC describes its old length */
    uint64_t saved_len = r->saved && k < r->nsegs ? r->count * r->elem_size - off : 0;
    int resized = (saved_len < seg ? saved_len : seg) != len;
    return r->eng->ops->segment(c, r, s, off, len, resized, st);
}

static void run_task(void *arg, uint64_t ti, int w)
{
    par *x = arg;
    if (err_failed(&x->err))
        return; /* the checkpoint fails anyway */
    crpm_container *c = x->c;
    const task *t = &x->t[ti];
    crpm_ck_stats *st = &c->eng->ws[w].st;
    for (uint64_t k = t->k0; k < t->k1; k++) {
        uint8_t *mark = &x->marked[t->u0 + k - t->k0];
        if (x->phase == 4 && *mark != MARKED)
            continue;
        st->fresh = (*mark & 3) == EARLY;
        int rc;
        if (t->region >= 0) {
            rc = region_seg(x, &c->regions[t->region], k, x->phase, st);
        } else if (x->phase == 4) {
            char *buf = crpm_scratch_buf(st->ws, c->sb.segment_size);
            rc = buf ? crpm_pack_gather(c, x->lay, x->pk, (uint32_t)k, buf) : CRPM_ERR_NOMEM;
            if (rc == 0)
                rc = crpm_seg_fill(c, &x->lay->packs[k].seg, buf, x->lay->packs[k].len, st);
        } else {
            rc = crpm_pack_write_one(c, x->lay, x->pk, (uint32_t)k, st);
        }
        st->fresh = 0;
        if (rc == CRPM_DEFERRED && x->phase == 2 && !*mark) {
            *mark = MARKED;
            continue;
        }
        if (rc) {
            err_note(&x->err, ti, rc < 0 ? rc : crpm_error(CRPM_ERR_STATE, "segment allocated twice"));
            return;
        }
    }
}

/* Each worker's view of the media: its stores, write log and msync list. */
static int views_begin(crpm_container *c, int width)
{
    crpm_engine *e = c->eng;
    for (int w = 0; w < width; w++) {
        crpm_wscratch *ws = &e->ws[w];
        ws->st.ws = ws;
        ws->st.defer = 1;
        ws->st.m = &c->media;
        if (width == 1)
            continue; /* the caller alone: the container's media as it is */
        int rc = crpm_persist_view(&c->media, &ws->view, &ws->log);
        if (rc)
            return rc;
        ws->viewing = 1;
        ws->st.m = &ws->view;
    }
    return CRPM_SUCCESS;
}

/* The backend's part of ending a view (msync of its ranges), one per task so
 * the workers do them in parallel; crpm_persist_view_end, serial, then
 * finds it done and adds the write log. */
static void end_view(void *arg, uint64_t w, int worker)
{
    (void)worker;
    crpm_container *c = arg;
    crpm_wscratch *ws = &c->eng->ws[w];
    if (ws->viewing && c->media.ops->view_end)
        c->media.ops->view_end(&c->media, &ws->view);
}

static void views_end(crpm_container *c, int width)
{
    crpm_engine *e = c->eng;
    if (width > 1)
        crpm_pool_run(e->pool, (uint64_t)width, end_view, c);
    for (int w = 0; w < width; w++) {
        crpm_wscratch *ws = &e->ws[w];
        if (ws->viewing)
            crpm_persist_view_end(&c->media, &ws->view, &ws->log);
        ws->viewing = 0;
    }
}

static int run_phase(par *x, int phase, int width)
{
    crpm_container *c = x->c;
    int rc = views_begin(c, width);
    x->phase = phase;
    if (rc == 0)
        crpm_pool_run(c->eng->pool, x->nt, run_task, x);
    views_end(c, width);
    if (rc == 0 && x->err.rc)
        rc = crpm_error(x->err.rc, "%s", x->err.msg);
    return rc;
}

int crpm_par_write(crpm_container *c, crpm_seg_plan *lay, const crpm_packing *pk, crpm_ck_stats *st)
{
    crpm_engine *e = c->eng;
    int width = crpm_pool_width(e->pool);
    par x = {.c = c, .lay = lay, .pk = pk};
    err_init(&x.err);
    int rc = crpm_engine_scratch(e, width);
    if (rc == 0)
        rc = make_tasks(&x, width);
    for (int w = 0; rc == 0 && w < width; w++)
        e->ws[w].st = (crpm_ck_stats){0, 0, 0, NULL, NULL, 1, 0};
    if (rc == 0)
        rc = alloc_early(&x);
    if (rc == 0)
        rc = run_phase(&x, 2, width);
    if (rc == 0)
        rc = alloc_marked(&x);
    if (rc == 0)
        rc = run_phase(&x, 4, width);
    for (int w = 0; w < width && w < e->nws; w++) {
        st->compared += e->ws[w].st.compared;
        st->written += e->ws[w].st.written;
        st->blocks += e->ws[w].st.blocks;
    }
    free(x.t);
    free(x.marked);
    return err_end(&x.err, rc);
}

/* ---- recovery ------------------------------------------------------------------ */

typedef struct rpar {
    crpm_container *c;
    task *t;
    uint64_t nt;
    par_err err;
} rpar;

static void recover_task(void *arg, uint64_t ti, int w)
{
    rpar *x = arg;
    if (err_failed(&x->err))
        return;
    crpm_container *c = x->c;
    const crpm_region *r = &c->regions[x->t[ti].region];
    char *bounce = NULL;
    int rc = CRPM_SUCCESS;
    if (!crpm_array_host(&r->prot) && crpm_array_bytes(&r->prot) && r->pack == CRPM_NO_PACK &&
        !(bounce = crpm_scratch_buf(&c->eng->ws[w], c->sb.segment_size)))
        rc = CRPM_ERR_NOMEM;
    if (rc == 0)
        rc = crpm_copy_saved_part(c, r, &r->prot, x->t[ti].k0, x->t[ti].k1, bounce);
    if (rc)
        err_note(&x->err, ti, rc);
}

int crpm_par_recover(crpm_container *c)
{
    crpm_engine *e = crpm_engine_of(c);
    if (!e)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    uint64_t seg = c->sb.segment_size, n = 0;
    int width = crpm_pool_width(e->pool);
    int rc = crpm_engine_scratch(e, width);
    rpar x = {.c = c};
    for (int pass = 0; rc == 0 && pass < 2; pass++) {
        n = 0;
        for (int i = 0; i < c->nregions; i++) {
            const crpm_region *r = &c->regions[i];
            if (!r->saved)
                continue;
            uint64_t ns = r->pack != CRPM_NO_PACK ? 1 : r->nsegs, g = 1;
            uint64_t want = r->count * r->elem_size / (4 * (uint64_t)width);
            while (g * seg < (want < TASK_BYTES ? want : TASK_BYTES))
                g *= 2;
            for (uint64_t k = 0; k < ns; k += g, n++)
                if (pass)
                    x.t[n] = (task){i, k, k + g < ns ? k + g : ns, 0};
            if (pass)
                crpm_copy_saved_begin(c, r, &r->prot);
        }
        if (!pass && !(x.t = malloc((n ? n : 1) * sizeof *x.t)))
            rc = crpm_error(CRPM_ERR_NOMEM, "out of memory for the recovery's tasks");
    }
    x.nt = n;
    err_init(&x.err);
    if (rc == 0)
        crpm_pool_run(e->pool, x.nt, recover_task, &x);
    rc = err_end(&x.err, rc);
    free(x.t);
    return rc;
}

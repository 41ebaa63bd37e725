/* Checkpoint engine: differential checkpoint, commit and recovery.
 *
 * Each segment of a protected array has up to two NVM copies; the committed
 * epoch names the one that holds its state.  A checkpoint compares the DRAM
 * working copy with the committed copy; an unchanged segment keeps it.  A
 * changed segment is written into the OTHER copy, block by block where that
 * copy differs, so the committed copy is never touched however long the
 * segment stayed clean.  Data and the next metadata slot are persisted with
 * one fence, then the commit word flips the epoch with a second one. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "container.h"

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static crpm_region *find_region(crpm_container *c, int32_t id)
{
    for (int i = 0; i < c->nregions; i++)
        if (c->regions[i].id == id)
            return &c->regions[i];
    return NULL;
}

int crpm_container_protect(crpm_container *c, int32_t id, void *ptr, uint64_t count, int32_t type_code,
                           uint64_t elem_size)
{
    if (!c)
        return crpm_error(CRPM_ERR_STATE, "no container");
    if (elem_size == 0)
        return crpm_error(CRPM_ERR_INVAL, "protect id %d: element size is 0", id);
    if (count > (UINT64_MAX / 2) / elem_size)
        return crpm_error(CRPM_ERR_RANGE, "protect id %d: %llu elements of %llu bytes is too large", id,
                          (unsigned long long)count, (unsigned long long)elem_size);
    if (!ptr && count)
        return crpm_error(CRPM_ERR_INVAL, "protect id %d: NULL pointer for %llu elements", id,
                          (unsigned long long)count);
    crpm_region *r = find_region(c, id);
    if (!r) {
        if (c->nregions == c->cap_regions) {
            int cap = c->cap_regions ? 2 * c->cap_regions : 8;
            crpm_region *n = realloc(c->regions, (size_t)cap * sizeof *n);
            if (!n)
                return crpm_error(CRPM_ERR_NOMEM, "out of memory");
            c->regions = n;
            c->cap_regions = cap;
        }
        r = &c->regions[c->nregions++];
        memset(r, 0, sizeof *r);
        r->id = id;
    }
    r->ptr = ptr;
    r->p_count = count;
    r->p_elem_size = elem_size;
    r->p_type_code = type_code;
    return CRPM_SUCCESS;
}

int crpm_container_unprotect(crpm_container *c, int32_t id)
{
    crpm_region *r = find_region(c, id);
    if (!r || !r->p_elem_size)
        return crpm_error(CRPM_ERR_INVAL, "unprotect: id %d is not protected", id);
    r->ptr = NULL;
    r->p_count = r->p_elem_size = 0;
    return CRPM_SUCCESS;
}

/* ---- physical segment allocation ---------------------------------------- */

static int alloc_phys(crpm_container *c, uint32_t *out)
{
    for (;;) {
        for (uint64_t i = 0; i < c->nphys; i++) {
            uint64_t k = (c->hint + i) % c->nphys;
            if (!c->used[k]) {
                c->used[k] = 1;
                c->hint = k + 1;
                *out = (uint32_t)k;
                return CRPM_SUCCESS;
            }
        }
        int rc = crpm_grow_pool(c, c->nphys + 1);
        if (rc)
            return rc;
    }
}

static int reserve_phys(crpm_container *c, uint64_t n)
{
    uint64_t free_n = 0;
    for (uint64_t k = 0; k < c->nphys; k++)
        free_n += !c->used[k];
    return free_n >= n ? CRPM_SUCCESS : crpm_grow_pool(c, c->nphys + (n - free_n));
}

/* ---- block comparison ----------------------------------------------------- */

/* Whole-word XOR/OR over a block: no early exit inside the block, which lets the
 * compiler vectorise it; a block is one media write unit anyway. */
static inline int block_differs(const char *a, const char *b, size_t len)
{
    if (len & 7)
        return memcmp(a, b, len) != 0;
    uint64_t acc = 0;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        acc |= x ^ y;
    }
    return acc != 0;
}

typedef struct ck_stats {
    uint64_t compared, written, blocks;
} ck_stats;

static void write_run(crpm_container *c, char *dst, const char *src, size_t len, uint64_t blk, ck_stats *st)
{
    crpm_persist_copy(&c->media, dst, src, len);
    st->written += len;
    st->blocks += (len + blk - 1) / blk;
}

/* Brings the copy that does not hold the committed state up to date. */
static int write_segment(crpm_container *c, crpm_seg *s, const char *src, uint64_t len, ck_stats *st)
{
    uint64_t blk = c->sb.block_size;
    int other = s->state == 1 ? 1 : 0;   /* state 0 (new) -> copy 0 */
    if (s->phys[other] == CRPM_NO_PHYS) {
        uint32_t p;
        int rc = alloc_phys(c, &p); /* may remap: addresses only after this */
        if (rc)
            return rc;
        s->phys[other] = p;
        if ((rc = crpm_reserve_seg(c, p, len)) != 0)
            return rc;
        write_run(c, crpm_seg_addr(c, p), src, len, blk, st);
        s->state = (uint32_t)other + 1;
        return CRPM_SUCCESS;
    }
    int rc = crpm_reserve_seg(c, s->phys[other], len); /* the region may have grown */
    if (rc)
        return rc;
    char *dst = crpm_seg_addr(c, s->phys[other]);
    uint64_t run = 0, start = 0;
    for (uint64_t off = 0; off < len; off += blk) {
        uint64_t n = len - off < blk ? len - off : blk;
        if (block_differs(src + off, dst + off, n)) {
            if (!run) start = off;
            run += n;
        } else if (run) {
            write_run(c, dst + start, src + start, run, blk, st);
            run = 0;
        }
    }
    if (run)
        write_run(c, dst + start, src + start, run, blk, st);
    st->compared += len;
    s->state = (uint32_t)other + 1;
    return CRPM_SUCCESS;
}

static int checkpoint_region(crpm_container *c, crpm_region *r, crpm_seg *segs, ck_stats *st)
{
    uint64_t seg = c->sb.segment_size, bytes = r->p_count * r->p_elem_size;
    const char *base = r->ptr;
    for (uint64_t k = 0, off = 0; off < bytes; k++, off += seg) {
        uint64_t len = bytes - off < seg ? bytes - off : seg;
        crpm_seg *s = &segs[k];
        if (s->state) {
            const char *cur = crpm_seg_addr(c, s->phys[s->state - 1]);
            st->compared += len;
            if (memcmp(base + off, cur, len) == 0)
                continue; /* unchanged: keeps its committed copy */
        }
        int rc = write_segment(c, s, base + off, len, st);
        if (rc)
            return rc;
    }
    return CRPM_SUCCESS;
}

int crpm_container_checkpoint(crpm_container *c, uint64_t user_id, crpm_stats_t *out)
{
    double t0 = mono();
    uint64_t drains0 = c->media.drains;
    uint64_t seg = c->sb.segment_size, protected_bytes = 0;
    int rc = CRPM_SUCCESS;
    if (c->hook)
        c->hook(c->hook_arg, CRPM_HOOK_BEFORE_DATA, c->epoch + 1);
    /* From here on the copies epoch-1 relies on may be overwritten. */
    if (!c->in_progress && (rc = crpm_write_commit(c, c->epoch, 1)) != 0)
        return rc;
    c->prev_ok = 0;

    crpm_seg **segs = calloc((size_t)c->nregions + 1, sizeof *segs);
    if (!segs)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    uint64_t fresh = 0;
    for (int i = 0; i < c->nregions && rc == 0; i++) {
        crpm_region *r = &c->regions[i];
        if (!r->p_elem_size)
            continue;
        uint64_t bytes = r->p_count * r->p_elem_size;
        uint64_t ns = (bytes + seg - 1) / seg;
        protected_bytes += bytes;
        segs[i] = malloc((ns ? ns : 1) * sizeof(crpm_seg));
        if (!segs[i]) {
            rc = crpm_error(CRPM_ERR_NOMEM, "out of memory");
            break;
        }
        for (uint64_t k = 0; k < ns; k++) {
            if (r->saved && k < r->nsegs) {
                segs[i][k] = r->segs[k];
            } else {
                segs[i][k] = (crpm_seg){{CRPM_NO_PHYS, CRPM_NO_PHYS}, 0};
                fresh++;
            }
        }
    }
    /* one pool growth for all new segments instead of one per segment */
    if (rc == 0 && fresh)
        rc = reserve_phys(c, fresh);
    ck_stats st = {0, 0, 0};
    for (int i = 0; i < c->nregions && rc == 0; i++)
        if (c->regions[i].p_elem_size)
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
        return rc;
    }

    /* committed: the protected set becomes the saved set */
    int m = 0;
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        free(r->segs);
        r->segs = NULL;
        if (!r->p_elem_size) {
            free(segs[i]);
            continue;
        }
        r->saved = 1;
        r->segs = segs[i];
        r->type_code = r->p_type_code;
        r->elem_size = r->p_elem_size;
        r->count = r->p_count;
        r->nsegs = (r->count * r->elem_size + seg - 1) / seg;
        c->regions[m++] = *r;
    }
    c->nregions = m;
    free(segs);
    crpm_mark_used(c);
    c->user_id = user_id;
    c->prev_ok = 1;

    double dt = mono() - t0;
    crpm_stats_t s = {1, protected_bytes, st.compared, st.written, st.blocks, c->media.drains - drains0, dt};
    if (out)
        *out = s;
    if (c->hook)
        c->hook(c->hook_arg, CRPM_HOOK_AFTER_COMMIT, c->epoch);
    return CRPM_SUCCESS;
}

int crpm_container_recover(crpm_container *c)
{
    if (c->epoch == 0)
        return crpm_error(CRPM_ERR_NOCKPT, "%s: no committed checkpoint", c->path);
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        if (r->saved && !r->p_elem_size)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d is in the checkpoint but not protected", r->id);
        if (!r->saved && r->p_elem_size)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d is protected but not in the checkpoint", r->id);
        if (r->saved && (r->p_elem_size != r->elem_size || r->p_count != r->count))
            return crpm_error(CRPM_ERR_MISMATCH,
                              "array id %d: checkpoint holds %llu elements of %llu bytes, protected %llu of %llu",
                              r->id, (unsigned long long)r->count, (unsigned long long)r->elem_size,
                              (unsigned long long)r->p_count, (unsigned long long)r->p_elem_size);
        if (r->saved && r->p_type_code != r->type_code)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d: checkpoint type %d, protected type %d", r->id,
                              r->type_code, r->p_type_code);
    }
    for (int i = 0; i < c->nregions; i++) {
        int rc = crpm_copy_saved(c, &c->regions[i], c->regions[i].ptr);
        if (rc)
            return rc;
    }
    return CRPM_SUCCESS;
}

/* Bringing the copy of a segment that does not hold the committed state up
 * to date (see checkpoint.c for the protocol).  The committed copy is never
 * written: a changed segment goes into the other copy, block by block where
 * that copy differs, with the CRCs of the chunks it wrote. */
#include <stdlib.h>
#include <string.h>
#include "engine_int.h"
#include "bits.h"

/* ---- physical segment allocation ---------------------------------------- */

int crpm_phys_alloc(crpm_container *c, uint32_t *out)
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

int crpm_phys_reserve(crpm_container *c, uint64_t n)
{
    uint64_t free_n = 0;
    for (uint64_t k = 0; k < c->nphys; k++)
        free_n += !c->used[k];
    return free_n >= n ? CRPM_SUCCESS : crpm_grow_pool(c, c->nphys + (n - free_n));
}

/* ---- block comparison ----------------------------------------------------- */

/* Whole-word XOR/OR over a block: no early exit inside the block and no call,
 * measured faster than memcmp on 256-B blocks. */
static inline uint64_t load64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline int block_differs(const char *a, const char *b, size_t len)
{
    if (len & 31)
        return memcmp(a, b, len) != 0;
    uint64_t acc0 = 0, acc1 = 0;
    for (size_t i = 0; i < len; i += 32) { /* unrolled: less loop overhead per byte */
        acc0 |= (load64(a + i) ^ load64(b + i)) | (load64(a + i + 16) ^ load64(b + i + 16));
        acc1 |= (load64(a + i + 8) ^ load64(b + i + 8)) | (load64(a + i + 24) ^ load64(b + i + 24));
    }
    return (acc0 | acc1) != 0;
}

/* The copy of a segment being brought up to date, and its CRC table: the
 * CRC of each chunk that gets written is computed from the source right after
 * the chunk was read (still in L1); when the table is not known to describe
 * this copy at this length (crc_len), every chunk's CRC is taken instead. */
typedef struct seg_write {
    crpm_container *c;
    crpm_media *m;           /* stores go here (the worker's view) */
    uint32_t phys;
    char *dst;
    const char *src;
    uint64_t len;
    uint64_t first_chunk, next_chunk; /* CRCs stored in [first_chunk, next_chunk) */
    int whole_table;
} seg_write;

static seg_write seg_write_start(crpm_container *c, crpm_media *m, uint32_t phys, const char *src, uint64_t len)
{
    seg_write x = {c, m, phys, crpm_seg_addr(c, phys), src, len, UINT64_MAX, 0, c->crc_len[phys] != len};
    return x;
}

/* Stores the CRCs of chunks [c0, c1) (those not stored yet; chunks arrive in
 * increasing order, a chunk shared by two runs once). */
static inline void seg_crc(seg_write *x, uint64_t c0, uint64_t c1)
{
    if (c0 < x->next_chunk)
        c0 = x->next_chunk;
    if (c0 >= c1)
        return;
    crpm_crc_compute(x->c, x->phys, x->src, x->len, c0, c1);
    if (x->first_chunk == UINT64_MAX)
        x->first_chunk = c0;
    x->next_chunk = c1;
}

/* Stores the CRCs the copy still lacks; the copy then equals src over len bytes. */
static void seg_write_end(seg_write *x)
{
    crpm_container *c = x->c;
    if (c->sb.crc_chunk && x->whole_table) {
        x->first_chunk = 0;
        x->next_chunk = (x->len + c->sb.crc_chunk - 1) / c->sb.crc_chunk;
        crpm_crc_compute(c, x->phys, x->src, x->len, 0, x->next_chunk);
    }
    if (x->first_chunk < x->next_chunk)
        crpm_crc_flush(c, x->m, x->phys, x->first_chunk, x->next_chunk);
    c->crc_len[x->phys] = (uint32_t)x->len;
}

/* Copies bytes [o, o + len) of the segment (block aligned). */
static inline void copy_run(seg_write *x, uint64_t o, uint64_t len, uint64_t blk, crpm_ck_stats *st)
{
    crpm_persist_copy(x->m, x->dst + o, x->src + o, len);
    st->written += len;
    st->blocks += (len + blk - 1) / blk;
}

/* Writes bytes [o, o + len) of the segment and the CRCs of their chunks. */
static void write_run(seg_write *x, uint64_t o, uint64_t len, uint64_t blk, crpm_ck_stats *st)
{
    copy_run(x, o, len, blk, st);
    uint64_t ch = x->c->sb.crc_chunk;
    if (ch && !x->whole_table)
        seg_crc(x, o / ch, (o + len + ch - 1) / ch);
}

/* Differing runs are written at most this long, while the source just compared
 * is still in L1/L2: 100 % dirty checkpoints measured ~30% faster than with
 * segment-long runs. */
#define RUN_CAP (4u << 10)

/* Brings the copy that does not hold the committed state up to date,
 * comparing every block. */
int crpm_seg_fill(crpm_container *c, crpm_seg *s, const char *src, uint64_t len, crpm_ck_stats *st)
{
    uint64_t blk = c->sb.block_size;
    int other = s->state == 1 ? 1 : 0;
    uint32_t p = s->phys[other];
    int rc;
    if ((rc = crpm_reserve_seg(c, p, len)) != 0 || (rc = crpm_persist_fill(st->m, crpm_seg_addr(c, p), src, len)) != 0)
        return rc;
    st->written += len;
    st->blocks += (len + blk - 1) / blk;
    c->crc_len[p] = 0;
    seg_write x = seg_write_start(c, st->m, p, src, len);
    seg_write_end(&x);
    s->state = (uint32_t)other + 1;
    return CRPM_SUCCESS;
}

int crpm_seg_write(crpm_container *c, crpm_seg *s, const char *src, uint64_t len, crpm_ck_stats *st)
{
    uint64_t blk = c->sb.block_size;
    int other = s->state == 1 ? 1 : 0;   /* state 0 (new) -> copy 0 */
    /* no copy to compare with: the other copy is missing, or new (state 0,
     * or st->fresh: allocated for this segment before the data pass) */
    if (s->phys[other] == CRPM_NO_PHYS || !s->state || st->fresh) {
        if (s->phys[other] == CRPM_NO_PHYS) {
            if (st->defer)
                return CRPM_DEFERRED; /* allocated after the pass, in segment order (par.c) */
            uint32_t p;
            int rc = crpm_phys_alloc(c, &p); /* may remap: addresses only after this */
            if (rc)
                return rc;
            s->phys[other] = p;
        }
        return crpm_seg_fill(c, s, src, len, st);
    }
    int rc = crpm_reserve_seg(c, s->phys[other], len); /* the region may have grown */
    if (rc)
        return rc;
    seg_write x = seg_write_start(c, st->m, s->phys[other], src, len);
    const char *dst = x.dst;
    /* Each chunk's CRC is taken as soon as the compare has read it, while it
     * is in L1: the chunks that differ, or all of them when the whole table
     * is to be rewritten (a chunk equal to the copy describes it as well). */
    uint64_t ch = c->sb.crc_chunk, bpc = ch ? ch / blk : 1; /* powers of two */
    int all = ch && x.whole_table, chunk_dirty = 0;
    x.whole_table = 0;
    uint64_t run = 0, start = 0, nblocks = (len + blk - 1) / blk;
    for (uint64_t i = 0; i < nblocks; i++) {
        uint64_t off = i * blk, n = len - off < blk ? len - off : blk;
        st->compared += n;
        int d = block_differs(src + off, dst + off, n);
        if (d) {
            if (!run) start = off;
            run += n;
            chunk_dirty = 1;
        }
        if (run && (!d || run >= RUN_CAP)) {
            copy_run(&x, start, run, blk, st);
            run = 0;
        }
        if (ch && ((i & (bpc - 1)) == bpc - 1 || i + 1 == nblocks)) {
            if (chunk_dirty || all)
                seg_crc(&x, i / bpc, i / bpc + 1);
            chunk_dirty = 0;
        }
    }
    if (run)
        copy_run(&x, start, run, blk, st);
    seg_write_end(&x);
    s->state = (uint32_t)other + 1;
    return CRPM_SUCCESS;
}

/* Compares block i of a segment of len bytes with a copy of it, counting it. */
static inline int cmp_block(const char *src, const char *copy, uint64_t i, uint64_t blk, uint64_t len, crpm_ck_stats *st)
{
    uint64_t o = i * blk, n = len - o < blk ? len - o : blk;
    st->compared += n;
    return block_differs(src + o, copy + o, n);
}

/* Written pages are scattered, and the hardware prefetcher stops at every page
 * boundary: a second walk runs this many blocks ahead of the comparison and
 * prefetches both copies (~10% faster at 1% random blocks). */
#define PREFETCH_BLOCKS 16

static inline void prefetch_next(crpm_bitwalk *ahead, const char *x, const char *y, uint64_t blk, uint64_t len)
{
    uint64_t b = crpm_walk_next(ahead);
    if (b == UINT64_MAX)
        return;
    uint64_t o = (b - ahead->b0) * blk, n = len - o < blk ? len - o : blk;
    for (uint64_t i = 0; i < n; i += 64) {
        __builtin_prefetch(x + o + i, 0);
        __builtin_prefetch(y + o + i, 0);
    }
}

static inline crpm_bitwalk prefetch_start(crpm_bitwalk it, const char *x, const char *y, uint64_t blk, uint64_t len)
{
    for (int i = 0; i < PREFETCH_BLOCKS; i++)
        prefetch_next(&it, x, y, blk, len);
    return it;
}

/* A tracked segment with a committed copy.  W (wbits) holds the blocks on
 * pages written since the last checkpoint, S (stale) the blocks where the two
 * copies may differ; everywhere else data, committed copy and other copy are
 * equal.  Phase 1 compares W\S with the committed copy (which equals the other
 * copy there) and drops the equal blocks from W, leaving D u (W n S): exactly
 * where the committed copy may differ from the data.  Phase 2 brings the other
 * copy up to date: blocks of D\S are known to differ and are written without
 * another read, blocks of S are compared first.  After the flip the copies
 * differ at most on the blocks left in W, so that becomes S.  Each written
 * block is thus read once, and S stays as sparse as the changes. */
int crpm_seg_tracked(crpm_container *c, crpm_eregion *e, crpm_seg *s, const char *src, uint64_t len, uint64_t b0,
                     uint64_t b1, crpm_ck_stats *st)
{
    uint64_t blk = c->sb.block_size, *W = e->wbits, *S = e->stale;
    const char *cur = crpm_seg_addr(c, s->phys[s->state - 1]);
    int other = s->state == 1 ? 1 : 0;
    if (s->phys[other] == CRPM_NO_PHYS || st->fresh) {
        /* one copy: a second one only if a written block really changed */
        int changed = 0;
        for (uint64_t b = crpm_next_set(W, b0, b1); b < b1 && !changed; b = crpm_next_set(W, b + 1, b1))
            changed = cmp_block(src, cur, b - b0, blk, len, st);
        if (!changed)
            return CRPM_SUCCESS;
        int rc = crpm_seg_write(c, s, src, len, st);
        /* the copy left behind lacks at most what was written */
        crpm_merge_bits(S, W, b0, b1, 1);
        return rc;
    }
    uint64_t w0 = b0 / 64, w1 = (b1 - 1) / 64, any = 0, changed = 0, touched = 0, runs = 0, carry = 0;
    if (crpm_next_set(W, b0, b1) == b1)
        return CRPM_SUCCESS; /* no page written: equals its committed copy, however stale the other */
    for (uint64_t w = w0; w <= w1; w++) {
        uint64_t v = (W[w] | S[w]) & crpm_word_mask(w, b0, b1);
        touched += (uint64_t)__builtin_popcountll(v);
        runs += (uint64_t)__builtin_popcountll(v & ~((v << 1) | carry));
        carry = v >> 63;
    }
    if (touched + 2 * runs > b1 - b0) {
        /* Dense: each hop to another run of blocks costs about as much as
         * reading two more blocks in one stream (a lone block reads ~3x
         * slower), so compare the whole segment, in one pass.  Written, the
         * other copy equals the data, which differs from the committed copy
         * only on written pages. */
        uint32_t state = s->state;
        int rc = crpm_seg_whole(c, S, s, src, len, 0, b0, st);
        if (s->state != state)
            for (uint64_t w = w0; w <= w1; w++)
                S[w] &= W[w] | ~crpm_word_mask(w, b0, b1);
        return rc;
    }
    crpm_bitwalk it = crpm_walk_start(W, S, CRPM_WALK_ANDNOT, b0, b1), ahead = prefetch_start(it, src, cur, blk, len);
    for (uint64_t b = crpm_walk_next(&it); b != UINT64_MAX; b = crpm_walk_next(&it)) { /* phase 1 */
        prefetch_next(&ahead, src, cur, blk, len);
        if (!cmp_block(src, cur, b - b0, blk, len, st))
            W[b / 64] &= ~(1ull << (b % 64));
    }
    for (uint64_t w = w0; w <= w1; w++) {
        uint64_t k = crpm_word_mask(w, b0, b1);
        any |= W[w] & k;
        changed |= W[w] & ~S[w] & k;
    }
    /* Without a changed block outside S, the written blocks in S decide. */
    for (uint64_t w = w0; w <= w1 && any && !changed; w++)
        for (uint64_t x = W[w] & S[w] & crpm_word_mask(w, b0, b1); x && !changed; x &= x - 1)
            changed = cmp_block(src, cur, w * 64 + (uint64_t)__builtin_ctzll(x) - b0, blk, len, st);
    if (!changed)
        return CRPM_SUCCESS; /* no written block changed: keeps its committed copy */
    int rc = crpm_reserve_seg(c, s->phys[other], len); /* the region may have grown */
    if (rc)
        return rc;
    seg_write x = seg_write_start(c, st->m, s->phys[other], src, len);
    const char *dst = x.dst;
    uint64_t rs = 0, re = 0; /* pending run of differing bytes [rs, re) */
    it = crpm_walk_start(W, S, CRPM_WALK_OR, b0, b1);
    ahead = prefetch_start(it, src, dst, blk, len);
    for (uint64_t b = crpm_walk_next(&it); b != UINT64_MAX; b = crpm_walk_next(&it)) { /* phase 2 */
        uint64_t o = (b - b0) * blk, n = len - o < blk ? len - o : blk;
        prefetch_next(&ahead, src, dst, blk, len);
        if ((S[b / 64] >> (b % 64) & 1) && !cmp_block(src, dst, b - b0, blk, len, st))
            continue; /* blocks outside S differ: they are in D */
        if (re > rs && o != re) {
            write_run(&x, rs, re - rs, blk, st);
            re = rs;
        }
        if (re == rs)
            rs = o;
        re = o + n;
    }
    if (re > rs)
        write_run(&x, rs, re - rs, blk, st);
    seg_write_end(&x);
    s->state = (uint32_t)other + 1;
    crpm_merge_bits(S, W, b0, b1, 1);
    return CRPM_SUCCESS;
}

/* The first block of [i, n) where src differs from copy (n: none), compared
 * SPAN_BLOCKS at a time with memcmp, which streams faster than block_differs
 * where nothing differs. */
#define SPAN_BLOCKS 64

static uint64_t first_differing(const char *src, const char *copy, uint64_t i, uint64_t n, uint64_t blk,
                                uint64_t len, crpm_ck_stats *st)
{
    while (i < n) {
        uint64_t j = i + SPAN_BLOCKS < n ? i + SPAN_BLOCKS : n, o = i * blk, e = j * blk < len ? j * blk : len;
        if (memcmp(src + o, copy + o, e - o) != 0)
            break;
        st->compared += e - o;
        i = j;
    }
    for (; i < n; i++)
        if (cmp_block(src, copy, i, blk, len, st))
            return i;
    return n;
}

/* Writes the pending run [*rs, *re) when block o (n bytes) does not extend
 * it, or it reached RUN_CAP, then adds the block (o == UINT64_MAX: flush). */
static inline void run_add(seg_write *x, uint64_t *rs, uint64_t *re, uint64_t o, uint64_t n, uint64_t blk,
                           crpm_ck_stats *st)
{
    if (*re > *rs && (o != *re || *re - *rs >= RUN_CAP)) {
        write_run(x, *rs, *re - *rs, blk, st);
        *re = *rs;
    }
    if (o == UINT64_MAX)
        return;
    if (*re == *rs)
        *rs = o;
    *re = o + n;
}

/* A segment with both copies compared whole with its committed copy, in one
 * pass (no page report, or one too dense to hop through).  S (stale) holds
 * the blocks where the two copies may differ; elsewhere the other copy equals
 * the committed one.  Nothing is written before the first block that differs
 * from the committed copy: without one the segment keeps it.  From there a
 * block outside S is compared with the committed copy only, and written when
 * it differs (it differs from the other copy as well); a block of S is
 * compared with the other copy first and written when it differs (then kept
 * in S: it may differ from the committed copy too), and only when it equals
 * the other copy is it compared with the committed copy to learn whether it
 * stays in S.  So a byte is read once from the data and once from one copy,
 * except in blocks of S that equal the other copy (mostly blocks written two
 * checkpoints back and unchanged since: read from both copies once, then
 * dropped from S).  After the flip the copies differ at most on S. */
static int seg_whole(crpm_container *c, uint64_t *S, crpm_seg *s, const char *src, uint64_t len, uint64_t b0,
                     crpm_ck_stats *st)
{
    uint64_t blk = c->sb.block_size, n = (len + blk - 1) / blk;
    int other = s->state == 1 ? 1 : 0;
    const char *cur = crpm_seg_addr(c, s->phys[s->state - 1]);
    uint64_t f = first_differing(src, cur, 0, n, blk, len, st);
    if (f == n)
        return CRPM_SUCCESS; /* unchanged: keeps its committed copy */
    int rc = crpm_reserve_seg(c, s->phys[other], len); /* the region may have grown */
    if (rc)
        return rc;
    seg_write x = seg_write_start(c, st->m, s->phys[other], src, len);
    uint64_t rs = 0, re = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t b = b0 + i, bit = 1ull << (b % 64), o = i * blk, nb = len - o < blk ? len - o : blk, *w = &S[b / 64];
        uint64_t p = b + PREFETCH_BLOCKS;
        if (p < b0 + n && (S[p / 64] >> (p % 64) & 1)) /* S is scattered: the other copy is read out of stream */
            for (uint64_t k = 0; k < blk; k += 64)
                __builtin_prefetch(x.dst + (p - b0) * blk + k, 0);
        if (!(*w & bit)) {
            if (i < f) { /* equal to the committed copy, and so to the other */
                i = crpm_next_set(S, b, b0 + f) - b0 - 1;
                continue;
            }
            if (i > f && !cmp_block(src, cur, i, blk, len, st))
                continue;
            *w |= bit;
        } else if (cmp_block(src, x.dst, i, blk, len, st)) {
            if (i < f)
                *w &= ~bit; /* equal to the committed copy, as the other will be */
        } else {
            if (i < f || (i > f && !cmp_block(src, cur, i, blk, len, st)))
                *w &= ~bit; /* the two copies agree here now */
            continue;
        }
        run_add(&x, &rs, &re, o, nb, blk, st);
    }
    run_add(&x, &rs, &re, UINT64_MAX, 0, blk, st);
    seg_write_end(&x);
    s->state = (uint32_t)other + 1;
    return CRPM_SUCCESS;
}

int crpm_seg_whole(crpm_container *c, uint64_t *S, crpm_seg *s, const char *src, uint64_t len, int resized,
                   uint64_t b0, crpm_ck_stats *st)
{
    uint64_t b1 = b0 + (len + c->sb.block_size - 1) / c->sb.block_size;
    int other = s->state == 1 ? 1 : 0;
    if (S && s->state && !resized && s->phys[other] != CRPM_NO_PHYS && !st->fresh)
        return seg_whole(c, S, s, src, len, b0, st);
    uint32_t state = s->state;
    int rc = crpm_seg_compare(c, s, src, len, resized, st);
    if (S && (s->state != state || rc == CRPM_DEFERRED))
        crpm_set_bits(S, b0, b1, 1); /* written whole: where the copies differ is not known */
    return rc;
}

int crpm_seg_compare(crpm_container *c, crpm_seg *s, const char *src, uint64_t len, int resized, crpm_ck_stats *st)
{
    if (s->state && !resized) {
        const char *cur = crpm_seg_addr(c, s->phys[s->state - 1]);
        st->compared += len;
        if (memcmp(src, cur, len) == 0)
            return CRPM_SUCCESS; /* unchanged: keeps its committed copy */
    }
    return crpm_seg_write(c, s, src, len, st);
}

/* Stores block o (n bytes) of a staged segment from src when the copy differs
 * there (known: it does); the CRC of each chunk is taken from the copy itself
 * once the walk has left the chunk, since its blocks come from two sources. */
static void staged_block(seg_write *x, const char *src, uint64_t o, uint64_t n, int known, uint64_t blk,
                         uint64_t *chunk, crpm_ck_stats *st)
{
    if (!known) {
        st->compared += n;
        if (!block_differs(src, x->dst + o, n))
            return;
    }
    crpm_persist_copy(x->m, x->dst + o, src, n);
    st->written += n;
    st->blocks += (n + blk - 1) / blk;
    uint64_t ch = x->c->sb.crc_chunk;
    if (!ch || x->whole_table)
        return;
    if (*chunk != UINT64_MAX && *chunk != o / ch)
        seg_crc(x, *chunk, *chunk + 1);
    *chunk = o / ch;
}

/* A segment whose memory kind staged its changed blocks.  W (wbits) holds
 * them: everywhere else the data equals the committed copy.  S (stale) holds
 * the blocks where the two copies may differ.  The other copy must become the
 * committed copy with W's blocks replaced: blocks of W\S differ from it and
 * are written from the stage without a read, blocks of W n S are compared with
 * it first, and blocks of S\W are brought to the committed copy's bytes.
 * After the flip the copies differ at most on W, which becomes S. */
int crpm_seg_staged(crpm_container *c, crpm_eregion *e, crpm_seg *s, const char *stage, uint64_t len, uint64_t b0,
                    uint64_t b1, crpm_ck_stats *st)
{
    uint64_t blk = c->sb.block_size, *W = e->wbits, *S = e->stale, chunk = UINT64_MAX;
    if (crpm_next_set(W, b0, b1) == b1)
        return CRPM_SUCCESS; /* nothing changed: keeps its committed copy */
    int other = s->state == 1 ? 1 : 0, fresh = s->phys[other] == CRPM_NO_PHYS || st->fresh, rc;
    if (fresh && st->defer && s->phys[other] == CRPM_NO_PHYS) {
        /* filled whole from the array after the allocation (par.c): the
         * copies then differ at most on W, as below */
        crpm_merge_bits(S, W, b0, b1, 1);
        return CRPM_DEFERRED;
    }
    if (fresh) {
        uint32_t p = s->phys[other];
        if (p == CRPM_NO_PHYS && (rc = crpm_phys_alloc(c, &p)) != 0) /* may remap: addresses only after this */
            return rc;
        s->phys[other] = p;
        c->crc_len[p] = 0;
        crpm_set_bits(S, b0, b1, 1); /* filled below from the committed copy where W is clear */
    }
    if ((rc = crpm_reserve_seg(c, s->phys[other], len)) != 0) /* new, or the region grew */
        return rc;
    const char *cur = crpm_seg_addr(c, s->phys[s->state - 1]);
    seg_write x = seg_write_start(c, st->m, s->phys[other], NULL, len);
    x.src = x.dst; /* the CRCs describe what the copy holds once written */
    crpm_bitwalk it = crpm_walk_start(W, S, CRPM_WALK_OR, b0, b1);
    for (uint64_t b = crpm_walk_next(&it); b != UINT64_MAX; b = crpm_walk_next(&it)) {
        uint64_t o = (b - b0) * blk, n = len - o < blk ? len - o : blk;
        int w = (int)(W[b / 64] >> (b % 64) & 1), sb = (int)(S[b / 64] >> (b % 64) & 1);
        staged_block(&x, w ? stage + o : cur + o, o, n, fresh || (w && !sb), blk, &chunk, st);
    }
    if (chunk != UINT64_MAX)
        seg_crc(&x, chunk, chunk + 1);
    seg_write_end(&x);
    s->state = (uint32_t)other + 1;
    crpm_merge_bits(S, W, b0, b1, 1);
    return CRPM_SUCCESS;
}

/* Block bitmaps of the engine (bit b: block b of a region), a word at a
 * time: checkpoints walk millions of blocks, almost all of them clear. */
#ifndef CRPM_ENGINE_BITS_H
#define CRPM_ENGINE_BITS_H
#include <stdint.h>

/* Bits [from, to) of word w, as a mask. */
static inline uint64_t crpm_word_mask(uint64_t w, uint64_t from, uint64_t to)
{
    uint64_t lo = from > w * 64 ? from - w * 64 : 0, hi = to < w * 64 + 64 ? to - w * 64 : 64;
    uint64_t m = hi == 64 ? ~0ull : (1ull << hi) - 1;
    return m & ~((1ull << lo) - 1);
}

static inline void crpm_set_bits(uint64_t *m, uint64_t from, uint64_t to, int v)
{
    for (uint64_t w = from / 64; from < to && w <= (to - 1) / 64; w++) {
        uint64_t k = crpm_word_mask(w, from, to);
        m[w] = v ? m[w] | k : m[w] & ~k;
    }
}

/* dst[from,to) |= src[from,to) (copy = 0) or dst[from,to) = src[from,to). */
static inline void crpm_merge_bits(uint64_t *dst, const uint64_t *src, uint64_t from, uint64_t to, int copy)
{
    for (uint64_t w = from / 64; from < to && w <= (to - 1) / 64; w++) {
        uint64_t k = crpm_word_mask(w, from, to);
        dst[w] = copy ? (dst[w] & ~k) | (src[w] & k) : dst[w] | (src[w] & k);
    }
}

/* First set bit in [from, to), or `to`. */
static inline uint64_t crpm_next_set(const uint64_t *m, uint64_t from, uint64_t to)
{
    for (uint64_t w = from / 64; from < to && w <= (to - 1) / 64; w++) {
        uint64_t v = m[w] & crpm_word_mask(w, from, to);
        if (v)
            return w * 64 + (uint64_t)__builtin_ctzll(v);
    }
    return to;
}

/* Set bits of (a OP b) within [b0, b1), in order.  The walk keeps the
 * current word, so clearing bits of `a` behind it does not disturb it. */
enum { CRPM_WALK_ANDNOT, CRPM_WALK_OR };
typedef struct crpm_bitwalk {
    const uint64_t *a, *b;
    uint64_t w, w1, x, b0, b1;
    int op;
} crpm_bitwalk;

static inline uint64_t crpm_walk_word(const crpm_bitwalk *it, uint64_t w)
{
    uint64_t v = it->op == CRPM_WALK_OR ? it->a[w] | it->b[w] : it->a[w] & ~it->b[w];
    return v & crpm_word_mask(w, it->b0, it->b1);
}

static inline crpm_bitwalk crpm_walk_start(const uint64_t *a, const uint64_t *b, int op, uint64_t b0, uint64_t b1)
{
    crpm_bitwalk it = {a, b, b0 / 64, (b1 - 1) / 64, 0, b0, b1, op};
    it.x = crpm_walk_word(&it, it.w);
    return it;
}

/* Next set bit, or UINT64_MAX at the end. */
static inline uint64_t crpm_walk_next(crpm_bitwalk *it)
{
    while (!it->x) {
        if (++it->w > it->w1)
            return UINT64_MAX;
        it->x = crpm_walk_word(it, it->w);
    }
    uint64_t b = it->w * 64 + (uint64_t)__builtin_ctzll(it->x);
    it->x &= it->x - 1;
    return b;
}

#endif

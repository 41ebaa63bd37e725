/* The benchmark's mutation (bench_instr.c), compiled twice by clang-14: with
 * the libcrpm pass plugin (DIRTY = dirty_instr: its stores mark) and without
 * (DIRTY = dirty_plain), from the same source. */
#include <stddef.h>
#include <stdint.h>

/* Changes `frac` of a: random 256-B blocks (one 8-byte word each) or
 * 256-KiB runs, or every word (frac >= 1).  The random numbers come from
 * *s, so the same seed gives the same mutation on another array. */
static inline uint64_t next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

void DIRTY(char *a, size_t n, double frac, int runs, uint64_t *s)
{
    size_t blk = 256, nblocks = n / blk;
    uint64_t *w = (uint64_t *)a;
    if (frac >= 1.0) {
        uint64_t salt = next(s) | 1;
        for (size_t i = 0; i < n / 8; i++)
            w[i] ^= salt;
        return;
    }
    if (runs) {
        size_t run = 256 << 10, todo = (size_t)(frac * (double)n);
        while (todo) {
            size_t len = todo < run ? todo : run;
            uint64_t *p = w + (next(s) % ((n - len) / 8)), salt = next(s) | 1;
            for (size_t i = 0; i < len / 8; i++)
                p[i] ^= salt;
            todo -= len;
        }
        return;
    }
    size_t k = (size_t)(frac * (double)nblocks);
    for (size_t i = 0; i < k; i++) {
        size_t b = next(s) % nblocks;
        w[b * (blk / 8) + next(s) % (blk / 8)] ^= next(s) | 1;
    }
}

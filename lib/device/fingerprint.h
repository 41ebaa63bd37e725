/* Block fingerprints of the fingerprint mode, shared by the CUDA kernels and
 * the host (the mock device and the tests compute the same values).
 *
 * A block of blk bytes is read as nw = blk / 4 little-endian 32-bit words
 * w_0 .. w_{nw-1} (bytes past the array's end count as zero) and hashed with
 * two independent random keys k1, k2 in [1, p), p = 2^61 - 1:
 *
 *     H_k(w) = sum_j w_j * k^(j+1)  (mod p)
 *
 * For two different blocks the difference of the hashes is a nonzero
 * polynomial in k of degree <= nw, so it vanishes for at most nw of the p
 * possible keys: a changed block keeps both values with probability at most
 * (nw / p)^2 (docs/gpu.md), whatever the data, as long as the data does not
 * depend on the keys (they are drawn when an array is attached and never
 * leave the process).  The sum has no order dependence between terms, so a
 * GPU adds the words' terms in any grouping. */
#ifndef CRPM_DEVICE_FINGERPRINT_H
#define CRPM_DEVICE_FINGERPRINT_H
#include <stdint.h>

#define CRPM_FP_P ((1ull << 61) - 1)
#define CRPM_FP_MAX_BLOCK 4096u /* largest block the key tables cover */

#if defined(__CUDACC__)
#define CRPM_FP_FN static __host__ __device__ __forceinline__
#else
#define CRPM_FP_FN static inline
#endif

/* a * b mod p for a, b < p */
CRPM_FP_FN uint64_t crpm_fp_mul(uint64_t a, uint64_t b)
{
#if defined(__CUDA_ARCH__)
    uint64_t lo = a * b, hi = __umul64hi(a, b);
#else
    unsigned __int128 x = (unsigned __int128)a * b;
    uint64_t lo = (uint64_t)x, hi = (uint64_t)(x >> 64);
#endif
    /* 2^61 = 1 (mod p): fold the bits above 61 onto the low ones twice */
    uint64_t r = (lo & CRPM_FP_P) + ((lo >> 61) | (hi << 3));
    r = (r & CRPM_FP_P) + (r >> 61);
    return r >= CRPM_FP_P ? r - CRPM_FP_P : r;
}

/* a + b mod p for a, b < p */
CRPM_FP_FN uint64_t crpm_fp_add(uint64_t a, uint64_t b)
{
    uint64_t r = a + b;
    return r >= CRPM_FP_P ? r - CRPM_FP_P : r;
}

/* Both hashes of one block: n valid bytes (n <= blk), the rest zero; keys
 * holds k1^1 .. k1^nw, then k2^1 .. k2^nw. */
static inline void crpm_fp_block(const unsigned char *b, uint64_t n, uint64_t blk, const uint64_t *keys,
                                 uint64_t out[2])
{
    uint64_t nw = blk / 4, h1 = 0, h2 = 0;
    for (uint64_t j = 0; j < nw && 4 * j < n; j++) {
        uint32_t w = 0;
        for (uint64_t i = 0; i < 4 && 4 * j + i < n; i++)
            w |= (uint32_t)b[4 * j + i] << (8 * i);
        h1 = crpm_fp_add(h1, crpm_fp_mul(w, keys[j]));
        h2 = crpm_fp_add(h2, crpm_fp_mul(w, keys[nw + j]));
    }
    out[0] = h1;
    out[1] = h2;
}

/* The key table for blocks of blk bytes from two keys drawn uniformly from
 * [1, p) (crpm_fp_draw). */
static inline void crpm_fp_keys(uint64_t k1, uint64_t k2, uint64_t blk, uint64_t *keys)
{
    uint64_t nw = blk / 4, k[2] = {k1, k2};
    for (int t = 0; t < 2; t++) {
        uint64_t x = 1;
        for (uint64_t j = 0; j < nw; j++)
            keys[t * nw + j] = x = crpm_fp_mul(x, k[t]);
    }
}

/* A key uniform in [1, p) from 64-bit random words (rejection: the next
 * word when the 61 low bits are 0 or p); 0 when none of n words fits. */
static inline uint64_t crpm_fp_draw(const uint64_t *words, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t k = words[i] & CRPM_FP_P;
        if (k != 0 && k != CRPM_FP_P)
            return k;
    }
    return 0;
}

#endif

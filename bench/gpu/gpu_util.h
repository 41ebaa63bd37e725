/* Device-side helpers of the GPU benchmark and the GPU tests (gpu_util.cu):
 * kernels the C programs call to fill, change and compare device memory.
 * Every function waits for its kernel; it returns 0, or -1 after printing
 * the CUDA error. */
#ifndef CRPM_BENCH_GPU_UTIL_H
#define CRPM_BENCH_GPU_UTIL_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* Pseudo-random bytes from seed into [p, p + bytes). */
int gpu_fill(void *p, uint64_t bytes, uint64_t seed);
/* Changes blocks of blk bytes: each with probability frac (random), or the
 * first frac of them (contiguous from a seed-chosen start, wrapping).  A
 * changed block really differs (one of its 8-byte words is xor-ed with a
 * nonzero value).  *changed: how many were changed. */
int gpu_touch(void *p, uint64_t bytes, uint64_t blk, double frac, int contiguous, uint64_t seed,
              uint64_t *changed);
/* Device memcmp: *differ = 1 when [a, a + bytes) and [b, b + bytes) differ. */
int gpu_cmp(const void *a, const void *b, uint64_t bytes, int *differ);
/* Name of the current device and its free and total memory. */
int gpu_info(char *name, int len, uint64_t *free_b, uint64_t *total_b);

#ifdef __cplusplus
}
#endif
#endif

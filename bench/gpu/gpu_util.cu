/* Kernels of gpu_util.h. */
#include <cuda_runtime.h>
#include <stdio.h>
#include "gpu_util.h"

namespace {

__host__ __device__ uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

__global__ void k_fill(unsigned char *p, uint64_t bytes, uint64_t seed)
{
    uint64_t words = bytes / 8, stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
        uint64_t v = mix(seed ^ (i * 0x9e3779b97f4a7c15ull));
        memcpy(p + 8 * i, &v, 8); /* p need not be 8-byte aligned */
    }
    if (blockIdx.x == 0 && threadIdx.x < bytes % 8)
        p[words * 8 + threadIdx.x] = (unsigned char)mix(seed + threadIdx.x);
}

__global__ void k_touch(unsigned char *p, uint64_t bytes, uint64_t blk, uint64_t thresh, uint64_t first,
                        uint64_t count, uint64_t seed, unsigned long long *changed)
{
    uint64_t nb = (bytes + blk - 1) / blk, stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        bool hit = count ? (b + nb - first) % nb < count : mix(seed ^ (b * 0x2545f4914f6cdd1dull)) < thresh;
        if (!hit)
            continue;
        uint64_t n = bytes - b * blk < blk ? bytes - b * blk : blk, w = mix(seed + b) % n;
        p[b * blk + w] ^= (unsigned char)(1 + mix(b) % 255);
        atomicAdd(changed, 1ull);
    }
}

__global__ void k_cmp(const uint4 *a, const uint4 *b, uint64_t n16, const unsigned char *ta,
                      const unsigned char *tb, uint64_t tail, int *differ)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    bool d = false;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) {
        uint4 x = a[i], y = b[i];
        d |= x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w;
    }
    if (blockIdx.x == 0 && threadIdx.x < tail)
        d |= ta[threadIdx.x] != tb[threadIdx.x];
    if (__syncthreads_or(d) && threadIdx.x == 0)
        *differ = 1;
}

int ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "CUDA %s: %s\n", what, cudaGetErrorString(e));
    return -1;
}

unsigned grid(uint64_t n) { return (unsigned)(n / 256 + 1 < 65536 ? n / 256 + 1 : 65536); }

} // namespace

extern "C" int gpu_fill(void *p, uint64_t bytes, uint64_t seed)
{
    k_fill<<<grid(bytes / 8), 256>>>((unsigned char *)p, bytes, seed);
    return ok(cudaGetLastError(), "fill launch") ? -1 : ok(cudaDeviceSynchronize(), "fill");
}

extern "C" int gpu_touch(void *p, uint64_t bytes, uint64_t blk, double frac, int contiguous, uint64_t seed,
                         uint64_t *changed)
{
    uint64_t nb = (bytes + blk - 1) / blk, count = 0, thresh = 0;
    if (contiguous)
        count = (uint64_t)(frac * (double)nb + 0.5) ? (uint64_t)(frac * (double)nb + 0.5) : 1;
    else
        thresh = frac >= 1.0 ? ~0ull : (uint64_t)(frac * 18446744073709551616.0);
    if (count > nb)
        count = nb;
    unsigned long long *d;
    if (ok(cudaMalloc(&d, sizeof *d), "malloc") || ok(cudaMemset(d, 0, sizeof *d), "memset"))
        return -1;
    k_touch<<<grid(nb), 256>>>((unsigned char *)p, bytes, blk, thresh, mix(seed) % nb, count, seed, d);
    unsigned long long h = 0;
    int rc = ok(cudaGetLastError(), "touch launch") || ok(cudaDeviceSynchronize(), "touch") ||
             ok(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost), "copy") ? -1 : 0;
    cudaFree(d);
    *changed = h;
    return rc;
}

extern "C" int gpu_cmp(const void *a, const void *b, uint64_t bytes, int *differ)
{
    int *d;
    if (ok(cudaMalloc(&d, sizeof *d), "malloc") || ok(cudaMemset(d, 0, sizeof *d), "memset"))
        return -1;
    uint64_t n16 = bytes / 16;
    k_cmp<<<grid(n16 / 4), 256>>>((const uint4 *)a, (const uint4 *)b, n16, (const unsigned char *)a + 16 * n16,
                                   (const unsigned char *)b + 16 * n16, bytes % 16, d);
    int rc = ok(cudaGetLastError(), "cmp launch") || ok(cudaDeviceSynchronize(), "cmp") ||
             ok(cudaMemcpy(differ, d, sizeof *d, cudaMemcpyDeviceToHost), "copy") ? -1 : 0;
    cudaFree(d);
    return rc;
}

extern "C" int gpu_info(char *name, int len, uint64_t *free_b, uint64_t *total_b)
{
    cudaDeviceProp prop;
    int dev = 0;
    size_t f = 0, t = 0;
    if (ok(cudaGetDevice(&dev), "get device") || ok(cudaGetDeviceProperties(&prop, dev), "properties") ||
        ok(cudaMemGetInfo(&f, &t), "memory info"))
        return -1;
    snprintf(name, (size_t)len, "%s", prop.name);
    *free_b = f;
    *total_b = t;
    return 0;
}

/* The device operations (devops.h) on the CUDA runtime, and their kernels.
 *
 * libcrpm links the runtime statically: the library loads and runs without a
 * CUDA driver, and the driver is only reached once the application itself
 * has loaded it (query() looks first, without starting the runtime), so a
 * host-only program never starts CUDA.
 *
 * Kernels work on 16-byte units.  A group of G = min(32, blk / 16) lanes of
 * a warp handles one block (adjacent lanes read adjacent units, so a warp
 * reads 512 contiguous bytes per step for blocks up to 512 bytes); bits of
 * the window bitmap are or-ed in once per warp step.  Pointers the
 * application gave need not be 16-byte aligned: unaligned arrays are read
 * byte by byte. */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

extern "C" {
#include "devops.h"
#include "error.h"
}
#include "fingerprint.h"

namespace {

const unsigned FULL = 0xffffffffu;

struct Win {
    const unsigned char *live;
    unsigned char *ref;
    const uint64_t *keys;
    uint64_t off, len, blk;
    int all;
    uint64_t *force, *dchg, *meta, *pos;
    unsigned char *pack;
};

Win win_of(const crpm_dwindow *w)
{
    return Win{(const unsigned char *)w->live, (unsigned char *)w->ref, w->keys, w->off, w->len, w->blk, w->all,
               w->force, w->dchg, w->meta, w->pos, (unsigned char *)w->pack};
}

__device__ uint4 load16(const unsigned char *p, uint64_t avail, bool aligned)
{
    if (aligned && avail >= 16)
        return *(const uint4 *)p;
    unsigned char b[16] = {0};
    for (unsigned i = 0; i < 16 && i < avail; i++)
        b[i] = p[i];
    uint4 v;
    memcpy(&v, b, 16);
    return v;
}

__device__ void store16(unsigned char *p, uint4 v, uint64_t avail, bool aligned)
{
    if (aligned && avail >= 16) {
        *(uint4 *)p = v;
        return;
    }
    unsigned char b[16];
    memcpy(b, &v, 16);
    for (unsigned i = 0; i < 16 && i < avail; i++)
        p[i] = b[i];
}

__device__ bool neq(uint4 a, uint4 b) { return a.x != b.x || a.y != b.y || a.z != b.z || a.w != b.w; }

/* Bit g of the result: lane g * G voted. */
__device__ unsigned compress(unsigned ballot, unsigned G)
{
    if (G == 1)
        return ballot;
    unsigned m = 0;
    for (unsigned g = 0; g * G < 32; g++)
        m |= (ballot >> (g * G) & 1u) << g;
    return m;
}

/* Bits [first, first + n) of an absolute bitmap, n <= 32: or (set) or clear. */
__device__ void abs_bits(uint64_t *m, uint64_t first, unsigned n, unsigned bits, bool set)
{
    uint64_t w = first / 64, s = first % 64, v = (uint64_t)bits << s;
    uint64_t hi = s + n > 64 ? (uint64_t)bits >> (64 - s) : 0;
    if (set) {
        if (v) atomicOr((unsigned long long *)&m[w], (unsigned long long)v);
        if (hi) atomicOr((unsigned long long *)&m[w + 1], (unsigned long long)hi);
    } else {
        if (v) atomicAnd((unsigned long long *)&m[w], (unsigned long long)~v);
        if (hi) atomicAnd((unsigned long long *)&m[w + 1], (unsigned long long)~hi);
    }
}

/* FP adds of two lanes' partial sums across a group of G lanes */
__device__ uint64_t group_sum(uint64_t h, unsigned G)
{
    for (unsigned d = G / 2; d >= 1; d /= 2)
        h = crpm_fp_add(h, __shfl_xor_sync(FULL, h, d));
    return h;
}

/* MODE 0: compare with the copy; 1: compare fingerprints; 2: fingerprints
 * only (after a recovery: every block, no bitmaps). */
template <int MODE>
__global__ void k_compare(Win w, bool aligned)
{
    const uint64_t blk = w.blk, units = blk / 16, nblk = (w.len + blk - 1) / blk, b0 = w.off / blk;
    const unsigned G = units < 32 ? (unsigned)units : 32u, gpw = 32 / G, lane = threadIdx.x & 31;
    const unsigned g = lane / G, gl = lane % G;
    const uint64_t U = units / G, nw = blk / 4;
    const uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
    for (uint64_t base = warp * gpw; base < nblk; base += nwarps * gpw) {
        const uint64_t i = base + g, o = i * blk;
        const bool valid = i < nblk;
        const uint64_t n = valid ? (w.len - o < blk ? w.len - o : blk) : 0;
        bool differ = false;
        uint64_t h1 = 0, h2 = 0;
        for (uint64_t u = 0; valid && u < U; u++) {
            uint64_t uo = (u * G + gl) * 16;
            if (uo >= n)
                break;
            uint4 a = load16(w.live + w.off + o + uo, n - uo, aligned);
            if (MODE == 0) {
                unsigned char *r = w.ref + w.off + o + uo;
                uint4 b = load16(r, n - uo, true);
                if (neq(a, b)) {
                    differ = true;
                    store16(r, a, n - uo, true);
                }
            } else {
                uint64_t j = uo / 4;
                uint32_t x[4] = {a.x, a.y, a.z, a.w};
                for (int t = 0; t < 4; t++) {
                    h1 = crpm_fp_add(h1, crpm_fp_mul(x[t], w.keys[j + t]));
                    h2 = crpm_fp_add(h2, crpm_fp_mul(x[t], w.keys[nw + j + t]));
                }
            }
        }
        if (MODE != 0) {
            h1 = group_sum(h1, G);
            h2 = group_sum(h2, G);
            if (valid && gl == 0) {
                uint64_t *f = (uint64_t *)(w.ref + (b0 + i) * CRPM_FP_BYTES);
                differ = f[0] != h1 || f[1] != h2;
                if (differ || MODE == 2) {
                    f[0] = h1;
                    f[1] = h2;
                }
            }
        }
        if (MODE == 2)
            continue;
        const unsigned any = __ballot_sync(FULL, differ);
        bool d = valid && ((any >> (g * G)) & (G == 32 ? FULL : ((1u << G) - 1)));
        const uint64_t b = b0 + i;
        bool chg = valid && (d || w.all || (w.force[b / 64] >> (b % 64) & 1));
        const unsigned mask = compress(__ballot_sync(FULL, gl == 0 && chg), G);
        const unsigned vmask = compress(__ballot_sync(FULL, gl == 0 && valid), G);
        if (lane == 0) {
            const unsigned nbits = gpw;
            if (mask) {
                atomicOr((unsigned long long *)&w.meta[1 + base / 64], (unsigned long long)mask << (base % 64));
                abs_bits(w.dchg, b0 + base, nbits, mask, true);
            }
            abs_bits(w.force, b0 + base, nbits, vmask, false);
        }
    }
}

/* One CTA: pos[k] = reported blocks before bitmap word k; meta[0] = all. */
__global__ void k_scan(uint64_t *meta, uint64_t *pos, uint64_t words)
{
    __shared__ uint64_t part[32];
    const uint64_t per = (words + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per;
    const uint64_t hi = lo + per < words ? lo + per : words;
    uint64_t mine = 0;
    for (uint64_t k = lo; k < hi; k++)
        mine += __popcll(meta[1 + k]);
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    uint64_t x = mine; /* inclusive scan in the warp */
    for (unsigned d = 1; d < 32; d *= 2) {
        uint64_t y = __shfl_up_sync(FULL, x, d);
        if (lane >= d)
            x += y;
    }
    if (lane == 31)
        part[warp] = x;
    __syncthreads();
    if (warp == 0) {
        uint64_t p = lane < blockDim.x / 32 ? part[lane] : 0;
        for (unsigned d = 1; d < 32; d *= 2) {
            uint64_t y = __shfl_up_sync(FULL, p, d);
            if (lane >= d)
                p += y;
        }
        part[lane] = p; /* inclusive over warps */
    }
    __syncthreads();
    uint64_t run = x - mine + (warp ? part[warp - 1] : 0);
    for (uint64_t k = lo; k < hi; k++) {
        pos[k] = run;
        run += __popcll(meta[1 + k]);
    }
    if (threadIdx.x == blockDim.x - 1)
        meta[0] = run;
}

/* A warp per bitmap word: its reported blocks into their pack slots. */
__global__ void k_gather(Win w, bool aligned)
{
    const uint64_t blk = w.blk, units = blk / 16, nblk = (w.len + blk - 1) / blk, words = (nblk + 63) / 64;
    const unsigned G = units < 32 ? (unsigned)units : 32u, gpw = 32 / G, lane = threadIdx.x & 31;
    const unsigned g = lane / G, gl = lane % G;
    const uint64_t U = units / G;
    const uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
    for (uint64_t k = warp; k < words; k += nwarps) {
        const uint64_t word = w.meta[1 + k];
        uint64_t left = word, first = w.pos[k];
        while (left) {
            uint64_t mine = left; /* this group's: the g-th lowest set bit */
            for (unsigned t = 0; t < g && mine; t++)
                mine &= mine - 1;
            if (mine) {
                const unsigned bit = __ffsll((long long)mine) - 1;
                const uint64_t i = k * 64 + bit, o = i * blk;
                const uint64_t n = w.len - o < blk ? w.len - o : blk;
                const uint64_t slot = first + __popcll(word & ((1ull << bit) - 1));
                for (uint64_t u = 0; u < U; u++) {
                    uint64_t uo = (u * G + gl) * 16;
                    if (uo >= n)
                        break;
                    uint4 v = load16(w.live + w.off + o + uo, n - uo, aligned);
                    store16(w.pack + slot * blk + uo, v, n - uo, true);
                }
            }
            for (unsigned t = 0; t < gpw && left; t++)
                left &= left - 1;
        }
    }
}

/* Bits [first, first + n): dst |= src, src = 0. */
__global__ void k_move(uint64_t *dst, uint64_t *src, uint64_t first, uint64_t n)
{
    const uint64_t w0 = first / 64, w1 = (first + n + 63) / 64;
    for (uint64_t k = w0 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < w1;
         k += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t lo = k * 64 < first ? first - k * 64 : 0, hi = (k + 1) * 64 > first + n ? first + n - k * 64 : 64;
        uint64_t mask = (hi == 64 ? ~0ull : (1ull << hi) - 1) & ~((1ull << lo) - 1);
        uint64_t v = src[k] & mask;
        if (v) {
            atomicOr((unsigned long long *)&dst[k], (unsigned long long)v);
            atomicAnd((unsigned long long *)&src[k], (unsigned long long)~v);
        }
    }
}

/* ---- host side ---------------------------------------------------------------------- */

int fail(cudaError_t e, const char *what)
{
    cudaGetLastError(); /* a non-sticky error must not fail the next call */
    int code = e == cudaErrorMemoryAllocation ? CRPM_ERR_NOMEM : CRPM_ERR_DEVICE;
    return crpm_error(code, "CUDA %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int check(cudaError_t e, const char *what) { return e == cudaSuccess ? CRPM_SUCCESS : fail(e, what); }

unsigned grid_for(uint64_t warps_needed)
{
    uint64_t ctas = (warps_needed + 7) / 8;
    return (unsigned)(ctas < 1 ? 1 : ctas > 8192 ? 8192 : ctas);
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

} // namespace

struct crpm_dstream {
    cudaStream_t s;
};

static cudaStream_t S(crpm_dstream *s) { return s->s; }

static int c_query(const void *p, int *type, int *dev)
{
    *type = CRPM_DMEM_HOST;
    *dev = 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return 1; /* no driver in this process, so no device memory: the runtime is not started */
    dlclose(h);
    cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e == cudaErrorInvalidValue) {
        cudaGetLastError();
        return CRPM_SUCCESS;
    }
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorNotSupported) {
        cudaGetLastError(); /* a driver without a usable GPU holds no device memory: host memory */
        return 1;
    }
    if (e != cudaSuccess)
        return fail(e, "cudaPointerGetAttributes");
    if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) {
        *type = a.type == cudaMemoryTypeDevice ? CRPM_DMEM_DEVICE : CRPM_DMEM_MANAGED;
        *dev = a.device;
    }
    return CRPM_SUCCESS;
}

/* The devices current before each use(), per thread (deeper nesting than
 * the stack holds only switches). */
static thread_local int use_stack[8];
static thread_local int use_depth;

static int c_use(int dev)
{
    int cur = -1;
    cudaError_t e = cudaGetDevice(&cur);
    if (e == cudaSuccess && cur != dev)
        e = cudaSetDevice(dev);
    if (e != cudaSuccess)
        return fail(e, "cudaSetDevice");
    if (use_depth < 8)
        use_stack[use_depth] = cur;
    use_depth++;
    return CRPM_SUCCESS;
}

static void c_unuse(void)
{
    if (use_depth == 0)
        return;
    int prev = --use_depth < 8 ? use_stack[use_depth] : -1, cur = -1;
    if (prev >= 0 && cudaGetDevice(&cur) == cudaSuccess && cur != prev && cudaSetDevice(prev) != cudaSuccess)
        cudaGetLastError();
}

static int c_alloc(void **p, uint64_t n)
{
    cudaError_t e = cudaMalloc(p, n ? n : 1);
    return e == cudaSuccess ? CRPM_SUCCESS : fail(e, "cudaMalloc of the GPU checkpoint buffers");
}

static void c_free(void *p)
{
    if (p)
        cudaFree(p);
}

static int c_host_alloc(void **p, uint64_t n)
{
    cudaError_t e = cudaHostAlloc(p, n ? n : 1, cudaHostAllocPortable);
    return e == cudaSuccess ? CRPM_SUCCESS : fail(e, "cudaHostAlloc of pinned staging");
}

static void c_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

static int c_stream_new(crpm_dstream **s)
{
    *s = (crpm_dstream *)malloc(sizeof **s); /* no C++ runtime: a static libcrpm links into C programs */
    if (!*s)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    cudaError_t e = cudaStreamCreateWithFlags(&(*s)->s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(*s);
        *s = nullptr;
        return fail(e, "cudaStreamCreate");
    }
    return CRPM_SUCCESS;
}

static void c_stream_free(crpm_dstream *s)
{
    if (!s)
        return;
    cudaStreamSynchronize(s->s);
    cudaStreamDestroy(s->s);
    cudaGetLastError();
    free(s);
}

static int c_copy(crpm_dstream *s, void *dst, const void *src, uint64_t n, int dir)
{
    (void)dir; /* unified addressing: the runtime knows each side */
    return n ? check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, S(s)), "cudaMemcpyAsync") : CRPM_SUCCESS;
}

static int c_zero(crpm_dstream *s, void *p, uint64_t n)
{
    return n ? check(cudaMemsetAsync(p, 0, n, S(s)), "cudaMemsetAsync") : CRPM_SUCCESS;
}

static int c_wait(crpm_dstream *s) { return check(cudaStreamSynchronize(S(s)), "cudaStreamSynchronize"); }

static int c_done(crpm_dstream *s)
{
    cudaError_t e = cudaStreamQuery(S(s));
    return e == cudaSuccess ? 1 : e == cudaErrorNotReady ? 0 : fail(e, "cudaStreamQuery");
}

static int c_device_sync(void) { return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

static int launched(const char *what) { return check(cudaGetLastError(), what); }

static int c_compare(crpm_dstream *s, const crpm_dwindow *w)
{
    uint64_t nblk = (w->len + w->blk - 1) / w->blk, units = w->blk / 16, gpw = units < 32 ? 32 / units : 1;
    unsigned grid = grid_for((nblk + gpw - 1) / gpw);
    bool al = aligned16(w->live);
    if (w->kind == CRPM_DREF_FP)
        k_compare<1><<<grid, 256, 0, S(s)>>>(win_of(w), al);
    else
        k_compare<0><<<grid, 256, 0, S(s)>>>(win_of(w), al);
    return launched("compare kernel launch");
}

static int c_scan(crpm_dstream *s, const crpm_dwindow *w)
{
    uint64_t nblk = (w->len + w->blk - 1) / w->blk;
    k_scan<<<1, 1024, 0, S(s)>>>(w->meta, w->pos, (nblk + 63) / 64);
    return launched("scan kernel launch");
}

static int c_gather(crpm_dstream *s, const crpm_dwindow *w)
{
    uint64_t nblk = (w->len + w->blk - 1) / w->blk;
    k_gather<<<grid_for((nblk + 63) / 64), 256, 0, S(s)>>>(win_of(w), aligned16(w->live));
    return launched("gather kernel launch");
}

static int c_bits_move(crpm_dstream *s, uint64_t *dst, uint64_t *src, uint64_t first, uint64_t n)
{
    if (!n)
        return CRPM_SUCCESS;
    uint64_t words = (first + n + 63) / 64 - first / 64;
    k_move<<<grid_for((words + 31) / 32), 256, 0, S(s)>>>(dst, src, first, n);
    return launched("bitmap kernel launch");
}

static int c_fingerprint(crpm_dstream *s, const void *live, void *ref, const uint64_t *keys, uint64_t bytes,
                         uint64_t blk)
{
    if (!bytes)
        return CRPM_SUCCESS;
    crpm_dwindow d = {live, ref, keys, 0, bytes, blk, CRPM_DREF_FP, 0, NULL, NULL, NULL, NULL, NULL};
    uint64_t nblk = (bytes + blk - 1) / blk, units = blk / 16, gpw = units < 32 ? 32 / units : 1;
    k_compare<2><<<grid_for((nblk + gpw - 1) / gpw), 256, 0, S(s)>>>(win_of(&d), aligned16(live));
    return launched("fingerprint kernel launch");
}

extern "C" const crpm_devops crpm_devops_cuda = {
    "cuda",       c_query,  c_use,  c_unuse, c_alloc,        c_free,    c_host_alloc, c_host_free,
    c_stream_new, c_stream_free, c_copy, c_zero, c_wait, c_done, c_device_sync,
    c_compare,    c_scan,   c_gather, c_bits_move, c_fingerprint};

/* A mock device memory kind (util/memkind.h) for tests without a GPU: the
 * same engine code paths as CUDA memory, with host buffers.
 *
 * Device memory is a range of addresses the CPU cannot touch (a PROT_NONE
 * reservation): the pointers given to the engine fault if the library ever
 * dereferences them instead of going through the kind.  Each allocation has
 * a host buffer standing for the device's bytes; the test writes into it as
 * a kernel would write into device memory (mock_malloc returns it, mock_dev
 * gives the device address to protect).
 *
 *   mock_kind_diff   finds its changes: keeps a copy of the committed state
 *                    per array (as the GPU kind does on the device), compares
 *                    blocks and stages only the changed ones; with
 *                    mock_superset set it also reports some unchanged blocks
 *                    (allowed: a fingerprint mode may)
 *   mock_kind_copy   copy out / copy in only: the engine compares on the host
 *
 * mock_d2h / mock_h2d count the bytes moved between "device" and host;
 * mock_fail_stage makes the next stage fail (a failed checkpoint).  Reads,
 * writes and stages of disjoint ranges may run on several threads at once
 * (the engine's workers): the counters are atomic. */
#ifndef CRPM_TEST_MOCK_DEVICE_H
#define CRPM_TEST_MOCK_DEVICE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "array.h"
#include "error.h"

#define MOCK_SPACE (64ull << 30)
#define MOCK_HDR 16u

typedef struct mock_block {
    uintptr_t dev;
    uint64_t bytes;
    char *host;
} mock_block;

static char *mock_base;
static uint64_t mock_next;
static mock_block *mock_tab;
static size_t mock_n, mock_cap;
static uint64_t mock_d2h, mock_h2d, mock_superset_rng;
static int mock_superset, mock_fail_stage;

/* Host buffer of n bytes standing for a new device allocation. */
static inline void *mock_malloc(uint64_t n)
{
    if (!mock_base) {
        mock_base = mmap(NULL, MOCK_SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mock_base == MAP_FAILED) {
            perror("mock device: mmap");
            exit(1);
        }
    }
    uint64_t sz = (n + 255) & ~255ull;
    char *h = malloc(MOCK_HDR + (n ? n : 1));
    if (!h || mock_next + sz + 256 > MOCK_SPACE) {
        fprintf(stderr, "mock device: out of memory\n");
        exit(1);
    }
    if (mock_n == mock_cap) {
        mock_cap = mock_cap ? 2 * mock_cap : 256;
        mock_tab = realloc(mock_tab, mock_cap * sizeof *mock_tab);
        if (!mock_tab)
            exit(1);
    }
    uintptr_t dev = (uintptr_t)mock_base + mock_next;
    mock_next += sz + 256; /* a gap: an access past the end faults too */
    mock_tab[mock_n++] = (mock_block){dev, n, h + MOCK_HDR};
    memcpy(h, &dev, sizeof dev);
    return h + MOCK_HDR;
}

static inline void *mock_dev(const void *host)
{
    uintptr_t dev;
    memcpy(&dev, (const char *)host - MOCK_HDR, sizeof dev);
    return (void *)dev;
}

static inline mock_block *mock_find(const void *dev)
{
    size_t lo = 0, hi = mock_n;
    while (lo < hi) { /* addresses increase with the allocations */
        size_t mid = (lo + hi) / 2;
        if (mock_tab[mid].dev < (uintptr_t)dev) lo = mid + 1; else hi = mid;
    }
    return lo < mock_n && mock_tab[lo].dev == (uintptr_t)dev && mock_tab[lo].host ? &mock_tab[lo] : NULL;
}

static inline void mock_free(void *host)
{
    if (!host)
        return;
    mock_block *b = mock_find(mock_dev(host));
    if (b)
        b->host = NULL; /* the device address is never reused */
    free((char *)host - MOCK_HDR);
}

static inline void *mock_realloc(void *host, uint64_t n)
{
    char *h = mock_malloc(n);
    if (host) {
        uint64_t old = mock_find(mock_dev(host))->bytes;
        memcpy(h, host, old < n ? old : n);
        mock_free(host);
    }
    return h;
}

static inline mock_block *mock_of(const crpm_array *a)
{
    mock_block *b = mock_find(a->ptr);
    if (!b || crpm_array_bytes(a) > b->bytes) {
        fprintf(stderr, "mock device: array %d is not a live device allocation of %llu bytes\n", a->id,
                (unsigned long long)crpm_array_bytes(a));
        abort();
    }
    return b;
}

static int mock_read(const crpm_array *a, uint64_t off, void *dst, uint64_t len)
{
    memcpy(dst, mock_of(a)->host + off, len);
    __atomic_fetch_add(&mock_d2h, len, __ATOMIC_RELAXED); /* engine workers call concurrently */
    return CRPM_SUCCESS;
}

static int mock_write(const crpm_array *a, uint64_t off, const void *src, uint64_t len)
{
    memcpy(mock_of(a)->host + off, src, len);
    __atomic_fetch_add(&mock_h2d, len, __ATOMIC_RELAXED);
    return CRPM_SUCCESS;
}

/* The kind's state of one array: its copy of the committed state and what
 * the checkpoint in flight staged. */
typedef struct mock_state {
    uint64_t bytes, blk;
    char *copy, *pending;
    unsigned char *staged; /* per block */
} mock_state;

static int mock_attach(const crpm_array *a, uint64_t blk, void **out)
{
    mock_state *s = calloc(1, sizeof *s);
    uint64_t n = crpm_array_bytes(a), nb = (n + blk - 1) / blk;
    if (!s || !(s->copy = calloc(1, n ? n : 1)) || !(s->pending = malloc(n ? n : 1)) ||
        !(s->staged = calloc(1, nb ? nb : 1)))
        return crpm_error(CRPM_ERR_NOMEM, "mock device: out of memory");
    s->bytes = n;
    s->blk = blk;
    *out = s;
    return CRPM_SUCCESS;
}

static int mock_stage(void *state, const crpm_array *a, uint64_t off, uint64_t len, int all, uint64_t *changed,
                      void *host)
{
    mock_state *s = state;
    const char *live = mock_of(a)->host;
    if (__atomic_exchange_n(&mock_fail_stage, 0, __ATOMIC_RELAXED)) {
        return crpm_error(CRPM_ERR_IO, "mock device: stage failed (on purpose)");
    }
    if (off % s->blk || off + len > s->bytes)
        return crpm_error(CRPM_ERR_INVAL, "mock device: stage of %llu+%llu is not block aligned",
                          (unsigned long long)off, (unsigned long long)len);
    for (uint64_t i = 0, o = off; o < off + len; i++, o += s->blk) {
        uint64_t n = off + len - o < s->blk ? off + len - o : s->blk;
        int extra = 0;
        if (mock_superset) {
            uint64_t r = __atomic_add_fetch(&mock_superset_rng, 0x9E3779B97F4A7C15ull, __ATOMIC_RELAXED);
            r = (r ^ (r >> 31)) * 0xBF58476D1CE4E5B9ull;
            extra = (r >> 60) == 0; /* 1 in 16 */
        }
        if (!all && !extra && memcmp(live + o, s->copy + o, n) == 0)
            continue;
        changed[i / 64] |= 1ull << (i % 64);
        memcpy((char *)host + i * s->blk, live + o, n);
        memcpy(s->pending + o, live + o, n);
        s->staged[o / s->blk] = 1;
        __atomic_fetch_add(&mock_d2h, n, __ATOMIC_RELAXED);
    }
    return CRPM_SUCCESS;
}

static void mock_event(void *state, const crpm_array *a, int event)
{
    mock_state *s = state;
    uint64_t nb = (s->bytes + s->blk - 1) / s->blk;
    if (event == CRPM_MEM_SYNCED) {
        memcpy(s->copy, mock_of(a)->host, s->bytes); /* on the device: a device-to-device copy */
        memset(s->staged, 0, nb);
        return;
    }
    for (uint64_t b = 0; b < nb; b++) {
        if (!s->staged[b])
            continue;
        uint64_t o = b * s->blk, n = s->bytes - o < s->blk ? s->bytes - o : s->blk;
        if (event == CRPM_MEM_COMMITTED)
            memcpy(s->copy + o, s->pending + o, n);
        s->staged[b] = 0;
    }
}

static void mock_detach(void *state)
{
    mock_state *s = state;
    free(s->copy);
    free(s->pending);
    free(s->staged);
    free(s);
}

__attribute__((unused)) static const crpm_mem_kind mock_kind_diff = {"mock-device", 0, mock_read, mock_write,
                                             mock_attach, mock_stage, mock_event, mock_detach};
__attribute__((unused)) static const crpm_mem_kind mock_kind_copy = {"mock-device-copy", 0, mock_read, mock_write, NULL, NULL, NULL, NULL};

#endif

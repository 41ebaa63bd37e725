/* Internals of the persistent-heap allocator shared by heap.c (allocation)
 * and heap_check.c (invariants, statistics).  Layout in heap.c's comment. */
#ifndef CRPM_HEAP_INT_H
#define CRPM_HEAP_INT_H
#include <stdatomic.h>
#include <stdint.h>
#include "heap.h"

#define PAGE_SHIFT 12
#define SLAB_PAGES_MAX 16u /* a slab: 16 pages, 4 in arenas below 2 MiB (tests) */
#define NCLS 67 /* 64 classes 16-byte aligned, then 24, 40 and 56 bytes 8-byte aligned */
#define NCLS16 64
#define NBINS 88
#define HEAP_MAGIC 0x5041454d4d505243ull /* "CRPMHEAP" */
#define HEAP_VERSION 1u
#define ARENA_MAGIC 0x6e657261u         /* "aren" */
#define BITMAP_MAX_ARENAS ((uint64_t)1 << 18)

enum { E_FREE = 1, E_SLAB, E_SLAB_PAGE, E_LARGE, E_TAIL };
enum { A_NORMAL = 16, A_HUGE, A_FREE };

/* The start of every arena (64 bytes), then one entry per data page. */
typedef struct arena_hdr {
    uint32_t magic;      /* ARENA_MAGIC */
    uint8_t kind;        /* A_* (a free arena's may be stale: the bitmap decides) */
    uint8_t pad;
    uint16_t nfree;      /* normal: free data pages */
    uint32_t narenas;    /* huge: arenas of the block */
    uint32_t pad2[13];
} arena_hdr;
_Static_assert(sizeof(arena_hdr) == 64, "arena headers are 64 bytes");

/* One data page's entry. */
typedef struct ent {
    uint8_t kind, cls;   /* cls: a slab's size class */
    uint16_t len;        /* FREE, LARGE: pages; SLAB: objects handed out from its untouched end
                            ("bump"); TAIL, SLAB_PAGE: pages back to the span's first */
    uint32_t prev, next; /* FREE: its bin; SLAB: its class's partial list */
    uint16_t nfree;      /* SLAB: free objects (free list + untouched end) */
    uint16_t head;       /* SLAB: 1 + index of the first object on its free list, 0: none */
} ent;
_Static_assert(sizeof(ent) == 16, "page entries are 16 bytes");

/* The global header, after arena 0's header pages. */
typedef struct glob {
    uint64_t magic;
    uint32_t version, arena_shift;
    uint64_t base;        /* address the heap was created at */
    uint64_t capacity;    /* arenas the free-arena bitmap covers */
    uint64_t top;         /* arenas [0, top) have been taken */
    uint64_t extent;      /* bytes usable: [base, base + extent) */
    uint64_t used, blocks;
    uint64_t roots[CRPM_HEAP_ROOTS];
    uint32_t cur[NCLS];     /* slab allocating for the class */
    uint32_t partial[NCLS]; /* other slabs of the class with free objects */
    uint32_t bins[NBINS];   /* free spans by size (bin_of) */
    uint64_t binmap[2];     /* non-empty bins */
    uint64_t freemap[];     /* free arenas (bit set), [0, top) meaningful */
} glob;

/* Arena a spans `stride` bytes from mem + a * stride: hpages header pages
 * (arena_hdr, then the entries of its data pages), then apages data pages
 * (arena 0: its first gpages hold the global header).  Data pages are
 * numbered from the region's start ("page ids"), header pages included. */
struct crpm_heap {
    char *mem;
    glob *g;
    unsigned as;               /* data bytes per arena = 1 << as */
    uint32_t apages, hpages;   /* data and header pages per arena */
    uint32_t ppa;              /* pages per arena (apages + hpages) */
    uint64_t stride;           /* bytes per arena */
    uint64_t div;              /* page id -> arena: (g * div) >> 40 */
    uint32_t gpages;           /* global header pages */
    uint32_t slab_pages;       /* pages per slab */
    uint64_t limit;            /* bytes the heap may grow to in this process: whole arenas of reserve */
    uint64_t reserve;          /* the range reserved for it (heap_size), for messages */
    crpm_heap_grow_fn grow;
    void *grow_arg;
    atomic_int lock;
    int held;                  /* crpm_heap_lock took the atomic lock */
    uint32_t size[NCLS], cap[NCLS], inv[NCLS];
};

/* ---- geometry -------------------------------------------------------------- */

/* exact for page ids below 2^28 (1 TiB) and ppa below 4096 */
static inline uint64_t arena_of(const crpm_heap *h, uint64_t g) { return (g * h->div) >> 40; }
static inline char *PAGE_AT(const crpm_heap *h, uint32_t g) { return h->mem + ((uint64_t)g << PAGE_SHIFT); }
static inline arena_hdr *ARENA(const crpm_heap *h, uint64_t a) { return (arena_hdr *)(void *)(h->mem + a * h->stride); }
/* first data page of arena a, as an index in the arena */
static inline uint32_t first_page(const crpm_heap *h, uint64_t a) { return a ? h->hpages : h->hpages + h->gpages; }
static inline uint32_t usable_pages(const crpm_heap *h, uint64_t a) { return h->ppa - first_page(h, a); }
/* page ids of arena a's first data page and of the page after it */
static inline uint32_t arena_lo(const crpm_heap *h, uint64_t a) { return (uint32_t)(a * h->ppa) + first_page(h, a); }
static inline uint32_t arena_hi(const crpm_heap *h, uint64_t a) { return (uint32_t)((a + 1) * h->ppa); }
static inline ent *ENT(const crpm_heap *h, uint32_t g)
{
    uint64_t a = arena_of(h, g);
    return (ent *)(void *)((char *)ARENA(h, a) + sizeof(arena_hdr)) + (g - a * h->ppa - h->hpages);
}
/* data bytes of a huge block of k arenas */
static inline uint64_t huge_bytes(const crpm_heap *h, uint64_t k)
{
    return k * h->stride - (uint64_t)h->hpages * CRPM_HEAP_PAGE;
}

static inline uint32_t class_size(unsigned c)
{
    if (c >= NCLS16)
        return 24 + 16 * (c - NCLS16);
    if (c < 8)
        return 16u * (c + 1);
    unsigned g = (c - 8) / 8, k = (c - 8) % 8;
    return (128u << g) + (k + 1) * (16u << g);
}

/* The smallest class holding n bytes (1 <= n <= CRPM_HEAP_SMALL_MAX). */
static inline unsigned class_of(size_t n)
{
    if (n <= 128)
        return (unsigned)((n + 15) / 16) - 1;
    size_t m = n - 1;
    unsigned fl = 63u - (unsigned)__builtin_clzll(m), g = fl - 7;
    return 8 + 8 * g + (unsigned)((m - ((size_t)128 << g)) >> (4 + g));
}

static inline unsigned bin_of(uint32_t n)
{
    if (n < 16)
        return n;
    unsigned fl = 31u - (unsigned)__builtin_clz(n);
    return 16 + (fl - 4) * 8 + ((n >> (fl - 3)) & 7);
}

/* The first bin whose every span holds n pages (good fit, TLSF style). */
static inline unsigned bin_search(uint32_t n)
{
    if (n < 16)
        return n;
    unsigned fl = 31u - (unsigned)__builtin_clz(n);
    return bin_of(n + (1u << (fl - 3)) - 1);
}

static inline int arena_free(const crpm_heap *h, uint64_t a) { return (h->g->freemap[a / 64] >> (a % 64)) & 1; }
static inline void arena_mark(crpm_heap *h, uint64_t a, int v)
{
    uint64_t bit = 1ull << (a % 64);
    h->g->freemap[a / 64] = v ? h->g->freemap[a / 64] | bit : h->g->freemap[a / 64] & ~bit;
}

#endif

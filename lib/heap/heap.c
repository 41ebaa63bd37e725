/* Persistent-heap allocator (heap.h; design and bounds in docs/heap.md).
 *
 * Page entries.  Every 4 KiB page of an arena has a 16-byte entry in the
 * arena's header pages.  Only some entries are kept current:
 *   - the first page of every span (FREE, SLAB or LARGE: its kind and state),
 *   - the last page of every span longer than one page (TAIL, or SLAB_PAGE
 *     for a slab: how far back its start is), so that a span being freed
 *     finds its left neighbour's start and its right neighbour's kind,
 *   - every page of a slab (a pointer into any of them finds the slab);
 * the others may hold stale values and are never read.  Entry 0 of each arena
 * describes the arena (its first page is a header page).  Lists link entries
 * by global page id (0 = none: page 0 is a header page).
 *
 * Only the entries and objects an operation concerns are written: a small
 * allocation writes its slab's entry and the global header's counters, a
 * free also the object's first two bytes (the free list), so a checkpoint
 * finds few dirty pages beyond those the application wrote itself. */
#include <sched.h>
#include <stdlib.h>
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define CRPM_HEAP_HAVE_SINGLE_THREADED 1
#endif
#endif
#include <string.h>
#include "error.h"
#include "heap_int.h"
#include "marks.h"

/* ---- lock ------------------------------------------------------------------ */

/* A process with one thread skips the atomic exchange (glibc's flag turns
 * false before a second thread starts, and none can start inside a call of
 * ours); `held` remembers which way the lock was taken. */
static inline int single_threaded(void)
{
#ifdef CRPM_HEAP_HAVE_SINGLE_THREADED
    return __libc_single_threaded;
#else
    return 0;
#endif
}

static int lock_taken(crpm_heap *h)
{
    if (single_threaded())
        return 0;
    for (int spins = 0; atomic_exchange_explicit(&h->lock, 1, memory_order_acquire); spins++) {
        while (atomic_load_explicit(&h->lock, memory_order_relaxed)) {
            if (++spins > 64)
                sched_yield();
            else
                __builtin_ia32_pause();
        }
    }
    return 1;
}

static inline void lock_release(crpm_heap *h, int held)
{
    if (held)
        atomic_store_explicit(&h->lock, 0, memory_order_release);
}

void crpm_heap_lock(crpm_heap *h) { h->held = lock_taken(h); }
void crpm_heap_unlock(crpm_heap *h) { lock_release(h, h->held); }

/* ---- lists and bins -------------------------------------------------------- */

static void list_push(crpm_heap *h, uint32_t *head, uint32_t g)
{
    ent *e = ENT(h, g);
    e->prev = 0;
    e->next = *head;
    if (*head)
        ENT(h, *head)->prev = g;
    *head = g;
}

static void list_del(crpm_heap *h, uint32_t *head, uint32_t g)
{
    ent *e = ENT(h, g);
    if (e->prev)
        ENT(h, e->prev)->next = e->next;
    else
        *head = e->next;
    if (e->next)
        ENT(h, e->next)->prev = e->prev;
}

static void set_tail(crpm_heap *h, uint32_t g, uint32_t n, uint8_t kind)
{
    if (n > 1) {
        ent *t = ENT(h, g + n - 1);
        t->kind = kind;
        t->len = (uint16_t)(n - 1);
    }
}

static void free_insert(crpm_heap *h, uint32_t g, uint32_t n)
{
    ent *e = ENT(h, g);
    e->kind = E_FREE;
    e->len = (uint16_t)n;
    set_tail(h, g, n, E_TAIL);
    unsigned b = bin_of(n);
    list_push(h, &h->g->bins[b], g);
    h->g->binmap[b / 64] |= 1ull << (b % 64);
}

static void free_remove(crpm_heap *h, uint32_t g)
{
    unsigned b = bin_of(ENT(h, g)->len);
    list_del(h, &h->g->bins[b], g);
    if (!h->g->bins[b])
        h->g->binmap[b / 64] &= ~(1ull << (b % 64));
}

/* ---- arenas ---------------------------------------------------------------- */

/* The extent covers `top` arenas, growing by an eighth at least (each
 * growth costs the next checkpoint a full compare; the slack is compared
 * and saved as zeros). */
static int extend_to(crpm_heap *h, uint64_t top)
{
    glob *G = h->g;
    uint64_t need = top * h->stride, want = G->extent + G->extent / 8;
    if (need <= G->extent)
        return CRPM_SUCCESS;
    if (need > h->limit)
        return crpm_error(CRPM_ERR_NOMEM, "the heap is full: %llu bytes in use of %llu usable (%llu whole arenas of "
                          "%llu bytes in the %llu bytes of heap_size)", (unsigned long long)G->used,
                          (unsigned long long)h->limit, (unsigned long long)(h->limit / h->stride),
                          (unsigned long long)h->stride, (unsigned long long)h->reserve);
    want = (want + h->stride - 1) / h->stride * h->stride;
    if (want < need)
        want = need;
    if (want > h->limit)
        want = h->limit;
    int rc = h->grow ? h->grow(h->grow_arg, h->mem, want)
                     : crpm_error(CRPM_ERR_NOMEM, "the heap cannot grow beyond %llu bytes here",
                                  (unsigned long long)G->extent);
    if (rc != 0)
        return rc;
    G->extent = want;
    return CRPM_SUCCESS;
}

/* k contiguous free arenas, the lowest run (one reaching `top` is extended
 * beyond it); 0 with an error when the heap cannot hold them. */
static uint64_t arenas_take(crpm_heap *h, uint64_t k)
{
    glob *G = h->g;
    uint64_t run = 0, start = 0, a = 1;
    while (a < G->top && run < k) {
        if (run == 0 && (a % 64) == 0 && G->freemap[a / 64] == 0) {
            a += 64; /* a word of arenas in use */
            continue;
        }
        if (arena_free(h, a)) {
            if (!run++)
                start = a;
        } else {
            run = 0;
        }
        a++;
    }
    if (run < k) {
        if (!run)
            start = G->top;
        uint64_t top = start + k;
        if (top > h->limit / h->stride || extend_to(h, top) != 0) {
            crpm_error(CRPM_ERR_NOMEM, "the heap is full: %llu bytes in use, %llu more needed, %llu usable (%llu "
                       "whole arenas of %llu bytes in the %llu bytes of heap_size)", (unsigned long long)G->used,
                       (unsigned long long)(k * h->stride), (unsigned long long)h->limit,
                       (unsigned long long)(h->limit / h->stride), (unsigned long long)h->stride,
                       (unsigned long long)h->reserve);
            return 0;
        }
        for (uint64_t x = G->top; x < top; x++)
            arena_mark(h, x, 0);
        G->top = top;
    }
    for (uint64_t x = start; x < start + k; x++)
        arena_mark(h, x, 0);
    return start;
}

static void arena_init(crpm_heap *h, uint64_t a)
{
    arena_hdr *ai = ARENA(h, a);
    memset(ai, 0, sizeof *ai);
    ai->magic = ARENA_MAGIC;
    ai->kind = A_NORMAL;
    ai->nfree = (uint16_t)usable_pages(h, a);
    free_insert(h, arena_lo(h, a), usable_pages(h, a));
}

static void arenas_release(crpm_heap *h, uint64_t a, uint64_t k)
{
    ARENA(h, a)->kind = A_FREE;
    for (uint64_t x = a; x < a + k; x++)
        arena_mark(h, x, 1);
}

/* ---- spans ----------------------------------------------------------------- */

/* n contiguous pages of one arena (n <= large_max); the caller sets the
 * span's entries. */
static uint32_t span_alloc(crpm_heap *h, uint32_t n)
{
    glob *G = h->g;
    unsigned b = bin_search(n);
    uint64_t m = b < 64 ? G->binmap[0] & (~0ull << b) : 0;
    if (m) {
        b = (unsigned)__builtin_ctzll(m);
    } else if ((m = G->binmap[1] & (b < 64 ? ~0ull : ~0ull << (b - 64)))) {
        b = 64 + (unsigned)__builtin_ctzll(m);
    } else {
        /* a fresh arena: its one span may sit in a bin below the search bin
         * (it is pushed first there), but holds any span request */
        uint64_t a = arenas_take(h, 1);
        if (!a)
            return 0;
        arena_init(h, a);
        b = bin_of(usable_pages(h, a));
    }
    uint32_t g = G->bins[b], len = ENT(h, g)->len;
    free_remove(h, g);
    if (len > n)
        free_insert(h, g + n, len - n);
    ARENA(h, arena_of(h, g))->nfree -= (uint16_t)n;
    return g;
}

/* Frees pages [g, g + n), merging with free neighbours; an arena left
 * without a page in use goes back to the free arenas (arena 0 never). */
static void span_release(crpm_heap *h, uint32_t g, uint32_t n)
{
    uint64_t a = arena_of(h, g);
    uint32_t lo = arena_lo(h, a), hi = arena_hi(h, a);
    arena_hdr *ai = ARENA(h, a);
    ai->nfree += (uint16_t)n;
    ENT(h, g)->kind = 0; /* no longer a block, whatever it merges into */
    if (g > lo) {
        uint32_t l = g - 1;
        ent *e = ENT(h, l);
        if (e->kind == E_TAIL || e->kind == E_SLAB_PAGE)
            l -= e->len;
        if (ENT(h, l)->kind == E_FREE) {
            free_remove(h, l);
            n += g - l;
            g = l;
        }
    }
    if (g + n < hi && ENT(h, g + n)->kind == E_FREE) {
        uint32_t r = g + n;
        free_remove(h, r);
        n += ENT(h, r)->len;
    }
    if (a != 0 && ai->nfree == usable_pages(h, a))
        arenas_release(h, a, 1);
    else
        free_insert(h, g, n);
}

/* ---- small blocks ---------------------------------------------------------- */

static inline uint16_t load16(const char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static inline void store16(char *p, uint16_t v) { memcpy(p, &v, 2); }
static inline uint64_t load64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline void store64(char *p, uint64_t v) { memcpy(p, &v, 8); }

/* Bytes 8..15 of a free small object: catches most double frees at once. */
#define FREE_MARK 0x45455246504d5243ull /* "CRPMFREE" */

static uint32_t slab_refill(crpm_heap *h, unsigned c)
{
    glob *G = h->g;
    uint32_t g = G->partial[c];
    if (g) {
        list_del(h, &G->partial[c], g);
    } else {
        if (!(g = span_alloc(h, h->slab_pages)))
            return 0;
        ent *e = ENT(h, g);
        memset(e, 0, sizeof *e);
        e->kind = E_SLAB;
        e->cls = (uint8_t)c;
        e->nfree = (uint16_t)h->cap[c];
        for (uint32_t i = 1; i < h->slab_pages; i++) {
            ent *p = ENT(h, g + i);
            p->kind = E_SLAB_PAGE;
            p->len = (uint16_t)i;
        }
    }
    G->cur[c] = g;
    return g;
}

static void *small_alloc(crpm_heap *h, unsigned c)
{
    glob *G = h->g;
    uint32_t g = G->cur[c];
    ent *e = g ? ENT(h, g) : NULL;
    if (!e || !e->nfree) {
        if (!(g = slab_refill(h, c)))
            return NULL;
        e = ENT(h, g);
    }
    uint32_t sz = h->size[c], i;
    char *slab = PAGE_AT(h, g);
    if (e->head) {
        i = e->head - 1u;
        e->head = load16(slab + (size_t)i * sz);
    } else {
        i = e->len++;
    }
    e->nfree--;
    G->used += sz;
    G->blocks++;
    char *o = slab + (size_t)i * sz;
    store64(o + 8, 0); /* no longer marked free */
    return o;
}

/* Object i of slab g is on its free list (marked, then confirmed: the mark
 * may be application data that happens to match). */
static int on_free_list(const crpm_heap *h, uint32_t g, uint32_t i)
{
    const ent *e = ENT(h, g);
    uint32_t sz = h->size[e->cls];
    const char *slab = PAGE_AT(h, g);
    if (load64(slab + (size_t)i * sz + 8) != FREE_MARK)
        return 0;
    for (uint32_t k = e->head, n = 0; k && n < h->cap[e->cls]; k = load16(slab + (size_t)(k - 1) * sz), n++)
        if (k == i + 1)
            return 1;
    return 0;
}

/* ---- block lookup ---------------------------------------------------------- */

enum { B_SMALL = 1, B_LARGE, B_HUGE };
typedef struct blk {
    int kind;
    uint32_t g;     /* small: slab; large: first page */
    uint32_t idx;   /* small: object index */
    uint64_t a;     /* arena */
    size_t size;    /* usable bytes */
} blk;

/* What p is, or 0 when it is not the start of a live block (as far as the
 * entries can tell: a pointer into a freed slab object is not caught). */
static inline int lookup(const crpm_heap *h, const void *p, blk *b)
{
    const glob *G = h->g;
    uintptr_t off = (uintptr_t)p - (uintptr_t)h->mem;
    if ((uintptr_t)p < (uintptr_t)h->mem || off >= G->top * h->stride || (off & 7))
        return 0;
    uint32_t g = (uint32_t)(off >> PAGE_SHIFT);
    b->a = arena_of(h, g);
    const arena_hdr *ai = ARENA(h, b->a);
    if (ai->magic != ARENA_MAGIC)
        return 0;
    if (ai->kind == A_HUGE) {
        if (off != b->a * h->stride + (uint64_t)h->hpages * CRPM_HEAP_PAGE)
            return 0;
        b->kind = B_HUGE;
        b->size = huge_bytes(h, ai->narenas);
        return 1;
    }
    if (ai->kind != A_NORMAL || g < arena_lo(h, b->a))
        return 0;
    const ent *e = ENT(h, g);
    if (e->kind == E_SLAB_PAGE) {
        if (e->len >= h->slab_pages)
            return 0;
        g -= e->len;
        e = ENT(h, g);
        if (e->kind != E_SLAB)
            return 0;
    }
    b->g = g;
    if (e->kind == E_SLAB) {
        uint64_t o = off - ((uint64_t)g << PAGE_SHIFT);
        uint32_t i = (uint32_t)((o * h->inv[e->cls]) >> 32);
        if (e->cls >= NCLS || (uint64_t)i * h->size[e->cls] != o || i >= e->len || e->nfree >= h->cap[e->cls] ||
            on_free_list(h, g, i))
            return 0;
        b->kind = B_SMALL;
        b->idx = i;
        b->size = h->size[e->cls];
        return 1;
    }
    if (e->kind == E_LARGE && (off & (CRPM_HEAP_PAGE - 1)) == 0) {
        b->kind = B_LARGE;
        b->size = (size_t)e->len * CRPM_HEAP_PAGE;
        return 1;
    }
    return 0;
}

/* ---- allocation and release (lock held) ------------------------------------ */

static size_t large_max(const crpm_heap *h) { return (size_t)h->apages * CRPM_HEAP_PAGE; }

/* Arenas of a huge block of n bytes. */
static uint64_t huge_arenas(const crpm_heap *h, size_t n)
{
    return ((uint64_t)n + (uint64_t)h->hpages * CRPM_HEAP_PAGE + h->stride - 1) / h->stride;
}

static void *alloc_locked(crpm_heap *h, size_t n, size_t align)
{
    glob *G = h->g;
    if (n == 0)
        n = 1;
    if (align <= 8 && n > 16 && n <= 56 && ((n + 7) & 8)) /* 24, 40 or 56 bytes: C++ nodes of 8-byte data */
        return small_alloc(h, NCLS16 + (unsigned)((n + 7) / 16 - 1));
    if (n <= CRPM_HEAP_SMALL_MAX) {
        unsigned c = class_of(n);
        while (c < NCLS16 && (h->size[c] & (align - 1)))
            c++;
        if (c < NCLS16)
            return small_alloc(h, c);
    }
    if (n <= large_max(h)) {
        uint32_t np = (uint32_t)((n + CRPM_HEAP_PAGE - 1) >> PAGE_SHIFT), g = span_alloc(h, np);
        if (!g)
            return NULL;
        ent *e = ENT(h, g);
        e->kind = E_LARGE;
        e->len = (uint16_t)np;
        set_tail(h, g, np, E_TAIL);
        G->used += (uint64_t)np * CRPM_HEAP_PAGE;
        G->blocks++;
        return PAGE_AT(h, g);
    }
    if (n > h->limit) {
        crpm_error(CRPM_ERR_NOMEM, "%zu bytes exceed the heap's %llu reserved (heap_size)", n,
                   (unsigned long long)h->limit);
        return NULL;
    }
    uint64_t k = huge_arenas(h, n), a = arenas_take(h, k);
    if (!a)
        return NULL;
    arena_hdr *ai = ARENA(h, a);
    memset(ai, 0, sizeof *ai);
    ai->magic = ARENA_MAGIC;
    ai->kind = A_HUGE;
    ai->narenas = (uint32_t)k;
    G->used += huge_bytes(h, k);
    G->blocks++;
    return (char *)ai + (size_t)h->hpages * CRPM_HEAP_PAGE;
}

static void free_locked(crpm_heap *h, const blk *b)
{
    glob *G = h->g;
    G->used -= b->size;
    G->blocks--;
    if (b->kind == B_HUGE) {
        arenas_release(h, b->a, ARENA(h, b->a)->narenas);
        return;
    }
    ent *e = ENT(h, b->g);
    if (b->kind == B_LARGE) {
        span_release(h, b->g, e->len);
        return;
    }
    unsigned c = e->cls;
    char *o = PAGE_AT(h, b->g) + (size_t)b->idx * h->size[c];
    store16(o, e->head);
    store64(o + 8, FREE_MARK);
    e->head = (uint16_t)(b->idx + 1);
    e->nfree++;
    if (b->g == G->cur[c])
        return;
    if (e->nfree == h->cap[c]) { /* empty: back to the pages (it was on the partial list unless it held one) */
        if (h->cap[c] > 1)
            list_del(h, &G->partial[c], b->g);
        span_release(h, b->g, h->slab_pages);
    } else if (e->nfree == 1) {
        list_push(h, &G->partial[c], b->g);
    }
}

/* Large block b resized in place to np pages, if its right neighbour allows. */
static int large_resize(crpm_heap *h, const blk *b, uint32_t np)
{
    ent *e = ENT(h, b->g);
    uint32_t len = e->len, hi = arena_hi(h, b->a);
    if (np < len) {
        e->len = (uint16_t)np;
        set_tail(h, b->g, np, E_TAIL);
        h->g->used -= (uint64_t)(len - np) * CRPM_HEAP_PAGE;
        span_release(h, b->g + np, len - np);
        return 1;
    }
    uint32_t r = b->g + len;
    if (r >= hi || ENT(h, r)->kind != E_FREE || ENT(h, r)->len < np - len)
        return 0;
    uint32_t rl = ENT(h, r)->len;
    free_remove(h, r);
    if (rl > np - len)
        free_insert(h, b->g + np, rl - (np - len));
    ARENA(h, b->a)->nfree -= (uint16_t)(np - len);
    e->len = (uint16_t)np;
    set_tail(h, b->g, np, E_TAIL);
    h->g->used += (uint64_t)(np - len) * CRPM_HEAP_PAGE;
    return 1;
}

/* Huge block b resized in place to k arenas, if the arenas after it allow. */
static int huge_resize(crpm_heap *h, const blk *b, uint64_t k)
{
    glob *G = h->g;
    arena_hdr *ai = ARENA(h, b->a);
    uint64_t cur = ai->narenas, end = b->a + cur;
    if (k < cur) {
        for (uint64_t x = b->a + k; x < end; x++)
            arena_mark(h, x, 1);
    } else {
        uint64_t x = end;
        while (x < G->top && x < b->a + k && arena_free(h, x))
            x++;
        if (x < b->a + k && (x < G->top || b->a + k > h->limit / h->stride || extend_to(h, b->a + k) != 0))
            return 0;
        for (uint64_t y = end; y < b->a + k; y++)
            arena_mark(h, y, 0);
        if (b->a + k > G->top)
            G->top = b->a + k;
    }
    ai->narenas = (uint32_t)k;
    G->used = G->used - b->size + huge_bytes(h, k);
    return 1;
}

/* p resized in place to n bytes where its kind of block allows. */
static int resize_in_place(crpm_heap *h, const blk *b, size_t n)
{
    if (b->kind == B_SMALL)
        return n <= CRPM_HEAP_SMALL_MAX && ENT(h, b->g)->cls < NCLS16 && class_of(n) == ENT(h, b->g)->cls;
    if (b->kind == B_LARGE)
        return n > CRPM_HEAP_SMALL_MAX && n <= large_max(h) &&
               large_resize(h, b, (uint32_t)((n + CRPM_HEAP_PAGE - 1) >> PAGE_SHIFT));
    return n > large_max(h) && huge_resize(h, b, huge_arenas(h, n));
}

/* ---- public calls ---------------------------------------------------------- */

void *crpm_heap_alloc(crpm_heap *h, size_t n)
{
    int held = lock_taken(h);
    void *p = alloc_locked(h, n, 16);
    lock_release(h, held);
    return p;
}

/* Alignments below 16 get 16 (malloc's), except 8 for 24, 40 and 56 bytes. */
void *crpm_heap_alloc_aligned(crpm_heap *h, size_t align, size_t n)
{
    if (!align || (align & (align - 1)) || align > CRPM_HEAP_PAGE) {
        crpm_error(CRPM_ERR_INVAL, "alignment %zu: a power of two up to %u expected", align, CRPM_HEAP_PAGE);
        return NULL;
    }
    int held = lock_taken(h);
    void *p = alloc_locked(h, n, align);
    lock_release(h, held);
    return p;
}

void *crpm_heap_calloc(crpm_heap *h, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        crpm_error(CRPM_ERR_NOMEM, "calloc of %zu elements of %zu bytes overflows", n, size);
        return NULL;
    }
    void *p = crpm_heap_alloc(h, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

int crpm_heap_free(crpm_heap *h, void *p)
{
    if (!p)
        return CRPM_SUCCESS;
    blk b;
    int held = lock_taken(h);
    int ok = lookup(h, p, &b);
    if (ok)
        free_locked(h, &b);
    lock_release(h, held);
    return ok ? CRPM_SUCCESS : crpm_error(CRPM_ERR_INVAL, "free(%p): not a block of the heap (freed twice?)", p);
}

void *crpm_heap_realloc(crpm_heap *h, void *p, size_t n)
{
    if (!p)
        return crpm_heap_alloc(h, n);
    if (n == 0) {
        crpm_heap_free(h, p);
        return NULL;
    }
    blk b;
    int held = lock_taken(h);
    void *q = NULL;
    if (!lookup(h, p, &b))
        crpm_error(CRPM_ERR_INVAL, "realloc(%p): not a block of the heap", p);
    else if (resize_in_place(h, &b, n))
        q = p;
    else if ((q = alloc_locked(h, n, 16)) != NULL) {
        memcpy(q, p, b.size < n ? b.size : n);
        free_locked(h, &b);
    }
    lock_release(h, held);
    return q;
}

size_t crpm_heap_usable(crpm_heap *h, const void *p)
{
    blk b;
    int held = lock_taken(h);
    size_t n = p && lookup(h, p, &b) ? b.size : 0;
    lock_release(h, held);
    return n;
}

int crpm_heap_set_root(crpm_heap *h, int idx, void *p)
{
    if (idx < 0 || idx >= CRPM_HEAP_ROOTS)
        return crpm_error(CRPM_ERR_RANGE, "root %d: roots are 0 .. %d", idx, CRPM_HEAP_ROOTS - 1);
    int held = lock_taken(h);
    uint64_t off = (uint64_t)((uintptr_t)p - (uintptr_t)h->mem);
    int inside = !p || ((uintptr_t)p >= (uintptr_t)h->mem && off < h->g->extent);
    if (inside)
        h->g->roots[idx] = (uint64_t)(uintptr_t)p;
    lock_release(h, held);
    return inside ? CRPM_SUCCESS
                  : crpm_error(CRPM_ERR_INVAL, "root %d: %p is not in the heap: a root must lead to heap memory",
                               idx, p);
}

void *crpm_heap_get_root(crpm_heap *h, int idx)
{
    if (idx < 0 || idx >= CRPM_HEAP_ROOTS) {
        crpm_error(CRPM_ERR_RANGE, "root %d: roots are 0 .. %d", idx, CRPM_HEAP_ROOTS - 1);
        return NULL;
    }
    int held = lock_taken(h);
    void *p = (void *)(uintptr_t)h->g->roots[idx];
    lock_release(h, held);
    return p;
}

void crpm_heap_trim(crpm_heap *h)
{
    int held = lock_taken(h);
    glob *G = h->g;
    for (unsigned c = 0; c < NCLS; c++) {
        uint32_t g = G->cur[c];
        if (g && ENT(h, g)->nfree == h->cap[c]) {
            G->cur[c] = 0;
            span_release(h, g, h->slab_pages);
        }
    }
    lock_release(h, held);
}

#ifdef CRPM_HEAP_INSTRUMENTED
/* tells the pass this is libcrpm, not a program's module (no constructor) */
__attribute__((used)) static const char crpm_instr_library = 1;
#endif

int crpm_heap_instrumented(void)
{
#ifdef CRPM_HEAP_INSTRUMENTED
    return 1;
#else
    return 0;
#endif
}

uint64_t crpm_heap_used_bytes(crpm_heap *h)
{
    int held = lock_taken(h);
    uint64_t u = h->g->used;
    lock_release(h, held);
    return u;
}

uint64_t crpm_heap_extent(crpm_heap *h)
{
    int held = lock_taken(h);
    uint64_t x = h->g->extent;
    lock_release(h, held);
    return x;
}

void crpm_heap_get_info(crpm_heap *h, crpm_heap_info *out)
{
    int held = lock_taken(h);
    const glob *G = h->g;
    out->base = G->base;
    out->extent = G->extent;
    out->capacity = h->limit;
    out->used = G->used;
    out->blocks = G->blocks;
    out->arena_bytes = h->stride;
    out->arenas = G->top;
    memcpy(out->roots, G->roots, sizeof out->roots);
    lock_release(h, held);
}

/* ---- create, attach -------------------------------------------------------- */

static uint32_t header_pages(unsigned as)
{
    uint64_t apages = 1ull << (as - PAGE_SHIFT);
    return (uint32_t)((sizeof(arena_hdr) + apages * sizeof(ent) + CRPM_HEAP_PAGE - 1) / CRPM_HEAP_PAGE);
}

uint64_t crpm_heap_arena_bytes(unsigned arena_shift)
{
    unsigned as = arena_shift ? arena_shift : CRPM_HEAP_ARENA_SHIFT;
    return ((1ull << (as - PAGE_SHIFT)) + header_pages(as)) * CRPM_HEAP_PAGE;
}

static crpm_heap *new_handle(void *mem, unsigned as, crpm_heap_grow_fn grow, void *arg)
{
    crpm_heap *h = calloc(1, sizeof *h);
    if (!h) {
        crpm_error(CRPM_ERR_NOMEM, "heap: out of memory");
        return NULL;
    }
    h->mem = mem;
    h->as = as;
    h->apages = 1u << (as - PAGE_SHIFT);
    h->hpages = header_pages(as);
    h->ppa = h->apages + h->hpages;
    h->slab_pages = h->apages >= 512 ? SLAB_PAGES_MAX : SLAB_PAGES_MAX / 4;
    h->stride = (uint64_t)h->ppa * CRPM_HEAP_PAGE;
    h->div = ((1ull << 40) + h->ppa - 1) / h->ppa;
    h->gpages = (uint32_t)((sizeof(glob) + BITMAP_MAX_ARENAS / 8 + CRPM_HEAP_PAGE - 1) / CRPM_HEAP_PAGE);
    h->g = (glob *)(void *)((char *)mem + (size_t)h->hpages * CRPM_HEAP_PAGE);
    h->grow = grow;
    h->grow_arg = arg;
    atomic_init(&h->lock, 0);
    for (unsigned c = 0; c < NCLS; c++) {
        h->size[c] = class_size(c);
        h->cap[c] = h->slab_pages * CRPM_HEAP_PAGE / h->size[c];
        h->inv[c] = (uint32_t)((1ull << 32) / h->size[c] + 1);
    }
    return h;
}

/* The bytes a heap of these arenas may use within `reserve`: whole arenas,
 * at most the bitmap's and CRPM_HEAP_MAX_BYTES. */
static uint64_t limit_of(const crpm_heap *h, uint64_t reserve)
{
    uint64_t n = reserve / h->stride, most = CRPM_HEAP_MAX_BYTES / h->stride;
    if (n > BITMAP_MAX_ARENAS)
        n = BITMAP_MAX_ARENAS;
    return (n < most ? n : most) * h->stride;
}

int crpm_heap_create(crpm_heap **out, void *mem, uint64_t reserve, unsigned arena_shift, crpm_heap_grow_fn grow,
                     void *arg)
{
#ifdef CRPM_HEAP_INSTRUMENTED
    crpm_marks_set_heap_instrumented();
#endif
    *out = NULL;
    unsigned as = arena_shift ? arena_shift : CRPM_HEAP_ARENA_SHIFT;
    if (as < CRPM_HEAP_ARENA_SHIFT_MIN || as > CRPM_HEAP_ARENA_SHIFT_MAX)
        return crpm_error(CRPM_ERR_INVAL, "heap: arenas of 2^%u bytes: 2^%d .. 2^%d expected", as,
                          CRPM_HEAP_ARENA_SHIFT_MIN, CRPM_HEAP_ARENA_SHIFT_MAX);
    if (!mem || ((uintptr_t)mem & (CRPM_HEAP_PAGE - 1)))
        return crpm_error(CRPM_ERR_INVAL, "heap: region %p is not page aligned", mem);
    crpm_heap *h = new_handle(mem, as, grow, arg);
    if (!h)
        return CRPM_ERR_NOMEM;
    h->limit = limit_of(h, reserve);
    h->reserve = reserve;
    int rc = CRPM_SUCCESS;
    if (h->limit == 0)
        rc = crpm_error(CRPM_ERR_NOMEM, "heap: %llu bytes reserved, one arena needs %llu",
                        (unsigned long long)reserve, (unsigned long long)h->stride);
    else if (h->gpages + h->slab_pages > h->apages)
        rc = crpm_error(CRPM_ERR_INVAL, "heap: arenas of 2^%u bytes are too small for the global header", as);
    else if (grow)
        rc = grow(arg, mem, h->stride);
    if (rc != 0) {
        free(h);
        return rc;
    }
    glob *G = h->g;
    memset(G, 0, sizeof *G + sizeof G->freemap[0]);
    G->magic = HEAP_MAGIC;
    G->version = HEAP_VERSION;
    G->arena_shift = as;
    G->base = (uint64_t)(uintptr_t)mem;
    G->capacity = BITMAP_MAX_ARENAS;
    G->top = 1;
    G->extent = h->stride;
    arena_init(h, 0);
    *out = h;
    return CRPM_SUCCESS;
}

int crpm_heap_attach(crpm_heap **out, void *mem, uint64_t extent, uint64_t reserve, int check_base,
                     crpm_heap_grow_fn grow, void *arg)
{
#ifdef CRPM_HEAP_INSTRUMENTED
    crpm_marks_set_heap_instrumented();
#endif
    *out = NULL;
    if (!mem || ((uintptr_t)mem & (CRPM_HEAP_PAGE - 1)))
        return crpm_error(CRPM_ERR_CORRUPT, "heap: region %p is not page aligned", mem);
    /* the header sits after arena 0's header pages, which depend on the arena size */
    const glob *G = NULL;
    for (unsigned as = CRPM_HEAP_ARENA_SHIFT_MIN; as <= CRPM_HEAP_ARENA_SHIFT_MAX && !G; as++) {
        uint64_t at = (uint64_t)header_pages(as) * CRPM_HEAP_PAGE;
        const glob *c = (const glob *)(const void *)((const char *)mem + at);
        if (at + sizeof *c <= extent && c->magic == HEAP_MAGIC && c->arena_shift == as)
            G = c;
    }
    if (!G)
        return crpm_error(CRPM_ERR_CORRUPT, "heap: no heap header in the %llu bytes at %p", (unsigned long long)extent,
                          mem);
    if (G->version != HEAP_VERSION)
        return crpm_error(CRPM_ERR_VERSION, "heap: format version %u, this library reads %u", G->version,
                          HEAP_VERSION);
    crpm_heap *h = new_handle(mem, G->arena_shift, grow, arg);
    if (!h)
        return CRPM_ERR_NOMEM;
    int rc = CRPM_SUCCESS;
    if (G->capacity != BITMAP_MAX_ARENAS || G->extent > extent || G->extent % h->stride || G->top == 0 ||
        G->top * h->stride > G->extent || G->extent > limit_of(h, CRPM_HEAP_MAX_BYTES))
        rc = crpm_error(CRPM_ERR_CORRUPT, "heap: header says %llu arenas in %llu bytes, %llu bytes restored",
                        (unsigned long long)G->top, (unsigned long long)G->extent, (unsigned long long)extent);
    else if (check_base && G->base != (uint64_t)(uintptr_t)mem)
        rc = crpm_error(CRPM_ERR_MISMATCH, "heap: created at %#llx, restored at %p: its pointers would be wrong",
                        (unsigned long long)G->base, mem);
    else if (limit_of(h, reserve) < G->extent)
        rc = crpm_error(CRPM_ERR_RANGE, "heap: the saved heap spans %llu bytes, more than the %llu reserved "
                        "(heap_size)", (unsigned long long)G->extent, (unsigned long long)reserve);
    if (rc != 0) {
        free(h);
        return rc;
    }
    h->limit = limit_of(h, reserve);
    h->reserve = reserve;
    *out = h;
    return CRPM_SUCCESS;
}

void crpm_heap_close(crpm_heap *h) { free(h); }

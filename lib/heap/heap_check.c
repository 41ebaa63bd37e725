/* crpm_heap_check: every invariant of the heap (heap.c), walked from the
 * region alone, so that tests and tools can tell a consistent heap from a
 * damaged one (restored images, crash images, a heap after any sequence). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "heap_int.h"

typedef struct walk {
    crpm_heap *h;
    uint64_t npages;      /* pages of arenas [0, top) */
    uint8_t *mark;        /* per page: 1 free-span start, 2 slab start */
    uint64_t used, blocks, free_spans, partial, free_pages, slabs, large, huge, free_arenas;
} walk;

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return crpm_error(CRPM_ERR_CORRUPT, "heap check: %s", msg);
}

static int check_slab(walk *w, uint32_t g, uint32_t end)
{
    crpm_heap *h = w->h;
    const ent *e = ENT(h, g);
    if (g + h->slab_pages > end)
        return bad("slab at page %u runs past its arena", g);
    for (uint32_t i = 1; i < h->slab_pages; i++)
        if (ENT(h, g + i)->kind != E_SLAB_PAGE || ENT(h, g + i)->len != i)
            return bad("slab at page %u: page %u does not point back to it", g, g + i);
    if (e->cls >= NCLS)
        return bad("slab at page %u: class %u", g, e->cls);
    uint32_t cap = h->cap[e->cls], sz = h->size[e->cls], n = 0;
    if (e->len > cap || e->nfree > cap)
        return bad("slab at page %u: %u handed out, %u free of %u", g, e->len, e->nfree, cap);
    uint8_t seen[SLAB_PAGES_MAX * CRPM_HEAP_PAGE / 16 / 8];
    memset(seen, 0, sizeof seen);
    for (uint32_t i = e->head; i; n++) {
        if (i - 1 >= e->len || n >= cap || (seen[(i - 1) / 8] >> ((i - 1) % 8) & 1))
            return bad("slab at page %u: free list broken at object %u", g, i - 1);
        seen[(i - 1) / 8] |= (uint8_t)(1u << ((i - 1) % 8));
        uint16_t next;
        memcpy(&next, PAGE_AT(h, g) + (size_t)(i - 1) * sz, 2);
        i = next;
    }
    if (e->nfree != n + (cap - e->len))
        return bad("slab at page %u: %u free, %u on its list and %u never used", g, e->nfree, n, cap - e->len);
    int cur = h->g->cur[e->cls] == g;
    if (e->nfree == cap && !cur)
        return bad("slab at page %u: empty but kept", g);
    w->partial += !cur && e->nfree > 0;
    w->used += (uint64_t)(cap - e->nfree) * sz;
    w->blocks += cap - e->nfree;
    w->slabs++;
    w->mark[g] = 2;
    return CRPM_SUCCESS;
}

/* The spans of normal arena a, in address order. */
static int check_arena(walk *w, uint64_t a)
{
    crpm_heap *h = w->h;
    uint32_t g = arena_lo(h, a), end = arena_hi(h, a), freep = 0;
    int prev_free = 0, rc;
    while (g < end) {
        const ent *e = ENT(h, g);
        uint32_t n = e->kind == E_SLAB ? h->slab_pages : e->len;
        if (e->kind == E_SLAB) {
            if ((rc = check_slab(w, g, end)) != 0)
                return rc;
        } else if (e->kind == E_FREE || e->kind == E_LARGE) {
            if (n == 0 || g + n > end)
                return bad("span at page %u: %u pages past its arena", g, n);
            if (n > 1 && (ENT(h, g + n - 1)->kind != E_TAIL || ENT(h, g + n - 1)->len != n - 1))
                return bad("span at page %u: its last page does not point back to it", g);
        } else {
            return bad("page %u: kind %u where a span should start", g, e->kind);
        }
        if (e->kind == E_FREE) {
            if (prev_free)
                return bad("free spans at pages %u and before were not merged", g);
            freep += n;
            w->free_spans++;
            w->mark[g] = 1;
        } else if (e->kind == E_LARGE) {
            w->used += (uint64_t)n * CRPM_HEAP_PAGE;
            w->blocks++;
            w->large++;
        }
        prev_free = e->kind == E_FREE;
        g += n;
    }
    if (freep != ARENA(h, a)->nfree)
        return bad("arena %llu: %u free pages, its count says %u", (unsigned long long)a, freep,
                   ARENA(h, a)->nfree);
    if (a && freep == usable_pages(h, a))
        return bad("arena %llu is entirely free but was not released", (unsigned long long)a);
    w->free_pages += freep;
    return CRPM_SUCCESS;
}

static int check_arenas(walk *w)
{
    crpm_heap *h = w->h;
    const glob *G = h->g;
    for (uint64_t a = 0; a < G->top;) {
        if (a && arena_free(h, a)) {
            w->free_arenas++;
            a++;
            continue;
        }
        const arena_hdr *ai = ARENA(h, a);
        if (ai->magic != ARENA_MAGIC)
            return bad("arena %llu: no arena header", (unsigned long long)a);
        if (ai->kind == A_HUGE) {
            if (!a || !ai->narenas || a + ai->narenas > G->top)
                return bad("arena %llu: huge block of %u arenas", (unsigned long long)a, ai->narenas);
            for (uint64_t x = a + 1; x < a + ai->narenas; x++)
                if (arena_free(h, x))
                    return bad("arena %llu: part of a huge block and free", (unsigned long long)x);
            w->used += huge_bytes(h, ai->narenas);
            w->blocks++;
            w->huge++;
            a += ai->narenas;
            continue;
        }
        if (ai->kind != A_NORMAL)
            return bad("arena %llu: kind %u and not free", (unsigned long long)a, ai->kind);
        int rc = check_arena(w, a);
        if (rc != 0)
            return rc;
        a++;
    }
    return CRPM_SUCCESS;
}

/* Walks list *head: every member has mark `want` and (prev, next) agree;
 * `fn` checks each; returns the length or -1 with the error set. */
static long check_list(walk *w, uint32_t head, uint8_t want, const char *what, unsigned which,
                       int (*fn)(walk *, uint32_t, unsigned))
{
    long n = 0;
    uint32_t prev = 0;
    for (uint32_t g = head; g; g = ENT(w->h, g)->next, n++) {
        if (g >= w->npages || w->mark[g] != want || ENT(w->h, g)->prev != prev || (uint64_t)n > w->npages) {
            bad("%s %u: page %u is not a member in its place", what, which, g);
            return -1;
        }
        if (fn && fn(w, g, which) != 0)
            return -1;
        w->mark[g] |= 4; /* each member once */
        prev = g;
    }
    return n;
}

static int in_bin(walk *w, uint32_t g, unsigned b)
{
    return bin_of(ENT(w->h, g)->len) == b ? CRPM_SUCCESS : bad("free span at page %u is in bin %u", g, b);
}

static int in_class(walk *w, uint32_t g, unsigned c)
{
    const ent *e = ENT(w->h, g);
    return e->cls == c && w->h->g->cur[c] != g && e->nfree > 0 && e->nfree < w->h->cap[c]
               ? CRPM_SUCCESS
               : bad("slab at page %u on class %u's partial list: class %u, %u free", g, c, e->cls, e->nfree);
}

static int check_lists(walk *w)
{
    crpm_heap *h = w->h;
    const glob *G = h->g;
    uint64_t spans = 0, partial = 0;
    for (unsigned b = 0; b < NBINS; b++) {
        long n = check_list(w, G->bins[b], 1, "bin", b, in_bin);
        if (n < 0)
            return CRPM_ERR_CORRUPT;
        if (((G->binmap[b / 64] >> (b % 64)) & 1) != (n > 0))
            return bad("bin %u: bitmap and list disagree", b);
        spans += (uint64_t)n;
    }
    for (unsigned c = 0; c < NCLS; c++) {
        long n = check_list(w, G->partial[c], 2, "class", c, in_class);
        if (n < 0)
            return CRPM_ERR_CORRUPT;
        partial += (uint64_t)n;
        uint32_t g = G->cur[c];
        if (g && (g >= w->npages || (w->mark[g] & 3) != 2 || ENT(h, g)->cls != c))
            return bad("class %u: its current slab (page %u) is not a slab of the class", c, g);
    }
    if (spans != w->free_spans)
        return bad("%llu free spans, %llu in the bins", (unsigned long long)w->free_spans, (unsigned long long)spans);
    if (partial != w->partial)
        return bad("%llu slabs with free objects, %llu on partial lists", (unsigned long long)w->partial,
                   (unsigned long long)partial);
    return CRPM_SUCCESS;
}

int crpm_heap_check(crpm_heap *h, FILE *out)
{
    crpm_heap_lock(h);
    const glob *G = h->g;
    walk w;
    memset(&w, 0, sizeof w);
    w.h = h;
    w.npages = G->top * h->ppa;
    int rc = CRPM_SUCCESS;
    if (G->top * h->stride > G->extent)
        rc = bad("%llu arenas beyond the extent of %llu bytes", (unsigned long long)G->top,
                 (unsigned long long)G->extent);
    if (rc == 0 && !(w.mark = calloc(w.npages, 1)))
        rc = crpm_error(CRPM_ERR_NOMEM, "heap check: out of memory");
    if (rc == 0)
        rc = check_arenas(&w);
    if (rc == 0)
        rc = check_lists(&w);
    if (rc == 0 && (w.used != G->used || w.blocks != G->blocks))
        rc = bad("blocks hold %llu bytes in %llu blocks, the header counts %llu in %llu", (unsigned long long)w.used,
                 (unsigned long long)w.blocks, (unsigned long long)G->used, (unsigned long long)G->blocks);
    for (int i = 0; rc == 0 && i < CRPM_HEAP_ROOTS; i++)
        if (G->roots[i] && (G->roots[i] < G->base || G->roots[i] - G->base >= G->extent))
            rc = bad("root %d (%#llx) is outside the heap", i, (unsigned long long)G->roots[i]);
    if (rc == 0 && out)
        fprintf(out, "heap: %llu bytes in %llu blocks (%llu slabs, %llu large, %llu huge); %llu arenas of %llu bytes "
                "(%llu free), %llu free pages in %llu spans\n", (unsigned long long)w.used,
                (unsigned long long)w.blocks, (unsigned long long)w.slabs, (unsigned long long)w.large,
                (unsigned long long)w.huge, (unsigned long long)G->top, (unsigned long long)h->stride,
                (unsigned long long)w.free_arenas, (unsigned long long)w.free_pages,
                (unsigned long long)w.free_spans);
    free(w.mark);
    crpm_heap_unlock(h);
    return rc;
}

/* The persistent-heap allocator alone (lib/heap), checked against a model:
 *
 *   model    random malloc / calloc / aligned / realloc / free sequences:
 *            contents preserved, no overlap, alignment, usable >= asked and
 *            within the fragmentation bound, used-byte accounting, every
 *            invariant (crpm_heap_check) along the way; then everything freed
 *            leaves the heap as fresh (one free span per arena, no lost page);
 *   frag     a steady random workload: the extent stays within a bound of
 *            the peak of live bytes;
 *   full     exhaustion: NULL with "heap is full" in crpm_last_error, the
 *            heap still consistent and usable, every size class and kind;
 *   determ   the same sequence twice (and on a copy restored byte for byte)
 *            gives the same offsets;
 *   bad      invalid frees and reallocs are refused, not followed;
 *   threads  four threads allocating and freeing at once.
 *
 *   test_heap_model MODE [SEED] [OPS] [ARENA_SHIFT]                         */
#include <pthread.h>
#include <sys/mman.h>
#include "check.h"
#include "error.h"
#include "heap.h"

#define RESERVE ((uint64_t)1 << 30)

typedef struct region {
    char *mem;
    uint64_t reserve, mapped;
} region;

static int grow(void *arg, void *base, uint64_t bytes)
{
    region *r = arg;
    if ((char *)base != r->mem || bytes > r->reserve)
        return crpm_error(CRPM_ERR_NOMEM, "test region: grow to %llu", (unsigned long long)bytes);
    if (bytes > r->mapped && mprotect(r->mem, bytes, PROT_READ | PROT_WRITE) != 0)
        return crpm_error(CRPM_ERR_NOMEM, "test region: mprotect");
    if (bytes > r->mapped)
        r->mapped = bytes;
    return CRPM_SUCCESS;
}

static void region_open(region *r, uint64_t reserve)
{
    r->mem = mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(r->mem != MAP_FAILED, "mmap %llu", (unsigned long long)reserve);
    r->reserve = reserve;
    r->mapped = 0;
}

static void region_close(region *r) { munmap(r->mem, r->reserve); }

/* ---- the model -------------------------------------------------------------- */

typedef struct live {
    char *p;
    size_t n, usable;
    uint64_t tag;
} live;

typedef struct model {
    crpm_heap *h;
    live *v;
    size_t n, cap;
    uint64_t used;
    unsigned as;
} model;

/* Word i of a block holds tag * (i + 1) (the tail bytes their share of it). */
static void fill(char *p, size_t n, uint64_t tag)
{
    size_t i = 0;
    for (; (i + 1) * 8 <= n; i++) {
        uint64_t v = tag * (i + 1) | 1;
        memcpy(p + i * 8, &v, 8);
    }
    uint64_t v = tag * (i + 1) | 1;
    memcpy(p + i * 8, &v, n - i * 8);
}

static int intact(const char *p, size_t n, uint64_t tag)
{
    size_t i = 0;
    for (; (i + 1) * 8 <= n; i++) {
        uint64_t v = tag * (i + 1) | 1;
        if (memcmp(p + i * 8, &v, 8))
            return 0;
    }
    uint64_t v = tag * (i + 1) | 1;
    return memcmp(p + i * 8, &v, n - i * 8) == 0;
}

/* The bound docs/heap.md states: small max(n + 15, n * 9/8), large n + 4095,
 * huge less than one arena beyond n. */
static int within_bound(const model *m, size_t n, size_t usable)
{
    if (n == 0)
        n = 1;
    if (usable < n)
        return 0;
    if (n <= CRPM_HEAP_SMALL_MAX && usable <= CRPM_HEAP_SMALL_MAX)
        return usable <= n + 15 || usable <= n + n / 8;
    if (usable < n + CRPM_HEAP_PAGE)
        return 1;
    /* huge: blocks beyond an arena's data pages take whole arenas (data and
     * header pages: less than one arena and 1/128 of it more) */
    size_t arena = (size_t)1 << m->as;
    return n > arena && usable < n + arena + arena / 128 + 2 * CRPM_HEAP_PAGE;
}

static void add(model *m, char *p, size_t n, uint64_t tag, size_t align)
{
    size_t u = crpm_heap_usable(m->h, p);
    /* malloc's blocks are 16-aligned (align 16 here); asked ones at least 8 */
    CHECK(((uintptr_t)p % (align < 8 ? 8 : align)) == 0, "%p not aligned to %zu", (void *)p, align);
    size_t up = (n + align - 1) / align * align;
    CHECK(within_bound(m, up ? up : align, u), "%zu bytes asked (aligned to %zu), %zu usable: beyond the bound",
          n, align, u);
    fill(p, n, tag);
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 1024;
        m->v = realloc(m->v, m->cap * sizeof *m->v);
        REQUIRE(m->v, "out of memory");
    }
    m->v[m->n++] = (live){p, n, u, tag};
    m->used += u;
}

static void drop(model *m, size_t k)
{
    live *b = &m->v[k];
    CHECK(intact(b->p, b->n, b->tag), "block %p (%zu bytes) changed before free", (void *)b->p, b->n);
    m->used -= b->usable;
    CHECK(crpm_heap_free(m->h, b->p) == 0, "free %p: %s", (void *)b->p, crpm_last_error());
    m->v[k] = m->v[--m->n];
}

static int by_ptr(const void *a, const void *b)
{
    const live *x = a, *y = b;
    return (x->p > y->p) - (x->p < y->p);
}

/* No overlap, contents intact, accounting and every invariant. */
static void verify(model *m)
{
    qsort(m->v, m->n, sizeof *m->v, by_ptr);
    for (size_t i = 0; i < m->n; i++) {
        CHECK(intact(m->v[i].p, m->v[i].n, m->v[i].tag), "block %p changed", (void *)m->v[i].p);
        if (i + 1 < m->n)
            CHECK(m->v[i].p + m->v[i].usable <= m->v[i + 1].p, "blocks %p+%zu and %p overlap", (void *)m->v[i].p,
                  m->v[i].usable, (void *)m->v[i + 1].p);
    }
    CHECK(crpm_heap_used_bytes(m->h) == m->used, "used %llu, model %llu", (unsigned long long)crpm_heap_used_bytes(m->h),
          (unsigned long long)m->used);
    CHECK(crpm_heap_check(m->h, NULL) == 0, "%s", crpm_last_error());
}

static size_t rnd_size(uint64_t *s, unsigned as)
{
    uint64_t r = rnd_below(s, 1000);
    if (r < 600)
        return rnd_below(s, 257);
    if (r < 900)
        return 257 + rnd_below(s, CRPM_HEAP_SMALL_MAX);
    if (r < 980)
        return CRPM_HEAP_SMALL_MAX + rnd_below(s, 240u << 10);
    if (r < 998)
        return CRPM_HEAP_SMALL_MAX + rnd_below(s, (1u << as) / 2);
    return ((size_t)1 << as) / 2 + rnd_below(s, (size_t)3 << as);
}

/* One random operation on the model. */
static void step(model *m, uint64_t *s)
{
    uint64_t op = rnd_below(s, 100), tag = rnd(s);
    if (m->n && op < 45) {
        drop(m, rnd_below(s, m->n));
    } else if (m->n && op < 55) { /* realloc: contents up to the smaller size kept */
        size_t k = rnd_below(s, m->n), n = rnd_size(s, m->as);
        live b = m->v[k];
        char *q = crpm_heap_realloc(m->h, b.p, n);
        if (!q && n == 0) { /* freed */
            m->v[k] = m->v[--m->n];
            m->used -= b.usable;
            CHECK(crpm_heap_usable(m->h, b.p) == 0, "realloc(p, 0) left p allocated");
            return;
        }
        if (!q) {
            CHECK(n > 0 && strstr(crpm_last_error(), "full"), "realloc to %zu: NULL: %s", n, crpm_last_error());
            return;
        }
        size_t keep = b.n < n ? b.n : n;
        CHECK(intact(q, keep, b.tag), "realloc %zu -> %zu lost contents", b.n, n);
        m->v[k] = m->v[--m->n];
        m->used -= b.usable;
        add(m, q, n, tag, 16);
    } else {
        size_t n = rnd_size(s, m->as), align = 16;
        char *p;
        if (op < 65) {
            p = crpm_heap_calloc(m->h, n, 1);
            for (size_t i = 0; p && i < n; i++)
                if (p[i]) {
                    CHECK(0, "calloc'd byte %zu of %zu is %d", i, n, p[i]);
                    break;
                }
        } else if (op < 70) {
            align = (size_t)1 << rnd_below(s, 13);
            p = crpm_heap_alloc_aligned(m->h, align, n);
        } else {
            p = crpm_heap_alloc(m->h, n);
        }
        if (!p) {
            CHECK(strstr(crpm_last_error(), "full") != NULL, "alloc %zu: NULL: %s", n, crpm_last_error());
            return;
        }
        add(m, p, n, tag, align);
    }
}

static void free_all(model *m)
{
    while (m->n)
        drop(m, m->n - 1);
}

/* After every block is freed: nothing used, every arena but 0 released, and
 * arena 0 one free span apart from empty current slabs. */
static void check_fresh(model *m, const char *when)
{
    crpm_heap_info in;
    crpm_heap_trim(m->h);
    crpm_heap_get_info(m->h, &in);
    CHECK(in.used == 0 && in.blocks == 0, "%s: %llu bytes in %llu blocks left", when, (unsigned long long)in.used,
          (unsigned long long)in.blocks);
    CHECK(crpm_heap_check(m->h, NULL) == 0, "%s: %s", when, crpm_last_error());
    /* the largest block arena 0 can hold must still fit in every arena:
     * a huge block as large as the heap's arenas above 0 */
    if (in.arenas > 1) {
        size_t big = (size_t)(in.arenas - 1) * (size_t)in.arena_bytes - (64u << 10); /* header pages aside */
        void *p = crpm_heap_alloc(m->h, big);
        CHECK(p != NULL, "%s: %zu bytes (all arenas but 0) do not fit: %s", when, big, crpm_last_error());
        crpm_heap_info after;
        crpm_heap_get_info(m->h, &after);
        CHECK(after.arenas == in.arenas, "%s: the heap grew from %llu to %llu arenas for them", when,
              (unsigned long long)in.arenas, (unsigned long long)after.arenas);
        crpm_heap_free(m->h, p);
    }
}

static void test_model(uint64_t seed, long ops, unsigned as)
{
    region r;
    region_open(&r, RESERVE);
    model m = {0};
    m.as = as;
    REQUIRE(crpm_heap_create(&m.h, r.mem, RESERVE, as, grow, &r) == 0, "create: %s", crpm_last_error());
    uint64_t s = seed;
    for (long i = 0; i < ops; i++) {
        step(&m, &s);
        if (i % 5000 == 4999)
            verify(&m);
        if (check_failures() > 20)
            break;
    }
    verify(&m);
    free_all(&m);
    check_fresh(&m, "model");
    free(m.v);
    crpm_heap_close(m.h);
    region_close(&r);
}

/* Live bytes held near a target while blocks come and go: the extent must
 * stay within 1.5 x the peak of live bytes plus the fixed part (a slab per
 * class, arena 0's header, two arenas of slack). */
static void test_frag(uint64_t seed, long ops, unsigned as)
{
    region r;
    region_open(&r, RESERVE);
    model m = {0};
    m.as = as;
    REQUIRE(crpm_heap_create(&m.h, r.mem, RESERVE, as, grow, &r) == 0, "create: %s", crpm_last_error());
    uint64_t s = seed, peak = 0, arena = 1ull << as;
    for (int phase = 0; phase < 4; phase++) {
        uint64_t target = (uint64_t)(16 + 16 * phase) << 20; /* live bytes swing 16..64 MiB */
        for (long i = 0; i < ops; i++) {
            size_t n = rnd_size(&s, as);
            if (n > arena)
                n = 1 + rnd_below(&s, 4096);
            if (m.used + n < target || !m.n) {
                char *p = crpm_heap_alloc(m.h, n);
                REQUIRE(p, "alloc %zu: %s", n, crpm_last_error());
                add(&m, p, n, rnd(&s), 16);
            } else {
                drop(&m, rnd_below(&s, m.n));
            }
            if (m.used > peak)
                peak = m.used;
        }
    }
    verify(&m);
    crpm_heap_info in;
    crpm_heap_get_info(m.h, &in);
    uint64_t bound = peak + peak / 2 + 64ull * 65536 + 2 * arena;
    printf("frag: peak live %.1f MiB, extent %.1f MiB (%llu arenas of %llu KiB), bound %.1f MiB\n",
           (double)peak / 1048576, (double)in.extent / 1048576, (unsigned long long)in.arenas,
           (unsigned long long)(arena >> 10), (double)bound / 1048576);
    CHECK((uint64_t)in.arenas * arena <= bound, "%llu arenas for a peak of %llu live bytes",
          (unsigned long long)in.arenas, (unsigned long long)peak);
    free_all(&m);
    check_fresh(&m, "frag");
    free(m.v);
    crpm_heap_close(m.h);
    region_close(&r);
}

/* Exhaustion with each kind of block: NULL, a clear message, still usable. */
static void test_full(unsigned as)
{
    uint64_t arena = 1ull << as;
    size_t sizes[] = {24, 1000, 16384, 40000, (size_t)arena / 2, (size_t)arena * 2};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        region r;
        region_open(&r, 8 * arena);
        model m = {0};
        m.as = as;
        REQUIRE(crpm_heap_create(&m.h, r.mem, 8 * arena, as, grow, &r) == 0, "create: %s", crpm_last_error());
        size_t got = 0;
        for (;;) {
            char *p = crpm_heap_alloc(m.h, sizes[k]);
            if (!p)
                break;
            add(&m, p, sizes[k], got++, 16);
            REQUIRE(got < (8 * arena) / 16 + 1, "never full");
        }
        CHECK(strstr(crpm_last_error(), "heap is full") && strstr(crpm_last_error(), "heap_size"),
              "%zu-byte blocks: message '%s'", sizes[k], crpm_last_error());
        CHECK(got > 0 && (uint64_t)got * sizes[k] >= 8 * arena / 2, "%zu-byte blocks: only %zu fit in %llu bytes",
              sizes[k], got, (unsigned long long)(8 * arena));
        CHECK(crpm_heap_realloc(m.h, m.v[0].p, (size_t)arena * 7) == NULL, "realloc beyond the heap succeeded");
        CHECK(crpm_heap_calloc(m.h, SIZE_MAX / 2, 4) == NULL && strstr(crpm_last_error(), "overflow"),
              "calloc overflow: %s", crpm_last_error());
        verify(&m);
        drop(&m, 0);
        char *p = crpm_heap_alloc(m.h, sizes[k]);
        CHECK(p != NULL, "%zu bytes after a free: %s", sizes[k], crpm_last_error());
        if (p)
            add(&m, p, sizes[k], 7, 16);
        free_all(&m);
        check_fresh(&m, "full");
        free(m.v);
        crpm_heap_close(m.h);
        region_close(&r);
    }
}

/* A hash of the offsets a seeded sequence returns. */
static uint64_t run_offsets(region *r, crpm_heap *h, uint64_t seed, long ops, unsigned as)
{
    model m = {0};
    m.h = h;
    m.as = as;
    uint64_t s = seed, hash = 1469598103934665603ull;
    for (long i = 0; i < ops; i++) {
        size_t before = m.n;
        step(&m, &s);
        if (m.n > before || (m.n && rnd_below(&s, 2)))
            hash = (hash ^ (uint64_t)(m.v[m.n - 1].p - r->mem)) * 1099511628211ull;
    }
    free(m.v);
    return hash;
}

static void test_determinism(uint64_t seed, long ops, unsigned as)
{
    region a, b;
    region_open(&a, RESERVE);
    region_open(&b, RESERVE);
    crpm_heap *ha, *hb;
    REQUIRE(crpm_heap_create(&ha, a.mem, RESERVE, as, grow, &a) == 0, "create: %s", crpm_last_error());
    REQUIRE(crpm_heap_create(&hb, b.mem, RESERVE, as, grow, &b) == 0, "create: %s", crpm_last_error());
    uint64_t x = run_offsets(&a, ha, seed, ops, as), y = run_offsets(&b, hb, seed, ops, as);
    CHECK(x == y, "the same sequence gave other offsets (%llx, %llx)", (unsigned long long)x, (unsigned long long)y);
    /* a copy of a's region, restored byte for byte into b, continues as a does */
    crpm_heap_info in;
    crpm_heap_get_info(ha, &in);
    crpm_heap_close(hb);
    REQUIRE(grow(&b, b.mem, in.extent) == 0, "grow b");
    memcpy(b.mem, a.mem, in.extent);
    CHECK(crpm_heap_attach(&hb, b.mem, in.extent, RESERVE, 1, grow, &b) == CRPM_ERR_MISMATCH,
          "attach at another address accepted");
    REQUIRE(crpm_heap_attach(&hb, b.mem, in.extent, RESERVE, 0, grow, &b) == 0, "attach: %s", crpm_last_error());
    CHECK(crpm_heap_check(hb, NULL) == 0, "restored copy: %s", crpm_last_error());
    x = run_offsets(&a, ha, seed + 1, ops, as);
    y = run_offsets(&b, hb, seed + 1, ops, as);
    CHECK(x == y, "the restored copy went another way (%llx, %llx)", (unsigned long long)x, (unsigned long long)y);
    /* damage is found, never followed */
    crpm_heap_get_info(hb, &in);
    size_t hdr = (64 + ((size_t)1 << (as - 12)) * 16 + 4095) / 4096 * 4096; /* arena 0's header pages */
    memset(b.mem + hdr + 600, 0x5a, 64); /* the global header's current slabs */
    CHECK(crpm_heap_check(hb, NULL) == CRPM_ERR_CORRUPT, "a damaged header passed the check");
    crpm_heap_close(ha);
    crpm_heap_close(hb);
    region_close(&a);
    region_close(&b);
}

static void test_bad(unsigned as)
{
    region r;
    region_open(&r, RESERVE);
    crpm_heap *h;
    REQUIRE(crpm_heap_create(&h, r.mem, RESERVE, as, grow, &r) == 0, "create: %s", crpm_last_error());
    char *p = crpm_heap_alloc(h, 100), *q = crpm_heap_alloc(h, 100000), *z = crpm_heap_alloc(h, (size_t)3 << as);
    REQUIRE(p && q && z, "alloc: %s", crpm_last_error());
    int x;
    CHECK(crpm_heap_free(h, &x) == CRPM_ERR_INVAL, "a stack address was freed");
    CHECK(crpm_heap_free(h, p + 16) == CRPM_ERR_INVAL, "the middle of a small block was freed");
    CHECK(crpm_heap_free(h, q + 4096) == CRPM_ERR_INVAL, "the middle of a large block was freed");
    CHECK(crpm_heap_free(h, z + 4096) == CRPM_ERR_INVAL, "the middle of a huge block was freed");
    CHECK(crpm_heap_realloc(h, p + 32, 10) == NULL && strstr(crpm_last_error(), "not a block"), "realloc inside");
    char *p2 = crpm_heap_alloc(h, 100), *p3 = crpm_heap_alloc(h, 100);
    CHECK(crpm_heap_free(h, p2) == 0 && crpm_heap_free(h, p3) == 0 && crpm_heap_free(h, p2) == CRPM_ERR_INVAL,
          "small freed twice");
    CHECK(crpm_heap_realloc(h, p2, 300) == NULL, "realloc of a freed small block");
    CHECK(crpm_heap_free(h, q) == 0 && crpm_heap_free(h, q) == CRPM_ERR_INVAL, "large freed twice");
    CHECK(crpm_heap_free(h, z) == 0 && crpm_heap_free(h, z) == CRPM_ERR_INVAL, "huge freed twice");
    CHECK(crpm_heap_set_root(h, 64, p) == CRPM_ERR_RANGE && crpm_heap_set_root(h, -1, p) == CRPM_ERR_RANGE,
          "root index out of range accepted");
    CHECK(crpm_heap_set_root(h, 3, &x) == CRPM_ERR_INVAL, "a root outside the heap accepted");
    CHECK(crpm_heap_set_root(h, 63, p) == 0 && crpm_heap_get_root(h, 63) == p, "root 63");
    CHECK(crpm_heap_alloc_aligned(h, 8192, 10) == NULL && crpm_heap_alloc_aligned(h, 48, 10) == NULL,
          "bad alignments accepted");
    CHECK(crpm_heap_free(h, p) == 0, "free");
    CHECK(crpm_heap_check(h, NULL) == 0, "%s", crpm_last_error());
    crpm_heap_close(h);
    region_close(&r);
}

typedef struct targ {
    crpm_heap *h;
    uint64_t seed;
    long ops;
    int fails;
} targ;

static void *thread_main(void *arg)
{
    targ *t = arg;
    char *mine[256] = {0};
    uint64_t s = t->seed;
    for (long i = 0; i < t->ops; i++) {
        unsigned k = (unsigned)rnd_below(&s, 256);
        if (mine[k]) {
            if (!intact(mine[k], 48, (uint64_t)k * t->seed))
                t->fails++;
            crpm_heap_free(t->h, mine[k]);
            mine[k] = NULL;
        } else {
            size_t n = 48 + rnd_below(&s, rnd_below(&s, 8) ? 400 : 40000);
            if ((mine[k] = crpm_heap_alloc(t->h, n)))
                fill(mine[k], 48, (uint64_t)k * t->seed);
            else
                t->fails++;
        }
    }
    for (int k = 0; k < 256; k++)
        crpm_heap_free(t->h, mine[k]);
    return NULL;
}

static void test_threads(long ops, unsigned as)
{
    region r;
    region_open(&r, RESERVE);
    crpm_heap *h;
    REQUIRE(crpm_heap_create(&h, r.mem, RESERVE, as, grow, &r) == 0, "create: %s", crpm_last_error());
    pthread_t th[4];
    targ t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (targ){h, 1000 + (uint64_t)i, ops, 0};
        REQUIRE(pthread_create(&th[i], NULL, thread_main, &t[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(t[i].fails == 0, "thread %d: %d blocks damaged or refused", i, t[i].fails);
    }
    CHECK(crpm_heap_used_bytes(h) == 0, "%llu bytes left", (unsigned long long)crpm_heap_used_bytes(h));
    CHECK(crpm_heap_check(h, stdout) == 0, "%s", crpm_last_error());
    crpm_heap_close(h);
    region_close(&r);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "model";
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
    long ops = argc > 3 ? atol(argv[3]) : 200000;
    unsigned as = argc > 4 ? (unsigned)atoi(argv[4]) : CRPM_HEAP_ARENA_SHIFT;
    check_set_note(crpm_last_error);
    if (!strcmp(mode, "model"))
        test_model(seed, ops, as);
    else if (!strcmp(mode, "frag"))
        test_frag(seed, ops, as);
    else if (!strcmp(mode, "full"))
        test_full(as);
    else if (!strcmp(mode, "determ"))
        test_determinism(seed, ops, as);
    else if (!strcmp(mode, "bad"))
        test_bad(as);
    else if (!strcmp(mode, "threads"))
        test_threads(ops, as);
    else
        REQUIRE(0, "unknown mode %s", mode);
    return check_summary(mode);
}

/* The persistent heap of the public API (docs/heap.md): crpm_malloc and
 * friends over lib/heap, the address range reserved at init, and the heap's
 * part in checkpoints and recovery (api_heap.h; api.c calls it).
 *
 * The heap is made lazily, by the first allocation or root: a job that
 * configures heap_size but never allocates saves an empty array. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include "api_heap.h"
#include "crpm.h"
#include "error.h"
#include "heap.h"
#include "heap_map.h"

static struct {
    char *mem;                  /* the reserved range; NULL: no heap configured (or not initialised) */
    uint64_t size;              /* its bytes (heap_size) */
    uint64_t saved;             /* prepare's saved_bytes, for recovered */
    _Atomic(crpm_heap *) h;     /* NULL until made or recovered */
    pthread_mutex_t make;       /* one thread makes it */
    char config[256];           /* configuration file, for messages */
} hs = {.make = PTHREAD_MUTEX_INITIALIZER};

static int grow(void *arg, void *base, uint64_t bytes)
{
    (void)arg;
    return crpm_heap_commit(base, bytes);
}

static crpm_heap *heap(void) { return atomic_load_explicit(&hs.h, memory_order_acquire); }

/* The heap, made if need be; NULL with the reason set (and *rc). */
static crpm_heap *heap_or_make(const char *fn, int *rc_out)
{
    crpm_heap *h = heap();
    if (h)
        return h;
    pthread_mutex_lock(&hs.make);
    int rc = CRPM_SUCCESS;
    if (!(h = heap()) && !hs.mem)
        rc = crpm_error(CRPM_ERR_STATE, "%s: no heap: call crpm_init with heap_size set in [basic] (config %s)", fn,
                        hs.config[0] ? hs.config : "not read yet");
    else if (!h && (rc = crpm_heap_create(&h, hs.mem, hs.size, 0, grow, NULL)) == 0)
        atomic_store_explicit(&hs.h, h, memory_order_release);
    pthread_mutex_unlock(&hs.make);
    if (rc_out)
        *rc_out = rc;
    return rc == 0 ? h : NULL;
}

int crpm_heap_array(crpm_array *a)
{
    if (!hs.mem)
        return 0;
    crpm_heap *h = heap();
    /* a recovery in progress reads the saved heap's bytes */
    *a = (crpm_array){CRPM_HEAP_ARRAY_ID, CRPM_TC_BYTE, 1, h ? crpm_heap_extent(h) : hs.saved, hs.mem, NULL, NULL};
    return 1;
}

int crpm_heapctx_open(const crpm_config *cfg, const char *config_name)
{
    snprintf(hs.config, sizeof hs.config, "%s", config_name ? config_name : "(none)");
    if (!cfg->heap_size)
        return CRPM_SUCCESS;
    /* refused here rather than by every allocation later */
    uint64_t arena = crpm_heap_arena_bytes(0), unit = 4u << 20;
    if (cfg->heap_size < arena)
        return crpm_error(CRPM_ERR_CONFIG, "crpm_init: heap_size in [basic] of config %s reserves %llu bytes (the "
                          "value rounded up to a multiple of 4 MiB), less than one heap arena, which takes %llu bytes "
                          "(%llu of blocks and %llu of their page table): set heap_size to at least %lluM", hs.config,
                          (unsigned long long)cfg->heap_size, (unsigned long long)arena,
                          (unsigned long long)(1ull << CRPM_HEAP_ARENA_SHIFT),
                          (unsigned long long)(arena - (1ull << CRPM_HEAP_ARENA_SHIFT)),
                          (unsigned long long)(((arena + unit - 1) / unit * unit) >> 20));
    char keys[512];
    snprintf(keys, sizeof keys, "heap_base in [advanced] (or a smaller heap_size in [basic]) of config %s",
             hs.config);
    void *mem;
    int rc = crpm_heap_reserve(cfg->heap_base, cfg->heap_size, keys, &mem);
    if (rc != 0)
        return rc;
    hs.mem = mem;
    hs.size = cfg->heap_size;
    return CRPM_SUCCESS;
}

void crpm_heapctx_close(void)
{
    crpm_heap *h = heap();
    atomic_store(&hs.h, NULL);
    crpm_heap_close(h);
    crpm_heap_unreserve(hs.mem, hs.size);
    hs.mem = NULL;
    hs.size = 0;
}

int crpm_heapctx_prepare(uint64_t saved_bytes)
{
    hs.saved = saved_bytes;
    if (saved_bytes && !hs.mem)
        return crpm_error(CRPM_ERR_MISMATCH, "the checkpoint holds a persistent heap of %llu bytes, this run has none: "
                          "set heap_size in [basic] (config %s)", (unsigned long long)saved_bytes, hs.config);
    if (saved_bytes > hs.size)
        return crpm_error(CRPM_ERR_MISMATCH, "the checkpoint's persistent heap spans %llu bytes, more than heap_size "
                          "(%llu) in [basic] of config %s", (unsigned long long)saved_bytes,
                          (unsigned long long)hs.size, hs.config);
    if (!hs.mem)
        return CRPM_SUCCESS;
    /* whatever this run allocated before is replaced: the range starts over */
    crpm_heap *h = heap();
    atomic_store(&hs.h, NULL);
    crpm_heap_close(h);
    int rc = crpm_heap_decommit(hs.mem, hs.size);
    return rc == 0 && saved_bytes ? crpm_heap_commit(hs.mem, saved_bytes) : rc;
}

int crpm_heapctx_recovered(int rc)
{
    uint64_t saved = hs.saved;
    hs.saved = 0;
    if (!hs.mem || !saved)
        return rc;
    crpm_heap *h = NULL;
    if (rc == 0)
        rc = crpm_heap_attach(&h, hs.mem, saved, hs.size, 1, grow, NULL);
    if (rc != 0) {
        crpm_heap_decommit(hs.mem, hs.size); /* partly read: not a heap */
        return rc;
    }
    atomic_store_explicit(&hs.h, h, memory_order_release);
    return CRPM_SUCCESS;
}

/* ---- public calls ------------------------------------------------------------ */

void *crpm_malloc(size_t size)
{
    crpm_heap *h = heap_or_make("crpm_malloc", NULL);
    return h ? crpm_heap_alloc(h, size) : NULL;
}

void *crpm_calloc(size_t n, size_t size)
{
    crpm_heap *h = heap_or_make("crpm_calloc", NULL);
    return h ? crpm_heap_calloc(h, n, size) : NULL;
}

void *crpm_aligned_alloc(size_t alignment, size_t size)
{
    crpm_heap *h = heap_or_make("crpm_aligned_alloc", NULL);
    return h ? crpm_heap_alloc_aligned(h, alignment, size) : NULL;
}

void *crpm_realloc(void *p, size_t size)
{
    crpm_heap *h = p ? heap() : heap_or_make("crpm_realloc", NULL);
    if (!h) {
        if (p)
            crpm_error(CRPM_ERR_INVAL, "crpm_realloc(%p): there is no heap", p);
        return NULL;
    }
    return crpm_heap_realloc(h, p, size);
}

void crpm_free(void *p)
{
    crpm_heap *h = heap();
    if (p && !h)
        crpm_error(CRPM_ERR_INVAL, "crpm_free(%p): there is no heap", p);
    else if (p)
        crpm_heap_free(h, p);
}

size_t crpm_malloc_usable_size(const void *p)
{
    crpm_heap *h = heap();
    return h && p ? crpm_heap_usable(h, p) : 0;
}

int crpm_set_root(int idx, void *p)
{
    int rc;
    crpm_heap *h = heap_or_make("crpm_set_root", &rc);
    return h ? crpm_heap_set_root(h, idx, p) : rc;
}

void *crpm_get_root(int idx)
{
    crpm_heap *h = heap();
    if (!h && (idx < 0 || idx >= CRPM_ROOTS))
        crpm_error(CRPM_ERR_RANGE, "crpm_get_root(%d): roots are 0 .. %d", idx, CRPM_ROOTS - 1);
    return h ? crpm_heap_get_root(h, idx) : NULL;
}

size_t crpm_heap_used(void)
{
    crpm_heap *h = heap();
    return h ? (size_t)crpm_heap_used_bytes(h) : 0;
}

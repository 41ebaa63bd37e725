/* Persistence-domain simulator for crash tests.
 *
 * The file mapping plays the volatile cache; `media` is what has surely reached
 * the persistence domain.  flush() marks 64-B lines; drain() first offers the
 * current state to a crash callback and then moves the marked lines to media.
 * A crash image keeps media, and for every line whose cached content differs
 * (stored but not drained, flushed or not: caches may evict any line at any
 * time) takes the old line, the new one, or a mix of their 8-B words.
 *
 * Several threads may store at once (checkpoint workers): lines are marked
 * with atomic ORs, so a crash image at the next drain sees their stores in
 * whatever order they came.  A store that arrives while a drain runs is a
 * protocol error (a worker still writing after the fence) and is counted. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "persist_file.h"
#include "persist_sim.h"

#define LINE 64

typedef struct sim_state {
    char *path;
    char *media;
    uint64_t *marked; /* bitmap of flushed lines */
    crpm_sim_drain_cb cb;
    void *cb_arg;
} sim_state;

static crpm_sim_drain_cb next_cb;
static void *next_arg;
static atomic_int draining;           /* a drain is running */
static atomic_ullong late_stores;     /* stores that came during one */
static atomic_int jitter;             /* stores yield now and then: other interleavings */

unsigned long long crpm_sim_late_stores(void) { return atomic_load(&late_stores); }
void crpm_sim_set_jitter(int on) { atomic_store(&jitter, on); }

static void maybe_yield(void)
{
    static _Thread_local uint64_t x;
    if (!atomic_load_explicit(&jitter, memory_order_relaxed))
        return;
    if (!x)
        x = (uint64_t)(uintptr_t)&x | 1;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    if (x % 8 == 0)
        sched_yield();
}

void crpm_sim_set_callback(crpm_sim_drain_cb cb, void *arg)
{
    next_cb = cb;
    next_arg = arg;
}

static int sim_alloc(sim_state *s, size_t old, size_t size)
{
    char *media = realloc(s->media, size);
    uint64_t *marked = realloc(s->marked, (size / LINE + 63) / 64 * 8);
    if (media) s->media = media;
    if (marked) s->marked = marked;
    if (!media || !marked)
        return crpm_error(CRPM_ERR_NOMEM, "simulator: out of memory");
    memset(s->media + old, 0, size - old);
    memset(s->marked, 0, (size / LINE + 63) / 64 * 8);
    return CRPM_SUCCESS;
}

static int sim_map(crpm_media *m, const char *path)
{
    sim_state *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return crpm_error(CRPM_ERR_NOMEM, "simulator: out of memory");
    }
    int rc = crpm_file_map(m, path);
    if (rc == 0 && (m->size % LINE) != 0)
        rc = crpm_error(CRPM_ERR_INVAL, "simulator: file size not a multiple of 64");
    if (rc == 0)
        rc = sim_alloc(s, 0, m->size);
    if (rc) {
        if (m->base) crpm_file_unmap(m);
        free(s->media); free(s->marked); free(s->path); free(s);
        return rc;
    }
    /* the file as it is on open is durable */
    memcpy(s->media, m->base, m->size);
    s->cb = next_cb;
    s->cb_arg = next_arg;
    m->priv = s;
    return CRPM_SUCCESS;
}

static void sim_flush(crpm_media *m, const void *addr, size_t n)
{
    sim_state *s = m->priv;
    if (!n) return;
    if (atomic_load(&draining))
        atomic_fetch_add(&late_stores, 1);
    size_t off = (size_t)((const char *)addr - m->base);
    for (size_t l = off / LINE; l <= (off + n - 1) / LINE; l++)
        __atomic_fetch_or(&s->marked[l / 64], 1ull << (l % 64), __ATOMIC_RELAXED);
}

static void sim_copy(crpm_media *m, void *dst, const void *src, size_t n)
{
    maybe_yield();
    memcpy(dst, src, n);
    sim_flush(m, dst, n);
}

static int sim_fill(crpm_media *m, void *dst, const void *src, size_t n)
{
    sim_copy(m, dst, src, n);
    return CRPM_SUCCESS;
}

static void sim_drain(crpm_media *m)
{
    sim_state *s = m->priv;
    atomic_store(&draining, 1);
    if (s->cb)
        s->cb(s->cb_arg, m);
    size_t nlines = m->size / LINE;
    for (size_t w = 0; w < (nlines + 63) / 64; w++) {
        uint64_t bits = s->marked[w];
        while (bits) {
            size_t l = w * 64 + (size_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            memcpy(s->media + l * LINE, m->base + l * LINE, LINE);
        }
        s->marked[w] = 0;
    }
    atomic_store(&draining, 0);
}

static int sim_resize(crpm_media *m, size_t new_size)
{
    sim_state *s = m->priv;
    size_t old = m->size;
    sim_drain(m);
    int rc = crpm_file_resize(m, s->path, new_size);
    if (rc) return rc;
    return sim_alloc(s, old, m->size);
}

static int sim_reserve(crpm_media *m, size_t off, size_t len)
{
    return crpm_file_reserve(((sim_state *)m->priv)->path, off, len);
}

static void sim_unmap(crpm_media *m)
{
    sim_state *s = m->priv;
    if (s) {
        free(s->media); free(s->marked); free(s->path); free(s);
    }
    m->priv = NULL;
    crpm_file_unmap(m);
}

const crpm_backend crpm_backend_sim = {"sim", sim_map, sim_resize, sim_reserve, sim_unmap, sim_copy, sim_fill, sim_flush, sim_drain,
                                       NULL, NULL}; /* views share the state: its updates are atomic */

static uint64_t next_rand(uint64_t *x)
{
    /* xorshift64*: cheap, good enough to pick lines */
    *x ^= *x >> 12; *x ^= *x << 25; *x ^= *x >> 27;
    return *x * 0x2545F4914F6CDD1Dull;
}

void crpm_sim_crash_image(crpm_media *m, int mode, uint64_t *rng, char *out)
{
    sim_state *s = m->priv;
    memcpy(out, s->media, m->size);
    if (mode == CRPM_SIM_NONE_LANDED)
        return;
    for (size_t off = 0; off < m->size; off += LINE) {
        /* most pages hold no line in flight: skip them a page at a time */
        if (off % 4096 == 0 && m->size - off >= 4096 && memcmp(s->media + off, m->base + off, 4096) == 0) {
            off += 4096 - LINE;
            continue;
        }
        if (memcmp(s->media + off, m->base + off, LINE) == 0)
            continue;
        if (mode == CRPM_SIM_ALL_LANDED) {
            memcpy(out + off, m->base + off, LINE);
            continue;
        }
        uint64_t r = next_rand(rng);
        switch (r % 3) {
        case 0: break; /* line never left the cache */
        case 1: memcpy(out + off, m->base + off, LINE); break;
        default: /* torn: each aligned 8-B word independently */
            for (size_t w = 0; w < LINE; w += 8)
                if ((r >> (8 + w / 8)) & 1)
                    memcpy(out + off + w, m->base + off + w, 8);
        }
    }
}

const char *crpm_sim_media(crpm_media *m)
{
    return ((sim_state *)m->priv)->media;
}

/* The runtime of instrumented change tracking: see marks.h. */
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "crpm_instrument.h"
#include "marks.h"

#define GS CRPM_INSTR_GRANULE_SHIFT
#define VA_BITS 47 /* user addresses Linux hands out without a hint */

CRPM_API uint64_t crpm_instr_box;          /* 0: no range */
CRPM_API unsigned char *crpm_instr_shadow; /* set once, before the box is first set */

static struct {
    pthread_mutex_t lock;
    uintptr_t base[CRPM_MARKS_RANGES], end[CRPM_MARKS_RANGES];
    int live[CRPM_MARKS_RANGES];
    int ready;        /* 1: shadow and membarrier ready; -1: not available */
    const char *why;  /* when -1 */
} tab = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_int heap_instr, modules;

CRPM_API void crpm_instr_module(void) { atomic_fetch_add(&modules, 1); }

int crpm_marks_modules(void) { return atomic_load(&modules); }

void crpm_marks_set_heap_instrumented(void) { atomic_store(&heap_instr, 1); }

int crpm_marks_heap_instrumented(void) { return atomic_load(&heap_instr); }

/* Under the lock. */
static int prepare(void)
{
    if (tab.ready)
        return tab.ready;
    tab.ready = -1;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0) {
        tab.why = "instrumented tracking needs membarrier(2) (Linux >= 4.14): compared instead";
        return -1;
    }
    void *m = mmap(NULL, (size_t)1 << (VA_BITS - GS), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        tab.why = "no address space for the instrumented tracker's shadow map (512 GiB reserved, a limit on "
                  "virtual memory?): compared instead";
        return -1;
    }
    madvise(m, (size_t)1 << (VA_BITS - GS), MADV_NOHUGEPAGE); /* a mark commits 4 KiB, not 2 MiB */
    __atomic_store_n(&crpm_instr_shadow, (unsigned char *)m, __ATOMIC_RELEASE);
    tab.ready = 1;
    return 1;
}

static void publish(void)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < CRPM_MARKS_RANGES; i++)
        if (tab.live[i]) {
            if (tab.base[i] < lo) lo = tab.base[i];
            if (tab.end[i] > hi) hi = tab.end[i];
        }
    uint64_t box = 0;
    if (hi) {
        uint64_t u0 = (lo > CRPM_INSTR_MAX_STORE ? lo - CRPM_INSTR_MAX_STORE : 0) >> CRPM_INSTR_BOX_SHIFT;
        uint64_t u1 = ((hi - 1) >> CRPM_INSTR_BOX_SHIFT) + 1;
        box = u0 | (u1 - u0) << 32;
    }
    __atomic_store_n(&crpm_instr_box, box, __ATOMIC_RELEASE);
}

int crpm_marks_add(uintptr_t base, uint64_t len, const char **why)
{
    if (!len || base + len < base || base + len > (uintptr_t)1 << VA_BITS) {
        *why = "not in the 47-bit address space the instrumented tracker covers: compared instead";
        return -1;
    }
    pthread_mutex_lock(&tab.lock);
    int h = -1;
    if (prepare() < 0)
        *why = tab.why;
    for (int i = 0; tab.ready > 0 && i < CRPM_MARKS_RANGES && h < 0; i++)
        if (!tab.live[i])
            h = i;
    if (h >= 0) {
        tab.base[h] = base;
        tab.end[h] = base + len;
        tab.live[h] = 1;
        publish();
    } else if (tab.ready > 0) {
        *why = "more arrays than the instrumented tracker's table holds: compared instead";
    }
    pthread_mutex_unlock(&tab.lock);
    return h;
}

void crpm_marks_remove(int h)
{
    if (h < 0 || h >= CRPM_MARKS_RANGES)
        return;
    pthread_mutex_lock(&tab.lock);
    tab.live[h] = 0;
    publish();
    pthread_mutex_unlock(&tab.lock);
}

/* Granules [g0, g1] marked. */
static void mark_granules(uintptr_t g0, uintptr_t g1)
{
    unsigned char *sh = __atomic_load_n(&crpm_instr_shadow, __ATOMIC_ACQUIRE);
    if (!sh || g1 >= (uintptr_t)1 << (VA_BITS - GS))
        return; /* no range was ever added, or beyond every range */
    for (uintptr_t g = g0; g <= g1; g++)
        if (!__atomic_load_n(&sh[g], __ATOMIC_RELAXED))
            __atomic_store_n(&sh[g], 1, __ATOMIC_RELEASE);
}

CRPM_API void crpm_instr_mark(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    mark_granules(a >> GS, (a + (n ? n - 1 : 0)) >> GS);
}

CRPM_API void crpm_instr_mark_range(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, z = a + n;
    uint64_t box = __atomic_load_n(&crpm_instr_box, __ATOMIC_ACQUIRE);
    uint64_t lo = box & 0xffffffffu, span = box >> 32;
    if (!n || z < a)
        return;
    uint64_t u0 = a >> CRPM_INSTR_BOX_SHIFT, u1 = (z - 1) >> CRPM_INSTR_BOX_SHIFT;
    if (u1 < lo || u0 >= lo + span)
        return;
    /* only the part inside the box: a huge write elsewhere touches no shadow */
    uintptr_t blo = (uintptr_t)lo << CRPM_INSTR_BOX_SHIFT, bhi = (uintptr_t)(lo + span) << CRPM_INSTR_BOX_SHIFT;
    if (a < blo) a = blo;
    if (z > bhi) z = bhi;
    mark_granules(a >> GS, (z - 1) >> GS);
}

CRPM_API void crpm_instr_written(const void *p, size_t n) { crpm_instr_mark_range(p, n); }

/* Takes the marks of granule bytes m[k] for k in [k0, k1), into gbits. */
static void take_bytes(unsigned char *m, uintptr_t k0, uintptr_t k1, uint64_t *gbits)
{
    for (uintptr_t k = k0; k < k1; k++)
        if (__atomic_load_n(&m[k], __ATOMIC_RELAXED) && __atomic_exchange_n(&m[k], 0, __ATOMIC_ACQ_REL))
            gbits[k / 64] |= 1ull << (k % 64);
}

void crpm_marks_take(uintptr_t base, uint64_t len, uint64_t *gbits)
{
    unsigned char *sh = __atomic_load_n(&crpm_instr_shadow, __ATOMIC_ACQUIRE);
    if (!sh || !len)
        return;
    uintptr_t g0 = base >> GS, n = ((base + len - 1) >> GS) - g0 + 1;
    unsigned char *m = sh + g0;
    /* whole aligned words of eight marks are taken with one exchange: a
     * marker's byte store lands before it (taken) or after (kept) */
    uintptr_t k = (8 - ((uintptr_t)m & 7)) & 7;
    if (k > n)
        k = n;
    take_bytes(m, 0, k, gbits);
    for (; k + 8 <= n; k += 8) {
        uint64_t *w = (uint64_t *)(void *)(m + k), v = __atomic_load_n(w, __ATOMIC_RELAXED);
        if (!v || !(v = __atomic_exchange_n(w, 0, __ATOMIC_ACQ_REL)))
            continue;
        for (unsigned j = 0; j < 8; j++)
            if ((v >> (8 * j)) & 0xff) /* byte j of the value: memory byte j (little endian) or 7 - j */
                gbits[(k + (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? j : 7 - j)) / 64] |=
                    1ull << ((k + (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? j : 7 - j)) % 64);
    }
    take_bytes(m, k, n, gbits);
}

void crpm_marks_fence(void)
{
    /* registered when the first range was added; it cannot fail after that */
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

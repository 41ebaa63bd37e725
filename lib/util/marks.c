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

typedef struct mslot {
    _Atomic uintptr_t base, end;        /* [base, end): the range */
    _Atomic(_Atomic uint8_t *) bits;    /* its marks, a byte a block; mapped for good (reused, never unmapped) */
    _Atomic unsigned shift;
    uint64_t cap;                       /* bytes mapped at bits (writer only) */
    int live;
} mslot;

static struct {
    mslot slot[CRPM_MARKS_SLOTS];
    _Atomic uint16_t order[CRPM_MARKS_SLOTS]; /* live slots by base */
    _Atomic int n;
    _Atomic uintptr_t maxlen;          /* the longest live range: bounds the backward search */
    _Atomic unsigned seq;              /* odd while the writer changes the table */
    pthread_mutex_t lock;
    pthread_once_t once;
    int test_first;                    /* membarrier works: a mark may skip a set bit */
} tab = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

CRPM_API uint64_t crpm_instr_box; /* 0: no range */

#define RLX memory_order_relaxed

static void init_once(void)
{
    tab.test_first = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* Marks blocks [b0, b1] (inclusive): one byte each, set by a plain store,
 * so marks of any number of threads never contend for a lock or lose one
 * another (a read-modify-write of shared bits would need a locked
 * instruction, which also waits for the program's pending store). */
static void set_bytes(_Atomic uint8_t *m, uint64_t b0, uint64_t b1)
{
    int test = tab.test_first;
    for (uint64_t b = b0; b <= b1; b++)
        if (!test || !atomic_load_explicit(&m[b], RLX))
            atomic_store_explicit(&m[b], 1, memory_order_release);
}

typedef struct tgt {
    _Atomic uint8_t *bits;
    uint64_t b0, b1;
} tgt;

/* The ranges [a, z) touches: up to max targets into t (apply: marks them at
 * once, the table being stable under the lock).  -1: more than max. */
static int lookup(uintptr_t a, uintptr_t z, tgt *t, int max, int apply)
{
    int lo = 0, hi = atomic_load_explicit(&tab.n, RLX), k = 0;
    if (hi > CRPM_MARKS_SLOTS)
        hi = CRPM_MARKS_SLOTS; /* a torn read: the sequence check rejects it */
    while (lo < hi) { /* the first range starting at or after z */
        int mid = (lo + hi) / 2;
        if (atomic_load_explicit(&tab.slot[atomic_load_explicit(&tab.order[mid], RLX) % CRPM_MARKS_SLOTS].base, RLX) < z)
            lo = mid + 1;
        else
            hi = mid;
    }
    uintptr_t ml = atomic_load_explicit(&tab.maxlen, RLX);
    for (int i = lo - 1; i >= 0; i--) {
        mslot *s = &tab.slot[atomic_load_explicit(&tab.order[i], RLX) % CRPM_MARKS_SLOTS];
        uintptr_t b = atomic_load_explicit(&s->base, RLX), e = atomic_load_explicit(&s->end, RLX);
        if (b < a && a - b >= ml)
            break; /* no range starting this low reaches a */
        if (e <= a || b >= z)
            continue;
        unsigned sh = atomic_load_explicit(&s->shift, RLX);
        tgt x = {atomic_load_explicit(&s->bits, RLX), ((a > b ? a : b) - b) >> sh, ((z < e ? z : e) - 1 - b) >> sh};
        if (apply)
            set_bytes(x.bits, x.b0, x.b1);
        else if (k == max)
            return -1;
        else
            t[k++] = x;
    }
    return k;
}

static void mark(uintptr_t a, uintptr_t z)
{
    for (int spins = 0; spins < 64; spins++) {
        unsigned s0 = atomic_load_explicit(&tab.seq, memory_order_acquire);
        if (s0 & 1)
            continue;
        tgt t[4];
        int k = lookup(a, z, t, 4, 0);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&tab.seq, RLX) != s0)
            continue;
        if (k < 0)
            break;
        for (int i = 0; i < k; i++)
            set_bytes(t[i].bits, t[i].b0, t[i].b1);
        return;
    }
    /* many ranges, or a writer busy: under the lock the table holds still */
    pthread_mutex_lock(&tab.lock);
    lookup(a, z, NULL, 0, 1);
    pthread_mutex_unlock(&tab.lock);
}

CRPM_API void crpm_instr_mark(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    mark(a, a + (n ? n : 1));
}

CRPM_API void crpm_instr_mark_range(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, z = a + n;
    uint64_t box = __atomic_load_n(&crpm_instr_box, __ATOMIC_RELAXED);
    uint64_t lo = box & 0xffffffffu, span = box >> 32;
    if (!n || z < a)
        return;
    /* the units [a, z) covers against the box's */
    uint64_t u0 = a >> CRPM_INSTR_BOX_SHIFT, u1 = (z - 1) >> CRPM_INSTR_BOX_SHIFT;
    if (u1 < lo || u0 >= lo + span)
        return;
    mark(a, z);
}

CRPM_API void crpm_instr_written(const void *p, size_t n) { crpm_instr_mark_range(p, n); }

/* ---- the writer: under tab.lock ----------------------------------------------------- */

static void publish(void)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0, ml = 0;
    int n = 0;
    for (int i = 0; i < CRPM_MARKS_SLOTS; i++) {
        mslot *s = &tab.slot[i];
        if (!s->live)
            continue;
        uintptr_t b = atomic_load_explicit(&s->base, RLX), e = atomic_load_explicit(&s->end, RLX);
        if (b < lo) lo = b;
        if (e > hi) hi = e;
        if (e - b > ml) ml = e - b;
        int j = n++; /* insertion by base */
        while (j > 0 && atomic_load_explicit(&tab.slot[atomic_load_explicit(&tab.order[j - 1], RLX)].base, RLX) > b) {
            atomic_store_explicit(&tab.order[j], atomic_load_explicit(&tab.order[j - 1], RLX), RLX);
            j--;
        }
        atomic_store_explicit(&tab.order[j], (uint16_t)i, RLX);
    }
    atomic_store_explicit(&tab.n, n, RLX);
    atomic_store_explicit(&tab.maxlen, ml, RLX);
    uint64_t box = 0;
    if (n) {
        uint64_t u0 = (lo > CRPM_INSTR_MAX_STORE ? lo - CRPM_INSTR_MAX_STORE : 0) >> CRPM_INSTR_BOX_SHIFT;
        uint64_t u1 = ((hi - 1) >> CRPM_INSTR_BOX_SHIFT) + 1;
        if (u1 > 0xffffffffu) /* beyond 48-bit addresses: every store is looked up */
            box = 0xffffffff00000000ull;
        else
            box = u0 | (u1 - u0) << 32;
    }
    __atomic_store_n(&crpm_instr_box, box, __ATOMIC_RELEASE);
}

static void write_begin(void)
{
    atomic_fetch_add_explicit(&tab.seq, 1, memory_order_acq_rel);
    atomic_thread_fence(memory_order_release);
}

static void write_end(void) { atomic_fetch_add_explicit(&tab.seq, 1, memory_order_release); }

int crpm_marks_add(uintptr_t base, uint64_t len, unsigned shift, const char **why)
{
    pthread_once(&tab.once, init_once);
    if (!len || base + len < base) {
        *why = "an empty or wrapping range";
        return -1;
    }
    uint64_t words = ((len + (1ull << shift) - 1) >> shift) + 1; /* bytes */
    pthread_mutex_lock(&tab.lock);
    int h = -1;
    for (int i = 0; i < CRPM_MARKS_SLOTS && h < 0; i++) /* a free slot whose map fits, else any */
        if (!tab.slot[i].live && tab.slot[i].cap >= words)
            h = i;
    for (int i = 0; i < CRPM_MARKS_SLOTS && h < 0; i++)
        if (!tab.slot[i].live)
            h = i;
    if (h < 0) {
        pthread_mutex_unlock(&tab.lock);
        *why = "more arrays than the instrumented tracker's table holds (compared instead)";
        return -1;
    }
    mslot *s = &tab.slot[h];
    _Atomic uint8_t *bits = atomic_load_explicit(&s->bits, RLX);
    if (s->cap < words) {
        /* the old map stays mapped (a racing mark may still reach it), its pages given back */
        if (bits)
            madvise((void *)bits, s->cap, MADV_DONTNEED);
        void *m = mmap(NULL, words, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            pthread_mutex_unlock(&tab.lock);
            *why = "no memory for the instrumented tracker's block map (compared instead)";
            return -1;
        }
        bits = m;
        s->cap = words;
    } else {
        memset((void *)bits, 0, words);
    }
    write_begin();
    atomic_store_explicit(&s->bits, bits, RLX);
    atomic_store_explicit(&s->base, base, RLX);
    atomic_store_explicit(&s->end, base + len, RLX);
    atomic_store_explicit(&s->shift, shift, RLX);
    s->live = 1;
    publish();
    write_end();
    pthread_mutex_unlock(&tab.lock);
    return h;
}

void crpm_marks_remove(int h)
{
    if (h < 0 || h >= CRPM_MARKS_SLOTS)
        return;
    pthread_mutex_lock(&tab.lock);
    write_begin();
    tab.slot[h].live = 0;
    publish();
    write_end();
    pthread_mutex_unlock(&tab.lock);
}

void crpm_marks_take(int h, uint64_t *dst, uint64_t nbits)
{
    mslot *s = &tab.slot[h];
    _Atomic uint8_t *m = atomic_load_explicit(&s->bits, RLX);
    if (nbits > s->cap)
        nbits = s->cap;
    uint64_t b = 0;
    for (; b + 8 <= nbits; b += 8) { /* eight clear marks at a time */
        uint64_t v;
        memcpy(&v, (const void *)(m + b), 8);
        if (!v)
            continue;
        for (uint64_t k = b; k < b + 8; k++)
            if (atomic_load_explicit(&m[k], RLX) && atomic_exchange_explicit(&m[k], 0, memory_order_acq_rel))
                dst[k / 64] |= 1ull << (k % 64);
    }
    for (; b < nbits; b++)
        if (atomic_load_explicit(&m[b], RLX) && atomic_exchange_explicit(&m[b], 0, memory_order_acq_rel))
            dst[b / 64] |= 1ull << (b % 64);
}

void crpm_marks_fence(void)
{
    if (tab.test_first && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        tab.test_first = 0; /* cannot happen once registered; marks lock from now on, to be safe */
}

static atomic_int heap_instr;

void crpm_marks_set_heap_instrumented(void) { atomic_store(&heap_instr, 1); }

int crpm_marks_heap_instrumented(void) { return atomic_load(&heap_instr); }

/* A mock device (devops.h) for tests without a GPU: host memory stands for
 * device memory, with the CUDA table's semantics, so that CI runs the CUDA
 * kind's own code (devkind.c) through every mode.
 *
 * Device memory is a memfd mapped twice: a PROT_NONE view whose address is
 * the "device pointer" (the library faults if it ever dereferences one) and
 * a read-write view the mock (and a test, as its kernels) works on.  The
 * mock's own allocations are registered when made; an application's come
 * from tests/common/mock_gpu.h (memfd names "crpm-mock-gpu" for device and
 * "crpm-mock-managed" for managed memory, which has one read-write view as
 * managed memory is host-addressable) and are found in /proc/self/maps, so
 * that a test program linked with libcrpm.so needs no entry point of the
 * library.
 *
 * Work is queued per stream and runs only when the stream is waited for,
 * when done() happens to say so (at random: both answers are exercised) or
 * at device_sync: reading a pinned buffer before waiting sees stale bytes.
 * Failures are injected per operation (crpm_devmock_fail,
 * CRPM_TEST_DEVICE=mock:OP=N).
 *
 * Test code: linked into test programs (object library crpm_devmock) and,
 * in a build with CRPM_TEST_HOOKS and the tests, into libcrpm, where
 * CRPM_TEST_DEVICE=mock selects it when the library loads
 * (tests/CMakeLists.txt); a shipped libcrpm has none of it. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "array.h"
#include "devmock.h"
#include "error.h"
#include "fingerprint.h"

typedef struct mreg {
    uintptr_t dev;  /* the address the library sees */
    uint64_t len;   /* mapped bytes */
    char *host;     /* where the bytes are */
    int type;       /* CRPM_DMEM_DEVICE or _MANAGED */
    int own;        /* allocated by the mock (unmapped by free) */
} mreg;

enum { OP_COPY, OP_ZERO, OP_COMPARE, OP_SCAN, OP_GATHER, OP_MOVE, OP_FP };

typedef struct mop {
    int op, dir;
    void *dst;
    const void *src;
    uint64_t n, first;
    crpm_dwindow w;
} mop;

struct crpm_dstream {
    mop *q;
    size_t n, cap;
    int err; /* an error of queued work, returned by the next wait */
    struct crpm_dstream *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mreg *regs;
static size_t nregs, capregs;
static crpm_dstream *streams;
static uint64_t c_d2h, c_h2d, dev_now, dev_peak, rng = 0x9e3779b97f4a7c15ull;

static const char *const fail_names[] = {"alloc", "host_alloc", "copy", "compare", "gather", "wait", "query"};
enum { F_ALLOC, F_HOST_ALLOC, F_COPY, F_COMPARE, F_GATHER, F_WAIT, F_QUERY, F_COUNT };
static int fail_at[F_COUNT], fail_env_read;

void crpm_devmock_fail(const char *op, int n)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < F_COUNT; i++)
        if (strcmp(op, fail_names[i]) == 0)
            fail_at[i] = n;
    pthread_mutex_unlock(&mu);
}

void crpm_devmock_counters(uint64_t *d2h, uint64_t *h2d, uint64_t *peak)
{
    pthread_mutex_lock(&mu);
    if (d2h) *d2h = c_d2h;
    if (h2d) *h2d = c_h2d;
    if (peak) *peak = dev_peak;
    pthread_mutex_unlock(&mu);
}

void crpm_devmock_peak_reset(void)
{
    pthread_mutex_lock(&mu);
    dev_peak = dev_now;
    pthread_mutex_unlock(&mu);
}

/* CRPM_TEST_DEVICE=mock:copy=3,alloc=1 (once, under mu) */
static void read_env(void)
{
    if (fail_env_read)
        return;
    fail_env_read = 1;
    const char *e = getenv("CRPM_TEST_DEVICE");
    const char *p = e ? strchr(e, ':') : NULL;
    while (p && *p) {
        p++;
        for (int i = 0; i < F_COUNT; i++) {
            size_t l = strlen(fail_names[i]);
            if (strncmp(p, fail_names[i], l) == 0 && p[l] == '=')
                fail_at[i] = atoi(p + l + 1);
        }
        p = strchr(p, ',');
    }
}

/* 1 when this call of op is the one asked to fail (under mu) */
static int failing(int op)
{
    read_env();
    return fail_at[op] > 0 && --fail_at[op] == 0;
}

static int injected(int op)
{
    return crpm_error(CRPM_ERR_DEVICE, "mock device: %s failed (injected)", fail_names[op]);
}

/* ---- the memory registry --------------------------------------------------------- */

static mreg *reg_find(uintptr_t p, uint64_t n)
{
    for (size_t i = 0; i < nregs; i++)
        if (p >= regs[i].dev && p - regs[i].dev <= regs[i].len && n <= regs[i].len - (p - regs[i].dev))
            return &regs[i];
    return NULL;
}

static int reg_add(uintptr_t dev, uint64_t len, char *host, int type, int own)
{
    for (size_t i = 0; i < nregs; i++) /* a mapping the application replaced */
        if (dev < regs[i].dev + regs[i].len && regs[i].dev < dev + len && !regs[i].own) {
            regs[i] = regs[--nregs];
            i--;
        }
    if (nregs == capregs) {
        size_t c = capregs ? 2 * capregs : 64;
        mreg *r = realloc(regs, c * sizeof *r);
        if (!r)
            return crpm_error(CRPM_ERR_NOMEM, "mock device: out of memory");
        regs = r;
        capregs = c;
    }
    regs[nregs++] = (mreg){dev, len, host, type, own};
    return CRPM_SUCCESS;
}

/* The application's mock memory, from /proc/self/maps: a "---s" mapping of
 * memfd:crpm-mock-gpu and the "rw-s" one of the same inode, or one
 * "rw-s" mapping of memfd:crpm-mock-managed. */
static void rescan(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return;
    struct ent { uintptr_t lo, hi; uint64_t off, ino; int none, managed; } *v = NULL;
    size_t n = 0, cap = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        uint64_t off, ino;
        char perm[8], path[256] = "";
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %" SCNx64 " %*s %" SCNu64 " %255s", &lo, &hi, perm, &off,
                   &ino, path) < 5)
            continue;
        int gpu = strcmp(path, "/memfd:crpm-mock-gpu") == 0, man = strcmp(path, "/memfd:crpm-mock-managed") == 0;
        if (!gpu && !man)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            struct ent *x = realloc(v, cap * sizeof *x);
            if (!x)
                break;
            v = x;
        }
        v[n++] = (struct ent){lo, hi, off, ino, perm[0] == '-' && perm[1] == '-', man};
    }
    fclose(f);
    for (size_t i = 0; i < nregs; i++) /* the application's: as the maps say now (it may have unmapped some) */
        if (!regs[i].own)
            regs[i--] = regs[--nregs];
    for (size_t i = 0; i < n; i++) {
        if (v[i].managed && !v[i].none) {
            reg_add(v[i].lo, v[i].hi - v[i].lo, (char *)v[i].lo, CRPM_DMEM_MANAGED, 0);
            continue;
        }
        for (size_t j = 0; v[i].none && !v[i].managed && j < n; j++)
            if (j != i && v[j].ino == v[i].ino && !v[j].none && v[j].off == v[i].off &&
                v[j].hi - v[j].lo >= v[i].hi - v[i].lo)
                reg_add(v[i].lo, v[i].hi - v[i].lo, (char *)v[j].lo, CRPM_DMEM_DEVICE, 0);
    }
    free(v);
}

/* Where device bytes [p, p + n) are, or NULL (error set). */
static char *xlate(const void *p, uint64_t n)
{
    mreg *r = reg_find((uintptr_t)p, n);
    if (!r) {
        rescan();
        r = reg_find((uintptr_t)p, n);
    }
    if (!r) {
        crpm_error(CRPM_ERR_DEVICE, "mock device: %p + %" PRIu64 " is not device memory", p, n);
        return NULL;
    }
    return r->host + ((uintptr_t)p - r->dev);
}

static int m_query(const void *p, int *type, int *dev)
{
    pthread_mutex_lock(&mu);
    int rc = failing(F_QUERY) ? injected(F_QUERY) : CRPM_SUCCESS;
    if (rc == 0) {
        rescan();
        mreg *r = reg_find((uintptr_t)p, 1);
        *type = r ? r->type : CRPM_DMEM_HOST;
        *dev = 0;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static _Thread_local int use_depth;

static int m_use(int dev)
{
    if (dev != 0)
        return crpm_error(CRPM_ERR_DEVICE, "mock device: no device %d", dev);
    use_depth++;
    return CRPM_SUCCESS;
}

static void m_unuse(void) { use_depth--; }

int crpm_devmock_use_depth(void) { return use_depth; }

static int m_alloc(void **p, uint64_t n)
{
    pthread_mutex_lock(&mu);
    int rc = failing(F_ALLOC) ? injected(F_ALLOC) : CRPM_SUCCESS;
    uint64_t len = (n + 4095) & ~4095ull;
    int fd = rc ? -1 : memfd_create("crpm-mock-int", 0);
    void *d = MAP_FAILED, *h = MAP_FAILED;
    if (rc == 0 && (fd < 0 || ftruncate(fd, (off_t)(len ? len : 4096)) != 0 ||
                    (d = mmap(NULL, len ? len : 4096, PROT_NONE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
                    (h = mmap(NULL, len ? len : 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED))
        rc = crpm_error(CRPM_ERR_NOMEM, "mock device: no memory for %" PRIu64 " bytes: %s", n, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (rc == 0)
        rc = reg_add((uintptr_t)d, len ? len : 4096, h, CRPM_DMEM_DEVICE, 1);
    if (rc) {
        if (d != MAP_FAILED) munmap(d, len ? len : 4096);
        if (h != MAP_FAILED) munmap(h, len ? len : 4096);
    } else {
        *p = d;
        dev_now += len;
        if (dev_now > dev_peak)
            dev_peak = dev_now;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static void m_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&mu);
    mreg *r = reg_find((uintptr_t)p, 1);
    if (r && r->own && r->dev == (uintptr_t)p) {
        munmap((void *)r->dev, r->len);
        munmap(r->host, r->len);
        dev_now -= r->len;
        *r = regs[--nregs];
    }
    pthread_mutex_unlock(&mu);
}

static int m_host_alloc(void **p, uint64_t n)
{
    pthread_mutex_lock(&mu);
    int rc = failing(F_HOST_ALLOC) ? injected(F_HOST_ALLOC) : CRPM_SUCCESS;
    pthread_mutex_unlock(&mu);
    if (rc == 0 && !(*p = malloc(n ? n : 1)))
        rc = crpm_error(CRPM_ERR_NOMEM, "mock device: no pinned memory for %" PRIu64 " bytes", n);
    return rc;
}

static void m_host_free(void *p) { free(p); }

static int m_stream_new(crpm_dstream **s)
{
    if (!(*s = calloc(1, sizeof **s)))
        return crpm_error(CRPM_ERR_NOMEM, "mock device: out of memory");
    pthread_mutex_lock(&mu);
    (*s)->next = streams;
    streams = *s;
    pthread_mutex_unlock(&mu);
    return CRPM_SUCCESS;
}

static int enqueue(crpm_dstream *s, const mop *op, int fail)
{
    pthread_mutex_lock(&mu);
    int rc = failing(fail) ? injected(fail) : CRPM_SUCCESS;
    if (rc == 0 && s->n == s->cap) {
        size_t c = s->cap ? 2 * s->cap : 16;
        mop *q = realloc(s->q, c * sizeof *q);
        if (q) {
            s->q = q;
            s->cap = c;
        } else {
            rc = crpm_error(CRPM_ERR_NOMEM, "mock device: out of memory");
        }
    }
    if (rc == 0)
        s->q[s->n++] = *op;
    pthread_mutex_unlock(&mu);
    return rc;
}

static int m_copy(crpm_dstream *s, void *dst, const void *src, uint64_t n, int dir)
{
    return enqueue(s, &(mop){.op = OP_COPY, .dir = dir, .dst = dst, .src = src, .n = n}, F_COPY);
}

static int m_zero(crpm_dstream *s, void *p, uint64_t n)
{
    return enqueue(s, &(mop){.op = OP_ZERO, .dst = p, .n = n}, F_COPY);
}

static int m_compare(crpm_dstream *s, const crpm_dwindow *w)
{
    return enqueue(s, &(mop){.op = OP_COMPARE, .w = *w}, F_COMPARE);
}

static int m_scan(crpm_dstream *s, const crpm_dwindow *w)
{
    return enqueue(s, &(mop){.op = OP_SCAN, .w = *w}, F_COMPARE);
}

static int m_gather(crpm_dstream *s, const crpm_dwindow *w)
{
    return enqueue(s, &(mop){.op = OP_GATHER, .w = *w}, F_GATHER);
}

static int m_bits_move(crpm_dstream *s, uint64_t *dst, uint64_t *src, uint64_t first, uint64_t n)
{
    return enqueue(s, &(mop){.op = OP_MOVE, .dst = dst, .src = src, .first = first, .n = n}, F_COPY);
}

static int m_fingerprint(crpm_dstream *s, const void *live, void *ref, const uint64_t *keys, uint64_t bytes,
                         uint64_t blk)
{
    crpm_dwindow w = {.live = live, .ref = ref, .keys = keys, .len = bytes, .blk = blk, .kind = CRPM_DREF_FP};
    return enqueue(s, &(mop){.op = OP_FP, .w = w}, F_COMPARE);
}

/* ---- running queued work (under mu) ------------------------------------------------ */

static int bit(const uint64_t *m, uint64_t i) { return (int)(m[i / 64] >> (i % 64) & 1); }

static int run_compare(const crpm_dwindow *w)
{
    uint64_t nb = (w->len + w->blk - 1) / w->blk, b0 = w->off / w->blk, nw = (nb + 63) / 64;
    uint64_t wa = b0 / 64, wz = (b0 + nb + 63) / 64, rb = w->kind == CRPM_DREF_FP ? nb * CRPM_FP_BYTES : w->len;
    const char *live = xlate((const char *)w->live + w->off, w->len);
    char *ref = xlate((char *)w->ref + (w->kind == CRPM_DREF_FP ? b0 * CRPM_FP_BYTES : w->off), rb);
    uint64_t *force = (uint64_t *)(void *)xlate(w->force + wa, (wz - wa) * 8); /* word wa on */
    uint64_t *dchg = (uint64_t *)(void *)xlate(w->dchg + wa, (wz - wa) * 8);
    uint64_t *meta = (uint64_t *)(void *)xlate(w->meta, (nw + 1) * 8);
    const uint64_t *keys = w->kind == CRPM_DREF_FP ? (const uint64_t *)(void *)xlate(w->keys, w->blk / 2 * 8) : NULL;
    if (!live || !ref || !force || !dchg || !meta || (w->kind == CRPM_DREF_FP && !keys))
        return CRPM_ERR_DEVICE;
    for (uint64_t i = 0; i < nb; i++) {
        uint64_t o = i * w->blk, n = w->len - o < w->blk ? w->len - o : w->blk, b = b0 + i;
        int differ;
        if (w->kind == CRPM_DREF_FP) {
            uint64_t fp[2], *old = (uint64_t *)(void *)(ref + i * CRPM_FP_BYTES);
            crpm_fp_block((const unsigned char *)live + o, n, w->blk, keys, fp);
            differ = fp[0] != old[0] || fp[1] != old[1];
            old[0] = fp[0];
            old[1] = fp[1];
        } else {
            differ = memcmp(live + o, ref + o, n) != 0;
            if (differ)
                memcpy(ref + o, live + o, n);
        }
        uint64_t m = 1ull << (b % 64), x = b / 64 - wa;
        int chg = differ || w->all || (force[x] & m);
        force[x] &= ~m;
        if (chg) {
            meta[1 + i / 64] |= 1ull << (i % 64);
            dchg[x] |= m;
        }
    }
    return CRPM_SUCCESS;
}

static int run_scan(const crpm_dwindow *w)
{
    uint64_t nb = (w->len + w->blk - 1) / w->blk, nw = (nb + 63) / 64, k = 0;
    uint64_t *meta = (uint64_t *)(void *)xlate(w->meta, (nw + 1) * 8);
    uint64_t *pos = (uint64_t *)(void *)xlate(w->pos, nw * 8);
    if (!meta || !pos)
        return CRPM_ERR_DEVICE;
    for (uint64_t i = 0; i < nw; i++) {
        pos[i] = k;
        k += (uint64_t)__builtin_popcountll(meta[1 + i]);
    }
    meta[0] = k;
    return CRPM_SUCCESS;
}

static int run_gather(const crpm_dwindow *w)
{
    uint64_t nb = (w->len + w->blk - 1) / w->blk, nw = (nb + 63) / 64;
    const char *live = xlate((const char *)w->live + w->off, w->len);
    const uint64_t *meta = (const uint64_t *)(void *)xlate(w->meta, (nw + 1) * 8);
    const uint64_t *pos = (const uint64_t *)(void *)xlate(w->pos, nw * 8);
    char *pack = meta ? xlate(w->pack, meta[0] * w->blk) : NULL;
    if (!live || !meta || !pos || (!pack && meta[0]))
        return CRPM_ERR_DEVICE;
    for (uint64_t i = 0; i < nb; i++) {
        if (!bit(meta + 1, i))
            continue;
        uint64_t o = i * w->blk, n = w->len - o < w->blk ? w->len - o : w->blk;
        uint64_t k = pos[i / 64] + (uint64_t)__builtin_popcountll(meta[1 + i / 64] & ((1ull << (i % 64)) - 1));
        memcpy(pack + k * w->blk, live + o, n);
    }
    return CRPM_SUCCESS;
}

static int run_op(const mop *op)
{
    char *d, *s;
    switch (op->op) {
    case OP_COPY:
        d = op->dir == CRPM_D2H ? op->dst : xlate(op->dst, op->n);
        s = op->dir == CRPM_H2D ? (char *)op->src : xlate(op->src, op->n);
        if (!d || !s)
            return CRPM_ERR_DEVICE;
        memmove(d, s, op->n);
        c_d2h += op->dir == CRPM_D2H ? op->n : 0;
        c_h2d += op->dir == CRPM_H2D ? op->n : 0;
        return CRPM_SUCCESS;
    case OP_ZERO:
        if (!(d = xlate(op->dst, op->n)))
            return CRPM_ERR_DEVICE;
        memset(d, 0, op->n);
        return CRPM_SUCCESS;
    case OP_COMPARE:
        return run_compare(&op->w);
    case OP_SCAN:
        return run_scan(&op->w);
    case OP_GATHER:
        return run_gather(&op->w);
    case OP_MOVE: {
        uint64_t wa = op->first / 64, wz = (op->first + op->n + 63) / 64;
        uint64_t *dst = (uint64_t *)(void *)xlate((uint64_t *)op->dst + wa, (wz - wa) * 8);
        uint64_t *src = (uint64_t *)(void *)xlate((const uint64_t *)op->src + wa, (wz - wa) * 8);
        if (!dst || !src)
            return CRPM_ERR_DEVICE;
        for (uint64_t b = op->first; b < op->first + op->n; b++) {
            uint64_t m = 1ull << (b % 64), x = b / 64 - wa;
            if (src[x] & m) {
                dst[x] |= m;
                src[x] &= ~m;
            }
        }
        return CRPM_SUCCESS;
    }
    case OP_FP: {
        const crpm_dwindow *w = &op->w;
        uint64_t nb = (w->len + w->blk - 1) / w->blk;
        const char *live = xlate(w->live, w->len);
        uint64_t *ref = (uint64_t *)(void *)xlate(w->ref, nb * CRPM_FP_BYTES);
        const uint64_t *keys = (const uint64_t *)(void *)xlate(w->keys, w->blk / 2 * 8);
        if (!live || !ref || !keys)
            return CRPM_ERR_DEVICE;
        for (uint64_t i = 0; i < nb; i++) {
            uint64_t o = i * w->blk, n = w->len - o < w->blk ? w->len - o : w->blk;
            crpm_fp_block((const unsigned char *)live + o, n, w->blk, keys, ref + 2 * i);
        }
        return CRPM_SUCCESS;
    }
    }
    return crpm_error(CRPM_ERR_DEVICE, "mock device: unknown operation %d", op->op);
}

/* Runs s's queue in order; the first error stays with the stream until a
 * wait returns it, and the work queued after it is dropped (as a CUDA error
 * leaves later work of the stream undone). */
static int run_queue(crpm_dstream *s)
{
    for (size_t i = 0; i < s->n && !s->err; i++)
        s->err = run_op(&s->q[i]);
    s->n = 0;
    int rc = s->err;
    s->err = 0;
    return rc;
}

static int m_wait(crpm_dstream *s)
{
    pthread_mutex_lock(&mu);
    int rc = run_queue(s);
    if (rc == 0 && failing(F_WAIT))
        rc = injected(F_WAIT);
    pthread_mutex_unlock(&mu);
    return rc;
}

static int m_done(crpm_dstream *s)
{
    pthread_mutex_lock(&mu);
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    int busy = s->n && (rng >> 63), rc = busy ? 0 : run_queue(s);
    pthread_mutex_unlock(&mu);
    return rc < 0 ? rc : !busy;
}

static void m_stream_free(crpm_dstream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&mu);
    run_queue(s);
    for (crpm_dstream **p = &streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    pthread_mutex_unlock(&mu);
    free(s->q);
    free(s);
}

static int m_device_sync(void)
{
    pthread_mutex_lock(&mu);
    int rc = CRPM_SUCCESS;
    for (crpm_dstream *s = streams; s; s = s->next) {
        int r = run_queue(s);
        if (r && !rc)
            rc = r;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

const crpm_devops crpm_devops_mock = {"mock", m_query, m_use, m_unuse, m_alloc, m_free, m_host_alloc, m_host_free,
                                      m_stream_new, m_stream_free, m_copy, m_zero, m_wait, m_done,
                                      m_device_sync, m_compare, m_scan, m_gather, m_bits_move, m_fingerprint};

/* CRPM_TEST_DEVICE=mock[:OP=N,...] selects the mock in the program or library
 * that holds this file, before any device call. */
__attribute__((constructor)) static void select_from_env(void)
{
    const char *e = getenv("CRPM_TEST_DEVICE");
    if (e && strncmp(e, "mock", 4) == 0 && (e[4] == '\0' || e[4] == ':'))
        crpm_devops_set(&crpm_devops_mock);
}

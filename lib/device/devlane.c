/* Staging lanes (devlane.h), pinned double-buffered copies in and out, the
 * choice of device table, and what a pointer given to crpm_protect is. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "devkind.h"
#include "devlane.h"
#include "error.h"

#define POOL_KEEP 4 /* free lanes kept per device */

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static crpm_dlane *pool;
static int holders;

static void lane_free(crpm_dlane *l)
{
    const crpm_devops *o = l->ops;
    int used = o->use(l->dev) == 0;
    if (!used)
        crpm_error_clear();
    if (l->s)
        o->stream_free(l->s);
    if (l->s2)
        o->stream_free(l->s2);
    o->free(l->dpack);
    o->free(l->dmeta);
    o->free(l->dpos);
    o->host_free(l->hpack);
    o->host_free(l->hmeta);
    if (used)
        o->unuse();
    free(l);
}

/* Grows l's buffers to hold cap pack bytes (dpack too if asked) and words. */
static int lane_fit(crpm_dlane *l, uint64_t cap, uint64_t words, int dpack_too)
{
    const crpm_devops *o = l->ops;
    int rc = CRPM_SUCCESS;
    cap = (cap + (1u << 20) - 1) & ~((1ull << 20) - 1); /* whole MiB: fewer reallocations */
    if (cap > l->cap) {
        o->host_free(l->hpack);
        o->free(l->dpack);
        l->hpack = l->dpack = NULL;
        l->cap = 0;
        if ((rc = o->host_alloc(&l->hpack, cap)) != 0)
            return rc;
        l->cap = cap;
    }
    if (dpack_too && !l->dpack && (rc = o->alloc(&l->dpack, l->cap)) != 0)
        return rc;
    if (words > l->words) {
        o->free(l->dmeta);
        o->free(l->dpos);
        o->host_free(l->hmeta);
        l->dmeta = l->dpos = l->hmeta = NULL;
        l->words = 0;
        if ((rc = o->alloc((void **)&l->dmeta, (words + 1) * 8)) == 0 &&
            (rc = o->alloc((void **)&l->dpos, words * 8)) == 0)
            rc = o->host_alloc((void **)&l->hmeta, (words + 1) * 8);
        if (rc)
            return rc;
        l->words = words;
    }
    return CRPM_SUCCESS;
}

int crpm_dlane_get(const crpm_devops *ops, int dev, uint64_t cap, uint64_t words, int dpack_too, crpm_dlane **out)
{
    crpm_dlane *l = NULL;
    pthread_mutex_lock(&pool_mu);
    for (crpm_dlane **p = &pool; *p; p = &(*p)->next)
        if ((*p)->ops == ops && (*p)->dev == dev) {
            l = *p;
            *p = l->next;
            break;
        }
    pthread_mutex_unlock(&pool_mu);
    int rc = CRPM_SUCCESS;
    if (!l) {
        if (!(l = calloc(1, sizeof *l)))
            return crpm_error(CRPM_ERR_NOMEM, "out of memory for a GPU staging lane");
        l->ops = ops;
        l->dev = dev;
        rc = ops->stream_new(&l->s);
    }
    if (rc == 0)
        rc = lane_fit(l, cap, words, dpack_too);
    if (rc) {
        lane_free(l);
        return rc;
    }
    l->next = NULL;
    *out = l;
    return CRPM_SUCCESS;
}

void crpm_dlane_put(crpm_dlane *l, int broken)
{
    if (!l)
        return;
    int keep = 0;
    pthread_mutex_lock(&pool_mu);
    if (!broken) {
        int n = 0;
        for (crpm_dlane *p = pool; p; p = p->next)
            n += p->dev == l->dev;
        if ((keep = n < POOL_KEEP)) {
            l->next = pool;
            pool = l;
        }
    }
    pthread_mutex_unlock(&pool_mu);
    if (!keep)
        lane_free(l);
}

void crpm_dev_trim(void)
{
    pthread_mutex_lock(&pool_mu);
    crpm_dlane *p = pool;
    pool = NULL;
    pthread_mutex_unlock(&pool_mu);
    while (p) {
        crpm_dlane *n = p->next;
        lane_free(p);
        p = n;
    }
}

void crpm_dlane_hold(int delta)
{
    pthread_mutex_lock(&pool_mu);
    int left = holders += delta;
    pthread_mutex_unlock(&pool_mu);
    if (left == 0)
        crpm_dev_trim();
}

/* ---- copies through pinned memory ---------------------------------------------------- */

/* Chunks of at most 4 MiB, two in flight on two streams: one moves over the
 * bus while the CPU copies the other. */
static uint64_t chunk_of(uint64_t n)
{
    uint64_t c = (n / 2 + 65535) & ~65535ull;
    return n <= (256u << 10) ? n : c > (4u << 20) ? (4u << 20) : c;
}

typedef struct two {
    crpm_dlane *l;
    crpm_dstream *s[2];
    char *buf[2];
} two;

static int two_get(const crpm_devops *ops, int dev, uint64_t chunk, two *t)
{
    memset(t, 0, sizeof *t);
    int rc = crpm_dlane_get(ops, dev, 2 * chunk, 0, 0, &t->l);
    if (rc)
        return rc;
    if (!t->l->s2 && (rc = ops->stream_new(&t->l->s2)) != 0) {
        crpm_dlane_put(t->l, 1);
        return rc;
    }
    t->s[0] = t->l->s;
    t->s[1] = t->l->s2;
    t->buf[0] = t->l->hpack;
    t->buf[1] = (char *)t->l->hpack + chunk;
    return CRPM_SUCCESS;
}

static int two_put(const crpm_devops *ops, two *t, int rc)
{
    int r0 = ops->wait(t->s[0]), r1 = ops->wait(t->s[1]);
    crpm_dlane_put(t->l, rc || r0 || r1);
    return rc ? rc : r0 ? r0 : r1;
}

int crpm_dcopy_out(const crpm_devops *ops, int dev, void *dst, const void *src, uint64_t n)
{
    uint64_t chunk = chunk_of(n), pieces = n ? (n + chunk - 1) / chunk : 0;
    two t;
    int rc = n ? two_get(ops, dev, chunk, &t) : CRPM_SUCCESS;
    if (!n || rc)
        return rc;
    for (uint64_t i = 0; i < 2 && i < pieces && rc == 0; i++) {
        uint64_t o = i * chunk, len = n - o < chunk ? n - o : chunk;
        rc = ops->copy(t.s[i], t.buf[i], (const char *)src + o, len, CRPM_D2H);
    }
    for (uint64_t i = 0; i < pieces && rc == 0; i++) {
        uint64_t o = i * chunk, len = n - o < chunk ? n - o : chunk;
        if ((rc = ops->wait(t.s[i % 2])) != 0)
            break;
        memcpy((char *)dst + o, t.buf[i % 2], len);
        if (i + 2 < pieces) {
            uint64_t o2 = (i + 2) * chunk, l2 = n - o2 < chunk ? n - o2 : chunk;
            rc = ops->copy(t.s[i % 2], t.buf[i % 2], (const char *)src + o2, l2, CRPM_D2H);
        }
    }
    return two_put(ops, &t, rc);
}

int crpm_dcopy_in(const crpm_devops *ops, int dev, void *dst, const void *src, uint64_t n)
{
    uint64_t chunk = chunk_of(n), pieces = n ? (n + chunk - 1) / chunk : 0;
    two t;
    int rc = n ? two_get(ops, dev, chunk, &t) : CRPM_SUCCESS;
    if (!n || rc)
        return rc;
    for (uint64_t i = 0; i < pieces && rc == 0; i++) {
        uint64_t o = i * chunk, len = n - o < chunk ? n - o : chunk;
        if (i >= 2 && (rc = ops->wait(t.s[i % 2])) != 0) /* its buffer is free again */
            break;
        memcpy(t.buf[i % 2], (const char *)src + o, len);
        rc = ops->copy(t.s[i % 2], (char *)dst + o, t.buf[i % 2], len, CRPM_H2D);
    }
    return two_put(ops, &t, rc);
}

/* ---- which table, which memory ------------------------------------------------------- */

static pthread_mutex_t ops_mu = PTHREAD_MUTEX_INITIALIZER;
static const crpm_devops *ops_now;
static int ops_chosen;

void crpm_devops_set(const crpm_devops *ops)
{
    pthread_mutex_lock(&ops_mu);
    ops_now = ops;
    ops_chosen = ops != NULL;
    pthread_mutex_unlock(&ops_mu);
}

const crpm_devops *crpm_devops_get(void)
{
    pthread_mutex_lock(&ops_mu);
    if (!ops_chosen) {
        ops_chosen = 1;
        ops_now = NULL;
#ifdef CRPM_HAVE_CUDA
        ops_now = &crpm_devops_cuda;
#endif
    }
    const crpm_devops *o = ops_now;
    pthread_mutex_unlock(&ops_mu);
    return o;
}

/* A library without CUDA still tells device pointers apart when the
 * application loaded the CUDA driver: cuPointerGetAttribute through dlsym.
 * The attribute numbers are the driver's stable ABI (cuda.h). */
static int probe_driver(const void *p)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return CRPM_DMEM_HOST; /* no driver in this process: no device memory either */
    typedef int (*get_fn)(void *data, int attribute, unsigned long long ptr);
    get_fn get;
    *(void **)&get = dlsym(h, "cuPointerGetAttribute");
    int type = CRPM_DMEM_HOST;
    unsigned int managed = 0, mtype = 0;
    enum { ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, MEMORYTYPE_DEVICE = 2 };
    if (get && get(&managed, ATTR_IS_MANAGED, (unsigned long long)(uintptr_t)p) == 0 && managed)
        type = CRPM_DMEM_MANAGED;
    else if (get && get(&mtype, ATTR_MEMORY_TYPE, (unsigned long long)(uintptr_t)p) == 0 &&
             mtype == MEMORYTYPE_DEVICE)
        type = CRPM_DMEM_DEVICE;
    dlclose(h);
    return type;
}

const crpm_mem_kind *crpm_dev_kind(int mode)
{
    switch (mode) {
    case CRPM_DEVICE_DIFF: return &crpm_dev_kind_diff;
    case CRPM_DEVICE_FINGERPRINT: return &crpm_dev_kind_fp;
    case CRPM_DEVICE_FULL: return &crpm_dev_kind_full;
    default: return NULL;
    }
}

int crpm_dev_classify(const void *ptr, int mode, int explicit_, int id, const char *fn, const crpm_mem_kind **kind,
                      int *managed)
{
    *kind = NULL;
    *managed = 0;
    const crpm_devops *ops = crpm_devops_get();
    int type = CRPM_DMEM_HOST, dev = 0, nodriver = 0;
    if (ops) {
        int rc = ops->query(ptr, &type, &dev);
        if (rc < 0) {
            char why[512];
            strncpy(why, crpm_last_error(), sizeof why - 1);
            why[sizeof why - 1] = '\0';
            return crpm_error(rc, "%s(%d): cannot tell whether %p is GPU memory: %s", fn, id, ptr, why);
        }
        nodriver = rc > 0;
    } else {
        type = probe_driver(ptr);
    }
    if (type == CRPM_DMEM_HOST) {
        if (!explicit_)
            return CRPM_SUCCESS;
        if (!ops)
            return crpm_error(CRPM_ERR_NOTSUP, "%s(%d): this libcrpm was built without CUDA (CRPM_CUDA=OFF or no "
                              "CUDA toolkit found)", fn, id);
        if (nodriver)
            return crpm_error(CRPM_ERR_DEVICE, "%s(%d): %p cannot be GPU memory: no CUDA driver is loaded in this "
                              "process, or it sees no GPU (no GPU here, or the application has not used CUDA)", fn,
                              id, ptr);
        return crpm_error(CRPM_ERR_INVAL, "%s(%d): %p is host memory, not CUDA device or managed memory "
                          "(protect it with crpm_protect)", fn, id, ptr);
    }
    const char *what = type == CRPM_DMEM_MANAGED ? "managed" : "device";
    if (!ops)
        return crpm_error(CRPM_ERR_NOTSUP, "%s(%d): %p is CUDA %s memory, but this libcrpm was built without CUDA "
                          "(configure with -DCRPM_CUDA=ON)", fn, id, ptr, what);
    if (!(*kind = crpm_dev_kind(mode)))
        return crpm_error(CRPM_ERR_INVAL, "%s(%d): unknown device mode %d", fn, id, mode);
    *managed = type == CRPM_DMEM_MANAGED;
    return CRPM_SUCCESS;
}

/* Exact page-write tracker: userfaultfd async write-protect + PAGEMAP_SCAN.
 * See track.h for the semantics and what is (not) tracked.
 *
 * Mechanism (Linux >= 6.7):
 *  - one userfaultfd per tracker, negotiated with UFFD_FEATURE_WP_ASYNC (the
 *    kernel resolves write faults on write-protected pages itself, clearing
 *    the PTE's uffd-wp bit, no message) and UFFD_FEATURE_WP_UNPOPULATED
 *    (write-protecting a never-touched page installs a PTE marker, so the
 *    first-touch write is recorded too);
 *  - crpm_tracker_add: UFFDIO_REGISTER (mode WP) of the covering pages, then
 *    UFFDIO_WRITEPROTECT of the pages this tracker did not track before;
 *  - crpm_tracker_scan: PAGEMAP_SCAN with PM_SCAN_WP_MATCHING |
 *    PM_SCAN_CHECK_WPASYNC and category PAGE_IS_WRITTEN: returns the written
 *    regions and re-protects exactly those in one walk under the page-table
 *    locks.  At most vec_len regions per call; the kernel stops at walk_end
 *    without touching what it could not report, and we continue from there.
 *
 * The build machines carry older UAPI headers (Debian 12: linux-libc-dev 6.1),
 * so the ABI added in 6.7 is defined here under #ifndef guards.  Values are
 * from include/uapi/linux/{userfaultfd,fs}.h as documented in
 * Documentation/admin-guide/mm/{userfaultfd,pagemap}.rst and PAGEMAP_SCAN(2),
 * and were checked on a 6.18 kernel (UFFDIO_API feature bits, category bits
 * reported for present/unpopulated/written pages; tests/track). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/fs.h>
#include <linux/userfaultfd.h>
#include "engine.h"
#include "track.h"

/* ---- ABI missing from pre-6.7 headers ------------------------------------ */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1 /* userfaultfd(2) flag, Linux 5.11 */
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13) /* Linux 6.4 */
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15) /* Linux 6.7 (bit 14 is UFFD_FEATURE_POISON) */
#endif

#ifndef PAGEMAP_SCAN /* Linux 6.7: struct page_region, struct pm_scan_arg, the ioctl */
struct page_region {
    uint64_t start;      /* first byte of the region */
    uint64_t end;        /* one past its last byte */
    uint64_t categories; /* PAGE_IS_* bits of the region (masked by return_mask) */
};
struct pm_scan_arg {
    uint64_t size;                /* sizeof(struct pm_scan_arg) */
    uint64_t flags;               /* PM_SCAN_* */
    uint64_t start, end;          /* page-aligned range to walk */
    uint64_t walk_end;            /* out: where the walk stopped */
    uint64_t vec, vec_len;        /* out: struct page_region[vec_len] */
    uint64_t max_pages;           /* 0: no limit */
    uint64_t category_inverted;   /* categories XORed before matching */
    uint64_t category_mask;       /* all of these must be set */
    uint64_t category_anyof_mask; /* at least one of these (0: ignored) */
    uint64_t return_mask;         /* categories reported in page_region */
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif
#ifndef PAGE_IS_WPALLOWED
#define PAGE_IS_WPALLOWED (1 << 0) /* async write-protect registered */
#endif
#ifndef PAGE_IS_WRITTEN
#define PAGE_IS_WRITTEN (1 << 1) /* written since write-protected */
#endif
#ifndef PAGE_IS_PRESENT
#define PAGE_IS_PRESENT (1 << 3) /* a page is mapped */
#endif
#ifndef PAGE_IS_SWAPPED
#define PAGE_IS_SWAPPED (1 << 4) /* swap entry, or a PTE marker (write-protected, never touched) */
#endif
#ifndef PM_SCAN_WP_MATCHING
#define PM_SCAN_WP_MATCHING (1 << 0) /* write-protect the matched pages */
#endif
#ifndef PM_SCAN_CHECK_WPASYNC
#define PM_SCAN_CHECK_WPASYNC (1 << 1) /* fail (EPERM) on a VMA not async-WP registered */
#endif

_Static_assert(sizeof(struct pm_scan_arg) == 96, "struct pm_scan_arg is 12 x u64");
_Static_assert(sizeof(struct page_region) == 24, "struct page_region is 3 x u64");

#define TRACK_VEC_LEN 1024 /* regions per PAGEMAP_SCAN call (24 KiB) */

typedef struct range {
    uintptr_t s, e;
} range;

struct crpm_tracker {
    int uffd, pagemap;
    uintptr_t page;
    struct page_region *vec;
    size_t vec_len;
    /* pages newly registered by add, reported once by the next scan (sorted,
     * disjoint, non-adjacent, page aligned) */
    range *pend;
    size_t npend, cap_pend;
    /* the kernel does not report page-table holes (no PTE table at all) in a
     * registered range as written: find them with an extra pass */
    int hole_pass;
    pid_t pid; /* the descriptors see the opener's address space, even after fork */
    int maps;       /* /proc/self/maps, for crpm_tracker_memory_check */
    int maps_query; /* PROCMAP_QUERY works on it: 1, does not: 0, unknown: -1 */
};

/* ---- small helpers ------------------------------------------------------- */

static int xioctl(int fd, unsigned long req, void *arg)
{
    int rc, tries = 0;
    do
        rc = ioctl(fd, req, arg);
    while (rc < 0 && (errno == EINTR || errno == EAGAIN) && ++tries < 1000);
    return rc;
}

static long pm_scan(int pagemap, struct page_region *vec, size_t vec_len, uintptr_t s, uintptr_t e,
                    uint64_t flags, uint64_t inverted, uint64_t mask, uintptr_t *walk_end)
{
    struct pm_scan_arg a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.flags = flags;
    a.start = s;
    a.end = e;
    a.vec = (uintptr_t)vec;
    a.vec_len = vec_len;
    a.category_inverted = inverted;
    a.category_mask = mask;
    a.return_mask = mask;
    long n;
    do
        n = ioctl(pagemap, PAGEMAP_SCAN, &a);
    while (n < 0 && errno == EINTR);
    *walk_end = (uintptr_t)a.walk_end;
    return n;
}

static int wp_range(crpm_tracker *t, uintptr_t s, uintptr_t e)
{
    struct uffdio_writeprotect w;
    memset(&w, 0, sizeof w);
    w.range.start = s;
    w.range.len = e - s;
    w.mode = UFFDIO_WRITEPROTECT_MODE_WP;
    return xioctl(t->uffd, UFFDIO_WRITEPROTECT, &w);
}

static int uffd_register(crpm_tracker *t, uintptr_t s, uintptr_t e, uint64_t *ioctls)
{
    struct uffdio_register r;
    memset(&r, 0, sizeof r);
    r.range.start = s;
    r.range.len = e - s;
    r.mode = UFFDIO_REGISTER_MODE_WP;
    int rc = xioctl(t->uffd, UFFDIO_REGISTER, &r);
    if (ioctls)
        *ioctls = r.ioctls;
    return rc;
}

/* Room for one more pending entry. */
static int pend_reserve(crpm_tracker *t)
{
    if (t->npend < t->cap_pend)
        return CRPM_SUCCESS;
    size_t cap = t->cap_pend ? 2 * t->cap_pend : 16;
    range *n = realloc(t->pend, cap * sizeof *n);
    if (!n)
        return crpm_error(CRPM_ERR_NOMEM, "tracker: out of memory");
    t->pend = n;
    t->cap_pend = cap;
    return CRPM_SUCCESS;
}

/* Inserts [s,e) into the pending set, merging with overlapping/adjacent ones. */
static int pend_add(crpm_tracker *t, uintptr_t s, uintptr_t e)
{
    if (s >= e)
        return CRPM_SUCCESS;
    size_t i = 0;
    while (i < t->npend && t->pend[i].e < s)
        i++;
    size_t j = i;
    while (j < t->npend && t->pend[j].s <= e) {
        if (t->pend[j].s < s)
            s = t->pend[j].s;
        if (t->pend[j].e > e)
            e = t->pend[j].e;
        j++;
    }
    /* entries [i,j) are replaced by one */
    if (i == j) {
        int rc = pend_reserve(t);
        if (rc)
            return rc;
        memmove(&t->pend[i + 1], &t->pend[i], (t->npend - i) * sizeof *t->pend);
        t->npend++;
    } else if (j > i + 1) {
        memmove(&t->pend[i + 1], &t->pend[j], (t->npend - j) * sizeof *t->pend);
        t->npend -= j - i - 1;
    }
    t->pend[i].s = s;
    t->pend[i].e = e;
    return CRPM_SUCCESS;
}

/* Removes [s,e) from the pending set.  Capacity for a split entry is
 * reserved first, so a failure leaves the set as it was (those pages are then
 * reported again: harmless). */
static int pend_cut(crpm_tracker *t, uintptr_t s, uintptr_t e)
{
    int rc = pend_reserve(t);
    if (rc)
        return rc;
    size_t o = 0;
    range tail = {0, 0};
    for (size_t i = 0; i < t->npend; i++) {
        range r = t->pend[i];
        if (r.e <= s || r.s >= e) {
            t->pend[o++] = r;
            continue;
        }
        if (r.s < s)
            t->pend[o++] = (range){r.s, s};
        if (r.e > e) {
            if (r.s < s)
                tail = (range){e, r.e}; /* [s,e) strictly inside: the only overlap */
            else
                t->pend[o++] = (range){e, r.e};
        }
    }
    t->npend = o;
    return tail.s < tail.e ? pend_add(t, tail.s, tail.e) : CRPM_SUCCESS; /* no allocation: reserved */
}

/* Non-modifying PAGEMAP_SCAN of [s,e): the coalesced ranges of pages whose
 * categories, XORed with `inverted`, have all bits of `mask`. */
static int find_ranges(crpm_tracker *t, uintptr_t s, uintptr_t e, uint64_t inverted, uint64_t mask, range **out,
                       size_t *nout)
{
    size_t cap = 0, n = 0;
    range *v = NULL;
    for (uintptr_t cur = s; cur < e;) {
        uintptr_t we;
        long k = pm_scan(t->pagemap, t->vec, t->vec_len, cur, e, 0, inverted, mask, &we);
        if (k < 0 || we <= cur || we > e) {
            int err = k < 0 ? errno : EIO;
            free(v);
            return crpm_error(CRPM_ERR_IO, "tracker: PAGEMAP_SCAN of %#lx-%#lx: %s", (unsigned long)cur,
                              (unsigned long)e, strerror(err));
        }
        for (long i = 0; i < k; i++) {
            if (n && v[n - 1].e == t->vec[i].start) {
                v[n - 1].e = t->vec[i].end;
                continue;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                range *nv = realloc(v, cap * sizeof *nv);
                if (!nv) {
                    free(v);
                    return crpm_error(CRPM_ERR_NOMEM, "tracker: out of memory");
                }
                v = nv;
            }
            v[n++] = (range){(uintptr_t)t->vec[i].start, (uintptr_t)t->vec[i].end};
        }
        cur = we;
    }
    *out = v;
    *nout = n;
    return CRPM_SUCCESS;
}

/* ---- open / close -------------------------------------------------------- */

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end || x < 0 || x > (1 << 24)) ? dflt : (int)x;
}

/* Open-time self test on a private mapping: an untouched page written after
 * write-protection (WP_UNPOPULATED), a populated page written, one only read
 * and one untouched; the scan must report exactly the two written pages, and
 * a second scan nothing. */
static int probe(crpm_tracker *t)
{
    const uintptr_t pg = t->page;
    char *m = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return crpm_error(CRPM_ERR_NOMEM, "tracker: probe mapping: %s", strerror(errno));
    int rc = CRPM_ERR_NOTSUP;
    struct page_region v[4];
    uintptr_t s = (uintptr_t)m, e = s + 4 * pg, we;
    uint64_t ioctls = 0;
    m[0] = 1; /* populated before registration */
    if (uffd_register(t, s, e, &ioctls) < 0) {
        crpm_error(rc, "change tracking unavailable: UFFDIO_REGISTER(WP) of anonymous memory failed: %s",
                   strerror(errno));
        goto out;
    }
    if (!(ioctls & ((uint64_t)1 << _UFFDIO_WRITEPROTECT))) {
        crpm_error(rc, "change tracking unavailable: no UFFDIO_WRITEPROTECT on anonymous memory");
        goto out;
    }
    if (wp_range(t, s, e) < 0) {
        crpm_error(rc, "change tracking unavailable: UFFDIO_WRITEPROTECT failed: %s", strerror(errno));
        goto out;
    }
    m[0] = 2;                          /* populated, written */
    m[2 * pg + 5] = 3;                 /* unpopulated, written */
    volatile char r = m[3 * pg];       /* unpopulated, read */
    (void)r;
    long n = pm_scan(t->pagemap, v, 4, s, e, PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC, 0, PAGE_IS_WRITTEN, &we);
    if (n < 0) {
        crpm_error(rc, "change tracking unavailable: PAGEMAP_SCAN on /proc/self/pagemap failed: %s "
                       "(Linux >= 6.7 needed)", strerror(errno));
        goto out;
    }
    if (n != 2 || v[0].start != s || v[0].end != s + pg || v[1].start != s + 2 * pg ||
        v[1].end != s + 3 * pg || we != e) {
        crpm_error(rc, "change tracking unavailable: PAGEMAP_SCAN self-test gave unexpected regions (%ld)", n);
        goto out;
    }
    n = pm_scan(t->pagemap, v, 4, s, e, PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC, 0, PAGE_IS_WRITTEN, &we);
    if (n != 0) {
        crpm_error(rc, "change tracking unavailable: PAGEMAP_SCAN did not re-protect (%ld)", n);
        goto out;
    }
    m[pg] = 4; /* a write after the re-protecting scan is seen */
    n = pm_scan(t->pagemap, v, 4, s, e, PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC, 0, PAGE_IS_WRITTEN, &we);
    if (n != 1 || v[0].start != s + pg || v[0].end != s + 2 * pg) {
        crpm_error(rc, "change tracking unavailable: PAGEMAP_SCAN missed a write after re-protection (%ld)", n);
        goto out;
    }
    rc = CRPM_SUCCESS;
out:
    munmap(m, 4 * pg); /* also unregisters it */
    return rc;
}

/* Does the kernel report a registered range without any page table (a PMD
 * hole: never touched, or zapped whole by MADV_DONTNEED) as written?  Linux
 * 6.7 up to the fix "fs/proc/task_mmu: fix PAGEMAP_SCAN written state for PMD
 * holes" does not.  1: yes, 0: no, <0: error. */
static int holes_reported(crpm_tracker *t)
{
    const size_t huge = 2u << 20;
    char *m = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return crpm_error(CRPM_ERR_NOMEM, "tracker: probe mapping: %s", strerror(errno));
    uintptr_t s = ((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1), we;
    int yes = -1;
    struct page_region v[4];
    if (uffd_register(t, s, s + huge, NULL) == 0) {
        long n = pm_scan(t->pagemap, v, 4, s, s + huge, 0, 0, PAGE_IS_WRITTEN, &we);
        yes = n == 1 && v[0].start == s && v[0].end == s + huge;
    }
    munmap(m, 2 * huge);
    return yes < 0 ? crpm_error(CRPM_ERR_NOTSUP, "change tracking unavailable: hole probe failed") : yes;
}

int crpm_tracker_open(crpm_tracker **out)
{
    if (!out)
        return crpm_error(CRPM_ERR_INVAL, "tracker: NULL output pointer");
    *out = NULL;
#ifndef SYS_userfaultfd
    return crpm_error(CRPM_ERR_NOTSUP, "change tracking unavailable: no userfaultfd system call on this platform");
#else
    crpm_tracker *t = calloc(1, sizeof *t);
    if (!t)
        return crpm_error(CRPM_ERR_NOMEM, "tracker: out of memory");
    t->uffd = t->pagemap = -1;
    t->maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    t->maps_query = -1;
    t->pid = getpid();
    long pg = sysconf(_SC_PAGESIZE);
    t->page = pg > 0 ? (uintptr_t)pg : 4096;
    int vl = env_int("CRPM_TRACK_VEC_LEN", TRACK_VEC_LEN);
    t->vec_len = vl > 0 ? (size_t)vl : TRACK_VEC_LEN;
    int rc;
    t->vec = calloc(t->vec_len, sizeof *t->vec);
    if (!t->vec) {
        rc = crpm_error(CRPM_ERR_NOMEM, "tracker: out of memory");
        goto fail;
    }
    /* User-mode-only is enough in async WP mode (no fault is ever handed to
     * user space) and needs no privilege. */
    int flags = O_CLOEXEC | O_NONBLOCK;
    if (env_int("CRPM_TRACK_USER_MODE_ONLY", 1))
        flags |= UFFD_USER_MODE_ONLY;
    t->uffd = (int)syscall(SYS_userfaultfd, flags);
    if (t->uffd < 0) {
        int e = errno;
        rc = crpm_error(CRPM_ERR_NOTSUP, "change tracking unavailable: userfaultfd(%s): %s%s",
                        (flags & UFFD_USER_MODE_ONLY) ? "UFFD_USER_MODE_ONLY" : "0", strerror(e),
                        e == EPERM ? " (forbidden by seccomp, vm.unprivileged_userfaultfd or missing CAP_SYS_PTRACE)"
                        : e == ENOSYS ? " (kernel built without CONFIG_USERFAULTFD?)" : "");
        goto fail;
    }
    struct uffdio_api api;
    memset(&api, 0, sizeof api);
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
    if (ioctl(t->uffd, UFFDIO_API, &api) < 0) {
        rc = crpm_error(CRPM_ERR_NOTSUP, "change tracking unavailable: kernel lacks userfaultfd WP_ASYNC/"
                        "WP_UNPOPULATED (Linux >= 6.7 needed): UFFDIO_API: %s", strerror(errno));
        goto fail;
    }
    uint64_t want = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
    if ((api.features & want) != want || !(api.ioctls & ((uint64_t)1 << _UFFDIO_REGISTER))) {
        rc = crpm_error(CRPM_ERR_NOTSUP, "change tracking unavailable: userfaultfd features %#llx lack WP_ASYNC/"
                        "WP_UNPOPULATED", (unsigned long long)api.features);
        goto fail;
    }
    t->pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (t->pagemap < 0) {
        rc = crpm_error(CRPM_ERR_NOTSUP, "change tracking unavailable: /proc/self/pagemap: %s", strerror(errno));
        goto fail;
    }
    rc = probe(t);
    if (rc)
        goto fail;
    rc = holes_reported(t);
    if (rc < 0)
        goto fail;
    t->hole_pass = env_int("CRPM_TRACK_HOLE_PASS", !rc);
    rc = CRPM_SUCCESS;
    *out = t;
    return CRPM_SUCCESS;
fail:
    crpm_tracker_close(t);
    return rc;
#endif
}

void crpm_tracker_close(crpm_tracker *t)
{
    if (!t)
        return;
    /* Closing the userfaultfd unregisters every range it registered and drops
     * the write protection. */
    if (t->uffd >= 0)
        close(t->uffd);
    if (t->pagemap >= 0)
        close(t->pagemap);
    if (t->maps >= 0)
        close(t->maps);
    free(t->vec);
    free(t->pend);
    free(t);
}

/* ---- add ------------------------------------------------------------------ */

static int cover(crpm_tracker *t, void *ptr, size_t len, uintptr_t *s, uintptr_t *e)
{
    if (getpid() != t->pid)
        return crpm_error(CRPM_ERR_STATE, "tracker: opened by process %d, used by %d (after fork)", (int)t->pid,
                          (int)getpid());
    uintptr_t p = (uintptr_t)ptr;
    if (!ptr || len > UINTPTR_MAX - p || p + len > UINTPTR_MAX - t->page)
        return crpm_error(CRPM_ERR_INVAL, "tracker: bad range %p + %zu", ptr, len);
    *s = p & ~(t->page - 1);
    *e = (p + len + t->page - 1) & ~(t->page - 1);
    return CRPM_SUCCESS;
}

/* Registers [s,e); the parts this tracker did not track yet are
 * write-protected and queued for one report. */
static int add_pages(crpm_tracker *t, uintptr_t s, uintptr_t e)
{
    /* 1. which pages are not registered for async write-protection yet */
    size_t nfresh = 0;
    range *fresh = NULL;
    int rc = find_ranges(t, s, e, PAGE_IS_WPALLOWED, PAGE_IS_WPALLOWED, &fresh, &nfresh);
    if (rc)
        return rc;
    /* 2. register the whole range (idempotent where already registered) */
    uint64_t ioctls = 0;
    if (uffd_register(t, s, e, &ioctls) < 0) {
        int err = errno;
        rc = crpm_error(CRPM_ERR_NOTSUP, "change tracking: the kernel refused to register %#lx-%#lx: %s%s",
                        (unsigned long)s, (unsigned long)e, strerror(err),
                        err == EBUSY ? " (registered by another userfaultfd)"
                        : err == EINVAL ? " (memory type not supported, e.g. hugetlbfs or a special mapping)"
                        : err == ENOMEM ? " (range not entirely mapped)"
                        : err == EPERM ? " (mapping can never be writable)" : "");
        goto out;
    }
    if (!(ioctls & ((uint64_t)1 << _UFFDIO_WRITEPROTECT))) {
        rc = crpm_error(CRPM_ERR_NOTSUP, "change tracking: no write protection for the memory at %#lx-%#lx",
                        (unsigned long)s, (unsigned long)e);
        goto out;
    }
    /* 3. the new pages: reported once, then tracked */
    for (size_t i = 0; i < nfresh; i++) {
        rc = pend_add(t, fresh[i].s, fresh[i].e);
        if (rc)
            goto out;
        if (wp_range(t, fresh[i].s, fresh[i].e) < 0) {
            rc = crpm_error(CRPM_ERR_IO, "tracker: UFFDIO_WRITEPROTECT of %#lx-%#lx: %s",
                            (unsigned long)fresh[i].s, (unsigned long)fresh[i].e, strerror(errno));
            goto out;
        }
    }
out:
    free(fresh);
    return rc;
}

int crpm_tracker_add(crpm_tracker *t, void *ptr, size_t len)
{
    if (!t)
        return crpm_error(CRPM_ERR_INVAL, "tracker: NULL tracker");
    if (len == 0)
        return CRPM_SUCCESS;
    uintptr_t s = 0, e = 0;
    int rc = cover(t, ptr, len, &s, &e);
    return rc ? rc : add_pages(t, s, e);
}

/* ---- memory kind ----------------------------------------------------------- */

#ifndef PROCMAP_QUERY /* linux/fs.h of Linux >= 6.11 */
struct procmap_query {
    uint64_t size, query_flags, query_addr;
    uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_SHARED 0x08
#endif
_Static_assert(sizeof(struct procmap_query) == 104, "struct procmap_query is 104 bytes");

static const char *why_not(int shared, int file)
{
    if (shared)
        return file ? "shared file or shared-memory mapping (writable through another mapping)"
                    : "shared anonymous mapping (writable by a forked process)";
    return file ? "private file mapping (shows the file's changes on pages not copied yet)" : NULL;
}

/* One VMA: 1 found (*end, *why set), 0 not mapped, -1 the ioctl is not there. */
static int query_vma(crpm_tracker *t, uintptr_t addr, uintptr_t *end, const char **why)
{
    struct procmap_query q;
    memset(&q, 0, sizeof q);
    q.size = sizeof q;
    q.query_addr = addr;
    if (ioctl(t->maps, PROCMAP_QUERY, &q) != 0)
        return errno == ENOENT ? 0 : -1;
    *end = (uintptr_t)q.vma_end;
    *why = why_not(!!(q.vma_flags & PROCMAP_QUERY_VMA_SHARED), q.inode || q.dev_major || q.dev_minor);
    return 1;
}

/* The same from the text of /proc/self/maps (kernels before 6.11). */
static const char *check_by_text(uintptr_t s, uintptr_t e)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return "memory kind unknown (/proc/self/maps unreadable)";
    char *line = NULL;
    size_t cap = 0;
    const char *why = "not entirely mapped";
    uintptr_t cur = s;
    while (cur < e && getline(&line, &cap, f) > 0) {
        unsigned long lo, hi, inode;
        char perms[8];
        unsigned maj, min;
        if (sscanf(line, "%lx-%lx %7s %*x %x:%x %lu", &lo, &hi, perms, &maj, &min, &inode) != 6 || hi <= cur)
            continue;
        if (lo > cur)
            break; /* a hole */
        const char *w = why_not(perms[3] == 's', inode || maj || min);
        if (w) {
            why = w;
            break;
        }
        cur = hi;
    }
    free(line);
    fclose(f);
    return cur >= e ? NULL : why;
}

const char *crpm_tracker_memory_check(crpm_tracker *t, const void *ptr, size_t len)
{
    uintptr_t s = (uintptr_t)ptr & ~(t->page - 1), e = s;
    if (!len)
        return NULL;
    if (cover(t, (void *)ptr, len, &s, &e) != 0) {
        crpm_error_clear();
        return "not in this process's address space";
    }
    if (t->maps >= 0 && t->maps_query != 0) {
        for (uintptr_t cur = s;;) {
            uintptr_t end = 0;
            const char *why = NULL;
            int found = query_vma(t, cur, &end, &why);
            if (found < 0 && t->maps_query < 0)
                break; /* no PROCMAP_QUERY: parse the text */
            t->maps_query = 1;
            if (found <= 0)
                return "not entirely mapped";
            if (why)
                return why;
            if (end >= e)
                return NULL;
            cur = end;
        }
        t->maps_query = 0;
    }
    return check_by_text(s, e);
}

/* ---- scan ------------------------------------------------------------------ */

/* Coalescing reporter: absolute page ranges in, clipped offsets out. */
typedef struct emitter {
    uintptr_t lo, hi; /* [ptr, ptr+len) */
    uintptr_t cs, ce; /* current run, absolute; cs == ce: none */
    void (*fn)(void *, size_t, size_t);
    void *arg;
} emitter;

static void emit_flush(emitter *m)
{
    if (m->cs < m->ce)
        m->fn(m->arg, m->cs - m->lo, m->ce - m->cs);
    m->cs = m->ce = 0;
}

/* Ranges must come with non-decreasing starts. */
static void emit(emitter *m, uintptr_t s, uintptr_t e)
{
    if (s < m->lo)
        s = m->lo;
    if (e > m->hi)
        e = m->hi;
    if (s >= e)
        return;
    if (m->cs < m->ce && s <= m->ce) {
        if (e > m->ce)
            m->ce = e;
        return;
    }
    emit_flush(m);
    m->cs = s;
    m->ce = e;
}

/* Emits the pending ranges that start before `upto` (all of [s,e) scanned). */
static void emit_pending(crpm_tracker *t, emitter *m, size_t *pi, uintptr_t upto)
{
    while (*pi < t->npend && t->pend[*pi].s < upto) {
        emit(m, t->pend[*pi].s, t->pend[*pi].e);
        (*pi)++;
    }
}

int crpm_tracker_scan(crpm_tracker *t, void *ptr, size_t len, void (*fn)(void *arg, size_t off, size_t len),
                      void *arg)
{
    if (!t || !fn)
        return crpm_error(CRPM_ERR_INVAL, "tracker: NULL tracker or callback");
    if (len == 0)
        return CRPM_SUCCESS;
    uintptr_t s = 0, e = 0;
    int rc = cover(t, ptr, len, &s, &e);
    if (rc)
        return rc;
    emitter m = {(uintptr_t)ptr, (uintptr_t)ptr + len, 0, 0, fn, arg};
    if (t->hole_pass) {
        /* Registered pages with neither a page nor a PTE marker: never
         * write-protected, or zapped.  Queued like new pages, then armed
         * (which installs markers) before the main pass. */
        size_t nh = 0;
        range *h = NULL;
        rc = find_ranges(t, s, e, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                         PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_WPALLOWED, &h, &nh);
        for (size_t i = 0; rc == CRPM_SUCCESS && i < nh; i++) {
            rc = pend_add(t, h[i].s, h[i].e);
            if (rc == CRPM_SUCCESS && wp_range(t, h[i].s, h[i].e) < 0)
                rc = crpm_error(CRPM_ERR_IO, "tracker: UFFDIO_WRITEPROTECT of %#lx-%#lx: %s", (unsigned long)h[i].s,
                                (unsigned long)h[i].e, strerror(errno));
        }
        free(h);
        if (rc) { /* the whole range counts as written */
            emit(&m, s, e);
            emit_flush(&m);
            return rc;
        }
    }
    size_t pi = 0;
    while (pi < t->npend && t->pend[pi].e <= s)
        pi++;
    uintptr_t cur = s;
    while (cur < e) {
        uintptr_t we;
        long n = pm_scan(t->pagemap, t->vec, t->vec_len, cur, e, PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC, 0,
                         PAGE_IS_WRITTEN, &we);
        if (n < 0) {
            int err = errno;
            /* What the kernel re-protected in [cur,e) before failing is not
             * known: the rest of the range counts as written. */
            emit_pending(t, &m, &pi, cur);
            emit(&m, cur, e);
            pi = t->npend; /* [cur,e) covers every pending page left in range */
            if (err == EPERM) {
                /* Part of the range is not registered (any more): mremap by
                 * realloc, munmap + mmap, or never added.  Register it again
                 * and re-arm all of it, as it has just been reported. */
                rc = add_pages(t, cur, e);
                if (rc == CRPM_SUCCESS && wp_range(t, cur, e) < 0)
                    rc = crpm_error(CRPM_ERR_IO, "tracker: UFFDIO_WRITEPROTECT of %#lx-%#lx: %s",
                                    (unsigned long)cur, (unsigned long)e, strerror(errno));
            } else {
                rc = crpm_error(CRPM_ERR_IO, "tracker: PAGEMAP_SCAN of %#lx-%#lx: %s", (unsigned long)cur,
                                (unsigned long)e, strerror(err));
            }
            break;
        }
        for (long i = 0; i < n; i++) {
            emit_pending(t, &m, &pi, (uintptr_t)t->vec[i].start + 1);
            emit(&m, (uintptr_t)t->vec[i].start, (uintptr_t)t->vec[i].end);
        }
        if (we <= cur || we > e) {
            rc = crpm_error(CRPM_ERR_IO, "tracker: PAGEMAP_SCAN made no progress at %#lx", (unsigned long)cur);
            emit_pending(t, &m, &pi, cur);
            emit(&m, cur, e);
            pi = t->npend;
            break;
        }
        cur = we;
    }
    emit_pending(t, &m, &pi, e);
    emit_flush(&m);
    int rc2 = pend_cut(t, s, e);
    return rc ? rc : rc2;
}

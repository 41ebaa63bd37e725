/* Page-write tracker (lib/engine/track.c) tests.  One program, one subtest per
 * argument; every subtest exits 77 (CTest SKIP_RETURN_CODE) only when
 * crpm_tracker_open() says CRPM_ERR_NOTSUP.
 *
 *   origins     randomized writes into arrays of every origin and alignment
 *   kernel      writes by the kernel: read(2), pread(2), process_vm_writev(2)
 *               from a child, /proc/self/mem; with and without
 *               UFFD_USER_MODE_ONLY
 *   unpriv      the same as an unprivileged user (uid 65534)
 *   realloc     realloc'd, re-registered, re-mapped, MADV_DONTNEED'd arrays
 *   many        many written ranges (walk_end loop, tiny and default vec_len)
 *   concurrent  two threads writing during scans: no write is ever lost
 *   edge        len 0, bad arguments, refused memory, two trackers, fork
 *   notsup      an "old kernel" (seccomp-faked) gives CRPM_ERR_NOTSUP */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <grp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/audit.h>
#include <linux/userfaultfd.h>
#include <stddef.h>
#include "track_common.h"

static uint64_t seed = 12345;

/* AnonHugePages of the mapping holding addr, in KiB (-1: unknown). */
static long thp_kib(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int in = 0;
    long kib = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        else if (in && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
            break;
    }
    fclose(f);
    return kib;
}

/* ---- randomized writes over many rounds ------------------------------------ */

static void random_writes(tarr *a, uint64_t *s)
{
    int nops = (int)rnd_below(s, 12);
    for (int k = 0; k < nops; k++) {
        uint64_t kind = rnd_below(s, 100);
        if (kind < 55) { /* single byte */
            tarr_write(a, s, rnd_below(s, a->len), 1);
        } else if (kind < 95) { /* run of up to ~3 pages */
            size_t off = rnd_below(s, a->len);
            size_t n = 1 + rnd_below(s, 3 * PG);
            if (n > a->len - off)
                n = a->len - off;
            tarr_write(a, s, off, n);
        } else if (kind < 97) { /* whole array */
            tarr_write(a, s, 0, a->len);
        } else { /* a word at both ends */
            tarr_write(a, s, 0, a->len < 8 ? a->len : 8);
            tarr_write(a, s, a->len - (a->len < 8 ? a->len : 8), a->len < 8 ? a->len : 8);
        }
    }
}

static void run_rounds(crpm_tracker *t, tarr *a, int rounds, uint64_t *s)
{
    REQUIRE(crpm_tracker_add(t, a->p, a->len) == 0, "%s: add: %s", a->name, crpm_last_error());
    tarr_scan(t, a, 1); /* new pages are reported once */
    for (int r = 0; r < rounds; r++) {
        if (rnd_below(s, 10) == 0) /* sometimes nothing at all */
            ;
        else
            random_writes(a, s);
        tarr_scan(t, a, 0);
        if (r == rounds / 2) /* re-protect of the same array keeps working */
            REQUIRE(crpm_tracker_add(t, a->p, a->len) == 0, "%s: re-add: %s", a->name, crpm_last_error());
    }
    double fp = a->interior_pages_checked ? 100.0 * (double)a->fp_interior / (double)a->interior_pages_checked : 0;
    printf("%-28s len %9zu off %4zu pages %5zu rounds %4zu ranges %6zu reported-pages %7zu interior-fp %5zu "
           "(%.3f%%)\n",
           a->name, a->len, (size_t)((uintptr_t)a->p % PG), a->npages, a->rounds, a->ranges, a->reported_pages,
           a->fp_interior, fp);
    if (!a->huge)
        REQUIRE(fp <= 1.0, "%s: too many untouched pages reported (%.3f%%)", a->name, fp);
}

static unsigned char bss_arr[3 * 65536 + 123];
static unsigned char data_arr[2 * 65536 + 77] = {1, 2, 3};

static void t_origins(void)
{
    crpm_tracker *t = open_or_skip();
    uint64_t s = seed;
    tarr a;

    /* brk heap (small malloc), odd sizes */
    unsigned char *m1 = malloc(40000 + 3);
    memset(m1, 7, 40003);
    tarr_init(&a, "malloc small (brk)", m1, 40003, 0);
    run_rounds(t, &a, 300, &s);
    tarr_free(&a);

    /* mmap'd malloc chunk (above the mmap threshold): starts 16 bytes into a page */
    size_t n2 = 5 * 1024 * 1024 + 1000;
    unsigned char *m2 = malloc(n2);
    memset(m2, 1, n2);
    tarr_init(&a, "malloc large (mmap)", m2, n2, 0);
    run_rounds(t, &a, 300, &s);
    tarr_free(&a);

    /* never touched before add (WP_UNPOPULATED: first-touch writes) */
    unsigned char *m3 = malloc(n2);
    tarr_init(&a, "malloc large untouched", m3, n2, 0);
    run_rounds(t, &a, 200, &s);
    tarr_free(&a);

    /* posix_memalign: page aligned, and 64-byte aligned at an odd offset */
    void *pm = NULL;
    REQUIRE(posix_memalign(&pm, PG, 1 << 20) == 0, "posix_memalign");
    tarr_init(&a, "posix_memalign page", pm, 1 << 20, 0);
    run_rounds(t, &a, 300, &s);
    tarr_free(&a);
    void *pm2 = NULL;
    REQUIRE(posix_memalign(&pm2, 64, 3 * PG + 64 * 5) == 0, "posix_memalign");
    tarr_init(&a, "posix_memalign 64 +320", (char *)pm2 + 320, 3 * PG - 320 + 1, 0);
    run_rounds(t, &a, 300, &s);
    tarr_free(&a);

    /* static arrays: .bss and .data, unaligned */
    tarr_init(&a, ".bss", bss_arr + 5, sizeof bss_arr - 5, 0);
    run_rounds(t, &a, 300, &s);
    tarr_free(&a);
    tarr_init(&a, ".data", data_arr + 1, sizeof data_arr - 1, 0);
    run_rounds(t, &a, 300, &s);
    tarr_free(&a);

    /* stack array (this frame; calls below it only touch the pages under it) */
    unsigned char stk[8 * 4096 + 100];
    memset(stk, 3, sizeof stk);
    tarr_init(&a, "stack", stk + 50, sizeof stk - 100, 0);
    run_rounds(t, &a, 300, &s);
    tarr_free(&a);

    /* THP: 2 MiB aligned anonymous memory with MADV_HUGEPAGE, populated */
    size_t hn = 16u << 20;
    unsigned char *raw = mmap(NULL, hn + (2u << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(raw != MAP_FAILED, "mmap");
    unsigned char *h = (unsigned char *)(((uintptr_t)raw + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    madvise(h, hn, MADV_HUGEPAGE);
    memset(h, 9, hn);
    printf("THP: %ld KiB of %zu KiB in huge pages before add\n", thp_kib(h), hn >> 10);
    tarr_init(&a, "THP (MADV_HUGEPAGE)", h, hn, 1);
    run_rounds(t, &a, 200, &s);
    printf("THP: %ld KiB in huge pages after the rounds\n", thp_kib(h));
    tarr_free(&a);
    /* THP, range not 2 MiB aligned (the kernel splits the huge pages) */
    memset(h, 8, hn);
    tarr_init(&a, "THP unaligned subrange", h + 12345, hn - 3 * 12345, 1);
    run_rounds(t, &a, 100, &s);
    tarr_free(&a);

    /* shared anonymous memory (shmem) */
    size_t sn = 1u << 20;
    unsigned char *sh = mmap(NULL, sn, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(sh != MAP_FAILED, "mmap shared");
    tarr_init(&a, "MAP_SHARED|MAP_ANONYMOUS", sh + 100, sn - 200, 0);
    run_rounds(t, &a, 200, &s);
    tarr_free(&a);

    /* tiny: one byte, and a range inside one page */
    unsigned char *tiny = malloc(100);
    tarr_init(&a, "1 byte", tiny + 3, 1, 0);
    run_rounds(t, &a, 50, &s);
    tarr_free(&a);

    /* hugetlbfs, when the machine has huge pages reserved */
    unsigned char *ht = mmap(NULL, 4u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (ht == MAP_FAILED) {
        printf("hugetlbfs: no huge pages reserved, not tested\n");
    } else {
        memset(ht, 1, 4u << 20);
        int rc = crpm_tracker_add(t, ht + 100, 1000);
        printf("hugetlbfs: add of an unaligned sub-range: %d (%s)\n", rc, rc ? crpm_last_error() : "ok");
        REQUIRE(rc == 0 || rc == CRPM_ERR_NOTSUP, "hugetlbfs add: %d", rc);
        if (rc == 0) {
            tarr_init(&a, "hugetlbfs unaligned", ht + 100, (4u << 20) - 200, 1);
            run_rounds(t, &a, 50, &s);
            tarr_free(&a);
        }
        /* a huge-page aligned range can be tracked, at huge-page granularity */
        tarr_init(&a, "hugetlbfs aligned", ht, 4u << 20, 1);
        run_rounds(t, &a, 50, &s);
        tarr_free(&a);
        munmap(ht, 4u << 20);
    }

    crpm_tracker_close(t);
    munmap(raw, hn + (2u << 20));
    munmap(sh, sn);
    free(m1);
    free(m2);
    free(m3);
    free(pm);
    free(pm2);
    free(tiny);
}

/* ---- kernel-mode writes ------------------------------------------------------ */

/* From a child process: process_vm_writev into the parent's buffer. */
static void child_vm_write(pid_t target, void *remote, size_t n, unsigned char val)
{
    pid_t c = fork();
    REQUIRE(c >= 0, "fork");
    if (c == 0) {
        unsigned char *src = malloc(n);
        memset(src, val, n);
        struct iovec l = {src, n}, r = {remote, n};
        ssize_t w = process_vm_writev(target, &l, 1, &r, 1, 0);
        if (w != (ssize_t)n) {
            fprintf(stderr, "process_vm_writev: %zd: %s\n", w, strerror(errno));
            _exit(1);
        }
        _exit(0);
    }
    int st;
    REQUIRE(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "process_vm_writev child failed");
}

static void kernel_writes(crpm_tracker *t, const char *mode)
{
    char name[96];
    size_t n = 64 * PG;
    unsigned char *buf = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(buf != MAP_FAILED, "mmap");
    memset(buf, 0, 32 * PG); /* first half populated, second half never touched */
    snprintf(name, sizeof name, "kernel writes (%s)", mode);
    tarr a;
    tarr_init(&a, name, buf, n, 0);
    REQUIRE(crpm_tracker_add(t, buf, n) == 0, "add: %s", crpm_last_error());
    tarr_scan(t, &a, 1);
    tarr_scan(t, &a, 0);

    /* read(2) from a pipe: into a populated page and into an untouched one */
    int fd[2];
    REQUIRE(pipe(fd) == 0, "pipe");
    REQUIRE(write(fd[1], "0123456789", 10) == 10 && write(fd[1], "abcdefghij", 10) == 10, "write pipe");
    REQUIRE(read(fd[0], buf + 3 * PG + 100, 10) == 10, "read");
    REQUIRE(read(fd[0], buf + 40 * PG + 5, 10) == 10, "read");
    tarr_mark(&a, 3 * PG + 100, 10);
    tarr_mark(&a, 40 * PG + 5, 10);
    size_t fp = tarr_scan(t, &a, 0);
    REQUIRE(fp == 0, "read(2): %zu extra pages", fp);
    /* a read straddling two pages */
    REQUIRE(write(fd[1], "XYZXYZXYZX", 10) == 10, "write pipe");
    REQUIRE(read(fd[0], buf + 5 * PG - 4, 10) == 10, "read");
    tarr_mark(&a, 5 * PG - 4, 10);
    tarr_scan(t, &a, 0);
    close(fd[0]);
    close(fd[1]);

    /* pread(2) from a file (page cache copy_to_user) */
    char path[] = "/tmp/crpm-track-XXXXXX";
    int f = mkstemp(path);
    REQUIRE(f >= 0, "mkstemp");
    unlink(path);
    unsigned char blob[3 * 4096];
    memset(blob, 0x5a, sizeof blob);
    REQUIRE(write(f, blob, sizeof blob) == (ssize_t)sizeof blob, "write file");
    REQUIRE(pread(f, buf + 10 * PG, 2 * PG, 0) == (ssize_t)(2 * PG), "pread");
    REQUIRE(pread(f, buf + 50 * PG + 1, 100, 0) == 100, "pread");
    tarr_mark(&a, 10 * PG, 2 * PG);
    tarr_mark(&a, 50 * PG + 1, 100);
    fp = tarr_scan(t, &a, 0);
    REQUIRE(fp == 0, "pread(2): %zu extra pages", fp);
    close(f);

    /* process_vm_writev from a child (the CMA path of MPI shared-memory
     * transports): populated page, untouched page, multi-page run */
    child_vm_write(getpid(), buf + 7 * PG + 1, 8, 0x11);
    child_vm_write(getpid(), buf + 45 * PG, 1, 0x22);
    child_vm_write(getpid(), buf + 20 * PG + 7, 3 * PG, 0x33);
    REQUIRE(buf[7 * PG + 1] == 0x11 && buf[45 * PG] == 0x22 && buf[23 * PG + 6] == 0x33, "child writes landed");
    tarr_mark(&a, 7 * PG + 1, 8);
    tarr_mark(&a, 45 * PG, 1);
    tarr_mark(&a, 20 * PG + 7, 3 * PG);
    fp = tarr_scan(t, &a, 0);
    REQUIRE(fp == 0, "process_vm_writev: %zu extra pages", fp);

    /* /proc/self/mem (ptrace-style FOLL_FORCE write) */
    int mf = open("/proc/self/mem", O_RDWR);
    if (mf >= 0) {
        REQUIRE(pwrite(mf, "mem!", 4, (off_t)(uintptr_t)(buf + 12 * PG + 9)) == 4, "pwrite /proc/self/mem: %s",
              strerror(errno));
        REQUIRE(pwrite(mf, "mem!", 4, (off_t)(uintptr_t)(buf + 60 * PG)) == 4, "pwrite /proc/self/mem");
        tarr_mark(&a, 12 * PG + 9, 4);
        tarr_mark(&a, 60 * PG, 4);
        fp = tarr_scan(t, &a, 0);
        REQUIRE(fp == 0, "/proc/self/mem: %zu extra pages", fp);
        close(mf);
    }
    printf("%s: read(2), pread(2), process_vm_writev(2), /proc/self/mem writes all reported\n", name);
    tarr_free(&a);
    munmap(buf, n);
}

static void t_kernel(void)
{
    crpm_tracker *t = open_or_skip();
    kernel_writes(t, "UFFD_USER_MODE_ONLY");
    crpm_tracker_close(t);

    setenv("CRPM_TRACK_USER_MODE_ONLY", "0", 1);
    crpm_tracker *t2 = NULL;
    int rc = crpm_tracker_open(&t2);
    unsetenv("CRPM_TRACK_USER_MODE_ONLY");
    if (rc == CRPM_ERR_NOTSUP) {
        printf("without UFFD_USER_MODE_ONLY: NOTSUP (%s): not tested\n", crpm_last_error());
        return;
    }
    REQUIRE(rc == 0, "open without UFFD_USER_MODE_ONLY: %s", crpm_last_error());
    kernel_writes(t2, "kernel faults too");
    crpm_tracker_close(t2);

    /* Writes by another process through its own mapping of shared memory do
     * not go through our page table: documented as not tracked. */
    crpm_tracker *t3 = open_or_skip();
    size_t n = 4 * PG;
    unsigned char *sh = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(sh != MAP_FAILED, "mmap");
    memset(sh, 0, n);
    REQUIRE(crpm_tracker_add(t3, sh, n) == 0, "add shared");
    reports r;
    reports_init(&r, 16);
    REQUIRE(crpm_tracker_scan(t3, sh, n, collect, &r) == 0, "scan");
    r.n = 0;
    pid_t c = fork();
    if (c == 0) {
        sh[PG] = 1; /* the child's own mapping (its page table is not tracked) */
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    REQUIRE(sh[PG] == 1, "shared write visible");
    REQUIRE(crpm_tracker_scan(t3, sh, n, collect, &r) == 0, "scan");
    printf("MAP_SHARED written by a forked child through its own mapping: %s (expected: not tracked)\n",
           r.n ? "reported" : "not reported");
    reports_free(&r);
    crpm_tracker_close(t3);
    munmap(sh, n);
}

/* ---- unprivileged user ----------------------------------------------------------- */

static int read_sysctl(const char *path)
{
    FILE *f = fopen(path, "r");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static void t_unpriv(void)
{
    crpm_tracker *probe = open_or_skip(); /* skip if the kernel cannot at all */
    crpm_tracker_close(probe);
    if (geteuid() != 0) {
        printf("not root: running unprivileged checks as uid %d\n", (int)geteuid());
    }
    pid_t c = fork();
    REQUIRE(c >= 0, "fork");
    if (c == 0) {
        if (geteuid() == 0) {
            if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)) {
                perror("drop privileges");
                _exit(1);
            }
            /* setuid made us non-dumpable: process_vm_writev from our own child needs ptrace access */
            prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        }
        printf("uid %d, vm.unprivileged_userfaultfd = %d\n", (int)geteuid(),
               read_sysctl("/proc/sys/vm/unprivileged_userfaultfd"));
        crpm_tracker *t = NULL;
        int rc = crpm_tracker_open(&t);
        REQUIRE(rc == 0, "unprivileged open (UFFD_USER_MODE_ONLY): %d %s", rc, crpm_last_error());
        kernel_writes(t, "unprivileged, UFFD_USER_MODE_ONLY");
        crpm_tracker_close(t);
        setenv("CRPM_TRACK_USER_MODE_ONLY", "0", 1);
        rc = crpm_tracker_open(&t);
        printf("unprivileged without UFFD_USER_MODE_ONLY: %d (%s)\n", rc, rc ? crpm_last_error() : "ok");
        if (read_sysctl("/proc/sys/vm/unprivileged_userfaultfd") == 0)
            REQUIRE(rc == CRPM_ERR_NOTSUP, "expected NOTSUP, got %d", rc);
        if (rc == 0)
            crpm_tracker_close(t);
        _exit(0);
    }
    int st;
    REQUIRE(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "unprivileged child failed");
}

/* ---- realloc / re-registration / remap -------------------------------------------- */

static void t_realloc(void)
{
    crpm_tracker *t = open_or_skip();
    uint64_t s = seed + 1;
    tarr a;

    /* large malloc'd array grown by realloc (mremap: moved or grown in place) */
    size_t n = 3 * 1024 * 1024 + 17;
    unsigned char *p = malloc(n);
    memset(p, 1, n);
    tarr_init(&a, "before realloc", p, n, 0);
    run_rounds(t, &a, 30, &s);
    tarr_write(&a, &s, 100, 5000); /* pending writes at realloc time */
    tarr_free(&a);
    for (int k = 0; k < 6; k++) {
        size_t n2 = n + (size_t)(k + 1) * 1024 * 1024 + 333;
        unsigned char *q = realloc(p, n2);
        REQUIRE(q, "realloc");
        printf("realloc %zu -> %zu: %s\n", n, n2, q == p ? "in place" : "moved");
        int moved = q != p;
        size_t old = n;
        p = q;
        n = n2;
        /* re-protect: the next scan reports every page if the array moved
         * (new mapping), else the pages written since the last scan */
        tarr_init(&a, "after realloc + re-add", p, n, 0);
        tarr_write(&a, &s, old, n - old);
        REQUIRE(crpm_tracker_add(t, p, n) == 0, "re-add: %s", crpm_last_error());
        tarr_scan(t, &a, moved);
        for (int r = 0; r < 20; r++) {
            random_writes(&a, &s);
            tarr_scan(t, &a, 0);
        }
        tarr_free(&a);
    }
    /* realloc without re-add: the scan notices the unregistered range,
     * reports everything and registers it again */
    unsigned char *q = realloc(p, n * 2);
    REQUIRE(q, "realloc");
    int moved = q != p;
    printf("realloc without re-add: %s\n", moved ? "moved" : "in place");
    p = q;
    n *= 2;
    tarr_init(&a, "after realloc, no re-add", p, n, 0);
    tarr_write(&a, &s, n / 2, n / 2);
    tarr_scan(t, &a, moved);
    for (int r = 0; r < 20; r++) {
        random_writes(&a, &s);
        tarr_scan(t, &a, 0);
    }
    tarr_free(&a);
    free(p);

    /* munmap + mmap at the same address, not re-added: contents changed
     * without any tracked write; the scan must still report them */
    size_t mn = 2u << 20;
    unsigned char *m = mmap(NULL, mn, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED, "mmap");
    memset(m, 5, mn);
    tarr_init(&a, "remapped", m, mn, 0);
    REQUIRE(crpm_tracker_add(t, m, mn) == 0, "add");
    tarr_scan(t, &a, 1);
    tarr_scan(t, &a, 0);
    REQUIRE(munmap(m + 4 * PG, 8 * PG) == 0, "munmap");
    REQUIRE(mmap(m + 4 * PG, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == m + 4 * PG,
          "mmap fixed");
    m[6 * PG] = 9; /* and some content of the old mapping is now zero */
    tarr_mark(&a, 4 * PG, 8 * PG);
    tarr_scan(t, &a, 0);
    /* then tracking goes on normally */
    for (int r = 0; r < 20; r++) {
        random_writes(&a, &s);
        tarr_scan(t, &a, 0);
    }
    /* MADV_DONTNEED zeroes pages without a write fault */
    REQUIRE(madvise(m + 30 * PG, 5 * PG, MADV_DONTNEED) == 0, "madvise");
    tarr_mark(&a, 30 * PG, 5 * PG);
    tarr_scan(t, &a, 0);
    tarr_free(&a);
    munmap(m, mn);

    /* shrunk and grown back in place with mremap (what realloc does to a
     * large chunk): the tail is zero again without any write, and its page
     * tables are gone (PMD holes); re-added or not, it must be reported */
    for (int readd = 0; readd < 2; readd++) {
        size_t big = 8u << 20;
        unsigned char *g = mmap(NULL, 2 * big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(g != MAP_FAILED, "mmap");
        munmap(g + big, big); /* room to grow in place */
        memset(g, 0x77, big);
        tarr_init(&a, readd ? "mremap shrink+grow, re-add" : "mremap shrink+grow", g, big, 0);
        REQUIRE(crpm_tracker_add(t, g, big) == 0, "add");
        tarr_scan(t, &a, 1);
        tarr_scan(t, &a, 0);
        REQUIRE(mremap(g, big, big / 4, 0) == g, "mremap shrink");
        if (mremap(g, big / 4, big, 0) != g) {
            printf("mremap could not grow in place: not tested\n");
        } else {
            g[big / 2] = 1;
            tarr_mark(&a, big / 2, 1);
            if (readd)
                REQUIRE(crpm_tracker_add(t, g, big) == 0, "re-add");
            tarr_scan(t, &a, 0); /* content oracle: the zeroed tail */
            for (int r = 0; r < 10; r++) {
                random_writes(&a, &s);
                tarr_scan(t, &a, 0);
            }
            printf("%s: zeroed tail reported\n", a.name);
        }
        tarr_free(&a);
        munmap(g, big);
    }

    /* the same array added many times, with pending writes each time */
    size_t rn = 64 * PG;
    unsigned char *rp = malloc(rn);
    memset(rp, 0, rn);
    tarr_init(&a, "re-add with pending writes", rp, rn, 0);
    REQUIRE(crpm_tracker_add(t, rp, rn) == 0, "add");
    tarr_scan(t, &a, 1);
    for (int r = 0; r < 50; r++) {
        random_writes(&a, &s);
        REQUIRE(crpm_tracker_add(t, rp + rnd_below(&s, rn / 2), rn / 2) == 0, "re-add part");
        REQUIRE(crpm_tracker_add(t, rp, rn) == 0, "re-add all");
        tarr_scan(t, &a, 0);
    }
    tarr_free(&a);
    free(rp);

    /* MADV_DONTNEED of a whole THP: known kernel limitation before the fix of
     * "fs/proc/task_mmu: fix PAGEMAP_SCAN written state for PMD holes"
     * (informational only) */
    size_t hn = 4u << 20;
    unsigned char *raw = mmap(NULL, hn + (2u << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(raw != MAP_FAILED, "mmap");
    unsigned char *h = (unsigned char *)(((uintptr_t)raw + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    madvise(h, hn, MADV_HUGEPAGE);
    memset(h, 9, hn);
    REQUIRE(crpm_tracker_add(t, h, hn) == 0, "add");
    reports r;
    reports_init(&r, 1024);
    REQUIRE(crpm_tracker_scan(t, h, hn, collect, &r) == 0, "scan");
    r.n = 0;
    long huge = thp_kib(h);
    madvise(h, 2u << 20, MADV_DONTNEED);
    REQUIRE(crpm_tracker_scan(t, h, hn, collect, &r) == 0, "scan");
    size_t got = 0;
    for (size_t i = 0; i < r.n; i++)
        got += r.v[i].len;
    printf("MADV_DONTNEED of a whole 2 MiB page (%ld KiB of the mapping in huge pages): %zu of %u bytes "
           "reported%s\n", huge, got, 2u << 20, got >= (2u << 20) ? "" : " (kernel limitation: PMD hole not reported)");
    reports_free(&r);
    munmap(raw, hn + (2u << 20));

    crpm_tracker_close(t);
}

/* ---- many ranges ------------------------------------------------------------- */

static void many_ranges(crpm_tracker *t, const char *name, size_t npages)
{
    size_t n = npages * PG;
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED, "mmap");
    tarr a;
    tarr_init(&a, name, p + 1, n - 2, 0);
    REQUIRE(crpm_tracker_add(t, a.p, a.len) == 0, "add: %s", crpm_last_error());
    tarr_scan(t, &a, 1);
    uint64_t s = seed + 2;
    for (int r = 0; r < 4; r++) {
        /* every other page, then every third, ... plus random singles */
        for (size_t pg = (size_t)r % 2; pg < npages; pg += 2 + (size_t)r)
            tarr_write(&a, &s, pg * PG + 7 >= a.len ? a.len - 1 : pg * PG + 7, 1);
        tarr_scan(t, &a, 0);
        REQUIRE(a.fp_interior == 0, "%s: false positives", name);
    }
    /* all pages: one range */
    tarr_write(&a, &s, 0, a.len);
    size_t before = a.ranges;
    tarr_scan(t, &a, 0);
    REQUIRE(a.ranges - before == 1, "%s: whole array should be one coalesced range, got %zu", name,
          a.ranges - before);
    printf("%-40s pages %6zu ranges %7zu: ok\n", name, npages, a.ranges);
    tarr_free(&a);
    munmap(p, n);
}

static void t_many(void)
{
    crpm_tracker *t = open_or_skip();
    many_ranges(t, "many ranges (default vec_len)", 20000);
    crpm_tracker_close(t);
    setenv("CRPM_TRACK_VEC_LEN", "1", 1);
    t = open_or_skip();
    many_ranges(t, "many ranges (vec_len 1)", 3001);
    crpm_tracker_close(t);
    setenv("CRPM_TRACK_VEC_LEN", "7", 1);
    t = open_or_skip();
    many_ranges(t, "many ranges (vec_len 7)", 5003);
    /* pending (fresh) pages merged with kernel regions under a tiny vec */
    uint64_t s = seed + 3;
    for (int k = 0; k < 20; k++) {
        size_t n = (50 + rnd_below(&s, 200)) * PG;
        unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        tarr a;
        tarr_init(&a, "pending+kernel merge", p, n, 0);
        size_t half = n / 2 + rnd_below(&s, n / 4);
        REQUIRE(crpm_tracker_add(t, p, half) == 0, "add");
        tarr_scan(t, &a, 0); /* second half: not registered, reported as a whole by the EPERM path */
        for (int r = 0; r < 5; r++) {
            random_writes(&a, &s);
            size_t o = rnd_below(&s, n), l = 1 + rnd_below(&s, 3 * PG);
            REQUIRE(crpm_tracker_add(t, p + o, l < n - o ? l : n - o) == 0, "add: %s", crpm_last_error());
            tarr_scan(t, &a, 0);
        }
        tarr_free(&a);
        munmap(p, n);
    }
    crpm_tracker_close(t);
    unsetenv("CRPM_TRACK_VEC_LEN");
}

/* ---- concurrent writer --------------------------------------------------------- */

/* Oracle: scans are numbered; `cepoch` = number of scans completed.  A writer
 * reads it before writing (e: scans 0..e-1 finished before the write began),
 * writes, then publishes e+1 for the page (max).  The write must be reported
 * by a scan numbered >= e, and at the latest by the first scan that starts
 * after the publication was collected.  A writer delayed between its write and
 * its publication only delays the check, it cannot fake a loss. */
#define CPAGES 512
static unsigned char *cbuf;
static atomic_uint cflag[CPAGES];
static atomic_uint cepoch;
static atomic_int cstop;
static atomic_ulong cwrites;

static void *writer(void *arg)
{
    uint64_t s = (uint64_t)(uintptr_t)arg;
    while (!atomic_load(&cstop)) {
        size_t pg = rnd_below(&s, CPAGES);
        unsigned e = atomic_load(&cepoch);
        ((volatile unsigned char *)cbuf)[pg * PG + rnd_below(&s, PG)] = (unsigned char)rnd(&s);
        unsigned old = atomic_load(&cflag[pg]);
        while (old < e + 1 && !atomic_compare_exchange_weak(&cflag[pg], &old, e + 1))
            ;
        atomic_fetch_add(&cwrites, 1);
        if (rnd_below(&s, 64) == 0)
            sched_yield();
    }
    return NULL;
}

static unsigned cscan_no;
static unsigned last_rep[CPAGES]; /* scan number + 1 of the last report */
static void mark_cb(void *arg, size_t off, size_t len)
{
    (void)arg;
    for (size_t pg = off / PG; pg <= (off + len - 1) / PG; pg++)
        last_rep[pg] = cscan_no + 1;
}

static void t_concurrent(void)
{
    crpm_tracker *t = open_or_skip();
    cbuf = mmap(NULL, CPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(cbuf != MAP_FAILED, "mmap");
    memset(cbuf, 0, CPAGES * PG / 2); /* half populated, half first-touch */
    REQUIRE(crpm_tracker_add(t, cbuf, CPAGES * PG) == 0, "add");
    cscan_no = 0;
    REQUIRE(crpm_tracker_scan(t, cbuf, CPAGES * PG, mark_cb, NULL) == 0, "scan");
    atomic_store(&cepoch, 1);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&th[i], NULL, writer, (void *)(uintptr_t)(99 + i)) == 0, "pthread_create");
    size_t checks = 0;
    int last = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned k = 1;; k++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double el = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (!last && ((k >= 5000 && atomic_load(&cwrites) >= 1000000) || el > 20)) {
            last = 1; /* writers stop: this scan catches up, the next one reports nothing */
            atomic_store(&cstop, 1);
            for (int i = 0; i < 2; i++)
                pthread_join(th[i], NULL);
        } else if (last) {
            for (size_t pg = 0; pg < CPAGES; pg++)
                REQUIRE(atomic_load(&cflag[pg]) == 0, "flag");
            cscan_no = k;
            unsigned before[CPAGES];
            memcpy(before, last_rep, sizeof before);
            REQUIRE(crpm_tracker_scan(t, cbuf, CPAGES * PG, mark_cb, NULL) == 0, "scan");
            REQUIRE(!memcmp(before, last_rep, sizeof before), "pages reported with no writer");
            printf("concurrent: %lu writes by 2 threads during %u scans (%.1f s), %zu page-writes checked: "
                   "none lost\n", (unsigned long)atomic_load(&cwrites), k, el, checks);
            break;
        }
        unsigned done[CPAGES];
        for (size_t pg = 0; pg < CPAGES; pg++) /* writes completed before now */
            done[pg] = atomic_exchange(&cflag[pg], 0);
        cscan_no = k;
        REQUIRE(crpm_tracker_scan(t, cbuf, CPAGES * PG, mark_cb, NULL) == 0, "scan: %s", crpm_last_error());
        atomic_store(&cepoch, k + 1);
        for (size_t pg = 0; pg < CPAGES; pg++) {
            if (!done[pg])
                continue;
            unsigned e = done[pg] - 1; /* written after scans 0..e-1 finished */
            REQUIRE(last_rep[pg] >= e + 1, "LOST WRITE: page %zu written after scan %u finished, last reported "
                  "by scan %d (now %u)", pg, e - 1, (int)last_rep[pg] - 1, k);
            checks++;
        }
    }
    crpm_tracker_close(t);
    munmap(cbuf, CPAGES * PG);
}

/* ---- edge cases --------------------------------------------------------------- */

static int ncalls;
static void count_cb(void *arg, size_t off, size_t len)
{
    (void)arg;
    (void)off;
    (void)len;
    ncalls++;
}

static void t_edge(void)
{
    crpm_tracker *t = open_or_skip();
    unsigned char x[16];
    REQUIRE(crpm_tracker_add(t, x, 0) == 0, "len 0 add");
    REQUIRE(crpm_tracker_add(t, NULL, 0) == 0, "len 0 add, NULL");
    REQUIRE(crpm_tracker_scan(t, x, 0, count_cb, NULL) == 0 && ncalls == 0, "len 0 scan");
    REQUIRE(crpm_tracker_scan(t, NULL, 0, count_cb, NULL) == 0 && ncalls == 0, "len 0 scan, NULL");
    REQUIRE(crpm_tracker_add(t, NULL, 10) == CRPM_ERR_INVAL, "NULL ptr");
    REQUIRE(crpm_tracker_add(NULL, x, 10) == CRPM_ERR_INVAL, "NULL tracker");
    REQUIRE(crpm_tracker_scan(t, x, 10, NULL, NULL) == CRPM_ERR_INVAL, "NULL fn");
    REQUIRE(crpm_tracker_add(t, (void *)(UINTPTR_MAX - 10), 100) == CRPM_ERR_INVAL, "wrap-around");
    REQUIRE(crpm_tracker_open(NULL) == CRPM_ERR_INVAL, "open NULL");
    crpm_tracker_close(NULL);

    /* memory the kernel refuses: read-only mapping, unmapped hole */
    void *ro = mmap(NULL, 4 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *ro_file = NULL;
    int rc = crpm_tracker_add(t, ro, 4 * PG);
    printf("PROT_READ anonymous mapping: %d (%s)\n", rc, rc ? crpm_last_error() : "ok: may become writable");
    int fd = open("/proc/self/exe", O_RDONLY);
    if (fd >= 0) {
        ro_file = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0); /* never writable: VM_MAYWRITE unset */
        if (ro_file != MAP_FAILED) {
            rc = crpm_tracker_add(t, ro_file, PG);
            printf("read-only shared file mapping: %d (%s)\n", rc, crpm_last_error());
            REQUIRE(rc == CRPM_ERR_NOTSUP, "refused memory must give NOTSUP, got %d", rc);
            munmap(ro_file, PG);
        }
        close(fd);
    }
    /* a range with an unmapped hole: registered around it (or refused); a page
     * mapped into the hole later is reported by the next scan */
    unsigned char *hole = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(hole + 3 * PG, PG);
    rc = crpm_tracker_add(t, hole, 8 * PG);
    printf("range with an unmapped hole: %d (%s)\n", rc, rc ? crpm_last_error() : "ok");
    REQUIRE(rc == 0 || rc == CRPM_ERR_NOTSUP, "hole: %d", rc);
    if (rc == 0) {
        reports hr;
        reports_init(&hr, 16);
        REQUIRE(crpm_tracker_scan(t, hole, 8 * PG, collect, &hr) == 0, "scan");
        hr.n = 0;
        REQUIRE(crpm_tracker_scan(t, hole, 8 * PG, collect, &hr) == 0 && hr.n == 0, "scan");
        REQUIRE(mmap(hole + 3 * PG, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
                  hole + 3 * PG, "fill hole");
        hole[3 * PG] = 1;
        REQUIRE(crpm_tracker_scan(t, hole, 8 * PG, collect, &hr) == 0, "scan");
        int seen = 0;
        for (size_t i = 0; i < hr.n; i++)
            seen |= hr.v[i].off <= 3 * PG && hr.v[i].off + hr.v[i].len > 3 * PG;
        REQUIRE(seen, "page mapped into the hole and written: not reported");
        reports_free(&hr);
    }
    munmap(hole, 8 * PG);
    munmap(ro, 4 * PG);

    /* two trackers cannot track the same page; they can track different ones */
    crpm_tracker *t2 = open_or_skip();
    unsigned char *m = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(crpm_tracker_add(t, m, 4 * PG) == 0, "add t");
    rc = crpm_tracker_add(t2, m + 2 * PG, 4 * PG);
    printf("page already tracked by another tracker: %d (%s)\n", rc, crpm_last_error());
    REQUIRE(rc == CRPM_ERR_NOTSUP, "overlap with another tracker: %d", rc);
    REQUIRE(crpm_tracker_add(t2, m + 4 * PG, 4 * PG) == 0, "add t2 disjoint: %s", crpm_last_error());
    tarr a, b;
    tarr_init(&a, "tracker 1", m, 4 * PG, 0);
    tarr_init(&b, "tracker 2", m + 4 * PG, 4 * PG, 0);
    tarr_scan(t, &a, 1);
    tarr_scan(t2, &b, 1);
    uint64_t s = seed + 4;
    for (int r = 0; r < 50; r++) {
        random_writes(&a, &s);
        random_writes(&b, &s);
        tarr_scan(t, &a, 0);
        tarr_scan(t2, &b, 0);
    }
    /* closing a tracker unregisters: another can take over and sees all pages once */
    crpm_tracker_close(t2);
    REQUIRE(crpm_tracker_add(t, m, 8 * PG) == 0, "take over: %s", crpm_last_error());
    tarr c;
    tarr_init(&c, "taken over", m, 8 * PG, 0);
    reports r;
    reports_init(&r, 16);
    REQUIRE(crpm_tracker_scan(t, m, 8 * PG, collect, &r) == 0, "scan");
    REQUIRE(r.n == 1 && r.v[0].off == 4 * PG && r.v[0].len == 4 * PG,
          "after take-over, the first scan reports the pages new to this tracker (got %zu ranges)", r.n);
    reports_free(&r);
    tarr_free(&a);
    tarr_free(&b);
    tarr_free(&c);
    munmap(m, 8 * PG);
    /* a fork()ed child must not use the parent's tracker: refused */
    unsigned char *fk = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(crpm_tracker_add(t, fk, 4 * PG) == 0, "add");
    reports fr;
    reports_init(&fr, 16);
    REQUIRE(crpm_tracker_scan(t, fk, 4 * PG, collect, &fr) == 0, "scan");
    fk[PG] = 1;
    pid_t ch = fork();
    REQUIRE(ch >= 0, "fork");
    if (ch == 0) {
        int r1 = crpm_tracker_scan(t, fk, 4 * PG, collect, &fr);
        int r2 = crpm_tracker_add(t, fk, 4 * PG);
        printf("tracker used in a forked child: %d %d (%s)\n", r1, r2, crpm_last_error());
        _exit(r1 == CRPM_ERR_STATE && r2 == CRPM_ERR_STATE ? 0 : 1);
    }
    int st;
    REQUIRE(waitpid(ch, &st, 0) == ch && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child must get CRPM_ERR_STATE");
    fr.n = 0;
    REQUIRE(crpm_tracker_scan(t, fk, 4 * PG, collect, &fr) == 0, "scan");
    REQUIRE(fr.n == 1 && fr.v[0].off == PG && fr.v[0].len == PG, "parent's write still reported after the fork");
    reports_free(&fr);
    munmap(fk, 4 * PG);
    printf("edge cases: ok\n");
    crpm_tracker_close(t);
}

/* ---- "old kernel": seccomp makes the new interfaces fail like they would ------- */

#if defined(__x86_64__)
#define ARCH_NR AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH_NR AUDIT_ARCH_AARCH64
#endif

#ifndef PAGEMAP_SCAN_NR
#define PAGEMAP_SCAN_NR 0xc0606610u /* _IOWR('f', 16, struct pm_scan_arg): 96-byte argument */
#endif

/* Fails syscall `nr` (or ioctl request `req` when nr is __NR_ioctl) with err. */
static void install_filter(int nr, unsigned req, int err)
{
#ifdef ARCH_NR
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH_NR, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])), /* low word */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, req, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, req ? SECCOMP_RET_ALLOW : (SECCOMP_RET_ERRNO | (unsigned)err)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    REQUIRE(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs");
    REQUIRE(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, "seccomp: %s", strerror(errno));
#else
    (void)nr;
    (void)req;
    (void)err;
#endif
}

static void notsup_case(const char *what, int nr, unsigned req, int err)
{
    pid_t c = fork();
    REQUIRE(c >= 0, "fork");
    if (c == 0) {
        install_filter(nr, req, err);
        crpm_tracker *t = NULL;
        int rc = crpm_tracker_open(&t);
        printf("%-50s -> %d: %s\n", what, rc, crpm_last_error());
        _exit(rc == CRPM_ERR_NOTSUP && !t && crpm_last_error()[0] ? 0 : 1);
    }
    int st;
    REQUIRE(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: expected CRPM_ERR_NOTSUP", what);
}

static void t_notsup(void)
{
    crpm_tracker *t = open_or_skip();
    crpm_tracker_close(t);
#ifndef ARCH_NR
    printf("no seccomp architecture constant for this CPU: not tested\n");
#else
    fflush(stdout);
    notsup_case("no userfaultfd syscall (ENOSYS)", __NR_userfaultfd, 0, ENOSYS);
    notsup_case("userfaultfd forbidden (EPERM)", __NR_userfaultfd, 0, EPERM);
    notsup_case("UFFDIO_API rejects WP_ASYNC (EINVAL, < 6.7)", __NR_ioctl, (unsigned)UFFDIO_API, EINVAL);
    notsup_case("no PAGEMAP_SCAN ioctl (ENOTTY, < 6.7)", __NR_ioctl, PAGEMAP_SCAN_NR, ENOTTY);
    notsup_case("UFFDIO_REGISTER fails (EINVAL)", __NR_ioctl, (unsigned)UFFDIO_REGISTER, EINVAL);
    notsup_case("UFFDIO_WRITEPROTECT fails (EINVAL)", __NR_ioctl, (unsigned)UFFDIO_WRITEPROTECT, EINVAL);
    notsup_case("no /proc (openat ENOENT)", __NR_openat, 0, ENOENT);
#endif
}

int main(int argc, char **argv)
{
    PG = (size_t)sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *what = argc > 1 ? argv[1] : "origins";
    if (argc > 2)
        seed = strtoull(argv[2], NULL, 0);
    if (!strcmp(what, "origins"))
        t_origins();
    else if (!strcmp(what, "kernel"))
        t_kernel();
    else if (!strcmp(what, "unpriv"))
        t_unpriv();
    else if (!strcmp(what, "realloc"))
        t_realloc();
    else if (!strcmp(what, "many"))
        t_many();
    else if (!strcmp(what, "concurrent"))
        t_concurrent();
    else if (!strcmp(what, "edge"))
        t_edge();
    else if (!strcmp(what, "notsup"))
        t_notsup();
    else {
        fprintf(stderr, "unknown subtest %s\n", what);
        return 2;
    }
    return 0;
}

/* Page-write tracker benchmark (lib/engine/track.c): what change tracking costs and
 * what it saves, on one array (default 1 GiB, 4 KiB pages):
 *   add         register + write-protect the whole array
 *   scan        crpm_tracker_scan after 0 / 0.1 / 1 / 10 / 100 % of the pages
 *               were written (random distinct pages, one byte each; 100 % =
 *               every page): PAGEMAP_SCAN walks + re-protects, callback counts
 *   fault       extra cost of the first write to a page after a scan (the
 *               async write-protect fault), per page: first pass over the
 *               written pages minus a second pass over the same pages
 *   memcmp      what the engine does without tracking: memcmp of the whole
 *               array against a copy
 * Optionally the same with MADV_HUGEPAGE (THP) memory.  Median of --reps runs.
 *
 *   bench_track [--mib 1024] [--reps 5] [--thp]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "engine.h"
#include "track.h"
#include "../common/bench_util.h"

typedef struct tally {
    size_t ranges, bytes;
} tally;
static void count(void *arg, size_t off, size_t len)
{
    (void)off;
    tally *t = arg;
    t->ranges++;
    t->bytes += len;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_track: %s: %d %s\n", what, rc, crpm_last_error());
    exit(rc == CRPM_ERR_NOTSUP ? 77 : 1);
}

/* Picks k distinct page indices out of n (sorted order does not matter). */
static void pick_pages(size_t *idx, size_t k, size_t n)
{
    if (k == n) {
        for (size_t i = 0; i < n; i++)
            idx[i] = i;
        return;
    }
    unsigned char *used = calloc(n, 1);
    for (size_t i = 0; i < k;) {
        size_t p = rnd() % n;
        if (!used[p]) {
            used[p] = 1;
            idx[i++] = p;
        }
    }
    free(used);
}

static void run(size_t bytes, int reps, int thp)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), npages = bytes / pg;
    size_t align = 2u << 20;
    char *raw = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *cpy = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED || cpy == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    char *a = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    madvise(a, bytes, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    madvise(cpy, bytes, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t i = 0; i < bytes; i += pg)
        a[i] = (char)i;
    memcpy(cpy, a, bytes);
    printf("\n== %zu MiB, %s pages (%zu x %zu B)\n", bytes >> 20, thp ? "THP (MADV_HUGEPAGE)" : "4 KiB", npages, pg);

    /* memcmp baseline */
    double t_cmp[64];
    volatile int sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        sink += memcmp(a, cpy, bytes);
        t_cmp[r] = now() - t0;
    }
    double cmp_ms = 1e3 * median(t_cmp, reps);
    printf("memcmp of the whole array against a copy:     %9.2f ms  (%.2f GB/s)\n", cmp_ms,
           (double)bytes / (cmp_ms * 1e-3) / 1e9);

    crpm_tracker *t;
    int rc = crpm_tracker_open(&t);
    if (rc)
        die("open", rc);
    double t0 = now();
    if ((rc = crpm_tracker_add(t, a, bytes)))
        die("add", rc);
    double add_ms = 1e3 * (now() - t0);
    tally ty = {0, 0};
    t0 = now();
    if ((rc = crpm_tracker_scan(t, a, bytes, count, &ty)))
        die("scan", rc);
    printf("add (register + write-protect):               %9.2f ms\n", add_ms);
    printf("first scan (reports the new pages once):      %9.2f ms  (%zu ranges, %zu MiB)\n", 1e3 * (now() - t0),
           ty.ranges, ty.bytes >> 20);

    const double fracs[] = {0, 0.001, 0.01, 0.1, 1.0};
    size_t *idx = malloc(npages * sizeof *idx);
    printf("%8s %9s %11s %9s %11s %11s %10s %10s\n", "written", "pages", "scan ms", "ranges", "scan/memcmp",
           "1st-write", "rewrite", "fault");
    printf("%8s %9s %11s %9s %11s %11s %10s %10s\n", "", "", "", "", "", "ns/page", "ns/page", "ns/page");
    for (size_t f = 0; f < sizeof fracs / sizeof fracs[0]; f++) {
        size_t k = (size_t)((double)npages * fracs[f] + 0.5);
        double ts[64], tw1[64], tw2[64];
        size_t ranges = 0, rbytes = 0;
        for (int r = 0; r < reps; r++) {
            pick_pages(idx, k, npages);
            double w0 = now();
            for (size_t i = 0; i < k; i++) /* first write after the scan: fault */
                a[idx[i] * pg + 8] += 1;
            double w1 = now();
            for (size_t i = 0; i < k; i++) /* same pages again: no fault */
                a[idx[i] * pg + 16] += 1;
            double w2 = now();
            tally tt = {0, 0};
            double s0 = now();
            if ((rc = crpm_tracker_scan(t, a, bytes, count, &tt)))
                die("scan", rc);
            ts[r] = now() - s0;
            tw1[r] = k ? (w1 - w0) / (double)k : 0;
            tw2[r] = k ? (w2 - w1) / (double)k : 0;
            if (tt.bytes < k * pg) {
                fprintf(stderr, "bench_track: scan reported %zu bytes for %zu written pages\n", tt.bytes, k);
                exit(1);
            }
            ranges = tt.ranges;
            rbytes = tt.bytes;
        }
        (void)rbytes;
        double s_ms = 1e3 * median(ts, reps), w1n = 1e9 * median(tw1, reps), w2n = 1e9 * median(tw2, reps);
        char lbl[16];
        snprintf(lbl, sizeof lbl, "%g%%", 100 * fracs[f]);
        printf("%8s %9zu %11.3f %9zu %10.4fx %11.0f %10.0f %10.0f\n", lbl, k, s_ms, ranges, s_ms / cmp_ms,
               k ? w1n : 0, k ? w2n : 0, k ? w1n - w2n : 0);
    }
    free(idx);
    crpm_tracker_close(t);
    (void)sink;
    munmap(raw, bytes + align);
    munmap(cpy, bytes);
}

int main(int argc, char **argv)
{
    size_t mib = 1024;
    int reps = 5, thp = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--thp"))
            thp = 1;
        else {
            fprintf(stderr, "usage: %s [--mib N] [--reps N] [--thp]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64)
        reps = 5;
    struct utsname u;
    uname(&u);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double la[1] = {0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &la[0]) != 1)
            la[0] = 0;
        fclose(f);
    }
    printf("bench_track: Linux %s, %ld CPUs, load average %.2f, median of %d runs\n", u.release, ncpu, la[0], reps);
    run(mib << 20, reps, 0);
    if (thp)
        run(mib << 20, reps, 1);
    return 0;
}

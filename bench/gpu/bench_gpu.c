/* GPU device arrays: checkpoint time of the three device modes against each
 * other and against the floors, side by side in one run (tests/gpu/run.sh;
 * needs a CUDA GPU, never in CI).
 *
 *   bench_gpu DIR OUT.json [--sizes 1,8,32] [--budget-s S] [--reps R] [--reps-big R]
 *
 * For each size (GiB of device array; sizes whose array, device copy and
 * container do not fit in device memory and DIR are skipped, saying why) and
 * each mode (diff: device copy of the committed state; fingerprint: 128-bit
 * fingerprints; full: every byte copied out, FTI-style), one container in
 * DIR: a first checkpoint (untimed), then for each pattern (random blocks,
 * one contiguous run) and fraction of 256-byte blocks (0.1, 1, 10, 100 %) a
 * kernel changes that many blocks and one checkpoint is timed (the median
 * of R repetitions, --reps for arrays under 4 GiB, --reps-big above).
 * Then a recovery of the whole array from the container is timed.  Floors,
 * on the same array: a device memcmp of the whole array (a kernel comparing
 * two device buffers: what any on-device diff must read), the pinned D2H
 * copy of the changed bytes (what must cross PCIe), and the pinned H2D copy
 * of the whole array (recovery's floor).
 *
 * Prints a table and the targets' verdicts (1 % random: full copy / diff >=
 * 10; 100 %: diff / full copy <= 1.3; recovery / pinned H2D <= 1.3) and
 * writes every figure to OUT.json.  A size is left out when the time spent
 * so far says it would not end within --budget-s. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "../common/bench_util.h"
#include "devkind.h"
#include "engine.h"
#include "gpu_util.h"

#define BLK 256u
#define NFR 4
static const double fracs[NFR] = {0.001, 0.01, 0.1, 1.0};
static const char *pat_names[2] = {"random", "contiguous"};

typedef struct cell {
    double ck[4];      /* per mode, seconds (0: not run) */
    double memcmp_s;   /* floor: device memcmp of the whole array */
    double d2h_s;      /* floor: pinned D2H of the changed bytes */
    uint64_t changed;  /* blocks */
} cell;

typedef struct run {
    double gib;
    int done;
    const char *skipped;
    cell c[2][NFR];
    double first[4], recover[4], h2d_s, memcmp_s;
} run;

static int reps = 3, reps_big = 1, reps_now; /* repetitions per cell: arrays < 4 GiB, larger ones, this one */

static void die(const char *what)
{
    fprintf(stderr, "bench_gpu: %s: %s\n", what, crpm_last_error());
    exit(1);
}

static void cu(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_gpu: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

/* Pinned copies of n bytes between the array and a pinned buffer of cap
 * bytes (repeated when n > cap): seconds. */
static double pinned_copy(void *dev, void *pin, uint64_t cap, uint64_t n, int d2h)
{
    double t0 = now();
    for (uint64_t o = 0; o < n; o += cap) {
        uint64_t len = n - o < cap ? n - o : cap;
        cu(cudaMemcpy(d2h ? pin : (char *)dev + o, d2h ? (char *)dev + o : pin, len,
                      d2h ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice), "pinned copy");
    }
    return now() - t0;
}

static double ck_time(crpm_container *c, uint64_t id)
{
    crpm_stats_t st;
    double t0 = now();
    if (crpm_container_checkpoint(c, id, &st) != 0)
        die("checkpoint");
    return now() - t0;
}

/* One mode on the array: first checkpoint, every cell, recovery. */
static void one_mode(run *r, int mode, char *dev, uint64_t bytes, const char *path)
{
    unlink(path);
    crpm_open_opts o = {.path = path, .create = 1, .block_size = BLK};
    crpm_container *c;
    if (crpm_container_open(&o, &c, NULL) != 0)
        die("open");
    crpm_array a = {1, CRPM_TC_BYTE, 1, bytes, dev, NULL, crpm_dev_kind(mode)};
    if (crpm_container_protect_array(c, &a) != 0)
        die("protect");
    uint64_t id = 1;
    r->first[mode] = ck_time(c, id++);
    for (int p = 0; p < 2; p++)
        for (int f = 0; f < NFR; f++) {
            double t[16];
            for (int k = 0; k < reps_now; k++) {
                if (gpu_touch(dev, bytes, BLK, fracs[f], p, id * 131 + (uint64_t)f, &r->c[p][f].changed) != 0)
                    exit(1);
                t[k] = ck_time(c, id++);
            }
            r->c[p][f].ck[mode] = median(t, reps_now);
        }
    double t0 = now();
    if (crpm_container_recover(c) != 0)
        die("recover");
    r->recover[mode] = now() - t0;
    crpm_container_close(c);
    unlink(path);
}

/* Whether the size fits: device memory for the array and a copy (plus
 * staging), DIR for the container's two copies. */
static const char *fits(uint64_t bytes, const char *dir)
{
    static char why[256];
    char name[128];
    uint64_t fr, tot;
    if (gpu_info(name, sizeof name, &fr, &tot) != 0)
        exit(1);
    struct statvfs v;
    uint64_t space = statvfs(dir, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
    uint64_t dev_need = 2 * bytes + (1ull << 30), dir_need = 2 * bytes + bytes / 32 + (1ull << 30);
    if (dev_need > fr)
        snprintf(why, sizeof why, "needs %.1f GiB of device memory, %.1f free", dev_need / 1073741824.0,
                 fr / 1073741824.0);
    else if (dir_need > space)
        snprintf(why, sizeof why, "needs %.1f GiB in %s, %.1f free", dir_need / 1073741824.0, dir,
                 space / 1073741824.0);
    else
        return NULL;
    return why;
}

static void floors(run *r, char *dev, uint64_t bytes)
{
    char *other;
    uint64_t cap = bytes < (2ull << 30) ? bytes : (2ull << 30);
    void *pin;
    cu(cudaMalloc((void **)&other, bytes), "cudaMalloc of the memcmp floor's buffer");
    cu(cudaMemcpy(other, dev, bytes, cudaMemcpyDeviceToDevice), "copy");
    cu(cudaMallocHost(&pin, cap), "cudaMallocHost");
    double t[16];
    int differ;
    for (int k = 0; k < reps_now; k++) {
        double t0 = now();
        if (gpu_cmp(dev, other, bytes, &differ) != 0)
            exit(1);
        t[k] = now() - t0;
    }
    r->memcmp_s = median(t, reps_now);
    for (int p = 0; p < 2; p++)
        for (int f = 0; f < NFR; f++) {
            r->c[p][f].memcmp_s = r->memcmp_s;
            for (int k = 0; k < reps_now; k++)
                t[k] = pinned_copy(dev, pin, cap, r->c[p][f].changed * BLK, 1);
            r->c[p][f].d2h_s = median(t, reps_now);
        }
    for (int k = 0; k < reps_now; k++)
        t[k] = pinned_copy(dev, pin, cap, bytes, 0);
    r->h2d_s = median(t, reps_now);
    cudaFreeHost(pin);
    cudaFree(other);
}

static void print_run(const run *r, FILE *js, int *first_js)
{
    if (!r->done) {
        printf("\n%.0f GiB: skipped: %s\n", r->gib, r->skipped);
        fprintf(js, "%s\n  {\"gib\": %.0f, \"skipped\": \"%s\"}", *first_js ? "" : ",", r->gib, r->skipped);
        *first_js = 0;
        return;
    }
    printf("\n%.0f GiB device array, 256-byte blocks (ms, median of %d; ratios full/diff and diff/full)\n", r->gib,
           reps_now);
    printf("%-10s %6s | %9s %9s %9s | %9s %9s | %7s %7s\n", "pattern", "blocks", "diff", "fprint", "full",
           "memcmp", "D2H chg", "full/df", "df/full");
    for (int p = 0; p < 2; p++)
        for (int f = 0; f < NFR; f++) {
            const cell *c = &r->c[p][f];
            printf("%-10s %5.1f%% | %9.2f %9.2f %9.2f | %9.2f %9.2f | %7.2f %7.2f\n", pat_names[p], fracs[f] * 100,
                   c->ck[1] * 1e3, c->ck[2] * 1e3, c->ck[3] * 1e3, c->memcmp_s * 1e3, c->d2h_s * 1e3,
                   c->ck[3] / c->ck[1], c->ck[1] / c->ck[3]);
            fprintf(js, "%s\n  {\"gib\": %.0f, \"pattern\": \"%s\", \"fraction\": %g, \"blocks_changed\": %llu, "
                    "\"diff_s\": %.6f, \"fingerprint_s\": %.6f, \"full_s\": %.6f, \"memcmp_floor_s\": %.6f, "
                    "\"d2h_changed_floor_s\": %.6f}", *first_js ? "" : ",", r->gib, pat_names[p], fracs[f],
                    (unsigned long long)c->changed, c->ck[1], c->ck[2], c->ck[3], c->memcmp_s, c->d2h_s);
            *first_js = 0;
        }
    printf("first checkpoint: diff %.1f, fingerprint %.1f, full %.1f ms\n", r->first[1] * 1e3, r->first[2] * 1e3,
           r->first[3] * 1e3);
    printf("recovery: diff %.1f, fingerprint %.1f, full %.1f ms; pinned H2D of the array %.1f ms (ratio %.2f)\n",
           r->recover[1] * 1e3, r->recover[2] * 1e3, r->recover[3] * 1e3, r->h2d_s * 1e3, r->recover[1] / r->h2d_s);
    fprintf(js, ",\n  {\"gib\": %.0f, \"reps\": %d, \"first_s\": [%.6f, %.6f, %.6f], "
            "\"recover_s\": [%.6f, %.6f, %.6f], \"h2d_floor_s\": %.6f, \"memcmp_floor_s\": %.6f}", r->gib, reps_now,
            r->first[1], r->first[2], r->first[3], r->recover[1], r->recover[2], r->recover[3], r->h2d_s,
            r->memcmp_s);
    const cell *one = &r->c[0][1], *all = &r->c[0][3];
    double sp = one->ck[3] / one->ck[1], hi = all->ck[1] / all->ck[3], rec = r->recover[1] / r->h2d_s;
    printf("targets: 1%% random: full / diff = %.1f (>= 10: %s); 100%% random: diff / full = %.2f (<= 1.3: %s); "
           "recovery / pinned H2D = %.2f in diff mode, with its copy refreshed (<= 1.3: %s), %.2f in full mode\n",
           sp, sp >= 10 ? "met" : "MISSED", hi, hi <= 1.3 ? "met" : "MISSED", rec, rec <= 1.3 ? "met" : "MISSED",
           r->recover[3] / r->h2d_s);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_gpu DIR OUT.json [--sizes 1,8,32] [--budget-s S] [--reps R] [--reps-big R]\n");
        return 2;
    }
    const char *dir = argv[1], *out = argv[2], *sizes = "1,8,32";
    double budget = 1e9;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes"))
            sizes = argv[i + 1];
        else if (!strcmp(argv[i], "--budget-s"))
            budget = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]) < 1 ? 1 : atoi(argv[i + 1]) > 16 ? 16 : atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps-big"))
            reps_big = atoi(argv[i + 1]) < 1 ? 1 : atoi(argv[i + 1]) > 16 ? 16 : atoi(argv[i + 1]);
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("bench_gpu: no CUDA GPU here: nothing measured\n");
        return 77;
    }
    char name[128], path[600];
    uint64_t fr, tot;
    if (gpu_info(name, sizeof name, &fr, &tot) != 0)
        return 1;
    printf("bench_gpu: %s, %.1f GiB free; containers in %s; %d repetitions per cell (%d from 4 GiB)\n", name,
           fr / 1073741824.0, dir, reps, reps_big);
    snprintf(path, sizeof path, "%s/bench-gpu-%d.crpm", dir, (int)getpid());
    char *recs = NULL; /* the records so far: the file is rewritten whole after each size */
    size_t recs_len = 0;
    FILE *js = open_memstream(&recs, &recs_len);
    if (!js) {
        perror("open_memstream");
        return 1;
    }
    int first_js = 1;
    double t_start = now(), per_gib_rep = 0; /* seconds per GiB and (repetition + 1) so far */
    for (const char *s = sizes; *s;) {
        char *end;
        run r = {.gib = strtod(s, &end)};
        s = *end == ',' ? end + 1 : end;
        uint64_t bytes = (uint64_t)(r.gib * 1073741824.0);
        double left = budget - (now() - t_start);
        reps_now = r.gib >= 4 ? reps_big : reps;
        r.skipped = fits(bytes, dir);
        if (!r.skipped && per_gib_rep > 0 && per_gib_rep * r.gib * (reps_now + 1) > left)
            r.skipped = "would not end within the time budget";
        if (!r.skipped) {
            double t0 = now();
            char *dev;
            cu(cudaMalloc((void **)&dev, bytes), "cudaMalloc of the array");
            if (gpu_fill(dev, bytes, 1) != 0)
                return 1;
            for (int mode = 1; mode <= 3; mode++)
                one_mode(&r, mode, dev, bytes, path);
            crpm_dev_trim();
            floors(&r, dev, bytes);
            cudaFree(dev);
            r.done = 1;
            per_gib_rep = (now() - t0) / r.gib / (reps_now + 1);
        }
        print_run(&r, js, &first_js);
        fflush(js);
        FILE *f = fopen(out, "w");
        if (!f) {
            perror(out);
            return 1;
        }
        fprintf(f, "{\"device\": \"%s\", \"block_size\": %u, \"results\": [%s\n]}\n", name, BLK, recs);
        fclose(f);
        fflush(stdout);
    }
    fclose(js);
    free(recs);
    printf("\nresults: %s\n", out);
    return 0;
}

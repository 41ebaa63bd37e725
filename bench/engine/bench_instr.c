/* Instrumented change tracking against the other modes, side by side in one
 * run (issue 43): twin arrays get the same mutation (instr_dirty.c, from the
 * same seed), each in its own container:
 *   compare       every block compared; mutated by the plain build of the mutation
 *   pagemap       pages the kernel saw written; the plain build (its faults count
 *                 in the mutation's time)
 *   instrumented  blocks the pass's marks name; the instrumented build of the
 *                 mutation (its marks count in the mutation's time)
 *   full          a full write of the array (new file, write, fsync)
 * For each dirty pattern: the median checkpoint time of each mode, the
 * mutation's time (plain, with page faults, with marks), and the ratios
 * full / checkpoint and full / (checkpoint + the mutation's extra time).
 * Writes engine_instr.json and engine_instr.md under --out. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "engine.h"
#include "../common/bench_util.h"

void dirty_plain(char *a, size_t n, double frac, int runs, uint64_t *s);
void dirty_instr(char *a, size_t n, double frac, int runs, uint64_t *s);

static void evict(void)
{
    static char *junk;
    static size_t n;
    if (!junk) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        n = 3 * (size_t)(l3 > 0 ? l3 : 32l << 20);
        junk = malloc(n);
        if (!junk) return;
    }
    static unsigned char v;
    memset(junk, ++v, n);
}

static double full_write(const char *dir, const char *a, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bench-instr-full-%d.ckpt", dir, (int)getpid());
    double t = now();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    size_t done = 0;
    while (fd >= 0 && done < n) {
        ssize_t w = write(fd, a + done, n - done > (64u << 20) ? (64u << 20) : n - done);
        if (w <= 0) { perror("write"); exit(1); }
        done += (size_t)w;
    }
    if (fd < 0) { perror(path); exit(1); }
    fsync(fd);
    close(fd);
    t = now() - t;
    unlink(path);
    return t;
}

enum { CMP, PGM, INS, NMODE };
static const char *mode_name[NMODE] = {"compare", "pagemap", "instrumented"};

static double ck(crpm_container *c, uint64_t id, crpm_stats_t *st)
{
    evict();
    double t = now();
    if (crpm_container_checkpoint(c, id, st)) {
        fprintf(stderr, "checkpoint: %s\n", crpm_last_error());
        exit(1);
    }
    return now() - t;
}

int main(int argc, char **argv)
{
    const char *dir = "/dev/shm", *out = "bench/results";
    size_t mb = 256;
    int reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) mb = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--size MB] [--reps N] [--dir DIR] [--out DIR]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64) reps = 3;
    size_t n = mb << 20;
    char *a[NMODE], path[NMODE][512];
    crpm_container *c[NMODE];
    const int track[NMODE] = {CRPM_TRACK_COMPARE, CRPM_TRACK_PAGEMAP, CRPM_TRACK_INSTR};
    for (int m = 0; m < NMODE; m++) {
        a[m] = malloc(n);
        if (!a[m]) { fprintf(stderr, "out of memory\n"); return 1; }
        if (m == 0) fill_random(a[0], n);
        else memcpy(a[m], a[0], n);
        snprintf(path[m], sizeof path[m], "%s/bench-instr-%d-%s.crpm", dir, (int)getpid(), mode_name[m]);
        unlink(path[m]);
        crpm_open_opts o = {.path = path[m], .create = 1, .change_tracking = track[m]};
        if (crpm_container_open(&o, &c[m], NULL) || crpm_container_protect(c[m], 0, a[m], n / 8, CRPM_TC_DOUBLE, 8)) {
            fprintf(stderr, "open: %s\n", crpm_last_error());
            return 1;
        }
    }
    int have_pm = strcmp(crpm_container_tracking(c[PGM]), "pagemap") == 0;
    struct utsname u;
    uname(&u);
    printf("machine: %ld cpus, %s %s; %zu MiB protected, media %s, medians of %d%s\n",
           sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, mb, dir, reps,
           have_pm ? "" : "; pagemap unavailable (compared instead)");
    char jpath[600], mpath[600];
    snprintf(jpath, sizeof jpath, "%s/engine_instr.json", out);
    snprintf(mpath, sizeof mpath, "%s/engine_instr.md", out);
    FILE *js = fopen(jpath, "w"), *md = fopen(mpath, "w");
    if (!js || !md) { perror(out); return 1; }
    fprintf(js, "{\"machine\": {\"cpus\": %ld, \"kernel\": \"%s %s\"}, \"size_mb\": %zu, \"reps\": %d, "
                "\"pagemap\": %s,\n \"points\": [\n", sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, mb, reps,
            have_pm ? "true" : "false");
    fprintf(md, "| dirty | pattern | full s | compare s | pagemap s | instrumented s | mutation s (plain / faults / "
                "marks) | full/compare | full/pagemap | full/instr | full/(pagemap+faults) | full/(instr+marks) |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    printf("%6s %6s | %8s %8s %8s %8s | %8s %8s %8s | %8s %8s %8s %9s %9s\n", "dirty", "kind", "full", "compare",
           "pagemap", "instr", "mut", "+faults", "+marks", "f/cmp", "f/pm", "f/ins", "f/(pm+f)", "f/(in+m)");
    /* steady state: both copies of every segment */
    uint64_t id = 1, seed = 1;
    for (int w = 0; w < 3; w++) {
        uint64_t s0 = seed;
        for (int m = 0; m < NMODE; m++) {
            seed = s0;
            (m == INS ? dirty_instr : dirty_plain)(a[m], n, 1.0, 0, &seed);
            ck(c[m], id, NULL);
        }
        id++;
    }
    static const double fracs[] = {0.001, 0.01, 0.10, 1.0};
    int first = 1;
    for (size_t fi = 0; fi < sizeof fracs / sizeof *fracs; fi++)
        for (int runs = 0; runs < (fracs[fi] < 1.0 ? 2 : 1); runs++) {
            double t[NMODE][64], mut[NMODE][64], full[64];
            for (int r = -2; r < reps; r++) { /* two untimed rounds: pagemap's hot/cold state settles */
                uint64_t s0 = seed;
                for (int m = 0; m < NMODE; m++) {
                    seed = s0;
                    evict();
                    double t0 = now();
                    (m == INS ? dirty_instr : dirty_plain)(a[m], n, fracs[fi], runs, &seed);
                    double tm = now() - t0;
                    crpm_stats_t st;
                    double tc = ck(c[m], id, &st);
                    if (r >= 0) {
                        mut[m][r] = tm;
                        t[m][r] = tc;
                    }
                }
                id++;
                if (r >= 0) {
                    evict();
                    full[r] = full_write(dir, a[0], n);
                }
            }
            double mf = median(full, reps), mc[NMODE], mm[NMODE];
            for (int m = 0; m < NMODE; m++) {
                mc[m] = median(t[m], reps);
                mm[m] = median(mut[m], reps);
            }
            double xf = mm[PGM] > mm[CMP] ? mm[PGM] - mm[CMP] : 0, xi = mm[INS] > mm[CMP] ? mm[INS] - mm[CMP] : 0;
            const char *kind = fracs[fi] >= 1.0 ? "all" : runs ? "runs" : "blocks";
            printf("%5.1f%% %6s | %8.4f %8.4f %8.4f %8.4f | %8.4f %8.4f %8.4f | %7.1fx %7.1fx %7.1fx %8.1fx %8.1fx\n",
                   fracs[fi] * 100, kind, mf, mc[CMP], mc[PGM], mc[INS], mm[CMP], mm[PGM], mm[INS], mf / mc[CMP],
                   mf / mc[PGM], mf / mc[INS], mf / (mc[PGM] + xf), mf / (mc[INS] + xi));
            fprintf(md, "| %.1f%% | %s | %.4f | %.4f | %.4f | %.4f | %.4f / %.4f / %.4f | %.1fx | %.1fx | %.1fx | "
                        "%.1fx | %.1fx |\n", fracs[fi] * 100, kind, mf, mc[CMP], mc[PGM], mc[INS], mm[CMP], mm[PGM],
                    mm[INS], mf / mc[CMP], mf / mc[PGM], mf / mc[INS], mf / (mc[PGM] + xf), mf / (mc[INS] + xi));
            fprintf(js, "%s  {\"dirty_pct\": %.1f, \"pattern\": \"%s\", \"full_s\": %.6f, \"compare_s\": %.6f, "
                        "\"pagemap_s\": %.6f, \"instrumented_s\": %.6f, \"mutation_plain_s\": %.6f, "
                        "\"mutation_faults_s\": %.6f, \"mutation_marks_s\": %.6f}", first ? "" : ",\n",
                    fracs[fi] * 100, kind, mf, mc[CMP], mc[PGM], mc[INS], mm[CMP], mm[PGM], mm[INS]);
            first = 0;
        }
    fprintf(js, "\n ]}\n");
    fclose(js);
    fclose(md);
    /* the arrays must still agree: the same mutations */
    for (int m = 1; m < NMODE; m++)
        if (memcmp(a[0], a[m], n)) {
            fprintf(stderr, "the twin arrays differ: the mutations were not the same\n");
            return 1;
        }
    for (int m = 0; m < NMODE; m++) {
        crpm_container_close(c[m]);
        unlink(path[m]);
        free(a[m]);
    }
    printf("results: %s %s\n", jpath, mpath);
    return 0;
}

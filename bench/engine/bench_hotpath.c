/* The engine's host-memory hot path, for comparing two builds on a shared
 * machine: checkpoints of one array (idle, 1% random 256-B blocks, 100%
 * dirty), with and without change_tracking = pagemap, and recovery into
 * touched memory; minimum and median of many repetitions (the minimum is
 * what other jobs on the machine disturb least).  Uses only the engine's
 * entry points, so the same source builds against an older tree.
 *
 *   bench_hotpath [--mb 64] [--reps 21] [--dir /dev/shm] [--label L] [--json FILE] [--only POINT]
 *
 * --only runs one point (e.g. "1% blocks"; under callgrind: instruction
 * counts, which other jobs on the machine do not disturb).
 * Each timed checkpoint follows an untimed one of the same pattern (both
 * copies exist, tracking has its report).  Prints one line per point. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine.h"
#include "../common/bench_util.h"

static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", what, crpm_last_error());
        exit(1);
    }
}

static void dirty(char *a, size_t n, double frac)
{
    if (frac >= 1.0) {
        uint64_t salt = rnd() | 1;
        for (size_t i = 0; i + 8 <= n; i += 8) *(uint64_t *)(a + i) ^= salt;
        return;
    }
    size_t nb = n / 256, k = (size_t)(frac * (double)nb);
    for (size_t i = 0; i < k; i++)
        *(uint64_t *)(a + (rnd() % nb) * 256) ^= rnd() | 1;
}

typedef struct point {
    const char *name;
    double frac;
    int track;
} point;

int main(int argc, char **argv)
{
    size_t mb = 64;
    int reps = 21;
    const char *dir = "/dev/shm", *label = "this build", *json = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--mb N] [--reps N] [--dir D] [--label L] [--json FILE] [--only POINT]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    size_t n = mb << 20;
    static const point pts[] = {{"idle", 0, 0}, {"1% blocks", 0.01, 0}, {"100%", 1.0, 0},
                                {"idle, pagemap", 0, 1}, {"1% blocks, pagemap", 0.01, 1}, {"100%, pagemap", 1.0, 1}};
    FILE *jf = json ? fopen(json, "a") : NULL;
    double *t = malloc(sizeof *t * (size_t)reps);
    char *a = aligned_alloc(4096, n);
    fill_random(a, n);
    for (size_t p = 0; p < sizeof pts / sizeof pts[0]; p++) {
        if (only && strcmp(only, pts[p].name) != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/bench-hotpath-%d.crpm", dir, (int)getpid());
        unlink(path);
        crpm_open_opts o = {.path = path, .create = 1, .change_tracking = pts[p].track};
        crpm_container *c;
        must(crpm_container_open(&o, &c, NULL), "open");
        if (pts[p].track && strcmp(crpm_container_tracking(c), "pagemap") != 0) {
            crpm_container_close(c);
            unlink(path);
            continue;
        }
        must(crpm_container_protect(c, 1, a, n, CRPM_TC_BYTE, 1), "protect");
        uint64_t id = 1;
        for (int w = 0; w < 3; w++) { /* both copies made, tracking settled */
            dirty(a, n, pts[p].frac);
            must(crpm_container_checkpoint(c, id++, NULL), "checkpoint");
        }
        for (int r = 0; r < reps; r++) {
            dirty(a, n, pts[p].frac);
            must(crpm_container_checkpoint(c, id++, NULL), "checkpoint");
            dirty(a, n, pts[p].frac);
            double t0 = now();
            must(crpm_container_checkpoint(c, id++, NULL), "checkpoint");
            t[r] = now() - t0;
        }
        double mn = t[0];
        for (int r = 1; r < reps; r++) mn = t[r] < mn ? t[r] : mn;
        double md = median(t, reps);
        printf("%-12s %-20s %5zu MB  min %9.6f s  median %9.6f s\n", label, pts[p].name, mb, mn, md);
        if (jf)
            fprintf(jf, "{\"build\": \"%s\", \"point\": \"%s\", \"mb\": %zu, \"min_s\": %.6f, \"median_s\": %.6f}\n",
                    label, pts[p].name, mb, mn, md);
        if (p == 0) { /* recovery into the (touched) array */
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                must(crpm_container_recover(c), "recover");
                t[r] = now() - t0;
            }
            mn = t[0];
            for (int r = 1; r < reps; r++) mn = t[r] < mn ? t[r] : mn;
            md = median(t, reps);
            printf("%-12s %-20s %5zu MB  min %9.6f s  median %9.6f s\n", label, "recover (touched)", mb, mn, md);
            if (jf)
                fprintf(jf, "{\"build\": \"%s\", \"point\": \"recover (touched)\", \"mb\": %zu, \"min_s\": %.6f, "
                            "\"median_s\": %.6f}\n", label, mb, mn, md);
        }
        crpm_container_close(c);
        unlink(path);
    }
    if (jf)
        fclose(jf);
    free(a);
    free(t);
    return 0;
}

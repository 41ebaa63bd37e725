/* Many small arrays (issue 27 item 7): N protected arrays of one int each in
 * one container (default geometry, /dev/shm), as FTI programs protect tens to
 * thousands of scalars.  Per N: the container's apparent and allocated size
 * after two checkpoints, the first checkpoint, the median steady checkpoint
 * with 1% of the scalars changed and with none changed, and recovery into the
 * arrays after a reopen.  Uses only the engine's entry points, so the same
 * source builds against an older tree for a before/after comparison.
 *
 *   bench_small [--counts 5000,50000] [--reps 7] [--dir /dev/shm]
 *               [--persist auto|msync] [--label NAME] [--json FILE]
 *
 * Prints one row per N and, with --json, appends the rows as JSON lines. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine.h"
#include "../common/bench_util.h"

typedef struct row {
    int n;
    double apparent, allocated; /* bytes */
    double first_s, steady_s, idle_s, recover_s;
} row;

static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", what, crpm_last_error());
        exit(1);
    }
}

static row run(int n, int reps, const char *dir, int persist)
{
    row r = {.n = n};
    char path[512];
    snprintf(path, sizeof path, "%s/bench-small-%d-%d.crpm", dir, (int)getpid(), n);
    unlink(path);
    crpm_open_opts o = {.path = path, .create = 1, .persistence = persist};
    crpm_container *c;
    must(crpm_container_open(&o, &c, NULL), "open");
    int *v = malloc((size_t)n * sizeof *v); /* one allocation: what a Fortran COMMON block or a struct gives */
    int **p = malloc((size_t)n * sizeof *p);
    for (int i = 0; i < n; i++) {
        p[i] = malloc(sizeof **p); /* each scalar its own heap object, as FTI_Protect(&x) of locals */
        *p[i] = (int)rnd();
    }
    (void)v;
    for (int i = 0; i < n; i++)
        must(crpm_container_protect(c, i, p[i], 1, CRPM_TC_INT, sizeof(int)), "protect");
    double t = now();
    must(crpm_container_checkpoint(c, 1, NULL), "checkpoint");
    r.first_s = now() - t;
    double *st = malloc(sizeof *st * (size_t)reps), *it = malloc(sizeof *it * (size_t)reps);
    for (int k = 0; k < reps; k++) {
        for (int j = 0; j < (n + 99) / 100; j++)
            *p[rnd() % (uint64_t)n] ^= (int)(rnd() | 1);
        t = now();
        must(crpm_container_checkpoint(c, (uint64_t)(2 + 2 * k), NULL), "checkpoint");
        st[k] = now() - t;
        t = now();
        must(crpm_container_checkpoint(c, (uint64_t)(3 + 2 * k), NULL), "checkpoint");
        it[k] = now() - t;
    }
    r.steady_s = median(st, reps);
    r.idle_s = median(it, reps);
    must(crpm_container_close(c), "close");
    struct stat sb;
    if (stat(path, &sb) == 0) {
        r.apparent = (double)sb.st_size;
        r.allocated = (double)sb.st_blocks * 512.0;
    }
    int *want = malloc((size_t)n * sizeof *want);
    for (int i = 0; i < n; i++) {
        want[i] = *p[i];
        *p[i] = 0;
    }
    t = now();
    crpm_open_opts ro = {.path = path, .persistence = persist};
    must(crpm_container_open(&ro, &c, NULL), "reopen");
    for (int i = 0; i < n; i++)
        must(crpm_container_protect(c, i, p[i], 1, CRPM_TC_INT, sizeof(int)), "protect");
    must(crpm_container_recover(c), "recover");
    r.recover_s = now() - t;
    crpm_container_close(c);
    for (int i = 0; i < n; i++)
        if (*p[i] != want[i]) {
            fprintf(stderr, "scalar %d not recovered\n", i);
            exit(1);
        }
    unlink(path);
    for (int i = 0; i < n; i++)
        free(p[i]);
    free(p);
    free(v);
    free(want);
    free(st);
    free(it);
    return r;
}

int main(int argc, char **argv)
{
    const char *dir = "/dev/shm", *counts = "5000,50000", *label = "this build", *json = NULL;
    int reps = 7, persist = CRPM_PERSIST_AUTO;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--counts") && i + 1 < argc) counts = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--persist") && i + 1 < argc)
            persist = !strcmp(argv[++i], "msync") ? CRPM_PERSIST_MSYNC : CRPM_PERSIST_AUTO;
        else {
            fprintf(stderr, "usage: %s [--counts N,N] [--reps R] [--dir D] [--persist auto|msync] [--label L] "
                            "[--json FILE]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    FILE *jf = json ? fopen(json, "a") : NULL;
    printf("%-12s %7s | %12s %12s | %9s %9s %9s %9s\n", "build", "arrays", "apparent B", "allocated B", "first s",
           "1% s", "idle s", "recover s");
    for (const char *q = counts; *q;) {
        int n = atoi(q);
        row r = run(n, reps, dir, persist);
        printf("%-12s %7d | %12.0f %12.0f | %9.4f %9.4f %9.4f %9.4f\n", label, n, r.apparent, r.allocated, r.first_s,
               r.steady_s, r.idle_s, r.recover_s);
        fflush(stdout);
        if (jf)
            fprintf(jf, "{\"build\": \"%s\", \"arrays\": %d, \"apparent_bytes\": %.0f, \"allocated_bytes\": %.0f, "
                        "\"first_s\": %.6f, \"steady_1pct_s\": %.6f, \"idle_s\": %.6f, \"recover_s\": %.6f, "
                        "\"reps\": %d}\n", label, n, r.apparent, r.allocated, r.first_s, r.steady_s, r.idle_s,
                    r.recover_s, reps);
        const char *comma = strchr(q, ',');
        q = comma ? comma + 1 : q + strlen(q);
    }
    if (jf)
        fclose(jf);
    return 0;
}

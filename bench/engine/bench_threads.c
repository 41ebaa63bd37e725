/* bench_engine --threads 1,2,4,8,16 (issue 31, docs/threads.md): the engine
 * with N workers beside the floor with the same N threads, in one run.
 *
 * Per size and thread count, alternating engine and floor each repetition:
 *   ckpt  checkpoint at 1%, 10% and 100% dirty (random 256-B blocks; 100%:
 *         every word), steady state (both copies exist); floor: memcmp of
 *         every byte with a reference copy plus memcpy of the dirty bytes,
 *         split over the threads
 *   fresh recovery into freshly mapped (never touched) arrays: the first
 *         touch is in the workers; floor: memcpy into fresh memory, split
 *   touched recovery into arrays touched before; floor: memcpy into them
 * Recovery verifies the chunks' CRCs, as always.  Prints medians, GB/s and
 * the ratio to the floor; writes engine_threads.json and .txt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "engine.h"
#include "pool.h"
#include "../common/bench_util.h"

#define CHUNK (1u << 20)

typedef struct floor_job {
    char *dst;
    const char *src;
    size_t n;
    int cmp;          /* ckpt floor: blocks compared, the differing ones copied */
} floor_job;

static void floor_task(void *arg, uint64_t t, int w)
{
    (void)w;
    floor_job *j = arg;
    size_t off = (size_t)t * CHUNK, len = j->n - off < CHUNK ? j->n - off : CHUNK;
    if (j->cmp) { /* every block compared, the differing ones copied */
        for (size_t b = 0; b < len; b += 256)
            if (memcmp(j->dst + off + b, j->src + off + b, 256) != 0)
                memcpy(j->dst + off + b, j->src + off + b, 256);
    } else {
        memcpy(j->dst + off, j->src + off, len);
    }
}

static double run_floor(crpm_pool *p, floor_job *j)
{
    double t0 = now();
    crpm_pool_run(p, (j->n + CHUNK - 1) / CHUNK, floor_task, j);
    return now() - t0;
}

/* Changes `frac` of the array in random 256-B blocks (every word at 1). */
static void dirty(char *a, size_t n, double frac)
{
    if (frac >= 1.0) {
        uint64_t salt = rnd() | 1;
        for (size_t i = 0; i < n; i += 8)
            *(uint64_t *)(a + i) ^= salt;
        return;
    }
    size_t nb = n / 256, k = (size_t)(frac * (double)nb);
    for (size_t i = 0; i < k; i++) {
        size_t b = rnd() % nb;
        *(uint64_t *)(a + b * 256 + (rnd() % 32) * 8) ^= rnd() | 1;
    }
}

static char *fresh_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

typedef struct point {
    const char *op;
    double frac;
    double s, floor_s;
} point;

/* One size with T workers: the 5 points. */
static int measure(const char *dir, size_t n, int T, int reps, point pt[5])
{
    char path[512];
    snprintf(path, sizeof path, "%s/bench-threads-%d.crpm", dir, (int)getpid());
    unlink(path);
    crpm_open_opts o = {.path = path, .job_name = "bench", .rank = 0, .nranks = 1, .create = 1};
    crpm_container *c;
    crpm_pool *pool;
    char *a = malloc(n), *ref = malloc(n), *touched = malloc(n);
    if (!a || !ref || !touched || crpm_pool_create(T, &pool) || crpm_container_open(&o, &c, NULL))
        return -1;
    crpm_container_set_pool(c, pool);
    fill_random(a, n);
    memcpy(ref, a, n);
    memset(touched, 1, n);
    int rc = crpm_container_protect(c, 0, a, n, CRPM_TC_BYTE, 1);
    uint64_t id = 0;
    for (int i = 0; rc == 0 && i < 2; i++) { /* both copies exist: steady state */
        dirty(a, n, 1.0);
        rc = crpm_container_checkpoint(c, ++id, NULL);
    }
    memcpy(ref, a, n); /* the floor's copy, as the engine's */
    static const double fracs[3] = {0.01, 0.10, 1.0};
    double v[3][2][64], rv[2][2][64];
    for (int r = 0; rc == 0 && r < reps; r++) {
        for (int f = 0; rc == 0 && f < 3; f++) {
            dirty(a, n, fracs[f]);
            double t0 = now();
            rc = crpm_container_checkpoint(c, ++id, NULL);
            v[f][0][r] = now() - t0;
            floor_job j = {ref, a, n, 1};
            v[f][1][r] = run_floor(pool, &j);
        }
        /* recovery into fresh memory, then into touched memory */
        char *m = fresh_map(n);
        rc = m ? crpm_container_protect(c, 0, m, n, CRPM_TC_BYTE, 1) : -1;
        double t0 = now();
        rc = rc ? rc : crpm_container_recover(c);
        rv[0][0][r] = now() - t0;
        if (rc == 0 && memcmp(m, a, n) != 0)
            rc = -1, fprintf(stderr, "recovery into fresh memory differs\n");
        munmap(m, n);
        m = fresh_map(n);
        floor_job j = {m, a, n, 0};
        rv[0][1][r] = m ? run_floor(pool, &j) : 0;
        munmap(m, n);
        rc = rc ? rc : crpm_container_protect(c, 0, touched, n, CRPM_TC_BYTE, 1);
        t0 = now();
        rc = rc ? rc : crpm_container_recover(c);
        rv[1][0][r] = now() - t0;
        floor_job k = {touched, a, n, 0};
        rv[1][1][r] = run_floor(pool, &k);
        rc = rc ? rc : crpm_container_protect(c, 0, a, n, CRPM_TC_BYTE, 1);
    }
    if (rc)
        fprintf(stderr, "bench: %s\n", crpm_last_error());
    for (int f = 0; f < 3; f++)
        pt[f] = (point){"ckpt", fracs[f], median(v[f][0], reps), median(v[f][1], reps)};
    pt[3] = (point){"recover fresh", 1, median(rv[0][0], reps), median(rv[0][1], reps)};
    pt[4] = (point){"recover touched", 1, median(rv[1][0], reps), median(rv[1][1], reps)};
    crpm_container_close(c);
    crpm_pool_free(pool);
    unlink(path);
    free(a);
    free(ref);
    free(touched);
    return rc;
}

int bench_threads(const char *dir, const char *out, const size_t *sizes_mb, int nsizes, int reps,
                  const int *threads, int nthreads)
{
    char jpath[600], tpath[600];
    snprintf(jpath, sizeof jpath, "%s/engine_threads.json", out);
    snprintf(tpath, sizeof tpath, "%s/engine_threads.txt", out);
    FILE *js = fopen(jpath, "w"), *tx = fopen(tpath, "w");
    if (!js || !tx) {
        perror(out);
        return 1;
    }
    if (reps > 64)
        reps = 64;
    struct utsname u;
    uname(&u);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(js, "{\"machine\": {\"cpus\": %ld, \"kernel\": \"%s %s\"}, \"dir\": \"%s\", \"reps\": %d,\n \"points\": [\n",
            ncpu, u.sysname, u.release, dir, reps);
    char line[256];
    snprintf(line, sizeof line, "machine: %ld cpus, %s %s; media dir %s; medians of %d\n", ncpu, u.sysname,
             u.release, dir, reps);
    fputs(line, stdout);
    fputs(line, tx);
    snprintf(line, sizeof line, "%8s %7s %16s %6s | %9s %8s | %9s %8s | %8s\n", "size", "threads", "op", "dirty",
             "crpm s", "GB/s", "floor s", "GB/s", "vs floor");
    fputs(line, stdout);
    fputs(line, tx);
    int first = 1, rc = 0;
    for (int si = 0; si < nsizes && rc == 0; si++)
        for (int ti = 0; ti < nthreads && rc == 0; ti++) {
            size_t n = sizes_mb[si] << 20;
            point pt[5];
            rc = measure(dir, n, threads[ti], reps, pt);
            for (int k = 0; k < 5 && rc == 0; k++) {
                /* GB/s of the protected bytes (checkpoints: of all, as compared) */
                double gb = (double)n / 1e9;
                snprintf(line, sizeof line, "%6zu M %7d %16s %5.0f%% | %9.4f %8.2f | %9.4f %8.2f | %8.2f\n",
                         sizes_mb[si], threads[ti], pt[k].op, pt[k].frac * 100, pt[k].s, gb / pt[k].s, pt[k].floor_s,
                         gb / pt[k].floor_s, pt[k].s / pt[k].floor_s);
                fputs(line, stdout);
                fputs(line, tx);
                fprintf(js, "%s  {\"size_mb\": %zu, \"threads\": %d, \"op\": \"%s\", \"dirty_pct\": %g, "
                        "\"crpm_s\": %.6f, \"floor_s\": %.6f, \"crpm_gbps\": %.3f, \"floor_gbps\": %.3f, "
                        "\"ratio_to_floor\": %.3f}", first ? "" : ",\n", sizes_mb[si], threads[ti], pt[k].op,
                        pt[k].frac * 100, pt[k].s, pt[k].floor_s, gb / pt[k].s, gb / pt[k].floor_s,
                        pt[k].s / pt[k].floor_s);
                first = 0;
            }
            fflush(stdout);
        }
    fprintf(js, "\n ]}\n");
    fclose(js);
    fclose(tx);
    return rc ? 1 : 0;
}

/* Allocation speed of the persistent heap (lib/heap) against glibc malloc,
 * side by side in one run, single-threaded, alternating the two.
 *
 *   bench_malloc [OPS] [REPEATS] [RESULT.json]
 *
 * Patterns (OPS operations each):
 *   pairs      malloc + free of one 16..256-byte block (the tcache case);
 *   fill       OPS blocks of 16..256 bytes, then freed in random order;
 *   churn      a working set of 64 Ki blocks of 16..512 bytes, a random one
 *              freed and reallocated each step (map-like updates);
 *   mixed      churn with 1 block in 50 of 4..64 KiB (large);
 *   nodes      std::map-like: 32-byte and 48-byte nodes, insert-heavy.
 * Prints CPU ns per operation (median of the repeats) and crpm/glibc ratios. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "bench_util.h"
#include "error.h"
#include "heap.h"

static crpm_heap *H;
static int use_heap;

static inline void *xmalloc(size_t n) { return use_heap ? crpm_heap_alloc(H, n) : malloc(n); }
static inline void xfree(void *p)
{
    if (use_heap)
        crpm_heap_free(H, p);
    else
        free(p);
}

static int grow(void *arg, void *base, uint64_t bytes)
{
    (void)arg;
    return mprotect(base, bytes, PROT_READ | PROT_WRITE) == 0 ? 0 : crpm_error(CRPM_ERR_NOMEM, "mprotect");
}

static void **slots;

/* CPU time of this process: the machine may be shared, wall time is not ours. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double run(int pattern, long ops)
{
    rng = 88172645463325252ull;
    double t0 = cpu_now();
    switch (pattern) {
    case 0:
        for (long i = 0; i < ops; i++) {
            void *p = xmalloc(16 + (rnd() & 240));
            *(volatile char *)p = 1;
            xfree(p);
        }
        break;
    case 1:
        for (long i = 0; i < ops; i++) {
            slots[i] = xmalloc(16 + (rnd() & 240));
            *(char *)slots[i] = 1;
        }
        for (long i = ops - 1; i > 0; i--) { /* random order */
            long j = (long)(rnd() % (uint64_t)(i + 1));
            void *t = slots[i];
            slots[i] = slots[j];
            slots[j] = t;
        }
        for (long i = 0; i < ops; i++)
            xfree(slots[i]);
        break;
    case 2:
    case 3:
    case 4: {
        long ws = 65536;
        for (long i = 0; i < ws; i++)
            slots[i] = xmalloc(pattern == 4 ? 32 : 16 + (rnd() & 496));
        for (long i = 0; i < ops; i++) {
            uint64_t r = rnd();
            long k = (long)(r % (uint64_t)ws);
            xfree(slots[k]);
            size_t n = pattern == 4 ? ((r >> 40) & 1 ? 48 : 32)
                       : pattern == 3 && (r >> 32) % 50 == 0 ? 4096 + ((r >> 20) & 65535)
                                                                : 16 + ((r >> 24) & 496);
            slots[k] = xmalloc(n);
            *(char *)slots[k] = 1;
        }
        for (long i = 0; i < ws; i++)
            xfree(slots[i]);
        break;
    }
    }
    return (cpu_now() - t0) / (double)ops * 1e9;
}

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 2000000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    const char *json = argc > 3 ? argv[3] : NULL;
    uint64_t reserve = (uint64_t)4 << 30;
    void *mem = mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    slots = malloc((size_t)(ops > 65536 ? ops : 65536) * sizeof *slots);
    if (mem == MAP_FAILED || !slots || crpm_heap_create(&H, mem, reserve, 0, grow, NULL) != 0) {
        fprintf(stderr, "bench_malloc: setup failed: %s\n", crpm_last_error());
        return 1;
    }
    static const char *names[] = {"pairs", "fill", "churn", "mixed", "nodes"};
    FILE *js = json ? fopen(json, "w") : NULL;
    if (js)
        fprintf(js, "{\"ops\": %ld, \"repeats\": %d, \"patterns\": [", ops, reps);
    printf("%-8s %12s %12s %8s   (ns per operation, median of %d; %ld ops)\n", "pattern", "glibc", "crpm_heap",
           "ratio", reps, ops);
    for (int p = 0; p < 5; p++) {
        double g[64], c[64];
        for (int r = 0; r < reps && r < 64; r++) { /* alternate: the same machine state for both */
            use_heap = 0;
            g[r] = run(p, ops);
            use_heap = 1;
            c[r] = run(p, ops);
        }
        double mg = median(g, reps), mc = median(c, reps);
        printf("%-8s %12.1f %12.1f %8.2f\n", names[p], mg, mc, mc / mg);
        if (js)
            fprintf(js, "%s{\"pattern\": \"%s\", \"glibc_ns\": %.2f, \"crpm_ns\": %.2f, \"ratio\": %.3f}", p ? ", " : "",
                    names[p], mg, mc, mc / mg);
    }
    if (js) {
        fprintf(js, "]}\n");
        fclose(js);
    }
    int rc = crpm_heap_check(H, stdout);
    crpm_heap_close(H);
    return rc ? 1 : 0;
}

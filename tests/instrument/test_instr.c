/* Instrumented change tracking (change_tracking = instrumented; lib/engine/
 * track_instr.c, marks.c, the pass lib/instrument): this file is compiled
 * with clang-14 and the pass plugin, uninstr.c without it.  One subtest per
 * argument:
 *
 *   kinds     stores of every kind (scalar, struct fields, vector, atomic
 *             store / read-modify-write / compare-exchange, memcpy, memmove,
 *             memset of constant and variable length, through an opaque
 *             pointer, loops of every stride, nested, backwards, early exit)
 *             into arrays of several alignments: instrumented-verify finds
 *             no unmarked change, and each checkpoint compares a few blocks,
 *             not the arrays
 *   recover   the same stores in instrumented mode: every committed epoch
 *             recovers exactly the data
 *   uninstr   a write by code the pass did not compile fails the verifying
 *             checkpoint naming the array and the byte offset; the array
 *             marked as written by uninstrumented code (compared), or the
 *             write declared with crpm_instr_written, passes
 *   threads   four threads marking the same blocks and bitmap words at once
 *             between checkpoints: instrumented-verify finds no lost mark
 *   threads-recover  the same in instrumented mode: each epoch recovers
 *             exactly (the engine does not support writes during its data
 *             pass, with any tracking, so the threads stop for each one)
 *   outside   stores outside checkpointed memory mark nothing: a checkpoint
 *             after them compares nothing */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "crpm_instrument.h"

void uninstr_write(void *p, size_t n, unsigned char v); /* uninstr.c */
void uninstr_copy(void *dst, const void *src, size_t n);

enum { BLK = 256, N = 4 << 20 };

static const char *dir = "/tmp";
static char path[600];

static crpm_container *open_mode(int mode)
{
    snprintf(path, sizeof path, "%s/instr-%d.crpm", dir, (int)getpid());
    unlink(path);
    crpm_open_opts o = {.path = path, .segment_size = 1 << 20, .block_size = BLK, .create = 1,
                        .change_tracking = mode};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    return c;
}

static void done(crpm_container *c)
{
    crpm_container_close(c);
    unlink(path);
}

static crpm_stats_t ck(crpm_container *c, uint64_t id)
{
    crpm_stats_t st;
    REQUIRE(crpm_container_checkpoint(c, id, &st) == 0, "checkpoint %llu: %s", (unsigned long long)id,
            crpm_last_error());
    return st;
}

/* The committed epoch, recovered into the arrays after they were scribbled
 * over by uninstrumented code, equals what they held. */
static void check_recovers(crpm_container *c, char **a, size_t *n, int k, const char *what)
{
    for (int i = 0; i < k; i++) {
        char *ref = malloc(n[i]);
        REQUIRE(ref, "malloc");
        uninstr_copy(ref, a[i], n[i]);
        uninstr_write(a[i], n[i], 0x5a);
        REQUIRE(crpm_container_recover(c) == 0, "recover (%s): %s", what, crpm_last_error());
        for (size_t j = 0; j < n[i]; j++)
            REQUIRE(a[i][j] == ref[j], "%s: array %d differs at byte %zu after recovery", what, i, j);
        free(ref);
    }
}

typedef double v4d __attribute__((vector_size(32)));
struct rec { long a; int b; short c; char d; double e[3]; };

/* an opaque pointer: the pass cannot place it */
static void *volatile opaque;
static void (*volatile store_fn)(char *, size_t, char);
static void store_at(char *p, size_t i, char v) { p[i] = v; }

/* A w-aligned address in [a, a + n - w). */
static void *at_w(char *a, size_t n, uint64_t *s, size_t w)
{
    uintptr_t p = (uintptr_t)(a + rnd_below(s, n - 2 * w)), r = (p + w - 1) & ~(uintptr_t)(w - 1);
    return (void *)r;
}

/* One epoch of stores of every kind into a (n bytes), from s. */
static void stores(char *a, size_t n, uint64_t *s, int round)
{
    size_t q = n / 16;
    /* scalar stores of each width */
    a[rnd_below(s, n)] ^= 1;
    *(short *)at_w(a, n, s, 2) += 3;
    *(int *)at_w(a, n, s, 4) += 5;
    *(long *)at_w(a, n, s, 8) += 7;
    *(long double *)at_w(a, n, s, 16) = round * 1.5L;
    /* struct fields, one mark for several */
    struct rec *r = at_w(a, n - sizeof(struct rec), s, 8);
    r->a = round;
    r->b = round + 1;
    r->c = (short)(round + 2);
    r->d = (char)round;
    r->e[2] = round * 0.5;
    /* vector store */
    v4d *v = at_w(a, n, s, 32);
    *v = *v + (v4d){1, 2, 3, 4};
    /* atomics */
    _Atomic long *al = at_w(a, n, s, 8);
    atomic_store(al, round);
    atomic_fetch_add((_Atomic long *)at_w(a, n, s, 8), 11);
    _Atomic long *cx = at_w(a, n, s, 8);
    long expect = atomic_load(cx);
    atomic_compare_exchange_strong(cx, &expect, expect + round + 1);
    __atomic_fetch_or((unsigned *)at_w(a, n, s, 4), 0x80u, __ATOMIC_RELAXED);
    /* memcpy, memmove, memset: constant small, variable, large */
    size_t at = rnd_below(s, n - 4096), len = 1 + rnd_below(s, 4000);
    char tmp[64];
    for (int i = 0; i < 64; i++)
        tmp[i] = (char)(round + i);
    memcpy(a + rnd_below(s, n - 16), tmp, 16);
    memcpy(a + at, a + rnd_below(s, n - 4096), len);
    memmove(a + rnd_below(s, n - 4096), a + at, len);
    memset(a + rnd_below(s, n - 4096), round, 1 + rnd_below(s, 4000));
    memset(a + rnd_below(s, n - 8), 0x33, 8);
    /* through a pointer the pass cannot place, and a call through a pointer */
    opaque = a;
    ((char *)opaque)[rnd_below(s, n)] = (char)round;
    store_fn = store_at;
    store_fn(a, rnd_below(s, n), (char)(round + 9));
    /* loops: forward, strided, backwards, nested, with an early exit */
    size_t o = rnd_below(s, n - 3 * q);
    for (size_t i = 0; i < q / 8 / 50; i++)
        ((double *)at_w(a + o, 64, s, 8))[i] = i * 0.25 + round;
    long *lp = at_w(a + o, 64, s, 8);
    for (size_t i = 0; i < q / 64; i += 3)
        lp[i * 8] += i;
    for (long i = (long)(q / 8) - 1; i >= (long)(q / 8) - 300; i--)
        ((long *)at_w(a + q, 64, s, 8))[i] = i ^ round;
    size_t rows = 20, cols = 30, stride = q / 64;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            a[2 * q + i * stride + j] = (char)(i + j + round);
    for (size_t i = 0; i < 1000; i++) {
        if (a[3 * q + i] == (char)0x7f)
            break;
        a[3 * q + i * 2 + 1] = (char)round;
    }
    long cnt = (long)rnd_below(s, 200);
    int *ip = at_w(a + 5 * q, 64, s, 4);
    while (cnt-- > 0)
        *ip++ = (int)cnt;
}

static void test_kinds(int verify)
{
    crpm_container *c = open_mode(verify ? CRPM_TRACK_INSTR_VERIFY : CRPM_TRACK_INSTR);
    REQUIRE(strcmp(crpm_container_tracking(c), verify ? "instrumented-verify" : "instrumented") == 0, "tracking: %s",
            crpm_container_tracking(c));
    /* arrays of several alignments: blocks count from each array's start */
    size_t n[3] = {N, N / 2 + 77, N / 4};
    char *raw[3], *a[3];
    uint64_t s = 77;
    for (int i = 0; i < 3; i++) {
        raw[i] = malloc(n[i] + 64);
        REQUIRE(raw[i], "malloc");
        a[i] = raw[i] + (i == 1 ? 13 : i == 2 ? 64 : 0);
        fill_random(&s, a[i], n[i]);
        REQUIRE(crpm_container_protect(c, i + 1, a[i], n[i], CRPM_TC_BYTE, 1) == 0, "protect: %s",
                crpm_last_error());
        REQUIRE(crpm_container_untracked_reason(c, i + 1) == NULL, "array %d not followed: %s", i + 1,
                crpm_container_untracked_reason(c, i + 1));
    }
    uint64_t id = 1;
    ck(c, id++); /* the first compares everything */
    ck(c, id++);
    for (int round = 0; round < 12; round++) {
        for (int i = 0; i < 3; i++)
            stores(a[i], n[i], &s, round);
        crpm_stats_t st = ck(c, id++);
        size_t total = n[0] + n[1] + n[2];
        REQUIRE(st.bytes_compared < total / 4, "round %d: %llu of %zu bytes compared: the marks were not used",
                round, (unsigned long long)st.bytes_compared, total);
        if (!verify && round % 4 == 3)
            check_recovers(c, a, n, 3, "kinds");
    }
    /* nothing stored: nothing compared, nothing written */
    crpm_stats_t st = ck(c, id++);
    st = ck(c, id++);
    REQUIRE(st.bytes_written == 0 && st.bytes_compared == 0, "a clean epoch compared %llu bytes, wrote %llu",
            (unsigned long long)st.bytes_compared, (unsigned long long)st.bytes_written);
    done(c);
    for (int i = 0; i < 3; i++)
        free(raw[i]);
}

static void test_uninstr(void)
{
    crpm_container *c = open_mode(CRPM_TRACK_INSTR_VERIFY);
    char *a = malloc(N);
    uint64_t s = 3;
    fill_random(&s, a, N);
    REQUIRE(crpm_container_protect(c, 7, a, N, CRPM_TC_BYTE, 1) == 0, "protect: %s", crpm_last_error());
    ck(c, 1);
    ck(c, 2);
    a[100] = 1; /* marked */
    size_t off = 3 * 256 * 1024 + 1234;
    uninstr_write(a + off, 10, 0xee); /* not marked */
    int rc = crpm_container_checkpoint(c, 3, NULL);
    const char *msg = crpm_last_error();
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu", off);
    REQUIRE(rc == CRPM_ERR_MISMATCH && strstr(msg, "array 7") && strstr(msg, want),
            "the unmarked write must fail the checkpoint naming array 7 and %s: rc %d, '%s'", want, rc, msg);
    /* declared by the program: passes */
    crpm_instr_written(a + off, 10);
    ck(c, 4);
    char *arr[1] = {a};
    size_t n[1] = {N};
    uninstr_write(a + off + 5000, 3, 0x11);
    crpm_instr_written(a + off + 5000, 3);
    ck(c, 5);
    /* the array marked as written by uninstrumented code: compared whole */
    REQUIRE(crpm_container_uninstrumented(c, 7, 1) == 0, "uninstrumented: %s", crpm_last_error());
    REQUIRE(crpm_container_untracked_reason(c, 7) != NULL, "an uninstrumented array is compared, with a reason");
    uninstr_write(a + 999999, 77, 0x42);
    crpm_stats_t st = ck(c, 6);
    REQUIRE(st.bytes_compared >= N, "compared %llu", (unsigned long long)st.bytes_compared);
    check_recovers(c, arr, n, 1, "uninstrumented");
    REQUIRE(crpm_container_uninstrumented(c, 7, 0) == 0, "instrumented again: %s", crpm_last_error());
    ck(c, 7); /* compared whole once */
    uninstr_write(a + 77, 1, 0x99);
    rc = crpm_container_checkpoint(c, 8, NULL);
    REQUIRE(rc == CRPM_ERR_MISMATCH && strstr(crpm_last_error(), "byte offset 77"), "followed again: rc %d, %s", rc,
            crpm_last_error());
    done(c);
    free(a);
}

/* ---- threads ------------------------------------------------------------------ */

enum { T = 4, ROUNDS = 8 };
static char *ta;
static pthread_barrier_t bar;

/* Rounds of writes between checkpoints: every thread hits the same few
 * blocks and words (the same bitmap words at once), and its own spread. */
static void *writer(void *arg)
{
    uint64_t s = (uint64_t)(uintptr_t)arg * 7919 + 1;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&bar);
        for (long k = 0; k < 20000; k++) {
            size_t hot = (size_t)(k % 8) * 64 * 1024 + (size_t)(uintptr_t)arg * 8 + (size_t)round * 256;
            ta[hot] = (char)(k + round);
            ta[rnd_below(&s, N)] = (char)(k >> 3);
            ((long *)ta)[rnd_below(&s, N / 8)] = k;
        }
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static void test_threads(int verify)
{
    crpm_container *c = open_mode(verify ? CRPM_TRACK_INSTR_VERIFY : CRPM_TRACK_INSTR);
    ta = malloc(N);
    uint64_t s = 9;
    fill_random(&s, ta, N);
    REQUIRE(crpm_container_protect(c, 1, ta, N, CRPM_TC_BYTE, 1) == 0, "protect: %s", crpm_last_error());
    ck(c, 1);
    ck(c, 2);
    pthread_t t[T];
    REQUIRE(pthread_barrier_init(&bar, NULL, T + 1) == 0, "barrier");
    for (int i = 0; i < T; i++)
        REQUIRE(pthread_create(&t[i], NULL, writer, (void *)(uintptr_t)i) == 0, "thread");
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar); /* they wrote */
        ck(c, 3 + round);
        char *arr[1] = {ta};
        size_t n[1] = {N};
        if (!verify)
            check_recovers(c, arr, n, 1, "threads");
    }
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    done(c);
    free(ta);
}

static void test_outside(void)
{
    crpm_container *c = open_mode(CRPM_TRACK_INSTR);
    char *a = malloc(N), *b = malloc(N);
    uint64_t s = 1;
    fill_random(&s, a, N);
    REQUIRE(crpm_container_protect(c, 1, a, N, CRPM_TC_BYTE, 1) == 0, "protect: %s", crpm_last_error());
    ck(c, 1);
    ck(c, 2);
    for (int r = 0; r < 4; r++)
        stores(b, N, &s, r); /* not protected */
    crpm_stats_t st = ck(c, 3);
    REQUIRE(st.bytes_compared == 0, "stores outside checkpointed memory marked %llu bytes",
            (unsigned long long)st.bytes_compared);
    /* unprotected: its stores are no longer marked */
    REQUIRE(crpm_container_unprotect(c, 1) == 0, "unprotect");
    ck(c, 4);
    done(c);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    REQUIRE(argc >= 2, "usage: test_instr kinds|recover|uninstr|threads|threads-recover|outside [dir]");
    if (argc > 2)
        dir = argv[2];
    if (!strcmp(argv[1], "kinds"))
        test_kinds(1);
    else if (!strcmp(argv[1], "recover"))
        test_kinds(0);
    else if (!strcmp(argv[1], "uninstr"))
        test_uninstr();
    else if (!strcmp(argv[1], "threads"))
        test_threads(1);
    else if (!strcmp(argv[1], "threads-recover"))
        test_threads(0);
    else if (!strcmp(argv[1], "outside"))
        test_outside();
    else
        REQUIRE(0, "unknown subtest %s", argv[1]);
    printf("ok %s\n", argv[1]);
    return 0;
}

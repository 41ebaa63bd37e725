/* The persistent heap through the public API (MPI, any number of ranks):
 *
 *   roundtrip  a linked structure built with crpm_malloc, saved at each level
 *              asked for (1, 2 and 3 with two simulated nodes, 4, 5 = method
 *              full; +10: change_tracking = pagemap), changed after the save,
 *              finalized (kept), and recovered by a new crpm_init in the same
 *              process: the same addresses, the saved contents, roots, used
 *              bytes, and the allocator continues (new blocks, frees);
 *   occupied   heap_base taken on one rank at a restart: crpm_init fails on
 *              every rank, the message names the range, what holds it and
 *              heap_base; freed again, the restart recovers;
 *   smaller    a restart whose heap_size is below one rank's saved heap:
 *              every rank fails the recovery, none waits;
 *   full       allocation until heap_size is used up: NULL with the reason,
 *              the heap still usable, and a checkpoint of the full heap;
 *   misuse     before init, without a heap, the reserved id, bad roots.
 *
 *   test_heap_api DIR MODE [LEVEL ...]                                        */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <mpi.h>
#include "check.h"
#include "crpm.h"

static int rank, nranks;
static char dir[512], cfg[4096];

/* extra: more [basic] keys (heap_size among them replaces 64M), then
 * maybe an [advanced] section. */
static const char *config(const char *job, const char *extra)
{
    int own_size = extra && strstr(extra, "heap_size");
    snprintf(cfg, sizeof cfg,
             "[basic]\nckpt_dir = %s/ckpt\njob_name = %s\nkeep_last_ckpt = 1\nverbosity = 0\n%s"
             "node_size = %d\nglbl_dir = %s/glbl\n%s%s", dir, job, own_size ? "" : "heap_size = 64M\n",
             nranks > 1 ? nranks / 2 : 1, dir, nranks > 1 ? "group_size = 2\n" : "", extra ? extra : "");
    return cfg;
}

typedef struct node {
    struct node *next;
    uint64_t key;
    char pad[40];
} node;

typedef struct top {
    node *list;
    uint64_t n;
    double *vec;
} top;

static uint64_t digest(const top *t)
{
    uint64_t h = 1469598103934665603ull, n = 0;
    for (const node *p = t->list; p && n < 1000000; p = p->next, n++)
        h = (h ^ p->key ^ (uint64_t)(uintptr_t)p) * 1099511628211ull;
    for (uint64_t i = 0; t->vec && i < t->n; i++)
        h = (h ^ (uint64_t)t->vec[i]) * 1099511628211ull;
    return h ^ n;
}

static int all(int v)
{
    int r;
    MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return r;
}

/* Builds, saves at `level`, changes; then recovers in a new init.  Level 5:
 * method = full (level 1). */
static void roundtrip(int level, int tracked)
{
    char job[64], extra[256];
    snprintf(job, sizeof job, "heap-rt-l%d-%d", level, tracked);
    snprintf(extra, sizeof extra, "[advanced]\nchange_tracking = %s\nmethod = %s\n", tracked ? "pagemap" : "compare",
             level == 5 ? "full" : "differential");
    int full = level == 5;
    if (full)
        level = CRPM_L1;
    REQUIRE(crpm_init_text(config(job, extra), "heap-test", MPI_COMM_WORLD) == 0, "init: %s", crpm_last_error());
    CHECK(crpm_status() == CRPM_STATUS_FRESH, "fresh start expected");
    int iter = 0;
    CHECK(crpm_protect(0, &iter, 1, CRPM_INT) == 0, "protect");
    top *t = crpm_calloc(1, sizeof *t);
    REQUIRE(t, "calloc: %s", crpm_last_error());
    CHECK(crpm_set_root(5, t) == 0, "set_root: %s", crpm_last_error());
    for (uint64_t i = 0; i < 20000; i++) {
        node *n = crpm_malloc(sizeof *n);
        REQUIRE(n, "malloc: %s", crpm_last_error());
        n->key = i * 7919 + (uint64_t)rank;
        n->next = t->list;
        t->list = n;
        if (i % 3 == 0 && n->next) { /* rewire and free one */
            node *d = n->next;
            n->next = d->next;
            crpm_free(d);
        }
    }
    t->n = 300000; /* a large block, then a huge one through realloc */
    t->vec = crpm_malloc(t->n * sizeof *t->vec);
    REQUIRE(t->vec, "malloc vec: %s", crpm_last_error());
    for (uint64_t i = 0; i < t->n; i++)
        t->vec[i] = (double)(i ^ (uint64_t)rank);
    t->n = 1200000;
    t->vec = crpm_realloc(t->vec, t->n * sizeof *t->vec);
    REQUIRE(t->vec, "realloc vec: %s", crpm_last_error());
    for (uint64_t i = 300000; i < t->n; i++)
        t->vec[i] = (double)i;
    iter = 7;
    REQUIRE(crpm_checkpoint(1, CRPM_L1) == 0, "first checkpoint: %s", crpm_last_error());
    for (node *p = t->list; p; p = p->next) /* changes between checkpoints */
        p->key += 3;
    CHECK(crpm_checkpoint(2, level) == 0, "checkpoint at level %d: %s", level, crpm_last_error());
    uint64_t want = digest(t), used = crpm_heap_used();
    node *first = t->list;
    crpm_free(first->next); /* after the checkpoint: lost on recovery */
    first->next = NULL;
    t->vec[5] = -1;
    iter = 99;
    if (level == CRPM_L4) { /* recover from level 4 alone */
        CHECK(crpm_finalize() == 0, "finalize: %s", crpm_last_error());
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            char cmd[1200];
            snprintf(cmd, sizeof cmd, "rm -rf %s/ckpt/%s", dir, job);
            CHECK(system(cmd) == 0, "%s", cmd);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        CHECK(crpm_finalize() == 0, "finalize: %s", crpm_last_error());
    }
    CHECK(crpm_get_root(5) == NULL && crpm_malloc(8) == NULL, "the heap outlived finalize");

    REQUIRE(crpm_init_text(config(job, extra), "heap-test", MPI_COMM_WORLD) == 0, "re-init: %s", crpm_last_error());
    CHECK(crpm_status() == (level == CRPM_L4 ? CRPM_STATUS_L4 : CRPM_STATUS_L1), "status %d", crpm_status());
    void *early = crpm_malloc(100); /* replaced by the recovery */
    CHECK(early != NULL, "malloc before recover: %s", crpm_last_error());
    CHECK(crpm_protect(0, &iter, 1, CRPM_INT) == 0, "protect");
    int rc = crpm_recover();
    CHECK(rc == 0, "recover at level %d: %s", level, crpm_last_error());
    top *r = crpm_get_root(5);
    CHECK(iter == 7 && r == t, "iter %d, root %p (was %p)", iter, (void *)r, (void *)t);
    if (r == t) {
        CHECK(digest(r) == want && r->list == first, "the recovered structure differs");
        CHECK(crpm_heap_used() == used, "used %zu, saved %zu", crpm_heap_used(), (size_t)used);
        node *n = crpm_malloc(sizeof *n); /* the allocator continues */
        CHECK(n != NULL, "malloc after recover: %s", crpm_last_error());
        if (n) {
            n->next = r->list;
            r->list = n;
            n->key = 1;
        }
        crpm_free(r->list->next);
        r->list->next = r->list->next ? r->list->next->next : NULL;
        CHECK(crpm_checkpoint(3, CRPM_L1) == 0, "checkpoint after recover: %s", crpm_last_error());
    }
    CHECK(all(check_failures() == 0), "a rank failed");
    crpm_finalize();
}

/* AddressSanitizer keeps 1 to 2 TiB (shadow) and 96 TiB up (its heap) */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_BASE "0x540000000000"
#define TEST_BASE_N 0x540000000000ull
#else
#define TEST_BASE "0x20000000000"
#define TEST_BASE_N 0x20000000000ull
#endif

static void occupied(void)
{
    const char *c = config("heap-occupied", "[advanced]\nheap_base = " TEST_BASE "\n");
    /* a checkpoint to restart from */
    REQUIRE(crpm_init_text(c, "heap-test", MPI_COMM_WORLD) == 0, "init: %s", crpm_last_error());
    long *saved = crpm_malloc(sizeof *saved);
    REQUIRE(saved && crpm_set_root(0, saved) == 0, "malloc: %s", crpm_last_error());
    *saved = 4711 + rank;
    REQUIRE(crpm_checkpoint(1, CRPM_L1) == 0, "checkpoint: %s", crpm_last_error());
    crpm_finalize();
    void *p = MAP_FAILED;
    char range[128], held[128];
    snprintf(range, sizeof range, "%#llx-%#llx", TEST_BASE_N, TEST_BASE_N + (64ull << 20));
    snprintf(held, sizeof held, "%#llx-%#llx", TEST_BASE_N + (16ull << 20), TEST_BASE_N + (17ull << 20));
    if (rank == nranks - 1) {
        p = mmap((void *)(TEST_BASE_N + (16ull << 20)), 1 << 20, PROT_READ,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        REQUIRE(p != MAP_FAILED, "occupying the range");
    }
    int rc = crpm_init_text(c, "heap-test", MPI_COMM_WORLD);
    const char *msg = crpm_last_error();
    if (rank == nranks - 1) {
        CHECK(rc == CRPM_ERR_NOMEM, "rc %d", rc);
        CHECK(strstr(msg, range) && strstr(msg, held) && strstr(msg, "heap_base") && strstr(msg, "heap-test"),
              "message: %s", msg);
    } else {
        CHECK(rc == CRPM_ERR_REMOTE && strstr(msg, "heap_base"), "rc %d: %s", rc, msg);
    }
    if (rc == 0)
        crpm_finalize();
    if (p != MAP_FAILED)
        munmap(p, 1 << 20);
    /* the range free again: the restart works */
    CHECK(crpm_init_text(c, "heap-test", MPI_COMM_WORLD) == 0, "init: %s", crpm_last_error());
    CHECK(crpm_status() == CRPM_STATUS_L1 && crpm_recover() == 0, "recover: %s", crpm_last_error());
    long *back = crpm_get_root(0);
    CHECK(back == saved && *back == 4711 + rank, "root %p", (void *)back);
    char *q = crpm_malloc(10);
    CHECK(q >= (char *)TEST_BASE_N && q < (char *)(TEST_BASE_N + (64ull << 20)), "a block at %p, not in the heap",
          (void *)q);
    crpm_finalize();
}

static void full(void)
{
    REQUIRE(crpm_init_text(config("heap-full", "[advanced]\nsegment_size = 64K\n"), "heap-test", MPI_COMM_WORLD) == 0,
            "init: %s", crpm_last_error());
    size_t n = 0, big = 1 << 20;
    void *last = NULL, *p;
    while ((p = crpm_malloc(big)) != NULL) {
        memset(p, (int)n, 4096);
        last = p;
        n++;
        REQUIRE(n < 1000, "never full");
    }
    const char *msg = crpm_last_error();
    CHECK(strstr(msg, "heap is full") && strstr(msg, "heap_size"), "message: %s", msg);
    /* what is usable (whole arenas) beside what heap_size reserved: two sizes, each named as what it is */
    CHECK(strstr(msg, " usable (15 whole arenas of ") && strstr(msg, " bytes in the 67108864 bytes of heap_size)"),
          "message: %s", msg);
    CHECK(n >= 55, "only %zu MiB of 64", n);
    CHECK(crpm_malloc(100) != NULL, "a small block still fits: %s", crpm_last_error());
    CHECK(crpm_checkpoint(1, CRPM_L1) == 0, "checkpoint of the full heap: %s", crpm_last_error());
    crpm_free(last);
    CHECK(crpm_malloc(big) != NULL, "after a free: %s", crpm_last_error());
    crpm_finalize();
}

/* One rank's heap outgrew the heap_size of the restart: every rank fails
 * the recovery (none waits), the message names heap_size. */
static void smaller(void)
{
    REQUIRE(crpm_init_text(config("heap-smaller", "heap_size = 256M\n"), "heap-test", MPI_COMM_WORLD) == 0,
            "init: %s", crpm_last_error());
    char *p = crpm_malloc(rank == 0 ? (size_t)100 << 20 : 1000);
    REQUIRE(p && crpm_set_root(0, p) == 0, "malloc: %s", crpm_last_error());
    REQUIRE(crpm_checkpoint(1, CRPM_L1) == 0, "checkpoint: %s", crpm_last_error());
    crpm_finalize();
    REQUIRE(crpm_init_text(config("heap-smaller", NULL), "heap-test", MPI_COMM_WORLD) == 0, "re-init: %s",
            crpm_last_error());
    int rc = crpm_recover();
    if (rank == 0)
        CHECK(rc == CRPM_ERR_MISMATCH && strstr(crpm_last_error(), "heap_size"), "rc %d: %s", rc, crpm_last_error());
    else
        CHECK(rc == CRPM_ERR_REMOTE, "rc %d: %s", rc, crpm_last_error());
    crpm_finalize();
    /* with enough heap_size it recovers */
    REQUIRE(crpm_init_text(config("heap-smaller", "heap_size = 256M\n"), "heap-test", MPI_COMM_WORLD) == 0,
            "init: %s", crpm_last_error());
    CHECK(crpm_recover() == 0 && crpm_get_root(0) == p, "recover: %s", crpm_last_error());
    crpm_finalize();
}

static void misuse(void)
{
    CHECK(crpm_malloc(8) == NULL && strstr(crpm_last_error(), "crpm_init"), "before init: %s", crpm_last_error());
    CHECK(crpm_set_root(0, NULL) == CRPM_ERR_STATE, "set_root before init");
    char c2[4096];
    snprintf(c2, sizeof c2, "[basic]\nckpt_dir = %s/ckpt\njob_name = heap-none\nverbosity = 0\n", dir);
    REQUIRE(crpm_init_text(c2, "no-heap.ini", MPI_COMM_WORLD) == 0, "init: %s", crpm_last_error());
    CHECK(crpm_malloc(8) == NULL && strstr(crpm_last_error(), "heap_size") && strstr(crpm_last_error(), "no-heap.ini"),
          "without a heap: %s", crpm_last_error());
    CHECK(crpm_heap_used() == 0 && crpm_get_root(0) == NULL, "used/root without a heap");
    int x = 0;
    CHECK(crpm_protect(INT32_MIN, &x, 1, CRPM_INT) == CRPM_ERR_INVAL, "the heap's id accepted");
    crpm_finalize();
    REQUIRE(crpm_init_text(config("heap-misuse", NULL), "heap-test", MPI_COMM_WORLD) == 0, "init: %s",
            crpm_last_error());
    void *p = crpm_malloc(64);
    CHECK(crpm_set_root(64, p) == CRPM_ERR_RANGE && crpm_set_root(-1, p) == CRPM_ERR_RANGE, "root index");
    CHECK(crpm_set_root(1, &x) == CRPM_ERR_INVAL, "a root outside the heap");
    CHECK(crpm_get_root(64) == NULL, "root 64");
    crpm_free(&x);
    CHECK(strstr(crpm_last_error(), "not a block") != NULL, "free of a stack address: %s", crpm_last_error());
    crpm_free(p);
    crpm_free(p);
    CHECK(strstr(crpm_last_error(), "not a block") != NULL, "double free: %s", crpm_last_error());
    CHECK(crpm_recover_var(INT32_MIN) == CRPM_ERR_NOCKPT || crpm_recover_var(INT32_MIN) == CRPM_ERR_INVAL,
          "recover_var of the heap's id");
    crpm_finalize();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_set_rank(rank);
    check_set_note(crpm_last_error);
    REQUIRE(argc >= 3, "usage: test_heap_api DIR MODE [LEVEL...]");
    const char *mode = argv[2];
    snprintf(dir, sizeof dir, "%s/%s-np%d", argv[1], mode, nranks);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    if (rank == 0)
        REQUIRE(system(cmd) == 0, "%s", cmd);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!strcmp(mode, "roundtrip"))
        for (int i = 3; i < argc; i++)
            roundtrip(atoi(argv[i]) % 10, atoi(argv[i]) >= 10);
    else if (!strcmp(mode, "occupied"))
        occupied();
    else if (!strcmp(mode, "full"))
        full();
    else if (!strcmp(mode, "misuse"))
        misuse();
    else if (!strcmp(mode, "smaller"))
        smaller();
    int rc = check_summary(mode);
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (rank == 0 && rc == 0 && system(cmd) != 0)
        rc = 1;
    MPI_Finalize();
    return rc;
}

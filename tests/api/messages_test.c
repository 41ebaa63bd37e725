/* The messages of crpm_last_error() (issue 38), 2 ranks:
 *
 *   messages_test DIR
 *
 * - crpm_define_global, crpm_add_subset and crpm_recover_var: the call's
 *   prefix once, then the whole cause (exact text);
 * - heap_size smaller than one heap arena: crpm_init refuses it with
 *   CRPM_ERR_CONFIG on every rank, naming the size reserved, the arena's
 *   size and the least heap_size that works; that least size works (an
 *   allocation succeeds). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "crpm.h"

static int rank;
static char dir[512];

static void is_msg(int rc, int want_rc, const char *want, const char *what)
{
    CHECK(rc == want_rc, "%s: %d (%s), expected %d", what, rc, crpm_strerror(rc), want_rc);
    CHECK(strcmp(crpm_last_error(), want) == 0, "%s:\n  got      '%s'\n  expected '%s'", what, crpm_last_error(),
          want);
}

static int init(const char *job, const char *extra)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "[basic]\nckpt_dir = %s\njob_name = %s\nkeep_last_ckpt = 0\nverbosity = 0\n%s", dir, job,
             extra);
    return crpm_init_text(cfg, "messages-test", MPI_COMM_WORLD);
}

static void api_messages(void)
{
    REQUIRE(init("msg", "") == 0, "init: %s", crpm_last_error());
    int64_t dims[2] = {10, -1}, ok_dims[2] = {4, 6}, off[2] = {0, 0}, cnt[2] = {1, 1};
    is_msg(crpm_define_global(0, 2, dims, CRPM_DOUBLE, "g"), CRPM_ERR_INVAL,
           "crpm_define_global(0): global dataset 0: dimension 1 is -1", "a negative dimension");
    crpm_type_t bad = {-5, 0, 8};
    is_msg(crpm_define_global(1, 2, ok_dims, bad, "g"), CRPM_ERR_INVAL,
           "crpm_define_global(1): unknown type (code -5, 8 bytes)", "an unknown type");
    is_msg(crpm_add_subset(5, 7, off, cnt), CRPM_ERR_INVAL,
           "crpm_add_subset(7): array 7: global dataset 5 is not defined (crpm_define_global first)",
           "a subset of an undefined dataset");
    CHECK(crpm_define_global(2, 2, ok_dims, CRPM_DOUBLE, "g2") == 0, "define: %s", crpm_last_error());
    int64_t far[2] = {3, 0}, two[2] = {2, 6};
    is_msg(crpm_add_subset(2, 8, far, two), CRPM_ERR_RANGE,
           "crpm_add_subset(8): array 8: dimension 0 of its box (offset 3, count 2) lies outside dataset 2 (size 4)",
           "a box outside the dataset");

    double a[16];
    for (int i = 0; i < 16; i++)
        a[i] = rank * 100 + i;
    REQUIRE(crpm_protect(1, a, 16, CRPM_DOUBLE) == 0, "protect: %s", crpm_last_error());
    REQUIRE(crpm_checkpoint(1, CRPM_L1) == 0, "checkpoint: %s", crpm_last_error());
    double b[4];
    REQUIRE(crpm_protect(99, b, 4, CRPM_DOUBLE) == 0, "protect 99: %s", crpm_last_error());
    is_msg(crpm_recover_var(99), CRPM_ERR_MISMATCH,
           "crpm_recover_var(99): array 99 is not in the checkpoint (checkpoint 1)", "an array not saved");
    CHECK(crpm_finalize() == 0, "finalize: %s", crpm_last_error());
}

static void heap_too_small(void)
{
    /* 1 byte and 4 MiB both reserve 4 MiB, less than an arena (4 MiB of blocks and their page table) */
    const char *small[] = {"heap_size = 1\n", "heap_size = 4M\n"};
    for (int i = 0; i < 2; i++) {
        int rc = init("heapmsg", small[i]);
        CHECK(rc == CRPM_ERR_CONFIG, "%s accepted by crpm_init: %d (%s)", small[i], rc, crpm_strerror(rc));
        const char *m = crpm_last_error();
        CHECK(strstr(m, "crpm_init: heap_size in [basic] of config messages-test reserves 4194304 bytes (the value "
                        "rounded up to a multiple of 4 MiB), less than one heap arena, which takes ") &&
              strstr(m, "set heap_size to at least 8M"), "%s: %s", small[i], m);
        if (rc == 0)
            crpm_finalize();
    }
    /* the least size the message names works */
    int rc = init("heapmsg", "heap_size = 8M\n");
    CHECK(rc == 0, "heap_size = 8M: %s", crpm_last_error());
    if (rc == 0) {
        void *p = crpm_malloc(1 << 20);
        CHECK(p != NULL, "crpm_malloc(1 MiB) with heap_size = 8M: %s", crpm_last_error());
        crpm_free(p);
        CHECK(crpm_finalize() == 0, "finalize: %s", crpm_last_error());
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: messages_test DIR\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_set_rank(rank);
    snprintf(dir, sizeof dir, "%s/crpm-messages-%ld", argv[1], (long)getppid());
    api_messages();
    heap_too_small();
    int fails = check_failures(), all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        rmdir(dir);
        printf("messages_test: %s (%d checks on rank 0)\n", all ? "FAILED" : "passed", check_count());
    }
    MPI_Finalize();
    return all ? 1 : 0;
}

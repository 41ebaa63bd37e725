/* Memory kinds (util/memkind.h) through the engine, with mock device memory
 * (mock_device.h) whose addresses the CPU cannot touch: a library that read
 * or wrote them directly would crash here.
 *
 *  - a kind that stages its own changes: the first checkpoint moves every
 *    byte to the host, later ones only the changed blocks (and write only
 *    those and the blocks where the two copies may differ); recovery copies
 *    in and syncs the kind's copy, so the next checkpoint moves nothing; a
 *    failed checkpoint makes the next one stage everything, exactly
 *  - a copy-only kind: compared on the host, every byte moved each time
 *  - recovery from a corrupt container copies nothing unchecked in: the
 *    segment with the bad chunk stays as it was, the error names the array
 *  - the full method (lib/levels/full.c) writes and reads device arrays
 *  - with change tracking asked for, a copy-only array says why it is
 *    compared whole; a staging one is followed by its kind */
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "full.h"
#include "fsutil.h"
#include "mock_device.h"

#define SEG (64u << 10)
#define BLK 256u
#define N (16u * SEG)

static crpm_stats_t ck(crpm_container *c, uint64_t id)
{
    crpm_stats_t st;
    REQUIRE(crpm_container_checkpoint(c, id, &st) == 0, "checkpoint %llu: %s", (unsigned long long)id,
            crpm_last_error());
    return st;
}

static int protect(crpm_container *c, int32_t id, char *host, uint64_t bytes, const crpm_mem_kind *k)
{
    crpm_array a = {id, CRPM_TC_BYTE, 1, bytes, mock_dev(host), NULL, k};
    return crpm_container_protect_array(c, &a);
}

/* The committed epoch equals want (read through the format layer). */
static int holds(crpm_container *c, int idx, const char *want, uint64_t n)
{
    char *got = malloc(n);
    int ok = crpm_container_read_region(c, idx, got) == 0 && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

static void staging(const char *path)
{
    uint64_t s = 11;
    unlink(path);
    crpm_open_opts o = {.path = path, .segment_size = SEG, .block_size = BLK, .create = 1};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open: %s", crpm_last_error());
    char *d = mock_malloc(N);
    fill_random(&s, d, N);
    REQUIRE(protect(c, 1, d, N, &mock_kind_diff) == 0, "protect: %s", crpm_last_error());
    mock_d2h = 0;
    crpm_stats_t st = ck(c, 1);
    CHECK(mock_d2h == N && st.bytes_written == N, "first checkpoint: moved %llu, wrote %llu",
          (unsigned long long)mock_d2h, (unsigned long long)st.bytes_written);
    mock_d2h = 0;
    st = ck(c, 2);
    CHECK(mock_d2h == 0 && st.bytes_written == 0 && st.bytes_compared == 0,
          "idle checkpoint: moved %llu, compared %llu, wrote %llu", (unsigned long long)mock_d2h,
          (unsigned long long)st.bytes_compared, (unsigned long long)st.bytes_written);
    uint64_t at[3] = {3 * SEG + 17, 7 * SEG + 4000, 15 * SEG + SEG - 1};
    for (int e = 3; e <= 5; e++) {
        for (int i = 0; i < 3; i++)
            d[at[i]] ^= (char)(e + i);
        mock_d2h = 0;
        st = ck(c, (uint64_t)e);
        CHECK(mock_d2h == 3 * BLK, "epoch %d: %llu bytes moved for 3 changed blocks", e,
              (unsigned long long)mock_d2h);
        /* the first time, three second copies are made whole from the committed copy */
        CHECK(e == 3 ? st.bytes_written == 3 * SEG : st.bytes_written <= 6 * BLK, "epoch %d wrote %llu", e,
              (unsigned long long)st.bytes_written);
        CHECK(holds(c, 0, d, N), "epoch %d: committed state differs", e);
    }
    /* a failed checkpoint: the kind's report is not trusted afterwards */
    d[5] ^= 1;
    mock_fail_stage = 1;
    uint64_t e0 = crpm_container_epoch(c);
    REQUIRE(crpm_container_checkpoint(c, 6, NULL) != 0, "a failing stage must fail the checkpoint");
    CHECK(crpm_container_epoch(c) == e0 && strstr(crpm_last_error(), "on purpose"), "failed: %s",
          crpm_last_error());
    mock_d2h = 0;
    ck(c, 6);
    CHECK(mock_d2h == N, "after a failure every byte is staged again (%llu)", (unsigned long long)mock_d2h);
    CHECK(holds(c, 0, d, N), "after a failure: committed state differs");
    crpm_container_close(c);

    /* recovery into fresh device memory: copied in, and the kind synced */
    o.create = 0;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "reopen: %s", crpm_last_error());
    char *r = mock_malloc(N);
    memset(r, 0xaa, N);
    REQUIRE(protect(c, 1, r, N, &mock_kind_diff) == 0, "protect: %s", crpm_last_error());
    mock_h2d = mock_d2h = 0;
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    CHECK(memcmp(r, d, N) == 0 && mock_h2d == N && mock_d2h == 0, "recovered (in %llu, out %llu)",
          (unsigned long long)mock_h2d, (unsigned long long)mock_d2h);
    st = ck(c, 7);
    CHECK(mock_d2h == 0 && st.bytes_written == 0, "checkpoint after recovery moved %llu, wrote %llu",
          (unsigned long long)mock_d2h, (unsigned long long)st.bytes_written);
    r[9 * SEG + 3] ^= 0x10;
    ck(c, 8);
    CHECK(mock_d2h == BLK && holds(c, 0, r, N), "one block after recovery: moved %llu",
          (unsigned long long)mock_d2h);
    /* rolled back: what the kind holds is not the committed state any more */
    REQUIRE(crpm_container_rollback(c) == 0, "rollback: %s", crpm_last_error());
    mock_d2h = 0;
    ck(c, 8);
    CHECK(mock_d2h == N && holds(c, 0, r, N), "after a rollback every byte is staged (%llu)",
          (unsigned long long)mock_d2h);
    memcpy(d, r, N);
    crpm_container_close(c);

    /* a flipped byte in segment 2's committed copy: nothing unchecked is copied in */
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "reopen: %s", crpm_last_error());
    const crpm_seg *sg = &c->regions[0].segs[2];
    off_t off = (off_t)(crpm_seg_addr(c, sg->phys[sg->state - 1]) - c->media.base) + 100;
    crpm_container_close(c);
    check_flip(path, off, 0x08);
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "reopen: %s", crpm_last_error());
    memset(r, 0x55, N);
    REQUIRE(protect(c, 1, r, N, &mock_kind_diff) == 0, "protect: %s", crpm_last_error());
    int rc = crpm_container_recover(c);
    printf("recover from a flipped byte: %s\n", crpm_last_error());
    CHECK(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), "array id 1, byte offset 131072"),
          "recovery must fail naming the chunk: %s", crpm_last_error());
    int untouched = 1;
    for (uint64_t i = 2 * SEG; i < 3 * SEG; i++)
        untouched &= r[i] == 0x55;
    CHECK(untouched, "bytes of the corrupt segment were copied into the device array");
    crpm_container_close(c);
    unlink(path);
    mock_free(d);
    mock_free(r);
}

static void copy_only(const char *path)
{
    uint64_t s = 12;
    unlink(path);
    crpm_open_opts o = {.path = path, .segment_size = SEG, .block_size = BLK, .create = 1, .change_tracking = 1};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open: %s", crpm_last_error());
    char *d = mock_malloc(N), *t = mock_malloc(N);
    fill_random(&s, d, N);
    fill_random(&s, t, N);
    REQUIRE(protect(c, 1, d, N, &mock_kind_copy) == 0 && protect(c, 2, t, N, &mock_kind_diff) == 0, "protect");
    const char *why = crpm_container_untracked_reason(c, 1);
    printf("copy-only array: %s\nstaging array: %s\n", why ? why : "(tracked)",
           crpm_container_untracked_reason(c, 2) ? crpm_container_untracked_reason(c, 2) : "(tracked)");
    CHECK(why && strstr(why, "not host memory"), "a copy-only array is compared, saying why");
    CHECK(!crpm_container_untracked_reason(c, 2), "a staging array is followed by its kind");
    ck(c, 1);
    for (int e = 2; e <= 4; e++) {
        d[rnd_below(&s, N)] ^= 1;
        mock_d2h = 0;
        crpm_stats_t st = ck(c, (uint64_t)e);
        CHECK(mock_d2h == N && st.bytes_compared >= N, "copy-only: moved %llu, compared %llu",
              (unsigned long long)mock_d2h, (unsigned long long)st.bytes_compared);
        CHECK(holds(c, 0, d, N), "copy-only: epoch %d differs", e);
    }
    char *r = mock_malloc(N);
    REQUIRE(protect(c, 1, r, N, &mock_kind_copy) == 0, "protect");
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    CHECK(memcmp(r, d, N) == 0 && memcmp(t, t, N) == 0, "copy-only: recovered");
    crpm_container_close(c);
    unlink(path);
    mock_free(d);
    mock_free(t);
    mock_free(r);
}

/* The full method (FTI-style files) through the kinds. */
static void full_files(const char *dir)
{
    uint64_t s = 13;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/memkind-full-%d", dir, (int)getpid());
    REQUIRE(mkdir(sub, 0700) == 0, "mkdir %s", sub);
    char *a = mock_malloc(100000), *b = mock_malloc(3000);
    fill_random(&s, a, 100000);
    fill_random(&s, b, 3000);
    crpm_array r[2] = {{1, CRPM_TC_BYTE, 1, 100000, mock_dev(a), NULL, &mock_kind_diff},
                       {2, CRPM_TC_INT, 4, 750, mock_dev(b), NULL, &mock_kind_copy}};
    uint64_t bytes = 0;
    REQUIRE(crpm_full_write(sub, 0, 7, 2, r, &bytes) == 0, "full write: %s", crpm_last_error());
    char *a2 = mock_malloc(100000), *b2 = mock_malloc(3000);
    crpm_array q[2] = {r[0], r[1]};
    q[0].ptr = mock_dev(a2);
    q[1].ptr = mock_dev(b2);
    REQUIRE(crpm_full_read(sub, 0, 7, 2, q) == 0, "full read: %s", crpm_last_error());
    CHECK(memcmp(a, a2, 100000) == 0 && memcmp(b, b2, 3000) == 0, "full method: device arrays read back");
    char path[4096];
    crpm_name_full(path, sizeof path, sub, 0, 7, 0);
    check_flip(path, 5000, 0x01);
    memset(a2, 0x77, 100000);
    CHECK(crpm_full_read(sub, 0, 7, 2, q) == CRPM_ERR_CORRUPT && (unsigned char)a2[0] == 0x77 &&
              (unsigned char)a2[99999] == 0x77,
          "a corrupt full file must not reach the device arrays");
    crpm_full_remove(sub, 0);
    rmdir(sub);
    mock_free(a);
    mock_free(b);
    mock_free(a2);
    mock_free(b2);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    check_set_note(crpm_last_error);
    char path[512];
    snprintf(path, sizeof path, "%s/memkind-%d.crpm", dir, (int)getpid());
    staging(path);
    copy_only(path);
    full_files(dir);
    return check_summary("memkind");
}

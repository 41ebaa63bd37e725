/* One-pass whole-segment compares (segment.c, crpm_seg_whole) with the stale
 * map: a checkpoint writes into the copy that holds the state two checkpoints
 * back, so a block changed before the last checkpoint and untouched since must
 * still be written into it, although it equals the committed copy and its
 * page was not written this epoch.  Checked for arrays compared whole
 * (change_tracking off) and for a tracked array in a hot period (compared
 * whole, not scanned): after each checkpoint the committed copy is recovered
 * into a wiped array and must equal the data; the bytes written must be
 * exactly the blocks that differ from the older copy, and the bytes read
 * little more than one pass over the array.
 *
 *   test_stale DIR compare|track */
#include <unistd.h>
#include "check.h"
#include "engine.h"

enum { N = 1 << 20, SEG = 64 << 10, BLK = 256, PAGE = 4096 };

static crpm_container *c;
static char *a, *ref;
static uint64_t id = 1;

static crpm_stats_t ck(void)
{
    crpm_stats_t st;
    REQUIRE(crpm_container_checkpoint(c, id, &st) == 0, "checkpoint %llu: %s", (unsigned long long)id,
            crpm_last_error());
    id++;
    return st;
}

/* The committed copy, recovered into a wiped array, equals the data. */
static void verify(const char *what)
{
    memcpy(ref, a, N);
    memset(a, 0x5a, N);
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    CHECK(memcmp(a, ref, N) == 0, "%s: the recovered array differs from the data", what);
    memcpy(a, ref, N);
}

static void bump(uint64_t blk, uint64_t *s)
{
    a[blk * BLK + rnd_below(s, BLK)] ^= (char)(1 + rnd_below(s, 255));
}

static void dirty_pages(uint64_t *s)
{
    for (size_t p = 0; p < N / PAGE; p++)
        a[p * PAGE + rnd_below(s, PAGE)] ^= 1;
}

/* Block x changes, checkpoint; block y (another page, same segment, before or
 * after x) changes, checkpoint: the second writes x and y into the older copy. */
static void two_epochs(uint64_t x, uint64_t y, uint64_t *s, int *hot)
{
    char what[96];
    bump(x, s);
    crpm_stats_t s1 = ck();
    snprintf(what, sizeof what, "block %llu changed", (unsigned long long)x);
    verify(what);
    bump(y, s);
    crpm_stats_t s2 = ck();
    snprintf(what, sizeof what, "block %llu changed one checkpoint after block %llu", (unsigned long long)y,
             (unsigned long long)x);
    verify(what);
    CHECK(s2.bytes_written == 2 * BLK, "%s: %llu bytes written, not the 2 blocks that differ from the older copy",
          what, (unsigned long long)s2.bytes_written);
    *hot += s1.bytes_compared >= N && s2.bytes_compared >= N;
    CHECK(s2.bytes_compared <= N + N / 16, "%s: %llu bytes compared: one pass over the array", what,
          (unsigned long long)s2.bytes_compared);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    int track = argc > 2 && strcmp(argv[2], "track") == 0;
    char path[512];
    snprintf(path, sizeof path, "%s/stale-%d.crpm", dir, (int)getpid());
    unlink(path);
    crpm_open_opts o = {.path = path, .segment_size = SEG, .block_size = BLK, .create = 1,
                        .change_tracking = track};
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    if (track && strcmp(crpm_container_tracking(c), "pagemap") != 0) {
        crpm_container_close(c);
        unlink(path);
        check_skip("change tracking not available");
    }
    a = aligned_alloc(PAGE, N);
    ref = malloc(N);
    uint64_t s = 2024;
    fill_random(&s, a, N);
    REQUIRE(crpm_container_protect(c, 1, a, N / 8, CRPM_TC_DOUBLE, 8) == 0, "protect: %s", crpm_last_error());
    ck();
    for (int k = 0; k < 2; k++) { /* every segment gets its second copy */
        dirty_pages(&s);
        ck();
    }
    verify("every page written");
    int hot = 0;
    for (int k = 0; k < 24; k++) {
        if (track && k % 2 == 0) {
            /* every page written: judged dense, then compared whole for the
             * next checkpoints (the hot period) */
            dirty_pages(&s);
            ck();
            verify("every page written");
        }
        uint64_t seg = rnd_below(&s, N / SEG), per = SEG / BLK, x = seg * per + rnd_below(&s, per / 2), y;
        do
            y = seg * per + rnd_below(&s, per);
        while (y / (PAGE / BLK) == x / (PAGE / BLK));
        if (k % 3 == 1) { /* y before x: x is written after the first difference */
            uint64_t t = x;
            x = y;
            y = t;
        }
        two_epochs(x, y, &s, &hot);
        if (k % 3 == 2) {
            /* an epoch without writes keeps every committed copy, then x
             * changes back to its value of two checkpoints before */
            crpm_stats_t st = ck();
            CHECK(st.bytes_written == 0, "nothing changed: %llu bytes written", (unsigned long long)st.bytes_written);
            verify("no change");
        }
    }
    printf("%d of 24 pairs of checkpoints compared the array whole\n", hot);
    CHECK(!track || hot >= 6, "a densely written tracked array is compared whole for a while (%d)", hot);
    /* a block changed back to what the older copy holds differs from the
     * committed copy but need not be written */
    uint64_t b = rnd_below(&s, N / BLK);
    char old = a[b * BLK];
    a[b * BLK] ^= 0x11;
    ck();
    a[b * BLK] = old;
    crpm_stats_t st = ck();
    verify("a block changed back");
    CHECK(st.bytes_written == 0, "the older copy already held the block: %llu bytes written",
          (unsigned long long)st.bytes_written);
    crpm_container_close(c);
    unlink(path);
    free(a);
    free(ref);
    return check_summary(track ? "stale map (tracked, hot)" : "stale map (compared whole)");
}

/* The GPU memory kinds (lib/device) on the mock device: the kinds' own code,
 * the device operations simulated with host memory (devops_mock.c: work runs
 * only when waited for, device pointers fault if touched).
 *
 *   test_devkind model SEED ROUNDS   the kinds against a model of the
 *        committed state: random arrays (odd sizes, unaligned pointers, block
 *        sizes 16..4096), random writes, the engine's walk in order, out of
 *        order, repeated and from four threads at once, commits, aborts
 *        (after which the next walk asks for changes only: the kind must
 *        still report every block that differs from the committed state),
 *        recoveries (SYNCED, also into a kind attached afresh: a restart)
 *        and injected device failures.  A changed block
 *        never goes unreported, every reported block carries the array's
 *        bytes, and without failures or aborts the report is exact.
 *   test_devkind engine DIR          the kinds under the engine: bytes moved
 *        per checkpoint (only changed blocks in diff and fingerprint modes,
 *        everything in full mode), the fingerprint mode's device memory,
 *        recovery (the next checkpoint moves nothing), a corrupt container,
 *        managed memory, failures at attach (compared through copies), in a
 *        checkpoint (fails, the next one is exact) and in recovery, and what
 *        crpm_dev_classify says of each kind of pointer. */
#include <pthread.h>
#include <sys/stat.h>
#include "check.h"
#include "devkind.h"
#include "devmock.h"
#include "engine.h"
#include "mock_gpu.h"

static uint64_t rng;

/* ---- model test ----------------------------------------------------------------- */

typedef struct walk {
    const crpm_mem_kind *k;
    void *st;
    crpm_array a;
    uint64_t bytes, blk, R;
    const char *live;     /* host view */
    const char *committed;
    int all, failed;
    uint64_t *rep;        /* union of reports, absolute block bits */
    char *staged;         /* staged bytes, absolute */
    uint64_t extra;       /* reported blocks equal to the committed state */
    uint64_t *ranges;     /* offsets to stage */
    int nranges;
} walk;

static pthread_mutex_t walk_mu = PTHREAD_MUTEX_INITIALIZER;

static int stage_one(walk *w, uint64_t off)
{
    uint64_t len = w->bytes - off < w->R ? w->bytes - off : w->R, nb = (len + w->blk - 1) / w->blk;
    uint64_t *chg = calloc((nb + 63) / 64 + 1, 8);
    char *buf = malloc(len + 1);
    memset(buf, 0xA5, len);
    int rc = w->k->stage(w->st, &w->a, off, len, w->all, chg, buf);
    pthread_mutex_lock(&walk_mu);
    if (rc) {
        w->failed = 1;
    } else {
        for (uint64_t i = 0; i < nb; i++) {
            if (!(chg[i / 64] >> (i % 64) & 1))
                continue;
            uint64_t o = off + i * w->blk, n = w->bytes - o < w->blk ? w->bytes - o : w->blk, b = o / w->blk;
            CHECK(memcmp(buf + i * w->blk, w->live + o, n) == 0, "reported block %llu: staged bytes differ from "
                  "the array", (unsigned long long)b);
            w->rep[b / 64] |= 1ull << (b % 64);
            memcpy(w->staged + o, buf + i * w->blk, n);
        }
    }
    pthread_mutex_unlock(&walk_mu);
    free(chg);
    free(buf);
    return rc;
}

static void *worker(void *arg)
{
    void **p = arg;
    walk *w = p[0];
    int t = (int)(intptr_t)p[1];
    for (int i = t; i < w->nranges; i += 4)
        stage_one(w, w->ranges[i]);
    CHECK(crpm_devmock_use_depth() == 0, "a thread's device use() left unpaired");
    return NULL;
}

/* One array, `rounds` checkpoints. */
static void model_case(uint64_t seed, int rounds)
{
    rng = seed;
    static const uint64_t blks[] = {16, 64, 256, 256, 1024, 4096};
    uint64_t blk = blks[rnd_below(&rng, 6)], mis = rnd_below(&rng, 3) == 0 ? 1 + rnd_below(&rng, 15) : 0;
    uint64_t bytes = rnd_below(&rng, 4) == 0 ? 1 + rnd_below(&rng, 3000) : 1 + rnd_below(&rng, 400000);
    int mode = 1 + (int)rnd_below(&rng, 2); /* diff or fingerprint */
    if (mode == CRPM_DEVICE_FINGERPRINT && blk > 4096)
        blk = 4096;
    char *host = mock_gpu_malloc(bytes + mis);
    char *live = host + mis, *committed = malloc(bytes), *dev = (char *)mock_gpu_dev(host) + mis;
    fill_random(&rng, live, bytes);
    walk w = {crpm_dev_kind(mode), NULL, {1, CRPM_TC_BYTE, 1, bytes, dev, NULL, crpm_dev_kind(mode)}, bytes, blk,
              0, live, committed, 1, 0, NULL, malloc(bytes), 0, NULL, 0};
    uint64_t nb = (bytes + blk - 1) / blk;
    w.rep = calloc((nb + 63) / 64 + 1, 8);
    w.ranges = malloc(sizeof *w.ranges * (nb + 8));
    REQUIRE(w.k->attach(&w.a, blk, &w.st) == 0, "attach: %s", crpm_last_error());
    int trusted_model = 0; /* committed[] is defined */
    int clean = 0;         /* rounds since the last abort or failure */
    for (int r = 0; r < rounds; r++) {
        /* the application's writes */
        uint64_t what = rnd_below(&rng, 10);
        if (what < 4) {
            for (int i = 0, n = 1 + (int)rnd_below(&rng, 8); i < n; i++)
                live[rnd_below(&rng, bytes)] ^= (char)(1 + rnd_below(&rng, 255));
        } else if (what < 6) {
            uint64_t o = rnd_below(&rng, bytes), n = 1 + rnd_below(&rng, bytes - o);
            fill_random(&rng, live + o, n);
        } else if (what == 6 && trusted_model) {
            memcpy(live, committed, bytes); /* back to the committed state */
        } else if (what == 7) {
            fill_random(&rng, live, bytes);
        } else if (what == 8) { /* zeros: what a reference never filled holds */
            uint64_t o = rnd_below(&rng, bytes), n = 1 + rnd_below(&rng, bytes - o);
            memset(live + o, 0, n);
        }
        /* the walk */
        w.R = blk << rnd_below(&rng, 6);
        w.nranges = 0;
        for (uint64_t o = 0; o < bytes; o += w.R)
            w.ranges[w.nranges++] = o;
        uint64_t order = rnd_below(&rng, 8);
        if (order == 0) /* shuffled */
            for (int i = w.nranges - 1; i > 0; i--) {
                int j = (int)rnd_below(&rng, (uint64_t)i + 1);
                uint64_t t = w.ranges[i];
                w.ranges[i] = w.ranges[j];
                w.ranges[j] = t;
            }
        else if (order == 1 && w.nranges > 1) { /* one range again */
            uint64_t again = w.ranges[rnd_below(&rng, (uint64_t)w.nranges)];
            w.ranges[w.nranges++] = again;
        }
        memset(w.rep, 0, ((nb + 63) / 64 + 1) * 8);
        w.failed = 0;
        w.extra = 0;
        int inject = rnd_below(&rng, 6) == 0;
        if (inject) {
            static const char *ops[] = {"copy", "compare", "gather", "wait", "alloc", "host_alloc"};
            crpm_devmock_fail(ops[rnd_below(&rng, 6)], 1 + (int)rnd_below(&rng, 6));
        }
        if (order == 2) {
            pthread_t t[4];
            void *args[4][2];
            for (int i = 0; i < 4; i++) {
                args[i][0] = &w;
                args[i][1] = (void *)(intptr_t)i;
                REQUIRE(pthread_create(&t[i], NULL, worker, args[i]) == 0, "thread");
            }
            for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        } else {
            for (int i = 0; i < w.nranges; i++)
                stage_one(&w, w.ranges[i]);
        }
        static const char *all_ops[] = {"copy", "compare", "gather", "wait", "alloc", "host_alloc"};
        for (int i = 0; i < 6; i++)
            crpm_devmock_fail(all_ops[i], 0);
        /* nothing that differs from the committed state goes unreported */
        for (uint64_t b = 0; b < nb && !w.failed; b++) {
            uint64_t o = b * blk, n = bytes - o < blk ? bytes - o : blk;
            int rep = (int)(w.rep[b / 64] >> (b % 64) & 1);
            int differs = !trusted_model || memcmp(live + o, committed + o, n) != 0;
            if (differs && !rep) {
                CHECK(0, "seed %llu round %d: block %llu changed but not reported (mode %d, blk %llu, R %llu, "
                      "order %llu)", (unsigned long long)seed, r, (unsigned long long)b, mode,
                      (unsigned long long)blk, (unsigned long long)w.R, (unsigned long long)order);
                break;
            }
            w.extra += rep && !differs;
        }
        /* commit, abort, or a recovery */
        uint64_t ev = w.failed ? 1 : rnd_below(&rng, 10);
        int exact_expected = !w.all && !inject && order >= 3 && clean >= 2;
        clean = ev < 3 || inject ? 0 : clean + 1;
        if (ev < 2) {
            w.k->event(w.st, &w.a, CRPM_MEM_ABORTED);
            w.all = !trusted_model || rnd_below(&rng, 2) == 0; /* the engine would ask all; check force */
        } else if (ev == 2 && trusted_model) {
            w.k->event(w.st, &w.a, CRPM_MEM_ABORTED);
            if (rnd_below(&rng, 2)) { /* a restart: the kind attaches afresh, then the recovery */
                w.k->detach(w.st);
                REQUIRE(w.k->attach(&w.a, blk, &w.st) == 0, "attach: %s", crpm_last_error());
            }
            memcpy(live, committed, bytes); /* a recovery of the committed state */
            w.k->event(w.st, &w.a, CRPM_MEM_SYNCED);
            w.all = 0;
        } else {
            w.k->event(w.st, &w.a, CRPM_MEM_COMMITTED);
            if (exact_expected && w.extra)
                CHECK(0, "seed %llu round %d: %llu unchanged blocks reported", (unsigned long long)seed, r,
                      (unsigned long long)w.extra);
            for (uint64_t b = 0; b < nb; b++) /* the committed state: reported blocks as staged */
                if (w.rep[b / 64] >> (b % 64) & 1) {
                    uint64_t o = b * blk, n = bytes - o < blk ? bytes - o : blk;
                    memcpy(committed + o, w.staged + o, n);
                }
            trusted_model = 1;
            w.all = 0;
        }
    }
    w.k->detach(w.st);
    CHECK(crpm_devmock_use_depth() == 0, "seed %llu: device use() left unpaired (%d)", (unsigned long long)seed,
          crpm_devmock_use_depth());
    mock_gpu_release(host);
    free(committed);
    free(w.staged);
    free(w.rep);
    free(w.ranges);
}

/* ---- under the engine ------------------------------------------------------------ */

#define SEG (64u << 10)
#define BLK 256u
#define N (16u * SEG + 1000u) /* a short last segment and a partial last block */

static crpm_container *open_c(const char *path, int create)
{
    crpm_open_opts o = {.path = path, .segment_size = SEG, .block_size = BLK, .create = create};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open %s: %s", path, crpm_last_error());
    return c;
}

static int protect_dev(crpm_container *c, int32_t id, void *dev, uint64_t bytes, int mode)
{
    crpm_array a = {id, CRPM_TC_BYTE, 1, bytes, dev, NULL, crpm_dev_kind(mode)};
    return crpm_container_protect_array(c, &a);
}

static uint64_t d2h_now(void)
{
    uint64_t d;
    crpm_devmock_counters(&d, NULL, NULL);
    return d;
}

static crpm_stats_t ck(crpm_container *c, uint64_t id)
{
    crpm_stats_t st;
    REQUIRE(crpm_container_checkpoint(c, id, &st) == 0, "checkpoint %llu: %s", (unsigned long long)id,
            crpm_last_error());
    return st;
}

static int committed_is(crpm_container *c, const char *want, uint64_t n)
{
    char *got = malloc(n);
    int ok = crpm_container_read_region(c, 0, got) == 0 && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

/* Bytes moved per checkpoint and recovery in one mode. */
static void engine_mode(const char *dir, int mode)
{
    static const char *names[] = {"", "diff", "fingerprint", "full"};
    char path[512];
    snprintf(path, sizeof path, "%s/devkind-%d-%s.crpm", dir, (int)getpid(), names[mode]);
    unlink(path);
    crpm_container *c = open_c(path, 1);
    char *h = mock_gpu_malloc(N);
    fill_random(&rng, h, N);
    void *d = mock_gpu_dev(h);
    REQUIRE(protect_dev(c, 1, d, N, mode) == 0, "protect: %s", crpm_last_error());
    uint64_t m0 = d2h_now();
    crpm_stats_t st = ck(c, 1);
    CHECK(d2h_now() - m0 >= N && st.bytes_written == N, "%s: first checkpoint moved %llu, wrote %llu", names[mode],
          (unsigned long long)(d2h_now() - m0), (unsigned long long)st.bytes_written);
    /* reports: a window's count and bitmap, 8 bytes per 64 blocks and one word */
    uint64_t meta = (N / BLK / 64 + 1) * 8 + 8 * (N / (16u << 20) + 2);
    uint64_t at[4] = {17, 3 * SEG + 4000, 9 * SEG + 77, N - 1};
    for (int e = 2; e <= 4; e++) {
        for (int i = 0; i < 4; i++)
            h[at[i]] ^= (char)(e + i);
        m0 = d2h_now();
        st = ck(c, (uint64_t)e);
        uint64_t moved = d2h_now() - m0;
        if (mode == CRPM_DEVICE_FULL)
            CHECK(moved == N, "full: checkpoint %d moved %llu of %u bytes", e, (unsigned long long)moved, N);
        else
            CHECK(moved <= 4 * BLK + meta && moved >= 4 * BLK - 200, "%s: checkpoint %d moved %llu bytes for 4 "
                  "changed blocks", names[mode], e, (unsigned long long)moved);
        CHECK(committed_is(c, h, N), "%s: checkpoint %d holds the array", names[mode], e);
    }
    m0 = d2h_now();
    st = ck(c, 5);
    CHECK(mode == CRPM_DEVICE_FULL || (d2h_now() - m0 <= meta && st.bytes_written == 0),
          "%s: an idle checkpoint moved %llu, wrote %llu", names[mode], (unsigned long long)(d2h_now() - m0),
          (unsigned long long)st.bytes_written);
    crpm_container_close(c);

    /* recovery into a fresh allocation, then a checkpoint that moves nothing new */
    char *saved = malloc(N);
    memcpy(saved, h, N);
    mock_gpu_release(h);
    c = open_c(path, 0);
    h = mock_gpu_malloc(N);
    memset(h, 0x33, N);
    REQUIRE(protect_dev(c, 1, mock_gpu_dev(h), N, mode) == 0, "protect: %s", crpm_last_error());
    uint64_t h2d0;
    crpm_devmock_counters(NULL, &h2d0, NULL);
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    uint64_t h2d1;
    crpm_devmock_counters(NULL, &h2d1, NULL);
    CHECK(memcmp(h, saved, N) == 0 && h2d1 - h2d0 == N, "%s: recovery: equal %d, %llu bytes in",
          names[mode], memcmp(h, saved, N) == 0, (unsigned long long)(h2d1 - h2d0));
    h[5 * SEG] ^= 1;
    m0 = d2h_now();
    st = ck(c, 6);
    CHECK(mode == CRPM_DEVICE_FULL || d2h_now() - m0 <= BLK + meta, "%s: after recovery, one changed block "
          "moved %llu bytes", names[mode], (unsigned long long)(d2h_now() - m0));
    CHECK(committed_is(c, h, N), "%s: checkpoint after recovery", names[mode]);
    crpm_container_close(c);
    mock_gpu_release(h);
    free(saved);
    unlink(path);
}

/* Device memory of the fingerprint mode: 16 bytes per block, not a copy. */
static void engine_memory(const char *dir)
{
    uint64_t n = 64u << 20, used[3] = {0, 0, 0};
    setenv("CRPM_DEVICE_WINDOW_MB", "1", 1);
    for (int mode = 1; mode <= 2; mode++) {
        char path[512];
        snprintf(path, sizeof path, "%s/devkind-mem-%d.crpm", dir, (int)getpid());
        unlink(path);
        crpm_dev_trim();
        crpm_devmock_peak_reset();
        char *h = mock_gpu_malloc(n); /* the array, counted by neither: the test's allocation */
        uint64_t base, peak;
        crpm_devmock_counters(NULL, NULL, &base);
        crpm_open_opts o = {.path = path, .create = 1}; /* 2-MiB segments */
        crpm_container *c;
        REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open: %s", crpm_last_error());
        h[12345] = 1;
        REQUIRE(protect_dev(c, 1, mock_gpu_dev(h), n, mode) == 0, "protect: %s", crpm_last_error());
        ck(c, 1);
        h[n - 3] = 7;
        ck(c, 2);
        CHECK(committed_is(c, h, n), "mode %d: 64 MiB array", mode);
        crpm_devmock_counters(NULL, NULL, &peak);
        used[mode] = peak - base;
        crpm_container_close(c);
        mock_gpu_release(h);
        unlink(path);
    }
    unsetenv("CRPM_DEVICE_WINDOW_MB");
    CHECK(used[1] >= n, "diff mode held %llu bytes on the device for a %llu-byte array", (unsigned long long)used[1],
          (unsigned long long)n);
    /* fingerprints, and at most four windows (one 2-MiB segment each here) of packed blocks */
    CHECK(used[2] <= n / 16 + (9u << 20), "fingerprint mode held %llu bytes for a %llu-byte array",
          (unsigned long long)used[2], (unsigned long long)n);
    printf("device memory besides the array: diff %.1f MiB, fingerprint %.1f MiB (array %.0f MiB)\n",
           used[1] / 1048576.0, used[2] / 1048576.0, n / 1048576.0);
}

/* A flipped byte in the container: recovery fails naming the array, and the
 * segment's bytes never reach the device array. */
static void engine_corrupt(const char *dir, int mode)
{
    char path[512];
    snprintf(path, sizeof path, "%s/devkind-corrupt-%d.crpm", dir, (int)getpid());
    unlink(path);
    crpm_container *c = open_c(path, 1);
    char *h = mock_gpu_malloc(N);
    fill_random(&rng, h, N);
    REQUIRE(protect_dev(c, 1, mock_gpu_dev(h), N, mode) == 0, "protect: %s", crpm_last_error());
    ck(c, 1);
    h[2 * SEG + 5] ^= 1;
    ck(c, 2);
    crpm_container_close(c);
    c = open_c(path, 0);
    const crpm_seg *sg = &c->regions[0].segs[2];
    off_t off = (off_t)(crpm_seg_addr(c, sg->phys[sg->state - 1]) - c->media.base) + 100;
    crpm_container_close(c);
    check_flip(path, off, 0x10);
    c = open_c(path, 0);
    memset(h, 0x55, N);
    REQUIRE(protect_dev(c, 1, mock_gpu_dev(h), N, mode) == 0, "protect: %s", crpm_last_error());
    int rc = crpm_container_recover(c);
    CHECK(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), "array id 1"), "mode %d: recovery from a flipped "
          "byte: rc %d %s", mode, rc, crpm_last_error());
    int untouched = 1;
    for (uint64_t i = 2 * SEG; i < 3 * SEG; i++)
        untouched &= h[i] == 0x55;
    CHECK(untouched, "mode %d: bytes of the corrupt segment reached the device array", mode);
    crpm_container_close(c);
    mock_gpu_release(h);
    unlink(path);
}

/* Managed memory is recognised and checkpointed as device memory. */
static void engine_managed(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/devkind-managed-%d.crpm", dir, (int)getpid());
    unlink(path);
    char *m = mock_gpu_managed(N);
    fill_random(&rng, m, N);
    const crpm_mem_kind *k;
    int managed;
    REQUIRE(crpm_dev_classify(m, CRPM_DEVICE_DIFF, 0, 9, "test", &k, &managed) == 0, "classify: %s",
            crpm_last_error());
    CHECK(k == &crpm_dev_kind_diff && managed, "managed memory: kind %s, managed %d", k ? k->name : "host", managed);
    crpm_container *c = open_c(path, 1);
    REQUIRE(protect_dev(c, 1, m, N, CRPM_DEVICE_DIFF) == 0, "protect: %s", crpm_last_error());
    ck(c, 1);
    m[7 * SEG + 3] ^= 4;
    uint64_t m0 = d2h_now();
    ck(c, 2);
    CHECK(d2h_now() - m0 < 2 * BLK + 1024, "managed: one changed block moved %llu bytes",
          (unsigned long long)(d2h_now() - m0));
    CHECK(committed_is(c, m, N), "managed memory checkpointed");
    char *saved = malloc(N);
    memcpy(saved, m, N);
    memset(m, 0, N);
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    CHECK(memcmp(m, saved, N) == 0, "managed memory recovered");
    crpm_container_close(c);
    mock_gpu_free(m, NULL, N);
    free(saved);
    unlink(path);
}

/* Device failures: at attach the array is compared through copies; in a
 * checkpoint it fails (CRPM_ERR_DEVICE) and the next one is exact; in a
 * recovery it fails. */
static void engine_failures(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/devkind-fail-%d.crpm", dir, (int)getpid());
    unlink(path);
    crpm_container *c = open_c(path, 1);
    char *h = mock_gpu_malloc(N);
    fill_random(&rng, h, N);
    crpm_devmock_fail("alloc", 1);
    REQUIRE(protect_dev(c, 1, mock_gpu_dev(h), N, CRPM_DEVICE_DIFF) == 0, "protect: %s", crpm_last_error());
    const char *why = crpm_container_untracked_reason(c, 1);
    CHECK(why && strstr(why, "cannot follow"), "attach failure: %s", why ? why : "(followed)");
    uint64_t m0 = d2h_now();
    ck(c, 1);
    h[100] ^= 1;
    ck(c, 2);
    CHECK(d2h_now() - m0 == 2ull * N && committed_is(c, h, N), "without its copy the array is moved whole (%llu)",
          (unsigned long long)(d2h_now() - m0));
    /* again with the copy (a new pointer attaches anew) */
    char *h2 = mock_gpu_malloc(N);
    memcpy(h2, h, N);
    REQUIRE(protect_dev(c, 1, mock_gpu_dev(h2), N, CRPM_DEVICE_DIFF) == 0, "protect: %s", crpm_last_error());
    CHECK(!crpm_container_untracked_reason(c, 1), "attached");
    ck(c, 3);
    /* the second copy is the packed blocks' (the first the report), the second wait theirs */
    static const char *ops[] = {"copy", "compare", "gather", "wait"};
    static const int nth[] = {2, 1, 1, 2};
    for (int i = 0; i < 4; i++) {
        h2[(uint64_t)(i + 1) * 3 * SEG] ^= 0x21;
        crpm_devmock_fail(ops[i], nth[i]);
        crpm_stats_t st;
        int rc = crpm_container_checkpoint(c, 10 + (uint64_t)i, &st);
        CHECK(rc == CRPM_ERR_DEVICE && strstr(crpm_last_error(), "GPU array 1"), "failing %s: rc %d, %s", ops[i],
              rc, crpm_last_error());
        crpm_devmock_fail(ops[i], 0);
        h2[(uint64_t)(i + 1) * 3 * SEG + 700] ^= 0x12;
        ck(c, 20 + (uint64_t)i);
        CHECK(committed_is(c, h2, N), "after a failed checkpoint (%s) the next one holds the array", ops[i]);
    }
    crpm_devmock_fail("copy", 1);
    memset(h2, 0, N);
    int rc = crpm_container_recover(c);
    CHECK(rc == CRPM_ERR_DEVICE, "recovery with a failing copy: rc %d %s", rc, crpm_last_error());
    crpm_devmock_fail("copy", 0);
    crpm_container_close(c);
    mock_gpu_release(h);
    mock_gpu_release(h2);
    unlink(path);
}

/* What protect is told of each kind of pointer. */
static void classify(void)
{
    const crpm_mem_kind *k;
    int managed, host_int = 5;
    void *hv;
    void *d = mock_gpu_alloc(4096, &hv);
    CHECK(crpm_dev_classify(&host_int, CRPM_DEVICE_DIFF, 0, 1, "f", &k, &managed) == 0 && !k, "host memory: host");
    int rc = crpm_dev_classify(&host_int, CRPM_DEVICE_DIFF, 1, 1, "crpm_protect_device", &k, &managed);
    CHECK(rc == CRPM_ERR_INVAL && strstr(crpm_last_error(), "host memory"), "explicit on host memory: %d %s", rc,
          crpm_last_error());
    static const int modes[] = {CRPM_DEVICE_DIFF, CRPM_DEVICE_FINGERPRINT, CRPM_DEVICE_FULL};
    static const crpm_mem_kind *kinds[] = {&crpm_dev_kind_diff, &crpm_dev_kind_fp, &crpm_dev_kind_full};
    for (int i = 0; i < 3; i++)
        CHECK(crpm_dev_classify(d, modes[i], 1, 1, "f", &k, &managed) == 0 && k == kinds[i] && !managed,
              "device memory, mode %d", modes[i]);
    rc = crpm_dev_classify(d, 7, 0, 1, "f", &k, &managed);
    CHECK(rc == CRPM_ERR_INVAL, "unknown mode: %d", rc);
    crpm_devmock_fail("query", 1);
    rc = crpm_dev_classify(d, CRPM_DEVICE_DIFF, 0, 3, "crpm_protect", &k, &managed);
    CHECK(rc == CRPM_ERR_DEVICE && strstr(crpm_last_error(), "crpm_protect(3)"), "failing query: %d %s", rc,
          crpm_last_error());
    /* the build's own table: CUDA (and no driver in this process) or none */
    crpm_devops_set(NULL);
    const crpm_devops *o = crpm_devops_get();
    rc = crpm_dev_classify(&host_int, CRPM_DEVICE_DIFF, 0, 1, "crpm_protect", &k, &managed);
    CHECK(rc == 0 && !k, "%s: host memory is host memory (%d)", o ? o->name : "no CUDA", rc);
    rc = crpm_dev_classify(d, CRPM_DEVICE_DIFF, 1, 4, "crpm_protect_device", &k, &managed);
    printf("crpm_protect_device without a GPU (%s): %s\n", o ? o->name : "built without CUDA", crpm_last_error());
    if (o)
        CHECK(rc == CRPM_ERR_DEVICE && strstr(crpm_last_error(), "no CUDA driver"), "%d %s", rc, crpm_last_error());
    else
        CHECK(rc == CRPM_ERR_NOTSUP && strstr(crpm_last_error(), "without CUDA"), "%d %s", rc, crpm_last_error());
    crpm_devops_set(&crpm_devops_mock);
    mock_gpu_free(d, hv, 4096);
}

int main(int argc, char **argv)
{
    check_set_note(crpm_last_error);
    crpm_devops_set(&crpm_devops_mock);
    if (argc >= 4 && strcmp(argv[1], "model") == 0) {
        uint64_t seed = strtoull(argv[2], NULL, 10);
        int cases = atoi(argv[3]);
        for (int i = 0; i < cases && !check_failures(); i++)
            model_case(seed + (uint64_t)i, 12);
        printf("%d model cases from seed %llu\n", cases, (unsigned long long)seed);
        return check_summary("devkind model");
    }
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    rng = 42;
    for (int mode = 1; mode <= 3; mode++)
        engine_mode(dir, mode);
    engine_memory(dir);
    engine_corrupt(dir, CRPM_DEVICE_DIFF);
    engine_corrupt(dir, CRPM_DEVICE_FULL);
    engine_managed(dir);
    engine_failures(dir);
    classify();
    CHECK(crpm_devmock_use_depth() == 0, "device use() left unpaired (%d)", crpm_devmock_use_depth());
    return check_summary("devkind engine");
}

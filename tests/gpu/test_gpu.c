/* The GPU memory kinds on a real GPU (tests/gpu/run.sh; never in CI).
 *
 *   test_gpu DIR [ROUNDS]
 *
 *   classify  cudaMalloc memory is device memory, cudaMallocManaged managed,
 *             malloc and cudaMallocHost (pinned) memory host memory
 *   modes     every mode (diff, fingerprint, full) on device and on managed
 *             memory, arrays of odd sizes at unaligned addresses, blocks of
 *             256 and 4096 bytes: random blocks changed by a kernel, then a
 *             checkpoint; the container's committed state equals the array
 *             after each; an idle checkpoint writes nothing; recovery into a fresh allocation restores every
 *             byte and the next checkpoint holds the array
 *   corrupt   a flipped byte in the container: recovery fails with
 *             CRPM_ERR_CORRUPT naming the array and the damaged segment's
 *             bytes never reach the device array
 *   aborted   the kind's calls directly: a walk after an aborted checkpoint
 *             reports again what that checkpoint staged, one after a commit
 *             reports nothing
 *   windows   a 96 MiB array with 1-MiB windows (CRPM_DEVICE_WINDOW_MB),
 *             changes spread over every window, depth 1 and 6: exact */
#include <cuda_runtime_api.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "devkind.h"
#include "engine.h"
#include "gpu_util.h"

static uint64_t rng = 7;
static const char *dir;
static const char *names[] = {"", "diff", "fingerprint", "full"};

#define CU(x) REQUIRE((x) == cudaSuccess, "%s: %s", #x, cudaGetErrorString(cudaGetLastError()))

static crpm_container *open_c(const char *path, uint64_t seg, uint64_t blk, int create)
{
    crpm_open_opts o = {.path = path, .segment_size = seg, .block_size = blk, .create = create};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open %s: %s", path, crpm_last_error());
    return c;
}

static int protect(crpm_container *c, void *p, uint64_t bytes, int mode)
{
    crpm_array a = {1, CRPM_TC_BYTE, 1, bytes, p, NULL, crpm_dev_kind(mode)};
    return crpm_container_protect_array(c, &a);
}

/* The container's committed state equals the device array. */
static int holds(crpm_container *c, const void *dev, uint64_t bytes)
{
    char *want = malloc(bytes + 1), *got = malloc(bytes + 1);
    CU(cudaMemcpy(want, dev, bytes, cudaMemcpyDefault));
    int ok = crpm_container_read_region(c, 0, got) == 0 && memcmp(want, got, bytes) == 0;
    free(want);
    free(got);
    return ok;
}

static crpm_stats_t ck(crpm_container *c, uint64_t id)
{
    crpm_stats_t st;
    REQUIRE(crpm_container_checkpoint(c, id, &st) == 0, "checkpoint %llu: %s", (unsigned long long)id,
            crpm_last_error());
    return st;
}

static void classify(void)
{
    void *d, *m, *pinned, *h = malloc(64);
    CU(cudaMalloc(&d, 4096));
    CU(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal));
    CU(cudaMallocHost(&pinned, 4096));
    const crpm_mem_kind *k;
    int managed;
    CHECK(crpm_dev_classify(d, CRPM_DEVICE_DIFF, 0, 1, "t", &k, &managed) == 0 && k == &crpm_dev_kind_diff &&
              !managed, "cudaMalloc: device memory (%s)", crpm_last_error());
    CHECK(crpm_dev_classify(m, CRPM_DEVICE_FINGERPRINT, 0, 1, "t", &k, &managed) == 0 && k == &crpm_dev_kind_fp &&
              managed, "cudaMallocManaged: managed memory (%s)", crpm_last_error());
    CHECK(crpm_dev_classify(pinned, CRPM_DEVICE_DIFF, 0, 1, "t", &k, &managed) == 0 && !k,
          "cudaMallocHost: host memory (%s)", crpm_last_error());
    CHECK(crpm_dev_classify(h, CRPM_DEVICE_DIFF, 0, 1, "t", &k, &managed) == 0 && !k, "malloc: host memory");
    CHECK(crpm_dev_classify(h, CRPM_DEVICE_DIFF, 1, 1, "t", &k, &managed) == CRPM_ERR_INVAL,
          "crpm_protect_device of host memory is refused");
    cudaFree(d);
    cudaFree(m);
    cudaFreeHost(pinned);
    free(h);
}

/* One mode on one kind of memory: rounds of random changes. */
static void one_mode(int mode, int use_managed, uint64_t blk, int rounds)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gpu-%d-%d-%d-%llu.crpm", dir, (int)getpid(), mode, use_managed,
             (unsigned long long)blk);
    unlink(path);
    uint64_t seg = blk == 4096 ? (1u << 20) : (64u << 10), mis = 8 * rnd_below(&rng, 4) + rnd_below(&rng, 2);
    uint64_t bytes = 5 * seg + 1 + rnd_below(&rng, 3 * seg);
    char *base, *base2;
    if (use_managed) {
        CU(cudaMallocManaged((void **)&base, bytes + mis, cudaMemAttachGlobal));
        CU(cudaMallocManaged((void **)&base2, bytes + mis, cudaMemAttachGlobal));
    } else {
        CU(cudaMalloc((void **)&base, bytes + mis));
        CU(cudaMalloc((void **)&base2, bytes + mis));
    }
    char *p = base + mis, *p2 = base2 + mis;
    REQUIRE(gpu_fill(p, bytes, rnd(&rng)) == 0, "fill");
    crpm_container *c = open_c(path, seg, blk, 1);
    REQUIRE(protect(c, p, bytes, mode) == 0, "protect: %s", crpm_last_error());
    const char *why = crpm_container_untracked_reason(c, 1);
    CHECK(mode == CRPM_DEVICE_FULL || !why, "%s: not followed: %s", names[mode], why ? why : "");
    ck(c, 1);
    CHECK(holds(c, p, bytes), "%s %s blk %llu: first checkpoint", names[mode], use_managed ? "managed" : "device",
          (unsigned long long)blk);
    for (int r = 0; r < rounds; r++) {
        uint64_t changed;
        static const double fr[] = {0.001, 0.01, 0.1, 1.0};
        REQUIRE(gpu_touch(p, bytes, blk, fr[r % 4], r % 3 == 0, rnd(&rng), &changed) == 0, "touch");
        ck(c, 2 + (uint64_t)r);
        CHECK(holds(c, p, bytes), "%s %s blk %llu round %d (%llu blocks changed)", names[mode],
              use_managed ? "managed" : "device", (unsigned long long)blk, r, (unsigned long long)changed);
    }
    crpm_stats_t st = ck(c, 100);
    CHECK(st.bytes_written == 0, "%s: an idle checkpoint wrote %llu bytes",
          names[mode], (unsigned long long)st.bytes_written);
    crpm_container_close(c);
    /* recovery into another allocation */
    REQUIRE(gpu_fill(p2, bytes, 99) == 0, "fill");
    c = open_c(path, seg, blk, 0);
    REQUIRE(protect(c, p2, bytes, mode) == 0, "protect: %s", crpm_last_error());
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    int differ = 1;
    REQUIRE(gpu_cmp(base, base2, bytes + mis, &differ) == 0, "cmp");
    CHECK(!differ, "%s: recovery restored the array", names[mode]);
    uint64_t changed;
    REQUIRE(gpu_touch(p2, bytes, blk, 0.0, 1, 5, &changed) == 0 && changed == 1, "touch one block");
    ck(c, 101);
    CHECK(holds(c, p2, bytes), "%s: checkpoint after recovery", names[mode]);
    crpm_container_close(c);
    cudaFree(base);
    cudaFree(base2);
    unlink(path);
}

static void corrupt(int mode)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gpu-corrupt-%d.crpm", dir, (int)getpid());
    unlink(path);
    uint64_t seg = 64u << 10, bytes = 8 * seg;
    char *p;
    CU(cudaMalloc((void **)&p, bytes));
    REQUIRE(gpu_fill(p, bytes, 3) == 0, "fill");
    crpm_container *c = open_c(path, seg, 256, 1);
    REQUIRE(protect(c, p, bytes, mode) == 0, "protect: %s", crpm_last_error());
    ck(c, 1);
    const crpm_seg *sg = &c->regions[0].segs[2];
    off_t off = (off_t)(crpm_seg_addr(c, sg->phys[sg->state - 1]) - c->media.base) + 100;
    crpm_container_close(c);
    check_flip(path, off, 0x10);
    CU(cudaMemset(p, 0x55, bytes));
    c = open_c(path, seg, 256, 0);
    REQUIRE(protect(c, p, bytes, mode) == 0, "protect: %s", crpm_last_error());
    int rc = crpm_container_recover(c);
    CHECK(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), "array id 1"), "%s: recovery from a flipped byte: "
          "%d %s", names[mode], rc, crpm_last_error());
    unsigned char *h = malloc(seg);
    CU(cudaMemcpy(h, p + 2 * seg, seg, cudaMemcpyDeviceToHost));
    int untouched = 1;
    for (uint64_t i = 0; i < seg; i++)
        untouched &= h[i] == 0x55;
    CHECK(untouched, "%s: bytes of the corrupt segment reached the device array", names[mode]);
    free(h);
    crpm_container_close(c);
    cudaFree(p);
    unlink(path);
}

/* One walk of the engine's kind calls over the whole array (ranges of R
 * bytes): the blocks reported (bitmap over the array) must carry the array's
 * bytes; returns how many. */
static uint64_t walk(const crpm_mem_kind *k, void *st, const crpm_array *a, uint64_t bytes, uint64_t R, int all,
                     const char *now, uint64_t *rep)
{
    uint64_t nb = (bytes + 255) / 256, n = 0, *chg = calloc(R / 256 / 64 + 2, 8);
    char *buf = malloc(R);
    memset(rep, 0, (nb + 63) / 64 * 8);
    for (uint64_t off = 0; off < bytes; off += R) {
        uint64_t len = bytes - off < R ? bytes - off : R;
        memset(chg, 0, (R / 256 / 64 + 2) * 8);
        REQUIRE(k->stage(st, a, off, len, all, chg, buf) == 0, "stage %llu: %s", (unsigned long long)off,
                crpm_last_error());
        for (uint64_t i = 0; i < (len + 255) / 256; i++)
            if (chg[i / 64] >> (i % 64) & 1) {
                uint64_t o = off + i * 256, m = bytes - o < 256 ? bytes - o : 256, b = o / 256;
                CHECK(memcmp(buf + i * 256, now + o, m) == 0, "block %llu staged with other bytes",
                      (unsigned long long)b);
                rep[b / 64] |= 1ull << (b % 64);
                n++;
            }
    }
    free(chg);
    free(buf);
    return n;
}

/* The kind's calls directly, on the GPU: a checkpoint that did not commit
 * (ABORTED) has its blocks reported again by the next walk though the
 * compare kernel already took them into the copy (the bitmap-move kernel). */
static void aborted(int mode)
{
    uint64_t bytes = (3u << 20) + 777, nb = (bytes + 255) / 256, R = 256u << 10, changed;
    char *p, *committed = malloc(bytes), *now = malloc(bytes);
    uint64_t *rep = calloc((nb + 63) / 64, 8);
    CU(cudaMalloc((void **)&p, bytes));
    REQUIRE(gpu_fill(p, bytes, 21) == 0, "fill");
    const crpm_mem_kind *k = crpm_dev_kind(mode);
    crpm_array a = {1, CRPM_TC_BYTE, 1, bytes, p, NULL, k};
    void *st;
    REQUIRE(k->attach(&a, 256, &st) == 0, "attach: %s", crpm_last_error());
    CU(cudaMemcpy(committed, p, bytes, cudaMemcpyDefault));
    CHECK(walk(k, st, &a, bytes, R, 1, committed, rep) == nb, "%s: a first walk reports every block", names[mode]);
    k->event(st, &a, CRPM_MEM_COMMITTED);
    REQUIRE(gpu_touch(p, bytes, 256, 0.02, 0, 8, &changed) == 0, "touch");
    CU(cudaMemcpy(now, p, bytes, cudaMemcpyDefault));
    uint64_t n = walk(k, st, &a, bytes, R, 0, now, rep);
    CHECK(n == changed, "%s: %llu blocks changed, %llu reported", names[mode], (unsigned long long)changed,
          (unsigned long long)n);
    k->event(st, &a, CRPM_MEM_ABORTED);
    n = walk(k, st, &a, bytes, R, 0, now, rep); /* nothing changed since, but nothing was committed either */
    uint64_t missed = 0;
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t o = b * 256, m = bytes - o < 256 ? bytes - o : 256;
        missed += memcmp(now + o, committed + o, m) != 0 && !(rep[b / 64] >> (b % 64) & 1);
    }
    CHECK(missed == 0 && n >= changed, "%s: after an aborted checkpoint %llu changed blocks went unreported",
          names[mode], (unsigned long long)missed);
    k->event(st, &a, CRPM_MEM_COMMITTED);
    CHECK(walk(k, st, &a, bytes, R, 0, now, rep) == 0, "%s: after the commit an idle walk reports nothing",
          names[mode]);
    k->event(st, &a, CRPM_MEM_COMMITTED);
    k->detach(st);
    cudaFree(p);
    free(committed);
    free(now);
    free(rep);
}

static void windows(int depth)
{
    char path[512], d[16];
    snprintf(path, sizeof path, "%s/gpu-win-%d.crpm", dir, (int)getpid());
    unlink(path);
    snprintf(d, sizeof d, "%d", depth);
    setenv("CRPM_DEVICE_WINDOW_MB", "1", 1);
    setenv("CRPM_DEVICE_DEPTH", d, 1);
    uint64_t bytes = (96u << 20) + 12345, changed;
    char *p;
    CU(cudaMalloc((void **)&p, bytes));
    REQUIRE(gpu_fill(p, bytes, 11) == 0, "fill");
    crpm_container *c = open_c(path, 256u << 10, 256, 1);
    REQUIRE(protect(c, p, bytes, CRPM_DEVICE_DIFF) == 0, "protect: %s", crpm_last_error());
    ck(c, 1);
    for (int r = 0; r < 4; r++) {
        REQUIRE(gpu_touch(p, bytes, 256, 0.003, 0, 40 + (uint64_t)r, &changed) == 0, "touch");
        ck(c, 2 + (uint64_t)r);
        CHECK(holds(c, p, bytes), "depth %d round %d: %llu blocks changed", depth, r, (unsigned long long)changed);
    }
    crpm_container_close(c);
    cudaFree(p);
    unlink(path);
    unsetenv("CRPM_DEVICE_WINDOW_MB");
    unsetenv("CRPM_DEVICE_DEPTH");
}

int main(int argc, char **argv)
{
    check_set_note(crpm_last_error);
    dir = argc > 1 ? argv[1] : "/dev/shm";
    int rounds = argc > 2 ? atoi(argv[2]) : 8, n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        check_skip("no CUDA GPU here");
    char name[256];
    uint64_t fr, tot;
    REQUIRE(gpu_info(name, sizeof name, &fr, &tot) == 0, "device info");
    printf("GPU: %s, %.1f of %.1f GiB free\n", name, fr / 1073741824.0, tot / 1073741824.0);
    classify();
    for (int mode = 1; mode <= 3; mode++)
        for (int m = 0; m <= 1; m++) {
            one_mode(mode, m, 256, rounds);
            one_mode(mode, m, 4096, rounds / 2);
        }
    aborted(CRPM_DEVICE_DIFF);
    aborted(CRPM_DEVICE_FINGERPRINT);
    corrupt(CRPM_DEVICE_DIFF);
    corrupt(CRPM_DEVICE_FINGERPRINT);
    windows(1);
    windows(6);
    return check_summary("gpu kinds");
}

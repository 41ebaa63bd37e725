/* Crash at every drain: randomized workloads run on the persistence simulator;
 * at each fence, crash images (nothing in flight landed, everything landed,
 * random subsets with 8-byte tearing) are opened and recovered.  Each must hold
 * exactly epoch k or k-1, and the previous epoch must be intact whenever the
 * container says it is recoverable.  After each checkpoint returns, the media
 * alone must hold epoch k.
 *
 *   test_crash_sim DIR MIN_IMAGES [track|declared|device|gpu|instr|-] [WORKERS]
 *   (instr: change_tracking = instrumented-verify, for the build of this file
 *   with the pass plugin in tests/instrument)
 * device: the arrays live in mock device memory (mock_device.h), some in a
 * kind that stages its own changes, some in one that only copies.
 * gpu: the GPU kinds of lib/device (diff, fingerprint, full by array) on the
 * mock device (tests/common/devops_mock.c).
 * WORKERS > 1: the data passes run on a pool of that many workers, whose
 * stores yield at random (other interleavings); a store that reaches the
 * simulator while a fence runs fails the test. */
#include <fcntl.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "persist_sim.h"
#include "mock_device.h"
#include "mock_gpu.h"
#include "devkind.h"
#include "devmock.h"
#include "pool.h"

#define MAXR 8
#define MAXE 128

typedef struct snap {
    int n;
    int32_t id[MAXR];
    uint64_t bytes[MAXR];
    char *data[MAXR];
} snap;

typedef struct region {
    int live;
    int32_t id;
    char *buf;
    uint64_t bytes;
    char *spare; /* an older buffer of the array, for double-buffer swaps */
    uint64_t spare_bytes;
    uint64_t wr[16][2]; /* writes of this epoch, to report after protect */
    int nwr;
    int was_packed;
} region;

/* Records a write for the declared mode; too many: the whole array. */
static void wrote(region *r, uint64_t off, uint64_t len)
{
    if (r->nwr == 16) {
        r->wr[0][0] = 0;
        r->wr[0][1] = UINT64_MAX;
        r->nwr = 1;
        return;
    }
    r->wr[r->nwr][0] = off;
    r->wr[r->nwr++][1] = len;
}

static snap refs[MAXE + 1];
static uint64_t lo_epoch, hi_epoch;
static uint64_t images, failures, rng_img, resumable, resumed;
static char img_path[256];
static char *img;
static int mid_checkpoint;
static int track; /* change_tracking of the workloads (CRPM_TRACK_*): pagemap, or instrumented-verify */
static int declared; /* the workloads report their writes (crpm_container_written) */
static int device; /* the arrays are in mock device memory */
static int gpu;    /* ... of the mock GPU device, through the GPU kinds */
static uint64_t packed_seen, moves_seen; /* packed arrays after a checkpoint; arrays moved in or out of packs */
static crpm_pool *pool; /* WORKERS > 1 */

/* The arrays' buffers: host memory, or the host side of mock device memory
 * (written as a kernel would write device memory). */
static void *ralloc(uint64_t n)
{
    return gpu ? mock_gpu_malloc(n) : device ? mock_malloc(n) : malloc(n ? n : 1);
}
static void *rrealloc(void *p, uint64_t n)
{
    return gpu ? mock_gpu_realloc(p, n) : device ? mock_realloc(p, n) : realloc(p, n ? n : 1);
}
static void rfree(void *p)
{
    if (gpu)
        mock_gpu_release(p);
    else if (device)
        mock_free(p);
    else
        free(p);
}

static int protect(crpm_container *c, int32_t id, char *buf, uint64_t count, uint64_t es)
{
    if (gpu) { /* the three modes by array */
        crpm_array g = {id, CRPM_TC_BYTE, es, count, mock_gpu_dev(buf), NULL, crpm_dev_kind(1 + id % 3)};
        return crpm_container_protect_array(c, &g);
    }
    if (!device)
        return crpm_container_protect(c, id, buf, count, CRPM_TC_BYTE, es);
    crpm_array a = {id, CRPM_TC_BYTE, es, count, mock_dev(buf), NULL,
                    id % 3 == 0 ? &mock_kind_copy : &mock_kind_diff};
    return crpm_container_protect_array(c, &a);
}

static void free_snap(snap *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->data[i]);
    memset(s, 0, sizeof *s);
}

static void take_snap(snap *s, region *r)
{
    free_snap(s);
    for (int i = 0; i < MAXR; i++) {
        if (!r[i].live) continue;
        s->id[s->n] = r[i].id;
        s->bytes[s->n] = r[i].bytes;
        s->data[s->n] = malloc(r[i].bytes ? r[i].bytes : 1);
        memcpy(s->data[s->n], r[i].buf, r[i].bytes);
        s->n++;
    }
}

/* Compares the committed state of c with snapshot s; returns 0 if equal. */
static int matches(crpm_container *c, const snap *s, char *why, size_t whylen)
{
    int n = crpm_container_nregions(c);
    if (n != s->n) {
        snprintf(why, whylen, "%d regions, expected %d", n, s->n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        crpm_array info;
        crpm_container_region(c, i, &info);
        int j;
        for (j = 0; j < s->n && s->id[j] != info.id; j++)
            ;
        if (j == s->n || s->bytes[j] != crpm_array_bytes(&info)) {
            snprintf(why, whylen, "region id %d: size %llu unexpected", info.id, (unsigned long long)crpm_array_bytes(&info));
            return -1;
        }
        char *tmp = malloc(crpm_array_bytes(&info) ? crpm_array_bytes(&info) : 1);
        int rc = crpm_container_read_region(c, i, tmp);
        int bad = rc || memcmp(tmp, s->data[j], crpm_array_bytes(&info)) != 0;
        free(tmp);
        if (bad) {
            snprintf(why, whylen, "region id %d: contents differ (rc %d)", info.id, rc);
            return -1;
        }
    }
    return 0;
}

/* The image file is kept between images and only pages that differ from
 * what it holds are written: rewriting whole files (freeing and allocating
 * tmpfs pages) was almost all of the test's time. */
static int img_fd = -1;
static char *img_shadow; /* what the image file holds */
static size_t img_size;
static int shadow_stale; /* the library wrote the image file: rewrite it whole */

static void write_image(const char *buf, size_t n)
{
    if (img_fd < 0) {
        img_fd = open(img_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        REQUIRE(img_fd >= 0, "open %s", img_path);
    }
    if (n != img_size) {
        REQUIRE(ftruncate(img_fd, (off_t)n) == 0, "ftruncate image");
        img_shadow = realloc(img_shadow, n);
        REQUIRE(img_shadow, "out of memory");
        if (n > img_size)
            memset(img_shadow + img_size, 0, n - img_size);
        img_size = n;
    }
    for (size_t off = 0; off < n; off += 4096) {
        size_t len = n - off < 4096 ? n - off : 4096;
        /* page 0 always: rollback rewrites the commit word in the file */
        if (off && !shadow_stale && memcmp(buf + off, img_shadow + off, len) == 0)
            continue;
        REQUIRE(pwrite(img_fd, buf + off, len, (off_t)off) == (ssize_t)len, "write image");
        memcpy(img_shadow + off, buf + off, len);
    }
    shadow_stale = 0;
}

/* The job restarts from the crash image (as recovered, maybe rolled back)
 * and checkpoints the data of epoch hi again: the copy it writes into may
 * hold blocks and CRCs of the interrupted attempt in any mix, and the new
 * epoch must still read back exactly (its CRCs included). */
static void resume_image(uint64_t hi, const char *what)
{
    crpm_open_opts o = {.path = img_path, .persistence = CRPM_PERSIST_MSYNC};
    crpm_container *c;
    char why[256] = "";
    shadow_stale = 1;
    if (crpm_container_open(&o, &c, NULL) != 0)
        return; /* reported by verify_image */
    crpm_container_set_pool(c, pool); /* workers storing through msync views */
    uint64_t e = crpm_container_epoch(c);
    const snap *s = &refs[hi];
    int rc = 0;
    for (int i = 0; i < s->n && rc == 0; i++)
        rc = crpm_container_protect(c, s->id[i], s->data[i] ? s->data[i] : (char *)"", s->bytes[i], CRPM_TC_BYTE, 1);
    if (rc == 0)
        rc = crpm_container_checkpoint(c, hi, NULL);
    if (rc || crpm_container_epoch(c) != e + 1 || matches(c, s, why, sizeof why)) {
        fprintf(stderr, "FAIL (%s, resumed from epoch %llu): checkpoint of epoch %llu data: rc %d %s %s\n", what,
                (unsigned long long)e, (unsigned long long)hi, rc, why, rc ? crpm_last_error() : "");
        failures++;
    }
    crpm_container_close(c);
}

/* Opens the image, checks the epoch it recovers, then (if offered) rolls back
 * and checks the previous epoch too. */
static void verify_image(const char *buf, size_t n, uint64_t lo, uint64_t hi, const char *what)
{
    write_image(buf, n);
    images++;
    crpm_open_opts o = {.path = img_path, .persistence = CRPM_PERSIST_MSYNC};
    crpm_container *c;
    char why[256] = "";
    int rc = crpm_container_open(&o, &c, NULL);
    if (rc) {
        fprintf(stderr, "FAIL (%s, epochs %llu..%llu): open: %s\n", what, (unsigned long long)lo,
                (unsigned long long)hi, crpm_last_error());
        failures++;
        return;
    }
    uint64_t e = crpm_container_epoch(c);
    if (e < lo || e > hi || matches(c, &refs[e], why, sizeof why)) {
        fprintf(stderr, "FAIL (%s): recovered epoch %llu, allowed %llu..%llu: %s\n", what, (unsigned long long)e,
                (unsigned long long)lo, (unsigned long long)hi, why);
        failures++;
    } else if (crpm_container_prev_available(c)) {
        rc = crpm_container_rollback(c);
        if (rc || crpm_container_epoch(c) != e - 1 || matches(c, &refs[e - 1], why, sizeof why)) {
            fprintf(stderr, "FAIL (%s): rollback from %llu: rc %d %s %s\n", what, (unsigned long long)e, rc, why,
                    crpm_last_error());
            failures++;
        }
    }
    crpm_container_close(c);
}

static void on_drain(void *arg, crpm_media *m)
{
    (void)arg;
    if (!mid_checkpoint)
        return;
    static const int modes[] = {CRPM_SIM_NONE_LANDED, CRPM_SIM_ALL_LANDED, CRPM_SIM_RANDOM, CRPM_SIM_RANDOM};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        crpm_sim_crash_image(m, modes[i], &rng_img, img);
        verify_image(img, m->size, lo_epoch, hi_epoch, "crash at drain");
        if (modes[i] == CRPM_SIM_RANDOM && ++resumable % 2 == 0) {
            resume_image(hi_epoch, "crash at drain");
            resumed++;
        }
    }
}

/* One mutation of region r in epoch k. */
static void mutate(uint64_t *s, region *r, int k)
{
    uint64_t a = rnd_below(s, 100);
    if (a < 25 || !r->bytes) {
        if (a < 10 && r->bytes < 200000) { /* grow */
            uint64_t nb = r->bytes + 1 + rnd_below(s, 20000);
            r->buf = rrealloc(r->buf, nb);
            fill_random(s, r->buf + r->bytes, nb - r->bytes);
            wrote(r, r->bytes, nb - r->bytes);
            r->bytes = nb;
        }
        return; /* otherwise unchanged: stays clean for a while */
    }
    if (a < 50) { /* sparse */
        int n = 1 + (int)rnd_below(s, 6);
        for (int i = 0; i < n; i++) {
            uint64_t at = rnd_below(s, r->bytes);
            r->buf[at] ^= (char)(1 + rnd_below(s, 255));
            wrote(r, at, 1);
        }
    } else if (a < 62) { /* dense */
        fill_random(s, r->buf, r->bytes);
        wrote(r, 0, r->bytes);
    } else if (a < 75) { /* contiguous run */
        uint64_t off = rnd_below(s, r->bytes), len = 1 + rnd_below(s, r->bytes - off);
        fill_random(s, r->buf + off, len);
        wrote(r, off, len);
    } else if (a < 82) { /* undo: back to what epoch k-2 held, so DRAM equals the other copy */
        if (k >= 2)
            for (int i = 0; i < refs[k - 2].n; i++)
                if (refs[k - 2].id[i] == r->id) {
                    uint64_t n = refs[k - 2].bytes[i] < r->bytes ? refs[k - 2].bytes[i] : r->bytes;
                    memcpy(r->buf, refs[k - 2].data[i], n);
                    wrote(r, 0, n);
                }
    } else if (a < 89) { /* re-protect with a new pointer; the old buffer is kept as a spare */
        char *nb = ralloc(r->bytes);
        memcpy(nb, r->buf, r->bytes);
        if (!r->spare) {
            r->spare = r->buf;
            r->spare_bytes = r->bytes;
        } else {
            rfree(r->buf);
        }
        r->buf = nb;
        if (rnd_below(s, 2)) { /* unreported on purpose: a new pointer means compare all */
            r->buf[rnd_below(s, r->bytes)] ^= 0x5a;
        }
    } else if (a < 95) { /* double buffering: back to the spare, untouched since it was left */
        if (r->spare && r->spare_bytes == r->bytes) {
            char *t = r->buf;
            r->buf = r->spare;
            r->spare = t;
        }
    } else { /* shrink */
        r->bytes = rnd_below(s, r->bytes);
    }
}

static void run_workload(uint64_t seed, uint64_t seg, uint64_t blk, int nepochs, const char *dir)
{
    uint64_t s = seed;
    char path[512];
    snprintf(path, sizeof path, "%s/sim-%d.crpm", dir, (int)getpid());
    unlink(path);
    for (int i = 0; i <= MAXE; i++)
        free_snap(&refs[i]);
    crpm_sim_set_callback(on_drain, NULL);
    crpm_open_opts o = {.path = path, .segment_size = seg, .block_size = blk, .job_name = "sim",
                        .rank = 0, .nranks = 1, .backend = &crpm_backend_sim, .create = 1,
                        .slot_size = 16384, .change_tracking = track};
    crpm_container *c;
    int rc = crpm_container_open(&o, &c, NULL);
    REQUIRE(rc == 0, "open: %s", crpm_last_error());
    crpm_container_set_pool(c, pool);
    if (track == CRPM_TRACK_PAGEMAP && strcmp(crpm_container_tracking(c), "pagemap") != 0) {
        printf("SKIP: change tracking not available: %s\n", crpm_container_tracking(c));
        exit(77);
    }
    region r[MAXR];
    memset(r, 0, sizeof r);
    int nr = 2 + (int)rnd_below(&s, 3);
    for (int i = 0; i < nr; i++) {
        r[i].live = 1;
        r[i].id = (int32_t)(i * 7 + 1);
        r[i].bytes = rnd_below(&s, 3) == 0 ? rnd_below(&s, 100) : rnd_below(&s, 40000);
        r[i].buf = ralloc(r[i].bytes);
        fill_random(&s, r[i].buf, r[i].bytes);
    }
    mock_superset = device && (seed & 1); /* the staging kind may report unchanged blocks too */
    for (int k = 1; k <= nepochs; k++) {
        for (int i = 0; i < MAXR; i++) {
            if (r[i].live) {
                if (k > 1 && rnd_below(&s, 40) == 0 && nr > 1) { /* unprotect (protected since epoch 1) */
                    REQUIRE(crpm_container_unprotect(c, r[i].id) == 0, "unprotect");
                    rfree(r[i].buf);
                    rfree(r[i].spare);
                    r[i].live = 0;
                    r[i].buf = r[i].spare = NULL;
                    nr--;
                    continue;
                }
                mutate(&s, &r[i], k);
            } else if (rnd_below(&s, 30) == 0) { /* a new array appears */
                r[i].live = 1;
                r[i].id = (int32_t)(100 + i);
                r[i].bytes = rnd_below(&s, 30000);
                r[i].buf = ralloc(r[i].bytes);
                fill_random(&s, r[i].buf, r[i].bytes);
                nr++;
            }
            if (r[i].live) {
                int es = r[i].bytes % 8 == 0 ? 8 : 1;
                rc = protect(c, r[i].id, r[i].buf, r[i].bytes / (uint64_t)es, (uint64_t)es);
                REQUIRE(rc == 0, "protect: %s", crpm_last_error());
                if (declared) {
                    REQUIRE(crpm_container_declare_writes(c, r[i].id) == 0, "declare: %s", crpm_last_error());
                    for (int w = 0; w < r[i].nwr; w++)
                        crpm_container_written(c, r[i].id, r[i].wr[w][0], r[i].wr[w][1]);
                }
            }
            r[i].nwr = 0;
        }
        take_snap(&refs[k], r);
        lo_epoch = (uint64_t)k - 1;
        hi_epoch = (uint64_t)k;
        mid_checkpoint = 1;
        crpm_stats_t st;
        rc = crpm_container_checkpoint(c, (uint64_t)k, &st);
        mid_checkpoint = 0;
        REQUIRE(rc == 0, "checkpoint %d: %s", k, crpm_last_error());
        REQUIRE(crpm_container_epoch(c) == (uint64_t)k, "epoch");
        for (int i = 0; i < MAXR; i++) { /* packing (format.h) seen */
            crpm_region *reg = r[i].live ? crpm_region_find(c, r[i].id) : NULL;
            int packed = reg && reg->saved && reg->pack != CRPM_NO_PACK;
            packed_seen += (uint64_t)packed;
            moves_seen += (uint64_t)(reg && k > 1 && packed != r[i].was_packed);
            r[i].was_packed = packed;
        }
        /* durable state alone must hold epoch k, and k-1 must be recoverable */
        crpm_media *m = crpm_container_media(c);
        memcpy(img, crpm_sim_media(m), m->size);
        verify_image(img, m->size, (uint64_t)k, (uint64_t)k, "media after checkpoint");
    }
    /* finally recover through the protected arrays */
    for (int i = 0; i < MAXR; i++)
        if (r[i].live)
            memset(r[i].buf, 0, r[i].bytes);
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    for (int i = 0, j = 0; i < MAXR; i++)
        if (r[i].live) {
            REQUIRE(memcmp(r[i].buf, refs[nepochs].data[j], r[i].bytes) == 0, "recovered contents");
            j++;
        }
    crpm_container_close(c);
    crpm_sim_set_callback(NULL, NULL);
    for (int i = 0; i < MAXR; i++) {
        rfree(r[i].buf);
        rfree(r[i].spare);
    }
    unlink(path);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    uint64_t min_images = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000;
    track = argc > 3 && strcmp(argv[3], "track") == 0 ? CRPM_TRACK_PAGEMAP : 0;
    /* compiled with the pass (tests/instrument): marks, every block verified besides */
    if (argc > 3 && strcmp(argv[3], "instr") == 0)
        track = CRPM_TRACK_INSTR_VERIFY;
    declared = argc > 3 && strcmp(argv[3], "declared") == 0;
    device = argc > 3 && strcmp(argv[3], "device") == 0;
    gpu = argc > 3 && strcmp(argv[3], "gpu") == 0;
    crpm_devops_set(&crpm_devops_mock);
    int workers = argc > 4 ? atoi(argv[4]) : 0;
    if (workers > 1) {
        REQUIRE(crpm_pool_create(workers, &pool) == 0, "pool: %s", crpm_last_error());
        crpm_sim_set_jitter(1);
    }
    img = malloc(64u << 20);
    snprintf(img_path, sizeof img_path, "%s/sim-img-%d.crpm", dir, (int)getpid());
    rng_img = 12345;
    static const struct { uint64_t seg, blk; } geo[] = {
        {4096, 256}, {1024, 64}, {65536, 4096}, {2048, 2048}, {512, 8}, {16384, 256},
        {65536, 256}, /* 16 pages a segment: sparse writes take the tracked engine's block-by-block path */
    };
    uint64_t seed = 1;
    int runs = 0;
    while (images < min_images || runs < 12) {
        size_t g = (size_t)runs % (sizeof geo / sizeof geo[0]);
        run_workload(seed++, geo[g].seg, geo[g].blk, 24, dir);
        runs++;
        if (failures)
            break;
    }
    unlink(img_path);
    if (crpm_sim_late_stores()) {
        fprintf(stderr, "FAIL: %llu stores reached the media while a fence ran\n", crpm_sim_late_stores());
        failures++;
    }
    crpm_pool_free(pool);
    if (workers > 1)
        printf("with %d workers\n", workers);
    printf("crash images checked: %llu in %d workloads%s (%llu resumed with a new checkpoint), failures: %llu\n",
           (unsigned long long)images, runs, track ? " (change tracking)" : declared ? " (declared writes)" : device ? " (mock device memory)" : gpu ? " (GPU kinds, mock device)" : "", (unsigned long long)resumed,
           (unsigned long long)failures);
    printf("packed arrays after a checkpoint: %llu; arrays moved into or out of a pack: %llu\n",
           (unsigned long long)packed_seen, (unsigned long long)moves_seen);
    if (!declared && !failures)
        REQUIRE(packed_seen > 100 && moves_seen > 10, "the workloads must cover packed arrays and moves");
    return failures ? 1 : 0;
}

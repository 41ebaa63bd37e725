/* The engine's workers (issue 31).
 *
 *   test_threads pool
 *       the pool runs every task exactly once, on workers 0 .. width-1, one
 *       task at a time per worker; lent guests (a team) serve runs, late
 *       ones too, and are dismissed; a guest arriving after the dismissal
 *       returns at once
 *   test_threads identical DIR [track]
 *       the same workload checkpointed into two copies of one container,
 *       one by the caller alone and one by 8 workers (oversubscribed on a
 *       small machine): the files are byte-identical after every
 *       checkpoint (but for the slots' time stamps and checksums), and
 *       both recover the arrays exactly, with 1 and with 8 workers */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "mock_device.h"
#include "pool.h"

/* ---- pool ---------------------------------------------------------------------- */

#define NT 5000
static atomic_int hits[NT];
static atomic_int busy[64];
static atomic_int overlap, bad_worker;
static int width_now;

static void count_task(void *arg, uint64_t t, int w)
{
    (void)arg;
    if (w < 0 || w >= width_now)
        atomic_fetch_add(&bad_worker, 1);
    else if (atomic_fetch_add(&busy[w], 1) != 0)
        atomic_fetch_add(&overlap, 1);
    atomic_fetch_add(&hits[t], 1);
    if (t % 97 == 0)
        usleep(100); /* some tasks are slow: others take over */
    if (w >= 0 && w < width_now)
        atomic_fetch_sub(&busy[w], 1);
}

static void check_run(crpm_pool *p, uint64_t n, const char *what)
{
    for (uint64_t t = 0; t < NT; t++)
        atomic_store(&hits[t], 0);
    width_now = crpm_pool_width(p);
    crpm_pool_run(p, n, count_task, NULL);
    int wrong = 0;
    for (uint64_t t = 0; t < NT; t++)
        wrong += atomic_load(&hits[t]) != (t < n);
    CHECK(wrong == 0, "%s: %d tasks not run exactly once", what, wrong);
    CHECK(atomic_load(&overlap) == 0 && atomic_load(&bad_worker) == 0, "%s: a worker index shared or out of range",
          what);
}

typedef struct guest_arg {
    crpm_pool *p;
    int delay_us;
} guest_arg;

static void *guest(void *arg)
{
    guest_arg *g = arg;
    usleep((useconds_t)g->delay_us);
    crpm_pool_serve(g->p);
    return NULL;
}

static int test_pool(void)
{
    for (int n = 1; n <= 9; n += 2) {
        crpm_pool *p;
        REQUIRE(crpm_pool_create(n, &p) == 0, "pool of %d", n);
        CHECK(crpm_pool_width(p) == n, "width %d for a pool of %d", crpm_pool_width(p), n);
        char what[64];
        snprintf(what, sizeof what, "pool of %d", n);
        for (int r = 0; r < 20; r++)
            check_run(p, r % 2 ? NT : (uint64_t)r, what);
        /* a team of 4 lends its 3 other threads, one of them late */
        crpm_pool_guests(p, 3);
        CHECK(crpm_pool_width(p) == 4, "a team of 4: width %d", crpm_pool_width(p));
        pthread_t th[3];
        guest_arg ga[3] = {{p, 0}, {p, 0}, {p, 50000}};
        for (int i = 0; i < 3; i++)
            pthread_create(&th[i], NULL, guest, &ga[i]);
        for (int r = 0; r < 10; r++)
            check_run(p, NT, "team of 4");
        crpm_pool_dismiss(p);
        for (int i = 0; i < 3; i++)
            pthread_join(th[i], NULL);
        CHECK(crpm_pool_width(p) == n, "width %d after the team left", crpm_pool_width(p));
        check_run(p, NT, "after the team");
        /* a guest that comes after the dismissal does not wait for another */
        pthread_t late;
        guest_arg gl = {p, 0};
        pthread_create(&late, NULL, guest, &gl);
        pthread_join(late, NULL);
        crpm_pool_free(p);
    }
    check_run(NULL, 100, "no pool");
    return check_summary("pool") == 0 ? 0 : 1;
}

/* ---- identical containers ------------------------------------------------------------ */

#define NA 7
typedef struct arr {
    int live, dev;
    int32_t id;
    char *buf;                 /* host memory, or the host side of mock device memory */
    uint64_t bytes;
} arr;

static void protect_all(crpm_container *c, arr *a)
{
    for (int i = 0; i < NA; i++) {
        if (!a[i].live)
            continue;
        crpm_array d = {a[i].id, CRPM_TC_BYTE, 1, a[i].bytes, a[i].dev ? mock_dev(a[i].buf) : a[i].buf, NULL,
                        a[i].dev == 1 ? &mock_kind_diff : a[i].dev == 2 ? &mock_kind_copy : NULL};
        REQUIRE(crpm_container_protect_array(c, &d) == 0, "protect %d: %s", a[i].id, crpm_last_error());
    }
}

static void mutate(uint64_t *s, arr *a, int k)
{
    for (int i = 0; i < NA; i++) {
        arr *x = &a[i];
        if (!x->live)
            continue;
        uint64_t r = rnd_below(s, 100);
        if (r < 15) {
            /* unchanged */
        } else if (r < 45) { /* ~1% of the blocks */
            for (uint64_t n = x->bytes / 25600 + 1; n--;)
                x->buf[rnd_below(s, x->bytes)] ^= (char)(1 + rnd_below(s, 255));
        } else if (r < 60) { /* a run */
            uint64_t off = rnd_below(s, x->bytes), len = 1 + rnd_below(s, x->bytes - off);
            fill_random(s, x->buf + off, len);
        } else if (r < 70) { /* everything */
            fill_random(s, x->buf, x->bytes);
        } else if (r < 80 && x->bytes < (6u << 20)) { /* grows */
            uint64_t nb = x->bytes + 1 + rnd_below(s, 1u << 20);
            x->buf = x->dev ? mock_realloc(x->buf, nb) : realloc(x->buf, nb);
            fill_random(s, x->buf + x->bytes, nb - x->bytes);
            x->bytes = nb;
        } else if (r < 85) { /* shrinks */
            x->bytes = 1 + rnd_below(s, x->bytes);
        }
    }
    (void)k;
}

/* The file without the slots' time stamps and checksums (they hold the time
 * of the checkpoint). */
static char *load_masked(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY);
    REQUIRE(fd >= 0, "open %s", path);
    struct stat sb;
    REQUIRE(fstat(fd, &sb) == 0, "stat");
    char *b = malloc((size_t)sb.st_size + 1);
    REQUIRE(b && pread(fd, b, (size_t)sb.st_size, 0) == sb.st_size, "read %s", path);
    close(fd);
    struct crpm_super su;
    memcpy(&su, b, sizeof su);
    for (int i = 0; i < 2; i++) {
        uint64_t o = su.slot_offset[i];
        REQUIRE(o + sizeof(struct crpm_slot_hdr) <= (uint64_t)sb.st_size, "slot offset");
        memset(b + o + offsetof(struct crpm_slot_hdr, timestamp_ns), 0, 8);
        memset(b + o + offsetof(struct crpm_slot_hdr, crc), 0, 4);
    }
    *n = (size_t)sb.st_size;
    return b;
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    int fd = open(from, O_RDONLY);
    REQUIRE(fd >= 0, "open %s", from);
    struct stat sb;
    REQUIRE(fstat(fd, &sb) == 0, "stat");
    n = (size_t)sb.st_size;
    char *b = malloc(n);
    REQUIRE(b && pread(fd, b, n, 0) == (ssize_t)n, "read");
    close(fd);
    fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0 && pwrite(fd, b, n, 0) == (ssize_t)n, "write %s", to);
    close(fd);
    free(b);
}

static int test_identical(const char *dir, int track)
{
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/threads-ident-a-%d.crpm", dir, (int)getpid());
    snprintf(pb, sizeof pb, "%s/threads-ident-b-%d.crpm", dir, (int)getpid());
    unlink(pa);
    unlink(pb);
    crpm_open_opts o = {.path = pa, .segment_size = 64u << 10, .block_size = 256, .job_name = "ident", .rank = 0,
                        .nranks = 1, .persistence = CRPM_PERSIST_MSYNC, .create = 1, .change_tracking = track};
    crpm_container *a, *b;
    REQUIRE(crpm_container_open(&o, &a, NULL) == 0, "create: %s", crpm_last_error());
    crpm_container_close(a);
    copy_file(pa, pb); /* the same nonce and identity: only what the checkpoints write can differ */
    o.create = 0;
    REQUIRE(crpm_container_open(&o, &a, NULL) == 0, "open a: %s", crpm_last_error());
    o.path = pb;
    REQUIRE(crpm_container_open(&o, &b, NULL) == 0, "open b: %s", crpm_last_error());
    if (track && strcmp(crpm_container_tracking(a), "pagemap") != 0)
        check_skip("change tracking not available: %s", crpm_container_tracking(a));
    crpm_pool *pool;
    REQUIRE(crpm_pool_create(8, &pool) == 0, "pool");
    crpm_container_set_pool(b, pool);
    /* write logs, as level 2 keeps them: the workers' logs merged must name
     * the same ranges as the single worker's */
    crpm_wlog la = {0}, lb = {0};
    crpm_container_media(a)->log = &la;
    crpm_container_media(b)->log = &lb;

    /* two sets of the same arrays (with tracking each container follows
     * its own pages); sizes from a few bytes (packed) to several segments */
    arr x[NA], y[NA];
    uint64_t s = 2025, sizes[NA] = {24, 3000, 40000, 1u << 20, (3u << 20) + 777, (2u << 20) + 5, 600000};
    for (int i = 0; i < NA; i++) {
        x[i] = (arr){1, i == 5 ? 1 : i == 6 ? 2 : 0, (int32_t)(i + 1), NULL, sizes[i]};
        x[i].buf = x[i].dev ? mock_malloc(sizes[i]) : malloc(sizes[i]);
        fill_random(&s, x[i].buf, sizes[i]);
        y[i] = x[i];
        y[i].buf = y[i].dev ? mock_malloc(sizes[i]) : malloc(sizes[i]);
        memcpy(y[i].buf, x[i].buf, sizes[i]);
    }
    uint64_t sa = 7, sb = 7; /* the same mutations for both */
    int differ = 0;
    for (int k = 1; k <= 14 && !differ; k++) {
        if (k > 1) {
            mutate(&sa, x, k);
            mutate(&sb, y, k);
        }
        if (k == 6) { /* an array leaves, another comes */
            REQUIRE(crpm_container_unprotect(a, 3) == 0 && crpm_container_unprotect(b, 3) == 0, "unprotect");
            x[2].live = y[2].live = 0;
            x[2].id = y[2].id = 30;
        }
        if (k == 8)
            x[2].live = y[2].live = 1;
        protect_all(a, x);
        protect_all(b, y);
        crpm_stats_t st1, st8;
        REQUIRE(crpm_container_checkpoint(a, (uint64_t)k, &st1) == 0, "checkpoint %d (1 worker): %s", k,
                crpm_last_error());
        REQUIRE(crpm_container_checkpoint(b, (uint64_t)k, &st8) == 0, "checkpoint %d (8 workers): %s", k,
                crpm_last_error());
        CHECK(st1.bytes_written == st8.bytes_written, "checkpoint %d: %llu bytes written by 1 worker, %llu by 8", k,
              (unsigned long long)st1.bytes_written, (unsigned long long)st8.bytes_written);
        crpm_wlog_normalize(&la);
        crpm_wlog_normalize(&lb);
        CHECK(!la.lost && !lb.lost && la.n == lb.n && la.n > 0 && memcmp(la.v, lb.v, la.n * sizeof *la.v) == 0,
              "checkpoint %d: write logs differ (%zu ranges by 1 worker, %zu by 8)", k, la.n, lb.n);
        crpm_wlog_clear(&la);
        crpm_wlog_clear(&lb);
        size_t na, nb;
        char *fa = load_masked(pa, &na), *fb = load_masked(pb, &nb);
        size_t at = 0;
        while (at < na && at < nb && fa[at] == fb[at])
            at++;
        differ = na != nb || at < na;
        CHECK(!differ, "checkpoint %d: the containers differ (%zu and %zu bytes, first at byte %zu)", k, na, nb, at);
        free(fa);
        free(fb);
    }
    /* recovery with 8 workers and with 1 into zeroed arrays */
    char *want[NA] = {0};
    for (int i = 0; i < NA; i++) {
        if (!x[i].live)
            continue;
        want[i] = malloc(x[i].bytes);
        memcpy(want[i], x[i].buf, x[i].bytes);
        memset(x[i].buf, 0, x[i].bytes);
        memset(y[i].buf, 0, y[i].bytes);
    }
    CHECK(crpm_container_recover(b) == 0, "recover with 8 workers: %s", crpm_last_error());
    CHECK(crpm_container_recover(a) == 0, "recover with 1 worker: %s", crpm_last_error());
    for (int i = 0; i < NA; i++) {
        if (!want[i])
            continue;
        CHECK(memcmp(x[i].buf, want[i], x[i].bytes) == 0, "array %d recovered by 1 worker differs", x[i].id);
        CHECK(memcmp(y[i].buf, want[i], y[i].bytes) == 0, "array %d recovered by 8 workers differs", y[i].id);
        free(want[i]);
    }
    crpm_container_media(a)->log = NULL;
    crpm_container_media(b)->log = NULL;
    crpm_wlog_free(&la);
    crpm_wlog_free(&lb);
    crpm_container_close(a);
    crpm_container_close(b);
    crpm_pool_free(pool);
    for (int i = 0; i < NA; i++) {
        if (x[i].dev) {
            mock_free(x[i].buf);
            mock_free(y[i].buf);
        } else {
            free(x[i].buf);
            free(y[i].buf);
        }
    }
    unlink(pa);
    unlink(pb);
    return check_summary("identical") == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "pool") == 0)
        return test_pool();
    if (argc > 2 && strcmp(argv[1], "identical") == 0)
        return test_identical(argv[2], argc > 3 && strcmp(argv[3], "track") == 0);
    fprintf(stderr, "usage: test_threads pool | identical DIR [track]\n");
    return 2;
}

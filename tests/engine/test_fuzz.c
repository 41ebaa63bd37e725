/* Fuzzing valid containers: bit flips, byte runs, truncation, extension,
 * random metadata and data bytes at random offsets.  Every mutated file is
 * opened and recovered (and rolled back when the previous epoch is offered):
 * each case must end in an error or in exactly the known content of the epoch
 * it reports (K or K-1); never a crash, a hang (alarm) or wrong data.
 *
 *   test_fuzz DIR [CASES [SEED [device]]]   fuzz (default 2000 cases); device:
 *                                  recovery into mock device memory (mock_device.h)
 *   test_fuzz DIR flip OUT         write a container whose committed data has
 *                                  one flipped byte to OUT (for crpm-inspect) */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "mock_device.h"

#define NREG 7
#define K 4 /* committed epoch of the pristine containers */
/* Bytes of array id r + 1 in epoch k (0: not protected then): several
 * segments, a partial chunk, one chunk, and small arrays that share packs
 * (format.h): a scalar; one that grows past the packing limit and comes
 * back; one unprotected at epoch 3; one new at epoch 3. */
static const uint64_t size_at[K + 1][NREG] = {
    {0},
    {20000, 4099, 64, 8, 100, 40, 0},
    {20000, 4099, 64, 8, 9000, 40, 0},
    {20000, 4099, 64, 8, 100, 0, 100},
    {20000, 4099, 64, 8, 120, 0, 100},
};
#define MAXSZ 20000
static char *ref[K + 1][NREG];
static int device; /* recover into mock device memory */

static void epoch_data(uint64_t *s, int k)
{
    for (int r = 0; r < NREG; r++) {
        uint64_t n = size_at[k][r], before = k > 1 ? size_at[k - 1][r] : 0;
        ref[k][r] = calloc(1, MAXSZ);
        if (!n)
            continue;
        if (before)
            memcpy(ref[k][r], ref[k - 1][r], before < n ? before : n);
        if (before < n)
            fill_random(s, ref[k][r] + before, n - before);
        for (int i = 0; i < 1 + (int)rnd_below(s, 40); i++) /* sparse changes: both copies in use */
            ref[k][r][rnd_below(s, n)] ^= (char)(1 + rnd_below(s, 255));
    }
}

/* Builds a container at path holding epochs 1..K of ref. */
static void build(const char *path, uint64_t seg, uint64_t blk)
{
    unlink(path);
    crpm_open_opts o = {.path = path, .segment_size = seg, .block_size = blk, .job_name = "fuzz", .nranks = 1,
                        .create = 1, .persistence = CRPM_PERSIST_MSYNC, .slot_size = 8192};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    char *buf[NREG];
    for (int r = 0; r < NREG; r++)
        buf[r] = malloc(MAXSZ);
    for (int k = 1; k <= K; k++) {
        for (int r = 0; r < NREG; r++) {
            memcpy(buf[r], ref[k][r], size_at[k][r]);
            if (size_at[k][r])
                REQUIRE(crpm_container_protect(c, r + 1, buf[r], size_at[k][r], CRPM_TC_BYTE, 1) == 0, "protect");
            else if (k > 1 && size_at[k - 1][r])
                REQUIRE(crpm_container_unprotect(c, r + 1) == 0, "unprotect");
        }
        REQUIRE(crpm_container_checkpoint(c, (uint64_t)k, NULL) == 0, "checkpoint: %s", crpm_last_error());
    }
    REQUIRE(c->npacks > 0 && crpm_region_find(c, 4)->pack != CRPM_NO_PACK &&
            crpm_region_find(c, 1)->pack == CRPM_NO_PACK, "the container mixes packed and unpacked arrays");
    crpm_container_close(c);
    for (int r = 0; r < NREG; r++)
        free(buf[r]);
}

static char *read_all(const char *path, size_t *n)
{
    struct stat st;
    REQUIRE(stat(path, &st) == 0, "stat");
    char *b = malloc((size_t)st.st_size);
    int fd = open(path, O_RDONLY);
    REQUIRE(fd >= 0 && read(fd, b, (size_t)st.st_size) == st.st_size, "read %s", path);
    close(fd);
    *n = (size_t)st.st_size;
    return b;
}

static void write_all(const char *path, const char *b, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0 && (n == 0 || write(fd, b, n) == (ssize_t)n), "write %s", path);
    close(fd);
}

static uint64_t data_offset_of(const char *b, size_t n)
{
    struct crpm_super sb;
    REQUIRE(n >= sizeof sb, "pristine file too small");
    memcpy(&sb, b, sizeof sb);
    return sb.data_offset;
}

/* Returns the mutated size; buf has room for n + 3 * EXTEND_MAX. */
#define EXTEND_MAX 65536
static size_t mutate(uint64_t *s, char *buf, size_t n, uint64_t data_off, char *what, size_t wl)
{
    int m = 1 + (int)rnd_below(s, 3);
    size_t used = 0;
    what[0] = 0;
    for (int i = 0; i < m && n; i++) {
        uint64_t kind = rnd_below(s, 100), off;
        if (kind < 25) { /* bit flip anywhere */
            off = rnd_below(s, n);
            buf[off] ^= (char)(1u << rnd_below(s, 8));
            used += (size_t)snprintf(what + used, wl - used, "flip@%llu ", (unsigned long long)off);
        } else if (kind < 45) { /* random bytes in the data area */
            off = data_off + rnd_below(s, n > data_off ? n - data_off : 1);
            size_t len = 1 + rnd_below(s, 8);
            for (size_t j = 0; j < len && off + j < n; j++)
                buf[off + j] = (char)rnd(s);
            used += (size_t)snprintf(what + used, wl - used, "data@%llu+%zu ", (unsigned long long)off, len);
        } else if (kind < 65) { /* random bytes in the metadata (header and slots) */
            off = rnd_below(s, data_off < n ? data_off : n);
            size_t len = 1 + rnd_below(s, 8);
            for (size_t j = 0; j < len && off + j < n; j++)
                buf[off + j] = (char)rnd(s);
            used += (size_t)snprintf(what + used, wl - used, "meta@%llu+%zu ", (unsigned long long)off, len);
        } else if (kind < 80) { /* a run of one byte value (zeroed range, 0xff, random) */
            off = rnd_below(s, n);
            size_t len = 1 + rnd_below(s, 1024);
            int v = rnd_below(s, 3) == 0 ? 0 : rnd_below(s, 2) ? 0xff : (int)(rnd(s) & 0xff);
            if (len > n - off) len = n - off;
            memset(buf + off, v, len);
            used += (size_t)snprintf(what + used, wl - used, "run@%llu+%zu=%d ", (unsigned long long)off, len, v);
        } else if (kind < 92) { /* truncation */
            n = (size_t)rnd_below(s, n);
            if (rnd_below(s, 2)) n &= ~(size_t)4095;
            used += (size_t)snprintf(what + used, wl - used, "trunc=%zu ", n);
        } else { /* extension with garbage */
            size_t len = 1 + rnd_below(s, EXTEND_MAX);
            fill_random(s, buf + n, len);
            n += len;
            used += (size_t)snprintf(what + used, wl - used, "extend+%zu ", len);
        }
    }
    return n;
}

static int same_epoch(crpm_container *c, uint64_t e, char **got)
{
    int n = 0;
    for (int r = 0; r < NREG; r++)
        n += size_at[e][r] > 0;
    if (crpm_container_nregions(c) != n)
        return 0;
    for (int i = 0; i < n; i++) {
        crpm_array a;
        if (crpm_container_region(c, i, &a) != 0 || a.id < 1 || a.id > NREG ||
            crpm_array_bytes(&a) != size_at[e][a.id - 1])
            return 0;
        if (crpm_container_read_region(c, i, got[a.id - 1]) != 0)
            return -1; /* an error: fine */
        if (memcmp(got[a.id - 1], ref[e][a.id - 1], size_at[e][a.id - 1]) != 0)
            return 0;
    }
    return 1;
}

/* One mutated file: 0 when it is rejected or exactly right. */
static int check_case(const char *path, char **got, const char *what)
{
    crpm_open_opts o = {.path = path, .job_name = "fuzz", .rank = 0, .nranks = 1,
                        .persistence = CRPM_PERSIST_MSYNC};
    crpm_container *c;
    if (crpm_container_open(&o, &c, NULL) != 0) {
        REQUIRE(strlen(crpm_last_error()) > 0, "error without a message (%s)", what);
        return 0;
    }
    int bad = 0;
    uint64_t e = crpm_container_epoch(c);
    if (e != K && e != K - 1) {
        fprintf(stderr, "FAIL (%s): opened with epoch %llu\n", what, (unsigned long long)e);
        bad = 1;
    } else if (same_epoch(c, e, got) == 0) {
        fprintf(stderr, "FAIL (%s): epoch %llu read back wrong data\n", what, (unsigned long long)e);
        bad = 1;
    } else {
        /* recovery through protected arrays: error or exact */
        char *dev[NREG] = {NULL};
        const uint64_t *sizes = size_at[e];
        for (int i = 0; i < NREG; i++) {
            if (!sizes[i])
                continue;
            if (!device) {
                crpm_container_protect(c, i + 1, got[i], sizes[i], CRPM_TC_BYTE, 1);
                continue;
            }
            dev[i] = mock_malloc(sizes[i]);
            crpm_array a = {i + 1, CRPM_TC_BYTE, 1, sizes[i], mock_dev(dev[i]), NULL,
                            i % 2 ? &mock_kind_copy : &mock_kind_diff};
            crpm_container_protect_array(c, &a);
        }
        int rrc = crpm_container_recover(c);
        for (int i = 0; device && i < NREG; i++) {
            if (dev[i])
                memcpy(got[i], dev[i], sizes[i]);
            mock_free(dev[i]);
        }
        if (rrc == 0)
            for (int i = 0; i < NREG; i++)
                if (memcmp(got[i], ref[e][i], sizes[i]) != 0) {
                    fprintf(stderr, "FAIL (%s): recover of epoch %llu gave wrong data\n", what,
                            (unsigned long long)e);
                    bad = 1;
                    break;
                }
        if (!bad && crpm_container_prev_available(c) && crpm_container_rollback(c) == 0 &&
            (crpm_container_epoch(c) != e - 1 || (e - 1 > 0 && same_epoch(c, e - 1, got) == 0))) {
            fprintf(stderr, "FAIL (%s): rollback to %llu gave wrong data\n", what, (unsigned long long)(e - 1));
            bad = 1;
        }
    }
    crpm_container_close(c);
    return bad;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: a case did not finish within 60 s (hang)\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(1);
}

/* A container whose committed copy of array 1 has one flipped byte at array
 * offset 8492 (segment 2): recovery, reading the region and
 * verification must all refuse it, naming the array and the chunk. */
static int make_flip(const char *out)
{
    build(out, 4096, 256);
    crpm_open_opts o = {.path = out, .persistence = CRPM_PERSIST_MSYNC};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open: %s", crpm_last_error());
    REQUIRE(crpm_container_verify(c, NULL) == 0, "pristine container fails verification: %s", crpm_last_error());
    crpm_region *r = NULL;
    for (int i = 0; i < c->nregions; i++)
        if (c->regions[i].id == 1) r = &c->regions[i];
    REQUIRE(r && r->nsegs == 5, "array 1 layout");
    const crpm_seg *sg = &r->segs[2];
    off_t off = (off_t)(crpm_seg_addr(c, sg->phys[sg->state - 1]) - c->media.base) + 300;
    crpm_container_close(c);
    check_flip(out, off, 0x10);

    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open: %s", crpm_last_error());
    char *got[NREG];
    for (int i = 0; i < NREG; i++) {
        got[i] = malloc(MAXSZ);
        if (size_at[K][i])
            crpm_container_protect(c, i + 1, got[i], size_at[K][i], CRPM_TC_BYTE, 1);
    }
    char want[64]; /* the chunk holding byte 8492 */
    snprintf(want, sizeof want, "array id 1, byte offset %llu",
             (unsigned long long)(8492 & ~(c->sb.crc_chunk - 1)));
    printf("expect: %s\n", want);
    int rc = crpm_container_recover(c);
    printf("recover: %s: %s\n", crpm_strerror(rc), crpm_last_error());
    REQUIRE(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), want), "recover must fail naming '%s'", want);
    rc = crpm_container_read_region(c, 0, got[0]);
    REQUIRE(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), want), "read_region must fail naming '%s'", want);
    REQUIRE(crpm_container_read_region(c, 1, got[1]) == 0 && memcmp(got[1], ref[K][1], size_at[K][1]) == 0,
          "an intact array reads back exactly");
    rc = crpm_container_verify(c, stdout);
    REQUIRE(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), want), "verify must fail naming '%s'", want);
    crpm_container_close(c);
    for (int i = 0; i < NREG; i++)
        free(got[i]);
    for (int k = 1; k <= K; k++)
        for (int r = 0; r < NREG; r++)
            free(ref[k][r]);
    printf("flipped array id 1, byte offset 8492 (file offset %lld): detected\n", (long long)off);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    uint64_t s = 7;
    for (int k = 1; k <= K; k++)
        epoch_data(&s, k);
    if (argc > 3 && strcmp(argv[2], "flip") == 0)
        return make_flip(argv[3]);
    int cases = argc > 2 ? atoi(argv[2]) : 2000;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 2024;
    device = argc > 4 && strcmp(argv[4], "device") == 0;
    char pristine[2][512], path[512];
    snprintf(pristine[0], sizeof pristine[0], "%s/fuzz-a-%d.crpm", dir, (int)getpid());
    snprintf(pristine[1], sizeof pristine[1], "%s/fuzz-b-%d.crpm", dir, (int)getpid());
    snprintf(path, sizeof path, "%s/fuzz-case-%d.crpm", dir, (int)getpid());
    build(pristine[0], 4096, 256); /* chunk = block */
    build(pristine[1], 1024, 64);  /* chunk (256) spans 4 blocks */
    size_t n[2];
    char *orig[2] = {read_all(pristine[0], &n[0]), read_all(pristine[1], &n[1])};
    uint64_t doff[2] = {data_offset_of(orig[0], n[0]), data_offset_of(orig[1], n[1])};
    char *got[NREG];
    for (int i = 0; i < NREG; i++)
        got[i] = malloc(MAXSZ);
    /* the pristine files themselves: epoch K, exact */
    for (int g = 0; g < 2; g++)
        REQUIRE(check_case(pristine[g], got, "pristine") == 0, "pristine container %d", g);
    signal(SIGALRM, on_alarm);
    int failures = 0, rejected = 0;
    for (int t = 0; t < cases; t++) {
        int g = t % 2;
        char *buf = malloc(n[g] + 3 * EXTEND_MAX);
        memcpy(buf, orig[g], n[g]);
        char what[512];
        size_t len = mutate(&seed, buf, n[g], doff[g], what, sizeof what);
        write_all(path, buf, len);
        free(buf);
        alarm(60); /* a case takes milliseconds; a loaded machine may stretch that far, a hang never ends */
        crpm_open_opts o = {.path = path, .persistence = CRPM_PERSIST_MSYNC};
        crpm_container *c;
        if (crpm_container_open(&o, &c, NULL) == 0) /* counted as accepted below unless rejected later */
            crpm_container_close(c);
        else
            rejected++;
        failures += check_case(path, got, what);
        alarm(0);
    }
    unlink(path);
    unlink(pristine[0]);
    unlink(pristine[1]);
    free(orig[0]);
    free(orig[1]);
    for (int i = 0; i < NREG; i++)
        free(got[i]);
    for (int k = 1; k <= K; k++)
        for (int r = 0; r < NREG; r++)
            free(ref[k][r]);
    printf("fuzz cases: %d (%d rejected at open)%s, failures: %d\n", cases, rejected,
           device ? ", recovered into mock device memory" : "", failures);
    return failures ? 1 : 0;
}

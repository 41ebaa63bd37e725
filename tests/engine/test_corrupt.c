/* Damaged and mismatched containers: every case gives its specific error and
 * a message, and random bit flips in the metadata never yield wrong data. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "format.h"

static char path[512], bad[512];
static char *data0, *data1;
#define N0 100000
#define N1 7000

static int open_path(const char *p, crpm_container **c, uint64_t seg, uint64_t blk, const char *job, int rank,
                     int nranks)
{
    crpm_open_opts o = {.path = p, .segment_size = seg, .block_size = blk, .job_name = job, .rank = rank,
                        .nranks = nranks, .persistence = CRPM_PERSIST_MSYNC};
    return crpm_container_open(&o, c, NULL);
}

static void copy_file(const char *from, const char *to, off_t trunc_to)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    REQUIRE(system(cmd) == 0, "cp");
    if (trunc_to >= 0)
        REQUIRE(truncate(to, trunc_to) == 0, "truncate");
}

static void flip(const char *p, off_t off, int bit)
{
    check_flip(p, off, 1u << bit);
}

static void expect(const char *what, int rc, int want)
{
    REQUIRE(rc == want, "%s: got %d (%s), want %d (%s); message: %s", what, rc, crpm_strerror(rc), want,
          crpm_strerror(want), crpm_last_error());
    REQUIRE(rc == 0 || strlen(crpm_last_error()) > 0, "%s: no message", what);
    printf("%-40s -> %s: %s\n", what, crpm_strerror(rc), rc ? crpm_last_error() : "");
}

static void expect_open(const char *what, int want)
{
    crpm_container *c = NULL;
    int rc = open_path(bad, &c, 0, 0, "job", 0, 1);
    expect(what, rc, want);
    if (c) crpm_container_close(c);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    snprintf(path, sizeof path, "%s/corrupt-%d.crpm", dir, (int)getpid());
    snprintf(bad, sizeof bad, "%s/corrupt-bad-%d.crpm", dir, (int)getpid());
    unlink(path);
    uint64_t s = 42;
    data0 = malloc(N0);
    data1 = malloc(N1);
    fill_random(&s, data0, N0);
    fill_random(&s, data1, N1);

    /* two epochs: 1 and 2 */
    crpm_container *c;
    crpm_open_opts o = {.path = path, .segment_size = 4096, .block_size = 256, .job_name = "job", .nranks = 1,
                        .create = 1, .persistence = CRPM_PERSIST_MSYNC};
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    expect("recover before any checkpoint", crpm_container_recover(c), CRPM_ERR_NOCKPT);
    REQUIRE(crpm_container_protect(c, 1, data0, N0, CRPM_TC_BYTE, 1) == 0, "protect");
    REQUIRE(crpm_container_protect(c, 2, data1, N1 / 4, CRPM_TC_INT, 4) == 0, "protect");
    REQUIRE(crpm_container_checkpoint(c, 10, NULL) == 0, "ckpt 1");
    data0[5] ^= 1;
    REQUIRE(crpm_container_checkpoint(c, 20, NULL) == 0, "ckpt 2");
    expect("protect with element size 0", crpm_container_protect(c, 3, data0, 1, CRPM_TC_BYTE, 0), CRPM_ERR_INVAL);
    expect("protect NULL with count", crpm_container_protect(c, 3, NULL, 5, CRPM_TC_BYTE, 1), CRPM_ERR_INVAL);
    crpm_container_close(c);

    /* mismatches at recovery */
    REQUIRE(open_path(path, &c, 0, 0, "job", 0, 1) == 0, "reopen: %s", crpm_last_error());
    REQUIRE(crpm_container_epoch(c) == 2 && crpm_container_user_id(c) == 20, "epoch/user id");
    char *tmp0 = malloc(N0), *tmp1 = malloc(N1);
    crpm_container_protect(c, 1, tmp0, N0, CRPM_TC_BYTE, 1);
    expect("recover with an array missing", crpm_container_recover(c), CRPM_ERR_MISMATCH);
    crpm_container_protect(c, 2, tmp1, N1 / 4 - 1, CRPM_TC_INT, 4);
    expect("recover with a wrong count", crpm_container_recover(c), CRPM_ERR_MISMATCH);
    crpm_container_protect(c, 2, tmp1, N1 / 4, CRPM_TC_FLOAT, 4);
    expect("recover with a wrong type", crpm_container_recover(c), CRPM_ERR_MISMATCH);
    crpm_container_protect(c, 2, tmp1, N1 / 4, CRPM_TC_INT, 4);
    crpm_container_protect(c, 9, tmp1, 1, CRPM_TC_INT, 4);
    expect("recover with an extra array", crpm_container_recover(c), CRPM_ERR_MISMATCH);
    crpm_container_unprotect(c, 9);
    expect("recover", crpm_container_recover(c), 0);
    REQUIRE(memcmp(tmp0, data0, N0) == 0 && memcmp(tmp1, data1, N1) == 0, "recovered data");
    crpm_container_close(c);

    /* identity and geometry */
    expect("wrong segment size", open_path(path, &c, 8192, 0, "job", 0, 1), CRPM_ERR_GEOMETRY);
    expect("wrong block size", open_path(path, &c, 0, 64, "job", 0, 1), CRPM_ERR_GEOMETRY);
    expect("other job", open_path(path, &c, 0, 0, "other", 0, 1), CRPM_ERR_IDENTITY);
    expect("other rank", open_path(path, &c, 0, 0, "job", 1, 1), CRPM_ERR_IDENTITY);
    expect("other rank count", open_path(path, &c, 0, 0, "job", 0, 4), CRPM_ERR_NRANKS);
    expect("missing file", open_path("/nonexistent/x.crpm", &c, 0, 0, "job", 0, 1), CRPM_ERR_IO);

    /* run identity: random at create, checked on open when given */
    uint8_t rid[CRPM_RUN_ID_LEN], other[CRPM_RUN_ID_LEN];
    CHECK(open_path(path, &c, 0, 0, "job", 0, 1) == 0, "open: %s", crpm_last_error());
    crpm_container_run_id(c, rid);
    crpm_container_close(c);
    memcpy(other, rid, sizeof other);
    other[15] ^= 1;
    crpm_open_opts ro = {.path = path, .job_name = "job", .nranks = 1, .persistence = CRPM_PERSIST_MSYNC,
                         .run_id = other};
    expect("another run of the job", crpm_container_open(&ro, &c, NULL), CRPM_ERR_IDENTITY);
    CHECK(strstr(crpm_last_error(), "another run of job 'job'"), "run id message: %s", crpm_last_error());
    ro.run_id = rid;
    expect("the same run", crpm_container_open(&ro, &c, NULL), 0);
    crpm_container_close(c);
    snprintf(bad, sizeof bad, "%s/corrupt-bad-%d.crpm", dir, (int)getpid());
    unlink(bad);
    crpm_open_opts co = {.path = bad, .job_name = "job", .nranks = 1, .create = 1, .persistence = CRPM_PERSIST_MSYNC};
    CHECK(crpm_container_open(&co, &c, NULL) == 0, "create: %s", crpm_last_error());
    crpm_container_run_id(c, other);
    crpm_container_close(c);
    CHECK(memcmp(rid, other, sizeof rid) != 0, "two creations drew the same random run id");
    unlink(bad);
    co.run_id = rid; /* the MPI layer passes the job's identity at create */
    CHECK(crpm_container_open(&co, &c, NULL) == 0, "create: %s", crpm_last_error());
    crpm_container_run_id(c, other);
    crpm_container_close(c);
    CHECK(memcmp(rid, other, sizeof rid) == 0, "run id given at create not stored");
    unlink(bad);

    /* damaged files */
    struct crpm_super sb;
    int fd = open(path, O_RDONLY);
    REQUIRE(pread(fd, &sb, sizeof sb, 0) == (ssize_t)sizeof sb, "read super");
    close(fd);
    struct stat st;
    stat(path, &st);
    /* one damaged byte of the magic or bit of the version is damage (a
     * restart repairs it from redundancy), not a file of another kind */
    copy_file(path, bad, -1); flip(bad, 0, 3);            expect_open("bit flip in magic", CRPM_ERR_CORRUPT);
    copy_file(path, bad, -1); flip(bad, 8, 1);            expect_open("bit flip in version", CRPM_ERR_CORRUPT);
    {   /* another format version whose superblock checks: that version, not damage */
        copy_file(path, bad, -1);
        struct crpm_super v4 = sb;
        v4.version = CRPM_FORMAT_VERSION + 1;
        v4.crc = 0;
        v4.crc = crpm_meta_crc(&v4, sizeof v4, 0);
        int vfd = open(bad, O_RDWR);
        CHECK(vfd >= 0 && pwrite(vfd, &v4, sizeof v4, 0) == (ssize_t)sizeof v4, "write a later version");
        close(vfd);
        expect_open("a later format version", CRPM_ERR_VERSION);
        copy_file(path, bad, -1);
        flip(bad, 0, 3);
        flip(bad, 1, 3);                                  expect_open("two bytes of the magic", CRPM_ERR_FORMAT);
    }
    {   /* a version-1 container (before data checksums) is refused, saying so;
         * its superblock checks as version 1, so it is not a damaged field */
        copy_file(path, bad, -1);
        struct crpm_super v1 = sb;
        v1.version = 1;
        v1.crc = 0;
        v1.crc = crpm_meta_crc(&v1, sizeof v1, 0);
        int vfd = open(bad, O_RDWR);
        CHECK(vfd >= 0 && pwrite(vfd, &v1, sizeof v1, 0) == (ssize_t)sizeof v1, "write version 1");
        close(vfd);
        expect_open("format version 1", CRPM_ERR_VERSION);
        CHECK(strstr(crpm_last_error(), "format version 1") && strstr(crpm_last_error(), "reads versions 2 to 3"),
              "version message: %s", crpm_last_error());
    }
    copy_file(path, bad, -1); flip(bad, 16, 0);           expect_open("bit flip in geometry", CRPM_ERR_CORRUPT);
    copy_file(path, bad, -1); flip(bad, 100, 5);          expect_open("bit flip in job name", CRPM_ERR_CORRUPT);
    copy_file(path, bad, -1); flip(bad, CRPM_COMMIT_OFF, 1); expect_open("bit flip in commit word", CRPM_ERR_CORRUPT);
    copy_file(path, bad, -1); flip(bad, CRPM_COMMIT_OFF + 7, 6); expect_open("bit flip in commit check", CRPM_ERR_CORRUPT);
    copy_file(path, bad, -1); flip(bad, (off_t)sb.slot_offset[0] + 20, 2); expect_open("bit flip in committed slot header", CRPM_ERR_CORRUPT);
    copy_file(path, bad, -1); flip(bad, (off_t)sb.slot_offset[0] + 80, 7); expect_open("bit flip in committed slot body", CRPM_ERR_CORRUPT);
    copy_file(path, bad, 100);                            expect_open("truncated to 100 bytes", CRPM_ERR_TRUNCATED);
    copy_file(path, bad, 0);                              expect_open("truncated to 0 bytes", CRPM_ERR_TRUNCATED);
    copy_file(path, bad, (off_t)sb.data_offset - 1);      expect_open("truncated metadata", CRPM_ERR_TRUNCATED);
    copy_file(path, bad, (off_t)sb.data_offset + 4096);   expect_open("truncated data", CRPM_ERR_TRUNCATED);
    {
        int f = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char junk[8192];
        fill_random(&s, junk, sizeof junk);
        REQUIRE(write(f, junk, sizeof junk) == (ssize_t)sizeof junk, "w");
        close(f);
        expect_open("foreign file (random bytes)", CRPM_ERR_FORMAT);
        f = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        REQUIRE(write(f, "hello\n", 6) == 6, "w");
        close(f);
        expect_open("foreign file (short text)", CRPM_ERR_FORMAT);
    }
    /* the previous epoch's slot damaged: current still fine, rollback refused */
    copy_file(path, bad, -1);
    flip(bad, (off_t)sb.slot_offset[1] + 70, 4);
    REQUIRE(open_path(bad, &c, 0, 0, "job", 0, 1) == 0, "open with damaged previous slot: %s", crpm_last_error());
    REQUIRE(!crpm_container_prev_available(c), "damaged previous epoch offered");
    expect("rollback onto a damaged epoch", crpm_container_rollback(c), CRPM_ERR_EPOCH);
    crpm_container_close(c);

    /* random single-bit flips anywhere in the metadata: error, or the right data */
    int errors = 0, fine = 0;
    uint64_t meta_end = sb.data_offset;
    for (int i = 0; i < 400; i++) {
        copy_file(path, bad, -1);
        off_t off = (off_t)rnd_below(&s, i % 2 ? 4096 : meta_end);
        if (i % 4 == 1) off = (off_t)sb.slot_offset[0] + (off_t)rnd_below(&s, 600);
        flip(bad, off, (int)rnd_below(&s, 8));
        if (open_path(bad, &c, 0, 0, "job", 0, 1) != 0) {
            errors++;
            continue;
        }
        memset(tmp0, 0, N0);
        memset(tmp1, 0, N1);
        crpm_container_protect(c, 1, tmp0, N0, CRPM_TC_BYTE, 1);
        crpm_container_protect(c, 2, tmp1, N1 / 4, CRPM_TC_INT, 4);
        int rc = crpm_container_recover(c);
        REQUIRE(rc != 0 || (crpm_container_epoch(c) == 2 && memcmp(tmp0, data0, N0) == 0 &&
                          memcmp(tmp1, data1, N1) == 0),
              "bit flip at offset %lld returned wrong data", (long long)off);
        fine += rc == 0;
        crpm_container_close(c);
    }
    printf("random metadata bit flips: %d detected, %d harmless (unused bytes or previous slot)\n", errors, fine);
    REQUIRE(errors > 50, "too few flips detected");

    /* inspection */
    FILE *f = tmpfile();
    expect("inspect good container", crpm_inspect_file(path, f), 0);
    copy_file(path, bad, -1); flip(bad, (off_t)sb.slot_offset[0] + 80, 7);
    expect("inspect damaged container", crpm_inspect_file(bad, f), CRPM_ERR_CORRUPT);
    fclose(f);
    unlink(bad);
    unlink(path);
    free(tmp0);
    free(tmp1);
    free(data0);
    free(data1);
    printf("all corruption cases detected\n");
    return 0;
}

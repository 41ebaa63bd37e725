/* MPI tests of the public API (run with 4 ranks): call order, configuration
 * errors, protect/checkpoint/recover round trips, collective agreement on
 * failures, restart decisions (epochs one apart, too far apart, different
 * checkpoint ids, missing/corrupt/foreign containers, rank-count changes),
 * snapshot intervals, finalize cleanup.  Container files are copied,
 * corrupted and deleted between runs to create the situations. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "crpm.h"

static int rank, nranks;
static char base[256];

static int all_true(int v)
{
    int r;
    MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return r;
}

static const char *cfg_path(const char *name)
{
    static char p[4][400];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s.ini", base, name);
    return p[k];
}

/* Rank 0 writes the file; everyone waits. */
static const char *write_cfg(const char *name, const char *fmt, ...)
{
    const char *p = cfg_path(name);
    if (rank == 0) {
        FILE *f = fopen(p, "w");
        va_list ap;
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return p;
}

static const char *job_cfg(const char *job, int keep, const char *extra)
{
    return write_cfg(job, "[basic]\nckpt_dir = %s/ckpt\njob_name = %s\nkeep_last_ckpt = %d\nverbosity = 0\n%s",
                     base, job, keep, extra ? extra : "");
}

static const char *container(const char *job, int r)
{
    static char p[2][400];
    static int k;
    k = (k + 1) % 2;
    snprintf(p[k], sizeof p[k], "%s/ckpt/%s/rank-%d.crpm", base, job, r);
    return p[k];
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp -p '%s' '%s'", from, to);
    CHECK(system(cmd) == 0, "cp %s %s", from, to);
}

/* ---- data protected in most tests ---------------------------------------- */
typedef struct particle {
    double x[3];
    int kind;
    char tag[4];
} particle;

static int counter;
static double *field;
static particle parts[5];
static crpm_type_t particle_t;

static int64_t field_len(void) { return 1000 + 337 * rank; } /* differs per rank */

static void fill(int seed)
{
    counter = seed;
    for (int64_t i = 0; i < field_len(); i++)
        field[i] = seed * 1000.0 + rank + (double)i / 7;
    for (int i = 0; i < 5; i++) {
        parts[i] = (particle){{seed, i, rank}, seed + i, "ab"};
        parts[i].tag[2] = (char)('a' + seed % 26);
    }
}

static int matches(int seed)
{
    if (counter != seed)
        return 0;
    for (int64_t i = 0; i < field_len(); i++)
        if (field[i] != seed * 1000.0 + rank + (double)i / 7)
            return 0;
    for (int i = 0; i < 5; i++)
        if (parts[i].x[0] != seed || parts[i].kind != seed + i || parts[i].tag[2] != (char)('a' + seed % 26))
            return 0;
    return 1;
}

static int protect_all(void)
{
    int rc = crpm_protect(0, &counter, 1, CRPM_INT);
    if (rc == 0)
        rc = crpm_protect(1, field, field_len(), CRPM_DOUBLE);
    if (rc == 0)
        rc = crpm_protect(7, parts, 5, particle_t);
    return rc;
}

static void scramble(void)
{
    counter = -1;
    memset(field, 0xee, sizeof(double) * (size_t)field_len());
    memset(parts, 0, sizeof parts);
}

/* init + protect + status check */
static int start(const char *cfg, int expect_status)
{
    int rc = crpm_init(cfg, MPI_COMM_WORLD);
    CHECK(rc == 0, "crpm_init(%s) = %d", cfg, rc);
    if (rc)
        return rc;
    CHECK(protect_all() == 0, "protect");
    int st = crpm_status();
    CHECK(st == expect_status, "status %d, expected %d", st, expect_status);
    return 0;
}

/* ---- tests ----------------------------------------------------------------- */
static void test_order(void)
{
    /* a status names the level the restart comes from: compare it with CRPM_Ln */
    CHECK(CRPM_STATUS_FRESH == 0 && CRPM_STATUS_L1 == CRPM_L1 && CRPM_STATUS_L2 == CRPM_L2 &&
          CRPM_STATUS_L3 == CRPM_L3 && CRPM_STATUS_L4 == CRPM_L4, "CRPM_STATUS_Ln must equal n");
    int x = 0;
    CHECK(crpm_protect(0, &x, 1, CRPM_INT) == CRPM_ERR_STATE, "protect before init");
    CHECK(crpm_status() == CRPM_ERR_STATE, "status before init");
    CHECK(crpm_recover() == CRPM_ERR_STATE, "recover before init");
    CHECK(crpm_checkpoint(1, CRPM_L1) == CRPM_ERR_STATE, "checkpoint before init");
    CHECK(crpm_snapshot() == CRPM_ERR_STATE, "snapshot before init");
    CHECK(crpm_finalize() == CRPM_ERR_STATE, "finalize before init");
    CHECK(crpm_get_stats(NULL, NULL) == CRPM_ERR_STATE, "stats before init");
    CHECK(strstr(crpm_last_error(), "crpm_init") != NULL, "message names crpm_init");

    crpm_type_t t;
    CHECK(crpm_init_type(NULL, 8) == CRPM_ERR_INVAL, "init_type NULL");
    CHECK(crpm_init_type(&t, 0) == CRPM_ERR_INVAL, "init_type size 0");
    CHECK(crpm_init_type(&t, 24) == 0 && t.size == 24 && t.code >= CRPM_TYPE_USER, "init_type 24");
    CHECK(CRPM_DOUBLE.size == sizeof(double) && CRPM_INT.code == CRPM_TC_INT && CRPM_LDOUBLE.size ==
          sizeof(long double) && CRPM_BYTE.size == 1, "predefined types");
    for (int c = CRPM_ERR_RANGE; c <= 0; c++)
        CHECK(crpm_strerror(c) && *crpm_strerror(c), "strerror(%d)", c);
}

/* Every rank must get CRPM_ERR_CONFIG naming the file and `what`. */
static void bad_config(const char *name, const char *what, const char *text)
{
    const char *p = write_cfg(name, "%s", text);
    int rc = crpm_init(p, MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_CONFIG, "%s: rc %d", name, rc);
    CHECK(strstr(crpm_last_error(), p) != NULL, "%s: message names the file", name);
    CHECK(strstr(crpm_last_error(), what) != NULL, "%s: message says '%s'", name, what);
    if (rc == 0)
        crpm_finalize();
}

static void test_config(void)
{
    char c[512];
    snprintf(c, sizeof c, "ckpt_dir = %s/ckpt\n", base);
    char t[2048];
    int rc = crpm_init(cfg_path("does-not-exist"), MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_CONFIG && strstr(crpm_last_error(), "cannot open"), "missing file: %d", rc);
    snprintf(t, sizeof t, "[basic]\n%sfoo = 1\n", c);
    bad_config("unknown-key", "line 3: unknown key 'foo'", t);
    snprintf(t, sizeof t, "; comment\n[basic]\n%sverbosity = 9\n", c);
    bad_config("bad-verbosity", "line 4: bad value '9' for verbosity", t);
    bad_config("no-ckpt-dir", "required key ckpt_dir", "[basic]\njob_name = x\n");
    snprintf(t, sizeof t, "[basic]\n%sthis is not ini\n", c);
    bad_config("syntax", "line 3: syntax error", t);
    snprintf(t, sizeof t, "[basic]\n%s[strange]\nx = 1\n", c);
    bad_config("section", "line 4: unknown section [strange]", t);
    snprintf(t, sizeof t, "%s[basic]\n", c);
    bad_config("outside", "line 1: key 'ckpt_dir' outside a section", t);
    snprintf(t, sizeof t, "[basic]\n%sckpt_dir = /x\n", c);
    bad_config("duplicate", "line 3: duplicate key 'ckpt_dir' (first set on line 2)", t);
    snprintf(t, sizeof t, "[basic]\n%s[advanced]\nsegment_size = 3000\n", c);
    bad_config("segment", "line 4: bad value '3000' for segment_size", t);
    snprintf(t, sizeof t, "[basic]\n%s[advanced]\npersistence = fast\n", c);
    bad_config("persistence", "line 4: bad value 'fast'", t);
    snprintf(t, sizeof t, "[basic]\n%sjob_name = a/b\n", c);
    bad_config("jobname", "line 3: bad value 'a/b' for job_name", t);
    snprintf(t, sizeof t, "[basic]\n%sckpt_interval_l4 = 2\n", c);
    bad_config("l4-no-glbl", "line 3: ckpt_interval_l4 needs glbl_dir", t);
    char longv[400];
    memset(longv, 'x', 300);
    longv[300] = '\0';
    snprintf(t, sizeof t, "[basic]\n%sjob_name = %s\n", c, longv);
    bad_config("long-line", "line 3: line longer than", t);

    /* the environment overrides the file and supplies a missing ckpt_dir */
    const char *p = write_cfg("env", "[basic]\njob_name = fromfile\nverbosity = 0\n");
    char envdir[400];
    snprintf(envdir, sizeof envdir, "%s/envdir", base);
    setenv("CRPM_CKPT_DIR", envdir, 1);
    setenv("CRPM_JOB_NAME", "fromenv", 1);
    rc = crpm_init(p, MPI_COMM_WORLD);
    CHECK(rc == 0, "init with env: %d", rc);
    char f[512];
    snprintf(f, sizeof f, "%s/fromenv/rank-%d.crpm", envdir, rank);
    CHECK(exists(f), "%s exists", f);
    CHECK(crpm_finalize() == 0, "finalize");
    CHECK(!exists(f), "%s removed by finalize", f);
    setenv("CRPM_JOB_NAME", "bad name", 1);
    rc = crpm_init(p, MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_CONFIG && strstr(crpm_last_error(), "CRPM_JOB_NAME"), "bad env job name: %d", rc);
    unsetenv("CRPM_CKPT_DIR");
    unsetenv("CRPM_JOB_NAME");

    /* A bad test hook or benchmark baseline is a configuration error in a
     * build with the hooks (CTest says which: CRPM_TEST_HOOKS); a library
     * built without them never reads these variables. */
    const char *hv = getenv("CRPM_TEST_HOOKS");
    int hooks = !hv || strcmp(hv, "OFF") != 0;
    const char *hook_vars[][2] = {{"CRPM_TEST_KILL", "1:during:3"}, {"CRPM_BENCH_BASELINE", "l2_full_copy,fast"}};
    for (int i = 0; i < 2; i++) {
        setenv(hook_vars[i][0], hook_vars[i][1], 1);
        rc = crpm_init(job_cfg("hookcfg", 0, NULL), MPI_COMM_WORLD);
        if (hooks)
            CHECK(rc == CRPM_ERR_CONFIG && strstr(crpm_last_error(), hook_vars[i][0]), "bad %s: %d", hook_vars[i][0],
                  rc);
        else
            CHECK(rc == CRPM_SUCCESS, "a build without CRPM_TEST_HOOKS read %s: %d", hook_vars[i][0], rc);
        if (rc == CRPM_SUCCESS)
            crpm_finalize();
        unsetenv(hook_vars[i][0]);
    }
}

static void test_roundtrip(void)
{
    const char *cfg = job_cfg("round", 1, NULL);
    if (start(cfg, CRPM_STATUS_FRESH))
        return;
    int x = 0;
    CHECK(crpm_init(cfg, MPI_COMM_WORLD) == CRPM_ERR_STATE, "second init");
    CHECK(crpm_recover() == CRPM_ERR_NOCKPT, "recover on a fresh start");
    CHECK(crpm_protect(3, &x, -1, CRPM_INT) == CRPM_ERR_INVAL, "negative count");
    CHECK(crpm_protect(3, NULL, 5, CRPM_INT) == CRPM_ERR_INVAL, "NULL pointer");
    crpm_type_t bad = {50, 0, 4};
    CHECK(crpm_protect(3, &x, 1, bad) == CRPM_ERR_INVAL, "unknown type code");
    bad = (crpm_type_t){CRPM_TC_INT, 0, 0};
    CHECK(crpm_protect(3, &x, 1, bad) == CRPM_ERR_INVAL, "type size 0");
    CHECK(crpm_checkpoint(1, 5) == CRPM_ERR_INVAL && strstr(crpm_last_error(), "level 5 is not"), "level 5");
    CHECK(crpm_checkpoint(1, 0) == CRPM_ERR_INVAL, "level 0");
    CHECK(crpm_checkpoint(1, CRPM_L2) == CRPM_ERR_CONFIG && strstr(crpm_last_error(), "two nodes"),
          "level 2 on one node: %s", crpm_last_error());
    CHECK(crpm_checkpoint(1, CRPM_L3) == CRPM_ERR_CONFIG && strstr(crpm_last_error(), "two nodes"),
          "level 3 on one node: %s", crpm_last_error());
    int rc = crpm_checkpoint(1, CRPM_L4);
    CHECK(rc == CRPM_ERR_NOTSUP || rc == CRPM_ERR_CONFIG, "L4 without glbl_dir: %d", rc);

    fill(11);
    CHECK(crpm_checkpoint(11, CRPM_L1) == 0, "checkpoint 11");
    fill(12);
    CHECK(crpm_checkpoint(12, CRPM_L1) == 0, "checkpoint 12");
    crpm_stats_t last, total;
    CHECK(crpm_get_stats(&last, &total) == 0, "stats");
    uint64_t bytes = sizeof(int) + sizeof(double) * (uint64_t)field_len() + sizeof parts;
    CHECK(total.checkpoints == 2 && last.checkpoints == 1, "checkpoint counts %llu",
          (unsigned long long)total.checkpoints);
    CHECK(last.protected_bytes == bytes, "protected bytes %llu, expected %llu",
          (unsigned long long)last.protected_bytes, (unsigned long long)bytes);
    CHECK(total.bytes_written >= last.bytes_written && last.bytes_written > 0, "bytes written");
    CHECK(total.seconds >= last.seconds && last.seconds > 0, "seconds");
    fill(13); /* not checkpointed */
    CHECK(crpm_finalize() == 0, "finalize");
    CHECK(exists(container("round", rank)), "keep_last_ckpt keeps the container");
    CHECK(crpm_protect(0, &x, 1, CRPM_INT) == CRPM_ERR_STATE, "protect after finalize");

    scramble();
    if (start(cfg, CRPM_STATUS_L1))
        return;
    CHECK(crpm_recover() == 0, "recover");
    CHECK(matches(12), "recovered data is checkpoint 12");
    CHECK(crpm_snapshot() == CRPM_SNAP_NONE, "snapshot after an explicit recover neither recovers nor checkpoints");
    scramble();
    CHECK(crpm_recover() == 0 && matches(12), "second recover");
    CHECK(crpm_finalize() == 0, "finalize");

    /* one rank protects another size: it fails, the others are told */
    if (start(cfg, CRPM_STATUS_L1))
        return;
    if (rank == 2)
        crpm_protect(1, field, field_len() - 1, CRPM_DOUBLE);
    rc = crpm_recover();
    if (rank == 2)
        CHECK(rc == CRPM_ERR_MISMATCH, "rank 2 mismatch: %d", rc);
    else
        CHECK(rc == CRPM_ERR_REMOTE && strstr(crpm_last_error(), "rank 2"), "remote mismatch: %d", rc);
    CHECK(crpm_finalize() == 0, "finalize");

    /* ranks disagree on the checkpoint id: error everywhere, and the ranks
     * that committed roll back, so checkpoint 12 is still the one on disk */
    if (start(cfg, CRPM_STATUS_L1))
        return;
    fill(14);
    rc = crpm_checkpoint(rank == 1 ? 15 : 14, CRPM_L1);
    CHECK(rc == CRPM_ERR_INVAL && strstr(crpm_last_error(), "different ids"), "different ids: %d", rc);
    CHECK(crpm_finalize() == 0, "finalize");
    scramble();
    if (start(cfg, CRPM_STATUS_L1))
        return;
    CHECK(crpm_recover() == 0 && matches(12), "checkpoint 12 survives a failed checkpoint");
    CHECK(crpm_finalize() == 0, "finalize");

    /* keep_last_ckpt = 0 removes everything */
    cfg = job_cfg("round", 0, NULL);
    if (start(cfg, CRPM_STATUS_L1))
        return;
    CHECK(crpm_finalize() == 0, "finalize");
    char dir[400];
    snprintf(dir, sizeof dir, "%s/ckpt/round", base);
    CHECK(all_true(!exists(container("round", rank))), "containers removed");
    CHECK(!exists(dir), "job directory removed");
}

/* Runs checkpoints with the given ids on a fresh job, keeping the files. */
static void run_job(const char *job, int n, const int *ids, const char *save_after_first_as)
{
    const char *cfg = job_cfg(job, 1, NULL);
    if (start(cfg, CRPM_STATUS_FRESH))
        return;
    for (int i = 0; i < n; i++) {
        fill(ids[i]);
        CHECK(crpm_checkpoint(ids[i], CRPM_L1) == 0, "checkpoint %d", ids[i]);
        if (i == 0 && save_after_first_as && rank == 1) {
            /* the file is mapped; a copy of it is what a crash would leave */
            copy_file(container(job, 1), save_after_first_as);
        }
    }
    CHECK(crpm_finalize() == 0, "finalize");
}

/* Through the library when it can restart the job, else by hand. */
static void remove_job(const char *job)
{
    const char *cfg = job_cfg(job, 0, NULL);
    if (crpm_init(cfg, MPI_COMM_WORLD) == 0)
        crpm_finalize();
    if (rank == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s/ckpt/%s'", base, job);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_epochs(void)
{
    char e1[400], e2[400];
    snprintf(e1, sizeof e1, "%s/rank1-epoch1", base);
    snprintf(e2, sizeof e2, "%s/rank1-epoch2", base);

    /* rank 1 two epochs behind: cannot be reconciled */
    int ids[3] = {21, 22, 23};
    run_job("epochs", 2, ids, e1);            /* epochs 1, 2 */
    if (rank == 1)
        copy_file(container("epochs", 1), e2); /* epoch 2 */
    MPI_Barrier(MPI_COMM_WORLD);
    const char *cfg = job_cfg("epochs", 1, NULL);
    if (start(cfg, CRPM_STATUS_L1))
        return;
    fill(23);
    CHECK(crpm_checkpoint(23, CRPM_L1) == 0, "checkpoint 23"); /* epoch 3 */
    CHECK(crpm_finalize() == 0, "finalize");
    if (rank == 1)
        copy_file(e1, container("epochs", 1));
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = crpm_init(cfg, MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_EPOCH && strstr(crpm_last_error(), "epochs 1 to 3"), "two epochs apart: %d", rc);
    if (rc == 0)
        crpm_finalize();

    /* rank 1 one epoch behind: everyone recovers epoch 2 (checkpoint 22) */
    if (rank == 1)
        copy_file(e2, container("epochs", 1));
    MPI_Barrier(MPI_COMM_WORLD);
    scramble();
    if (start(cfg, CRPM_STATUS_L1))
        return;
    CHECK(crpm_recover() == 0 && matches(22), "one epoch behind: recover checkpoint 22");
    CHECK(crpm_finalize() == 0, "finalize");
    /* the rollback was durable */
    scramble();
    if (start(cfg, CRPM_STATUS_L1))
        return;
    CHECK(crpm_recover() == 0 && matches(22), "rollback is durable");
    /* and the next checkpoint reuses the epoch */
    fill(24);
    CHECK(crpm_checkpoint(24, CRPM_L1) == 0, "checkpoint after rollback");
    CHECK(crpm_finalize() == 0, "finalize");
    scramble();
    if (start(cfg, CRPM_STATUS_L1))
        return;
    CHECK(crpm_recover() == 0 && matches(24), "checkpoint 24 after rollback");
    CHECK(crpm_finalize() == 0, "finalize");
    remove_job("epochs");

    /* same epoch, different checkpoint ids: containers of two runs mixed,
     * told apart by their run identity */
    int a[1] = {31}, b[1] = {37};
    run_job("mixed", 1, a, e1);
    remove_job("mixed");
    run_job("mixed", 1, b, NULL);
    if (rank == 1)
        copy_file(e1, container("mixed", 1));
    MPI_Barrier(MPI_COMM_WORLD);
    rc = crpm_init(job_cfg("mixed", 1, NULL), MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_IDENTITY && strstr(crpm_last_error(), "different runs"), "mixed ids: %d", rc);
    if (rc == 0)
        crpm_finalize();
    unlink(e1);
    unlink(e2);
    if (rank == 1)
        unlink(container("mixed", 1));
    MPI_Barrier(MPI_COMM_WORLD);
    remove_job("mixed");
}

static void test_damage(void)
{
    int ids[2] = {41, 42};
    const char *cfg = job_cfg("damage", 1, NULL);

    /* a missing container after a checkpoint: error on all ranks */
    run_job("damage", 2, ids, NULL);
    char saved[400];
    snprintf(saved, sizeof saved, "%s/rank3-saved", base);
    if (rank == 3)
        copy_file(container("damage", 3), saved), unlink(container("damage", 3));
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = crpm_init(cfg, MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_MISSING && strstr(crpm_last_error(), "rank(s) 3 is missing"), "missing: %d", rc);
    if (rc == 0)
        crpm_finalize();
    CHECK(all_true(exists(container("damage", 0))), "nothing removed after the error");

    /* a corrupt superblock, nothing to repair it from: every rank says so, naming it */
    if (rank == 3)
        rename(saved, container("damage", 3));
    if (rank == 1) {
        int fd = open(container("damage", 1), O_WRONLY);
        CHECK(fd >= 0 && pwrite(fd, "Z", 1, 90) == 1, "corrupting");
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rc = crpm_init(cfg, MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), "rank(s) 1 ") && strstr(crpm_last_error(), "corrupt"),
          "corrupt superblock on rank 1: %d", rc);
    if (rank == 1)
        CHECK(strstr(crpm_last_error(), "superblock"), "rank 1 names what is damaged: %s", crpm_last_error());
    if (rc == 0)
        crpm_finalize();
    if (rank == 1)
        unlink(container("damage", 1));
    MPI_Barrier(MPI_COMM_WORLD);
    remove_job("damage");

    /* containers that belong to another job */
    run_job("jobA", 1, ids, NULL);
    char cmd[1024];
    if (rank == 0) {
        snprintf(cmd, sizeof cmd, "cp -rp %s/ckpt/jobA %s/ckpt/jobB", base, base);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rc = crpm_init(job_cfg("jobB", 1, NULL), MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_IDENTITY && strstr(crpm_last_error(), "belongs to job 'jobA'"), "foreign job: %d", rc);
    if (rc == 0)
        crpm_finalize();
    if (rank == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s/ckpt/jobB", base);
        CHECK(system(cmd) == 0, "%s", cmd);
    }

    /* another segment size than the containers were made with */
    rc = crpm_init(job_cfg("jobA", 1, "[advanced]\nsegment_size = 64K\n"), MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_GEOMETRY, "geometry: %d", rc);
    if (rc == 0)
        crpm_finalize();

    /* a smaller communicator than the one that wrote the containers */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2, rank, &half);
    if (rank < 2) {
        rc = crpm_init(job_cfg("jobA", 1, NULL), half);
        CHECK(rc == CRPM_ERR_NRANKS, "fewer ranks: %d", rc);
        if (rc == 0)
            crpm_finalize();
    } else {
        job_cfg("jobA", 1, NULL); /* matches the barrier in write_cfg */
    }
    remove_job("jobA");

    /* and a larger one: the half's containers exist for ranks 0 and 1 only */
    if (rank < 2) {
        rc = crpm_init(job_cfg("grow", 1, NULL), half);
        CHECK(rc == 0, "init on half: %d", rc);
        protect_all();
        fill(51);
        CHECK(crpm_checkpoint(51, CRPM_L1) == 0, "checkpoint on half");
        CHECK(crpm_finalize() == 0, "finalize on half");
    } else {
        job_cfg("grow", 1, NULL);
    }
    MPI_Comm_free(&half);
    rc = crpm_init(job_cfg("grow", 1, NULL), MPI_COMM_WORLD);
    CHECK(rc == CRPM_ERR_NRANKS && strstr(crpm_last_error(), "another number of ranks"), "more ranks: %d", rc);
    if (rc == 0)
        crpm_finalize();
    if (rank == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s/ckpt/grow", base);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_fresh_cases(void)
{
    /* containers without a committed checkpoint hold nothing: a missing one
     * (a crash while they were being created) is a fresh start */
    const char *cfg = job_cfg("empty", 1, NULL);
    if (start(cfg, CRPM_STATUS_FRESH))
        return;
    CHECK(crpm_finalize() == 0, "finalize");
    if (rank == 2)
        unlink(container("empty", 2));
    MPI_Barrier(MPI_COMM_WORLD);
    if (start(cfg, CRPM_STATUS_FRESH))
        return;
    CHECK(exists(container("empty", rank)), "container re-created");
    /* a first checkpoint only some ranks committed is no checkpoint */
    CHECK(crpm_finalize() == 0, "finalize");
    remove_job("empty");

    /* a finalize that was removing the checkpoints and died: fresh start */
    int ids[1] = {61};
    run_job("final", 1, ids, NULL);
    if (rank == 0) {
        char m[400];
        snprintf(m, sizeof m, "%s/ckpt/final/.crpm-finalized", base);
        close(open(m, O_CREAT | O_WRONLY, 0644));
        unlink(container("final", 3));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (start(job_cfg("final", 1, NULL), CRPM_STATUS_FRESH))
        return;
    CHECK(crpm_finalize() == 0, "finalize");
    remove_job("final");
}

static void test_snapshot(void)
{
    const char *cfg = job_cfg("snap", 1, "ckpt_interval = 3\n");
    if (start(cfg, CRPM_STATUS_FRESH))
        return;
    int expect[7] = {0, 0, 2, 0, 0, 2, 0};
    for (int i = 0; i < 7; i++) {
        fill(70 + i);
        int s = crpm_snapshot();
        CHECK(s == expect[i], "snapshot call %d returned %d, expected %d", i + 1, s, expect[i]);
    }
    crpm_stats_t tot;
    crpm_get_stats(NULL, &tot);
    CHECK(tot.checkpoints == 2, "two snapshot checkpoints");
    CHECK(crpm_finalize() == 0, "finalize");

    /* restart: the first snapshot call recovers the call-6 state (id 2) */
    scramble();
    if (start(cfg, CRPM_STATUS_L1))
        return;
    CHECK(crpm_snapshot() == CRPM_SNAP_RECOVERED && matches(75), "snapshot recovers");
    int s1 = crpm_snapshot(), s2 = crpm_snapshot(), s3 = crpm_snapshot();
    CHECK(s1 == 0 && s2 == 0 && s3 == 2, "interval restarts after recovery: %d %d %d", s1, s2, s3);
    CHECK(crpm_finalize() == 0, "finalize");
    remove_job("snap");

    /* time interval: ranks' clocks differ, all must checkpoint together */
    cfg = job_cfg("snaptime", 0, "ckpt_interval_s = 0.2\n");
    if (start(cfg, CRPM_STATUS_FRESH))
        return;
    int taken = 0;
    double t0 = MPI_Wtime();
    for (int i = 0; i < 40; i++) {
        usleep(rank == 3 ? 20000 : 10000);
        int s = crpm_snapshot(), mn, mx;
        MPI_Allreduce(&s, &mn, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&s, &mx, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        CHECK(mn == mx && s >= 0, "snapshot %d: ranks returned %d..%d", i, mn, mx);
        taken += s == CRPM_SNAP_CHECKPOINTED;
    }
    /* rank 3 makes every call last 20 ms or more: 0.8 s in all */
    double el = MPI_Wtime() - t0;
    CHECK(taken >= 3 && taken <= (int)(el / 0.2) + 1, "%d time-based checkpoints in %.2f s", taken, el);
    CHECK(crpm_finalize() == 0, "finalize");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_set_rank(rank);
    check_set_note(crpm_last_error);
    if (nranks != 4) {
        if (rank == 0)
            fprintf(stderr, "api_test needs 4 ranks\n");
        MPI_Finalize();
        return 1;
    }
    if (rank == 0) {
        snprintf(base, sizeof base, "%s/crpm-api-test-XXXXXX", argc > 1 ? argv[1] : "/tmp");
        if (!mkdtemp(base))
            base[0] = '\0';
    }
    MPI_Bcast(base, sizeof base, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (!base[0]) {
        if (rank == 0)
            perror("mkdtemp");
        MPI_Finalize();
        return 1;
    }
    field = malloc(sizeof(double) * (size_t)field_len());
    crpm_init_type(&particle_t, sizeof(particle));

    struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {{"order", test_order},       {"config", test_config}, {"roundtrip", test_roundtrip},
                 {"epochs", test_epochs},     {"damage", test_damage}, {"fresh_cases", test_fresh_cases},
                 {"snapshot", test_snapshot}};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = check_failures();
        double t0 = MPI_Wtime();
        tests[i].fn();
        int bad = check_failures() - before, allbad;
        MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%-12s %s (%.2f s)\n", tests[i].name, allbad ? "FAILED" : "ok", MPI_Wtime() - t0);
    }
    int tot[2] = {check_count(), check_failures()}, sum[2];
    MPI_Reduce(tot, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("api_test: %d checks, %d failed\n", sum[0], sum[1]);
        if (!sum[1]) {
            char cmd[400];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
            if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", base);
        }
    }
    free(field);
    int fail_all;
    int failures = check_failures();
    MPI_Allreduce(&failures, &fail_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return fail_all ? 1 : 0;
}

/* FTI semantics on libcrpm, checked in one MPI job that initialises FTI
 * twice: status before and after recovery, FTI_Snapshot's recovery on the
 * first call and its per-level timers, level mapping, string ids, types,
 * stored sizes, calls before FTI_Init and calls with no counterpart.
 * Usage: semantics CONFIG (ckpt_dir/glbl_dir relative, run in a scratch
 * directory; CRPM_FTI_MINUTE=0.1 is set here). */
#define _POSIX_C_SOURCE 200809L
#include <fti.h>
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures, rank;
#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "rank %d: %s:%d: CHECK failed: %s\n", rank, __FILE__, __LINE__, #c); \
            failures++;                                                            \
        }                                                                          \
    } while (0)

/* level-4 files of the job */
static int l4_files(void)
{
    DIR *d = opendir("Global/fti");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strncmp(e->d_name, "l4-", 3) == 0;
    if (d)
        closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *cfg = argv[1];
    setenv("CRPM_FTI_MINUTE", "0.1", 1);

    /* before FTI_Init */
    CHECK(FTI_Status() == FTI_NSCS);
    CHECK(FTI_Checkpoint(1, 1) == FTI_NSCS);
    CHECK(FTI_Recover() == FTI_NREC);
    CHECK(FTI_Snapshot() == FTI_NSCS);

    /* first run: fresh */
    CHECK(FTI_Init(cfg, MPI_COMM_WORLD) == FTI_SCES);
    int size = 0;
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    int wsize;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    CHECK(size == wsize && FTI_COMM_WORLD != MPI_COMM_WORLD);
    CHECK(FTI_Status() == 0);
    CHECK(FTI_Recover() == FTI_NREC);
    CHECK(FTI_RecoverVarInit() == FTI_NREC);
    CHECK(FTI_GetStoredSize(0) == 0);

    int a = FTI_setIDFromString("alpha"), b = FTI_setIDFromString("beta");
    CHECK(a >= 0 && b >= 0 && a != b);
    CHECK(FTI_setIDFromString("alpha") == a && FTI_getIDFromString("beta") == b);
    CHECK(FTI_getIDFromString("gamma") == FTI_NSCS);

    fti_id_t t = -1, bad = FTI_InitCompositeType("pair", 16, NULL);
    CHECK(FTI_InitType(&t, 24) == FTI_SCES && t >= 0);
    CHECK(bad >= 0);
    CHECK(FTI_AddScalarField(bad, "x", FTI_DBLE, 0) == FTI_SCES);
    CHECK(FTI_AddScalarField(bad, "y", FTI_DBLE, 12) == FTI_NSCS); /* does not fit */
    CHECK(FTI_AddScalarField(t, "x", FTI_DBLE, 0) == FTI_NSCS);    /* not composite */
    CHECK(FTI_Protect(9, &size, 1, 12345) == FTI_NSCS);             /* no such type */

    double data[100];
    int step = 0;
    for (int i = 0; i < 100; i++)
        data[i] = rank + i * 0.5;
    CHECK(FTI_Protect(a, &step, 1, FTI_INTG) == FTI_SCES);
    CHECK(FTI_Protect(b, data, 100, FTI_DBLE) == FTI_SCES);
    int64_t dims[2] = {10, 10};
    CHECK(FTI_DefineDataset(b, 2, dims, "data", NULL) == FTI_SCES);
    CHECK(FTI_DefineDataset(77, 2, dims, "nothing", NULL) == FTI_NSCS); /* not protected */
    CHECK(FTI_Checkpoint(1, 9) == FTI_NSCS);
    CHECK(FTI_Checkpoint(1, 2) == FTI_DONE);
    CHECK(FTI_Checkpoint(2, 3) == FTI_DONE);
    CHECK(FTI_Checkpoint(3, 6) == FTI_DONE);
    CHECK(FTI_Checkpoint(4, 4) == FTI_DONE && l4_files() >= 1);
    step = 5;
    CHECK(FTI_Checkpoint(5, 1) == FTI_DONE);
    CHECK(FTI_Status() == 0);
    CHECK(FTI_GetStoredSize(b) == (int64_t)sizeof data);

    /* incremental checkpoint 6: each variable as it was when added, while the
     * program goes on changing the others; the second run recovers it */
    CHECK(FTI_AddVarICP(a) == FTI_NSCS);              /* none open */
    CHECK(FTI_InitICP(6, 1, false) == FTI_SCES);      /* not activated: no-ops */
    CHECK(FTI_AddVarICP(b) == FTI_SCES && FTI_FinalizeICP() == FTI_SCES);
    CHECK(FTI_InitICP(6, 9, true) == FTI_NSCS);       /* no such level */
    CHECK(FTI_InitICP(6, 1, true) == FTI_SCES);
    CHECK(FTI_InitICP(7, 1, true) == FTI_NSCS);       /* one at a time */
    CHECK(FTI_AddVarICP(a) == FTI_SCES);              /* step = 5 saved */
    CHECK(FTI_AddVarICP(a) == FTI_NSCS);              /* once */
    step = 7;
    data[99] = -2;                                    /* before b is added: saved */
    CHECK(FTI_AddVarICP(b) == FTI_SCES);
    data[99] = -3;                                    /* after: not saved */
    CHECK(FTI_FinalizeICP() == FTI_SCES);
    CHECK(step == 7 && data[99] == -3);               /* the program's memory, untouched */
    CHECK(FTI_Status() == 0 && FTI_FinalizeICP() == FTI_NSCS);

    /* calls without a counterpart; staging is off in this file */
    char dir[64];
    CHECK(FTI_BitFlip(b) == FTI_NSCS);
    CHECK(FTI_GetStageDir(dir, sizeof dir) == FTI_NSCS);
    CHECK(FTI_GetStageStatus(1) == FTI_SI_NINI);
    CHECK(FTI_SendFile("a", "b") == FTI_NSCS);
    CHECK(FTI_GetDatasetSpan(1, 1) == NULL); /* no such global dataset */
    CHECK(FTI_Finalize() == FTI_SCES);

    /* second run in the same job: a checkpoint is there (keep_last_ckpt = 1) */
    CHECK(FTI_Init(cfg, MPI_COMM_WORLD) == FTI_SCES);
    CHECK(FTI_Status() == 1);
    a = FTI_setIDFromString("alpha");
    b = FTI_setIDFromString("beta");
    step = -1;
    for (int i = 0; i < 100; i++)
        data[i] = -1;
    CHECK(FTI_Protect(a, &step, 1, FTI_INTG) == FTI_SCES);
    CHECK(FTI_Protect(b, data, 100, FTI_DBLE) == FTI_SCES);
    CHECK(FTI_GetStoredSize(b) == (int64_t)sizeof data);
    CHECK(FTI_Status() == 1); /* still: nothing recovered yet */
    CHECK(FTI_Snapshot() == FTI_SCES); /* recovers */
    CHECK(step == 5 && data[99] == -2); /* checkpoint 6: incremental, each variable as added */
    CHECK(FTI_Status() == 0);
    CHECK(FTI_Realloc(b, data) == data); /* no recovery due: unchanged */
    data[0] = 1234;
    CHECK(FTI_Snapshot() == FTI_SCES && data[0] == 1234); /* no second recovery */

    /* timers: L1 every 0.1 s, L2 every 0.2 s, L4 every 0.4 s */
    double t0 = MPI_Wtime();
    int done = 0, l4_early = 0, rc, l4_base = l4_files(); /* the first run's, kept (keep_l4_ckpt) */
    for (;;) {
        /* every rank makes the same number of FTI_Snapshot calls (each is
         * collective): rank clocks differ, so the ranks agree when to stop */
        int go = MPI_Wtime() - t0 < 1.05;
        MPI_Allreduce(MPI_IN_PLACE, &go, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!go)
            break;
        rc = FTI_Snapshot();
        CHECK(rc == FTI_SCES || rc == FTI_DONE);
        done += rc == FTI_DONE;
        if (rc == FTI_DONE && MPI_Wtime() - t0 < 0.3 && l4_files() > l4_base)
            l4_early++;
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    /* One checkpoint per 0.1-s tick at most; a loaded machine may skip ticks. */
    double elapsed = MPI_Wtime() - t0;
    if (rank == 0)
        printf("snapshot checkpoints in %.2f s: %d\n", elapsed, done);
    CHECK(done >= 2 && done <= (int)(elapsed / 0.1) + 1);
    CHECK(l4_early == 0);
    CHECK(FTI_Finalize() == FTI_SCES);
    CHECK(FTI_Status() == FTI_NSCS);

    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s: %d failed checks\n", all ? "FAILED" : "passed", all);
    MPI_Finalize();
    return all != 0;
}

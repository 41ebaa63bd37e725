/* Test program for asynchronous levels (async = 1, docs/async.md), driven by
 * async_tests.py.  Each rank protects an int (the step) and N doubles whose
 * values are a function of (step, rank, index), so a recovered state is
 * checked exactly.
 *
 *   async_app --crpm cfg.ini --mode M [--level L] [--n N]
 *
 * modes (every rank prints its own lines; "FAIL" on any mismatch):
 *   write    checkpoint 1 at level L, then at once overwrite the arrays
 *            (step 999) before the background level can have read them;
 *            crpm_test right after the call ("test-after-call done D"),
 *            crpm_wait, crpm_test again ("test-after-wait done D"), finalize
 *   finalize checkpoint 1 at level L and crpm_finalize right away
 *   verify   restart: crpm_recover; the step and every value must be those
 *            of checkpoint --step (default 1; 0: whichever was recovered)
 *            ("verify ok status S step K")
 *   overlap  checkpoint 1 at level L (then crpm_wait with --settle 1),
 *            checkpoint 2 at level --level2 (default 1), checkpoint 3 at
 *            level 1, each right after the one before, the arrays rewritten
 *            in between; crpm_test after checkpoints 2 and 3 ("overlap K
 *            done D": whether a drain was still in flight when the call
 *            returned), crpm_wait, finalize
 *   fail     checkpoint 1 at level L; rank 0 then breaks glbl_dir under the
 *            running drain (argument --break PATH: the directory becomes a
 *            file); crpm_test until done ("fail test rc R"), then
 *            crpm_checkpoint(2, L1) ("fail next rc R"), crpm_checkpoint(3,
 *            L1) ("fail after rc R"), crpm_finalize ("finalize rc R"); with
 *            --overlap 1 first crpm_checkpoint(2, L1) right away ("fail
 *            overlap rc R"), the later ids one higher
 * MPI is initialised with MPI_THREAD_MULTIPLE, or with MPI_Init when
 * CRPM_ASYNC_APP_SINGLE is set (the synchronous fallback). */
#define _DEFAULT_SOURCE /* usleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "crpm.h"

static int rank;

static double value(int step, long i) { return step * 1000.0 + rank * 1.0e6 + (double)i * 0.5; }

static void fill(double *u, long n, int step)
{
    for (long i = 0; i < n; i++)
        u[i] = value(step, i);
}

static int die(const char *what, int rc)
{
    printf("rank %d FAIL %s: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* rm -rf of a directory tree of plain files, then a file in its place */
static void break_dir(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && echo broken > '%s'", path, path);
    if (system(cmd) != 0)
        printf("rank %d: could not break %s\n", rank, path);
}

int main(int argc, char **argv)
{
    int provided;
    if (getenv("CRPM_ASYNC_APP_SINGLE")) /* the fallback: no MPI_THREAD_MULTIPLE */
        MPI_Init(&argc, &argv);
    else
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *cfg = NULL, *mode = "write", *brk = NULL;
    int level = CRPM_L2, level2 = CRPM_L1, settle = 0, want = 1, overlap = 0;
    long n = 100000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--crpm"))
            cfg = argv[i + 1];
        else if (!strcmp(argv[i], "--mode"))
            mode = argv[i + 1];
        else if (!strcmp(argv[i], "--level"))
            level = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--n"))
            n = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--break"))
            brk = argv[i + 1];
        else if (!strcmp(argv[i], "--level2"))
            level2 = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--settle"))
            settle = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--step"))
            want = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--overlap"))
            overlap = atoi(argv[i + 1]);
    }
    double *u = malloc(sizeof *u * (size_t)n);
    int step = 0, rc;
    if (!u || !cfg)
        return 2;
    if ((rc = crpm_init(cfg, MPI_COMM_WORLD)) != 0)
        return die("crpm_init", rc);
    if ((rc = crpm_protect(0, &step, 1, CRPM_INT)) != 0 || (rc = crpm_protect(1, u, n, CRPM_DOUBLE)) != 0)
        return die("crpm_protect", rc);

    if (!strcmp(mode, "verify")) {
        int st = crpm_status();
        if ((rc = crpm_recover()) != 0)
            return die("crpm_recover", rc);
        long bad = 0;
        if (!want) /* any checkpoint: the one recovered, whole */
            want = step;
        for (long i = 0; i < n; i++)
            bad += u[i] != value(want, i);
        if (step != want || bad)
            printf("rank %d FAIL verify: step %d, %ld of %ld values are not checkpoint %d's\n", rank, step, bad, n,
                   want);
        else
            printf("rank %d verify ok status %d step %d\n", rank, st, step);
    } else if (!strcmp(mode, "write") || !strcmp(mode, "finalize")) {
        step = 1;
        fill(u, n, step);
        if ((rc = crpm_checkpoint(1, level)) != 0)
            return die("crpm_checkpoint", rc);
        /* the application goes on at once: nothing of this may reach the checkpoint */
        step = 999;
        fill(u, n, step);
        if (!strcmp(mode, "write")) {
            int done = -1;
            if ((rc = crpm_test(&done)) != 0)
                return die("crpm_test", rc);
            printf("rank %d test-after-call done %d\n", rank, done);
            if ((rc = crpm_wait()) != 0)
                return die("crpm_wait", rc);
            if ((rc = crpm_test(&done)) != 0)
                return die("crpm_test", rc);
            printf("rank %d test-after-wait done %d\n", rank, done);
        }
    } else if (!strcmp(mode, "overlap")) {
        for (step = 1; step <= 3; step++) {
            fill(u, n, step);
            if ((rc = crpm_checkpoint(step, step == 1 ? level : step == 2 ? level2 : CRPM_L1)) != 0)
                return die("crpm_checkpoint", rc);
            int done = -1;
            if (step == 1 && settle && (rc = crpm_wait()) != 0)
                return die("crpm_wait", rc);
            if (step > 1 && (rc = crpm_test(&done)) != 0)
                return die("crpm_test", rc);
            if (step > 1)
                printf("rank %d overlap %d done %d\n", rank, step, done);
        }
        step = 999;
        fill(u, n, step);
        if ((rc = crpm_wait()) != 0)
            return die("crpm_wait", rc);
    } else if (!strcmp(mode, "fail")) {
        step = 1;
        fill(u, n, step);
        if ((rc = crpm_checkpoint(1, level)) != 0)
            return die("crpm_checkpoint", rc);
        if (rank == 0 && brk)
            break_dir(brk);
        int done = 0, next = 2;
        if (overlap) /* a checkpoint beside the failing drain: its failure is not known yet */
            printf("rank %d fail overlap rc %d\n", rank, crpm_checkpoint(next++, CRPM_L1));
        rc = 0;
        for (int k = 0; k < 20000 && !done; k++) { /* at most 200 s: the test's timeout ends it first */
            rc = crpm_test(&done);
            if (!done)
                usleep(10000);
        }
        printf("rank %d fail test rc %d done %d\n", rank, rc, done);
        printf("rank %d fail next rc %d\n", rank, crpm_checkpoint(next, CRPM_L1));
        printf("rank %d fail after rc %d\n", rank, crpm_checkpoint(next + 1, CRPM_L1));
    }
    fflush(stdout);
    rc = crpm_finalize();
    printf("rank %d finalize rc %d\n", rank, rc);
    free(u);
    MPI_Finalize();
    return rc ? 1 : 0;
}

/* An MPI program whose state lives in (mock) GPU memory, for the device
 * scenarios (device_mpi.py): the public API and the FTI layer on device and
 * managed arrays, run with CRPM_TEST_DEVICE=mock so that libcrpm's GPU kinds
 * run on the mock device (tests/common/mock_gpu.h).
 *
 *   dev_app (--crpm CFG | --fti CFG) [--n N] [--iters I] [--every K]
 *           [--levels 1,2,3,4] [--mode auto|diff|fingerprint|full] [--recover-var]
 *   dev_app --crpm CFG --errors   what protecting host memory as device
 *                                 memory says (after crpm_init)
 *
 * Array 1: N doubles of device memory, protected with crpm_protect (auto:
 * detected) or crpm_protect_device (a mode), or FTI_Protect with --fti;
 * array 2: N / 4 doubles of managed memory; array 0: the iteration (host).
 * Each iteration rewrites a window of N / 16 elements of array 1 (a heat
 * stencil over the window, written through the host view as a kernel would
 * write device memory) and one element of array 2.  Every K iterations a
 * checkpoint at the next level of the list.  A restart recovers with
 * crpm_recover, or array by array with crpm_recover_var (--recover-var).
 * Rank 0 prints
 * "dev_app: status S", "dev_app: restarted from iteration I" and
 * "result <hex> iterations I" (a digest of every rank's arrays).  Errors:
 * "dev_app rank R: <call> failed: <strerror>: <last error>", exit 1. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fti.h>
#include <mpi.h>

#include "crpm.h"
#include "mock_gpu.h"
#include "mpi_app.h"

static int rank, nranks, use_fti;

static void fail(int rc, const char *what)
{
    fprintf(stderr, "dev_app rank %d: %s failed: %s: %s\n", rank, what, rc ? crpm_strerror(rc) : "FTI_NSCS",
            crpm_last_error());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void check(int rc, const char *what)
{
    if (rc < 0)
        fail(rc, what);
}

static void fti_check(int rc, const char *what)
{
    if (rc != FTI_SCES && rc != FTI_DONE)
        fail(0, what); /* FTI_NSCS: the cause is in crpm_last_error */
}

/* crpm_protect_device on host memory: a clear error, whatever the build. */
static int errors_only(void)
{
    static double host[16];
    int rc = crpm_protect_device(1, host, 16, CRPM_DOUBLE, CRPM_DEVICE_DIFF);
    printf("dev_app rank %d: crpm_protect_device of host memory: %d %s: %s\n", rank, rc, crpm_strerror(rc),
           crpm_last_error());
    rc = crpm_protect_device(1, host, 16, CRPM_DOUBLE, 9);
    printf("dev_app rank %d: unknown mode: %d %s: %s\n", rank, rc, crpm_strerror(rc), crpm_last_error());
    rc = crpm_protect(1, host, 16, CRPM_DOUBLE);
    printf("dev_app rank %d: crpm_protect of host memory: %d\n", rank, rc);
    return 0;
}

static int mode_of(const char *s)
{
    return !strcmp(s, "diff") ? CRPM_DEVICE_DIFF : !strcmp(s, "fingerprint") ? CRPM_DEVICE_FINGERPRINT
           : !strcmp(s, "full")                 ? CRPM_DEVICE_FULL
                                                : -1;
}

static void protect_all(int *iter, void *dev, long n, double *man, int mode)
{
    if (use_fti) {
        fti_check(FTI_Protect(0, iter, 1, FTI_INTG), "FTI_Protect");
        fti_check(FTI_Protect(1, dev, n, FTI_DBLE), "FTI_Protect");
        fti_check(FTI_Protect(2, man, n / 4, FTI_DBLE), "FTI_Protect");
        return;
    }
    check(crpm_protect(0, iter, 1, CRPM_INT), "crpm_protect");
    if (mode > 0)
        check(crpm_protect_device(1, dev, n, CRPM_DOUBLE, mode), "crpm_protect_device");
    else
        check(crpm_protect(1, dev, n, CRPM_DOUBLE), "crpm_protect");
    check(crpm_protect(2, man, n / 4, CRPM_DOUBLE), "crpm_protect");
}

/* One iteration: the window's stencil, one managed element. */
static void step(double *a, long n, double *man, int iter)
{
    long w = n / 16 > 2 ? n / 16 : 2, w0 = ((long)iter * w) % n;
    double prev = a[(w0 + n - 1) % n];
    for (long k = 0; k < w; k++) {
        long j = (w0 + k) % n;
        double cur = a[j], next = a[(j + 1) % n];
        a[j] = 0.25 * prev + 0.5 * cur + 0.25 * next + 1e-3 * (double)(rank + 1);
        prev = cur;
    }
    man[(iter * 7L) % (n / 4)] += (double)iter;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long n = 1 << 16, iters = 24, every = 3;
    int levels[16] = {1}, nlevels = 1, mode = 0, errors = 0, by_var = 0;
    const char *cfg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--crpm") || !strcmp(argv[i], "--fti")) {
            use_fti = argv[i][2] == 'f';
            cfg = v;
        } else if (!strcmp(argv[i], "--n")) {
            n = atol(v);
        } else if (!strcmp(argv[i], "--iters")) {
            iters = atol(v);
        } else if (!strcmp(argv[i], "--every")) {
            every = atol(v);
        } else if (!strcmp(argv[i], "--mode")) {
            mode = strcmp(v, "auto") ? mode_of(v) : 0;
        } else if (!strcmp(argv[i], "--levels")) {
            nlevels = 0;
            for (const char *p = v; *p && nlevels < 16; p += *p == ',')
                levels[nlevels++] = (int)strtol(p, (char **)&p, 10);
        } else if (!strcmp(argv[i], "--errors") || !strcmp(argv[i], "--recover-var")) {
            errors |= argv[i][2] == 'e';
            by_var |= argv[i][2] == 'r';
            i--;
        } else {
            mode = -1;
        }
        i++;
    }
    if (!cfg || n < 64 || every < 1 || mode < 0 || nlevels < 1) {
        if (rank == 0)
            fprintf(stderr, "dev_app: bad arguments (see the header of dev_app.c)\n");
        MPI_Finalize();
        return 2;
    }
    double *a = (double *)mock_gpu_malloc((size_t)n * sizeof *a); /* the host view of device memory */
    double *man = (double *)mock_gpu_managed((size_t)(n / 4) * sizeof *man);
    for (long j = 0; j < n; j++)
        a[j] = (double)(rank * n + j) * 1e-3;
    for (long j = 0; j < n / 4; j++)
        man[j] = (double)j;
    int iter = 0, st;
    if (use_fti) {
        if (FTI_Init(cfg, MPI_COMM_WORLD) != FTI_SCES)
            fail(0, "FTI_Init");
    } else {
        check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init");
    }
    if (errors) {
        errors_only();
        check(crpm_finalize(), "crpm_finalize");
        MPI_Finalize();
        return 0;
    }
    protect_all(&iter, mock_gpu_dev(a), n, man, mode);
    st = use_fti ? FTI_Status() : crpm_status();
    check(st, "status");
    if (!app_status_agreed("dev_app", st)) {
        MPI_Finalize();
        return 1;
    }
    if (st > 0) {
        if (use_fti)
            fti_check(FTI_Recover(), "FTI_Recover");
        else if (by_var)
            for (int id = 0; id <= 2; id++)
                check(crpm_recover_var(id), "crpm_recover_var");
        else
            check(crpm_recover(), "crpm_recover");
        if (rank == 0)
            printf("dev_app: restarted from iteration %d\n", iter);
        fflush(stdout);
    }
    long nckpt = iter / every;
    while (iter < iters) {
        step(a, n, man, iter);
        iter++;
        if (iter % every == 0) {
            int l = levels[nckpt++ % nlevels];
            if (use_fti)
                fti_check(FTI_Checkpoint(iter, l), "FTI_Checkpoint");
            else
                check(crpm_checkpoint(iter, l), "crpm_checkpoint");
        }
    }
    uint64_t h = app_fnv1a(APP_FNV_SEED, a, (size_t)n * sizeof *a), all = APP_FNV_SEED;
    h = app_fnv1a(h, man, (size_t)(n / 4) * sizeof *man);
    uint64_t *hs = rank == 0 ? malloc((size_t)nranks * sizeof *hs) : NULL;
    MPI_Gather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < nranks; r++)
            all = app_fnv1a(all, &hs[r], sizeof hs[r]);
        printf("result %016" PRIx64 " iterations %d\n", all, iter);
        fflush(stdout);
    }
    free(hs);
    if (use_fti)
        fti_check(FTI_Finalize(), "FTI_Finalize");
    else
        check(crpm_finalize(), "crpm_finalize");
    MPI_Finalize();
    return 0;
}

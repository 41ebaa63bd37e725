/* A live job for the tools tests (test_live_tools.py).
 *
 *   live_writer write CONTAINER SECONDS [STOPFILE]   checkpoints epoch after
 *       epoch, each with pattern(k) in every array (k = checkpoint id = the
 *       iteration), for SECONDS or until STOPFILE exists; prints "READY" after
 *       the first commit, "DONE <k>" at the end
 *   live_writer check FILE.h5 ID          an export of that container: every
 *       array must be pattern(k) for one k (the exported checkpoint ID) */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "engine.h"

#define N1 (300 * 1000) /* doubles: 2.4 MB over 37 segments of 64 KiB */
#define N2 (50 * 1000)  /* int32 */

static double p1(int64_t k, int64_t i) { return (double)k * 1e6 + (double)i; }
static int32_t p2(int64_t k, int64_t i) { return (int32_t)((k * 7919 + i * 31) % 1000003); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int writer(const char *path, double seconds, const char *stop)
{
    crpm_open_opts o = {.path = path, .segment_size = 64 << 10, .block_size = 256, .job_name = "live",
                        .rank = 0, .nranks = 1, .persistence = CRPM_PERSIST_MSYNC, .create = 1};
    crpm_container *c;
    int rc = crpm_container_open(&o, &c, NULL);
    if (rc) {
        fprintf(stderr, "open: %s\n", crpm_last_error());
        return 1;
    }
    int64_t k = 0;
    double *a1 = malloc(N1 * sizeof *a1);
    int32_t *a2 = malloc(N2 * sizeof *a2);
    if (!a1 || !a2 || crpm_container_protect(c, 0, &k, 1, CRPM_TC_LLONG, 8) ||
        crpm_container_protect(c, 1, a1, N1, CRPM_TC_DOUBLE, 8) ||
        crpm_container_protect(c, 2, a2, N2, CRPM_TC_INT32, 4)) {
        fprintf(stderr, "protect: %s\n", crpm_last_error());
        return 1;
    }
    double t0 = now();
    struct timespec pause = {0, 2000000};
    for (k = 1; k == 1 || (now() - t0 < seconds && !(stop && access(stop, F_OK) == 0)); k++) {
        for (int64_t i = 0; i < N1; i++)
            a1[i] = p1(k, i);
        for (int64_t i = 0; i < N2; i++)
            a2[i] = p2(k, i);
        if ((rc = crpm_container_checkpoint(c, (uint64_t)k, NULL)) != 0) {
            fprintf(stderr, "checkpoint %lld: %s\n", (long long)k, crpm_last_error());
            return 1;
        }
        if (k == 1) {
            printf("READY\n");
            fflush(stdout);
        }
        nanosleep(&pause, NULL);
    }
    printf("DONE %lld\n", (long long)(k - 1));
    crpm_container_close(c);
    free(a1);
    free(a2);
    return 0;
}

static int read_ds(hid_t f, const char *name, hid_t type, void *buf, hssize_t want)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return -1;
    hid_t s = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(s);
    int rc = n == want && H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0 ? 0 : -1;
    H5Sclose(s);
    H5Dclose(d);
    return rc;
}

static int check(const char *path, int64_t id)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int64_t k = -1;
    double *a1 = malloc(N1 * sizeof *a1);
    int32_t *a2 = malloc(N2 * sizeof *a2);
    if (f < 0 || !a1 || !a2 || read_ds(f, "/rank_0/id_0", H5T_NATIVE_INT64, &k, 1) ||
        read_ds(f, "/rank_0/id_1", H5T_NATIVE_DOUBLE, a1, N1) ||
        read_ds(f, "/rank_0/id_2", H5T_NATIVE_INT32, a2, N2)) {
        fprintf(stderr, "%s: cannot read the exported arrays\n", path);
        return 1;
    }
    H5Fclose(f);
    int64_t bad1 = 0, bad2 = 0, first = -1;
    for (int64_t i = 0; i < N1; i++)
        if (a1[i] != p1(id, i) && bad1++ == 0)
            first = i;
    for (int64_t i = 0; i < N2; i++)
        bad2 += a2[i] != p2(id, i);
    if (k != id || bad1 || bad2) {
        fprintf(stderr, "MIXED: checkpoint id %lld holds counter %lld, %lld of %d doubles and %lld of %d ints "
                "of another epoch (first at %lld: %.0f = epoch %.0f)\n", (long long)id, (long long)k,
                (long long)bad1, N1, (long long)bad2, N2, (long long)first, first >= 0 ? a1[first] : 0,
                first >= 0 ? (a1[first] - (double)first) / 1e6 : 0);
        return 1;
    }
    free(a1);
    free(a2);
    return 0;
}

int main(int argc, char **argv)
{
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "write"))
        return writer(argv[2], atof(argv[3]), argc == 5 ? argv[4] : NULL);
    if (argc == 4 && !strcmp(argv[1], "check"))
        return check(argv[2], atoll(argv[3]));
    fprintf(stderr, "usage: live_writer write CONTAINER SECONDS [STOPFILE] | check FILE.h5 ID\n");
    return 2;
}

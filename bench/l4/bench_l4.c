/* Level-4 write bandwidth versus a plain parallel-HDF5 write of the same data.
 *
 *   mpirun -np N bench_l4 [--sizes MB,MB,...] [--regions R] [--reps N]
 *                         [--dir DIR] [--out DIR]
 *
 * Per size (MB per rank, split into R double arrays) and repetition, both
 * writers run back to back, the order alternating between repetitions so
 * neither always runs on a warm or cold page cache:
 *   l4     crpm_l4_write(): region exchange, crc32 of every array, same
 *          layout with attributes, MPI_File_sync, temp name + rename, prune;
 *   plain  what an application would write by hand: the same groups and
 *          contiguous datasets, independent raw writes, no checksums, no
 *          sync, no rename.
 * Each time is from a barrier to a barrier.  The crc32 rate of the data is
 * measured too, since the checksum is the main extra work.  Prints medians and
 * the ratio l4/plain, writes <out>/l4.csv (every repetition) and
 * <out>/l4.json (medians). */
#include "crpm.h"
#include "level4.h"

#include <hdf5.h>
#include <zlib.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SIZES 8

static int rank, nranks;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return 0;
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

/* Same layout as level 4 without its guarantees; returns 0 or -1. */
static int plain_write(const char *path, int nreg, double *const *arr, size_t count)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    int rc = 0;
    if (fapl < 0 || H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) < 0 ||
        H5Pset_coll_metadata_write(fapl, 1) < 0 || H5Pset_all_coll_metadata_ops(fapl, 1) < 0)
        return -1;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return -1;
    hsize_t dims[1] = { count };
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t *mine = calloc((size_t)nreg, sizeof *mine);
    for (int r = 0; r < nranks && mine; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank_%d", r);
        hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        for (int i = 0; i < nreg; i++) {
            snprintf(name, sizeof name, "id_%d", i);
            hid_t d = H5Dcreate2(g, name, H5T_NATIVE_DOUBLE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            if (d < 0)
                rc = -1;
            if (r == rank)
                mine[i] = d;
            else if (d >= 0)
                H5Dclose(d);
        }
        H5Gclose(g);
    }
    for (int i = 0; mine && i < nreg; i++) {
        if (mine[i] >= 0 && H5Dwrite(mine[i], H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, arr[i]) < 0)
            rc = -1;
        if (mine[i] >= 0)
            H5Dclose(mine[i]);
    }
    free(mine);
    H5Pclose(dcpl);
    H5Sclose(sp);
    if (H5Fclose(f) < 0)
        rc = -1;
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *dir = "/dev/shm", *out = "bench/results";
    size_t sizes_mb[MAX_SIZES] = { 4, 32, 128 };
    int nsizes = 3, nreg = 4, reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--regions") && i + 1 < argc)
            nreg = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *t = strtok(argv[++i], ","); t && nsizes < MAX_SIZES; t = strtok(NULL, ","))
                sizes_mb[nsizes++] = strtoul(t, NULL, 10);
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: %s [--sizes MB,MB,...] [--regions R] [--reps N] [--dir DIR] [--out DIR]\n",
                        argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    int bad_args = reps < 1 || nreg < 1 || nsizes < 1;
    for (int s = 0; s < nsizes; s++)
        bad_args |= sizes_mb[s] == 0;
    if (bad_args) {
        if (rank == 0)
            fprintf(stderr, "bench_l4: sizes, regions and reps must be positive\n");
        MPI_Finalize();
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    char job[64], l4dir[4200], plain[4200], csv_path[4200], json_path[4200];
    snprintf(job, sizeof job, "bench-l4-%d", (int)getpid());
    MPI_Bcast(job, (int)sizeof job, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(l4dir, sizeof l4dir, "%s/%s", dir, job);
    snprintf(plain, sizeof plain, "%s/%s-plain.h5", dir, job);
    snprintf(csv_path, sizeof csv_path, "%s/l4.csv", out);
    snprintf(json_path, sizeof json_path, "%s/l4.json", out);
    FILE *csv = NULL, *js = NULL;
    int open_ok = 1;
    if (rank == 0) {
        mkdir(out, 0777);
        csv = fopen(csv_path, "w");
        js = fopen(json_path, "w");
        open_ok = csv && js;
        if (!open_ok)
            fprintf(stderr, "bench_l4: cannot write %s or %s: %s\n", csv_path, json_path, strerror(errno));
    }
    MPI_Bcast(&open_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!open_ok)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) {
        fprintf(csv, "ranks,mb_per_rank,regions,rep,writer,seconds,gib_per_s\n");
        fprintf(js, "{\n  \"benchmark\": \"level-4 write vs plain parallel HDF5\",\n  \"ranks\": %d,\n"
                    "  \"regions_per_rank\": %d,\n  \"reps\": %d,\n  \"dir\": \"%s\",\n  \"results\": [\n",
                nranks, nreg, reps, dir);
        printf("level-4 vs plain HDF5 write: %d ranks, %d arrays per rank, %d reps, dir %s\n", nranks, nreg, reps,
               dir);
        printf("%8s %12s %12s %12s %12s %8s %12s\n", "MB/rank", "l4 s", "plain s", "l4 GiB/s", "plain GiB/s",
               "l4/plain", "crc GiB/s");
    }

    int failed = 0;
    for (int s = 0; s < nsizes && !failed; s++) {
        size_t count = sizes_mb[s] * ((size_t)1 << 20) / sizeof(double) / (size_t)nreg;
        double total_gib = (double)count * sizeof(double) * nreg * nranks / (double)(1 << 30);
        double **arr = calloc((size_t)nreg, sizeof *arr);
        crpm_array *reg = calloc((size_t)nreg, sizeof *reg);
        for (int i = 0; arr && reg && i < nreg; i++) {
            arr[i] = malloc(count * sizeof(double));
            if (!arr[i])
                break;
            for (size_t k = 0; k < count; k++)
                arr[i][k] = (double)k * 0.5 + rank + i;
            reg[i] = (crpm_array){ i, CRPM_TC_DOUBLE, sizeof(double), count, arr[i], NULL, NULL };
        }
        int have = arr && reg && arr[nreg - 1];
        int all_have = 0;
        MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        if (!all_have) {
            if (rank == 0)
                fprintf(stderr, "bench_l4: out of memory for %zu MB per rank\n", sizes_mb[s]);
            failed = 1;
        }
        double *t_l4 = calloc((size_t)reps, sizeof(double)), *t_plain = calloc((size_t)reps, sizeof(double));
        double *t_crc = calloc((size_t)reps, sizeof(double));
        for (int r = 0; r < reps && !failed; r++) {
            for (int k = 0; k < 2 && !failed; k++) {
                int l4_turn = (r + k) % 2 == 0;
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                int rc = l4_turn ? crpm_l4_write(MPI_COMM_WORLD, dir, job, r, (uint64_t)r + 1, nreg, reg, 1)
                                 : plain_write(plain, nreg, arr, count);
                MPI_Barrier(MPI_COMM_WORLD);
                double dt = MPI_Wtime() - t0;
                if (rc != 0) {
                    fprintf(stderr, "bench_l4 rank %d: %s write failed: %s\n", rank, l4_turn ? "l4" : "plain",
                            l4_turn ? crpm_last_error() : "HDF5 error");
                    failed = 1;
                }
                (l4_turn ? t_l4 : t_plain)[r] = dt;
                if (rank == 0)
                    fprintf(csv, "%d,%zu,%d,%d,%s,%.6f,%.4f\n", nranks, sizes_mb[s], nreg, r, l4_turn ? "l4" : "plain",
                            dt, total_gib / dt);
            }
            /* The checksum's share: this rank's crc32 over its arrays. */
            double t0 = MPI_Wtime();
            uLong c = crc32_z(0L, Z_NULL, 0);
            for (int i = 0; i < nreg; i++)
                c = crc32_z(c, (const Bytef *)arr[i], count * sizeof(double));
            t_crc[r] = MPI_Wtime() - t0;
            if (c == 0x12345678u && rank == nranks) /* keeps the loop from being optimized away */
                puts("");
        }
        if (!failed && rank == 0) {
            double ml4 = median(t_l4, reps), mpl = median(t_plain, reps), mcrc = median(t_crc, reps);
            double rank_gib = total_gib / nranks;
            printf("%8zu %12.4f %12.4f %12.3f %12.3f %8.3f %12.3f\n", sizes_mb[s], ml4, mpl, total_gib / ml4,
                   total_gib / mpl, (total_gib / ml4) / (total_gib / mpl), rank_gib / mcrc);
            fprintf(js, "    {\"mb_per_rank\": %zu, \"l4_median_s\": %.6f, \"plain_median_s\": %.6f, "
                        "\"l4_gib_per_s\": %.4f, \"plain_gib_per_s\": %.4f, \"l4_over_plain\": %.4f, "
                        "\"crc32_gib_per_s_per_rank\": %.4f}%s\n",
                    sizes_mb[s], ml4, mpl, total_gib / ml4, total_gib / mpl, mpl / ml4, rank_gib / mcrc,
                    s + 1 < nsizes ? "," : "");
        }
        for (int i = 0; arr && i < nreg; i++)
            free(arr[i]);
        free(arr);
        free(reg);
        free(t_l4);
        free(t_plain);
        free(t_crc);
    }
    if (rank == 0) {
        char f[4300];
        snprintf(f, sizeof f, "%s/l4-%d.h5", l4dir, reps - 1);
        unlink(f);
        rmdir(l4dir);
        unlink(plain);
        fprintf(js, "  ]\n}\n");
        fclose(csv);
        fclose(js);
        if (!failed)
            printf("results: %s %s\n", csv_path, json_path);
    }
    MPI_Finalize();
    return failed;
}

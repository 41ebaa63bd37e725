/* The redistribution rate of a restart on another number of ranks, beside
 * reading the same boxes straight from the level-4 file.
 *
 *   mpirun -np P bench_reshape [--mib S] [--reps R] [--old N] [--dir DIR] [--out DIR]
 *
 * An "old" run on the first N ranks (default P/2, at least 1) holds a
 * global NY x 1024 grid of doubles in row blocks and takes one level-4
 * checkpoint (its level-1 containers and one HDF5 file); NY is chosen so
 * that each of the P ranks of the "new" run holds S MiB (default 64) of it in
 * a 2-D block.  Then, every repetition, side by side:
 *   l1     crpm_init on P ranks (a reshaped restart: the old containers
 *          read and checked at init), crpm_recover timed: each old
 *          container read by one rank, its CRCs checked, the boxes moved
 *          over MPI into the new blocks;
 *   h5     each rank opens the level-4 file and reads its new block with one
 *          hyperslab H5Dread (no checksums): the plain way to read the same
 *          bytes from the global file system;
 *   l4     crpm_init with the containers moved away (a reshaped restart from
 *          the level-4 file), crpm_recover timed: old boxes read by pieces
 *          with their CRC-32s, moved over MPI.
 * Each time is from a barrier to a barrier; the rate is the new block's
 * bytes per rank over that time.  Every recovery is checked element by
 * element.  Prints the medians and the ratios to h5, writes <out>/reshape.json
 * and <out>/reshape.md. */
#include <errno.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bench_util.h"
#include "crpm.h"

#define NX 1024
#define MAX_REPS 64

static int rank, nranks;

static double val(long gi) { return (double)(gi % 1000003) * 0.5 + 1.0; }

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_reshape rank %d: %s: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void block(long len, int n, int k, long *first, long *count)
{
    *count = len / n + (k < len % n);
    *first = k * (len / n) + (k < len % n ? k : len % n);
}

static char cfg[9000], dir[3000];

/* The 1-minute load average: figures from a shared machine need it beside them. */
static double load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* The new run's 2-D block. */
static long r0, rows, c0, cols;

static void new_block(long ny)
{
    int pd[2] = {0, 0};
    MPI_Dims_create(nranks, 2, pd);
    block(ny, pd[0], rank / pd[1], &r0, &rows);
    block(NX, pd[1], rank % pd[1], &c0, &cols);
}

/* One reshaped recovery on all ranks: init, protect the new block, recover
 * (timed), check, finalize (the old files stay: keep_last_ckpt = 1). */
static double recover_new(long ny, double *u, int *iter, double *t_init)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    int rc = crpm_init_text(cfg, "bench", MPI_COMM_WORLD);
    if (rc != 0)
        die("crpm_init", rc);
    if (crpm_status() != CRPM_STATUS_RESHAPED)
        die("crpm_status is not CRPM_STATUS_RESHAPED", CRPM_ERR_STATE);
    int64_t dims[2] = {ny, NX}, off[2] = {r0, c0}, cnt[2] = {rows, cols};
    if ((rc = crpm_define_global(0, 2, dims, CRPM_DOUBLE, "field")) != 0 ||
        (rc = crpm_protect_replicated(0, iter, 1, CRPM_INT)) != 0 ||
        (rc = crpm_protect(1, u, rows * cols, CRPM_DOUBLE)) != 0 || (rc = crpm_add_subset(0, 1, off, cnt)) != 0)
        die("protecting the new block", rc);
    memset(u, 0, sizeof *u * (size_t)(rows * cols));
    MPI_Barrier(MPI_COMM_WORLD);
    double t1 = now();
    if ((rc = crpm_recover()) != 0)
        die("crpm_recover", rc);
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = now();
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < cols; j++)
            if (u[i * cols + j] != val((r0 + i) * NX + c0 + j))
                die("a recovered element is wrong", CRPM_ERR_CORRUPT);
    if ((rc = crpm_finalize()) != 0)
        die("crpm_finalize", rc);
    *t_init = t1 - t0;
    return t2 - t1;
}

/* The same block straight from the level-4 file. */
static double read_h5(const char *path, double *u)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl), ds = f >= 0 ? H5Dopen2(f, "field", H5P_DEFAULT) : -1;
    hsize_t off[2] = {(hsize_t)r0, (hsize_t)c0}, cnt[2] = {(hsize_t)rows, (hsize_t)cols}, n = rows * cols;
    hid_t fs = ds >= 0 ? H5Dget_space(ds) : -1, ms = H5Screate_simple(1, &n, NULL);
    if (fs < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
        H5Dread(ds, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, u) < 0)
        die("reading the level-4 file", CRPM_ERR_HDF5);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(ds);
    H5Fclose(f);
    H5Pclose(fapl);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = now() - t0;
    for (long i = 0; i < rows * cols; i++)
        if (u[i] != val((r0 + i / cols) * NX + c0 + i % cols))
            die("an element read from the file is wrong", CRPM_ERR_CORRUPT);
    return t;
}

static void old_run(int nold, long ny)
{
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, rank < nold ? 0 : MPI_UNDEFINED, rank, &sub);
    if (rank < nold) {
        long o0, orows;
        block(ny, nold, rank, &o0, &orows);
        double *u = malloc(sizeof *u * (size_t)(orows * NX));
        for (long i = 0; i < orows * NX; i++)
            u[i] = val(o0 * NX + i);
        int iter = 1, rc;
        int64_t dims[2] = {ny, NX}, off[2] = {o0, 0}, cnt[2] = {orows, NX};
        if ((rc = crpm_init_text(cfg, "bench (old run)", sub)) != 0 ||
            (rc = crpm_define_global(0, 2, dims, CRPM_DOUBLE, "field")) != 0 ||
            (rc = crpm_protect_replicated(0, &iter, 1, CRPM_INT)) != 0 ||
            (rc = crpm_protect(1, u, orows * NX, CRPM_DOUBLE)) != 0 || (rc = crpm_add_subset(0, 1, off, cnt)) != 0 ||
            (rc = crpm_checkpoint(1, CRPM_L4)) != 0 || (rc = crpm_finalize()) != 0)
            die("the old run", rc);
        free(u);
        MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long mib = 64;
    int reps = 5, nold = nranks / 2 > 0 ? nranks / 2 : 1;
    const char *base = "/dev/shm", *out = "bench/results";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
            mib = atol(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--old") == 0 && i + 1 < argc)
            nold = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            base = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
    }
    if (mib < 1 || reps < 1 || reps > MAX_REPS || nold < 1 || nold >= nranks) {
        if (rank == 0)
            fprintf(stderr, "bench_reshape: need --mib >= 1, 1 <= --reps <= %d and 1 <= --old < ranks (%d ranks)\n",
                    MAX_REPS, nranks);
        MPI_Finalize();
        return 2;
    }
    long pid = rank == 0 ? (long)getpid() : 0;
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(dir, sizeof dir, "%s/crpm-bench-reshape-%ld", base, pid);
    snprintf(cfg, sizeof cfg, "[basic]\nckpt_dir = %s/ckpt\nglbl_dir = %s/g\njob_name = rsbench\nkeep_last_ckpt = 1\n"
             "verbosity = 1\nkeep_l4 = 1\n", dir, dir);
    long ny = (mib << 20) * nranks / (NX * 8);
    new_block(ny);
    double bytes = (double)(rows * cols * 8), mx;
    MPI_Allreduce(&bytes, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double load0 = load1();
    old_run(nold, ny);
    char l4[3100], ck[3100], keep[3100];
    snprintf(l4, sizeof l4, "%s/g/rsbench/l4-1.h5", dir);
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(keep, sizeof keep, "%s/ckpt.away", dir);
    double *u = malloc(sizeof *u * (size_t)(rows * cols));
    double t[3][MAX_REPS], ti[2][MAX_REPS];
    int iter = 0;
    for (int r = 0; r < reps; r++) {
        /* alternate the order so that no reader always finds a warm cache */
        for (int k = 0; k < 3; k++) {
            int which = (k + r) % 3;
            if (which == 0)
                t[0][r] = recover_new(ny, u, &iter, &ti[0][r]);
            else if (which == 1)
                t[1][r] = read_h5(l4, u);
            else {
                if (rank == 0 && rename(ck, keep) != 0)
                    die("moving the containers away", CRPM_ERR_IO);
                t[2][r] = recover_new(ny, u, &iter, &ti[1][r]);
                MPI_Barrier(MPI_COMM_WORLD);
                if (rank == 0) {
                    char cmd[9400];
                    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mv '%s' '%s'", ck, keep, ck);
                    if (system(cmd) != 0)
                        die("moving the containers back", CRPM_ERR_IO);
                }
                MPI_Barrier(MPI_COMM_WORLD);
            }
        }
    }
    double med[3], medi[2];
    for (int k = 0; k < 3; k++)
        med[k] = median(t[k], reps);
    for (int k = 0; k < 2; k++)
        medi[k] = median(ti[k], reps);
    double load_end = load1();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (rank == 0) {
        const char *name[3] = {"l1 redistribution", "h5 direct read", "l4 redistribution"};
        printf("%d ranks restart a %d-rank checkpoint: %ld x %d doubles, %.1f MiB per new rank, %d reps (medians)\n",
               nranks, nold, ny, NX, mx / 1048576.0, reps);
        printf("%-20s %10s %12s %10s\n", "method", "seconds", "GB/s/rank", "vs h5");
        for (int k = 0; k < 3; k++)
            printf("%-20s %10.4f %12.3f %10.2f\n", name[k], med[k], mx / med[k] / 1e9, med[1] / med[k]);
        printf("init (scan, plan, CRC check of the sources): l1 %.4f s, l4 %.4f s\n", medi[0], medi[1]);
        printf("machine: %ld cores, load average %.1f before, %.1f after\n", cores, load0, load_end);
        mkdir(out, 0755);
        char p[4600];
        snprintf(p, sizeof p, "%s/reshape.json", out);
        FILE *j = fopen(p, "w");
        if (j) {
            fprintf(j, "{\n  \"benchmark\": \"reshaped recovery vs reading the same boxes from the level-4 file\",\n"
                       "  \"ranks\": %d, \"old_ranks\": %d, \"grid\": [%ld, %d], \"mib_per_rank\": %.3f, \"reps\": %d,\n"
                       "  \"dir\": \"%s\",\n  \"results\": [\n", nranks, nold, ny, NX, mx / 1048576.0, reps, base);
            for (int k = 0; k < 3; k++)
                fprintf(j, "    {\"method\": \"%s\", \"median_s\": %.6f, \"gb_per_s_per_rank\": %.4f, \"h5_over_it\": "
                           "%.4f}%s\n", name[k], med[k], mx / med[k] / 1e9, med[1] / med[k], k < 2 ? "," : "");
            fprintf(j, "  ],\n  \"init_median_s\": {\"l1\": %.6f, \"l4\": %.6f},\n  \"cores\": %ld, \"load_average\": "
                       "[%.2f, %.2f]\n}\n", medi[0], medi[1], cores, load0, load_end);
            fclose(j);
        }
        snprintf(p, sizeof p, "%s/reshape.md", out);
        FILE *m = fopen(p, "w");
        if (m) {
            fprintf(m, "# Restart on another number of ranks: redistribution rate\n\n`mpirun -np %d bench_reshape "
                       "--mib %ld --reps %d --old %d` (%s); %d ranks restart a %d-rank checkpoint of a %ld x %d grid "
                       "of doubles, %.1f MiB per new rank; medians of %d.\n\n| method | seconds | GB/s per rank | "
                       "h5 time / its time |\n|---|---:|---:|---:|\n", nranks, mib, reps, nold, base, nranks, nold,
                    ny, NX, mx / 1048576.0, reps);
            for (int k = 0; k < 3; k++)
                fprintf(m, "| %s | %.4f | %.3f | %.2f |\n", name[k], med[k], mx / med[k] / 1e9, med[1] / med[k]);
            fprintf(m, "\nInit of the reshaped restarts (scan, plan, the sources' CRCs checked): level 1 %.4f s, "
                       "level 4 %.4f s.  Machine: %ld cores, 1-minute load average %.1f before and %.1f after the run "
                       "(other jobs shared it).\n", medi[0], medi[1], cores, load0, load_end);
            fclose(m);
        }
        char cmd[3100];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_reshape: could not remove %s\n", dir);
    }
    free(u);
    MPI_Finalize();
    return 0;
}

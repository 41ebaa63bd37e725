/* 2-D heat diffusion (Jacobi) on the GPU with libcrpm checkpoint/restart of
 * the device arrays (docs/gpu.md).
 *
 * The ny x nx grid is split into blocks of rows, one per rank, each with a
 * ghost row above and below, in device memory (or managed memory with
 * --managed).  A kernel updates the interior; the ghost rows go through
 * host buffers and MPI (no CUDA-aware MPI needed).  The grid is protected
 * as it is, on the GPU: crpm_protect recognises device and managed memory;
 * --mode chooses the device mode instead (crpm_protect_device).  The
 * program prints what a failure-free run prints after a restart: the digest
 * of the final grid ("checksum <hex>"), bitwise.
 *
 *   heat_gpu [--nx N] [--ny N] [--iters N] [--managed]
 *            [--crpm cfg.ini [--ckpt-every N] [--level L]
 *             [--mode auto|diff|fingerprint|full]] [--delay-us N]
 *
 * Ranks use GPU (rank on the node) % (GPUs). */
#include <cuda_runtime.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crpm.h"

static int rank, nranks;

static void crpm_check(int rc, const char *what)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "heat_gpu rank %d: %s failed: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void cuda_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "heat_gpu rank %d: %s: %s\n", rank, what, cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One Jacobi step of the interior rows [r_lo, r_hi] into v. */
__global__ void jacobi(const double *u, double *v, long nx, long r_lo, long r_hi)
{
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x + 1, r = blockIdx.y * (long)blockDim.y + threadIdx.y + r_lo;
    if (c >= nx - 1 || r > r_hi)
        return;
    const double *a = u + r * nx;
    v[r * nx + c] = 0.25 * (a[c - nx] + a[c + nx] + a[c - 1] + a[c + 1]);
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static long arg(int argc, char **argv, int *i)
{
    char *end;
    long v = *i + 1 < argc ? strtol(argv[++*i], &end, 10) : -1;
    if (v < 0 || *end) {
        if (rank == 0)
            fprintf(stderr, "heat_gpu: bad value for %s\n", argv[*i - 1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long nx = 1024, ny = 1024, iters = 500, every = 0, level = CRPM_L1, delay_us = 0;
    int managed = 0, mode = -1;
    const char *cfg = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nx"))
            nx = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--ny"))
            ny = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--iters"))
            iters = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--ckpt-every"))
            every = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--level"))
            level = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--delay-us"))
            delay_us = arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--managed"))
            managed = 1;
        else if (!strcmp(argv[i], "--crpm") && i + 1 < argc)
            cfg = argv[++i];
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
            const char *m = argv[++i];
            mode = !strcmp(m, "auto") ? -1 : !strcmp(m, "diff") ? CRPM_DEVICE_DIFF
                 : !strcmp(m, "fingerprint") ? CRPM_DEVICE_FINGERPRINT : !strcmp(m, "full") ? CRPM_DEVICE_FULL : -2;
        } else
            mode = -2;
    }
    if (nx < 3 || ny < nranks || iters > INT32_MAX || mode == -2) {
        if (rank == 0)
            fprintf(stderr, "usage: heat_gpu [--nx N] [--ny N] [--iters N] [--managed] [--crpm cfg.ini "
                            "[--ckpt-every N] [--level L] [--mode auto|diff|fingerprint|full]] [--delay-us N]\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Comm node;
    int local, ngpu = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    cuda_check(cudaGetDeviceCount(&ngpu), "cudaGetDeviceCount");
    cuda_check(cudaSetDevice(local % ngpu), "cudaSetDevice");

    long rows = ny / nranks + (rank < ny % nranks);
    long row0 = rank * (ny / nranks) + (rank < ny % nranks ? rank : ny % nranks);
    size_t n = (size_t)(rows + 2) * (size_t)nx, bytes = n * sizeof(double);
    double *h = (double *)malloc(bytes), *u, *v;
    for (long r = 0; r < rows + 2; r++) { /* fixed edges: top 100, bottom 25, left 50 */
        long gr = row0 + r - 1;
        for (long c = 0; c < nx; c++)
            h[r * nx + c] = gr <= 0 ? 100 : gr >= ny - 1 ? 25 : c == 0 ? 50 : 0;
    }
    if (managed) {
        cuda_check(cudaMallocManaged(&u, bytes), "cudaMallocManaged");
        cuda_check(cudaMallocManaged(&v, bytes), "cudaMallocManaged");
    } else {
        cuda_check(cudaMalloc(&u, bytes), "cudaMalloc");
        cuda_check(cudaMalloc(&v, bytes), "cudaMalloc");
    }
    cuda_check(cudaMemcpy(u, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_check(cudaMemcpy(v, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    int iter = 0;
    if (cfg) {
        crpm_check(crpm_init(cfg, MPI_COMM_WORLD), "crpm_init");
        crpm_check(crpm_protect(0, &iter, 1, CRPM_INT), "crpm_protect");
        if (mode > 0)
            crpm_check(crpm_protect_device(1, u, (int64_t)n, CRPM_DOUBLE, mode), "crpm_protect_device");
        else
            crpm_check(crpm_protect(1, u, (int64_t)n, CRPM_DOUBLE), "crpm_protect");
        int st = crpm_status();
        crpm_check(st, "crpm_status");
        if (st > 0) {
            crpm_check(crpm_recover(), "crpm_recover");
            cuda_check(cudaMemcpy(v, u, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
            if (rank == 0)
                printf("heat_gpu: restarted from iteration %d\n", iter);
        }
    }
    if (rank == 0)
        printf("heat_gpu: %ld x %ld grid on %d ranks, %s memory, %ld iterations\n", ny, nx, nranks,
               managed ? "managed" : "device", iters);
    fflush(stdout);
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < nranks - 1 ? rank + 1 : MPI_PROC_NULL;
    long r_lo = row0 == 0 ? 2 : 1, r_hi = row0 + rows == ny ? rows - 1 : rows;
    double *send = (double *)malloc(2 * nx * sizeof(double)), *recv = (double *)malloc(2 * nx * sizeof(double));
    dim3 blk(128, 4), grid((unsigned)((nx + 127) / 128), (unsigned)((r_hi - r_lo + 4) / 4));
    while (iter < iters) {
        cuda_check(cudaMemcpy(send, u + nx, nx * sizeof(double), cudaMemcpyDeviceToHost), "halo out");
        cuda_check(cudaMemcpy(send + nx, u + rows * nx, nx * sizeof(double), cudaMemcpyDeviceToHost), "halo out");
        MPI_Sendrecv(send, (int)nx, MPI_DOUBLE, up, 0, recv + nx, (int)nx, MPI_DOUBLE, down, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(send + nx, (int)nx, MPI_DOUBLE, down, 1, recv, (int)nx, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        if (up != MPI_PROC_NULL)
            cuda_check(cudaMemcpy(u, recv, nx * sizeof(double), cudaMemcpyHostToDevice), "halo in");
        if (down != MPI_PROC_NULL)
            cuda_check(cudaMemcpy(u + (rows + 1) * nx, recv + nx, nx * sizeof(double), cudaMemcpyHostToDevice),
                       "halo in");
        if (r_hi >= r_lo)
            jacobi<<<grid, blk>>>(u, v, nx, r_lo, r_hi);
        cuda_check(cudaGetLastError(), "jacobi launch");
        /* the protected grid stays at u: the new values are copied back on the device */
        cuda_check(cudaMemcpyAsync(u, v, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
        iter++;
        if (delay_us > 0) {
            struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        if (cfg && every > 0 && iter % every == 0)
            crpm_check(crpm_checkpoint(iter, (int)level), "crpm_checkpoint");
    }
    cuda_check(cudaMemcpy(h, u, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    uint64_t hash = fnv1a(0xcbf29ce484222325ULL, h + nx, (size_t)rows * nx * sizeof(double)), all = 0;
    uint64_t *hs = (uint64_t *)malloc(sizeof *hs * (size_t)nranks);
    MPI_Gather(&hash, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        all = 0xcbf29ce484222325ULL;
        for (int r = 0; r < nranks; r++)
            all = fnv1a(all, &hs[r], sizeof hs[r]);
        printf("checksum %016" PRIx64 "\n", all);
        fflush(stdout);
    }
    if (cfg)
        crpm_check(crpm_finalize(), "crpm_finalize");
    cudaFree(u);
    cudaFree(v);
    free(h);
    free(hs);
    free(send);
    free(recv);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}

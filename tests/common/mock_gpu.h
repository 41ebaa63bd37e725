/* Mock GPU memory for test programs, recognised by the mock device
 * (tests/common/devops_mock.c: linked into the program, or into a test-hook
 * build's libcrpm with CRPM_TEST_DEVICE=mock).
 *
 * Device memory is a memfd named "crpm-mock-gpu" mapped twice: the device
 * address (PROT_NONE: any access by the library faults) and a host view the
 * test writes as its kernels would write device memory.  Managed memory is
 * one read-write mapping of a memfd named "crpm-mock-managed" (managed
 * memory is host-addressable).  The library finds both in /proc/self/maps,
 * so a program linked with libcrpm.so needs no entry point of it. */
#ifndef CRPM_TEST_MOCK_GPU_H
#define CRPM_TEST_MOCK_GPU_H
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static inline size_t mock_gpu_len(size_t n) { return n ? (n + 4095) & ~(size_t)4095 : 4096; }

/* n bytes of mock device memory: the device address; *host gets the view. */
static inline void *mock_gpu_alloc(size_t n, void **host)
{
    size_t len = mock_gpu_len(n);
    int fd = memfd_create("crpm-mock-gpu", 0);
    void *d = MAP_FAILED, *h = MAP_FAILED;
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 ||
        (d = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
        (h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        perror("mock gpu: memfd");
        exit(1);
    }
    close(fd);
    *host = h;
    return d;
}

/* n bytes of mock managed memory (read and written directly). */
static inline void *mock_gpu_managed(size_t n)
{
    size_t len = mock_gpu_len(n);
    int fd = memfd_create("crpm-mock-managed", 0);
    void *p = MAP_FAILED;
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 ||
        (p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        perror("mock gpu: memfd");
        exit(1);
    }
    close(fd);
    return p;
}

/* Host-side handles for tests that keep the view: mock_gpu_malloc returns
 * the view of n bytes of device memory whose address mock_gpu_dev gives (a
 * page in front of the data records both). */
typedef struct mock_gpu_hdr {
    char *dev;
    size_t n, len;
} mock_gpu_hdr;

static inline char *mock_gpu_malloc(size_t n)
{
    void *h;
    size_t len = mock_gpu_len(n) + 4096;
    char *d = (char *)mock_gpu_alloc(len - 1, &h); /* len - 1 rounds up to len */
    mock_gpu_hdr *x = (mock_gpu_hdr *)h;
    x->dev = d;
    x->n = n;
    x->len = len;
    return (char *)h + 4096;
}

static inline mock_gpu_hdr *mock_gpu_hdr_of(const void *host) { return (mock_gpu_hdr *)((char *)host - 4096); }
static inline void *mock_gpu_dev(const void *host) { return mock_gpu_hdr_of(host)->dev + 4096; }

static inline void mock_gpu_release(void *host)
{
    if (!host)
        return;
    mock_gpu_hdr *x = mock_gpu_hdr_of(host);
    char *d = x->dev;
    size_t len = x->len;
    munmap(d, len);
    munmap(x, len);
}

static inline char *mock_gpu_realloc(void *host, size_t n)
{
    char *h = mock_gpu_malloc(n);
    if (host) {
        size_t old = mock_gpu_hdr_of(host)->n;
        for (size_t i = 0; i < (old < n ? old : n); i++)
            h[i] = ((char *)host)[i];
        mock_gpu_release(host);
    }
    return h;
}

/* Frees either kind (host NULL for managed memory). */
static inline void mock_gpu_free(void *dev, void *host, size_t n)
{
    if (dev)
        munmap(dev, mock_gpu_len(n));
    if (host)
        munmap(host, mock_gpu_len(n));
}

#endif

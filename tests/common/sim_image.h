/* A file that crash images of a simulated container are written to, one
 * after the other, to be opened as containers.  Only 4 KiB pages that differ
 * from the previous image are written (page 0 always: opening an image may
 * rewrite its commit word in the file), so tens of thousands of images of a
 * large container stay cheap.  Header-only, for the crash-simulation tests. */
#ifndef CRPM_TEST_SIM_IMAGE_H
#define CRPM_TEST_SIM_IMAGE_H
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "grow.h"

typedef struct sim_image_file {
    char path[4200];
    int fd;
    char *shadow; /* what the file holds */
    size_t size;
} sim_image_file;

static inline void sim_image_init(sim_image_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->fd = -1;
}

static inline void sim_image_write(sim_image_file *f, const char *buf, size_t n)
{
    if (f->fd < 0) {
        f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        REQUIRE(f->fd >= 0, "open %s", f->path);
    }
    if (n != f->size) {
        REQUIRE(ftruncate(f->fd, (off_t)n) == 0, "ftruncate %s", f->path);
        char *s = realloc(f->shadow, n ? n : 1);
        REQUIRE(s, "out of memory");
        f->shadow = s;
        if (n > f->size)
            memset(f->shadow + f->size, 0, n - f->size);
        f->size = n;
    }
    for (size_t off = 0; off < n; off += 4096) {
        size_t len = n - off < 4096 ? n - off : 4096;
        if (off && memcmp(buf + off, f->shadow + off, len) == 0)
            continue;
        REQUIRE(pwrite(f->fd, buf + off, len, (off_t)off) == (ssize_t)len, "write %s", f->path);
        memcpy(f->shadow + off, buf + off, len);
    }
}

/* As sim_image_write when buf differs from the image last written only in
 * the 4 KiB pages listed (and page 0): touches only those. */
static inline void sim_image_write_pages(sim_image_file *f, const char *buf, size_t n, const size_t *pages,
                                         size_t npages)
{
    if (n != f->size || f->fd < 0) {
        sim_image_write(f, buf, n);
        return;
    }
    for (size_t i = 0; i <= npages; i++) {
        size_t off = i ? pages[i - 1] * 4096 : 0;
        if (i && !off)
            continue;
        size_t len = n - off < 4096 ? n - off : 4096;
        if (off >= n || (off && memcmp(buf + off, f->shadow + off, len) == 0))
            continue;
        REQUIRE(pwrite(f->fd, buf + off, len, (off_t)off) == (ssize_t)len, "write %s", f->path);
        memcpy(f->shadow + off, buf + off, len);
    }
}

/* The 4 KiB pages where a and b (n bytes) differ, into *pages (realloc'd,
 * capacity *cap); returns how many. */
static inline size_t sim_image_diff_pages(const char *a, const char *b, size_t n, size_t **pages, size_t *cap)
{
    size_t k = 0;
    for (size_t off = 0; off < n; off += 4096) {
        size_t len = n - off < 4096 ? n - off : 4096;
        if (memcmp(a + off, b + off, len) == 0)
            continue;
        REQUIRE(CRPM_GROW(*pages, *cap, k + 1, 256) == 0, "out of memory");
        (*pages)[k++] = off / 4096;
    }
    return k;
}

/* Closes and removes the file. */
static inline void sim_image_done(sim_image_file *f)
{
    if (f->fd >= 0) {
        close(f->fd);
        unlink(f->path);
    }
    free(f->shadow);
    f->shadow = NULL;
    f->fd = -1;
    f->size = 0;
}
#endif

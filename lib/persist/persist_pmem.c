/* Real persistence backends on top of libpmem.
 * pmem:  the mapping is in the persistence domain through CPU caches; copies use
 *        libpmem's non-temporal memcpy, flush is pmem_flush, drain pmem_drain.
 * msync: any other file (tmpfs, SSD): stores go to the page cache and drain
 *        msyncs the ranges flushed since the last drain. */
#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "error.h"
#include "persist.h"
#include "persist_file.h"

#define MAX_RANGES 256
#define MERGE_GAP (1u << 20)

typedef struct file_state {
    char *path;
    int fd;
    int msync_mode;
    size_t nranges;
    size_t lo[MAX_RANGES], hi[MAX_RANGES]; /* offsets, page aligned */
} file_state;

/* ---- backend ops -------------------------------------------------------- */

static int be_map(crpm_media *m, const char *path, int msync_mode)
{
    file_state *fs = calloc(1, sizeof *fs);
    if (!fs || !(fs->path = strdup(path))) {
        free(fs);
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    int rc = crpm_file_map(m, path);
    if (rc == 0 && (fs->fd = open(path, O_RDWR | O_CLOEXEC)) < 0) {
        rc = crpm_error(CRPM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        crpm_file_unmap(m);
    }
    if (rc) {
        free(fs->path);
        free(fs);
        return rc;
    }
    fs->msync_mode = msync_mode < 0 ? !m->is_pmem : msync_mode;
    m->priv = fs;
    return CRPM_SUCCESS;
}

static int map_auto(crpm_media *m, const char *p) { return be_map(m, p, -1); }
static int map_pmem(crpm_media *m, const char *p) { return be_map(m, p, 0); }
static int map_msync(crpm_media *m, const char *p) { return be_map(m, p, 1); }

static void do_msync(crpm_media *m)
{
    file_state *fs = m->priv;
    for (size_t i = 0; i < fs->nranges; i++)
        pmem_msync(m->base + fs->lo[i], fs->hi[i] - fs->lo[i]);
    fs->nranges = 0;
}

static void note_range(crpm_media *m, const void *addr, size_t n)
{
    file_state *fs = m->priv;
    size_t lo = (size_t)((const char *)addr - m->base) & ~(size_t)4095;
    size_t hi = ((size_t)((const char *)addr - m->base) + n + 4095) & ~(size_t)4095;
    if (fs->nranges) {
        size_t k = fs->nranges - 1;
        /* msync skips clean pages cheaply, a syscall per scattered block is
         * not cheap: nearby ranges are merged across small gaps */
        if (lo <= fs->hi[k] + MERGE_GAP && hi + MERGE_GAP >= fs->lo[k]) {
            if (lo < fs->lo[k]) fs->lo[k] = lo;
            if (hi > fs->hi[k]) fs->hi[k] = hi;
            return;
        }
    }
    if (fs->nranges == MAX_RANGES)
        do_msync(m);
    fs->lo[fs->nranges] = lo;
    fs->hi[fs->nranges] = hi;
    fs->nranges++;
}

static void be_copy(crpm_media *m, void *dst, const void *src, size_t n)
{
    file_state *fs = m->priv;
    if (fs->msync_mode) {
        memcpy(dst, src, n);
        note_range(m, dst, n);
    } else {
        pmem_memcpy(dst, src, n, PMEM_F_MEM_NODRAIN);
    }
}

static void be_flush(crpm_media *m, const void *addr, size_t n)
{
    file_state *fs = m->priv;
    if (fs->msync_mode)
        note_range(m, addr, n);
    else
        pmem_flush(addr, n);
}

static void be_drain(crpm_media *m)
{
    file_state *fs = m->priv;
    if (fs->msync_mode)
        do_msync(m);
    else
        pmem_drain();
}

static int be_resize(crpm_media *m, size_t new_size)
{
    file_state *fs = m->priv;
    be_drain(m); /* pending ranges are offsets into the old mapping */
    return crpm_file_resize(m, fs->path, new_size);
}

static int be_reserve(crpm_media *m, size_t off, size_t len)
{
    int rc = posix_fallocate(((file_state *)m->priv)->fd, (off_t)off, (off_t)len);
    if (rc)
        return crpm_error(CRPM_ERR_IO, "cannot allocate %zu bytes in %s: %s", len, ((file_state *)m->priv)->path,
                          strerror(rc));
    return CRPM_SUCCESS;
}

/* Page cache: write(2) fills fresh pages without a fault per page (the
 * mapping sees the same pages); pmem: the non-temporal copy. */
static int be_fill(crpm_media *m, void *dst, const void *src, size_t n)
{
    file_state *fs = m->priv;
    if (!fs->msync_mode) {
        be_copy(m, dst, src, n);
        return CRPM_SUCCESS;
    }
    size_t off = (size_t)((char *)dst - m->base), done = 0;
    while (done < n) {
        ssize_t w = pwrite(fs->fd, (const char *)src + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return crpm_error(CRPM_ERR_IO, "cannot write %s: %s", fs->path, w < 0 ? strerror(errno) : "no space");
        done += (size_t)w;
    }
    note_range(m, dst, n);
    return CRPM_SUCCESS;
}

static void be_unmap(crpm_media *m)
{
    file_state *fs = m->priv;
    if (fs) {
        be_drain(m);
        close(fs->fd);
        free(fs->path);
        free(fs);
    }
    m->priv = NULL;
    crpm_file_unmap(m);
}

/* Several threads storing at once: libpmem's copies and flushes are safe
 * as they are, the msync mode's list of ranges is not, so each thread's
 * view keeps its own list (same file descriptor) and msyncs it when the
 * thread is done: its stores are then durable before the next drain. */
static int be_view_begin(crpm_media *m, crpm_media *view)
{
    file_state *fs = m->priv;
    if (!fs->msync_mode)
        return CRPM_SUCCESS;
    file_state *v = malloc(sizeof *v);
    if (!v)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    *v = *fs;
    v->nranges = 0;
    view->priv = v;
    return CRPM_SUCCESS;
}

static void be_view_end(crpm_media *m, crpm_media *view)
{
    if (view->priv == m->priv)
        return;
    do_msync(view);
    free(view->priv);
    view->priv = m->priv;
}

static const crpm_backend backend_auto = {"auto", map_auto, be_resize, be_reserve, be_unmap, be_copy, be_fill,
                                          be_flush, be_drain, be_view_begin, be_view_end};
static const crpm_backend backend_pmem = {"pmem", map_pmem, be_resize, be_reserve, be_unmap, be_copy, be_fill,
                                          be_flush, be_drain, be_view_begin, be_view_end};
static const crpm_backend backend_msync = {"msync", map_msync, be_resize, be_reserve, be_unmap, be_copy, be_fill,
                                           be_flush, be_drain, be_view_begin, be_view_end};

const crpm_backend *crpm_backend_for(int persistence)
{
    switch (persistence) {
    case CRPM_PERSIST_PMEM: return &backend_pmem;
    case CRPM_PERSIST_MSYNC: return &backend_msync;
    default: return &backend_auto;
    }
}

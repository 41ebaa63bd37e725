/* File mapping shared by the real backends and the simulator: map, grow,
 * reserve storage, and atomic creation of a new container file. */
#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "error.h"
#include "fsutil.h"
#include "persist_file.h"

int crpm_file_map(crpm_media *m, const char *path)
{
    size_t len = 0;
    int is_pmem = 0;
    void *addr;
    struct stat st;
    if (stat(path, &st) != 0)
        return crpm_error(CRPM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (st.st_size == 0)
        return crpm_error(CRPM_ERR_TRUNCATED, "%s is empty", path);
    addr = pmem_map_file(path, 0, 0, 0, &len, &is_pmem);
    if (!addr)
        return crpm_error(CRPM_ERR_IO, "cannot map %s: %s", path, pmem_errormsg());
    m->base = addr;
    m->size = len;
    m->is_pmem = is_pmem;
    return CRPM_SUCCESS;
}

int crpm_file_resize(crpm_media *m, const char *path, size_t new_size)
{
    size_t len = 0;
    int is_pmem = 0;
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return crpm_error(CRPM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    /* sparse: segments get storage when first written (crpm_file_reserve),
     * so a region's unused tail costs no memory on tmpfs or DAX */
    int rc = ftruncate(fd, (off_t)new_size) != 0 ? errno : 0;
    if (rc == 0 && fsync(fd) != 0)
        rc = errno;
    close(fd);
    if (rc)
        return crpm_error(CRPM_ERR_IO, "cannot grow %s to %zu bytes: %s", path, new_size, strerror(rc));
    void *addr = pmem_map_file(path, 0, 0, 0, &len, &is_pmem);
    if (!addr)
        return crpm_error(CRPM_ERR_IO, "cannot map %s: %s", path, pmem_errormsg());
    pmem_unmap(m->base, m->size);
    m->base = addr;
    m->size = len;
    m->is_pmem = is_pmem;
    return CRPM_SUCCESS;
}

int crpm_file_reserve(const char *path, size_t off, size_t len)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return crpm_error(CRPM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    int rc = posix_fallocate(fd, (off_t)off, (off_t)len);
    close(fd);
    if (rc)
        return crpm_error(CRPM_ERR_IO, "cannot allocate %zu bytes in %s: %s", len, path, strerror(rc));
    return CRPM_SUCCESS;
}

void crpm_file_unmap(crpm_media *m)
{
    if (m->base)
        pmem_unmap(m->base, m->size);
    m->base = NULL;
    m->size = 0;
}

int crpm_persist_create_file(const char *path, size_t size, const void *init, size_t len)
{
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
    unlink(tmp);
    int rc = CRPM_SUCCESS, err;
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        rc = crpm_error(CRPM_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    } else if (ftruncate(fd, (off_t)size) != 0) {
        rc = crpm_error(CRPM_ERR_IO, "cannot size %s to %zu bytes: %s", tmp, size, strerror(errno));
    } else if ((err = posix_fallocate(fd, 0, (off_t)len)) != 0) {
        /* only the initialised part: the rest (metadata slots) is reserved when written */
        rc = crpm_error(CRPM_ERR_IO, "cannot allocate %zu bytes for %s: %s", len, path, strerror(err));
    } else if (pwrite(fd, init, len, 0) != (ssize_t)len || fsync(fd) != 0) {
        rc = crpm_error(CRPM_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    }
    if (fd >= 0)
        close(fd);
    if (rc == CRPM_SUCCESS)
        rc = crpm_durable_rename(tmp, path);
    if (rc)
        unlink(tmp);
    free(tmp);
    return rc;
}


/* ---- read-only backend (tools) ------------------------------------------- */
/* A PROT_READ shared mapping of a regular file opened O_RDONLY: readable
 * read-only containers (chmod 444, read-only mounts) can be inspected, and a
 * tool can never write into a container a job is using.  resize() follows the
 * file's current size (a live writer grows it).  The format layer refuses
 * every write to a read-only container, so the store ops are never reached. */
typedef struct ro_state {
    int fd;
} ro_state;

static int ro_mmap(crpm_media *m, int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return crpm_error(CRPM_ERR_IO, "cannot examine %s: %s", path, strerror(errno));
    if (st.st_size == 0)
        return crpm_error(CRPM_ERR_TRUNCATED, "%s is empty", path);
    void *addr = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED)
        return crpm_error(CRPM_ERR_IO, "cannot map %s: %s", path, strerror(errno));
    m->base = addr;
    m->size = (size_t)st.st_size;
    m->is_pmem = 0;
    return CRPM_SUCCESS;
}

static int ro_map(crpm_media *m, const char *path)
{
    ro_state *s = calloc(1, sizeof *s);
    if (!s)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    int rc = crpm_open_regular(path, O_RDONLY, &s->fd, NULL);
    if (rc == 0 && (rc = ro_mmap(m, s->fd, path)) != 0)
        close(s->fd);
    if (rc) {
        free(s);
        return rc;
    }
    m->priv = s;
    return CRPM_SUCCESS;
}

/* Remaps when the file's size changed; new_size is ignored. */
static int ro_resize(crpm_media *m, size_t new_size)
{
    (void)new_size;
    ro_state *s = m->priv;
    struct stat st;
    if (fstat(s->fd, &st) != 0)
        return crpm_error(CRPM_ERR_IO, "cannot examine a container: %s", strerror(errno));
    if ((size_t)st.st_size == m->size)
        return CRPM_SUCCESS;
    char *old = m->base;
    size_t old_size = m->size;
    int rc = ro_mmap(m, s->fd, "the container");
    if (rc == 0)
        munmap(old, old_size);
    return rc;
}

static int ro_reserve(crpm_media *m, size_t off, size_t len)
{
    (void)m; (void)off; (void)len;
    return crpm_error(CRPM_ERR_STATE, "the container is open read-only");
}

static void ro_unmap(crpm_media *m)
{
    ro_state *s = m->priv;
    if (m->base)
        munmap(m->base, m->size);
    if (s) {
        close(s->fd);
        free(s);
    }
    m->priv = NULL;
    m->base = NULL;
    m->size = 0;
}

static void ro_copy(crpm_media *m, void *dst, const void *src, size_t n) { (void)m; (void)dst; (void)src; (void)n; }
static int ro_fill(crpm_media *m, void *dst, const void *src, size_t n)
{
    (void)src;
    return ro_reserve(m, (size_t)((char *)dst - m->base), n);
}
static void ro_flush(crpm_media *m, const void *addr, size_t n) { (void)m; (void)addr; (void)n; }
static void ro_drain(crpm_media *m) { (void)m; }

const crpm_backend crpm_backend_readonly = {"read-only", ro_map, ro_resize, ro_reserve, ro_unmap,
                                            ro_copy, ro_fill, ro_flush, ro_drain, NULL, NULL};

/* FTI-level-1-style full checkpoint files (see full.h).
 * Layout: header {magic, nregions, id}, per region {id, type, elem, count},
 * then the arrays, then a trailer with a CRC of everything before it.  The
 * file is written under a temporary name and renamed once fsync'ed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "error.h"
#include "fsutil.h"
#include "full.h"

#define FULL_MAGIC "CRPMFULL"

struct full_hdr {
    char magic[8];
    uint64_t id;
    uint64_t nregions;
};
struct full_reg {
    int32_t id, type_code;
    uint64_t elem_size, count;
};

static int write_all(int fd, const void *p, size_t n, uLong *crc, const char *path)
{
    const char *c = p;
    *crc = crc32_z(*crc, p, n);
    while (n) {
        ssize_t w = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return crpm_error(CRPM_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        c += w;
        n -= (size_t)w;
    }
    return CRPM_SUCCESS;
}

static int read_all(int fd, void *p, size_t n, uLong *crc, const char *path)
{
    char *c = p;
    size_t left = n;
    while (left) {
        ssize_t r = read(fd, c, left > (1u << 30) ? (1u << 30) : left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return crpm_error(r == 0 ? CRPM_ERR_TRUNCATED : CRPM_ERR_IO, "cannot read %s: %s", path,
                              r == 0 ? "file is truncated" : strerror(errno));
        c += r;
        left -= (size_t)r;
    }
    *crc = crc32_z(*crc, p, n);
    return CRPM_SUCCESS;
}

/* Calls fn for each full checkpoint file id of `rank` in dir. */
static void each_file(const char *dir, int rank, void (*fn)(void *, uint64_t), void *arg)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t id;
        if (crpm_parse_full_name(e->d_name, &id) == rank)
            fn(arg, id);
    }
    closedir(d);
}

struct prune { const char *dir; int rank; uint64_t keep; };

static void prune_one(void *arg, uint64_t id)
{
    struct prune *p = arg;
    char path[4096];
    if (id != p->keep) {
        crpm_name_full(path, sizeof path, p->dir, p->rank, id, 0);
        unlink(path);
    }
}

int crpm_full_write(const char *dir, int rank, uint64_t id, int nregions, const crpm_array *r,
                    uint64_t *bytes)
{
    char tmp[4096], path[4096];
    crpm_name_full(tmp, sizeof tmp, dir, rank, id, 1);
    crpm_name_full(path, sizeof path, dir, rank, id, 0);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return crpm_error(CRPM_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    uLong crc = crc32_z(0, NULL, 0);
    struct full_hdr h = {FULL_MAGIC, id, (uint64_t)nregions};
    memcpy(h.magic, FULL_MAGIC, 8);
    uint64_t total = sizeof h;
    int rc = write_all(fd, &h, sizeof h, &crc, tmp);
    for (int i = 0; i < nregions && rc == 0; i++) {
        struct full_reg fr = {r[i].id, r[i].type_code, r[i].elem_size, r[i].count};
        rc = write_all(fd, &fr, sizeof fr, &crc, tmp);
        total += sizeof fr;
    }
    for (int i = 0; i < nregions && rc == 0; i++) {
        const void *bytes = NULL;
        void *host = NULL; /* not host memory: a host copy (util/memkind.h) */
        rc = crpm_array_view(&r[i], &bytes, &host);
        if (rc == 0)
            rc = write_all(fd, bytes, r[i].elem_size * r[i].count, &crc, tmp);
        crpm_array_view_end(host);
        total += r[i].elem_size * r[i].count;
    }
    uint32_t c32 = (uint32_t)crc;
    if (rc == 0)
        rc = write_all(fd, &c32, sizeof c32, &crc, tmp);
    if (rc == 0 && fsync(fd) != 0)
        rc = crpm_error(CRPM_ERR_IO, "cannot fsync %s: %s", tmp, strerror(errno));
    close(fd);
    if (rc == 0)
        rc = crpm_durable_rename(tmp, path);
    if (rc) {
        unlink(tmp);
        return rc;
    }
    if (bytes)
        *bytes = total + sizeof c32;
    return CRPM_SUCCESS;
}

void crpm_full_prune(const char *dir, int rank, uint64_t keep)
{
    struct prune p = {dir, rank, keep};
    each_file(dir, rank, prune_one, &p);
}

static void newest_one(void *arg, uint64_t id)
{
    int64_t *ids = arg;
    if ((int64_t)id > ids[0]) {
        ids[1] = ids[0];
        ids[0] = (int64_t)id;
    } else if ((int64_t)id > ids[1]) {
        ids[1] = (int64_t)id;
    }
}

void crpm_full_newest(const char *dir, int rank, int64_t ids[2])
{
    ids[0] = ids[1] = -1;
    each_file(dir, rank, newest_one, ids);
}

int crpm_full_read(const char *dir, int rank, uint64_t id, int nregions, const crpm_array *r)
{
    char path[4096];
    crpm_name_full(path, sizeof path, dir, rank, id, 0);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return crpm_error(CRPM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    uLong crc = crc32_z(0, NULL, 0);
    struct full_hdr h;
    int rc = read_all(fd, &h, sizeof h, &crc, path);
    if (rc == 0 && (memcmp(h.magic, FULL_MAGIC, 8) != 0 || h.id != id))
        rc = crpm_error(CRPM_ERR_FORMAT, "%s is not a full checkpoint of id %llu", path, (unsigned long long)id);
    if (rc == 0 && h.nregions != (uint64_t)nregions)
        rc = crpm_error(CRPM_ERR_MISMATCH, "%s holds %llu arrays, %d are protected", path,
                        (unsigned long long)h.nregions, nregions);
    for (int i = 0; i < nregions && rc == 0; i++) {
        struct full_reg fr;
        rc = read_all(fd, &fr, sizeof fr, &crc, path);
        if (rc == 0 && (fr.id != r[i].id || fr.elem_size != r[i].elem_size || fr.count != r[i].count ||
                        fr.type_code != r[i].type_code))
            rc = crpm_error(CRPM_ERR_MISMATCH, "%s: array %d does not match the protected array %d", path, fr.id,
                            r[i].id);
    }
    /* arrays not in host memory are read into host buffers and copied in
     * once the file's checksum held */
    void **host = calloc((size_t)(nregions > 0 ? nregions : 1), sizeof *host);
    if (!host && rc == 0)
        rc = crpm_error(CRPM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nregions && rc == 0; i++) {
        void *bytes = NULL;
        rc = crpm_array_fill_begin(&r[i], &bytes, &host[i]);
        if (rc == 0)
            rc = read_all(fd, bytes, r[i].elem_size * r[i].count, &crc, path);
    }
    uint32_t stored, want = (uint32_t)crc;
    if (rc == 0)
        rc = read_all(fd, &stored, sizeof stored, &crc, path);
    if (rc == 0 && stored != want)
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: checksum mismatch", path);
    for (int i = 0; host && i < nregions; i++) {
        int frc = crpm_array_fill_end(&r[i], host[i], rc == 0);
        rc = rc ? rc : frc;
    }
    free(host);
    close(fd);
    return rc;
}

struct rm { const char *dir; int rank; };

static void remove_one(void *arg, uint64_t id)
{
    struct rm *p = arg;
    char path[4096];
    crpm_name_full(path, sizeof path, p->dir, p->rank, id, 0);
    unlink(path);
}

void crpm_full_remove(const char *dir, int rank)
{
    struct rm p = {dir, rank};
    each_file(dir, rank, remove_one, &p);
}

int crpm_full_stored(const char *dir, int rank, uint64_t id, int32_t want, crpm_array *shape)
{
    char path[4096];
    crpm_name_full(path, sizeof path, dir, rank, id, 0);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return crpm_error(CRPM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    uLong crc = crc32_z(0, NULL, 0);
    struct full_hdr h;
    int rc = read_all(fd, &h, sizeof h, &crc, path), found = 0;
    if (rc == 0 && (memcmp(h.magic, FULL_MAGIC, 8) != 0 || h.id != id))
        rc = crpm_error(CRPM_ERR_FORMAT, "%s is not a full checkpoint of id %llu", path, (unsigned long long)id);
    for (uint64_t i = 0; rc == 0 && !found && i < h.nregions && i < (1u << 24); i++) {
        struct full_reg fr;
        rc = read_all(fd, &fr, sizeof fr, &crc, path);
        if (rc == 0 && fr.id == want) {
            *shape = (crpm_array){fr.id, fr.type_code, fr.elem_size, fr.count, NULL, NULL, NULL};
            found = 1;
        }
    }
    close(fd);
    return rc ? rc : found ? CRPM_SUCCESS : crpm_error(CRPM_ERR_MISMATCH, "array %d is not in the checkpoint", want);
}

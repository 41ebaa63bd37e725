/* File-system rules (fsutil.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "error.h"
#include "fsutil.h"

int crpm_mkdir_p(const char *dir)
{
    char tmp[CRPM_PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s", dir) >= sizeof tmp)
        return crpm_error(CRPM_ERR_RANGE, "path too long (%zu characters, at most %d): %.200s...", strlen(dir),
                          CRPM_PATH_MAX - 1, dir);
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char save = *p;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return crpm_error(CRPM_ERR_IO, "cannot create directory %s: %s", tmp, strerror(errno));
        *p = save;
        if (!save)
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return crpm_error(CRPM_ERR_IO, "%s is not a directory", dir);
    return CRPM_SUCCESS;
}

int crpm_open_regular(const char *path, int flags, int *fd, int *missing)
{
    if (missing)
        *missing = 0;
    *fd = open(path, flags | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) {
        if (missing && errno == ENOENT)
            *missing = 1;
        return crpm_error(CRPM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    }
    struct stat st;
    const char *kind = NULL;
    if (fstat(*fd, &st) != 0)
        kind = "a file that cannot be examined";
    else if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
        kind = "a FIFO or socket";
    else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
        kind = "a device";
    else if (S_ISDIR(st.st_mode))
        kind = "a directory";
    else if (!S_ISREG(st.st_mode))
        kind = "not a regular file";
    if (kind) {
        close(*fd);
        *fd = -1;
        return crpm_error(CRPM_ERR_IO, "%s is %s; only regular files are accepted", path, kind);
    }
    /* O_NONBLOCK means nothing for regular files, but a later reader should not see it */
    int fl = fcntl(*fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK);
    return CRPM_SUCCESS;
}

int crpm_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return crpm_error(CRPM_ERR_IO, "cannot sync directory %s: %s", dir, strerror(err));
    }
    close(fd);
    return CRPM_SUCCESS;
}

int crpm_sync_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return crpm_error(CRPM_ERR_IO, "cannot sync %s: %s", path, strerror(err));
    }
    close(fd);
    return CRPM_SUCCESS;
}

int crpm_durable_rename(const char *from, const char *to)
{
    if (rename(from, to) != 0)
        return crpm_error(CRPM_ERR_IO, "cannot rename %s to %s: %s", from, to, strerror(errno));
    /* The new name must be durable before anyone relies on the file. */
    char dir[CRPM_PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s", to) >= sizeof dir)
        return crpm_error(CRPM_ERR_RANGE, "path too long: %.200s...", to);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    return crpm_sync_dir(dir);
}

int crpm_unlink_quiet(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return crpm_error(CRPM_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    return CRPM_SUCCESS;
}

int crpm_job_name_valid(const char *v)
{
    if (!v || !*v || strcmp(v, ".") == 0 || strcmp(v, "..") == 0 || strlen(v) >= CRPM_JOB_MAX)
        return 0;
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
            return 0;
    return 1;
}

static int fit(int n, size_t len, const char *what)
{
    if (n < 0 || (size_t)n >= len)
        return crpm_error(CRPM_ERR_RANGE, "path of %s too long (at most %zu characters)", what, len - 1);
    return CRPM_SUCCESS;
}

int crpm_name_join(char *out, size_t len, const char *dir, const char *name)
{
    return fit(snprintf(out, len, "%s/%s", dir, name), len, name);
}

int crpm_name_container(char *out, size_t len, const char *job_dir, int rank)
{
    return fit(snprintf(out, len, "%s/rank-%d.crpm", job_dir, rank), len, "a container");
}

int crpm_name_rank_lock(char *out, size_t len, const char *job_dir, int rank)
{
    return fit(snprintf(out, len, "%s/rank-%d.lock", job_dir, rank), len, "a lock file");
}

int crpm_name_partner(char *out, size_t len, const char *job_dir, int owner)
{
    return fit(snprintf(out, len, "%s/partner-%d.crpm", job_dir, owner), len, "a partner copy");
}

int crpm_parse_partner_name(const char *name)
{
    int k, end = 0;
    if (sscanf(name, "partner-%d.crpm%n", &k, &end) == 1 && name[end] == '\0' && k >= 0)
        return k;
    return -1;
}

int crpm_name_parity(char *out, size_t len, const char *job_dir, int rank)
{
    return fit(snprintf(out, len, "%s/parity-%d.crpm", job_dir, rank), len, "a parity container");
}

int crpm_parse_parity_name(const char *name)
{
    int k, end = 0;
    if (sscanf(name, "parity-%d.crpm%n", &k, &end) == 1 && name[end] == '\0' && k >= 0)
        return k;
    return -1;
}

int crpm_name_l4(char *out, size_t len, const char *dir, int ckpt_id)
{
    return fit(snprintf(out, len, "%s/l4-%d.h5", dir, ckpt_id), len, "a level-4 file");
}

int crpm_name_full(char *out, size_t len, const char *dir, int rank, uint64_t id, int tmp)
{
    return fit(snprintf(out, len, "%s/%sfull-%llu.rank-%d", dir, tmp ? "." : "", (unsigned long long)id, rank),
               len, "a full checkpoint file");
}

int crpm_parse_container_name(const char *name)
{
    int k, end = 0;
    if (sscanf(name, "rank-%d.crpm%n", &k, &end) == 1 && name[end] == '\0' && k >= 0)
        return k;
    return -1;
}

int crpm_parse_full_name(const char *name, uint64_t *id)
{
    unsigned long long x;
    int r, end = 0;
    if (sscanf(name, "full-%llu.rank-%d%n", &x, &r, &end) == 2 && name[end] == '\0' && r >= 0) {
        *id = x;
        return r;
    }
    return -1;
}

int crpm_parse_l4_name(const char *name, int32_t *id)
{
    if (strncmp(name, "l4-", 3) != 0)
        return -1;
    const char *p = name + 3;
    if (*p == '-')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(name + 3, &end, 10);
    if (errno || strcmp(end, ".h5") != 0 || v < INT32_MIN || v > INT32_MAX)
        return -1;
    *id = (int32_t)v;
    return 0;
}

/* The lock is on the file's inode: a holder that unlinks the file and a
 * waiter that then locks the old inode must not both think they own the
 * name, so the waiter checks that the name still leads to its inode. */
static int lock_once(const char *path, int *fd, int *busy)
{
    *busy = 0;
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    /* A job that finishes removes its directory once its locks are gone,
     * possibly after our caller made it: make it again (each rank of that
     * job removes it at most once). */
    for (int tries = 0; f < 0 && errno == ENOENT && tries < 64; tries++) {
        char dir[CRPM_PATH_MAX];
        const char *slash = strrchr(path, '/');
        if (!slash || slash == path || (size_t)(slash - path) >= sizeof dir)
            break;
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
        int rc = crpm_mkdir_p(dir);
        if (rc != CRPM_SUCCESS)
            return rc;
        f = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    }
    if (f < 0)
        return crpm_error(CRPM_ERR_IO, "cannot open lock file %s: %s", path, strerror(errno));
    struct stat a, b;
    if (fstat(f, &a) != 0 || !S_ISREG(a.st_mode)) {
        close(f);
        return crpm_error(CRPM_ERR_IO, "lock file %s is not a regular file", path);
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(f, F_OFD_SETLK, &fl) != 0) {
        int err = errno;
        close(f);
        if (err == EAGAIN || err == EACCES) {
            *busy = 1;
            return CRPM_ERR_BUSY;
        }
        return crpm_error(CRPM_ERR_IO, "cannot lock %s: %s", path, strerror(err));
    }
    if (stat(path, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
        close(f); /* the holder removed it meanwhile: lock the new file */
        *busy = 1;
        return CRPM_ERR_BUSY;
    }
    char who[300], host[256] = "";
    gethostname(host, sizeof host - 1);
    int n = snprintf(who, sizeof who, "%ld %s\n", (long)getpid(), host);
    if (ftruncate(f, 0) != 0 || pwrite(f, who, (size_t)n, 0) != n) {
        int err = errno;
        close(f);
        return crpm_error(CRPM_ERR_IO, "cannot write lock file %s: %s", path, strerror(err));
    }
    *fd = f;
    return CRPM_SUCCESS;
}

int crpm_lock_file(const char *path, double wait_s, int *fd)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int busy, rc = lock_once(path, fd, &busy);
        if (!busy)
            return rc;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
        if (waited >= wait_s) {
            char who[300] = "";
            int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
            if (f >= 0) {
                ssize_t n = read(f, who, sizeof who - 1);
                who[n > 0 ? n : 0] = '\0';
                close(f);
            }
            long pid = 0;
            char host[256] = "", holder[320] = "";
            int fields = sscanf(who, "%ld %255s", &pid, host);
            if (fields >= 1 && pid > 0)
                snprintf(holder, sizeof holder, " (process %ld%s%s)", pid, fields == 2 ? " on " : "",
                         fields == 2 ? host : "");
            return crpm_error(CRPM_ERR_BUSY, "%s is in use by another job%s; waited %.1f s (lock_wait_s)", path,
                              holder, waited);
        }
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

void crpm_unlock_file(int fd, const char *path, int remove)
{
    if (fd < 0)
        return;
    if (remove && path)
        unlink(path);
    close(fd);
}

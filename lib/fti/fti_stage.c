/* FTI's staging: FTI_SendFile moves a file from the node-local stage
 * directory (FTI_GetStageDir) to the global file system while the program
 * computes; FTI_GetStageStatus follows each request.  `enable_staging = 1`
 * turns it on.  One worker thread per process moves the files in request
 * order (rename on one file system, else copy, fsync and unlink); it starts
 * with the first request and makes no MPI call.  FTI_Finalize waits for the
 * requests still queued. */
#include <fti.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fti_internal.h"
#include "grow.h"

typedef struct stage_req {
    int id;
    int status;             /* FTI_SI_PEND, _ACTV, _SCES, _FAIL; FTI_SI_NINI: slot free */
    char *from, *to;
} stage_req;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    pthread_t thread;
    int started, stop, busy;
    int enabled;
    char dir[FTI_STAGE_DIR_MAX];
    stage_req *q;
    size_t nq, cap;
    int next_id;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

/* Copies from -> to (created 0644, replaced if there), made durable. */
static int copy_file(const char *from, const char *to, char *err, size_t errlen)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(err, errlen, "cannot open %s: %s", from, strerror(errno));
        return -1;
    }
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        snprintf(err, errlen, "cannot create %s: %s", to, strerror(errno));
        close(in);
        return -1;
    }
    char buf[1 << 16];
    int rc = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "cannot read %s: %s", from, strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                snprintf(err, errlen, "cannot write %s: %s", to, strerror(errno));
                rc = -1;
                break;
            }
            off += w;
        }
        if (rc)
            break;
    }
    if (rc == 0 && fsync(out) != 0) {
        snprintf(err, errlen, "cannot sync %s: %s", to, strerror(errno));
        rc = -1;
    }
    close(in);
    if (close(out) != 0 && rc == 0) {
        snprintf(err, errlen, "cannot close %s: %s", to, strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        unlink(to); /* no half-copied file at the destination */
    return rc;
}

/* One file moved; the source goes only once the destination is complete. */
static int move_file(const char *from, const char *to, char *err, size_t errlen)
{
    if (rename(from, to) == 0)
        return 0;
    if (errno != EXDEV) {
        snprintf(err, errlen, "cannot move %s to %s: %s", from, to, strerror(errno));
        return -1;
    }
    if (copy_file(from, to, err, errlen) != 0)
        return -1;
    if (unlink(from) != 0) {
        snprintf(err, errlen, "%s copied, but cannot remove it: %s", from, strerror(errno));
        return -1;
    }
    return 0;
}

/* mkdir -p.  (Not libcrpm's crpm_mkdir_p: linking crpm_util's error
 * functions into libfti would give it a second copy of crpm_last_error.) */
static int make_dirs(const char *dir)
{
    char p[FTI_STAGE_DIR_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char was = *c;
        *c = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return -1;
        *c = was;
        if (!was)
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static stage_req *find_req(int id)
{
    for (size_t i = 0; i < S.nq; i++)
        if (S.q[i].status != FTI_SI_NINI && S.q[i].id == id)
            return &S.q[i];
    return NULL;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&S.mu);
    for (;;) {
        stage_req *r = NULL;
        for (size_t i = 0; i < S.nq && !r; i++)
            if (S.q[i].status == FTI_SI_PEND)
                r = &S.q[i];
        if (!r) {
            S.busy = 0;
            pthread_cond_broadcast(&S.idle);
            if (S.stop)
                break;
            pthread_cond_wait(&S.work, &S.mu);
            continue;
        }
        S.busy = 1;
        r->status = FTI_SI_ACTV;
        int id = r->id;
        char *from = r->from, *to = r->to, err[1024] = "";
        pthread_mutex_unlock(&S.mu); /* the queue may grow (and move) meanwhile */
        int rc = move_file(from, to, err, sizeof err);
        if (rc != 0)
            fti_say(FTI_EROR, 1, "FTI_SendFile request %d: %s", id, err);
        pthread_mutex_lock(&S.mu);
        r = find_req(id);
        if (r)
            r->status = rc == 0 ? FTI_SI_SCES : FTI_SI_FAIL;
    }
    pthread_mutex_unlock(&S.mu);
    return NULL;
}

int fti_stage_init(const char *ckpt_dir, int rank, int enabled)
{
    pthread_mutex_lock(&S.mu);
    S.enabled = 0;
    S.dir[0] = '\0';
    pthread_mutex_unlock(&S.mu);
    if (!enabled)
        return FTI_SCES;
    char dir[FTI_STAGE_DIR_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s/fti-stage/rank-%d", ckpt_dir, rank) >= sizeof dir) {
        fti_say(FTI_EROR, 1, "FTI_Init: the stage directory under %s is too long a path", ckpt_dir);
        return FTI_NSCS;
    }
    if (make_dirs(dir) != 0) {
        fti_say(FTI_EROR, 1, "FTI_Init: cannot create the stage directory %s: %s", dir, strerror(errno));
        return FTI_NSCS;
    }
    pthread_mutex_lock(&S.mu);
    snprintf(S.dir, sizeof S.dir, "%s", dir);
    S.enabled = 1;
    pthread_mutex_unlock(&S.mu);
    return FTI_SCES;
}

void fti_stage_finalize(void)
{
    pthread_mutex_lock(&S.mu);
    int started = S.started;
    S.stop = 1;
    pthread_cond_broadcast(&S.work);
    pthread_mutex_unlock(&S.mu);
    if (started)
        pthread_join(S.thread, NULL); /* moves every queued file first */
    pthread_mutex_lock(&S.mu);
    for (size_t i = 0; i < S.nq; i++) {
        free(S.q[i].from);
        free(S.q[i].to);
    }
    free(S.q);
    S.q = NULL;
    S.nq = S.cap = 0;
    S.started = S.stop = S.busy = 0;
    if (S.enabled)
        rmdir(S.dir); /* only when the program left nothing in it */
    S.enabled = 0;
    pthread_mutex_unlock(&S.mu);
}

int FTI_GetStageDir(char *stageDir, int maxLen)
{
    if (!fti_initialized())
        return fti_say(FTI_EROR, 1, "FTI_GetStageDir: FTI is not initialised (call FTI_Init first)"), FTI_NSCS;
    if (!stageDir || maxLen <= 0)
        return fti_say(FTI_EROR, 1, "FTI_GetStageDir: no buffer"), FTI_NSCS;
    pthread_mutex_lock(&S.mu);
    int rc = FTI_NSCS;
    if (!S.enabled)
        fti_say(FTI_EROR, 1, "FTI_GetStageDir: staging is off (enable_staging = 1 in [basic] turns it on)");
    else if (strlen(S.dir) >= (size_t)maxLen)
        fti_say(FTI_EROR, 1, "FTI_GetStageDir: the directory needs %zu bytes, the buffer has %d", strlen(S.dir) + 1,
                maxLen);
    else {
        memcpy(stageDir, S.dir, strlen(S.dir) + 1);
        rc = FTI_SCES;
    }
    pthread_mutex_unlock(&S.mu);
    return rc;
}

int FTI_SendFile(const char *lpath, const char *rpath)
{
    const char *fn = "FTI_SendFile";
    if (!fti_initialized())
        return fti_say(FTI_EROR, 1, "%s: FTI is not initialised (call FTI_Init first)", fn), FTI_NSCS;
    if (!lpath || !rpath || !*lpath || !*rpath)
        return fti_say(FTI_EROR, 1, "%s: needs a local and a remote path", fn), FTI_NSCS;
    struct stat st;
    if (stat(lpath, &st) != 0 || !S_ISREG(st.st_mode))
        return fti_say(FTI_EROR, 1, "%s: %s is not a regular file", fn, lpath), FTI_NSCS;
    char *from = strdup(lpath), *to = strdup(rpath);
    pthread_mutex_lock(&S.mu);
    int id = FTI_NSCS;
    if (!S.enabled) {
        fti_say(FTI_EROR, 1, "%s: staging is off (enable_staging = 1 in [basic] turns it on)", fn);
    } else if (!from || !to) {
        fti_say(FTI_EROR, 1, "%s: out of memory", fn);
    } else {
        /* a free slot, else a new one */
        stage_req *r = NULL;
        for (size_t i = 0; i < S.nq && !r; i++)
            if (S.q[i].status == FTI_SI_NINI)
                r = &S.q[i];
        if (!r && CRPM_GROW(S.q, S.cap, S.nq + 1, 64) == 0)
            r = &S.q[S.nq++];
        if (!r) {
            fti_say(FTI_EROR, 1, "%s: out of memory", fn);
        } else if (!S.started && pthread_create(&S.thread, NULL, worker, NULL) != 0) {
            r->status = FTI_SI_NINI;
            fti_say(FTI_EROR, 1, "%s: cannot start the staging thread", fn);
        } else {
            S.started = 1;
            id = S.next_id++ & 0x7fffffff;
            r->id = id;
            r->status = FTI_SI_PEND;
            r->from = from;
            r->to = to;
            from = to = NULL;
            pthread_cond_signal(&S.work);
        }
    }
    pthread_mutex_unlock(&S.mu);
    free(from);
    free(to);
    return id;
}

/* FTI_SI_PEND (queued), FTI_SI_ACTV (moving), FTI_SI_SCES or FTI_SI_FAIL
 * (reported once: the request is then forgotten), FTI_SI_NINI (no such
 * request). */
int FTI_GetStageStatus(int ID)
{
    pthread_mutex_lock(&S.mu);
    stage_req *r = find_req(ID);
    int st = r ? r->status : FTI_SI_NINI;
    if (r && (st == FTI_SI_SCES || st == FTI_SI_FAIL)) {
        free(r->from);
        free(r->to);
        r->from = r->to = NULL;
        r->status = FTI_SI_NINI;
    }
    pthread_mutex_unlock(&S.mu);
    return st;
}

/* Level 2's transport (l2_xfer.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include "crc32c.h"
#include "error.h"
#include "fsutil.h"
#include "l2_xfer.h"
#include "grow.h"
#include "mpi_error.h"
#include "mpi_wait.h"
#include "persist_file.h"
#include "progress.h"

#define BATCH (64u << 20)       /* bytes per data message: well inside MPI's int counts */
#define PIECE (64u << 10)       /* sync granularity */
#define TAG_FP 7301
#define TAG_SYNC 7302

static MPI_Request *new_req(crpm_sendq *q)
{
    if (CRPM_GROW(q->req, q->cap, (size_t)q->nreq + 1, 16)) {
        q->err = q->err ? q->err : crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
        return NULL;
    }
    return &q->req[q->nreq++];
}

static void keep_buf(crpm_sendq *q, void *b)
{
    if (CRPM_GROW(q->bufs, q->capbufs, (size_t)q->nbufs + 1, 16) == 0)
        q->bufs[q->nbufs++] = b;
    else
        q->err = q->err ? q->err : crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
}

void crpm_sendq_keep(crpm_sendq *q, void *buf)
{
    keep_buf(q, buf);
}

void crpm_sendq_post(crpm_sendq *q, MPI_Comm comm, int peer, int tag, const void *p, size_t n)
{
    void *b = malloc(n ? n : 1);
    MPI_Request *r = b ? new_req(q) : NULL;
    if (!r) {
        free(b);
        q->err = q->err ? q->err : crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
        return;
    }
    memcpy(b, p, n);
    keep_buf(q, b);
    int mrc = MPI_Isend(b, (int)n, MPI_BYTE, peer, tag, comm, r);
    if (mrc != MPI_SUCCESS && !q->err)
        q->err = crpm_mpi_fail(mrc, "level 2: MPI_Isend");
    q->bytes += n;
}

/* How ranges travel: a long range as contiguous messages straight from the
 * sender's mapping into the receiver's (MPI moves those with one copy, no
 * per-fragment handshake); runs of short ranges packed into one message.
 * Both ends walk the list with the same rule, so they agree on every message. */
#define DIRECT_MIN (64u << 10)

typedef struct item {
    int direct;                 /* 1: v[i] bytes [done, done+len); 0: ranges [i, j) packed */
    size_t i, j;
    uint64_t done, len;
} item;

typedef struct walker {
    const crpm_wrange *v;
    size_t n, i;
    uint64_t done;              /* of v[i], for direct ranges */
} walker;

static int next_item(walker *w, item *it)
{
    if (w->i >= w->n)
        return 0;
    const crpm_wrange *r = &w->v[w->i];
    if (r->len >= DIRECT_MIN) {
        uint64_t left = r->len - w->done;
        *it = (item){1, w->i, w->i + 1, w->done, left < BATCH ? left : BATCH};
        w->done += it->len;
        if (w->done == r->len) {
            w->i++;
            w->done = 0;
        }
        return 1;
    }
    uint64_t total = 0;
    size_t j = w->i;
    while (j < w->n && w->v[j].len < DIRECT_MIN && total + w->v[j].len <= BATCH)
        total += w->v[j++].len;
    *it = (item){0, w->i, j, 0, total};
    w->i = j;
    return 1;
}

static int isend(crpm_sendq *q, MPI_Comm comm, int peer, int tag, const void *p, uint64_t n)
{
    MPI_Request *r = new_req(q);
    if (!r)
        return q->err;
    int mrc = MPI_Isend(p, (int)n, MPI_BYTE, peer, tag, comm, r);
    if (mrc != MPI_SUCCESS) {
        q->nreq--;
        return q->err = q->err ? q->err : crpm_mpi_fail(mrc, "level 2: sending ranges");
    }
    q->bytes += n;
    return CRPM_SUCCESS;
}

void crpm_sendq_ranges(crpm_sendq *q, MPI_Comm comm, int peer, int tag, const char *base, const crpm_wrange *v,
                       size_t n)
{
    uint64_t cnt = n;
    crpm_sendq_post(q, comm, peer, tag, &cnt, sizeof cnt);
    if (n)
        crpm_sendq_post(q, comm, peer, tag, v, n * sizeof *v);
    walker w = {v, n, 0, 0};
    item it;
    while (!q->err && next_item(&w, &it)) {
        if (it.direct) {
            isend(q, comm, peer, tag, base + v[it.i].off + it.done, it.len);
            continue;
        }
        char *b = malloc(it.len ? it.len : 1);
        if (!b) {
            q->err = crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
            break;
        }
        keep_buf(q, b);
        uint64_t o = 0;
        for (size_t k = it.i; k < it.j; k++) {
            memcpy(b + o, base + v[k].off, v[k].len);
            o += v[k].len;
        }
        isend(q, comm, peer, tag, b, it.len);
    }
}
int crpm_sendq_wait(crpm_sendq *q, const char *what)
{
    int mrc = q->nreq ? crpm_mpi_idle_wait(q->nreq, q->req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    int rc = q->err ? q->err : mrc != MPI_SUCCESS ? crpm_mpi_fail(mrc, what) : CRPM_SUCCESS;
    for (int i = 0; i < q->nbufs; i++)
        free(q->bufs[i]);
    free(q->req);
    free(q->bufs);
    uint64_t bytes = q->bytes;
    memset(q, 0, sizeof *q);
    q->bytes = bytes;
    return rc;
}

int crpm_recv_bytes(MPI_Comm comm, int peer, int tag, void *p, size_t n, const char *what)
{
    int mrc = crpm_mpi_recv(p, (int)n, MPI_BYTE, peer, tag, comm);
    return mrc == MPI_SUCCESS ? CRPM_SUCCESS : crpm_mpi_fail(mrc, what);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static void populate(char *p, uint64_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, b = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;
    (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
}

/* clear_word: the commit word is zeroed once every range has its storage,
 * before the first byte lands (a sync in place: a copy that cannot get the
 * space it needs stays as it was). */
static int recv_ranges(MPI_Comm comm, int peer, int tag, crpm_media *m, uint64_t *bytes, int clear_word)
{
    uint64_t n = 0;
    int rc = crpm_recv_bytes(comm, peer, tag, &n, sizeof n, "level 2: receiving a range count");
    if (rc != 0 || n == 0)
        return rc;
    if (n > (uint64_t)INT_MAX / sizeof(crpm_wrange))
        return crpm_error(CRPM_ERR_RANGE, "level 2: %llu ranges in one transfer", (unsigned long long)n);
    crpm_wrange *v = malloc(n * sizeof *v);
    if (!v)
        return crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
    rc = crpm_recv_bytes(comm, peer, tag, v, n * sizeof *v, "level 2: receiving ranges");
    /* The data messages follow whatever happens: they are received (into
     * scratch when the ranges are bad) so the sender's requests complete. */
    int bad = rc != 0 || !m->base; /* no mapping: the caller failed, the data is only drained */
    for (uint64_t i = 0; !bad && rc == 0 && i < n; i++) {
        if (v[i].off > m->size || v[i].len > m->size - v[i].off ||
            (v[i].off < CRPM_WORD_OFF + CRPM_WORD_LEN && v[i].off + v[i].len > CRPM_WORD_OFF))
            rc = crpm_error(CRPM_ERR_FORMAT, "level 2: range [%llu, +%llu) outside the copy or over its commit word",
                            (unsigned long long)v[i].off, (unsigned long long)v[i].len);
        else
            rc = m->ops->reserve(m, v[i].off, v[i].len);
    }
    /* Map the pages before the data arrives: one call instead of a page
     * fault per 4 KiB inside MPI's copy (a fresh file faults on every page).
     * Only an optimisation: an old kernel or another mapping says no. */
    for (uint64_t i = 0; !bad && rc == 0 && i < n; i++)
        if (v[i].len >= DIRECT_MIN)
            populate(m->base + v[i].off, v[i].len);
    if (!bad && rc == 0 && clear_word)
        crpm_media_set_word(m, 0);
    bad |= rc != 0;
    /* packed runs and, after an error, everything land in scratch */
    char *scratch = malloc(BATCH);
    if (!scratch)
        rc = rc ? rc : crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
    walker w = {v, n, 0, 0};
    item it;
    while (scratch && next_item(&w, &it)) {
        char *dst = it.direct && !bad ? m->base + v[it.i].off + it.done : scratch;
        int mrc = crpm_mpi_recv(dst, (int)it.len, MPI_BYTE, peer, tag, comm);
        if (mrc != MPI_SUCCESS) {
            rc = rc ? rc : crpm_mpi_fail(mrc, "level 2: receiving ranges");
            break;
        }
        *bytes += it.len;
        crpm_progress_tick(it.len); /* a restore's or sync's progress, when one is current (progress.h) */
        if (!it.direct && !bad)
            for (size_t k = it.i, o = 0; k < it.j; k++) {
                memcpy(m->base + v[k].off, scratch + o, v[k].len);
                o += v[k].len;
            }
    }
    for (uint64_t i = 0; !bad && rc == 0 && i < n; i++)
        crpm_persist_flush(m, m->base + v[i].off, v[i].len);
    free(scratch);
    free(v);
    return rc;
}

int crpm_recv_ranges(MPI_Comm comm, int peer, int tag, crpm_media *m, uint64_t *bytes)
{
    return recv_ranges(comm, peer, tag, m, bytes, 0);
}

/* ---- whole-file sync ----------------------------------------------------- */

typedef struct fp_hdr {
    uint64_t have, size, npieces;
} fp_hdr;

typedef struct sync_hdr {
    int64_t rc;                 /* the source's error: nothing follows */
    uint64_t size, word;
    char why[512];              /* the source's message with rc */
} sync_hdr;

static uint64_t piece_len(uint64_t size, uint64_t i)
{
    uint64_t off = i * PIECE;
    return size - off < PIECE ? size - off : PIECE;
}

/* Which pieces of m (the file at path) may hold data (1) and which lie
 * wholly in a hole (0), from SEEK_DATA / SEEK_HOLE.  A container is sparse:
 * most of its segments' second copies are holes, and reading a hole of a
 * shared tmpfs mapping allocates a page for it (SIGBUS when the file system
 * is full), so neither fingerprints, the zero check nor the sends may touch
 * them.  The pieces that count as data are reserved first (their holes get
 * storage, CRPM_ERR_IO when there is none), since a piece is read whole.
 * Where the file system cannot tell, every piece counts as data and the
 * whole file is reserved.  The commit word's piece always counts. */
static int data_pieces(crpm_media *m, const char *path, uint8_t **out)
{
    uint64_t size = m->size, n = (size + PIECE - 1) / PIECE;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    uint8_t *map = calloc(n ? n : 1, 1);
    int rc = map ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
    off_t off = 0;
    while (rc == 0 && fd >= 0 && (uint64_t)off < size) {
        off_t d = lseek(fd, off, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
            break; /* a hole to the end */
        off_t h = d < 0 ? -1 : lseek(fd, d, SEEK_HOLE);
        if (h < 0) {
            close(fd);
            fd = -1; /* cannot tell: all of it */
            break;
        }
        uint64_t end = (uint64_t)h < size ? (uint64_t)h : size;
        uint64_t i0 = (uint64_t)d / PIECE, i1 = (end + PIECE - 1) / PIECE;
        for (uint64_t i = i0; i < i1 && i < n; i++)
            map[i] = 1;
        off = h;
    }
    if (rc == 0 && fd < 0) {
        memset(map, 1, n ? n : 1);
        rc = size ? m->ops->reserve(m, 0, size) : CRPM_SUCCESS;
    } else if (rc == 0) {
        map[0] = 1;
        for (uint64_t i = 0; rc == 0 && i < n;) { /* one call per run of pieces */
            uint64_t j = i;
            while (j < n && map[j])
                j++;
            if (j > i)
                rc = m->ops->reserve(m, i * PIECE, (j < n ? j * PIECE : size) - i * PIECE);
            i = j + 1;
        }
    }
    if (fd >= 0)
        close(fd);
    if (rc) {
        free(map);
        map = NULL;
    }
    *out = map;
    return rc;
}

static int fingerprints(crpm_media *m, const char *path, uint64_t *n, uint64_t **out)
{
    static const char zero[PIECE];
    *n = (m->size + PIECE - 1) / PIECE;
    *out = NULL;
    uint8_t *data = NULL;
    int rc = data_pieces(m, path, &data);
    uint64_t *fp = rc ? NULL : malloc((*n ? *n : 1) * sizeof *fp);
    if (rc == 0 && !fp)
        rc = crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
    uint64_t zfp = crpm_crc64(zero, PIECE, 0);
    for (uint64_t i = 0; fp && i < *n; i++) {
        uint64_t off = i * PIECE, len = piece_len(m->size, i);
        uint64_t h;
        if (!data[i]) { /* a hole reads as zeros */
            h = len == PIECE ? zfp : crpm_crc64(zero, len, 0);
        } else if (off == 0) { /* the commit word is written apart: it counts as zero */
            char w[CRPM_WORD_LEN] = {0};
            h = crpm_crc64(m->base, CRPM_WORD_OFF, 0);
            h = crpm_crc64(w, sizeof w, h);
            h = crpm_crc64(m->base + CRPM_WORD_OFF + CRPM_WORD_LEN, len - CRPM_WORD_OFF - CRPM_WORD_LEN, h);
        } else {
            h = crpm_crc64(m->base + off, len, 0);
        }
        fp[i] = h;
    }
    free(data);
    *out = fp;
    return rc;
}

static int all_zero(const char *p, uint64_t n)
{
    static const char z[4096];
    for (uint64_t o = 0; o < n; o += sizeof z) {
        uint64_t k = n - o < sizeof z ? n - o : sizeof z;
        if (memcmp(p + o, z, k) != 0)
            return 0;
    }
    return 1;
}

/* Source side: the ranges to send given the destination's fingerprints. */
static int diff_ranges(const crpm_sync_src *src, const fp_hdr *h, const uint64_t *theirs, crpm_wlog *out)
{
    crpm_media *m = src->m;
    /* fingerprints only when there is something to compare with; either
     * way the pieces read (and sent from the mapping) are reserved */
    uint64_t n = (m->size + PIECE - 1) / PIECE, *mine = NULL;
    uint8_t *data = NULL;
    int rc = h->have ? fingerprints(m, src->path, &n, &mine) : data_pieces(m, src->path, &data);
    if (rc != 0)
        return rc;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = i * PIECE, len = piece_len(m->size, i);
        int same = h->have && i < h->npieces && piece_len(h->size, i) == len && theirs[i] == mine[i];
        /* a new destination is zero-filled: zero pieces (holes among them) need not travel */
        if (!same && (h->have || (data[i] && !all_zero(m->base + off, len)))) {
            if (off == 0) {
                crpm_wlog_note(out, 0, CRPM_WORD_OFF);
                crpm_wlog_note(out, CRPM_WORD_OFF + CRPM_WORD_LEN, len - CRPM_WORD_OFF - CRPM_WORD_LEN);
            } else {
                crpm_wlog_note(out, off, len);
            }
        }
    }
    free(mine);
    free(data);
    return out->lost ? crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory") : CRPM_SUCCESS;
}

/* Destination side: where the file is written (in place, or a new file at
 * a temporary name), then the data and the commit word. */
static int sync_receive(MPI_Comm comm, const crpm_sync_dst *d, int in_place, int failed, uint64_t *got,
                        int *rewritten)
{
    sync_hdr sh;
    int rc = crpm_recv_bytes(comm, d->peer, TAG_SYNC, &sh, sizeof sh, "level 2: receiving a sync header");
    if (rc != 0)
        return rc;
    if (sh.rc != 0)
        return crpm_error((int)sh.rc, "level 2: the source of %s (rank %d) failed: %.*s", d->path, d->peer,
                          (int)sizeof sh.why, sh.why);
    char tmp[CRPM_PATH_MAX + 16];
    crpm_media nm = {0}, *m = d->have;
    if (in_place && sh.size < m->size)
        in_place = 0;
    if (failed) {
        /* no fingerprints went out, so the data assumes an empty file:
         * received and dropped, the copy left as it is */
        rc = failed;
        in_place = 1;
    } else if (in_place) {
        /* the commit word is cleared (unusable until the sync is complete)
         * once the ranges have their storage: recv_ranges */
        if (sh.size > m->size)
            rc = m->ops->resize(m, sh.size);
    } else {
        static const char zero_hdr[CRPM_HDR_SIZE];
        snprintf(tmp, sizeof tmp, "%s.sync", d->path);
        nm.ops = d->backend;
        if (sh.size < CRPM_HDR_SIZE)
            rc = crpm_error(CRPM_ERR_TRUNCATED, "level 2: %s: a %llu-byte file is no container", d->path,
                            (unsigned long long)sh.size);
        if (rc == 0)
            rc = crpm_persist_create_file(tmp, sh.size, zero_hdr, CRPM_HDR_SIZE);
        if (rc == 0)
            rc = nm.ops->map(&nm, tmp);
        m = &nm;
    }
    /* the data follows even when we failed: receive it into scratch */
    crpm_media scratch = {0};
    crpm_progress pg;
    int me = 0;
    MPI_Comm_rank(comm, &me);
    crpm_progress_begin(&pg, CRPM_PG_L2, "L2 sync", sh.size, me);
    int rrc = recv_ranges(comm, d->peer, TAG_SYNC, rc == 0 ? m : &scratch, got, in_place && rc == 0);
    crpm_progress_end(&pg);
    if (rc == 0)
        rc = rrc;
    if (rc == 0)
        crpm_media_set_word(m, sh.word);
    if (!in_place && nm.base)
        nm.ops->unmap(&nm);
    if (!in_place && rc == 0)
        rc = crpm_durable_rename(tmp, d->path);
    if (!in_place && rc != 0)
        crpm_unlink_quiet(tmp);
    if (rc == 0)
        *rewritten = in_place ? 1 : 2;
    return rc;
}

int crpm_sync_files(MPI_Comm comm, const crpm_sync_src *src, int nsrc, const crpm_sync_dst *dst, int ndst,
                    uint64_t *sent, int *rewritten)
{
    crpm_sendq q = {0};
    int rc = CRPM_SUCCESS;
    char first[2048] = ""; /* the first error's message: later ones (a source's, received) would replace it */
#define KEEP(e) do { int e_ = (e); if (e_ != 0 && rc == 0) { rc = e_; snprintf(first, sizeof first, "%s", \
                     crpm_last_error()); } } while (0)
    /* 1. destinations send their fingerprints */
    int *failed = calloc((size_t)ndst + 1, sizeof *failed);
    if (!failed)
        KEEP(crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory"));
    for (int i = 0; i < ndst; i++) {
        rewritten[i] = 0;
        uint64_t n = 0, *fp = NULL;
        int have = dst[i].have && !dst[i].full;
        int frc = !failed ? rc : have ? fingerprints(dst[i].have, dst[i].path, &n, &fp) : CRPM_SUCCESS;
        if (frc != 0) {
            KEEP(frc);
            have = 0;
            if (failed)
                failed[i] = frc;
        }
        fp_hdr h = {(uint64_t)have, have ? dst[i].have->size : 0, n};
        crpm_sendq_post(&q, comm, dst[i].peer, TAG_FP, &h, sizeof h);
        if (have && n)
            crpm_sendq_post(&q, comm, dst[i].peer, TAG_FP, fp, n * sizeof *fp);
        free(fp);
    }
    /* 2. sources answer with the pieces that differ */
    for (int i = 0; i < nsrc; i++) {
        fp_hdr h;
        uint64_t *theirs = NULL;
        int lrc = crpm_recv_bytes(comm, src[i].peer, TAG_FP, &h, sizeof h, "level 2: receiving fingerprints");
        if (lrc == 0 && h.have && h.npieces) {
            theirs = malloc(h.npieces * sizeof *theirs);
            /* received even without memory, so the sender completes */
            lrc = crpm_recv_bytes(comm, src[i].peer, TAG_FP, theirs ? (void *)theirs : NULL,
                                  theirs ? h.npieces * sizeof *theirs : 0, "level 2: receiving fingerprints");
            if (!theirs && lrc == 0)
                lrc = crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
        }
        crpm_wlog w = {0};
        if (lrc == 0 && src[i].fail)
            lrc = src[i].fail;
        if (lrc == 0)
            lrc = diff_ranges(&src[i], &h, theirs, &w);
        crpm_wlog_normalize(&w);
        sync_hdr sh = {lrc, src[i].m->size, crpm_media_word(src[i].m), {0}};
        if (lrc != 0)
            snprintf(sh.why, sizeof sh.why, "%s", crpm_last_error());
        crpm_sendq_post(&q, comm, src[i].peer, TAG_SYNC, &sh, sizeof sh);
        if (lrc == 0)
            crpm_sendq_ranges(&q, comm, src[i].peer, TAG_SYNC, src[i].m->base, w.v, w.n);
        /* the range list was copied, the bytes are sent from the mapping */
        crpm_wlog_free(&w);
        free(theirs);
        KEEP(lrc);
    }
    /* 3. destinations receive */
    uint64_t got = 0;
    for (int i = 0; i < ndst; i++) {
        int lrc = sync_receive(comm, &dst[i], dst[i].have != NULL && !dst[i].full, failed ? failed[i] : rc, &got,
                               &rewritten[i]);
        KEEP(lrc);
    }
#undef KEEP
    free(failed);
    int wrc = crpm_sendq_wait(&q, "level 2: sync");
    if (sent)
        *sent += q.bytes;
    return rc ? crpm_error(rc, "%s", first) : wrc;
}

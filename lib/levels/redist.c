/* Redistribution of global datasets between decompositions (redist.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agree.h"
#include "error.h"
#include "mpi_error.h"
#include "redist.h"
#include "progress.h"

#define TAG_RUNS 7391

/* Linear index of global coordinates g inside box b (C order). */
static uint64_t lin_in(const crpm_rd_box *b, const uint64_t *g)
{
    uint64_t x = 0;
    for (int k = 0; k < b->nd; k++)
        x = x * b->cnt[k] + (g[k] - b->off[k]);
    return x;
}

uint64_t crpm_rd_runs(const crpm_rd_box *s, const crpm_rd_box *d, uint64_t e0, uint64_t e1, crpm_rd_run_fn fn,
                      void *arg)
{
    int nd = s->nd;
    uint64_t oi[CRPM_GLAYOUT_MAX_DIMS], ci[CRPM_GLAYOUT_MAX_DIMS], g[CRPM_GLAYOUT_MAX_DIMS], idx[CRPM_GLAYOUT_MAX_DIMS];
    if (s->gid != d->gid || nd != d->nd || e1 <= e0 || !crpm_box_intersect(nd, s->off, s->cnt, d->off, d->cnt, oi, ci))
        return 0;
    /* the intersection's first and last elements in s's order bound the rows to look at */
    for (int k = 0; k < nd; k++)
        g[k] = oi[k];
    uint64_t first = lin_in(s, g);
    for (int k = 0; k < nd; k++)
        g[k] = oi[k] + ci[k] - 1;
    uint64_t last = lin_in(s, g) + 1;
    if (last <= e0 || first >= e1)
        return 0;
    if (e0 < first)
        e0 = first;
    if (e1 > last)
        e1 = last;
    uint64_t L = s->cnt[nd - 1], jlo = oi[nd - 1] - s->off[nd - 1], jhi = jlo + ci[nd - 1], total = 0;
    uint64_t t = e0 / L, t1 = (e1 - 1) / L, r = t;
    for (int k = nd - 2; k >= 0; k--) { /* row t's coordinates inside s */
        idx[k] = r % s->cnt[k];
        r /= s->cnt[k];
    }
    for (; t <= t1; t++) {
        int in = 1;
        for (int k = 0; k < nd - 1 && in; k++)
            in = s->off[k] + idx[k] >= oi[k] && s->off[k] + idx[k] < oi[k] + ci[k];
        if (in) {
            uint64_t a = t * L + jlo, b = t * L + jhi;
            a = a < e0 ? e0 : a;
            b = b > e1 ? e1 : b;
            if (a < b) {
                for (int k = 0; k < nd - 1; k++)
                    g[k] = s->off[k] + idx[k];
                g[nd - 1] = s->off[nd - 1] + (a - t * L);
                fn(arg, a, lin_in(d, g), b - a);
                total += b - a;
            }
        }
        for (int k = nd - 2; k >= 0; k--) { /* next row */
            if (++idx[k] < s->cnt[k])
                break;
            idx[k] = 0;
        }
    }
    return total;
}

/* ---- run callbacks ---------------------------------------------------------- */
typedef struct pack_ctx {
    const char *win;       /* the window's bytes; element e0 first */
    uint64_t e0, esz;
    char *out;             /* NULL: count only */
    uint64_t bytes;
} pack_ctx;

static void pack_run(void *arg, uint64_t se, uint64_t de, uint64_t n)
{
    pack_ctx *p = arg;
    (void)de;
    if (p->out)
        memcpy(p->out + p->bytes, p->win + (se - p->e0) * p->esz, n * p->esz);
    p->bytes += n * p->esz;
}

/* This rank's own runs go from its window straight into place. */
typedef struct direct_ctx {
    const char *win;
    uint64_t e0, esz;
    char *dst;
} direct_ctx;

static void direct_run(void *arg, uint64_t se, uint64_t de, uint64_t n)
{
    direct_ctx *d = arg;
    memcpy(d->dst + de * d->esz, d->win + (se - d->e0) * d->esz, n * d->esz);
}

typedef struct unpack_ctx {
    const char *in;
    char *dst;
    uint64_t esz, bytes;
} unpack_ctx;

static void unpack_run(void *arg, uint64_t se, uint64_t de, uint64_t n)
{
    unpack_ctx *u = arg;
    (void)se;
    memcpy(u->dst + de * u->esz, u->in + u->bytes, n * u->esz);
    u->bytes += n * u->esz;
}

/* ---- rounds ------------------------------------------------------------------- */
/* Where each reader is in its sequence of windows. */
typedef struct cursor {
    int s;           /* source index, nsrc when done */
    uint64_t e;      /* next element of it */
} cursor;

static void cursor_skip(cursor *c, const crpm_rd_box *src, int nsrc, int rank)
{
    while (c->s < nsrc && (src[c->s].rank != rank || c->e >= crpm_box_volume(src[c->s].nd, src[c->s].cnt))) {
        c->s++;
        c->e = 0;
    }
}

/* Every rank learns whether a step failed anywhere (comm layer). */
static int rd_agree(MPI_Comm comm, int rc)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    return crpm_agree(comm, rank, rc, "redistribution");
}

typedef struct round_bufs {
    char *win, *send, *recv;
    size_t win_cap, send_cap, recv_cap;
    uint64_t *scount, *rcount, *roff;   /* per rank */
    cursor *cur;                        /* per rank: its next window */
    int *wsrc;                          /* per rank: source of its window this round (-1: none) */
    uint64_t *w0, *w1;
    MPI_Request *req;
} round_bufs;

static int ensure(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return CRPM_SUCCESS;
    char *n = realloc(*p, need);
    if (!n)
        return crpm_error(CRPM_ERR_NOMEM, "redistribution: out of memory for %zu bytes", need);
    *p = n;
    *cap = need;
    return CRPM_SUCCESS;
}

/* Bytes this rank sends to and receives from each rank in the round whose
 * windows b->wsrc/w0/w1 describe (both ends enumerate the same runs). */
static void round_sizes(int me, int size, const crpm_rd_box *src, const crpm_rd_box *dst, int ndst, round_bufs *b,
                        uint64_t *stot, uint64_t *rtot, uint64_t *wbytes)
{
    memset(b->scount, 0, sizeof *b->scount * (size_t)size);
    memset(b->rcount, 0, sizeof *b->rcount * (size_t)size);
    int ws = b->wsrc[me];
    const crpm_rd_box *s = ws >= 0 ? &src[ws] : NULL;
    *wbytes = s ? (b->w1[me] - b->w0[me]) * s->esz : 0;
    for (int i = 0; s && i < ndst; i++) {
        pack_ctx pc = {NULL, b->w0[me], s->esz, NULL, 0};
        crpm_rd_runs(s, &dst[i], b->w0[me], b->w1[me], pack_run, &pc);
        b->scount[dst[i].rank] += pc.bytes;
    }
    *stot = *rtot = 0;
    for (int r = 0; r < size; r++) {
        if (r != me)
            *stot += b->scount[r];
        int p = b->wsrc[r];
        b->roff[r] = *rtot;
        if (p < 0)
            continue;
        for (int i = 0; i < ndst; i++)
            if (dst[i].rank == me) {
                pack_ctx pc = {NULL, b->w0[r], src[p].esz, NULL, 0};
                crpm_rd_runs(&src[p], &dst[i], b->w0[r], b->w1[r], pack_run, &pc);
                b->rcount[r] += pc.bytes;
            }
        *rtot += b->rcount[r];
    }
}

/* One round: this rank's window out, the windows of the others in.  A
 * failed read still sends (what it has) so that nobody waits; the caller
 * agrees at the end. */
static int one_round(MPI_Comm comm, int me, int size, const crpm_rd_box *src, const crpm_rd_box *dst, int ndst,
                     void *const *ptrs, crpm_rd_read_fn rd, void *arg, round_bufs *b, uint64_t *sent,
                     uint64_t *received)
{
    int rc = CRPM_SUCCESS;
    uint64_t stot, rtot, wbytes;
    round_sizes(me, size, src, dst, ndst, b, &stot, &rtot, &wbytes);
    int ws = b->wsrc[me];
    const crpm_rd_box *s = ws >= 0 ? &src[ws] : NULL;
    if (s)
        rc = rd(arg, s->handle, b->w0[me], b->w1[me], b->win);
    /* receives first, then per destination rank its runs in destination
     * order; the own runs are copied from the window while the rest flies */
    int nreq = 0;
    for (int r = 0; r < size; r++)
        if (r != me && b->rcount[r])
            MPI_Irecv(b->recv + b->roff[r], (int)b->rcount[r], MPI_BYTE, r, TAG_RUNS, comm, &b->req[nreq++]);
    uint64_t soff = 0;
    for (int r = 0; s && r < size; r++) {
        if (!b->scount[r] || r == me)
            continue;
        pack_ctx pc = {b->win, b->w0[me], s->esz, b->send + soff, 0};
        for (int i = 0; i < ndst; i++)
            if (dst[i].rank == r)
                crpm_rd_runs(s, &dst[i], b->w0[me], b->w1[me], pack_run, &pc);
        MPI_Isend(b->send + soff, (int)pc.bytes, MPI_BYTE, r, TAG_RUNS, comm, &b->req[nreq++]);
        soff += pc.bytes;
    }
    for (int i = 0; s && b->scount[me] && i < ndst; i++)
        if (dst[i].rank == me) {
            direct_ctx dc = {b->win, b->w0[me], s->esz, ptrs[dst[i].handle]};
            crpm_rd_runs(s, &dst[i], b->w0[me], b->w1[me], direct_run, &dc);
        }
    int mrc = MPI_Waitall(nreq, b->req, MPI_STATUSES_IGNORE);
    if (mrc != MPI_SUCCESS && rc == 0)
        rc = crpm_mpi_fail(mrc, "redistribution: MPI_Waitall");
    *sent += stot;
    *received += rtot - b->rcount[me];
    /* unpack, per reader in rank order, per own destination in order */
    for (int r = 0; r < size; r++) {
        int p = b->wsrc[r];
        if (p < 0 || !b->rcount[r] || r == me)
            continue;
        unpack_ctx u = {b->recv + b->roff[r], NULL, src[p].esz, 0};
        for (int i = 0; i < ndst; i++)
            if (dst[i].rank == me) {
                u.dst = ptrs[dst[i].handle];
                crpm_rd_runs(&src[p], &dst[i], b->w0[r], b->w1[r], unpack_run, &u);
            }
    }
    return rc;
}

/* The next round's windows (every rank's next one); 0 when all are done. */
static int next_windows(const crpm_rd_box *src, int nsrc, int size, round_bufs *b)
{
    int any = 0;
    for (int r = 0; r < size; r++) {
        cursor *c = &b->cur[r];
        b->wsrc[r] = -1;
        if (c->s >= nsrc)
            continue;
        const crpm_rd_box *s = &src[c->s];
        uint64_t vol = crpm_box_volume(s->nd, s->cnt);
        b->wsrc[r] = c->s;
        b->w0[r] = c->e;
        b->w1[r] = c->e + s->win < vol ? c->e + s->win : vol;
        c->e = b->w1[r];
        cursor_skip(c, src, nsrc, r);
        any = 1;
    }
    return any;
}

int crpm_redistribute(MPI_Comm comm, const crpm_rd_box *src, int nsrc, const crpm_rd_box *dst, int ndst,
                      void *const *ptrs, crpm_rd_read_fn rd, void *arg, uint64_t *sent, uint64_t *received)
{
    int me = 0, size = 0, rc = CRPM_SUCCESS;
    uint64_t s_dummy = 0, r_dummy = 0;
    sent = sent ? sent : &s_dummy;
    received = received ? received : &r_dummy;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    round_bufs b;
    memset(&b, 0, sizeof b);
    b.scount = calloc((size_t)size, sizeof *b.scount);
    b.rcount = calloc((size_t)size, sizeof *b.rcount);
    b.roff = calloc((size_t)size, sizeof *b.roff);
    b.cur = calloc((size_t)size, sizeof *b.cur);
    b.wsrc = calloc((size_t)size, sizeof *b.wsrc);
    b.w0 = calloc((size_t)size, sizeof *b.w0);
    b.w1 = calloc((size_t)size, sizeof *b.w1);
    b.req = calloc(2 * (size_t)size + 1, sizeof *b.req);
    if (!b.scount || !b.rcount || !b.roff || !b.cur || !b.wsrc || !b.w0 || !b.w1 || !b.req)
        rc = crpm_error(CRPM_ERR_NOMEM, "redistribution: out of memory");
    for (int i = 0; rc == 0 && i < nsrc; i++)
        if (src[i].win == 0 || src[i].nd < 1 || src[i].rank < 0 || src[i].rank >= size)
            rc = crpm_error(CRPM_ERR_INVAL, "redistribution: source %d is malformed", i);
    for (int i = 0; rc == 0 && i < ndst; i++)
        if (dst[i].rank < 0 || dst[i].rank >= size || (dst[i].rank == me && !ptrs[dst[i].handle] &&
                                                       crpm_box_volume(dst[i].nd, dst[i].cnt)))
            rc = crpm_error(CRPM_ERR_INVAL, "redistribution: destination %d is malformed", i);
    /* the largest round decides the buffers, allocated once: no round can
     * fail halfway for memory, so the rounds need no agreement of their own */
    uint64_t wmax = 0, smax = 0, rmax = 0, rtot = 0;
    for (int r = 0; rc == 0 && r < size; r++)
        cursor_skip(&b.cur[r], src, nsrc, r);
    while (rc == 0 && next_windows(src, nsrc, size, &b)) {
        uint64_t st, rt, wb;
        round_sizes(me, size, src, dst, ndst, &b, &st, &rt, &wb);
        wmax = wb > wmax ? wb : wmax;
        smax = st > smax ? st : smax;
        rmax = rt > rmax ? rt : rmax;
        rtot += rt;
        for (int r = 0; r < size; r++)
            if (b.scount[r] > INT_MAX || b.rcount[r] > INT_MAX)
                rc = crpm_error(CRPM_ERR_RANGE, "redistribution: more than %d bytes in one message: smaller windows",
                                INT_MAX);
    }
    if (rc == 0)
        rc = ensure(&b.win, &b.win_cap, wmax + 1);
    if (rc == 0)
        rc = ensure(&b.send, &b.send_cap, smax + 1);
    if (rc == 0)
        rc = ensure(&b.recv, &b.recv_cap, rmax + 1);
    rc = rd_agree(comm, rc);
    if (b.cur)
        memset(b.cur, 0, sizeof *b.cur * (size_t)size);
    for (int r = 0; rc == 0 && r < size; r++)
        cursor_skip(&b.cur[r], src, nsrc, r);
    int lrc = CRPM_SUCCESS;
    crpm_progress pg; /* rank 0 prints it at verbosity 2 (progress.h) */
    crpm_progress_begin(&pg, CRPM_PG_RESHAPE, "reshape", rtot, me);
    while (rc == 0 && next_windows(src, nsrc, size, &b)) {
        uint64_t before = *received;
        int orc = one_round(comm, me, size, src, dst, ndst, ptrs, rd, arg, &b, sent, received);
        lrc = lrc ? lrc : orc;
        crpm_progress_tick(*received - before);
    }
    crpm_progress_end(&pg);
    if (rc == 0)
        rc = rd_agree(comm, lrc);
    free(b.win);
    free(b.send);
    free(b.recv);
    free(b.scount);
    free(b.rcount);
    free(b.roff);
    free(b.cur);
    free(b.wsrc);
    free(b.w0);
    free(b.w1);
    free(b.req);
    return rc;
}

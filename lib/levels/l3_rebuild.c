/* Level 3's rebuild of lost containers (l3_internal.h).
 *
 * Only defined bytes travel and are decoded.  A lost rank does not know its
 * region table until it has its meta area back, so the rebuild runs in
 * phases:
 *
 *   prefix  the first PREFIX bytes of image segment 0 (the meta header and,
 *           usually, the whole region table); nothing to ask for
 *   meta    the rest of the meta area, only when some lost rank's is longer
 *   data    the regions' segments
 *
 * In the meta and data phases each lost rank first tells the sources of
 * each of its codewords how many bytes of every row (parity segment) it
 * needs.  A lost unit is the sum over the k sources of coefficient x unit,
 * so the sources decode it in a chain: per lost unit and row, the sources
 * in decoder order (agreed: from the layout and the lost ranks) each add
 * their share to the running sum received from the previous one (the first
 * starts it) and pass it on; the last sends the finished bytes to the lost
 * rank, which receives them straight into its image.  The lost rank thus
 * takes in its image once (not k times) and the multiply-adds are spread
 * over the survivors.  A source adds min(the bytes it defines there, need):
 * the code has zeros beyond them; a sum travels as long as its longest
 * share so far, and is padded with zeros by whoever receives it.
 *
 * A source works through windows of W rows (two windows of buffers, reused:
 * one is computed while the other's sends drain), its chain steps in the
 * order (position in the chain, codeword, lost unit, row), which every
 * rank follows, so each step waits only on steps before it and messages
 * between two ranks on one codeword's tag are sent and received in the
 * same order.  The lost rank keeps LOST_ROWS rows of receives posted.
 *
 * Which messages exist follows from agreed numbers (rows per phase), the
 * decoders and the needs sent, never from a rank's own state, so a rank that
 * fails still sends and receives what the others expect; everything a phase
 * allocates is allocated before the agreement that precedes it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "agree.h"
#include "clock.h"
#include "l3_internal.h"
#include "mpi_error.h"
#include "mpi_wait.h"
#include "progress.h"

#define TAG_L3_NEED 7700       /* + codeword: a lost rank's needs per row */
#define PREFIX (16u << 10)
#define RB_ALIGN 64u
/* A source's buffers for the sums in flight (both windows).  They are fresh
 * memory, and a rebuild of fewer rows than they hold touches each cell once,
 * so first-touch faults grow with them: 2 MiB (5 rows of 3 chains of 64 KiB)
 * instead of 8 took the apps' sizes from 14 to 12 ms (HPCCG, 4.5 MiB per
 * rank, median of 10) and cost nothing at 36 MiB (50 -> 48 ms). */
#define WINDOW_BYTES (2ull << 20)
#define LOST_ROWS 64u
enum { PH_PREFIX, PH_META, PH_DATA };

typedef struct rb_src {        /* this rank as a source of one codeword */
    int unit;                  /* data index, or k + parity row; -1: not a source */
    int pos;                   /* its place in the decoder's sources: the chain */
    int j;                     /* the codeword's slot among this rank's (data unit) */
    uint64_t *need;            /* nlost x rows: what each lost unit of the codeword needs */
} rb_src;

typedef struct rb_task {       /* one chain this rank is a step of: (codeword, lost unit) */
    int c, q;
} rb_task;

typedef struct rb {
    l3_state *s;
    MPI_Comm comm;
    int rank, lost_me;
    uint64_t seg, bound, maxrows; /* bound: image segments no image can exceed */
    crpm_l3_decoder *dec;      /* K: codewords with a lost data unit */
    rb_src *src;               /* K */
    image im;                  /* survivor: its image */
    rb_task *task;             /* survivor: its chains, by (position, codeword, lost unit) */
    int ntask;
    unsigned char *slab;       /* survivor: 2 windows x ntask x W cells of cell bytes */
    size_t cell;
    uint64_t W;
    /* lost rank: its image as rebuilt */
    unsigned char *pre;        /* PREFIX bytes of segment 0 */
    unsigned char *meta;       /* meta_len bytes (pre when it holds them all) */
    uint64_t meta_len, meta_segs, nsegs, user_id, p0;
    crpm_array *reg;
    uint64_t *first, nreg;     /* first image segment of each region */
    char *buf;                 /* the regions, each at reg[i].ptr */
    uint64_t *myneed;          /* k x rows, sent to the sources */
    MPI_Request *req;
    uint64_t *sent;
} rb;

/* Lost rank: the bytes of image segment s this phase rebuilds (0: none),
 * and where they go. */
static uint64_t rb_want(const rb *r, int phase, uint64_t s, unsigned char **dst)
{
    uint64_t seg = r->seg;
    *dst = NULL;
    if (phase == PH_PREFIX) {
        *dst = r->pre;
        return s == 0 ? r->p0 : 0;
    }
    if (phase == PH_META) {
        if (s >= r->meta_segs || r->meta == r->pre)
            return 0;
        *dst = r->meta + s * seg;
        return r->meta_len - s * seg < seg ? r->meta_len - s * seg : seg;
    }
    if (s < r->meta_segs || s >= r->nsegs || !r->nreg)
        return 0;
    uint64_t lo = 0, hi = r->nreg - 1;
    while (lo < hi) { /* the last region starting at or before s */
        uint64_t mid = (lo + hi + 1) / 2;
        if (r->first[mid] <= s)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint64_t k = s - r->first[lo], bytes = crpm_array_bytes(&r->reg[lo]);
    if (k * seg >= bytes)
        return 0;
    *dst = (unsigned char *)r->reg[lo].ptr + k * seg;
    return bytes - k * seg < seg ? bytes - k * seg : seg;
}

/* Rank of unit u of codeword c. */
static int rb_rank(const l3_state *s, int c, int u)
{
    return s->grp[u < s->k ? crpm_l3_data_member(&s->lay, c, u) : crpm_l3_holder(&s->lay, c, u - s->k)];
}

/* One receive waited for without holding a core; *n: the bytes received
 * (0 after an error).  Returns MPI's code. */
static int rb_wait1(MPI_Request *rq, uint64_t *n)
{
    MPI_Status st;
    int cnt = 0, mrc = crpm_mpi_idle_wait(1, rq, &st);
    *n = 0;
    if (mrc == MPI_SUCCESS && MPI_Get_count(&st, MPI_BYTE, &cnt) == MPI_SUCCESS && cnt > 0)
        *n = (uint64_t)cnt;
    return mrc;
}

/* Survivor: the bytes of its unit of codeword c at row t (min(defined, need)).
 * A data unit is checked against its container's CRCs before it is used
 * (restart checked the whole container, but only this check covers the
 * bytes as they are read): one that fails is not used and the rebuild
 * fails with CRPM_ERR_CORRUPT, never decoding from it. */
static const void *rb_bytes(rb *r, const rb_src *x, uint64_t t, uint64_t need, uint64_t *n, int *rc)
{
    l3_state *s = r->s;
    const void *p = NULL;
    *n = 0;
    if (x->unit < s->k) {
        uint32_t ph;
        uint64_t u = t * (uint64_t)s->k + (uint64_t)x->j, covered = 0;
        p = l3_unit_bytes(s->own, &r->im, u, n, &ph, &covered);
        *n = p ? *n : 0;
        int64_t bad = -1;
        if (p && ph != CRPM_NO_PHYS)
            bad = crpm_crc_check(s->own, ph, (uint64_t)((const char *)p - crpm_seg_addr(s->own, ph)), *n, covered);
        if (bad >= 0) {
            *rc = *rc ? *rc : crpm_error(CRPM_ERR_CORRUPT, "level 3: %s fails its CRC32C check in physical segment "
                                         "%u at byte %lld: rank %d cannot serve the rebuild", s->own->path, ph,
                                         (long long)bad, s->grp[s->g]);
            *n = 0;
            return NULL;
        }
    } else {
        uint64_t off = t * r->seg;
        *n = s->plen > off ? s->plen - off : 0;
        p = *n ? (const void *)(s->par[x->unit - s->k] + off) : NULL;
    }
    *n = *n < need ? *n : need;
    *n = *n < r->seg ? *n : r->seg;
    return p;
}

/* Survivor: its steps of every chain of a phase of nrows rows. */
static int rb_chain(rb *r, uint64_t nrows, int rc)
{
    l3_state *s = r->s;
    int k = s->k, nsend[2] = {0, 0}, mrc;
    uint64_t W = r->W;
    size_t per = (size_t)W * (size_t)r->ntask;
    crpm_progress_total(nrows * (uint64_t)r->ntask * r->seg); /* an upper bound: rows may be shorter */
    for (uint64_t t0 = 0, w = 0; t0 < nrows; t0 += W, w++) {
        uint64_t t1 = t0 + W < nrows ? t0 + W : nrows;
        int b = (int)(w & 1);
        MPI_Request *rrq = r->req, *srq = r->req + per * (size_t)(1 + b);
        unsigned char *slab = r->slab + per * (size_t)b * r->cell;
        /* this window's buffers are free once the sends of two windows ago are out */
        mrc = nsend[b] ? crpm_mpi_idle_wait(nsend[b], srq, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
        if (mrc != MPI_SUCCESS)
            rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Waitall");
        nsend[b] = 0;
        for (int i = 0; i < r->ntask; i++) {
            int c = r->task[i].c, q = r->task[i].q, pos = r->src[c].pos;
            for (uint64_t t = t0; t < t1; t++) {
                size_t ci = (size_t)i * W + (size_t)(t - t0);
                uint64_t need = r->src[c].need[(size_t)q * nrows + t];
                rrq[ci] = MPI_REQUEST_NULL;
                if (!need || pos == 0)
                    continue;
                mrc = MPI_Irecv(slab + ci * r->cell, (int)need, MPI_BYTE, rb_rank(s, c, r->dec[c].src[pos - 1]),
                                TAG_L3 + c, r->comm, &rrq[ci]);
                if (mrc != MPI_SUCCESS) {
                    rrq[ci] = MPI_REQUEST_NULL;
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Irecv");
                }
            }
        }
        for (int i = 0; i < r->ntask; i++) {
            int c = r->task[i].c, q = r->task[i].q, pos = r->src[c].pos;
            const rb_src *x = &r->src[c];
            int to = pos < k - 1 ? rb_rank(s, c, r->dec[c].src[pos + 1])
                                 : s->grp[crpm_l3_data_member(&s->lay, c, r->dec[c].lost[q])];
            for (uint64_t t = t0; t < t1; t++) {
                size_t ci = (size_t)i * W + (size_t)(t - t0);
                unsigned char *sum = slab + ci * r->cell;
                uint64_t need = x->need[(size_t)q * nrows + t], got = 0, n;
                if (!need)
                    continue;
                if (pos > 0 && (mrc = rb_wait1(&rrq[ci], &got)) != MPI_SUCCESS)
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Wait");
                const void *mine = rb_bytes(r, x, t, need, &n, &rc);
                if (n > got && pos > 0) /* the sum so far is zero there */
                    memset(sum + got, 0, n - got);
                if (n)
                    crpm_l3_decode_part(&r->dec[c], q, pos, n, mine, sum, pos == 0);
                got = n > got ? n : got;
                mrc = MPI_Isend(sum, (int)got, MPI_BYTE, to, TAG_L3 + c, r->comm, &srq[nsend[b]++]);
                if (mrc != MPI_SUCCESS) {
                    nsend[b]--;
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Isend");
                }
                *r->sent += got;
                crpm_progress_tick(got);
            }
        }
    }
    for (int b = 0; b < 2; b++) {
        mrc = nsend[b] ? crpm_mpi_idle_wait(nsend[b], r->req + per * (size_t)(1 + b), MPI_STATUSES_IGNORE) : MPI_SUCCESS;
        if (mrc != MPI_SUCCESS)
            rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Waitall");
    }
    return rc;
}

/* Lost rank: posts the receives of row t, straight into its image. */
static int rb_post(rb *r, int phase, uint64_t t)
{
    l3_state *s = r->s;
    int k = s->k, rc = CRPM_SUCCESS;
    MPI_Request *rq = r->req + (size_t)(t % LOST_ROWS) * (size_t)k;
    for (int j = 0; j < k; j++) {
        int c = crpm_l3_codeword_of(&s->lay, s->g, j);
        unsigned char *dst;
        uint64_t want = rb_want(r, phase, t * (uint64_t)k + (uint64_t)j, &dst);
        rq[j] = MPI_REQUEST_NULL;
        if (!want)
            continue;
        int mrc = MPI_Irecv(dst, (int)want, MPI_BYTE, rb_rank(s, c, r->dec[c].src[k - 1]), TAG_L3 + c, r->comm,
                            &rq[j]);
        if (mrc != MPI_SUCCESS) {
            rq[j] = MPI_REQUEST_NULL;
            rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Irecv");
        }
    }
    return rc;
}

/* Lost rank: its units of a phase of nrows rows, as the chains finish them. */
static int rb_collect(rb *r, int phase, uint64_t nrows, int rc)
{
    int k = r->s->k;
    crpm_progress_total(nrows * (uint64_t)k * r->seg);
    for (uint64_t t = 0; t < nrows && t < LOST_ROWS; t++) {
        int lrc = rb_post(r, phase, t);
        rc = rc ? rc : lrc;
    }
    for (uint64_t t = 0; t < nrows; t++) {
        MPI_Request *rq = r->req + (size_t)(t % LOST_ROWS) * (size_t)k;
        for (int j = 0; j < k; j++) {
            unsigned char *dst;
            uint64_t want = rb_want(r, phase, t * (uint64_t)k + (uint64_t)j, &dst), got = 0;
            if (!want)
                continue;
            int mrc = rb_wait1(&rq[j], &got);
            if (mrc != MPI_SUCCESS)
                rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Wait");
            /* no source defined bytes there: the code has zeros */
            if (got < want)
                memset(dst + got, 0, want - got);
            crpm_progress_tick(want);
        }
        if (t + LOST_ROWS < nrows) {
            int lrc = rb_post(r, phase, t + LOST_ROWS);
            rc = rc ? rc : lrc;
        }
    }
    return rc;
}

/* Collective: one phase of nrows rows.  Returns this rank's first error;
 * the phase runs to its end whatever happens. */
static int rb_phase(rb *r, int phase, uint64_t nrows, int rc)
{
    l3_state *s = r->s;
    MPI_Comm comm = r->comm;
    int K = s->lay.K, k = s->k, nreq = 0, mrc;
    if (nrows > r->maxrows) /* agreed from the bound: cannot happen */
        return rc ? rc : crpm_error(CRPM_ERR_STATE, "level 3: %llu rows to rebuild, at most %llu expected",
                                   (unsigned long long)nrows, (unsigned long long)r->maxrows);
    /* what each lost unit needs: known for the prefix, told for the rest */
    if (phase == PH_PREFIX) {
        for (int c = 0; c < K; c++)
            for (int q = 0; r->src[c].unit >= 0 && q < r->dec[c].nlost; q++) {
                int g = crpm_l3_data_member(&s->lay, c, r->dec[c].lost[q]);
                r->src[c].need[(size_t)q * nrows] = crpm_l3_codeword_of(&s->lay, g, 0) == c ? r->p0 : 0;
            }
    } else if (r->lost_me) {
        for (int j = 0; j < k; j++) {
            int c = crpm_l3_codeword_of(&s->lay, s->g, j);
            uint64_t *v = r->myneed + (size_t)j * nrows;
            unsigned char *dst;
            for (uint64_t t = 0; t < nrows; t++)
                v[t] = rb_want(r, phase, t * (uint64_t)k + (uint64_t)j, &dst);
            for (int q = 0; q < k; q++) {
                mrc = MPI_Isend(v, (int)nrows * 8, MPI_BYTE, rb_rank(s, c, r->dec[c].src[q]), TAG_L3_NEED + c, comm,
                                &r->req[nreq++]);
                if (mrc != MPI_SUCCESS) {
                    nreq--;
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Isend");
                }
            }
        }
    } else {
        for (int c = 0; c < K; c++)
            for (int q = 0; r->src[c].unit >= 0 && q < r->dec[c].nlost; q++) {
                int from = s->grp[crpm_l3_data_member(&s->lay, c, r->dec[c].lost[q])], len = 0;
                MPI_Status stt;
                uint64_t *v = r->src[c].need + (size_t)q * nrows;
                mrc = MPI_Recv(v, (int)nrows * 8, MPI_BYTE, from, TAG_L3_NEED + c, comm, &stt);
                if (mrc == MPI_SUCCESS)
                    MPI_Get_count(&stt, MPI_BYTE, &len);
                if (mrc != MPI_SUCCESS || (uint64_t)len != nrows * 8) {
                    memset(v, 0, nrows * 8);
                    rc = rc ? rc : mrc != MPI_SUCCESS ? crpm_mpi_fail(mrc, "level 3: MPI_Recv")
                                                      : crpm_error(CRPM_ERR_STATE, "level 3: short need list");
                }
            }
    }
    mrc = nreq ? MPI_Waitall(nreq, r->req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS)
        rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Waitall");
    return r->lost_me ? rb_collect(r, phase, nrows, rc) : rb_chain(r, nrows, rc);
}

/* Lost rank: the region table from the meta area (all meta_len bytes in
 * r->meta), checked against the size any image can have; the regions get
 * their place in r->buf. */
static int rb_table(rb *r, int rank)
{
    const unsigned char *m = r->meta;
    uint64_t seg = r->seg, n = r->nreg, next = r->meta_segs, total = 0;
    r->reg = calloc(n + 1, sizeof *r->reg);
    r->first = calloc(n + 1, sizeof *r->first);
    if (!r->reg || !r->first)
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *x = m + META_REC * (1 + i);
        crpm_array *a = &r->reg[i];
        memcpy(&a->id, x, 4);
        memcpy(&a->type_code, x + 4, 4);
        a->elem_size = l3_get64(x + 8);
        a->count = l3_get64(x + 16);
        if (!a->elem_size || a->count > r->bound * seg / a->elem_size)
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt checkpoint of rank %d is not valid", rank);
        uint64_t b = crpm_array_bytes(a), ns = (b + seg - 1) / seg;
        if (ns > r->bound - next)
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt checkpoint of rank %d is not valid", rank);
        r->first[i] = next;
        next += ns;
        a->ptr = (void *)(uintptr_t)total; /* an offset until buf exists */
        total += (b + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN;
    }
    r->nsegs = next;
    /* every byte is written by the decode: no zeroing */
    if (!(r->buf = malloc(total ? total : 1)))
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for the rebuilt checkpoint (%llu bytes)",
                          (unsigned long long)total);
    for (uint64_t i = 0; i < n; i++)
        r->reg[i].ptr = r->buf + (uintptr_t)r->reg[i].ptr;
    return CRPM_SUCCESS;
}

/* Lost rank, after the prefix phase: the meta header; when the whole meta
 * area is there, the region table too.  *more: the meta area is longer. */
static int rb_header(rb *r, int rank, int *more)
{
    *more = 0;
    const unsigned char *m = r->pre;
    if (r->p0 < META_REC || memcmp(m, META_MAGIC, 8) != 0)
        return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt checkpoint of rank %d has no valid header", rank);
    uint64_t n = l3_get64(m + 8);
    if (n > (r->bound * r->seg - META_REC) / META_REC)
        return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt checkpoint of rank %d is not valid", rank);
    r->nreg = n;
    r->user_id = l3_get64(m + 16);
    r->meta_len = META_REC * (1 + n);
    r->meta_segs = (r->meta_len + r->seg - 1) / r->seg;
    if (r->meta_len <= r->p0) {
        r->meta = r->pre;
        return rb_table(r, rank);
    }
    *more = 1;
    if (!(r->meta = malloc(r->meta_len)))
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    return CRPM_SUCCESS;
}

/* Collective: the agreed maxima of v[1..n-1] (v[0] unused); rc is this
 * rank's error. */
static int rb_agree(const rb *r, int rc, int64_t *v, int n)
{
    int64_t neg[3];
    for (int i = 1; i < n; i++)
        neg[i - 1] = -v[i]; /* the agreement reduces with MIN */
    rc = crpm_agree_ext(r->comm, r->rank, rc, "level 3: the rebuild", neg, n - 1);
    for (int i = 1; rc == 0 && i < n; i++)
        v[i] = -neg[i - 1];
    return rc;
}

static uint64_t rows_of(uint64_t segs, int k) { return (segs + (uint64_t)k - 1) / (uint64_t)k; }

/* Per codeword of this group with a lost data unit: the decoder, and which
 * unit this rank contributes (survivors). */
static int rb_decoders(rb *r, const int64_t *lost, const int64_t *usable, int me)
{
    l3_state *s = r->s;
    int K = s->lay.K, M = s->lay.M, k = s->k, rc = CRPM_SUCCESS;
    for (int c = 0; rc == 0 && c < K; c++) {
        int avail[255], any = 0;
        for (int i = 0; i < k; i++) {
            avail[i] = !lost[s->grp[crpm_l3_data_member(&s->lay, c, i)]];
            any |= !avail[i];
        }
        for (int h = 0; h < M; h++) {
            int hr = s->grp[crpm_l3_holder(&s->lay, c, h)];
            avail[k + h] = !lost[hr] && usable[hr];
        }
        if (!any)
            continue;
        if ((rc = crpm_l3_decoder_init(&r->dec[c], &s->code, avail)) != 0)
            break;
        int di = crpm_l3_data_index(&s->lay, c, s->g), pr = crpm_l3_parity_row(&s->lay, c, s->g), unit = -1;
        if (r->lost_me)
            continue;
        if (di >= 0)
            unit = di;
        else if (pr >= 0)
            unit = k + pr;
        rb_src *x = &r->src[c];
        for (int q = 0; unit >= 0 && q < k; q++)
            if (r->dec[c].src[q] == unit) {
                x->unit = unit;
                x->pos = q;
                r->ntask += r->dec[c].nlost;
            }
        if (x->unit >= k && !s->par_epoch) /* usable says otherwise: the chain needs it */
            rc = crpm_error(CRPM_ERR_STATE, "level 3: parity of codeword %d is missing on rank %d", c, me);
        while (di >= 0 && crpm_l3_codeword_of(&s->lay, s->g, x->j) != c)
            x->j++;
        if (x->unit >= 0 && !(x->need = malloc(sizeof(uint64_t) * (size_t)r->dec[c].nlost)))
            rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    }
    return rc;
}

/* Survivor: its chains in the order every rank works through them, and the
 * buffers of its windows; every rank: its requests. */
static int rb_buffers(rb *r)
{
    int K = r->s->lay.K, k = r->s->k;
    if (r->ntask && !(r->task = malloc(sizeof *r->task * (size_t)r->ntask)))
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    for (int p = 0, n = 0; p < k; p++)
        for (int c = 0; c < K; c++)
            for (int q = 0; r->src[c].unit >= 0 && r->src[c].pos == p && q < r->dec[c].nlost; q++)
                r->task[n++] = (rb_task){c, q};
    r->cell = (size_t)((r->seg + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN);
    r->W = r->ntask ? WINDOW_BYTES / (2 * r->cell * (size_t)r->ntask) : 1;
    r->W = r->W ? r->W : 1;
    size_t nreq = r->lost_me ? (size_t)LOST_ROWS * (size_t)k : 3 * (size_t)r->W * (size_t)r->ntask;
    nreq = nreq > (size_t)(k * k) ? nreq : (size_t)(k * k);
    if (!(r->req = malloc(sizeof *r->req * nreq)))
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    if (r->ntask && !(r->slab = malloc(2 * (size_t)r->W * (size_t)r->ntask * r->cell)))
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for %zu bytes of rebuild buffers",
                          2 * (size_t)r->W * (size_t)r->ntask * r->cell);
    return CRPM_SUCCESS;
}

/* Room for the needs of any phase (survivors: per codeword, lost rank: its own). */
static int rb_needs(rb *r)
{
    for (int c = 0; c < r->s->lay.K; c++) {
        if (r->src[c].unit < 0)
            continue;
        uint64_t *n = realloc(r->src[c].need, sizeof *n * (size_t)r->dec[c].nlost * (size_t)r->maxrows);
        if (!n)
            return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
        r->src[c].need = n;
    }
    if (r->lost_me && !(r->myneed = malloc(sizeof *r->myneed * (size_t)r->s->k * (size_t)r->maxrows)))
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    return CRPM_SUCCESS;
}

/* Collective: the phases, after the agreement on the bound. */
static int rb_phases(rb *r, int me, int rc)
{
    int k = r->s->k, more = 0;
    /* rows of the meta phase, rows of the data phase (known unless more) */
    int64_t v[3] = {0, 0, 0};
    if (rc == 0 && r->bound) {
        rc = rb_phase(r, PH_PREFIX, 1, rc);
        if (rc == 0 && r->lost_me)
            rc = rb_header(r, me, &more);
        if (rc == 0)
            rc = rb_needs(r);
        v[1] = more ? (int64_t)rows_of(r->meta_segs, k) : 0;
        v[2] = r->lost_me && !more ? (int64_t)rows_of(r->nsegs, k) : 0;
        rc = rb_agree(r, rc, v, 3);
    }
    if (rc == 0 && r->bound && v[1]) {
        rc = rb_phase(r, PH_META, (uint64_t)v[1], rc);
        if (rc == 0 && more)
            rc = rb_table(r, me);
        v[2] = r->lost_me ? (int64_t)rows_of(r->nsegs, k) : 0;
        rc = rb_agree(r, rc, v, 3);
    }
    if (rc == 0 && r->bound)
        rc = rb_phase(r, PH_DATA, (uint64_t)v[2], rc);
    if (rc == 0 && r->lost_me && !r->bound)
        rc = crpm_error(CRPM_ERR_MISSING, "level 3: nothing to rebuild rank %d from", me);
    return rc;
}

static void rb_free(rb *r)
{
    for (int c = 0; c < r->s->lay.K && r->dec && r->src; c++) {
        crpm_l3_decoder_free(&r->dec[c]);
        free(r->src[c].need);
    }
    if (r->meta != r->pre)
        free(r->meta);
    free(r->pre);
    free(r->reg);
    free(r->first);
    free(r->buf);
    free(r->myneed);
    free(r->slab);
    free(r->task);
    free(r->dec);
    free(r->src);
    free(r->req);
    l3_image_free(&r->im);
}

int l3_rebuild(crpm_level *lv, const int64_t *lost, const int64_t *usable, l3_image *img, uint64_t *sent,
               double *seconds)
{
    l3_state *s = l3_of(lv);
    int K = s->lay.K, k = s->k, me = lv->env->rank;
    memset(img, 0, sizeof *img);
    *seconds = 0;
    rb r = {.s = s, .comm = lv->env->comm, .rank = me, .lost_me = lost[me] != 0, .seg = s->unit, .sent = sent};
    r.p0 = PREFIX < r.seg ? PREFIX : r.seg;
    int rc = CRPM_SUCCESS;
    if (!r.lost_me)
        rc = s->own ? l3_image_of(s->own, s->unit, &r.im) : crpm_error(CRPM_ERR_STATE, "level 3: no container attached");
    r.dec = calloc((size_t)K, sizeof *r.dec);
    r.src = calloc((size_t)K, sizeof *r.src);
    r.pre = malloc(PREFIX);
    if (rc == 0 && (!r.dec || !r.src || !r.pre))
        rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    for (int c = 0; r.src && c < K; c++)
        r.src[c].unit = -1;
    if (rc == 0)
        rc = rb_decoders(&r, lost, usable, me);
    if (rc == 0)
        rc = rb_buffers(&r);
    /* the most image segments any image has (the parity covers them all) */
    int64_t v[2] = {0, (int64_t)r.im.nunits};
    if (s->par_epoch && (int64_t)(s->plen / s->unit * (uint64_t)k) > v[1])
        v[1] = (int64_t)(s->plen / s->unit * (uint64_t)k);
    rc = rb_agree(&r, rc, v, 2);
    r.maxrows = rows_of((uint64_t)v[1], k);
    r.bound = r.maxrows * (uint64_t)k;
    double t0 = crpm_now();
    crpm_progress pg; /* rank 0 prints it at verbosity 2 (progress.h) */
    crpm_progress_begin(&pg, CRPM_PG_L3, "L3 rebuild", 0, me);
    rc = rb_phases(&r, me, rc);
    crpm_progress_end(&pg);
    /* ranks done early wait for the slowest without holding a core */
    int mrc = crpm_mpi_idle_barrier(r.comm);
    if (mrc != MPI_SUCCESS)
        rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Ibarrier");
    *seconds = crpm_now() - t0;
    if (rc == 0 && r.lost_me) {
        img->buf = r.buf;
        img->regions = r.reg;
        img->nregions = (int)r.nreg;
        img->user_id = r.user_id;
        r.buf = NULL;
        r.reg = NULL;
    }
    rb_free(&r);
    return rc;
}

void l3_image_release(l3_image *img)
{
    free(img->buf);
    free(img->regions);
    memset(img, 0, sizeof *img);
}

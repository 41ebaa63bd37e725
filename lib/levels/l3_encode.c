/* Level 3's write path: the image of a committed epoch, the delta (old XOR
 * new) of the blocks a checkpoint changed, and its exchange with the ranks
 * holding parity, which add it into their parity (l3_internal.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "l3_internal.h"
#include "mpi_wait.h"
#include "mpi_error.h"
#include "pool.h"

/* ---- images ------------------------------------------------------------------ */

void l3_image_free(image *im)
{
    for (int i = 0; i < im->nreg; i++)
        free(im->reg[i].segs);
    free(im->reg);
    free(im->meta);
    memset(im, 0, sizeof *im);
}

uint64_t l3_unit_for(uint64_t seg, uint64_t blk)
{
    uint64_t u = UNIT_BYTES < blk ? blk : UNIT_BYTES;
    return u > seg || seg % u || u % blk ? seg : u;
}

int l3_image_of(crpm_container *c, uint64_t unit, image *im)
{
    memset(im, 0, sizeof *im);
    im->unit = unit;
    int n = 0;
    for (int i = 0; i < c->nregions; i++)
        n += c->regions[i].saved != 0;
    im->reg = calloc((size_t)n + 1, sizeof *im->reg);
    im->meta_len = META_REC + (uint64_t)n * META_REC;
    im->meta_units = (im->meta_len + unit - 1) / unit;
    im->meta = calloc(1, im->meta_len);
    if (!im->reg || !im->meta) {
        l3_image_free(im);
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    }
    memcpy(im->meta, META_MAGIC, 8);
    l3_put64(im->meta + 8, (uint64_t)n);
    l3_put64(im->meta + 16, c->user_id);
    uint64_t next = im->meta_units;
    for (int i = 0; i < c->nregions; i++) {
        const crpm_region *r = &c->regions[i];
        if (!r->saved)
            continue;
        img_reg *d = &im->reg[im->nreg];
        uint64_t nu = (r->count * r->elem_size + unit - 1) / unit, ns, base;
        const crpm_seg *sg = crpm_region_segs(c, r, &ns, &base);
        *d = (img_reg){r->id, r->type_code, r->elem_size, r->count, ns, next, nu, NULL, base,
                       r->pack != CRPM_NO_PACK ? c->packs[r->pack].len : 0};
        d->segs = malloc(sizeof *d->segs * (ns ? ns : 1));
        if (!d->segs) {
            l3_image_free(im);
            return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
        }
        if (ns)
            memcpy(d->segs, sg, sizeof *d->segs * ns);
        unsigned char *m = im->meta + META_REC * (uint64_t)(1 + im->nreg);
        memcpy(m, &d->id, 4);
        memcpy(m + 4, &d->type, 4);
        l3_put64(m + 8, d->elem);
        l3_put64(m + 16, d->count);
        im->nreg++;
        next += nu;
    }
    im->nunits = next;
    return CRPM_SUCCESS;
}

int l3_same_layout(const image *a, const image *b)
{
    if (a->unit != b->unit || a->meta_units != b->meta_units || a->nreg != b->nreg)
        return 0;
    for (int i = 0; i < a->nreg; i++)
        if (a->reg[i].id != b->reg[i].id || a->reg[i].type != b->reg[i].type || a->reg[i].elem != b->reg[i].elem ||
            a->reg[i].count != b->reg[i].count)
            return 0;
    return 1;
}

const char *l3_unit_bytes(crpm_container *c, const image *im, uint64_t s, uint64_t *len, uint32_t *phys,
                          uint64_t *covered)
{
    uint64_t seg = c->sb.segment_size, unit = im->unit;
    *phys = CRPM_NO_PHYS;
    *len = 0;
    if (s >= im->nunits)
        return NULL;
    if (s < im->meta_units) {
        uint64_t off = s * unit;
        *len = im->meta_len - off < unit ? im->meta_len - off : unit;
        return (const char *)im->meta + off;
    }
    int lo = 0, hi = im->nreg - 1;
    while (lo < hi) { /* last region starting at or before s */
        int mid = (lo + hi + 1) / 2;
        if (im->reg[mid].first <= s)
            lo = mid;
        else
            hi = mid - 1;
    }
    const img_reg *r = &im->reg[lo];
    uint64_t q = s - r->first, o = q * unit, k = o / seg, bytes = r->count * r->elem;
    if (q >= r->nunits || k >= r->nsegs || !r->segs[k].state)
        return NULL;
    *len = bytes - o < unit ? bytes - o : unit;
    *phys = r->segs[k].phys[r->segs[k].state - 1];
    if (covered)
        *covered = r->span ? r->span : bytes - k * seg < seg ? bytes - k * seg : seg;
    return crpm_seg_addr(c, *phys) + r->base + o % seg;
}

/* ---- deltas ------------------------------------------------------------------ */

/* Ranges of one codeword's parity offsets with their delta bytes. */
typedef struct builder {
    uint64_t *ent;             /* (off, len) pairs */
    size_t nent, capent;
    unsigned char *data;
    size_t ndata, capdata;
    int err;
} builder;

static unsigned char *builder_add(builder *b, uint64_t off, uint64_t len)
{
    if (CRPM_GROW(b->data, b->capdata, b->ndata + len, 64)) {
        b->err = 1;
        return NULL;
    }
    if (b->nent && b->ent[2 * b->nent - 2] + b->ent[2 * b->nent - 1] == off) {
        b->ent[2 * b->nent - 1] += len;
    } else {
        if (CRPM_GROW(b->ent, b->capent, 2 * b->nent + 2, 64)) {
            b->err = 1;
            return NULL;
        }
        b->ent[2 * b->nent] = off;
        b->ent[2 * b->nent + 1] = len;
        b->nent++;
    }
    unsigned char *p = b->data + b->ndata;
    b->ndata += len;
    return p;
}

/* dst = a ^ b over n bytes; returns whether any byte is nonzero. */
static int xor_into(unsigned char *dst, const unsigned char *a, const unsigned char *b, size_t n)
{
    uint64_t any = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        x ^= y;
        any |= x;
        memcpy(dst + i, &x, 8);
    }
    for (; i < n; i++) {
        dst[i] = a[i] ^ b[i];
        any |= dst[i];
    }
    return any != 0;
}

/* Appends the blocks of image unit s where `nw` and `old` (NULL: zeros)
 * differ, at parity offset poff. */
static void delta_unit(l3_state *s, const image *nw, const image *old, uint64_t seg_i, uint64_t poff, builder *b,
                       unsigned char *tmp)
{
    uint64_t ln = 0, lo = 0;
    uint32_t pn, po = CRPM_NO_PHYS;
    const unsigned char *n = (const unsigned char *)l3_unit_bytes(s->own, nw, seg_i, &ln, &pn, NULL);
    const unsigned char *o = old ? (const unsigned char *)l3_unit_bytes(s->own, old, seg_i, &lo, &po, NULL) : NULL;
    if (old && pn != CRPM_NO_PHYS && pn == po && ln == lo && n == o)
        return; /* the same bytes of the same committed copy: not written by this checkpoint (a packed
                   array may have moved within a pack that kept its copy) */
    uint64_t len = ln > lo ? ln : lo, blk = s->blksize;
    static const unsigned char zero[4096];
    for (uint64_t off = 0; off < len; off += blk) {
        uint64_t m = len - off < blk ? len - off : blk;
        const unsigned char *x = n && off + m <= ln ? n + off : NULL, *y = o && off + m <= lo ? o + off : NULL;
        unsigned char *bx = tmp, *by = tmp + blk;
        if (!x) { /* partly or wholly beyond the defined bytes: zero-pad */
            memset(bx, 0, m);
            if (n && off < ln)
                memcpy(bx, n + off, ln - off);
            x = bx;
        }
        if (!y) {
            if (o && off < lo) {
                memset(by, 0, m);
                memcpy(by, o + off, lo - off);
                y = by;
            } else if (m <= sizeof zero) {
                y = zero;
            } else {
                memset(by, 0, m);
                y = by;
            }
        }
        unsigned char *d = tmp + 2 * blk;
        if (xor_into(d, x, y, m)) {
            unsigned char *p = builder_add(b, poff + off, m);
            if (p)
                memcpy(p, d, m);
        }
    }
}

/* The deltas of a window of parity segments [t0, t1), one builder per
 * codeword j: a task per codeword on the rank's workers (builders and the
 * image are disjoint or read-only; each worker has its own scratch). */
typedef struct delta_job {
    l3_state *s;
    const image *nw, *old;
    uint64_t t0, t1;
    builder *b;
    unsigned char *tmp;        /* per worker: 3 blocks and a word */
} delta_job;

static void delta_codeword(void *arg, uint64_t j, int worker)
{
    delta_job *x = arg;
    l3_state *s = x->s;
    unsigned char *tmp = x->tmp + (size_t)worker * (3 * s->blksize + 8);
    x->b[j].nent = x->b[j].ndata = 0;
    for (uint64_t t = x->t0; t < x->t1; t++) {
        uint64_t si = t * (uint64_t)s->k + j;
        if (si < x->nw->nunits || (x->old && si < x->old->nunits))
            delta_unit(s, x->nw, x->old, si, t * s->unit, &x->b[j], tmp);
    }
}

/* ---- exchange ---------------------------------------------------------------- */

static int recv_msg(MPI_Comm comm, int src, int tag, unsigned char **buf, int *len)
{
    MPI_Message msg;
    MPI_Status stt;
    int rc = MPI_Mprobe(src, tag, comm, &msg, &stt);
    if (rc != MPI_SUCCESS)
        return crpm_mpi_fail(rc, "level 3: MPI_Mprobe");
    MPI_Get_count(&stt, MPI_BYTE, len);
    *buf = malloc(*len > 0 ? (size_t)*len : 1);
    if (!*buf) { /* received anyway (the sender waits), then the error */
        unsigned char sink;
        MPI_Mrecv(&sink, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    }
    rc = MPI_Mrecv(*buf, *len, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? CRPM_SUCCESS : crpm_mpi_fail(rc, "level 3: MPI_Mrecv");
}

/* Applies one message: count, (off, len) pairs, then the bytes. */
static int apply_msg(l3_state *s, const unsigned char *m, int len, int h, int i, unsigned char *par, int from,
                     crpm_container *pc)
{
    int32_t id = l3_held_codeword(s, h);
    uint64_t n = len >= 8 ? l3_get64(m) : UINT64_MAX;
    if (n > ((uint64_t)len - 8) / 16)
        return crpm_error(CRPM_ERR_CORRUPT, "level 3: malformed delta from rank %d", from);
    const unsigned char *data = m + 8 + 16 * n;
    uint64_t avail = (uint64_t)len - 8 - 16 * n, used = 0;
    crpm_l3_piece *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for a delta of %llu ranges",
                          (unsigned long long)n);
    for (uint64_t e = 0; e < n; e++) { /* all checked before any is applied */
        uint64_t off = l3_get64(m + 8 + 16 * e), l = l3_get64(m + 16 + 16 * e);
        if (l > avail - used || off > s->plen || l > s->plen - off) {
            free(v);
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: delta from rank %d out of range", from);
        }
        v[e] = (crpm_l3_piece){data + used, par + off, l};
        used += l;
    }
    crpm_l3_update_many(&s->code, h, i, v, n); /* over the rank's workers */
    for (uint64_t e = 0; pc && e < n; e++) /* the parity checkpoint compares only what deltas touched */
        crpm_container_written(pc, id, (uint64_t)(v[e].parity - par), v[e].len);
    free(v);
    return CRPM_SUCCESS;
}

int l3_exchange(crpm_level *lv, const image *nw, const image *old, uint64_t psegs, unsigned char **target,
                uint64_t *sent, int hook)
{
    l3_state *s = l3_of(lv);
    MPI_Comm comm = lv->env->comm;
    int M = s->lay.M, k = s->k;
    uint64_t unit = s->unit, T = ROUND_BYTES / (unit * (uint64_t)k);
    if (T < 1)
        T = 1;
    builder *b = calloc((size_t)k, sizeof *b);
    unsigned char **out = calloc((size_t)k, sizeof *out);
    MPI_Request *req = malloc(sizeof *req * (size_t)(k * M));
    unsigned char *tmp = malloc((size_t)crpm_pool_width(s->code.pool) * (3 * s->blksize + 8));
    int rc = (!b || !out || !req || !tmp) ? crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory") : CRPM_SUCCESS;
    /* a rank that cannot take part still sends empty messages: nobody waits forever */
    for (uint64_t t0 = 0; t0 < psegs; t0 += T) {
        uint64_t t1 = t0 + T < psegs ? t0 + T : psegs;
        int nreq = 0;
        delta_job dj = {s, nw, old, t0, t1, b, tmp};
        if (rc == 0 && b && out && req)
            crpm_pool_run(s->code.pool, (uint64_t)k, delta_codeword, &dj);
        for (int j = 0; b && out && req && j < k; j++) {
            if (rc)
                b[j].nent = b[j].ndata = 0;
            if (b[j].err && rc == 0)
                rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for the delta");
            size_t ne = rc == 0 ? b[j].nent : 0, nd = rc == 0 ? b[j].ndata : 0;
            size_t len = 8 + 16 * ne + nd;
            free(out[j]);
            out[j] = malloc(len);
            if (!out[j] || len > (size_t)INT32_MAX) {
                rc = rc ? rc : crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
                ne = nd = 0;
                len = 8;
                if (!out[j] && !(out[j] = malloc(8)))
                    continue; /* the holders will fail on a missing message: MPI errors are fatal anyway */
            }
            l3_put64(out[j], ne);
            for (size_t e = 0; e < ne; e++) {
                l3_put64(out[j] + 8 + 16 * e, b[j].ent[2 * e]);
                l3_put64(out[j] + 16 + 16 * e, b[j].ent[2 * e + 1]);
            }
            if (nd)
                memcpy(out[j] + 8 + 16 * ne, b[j].data, nd);
            int c = crpm_l3_codeword_of(&s->lay, s->g, j);
            for (int h = 0; h < M; h++) {
                int to = s->grp[crpm_l3_holder(&s->lay, c, h)];
                int mrc = MPI_Isend(out[j], (int)len, MPI_BYTE, to, TAG_L3 + c, comm, &req[nreq++]);
                if (mrc != MPI_SUCCESS) {
                    nreq--;
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Isend");
                }
                *sent += nd;
            }
        }
        if (hook && t0 == 0 && s->o.hook)
            s->o.hook(s->o.hook_arg, CRPM_L3_HOOK_SENT);
        for (int h = 0; h < M; h++) {
            int c = l3_held_codeword(s, h);
            for (int i = 0; i < k; i++) {
                int from = s->grp[crpm_l3_data_member(&s->lay, c, i)];
                unsigned char *m = NULL;
                int len = 0;
                int lrc = recv_msg(comm, from, TAG_L3 + c, &m, &len);
                if (lrc == 0 && rc == 0)
                    lrc = apply_msg(s, m, len, h, i, target[h], from, target == s->par ? s->pc : NULL);
                free(m);
                rc = rc ? rc : lrc;
            }
        }
        int wrc = nreq ? crpm_mpi_waitall(nreq, req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
        if (wrc != MPI_SUCCESS)
            rc = rc ? rc : crpm_mpi_fail(wrc, "level 3: MPI_Waitall");
    }
    for (int j = 0; b && j < k; j++) {
        free(b[j].ent);
        free(b[j].data);
        if (out)
            free(out[j]);
    }
    free(b);
    free(out);
    free(req);
    free(tmp);
    return rc;
}

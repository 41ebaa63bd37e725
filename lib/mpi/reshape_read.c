/* The recovery of a reshaped restart: the application's new boxes filled
 * from the old ones (reshape.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agree.h"
#include "clock.h"
#include "engine.h"
#include "error.h"
#include "redist.h"
#include "reserved_ids.h"
#include "reshape_int.h"

/* Bytes per redistribution window read from a level-1 container. */
#define RS_WINDOW ((uint64_t)8 << 20)

static const crpm_array *old_array(const crpm_rs_restart *s, int q, int32_t id)
{
    for (int i = 0; i < s->narrs[q]; i++)
        if (s->arrs[q][i].id == id)
            return &s->arrs[q][i];
    return NULL;
}

static int same_shape(const crpm_array *a, const crpm_array *b)
{
    return a->elem_size == b->elem_size && a->count == b->count && a->type_code == b->type_code;
}

/* What this run protects must be what the checkpoint can fill. */
static int check_new(const crpm_reshape *r, const crpm_rs_restart *s, const crpm_array *a, int n, int me,
                     int same)
{
    const crpm_glayout *cur = &r->cur, *old = &r->saved;
    for (int i = 0; i < n; i++) {
        const crpm_array *x = &a[i];
        const crpm_subset *b = crpm_glayout_subset(cur, x->id);
        if (x->id == CRPM_ID_GLAYOUT)
            continue;
        if (b) {
            const crpm_gds *d = crpm_glayout_dataset(cur, b->gid), *o = crpm_glayout_dataset(old, b->gid);
            if (!o)
                return crpm_error(CRPM_ERR_MISMATCH, "array %d is a box of global dataset %d, which the checkpoint "
                                  "does not hold", x->id, b->gid);
            if (!d || !crpm_gds_same(d, o)) {
                char sd[200] = "", od[200] = "";
                for (int k = 0, u = 0, v = 0; k < o->ndims || (d && k < d->ndims); k++) {
                    if (d && k < d->ndims)
                        u += snprintf(sd + u, sizeof sd - (size_t)u, "%s%llu", k ? "x" : "", (unsigned long long)d->dims[k]);
                    if (k < o->ndims)
                        v += snprintf(od + v, sizeof od - (size_t)v, "%s%llu", k ? "x" : "", (unsigned long long)o->dims[k]);
                }
                return crpm_error(CRPM_ERR_MISMATCH, "global dataset %d is defined as %s of type %d (%llu bytes), "
                                  "the checkpoint holds %s of type %d (%llu bytes)", b->gid, sd,
                                  d ? d->type_code : -1, d ? (unsigned long long)d->elem_size : 0ull, od,
                                  o->type_code, (unsigned long long)o->elem_size);
            }
            if (x->count != crpm_box_volume(b->ndims, b->cnt) || x->elem_size != d->elem_size ||
                x->type_code != d->type_code)
                return crpm_error(CRPM_ERR_MISMATCH, "array %d is protected with %llu elements of type %d; its box "
                                  "of global dataset %d has %llu of type %d", x->id, (unsigned long long)x->count,
                                  x->type_code, b->gid, (unsigned long long)crpm_box_volume(b->ndims, b->cnt),
                                  d->type_code);
        } else if (crpm_glayout_replicated(cur, x->id)) {
            const crpm_array *o = old_array(s, 0, x->id);
            if (!o || !crpm_glayout_replicated(&s->old[0], x->id) || !same_shape(o, x))
                return crpm_error(CRPM_ERR_MISMATCH, "replicated array %d: %s", x->id,
                                  o ? "saved with another type or size (or not as replicated)"
                                    : "not in the checkpoint");
        } else if (same) {
            const crpm_array *o = old_array(s, me, x->id);
            if (!o || !same_shape(o, x))
                return crpm_error(CRPM_ERR_MISMATCH, "array %d: %s", x->id,
                                  o ? "saved with another type or size" : "not in the checkpoint");
        } else {
            return crpm_error(CRPM_ERR_MISMATCH, "array %d is protected but is neither a box of a global dataset "
                              "(crpm_add_subset) nor replicated (crpm_protect_replicated): a restart on another "
                              "number of ranks cannot fill it", x->id);
        }
    }
    for (int i = 0; i < old->nds; i++)
        if (!crpm_glayout_dataset(cur, old->ds[i].gid))
            return crpm_error(CRPM_ERR_MISMATCH, "global dataset %d is in the checkpoint but this run does not "
                              "define it", old->ds[i].gid);
    for (int i = 0; i < s->old[0].nrepl; i++)
        if (!crpm_glayout_replicated(cur, s->old[0].repl[i]))
            return crpm_error(CRPM_ERR_MISMATCH, "array %d is saved as replicated but this run does not protect it "
                              "with crpm_protect_replicated", s->old[0].repl[i]);
    for (int i = 0; same && i < s->narrs[me]; i++) {
        int32_t id = s->arrs[me][i].id;
        int found = id == CRPM_ID_GLAYOUT;
        for (int k = 0; k < n && !found; k++)
            found = a[k].id == id;
        if (!found)
            return crpm_error(CRPM_ERR_MISMATCH, "array %d is in the checkpoint but not protected", id);
    }
    return CRPM_SUCCESS;
}

/* ---- sources and destinations -------------------------------------------------------- */
typedef struct src_ref {
    int q, k;                  /* old rank, its box k */
    crpm_container *c;         /* level 1: the reader's open source */
    crpm_region *reg;
} src_ref;

typedef struct read_arg {
    crpm_rs_restart *s;
    src_ref *refs;
} read_arg;

static int read_src(void *arg, int handle, uint64_t e0, uint64_t e1, void *dst)
{
    read_arg *ra = arg;
    src_ref *x = &ra->refs[handle];
    if (ra->s->plan.kind == CRPM_RS_L4)
        return crpm_l4g_read_box(ra->s->l4, x->q, &ra->s->old[x->q], x->k, e0, e1, dst);
    if (!x->reg)
        return crpm_error(CRPM_ERR_STATE, "old rank %d's box %d has no open source here", x->q, x->k);
    uint64_t esz = x->reg->elem_size;
    return crpm_copy_saved_range(x->c, x->reg, e0 * esz, (e1 - e0) * esz, dst);
}

/* Every old box, its reader and how to read it. */
static int build_sources(crpm_ctx *ctx, crpm_rs_restart *s, crpm_rd_box **out, src_ref **refs, int *nout)
{
    int n = 0, me = ctx->rank;
    for (int q = 0; q < s->N; q++)
        n += s->old[q].nsub;
    crpm_rd_box *b = calloc((size_t)n + 1, sizeof *b);
    src_ref *f = calloc((size_t)n + 1, sizeof *f);
    if (!b || !f) {
        free(b);
        free(f);
        return crpm_error(CRPM_ERR_NOMEM, "crpm_recover: out of memory");
    }
    int i = 0;
    for (int q = 0; q < s->N; q++)
        for (int k = 0; k < s->old[q].nsub; k++, i++) {
            const crpm_subset *x = &s->old[q].sub[k];
            const crpm_gds *d = crpm_glayout_dataset(&s->old[q], x->gid);
            b[i].rank = s->plan.kind == CRPM_RS_L1 ? s->plan.reader[q] : i % ctx->nranks;
            b[i].gid = x->gid;
            b[i].nd = x->ndims;
            memcpy(b[i].off, x->off, sizeof x->off);
            memcpy(b[i].cnt, x->cnt, sizeof x->cnt);
            b[i].esz = d->elem_size;
            b[i].handle = i;
            f[i].q = q;
            f[i].k = k;
            if (s->plan.kind == CRPM_RS_L4) {
                uint64_t piece = crpm_l4g_piece(s->l4, x->gid);
                piece = piece ? piece : 1;
                uint64_t m = RS_WINDOW / (piece * d->elem_size);
                b[i].win = piece * (m ? m : 1);
                continue;
            }
            b[i].win = RS_WINDOW / d->elem_size ? RS_WINDOW / d->elem_size : 1;
            for (int o = 0; b[i].rank == me && o < s->nopen; o++)
                if (s->open[o].q == q) {
                    f[i].c = s->open[o].c;
                    f[i].reg = crpm_region_find(s->open[o].c, x->id);
                }
        }
    *out = b;
    *refs = f;
    *nout = n;
    return CRPM_SUCCESS;
}

/* This run's boxes, on every rank; ptrs for this rank's. */
static int build_dests(crpm_ctx *ctx, const crpm_glayout *cur, const crpm_array *a, int n, crpm_rd_box **out,
                       int *nout, void ***ptrs)
{
    crpm_rd_box *mine = calloc((size_t)cur->nsub + 1, sizeof *mine);
    *ptrs = calloc((size_t)cur->nsub + 1, sizeof **ptrs);
    int rc = mine && *ptrs ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "crpm_recover: out of memory");
    int m = 0;
    for (int i = 0; rc == 0 && i < cur->nsub; i++) {
        const crpm_subset *x = &cur->sub[i];
        const crpm_gds *d = crpm_glayout_dataset(cur, x->gid);
        void *p = NULL;
        for (int k = 0; k < n; k++)
            if (a[k].id == x->id)
                p = a[k].ptr;
        mine[m] = (crpm_rd_box){.rank = ctx->rank, .gid = x->gid, .nd = x->ndims, .esz = d->elem_size, .handle = m};
        memcpy(mine[m].off, x->off, sizeof x->off);
        memcpy(mine[m].cnt, x->cnt, sizeof x->cnt);
        (*ptrs)[m++] = p;
    }
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_recover");
    if (rc == 0)
        rc = crpm_rs_allgather(ctx, mine, m, sizeof *mine, (void **)out, nout);
    free(mine);
    return rc;
}

/* Each of this rank's boxes must be covered exactly once by the saved ones. */
static int check_cover(int me, const crpm_rd_box *src, int nsrc, const crpm_rd_box *dst, int ndst)
{
    uint64_t oi[CRPM_GLAYOUT_MAX_DIMS], ci[CRPM_GLAYOUT_MAX_DIMS];
    for (int i = 0; i < ndst; i++) {
        if (dst[i].rank != me)
            continue;
        uint64_t vol = crpm_box_volume(dst[i].nd, dst[i].cnt), got = 0;
        for (int k = 0; k < nsrc; k++)
            if (src[k].gid == dst[i].gid)
                got += crpm_box_intersect(dst[i].nd, src[k].off, src[k].cnt, dst[i].off, dst[i].cnt, oi, ci);
        if (got != vol)
            return crpm_error(CRPM_ERR_MISMATCH, "a box of global dataset %d (%llu elements) is %s the saved boxes "
                              "(%llu elements from them): the old run's boxes %s", dst[i].gid,
                              (unsigned long long)vol, got < vol ? "not covered by" : "covered twice by",
                              (unsigned long long)got, got < vol ? "do not tile the dataset" : "overlap");
    }
    return CRPM_SUCCESS;
}

/* Replicated arrays from old rank 0; same-count level 4: each rank's own. */
static int copy_rest(crpm_ctx *ctx, crpm_rs_restart *s, const crpm_array *a, int n, int same)
{
    int rc = CRPM_SUCCESS;
    for (int i = 0; i < n && rc == 0; i++) {
        const crpm_array *x = &a[i];
        uint64_t bytes = crpm_array_bytes(x);
        int repl = crpm_glayout_replicated(&ctx->reshape->cur, x->id);
        if (x->id == CRPM_ID_GLAYOUT || crpm_glayout_subset(&ctx->reshape->cur, x->id) || (!repl && !same) || !bytes)
            continue;
        if (s->plan.kind == CRPM_RS_L4) {
            rc = crpm_agree(ctx->comm, ctx->rank, crpm_l4g_rank_read(s->l4, repl ? 0 : ctx->rank, x->id, x->ptr, bytes),
                            "crpm_recover");
            continue;
        }
        /* level 1: old rank 0's reader reads it and sends it to all */
        int root = s->plan.reader[0], lrc = CRPM_SUCCESS;
        crpm_container *oc = NULL;
        crpm_region *reg = NULL;
        for (int o = 0; ctx->rank == root && o < s->nopen; o++)
            if (s->open[o].q == 0) {
                oc = s->open[o].c;
                reg = crpm_region_find(oc, x->id);
            }
        if (reg && !reg->saved)
            reg = NULL;
        for (uint64_t off = 0; off < bytes && rc == 0; off += RS_WINDOW) {
            uint64_t len = bytes - off < RS_WINDOW ? bytes - off : RS_WINDOW;
            if (ctx->rank == root && lrc == 0)
                lrc = reg ? crpm_copy_saved_range(oc, reg, off, len, (char *)x->ptr + off)
                          : crpm_error(CRPM_ERR_MISMATCH, "array %d is not in old rank 0's container", x->id);
            int mrc = MPI_Bcast((char *)x->ptr + off, (int)len, MPI_BYTE, root, ctx->comm);
            if (mrc != MPI_SUCCESS)
                rc = crpm_mpi_fail(mrc, "crpm_recover: MPI_Bcast");
        }
        rc = crpm_agree(ctx->comm, ctx->rank, rc ? rc : lrc, "crpm_recover");
    }
    return rc;
}

static int rs_read(crpm_level *lv, const crpm_array *a, int n)
{
    crpm_reshape *r = lv->state;
    crpm_ctx *ctx = r->ctx;
    crpm_rs_restart *s = r->rs;
    double t0 = crpm_now();
    int same = s->plan.kind == CRPM_RS_L4 && s->N == ctx->nranks;
    int rc = crpm_agree(ctx->comm, ctx->rank, check_new(r, s, a, n, ctx->rank, same), "crpm_recover");
    crpm_rd_box *src = NULL, *dst = NULL;
    src_ref *refs = NULL;
    void **ptrs = NULL;
    int nsrc = 0, ndst = 0;
    if (rc == 0)
        rc = crpm_agree(ctx->comm, ctx->rank, build_sources(ctx, s, &src, &refs, &nsrc), "crpm_recover");
    if (rc == 0)
        rc = build_dests(ctx, &r->cur, a, n, &dst, &ndst, &ptrs);
    if (rc == 0)
        rc = crpm_agree(ctx->comm, ctx->rank, check_cover(ctx->rank, src, nsrc, dst, ndst), "crpm_recover");
    uint64_t sent = 0, got = 0;
    read_arg ra = {s, refs};
    double t1 = crpm_now();
    if (rc == 0)
        rc = crpm_redistribute(ctx->comm, src, nsrc, dst, ndst, ptrs, read_src, &ra, &sent, &got);
    double t2 = crpm_now();
    if (rc == 0)
        rc = copy_rest(ctx, s, a, n, same);
    if (rc == 0 && ctx->cfg.verbosity >= 2) {
        uint64_t mine = 0;
        for (int i = 0; i < ndst; i++)
            if (dst[i].rank == ctx->rank)
                mine += crpm_box_volume(dst[i].nd, dst[i].cnt) * dst[i].esz;
        double d[4] = {(double)mine, (double)sent, t2 - t1, crpm_now() - t0}, mx[4];
        if (MPI_Allreduce(d, mx, 4, MPI_DOUBLE, MPI_MAX, ctx->comm) == MPI_SUCCESS && ctx->rank == 0) {
            printf("[crpm] redistributed %d ranks' boxes onto %d: %.2f MiB per rank (%.2f MiB sent by the busiest) in "
                   "%.3f s, %.2f GB/s per rank; recovery %.3f s in all\n", s->N, ctx->nranks, mx[0] / 1048576.0,
                   mx[1] / 1048576.0, mx[2], mx[2] > 0 ? mx[0] / mx[2] / 1e9 : 0.0, mx[3]);
            fflush(stdout);
        }
    }
    free(src);
    free(dst);
    free(refs);
    free(ptrs);
    return rc;
}

static const crpm_level_ops rs_ops_l1 = {.name = "L1 of another rank count", .read = rs_read};
static const crpm_level_ops rs_ops_l4 = {.name = "L4 of another rank count", .read = rs_read};
static const crpm_level_ops rs_ops_same = {.name = "L4", .read = rs_read};

void crpm_rs_level_init(crpm_ctx *ctx, crpm_reshape *r)
{
    const crpm_level_ops *ops = r->rs->plan.kind == CRPM_RS_L1 ? &rs_ops_l1
                                : r->rs->N == ctx->nranks      ? &rs_ops_same
                                                               : &rs_ops_l4;
    r->level = (crpm_level){ops, &ctx->env, r};
}

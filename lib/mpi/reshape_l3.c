/* Restart on another number of ranks: old containers lost with their nodes
 * rebuilt from level-3 parity (reshape_int.h).
 *
 * The plan (reshape_l3plan.c) names, for every old rank q without a
 * container or partner copy, the rank of this job that rebuilds it (its
 * builder) and, for every old file the code needs, the rank that reads it
 * (a rank of the node whose directory holds it).  For each such q in turn,
 * every rank derives the same decoders: for each of q's k codewords, k
 * surviving units (containers of the other data members, parity files of
 * the holders).  The readers send the builder those units row by row, in
 * windows of at most RS_L3_WINDOW bytes the builder holds at once, each unit
 * checked against its CRCs as it is read (a damaged unit: its file is an
 * erasure and the plan is made again without it); the builder decodes q's
 * image with ISA-L (l3_code.h) until its region table says it is whole, and
 * writes it through the engine (lib/persist) as a container of old rank q at
 * the plan's epoch, under a temporary name, then durably renamed to a kept
 * name (rank-<q>.crpm.held-<run>-l3) in its own node's directory.  From then
 * on it is a source like any other: checked by its reader (the builder),
 * read by the redistribution, and removed with the other kept files once
 * this job's checkpoint committed.  A kill before the rename leaves only a
 * temporary file (removed with the kept files); after it, the next launch
 * finds the rebuilt container and uses it.  Old files are never written.
 *
 * Message counts and sizes follow from the plan and agreed numbers only, so
 * a rank that fails still sends and receives what the others expect, and
 * every window ends with one agreement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agree.h"
#include "clock.h"
#include "engine.h"
#include "error.h"
#include "fsutil.h"
#include "l3_code.h"
#include "l3_reshape.h"
#include "mpi_wait.h"
#include "reshape_int.h"

#define TAG_RS_L3 7990 /* clear of level 3's tags (7400 + codeword, 7700 + codeword) */
/* The builder's receive buffers per window (k x k units per row). */
#define RS_L3_WINDOW ((uint64_t)16 << 20)

typedef struct piece {         /* source p of codeword j of the rank rebuilt */
    int reader, file, codeword;
    int parity;
    int slot;                  /* data: the codeword's place among its member's */
} piece;

typedef struct opened {        /* a file this rank reads for the rebuild */
    crpm_container *c;
    crpm_l3_source *src;
} opened;

typedef struct rsl3 {
    crpm_ctx *ctx;
    crpm_rs_restart *s;
    int N, k, me, nf;          /* nf: the files when it began (adopt adds to them) */
    crpm_l3_layout lay;
    crpm_l3_code code;
    uint64_t seg, blk, unit, bound; /* bound: rows no codeword exceeds */
    opened *op;                /* nfiles */
    int *bad;                  /* nfiles: failed here */
    crpm_l3_decoder *dec;      /* k: the codewords of the rank rebuilt */
    piece *pc;                 /* k x k */
    int *lost;                 /* k: its place among each decoder's lost units */
    crpm_rs_file *made;        /* the files this rank rebuilt */
    int nmade;
    uint64_t bytes;            /* the images it decoded */
} rsl3;

static int rank_of(const crpm_rs_plan *p, int N, int g, int m)
{
    for (int r = 0; r < N; r++)
        if (p->group[r] == g && p->member[r] == m)
            return r;
    return -1;
}

/* The decoders and pieces of old rank q, as every rank derives them. */
static int pieces_of(rsl3 *r, int q)
{
    const crpm_rs_plan *p = &r->s->plan;
    int k = r->k, g = p->group[q], rc = CRPM_SUCCESS;
    for (int j = 0; j < k; j++)
        crpm_l3_decoder_free(&r->dec[j]);
    for (int j = 0; rc == 0 && j < k; j++) {
        int c = crpm_l3_codeword_of(&r->lay, p->member[q], j), avail[255];
        for (int i = 0; i < k; i++) {
            int x = rank_of(p, r->N, g, crpm_l3_data_member(&r->lay, c, i));
            avail[i] = x >= 0 && p->src[x] >= 0 && r->s->files[p->src[x]].kind == CRPM_RS_CONT;
        }
        for (int h = 0; h < p->M; h++) {
            int x = rank_of(p, r->N, g, crpm_l3_holder(&r->lay, c, h));
            avail[k + h] = x >= 0 && p->par[x] >= 0;
        }
        if ((rc = crpm_l3_decoder_init(&r->dec[j], &r->code, avail)) != 0)
            break;
        int di = crpm_l3_data_index(&r->lay, c, p->member[q]);
        for (int x = 0; x < r->dec[j].nlost; x++)
            if (r->dec[j].lost[x] == di)
                r->lost[j] = x;
        for (int i = 0; i < k; i++) {
            int u = r->dec[j].src[i], x;
            piece *pc = &r->pc[j * k + i];
            memset(pc, 0, sizeof *pc);
            pc->codeword = c;
            if (u < k) {
                x = rank_of(p, r->N, g, crpm_l3_data_member(&r->lay, c, u));
                pc->reader = p->reader[x];
                pc->file = p->src[x];
                while (crpm_l3_codeword_of(&r->lay, p->member[x], pc->slot) != c)
                    pc->slot++;
            } else {
                x = rank_of(p, r->N, g, crpm_l3_holder(&r->lay, c, u - k));
                pc->reader = p->par_reader[x];
                pc->file = p->par[x];
                pc->parity = 1;
            }
        }
    }
    return rc;
}

/* A file this rank reads, opened read-only at the plan's epoch. */
static int open_one(rsl3 *r, int fi)
{
    crpm_ctx *ctx = r->ctx;
    const crpm_rs_file *x = &r->s->files[fi];
    uint64_t e = r->s->plan.epoch;
    char path[CRPM_PATH_MAX];
    int rc = crpm_name_join(path, sizeof path, ctx->job_dir, x->name);
    crpm_open_opts o = {.path = path, .job_name = ctx->cfg.job_name, .rank = x->q, .nranks = x->nranks,
                        .read_only = 1};
    crpm_container **c = &r->op[fi].c;
    if (rc == 0)
        rc = crpm_format_open(&o, c, NULL);
    /* the view of epoch e (a slot loaded shows its regions and user id; the
     * container's epoch stays its committed one) */
    int ahead = rc == 0 && x->kind == CRPM_RS_CONT && crpm_container_epoch(*c) == e + 1;
    if (ahead)
        rc = crpm_load_slot(*c, e);
    else if (rc == 0 && x->kind == CRPM_RS_PARITY && crpm_container_user_id(*c) != e && crpm_container_epoch(*c) > 1)
        rc = crpm_load_slot(*c, crpm_container_epoch(*c) - 1); /* its previous state encodes e */
    uint64_t at = rc != 0 ? 0 : x->kind == CRPM_RS_PARITY ? crpm_container_user_id(*c)
                                                          : ahead ? e : crpm_container_epoch(*c);
    if (rc == 0 && at != e)
        rc = crpm_error(CRPM_ERR_EPOCH, "%s: holds epoch %llu, the restart needs %llu", path, (unsigned long long)at,
                        (unsigned long long)e);
    if (rc == 0 && (crpm_container_segment_size(*c) != r->seg || crpm_container_block_size(*c) != r->blk))
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: another segment or block size than the files of its run", path);
    if (rc == 0)
        rc = x->kind == CRPM_RS_CONT ? crpm_l3_source_data(*c, r->unit, &r->op[fi].src)
                                     : crpm_l3_source_parity(*c, r->unit, &r->op[fi].src);
    if (rc != 0) {
        r->bad[fi] = rc != CRPM_ERR_NOMEM;
        if (ctx->cfg.verbosity >= 1) {
            fprintf(stderr, "[crpm rank %d] not using %s to rebuild from level 3: %s\n", ctx->rank, path,
                    crpm_last_error());
            fflush(stderr);
        }
    }
    return rc;
}

/* Every file this rank reads for any rank rebuilt, opened; the geometry
 * (from the files' facts, the same on every rank) and the rows of the code
 * (from the files) agreed.  Collective. */
static int open_all(rsl3 *r)
{
    const crpm_rs_plan *p = &r->s->plan;
    int rc = CRPM_SUCCESS, k = r->k;
    int64_t rows = 0; /* negated: the agreement takes the minimum */
    for (int pass = 0; pass < 2; pass++)
        for (int q = 0; rc == 0 && q < r->N; q++) {
            if (p->build[q] < 0 || (rc = pieces_of(r, q)) != 0)
                continue;
            for (int i = 0; i < k * k; i++) {
                const piece *pc = &r->pc[i];
                const crpm_rs_file *x = &r->s->files[pc->file];
                if (pass == 0 && !r->seg) {
                    r->seg = x->seg;
                    r->blk = x->blk;
                } else if (pass == 0 && (x->seg != r->seg || x->blk != r->blk)) {
                    rc = crpm_error(CRPM_ERR_CORRUPT, "crpm_init: the files of the older rank count have different "
                                    "segment or block sizes");
                }
                if (pass == 0 || pc->reader != r->me || r->bad[pc->file])
                    continue;
                int orc = r->op[pc->file].src ? CRPM_SUCCESS : open_one(r, pc->file);
                rc = rc ? rc : orc; /* a file that does not open is an erasure (bad) */
                int64_t n = r->op[pc->file].src ? -(int64_t)crpm_l3_source_rows(r->op[pc->file].src, k) : 0;
                rows = n < rows ? n : rows;
            }
            if (pass == 0 && rc == 0)
                r->unit = r->seg && r->blk ? crpm_l3_unit_size(r->seg, r->blk) : 0;
            if (pass == 0 && rc == 0 && !r->unit)
                rc = crpm_error(CRPM_ERR_CORRUPT, "crpm_init: no geometry for the level-3 rebuild");
        }
    rc = crpm_agree_ext(r->ctx->comm, r->me, rc, "crpm_init: rebuilding from level-3 parity", &rows, 1);
    r->bound = (uint64_t)-rows;
    return rc;
}

/* This rank's pieces of rows [t0, t1): into the builder's buffers, or sent
 * to it.  A unit that fails its check marks its file and is sent as zeros. */
static int send_rows(rsl3 *r, int b, uint64_t t0, uint64_t t1, unsigned char *in, unsigned char *out,
                     MPI_Request *rq, int *nrq, int rc)
{
    int k = r->k;
    uint64_t unit = r->unit, rows = t1 - t0;
    size_t slot = 0;
    for (int i = 0; i < k * k; i++) {
        const piece *pc = &r->pc[i];
        if (pc->reader != r->me)
            continue;
        unsigned char *dst = r->me == b ? in + (size_t)i * rows * unit : out + slot++ * rows * unit;
        crpm_l3_source *src = r->op[pc->file].src;
        for (uint64_t t = t0; t < t1; t++) {
            unsigned char *d = dst + (t - t0) * unit;
            int lrc = src ? crpm_l3_source_read(src, pc->codeword, pc->parity ? t : t * (uint64_t)k + (uint64_t)pc->slot, d)
                          : crpm_error(CRPM_ERR_STATE, "crpm_init: a level-3 source is not open");
            if (lrc != 0) {
                memset(d, 0, unit);
                r->bad[pc->file] |= lrc == CRPM_ERR_CORRUPT;
                if (lrc == CRPM_ERR_CORRUPT && r->ctx->cfg.verbosity >= 1) {
                    fprintf(stderr, "[crpm rank %d] not using %s to rebuild from level 3: %s\n", r->me,
                            r->s->files[pc->file].name, crpm_last_error());
                    fflush(stderr);
                }
                rc = rc ? rc : lrc;
            }
        }
        if (r->me == b)
            continue;
        int mrc = MPI_Isend(dst, (int)(rows * unit), MPI_BYTE, b, TAG_RS_L3, r->ctx->comm, &rq[(*nrq)++]);
        if (mrc != MPI_SUCCESS) {
            (*nrq)--;
            rc = rc ? rc : crpm_mpi_fail(mrc, "crpm_init: MPI_Isend");
        }
    }
    return rc;
}

/* Builder: rows [t0, t1) decoded into the image (it has room). */
static void decode_rows(rsl3 *r, uint64_t t0, uint64_t t1, unsigned char *in, unsigned char *scratch,
                        unsigned char *img)
{
    int k = r->k;
    uint64_t unit = r->unit, rows = t1 - t0;
    unsigned char *src[255], *dst[255];
    for (uint64_t t = t0; t < t1; t++)
        for (int j = 0; j < k; j++) {
            for (int i = 0; i < k; i++)
                src[i] = in + ((size_t)(j * k + i) * rows + (t - t0)) * unit;
            for (int x = 0; x < r->dec[j].nlost; x++)
                dst[x] = scratch + (size_t)x * unit;
            crpm_l3_decode(&r->dec[j], unit, src, dst);
            memcpy(img + (t * (uint64_t)k + (uint64_t)j) * unit, dst[r->lost[j]], unit);
        }
}

/* A rebuilt image written as old rank q's container at the plan's epoch,
 * under a temporary name, then renamed into its kept name. */
static int write_rebuilt(rsl3 *r, int q, unsigned char *img, crpm_rs_file *rec)
{
    crpm_ctx *ctx = r->ctx;
    const crpm_rs_plan *p = &r->s->plan;
    crpm_array *regs = NULL;
    int n = 0;
    uint64_t uid = 0;
    char base[CRPM_PATH_MAX], tag[40], path[CRPM_PATH_MAX + 64], tmp[CRPM_PATH_MAX + 72];
    int rc = crpm_l3_image_regions(img, r->unit, &regs, &n, &uid);
    if (rc == 0 && uid != p->user_id)
        rc = crpm_error(CRPM_ERR_CORRUPT, "crpm_init: old rank %d rebuilt from level 3 holds checkpoint %llu, the "
                        "others %llu", q, (unsigned long long)uid, (unsigned long long)p->user_id);
    if (rc == 0)
        rc = crpm_name_container(base, sizeof base, ctx->job_dir, q);
    crpm_rs_run_tag(p->run, tag, sizeof tag);
    snprintf(path, sizeof path, "%s%s%s%s", base, CRPM_RS_HELD, tag, CRPM_RS_REBUILT);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (rc == 0)
        rc = crpm_unlink_quiet(tmp);
    crpm_layout lay = {CRPM_ROLE_RANK, p->nsize, p->node[q], p->nnodes, p->K, p->M};
    crpm_open_opts o = {.path = tmp, .segment_size = r->seg, .block_size = r->blk, .job_name = ctx->cfg.job_name,
                        .rank = q, .nranks = r->N, .persistence = ctx->cfg.persistence, .create = 1,
                        .run_id = p->run, .layout = &lay};
    crpm_container *c = NULL;
    if (rc == 0)
        rc = crpm_container_open(&o, &c, NULL);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = crpm_container_protect(c, regs[i].id, regs[i].ptr, regs[i].count, regs[i].type_code, regs[i].elem_size);
    crpm_stats_t st;
    if (rc == 0)
        rc = crpm_container_checkpoint(c, uid, &st);
    if (rc == 0)
        rc = crpm_container_renumber(c, p->epoch);
    if (c)
        crpm_container_close(c);
    crpm_testhook_point(ctx, "reshape_rebuilt");
    if (rc == 0)
        rc = crpm_durable_rename(tmp, path);
    if (rc != 0)
        crpm_unlink_quiet(tmp);
    free(regs);
    if (rc == 0) {
        const char *name = strrchr(path, '/');
        rc = crpm_rs_describe(ctx, name ? name + 1 : path, rec);
        if (rc == 0 && rec->rc != 0)
            rc = crpm_error(rec->rc, "crpm_init: %s, just rebuilt, does not open", path);
    }
    return rc;
}

/* Builder: room for rows [0, t1) of the image. */
static int grow_image(rsl3 *r, unsigned char **img, uint64_t *cap, uint64_t t1)
{
    uint64_t want = t1 * (uint64_t)r->k * r->unit;
    if (want <= *cap)
        return CRPM_SUCCESS;
    unsigned char *n = realloc(*img, want);
    if (!n)
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory for a container rebuilt from level 3 (%llu "
                          "bytes)", (unsigned long long)want);
    *img = n;
    *cap = want;
    return CRPM_SUCCESS;
}

/* One window: the builder's receives posted, this rank's units sent, the
 * builder's rows decoded; *units: the image's units once its table is in. */
static int window(rsl3 *r, int b, uint64_t t0, uint64_t t1, unsigned char *in, unsigned char *out,
                  unsigned char *scratch, unsigned char **img, uint64_t *cap, MPI_Request *rq, uint64_t *units)
{
    int k = r->k, nrq = 0, rc = CRPM_SUCCESS, mrc;
    uint64_t rows = t1 - t0;
    if (r->me == b) {
        rc = grow_image(r, img, cap, t1);
        for (int i = 0; i < k * k; i++) {
            if (r->pc[i].reader == b)
                continue;
            mrc = MPI_Irecv(in + (size_t)i * rows * r->unit, (int)(rows * r->unit), MPI_BYTE, r->pc[i].reader,
                            TAG_RS_L3, r->ctx->comm, &rq[nrq++]);
            if (mrc != MPI_SUCCESS) {
                nrq--;
                rc = rc ? rc : crpm_mpi_fail(mrc, "crpm_init: MPI_Irecv");
            }
        }
    }
    rc = send_rows(r, b, t0, t1, in, out, rq, &nrq, rc);
    mrc = nrq ? crpm_mpi_idle_wait(nrq, rq, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS)
        rc = rc ? rc : crpm_mpi_fail(mrc, "crpm_init: MPI_Waitall");
    if (r->me == b && rc == 0) {
        decode_rows(r, t0, t1, in, scratch, *img);
        rc = crpm_l3_image_units(*img, t1 * (uint64_t)k, r->unit, r->bound * (uint64_t)k, units);
    }
    return rc;
}

/* Collective: old rank q rebuilt by its builder, window by window. */
static int build_one(rsl3 *r, int q)
{
    int b = r->s->plan.build[q], k = r->k, mine = 0;
    uint64_t unit = r->unit, W = RS_L3_WINDOW / ((uint64_t)k * (uint64_t)k * unit), cap = 0, units = 0;
    W = W ? W : 1;
    W = W < r->bound ? W : r->bound;
    int rc = pieces_of(r, q);
    for (int i = 0; i < k * k; i++)
        mine += r->pc[i].reader == r->me && r->me != b;
    unsigned char *in = NULL, *out = NULL, *scratch = NULL, *img = NULL;
    MPI_Request *rq = malloc(sizeof *rq * (size_t)(k * k + 1));
    if (r->me == b) {
        in = malloc((size_t)(k * k) * W * unit + 1);
        scratch = malloc((size_t)k * unit);
    }
    if (mine)
        out = malloc((size_t)mine * W * unit);
    if (rc == 0 && (!rq || (r->me == b && (!in || !scratch)) || (mine && !out)))
        rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory for the level-3 rebuild");
    if (rc == 0 && !r->bound)
        rc = crpm_error(CRPM_ERR_MISSING, "crpm_init: no level-3 parity rows to rebuild old rank %d from", q);
    rc = crpm_agree(r->ctx->comm, r->me, rc, "crpm_init: rebuilding from level-3 parity");
    uint64_t need = r->bound, t1 = 0;
    for (uint64_t t0 = 0; rc == 0 && t0 < need; t0 = t1) {
        t1 = t0 + W < need ? t0 + W : need;
        int lrc = window(r, b, t0, t1, in, out, scratch, &img, &cap, rq, &units);
        /* the builder says how many rows the image has (every rank: the maximum) */
        int64_t v = r->me == b && units ? -(int64_t)((units + (uint64_t)k - 1) / (uint64_t)k) : 0;
        if (r->me == b && !units)
            v = -(int64_t)need;
        rc = crpm_agree_ext(r->ctx->comm, r->me, lrc, "crpm_init: rebuilding from level-3 parity", &v, 1);
        need = rc == 0 ? (uint64_t)-v : need;
    }
    int wrc = CRPM_SUCCESS;
    if (rc == 0 && r->me == b) {
        if (!units || units > t1 * (uint64_t)k)
            wrc = crpm_error(CRPM_ERR_CORRUPT, "crpm_init: old rank %d rebuilt from level 3 is no valid checkpoint", q);
        else
            wrc = write_rebuilt(r, q, img, &r->made[r->nmade]);
        r->bytes += units * unit;
        r->nmade += wrc == 0;
    }
    if (rc == 0)
        rc = crpm_agree_idle(r->ctx->comm, r->me, wrc, "crpm_init: writing a container rebuilt from level-3 parity");
    free(rq);
    free(in);
    free(out);
    free(scratch);
    free(img);
    return rc;
}

/* Every rank: the rebuilt files become sources (src, reader) of the plan. */
static int adopt(rsl3 *r)
{
    crpm_rs_restart *s = r->s;
    crpm_rs_file *recs = NULL;
    int nrec = 0, rc = crpm_rs_allgather(r->ctx, r->made, r->nmade, sizeof *r->made, (void **)&recs, &nrec);
    crpm_rs_file *nf = rc == 0 ? realloc(s->files, sizeof *nf * (size_t)(s->nfiles + nrec + 1)) : NULL;
    if (rc == 0 && !nf)
        rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rc = crpm_agree(r->ctx->comm, r->me, rc, "crpm_init");
    if (rc == 0) {
        s->files = nf;
        for (int i = 0; i < nrec; i++) {
            int q = recs[i].q;
            s->files[s->nfiles] = recs[i];
            if (q >= 0 && q < r->N && s->plan.build[q] >= 0) {
                s->plan.src[q] = s->nfiles;
                s->plan.reader[q] = recs[i].scanner;
            }
            s->nfiles++;
        }
        for (int q = 0; q < r->N; q++)
            if (s->plan.src[q] < 0)
                rc = crpm_error(CRPM_ERR_STATE, "crpm_init: old rank %d was not rebuilt", q);
    }
    free(recs);
    return crpm_agree(r->ctx->comm, r->me, rc, "crpm_init");
}

/* This rank's rebuilt files, gone (a plan made again, or a restart that fails). */
static void discard(const crpm_ctx *ctx, const crpm_rs_file *f, int n)
{
    for (int i = 0; i < n; i++) {
        char p[CRPM_PATH_MAX];
        if (crpm_name_join(p, sizeof p, ctx->job_dir, f[i].name) == 0)
            crpm_unlink_quiet(p);
    }
    if (n)
        crpm_sync_dir(ctx->job_dir);
}

void crpm_rs_l3_discard(crpm_ctx *ctx, crpm_rs_restart *s)
{
    discard(ctx, s->rebuilt, s->nrebuilt);
    free(s->rebuilt);
    s->rebuilt = NULL;
    s->nrebuilt = 0;
}

static void rsl3_free(rsl3 *r)
{
    for (int i = 0; r->op && i < r->nf; i++) {
        crpm_l3_source_free(r->op[i].src);
        crpm_format_close(r->op[i].c);
    }
    for (int j = 0; r->dec && j < r->k; j++)
        crpm_l3_decoder_free(&r->dec[j]);
    crpm_l3_code_free(&r->code);
    free(r->op);
    free(r->bad);
    free(r->dec);
    free(r->pc);
    free(r->lost);
    free(r->made);
}

int crpm_rs_l3_rebuild(crpm_ctx *ctx, crpm_rs_restart *s, int *nbad)
{
    const crpm_rs_plan *p = &s->plan;
    int k = p->K - p->M, nf = s->nfiles;
    rsl3 r = {.ctx = ctx, .s = s, .N = p->N, .k = k, .me = ctx->rank, .nf = nf, .lay = {p->K, p->M}};
    *nbad = 0;
    r.op = calloc((size_t)nf + 1, sizeof *r.op);
    r.bad = calloc((size_t)nf + 1, sizeof *r.bad);
    r.dec = calloc((size_t)k, sizeof *r.dec);
    r.pc = calloc((size_t)(k * k), sizeof *r.pc);
    r.lost = calloc((size_t)k, sizeof *r.lost);
    r.made = calloc((size_t)p->nbuild + 1, sizeof *r.made);
    int *all = calloc((size_t)nf + 1, sizeof *all);
    int rc = r.op && r.bad && r.dec && r.pc && r.lost && r.made && all ? crpm_l3_code_init(&r.code, k, p->M)
                                                               : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init: rebuilding from level-3 parity");
    int ready = rc == 0; /* agreed: every rank has its buffers */
    double t0 = crpm_now();
    if (rc == 0)
        rc = open_all(&r);
    for (int q = 0; rc == 0 && q < r.N; q++)
        if (p->build[q] >= 0)
            rc = build_one(&r, q);
    /* what failed its checks is an erasure on every rank: the plan is made
     * again (every rank is here, each step having ended in an agreement) */
    if (ready && MPI_Allreduce(r.bad, all, nf + 1, MPI_INT, MPI_MAX, ctx->comm) == MPI_SUCCESS)
        for (int i = 0; i < nf; i++)
            if (all[i]) {
                s->files[i].bad = 1;
                (*nbad)++;
            }
    free(all);
    if (rc == 0)
        rc = adopt(&r);
    /* the busiest builder's bytes and the slowest rank's time */
    double mine[2] = {(double)r.bytes, crpm_now() - t0}, mx[2] = {0, 0};
    if (rc == 0 && ctx->cfg.verbosity >= 2 && MPI_Allreduce(mine, mx, 2, MPI_DOUBLE, MPI_MAX, ctx->comm) == MPI_SUCCESS &&
        ctx->rank == 0) {
        printf("[crpm] restart on %d ranks: rebuilt old rank(s)", ctx->nranks);
        for (int q = 0, n = 0; q < r.N; q++)
            if (p->build[q] >= 0)
                printf("%s %d", n++ ? "," : "", q);
        printf(" from level-3 parity at epoch %llu (%.2f MiB decoded by the busiest rank; %.3f s)\n",
               (unsigned long long)p->epoch, mx[0] / 1048576.0, mx[1]);
        fflush(stdout);
    }
    if (rc == 0) {
        crpm_rs_file *t = realloc(s->rebuilt, sizeof *t * (size_t)(s->nrebuilt + r.nmade + 1));
        if (t) {
            memcpy(t + s->nrebuilt, r.made, sizeof *t * (size_t)r.nmade);
            s->rebuilt = t;
            s->nrebuilt += r.nmade;
        }
    } else {
        discard(ctx, r.made, r.nmade);
    }
    if (rc != 0 && *nbad) {
        crpm_error_clear();
        rc = CRPM_SUCCESS;
    }
    rsl3_free(&r);
    return rc;
}

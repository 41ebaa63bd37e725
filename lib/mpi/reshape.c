/* Restart on another number of ranks: finding, planning and preparing it
 * at init (reshape.h); the recovery itself is in reshape_read.c. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "agree.h"
#include "engine.h"
#include "error.h"
#include "fsutil.h"
#include "l4_global.h"
#include "reserved_ids.h"
#include "reshape.h"
#include "reshape_int.h"

crpm_reshape *crpm_reshape_get(crpm_ctx *ctx)
{
    if (!ctx->reshape && !(ctx->reshape = calloc(1, sizeof *ctx->reshape)))
        crpm_error(CRPM_ERR_NOMEM, "out of memory for the global layout");
    if (ctx->reshape)
        ctx->reshape->ctx = ctx;
    return ctx->reshape;
}

void crpm_rs_restart_free(crpm_rs_restart *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nopen; i++) {
        crpm_format_close(s->open[i].c);
        if (s->open[i].lock_fd >= 0)
            crpm_unlock_file(s->open[i].lock_fd, NULL, 0);
    }
    free(s->open);
    crpm_l4g_close(s->l4);
    for (int q = 0; s->old && q < s->N; q++) {
        crpm_glayout_free(&s->old[q]);
        free(s->arrs[q]);
    }
    free(s->old);
    free(s->arrs);
    free(s->narrs);
    crpm_glayout_free(&s->merged);
    crpm_rs_plan_free(&s->plan);
    free(s->files);
    free(s->l4f);
    free(s->rebuilt);
    free(s);
}

void crpm_reshape_free(crpm_ctx *ctx)
{
    crpm_reshape *r = ctx->reshape;
    if (!r)
        return;
    crpm_rs_restart_free(r->rs);
    crpm_glayout_free(&r->cur);
    crpm_glayout_free(&r->saved);
    free(r->blob);
    free(r->saved_blob);
    free(r);
    ctx->reshape = NULL;
}

/* ---- scan: the job's files in this node's directory ------------------------------- */
#define HELD CRPM_RS_HELD

/* kind and rank of an ordinary or kept name; -1 when it is neither */
static int classify(const char *name, int *kind, int *q, int *held)
{
    char base[CRPM_PATH_MAX];
    const char *h = strstr(name, HELD);
    *held = h != NULL;
    size_t n = h ? (size_t)(h - name) : strlen(name);
    if (n >= sizeof base)
        return -1;
    memcpy(base, name, n);
    base[n] = '\0';
    if ((*q = crpm_parse_container_name(base)) >= 0)
        *kind = CRPM_RS_CONT;
    else if ((*q = crpm_parse_partner_name(base)) >= 0)
        *kind = CRPM_RS_COPY;
    else if ((*q = crpm_parse_parity_name(base)) >= 0)
        *kind = CRPM_RS_PARITY;
    else
        return -1;
    return 0;
}

static void describe_file(const crpm_ctx *ctx, const char *path, crpm_rs_file *x)
{
    crpm_open_opts o = {.path = path, .job_name = ctx->cfg.job_name, .read_only = 1};
    crpm_container *c = NULL;
    x->rc = crpm_format_open(&o, &c, NULL);
    if (x->rc != 0) {
        crpm_error_clear();
        return;
    }
    char job[CRPM_JOB_MAX];
    int32_t rank, nranks;
    crpm_container_identity(c, job, sizeof job, &rank, &nranks);
    x->nranks = nranks;
    if (rank != x->q && x->kind != CRPM_RS_PARITY)
        x->rc = CRPM_ERR_IDENTITY; /* a file under another rank's name */
    x->epoch = crpm_container_epoch(c);
    x->user_id = crpm_container_user_id(c);
    x->prev_ok = crpm_container_prev_available(c);
    if (x->prev_ok && x->epoch > 1 && crpm_container_prev_user_id(c, &x->prev_user_id) != 0)
        x->prev_ok = 0;
    x->seg = crpm_container_segment_size(c);
    x->blk = crpm_container_block_size(c);
    crpm_layout lay;
    if (crpm_container_layout(c, &lay) == 1) {
        x->has_lay = 1;
        x->lay_node = lay.node;
        x->lay_nsize = lay.node_size;
        x->lay_nnodes = lay.nnodes;
        x->lay_K = lay.group_size;
        x->lay_M = lay.l3_parity;
    }
    x->created_ns = (int64_t)c->sb.created_ns;
    struct crpm_slot_hdr hdr;
    memcpy(&hdr, c->view_hdr, sizeof hdr);
    x->time_ns = x->epoch ? (int64_t)hdr.timestamp_ns : 0;
    crpm_container_run_id(c, x->run);
    crpm_format_close(c);
    crpm_error_clear();
}

int crpm_rs_describe(const crpm_ctx *ctx, const char *name, crpm_rs_file *x)
{
    int kind, q, held;
    memset(x, 0, sizeof *x);
    if (classify(name, &kind, &q, &held) != 0 || strlen(name) >= sizeof x->name)
        return crpm_error(CRPM_ERR_RANGE, "crpm_init: %s is no checkpoint file name", name);
    x->kind = kind;
    x->q = q;
    x->held = held;
    size_t n = strlen(name), sn = strlen(CRPM_RS_REBUILT);
    x->rebuilt = held && n > sn && strcmp(name + n - sn, CRPM_RS_REBUILT) == 0;
    x->node = ctx->topo.node;
    x->scanner = ctx->rank;
    memcpy(x->name, name, n + 1); /* fits: checked above */
    char path[CRPM_PATH_MAX];
    if (crpm_name_join(path, sizeof path, ctx->job_dir, name) != 0)
        x->rc = CRPM_ERR_RANGE;
    else
        describe_file(ctx, path, x);
    crpm_error_clear();
    return CRPM_SUCCESS;
}

/* The node's first rank lists its job directory. */
static int scan(crpm_ctx *ctx, crpm_rs_file **out, int *nout)
{
    *out = NULL;
    *nout = 0;
    if (ctx->topo.local != 0)
        return CRPM_SUCCESS;
    DIR *d = opendir(ctx->job_dir);
    if (!d)
        return errno == ENOENT ? CRPM_SUCCESS
                               : crpm_error(CRPM_ERR_IO, "crpm_init: cannot list %s: %s", ctx->job_dir, strerror(errno));
    crpm_rs_file *v = NULL;
    int n = 0, cap = 0, rc = CRPM_SUCCESS;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int kind, q, held;
        if (classify(e->d_name, &kind, &q, &held) != 0 || strlen(e->d_name) >= sizeof v->name ||
            (strstr(e->d_name, ".tmp") != NULL))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            crpm_rs_file *nv = realloc(v, sizeof *nv * (size_t)cap);
            if (!nv) {
                rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
                break;
            }
            v = nv;
        }
        crpm_rs_describe(ctx, e->d_name, &v[n++]);
    }
    closedir(d);
    if (rc != 0) {
        free(v);
        return rc;
    }
    *out = v;
    *nout = n;
    return CRPM_SUCCESS;
}

/* Allgatherv of fixed-size records as bytes. */
int crpm_rs_allgather(crpm_ctx *ctx, const void *mine, int n, size_t size, void **all, int *nall)
{
    int *cnt = calloc((size_t)ctx->nranks, sizeof *cnt), *dsp = calloc((size_t)ctx->nranks, sizeof *dsp);
    int rc = cnt && dsp ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
    int nb = n * (int)size, mrc = MPI_SUCCESS;
    if (rc == 0)
        mrc = MPI_Allgather(&nb, 1, MPI_INT, cnt, 1, MPI_INT, ctx->comm);
    long total = 0;
    for (int r = 0; rc == 0 && mrc == MPI_SUCCESS && r < ctx->nranks; r++) {
        dsp[r] = (int)total;
        total += cnt[r];
    }
    if (rc == 0 && mrc != MPI_SUCCESS)
        rc = crpm_mpi_fail(mrc, "crpm_init: MPI_Allgather");
    if (rc == 0 && total > 0x7fffffffL)
        rc = crpm_error(CRPM_ERR_RANGE, "crpm_init: %ld bytes to gather", total);
    *all = NULL;
    if (rc == 0 && !(*all = malloc((size_t)total + 1)))
        rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
    if (rc == 0 && (mrc = MPI_Allgatherv(mine, nb, MPI_BYTE, *all, cnt, dsp, MPI_BYTE, ctx->comm)) != MPI_SUCCESS)
        rc = crpm_mpi_fail(mrc, "crpm_init: MPI_Allgatherv");
    *nall = rc == 0 ? (int)(total / (long)size) : 0;
    free(cnt);
    free(dsp);
    if (rc != 0) {
        free(*all);
        *all = NULL;
    }
    return rc;
}

/* ---- level-1 sources: opened and checked by their readers --------------------------- */
static int open_source(crpm_ctx *ctx, crpm_rs_restart *s, int fi, const int *node_of)
{
    const crpm_rs_file *x = &s->files[fi];
    char path[CRPM_PATH_MAX];
    int rc = crpm_name_join(path, sizeof path, ctx->job_dir, x->name);
    struct rs_open *o = &s->open[s->nopen];
    memset(o, 0, sizeof *o);
    o->file = fi;
    o->q = x->q;
    o->lock_fd = -1;
    /* the old rank's lock shows its process is gone; rank q of this job took
     * rank-q.lock in its own directory already (the same one, or another
     * node's), so only the ranks this job lacks are locked here */
    (void)node_of;
    if (rc == 0 && x->kind == CRPM_RS_CONT && x->q >= ctx->nranks) {
        char lock[CRPM_PATH_MAX];
        rc = crpm_name_rank_lock(lock, sizeof lock, ctx->job_dir, x->q);
        if (rc == 0)
            rc = crpm_lock_file(lock, ctx->cfg.lock_wait_s, &o->lock_fd);
    }
    crpm_open_opts op = {.path = path, .job_name = ctx->cfg.job_name, .rank = x->q, .nranks = x->nranks,
                         .read_only = 1};
    if (rc == 0)
        rc = crpm_format_open(&op, &o->c, NULL);
    /* epoch e of a container one ahead: its previous slot, read in memory only */
    if (rc == 0 && crpm_container_epoch(o->c) == s->plan.epoch + 1)
        rc = crpm_load_slot(o->c, s->plan.epoch);
    else if (rc == 0 && crpm_container_epoch(o->c) != s->plan.epoch)
        rc = crpm_error(CRPM_ERR_EPOCH, "%s: holds epoch %llu, the restart needs %llu", path,
                        (unsigned long long)crpm_container_epoch(o->c), (unsigned long long)s->plan.epoch);
    if (rc == 0)
        rc = crpm_container_verify(o->c, NULL);
    s->nopen++;
    if (rc != 0 && ctx->cfg.verbosity >= 1) {
        fprintf(stderr, "[crpm rank %d] not using %s for the restart on %d ranks: %s\n", ctx->rank, path,
                ctx->nranks, crpm_last_error());
        fflush(stderr);
    }
    return rc;
}

static void close_sources(crpm_rs_restart *s)
{
    for (int i = 0; i < s->nopen; i++) {
        crpm_format_close(s->open[i].c);
        if (s->open[i].lock_fd >= 0)
            crpm_unlock_file(s->open[i].lock_fd, NULL, 0);
    }
    s->nopen = 0;
}

/* Readers open and check their sources; the files that fail are marked
 * bad on every rank.  Returns the number marked. */
static int check_l1(crpm_ctx *ctx, crpm_rs_restart *s, const int *node_of, int *nbad)
{
    close_sources(s);
    free(s->open);
    s->open = calloc((size_t)s->plan.N + 1, sizeof *s->open);
    int *bad = calloc((size_t)s->nfiles + 1, sizeof *bad), *all = calloc((size_t)s->nfiles + 1, sizeof *all);
    int rc = s->open && bad && all ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
    for (int q = 0; rc == 0 && q < s->plan.N; q++) {
        int orc = s->plan.reader[q] == ctx->rank && s->plan.src[q] >= 0 ? open_source(ctx, s, s->plan.src[q], node_of)
                                                                         : CRPM_SUCCESS;
        if (orc == CRPM_ERR_BUSY)
            rc = orc; /* a process of the old run still holds it: not an erasure */
        else if (orc != 0) {
            bad[s->plan.src[q]] = 1;
            crpm_error_clear();
        }
    }
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init: locking the older rank count's containers");
    int mrc = rc == 0 ? MPI_Allreduce(bad, all, s->nfiles + 1, MPI_INT, MPI_MAX, ctx->comm) : MPI_SUCCESS;
    if (rc == 0 && mrc != MPI_SUCCESS)
        rc = crpm_mpi_fail(mrc, "crpm_init: MPI_Allreduce");
    *nbad = 0;
    for (int i = 0; rc == 0 && i < s->nfiles; i++)
        if (all[i]) {
            s->files[i].bad = 1;
            (*nbad)++;
        }
    free(bad);
    free(all);
    return rc;
}

/* ---- the old layouts, gathered ------------------------------------------------------ */
/* One old rank's description: q, its arrays, its layout region. */
static int pack_rank(unsigned char **buf, size_t *len, size_t *cap, int32_t q, const crpm_array *a, int n,
                     const void *blob, uint64_t bloblen)
{
    size_t need = *len + 16 + (size_t)n * 24 + (size_t)bloblen + 8;
    if (need > *cap) {
        size_t c = need * 2;
        unsigned char *b = realloc(*buf, c);
        if (!b)
            return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
        *buf = b;
        *cap = c;
    }
    unsigned char *p = *buf + *len;
    int32_t h[2] = {q, n};
    memcpy(p, h, 8);
    memcpy(p + 8, &bloblen, 8);
    p += 16;
    for (int i = 0; i < n; i++, p += 24) {
        int32_t w[2] = {a[i].id, a[i].type_code};
        memcpy(p, w, 8);
        memcpy(p + 8, &a[i].elem_size, 8);
        memcpy(p + 16, &a[i].count, 8);
    }
    if (bloblen)
        memcpy(p, blob, (size_t)bloblen);
    *len = (size_t)(p - *buf) + (size_t)bloblen;
    return CRPM_SUCCESS;
}

/* This rank's share: the arrays and layout of each source it read. */
static int describe_l1(crpm_rs_restart *s, unsigned char **buf, size_t *len, size_t *cap)
{
    int rc = CRPM_SUCCESS;
    for (int i = 0; rc == 0 && i < s->nopen; i++) {
        crpm_container *c = s->open[i].c;
        int n = crpm_container_nregions(c);
        crpm_array *a = calloc((size_t)n + 1, sizeof *a);
        void *blob = NULL;
        uint64_t bl = 0;
        if (!a)
            rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
        for (int k = 0; rc == 0 && k < n; k++)
            rc = crpm_container_region(c, k, &a[k]);
        crpm_region *lr = rc == 0 ? crpm_region_find(c, CRPM_ID_GLAYOUT) : NULL;
        if (lr && lr->saved) {
            bl = lr->count * lr->elem_size;
            if (!(blob = malloc(bl ? bl : 1)))
                rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
            if (rc == 0)
                rc = crpm_copy_saved_range(c, lr, 0, bl, blob);
        }
        if (rc == 0)
            rc = pack_rank(buf, len, cap, s->open[i].q, a, n, blob, bl);
        free(a);
        free(blob);
    }
    return rc;
}

static int describe_l4(crpm_ctx *ctx, crpm_rs_restart *s, unsigned char **buf, size_t *len, size_t *cap)
{
    int rc = CRPM_SUCCESS;
    for (int q = ctx->rank; rc == 0 && q < s->N; q += ctx->nranks) {
        crpm_array *a = NULL;
        int n = 0;
        void *blob = NULL;
        uint64_t bl = 0;
        rc = crpm_l4g_rank_arrays(s->l4, q, &a, &n);
        for (int i = 0; rc == 0 && i < n; i++)
            if (a[i].id == CRPM_ID_GLAYOUT) {
                bl = a[i].count * a[i].elem_size;
                if (!(blob = malloc(bl ? bl : 1)))
                    rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
                if (rc == 0)
                    rc = crpm_l4g_rank_read(s->l4, q, CRPM_ID_GLAYOUT, blob, bl);
            }
        crpm_glayout lay;
        memset(&lay, 0, sizeof lay);
        if (rc == 0 && blob)
            rc = crpm_glayout_parse(blob, bl, &lay, "level-4 file");
        if (rc == 0)
            rc = crpm_l4g_verify_boxes(s->l4, q, &lay);
        /* the boxes are arrays of the old rank too, stored in the global datasets */
        crpm_array *all = rc == 0 ? realloc(a, sizeof *a * (size_t)(n + lay.nsub + 1)) : NULL;
        if (rc == 0 && !all)
            rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
        for (int k = 0; rc == 0 && k < lay.nsub; k++) {
            const crpm_subset *b = &lay.sub[k];
            const crpm_gds *d = crpm_glayout_dataset(&lay, b->gid);
            all[n++] = (crpm_array){b->id, d->type_code, d->elem_size, crpm_box_volume(b->ndims, b->cnt), NULL, NULL, NULL};
        }
        if (all)
            a = all;
        crpm_glayout_free(&lay);
        if (rc == 0)
            rc = pack_rank(buf, len, cap, q, a, n, blob, bl);
        free(a);
        free(blob);
    }
    return rc;
}

/* Every old rank's arrays and layout on every rank. */
static int gather_old(crpm_ctx *ctx, crpm_rs_restart *s)
{
    unsigned char *buf = NULL, *all = NULL;
    size_t len = 0, cap = 0;
    int rc = s->plan.kind == CRPM_RS_L1 ? describe_l1(s, &buf, &len, &cap) : describe_l4(ctx, s, &buf, &len, &cap);
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init: reading the saved layouts");
    int nall = 0;
    if (rc == 0)
        rc = crpm_rs_allgather(ctx, buf ? buf : (unsigned char *)"", (int)len, 1, (void **)&all, &nall);
    free(buf);
    s->old = calloc((size_t)s->N, sizeof *s->old);
    s->arrs = calloc((size_t)s->N, sizeof *s->arrs);
    s->narrs = calloc((size_t)s->N, sizeof *s->narrs);
    int *seen = calloc((size_t)s->N, sizeof *seen);
    if (rc == 0 && (!s->old || !s->arrs || !s->narrs || !seen))
        rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    for (size_t o = 0; rc == 0 && o < (size_t)nall;) {
        int32_t h[2];
        uint64_t bl;
        memcpy(h, all + o, 8);
        memcpy(&bl, all + o + 8, 8);
        o += 16;
        int q = h[0];
        if (q < 0 || q >= s->N || seen[q]) {
            rc = crpm_error(CRPM_ERR_CORRUPT, "crpm_init: old rank %d described twice", q);
            break;
        }
        seen[q] = 1;
        s->narrs[q] = h[1];
        s->arrs[q] = calloc((size_t)h[1] + 1, sizeof *s->arrs[q]);
        if (!s->arrs[q]) {
            rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
            break;
        }
        for (int i = 0; i < h[1]; i++, o += 24) {
            int32_t w[2];
            memcpy(w, all + o, 8);
            s->arrs[q][i].id = w[0];
            s->arrs[q][i].type_code = w[1];
            memcpy(&s->arrs[q][i].elem_size, all + o + 8, 8);
            memcpy(&s->arrs[q][i].count, all + o + 16, 8);
        }
        char where[64];
        snprintf(where, sizeof where, "old rank %d", q);
        if (bl)
            rc = crpm_glayout_parse(all + o, (size_t)bl, &s->old[q], where);
        o += (size_t)bl;
    }
    for (int q = 0; rc == 0 && q < s->N; q++)
        if (!seen[q])
            rc = crpm_error(CRPM_ERR_MISSING, "crpm_init: nothing describes old rank %d", q);
    free(seen);
    free(all);
    return rc;
}

/* Per-rank state cannot be placed on another rank count: every saved array
 * must be a box of a global dataset, replicated, or the layout itself. */
static int check_old(const crpm_ctx *ctx, crpm_rs_restart *s, crpm_glayout *merged)
{
    int same = s->N == ctx->nranks && s->plan.kind == CRPM_RS_L4;
    for (int q = 0; q < s->N; q++) {
        const crpm_glayout *l = &s->old[q];
        for (int i = 0; i < l->nds; i++) {
            const crpm_gds *d = crpm_glayout_dataset(merged, l->ds[i].gid);
            if (d && !crpm_gds_same(d, &l->ds[i]))
                return crpm_error(CRPM_ERR_CORRUPT, "crpm_init: old ranks define global dataset %d differently",
                                  l->ds[i].gid);
            if (!d && crpm_glayout_define(merged, l->ds[i].gid, l->ds[i].ndims, (const int64_t *)l->ds[i].dims,
                                         l->ds[i].type_code, l->ds[i].elem_size, l->ds[i].name) != 0)
                return CRPM_ERR_NOMEM;
        }
        for (int i = 0; i < s->narrs[q]; i++) {
            const crpm_array *a = &s->arrs[q][i];
            const crpm_subset *b = crpm_glayout_subset(l, a->id);
            if (a->id == CRPM_ID_GLAYOUT || crpm_glayout_replicated(l, a->id) || same)
                continue;
            if (!b)
                return crpm_error(CRPM_ERR_NRANKS, "crpm_init: the checkpoint was written by %d ranks and this run "
                                  "has %d: old rank %d's array %d is per-rank state (neither a box of a global "
                                  "dataset, crpm_add_subset, nor replicated, crpm_protect_replicated), which "
                                  "another number of ranks cannot take over; nothing was changed", s->N,
                                  ctx->nranks, q, a->id);
        }
        for (int i = 0; i < l->nsub; i++) {
            const crpm_subset *b = &l->sub[i];
            const crpm_gds *d = crpm_glayout_dataset(l, b->gid);
            const crpm_array *a = NULL;
            for (int k = 0; k < s->narrs[q]; k++)
                if (s->arrs[q][k].id == b->id)
                    a = &s->arrs[q][k];
            if (!a || !d || a->count != crpm_box_volume(b->ndims, b->cnt) || a->elem_size != d->elem_size)
                return crpm_error(CRPM_ERR_CORRUPT, "crpm_init: old rank %d's array %d does not match its box of "
                                  "global dataset %d", q, b->id, b->gid);
        }
    }
    return CRPM_SUCCESS;
}

/* ---- kept files ------------------------------------------------------------------------ */
void crpm_rs_run_tag(const uint8_t *run, char *tag, size_t n)
{
    snprintf(tag, n, "%02x%02x%02x%02x%02x%02x%02x%02x", run[0], run[1], run[2], run[3], run[4], run[5], run[6],
             run[7]);
}

/* The scanners rename the job's files they found: this job's containers
 * take the ordinary names, the old ones stay, kept (never deleted here). */
static int keep_old(crpm_ctx *ctx, crpm_rs_restart *s)
{
    int rc = CRPM_SUCCESS;
    for (int i = 0; i < s->nfiles && rc == 0; i++) {
        crpm_rs_file *x = &s->files[i];
        if (x->scanner != ctx->rank || x->held)
            continue;
        /* files of this rank count that this job's levels take over, as an
         * ordinary restart does: its containers that hold nothing, and the
         * partner copies and parity its levels 2 and 3 opened at init */
        if (x->rc == 0 && x->nranks == ctx->nranks && (x->kind != CRPM_RS_CONT || x->epoch == 0))
            continue;
        char tag[40], from[CRPM_PATH_MAX], to[CRPM_PATH_MAX + 64];
        if (x->rc == 0)
            crpm_rs_run_tag(x->run, tag, sizeof tag);
        else
            snprintf(tag, sizeof tag, "unreadable-%lld", (long long)time(NULL));
        if (crpm_name_join(from, sizeof from, ctx->job_dir, x->name) != 0)
            continue;
        snprintf(to, sizeof to, "%s%s%s", from, HELD, tag);
        struct stat st;
        rc = crpm_durable_rename(from, to);
        if (rc != 0 && stat(from, &st) != 0 && stat(to, &st) == 0) {
            crpm_error_clear(); /* another node sharing the directory renamed it */
            rc = CRPM_SUCCESS;
        }
    }
    return rc;
}

/* Removes this node's kept files (scanners). */
static int remove_held(crpm_ctx *ctx)
{
    if (ctx->topo.local != 0)
        return CRPM_SUCCESS;
    DIR *d = opendir(ctx->job_dir);
    if (!d)
        return CRPM_SUCCESS;
    int rc = CRPM_SUCCESS, any = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int kind, q, held;
        char p[CRPM_PATH_MAX];
        if (classify(e->d_name, &kind, &q, &held) == 0 && held &&
            crpm_name_join(p, sizeof p, ctx->job_dir, e->d_name) == 0) {
            int lrc = crpm_unlink_quiet(p);
            rc = rc ? rc : lrc;
            any = 1;
        }
    }
    closedir(d);
    if (any && rc == 0)
        rc = crpm_sync_dir(ctx->job_dir);
    return rc;
}

int crpm_reshape_committed(crpm_ctx *ctx, int level)
{
    crpm_reshape *r = ctx->reshape;
    int node_level = level == CRPM_L4 ? CRPM_L1 : level;
    if (r && r->rs && ctx->source != &r->level) {
        crpm_rs_restart_free(r->rs); /* the old sources are no longer what a recovery reads */
        r->rs = NULL;
    }
    if (!r || !r->held_level || node_level < r->held_level)
        return CRPM_SUCCESS;
    crpm_testhook_point(ctx, "reshape_removing");
    int rc = crpm_agree(ctx->comm, ctx->rank, remove_held(ctx), "crpm_checkpoint: removing the files of the older "
                        "rank count");
    if (rc == 0) {
        r->held_level = 0;
        if (ctx->rank == 0 && ctx->cfg.verbosity >= 2) {
            printf("[crpm] restart on %d ranks complete: the older rank count's files are removed\n", ctx->nranks);
            fflush(stdout);
        }
    }
    return rc;
}

int crpm_reshape_finalize(crpm_ctx *ctx)
{
    return crpm_agree(ctx->comm, ctx->rank, remove_held(ctx), "crpm_finalize: removing the files of an older rank "
                      "count");
}

/* ---- the restart ----------------------------------------------------------------------- */
/* Collective: the job's level-4 files (none without glbl_dir or HDF5). */
static int list_l4(crpm_ctx *ctx, crpm_rs_restart *s)
{
#ifdef CRPM_HAVE_HDF5
    if (!ctx->cfg.glbl_dir[0])
        return CRPM_SUCCESS;
    return crpm_l4g_list(ctx->comm, ctx->cfg.glbl_dir, ctx->cfg.job_name, &s->l4f, &s->nl4f);
#else
    (void)ctx;
    (void)s;
    return CRPM_SUCCESS;
#endif
}

/* Planning facts from what was found; l4 list only the files with a layout. */
static int plan(crpm_ctx *ctx, crpm_rs_restart *s, const int *node_of, crpm_rs_l4 *l4, int ordinary,
                const char *l4_path)
{
    int nl4 = 0;
    uint64_t oseq = 0;
    const char *base = l4_path ? strrchr(l4_path, '/') : NULL;
    base = base ? base + 1 : l4_path;
    for (int i = 0; i < s->nl4f; i++) {
        const crpm_l4g_file *x = &s->l4f[i];
        if (ordinary && base && strcmp(x->name, base) == 0)
            oseq = x->seq;
        if (!x->layout)
            continue;
        crpm_rs_l4 *y = &l4[nl4++];
        if (!y->bad) {
            memset(y, 0, sizeof *y);
            y->nranks = x->nranks;
            y->ckpt_id = x->ckpt_id;
            y->seq = x->seq;
            y->time_ns = x->time_ns;
            snprintf(y->name, sizeof y->name, "%s", x->name);
        }
    }
    crpm_rs_facts f = {ctx->nranks, node_of, s->files, s->nfiles, l4, nl4, ordinary, oseq};
    crpm_rs_plan_free(&s->plan);
    crpm_rs_plan_make(&f, &s->plan);
    return s->plan.kind;
}

/* The chosen level-4 file, opened by every rank; the old layouts gathered
 * checks it (a damaged file is skipped for the next one). */
static int open_l4(crpm_ctx *ctx, crpm_rs_restart *s, const crpm_rs_l4 *l4)
{
    char dir[CRPM_PATH_MAX];
    int rc = crpm_name_join(dir, sizeof dir, ctx->cfg.glbl_dir, ctx->cfg.job_name);
    if (rc == 0)
        rc = crpm_name_join(s->l4_path, sizeof s->l4_path, dir, l4[s->plan.l4].name);
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
    crpm_l4g_close(s->l4);
    s->l4 = NULL;
    if (rc == 0)
        rc = crpm_l4g_open(ctx->comm, s->l4_path, ctx->cfg.job_name, &s->l4);
    if (rc == 0 && crpm_l4g_nranks(s->l4) != s->plan.N)
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: written by %d ranks, its name says %d", s->l4_path,
                        crpm_l4g_nranks(s->l4), s->plan.N);
    return crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init: opening a level-4 file");
}

/* Sources are chosen and checked until every one passes (a damaged one is
 * an erasure: the plan is made again without it). */
static int settle(crpm_ctx *ctx, crpm_rs_restart *s, const int *node_of, crpm_rs_l4 *l4, crpm_verdict *v,
                  const char *l4_path)
{
    for (int round = 0;; round++) {
        int kind = plan(ctx, s, node_of, l4, v->kind == CRPM_V_FOUND, l4_path);
        if (kind == CRPM_RS_NONE)
            return CRPM_SUCCESS;
        if (kind == CRPM_RS_ERROR)
            return crpm_agree(ctx->comm, ctx->rank, crpm_error(s->plan.code, "%s", s->plan.msg), "crpm_init");
        s->N = s->plan.N;
        int rc, nbad = 0;
        if (kind == CRPM_RS_L1) {
            /* old containers lost with their nodes first rebuilt from level 3 */
            if (s->plan.nbuild) {
                rc = crpm_rs_l3_rebuild(ctx, s, &nbad);
                if (rc != 0)
                    return rc;
                if (nbad)
                    continue; /* a damaged unit's file is an erasure: planned again without it */
            }
            rc = check_l1(ctx, s, node_of, &nbad);
            if (rc != 0)
                return rc;
            if (nbad)
                continue;
            return gather_old(ctx, s);
        }
        rc = open_l4(ctx, s, l4);
        if (rc == 0)
            rc = gather_old(ctx, s); /* reads and checks every old rank's datasets */
        if (rc == 0 || rc == CRPM_ERR_MPI || rc == CRPM_ERR_NOMEM || round > s->nl4f)
            return rc;
        if (ctx->rank == 0 && ctx->cfg.verbosity >= 1)
            fprintf(stderr, "crpm: warning: skipping level-4 checkpoint %s: %s\n", s->l4_path, crpm_last_error());
        crpm_error_clear();
        for (int i = 0; i < s->nl4f; i++)
            l4[i].bad |= i == s->plan.l4;
        for (int q = 0; s->old && q < s->N; q++) {
            crpm_glayout_free(&s->old[q]);
            free(s->arrs[q]);
        }
        free(s->old);
        free(s->arrs);
        free(s->narrs);
        s->old = NULL;
        s->arrs = NULL;
        s->narrs = NULL;
    }
}

int crpm_reshape_restart(crpm_ctx *ctx, crpm_verdict *v, const char *l4_path)
{
    int applies = (v->kind == CRPM_V_FRESH && !v->set_aside) || v->kind == CRPM_V_FOUND ||
                  (v->kind == CRPM_V_ERROR && v->code == CRPM_ERR_NRANKS);
    if (!applies || ctx->cfg.method != CRPM_METHOD_DIFFERENTIAL)
        return CRPM_SUCCESS;
    crpm_reshape *r = crpm_reshape_get(ctx);
    crpm_rs_restart *s = calloc(1, sizeof *s);
    int *node_of = calloc((size_t)ctx->nranks, sizeof *node_of);
    int rc = r && s && node_of ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
    int mrc = rc == 0 ? MPI_Allgather(&ctx->topo.node, 1, MPI_INT, node_of, 1, MPI_INT, ctx->comm) : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS)
        rc = crpm_mpi_fail(mrc, "crpm_init: MPI_Allgather");
    crpm_rs_file *mine = NULL;
    int nmine = 0;
    if (rc == 0)
        rc = crpm_agree(ctx->comm, ctx->rank, scan(ctx, &mine, &nmine), "crpm_init: listing the job directory");
    if (rc == 0)
        rc = crpm_rs_allgather(ctx, mine, nmine, sizeof *mine, (void **)&s->files, &s->nfiles);
    free(mine);
    if (rc == 0)
        rc = list_l4(ctx, s);
    crpm_rs_l4 *l4 = rc == 0 ? calloc((size_t)s->nl4f + 1, sizeof *l4) : NULL;
    if (rc == 0 && !l4)
        rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
    if (rc == 0)
        rc = settle(ctx, s, node_of, l4, v, l4_path);
    if (rc == 0 && s->plan.kind != CRPM_RS_NONE) {
        rc = crpm_agree(ctx->comm, ctx->rank, check_old(ctx, s, &s->merged), "crpm_init");
        if (rc == 0)
            rc = crpm_agree(ctx->comm, ctx->rank, keep_old(ctx, s), "crpm_init: keeping the older rank count's files");
        if (rc == 0 && s->nfiles)
            r->held_level = 1;
    }
    if (rc == 0 && s->plan.kind != CRPM_RS_NONE) {
        int same = s->plan.kind == CRPM_RS_L4 && s->N == ctx->nranks;
        if (s->plan.kind == CRPM_RS_L1 && s->plan.held_level > r->held_level)
            r->held_level = s->plan.held_level;
        crpm_glayout_free(&r->saved);
        r->saved = s->merged;
        memset(&s->merged, 0, sizeof s->merged);
        r->have_saved = 1;
        r->rs = s;
        s = NULL;
        crpm_rs_level_init(ctx, r);
        ctx->source = &r->level;
        ctx->status = same ? CRPM_STATUS_L4 : CRPM_STATUS_RESHAPED;
        ctx->last_id = r->rs->plan.kind == CRPM_RS_L1 ? r->rs->plan.user_id
                                                      : (uint64_t)(int64_t)crpm_l4g_ckpt_id(r->rs->l4);
        v->kind = CRPM_V_FRESH;
        if (ctx->rank == 0 && ctx->cfg.verbosity >= 2) {
            if (r->rs->plan.kind == CRPM_RS_L1)
                printf("[crpm] restart on %d ranks from the level-1 checkpoint %llu (epoch %llu) of %d ranks\n",
                       ctx->nranks, (unsigned long long)ctx->last_id, (unsigned long long)r->rs->plan.epoch,
                       r->rs->N);
            else
                printf("[crpm] restart on %d ranks from the level-4 checkpoint %llu of %d ranks in %s\n",
                       ctx->nranks, (unsigned long long)ctx->last_id, r->rs->N, r->rs->l4_path);
            fflush(stdout);
        }
    }
    if (rc != 0 && s)
        crpm_rs_l3_discard(ctx, s); /* a refused restart leaves the files as it found them */
    free(l4);
    free(node_of);
    crpm_rs_restart_free(s);
    return rc;
}

/* Public calls of the global layout (crpm_define_global, crpm_add_subset,
 * crpm_protect_replicated, crpm_global_dims) and the layout region that
 * carries it in every checkpoint (docs/reshape.md, mpi/reshape.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api_internal.h"
#include "background.h"
#include "error.h"
#include "reserved_ids.h"
#include "reshape.h"

static int check_type(crpm_type_t type, const char *fn, int id)
{
    if (type.size <= 0 || !((type.code >= CRPM_TC_CHAR && type.code <= CRPM_TC_LOGICAL) || type.code >= CRPM_TYPE_USER))
        return crpm_error(CRPM_ERR_INVAL, "%s(%d): unknown type (code %d, %lld bytes)", fn, id, (int)type.code,
                          (long long)type.size);
    return CRPM_SUCCESS;
}

static crpm_reshape *state(const char *fn, int id, int *rc)
{
    crpm_ctx *ctx = crpm_api_ctx();
    *rc = CRPM_SUCCESS;
    if (!ctx) {
        *rc = crpm_error(CRPM_ERR_STATE, "%s(%d): call crpm_init first", fn, id);
        return NULL;
    }
    crpm_bg_idle(ctx); /* level 4 in the background reads the layout */
    crpm_reshape *r = crpm_reshape_get(ctx);
    if (!r)
        *rc = CRPM_ERR_NOMEM;
    return r;
}

int crpm_define_global(int gid, int ndims, const int64_t dims[], crpm_type_t type, const char *name)
{
    const char *fn = "crpm_define_global";
    CRPM_GUARD(fn, 0);
    int rc;
    crpm_reshape *r = state(fn, gid, &rc);
    if (r)
        rc = check_type(type, fn, gid);
    if (rc != 0) /* these messages name the call already */
        return crpm_api_report(rc, fn);
    rc = crpm_glayout_define(&r->cur, gid, ndims, dims, type.code, (uint64_t)type.size, name);
    if (rc != 0) /* the layout's message names the dataset, not the call */
        return crpm_api_report(crpm_error(rc, "%s(%d): %s", fn, gid, crpm_last_error()), fn);
    return CRPM_SUCCESS;
}

int crpm_add_subset(int gid, int id, const int64_t offset[], const int64_t count[])
{
    const char *fn = "crpm_add_subset";
    CRPM_GUARD(fn, 0);
    int rc;
    crpm_reshape *r = state(fn, id, &rc);
    if (r && crpm_id_reserved(id))
        rc = crpm_error(CRPM_ERR_INVAL, "%s(%d): ids %d to %d are reserved for the library", fn, id,
                        CRPM_RESERVED_ID_MIN, CRPM_RESERVED_ID_MAX);
    if (rc != 0) /* these messages name the call already */
        return crpm_api_report(rc, fn);
    rc = crpm_glayout_add_subset(&r->cur, gid, id, offset, count);
    if (rc != 0)
        return crpm_api_report(crpm_error(rc, "%s(%d): %s", fn, id, crpm_last_error()), fn);
    return CRPM_SUCCESS;
}

int crpm_protect_replicated(int id, void *ptr, int64_t count, crpm_type_t type)
{
    const char *fn = "crpm_protect_replicated";
    CRPM_GUARD(fn, 0);
    int rc;
    crpm_reshape *r = state(fn, id, &rc);
    if (rc != 0)
        return crpm_api_report(rc, fn);
    rc = crpm_protect(id, ptr, count, type);
    if (rc == 0)
        rc = crpm_glayout_add_replicated(&r->cur, id);
    return rc ? crpm_api_report(rc, fn) : CRPM_SUCCESS;
}

int crpm_global_dims(int gid, int64_t dims[])
{
    const char *fn = "crpm_global_dims";
    CRPM_GUARD(fn, 0);
    int rc;
    crpm_reshape *r = state(fn, gid, &rc);
    if (rc == 0 && !dims)
        rc = crpm_error(CRPM_ERR_INVAL, "%s(%d): dims is NULL", fn, gid);
    if (rc != 0)
        return crpm_api_report(rc, fn);
    const crpm_gds *d = r->have_saved ? crpm_glayout_dataset(&r->saved, gid) : NULL;
    if (!d)
        d = crpm_glayout_dataset(&r->cur, gid);
    if (!d)
        return crpm_api_report(crpm_error(CRPM_ERR_INVAL, "%s(%d): dataset %d is neither in the checkpoint nor "
                                          "defined", fn, gid, gid), fn);
    for (int k = 0; k < d->ndims; k++)
        dims[k] = (int64_t)d->dims[k];
    return d->ndims;
}

/* ---- the layout region -------------------------------------------------------- */
static const crpm_array *protected_array(const crpm_ctx *ctx, int32_t id)
{
    for (int i = 0; i < ctx->narrays; i++)
        if (ctx->arrays[i].id == id)
            return &ctx->arrays[i];
    return NULL;
}

/* The declared boxes must match the arrays that hold them. */
static int check_subsets(const crpm_ctx *ctx, const crpm_glayout *l, const char *fn)
{
    for (int i = 0; i < l->nsub; i++) {
        const crpm_subset *s = &l->sub[i];
        const crpm_gds *d = crpm_glayout_dataset(l, s->gid);
        const crpm_array *a = protected_array(ctx, s->id);
        uint64_t vol = crpm_box_volume(s->ndims, s->cnt);
        if (!a)
            return crpm_error(CRPM_ERR_MISMATCH, "%s: array %d holds a box of global dataset %d but is not "
                              "protected", fn, s->id, s->gid);
        if (!d || d->ndims != s->ndims)
            return crpm_error(CRPM_ERR_MISMATCH, "%s: array %d: global dataset %d was redefined with other "
                              "dimensions after crpm_add_subset", fn, s->id, s->gid);
        if (a->count != vol || a->elem_size != d->elem_size || a->type_code != d->type_code)
            return crpm_error(CRPM_ERR_MISMATCH, "%s: array %d is protected with %llu elements of type %d (%llu "
                              "bytes); its box of global dataset %d has %llu elements of type %d (%llu bytes)", fn,
                              s->id, (unsigned long long)a->count, a->type_code, (unsigned long long)a->elem_size,
                              s->gid, (unsigned long long)vol, d->type_code, (unsigned long long)d->elem_size);
    }
    for (int i = 0; i < l->nrepl; i++)
        if (!protected_array(ctx, l->repl[i]))
            return crpm_error(CRPM_ERR_MISMATCH, "%s: replicated array %d is not protected", fn, l->repl[i]);
    return CRPM_SUCCESS;
}

/* Serializes the current layout into the region (re-protected when it
 * moved or changed size). */
static int refresh_blob(crpm_reshape *r)
{
    size_t n = crpm_glayout_serialize(&r->cur, NULL, 0);
    if (n > r->blob_cap) {
        unsigned char *b = realloc(r->blob, n);
        if (!b)
            return crpm_error(CRPM_ERR_NOMEM, "out of memory for the global layout");
        r->blob = b;
        r->blob_cap = n;
        r->blob_protected = 0;
    }
    crpm_glayout_serialize(&r->cur, r->blob, r->blob_cap);
    if (r->blob_protected && n == r->blob_len)
        return CRPM_SUCCESS;
    r->blob_len = n;
    int rc = crpm_protect_any(CRPM_ID_GLAYOUT, r->blob, (int64_t)n, CRPM_BYTE, "crpm_checkpoint");
    r->blob_protected = rc == 0;
    r->region_in_use |= rc == 0;
    return rc;
}

int crpm_global_before_checkpoint(crpm_ctx *ctx)
{
    crpm_reshape *r = ctx->reshape;
    if (!r || (crpm_glayout_empty(&r->cur) && !r->region_in_use))
        return CRPM_SUCCESS;
    int rc = check_subsets(ctx, &r->cur, "crpm_checkpoint");
    return rc ? rc : refresh_blob(r);
}

/* ---- level-1 restart: the saved layout must be the one declared now ------------ */
static int same_boxes(const crpm_glayout *a, const crpm_glayout *b, char *why, size_t n)
{
    for (int i = 0; i < a->nds; i++) {
        const crpm_gds *d = crpm_glayout_dataset(b, a->ds[i].gid);
        if (d && !crpm_gds_same(d, &a->ds[i])) {
            snprintf(why, n, "global dataset %d has other dimensions or another type", a->ds[i].gid);
            return 0;
        }
    }
    for (int i = 0; i < a->nsub; i++) {
        const crpm_subset *s = &a->sub[i], *t = crpm_glayout_subset(b, s->id);
        int same = t && t->gid == s->gid && t->ndims == s->ndims;
        for (int k = 0; same && k < s->ndims; k++)
            same = t->off[k] == s->off[k] && t->cnt[k] == s->cnt[k];
        if (!same) {
            snprintf(why, n, "array %d holds another box now than in the checkpoint", s->id);
            return 0;
        }
    }
    return 1;
}

static int chk_read(crpm_level *lv, const crpm_array *a, int n)
{
    crpm_ctx *ctx = crpm_api_ctx();
    crpm_reshape *r = lv->state;
    (void)a;
    (void)n;
    /* the saved region needs a protected region of its size to land in */
    int rc = crpm_protect_any(CRPM_ID_GLAYOUT, r->saved_blob, (int64_t)r->saved_blob_len, CRPM_BYTE, "crpm_recover");
    r->blob_protected = 0;
    if (rc == 0)
        rc = r->check_inner->ops->read(r->check_inner, ctx->arrays, ctx->narrays);
    crpm_glayout saved;
    memset(&saved, 0, sizeof saved);
    if (rc == 0)
        rc = crpm_glayout_parse(r->saved_blob, r->saved_blob_len, &saved, "crpm_recover");
    char why[256];
    if (rc == 0 && !crpm_glayout_empty(&r->cur) && (!same_boxes(&r->cur, &saved, why, sizeof why) ||
                                                   !same_boxes(&saved, &r->cur, why, sizeof why)))
        rc = crpm_error(CRPM_ERR_MISMATCH, "crpm_recover: %s (a restart on the same number of ranks restores every "
                        "rank's arrays as saved; its layout must be the saved one)", why);
    crpm_glayout_free(&saved);
    int brc = refresh_blob(r);
    return rc ? rc : brc;
}

static int chk_write(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed)
{
    crpm_reshape *r = lv->state;
    return r->check_inner->ops->write(r->check_inner, a, n, id, st, committed);
}

static int chk_stored(crpm_level *lv, int32_t id, crpm_array *shape, int *handle)
{
    crpm_reshape *r = lv->state;
    return r->check_inner->ops->stored(r->check_inner, id, shape, handle);
}

static int chk_read_one(crpm_level *lv, int handle, void *dst)
{
    crpm_reshape *r = lv->state;
    return r->check_inner->ops->read_one(r->check_inner, handle, dst);
}

static const crpm_level_ops chk_ops = {
    .name = "L1",
    .write = chk_write,
    .read = chk_read,
    .stored = chk_stored,
    .read_one = chk_read_one,
};

int crpm_global_after_init(crpm_ctx *ctx)
{
    crpm_reshape *r = crpm_reshape_get(ctx);
    if (!r)
        return CRPM_ERR_NOMEM;
    ctx->env.glayout = &r->cur;
    ctx->env.run_id = ctx->run_id;
    crpm_level *src = ctx->source;
    crpm_array shape;
    int h;
    if (!src || src == &r->level || !src->ops->stored || src->ops->stored(src, CRPM_ID_GLAYOUT, &shape, &h) != 0) {
        crpm_error_clear();
        return CRPM_SUCCESS;
    }
    /* a level-1 restart of a checkpoint that holds a layout: its region is
     * read into a buffer of its own, then checked against this run's */
    size_t len = (size_t)crpm_array_bytes(&shape);
    r->saved_blob = malloc(len ? len : 1);
    if (!r->saved_blob)
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    r->saved_blob_len = len;
    int rc = src->ops->read_one(src, h, r->saved_blob);
    if (rc == 0 && crpm_glayout_parse(r->saved_blob, len, &r->saved, "crpm_init") == 0)
        r->have_saved = 1;
    crpm_error_clear(); /* a damaged region is reported by crpm_recover */
    rc = crpm_protect_any(CRPM_ID_GLAYOUT, r->saved_blob, (int64_t)len, CRPM_BYTE, "crpm_init");
    if (rc != 0)
        return rc;
    r->region_in_use = 1;
    r->check_inner = src;
    r->check = (crpm_level){&chk_ops, src->env, r};
    ctx->source = &r->check;
    return CRPM_SUCCESS;
}

void crpm_global_committed(crpm_ctx *ctx, int level)
{
    if (ctx->reshape)
        crpm_reshape_committed(ctx, level); /* a failure keeps the files; finalize tries again */
}

int crpm_global_finalize(crpm_ctx *ctx) { return crpm_reshape_finalize(ctx); }

void crpm_global_free(crpm_ctx *ctx) { crpm_reshape_free(ctx); }

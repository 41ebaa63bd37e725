/* The arrays an engine container follows: protect, unprotect, and the
 * recovery of the committed epoch into them. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "engine_int.h"

/* Regions by id (util/idindex.h): rebuilt by loads (crpm_free_regions
 * invalidates it) and compactions (nregions shrinks). */
static crpm_idrecs region_recs(const crpm_container *c)
{
    return (crpm_idrecs){c->regions, sizeof *c->regions, offsetof(crpm_region, id)};
}

crpm_region *crpm_region_find(crpm_container *c, int32_t id)
{
    if (crpm_idindex_sync(&c->rindex, region_recs(c), c->nregions, 1) != 0) { /* no memory: search */
        for (int i = 0; i < c->nregions; i++)
            if (c->regions[i].id == id)
                return &c->regions[i];
        return NULL;
    }
    int i = crpm_idindex_find(&c->rindex, region_recs(c), id);
    return i < 0 ? NULL : &c->regions[i];
}

int crpm_container_protect(crpm_container *c, int32_t id, void *ptr, uint64_t count, int32_t type_code,
                           uint64_t elem_size)
{
    crpm_array a = {id, type_code, elem_size, count, ptr, NULL, NULL};
    return crpm_container_protect_array(c, &a);
}

int crpm_container_protect_array(crpm_container *c, const crpm_array *a)
{
    int32_t id = a->id;
    if (!c)
        return crpm_error(CRPM_ERR_STATE, "no container");
    if (a->elem_size == 0)
        return crpm_error(CRPM_ERR_INVAL, "protect id %d: element size is 0", id);
    if (a->count > (UINT64_MAX / 2) / a->elem_size)
        return crpm_error(CRPM_ERR_RANGE, "protect id %d: %llu elements of %llu bytes is too large", id,
                          (unsigned long long)a->count, (unsigned long long)a->elem_size);
    if (!a->ptr && a->count)
        return crpm_error(CRPM_ERR_INVAL, "protect id %d: NULL pointer for %llu elements", id,
                          (unsigned long long)a->count);
    const crpm_mem_kind *k = crpm_array_kind(a);
    if (!k->read || !k->write || (k->stage && (!k->attach || !k->event || !k->detach)))
        return crpm_error(CRPM_ERR_INVAL, "protect id %d: memory kind '%s' lacks an operation", id, k->name);
    crpm_region *r = crpm_region_find(c, id);
    if (!r) {
        if (c->nregions == c->cap_regions) {
            int cap = c->cap_regions ? 2 * c->cap_regions : 8;
            crpm_region *n = realloc(c->regions, (size_t)cap * sizeof *n);
            if (!n)
                return crpm_error(CRPM_ERR_NOMEM, "out of memory");
            c->regions = n;
            c->cap_regions = cap;
        }
        r = &c->regions[c->nregions++];
        memset(r, 0, sizeof *r);
        r->id = id;
        r->pack = CRPM_NO_PACK;
        crpm_idindex_append(&c->rindex, region_recs(c), c->nregions - 1);
    }
    uint64_t bytes = crpm_array_bytes(a);
    if (r->eng && (r->prot.ptr != a->ptr || crpm_region_pbytes(r) != bytes || r->prot.kind != a->kind)) {
        /* another buffer (double buffering, realloc) may hold other data on
         * pages that were not written since the last report */
        r->eng->rescan_all = 1;
        if (crpm_region_pbytes(r) != bytes)
            r->eng->stale_valid = 0;
        crpm_track_detach_kind(r); /* the kind follows one address and size */
    }
    r->prot = *a;
    r->prot.name = NULL; /* the caller's: not kept */
    int rc = crpm_track_choose(c, r);
    if (rc) {
        crpm_track_drop(r);
        memset(&r->prot, 0, sizeof r->prot); /* not protected: nothing half-done */
        r->prot.id = id;
    }
    return rc;
}

const char *crpm_container_untracked_reason(const crpm_container *c, int32_t id)
{
    const crpm_region *r = crpm_region_find((crpm_container *)c, id);
    /* a kind that finds its own changes says why it does not, tracking asked for or not */
    if (!c->eng || !r || !r->prot.elem_size || !r->eng ||
        (!c->eng->want_tracking && !crpm_array_kind(&r->prot)->stage))
        return NULL;
    return r->eng->why;
}

int crpm_container_unprotect(crpm_container *c, int32_t id)
{
    crpm_region *r = crpm_region_find(c, id);
    if (!r || !r->prot.elem_size)
        return crpm_error(CRPM_ERR_INVAL, "unprotect: id %d is not protected", id);
    crpm_track_drop(r);
    memset(&r->prot, 0, sizeof r->prot);
    r->prot.id = id;
    return CRPM_SUCCESS;
}

int crpm_container_recover(crpm_container *c)
{
    if (c->epoch == 0)
        return crpm_error(CRPM_ERR_NOCKPT, "%s: no committed checkpoint", c->path);
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        if (r->saved && !r->prot.elem_size)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d is in the checkpoint but not protected", r->id);
        if (!r->saved && r->prot.elem_size)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d is protected but not in the checkpoint", r->id);
        if (r->saved && (r->prot.elem_size != r->elem_size || r->prot.count != r->count))
            return crpm_error(CRPM_ERR_MISMATCH,
                              "array id %d: checkpoint holds %llu elements of %llu bytes, protected %llu of %llu",
                              r->id, (unsigned long long)r->count, (unsigned long long)r->elem_size,
                              (unsigned long long)r->prot.count, (unsigned long long)r->prot.elem_size);
        if (r->saved && r->prot.type_code != r->type_code)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d: checkpoint type %d, protected type %d", r->id,
                              r->type_code, r->prot.type_code);
    }
    int rc = crpm_par_recover(c); /* over the engine's workers (par.c) */
    if (rc)
        return rc;
    crpm_track_recovered(c);
    return CRPM_SUCCESS;
}

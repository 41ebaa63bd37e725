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
    if (!c)
        return crpm_error(CRPM_ERR_STATE, "no container");
    if (elem_size == 0)
        return crpm_error(CRPM_ERR_INVAL, "protect id %d: element size is 0", id);
    if (count > (UINT64_MAX / 2) / elem_size)
        return crpm_error(CRPM_ERR_RANGE, "protect id %d: %llu elements of %llu bytes is too large", id,
                          (unsigned long long)count, (unsigned long long)elem_size);
    if (!ptr && count)
        return crpm_error(CRPM_ERR_INVAL, "protect id %d: NULL pointer for %llu elements", id,
                          (unsigned long long)count);
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
        crpm_idindex_append(&c->rindex, region_recs(c), c->nregions - 1);
    }
    if (r->eng && (r->ptr != ptr || crpm_region_pbytes(r) != count * elem_size)) {
        /* another buffer (double buffering, realloc) may hold other data on
         * pages that were not written since the last report */
        r->eng->rescan_all = 1;
        if (crpm_region_pbytes(r) != count * elem_size)
            r->eng->stale_valid = 0;
    }
    r->ptr = ptr;
    r->p_count = count;
    r->p_elem_size = elem_size;
    r->p_type_code = type_code;
    int rc = crpm_track_choose(c, r);
    if (rc) {
        r->ptr = NULL; /* not protected: nothing half-done */
        r->p_count = r->p_elem_size = 0;
    }
    return rc;
}

const char *crpm_container_untracked_reason(const crpm_container *c, int32_t id)
{
    const crpm_region *r = crpm_region_find((crpm_container *)c, id);
    if (!c->eng || !c->eng->want_tracking || !r || !r->p_elem_size || !r->eng)
        return NULL;
    return r->eng->why;
}

int crpm_container_unprotect(crpm_container *c, int32_t id)
{
    crpm_region *r = crpm_region_find(c, id);
    if (!r || !r->p_elem_size)
        return crpm_error(CRPM_ERR_INVAL, "unprotect: id %d is not protected", id);
    r->ptr = NULL;
    r->p_count = r->p_elem_size = 0;
    crpm_track_drop(r);
    return CRPM_SUCCESS;
}

int crpm_container_recover(crpm_container *c)
{
    if (c->epoch == 0)
        return crpm_error(CRPM_ERR_NOCKPT, "%s: no committed checkpoint", c->path);
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        if (r->saved && !r->p_elem_size)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d is in the checkpoint but not protected", r->id);
        if (!r->saved && r->p_elem_size)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d is protected but not in the checkpoint", r->id);
        if (r->saved && (r->p_elem_size != r->elem_size || r->p_count != r->count))
            return crpm_error(CRPM_ERR_MISMATCH,
                              "array id %d: checkpoint holds %llu elements of %llu bytes, protected %llu of %llu",
                              r->id, (unsigned long long)r->count, (unsigned long long)r->elem_size,
                              (unsigned long long)r->p_count, (unsigned long long)r->p_elem_size);
        if (r->saved && r->p_type_code != r->type_code)
            return crpm_error(CRPM_ERR_MISMATCH, "array id %d: checkpoint type %d, protected type %d", r->id,
                              r->type_code, r->p_type_code);
    }
    for (int i = 0; i < c->nregions; i++) {
        int rc = crpm_copy_saved(c, &c->regions[i], c->regions[i].ptr);
        if (rc)
            return rc;
    }
    return CRPM_SUCCESS;
}

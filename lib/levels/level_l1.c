/* Level 1: the differential container of this rank (lib/engine). */
#include <stdlib.h>
#include "level.h"

static crpm_container *cont(crpm_level *lv) { return lv->state; }

static int l1_protect(crpm_level *lv, const crpm_array *a)
{
    return crpm_container_protect_array(cont(lv), a);
}

static int l1_write(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed)
{
    (void)a; /* the container follows the arrays through protect */
    (void)n;
    uint64_t before = crpm_container_epoch(cont(lv));
    int rc = crpm_container_checkpoint(cont(lv), (uint64_t)id, st);
    *committed = crpm_container_epoch(cont(lv)) == before + 1;
    return rc;
}

static int l1_undo(crpm_level *lv) { return crpm_container_rollback(cont(lv)); }

static int l1_read(crpm_level *lv, const crpm_array *a, int n)
{
    (void)a;
    (void)n;
    return crpm_container_recover(cont(lv));
}

static int l1_stored(crpm_level *lv, int32_t id, crpm_array *shape, int *handle)
{
    int n = crpm_container_nregions(cont(lv));
    for (int k = 0; k < n; k++) {
        int rc = crpm_container_region(cont(lv), k, shape);
        if (rc != 0)
            return rc;
        if (shape->id == id) {
            *handle = k;
            return CRPM_SUCCESS;
        }
    }
    return crpm_error(CRPM_ERR_MISMATCH, "array %d is not in the checkpoint", id);
}

static int l1_read_one(crpm_level *lv, int handle, void *dst)
{
    return crpm_container_read_region(cont(lv), handle, dst);
}

static void l1_close(crpm_level *lv) { crpm_container_close(cont(lv)); }

/* The container the followers follow. */
static crpm_container *l1_container(crpm_level *lv) { return cont(lv); }

static const crpm_level_ops l1_ops = {
    .name = "L1",
    .protect = l1_protect,
    .container = l1_container,
    .write = l1_write,
    .undo = l1_undo,
    .read = l1_read,
    .stored = l1_stored,
    .read_one = l1_read_one,
    .close = l1_close,
};

int crpm_level_l1(crpm_level *lv, const crpm_level_env *env, crpm_container *c)
{
    *lv = (crpm_level){&l1_ops, env, c};
    return CRPM_SUCCESS;
}

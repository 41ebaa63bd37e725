/* method = full: one full file per rank and checkpoint (full.c), the
 * baseline the differential level is measured against. */
#include <stdlib.h>
#include "full.h"
#include "level.h"

typedef struct full_state {
    int64_t restart_id;     /* the checkpoint every rank holds; -1 = none */
} full_state;

static int full_write(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed)
{
    *committed = 0; /* the previous file stays until every rank has the new one */
    if (id < 0)
        return crpm_error(CRPM_ERR_INVAL, "crpm_checkpoint(%lld): method = full needs ids >= 0", (long long)id);
    int rc = crpm_full_write(lv->env->job_dir, lv->env->rank, (uint64_t)id, n, a, &st->bytes_written);
    for (int i = 0; i < n; i++)
        st->protected_bytes += crpm_array_bytes(&a[i]);
    st->drains = 1;
    return rc;
}

/* Every rank has the new file: the older ones can go. */
static int full_committed(crpm_level *lv, int64_t id)
{
    ((full_state *)lv->state)->restart_id = id;
    crpm_full_prune(lv->env->job_dir, lv->env->rank, (uint64_t)id);
    return CRPM_SUCCESS;
}

static int full_read(crpm_level *lv, const crpm_array *a, int n)
{
    int64_t id = ((full_state *)lv->state)->restart_id;
    if (id < 0)
        return crpm_error(CRPM_ERR_NOCKPT, "no full checkpoint to read");
    return crpm_full_read(lv->env->job_dir, lv->env->rank, (uint64_t)id, n, a);
}

/* Shapes only: full files are read whole (no read_one). */
static int full_stored(crpm_level *lv, int32_t id, crpm_array *shape, int *handle)
{
    int64_t rid = ((full_state *)lv->state)->restart_id;
    *handle = -1;
    if (rid < 0)
        return crpm_error(CRPM_ERR_NOCKPT, "no full checkpoint to read");
    return crpm_full_stored(lv->env->job_dir, lv->env->rank, (uint64_t)rid, id, shape);
}

static int full_remove(crpm_level *lv)
{
    crpm_full_remove(lv->env->job_dir, lv->env->rank);
    return CRPM_SUCCESS;
}

static void full_close(crpm_level *lv) { free(lv->state); }

static const crpm_level_ops full_ops = {
    .name = "full",
    .write = full_write,
    .committed = full_committed,
    .read = full_read,
    .stored = full_stored,
    .remove = full_remove,
    .close = full_close,
};

int crpm_level_full(crpm_level *lv, const crpm_level_env *env, int64_t restart_id)
{
    full_state *s = malloc(sizeof *s);
    if (!s)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    s->restart_id = restart_id;
    *lv = (crpm_level){&full_ops, env, s};
    return CRPM_SUCCESS;
}

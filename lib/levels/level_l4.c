/* Level 4: one parallel-HDF5 file per checkpoint on the global file system
 * (level4.c).  Writes and reads are collective and agree by themselves. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fsutil.h"
#include "level.h"
#include "level4.h"

typedef struct l4_state {
    char restart_path[CRPM_PATH_MAX];   /* file chosen at restart; "" = none */
} l4_state;

static int l4_write(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed)
{
    *committed = 0;
    const crpm_level_env *e = lv->env;
    if (!e->glbl_dir || !e->glbl_dir[0])
        return crpm_error(CRPM_ERR_CONFIG, "crpm_checkpoint(%lld): level 4 needs glbl_dir in [basic]",
                          (long long)id);
    if (id < INT32_MIN || id > INT32_MAX)
        return crpm_error(CRPM_ERR_RANGE, "crpm_checkpoint(%lld): level-4 ids are 32-bit", (long long)id);
    (void)st;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    crpm_l4_global g = {e->glayout, e->run_id, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec};
    return crpm_l4_write_global(e->comm, e->glbl_dir, e->job_name, (int)id, e->epoch, n, a, e->keep_l4, &g);
}

static int l4_read(crpm_level *lv, const crpm_array *a, int n)
{
    l4_state *s = lv->state;
    if (!s->restart_path[0])
        return crpm_error(CRPM_ERR_NOCKPT, "no level-4 checkpoint to read");
    return crpm_l4_read(lv->env->comm, s->restart_path, n, a);
}

/* Shapes only: level 4 is read whole (no read_one). */
static int l4_stored_op(crpm_level *lv, int32_t id, crpm_array *shape, int *handle)
{
    l4_state *s = lv->state;
    *handle = -1;
    if (!s->restart_path[0])
        return crpm_error(CRPM_ERR_NOCKPT, "no level-4 checkpoint to read");
    return crpm_l4_stored(s->restart_path, lv->env->rank, id, shape);
}

/* glbl_dir is shared: rank 0 removes the job's files for everyone. */
static int l4_remove(crpm_level *lv)
{
    const crpm_level_env *e = lv->env;
    if (e->rank != 0 || !e->glbl_dir || !e->glbl_dir[0])
        return CRPM_SUCCESS;
    char dir[CRPM_PATH_MAX];
    if (crpm_name_join(dir, sizeof dir, e->glbl_dir, e->job_name) != 0)
        return CRPM_SUCCESS;
    DIR *d = opendir(dir);
    if (!d)
        return CRPM_SUCCESS;
    int rc = CRPM_SUCCESS;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char p[CRPM_PATH_MAX];
        if (strncmp(de->d_name, "l4-", 3) == 0 && crpm_name_join(p, sizeof p, dir, de->d_name) == 0 &&
            rc == CRPM_SUCCESS)
            rc = crpm_unlink_quiet(p);
    }
    closedir(d);
    rmdir(dir);
    return rc;
}

static void l4_close(crpm_level *lv) { free(lv->state); }

static const crpm_level_ops l4_ops = {
    .name = "L4",
    .write = l4_write,
    .read = l4_read,
    .stored = l4_stored_op,
    .remove = l4_remove,
    .close = l4_close,
};

int crpm_level_l4(crpm_level *lv, const crpm_level_env *env, const char *restart_path)
{
    l4_state *s = calloc(1, sizeof *s);
    if (!s)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    snprintf(s->restart_path, sizeof s->restart_path, "%s", restart_path ? restart_path : "");
    *lv = (crpm_level){&l4_ops, env, s};
    return CRPM_SUCCESS;
}

/* The level table (level_table.h): from the configuration and the job's
 * nodes to the levels.  The one place outside lib/levels that knows each
 * follower by name. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "full.h"
#include "level_table.h"
#include "testhook.h"

/* ---- level 2: partner copies on the next node -------------------------------- */

static int prepare_l2(crpm_ctx *ctx, crpm_follower *f, const char *config_file)
{
    int one_node = ctx->topo.nnodes < 2;
    if (one_node && ctx->cfg.ckpt_interval_l2 > 0)
        return crpm_error(CRPM_ERR_CONFIG, "config %s: ckpt_interval_l2 needs at least two nodes for partner copies, "
                          "the job has one (%d ranks%s)", config_file, ctx->nranks,
                          ctx->cfg.node_size ? "; see node_size" : " on one host; node_size groups ranks into nodes");
    if (ctx->cfg.method != CRPM_METHOD_DIFFERENTIAL || one_node) {
        f->why_code = CRPM_ERR_CONFIG;
        snprintf(f->why, sizeof f->why, "level 2 needs %s",
                 ctx->cfg.method != CRPM_METHOD_DIFFERENTIAL
                     ? "method = differential"
                     : "at least two nodes for partner copies (node_size groups ranks into nodes)");
    }
    return CRPM_SUCCESS;
}

static int open_l2(crpm_ctx *ctx, crpm_follower *f)
{
    crpm_l2_opts o = {
        .partner = ctx->topo.partner,
        .owners = ctx->topo.owners,
        .nowners = ctx->topo.nowners,
        .persistence = ctx->cfg.persistence,
        .lock_wait_s = ctx->cfg.lock_wait_s,
        .full_copy = crpm_testhook_baseline("l2_full_copy"),
    };
    crpm_testhook_level(ctx, CRPM_L2, &o.hook, &o.hook_arg);
    f->reads_arrays = o.full_copy;
    return crpm_level_l2(&f->lv, &ctx->env, &o);
}

/* ---- level 3: Reed-Solomon parity over groups of nodes ----------------------- */

typedef struct l3_groups {
    int *groups, *members;     /* each rank's group and member index */
} l3_groups;

static void release_l3(crpm_follower *f)
{
    l3_groups *g = f->prep;
    if (g) {
        free(g->groups);
        free(g->members);
        free(g);
    }
    f->prep = NULL;
}

/* The groups when the job can have them; otherwise why not (an error only
 * when the configuration asks for level-3 checkpoints). */
static int prepare_l3(crpm_ctx *ctx, crpm_follower *f, const char *config_file)
{
    int rc = CRPM_SUCCESS;
    l3_groups g = {NULL, NULL};
    if (ctx->cfg.method != CRPM_METHOD_DIFFERENTIAL)
        snprintf(f->why, sizeof f->why, "level 3 needs method = differential");
    else if (ctx->topo.nnodes < 2)
        snprintf(f->why, sizeof f->why, "level 3 needs at least two nodes, the job has one (%d ranks%s)", ctx->nranks,
                 ctx->cfg.node_size ? "; see node_size" : " on one host; node_size groups ranks into nodes");
    else {
        rc = crpm_topology_l3(ctx->comm, &ctx->topo, (int)ctx->cfg.group_size, (int)ctx->cfg.l3_parity, &g.groups,
                              &g.members);
        if (rc == CRPM_ERR_CONFIG) {
            snprintf(f->why, sizeof f->why, "%s", crpm_last_error());
            crpm_error_clear();
            rc = CRPM_SUCCESS;
        }
    }
    if (rc == 0 && g.groups && !(f->prep = malloc(sizeof g)))
        rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    if (rc == 0 && g.groups) {
        *(l3_groups *)f->prep = g;
        return CRPM_SUCCESS;
    }
    free(g.groups);
    free(g.members);
    f->why_code = CRPM_ERR_CONFIG;
    if (!f->why[0])
        snprintf(f->why, sizeof f->why, "level 3 is not available");
    if (rc == 0 && ctx->cfg.ckpt_interval_l3 > 0)
        rc = crpm_error(CRPM_ERR_CONFIG, "config %s: ckpt_interval_l3: %s", config_file, f->why);
    return rc;
}

static int open_l3(crpm_ctx *ctx, crpm_follower *f)
{
    const l3_groups *g = f->prep;
    crpm_l3_opts o = {
        .group_size = (int)ctx->cfg.group_size,
        .parity = (int)ctx->cfg.l3_parity,
        .members = g->members,
        .groups = g->groups,
        .segment_size = ctx->cfg.segment_size,
        .block_size = ctx->cfg.block_size,
        .persistence = ctx->cfg.persistence,
        .lock_wait_s = ctx->cfg.lock_wait_s,
        .full_encode = crpm_testhook_baseline("l3_full_encode"),
        .verify = crpm_testhook_env("CRPM_TEST_L3_VERIFY"),
    };
    crpm_testhook_level(ctx, CRPM_L3, &o.hook, &o.hook_arg);
    return crpm_level_l3(&f->lv, &ctx->env, &o);
}

/* ---- level 4: parallel HDF5 on the global file system ------------------------ */

static int prepare_l4(crpm_ctx *ctx, crpm_follower *f, const char *config_file)
{
#ifndef CRPM_HAVE_HDF5
    f->why_code = CRPM_ERR_NOTSUP;
    snprintf(f->why, sizeof f->why, "level 4 needs HDF5 support, which this build of libcrpm lacks");
    if (ctx->cfg.ckpt_interval_l4 > 0)
        return crpm_error(CRPM_ERR_NOTSUP, "config %s: ckpt_interval_l4 needs level-4 (HDF5) support, which this "
                          "build of libcrpm lacks", config_file);
#else
    (void)config_file;
    if (!ctx->cfg.glbl_dir[0]) {
        f->why_code = CRPM_ERR_CONFIG;
        snprintf(f->why, sizeof f->why, "level 4 needs glbl_dir in [basic]");
    }
#endif
    return CRPM_SUCCESS;
}

static int open_l4(crpm_ctx *ctx, crpm_follower *f)
{
    f->reads_arrays = 1; /* HDF5 datasets of the arrays' bytes */
    return crpm_level_l4(&f->lv, &ctx->env);
}

/* A finished run's level-4 files go with it (rank 0 for the job). */
static void purge_l4(crpm_ctx *ctx)
{
    crpm_level l4;
    if (crpm_level_l4(&l4, &ctx->env) == 0) {
        l4.ops->remove(&l4);
        crpm_level_close(&l4);
    }
}

/* ---- the table --------------------------------------------------------------- */

static const crpm_level_row builtin[] = {
    {.level = CRPM_L2, .stage = CRPM_STAGE_COMMIT, .sent_to = "partner", .opening = "locking the partner copies",
     .files = "partner-", .prepare = prepare_l2, .open = open_l2},
    {.level = CRPM_L3, .stage = CRPM_STAGE_COMMIT, .sent_to = "parity", .opening = "locking the parity containers",
     .files = "parity-", .prepare = prepare_l3, .open = open_l3, .release = release_l3},
    {.level = CRPM_L4, .stage = CRPM_STAGE_AFTER, .global = 1, .opening = "opening level 4",
     .prepare = prepare_l4, .open = open_l4, .purge = purge_l4},
};
#define NBUILTIN ((int)(sizeof builtin / sizeof builtin[0]))

static const crpm_level_row *rows[CRPM_MAX_FOLLOWERS] = {&builtin[0], &builtin[1], &builtin[2]};
static int nrows = NBUILTIN;

const crpm_level_row *const *crpm_level_table(int *n)
{
    *n = nrows;
    return rows;
}

#ifdef CRPM_TEST_HOOKS
int crpm_level_table_add(const crpm_level_row *row)
{
    if (nrows >= CRPM_MAX_FOLLOWERS || row->level <= CRPM_L1)
        return crpm_error(CRPM_ERR_INVAL, "level table: no room for level %d", row->level);
    for (int i = 0; i < nrows; i++)
        if (rows[i]->level == row->level)
            return crpm_error(CRPM_ERR_INVAL, "level table: level %d is taken", row->level);
    rows[nrows++] = row;
    return CRPM_SUCCESS;
}
#endif

/* ---- the primary level ------------------------------------------------------- */

void crpm_primary_facts(crpm_ctx *ctx, int64_t *row)
{
    row[CRPM_F_FULL0] = row[CRPM_F_FULL1] = -1;
    if (ctx->cfg.method == CRPM_METHOD_FULL)
        crpm_full_newest(ctx->job_dir, ctx->rank, &row[CRPM_F_FULL0]);
}

int crpm_primary_open(crpm_ctx *ctx, crpm_container **c, int64_t full_id)
{
    int rc;
    if (ctx->cfg.method == CRPM_METHOD_FULL) {
        rc = crpm_level_full(&ctx->primary, &ctx->env, full_id);
        /* the empty container stays on disk beside the full files: it marks the job */
        if (rc == 0) {
            crpm_container_close(*c);
            *c = NULL;
        }
        return rc;
    }
    ctx->env.epoch = crpm_container_epoch(*c);
    rc = crpm_level_l1(&ctx->primary, &ctx->env, *c);
    *c = NULL;
    return rc;
}

/* Restart at init (restart.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>
#include <sys/random.h>
#include <time.h>
#include "agree.h"
#include "decide.h"
#include "error.h"
#include "fsutil.h"
#include "full.h"
#include "jobdir.h"
#include "level4.h"
#include "mpi_error.h"
#include "reshape.h"
#include "restart.h"
#include "clock.h"
#include "testhook.h"

typedef struct gathered {
    crpm_restart_facts f;
    int64_t *all;              /* nranks x CRPM_F_N */
    crpm_container *c;         /* this rank's container, if it opened (also when its data is damaged) */
    char own_msg[512];         /* why it did not, or what its data check found */
    int corrupt;               /* its checksums failed: set aside as .corrupt-<time> */
    int nprev;                 /* ranks falling back to their previous epoch (crpm_decide_prev_patch) */
    int node_rank;
    char l4_path[CRPM_PATH_MAX];
    char l4_msg[512];          /* why level 4 could not serve */
    int64_t *restore;          /* level 2: ranks whose container comes back from its partner copy */
    int nrestore;
    int l2_in_use;             /* some rank has a partner copy file */
    int64_t *rebuild;          /* level 3: ranks whose container is rebuilt from parity */
    int nrebuild;
    int l3_in_use;             /* some rank has a parity container file */
    int l4_id;
    uint64_t l4_epoch;
} gathered;

/* Every byte of the committed epoch (and of the previous one, when it is
 * recoverable) is checked against its CRC before anything is decided: a
 * container that fails is damaged like a lost one, so the decision repairs
 * it from an intact copy instead of propagating it.  This reads the
 * container once more than recovery does, at restart only. */
static void check_own(crpm_ctx *ctx, gathered *g, int64_t *mine)
{
    int bad = 0, prev_bad = 0;
    char msg[sizeof g->own_msg];
    mine[CRPM_F_UID] = (int64_t)crpm_container_user_id(g->c);
    if (crpm_testhook_skip_data_check())
        return;
    int rc = crpm_container_verify_epochs(g->c, &bad, &prev_bad, msg, sizeof msg);
    if (rc != 0) {
        bad = 1; /* not checked: not trusted */
        snprintf(msg, sizeof msg, "%s", crpm_last_error());
    }
    if (prev_bad) {
        mine[CRPM_F_PREV] = 0;
        mine[CRPM_F_PREV_BAD] = 1;
    }
    if (bad) {
        mine[CRPM_F_RC] = rc ? rc : CRPM_ERR_CORRUPT;
        mine[CRPM_F_BAD] = rc == 0;
        g->corrupt = rc == 0;
        snprintf(g->own_msg, sizeof g->own_msg, "%s", msg);
    }
    if ((bad || prev_bad) && ctx->cfg.verbosity >= 1) {
        fprintf(stderr, "[crpm rank %d] %s\n", ctx->rank, msg);
        fflush(stderr);
    }
}

/* Each rank's facts about its own container, exchanged with all. */
static int gather(crpm_ctx *ctx, gathered *g)
{
    int64_t mine[CRPM_F_N] = {0};
    char tmp[CRPM_PATH_MAX + 8];
    struct stat st;
    snprintf(tmp, sizeof tmp, "%s.tmp", ctx->path);
    crpm_unlink_quiet(tmp); /* a create_fresh that did not finish */
    mine[CRPM_F_EXISTS] = stat(ctx->path, &st) == 0;
    if (mine[CRPM_F_EXISTS]) {
        int rc = crpm_jobdir_open(ctx, ctx->path, 0, &g->c);
        mine[CRPM_F_NRANKS] = rc == CRPM_ERR_NRANKS;
        if (rc != 0) {
            g->c = NULL;
            snprintf(g->own_msg, sizeof g->own_msg, "%s", crpm_last_error());
            mine[CRPM_F_RC] = rc;
            g->corrupt = rc == CRPM_ERR_CORRUPT;
        } else {
            mine[CRPM_F_EPOCH] = (int64_t)crpm_container_epoch(g->c);
            mine[CRPM_F_PREV] = crpm_container_prev_available(g->c);
            uint8_t id[CRPM_RUN_ID_LEN];
            crpm_container_run_id(g->c, id);
            memcpy(&mine[CRPM_F_RUN0], id, sizeof id);
            check_own(ctx, g, mine);
        }
    }
    /* One rank per node looks for containers of ranks this run lacks. */
    MPI_Comm node;
    if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &g->node_rank);
        MPI_Comm_free(&node);
    }
    mine[CRPM_F_EXTRA] = g->node_rank == 0 ? crpm_jobdir_extra_ranks(ctx, 0) : -1;
    mine[CRPM_F_FULL0] = mine[CRPM_F_FULL1] = -1;
    if (ctx->cfg.method == CRPM_METHOD_FULL)
        crpm_full_newest(ctx->job_dir, ctx->rank, &mine[CRPM_F_FULL0]);

    if (ctx->l2.ops) {
        /* level 2: what the partner holds of this rank's container */
        int64_t rep[CRPM_L2F_N + 1];
        crpm_level_l2_open_copies(&ctx->l2);
        crpm_level_l2_verify_copies(&ctx->l2, ctx->cfg.verbosity >= 1);
        int rc = crpm_level_l2_exchange_facts(&ctx->l2, rep);
        if (rc != 0)
            return rc;
        mine[CRPM_F_REP_FILE] = rep[CRPM_L2F_N];
        mine[CRPM_F_REP_OK] = rep[CRPM_L2F_OK];
        mine[CRPM_F_REP_EPOCH] = rep[CRPM_L2F_EPOCH];
        mine[CRPM_F_REP_PREV] = rep[CRPM_L2F_PREV];
        mine[CRPM_F_REP_RUN0] = rep[CRPM_L2F_RUN0];
        mine[CRPM_F_REP_RUN1] = rep[CRPM_L2F_RUN1];
        mine[CRPM_F_REP_BAD] = rep[CRPM_L2F_BAD];
    }
    if (ctx->l3.ops) {
        /* level 3: the parity this rank holds */
        int64_t par[CRPM_L3F_N];
        crpm_level_l3_verify(&ctx->l3, ctx->cfg.verbosity >= 1);
        crpm_level_l3_facts(&ctx->l3, par);
        mine[CRPM_F_PAR_OK] = par[CRPM_L3F_OK] ? 1 : par[CRPM_L3F_FILE] ? -1 : 0;
        mine[CRPM_F_PAR_EPOCH] = par[CRPM_L3F_EPOCH];
        mine[CRPM_F_PAR_PREV] = par[CRPM_L3F_PREV];
        mine[CRPM_F_PAR_RUN0] = par[CRPM_L3F_RUN0];
        mine[CRPM_F_PAR_RUN1] = par[CRPM_L3F_RUN1];
        mine[CRPM_F_PAR_BAD] = par[CRPM_L3F_BAD];
    }
    g->all = malloc(sizeof(int64_t) * CRPM_F_N * (size_t)ctx->nranks);
    if (!g->all)
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    int mrc = MPI_Allgather(mine, CRPM_F_N, MPI_INT64_T, g->all, CRPM_F_N, MPI_INT64_T, ctx->comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, "crpm_init: MPI_Allgather");
    g->f = (crpm_restart_facts){.nranks = ctx->nranks, .rank = g->all, .method = ctx->cfg.method,
                                .unrecoverable_fresh = ctx->cfg.on_unrecoverable_fresh};
    return CRPM_SUCCESS;
}

/* Collective: the newest valid level-4 checkpoint, if any. */
static int gather_l4(crpm_ctx *ctx, gathered *g)
{
    g->f.l4_known = 1;
#ifdef CRPM_HAVE_HDF5
    if (!ctx->cfg.glbl_dir[0])
        return CRPM_SUCCESS;
    int rc = crpm_l4_find_latest(ctx->comm, ctx->cfg.glbl_dir, ctx->cfg.job_name, g->l4_path, sizeof g->l4_path,
                                 &g->l4_id, &g->l4_epoch);
    int64_t found[3] = {rc == 0, -(int64_t)(rc == 0), -(int64_t)(rc == CRPM_ERR_CORRUPT)};
    if (rc == CRPM_ERR_NOCKPT || rc == CRPM_ERR_CORRUPT) {
        snprintf(g->l4_msg, sizeof g->l4_msg, "%s", crpm_last_error());
        rc = CRPM_SUCCESS;
    }
    rc = crpm_agree_ext(ctx->comm, ctx->rank, rc, "crpm_init: looking for a level-4 checkpoint", found, 3);
    if (rc == 0 && found[0] != -found[1])
        rc = crpm_error(CRPM_ERR_EPOCH, "crpm_init: ranks disagree on the newest level-4 checkpoint");
    g->f.l4_found = rc == 0 && found[0];
    g->f.l4_epoch = g->f.l4_found ? (int64_t)g->l4_epoch : -1;
    g->f.l4_id = g->f.l4_found ? g->l4_id : -1;
    g->f.l4_damaged = rc == 0 && !found[0] && found[2] != 0;
    return rc;
#else
    (void)ctx;
    return CRPM_SUCCESS;
#endif
}

/* A container that cannot be used but may hold the newest data is kept
 * under another name, never overwritten: rank-<r>.crpm.unused-<time>, or
 * .corrupt-<time> when its checksums failed (finalize leaves those for the
 * user to look at).  A name already taken gets a counter. */
static int set_aside(crpm_ctx *ctx, gathered *g)
{
    struct stat st;
    crpm_container_close(g->c);
    g->c = NULL;
    if (stat(ctx->path, &st) != 0)
        return CRPM_SUCCESS;
    char to[CRPM_PATH_MAX + 64];
    const char *why = g->corrupt ? "corrupt" : "unused";
    long long now = (long long)time(NULL);
    snprintf(to, sizeof to, "%s.%s-%lld", ctx->path, why, now);
    for (int k = 1; stat(to, &st) == 0 && k < 1000; k++)
        snprintf(to, sizeof to, "%s.%s-%lld-%d", ctx->path, why, now, k);
    int rc = crpm_durable_rename(ctx->path, to);
    if (rc == 0 && ctx->cfg.verbosity >= 1)
        fprintf(stderr, "[crpm rank %d] kept the %s container as %s\n", ctx->rank,
                g->corrupt ? "corrupt" : "unusable", to);
    return rc;
}

/* Collective: a new run identity from rank 0 for containers made now. */
static int new_run_id(crpm_ctx *ctx)
{
    int rc = CRPM_SUCCESS;
    if (ctx->rank == 0 && getrandom(ctx->run_id, sizeof ctx->run_id, 0) != (ssize_t)sizeof ctx->run_id)
        rc = crpm_error(CRPM_ERR_IO, "crpm_init: no random run identity: %s", strerror(errno));
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
    int mrc = rc == 0 ? MPI_Bcast(ctx->run_id, (int)sizeof ctx->run_id, MPI_BYTE, 0, ctx->comm) : MPI_SUCCESS;
    return mrc == MPI_SUCCESS ? rc : crpm_mpi_fail(mrc, "crpm_init: MPI_Bcast of the run identity");
}

/* Level 1 resumes at the agreed epoch: a rank one epoch ahead committed a
 * checkpoint that not every rank completed; it goes back, durably, before
 * anyone reads.  Then all must hold the same checkpoint id. */
static int apply_l1(crpm_ctx *ctx, gathered *g, const crpm_verdict *v)
{
    int rc = CRPM_SUCCESS;
    if ((int64_t)crpm_container_epoch(g->c) == v->epoch + 1)
        rc = crpm_container_rollback(g->c);
    int64_t uid[2] = {0, 0};
    if (rc == 0) {
        uid[0] = (int64_t)crpm_container_user_id(g->c);
        uid[1] = -uid[0];
    }
    rc = crpm_agree_ext(ctx->comm, ctx->rank, rc, "crpm_init: rolling back an incomplete checkpoint", uid, 2);
    if (rc == 0 && uid[0] != -uid[1])
        rc = crpm_error(CRPM_ERR_EPOCH, "crpm_init: ranks hold different checkpoints at epoch %lld (ids %lld to %lld)",
                        (long long)v->epoch, (long long)uid[0], (long long)-uid[1]);
    if (rc == 0) {
        crpm_container_run_id(g->c, ctx->run_id);
        ctx->last_id = (uint64_t)uid[0];
        if (ctx->rank == 0 && ctx->cfg.verbosity >= 2)
            printf("[crpm] restart: level-1 checkpoint %lld (epoch %lld) on all %d ranks\n", (long long)uid[0],
                   (long long)v->epoch, ctx->nranks);
    }
    return rc;
}

/* Level 2 exists with two nodes or more, for the differential container. */
static int open_l2(crpm_ctx *ctx)
{
    if (ctx->topo.nnodes < 2 || ctx->cfg.method != CRPM_METHOD_DIFFERENTIAL)
        return CRPM_SUCCESS;
    crpm_l2_opts o = {
        .partner = ctx->topo.partner,
        .owners = ctx->topo.owners,
        .nowners = ctx->topo.nowners,
        .persistence = ctx->cfg.persistence,
        .lock_wait_s = ctx->cfg.lock_wait_s,
    };
    crpm_testhook_l2(ctx, &o);
    return crpm_level_l2(&ctx->l2, &ctx->env, &o);
}

/* Containers lost with their node come back from their partner copies:
 * the unusable file is kept aside, the copy is written in its place. */
static int restore_l2(crpm_ctx *ctx, gathered *g)
{
    int rc = CRPM_SUCCESS;
    double t_all = crpm_now();
    if (g->restore[ctx->rank])
        rc = set_aside(ctx, g);
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init: setting a damaged container aside");
    uint64_t sent = 0;
    /* end to end: from before the set-aside agreement to every rank holding
     * its reopened container; the transfer: each rank's sync call alone */
    double t0 = crpm_now();
    int xrc = rc == 0 ? crpm_level_l2_restore(&ctx->l2, g->restore, ctx->path, &sent) : CRPM_SUCCESS;
    double xfer = crpm_now() - t0;
    /* a rank opens what it received before the one agreement on both: a
     * failure elsewhere leaves it an open container that is closed anyway */
    if (rc == 0 && xrc == 0 && g->restore[ctx->rank])
        xrc = crpm_jobdir_open(ctx, ctx->path, 0, &g->c);
    /* the ranks without a transfer wait for the others without polling */
    if (rc == 0)
        rc = crpm_agree_idle(ctx->comm, ctx->rank, xrc,
                             "crpm_init: restoring containers from their partner copies and opening them");
    if (rc == 0 && ctx->cfg.verbosity >= 2) {
        double d[3] = {(double)sent, xfer, crpm_now() - t_all}, mx[3];
        if (MPI_Allreduce(d, mx, 3, MPI_DOUBLE, MPI_MAX, ctx->comm) == MPI_SUCCESS && ctx->rank == 0)
            printf("[crpm] restart: %d container%s rebuilt from partner copies, %.1f MiB per rank: transfer %.3f s "
                   "(%.2f GB/s per lost rank), end to end %.3f s (%.2f GB/s per lost rank)\n", g->nrestore,
                   g->nrestore == 1 ? "" : "s", mx[0] / 1048576.0, mx[1], mx[1] > 0 ? mx[0] / mx[1] / 1e9 : 0.0,
                   mx[2], mx[2] > 0 ? mx[0] / mx[2] / 1e9 : 0.0);
        fflush(stdout);
    }
    return rc;
}

/* Level 3 exists where the job's nodes form groups (api.c decided). */
static int open_l3(crpm_ctx *ctx)
{
    if (!ctx->l3_groups)
        return CRPM_SUCCESS;
    crpm_l3_opts o = {
        .group_size = (int)ctx->cfg.group_size,
        .parity = (int)ctx->cfg.l3_parity,
        .members = ctx->l3_members,
        .groups = ctx->l3_groups,
        .segment_size = ctx->cfg.segment_size,
        .block_size = ctx->cfg.block_size,
        .persistence = ctx->cfg.persistence,
        .lock_wait_s = ctx->cfg.lock_wait_s,
    };
    crpm_testhook_l3(ctx, &o);
    return crpm_level_l3(&ctx->l3, &ctx->env, &o);
}

/* A rebuilt image becomes this rank's container at the agreed epoch:
 * written under a temporary name, then renamed into place. */
static int write_rebuilt(crpm_ctx *ctx, const crpm_l3_image *img, int64_t epoch, crpm_container **out)
{
    char tmp[CRPM_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", ctx->path);
    int rc = crpm_unlink_quiet(tmp);
    crpm_container *c = NULL;
    if (rc == 0)
        rc = crpm_jobdir_open(ctx, tmp, 1, &c);
    for (int i = 0; rc == 0 && i < img->nregions; i++) {
        const crpm_array *a = &img->regions[i];
        rc = crpm_container_protect(c, a->id, a->ptr, a->count, a->type_code, a->elem_size);
    }
    crpm_stats_t st;
    if (rc == 0)
        rc = crpm_container_checkpoint(c, img->user_id, &st);
    if (rc == 0)
        rc = crpm_container_renumber(c, (uint64_t)epoch);
    if (c)
        crpm_container_close(c);
    if (rc == 0)
        rc = crpm_durable_rename(tmp, ctx->path);
    if (rc == 0)
        rc = crpm_jobdir_open(ctx, ctx->path, 0, out);
    return rc;
}

/* Containers lost with their nodes come back from their groups' survivors
 * and parity; survivors and parity go to the agreed epoch first. */
static int restore_l3(crpm_ctx *ctx, gathered *g, const crpm_verdict *v)
{
    int lost = g->rebuild[ctx->rank] != 0, usable = 0, rc = CRPM_SUCCESS;
    if (lost) {
        rc = set_aside(ctx, g);
        /* the identity every container of the run holds (the decision checked it) */
        memcpy(ctx->run_id, &g->all[(size_t)ctx->rank * CRPM_F_N + CRPM_F_RUN0], sizeof ctx->run_id);
    } else if ((int64_t)crpm_container_epoch(g->c) == v->epoch + 1) {
        rc = crpm_container_rollback(g->c);
    }
    if (rc == 0) {
        crpm_level_l3_attach(&ctx->l3, lost ? NULL : g->c);
        rc = crpm_level_l3_at(&ctx->l3, (uint64_t)v->epoch, &usable);
    }
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init: preparing the level-3 rebuild");
    int64_t *use = calloc((size_t)ctx->nranks, sizeof *use), u = usable;
    if (rc == 0)
        rc = crpm_agree(ctx->comm, ctx->rank, use ? 0 : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory"),
                        "crpm_init");
    if (rc == 0) {
        int mrc = MPI_Allgather(&u, 1, MPI_INT64_T, use, 1, MPI_INT64_T, ctx->comm);
        if (mrc != MPI_SUCCESS)
            rc = crpm_mpi_fail(mrc, "crpm_init: MPI_Allgather");
    }
    crpm_l3_image img = {0};
    uint64_t sent = 0;
    double t0 = crpm_now(), decode = 0;
    if (rc == 0)
        rc = crpm_agree(ctx->comm, ctx->rank, crpm_level_l3_rebuild(&ctx->l3, g->rebuild, use, &img, &sent, &decode),
                        "crpm_init: rebuilding containers from level-3 parity");
    int wrc = rc == 0 && lost ? write_rebuilt(ctx, &img, v->epoch, &g->c) : CRPM_SUCCESS;
    /* the survivors wait for the lost ranks' writes without polling */
    if (rc == 0)
        rc = crpm_agree_idle(ctx->comm, ctx->rank, wrc, "crpm_init: writing a container rebuilt from level-3 parity");
    if (rc == 0 && ctx->cfg.verbosity >= 2) {
        uint64_t bytes = 0;
        for (int i = 0; i < img.nregions; i++)
            bytes += crpm_array_bytes(&img.regions[i]);
        /* largest rebuilt container; slowest rank's times, in one reduction:
         * "decoded in" is the reconstruction alone (its moves, decodes and the
         * agreements between its phases), "in all" includes writing it */
        double mine[3] = {(double)bytes, crpm_now() - t0, decode}, mx[3];
        if (MPI_Allreduce(mine, mx, 3, MPI_DOUBLE, MPI_MAX, ctx->comm) == MPI_SUCCESS && ctx->rank == 0)
            printf("[crpm] restart: %d container%s rebuilt from level-3 parity at epoch %lld (%.2f MiB per lost rank: "
                   "decoded in %.3f s, %.2f GB/s; written in %.3f s in all)\n", g->nrebuild,
                   g->nrebuild == 1 ? "" : "s", (long long)v->epoch, mx[0] / 1048576.0, mx[2],
                   mx[2] > 0 ? mx[0] / mx[2] / 1e9 : 0.0, mx[1]);
        fflush(stdout);
    }
    crpm_l3_image_free(&img);
    free(use);
    return rc;
}

/* The verdict; when it asks for level 4, after looking there (collective). */
static int decide(crpm_ctx *ctx, gathered *g, crpm_verdict *v)
{
    *v = crpm_decide_restart(&g->f);
    if (v->kind != CRPM_V_ASK_L4)
        return CRPM_SUCCESS;
    int rc = gather_l4(ctx, g);
    if (rc == 0)
        *v = crpm_decide_restart(&g->f);
    return rc;
}

/* Damaged data nothing could repair at its epoch: every rank resumes at the
 * epoch before it, which every rank holds intact (crpm_decide_prev_patch). */
static void note_fallback(crpm_ctx *ctx, const gathered *g, const crpm_verdict *v)
{
    if (ctx->rank == 0 && ctx->cfg.verbosity >= 1) {
        fprintf(stderr, "[crpm] restart: epoch %lld is damaged on %d rank%s and no partner copy, parity or level-4 "
                "checkpoint holds it intact: every rank resumes at epoch %lld\n", (long long)g->f.top_epoch,
                g->nprev, g->nprev == 1 ? "" : "s", (long long)v->epoch);
        fflush(stderr);
    }
}

int crpm_restart(crpm_ctx *ctx)
{
    gathered g;
    memset(&g, 0, sizeof g);
    int rc = crpm_agree(ctx->comm, ctx->rank, open_l2(ctx), "crpm_init: locking the partner copies");
    if (rc == 0)
        rc = crpm_agree(ctx->comm, ctx->rank, open_l3(ctx), "crpm_init: locking the parity containers");
    if (rc != 0)
        return rc;
    rc = gather(ctx, &g);
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
    if (rc == 0)
        crpm_decide_top(g.all, ctx->nranks, &g.f.top_epoch, &g.f.top_uid);
    if (rc == 0 && ctx->l2.ops) {
        if (!(g.restore = calloc((size_t)ctx->nranks, sizeof *g.restore)))
            rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
        rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
        if (rc == 0) {
            g.nrestore = crpm_decide_l2_patch(g.all, ctx->nranks, g.restore);
            for (int r = 0; r < ctx->nranks; r++)
                g.l2_in_use |= g.all[(size_t)r * CRPM_F_N + CRPM_F_REP_FILE] != 0;
        }
    }
    if (rc == 0 && ctx->l3.ops) {
        if (!(g.rebuild = calloc((size_t)ctx->nranks, sizeof *g.rebuild)))
            rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
        rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
        if (rc == 0) {
            for (int r = 0; r < ctx->nranks; r++)
                g.l3_in_use |= g.all[(size_t)r * CRPM_F_N + CRPM_F_PAR_OK] != 0;
            g.nrebuild = crpm_decide_l3_patch(g.all, ctx->nranks, ctx->l3_groups, ctx->l3_members,
                                              (int)ctx->cfg.group_size, (int)ctx->cfg.l3_parity, g.rebuild);
        }
    }
    crpm_verdict v = {0};
    if (rc == 0) {
        g.nprev = crpm_decide_prev_patch(g.all, ctx->nranks);
        g.f.repaired = g.nrestore + g.nrebuild + g.nprev > 0;
        rc = decide(ctx, &g, &v);
        if (rc == 0 && v.kind == CRPM_V_L1 && g.nprev)
            note_fallback(ctx, &g, &v);
        if (rc == 0 && v.kind == CRPM_V_L1 && g.nrestore)
            rc = restore_l2(ctx, &g);
        if (rc == 0 && v.kind == CRPM_V_L1 && g.nrebuild)
            rc = restore_l3(ctx, &g, &v);
        if (ctx->rank == 0 && ctx->cfg.verbosity >= 3)
            printf("[crpm] init: %d of %d containers exist, %d unreadable, epochs %lld..%lld, other rank count: "
                   "%s\n", v.n_exist, ctx->nranks, v.n_fail, (long long)(v.emax < 0 ? 0 : v.emin),
                   (long long)(v.emax < 0 ? 0 : v.emax), v.l1 == CRPM_L1S_NRANKS ? "yes" : "no");
    }
    if (rc == 0 && v.kind == CRPM_V_L1) {
        rc = apply_l1(ctx, &g, &v);
        if (rc != 0 && rc != CRPM_ERR_MPI) {
            snprintf(g.own_msg, sizeof g.own_msg, "%s", crpm_last_error());
            g.f.l1_rejected = 1;
            rc = decide(ctx, &g, &v);
        }
    }
    if (rc == 0) /* another rank count's checkpoint may apply (reshape.c): v becomes a fresh start */
        rc = crpm_reshape_restart(ctx, &v, g.l4_path);
    if (rc == 0 && (v.kind == CRPM_V_L4 || v.kind == CRPM_V_FRESH || v.kind == CRPM_V_FULL ||
                    (v.kind == CRPM_V_ERROR && v.l1 == CRPM_L1S_FULL_NOCOMMON)))
        rc = new_run_id(ctx);
    if (rc == 0 && v.kind == CRPM_V_L4) {
        /* Level 1 is made anew beside the level-4 restart. */
        int lrc = v.set_aside ? set_aside(ctx, &g) : CRPM_SUCCESS;
        crpm_container_close(g.c);
        g.c = NULL;
        if (lrc == 0)
            lrc = crpm_jobdir_create_fresh(ctx, &g.c);
        rc = crpm_agree(ctx->comm, ctx->rank, lrc, "crpm_init: re-creating the containers after a level-4 restart");
        if (rc == 0) {
            crpm_level_close(&ctx->l4);
            rc = crpm_level_l4(&ctx->l4, &ctx->env, g.l4_path);
        }
        if (rc == 0) {
            ctx->last_id = (uint64_t)g.l4_id;
            ctx->source = &ctx->l4;
            ctx->status = CRPM_STATUS_L4;
            if (ctx->rank == 0 && ctx->cfg.verbosity >= 2)
                printf("[crpm] restart: level-4 checkpoint %d from %s\n", g.l4_id, g.l4_path);
        }
    }
    if (rc == 0 && (v.kind == CRPM_V_FRESH || v.kind == CRPM_V_FULL ||
                    (v.kind == CRPM_V_ERROR && v.l1 == CRPM_L1S_FULL_NOCOMMON))) {
        /* Every container is made anew (ranks ahead at epoch 1 hold a first
         * checkpoint that never completed), all with this run's identity. */
        int lrc = v.set_aside ? set_aside(ctx, &g) : CRPM_SUCCESS;
        if (lrc == 0) {
            crpm_container_close(g.c);
            g.c = NULL;
            lrc = crpm_jobdir_create_fresh(ctx, &g.c);
        }
        rc = crpm_agree(ctx->comm, ctx->rank, lrc, "crpm_init: creating the containers");
    }
    if (rc == 0 && v.kind == CRPM_V_ERROR)
        rc = crpm_agree(ctx->comm, ctx->rank,
                        crpm_verdict_error(&g.f, &v, ctx->rank, v.l1 == CRPM_L1S_L4_CORRUPT ? g.l4_msg : g.own_msg,
                                           ctx->job_dir, ctx->cfg.job_name),
                        "crpm_init");
    /* The primary level: the differential container, or full files. */
    if (rc == 0 && ctx->cfg.method == CRPM_METHOD_FULL) {
        rc = crpm_level_full(&ctx->primary, &ctx->env, v.kind == CRPM_V_FULL ? v.full_id : -1);
        if (rc == 0 && v.kind == CRPM_V_FULL) {
            ctx->source = &ctx->primary;
            ctx->status = CRPM_STATUS_L1;
            ctx->last_id = (uint64_t)v.full_id;
        }
    }
    if (rc == 0 && ctx->cfg.method == CRPM_METHOD_FULL) {
        /* the empty container stays on disk beside the full files: it marks the job */
        crpm_container_close(g.c);
        g.c = NULL;
    } else if (rc == 0) {
        ctx->env.epoch = crpm_container_epoch(g.c);
        rc = crpm_level_l1(&ctx->primary, &ctx->env, g.c);
        g.c = NULL;
        if (rc == 0 && v.kind == CRPM_V_L1) {
            ctx->source = &ctx->primary;
            ctx->status = g.nrebuild ? CRPM_STATUS_L3 : g.nrestore ? CRPM_STATUS_L2 : CRPM_STATUS_L1;
        }
    }
    if (rc == 0 && ctx->l2.ops) {
        /* partner copies follow the container from here; after a level-1
         * restart they are brought up to it now (lost ones rebuilt), so the
         * job is protected again before its first checkpoint */
        crpm_level_l2_attach(&ctx->l2, crpm_level_l1_container(&ctx->primary));
        if (v.kind == CRPM_V_L1 && g.l2_in_use) {
            uint64_t sent = 0;
            double t0 = crpm_now();
            rc = crpm_agree(ctx->comm, ctx->rank, crpm_level_l2_sync(&ctx->l2, &sent),
                            "crpm_init: bringing the partner copies up to date");
            double d[2] = {(double)sent, crpm_now() - t0}, mx[2];
            if (rc == 0 && ctx->cfg.verbosity >= 2 &&
                MPI_Allreduce(d, mx, 2, MPI_DOUBLE, MPI_MAX, ctx->comm) == MPI_SUCCESS && ctx->rank == 0 && mx[0] > 0) {
                printf("[crpm] restart: partner copies brought up to date, %.1f MiB from the busiest rank in %.3f s "
                       "(agreement included)\n", mx[0] / 1048576.0, mx[1]);
                fflush(stdout);
            }
        }
    }
    if (rc == 0 && ctx->l3.ops) {
        /* parity follows the container from here; after a level-1 restart
         * it is brought to the agreed epoch, re-encoded where it is not */
        crpm_level_l3_attach(&ctx->l3, crpm_level_l1_container(&ctx->primary));
        if (v.kind == CRPM_V_L1 && (g.l3_in_use || g.nrebuild)) {
            int usable = 0;
            uint64_t sent = 0;
            rc = g.nrebuild ? CRPM_SUCCESS : crpm_level_l3_at(&ctx->l3, (uint64_t)v.epoch, &usable);
            rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init: loading the parity");
            if (rc == 0)
                rc = crpm_agree(ctx->comm, ctx->rank, crpm_level_l3_sync(&ctx->l3, g.nrebuild != 0, &sent),
                                "crpm_init: bringing the parity up to date");
        }
    }
    crpm_container_close(g.c);
    free(g.all);
    free(g.restore);
    free(g.rebuild);
    return rc;
}

/* Restart at init (restart.h): this rank's container and the followers'
 * facts gathered on every rank, the followers' plans, the pure decision
 * (decide.c), then the verdict applied.  The followers take part through the
 * coordinator (coordinate.h); nothing here knows a level by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>
#include <sys/random.h>
#include <time.h>
#include "agree.h"
#include "coordinate.h"
#include "decide.h"
#include "error.h"
#include "fsutil.h"
#include "jobdir.h"
#include "level_table.h"
#include "mpi_error.h"
#include "reshape.h"
#include "restart.h"
#include "runlog.h"
#include "testhook.h"

typedef struct gathered {
    crpm_ctx *ctx;
    crpm_restart_facts f;
    int64_t *all;              /* nranks x CRPM_F_N */
    int64_t *extra;            /* nranks x the followers' own facts (crpm_coord_nfacts) */
    crpm_container *c;         /* this rank's container, if it opened (also when its data is damaged) */
    char own_msg[512];         /* why it did not, or what its data check found */
    int corrupt;               /* its checksums failed: set aside as .corrupt-<time> */
    int node_rank;
    int64_t run[2];            /* the run identity being restored (the sources' plans point here) */
    crpm_found found;          /* what a follower's lookup found (the decision asked) */
    crpm_follower *found_by;
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
    mine[CRPM_F_LEVELS] = (int64_t)crpm_container_levels(g->c);
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

/* This rank's facts about its own container. */
static void own_facts(crpm_ctx *ctx, gathered *g, int64_t *mine)
{
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
    crpm_primary_facts(ctx, mine);
}

/* Each rank's facts (its own container's, the followers'), exchanged with all. */
static int gather(crpm_ctx *ctx, gathered *g)
{
    int nx = crpm_coord_nfacts(ctx), w = CRPM_F_N + nx;
    int64_t *mine = calloc((size_t)w, sizeof *mine), *rows = malloc(sizeof *rows * (size_t)w * (size_t)ctx->nranks);
    g->all = malloc(sizeof(int64_t) * CRPM_F_N * (size_t)ctx->nranks);
    g->extra = malloc(sizeof(int64_t) * ((size_t)nx * (size_t)ctx->nranks + 1));
    int rc = mine && rows && g->all && g->extra ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init"); /* before the exchanges: no rank waits alone */
    if (rc == 0) {
        own_facts(ctx, g, mine);
        rc = crpm_coord_facts(ctx, mine, mine + CRPM_F_N);
    }
    if (rc == 0) {
        int mrc = MPI_Allgather(mine, w, MPI_INT64_T, rows, w, MPI_INT64_T, ctx->comm);
        rc = mrc == MPI_SUCCESS ? CRPM_SUCCESS : crpm_mpi_fail(mrc, "crpm_init: MPI_Allgather");
    }
    for (int r = 0; rc == 0 && r < ctx->nranks; r++) {
        memcpy(g->all + (size_t)r * CRPM_F_N, rows + (size_t)r * (size_t)w, sizeof(int64_t) * CRPM_F_N);
        memcpy(g->extra + (size_t)r * (size_t)nx, rows + (size_t)r * (size_t)w + CRPM_F_N, sizeof(int64_t) * (size_t)nx);
    }
    free(mine);
    free(rows);
    g->f = (crpm_restart_facts){.nranks = ctx->nranks, .rank = g->all, .method = ctx->cfg.method,
                                .unrecoverable_fresh = ctx->cfg.on_unrecoverable_fresh};
    return rc;
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

/* The job directory's services to the followers that restore containers. */
static int io_set_aside(void *arg)
{
    gathered *g = arg;
    return set_aside(g->ctx, g);
}

static int io_open(void *arg, const char *path, int create, crpm_container **c)
{
    gathered *g = arg;
    return crpm_jobdir_open(g->ctx, path, create, c);
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

/* The verdict; when it asks, after the followers looked for a checkpoint of
 * their own (collective). */
static int decide(crpm_ctx *ctx, gathered *g, crpm_verdict *v)
{
    *v = crpm_decide_restart(&g->f);
    if (v->kind != CRPM_V_ASK)
        return CRPM_SUCCESS;
    int rc = crpm_coord_lookup(ctx, &g->found, &g->found_by);
    g->f.asked = 1;
    g->f.found = rc == 0 && g->found.found;
    g->f.found_epoch = g->found.epoch;
    g->f.found_id = g->found.id;
    g->f.found_has_run = g->found.has_run;
    memcpy(g->f.found_run, g->found.run, sizeof g->f.found_run);
    g->f.found_damaged = rc == 0 && g->found.damaged;
    if (rc == 0)
        *v = crpm_decide_restart(&g->f);
    return rc;
}

/* The followers' sources over every rank's facts, then the decision. */
static int plan(crpm_ctx *ctx, gathered *g, crpm_verdict *v)
{
    int known = crpm_fact_run(g->all, ctx->nranks, g->run);
    int rc = crpm_coord_plan(ctx, g->all, g->extra, known ? g->run : NULL, &g->f.src, &g->f.nsrc);
    return rc == 0 ? decide(ctx, g, v) : rc;
}

/* An epoch older than one some rank committed intact: say why. */
static void note_fallback(crpm_ctx *ctx, const crpm_verdict *v)
{
    if (ctx->rank == 0 && ctx->cfg.verbosity >= 1) {
        fprintf(stderr, "[crpm] restart: the newest checkpoint (epoch %lld) cannot be brought back on every rank "
                "from any level: every rank resumes at epoch %lld, the newest that can\n", (long long)v->top,
                (long long)v->epoch);
        fflush(stderr);
    }
}

/* A level-1 verdict: the followers bring the containers back that cannot
 * serve the epoch themselves. */
static int restore_lost(crpm_ctx *ctx, gathered *g, const crpm_verdict *v)
{
    if (v->fallback)
        note_fallback(ctx, v);
    crpm_restart_io io = {.epoch = v->epoch, .path = ctx->path, .own = &g->c, .run_id = ctx->run_id,
                          .set_aside = io_set_aside, .open = io_open, .arg = g};
    return crpm_coord_restore(ctx, &io);
}

/* A level-1 verdict: a rank ahead rolls back; if the ranks then disagree,
 * the decision is taken again without level 1. */
static int resume_l1(crpm_ctx *ctx, gathered *g, crpm_verdict *v)
{
    int rc = apply_l1(ctx, g, v);
    if (rc != 0 && rc != CRPM_ERR_MPI) {
        snprintf(g->own_msg, sizeof g->own_msg, "%s", crpm_last_error());
        g->f.l1_rejected = 1;
        rc = decide(ctx, g, v);
    }
    return rc;
}

/* Every container made anew, all with this run's identity: the ones that
 * hold data kept aside first when the verdict says so. */
static int create_fresh(crpm_ctx *ctx, gathered *g, const crpm_verdict *v, const char *what)
{
    int lrc = v->set_aside ? set_aside(ctx, g) : CRPM_SUCCESS;
    if (lrc == 0) {
        crpm_container_close(g->c);
        g->c = NULL;
        lrc = crpm_jobdir_create_fresh(ctx, &g->c);
    }
    return crpm_agree(ctx->comm, ctx->rank, lrc, what);
}

/* A refusal, on every rank alike: the ranks its text names send the paths
 * of their containers (node-local directories differ from node to node),
 * so that every rank names the affected files, not its own directory. */
static int refuse(crpm_ctx *ctx, gathered *g, const crpm_verdict *v)
{
    enum { NAMED = 8 };
    int named[NAMED], n = crpm_verdict_named(&g->f, v, named, NAMED);
    char buf[NAMED][CRPM_PATH_MAX];
    const char **paths = calloc((size_t)ctx->nranks, sizeof *paths); /* NULL: the texts name the files alone */
    int ok = 1;
    for (int i = 0; i < n; i++) { /* every rank takes part whatever it could allocate */
        snprintf(buf[i], sizeof buf[i], "%s", named[i] == ctx->rank ? ctx->path : "");
        ok = ok && MPI_Bcast(buf[i], (int)sizeof buf[i], MPI_CHAR, named[i], ctx->comm) == MPI_SUCCESS;
        buf[i][sizeof buf[i] - 1] = '\0';
        if (paths && ok)
            paths[named[i]] = buf[i];
    }
    int rc = crpm_verdict_error(&g->f, v, ctx->rank, v->l1 == CRPM_L1S_FOUND_CORRUPT ? g->found.why : g->own_msg,
                                paths, ctx->job_dir, ctx->cfg.job_name);
    free(paths);
    return crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
}

/* Any verdict but level 1 (or one level 1 could not serve after all). */
static int apply_other(crpm_ctx *ctx, gathered *g, const crpm_verdict *v)
{
    int fresh = v->kind == CRPM_V_FRESH || v->kind == CRPM_V_FULL ||
                (v->kind == CRPM_V_ERROR && v->l1 == CRPM_L1S_FULL_NOCOMMON);
    int rc = fresh || v->kind == CRPM_V_FOUND ? new_run_id(ctx) : CRPM_SUCCESS;
    if (rc == 0 && v->kind == CRPM_V_FOUND && g->found_by) {
        /* Level 1 is made anew beside the restart from the follower's checkpoint. */
        char what[128];
        snprintf(what, sizeof what, "crpm_init: re-creating the containers after a level-%d restart",
                 g->found_by->level);
        rc = create_fresh(ctx, g, v, what);
        if (rc == 0) {
            ctx->last_id = (uint64_t)g->found.id;
            ctx->source = &g->found_by->lv;
            ctx->status = g->found_by->level; /* CRPM_STATUS_Ln == n */
            if (ctx->rank == 0 && ctx->cfg.verbosity >= 2)
                printf("[crpm] restart: level-%d checkpoint %lld from %s\n", g->found_by->level,
                       (long long)g->found.id, g->found.where);
            int others = 0; /* node-level levels the old containers had: they start anew too */
            for (int i = 0; i < g->f.nsrc; i++)
                others |= ((crpm_follower *)g->f.src[i].arg)->plan.in_use;
            if (others && ctx->rank == 0 && ctx->cfg.verbosity >= 1) {
                fprintf(stderr, "[crpm] restart: the containers, partner copies and parity start anew with this "
                        "run; until the next checkpoint at their level, checkpoint %lld is held by its level-%d "
                        "file alone\n", (long long)g->found.id, g->found_by->level);
                fflush(stderr);
            }
        }
    }
    if (rc == 0 && fresh)
        rc = create_fresh(ctx, g, v, "crpm_init: creating the containers");
    if (rc == 0 && v->kind == CRPM_V_ERROR)
        rc = refuse(ctx, g, v);
    return rc;
}

int crpm_restart(crpm_ctx *ctx)
{
    gathered g;
    memset(&g, 0, sizeof g);
    g.ctx = ctx;
    crpm_verdict v = {0};
    int rc = crpm_coord_open(ctx);
    if (rc == 0)
        rc = crpm_agree(ctx->comm, ctx->rank, gather(ctx, &g), "crpm_init");
    if (rc == 0) {
        rc = plan(ctx, &g, &v);
        if (rc == 0 && v.kind == CRPM_V_L1)
            rc = restore_lost(ctx, &g, &v);
        if (ctx->rank == 0 && ctx->cfg.verbosity >= 3)
            printf("[crpm] init: %d of %d containers exist, %d unreadable, epochs %lld..%lld, other rank count: "
                   "%s\n", v.n_exist, ctx->nranks, v.n_fail, (long long)(v.emax < 0 ? 0 : v.emin),
                   (long long)(v.emax < 0 ? 0 : v.emax), v.l1 == CRPM_L1S_NRANKS ? "yes" : "no");
    }
    if (rc == 0 && v.kind == CRPM_V_L1)
        rc = resume_l1(ctx, &g, &v);
    if (rc == 0) /* another rank count's checkpoint may apply (reshape.c): v becomes a fresh start */
        rc = crpm_reshape_restart(ctx, &v, g.found_by && g.found.found ? g.found.where : NULL);
    if (rc == 0 && v.kind != CRPM_V_L1)
        rc = apply_other(ctx, &g, &v);
    /* The primary level over this rank's container (or full files), then
     * the followers follow it, brought up to it after a level-1 restart. */
    if (rc == 0)
        rc = crpm_primary_open(ctx, &g.c, v.kind == CRPM_V_FULL ? v.full_id : -1);
    if (rc == 0 && (v.kind == CRPM_V_L1 || v.kind == CRPM_V_FULL)) {
        ctx->source = &ctx->primary;
        ctx->status = v.kind == CRPM_V_FULL ? CRPM_STATUS_L1 : crpm_coord_status(ctx);
        if (v.kind == CRPM_V_FULL)
            ctx->last_id = (uint64_t)v.full_id;
    }
    if (rc == 0)
        rc = crpm_coord_resync(ctx, v.kind == CRPM_V_L1, v.epoch);
    crpm_runlog_restart(ctx, rc); /* the run log's line: which level brought each rank back (runlog.h) */
    crpm_container_close(g.c);
    crpm_coord_plan_free(ctx);
    free(g.all);
    free(g.extra);
    return rc;
}

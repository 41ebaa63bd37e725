/* The coordinator (coordinate.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agree.h"
#include "background.h"
#include "clock.h"
#include "coordinate.h"
#include "decide.h"
#include "error.h"
#include "level_table.h"
#include "runlog.h"

#define FOR_OPEN(ctx, f) \
    for (crpm_follower *f = (ctx)->fol; f < (ctx)->fol + (ctx)->nfol; f++) \
        if (f->lv.ops)

/* ---- the job's levels -------------------------------------------------------- */

int crpm_coord_prepare(crpm_ctx *ctx, const char *config_file)
{
    int n, rc = CRPM_SUCCESS;
    const crpm_level_row *const *rows = crpm_level_table(&n);
    const char *cf = config_file ? config_file : "(none)";
    ctx->nfol = 0;
    for (int i = 0; rc == 0 && i < n && i < CRPM_MAX_FOLLOWERS; i++) {
        crpm_follower *f = &ctx->fol[ctx->nfol++];
        memset(f, 0, sizeof *f);
        f->row = rows[i];
        f->level = rows[i]->level;
        rc = rows[i]->prepare ? rows[i]->prepare(ctx, f, cf) : CRPM_SUCCESS;
    }
    return rc;
}

const crpm_follower *crpm_coord_find(const crpm_ctx *ctx, int level)
{
    for (int i = 0; i < ctx->nfol; i++)
        if (ctx->fol[i].level == level)
            return &ctx->fol[i];
    return NULL;
}

int crpm_coord_has(const crpm_ctx *ctx, int level)
{
    const crpm_follower *f = crpm_coord_find(ctx, level);
    return level == CRPM_L1 || (f && f->lv.ops);
}

void crpm_coord_close(crpm_ctx *ctx)
{
    for (int i = 0; i < ctx->nfol; i++) {
        crpm_follower *f = &ctx->fol[i];
        crpm_level_close(&f->lv);
        if (f->row && f->row->release)
            f->row->release(f);
    }
    crpm_coord_plan_free(ctx);
    ctx->nfol = 0;
    crpm_level_close(&ctx->primary);
}

void crpm_coord_remove(crpm_ctx *ctx, int global)
{
    if (!global && ctx->primary.ops && ctx->primary.ops->remove)
        ctx->primary.ops->remove(&ctx->primary);
    FOR_OPEN(ctx, f)
        if (f->row->global == global && f->lv.ops->remove)
            f->lv.ops->remove(&f->lv);
}

void crpm_coord_purge(crpm_ctx *ctx, int global, void (*remove_prefixed)(const crpm_ctx *ctx, const char *prefix))
{
    int n;
    const crpm_level_row *const *rows = crpm_level_table(&n);
    for (int i = 0; i < n; i++) {
        if (!global && rows[i]->files)
            remove_prefixed(ctx, rows[i]->files);
        if (global && rows[i]->purge)
            rows[i]->purge(ctx);
    }
}

/* ---- checkpoint -------------------------------------------------------------- */

int crpm_coord_restart_failed(int rc, int64_t epoch, int level)
{
    if (rc == 0)
        return rc;
    char msg[3 * 4096];
    snprintf(msg, sizeof msg, "%s", crpm_last_error());
    return crpm_error(rc, "restart at the checkpoint of epoch %lld (level %d): %s", (long long)epoch, level, msg);
}

int crpm_coord_write_failed(int rc, int64_t id, int level)
{
    if (rc == 0)
        return rc;
    char msg[3 * 4096];
    snprintf(msg, sizeof msg, "%s", crpm_last_error());
    return crpm_error(rc, "checkpoint %lld (level %d): %s", (long long)id, level, msg);
}

int crpm_coord_ready(crpm_ctx *ctx, int id, int level)
{
    if (level == CRPM_L1)
        return CRPM_SUCCESS;
    const crpm_follower *f = crpm_coord_find(ctx, level);
    if (!f)
        return crpm_error(CRPM_ERR_INVAL, "crpm_checkpoint(%d): level %d is not CRPM_L1, CRPM_L2, CRPM_L3 or CRPM_L4",
                          id, level);
    if (!f->lv.ops)
        return crpm_error(f->why_code ? f->why_code : CRPM_ERR_CONFIG, "crpm_checkpoint(%d): %s", id,
                          f->why[0] ? f->why : "the level is not available");
    return CRPM_SUCCESS;
}

static void tell(crpm_ctx *ctx, int event)
{
    FOR_OPEN(ctx, f)
        if (f->lv.ops->event)
            f->lv.ops->event(&f->lv, event);
}

/* A follower's part: written on every rank, agreed; undone on failure. */
static int follow(crpm_ctx *ctx, crpm_follower *f, int id, crpm_stats_t *st)
{
    char what[64];
    int done = 0;
    double t = crpm_now();
    uint64_t w0 = st->bytes_written, s0 = st->bytes_sent;
    snprintf(what, sizeof what, "crpm_checkpoint (level %d)", f->level);
    int wrc = f->lv.ops->write(&f->lv, ctx->arrays, ctx->narrays, id, st, &done);
    int rc = crpm_agree(ctx->comm, ctx->rank, crpm_coord_write_failed(wrc, id, f->level), what);
    crpm_runlog_part(ctx, f->level, crpm_now() - t, st->bytes_written - w0, st->bytes_sent - s0);
    if (rc != 0 && f->row->stage == CRPM_STAGE_COMMIT && f->lv.ops->undo && f->lv.ops->undo(&f->lv) != 0)
        ctx->broken = 1;
    return rc;
}

int crpm_coord_checkpoint(crpm_ctx *ctx, int id, int level, int rc, crpm_stats_t *st, double *t_commit)
{
    int committed = 0, async = crpm_bg_takes(ctx, level);
    *t_commit = 0;
    double t = crpm_now();
    if (rc == 0) {
        ctx->ckpt_count++;
        /* the container records that the job has this level, so that a
         * restart rebuilds its files even when all of them were lost */
        crpm_container *c = ctx->primary.ops->container ? ctx->primary.ops->container(&ctx->primary) : NULL;
        if (c && level > CRPM_L1 && level < 32 && crpm_coord_find(ctx, level))
            crpm_container_note_levels(c, 1u << level);
        rc = ctx->primary.ops->write(&ctx->primary, ctx->arrays, ctx->narrays, id, st, &committed);
        rc = crpm_coord_write_failed(rc, id, CRPM_L1);
        crpm_runlog_part(ctx, CRPM_RL_DATA, crpm_now() - t, st->bytes_written, st->bytes_sent);
    }
    t = crpm_now();
    /* Checks, with the commit agreement, that all ranks passed the same id
     * and level; the reduction is the barrier "every rank has committed". */
    int64_t args[4] = {id, -(int64_t)id, level, -(int64_t)level};
    rc = crpm_agree_ext(ctx->comm, ctx->rank, rc, "crpm_checkpoint", args, 4);
    if (rc == 0 && (args[0] != -args[1] || args[2] != -args[3]))
        rc = crpm_error(CRPM_ERR_INVAL, "crpm_checkpoint: ranks passed different ids (%lld..%lld) or levels "
                        "(%lld..%lld)", (long long)args[0], (long long)-args[1], (long long)args[2],
                        (long long)-args[3]);
    double t_red = crpm_now();
    crpm_runlog_part(ctx, CRPM_RL_AGREE, t_red - t, 0, 0);
    int evented = rc == 0;
    if (evented)
        tell(ctx, CRPM_EV_COMMITTED);
    /* the epoch commits only when the followers of this level that join the
     * commit have it too */
    FOR_OPEN(ctx, f)
        if (rc == 0 && !async && f->level == level && f->row->stage == CRPM_STAGE_COMMIT)
            rc = follow(ctx, f, id, st);
    t_red = crpm_now() - t_red;
    if (rc != 0) {
        /* Keep the ranks on one committed checkpoint. */
        if (committed && ctx->primary.ops->undo && ctx->primary.ops->undo(&ctx->primary) != 0)
            ctx->broken = 1;
        if (committed && evented)
            tell(ctx, CRPM_EV_UNDONE);
        return rc;
    }
    /* in the background the drain tells them, once it wrote the level (the
     * write state is the drain's: background.h) */
    FOR_OPEN(ctx, f)
        if (!async && f->level == level && f->row->stage == CRPM_STAGE_COMMIT && f->lv.ops->committed)
            f->lv.ops->committed(&f->lv, id);
    if (committed)
        ctx->env.epoch++;
    if (ctx->primary.ops->committed)
        ctx->primary.ops->committed(&ctx->primary, id);
    ctx->source = &ctx->primary;
    ctx->last_id = (uint64_t)(int64_t)id;
    ctx->iters_since = 0;
    ctx->cost[2] = t_red;
    *t_commit = crpm_now();
    if (async) /* every follower of the level, from the committed epoch (background.h) */
        crpm_bg_post(ctx, id, level);
    FOR_OPEN(ctx, f)
        if (rc == 0 && !async && f->level == level && f->row->stage == CRPM_STAGE_AFTER)
            rc = follow(ctx, f, id, st);
    return rc;
}

/* ---- restart ----------------------------------------------------------------- */

int crpm_coord_open(crpm_ctx *ctx)
{
    int rc = CRPM_SUCCESS;
    for (int i = 0; rc == 0 && i < ctx->nfol; i++) {
        crpm_follower *f = &ctx->fol[i];
        char what[128];
        snprintf(what, sizeof what, "crpm_init: %s", f->row->opening ? f->row->opening : "opening a level");
        rc = crpm_agree(ctx->comm, ctx->rank, f->why_code ? CRPM_SUCCESS : f->row->open(ctx, f), what);
    }
    return rc;
}

int crpm_coord_nfacts(const crpm_ctx *ctx)
{
    int n = 0;
    for (int i = 0; i < ctx->nfol; i++)
        n += ctx->fol[i].lv.ops ? ctx->fol[i].lv.ops->nfacts : 0;
    return n;
}

int crpm_coord_facts(crpm_ctx *ctx, int64_t *row, int64_t *extra)
{
    FOR_OPEN(ctx, f) {
        int rc = f->lv.ops->facts ? f->lv.ops->facts(&f->lv, row, extra) : CRPM_SUCCESS;
        if (rc != 0)
            return rc;
        extra += f->lv.ops->nfacts;
    }
    return CRPM_SUCCESS;
}

/* The decision's questions, answered by the follower's plan op. */
static int src_offers(void *arg, int64_t *epochs, int max)
{
    crpm_follower *f = arg;
    return f->lv.ops->offers ? f->lv.ops->offers(&f->lv, &f->plan, epochs, max) : 0;
}

static int src_can(void *arg, int64_t epoch, const int64_t *need, const int64_t *run, int64_t *repair)
{
    crpm_follower *f = arg;
    crpm_plan *p = &f->plan;
    const int64_t *keep = p->run; /* the restart's own (the decision's may not outlive the call) */
    p->epoch = epoch;
    p->need = need;
    p->run = run;
    p->repair = repair;
    p->nrepair = 0;
    f->lv.ops->plan(&f->lv, p);
    p->run = keep;
    return p->nrepair;
}

static int src_describe(void *arg, int r, const int64_t *need, char *buf, size_t n)
{
    crpm_follower *f = arg;
    buf[0] = '\0';
    if (!f->lv.ops->describe)
        return 0;
    const int64_t *keep = f->plan.need;
    f->plan.need = need;
    int bad = f->lv.ops->describe(&f->lv, &f->plan, r, buf, n);
    f->plan.need = keep;
    return bad;
}

int crpm_coord_plan(crpm_ctx *ctx, const int64_t *rows, const int64_t *extra, const int64_t *run,
                    crpm_decide_src **srcs, int *nsrc)
{
    int nx = crpm_coord_nfacts(ctx), off = 0, rc = CRPM_SUCCESS, n = 0;
    crpm_decide_src *s = calloc((size_t)ctx->nfol + 1, sizeof *s);
    if (!s)
        rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    FOR_OPEN(ctx, f) {
        crpm_plan *p = &f->plan;
        int k = f->lv.ops->nfacts;
        memset(p, 0, sizeof *p);
        if (s && f->lv.ops->plan) {
            p->repair = calloc((size_t)ctx->nranks, sizeof *p->repair);
            int64_t *own = k ? malloc(sizeof *own * (size_t)k * (size_t)ctx->nranks) : NULL;
            if (!p->repair || (k && !own))
                rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
            for (int r = 0; own && r < ctx->nranks; r++)
                memcpy(own + (size_t)r * (size_t)k, extra + (size_t)r * (size_t)nx + off, sizeof *own * (size_t)k);
            p->own = own;
            p->rows = rows;
            for (int r = 0; r < ctx->nranks && f->level < 32; r++)
                p->in_use |= (rows[(size_t)r * CRPM_F_N + CRPM_F_LEVELS] >> f->level) & 1;
            p->nranks = ctx->nranks;
            p->run = run;
            s[n] = (crpm_decide_src){.level = f->level, .holding = f->lv.ops->holding, .arg = f,
                                     .offers = src_offers, .can = src_can, .describe = src_describe,
                                     .repair = p->repair};
            f->src = &s[n++];
        }
        off += k;
    }
    ctx->srcs = s;
    *srcs = s;
    *nsrc = n;
    return crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init");
}

int crpm_coord_lookup(crpm_ctx *ctx, crpm_found *found, crpm_follower **from)
{
    memset(found, 0, sizeof *found);
    found->epoch = found->id = -1;
    *from = NULL;
    FOR_OPEN(ctx, f)
        if (f->lv.ops->lookup) {
            crpm_found mine;
            memset(&mine, 0, sizeof mine);
            int rc = f->lv.ops->lookup(&f->lv, &mine);
            if (rc != 0)
                return rc;
            if (mine.found || (!*from && (mine.damaged || mine.why[0]))) {
                *found = mine;
                *from = mine.found ? f : NULL;
            }
            if (mine.found)
                break;
        }
    return CRPM_SUCCESS;
}

/* The plan the decision left: its repair flags for the verdict's epoch. */
static void settle(crpm_ctx *ctx, crpm_follower *f)
{
    crpm_plan *p = &f->plan;
    p->nrepair = 0;
    if (!f->src)
        return;
    p->repair = f->src->repair;
    p->need = NULL;
    for (int r = 0; r < ctx->nranks; r++)
        p->nrepair += p->repair[r] != 0;
}

int crpm_coord_restore(crpm_ctx *ctx, crpm_restart_io *io)
{
    FOR_OPEN(ctx, f)
        settle(ctx, f);
    FOR_OPEN(ctx, f)
        if (f->plan.nrepair && f->lv.ops->restore) {
            io->plan = &f->plan;
            int rc = f->lv.ops->restore(&f->lv, io);
            if (rc != 0) /* a rebuild that ran out of space says of which checkpoint */
                return crpm_coord_restart_failed(rc, io->epoch, f->level);
        }
    return CRPM_SUCCESS;
}

int crpm_coord_status(const crpm_ctx *ctx)
{
    int status = CRPM_STATUS_L1;
    for (int i = 0; i < ctx->nfol; i++)
        if (ctx->fol[i].lv.ops && ctx->fol[i].plan.nrepair && ctx->fol[i].level > status)
            status = ctx->fol[i].level; /* CRPM_STATUS_Ln == n */
    return status;
}

int crpm_coord_resync(crpm_ctx *ctx, int resumed, int64_t epoch)
{
    const crpm_level_ops *p = ctx->primary.ops;
    crpm_container *c = p && p->container ? p->container(&ctx->primary) : NULL;
    FOR_OPEN(ctx, f) {
        if (f->lv.ops->attach)
            f->lv.ops->attach(&f->lv, c);
        int rc = f->lv.ops->resync ? f->lv.ops->resync(&f->lv, &f->plan, resumed, epoch) : CRPM_SUCCESS;
        if (rc != 0)
            return crpm_coord_restart_failed(rc, epoch, f->level);
    }
    return CRPM_SUCCESS;
}

void crpm_coord_plan_free(crpm_ctx *ctx)
{
    for (int i = 0; i < ctx->nfol; i++) {
        crpm_plan *p = &ctx->fol[i].plan;
        free(ctx->fol[i].src ? ctx->fol[i].src->repair : NULL);
        free((void *)p->own);
        memset(p, 0, sizeof *p);
        ctx->fol[i].src = NULL;
    }
    free(ctx->srcs);
    ctx->srcs = NULL;
}

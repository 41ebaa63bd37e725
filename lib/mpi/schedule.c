/* Snapshot schedule (schedule.h). */
#include <math.h>
#include <stdio.h>
#include "agree.h"
#include "clock.h"
#include "crpm_types.h"
#include "runlog.h"
#include "schedule.h"

void crpm_fmt_secs(char *buf, size_t n, double s)
{
    if (s < 1e-3)
        snprintf(buf, n, "%.3g us", s * 1e6);
    else if (s < 1)
        snprintf(buf, n, "%.3g ms", s * 1e3);
    else
        snprintf(buf, n, "%.3g s", s);
}

void crpm_schedule_start(crpm_ctx *ctx)
{
    ctx->last_ckpt_time = ctx->last_l4_time = crpm_now();
    if (ctx->cfg.ckpt_interval_auto)
        crpm_interval_init(&ctx->auto_iv[0], ctx->cfg.mtbf_s);
    if (ctx->cfg.ckpt_interval_l4_auto)
        crpm_interval_init(&ctx->auto_iv[1], ctx->cfg.mtbf_l4_s);
}

static int l4_auto(const crpm_ctx *ctx) { return ctx->cfg.ckpt_interval_l4_auto && ctx->cfg.glbl_dir[0]; }

int crpm_schedule_due(crpm_ctx *ctx, int *level)
{
    const crpm_config *cfg = &ctx->cfg;
    *level = 0;
    ctx->iters_since++;
    int due = cfg->ckpt_interval > 0 && ctx->iters_since >= cfg->ckpt_interval, l4_due = 0;
    if (cfg->ckpt_interval_s > 0 || cfg->ckpt_interval_auto || l4_auto(ctx)) {
        /* Clocks differ between ranks: any rank past the interval decides. */
        double t = crpm_now(), since = t - ctx->last_ckpt_time;
        int mine[2] = {(cfg->ckpt_interval_s > 0 && since >= cfg->ckpt_interval_s) ||
                           (cfg->ckpt_interval_auto && crpm_interval_due(&ctx->auto_iv[0], since)),
                       l4_auto(ctx) && crpm_interval_due(&ctx->auto_iv[1], t - ctx->last_l4_time)};
        int any[2] = {0, 0};
        int mrc = MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, ctx->comm);
        if (mrc != MPI_SUCCESS)
            return crpm_mpi_fail(mrc, "crpm_snapshot: MPI_Allreduce");
        due |= any[0] || any[1];
        l4_due = any[1];
    }
    if (!due)
        return CRPM_SUCCESS;
    ctx->snap_ckpts++;
    /* When several are due the widest wins: level 4 is taken after a
     * level-1 checkpoint and survives everything the others do, and level 3
     * survives losing up to l3_parity nodes of every group, level 2 a node
     * whose partner node survives. */
    int l2 = cfg->ckpt_interval_l2 > 0 && ctx->snap_ckpts % cfg->ckpt_interval_l2 == 0;
    int l3 = cfg->ckpt_interval_l3 > 0 && ctx->snap_ckpts % cfg->ckpt_interval_l3 == 0;
    int l4 = l4_auto(ctx) ? l4_due : cfg->ckpt_interval_l4 > 0 && ctx->snap_ckpts % cfg->ckpt_interval_l4 == 0;
    *level = l4 ? CRPM_L4 : l3 ? CRPM_L3 : l2 ? CRPM_L2 : CRPM_L1;
    return CRPM_SUCCESS;
}

/* The slowest rank's cost of the checkpoint just taken updates the interval
 * of its level(s), the same on every rank. */
int crpm_schedule_taken(crpm_ctx *ctx, int level)
{
    if (!ctx->cfg.ckpt_interval_auto && !l4_auto(ctx))
        return CRPM_SUCCESS;
    double cmax[2];
    int mrc = MPI_Allreduce(ctx->cost, cmax, 2, MPI_DOUBLE, MPI_MAX, ctx->comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, "crpm_snapshot: MPI_Allreduce");
    for (int l = 0; l < 2; l++) {
        if (!(l == 0 ? ctx->cfg.ckpt_interval_auto : ctx->cfg.ckpt_interval_l4_auto && level == CRPM_L4))
            continue;
        double iv = crpm_interval_update(&ctx->auto_iv[l], cmax[l]);
        crpm_runlog_interval(ctx, l ? 4 : 1, cmax[l], &ctx->auto_iv[l]);
        if (l == 1)
            ctx->last_l4_time = crpm_now();
        /* Printed when it moved by more than 10 %, not at every checkpoint. */
        if (ctx->cfg.verbosity >= 2 && ctx->rank == 0 && fabs(iv - ctx->auto_logged[l]) > 0.1 * ctx->auto_logged[l]) {
            char a[32], c[32];
            crpm_fmt_secs(a, sizeof a, iv);
            crpm_fmt_secs(c, sizeof c, ctx->auto_iv[l].cost_s);
            printf("[crpm] auto interval: level %d every %s (checkpoint cost %s, MTBF %g s)\n", l ? 4 : 1, a, c,
                   ctx->auto_iv[l].mtbf_s);
            fflush(stdout);
            ctx->auto_logged[l] = iv;
        }
    }
    return CRPM_SUCCESS;
}

/* Level 2's restart half (l2_internal.h): the copies checked and described
 * for the decision (facts), the ranks they can bring back (plan), the lost
 * containers restored from them, the copies brought up to their owners'
 * containers after the restart (resync). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "agree.h"
#include "clock.h"
#include "l2_internal.h"
#include "l2_xfer.h"


/* Checks the data CRCs of every open copy (committed epoch, and the
 * previous one when recoverable).  A copy that fails is closed and never
 * used as a source (reported as CRPM_L2F_BAD, as is a copy whose metadata
 * checksums failed at open) until a sync rewrites it from its owner; a
 * previous epoch that fails is reported unavailable.  With `say`, each
 * finding goes to stderr. */
static void verify_copies(crpm_level *lv, int say)
{
    l2_state *s = l2_of(lv);
    char keep[1024]; /* what the checks find is reported in the facts, not as an error */
    snprintf(keep, sizeof keep, "%s", crpm_last_error());
    for (int i = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        int bad = 0, prev_bad = 0;
        if (!h->r)
            continue;
        int rc = crpm_container_verify_epochs(h->r, &bad, &prev_bad, h->why, sizeof h->why);
        if (rc != 0) { /* not checked: not trusted */
            bad = 1;
            snprintf(h->why, sizeof h->why, "%s", crpm_last_error());
        }
        h->prev_bad = prev_bad;
        if (say && (bad || prev_bad)) {
            fprintf(stderr, "[crpm rank %d] partner copy of rank %d: %s\n", lv->env->rank, h->owner, h->why);
            fflush(stderr);
        }
        if (bad) {
            l2_close_held(h);
            h->bad = 1;
        }
    }
    crpm_error(CRPM_SUCCESS, "%s", keep);
}

/* Copy i (owners order) as the decision sees it. */
static void copy_facts(crpm_level *lv, int i, int64_t out[CRPM_L2F_N])
{
    held *h = &l2_of(lv)->held[i];
    memset(out, 0, sizeof(int64_t) * CRPM_L2F_N);
    out[CRPM_L2F_OWNER] = h->owner;
    out[CRPM_L2F_OK] = h->r != NULL;
    out[CRPM_L2F_BAD] = h->bad;
    if (h->r) {
        out[CRPM_L2F_EPOCH] = (int64_t)crpm_container_epoch(h->r);
        out[CRPM_L2F_PREV] = crpm_container_prev_available(h->r) && !h->prev_bad;
        uint8_t id[CRPM_RUN_ID_LEN];
        crpm_container_run_id(h->r, id);
        memcpy(&out[CRPM_L2F_RUN0], id, sizeof id);
    }
}

/* Collective over the pairs: each holder tells the owner the facts of its
 * copy; mine[L2_FILE] = 1 when this rank's copy's file exists at all. */
static int exchange_facts(crpm_level *lv, int64_t mine[CRPM_L2F_N + 1])
{
    l2_state *s = l2_of(lv);
    crpm_sendq q = {0};
    for (int i = 0; i < s->o.nowners; i++) {
        int64_t f[CRPM_L2F_N + 1];
        struct stat sb;
        copy_facts(lv, i, f);
        f[CRPM_L2F_N] = stat(s->held[i].path, &sb) == 0; /* the file, usable or not */
        crpm_sendq_post(&q, lv->env->comm, s->held[i].owner, TAG_INFO_H, f, sizeof f);
    }
    int rc = crpm_recv_bytes(lv->env->comm, s->o.partner, TAG_INFO_H, mine, sizeof(int64_t) * (CRPM_L2F_N + 1),
                             "level 2: partner copy facts");
    int wrc = crpm_sendq_wait(&q, "level 2: partner copy facts");
    return rc ? rc : wrc;
}

/* What the partner holds of this rank's container: the level's own facts. */
int l2_facts(crpm_level *lv, const int64_t *row, int64_t *own)
{
    (void)row;
    l2_open_copies(lv);
    verify_copies(lv, lv->env->verbosity >= 1);
    return exchange_facts(lv, own);
}

static const int64_t *l2_row(const crpm_plan *p, int r) { return p->own + (size_t)r * L2_NFACTS; }

/* A partner copy brings its owner back at the epoch it committed, or at
 * the one before while that is recoverable; only a copy that opened and
 * passed its checksums counts. */
static int copy_holds(const int64_t *o, const int64_t *run, int64_t epoch)
{
    return o[CRPM_L2F_OK] && !o[CRPM_L2F_BAD] &&
           crpm_fact_copy_holds(1, o[CRPM_L2F_EPOCH], o[CRPM_L2F_PREV] != 0, o[CRPM_L2F_RUN0], o[CRPM_L2F_RUN1],
                                run, epoch);
}

int l2_offers(crpm_level *lv, const crpm_plan *p, int64_t *epochs, int max)
{
    (void)lv;
    int n = 0;
    for (int r = 0; r < p->nranks && n + 2 <= max; r++) {
        const int64_t *o = l2_row(p, r);
        if (!o[CRPM_L2F_OK] || o[CRPM_L2F_BAD] || o[CRPM_L2F_EPOCH] < 1)
            continue;
        epochs[n++] = o[CRPM_L2F_EPOCH];
        if (o[CRPM_L2F_PREV])
            epochs[n++] = o[CRPM_L2F_EPOCH] - 1;
    }
    return n;
}

void l2_plan(crpm_level *lv, crpm_plan *p)
{
    (void)lv;
    p->nrepair = 0;
    for (int r = 0; r < p->nranks; r++) {
        p->repair[r] = p->need[r] && copy_holds(l2_row(p, r), p->run, p->epoch);
        p->nrepair += (int)p->repair[r];
    }
}

int l2_describe(crpm_level *lv, const crpm_plan *p, int r, char *buf, size_t n)
{
    (void)lv;
    const int64_t *o = l2_row(p, r);
    if (o[CRPM_L2F_BAD])
        snprintf(buf, n, "its level-2 partner copy is corrupt");
    else if (!o[L2_FILE])
        snprintf(buf, n, "its level-2 partner copy is missing too");
    else if (!o[CRPM_L2F_OK])
        snprintf(buf, n, "its level-2 partner copy cannot be opened");
    else if (p->run && (o[CRPM_L2F_RUN0] != p->run[0] || o[CRPM_L2F_RUN1] != p->run[1]))
        snprintf(buf, n, "its level-2 partner copy is of another run");
    else
        snprintf(buf, n, "its level-2 partner copy holds epoch %lld%s", (long long)o[CRPM_L2F_EPOCH],
                 o[CRPM_L2F_PREV] ? " and the one before" : "");
    return o[CRPM_L2F_BAD] != 0;
}

/* Collective over the pairs: owners in `restore` (nranks flags) get their
 * container back from the copy their partner holds, written to own_path.
 * *sent adds the bytes sent. */
static int restore_from_copies(crpm_level *lv, const int64_t *restore, const char *own_path, uint64_t *sent)
{
    l2_state *s = l2_of(lv);
    crpm_sync_src *src = calloc((size_t)s->o.nowners + 1, sizeof *src);
    if (!src)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    int nsrc = 0, rc = CRPM_SUCCESS, rewritten = 0;
    for (int i = 0; i < s->o.nowners; i++)
        if (restore[s->held[i].owner]) {
            if (!s->held[i].r) { /* the decision counted on this copy */
                rc = crpm_error(CRPM_ERR_STATE, "level 2: copy %s of rank %d is not open", s->held[i].path,
                                s->held[i].owner);
                continue;
            }
            src[nsrc++] = (crpm_sync_src){s->held[i].owner, crpm_container_media(s->held[i].r), s->held[i].path, 0};
        }
    crpm_sync_dst dst = {s->o.partner, own_path, NULL, l2_backend(s), 1};
    int lrc = crpm_sync_files(lv->env->comm, src, nsrc, &dst, restore[lv->env->rank] != 0, sent, &rewritten);
    free(src);
    return rc ? rc : lrc;
}

/* Containers lost with their node come back from their partner copies:
 * the unusable file is kept aside, the copy is written in its place. */
int l2_restore(crpm_level *lv, const crpm_restart_io *io)
{
    const crpm_level_env *env = lv->env;
    const int64_t *restore = io->plan->repair;
    int rc = CRPM_SUCCESS, nrestore = io->plan->nrepair;
    double t_all = crpm_now();
    if (restore[env->rank])
        rc = io->set_aside(io->arg);
    rc = crpm_agree(env->comm, env->rank, rc, "crpm_init: setting a damaged container aside");
    uint64_t sent = 0;
    /* end to end: from before the set-aside agreement to every rank holding
     * its reopened container; the transfer: each rank's sync call alone */
    double t0 = crpm_now();
    int xrc = rc == 0 ? restore_from_copies(lv, restore, io->path, &sent) : CRPM_SUCCESS;
    double xfer = crpm_now() - t0;
    /* a rank opens what it received before the one agreement on both: a
     * failure elsewhere leaves it an open container that is closed anyway */
    if (rc == 0 && xrc == 0 && restore[env->rank])
        xrc = io->open(io->arg, io->path, 0, io->own);
    /* the ranks without a transfer wait for the others without polling */
    if (rc == 0)
        rc = crpm_agree_idle(env->comm, env->rank, xrc,
                             "crpm_init: restoring containers from their partner copies and opening them");
    if (rc == 0 && env->verbosity >= 2) {
        double d[3] = {(double)sent, xfer, crpm_now() - t_all}, mx[3];
        if (MPI_Allreduce(d, mx, 3, MPI_DOUBLE, MPI_MAX, env->comm) == MPI_SUCCESS && env->rank == 0)
            printf("[crpm] restart: %d container%s rebuilt from partner copies, %.1f MiB per rank: transfer %.3f s "
                   "(%.2f GB/s per lost rank), end to end %.3f s (%.2f GB/s per lost rank)\n", nrestore,
                   nrestore == 1 ? "" : "s", mx[0] / 1048576.0, mx[1], mx[1] > 0 ? mx[0] / mx[1] / 1e9 : 0.0,
                   mx[2], mx[2] > 0 ? mx[0] / mx[2] / 1e9 : 0.0);
        fflush(stdout);
    }
    return rc;
}

int crpm_level_l2_sync(crpm_level *lv, uint64_t *sent)
{
    l2_state *s = l2_of(lv);
    if (!s->own)
        return crpm_error(CRPM_ERR_STATE, "level 2: no container attached");
    crpm_sync_dst *dst = calloc((size_t)s->o.nowners + 1, sizeof *dst);
    int *rewritten = calloc((size_t)s->o.nowners + 1, sizeof *rewritten);
    if (!dst || !rewritten) {
        free(dst);
        free(rewritten);
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        dst[i] = (crpm_sync_dst){h->owner, h->path, h->r ? crpm_container_media(h->r) : NULL, l2_backend(s), 0};
    }
    crpm_sync_src src = {s->o.partner, crpm_container_media(s->own), s->own->path, 0};
    int rc = crpm_sync_files(lv->env->comm, &src, 1, dst, s->o.nowners, sent, rewritten);
    for (int i = 0; i < s->o.nowners; i++)
        if (rewritten[i]) {
            l2_close_held(&s->held[i]);
            s->held[i].bad = s->held[i].prev_bad = 0;
        }
    l2_open_copies(lv);
    free(dst);
    free(rewritten);
    if (rc == 0) {
        s->unknown = 0;
        crpm_wlog_clear(&s->live);
        for (int k = 0; k < s->npend; k++)
            crpm_wlog_free(&s->pend[k].log);
        s->npend = 0;
    }
    return rc;
}

/* After a level-1 restart the copies are brought up to the containers now
 * (lost, damaged or stale ones rewritten, only the pieces that differ), so
 * the job is protected again before its first checkpoint. */
int l2_resync(crpm_level *lv, const crpm_plan *p, int resumed, int64_t epoch)
{
    (void)epoch;
    const crpm_level_env *env = lv->env;
    int files = 0;
    for (int r = 0; p->own && r < p->nranks; r++)
        files |= l2_row(p, r)[L2_FILE] != 0;
    /* also when every copy was lost: the containers record that the job had them */
    if (!resumed || !(p->in_use || files))
        return CRPM_SUCCESS;
    uint64_t sent = 0;
    double t0 = crpm_now();
    int rc = crpm_agree(env->comm, env->rank, crpm_level_l2_sync(lv, &sent),
                        "crpm_init: bringing the partner copies up to date");
    double d[2] = {(double)sent, crpm_now() - t0}, mx[2];
    if (rc == 0 && env->verbosity >= 2 && MPI_Allreduce(d, mx, 2, MPI_DOUBLE, MPI_MAX, env->comm) == MPI_SUCCESS &&
        env->rank == 0 && mx[0] > 0) {
        printf("[crpm] restart: partner copies brought up to date, %.1f MiB from the busiest rank in %.3f s "
               "(agreement included)\n", mx[0] / 1048576.0, mx[1]);
        fflush(stdout);
    }
    return rc;
}

/* Level 3: Reed-Solomon parity of the level-1 containers over a group of
 * nodes (layout and coding: l3_code.h), updated with the change alone.
 *
 * What is coded is each rank's *image* of its committed checkpoint: a meta
 * area (region table, user id), then every saved region's segments in slot
 * order, each segment zero beyond the region's end.  Right after the
 * level-1 commit of epoch e+1 the container still holds epoch e intact (the
 * committed copies of e are never written by e+1), so a rank can send, for
 * every segment whose committed copy changed, delta = new XOR old of the
 * blocks that differ.  Holders add g * delta into their parity (kept in DRAM
 * as the working copy of an ordinary container, parity-<rank>.crpm, which
 * the engine checkpoints under the usual two-copy protocol: epoch e's parity
 * stays recoverable until every rank committed e+1).
 *
 * A delta needs the parity and the image to describe the same epoch: when
 * the previous checkpoint was not level 3, after a failed one, after a
 * restart whose parity is not at the agreed epoch, or when the region table
 * changed, the checkpoint re-encodes everything (the same exchange with old
 * = 0 and the parity zeroed).  Transfers run in rounds of at most
 * ROUND_BYTES per rank and codeword set, so memory stays bounded.
 *
 * Files: this one (the parity container, the checkpoint, construction),
 * l3_encode.c (images, deltas, their exchange), l3_restart.c (the restart
 * half), l3_rebuild.c (lost containers rebuilt), l3_verify.c (test builds:
 * the parity against a full re-encode); l3_internal.h is what they share. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "agree.h"
#include "fsutil.h"
#include "l3_internal.h"
#include "persist_file.h"

/* ---- the parity container ---------------------------------------------------- */

static void open_parity(crpm_level *lv)
{
    l3_state *s = l3_of(lv);
    struct stat sb;
    s->pfile = stat(s->ppath, &sb) == 0;
    if (s->pc || !s->pfile)
        return;
    crpm_open_opts oo = {.path = s->ppath, .job_name = lv->env->job_name, .rank = lv->env->rank,
                         .nranks = lv->env->nranks, .persistence = s->o.persistence, .backend = s->o.backend};
    int rc = crpm_container_open(&oo, &s->pc, NULL);
    if (rc != 0) {
        s->pc = NULL;
        snprintf(s->pwhy, sizeof s->pwhy, "%s", crpm_last_error());
        s->pbad = rc == CRPM_ERR_CORRUPT; /* written whole under a temporary name: never half a rewrite */
    }
    crpm_error_clear(); /* a parity container that does not open is a fact, not an error */
}

int l3_size_parity(l3_state *s, uint64_t bytes, int zero)
{
    int M = s->lay.M;
    if (bytes > s->plen) {
        for (int h = 0; h < M; h++) {
            unsigned char *n = realloc(s->par[h], bytes);
            if (!n)
                return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for %llu bytes of parity",
                                  (unsigned long long)bytes);
            memset(n + s->plen, 0, bytes - s->plen);
            s->par[h] = n;
        }
        s->plen = bytes;
    }
    for (int h = 0; zero && h < M; h++)
        memset(s->par[h], 0, s->plen);
    for (int h = 0; s->pc && h < M; h++) {
        int c = l3_held_codeword(s, h);
        int rc = crpm_container_protect(s->pc, c, s->par[h], s->plen, CRPM_TC_BYTE, 1);
        if (rc == 0)
            rc = crpm_container_declare_writes(s->pc, c);
        if (rc)
            return rc;
        if (zero)
            crpm_container_written(s->pc, c, 0, s->plen);
    }
    return CRPM_SUCCESS;
}

/* A parity container to write into: the open one, or a new one (a file
 * that does not open holds nothing the data containers cannot re-encode).
 * The open one must carry the containers' run identity: after a restart
 * that made them anew (level 4, a fresh start) the parity of the run
 * before is replaced, or no restart could ever use what it encodes. */
static int ensure_parity(crpm_level *lv)
{
    l3_state *s = l3_of(lv);
    uint8_t run[CRPM_RUN_ID_LEN], prun[CRPM_RUN_ID_LEN];
    crpm_container_run_id(s->own, run);
    if (s->pc)
        crpm_container_run_id(s->pc, prun);
    if (s->pc && memcmp(run, prun, sizeof run) == 0)
        return CRPM_SUCCESS;
    crpm_container_close(s->pc);
    s->pc = NULL;
    char tmp[CRPM_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->ppath);
    crpm_unlink_quiet(tmp);
    crpm_layout lay = {0};
    if (lv->env->layout) {
        lay = *lv->env->layout;
        lay.role = CRPM_ROLE_PARITY;
    }
    crpm_open_opts oo = {.path = tmp, .segment_size = s->segsize, .block_size = s->blksize,
                         .layout = lv->env->layout ? &lay : NULL,
                         .job_name = lv->env->job_name, .rank = lv->env->rank, .nranks = lv->env->nranks,
                         .persistence = s->o.persistence, .backend = s->o.backend, .create = 1, .run_id = run,
                         /* M regions only (not room for 128K arrays): each a segment table of at
                          * most 1 MiB, 64 GiB of parity per codeword with 2-MiB segments */
                         .slot_size = 4096 + (uint64_t)s->lay.M * (sizeof(struct crpm_slot_region) + (1u << 20))};
    crpm_container *c = NULL;
    int rc = crpm_container_open(&oo, &c, NULL);
    if (rc == 0)
        crpm_container_close(c);
    if (rc == 0)
        rc = crpm_durable_rename(tmp, s->ppath);
    oo.path = s->ppath;
    oo.create = 0;
    if (rc == 0)
        rc = crpm_container_open(&oo, &s->pc, NULL);
    if (rc != 0)
        s->pc = NULL;
    else
        s->pbad = s->pprev_bad = 0;
    s->par_epoch = 0;
    return rc;
}

/* ---- checkpoints --------------------------------------------------------------- */

/* The image `cur` of the committed epoch goes into the parity, as a delta
 * against base when `want_delta` and everyone can, else whole.  Commits the
 * parity container with the job epoch as its user id. */
int l3_encode(crpm_level *lv, int want_delta, uint64_t *sent, int hook)
{
    l3_state *s = l3_of(lv);
    l3_image_free(&s->cur);
    int irc = s->own ? l3_image_of(s->own, s->unit, &s->cur) : crpm_error(CRPM_ERR_STATE, "level 3: no container attached");
    uint64_t epoch = irc ? 0 : crpm_container_epoch(s->own);
    int lrc = irc ? CRPM_SUCCESS : ensure_parity(lv); /* first: it may replace the parity (par_epoch 0) */
    int need_full = irc || !want_delta || !s->have_base || s->base_epoch + 1 != epoch ||
                    !crpm_container_prev_available(s->own) || !l3_same_layout(&s->base, &s->cur) ||
                    s->par_epoch + 1 != epoch || !s->pc;
    /* one agreement: can everyone go on, and with a delta or a full encode
     * (the maxima, as minima of the negated values) */
    int64_t v[2] = {-(int64_t)need_full, -(int64_t)((s->cur.nunits + (uint64_t)s->k - 1) / (uint64_t)s->k)};
    int rc = crpm_agree_ext(lv->env->comm, lv->env->rank, irc ? irc : lrc, "level 3: preparing the encode", v, 2);
    if (rc != 0)
        return rc;
    uint64_t psegs = (uint64_t)-v[1];
    int full = v[0] != 0;
    rc = l3_size_parity(s, psegs * s->unit, full);
    s->par_epoch = 0; /* par changes from here: it describes no epoch until committed */
    int xrc = l3_exchange(lv, &s->cur, full ? NULL : &s->base, psegs, s->par, sent, hook);
    rc = rc ? rc : xrc;
    /* the old copies (base) are read: only cur's, which the next checkpoint does not write, are read after */
    s->cur_epoch = epoch;
    crpm_level_release(lv->env);
    if (hook && rc == 0 && s->o.hook)
        s->o.hook(s->o.hook_arg, CRPM_L3_HOOK_APPLIED);
    if (rc == 0) {
        crpm_stats_t pst;
        rc = crpm_container_checkpoint(s->pc, epoch, &pst);
        s->par_committed = rc == 0;
        if (rc == 0)
            s->par_epoch = epoch;
    }
    if (hook && rc == 0 && s->o.hook)
        s->o.hook(s->o.hook_arg, CRPM_L3_HOOK_COMMITTED);
#ifdef CRPM_TEST_HOOKS
    if (s->o.verify) {
        rc = crpm_agree(lv->env->comm, lv->env->rank, rc, "level 3: encoding");
        if (rc == 0)
            rc = l3_verify_parity(lv, &s->cur, psegs);
    }
#endif
    return rc;
}

static int l3_write(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed)
{
    (void)a;
    (void)n;
    (void)id;
    l3_state *s = l3_of(lv);
    *committed = 0;
    s->par_committed = 0;
    uint64_t sent = 0;
    int rc = l3_encode(lv, !s->o.full_encode, &sent, 1);
    st->bytes_sent += sent;
    *committed = s->par_committed;
    return rc;
}

int l3_committed(crpm_level *lv, int64_t id)
{
    (void)id;
    l3_state *s = l3_of(lv);
    l3_image_free(&s->base);
    s->base = s->cur;
    memset(&s->cur, 0, sizeof s->cur);
    s->have_base = 1;
    s->base_epoch = s->cur_epoch;
    s->par_committed = 0;
    return CRPM_SUCCESS;
}

/* Another rank failed: the parity goes back with the containers; the next
 * level-3 checkpoint re-encodes (the DRAM parity holds the failed one). */
static int l3_undo(crpm_level *lv)
{
    l3_state *s = l3_of(lv);
    int rc = CRPM_SUCCESS;
    if (s->par_committed && s->pc && crpm_container_rollback(s->pc) != 0) {
        rc = crpm_error(CRPM_ERR_IO, "%s", crpm_last_error());
        crpm_container_close(s->pc);
        s->pc = NULL;
    }
    s->par_committed = 0;
    s->par_epoch = 0;
    l3_image_free(&s->cur);
    return rc;
}

static int l3_remove(crpm_level *lv)
{
    l3_state *s = l3_of(lv);
    char p[CRPM_PATH_MAX + 16];
    crpm_container_close(s->pc);
    s->pc = NULL;
    crpm_unlink_quiet(s->ppath);
    snprintf(p, sizeof p, "%s.tmp", s->ppath);
    crpm_unlink_quiet(p);
    crpm_unlock_file(s->plock_fd, s->plock, 1);
    s->plock_fd = -1;
    return CRPM_SUCCESS;
}

static void l3_close(crpm_level *lv)
{
    l3_state *s = l3_of(lv);
    crpm_container_close(s->pc);
    if (s->plock_fd >= 0)
        crpm_unlock_file(s->plock_fd, s->plock, 0);
    l3_image_free(&s->base);
    l3_image_free(&s->cur);
    for (int h = 0; s->par && h < s->lay.M; h++)
        free(s->par[h]);
    free(s->par);
    free(s->grp);
    free(s->groups);
    free(s->members);
    crpm_l3_code_free(&s->code);
    free(s);
}

static const crpm_level_ops l3_ops = {
    .name = "L3",
    .attach = crpm_level_l3_attach,
    .write = l3_write,
    .committed = l3_committed,
    .undo = l3_undo,
    .nfacts = L3F_N,
    .facts = l3_facts,
    .offers = l3_offers,
    .plan = l3_plan,
    .describe = l3_describe,
    .holding = "level-3 parity container",
    .restore = l3_restore,
    .resync = l3_resync,
    .remove = l3_remove,
    .close = l3_close,
};

int crpm_level_l3(crpm_level *lv, const crpm_level_env *env, const crpm_l3_opts *o)
{
    l3_state *s = calloc(1, sizeof *s);
    if (!s)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    s->o = *o;
    s->o.members = s->o.groups = NULL; /* the caller's */
    s->plock_fd = -1;
    s->lay = (crpm_l3_layout){o->group_size, o->parity};
    s->k = o->group_size - o->parity;
    s->g = o->members[env->rank];
    s->segsize = o->segment_size ? o->segment_size : CRPM_DEFAULT_SEGMENT;
    s->blksize = o->block_size ? o->block_size : CRPM_DEFAULT_BLOCK;
    s->unit = l3_unit_for(s->segsize, s->blksize);
    *lv = (crpm_level){&l3_ops, env, s};
    s->grp = malloc(sizeof *s->grp * (size_t)o->group_size);
    s->par = calloc((size_t)o->parity, sizeof *s->par);
    s->groups = malloc(sizeof *s->groups * (size_t)env->nranks);
    s->members = malloc(sizeof *s->members * (size_t)env->nranks);
    int rc = s->grp && s->par && s->groups && s->members ? crpm_l3_code_init(&s->code, s->k, o->parity)
                                                         : crpm_error(CRPM_ERR_NOMEM, "out of memory");
    s->code.pool = env->pool; /* the rank's workers apply the deltas */
    if (rc == 0) {
        memcpy(s->groups, o->groups, sizeof *s->groups * (size_t)env->nranks);
        memcpy(s->members, o->members, sizeof *s->members * (size_t)env->nranks);
    }
#ifndef CRPM_TEST_HOOKS
    if (rc == 0 && o->verify)
        rc = crpm_error(CRPM_ERR_NOTSUP, "level 3: the parity check against a full re-encode is in test builds only "
                        "(-DCRPM_TEST_HOOKS=ON)");
#endif
    for (int j = 0; s->grp && j < o->group_size; j++)
        s->grp[j] = -1;
    for (int r = 0; rc == 0 && r < env->nranks; r++)
        if (o->groups[r] == o->groups[env->rank])
            s->grp[o->members[r]] = r;
    for (int j = 0; rc == 0 && j < o->group_size; j++)
        if (s->grp[j] < 0)
            rc = crpm_error(CRPM_ERR_CONFIG, "level 3: the group of rank %d lacks member %d", env->rank, j);
    if (rc == 0)
        rc = crpm_name_parity(s->ppath, sizeof s->ppath, env->job_dir, env->rank);
    snprintf(s->plock, sizeof s->plock, "%s.lock", s->ppath);
    if (rc == 0)
        rc = crpm_lock_file(s->plock, o->lock_wait_s, &s->plock_fd);
    if (rc == 0)
        open_parity(lv);
    if (rc != 0)
        crpm_level_close(lv);
    return rc;
}

void crpm_level_l3_attach(crpm_level *lv, crpm_container *own)
{
    l3_state *s = l3_of(lv);
    s->own = own;
    l3_image_free(&s->base);
    s->have_base = 0;
    if (own) {
        s->segsize = crpm_container_segment_size(own);
        s->blksize = crpm_container_block_size(own);
        s->unit = l3_unit_for(s->segsize, s->blksize);
        if (crpm_container_epoch(own) && l3_image_of(own, s->unit, &s->base) == 0) {
            s->have_base = 1;
            s->base_epoch = crpm_container_epoch(own);
        }
        crpm_error_clear(); /* without a base the next checkpoint re-encodes */
    }
}

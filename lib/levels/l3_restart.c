/* Level 3's restart half (l3_internal.h): the parity checked and described
 * for the decision (facts), the ranks it can rebuild (plan), the rebuild
 * brought about (restore: the decoding itself is l3_rebuild.c), the parity
 * brought to the agreed epoch or re-encoded after the restart (resync). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agree.h"
#include "clock.h"
#include "fsutil.h"
#include "l3_internal.h"
#include "mpi_error.h"

/* Checks the parity container's data CRCs (committed epoch and, when
 * recoverable, the previous one).  Parity that fails is closed (re-encoded
 * from the intact containers later, never used for a rebuild); a previous
 * epoch that fails is reported unavailable. */
static void check_parity(crpm_level *lv, int say)
{
    l3_state *s = l3_of(lv);
    int bad = 0, prev_bad = 0;
    if (!s->pc)
        return;
    int rc = crpm_container_verify_epochs(s->pc, &bad, &prev_bad, s->pwhy, sizeof s->pwhy);
    if (rc != 0) { /* not checked: not trusted */
        bad = 1;
        snprintf(s->pwhy, sizeof s->pwhy, "%s", crpm_last_error());
    }
    if (say && (bad || prev_bad)) {
        fprintf(stderr, "[crpm rank %d] parity: %s\n", lv->env->rank, s->pwhy);
        fflush(stderr);
    }
    s->pprev_bad = prev_bad;
    if (bad) {
        crpm_container_close(s->pc);
        s->pc = NULL;
        s->pbad = 1;
    }
    crpm_error_clear();
}

/* The parity this rank holds, as found (the level's own facts, L3F_*):
 * OK 1 open, -1 its file exists but is unusable, 0 none; BAD: it failed its
 * checksums (at open or in check_parity); EPOCH and PREV: the job epochs
 * its committed and previous parity describe (-1: none). */
int l3_facts(crpm_level *lv, const int64_t *row, int64_t *own)
{
    (void)row;
    l3_state *s = l3_of(lv);
    check_parity(lv, lv->env->verbosity >= 1);
    own[L3F_OK] = s->pc ? 1 : s->pfile ? -1 : 0;
    own[L3F_EPOCH] = 0;
    own[L3F_PREV] = -1;
    own[L3F_RUN0] = own[L3F_RUN1] = 0;
    own[L3F_BAD] = s->pbad;
    if (!s->pc)
        return CRPM_SUCCESS;
    own[L3F_EPOCH] = (int64_t)crpm_container_user_id(s->pc);
    uint64_t prev = 0;
    if (!s->pprev_bad && crpm_container_prev_available(s->pc) && crpm_container_prev_user_id(s->pc, &prev) == 0)
        own[L3F_PREV] = (int64_t)prev;
    crpm_error_clear();
    uint8_t id[CRPM_RUN_ID_LEN];
    crpm_container_run_id(s->pc, id);
    memcpy(&own[L3F_RUN0], id, sizeof id);
    return CRPM_SUCCESS;
}

int l3_at(crpm_level *lv, uint64_t epoch, int *usable)
{
    l3_state *s = l3_of(lv);
    *usable = 0;
    s->par_epoch = 0;
    if (!s->pc)
        return CRPM_SUCCESS;
    uint64_t prev = 0;
    int rc = CRPM_SUCCESS;
    if (!s->pprev_bad && crpm_container_user_id(s->pc) == epoch + 1 && crpm_container_prev_available(s->pc) &&
        crpm_container_prev_user_id(s->pc, &prev) == 0 && prev == epoch)
        rc = crpm_container_rollback(s->pc);
    crpm_error_clear();
    if (rc != 0 || crpm_container_user_id(s->pc) != epoch || !crpm_container_epoch(s->pc))
        return rc; /* describes another epoch: re-encoded after the restart */
    /* the parity's regions as saved: one per codeword held, all plen long */
    int n = crpm_container_nregions(s->pc);
    uint64_t len = 0;
    for (int i = 0; i < n; i++) {
        crpm_array r;
        if (crpm_container_region(s->pc, i, &r) == 0 && crpm_array_bytes(&r) > len)
            len = crpm_array_bytes(&r);
    }
    if (n != s->lay.M)
        return CRPM_SUCCESS;
    rc = l3_size_parity(s, len, 1);
    if (rc == 0)
        rc = crpm_container_recover(s->pc);
    if (rc != 0) {
        crpm_error_clear();
        return CRPM_SUCCESS; /* unusable: re-encoded */
    }
    s->par_epoch = epoch;
    *usable = 1;
    return CRPM_SUCCESS;
}

int l3_sync(crpm_level *lv, int force, uint64_t *sent)
{
    l3_state *s = l3_of(lv);
    if (!s->own)
        return crpm_error(CRPM_ERR_STATE, "level 3: no container attached");
    uint64_t epoch = crpm_container_epoch(s->own);
    /* whether any rank needs it: the maximum, as the minimum of the negated flags */
    int64_t need = -(int64_t)(force || !s->pc || s->par_epoch != epoch || !epoch);
    int rc = crpm_agree_ext(lv->env->comm, lv->env->rank, CRPM_SUCCESS, "level 3: checking the parity", &need, 1);
    if (rc != 0 || !need)
        return rc;
    rc = l3_encode(lv, 0, sent, 0);
    if (rc == 0)
        l3_committed(lv, 0);
    return rc;
}

/* Whether every codeword of rank r keeps K-M units at epoch e, among the
 * members of its group (grp, ng ranks): members that hold e (not lost) as
 * data, parity of e held by members not lost, of the run being restored. */
static int feasible(const int64_t *own, const int *grp, int ng, const int *members, int K, int M, const int64_t *run,
                    const int64_t *lost, int r, int64_t e)
{
    crpm_l3_layout lay = {K, M};
    for (int j = 0; j < K - M; j++) {
        int c = crpm_l3_codeword_of(&lay, members[r], j), units = 0;
        for (int i = 0; i < ng; i++) {
            int q = grp[i];
            if (lost[q])
                continue;
            const int64_t *x = own + (size_t)q * L3F_N;
            if (crpm_l3_data_index(&lay, c, members[q]) >= 0)
                units++;
            else if (crpm_l3_parity_row(&lay, c, members[q]) >= 0 && x[L3F_OK] == 1 &&
                     (x[L3F_EPOCH] == e || x[L3F_PREV] == e) &&
                     (!run || (x[L3F_RUN0] == run[0] && x[L3F_RUN1] == run[1])))
                units++;
        }
        if (units < K - M)
            return 0;
    }
    return 1;
}

static int by_group(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int crpm_l3_can_rebuild(const int64_t *own, int nranks, const int *groups, const int *members, int K, int M,
                        const int64_t *run, int64_t epoch, const int64_t *need, int64_t *rebuild)
{
    int n = 0, any = 0;
    for (int r = 0; r < nranks; r++) {
        rebuild[r] = 0;
        any |= need[r] != 0;
    }
    if (!any || K < 2 || M < 1 || M >= K || epoch < 1)
        return 0;
    /* the ranks sorted by group: each group's members side by side, so a
     * restart of many ranks costs n log n, not n^2 */
    uint64_t *key = malloc(sizeof *key * (size_t)nranks);
    int *grp = malloc(sizeof *grp * (size_t)nranks);
    if (!key || !grp) {
        free(key);
        free(grp);
        return 0; /* nothing claimed: the decision goes on without this level */
    }
    for (int r = 0; r < nranks; r++)
        key[r] = ((uint64_t)(uint32_t)groups[r] << 32) | (uint32_t)r;
    qsort(key, (size_t)nranks, sizeof *key, by_group);
    for (int r = 0; r < nranks; r++)
        grp[r] = (int)(key[r] & 0xffffffffu);
    for (int a = 0, b; a < nranks; a = b) {
        int lost = 0;
        for (b = a; b < nranks && groups[grp[b]] == groups[grp[a]]; b++)
            lost += need[grp[b]] != 0;
        /* a group that lacks more than M members is beyond this level */
        for (int i = a; lost && lost <= M && i < b; i++) {
            int r = grp[i];
            if (need[r] && feasible(own, grp + a, b - a, members, K, M, run, need, r, epoch)) {
                rebuild[r] = 1;
                n++;
            }
        }
    }
    free(key);
    free(grp);
    return n;
}

int l3_offers(crpm_level *lv, const crpm_plan *p, int64_t *epochs, int max)
{
    (void)lv;
    int n = 0;
    for (int r = 0; r < p->nranks && n + 2 <= max; r++) {
        const int64_t *x = p->own + (size_t)r * L3F_N;
        if (x[L3F_OK] != 1)
            continue;
        if (x[L3F_EPOCH] >= 1)
            epochs[n++] = x[L3F_EPOCH];
        if (x[L3F_PREV] >= 1)
            epochs[n++] = x[L3F_PREV];
    }
    return n;
}

void l3_plan(crpm_level *lv, crpm_plan *p)
{
    l3_state *s = l3_of(lv);
    p->nrepair = crpm_l3_can_rebuild(p->own, p->nranks, s->groups, s->members, s->lay.K, s->lay.M, p->run, p->epoch,
                                     p->need, p->repair);
}

int l3_describe(crpm_level *lv, const crpm_plan *p, int r, char *buf, size_t n)
{
    l3_state *s = l3_of(lv);
    const int64_t *x = p->own + (size_t)r * L3F_N;
    int lost = 0, k = 0;
    for (int q = 0; p->need && q < p->nranks; q++) /* only for a refusal's text */
        if (s->groups[q] == s->groups[r]) {
            k++;
            lost += p->need[q] != 0;
        }
    if (x[L3F_BAD])
        snprintf(buf, n, "its level-3 parity container is corrupt");
    else if (p->need && lost > s->lay.M)
        snprintf(buf, n, "its level-3 group lacks %d of %d members at that epoch (parity for %d)", lost, k,
                 s->lay.M);
    else if (x[L3F_OK] == 1)
        snprintf(buf, n, "its level-3 group's parity does not cover that epoch (its own holds epoch %lld)",
                 (long long)x[L3F_EPOCH]);
    else
        snprintf(buf, n, "its level-3 parity is missing");
    return x[L3F_BAD] != 0;
}

/* A rebuilt image becomes this rank's container at the agreed epoch:
 * written under a temporary name, then renamed into place. */
static int write_rebuilt(const crpm_restart_io *io, const l3_image *img)
{
    char tmp[CRPM_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", io->path);
    int rc = crpm_unlink_quiet(tmp);
    crpm_container *c = NULL;
    if (rc == 0)
        rc = io->open(io->arg, tmp, 1, &c);
    for (int i = 0; rc == 0 && i < img->nregions; i++) {
        const crpm_array *a = &img->regions[i];
        rc = crpm_container_protect(c, a->id, a->ptr, a->count, a->type_code, a->elem_size);
    }
    crpm_stats_t st;
    if (rc == 0)
        rc = crpm_container_checkpoint(c, img->user_id, &st);
    if (rc == 0)
        rc = crpm_container_renumber(c, (uint64_t)io->epoch);
    if (c)
        crpm_container_close(c);
    if (rc == 0)
        rc = crpm_durable_rename(tmp, io->path);
    if (rc == 0)
        rc = io->open(io->arg, io->path, 0, io->own);
    return rc;
}

/* Survivors and parity go to the agreed epoch; which parity can serve is
 * agreed (use: nranks flags, the caller's). */
static int prepare_rebuild(crpm_level *lv, const crpm_restart_io *io, int lost, int64_t *use)
{
    const crpm_level_env *env = lv->env;
    int usable = 0, rc = CRPM_SUCCESS;
    if (lost) {
        rc = io->set_aside(io->arg);
        /* the identity every container of the run holds (the decision checked it) */
        if (io->plan->run)
            memcpy(io->run_id, io->plan->run, CRPM_RUN_ID_LEN);
    } else if ((int64_t)crpm_container_epoch(*io->own) == io->epoch + 1) {
        rc = crpm_container_rollback(*io->own);
    }
    if (rc == 0) {
        crpm_level_l3_attach(lv, lost ? NULL : *io->own);
        rc = l3_at(lv, (uint64_t)io->epoch, &usable);
    }
    rc = crpm_agree(env->comm, env->rank, rc, "crpm_init: preparing the level-3 rebuild");
    if (rc == 0)
        rc = crpm_agree(env->comm, env->rank, use ? 0 : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory"),
                        "crpm_init");
    int64_t u = usable;
    if (rc == 0) {
        int mrc = MPI_Allgather(&u, 1, MPI_INT64_T, use, 1, MPI_INT64_T, env->comm);
        if (mrc != MPI_SUCCESS)
            rc = crpm_mpi_fail(mrc, "crpm_init: MPI_Allgather");
    }
    return rc;
}

/* Containers lost with their nodes come back from their groups' survivors
 * and parity; survivors and parity go to the agreed epoch first. */
int l3_restore(crpm_level *lv, const crpm_restart_io *io)
{
    const crpm_level_env *env = lv->env;
    const int64_t *rebuild = io->plan->repair;
    int lost = rebuild[env->rank] != 0, nrebuild = io->plan->nrepair;
    int64_t *use = calloc((size_t)env->nranks, sizeof *use);
    int rc = prepare_rebuild(lv, io, lost, use);
    l3_image img = {0};
    uint64_t sent = 0;
    double t0 = crpm_now(), decode = 0;
    if (rc == 0)
        rc = crpm_agree(env->comm, env->rank, l3_rebuild(lv, rebuild, use, &img, &sent, &decode),
                        "crpm_init: rebuilding containers from level-3 parity");
    int wrc = rc == 0 && lost ? write_rebuilt(io, &img) : CRPM_SUCCESS;
    /* the survivors wait for the lost ranks' writes without polling */
    if (rc == 0)
        rc = crpm_agree_idle(env->comm, env->rank, wrc, "crpm_init: writing a container rebuilt from level-3 parity");
    if (rc == 0 && env->verbosity >= 2) {
        uint64_t bytes = 0;
        for (int i = 0; i < img.nregions; i++)
            bytes += crpm_array_bytes(&img.regions[i]);
        /* largest rebuilt container; slowest rank's times, in one reduction:
         * "decoded in" is the reconstruction alone (its moves, decodes and the
         * agreements between its phases), "in all" includes writing it */
        double mine[3] = {(double)bytes, crpm_now() - t0, decode}, mx[3];
        if (MPI_Allreduce(mine, mx, 3, MPI_DOUBLE, MPI_MAX, env->comm) == MPI_SUCCESS && env->rank == 0)
            printf("[crpm] restart: %d container%s rebuilt from level-3 parity at epoch %lld (%.2f MiB per lost rank: "
                   "decoded in %.3f s, %.2f GB/s; written in %.3f s in all)\n", nrebuild,
                   nrebuild == 1 ? "" : "s", (long long)io->epoch, mx[0] / 1048576.0, mx[2],
                   mx[2] > 0 ? mx[0] / mx[2] / 1e9 : 0.0, mx[1]);
        fflush(stdout);
    }
    l3_image_release(&img);
    free(use);
    return rc;
}

/* After a level-1 restart the parity is brought to the agreed epoch,
 * re-encoded where it is not (everywhere after a rebuild). */
int l3_resync(crpm_level *lv, const crpm_plan *p, int resumed, int64_t epoch)
{
    const crpm_level_env *env = lv->env;
    int files = 0;
    for (int r = 0; p->own && r < p->nranks; r++)
        files |= p->own[(size_t)r * L3F_N + L3F_OK] != 0;
    /* also when every parity container was lost: the containers record that the job had them */
    if (!resumed || !(p->in_use || files || p->nrepair))
        return CRPM_SUCCESS;
    int usable = 0;
    uint64_t sent = 0;
    int rc = p->nrepair ? CRPM_SUCCESS : l3_at(lv, (uint64_t)epoch, &usable);
    rc = crpm_agree(env->comm, env->rank, rc, "crpm_init: loading the parity");
    if (rc == 0)
        rc = crpm_agree(env->comm, env->rank, l3_sync(lv, p->nrepair != 0, &sent),
                        "crpm_init: bringing the parity up to date");
    return rc;
}

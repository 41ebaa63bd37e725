/* The plan of a restart on another number of ranks (reshape_plan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "crpm_types.h"
#include "reshape_plan.h"

void crpm_rs_plan_free(crpm_rs_plan *p)
{
    free(p->src);
    free(p->reader);
    p->src = p->reader = NULL;
    crpm_rs_plan_l3_free(p);
}

static int usable(const crpm_rs_file *x) { return x->rc == 0 && !x->bad && (x->kind != CRPM_RS_PARITY); }

/* x serves epoch e: it is at e, or one ahead with e still readable. */
static int serves(const crpm_rs_file *x, uint64_t e)
{
    return usable(x) && (x->epoch == e || (x->epoch == e + 1 && x->prev_ok));
}

static uint64_t uid_at(const crpm_rs_file *x, uint64_t e) { return x->epoch == e ? x->user_id : x->prev_user_id; }

/* One run of the job as the files show it. */
typedef struct gen {
    uint8_t run[16];
    int N;
    int64_t created, latest;
    int has_data, level;
} gen;

static int same_run(const uint8_t *a, const uint8_t *b) { return memcmp(a, b, 16) == 0; }

/* What run `g` holds: rank count, age, data, highest level. */
static void describe(const crpm_rs_facts *f, gen *g)
{
    g->N = 0;
    g->created = INT64_MAX;
    g->latest = 0;
    g->level = 1;
    uint64_t emin = UINT64_MAX, emax = 0;
    int conts = 0;
    for (int i = 0; i < f->nf; i++) {
        const crpm_rs_file *x = &f->f[i];
        if (x->rc != 0 || !same_run(x->run, g->run))
            continue;
        if (x->kind == CRPM_RS_PARITY) {
            g->level = 3;
            continue;
        }
        if (x->kind == CRPM_RS_COPY && g->level < 2)
            g->level = 2;
        if (x->bad)
            continue;
        g->N = x->nranks > g->N ? x->nranks : g->N;
        g->created = x->created_ns < g->created ? x->created_ns : g->created;
        if (x->epoch >= 1 && x->time_ns > g->latest && !x->rebuilt) /* a rebuild's time is not its data's */
            g->latest = x->time_ns;
        if (x->kind == CRPM_RS_CONT) {
            conts++;
            emin = x->epoch < emin ? x->epoch : emin;
            emax = x->epoch > emax ? x->epoch : emax;
        }
    }
    g->has_data = emax >= 1 || g->latest > 0;
    /* every container there and the newest checkpoint never completed on all:
     * the run holds nothing (as a level-1 restart of it would decide) */
    if (g->N > 0 && conts >= g->N && emin == 0 && emax <= 1) {
        int *seen = calloc((size_t)g->N, sizeof *seen), all = seen != NULL;
        for (int i = 0; seen && i < f->nf; i++)
            if (usable(&f->f[i]) && f->f[i].kind == CRPM_RS_CONT && same_run(f->f[i].run, g->run) &&
                f->f[i].q >= 0 && f->f[i].q < g->N)
                seen[f->f[i].q] = 1;
        for (int q = 0; seen && q < g->N; q++)
            all &= seen[q];
        if (all)
            g->has_data = 0;
        free(seen);
    }
}

/* For every old rank a file serving epoch e (containers first, and the one
 * on old rank q's own node in this job when there is one): 1; else 0, or
 * -1 when an old rank lacks one because the files found are damaged.  With
 * some_missing, old ranks without one get src -1 (for level 3 to rebuild). */
static int pick_sources(const crpm_rs_facts *f, const gen *g, uint64_t e, int *src, uint64_t *uid, char *why,
                        size_t wn, int some_missing)
{
    int missing = 0, listed = 0, damaged = 0;
    size_t used = 0;
    why[0] = '\0';
    for (int q = 0; q < g->N; q++) {
        int best = -1, best_score = -1;
        for (int i = 0; i < f->nf; i++) {
            const crpm_rs_file *x = &f->f[i];
            if (!same_run(x->run, g->run) || x->q != q || !serves(x, e))
                continue;
            int score = (x->kind == CRPM_RS_CONT) * 2 + (q < f->M && x->node == f->node_of[q]);
            if (score > best_score) {
                best = i;
                best_score = score;
            }
        }
        src[q] = best;
        for (int i = 0; best < 0 && i < f->nf; i++)
            damaged |= same_run(f->f[i].run, g->run) && f->f[i].q == q && f->f[i].bad;
        if (best < 0) {
            missing++;
            if (listed < 8 && used < wn)
                used += (size_t)snprintf(why + used, wn - used, "%s%d", listed++ ? ", " : "", q);
        }
    }
    if (missing > listed && used < wn)
        snprintf(why + used, wn - used, " and %d more", missing - listed);
    if (missing && !some_missing) {
        char ranks[160];
        snprintf(ranks, sizeof ranks, "%.150s", why);
        snprintf(why, wn, "no rank of this run can reach an intact container or partner copy of old rank(s) %s at "
                 "epoch %llu in its node's job directory%s", ranks, (unsigned long long)e,
                 damaged ? " (the ones found failed their checksums; see the messages above)" : "");
        return damaged ? -1 : 0;
    }
    int first = -1;
    for (int q = 0; q < g->N; q++) {
        if (src[q] < 0)
            continue;
        if (first < 0) {
            first = q;
            *uid = uid_at(&f->f[src[q]], e);
        } else if (uid_at(&f->f[src[q]], e) != *uid) {
            snprintf(why, wn, "old ranks %d and %d hold different checkpoints at epoch %llu", first, q,
                     (unsigned long long)e);
            return 0;
        }
    }
    return first >= 0;
}

/* Readers: old rank q itself when its node holds the file, else the least
 * loaded rank of that node (lowest rank on ties). */
static void assign_readers(const crpm_rs_facts *f, const gen *g, const int *src, int *reader)
{
    int *load = calloc((size_t)f->M, sizeof *load);
    for (int pass = 0; pass < 2; pass++)
        for (int q = 0; q < g->N; q++) {
            if (src[q] < 0) { /* rebuilt from level 3: its builder reads the result */
                reader[q] = -1;
                continue;
            }
            int node = f->f[src[q]].node;
            if (pass == 0) {
                reader[q] = q < f->M && f->node_of[q] == node ? q : -1;
                if (reader[q] >= 0 && load)
                    load[q]++;
                continue;
            }
            if (reader[q] >= 0)
                continue;
            int best = -1;
            for (int r = 0; r < f->M; r++)
                if (f->node_of[r] == node && (best < 0 || (load && load[r] < load[best])))
                    best = r;
            reader[q] = best;
            if (best >= 0 && load)
                load[best]++;
        }
    free(load);
}

/* Old ranks without a source rebuilt from level 3 at e0, or at e0 - 1 when
 * the parity had not reached e0 (as the level-3 restart tries): 1 with
 * p->epoch set; else 0 and why completed (*damaged: for want of units
 * that failed their checks). */
static int rebuild_l3(const crpm_rs_facts *f, const gen *g, uint64_t e0, int *src, uint64_t *uid, crpm_rs_plan *p,
                      char *why, size_t wn, int *damaged)
{
    char l3why[700] = "", tmp[300];
    size_t lu = 0;
    for (uint64_t e = e0; e >= 1 && e + 1 >= e0; e--) {
        if (pick_sources(f, g, e, src, uid, tmp, sizeof tmp, 1) <= 0)
            continue;
        int rc = crpm_rs_plan_l3(f, g->run, g->N, e, src, p, tmp, sizeof tmp);
        if (rc == 1) {
            p->epoch = e;
            return 1;
        }
        *damaged |= rc == -2;
        if (lu < sizeof l3why) /* why not at each epoch tried */
            lu += (size_t)snprintf(l3why + lu, sizeof l3why - lu, "%s%s", lu ? "; nor at the epoch before: " : "",
                                   rc == -1 ? "out of memory" : tmp);
    }
    size_t used = strlen(why);
    if (l3why[0] && used < wn)
        snprintf(why + used, wn - used, "; level-3 parity cannot rebuild them: %s", l3why);
    return 0;
}

static int newest_l4(const crpm_rs_facts *f)
{
    for (int i = 0; i < f->nl4; i++)
        if (!f->l4[i].bad)
            return i;
    return -1;
}

static int use_l4(const crpm_rs_facts *f, crpm_rs_plan *p, int i)
{
    if (f->ordinary_l4 && f->ordinary_seq > f->l4[i].seq)
        return p->kind = CRPM_RS_NONE; /* the ordinary choice is newer */
    p->kind = CRPM_RS_L4;
    p->l4 = i;
    p->N = f->l4[i].nranks;
    return p->kind;
}

int crpm_rs_plan_make(const crpm_rs_facts *f, crpm_rs_plan *p)
{
    memset(p, 0, sizeof *p);
    p->l4 = -1;
    /* the newest run that holds data */
    gen best = {{0}, 0, 0, 0, 0, 0};
    int have = 0;
    for (int i = 0; i < f->nf; i++) {
        if (f->f[i].rc != 0)
            continue;
        gen g;
        memcpy(g.run, f->f[i].run, 16);
        describe(f, &g);
        if (!g.has_data || g.N <= 0)
            continue;
        if (!have || g.created > best.created || (g.created == best.created && g.latest > best.latest)) {
            best = g;
            have = 1;
        }
    }
    int l4 = newest_l4(f);
    /* the newest data is this rank count's own: the ordinary restart has
     * decided (repair, fallback or level 4); only a level-4 file with a global
     * layout, read through its datasets, is this module's to serve */
    if (have && best.N == f->M)
        return l4 >= 0 && f->ordinary_l4 ? use_l4(f, p, l4) : (p->kind = CRPM_RS_NONE);
    if (!have && l4 < 0 && f->nl4 > 0 && !f->ordinary_l4) {
        /* only damaged level-4 files hold the checkpoint: never a fresh start */
        p->kind = CRPM_RS_ERROR;
        p->code = CRPM_ERR_CORRUPT;
        snprintf(p->msg, sizeof p->msg, "crpm_init: the only checkpoints of this job are level-4 files written by "
                 "another number of ranks, and every one of them failed its checksums (see the warnings above); "
                 "refusing to start fresh over them");
        return p->kind;
    }
    if (!have)
        return l4 >= 0 ? use_l4(f, p, l4) : (p->kind = CRPM_RS_NONE);
    int *src = malloc(sizeof *src * (size_t)best.N), *reader = malloc(sizeof *reader * (size_t)best.N);
    if (!src || !reader) {
        free(src);
        free(reader);
        p->kind = CRPM_RS_ERROR;
        p->code = CRPM_ERR_NOMEM;
        snprintf(p->msg, sizeof p->msg, "crpm_init: out of memory planning a restart on another rank count");
        return p->kind;
    }
    /* the epoch: the lowest of the ranks' newest (ranks one ahead serve it
     * with their previous one), as a level-1 restart decides */
    uint64_t e0 = UINT64_MAX;
    for (int q = 0; q < best.N; q++) {
        uint64_t mx = 0;
        for (int i = 0; i < f->nf; i++)
            if (usable(&f->f[i]) && same_run(f->f[i].run, best.run) && f->f[i].q == q && f->f[i].epoch > mx)
                mx = f->f[i].epoch;
        if (mx)
            e0 = mx < e0 ? mx : e0;
    }
    char why[1200] = "";
    uint64_t uid = 0;
    int ok = e0 != UINT64_MAX ? pick_sources(f, &best, e0, src, &uid, why, sizeof why, 0) : 0;
    if (ok == 0 && !why[0])
        ok = pick_sources(f, &best, e0 != UINT64_MAX ? e0 : 1, src, &uid, why, sizeof why, 0);
    int damaged = ok < 0;
    ok = ok > 0;
    if (ok)
        p->epoch = e0;
    else if (best.level == 3 && e0 != UINT64_MAX &&
             (ok = rebuild_l3(f, &best, e0, src, &uid, p, why, sizeof why, &damaged)))
        damaged = 0;
    if (ok && !(l4 >= 0 && f->l4[l4].time_ns > best.latest)) {
        p->kind = CRPM_RS_L1;
        p->N = best.N;
        p->user_id = uid;
        memcpy(p->run, best.run, 16);
        p->held_level = best.level;
        p->src = src;
        p->reader = reader;
        assign_readers(f, &best, src, reader);
        for (int q = 0; q < best.N && p->build; q++)
            if (p->build[q] >= 0)
                reader[q] = p->build[q];
        return p->kind;
    }
    free(src);
    free(reader);
    crpm_rs_plan_l3_free(p);
    if (l4 >= 0)
        return use_l4(f, p, l4);
    if (f->ordinary_l4)
        return p->kind = CRPM_RS_NONE;
    p->kind = CRPM_RS_ERROR;
    p->code = damaged ? CRPM_ERR_CORRUPT : CRPM_ERR_MISSING;
    p->N = best.N;
    int len = snprintf(p->msg, sizeof p->msg,
             "crpm_init: the newest checkpoint was written by %d ranks and cannot be restored on %d: %s; and no "
             "level-4 file with a global layout to fall back to (a restart on another number of ranks reads the "
             "containers on nodes of the new job, their partner copies, or level 4)", best.N, f->M, why);
    (void)len; /* a cause too long for the message is cut; the code says what failed */
    return p->kind;
}

/* Restart decision (decide.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "decide.h"
#include "error.h"

static const int64_t *row(const crpm_restart_facts *f, int r) { return f->rank + (size_t)r * CRPM_F_N; }

/* Level 1 alone: what the containers allow. */
static void judge_l1(const crpm_restart_facts *f, crpm_verdict *v)
{
    int mismatch = 0, all_zero = 1;
    v->emin = INT64_MAX;
    v->emax = -1;
    v->extra = -1;
    for (int r = 0; r < f->nranks; r++) {
        const int64_t *x = row(f, r);
        v->n_exist += x[CRPM_F_EXISTS] != 0;
        v->n_fail += x[CRPM_F_RC] < 0;
        mismatch |= x[CRPM_F_NRANKS] != 0;
        if (x[CRPM_F_EXTRA] > v->extra)
            v->extra = (int)x[CRPM_F_EXTRA];
        if (x[CRPM_F_EXISTS] && x[CRPM_F_RC] == 0) {
            all_zero &= x[CRPM_F_EPOCH] == 0;
            v->emin = x[CRPM_F_EPOCH] < v->emin ? x[CRPM_F_EPOCH] : v->emin;
            v->emax = x[CRPM_F_EPOCH] > v->emax ? x[CRPM_F_EPOCH] : v->emax;
        }
    }
    if (v->emax < 0)
        v->emin = -1;
    /* A rank one epoch ahead must still hold the epoch the others are at. */
    for (int r = 0; r < f->nranks; r++) {
        const int64_t *x = row(f, r);
        if (v->n_exist == f->nranks && v->n_fail == 0 && x[CRPM_F_EPOCH] == v->emin + 1 && !x[CRPM_F_PREV])
            v->bad_prev = 1;
    }
    /* Containers holding data must all come from one run of the job. */
    int mixed = 0, first = -1;
    for (int r = 0; r < f->nranks; r++) {
        const int64_t *x = row(f, r);
        if (!x[CRPM_F_EXISTS] || x[CRPM_F_RC] < 0 || x[CRPM_F_EPOCH] == 0)
            continue;
        if (first < 0)
            first = r;
        else if (x[CRPM_F_RUN0] != row(f, first)[CRPM_F_RUN0] || x[CRPM_F_RUN1] != row(f, first)[CRPM_F_RUN1])
            mixed = 1;
    }
    if (mismatch || v->extra >= 0)
        v->l1 = CRPM_L1S_NRANKS;
    else if (mixed)
        v->l1 = CRPM_L1S_MIXED;
    else if (v->n_exist == 0)
        v->l1 = CRPM_L1S_FRESH;
    else if (v->n_fail > 0)
        v->l1 = CRPM_L1S_OPEN;
    else if (v->n_exist < f->nranks)
        v->l1 = all_zero ? CRPM_L1S_FRESH : CRPM_L1S_MISSING; /* empty containers hold no data */
    else if (v->emax - v->emin > 1 || (v->bad_prev && v->emin > 0))
        v->l1 = CRPM_L1S_EPOCH;
    else
        v->l1 = v->emin == 0 ? CRPM_L1S_FRESH : CRPM_L1S_USABLE;
    if (v->l1 == CRPM_L1S_USABLE && f->l1_rejected)
        v->l1 = CRPM_L1S_EPOCH;
    /* Only damage or loss lets another level take over; a configuration
     * that does not match the containers (geometry, job, rank count,
     * format) is a mistake to fix, whatever level 4 holds. */
    int damage_only = 1, corrupt = 0, lost_copy = 0, bad = 0;
    for (int r = 0; r < f->nranks; r++) {
        const int64_t *x = row(f, r);
        if (x[CRPM_F_RC] < 0 && !crpm_fact_damage(x[CRPM_F_RC]))
            damage_only = 0;
        corrupt |= x[CRPM_F_RC] == CRPM_ERR_CORRUPT || x[CRPM_F_PAR_BAD];
        lost_copy |= !x[CRPM_F_EXISTS] && x[CRPM_F_REP_BAD];
        bad |= x[CRPM_F_BAD] != 0; /* also when a patch replaced it by a copy of another epoch */
    }
    /* damage the checksums found made level 1 unusable (a corrupt container,
     * or a loss that a corrupt partner copy, parity or level-4 file could
     * not make good, or a corrupt container whose only replacement is of an
     * epoch the others cannot reach): one error on every rank naming all of it */
    if ((v->l1 == CRPM_L1S_OPEN && damage_only && corrupt) ||
        (v->l1 == CRPM_L1S_MISSING && (corrupt || lost_copy || bad || f->l4_damaged)) ||
        (v->l1 == CRPM_L1S_EPOCH && bad))
        v->l1 = CRPM_L1S_CORRUPT;
    v->damaged = v->l1 == CRPM_L1S_MISSING || v->l1 == CRPM_L1S_EPOCH || v->l1 == CRPM_L1S_CORRUPT ||
                 (v->l1 == CRPM_L1S_OPEN && damage_only);
}

/* method = full: the newest id every rank has a file of.  Each rank keeps
 * its previous file until all have written the next one, so the two newest
 * ids of every rank always contain a common one. */
static void judge_full(const crpm_restart_facts *f, crpm_verdict *v)
{
    int64_t best = -1;
    int any = 0;
    for (int k = 0; k < 2 && f->nranks > 0; k++) {
        int64_t cand = row(f, 0)[CRPM_F_FULL0 + k];
        int everywhere = cand >= 0;
        for (int r = 0; r < f->nranks && everywhere; r++)
            everywhere = row(f, r)[CRPM_F_FULL0] == cand || row(f, r)[CRPM_F_FULL1] == cand;
        if (everywhere && cand > best)
            best = cand;
    }
    for (int r = 0; r < f->nranks; r++)
        any |= row(f, r)[CRPM_F_FULL0] >= 0;
    if (best >= 0) {
        v->kind = CRPM_V_FULL;
        v->full_id = best;
    } else if (any) {
        v->kind = CRPM_V_ERROR;
        v->code = CRPM_ERR_EPOCH;
        v->l1 = CRPM_L1S_FULL_NOCOMMON;
    }
}

crpm_verdict crpm_decide_restart(const crpm_restart_facts *f)
{
    crpm_verdict v = {0};
    v.full_id = -1;
    judge_l1(f, &v);
    if (v.l1 == CRPM_L1S_USABLE) {
        v.kind = CRPM_V_L1;
        v.epoch = v.emin;
        if (f->repaired && f->top_epoch > v.epoch) {
            /* a repair lands on an older epoch: a level-4 file of the newest one serves it whole */
            if (!f->l4_known) {
                v.kind = CRPM_V_ASK_L4;
                return v;
            }
            if (f->l4_found && f->l4_epoch == f->top_epoch && f->l4_id == f->top_uid) {
                v.kind = CRPM_V_L4;
                v.set_aside = 1;
            }
        }
    } else if (v.l1 != CRPM_L1S_FRESH && !v.damaged) {
        v.kind = CRPM_V_ERROR; /* a mismatch: below */
    } else if (!f->l4_known) {
        /* A level-4 checkpoint takes precedence over a fresh start and over damage. */
        v.kind = CRPM_V_ASK_L4;
        return v;
    } else if (f->l4_found) {
        v.kind = CRPM_V_L4;
        v.set_aside = v.damaged;
    } else if (v.l1 == CRPM_L1S_FRESH && !f->l4_damaged) {
        v.kind = CRPM_V_FRESH;
    } else if (f->unrecoverable_fresh) {
        v.kind = CRPM_V_FRESH; /* asked for: the unusable checkpoints are kept aside */
        v.set_aside = 1;
    } else {
        v.kind = CRPM_V_ERROR;
        if (v.l1 == CRPM_L1S_FRESH) {
            v.l1 = CRPM_L1S_L4_CORRUPT;
            v.code = CRPM_ERR_CORRUPT;
            return v;
        }
    }
    if (v.kind == CRPM_V_ERROR) {
        v.kind = CRPM_V_ERROR;
        v.code = v.l1 == CRPM_L1S_NRANKS    ? CRPM_ERR_NRANKS
                 : v.l1 == CRPM_L1S_MIXED   ? CRPM_ERR_IDENTITY
                 : v.l1 == CRPM_L1S_MISSING ? CRPM_ERR_MISSING
                 : v.l1 == CRPM_L1S_CORRUPT ? CRPM_ERR_CORRUPT
                 : v.l1 == CRPM_L1S_OPEN    ? CRPM_ERR_REMOTE /* refined per rank in crpm_verdict_error */
                                            : CRPM_ERR_EPOCH;
        return v;
    }
    if (f->method == CRPM_METHOD_FULL) {
        if (v.kind != CRPM_V_FRESH) {
            v.kind = CRPM_V_ERROR;
            v.code = CRPM_ERR_CONFIG;
            v.l1 = CRPM_L1S_FULL_ON_DIFF;
        } else {
            judge_full(f, &v);
        }
    }
    return v;
}

/* "1, 4, 7" (at most 8 listed) for the ranks whose fact `field` passes. */
static void fmt_ranks(char *buf, size_t n, const crpm_restart_facts *f, int field, int want)
{
    size_t used = 0;
    int listed = 0, total = 0;
    buf[0] = '\0';
    for (int r = 0; r < f->nranks; r++) {
        int64_t x = row(f, r)[field];
        int pass = want == 1 ? x != 0 : want == 0 ? x == 0 : x < 0;
        if (!pass)
            continue;
        total++;
        if (listed < 8 && used < n) {
            used += (size_t)snprintf(buf + used, n - used, "%s%d", listed ? ", " : "", r);
            listed++;
        }
    }
    if (total > listed && used < n)
        snprintf(buf + used, n - used, " and %d more", total - listed);
}

/* "1, 4, 7" (at most 8 listed) for the ranks whose row passes `pred`. */
static void fmt_if(char *buf, size_t n, const crpm_restart_facts *f, int (*pred)(const int64_t *))
{
    size_t used = 0;
    int listed = 0, total = 0;
    buf[0] = '\0';
    for (int r = 0; r < f->nranks; r++) {
        if (!pred(row(f, r)))
            continue;
        total++;
        if (listed < 8 && used < n) {
            used += (size_t)snprintf(buf + used, n - used, "%s%d", listed ? ", " : "", r);
            listed++;
        }
    }
    if (total > listed && used < n)
        snprintf(buf + used, n - used, " and %d more", total - listed);
}

static int is_corrupt(const int64_t *x)
{
    return x[CRPM_F_BAD] || (x[CRPM_F_EXISTS] && x[CRPM_F_RC] == CRPM_ERR_CORRUPT);
}
static int is_missing(const int64_t *x) { return !x[CRPM_F_EXISTS]; }
static int is_unreadable(const int64_t *x)
{
    return x[CRPM_F_RC] < 0 && x[CRPM_F_RC] != CRPM_ERR_CORRUPT && !x[CRPM_F_BAD];
}
static int rep_bad(const int64_t *x) { return x[CRPM_F_REP_BAD] != 0; }
static int par_bad(const int64_t *x) { return x[CRPM_F_PAR_BAD] != 0; }
static int prev_bad(const int64_t *x) { return x[CRPM_F_PREV_BAD] != 0; }

/* Appends "; <what> <ranks>" when some rank passes pred. */
static size_t add_part(char *buf, size_t n, size_t used, const crpm_restart_facts *f, int (*pred)(const int64_t *),
                       const char *fmt)
{
    char ranks[128];
    fmt_if(ranks, sizeof ranks, f, pred);
    if (!ranks[0] || used >= n)
        return used;
    used += (size_t)snprintf(buf + used, n - used, "%s", used ? "; " : "");
    if (used < n)
        used += (size_t)snprintf(buf + used, n - used, fmt, ranks);
    return used;
}

/* Damage no redundancy could repair: the same text on every rank, naming
 * what is damaged or lost; the damaged rank adds its own file and detail. */
static int damage_error(const crpm_restart_facts *f, int me, const char *own_msg, const char *job_dir,
                        const char *job_name)
{
    char what[1024] = "", fmt[256];
    size_t used = 0;
    snprintf(fmt, sizeof fmt, "the container of rank(s) %%s (rank-<r>.crpm in its node's job directory, here %s) is "
             "corrupt", job_dir);
    used = add_part(what, sizeof what, used, f, is_corrupt, fmt);
    used = add_part(what, sizeof what, used, f, is_missing, "the container of rank(s) %s is missing");
    used = add_part(what, sizeof what, used, f, is_unreadable, "the container of rank(s) %s cannot be read");
    used = add_part(what, sizeof what, used, f, rep_bad, "the level-2 partner copy of rank(s) %s is corrupt");
    used = add_part(what, sizeof what, used, f, par_bad, "the level-3 parity container of rank(s) %s is corrupt");
    used = add_part(what, sizeof what, used, f, prev_bad, "the previous epoch of rank(s) %s is corrupt too");
    if (f->l4_damaged && used < sizeof what)
        snprintf(what + used, sizeof what - used, "%sthe level-4 files are damaged", used ? "; " : "");
    const int64_t *mine = row(f, me);
    int own = (mine[CRPM_F_RC] < 0 || mine[CRPM_F_BAD]) && own_msg && own_msg[0];
    return crpm_error(CRPM_ERR_CORRUPT,
                      "crpm_init: job '%s' cannot restart: %s; no intact partner copy, level-3 parity or level-4 "
                      "checkpoint makes good what is damaged or lost at an epoch every rank holds; no file was "
                      "changed or removed%s%s",
                      job_name, what, own ? "; this rank: " : "", own ? own_msg : "");
}

int crpm_verdict_error(const crpm_restart_facts *f, const crpm_verdict *v, int me, const char *own_msg,
                       const char *job_dir, const char *job_name)
{
    char ranks[256];
    const int64_t *mine = row(f, me);
    switch (v->l1) {
    case CRPM_L1S_NRANKS:
        if (v->extra >= 0)
            return crpm_error(CRPM_ERR_NRANKS,
                              "crpm_init: %s/rank-%d.crpm exists: the checkpoint of job '%s' was written by more "
                              "than the %d ranks of this run",
                              job_dir, v->extra, job_name, f->nranks);
        fmt_ranks(ranks, sizeof ranks, f, CRPM_F_NRANKS, 1);
        return crpm_error(CRPM_ERR_NRANKS,
                          "crpm_init: the containers of rank(s) %s in %s were written by a run with another "
                          "number of ranks (this run has %d)%s%s",
                          ranks, job_dir, f->nranks, mine[CRPM_F_NRANKS] ? ": " : "",
                          mine[CRPM_F_NRANKS] ? own_msg : "");
    case CRPM_L1S_MIXED: {
        int first = 0, other = -1;
        while (row(f, first)[CRPM_F_EPOCH] == 0 || row(f, first)[CRPM_F_RC] < 0 || !row(f, first)[CRPM_F_EXISTS])
            first++;
        for (int r = first + 1; r < f->nranks && other < 0; r++)
            if (row(f, r)[CRPM_F_EXISTS] && row(f, r)[CRPM_F_RC] == 0 && row(f, r)[CRPM_F_EPOCH] != 0 &&
                (row(f, r)[CRPM_F_RUN0] != row(f, first)[CRPM_F_RUN0] ||
                 row(f, r)[CRPM_F_RUN1] != row(f, first)[CRPM_F_RUN1]))
                other = r;
        return crpm_error(CRPM_ERR_IDENTITY,
                          "crpm_init: the containers in %s come from different runs of job '%s' (rank %d's and "
                          "rank %d's differ): a container was replaced by one of another run; refusing to mix them",
                          job_dir, job_name, first, other);
    }
    case CRPM_L1S_MISSING: {
        int l2 = 0;
        for (int r = 0; r < f->nranks; r++)
            l2 |= row(f, r)[CRPM_F_REP_FILE] != 0;
        fmt_ranks(ranks, sizeof ranks, f, CRPM_F_EXISTS, 0);
        return crpm_error(CRPM_ERR_MISSING,
                          "crpm_init: job '%s' has checkpoints in %s but the container of rank(s) %s is missing%s; "
                          "refusing to start fresh over them; no file was changed or removed (if a node is back or "
                          "the configuration differs from the run that wrote them, relaunch as that run; to start "
                          "anew, set on_unrecoverable = fresh in [advanced], which keeps them aside, or use another "
                          "job_name)",
                          job_name, job_dir, ranks,
                          l2 ? " and so is its level-2 partner copy (a node and its partner node were lost; no "
                               "level-4 checkpoint to fall back to)" : "");
    }
    case CRPM_L1S_OPEN: {
        if (mine[CRPM_F_RC] < 0)
            return crpm_error((int)mine[CRPM_F_RC], "crpm_init: cannot open %s/rank-%d.crpm: %s", job_dir, me,
                              own_msg);
        fmt_ranks(ranks, sizeof ranks, f, CRPM_F_RC, -1);
        int first = 0;
        while (row(f, first)[CRPM_F_RC] == 0)
            first++;
        return crpm_error(CRPM_ERR_REMOTE,
                          "crpm_init: the container of rank(s) %s in %s cannot be opened (rank %d: %s)", ranks,
                          job_dir, first, crpm_strerror((int)row(f, first)[CRPM_F_RC]));
    }
    case CRPM_L1S_CORRUPT:
        return damage_error(f, me, own_msg, job_dir, job_name);
    case CRPM_L1S_FULL_ON_DIFF:
        return crpm_error(CRPM_ERR_CONFIG,
                          "crpm_init: job '%s' has differential checkpoints; method = full cannot restart from them",
                          job_name);
    case CRPM_L1S_FULL_NOCOMMON:
        return crpm_error(CRPM_ERR_EPOCH, "crpm_init: the ranks' full checkpoint files have no common id");
    case CRPM_L1S_L4_CORRUPT:
        return crpm_error(CRPM_ERR_CORRUPT,
                          "crpm_init: the only checkpoint of job '%s' is a level-4 file that is corrupt (%s); "
                          "refusing to start fresh (set on_unrecoverable = fresh in [advanced] to start anew)",
                          job_name, own_msg && own_msg[0] ? own_msg : "see the warnings above");
    default:
        if (own_msg && own_msg[0] && v->emax - v->emin <= 1 && !v->bad_prev)
            return crpm_error(CRPM_ERR_EPOCH, "%s", own_msg);
        return crpm_error(CRPM_ERR_EPOCH,
                          "crpm_init: the containers in %s hold epochs %lld to %lld%s: they cannot be reconciled",
                          job_dir, (long long)v->emin, (long long)v->emax,
                          v->bad_prev ? " and a rank ahead has no previous epoch" : "");
    }
}

/* A container whose metadata opened: intact, or with damaged data only. */
static int described(const int64_t *x) { return x[CRPM_F_EXISTS] && (x[CRPM_F_RC] == 0 || x[CRPM_F_BAD]); }

void crpm_decide_top(const int64_t *rows, int nranks, int64_t *epoch, int64_t *uid)
{
    *epoch = *uid = -1;
    for (int r = 0; r < nranks; r++) {
        const int64_t *x = rows + (size_t)r * CRPM_F_N;
        if (described(x) && x[CRPM_F_EPOCH] > *epoch) {
            *epoch = x[CRPM_F_EPOCH];
            *uid = x[CRPM_F_UID];
        }
    }
}

int crpm_decide_prev_patch(int64_t *rows, int nranks)
{
    int n = 0;
    for (int r = 0; r < nranks; r++) {
        const int64_t *x = rows + (size_t)r * CRPM_F_N;
        n += x[CRPM_F_BAD] && x[CRPM_F_RC] == CRPM_ERR_CORRUPT && x[CRPM_F_PREV] && x[CRPM_F_EPOCH] >= 2;
    }
    if (!n)
        return 0;
    int64_t *t = malloc(sizeof *t * CRPM_F_N * (size_t)nranks);
    if (!t)
        return 0; /* no fallback: the damage is reported */
    memcpy(t, rows, sizeof *t * CRPM_F_N * (size_t)nranks);
    for (int r = 0; r < nranks; r++) {
        int64_t *x = t + (size_t)r * CRPM_F_N;
        if (!(x[CRPM_F_BAD] && x[CRPM_F_RC] == CRPM_ERR_CORRUPT && x[CRPM_F_PREV] && x[CRPM_F_EPOCH] >= 2))
            continue;
        x[CRPM_F_RC] = 0;
        x[CRPM_F_BAD] = 0;
        x[CRPM_F_EPOCH]--;
        x[CRPM_F_PREV] = 0;
    }
    crpm_restart_facts tf = {.nranks = nranks, .rank = t};
    crpm_verdict tv = {0};
    judge_l1(&tf, &tv);
    /* every rank at the damaged ranks' previous epoch or one ahead of it with that epoch intact */
    if (tv.l1 == CRPM_L1S_USABLE)
        memcpy(rows, t, sizeof *t * CRPM_F_N * (size_t)nranks);
    free(t);
    return tv.l1 == CRPM_L1S_USABLE ? n : 0;
}

/* Restart decision (decide.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "decide.h"
#include "error.h"

static const int64_t *row(const crpm_restart_facts *f, int r) { return f->rank + (size_t)r * CRPM_F_N; }

/* Whether some level calls what it holds of rank r damaged. */
static int src_damaged(const crpm_restart_facts *f, int r)
{
    char buf[256];
    int bad = 0;
    for (int i = 0; i < f->nsrc; i++)
        bad |= f->src[i].describe && f->src[i].describe(f->src[i].arg, r, NULL, buf, sizeof buf);
    return bad;
}

/* The containers alone: what they allow, and why not (for the error text). */
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
    int mixed = 0;
    const int64_t *first = crpm_fact_reference(f->rank, f->nranks);
    for (int r = 0; first && r < f->nranks; r++) {
        const int64_t *x = row(f, r);
        if (x[CRPM_F_EXISTS] && x[CRPM_F_RC] == 0 && x[CRPM_F_EPOCH] != 0 &&
            (x[CRPM_F_RUN0] != first[CRPM_F_RUN0] || x[CRPM_F_RUN1] != first[CRPM_F_RUN1]))
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
     * format version) is a mistake to fix, whatever the levels hold. */
    int damage_only = 1, corrupt = 0, lost_copy = 0, bad = 0;
    for (int r = 0; r < f->nranks; r++) {
        const int64_t *x = row(f, r);
        int srcbad = src_damaged(f, r);
        if (x[CRPM_F_RC] < 0 && !crpm_fact_damage(x[CRPM_F_RC]))
            damage_only = 0;
        corrupt |= x[CRPM_F_RC] == CRPM_ERR_CORRUPT || x[CRPM_F_RC] == CRPM_ERR_FORMAT || srcbad;
        lost_copy |= !x[CRPM_F_EXISTS] && srcbad;
        bad |= x[CRPM_F_BAD] != 0;
    }
    /* damage the checksums found made the containers unusable (a corrupt
     * container, or a loss that a corrupt copy, parity or level-4 file could
     * not make good): one error on every rank naming all of it */
    if ((v->l1 == CRPM_L1S_OPEN && damage_only && corrupt) ||
        (v->l1 == CRPM_L1S_MISSING && (corrupt || lost_copy || bad || f->found_damaged)) ||
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

/* A container whose metadata opened: intact, or with damaged data only. */
static int described(const int64_t *x) { return x[CRPM_F_EXISTS] && (x[CRPM_F_RC] == 0 || x[CRPM_F_BAD]); }

static int desc_epoch(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The candidate epochs, newest first, without repeats: what the containers
 * and the sources hold.  Returns how many (*out: malloc'd). */
static int candidates(const crpm_restart_facts *f, int64_t **out)
{
    int cap = 2 * f->nranks + 8, n = 0;
    for (int i = 0; i < f->nsrc; i++)
        cap += 2 * f->nranks + 8;
    int64_t *e = malloc(sizeof *e * (size_t)cap);
    if (!e) {
        *out = NULL;
        return 0;
    }
    for (int r = 0; r < f->nranks; r++) {
        const int64_t *x = row(f, r);
        if (!described(x) || x[CRPM_F_NRANKS])
            continue;
        e[n++] = x[CRPM_F_EPOCH];
        if (x[CRPM_F_PREV])
            e[n++] = x[CRPM_F_EPOCH] - 1;
    }
    for (int i = 0; i < f->nsrc; i++)
        if (f->src[i].offers)
            n += f->src[i].offers(f->src[i].arg, e + n, cap - n);
    qsort(e, (size_t)n, sizeof *e, desc_epoch);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (e[i] >= 1 && (k == 0 || e[k - 1] != e[i]))
            e[k++] = e[i];
    *out = e;
    return k;
}

/* Whether every rank brings `epoch` back, from its container or a source
 * (their repair flags then say which); need: scratch, nranks flags. */
static int serves(const crpm_restart_facts *f, const int64_t *run, int64_t epoch, int64_t *need)
{
    int left = 0;
    for (int r = 0; r < f->nranks; r++) {
        need[r] = !crpm_fact_holds(row(f, r), run, epoch);
        left += (int)need[r];
    }
    for (int i = 0; i < f->nsrc; i++) {
        crpm_decide_src *s = &f->src[i];
        memset(s->repair, 0, sizeof *s->repair * (size_t)f->nranks);
        s->nrepair = 0;
        if (!left || !s->can)
            continue;
        s->can(s->arg, epoch, need, run, s->repair);
        for (int r = 0; r < f->nranks; r++)
            if (need[r] && s->repair[r]) {
                need[r] = 0;
                s->nrepair++;
                left--;
            } else {
                s->repair[r] = 0;
            }
    }
    return left == 0;
}

static void clear_repairs(const crpm_restart_facts *f)
{
    for (int i = 0; i < f->nsrc; i++) {
        memset(f->src[i].repair, 0, sizeof *f->src[i].repair * (size_t)f->nranks);
        f->src[i].nrepair = 0;
    }
}

/* The newest epoch every rank brings back (-1: none; want: the newest
 * candidate).  The sources' repair flags describe it. */
static int64_t search(const crpm_restart_facts *f, int64_t *want)
{
    int64_t run[2], *eps = NULL, best = -1;
    int known = crpm_fact_run(f->rank, f->nranks, run);
    int n = candidates(f, &eps);
    int64_t *need = malloc(sizeof *need * (size_t)(f->nranks + 1));
    *want = n > 0 ? eps[0] : -1;
    for (int i = 0; need && i < n && best < 0; i++)
        if (serves(f, known ? run : NULL, eps[i], need))
            best = eps[i];
    if (best < 0)
        clear_repairs(f);
    free(need);
    free(eps);
    return best;
}

/* A checkpoint a level found of its own replaces the containers' epoch
 * only when it is newer and of this run (a file of an earlier run may
 * carry any epoch): it records the containers' run, or, for a file that
 * records none, some rank committed its epoch with its checkpoint id. */
static int found_newer(const crpm_restart_facts *f, int64_t epoch)
{
    if (!f->found || f->found_epoch <= epoch)
        return 0;
    if (f->found_has_run) {
        for (int r = 0; r < f->nranks; r++) {
            const int64_t *x = row(f, r);
            if (described(x))
                return x[CRPM_F_RUN0] == f->found_run[0] && x[CRPM_F_RUN1] == f->found_run[1];
        }
        return 0;
    }
    for (int r = 0; r < f->nranks; r++) {
        const int64_t *x = row(f, r);
        if (described(x) && x[CRPM_F_EPOCH] == f->found_epoch && x[CRPM_F_UID] == f->found_id)
            return 1;
    }
    return 0;
}

crpm_verdict crpm_decide_restart(const crpm_restart_facts *f)
{
    crpm_verdict v = {0};
    v.full_id = -1;
    v.top = v.want = -1;
    v.epoch = -1;
    judge_l1(f, &v);
    for (int r = 0; r < f->nranks; r++)
        if (described(row(f, r)) && row(f, r)[CRPM_F_EPOCH] > v.top)
            v.top = row(f, r)[CRPM_F_EPOCH];
    int mistake = v.l1 == CRPM_L1S_NRANKS || v.l1 == CRPM_L1S_MIXED || (v.l1 == CRPM_L1S_OPEN && !v.damaged);
    int64_t best = -1;
    if (!mistake && !f->l1_rejected)
        best = search(f, &v.want);
    else
        clear_repairs(f);
    if (best >= 1) {
        int64_t held = INT64_MAX; /* the oldest epoch a rank committed intact */
        for (int r = 0; r < f->nranks; r++)
            if (row(f, r)[CRPM_F_EXISTS] && row(f, r)[CRPM_F_RC] == 0 && row(f, r)[CRPM_F_EPOCH] < held)
                held = row(f, r)[CRPM_F_EPOCH];
        v.kind = CRPM_V_L1;
        v.epoch = best;
        for (int i = 0; i < f->nsrc; i++)
            v.repaired += f->src[i].nrepair;
        v.fallback = held != INT64_MAX && best < held;
        v.l1 = CRPM_L1S_USABLE;
        /* Something newer may have been committed by every rank, then lost on
         * some: a level's own checkpoint may hold it.  Not when the only
         * ranks beyond `best` are ranks one epoch ahead that still hold it
         * (a checkpoint that not every rank committed). */
        if (v.repaired > 0 || v.fallback || best < v.top - 1) {
            if (!f->asked) {
                v.kind = CRPM_V_ASK;
                return v;
            }
            if (found_newer(f, best)) {
                clear_repairs(f);
                v.kind = CRPM_V_FOUND;
                v.set_aside = 1;
                v.repaired = 0;
            }
        }
    } else if (mistake) {
        v.kind = CRPM_V_ERROR; /* below */
    } else if (!f->asked) {
        /* A level's own checkpoint takes precedence over a fresh start and over damage. */
        v.kind = CRPM_V_ASK;
        return v;
    } else if (f->found) {
        v.kind = CRPM_V_FOUND;
        v.set_aside = v.damaged || v.l1 != CRPM_L1S_FRESH;
    } else if (v.l1 == CRPM_L1S_FRESH && !f->found_damaged &&
               (v.want < 0 || (v.n_exist == f->nranks && v.n_fail == 0))) {
        v.kind = CRPM_V_FRESH; /* no data anywhere, or only a rank ahead of an empty job */
    } else if (f->unrecoverable_fresh) {
        v.kind = CRPM_V_FRESH; /* asked for: the unusable checkpoints are kept aside */
        v.set_aside = 1;
    } else {
        v.kind = CRPM_V_ERROR;
        if (v.l1 == CRPM_L1S_FRESH && v.want < 0) {
            v.l1 = CRPM_L1S_FOUND_CORRUPT;
            v.code = CRPM_ERR_CORRUPT;
            return v;
        }
        if (v.l1 == CRPM_L1S_USABLE)
            v.l1 = CRPM_L1S_EPOCH; /* the containers agree but cannot serve (rejected) */
        else if (v.l1 == CRPM_L1S_FRESH)
            v.l1 = CRPM_L1S_MISSING; /* no container holds data, but some level does */
    }
    if (v.kind == CRPM_V_ERROR) {
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

/* Appends "<sep>ranks" for the ranks pass(r) selects, at most 8 listed;
 * returns how many there are. */
static int list_ranks(char *buf, size_t n, const crpm_restart_facts *f, int (*pass)(const crpm_restart_facts *, int,
                                                                                    const void *),
                      const void *arg)
{
    size_t used = 0;
    int listed = 0, total = 0;
    buf[0] = '\0';
    for (int r = 0; r < f->nranks; r++) {
        if (!pass(f, r, arg))
            continue;
        total++;
        if (listed < 8 && used < n) {
            used += (size_t)snprintf(buf + used, n - used, "%s%d", listed ? ", " : "", r);
            listed++;
        }
    }
    if (total > listed && used < n)
        snprintf(buf + used, n - used, " and %d more", total - listed);
    return total;
}

/* Appends " (<file>, <file>)" for the first 4 ranks pass(r) selects, from
 * paths (nranks entries, any NULL: that rank's file name alone). */
static size_t add_files(char *buf, size_t n, size_t used, const crpm_restart_facts *f, const char *const *paths,
                        int (*pass)(const crpm_restart_facts *, int, const void *), const void *arg)
{
    int k = 0;
    for (int r = 0; r < f->nranks && k < 4 && used < n; r++) {
        if (!pass(f, r, arg))
            continue;
        if (paths && paths[r])
            used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? ", " : " (", paths[r]);
        else
            used += (size_t)snprintf(buf + used, n - used, "%srank-%d.crpm", k ? ", " : " (", r);
        k++;
    }
    if (k && used < n)
        used += (size_t)snprintf(buf + used, n - used, ")");
    return used < n ? used : n;
}

static int is_corrupt(const crpm_restart_facts *f, int r, const void *a)
{
    (void)a;
    const int64_t *x = row(f, r);
    return x[CRPM_F_BAD] || (x[CRPM_F_EXISTS] && (x[CRPM_F_RC] == CRPM_ERR_CORRUPT || x[CRPM_F_RC] == CRPM_ERR_FORMAT));
}
static int is_missing(const crpm_restart_facts *f, int r, const void *a)
{
    (void)a;
    return !row(f, r)[CRPM_F_EXISTS];
}
static int is_unreadable(const crpm_restart_facts *f, int r, const void *a)
{
    (void)a;
    const int64_t *x = row(f, r);
    return x[CRPM_F_RC] < 0 && !is_corrupt(f, r, a);
}
static int prev_bad(const crpm_restart_facts *f, int r, const void *a)
{
    (void)a;
    return row(f, r)[CRPM_F_PREV_BAD] != 0;
}
static int src_bad(const crpm_restart_facts *f, int r, const void *a)
{
    const crpm_decide_src *s = a;
    char buf[256];
    (void)f;
    return s->describe && s->describe(s->arg, r, NULL, buf, sizeof buf);
}
static int has_field(const crpm_restart_facts *f, int r, const void *a)
{
    return row(f, r)[*(const int *)a] != 0;
}
static int has_rc(const crpm_restart_facts *f, int r, const void *a)
{
    (void)a;
    return row(f, r)[CRPM_F_RC] < 0;
}

/* Appends "; <what with the ranks>" when some rank passes (with paths:
 * the files of the first of them too). */
static size_t add_part(char *buf, size_t n, size_t used, const crpm_restart_facts *f,
                       int (*pass)(const crpm_restart_facts *, int, const void *), const void *arg, const char *fmt,
                       const char *const *paths, int with_files)
{
    char ranks[128];
    if (!list_ranks(ranks, sizeof ranks, f, pass, arg) || used >= n)
        return used;
    used += (size_t)snprintf(buf + used, n - used, "%s", used ? "; " : "");
    if (used < n)
        used += (size_t)snprintf(buf + used, n - used, fmt, ranks);
    if (with_files && used < n)
        used = add_files(buf, n, used, f, paths, pass, arg);
    return used < n ? used : n;
}

/* Which ranks lack the newest candidate epoch and what each holds: "at
 * epoch 3 (the newest any rank or level holds), rank 2: its container is
 * missing, its level-2 partner copy holds epoch 1" (at most 4 ranks). */
static void lacking(const crpm_restart_facts *f, const crpm_verdict *v, char *buf, size_t n)
{
    buf[0] = '\0';
    if (v->want < 1)
        return;
    int64_t run[2];
    int known = crpm_fact_run(f->rank, f->nranks, run);
    int64_t *need = calloc((size_t)f->nranks + 1, sizeof *need);
    if (!need)
        return;
    for (int r = 0; r < f->nranks; r++)
        need[r] = !crpm_fact_holds(row(f, r), known ? run : NULL, v->want);
    size_t used = (size_t)snprintf(buf, n, "; at epoch %lld, the newest a container or level holds, ",
                                   (long long)v->want);
    int shown = 0, total = 0;
    for (int r = 0; r < f->nranks && used < n; r++) {
        if (!need[r])
            continue;
        if (++total > 4)
            continue;
        const int64_t *x = row(f, r);
        used += (size_t)snprintf(buf + used, n - used, "%srank %d: its container %s", shown++ ? "; " : "", r,
                                 !x[CRPM_F_EXISTS]         ? "is missing"
                                 : x[CRPM_F_BAD]           ? "fails its checksums"
                                 : x[CRPM_F_RC] < 0        ? "cannot be read"
                                 : x[CRPM_F_EPOCH] < v->want ? "holds an older epoch"
                                                           : "holds a newer epoch only");
        for (int i = 0; i < f->nsrc && used < n; i++) {
            char what[256];
            if (!f->src[i].describe)
                continue;
            f->src[i].describe(f->src[i].arg, r, need, what, sizeof what);
            used += (size_t)snprintf(buf + used, n - used, ", %s", what);
        }
    }
    if (total > 4 && used < n)
        snprintf(buf + used, n - used, "; and %d more rank%s", total - 4, total - 4 == 1 ? "" : "s");
    free(need);
}

/* Damage no redundancy could repair: the same text on every rank, naming
 * what is damaged or lost; the damaged rank adds its own file and detail. */
static int damage_error(const crpm_restart_facts *f, const crpm_verdict *v, int me, const char *own_msg,
                        const char *const *paths, const char *job_name)
{
    char what[2048] = "", lack[1024];
    size_t used = 0;
    used = add_part(what, sizeof what, used, f, is_corrupt, NULL, "the container of rank(s) %s is corrupt", paths, 1);
    used = add_part(what, sizeof what, used, f, is_missing, NULL, "the container of rank(s) %s is missing", paths, 1);
    used = add_part(what, sizeof what, used, f, is_unreadable, NULL, "the container of rank(s) %s cannot be read",
                    paths, 1);
    for (int i = 0; i < f->nsrc; i++) {
        char part[160];
        snprintf(part, sizeof part, "the %s of rank(s) %%s is corrupt", f->src[i].holding ? f->src[i].holding : "copy");
        used = add_part(what, sizeof what, used, f, src_bad, &f->src[i], part, paths, 0);
    }
    used = add_part(what, sizeof what, used, f, prev_bad, NULL, "the previous epoch of rank(s) %s is corrupt too",
                    paths, 0);
    if (f->found_damaged && used < sizeof what)
        snprintf(what + used, sizeof what - used, "%sthe level-4 files are damaged", used ? "; " : "");
    lacking(f, v, lack, sizeof lack);
    const int64_t *mine = row(f, me);
    int own = (mine[CRPM_F_RC] < 0 || mine[CRPM_F_BAD]) && own_msg && own_msg[0];
    return crpm_error(CRPM_ERR_CORRUPT,
                      "crpm_init: job '%s' cannot restart: %s; no level (partner copy, parity or level-4 "
                      "checkpoint) makes good what is damaged or lost at an epoch every rank holds%s; no file was "
                      "changed or removed%s%s",
                      job_name, what, lack, own ? "; this rank: " : "", own ? own_msg : "");
}

/* Ranks at the lowest and the highest committed epoch. */
static int at_emin(const crpm_restart_facts *f, int r, const void *a)
{
    const crpm_verdict *v = a;
    const int64_t *x = row(f, r);
    return x[CRPM_F_EXISTS] && x[CRPM_F_RC] == 0 && x[CRPM_F_EPOCH] == v->emin;
}
static int at_emax(const crpm_restart_facts *f, int r, const void *a)
{
    const crpm_verdict *v = a;
    const int64_t *x = row(f, r);
    return x[CRPM_F_EXISTS] && x[CRPM_F_RC] == 0 && x[CRPM_F_EPOCH] == v->emax;
}
static int is_mixed(const crpm_restart_facts *f, int r, const void *a)
{
    (void)a;
    const int64_t *ref = crpm_fact_reference(f->rank, f->nranks), *x = row(f, r);
    return ref && x[CRPM_F_EXISTS] && x[CRPM_F_RC] == 0 && x[CRPM_F_EPOCH] != 0 &&
           (x == ref || x[CRPM_F_RUN0] != ref[CRPM_F_RUN0] || x[CRPM_F_RUN1] != ref[CRPM_F_RUN1]);
}

int crpm_verdict_named(const crpm_restart_facts *f, const crpm_verdict *v, int *ranks, int max)
{
    int n = 0, field = CRPM_F_NRANKS;
    for (int r = 0; r < f->nranks && n < max; r++) {
        int pick = 0;
        switch (v->l1) {
        case CRPM_L1S_NRANKS: pick = has_field(f, r, &field); break;
        case CRPM_L1S_MIXED: pick = is_mixed(f, r, NULL); break;
        case CRPM_L1S_MISSING: pick = is_missing(f, r, NULL); break;
        case CRPM_L1S_OPEN: pick = has_rc(f, r, NULL); break;
        case CRPM_L1S_CORRUPT: pick = is_corrupt(f, r, NULL) || is_missing(f, r, NULL) || is_unreadable(f, r, NULL); break;
        case CRPM_L1S_EPOCH: pick = at_emin(f, r, v) || at_emax(f, r, v); break;
        default: break;
        }
        if (pick)
            ranks[n++] = r;
    }
    return n;
}

int crpm_verdict_error(const crpm_restart_facts *f, const crpm_verdict *v, int me, const char *own_msg,
                       const char *const *paths, const char *job_dir, const char *job_name)
{
    char ranks[256], lack[1024], files[1200];
    const int64_t *mine = row(f, me);
    int field = CRPM_F_NRANKS;
    switch (v->l1) {
    case CRPM_L1S_NRANKS:
        if (v->extra >= 0)
            return crpm_error(CRPM_ERR_NRANKS,
                              "crpm_init: %s/rank-%d.crpm exists: the checkpoint of job '%s' was written by more "
                              "than the %d ranks of this run",
                              job_dir, v->extra, job_name, f->nranks);
        list_ranks(ranks, sizeof ranks, f, has_field, &field);
        add_files(files, sizeof files, 0, f, paths, has_field, &field);
        return crpm_error(CRPM_ERR_NRANKS,
                          "crpm_init: the containers of rank(s) %s%s were written by a run with another "
                          "number of ranks (this run has %d)%s%s",
                          ranks, files, f->nranks, mine[CRPM_F_NRANKS] ? ": " : "",
                          mine[CRPM_F_NRANKS] ? own_msg : "");
    case CRPM_L1S_MIXED: {
        const int64_t *ref = crpm_fact_reference(f->rank, f->nranks);
        int first = (int)((ref - f->rank) / CRPM_F_N), other = -1;
        for (int r = first + 1; r < f->nranks && other < 0; r++)
            if (row(f, r)[CRPM_F_EXISTS] && row(f, r)[CRPM_F_RC] == 0 && row(f, r)[CRPM_F_EPOCH] != 0 &&
                (row(f, r)[CRPM_F_RUN0] != ref[CRPM_F_RUN0] || row(f, r)[CRPM_F_RUN1] != ref[CRPM_F_RUN1]))
                other = r;
        add_files(files, sizeof files, 0, f, paths, is_mixed, NULL);
        return crpm_error(CRPM_ERR_IDENTITY,
                          "crpm_init: the containers of job '%s' come from different runs (rank %d's and rank %d's "
                          "differ%s): a container was replaced by one of another run; refusing to mix them",
                          job_name, first, other, files);
    }
    case CRPM_L1S_MISSING: {
        field = CRPM_F_EXISTS;
        list_ranks(ranks, sizeof ranks, f, is_missing, NULL);
        add_files(files, sizeof files, 0, f, paths, is_missing, NULL);
        lacking(f, v, lack, sizeof lack);
        return crpm_error(CRPM_ERR_MISSING,
                          "crpm_init: job '%s' has checkpoints but the container of rank(s) %s is missing%s and "
                          "no level brings it back%s; refusing to start fresh over them; no file was changed or "
                          "removed (if a node is back or the configuration differs from the run that wrote them, "
                          "relaunch as that run; to start anew, set on_unrecoverable = fresh in [advanced], which "
                          "keeps them aside, or use another job_name)",
                          job_name, ranks, files, lack);
    }
    case CRPM_L1S_OPEN: {
        if (mine[CRPM_F_RC] < 0)
            return crpm_error((int)mine[CRPM_F_RC], "crpm_init: cannot open %s/rank-%d.crpm: %s", job_dir, me,
                              own_msg);
        list_ranks(ranks, sizeof ranks, f, has_rc, NULL);
        add_files(files, sizeof files, 0, f, paths, has_rc, NULL);
        int first = 0;
        while (row(f, first)[CRPM_F_RC] == 0)
            first++;
        return crpm_error(CRPM_ERR_REMOTE, "crpm_init: the container of rank(s) %s%s cannot be opened (rank %d: %s)",
                          ranks, files, first, crpm_strerror((int)row(f, first)[CRPM_F_RC]));
    }
    case CRPM_L1S_CORRUPT:
        return damage_error(f, v, me, own_msg, paths, job_name);
    case CRPM_L1S_FULL_ON_DIFF:
        return crpm_error(CRPM_ERR_CONFIG,
                          "crpm_init: job '%s' has differential checkpoints; method = full cannot restart from them",
                          job_name);
    case CRPM_L1S_FULL_NOCOMMON:
        return crpm_error(CRPM_ERR_EPOCH, "crpm_init: the ranks' full checkpoint files have no common id");
    case CRPM_L1S_FOUND_CORRUPT:
        return crpm_error(CRPM_ERR_CORRUPT,
                          "crpm_init: the only checkpoint of job '%s' is a level-4 file that is corrupt (%s); "
                          "refusing to start fresh (set on_unrecoverable = fresh in [advanced] to start anew)",
                          job_name, own_msg && own_msg[0] ? own_msg : "see the warnings above");
    default:
        if (own_msg && own_msg[0] && v->emax - v->emin <= 1 && !v->bad_prev)
            return crpm_error(CRPM_ERR_EPOCH, "%s", own_msg);
        lacking(f, v, lack, sizeof lack);
        list_ranks(ranks, sizeof ranks, f, at_emin, v);
        size_t u = (size_t)snprintf(files, sizeof files, " (epoch %lld: rank(s) %s", (long long)v->emin, ranks);
        u = add_files(files, sizeof files, u, f, paths, at_emin, v);
        list_ranks(ranks, sizeof ranks, f, at_emax, v);
        if (u < sizeof files)
            u += (size_t)snprintf(files + u, sizeof files - u, "; epoch %lld: rank(s) %s", (long long)v->emax, ranks);
        u = add_files(files, sizeof files, u < sizeof files ? u : sizeof files, f, paths, at_emax, v);
        if (u < sizeof files)
            snprintf(files + u, sizeof files - u, ")");
        return crpm_error(CRPM_ERR_EPOCH,
                          "crpm_init: the containers of job '%s' hold epochs %lld to %lld%s%s and no level brings "
                          "every rank to one of them%s: they cannot be reconciled; no file was changed or removed",
                          job_name, (long long)v->emin, (long long)v->emax, files,
                          v->bad_prev ? " (a rank ahead has no previous epoch)" : "", lack);
    }
}

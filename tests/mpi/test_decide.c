/* Table-driven test of the restart decision (lib/mpi/decide.c): every
 * branch, without MPI or files. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "config.h"
#include "crpm_types.h"
#include "decide.h"

#define MAXR 4
/* One rank's facts: exists, open rc, other rank count, epoch, prev, extra, full0, full1. */
typedef struct { int64_t f[CRPM_F_N]; } rowf;
#define OK(e, p) {{1, 0, 0, (e), (p), -1, -1, -1}}
#define NONE {{0, 0, 0, 0, 0, -1, -1, -1}}

typedef struct tcase {
    const char *name;
    int nranks;
    rowf r[MAXR];
    int method, l1_rejected, l4_known, l4_found;
    int kind, code, l1;   /* expected; code/l1 checked when >= 0 / != -1 */
    int64_t epoch;        /* expected for CRPM_V_L1, full id for CRPM_V_FULL */
    int l4_damaged, unrecoverable_fresh, set_aside; /* facts, and the expected set_aside */
} tcase;

static const tcase cases[] = {
    {"no containers: ask level 4 first", 2, {NONE, NONE}, 0, 0, 0, 0, CRPM_V_ASK_L4, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"no containers, no level 4: fresh", 2, {NONE, NONE}, 0, 0, 1, 0, CRPM_V_FRESH, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"no containers, level 4: resume L4", 2, {NONE, NONE}, 0, 0, 1, 1, CRPM_V_L4, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"all at epoch 0: fresh", 3, {OK(0, 0), OK(0, 0), OK(0, 0)}, 0, 0, 1, 0, CRPM_V_FRESH, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"all at epoch 5: resume L1", 2, {OK(5, 1), OK(5, 1)}, 0, 0, 0, 0, CRPM_V_L1, -1, CRPM_L1S_USABLE, 5, 0, 0, 0},
    {"usable L1 wins over level 4", 2, {OK(5, 1), OK(5, 1)}, 0, 0, 1, 1, CRPM_V_L1, -1, CRPM_L1S_USABLE, 5, 0, 0, 0},
    {"one rank ahead: resume the lower epoch", 3, {OK(5, 1), OK(6, 1), OK(5, 0)}, 0, 0, 0, 0, CRPM_V_L1, -1,
     CRPM_L1S_USABLE, 5, 0, 0, 0},
    {"rank ahead without its previous epoch", 2, {OK(5, 1), OK(6, 0)}, 0, 0, 1, 0, CRPM_V_ERROR, CRPM_ERR_EPOCH,
     CRPM_L1S_EPOCH, 0, 0, 0, 0},
    {"rank ahead of epoch 0 without previous: fresh", 2, {OK(0, 0), OK(1, 0)}, 0, 0, 1, 0, CRPM_V_FRESH, -1,
     CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"epochs two apart", 2, {OK(5, 1), OK(7, 1)}, 0, 0, 1, 0, CRPM_V_ERROR, CRPM_ERR_EPOCH, CRPM_L1S_EPOCH, 0, 0, 0, 0},
    {"epochs two apart, level 4 serves", 2, {OK(5, 1), OK(7, 1)}, 0, 0, 1, 1, CRPM_V_L4, -1, CRPM_L1S_EPOCH, 0, 0, 0, 1},
    {"one container missing", 3, {OK(3, 1), NONE, OK(3, 1)}, 0, 0, 1, 0, CRPM_V_ERROR, CRPM_ERR_MISSING,
     CRPM_L1S_MISSING, 0, 0, 0, 0},
    {"missing beside empty containers: fresh", 3, {OK(0, 0), NONE, OK(0, 0)}, 0, 0, 1, 0, CRPM_V_FRESH, -1,
     CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"a container cannot be opened", 2, {OK(3, 1), {{1, CRPM_ERR_TRUNCATED, 0, 0, 0, -1, -1, -1}}}, 0, 0, 1, 0,
     CRPM_V_ERROR, CRPM_ERR_REMOTE, CRPM_L1S_OPEN, 0, 0, 0, 0},
    /* damage the checksums found: the same error on every rank */
    {"a container is corrupt", 2, {OK(3, 1), {{1, CRPM_ERR_CORRUPT, 0, 0, 0, -1, -1, -1}}}, 0, 0, 1, 0,
     CRPM_V_ERROR, CRPM_ERR_CORRUPT, CRPM_L1S_CORRUPT, 0, 0, 0, 0},
    {"written by another rank count", 2, {OK(3, 1), {{1, CRPM_ERR_NRANKS, 1, 0, 0, -1, -1, -1}}}, 0, 0, 1, 0,
     CRPM_V_ERROR, CRPM_ERR_NRANKS, CRPM_L1S_NRANKS, 0, 0, 0, 0},
    {"containers of ranks this run lacks", 2, {{{1, 0, 0, 3, 1, 4, -1, -1}}, OK(3, 1)}, 0, 0, 1, 0,
     CRPM_V_ERROR, CRPM_ERR_NRANKS, CRPM_L1S_NRANKS, 0, 0, 0, 0},
    {"level-1 verdict rejected on apply", 2, {OK(5, 1), OK(5, 1)}, 0, 1, 1, 0, CRPM_V_ERROR, CRPM_ERR_EPOCH,
     CRPM_L1S_EPOCH, 0, 0, 0, 0},
    {"method full: common newest id", 2, {{{1, 0, 0, 0, 0, -1, 9, 8}}, {{1, 0, 0, 0, 0, -1, 8, 7}}},
     CRPM_METHOD_FULL, 0, 1, 0, CRPM_V_FULL, -1, CRPM_L1S_FRESH, 8, 0, 0, 0},
    {"method full: no files", 2, {OK(0, 0), OK(0, 0)}, CRPM_METHOD_FULL, 0, 1, 0, CRPM_V_FRESH, -1,
     CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"method full: no common id", 2, {{{1, 0, 0, 0, 0, -1, 9, 8}}, {{1, 0, 0, 0, 0, -1, 4, 3}}},
     CRPM_METHOD_FULL, 0, 1, 0, CRPM_V_ERROR, CRPM_ERR_EPOCH, CRPM_L1S_FULL_NOCOMMON, 0, 0, 0, 0},
    {"method full over differential checkpoints", 2, {OK(5, 1), OK(5, 1)}, CRPM_METHOD_FULL, 0, 0, 0,
     CRPM_V_ERROR, CRPM_ERR_CONFIG, CRPM_L1S_FULL_ON_DIFF, 0, 0, 0, 0},
    {"method full over a level-4 checkpoint", 2, {NONE, NONE}, CRPM_METHOD_FULL, 0, 1, 1, CRPM_V_ERROR,
     CRPM_ERR_CONFIG, CRPM_L1S_FULL_ON_DIFF, 0, 0, 0, 0},
    /* Lose nothing: only damage or loss lets level 4 take over, and then the
     * containers are set aside, never overwritten. */
    {"geometry mismatch beside level 4: error", 2, {OK(3, 1), {{1, CRPM_ERR_GEOMETRY, 0, 0, 0, -1, -1, -1}}}, 0, 0,
     0, 0, CRPM_V_ERROR, CRPM_ERR_REMOTE, CRPM_L1S_OPEN, 0, 0, 0, 0},
    {"other job's container beside level 4: error", 2, {OK(3, 1), {{1, CRPM_ERR_IDENTITY, 0, 0, 0, -1, -1, -1}}},
     0, 0, 1, 1, CRPM_V_ERROR, CRPM_ERR_REMOTE, CRPM_L1S_OPEN, 0, 0, 0, 0},
    {"other rank count beside level 4: error", 2, {OK(3, 1), {{1, CRPM_ERR_NRANKS, 1, 0, 0, -1, -1, -1}}}, 0, 0, 1,
     1, CRPM_V_ERROR, CRPM_ERR_NRANKS, CRPM_L1S_NRANKS, 0, 0, 0, 0},
    {"corrupt container, level 4 serves, set aside", 2, {OK(3, 1), {{1, CRPM_ERR_CORRUPT, 0, 0, 0, -1, -1, -1}}},
     0, 0, 1, 1, CRPM_V_L4, -1, CRPM_L1S_CORRUPT, 0, 0, 0, 1},
    {"lost container, level 4 serves, set aside", 3, {OK(3, 1), NONE, OK(3, 1)}, 0, 0, 1, 1, CRPM_V_L4, -1,
     CRPM_L1S_MISSING, 0, 0, 0, 1},
    {"lost container, nothing else, fresh asked for", 3, {OK(3, 1), NONE, OK(3, 1)}, 0, 0, 1, 0, CRPM_V_FRESH, -1,
     CRPM_L1S_MISSING, 0, 0, 1, 1},
    {"only checkpoint a corrupt level-4 file", 2, {NONE, NONE}, 0, 0, 1, 0, CRPM_V_ERROR, CRPM_ERR_CORRUPT,
     CRPM_L1S_L4_CORRUPT, 0, 1, 0, 0},
    {"corrupt level-4 file, fresh asked for", 2, {NONE, NONE}, 0, 0, 1, 0, CRPM_V_FRESH, -1, CRPM_L1S_FRESH, 0, 1,
     1, 1},
    {"containers of two runs of the job", 3, {OK(4, 1), {{1, 0, 0, 4, 1, -1, -1, -1, 7, 7}}, OK(4, 1)}, 0, 0, 1, 1,
     CRPM_V_ERROR, CRPM_ERR_IDENTITY, CRPM_L1S_MIXED, 0, 0, 0, 0},
    {"empty containers of two runs: fresh", 2, {OK(0, 0), {{1, 0, 0, 0, 0, -1, -1, -1, 7, 7}}}, 0, 0, 1, 0,
     CRPM_V_FRESH, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"usable level 1 beside a corrupt level-4 file", 2, {OK(4, 1), OK(4, 1)}, 0, 0, 1, 0, CRPM_V_L1, -1,
     CRPM_L1S_USABLE, 4, 1, 0, 0},
};

/* Level 2: a container lost or damaged comes from its partner copy when
 * that copy opened and belongs to the same run. */
#define L2ROW(ex, rc, e, p, run, rfile, rok, re, rp, rrun) \
    {{(ex), (rc), 0, (e), (p), -1, -1, -1, (run), 0, (rfile), (rok), (re), (rp), (rrun), 0}}
typedef struct l2case {
    const char *name;
    rowf r[3];
    int restored;         /* rank expected to be restored, -1 none */
    int kind;             /* verdict after patching */
    int64_t epoch;
    const char *text;     /* error text must contain it (NULL: not checked) */
} l2case;

static void l2_cases(void)
{
    const l2case cs[] = {
        {"lost container, copy at the same epoch", {L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7), L2ROW(0, 0, 0, 0, 0, 1, 1, 5, 1, 7),
          L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7)}, 1, CRPM_V_L1, 5, NULL},
        {"lost container, copy one epoch behind", {L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7), L2ROW(0, 0, 0, 0, 0, 1, 1, 4, 0, 7),
          L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7)}, 1, CRPM_V_L1, 4, NULL},
        {"corrupt container, copy serves", {L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7),
          L2ROW(1, CRPM_ERR_CORRUPT, 0, 0, 0, 1, 1, 5, 1, 7), L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7)}, 1, CRPM_V_L1, 5, NULL},
        {"copy of another run is not used", {L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7), L2ROW(0, 0, 0, 0, 0, 1, 1, 5, 1, 8),
          L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7)}, -1, CRPM_V_ERROR, 0, "missing"},
        {"mismatched container is not replaced", {L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7),
          L2ROW(1, CRPM_ERR_GEOMETRY, 0, 0, 0, 1, 1, 5, 1, 7), L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7)}, -1, CRPM_V_ERROR, 0,
         NULL},
        {"container and copy lost together", {L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7), L2ROW(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
          L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7)}, -1, CRPM_V_ERROR, 0, "partner copy"},
        {"empty copy restores nothing", {L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7), L2ROW(0, 0, 0, 0, 0, 1, 1, 0, 0, 7),
          L2ROW(1, 0, 5, 1, 7, 1, 1, 5, 1, 7)}, -1, CRPM_V_ERROR, 0, "missing"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int64_t rows[3 * CRPM_F_N], restore[3];
        for (int r = 0; r < 3; r++)
            memcpy(rows + r * CRPM_F_N, cs[i].r[r].f, sizeof cs[i].r[r].f);
        int n = crpm_decide_l2_patch(rows, 3, restore);
        crpm_restart_facts f = {.nranks = 3, .rank = rows, .l4_known = 1};
        crpm_verdict v = crpm_decide_restart(&f);
        int bad = n != (cs[i].restored >= 0) || (cs[i].restored >= 0 && !restore[cs[i].restored]) || v.kind != cs[i].kind ||
                  (v.kind == CRPM_V_L1 && v.epoch != cs[i].epoch);
        if (v.kind == CRPM_V_ERROR) {
            crpm_verdict_error(&f, &v, 0, "", "/ckpt/job", "job");
            bad |= cs[i].text && !strstr(crpm_last_error(), cs[i].text);
        }
        CHECK(!bad, "l2 %s: restored %d, kind %d (want %d), epoch %lld: %s", cs[i].name, n, v.kind, cs[i].kind,
              (long long)v.epoch, v.kind == CRPM_V_ERROR ? crpm_last_error() : "");
    }
}

/* Damaged data (restart.c's checks set BAD, PREV_BAD, REP_BAD, PAR_BAD):
 * 3 ranks, ring partners; rows built field by field. */
typedef struct irow { int64_t f[CRPM_F_N]; } irow;

static irow intact(int64_t e, int64_t uid)
{
    irow x;
    memset(&x, 0, sizeof x);
    x.f[CRPM_F_EXISTS] = 1;
    x.f[CRPM_F_EPOCH] = e;
    x.f[CRPM_F_PREV] = 1;
    x.f[CRPM_F_EXTRA] = x.f[CRPM_F_FULL0] = x.f[CRPM_F_FULL1] = -1;
    x.f[CRPM_F_RUN0] = 7;
    x.f[CRPM_F_UID] = uid;
    x.f[CRPM_F_REP_FILE] = x.f[CRPM_F_REP_OK] = 1;
    x.f[CRPM_F_REP_EPOCH] = e;
    x.f[CRPM_F_REP_PREV] = 1;
    x.f[CRPM_F_REP_RUN0] = 7;
    return x;
}

/* data fails its check at epoch e; prev: its epoch e-1 is intact */
static irow damaged(int64_t e, int prev)
{
    irow x = intact(e, 10 * e);
    x.f[CRPM_F_RC] = CRPM_ERR_CORRUPT;
    x.f[CRPM_F_BAD] = 1;
    x.f[CRPM_F_PREV] = prev;
    x.f[CRPM_F_PREV_BAD] = !prev;
    return x;
}

static irow lost(void)
{
    irow x;
    memset(&x, 0, sizeof x);
    x.f[CRPM_F_EXTRA] = x.f[CRPM_F_FULL0] = x.f[CRPM_F_FULL1] = -1;
    return x;
}

/* its partner copy lags one epoch */
static irow behind(irow x)
{
    x.f[CRPM_F_REP_EPOCH] = (x.f[CRPM_F_REP_EPOCH] ? x.f[CRPM_F_REP_EPOCH] : x.f[CRPM_F_EPOCH]) - 1;
    x.f[CRPM_F_REP_PREV] = 0;
    return x;
}

static irow no_prev(irow x)
{
    x.f[CRPM_F_PREV] = 0;
    return x;
}

static irow no_copy(irow x, int corrupt)
{
    x.f[CRPM_F_REP_OK] = 0;
    x.f[CRPM_F_REP_EPOCH] = 0;
    x.f[CRPM_F_REP_FILE] = corrupt;
    x.f[CRPM_F_REP_BAD] = corrupt;
    return x;
}

typedef struct icase {
    const char *name;
    irow r[3];
    int l2;               /* apply the level-2 patch */
    int l4_found;         /* a valid level-4 file of epoch l4_epoch, id l4_id */
    int64_t l4_epoch, l4_id;
    int restored, fallback; /* expected patch counts */
    int kind;             /* expected final verdict (after level 4 was asked for when needed) */
    int64_t epoch;
    int asked_l4;         /* the first verdict asks for level 4 */
    const char *text;     /* error text must contain it */
} icase;

static void integrity_cases(void)
{
    const icase cs[] = {
        {"corrupt container, intact copy: level 2 repairs at the same epoch",
         {intact(6, 60), damaged(6, 1), intact(6, 60)}, 1, 0, 0, 0, 1, 0, CRPM_V_L1, 6, 0, NULL},
        {"corrupt container, corrupt copy, intact previous epoch everywhere: all fall back",
         {intact(6, 60), no_copy(damaged(6, 1), 1), intact(6, 60)}, 1, 0, 0, 0, 0, 1, CRPM_V_L1, 5, 1, NULL},
        {"... unless a level-4 file holds that very epoch",
         {intact(6, 60), no_copy(damaged(6, 1), 1), intact(6, 60)}, 1, 1, 6, 60, 0, 1, CRPM_V_L4, 0, 1, NULL},
        {"... a level-4 file of an older epoch does not beat the fallback",
         {intact(6, 60), no_copy(damaged(6, 1), 1), intact(6, 60)}, 1, 1, 4, 40, 0, 1, CRPM_V_L1, 5, 1, NULL},
        {"... nor one with the epoch but another checkpoint id",
         {intact(6, 60), no_copy(damaged(6, 1), 1), intact(6, 60)}, 1, 1, 6, 99, 0, 1, CRPM_V_L1, 5, 1, NULL},
        {"corrupt container and copy, previous epoch damaged too: error naming them",
         {intact(6, 60), no_copy(damaged(6, 0), 1), intact(6, 60)}, 1, 0, 0, 0, 0, 0, CRPM_V_ERROR, 0, 1,
         "the container of rank(s) 1 (rank-<r>.crpm in its node's job directory, here /ckpt/job) is corrupt; "
         "the level-2 partner copy of rank(s) 1 is corrupt; "
         "the previous epoch of rank(s) 1 is corrupt too"},
        {"no fallback when another rank lacks the previous epoch",
         {intact(6, 60), no_copy(damaged(6, 1), 0), no_prev(intact(6, 60))}, 1, 0, 0, 0, 0, 0, CRPM_V_ERROR, 0, 1,
         "rank(s) 1 (rank-<r>.crpm in its node's job directory, here /ckpt/job) is corrupt"},
        {"no fallback to epoch 0 (a fresh start)", {intact(1, 10), no_copy(damaged(1, 1), 0), intact(1, 10)}, 1, 0,
         0, 0, 0, 0, CRPM_V_ERROR, 0, 1, "rank(s) 1"},
        {"corrupt container beside a lost one: corrupt, naming both",
         {intact(6, 60), no_copy(damaged(6, 0), 0), lost()}, 0, 0, 0, 0, 0, 0, CRPM_V_ERROR, 0, 1,
         "is corrupt; the container of rank(s) 2 is missing"},
        {"repaired from a copy one epoch behind: a level-4 file of the newest epoch wins",
         {intact(6, 60), behind(damaged(6, 0)), intact(6, 60)}, 1, 1, 6, 60, 1, 0, CRPM_V_L4, 0, 1, NULL},
        {"corrupt container, its copy three epochs behind: damage, not an epoch mismatch",
         {intact(6, 60), behind(behind(behind(damaged(6, 0)))), intact(6, 60)}, 1, 0, 0, 0, 1, 0, CRPM_V_ERROR, 0, 1,
         "the container of rank(s) 1 (rank-<r>.crpm"},
        {"repaired from a copy one epoch behind, no level 4: every rank at that epoch",
         {intact(6, 60), behind(damaged(6, 0)), intact(6, 60)}, 1, 0, 0, 0, 1, 0, CRPM_V_L1, 5, 1, NULL},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const icase *t = &cs[i];
        int64_t rows[3 * CRPM_F_N], restore[3];
        for (int r = 0; r < 3; r++)
            memcpy(rows + r * CRPM_F_N, t->r[r].f, sizeof t->r[r].f);
        crpm_restart_facts f = {.nranks = 3, .rank = rows};
        crpm_decide_top(rows, 3, &f.top_epoch, &f.top_uid);
        int n = t->l2 ? crpm_decide_l2_patch(rows, 3, restore) : 0;
        int fb = crpm_decide_prev_patch(rows, 3);
        f.repaired = n + fb > 0;
        crpm_verdict v = crpm_decide_restart(&f);
        int asked = v.kind == CRPM_V_ASK_L4;
        f.l4_known = 1;
        f.l4_found = t->l4_found;
        f.l4_epoch = t->l4_epoch;
        f.l4_id = t->l4_id;
        if (asked)
            v = crpm_decide_restart(&f);
        int bad = n != t->restored || fb != t->fallback || v.kind != t->kind || asked != t->asked_l4 ||
                  (v.kind == CRPM_V_L1 && v.epoch != t->epoch) || (v.kind == CRPM_V_L4 && !v.set_aside);
        if (v.kind == CRPM_V_ERROR) {
            int code = crpm_verdict_error(&f, &v, 0, "", "/ckpt/job", "job");
            bad |= code != CRPM_ERR_CORRUPT || (t->text && !strstr(crpm_last_error(), t->text)) ||
                   strstr(crpm_last_error(), "remove the");
            /* the damaged rank adds its own detail */
            crpm_verdict_error(&f, &v, 1, "rank-1.crpm: array id 3, byte offset 1024", "/ckpt/job", "job");
            bad |= !strstr(crpm_last_error(), "this rank: rank-1.crpm: array id 3");
        }
        CHECK(!bad, "integrity %s: restored %d, fallback %d, asked %d, kind %d (want %d), epoch %lld: %s", t->name, n,
              fb, asked, v.kind, t->kind, (long long)v.epoch, v.kind == CRPM_V_ERROR ? crpm_last_error() : "");
    }
}

int main(void)
{
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        const tcase *t = &cases[i];
        int64_t rows[MAXR * CRPM_F_N];
        for (int r = 0; r < t->nranks; r++)
            memcpy(rows + r * CRPM_F_N, t->r[r].f, sizeof t->r[r].f);
        crpm_restart_facts f = {.nranks = t->nranks, .rank = rows, .method = t->method,
                                .l1_rejected = t->l1_rejected, .l4_known = t->l4_known, .l4_found = t->l4_found,
                                .l4_damaged = t->l4_damaged, .unrecoverable_fresh = t->unrecoverable_fresh};
        crpm_verdict v = crpm_decide_restart(&f);
        int bad = v.kind != t->kind || v.l1 != t->l1 || (t->kind == CRPM_V_L1 && v.epoch != t->epoch) ||
                  v.set_aside != t->set_aside ||
                  (t->kind == CRPM_V_FULL && v.full_id != t->epoch);
        int code = v.kind == CRPM_V_ERROR ? crpm_verdict_error(&f, &v, 0, "", "/ckpt/job", "job") : -1;
        if (v.kind == CRPM_V_ERROR && (v.code != t->code || code != (t->l1 == CRPM_L1S_OPEN ? CRPM_ERR_REMOTE : t->code) ||
                                       !crpm_last_error()[0]))
            bad = 1;
        CHECK(!bad, "%s: kind %d (want %d), l1 %d (want %d), code %d (want %d), epoch %lld, full %lld: %s", t->name,
              v.kind, t->kind, v.l1, t->l1, v.code, t->code, (long long)v.epoch, (long long)v.full_id,
              crpm_last_error());
    }
    /* The failing rank itself reports its own open error, with its text. */
    const rowf own[2] = {{{1, CRPM_ERR_CORRUPT, 0, 0, 0, -1, -1, -1}}, OK(3, 1)};
    int64_t rows[2 * CRPM_F_N];
    memcpy(rows, own[0].f, sizeof own[0].f);
    memcpy(rows + CRPM_F_N, own[1].f, sizeof own[1].f);
    crpm_restart_facts f = {.nranks = 2, .rank = rows, .l4_known = 1};
    crpm_verdict v = crpm_decide_restart(&f);
    CHECK(crpm_verdict_error(&f, &v, 0, "slot checksum", "/d", "j") == CRPM_ERR_CORRUPT &&
              strstr(crpm_last_error(), "slot checksum"),
          "own open error: %s", crpm_last_error());
    l2_cases();
    integrity_cases();
    return check_summary("decide");
}

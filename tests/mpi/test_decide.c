/* Table-driven test of the restart decision (lib/mpi/decide.c): every
 * branch, without MPI or files. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "config.h"
#include "crpm_types.h"
#include "decide.h"
#include "l2_internal.h"
#include "l3_internal.h"

#define MAXR 4
/* One rank's facts: exists, open rc, other rank count, epoch, prev, extra, full0, full1. */
typedef struct { int64_t f[CRPM_F_N]; } rowf;
#define OK(e, p) {{1, 0, 0, (e), (p), -1, -1, -1}}
#define NONE {{0, 0, 0, 0, 0, -1, -1, -1}}

typedef struct tcase {
    const char *name;
    int nranks;
    rowf r[MAXR];
    int method, l1_rejected, asked, found;
    int kind, code, l1;   /* expected; code/l1 checked when >= 0 / != -1 */
    int64_t epoch;        /* expected for CRPM_V_L1, full id for CRPM_V_FULL */
    int found_damaged, unrecoverable_fresh, set_aside; /* facts, and the expected set_aside */
} tcase;

static const tcase cases[] = {
    {"no containers: ask level 4 first", 2, {NONE, NONE}, 0, 0, 0, 0, CRPM_V_ASK, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"no containers, no level 4: fresh", 2, {NONE, NONE}, 0, 0, 1, 0, CRPM_V_FRESH, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"no containers, level 4: resume L4", 2, {NONE, NONE}, 0, 0, 1, 1, CRPM_V_FOUND, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
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
    {"epochs two apart, level 4 serves", 2, {OK(5, 1), OK(7, 1)}, 0, 0, 1, 1, CRPM_V_FOUND, -1, CRPM_L1S_EPOCH, 0, 0, 0, 1},
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
     0, 0, 1, 1, CRPM_V_FOUND, -1, CRPM_L1S_CORRUPT, 0, 0, 0, 1},
    {"lost container, level 4 serves, set aside", 3, {OK(3, 1), NONE, OK(3, 1)}, 0, 0, 1, 1, CRPM_V_FOUND, -1,
     CRPM_L1S_MISSING, 0, 0, 0, 1},
    {"lost container, nothing else, fresh asked for", 3, {OK(3, 1), NONE, OK(3, 1)}, 0, 0, 1, 0, CRPM_V_FRESH, -1,
     CRPM_L1S_MISSING, 0, 0, 1, 1},
    {"only checkpoint a corrupt level-4 file", 2, {NONE, NONE}, 0, 0, 1, 0, CRPM_V_ERROR, CRPM_ERR_CORRUPT,
     CRPM_L1S_FOUND_CORRUPT, 0, 1, 0, 0},
    {"corrupt level-4 file, fresh asked for", 2, {NONE, NONE}, 0, 0, 1, 0, CRPM_V_FRESH, -1, CRPM_L1S_FRESH, 0, 1,
     1, 1},
    {"containers of two runs of the job", 3, {OK(4, 1), {{1, 0, 0, 4, 1, -1, -1, -1, 7, 7}}, OK(4, 1)}, 0, 0, 1, 1,
     CRPM_V_ERROR, CRPM_ERR_IDENTITY, CRPM_L1S_MIXED, 0, 0, 0, 0},
    {"empty containers of two runs: fresh", 2, {OK(0, 0), {{1, 0, 0, 0, 0, -1, -1, -1, 7, 7}}}, 0, 0, 1, 0,
     CRPM_V_FRESH, -1, CRPM_L1S_FRESH, 0, 0, 0, 0},
    {"usable level 1 beside a corrupt level-4 file", 2, {OK(4, 1), OK(4, 1)}, 0, 0, 1, 0, CRPM_V_L1, -1,
     CRPM_L1S_USABLE, 4, 1, 0, 0},
};

/* ---- the levels as sources ----------------------------------------------------
 * Rows built field by field; a level is the real level 2 plan (l2_plan over
 * its own facts) or level 3's (crpm_l3_can_rebuild), or a test copy level. */
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

static irow open_error(int rc)
{
    irow x = lost();
    x.f[CRPM_F_EXISTS] = 1;
    x.f[CRPM_F_RC] = rc;
    return x;
}

static irow no_prev(irow x)
{
    x.f[CRPM_F_PREV] = 0;
    return x;
}

/* What level 2 knows of one rank's partner copy (its own facts). */
typedef struct cp { int file, ok; int64_t epoch; int prev, run, bad; } cp;
#define CP(e, p) {1, 1, (e), (p), 7, 0}
#define CP_NONE {0, 0, 0, 0, 0, 0}
#define CP_BAD {1, 0, 0, 0, 0, 1}
/* Level 3's parity held by one rank: ok, epoch, previous epoch (-1 none), run, bad. */
typedef struct par { int ok; int64_t epoch, prev; int run, bad; } par;
#define PAR(e, p) {1, (e), (p), 7, 0}
#define PAR_NONE {0, 0, -1, 0, 0}

#define NR 4
typedef struct world {
    int nranks;
    int64_t rows[NR * CRPM_F_N];
    int64_t l2own[NR * L2_NFACTS], l3own[NR * L3F_N];
    int groups[NR], members[NR], K, M;
    int64_t rep2[NR], rep3[NR];
    crpm_plan p2;
} world;

static int l2_src_offers(void *arg, int64_t *epochs, int max)
{
    world *w = arg;
    return l2_offers(NULL, &w->p2, epochs, max);
}
static int l2_src_can(void *arg, int64_t epoch, const int64_t *need, const int64_t *run, int64_t *repair)
{
    world *w = arg;
    w->p2.epoch = epoch;
    w->p2.need = need;
    w->p2.run = run;
    w->p2.repair = repair;
    l2_plan(NULL, &w->p2);
    return w->p2.nrepair;
}
static int l2_src_describe(void *arg, int r, const int64_t *need, char *buf, size_t n)
{
    world *w = arg;
    w->p2.need = need;
    return l2_describe(NULL, &w->p2, r, buf, n);
}
static int l3_src_offers(void *arg, int64_t *epochs, int max)
{
    world *w = arg;
    int n = 0;
    for (int r = 0; r < w->nranks && n + 2 <= max; r++) {
        const int64_t *x = w->l3own + r * L3F_N;
        if (x[L3F_OK] == 1) {
            epochs[n++] = x[L3F_EPOCH];
            epochs[n++] = x[L3F_PREV];
        }
    }
    return n;
}
static int l3_src_can(void *arg, int64_t epoch, const int64_t *need, const int64_t *run, int64_t *repair)
{
    world *w = arg;
    return crpm_l3_can_rebuild(w->l3own, w->nranks, w->groups, w->members, w->K, w->M, run, epoch, need, repair);
}
static int l3_src_describe(void *arg, int r, const int64_t *need, char *buf, size_t n)
{
    world *w = arg;
    (void)need;
    snprintf(buf, n, "parity of rank %d", r);
    return w->l3own[r * L3F_N + L3F_BAD] != 0;
}

typedef struct scase {
    const char *name;
    int nranks;
    irow r[NR];
    cp copy[NR];          /* level 2 (all CP_NONE with l2 = 0) */
    par parity[NR];       /* level 3, one group of nranks, M = 1 (l3 = 0: none) */
    int l2, l3;
    int found;            /* a level's own checkpoint (level 4) of epoch found_epoch, id found_id */
    int64_t found_epoch, found_id;
    int kind;             /* expected final verdict (after the lookup when asked) */
    int64_t epoch;
    const char *repairs;  /* expected sources per rank: "1" own, "2" level 2, "3" level 3, e.g. "1131" */
    const char *text;     /* error text must contain it */
    int found_run;        /* the level's checkpoint records run {found_run, 0} (0: records none) */
} scase;

static void source_cases(void)
{
    const scase cs[] = {
        /* the case 1: L2 at epoch 1, L3 at 2, L1 at 3, node 2 wiped */
        {"stale level-2 copy does not block a level-3 rebuild", 4,
         {intact(3, 15), intact(3, 15), lost(), intact(3, 15)},
         {CP(1, 0), CP_NONE, CP(1, 0), CP(1, 0)}, {PAR(2, -1), PAR(2, -1), PAR_NONE, PAR(2, -1)}, 1, 1, 0, 0, 0,
         CRPM_V_L1, 2, "1131", NULL, 0},
        /* case 2: killed after the level-3 checkpoint */
        {"level 3 beats an older level-2 copy", 4, {intact(2, 10), intact(2, 10), lost(), intact(2, 10)},
         {CP(1, 0), CP_NONE, CP(1, 0), CP(1, 0)}, {PAR(2, -1), PAR(2, -1), PAR_NONE, PAR(2, -1)}, 1, 1, 0, 0, 0,
         CRPM_V_L1, 2, "1131", NULL, 0},
        {"a copy at the newest epoch is used before parity", 4, {intact(2, 10), intact(2, 10), lost(), intact(2, 10)},
         {CP(2, 1), CP_NONE, CP(2, 1), CP(2, 1)}, {PAR(2, -1), PAR(2, -1), PAR_NONE, PAR(2, -1)}, 1, 1, 0, 0, 0,
         CRPM_V_L1, 2, "1121", NULL, 0},
        {"parity two lost of four with one parity: the copies serve the older epoch", 4,
         {intact(2, 10), lost(), lost(), intact(2, 10)},
         {CP(1, 0), CP(1, 0), CP(1, 0), CP(1, 0)}, {PAR(2, -1), PAR_NONE, PAR_NONE, PAR(2, -1)}, 1, 1, 0, 0, 0,
         CRPM_V_L1, 1, "1221", NULL, 0},
        {"a level-2 repair lets level 3 rebuild the other loss", 4,
         {intact(2, 10), open_error(CRPM_ERR_TRUNCATED), lost(), intact(2, 10)},
         {CP(1, 0), CP(2, 1), CP_NONE, CP(1, 0)}, {PAR(2, -1), PAR(2, -1), PAR_NONE, PAR(2, -1)}, 1, 1, 0, 0, 0,
         CRPM_V_L1, 2, "1231", NULL, 0},
        {"a header overwritten on two ranks is an erasure the copies repair", 4,
         {intact(3, 15), open_error(CRPM_ERR_FORMAT), intact(3, 15), open_error(CRPM_ERR_FORMAT)},
         {CP(3, 1), CP(3, 1), CP(3, 1), CP(3, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 0, 0, 0,
         CRPM_V_L1, 3, "1212", NULL, 0},
        {"a truncated container is rebuilt from parity", 4,
         {intact(3, 15), open_error(CRPM_ERR_TRUNCATED), intact(3, 15), intact(3, 15)},
         {CP_NONE, CP_NONE, CP_NONE, CP_NONE}, {PAR(3, 2), PAR(3, 2), PAR(3, 2), PAR(3, 2)}, 0, 1, 0, 0, 0,
         CRPM_V_L1, 3, "1311", NULL, 0},
        {"a rank ahead without its previous epoch takes its copy", 4,
         {intact(3, 15), intact(3, 15), no_prev(intact(4, 20)), intact(3, 15)},
         {CP(3, 1), CP(3, 1), CP(3, 1), CP(3, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 0, 0, 0,
         CRPM_V_L1, 3, "1121", NULL, 0},
        {"corrupt data at the newest epoch, previous intact everywhere: all go back one", 4,
         {intact(6, 60), damaged(6, 1), intact(6, 60), intact(6, 60)},
         {CP_NONE, CP_BAD, CP_NONE, CP_NONE}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 0, 0, 0,
         CRPM_V_L1, 5, "1111", NULL, 0},
        {"... unless a level-4 checkpoint of that very epoch exists", 4,
         {intact(6, 60), damaged(6, 1), intact(6, 60), intact(6, 60)},
         {CP_NONE, CP_BAD, CP_NONE, CP_NONE}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 1, 6, 60,
         CRPM_V_FOUND, 0, "0000", NULL, 0},
        {"... a level-4 file with that epoch but another id is of an earlier run", 4,
         {intact(6, 60), damaged(6, 1), intact(6, 60), intact(6, 60)},
         {CP_NONE, CP_BAD, CP_NONE, CP_NONE}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 1, 6, 99,
         CRPM_V_L1, 5, "1111", NULL, 0},
        {"a level-4 file of a higher epoch than any container is of an earlier run", 4,
         {intact(3, 13), intact(3, 13), intact(4, 14), intact(3, 13)},
         {CP_NONE, CP_NONE, CP_NONE, CP_NONE}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 0, 0, 1, 10, 10,
         CRPM_V_L1, 3, "1111", NULL, 0},
        {"nothing brings rank 2 back: the refusal names what it lacks", 4,
         {intact(3, 15), intact(3, 15), lost(), intact(3, 15)},
         {CP(3, 1), CP(3, 1), CP_NONE, CP(3, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 0, 0, 0,
         CRPM_V_ERROR, 0, "0000", "rank 2: its container is missing, its level-2 partner copy is missing too", 0},
        {"corrupt container and copy, previous damaged too: the error names them", 4,
         {intact(6, 60), damaged(6, 0), intact(6, 60), intact(6, 60)},
         {CP(6, 1), CP_BAD, CP(6, 1), CP(6, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 0, 0, 0,
         CRPM_V_ERROR, 0, "0000", "the level-2 partner copy of rank(s) 1 is corrupt; the previous epoch of rank(s) 1", 0},
        {"a copy of another run is not used", 4, {intact(3, 15), lost(), intact(3, 15), intact(3, 15)},
         {CP(3, 1), {1, 1, 3, 1, 8, 0}, CP(3, 1), CP(3, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 0, 0,
         0, CRPM_V_ERROR, 0, "0000", "partner copy is of another run", 0},
        {"a mismatched container is not replaced", 4,
         {intact(3, 15), open_error(CRPM_ERR_GEOMETRY), intact(3, 15), intact(3, 15)},
         {CP(3, 1), CP(3, 1), CP(3, 1), CP(3, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 0, 0, 0,
         CRPM_V_ERROR, 0, "0000", NULL, 0},
        {"a level-4 file of this run, newer than what the copies bring back, wins", 4,
         {intact(6, 60), damaged(6, 1), no_prev(intact(6, 60)), intact(6, 60)},
         {CP(2, 1), CP(2, 1), CP(2, 1), CP(2, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 1, 4, 4,
         CRPM_V_FOUND, 0, "0000", NULL, 7},
        {"... one that records another run does not", 4,
         {intact(6, 60), damaged(6, 1), no_prev(intact(6, 60)), intact(6, 60)},
         {CP(2, 1), CP(2, 1), CP(2, 1), CP(2, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 1, 4, 4,
         CRPM_V_L1, 2, "2222", NULL, 9},
        {"copies only, every container lost: the copies' newest common epoch", 4, {lost(), lost(), lost(), lost()},
         {CP(3, 1), CP(4, 1), CP(3, 0), CP(3, 1)}, {PAR_NONE, PAR_NONE, PAR_NONE, PAR_NONE}, 1, 0, 0, 0, 0,
         CRPM_V_L1, 3, "2222", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const scase *t = &cs[i];
        world w;
        memset(&w, 0, sizeof w);
        w.nranks = t->nranks;
        w.K = t->nranks;
        w.M = 1;
        for (int r = 0; r < t->nranks; r++) {
            memcpy(w.rows + r * CRPM_F_N, t->r[r].f, sizeof t->r[r].f);
            int64_t *o = w.l2own + r * L2_NFACTS;
            o[CRPM_L2F_OWNER] = r;
            o[L2_FILE] = t->copy[r].file;
            o[CRPM_L2F_OK] = t->copy[r].ok;
            o[CRPM_L2F_EPOCH] = t->copy[r].epoch;
            o[CRPM_L2F_PREV] = t->copy[r].prev;
            o[CRPM_L2F_RUN0] = t->copy[r].run;
            o[CRPM_L2F_BAD] = t->copy[r].bad;
            int64_t *q = w.l3own + r * L3F_N;
            q[L3F_OK] = t->parity[r].ok;
            q[L3F_EPOCH] = t->parity[r].epoch;
            q[L3F_PREV] = t->parity[r].prev;
            q[L3F_RUN0] = t->parity[r].run;
            q[L3F_BAD] = t->parity[r].bad;
            w.groups[r] = 0;
            w.members[r] = r;
        }
        w.p2 = (crpm_plan){.rows = w.rows, .own = w.l2own, .nranks = t->nranks};
        crpm_decide_src src[2];
        int nsrc = 0;
        if (t->l2)
            src[nsrc++] = (crpm_decide_src){2, "level-2 partner copy", &w, l2_src_offers, l2_src_can,
                                            l2_src_describe, w.rep2, 0};
        if (t->l3)
            src[nsrc++] = (crpm_decide_src){3, "level-3 parity container", &w, l3_src_offers, l3_src_can,
                                            l3_src_describe, w.rep3, 0};
        crpm_restart_facts f = {.nranks = t->nranks, .rank = w.rows, .nsrc = nsrc, .src = src};
        crpm_verdict v = crpm_decide_restart(&f);
        if (v.kind == CRPM_V_ASK) {
            f.asked = 1;
            f.found = t->found;
            f.found_epoch = t->found_epoch;
            f.found_id = t->found_id;
            f.found_has_run = t->found_run != 0;
            f.found_run[0] = t->found_run;
            v = crpm_decide_restart(&f);
        }
        char got[NR + 1] = "";
        for (int r = 0; r < t->nranks; r++) {
            int by = v.kind == CRPM_V_L1 ? 1 : 0;
            for (int k = 0; k < nsrc; k++)
                if (src[k].repair[r])
                    by = src[k].level;
            got[r] = (char)('0' + by);
        }
        int bad = v.kind != t->kind || (v.kind == CRPM_V_L1 && v.epoch != t->epoch) || strcmp(got, t->repairs) != 0;
        if (v.kind == CRPM_V_ERROR) {
            crpm_verdict_error(&f, &v, 0, "", NULL, "/ckpt/job", "job");
            bad |= (t->text && !strstr(crpm_last_error(), t->text)) || strstr(crpm_last_error(), "remove the");
        }
        CHECK(!bad, "sources: %s: kind %d (want %d), epoch %lld (want %lld), repairs %s (want %s): %s", t->name,
              v.kind, t->kind, (long long)v.epoch, (long long)t->epoch, got, t->repairs,
              v.kind == CRPM_V_ERROR ? crpm_last_error() : "");
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
                                .l1_rejected = t->l1_rejected, .asked = t->asked, .found = t->found,
                                .found_damaged = t->found_damaged, .unrecoverable_fresh = t->unrecoverable_fresh};
        crpm_verdict v = crpm_decide_restart(&f);
        int bad = v.kind != t->kind || v.l1 != t->l1 || (t->kind == CRPM_V_L1 && v.epoch != t->epoch) ||
                  v.set_aside != t->set_aside ||
                  (t->kind == CRPM_V_FULL && v.full_id != t->epoch);
        int code = v.kind == CRPM_V_ERROR ? crpm_verdict_error(&f, &v, 0, "", NULL, "/ckpt/job", "job") : -1;
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
    crpm_restart_facts f = {.nranks = 2, .rank = rows, .asked = 1};
    crpm_verdict v = crpm_decide_restart(&f);
    CHECK(crpm_verdict_error(&f, &v, 0, "slot checksum", NULL, "/d", "j") == CRPM_ERR_CORRUPT &&
              strstr(crpm_last_error(), "slot checksum"),
          "own open error: %s", crpm_last_error());
    source_cases();
    return check_summary("decide");
}

/* Restart on another number of ranks, the pure parts: the layout and its
 * serialized form, boxes, the runs of a redistribution window (against a
 * brute-force enumeration), and the restart plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "crpm_types.h"
#include "error.h"
#include "glayout.h"
#include "redist.h"
#include "reshape_plan.h"

static void test_layout(void)
{
    crpm_glayout l = {0}, p = {0};
    int64_t d2[2] = {40, 30}, d3[3] = {5, 6, 7}, off[3] = {10, 0, 0}, cnt[3] = {20, 30, 0};
    CHECK(crpm_glayout_define(&l, 1, 2, d2, CRPM_TC_DOUBLE, 8, "temp") == 0);
    CHECK(crpm_glayout_define(&l, -4, 3, d3, CRPM_TC_INT, 4, NULL) == 0);
    CHECK(crpm_glayout_define(&l, 2, 0, d2, CRPM_TC_INT, 4, NULL) == CRPM_ERR_INVAL);
    CHECK(crpm_glayout_define(&l, 2, 1, d2, CRPM_TC_INT, 4, "a/b") == CRPM_ERR_INVAL);
    CHECK(crpm_glayout_define(&l, 2, 1, d2, CRPM_TC_INT, 4, "rank_3") == CRPM_ERR_INVAL);
    CHECK(crpm_glayout_define(&l, 2, 1, d2, CRPM_TC_INT, 4, "temp") == CRPM_ERR_INVAL, "a name twice");
    CHECK(crpm_glayout_add_subset(&l, 1, 11, off, cnt) == 0);
    CHECK(crpm_glayout_add_subset(&l, 9, 12, off, cnt) == CRPM_ERR_INVAL, "undefined dataset");
    int64_t far[2] = {30, 0}, big[2] = {11, 30};
    CHECK(crpm_glayout_add_subset(&l, 1, 12, far, big) == CRPM_ERR_RANGE, "box outside the dataset");
    int64_t o3[3] = {1, 2, 3}, c3[3] = {4, 4, 4};
    CHECK(crpm_glayout_add_subset(&l, -4, 12, o3, c3) == 0);
    CHECK(crpm_glayout_add_replicated(&l, 0) == 0 && crpm_glayout_add_replicated(&l, 5) == 0);
    CHECK(crpm_glayout_add_replicated(&l, 12) == 0 && !crpm_glayout_subset(&l, 12), "replicated replaces a box");
    CHECK(crpm_glayout_add_subset(&l, -4, 12, o3, c3) == 0 && !crpm_glayout_replicated(&l, 12));
    size_t n = crpm_glayout_serialize(&l, NULL, 0);
    unsigned char *b = malloc(n);
    REQUIRE(b && crpm_glayout_serialize(&l, b, n) == n);
    CHECK(crpm_glayout_parse(b, n, &p, "test") == 0);
    CHECK(p.nds == 2 && p.nsub == 2 && p.nrepl == 2);
    for (int i = 0; i < l.nds; i++)
        CHECK(crpm_gds_same(&l.ds[i], crpm_glayout_dataset(&p, l.ds[i].gid)) &&
              strcmp(l.ds[i].name, crpm_glayout_dataset(&p, l.ds[i].gid)->name) == 0);
    const crpm_subset *s = crpm_glayout_subset(&p, 12);
    CHECK(s && s->gid == -4 && s->off[2] == 3 && s->cnt[1] == 4);
    CHECK(crpm_glayout_replicated(&p, 5) && !crpm_glayout_replicated(&p, 11));
    crpm_glayout_free(&p);
    for (size_t k = 0; k < n; k += 7) { /* any damaged byte is found */
        b[k] ^= 0x40;
        int rc = crpm_glayout_parse(b, n, &p, "test");
        CHECK(rc == CRPM_ERR_CORRUPT || rc == CRPM_ERR_VERSION, "byte %zu flipped: %d", k, rc);
        crpm_glayout_free(&p);
        b[k] ^= 0x40;
    }
    CHECK(crpm_glayout_parse(b, n - 8, &p, "test") == CRPM_ERR_CORRUPT, "truncated");
    crpm_glayout_free(&p);
    free(b);
    crpm_glayout_free(&l);
    uint64_t oa[2] = {0, 5}, ca[2] = {10, 10}, ob[2] = {4, 0}, cb[2] = {10, 7}, oi[2], ci[2];
    CHECK(crpm_box_intersect(2, oa, ca, ob, cb, oi, ci) == 12 && oi[0] == 4 && oi[1] == 5 && ci[0] == 6 && ci[1] == 2);
    ob[1] = 15;
    CHECK(crpm_box_intersect(2, oa, ca, ob, cb, oi, ci) == 0);
}

/* ---- runs against brute force ---------------------------------------------------- */
typedef struct pairs {
    uint64_t *se, *de;
    size_t n, cap;
} pairs;

static void add_run(void *arg, uint64_t se, uint64_t de, uint64_t n)
{
    pairs *p = arg;
    for (uint64_t i = 0; i < n; i++) {
        if (p->n == p->cap) {
            p->cap = p->cap ? 2 * p->cap : 256;
            p->se = realloc(p->se, p->cap * sizeof *p->se);
            p->de = realloc(p->de, p->cap * sizeof *p->de);
        }
        p->se[p->n] = se + i;
        p->de[p->n++] = de + i;
    }
}

static void random_box(uint64_t *seed, crpm_rd_box *b, int nd)
{
    memset(b, 0, sizeof *b);
    b->nd = nd;
    for (int k = 0; k < nd; k++) {
        b->off[k] = rnd_below(seed, 5);
        b->cnt[k] = 1 + rnd_below(seed, 6);
    }
}

static void test_runs(void)
{
    uint64_t seed = 30;
    for (int t = 0; t < 4000 && check_failures() < 10; t++) {
        int nd = 1 + (int)rnd_below(&seed, 4);
        crpm_rd_box s, d;
        random_box(&seed, &s, nd);
        random_box(&seed, &d, nd);
        uint64_t vol = crpm_box_volume(nd, s.cnt), e0 = rnd_below(&seed, vol), e1 = e0 + 1 + rnd_below(&seed, vol - e0);
        pairs got = {0}, want = {0};
        uint64_t n = crpm_rd_runs(&s, &d, e0, e1, add_run, &got);
        for (uint64_t e = e0; e < e1; e++) {
            uint64_t g[CRPM_GLAYOUT_MAX_DIMS], r = e, lin = 0;
            int in = 1;
            for (int k = nd - 1; k >= 0; k--) {
                g[k] = s.off[k] + r % s.cnt[k];
                r /= s.cnt[k];
            }
            for (int k = 0; k < nd; k++) {
                in &= g[k] >= d.off[k] && g[k] < d.off[k] + d.cnt[k];
                lin = lin * d.cnt[k] + (g[k] - d.off[k]);
            }
            if (in)
                add_run(&want, e, lin, 1);
        }
        CHECK(n == got.n && got.n == want.n, "trial %d: %llu runs' elements, %zu expected", t, (unsigned long long)n,
              want.n);
        for (size_t i = 0; i < got.n && i < want.n; i++)
            if (got.se[i] != want.se[i] || got.de[i] != want.de[i]) {
                CHECK(0, "trial %d: element %zu maps %llu->%llu, expected %llu->%llu", t, i,
                      (unsigned long long)got.se[i], (unsigned long long)got.de[i], (unsigned long long)want.se[i],
                      (unsigned long long)want.de[i]);
                break;
            }
        free(got.se);
        free(got.de);
        free(want.se);
        free(want.de);
    }
}

/* ---- the plan ----------------------------------------------------------------------- */
static crpm_rs_file file(int kind, int q, int nranks, int node, uint64_t epoch, uint8_t run, int64_t created)
{
    crpm_rs_file x;
    memset(&x, 0, sizeof x);
    x.kind = kind;
    x.q = q;
    x.nranks = nranks;
    x.node = node;
    x.epoch = epoch;
    x.user_id = epoch * 10;
    x.prev_user_id = (epoch - 1) * 10;
    x.prev_ok = 1;
    x.created_ns = created;
    x.time_ns = created + (int64_t)epoch;
    memset(x.run, run, 16);
    return x;
}

static void test_plan(void)
{
    int node_of[3] = {0, 0, 1};
    crpm_rs_file f[12];
    crpm_rs_plan p;
    /* four old ranks, two new ones on node 0 */
    for (int q = 0; q < 4; q++)
        f[q] = file(CRPM_RS_CONT, q, 4, 0, 5, 1, 100);
    crpm_rs_facts fa = {2, node_of, f, 4, NULL, 0, 0, 0};
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1 && p.N == 4 && p.epoch == 5 && p.user_id == 50);
    CHECK(p.reader[0] == 0 && p.reader[1] == 1, "old ranks 0 and 1 read by themselves: %d %d", p.reader[0],
          p.reader[1]);
    CHECK(p.reader[2] != p.reader[3], "the other two shared out");
    CHECK(p.held_level == 1);
    crpm_rs_plan_free(&p);
    /* one ahead with its previous epoch: epoch 5; without it: nothing */
    f[1] = file(CRPM_RS_CONT, 1, 4, 0, 6, 1, 100);
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1 && p.epoch == 5 && p.user_id == 50);
    crpm_rs_plan_free(&p);
    f[1].prev_ok = 0;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_ERROR);
    crpm_rs_plan_free(&p);
    f[1] = file(CRPM_RS_CONT, 1, 4, 0, 5, 1, 100);
    /* a damaged container is an erasure: its partner copy (node 1) serves */
    f[2].bad = 1;
    f[4] = file(CRPM_RS_COPY, 2, 4, 1, 5, 1, 100);
    fa.nf = 5;
    int nodes3[3] = {0, 0, 1};
    fa.node_of = nodes3;
    fa.M = 3;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1 && p.src[2] == 4 && p.reader[2] == 2 && p.held_level == 2,
          "copy of old rank 2 read on node 1 by rank 2: src %d reader %d", p.src ? p.src[2] : -1,
          p.reader ? p.reader[2] : -1);
    crpm_rs_plan_free(&p);
    /* the copy damaged too: an error naming the old rank and the damage, never a silent start */
    f[4].bad = 1;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_ERROR && p.code == CRPM_ERR_CORRUPT && strstr(p.msg, "rank(s) 2 ") &&
          strstr(p.msg, "checksums"), "%s", p.msg);
    crpm_rs_plan_free(&p);
    /* no container and no copy at all */
    fa.nf = 4;
    f[2].bad = 0;
    f[2].q = 3;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_ERROR && p.code == CRPM_ERR_MISSING && strstr(p.msg, "rank(s) 2 "),
          "%s", p.msg);
    crpm_rs_plan_free(&p);
    f[2].q = 2;
    f[4].bad = 0;
    fa.nf = 4;
    /* different checkpoints at one epoch (never the epoch before instead) */
    f[3].user_id = 51;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_ERROR && strstr(p.msg, "different checkpoints"), "%s", p.msg);
    crpm_rs_plan_free(&p);
    f[3].user_id = 50;
    /* a newer run that never completed a checkpoint holds nothing ... */
    f[4] = file(CRPM_RS_CONT, 0, 2, 0, 0, 2, 200);
    f[5] = file(CRPM_RS_CONT, 1, 2, 0, 1, 2, 200);
    fa.nf = 6;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1 && p.N == 4, "the older run is restored");
    crpm_rs_plan_free(&p);
    /* ... one that did is the newest */
    f[4] = file(CRPM_RS_CONT, 0, 2, 0, 1, 2, 200);
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1 && p.N == 2 && p.run[0] == 2);
    crpm_rs_plan_free(&p);
    fa.nf = 4;
    /* level 4: a newer file wins; an older one does not */
    crpm_rs_l4 l4 = {8, 70, 0, 0, 3, 100 + 99, "l4-70.h5"};
    fa.l4 = &l4;
    fa.nl4 = 1;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L4 && p.N == 8 && p.l4 == 0);
    crpm_rs_plan_free(&p);
    l4.time_ns = 100;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1);
    crpm_rs_plan_free(&p);
    /* nothing node-local: level 4, unless the ordinary choice is newer */
    fa.nf = 0;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L4);
    crpm_rs_plan_free(&p);
    fa.ordinary_l4 = 1;
    fa.ordinary_seq = 4;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_NONE);
    crpm_rs_plan_free(&p);
    fa.ordinary_l4 = 0;
    l4.bad = 1; /* the only checkpoint a damaged file: an error, never a fresh start */
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_ERROR && p.code == CRPM_ERR_CORRUPT, "%s", p.msg);
    crpm_rs_plan_free(&p);
    fa.nl4 = 0;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_NONE, "nothing at all: no reshape");
    crpm_rs_plan_free(&p);
    /* the newest data is this rank count's own (the ordinary restart chose
     * level 4 because one of its containers is damaged): no reshape, even
     * though a copy could complete the set */
    int nodes4[4] = {0, 0, 1, 1};
    for (int q = 0; q < 4; q++)
        f[q] = file(CRPM_RS_CONT, q, 4, q / 2, 5, 3, 300);
    f[2].bad = 1;
    f[4] = file(CRPM_RS_COPY, 2, 4, 0, 5, 3, 300);
    fa = (crpm_rs_facts){4, nodes4, f, 5, NULL, 0, 1, 7};
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_NONE, "own rank count: the ordinary restart decides (kind %d)",
          p.kind);
    crpm_rs_plan_free(&p);
}

/* Old ranks lost with their nodes, rebuilt from level 3: 8 old ranks as 4
 * nodes of 2 (groups of 4 nodes, parity 1), 6 new ranks as 6 nodes. */
static crpm_rs_file l3file(int kind, int q, uint64_t epoch, uint64_t par_epoch)
{
    crpm_rs_file x = file(kind, q, 8, q / 2, epoch, 4, 400);
    x.has_lay = 1;
    x.lay_node = q / 2;
    x.lay_nsize = 2;
    x.lay_nnodes = 4;
    x.lay_K = 4;
    x.lay_M = 1;
    if (kind == CRPM_RS_PARITY) { /* a parity container's user id is the job epoch */
        x.user_id = par_epoch;
        x.prev_user_id = par_epoch - 1;
    }
    return x;
}

static void test_plan_l3(void)
{
    int node_of[6] = {0, 1, 2, 3, 4, 5};
    crpm_rs_file f[16];
    int n = 0;
    for (int q = 0; q < 8; q++)
        if (q / 2 != 1) { /* node 1 lost */
            f[n++] = l3file(CRPM_RS_CONT, q, 5, 0);
            f[n++] = l3file(CRPM_RS_PARITY, q, 3, 5);
        }
    crpm_rs_facts fa = {6, node_of, f, n, NULL, 0, 0, 0};
    crpm_rs_plan p;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1 && p.epoch == 5 && p.nbuild == 2 && p.held_level == 3, "%s",
          p.msg);
    CHECK(p.build && p.src[2] < 0 && p.src[3] < 0 && p.build[2] == 2 && p.build[3] == 3 && p.reader[2] == 2,
          "old ranks 2 and 3 rebuilt by ranks 2 and 3");
    CHECK(p.build && p.member[2] == 1 && p.member[4] == 2 && p.group[2] == p.group[0] && p.group[3] == p.group[1] &&
          p.group[0] != p.group[1], "groups: nodes' same local ranks");
    CHECK(p.par && p.par[0] >= 0 && p.par_reader[0] == 0 && p.par[2] < 0, "parity of old rank 0 read on node 0");
    crpm_rs_plan_free(&p);
    /* one node's ranks unknown (no node_size): still told, as the only node no file names */
    for (int i = 0; i < n; i++)
        f[i].lay_nsize = 0;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1 && p.nbuild == 2 && p.node && p.node[3] == 1, "%s", p.msg);
    crpm_rs_plan_free(&p);
    /* survivors one ahead, parity not: the epoch before, from their previous slots */
    for (int i = 0; i < n; i++)
        if (f[i].kind == CRPM_RS_CONT)
            f[i] = l3file(CRPM_RS_CONT, f[i].q, 6, 0);
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_L1 && p.epoch == 5 && p.nbuild == 2, "%s", p.msg);
    crpm_rs_plan_free(&p);
    for (int i = 0; i < n; i++)
        if (f[i].kind == CRPM_RS_CONT)
            f[i] = l3file(CRPM_RS_CONT, f[i].q, 5, 0);
    /* old rank 0's parity damaged: codeword 0 of old rank 2 keeps 2 units of 3 */
    f[1].bad = 1;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_ERROR && p.code == CRPM_ERR_CORRUPT &&
          strstr(p.msg, "level-3 parity cannot rebuild them: old rank 2") && strstr(p.msg, "checksums"), "%s", p.msg);
    crpm_rs_plan_free(&p);
    f[1].bad = 0;
    /* node 2 lost too: two members of each group, parity 1 */
    fa.nf = 4;
    for (int i = 8, q = 6; q < 8; q++) {
        f[i++] = l3file(CRPM_RS_CONT, q, 5, 0);
        f[i++] = l3file(CRPM_RS_PARITY, q, 3, 5);
    }
    for (int i = 0; i < 4; i++)
        f[4 + i] = f[8 + i];
    fa.nf = 8;
    CHECK(crpm_rs_plan_make(&fa, &p) == CRPM_RS_ERROR && p.code == CRPM_ERR_MISSING &&
          strstr(p.msg, "rank(s) 2, 3, 4, 5 ") && strstr(p.msg, "level-3 parity cannot rebuild them"), "%s", p.msg);
    crpm_rs_plan_free(&p);
}

int main(void)
{
    test_layout();
    test_runs();
    test_plan();
    test_plan_l3();
    return check_summary("reshape.unit");
}

/* Crash at every drain of a parity container.  Three ranks, one node each,
 * form one level-3 group (K = 3, M = 1); each checkpoints changing arrays
 * into its own level-1 container and then through the real level-3 code as
 * crpm_checkpoint does for CRPM_L3 (write, agreement, committed), with the
 * level's own full re-encode check on (verify).  Rank 0's parity container
 * lives on the persistence simulator: at each of its fences crash images
 * (nothing in flight landed, all landed, random subsets torn at 8 bytes) are
 * opened as containers.  Once parity-0.crpm exists (it is made under .tmp
 * and renamed) every image of it must open and hold exactly the parity
 * committed before the step or exactly the one committed by it (epoch, user
 * id = job epoch, bytes), and when it holds the new one, its previous epoch
 * must roll back to the old.  After every level-3 step each rank's committed
 * parity file must be what an independent encode of the three ranks'
 * committed images gives (ISA-L through l3_code.h, the image layout of
 * L3SPEC.md), described by the job epoch.
 *
 *   test_l3_crash_sim <dir> [min_images] [random images per drain] */
#include <ftw.h>
#include <mpi.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "fsutil.h"
#include "l3_code.h"
#include "level.h"
#include "persist_sim.h"
#include "sim_image.h"

#define NR 3
#define MAXR 6
#define MAXP 4      /* parity regions (M = 1: one) */
#define MAXCAND 16  /* distinct new states kept per step */
#define JOB "l3sim"

static int rank;
static char top[CRPM_PATH_MAX / 2];
static uint64_t failures;
static char what[160];

static void fail(const char *fmt, ...) CHECK_PRINTF_(1, 2);
static void fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL rank %d (%s): %s\n", rank, what, msg); /* one write: ranks share stderr */
    failures++;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void die_unless(int ok, const char *fmt, ...) CHECK_PRINTF_(2, 3);
static void die_unless(int ok, const char *fmt, ...)
{
    if (ok)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (last error: %s)\n", crpm_last_error());
    va_end(ap);
    if (top[0]) /* the other ranks are killed with their files open */
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int agree(int rc)
{
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return worst;
}

/* ---- each rank's arrays ----------------------------------------------------- */

typedef struct workload {
    uint64_t rng;
    int live[MAXR];
    char *buf[MAXR];
    uint64_t bytes[MAXR];
} workload;

enum { P_FEW, P_MANY, P_GROW, P_NEW, P_NONE, P_NPAT };
static const char *pat_name[P_NPAT] = {"few", "many", "grow", "new", "none"};

static void wl_step(workload *w, int pat)
{
    int i;
    do
        i = (int)rnd_below(&w->rng, MAXR);
    while (!w->live[i]);
    if (pat == P_FEW) {
        for (int n = 1 + (int)rnd_below(&w->rng, 4); n > 0; n--)
            w->buf[i][rnd_below(&w->rng, w->bytes[i])] ^= (char)(1 + rnd_below(&w->rng, 255));
    } else if (pat == P_MANY) {
        for (int k = 0; k < MAXR; k++)
            if (w->live[k])
                fill_random(&w->rng, w->buf[k], w->bytes[k]);
    } else if (pat == P_GROW) {
        uint64_t nb = w->bytes[i] + 1 + rnd_below(&w->rng, 20000);
        w->buf[i] = realloc(w->buf[i], nb);
        REQUIRE(w->buf[i], "out of memory");
        fill_random(&w->rng, w->buf[i] + w->bytes[i], nb - w->bytes[i]);
        w->bytes[i] = nb;
    } else if (pat == P_NEW) {
        for (int k = 0; k < MAXR; k++)
            if (!w->live[k]) {
                w->live[k] = 1;
                w->bytes[k] = 1 + rnd_below(&w->rng, 30000);
                w->buf[k] = malloc(w->bytes[k]);
                REQUIRE(w->buf[k], "out of memory");
                fill_random(&w->rng, w->buf[k], w->bytes[k]);
                break;
            }
    }
}

/* ---- a parity container's committed state ------------------------------------ */

typedef struct pstate {
    int valid; /* 0: no file */
    uint64_t epoch, user;
    int n;
    int32_t id[MAXP];
    uint64_t bytes[MAXP];
    unsigned char *data[MAXP];
} pstate;

static void pstate_free(pstate *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->data[i]);
    memset(s, 0, sizeof *s);
}

static int pstate_read(crpm_container *c, pstate *s, char *why, size_t whylen)
{
    pstate_free(s);
    s->valid = 1;
    s->epoch = crpm_container_epoch(c);
    s->user = crpm_container_user_id(c);
    int n = crpm_container_nregions(c);
    if (n > MAXP) {
        snprintf(why, whylen, "%d parity regions", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        crpm_array a;
        crpm_container_region(c, i, &a);
        s->id[i] = a.id;
        s->bytes[i] = crpm_array_bytes(&a);
        s->data[i] = malloc(s->bytes[i] ? s->bytes[i] : 1);
        REQUIRE(s->data[i], "out of memory");
        s->n++;
        int rc = crpm_container_read_region(c, i, s->data[i]);
        if (rc != 0) {
            snprintf(why, whylen, "region %d does not read: %s", a.id, crpm_last_error());
            return -1;
        }
    }
    return 0;
}

static int pstate_eq(const pstate *a, const pstate *b)
{
    if (a->valid != b->valid || a->epoch != b->epoch || a->user != b->user || a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->id[i] != b->id[i] || a->bytes[i] != b->bytes[i] || memcmp(a->data[i], b->data[i], a->bytes[i]) != 0)
            return 0;
    return 1;
}

/* The committed state of a parity file, through a read-only open. */
static void pstate_of_file(const char *path, pstate *s)
{
    pstate_free(s);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return;
    crpm_open_opts o = {.path = path, .job_name = JOB, .rank = rank, .nranks = NR, .read_only = 1};
    crpm_container *c;
    char why[256] = "";
    if (crpm_format_open(&o, &c, NULL) != 0) {
        fail("%s does not open: %s", path, crpm_last_error());
        return;
    }
    if (pstate_read(c, s, why, sizeof why) != 0)
        fail("%s: %s", path, why);
    crpm_format_close(c);
}

/* ---- crash images of rank 0's parity container --------------------------------- */

static int g_active;               /* inside a level-3 write */
static char g_ppath[CRPM_PATH_MAX]; /* the real parity-0.crpm */
static pstate g_before;            /* its committed state before the step */
static pstate g_cand[MAXCAND];     /* other states images held, checked after the step */
static int g_ncand;
static uint64_t g_hits[MAXCAND];   /* images of each */
static uint64_t g_rng = 0x13a5eed;
static int g_random_per_drain = 12;
static sim_image_file g_img;
static char *img;
static size_t img_cap;
static double t_make, t_write, t_check; /* seconds making, writing and checking images */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static size_t g_media_size;
static uint64_t images, drains, tmp_drains, n_old, n_new, n_rolled, n_fresh;

static size_t *g_pages, g_pages_cap, g_npages; /* pages in flight at this drain */

/* first: the first image of a drain (written whole; the others differ from
 * it only in pages in flight) */
static void verify_image(const char *buf, size_t n, const char *kind, int first)
{
    double t0 = now_s();
    if (first)
        sim_image_write(&g_img, buf, n);
    else
        sim_image_write_pages(&g_img, buf, n, g_pages, g_npages);
    images++;
    t_write += now_s() - t0;
    t0 = now_s();
    crpm_open_opts o = {.path = g_img.path, .job_name = JOB, .rank = 0, .nranks = NR,
                        .persistence = CRPM_PERSIST_MSYNC};
    crpm_container *c;
    if (crpm_format_open(&o, &c, NULL) != 0) {
        fail("%s image of %s does not open: %s", kind, g_ppath, crpm_last_error());
        return;
    }
    pstate st = {0};
    char why[256] = "";
    if (pstate_read(c, &st, why, sizeof why) != 0) {
        fail("%s image: %s", kind, why);
    } else if (g_before.valid ? pstate_eq(&st, &g_before) : st.epoch == 0 && st.n == 0) {
        g_before.valid ? n_old++ : n_fresh++; /* before the step, or as created */
    } else {
        int j = 0;
        while (j < g_ncand && !pstate_eq(&st, &g_cand[j]))
            j++;
        if (j == g_ncand) {
            if (g_ncand == MAXCAND) {
                fail("%s image: more than %d distinct committed states in one step", kind, MAXCAND);
            } else {
                g_hits[g_ncand] = 0;
                g_cand[g_ncand++] = st;
                memset(&st, 0, sizeof st);
            }
        }
        if (j < MAXCAND)
            g_hits[j]++;
        /* the old parity stays recoverable under the new one */
        if (g_before.valid && g_before.epoch && crpm_container_prev_available(c)) {
            int rc = crpm_container_rollback(c);
            pstate pv = {0};
            if (rc != 0 || pstate_read(c, &pv, why, sizeof why) != 0 || !pstate_eq(&pv, &g_before))
                fail("%s image at parity epoch %llu: rollback does not give the old parity (rc %d %s %s)", kind,
                     (unsigned long long)st.epoch, rc, why, rc ? crpm_last_error() : "");
            else
                n_rolled++;
            pstate_free(&pv);
        }
    }
    pstate_free(&st);
    crpm_format_close(c);
    t_check += now_s() - t0;
}

static void on_drain(void *arg, crpm_media *m)
{
    (void)arg;
    if (!g_active)
        return;
    struct stat sb;
    if (stat(g_ppath, &sb) != 0) { /* the container being made under .tmp */
        tmp_drains++;
        return;
    }
    drains++;
    if (m->size > img_cap) {
        img = realloc(img, m->size);
        REQUIRE(img, "out of memory");
        img_cap = m->size;
    }
    static const char *kind[] = {"none-landed", "all-landed", "random"};
    /* every crash image equals the media outside the lines in flight */
    g_npages = sim_image_diff_pages(m->base, crpm_sim_media(m), m->size, &g_pages, &g_pages_cap);
    for (int i = 0; i < 2 + g_random_per_drain; i++) {
        int mode = i == 0 ? CRPM_SIM_NONE_LANDED : i == 1 ? CRPM_SIM_ALL_LANDED : CRPM_SIM_RANDOM;
        double t0 = now_s();
        crpm_sim_crash_image(m, mode, &g_rng, img);
        t_make += now_s() - t0;
        verify_image(img, m->size, kind[mode], i == 0);
    }
    g_media_size = m->size;
}

/* ---- the parity an independent encode gives ----------------------------------- */

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* The code's unit (L3SPEC.md): 64 KiB, but at least a block and at most a
 * segment (a segment when they do not divide). */
static uint64_t unit_of(uint64_t seg, uint64_t blk)
{
    uint64_t u = blk > 65536 ? blk : 65536;
    return u > seg || seg % u || u % blk ? seg : u;
}

/* This rank's image of its committed epoch (L3SPEC.md: a meta area of
 * "CRPML3M2", region count, user id and a 24-byte record per region, then
 * each region, every part starting on a unit, zero-padded), in units of seg
 * bytes. */
static unsigned char *own_image(crpm_container *c, uint64_t seg, uint64_t *nsegs)
{
    int n = crpm_container_nregions(c);
    uint64_t meta = 24 + 24 * (uint64_t)n, ns = (meta + seg - 1) / seg;
    for (int i = 0; i < n; i++) {
        crpm_array a;
        crpm_container_region(c, i, &a);
        ns += (crpm_array_bytes(&a) + seg - 1) / seg;
    }
    unsigned char *b = calloc(ns ? ns : 1, seg);
    REQUIRE(b, "out of memory");
    memcpy(b, "CRPML3M2", 8);
    put64(b + 8, (uint64_t)n);
    put64(b + 16, crpm_container_user_id(c));
    uint64_t next = (meta + seg - 1) / seg;
    for (int i = 0; i < n; i++) {
        crpm_array a;
        crpm_container_region(c, i, &a);
        unsigned char *r = b + 24 * (1 + i);
        memcpy(r, &a.id, 4);
        memcpy(r + 4, &a.type_code, 4);
        put64(r + 8, a.elem_size);
        put64(r + 16, a.count);
        die_unless(crpm_container_read_region(c, i, b + next * seg) == 0, "read region %d", a.id);
        next += (crpm_array_bytes(&a) + seg - 1) / seg;
    }
    *nsegs = ns;
    return b;
}

/* Collective: each rank's parity file against an encode of everyone's image. */
static void check_parity(crpm_container *own, const pstate *after, uint64_t ep)
{
    uint64_t seg = unit_of(crpm_container_segment_size(own), crpm_container_block_size(own)), ns = 0;
    unsigned char *mine = own_image(own, seg, &ns);
    uint64_t all_ns[NR];
    MPI_Allgather(&ns, 1, MPI_UINT64_T, all_ns, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    int cnt[NR], disp[NR], tot = 0;
    for (int r = 0; r < NR; r++) {
        cnt[r] = (int)(all_ns[r] * seg);
        disp[r] = tot;
        tot += cnt[r];
    }
    unsigned char *all = malloc(tot ? (size_t)tot : 1);
    REQUIRE(all, "out of memory");
    MPI_Allgatherv(mine, cnt[rank], MPI_BYTE, all, cnt, disp, MPI_BYTE, MPI_COMM_WORLD);
    free(mine);

    crpm_l3_layout lay = {NR, 1};
    int k = NR - 1, c = rank; /* member g holds parity row 0 of codeword g */
    uint64_t psegs = 0;
    for (int r = 0; r < NR; r++)
        if ((all_ns[r] + (uint64_t)k - 1) / (uint64_t)k > psegs)
            psegs = (all_ns[r] + (uint64_t)k - 1) / (uint64_t)k;
    size_t len = (size_t)(psegs * seg);
    unsigned char *data[NR], *par = calloc(len ? len : 1, 1);
    REQUIRE(par, "out of memory");
    for (int i = 0; i < k; i++) {
        int dm = crpm_l3_data_member(&lay, c, i), j = 0;
        while (crpm_l3_codeword_of(&lay, dm, j) != c)
            j++;
        data[i] = calloc(len ? len : 1, 1);
        REQUIRE(data[i], "out of memory");
        for (uint64_t t = 0; t < psegs; t++) {
            uint64_t s = t * (uint64_t)k + (uint64_t)j;
            if (s < all_ns[dm])
                memcpy(data[i] + t * seg, all + disp[dm] + s * seg, seg);
        }
    }
    crpm_l3_code code;
    die_unless(crpm_l3_code_init(&code, k, 1) == 0, "crpm_l3_code_init");
    crpm_l3_encode(&code, len, data, &par);
    crpm_l3_code_free(&code);

    if (!after->valid) {
        fail("no parity file after a level-3 checkpoint");
    } else if (after->user != ep) {
        fail("the parity describes job epoch %llu, the checkpoint was epoch %llu", (unsigned long long)after->user,
             (unsigned long long)ep);
    } else if (after->n != 1 || after->id[0] != c || after->bytes[0] < len) {
        fail("parity regions: %d, id %d, %llu bytes (expected codeword %d, >= %zu bytes)", after->n,
             after->n ? after->id[0] : -1, (unsigned long long)(after->n ? after->bytes[0] : 0), c, len);
    } else {
        size_t x = 0;
        while (x < len && after->data[0][x] == par[x])
            x++;
        if (x < len)
            fail("committed parity differs from an encode of the committed images at byte %zu of %zu", x, len);
        for (x = len; x < after->bytes[0] && !after->data[0][x]; x++)
            ;
        if (x < after->bytes[0])
            fail("committed parity is not zero beyond the images, at byte %zu", x);
    }
    for (int i = 0; i < k; i++)
        free(data[i]);
    free(par);
    free(all);
}

/* ---- the job ---------------------------------------------------------------- */

enum { K_L1, K_L3 };
typedef struct step {
    int pat, kind;
} step;
/* every path once: the first (full) encode, deltas of few and many blocks,
 * growth and a new array (the layout changes: full), a level-1 checkpoint
 * between level-3 ones (full), nothing changed */
static const step script[] = {
    {P_NONE, K_L3}, {P_FEW, K_L3},  {P_MANY, K_L3}, {P_GROW, K_L3}, {P_FEW, K_L3}, {P_NEW, K_L3},
    {P_FEW, K_L1},  {P_FEW, K_L3},  {P_NONE, K_L3}, {P_MANY, K_L1}, {P_GROW, K_L1}, {P_MANY, K_L3},
};

static void run(uint64_t seed, uint64_t seg, uint64_t blk, int nsteps, int wl_index)
{
    char dir[CRPM_PATH_MAX], own[CRPM_PATH_MAX], ipath[CRPM_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/rank%d-w%d", top, rank, wl_index);
    die_unless(crpm_mkdir_p(dir) == 0, "mkdir %s", dir);
    crpm_name_container(own, sizeof own, dir, rank);
    crpm_name_parity(g_ppath, sizeof g_ppath, dir, rank);
    snprintf(ipath, sizeof ipath, "%s/image.crpm", dir);
    sim_image_init(&g_img, ipath);

    workload w;
    memset(&w, 0, sizeof w);
    w.rng = seed * 7 + (uint64_t)rank;
    for (int i = 0; i < 3; i++) {
        w.live[i] = 1;
        /* with large segments, arrays of several units */
        w.bytes[i] = 500 + rnd_below(&w.rng, seg >= 131072 ? 150000 : 30000);
        w.buf[i] = malloc(w.bytes[i]);
        REQUIRE(w.buf[i], "out of memory");
        fill_random(&w.rng, w.buf[i], w.bytes[i]);
    }

    crpm_level_env env = {.comm = MPI_COMM_WORLD, .rank = rank, .nranks = NR, .job_name = JOB, .job_dir = dir,
                          .glbl_dir = ""};
    crpm_open_opts oo = {.path = own, .segment_size = seg, .block_size = blk, .job_name = JOB, .rank = rank,
                         .nranks = NR, .persistence = CRPM_PERSIST_MSYNC, .create = 1, .slot_size = 16384};
    crpm_container *c;
    die_unless(crpm_container_open(&oo, &c, NULL) == 0, "open %s", own);
    int members[NR], groups[NR];
    for (int r = 0; r < NR; r++) {
        members[r] = r;
        groups[r] = 0;
    }
    if (rank == 0) /* media mapped from now on (the parity container's) report their drains */
        crpm_sim_set_callback(on_drain, NULL);
    crpm_l3_opts lo = {.group_size = NR, .parity = 1, .members = members, .groups = groups,
                       .persistence = CRPM_PERSIST_MSYNC, .backend = rank == 0 ? &crpm_backend_sim : NULL,
                       .lock_wait_s = 1, .verify = 1};
    crpm_level l3;
    die_unless(crpm_level_l3(&l3, &env, &lo) == 0, "level 3");
    crpm_level_l3_attach(&l3, c);

    pstate after = {0};
    for (int k = 1; k <= nsteps; k++) {
        uint64_t pr = seed * 1000 + (uint64_t)k; /* the same step on every rank */
        step s = k <= (int)(sizeof script / sizeof script[0])
                     ? script[k - 1]
                     : (step){(int)rnd_below(&pr, P_NPAT), rnd_below(&pr, 4) ? K_L3 : K_L1};
        wl_step(&w, s.pat);
        for (int i = 0; i < MAXR; i++)
            if (w.live[i])
                die_unless(crpm_container_protect(c, 10 + i, w.buf[i], w.bytes[i], CRPM_TC_BYTE, 1) == 0,
                           "protect");
        snprintf(what, sizeof what, "workload %d (segment %llu) step %d: %s, %s", wl_index, (unsigned long long)seg,
                 k, s.kind == K_L3 ? "L3" : "L1", pat_name[s.pat]);
        int64_t id = 1000 + k;
        crpm_stats_t st;
        memset(&st, 0, sizeof st);
        die_unless(agree(crpm_container_checkpoint(c, (uint64_t)id, &st)) == 0, "%s: level-1 checkpoint", what);
        uint64_t ep = crpm_container_epoch(c);
        die_unless(ep == (uint64_t)k, "%s: level-1 epoch %llu", what, (unsigned long long)ep);
        if (s.kind == K_L1)
            continue;

        /* crpm_checkpoint's sequence for CRPM_L3 */
        pstate_of_file(g_ppath, &g_before);
        g_ncand = 0;
        g_active = 1;
        int c3 = 0;
        int rc = agree(l3.ops->write(&l3, NULL, 0, id, &st, &c3));
        g_active = 0;
        if (rc != 0)
            l3.ops->undo(&l3);
        die_unless(rc == 0, "%s: level-3 write", what);
        l3.ops->committed(&l3, id);

        pstate_of_file(g_ppath, &after);
        for (int j = 0; j < g_ncand; j++) {
            if (!pstate_eq(&g_cand[j], &after))
                fail("an image holds parity epoch %llu (job epoch %llu, %d regions), neither the parity before the "
                     "step (epoch %llu, job epoch %llu) nor after it (epoch %llu, job epoch %llu)",
                     (unsigned long long)g_cand[j].epoch, (unsigned long long)g_cand[j].user, g_cand[j].n,
                     (unsigned long long)g_before.epoch, (unsigned long long)g_before.user,
                     (unsigned long long)after.epoch, (unsigned long long)after.user);
            else
                n_new += g_hits[j];
            pstate_free(&g_cand[j]);
        }
        g_ncand = 0;
        check_parity(c, &after, ep);
    }
    pstate_free(&after);
    pstate_free(&g_before);
    crpm_sim_set_callback(NULL, NULL);
    l3.ops->remove(&l3);
    crpm_level_close(&l3);
    crpm_container_close(c);
    sim_image_done(&g_img);
    MPI_Barrier(MPI_COMM_WORLD);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (int i = 0; i < MAXR; i++)
        free(w.buf[i]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    die_unless(nranks == NR, "run with %d ranks (%d)", NR, nranks);
    const char *base = argc > 1 ? argv[1] : "/dev/shm";
    uint64_t min_images = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000;
    g_random_per_drain = argc > 3 ? atoi(argv[3]) : 12;
    long pid = (long)getpid();
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(top, sizeof top, "%s/crpm-l3crash-%ld", base, pid);
    die_unless(rank != 0 || crpm_mkdir_p(top) == 0, "mkdir %s", top);
    MPI_Barrier(MPI_COMM_WORLD);

    static const struct { uint64_t seg, blk; } geo[] = {{4096, 256}, {1024, 64}, {16384, 512}, {2048, 2048},
                                                          {131072, 256} /* 2 units a segment: grown arrays span both */};
    int runs = 0;
    double t_start = now_s();
    for (;;) {
        size_t g = (size_t)runs % (sizeof geo / sizeof geo[0]);
        run((uint64_t)runs + 1, geo[g].seg, geo[g].blk, 30, runs);
        runs++;
        if (rank == 0) {
            printf("workload %d: %llu images so far, %.1f s\n", runs - 1, (unsigned long long)images, now_s() - t_start);
            fflush(stdout);
        }
        uint64_t more = rank == 0 && !failures && (images < min_images || runs < 2);
        MPI_Bcast(&more, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        if (!more)
            break;
    }
    uint64_t f = failures, all = 0;
    MPI_Allreduce(&f, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("l3 crash images checked: %llu at %llu drains of parity-0.crpm in %d workloads (%llu drains of the "
               "container under .tmp); %llu as created, %llu at the old parity, %llu at the new one, %llu rolled "
               "back to the old too; failures: %llu; parity file %zu bytes; seconds making images %.1f, writing %.1f, "
               "checking %.1f\n",
               (unsigned long long)images, (unsigned long long)drains, runs, (unsigned long long)tmp_drains,
               (unsigned long long)n_fresh, (unsigned long long)n_old, (unsigned long long)n_new,
               (unsigned long long)n_rolled, (unsigned long long)all, g_media_size, t_make, t_write, t_check);
        if (!all && images < min_images) {
            printf("FAIL: fewer than %llu images\n", (unsigned long long)min_images);
            all = 1;
        }
    }
    MPI_Bcast(&all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        rmdir(top);
    free(img);
    free(g_pages);
    MPI_Finalize();
    return all ? 1 : 0;
}

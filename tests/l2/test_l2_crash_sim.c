/* Crash at every drain of a partner copy.  Two ranks, each with its own
 * level-1 container and a level 2 holding the other's copy, checkpoint
 * changing arrays through the real level-2 code (whole-file syncs, new and
 * in place, and differential stages of one and two epochs).  Rank 1's copy of
 * rank 0's container lives on the persistence simulator: at each of its
 * fences crash images (nothing in flight landed, all landed, random subsets
 * torn at 8 bytes) are opened as rank 0's container.  Each must be either
 * unopenable with a cleared commit word during a whole-file sync, or hold the
 * copy's previous or new epoch with exactly rank 0's data of that epoch (and
 * its epoch-1 too when it says that one is recoverable).  After every level-2
 * step the copies must be byte-identical to their owners' files and wholly
 * durable.
 *
 *   test_l2_crash_sim <dir> [min_images] [random images per drain] */
#include <fcntl.h>
#include <ftw.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "fsutil.h"
#include "level.h"
#include "persist_sim.h"
#include "sim_image.h"

#define MAXR 6
#define MAXE 64
#define JOB "l2sim"

/* ---- workloads: both ranks generate both, so rank 1 knows rank 0's data --- */

typedef struct workload {
    uint64_t rng;
    int live[MAXR];
    int32_t id[MAXR];
    char *buf[MAXR];
    uint64_t bytes[MAXR];
} workload;

typedef struct snap {
    int n;
    int32_t id[MAXR];
    uint64_t bytes[MAXR];
    char *data[MAXR];
} snap;

/* P_FRESH (scripted only): every array shrinks and the owners start over
 * with new, smaller containers, so the copies must be written anew. */
enum { P_FEW, P_MANY, P_GROW, P_NEW, P_NONE, P_RUN, P_SHRINK, P_NPAT, P_FRESH = P_NPAT };
static const char *pat_name[P_NPAT + 1] = {"few", "many", "grow", "new", "none", "run", "shrink", "fresh"};

static void wl_init(workload *w, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->rng = seed;
    for (int i = 0; i < 3; i++) {
        w->live[i] = 1;
        w->id[i] = 10 + i;
        w->bytes[i] = 1000 + rnd_below(&w->rng, 40000);
        w->buf[i] = malloc(w->bytes[i]);
        fill_random(&w->rng, w->buf[i], w->bytes[i]);
    }
}

static void wl_free(workload *w)
{
    for (int i = 0; i < MAXR; i++)
        free(w->buf[i]);
    memset(w, 0, sizeof *w);
}

static int pick_live(workload *w)
{
    for (;;) {
        int i = (int)rnd_below(&w->rng, MAXR);
        if (w->live[i] && w->bytes[i])
            return i;
    }
}

static void wl_step(workload *w, int pat)
{
    int i = pick_live(w);
    switch (pat) {
    case P_FEW: /* a few bytes in one or two arrays: a few blocks */
        for (int k = 0; k < 2; k++, i = pick_live(w))
            for (int n = 1 + (int)rnd_below(&w->rng, 4); n > 0; n--)
                w->buf[i][rnd_below(&w->rng, w->bytes[i])] ^= (char)(1 + rnd_below(&w->rng, 255));
        break;
    case P_MANY: /* every block of every array */
        for (int k = 0; k < MAXR; k++)
            if (w->live[k])
                fill_random(&w->rng, w->buf[k], w->bytes[k]);
        break;
    case P_GROW: {
        uint64_t nb = w->bytes[i] + 1 + rnd_below(&w->rng, 30000);
        w->buf[i] = realloc(w->buf[i], nb);
        fill_random(&w->rng, w->buf[i] + w->bytes[i], nb - w->bytes[i]);
        w->bytes[i] = nb;
        break;
    }
    case P_NEW:
        for (int k = 0; k < MAXR; k++)
            if (!w->live[k]) {
                w->live[k] = 1;
                w->id[k] = 100 + k;
                w->bytes[k] = 1 + rnd_below(&w->rng, 50000);
                w->buf[k] = malloc(w->bytes[k]);
                fill_random(&w->rng, w->buf[k], w->bytes[k]);
                break;
            }
        break;
    case P_RUN: {
        uint64_t off = rnd_below(&w->rng, w->bytes[i]), len = 1 + rnd_below(&w->rng, w->bytes[i] - off);
        fill_random(&w->rng, w->buf[i] + off, len);
        break;
    }
    case P_SHRINK:
        w->bytes[i] = 1 + rnd_below(&w->rng, w->bytes[i]);
        break;
    case P_FRESH:
        for (int k = 0; k < MAXR; k++)
            if (w->live[k])
                w->bytes[k] = 1 + rnd_below(&w->rng, w->bytes[k] < 4000 ? w->bytes[k] : 4000);
        break;
    default: /* P_NONE */
        break;
    }
}

static void take_snap(snap *s, const workload *w)
{
    for (int i = 0; i < s->n; i++)
        free(s->data[i]);
    memset(s, 0, sizeof *s);
    for (int i = 0; i < MAXR; i++) {
        if (!w->live[i])
            continue;
        s->id[s->n] = w->id[i];
        s->bytes[s->n] = w->bytes[i];
        s->data[s->n] = malloc(w->bytes[i] ? w->bytes[i] : 1);
        memcpy(s->data[s->n], w->buf[i], w->bytes[i]);
        s->n++;
    }
}

/* ---- checking images of rank 0's copy (rank 1) ----------------------------- */

static snap refs[MAXE + 1];     /* rank 0's arrays at each epoch */
static crpm_level *g_l2;        /* rank 1's level 2 */
static int g_active;            /* inside a level-2 write or sync */
static int g_sync;              /* a whole-file sync is expected */
static uint64_t g_epoch;        /* the owner's epoch the copy is brought to */
static uint64_t g_rng = 0x5eed;
static int g_random_per_drain = 12;
static char *img;
static size_t img_cap;
static uint64_t images, failures, n_unopened, n_at_old, n_at_new, n_rolled, n_newfile, drains;
static char what[128];
static uint64_t n_stages[3]; /* level-2 steps by stages: 0 = a sync */
static uint64_t g_first_old, g_last_old; /* the copy's epochs seen at drains of a step (0: none) */

static int matches(crpm_container *c, const snap *s, char *why, size_t whylen)
{
    int n = crpm_container_nregions(c);
    if (n != s->n) {
        snprintf(why, whylen, "%d arrays, expected %d", n, s->n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        crpm_array a;
        crpm_container_region(c, i, &a);
        int j = 0;
        while (j < s->n && s->id[j] != a.id)
            j++;
        if (j == s->n || s->bytes[j] != crpm_array_bytes(&a)) {
            snprintf(why, whylen, "array %d: %llu bytes unexpected", a.id, (unsigned long long)crpm_array_bytes(&a));
            return -1;
        }
        char *tmp = malloc(s->bytes[j] ? s->bytes[j] : 1);
        int rc = crpm_container_read_region(c, i, tmp);
        int bad = rc != 0 || memcmp(tmp, s->data[j], s->bytes[j]) != 0;
        free(tmp);
        if (bad) {
            snprintf(why, whylen, "array %d: contents differ (rc %d %s)", a.id, rc, rc ? crpm_last_error() : "");
            return -1;
        }
    }
    return 0;
}

/* The image file stays between images (tests/common/sim_image.h). */
static sim_image_file img_file;

static void fail(const char *fmt, ...) CHECK_PRINTF_(1, 2);
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL rank 1 (%s): ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

/* One image of the copy: `old` (when has_old) is the copy's epoch before the
 * step, `next` the epoch the step brings it to. */
static void verify_image(const char *buf, size_t n, int has_old, uint64_t old, uint64_t next, const char *kind)
{
    sim_image_write(&img_file, buf, n);
    images++;
    uint64_t word;
    memcpy(&word, buf + CRPM_WORD_OFF, sizeof word);
    crpm_open_opts o = {.path = img_file.path, .job_name = JOB, .rank = 0, .nranks = 2,
                        .persistence = CRPM_PERSIST_MSYNC};
    crpm_container *c;
    if (crpm_format_open(&o, &c, NULL) != 0) {
        if (g_sync && word == 0) { /* a sync clears the word first and writes it last */
            n_unopened++;
            return;
        }
        fail("%s image does not open (commit word %#llx, %s): %s", kind, (unsigned long long)word,
             g_sync ? "sync" : "stage", crpm_last_error());
        return;
    }
    char why[256] = "";
    uint64_t e = crpm_container_epoch(c);
    if (!(e == next || (has_old && e == old)) || e < 1 || e > MAXE) {
        fail("%s image holds epoch %llu, allowed %s%llu%s%llu", kind, (unsigned long long)e,
             has_old ? "" : "(no old) ", (unsigned long long)old, " or ", (unsigned long long)next);
    } else if (matches(c, &refs[e], why, sizeof why) != 0) {
        fail("%s image at epoch %llu: %s", kind, (unsigned long long)e, why);
    } else {
        e == next ? n_at_new++ : n_at_old++;
        if (crpm_container_prev_available(c)) {
            int rc = crpm_container_rollback(c);
            if (rc != 0 || crpm_container_epoch(c) != e - 1 || matches(c, &refs[e - 1], why, sizeof why) != 0)
                fail("%s image: rollback from epoch %llu: rc %d %s %s", kind, (unsigned long long)e, rc, why,
                     rc ? crpm_last_error() : "");
            else
                n_rolled++;
        }
    }
    crpm_format_close(c);
}

static void ensure_img(size_t n)
{
    if (n > img_cap) {
        img = realloc(img, n);
        REQUIRE(img, "out of memory");
        img_cap = n;
    }
}

static void on_drain(void *arg, crpm_media *m)
{
    (void)arg;
    if (!g_active)
        return;
    drains++;
    crpm_container *copy = crpm_level_l2_copy(g_l2, 0);
    int in_place = copy && crpm_container_media(copy) == m;
    /* a new file (first copy, or one written anew) holds nothing before */
    uint64_t old = in_place ? crpm_container_epoch(copy) : 0;
    uint64_t next = g_sync ? g_epoch : old + 1;
    if (in_place) {
        if (!g_first_old)
            g_first_old = old;
        g_last_old = old;
    }
    if (!in_place) {
        n_newfile++;
        if (!g_sync)
            fail("a new file is written outside a whole-file sync");
    }
    ensure_img(m->size);
    crpm_sim_crash_image(m, CRPM_SIM_NONE_LANDED, &g_rng, img);
    verify_image(img, m->size, in_place, old, next, "none-landed");
    crpm_sim_crash_image(m, CRPM_SIM_ALL_LANDED, &g_rng, img);
    verify_image(img, m->size, in_place, old, next, "all-landed");
    for (int i = 0; i < g_random_per_drain; i++) {
        crpm_sim_crash_image(m, CRPM_SIM_RANDOM, &g_rng, img);
        verify_image(img, m->size, in_place, old, next, "random");
    }
}

/* ---- the job ---------------------------------------------------------------- */

static int rank;
static char top[CRPM_PATH_MAX / 2];

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
    if (top[0]) /* the other rank is killed with its files open */
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* rc agreed over the job (the library's collective rule). */
static int agree(int rc)
{
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return worst;
}

static int read_file(const char *path, char **out, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc(*n ? *n : 1);
    size_t got = fread(*out, 1, *n, f);
    fclose(f);
    return got == *n ? 0 : -1;
}

/* The copy this rank holds equals its owner's file, byte for byte. */
static void compare_files(const char *copy_path, const char *owner_path, int step)
{
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int ra = read_file(copy_path, &a, &na), rb = read_file(owner_path, &b, &nb);
    if (ra || rb || na != nb || memcmp(a, b, na) != 0) {
        size_t d = 0;
        while (!ra && !rb && d < na && d < nb && a[d] == b[d])
            d++;
        fprintf(stderr, "FAIL rank %d step %d: %s (%zu bytes) differs from %s (%zu bytes) first at byte %zu\n", rank,
                step, copy_path, na, owner_path, nb, d);
        failures++;
    }
    free(a);
    free(b);
}

typedef struct step {
    int pat;
    int kind; /* K_L1: level 1 only, K_L2: level 2, K_SYNC: level 1, then crpm_level_l2_sync */
    int reattach; /* 1 << r: rank r attaches its container again (its copy's state becomes unknown) */
} step;
enum { K_L1, K_L2, K_SYNC };
static const char *kind_name[] = {"L1", "L2", "sync"};

/* The fixed part: each mode of level 2 at least once, then random steps. */
static const step script[] = {
    {P_NONE, K_L2, 0},                      /* first copy: a new file */
    {P_FEW, K_L2, 0},                       /* one stage, few blocks */
    {P_MANY, K_L1, 0}, {P_GROW, K_L2, 0},   /* two stages, many blocks then growth */
    {P_NONE, K_L2, 0},                      /* one stage, nothing changed */
    {P_NEW, K_L1, 0}, {P_FEW, K_L2, 0},     /* two stages, a new array */
    {P_RUN, K_L1, 0}, {P_FEW, K_L1, 0}, {P_GROW, K_L2, 0}, /* three epochs behind: sync in place */
    {P_MANY, K_L2, 0},                      /* one stage after a sync */
    {P_FEW, K_SYNC, 0},                     /* crpm_level_l2_sync */
    {P_SHRINK, K_L2, 0}, {P_NONE, K_L1, 0}, {P_NONE, K_L2, 0},
    {P_GROW, K_L1, 0}, {P_MANY, K_L2, 0},
    {P_FRESH, K_L2, 0},                     /* new owner containers, smaller than the copies */
    {P_FEW, K_L2, 0}, {P_GROW, K_L1, 0}, {P_RUN, K_L2, 0},
    {P_FEW, K_L2, 1},                       /* rank 0's copy is synced while rank 1's gets a stage */
    {P_MANY, K_L1, 0}, {P_FEW, K_L2, 2},    /* and the other way round, with two stages */
};

static void run(uint64_t seed, uint64_t seg, uint64_t blk, int nsteps, const char *top, int wl_index)
{
    char dir[2][CRPM_PATH_MAX], own[2][CRPM_PATH_MAX], copy[CRPM_PATH_MAX];
    for (int r = 0; r < 2; r++) {
        snprintf(dir[r], sizeof dir[r], "%s/rank%d-w%d", top, r, wl_index);
        crpm_name_container(own[r], sizeof own[r], dir[r], r);
    }
    die_unless(crpm_mkdir_p(dir[rank]) == 0, "mkdir %s", dir[rank]);
    crpm_name_partner(copy, sizeof copy, dir[rank], 1 - rank);
    {
        char ipath[CRPM_PATH_MAX + 16];
        snprintf(ipath, sizeof ipath, "%s/image.crpm", dir[rank]);
        sim_image_init(&img_file, ipath);
    }
    workload w[2];
    wl_init(&w[0], seed * 2 + 1);
    wl_init(&w[1], seed * 2 + 2);

    crpm_level_env env = {.comm = MPI_COMM_WORLD, .rank = rank, .nranks = 2, .job_name = JOB, .job_dir = dir[rank],
                          .glbl_dir = ""};
    crpm_open_opts oo = {.path = own[rank], .segment_size = seg, .block_size = blk, .job_name = JOB, .rank = rank,
                         .nranks = 2, .persistence = CRPM_PERSIST_MSYNC, .create = 1, .slot_size = 16384};
    crpm_container *c;
    crpm_unlink_quiet(own[rank]);
    die_unless(crpm_container_open(&oo, &c, NULL) == 0, "open %s", own[rank]);
    crpm_level l1, l2;
    crpm_level_l1(&l1, &env, c);
    int other = 1 - rank;
    if (rank == 1) /* media mapped from now on report their drains */
        crpm_sim_set_callback(on_drain, NULL);
    crpm_l2_opts lo = {.partner = other, .owners = &other, .nowners = 1, .persistence = CRPM_PERSIST_MSYNC,
                       .backend = rank == 1 ? &crpm_backend_sim : NULL, .lock_wait_s = 1};
    die_unless(crpm_level_l2(&l2, &env, &lo) == 0, "level 2");
    crpm_level_l2_attach(&l2, c);
    g_l2 = &l2;
    /* the level's model: a sync when the copy's state is unknown or more
     * than two epochs are pending */
    int unknown = 1, pending = 0;
    uint64_t sent = 0, base = 0; /* epoch e of the containers is step base + e */

    for (int k = 1; k <= nsteps; k++) {
        uint64_t pr = seed * 1000 + (uint64_t)k;
        step s = k <= (int)(sizeof script / sizeof script[0])
                     ? script[k - 1]
                     : (step){(int)rnd_below(&pr, P_NPAT),
                              (int)rnd_below(&pr, 5) < 3 ? K_L2 : (int)rnd_below(&pr, 2) ? K_L1 : K_SYNC, 0};
        for (int r = 0; r < 2; r++)
            wl_step(&w[r], s.pat);
        if (s.pat == P_FRESH) {
            /* as a restart with a lost container: a new one, attached */
            crpm_level_l2_attach(&l2, NULL);
            crpm_level_close(&l1);
            crpm_unlink_quiet(own[rank]);
            die_unless(crpm_container_open(&oo, &c, NULL) == 0, "reopen %s", own[rank]);
            crpm_level_l1(&l1, &env, c);
            crpm_level_l2_attach(&l2, c);
            unknown = 1;
            pending = 0;
            base = (uint64_t)k - 1;
            MPI_Barrier(MPI_COMM_WORLD); /* rank 0's file is new before rank 1 compares */
        }
        if (s.reattach & (1 << rank))
            crpm_level_l2_attach(&l2, c);
        if (s.reattach & 1) { /* the model follows rank 0's copy */
            unknown = 1;
            pending = 0;
        }
        uint64_t ep = (uint64_t)k - base;
        for (int i = 0; i < MAXR; i++) {
            workload *m = &w[rank];
            if (!m->live[i])
                continue;
            int es = m->bytes[i] % 8 == 0 ? 8 : 1;
            crpm_array a = {m->id[i], CRPM_TC_BYTE, (uint64_t)es, m->bytes[i] / (uint64_t)es, m->buf[i], NULL, NULL};
            die_unless(l1.ops->protect(&l1, &a) == 0, "protect");
        }
        take_snap(&refs[ep], &w[0]);
        snprintf(what, sizeof what, "workload %d step %d: %s, %s", wl_index, k, kind_name[s.kind], pat_name[s.pat]);

        /* crpm_checkpoint's sequence for CRPM_L1 / CRPM_L2 */
        crpm_stats_t st;
        memset(&st, 0, sizeof st);
        int committed = 0;
        int rc = agree(l1.ops->write(&l1, NULL, 0, k, &st, &committed));
        die_unless(rc == 0 && committed && crpm_container_epoch(c) == ep, "%s: level-1 write", what);
        l2.ops->event(&l2, CRPM_EV_COMMITTED);
        if (pending == 2) {
            unknown = 1;
            pending = 0;
        }
        pending++;
        if (s.kind == K_L1)
            continue;
        g_epoch = ep;
        g_sync = unknown || s.kind == K_SYNC;
        g_first_old = g_last_old = 0;
        int stages = g_sync ? 0 : pending;
        g_active = 1;
        if (s.kind == K_L2) {
            int c2 = 0;
            rc = agree(l2.ops->write(&l2, NULL, 0, k, &st, &c2));
            g_active = 0;
            die_unless(rc == 0, "%s: level-2 write", what);
            l2.ops->committed(&l2, k);
        } else {
            rc = agree(crpm_level_l2_sync(&l2, &sent));
            g_active = 0;
            die_unless(rc == 0, "%s: crpm_level_l2_sync", what);
        }
        unknown = 0;
        pending = 0;
        /* differential: one failure-atomic stage per pending epoch, in order */
        if (rank == 1 && stages && (g_first_old != ep - (uint64_t)stages || g_last_old != ep - 1))
            fail("%d stage(s) expected: the copy went through epochs %llu..%llu to %llu", stages,
                 (unsigned long long)g_first_old, (unsigned long long)g_last_old, (unsigned long long)ep);
        n_stages[stages]++;
        MPI_Barrier(MPI_COMM_WORLD); /* both copies complete */
        compare_files(copy, own[other], k);
        crpm_container *cp = crpm_level_l2_copy(&l2, 0);
        if (!cp) {
            fprintf(stderr, "FAIL rank %d (%s): the copy is not open after the step\n", rank, what);
            failures++;
        } else if (crpm_container_epoch(cp) != ep) {
            fprintf(stderr, "FAIL rank %d (%s): the copy is at epoch %llu\n", rank, what,
                    (unsigned long long)crpm_container_epoch(cp));
            failures++;
        } else if (rank == 1) {
            /* what is durable alone holds the new epoch */
            crpm_media *m = crpm_container_media(cp);
            if (memcmp(crpm_sim_media(m), m->base, m->size) != 0)
                fail("stores of the copy are not all durable after the step");
            ensure_img(m->size);
            memcpy(img, crpm_sim_media(m), m->size);
            int sv = g_sync;
            g_sync = 0;
            verify_image(img, m->size, 0, 0, ep, "durable");
            g_sync = sv;
        }
        MPI_Barrier(MPI_COMM_WORLD); /* the files stay until both compared */
    }
    g_l2 = NULL;
    crpm_sim_set_callback(NULL, NULL);
    l2.ops->remove(&l2);
    crpm_level_close(&l2);
    crpm_level_close(&l1);
    crpm_unlink_quiet(own[rank]);
    char lock[CRPM_PATH_MAX];
    crpm_name_rank_lock(lock, sizeof lock, dir[rank], rank);
    crpm_unlink_quiet(lock);
    sim_image_done(&img_file);
    MPI_Barrier(MPI_COMM_WORLD);
    rmdir(dir[rank]);
    for (int r = 0; r < 2; r++)
        wl_free(&w[r]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    die_unless(nranks == 2, "run with 2 ranks (%d)", nranks);
    const char *base = argc > 1 ? argv[1] : "/dev/shm";
    uint64_t min_images = argc > 2 ? strtoull(argv[2], NULL, 10) : 20000;
    g_random_per_drain = argc > 3 ? atoi(argv[3]) : 12;
    long id = (long)getpid();
    MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(top, sizeof top, "%s/crpm-l2crash-%ld", base, id);
    die_unless(rank != 0 || crpm_mkdir_p(top) == 0, "mkdir %s", top);
    MPI_Barrier(MPI_COMM_WORLD);

    static const struct { uint64_t seg, blk; } geo[] = {{4096, 256}, {1024, 64}, {16384, 512}, {2048, 2048}};
    int runs = 0;
    for (;;) {
        size_t g = (size_t)runs % (sizeof geo / sizeof geo[0]);
        run((uint64_t)runs + 1, geo[g].seg, geo[g].blk, 40, top, runs);
        runs++;
        /* rank 1 decides whether enough images were checked */
        uint64_t more = rank == 1 && !failures && (images < min_images || runs < 2);
        MPI_Bcast(&more, 1, MPI_UINT64_T, 1, MPI_COMM_WORLD);
        if (!more)
            break;
    }
    uint64_t f = failures, all = 0;
    MPI_Allreduce(&f, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 1)
        printf("l2 crash images checked: %llu at %llu drains of the copy in %d workloads (%llu unopenable during a "
               "sync, %llu at the old epoch, %llu at the new one, %llu rolled back too, %llu of new files); "
               "level-2 steps: %llu syncs, %llu of one stage, %llu of two; failures: %llu\n",
               (unsigned long long)images, (unsigned long long)drains, runs, (unsigned long long)n_unopened,
               (unsigned long long)n_at_old, (unsigned long long)n_at_new, (unsigned long long)n_rolled,
               (unsigned long long)n_newfile, (unsigned long long)n_stages[0], (unsigned long long)n_stages[1],
               (unsigned long long)n_stages[2], (unsigned long long)all);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        rmdir(top);
    for (int i = 0; i <= MAXE; i++)
        for (int j = 0; j < refs[i].n; j++)
            free(refs[i].data[j]);
    free(img);
    MPI_Finalize();
    return all ? 1 : 0;
}

/* Randomized damage and loss at restart (issue 27), in one MPI job of 4
 * ranks as 4 nodes (node_size 1, ckpt_dir <dir>/node%n):
 *
 *   fuzz_restart <damage_tool> <dir> <cases> <seed> <level 4 built: 0|1> [first case]
 *
 * Each case, drawn from the seed: level 2, or level 3 with M = 1 or 2;
 * 16- or 64-KiB segments; 1-3 arrays per rank of random sizes and contents,
 * each checkpoint changing a random window of each; 2 or 3 checkpoints, with
 * (when level 4 is built) none, the first or the last at level 4.  Then,
 * with every rank between the two barriers, rank 0 wipes nodes within what
 * the configured level survives (level 2: none, one, or two apart; level 3:
 * up to M) and flips one bit in one file of a surviving node or in the
 * level-4 file, through damage_tool (damage.h): a rank's container, a
 * partner copy or a parity container (committed data, a chunk written by
 * the last checkpoint, every segment, a CRC entry, the superblock, the
 * commit word, the committed metadata slot, or any byte, classified by where
 * it lies) or the level-4 file (a byte of a dataset, or any byte, classified
 * by crpm_l4_verify_file).
 *
 * The expected outcome follows from the rules (docs/levels.md), not from
 * the library: the newest checkpoint every rank can bring back, from its own
 * container (its committed epoch, or the one before when that is intact),
 * else from an intact partner copy or enough intact parity of that
 * checkpoint; when that is older than the newest, a level-4 file of the
 * newest serves instead; none: the newest intact level-4 file; else
 * CRPM_ERR_CORRUPT on every rank when anything damaged took part,
 * CRPM_ERR_MISSING when only losses did.
 * crpm_init is called again and every rank checks: the status, then every
 * array bit for bit against the checkpoint expected (and the recorded
 * checkpoint number), the damaged container kept as .corrupt-<time> when it
 * was replaced; or the exact error code with a message that names the cause
 * and advises no removal, and (rank 0) every file unchanged.  Every 4th
 * successful case then checkpoints once more, wipes one node and restarts
 * again: the redundancy the repair rebuilt must serve.
 *
 * crpm_init / crpm_finalize (keep_last_ckpt = 1) run again and again in the
 * one job: hundreds of cases in about a minute, where as many launches
 * would take tens of minutes. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <mpi.h>
#include "check.h"
#include "crpm.h"

#define NP 4
#define MAXARR 3
#define JOB "fz"

enum { T_NONE, T_L1, T_COPY, T_PAR, T_L4 };
static const char *const tnames[] = {"nothing", "container", "partner copy", "parity", "level-4 file"};
enum { V_NO_L4, V_L4_FIRST, V_L4_LAST };
enum { C_HARMLESS, C_DATA, C_META }; /* what a flip hit (damage_tool's class none, data, meta) */
/* damage_tool's kinds (damage.h) */
static const char *const kinds[] = {"data",  "fresh",  "segments", "crc", "crcs",
                                    "chunks", "super", "commit", "slot", "any"};
#define NKINDS 10

typedef struct plan {
    uint64_t seed;
    int level, M, variant, nckpt, seg_kb;
    int narr[NP];
    uint64_t bytes[NP][MAXARR];
    int wiped[NP];
    int target, trank, kind; /* kind: DMG_*, or for the level-4 file 0 = a dataset byte, 1 = any byte */
} plan;

/* what rank 0 found when it damaged the file (broadcast) */
typedef struct found {
    int cls, in_prev;
    char what[200];
} found;

typedef struct expect {
    int ok, status, ckpt, err, aside;
} expect;

static int rank, have_l4;
static char dir[512];
static const char *tool;

/* ---- the plan ------------------------------------------------------------------ */

static int level_ckpt(const plan *p, int j)
{
    if ((p->variant == V_L4_FIRST && j == 1) || (p->variant == V_L4_LAST && j == p->nckpt))
        return CRPM_L4;
    return p->level == 2 ? CRPM_L2 : CRPM_L3;
}

static void make_plan(plan *p, uint64_t seed)
{
    uint64_t s = seed;
    memset(p, 0, sizeof *p);
    p->seed = seed;
    p->level = rnd_below(&s, 2) ? 3 : 2;
    p->M = p->level == 3 ? 1 + (int)rnd_below(&s, 2) : 0;
    p->variant = have_l4 ? (int)rnd_below(&s, 3) : V_NO_L4;
    p->nckpt = 2 + (int)rnd_below(&s, 2);
    p->seg_kb = rnd_below(&s, 2) ? 64 : 16;
    for (int r = 0; r < NP; r++) {
        p->narr[r] = 1 + (int)rnd_below(&s, MAXARR);
        for (int a = 0; a < p->narr[r]; a++)
            p->bytes[r][a] = 8 * (1 + rnd_below(&s, rnd_below(&s, 4) ? 2000 : 12000));
    }
    /* losses the level survives */
    int w = (int)rnd_below(&s, 3), k = (int)rnd_below(&s, NP);
    if (p->level == 2 && w >= 1)
        p->wiped[k] = 1;
    if (p->level == 2 && w == 2)
        p->wiped[(k + 2) % NP] = 1;
    if (p->level == 3 && w >= 1 && w <= p->M)
        p->wiped[k] = 1;
    if (p->level == 3 && w == 2 && p->M == 2)
        p->wiped[(k + 1 + (int)rnd_below(&s, NP - 1)) % NP] = 1;
    /* one damaged file on a surviving node (or the level-4 file), or none */
    int t = (int)rnd_below(&s, 9);
    p->target = t < 1 ? T_NONE : t < 4 ? T_L1 : t < 6 ? (p->level == 2 ? T_COPY : T_PAR) : t < 8 ? T_L1 : T_L4;
    if (p->target == T_L4 && p->variant == V_NO_L4)
        p->target = T_L1;
    for (int tries = 0; p->target != T_NONE && p->target != T_L4; tries++) {
        p->trank = (int)rnd_below(&s, NP);
        int node = p->target == T_COPY ? (p->trank + 1) % NP : p->trank;
        if (!p->wiped[node])
            break;
        if (tries == 100)
            p->target = T_NONE;
    }
    p->kind = p->target == T_L4 ? (int)rnd_below(&s, 2) : (int)rnd_below(&s, NKINDS);
}

/* Contents of array a of rank r at checkpoint j: random, then each
 * checkpoint rewrites a random window of it. */
static void contents(const plan *p, int r, int a, int j, unsigned char *buf)
{
    uint64_t n = p->bytes[r][a], s = p->seed ^ (0x100ull * (uint64_t)r + (uint64_t)a) * 0x9E3779B97F4A7C15ull;
    fill_random(&s, (char *)buf, n);
    for (int k = 1; k <= j; k++) {
        uint64_t w = p->seed + 977ull * (uint64_t)k + 31ull * (uint64_t)r + (uint64_t)a;
        uint64_t len = 1 + rnd_below(&w, n / 4 + 1), off = rnd_below(&w, n - (len < n ? len : n) + 1);
        fill_random(&w, (char *)buf + off, len < n - off ? len : n - off);
    }
}

static void config_text(const plan *p, char *out, size_t n)
{
    int u = snprintf(out, n, "[basic]\nckpt_dir = %s/node%%n\njob_name = " JOB "\nnode_size = 1\nkeep_last_ckpt = 1\n"
                     "verbosity = 0\n", dir);
    if (p->level == 3)
        u += snprintf(out + u, n - (size_t)u, "group_size = 4\nl3_parity = %d\n", p->M);
    if (p->variant != V_NO_L4)
        u += snprintf(out + u, n - (size_t)u, "glbl_dir = %s/glbl\n", dir);
    snprintf(out + u, n - (size_t)u, "[advanced]\nsegment_size = %dK\n", p->seg_kb);
}

/* ---- the expected outcome --------------------------------------------------------- */

/* Level 3 can rebuild the lost members when every codeword with a lost
 * data unit keeps K-M units (par_ok: parity of the epoch intact on a
 * surviving holder).  The layout (lib/levels/l3_code.h): codeword c's
 * parity is held by members c .. c+M-1 (mod K), the other members are its
 * data; member r is rank r. */
static int l3_decodable(const plan *p, const int *lost, const int *par_ok)
{
    int nlost = 0;
    for (int r = 0; r < NP; r++)
        nlost += lost[r];
    if (nlost > p->M)
        return 0;
    for (int c = 0; c < NP; c++) {
        int need = 0, units = 0;
        for (int g = 0; g < NP; g++) {
            if ((g - c + NP) % NP >= p->M) {
                need |= lost[g];
                units += !lost[g];
            } else {
                units += !lost[g] && par_ok[g];
            }
        }
        if (need && units < NP - p->M)
            return 0;
    }
    return 1;
}

/* Whether a copy-like file (a container, partner copy or parity container)
 * brings back checkpoint `at`, when it committed `top` and holds the one
 * before only while `chain` (the checkpoint before was written to it too);
 * dmg: this file was hit (cls, in_prev as found).  Damaged committed data or
 * metadata makes a copy or parity unusable as a whole (it is closed); a
 * container keeps its intact previous epoch. */
static int holds(int at, int top, int chain, int hit, const found *f, int whole_on_data)
{
    if (at < 1 || (at != top && !(chain && at == top - 1)))
        return 0;
    if (!hit || f->cls == C_HARMLESS)
        return 1;
    if (f->cls == C_META || whole_on_data)
        return 0;
    return at == top ? 0 : !f->in_prev;
}

/* The rule (docs/levels.md): the newest checkpoint every rank brings back,
 * from its container, else its partner copy (level 2) or its group's
 * survivors and parity (level 3); a level-4 file of a newer checkpoint than
 * that wins; none: the newest level-4 file; else an error. */
static expect expected(const plan *p, const found *f)
{
    expect e = {1, CRPM_STATUS_L1, p->nckpt, 0, -1};
    int det = p->target != T_NONE && f->cls != C_HARMLESS, E = p->nckpt;
    int l4 = p->variant != V_NO_L4 && !(p->target == T_L4 && det);
    int l4_epoch = p->variant == V_L4_FIRST ? 1 : E;
    /* the newest checkpoint the copies and the parity hold; a partner copy is
     * a replica of the container at that checkpoint (the one before it too),
     * parity holds the one before only when it encoded it */
    int red = p->variant == V_L4_LAST ? E - 1 : E, red_chain = !(p->variant == V_L4_FIRST && red - 1 == 1);
    int l1_damaged = p->target == T_L1 && det, any_lost = l1_damaged;
    for (int r = 0; r < NP; r++)
        any_lost |= p->wiped[r];
    if (!any_lost)
        return e;
    for (int at = E; at >= E - 1 && at >= 1; at--) {
        int own[NP], lost[NP], par_ok[NP], by[NP], ok = 1, level_used = 0;
        for (int r = 0; r < NP; r++) {
            own[r] = !p->wiped[r] && holds(at, E, 1, p->target == T_L1 && p->trank == r, f, 0);
            lost[r] = !own[r];
            by[r] = own[r] ? 1 : 0;
            par_ok[r] = p->level == 3 && !p->wiped[r] &&
                        holds(at, red, red_chain, p->target == T_PAR && p->trank == r, f, 1);
        }
        for (int r = 0; r < NP && p->level == 2; r++)
            if (!own[r] && !p->wiped[(r + 1) % NP] && holds(at, red, 1, p->target == T_COPY && p->trank == r, f, 1))
                by[r] = 2;
        if (p->level == 3 && l3_decodable(p, lost, par_ok))
            for (int r = 0; r < NP; r++)
                by[r] = by[r] ? by[r] : 3;
        for (int r = 0; r < NP; r++) {
            ok &= by[r] != 0;
            level_used = by[r] > level_used ? by[r] : level_used;
        }
        if (!ok)
            continue;
        int replaced = l1_damaged && by[p->trank] > 1;
        /* older than the newest: a level-4 file of the newest serves */
        if (at < E && l4 && l4_epoch == E) {
            e.status = CRPM_STATUS_L4;
            e.aside = l1_damaged ? p->trank : -1;
            return e;
        }
        e.status = level_used; /* CRPM_STATUS_Ln == n */
        e.ckpt = at;
        e.aside = replaced ? p->trank : -1;
        return e;
    }
    if (l4) {
        e.status = CRPM_STATUS_L4;
        e.ckpt = l4_epoch;
        e.aside = l1_damaged ? p->trank : -1;
        return e;
    }
    int lost_copy_damaged = 0;
    for (int r = 0; r < NP && p->level == 2; r++)
        lost_copy_damaged |= p->wiped[r] && p->target == T_COPY && p->trank == r && det;
    int par_damaged = p->target == T_PAR && det;
    int l4_damaged = p->target == T_L4 && det;
    e.ok = 0;
    e.err = l1_damaged || lost_copy_damaged || par_damaged || l4_damaged ? CRPM_ERR_CORRUPT : CRPM_ERR_MISSING;
    return e;
}

/* ---- files ------------------------------------------------------------------------- */

static void node_path(char *out, size_t n, int node, const char *name)
{
    snprintf(out, n, "%s/node%d/" JOB "/%s", dir, node, name);
}

static void run_cmd(const char *fmt, const char *arg)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, fmt, arg);
    REQUIRE(system(cmd) == 0, "%s failed", cmd);
}

/* A digest of every file's data under dir (holes skipped, lock files aside). */
static uint64_t tree_digest(const char *top, uint64_t h)
{
    DIR *d = opendir(top);
    if (!d)
        return h;
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        names = realloc(names, (n + 1) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) /* readdir's order is not stable: sort */
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    for (size_t i = 0; i < n; i++) {
        char p[1024];
        struct stat st;
        size_t l = strlen(names[i]);
        snprintf(p, sizeof p, "%s/%s", top, names[i]);
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            h = tree_digest(p, h);
        } else if (!(l > 5 && strcmp(names[i] + l - 5, ".lock") == 0)) {
            for (const char *c = names[i]; *c; c++)
                h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
            int fd = open(p, O_RDONLY);
            off_t off = 0;
            static char buf[1 << 16];
            while (fd >= 0 && (off = lseek(fd, off, SEEK_DATA)) >= 0) {
                ssize_t got = pread(fd, buf, sizeof buf, off);
                if (got <= 0)
                    break;
                h = (h ^ (uint64_t)off) * 0x100000001b3ull;
                for (ssize_t k = 0; k < got; k++)
                    h = (h ^ (unsigned char)buf[k]) * 0x100000001b3ull;
                off += got;
            }
            if (fd >= 0)
                close(fd);
        }
        free(names[i]);
    }
    free(names);
    return h;
}

static int has_aside(int r)
{
    char top[600];
    snprintf(top, sizeof top, "%s/node%d/" JOB, dir, r);
    DIR *d = opendir(top);
    struct dirent *e;
    char pre[64];
    int n = 0;
    snprintf(pre, sizeof pre, "rank-%d.crpm.corrupt-", r);
    while (d && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, pre, strlen(pre)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* Runs damage_tool; parses its class and whether the previous epoch is hit. */
static void run_tool(const char *args, found *f)
{
    char cmd[1600], line[400] = "";
    snprintf(cmd, sizeof cmd, "'%s' %s", tool, args);
    FILE *o = popen(cmd, "r");
    REQUIRE(o && fgets(line, sizeof line, o), "%s: no output", cmd);
    int st = pclose(o);
    REQUIRE(st == 0 && strncmp(line, "damaged ", 8) == 0, "%s: %s", cmd, line);
    line[strcspn(line, "\n")] = '\0';
    f->cls = strstr(line, "[class meta]") ? C_META : strstr(line, "[class data]") ? C_DATA : C_HARMLESS;
    f->in_prev = strstr(line, "(previous epoch too)") != NULL;
    const char *w = strrchr(line, '/');
    snprintf(f->what, sizeof f->what, "%.190s", w ? w + 1 : line);
}

/* Rank 0: wipes, then damages one file; fills what it hit. */
static void apply_damage(const plan *p, found *f)
{
    char path[1024], name[64], args[1400];
    memset(f, 0, sizeof *f);
    for (int k = 0; k < NP; k++)
        if (p->wiped[k]) {
            snprintf(path, sizeof path, "%s/node%d", dir, k);
            run_cmd("rm -rf '%s'", path);
        }
    unsigned long long seed = (unsigned long long)(p->seed * 0xD1B54A32D192ED03ull + 5);
    if (p->target == T_NONE)
        return;
    if (p->target == T_L4) {
        char top[700];
        snprintf(top, sizeof top, "%s/glbl/" JOB, dir);
        DIR *d = opendir(top);
        struct dirent *e;
        path[0] = '\0';
        while (d && (e = readdir(d)) != NULL)
            if (strncmp(e->d_name, "l4-", 3) == 0)
                snprintf(path, sizeof path, "%s/%s", top, e->d_name);
        if (d)
            closedir(d);
        REQUIRE(path[0], "no level-4 file in %s", top);
        snprintf(args, sizeof args, "--l4 '%s' %s %llu", path, p->kind ? "any" : "data", seed);
        run_tool(args, f);
        return;
    }
    if (p->target == T_L1)
        snprintf(name, sizeof name, "rank-%d.crpm", p->trank);
    else if (p->target == T_COPY)
        snprintf(name, sizeof name, "partner-%d.crpm", p->trank);
    else
        snprintf(name, sizeof name, "parity-%d.crpm", p->trank);
    node_path(path, sizeof path, p->target == T_COPY ? (p->trank + 1) % NP : p->trank, name);
    snprintf(args, sizeof args, "'%s' %s %llu", path, kinds[p->kind], seed);
    run_tool(args, f);
}

/* ---- one case ---------------------------------------------------------------------- */

static int protect_all(const plan *p, unsigned char **arr, int *ck)
{
    int rc = crpm_protect(100, ck, 1, CRPM_INT);
    for (int a = 0; rc == 0 && a < p->narr[rank]; a++)
        rc = crpm_protect(a, arr[a], (int64_t)p->bytes[rank][a], CRPM_BYTE);
    return rc;
}

static int checkpoint_at(const plan *p, unsigned char **arr, int *ck, int j, int level)
{
    for (int a = 0; a < p->narr[rank]; a++)
        contents(p, rank, a, j, arr[a]);
    *ck = j;
    return crpm_checkpoint(j, level);
}

/* After crpm_init succeeded: status, recover, every byte; returns the failures. */
static int check_restart(const plan *p, const expect *e, unsigned char **arr, unsigned char *want, int *ck,
                         const char *tag)
{
    int bad = 0;
    *ck = -1;
    for (int a = 0; a < p->narr[rank]; a++)
        memset(arr[a], 0xA5, p->bytes[rank][a]);
    int rc = protect_all(p, arr, ck), st = crpm_status();
    CHECK(rc == 0 && st == e->status, "%s: protect %d, status %d, expected %d", tag, rc, st, e->status);
    bad |= rc != 0 || st != e->status;
    rc = crpm_recover();
    CHECK(rc == 0 && *ck == e->ckpt, "%s: recover %d (%s), checkpoint %d, expected %d", tag, rc, crpm_strerror(rc), *ck,
          e->ckpt);
    bad |= rc != 0 || *ck != e->ckpt;
    for (int a = 0; rc == 0 && a < p->narr[rank]; a++) {
        contents(p, rank, a, e->ckpt, want);
        int same = memcmp(want, arr[a], p->bytes[rank][a]) == 0;
        CHECK(same, "%s: array %d differs from checkpoint %d", tag, a, e->ckpt);
        bad |= !same;
    }
    return bad;
}

static int run_case(const plan *p, unsigned char **arr, unsigned char *want, int verbose, expect *out)
{
    char cfg[1024], tag[1024];
    int ck = 0, bad = 0;
    config_text(p, cfg, sizeof cfg);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        run_cmd("cd '%s' && rm -rf node* glbl", dir);
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE(crpm_init_text(cfg, "fuzz", MPI_COMM_WORLD) == 0, "first init: %s", crpm_last_error());
    REQUIRE(protect_all(p, arr, &ck) == 0 && crpm_status() == CRPM_STATUS_FRESH, "fresh start");
    for (int j = 1; j <= p->nckpt; j++)
        REQUIRE(checkpoint_at(p, arr, &ck, j, level_ckpt(p, j)) == 0, "checkpoint %d: %s", j, crpm_last_error());
    REQUIRE(crpm_finalize() == 0, "finalize: %s", crpm_last_error());
    MPI_Barrier(MPI_COMM_WORLD);
    found f;
    if (rank == 0)
        apply_damage(p, &f);
    MPI_Bcast(&f, sizeof f, MPI_BYTE, 0, MPI_COMM_WORLD);
    expect e = expected(p, &f);
    *out = e;
    snprintf(tag, sizeof tag, "case %llx (level %d%s%s, %d checkpoints%s, wiped %d%d%d%d, %s of rank %d: %s; "
             "expect %s %d, checkpoint %d)", (unsigned long long)p->seed, p->level, p->level == 3 ? " M=" : "",
             p->level == 3 ? (p->M == 1 ? "1" : "2") : "", p->nckpt,
             p->variant == V_L4_FIRST ? ", the first at L4" : p->variant == V_L4_LAST ? ", the last at L4" : "",
             p->wiped[0], p->wiped[1], p->wiped[2], p->wiped[3], tnames[p->target], p->trank,
             p->target ? f.what : "-", e.ok ? "status" : "error", e.ok ? e.status : e.err, e.ckpt);
    if (verbose && rank == 0)
        printf("%s\n", tag);
    uint64_t before = rank == 0 && !e.ok ? tree_digest(dir, 1469598103934665603ull) : 0;
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = crpm_init_text(cfg, "fuzz", MPI_COMM_WORLD);
    if (!e.ok) {
        const char *msg = crpm_last_error();
        int right = rc == e.err && strstr(msg, e.err == CRPM_ERR_CORRUPT ? "corrupt" : "missing") &&
                    !strstr(msg, "remove the");
        CHECK(right, "%s: crpm_init gave %d (%s): %s", tag, rc, crpm_strerror(rc), msg);
        bad |= !right;
        if (rc == 0) {
            crpm_finalize();
        } else if (rank == 0) {
            int same = tree_digest(dir, 1469598103934665603ull) == before;
            CHECK(same, "%s: a refused restart changed files", tag);
            bad |= !same;
        }
        return bad;
    }
    CHECK(rc == 0, "%s: crpm_init failed: %d (%s): %s", tag, rc, crpm_strerror(rc), crpm_last_error());
    if (rc != 0)
        return 1;
    bad |= check_restart(p, &e, arr, want, &ck, tag);
    if (rank == 0 && e.aside >= 0) {
        CHECK(has_aside(e.aside) == 1, "%s: rank %d's damaged container was not kept aside", tag, e.aside);
        bad |= has_aside(e.aside) != 1;
    }
    /* every 4th: the rebuilt redundancy serves a loss after one more checkpoint */
    int again = !bad && (p->seed >> 7) % 4 == 0;
    int lv = p->level == 2 ? CRPM_L2 : CRPM_L3, node = (int)((p->seed >> 11) % NP);
    if (again) {
        rc = checkpoint_at(p, arr, &ck, p->nckpt + 1, lv);
        CHECK(rc == 0, "%s: checkpoint after the restart: %s", tag, crpm_last_error());
        bad |= rc != 0;
    }
    CHECK(crpm_finalize() == 0, "%s: finalize: %s", tag, crpm_last_error());
    if (!again || bad)
        return bad;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char path[700];
        snprintf(path, sizeof path, "%s/node%d", dir, node);
        run_cmd("rm -rf '%s'", path);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    expect e2 = {1, p->level == 2 ? CRPM_STATUS_L2 : CRPM_STATUS_L3, p->nckpt + 1, 0, -1};
    snprintf(tag + strlen(tag), sizeof tag - strlen(tag), ", then node %d lost", node);
    rc = crpm_init_text(cfg, "fuzz", MPI_COMM_WORLD);
    CHECK(rc == 0, "%s: crpm_init failed: %s", tag, crpm_last_error());
    if (rc != 0)
        return 1;
    bad |= check_restart(p, &e2, arr, want, &ck, tag);
    CHECK(crpm_finalize() == 0, "%s: finalize: %s", tag, crpm_last_error());
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    check_set_rank(rank);
    if (argc < 6 || np != NP) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -np %d fuzz_restart <damage_tool> <dir> <cases> <seed> <l4 0|1> "
                    "[first case]\n", NP);
        MPI_Finalize();
        return 2;
    }
    tool = argv[1];
    snprintf(dir, sizeof dir, "%s", argv[2]);
    long ncases = strtol(argv[3], NULL, 10), first = argc > 6 ? strtol(argv[6], NULL, 10) : 0;
    uint64_t seed = strtoull(argv[4], NULL, 0);
    have_l4 = atoi(argv[5]) != 0;
    int verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (rank == 0)
        run_cmd("mkdir -p '%s'", dir);
    unsigned char *arr[MAXARR], *want = malloc(8 * 12000);
    for (int a = 0; a < MAXARR; a++)
        arr[a] = malloc(8 * 12000);
    /* outcomes seen: status 0..5, then CRPM_ERR_CORRUPT, CRPM_ERR_MISSING, a previous checkpoint */
    int fails = 0, seen[9] = {0};
    for (long i = first; i < first + ncases; i++) {
        uint64_t s = seed + (uint64_t)i * 0x9E3779B97F4A7C15ull;
        plan p;
        expect e;
        make_plan(&p, rnd(&s));
        int bad = run_case(&p, arr, want, verbose, &e), all = 0;
        MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        fails += all != 0;
        seen[e.ok ? e.status : e.err == CRPM_ERR_CORRUPT ? 6 : 7]++;
        seen[8] += e.ok && e.ckpt < p.nckpt;
        if (rank == 0 && all)
            printf("case %ld FAILED (rerun: fuzz_restart <tool> <dir> 1 %s %s %ld)\n", i, argv[4], argv[5], i);
    }
    if (rank == 0)
        printf("fuzz_restart: %ld cases, %d failed; expected: level 1 %d, level 2 %d, level 3 %d, level 4 %d, "
               "CRPM_ERR_CORRUPT %d, CRPM_ERR_MISSING %d; %d of them back at an older checkpoint\n", ncases, fails,
               seen[CRPM_STATUS_L1], seen[CRPM_STATUS_L2], seen[CRPM_STATUS_L3], seen[CRPM_STATUS_L4], seen[6],
               seen[7], seen[8]);
    for (int a = 0; a < MAXARR; a++)
        free(arr[a]);
    free(want);
    int rc = check_summary("fuzz_restart");
    MPI_Finalize();
    return rc || fails;
}

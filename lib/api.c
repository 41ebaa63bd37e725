/* Public API: MPI coordination on top of the per-process engine (engine.h).
 *
 * Every collective entry point ends in an agreement (an Allreduce that is
 * also the barrier), so one rank's failure becomes an error on every rank
 * instead of a hang.  Restart decisions are made from facts gathered from all
 * ranks and evaluated identically everywhere, so all ranks take the same
 * branch without further negotiation. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "config.h"
#include "crpm.h"
#include "engine.h"
#include "full.h"
#include "interval.h"
#ifdef CRPM_HAVE_HDF5
#include "level4.h"
#endif

/* ---- predefined types ---------------------------------------------------- */
const crpm_type_t CRPM_CHAR = {CRPM_TC_CHAR, 0, sizeof(char)};
const crpm_type_t CRPM_SHORT = {CRPM_TC_SHORT, 0, sizeof(short)};
const crpm_type_t CRPM_INT = {CRPM_TC_INT, 0, sizeof(int)};
const crpm_type_t CRPM_LONG = {CRPM_TC_LONG, 0, sizeof(long)};
const crpm_type_t CRPM_LLONG = {CRPM_TC_LLONG, 0, sizeof(long long)};
const crpm_type_t CRPM_UINT = {CRPM_TC_UINT, 0, sizeof(unsigned)};
const crpm_type_t CRPM_ULONG = {CRPM_TC_ULONG, 0, sizeof(unsigned long)};
const crpm_type_t CRPM_FLOAT = {CRPM_TC_FLOAT, 0, sizeof(float)};
const crpm_type_t CRPM_DOUBLE = {CRPM_TC_DOUBLE, 0, sizeof(double)};
const crpm_type_t CRPM_LDOUBLE = {CRPM_TC_LDOUBLE, 0, sizeof(long double)};
const crpm_type_t CRPM_BYTE = {CRPM_TC_BYTE, 0, 1};

int crpm_init_type(crpm_type_t *type, size_t size)
{
    if (!type || size == 0 || size > (size_t)INT64_MAX)
        return crpm_error(CRPM_ERR_INVAL, "crpm_init_type: need a type pointer and a size > 0");
    type->code = CRPM_TYPE_USER;
    type->reserved = 0;
    type->size = (int64_t)size;
    return CRPM_SUCCESS;
}

/* ---- state --------------------------------------------------------------- */
/* Written by a finalize that removes the checkpoints, before it removes
 * anything: a relaunch that finds it knows the job had completed and that
 * missing containers are not lost data. */
#define FINALIZE_MARKER ".crpm-finalized"

typedef struct region {
    int32_t id, type_code;
    uint64_t elem_size, count;
    void *ptr;
} region;

enum source { SRC_NONE, SRC_L1, SRC_L4, SRC_FULL };

static struct {
    int initialized;
    int have_comm;       /* comm is ours to free */
    MPI_Comm comm;
    int rank, nranks;
    crpm_config cfg;
    char job_dir[CRPM_CFG_PATH_MAX + CRPM_CFG_NAME_MAX + 2];
    char path[sizeof((crpm_config *)0)->ckpt_dir + CRPM_CFG_NAME_MAX + 64];
    crpm_container *c;
    int status;          /* CRPM_STATUS_* decided at init */
    int source;          /* what crpm_recover reads now */
    int recovered;       /* snapshot must not recover a second time */
    int broken;          /* a failed rollback left the container state unknown */
    uint64_t last_id;    /* last checkpoint id (snapshot numbers from here) */
    uint64_t full_id;    /* method = full: the agreed checkpoint file id */
    char l4_path[CRPM_CFG_PATH_MAX + 256];
    region *regions;
    int nregions, cap_regions;
    struct { int point, n; } kills[8]; /* CRPM_TEST_KILL entries of this rank */
    int nkills;
    uint64_t ckpt_count;    /* checkpoints started by this process */
    long iters_since;
    double last_ckpt_time;
    long snap_ckpts;
    crpm_stats_t last, total;
    double cost[2];         /* seconds of the last checkpoint's level-1 and level-4 parts */
    crpm_interval auto_iv[2]; /* automatic intervals of level 1 and level 4 */
    double auto_logged[2];  /* interval last printed at verbosity 2 */
    double last_l4_time;
} g;

/* Errors are returned, and printed by the library only at verbosity 3 (see
 * crpm.h); before a configuration is read, not at all. */
static int verbosity = 1;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Errors leave the library through here.  The application prints
 * crpm_last_error() (every rank has the reason, CRPM_ERR_REMOTE carries the
 * failing rank's message), so the library repeats it only when debugging. */
static int report(int rc, const char *fn)
{
    if (rc < 0 && verbosity >= 3) {
        int rank = g.rank, inited = 0, fin = 0;
        MPI_Initialized(&inited);
        MPI_Finalized(&fin);
        if (!g.have_comm && inited && !fin)
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        fprintf(stderr, "[crpm rank %d] %s: %s: %s\n", rank, fn, crpm_strerror(rc), crpm_last_error());
        fflush(stderr);
    }
    return rc;
}

static int mpi_fail(int mrc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", mrc);
    return crpm_error(CRPM_ERR_MPI, "%s failed: %s", what, s);
}

/* Collective agreement: returns 0 only if rc == 0 on every rank.  A rank that
 * did not fail itself gets CRPM_ERR_REMOTE with the first failing rank's
 * message.  `extra` (may be NULL) are values reduced with MIN alongside
 * (callers pass x and -x to learn min and max in the same round trip). */
static int agree_ext(int rc, const char *what, int64_t *extra, int nextra)
{
    int64_t in[8], out[8];
    in[0] = rc;
    in[1] = rc < 0 ? g.rank : INT64_MAX;
    for (int i = 0; i < nextra; i++)
        in[2 + i] = extra[i];
    int mrc = MPI_Allreduce(in, out, 2 + nextra, MPI_INT64_T, MPI_MIN, g.comm);
    if (mrc != MPI_SUCCESS)
        return mpi_fail(mrc, what);
    for (int i = 0; i < nextra; i++)
        extra[i] = out[2 + i];
    if (out[0] >= 0)
        return CRPM_SUCCESS;
    int root = (int)out[1];
    char msg[512];
    if (g.rank == root)
        snprintf(msg, sizeof msg, "%s: %s", crpm_strerror(rc), crpm_last_error());
    mrc = MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, root, g.comm);
    if (rc < 0)
        return rc;
    if (mrc != MPI_SUCCESS)
        return crpm_error(CRPM_ERR_REMOTE, "%s failed on rank %d", what, root);
    msg[sizeof msg - 1] = '\0';
    return crpm_error(CRPM_ERR_REMOTE, "%s failed on rank %d: %s", what, root, msg);
}

static int agree(int rc, const char *what) { return agree_ext(rc, what, NULL, 0); }

static void fmt_size(char *buf, size_t n, double b)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
}

/* Three significant digits in a unit that fits: 12.3 us, 4.56 ms, 1.23 s. */
static void fmt_secs(char *buf, size_t n, double s)
{
    if (s < 1e-3)
        snprintf(buf, n, "%.3g us", s * 1e6);
    else if (s < 1)
        snprintf(buf, n, "%.3g ms", s * 1e3);
    else
        snprintf(buf, n, "%.3g s", s);
}

/* ---- files --------------------------------------------------------------- */
static int mkdir_p(const char *dir)
{
    char tmp[sizeof g.job_dir];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return crpm_error(CRPM_ERR_CONFIG, "path too long: %s", dir);
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char save = *p;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return crpm_error(CRPM_ERR_IO, "cannot create directory %s: %s", tmp, strerror(errno));
        *p = save;
        if (!save)
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return crpm_error(CRPM_ERR_IO, "%s is not a directory", dir);
    return CRPM_SUCCESS;
}

/* Makes a rename or unlink in dir durable. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static int unlink_quiet(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return crpm_error(CRPM_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    return CRPM_SUCCESS;
}

/* Container files of ranks this run does not have (left by a run with more
 * ranks).  Returns the highest such rank or -1; removes them if asked. */
static int scan_extra_ranks(int remove)
{
    DIR *d = opendir(g.job_dir);
    if (!d)
        return -1;
    int maxk = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int k, end = 0;
        if (sscanf(e->d_name, "rank-%d.crpm%n", &k, &end) == 1 && e->d_name[end] == '\0' && k >= g.nranks) {
            if (k > maxk)
                maxk = k;
            if (remove) {
                char p[sizeof g.job_dir + sizeof e->d_name + 1];
                snprintf(p, sizeof p, "%s/%s", g.job_dir, e->d_name);
                unlink_quiet(p);
            }
        }
    }
    closedir(d);
    return maxk;
}

/* Removes this job's level-4 files (rank 0 only; glbl_dir is shared). */
static void remove_l4_files(void)
{
    if (!g.cfg.glbl_dir[0])
        return;
    char dir[sizeof g.job_dir];
    snprintf(dir, sizeof dir, "%s/%s", g.cfg.glbl_dir, g.cfg.job_name);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "l4-", 3) == 0) {
            char p[sizeof dir + sizeof e->d_name + 1];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink_quiet(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

/* ---- container ------------------------------------------------------------ */
static void kill_hook(void *arg, int point, uint64_t epoch)
{
    (void)arg;
    (void)epoch;
    for (int i = 0; i < g.nkills; i++)
        if (point == g.kills[i].point && g.ckpt_count == (uint64_t)g.kills[i].n)
            raise(SIGKILL);
}

static int open_container(const char *path, int create, crpm_container **out)
{
    crpm_open_opts o = {
        .path = path,
        .segment_size = g.cfg.segment_size,
        .block_size = g.cfg.block_size,
        .job_name = g.cfg.job_name,
        .rank = g.rank,
        .nranks = g.nranks,
        .persistence = g.cfg.persistence,
        .backend = NULL,
        .create = create,
        .change_tracking = g.cfg.change_tracking,
    };
    int rc = crpm_container_open(&o, out, NULL);
    if (rc == 0 && g.nkills)
        crpm_container_set_hook(*out, kill_hook, NULL);
    const char *trk = rc == 0 ? crpm_container_tracking(*out) : NULL;
    if (trk && strcmp(trk, "pagemap") != 0 && g.cfg.verbosity >= 1 && g.rank == 0) {
        /* still exact, only slower: a warning, not an error */
        fprintf(stderr, "[crpm rank 0] change_tracking = pagemap unavailable, comparing every block: %s\n", trk);
        fflush(stderr);
    }
    return rc;
}

static void close_container(void)
{
    if (g.c)
        crpm_container_close(g.c);
    g.c = NULL;
}

/* Replaces this rank's container by an empty one.  Built under a temporary
 * name and renamed into place, so a crash leaves either the old container or
 * the new one, never a missing or half-made file. */
static int create_fresh(void)
{
    close_container();
    char tmp[sizeof g.path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", g.path);
    int rc = unlink_quiet(tmp);
    crpm_container *c = NULL;
    if (rc == 0)
        rc = open_container(tmp, 1, &c);
    if (rc != 0)
        return rc;
    crpm_container_close(c);
    if (rename(tmp, g.path) != 0)
        return crpm_error(CRPM_ERR_IO, "cannot rename %s to %s: %s", tmp, g.path, strerror(errno));
    sync_dir(g.job_dir);
    return open_container(g.path, 0, &g.c);
}

/* ---- init ----------------------------------------------------------------- */
static void reset_state(void)
{
    close_container();
    if (g.have_comm) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin)
            MPI_Comm_free(&g.comm);
    }
    free(g.regions);
    memset(&g, 0, sizeof g);
    g.comm = MPI_COMM_NULL;
    verbosity = 1;
}

/* Rank 0 reads the file and broadcasts it: every rank parses the same text
 * (one read of a shared file; identical messages on all ranks). */
static int load_config(const char *file)
{
    struct {
        int64_t rc, len;
        char msg[600];
    } hdr = {0, 0, ""};
    char *text = NULL;
    size_t len = 0;
    if (g.rank == 0) {
        hdr.rc = file ? crpm_config_read_file(file, &text, &len)
                      : crpm_error(CRPM_ERR_INVAL, "crpm_init: no configuration file given");
        hdr.len = (int64_t)len;
        if (hdr.rc < 0)
            snprintf(hdr.msg, sizeof hdr.msg, "%s", crpm_last_error());
        if (len > INT_MAX) {
            hdr.rc = crpm_error(CRPM_ERR_CONFIG, "config %s: file too large", file);
            snprintf(hdr.msg, sizeof hdr.msg, "%s", crpm_last_error());
        }
    }
    int mrc = MPI_Bcast(&hdr, (int)sizeof hdr, MPI_BYTE, 0, g.comm);
    if (mrc != MPI_SUCCESS) {
        free(text);
        return mpi_fail(mrc, "crpm_init: MPI_Bcast of the configuration");
    }
    if (hdr.rc < 0) {
        free(text);
        hdr.msg[sizeof hdr.msg - 1] = '\0';
        return crpm_error((int)hdr.rc, "%s", hdr.msg);
    }
    if (g.rank != 0 && !(text = malloc((size_t)hdr.len + 1)))
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    mrc = MPI_Bcast(text, (int)hdr.len, MPI_CHAR, 0, g.comm);
    text[hdr.len] = '\0';
    int rc = mrc == MPI_SUCCESS ? crpm_config_parse(text, file ? file : "(none)", &g.cfg)
                                : mpi_fail(mrc, "crpm_init: MPI_Bcast of the configuration");
    free(text);
    return rc;
}

/* CRPM_TEST_KILL=<rank>:<point>:<n>[,<rank>:<point>:<n>...]: the given rank
 * SIGKILLs itself at that point of its n-th checkpoint.  Several entries
 * let a test kill two ranks at different points of the same checkpoint. */
static int parse_kill_env(void)
{
    const char *v = getenv("CRPM_TEST_KILL");
    if (!v || !*v)
        return CRPM_SUCCESS;
    for (const char *p = v; *p;) {
        int r, n, end = 0;
        char point[32];
        if (sscanf(p, "%d:%31[a-z_]:%d%n", &r, point, &n, &end) != 3 || (p[end] && p[end] != ',') || n < 1)
            return crpm_error(CRPM_ERR_CONFIG, "CRPM_TEST_KILL='%s': expected <rank>:<point>:<n>[,...]", v);
        int pt = strcmp(point, "before_data") == 0    ? CRPM_HOOK_BEFORE_DATA
                 : strcmp(point, "after_data") == 0   ? CRPM_HOOK_AFTER_DATA
                 : strcmp(point, "after_commit") == 0 ? CRPM_HOOK_AFTER_COMMIT
                                                      : 0;
        if (!pt)
            return crpm_error(CRPM_ERR_CONFIG,
                              "CRPM_TEST_KILL='%s': point must be before_data, after_data or after_commit", v);
        if (r == g.rank && g.nkills < (int)(sizeof g.kills / sizeof g.kills[0])) {
            g.kills[g.nkills].point = pt;
            g.kills[g.nkills].n = n;
            g.nkills++;
        }
        p += end + (p[end] == ',');
    }
    return CRPM_SUCCESS;
}

/* "1, 4, 7" (at most 8 listed) for the ranks whose flag is set. */
static void fmt_ranks(char *buf, size_t n, const int64_t *info, int stride, int field, int64_t (*pred)(int64_t))
{
    size_t used = 0;
    int listed = 0, total = 0;
    buf[0] = '\0';
    for (int r = 0; r < g.nranks; r++) {
        if (!pred(info[(size_t)r * stride + field]))
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
static int64_t is_true(int64_t v) { return v != 0; }
static int64_t is_false(int64_t v) { return v == 0; }
static int64_t is_neg(int64_t v) { return v < 0; }

/* What the level-1 containers allow, evaluated identically on every rank. */
enum l1_verdict { L1_FRESH, L1_USABLE, L1_NRANKS, L1_MISSING, L1_OPEN, L1_EPOCH };

enum { I_EXISTS, I_RC, I_NRANKS, I_EPOCH, I_PREV, I_EXTRA, I_N };

/* Looks for a level-4 checkpoint: *found = 1 (path in g.l4_path) or 0. */
static int find_l4(int *found)
{
    *found = 0;
#ifdef CRPM_HAVE_HDF5
    if (!g.cfg.glbl_dir[0])
        return CRPM_SUCCESS;
    int id = 0;
    uint64_t epoch = 0;
    int rc = crpm_l4_find_latest(g.comm, g.cfg.glbl_dir, g.cfg.job_name, g.l4_path, sizeof g.l4_path, &id,
                                 &epoch);
    int64_t f[2] = {rc == 0, -(int64_t)(rc == 0)};
    if (rc == CRPM_ERR_NOCKPT)
        rc = CRPM_SUCCESS;
    rc = agree_ext(rc, "crpm_init: looking for a level-4 checkpoint", f, 2);
    if (rc == 0 && f[0] != -f[1])
        rc = crpm_error(CRPM_ERR_EPOCH, "crpm_init: ranks disagree on the newest level-4 checkpoint");
    if (rc == 0 && f[0]) {
        *found = 1;
        g.last_id = (uint64_t)id;
    }
    return rc;
#else
    return CRPM_SUCCESS;
#endif
}

/* Restart decision.  Sets g.status / g.source and leaves g.c open. */
static int decide_restart(void)
{
    int64_t mine[I_N] = {0};
    char own_msg[512] = "";
    struct stat st;
    char tmp[sizeof g.path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", g.path);
    unlink_quiet(tmp); /* a create_fresh that did not finish */
    mine[I_EXISTS] = stat(g.path, &st) == 0;
    if (mine[I_EXISTS]) {
        crpm_container *c = NULL;
        int rc = open_container(g.path, 0, &c);
        if (rc == 0)
            g.c = c;
        mine[I_NRANKS] = rc == CRPM_ERR_NRANKS;
        if (rc != 0) {
            snprintf(own_msg, sizeof own_msg, "%s", crpm_last_error());
            mine[I_RC] = rc;
        } else {
            mine[I_EPOCH] = (int64_t)crpm_container_epoch(g.c);
            mine[I_PREV] = crpm_container_prev_available(g.c);
        }
    }
    /* One rank per node looks for containers of ranks this run lacks. */
    MPI_Comm node;
    int node_rank = 0;
    if (MPI_Comm_split_type(g.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &node_rank);
        MPI_Comm_free(&node);
    }
    mine[I_EXTRA] = node_rank == 0 ? scan_extra_ranks(0) : -1;

    int64_t *all = malloc(sizeof(int64_t) * I_N * (size_t)g.nranks);
    if (!all)
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    int mrc = MPI_Allgather(mine, I_N, MPI_INT64_T, all, I_N, MPI_INT64_T, g.comm);
    if (mrc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(mrc, "crpm_init: MPI_Allgather");
    }
    int n_exist = 0, n_fail = 0, mismatch = 0, extra = -1, all_zero = 1, bad_prev = 0;
    int64_t emin = INT64_MAX, emax = -1;
    for (int r = 0; r < g.nranks; r++) {
        const int64_t *x = all + (size_t)r * I_N;
        n_exist += x[I_EXISTS] != 0;
        n_fail += x[I_RC] < 0;
        mismatch |= x[I_NRANKS] != 0;
        if (x[I_EXTRA] > extra)
            extra = (int)x[I_EXTRA];
        if (x[I_EXISTS] && x[I_RC] == 0) {
            all_zero &= x[I_EPOCH] == 0;
            emin = x[I_EPOCH] < emin ? x[I_EPOCH] : emin;
            emax = x[I_EPOCH] > emax ? x[I_EPOCH] : emax;
        }
    }
    for (int r = 0; r < g.nranks; r++) {
        const int64_t *x = all + (size_t)r * I_N;
        if (n_exist == g.nranks && n_fail == 0 && x[I_EPOCH] == emin + 1 && !x[I_PREV])
            bad_prev = 1;
    }

    enum l1_verdict v;
    if (mismatch || extra >= 0)
        v = L1_NRANKS;
    else if (n_exist == 0)
        v = L1_FRESH;
    else if (n_fail > 0)
        v = L1_OPEN;
    else if (n_exist < g.nranks)
        v = all_zero ? L1_FRESH : L1_MISSING; /* empty containers hold no data */
    else if (emax - emin > 1 || (bad_prev && emin > 0))
        v = L1_EPOCH;
    else
        v = emin == 0 ? L1_FRESH : L1_USABLE;

    if (g.rank == 0 && g.cfg.verbosity >= 3)
        printf("[crpm] init: %d of %d containers exist, %d unreadable, epochs %lld..%lld, other rank count: %s\n",
               n_exist, g.nranks, n_fail, (long long)(emax < 0 ? 0 : emin), (long long)(emax < 0 ? 0 : emax),
               mismatch || extra >= 0 ? "yes" : "no");

    char ranks[256];
    int rc = CRPM_SUCCESS;
    if (v == L1_USABLE) {
        /* A rank one epoch ahead committed a checkpoint that not every rank
         * completed: it goes back, durably, before anyone reads. */
        if ((int64_t)crpm_container_epoch(g.c) == emin + 1)
            rc = crpm_container_rollback(g.c);
        int64_t uid[2] = {0, 0};
        if (rc == 0) {
            uid[0] = (int64_t)crpm_container_user_id(g.c);
            uid[1] = -uid[0];
        }
        rc = agree_ext(rc, "crpm_init: rolling back an incomplete checkpoint", uid, 2);
        if (rc == 0 && uid[0] != -uid[1])
            rc = crpm_error(CRPM_ERR_EPOCH,
                            "crpm_init: ranks hold different checkpoints at epoch %lld (ids %lld to %lld)",
                            (long long)emin, (long long)uid[0], (long long)-uid[1]);
        if (rc == 0) {
            g.status = CRPM_STATUS_L1;
            g.source = SRC_L1;
            g.last_id = (uint64_t)uid[0];
            if (g.rank == 0 && g.cfg.verbosity >= 2)
                printf("[crpm] restart: level-1 checkpoint %lld (epoch %lld) on all %d ranks\n",
                       (long long)uid[0], (long long)emin, g.nranks);
            free(all);
            return CRPM_SUCCESS;
        }
        if (rc == CRPM_ERR_MPI) {
            free(all);
            return rc;
        }
        v = L1_EPOCH;
        snprintf(own_msg, sizeof own_msg, "%s", crpm_last_error());
    }

    /* Level 1 cannot be used as is: a level-4 checkpoint takes precedence
     * over both a fresh start and an error. */
    int have_l4 = 0;
    rc = find_l4(&have_l4);
    if (rc == 0 && have_l4) {
        close_container();
        if (node_rank == 0)
            scan_extra_ranks(1);
        rc = agree(create_fresh(), "crpm_init: re-creating the containers after a level-4 restart");
        if (rc == 0) {
            g.status = CRPM_STATUS_L4;
            g.source = SRC_L4;
            if (g.rank == 0 && g.cfg.verbosity >= 2)
                printf("[crpm] restart: level-4 checkpoint %llu from %s\n", (unsigned long long)g.last_id,
                       g.l4_path);
        }
        free(all);
        return rc;
    }
    if (rc != 0) {
        free(all);
        return rc;
    }

    switch (v) {
    case L1_FRESH:
        /* Ranks ahead at epoch 1 hold a first checkpoint that never completed. */
        if (!g.c || crpm_container_epoch(g.c) != 0)
            rc = create_fresh();
        rc = agree(rc, "crpm_init: creating the containers");
        if (rc == 0) {
            g.status = CRPM_STATUS_FRESH;
            g.source = SRC_NONE;
        }
        break;
    case L1_NRANKS:
        fmt_ranks(ranks, sizeof ranks, all, I_N, I_NRANKS, is_true);
        if (extra >= 0)
            rc = crpm_error(CRPM_ERR_NRANKS,
                            "crpm_init: %s/rank-%d.crpm exists: the checkpoint of job '%s' was written by more "
                            "than the %d ranks of this run",
                            g.job_dir, extra, g.cfg.job_name, g.nranks);
        else
            rc = crpm_error(CRPM_ERR_NRANKS,
                            "crpm_init: the containers of rank(s) %s in %s were written by a run with another "
                            "number of ranks (this run has %d)%s%s",
                            ranks, g.job_dir, g.nranks, mine[I_NRANKS] ? ": " : "",
                            mine[I_NRANKS] ? own_msg : "");
        break;
    case L1_MISSING:
        fmt_ranks(ranks, sizeof ranks, all, I_N, I_EXISTS, is_false);
        rc = crpm_error(CRPM_ERR_MISSING,
                        "crpm_init: job '%s' has checkpoints in %s but the container of rank(s) %s is missing; "
                        "refusing to start fresh over them (remove the directory to start anew)",
                        g.cfg.job_name, g.job_dir, ranks);
        break;
    case L1_OPEN:
        fmt_ranks(ranks, sizeof ranks, all, I_N, I_RC, is_neg);
        if (mine[I_RC] < 0) {
            rc = crpm_error((int)mine[I_RC], "crpm_init: cannot open %s: %s", g.path, own_msg);
        } else {
            int first = 0;
            while (all[(size_t)first * I_N + I_RC] == 0)
                first++;
            rc = crpm_error(CRPM_ERR_REMOTE, "crpm_init: the container of rank(s) %s in %s cannot be opened "
                            "(rank %d: %s)", ranks, g.job_dir, first,
                            crpm_strerror((int)all[(size_t)first * I_N + I_RC]));
        }
        break;
    case L1_EPOCH:
        if (own_msg[0] && emax - emin <= 1 && !bad_prev)
            rc = crpm_error(CRPM_ERR_EPOCH, "%s", own_msg);
        else
            rc = crpm_error(CRPM_ERR_EPOCH,
                            "crpm_init: the containers in %s hold epochs %lld to %lld%s: they cannot be "
                            "reconciled",
                            g.job_dir, (long long)emin, (long long)emax,
                            bad_prev ? " and a rank ahead has no previous epoch" : "");
        break;
    case L1_USABLE:
        break;
    }
    free(all);
    return rc;
}

/* method = full: the newest checkpoint id that every rank has a file of.
 * Each rank keeps its previous file until all have written the next one, so
 * the two newest ids of every rank always contain a common one. */
static int decide_full_restart(void)
{
    if (g.source != SRC_NONE)
        return agree(crpm_error(CRPM_ERR_CONFIG, "crpm_init: job '%s' has differential checkpoints; "
                                "method = full cannot restart from them", g.cfg.job_name), "crpm_init");
    int64_t mine[2], *all = malloc(sizeof(int64_t) * 2 * (size_t)g.nranks);
    if (!all)
        return agree(crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory"), "crpm_init");
    crpm_full_newest(g.job_dir, g.rank, mine);
    int mrc = MPI_Allgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, g.comm);
    if (mrc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(mrc, "crpm_init: MPI_Allgather");
    }
    int64_t best = -1;
    int any = 0;
    for (int k = 0; k < 2; k++) {
        int64_t cand = all[k];
        int everywhere = cand >= 0;
        for (int r = 0; r < g.nranks && everywhere; r++)
            everywhere = all[2 * r] == cand || all[2 * r + 1] == cand;
        if (everywhere && cand > best)
            best = cand;
    }
    for (int r = 0; r < g.nranks; r++)
        any |= all[2 * r] >= 0;
    free(all);
    if (best >= 0) {
        g.status = CRPM_STATUS_L1;
        g.source = SRC_FULL;
        g.full_id = (uint64_t)best;
        g.last_id = (uint64_t)best;
        return CRPM_SUCCESS;
    }
    if (any)
        return crpm_error(CRPM_ERR_EPOCH, "crpm_init: the ranks' full checkpoint files have no common id");
    return CRPM_SUCCESS;
}

static crpm_full_region *full_regions(void)
{
    crpm_full_region *r = calloc((size_t)g.nregions + 1, sizeof *r);
    for (int i = 0; r && i < g.nregions; i++)
        r[i] = (crpm_full_region){g.regions[i].id, g.regions[i].type_code, g.regions[i].elem_size,
                                  g.regions[i].count, g.regions[i].ptr};
    return r;
}

int crpm_init(const char *config_file, MPI_Comm comm)
{
    const char *fn = "crpm_init";
    if (g.initialized)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_init: already initialised"), fn);
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (!inited || fin)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_init: MPI is not initialised"), fn);
    if (comm == MPI_COMM_NULL)
        return report(crpm_error(CRPM_ERR_INVAL, "crpm_init: communicator is MPI_COMM_NULL"), fn);

    reset_state();
    crpm_config_defaults(&g.cfg);
    /* A private communicator keeps our collectives apart from the
     * application's; errors are returned, not fatal. */
    int mrc = MPI_Comm_dup(comm, &g.comm);
    if (mrc != MPI_SUCCESS) {
        g.comm = MPI_COMM_NULL;
        return report(mpi_fail(mrc, "crpm_init: MPI_Comm_dup"), fn);
    }
    g.have_comm = 1;
    MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Comm_size(g.comm, &g.nranks);

    int rc = load_config(config_file);
    if (rc == 0) {
        verbosity = g.cfg.verbosity;
        rc = parse_kill_env();
    }
#ifndef CRPM_HAVE_HDF5
    if (rc == 0 && g.cfg.ckpt_interval_l4 > 0)
        rc = crpm_error(CRPM_ERR_NOTSUP, "config %s: ckpt_interval_l4 needs level-4 (HDF5) support, which this "
                        "build of libcrpm lacks", config_file ? config_file : "(none)");
#endif
    if (rc == 0 && (snprintf(g.job_dir, sizeof g.job_dir, "%s/%s", g.cfg.ckpt_dir, g.cfg.job_name) >=
                        (int)sizeof g.job_dir ||
                    snprintf(g.path, sizeof g.path, "%s/rank-%d.crpm", g.job_dir, g.rank) >= (int)sizeof g.path))
        rc = crpm_error(CRPM_ERR_CONFIG, "crpm_init: checkpoint path too long");
    if (rc == 0)
        rc = mkdir_p(g.job_dir);
    rc = agree(rc, fn);

    /* A finalize that was removing the checkpoints did not finish: the job
     * had completed, so finish the removal and start fresh. */
    int64_t marker = 0;
    if (rc == 0) {
        char mp[sizeof g.path];
        snprintf(mp, sizeof mp, "%s/" FINALIZE_MARKER, g.job_dir);
        struct stat st;
        marker = g.rank == 0 && stat(mp, &st) == 0;
        int64_t neg = -marker;
        rc = agree_ext(0, fn, &neg, 1);
        marker = -neg;
        if (rc == 0 && marker) {
            rc = unlink_quiet(g.path);
            scan_extra_ranks(1);
            rc = agree(rc, "crpm_init: removing the checkpoints of a finished run");
            if (rc == 0 && g.rank == 0) {
                remove_l4_files();
                rc = unlink_quiet(mp);
                sync_dir(g.job_dir);
            }
            rc = agree(rc, "crpm_init: removing the checkpoints of a finished run");
        }
    }
    if (rc == 0)
        rc = decide_restart();
    if (rc == 0 && g.cfg.method == CRPM_METHOD_FULL)
        rc = decide_full_restart();
    if (rc != 0) {
        report(rc, fn);
        reset_state();
        return rc;
    }
    g.last_ckpt_time = g.last_l4_time = now();
    if (g.cfg.ckpt_interval_auto)
        crpm_interval_init(&g.auto_iv[0], g.cfg.mtbf_s);
    if (g.cfg.ckpt_interval_l4_auto)
        crpm_interval_init(&g.auto_iv[1], g.cfg.mtbf_l4_s);
    g.initialized = 1;
    crpm_error(CRPM_SUCCESS, "%s", ""); /* "no level-4 file" and the like were not errors */
    if (g.rank == 0 && g.cfg.verbosity >= 3)
        printf("[crpm] init: %d ranks, job '%s' in %s, status %d\n", g.nranks, g.cfg.job_name, g.job_dir,
               g.status);
    return CRPM_SUCCESS;
}

/* ---- protect / status / recover ------------------------------------------- */
int crpm_protect(int id, void *ptr, int64_t count, crpm_type_t type)
{
    const char *fn = "crpm_protect";
    if (!g.initialized)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_protect(%d): call crpm_init first", id), fn);
    if (count < 0 || type.size <= 0 || (count > 0 && !ptr))
        return report(crpm_error(CRPM_ERR_INVAL, "crpm_protect(%d): bad pointer, count %lld or type size %lld",
                                 id, (long long)count, (long long)type.size), fn);
    if (!((type.code >= CRPM_TC_CHAR && type.code <= CRPM_TC_LOGICAL) || type.code >= CRPM_TYPE_USER))
        return report(crpm_error(CRPM_ERR_INVAL, "crpm_protect(%d): unknown type code %d", id, (int)type.code),
                      fn);
    if ((uint64_t)count > SIZE_MAX / (uint64_t)type.size)
        return report(crpm_error(CRPM_ERR_RANGE, "crpm_protect(%d): %lld elements of %lld bytes overflow", id,
                                 (long long)count, (long long)type.size), fn);
    int i;
    for (i = 0; i < g.nregions; i++)
        if (g.regions[i].id == id)
            break;
    if (i == g.nregions && g.nregions == g.cap_regions) {
        int cap = g.cap_regions ? 2 * g.cap_regions : 16;
        region *r = realloc(g.regions, sizeof *r * (size_t)cap);
        if (!r)
            return report(crpm_error(CRPM_ERR_NOMEM, "crpm_protect: out of memory"), fn);
        g.regions = r;
        g.cap_regions = cap;
    }
    int rc = crpm_container_protect(g.c, id, ptr, (uint64_t)count, type.code, (uint64_t)type.size);
    if (rc != 0)
        return report(rc, fn);
    g.regions[i] = (region){id, type.code, (uint64_t)type.size, (uint64_t)count, ptr};
    if (i == g.nregions)
        g.nregions++;
    return CRPM_SUCCESS;
}

int crpm_status(void)
{
    if (!g.initialized)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_status: call crpm_init first"), "crpm_status");
    return g.status;
}

#ifdef CRPM_HAVE_HDF5
static crpm_l4_region *l4_regions(void)
{
    crpm_l4_region *r = calloc((size_t)g.nregions + 1, sizeof *r);
    if (!r)
        return NULL;
    for (int i = 0; i < g.nregions; i++)
        r[i] = (crpm_l4_region){g.regions[i].id, g.regions[i].type_code, g.regions[i].elem_size,
                                g.regions[i].count, g.regions[i].ptr};
    return r;
}
#endif

int crpm_recover(void)
{
    const char *fn = "crpm_recover";
    if (!g.initialized)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_recover: call crpm_init first"), fn);
    double t0 = now();
    int rc;
    if (g.broken)
        rc = crpm_error(CRPM_ERR_STATE, "crpm_recover: an earlier failed checkpoint left the container in an "
                        "unknown state; restart the application");
    else if (g.source == SRC_NONE)
        rc = crpm_error(CRPM_ERR_NOCKPT, "crpm_recover: no checkpoint of job '%s' to recover (fresh start)",
                        g.cfg.job_name);
    else if (g.source == SRC_L1)
        rc = crpm_container_recover(g.c);
    else if (g.source == SRC_FULL) {
        crpm_full_region *r = full_regions();
        rc = r ? crpm_full_read(g.job_dir, g.rank, g.full_id, g.nregions, r)
               : crpm_error(CRPM_ERR_NOMEM, "crpm_recover: out of memory");
        free(r);
    } else {
#ifdef CRPM_HAVE_HDF5
        crpm_l4_region *r = l4_regions();
        rc = r ? crpm_l4_read(g.comm, g.l4_path, g.nregions, r)
               : crpm_error(CRPM_ERR_NOMEM, "crpm_recover: out of memory");
        free(r);
#else
        rc = crpm_error(CRPM_ERR_NOTSUP, "crpm_recover: no level-4 support");
#endif
    }
    /* Status-based errors are the same on all ranks; engine ones are not. */
    rc = agree(rc, fn);
    if (rc != 0)
        return report(rc, fn);
    g.recovered = 1;
    if (g.cfg.verbosity >= 2) {
        double mine[2] = {now() - t0, 0}, mx[2];
        for (int i = 0; i < g.nregions; i++)
            mine[1] += (double)(g.regions[i].elem_size * g.regions[i].count);
        if (MPI_Allreduce(mine, mx, 2, MPI_DOUBLE, MPI_MAX, g.comm) == MPI_SUCCESS && g.rank == 0) {
            char b[32];
            fmt_size(b, sizeof b, mx[1]);
            char t[32];
            fmt_secs(t, sizeof t, mx[0]);
            printf("[crpm] recovered checkpoint %llu (%s): %s per rank in %s (%.2f GB/s per rank)\n",
                   (unsigned long long)g.last_id, g.source == SRC_L4 ? "L4" : g.source == SRC_FULL ? "full" : "L1",
                   b, t, mx[0] > 0 ? mx[1] / mx[0] / 1e9 : 0.0);
            fflush(stdout);
        }
    }
    return CRPM_SUCCESS;
}

/* ---- checkpoint ------------------------------------------------------------ */
int crpm_checkpoint(int id, int level)
{
    const char *fn = "crpm_checkpoint";
    if (!g.initialized)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_checkpoint: call crpm_init first"), fn);
    double t0 = now();
    int rc = CRPM_SUCCESS;
    if (g.broken)
        rc = crpm_error(CRPM_ERR_STATE, "crpm_checkpoint: an earlier failed checkpoint left the container in an "
                        "unknown state; restart the application");
    else if (level != CRPM_L1 && level != CRPM_L4)
        rc = crpm_error(CRPM_ERR_INVAL, "crpm_checkpoint(%d): level %d is not CRPM_L1 or CRPM_L4", id, level);
#ifndef CRPM_HAVE_HDF5
    else if (level == CRPM_L4)
        rc = crpm_error(CRPM_ERR_NOTSUP, "crpm_checkpoint(%d): level 4 needs HDF5 support, which this build of "
                        "libcrpm lacks", id);
#endif
    else if (level == CRPM_L4 && !g.cfg.glbl_dir[0])
        rc = crpm_error(CRPM_ERR_CONFIG, "crpm_checkpoint(%d): level 4 needs glbl_dir in [basic]", id);

    crpm_stats_t st;
    memset(&st, 0, sizeof st);
    uint64_t before = crpm_container_epoch(g.c);
    int full = g.cfg.method == CRPM_METHOD_FULL;
    if (rc == 0 && full && id < 0)
        rc = crpm_error(CRPM_ERR_INVAL, "crpm_checkpoint(%d): method = full needs ids >= 0", id);
    if (rc == 0 && full) {
        crpm_full_region *r = full_regions();
        rc = r ? crpm_full_write(g.job_dir, g.rank, (uint64_t)id, g.nregions, r, &st.bytes_written)
               : crpm_error(CRPM_ERR_NOMEM, "crpm_checkpoint: out of memory");
        free(r);
        for (int i = 0; i < g.nregions; i++)
            st.protected_bytes += g.regions[i].elem_size * g.regions[i].count;
        st.drains = 1;
    } else if (rc == 0) {
        g.ckpt_count++;
        rc = crpm_container_checkpoint(g.c, (uint64_t)(int64_t)id, &st);
    }
    int committed = crpm_container_epoch(g.c) == before + 1;
    /* Checks, with the commit agreement, that all ranks passed the same id
     * and level; the reduction is the barrier "every rank has committed". */
    int64_t args[4] = {id, -(int64_t)id, level, -(int64_t)level};
    rc = agree_ext(rc, fn, args, 4);
    if (rc == 0 && (args[0] != -args[1] || args[2] != -args[3]))
        rc = crpm_error(CRPM_ERR_INVAL, "crpm_checkpoint: ranks passed different ids (%lld..%lld) or levels "
                        "(%lld..%lld)", (long long)args[0], (long long)-args[1], (long long)args[2],
                        (long long)-args[3]);
    if (rc != 0) {
        /* Keep the ranks on one committed epoch. */
        if (committed && crpm_container_rollback(g.c) != 0)
            g.broken = 1;
        return report(rc, fn);
    }
    g.source = full ? SRC_FULL : SRC_L1;
    g.last_id = (uint64_t)(int64_t)id;
    g.iters_since = 0;
    if (full) { /* every rank has the new file: the older ones can go */
        g.full_id = (uint64_t)id;
        crpm_full_prune(g.job_dir, g.rank, (uint64_t)id);
    }

    double t_l1 = now();
#ifdef CRPM_HAVE_HDF5
    if (level == CRPM_L4) {
        crpm_l4_region *r = l4_regions();
        rc = r ? crpm_l4_write(g.comm, g.cfg.glbl_dir, g.cfg.job_name, id, crpm_container_epoch(g.c), g.nregions,
                               r, g.cfg.keep_l4)
               : crpm_error(CRPM_ERR_NOMEM, "crpm_checkpoint: out of memory");
        free(r);
        rc = agree(rc, "crpm_checkpoint (level 4)");
    }
#endif
    double t1 = now();
    g.cost[0] = t_l1 - t0;
    g.cost[1] = t1 - t_l1;
    st.seconds = t1 - t0;
    st.checkpoints = 1;
    g.last = st;
    g.total.checkpoints++;
    g.total.protected_bytes = st.protected_bytes;
    g.total.bytes_compared += st.bytes_compared;
    g.total.bytes_written += st.bytes_written;
    g.total.blocks_written += st.blocks_written;
    g.total.drains += st.drains;
    g.total.seconds += st.seconds;
    g.last_ckpt_time = t1;

    if (g.cfg.verbosity >= 2) {
        /* A level-4 checkpoint writes every protected byte to glbl_dir after
         * the level-1 checkpoint: both parts are reported. */
        double sum[2] = {(double)st.bytes_written, (double)st.protected_bytes}, tsum[2], tmax[2];
        if (MPI_Allreduce(sum, tsum, 2, MPI_DOUBLE, MPI_SUM, g.comm) == MPI_SUCCESS &&
            MPI_Allreduce(g.cost, tmax, 2, MPI_DOUBLE, MPI_MAX, g.comm) == MPI_SUCCESS && g.rank == 0) {
            char w[32], p[32], t[32], t4[32];
            fmt_size(w, sizeof w, tsum[0]);
            fmt_size(p, sizeof p, tsum[1]);
            fmt_secs(t, sizeof t, tmax[0]);
            fmt_secs(t4, sizeof t4, tmax[1]);
            if (level == CRPM_L4)
                printf("[crpm] checkpoint %d (L4): %s written to level 4 in %s; level 1: %s written of %s "
                       "protected (%.1f%%) in %s\n", id, p, t4, w, p, tsum[1] > 0 ? 100.0 * tsum[0] / tsum[1] : 0.0,
                       t);
            else
                printf("[crpm] checkpoint %d (L%d): %s written of %s protected (%.1f%%) in %s\n", id, level, w, p,
                       tsum[1] > 0 ? 100.0 * tsum[0] / tsum[1] : 0.0, t);
            fflush(stdout);
        }
    }
    return rc ? report(rc, fn) : CRPM_SUCCESS;
}

/* ckpt_interval_s / ckpt_interval_l4 = auto: the slowest rank's cost of
 * the checkpoint just taken updates the interval of its level(s), the same
 * on every rank. */
static int auto_interval_update(int level)
{
    double cmax[2];
    int mrc = MPI_Allreduce(g.cost, cmax, 2, MPI_DOUBLE, MPI_MAX, g.comm);
    if (mrc != MPI_SUCCESS)
        return report(mpi_fail(mrc, "crpm_snapshot: MPI_Allreduce"), "crpm_snapshot");
    for (int l = 0; l < 2; l++) {
        if (!(l == 0 ? g.cfg.ckpt_interval_auto : g.cfg.ckpt_interval_l4_auto && level == CRPM_L4))
            continue;
        double iv = crpm_interval_update(&g.auto_iv[l], cmax[l]);
        if (l == 1)
            g.last_l4_time = now();
        /* Printed when it moved by more than 10 %, not at every checkpoint. */
        if (g.cfg.verbosity >= 2 && g.rank == 0 && fabs(iv - g.auto_logged[l]) > 0.1 * g.auto_logged[l]) {
            char a[32], c[32];
            fmt_secs(a, sizeof a, iv);
            fmt_secs(c, sizeof c, g.auto_iv[l].cost_s);
            printf("[crpm] auto interval: level %d every %s (checkpoint cost %s, MTBF %g s)\n", l ? 4 : 1, a, c,
                   g.auto_iv[l].mtbf_s);
            fflush(stdout);
            g.auto_logged[l] = iv;
        }
    }
    return CRPM_SUCCESS;
}

int crpm_snapshot(void)
{
    const char *fn = "crpm_snapshot";
    if (!g.initialized)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_snapshot: call crpm_init first"), fn);
    if (g.status != CRPM_STATUS_FRESH && !g.recovered && g.source != SRC_NONE && g.total.checkpoints == 0) {
        int rc = crpm_recover();
        return rc < 0 ? rc : CRPM_SNAP_RECOVERED;
    }
    g.iters_since++;
    int due = g.cfg.ckpt_interval > 0 && g.iters_since >= g.cfg.ckpt_interval, l4_due = 0;
    int l4_auto = g.cfg.ckpt_interval_l4_auto && g.cfg.glbl_dir[0];
    if (g.cfg.ckpt_interval_s > 0 || g.cfg.ckpt_interval_auto || l4_auto) {
        /* Clocks differ between ranks: any rank past the interval decides. */
        double t = now(), since = t - g.last_ckpt_time;
        int mine[2] = {(g.cfg.ckpt_interval_s > 0 && since >= g.cfg.ckpt_interval_s) ||
                           (g.cfg.ckpt_interval_auto && crpm_interval_due(&g.auto_iv[0], since)),
                       l4_auto && crpm_interval_due(&g.auto_iv[1], t - g.last_l4_time)};
        int any[2] = {0, 0};
        int mrc = MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, g.comm);
        if (mrc != MPI_SUCCESS)
            return report(mpi_fail(mrc, "crpm_snapshot: MPI_Allreduce"), fn);
        due |= any[0] || any[1];
        l4_due = any[1];
    }
    if (!due)
        return CRPM_SNAP_NONE;
    g.snap_ckpts++;
    int level = l4_auto ? (l4_due ? CRPM_L4 : CRPM_L1)
                : g.cfg.ckpt_interval_l4 > 0 && g.snap_ckpts % g.cfg.ckpt_interval_l4 == 0 ? CRPM_L4 : CRPM_L1;
    int rc = crpm_checkpoint((int)(g.last_id + 1), level);
    if (rc == 0 && (g.cfg.ckpt_interval_auto || l4_auto))
        rc = auto_interval_update(level);
    return rc < 0 ? rc : CRPM_SNAP_CHECKPOINTED;
}

/* ---- finalize / stats -------------------------------------------------------- */
int crpm_finalize(void)
{
    const char *fn = "crpm_finalize";
    if (!g.initialized)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_finalize: call crpm_init first"), fn);
    int rc = g.c ? crpm_container_close(g.c) : 0;
    g.c = NULL;
    rc = agree(rc, fn);
    if (rc == 0 && !g.cfg.keep_last_ckpt) {
        char mp[sizeof g.path];
        snprintf(mp, sizeof mp, "%s/" FINALIZE_MARKER, g.job_dir);
        if (g.rank == 0) {
            int fd = open(mp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || fsync(fd) != 0)
                rc = crpm_error(CRPM_ERR_IO, "crpm_finalize: cannot create %s: %s", mp, strerror(errno));
            if (fd >= 0)
                close(fd);
            sync_dir(g.job_dir);
        }
        rc = agree(rc, fn);
        if (rc == 0) {
            char tmp[sizeof g.path + 8];
            snprintf(tmp, sizeof tmp, "%s.tmp", g.path);
            rc = unlink_quiet(g.path);
            unlink_quiet(tmp);
            crpm_full_remove(g.job_dir, g.rank);
            rc = agree(rc, fn);
        }
        if (rc == 0 && g.rank == 0) {
            remove_l4_files();
            sync_dir(g.job_dir);
            rc = unlink_quiet(mp);
        }
        rc = agree(rc, fn);
        if (rc == 0)
            rmdir(g.job_dir); /* per node; ENOTEMPTY if shared and not last */
    }
    if (rc != 0)
        report(rc, fn);
    reset_state();
    return rc;
}

int crpm_get_stats(crpm_stats_t *last, crpm_stats_t *total)
{
    if (!g.initialized)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_get_stats: call crpm_init first"), "crpm_get_stats");
    if (last)
        *last = g.last;
    if (total)
        *total = g.total;
    return CRPM_SUCCESS;
}

/* Asynchronous levels: the progress thread (background.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "agree.h"
#include "background.h"
#include "clock.h"
#include "coordinate.h"
#include "error.h"
#include "glayout.h"
#include "grow.h"
#include "level_table.h"
#include "mpi_wait.h"
#include "schedule.h" /* crpm_fmt_secs */
#include "runlog.h"
#include "testhook.h"

/* One hand-off: a checkpoint whose followers drain in the background. */
typedef struct bg_job {
    int64_t id;
    int level;
    uint64_t seq;              /* the job epoch it drains (the level-4 files record it) */
    uint64_t cepoch;           /* the level-1 container's epoch it reads */
    int node;                  /* the level has node-level followers (they join the commit: levels 2, 3) */
    double t_post;
    crpm_array *arrays;        /* the protected arrays' descriptors at the hand-off (ptr unused) */
    int narrays, nomem;
    size_t cap_arrays;
} bg_job;

typedef struct crpm_bg crpm_bg;
struct crpm_bg {
    crpm_ctx *ctx;
    MPI_Comm comm;             /* the thread's */
    crpm_level_env env;        /* the followers' while the thread runs (its comm; epoch: the drain's) */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    bg_job jobs[2];            /* jobs[head]: running or next; jobs[head ^ 1]: queued behind it */
    int head, njobs;           /* njobs: handed off, not finished */
    int running;               /* the thread has taken jobs[head] */
    int released;              /* ... and reads nothing of level 1's container but that epoch's copies */
    int node_done;             /* ... and its node-level followers are done (committed or failed) */
    uint64_t node_epoch;       /* the newest epoch a node-level level committed (0: none) */
    int node_open;             /* the job has node-level followers open */
    int quit;
    int fail_rc;               /* the first failed drain not yet reported: its agreed result ... */
    char fail_msg[1024];       /* ... its message ... */
    int64_t fail_id;           /* ... and its checkpoint */
    int64_t reported_id;       /* failures of drains up to this checkpoint were reported already */
    uint64_t sent;             /* bytes the finished drains sent, not yet counted */
    int broken;                /* a follower's undo failed */
    double lag[8];             /* per level: seconds from the hand-off to the end of its last drain (-1: none) */
    /* the thread's, during a drain */
    crpm_stats_t st;
    int fol_now, fol_last;     /* the follower running and the level's last (only its release counts) */
    int delayed;               /* the test hook's delay is done */
};

static void bg_release(crpm_bg *b, int force);
static void hold(crpm_bg *b);
static void node_level_done(crpm_bg *b, const bg_job *j, int rc);

/* ---- the drain (the thread) ---------------------------------------------------- */

static int needs_arrays(const crpm_ctx *ctx, int level)
{
    for (int i = 0; i < ctx->nfol; i++)
        if (ctx->fol[i].lv.ops && ctx->fol[i].level == level && ctx->fol[i].reads_arrays)
            return 1;
    return 0;
}

/* A protected array's committed bytes, read from the container on demand
 * (a memory kind, util/memkind.h): a level reading the arrays one by one
 * (level 4's datasets, the level-2 full copy) holds one host copy at a time,
 * every chunk's CRC checked as it is read. */
typedef struct committed_ref {
    crpm_container *c;
    int idx;                   /* the saved region's index */
} committed_ref;

static int committed_read(const crpm_array *a, uint64_t off, void *dst, uint64_t len)
{
    const committed_ref *r = a->ptr;
    uint64_t n = crpm_array_bytes(a);
    if (off == 0 && len == n)
        return crpm_container_read_region(r->c, r->idx, dst);
    char *all = malloc(n);
    int rc = all ? crpm_container_read_region(r->c, r->idx, all)
                 : crpm_error(CRPM_ERR_NOMEM, "array %d: out of memory for a %llu-byte copy", a->id,
                              (unsigned long long)n);
    if (rc == 0)
        memcpy(dst, all + off, len);
    free(all);
    return rc;
}

static int committed_write(const crpm_array *a, uint64_t off, const void *src, uint64_t len)
{
    (void)off;
    (void)src;
    (void)len;
    return crpm_error(CRPM_ERR_STATE, "array %d: the committed checkpoint is read only", a->id);
}

static const crpm_mem_kind committed_kind = {.name = "the level-1 checkpoint", .read = committed_read,
                                             .write = committed_write};

/* The protected arrays as the drained epoch has them, never the
 * application's (which it may be writing now) nor a later epoch's (the next
 * checkpoint may commit meanwhile): descriptors like the hand-off's whose
 * bytes are read on demand from a view of that epoch (*view, from its slot);
 * with global datasets (level 4 writes their boxes straight from host
 * memory) host copies read back at once.  Freed by free_copies. */
static int committed_copies(crpm_bg *b, const bg_job *j, crpm_container **view, crpm_array **out,
                            committed_ref **refs)
{
    crpm_ctx *ctx = b->ctx;
    int n = j->narrays, whole = b->env.glayout && !crpm_glayout_empty(b->env.glayout);
    crpm_container *c = ctx->primary.ops && ctx->primary.ops->container ? ctx->primary.ops->container(&ctx->primary)
                                                                        : NULL;
    crpm_array *a = *out = calloc((size_t)n + 1, sizeof *a);
    committed_ref *r = *refs = calloc((size_t)n + 1, sizeof *r);
    if (!a || !r)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    if (!c)
        return crpm_error(CRPM_ERR_STATE, "no level-1 container to read the checkpoint from");
    int rc = crpm_container_epoch_view(c, j->cepoch, view);
    if (rc != 0)
        return rc;
    c = *view;
    for (int i = 0; i < n; i++) {
        a[i] = j->arrays[i];
        a[i].ptr = NULL;
        a[i].kind = NULL;
        r[i].idx = -1;
    }
    int nr = crpm_container_nregions(c);
    for (int k = 0, hint = 0; k < nr && rc == 0; k++) {
        crpm_array reg;
        if ((rc = crpm_container_region(c, k, &reg)) != 0)
            break;
        int i = hint < n && a[hint].id == reg.id ? hint : -1;
        for (int q = 0; i < 0 && q < n; q++)
            if (a[q].id == reg.id)
                i = q;
        if (i < 0)
            continue; /* saved, no longer protected: not part of this checkpoint's arrays */
        hint = i + 1;
        if (crpm_array_bytes(&reg) != crpm_array_bytes(&a[i]))
            return crpm_error(CRPM_ERR_MISMATCH, "array %d: %llu bytes protected, %llu in the committed checkpoint",
                              reg.id, (unsigned long long)crpm_array_bytes(&a[i]),
                              (unsigned long long)crpm_array_bytes(&reg));
        r[i] = (committed_ref){c, k};
        if (!whole) {
            a[i].ptr = &r[i];
            a[i].kind = &committed_kind;
            continue;
        }
        a[i].ptr = malloc(crpm_array_bytes(&reg) ? crpm_array_bytes(&reg) : 1);
        rc = a[i].ptr ? crpm_container_read_region(c, k, a[i].ptr)
                      : crpm_error(CRPM_ERR_NOMEM, "out of memory for a copy of array %d", reg.id);
    }
    for (int i = 0; i < n && rc == 0; i++)
        if (r[i].idx < 0 && crpm_array_bytes(&a[i]))
            rc = crpm_error(CRPM_ERR_MISMATCH, "array %d is not in the committed checkpoint", a[i].id);
    return rc;
}

static void free_copies(crpm_container *view, crpm_array *a, committed_ref *refs, int n)
{
    for (int i = 0; a && i < n; i++)
        if (!a[i].kind)
            free(a[i].ptr);
    free(a);
    free(refs);
    crpm_container_view_free(view);
}

/* Rank 0 at verbosity 2, once every rank committed the level: the line the
 * synchronous checkpoint prints, with the drain's time. */
static void log_drained(crpm_bg *b, const bg_job *j, double secs)
{
    crpm_ctx *ctx = b->ctx;
    double v[2] = {(double)b->st.bytes_sent, secs}, sum[2], mx[2];
    if (MPI_Allreduce(v, sum, 2, MPI_DOUBLE, MPI_SUM, b->comm) != MPI_SUCCESS ||
        MPI_Allreduce(v, mx, 2, MPI_DOUBLE, MPI_MAX, b->comm) != MPI_SUCCESS || ctx->rank != 0)
        return;
    char t[32];
    crpm_fmt_secs(t, sizeof t, mx[1]);
    printf("[crpm] checkpoint %lld (L%d): level %d committed in the background, %.0f bytes sent, in %s after "
           "the call returned\n", (long long)j->id, j->level, j->level, sum[0], t);
    fflush(stdout);
}

/* The followers of the level in the table's order, those that join the
 * commit first, as crpm_coord_checkpoint runs them; each agreed on the
 * thread's communicator.  The primary stays committed whatever happens:
 * a failed follower that joins the commit goes back to its last checkpoint. */
static int run_followers(crpm_bg *b, const bg_job *j, const crpm_array *a, int n, int rc)
{
    crpm_ctx *ctx = b->ctx;
    static const int stages[2] = {CRPM_STAGE_COMMIT, CRPM_STAGE_AFTER};
    b->fol_last = -1;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < ctx->nfol; i++)
            if (ctx->fol[i].lv.ops && ctx->fol[i].level == j->level && ctx->fol[i].row->stage == stages[s])
                b->fol_last = i;
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < ctx->nfol && rc == 0; i++) {
            crpm_follower *f = &ctx->fol[i];
            if (!f->lv.ops || f->level != j->level || f->row->stage != stages[s])
                continue;
            char what[96];
            int done = 0;
            snprintf(what, sizeof what, "checkpoint %lld at level %d (in the background)", (long long)j->id,
                     f->level);
            b->fol_now = i;
            int wrc = f->lv.ops->write(&f->lv, a, n, j->id, &b->st, &done);
            rc = crpm_agree_idle(b->comm, ctx->rank, crpm_coord_write_failed(wrc, j->id, f->level), what);
            if (rc != 0 && stages[s] == CRPM_STAGE_COMMIT && f->lv.ops->undo && f->lv.ops->undo(&f->lv) != 0)
                b->broken = 1;
        }
        for (int i = 0; i < ctx->nfol && rc == 0 && stages[s] == CRPM_STAGE_COMMIT; i++) {
            crpm_follower *f = &ctx->fol[i];
            if (f->lv.ops && f->level == j->level && f->row->stage == stages[s] && f->lv.ops->committed)
                f->lv.ops->committed(&f->lv, j->id);
        }
        if (stages[s] == CRPM_STAGE_COMMIT && j->node)
            node_level_done(b, j, rc);
    }
    b->fol_now = -1;
    return rc;
}

/* The node-level followers of the drain are done: level 1 of the next
 * checkpoint may start (it takes away the epoch before this one, which a
 * node loss needed while this level was not written: must_wait). */
static void node_level_done(crpm_bg *b, const bg_job *j, int rc)
{
    pthread_mutex_lock(&b->mu);
    b->node_done = 1;
    if (rc == 0 && j->seq > b->node_epoch)
        b->node_epoch = j->seq;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    b->delayed = 0; /* tests: held again, so that the next level 1 can commit beside the rest of the drain */
    hold(b);
}

static int drain(crpm_bg *b, const bg_job *j)
{
    crpm_ctx *ctx = b->ctx;
    b->env.epoch = j->seq;
    b->delayed = 0;
    memset(&b->st, 0, sizeof b->st);
    crpm_testhook_point(ctx, "drain_start");
    crpm_container *view = NULL;
    crpm_array *copies = NULL;
    committed_ref *refs = NULL;
    int rc = j->nomem ? crpm_error(CRPM_ERR_NOMEM, "out of memory") : CRPM_SUCCESS, n = j->narrays;
    if (rc == 0 && needs_arrays(ctx, j->level))
        rc = committed_copies(b, j, &view, &copies, &refs);
    if (rc != 0 || needs_arrays(ctx, j->level)) {
        char what[96];
        snprintf(what, sizeof what, "checkpoint %lld at level %d (reading it back from level 1)", (long long)j->id,
                 j->level);
        rc = crpm_agree_idle(b->comm, ctx->rank, rc, what);
    }
    /* the followers that do not read arrays get none: nothing here may
     * touch the application's memory */
    double t_run = crpm_now();
    rc = run_followers(b, j, copies, copies ? n : 0, rc);
    crpm_runlog_drain(ctx, b->comm, j->id, j->level, rc, &b->st, crpm_now() - t_run, crpm_now() - j->t_post);
    free_copies(view, copies, refs, n);
    bg_release(b, 1);
    if (rc == 0) {
        crpm_testhook_point(ctx, "drain_committed");
        if (ctx->cfg.verbosity >= 2)
            log_drained(b, j, crpm_now() - j->t_post);
    }
    return rc;
}

/* Tests: the drain is held (CRPM_TEST_DRAIN_DELAY_MS: a slow transfer) when
 * it released the container (or at its end), and again once its node-level
 * levels are done. */
static void hold(crpm_bg *b)
{
    int ms = b->delayed ? 0 : crpm_testhook_drain_delay_ms();
    b->delayed = 1;
    if (ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* A drain done with what the next checkpoint's level 1 overwrites (the
 * level's follower says so through its env, or the drain ends: force). */
static void bg_release(crpm_bg *b, int force)
{
    if (!force && b->fol_now != b->fol_last)
        return; /* a follower after it still reads its state */
    pthread_mutex_lock(&b->mu);
    if (!b->released) {
        b->released = 1;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    hold(b);
}

static void release_cb(void *arg) { bg_release(arg, 0); }

/* A drain's end (under mu): its result is kept until reported, the first
 * failure first; a failure the agreement already reported is dropped. */
static void finish(crpm_bg *b, const bg_job *j, int rc)
{
    b->sent += b->st.bytes_sent;
    if (rc != 0 && j->id > b->reported_id && !b->fail_rc) {
        b->fail_rc = rc;
        b->fail_id = j->id;
        /* error messages are per thread: the main thread's caller gets a copy */
        snprintf(b->fail_msg, sizeof b->fail_msg, "%s", crpm_last_error());
    }
    if (rc == 0 && j->level >= 0 && j->level < 8)
        b->lag[j->level] = crpm_now() - j->t_post;
}

static void *thread_main(void *arg)
{
    crpm_bg *b = arg;
    crpm_mpi_idle_thread(1); /* it shares the cores with the application: never poll inside MPI */
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->njobs && !b->quit)
            pthread_cond_wait(&b->cv, &b->mu);
        if (!b->njobs)
            break;
        const bg_job *j = &b->jobs[b->head];
        b->running = 1;
        b->released = b->node_done = 0;
        pthread_mutex_unlock(&b->mu);
        int rc = drain(b, j);
        pthread_mutex_lock(&b->mu);
        finish(b, j, rc);
        b->running = b->released = b->node_done = 0;
        b->head ^= 1;
        b->njobs--;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* ---- the main thread -------------------------------------------------------------- */

static int thread_level_ok(crpm_ctx *ctx)
{
    int provided = MPI_THREAD_SINGLE, mine, all = 0;
    MPI_Query_thread(&provided);
    mine = provided == MPI_THREAD_MULTIPLE;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS)
        all = 0;
    if (!all && ctx->rank == 0 && ctx->cfg.verbosity >= 1) {
        const char *names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED"};
        int k = provided == MPI_THREAD_FUNNELED ? 1 : provided == MPI_THREAD_SERIALIZED ? 2 : 0;
        printf("[crpm] warning: async = 1 needs MPI_THREAD_MULTIPLE, but MPI provides %s%s: levels 2, 3 and 4 "
               "run synchronously (initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...); Open MPI "
               "also takes OMPI_MPI_THREAD_LEVEL=3 for programs that call MPI_Init)\n",
               mine ? "it on this rank but not on every rank" : names[k], mine ? "" : "");
        fflush(stdout);
    }
    return all;
}

static crpm_container *primary_container(crpm_ctx *ctx)
{
    return ctx->primary.ops && ctx->primary.ops->container ? ctx->primary.ops->container(&ctx->primary) : NULL;
}

static void destroy(crpm_bg *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    if (b->comm != MPI_COMM_NULL)
        MPI_Comm_free(&b->comm);
    free(b->jobs[0].arrays);
    free(b->jobs[1].arrays);
    free(b);
}

/* The followers' env while the thread runs: the thread's communicator and
 * the drain's epoch (the primary's moves on), and the release hook. */
static void attach_env(crpm_ctx *ctx, crpm_bg *b, int on)
{
    if (on) {
        b->env = ctx->env;
        b->env.comm = b->comm;
        b->env.release = release_cb;
        b->env.release_arg = b;
    }
    for (int i = 0; i < ctx->nfol; i++)
        if (ctx->fol[i].lv.ops)
            ctx->fol[i].lv.env = on ? &b->env : &ctx->env;
}

/* Before level 1 moves the container's mapping (the pool grows), every
 * drain reading through it ends (crpm_container_set_remap_hook). */
static void before_remap(void *arg) { crpm_bg_idle(arg); }

int crpm_bg_start(crpm_ctx *ctx)
{
    if (!ctx->cfg.async || ctx->bg)
        return CRPM_SUCCESS;
    if (ctx->cfg.method != CRPM_METHOD_DIFFERENTIAL) { /* the drain reads level 1's container */
        if (ctx->rank == 0 && ctx->cfg.verbosity >= 1) {
            printf("[crpm] warning: async = 1 needs method = differential: levels 2, 3 and 4 run synchronously\n");
            fflush(stdout);
        }
        return CRPM_SUCCESS;
    }
    if (!thread_level_ok(ctx))
        return CRPM_SUCCESS;
    crpm_bg *b = calloc(1, sizeof *b);
    int rc = b ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    if (b) {
        b->ctx = ctx;
        b->comm = MPI_COMM_NULL;
        b->reported_id = INT64_MIN;
        b->fol_now = -1;
        for (int l = 0; l < 8; l++)
            b->lag[l] = -1;
        pthread_mutex_init(&b->mu, NULL);
        pthread_cond_init(&b->cv, NULL);
        int mrc = MPI_Comm_dup(ctx->comm, &b->comm);
        if (mrc != MPI_SUCCESS) {
            b->comm = MPI_COMM_NULL;
            rc = crpm_mpi_fail(mrc, "crpm_init: MPI_Comm_dup for the background levels");
        } else {
            MPI_Comm_set_errhandler(b->comm, MPI_ERRORS_RETURN);
        }
    }
    int started = rc == 0 && pthread_create(&b->thread, NULL, thread_main, b) == 0;
    if (rc == 0 && !started)
        rc = crpm_error(CRPM_ERR_IO, "crpm_init: cannot start the background thread");
    rc = crpm_agree(ctx->comm, ctx->rank, rc, "crpm_init (background levels)");
    if (rc != 0) {
        if (started) {
            pthread_mutex_lock(&b->mu);
            b->quit = 1;
            pthread_cond_broadcast(&b->cv);
            pthread_mutex_unlock(&b->mu);
            pthread_join(b->thread, NULL);
        }
        if (b)
            destroy(b);
        return rc;
    }
    ctx->bg = b;
    attach_env(ctx, b, 1);
    /* the restart brought the node-level levels up to the epoch it resumed */
    for (int i = 0; i < ctx->nfol; i++)
        b->node_open |= ctx->fol[i].lv.ops && ctx->fol[i].row->stage == CRPM_STAGE_COMMIT;
    b->node_epoch = ctx->env.epoch;
    crpm_container *c = primary_container(ctx);
    if (c)
        crpm_container_set_remap_hook(c, before_remap, ctx);
    if (ctx->rank == 0 && ctx->cfg.verbosity >= 2) {
        printf("[crpm] async = 1: levels 2, 3 and 4 are written by a background thread on every rank\n");
        fflush(stdout);
    }
    return CRPM_SUCCESS;
}

int crpm_bg_takes(const crpm_ctx *ctx, int level)
{
    if (!ctx->bg)
        return 0;
    for (int i = 0; i < ctx->nfol; i++)
        if (ctx->fol[i].lv.ops && ctx->fol[i].level == level)
            return 1;
    return 0;
}

void crpm_bg_post(crpm_ctx *ctx, int64_t id, int level)
{
    crpm_bg *b = ctx->bg;
    crpm_container *c = primary_container(ctx);
    pthread_mutex_lock(&b->mu);
    /* crpm_bg_before_l1 left at most the previous checkpoint's drain */
    while (b->njobs == 2)
        pthread_cond_wait(&b->cv, &b->mu);
    bg_job *j = &b->jobs[(b->head + b->njobs) & 1];
    j->id = id;
    j->level = level;
    j->seq = ctx->env.epoch;
    j->cepoch = c ? crpm_container_epoch(c) : 0;
    j->node = 0;
    for (int i = 0; i < ctx->nfol; i++)
        j->node |= ctx->fol[i].lv.ops && ctx->fol[i].level == level && ctx->fol[i].row->stage == CRPM_STAGE_COMMIT;
    j->t_post = crpm_now();
    /* the descriptors as they are now: protect may change addresses while
     * the drain runs (it waits for any other change) */
    j->nomem = CRPM_GROW(j->arrays, j->cap_arrays, (size_t)ctx->narrays + 1, 16) != 0;
    j->narrays = j->nomem ? 0 : ctx->narrays;
    if (j->narrays)
        memcpy(j->arrays, ctx->arrays, sizeof *j->arrays * (size_t)j->narrays);
    b->njobs++;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* Under mu: level 1 of the next checkpoint (last + 1) must not start yet.
 * It writes the copies that do not hold the last committed epoch, i.e. those
 * of the one before (from its first store on, the container no longer
 * offers that one): every drain of an older epoch must have ended, and the
 * drain of the last one must have released the container (level.h).  And a
 * node loss must not find less than before: while the last checkpoint is not
 * written at the node-level levels (2, 3: they restore a lost container at
 * the epoch they hold, which the others' containers must still hold),
 * level 1 waits for them (a drain of level 2 or 3: until it committed them;
 * a drain of level 4 only: until it ends, when a node-level level holds the
 * epoch before and level 4 does not yet hold a newer one). */
static int must_wait(const crpm_bg *b, uint64_t last)
{
    for (int k = 0; k < b->njobs; k++)
        if (b->jobs[(b->head + k) & 1].seq < last)
            return 1;
    if (!b->njobs)
        return 0;
    const bg_job *j = &b->jobs[b->head];
    if (!b->running || !b->released)
        return 1;
    if (j->node)
        return !b->node_done;
    return b->node_open && b->node_epoch && b->node_epoch + 1 == last;
}

int64_t crpm_bg_before_l1(crpm_ctx *ctx, double *waited)
{
    crpm_bg *b = ctx->bg;
    *waited = 0;
    if (!b)
        return -1;
    double t0 = crpm_now();
    pthread_mutex_lock(&b->mu);
    int64_t id = must_wait(b, ctx->env.epoch) ? b->jobs[b->head].id : -1;
    while (must_wait(b, ctx->env.epoch))
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    *waited = id >= 0 ? crpm_now() - t0 : 0;
    return id;
}

void crpm_bg_idle(crpm_ctx *ctx)
{
    crpm_bg *b = ctx->bg;
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    while (b->njobs)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

/* Under mu: what the finished drains left for the main thread. */
static int take_result(crpm_ctx *ctx, crpm_bg *b, char *msg, size_t n, int64_t *id)
{
    int rc = b->fail_rc;
    snprintf(msg, n, "%s", rc ? b->fail_msg : "");
    *id = b->fail_id;
    ctx->total.bytes_sent += b->sent;
    b->sent = 0;
    if (b->broken)
        ctx->broken = 1;
    return rc;
}

static void consumed(crpm_bg *b, int64_t upto)
{
    if (b->fail_rc && b->fail_id <= upto)
        b->fail_rc = 0;
    if (upto > b->reported_id)
        b->reported_id = upto;
}

int crpm_bg_collect(crpm_ctx *ctx, double *waited)
{
    crpm_bg *b = ctx->bg;
    if (waited)
        *waited = 0;
    if (!b)
        return CRPM_SUCCESS;
    double t0 = crpm_now();
    char msg[1024];
    int64_t id;
    pthread_mutex_lock(&b->mu);
    while (b->njobs)
        pthread_cond_wait(&b->cv, &b->mu);
    int rc = take_result(ctx, b, msg, sizeof msg, &id);
    if (rc)
        consumed(b, id);
    pthread_mutex_unlock(&b->mu);
    if (waited)
        *waited = crpm_now() - t0;
    return rc ? crpm_error(rc, "%s", msg) : CRPM_SUCCESS;
}

int crpm_bg_report(crpm_ctx *ctx)
{
    crpm_bg *b = ctx->bg;
    if (!b)
        return CRPM_SUCCESS;
    char msg[1024];
    int64_t id;
    pthread_mutex_lock(&b->mu);
    int rc = take_result(ctx, b, msg, sizeof msg, &id);
    pthread_mutex_unlock(&b->mu);
    if (rc)
        crpm_error(rc, "%s", msg);
    /* the drains' results are agreed, but a rank may not have its result of
     * one yet that another has: the newest failed drain any rank knows of is
     * reported everywhere, and dropped when it ends late on a rank */
    int64_t ext[1] = {rc ? -id : INT64_MAX};
    int arc = crpm_agree_ext(ctx->comm, ctx->rank, rc, "crpm_checkpoint (the background levels)", ext, 1);
    if (arc != 0 && ext[0] != INT64_MAX) {
        pthread_mutex_lock(&b->mu);
        consumed(b, -ext[0]);
        pthread_mutex_unlock(&b->mu);
    }
    return arc;
}

int crpm_bg_test(crpm_ctx *ctx, int *done)
{
    crpm_bg *b = ctx->bg;
    *done = 1;
    if (!b)
        return CRPM_SUCCESS;
    char msg[1024];
    pthread_mutex_lock(&b->mu);
    *done = !b->njobs;
    int rc = b->fail_rc;
    snprintf(msg, sizeof msg, "%s", rc ? b->fail_msg : "");
    pthread_mutex_unlock(&b->mu);
    return rc ? crpm_error(rc, "%s", msg) : CRPM_SUCCESS;
}

int crpm_bg_busy(crpm_ctx *ctx, int *busy)
{
    int wait = 0, any = 0;
    *busy = 0;
    if (!ctx->bg)
        return CRPM_SUCCESS;
    crpm_bg *b = ctx->bg;
    pthread_mutex_lock(&b->mu);
    wait = must_wait(b, ctx->env.epoch);
    pthread_mutex_unlock(&b->mu);
    int mrc = MPI_Allreduce(&wait, &any, 1, MPI_INT, MPI_MAX, ctx->comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, "crpm_snapshot: MPI_Allreduce");
    *busy = any;
    return CRPM_SUCCESS;
}

double crpm_bg_lag(crpm_ctx *ctx, int level)
{
    crpm_bg *b = ctx->bg;
    if (!b || level < 0 || level >= 8)
        return -1;
    pthread_mutex_lock(&b->mu);
    double v = b->lag[level];
    pthread_mutex_unlock(&b->mu);
    return v;
}

int crpm_bg_stop(crpm_ctx *ctx)
{
    crpm_bg *b = ctx->bg;
    if (!b)
        return CRPM_SUCCESS;
    int rc = crpm_bg_collect(ctx, NULL);
    pthread_mutex_lock(&b->mu);
    b->quit = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    crpm_container *c = primary_container(ctx);
    if (c)
        crpm_container_set_remap_hook(c, NULL, NULL);
    attach_env(ctx, b, 0);
    ctx->bg = NULL;
    destroy(b);
    return rc;
}

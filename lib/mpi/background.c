/* Asynchronous levels: the progress thread (background.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "agree.h"
#include "background.h"
#include "clock.h"
#include "error.h"
#include "glayout.h"
#include "grow.h"
#include "level_table.h"
#include "mpi_wait.h"
#include "schedule.h" /* crpm_fmt_secs */
#include "testhook.h"

typedef struct crpm_bg crpm_bg;
struct crpm_bg {
    crpm_ctx *ctx;
    MPI_Comm comm;             /* the thread's: every follower's env.comm while the thread runs */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    int posted;                /* a drain in flight (posted, not finished) */
    int has_result;            /* a finished drain's result not yet collected */
    int quit;
    int rc;                    /* the finished drain's agreed result ... */
    char msg[1024];            /* ... and its message */
    int broken;                /* a follower's undo failed */
    /* the drain in flight: written by post before it is posted, then the thread's */
    int64_t id;
    int level;
    double t_post;
    crpm_stats_t st;
    double lag[8];             /* per level: seconds from the hand-off to the end of its last drain (-1: none) */
    crpm_array *arrays;        /* the protected arrays' descriptors at the hand-off (ptr unused) */
    int narrays, nomem;
    size_t cap_arrays;
};

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

/* The protected arrays as the committed epoch has them, never the
 * application's (which it may be writing now): descriptors like ctx->arrays
 * whose bytes are read from the container on demand; with global datasets
 * (level 4 writes their boxes straight from host memory) host copies read
 * back at once.  *out and *refs: freed by free_copies. */
static int committed_copies(crpm_bg *b, crpm_array **out, committed_ref **refs)
{
    crpm_ctx *ctx = b->ctx;
    int n = b->narrays, whole = ctx->env.glayout && !crpm_glayout_empty(ctx->env.glayout);
    crpm_container *c = ctx->primary.ops && ctx->primary.ops->container ? ctx->primary.ops->container(&ctx->primary)
                                                                        : NULL;
    crpm_array *a = *out = calloc((size_t)n + 1, sizeof *a);
    committed_ref *r = *refs = calloc((size_t)n + 1, sizeof *r);
    if (!a || !r)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    if (!c)
        return crpm_error(CRPM_ERR_STATE, "no level-1 container to read the checkpoint from");
    for (int i = 0; i < n; i++) {
        a[i] = b->arrays[i];
        a[i].ptr = NULL;
        a[i].kind = NULL;
        r[i].idx = -1;
    }
    int nr = crpm_container_nregions(c), rc = CRPM_SUCCESS;
    for (int k = 0, hint = 0; k < nr && rc == 0; k++) {
        crpm_array reg;
        if ((rc = crpm_container_region(c, k, &reg)) != 0)
            break;
        int i = hint < n && a[hint].id == reg.id ? hint : -1;
        for (int j = 0; i < 0 && j < n; j++)
            if (a[j].id == reg.id)
                i = j;
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

static void free_copies(crpm_array *a, committed_ref *refs, int n)
{
    for (int i = 0; a && i < n; i++)
        if (!a[i].kind)
            free(a[i].ptr);
    free(a);
    free(refs);
}

/* Rank 0 at verbosity 2, once every rank committed the level: the line the
 * synchronous checkpoint prints, with the drain's time. */
static void log_drained(crpm_bg *b, double secs)
{
    crpm_ctx *ctx = b->ctx;
    double v[2] = {(double)b->st.bytes_sent, secs}, sum[2], mx[2];
    if (MPI_Allreduce(v, sum, 2, MPI_DOUBLE, MPI_SUM, b->comm) != MPI_SUCCESS ||
        MPI_Allreduce(v, mx, 2, MPI_DOUBLE, MPI_MAX, b->comm) != MPI_SUCCESS || ctx->rank != 0)
        return;
    char t[32];
    crpm_fmt_secs(t, sizeof t, mx[1]);
    printf("[crpm] checkpoint %lld (L%d): level %d committed in the background, %.0f bytes sent, in %s after "
           "the call returned\n", (long long)b->id, b->level, b->level, sum[0], t);
    fflush(stdout);
}

/* The followers of the level in the table's order, those that join the
 * commit first, as crpm_coord_checkpoint runs them; each agreed on the
 * thread's communicator.  The primary stays committed whatever happens:
 * a failed follower that joins the commit goes back to its last checkpoint. */
static int run_followers(crpm_bg *b, const crpm_array *a, int n, int rc)
{
    crpm_ctx *ctx = b->ctx;
    static const int stages[2] = {CRPM_STAGE_COMMIT, CRPM_STAGE_AFTER};
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < ctx->nfol && rc == 0; i++) {
            crpm_follower *f = &ctx->fol[i];
            if (!f->lv.ops || f->level != b->level || f->row->stage != stages[s])
                continue;
            char what[96];
            int done = 0;
            snprintf(what, sizeof what, "checkpoint %lld at level %d (in the background)", (long long)b->id,
                     f->level);
            rc = crpm_agree_idle(b->comm, ctx->rank, f->lv.ops->write(&f->lv, a, n, b->id, &b->st, &done), what);
            if (rc != 0 && stages[s] == CRPM_STAGE_COMMIT && f->lv.ops->undo && f->lv.ops->undo(&f->lv) != 0)
                b->broken = 1;
        }
        for (int i = 0; i < ctx->nfol && rc == 0 && stages[s] == CRPM_STAGE_COMMIT; i++) {
            crpm_follower *f = &ctx->fol[i];
            if (f->lv.ops && f->level == b->level && f->row->stage == stages[s] && f->lv.ops->committed)
                f->lv.ops->committed(&f->lv, b->id);
        }
    }
    return rc;
}

static int drain(crpm_bg *b)
{
    crpm_ctx *ctx = b->ctx;
    int ms = crpm_testhook_drain_delay_ms();
    if (ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    crpm_testhook_point(ctx, "drain_start");
    crpm_array *copies = NULL;
    committed_ref *refs = NULL;
    int rc = b->nomem ? crpm_error(CRPM_ERR_NOMEM, "out of memory") : CRPM_SUCCESS, n = b->narrays;
    if (rc == 0 && needs_arrays(ctx, b->level))
        rc = committed_copies(b, &copies, &refs);
    if (rc != 0 || needs_arrays(ctx, b->level)) {
        char what[96];
        snprintf(what, sizeof what, "checkpoint %lld at level %d (reading it back from level 1)", (long long)b->id,
                 b->level);
        rc = crpm_agree_idle(b->comm, ctx->rank, rc, what);
    }
    /* the followers that do not read arrays get none: nothing here may
     * touch the application's memory */
    rc = run_followers(b, copies, copies ? n : 0, rc);
    free_copies(copies, refs, n);
    if (rc == 0) {
        crpm_testhook_point(ctx, "drain_committed");
        if (ctx->cfg.verbosity >= 2)
            log_drained(b, crpm_now() - b->t_post);
    }
    return rc;
}

static void *thread_main(void *arg)
{
    crpm_bg *b = arg;
    crpm_mpi_idle_thread(1); /* it shares the cores with the application: never poll inside MPI */
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->posted && !b->quit)
            pthread_cond_wait(&b->cv, &b->mu);
        if (!b->posted)
            break;
        pthread_mutex_unlock(&b->mu);
        int rc = drain(b);
        pthread_mutex_lock(&b->mu);
        b->rc = rc;
        /* error messages are per thread: the main thread's caller gets a copy */
        snprintf(b->msg, sizeof b->msg, "%s", rc ? crpm_last_error() : "");
        b->has_result = 1;
        if (b->level >= 0 && b->level < 8)
            b->lag[b->level] = rc == 0 ? crpm_now() - b->t_post : b->lag[b->level];
        b->posted = 0;
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

static void destroy(crpm_bg *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    if (b->comm != MPI_COMM_NULL)
        MPI_Comm_free(&b->comm);
    free(b->arrays);
    free(b);
}

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
    ctx->env.comm = b->comm;
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
    pthread_mutex_lock(&b->mu);
    b->id = id;
    b->level = level;
    b->t_post = crpm_now();
    memset(&b->st, 0, sizeof b->st);
    /* the descriptors as they are now: protect may change addresses while
     * the drain runs (it waits for any other change) */
    b->nomem = CRPM_GROW(b->arrays, b->cap_arrays, (size_t)ctx->narrays + 1, 16) != 0;
    b->narrays = b->nomem ? 0 : ctx->narrays;
    if (b->narrays)
        memcpy(b->arrays, ctx->arrays, sizeof *b->arrays * (size_t)b->narrays);
    b->has_result = 0;
    b->posted = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

void crpm_bg_idle(crpm_ctx *ctx)
{
    crpm_bg *b = ctx->bg;
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    while (b->posted)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

int crpm_bg_collect(crpm_ctx *ctx, double *waited)
{
    crpm_bg *b = ctx->bg;
    if (waited)
        *waited = 0;
    if (!b)
        return CRPM_SUCCESS;
    double t0 = crpm_now();
    pthread_mutex_lock(&b->mu);
    while (b->posted)
        pthread_cond_wait(&b->cv, &b->mu);
    int rc = b->has_result ? b->rc : CRPM_SUCCESS;
    if (b->has_result)
        ctx->total.bytes_sent += b->st.bytes_sent;
    b->has_result = 0;
    if (b->broken)
        ctx->broken = 1;
    pthread_mutex_unlock(&b->mu);
    if (waited)
        *waited = crpm_now() - t0;
    return rc ? crpm_error(rc, "%s", b->msg) : CRPM_SUCCESS;
}

int crpm_bg_test(crpm_ctx *ctx, int *done)
{
    crpm_bg *b = ctx->bg;
    *done = 1;
    if (!b)
        return CRPM_SUCCESS;
    pthread_mutex_lock(&b->mu);
    *done = !b->posted;
    int rc = *done && b->has_result ? b->rc : CRPM_SUCCESS;
    pthread_mutex_unlock(&b->mu);
    return rc ? crpm_error(rc, "%s", b->msg) : CRPM_SUCCESS;
}

int crpm_bg_busy(crpm_ctx *ctx, int *busy)
{
    int done = 1, all = 1;
    *busy = 0;
    if (!ctx->bg)
        return CRPM_SUCCESS;
    crpm_bg *b = ctx->bg;
    pthread_mutex_lock(&b->mu);
    done = !b->posted;
    pthread_mutex_unlock(&b->mu);
    int mrc = MPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, ctx->comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, "crpm_snapshot: MPI_Allreduce");
    *busy = !all;
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
    ctx->env.comm = ctx->comm;
    ctx->bg = NULL;
    destroy(b);
    return rc;
}

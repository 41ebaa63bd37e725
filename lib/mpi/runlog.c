/* The run log (runlog.h). */
#include "runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "background.h"
#include "clock.h"
#include "error.h"
#include "progress.h"
#include "stop.h"

/* A checkpoint's values per rank: the call, the wait for an earlier drain,
 * the statistics, then seconds, bytes written and sent of each part. */
enum { C_SECS, C_WAIT, C_PROT, C_CMP, C_WR, C_SENT, C_DIRTY, C_LOG, C_PART };
#define C_N (C_PART + 3 * CRPM_RL_NPARTS)

struct crpm_runlog {
    int fd;                              /* rank 0: the file; -1 elsewhere */
    double t_begin, wall_begin;          /* init began (monotonic, Unix seconds) */
    double secs[CRPM_RL_NPARTS], wr[CRPM_RL_NPARTS], sent[CRPM_RL_NPARTS]; /* the checkpoint in progress */
    unsigned ran;                        /* its parts that ran (bits) */
    double self_s;                       /* the log's own time in checkpoint calls not yet reported */
    char path[CRPM_PATH_MAX];
    /* the last checkpoint's line, gathered without blocking (MPI_Igather)
     * and written when the next event comes: no synchronisation of the
     * ranks is added to the checkpoint */
    struct pending {
        int on;
        MPI_Request req;
        double *v, *all;                 /* this rank's values; rank 0: every rank's */
        int id, level, rc, async;
        uint64_t epoch;
        unsigned ran;
        double t, t0;                    /* the call's end and start (Unix seconds, rank 0's) */
    } pend;
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- one line of JSON ---------------------------------------------------------- */
typedef struct jbuf {
    char *p;
    size_t n, cap;
    int err;
} jbuf;

__attribute__((format(printf, 2, 3))) static void jf(jbuf *b, const char *fmt, ...)
{
    for (int tries = 0; !b->err && tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->err = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap <= b->n + (size_t)k + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->err = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void jstr(jbuf *b, const char *s)
{
    jf(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            jf(b, "\\%c", c);
        else if (c < 0x20)
            jf(b, "\\u%04x", c);
        else
            jf(b, "%c", c);
    }
    jf(b, "\"");
}

/* Whole numbers (bytes, counts) exactly; others to 9 digits or the microsecond. */
static void jnum(jbuf *b, double v)
{
    if (!isfinite(v))
        jf(b, "null");
    else if (v == floor(v) && fabs(v) < 9007199254740992.0)
        jf(b, "%.0f", v);
    else if (fabs(v) >= 1e6)
        jf(b, "%.6f", v); /* Unix times to the microsecond */
    else
        jf(b, "%.9g", v);
}

/* "key":{"min":..,"med":..,"max":..,"sum":..} from a[0..3] */
static void jagg(jbuf *b, const char *key, const double *a)
{
    jf(b, ",\"%s\":{\"min\":", key);
    jnum(b, a[0]);
    jf(b, ",\"med\":");
    jnum(b, a[1]);
    jf(b, ",\"max\":");
    jnum(b, a[2]);
    jf(b, ",\"sum\":");
    jnum(b, a[3]);
    jf(b, "}");
}

/* Starts a line: the event, the time (0: now), the run. */
static void jhead_at(jbuf *b, const crpm_ctx *ctx, const char *ev, double t)
{
    jf(b, "{\"ev\":\"%s\",\"t\":", ev);
    jnum(b, t ? t : wall_now());
    jf(b, ",\"run\":\"");
    for (int i = 0; i < 8; i++)
        jf(b, "%02x", ctx->run_id[i]);
    jf(b, "\",\"job\":");
    jstr(b, ctx->cfg.job_name);
    jf(b, ",\"ranks\":%d", ctx->nranks);
}

static void jhead(jbuf *b, const crpm_ctx *ctx, const char *ev) { jhead_at(b, ctx, ev, 0); }

/* Ends the line and appends it with one write (O_APPEND): whole or, after
 * a crash in the middle, torn at the end, never interleaved. */
static void jput(crpm_ctx *ctx, jbuf *b)
{
    jf(b, "}\n");
    if (!b->err && ctx->runlog->fd >= 0) {
        ssize_t w;
        do
            w = write(ctx->runlog->fd, b->p, b->n);
        while (w < 0 && errno == EINTR);
        if ((w < 0 || (size_t)w != b->n) && ctx->cfg.verbosity >= 1) {
            fprintf(stderr, "[crpm rank 0] log_file %s: a line could not be written (%s); the run goes on\n",
                    ctx->runlog->path, w < 0 ? strerror(errno) : "short write");
            fflush(stderr);
        }
    }
    free(b->p);
}

/* ---- values over the ranks ------------------------------------------------------- */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* out[4 i ..] = min, median, max and sum of value i over the size rows of
 * n values in all; col: room for size values. */
static void aggregate(const double *all, int n, int size, double *col, double *out)
{
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int r = 0; r < size; r++) {
            col[r] = all[(size_t)r * (size_t)n + (size_t)i];
            sum += col[r];
        }
        qsort(col, (size_t)size, sizeof *col, cmp_double);
        out[4 * i] = col[0];
        out[4 * i + 1] = size % 2 ? col[size / 2] : 0.5 * (col[size / 2 - 1] + col[size / 2]);
        out[4 * i + 2] = col[size - 1];
        out[4 * i + 3] = sum;
    }
}

/* Every rank's n values to rank 0, which gets out[4 i ..] = min, median, max
 * and sum of value i and returns 1; 0 elsewhere or when MPI failed. */
static int gather(MPI_Comm comm, const double *v, int n, double *out)
{
    int me = 0, size = 1;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    double *all = me == 0 ? malloc(sizeof *all * (size_t)n * (size_t)size) : NULL;
    double *col = me == 0 ? malloc(sizeof *col * (size_t)size) : NULL;
    int ok = me != 0 || (all && col);
    /* everyone takes part even without memory on rank 0: it then gathers nothing */
    int mrc = MPI_Gather(v, n, MPI_DOUBLE, ok ? all : NULL, ok ? n : 0, MPI_DOUBLE, 0, comm);
    if (me != 0 || !ok || mrc != MPI_SUCCESS) {
        free(all);
        free(col);
        return 0;
    }
    aggregate(all, n, size, col, out);
    free(all);
    free(col);
    return 1;
}

/* ---- open and close ------------------------------------------------------------- */
int crpm_runlog_open(crpm_ctx *ctx, double t_begin)
{
    if (!ctx->cfg.log_file[0])
        return CRPM_SUCCESS;
    struct crpm_runlog *rl = calloc(1, sizeof *rl);
    if (!rl)
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    rl->fd = -1;
    rl->t_begin = t_begin;
    rl->wall_begin = wall_now() - (crpm_now() - t_begin);
    ctx->runlog = rl;
    rl->pend.v = malloc(sizeof *rl->pend.v * C_N);
    rl->pend.all = ctx->rank == 0 ? malloc(sizeof *rl->pend.all * C_N * (size_t)ctx->nranks) : NULL;
    if (!rl->pend.v || (ctx->rank == 0 && !rl->pend.all))
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory (log_file)");
    if (ctx->rank != 0)
        return CRPM_SUCCESS;
    /* a relative name is in rank 0's ckpt_dir, the job directory's parent
     * (kept when finalize removes the job directory) */
    const char *f = ctx->cfg.log_file;
    int n;
    if (f[0] == '/')
        n = snprintf(rl->path, sizeof rl->path, "%s", f);
    else {
        const char *slash = strrchr(ctx->job_dir, '/');
        int dl = slash ? (int)(slash - ctx->job_dir) : 1;
        n = snprintf(rl->path, sizeof rl->path, "%.*s/%s", dl, slash ? ctx->job_dir : ".", f);
    }
    if (n < 0 || (size_t)n >= sizeof rl->path)
        return crpm_error(CRPM_ERR_CONFIG, "log_file %s: path too long", f);
    rl->fd = open(rl->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (rl->fd < 0)
        return crpm_error(CRPM_ERR_IO, "log_file %s: cannot open for appending: %s", rl->path, strerror(errno));
    return CRPM_SUCCESS;
}

static void finish_pending(crpm_ctx *ctx);

void crpm_runlog_close(crpm_ctx *ctx)
{
    if (!ctx->runlog)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        finish_pending(ctx);
    free(ctx->runlog->pend.v);
    free(ctx->runlog->pend.all);
    if (ctx->runlog->fd >= 0)
        close(ctx->runlog->fd);
    free(ctx->runlog);
    ctx->runlog = NULL;
}

/* ---- checkpoints ---------------------------------------------------------------- */
void crpm_runlog_part(crpm_ctx *ctx, int part, double secs, uint64_t written, uint64_t sent)
{
    struct crpm_runlog *rl = ctx->runlog;
    if (!rl || part < 0 || part >= CRPM_RL_NPARTS)
        return;
    rl->secs[part] += secs;
    rl->wr[part] += (double)written;
    rl->sent[part] += (double)sent;
    rl->ran |= 1u << part;
}

static const char *part_name(int p)
{
    static const char *names[CRPM_RL_NPARTS] = {"data", "commit", "L2", "L3", "L4"};
    return names[p];
}


/* Rank 0 writes the pending checkpoint's line; every rank completes its
 * part of the gather (on the others a local completion: the values left
 * when it was posted). */
static void finish_pending(crpm_ctx *ctx)
{
    struct crpm_runlog *rl = ctx->runlog;
    struct pending *p = &rl->pend;
    if (!p->on)
        return;
    p->on = 0;
    int mrc = MPI_Wait(&p->req, MPI_STATUS_IGNORE);
    if (ctx->rank != 0 || mrc != MPI_SUCCESS)
        return;
    double a[4 * C_N], *col = malloc(sizeof *col * (size_t)ctx->nranks);
    if (!col)
        return;
    aggregate(p->all, C_N, ctx->nranks, col, a);
    free(col);
    jbuf b = {0};
    jhead_at(&b, ctx, "checkpoint", p->t);
    jf(&b, ",\"t0\":");
    jnum(&b, p->t0);
    jf(&b, ",\"id\":%d,\"level\":%d,\"epoch\":%llu,\"ok\":%s,\"async\":%d,\"tracking\":\"%s\",\"method\":\"%s\"",
       p->id, p->level, (unsigned long long)p->epoch, p->rc == 0 ? "true" : "false", p->async,
       ctx->cfg.change_tracking ? "pagemap" : "compare", ctx->cfg.method == CRPM_METHOD_FULL ? "full" : "differential");
    jagg(&b, "seconds", a + 4 * C_SECS);
    jagg(&b, "waited", a + 4 * C_WAIT);
    jagg(&b, "protected", a + 4 * C_PROT);
    jagg(&b, "compared", a + 4 * C_CMP);
    jagg(&b, "written", a + 4 * C_WR);
    jagg(&b, "sent", a + 4 * C_SENT);
    jagg(&b, "dirty", a + 4 * C_DIRTY);
    jagg(&b, "log_seconds", a + 4 * C_LOG);
    jf(&b, ",\"parts\":{");
    int first = 1;
    for (int q = 0; q < CRPM_RL_NPARTS; q++) {
        if (!(p->ran & (1u << q)))
            continue;
        jf(&b, "%s\"%s\":{\"level\":%d", first ? "" : ",", part_name(q),
           q == CRPM_RL_DATA ? 1 : q == CRPM_RL_AGREE ? 0 : q);
        jagg(&b, "seconds", a + 4 * (C_PART + 3 * q));
        jagg(&b, "written", a + 4 * (C_PART + 3 * q + 1));
        jagg(&b, "sent", a + 4 * (C_PART + 3 * q + 2));
        jf(&b, "}");
        first = 0;
    }
    jf(&b, "}");
    jput(ctx, &b);
}

void crpm_runlog_begin(crpm_ctx *ctx)
{
    if (!ctx->runlog)
        return;
    double t = crpm_now();
    finish_pending(ctx);
    ctx->runlog->self_s += crpm_now() - t;
}

void crpm_runlog_checkpoint(crpm_ctx *ctx, int id, int level, int rc, const crpm_stats_t *st, double secs,
                            double waited)
{
    struct crpm_runlog *rl = ctx->runlog;
    if (!rl)
        return;
    double t_self = crpm_now();
    finish_pending(ctx);
    struct pending *p = &rl->pend;
    /* allocated at open: no rank can be without its buffers here */
    double *v = p->v;
    v[C_SECS] = secs;
    v[C_WAIT] = waited;
    v[C_PROT] = (double)st->protected_bytes;
    v[C_CMP] = (double)st->bytes_compared;
    v[C_WR] = (double)st->bytes_written;
    v[C_SENT] = (double)st->bytes_sent;
    v[C_DIRTY] = st->protected_bytes ? rl->wr[CRPM_RL_DATA] / (double)st->protected_bytes : 0;
    v[C_LOG] = rl->self_s; /* this call's start, and the previous call's end (posted after it was measured) */
    for (int q = 0; q < CRPM_RL_NPARTS; q++) {
        v[C_PART + 3 * q] = rl->secs[q];
        v[C_PART + 3 * q + 1] = rl->wr[q];
        v[C_PART + 3 * q + 2] = rl->sent[q];
    }
    p->ran = rl->ran;
    memset(rl->secs, 0, sizeof rl->secs);
    memset(rl->wr, 0, sizeof rl->wr);
    memset(rl->sent, 0, sizeof rl->sent);
    rl->ran = 0;
    p->id = id;
    p->level = level;
    p->rc = rc;
    p->async = crpm_bg_takes(ctx, level);
    p->epoch = ctx->env.epoch;
    p->t = wall_now();
    p->t0 = p->t - secs;
    p->on = MPI_Igather(v, C_N, MPI_DOUBLE, p->all, C_N, MPI_DOUBLE, 0, ctx->comm, &p->req) == MPI_SUCCESS;
    rl->self_s = crpm_now() - t_self;
}

enum { D_RUN, D_LAG, D_WR, D_SENT, D_N };

void crpm_runlog_drain(crpm_ctx *ctx, MPI_Comm comm, int64_t id, int level, int rc, const crpm_stats_t *st,
                       double run_s, double lag_s)
{
    if (!ctx->runlog)
        return;
    double v[D_N] = {run_s, lag_s, (double)st->bytes_written, (double)st->bytes_sent}, a[4 * D_N];
    if (!gather(comm, v, D_N, a))
        return;
    jbuf b = {0};
    jhead(&b, ctx, "drain");
    jf(&b, ",\"t0\":");
    jnum(&b, wall_now() - lag_s); /* the hand-off: the checkpoint call's commit */
    jf(&b, ",\"id\":%lld,\"level\":%d,\"ok\":%s", (long long)id, level, rc == 0 ? "true" : "false");
    jagg(&b, "seconds", a + 4 * D_RUN);
    jagg(&b, "lag", a + 4 * D_LAG);
    jagg(&b, "written", a + 4 * D_WR);
    jagg(&b, "sent", a + 4 * D_SENT);
    jput(ctx, &b);
}

/* ---- restart, recovery ---------------------------------------------------------- */
/* The level that brought rank r back: the highest follower whose plan
 * repairs it, else what the status says for every rank. */
static int back_from(const crpm_ctx *ctx, int r)
{
    int lv = 0;
    for (int i = 0; i < ctx->nfol; i++) {
        const crpm_follower *f = &ctx->fol[i];
        if (f->lv.ops && f->plan.repair && f->plan.nrepair && f->plan.repair[r] && f->level > lv)
            lv = f->level;
    }
    if (lv)
        return lv;
    switch (ctx->status) {
    case CRPM_STATUS_FRESH: return 0;
    case CRPM_STATUS_L4: return 4;
    case CRPM_STATUS_RESHAPED: return CRPM_STATUS_RESHAPED;
    default: return 1;
    }
}

#define BY_RANK_MAX 4096 /* larger jobs: counts per level only */

void crpm_runlog_restart(crpm_ctx *ctx, int rc)
{
    struct crpm_runlog *rl = ctx->runlog;
    if (!rl)
        return;
    int worst = rc;
    if (MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS || worst != 0) {
        if (rc != 0)
            crpm_runlog_failure(ctx, "restart", -1, 0, rc);
        return;
    }
    static const char *kinds[CRPM_PG_KINDS] = {"L2 sync", "L3 rebuild", "reshape"};
    double v[1 + 2 * CRPM_PG_KINDS], a[4 * (1 + 2 * CRPM_PG_KINDS)];
    v[0] = crpm_now() - rl->t_begin;
    crpm_progress_take(v + 1, v + 1 + CRPM_PG_KINDS);
    if (!gather(ctx->comm, v, 1 + 2 * CRPM_PG_KINDS, a))
        return;
    int count[CRPM_STATUS_RESHAPED + 1] = {0};
    for (int r = 0; r < ctx->nranks; r++)
        count[back_from(ctx, r)]++;
    jbuf b = {0};
    jhead(&b, ctx, "restart");
    jf(&b, ",\"t0\":");
    jnum(&b, rl->wall_begin);
    jf(&b, ",\"status\":%d,\"fresh\":%s,\"source\":", ctx->status, ctx->status == CRPM_STATUS_FRESH ? "true" : "false");
    if (ctx->source)
        jstr(&b, ctx->source->ops->name);
    else
        jf(&b, "null");
    jf(&b, ",\"id\":%llu,\"epoch\":%llu,\"rebuilt\":%d,\"back_from\":{", (unsigned long long)ctx->last_id,
       (unsigned long long)ctx->env.epoch, count[2] + count[3]);
    int first = 1;
    for (int l = 0; l <= CRPM_STATUS_RESHAPED; l++)
        if (count[l]) {
            jf(&b, "%s\"%d\":%d", first ? "" : ",", l, count[l]);
            first = 0;
        }
    jf(&b, "}");
    if (ctx->nranks <= BY_RANK_MAX) {
        jf(&b, ",\"by_rank\":[");
        for (int r = 0; r < ctx->nranks; r++)
            jf(&b, "%s%d", r ? "," : "", back_from(ctx, r));
        jf(&b, "]");
    }
    jagg(&b, "seconds", a);
    jf(&b, ",\"phases\":[");
    first = 1;
    for (int k = 0; k < CRPM_PG_KINDS; k++) {
        if (a[4 * (1 + k) + 2] <= 0 && a[4 * (1 + CRPM_PG_KINDS + k) + 2] <= 0)
            continue; /* no rank did it */
        jf(&b, "%s{\"what\":\"%s\"", first ? "" : ",", kinds[k]);
        jagg(&b, "bytes", a + 4 * (1 + k));
        jagg(&b, "seconds", a + 4 * (1 + CRPM_PG_KINDS + k));
        jf(&b, "}");
        first = 0;
    }
    jf(&b, "]");
    jput(ctx, &b);
}

void crpm_runlog_recover(crpm_ctx *ctx, double secs, double bytes)
{
    if (!ctx->runlog)
        return;
    finish_pending(ctx);
    double v[2] = {secs, bytes}, a[8];
    if (!gather(ctx->comm, v, 2, a))
        return;
    jbuf b = {0};
    jhead(&b, ctx, "recover");
    jf(&b, ",\"id\":%llu,\"source\":", (unsigned long long)ctx->last_id);
    if (ctx->source)
        jstr(&b, ctx->source->ops->name);
    else
        jf(&b, "null");
    jagg(&b, "seconds", a);
    jagg(&b, "bytes", a + 4);
    jput(ctx, &b);
}

/* ---- rank 0 alone ----------------------------------------------------------------- */
void crpm_runlog_interval(crpm_ctx *ctx, int level, double cost, const crpm_interval *iv)
{
    if (!ctx->runlog || ctx->rank != 0)
        return;
    finish_pending(ctx); /* the lines in order */
    jbuf b = {0};
    jhead(&b, ctx, "interval");
    jf(&b, ",\"level\":%d,\"formula\":\"daly\",\"cost\":", level);
    jnum(&b, cost);
    jf(&b, ",\"cost_avg\":");
    jnum(&b, iv->cost_s);
    jf(&b, ",\"samples\":%lu,\"mtbf\":", iv->nsamples);
    jnum(&b, iv->mtbf_s);
    jf(&b, ",\"interval\":");
    jnum(&b, iv->interval_s);
    jput(ctx, &b);
}

void crpm_runlog_stop(crpm_ctx *ctx, int reason, double left, double margin)
{
    if (!ctx->runlog || ctx->rank != 0)
        return;
    finish_pending(ctx); /* the lines in order */
    char why[512];
    crpm_stop_reason_text(ctx, why, sizeof why);
    jbuf b = {0};
    jhead(&b, ctx, "stop");
    jf(&b, ",\"reasons\":[");
    static const struct { int bit; const char *name; } rs[] = {
        {CRPM_STOP_END_TIME, "end_time"}, {CRPM_STOP_SIGNAL, "signal"}, {CRPM_STOP_HALT, "halt"}};
    int first = 1;
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++)
        if (reason & rs[i].bit) {
            jf(&b, "%s\"%s\"", first ? "" : ",", rs[i].name);
            first = 0;
        }
    jf(&b, "],\"why\":");
    jstr(&b, why);
    jf(&b, ",\"left\":");
    if (left >= 0)
        jnum(&b, left);
    else
        jf(&b, "null");
    jf(&b, ",\"margin\":");
    if (margin >= 0)
        jnum(&b, margin);
    else
        jf(&b, "null");
    jput(ctx, &b);
}

void crpm_runlog_failure(crpm_ctx *ctx, const char *where, int id, int level, int rc)
{
    if (!ctx->runlog || ctx->rank != 0 || rc == 0)
        return;
    finish_pending(ctx);
    jbuf b = {0};
    jhead(&b, ctx, "failure");
    jf(&b, ",\"where\":\"%s\"", where);
    if (id >= 0)
        jf(&b, ",\"id\":%d,\"level\":%d", id, level);
    jf(&b, ",\"code\":%d,\"error\":", rc);
    jstr(&b, crpm_strerror(rc));
    jf(&b, ",\"message\":");
    jstr(&b, crpm_last_error());
    jput(ctx, &b);
}

enum { E_RUN, E_CKPT_S, E_N_CKPT, E_WR, E_SENT, E_N };

void crpm_runlog_end(crpm_ctx *ctx)
{
    struct crpm_runlog *rl = ctx->runlog;
    if (!rl)
        return;
    finish_pending(ctx);
    double v[E_N] = {crpm_now() - rl->t_begin, ctx->total.seconds, (double)ctx->total.checkpoints,
                     (double)ctx->total.bytes_written, (double)ctx->total.bytes_sent}, a[4 * E_N];
    if (!gather(ctx->comm, v, E_N, a))
        return;
    jbuf b = {0};
    jhead(&b, ctx, "end");
    jf(&b, ",\"t0\":");
    jnum(&b, rl->wall_begin);
    jf(&b, ",\"stopped\":%s", ctx->stop.reason ? "true" : "false");
    jagg(&b, "run_seconds", a + 4 * E_RUN);
    jagg(&b, "checkpoint_seconds", a + 4 * E_CKPT_S);
    jagg(&b, "checkpoints", a + 4 * E_N_CKPT);
    jagg(&b, "written", a + 4 * E_WR);
    jagg(&b, "sent", a + 4 * E_SENT);
    jput(ctx, &b);
}

/* Stopping before the scheduler ends the job (stop.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agree.h"
#include "clock.h"
#include "context.h"
#include "coordinate.h"
#include "error.h"
#include "fsutil.h"
#include "schedule.h" /* crpm_fmt_secs */
#include "runlog.h"
#include "stop.h"

/* How often, in seconds of the application's calls, crpm_snapshot checks
 * for a reason to stop: the check is a collective, so a loop of short
 * iterations checks every few calls instead of every call. */
#define POLL_PERIOD_S 0.1

/* ---- parsing ------------------------------------------------------------------ */

/* Exactly n decimal digits at *p. */
static int digits(const char **p, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return -1;
        x = 10 * x + ((*p)[i] - '0');
    }
    *p += n;
    *v = x;
    return 0;
}

/* hh[:mm] or hhmm of a UTC offset, after its sign. */
static int parse_offset(const char *p, int *minutes)
{
    int h, m = 0;
    if (digits(&p, 2, &h) != 0)
        return -1;
    if (*p == ':')
        p++;
    if (*p && digits(&p, 2, &m) != 0)
        return -1;
    if (*p || h > 23 || m > 59)
        return -1;
    *minutes = 60 * h + m;
    return 0;
}

static int parse_iso(const char *s, double *out)
{
    const char *p = s;
    int Y, M, D, h, m, sec = 0;
    if (digits(&p, 4, &Y) || *p++ != '-' || digits(&p, 2, &M) || *p++ != '-' || digits(&p, 2, &D))
        return -1;
    if ((*p != 'T' && *p != 't' && *p != ' ') || (p++, digits(&p, 2, &h)) || *p++ != ':' || digits(&p, 2, &m))
        return -1;
    double frac = 0;
    if (*p == ':') {
        p++;
        if (digits(&p, 2, &sec))
            return -1;
        if (*p == '.' || *p == ',') {
            const char *f = ++p;
            while (isdigit((unsigned char)*p))
                p++;
            if (p == f)
                return -1;
            char buf[32] = "0.";
            snprintf(buf + 2, sizeof buf - 2, "%.*s", (int)(p - f > 20 ? 20 : p - f), f);
            frac = strtod(buf, NULL);
        }
    }
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
        return -1;
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = sec};
    time_t t;
    if (*p == '\0') { /* no zone: local time */
        tm.tm_isdst = -1;
        t = mktime(&tm);
    } else {
        int off = 0;
        if (*p == 'Z' || *p == 'z') {
            if (p[1])
                return -1;
        } else if ((*p == '+' || *p == '-') && parse_offset(p + 1, &off) == 0) {
            off = *p == '-' ? -off : off;
        } else {
            return -1;
        }
        t = timegm(&tm);
        if (t != (time_t)-1)
            t -= (time_t)off * 60;
    }
    /* mktime/timegm normalise 2024-02-30 into March: refuse instead. */
    if (t == (time_t)-1 || tm.tm_mday != D || tm.tm_mon != M - 1)
        return -1;
    *out = (double)t + frac;
    return 0;
}

int crpm_stop_parse_time(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    size_t n = strlen(s);
    double d;
    if (strspn(s, "0123456789.") == n) { /* Unix seconds */
        char *end;
        errno = 0;
        d = strtod(s, &end);
        if (errno || *end || !isfinite(d) || strchr(s, '.') != strrchr(s, '.'))
            return -1;
    } else if (parse_iso(s, &d) != 0) {
        return -1;
    }
    /* 0 is 1970, not "no end time" (that is an empty value); beyond year 9999 is no allocation's end */
    if (d <= 0 || d > CRPM_STOP_TIME_MAX)
        return -1;
    *out = d;
    return 0;
}

static const struct {
    const char *name;
    int signo;
} signals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"ALRM", SIGALRM}, {"TERM", SIGTERM},     {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"VTALRM", SIGVTALRM},
    {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
};

int crpm_stop_parse_signal(const char *s, int *signo)
{
    if (!s || !*s)
        return -1;
    if (isdigit((unsigned char)s[0])) {
        char *end;
        long v = strtol(s, &end, 10);
        if (*end)
            return -1;
        for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
            if (signals[i].signo == v) {
                *signo = (int)v;
                return 0;
            }
        return -1;
    }
    const char *name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (strcasecmp(name, signals[i].name) == 0) {
            *signo = signals[i].signo;
            return 0;
        }
    return -1;
}

const char *crpm_stop_signal_expected(const char *s)
{
    static const char any[] = "a signal name or number: HUP, INT, QUIT, USR1, USR2, ALRM, TERM, URG, XCPU, VTALRM, "
                              "PROF or WINCH (with or without SIG), or nothing";
    if (!s)
        return any;
    char *end;
    long v = isdigit((unsigned char)s[0]) ? strtol(s, &end, 10) : -1;
    const char *name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    /* by number or by name, the same answer */
    if ((v >= 0 && !*end && (v == SIGKILL || v == SIGSTOP)) || strcasecmp(name, "KILL") == 0 ||
        strcasecmp(name, "STOP") == 0)
        return "a signal that can be caught (SIGKILL and SIGSTOP cannot: the job would end or stop before it could "
               "checkpoint; ask the scheduler for USR1 or TERM, e.g. sbatch --signal=USR1@120, and name it here)";
    return any;
}

const char *crpm_stop_signal_name(int signo)
{
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (signals[i].signo == signo)
            return signals[i].name;
    return "?";
}

/* ---- start and end ------------------------------------------------------------ */

/* Signals are per process: the handler sets this, the next check reads it. */
static volatile sig_atomic_t signalled;
/* The handler exit_signal's replaced (one library context per process). */
static struct sigaction old_action;

static void on_signal(int signo)
{
    (void)signo;
    signalled = 1;
}

static int marker_path(const crpm_ctx *ctx, const char *name, char *out, size_t n)
{
    return crpm_name_join(out, n, ctx->job_dir, name);
}

/* Where an end time comes from; the configuration's end_time (or
 * CRPM_END_TIME, which overrides it) and the scheduler's may differ, and
 * ranks may see different environments: the earliest counts. */
enum { END_FILE, END_ENV, END_SLURM, END_N };
static const char *const end_names[END_N] = {"end_time", "CRPM_END_TIME", "SLURM_JOB_END_TIME"};

/* The scheduler's end of the allocation, when it tells: Slurm (>= 21.08)
 * exports SLURM_JOB_END_TIME in Unix seconds. */
static void scheduler_end(crpm_ctx *ctx)
{
    const char *v = getenv("SLURM_JOB_END_TIME");
    double t = 0;
    if (!v || !*v)
        return;
    if (crpm_stop_parse_time(v, &t) != 0 || t <= 0) {
        if (ctx->rank == 0 && ctx->cfg.verbosity >= 1)
            fprintf(stderr, "[crpm rank 0] ignoring SLURM_JOB_END_TIME='%s': not a time in Unix seconds\n", v);
        return;
    }
    ctx->stop.end[END_SLURM] = t;
}

int crpm_stop_start(crpm_ctx *ctx)
{
    crpm_stop *s = &ctx->stop;
    memset(s, 0, sizeof *s);
    s->every = 1;
    signalled = 0; /* a signal to an earlier init of this process is no reason now */
    if (ctx->cfg.end_time > 0)
        s->end[ctx->cfg.end_time_env ? END_ENV : END_FILE] = ctx->cfg.end_time;
    scheduler_end(ctx);
    int rc = CRPM_SUCCESS;
    char p[CRPM_PATH_MAX];
    /* A marker left by an earlier run that stopped early: this run supersedes it. */
    if (ctx->rank == 0 && marker_path(ctx, CRPM_STOPPED_FILE, p, sizeof p) == 0)
        rc = crpm_unlink_quiet(p);
    if (rc == 0 && ctx->cfg.exit_signal > 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(ctx->cfg.exit_signal, &sa, &old_action) != 0)
            rc = crpm_error(CRPM_ERR_CONFIG, "crpm_init: exit_signal %s: cannot install a handler: %s",
                            crpm_stop_signal_name(ctx->cfg.exit_signal), strerror(errno));
        else
            s->handler = 1;
    }
    return rc;
}

void crpm_stop_end(crpm_ctx *ctx)
{
    if (ctx->stop.handler) {
        sigaction(ctx->cfg.exit_signal, &old_action, NULL);
        ctx->stop.handler = 0;
    }
}

/* ---- cost of the final checkpoint ---------------------------------------------- */

void crpm_stop_record(crpm_ctx *ctx, int level, double seconds)
{
    if (level < 1 || level > 4)
        return;
    crpm_stop *s = &ctx->stop;
    s->cost[level][s->ncost[level]++ % CRPM_STOP_COSTS] = seconds;
}

/* The slowest of the recent checkpoints at `level` on this rank (0: none). */
static double recent_cost(const crpm_stop *s, int level)
{
    double c = 0;
    unsigned n = s->ncost[level] < CRPM_STOP_COSTS ? s->ncost[level] : CRPM_STOP_COSTS;
    for (unsigned i = 0; i < n; i++)
        c = fmax(c, s->cost[level][i]);
    return c;
}

int crpm_stop_level(const crpm_ctx *ctx)
{
    const crpm_config *cfg = &ctx->cfg;
#ifdef CRPM_HAVE_HDF5
    /* Node-local storage may not outlive the allocation: the global copy
     * is the one the next allocation can surely read. */
    if (cfg->glbl_dir[0])
        return 4;
#endif
    if (cfg->ckpt_interval_l3 > 0 && crpm_coord_has(ctx, CRPM_L3))
        return 3;
    if (cfg->ckpt_interval_l2 > 0 && crpm_coord_has(ctx, CRPM_L2))
        return 2;
    return 1;
}

/* ---- the check ------------------------------------------------------------------- */

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The first rank of each node looks at its node's job directory, so that a
 * HALT file in any node's directory (ckpt_dir with %n) is seen. */
static int halt_requested(const crpm_ctx *ctx)
{
    char p[CRPM_PATH_MAX];
    struct stat st;
    return ctx->topo.local == 0 && marker_path(ctx, CRPM_HALT_FILE, p, sizeof p) == 0 && stat(p, &st) == 0;
}

enum { V_SIGNAL, V_HALT, V_GAP, V_OVERDUE, V_COST = V_OVERDUE + END_N, V_N = V_COST + 5 };

/* Verbosity 2: the margin, when it first exists and when it moves by more
 * than 10 %. */
static void log_margin(crpm_ctx *ctx, double left, double margin, double cost, int level, double next)
{
    crpm_stop *s = &ctx->stop;
    if (ctx->cfg.verbosity < 2 || ctx->rank != 0 || left < 0 ||
        fabs(margin - s->margin_logged) <= 0.1 * s->margin_logged)
        return;
    char l[32], m[32], c[32], nx[32];
    crpm_fmt_secs(l, sizeof l, left);
    crpm_fmt_secs(m, sizeof m, margin);
    crpm_fmt_secs(c, sizeof c, cost);
    crpm_fmt_secs(nx, sizeof nx, next);
    if (cost > 0)
        printf("[crpm] end of allocation in %s (%s): stop margin %s = %g x %s (level-%d checkpoint) + %s (to "
               "the next check)\n", l, end_names[s->end_src], m, ctx->cfg.end_time_safety, c, level, nx);
    else
        printf("[crpm] end of allocation in %s (%s): stop margin %s (to the next check; no checkpoint measured "
               "yet)\n", l, end_names[s->end_src], m);
    fflush(stdout);
    s->margin_logged = margin;
}

/* Decides on the reduced values v: the reasons, the next check's distance,
 * and whether the end of the allocation is within the margin. */
static void decide(crpm_ctx *ctx, const double *v, int *measure)
{
    crpm_stop *s = &ctx->stop;
    /* Every rank made the same number of calls since the last check. */
    if (v[V_GAP] > 0) {
        s->step_s = v[V_GAP] / (double)s->calls;
        s->gap[s->ngap++ % 4] = v[V_GAP];
    }
    /* The same inputs on every rank give the same count. */
    s->every = s->step_s > 0 ? (long)fmin(fmax(floor(POLL_PERIOD_S / s->step_s), 1), 1e6) : 1;
    int reason = (v[V_SIGNAL] > 0 ? CRPM_STOP_SIGNAL : 0) | (v[V_HALT] > 0 ? CRPM_STOP_HALT : 0);
    double left_log = -1, margin_log = -1; /* for the run log */
    /* The earliest end (the largest overdue time) of any rank and source. */
    int src = 0;
    for (int k = 1; k < END_N; k++)
        if (v[V_OVERDUE + k] > v[V_OVERDUE + src])
            src = k;
    if (v[V_OVERDUE + src] > -1e300) {
        s->end_src = src;
        s->end_time = wall_now() - v[V_OVERDUE + src];
        int level = crpm_stop_level(ctx);
        double cost = v[V_COST + level];
        if (cost <= 0) /* not measured at that level: the costliest measured */
            for (int l = 1; l <= 4; l++)
                cost = fmax(cost, v[V_COST + l]);
        /* The next check comes after `every` calls, or as late as the
         * slowest recent gap between checks if calls vary. */
        double left = -v[V_OVERDUE + src], next = (double)s->every * s->step_s;
        for (unsigned k = 0; k < s->ngap && k < 4; k++)
            next = fmax(next, s->gap[k]);
        double margin = ctx->cfg.end_time_safety * cost + next;
        log_margin(ctx, left, margin, cost, level, next);
        left_log = left;
        margin_log = margin;
        if (!s->first_left)
            s->first_left = left;
        if (left <= margin)
            reason |= CRPM_STOP_END_TIME;
        /* Not measured at the final level (the schedule may never take it):
         * measure it while half the time is still left, not at the start,
         * where a checkpoint of level 4 could be a needless cost. */
        else if (measure && v[V_COST + level] <= 0 && left <= 0.5 * s->first_left)
            *measure = 1;
    }
    int was = s->reason;
    s->reason = reason;
    if (reason && !was)
        crpm_runlog_stop(ctx, reason, left_log, margin_log);
    if (reason && ctx->rank == 0 && ctx->cfg.verbosity >= 1) {
        char why[256];
        crpm_stop_reason_text(ctx, why, sizeof why);
        printf("[crpm] stopping: %s\n", why);
        fflush(stdout);
    }
}

int crpm_stop_poll(crpm_ctx *ctx, int every_call, int *stop, int *measure)
{
    crpm_stop *s = &ctx->stop;
    if (measure)
        *measure = 0;
    *stop = s->reason != 0;
    if (*stop || (++s->calls < s->every && !every_call))
        return CRPM_SUCCESS;
    double now = crpm_now(), v[V_N], r[V_N];
    v[V_SIGNAL] = signalled;
    v[V_HALT] = halt_requested(ctx);
    double wall = wall_now();
    for (int k = 0; k < END_N; k++)
        v[V_OVERDUE + k] = s->end[k] > 0 ? wall - s->end[k] : -1e308;
    v[V_GAP] = s->last_poll > 0 ? now - s->last_poll : 0;
    v[V_COST] = 0;
    for (int l = 1; l <= 4; l++)
        v[V_COST + l] = recent_cost(s, l);
    int mrc = MPI_Allreduce(v, r, V_N, MPI_DOUBLE, MPI_MAX, ctx->comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, "crpm_should_exit: MPI_Allreduce");
    s->last_poll = crpm_now();
    decide(ctx, r, measure);
    s->calls = 0;
    *stop = s->reason != 0;
    return CRPM_SUCCESS;
}

void crpm_stop_reason_text(const crpm_ctx *ctx, char *buf, size_t n)
{
    const crpm_stop *s = &ctx->stop;
    size_t k = 0;
    buf[0] = '\0';
    if (s->reason & CRPM_STOP_END_TIME) {
        char t[32];
        double left = s->end_time - wall_now();
        crpm_fmt_secs(t, sizeof t, fabs(left));
        k += (size_t)snprintf(buf + k, n - k, left >= 0 ? "the allocation ends in %s (%s)" :
                              "the allocation's end (%s) passed %s ago", left >= 0 ? t : end_names[s->end_src],
                              left >= 0 ? end_names[s->end_src] : t);
    }
    if ((s->reason & CRPM_STOP_SIGNAL) && k < n)
        k += (size_t)snprintf(buf + k, n - k, "%ssignal %s received", k ? "; " : "",
                              crpm_stop_signal_name(ctx->cfg.exit_signal));
    if ((s->reason & CRPM_STOP_HALT) && k < n)
        snprintf(buf + k, n - k, "%shalt requested (a %s file in the job directory)", k ? "; " : "",
                 CRPM_HALT_FILE);
}

int crpm_stop_mark(crpm_ctx *ctx)
{
    int rc = CRPM_SUCCESS;
    if (ctx->rank == 0) {
        char p[CRPM_PATH_MAX], why[256];
        crpm_stop_reason_text(ctx, why, sizeof why);
        rc = marker_path(ctx, CRPM_STOPPED_FILE, p, sizeof p);
        int fd = rc == 0 ? open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
        if (rc == 0 && (fd < 0 || dprintf(fd, "%s\n", why) < 0 || fsync(fd) != 0))
            rc = crpm_error(CRPM_ERR_IO, "crpm_finalize: cannot write %s: %s", p, strerror(errno));
        if (fd >= 0)
            close(fd);
        if (rc == 0)
            rc = crpm_sync_dir(ctx->job_dir);
    }
    return crpm_agree(ctx->comm, ctx->rank, rc, "crpm_finalize");
}

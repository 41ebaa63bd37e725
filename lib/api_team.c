/* Threads of a rank (docs/threads.md): the engine's workers, the guard that
 * turns concurrent use of the API into CRPM_ERR_STATE, and the team calls
 * (crpm_checkpoint_team, crpm_recover_team) in which every thread of a team
 * shares the checkpoint's data work.
 *
 * The guard.  The library has one context per process.  A call that changes
 * it for a long time or talks to other ranks (init, checkpoint, recover,
 * finalize, ...) is exclusive: while one thread is in it, another thread's
 * call of the API fails with CRPM_ERR_STATE instead of racing with it.  A
 * short local call (protect, set_name, status, ...) waits for another short
 * one to finish, so distinct ids may be protected from several threads at
 * once.  Calls the library makes of its own entry points on the same thread
 * (crpm_snapshot calls crpm_checkpoint) nest.
 *
 * Teams.  The leader is the thread that runs the checkpoint (MPI calls and
 * all): the first member to arrive when MPI provides MPI_THREAD_SERIALIZED
 * or more, else the thread that called crpm_init (MPI_THREAD_FUNNELED: only
 * it may call MPI).  The leader waits for every member (each says which call
 * and arguments it makes) and, holding the guard, agrees with the other
 * ranks' leaders before any other collective: a team whose members disagree,
 * or ranks in different team calls, fail with CRPM_ERR_STATE everywhere
 * instead of running collectives that do not match.  Then the other members
 * lend themselves to the engine's pool (util/pool.h) and take its tasks until
 * the leader is done; all return together with the leader's result. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "api_internal.h"
#include "agree.h"
#include "crpm.h"
#include "engine.h"
#include "error.h"
#include "pool.h"
#include "threads.h"

/* OpenMP's team, when the application runs one: the library does not link
 * an OpenMP runtime, it asks the one the program brought (weak: NULL when
 * there is none). */
extern int omp_in_parallel(void) __attribute__((weak));
extern int omp_get_num_threads(void) __attribute__((weak));

/* ---- the engine's workers ------------------------------------------------------- */

static int mpi_level = MPI_THREAD_SINGLE; /* provided, at crpm_init */
static pthread_t init_thread;

int crpm_threads_setup(crpm_ctx *ctx)
{
    const char *why = "";
    MPI_Query_thread(&mpi_level);
    init_thread = pthread_self();
    int rc = crpm_threads_for(ctx->comm, ctx->cfg.threads, &ctx->threads, &why);
    /* always a pool: with one worker it runs serially, and a team lends it threads */
    if (rc == 0)
        rc = crpm_pool_create(ctx->threads, &ctx->pool);
    if (rc == 0 && ctx->cfg.verbosity >= 2 && ctx->rank == 0)
        printf("[crpm] %d worker%s per rank for checkpoint and recovery (%s)\n", ctx->threads,
               ctx->threads == 1 ? "" : "s", why);
    return rc;
}

void crpm_threads_free(crpm_ctx *ctx)
{
    crpm_pool_free(ctx->pool);
    ctx->pool = NULL;
}

/* ---- the guard ---------------------------------------------------------------- */

static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t guard_cv = PTHREAD_COND_INITIALIZER;
static pthread_t owner;
static int depth, owner_excl;
static const char *owner_fn;

int crpm_api_enter(const char *fn, int exclusive)
{
    pthread_mutex_lock(&guard_mu);
    pthread_t self = pthread_self();
    if (depth && pthread_equal(owner, self)) { /* the library calling itself */
        depth++;
        pthread_mutex_unlock(&guard_mu);
        return CRPM_SUCCESS;
    }
    while (depth && !owner_excl) /* another thread's short call */
        pthread_cond_wait(&guard_cv, &guard_mu);
    if (depth) {
        const char *other = owner_fn;
        pthread_mutex_unlock(&guard_mu);
        return crpm_error(CRPM_ERR_STATE, "%s: another thread of this rank is in %s (one thread calls the "
                          "library's collective functions at a time; see crpm.h, threads)", fn, other);
    }
    owner = self;
    depth = 1;
    owner_excl = exclusive;
    owner_fn = fn;
    pthread_mutex_unlock(&guard_mu);
    return CRPM_SUCCESS;
}

void crpm_api_leave(void)
{
    pthread_mutex_lock(&guard_mu);
    if (depth > 0 && --depth == 0)
        pthread_cond_broadcast(&guard_cv);
    pthread_mutex_unlock(&guard_mu);
}

void crpm_api_leave_cb(int *entered)
{
    if (*entered == 0)
        crpm_api_leave();
}

/* ---- teams -------------------------------------------------------------------- */

/* Which team call: the rank's leaders compare it before any other collective. */
enum { TEAM_CHECKPOINT = 1, TEAM_RECOVER = 2 };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int declared;         /* crpm_team_begin(n) */
    int n;                /* members of the call in progress */
    const char *fn;       /* which team call it is (the first member's) */
    int kind, id, level;  /* and its arguments */
    int arrived, left, led, done, closing, mixed;
    int lent;             /* the leader holds the guard and lent the pool: serve it */
    int rc;
    char odd[160];        /* the first member that disagreed: its call */
    char msg[3 * 4096];   /* the leader's message, every member's */
} team = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

int crpm_team_begin(int nthreads)
{
    if (nthreads < 1 || nthreads > CRPM_THREADS_MAX)
        return crpm_api_report(crpm_error(CRPM_ERR_INVAL, "crpm_team_begin(%d): a team has 1 to %d threads",
                                          nthreads, CRPM_THREADS_MAX), "crpm_team_begin");
    pthread_mutex_lock(&team.mu);
    int busy = team.arrived > 0;
    if (!busy)
        team.declared = nthreads;
    pthread_mutex_unlock(&team.mu);
    return busy ? crpm_api_report(crpm_error(CRPM_ERR_STATE, "crpm_team_begin: a team call is in progress"),
                                  "crpm_team_begin")
                : CRPM_SUCCESS;
}

int crpm_team_end(void)
{
    pthread_mutex_lock(&team.mu);
    int busy = team.arrived > 0;
    if (!busy)
        team.declared = 0;
    pthread_mutex_unlock(&team.mu);
    return busy ? crpm_api_report(crpm_error(CRPM_ERR_STATE, "crpm_team_end: a team call is in progress"),
                                  "crpm_team_end")
                : CRPM_SUCCESS;
}

/* The size of the calling thread's team: declared, or OpenMP's, or 1. */
static int team_size(void)
{
    pthread_mutex_lock(&team.mu);
    int n = team.declared;
    pthread_mutex_unlock(&team.mu);
    if (n > 0)
        return n;
    if (omp_in_parallel && omp_get_num_threads && omp_in_parallel())
        return omp_get_num_threads();
    return 1;
}

static int can_lead(void)
{
    return mpi_level >= MPI_THREAD_SERIALIZED || pthread_equal(pthread_self(), init_thread);
}

typedef int (*team_body)(int id, int level);

static void describe(char *buf, size_t len, const char *fn, int kind, int id, int level, int n)
{
    if (kind == TEAM_CHECKPOINT)
        snprintf(buf, len, "%s(%d, %d) in a team of %d", fn, id, level, n);
    else
        snprintf(buf, len, "%s() in a team of %d", fn, n);
}

/* With team.mu held: this member is in; returns 1 when it leads, -1 when
 * it is the last and none could lead (the call failed for all). */
static int arrive(const char *fn, int kind, int id, int level, int n)
{
    while (team.closing) /* the last call's members are still leaving */
        pthread_cond_wait(&team.cv, &team.mu);
    if (team.arrived == 0) {
        team.n = n;
        team.fn = fn;
        team.kind = kind;
        team.id = id;
        team.level = level;
        team.led = team.done = team.mixed = team.lent = 0;
        team.rc = 0;
        team.odd[0] = '\0';
    } else if (team.n != n || team.fn != fn || team.id != id || team.level != level) {
        if (!team.mixed) /* threads of one team in different calls: an error for all, before any collective */
            describe(team.odd, sizeof team.odd, fn, kind, id, level, n);
        team.mixed = 1;
    }
    if (++team.arrived == team.n)
        pthread_cond_broadcast(&team.cv); /* the leader, and those waiting for the last member */
    int lead = !team.led && can_lead();
    team.led |= lead;
    if (team.arrived == team.n && !team.led && !team.done) {
        /* all are here and none may call MPI: fail together instead of waiting (the other ranks cannot be
         * told: no thread here may call MPI) */
        team.rc = crpm_error(CRPM_ERR_STATE, "%s: no thread of the team may call MPI (MPI provides %s; the thread "
                             "that called crpm_init must be in the team, or initialise MPI with "
                             "MPI_THREAD_SERIALIZED)", fn, mpi_level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
                                                                                           : "MPI_THREAD_SINGLE");
        snprintf(team.msg, sizeof team.msg, "%s", crpm_last_error());
        team.done = 1;
        pthread_cond_broadcast(&team.cv);
        return -1;
    }
    return lead;
}

/* Every rank's leader (or single caller) runs this before any other
 * collective of a team call: one rank whose team disagrees (rc, with its
 * message) or ranks in different team calls make it CRPM_ERR_STATE on every
 * rank instead of collectives that do not match. */
static int team_agree(crpm_ctx *ctx, const char *fn, int kind, int rc)
{
    /* the least and greatest call of any rank, the first rank whose team disagrees */
    int64_t v[3] = {kind, -kind, rc ? ctx->rank : INT64_MAX};
    int arc = crpm_agree_ext(ctx->comm, ctx->rank, 0, fn, v, 3);
    if (arc != 0) /* MPI failed */
        return arc;
    if (rc != 0)
        return rc;
    if (v[2] != INT64_MAX)
        return crpm_error(CRPM_ERR_STATE, "%s: the threads of the team on rank %lld disagree (different team calls, "
                          "arguments or team sizes; that rank's message says which): nothing was done", fn,
                          (long long)v[2]);
    if (v[0] != -v[1])
        return crpm_error(CRPM_ERR_STATE, "%s: the ranks made different team calls (crpm_checkpoint_team on some, "
                          "crpm_recover_team on others): nothing was done", fn);
    return CRPM_SUCCESS;
}

/* The leader: once every member is here, takes the guard (so that nobody
 * else is inside the library while the pool's width changes), checks that
 * the team agrees and the ranks too, lends the pool to the team, runs the
 * call, dismisses the team's threads. */
static void lead_call(crpm_ctx *ctx, const char *fn, int kind, team_body body, int id, int level, int n,
                      crpm_pool *pool)
{
    pthread_mutex_lock(&team.mu);
    while (team.arrived < team.n) /* the team agrees only once all have said what they call */
        pthread_cond_wait(&team.cv, &team.mu);
    int mixed = team.mixed;
    char mine[160], odd[sizeof team.odd];
    describe(mine, sizeof mine, team.fn, team.kind, team.id, team.level, team.n);
    snprintf(odd, sizeof odd, "%s", team.odd);
    pthread_mutex_unlock(&team.mu);
    /* a guard refused means another thread of this rank is in a collective call: this call does nothing and
     * talks to no rank (crpm.h, threads) */
    int rc = crpm_api_enter(fn, 1);
    if (rc == 0) {
        if (mixed)
            rc = crpm_error(CRPM_ERR_STATE, "%s: the threads of the team on rank %d disagree (one called %s, another "
                            "%s): nothing was done", fn, ctx->rank, mine, odd);
        rc = team_agree(ctx, fn, kind, rc);
        if (rc != 0)
            crpm_api_report(rc, fn);
        else {
            crpm_pool_guests(pool, n - 1);
            pthread_mutex_lock(&team.mu);
            team.lent = 1;
            pthread_cond_broadcast(&team.cv);
            pthread_mutex_unlock(&team.mu);
            rc = body(id, level);
            crpm_pool_dismiss(pool); /* every member that serves leaves; later ones do not start */
        }
        crpm_api_leave();
    }
    pthread_mutex_lock(&team.mu);
    team.rc = rc;
    snprintf(team.msg, sizeof team.msg, "%s", rc ? crpm_last_error() : "");
    team.done = 1;
    pthread_cond_broadcast(&team.cv);
    pthread_mutex_unlock(&team.mu);
}

static int team_call(const char *fn, int kind, team_body body, int id, int level)
{
    crpm_ctx *ctx = crpm_api_ctx();
    if (!ctx || !ctx->pool)
        return crpm_api_report(crpm_error(CRPM_ERR_STATE, "%s: call crpm_init first", fn), fn);
    int n = team_size();
    if (n <= 1) { /* the plain call, after the same check across ranks as a team's */
        int rc = crpm_api_enter(fn, 1);
        if (rc == 0) {
            rc = team_agree(ctx, fn, kind, 0);
            if (rc == 0)
                rc = body(id, level); /* reports its own errors */
            else
                crpm_api_report(rc, fn);
            crpm_api_leave();
        } else {
            crpm_api_report(rc, fn);
        }
        return rc;
    }
    crpm_pool *pool = ctx->pool;
    pthread_mutex_lock(&team.mu);
    int lead = arrive(fn, kind, id, level, n);
    pthread_mutex_unlock(&team.mu);
    if (lead > 0) {
        lead_call(ctx, fn, kind, body, id, level, n, pool);
    } else if (lead == 0) {
        pthread_mutex_lock(&team.mu);
        while (!team.lent && !team.done) /* until the leader lent the pool, or is done */
            pthread_cond_wait(&team.cv, &team.mu);
        int serve = !team.done;
        pthread_mutex_unlock(&team.mu);
        if (serve)
            crpm_pool_serve(pool); /* the leader's data passes, until dismissed */
    }
    pthread_mutex_lock(&team.mu);
    while (!(team.done && team.arrived == team.n)) /* all return together */
        pthread_cond_wait(&team.cv, &team.mu);
    team.closing = 1;
    int rc = team.rc;
    if (rc && lead <= 0)
        crpm_error(rc, "%s", team.msg);
    if (++team.left == team.n) {
        team.arrived = team.left = team.closing = 0;
        pthread_cond_broadcast(&team.cv);
    }
    pthread_mutex_unlock(&team.mu);
    return rc;
}

static int do_checkpoint(int id, int level) { return crpm_checkpoint(id, level); }
static int do_recover(int id, int level)
{
    (void)id;
    (void)level;
    return crpm_recover();
}

int crpm_checkpoint_team(int id, int level)
{
    return team_call("crpm_checkpoint_team", TEAM_CHECKPOINT, do_checkpoint, id, level);
}

int crpm_recover_team(void) { return team_call("crpm_recover_team", TEAM_RECOVER, do_recover, 0, 0); }

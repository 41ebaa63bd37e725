/* Worker pool (pool.h). */
#include "pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "error.h"

struct crpm_pool {
    pthread_mutex_t mu;
    pthread_cond_t wake;        /* a run opened, guests dismissed, or quit */
    pthread_cond_t idle;        /* the last helper left a run, or the last guest left serve */
    int nown, started;          /* own threads wanted, and running */
    pthread_t *tid;
    int quit;
    int guests;                 /* guests that serve the runs (0: the pool's own threads do) */
    int lent;                   /* a team lends its threads: guests serve until dismissed */
    int serving;                /* guests inside crpm_pool_serve */
    /* the run in progress */
    uint64_t gen;               /* counts runs */
    int open;                   /* helpers may still join it */
    int by_guests;              /* who may join it */
    int width;
    int inside;                 /* helpers in it */
    crpm_pool_fn fn;
    void *arg;
    uint64_t ntasks;
    _Atomic uint64_t next;
    int slots;                  /* worker indices handed out (0 is the caller's) */
};

static void work(crpm_pool *p, int worker)
{
    for (;;) {
        uint64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->ntasks)
            return;
        p->fn(p->arg, t, worker);
    }
}

/* With p->mu held: joins the open run when this kind of helper may. */
static void join_run(crpm_pool *p)
{
    if (p->slots >= p->width)
        return; /* more guests than the team said: they sit this run out */
    int w = p->slots++;
    p->inside++;
    pthread_mutex_unlock(&p->mu);
    work(p, w);
    pthread_mutex_lock(&p->mu);
    if (--p->inside == 0)
        pthread_cond_broadcast(&p->idle);
}

static void *own_thread(void *arg)
{
    crpm_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && !(p->open && !p->by_guests && p->gen != seen))
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        join_run(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int crpm_pool_create(int threads, crpm_pool **out)
{
    *out = NULL;
    crpm_pool *p = calloc(1, sizeof *p);
    if (!p || (threads > 1 && !(p->tid = calloc((size_t)threads - 1, sizeof *p->tid)))) {
        free(p);
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for a pool of %d threads", threads);
    }
    p->nown = threads > 1 ? threads - 1 : 0;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    *out = p;
    return CRPM_SUCCESS;
}

/* With p->mu held: starts the own threads not running yet (a thread that
 * cannot be made leaves the pool narrower, not broken). */
static void start_threads(crpm_pool *p)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (p->started < p->nown && pthread_create(&p->tid[p->started], NULL, own_thread, p) == 0)
        p->started++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    p->nown = p->started;
}

void crpm_pool_free(crpm_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->tid[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
    free(p->tid);
    free(p);
}

int crpm_pool_width(const crpm_pool *p)
{
    if (!p)
        return 1;
    return 1 + (p->lent ? p->guests : p->nown);
}

void crpm_pool_run(crpm_pool *p, uint64_t ntasks, crpm_pool_fn fn, void *arg)
{
    if (!p || ntasks <= 1 || crpm_pool_width(p) == 1) {
        for (uint64_t t = 0; t < ntasks; t++)
            fn(arg, t, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (!p->lent && p->started < p->nown)
        start_threads(p);
    p->fn = fn;
    p->arg = arg;
    p->ntasks = ntasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->by_guests = p->lent;
    p->width = crpm_pool_width(p);
    p->slots = 1;
    p->inside = 0;
    p->gen++;
    p->open = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    pthread_mutex_lock(&p->mu);
    p->open = 0; /* every task is taken: helpers that wake now stay out */
    while (p->inside > 0)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void crpm_pool_guests(crpm_pool *p, int n)
{
    pthread_mutex_lock(&p->mu);
    p->guests = n > 0 ? n : 0;
    p->lent = 1;
    pthread_mutex_unlock(&p->mu);
}

void crpm_pool_serve(crpm_pool *p)
{
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    if (!p->lent) { /* dismissed before this guest got here */
        pthread_mutex_unlock(&p->mu);
        return;
    }
    p->serving++;
    while (p->lent) {
        if (p->open && p->by_guests && p->gen != seen) {
            seen = p->gen;
            join_run(p);
        } else {
            pthread_cond_wait(&p->wake, &p->mu);
        }
    }
    if (--p->serving == 0)
        pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->mu);
}

void crpm_pool_dismiss(crpm_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->lent = 0;
    p->guests = 0;
    pthread_cond_broadcast(&p->wake);
    while (p->serving > 0)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

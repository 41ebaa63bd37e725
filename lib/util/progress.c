/* Progress of long work (progress.h). */
#include "progress.h"

#include <pthread.h>
#include <stdio.h>

#include "clock.h"

#define DEFAULT_EVERY_S 3.0

static int verbose;
static crpm_progress_cb cb;
static void *cb_user;
static double every = DEFAULT_EVERY_S;
static _Thread_local crpm_progress *cur;
/* finished phases per kind: a restart's phases run on the main thread, a
 * background drain's syncs on another, hence the lock */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double kind_bytes[CRPM_PG_KINDS], kind_secs[CRPM_PG_KINDS];

void crpm_progress_setup(int verbosity) { verbose = verbosity >= 2; }

void crpm_progress_set_cb(crpm_progress_cb fn, void *user, double every_s)
{
    cb = fn;
    cb_user = user;
    every = every_s >= 0 ? every_s : DEFAULT_EVERY_S;
}

static void fmt_bytes(char *buf, size_t n, double b)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

static void report(crpm_progress *p, double now, int last)
{
    double el = now - p->t0, rate = el > 0 ? (double)p->done / el : 0;
    double left = last ? 0 : rate > 0 && p->total >= p->done ? (double)(p->total - p->done) / rate : -1;
    if (cb)
        cb(p->what, p->done, p->total, rate, left, cb_user);
    if (!verbose || p->rank != 0 || (last && !p->printed) || (!last && el < DEFAULT_EVERY_S))
        return;
    char d[32], t[32], r[32];
    fmt_bytes(d, sizeof d, (double)p->done);
    fmt_bytes(t, sizeof t, (double)p->total);
    fmt_bytes(r, sizeof r, rate);
    if (last)
        printf("[crpm] %s: %s done in %.1f s (%s/s)\n", p->what, d, el, r);
    else if (left >= 0)
        printf("[crpm] %s: %s of %s (%.0f%%), %s/s, %.0f s left\n", p->what, d, t,
               p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, r, left);
    else
        printf("[crpm] %s: %s of %s, %s/s\n", p->what, d, t, r);
    fflush(stdout);
    p->printed = 1;
}

void crpm_progress_begin(crpm_progress *p, int kind, const char *what, uint64_t total, int rank)
{
    *p = (crpm_progress){.what = what, .kind = kind, .rank = rank, .total = total, .outer = cur};
    p->t0 = crpm_now();
    /* printed lines come every few seconds whatever the callback's period */
    p->next = p->t0 + (cb && every < DEFAULT_EVERY_S ? every : DEFAULT_EVERY_S);
    cur = p;
}

void crpm_progress_total(uint64_t more)
{
    if (cur)
        cur->total += more;
}

void crpm_progress_tick(uint64_t bytes)
{
    crpm_progress *p = cur;
    if (!p)
        return;
    p->done += bytes;
    if (!cb && !verbose)
        return;
    double now = crpm_now();
    if (now < p->next)
        return;
    report(p, now, 0);
    double step = cb && every < DEFAULT_EVERY_S ? every : DEFAULT_EVERY_S;
    p->next = now + step;
}

void crpm_progress_end(crpm_progress *p)
{
    double now = crpm_now();
    if (p->done < p->total)
        p->total = p->done; /* an upper bound that was not all needed, or a failure */
    report(p, now, 1);
    if (cur == p)
        cur = p->outer;
    if (p->kind >= 0 && p->kind < CRPM_PG_KINDS) {
        pthread_mutex_lock(&mu);
        kind_bytes[p->kind] += (double)p->done;
        kind_secs[p->kind] += now - p->t0;
        pthread_mutex_unlock(&mu);
    }
}

void crpm_progress_take(double bytes[CRPM_PG_KINDS], double secs[CRPM_PG_KINDS])
{
    pthread_mutex_lock(&mu);
    for (int k = 0; k < CRPM_PG_KINDS; k++) {
        bytes[k] = kind_bytes[k];
        secs[k] = kind_secs[k];
        kind_bytes[k] = kind_secs[k] = 0;
    }
    pthread_mutex_unlock(&mu);
}

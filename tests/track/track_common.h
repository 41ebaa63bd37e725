/* Helpers for the page-write tracker tests: a report collector and the
 * oracle that checks a scan against the pages the test wrote. */
#ifndef CRPM_TRACK_COMMON_H
#define CRPM_TRACK_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h" /* REQUIRE, rnd, rnd_below, CHECK_SKIP */
#include "engine.h"
#include "track.h"

static size_t PG;

/* ---- collector ------------------------------------------------------------ */
typedef struct span {
    size_t off, len;
} span;
typedef struct reports {
    span *v;
    size_t n, cap;
    int overflow;
} reports;

/* Preallocated so the callback never allocates (an allocation could land on
 * an edge page of a tracked heap array: harmless, but it blurs the counts). */
static void reports_init(reports *r, size_t cap)
{
    r->v = malloc(cap * sizeof *r->v);
    REQUIRE(r->v, "oom");
    r->n = 0;
    r->cap = cap;
    r->overflow = 0;
}
static void reports_free(reports *r) { free(r->v); }
static void collect(void *arg, size_t off, size_t len)
{
    reports *r = arg;
    if (r->n == r->cap) {
        r->overflow = 1;
        return;
    }
    r->v[r->n++] = (span){off, len};
}

/* ---- a tracked array under test ------------------------------------------- */
typedef struct tarr {
    const char *name;
    unsigned char *p;
    size_t len;
    uintptr_t first;          /* floor(p) */
    size_t npages;            /* pages covering [p, p+len) */
    unsigned char *written;   /* per page: written since last scan */
    unsigned char *shadow;    /* contents at the last scan */
    int huge;                 /* THP: any granularity */
    /* totals */
    size_t rounds, reported_pages, fp_interior, interior_pages_checked, ranges;
} tarr;

static void tarr_init(tarr *a, const char *name, void *p, size_t len, int huge)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    a->p = p;
    a->len = len;
    a->huge = huge;
    a->first = (uintptr_t)p & ~(uintptr_t)(PG - 1);
    a->npages = len ? (((uintptr_t)p + len + PG - 1) & ~(uintptr_t)(PG - 1)) / PG - a->first / PG : 0;
    a->written = calloc(a->npages + 1, 1);
    a->shadow = malloc(len + 1);
    REQUIRE(a->written && a->shadow, "oom");
    memcpy(a->shadow, p, len);
}
static void tarr_free(tarr *a)
{
    free(a->written);
    free(a->shadow);
}
static inline size_t page_of(const tarr *a, size_t off) { return ((uintptr_t)a->p + off) / PG - a->first / PG; }

/* The test's own writes: bytes [off, off+n) get random values. */
static void tarr_write(tarr *a, uint64_t *s, size_t off, size_t n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n; i++)
        a->p[off + i] = (unsigned char)rnd(s);
    for (size_t pg = page_of(a, off); pg <= page_of(a, off + n - 1); pg++)
        a->written[pg] = 1;
}
/* Pages written by someone else (kernel, child) on the test's behalf. */
static void tarr_mark(tarr *a, size_t off, size_t n)
{
    if (!n)
        return;
    for (size_t pg = page_of(a, off); pg <= page_of(a, off + n - 1); pg++)
        a->written[pg] = 1;
}

/* Scans a and checks the report: well formed (in range, increasing,
 * coalesced, page aligned but for the clipped ends), no written page and no
 * changed byte missing.  `all` = every page but the edges must be reported
 * (first scan after add: new pages are reported once).  Returns the number of reported interior pages that were not written. */
static size_t tarr_scan(crpm_tracker *t, tarr *a, int all)
{
    reports r;
    reports_init(&r, a->npages + 16);
    int rc = crpm_tracker_scan(t, a->p, a->len, collect, &r);
    REQUIRE(rc == 0, "%s: scan: %s", a->name, crpm_last_error());
    REQUIRE(!r.overflow, "%s: more ranges than pages", a->name);
    unsigned char *rep = calloc(a->npages + 1, 1);
    REQUIRE(rep, "oom");
    size_t prev_end = 0;
    for (size_t i = 0; i < r.n; i++) {
        size_t o = r.v[i].off, l = r.v[i].len;
        REQUIRE(l > 0 && o < a->len && l <= a->len - o, "%s: range %zu+%zu outside [0,%zu)", a->name, o, l, a->len);
        REQUIRE(i == 0 || o > prev_end, "%s: ranges not increasing/coalesced: %zu after end %zu", a->name, o, prev_end);
        REQUIRE(o == 0 || ((uintptr_t)a->p + o) % PG == 0, "%s: range start %zu not page aligned", a->name, o);
        REQUIRE(o + l == a->len || ((uintptr_t)a->p + o + l) % PG == 0, "%s: range end %zu not page aligned", a->name,
              o + l);
        prev_end = o + l;
        for (size_t pg = page_of(a, o); pg <= page_of(a, o + l - 1); pg++)
            rep[pg] = 1;
    }
    size_t fp = 0, nrep = 0;
    for (size_t pg = 0; pg < a->npages; pg++) {
        nrep += rep[pg];
        if (all && pg != 0 && pg != a->npages - 1) /* an edge page may be tracked already (a neighbour's) */
            REQUIRE(rep[pg], "%s: page %zu/%zu not reported by the first scan after add", a->name, pg, a->npages);
        REQUIRE(!a->written[pg] || rep[pg], "%s: FALSE NEGATIVE: page %zu/%zu written, not reported (round %zu)",
              a->name, pg, a->npages, a->rounds);
        if (!a->written[pg] && rep[pg] && pg != 0 && pg != a->npages - 1)
            fp++;
    }
    for (size_t pg = 0; pg < a->npages; pg++) { /* contents changed since the last scan */
        size_t lo = pg == 0 ? 0 : pg * PG - ((uintptr_t)a->p - a->first);
        size_t hi = pg == a->npages - 1 ? a->len : (pg + 1) * PG - ((uintptr_t)a->p - a->first);
        if (!rep[pg] && memcmp(a->p + lo, a->shadow + lo, hi - lo))
            REQUIRE(0, "%s: FALSE NEGATIVE: contents of page %zu changed, not reported", a->name, pg);
    }
    if (!all && a->npages > 2) {
        a->fp_interior += fp;
        a->interior_pages_checked += a->npages - 2;
    }
    a->reported_pages += nrep;
    a->ranges += r.n;
    a->rounds++;
    memset(a->written, 0, a->npages);
    for (size_t pg = 0; pg < a->npages; pg++) /* only reported pages can have changed */
        if (rep[pg]) {
            size_t lo = pg == 0 ? 0 : pg * PG - ((uintptr_t)a->p - a->first);
            size_t hi = pg == a->npages - 1 ? a->len : (pg + 1) * PG - ((uintptr_t)a->p - a->first);
            memcpy(a->shadow + lo, a->p + lo, hi - lo);
        }
    free(rep);
    reports_free(&r);
    return fp;
}

static crpm_tracker *open_or_skip(void)
{
    crpm_tracker *t = NULL;
    int rc = crpm_tracker_open(&t);
    if (rc == CRPM_ERR_NOTSUP) {
        printf("SKIP: %s\n", crpm_last_error());
        exit(CHECK_SKIP);
    }
    REQUIRE(rc == 0 && t, "tracker open: %d %s", rc, crpm_last_error());
    return t;
}
#endif

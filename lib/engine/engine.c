/* Engine entry points around the container format: open and close with the
 * engine's state (the optional page-write tracker, the regions' change
 * tracking). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine_int.h"

struct crpm_engine *crpm_engine_of(crpm_container *c)
{
    if (!c->eng && (c->eng = calloc(1, sizeof *c->eng)) != NULL)
        c->eng->generation = c->generation;
    return c->eng;
}

void crpm_engine_sync(crpm_container *c)
{
    crpm_engine *e = crpm_engine_of(c);
    if (e && e->generation != c->generation) {
        crpm_track_reset(c); /* reloaded (rollback, renumber): the copies are not what the engine knew */
        e->generation = c->generation;
    }
}

int crpm_engine_scratch(crpm_engine *e, int n)
{
    if (n <= e->nws)
        return CRPM_SUCCESS;
    crpm_wscratch *w = realloc(e->ws, (size_t)n * sizeof *w);
    if (!w)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for the scratch of %d workers", n);
    memset(w + e->nws, 0, (size_t)(n - e->nws) * sizeof *w);
    e->ws = w;
    e->nws = n;
    return CRPM_SUCCESS;
}

static void free_scratch(crpm_engine *e)
{
    for (int i = 0; i < e->nws; i++) {
        free(e->ws[i].buf);
        free(e->ws[i].chg);
        crpm_wlog_free(&e->ws[i].log);
    }
    free(e->ws);
    e->ws = NULL;
    e->nws = 0;
}

char *crpm_scratch_buf(crpm_wscratch *w, uint64_t len)
{
    if (len > w->buf_cap) {
        char *b = realloc(w->buf, len);
        if (!b) {
            crpm_error(CRPM_ERR_NOMEM, "out of memory for a %llu-byte segment buffer", (unsigned long long)len);
            return NULL;
        }
        w->buf = b;
        w->buf_cap = len;
    }
    return w->buf;
}

uint64_t *crpm_scratch_chg(crpm_wscratch *w, uint64_t nbits)
{
    uint64_t words = (nbits + 63) / 64;
    if (words > w->chg_words) {
        uint64_t *m = realloc(w->chg, words * 8);
        if (!m) {
            crpm_error(CRPM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        w->chg = m;
        w->chg_words = words;
    }
    memset(w->chg, 0, words * 8);
    return w->chg;
}

const char *crpm_region_read(const crpm_region *r, uint64_t off, uint64_t len, crpm_ck_stats *st, int *rc)
{
    char *b = crpm_scratch_buf(st->ws, len);
    if (!b) {
        *rc = CRPM_ERR_NOMEM;
        return NULL;
    }
    *rc = crpm_array_read(&r->prot, off, b, len);
    return *rc ? NULL : b;
}

void crpm_container_set_pool(crpm_container *c, struct crpm_pool *pool)
{
    crpm_engine *e = c ? crpm_engine_of(c) : NULL;
    if (e)
        e->pool = pool;
}

int crpm_container_open(const crpm_open_opts *o, crpm_container **out, int *created)
{
    int rc = crpm_format_open(o, out, created);
    if (rc != 0)
        return rc;
    crpm_container *c = *out;
    crpm_engine *e = crpm_engine_of(c);
    if (!e) {
        crpm_format_close(c);
        *out = NULL;
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    e->want_tracking = o->change_tracking;
    e->instr = o->change_tracking == CRPM_TRACK_INSTR || o->change_tracking == CRPM_TRACK_INSTR_VERIFY;
    e->verify = o->change_tracking == CRPM_TRACK_INSTR_VERIFY;
    if (o->change_tracking == CRPM_TRACK_PAGEMAP && crpm_tracker_open(&e->trk) != 0) {
        e->trk = NULL; /* compare everything: always exact */
        snprintf(e->track_msg, sizeof e->track_msg, "%s", crpm_last_error());
        crpm_error_clear();
    }
    return CRPM_SUCCESS;
}

int crpm_container_close(crpm_container *c)
{
    if (!c)
        return CRPM_SUCCESS;
    for (int i = 0; i < c->nregions; i++)
        crpm_track_drop(&c->regions[i]);
    if (c->eng && c->eng->trk)
        crpm_tracker_close(c->eng->trk);
    if (c->eng)
        free_scratch(c->eng);
    free(c->eng);
    c->eng = NULL;
    crpm_format_close(c);
    return CRPM_SUCCESS;
}

const char *crpm_container_tracking(const crpm_container *c)
{
    if (!c->eng)
        return NULL;
    if (c->eng->trk)
        return "pagemap";
    if (c->eng->instr)
        return c->eng->verify ? "instrumented-verify" : "instrumented";
    return c->eng->want_tracking ? c->eng->track_msg : NULL;
}

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

char *crpm_engine_buf(crpm_engine *e, uint64_t len)
{
    if (len > e->buf_cap) {
        char *b = realloc(e->buf, len);
        if (!b) {
            crpm_error(CRPM_ERR_NOMEM, "out of memory for a %llu-byte segment buffer", (unsigned long long)len);
            return NULL;
        }
        e->buf = b;
        e->buf_cap = len;
    }
    return e->buf;
}

uint64_t *crpm_engine_chg(crpm_engine *e, uint64_t nbits)
{
    uint64_t words = (nbits + 63) / 64;
    if (words > e->chg_words) {
        uint64_t *w = realloc(e->chg, words * 8);
        if (!w) {
            crpm_error(CRPM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        e->chg = w;
        e->chg_words = words;
    }
    memset(e->chg, 0, words * 8);
    return e->chg;
}

const char *crpm_region_read(crpm_container *c, const crpm_region *r, uint64_t off, uint64_t len, int *rc)
{
    crpm_engine *e = crpm_engine_of(c);
    char *b = e ? crpm_engine_buf(e, len) : NULL;
    if (!b) {
        *rc = e ? CRPM_ERR_NOMEM : crpm_error(CRPM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *rc = crpm_array_read(&r->prot, off, b, len);
    return *rc ? NULL : b;
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
    if (o->change_tracking && crpm_tracker_open(&e->trk) != 0) {
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
    if (c->eng) {
        free(c->eng->buf);
        free(c->eng->chg);
    }
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
    return c->eng->want_tracking ? c->eng->track_msg : NULL;
}

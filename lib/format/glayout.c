/* The global layout and its serialized form (layout.h). */
#include <stdlib.h>
#include <string.h>
#include "crc32c.h"
#include "error.h"
#include "glayout.h"

void crpm_glayout_free(crpm_glayout *l)
{
    free(l->ds);
    free(l->sub);
    free(l->repl);
    memset(l, 0, sizeof *l);
}

int crpm_glayout_empty(const crpm_glayout *l) { return l->nds == 0 && l->nsub == 0 && l->nrepl == 0; }

const crpm_gds *crpm_glayout_dataset(const crpm_glayout *l, int32_t gid)
{
    for (int i = 0; i < l->nds; i++)
        if (l->ds[i].gid == gid)
            return &l->ds[i];
    return NULL;
}

const crpm_subset *crpm_glayout_subset(const crpm_glayout *l, int32_t id)
{
    for (int i = 0; i < l->nsub; i++)
        if (l->sub[i].id == id)
            return &l->sub[i];
    return NULL;
}

int crpm_glayout_replicated(const crpm_glayout *l, int32_t id)
{
    for (int i = 0; i < l->nrepl; i++)
        if (l->repl[i] == id)
            return 1;
    return 0;
}

/* Room for one more record in a growing table. */
static int grow(void **v, int n, int *cap, size_t size)
{
    if (n < *cap)
        return CRPM_SUCCESS;
    int c = *cap ? 2 * *cap : 8;
    void *p = realloc(*v, (size_t)c * size);
    if (!p)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for the global layout");
    *v = p;
    *cap = c;
    return CRPM_SUCCESS;
}

int crpm_glayout_define(crpm_glayout *l, int32_t gid, int ndims, const int64_t *dims, int32_t type_code,
                       uint64_t elem_size, const char *name)
{
    if (ndims < 1 || ndims > CRPM_GLAYOUT_MAX_DIMS || !dims)
        return crpm_error(CRPM_ERR_INVAL, "global dataset %d: %d dimensions (1 to %d, with their sizes)", gid, ndims,
                          CRPM_GLAYOUT_MAX_DIMS);
    if (name && strlen(name) >= CRPM_GLAYOUT_NAME_MAX)
        return crpm_error(CRPM_ERR_INVAL, "global dataset %d: name longer than %d characters", gid,
                          CRPM_GLAYOUT_NAME_MAX - 1);
    if (name && (strchr(name, '/') || strcmp(name, ".") == 0 || strncmp(name, "rank_", 5) == 0 ||
                 strncmp(name, "crpm_", 5) == 0 || strncmp(name, "global_", 7) == 0))
        return crpm_error(CRPM_ERR_INVAL, "global dataset %d: name '%s' must not contain '/' nor start with "
                          "'rank_', 'crpm_' or 'global_' (names the level-4 file uses)", gid, name);
    for (int i = 0; name && *name && i < l->nds; i++)
        if (l->ds[i].gid != gid && strcmp(l->ds[i].name, name) == 0)
            return crpm_error(CRPM_ERR_INVAL, "global dataset %d: name '%s' is dataset %d's already", gid, name,
                              l->ds[i].gid);
    if (elem_size == 0)
        return crpm_error(CRPM_ERR_INVAL, "global dataset %d: element size 0", gid);
    uint64_t vol = elem_size;
    for (int k = 0; k < ndims; k++) {
        if (dims[k] < 0)
            return crpm_error(CRPM_ERR_INVAL, "global dataset %d: dimension %d is %lld", gid, k, (long long)dims[k]);
        if (dims[k] && vol > UINT64_MAX / 2 / (uint64_t)dims[k])
            return crpm_error(CRPM_ERR_RANGE, "global dataset %d: its size overflows", gid);
        vol *= dims[k] ? (uint64_t)dims[k] : 1;
    }
    crpm_gds *d = (crpm_gds *)crpm_glayout_dataset(l, gid);
    if (!d) {
        int rc = grow((void **)&l->ds, l->nds, &l->cap_ds, sizeof *l->ds);
        if (rc)
            return rc;
        d = &l->ds[l->nds++];
    }
    memset(d, 0, sizeof *d);
    d->gid = gid;
    d->ndims = ndims;
    d->type_code = type_code;
    d->elem_size = elem_size;
    for (int k = 0; k < ndims; k++)
        d->dims[k] = (uint64_t)dims[k];
    if (name)
        memcpy(d->name, name, strlen(name) + 1);
    return CRPM_SUCCESS;
}

static void drop_subset(crpm_glayout *l, int32_t id)
{
    for (int i = 0; i < l->nsub; i++)
        if (l->sub[i].id == id) {
            memmove(&l->sub[i], &l->sub[i + 1], (size_t)(l->nsub - i - 1) * sizeof *l->sub);
            l->nsub--;
            return;
        }
}

static void drop_replicated(crpm_glayout *l, int32_t id)
{
    for (int i = 0; i < l->nrepl; i++)
        if (l->repl[i] == id) {
            l->repl[i] = l->repl[--l->nrepl];
            return;
        }
}

int crpm_glayout_add_subset(crpm_glayout *l, int32_t gid, int32_t id, const int64_t *off, const int64_t *cnt)
{
    const crpm_gds *d = crpm_glayout_dataset(l, gid);
    if (!d)
        return crpm_error(CRPM_ERR_INVAL, "array %d: global dataset %d is not defined (crpm_define_global first)", id,
                          gid);
    if (!off || !cnt)
        return crpm_error(CRPM_ERR_INVAL, "array %d: subset of dataset %d needs an offset and a count", id, gid);
    for (int k = 0; k < d->ndims; k++)
        if (off[k] < 0 || cnt[k] < 0 || (uint64_t)off[k] > d->dims[k] || (uint64_t)cnt[k] > d->dims[k] - (uint64_t)off[k])
            return crpm_error(CRPM_ERR_RANGE, "array %d: dimension %d of its box (offset %lld, count %lld) lies outside "
                              "dataset %d (size %llu)", id, k, (long long)off[k], (long long)cnt[k], gid,
                              (unsigned long long)d->dims[k]);
    drop_subset(l, id);
    drop_replicated(l, id);
    int rc = grow((void **)&l->sub, l->nsub, &l->cap_sub, sizeof *l->sub);
    if (rc)
        return rc;
    crpm_subset *s = &l->sub[l->nsub++];
    memset(s, 0, sizeof *s);
    s->id = id;
    s->gid = gid;
    s->ndims = d->ndims;
    for (int k = 0; k < d->ndims; k++) {
        s->off[k] = (uint64_t)off[k];
        s->cnt[k] = (uint64_t)cnt[k];
    }
    return CRPM_SUCCESS;
}

int crpm_glayout_add_replicated(crpm_glayout *l, int32_t id)
{
    drop_subset(l, id);
    if (crpm_glayout_replicated(l, id))
        return CRPM_SUCCESS;
    int rc = grow((void **)&l->repl, l->nrepl, &l->cap_repl, sizeof *l->repl);
    if (rc)
        return rc;
    l->repl[l->nrepl++] = id;
    return CRPM_SUCCESS;
}

int crpm_gds_same(const crpm_gds *a, const crpm_gds *b)
{
    if (a->gid != b->gid || a->ndims != b->ndims || a->type_code != b->type_code || a->elem_size != b->elem_size)
        return 0;
    for (int k = 0; k < a->ndims; k++)
        if (a->dims[k] != b->dims[k])
            return 0;
    return 1;
}

/* ---- serialized form ------------------------------------------------------------ */
#define HDR 32u
static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

size_t crpm_glayout_serialize(const crpm_glayout *l, void *buf, size_t cap)
{
    size_t n = HDR;
    for (int i = 0; i < l->nds; i++)
        n += 24 + 8 * (size_t)l->ds[i].ndims + pad8(strlen(l->ds[i].name));
    for (int i = 0; i < l->nsub; i++)
        n += 16 + 16 * (size_t)l->sub[i].ndims;
    n += pad8(4 * (size_t)l->nrepl);
    if (!buf || cap < n)
        return n;
    unsigned char *p = buf;
    memset(p, 0, n);
    uint32_t h[6] = {CRPM_GLAYOUT_VERSION, (uint32_t)l->nds, (uint32_t)l->nsub, (uint32_t)l->nrepl, 0, 0};
    memcpy(p, CRPM_GLAYOUT_MAGIC, 8);
    memcpy(p + 8, h, sizeof h);
    size_t o = HDR;
    for (int i = 0; i < l->nds; i++) {
        const crpm_gds *d = &l->ds[i];
        int32_t w[4] = {d->gid, d->ndims, d->type_code, (int32_t)strlen(d->name)};
        memcpy(p + o, w, 16);
        memcpy(p + o + 16, &d->elem_size, 8);
        memcpy(p + o + 24, d->dims, 8 * (size_t)d->ndims);
        o += 24 + 8 * (size_t)d->ndims;
        memcpy(p + o, d->name, (size_t)w[3]);
        o += pad8((size_t)w[3]);
    }
    for (int i = 0; i < l->nsub; i++) {
        const crpm_subset *s = &l->sub[i];
        int32_t w[4] = {s->id, s->gid, s->ndims, 0};
        memcpy(p + o, w, 16);
        memcpy(p + o + 16, s->off, 8 * (size_t)s->ndims);
        memcpy(p + o + 16 + 8 * (size_t)s->ndims, s->cnt, 8 * (size_t)s->ndims);
        o += 16 + 16 * (size_t)s->ndims;
    }
    if (l->nrepl)
        memcpy(p + o, l->repl, 4 * (size_t)l->nrepl);
    uint32_t crc = crpm_crc32c(p, n, 0);
    memcpy(p + 24, &crc, 4);
    return n;
}

static int bad(const char *where, const char *why)
{
    return crpm_error(CRPM_ERR_CORRUPT, "%s: the saved global layout is damaged (%s)", where, why);
}

int crpm_glayout_parse(const void *buf, size_t len, crpm_glayout *out, const char *where)
{
    memset(out, 0, sizeof *out);
    const unsigned char *p = buf;
    uint32_t h[6];
    if (len < HDR || memcmp(p, CRPM_GLAYOUT_MAGIC, 8) != 0)
        return bad(where, "no layout header");
    memcpy(h, p + 8, sizeof h);
    if (h[0] != CRPM_GLAYOUT_VERSION)
        return crpm_error(CRPM_ERR_VERSION, "%s: global layout version %u, this library reads %u", where, h[0],
                          CRPM_GLAYOUT_VERSION);
    unsigned char *copy = malloc(len);
    if (!copy)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    memcpy(copy, p, len);
    memset(copy + 24, 0, 4);
    uint32_t crc = crpm_crc32c(copy, len, 0);
    free(copy);
    if (crc != h[4])
        return bad(where, "checksum mismatch");
    size_t o = HDR;
    int rc = CRPM_SUCCESS;
    for (uint32_t i = 0; rc == 0 && i < h[1]; i++) {
        int32_t w[4];
        uint64_t esz, dims[CRPM_GLAYOUT_MAX_DIMS];
        if (o + 24 > len)
            return crpm_glayout_free(out), bad(where, "truncated dataset");
        memcpy(w, p + o, 16);
        memcpy(&esz, p + o + 16, 8);
        if (w[1] < 1 || w[1] > CRPM_GLAYOUT_MAX_DIMS || w[3] < 0 || w[3] >= CRPM_GLAYOUT_NAME_MAX ||
            o + 24 + 8 * (size_t)w[1] + pad8((size_t)w[3]) > len)
            return crpm_glayout_free(out), bad(where, "bad dataset record");
        memcpy(dims, p + o + 24, 8 * (size_t)w[1]);
        o += 24 + 8 * (size_t)w[1];
        char name[CRPM_GLAYOUT_NAME_MAX];
        memcpy(name, p + o, (size_t)w[3]);
        name[w[3]] = '\0';
        o += pad8((size_t)w[3]);
        int64_t sd[CRPM_GLAYOUT_MAX_DIMS];
        for (int k = 0; k < w[1]; k++)
            sd[k] = dims[k] > (uint64_t)INT64_MAX ? -1 : (int64_t)dims[k];
        rc = crpm_glayout_define(out, w[0], w[1], sd, w[2], esz, name);
    }
    for (uint32_t i = 0; rc == 0 && i < h[2]; i++) {
        int32_t w[4];
        if (o + 16 > len)
            return crpm_glayout_free(out), bad(where, "truncated subset");
        memcpy(w, p + o, 16);
        if (w[2] < 1 || w[2] > CRPM_GLAYOUT_MAX_DIMS || o + 16 + 16 * (size_t)w[2] > len)
            return crpm_glayout_free(out), bad(where, "bad subset record");
        int64_t off[CRPM_GLAYOUT_MAX_DIMS], cnt[CRPM_GLAYOUT_MAX_DIMS];
        memcpy(off, p + o + 16, 8 * (size_t)w[2]);
        memcpy(cnt, p + o + 16 + 8 * (size_t)w[2], 8 * (size_t)w[2]);
        o += 16 + 16 * (size_t)w[2];
        const crpm_gds *d = crpm_glayout_dataset(out, w[1]);
        if (!d || d->ndims != w[2])
            return crpm_glayout_free(out), bad(where, "subset of an unknown dataset");
        rc = crpm_glayout_add_subset(out, w[1], w[0], off, cnt);
    }
    if (rc == 0 && o + 4 * (size_t)h[3] > len)
        return crpm_glayout_free(out), bad(where, "truncated replicated list");
    for (uint32_t i = 0; rc == 0 && i < h[3]; i++) {
        int32_t id;
        memcpy(&id, p + o + 4 * i, 4);
        rc = crpm_glayout_add_replicated(out, id);
    }
    if (rc != 0) {
        int code = rc == CRPM_ERR_NOMEM ? rc : CRPM_ERR_CORRUPT;
        crpm_glayout_free(out);
        return code == rc ? rc : bad(where, "inconsistent records");
    }
    return CRPM_SUCCESS;
}

/* ---- boxes -------------------------------------------------------------------------- */
uint64_t crpm_box_volume(int nd, const uint64_t *cnt)
{
    uint64_t v = 1;
    for (int k = 0; k < nd; k++)
        v *= cnt[k];
    return v;
}

uint64_t crpm_box_intersect(int nd, const uint64_t *oa, const uint64_t *ca, const uint64_t *ob, const uint64_t *cb,
                            uint64_t *oi, uint64_t *ci)
{
    uint64_t v = 1;
    for (int k = 0; k < nd; k++) {
        uint64_t lo = oa[k] > ob[k] ? oa[k] : ob[k];
        uint64_t ha = oa[k] + ca[k], hb = ob[k] + cb[k], hi = ha < hb ? ha : hb;
        if (hi <= lo)
            return 0;
        oi[k] = lo;
        ci[k] = hi - lo;
        v *= ci[k];
    }
    return v;
}

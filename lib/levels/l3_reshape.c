/* Level 3's units for a restart on another number of ranks (l3_reshape.h). */
#include <stdlib.h>
#include <string.h>
#include "engine.h"
#include "error.h"
#include "l3_internal.h"
#include "l3_reshape.h"

struct crpm_l3_source {
    crpm_container *c;
    int parity;
    uint64_t unit;
    image im;                  /* data: its image */
};

uint64_t crpm_l3_unit_size(uint64_t segment_size, uint64_t block_size)
{
    return l3_unit_for(segment_size, block_size);
}

static int source_new(crpm_container *c, uint64_t unit, int parity, crpm_l3_source **out)
{
    crpm_l3_source *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    s->c = c;
    s->parity = parity;
    s->unit = unit;
    int rc = parity ? CRPM_SUCCESS : l3_image_of(c, unit, &s->im);
    if (rc != 0) {
        free(s);
        return rc;
    }
    *out = s;
    return CRPM_SUCCESS;
}

int crpm_l3_source_data(crpm_container *c, uint64_t unit, crpm_l3_source **out)
{
    return source_new(c, unit, 0, out);
}

int crpm_l3_source_parity(crpm_container *pc, uint64_t unit, crpm_l3_source **out)
{
    return source_new(pc, unit, 1, out);
}

uint64_t crpm_l3_source_rows(const crpm_l3_source *s, int k)
{
    if (!s->parity)
        return (s->im.nunits + (uint64_t)k - 1) / (uint64_t)k;
    uint64_t rows = 0;
    for (int i = 0; i < s->c->nregions; i++) {
        const crpm_region *r = &s->c->regions[i];
        uint64_t n = r->saved ? (r->count * r->elem_size + s->unit - 1) / s->unit : 0;
        rows = n > rows ? n : rows;
    }
    return rows;
}

int crpm_l3_source_read(crpm_l3_source *s, int codeword, uint64_t u, unsigned char *dst)
{
    uint64_t len = 0;
    int rc = CRPM_SUCCESS;
    if (s->parity) {
        crpm_region *r = crpm_region_find(s->c, codeword);
        if (!r || !r->saved)
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: %s holds no parity of codeword %d", s->c->path, codeword);
        uint64_t bytes = r->count * r->elem_size, off = u * s->unit;
        len = off < bytes ? (bytes - off < s->unit ? bytes - off : s->unit) : 0;
        if (len)
            rc = crpm_copy_saved_range(s->c, r, off, len, dst); /* checks every chunk it touches */
    } else {
        uint32_t ph;
        uint64_t covered = 0;
        const char *p = l3_unit_bytes(s->c, &s->im, u, &len, &ph, &covered);
        len = p ? len : 0;
        if (p && ph != CRPM_NO_PHYS) {
            int64_t bad = crpm_crc_check(s->c, ph, (uint64_t)(p - crpm_seg_addr(s->c, ph)), len, covered);
            if (bad >= 0)
                rc = crpm_error(CRPM_ERR_CORRUPT, "level 3: %s fails its CRC32C check in physical segment %u at byte "
                                "%lld", s->c->path, ph, (long long)bad);
        }
        if (rc == 0 && len)
            memcpy(dst, p, len);
    }
    if (rc != 0)
        len = 0;
    memset(dst + len, 0, s->unit - len);
    return rc;
}

void crpm_l3_source_free(crpm_l3_source *s)
{
    if (!s)
        return;
    l3_image_free(&s->im);
    free(s);
}

/* The region table's records: n regions, where each starts (in units). */
static int image_table(const unsigned char *img, uint64_t unit, uint64_t n, uint64_t bound, crpm_array *regs,
                       uint64_t *units)
{
    uint64_t next = (META_REC * (1 + n) + unit - 1) / unit;
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *x = img + META_REC * (1 + i);
        crpm_array a;
        memset(&a, 0, sizeof a);
        memcpy(&a.id, x, 4);
        memcpy(&a.type_code, x + 4, 4);
        a.elem_size = l3_get64(x + 8);
        a.count = l3_get64(x + 16);
        if (!a.elem_size || a.count > bound * unit / a.elem_size)
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt image's region %llu is not valid",
                              (unsigned long long)i);
        uint64_t nu = (a.count * a.elem_size + unit - 1) / unit;
        if (nu > bound - next)
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt image is larger than its parity");
        if (regs) {
            a.ptr = (void *)(img + next * unit);
            regs[i] = a;
        }
        next += nu;
    }
    *units = next;
    return CRPM_SUCCESS;
}

int crpm_l3_image_units(const unsigned char *img, uint64_t have, uint64_t unit, uint64_t bound, uint64_t *units)
{
    *units = 0;
    if (!have)
        return CRPM_SUCCESS;
    if (memcmp(img, META_MAGIC, 8) != 0)
        return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt image has no valid header");
    uint64_t n = l3_get64(img + 8);
    if (n > bound * unit / META_REC)
        return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt image's region table is not valid");
    if (META_REC * (1 + n) > have * unit)
        return CRPM_SUCCESS; /* the table goes on in units not decoded yet */
    return image_table(img, unit, n, bound, NULL, units);
}

int crpm_l3_image_regions(unsigned char *img, uint64_t unit, crpm_array **regs, int *n, uint64_t *user_id)
{
    uint64_t nr = l3_get64(img + 8), units = 0;
    *regs = calloc(nr + 1, sizeof **regs);
    *n = 0;
    if (!*regs)
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    int rc = image_table(img, unit, nr, UINT64_MAX / unit, *regs, &units);
    if (rc != 0) {
        free(*regs);
        *regs = NULL;
        return rc;
    }
    *n = (int)nr;
    *user_id = l3_get64(img + 16);
    return CRPM_SUCCESS;
}

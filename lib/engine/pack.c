/* Packing small arrays (format.h, version 3): arrays of at most
 * crpm_pack_max bytes share segments (packs) instead of taking two segments
 * each.  A checkpoint plans the new epoch's layout (crpm_pack_plan), then
 * gathers each pack into a host buffer and writes it like any segment
 * (crpm_pack_write): the committed copy is never written, only the blocks
 * that differ go into the other copy.
 *
 * The plan keeps every array where it was while it fits there, so an
 * unchanged array changes no byte of its pack; new and grown arrays are
 * appended where there is room; a pack that is more than half empty is laid
 * out afresh (its arrays moved to the front), and an empty one is dropped. */
#include <stdlib.h>
#include <string.h>
#include "engine_int.h"

#define PACK_MAX_BYTES (64u << 10)

static uint64_t aligned(uint64_t b) { return (b + CRPM_PACK_ALIGN - 1) & ~(uint64_t)(CRPM_PACK_ALIGN - 1); }

uint64_t crpm_pack_max(const crpm_container *c)
{
    uint64_t m = c->sb.segment_size / 8;
    return !crpm_can_pack(c) ? 0 : m < PACK_MAX_BYTES ? m : PACK_MAX_BYTES;
}

static int is_packed(const crpm_region *r)
{
    return r->prot.elem_size && r->eng && r->eng->ops == &crpm_track_packed;
}

void crpm_packing_free(crpm_packing *pk)
{
    free(pk->first);
    free(pk->members);
    free(pk->origin);
    memset(pk, 0, sizeof *pk);
}

/* Room for the plan: the old packs first, then one new pack per packed
 * array at most. */
static int plan_alloc(crpm_container *c, crpm_seg_plan *lay, crpm_packing *pk, uint32_t npacked, uint64_t **end)
{
    size_t n = (size_t)c->nregions + 1, cap = (size_t)c->npacks + npacked + 1;
    lay->pack = malloc(n * sizeof *lay->pack);
    lay->pack_off = calloc(n, sizeof *lay->pack_off);
    lay->packs = calloc(cap, sizeof *lay->packs);
    pk->origin = malloc(cap * sizeof *pk->origin);
    *end = calloc(cap, sizeof **end);
    if (!lay->pack || !lay->pack_off || !lay->packs || !pk->origin || !*end)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for the pack layout");
    for (size_t i = 0; i < n; i++)
        lay->pack[i] = CRPM_NO_PACK;
    for (uint32_t k = 0; k < c->npacks; k++) {
        lay->packs[k].seg = c->packs[k].seg;
        pk->origin[k] = k;
    }
    lay->npacks = c->npacks;
    return CRPM_SUCCESS;
}

/* Pass 1: arrays that stay where they are; packs more than half empty are
 * then laid out afresh. */
static void plan_keep(crpm_container *c, crpm_seg_plan *lay, uint64_t *end)
{
    uint64_t *live = calloc((size_t)c->npacks + 1, sizeof *live);
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        uint64_t now = aligned(crpm_region_pbytes(r));
        if (!is_packed(r) || !r->saved || r->pack == CRPM_NO_PACK || now > aligned(r->count * r->elem_size))
            continue;
        lay->pack[i] = r->pack;
        lay->pack_off[i] = r->pack_off;
        if (r->pack_off + now > end[r->pack])
            end[r->pack] = r->pack_off + now;
        if (live)
            live[r->pack] += now;
    }
    for (uint32_t k = 0; live && k < c->npacks; k++) {
        if (2 * live[k] >= end[k])
            continue;
        end[k] = 0; /* its arrays, to the front in their order */
        for (int i = 0; i < c->nregions; i++)
            if (lay->pack[i] == k) {
                lay->pack_off[i] = end[k];
                end[k] += aligned(crpm_region_pbytes(&c->regions[i]));
            }
    }
    free(live);
}

/* Pass 2: the others, appended from a cursor where they fit (new packs at
 * the end); then the empty packs go. */
static int plan_place(crpm_container *c, crpm_seg_plan *lay, crpm_packing *pk, uint64_t *end)
{
    uint64_t seg = c->sb.segment_size;
    uint32_t cur = 0;
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        uint64_t b = aligned(crpm_region_pbytes(r));
        if (!is_packed(r) || lay->pack[i] != CRPM_NO_PACK)
            continue;
        while (cur < lay->npacks && end[cur] + b > seg)
            cur++;
        if (cur == lay->npacks) {
            lay->packs[cur].seg = (crpm_seg){{CRPM_NO_PHYS, CRPM_NO_PHYS}, 0};
            pk->origin[cur] = CRPM_NO_PACK;
            lay->npacks++;
        }
        lay->pack[i] = cur;
        lay->pack_off[i] = end[cur];
        end[cur] += b;
    }
    uint32_t m = 0, *map = malloc(((size_t)lay->npacks + 1) * sizeof *map); /* old index -> new */
    if (!map)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for the pack layout");
    for (uint32_t k = 0; k < lay->npacks; k++) {
        map[k] = end[k] ? m : CRPM_NO_PACK;
        if (!end[k])
            continue;
        lay->packs[m] = lay->packs[k];
        lay->packs[m].len = end[k];
        pk->origin[m++] = pk->origin[k];
    }
    for (int i = 0; i < c->nregions; i++)
        if (lay->pack[i] != CRPM_NO_PACK)
            lay->pack[i] = map[lay->pack[i]];
    lay->npacks = m;
    free(map);
    return CRPM_SUCCESS;
}

/* The arrays of each pack, grouped: members[first[k] .. first[k + 1]). */
static int plan_members(crpm_container *c, const crpm_seg_plan *lay, crpm_packing *pk)
{
    pk->first = calloc((size_t)lay->npacks + 2, sizeof *pk->first);
    pk->members = malloc(((size_t)c->nregions + 1) * sizeof *pk->members);
    if (!pk->first || !pk->members)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for the pack layout");
    for (int i = 0; i < c->nregions; i++)
        if (lay->pack[i] != CRPM_NO_PACK)
            pk->first[lay->pack[i] + 2]++;
    for (uint32_t k = 0; k < lay->npacks; k++)
        pk->first[k + 2] += pk->first[k + 1];
    for (int i = 0; i < c->nregions; i++)
        if (lay->pack[i] != CRPM_NO_PACK)
            pk->members[pk->first[lay->pack[i] + 1]++] = (uint32_t)i;
    return CRPM_SUCCESS;
}

int crpm_pack_plan(crpm_container *c, crpm_seg_plan *lay, crpm_packing *pk, uint64_t *fresh)
{
    uint32_t npacked = 0;
    for (int i = 0; i < c->nregions; i++)
        npacked += is_packed(&c->regions[i]);
    uint64_t *end = NULL;
    int rc = plan_alloc(c, lay, pk, npacked, &end);
    if (rc == 0) {
        plan_keep(c, lay, end);
        rc = plan_place(c, lay, pk, end);
    }
    if (rc == 0) {
        rc = plan_members(c, lay, pk);
    }
    for (uint32_t k = 0; rc == 0 && k < lay->npacks; k++)
        *fresh += pk->origin[k] == CRPM_NO_PACK;
    free(end);
    return rc;
}

int crpm_pack_gather(crpm_container *c, const crpm_seg_plan *lay, const crpm_packing *pk, uint32_t k, char *buf)
{
    memset(buf, 0, lay->packs[k].len);
    for (uint32_t j = pk->first[k]; j < pk->first[k + 1]; j++) {
        const crpm_region *r = &c->regions[pk->members[j]];
        int rc = crpm_array_read(&r->prot, 0, buf + lay->pack_off[pk->members[j]], crpm_region_pbytes(r));
        if (rc)
            return rc;
    }
    return CRPM_SUCCESS;
}

int crpm_pack_write_one(crpm_container *c, const crpm_seg_plan *lay, const crpm_packing *pk, uint32_t k,
                        crpm_ck_stats *st)
{
    char *buf = crpm_scratch_buf(st->ws, c->sb.segment_size);
    if (!buf)
        return CRPM_ERR_NOMEM;
    int rc = crpm_pack_gather(c, lay, pk, k, buf);
    if (rc)
        return rc;
    uint64_t len = lay->packs[k].len;
    uint32_t o = pk->origin[k];
    int resized = o == CRPM_NO_PACK || c->packs[o].len != len; /* its CRC table describes another length */
    return crpm_seg_compare(c, &lay->packs[k].seg, buf, len, resized, st);
}

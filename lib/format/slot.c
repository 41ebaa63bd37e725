/* Metadata slots: the description of one epoch (regions and their
 * segments), written into slot e % 2 and loaded and checked on open. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include "container.h"
#include "persist_file.h"

/* ---- metadata slots ------------------------------------------------------ */

/* The slot's size is fixed when the container is created: say which part of
 * the metadata outgrew it, and what helps. */
static int slot_full(const crpm_container *c, uint32_t narrays, uint64_t rec, uint64_t body)
{
    uint64_t per_array = rec + sizeof(struct crpm_slot_seg);
    uint64_t array_part = (uint64_t)narrays * rec;
    uint64_t room = c->sb.slot_size - sizeof(struct crpm_slot_hdr);
    if (array_part * 2 >= body)
        return crpm_error(CRPM_ERR_RANGE,
                          "%s: too many protected arrays: the metadata of %u arrays needs %llu bytes, the "
                          "container's metadata slot holds %llu (room for about %llu arrays, fixed when the "
                          "container was created; segment_size does not change it): protect fewer, larger "
                          "arrays (e.g. one array of structures instead of many small ones)",
                          c->path, narrays, (unsigned long long)body, (unsigned long long)room,
                          (unsigned long long)(room / per_array));
    return crpm_error(CRPM_ERR_RANGE,
                      "%s: too much protected data for the metadata slot: the segment table of %u arrays needs "
                      "%llu bytes, the slot holds %llu (fixed when the container was created): use a larger "
                      "segment_size for a new checkpoint directory",
                      c->path, narrays, (unsigned long long)body, (unsigned long long)room);
}

/* Bytes of the regions' records in a slot (what the region table takes). */
static size_t region_rec(const crpm_container *c)
{
    return crpm_can_pack(c) ? sizeof(struct crpm_slot_region) : sizeof(struct crpm_slot_region_v2);
}

static uint32_t pack_of(const crpm_seg_plan *lay, int i) { return lay->pack ? lay->pack[i] : CRPM_NO_PACK; }

/* The slot body of a layout: into p (NULL: only its size). */
static uint64_t slot_body(const crpm_container *c, const crpm_region *regs, int nregs, const crpm_seg_plan *lay,
                          char *p, uint32_t *nsaved)
{
    uint64_t body = 0, seg = c->sb.segment_size;
    size_t rec = region_rec(c);
    *nsaved = 0;
    if (crpm_can_pack(c)) {
        struct crpm_slot_packs h = {lay->npacks, c->levels | c->levels_add};
        if (p)
            memcpy(p, &h, sizeof h);
        body += sizeof h;
        for (uint32_t k = 0; k < lay->npacks; k++, body += sizeof(struct crpm_slot_pack)) {
            const crpm_pack *q = &lay->packs[k];
            struct crpm_slot_pack sp = {{q->seg.phys[0], q->seg.phys[1]}, q->seg.state, (uint32_t)q->len};
            if (p)
                memcpy(p + body, &sp, sizeof sp);
        }
    }
    for (int i = 0; i < nregs; i++) {
        const crpm_array *a = &regs[i].prot;
        if (!a->elem_size)
            continue; /* not protected: not part of this epoch */
        (*nsaved)++;
        uint32_t pk = pack_of(lay, i);
        uint64_t ns = pk == CRPM_NO_PACK ? crpm_nsegs_for(crpm_array_bytes(a), seg) : 0;
        if (p && rec == sizeof(struct crpm_slot_region)) {
            struct crpm_slot_region r = {regs[i].id, a->type_code, a->elem_size, a->count, ns, pk, 0,
                                         pk == CRPM_NO_PACK ? 0 : lay->pack_off[i]};
            memcpy(p + body, &r, sizeof r);
        } else if (p) {
            struct crpm_slot_region_v2 r = {regs[i].id, a->type_code, a->elem_size, a->count, ns};
            memcpy(p + body, &r, sizeof r);
        }
        body += rec;
        for (uint64_t k = 0; k < ns; k++, body += sizeof(struct crpm_slot_seg)) {
            const crpm_seg *g = &lay->segs[i][k];
            struct crpm_slot_seg sg = {{g->phys[0], g->phys[1]}, g->state};
            if (p)
                memcpy(p + body, &sg, sizeof sg);
        }
    }
    return body;
}

int crpm_write_slot(crpm_container *c, uint64_t epoch, uint64_t user_id, uint64_t nphys,
                    const crpm_region *regs, int nregs, const crpm_seg_plan *lay)
{
    if (lay->npacks && !crpm_can_pack(c))
        return crpm_error(CRPM_ERR_STATE, "%s: a version-%u container has no packs", c->path, c->sb.version);
    uint32_t nsaved;
    uint64_t body = slot_body(c, regs, nregs, lay, NULL, &nsaved);
    if (sizeof(struct crpm_slot_hdr) + body > c->sb.slot_size)
        return slot_full(c, nsaved, region_rec(c), body);
    size_t total = sizeof(struct crpm_slot_hdr) + body;
    /* slots are sparse: storage for what this one needs, or an error, not SIGBUS */
    int rc = c->media.ops->reserve(&c->media, c->sb.slot_offset[epoch % 2], total);
    if (rc)
        return rc;
    char *buf = malloc(total);
    if (!buf)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for metadata");
    struct crpm_slot_hdr *h = (struct crpm_slot_hdr *)buf;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CRPM_SLOT_MAGIC, 8);
    h->nonce = c->sb.nonce;
    h->epoch = epoch;
    h->user_id = user_id;
    h->timestamp_ns = crpm_fmt_now_ns();
    h->nphys = nphys;
    h->body_size = body;
    h->nregions = nsaved;
    slot_body(c, regs, nregs, lay, buf + sizeof *h, &nsaved);
    h->crc = crpm_meta_crc(buf, total, 0);
    crpm_persist_copy(&c->media, c->media.base + c->sb.slot_offset[epoch % 2], buf, total);
    free(buf);
    return CRPM_SUCCESS;
}

void crpm_seg_plan_free(crpm_seg_plan *l, int nregs)
{
    for (int i = 0; l->segs && i < nregs; i++)
        free(l->segs[i]);
    free(l->segs);
    free(l->pack);
    free(l->pack_off);
    free(l->packs);
    memset(l, 0, sizeof *l);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sorted, not pairwise: a slot may describe 100,000 arrays. */
static int has_duplicate_id(const crpm_region *regs, uint32_t n)
{
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids)
        return 1;
    for (uint32_t i = 0; i < n; i++)
        ids[i] = regs[i].id;
    qsort(ids, n, sizeof *ids, cmp_i32);
    int dup = 0;
    for (uint32_t i = 1; i < n && !dup; i++)
        dup = ids[i] == ids[i - 1];
    free(ids);
    return dup;
}

/* A segment entry that names copies outside the pool or one copy twice. */
static int bad_seg(uint32_t p0, uint32_t p1, uint32_t state, uint64_t nphys)
{
    uint32_t ph[2] = {p0, p1};
    return state > 2 || (state && ph[state - 1] >= nphys) || (p0 != CRPM_NO_PHYS && p0 >= nphys) ||
           (p1 != CRPM_NO_PHYS && p1 >= nphys) || (p0 != CRPM_NO_PHYS && p0 == p1);
}

/* Version 3: the pack table at the start of the body.  0, -1 (inconsistent)
 * or CRPM_ERR_NOMEM. */
static int parse_packs(const crpm_container *c, const char **p, const char *end, uint64_t nphys,
                       crpm_pack **out, uint32_t *n)
{
    struct crpm_slot_packs h;
    if ((size_t)(end - *p) < sizeof h)
        return -1;
    memcpy(&h, *p, sizeof h);
    *p += sizeof h;
    if (h.npacks > (uint64_t)(end - *p) / sizeof(struct crpm_slot_pack))
        return -1;
    *out = calloc(h.npacks ? h.npacks : 1, sizeof **out);
    if (!*out)
        return CRPM_ERR_NOMEM;
    *n = h.npacks;
    for (uint32_t k = 0; k < h.npacks; k++) {
        struct crpm_slot_pack sp;
        memcpy(&sp, *p, sizeof sp);
        *p += sizeof sp;
        if (bad_seg(sp.phys[0], sp.phys[1], sp.state, nphys) || !sp.state || !sp.len ||
            sp.len > c->sb.segment_size)
            return -1;
        (*out)[k] = (crpm_pack){{{sp.phys[0], sp.phys[1]}, sp.state}, sp.len};
    }
    return 0;
}

/* One region record and its segments into r.  0, -1 or CRPM_ERR_NOMEM. */
static int parse_region(const crpm_container *c, const char **p, const char *end, uint64_t nphys,
                        const crpm_pack *packs, uint32_t npacks, crpm_region *r)
{
    struct crpm_slot_region x = {0};
    if (crpm_can_pack(c)) {
        if ((size_t)(end - *p) < sizeof x)
            return -1;
        memcpy(&x, *p, sizeof x);
        *p += sizeof x;
    } else {
        struct crpm_slot_region_v2 v;
        if ((size_t)(end - *p) < sizeof v)
            return -1;
        memcpy(&v, *p, sizeof v);
        *p += sizeof v;
        x = (struct crpm_slot_region){v.id, v.type_code, v.elem_size, v.count, v.nsegs, CRPM_NO_PACK, 0, 0};
    }
    if (x.elem_size == 0 || x.count > UINT64_MAX / x.elem_size)
        return -1;
    uint64_t bytes = x.count * x.elem_size;
    if (x.pack == CRPM_NO_PACK ? x.pack_off || x.nsegs != crpm_nsegs_for(bytes, c->sb.segment_size)
                               : x.pack >= npacks || x.nsegs || !bytes || x.pack_off % CRPM_PACK_ALIGN ||
                                     x.pack_off > packs[x.pack].len || bytes > packs[x.pack].len - x.pack_off)
        return -1;
    if (x.nsegs > (uint64_t)(end - *p) / sizeof(struct crpm_slot_seg))
        return -1;
    *r = (crpm_region){.saved = 1, .id = x.id, .type_code = x.type_code, .elem_size = x.elem_size,
                       .count = x.count, .nsegs = x.nsegs, .pack = x.pack, .pack_off = x.pack_off};
    r->prot.id = x.id;
    r->segs = calloc(x.nsegs ? x.nsegs : 1, sizeof(crpm_seg));
    if (!r->segs)
        return CRPM_ERR_NOMEM;
    for (uint64_t k = 0; k < x.nsegs; k++) {
        struct crpm_slot_seg sg;
        memcpy(&sg, *p, sizeof sg);
        *p += sizeof sg;
        if (bad_seg(sg.phys[0], sg.phys[1], sg.state, nphys))
            return -1;
        r->segs[k] = (crpm_seg){{sg.phys[0], sg.phys[1]}, sg.state};
    }
    return 0;
}

typedef struct packed_at {
    uint32_t pack;
    uint64_t off, end;
} packed_at;

static int cmp_packed(const void *a, const void *b)
{
    const packed_at *x = a, *y = b;
    if (x->pack != y->pack)
        return x->pack < y->pack ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

/* Two packed regions share bytes (or no memory to tell). */
static int packed_overlap(const crpm_region *regs, uint32_t n)
{
    packed_at *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return 1;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (regs[i].pack != CRPM_NO_PACK)
            v[m++] = (packed_at){regs[i].pack, regs[i].pack_off, regs[i].pack_off + regs[i].count * regs[i].elem_size};
    qsort(v, m, sizeof *v, cmp_packed);
    int bad = 0;
    for (uint32_t i = 1; i < m && !bad; i++)
        bad = v[i].pack == v[i - 1].pack && v[i].off < v[i - 1].end;
    free(v);
    return bad;
}

/* Parses slot `epoch % 2` into *out (allocated).  Returns CRPM_ERR_CORRUPT
 * with a message when the slot is not a valid description of `epoch`. */
int crpm_parse_slot(crpm_container *c, uint64_t epoch, crpm_region **out, int *nout, crpm_pack **packs_out,
                    uint32_t *npacks_out, uint64_t *user_id, uint64_t *nphys)
{
    const char *base = c->media.base + c->sb.slot_offset[epoch % 2];
    struct crpm_slot_hdr h;
    memcpy(&h, base, sizeof h);
    if (memcmp(h.magic, CRPM_SLOT_MAGIC, 8) != 0 || h.nonce != c->sb.nonce)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: metadata slot %llu has no valid header", c->path,
                          (unsigned long long)(epoch % 2));
    if (h.epoch != epoch)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: metadata slot %llu holds epoch %llu, expected %llu", c->path,
                          (unsigned long long)(epoch % 2), (unsigned long long)h.epoch,
                          (unsigned long long)epoch);
    if (h.body_size > c->sb.slot_size - sizeof h)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: metadata slot %llu has an impossible size", c->path,
                          (unsigned long long)(epoch % 2));
    struct crpm_slot_hdr hz = h;
    hz.crc = 0;
    uint32_t sum = crpm_meta_crc(&hz, sizeof hz, 0);
    sum = crpm_meta_crc(base + sizeof h, h.body_size, sum);
    if (sum != h.crc)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: checksum mismatch in metadata of epoch %llu", c->path,
                          (unsigned long long)epoch);
    crpm_region *regs = calloc(h.nregions ? h.nregions : 1, sizeof *regs);
    crpm_pack *packs = NULL;
    uint32_t npacks = 0, i = 0;
    const char *p = base + sizeof h, *end = p + h.body_size;
    int rc = regs ? CRPM_SUCCESS : CRPM_ERR_NOMEM;
    if (rc == 0 && crpm_can_pack(c))
        rc = parse_packs(c, &p, end, h.nphys, &packs, &npacks);
    for (; rc == 0 && i < h.nregions; i++)
        rc = parse_region(c, &p, end, h.nphys, packs, npacks, &regs[i]);
    if (rc == 0 && (p != end || has_duplicate_id(regs, h.nregions) || packed_overlap(regs, h.nregions)))
        rc = -1;
    if (rc) {
        for (uint32_t j = 0; regs && j < i + 1 && j < h.nregions; j++)
            free(regs[j].segs);
        free(regs);
        free(packs);
        if (rc == CRPM_ERR_NOMEM)
            return crpm_error(rc, "out of memory");
        return crpm_error(CRPM_ERR_CORRUPT, "%s: inconsistent region table in metadata of epoch %llu", c->path,
                          (unsigned long long)epoch);
    }
    *out = regs;
    *nout = (int)h.nregions;
    if (packs_out) {
        *packs_out = packs;
        *npacks_out = npacks;
    } else {
        free(packs);
    }
    *user_id = h.user_id;
    *nphys = h.nphys;
    return CRPM_SUCCESS;
}

const crpm_seg *crpm_region_segs(const crpm_container *c, const crpm_region *r, uint64_t *n, uint64_t *base)
{
    if (r->pack != CRPM_NO_PACK) {
        *n = 1;
        *base = r->pack_off;
        return &c->packs[r->pack].seg;
    }
    *n = r->nsegs;
    *base = 0;
    return r->segs;
}

void crpm_mark_used(crpm_container *c)
{
    if (c->used_cap)
        memset(c->used, 0, c->used_cap);
    for (uint32_t k = 0; k < c->npacks; k++)
        for (int j = 0; j < 2; j++)
            if (c->packs[k].seg.phys[j] != CRPM_NO_PHYS)
                c->used[c->packs[k].seg.phys[j]] = 1;
    for (int i = 0; i < c->nregions; i++)
        for (uint64_t k = 0; c->regions[i].saved && k < c->regions[i].nsegs; k++)
            for (int j = 0; j < 2; j++)
                if (c->regions[i].segs[k].phys[j] != CRPM_NO_PHYS)
                    c->used[c->regions[i].segs[k].phys[j]] = 1;
}

static int ensure_used_cap(crpm_container *c, uint64_t n)
{
    if (n <= c->used_cap)
        return CRPM_SUCCESS;
    uint8_t *u = realloc(c->used, n);
    if (u)
        c->used = u;
    uint32_t *r = realloc(c->reserved, n * sizeof *r);
    if (r)
        c->reserved = r;
    uint32_t *l = realloc(c->crc_len, n * sizeof *l);
    if (l)
        c->crc_len = l;
    if (!u || !r || !l)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    memset(u + c->used_cap, 0, n - c->used_cap);
    memset(r + c->used_cap, 0, (n - c->used_cap) * sizeof *r);
    memset(l + c->used_cap, 0, (n - c->used_cap) * sizeof *l);
    c->used_cap = n;
    return CRPM_SUCCESS;
}

int crpm_reserve_seg(crpm_container *c, uint32_t phys, uint64_t len)
{
    if (c->reserved[phys] >= len)
        return CRPM_SUCCESS;
    uint64_t off = c->sb.data_offset + (uint64_t)phys * c->sb.seg_stride;
    int rc = CRPM_SUCCESS;
    if (c->reserved[phys] == 0 && c->sb.seg_stride > c->sb.segment_size) /* the CRC table, once */
        rc = c->media.ops->reserve(&c->media, off + c->sb.segment_size, c->sb.seg_stride - c->sb.segment_size);
    if (rc == 0)
        rc = c->media.ops->reserve(&c->media, off, len);
    if (rc == 0)
        c->reserved[phys] = (uint32_t)len;
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Index of the region with `id` in byid (id << 32 | index, sorted), or -1. */
static int find_sorted(const int64_t *byid, int n, int32_t id)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if ((int32_t)(byid[mid] >> 32) < id) lo = mid + 1; else hi = mid;
    }
    return lo < n && (int32_t)(byid[lo] >> 32) == id ? (int)(byid[lo] & 0xffffffff) : -1;
}

/* Makes `epoch` (0 = empty) the in-memory state, keeping current protections. */
int crpm_load_slot(crpm_container *c, uint64_t epoch)
{
    crpm_region *regs = NULL;
    crpm_pack *packs = NULL;
    uint32_t npacks = 0;
    int n = 0;
    uint64_t user_id = 0, nphys = c->nphys;
    if (epoch > 0) {
        int rc = crpm_parse_slot(c, epoch, &regs, &n, &packs, &npacks, &user_id, &nphys);
        if (rc)
            return rc;
        uint64_t need = c->sb.data_offset + nphys * c->sb.seg_stride;
        if (need > c->media.size) {
            for (int i = 0; i < n; i++) free(regs[i].segs);
            free(regs);
            free(packs);
            return crpm_error(CRPM_ERR_TRUNCATED, "%s: file has %zu bytes, epoch %llu needs %llu", c->path,
                              c->media.size, (unsigned long long)epoch, (unsigned long long)need);
        }
    }
    /* keep protections: carry them over by id */
    int cap = n + c->nregions + 1;
    crpm_region *merged = realloc(regs, (size_t)cap * sizeof *merged);
    if (!merged) {
        for (int i = 0; i < n; i++) free(regs[i].segs);
        free(regs);
        free(packs);
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    int m = n;
    /* saved ids sorted with their index: the merge is O(n log n), not O(n^2) */
    int64_t *byid = malloc((size_t)(n ? n : 1) * sizeof *byid);
    if (!byid) {
        for (int i = 0; i < n; i++) free(merged[i].segs);
        free(merged);
        free(packs);
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++)
        byid[i] = (int64_t)merged[i].id * ((int64_t)1 << 32) + i;
    qsort(byid, (size_t)n, sizeof *byid, cmp_i64);
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *old = &c->regions[i];
        if (!old->prot.elem_size)
            continue; /* not protected */
        int j = find_sorted(byid, n, old->id);
        if (j < 0)
            j = m;
        if (j == m) {
            memset(&merged[m], 0, sizeof merged[m]);
            merged[m].id = old->id;
            merged[m].pack = CRPM_NO_PACK;
            m++;
        }
        merged[j].prot = old->prot;
        merged[j].eng = old->eng; /* void now: see generation */
        old->eng = NULL;
    }
    free(byid);
    crpm_free_regions(c);
    c->regions = merged;
    c->nregions = m;
    c->cap_regions = cap;
    free(c->packs);
    c->packs = packs;
    c->npacks = npacks;
    c->user_id = user_id;
    c->nphys = nphys;
    c->levels = 0;
    if (epoch > 0 && crpm_can_pack(c)) { /* the slot checked out above */
        struct crpm_slot_packs h;
        memcpy(&h, c->media.base + c->sb.slot_offset[epoch % 2] + sizeof(struct crpm_slot_hdr), sizeof h);
        c->levels = h.reserved;
    }
    c->generation++;
    int rc = ensure_used_cap(c, nphys);
    if (rc)
        return rc;
    crpm_mark_used(c);
    /* a physical segment referenced twice would let one epoch overwrite another */
    uint64_t refs = 0, marked = 0;
    for (uint32_t k = 0; k < c->npacks; k++)
        refs += (c->packs[k].seg.phys[0] != CRPM_NO_PHYS) + (c->packs[k].seg.phys[1] != CRPM_NO_PHYS);
    for (int i = 0; i < c->nregions; i++)
        for (uint64_t k = 0; c->regions[i].saved && k < c->regions[i].nsegs; k++)
            refs += (c->regions[i].segs[k].phys[0] != CRPM_NO_PHYS) + (c->regions[i].segs[k].phys[1] != CRPM_NO_PHYS);
    for (uint64_t k = 0; k < nphys; k++)
        marked += c->used[k];
    if (refs != marked)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: metadata of epoch %llu shares a segment between two copies",
                          c->path, (unsigned long long)epoch);
    crpm_crc_trust_committed(c);
    return CRPM_SUCCESS;
}

int crpm_grow_pool(crpm_container *c, uint64_t min_nphys)
{
    if (min_nphys <= c->nphys && c->sb.data_offset + min_nphys * c->sb.seg_stride <= c->media.size)
        return ensure_used_cap(c, c->nphys);
    uint64_t n = c->nphys + c->nphys / 2;
    if (n < min_nphys) n = min_nphys;
    if (n < c->nphys + 4) n = c->nphys + 4;
    if (n >= CRPM_NO_PHYS)
        return crpm_error(CRPM_ERR_RANGE, "%s: too many segments", c->path);
    uint64_t bytes = c->sb.data_offset + n * c->sb.seg_stride;
    if (bytes > c->media.size) {
        if (c->before_remap)
            c->before_remap(c->remap_arg);
        int rc = c->media.ops->resize(&c->media, bytes);
        if (rc)
            return rc;
    }
    c->nphys = (c->media.size - c->sb.data_offset) / c->sb.seg_stride;
    return ensure_used_cap(c, c->nphys);
}


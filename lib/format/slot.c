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
static int slot_full(const crpm_container *c, uint32_t narrays, uint64_t body)
{
    uint64_t per_array = sizeof(struct crpm_slot_region) + sizeof(struct crpm_slot_seg);
    uint64_t array_part = (uint64_t)narrays * sizeof(struct crpm_slot_region);
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

int crpm_write_slot(crpm_container *c, uint64_t epoch, uint64_t user_id, uint64_t nphys,
                    crpm_region *regs, int nregs, crpm_seg **segs)
{
    uint64_t body = 0;
    uint32_t nsaved = 0;
    for (int i = 0; i < nregs; i++) {
        if (!regs[i].prot.elem_size)
            continue; /* not protected: not part of this epoch */
        nsaved++;
        body += sizeof(struct crpm_slot_region) +
                crpm_nsegs_for(regs[i].prot.count * regs[i].prot.elem_size, c->sb.segment_size) * sizeof(struct crpm_slot_seg);
    }
    if (sizeof(struct crpm_slot_hdr) + body > c->sb.slot_size)
        return slot_full(c, nsaved, body);
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
    char *p = buf + sizeof *h;
    for (int i = 0; i < nregs; i++) {
        uint64_t bytes = regs[i].prot.count * regs[i].prot.elem_size;
        if (!regs[i].prot.elem_size)
            continue;
        struct crpm_slot_region r = {regs[i].id, regs[i].prot.type_code, regs[i].prot.elem_size, regs[i].prot.count,
                                     crpm_nsegs_for(bytes, c->sb.segment_size)};
        memcpy(p, &r, sizeof r);
        p += sizeof r;
        for (uint64_t k = 0; k < r.nsegs; k++) {
            struct crpm_slot_seg s = {{segs[i][k].phys[0], segs[i][k].phys[1]}, segs[i][k].state};
            memcpy(p, &s, sizeof s);
            p += sizeof s;
        }
    }
    h->crc = crpm_meta_crc(buf, total, 0);
    crpm_persist_copy(&c->media, c->media.base + c->sb.slot_offset[epoch % 2], buf, total);
    free(buf);
    return CRPM_SUCCESS;
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

/* Parses slot `epoch % 2` into *out (allocated).  Returns CRPM_ERR_CORRUPT
 * with a message when the slot is not a valid description of `epoch`. */
int crpm_parse_slot(crpm_container *c, uint64_t epoch, crpm_region **out, int *nout, uint64_t *user_id,
                      uint64_t *nphys)
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
    if (!regs)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    const char *p = base + sizeof h, *end = p + h.body_size;
    int rc = CRPM_SUCCESS;
    uint32_t i;
    for (i = 0; i < h.nregions && rc == 0; i++) {
        struct crpm_slot_region r;
        if ((size_t)(end - p) < sizeof r) { rc = -1; break; }
        memcpy(&r, p, sizeof r);
        p += sizeof r;
        if (r.elem_size == 0 || r.count > UINT64_MAX / r.elem_size ||
            r.nsegs != crpm_nsegs_for(r.count * r.elem_size, c->sb.segment_size) ||
            r.nsegs > (uint64_t)(end - p) / sizeof(struct crpm_slot_seg)) { rc = -1; break; }
        regs[i].saved = 1;
        regs[i].id = r.id;
        regs[i].type_code = r.type_code;
        regs[i].elem_size = r.elem_size;
        regs[i].count = r.count;
        regs[i].nsegs = r.nsegs;
        regs[i].segs = calloc(r.nsegs ? r.nsegs : 1, sizeof(crpm_seg));
        if (!regs[i].segs) { i++; rc = CRPM_ERR_NOMEM; break; }
        for (uint64_t k = 0; k < r.nsegs; k++) {
            struct crpm_slot_seg s;
            memcpy(&s, p, sizeof s);
            p += sizeof s;
            if (s.state > 2 || (s.state && (s.phys[s.state - 1] >= h.nphys)) ||
                (s.phys[0] != CRPM_NO_PHYS && s.phys[0] >= h.nphys) ||
                (s.phys[1] != CRPM_NO_PHYS && s.phys[1] >= h.nphys) ||
                (s.phys[0] != CRPM_NO_PHYS && s.phys[0] == s.phys[1]))
                rc = -1;
            regs[i].segs[k] = (crpm_seg){{s.phys[0], s.phys[1]}, s.state};
        }
    }
    if (rc == 0 && p != end)
        rc = -1;
    if (rc == 0 && has_duplicate_id(regs, h.nregions))
        rc = -1;
    if (rc) {
        for (uint32_t j = 0; j < i && j < h.nregions; j++)
            free(regs[j].segs);
        free(regs);
        if (rc == CRPM_ERR_NOMEM)
            return crpm_error(rc, "out of memory");
        return crpm_error(CRPM_ERR_CORRUPT, "%s: inconsistent region table in metadata of epoch %llu", c->path,
                          (unsigned long long)epoch);
    }
    *out = regs;
    *nout = (int)h.nregions;
    *user_id = h.user_id;
    *nphys = h.nphys;
    return CRPM_SUCCESS;
}

void crpm_mark_used(crpm_container *c)
{
    if (c->used_cap)
        memset(c->used, 0, c->used_cap);
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
    int n = 0;
    uint64_t user_id = 0, nphys = c->nphys;
    if (epoch > 0) {
        int rc = crpm_parse_slot(c, epoch, &regs, &n, &user_id, &nphys);
        if (rc)
            return rc;
        uint64_t need = c->sb.data_offset + nphys * c->sb.seg_stride;
        if (need > c->media.size) {
            for (int i = 0; i < n; i++) free(regs[i].segs);
            free(regs);
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
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    int m = n;
    /* saved ids sorted with their index: the merge is O(n log n), not O(n^2) */
    int64_t *byid = malloc((size_t)(n ? n : 1) * sizeof *byid);
    if (!byid) {
        for (int i = 0; i < n; i++) free(merged[i].segs);
        free(merged);
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
    c->user_id = user_id;
    c->nphys = nphys;
    c->generation++;
    int rc = ensure_used_cap(c, nphys);
    if (rc)
        return rc;
    crpm_mark_used(c);
    /* a physical segment referenced twice would let one epoch overwrite another */
    uint64_t refs = 0, marked = 0;
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
        int rc = c->media.ops->resize(&c->media, bytes);
        if (rc)
            return rc;
    }
    c->nphys = (c->media.size - c->sb.data_offset) / c->sb.seg_stride;
    return ensure_used_cap(c, c->nphys);
}


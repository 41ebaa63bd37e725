/* Damage for the integrity tests: one bit flipped in a chosen part of a
 * container file (a rank's container, a partner copy or a parity container:
 * all are containers), located through the format layer, so that each kind
 * hits what it names.  Header-only (damage_tool.c, fuzz_restart.c).
 *
 *   data      a byte of the committed epoch's data
 *   fresh     a byte of data the last checkpoint wrote (its segment is not
 *             the previous epoch's too)
 *   segments  a byte in every data segment of the committed epoch
 *   crc       a CRC32C entry of a committed data chunk
 *   crcs      a CRC32C entry in every committed data segment (a checkpoint
 *             that compares the data finds it unchanged: the damage stays)
 *   chunks    a byte in every CRC chunk of the committed data
 *   super     the superblock (every byte of it is checksummed)
 *   commit    the commit word
 *   slot      the committed epoch's metadata slot (header or body)
 *   any       any byte of the file, classified by where it lies: the
 *             committed epoch's metadata or data (its defined chunks and
 *             their CRC entries), or nothing the committed epoch uses
 *
 * damage_file reports what was hit (DMG_C_*) and, for data, whether the
 * damaged bytes belong to the previous epoch too (a segment the last
 * checkpoint did not change). */
#ifndef CRPM_TEST_DAMAGE_H
#define CRPM_TEST_DAMAGE_H
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "container.h"

enum { DMG_C_NONE, DMG_C_DATA, DMG_C_META }; /* what a flip hit */
static const char *const dmg_class_names[] = {"none", "data", "meta"};
enum { DMG_DATA, DMG_FRESH, DMG_SEGMENTS, DMG_CRC, DMG_CRCS, DMG_CHUNKS, DMG_SUPER, DMG_COMMIT, DMG_SLOT, DMG_ANY,
       DMG_NKINDS };
static const char *const dmg_names[DMG_NKINDS] = {"data", "fresh", "segments", "crc", "crcs", "chunks", "super",
                                                  "commit", "slot", "any"};

static inline int dmg_kind(const char *name)
{
    for (int k = 0; k < DMG_NKINDS; k++)
        if (strcmp(name, dmg_names[k]) == 0)
            return k;
    return -1;
}

/* Whether physical segment phys holds data of the previous epoch as well
 * (a copy the committed checkpoint left unchanged: a region's segment or a
 * pack of small arrays). */
static inline int dmg_in_prev(crpm_container *c, uint32_t phys)
{
    crpm_region *regs = NULL;
    crpm_pack *packs = NULL;
    uint32_t npacks = 0;
    int n = 0, hit = 0;
    uint64_t uid, nphys;
    if (c->epoch < 2 || crpm_parse_slot(c, c->epoch - 1, &regs, &n, &packs, &npacks, &uid, &nphys) != 0)
        return 0;
    for (uint32_t k = 0; k < npacks; k++)
        hit |= packs[k].seg.state && packs[k].seg.phys[packs[k].seg.state - 1] == phys;
    for (int i = 0; i < n; i++) {
        for (uint64_t k = 0; regs[i].pack == CRPM_NO_PACK && k < regs[i].nsegs; k++)
            hit |= regs[i].segs[k].state && regs[i].segs[k].phys[regs[i].segs[k].state - 1] == phys;
        free(regs[i].segs);
    }
    free(regs);
    free(packs);
    return hit;
}

/* The committed copy holding byte off of saved region r: its physical
 * segment and the byte's offset in it; 1 when it has none. */
static inline int dmg_locate(crpm_container *c, const crpm_region *r, uint64_t off, uint32_t *phys, uint64_t *poff)
{
    uint64_t n, base, seg = c->sb.segment_size;
    const crpm_seg *segs = crpm_region_segs(c, r, &n, &base);
    const crpm_seg *s = off / seg < n ? &segs[off / seg] : NULL;
    if (!s || !s->state)
        return 1;
    *phys = s->phys[s->state - 1];
    *poff = base + off % seg;
    return 0;
}

/* The distinct data segments of the committed epoch: physical segment and
 * the bytes its CRC table covers (a region's segment, or a pack).  *n
 * entries, malloc'd. */
static inline void dmg_data_segs(crpm_container *c, uint32_t **phys, uint64_t **len, int *n)
{
    uint64_t seg = c->sb.segment_size, cap = c->npacks;
    for (int i = 0; i < c->nregions; i++)
        cap += c->regions[i].saved && c->regions[i].pack == CRPM_NO_PACK ? c->regions[i].nsegs : 0;
    *phys = malloc(sizeof **phys * (cap + 1));
    *len = malloc(sizeof **len * (cap + 1));
    REQUIRE(*phys && *len, "damage: out of memory");
    *n = 0;
    for (uint32_t k = 0; k < c->npacks; k++)
        if (c->packs[k].seg.state) {
            (*phys)[*n] = c->packs[k].seg.phys[c->packs[k].seg.state - 1];
            (*len)[(*n)++] = c->packs[k].len;
        }
    for (int i = 0; i < c->nregions; i++) {
        const crpm_region *r = &c->regions[i];
        uint64_t b = r->saved ? r->count * r->elem_size : 0;
        for (uint64_t k = 0; b && r->pack == CRPM_NO_PACK && k < r->nsegs; k++)
            if (r->segs[k].state) {
                (*phys)[*n] = r->segs[k].phys[r->segs[k].state - 1];
                (*len)[(*n)++] = b - k * seg < seg ? b - k * seg : seg;
            }
    }
}

/* A random byte of the committed data: region index, byte offset, file offset. */
static inline int dmg_pick_data(crpm_container *c, uint64_t *rng, int *ri, uint64_t *off, uint64_t *foff,
                                uint32_t *phys)
{
    uint64_t total = 0, poff;
    for (int i = 0; i < c->nregions; i++)
        total += c->regions[i].saved ? c->regions[i].count * c->regions[i].elem_size : 0;
    if (!total)
        return 1;
    uint64_t pick = rnd_below(rng, total);
    for (int i = 0; i < c->nregions; i++) {
        const crpm_region *r = &c->regions[i];
        uint64_t b = r->saved ? r->count * r->elem_size : 0;
        if (pick >= b) {
            pick -= b;
            continue;
        }
        if (dmg_locate(c, r, pick, phys, &poff))
            return 1;
        *ri = i;
        *off = pick;
        *foff = c->sb.data_offset + (uint64_t)*phys * c->sb.seg_stride + poff;
        return 0;
    }
    return 1;
}

/* Where byte foff of an intact container lies (DMG_C_*). */
static inline int dmg_classify(crpm_container *c, uint64_t foff, int *in_prev)
{
    int cls = DMG_C_NONE;
    uint64_t seg = c->sb.segment_size, ch = c->sb.crc_chunk;
    struct crpm_slot_hdr h;
    uint64_t sbase = c->sb.slot_offset[c->epoch % 2];
    memcpy(&h, c->media.base + sbase, sizeof h);
    *in_prev = 0;
    if (foff < sizeof(struct crpm_super) || (foff >= CRPM_COMMIT_OFF && foff < CRPM_COMMIT_OFF + 8) ||
        (c->epoch && foff >= sbase && foff < sbase + sizeof h + h.body_size))
        return DMG_C_META;
    uint32_t *ph;
    uint64_t *len;
    int nd;
    dmg_data_segs(c, &ph, &len, &nd);
    for (int i = 0; foff >= c->sb.data_offset && i < nd; i++) {
        uint64_t base = c->sb.data_offset + (uint64_t)ph[i] * c->sb.seg_stride;
        if (foff < base || foff >= base + c->sb.seg_stride)
            continue;
        if (foff < base + len[i] ||
            (ch && foff >= base + seg && foff < base + seg + 4 * ((len[i] + ch - 1) / ch))) {
            cls = DMG_C_DATA;
            *in_prev = dmg_in_prev(c, ph[i]);
        }
    }
    free(ph);
    free(len);
    return cls;
}

/* Flips one random bit as `kind` says; describes it in what.  Returns 0
 * when done, 1 when the file has nothing of that kind (e.g. no data yet).
 * *cls: what it hit; *in_prev: data of the previous epoch too. */
static inline int damage_file(const char *path, int kind, uint64_t *rng, int *cls, int *in_prev, char *what, size_t n)
{
    crpm_open_opts o = {.path = path, .read_only = 1};
    crpm_container *c = NULL;
    *in_prev = 0;
    *cls = kind <= DMG_CHUNKS ? DMG_C_DATA : DMG_C_META;
    REQUIRE(crpm_format_open(&o, &c, NULL) == 0, "damage: cannot open %s: %s", path, crpm_last_error());
    uint64_t foff = 0, off = 0, seg = c->sb.segment_size;
    uint32_t phys = 0;
    int ri = 0, rc = 0;
    unsigned mask = 1u << rnd_below(rng, 8);
    switch (kind) {
    case DMG_DATA:
        rc = dmg_pick_data(c, rng, &ri, &off, &foff, &phys);
        if (rc == 0) {
            *in_prev = dmg_in_prev(c, phys);
            snprintf(what, n, "data of array %d, byte %llu", c->regions[ri].id, (unsigned long long)off);
            check_flip(path, (off_t)foff, mask);
        }
        break;
    case DMG_FRESH: {
        /* a data segment the last checkpoint wrote, at random */
        uint32_t *ph;
        uint64_t *len;
        int nd, nfresh = 0;
        dmg_data_segs(c, &ph, &len, &nd);
        for (int i = 0; i < nd; i++)
            if (!dmg_in_prev(c, ph[i])) {
                ph[nfresh] = ph[i];
                len[nfresh++] = len[i];
            }
        if (!nfresh) {
            rc = 1;
        } else {
            int i = (int)rnd_below(rng, (uint64_t)nfresh);
            uint64_t at = rnd_below(rng, len[i]);
            snprintf(what, n, "data in physical segment %u, byte %llu (written by the last checkpoint)", ph[i],
                     (unsigned long long)at);
            check_flip(path, (off_t)(c->sb.data_offset + (uint64_t)ph[i] * c->sb.seg_stride + at), mask);
        }
        free(ph);
        free(len);
        break;
    }
    case DMG_SEGMENTS:
    case DMG_CRCS:
    case DMG_CHUNKS: {
        uint32_t *ph;
        uint64_t *lens;
        int nd;
        dmg_data_segs(c, &ph, &lens, &nd);
        for (int i = 0; i < nd; i++) {
            uint64_t len = lens[i];
            *in_prev |= dmg_in_prev(c, ph[i]);
            uint64_t at = c->sb.data_offset + (uint64_t)ph[i] * c->sb.seg_stride;
            uint64_t ch = c->sb.crc_chunk ? c->sb.crc_chunk : len;
            if (kind == DMG_CRCS && c->sb.crc_chunk)
                at += seg + 4 * rnd_below(rng, (len + ch - 1) / ch) + rnd_below(rng, 4);
            else if (kind == DMG_SEGMENTS)
                at += rnd_below(rng, len);
            for (uint64_t o = 0; kind == DMG_CHUNKS && o < len; o += ch)
                check_flip(path, (off_t)(at + o + rnd_below(rng, len - o < ch ? len - o : ch)), mask);
            if (kind != DMG_CHUNKS)
                check_flip(path, (off_t)at, mask);
        }
        free(ph);
        free(lens);
        snprintf(what, n, "a %s in each of %d data segments", kind == DMG_CRCS ? "CRC entry"
                                                              : kind == DMG_CHUNKS ? "byte of every chunk" : "byte",
                 nd);
        rc = nd ? 0 : 1;
        break;
    }
    case DMG_CRC:
        rc = dmg_pick_data(c, rng, &ri, &off, &foff, &phys);
        if (rc == 0 && c->sb.crc_chunk) {
            uint64_t poff = foff - c->sb.data_offset - (uint64_t)phys * c->sb.seg_stride, j = poff / c->sb.crc_chunk;
            *in_prev = dmg_in_prev(c, phys);
            foff = c->sb.data_offset + (uint64_t)phys * c->sb.seg_stride + seg + 4 * j + rnd_below(rng, 4);
            snprintf(what, n, "CRC of array %d, chunk %llu", c->regions[ri].id, (unsigned long long)j);
            check_flip(path, (off_t)foff, mask);
        }
        break;
    case DMG_SUPER:
        foff = rnd_below(rng, sizeof(struct crpm_super));
        snprintf(what, n, "superblock byte %llu", (unsigned long long)foff);
        check_flip(path, (off_t)foff, mask);
        break;
    case DMG_COMMIT:
        foff = CRPM_COMMIT_OFF + rnd_below(rng, 8);
        snprintf(what, n, "commit word byte %llu", (unsigned long long)(foff - CRPM_COMMIT_OFF));
        check_flip(path, (off_t)foff, mask);
        break;
    case DMG_SLOT: {
        if (!c->epoch) {
            rc = 1;
            break;
        }
        struct crpm_slot_hdr h;
        uint64_t base = c->sb.slot_offset[c->epoch % 2];
        memcpy(&h, c->media.base + base, sizeof h);
        foff = base + rnd_below(rng, sizeof h + h.body_size);
        snprintf(what, n, "metadata slot of epoch %llu, byte %llu", (unsigned long long)c->epoch,
                 (unsigned long long)(foff - base));
        check_flip(path, (off_t)foff, mask);
        break;
    }
    default: {
        struct stat st;
        REQUIRE(stat(path, &st) == 0 && st.st_size > 0, "damage: %s", path);
        foff = rnd_below(rng, (uint64_t)st.st_size);
        *cls = dmg_classify(c, foff, in_prev);
        snprintf(what, n, "file byte %llu of %llu", (unsigned long long)foff, (unsigned long long)st.st_size);
        check_flip(path, (off_t)foff, mask);
    }
    }
    crpm_format_close(c);
    return rc;
}

#endif

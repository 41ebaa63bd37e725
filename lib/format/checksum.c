/* Data checksums: a CRC32C (ISA-L) per chunk of every physical segment, in
 * the table that follows the segment (layout in format.h).  The engine stores
 * them with the data it writes (crpm_crc_compute / crpm_crc_flush); recovery
 * and reads check them while copying (crpm_copy_saved); crpm_container_verify
 * checks a whole committed epoch in place. */
#include "crc32c.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "container.h"

/* A data chunk's CRC is seeded from the file's nonce and the chunk's place,
 * so a zeroed chunk with a zeroed entry, or a chunk moved with its entry to
 * another place or file, does not check. */
static inline uint32_t chunk_crc(const crpm_container *c, uint32_t phys, uint64_t j, const void *p, uint64_t n)
{
    uint32_t seed = ~((uint32_t)c->sb.nonce ^ (uint32_t)(c->sb.nonce >> 32) ^ (phys * 0x9E3779B1u) ^
                      ((uint32_t)j * 0x85EBCA77u));
    return crpm_crc32c(p, n, seed);
}

/* Bytes of a physical segment: its data, then its CRC table rounded up to a
 * page (64 B for segments below a page, to keep small test files small). */
uint64_t crpm_crc_stride(uint64_t seg, uint64_t chunk)
{
    if (!chunk)
        return seg;
    uint64_t tab = seg / chunk * 4, align = seg >= 4096 ? 4096 : 64;
    return seg + (tab + align - 1) / align * align;
}

uint64_t crpm_crc_chunk_for(uint64_t seg, uint64_t blk)
{
    uint64_t ch = blk > CRPM_CRC_MIN_CHUNK ? blk : CRPM_CRC_MIN_CHUNK;
    return ch < seg ? ch : seg;
}

static uint32_t *crc_table(const crpm_container *c, uint32_t phys)
{
    return (uint32_t *)(c->media.base + c->sb.data_offset + (uint64_t)phys * c->sb.seg_stride + c->sb.segment_size);
}

void crpm_crc_compute(crpm_container *c, uint32_t phys, const char *data, uint64_t len, uint64_t c0, uint64_t c1)
{
    uint64_t ch = c->sb.crc_chunk;
    uint32_t *tab = crc_table(c, phys);
    for (uint64_t j = c0; ch && j < c1; j++) {
        uint64_t o = j * ch, l = len - o < ch ? len - o : ch;
        tab[j] = chunk_crc(c, phys, j, data + o, l);
    }
}

void crpm_crc_flush(crpm_container *c, crpm_media *m, uint32_t phys, uint64_t c0, uint64_t c1)
{
    if (c->sb.crc_chunk && c0 < c1)
        crpm_persist_flush(m, crc_table(c, phys) + c0, (c1 - c0) * sizeof(uint32_t));
}

void crpm_crc_trust_committed(crpm_container *c)
{
    if (c->used_cap)
        memset(c->crc_len, 0, c->used_cap * sizeof *c->crc_len);
    uint64_t seg = c->sb.segment_size;
    for (uint32_t k = 0; k < c->npacks; k++) {
        const crpm_seg *s = &c->packs[k].seg;
        if (s->state && s->phys[s->state - 1] < c->used_cap)
            c->crc_len[s->phys[s->state - 1]] = (uint32_t)c->packs[k].len;
    }
    for (int i = 0; i < c->nregions; i++) {
        const crpm_region *r = &c->regions[i];
        uint64_t bytes = r->count * r->elem_size;
        for (uint64_t k = 0; r->saved && k < r->nsegs; k++) {
            const crpm_seg *s = &r->segs[k];
            if (s->state && s->phys[s->state - 1] < c->used_cap)
                c->crc_len[s->phys[s->state - 1]] = (uint32_t)(bytes - k * seg < seg ? bytes - k * seg : seg);
        }
    }
}

int64_t crpm_crc_check(const crpm_container *c, uint32_t phys, uint64_t off, uint64_t len, uint64_t covered)
{
    uint64_t ch = c->sb.crc_chunk;
    if (!ch || !len)
        return -1;
    const char *src = crpm_seg_addr((crpm_container *)c, phys);
    const uint32_t *tab = crc_table(c, phys);
    for (uint64_t p = off / ch * ch; p < off + len && p < covered; p += ch) {
        uint64_t l = covered - p < ch ? covered - p : ch;
        if (chunk_crc(c, phys, p / ch, src + p, l) != tab[p / ch])
            return (int64_t)p;
    }
    return -1;
}

static int bad_chunk(const crpm_container *c, const crpm_region *r, uint64_t off, uint32_t phys)
{
    return crpm_error(CRPM_ERR_CORRUPT,
                      "%s: checkpoint data is corrupt: array id %d, byte offset %llu (epoch %llu, CRC32C mismatch "
                      "in physical segment %u)",
                      c->path, r->id, (unsigned long long)off, (unsigned long long)c->epoch, phys);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Freshly allocated arrays fault on first touch, one page at a time; asking
 * the kernel to populate the whole range first is cheaper (best effort:
 * kernels before 5.14 say EINVAL and the copy faults as before). */
static void populate(const void *p, uint64_t bytes, int advice)
{
    uintptr_t pg = 4096, lo = ((uintptr_t)p + pg - 1) & ~(pg - 1), hi = ((uintptr_t)p + bytes) & ~(pg - 1);
    if (bytes >= (1u << 20) && hi > lo)
        (void)madvise((void *)lo, hi - lo, advice);
}

/* The same for the arrays, leaving out the pages already there (arrays the
 * application initialised before recovering): populating those walks their
 * page tables again for nothing, ~15% of a recovery into touched memory.
 * mincore is exact for private anonymous memory; for other memory it may
 * report pages present that are not mapped yet, which then fault as before.
 * With huge (config huge_pages, off by default: it changes how the
 * application's memory is mapped), the array's whole 2-MiB pages are first
 * advised huge: the kernel then clears and maps 2 MiB at a time instead of
 * 4 KiB (first touch 8.9-9.5 GB/s instead of 2.8-3.2 here).  Only advice:
 * where transparent huge pages are off, or a 2-MiB page is partly there
 * already, the kernel maps small pages as before.  The advice is given for
 * the whole array first; the population is done part by part, by the
 * workers that copy the parts (page faults in parallel). */
static void advise_huge(void *p, uint64_t bytes)
{
    uintptr_t hp = 2u << 20, lo = ((uintptr_t)p + hp - 1) & ~(hp - 1), hi = ((uintptr_t)p + bytes) & ~(hp - 1);
    if (bytes >= (1u << 20) && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

static void populate_missing(void *p, uint64_t bytes)
{
    unsigned char vec[4096]; /* pages looked at per mincore call */
    uintptr_t pg = 4096, lo = ((uintptr_t)p + pg - 1) & ~(pg - 1), hi = ((uintptr_t)p + bytes) & ~(pg - 1);
    if (bytes < (1u << 20) || hi <= lo)
        return;
    for (uintptr_t w = lo; w < hi; w += sizeof vec * pg) {
        size_t np = (hi - w) / pg < sizeof vec ? (hi - w) / pg : sizeof vec;
        if (mincore((void *)w, np * pg, vec) != 0) {
            populate((void *)w, np * pg, MADV_POPULATE_WRITE);
            continue;
        }
        for (size_t i = 0, j; i < np; i = j) {
            for (j = i; j < np && !(vec[j] & 1); j++)
                ;
            if (j > i)
                (void)madvise((void *)(w + i * pg), (j - i) * pg, MADV_POPULATE_WRITE);
            for (; j < np && (vec[j] & 1); j++)
                ;
        }
    }
}

/* Each piece of a few chunks is copied, then its chunks' CRCs are checked on
 * the copy just written, while it is in L1: the container is read once, and
 * what lands in dst is what was checked even if the file changed meanwhile.
 * Copying 256 MiB into populated memory that way ran at 0.8-1.0x the speed of
 * memcpy alone, where copying 64-KiB pieces and checking them from L2 ran at
 * 0.4-0.5x; 4-KiB pieces of 1-KiB chunks: 10.5-11 GB/s, 1-KiB pieces 7-7.9. */
#define COPY_PIECE 4096u

/* Copies segment k of r (len bytes of physical segment phys) to d, checking
 * each chunk's CRC on the copy. */
static int copy_seg_checked(crpm_container *c, const crpm_region *r, uint64_t off, uint32_t phys, char *d,
                            uint64_t len)
{
    uint64_t ch = c->sb.crc_chunk, piece = ch && ch < COPY_PIECE ? COPY_PIECE / ch * ch : ch;
    const char *src = crpm_seg_addr(c, phys);
    populate(src, len, MADV_POPULATE_READ); /* the container's pages, likewise */
    if (!ch) {
        memcpy(d, src, len);
        return CRPM_SUCCESS;
    }
    const uint32_t *tab = crc_table(c, phys);
    for (uint64_t q = 0, j = 0; q < len; q += piece) {
        uint64_t pl = len - q < piece ? len - q : piece;
        memcpy(d + q, src + q, pl);
        for (uint64_t p = q; p < q + pl; p += ch, j++) {
            uint64_t l = q + pl - p < ch ? q + pl - p : ch;
            if (chunk_crc(c, phys, j, d + p, l) != tab[j])
                return bad_chunk(c, r, off + p, phys);
        }
    }
    return CRPM_SUCCESS;
}

/* A packed region: the chunks of its pack that hold it are copied and
 * checked in a buffer, then its bytes go to dst or, through its kind, to. */
static int copy_packed(crpm_container *c, const crpm_region *r, void *dst, const crpm_array *to)
{
    const crpm_pack *p = &c->packs[r->pack];
    uint64_t bytes = r->count * r->elem_size, ch = c->sb.crc_chunk ? c->sb.crc_chunk : c->sb.segment_size;
    uint64_t lo = r->pack_off / ch * ch, hi = (r->pack_off + bytes + ch - 1) / ch * ch;
    if (hi > p->len)
        hi = p->len;
    uint32_t phys = p->seg.phys[p->seg.state - 1];
    const char *src = crpm_seg_addr(c, phys);
    const uint32_t *tab = crc_table(c, phys);
    char *buf = malloc(hi - lo);
    if (!buf)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    memcpy(buf, src + lo, hi - lo);
    int rc = CRPM_SUCCESS;
    for (uint64_t o = lo; c->sb.crc_chunk && o < hi && rc == 0; o += ch) {
        uint64_t l = hi - o < ch ? hi - o : ch;
        if (chunk_crc(c, phys, o / ch, buf + (o - lo), l) != tab[o / ch])
            rc = bad_chunk(c, r, o > r->pack_off ? o - r->pack_off : 0, phys);
    }
    if (rc == 0 && dst)
        memcpy(dst, buf + (r->pack_off - lo), bytes);
    else if (rc == 0)
        rc = crpm_array_write(to, 0, buf + (r->pack_off - lo), bytes);
    free(buf);
    return rc;
}

void crpm_copy_saved_begin(crpm_container *c, const crpm_region *r, const crpm_array *to)
{
    void *dst = crpm_array_host(to);
    if (dst && r->pack == CRPM_NO_PACK && c->huge_pages)
        advise_huge(dst, r->count * r->elem_size);
}

int crpm_copy_saved_part(crpm_container *c, const crpm_region *r, const crpm_array *to, uint64_t k0, uint64_t k1,
                         char *bounce)
{
    char *dst = crpm_array_host(to);
    if (!crpm_array_bytes(to))
        dst = NULL;
    if (r->pack != CRPM_NO_PACK)
        return copy_packed(c, r, dst, to);
    uint64_t seg = c->sb.segment_size, bytes = r->count * r->elem_size;
    if (k1 > r->nsegs)
        k1 = r->nsegs;
    if (dst && k0 < k1)
        populate_missing(dst + k0 * seg, (k1 * seg < bytes ? k1 * seg : bytes) - k0 * seg);
    int rc = CRPM_SUCCESS;
    for (uint64_t k = k0; k < k1 && rc == 0; k++) {
        uint64_t off = k * seg, len = bytes - off < seg ? bytes - off : seg;
        const crpm_seg *s = &r->segs[k];
        if (s->state == 0)
            return crpm_error(CRPM_ERR_CORRUPT, "%s: region %d segment %llu has no data", c->path, r->id,
                              (unsigned long long)k);
        rc = copy_seg_checked(c, r, off, s->phys[s->state - 1], dst ? dst + off : bounce, len);
        if (rc == 0 && !dst)
            rc = crpm_array_write(to, off, bounce, len);
    }
    return rc;
}

/* Copies saved region r (committed epoch) into host memory dst.  Arrays of
 * other memory kinds are recovered in parts (crpm_copy_saved_part, through
 * a bounce buffer). */
int crpm_copy_saved(crpm_container *c, const crpm_region *r, void *dst)
{
    crpm_array host = {r->id, r->type_code, r->elem_size, r->count, dst, NULL, NULL};
    uint64_t seg = c->sb.segment_size, bytes = r->count * r->elem_size;
    char *bounce = NULL;
    if (!dst && r->pack == CRPM_NO_PACK && bytes && !(bounce = malloc(bytes < seg ? bytes : seg)))
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for a %llu-byte segment buffer",
                          (unsigned long long)seg);
    crpm_copy_saved_begin(c, r, &host);
    int rc = crpm_copy_saved_part(c, r, &host, 0, r->pack != CRPM_NO_PACK ? 1 : r->nsegs, bounce);
    free(bounce);
    return rc;
}

typedef struct verify_state {
    FILE *out;
    uint64_t bad, chunks;
    int rc;
    char first[1024];
} verify_state;

/* The first saved region packed in pack k that has bytes in [lo, hi). */
static const crpm_region *packed_in(const crpm_container *c, uint32_t k, uint64_t lo, uint64_t hi)
{
    for (int i = 0; i < c->nregions; i++) {
        const crpm_region *r = &c->regions[i];
        if (r->saved && r->pack == k && r->pack_off < hi && r->pack_off + r->count * r->elem_size > lo)
            return r;
    }
    return NULL;
}

/* Checks the chunks of len bytes of physical segment phys: region r's
 * segment at byte off, or (r NULL) pack k. */
static void verify_seg(const crpm_container *c, const crpm_region *r, uint64_t off, uint32_t k, uint32_t phys,
                       uint64_t len, verify_state *v)
{
    uint64_t ch = c->sb.crc_chunk;
    const char *src = crpm_seg_addr((crpm_container *)c, phys);
    const uint32_t *tab = crc_table(c, phys);
    for (uint64_t p = 0; p < len; p += ch) {
        uint64_t l = len - p < ch ? len - p : ch;
        v->chunks++;
        if (chunk_crc(c, phys, p / ch, src + p, l) == tab[p / ch])
            continue;
        const crpm_region *who = r ? r : packed_in(c, k, p, p + l);
        uint64_t at = r ? off + p : who && who->pack_off < p ? p - who->pack_off : 0;
        if (v->out && v->bad < 100 && who)
            fprintf(v->out, "  BAD: array id %d, byte offset %llu (%llu bytes), physical segment %u\n", who->id,
                    (unsigned long long)at, (unsigned long long)l, phys);
        else if (v->out && v->bad < 100)
            fprintf(v->out, "  BAD: unused bytes %llu..%llu of pack %u, physical segment %u\n",
                    (unsigned long long)p, (unsigned long long)(p + l), k, phys);
        if (!v->bad++) {
            v->rc = who ? bad_chunk(c, who, at, phys)
                        : crpm_error(CRPM_ERR_CORRUPT, "%s: checkpoint data is corrupt: pack %u, bytes %llu..%llu "
                                     "(epoch %llu, CRC32C mismatch in physical segment %u)", c->path, k,
                                     (unsigned long long)p, (unsigned long long)(p + l),
                                     (unsigned long long)c->epoch, phys);
            snprintf(v->first, sizeof v->first, "%s", crpm_last_error());
        }
    }
}

int crpm_container_verify(const crpm_container *c, FILE *out)
{
    uint64_t seg = c->sb.segment_size, ch = c->sb.crc_chunk;
    verify_state v = {out, 0, 0, CRPM_SUCCESS, ""};
    if (!ch) {
        if (out)
            fprintf(out, "data checksums: none (container created without them)\n");
        return CRPM_SUCCESS;
    }
    for (int i = 0; i < c->nregions; i++) {
        const crpm_region *r = &c->regions[i];
        uint64_t bytes = r->count * r->elem_size;
        for (uint64_t k = 0; r->saved && k < r->nsegs; k++) {
            uint64_t off = k * seg, len = bytes - off < seg ? bytes - off : seg;
            const crpm_seg *s = &r->segs[k];
            if (s->state) /* state 0 is reported by recovery as missing data */
                verify_seg(c, r, off, 0, s->phys[s->state - 1], len, &v);
        }
    }
    for (uint32_t k = 0; k < c->npacks; k++)
        verify_seg(c, NULL, 0, k, c->packs[k].seg.phys[c->packs[k].seg.state - 1], c->packs[k].len, &v);
    if (out)
        fprintf(out, "data checksums: %llu chunks of %llu bytes checked, %llu bad\n", (unsigned long long)v.chunks,
                (unsigned long long)ch, (unsigned long long)v.bad);
    if (v.bad)
        crpm_error(CRPM_ERR_CORRUPT, "%llu corrupt data chunk(s); the first: %s", (unsigned long long)v.bad, v.first);
    return v.rc;
}


/* Bytes [off, off+len) of a saved region, every chunk they touch checked
 * on the media before its part is copied (a packed region's chunks hold
 * other arrays' bytes too, so checking the copy alone would not do). */
int crpm_copy_saved_range(crpm_container *c, const crpm_region *r, uint64_t off, uint64_t len, void *dst)
{
    uint64_t seg = c->sb.segment_size, bytes = r->count * r->elem_size, ch = c->sb.crc_chunk, n, base;
    if (off > bytes || len > bytes - off)
        return crpm_error(CRPM_ERR_RANGE, "%s: bytes %llu..%llu are outside array %d (%llu bytes)", c->path,
                          (unsigned long long)off, (unsigned long long)(off + len), r->id, (unsigned long long)bytes);
    const crpm_seg *segs = crpm_region_segs(c, r, &n, &base);
    char *d = dst;
    for (uint64_t pos = off; pos < off + len;) {
        uint64_t k = pos / seg, soff = k * seg, slen = bytes - soff < seg ? bytes - soff : seg;
        if (k >= n || segs[k].state == 0)
            return crpm_error(CRPM_ERR_CORRUPT, "%s: region %d segment %llu has no data", c->path, r->id,
                              (unsigned long long)k);
        uint32_t phys = segs[k].phys[segs[k].state - 1];
        const char *src = crpm_seg_addr(c, phys);
        /* bytes of the physical segment the CRC table covers */
        uint64_t used = r->pack != CRPM_NO_PACK ? c->packs[r->pack].len : slen;
        uint64_t end = off + len < soff + slen ? off + len : soff + slen; /* this segment's part */
        if (!ch) {
            memcpy(d + (pos - off), src + base + (pos - soff), end - pos);
            pos = end;
            continue;
        }
        const uint32_t *tab = crc_table(c, phys);
        while (pos < end) {
            uint64_t p = base + (pos - soff), j = p / ch, c0 = j * ch, cl = used - c0 < ch ? used - c0 : ch;
            uint64_t take = (c0 + cl - p < end - pos ? c0 + cl - p : end - pos);
            if (chunk_crc(c, phys, j, src + c0, cl) != tab[j])
                return bad_chunk(c, r, pos, phys);
            memcpy(d + (pos - off), src + p, take);
            pos += take;
        }
    }
    return CRPM_SUCCESS;
}

/* Container format: creation, validation on open, metadata slots, the commit
 * word, rollback, and read-only access to the committed state. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <isa-l/crc.h>
#include <sys/random.h>
#include "container.h"
#include "persist_file.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ISA-L's CRC32C; metadata checksums chain calls from seed 0. */
static uint32_t crc(const void *p, size_t n, uint32_t seed)
{
    const unsigned char *b = p;
    while (n) {
        int k = n > (1u << 30) ? 1 << 30 : (int)n;
        seed = crc32_iscsi((unsigned char *)b, k, seed);
        b += k;
        n -= (size_t)k;
    }
    return seed;
}

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static uint32_t super_crc(const struct crpm_super *sb)
{
    struct crpm_super t = *sb;
    t.crc = 0;
    return crc(&t, sizeof t, 0);
}

uint64_t crpm_commit_word(uint64_t nonce, uint64_t epoch, int in_progress)
{
    uint64_t low = (epoch & 0xffffffffull) | ((uint64_t)(in_progress != 0) << 32);
    unsigned char buf[16];
    memcpy(buf, &nonce, 8);
    memcpy(buf + 8, &low, 8);
    uint64_t check = crc(buf, sizeof buf, 0) & 0x7fffffffu;
    return low | (check << 33);
}

static volatile uint64_t *commit_ptr(crpm_container *c)
{
    return (volatile uint64_t *)(c->media.base + CRPM_COMMIT_OFF);
}

int crpm_write_commit(crpm_container *c, uint64_t epoch, int in_progress)
{
    if (epoch > 0xffffffffull)
        return crpm_error(CRPM_ERR_RANGE, "%s: epoch counter exhausted", c->path);
    /* one aligned 8-byte store: failure-atomic on every platform libpmem supports */
    *commit_ptr(c) = crpm_commit_word(c->sb.nonce, epoch, in_progress);
    crpm_persist_flush(&c->media, (const void *)commit_ptr(c), 8);
    crpm_persist_drain(&c->media);
    c->epoch = epoch;
    c->in_progress = in_progress;
    return CRPM_SUCCESS;
}

char *crpm_seg_addr(crpm_container *c, uint32_t phys)
{
    return c->media.base + c->sb.data_offset + (uint64_t)phys * c->sb.seg_stride;
}

static uint64_t nsegs_for(uint64_t bytes, uint64_t seg)
{
    return (bytes + seg - 1) / seg;
}

void crpm_free_regions(crpm_container *c)
{
    for (int i = 0; i < c->nregions; i++) {
        free(c->regions[i].segs);
        free(c->regions[i].wbits);
        free(c->regions[i].stale);
    }
    free(c->regions);
    c->regions = NULL;
    c->nregions = c->cap_regions = 0;
    crpm_idindex_invalidate(&c->rindex);
}

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
        if (!regs[i].p_elem_size)
            continue; /* not protected: not part of this epoch */
        nsaved++;
        body += sizeof(struct crpm_slot_region) +
                nsegs_for(regs[i].p_count * regs[i].p_elem_size, c->sb.segment_size) * sizeof(struct crpm_slot_seg);
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
    h->timestamp_ns = now_ns();
    h->nphys = nphys;
    h->body_size = body;
    h->nregions = nsaved;
    char *p = buf + sizeof *h;
    for (int i = 0; i < nregs; i++) {
        uint64_t bytes = regs[i].p_count * regs[i].p_elem_size;
        if (!regs[i].p_elem_size)
            continue;
        struct crpm_slot_region r = {regs[i].id, regs[i].p_type_code, regs[i].p_elem_size, regs[i].p_count,
                                     nsegs_for(bytes, c->sb.segment_size)};
        memcpy(p, &r, sizeof r);
        p += sizeof r;
        for (uint64_t k = 0; k < r.nsegs; k++) {
            struct crpm_slot_seg s = {{segs[i][k].phys[0], segs[i][k].phys[1]}, segs[i][k].state};
            memcpy(p, &s, sizeof s);
            p += sizeof s;
        }
    }
    h->crc = crc(buf, total, 0);
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
static int parse_slot(crpm_container *c, uint64_t epoch, crpm_region **out, int *nout, uint64_t *user_id,
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
    uint32_t sum = crc(&hz, sizeof hz, 0);
    sum = crc(base + sizeof h, h.body_size, sum);
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
            r.nsegs != nsegs_for(r.count * r.elem_size, c->sb.segment_size) ||
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
        int rc = parse_slot(c, epoch, &regs, &n, &user_id, &nphys);
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
        if (!old->p_elem_size)
            continue; /* not protected */
        int j = find_sorted(byid, n, old->id);
        if (j < 0)
            j = m;
        if (j == m) {
            memset(&merged[m], 0, sizeof merged[m]);
            merged[m].id = old->id;
            m++;
        }
        merged[j].ptr = old->ptr;
        merged[j].p_type_code = old->p_type_code;
        merged[j].p_elem_size = old->p_elem_size;
        merged[j].p_count = old->p_count;
        /* the registration stays; what the copies hold is now unknown */
        merged[j].tracked = old->tracked;
        merged[j].untracked = old->untracked;
        merged[j].wbits = old->wbits;
        merged[j].stale = old->stale;
        merged[j].bits_cap = old->bits_cap;
        merged[j].stale_valid = 0;
        merged[j].rescan_all = 1;
        old->wbits = old->stale = NULL;
    }
    free(byid);
    crpm_free_regions(c);
    c->regions = merged;
    c->nregions = m;
    c->cap_regions = cap;
    c->user_id = user_id;
    c->nphys = nphys;
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

/* ---- open / create ------------------------------------------------------- */

static uint64_t random_nonce(void)
{
    uint64_t x = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, &x, sizeof x) != (ssize_t)sizeof x)
            x = 0;
        close(fd);
    }
    return x ^ now_ns() ^ ((uint64_t)getpid() << 32);
}

static uint64_t slot_size_for(uint64_t seg, uint64_t asked)
{
    if (asked)
        return (asked + 4095) & ~4095ull;
    /* room for 64 GiB of protected data (a segment table of 64 KiB to 8 MiB)
     * and for CRPM_SLOT_ARRAYS arrays; the file is sparse there, so only the
     * metadata actually written takes storage */
    uint64_t s = (1ull << 36) / seg * sizeof(struct crpm_slot_seg) + 65536;
    if (s > CRPM_DEFAULT_SLOT) s = CRPM_DEFAULT_SLOT;
    s += (uint64_t)CRPM_SLOT_ARRAYS * (sizeof(struct crpm_slot_region) + sizeof(struct crpm_slot_seg));
    return (s + 4095) & ~4095ull;
}

static int read_commit(crpm_container *c);

static int create_file(crpm_container *c, const crpm_open_opts *o, uint64_t seg, uint64_t blk)
{
    struct crpm_super *sb = &c->sb;
    memset(sb, 0, sizeof *sb);
    memcpy(sb->magic, CRPM_MAGIC, 8);
    sb->version = CRPM_FORMAT_VERSION;
    sb->super_size = sizeof *sb;
    sb->segment_size = seg;
    sb->block_size = blk;
    sb->crc_chunk = o->no_checksums ? 0 : crpm_crc_chunk_for(seg, blk);
    sb->seg_stride = crpm_crc_stride(seg, sb->crc_chunk);
    sb->slot_size = slot_size_for(seg, o->slot_size);
    sb->slot_offset[0] = CRPM_HDR_SIZE;
    sb->slot_offset[1] = CRPM_HDR_SIZE + sb->slot_size;
    sb->data_offset = CRPM_HDR_SIZE + 2 * sb->slot_size;
    sb->nonce = random_nonce();
    sb->created_ns = now_ns();
    sb->rank = o->rank;
    sb->nranks = o->nranks;
    if (o->job_name)
        snprintf(sb->job_name, sizeof sb->job_name, "%s", o->job_name);
    if (o->run_id) {
        memcpy(sb->run_id, o->run_id, CRPM_RUN_ID_LEN);
    } else if (getrandom(sb->run_id, CRPM_RUN_ID_LEN, 0) != CRPM_RUN_ID_LEN) {
        uint64_t a = random_nonce(), b = random_nonce() ^ sb->nonce;
        memcpy(sb->run_id, &a, 8);
        memcpy(sb->run_id + 8, &b, 8);
    }
    sb->crc = super_crc(sb);

    char *hdr = calloc(1, CRPM_HDR_SIZE);
    if (!hdr)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    memcpy(hdr, sb, sizeof *sb);
    uint64_t w = crpm_commit_word(sb->nonce, 0, 0);
    memcpy(hdr + CRPM_COMMIT_OFF, &w, sizeof w);
    int rc = crpm_persist_create_file(o->path, sb->data_offset, hdr, CRPM_HDR_SIZE);
    free(hdr);
    if (rc)
        return rc;
    rc = c->media.ops->map(&c->media, o->path);
    if (rc == 0)
        rc = read_commit(c);
    return rc;
}

static int validate_super(crpm_container *c, const crpm_open_opts *o, uint64_t seg, uint64_t blk)
{
    struct crpm_super *sb = &c->sb;
    if (c->media.size < CRPM_HDR_SIZE) {
        size_t n = c->media.size < 8 ? c->media.size : 8;
        if (memcmp(c->media.base, CRPM_MAGIC, n) != 0)
            return crpm_error(CRPM_ERR_FORMAT, "%s is not a libcrpm container (bad magic)", c->path);
        return crpm_error(CRPM_ERR_TRUNCATED, "%s is truncated (%zu bytes, header needs %u)", c->path,
                          c->media.size, CRPM_HDR_SIZE);
    }
    memcpy(sb, c->media.base, sizeof *sb);
    if (memcmp(sb->magic, CRPM_MAGIC, 8) != 0)
        return crpm_error(CRPM_ERR_FORMAT, "%s is not a libcrpm container (bad magic)", c->path);
    if (sb->version == 1)
        return crpm_error(CRPM_ERR_VERSION,
                          "%s has format version 1 (an older libcrpm, without data checksums); this library reads "
                          "version %u only: restart it with the libcrpm that wrote it, or start afresh",
                          c->path, CRPM_FORMAT_VERSION);
    if (sb->version != CRPM_FORMAT_VERSION)
        return crpm_error(CRPM_ERR_VERSION, "%s has format version %u; this library reads version %u",
                          c->path, sb->version, CRPM_FORMAT_VERSION);
    if (sb->super_size != sizeof *sb || super_crc(sb) != sb->crc)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: superblock checksum mismatch", c->path);
    if (!is_pow2(sb->segment_size) || !is_pow2(sb->block_size) || sb->block_size > sb->segment_size ||
        (sb->crc_chunk && (!is_pow2(sb->crc_chunk) || sb->crc_chunk < sb->block_size ||
                           sb->crc_chunk > sb->segment_size)) ||
        sb->seg_stride != crpm_crc_stride(sb->segment_size, sb->crc_chunk) ||
        sb->slot_offset[0] != CRPM_HDR_SIZE || sb->slot_offset[1] != CRPM_HDR_SIZE + sb->slot_size ||
        sb->data_offset != CRPM_HDR_SIZE + 2 * sb->slot_size)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: superblock describes an impossible layout", c->path);
    if ((seg && seg != sb->segment_size) || (blk && blk != sb->block_size))
        return crpm_error(CRPM_ERR_GEOMETRY,
                          "%s was written with segment_size %llu and block_size %llu, configured %llu and %llu",
                          c->path, (unsigned long long)sb->segment_size, (unsigned long long)sb->block_size,
                          (unsigned long long)(seg ? seg : sb->segment_size),
                          (unsigned long long)(blk ? blk : sb->block_size));
    if (o->job_name && strncmp(o->job_name, sb->job_name, sizeof sb->job_name) != 0)
        return crpm_error(CRPM_ERR_IDENTITY, "%s belongs to job '%.*s', not '%s'", c->path,
                          (int)sizeof sb->job_name, sb->job_name, o->job_name);
    if (o->nranks > 0 && sb->nranks != o->nranks)
        return crpm_error(CRPM_ERR_NRANKS, "%s was written by a job of %d ranks, this job has %d", c->path,
                          sb->nranks, o->nranks);
    if (o->nranks > 0 && sb->rank != o->rank)
        return crpm_error(CRPM_ERR_IDENTITY, "%s belongs to rank %d, not rank %d", c->path, sb->rank, o->rank);
    if (o->run_id && memcmp(o->run_id, sb->run_id, CRPM_RUN_ID_LEN) != 0) {
        char have[2 * CRPM_RUN_ID_LEN + 1], want[2 * CRPM_RUN_ID_LEN + 1];
        for (int i = 0; i < CRPM_RUN_ID_LEN; i++) {
            snprintf(have + 2 * i, 3, "%02x", sb->run_id[i]);
            snprintf(want + 2 * i, 3, "%02x", o->run_id[i]);
        }
        return crpm_error(CRPM_ERR_IDENTITY, "%s belongs to another run of job '%.*s' (run %s, this run is %s)",
                          c->path, (int)sizeof sb->job_name, sb->job_name, have, want);
    }
    if (c->media.size < sb->data_offset)
        return crpm_error(CRPM_ERR_TRUNCATED, "%s is truncated (%zu bytes, metadata needs %llu)", c->path,
                          c->media.size, (unsigned long long)sb->data_offset);
    return CRPM_SUCCESS;
}

static int read_commit(crpm_container *c)
{
    uint64_t w = *commit_ptr(c);
    uint64_t epoch = w & 0xffffffffull;
    int flag = (int)((w >> 32) & 1);
    if (crpm_commit_word(c->sb.nonce, epoch, flag) != w)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: commit record is corrupt", c->path);
    c->epoch = epoch;
    c->in_progress = flag;
    return CRPM_SUCCESS;
}

static void compute_prev(crpm_container *c)
{
    c->prev_ok = 0;
    if (c->in_progress || c->epoch == 0)
        return;
    if (c->epoch == 1) {
        c->prev_ok = 1; /* epoch 0: the empty state */
        return;
    }
    crpm_region *regs;
    int n;
    uint64_t uid, nphys;
    if (parse_slot(c, c->epoch - 1, &regs, &n, &uid, &nphys) == 0) {
        c->prev_ok = c->sb.data_offset + nphys * c->sb.seg_stride <= c->media.size;
        for (int i = 0; i < n; i++) free(regs[i].segs);
        free(regs);
    }
    crpm_error(0, "%s", ""); /* a missing previous slot is normal, not an error */
}

/* ---- read-only view of a container a live job may be writing (tools) -------
 * While the commit word names epoch e, slot e % 2 and the copies e uses are
 * not written: checkpoint e+1 writes the other slot and other copies.  So a
 * view taken between two reads of the commit word that name the same epoch
 * is one epoch, provided slot e % 2 was not rewritten meanwhile (a relaunch
 * rolling back to e-1 and committing e again), which its header tells. */
#define VIEW_TRIES 100

static uint64_t load_commit_word(const crpm_container *c)
{
    return __atomic_load_n((const uint64_t *)(c->media.base + CRPM_COMMIT_OFF), __ATOMIC_ACQUIRE);
}

static void slot_header(const crpm_container *c, uint64_t epoch, unsigned char *out)
{
    memcpy(out, c->media.base + c->sb.slot_offset[epoch % 2], sizeof c->view_hdr);
}

/* The committed epoch and its slot are still those of the view. */
static int view_unchanged(const crpm_container *c)
{
    unsigned char h[sizeof c->view_hdr];
    __atomic_thread_fence(__ATOMIC_ACQUIRE); /* the copies above are done before */
    uint64_t w = load_commit_word(c);
    if ((w & 0xffffffffull) != c->epoch)
        return 0;
    if (c->epoch == 0)
        return 1;
    slot_header(c, c->epoch, h);
    return memcmp(h, c->view_hdr, sizeof h) == 0;
}

static int view_copy(crpm_container *c)
{
    uint64_t total = 0;
    free(c->snap);
    free(c->snap_off);
    c->snap = NULL;
    c->snap_off = calloc((size_t)c->nregions + 1, sizeof *c->snap_off);
    for (int i = 0; c->snap_off && i < c->nregions; i++) {
        c->snap_off[i] = total;
        total += c->regions[i].saved ? c->regions[i].count * c->regions[i].elem_size : 0;
    }
    char *snap = c->snap_off ? malloc(total ? total : 1) : NULL;
    if (!snap)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory for a %llu-byte copy of %s", (unsigned long long)total,
                          c->path);
    int rc = CRPM_SUCCESS;
    for (int i = 0; i < c->nregions && rc == 0; i++)
        if (c->regions[i].saved)
            rc = crpm_copy_saved(c, &c->regions[i], snap + c->snap_off[i]);
    if (rc) {
        free(snap);
        return rc;
    }
    c->snap = snap; /* kept only once the view is known to be one epoch */
    return CRPM_SUCCESS;
}

/* Loads the committed epoch's metadata (and data) as one view, retrying
 * while a live job commits.  A failed check counts only when the commit word
 * did not move: a healthy live container is never reported corrupt. */
static int view_load(crpm_container *c, int with_data)
{
    struct timespec pause = {0, 1000000};
    for (int attempt = 1;; attempt++) {
        free(c->snap); /* describes the previous view */
        c->snap = NULL;
        int rc = c->media.ops->resize(&c->media, 0); /* follow a growing file */
        if (rc)
            return rc;
        uint64_t w1 = load_commit_word(c), epoch = w1 & 0xffffffffull;
        int flag = (int)((w1 >> 32) & 1);
        if (crpm_commit_word(c->sb.nonce, epoch, flag) != w1)
            return crpm_error(CRPM_ERR_CORRUPT, "%s: commit record is corrupt", c->path);
        c->epoch = epoch;
        c->in_progress = flag;
        c->nphys = (c->media.size - c->sb.data_offset) / c->sb.segment_size;
        if (epoch)
            slot_header(c, epoch, c->view_hdr);
        rc = crpm_load_slot(c, epoch);
        if (rc == 0)
            compute_prev(c);
        if (rc == 0 && with_data)
            rc = view_copy(c);
        if (view_unchanged(c)) {
            if (load_commit_word(c) != w1)
                c->prev_ok = 0; /* a checkpoint started: epoch-1 may be going */
            return rc;
        }
        free(c->snap);
        c->snap = NULL;
        if (attempt == VIEW_TRIES)
            return crpm_error(CRPM_ERR_IO,
                              "%s kept changing while it was read (%d attempts): a job is committing "
                              "checkpoints faster than they can be copied; try again",
                              c->path, VIEW_TRIES);
        crpm_error_clear();
        nanosleep(&pause, NULL);
        if (pause.tv_nsec < 16000000)
            pause.tv_nsec *= 2;
    }
}

int crpm_container_snapshot(crpm_container *c)
{
    if (!c->read_only)
        return crpm_error(CRPM_ERR_STATE, "%s: a snapshot is taken of a read-only container", c->path);
    return view_load(c, 1);
}

int crpm_format_open(const crpm_open_opts *o, crpm_container **out, int *created)
{
    *out = NULL;
    if (created) *created = 0;
    if (!o || !o->path || !*o->path)
        return crpm_error(CRPM_ERR_INVAL, "container path missing");
    uint64_t seg = o->segment_size, blk = o->block_size;
    if ((seg && (!is_pow2(seg) || seg < 64 || seg > (1ull << 30))) ||
        (blk && (!is_pow2(blk) || blk < 8)) || (seg && blk && blk > seg))
        return crpm_error(CRPM_ERR_INVAL,
                          "segment_size (%llu) and block_size (%llu) must be powers of two with "
                          "8 <= block_size <= segment_size <= 1 GiB",
                          (unsigned long long)seg, (unsigned long long)blk);
    if (o->job_name && strlen(o->job_name) >= CRPM_JOB_MAX)
        return crpm_error(CRPM_ERR_INVAL, "job name longer than %d characters", CRPM_JOB_MAX - 1);
    crpm_container *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(o->path))) {
        free(c);
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    c->media.ops = o->read_only ? &crpm_backend_readonly : o->backend ? o->backend : crpm_backend_for(o->persistence);
    c->read_only = o->read_only;
    /* a FIFO must not block us, a device must not be mapped */
    int rc, fd, missing;
    rc = crpm_open_regular(o->path, O_RDONLY, &fd, &missing);
    if (rc == 0)
        close(fd);
    else if (!missing)
        goto fail_nomap;
    if (missing) {
        if (!o->create || o->read_only) {
            rc = crpm_error(CRPM_ERR_IO, "container %s does not exist", o->path);
            goto fail_nomap;
        }
        if (!seg) seg = CRPM_DEFAULT_SEGMENT;
        if (!blk) blk = CRPM_DEFAULT_BLOCK;
        if (blk > seg) {
            rc = crpm_error(CRPM_ERR_INVAL, "block_size %llu exceeds segment_size %llu", (unsigned long long)blk,
                            (unsigned long long)seg);
            goto fail_nomap;
        }
        rc = create_file(c, o, seg, blk);
        if (rc)
            goto fail;
        if (created) *created = 1;
    } else {
        rc = c->media.ops->map(&c->media, o->path);
        if (rc)
            goto fail_nomap;
        rc = validate_super(c, o, seg, blk);
        if (rc == 0 && o->read_only) {
            rc = view_load(c, 0);
            if (rc)
                goto fail;
            *out = c;
            return CRPM_SUCCESS;
        }
        if (rc == 0)
            rc = read_commit(c);
    }
    if (rc == 0) {
        c->nphys = (c->media.size - c->sb.data_offset) / c->sb.seg_stride;
        rc = crpm_load_slot(c, c->epoch);
    }
    if (rc)
        goto fail;
    compute_prev(c);
    *out = c;
    return CRPM_SUCCESS;
fail:
    if (c->media.base)
        c->media.ops->unmap(&c->media);
fail_nomap:
    crpm_free_regions(c);
    free(c->used);
    free(c->reserved);
    free(c->snap);
    free(c->snap_off);
    crpm_idindex_free(&c->rindex);
    free(c->crc_len);
    free(c->path);
    free(c);
    return rc;
}

void crpm_format_close(crpm_container *c)
{
    if (!c)
        return;
    if (c->media.base)
        c->media.ops->unmap(&c->media);
    crpm_free_regions(c);
    free(c->used);
    free(c->reserved);
    free(c->snap);
    free(c->snap_off);
    crpm_idindex_free(&c->rindex);
    free(c->crc_len);
    free(c->path);
    free(c);
}

uint64_t crpm_container_epoch(const crpm_container *c) { return c->epoch; }
int crpm_container_prev_available(const crpm_container *c) { return c->prev_ok; }
uint64_t crpm_container_user_id(const crpm_container *c) { return c->user_id; }
crpm_media *crpm_container_media(crpm_container *c) { return &c->media; }
uint64_t crpm_container_segment_size(const crpm_container *c) { return c->sb.segment_size; }
uint64_t crpm_container_block_size(const crpm_container *c) { return c->sb.block_size; }
int crpm_container_has_checksums(const crpm_container *c) { return c->sb.crc_chunk != 0; }

void crpm_container_run_id(const crpm_container *c, uint8_t out[CRPM_RUN_ID_LEN])
{
    memcpy(out, c->sb.run_id, CRPM_RUN_ID_LEN);
}

void crpm_container_identity(const crpm_container *c, char *job, size_t len, int32_t *rank, int32_t *nranks)
{
    if (job && len)
        snprintf(job, len, "%.*s", (int)sizeof c->sb.job_name, c->sb.job_name);
    if (rank)
        *rank = c->sb.rank;
    if (nranks)
        *nranks = c->sb.nranks;
}

void crpm_container_set_hook(crpm_container *c, crpm_hook_fn fn, void *arg)
{
    c->hook = fn;
    c->hook_arg = arg;
}

int crpm_container_rollback(crpm_container *c)
{
    if (c->read_only)
        return crpm_error(CRPM_ERR_STATE, "%s is open read-only", c->path);
    if (!c->prev_ok)
        return crpm_error(CRPM_ERR_EPOCH, "%s: epoch %llu is no longer recoverable", c->path,
                          (unsigned long long)(c->epoch ? c->epoch - 1 : 0));
    uint64_t target = c->epoch - 1;
    int rc = crpm_write_commit(c, target, 0);
    if (rc)
        return rc;
    c->prev_ok = 0;
    return crpm_load_slot(c, target);
}

/* ---- read-only access to the committed state ----------------------------- */

static int saved_index(const crpm_container *c, int idx)
{
    for (int i = 0, k = 0; i < c->nregions; i++)
        if (c->regions[i].saved && k++ == idx)
            return i;
    return -1;
}

int crpm_container_nregions(const crpm_container *c)
{
    int n = 0;
    for (int i = 0; i < c->nregions; i++)
        n += c->regions[i].saved;
    return n;
}

int crpm_container_region(const crpm_container *c, int idx, crpm_array *out)
{
    int i = saved_index(c, idx);
    if (i < 0)
        return crpm_error(CRPM_ERR_RANGE, "region index %d out of range", idx);
    const crpm_region *r = &c->regions[i];
    *out = (crpm_array){r->id, r->type_code, r->elem_size, r->count, NULL, NULL};
    return CRPM_SUCCESS;
}

int crpm_container_read_region(const crpm_container *c, int idx, void *dst)
{
    int i = saved_index(c, idx);
    if (i < 0)
        return crpm_error(CRPM_ERR_RANGE, "region index %d out of range", idx);
    const crpm_region *r = &c->regions[i];
    if (c->snap) {
        memcpy(dst, c->snap + c->snap_off[i], r->count * r->elem_size);
        return CRPM_SUCCESS;
    }
    int rc = crpm_copy_saved((crpm_container *)c, r, dst);
    if (rc == 0 && c->read_only && !view_unchanged(c))
        return crpm_error(CRPM_ERR_IO, "%s: a job committed another checkpoint while array %d was read; "
                          "read it again", c->path, r->id);
    return rc;
}

/* ---- inspection ------------------------------------------------------------ */

int crpm_inspect_file(const char *path, FILE *out)
{
    return crpm_inspect_file_verify(path, out, 0);
}

/* crpm_container_verify, but on a container a live job may be writing a bad
 * chunk counts only if the committed epoch did not move while it was read. */
static int verify_view(crpm_container *c, FILE *out)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = CRPM_SUCCESS;
    for (int attempt = 1;; attempt++) {
        FILE *mem = open_memstream(&buf, &len);
        if (!mem)
            return crpm_container_verify(c, out);
        rc = crpm_container_verify(c, mem);
        fclose(mem);
        if (rc == 0 || !c->read_only || view_unchanged(c) || attempt == VIEW_TRIES)
            break;
        free(buf);
        buf = NULL;
        if ((rc = view_load(c, 0)) != 0)
            break;
        fprintf(out, "verified:       epoch %llu (the running job committed it while the one above was read)\n",
                (unsigned long long)c->epoch);
    }
    if (buf)
        fputs(buf, out);
    free(buf);
    return rc;
}

int crpm_inspect_file_verify(const char *path, FILE *out, int verify)
{
    crpm_open_opts o = {.path = path, .read_only = 1};
    crpm_container *c;
    int rc = crpm_format_open(&o, &c, NULL);
    if (rc) {
        fprintf(out, "container:      %s\nstatus:         INVALID: %s\n", path, crpm_last_error());
        return rc;
    }
    const struct crpm_super *sb = &c->sb;
    fprintf(out, "container:      %s\n", path);
    fprintf(out, "format version: %u\n", sb->version);
    fprintf(out, "job:            %.*s\n", (int)sizeof sb->job_name, sb->job_name);
    fprintf(out, "rank:           %d of %d\n", sb->rank, sb->nranks);
    fprintf(out, "segment size:   %llu\n", (unsigned long long)sb->segment_size);
    fprintf(out, "block size:     %llu\n", (unsigned long long)sb->block_size);
    if (sb->crc_chunk)
        fprintf(out, "data checksums: CRC32C per %llu bytes\n", (unsigned long long)sb->crc_chunk);
    else
        fprintf(out, "data checksums: none\n");
    fprintf(out, "run id:         ");
    for (int i = 0; i < CRPM_RUN_ID_LEN; i++)
        fprintf(out, "%02x", sb->run_id[i]);
    fputc('\n', out);
    fprintf(out, "file size:      %zu (metadata %llu, %llu data segments)\n", c->media.size,
            (unsigned long long)sb->data_offset, (unsigned long long)c->nphys);
    fprintf(out, "superblock:     checksum ok\n");
    fprintf(out, "commit record:  checksum ok, epoch %llu%s\n", (unsigned long long)c->epoch,
            c->in_progress ? " (a later checkpoint was in progress)" : "");
    fprintf(out, "committed:      epoch %llu, checkpoint id %llu, metadata checksum ok\n",
            (unsigned long long)c->epoch, (unsigned long long)c->user_id);
    fprintf(out, "previous epoch: %s\n", c->prev_ok ? "recoverable" : "not recoverable");
    uint64_t total = 0, backups = 0;
    int n = crpm_container_nregions(c);
    fprintf(out, "regions:        %d\n", n);
    for (int i = 0; i < c->nregions; i++) {
        crpm_region *r = &c->regions[i];
        if (!r->saved) continue;
        uint64_t nb = 0;
        for (uint64_t k = 0; k < r->nsegs; k++)
            nb += r->segs[k].phys[0] != CRPM_NO_PHYS && r->segs[k].phys[1] != CRPM_NO_PHYS;
        backups += nb;
        total += r->count * r->elem_size;
        fprintf(out, "  id %-6d type %-4d elem %-6llu count %-12llu bytes %-12llu segments %llu (%llu with backup)\n",
                r->id, r->type_code, (unsigned long long)r->elem_size, (unsigned long long)r->count,
                (unsigned long long)(r->count * r->elem_size), (unsigned long long)r->nsegs,
                (unsigned long long)nb);
    }
    fprintf(out, "protected:      %llu bytes\n", (unsigned long long)total);
    if (verify && (rc = verify_view(c, out)) != 0) {
        fprintf(out, "status:         CORRUPT: %s\n", crpm_last_error());
        crpm_format_close(c);
        return rc;
    }
    fprintf(out, "status:         OK\n");
    crpm_format_close(c);
    return CRPM_SUCCESS;
}

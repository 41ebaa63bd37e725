/* Container format: creation, validation on open, the commit word and
 * rollback.  Metadata slots are in slot.c, read-only views and inspection in
 * view.c, data checksums in checksum.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "crc32c.h"
#include <sys/random.h>
#include "container.h"
#include "persist_file.h"

uint64_t crpm_fmt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Metadata checksums: CRC32C chained from seed 0. */
uint32_t crpm_meta_crc(const void *p, size_t n, uint32_t seed) { return crpm_crc32c(p, n, seed); }

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static uint32_t super_crc(const struct crpm_super *sb)
{
    struct crpm_super t = *sb;
    t.crc = 0;
    return crpm_meta_crc(&t, sizeof t, 0);
}

uint64_t crpm_commit_word(uint64_t nonce, uint64_t epoch, int in_progress)
{
    uint64_t low = (epoch & 0xffffffffull) | ((uint64_t)(in_progress != 0) << 32);
    unsigned char buf[16];
    memcpy(buf, &nonce, 8);
    memcpy(buf + 8, &low, 8);
    uint64_t check = crpm_meta_crc(buf, sizeof buf, 0) & 0x7fffffffu;
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

uint64_t crpm_nsegs_for(uint64_t bytes, uint64_t seg)
{
    return (bytes + seg - 1) / seg;
}

void crpm_free_regions(crpm_container *c)
{
    for (int i = 0; i < c->nregions; i++) {
        free(c->regions[i].segs);
    }
    free(c->regions);
    c->regions = NULL;
    c->nregions = c->cap_regions = 0;
    crpm_idindex_invalidate(&c->rindex);
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
    return x ^ crpm_fmt_now_ns() ^ ((uint64_t)getpid() << 32);
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
    s += (uint64_t)CRPM_SLOT_ARRAYS * (sizeof(struct crpm_slot_region) + sizeof(struct crpm_slot_pack));
    return (s + 4095) & ~4095ull;
}

static int read_commit(crpm_container *c);

static uint32_t layout_crc(const struct crpm_layout_rec *r)
{
    struct crpm_layout_rec t = *r;
    t.crc = 0;
    return crpm_meta_crc(&t, sizeof t, 0);
}

static void layout_put(char *hdr, const crpm_layout *l)
{
    struct crpm_layout_rec r;
    memset(&r, 0, sizeof r);
    memcpy(r.magic, CRPM_LAYOUT_MAGIC, 8);
    r.size = sizeof r;
    r.role = (uint32_t)l->role;
    r.node_size = l->node_size;
    r.node = l->node;
    r.nnodes = l->nnodes;
    r.group_size = l->group_size;
    r.l3_parity = l->l3_parity;
    r.crc = layout_crc(&r);
    memcpy(hdr + CRPM_LAYOUT_OFF, &r, sizeof r);
}

/* The record in a header page: 1, 0 (none: a file made before records
 * existed has zeros there) or CRPM_ERR_CORRUPT. */
static int layout_get(const char *hdr, const char *path, crpm_layout *l)
{
    struct crpm_layout_rec r;
    memcpy(&r, hdr + CRPM_LAYOUT_OFF, sizeof r);
    if (memcmp(r.magic, CRPM_LAYOUT_MAGIC, 8) != 0)
        return 0;
    if (r.size != sizeof r || layout_crc(&r) != r.crc)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: layout record checksum mismatch", path);
    *l = (crpm_layout){(int)r.role, r.node_size, r.node, r.nnodes, r.group_size, r.l3_parity};
    return 1;
}

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
    sb->created_ns = crpm_fmt_now_ns();
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
    if (o->layout)
        layout_put(hdr, o->layout);
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
    /* a byte of the magic or a bit of the version that changed is damage
     * (restart repairs it from redundancy), not another kind of file */
    int magic_off = 0;
    for (int i = 0; i < 8; i++)
        magic_off += sb->magic[i] != CRPM_MAGIC[i];
    int version_hit = 0; /* the checksum holds for a version this library reads: the field was hit */
    for (uint32_t v = CRPM_FORMAT_OLDEST; magic_off == 0 && !version_hit && v <= CRPM_FORMAT_VERSION; v++) {
        struct crpm_super t = *sb;
        t.version = v;
        version_hit = v != sb->version && t.super_size == sizeof t && super_crc(&t) == t.crc;
    }
    if (magic_off == 1 || version_hit)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: superblock checksum mismatch (its %s is damaged)", c->path,
                          magic_off ? "magic" : "format version");
    if (magic_off)
        return crpm_error(CRPM_ERR_FORMAT, "%s is not a libcrpm container (bad magic)", c->path);
    if (sb->version == 1)
        return crpm_error(CRPM_ERR_VERSION,
                          "%s has format version 1 (an older libcrpm, without data checksums); this library reads "
                          "versions %u to %u: restart it with the libcrpm that wrote it",
                          c->path, CRPM_FORMAT_OLDEST, CRPM_FORMAT_VERSION);
    /* far beyond any version there is: the field was overwritten, not written by a newer library */
    if (sb->version == 0 || sb->version > CRPM_FORMAT_VERSION + 64)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: superblock damaged (format version %u)", c->path, sb->version);
    if (sb->version < CRPM_FORMAT_OLDEST || sb->version > CRPM_FORMAT_VERSION)
        return crpm_error(CRPM_ERR_VERSION, "%s has format version %u; this library reads versions %u to %u",
                          c->path, sb->version, CRPM_FORMAT_OLDEST, CRPM_FORMAT_VERSION);
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

void crpm_compute_prev(crpm_container *c)
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
    if (crpm_parse_slot(c, c->epoch - 1, &regs, &n, NULL, NULL, &uid, &nphys) == 0) {
        c->prev_ok = c->sb.data_offset + nphys * c->sb.seg_stride <= c->media.size;
        for (int i = 0; i < n; i++) free(regs[i].segs);
        free(regs);
    }
    crpm_error(0, "%s", ""); /* a missing previous slot is normal, not an error */
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
#ifndef CRPM_TEST_HOOKS
    if (o->no_checksums) /* a benchmark baseline: never in a shipped library */
        return crpm_error(CRPM_ERR_NOTSUP, "no_checksums: a benchmark baseline, only in builds configured with "
                          "-DCRPM_TEST_HOOKS=ON");
#endif
    crpm_container *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(o->path))) {
        free(c);
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    c->media.ops = o->read_only ? &crpm_backend_readonly : o->backend ? o->backend : crpm_backend_for(o->persistence);
    c->read_only = o->read_only;
    c->huge_pages = o->huge_pages;
    /* a FIFO must not block us, a device must not be mapped */
    int rc, fd, missing;
    rc = crpm_open_regular(o->path, O_RDONLY, &fd, &missing);
    if (rc == 0)
        close(fd);
    else if (!missing)
        goto fail;
    if (missing) {
        if (!o->create || o->read_only) {
            rc = crpm_error(CRPM_ERR_IO, "container %s does not exist", o->path);
            goto fail;
        }
        if (!seg) seg = CRPM_DEFAULT_SEGMENT;
        if (!blk) blk = CRPM_DEFAULT_BLOCK;
        if (blk > seg) {
            rc = crpm_error(CRPM_ERR_INVAL, "block_size %llu exceeds segment_size %llu", (unsigned long long)blk,
                            (unsigned long long)seg);
            goto fail;
        }
        rc = create_file(c, o, seg, blk);
        if (rc)
            goto fail;
        if (created) *created = 1;
    } else {
        rc = c->media.ops->map(&c->media, o->path);
        if (rc)
            goto fail;
        rc = validate_super(c, o, seg, blk);
        if (rc == 0 && o->read_only) {
            rc = crpm_view_load(c, 0);
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
    crpm_compute_prev(c);
    *out = c;
    return CRPM_SUCCESS;
fail:
    crpm_format_close(c);
    return rc;
}

void crpm_format_close(crpm_container *c)
{
    if (!c)
        return;
    if (c->media.base)
        c->media.ops->unmap(&c->media);
    crpm_free_regions(c);
    free(c->packs);
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
uint32_t crpm_container_levels(const crpm_container *c) { return c->levels; }
void crpm_container_note_levels(crpm_container *c, uint32_t levels) { c->levels_add |= levels; }
crpm_media *crpm_container_media(crpm_container *c) { return &c->media; }
uint64_t crpm_container_segment_size(const crpm_container *c) { return c->sb.segment_size; }
uint64_t crpm_container_block_size(const crpm_container *c) { return c->sb.block_size; }

int crpm_container_layout(const crpm_container *c, crpm_layout *out)
{
    return layout_get(c->media.base, c->path, out);
}

int crpm_header_read(const char *path, crpm_header_facts *out)
{
    memset(out, 0, sizeof *out);
    int fd, rc = crpm_open_regular(path, O_RDONLY, &fd, NULL);
    if (rc != CRPM_SUCCESS)
        return rc;
    char *hdr = calloc(1, CRPM_HDR_SIZE);
    ssize_t n = hdr ? pread(fd, hdr, CRPM_HDR_SIZE, 0) : -1;
    close(fd);
    struct crpm_super sb;
    if (!hdr)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    if (n >= 8 && memcmp(hdr, CRPM_MAGIC, 8) != 0)
        rc = crpm_error(CRPM_ERR_FORMAT, "%s is not a libcrpm container (bad magic)", path);
    else if (n < (ssize_t)CRPM_HDR_SIZE)
        rc = crpm_error(CRPM_ERR_TRUNCATED, "%s is truncated (%zd bytes, header needs %u)", path, n, CRPM_HDR_SIZE);
    if (rc == 0) {
        memcpy(&sb, hdr, sizeof sb);
        if (sb.version != CRPM_FORMAT_VERSION)
            rc = crpm_error(CRPM_ERR_VERSION, "%s has format version %u; this library reads version %u", path,
                            sb.version, CRPM_FORMAT_VERSION);
        else if (sb.super_size != sizeof sb || super_crc(&sb) != sb.crc)
            rc = crpm_error(CRPM_ERR_CORRUPT, "%s: superblock checksum mismatch", path);
    }
    if (rc == 0) {
        uint64_t w;
        memcpy(&w, hdr + CRPM_COMMIT_OFF, sizeof w);
        uint64_t epoch = w & 0xffffffffull;
        int flag = (int)((w >> 32) & 1);
        if (crpm_commit_word(sb.nonce, epoch, flag) != w)
            rc = crpm_error(CRPM_ERR_CORRUPT, "%s: commit record is corrupt", path);
        out->epoch = epoch;
        out->in_progress = flag;
    }
    if (rc == 0) {
        snprintf(out->job, sizeof out->job, "%.*s", (int)sizeof sb.job_name, sb.job_name);
        out->rank = sb.rank;
        out->nranks = sb.nranks;
        int lr = layout_get(hdr, path, &out->layout);
        out->has_layout = lr < 0 ? -1 : lr;
        if (lr < 0)
            crpm_error_clear(); /* the caller decides what a damaged record means */
    }
    free(hdr);
    return rc;
}

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

void crpm_container_set_remap_hook(crpm_container *c, void (*fn)(void *arg), void *arg)
{
    c->before_remap = fn;
    c->remap_arg = arg;
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


/* Rebuilt containers (level 3) are made at epoch 1 and then given the job's
 * epoch.  Not failure-atomic: only for a file under a temporary name that
 * is renamed into place afterwards. */
int crpm_container_renumber(crpm_container *c, uint64_t epoch)
{
    if (c->read_only || !c->epoch || c->in_progress || !epoch)
        return crpm_error(CRPM_ERR_STATE, "%s: cannot renumber epoch %llu", c->path, (unsigned long long)c->epoch);
    /* the committed layout, as it is: the regions' descriptions are their saved ones */
    crpm_seg_plan lay = {calloc((size_t)c->nregions + 1, sizeof *lay.segs),
                       calloc((size_t)c->nregions + 1, sizeof *lay.pack),
                       calloc((size_t)c->nregions + 1, sizeof *lay.pack_off), c->packs, c->npacks};
    crpm_region *regs = calloc((size_t)c->nregions + 1, sizeof *regs);
    int rc = lay.segs && lay.pack && lay.pack_off && regs ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < c->nregions; i++) {
        const crpm_region *r = &c->regions[i];
        regs[i].id = r->id;
        if (r->saved)
            regs[i].prot = (crpm_array){r->id, r->type_code, r->elem_size, r->count, NULL, NULL, NULL};
        lay.segs[i] = r->segs;
        lay.pack[i] = r->pack;
        lay.pack_off[i] = r->pack_off;
    }
    if (rc == 0)
        rc = crpm_write_slot(c, epoch, c->user_id, c->nphys, regs, c->nregions, &lay);
    free(regs);
    free(lay.segs);
    free(lay.pack);
    free(lay.pack_off);
    if (rc == 0) {
        crpm_persist_drain(&c->media);
        rc = crpm_write_commit(c, epoch, 0);
    }
    if (rc == 0) {
        c->prev_ok = 0;
        rc = crpm_load_slot(c, epoch);
    }
    return rc;
}

int crpm_container_prev_user_id(crpm_container *c, uint64_t *user_id)
{
    if (!c->prev_ok || c->epoch < 2)
        return crpm_error(CRPM_ERR_EPOCH, "%s: no previous epoch", c->path);
    crpm_region *regs = NULL;
    int n = 0;
    uint64_t nphys = 0;
    int rc = crpm_parse_slot(c, c->epoch - 1, &regs, &n, NULL, NULL, user_id, &nphys);
    for (int i = 0; rc == 0 && i < n; i++)
        free(regs[i].segs);
    free(regs);
    return rc;
}

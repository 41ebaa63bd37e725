/* Read-only access to the committed state: the consistent view tools take
 * of a container a live job may be writing, region reads, inspection. */
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
int crpm_view_load(crpm_container *c, int with_data)
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
            crpm_compute_prev(c);
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
    return crpm_view_load(c, 1);
}

/* ---- an older committed epoch of a live container --------------------------
 * Checkpoint e+1 writes neither slot e % 2 nor the copies e uses, so epoch
 * e stays readable from them after e+1 committed; the view shares c's
 * mapping and geometry and has e's region table of its own. */
int crpm_container_epoch_view(crpm_container *c, uint64_t epoch, crpm_container **view)
{
    *view = NULL;
    crpm_container *v = calloc(1, sizeof *v);
    if (!v)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    v->media = c->media;
    v->path = c->path;
    v->sb = c->sb;
    v->epoch = epoch;
    v->nphys = c->nphys;
    int rc = epoch ? crpm_parse_slot(c, epoch, &v->regions, &v->nregions, &v->packs, &v->npacks, &v->user_id,
                                     &(uint64_t){0})
                   : crpm_error(CRPM_ERR_NOCKPT, "%s: no committed epoch", c->path);
    if (rc != 0) {
        free(v);
        return rc;
    }
    v->cap_regions = v->nregions;
    *view = v;
    return CRPM_SUCCESS;
}

void crpm_container_view_free(crpm_container *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->nregions; i++)
        free(v->regions[i].segs);
    free(v->regions);
    free(v->packs);
    free(v);
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
    *out = (crpm_array){r->id, r->type_code, r->elem_size, r->count, NULL, NULL, NULL};
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
        if ((rc = crpm_view_load(c, 0)) != 0)
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
        if (r->pack != CRPM_NO_PACK) {
            total += r->count * r->elem_size;
            fprintf(out, "  id %-6d type %-4d elem %-6llu count %-12llu bytes %-12llu packed: pack %u, offset %llu\n",
                    r->id, r->type_code, (unsigned long long)r->elem_size, (unsigned long long)r->count,
                    (unsigned long long)(r->count * r->elem_size), r->pack, (unsigned long long)r->pack_off);
            continue;
        }
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
    if (c->npacks) {
        uint64_t used = 0, nb = 0;
        for (uint32_t k = 0; k < c->npacks; k++) {
            used += c->packs[k].len;
            nb += c->packs[k].seg.phys[0] != CRPM_NO_PHYS && c->packs[k].seg.phys[1] != CRPM_NO_PHYS;
        }
        fprintf(out, "packs:          %u segments shared by small arrays, %llu bytes in use (%llu with backup)\n",
                c->npacks, (unsigned long long)used, (unsigned long long)nb);
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

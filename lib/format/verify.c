/* Restart-time data checks (container.h): the committed epoch and the one
 * before it, each physical segment read once.
 *
 * Recovery checks every chunk while it copies (crpm_copy_saved), but that
 * runs after the restart decision; a restart must know beforehand whether a
 * container can serve, or it would propagate damage to the copies that
 * could repair it.  A segment that both epochs share (unchanged by the
 * committed checkpoint) holds the same bytes for both: the committed copies
 * of epoch e-1 are never written by epoch e, so its verdict is reused. */
#include <stdio.h>
#include <stdlib.h>
#include "container.h"

typedef struct seen {
    uint8_t *st;   /* per physical segment: 0 unchecked, 1 intact, 2 damaged */
    uint64_t *len; /* bytes checked there */
    uint64_t n;
} seen;

/* Whether the saved regions of `epoch` are intact; the first damage is
 * described in msg. */
/* One segment's committed copy: 1 when its first len bytes are intact
 * (checked once, the verdict kept in sn); the damage goes to msg as `what`. */
static int seg_intact(const crpm_container *c, const crpm_seg *s, uint64_t len, uint64_t epoch, seen *sn,
                      const char *what, uint64_t off, char *msg, size_t msgn)
{
    uint32_t phys = s->state ? s->phys[s->state - 1] : CRPM_NO_PHYS;
    if (phys == CRPM_NO_PHYS || phys >= sn->n) {
        snprintf(msg, msgn, "%s: checkpoint data of epoch %llu is incomplete: %s has no data at byte offset %llu",
                 c->path, (unsigned long long)epoch, what, (unsigned long long)off);
        return 0;
    }
    if (sn->st[phys] && sn->len[phys] == len) {
        if (sn->st[phys] == 1)
            return 1;
        snprintf(msg, msgn, "%s: checkpoint data of epoch %llu is corrupt: %s, bytes %llu to %llu (a segment it "
                 "shares with the committed epoch fails its CRC32C check)", c->path, (unsigned long long)epoch, what,
                 (unsigned long long)off, (unsigned long long)(off + len));
        return 0;
    }
    int64_t bad = crpm_crc_check(c, phys, 0, len, len);
    sn->st[phys] = bad < 0 ? 1 : 2;
    sn->len[phys] = len;
    if (bad >= 0) {
        snprintf(msg, msgn, "%s: checkpoint data of epoch %llu is corrupt: %s, byte offset %llu (CRC32C mismatch "
                 "in physical segment %u)", c->path, (unsigned long long)epoch, what,
                 (unsigned long long)(off + (uint64_t)bad), phys);
        return 0;
    }
    return 1;
}

/* Whether the saved regions and packs of `epoch` are intact; the first
 * damage is described in msg.  A pack (small arrays sharing a segment) is
 * checked whole, over the bytes its CRC table covers. */
static int regions_intact(const crpm_container *c, const crpm_region *regs, int nregs, const crpm_pack *packs,
                          uint32_t npacks, uint64_t epoch, seen *sn, char *msg, size_t msgn)
{
    uint64_t seg = c->sb.segment_size;
    char what[64];
    for (uint32_t k = 0; k < npacks; k++) {
        snprintf(what, sizeof what, "the pack of small arrays %u", k);
        if (!seg_intact(c, &packs[k].seg, packs[k].len, epoch, sn, what, 0, msg, msgn))
            return 0;
    }
    for (int i = 0; i < nregs; i++) {
        const crpm_region *r = &regs[i];
        uint64_t bytes = r->count * r->elem_size;
        snprintf(what, sizeof what, "array id %d", r->id);
        for (uint64_t k = 0; r->saved && r->pack == CRPM_NO_PACK && k < r->nsegs; k++) {
            uint64_t off = k * seg, len = bytes - off < seg ? bytes - off : seg;
            if (!seg_intact(c, &r->segs[k], len, epoch, sn, what, off, msg, msgn))
                return 0;
        }
    }
    return 1;
}

int crpm_container_verify_epochs(crpm_container *c, int *cur_bad, int *prev_bad, char *msg, size_t msgn)
{
    *cur_bad = *prev_bad = 0;
    if (msgn)
        msg[0] = '\0';
    if (!c->sb.crc_chunk || !c->epoch)
        return CRPM_SUCCESS;
    /* every segment an epoch that opened can reference lies within the file */
    uint64_t nseg = c->media.size > c->sb.data_offset ? (c->media.size - c->sb.data_offset) / c->sb.seg_stride : 0;
    seen sn = {calloc(nseg + 1, 1), calloc(nseg + 1, sizeof(uint64_t)), nseg};
    if (!sn.st || !sn.len) {
        free(sn.st);
        free(sn.len);
        return crpm_error(CRPM_ERR_NOMEM, "%s: out of memory for its data check", c->path);
    }
    char pmsg[512] = "";
    *cur_bad = !regions_intact(c, c->regions, c->nregions, c->packs, c->npacks, c->epoch, &sn, msg, msgn);
    int rc = CRPM_SUCCESS;
    if (c->prev_ok && c->epoch >= 2) {
        crpm_region *regs = NULL;
        crpm_pack *packs = NULL;
        uint32_t npacks = 0;
        int n = 0;
        uint64_t uid = 0, nphys = 0;
        rc = crpm_parse_slot(c, c->epoch - 1, &regs, &n, &packs, &npacks, &uid, &nphys);
        if (rc == 0) {
            *prev_bad = !regions_intact(c, regs, n, packs, npacks, c->epoch - 1, &sn, pmsg, sizeof pmsg);
        } else if (rc != CRPM_ERR_NOMEM) {
            *prev_bad = 1; /* open found it valid: it changed since */
            snprintf(pmsg, sizeof pmsg, "%s", crpm_last_error());
            rc = CRPM_SUCCESS;
        }
        for (int i = 0; i < n; i++)
            free(regs[i].segs);
        free(regs);
        free(packs);
    }
    if (!*cur_bad && *prev_bad && msgn)
        snprintf(msg, msgn, "%s", pmsg);
    free(sn.st);
    free(sn.len);
    return rc;
}

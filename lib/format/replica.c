/* Level-2 partner copies (container.h).  The data ranges are stored by the
 * caller (level 2 receives them from the owner straight into the mapping);
 * this file keeps the replay failure-atomic. */
#include <string.h>
#include "container.h"

int crpm_replica_begin(crpm_container *r, uint64_t size)
{
    if (r->read_only)
        return crpm_error(CRPM_ERR_STATE, "%s is open read-only", r->path);
    int rc = CRPM_SUCCESS;
    /* The owner marked "in progress" before overwriting copies epoch-1 needs;
     * the copy does the same before its copies are overwritten. */
    if (!r->in_progress)
        rc = crpm_write_commit(r, r->epoch, 1);
    r->prev_ok = 0;
    if (rc == 0 && size > r->media.size)
        rc = r->media.ops->resize(&r->media, size);
    if (rc == 0 && size < r->media.size)
        rc = crpm_error(CRPM_ERR_FORMAT, "%s: the owner's container (%llu bytes) is smaller than its copy (%llu)",
                        r->path, (unsigned long long)size, (unsigned long long)r->media.size);
    return rc;
}

int crpm_replica_commit(crpm_container *r, uint64_t epoch)
{
    crpm_persist_drain(&r->media);
    int rc = crpm_write_commit(r, epoch, 0);
    if (rc != 0)
        return rc;
    r->nphys = (r->media.size - r->sb.data_offset) / r->sb.seg_stride;
    rc = crpm_load_slot(r, epoch);
    if (rc == 0)
        crpm_compute_prev(r);
    return rc;
}

uint64_t crpm_media_word(const crpm_media *m)
{
    uint64_t w;
    memcpy(&w, m->base + CRPM_WORD_OFF, 8);
    return w;
}

void crpm_media_set_word(crpm_media *m, uint64_t word)
{
    crpm_persist_drain(m); /* everything before lands first */
    *(volatile uint64_t *)(void *)(m->base + CRPM_WORD_OFF) = word;
    crpm_persist_flush(m, m->base + CRPM_WORD_OFF, 8);
    crpm_persist_drain(m);
}
